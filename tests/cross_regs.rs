//! The "parameter not in its expected register" rule end to end, per ABI:
//! a small source compiled by each (cross) gcc, encoded with the kernel
//! profile. `mixed(double, int, ptr)` and `entry(ptr, double, int)` pass the
//! double in a floating-point register, so the following integers sit one
//! integer register earlier than their position says: x86-64, aarch64 and
//! s390x drop both functions; i686 (no register analysis) and powerpc64
//! (analysed, no expected register) keep them. `plain` is kept everywhere.
//! Verified against pahole v1.31 with Debian bookworm's gcc 12 cross compilers.
//! Compilers that are missing are skipped with a message; the Debian packages
//! are gcc-aarch64-linux-gnu gcc-s390x-linux-gnu gcc-i686-linux-gnu gcc-powerpc64-linux-gnu.

mod common;

use std::process::Command;

use common::*;

const FEATURES: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";

const SRC: &str = r#"
struct acc { long total; int n; };
__attribute__((noinline)) int mixed(double scale, int count, struct acc *a)
{
	a->total += (long)(scale * count);
	return a->n += count;
}
__attribute__((noinline)) int plain(struct acc *a, int count)
{
	a->n += count;
	return a->n;
}
int entry(struct acc *a, double s, int c)
{
	return mixed(s, c, a) + plain(a, c);
}
"#;

/// (compiler, FUNC names expected in the output)
const CASES: &[(&str, &[&str])] = &[
    ("gcc", &["plain"]),
    ("aarch64-linux-gnu-gcc", &["plain"]),
    ("s390x-linux-gnu-gcc", &["plain"]),
    ("i686-linux-gnu-gcc", &["entry", "mixed", "plain"]),
    ("powerpc64-linux-gnu-gcc", &["entry", "mixed", "plain"]),
];

#[test]
fn wrong_register_functions_dropped_per_abi() {
    let dir = scratch("cross-regs");
    let src = dir.join("regs.c");
    std::fs::write(&src, SRC).unwrap();
    let mut ran = 0;
    for &(cc, want) in CASES {
        if !have_tool(cc, "--version") {
            eprintln!("SKIPPED cross_regs for {cc}: compiler not found (Debian package gcc-*-linux-gnu)");
            continue;
        }
        let obj = dir.join(format!("regs.{cc}.o"));
        let r = Command::new(cc)
            .args(["-g", "-O2", "-c"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .output()
            .unwrap();
        assert!(r.status.success(), "{cc}: {}", String::from_utf8_lossy(&r.stderr));
        let out = dir.join(format!("regs.{cc}.btf"));
        let r = run(&[
            "pahole",
            "-J",
            FEATURES,
            &format!("--btf_encode_detached={}", s(&out)),
            &s(&obj),
        ]);
        assert!(r.status.success(), "{cc}: {}", String::from_utf8_lossy(&r.stderr));
        let r = run(&["dump", &s(&out)]);
        assert!(r.status.success(), "{cc}: {}", String::from_utf8_lossy(&r.stderr));
        let text = String::from_utf8(r.stdout).unwrap();
        let funcs: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                l.split_once("] FUNC '")
                    .map(|(_, rest)| rest.split('\'').next().unwrap())
            })
            .collect();
        assert_eq!(funcs, want, "{cc}:\n{text}");
        ran += 1;
    }
    if ran < CASES.len() {
        eprintln!("SKIPPED cross_regs: only {ran} of {} compilers available", CASES.len());
    }
}
