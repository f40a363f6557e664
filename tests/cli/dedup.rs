//! `btfkit dedup` end to end: output bytes, split BTF over --base, string
//! modes, and the one-line error with exit code 2.

use crate::common;

use common::btfkit;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = common::cache_dir().join("dedup-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(format!("{}.{name}", std::process::id()))
}

#[test]
fn fixture_and_module_give_reference_bytes() {
    crate::needs_corpus!();
    let input = common::corpus_file("expected-prededup/fixtures/aliases_weak.gcc-O2.kernel.btf");
    for jobs in [None, Some("-j1"), Some("-j2")] {
        let out = tmp("fixture.btf");
        let st = btfkit()
            .arg("dedup")
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .args(jobs)
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(0), "{jobs:?}");
        let want = common::read_corpus("expected/fixtures/aliases_weak.gcc-O2.kernel.btf");
        assert_eq!(std::fs::read(&out).unwrap(), want, "{jobs:?}");
    }

    let dir = common::corpus_dir();
    let row = common::read_manifest(&dir.join("expected-prededup/manifest.tsv"))
        .into_iter()
        .find(|r| r["variant"] == "full" && r["base"] != "-")
        .expect("a module row");
    let fin = common::read_manifest(&dir.join("manifest.tsv"))
        .into_iter()
        .find(|r| r["case_id"] == row["case_id"])
        .expect("final row");
    let out = tmp("module.btf");
    let st = btfkit()
        .arg("dedup")
        .arg(common::corpus_file(&row["expected"]))
        .arg("--base")
        .arg(common::corpus_file(&row["base"]))
        .arg("-o")
        .arg(&out)
        .arg("--strings=keep")
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0), "{}", row["case_id"]);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        common::read_corpus(&fin["expected"]),
        "{}",
        row["case_id"]
    );
}

#[test]
fn libbpf_error_is_one_line_and_exit_2() {
    crate::needs_corpus!();
    // "dedup: recursive typedef": libbpf fails with -ELOOP
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(common::corpus_dir().join("dedup-cases.json")).unwrap()).unwrap();
    let c = cases
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["actual_libbpf_pinned"]["error"] != 0)
        .expect("failing case");
    let input = tmp("loop.btf");
    std::fs::write(&input, common::unhex(c["input"]["raw_hex"].as_str().unwrap())).unwrap();
    let out = tmp("loop.out.btf");
    let r = btfkit()
        .arg("dedup")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .arg("--strings=dedup")
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8(r.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("ELOOP") && err.contains("loop.btf"), "{err}");
    assert!(!out.exists(), "no output on failure");
}
