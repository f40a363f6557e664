//! Distilled base BTF against libbpf's own results: the selftest snapshot
//! (split → distilled base + new split, exact bytes) and the reference's
//! in-place module sections (distill of the detached split BTF gives the
//! `.BTF` and `.BTF.base` bytes pahole wrote into fou.ko and zsmalloc.ko).

mod common;

use std::sync::Arc;

use btfkit::btf::{distill::distill, read, write};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn selftest_snapshot_bytes() {
    crate::needs_corpus!();
    let text = std::fs::read_to_string(common::corpus_dir().join("btf-split-distill-snapshots.json")).unwrap();
    let snaps: serde_json::Value = serde_json::from_str(&text).unwrap();
    let snaps = snaps.as_array().unwrap();
    let find = |sub: &str, seq: u64| {
        snaps
            .iter()
            .find(|s| s["subtest"] == sub && s["snapshot_seq"] == seq)
            .unwrap_or_else(|| panic!("{sub} {seq}"))
    };
    let before = find("distilled_base", 1);
    let after = find("distilled_base", 2);
    let base = Arc::new(read::parse(&hex(before["base"]["raw_hex_pinned"].as_str().unwrap())).unwrap());
    let split = read::parse_split(&hex(before["btf"]["raw_hex_pinned"].as_str().unwrap()), Some(base)).unwrap();
    let (nb, ns) = distill(&split).unwrap();
    assert_eq!(
        write::to_bytes(&nb),
        hex(after["base"]["raw_hex_pinned"].as_str().unwrap()),
        "distilled base"
    );
    assert_eq!(
        write::to_bytes(&ns),
        hex(after["btf"]["raw_hex_pinned"].as_str().unwrap()),
        "new split"
    );
}

#[test]
fn reference_inplace_sections() {
    crate::needs_corpus!();
    let mut checked = 0;
    for module in ["fou", "zsmalloc"] {
        for profile in ["kernel", "default"] {
            let vmlinux = common::corpus_file(&format!("expected/kernel/vmlinux.{profile}.btf"));
            let base = Arc::new(btfkit::elf::load_btf(&vmlinux, None).unwrap());
            let split = btfkit::elf::load_btf(
                &common::corpus_file(&format!("expected/modules/{module}.{profile}.btf")),
                Some(base),
            )
            .unwrap();
            let (nb, ns) = distill(&split).unwrap();
            let want_base = std::fs::read(common::corpus_file(&format!(
                "expected/modules/{module}.{profile}.inplace.BTF.base"
            )))
            .unwrap();
            let want = std::fs::read(common::corpus_file(&format!(
                "expected/modules/{module}.{profile}.inplace.BTF"
            )))
            .unwrap();
            assert!(
                write::to_bytes(&nb) == want_base,
                "{module}.{profile}: .BTF.base differs"
            );
            assert!(write::to_bytes(&ns) == want, "{module}.{profile}: .BTF differs");
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}
