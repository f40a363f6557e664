//! Scaffolding for btfkit's own tests, fuzz targets, benchmarks and the
//! `conformance` replay: the corpus and its cache, the fuzz targets'
//! bodies and input format, and the slower twins of fast paths that tests
//! compare them with. Not part of the library's API: hidden from its
//! documentation, and free to change with any commit.

pub mod corpus;
pub mod elf_open;
pub mod fuzz_input;

use crate::btf::Btf;
use crate::dedup::{DedupError, Options};

/// [`crate::dedup::dedup`] with the reference pass looking reference types
/// up in the candidate table as libbpf does, not in its own index: the
/// same result, which tests and fuzzing check.
pub fn dedup_through_table(btf: &Btf, opts: &Options) -> Result<Btf, DedupError> {
    crate::dedup::dedup_through_table(btf, opts)
}

/// libbpf's signature hash of every own type, the value each pass looks
/// its candidates up by (for the `hot` micro-benchmark).
pub fn signature_hashes(btf: &Btf) -> Vec<u64> {
    crate::dedup::signature_hashes(btf)
}
