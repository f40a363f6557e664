//! Shared helpers for integration tests: corpus files, decompressed on first
//! use into the harness cache (the same layout as `btfkit conformance`'s
//! `Cache`: `target/corpus-cache/files/<relative path>`).

#![allow(dead_code)]

use std::path::PathBuf;

/// The corpus folder: $BTFKIT_CORPUS, else ../shared/corpus beside the crate.
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("BTFKIT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus")))
}

fn cache_dir() -> PathBuf {
    std::env::var_os("BTFKIT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/corpus-cache")))
}

/// A readable path of corpus file `rel` (named without `.zst`). Panics when the
/// corpus does not have it: a test that needs it must not pass silently.
pub fn corpus_file(rel: &str) -> PathBuf {
    // Tests run on threads of one process: the temporary names of
    // write_atomic (per process) would collide, so decompress one at a time.
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let corpus = corpus_dir();
    let plain = corpus.join(rel);
    if plain.exists() {
        return plain;
    }
    let out = cache_dir().join("files").join(rel);
    if out.exists() {
        return out;
    }
    let zst = corpus.join(format!("{rel}.zst"));
    let data = std::fs::read(&zst).unwrap_or_else(|e| panic!("{}: corpus file missing: {e}", zst.display()));
    let mut dec = zstd::stream::read::Decoder::new(&data[..]).expect("zstd decoder");
    dec.window_log_max(31).expect("zstd window");
    let mut bytes = Vec::new();
    std::io::copy(&mut dec, &mut bytes).unwrap_or_else(|e| panic!("{}: cannot decompress: {e}", zst.display()));
    std::fs::create_dir_all(out.parent().unwrap()).expect("cache directory");
    btfkit::output::write_atomic(&out, &bytes).expect("writing the cache");
    out
}
