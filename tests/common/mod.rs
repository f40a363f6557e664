//! Shared helpers for the corpus tests: where the corpus is, and a cache that
//! decompresses its `.zst` files once (the same layout as `btfkit conformance`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The corpus folder: $BTFKIT_CORPUS, else ../shared/corpus beside the crate.
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("BTFKIT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus")))
}

pub fn cache_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/corpus-cache"))
}

/// A readable path for corpus file `rel` (its decompressed name): the file
/// itself, or `rel.zst` decompressed into target/corpus-cache/files/<rel>.
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
    let data = std::fs::read(&zst).unwrap_or_else(|e| panic!("{}: corpus file missing: {e}", zst.display()));
    let mut dec = zstd::stream::read::Decoder::new(&data[..]).expect("zstd decoder");
    dec.window_log_max(31).expect("zstd window");
    let mut bytes = Vec::new();
    std::io::copy(&mut dec, &mut bytes).unwrap_or_else(|e| panic!("{}: cannot decompress: {e}", zst.display()));
    std::fs::create_dir_all(out.parent().unwrap()).expect("cache dir");
    btfkit::output::write_atomic(&out, &bytes).expect("write cache file");
    out
}

pub fn read_corpus(rel: &str) -> Vec<u8> {
    let p = corpus_file(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One TSV manifest as rows of column name -> value.
pub fn read_manifest(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().expect("empty manifest").split('\t').map(String::from).collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| header.iter().cloned().zip(l.split('\t').map(String::from)).collect())
        .collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit")).collect()
}
