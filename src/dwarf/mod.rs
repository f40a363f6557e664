//! DWARF decode: one compile unit at a time into a flat per-CU arena.
//!
//! The walk follows the reference loader's numbering: a type DIE gets its
//! core id (1, 2, …) when its own subtree is finished, so containers come
//! after what they contain, and `btf_type_tag` annotations of a pointer come
//! before the pointer. Subtrees that cannot produce BTF (call sites, labels,
//! locals, inlined parameters) are walked with their attributes skipped.
//!
//! Everything a CU produces lives in a handful of `Vec`s of plain records
//! (types, members, enumerators, params, annotations, functions, variables),
//! names are slices of the mapped/decompressed sections, and references are
//! unit offsets until the encoder resolves them to core ids.

use gimli::{AttributeValue, DwTag, EndianSlice, RunTimeEndian, Section};

mod attrs;
mod cu;
mod dies;
pub mod ids;
mod imports;
pub mod loc;
mod name;
mod units;
mod walk;

pub use cu::{Annot, Cu, Enumerator, FParam, Func, Member, MemberBits, Param, Slot, SlotFlags, UnitKind, Var};
pub use ids::{BitsId, CoreId, DieOffset, IdxRange, UnitOff, local_id};
pub use imports::{Imports, declares_imported_units, has_gcc_lto_unit};
pub use name::Name;
pub use units::{
    HeaderError, declares_cross_unit_refs, die_context, dwarf, unit, unit_headers, unit_headers_passing, units_repeat,
};

use attrs::Attrs;
use walk::Walker;

pub type R<'a> = EndianSlice<'a, RunTimeEndian>;
pub type Dwarf<'a> = gimli::Dwarf<R<'a>>;

pub const DW_TAG_LLVM_ANNOTATION: DwTag = DwTag(0x6000);
/// gcc 16's annotation DIEs, chained through [`DW_AT_GNU_ANNOTATION`] from
/// the DIE they annotate (or children of it, as LLVM's are).
pub const DW_TAG_GNU_ANNOTATION: DwTag = DwTag(0x6001);
pub const DW_AT_GNU_ANNOTATION: gimli::DwAt = gimli::DwAt(0x2139);

/// A decode failure, with the unit and DIE it happened at.
#[derive(Debug, Clone)]
pub struct DecodeError {
    pub cu: u64,
    pub die: Option<DieOffset>,
    pub msg: String,
    pub kind: DecodeErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The DWARF is damaged.
    Damaged,
    /// The reference stops decoding the file here but keeps what it has
    /// (DW_TAG_imported_unit).
    StopFile,
    /// A reference across units in a file the reference does not merge
    /// (its LTO note says no).
    MergedMode,
}

impl std::error::Error for DecodeError {}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.die {
            Some(d) => write!(f, "{} at DIE {:#x} (CU {:#x})", self.msg, d, self.cu),
            None => write!(f, "{} (CU {:#x})", self.msg, self.cu),
        }
    }
}

/// What DIE offsets and references of a decoded unit are relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refs {
    /// The unit (references across units are refused).
    InUnit,
    /// `.debug_info` (the merged-unit mode).
    Section,
}

/// Decoder options (from the features).
#[derive(Clone, Copy, Debug)]
pub struct DecodeOpts {
    pub type_tag: bool,
    pub decl_tag: bool,
    /// The ABI's register parameters (location analysis of parameters).
    pub regs: loc::RegParams,
    /// A variable at `DW_OP_addrx i; DW_OP_plus_uconst n` (LLVM's global
    /// merging) is at address i + n, as the next reference reads it; v1.31
    /// reads the first operation only.
    pub addrx_plus_offset: bool,
    /// Read every formal parameter's DW_AT_location as the next reference
    /// does ([`FParam::loc`]), for its parameter analysis.
    pub param_locations: bool,
    /// Read gcc's DW_TAG_GNU_annotation DIEs as the next reference does:
    /// children like LLVM's, and chains from DW_AT_GNU_annotation.
    pub gnu_annotations: bool,
}

pub struct Decoder<'a, 'd> {
    pub dwarf: &'d Dwarf<'a>,
    pub opts: DecodeOpts,
    pub endian: RunTimeEndian,
    /// Type units to resolve signature references to (`--type-units=resolve`,
    /// in the merged-part decode only); `None`: left unresolved, as the
    /// reference leaves them.
    pub type_units: Option<&'d TypeUnits>,
    /// Where this file's `.debug_info` and its supplementary file's sit
    /// among the offsets references are kept as.
    pub space: InfoSpace,
    /// The units DW_TAG_imported_unit may name (dwz), when the file has
    /// any ([`Decoder::decode_importing`]).
    pub imports: Option<&'d Imports<'a, 'd>>,
}

/// Where `.debug_info` offsets of a decoder's file and of its supplementary
/// file (dwz's `.gnu_debugaltlink`, DWARF 5's `.debug_sup`) sit in the one
/// space of offsets that references are kept in: a file refers into both.
#[derive(Clone, Copy, Debug, Default)]
pub struct InfoSpace {
    /// Added to the file's own offsets.
    pub own: u64,
    /// Added to offsets into the supplementary file, when one was read.
    pub sup: Option<u64>,
    /// One past the last offset of either (0: the file's own end).
    pub end: u64,
}

/// Where the type of each type unit is: signature → `.debug_info` offset
/// of the type's DIE (the unit's offset plus its `type_offset`), and the
/// offsets of the type units themselves, for finding the unit of a DIE.
#[derive(Debug, Default)]
pub struct TypeUnits {
    by_sig: hashbrown::HashMap<u64, u64>,
    /// (unit offset, index in the headers), sorted.
    units: Vec<(u64, usize)>,
}

impl TypeUnits {
    /// The type units among `headers` (DW_UT_type, DW_UT_split_type; the
    /// first unit of a signature wins, as a linker keeps one).
    pub fn index(headers: &[gimli::UnitHeader<R<'_>>]) -> TypeUnits {
        let mut t = TypeUnits::default();
        for (i, h) in headers.iter().enumerate() {
            let (sig, off) = match h.type_() {
                gimli::UnitType::Type {
                    type_signature,
                    type_offset,
                }
                | gimli::UnitType::SplitType {
                    type_signature,
                    type_offset,
                } => (type_signature.0, type_offset.0),
                _ => continue,
            };
            let unit = h.offset().0 as u64;
            t.by_sig.entry(sig).or_insert(unit + off as u64);
            t.units.push((unit, i));
        }
        t.units.sort_unstable();
        t
    }

    /// The `.debug_info` offset of the type with signature `sig`.
    pub fn get(&self, sig: u64) -> Option<u64> {
        self.by_sig.get(&sig).copied()
    }

    /// The header index of the type unit holding `.debug_info` offset `off`.
    pub fn unit_of(&self, off: u64) -> Option<usize> {
        let i = self.units.partition_point(|u| u.0 <= off);
        i.checked_sub(1).map(|i| self.units[i].1)
    }
}

impl<'a, 'd> Decoder<'a, 'd> {
    fn err(&self, cu: u64, die: Option<DieOffset>, msg: impl Into<String>) -> DecodeError {
        DecodeError {
            cu,
            die,
            msg: msg.into(),
            kind: DecodeErrorKind::Damaged,
        }
    }

    /// A string attribute's text (or, for `.debug_str`, the section's tail
    /// from it); an offset or index that leads nowhere is an error, never
    /// an empty name.
    fn string(&self, unit: &gimli::Unit<R<'a>>, v: &Option<AttributeValue<R<'a>>>) -> Result<&'a [u8], String> {
        match v {
            Some(AttributeValue::String(r)) => Ok(r.slice()),
            // The common forms directly: gimli's generic path costs more
            // than the rest of a DIE.
            // Names are kept as the tail of .debug_str from their offset and
            // cut at the NUL only where the text is needed (`nm`): most are
            // only ever identified by offset, and finding the NUL means a
            // cache miss per name.
            Some(AttributeValue::DebugStrRef(off)) => strp(self.dwarf.debug_str.reader().slice(), off.0 as u64),
            Some(v) => self
                .dwarf
                .attr_string(unit, *v)
                .map(|r| r.slice())
                .map_err(|e| format!("cannot read its string ({v:?}): {e}")),
            None => Ok(b""),
        }
    }

    /// Location facts of the `index`-th formal parameter (only the ABI's
    /// register parameters are analysed).
    fn param_facts(&self, unit: &gimli::Unit<R<'a>>, index: usize, attrs: &Attrs<'a>) -> u8 {
        let expected = self.opts.regs.expected(index);
        let actual = match (expected, &attrs.location) {
            (Some(e), Some(v)) => Some(loc::loc_reg_in_unit(self.dwarf, unit, v, e)),
            _ => None,
        };
        loc::param_facts(expected, actual, attrs.const_value.is_some())
    }

    /// The next reference's reading of a parameter's DW_AT_location.
    fn loc_facts(&self, unit: &gimli::Unit<R<'a>>, v: &AttributeValue<R<'a>>) -> loc::LocFacts {
        loc::LocFacts::of_value(v, &self.dwarf.locations, unit.encoding(), unit.loclists_base)
    }

    /// Decodes one unit; `None` if `keep(language, unit name)` says to skip it.
    pub fn decode(
        &self,
        header: gimli::UnitHeader<R<'a>>,
        keep: &dyn Fn(u16, &[u8]) -> bool,
    ) -> Result<Option<Cu<'a>>, DecodeError> {
        self.decode_unit(header, keep, Refs::InUnit)
    }

    /// Decodes one unit as a part of the merged unit the reference makes of
    /// a whole LTO file: DIE offsets and references are `.debug_info`
    /// offsets (DW_FORM_ref_addr included), so that the parts, appended in
    /// file order ([`Cu::append`]), are that one unit. Partial and type
    /// units contribute their DIEs too, as they do there.
    pub fn decode_merged_part(
        &self,
        header: gimli::UnitHeader<R<'a>>,
        keep: &dyn Fn(u16, &[u8]) -> bool,
    ) -> Result<Option<Cu<'a>>, DecodeError> {
        self.decode_unit(header, keep, Refs::Section)
    }

    fn decode_unit(
        &self,
        header: gimli::UnitHeader<R<'a>>,
        keep: &dyn Fn(u16, &[u8]) -> bool,
        refs: Refs,
    ) -> Result<Option<Cu<'a>>, DecodeError> {
        // (a merged part of a dwz file keeps its references out, to pull
        // the supplementary file's partial units they land in)
        let track_far = refs == Refs::Section && self.imports.is_some();
        Walker::new(self, header, refs, refs == Refs::Section, track_far)?.run(keep)
    }

    /// Address operand of a location whose first operation is DW_OP_addr or
    /// DW_OP_addrx (with [`DecodeOpts::addrx_plus_offset`], plus the
    /// operand of a DW_OP_plus_uconst that is the second and last operation
    /// after DW_OP_addrx).
    fn first_addr(&self, unit: &gimli::Unit<R<'a>>, expr: &[u8]) -> Option<u64> {
        let op = *expr.first()?;
        let mut r = EndianSlice::new(&expr[1..], self.endian);
        use gimli::Reader;
        match op {
            0x03 => r.read_address(unit.encoding().address_size).ok(),
            0xa1 => {
                let idx = r.read_uleb128().ok()?;
                let addr = self.dwarf.address(unit, gimli::DebugAddrIndex(idx as usize)).ok()?;
                if self.opts.addrx_plus_offset
                    && r.read_u8() == Ok(gimli::constants::DW_OP_plus_uconst.0)
                    && let Ok(n) = r.read_uleb128()
                    && r.is_empty()
                {
                    return Some(addr.wrapping_add(n));
                }
                Some(addr)
            }
            _ => None,
        }
    }
}

/// The tail of `.debug_str` from `off` (a DW_FORM_strp name, cut at its
/// NUL where it is used); an offset at or past the section's end is an
/// error. The loader has checked that the section ends with a NUL.
#[inline]
fn strp(debug_str: &[u8], off: u64) -> Result<&[u8], String> {
    match debug_str.get(off as usize..) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(format!(
            "DW_FORM_strp offset {off:#x} is past the end of .debug_str ({} bytes)",
            debug_str.len()
        )),
    }
}

/// A name as stored in the arena (possibly running on past its NUL) → its text.
#[inline]
pub fn nm(s: &[u8]) -> &[u8] {
    cstr(s)
}

/// The NUL-terminated string at the start of `s` (all of `s` if no NUL).
fn cstr(s: &[u8]) -> &[u8] {
    // memchr's SIMD search: the standard library's byte loop showed in an encode's profile
    match memchr::memchr(0, s) {
        Some(n) => &s[..n],
        None => s,
    }
}

#[cfg(test)]
mod tests;
