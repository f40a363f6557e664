//! LTO files and DWARF type units: the shapes of DWARF the reference reads
//! in its own ways (one merged unit; type units passed over or lost). The
//! bytes are checked by the conformance floor; these tests check what the
//! floor cannot see: thread counts, what is said on stderr, what is refused.

mod common;

use common::*;

const KERNEL: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";

/// Runs `btfkit pahole -J` with the kernel features at `-j{jobs}` on
/// fixture `bin`; (exit code, stderr, output bytes if any).
fn pahole(bin: &str, jobs: &str) -> (Option<i32>, String, Option<Vec<u8>>) {
    let dir = scratch(&format!("lto-tu-{bin}-{jobs}"));
    let out = dir.join("out.btf");
    let input = corpus_file(&format!("fixtures/bin/{bin}"));
    let r = run(&[
        "pahole",
        "-J",
        &format!("-j{jobs}"),
        KERNEL,
        &format!("--btf_encode_detached={}", s(&out)),
        &s(&input),
    ]);
    let bytes = std::fs::read(&out).ok();
    let _ = std::fs::remove_dir_all(&dir);
    (r.status.code(), String::from_utf8_lossy(&r.stderr).into_owned(), bytes)
}

fn expected(name: &str) -> Vec<u8> {
    read_corpus(&format!("expected/fixtures/{name}"))
}

/// Every LTO shape gives the reference's bytes at one, two and eight
/// threads, silently (the merged unit's parts are decoded in parallel).
#[test]
fn lto_executables_give_the_reference_bytes_at_any_jobs() {
    crate::needs_corpus!();
    for bin in [
        "prog.gcc-O2-flto",
        "prog.gcc-O2-dwarf4-flto",
        "prog.clang-O2-thinlto",
        "prog.clang-O2-flto",
    ] {
        let want = expected(&format!("{bin}.kernel.btf"));
        for j in ["1", "2", "8"] {
            let (code, stderr, out) = pahole(&format!("{bin}.exe"), j);
            assert_eq!(code, Some(0), "{bin} -j{j}: {stderr}");
            assert!(stderr.is_empty(), "{bin} -j{j}: {stderr}");
            assert!(
                out.as_deref() == Some(&want[..]),
                "{bin} -j{j}: not the reference's bytes"
            );
        }
    }
}

/// `--stats` says when the units were merged (and so encoded on one thread).
#[test]
fn stats_say_when_units_were_merged() {
    let input = corpus_file("fixtures/bin/prog.clang-O2-thinlto.exe");
    let r = run(&["encode", &s(&input), "--stats", "--json"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let all = String::from_utf8_lossy(&r.stdout).into_owned() + &String::from_utf8_lossy(&r.stderr);
    assert!(
        all.contains("\"merged_units\":1") || all.contains("\"merged_units\": 1"),
        "{all}"
    );
    let plain = corpus_file("fixtures/bin/prog.gcc-O2.exe");
    let r = run(&["encode", &s(&plain), "--stats", "--json"]);
    let all = String::from_utf8_lossy(&r.stdout).into_owned() + &String::from_utf8_lossy(&r.stderr);
    assert!(
        all.contains("\"merged_units\":0") || all.contains("\"merged_units\": 0"),
        "{all}"
    );
}

/// A merged file is one unit, so the collapse of repeated units stays off
/// even where its units repeat (its `.debug_info` twice over, as
/// benches/mem-scale.py makes it: it had doubled the ThinLTO kernel's peak
/// there for nothing).
#[test]
fn a_merged_file_whose_units_repeat_is_not_collapsed() {
    if !have_tool("objcopy", "--version") {
        eprintln!("skipped: objcopy not found");
        return;
    }
    let dir = scratch("lto-repeated-units");
    with_info_twice(
        &corpus_file("fixtures/bin/prog.clang-O2-thinlto.exe"),
        &dir.join("twice"),
    );
    let r = run(&[
        "encode",
        &s(&dir.join("twice")),
        "--stats",
        "--json",
        "-o",
        &s(&dir.join("out.btf")),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stderr).unwrap();
    assert_eq!(
        (&v["counts"]["merged_units"], &v["counts"]["collapsing"]),
        (&serde_json::json!(1), &serde_json::json!(0)),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Type units in COMDAT sections are passed over as the reference passes
/// them over; the loss is said on stderr, the bytes are the reference's.
#[test]
fn lost_type_units_are_reported_and_the_bytes_kept() {
    crate::needs_corpus!();
    for bin in [
        "structs_unions.gcc-O2-tu.o",
        "structs_unions.gcc-O2-dwarf4-tu.o",
        "prog.gcc-O2-tu.exe",
    ] {
        let (code, stderr, out) = pahole(bin, "2");
        assert_eq!(code, Some(0), "{bin}: {stderr}");
        assert!(
            stderr.contains("left unresolved, as pahole v1.31 leaves them"),
            "{bin}: {stderr}"
        );
        let stem = bin.rsplit_once('.').unwrap().0;
        assert!(
            out == Some(expected(&format!("{stem}.kernel.btf"))),
            "{bin}: not the reference's bytes"
        );
    }
    // Without type units, nothing is said.
    let (code, stderr, _) = pahole("structs_unions.gcc-O2.o", "2");
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
}

/// Where the reference crashes (DWARF 4 `.debug_types` in a linked file)
/// or fails (clang's nameless class declarations), nothing is written,
/// the exit is 2 and the one line says why.
#[test]
fn what_the_reference_cannot_encode_is_refused() {
    crate::needs_corpus!();
    for (bin, says) in [
        ("prog.gcc-O2-dwarf4-tu.exe", ".debug_types: DWARF 4 type units"),
        ("cxx_basics.clang++-O2-tu.o", "declaration without a name"),
        ("cxx_basics.clang++-O2-dwarf4-tu.o", "declaration without a name"),
    ] {
        let (code, stderr, out) = pahole(bin, "2");
        assert_eq!(code, Some(2), "{bin}: {stderr}");
        assert!(out.is_none(), "{bin}: wrote output");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{bin}: {stderr}");
        assert!(stderr.contains(says), "{bin}: {stderr}");
    }
}

/// `encode --type-units=resolve` on `bin`: (exit code, stderr, output).
fn resolve(bin: &str, jobs: &str) -> (Option<i32>, String, Option<Vec<u8>>) {
    let dir = scratch(&format!("tu-resolve-{bin}-{jobs}"));
    let out = dir.join("out.btf");
    let input = corpus_file(&format!("fixtures/bin/{bin}"));
    let r = run(&[
        "encode",
        &s(&input),
        &KERNEL.replace("--btf_features", "--btf-features"),
        &format!("-j{jobs}"),
        "--type-units",
        "resolve",
        "-o",
        &s(&out),
    ]);
    let bytes = std::fs::read(&out).ok();
    let _ = std::fs::remove_dir_all(&dir);
    (r.status.code(), String::from_utf8_lossy(&r.stderr).into_owned(), bytes)
}

/// Beyond the reference: with type units resolved, each input gives the
/// types of the same source built without `-fdebug-types-section` (the
/// corpus's reference BTF of that build): `btfkit diff` finds them
/// equivalent. The bytes differ in type order only: a type-unit type comes
/// after its compile unit's own types, where gcc's plain DWARF defines it
/// in place. The same bytes at -j1 and -j2; the kernel accepts the C ones
/// (the reference's output of the type-unit builds it refuses).
#[test]
fn resolved_type_units_give_the_types_of_the_plain_build() {
    crate::needs_corpus!();
    for (tu, plain, kernel_accepts) in [
        ("structs_unions.gcc-O2-tu.o", "structs_unions.gcc-O2", true),
        ("prog.gcc-O2-tu.exe", "prog.gcc-O2", true),
        ("cu_pair_a.gcc-O2-tu.o", "cu_pair_a.gcc-O2", true),
        ("cu_pair_b.gcc-O2-tu.o", "cu_pair_b.gcc-O2", true),
        ("multi_cu_pair.gcc-O2-tu.ld-r.o", "multi_cu_pair.gcc-O2.ld-r", true),
        ("cxx_basics.clang++-O2-tu.o", "cxx_basics.clang++-O2", false),
    ] {
        let (code, stderr, one) = resolve(tu, "1");
        assert_eq!(code, Some(0), "{tu}: {stderr}");
        assert!(stderr.is_empty(), "{tu}: {stderr}");
        let one = one.unwrap();
        assert!(
            resolve(tu, "2").2.as_deref() == Some(&one[..]),
            "{tu}: -j2 differs from -j1"
        );
        let dir = scratch(&format!("tu-diff-{tu}"));
        let ours = dir.join("ours.btf");
        std::fs::write(&ours, &one).unwrap();
        let theirs = corpus_file(&format!("expected/fixtures/{plain}.kernel.btf"));
        let d = run(&["diff", &s(&theirs), &s(&ours)]);
        assert_eq!(d.status.code(), Some(0), "{tu}: {}", String::from_utf8_lossy(&d.stdout));
        if kernel_accepts && have_kernel_btf_load() {
            let v = run(&["verify", &s(&ours)]);
            assert!(v.status.success(), "{tu}: {}", String::from_utf8_lossy(&v.stdout));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// DWARF 4 `.debug_types` are not resolved (yet): refused, not guessed.
#[test]
fn dwarf4_type_units_are_not_resolved() {
    crate::needs_corpus!();
    for bin in ["structs_unions.gcc-O2-dwarf4-tu.o", "prog.gcc-O2-dwarf4-tu.exe"] {
        let (code, stderr, out) = resolve(bin, "2");
        assert_eq!(code, Some(2), "{bin}: {stderr}");
        assert!(
            out.is_none() && stderr.contains("DWARF 5 type units only"),
            "{bin}: {stderr}"
        );
    }
}

/// Whether this process may load BTF into the kernel (root, bpf(2) there).
fn have_kernel_btf_load() -> bool {
    std::path::Path::new("/sys/kernel/btf/vmlinux").exists() && common::is_root()
}
