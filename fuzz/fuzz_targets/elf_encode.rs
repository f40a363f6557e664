//! ELF open, section loading (decompression, relocations), DWARF decode of
//! every CU and the encoder, on arbitrary bytes: an error, never a panic,
//! and any BTF produced reads back.
#![no_main]

use std::path::Path;

use btfkit::btf::{read, write};
use btfkit::elf::debug::ElfInfo;
use btfkit::encode::{Options, encode_elf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz-input.o");
    let Ok(elf) = ElfInfo::load(path, data) else { return };
    // A supplementary file a damaged link names is not looked for on this
    // machine's disk: the fuzzer stays hermetic (the link is still parsed).
    let alt = btfkit::elf::alt::AltLookup { file: Some("/nonexistent/btfkit-fuzz.sup".into()), debug_root: None };
    let opts = Options { no_funcs: false, alt, ..Options::default() };
    if let Ok(enc) = encode_elf(path, &elf, data, None, &opts) {
        let bytes = write::to_bytes(&enc.btf);
        read::parse(&bytes).expect("encoder output must be valid BTF");
    }
});
