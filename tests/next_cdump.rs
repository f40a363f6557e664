//! `btfkit dump --format c` as bpftool of 2026 (v7.8.0, libbpf 1.8) writes
//! it, against the hashes tests/next/record_cdump.py recorded of that
//! bpftool's output (sorted, and `unsorted`): the corpus's expected BTF
//! (fixtures, the vmlinux, modules over it) with `--c-style`, and the next
//! reference's output of the fixtures with `layout`, which btfkit dumps in
//! that style unasked (its header is BTF 2026's).

mod common;

use std::collections::{BTreeSet, HashMap};

use common::*;

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The next reference's cases btfkit reproduces (tests/next/floor.tsv).
fn next_floor() -> BTreeSet<String> {
    std::fs::read_to_string(crate_dir().join("tests/next/floor.tsv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn c_as_bpftool_of_2026_writes_it() {
    needs_corpus!();
    let rows = read_manifest(&crate_dir().join("tests/next/cdump.tsv"));
    let cases: HashMap<String, HashMap<String, String>> = read_manifest(&crate_dir().join("tests/next/manifest.tsv"))
        .into_iter()
        .map(|r| (r["case_id"].clone(), r))
        .collect();
    let floor = next_floor();
    let dir = scratch("next-cdump");
    let (mut checked, mut refused, mut skipped) = (0, 0, 0);
    let mut wrong = Vec::new();
    for row in &rows {
        let (input, style, want) = (&row["input"], &row["style"], &row["sha256"]);
        let mut args: Vec<String> = vec!["dump".into(), "--format".into(), "c".into()];
        let file = match input.strip_prefix("next:") {
            Some(case) => {
                if !floor.contains(case) {
                    skipped += 1;
                    continue;
                }
                // the reference's output, which btfkit reproduces
                let c = &cases[case];
                let out = dir.join(format!("{}.btf", case.replace('/', "__")));
                let a: Vec<String> = c["args"]
                    .split(' ')
                    .map(|a| {
                        a.replace("{input}", &s(&corpus_file(&c["input"])))
                            .replace("{output}", &s(&out))
                    })
                    .collect();
                let o = btfkit().arg("pahole").args(&a).output().unwrap();
                assert!(o.status.success(), "{case}: {}", String::from_utf8_lossy(&o.stderr));
                assert_eq!(sha256_hex(&out), c["expected_sha256"], "{case}");
                // sorted unasked: a BTF 2026 header means bpftool of 2026
                if style == "bpftool-7.8-unsorted" {
                    args.extend(["--c-style".into(), style.clone()]);
                }
                out
            }
            None => {
                args.extend(["--c-style".into(), style.clone()]);
                corpus_file(input)
            }
        };
        if row["base"] != "-" {
            args.extend(["--base".into(), s(&corpus_file(&row["base"]))]);
        }
        args.push(s(&file));
        let o = btfkit().args(&args).output().unwrap();
        if want == "fails" {
            // bpftool 7.8 dies on these (SIGFPE: arrays of void from DWARF
            // type units); btfkit refuses them with a message.
            assert!(!o.status.success(), "{input} {style}: bpftool fails, btfkit wrote C");
            refused += 1;
            continue;
        }
        if !o.status.success() || sha(&o.stdout) != *want {
            wrong.push(format!(
                "{input} ({style}): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        checked += 1;
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "bpftool 7.8 C: {checked} outputs compared, {refused} refused as bpftool fails, {skipped} next cases not reproduced yet"
    );
    assert!(checked > 1000, "only {checked} rows compared");
    assert!(
        wrong.is_empty(),
        "{} differ from bpftool 7.8:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
