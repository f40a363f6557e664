//! Writing BTF into an ELF file natively (no objcopy): `.BTF` (and
//! `.BTF.base`) contents are replaced or added, everything else keeps its
//! bytes and its section index.
//!
//! The new contents go at the end of the file, followed by a new section
//! header table (and a new `.shstrtab` when a section name is added), so no
//! existing offset moves: program headers, symbol tables and relocations that
//! name section indices stay valid. The bytes the old contents occupied are
//! left in place, unreferenced. Either byte order, 32 or 64 bit, and the
//! extended numbering for 65280 or more sections are handled.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ElfWriteError {
    #[error("not an ELF file")]
    NotElf,
    #[error("ELF header: unsupported class {0} or data encoding {1}")]
    BadIdent(u8, u8),
    #[error("section header table [{off}, +{len}) lies outside the {size}-byte file")]
    ShdrsOutOfFile { off: u64, len: u64, size: usize },
    #[error("section header string table index {0} is out of range")]
    BadShstrndx(u32),
    #[error("section {idx}: [{off}, +{len}) lies outside the file")]
    SectionOutOfFile { idx: usize, off: u64, len: u64 },
    #[error("file has no section headers")]
    NoSections,
    #[error("section header string table (section {idx}) has type {sh_type}, not STRTAB")]
    BadShstrtabType { idx: usize, sh_type: u64 },
    #[error("section {idx}: name offset {off} lies outside the {len}-byte section name table")]
    BadSectionName { idx: usize, off: u64, len: usize },
    #[error("section {idx} is named {name} but has type {sh_type}, not PROGBITS: its contents are not replaced")]
    NotProgbits { idx: usize, name: String, sh_type: u64 },
    #[error("section name table (section {idx}) does not end with a NUL byte, so its last name is unterminated")]
    UnterminatedShstrtab { idx: usize },
}

#[derive(Clone, Copy)]
struct Layout {
    is64: bool,
    big: bool,
}

impl Layout {
    fn shentsize(self) -> usize {
        if self.is64 { 64 } else { 40 }
    }
    fn rd(self, b: &[u8], off: usize, n: usize) -> u64 {
        let s = &b[off..off + n];
        let mut v = 0u64;
        if self.big {
            for &x in s {
                v = (v << 8) | x as u64;
            }
        } else {
            for &x in s.iter().rev() {
                v = (v << 8) | x as u64;
            }
        }
        v
    }
    fn wr(self, b: &mut [u8], off: usize, n: usize, v: u64) {
        for i in 0..n {
            let byte = (v >> (8 * i)) as u8;
            let at = if self.big { off + n - 1 - i } else { off + i };
            b[at] = byte;
        }
    }
    /// (offset, size) of field `name` in a section header.
    fn field(self, name: &str) -> (usize, usize) {
        let w = if self.is64 { 8 } else { 4 };
        match (name, self.is64) {
            ("name", _) => (0, 4),
            ("type", _) => (4, 4),
            ("flags", _) => (8, w),
            ("addr", true) => (16, 8),
            ("addr", false) => (12, 4),
            ("offset", true) => (24, 8),
            ("offset", false) => (16, 4),
            ("size", true) => (32, 8),
            ("size", false) => (20, 4),
            ("link", true) => (40, 4),
            ("link", false) => (24, 4),
            ("info", true) => (44, 4),
            ("info", false) => (28, 4),
            ("addralign", true) => (48, 8),
            ("addralign", false) => (32, 4),
            ("entsize", true) => (56, 8),
            ("entsize", false) => (36, 4),
            _ => unreachable!("unknown section header field {name}"),
        }
    }
    fn get(self, sh: &[u8], name: &str) -> u64 {
        let (o, n) = self.field(name);
        self.rd(sh, o, n)
    }
    fn set(self, sh: &mut [u8], name: &str, v: u64) {
        let (o, n) = self.field(name);
        self.wr(sh, o, n, v)
    }
}

const SHT_PROGBITS: u64 = 1;
const SHT_STRTAB: u64 = 3;
const SHT_NOBITS: u64 = 8;
const SHF_COMPRESSED: u64 = 0x800;
const SHN_XINDEX: u64 = 0xffff;
const SHN_LORESERVE: usize = 0xff00;

fn align(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// Returns a copy of ELF `data` in which each named section holds the given
/// contents (replaced if present, else added as a non-alloc PROGBITS section
/// with alignment 1, as the kernel build's `.BTF` is).
pub fn set_sections(data: &[u8], sections: &[(&str, &[u8])]) -> Result<Vec<u8>, ElfWriteError> {
    if data.len() < 52 || &data[..4] != b"\x7fELF" {
        return Err(ElfWriteError::NotElf);
    }
    let l = match (data[4], data[5]) {
        (1, 1) => Layout {
            is64: false,
            big: false,
        },
        (1, 2) => Layout { is64: false, big: true },
        (2, 1) => Layout { is64: true, big: false },
        (2, 2) => Layout { is64: true, big: true },
        (c, d) => return Err(ElfWriteError::BadIdent(c, d)),
    };
    if l.is64 && data.len() < 64 {
        return Err(ElfWriteError::NotElf);
    }
    // e_shoff, e_shentsize, e_shnum, e_shstrndx
    let (shoff_at, shoff_n, shnum_at, shstrndx_at) = if l.is64 { (40, 8, 60, 62) } else { (32, 4, 48, 50) };
    let shoff = l.rd(data, shoff_at, shoff_n) as usize;
    let mut shnum = l.rd(data, shnum_at, 2) as usize;
    let mut shstrndx = l.rd(data, shstrndx_at, 2);
    let es = l.shentsize();
    if shoff == 0 {
        return Err(ElfWriteError::NoSections);
    }
    if shoff.checked_add(es).is_none_or(|e| e > data.len()) {
        return Err(ElfWriteError::ShdrsOutOfFile {
            off: shoff as u64,
            len: es as u64,
            size: data.len(),
        });
    }
    let sec0 = &data[shoff..shoff + es];
    if shnum == 0 {
        shnum = l.get(sec0, "size") as usize;
    }
    if shstrndx == SHN_XINDEX {
        shstrndx = l.get(sec0, "link");
    }
    let table_len = shnum.saturating_mul(es);
    if shnum == 0 || shoff.checked_add(table_len).is_none_or(|e| e > data.len()) {
        return Err(ElfWriteError::ShdrsOutOfFile {
            off: shoff as u64,
            len: table_len as u64,
            size: data.len(),
        });
    }
    let mut shdrs: Vec<Vec<u8>> = (0..shnum)
        .map(|i| data[shoff + i * es..shoff + (i + 1) * es].to_vec())
        .collect();
    let stri = shstrndx as usize;
    if stri >= shnum {
        return Err(ElfWriteError::BadShstrndx(shstrndx as u32));
    }
    // Readers take names only from a STRTAB (a NOBITS one has no bytes).
    let sh_type = l.get(&shdrs[stri], "type");
    if sh_type != SHT_STRTAB {
        return Err(ElfWriteError::BadShstrtabType { idx: stri, sh_type });
    }
    let (so, ss) = (l.get(&shdrs[stri], "offset"), l.get(&shdrs[stri], "size"));
    if so.checked_add(ss).is_none_or(|e| e > data.len() as u64) {
        return Err(ElfWriteError::SectionOutOfFile {
            idx: stri,
            off: so,
            len: ss,
        });
    }
    let mut shstrtab = data[so as usize..(so + ss) as usize].to_vec();
    // ELF readers take no name from an unterminated string; an added name
    // would terminate it, and an unterminated ".BTF" would be replaced here
    // yet stay unreadable.
    if shstrtab.last().is_some_and(|&c| c != 0) {
        return Err(ElfWriteError::UnterminatedShstrtab { idx: stri });
    }
    // Names this adds go after the table's end: a section whose name points
    // there (or into an empty table) would take such a name too, so that
    // file is refused rather than written with two sections named `.BTF`.
    for (idx, sh) in shdrs.iter().enumerate() {
        let off = l.get(sh, "name");
        if off >= shstrtab.len() as u64 {
            return Err(ElfWriteError::BadSectionName {
                idx,
                off,
                len: shstrtab.len(),
            });
        }
    }
    let name_of = |tab: &[u8], off: u64| -> Vec<u8> {
        let s = tab.get(off as usize..).unwrap_or(&[]);
        s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())].to_vec()
    };
    let mut out = data.to_vec();
    let mut names_added = false;
    for (name, contents) in sections {
        let idx = (0..shnum).find(|&i| name_of(&shstrtab, l.get(&shdrs[i], "name")) == name.as_bytes());
        // A symbol or string table (or any section the format gives a
        // meaning) holding BTF would be a file no reader accepts.
        if let Some(i) = idx
            && !matches!(l.get(&shdrs[i], "type"), SHT_PROGBITS | SHT_NOBITS)
        {
            return Err(ElfWriteError::NotProgbits {
                idx: i,
                name: (*name).to_string(),
                sh_type: l.get(&shdrs[i], "type"),
            });
        }
        let at = align(out.len(), 8);
        out.resize(at, 0);
        out.extend_from_slice(contents);
        let idx = match idx {
            Some(i) => i,
            None => {
                let noff = shstrtab.len() as u64;
                shstrtab.extend_from_slice(name.as_bytes());
                shstrtab.push(0);
                names_added = true;
                let mut sh = vec![0u8; es];
                l.set(&mut sh, "name", noff);
                l.set(&mut sh, "type", SHT_PROGBITS);
                l.set(&mut sh, "addralign", 1);
                shdrs.push(sh);
                shdrs.len() - 1
            }
        };
        l.set(&mut shdrs[idx], "offset", at as u64);
        l.set(&mut shdrs[idx], "size", contents.len() as u64);
        // The contents are now in the file, uncompressed: a replaced section
        // that was NOBITS or SHF_COMPRESSED would otherwise read back empty
        // or fail to inflate.
        if l.get(&shdrs[idx], "type") == SHT_NOBITS {
            l.set(&mut shdrs[idx], "type", SHT_PROGBITS);
        }
        let flags = l.get(&shdrs[idx], "flags");
        l.set(&mut shdrs[idx], "flags", flags & !SHF_COMPRESSED);
    }
    if names_added {
        let at = out.len();
        out.extend_from_slice(&shstrtab);
        l.set(&mut shdrs[stri], "offset", at as u64);
        l.set(&mut shdrs[stri], "size", shstrtab.len() as u64);
    }
    let new_shoff = align(out.len(), 8);
    out.resize(new_shoff, 0);
    let n = shdrs.len();
    // Extended numbering once the count no longer fits below SHN_LORESERVE.
    if n >= SHN_LORESERVE {
        l.set(&mut shdrs[0], "size", n as u64);
        l.wr(&mut out, shnum_at, 2, 0);
    } else {
        if l.rd(data, shnum_at, 2) == 0 {
            l.set(&mut shdrs[0], "size", 0);
        }
        l.wr(&mut out, shnum_at, 2, n as u64);
    }
    for sh in &shdrs {
        out.extend_from_slice(sh);
    }
    l.wr(&mut out, shoff_at, shoff_n, new_shoff as u64);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection};

    fn tiny_elf(is64: bool, big: bool) -> Vec<u8> {
        // ELF header + null section + .shstrtab
        let l = Layout { is64, big };
        let ehsize = if is64 { 64 } else { 52 };
        let es = l.shentsize();
        let strtab = b"\0.shstrtab\0.text\0";
        let mut f = vec![0u8; ehsize];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = if is64 { 2 } else { 1 };
        f[5] = if big { 2 } else { 1 };
        f[6] = 1;
        l.wr(&mut f, 16, 2, 1); // ET_REL
        l.wr(&mut f, 18, 2, if is64 { 62 } else { 3 });
        l.wr(&mut f, 20, 4, 1);
        let str_off = f.len();
        f.extend_from_slice(strtab);
        let text_off = f.len();
        f.extend_from_slice(b"\x90\x90\x90\x90");
        let shoff = align(f.len(), 8);
        f.resize(shoff, 0);
        let mut null = vec![0u8; es];
        let mut s1 = vec![0u8; es];
        l.set(&mut s1, "name", 1);
        l.set(&mut s1, "type", 3);
        l.set(&mut s1, "offset", str_off as u64);
        l.set(&mut s1, "size", strtab.len() as u64);
        let mut s2 = vec![0u8; es];
        l.set(&mut s2, "name", 11);
        l.set(&mut s2, "type", 1);
        l.set(&mut s2, "offset", text_off as u64);
        l.set(&mut s2, "size", 4);
        null.truncate(es);
        f.extend_from_slice(&null);
        f.extend_from_slice(&s1);
        f.extend_from_slice(&s2);
        let (shoff_at, shoff_n, shentsize_at, shnum_at, shstrndx_at) =
            if is64 { (40, 8, 58, 60, 62) } else { (32, 4, 46, 48, 50) };
        l.wr(&mut f, shoff_at, shoff_n, shoff as u64);
        l.wr(&mut f, if is64 { 52 } else { 40 }, 2, ehsize as u64);
        l.wr(&mut f, shentsize_at, 2, es as u64);
        l.wr(&mut f, shnum_at, 2, 3);
        l.wr(&mut f, shstrndx_at, 2, 1);
        f
    }

    #[test]
    fn adds_then_replaces_sections_in_every_class_and_byte_order() {
        for (is64, big) in [(true, false), (true, true), (false, false), (false, true)] {
            let f = tiny_elf(is64, big);
            let a = set_sections(&f, &[(".BTF", b"first"), (".BTF.base", b"base!")]).unwrap();
            let b = set_sections(&a, &[(".BTF", b"second, longer")]).unwrap();
            let obj = object::File::parse(&*b).unwrap();
            assert_eq!(obj.section_by_name(".BTF").unwrap().data().unwrap(), b"second, longer");
            assert_eq!(obj.section_by_name(".BTF.base").unwrap().data().unwrap(), b"base!");
            assert_eq!(
                obj.section_by_name(".text").unwrap().data().unwrap(),
                b"\x90\x90\x90\x90"
            );
            // object lists every section but the null one
            assert_eq!(obj.sections().count(), 4, "is64={is64} big={big}");
        }
    }

    /// A replaced section that was NOBITS or marked compressed holds the new
    /// contents as they are (found by the elf_open fuzz target).
    #[test]
    fn replaced_nobits_or_compressed_section_holds_the_contents() {
        let f = tiny_elf(true, false);
        let shoff = u64::from_le_bytes(f[40..48].try_into().unwrap()) as usize;
        let l = Layout { is64: true, big: false };
        for (ty, flags) in [(SHT_NOBITS, 3), (SHT_PROGBITS, SHF_COMPRESSED)] {
            let mut g = f.clone();
            let text = &mut g[shoff + 2 * 64..shoff + 3 * 64];
            l.set(text, "type", ty);
            l.set(text, "flags", flags);
            let out = set_sections(&g, &[(".text", b"new contents")]).unwrap();
            let obj = object::File::parse(&*out).unwrap();
            let sec = obj.section_by_name(".text").unwrap();
            assert_eq!(&*sec.uncompressed_data().unwrap(), b"new contents");
        }
    }

    fn l_set(f: &mut [u8], at: usize, field: &str, v: u64) {
        let l = Layout { is64: true, big: false };
        l.set(&mut f[at..at + 64], field, v);
    }

    #[test]
    fn damaged_headers_are_errors() {
        let f = tiny_elf(true, false);
        assert_eq!(set_sections(b"nope", &[]), Err(ElfWriteError::NotElf));
        let mut bad = f.clone();
        bad[40] = 0xff;
        bad[41] = 0xff;
        assert!(matches!(
            set_sections(&bad, &[(".BTF", b"x")]),
            Err(ElfWriteError::ShdrsOutOfFile { .. })
        ));
        let mut bad = f.clone();
        bad[62] = 9;
        assert_eq!(
            set_sections(&bad, &[(".BTF", b"x")]),
            Err(ElfWriteError::BadShstrndx(9))
        );
        // A section name table without bytes in the file.
        let mut bad = f.clone();
        let shoff = u64::from_le_bytes(f[40..48].try_into().unwrap()) as usize;
        bad[shoff + 64 + 4] = 8;
        assert_eq!(
            set_sections(&bad, &[(".BTF", b"x")]),
            Err(ElfWriteError::BadShstrtabType { idx: 1, sh_type: 8 })
        );
        // A name at the end of .shstrtab (17 bytes) would become the added ".BTF".
        let mut bad = f.clone();
        let shoff = u64::from_le_bytes(f[40..48].try_into().unwrap()) as usize;
        bad[shoff + 2 * 64] = 17;
        assert_eq!(
            set_sections(&bad, &[(".BTF", b"x")]),
            Err(ElfWriteError::BadSectionName {
                idx: 2,
                off: 17,
                len: 17
            })
        );
        // ".text" cut to an unterminated ".BTF" at the table's end: readers
        // see no name there (found by the elf_open fuzz target).
        let mut bad = f.clone();
        bad[64 + 11..64 + 15].copy_from_slice(b".BTF");
        bad[shoff + 64 + 32] = 15;
        assert_eq!(
            set_sections(&bad, &[(".BTF", b"x")]),
            Err(ElfWriteError::UnterminatedShstrtab { idx: 1 })
        );
        // A symbol table named ".BTF" (found by the elf_open fuzz target).
        let mut bad = f.clone();
        l_set(&mut bad, shoff + 2 * 64, "type", 2);
        assert_eq!(
            set_sections(&bad, &[(".text", b"x")]),
            Err(ElfWriteError::NotProgbits {
                idx: 2,
                name: ".text".into(),
                sh_type: 2
            })
        );
        for n in 0..f.len() {
            let _ = set_sections(&f[..n], &[(".BTF", b"x")]);
        }
    }
}
