//! Answers and checks that never overstate: a check that checked nothing is
//! an error, flags that cannot both hold are refused, a file is never left
//! with a section that no longer matches its `.BTF`, and `verify` shows the
//! kernel's verdict even where btfkit's reader disagrees.

use std::process::{Command, Output};

use crate::common::{crate_dir, have_corpus, repo_fixture as fixture, run as btfkit, s, scratch};

/// Exit 2 and one `btfkit: error:` line holding each of `words`.
fn assert_refused(out: &Output, words: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("btfkit: error: ")).collect();
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(errors.len(), 1, "not one error line: {err}");
    for w in words {
        assert!(errors[0].contains(w), "`{w}` not in: {err}");
    }
}

#[test]
fn a_conformance_check_that_selects_nothing_is_an_error() {
    if !have_corpus() {
        return;
    }
    let floor = s(&crate_dir().join("tests/conformance-floor.tsv"));
    let r = btfkit(&[
        "conformance",
        "--check-floor",
        "/nonexistent/floor.tsv",
        "--fixtures-only",
    ]);
    assert_refused(&r, &["/nonexistent/floor.tsv", "floor file"]);
    let r = btfkit(&["conformance", "--check-floor", &floor, "--filter", "no-such-case"]);
    assert_refused(&r, &["no corpus case selected", "--filter no-such-case"]);
    let r = btfkit(&["conformance", "--variants", "fina"]);
    assert_refused(&r, &["no variant `fina`"]);
    let dir = scratch("checks-floor");
    let empty = dir.join("empty.tsv");
    std::fs::write(&empty, "# nothing listed\n").unwrap();
    let r = btfkit(&["conformance", "--check-floor", &s(&empty), "--fixtures-only"]);
    assert_refused(&r, &["lists no case"]);
    // a floor of module cases, and a selection of fixtures only
    let modules = dir.join("modules.tsv");
    std::fs::write(&modules, "final\tmodule/fou/kernel\n").unwrap();
    let r = btfkit(&["conformance", "--check-floor", &s(&modules), "--fixtures-only"]);
    assert_refused(&r, &["none of the 1 cases it lists"]);
    // and a real check still passes
    let r = btfkit(&["conformance", "--check-floor", &floor, "--filter", "ints.gcc-O2"]);
    let out = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&r.stderr));
    assert!(out.contains(" 0 regressed"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shard_of_one_kernel_is_refused() {
    let dir = scratch("checks-shard");
    for flag in [["--shard", "0/2"], ["--shard-count", "2"]] {
        let r = btfkit(&["kernel", &s(&dir), "--out-dir", &s(&dir.join("out")), flag[0], flag[1]]);
        assert_refused(&r, &[flag[0], "--list"]);
    }
    assert!(!dir.join("out").exists(), "an output directory was made");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn in_place_and_out_dir_together_are_a_usage_error() {
    let dir = scratch("checks-inplace-outdir");
    let input = dir.join("m.o");
    std::fs::copy(fixture("ints.gcc-O2.o"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let r = btfkit(&["encode", "--in-place", "--out-dir", &s(&dir.join("out")), &s(&input)]);
    assert_refused(&r, &["--in-place", "--out-dir"]);
    assert_eq!(std::fs::read(&input).unwrap(), before, "the input was written");
    assert!(!dir.join("out").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn in_place_into_standard_input_is_refused() {
    let r = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .args(["pahole", "-J", "-"])
        .stdin(std::fs::File::open(fixture("ints.gcc-O2.o")).unwrap())
        .output()
        .unwrap();
    assert_refused(&r, &["-: is not a regular file", "detached"]);
}

/// The reference rewrites `.BTF` and leaves an earlier `.BTF.base` in
/// place, which then reads as the new BTF's base; btfkit refuses.
#[test]
fn re_encoding_in_place_never_leaves_a_stale_btf_base() {
    let dir = scratch("checks-stale-base");
    let base = dir.join("base.btf");
    let r = btfkit(&["encode", &s(&fixture("structs_unions.gcc-O2.o")), "-o", &s(&base), "-q"]);
    assert!(r.status.success());
    let m = dir.join("m.o");
    std::fs::copy(fixture("multi_cu_pair.gcc-O2.ld-r.o"), &m).unwrap();
    let base_arg = format!("--btf_base={}", s(&base));
    let r = btfkit(&["pahole", "-J", &base_arg, "--btf_features=+distilled_base", &s(&m)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let distilled = std::fs::read(&m).unwrap();
    let r = btfkit(&["pahole", "-J", &base_arg, &s(&m)]);
    assert_refused(&r, &[".BTF.base", "distilled_base"]);
    assert_eq!(std::fs::read(&m).unwrap(), distilled, "the file changed");
    // with distilled_base again, both sections are rewritten together
    let r = btfkit(&["pahole", "-J", &base_arg, "--btf_features=+distilled_base", &s(&m)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(btfkit(&["dump", &s(&m)]).status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_module_met_twice_in_a_batch_is_encoded_once() {
    let dir = scratch("checks-batch-links");
    let mods = dir.join("mods");
    std::fs::create_dir_all(&mods).unwrap();
    std::fs::copy(fixture("ints.gcc-O2.o"), mods.join("b.ko")).unwrap();
    std::os::unix::fs::symlink("b.ko", mods.join("a.ko")).unwrap();
    let out = dir.join("out");
    let r = btfkit(&["encode", "-q", &s(&mods), &s(&mods.join("b.ko")), "--out-dir", &s(&out)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, vec!["a.btf".to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file btfkit's reader refuses is still put to the kernel, and both
/// verdicts are shown (needs root for `bpf(BPF_BTF_LOAD)`).
#[test]
fn verify_asks_the_kernel_when_the_reader_refuses() {
    let dir = scratch("checks-verify");
    let good = dir.join("good.btf");
    let r = btfkit(&["encode", &s(&fixture("ints.gcc-O2.o")), "-o", &s(&good), "-q"]);
    assert!(r.status.success());
    let mut d = std::fs::read(&good).unwrap();
    *d.last_mut().unwrap() = b'x'; // the string section loses its last NUL
    let bad = dir.join("bad.btf");
    std::fs::write(&bad, &d).unwrap();
    let r = btfkit(&["verify", &s(&bad)]);
    let out = String::from_utf8_lossy(&r.stdout);
    let err = String::from_utf8_lossy(&r.stderr);
    if err.contains("cannot ask the kernel") {
        // not root: the reader's verdict is still named
        assert_refused(&r, &["cannot ask the kernel", "btfkit's reader refuses it"]);
        eprintln!("SKIPPED the kernel's verdict: {err}");
        return;
    }
    assert_eq!(r.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("refused by the kernel"), "{out}");
    assert!(
        out.contains("btfkit's reader refuses it") && out.contains("NUL"),
        "{out}"
    );
    // the size is the file's
    let r = btfkit(&["verify", &s(&good)]);
    let out = String::from_utf8_lossy(&r.stdout);
    assert_eq!(
        out.trim_end(),
        format!("{}: accepted by the kernel ({} bytes)", s(&good), d.len())
    );
    let _ = std::fs::remove_dir_all(&dir);
}
