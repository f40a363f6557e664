//! The 6.12 kernel build's own command lines (scripts/Makefile.btf,
//! link-vmlinux.sh, Makefile.modfinal) run through a `pahole` symlink to the
//! built binary, writing `.BTF` (and `.BTF.base`) into copies of the corpus
//! ELF files; plus batch mode and the safety of in-place writes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use object::{Object, ObjectSection};

/// The kernel's PAHOLE_FLAGS for pahole ≥ 1.26 (feature list and the Rust
/// exclusion), as Makefile.btf passes them.
const KERNEL_FLAGS: &[&str] = &[
    "-J",
    "-j",
    "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs",
    "--lang_exclude=rust",
];
const KERNEL_FEATURES: &str =
    "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs";
const BASE: &str = "expected/kernel/vmlinux.kernel.btf";

/// A directory holding `pahole -> btfkit`.
fn pahole_link(dir: &Path) -> PathBuf {
    let link = dir.join("pahole");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_btfkit"), &link).unwrap();
    link
}

fn pahole(link: &Path, args: &[&str]) -> std::process::Output {
    Command::new(link).args(args).output().expect("run the pahole symlink")
}

fn ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: exit {:?}: {}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn section(path: &Path, name: &str) -> Option<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    let obj = object::File::parse(&*data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    obj.section_by_name(name).map(|s| s.data().unwrap().to_vec())
}

/// `readelf -a` reads the file without a warning (skipped, loudly, when
/// binutils is not installed).
fn readelf_clean(path: &Path) {
    if !have_tool("readelf", "--version") {
        eprintln!("SKIPPED readelf check of {}: readelf not installed", path.display());
        return;
    }
    let o = Command::new("readelf").arg("-a").arg("-W").arg(path).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !err.contains("readelf:"),
        "readelf -a {}: {err}",
        path.display()
    );
}

fn copy_corpus(rel: &str, dir: &Path, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(corpus_file(rel), &dst).unwrap();
    dst
}

#[test]
fn version_as_the_kernel_scripts_read_it() {
    let dir = scratch("kb-version");
    let link = pahole_link(&dir);
    let o = pahole(&link, &["--version"]);
    ok(&o, "pahole --version");
    let v = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert_eq!(v, "v1.31");
    // scripts/pahole-version.sh: `pahole --version | sed -E 's/v([0-9]+)\.([0-9]+)/\1\2/'`.
    let digits: String = v.trim_start_matches('v').split('.').collect();
    assert_eq!(digits, "131");
    let _ = std::fs::remove_dir_all(&dir);
}

/// In-tree modules: `pahole -J $(PAHOLE_FLAGS) --btf_base vmlinux module.ko`.
#[test]
fn module_command_line_writes_the_reference_btf() {
    crate::needs_corpus!();
    let dir = scratch("kb-modules");
    let link = pahole_link(&dir);
    let base = corpus_file(BASE);
    for m in corpus_list("kernel/modules", ".ko") {
        let name = m.trim_end_matches(".ko");
        let ko = copy_corpus(&format!("kernel/modules/{m}"), &dir, &m);
        let mut args: Vec<&str> = KERNEL_FLAGS.to_vec();
        let b = s(&base);
        let k = s(&ko);
        args.extend(["--btf_base", &b, &k]);
        ok(&pahole(&link, &args), &format!("pahole {}", args.join(" ")));
        let want = read_corpus(&format!("expected/modules/{name}.kernel.btf"));
        assert!(
            section(&ko, ".BTF").as_deref() == Some(&want[..]),
            "{m}: .BTF differs from the reference"
        );
        assert!(
            section(&ko, ".BTF.base").is_none(),
            "{m}: in-tree modules get no .BTF.base"
        );
        readelf_clean(&ko);
        std::fs::remove_file(&ko).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// External modules: `MODULE_PAHOLE_FLAGS = --btf_features=distilled_base`.
#[test]
fn external_module_command_line_writes_distilled_base() {
    crate::needs_corpus!();
    let dir = scratch("kb-extmod");
    let link = pahole_link(&dir);
    let base = s(&corpus_file(BASE));
    for name in ["fou", "zsmalloc"] {
        let ko = copy_corpus(&format!("kernel/modules/{name}.ko"), &dir, &format!("{name}.ko"));
        let k = s(&ko);
        let mut args: Vec<&str> = KERNEL_FLAGS.to_vec();
        args.extend(["--btf_features=distilled_base", "--btf_base", &base, &k]);
        ok(&pahole(&link, &args), &format!("pahole {}", args.join(" ")));
        let btf = read_corpus(&format!("expected/modules/{name}.kernel.inplace.BTF"));
        let distilled = read_corpus(&format!("expected/modules/{name}.kernel.inplace.BTF.base"));
        assert!(
            section(&ko, ".BTF").as_deref() == Some(&btf[..]),
            "{name}: .BTF differs"
        );
        assert!(
            section(&ko, ".BTF.base").as_deref() == Some(&distilled[..]),
            "{name}: .BTF.base differs"
        );
        readelf_clean(&ko);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// link-vmlinux.sh: `pahole -J $(PAHOLE_FLAGS) .tmp_vmlinux1`, on a copy of
/// the corpus vmlinux (340 MB; its Debian `.BTF` is replaced).
#[test]
fn vmlinux_command_line_writes_the_reference_btf() {
    crate::needs_corpus!();
    let dir = scratch("kb-vmlinux");
    let src = corpus_file("kernel/vmlinux-6.12.117+deb12-cloud-amd64");
    let need = std::fs::metadata(&src).unwrap().len() * 2;
    let avail = free_bytes(&dir);
    assert!(
        avail > need,
        "{}: {avail} bytes free, the vmlinux copy and its rewrite need {need}",
        dir.display()
    );
    let link = pahole_link(&dir);
    let v = dir.join(".tmp_vmlinux1");
    std::fs::copy(&src, &v).unwrap();
    let mut args: Vec<&str> = KERNEL_FLAGS.to_vec();
    let vs = s(&v);
    args.push(&vs);
    ok(&pahole(&link, &args), "pahole on vmlinux");
    let want = read_corpus(BASE);
    assert!(
        section(&v, ".BTF").as_deref() == Some(&want[..]),
        "vmlinux .BTF differs from the reference"
    );
    readelf_clean(&v);
    let _ = std::fs::remove_dir_all(&dir);
}

fn free_bytes(dir: &Path) -> u64 {
    let o = Command::new("df").arg("-Pk").arg(dir).output().expect("df");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().nth(1).expect("df output");
    line.split_whitespace()
        .nth(3)
        .and_then(|k| k.parse::<u64>().ok())
        .expect("df available column")
        * 1024
}

/// Batch mode over every corpus module gives the single-module bytes.
#[test]
fn batch_over_the_corpus_modules_matches_the_reference() {
    crate::needs_corpus!();
    let dir = scratch("kb-batch");
    let mods = dir.join("mods");
    std::fs::create_dir_all(&mods).unwrap();
    let list = corpus_list("kernel/modules", ".ko");
    for m in &list {
        copy_corpus(&format!("kernel/modules/{m}"), &mods, m);
    }
    let out = dir.join("out");
    let base = s(&corpus_file(BASE));
    let feats = format!("--btf-features={KERNEL_FEATURES}");
    let r = run(&[
        "encode",
        "-j2",
        "--base",
        &base,
        &feats,
        "--lang-exclude=rust",
        "--out-dir",
        &s(&out),
        &s(&mods),
    ]);
    ok(&r, "btfkit encode batch");
    let summary = String::from_utf8_lossy(&r.stdout);
    assert!(
        summary.contains(&format!("{} modules encoded, 0 failed", list.len())),
        "{summary}"
    );
    for m in &list {
        let name = m.trim_end_matches(".ko");
        let got = std::fs::read(out.join(format!("{name}.btf"))).unwrap();
        assert!(
            got == read_corpus(&format!("expected/modules/{name}.kernel.btf")),
            "{name}: batch output differs"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bad input is reported on one line naming it, the others are still
/// written, and the exit code is 2.
#[test]
fn batch_reports_a_bad_module_and_encodes_the_rest() {
    crate::needs_corpus!();
    let dir = scratch("kb-batch-bad");
    let good = copy_corpus("kernel/modules/crc7.ko", &dir, "crc7.ko");
    let bad = dir.join("broken.ko");
    std::fs::write(&bad, b"\x7fELF not really").unwrap();
    let out = dir.join("out");
    let base = s(&corpus_file(BASE));
    let r = run(&["encode", "--base", &base, "--out-dir", &s(&out), &s(&bad), &s(&good)]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("broken.ko"), "{err}");
    assert!(String::from_utf8_lossy(&r.stdout).contains("1 modules encoded, 1 failed"));
    assert!(out.join("crc7.btf").exists());
    assert!(!out.join("broken.btf").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// In-place writes go through a new file renamed over the input: when the
/// encoding fails (a base without BTF) or the write fails half way (a file
/// size limit below the module's size: `write` returns EFBIG mid-file, even
/// for root), the module is untouched and no temporary file is left.
#[test]
fn failed_in_place_write_leaves_the_module_untouched() {
    crate::needs_corpus!();
    let dir = scratch("kb-safe");
    let link = pahole_link(&dir);
    let ko = copy_corpus("kernel/modules/fou.ko", &dir, "fou.ko");
    let before = std::fs::read(&ko).unwrap();
    let base = s(&corpus_file(BASE));
    let k = s(&ko);

    // An encode error: the base is an ELF without .BTF.
    let mut args: Vec<&str> = KERNEL_FLAGS.to_vec();
    args.extend(["--btf_base", &k, &k]);
    let o = pahole(&link, &args);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read(&ko).unwrap() == before,
        "module changed after a failed encode"
    );

    // A write error half way through the new file.
    let blocks = before.len() / 2 / 512;
    let mut args: Vec<String> = KERNEL_FLAGS.iter().map(|a| a.to_string()).collect();
    args.extend(["--btf_base".into(), base.clone(), k.clone()]);
    let script = format!("trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\"");
    let o = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(&link)
        .args(&args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("fou.ko"), "error does not name the file: {err}");
    assert!(err.lines().count() == 1, "not one line: {err}");
    assert!(
        std::fs::read(&ko).unwrap() == before,
        "module changed after a failed write"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.len() == 2, "temporary file left behind: {names:?}");

    // Without the limit the same command succeeds: the failure was the write.
    let o = Command::new(&link).args(&args).output().unwrap();
    ok(&o, "pahole without the size limit");
    assert!(std::fs::read(&ko).unwrap() != before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Batch `--in-place` with `distilled_base` writes the same `.BTF` and
/// `.BTF.base` into each module as the single-module (external module) path.
#[test]
fn batch_in_place_writes_the_reference_sections() {
    crate::needs_corpus!();
    let dir = scratch("kb-batch-inplace");
    let names = ["fou", "zsmalloc"];
    let kos: Vec<String> = names
        .iter()
        .map(|n| {
            s(&copy_corpus(
                &format!("kernel/modules/{n}.ko"),
                &dir,
                &format!("{n}.ko"),
            ))
        })
        .collect();
    let base = s(&corpus_file(BASE));
    let feats = format!("--btf-features={KERNEL_FEATURES},distilled_base");
    let mut args = vec!["encode", "--in-place", "--base", &base, &feats, "--lang-exclude=rust"];
    args.extend(kos.iter().map(String::as_str));
    ok(&run(&args), "btfkit encode --in-place");
    for (n, ko) in names.iter().zip(&kos) {
        let ko = Path::new(ko);
        let btf = read_corpus(&format!("expected/modules/{n}.kernel.inplace.BTF"));
        let distilled = read_corpus(&format!("expected/modules/{n}.kernel.inplace.BTF.base"));
        assert!(section(ko, ".BTF").as_deref() == Some(&btf[..]), "{n}: .BTF differs");
        assert!(
            section(ko, ".BTF.base").as_deref() == Some(&distilled[..]),
            "{n}: .BTF.base differs"
        );
        readelf_clean(ko);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
