//! Shared helpers for the integration tests: corpus files (decompressed into
//! the harness cache, target/corpus-cache/files, on first use) and running
//! the built binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The corpus folder: $BTFKIT_CORPUS, else ../shared/corpus beside the crate.
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("BTFKIT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../shared/corpus"))
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("BTFKIT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("target/corpus-cache"))
}

/// A readable path for corpus file `rel` (its decompressed name).
pub fn corpus_file(rel: &str) -> PathBuf {
    let plain = corpus_dir().join(rel);
    if plain.exists() {
        return plain;
    }
    let out = cache_dir().join("files").join(rel);
    if out.exists() {
        return out;
    }
    let zst = corpus_dir().join(format!("{rel}.zst"));
    let data = std::fs::read(&zst).unwrap_or_else(|e| panic!("{}: {e}", zst.display()));
    let mut dec = zstd::stream::read::Decoder::new(&data[..]).unwrap();
    dec.window_log_max(31).unwrap();
    let mut bytes = Vec::new();
    std::io::copy(&mut dec, &mut bytes).unwrap();
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let tmp = out.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &out).unwrap();
    out
}

pub fn btfkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_btfkit"))
}

pub fn run(args: &[&str]) -> Output {
    btfkit().args(args).output().expect("run btfkit")
}

/// A fresh scratch folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = cache_dir()
        .join("test-scratch")
        .join(format!("{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
