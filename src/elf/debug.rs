//! What the encoder needs from an ELF file with DWARF: the debug sections
//! (decompressed, and relocated for ET_REL as a linker would), the section
//! headers (for variables), the function table built from `.symtab` and the
//! object symbols (for the offset-0 variable check).
//!
//! Everything here is built once, before the CUs are decoded, and is
//! immutable afterwards, so decode workers share it without locks.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::path::Path;

use rayon::prelude::*;

use object::read::elf::{ElfFile, ElfSection, FileHeader, SectionHeader, Sym};
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

/// The sections `load_elf` loads into `DebugSections`, in the order of
/// [`DebugSections::in_order`] and [`DebugSections::from_order`].
pub const LOADED: [&str; 11] = [
    ".debug_info",
    ".debug_abbrev",
    ".debug_str",
    ".debug_line",
    ".debug_line_str",
    ".debug_str_offsets",
    ".debug_addr",
    ".debug_loc",
    ".debug_loclists",
    ".debug_ranges",
    ".debug_rnglists",
];

/// A debug section's contents.
pub enum SectionBytes<'a> {
    /// In the bytes the file was loaded from: its mapping where
    /// [`ElfInfo::file_mapped`], whose dropped pages are read back from
    /// the file.
    Borrowed(&'a [u8]),
    /// Decompressed, or relocated, into memory.
    Owned(Vec<u8>),
    /// A large section of a mapped relocatable object (a module's
    /// `.debug_info`), relocated into an anonymous mapping of its own, so
    /// that the pages of units already encoded can be given back
    /// ([`ElfInfo::release_info`]) instead of holding the whole copy to the
    /// last unit.
    Relocated(RelocatedCopy),
}

/// [`SectionBytes::Relocated`]: the mapping, and whether any of its pages
/// were given back (then it cannot be read whole again).
pub struct RelocatedCopy {
    map: memmap2::Mmap,
    given_back: std::sync::atomic::AtomicBool,
}

impl Default for SectionBytes<'_> {
    fn default() -> Self {
        SectionBytes::Borrowed(&[])
    }
}

impl std::ops::Deref for SectionBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SectionBytes::Borrowed(b) => b,
            SectionBytes::Owned(v) => v,
            SectionBytes::Relocated(c) => &c.map,
        }
    }
}

impl<'a> From<Cow<'a, [u8]>> for SectionBytes<'a> {
    fn from(c: Cow<'a, [u8]>) -> Self {
        match c {
            Cow::Borrowed(b) => SectionBytes::Borrowed(b),
            Cow::Owned(v) => SectionBytes::Owned(v),
        }
    }
}

impl<'a> SectionBytes<'a> {
    /// The bytes, where they are those the file was loaded from.
    pub fn as_borrowed(&self) -> Option<&'a [u8]> {
        match self {
            SectionBytes::Borrowed(b) => Some(b),
            _ => None,
        }
    }
}

/// The DWARF sections the decoder reads. Missing sections are empty.
#[derive(Default)]
pub struct DebugSections<'a> {
    pub info: SectionBytes<'a>,
    pub abbrev: SectionBytes<'a>,
    pub str: SectionBytes<'a>,
    /// Only its headers are read (gimli parses the unit's line program header).
    pub line: SectionBytes<'a>,
    pub line_str: SectionBytes<'a>,
    pub str_offsets: SectionBytes<'a>,
    pub addr: SectionBytes<'a>,
    pub loc: SectionBytes<'a>,
    pub loclists: SectionBytes<'a>,
    pub ranges: SectionBytes<'a>,
    pub rnglists: SectionBytes<'a>,
}

impl<'a> DebugSections<'a> {
    /// The sections in [`LOADED`] order.
    pub fn in_order(&self) -> [&SectionBytes<'a>; 11] {
        [
            &self.info,
            &self.abbrev,
            &self.str,
            &self.line,
            &self.line_str,
            &self.str_offsets,
            &self.addr,
            &self.loc,
            &self.loclists,
            &self.ranges,
            &self.rnglists,
        ]
    }

    /// These sections, borrowed, with `info` as `.debug_info`.
    pub fn with_info(&self, info: Vec<u8>) -> DebugSections<'_> {
        let mut secs = self.in_order().map(|c| SectionBytes::Borrowed(&c[..]));
        secs[0] = SectionBytes::Owned(info);
        DebugSections::from_order(secs)
    }

    /// The sections from their contents in [`LOADED`] order.
    pub fn from_order(secs: [SectionBytes<'a>; 11]) -> DebugSections<'a> {
        let [
            info,
            abbrev,
            str,
            line,
            line_str,
            str_offsets,
            addr,
            loc,
            loclists,
            ranges,
            rnglists,
        ] = secs;
        DebugSections {
            info,
            abbrev,
            str,
            line,
            line_str,
            str_offsets,
            addr,
            loc,
            loclists,
            ranges,
            rnglists,
        }
    }
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
    pub(crate) endian: Endian,
    pub(crate) is_64: bool,
    pub(crate) machine: u16,
    pub(crate) is_rel: bool,
    pub(crate) has_symtab: bool,
    pub(crate) sections: Vec<SectionInfo<'a>>,
    pub(crate) funcs: FuncTable<'a>,
    /// STT_OBJECT symbols as (name, section index), sorted.
    pub(crate) objects: Vec<(&'a [u8], u32)>,
    pub(crate) debug: DebugSections<'a>,
    /// The `.debug_info` sections inside section groups (type units of a
    /// relocatable object), relocated, in section order: not part of
    /// `debug.info`, as they are not in the reference's reading.
    pub(crate) grouped_info: Vec<SectionBytes<'a>>,
    /// Whether the file has DWARF 4 type units (`.debug_types`) in groups.
    pub(crate) grouped_types: bool,
    /// The kernel's "built with LTO" note (type 0x101, owner `Linux`): the
    /// first one's descriptor, non-zero or not. Where there is one, it alone
    /// decides whether the reference merges all units into one.
    pub(crate) lto_note: Option<bool>,
    /// The supplementary file its DWARF refers into (dwz -m), as
    /// `.gnu_debugaltlink` or `.debug_sup` names it.
    pub(crate) alt_link: Option<super::alt::AltLink<'a>>,
    /// The raw `.symtab` (empty without one): once `funcs` and `objects`
    /// are built from it, only their names (in `.strtab`) are read again,
    /// so a mapped file's pages of it can go ([`ElfInfo::mapping`]).
    pub(crate) symtab_bytes: &'a [u8],
    /// The file's mapping, where the bytes given to `load` are one: then
    /// pages of sections borrowed from them may be dropped from memory once
    /// used (they are re-read from the file). `None` for bytes in memory.
    pub(crate) mapping: Option<super::Mapping<'a>>,
}

impl<'a> ElfInfo<'a> {
    /// An ELF made up by tests and the fuzz targets: a 64-bit file with a
    /// symbol table, `debug` as its debug sections and nothing else (no
    /// sections, functions or object symbols until the caller adds them).
    pub(crate) fn synthetic(endian: Endian, machine: u16, is_rel: bool, debug: DebugSections<'a>) -> ElfInfo<'a> {
        ElfInfo {
            endian,
            is_64: true,
            machine,
            is_rel,
            has_symtab: true,
            sections: Vec::new(),
            funcs: FuncTable::default(),
            objects: Vec::new(),
            debug,
            lto_note: None,
            alt_link: None,
            grouped_info: Vec::new(),
            grouped_types: false,
            symtab_bytes: &[],
            mapping: None,
        }
    }

    /// The file's byte order.
    pub fn endian(&self) -> Endian {
        self.endian
    }
    /// ELF `e_machine`.
    pub fn machine(&self) -> u16 {
        self.machine
    }
    /// A relocatable object (`ET_REL`: a module, an `ld -r` output).
    pub fn is_rel(&self) -> bool {
        self.is_rel
    }
    /// Its debug sections, inflated and relocated.
    pub fn debug(&self) -> &DebugSections<'a> {
        &self.debug
    }
    /// Its function table (the symbols BTF functions are matched against).
    pub fn funcs(&self) -> &FuncTable<'a> {
        &self.funcs
    }
    /// Its section headers.
    pub fn sections(&self) -> &[SectionInfo<'a>] {
        &self.sections
    }
    /// Its object symbols (name, section index), sorted.
    pub fn objects(&self) -> &[(&'a [u8], u32)] {
        &self.objects
    }

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

    /// Whether `.debug_info` is read straight from the file mapping, so
    /// that its pages can be dropped at any time (a later read brings them
    /// back from the file).
    pub fn info_is_file_mapped(&self) -> bool {
        self.mapping.is_some() && matches!(self.debug.info, SectionBytes::Borrowed(_))
    }

    /// Drops the pages of the `.debug_info` bytes `range` where they are
    /// the file's mapping (elsewhere it does nothing): read again, they come
    /// back from the file.
    pub fn drop_mapped_info(&self, range: std::ops::Range<usize>) {
        if let (Some(m), SectionBytes::Borrowed(info)) = (self.mapping, &self.debug.info)
            && let Some(bytes) = info.get(range.start..range.end.min(info.len()))
        {
            m.release(bytes)
        }
    }

    /// Gives back the memory of the `.debug_info` bytes `range`, which the
    /// caller is done with: the pages of a file mapping are dropped, those
    /// of a relocated copy ([`SectionBytes::Relocated`]) freed. Elsewhere
    /// (bytes read into memory, a small copy) it does nothing.
    ///
    /// # Safety
    ///
    /// Where `.debug_info` is a relocated copy, no byte of `range` may be
    /// read after this call: its pages read as zeros (in a build with debug
    /// assertions, as the tests are, a read faults instead, so that such a
    /// read cannot go unseen).
    pub unsafe fn release_info(&self, range: std::ops::Range<usize>) {
        let info = &self.debug.info[..];
        let Some(bytes) = info.get(range.start..range.end.min(info.len())) else {
            return;
        };
        match &self.debug.info {
            SectionBytes::Borrowed(_) => self.drop_mapped_info(range),
            SectionBytes::Relocated(c) => {
                c.given_back.store(true, std::sync::atomic::Ordering::Relaxed);
                // SAFETY: the mapping is this section's own, and the caller
                // reads none of these bytes again.
                unsafe { super::free_copied_pages(bytes) }
            }
            _ => {}
        }
    }

    /// Whether pages of `.debug_info` were freed ([`ElfInfo::release_info`]
    /// on a relocated copy): it cannot be decoded again from this load.
    pub fn info_given_back(&self) -> bool {
        match &self.debug.info {
            SectionBytes::Relocated(c) => c.given_back.load(std::sync::atomic::Ordering::Relaxed),
            _ => false,
        }
    }

    /// Drops the pages of a large `.debug_str` read from the file mapping:
    /// the units of every chunk read strings all over it, and what the next
    /// chunk reads again comes back from the page cache (a module's can be
    /// 130 MB, resident to the last unit otherwise).
    pub fn release_str(&self) {
        if let (Some(m), Some(b)) = (self.mapping, self.debug.str.as_borrowed())
            && b.len() >= RELEASE_FROM
        {
            m.release(b);
        }
    }

    /// [`ElfInfo::load`] of a mapped or read [`super::Input`]; from a
    /// mapping, the pages of a relocated section and of its relocations
    /// are dropped as they are used (a large module's relocations are
    /// bigger than its DWARF).
    pub fn load_input(input: &'a super::Input) -> Result<ElfInfo<'a>> {
        Self::load_input_releasing_from(input, RELEASE_FROM)
    }

    /// [`ElfInfo::load_input`] with the size from which a relocated section
    /// of a mapped file gets a copy of its own, whose pages can be given
    /// back ([`SectionBytes::Relocated`]), set to `from`: tests lower it to
    /// take that path on a small module.
    #[doc(hidden)]
    pub fn load_input_releasing_from(input: &'a super::Input, from: usize) -> Result<ElfInfo<'a>> {
        Self::load_as(&input.path, input.bytes(), input.mapping().map(|m| (m, from)))
    }

    pub fn load(path: &Path, data: &'a [u8]) -> Result<ElfInfo<'a>> {
        Self::load_as(path, data, None)
    }

    /// `release_from`: the file's mapping, and the size from which what
    /// relocating reads of a section or of its relocations is dropped.
    fn load_as(path: &Path, data: &'a [u8], release_from: Option<(super::Mapping<'a>, usize)>) -> Result<ElfInfo<'a>> {
        if data.len() < 16 || !data.starts_with(b"\x7fELF") {
            return Err(Error::elf(path, "not an ELF file (no \\x7fELF magic)"));
        }
        let file = object::File::parse(data).map_err(|e| match header_fault(data) {
            Some(fault) => Error::elf(path, format!("damaged ELF file: {fault} ({e})")),
            None => Error::elf(
                path,
                format!("not a readable ELF file (truncated or damaged headers): {e}"),
            ),
        })?;
        match &file {
            object::File::Elf32(f) => load_elf(path, f, false, release_from),
            object::File::Elf64(f) => load_elf(path, f, true, release_from),
            _ => Err(Error::elf(path, "not an ELF file")),
        }
    }
}

/// What is wrong with the section header table of a file the ELF parser
/// refused, said in terms of its fields (the parser's own errors name
/// neither the field nor the section).
fn header_fault(d: &[u8]) -> Option<String> {
    let is64 = match d.get(4)? {
        1 => false,
        2 => true,
        _ => return Some(format!("unknown ELF class {} at offset 4", d[4])),
    };
    let big = match d.get(5)? {
        1 => false,
        2 => true,
        _ => return Some(format!("unknown ELF data encoding {} at offset 5", d[5])),
    };
    let get = |at: usize, n: usize| -> Option<u64> {
        let b = d.get(at..at.checked_add(n)?)?;
        Some(if big {
            b.iter().fold(0u64, |v, &x| (v << 8) | x as u64)
        } else {
            b.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64)
        })
    };
    let len = d.len() as u64;
    let (hdr_len, want_ent) = if is64 { (64, 64u64) } else { (52, 40u64) };
    if len < hdr_len {
        return Some(format!("the ELF header needs {hdr_len} bytes, the file has {len}"));
    }
    let (shoff, ent, num, strndx) = if is64 {
        (get(0x28, 8)?, get(0x3a, 2)?, get(0x3c, 2)?, get(0x3e, 2)?)
    } else {
        (get(0x20, 4)?, get(0x2e, 2)?, get(0x30, 2)?, get(0x32, 2)?)
    };
    if shoff == 0 {
        return None;
    }
    if ent != want_ent {
        return Some(format!("e_shentsize is {ent}, a section header is {want_ent} bytes"));
    }
    if shoff.checked_add(ent).is_none_or(|end| end > len) {
        return Some(format!(
            "the section header table (e_shoff {shoff:#x}) starts past the end of the file ({len} bytes)"
        ));
    }
    // Section 0's fields, for extended numbering.
    let sh = |i: u64, field64: usize, field32: usize| -> Option<u64> {
        let at = (shoff + i * ent) as usize;
        if is64 {
            get(at + field64, if field64 == 0x28 || field64 == 4 { 4 } else { 8 })
        } else {
            get(at + field32, 4)
        }
    };
    let count = if num == 0 { sh(0, 0x20, 0x14)? } else { num };
    if count
        .checked_mul(ent)
        .and_then(|n| n.checked_add(shoff))
        .is_none_or(|end| end > len)
    {
        return Some(format!(
            "the section header table ({count} entries at {shoff:#x}) reaches past the end of the file ({len} bytes)"
        ));
    }
    let strndx = if strndx == 0xffff { sh(0, 0x28, 0x18)? } else { strndx };
    if strndx >= count {
        return Some(format!(
            "e_shstrndx {strndx}: no such section name table (there are {count} sections)"
        ));
    }
    for i in 1..count {
        let ty = sh(i, 4, 4)?;
        let (off, size) = (sh(i, 0x18, 0x10)?, sh(i, 0x20, 0x14)?);
        if ty != SHT_NOBITS as u64 && off.checked_add(size).is_none_or(|end| end > len) {
            return Some(format!(
                "section {i}: contents [{off:#x}, +{size:#x}) reach past the end of the file ({len} bytes)"
            ));
        }
    }
    None
}

fn load_elf<'a, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &ElfFile<'a, H, &'a [u8]>,
    is_64: bool,
    release_from: Option<(super::Mapping<'a>, usize)>,
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
    let lto_note = lto_note(f);
    check_read_ranges(path, f)?;
    let sections = section_infos(f, is_rel);
    let Symbols {
        funcs,
        objects,
        has_symtab,
    } = symbols(path, f)?;
    check_symbol_strings(path, f)?;
    let loader = SectionLoader {
        path,
        f,
        sections: &sections,
        is_rel,
        machine,
        endian,
        sym_values: OnceCell::new(),
        release_from,
    };
    let found = find_debug_sections(path, f)?;
    // DWARF 4 type units outside section groups (a linked executable's):
    // the reference loads them as a unit of their own and then crashes
    // (SIGSEGV in v1.31), writing nothing; its behaviour is not something
    // to reproduce, so the file is refused.
    if found.types.as_ref().is_some_and(|s| s.size() > 0) {
        return Err(Error::unsupported(
            path,
            ".debug_types: DWARF 4 type units (-fdebug-types-section) in a linked file: the reference \
             (pahole v1.31) crashes on them and writes no BTF, so btfkit does not encode them either \
             (--type-units=resolve reads DWARF 5 type units only)",
        ));
    }
    let mut loaded = Vec::with_capacity(LOADED.len());
    for sec in found.loaded {
        loaded.push(match sec {
            Some(sec) => loader.load(sec)?,
            None => SectionBytes::Borrowed(&[][..]),
        });
    }
    // `.debug_info` sections in section groups: gcc's and clang's DWARF 5
    // type units in a relocatable object, one per COMDAT group. The
    // reference passes them over; `--type-units=resolve` reads them.
    let grouped_info = found
        .grouped_info
        .into_iter()
        .map(|sec| loader.load(sec))
        .collect::<Result<Vec<_>>>()?;
    let grouped_types = found.grouped_types;
    let debug = DebugSections::from_order(loaded.try_into().unwrap_or_else(|_| unreachable!("one per name")));
    for (name, sec) in [(".debug_str", &debug.str), (".debug_line_str", &debug.line_str)] {
        check_terminated(path, name, sec)?;
    }
    let symtab_bytes = f.section_by_name(".symtab").and_then(|s| s.data().ok()).unwrap_or(&[]);
    let alt_link = alt_link(path, f)?;
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
        grouped_info,
        grouped_types,
        lto_note,
        alt_link,
        symtab_bytes,
        mapping: release_from.map(|(m, _)| m),
    })
}

/// The supplementary file the DWARF names: `.gnu_debugaltlink`, else
/// `.debug_sup` (a supplementary file's own names none).
fn alt_link<'a, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &ElfFile<'a, H, &'a [u8]>,
) -> Result<Option<super::alt::AltLink<'a>>> {
    use super::alt;
    let data = |name| {
        f.section_by_name(name)
            .map(|s| {
                s.data()
                    .map_err(|e| Error::elf(path, format!("section {name}: cannot read contents: {e}")))
            })
            .transpose()
    };
    let link = match data(".gnu_debugaltlink")? {
        Some(d) => Some(alt::parse_gnu_debugaltlink(d)),
        None => data(".debug_sup")?.and_then(|d| alt::parse_debug_sup(d, !f.is_little_endian()).transpose()),
    };
    link.transpose().map_err(|e| Error::elf(path, e.to_string()))
}

/// [`check_terminated`] for the symbol table's string table.
fn check_symbol_strings<'a, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &ElfFile<'a, H, &'a [u8]>,
) -> Result<()> {
    let e = f.endian();
    let table = f.elf_section_table();
    let Some(symtab) = table.iter().find(|sh| sh.sh_type(e) == object::elf::SHT_SYMTAB) else {
        return Ok(());
    };
    let Ok(strs) = table.section(object::SectionIndex(symtab.sh_link(e) as usize)) else {
        return Ok(());
    };
    let name = table
        .section_name(e, strs)
        .map_or(".strtab".into(), String::from_utf8_lossy);
    let data = strs.data(e, f.data()).unwrap_or_default();
    check_terminated(path, &name, data)
}

/// Refuses a string section whose last string has no NUL: the section was
/// cut short, and a reader would run past its end or take the rest of it
/// for a name.
fn check_terminated(path: &Path, name: &str, sec: &[u8]) -> Result<()> {
    match sec.last() {
        Some(&last) if last != 0 => {
            let start = memchr::memrchr(0, sec).map_or(0, |n| n + 1);
            Err(Error::elf(
                path,
                format!(
                    "section {name}: the string at offset {start:#x} runs to the end of the section ({} bytes) \
                     without its terminating NUL: the section is cut short or damaged",
                    sec.len()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The kernel's "built with LTO" note: whether the first one's descriptor is
/// non-zero ([`ElfInfo::lto_note`]).
fn lto_note<'a, H: FileHeader<Endian = object::Endianness>>(f: &ElfFile<'a, H, &'a [u8]>) -> Option<bool> {
    let e = f.endian();
    for sh in f.elf_section_table().iter() {
        if let Ok(Some(mut notes)) = sh.notes(e, f.data()) {
            while let Ok(Some(n)) = notes.next() {
                let desc = n.desc();
                if n.n_type(e).0 == 0x101 && n.name() == b"Linux" && desc.len() >= 4 {
                    return Some(desc[..4].iter().any(|&b| b != 0));
                }
            }
        }
    }
    None
}

/// Refuses a file whose sections read besides the debug sections (checked
/// as they are loaded) lie outside it: section names, symbols and their
/// names, relocations of the loaded debug sections. Their readers treat a
/// range outside the file as empty, which would quietly change the output.
/// Other sections may lie outside, as the reference allows.
fn check_read_ranges<'a, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &ElfFile<'a, H, &'a [u8]>,
) -> Result<()> {
    let e = f.endian();
    let table = f.elf_section_table();
    let file_len = f.data().len() as u64;
    let shstrndx = f.elf_header().shstrndx(e, f.data()).unwrap_or(0) as usize;
    let mut needed = vec![shstrndx];
    for (i, sh) in table.iter().enumerate() {
        match sh.sh_type(e) {
            object::elf::SHT_SYMTAB => needed.extend([i, sh.sh_link(e) as usize]),
            object::elf::SHT_REL | object::elf::SHT_RELA => {
                // Only relocations of the sections loaded below are applied.
                let target = table.section(object::SectionIndex(sh.sh_info(e) as usize)).ok();
                if target
                    .and_then(|t| table.section_name(e, t).ok())
                    .is_some_and(|n| LOADED.iter().any(|l| l.as_bytes() == n))
                {
                    needed.push(i);
                }
            }
            _ => {}
        }
    }
    for i in needed {
        let Ok(sh) = table.section(object::SectionIndex(i)) else {
            continue;
        };
        let Some((off, size)) = sh.file_range(e) else { continue };
        if i != 0 && off.checked_add(size).is_none_or(|end| end > file_len) {
            let name = match table.section_name(e, sh) {
                _ if i == shstrndx => "the section name table".into(),
                Ok(n) => String::from_utf8_lossy(n),
                Err(_) => "".into(),
            };
            return Err(Error::elf(
                path,
                format!(
                    "section {i} ({name}): contents [{off:#x}, +{size:#x}) reach past the end of the file ({file_len} bytes)"
                ),
            ));
        }
    }
    Ok(())
}

/// The section headers; an ET_REL file's allocated sections get addresses
/// laid out one after another from [`REL_LAYOUT_BASE`], as the reference's
/// reader gives them.
fn section_infos<'a, H: FileHeader<Endian = object::Endianness>>(
    f: &ElfFile<'a, H, &'a [u8]>,
    is_rel: bool,
) -> Vec<SectionInfo<'a>> {
    let e = f.endian();
    let table = f.elf_section_table();
    let mut sections = Vec::new();
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
    sections
}

/// What `.symtab` gives the encoder.
struct Symbols<'a> {
    funcs: FuncTable<'a>,
    /// STT_OBJECT symbols as (name, section index), sorted.
    objects: Vec<(&'a [u8], u32)>,
    has_symtab: bool,
}

/// The function table and the object symbols.
fn symbols<'a, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &ElfFile<'a, H, &'a [u8]>,
) -> Result<Symbols<'a>> {
    let mut funcs = Vec::new();
    let mut objects = Vec::new();
    let mut has_symtab = false;
    if let Some(symtab) = f.symbol_table() {
        has_symtab = true;
        for sym in symtab.symbols() {
            let raw = sym.elf_symbol();
            // A name that cannot be read (its offset past the string table,
            // or no NUL before its end) is damage, never a nameless symbol:
            // that would silently drop the function from the BTF.
            let name = sym.name_bytes().map_err(|e| {
                Error::elf(
                    path,
                    format!(
                        "symbol {}: cannot read its name in the string table: {e}",
                        sym.index().0
                    ),
                )
            })?;
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
    Ok(Symbols {
        funcs: FuncTable::build(funcs),
        objects,
        has_symtab,
    })
}

/// The size from which a relocated section's mapped pages, and its
/// relocations', are dropped as they are used, in stretches of this size:
/// below it the madvise calls (each a TLB flush on every core the process
/// runs on) cost more than the pages, +7 s over the 4,230 modules of a
/// distribution kernel when every section did it.
const RELEASE_FROM: usize = 16 << 20;

/// Loads debug sections: checks their range, decompresses them and, in an
/// ET_REL file, applies their relocations as a linker would.
struct SectionLoader<'a, 'f, H: FileHeader<Endian = object::Endianness>> {
    path: &'f Path,
    f: &'f ElfFile<'a, H, &'a [u8]>,
    sections: &'f [SectionInfo<'a>],
    is_rel: bool,
    machine: u16,
    endian: Endian,
    /// Relocation targets by symbol index, read once: a module's debug
    /// sections carry a relocation per string or section offset (about
    /// 1.5 M in btrfs.ko), against a few thousand symbols.
    sym_values: OnceCell<Vec<u64>>,
    /// The file's mapping, and the size from which what relocating reads
    /// of a section or of its relocations is dropped from it.
    release_from: Option<(super::Mapping<'a>, usize)>,
}

impl<'a, 'f, H: FileHeader<Endian = object::Endianness>> SectionLoader<'a, 'f, H> {
    fn load(&self, sec: ElfSection<'a, 'f, H, &'a [u8]>) -> Result<SectionBytes<'a>> {
        let (path, f) = (self.path, self.f);
        let sec_name = sec.name().unwrap_or("?").to_string();
        if let Some((off, size)) = sec.file_range()
            && off.checked_add(size).is_none_or(|end| end > f.data().len() as u64)
        {
            return Err(Error::elf(
                path,
                format!(
                    "section {sec_name}: contents [{off:#x}, +{size:#x}) reach past the end of the file ({} bytes)",
                    f.data().len()
                ),
            ));
        }
        let packed = sec.compressed_data().map_err(|err| {
            Error::elf(
                path,
                format!("section {sec_name}: unreadable compression header: {err}"),
            )
        })?;
        let data = inflate(packed).map_err(|msg| Error::elf(path, format!("section {sec_name}: {msg}")))?;
        if !self.is_rel {
            return Ok(data.into());
        }
        self.relocate(&sec, &sec_name, data)
    }

    /// Applies the section's absolute relocations of 4 and 8 bytes to `data`.
    fn relocate(
        &self,
        sec: &ElfSection<'a, 'f, H, &'a [u8]>,
        sec_name: &str,
        data: Cow<'a, [u8]>,
    ) -> Result<SectionBytes<'a>> {
        self.check_relocation_table(sec, sec_name)?;
        if sec.relocations().next().is_none() {
            return Ok(data.into());
        }
        let source = match &data {
            Cow::Borrowed(b) if self.release_from.is_some_and(|(_, from)| b.len() >= from) => *b,
            _ => {
                let mut buf = data.into_owned();
                self.apply_relocations(sec, sec_name, &mut buf)?;
                return Ok(SectionBytes::Owned(buf));
            }
        };
        let mut copy = memmap2::MmapMut::map_anon(source.len()).map_err(|e| {
            Error::elf(
                self.path,
                format!("section {sec_name}: no memory for its relocated copy: {e}"),
            )
        })?;
        // The copy is what is read from now on: the mapped pages are
        // dropped behind it, so the section is never resident twice.
        // (on the run's threads: a large module's section is 160 MB)
        let mapping = self.release_from.map(|(m, _)| m);
        copy.par_chunks_mut(RELEASE_FROM)
            .zip(source.par_chunks(RELEASE_FROM))
            .for_each(|(to, from)| {
                to.copy_from_slice(from);
                if let Some(m) = mapping {
                    m.release(from);
                }
            });
        self.apply_relocations(sec, sec_name, &mut copy)?;
        let copy = copy.make_read_only().map_err(|e| {
            Error::elf(
                self.path,
                format!("section {sec_name}: its relocated copy cannot be made read-only: {e}"),
            )
        })?;
        Ok(SectionBytes::Relocated(RelocatedCopy {
            map: copy,
            given_back: false.into(),
        }))
    }

    /// Writes the section's relocations into `buf`, its contents.
    fn apply_relocations(&self, sec: &ElfSection<'a, 'f, H, &'a [u8]>, sec_name: &str, buf: &mut [u8]) -> Result<()> {
        let (path, f, endian) = (self.path, self.f, self.endian);
        let e = f.endian();
        // x86-64 RELA (every x86 module) read directly: the generic
        // iterator works out kind, size and target for each entry, the
        // largest cost of loading a module. The same three absolute types
        // it reports with 32 or 64 bits; everything else goes the generic way.
        if self.machine == object::elf::EM_X86_64.0
            && let Ok(Some(rsh)) = sec.elf_relocation_section()
            && let Ok(Some((relas, _))) = rsh.rela(e, f.data())
        {
            let syms = self.symbol_values();
            // 16 MiB of entries at a time, dropped once applied
            let release = self
                .release_from
                .filter(|(_, from)| std::mem::size_of_val(relas) >= *from);
            let done = |chunk: &[u8]| {
                if let Some((m, _)) = release {
                    m.release(chunk);
                }
            };
            if relas.len() >= SPLIT_RELAS && apply_x86_64_halves(relas, e, endian, syms, buf, &done) {
                return Ok(());
            }
            return apply_x86_64(relas, e, endian, syms, buf, 0, &done).map_err(|fault| {
                Error::elf(
                    path,
                    match fault {
                        RelaFault::Symbol(i) => {
                            format!(
                                "section {sec_name}: a relocation names symbol {i}, past the end of the symbol table"
                            )
                        }
                        RelaFault::Offset(off) => {
                            format!("section {sec_name}: relocation at offset {off:#x} is outside the section")
                        }
                    },
                )
            });
        }
        let mut apply = |off: u64, size: usize, v: u64, implicit: bool| -> Result<()> {
            let off = off as usize;
            let Some(slot) = off.checked_add(size).and_then(|end| buf.get_mut(off..end)) else {
                return Err(Error::elf(
                    path,
                    format!("section {sec_name}: relocation at offset {off:#x} is outside the section"),
                ));
            };
            let implicit = if implicit { read_word(slot, endian) } else { 0 };
            write_word(slot, v.wrapping_add(implicit), endian);
            Ok(())
        };
        let symbol = |i: usize| -> Result<u64> {
            self.symbol_value_cached(i).ok_or_else(|| {
                Error::elf(
                    path,
                    format!("section {sec_name}: a relocation names symbol {i}, past the end of the symbol table"),
                )
            })
        };
        for (off, r) in sec.relocations() {
            let size = r.size() as usize / 8;
            if !matches!(r.kind(), RelocationKind::Absolute) || !(size == 4 || size == 8) {
                continue;
            }
            let s = match r.target() {
                RelocationTarget::Symbol(idx) => symbol(idx.0)?,
                RelocationTarget::Section(idx) => self.sections.get(idx.0).map(|s| s.addr).unwrap_or(0),
                _ => 0,
            };
            apply(off, size, s.wrapping_add(r.addend() as u64), r.has_implicit_addend())?;
        }
        Ok(())
    }

    /// The value of symbol `idx` as a relocation target; `None` for an
    /// index past the symbol table.
    fn symbol_value_cached(&self, idx: usize) -> Option<u64> {
        self.symbol_values().get(idx).copied()
    }

    /// Every symbol's value as a relocation target, by index.
    fn symbol_values(&self) -> &[u64] {
        self.sym_values.get_or_init(|| {
            (0..self.f.elf_symbol_table().len())
                .map(|i| self.symbol_value(object::SymbolIndex(i)))
                .collect()
        })
    }

    /// Refuses a relocation table that is not a whole number of entries:
    /// cut short, its readers would silently apply only the entries before
    /// the cut.
    fn check_relocation_table(&self, sec: &ElfSection<'a, 'f, H, &'a [u8]>, sec_name: &str) -> Result<()> {
        let e = self.f.endian();
        let Ok(Some(rsh)) = sec.elf_relocation_section() else {
            return Ok(());
        };
        let entry = match rsh.sh_type(e) {
            object::elf::SHT_RELA => std::mem::size_of::<H::Rela>(),
            _ => std::mem::size_of::<H::Rel>(),
        };
        let size: u64 = rsh.sh_size(e).into();
        if !size.is_multiple_of(entry as u64) {
            let name = self.f.elf_section_table().section_name(e, rsh).unwrap_or(b"?");
            return Err(Error::elf(
                self.path,
                format!(
                    "section {}: {size} bytes is not a whole number of {entry}-byte relocations of {sec_name} \
                     (cut short or damaged)",
                    String::from_utf8_lossy(name)
                ),
            ));
        }
        Ok(())
    }

    /// A symbol's address; in an ET_REL file, relative to its allocated
    /// section's laid-out address.
    fn symbol_value(&self, idx: object::SymbolIndex) -> u64 {
        let Ok(sym) = self.f.symbol_by_index(idx) else { return 0 };
        let v = sym.address();
        match sym.section_index() {
            Some(s) if self.is_rel => {
                let sec = &self.sections.get(s.0);
                match sec {
                    Some(sec) if sec.flags & SHF_ALLOC != 0 => sec.addr.wrapping_add(v),
                    _ => v,
                }
            }
            _ => v,
        }
    }
}

const SHF_GROUP: u64 = 0x200;

/// A file's debug sections as the reference's DWARF reader picks them, in
/// one pass over the section table.
struct FoundSections<'d, 'f, H: FileHeader<Endian = object::Endianness>> {
    /// Those of [`LOADED`], in that order.
    loaded: Vec<Option<object::read::elf::ElfSection<'d, 'f, H, &'d [u8]>>>,
    /// `.debug_types` outside section groups.
    types: Option<object::read::elf::ElfSection<'d, 'f, H, &'d [u8]>>,
    /// `.debug_info` sections inside section groups, in section order.
    grouped_info: Vec<object::read::elf::ElfSection<'d, 'f, H, &'d [u8]>>,
    grouped_types: bool,
}

/// Each debug section by its name (or its `.zdebug_` form), as the
/// reference's DWARF reader picks it: sections in a section group (the
/// COMDAT type units of `-fdebug-types-section` objects) are not part of the
/// file's own debug info and are passed over (and kept apart for
/// `--type-units=resolve`). Two sections of one name outside groups are an
/// error: which one holds the DWARF cannot be told, and reading one of them
/// would quietly drop the other.
fn find_debug_sections<'d, 'f, H: FileHeader<Endian = object::Endianness>>(
    path: &Path,
    f: &'f ElfFile<'d, H, &'d [u8]>,
) -> Result<FoundSections<'d, 'f, H>> {
    const TYPES: usize = LOADED.len();
    let mut own: Vec<Option<object::read::elf::ElfSection<'d, 'f, H, &'d [u8]>>> = (0..=TYPES).map(|_| None).collect();
    let (mut grouped_info, mut grouped_types) = (Vec::new(), false);
    for sec in f.sections() {
        let Ok(n) = sec.name() else { continue };
        let plain = match n.strip_prefix(".zdebug_") {
            Some(rest) => format!(".debug_{rest}"),
            None => n.to_string(),
        };
        let Some(slot) = LOADED
            .iter()
            .position(|l| *l == plain)
            .or((plain == ".debug_types").then_some(TYPES))
        else {
            continue;
        };
        if sec.elf_section_header().sh_flags(f.endian()).0 & SHF_GROUP != 0 {
            match slot {
                0 => grouped_info.push(sec),
                TYPES => grouped_types = true,
                _ => {}
            }
            continue;
        }
        if let Some(first) = &own[slot] {
            return Err(Error::elf(
                path,
                format!(
                    "sections {} and {} are both named {n} (outside section groups): \
                     which one holds the file's DWARF cannot be told",
                    first.index().0,
                    sec.index().0
                ),
            ));
        }
        own[slot] = Some(sec);
    }
    let types = own.pop().flatten();
    Ok(FoundSections {
        loaded: own,
        types,
        grouped_info,
        grouped_types,
    })
}

/// The contents of a possibly compressed section. The header's size is only
/// believed as far as the data bears it out: at most that many bytes (plus
/// one, to notice a longer stream) are inflated, and the buffer grows with
/// the data rather than being reserved from the claim, so a lying header
/// costs no more memory than the real contents.
fn inflate(c: object::CompressedData<'_>) -> std::result::Result<Cow<'_, [u8]>, String> {
    use object::CompressionFormat as F;
    use std::io::Read;
    let claimed = c.uncompressed_size;
    let mut stream: Box<dyn Read + '_> = match c.format {
        F::None => return Ok(Cow::Borrowed(c.data)),
        F::Zlib => Box::new(flate2::read::ZlibDecoder::new(c.data)),
        F::Zstandard => Box::new(
            zstd::stream::read::Decoder::with_buffer(c.data)
                .map_err(|e| format!("compressed contents (zstd) do not inflate: {e}"))?,
        ),
        other => return Err(format!("unsupported compression {other:?}")),
    };
    let what = match c.format {
        F::Zlib => "zlib",
        _ => "zstd",
    };
    // A first reservation the compressed size can justify; growth after that.
    let guess = claimed.min(c.data.len() as u64 * 4 + 4096).min(1 << 30) as usize;
    let mut buf = Vec::with_capacity(guess);
    (&mut stream)
        .take(claimed.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| format!("compressed contents ({what}) do not inflate: {e}"))?;
    if buf.len() as u64 > claimed {
        return Err(format!(
            "compression header says {claimed} bytes but the {what} data inflates to more"
        ));
    }
    if (buf.len() as u64) < claimed {
        return Err(format!(
            "compression header says {claimed} bytes but the {what} data inflates to only {}",
            buf.len()
        ));
    }
    Ok(Cow::Owned(buf))
}

/// The bytes an x86-64 relocation of type `t` writes, if it is one of the
/// absolute ones debug sections use (what the generic reader reports as
/// absolute with 32 or 64 bits); others are not applied.
#[inline]
fn x86_64_absolute_size(t: u32) -> Option<usize> {
    match t {
        1 /* R_X86_64_64 */ => Some(8),
        10 /* R_X86_64_32 */ | 11 /* R_X86_64_32S */ => Some(4),
        _ => None,
    }
}

/// From this many relocations on, a section's x86-64 RELA entries are
/// applied in two halves at once ([`apply_x86_64_halves`]): amdgpu.ko's
/// .debug_info has 10 M. Below it a thread's start costs more than it saves.
const SPLIT_RELAS: usize = 1 << 16;

/// Applies x86-64 RELA entries (the absolute ones, as the sequential path
/// does) to `buf`, the first half of the entries on one thread and the
/// second on another. Each half writes only its side of the offset where
/// the second half starts, so the two never touch the same bytes: that
/// holds when the entries are sorted by offset and do not overlap, as
/// assemblers write them. `false` where it does not hold, or where an entry
/// is bad (a symbol past the table, an offset outside the section): the
/// caller then applies every entry in order, which rewrites every word
/// written here (the words are the symbol's value plus the addend, read
/// from nothing in `buf`), so the bytes and the error are the sequential
/// path's. `done` is called with each stretch of entries applied.
fn apply_x86_64_halves<R>(
    relas: &[R],
    e: object::Endianness,
    endian: Endian,
    syms: &[u64],
    buf: &mut [u8],
    done: &(impl Fn(&[u8]) + Sync),
) -> bool
where
    R: object::read::elf::Rela<Endian = object::Endianness> + object::Pod,
{
    let mid = relas.len() / 2;
    let split = (relas[mid].r_offset(e).into() as usize).min(buf.len());
    let (lo, hi) = buf.split_at_mut(split);
    // as bytes between the threads (the entry type is plain data, but
    // generic code cannot tell that it is Sync)
    let (first, second) = (
        object::pod::bytes_of_slice(&relas[..mid]),
        object::pod::bytes_of_slice(&relas[mid..]),
    );
    let half = |bytes: &[u8], out: &mut [u8], at: usize| -> bool {
        object::pod::slice_from_bytes::<R>(bytes, bytes.len() / std::mem::size_of::<R>())
            .is_ok_and(|(relas, _)| apply_x86_64(relas, e, endian, syms, out, at, done).is_ok())
    };
    let (a, b) = rayon::join(|| half(first, lo, 0), || half(second, hi, split));
    a && b
}

/// Why [`apply_x86_64`] stopped at an entry.
#[derive(Debug, PartialEq, Eq)]
enum RelaFault {
    /// It names this symbol, past the end of the table.
    Symbol(usize),
    /// It writes at this offset of the section, outside `out`.
    Offset(u64),
}

/// Applies x86-64 RELA entries, the absolute ones, in order to `out`, the
/// section's bytes from offset `at` on; stops at the first entry naming a
/// symbol past `syms` or writing outside `out`. `done` is called with
/// each stretch of 16 MiB of entries applied.
fn apply_x86_64<R>(
    relas: &[R],
    e: object::Endianness,
    endian: Endian,
    syms: &[u64],
    out: &mut [u8],
    at: usize,
    done: &impl Fn(&[u8]),
) -> std::result::Result<(), RelaFault>
where
    R: object::read::elf::Rela<Endian = object::Endianness> + object::Pod,
{
    let entry = std::mem::size_of::<R>().max(1);
    for chunk in relas.chunks(RELEASE_FROM / entry) {
        for r in chunk {
            let Some(size) = x86_64_absolute_size(r.r_type(e, false).0) else {
                continue;
            };
            let s = match r.r_sym(e, false) as usize {
                0 => 0,
                i => *syms.get(i).ok_or(RelaFault::Symbol(i))?,
            };
            let addend: i64 = r.r_addend(e).into();
            let off: u64 = r.r_offset(e).into();
            let slot = (off as usize)
                .checked_sub(at)
                .and_then(|o| out.get_mut(o..o.checked_add(size)?))
                .ok_or(RelaFault::Offset(off))?;
            write_word(slot, s.wrapping_add(addend as u64), endian);
        }
        done(object::pod::bytes_of_slice(chunk));
    }
    Ok(())
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

    fn zlib(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn claim(data: &[u8], size: u64) -> object::CompressedData<'_> {
        object::CompressedData {
            format: object::CompressionFormat::Zlib,
            data,
            uncompressed_size: size,
        }
    }

    #[test]
    fn inflate_believes_the_header_only_as_far_as_the_data_goes() {
        let plain = vec![7u8; 1000];
        let z = zlib(&plain);
        assert_eq!(&*inflate(claim(&z, 1000)).unwrap(), &plain[..]);
        // Shorter: the old reader stopped at the claim and returned a prefix.
        assert!(inflate(claim(&z, 999)).unwrap_err().contains("inflates to more"));
        assert!(inflate(claim(&z, 1001)).unwrap_err().contains("only 1000"));
        // Absurd claims cost nothing: no reservation is made from them.
        assert!(inflate(claim(&z, 1 << 62)).unwrap_err().contains("only 1000"));
    }

    #[test]
    fn header_faults_name_the_field() {
        let mut d = vec![0u8; 64];
        d[..6].copy_from_slice(b"\x7fELF\x02\x01");
        d[0x28] = 0x40; // e_shoff = 64: the table starts at the end of the file
        d[0x3a] = 64;
        assert!(header_fault(&d).unwrap().contains("e_shoff"));
        d[0x3a] = 32;
        assert!(header_fault(&d).unwrap().contains("e_shentsize is 32"));
    }

    #[test]
    fn words_round_trip_both_orders() {
        let mut b = [0u8; 4];
        write_word(&mut b, 0x11223344, Endian::Big);
        assert_eq!(b, [0x11, 0x22, 0x33, 0x44]);
        assert_eq!(read_word(&b, Endian::Big), 0x11223344);
        write_word(&mut b, 0x11223344, Endian::Little);
        assert_eq!(read_word(&b, Endian::Little), 0x11223344);
    }

    /// The two-halves path writes what applying every entry in order
    /// writes, or says that it cannot: then the caller applies them in order.
    #[test]
    fn relocations_in_two_halves_are_the_sequential_ones_or_refused() {
        use object::elf::Rela64;
        use object::read::elf::Rela as _;
        use object::{Endianness as E, I64, U64};
        let e = E::Little;
        let rela = |off: u64, ty: u32, sym: u32, addend: i64| Rela64::<E> {
            r_offset: U64::new(e, off),
            r_info: U64::new(e, ((sym as u64) << 32) | ty as u64),
            r_addend: I64::new(e, addend),
        };
        let syms = [0u64, 0x1000, 0x2000];
        // in order over the words a linker would: 8-byte, 4-byte and
        // other types (skipped), some against symbol 0
        let sorted: Vec<Rela64<E>> = (0..64u64)
            .map(|i| {
                rela(
                    i * 12,
                    [1, 10, 11, 2][i as usize % 4],
                    (i % 3) as u32,
                    i as i64 * 3 - 20,
                )
            })
            .collect();
        let sequential = |relas: &[Rela64<E>]| -> Vec<u8> {
            let mut buf = vec![0xaau8; 64 * 12];
            for r in relas {
                let Some(size) = x86_64_absolute_size(r.r_type(e, false).0) else {
                    continue;
                };
                let v = syms[r.r_sym(e, false) as usize].wrapping_add(r.r_addend(e) as u64);
                let at = r.r_offset(e) as usize;
                write_word(&mut buf[at..at + size], v, Endian::Little);
            }
            buf
        };
        let halves = |relas: &[Rela64<E>]| -> Option<Vec<u8>> {
            let mut buf = vec![0xaau8; 64 * 12];
            let released = std::sync::atomic::AtomicUsize::new(0);
            let ok = apply_x86_64_halves(relas, e, Endian::Little, &syms, &mut buf, &|c: &[u8]| {
                released.fetch_add(c.len(), std::sync::atomic::Ordering::Relaxed);
            });
            ok.then(|| {
                assert_eq!(released.into_inner(), std::mem::size_of_val(relas));
                buf
            })
        };
        assert_eq!(halves(&sorted), Some(sequential(&sorted)));
        // an entry of the first half writing past where the second starts
        let mut crossing = sorted.clone();
        crossing[1] = rela(40 * 12, 1, 1, 0);
        assert_eq!(halves(&crossing), None);
        // one of the second half writing before it
        let mut back = sorted.clone();
        back[50] = rela(0, 10, 1, 0);
        assert_eq!(halves(&back), None);
        // a symbol past the table, an offset past the section
        let mut bad = sorted.clone();
        bad[3] = rela(36, 1, 7, 0);
        assert_eq!(halves(&bad), None);
        let mut past = sorted.clone();
        past[63] = rela(64 * 12 - 4, 1, 1, 0);
        assert_eq!(halves(&past), None);
    }
}
