//! Replays the corpus through `btfkit pahole` (final bytes, and pre-dedup with
//! and without functions) and fails if a case listed in
//! tests/conformance-floor.tsv is no longer byte-identical to the reference.

mod common;

use common::*;

fn replay(extra: &[&str]) {
    let floor = crate_dir().join("tests/conformance-floor.tsv");
    let corpus = corpus_dir();
    let mut args = vec!["conformance", "--variants", "final,full,nofuncs", "--check-floor"];
    let floor_s = s(&floor);
    args.push(&floor_s);
    let corpus_s = s(&corpus);
    args.extend(["--corpus", &corpus_s]);
    args.extend(extra);
    let out = run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "conformance regressed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("0 regressed"), "{stdout}");
}

#[test]
fn fixtures_stay_identical() {
    crate::needs_corpus!();
    replay(&["--fixtures-only"]);
}

/// Modules (split over their base) and the 4.26 M-type vmlinux.
#[test]
fn modules_and_vmlinux_stay_identical() {
    crate::needs_corpus!();
    replay(&["--filter", "module/,vmlinux/"]);
}
