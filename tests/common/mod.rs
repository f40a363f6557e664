//! Shared by integration tests: corpus files, decompressed on first use into
//! the harness cache (target/corpus-cache/files/<rel>), never in place.

#![allow(dead_code)]

use std::path::PathBuf;

/// The corpus folder: $BTFKIT_CORPUS, else ../shared/corpus beside the crate.
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("BTFKIT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus")))
}

fn cache_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/corpus-cache"))
}

/// A readable path of corpus file `rel` (its decompressed name).
pub fn corpus_file(rel: &str) -> PathBuf {
    // Tests run in parallel threads of one process; the atomic write's
    // temporary name is per process.
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
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
    let mut dec = zstd::stream::read::Decoder::new(&data[..]).unwrap();
    dec.window_log_max(31).unwrap();
    let mut bytes = Vec::new();
    std::io::copy(&mut dec, &mut bytes).unwrap_or_else(|e| panic!("{}: cannot decompress: {e}", zst.display()));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    btfkit::output::write_atomic(&out, &bytes).unwrap();
    out
}

/// Names (decompressed) of the files in corpus folder `rel` ending in `suffix`.
pub fn corpus_list(rel: &str, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus_dir().join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .map(|n| n.strip_suffix(".zst").map(str::to_string).unwrap_or(n))
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether `tool` can be run (it answers `--version`/`version`).
pub fn have_tool(tool: &str, arg: &str) -> bool {
    std::process::Command::new(tool).arg(arg).output().is_ok_and(|o| o.status.success())
}

/// The bpftool to compare with: $BPFTOOL, else `bpftool` on PATH, else
/// Debian's /usr/sbin/bpftool (not on a normal user's PATH); None if none runs.
pub fn bpftool() -> Option<String> {
    let candidates = std::env::var("BPFTOOL").ok().into_iter().chain(["bpftool".into(), "/usr/sbin/bpftool".into()]);
    candidates.into_iter().find(|c| have_tool(c, "version"))
}
