//! Every little-endian pre-dedup output within the kernel's size limit is
//! accepted by the running kernel's BTF verifier (bpf(BPF_BTF_LOAD)), except
//! the outputs corpus/kernel-rejects.tsv lists (the reference's bytes are
//! refused too; byte identity comes first). Split outputs are loaded merged
//! onto their base.

mod common;

use std::collections::HashSet;

use common::*;

#[test]
fn nofuncs_outputs_pass_the_kernel_verifier() {
    let corpus = corpus_dir();
    let rejects: HashSet<String> = std::fs::read_to_string(corpus.join("kernel-rejects.tsv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let manifest = std::fs::read_to_string(corpus.join("expected-prededup/manifest.tsv")).unwrap();
    let dir = scratch("verify");
    let (mut checked, mut skipped_rejects) = (0, Vec::new());
    for line in manifest.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let (case, variant, input, base, args, expected) = (f[0], f[1], f[2], f[4], f[5], f[6]);
        if variant != "nofuncs"
            || input.contains("s390x")
            || input.contains("powerpc64")
            || case.starts_with("vmlinux/")
        {
            continue;
        }
        if rejects.contains(expected) {
            skipped_rejects.push(case.to_string());
            continue;
        }
        let input_p = s(&corpus_file(input));
        let base_p = (base != "-").then(|| s(&corpus_file(base)));
        let out = dir.join("out.btf");
        let _ = std::fs::remove_file(&out);
        let mut cmd = btfkit();
        cmd.args(["pahole", "--no-dedup", "--no-funcs"]);
        for a in args.split(' ') {
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
    assert!(checked > 250, "only {checked} outputs verified");
    let _ = std::fs::remove_dir_all(&dir);
}
