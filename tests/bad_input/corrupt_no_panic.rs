//! Damaged DWARF never makes the encoder panic: bytes of a fixture's debug
//! sections are overwritten at many positions; every run must end with
//! exit 0 (the damage happened to be harmless) or exit 2 with one error line.

use crate::common::*;
use object::{Object, ObjectSection};

#[test]
fn flipped_debug_bytes_give_errors_not_panics() {
    let data = std::fs::read(corpus_file("fixtures/bin/multi_types.gcc-O2.ld-r.o")).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let mut ranges = Vec::new();
    for name in [
        ".debug_info",
        ".debug_abbrev",
        ".debug_str",
        ".symtab",
        ".rela.debug_info",
    ] {
        if let Some(s) = obj.section_by_name(name) {
            ranges.push(s.file_range().unwrap());
        }
    }
    let dir = scratch("corrupt");
    let out = dir.join("out.btf");
    // A fixed pseudo-random walk, so a failure is reproducible.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut errors = 0;
    for round in 0..150 {
        let mut d = data.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (off, len) = ranges[(x % ranges.len() as u64) as usize];
            let pos = off as usize + ((x >> 8) % len.max(1)) as usize;
            d[pos] = (x >> 32) as u8;
        }
        let input = dir.join(format!("c{round}.o"));
        std::fs::write(&input, &d).unwrap();
        let r = run(&[
            "pahole",
            "-J",
            &format!("--btf_encode_detached={}", s(&out)),
            &s(&input),
        ]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(!stderr.contains("panicked"), "round {round}: {stderr}");
        match r.status.code() {
            Some(0) => {}
            Some(2) => {
                errors += 1;
                assert_eq!(stderr.trim_end().lines().count(), 1, "round {round}: {stderr}");
            }
            c => panic!("round {round}: exit {c:?}: {stderr}"),
        }
        let _ = std::fs::remove_file(&input);
        let _ = std::fs::remove_file(&out);
    }
    assert!(errors > 0, "no damage was ever detected");
    let _ = std::fs::remove_dir_all(&dir);
}
