//! Limits the BTF format imposes (issue #8), on inputs compiled here from
//! generated C with `gcc -g -O0 -c` (skipped, loudly, without gcc).
//!
//! What pahole v1.31 does on each was found by running it
//! (`/work/ref/dwarves/build/pahole -J --btf_encode_detached=OUT X.o`, with
//! and without `--btf_features=…all…`) on these same files (gcc 12.2.0,
//! Debian 12) and comparing with `cmp`; `btfkit verify` (the kernel's
//! BPF_BTF_LOAD) judged the outputs:
//!
//! - more than 65535 struct/union members, enumerators (ENUM and ENUM64) or
//!   parameters of a function *type*: the reference keeps the first
//!   `count mod 65536` (vlen is 16 bits and wraps; every name still goes
//!   into the string section). Valid BTF; btfkit writes the same bytes.
//!   Before dedup libbpf's buffer still holds every entry behind the wrapped
//!   vlen (invalid BTF); btfkit writes only the kept ones, so its
//!   `--no-dedup` output is valid too.
//! - more than 65535 variables in one section (`global_var`): the reference
//!   counts them in 16 bits, keeps the first `n mod 65536` met, sorts those
//!   and sizes the DATASEC by the last of them; btfkit writes the same bytes
//!   (it used to size the DATASEC by all of them). At exactly 65536 the
//!   reference writes an empty DATASEC sized from memory outside its list;
//!   btfkit refuses the input.
//! - a function (DW_TAG_subprogram) with more than 65535 parameters: the
//!   reference writes a FUNC_PROTO the kernel refuses ("Invalid arg#257");
//!   btfkit refuses the input.
//! - a bitfield more than 2^24 bits (2 MiB) into its struct: the reference
//!   prints "Error emitting field" and exits 0 without writing anything;
//!   btfkit refuses the input (exit 2).
//! - a plain member past 2^24 bits in a struct that has a bitfield
//!   (kind_flag: 24-bit offsets): the reference cuts the offset, and its top
//!   bit becomes a 1-bit bitfield size (valid BTF, wrong layout); a member
//!   2^32 bits (512 MiB) or more into its struct: the reference cuts the
//!   offset to 32 bits (a wrong layout the kernel accepts, or one it refuses
//!   with "Invalid member bits_offset"). btfkit refuses these inputs rather
//!   than write a wrong layout: a deliberate departure from the reference's
//!   bytes (no corpus file has a struct over 2 MiB).
//! - more types than the format allows (31-bit ids): cannot be produced for
//!   real; `encode::tests::more_types_than_the_format_allows…` covers it.

use std::path::{Path, PathBuf};

use crate::common::*;

const N: usize = 70_000;

fn encode(obj: &Path) -> (std::process::Output, PathBuf) {
    let out = obj.with_extension("btf");
    let r = run(&["pahole", "-J", &format!("--btf_encode_detached={}", s(&out)), &s(obj)]);
    (r, out)
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Encodes, expects the reference's bytes (by SHA-256) and, as root, the
/// kernel's acceptance.
fn expect_reference_bytes(obj: &Path, want: &str) {
    let (r, out) = encode(obj);
    assert!(
        r.status.success(),
        "{}: {}",
        obj.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(sha256(&bytes), want, "{}: not the reference's bytes", obj.display());
    if crate::common::is_root() {
        let v = run(&["verify", &s(&out)]);
        assert!(
            v.status.success(),
            "{}: kernel refused: {}",
            obj.display(),
            String::from_utf8_lossy(&v.stdout)
        );
    }
}

/// Encoding fails: exit 2, one line naming the file and `what`, no output.
fn expect_refusal(obj: &Path, what: &[&str]) {
    let (r, out) = encode(obj);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{}: {err}", obj.display());
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.contains(&s(obj)), "file not named: {err}");
    for w in what {
        assert!(err.contains(w), "`{w}` not in: {err}");
    }
    assert!(!out.exists(), "{}: output written", obj.display());
}

fn many(f: impl Fn(usize) -> String) -> String {
    (0..N).map(f).collect()
}

#[test]
fn more_than_65535_members_enumerators_and_type_parameters_keep_count_mod_65536() {
    let dir = scratch("limits-vlen");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "struct",
            format!(
                "struct big {{\n{}}};\nstruct big v;\n",
                many(|i| format!(" int m{i};\n"))
            ),
            "6aad777dc5e5bb6ff4143d5e5a9f1e59e098b329b3d7cd0a4e088aa24e9a950e",
        ),
        (
            "union",
            format!("union big {{\n{}}};\nunion big v;\n", many(|i| format!(" int m{i};\n"))),
            "ed244f92e3685e2e32223db8837490e7202e46ccfef2f2aaac575d7d6f882cf9",
        ),
        (
            "enum",
            format!("enum big {{\n{}}};\nenum big v;\n", many(|i| format!(" E{i},\n"))),
            "858c91be807dc520f6763eb037f4863782cc55c3a3e7dedfaa3b550e32b5d0a9",
        ),
        (
            "enum64",
            format!(
                "enum big {{\n{}}};\nenum big v;\n",
                many(|i| if i == 0 {
                    " E0 = 1ULL << 40,\n".into()
                } else {
                    format!(" E{i} = {i}ULL << 33,\n")
                })
            ),
            "4126e4d340824d75ce3a044ef2642df2f4dae996ad342db445a0d7be14cfca7a",
        ),
        (
            "fnptr",
            format!("int (*fp)({});\n", vec!["int"; N].join(", ")),
            "9faf58e31255803a977cafecadabffda1606b36f81c983247f4d848d3d1486f3",
        ),
    ];
    for (stem, src, want) in cases {
        let Some(o) = gcc_object(&dir, stem, &src) else { return };
        expect_reference_bytes(&o, want);
        // The rule itself, independent of the bytes: vlen 70000 mod 65536.
        let btf = btfkit::btf::read::parse(&std::fs::read(o.with_extension("btf")).unwrap()).unwrap();
        let vlens: Vec<u32> = btf.own_ids().map(|id| btf.ty(id).vlen()).collect();
        assert!(vlens.contains(&((N % 65536) as u32)), "{stem}: vlens {vlens:?}");
        // BTF 2026 with its layout section (24-bit vlen): the real count,
        // every entry kept.
        let wide = dir.join(format!("{stem}.layout.btf"));
        let r = run(&["encode", &s(&o), "--btf-features", "default,layout", "-o", &s(&wide)]);
        assert!(r.status.success(), "{stem}: {}", String::from_utf8_lossy(&r.stderr));
        let btf = btfkit::btf::read::parse(&std::fs::read(&wide).unwrap()).unwrap();
        assert!(btf.format().layout().is_some());
        let vlens: Vec<u32> = btf.own_ids().map(|id| btf.ty(id).vlen()).collect();
        assert!(vlens.contains(&(N as u32)), "{stem} with layout: vlens {vlens:?}");
        // Without dedup the BTF is valid as well (it was not: every entry
        // was written behind the wrapped vlen).
        let raw = dir.join(format!("{stem}.nodedup.btf"));
        let r = run(&["encode", &s(&o), "--no-dedup", "-o", &s(&raw)]);
        assert!(r.status.success(), "{stem}: {}", String::from_utf8_lossy(&r.stderr));
        btfkit::btf::read::parse(&std::fs::read(&raw).unwrap()).unwrap_or_else(|e| panic!("{stem} --no-dedup: {e}"));
        if crate::common::is_root() {
            let v = run(&["verify", &s(&raw)]);
            assert!(
                v.status.success(),
                "{stem} --no-dedup: {}",
                String::from_utf8_lossy(&v.stdout)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_function_with_more_than_65535_parameters_is_refused() {
    let dir = scratch("limits-params");
    let params: Vec<String> = (0..N).map(|i| format!("int a{i}")).collect();
    let Some(o) = gcc_object(
        &dir,
        "func",
        &format!("int f({}) {{ return a0; }}\n", params.join(", ")),
    ) else {
        return;
    };
    expect_refusal(&o, &["`f`", "70000 parameters", "65535"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn member_offsets_beyond_the_offset_field() {
    let dir = scratch("limits-offsets");
    // A bitfield just inside the 24-bit field: encoded as the reference does.
    let Some(o) = gcc_object(
        &dir,
        "bf-inside",
        "struct s { char pad[(1 << 21) - 1]; int bf : 3; int after : 5; };\nstruct s *p;\n",
    ) else {
        return;
    };
    expect_reference_bytes(&o, "5e678962b13d62a1c37b6f725936ea3ab043ac226eb60a0667d70f68d4811273");
    // A bitfield 3 MiB in.
    let o = gcc_object(
        &dir,
        "bf-past",
        "struct s { char pad[3 << 20]; int bf : 3; int after; };\nstruct s *p;\n",
    )
    .unwrap();
    expect_refusal(&o, &["`bf`", "3145728 bytes", "24-bit"]);
    // A plain member 3 MiB into a struct that has a bitfield.
    let o = gcc_object(
        &dir,
        "after-bf",
        "struct s { int bf : 3; char pad[3 << 20]; int after; };\nstruct s *p;\n",
    )
    .unwrap();
    expect_refusal(&o, &["`after`", "3145732 bytes", "24-bit", "bitfields"]);
    // A plain member 600 MiB in (2^32 bits is 512 MiB).
    let o = gcc_object(
        &dir,
        "huge",
        "struct h { char pad[600 << 20]; int x; };\nstruct h *p;\n",
    )
    .unwrap();
    expect_refusal(&o, &["`x`", "629145600 bytes", "32-bit"]);
    // Exactly at 2^32 bits.
    let o = gcc_object(
        &dir,
        "at-4g-bits",
        "struct h { char pad[(1u << 29) - 4]; int x; long y; };\nstruct h *p;\n",
    )
    .unwrap();
    expect_refusal(&o, &["`y`", "536870912 bytes", "32-bit"]);
    let _ = std::fs::remove_dir_all(&dir);
}

const GLOBAL_VARS: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,global_var";

#[test]
fn more_than_65535_variables_in_a_section() {
    let dir = scratch("limits-vars");
    let src = |n: usize| {
        (0..n).map(|i| format!("int v{i} = {};\n", i + 1)).collect::<String>() + "int main(void){return v0;}\n"
    };
    let Some(o) = gcc_object(&dir, "vars", &src(N)) else {
        return;
    };
    let out = dir.join("vars.btf");
    let r = run(&[
        "pahole",
        "-J",
        GLOBAL_VARS,
        &format!("--btf_encode_detached={}", s(&out)),
        &s(&o),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(
        sha256(&bytes),
        "96ff6c926b9a71f0a0dac663ed0e1bd8e01667d2efb0fce977f64e7e4522af7d",
        "not the reference's bytes"
    );
    let btf = btfkit::btf::read::parse(&bytes).unwrap();
    let last = btf.ty(btfkit::btf::TypeId::new(btf.type_count()));
    assert_eq!(
        (last.kind(), last.vlen(), last.size()),
        (btfkit::btf::Kind::Datasec, 4464, 4464 * 4)
    );
    if crate::common::is_root() {
        let v = run(&["verify", &s(&out)]);
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    }
    let o = gcc_object(&dir, "vars65536", &src(65536)).unwrap();
    let out = dir.join("vars65536.btf");
    let r = run(&[
        "pahole",
        "-J",
        GLOBAL_VARS,
        &format!("--btf_encode_detached={}", s(&out)),
        &s(&o),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&s(&o)) && err.contains("section .data: 65536 variables"),
        "{err}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
