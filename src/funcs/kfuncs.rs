//! kfunc marks from `.BTF_ids` (encoding-funcs-vars.md §6).
//!
//! The kernel lists kfuncs in `BTF_SET8` sets: a symbol
//! `__BTF_ID__set8__<set>` at a (count, flags) header, followed by
//! (id, flags) pairs, one `__BTF_ID__func__<name>__<n>` symbol per pair. A
//! set whose header flags have bit 0 (`BTF_SET8_KFUNCS`) marks its functions
//! as kfuncs, with the pair's flags. Addresses are read as stored in the file
//! (section offsets for ET_REL, like the reference, which re-opens the file
//! with libelf), words in the file's byte order.

use object::read::elf::{ElfFile, FileHeader, SectionHeader, Sym};

use super::FuncsError;
use crate::elf::functab::FuncTable;

/// kfunc flags the encoder acts on (kernel `include/linux/btf.h`).
pub const KF_FASTCALL: u32 = 1 << 12;
pub const KF_ARENA_RET: u32 = 1 << 13;
pub const KF_ARENA_ARG1: u32 = 1 << 14;
pub const KF_ARENA_ARG2: u32 = 1 << 15;
const BTF_SET8_KFUNCS: u32 = 1;

const SET8_PREFIX: &[u8] = b"__BTF_ID__set8__";
const FUNC_PREFIX: &[u8] = b"__BTF_ID__func__";

/// Per ELF-table entry: is it a kfunc, with which flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KfuncMarks {
    flags: Vec<Option<u32>>,
}

impl KfuncMarks {
    /// No kfunc among `entries` table entries (also: `decl_tag_kfuncs` off).
    pub fn none(entries: usize) -> KfuncMarks {
        KfuncMarks {
            flags: vec![None; entries],
        }
    }

    pub fn set(&mut self, entry: u32, flags: u32) {
        if let Some(f) = self.flags.get_mut(entry as usize) {
            *f = Some(flags);
        }
    }

    /// The kfunc flags of `entry`, `None` if it is not a kfunc.
    pub fn flags(&self, entry: u32) -> Option<u32> {
        self.flags.get(entry as usize).copied().flatten()
    }

    /// Number of marked entries.
    pub fn count(&self) -> usize {
        self.flags.iter().filter(|f| f.is_some()).count()
    }

    /// Marked entries as (entry, flags), in table order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.flags
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.map(|f| (i as u32, f)))
    }

    /// Reads `.BTF_ids` and the last `SHT_SYMTAB` of the ELF file `data` and
    /// marks the kfuncs found in `table`. A file without either section has
    /// no kfuncs. Out-of-bounds set headers are skipped (the reference warns);
    /// a kfunc pair outside the section is an error (the reference cannot
    /// create its encoder then).
    pub fn from_elf(data: &[u8], table: &FuncTable<'_>) -> Result<KfuncMarks, FuncsError> {
        let mut marks = KfuncMarks::none(table.len());
        match object::File::parse(data).map_err(|e| FuncsError::Elf(format!("not a readable ELF file: {e}")))? {
            object::File::Elf32(f) => collect(&f, table, &mut marks)?,
            object::File::Elf64(f) => collect(&f, table, &mut marks)?,
            _ => return Err(FuncsError::Elf("not an ELF file".into())),
        }
        Ok(marks)
    }
}

/// The function name of a `__BTF_ID__func__<name>__<n>` symbol.
pub fn kfunc_name(sym: &[u8]) -> Option<&[u8]> {
    let rest = sym.strip_prefix(FUNC_PREFIX)?;
    if !rest.windows(2).any(|w| w == b"__") {
        return None;
    }
    let last = rest.iter().rposition(|&b| b == b'_')?;
    if last == 0 || rest[last - 1] != b'_' {
        return None;
    }
    Some(&rest[..last - 1])
}

fn collect<'a, H: FileHeader<Endian = object::Endianness>>(
    f: &ElfFile<'a, H, &'a [u8]>,
    table: &FuncTable<'_>,
    marks: &mut KfuncMarks,
) -> Result<(), FuncsError> {
    let e = f.endian();
    let data = f.data();
    let sections = f.elf_section_table();
    let mut symtab_idx = None;
    let mut ids: Option<(usize, u64, &[u8])> = None;
    for (i, sh) in sections.iter().enumerate() {
        if sh.sh_type(e) == object::elf::SHT_SYMTAB {
            symtab_idx = Some(i);
        } else if sections.section_name(e, sh).is_ok_and(|n| n == b".BTF_ids") {
            // Read from the file as stored (also for SHT_NOBITS, like libelf's raw chunk).
            let off: u64 = sh.sh_offset(e).into();
            let size: u64 = sh.sh_size(e).into();
            let bytes = data
                .get(off as usize..off.saturating_add(size) as usize)
                .ok_or_else(|| {
                    FuncsError::Elf(format!(
                        "section .BTF_ids: contents ({size:#x} bytes at {off:#x}) lie outside the file"
                    ))
                })?;
            ids = Some((i, sh.sh_addr(e).into(), bytes));
        }
    }
    let (Some(sidx), Some((ids_idx, ids_addr, ids))) = (symtab_idx, ids) else {
        return Ok(());
    };
    let sh = sections
        .section(object::SectionIndex(sidx))
        .map_err(|err| FuncsError::Elf(format!("symbol table: {err}")))?;
    let symtab = object::read::elf::SymbolTable::<H, &[u8]>::parse(e, data, sections, object::SectionIndex(sidx), sh)
        .map_err(|err| FuncsError::Elf(format!("symbol table: {err}")))?;
    let strings = symtab.strings();
    let word = |off: usize| -> Option<u32> {
        let b: [u8; 4] = ids.get(off..off + 4)?.try_into().ok()?;
        Some(if object::Endian::is_little_endian(e) {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let in_ids = |sym: &H::Sym| sym.st_shndx(e).0 as usize == ids_idx;

    // Kfunc set ranges, in symbol order.
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for sym in symtab.symbols().iter().filter(|s| in_ids(s)) {
        let name = sym.name(e, strings).unwrap_or(b"");
        if !name.starts_with(SET8_PREFIX) {
            continue;
        }
        let value: u64 = sym.st_value(e).into();
        // The reference keeps the offset in an int.
        let off = value.wrapping_sub(ids_addr) as u32 as i32;
        if off < 0 || off as usize >= ids.len() {
            continue;
        }
        if word(off as usize + 4).is_some_and(|flags| flags & BTF_SET8_KFUNCS != 0) {
            let size: u64 = sym.st_size(e).into();
            ranges.push((value, value.wrapping_add(size)));
        }
    }

    for sym in symtab.symbols().iter().filter(|s| in_ids(s)) {
        let name = sym.name(e, strings).unwrap_or(b"");
        let Some(func) = kfunc_name(name) else { continue };
        let addr: u64 = sym.st_value(e).into();
        if !ranges.iter().any(|&(s, en)| s <= addr && addr < en) {
            continue;
        }
        let off = addr.wrapping_sub(ids_addr) as i64;
        let flags = if off < 0 {
            None
        } else {
            word(off as usize).and(word(off as usize + 4))
        };
        let Some(flags) = flags else {
            return Err(FuncsError::KfuncOutsideSection {
                func: String::from_utf8_lossy(func).into_owned(),
                sym: String::from_utf8_lossy(name).into_owned(),
                off,
                size: ids.len(),
            });
        };
        if let Some(entry) = table.lookup(func) {
            marks.set(entry, flags);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn func_names() {
        assert_eq!(kfunc_name(b"__BTF_ID__func__bpf_foo__123"), Some(&b"bpf_foo"[..]));
        assert_eq!(kfunc_name(b"__BTF_ID__func__a__b__7"), Some(&b"a__b"[..]));
        assert_eq!(kfunc_name(b"__BTF_ID__func__vfs_close__1"), Some(&b"vfs_close"[..]));
        assert_eq!(kfunc_name(b"__BTF_ID__func__foo_1"), None, "no `__`");
        assert_eq!(kfunc_name(b"__BTF_ID__func__a__b_7"), None, "last `_` not doubled");
        assert_eq!(kfunc_name(b"__BTF_ID__func___"), None);
        assert_eq!(kfunc_name(b"__BTF_ID__set8__x"), None);
        assert_eq!(kfunc_name(b"__BTF_ID__func____"), Some(&b""[..]));
    }

    #[test]
    fn marks() {
        let mut m = KfuncMarks::none(3);
        m.set(1, 0x1000);
        m.set(7, 1); // outside the table: ignored
        assert_eq!((m.flags(0), m.flags(1), m.count()), (None, Some(0x1000), 1));
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(1, 0x1000)]);
    }
}
