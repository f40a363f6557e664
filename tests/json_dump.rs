//! `dump --format json` is `bpftool btf dump file X -j` (bpftool 7.1.0,
//! the JSON the BPF tools read), byte for byte: every reference file of the
//! corpus's fixtures (final and pre-dedup, both byte orders), the vmlinux,
//! and every module over it.

mod common;

use std::process::Command;

use common::*;

fn bpftool_json(bpftool: &str, file: &std::path::Path, base: Option<&std::path::Path>) -> Vec<u8> {
    let mut c = Command::new(bpftool);
    c.args(["btf", "dump", "file"]).arg(file);
    if let Some(b) = base {
        c.arg("-B").arg(b);
    }
    let r = c.arg("-j").output().unwrap();
    assert!(
        r.status.success(),
        "bpftool on {}: {}",
        file.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    r.stdout
}

fn ours(file: &std::path::Path, base: Option<&std::path::Path>) -> Vec<u8> {
    let mut c = btfkit();
    c.arg("dump").arg(file).args(["--format", "json"]);
    if let Some(b) = base {
        c.arg("-B").arg(b);
    }
    let r = c.output().unwrap();
    assert!(
        r.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    r.stdout
}

#[test]
fn json_dump_is_bpftools() {
    crate::needs_corpus!();
    let Some(bpftool) = bpftool() else {
        eprintln!("SKIPPED: bpftool not found (.ci/run installs it)");
        return;
    };
    let mut checked = 0;
    for dir in ["expected/fixtures", "expected-prededup/fixtures"] {
        for name in corpus_list(dir, ".btf") {
            let f = corpus_file(&format!("{dir}/{name}"));
            let (a, b) = (bpftool_json(&bpftool, &f, None), ours(&f, None));
            assert!(a == b, "{dir}/{name}: differs from bpftool's -j output");
            checked += 1;
        }
    }
    let vmlinux = corpus_file("expected/kernel/vmlinux.kernel.btf");
    assert!(
        bpftool_json(&bpftool, &vmlinux, None) == ours(&vmlinux, None),
        "vmlinux"
    );
    for name in corpus_list("expected/modules", ".kernel.btf") {
        let m = corpus_file(&format!("expected/modules/{name}"));
        assert!(
            bpftool_json(&bpftool, &m, Some(&vmlinux)) == ours(&m, Some(&vmlinux)),
            "{name}"
        );
        checked += 1;
    }
    assert!(checked > 500, "only {checked} files compared");
    // the JSON is JSON (serde parses it) and values past 2^53 are plain integers
    let enums = corpus_file("expected/fixtures/enums.clang-O2.kernel.btf");
    let v: serde_json::Value = serde_json::from_slice(&ours(&enums, None)).unwrap();
    let text = v.to_string();
    assert!(text.contains("18446744073709551615"), "{text}");
}

/// `--filter` works in every format (the named types and what they need);
/// an unknown name suggests the closest ones.
#[test]
fn filter_in_every_format_and_suggestions() {
    let f = corpus_file("expected/fixtures/structs_unions.gcc-O2.kernel.btf");
    let r = run(&["dump", &s(&f), "--filter", "inner"]);
    assert!(r.status.success());
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "[1] STRUCT 'inner' size=8 vlen=2\n\t'a' type_id=2 bits_offset=0\n\t'b' type_id=3 bits_offset=32\n\
         [2] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED\n\
         [3] INT 'char' size=1 bits_offset=0 nr_bits=8 encoding=SIGNED\n"
    );
    let r = run(&["dump", &s(&f), "--format", "json", "--filter", "struct outer"]);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let ids: Vec<u64> = v["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert!(ids.contains(&16) && ids.contains(&1) && !ids.contains(&13), "{ids:?}");
    let r = run(&["dump", &s(&f), "--format", "c", "--filter", "outr"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("did you mean outer?"));
}
