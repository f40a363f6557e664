//! The body of the `elf_open` fuzz target, here so that the regression
//! tests replay a checked-in input exactly as the fuzzer ran it.

use std::path::Path;

use crate::elf::debug::ElfInfo;
use crate::elf::functab::FuncTable;
use crate::elf::{load_btf_bytes, section_data, write::set_sections};

/// A one-type BTF (`int`, 4 bytes, signed), little-endian.
const SMALL_BTF: &[u8] = &[
    0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 5, 0, 0, 0, // header
    1, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 32, 0, 0, 1, // [1] INT int size=4 bits=32 signed
    0, b'i', b'n', b't', 0, // strings
];

/// ELF open and section loading on arbitrary bytes: `ElfInfo::load`, the
/// function table, the `.BTF`/`.BTF.base` lookup. Panics if any of them
/// does, or if a file that loads and takes a new `.BTF` (the in-place
/// rewrite) does not give that `.BTF` back.
pub fn check_open(data: &[u8]) {
    let path = Path::new("fuzz-input.o");
    let loaded = ElfInfo::load(path, data);
    if let Ok(elf) = &loaded {
        for (i, s) in elf.sections.iter().enumerate() {
            let _ = elf.section_of(s.addr);
            let _ = elf.has_object_symbol(s.name, i as u32);
        }
        for e in &elf.funcs.entries {
            assert!(elf.funcs.lookup(e.key).is_some());
        }
    }
    let _ = FuncTable::from_elf(data);
    let _ = load_btf_bytes(path, data, None);
    if loaded.is_ok()
        && let Ok(new) = set_sections(data, &[(".BTF", SMALL_BTF)])
    {
        let obj = object::File::parse(&*new).expect("rewritten ELF must parse");
        let back = section_data(path, &obj, ".BTF")
            .expect("rewritten .BTF must read")
            .expect(".BTF must be there");
        assert_eq!(&*back, SMALL_BTF, "rewritten .BTF differs");
    }
}
