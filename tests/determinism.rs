//! The same bytes at any thread count.

mod common;

use common::*;

fn encode_at(input: &str, base: Option<&str>, jobs: &str, dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join(format!("out.j{jobs}.btf"));
    let mut args = vec!["pahole".to_string(), "--no-dedup".into(), "--no-funcs".into(), "-J".into(), format!("-j{jobs}")];
    args.push("--btf_features=+reproducible_build".into());
    if let Some(b) = base {
        args.push(format!("--btf_base={b}"));
    }
    args.push(format!("--btf_encode_detached={}", s(&out)));
    args.push(input.to_string());
    let r = btfkit().args(&args).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::read(&out).unwrap()
}

#[test]
fn multi_cu_fixture_same_bytes_at_any_jobs() {
    let dir = scratch("det-fixture");
    let input = s(&crate_dir().join("data/multi_types.gcc-O2.ld-r.o"));
    let one = encode_at(&input, None, "1", &dir);
    assert!(one.len() > 1000);
    for j in ["2", "8"] {
        assert!(one == encode_at(&input, None, j, &dir), "-j{j} differs from -j1");
    }
}

#[test]
fn module_same_bytes_at_any_jobs() {
    let dir = scratch("det-module");
    let input = s(&corpus_file("kernel/modules/x_tables.ko"));
    let base = s(&corpus_file("expected/kernel/vmlinux.default.btf"));
    let one = encode_at(&input, Some(&base), "1", &dir);
    assert!(one.len() > 1000);
    for j in ["2", "8"] {
        assert!(one == encode_at(&input, Some(&base), j, &dir), "-j{j} differs from -j1");
    }
}
