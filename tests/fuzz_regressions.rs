//! Inputs the fuzzers found (tests/fuzz-regressions/<target>/): each must
//! now give an error or a result that keeps the target's invariant, and
//! never a panic.

use std::path::Path;

use btfkit::btf::{dump, lint, read, write};

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions").join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn btf_read_regressions() {
    let cases = inputs("btf_read");
    assert!(!cases.is_empty());
    for (name, data) in cases {
        if let Ok(b) = read::parse(&data) {
            assert_eq!(write::to_bytes(&b), data, "{name}: round trip");
            let _ = dump::raw_string(&b);
            let _ = lint::kernel_warnings(&b);
        }
    }
}
