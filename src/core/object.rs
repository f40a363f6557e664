//! A BPF ELF object as libbpf sees it for CO-RE: its BTF, its `.BTF.ext`
//! relocations, and its programs (the `STT_FUNC` symbols of executable
//! sections, with their instructions).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
use sha2::Digest as _;
use thiserror::Error;

use super::ext::{self, BtfExt, ExtError};
use crate::btf::{self, Btf, Endian};

/// Why a file cannot be checked as a BPF object.
#[derive(Debug, Error)]
pub enum ObjectError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not an ELF file")]
    NotElf { path: PathBuf },
    #[error("{path}: not a readable 64-bit ELF file: {msg}")]
    BadElf { path: PathBuf, msg: String },
    #[error("{path}: not a BPF object (ELF machine {machine}, BPF is 247)")]
    NotBpf { path: PathBuf, machine: u16 },
    #[error("{path}: section {section}: {msg}")]
    Section {
        path: PathBuf,
        section: String,
        msg: String,
    },
    #[error("{path}: no .BTF section (build with clang -g)")]
    NoBtf { path: PathBuf },
    #[error("{path}: section .BTF: {source}")]
    Btf {
        path: PathBuf,
        source: btf::read::ReadError,
    },
    #[error(
        "{path}: no .BTF.ext section, so no CO-RE relocations to check (built without -g, or stripped with --strip-debug?)"
    )]
    NoBtfExt { path: PathBuf },
    #[error("{path}: section .BTF.ext: {source}")]
    Ext { path: PathBuf, source: ExtError },
    #[error("{path}: section .BTF.ext is {ext:?}-endian but the ELF file is {elf:?}-endian")]
    EndianMismatch { path: PathBuf, ext: Endian, elf: Endian },
    #[error(
        "{path}: section .BTF.ext: block {block} names section string offset {off}, which is not in .BTF's strings"
    )]
    BadBlockName { path: PathBuf, block: usize, off: u32 },
}

/// One BPF instruction, decoded from either byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub const SIZE: usize = 8;

    pub fn decode(b: &[u8], endian: Endian) -> Insn {
        let (dst, src, off, imm) = match endian {
            Endian::Little => (
                b[1] & 0xf,
                b[1] >> 4,
                i16::from_le_bytes([b[2], b[3]]),
                i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            ),
            Endian::Big => (
                b[1] >> 4,
                b[1] & 0xf,
                i16::from_be_bytes([b[2], b[3]]),
                i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            ),
        };
        Insn {
            code: b[0],
            dst,
            src,
            off,
            imm,
        }
    }

    pub fn class(&self) -> u8 {
        self.code & 7
    }
}

/// A program or subprogram: one `STT_FUNC` symbol of an executable section.
#[derive(Clone, Debug)]
pub struct Program {
    /// The symbol's name (libbpf's program name).
    pub name: String,
    /// Index of the program's ELF section in [`BpfObject::sections`].
    pub section: SecIdx,
    /// The first instruction's index in the section.
    pub sec_insn_off: u32,
    pub insns: Vec<Insn>,
    /// False for `SEC("?...")` programs: libbpf neither relocates nor loads them.
    pub autoload: bool,
}

/// An ELF section index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct SecIdx(usize);

impl SecIdx {
    #[inline]
    pub fn new(index: usize) -> SecIdx {
        SecIdx(index)
    }
    /// The index in the object's section header table.
    #[inline]
    pub fn get(self) -> usize {
        self.0
    }
}

/// A call from one instruction to another function of the object, resolved
/// through the ELF relocation when the call has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The calling instruction's section and index in it.
    pub from: (SecIdx, u32),
    /// The called instruction's section and index in it.
    pub to: (SecIdx, u32),
}

/// An ELF section of the object, by name (programs name theirs).
#[derive(Clone, Debug)]
pub struct Section {
    pub index: SecIdx,
    pub name: String,
    pub executable: bool,
}

/// A BPF object read for the CO-RE check.
#[derive(Debug)]
pub struct BpfObject {
    pub path: PathBuf,
    pub endian: Endian,
    /// The object's own BTF (local types).
    pub btf: Arc<Btf>,
    pub ext: BtfExt,
    pub sections: Vec<Section>,
    /// Sorted by section, then offset (libbpf's order).
    pub programs: Vec<Program>,
    /// Calls and function references (`BPF_PSEUDO_CALL`, `BPF_PSEUDO_FUNC`)
    /// that go through an ELF relocation to another function.
    pub calls: Vec<CallSite>,
    /// The file's SHA-256, in hex: shards of one check must have checked
    /// the same build of an object.
    pub sha256: String,
}

impl BpfObject {
    pub fn open(path: &Path) -> Result<BpfObject, ObjectError> {
        let data = std::fs::read(path).map_err(|source| ObjectError::Io {
            path: path.into(),
            source,
        })?;
        BpfObject::parse(path, &data)
    }

    /// Reads an object from its bytes (`path` names it in errors).
    pub fn parse(path: &Path, data: &[u8]) -> Result<BpfObject, ObjectError> {
        let p = || path.to_path_buf();
        if !data.starts_with(b"\x7fELF") {
            return Err(ObjectError::NotElf { path: p() });
        }
        let file = ElfFile64::<Endianness>::parse(data).map_err(|e| ObjectError::BadElf {
            path: p(),
            msg: e.to_string(),
        })?;
        let hdr = file.elf_header();
        let e = file.endian();
        let machine = hdr.e_machine(e).0;
        if machine != elf::EM_BPF.0 {
            return Err(ObjectError::NotBpf { path: p(), machine });
        }
        let endian = if file.is_little_endian() {
            Endian::Little
        } else {
            Endian::Big
        };
        let sec_err = |section: &str, msg: String| ObjectError::Section {
            path: p(),
            section: section.into(),
            msg,
        };
        let contents = |name: &str| -> Result<Option<&[u8]>, ObjectError> {
            match file.section_by_name(name) {
                None => Ok(None),
                Some(s) => s
                    .data()
                    .map(Some)
                    .map_err(|e| sec_err(name, format!("cannot read contents: {e}"))),
            }
        };
        let btf_bytes = contents(".BTF")?.ok_or_else(|| ObjectError::NoBtf { path: p() })?;
        let mut local = btf::read::parse(btf_bytes).map_err(|source| ObjectError::Btf { path: p(), source })?;
        local.set_endian(endian);
        let ext_bytes = contents(".BTF.ext")?.ok_or_else(|| ObjectError::NoBtfExt { path: p() })?;
        let (ext, ext_endian) = ext::parse(ext_bytes).map_err(|source| ObjectError::Ext { path: p(), source })?;
        if ext_endian != endian {
            return Err(ObjectError::EndianMismatch {
                path: p(),
                ext: ext_endian,
                elf: endian,
            });
        }
        for (block, b) in ext.blocks.iter().enumerate() {
            if local.str_at(b.sec_name).is_none() {
                return Err(ObjectError::BadBlockName {
                    path: p(),
                    block,
                    off: b.sec_name.get(),
                });
            }
        }

        let mut sections = Vec::new();
        for s in file.sections() {
            let name = s
                .name()
                .map_err(|e| sec_err("?", format!("unreadable section name: {e}")))?;
            let sh = s.elf_section_header();
            sections.push(Section {
                index: SecIdx::new(s.index().0),
                name: name.to_string(),
                executable: sh.sh_type(e) == elf::SHT_PROGBITS
                    && sh.sh_flags(e).0 & elf::SHF_EXECINSTR.0 != 0
                    && s.size() > 0,
            });
        }

        let mut programs = Vec::new();
        let text = file.section_by_name(".text").map(|s| s.index().0);
        for sym in file.symbols() {
            if sym.kind() != SymbolKind::Text {
                continue;
            }
            let Some(si) = sym.section_index() else { continue };
            let Some(sec) = sections.iter().find(|s| s.index.0 == si.0) else {
                continue;
            };
            if !sec.executable {
                continue;
            }
            let raw = sym.elf_symbol();
            if raw.st_type() != elf::STT_FUNC {
                continue;
            }
            let name = sym
                .name()
                .map_err(|e| sec_err(&sec.name, format!("unreadable symbol name: {e}")))?;
            let bytes = file
                .section_by_index(si)
                .and_then(|s| s.data())
                .map_err(|e| sec_err(&sec.name, format!("cannot read contents: {e}")))?;
            let (off, size) = (sym.address(), sym.size());
            let end = off.checked_add(size).filter(|&e| e <= bytes.len() as u64);
            let Some(end) = end else {
                return Err(sec_err(
                    &sec.name,
                    format!("program '{name}' at offset {off} crosses the section's end"),
                ));
            };
            if off % Insn::SIZE as u64 != 0 || size % Insn::SIZE as u64 != 0 {
                return Err(sec_err(
                    &sec.name,
                    format!("program '{name}' is not whole instructions (offset {off}, {size} bytes)"),
                ));
            }
            if Some(si.0) != text && raw.st_bind() == elf::STB_LOCAL {
                return Err(sec_err(
                    &sec.name,
                    format!("program '{name}' is static, which libbpf refuses outside .text"),
                ));
            }
            let insns = bytes[off as usize..end as usize]
                .chunks_exact(Insn::SIZE)
                .map(|c| Insn::decode(c, endian))
                .collect();
            programs.push(Program {
                name: name.to_string(),
                section: sec.index,
                sec_insn_off: (off / Insn::SIZE as u64) as u32,
                insns,
                autoload: !sec.name.starts_with('?'),
            });
        }
        programs.sort_by_key(|p| (p.section, p.sec_insn_off));

        let calls = call_relocations(&file, &sections, endian, &sec_err)?;
        Ok(BpfObject {
            path: p(),
            endian,
            btf: Arc::new(local),
            ext,
            sections,
            programs,
            calls,
            sha256: sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    /// The ELF section named `name` (a `.BTF.ext` block's).
    pub fn section_by_name(&self, name: &[u8]) -> Option<&Section> {
        self.sections.iter().find(|s| s.name.as_bytes() == name)
    }

    pub fn section(&self, idx: SecIdx) -> &Section {
        self.sections
            .iter()
            .find(|s| s.index == idx)
            .expect("a section of this object")
    }

    /// The program containing instruction `insn` of section `sec`
    /// (libbpf's `find_prog_by_sec_insn`).
    pub fn program_at(&self, sec: SecIdx, insn: u32) -> Option<usize> {
        let i = self
            .programs
            .partition_point(|p| (p.section, p.sec_insn_off) <= (sec, insn));
        let i = i.checked_sub(1)?;
        let p = &self.programs[i];
        (p.section == sec && insn < p.sec_insn_off + p.insns.len() as u32).then_some(i)
    }

    /// The section name a program is listed under (without libbpf's `?`).
    pub fn program_section(&self, prog: &Program) -> &str {
        let name = &self.section(prog.section).name;
        name.strip_prefix('?').unwrap_or(name)
    }
}

/// The object's calls and function references that go through ELF
/// relocations: a `call` (src 1) or a function-pointer `ld_imm64` (src 4)
/// naming a symbol in another (or the same) executable section.
fn call_relocations(
    file: &ElfFile64<'_, Endianness>,
    sections: &[Section],
    endian: Endian,
    sec_err: &dyn Fn(&str, String) -> ObjectError,
) -> Result<Vec<CallSite>, ObjectError> {
    let mut calls = Vec::new();
    for s in file.sections() {
        let Some(sec) = sections.iter().find(|x| x.index.0 == s.index().0) else {
            continue;
        };
        if !sec.executable || s.kind() == SectionKind::Metadata {
            continue;
        }
        let bytes = s
            .data()
            .map_err(|e| sec_err(&sec.name, format!("cannot read contents: {e}")))?;
        for (off, rel) in s.relocations() {
            let object::RelocationTarget::Symbol(si) = rel.target() else {
                continue;
            };
            let Ok(sym) = file.symbol_by_index(si) else {
                return Err(sec_err(
                    &sec.name,
                    format!("relocation at {off} names symbol {} past the table", si.0),
                ));
            };
            let Some(to_sec) = sym.section_index() else { continue };
            let Some(to) = sections.iter().find(|x| x.index.0 == to_sec.0 && x.executable) else {
                continue;
            };
            let at = off as usize;
            let Some(b) = bytes.get(at..at + Insn::SIZE) else {
                return Err(sec_err(
                    &sec.name,
                    format!("relocation at {off} lies past the section's end"),
                ));
            };
            if off % Insn::SIZE as u64 != 0 {
                continue;
            }
            let insn = Insn::decode(b, endian);
            let is_call = insn.code == 0x85 && insn.src == 1;
            let is_func_ref = insn.code == 0x18 && insn.src == 4;
            if !is_call && !is_func_ref {
                continue;
            }
            // A section symbol: the target is relative to the section's start,
            // the instruction's imm giving the instruction (calls count from
            // the next instruction). A function symbol names the target itself.
            let base = sym.address() as i64 / Insn::SIZE as i64;
            let target = if sym.kind() == SymbolKind::Section {
                if is_call {
                    base + insn.imm as i64 + 1
                } else {
                    base + insn.imm as i64 / Insn::SIZE as i64
                }
            } else {
                base
            };
            if target < 0 {
                continue;
            }
            calls.push(CallSite {
                from: (sec.index, (off / Insn::SIZE as u64) as u32),
                to: (to.index, target as u32),
            });
        }
    }
    Ok(calls)
}
