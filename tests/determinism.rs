//! The same bytes at any thread count.

mod common;

use common::*;

/// The kernel build's features: functions (with kfunc tags), variables, decl
/// and type tags.
use btfkit::encode::features::KERNEL_BUILD_FEATURES;

/// `btfkit pahole` at `-j{jobs}`: the whole pipeline (functions and dedup)
/// unless `stage` stops it earlier.
fn encode_at(input: &str, base: Option<&str>, jobs: &str, stage: &[&str], dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join(format!("out.j{jobs}.btf"));
    let mut args = vec!["pahole".to_string()];
    args.extend(stage.iter().map(|a| a.to_string()));
    args.extend([
        "-J".into(),
        format!("-j{jobs}"),
        format!("--btf_features={KERNEL_BUILD_FEATURES}"),
    ]);
    if let Some(b) = base {
        args.push(format!("--btf_base={b}"));
    }
    args.push(format!("--btf_encode_detached={}", s(&out)));
    args.push(input.to_string());
    let r = btfkit().args(&args).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::read(&out).unwrap()
}

/// Final bytes (functions, dedup) and pre-dedup bytes at -j1, -j2, -j8.
fn same_bytes_at_any_jobs(name: &str, input: &str, base: Option<&str>) {
    let dir = scratch(name);
    for stage in [&[][..], &["--no-dedup"][..]] {
        let one = encode_at(input, base, "1", stage, &dir);
        assert!(one.len() > 1000);
        for j in ["2", "8"] {
            assert!(
                one == encode_at(input, base, j, stage, &dir),
                "{stage:?}: -j{j} differs from -j1"
            );
        }
    }
}

#[test]
fn multi_cu_fixture_same_bytes_at_any_jobs() {
    let input = s(&crate_dir().join("data/multi_types.gcc-O2.ld-r.o"));
    same_bytes_at_any_jobs("det-fixture", &input, None);
}

#[test]
fn module_same_bytes_at_any_jobs() {
    crate::needs_corpus!();
    let input = s(&corpus_file("kernel/modules/x_tables.ko"));
    let base = s(&corpus_file("expected/kernel/vmlinux.kernel.btf"));
    same_bytes_at_any_jobs("det-module", &input, Some(&base));
}

/// The corpus's vmlinux/kernel case: input, pahole arguments, expected sha256.
fn vmlinux_row() -> (String, String, String) {
    let mut row = read_manifest(&corpus_dir().join("manifest.tsv"))
        .into_iter()
        .find(|r| r["case_id"] == "vmlinux/kernel")
        .expect("vmlinux kernel row");
    let mut take = |c: &str| row.remove(c).unwrap_or_else(|| panic!("manifest column {c}"));
    (take("input"), take("args"), take("expected_sha256"))
}

/// The vmlinux (2,401 CUs, many chunks through the decode/merge pipeline) at
/// -j1 and -j3 gives the reference's final bytes (functions, dedup) both times.
#[test]
fn vmlinux_same_bytes_at_j1_and_j3() {
    crate::needs_corpus!();
    let (input, args, sha) = vmlinux_row();
    let input = s(&corpus_file(&input));
    let dir = scratch("det-vmlinux");
    for j in ["-j1", "-j3"] {
        let out = dir.join("out.btf");
        let mut cmd = btfkit();
        cmd.arg("pahole");
        for a in args.split(' ') {
            let a = if a.starts_with("-j") {
                j.to_string()
            } else {
                a.to_string()
            };
            cmd.arg(a.replace("{input}", &input).replace("{output}", &s(&out)));
        }
        let r = cmd.output().unwrap();
        assert!(r.status.success(), "{j}: {}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(sha256_hex(&out), sha, "{j}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `btfkit encode --early-dedup` (dedup's first passes during the CU loop,
/// the default from -j2 on) and `--no-early-dedup` give the reference's
/// final vmlinux bytes, at -j1 and -j2.
#[test]
fn vmlinux_early_dedup_gives_the_reference_bytes() {
    crate::needs_corpus!();
    let (input, args, sha) = vmlinux_row();
    let arg = |name: &str| {
        args.split(' ')
            .find_map(|a| a.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in the row's arguments"))
            .to_string()
    };
    let (features, lang) = (arg("--btf_features="), arg("--lang_exclude="));
    let input = s(&corpus_file(&input));
    let dir = scratch("det-early");
    for (j, mode) in [
        ("-j1", "--early-dedup"),
        ("-j2", "--early-dedup"),
        ("-j1", "--no-early-dedup"),
        ("-j2", "--no-early-dedup"),
    ] {
        let out = dir.join("out.btf");
        let r = btfkit()
            .args(["encode", &input, mode, j, "-o", &s(&out), "--btf-features", &features])
            .args(["--lang-exclude", &lang])
            .output()
            .unwrap();
        assert!(r.status.success(), "{j} {mode}: {}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(sha256_hex(&out), sha, "{j} {mode}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pahole -jN` runs N encoding threads besides the main thread, as the
/// reference does (dwarves' tests/reproducible_build.sh counts them with
/// `ps -L` while the vmlinux is encoded).
#[test]
fn pahole_jn_runs_n_threads_besides_the_main_one() {
    crate::needs_corpus!();
    let input = corpus_file(&vmlinux_row().0);
    for n in [1usize, 2] {
        let dir = scratch(&format!("threads-{n}"));
        let mut child = btfkit()
            .args(["pahole", &format!("-j{n}"), "--btf_features=default"])
            .arg(format!("--btf_encode_detached={}", s(&dir.join("out.btf"))))
            .arg(&input)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(600));
        let threads = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap().count();
        assert!(child.wait().unwrap().success());
        assert_eq!(
            threads,
            n + 1,
            "-j{n}: {threads} threads (the main one and {n} expected)"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `pahole --verbose` says which functions are left out and why, as the
/// reference prints it: on the corpus vmlinux with pahole's default
/// features, the same 326 lines in the same order (checked here by their
/// sha256, taken from pahole v1.31's output, and by a few of them); none of
/// the functions named is in the BTF.
#[test]
fn verbose_lists_the_functions_left_out_as_the_reference() {
    crate::needs_corpus!();
    let input = corpus_file(&vmlinux_row().0);
    let dir = scratch("verbose-skips");
    let out = dir.join("out.btf");
    let r = btfkit()
        .args([
            "pahole",
            "-j2",
            "--btf_features=default",
            "--lang_exclude=rust",
            "--verbose",
        ])
        .arg(format!("--btf_encode_detached={}", s(&out)))
        .arg(&input)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8(r.stdout).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("skipping BTF encoding of function"))
        .collect();
    assert_eq!(lines.len(), 326);
    assert_eq!(
        lines[0],
        "NF_HOOK : skipping BTF encoding of function due to param type mismatch for param#1 pf != net"
    );
    assert!(
        lines
            .iter()
            .filter(|l| l.ends_with("due to return type mismatch"))
            .count()
            == 9
    );
    let mut joined = lines.join("\n");
    joined.push('\n');
    use sha2::Digest;
    let sha: String = sha2::Sha256::digest(joined.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sha, REFERENCE_SKIPS_SHA256);
    let dump = String::from_utf8(run(&["dump", &s(&out)]).stdout).unwrap();
    for l in &lines {
        let name = l.split(" : ").next().unwrap();
        assert!(!dump.contains(&format!("] FUNC '{name}' ")), "{name} is in the BTF");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
const REFERENCE_SKIPS_SHA256: &str = "0767ba026d9ba2f03dad585eb7476354f388397724fbda8c8c53554fc974c84f";
