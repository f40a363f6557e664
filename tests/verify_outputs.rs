//! Every little-endian output (final, and pre-dedup without functions) within
//! the kernel's size limit is accepted by the running kernel's BTF verifier (bpf(BPF_BTF_LOAD)), except
//! the outputs corpus/kernel-rejects.tsv lists (the reference's bytes are
//! refused too; byte identity comes first). Split outputs are loaded merged
//! onto their base.

mod common;

use std::collections::HashSet;

use common::*;

/// One output to check: case id, input, base (or "-"), pahole args, the
/// reference's file (the key of kernel-rejects.tsv).
struct Row<'a> {
    case: &'a str,
    input: &'a str,
    base: &'a str,
    args: &'a str,
    expected: &'a str,
}

/// Encodes every row with `stage` flags and asks the kernel about the output;
/// returns how many were verified.
fn verify_rows(name: &str, rows: &[Row<'_>], stage: &[&str]) -> usize {
    let corpus = corpus_dir();
    let rejects: HashSet<String> = std::fs::read_to_string(corpus.join("kernel-rejects.tsv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let dir = scratch(name);
    let (mut checked, mut skipped_rejects) = (0, Vec::new());
    for row in rows {
        let case = row.case;
        if row.input.contains("s390x") || row.input.contains("powerpc64") || case.starts_with("vmlinux/") {
            continue;
        }
        if rejects.contains(row.expected) {
            skipped_rejects.push(case.to_string());
            continue;
        }
        let input_p = s(&corpus_file(row.input));
        let base_p = (row.base != "-").then(|| s(&corpus_file(row.base)));
        let out = dir.join("out.btf");
        let _ = std::fs::remove_file(&out);
        let mut cmd = btfkit();
        cmd.arg("pahole").args(stage);
        for a in row.args.split(' ') {
            cmd.arg(
                a.replace("{input}", &input_p)
                    .replace("{output}", &s(&out))
                    .replace("{base}", base_p.as_deref().unwrap_or("")),
            );
        }
        let r = cmd.output().unwrap();
        assert!(r.status.success(), "{case}: {}", String::from_utf8_lossy(&r.stderr));
        if std::fs::metadata(&out).unwrap().len() > 16 << 20 {
            continue;
        }
        let mut v = btfkit();
        v.arg("verify").arg(&out);
        if let Some(b) = &base_p {
            v.args(["--base", b]);
        }
        let r = v.output().unwrap();
        assert!(
            r.status.success(),
            "{case}: kernel refused our output: {}{}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
        checked += 1;
    }
    eprintln!(
        "verified {checked} outputs; skipped {} listed in kernel-rejects.tsv: {skipped_rejects:?}",
        skipped_rejects.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    checked
}

#[test]
fn nofuncs_outputs_pass_the_kernel_verifier() {
    let manifest = std::fs::read_to_string(corpus_dir().join("expected-prededup/manifest.tsv")).unwrap();
    let rows: Vec<Row> = manifest
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[1] == "nofuncs")
        .map(|f| Row {
            case: f[0],
            input: f[2],
            base: f[4],
            args: f[5],
            expected: f[6],
        })
        .collect();
    let checked = verify_rows("verify-nofuncs", &rows, &["--no-dedup", "--no-funcs"]);
    assert!(checked > 250, "only {checked} outputs verified");
}

/// The final outputs (functions, dedup) of every detached row that has one.
#[test]
fn final_outputs_pass_the_kernel_verifier() {
    let manifest = std::fs::read_to_string(corpus_dir().join("manifest.tsv")).unwrap();
    let rows: Vec<Row> = manifest
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[3] == "detached" && f[6] != "-")
        .map(|f| Row {
            case: f[0],
            input: f[1],
            base: f[4],
            args: f[5],
            expected: f[6],
        })
        .collect();
    let checked = verify_rows("verify-final", &rows, &[]);
    assert!(checked > 250, "only {checked} outputs verified");
}
