//! ELF open and section loading on arbitrary bytes: `ElfInfo::load` (section
//! table, symbols, debug sections with decompression and ET_REL
//! relocations), the ELF function table and the `.BTF`/`.BTF.base` lookup.
//! Errors are fine, panics are not; and where the file both loads and takes
//! a new `.BTF` (the in-place rewrite), that `.BTF` reads back unchanged.
//! The body is `btfkit::testing::elf_open::check_open`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    btfkit::testing::elf_open::check_open(data);
});
