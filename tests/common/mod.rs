//! Shared helpers for integration tests: corpus files by their decompressed
//! names, through the library's corpus cache (`target/corpus-cache/files`).

#![allow(dead_code)]

use std::path::PathBuf;

pub use btfkit::corpus::corpus_dir;

/// A readable path of corpus file `rel` (named without `.zst`). Panics when the
/// corpus does not have it: a test that needs it must not pass silently.
pub fn corpus_file(rel: &str) -> PathBuf {
    btfkit::corpus::Corpus::open_default().file(rel).unwrap_or_else(|e| panic!("{e}"))
}
