//! ELF with more than 65535 sections (extended numbering: e_shnum 0 and
//! e_shstrndx SHN_XINDEX, the real values in section 0). The file is built
//! cheaply: one small function plus a top-level asm block of 70,000 one-byte
//! sections. Both the detached and the in-place encodings are checked.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const SECTIONS: usize = 70_000;
const FEATURES: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";

/// The reference's (pahole v1.31) detached output for this file, 138 bytes.
const EXPECTED_HEX: &str = "9feb0100180000000000000060000000600000001200000001000000020000040800000004000000020000000000000006000000020000002000000008000000000000010400000020000001000000000000000201000000000000000100000d020000000c000000030000000e0000000000000c040000000070740078007900696e7400700075736500";

const EXPECTED_DUMP: &str = "\
[1] STRUCT 'pt' size=8 vlen=2
\t'x' type_id=2 bits_offset=0
\t'y' type_id=2 bits_offset=32
[2] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED
[3] PTR '(anon)' type_id=1
[4] FUNC_PROTO '(anon)' ret_type_id=2 vlen=1
\t'p' type_id=3
[5] FUNC 'use' type_id=4 linkage=static
";

/// Builds the object in `dir`; None (after a loud message) without gcc.
fn build(dir: &Path) -> Option<std::path::PathBuf> {
    if !have_tool("gcc", "--version") {
        eprintln!("SKIPPED many_sections: gcc not found; this test needs gcc to build its 70,000-section object");
        return None;
    }
    let mut src =
        String::from("struct pt { int x; int y; };\nint use(struct pt *p) { return p->x + p->y; }\n__asm__(\n");
    for i in 0..SECTIONS {
        src.push_str(&format!("\".section .s{i},\\\"a\\\"\\n.byte {}\\n\"\n", i & 255));
    }
    // Back to .text so the compiler's own line info stays in a known section.
    src.push_str("\".text\\n\");\n");
    let c = dir.join("many.c");
    let o = dir.join("many.o");
    std::fs::write(&c, src).unwrap();
    let r = Command::new("gcc")
        .args(["-g", "-O2", "-c"])
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .output()
        .unwrap();
    assert!(r.status.success(), "gcc: {}", String::from_utf8_lossy(&r.stderr));
    Some(o)
}

fn readelf(args: &[&str], file: &Path) -> (String, String) {
    let r = Command::new("readelf")
        .args(args)
        .arg(file)
        .output()
        .expect("readelf (binutils)");
    assert!(
        r.status.success(),
        "readelf {args:?}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    (
        String::from_utf8_lossy(&r.stdout).into_owned(),
        String::from_utf8_lossy(&r.stderr).into_owned(),
    )
}

/// `readelf -h` reports extended numbering: e_shnum 0 with the real count.
fn section_count(file: &Path) -> usize {
    let (h, _) = readelf(&["-h"], file);
    let line = h
        .lines()
        .find(|l| l.contains("Number of section headers"))
        .unwrap()
        .to_string();
    let v = line.split(':').nth(1).unwrap().trim();
    assert!(v.starts_with("0 ("), "not extended numbering: {line}");
    v[3..v.len() - 1].parse().unwrap()
}

fn dump(file: &Path) -> String {
    let r = run(&["dump", &s(file)]);
    assert!(r.status.success(), "dump: {}", String::from_utf8_lossy(&r.stderr));
    String::from_utf8(r.stdout).unwrap()
}

#[test]
fn over_65535_sections_detached_and_in_place() {
    let dir = scratch("many-sections");
    let Some(obj) = build(&dir) else { return };
    let before = section_count(&obj);
    assert!(before > SECTIONS, "{before}");

    let out = dir.join("many.btf");
    let r = run(&[
        "pahole",
        "-J",
        FEATURES,
        &format!("--btf_encode_detached={}", s(&out)),
        &s(&obj),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(dump(&out), EXPECTED_DUMP);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        unhex(EXPECTED_HEX),
        "detached bytes differ from the reference's"
    );

    // In place: one more section, still extended numbering, readelf clean,
    // and the section holds the same bytes as the detached file.
    let r = run(&["pahole", "-J", FEATURES, &s(&obj)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(section_count(&obj), before + 1);
    let (all, err) = readelf(&["-a", "-W"], &obj);
    assert!(!err.contains("Warning") && !err.contains("Error"), "{err}");
    assert!(!all.contains("Warning"), "readelf -a warns");
    assert!(all.contains(" .BTF "), "no .BTF in the section list");
    let sec = dir.join("BTF.dump");
    let st = Command::new("objcopy")
        .arg(format!("--dump-section=.BTF={}", sec.display()))
        .arg(&obj)
        .arg(dir.join("objcopy-out.o"))
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read(&sec).unwrap(), unhex(EXPECTED_HEX), "in-place .BTF");
}
