//! What the encoder needs from an ELF file with DWARF: the debug sections
//! (decompressed, and relocated for ET_REL as a linker would), the section
//! headers (for variables), the function table built from `.symtab` and the
//! object symbols (for the offset-0 variable check).
//!
//! Everything here is built once, before the CUs are decoded, and is
//! immutable afterwards, so decode workers share it without locks.

use std::borrow::Cow;
use std::path::Path;

use object::read::elf::{ElfFile, FileHeader, SectionHeader, Sym};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationKind, RelocationTarget};

use super::functab::{FuncTable, func_key};
use crate::btf::Endian;
use crate::error::{Error, Result};

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_NOBITS: u32 = 8;
const SHF_ALLOC: u64 = 2;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
/// Where the synthetic layout of an ET_REL file's allocated sections starts
/// (the reference's libdwfl leaves a red zone below it).
const REL_LAYOUT_BASE: u64 = 0x10000;

/// The DWARF sections the decoder reads. Missing sections are empty.
#[derive(Default)]
pub struct DebugSections<'a> {
    pub info: Cow<'a, [u8]>,
    pub abbrev: Cow<'a, [u8]>,
    pub str: Cow<'a, [u8]>,
    /// Only its headers are read (gimli parses the unit's line program header).
    pub line: Cow<'a, [u8]>,
    pub line_str: Cow<'a, [u8]>,
    pub str_offsets: Cow<'a, [u8]>,
    pub addr: Cow<'a, [u8]>,
    pub loc: Cow<'a, [u8]>,
    pub loclists: Cow<'a, [u8]>,
    pub ranges: Cow<'a, [u8]>,
    pub rnglists: Cow<'a, [u8]>,
}

#[derive(Clone, Debug)]
pub struct SectionInfo<'a> {
    pub name: &'a [u8],
    pub addr: u64,
    pub size: u64,
    pub sh_type: u32,
    pub flags: u64,
}

/// The ELF facts the encoder uses.
pub struct ElfInfo<'a> {
    pub endian: Endian,
    pub is_64: bool,
    pub machine: u16,
    pub is_rel: bool,
    pub has_symtab: bool,
    pub sections: Vec<SectionInfo<'a>>,
    pub funcs: FuncTable<'a>,
    /// STT_OBJECT symbols as (name, section index), sorted.
    pub objects: Vec<(&'a [u8], u32)>,
    pub debug: DebugSections<'a>,
    /// The kernel's "built with LTO" note (type 0x101, owner `Linux`, non-zero
    /// descriptor): the reference then merges all CUs into one.
    pub lto_note: bool,
    /// Set by whoever knows that the bytes given to `load` are a read-only
    /// private file mapping: then pages of sections borrowed from them may be
    /// dropped from memory once used (they are re-read from the file).
    pub file_mapped: bool,
}

impl<'a> ElfInfo<'a> {
    pub fn address_size(&self) -> u8 {
        if self.is_64 { 8 } else { 4 }
    }

    pub fn has_object_symbol(&self, name: &[u8], shndx: u32) -> bool {
        self.objects.binary_search(&(name, shndx)).is_ok()
    }

    /// The section holding address `addr`: the lowest-index PROGBITS or
    /// NOBITS section whose range contains it.
    pub fn section_of(&self, addr: u64) -> Option<u32> {
        self.sections.iter().enumerate().skip(1).find_map(|(i, s)| {
            ((s.sh_type == SHT_PROGBITS || s.sh_type == SHT_NOBITS)
                && s.addr <= addr
                && addr < s.addr.wrapping_add(s.size))
            .then_some(i as u32)
        })
    }

    pub fn load(path: &Path, data: &'a [u8]) -> Result<ElfInfo<'a>> {
        if data.len() < 16 || !data.starts_with(b"\x7fELF") {
            return Err(Error::elf(path, "not an ELF file (no \\x7fELF magic)"));
        }
        let file = object::File::parse(data).map_err(|e| {
            Error::elf(
                path,
                format!("not a readable ELF file (truncated or damaged headers): {e}"),
            )
        })?;
        match &file {
            object::File::Elf32(f) => load_elf(path, f, false),
            object::File::Elf64(f) => load_elf(path, f, true),
            _ => Err(Error::elf(path, "not an ELF file")),
        }
    }
}

fn load_elf<'a, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &ElfFile<'a, H, &'a [u8]>,
    is_64: bool,
) -> Result<ElfInfo<'a>> {
    let e = f.endian();
    let hdr = f.elf_header();
    let machine = hdr.e_machine(e).0;
    let is_rel = hdr.e_type(e) == object::elf::ET_REL;
    let endian = if f.is_little_endian() {
        Endian::Little
    } else {
        Endian::Big
    };

    let mut sections: Vec<SectionInfo<'a>> = Vec::new();
    let table = f.elf_section_table();
    let mut lto_note = false;
    for sh in table.iter() {
        if let Ok(Some(mut notes)) = sh.notes(e, f.data()) {
            while let Ok(Some(n)) = notes.next() {
                let desc = n.desc();
                if n.n_type(e).0 == 0x101
                    && n.name() == b"Linux"
                    && desc.len() >= 4
                    && desc[..4].iter().any(|&b| b != 0)
                {
                    lto_note = true;
                }
            }
        }
    }
    let mut next_addr = REL_LAYOUT_BASE;
    for (i, sh) in table.iter().enumerate() {
        let name = table.section_name(e, sh).unwrap_or(b"");
        let flags: u64 = sh.sh_flags(e).0;
        let size: u64 = sh.sh_size(e).into();
        let mut addr: u64 = sh.sh_addr(e).into();
        if is_rel && i > 0 && flags & SHF_ALLOC != 0 {
            let align: u64 = sh.sh_addralign(e).into();
            let align = align.max(1);
            next_addr = next_addr.div_ceil(align).wrapping_mul(align);
            addr = next_addr;
            next_addr = next_addr.wrapping_add(size);
        }
        sections.push(SectionInfo {
            name,
            addr,
            size,
            sh_type: sh.sh_type(e).0,
            flags,
        });
    }

    let mut funcs = Vec::new();
    let mut objects = Vec::new();
    let mut has_symtab = false;
    if let Some(symtab) = f.symbol_table() {
        has_symtab = true;
        for sym in symtab.symbols() {
            let raw = sym.elf_symbol();
            let name = sym.name_bytes().unwrap_or(b"");
            match raw.st_type().0 {
                STT_FUNC => {
                    if let Some(key) = func_key(name) {
                        funcs.push((key, name, sym.address()));
                    }
                }
                STT_OBJECT => {
                    if let Some(idx) = sym.section_index() {
                        objects.push((name, idx.0 as u32));
                    }
                }
                _ => {}
            }
        }
    }
    objects.sort_unstable();
    let funcs = FuncTable::build(funcs);

    let sym_value = |idx: object::SymbolIndex| -> u64 {
        let Ok(sym) = f.symbol_by_index(idx) else { return 0 };
        let v = sym.address();
        match sym.section_index() {
            Some(s) if is_rel => {
                let sec = &sections.get(s.0);
                match sec {
                    Some(sec) if sec.flags & SHF_ALLOC != 0 => sec.addr.wrapping_add(v),
                    _ => v,
                }
            }
            _ => v,
        }
    };

    let load = |name: &str| -> Result<Cow<'a, [u8]>> {
        let Some(sec) = f.section_by_name(name) else {
            return Ok(Cow::Borrowed(&[]));
        };
        let sec_name = sec.name().unwrap_or(name).to_string();
        let data = sec.uncompressed_data().map_err(|err| {
            Error::elf(
                path,
                format!("section {sec_name}: compressed contents do not inflate: {err}"),
            )
        })?;
        if !is_rel {
            return Ok(data);
        }
        let mut relocs = sec.relocations().peekable();
        if relocs.peek().is_none() {
            return Ok(data);
        }
        let mut buf = data.into_owned();
        for (off, r) in relocs {
            let size = r.size() as usize / 8;
            if !matches!(r.kind(), RelocationKind::Absolute) || !(size == 4 || size == 8) {
                continue;
            }
            let s = match r.target() {
                RelocationTarget::Symbol(idx) => sym_value(idx),
                RelocationTarget::Section(idx) => sections.get(idx.0).map(|s| s.addr).unwrap_or(0),
                _ => 0,
            };
            let off = off as usize;
            let Some(slot) = off.checked_add(size).and_then(|end| buf.get_mut(off..end)) else {
                return Err(Error::elf(
                    path,
                    format!("section {sec_name}: relocation at offset {off:#x} is outside the section"),
                ));
            };
            let implicit = if r.has_implicit_addend() {
                read_word(slot, endian)
            } else {
                0
            };
            let v = s.wrapping_add(r.addend() as u64).wrapping_add(implicit);
            write_word(slot, v, endian);
        }
        Ok(Cow::Owned(buf))
    };

    let debug = DebugSections {
        info: load(".debug_info")?,
        abbrev: load(".debug_abbrev")?,
        str: load(".debug_str")?,
        line: load(".debug_line")?,
        line_str: load(".debug_line_str")?,
        str_offsets: load(".debug_str_offsets")?,
        addr: load(".debug_addr")?,
        loc: load(".debug_loc")?,
        loclists: load(".debug_loclists")?,
        ranges: load(".debug_ranges")?,
        rnglists: load(".debug_rnglists")?,
    };
    Ok(ElfInfo {
        endian,
        is_64,
        machine,
        is_rel,
        has_symtab,
        sections,
        funcs,
        objects,
        debug,
        lto_note,
        file_mapped: false,
    })
}

fn read_word(b: &[u8], e: Endian) -> u64 {
    let mut v = 0u64;
    match e {
        Endian::Little => {
            for (i, &x) in b.iter().enumerate() {
                v |= (x as u64) << (8 * i);
            }
        }
        Endian::Big => {
            for &x in b {
                v = (v << 8) | x as u64;
            }
        }
    }
    v
}

fn write_word(b: &mut [u8], v: u64, e: Endian) {
    let n = b.len();
    for i in 0..n {
        let byte = (v >> (8 * i)) as u8;
        match e {
            Endian::Little => b[i] = byte,
            Endian::Big => b[n - 1 - i] = byte,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_both_orders() {
        let mut b = [0u8; 4];
        write_word(&mut b, 0x11223344, Endian::Big);
        assert_eq!(b, [0x11, 0x22, 0x33, 0x44]);
        assert_eq!(read_word(&b, Endian::Big), 0x11223344);
        write_word(&mut b, 0x11223344, Endian::Little);
        assert_eq!(read_word(&b, Endian::Little), 0x11223344);
    }
}
