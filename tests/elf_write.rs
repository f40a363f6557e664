//! Native .BTF/.BTF.base writing on a real module: the sections read back
//! with objcopy, and `readelf -a` reads the result without a warning.

mod common;

use std::process::Command;

use btfkit::elf::write::set_sections;

#[test]
fn module_gets_new_btf_sections_readelf_clean() {
    crate::needs_corpus!();
    let ko = common::corpus_file("kernel/modules/fou.ko");
    let data = std::fs::read(&ko).unwrap();
    let btf = std::fs::read(common::corpus_file("expected/modules/fou.kernel.inplace.BTF")).unwrap();
    let base = std::fs::read(common::corpus_file("expected/modules/fou.kernel.inplace.BTF.base")).unwrap();
    let out = set_sections(&data, &[(".BTF", &btf), (".BTF.base", &base)]).unwrap();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("fou-inplace.ko");
    std::fs::write(&path, &out).unwrap();
    let r = Command::new("readelf")
        .arg("-a")
        .arg("-W")
        .arg(&path)
        .output()
        .expect("readelf (binutils)");
    let stderr = String::from_utf8_lossy(&r.stderr);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{stderr}");
    assert!(!stderr.contains("Warning") && !stdout.contains("Warning"), "{stderr}");
    for (sec, want) in [(".BTF", &btf), (".BTF.base", &base)] {
        let dump = dir.join(format!("dump{sec}"));
        let st = Command::new("objcopy")
            .arg(format!("--dump-section={sec}={}", dump.display()))
            .arg(&path)
            .arg(dir.join("objcopy-out.ko"))
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(&std::fs::read(&dump).unwrap(), want, "{sec}");
    }
    // The module's other sections are untouched.
    let a = object::read::File::parse(&*data).unwrap();
    let b = object::read::File::parse(&*out).unwrap();
    use object::{Object, ObjectSection};
    for s in a.sections() {
        let name = s.name().unwrap();
        if name == ".BTF" || name == ".shstrtab" {
            continue;
        }
        let t = b.section_by_index(s.index()).unwrap();
        assert_eq!(t.name().unwrap(), name);
        assert_eq!(s.data().unwrap(), t.data().unwrap(), "{name}");
    }
}
