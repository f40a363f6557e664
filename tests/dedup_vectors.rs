//! The dedup test vectors of the corpus (spec btf-format-dedup.md §8): every
//! selftest and crafted case must give the pinned libbpf's actual output, and
//! every split-dedup snapshot pair of the selftests must be reproduced.

mod common;

use std::sync::Arc;

use btfkit::btf::{read, write};
use btfkit::dedup::{Options, StringMode, dedup};
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let p = common::corpus_dir().join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str::<Value>(&text)
        .expect("json")
        .as_array()
        .expect("array")
        .clone()
}

/// Runs every case of a dedup-cases file; returns the failures.
fn run_cases(file: &str, mode: StringMode) -> (usize, Vec<String>) {
    let mut fails = Vec::new();
    let cases = load(file);
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let input = common::unhex(c["input"]["raw_hex"].as_str().unwrap());
        let want = &c["actual_libbpf_pinned"];
        let btf = read::parse(&input).unwrap_or_else(|e| panic!("{name}: input does not parse: {e}"));
        let got = dedup(
            &btf,
            &Options {
                strings: mode,
                ..Default::default()
            },
        );
        let want_err = want["error"].as_i64().unwrap();
        match got {
            Ok(out) if want_err == 0 => {
                let bytes = write::to_bytes(&out);
                let want_bytes = common::unhex(want["raw_hex"].as_str().unwrap());
                if bytes != want_bytes {
                    fails.push(format!(
                        "{name}: output differs\n ours {}\n want {}",
                        hex(&bytes),
                        hex(&want_bytes)
                    ));
                }
            }
            Ok(_) => fails.push(format!("{name}: succeeded, libbpf fails with {want_err}")),
            Err(e) if e.errno() as i64 == want_err => {}
            Err(e) => fails.push(format!(
                "{name}: failed with {e} ({}), libbpf gives {want_err}",
                e.errno()
            )),
        }
    }
    (cases.len(), fails)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn selftest_cases_match_pinned_libbpf() {
    crate::needs_corpus!();
    // inputs parsed from bytes: libbpf runs its string pass
    let (n, fails) = run_cases("dedup-cases.json", StringMode::Dedup);
    assert_eq!(n, 30);
    assert!(
        fails.is_empty(),
        "{} of {n} cases differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn extra_cases_match_pinned_libbpf() {
    crate::needs_corpus!();
    // built with the add API: the string section stays as it is
    let (n, fails) = run_cases("dedup-extra-cases.json", StringMode::Keep);
    assert_eq!(n, 11);
    assert!(
        fails.is_empty(),
        "{} of {n} cases differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn split_dedup_snapshots_match_pinned_libbpf() {
    crate::needs_corpus!();
    let snaps = load("btf-split-distill-snapshots.json");
    let mut pairs = 0;
    let mut fails = Vec::new();
    for w in snaps.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        // a dedup step: same selftest, same subtest, same id range before and after
        if !a["source"].as_str().unwrap().ends_with("btf_dedup_split.c")
            || a["subtest"] != b["subtest"]
            || a["btf"]["start_id"] != b["btf"]["start_id"]
        {
            continue;
        }
        pairs += 1;
        let what = format!("{} snapshot {}", a["subtest"].as_str().unwrap(), a["snapshot_seq"]);
        let base = a["base"]
            .as_object()
            .map(|bb| Arc::new(read::parse(&common::unhex(bb["raw_hex_pinned"].as_str().unwrap())).unwrap()));
        let input = common::unhex(a["btf"]["raw_hex_pinned"].as_str().unwrap());
        let btf = read::parse_split(&input, base).unwrap_or_else(|e| panic!("{what}: {e}"));
        // the selftests build their BTF with the add API
        let out = match dedup(&btf, &Options::default()) {
            Ok(o) => o,
            Err(e) => {
                fails.push(format!("{what}: {e}"));
                continue;
            }
        };
        let got = write::to_bytes(&out);
        let want = common::unhex(b["btf"]["raw_hex_pinned"].as_str().unwrap());
        if got != want {
            fails.push(format!("{what}: ours {} want {}", hex(&got), hex(&want)));
        }
    }
    // split_simple, split_struct_duped, split_fwd_resolve, and split_dup_struct_in_cu (base, then split)
    assert_eq!(pairs, 5);
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}
