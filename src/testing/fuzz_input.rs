//! The input format of the `dwarf_cu` fuzz target, shared by the target, its
//! seed builder (`examples/fuzz_seed.rs`) and the regression tests, so that a
//! checked-in crash replays exactly as the fuzzer ran it.
//!
//! Layout: one flags byte, then `NSECS` lengths as little-endian `u32`,
//! then the section bytes back to back: the debug sections in
//! `elf::debug::LOADED` order, then the symbols. A length past
//! the end of the input is cut to what is left. The last "section" is a list
//! of NUL-separated symbol names: they become the function table and the
//! object symbols of a synthetic ELF whose only section, `.data`, covers the
//! addresses the ET_REL layout of `elf::debug` gives variables.

use std::path::Path;

use crate::btf::{self, Endian};
use crate::elf::debug::{DebugSections, LOADED, SectionBytes};
use crate::elf::debug::{ElfInfo, SHT_PROGBITS, SectionInfo};
use crate::elf::functab::{FuncTable, func_key};
use crate::encode::{Options, encode_elf, features::FEATURE_NAMES};

/// Sections of the header: the debug sections in `elf::debug::LOADED`
/// order, then the symbol names.
const NSECS: usize = LOADED.len() + 1;
/// Flag bits.
pub const BIG_ENDIAN: u8 = 1;
pub const FUNCS: u8 = 2;
pub const ALL_FEATURES: u8 = 4;
pub const AARCH64: u8 = 8;
/// Encode as the next reference does (its parameter analysis, BTF 2026).
pub const NEXT: u8 = 16;

const HEADER: usize = 1 + 4 * NSECS;
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

/// A parsed input: the sections borrow from it.
pub struct FuzzInput<'a> {
    pub flags: u8,
    pub debug: DebugSections<'a>,
    pub symbols: Vec<&'a [u8]>,
}

/// Splits `data`; `None` if it is shorter than the header.
pub fn parse(data: &[u8]) -> Option<FuzzInput<'_>> {
    let (head, mut rest) = data.split_at_checked(HEADER)?;
    let mut secs: Vec<&[u8]> = Vec::with_capacity(NSECS);
    for i in 0..NSECS {
        let len = u32::from_le_bytes(head[1 + 4 * i..5 + 4 * i].try_into().unwrap()) as usize;
        let (s, r) = rest.split_at(len.min(rest.len()));
        secs.push(s);
        rest = r;
    }
    let debug = DebugSections::from_order(std::array::from_fn(|i| SectionBytes::Borrowed(secs[i])));
    let symbols = secs[LOADED.len()]
        .split(|&c| c == 0)
        .filter(|n| !n.is_empty())
        .collect();
    Some(FuzzInput {
        flags: head[0],
        debug,
        symbols,
    })
}

/// The bytes of an input (what `parse` reads back).
pub fn build(flags: u8, debug: &DebugSections<'_>, symbols: &[&[u8]]) -> Vec<u8> {
    let syms: Vec<u8> = symbols.iter().flat_map(|s| s.iter().copied().chain([0])).collect();
    let mut secs: Vec<&[u8]> = debug.in_order().iter().map(|c| &***c).collect();
    secs.push(&syms);
    let mut out = vec![flags];
    for s in &secs {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    }
    for s in secs {
        out.extend_from_slice(s);
    }
    out
}

impl<'a> FuzzInput<'a> {
    /// The synthetic ELF around the sections (64-bit, x86-64 or AArch64).
    pub fn elf_info(&self) -> ElfInfo<'_> {
        let debug = DebugSections::from_order(self.debug.in_order().map(|c| SectionBytes::Borrowed(&c[..])));
        let funcs = self
            .symbols
            .iter()
            .enumerate()
            .filter_map(|(i, &n)| func_key(n).map(|k| (k, n, 0x10000 + 16 * i as u64)))
            .collect();
        let mut objects: Vec<(&[u8], u32)> = self.symbols.iter().map(|&n| (n, 1)).collect();
        objects.sort_unstable();
        let sec = |name: &'static [u8], sh_type, size, flags| SectionInfo {
            name,
            addr: 0x10000 * (size != 0) as u64,
            size,
            sh_type,
            flags,
        };
        let endian = if self.flags & BIG_ENDIAN != 0 {
            Endian::Big
        } else {
            Endian::Little
        };
        let machine = if self.flags & AARCH64 != 0 {
            EM_AARCH64
        } else {
            EM_X86_64
        };
        let mut elf = ElfInfo::synthetic(endian, machine, false, debug);
        elf.sections = vec![sec(b"", 0, 0, 0), sec(b".data", SHT_PROGBITS, 1 << 32, 3)];
        elf.funcs = FuncTable::build(funcs);
        elf.objects = objects;
        elf
    }
}

/// The fuzz target's body: encodes the input's sections (decode of every
/// unit, per-CU encode, merge, functions if flagged, one thread); panics if
/// the encoder does, or if BTF it produced does not read back.
pub fn check(data: &[u8]) {
    let Some(input) = parse(data) else { return };
    let elf = input.elf_info();
    let mut opts = Options {
        no_funcs: input.flags & FUNCS == 0,
        ..Options::default()
    };
    if input.flags & NEXT != 0 {
        opts.reference = crate::encode::Reference::Next;
    }
    if input.flags & ALL_FEATURES != 0 {
        opts.features.apply_list(&FEATURE_NAMES.join(","));
    }
    if let Ok(enc) = encode_elf(Path::new("fuzz-input"), &elf, &[], None, &opts) {
        let bytes = btf::write::to_bytes(&enc.btf);
        btf::read::parse(&bytes).expect("encoder output must be valid BTF");
    }
}
