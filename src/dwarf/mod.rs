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

use std::path::Path;

use gimli::{AttributeValue, DwTag, EndianSlice, RunTimeEndian, Section, UnitOffset, constants as dw};

use crate::elf::debug::DebugSections;

mod dies;
pub mod loc;

use dies::{Dies, Field, ReadError, Value};

pub type R<'a> = EndianSlice<'a, RunTimeEndian>;
pub type Dwarf<'a> = gimli::Dwarf<R<'a>>;

/// "No reference / no value" in u32 columns.
pub const NONE: u32 = u32::MAX;
pub const DW_TAG_LLVM_ANNOTATION: DwTag = DwTag(0x6000);

/// A decode failure, with the unit and DIE it happened at.
#[derive(Debug, Clone)]
pub struct DecodeError {
    pub cu: u64,
    pub die: Option<u64>,
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

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.die {
            Some(d) => write!(f, "{} at DIE {:#x} (CU {:#x})", self.msg, d, self.cu),
            None => write!(f, "{} (CU {:#x})", self.msg, self.cu),
        }
    }
}

/// One placed type (core id = index + 1).
#[derive(Clone, Debug)]
pub struct Slot<'a> {
    pub tag: DwTag,
    /// Section offset of the DIE (for messages).
    pub die: u64,
    /// Unit offset of the DIE (for reference resolution).
    pub uoff: u32,
    pub name: &'a [u8],
    pub spec: u32,
    pub ty: u32,
    pub size: u64,
    pub encoding: u8,
    pub declaration: bool,
    pub varargs: bool,
    pub nelems: u32,
    /// Members, enumerators or params: range in the matching column.
    pub kids: u32,
    pub nkids: u32,
    /// Decl-tag annotations: range in `annots`.
    pub annots: u32,
    pub nannots: u32,
}

#[derive(Clone, Debug)]
pub struct Member<'a> {
    pub name: &'a [u8],
    pub ty: u32,
    /// Index + 1 of the member's bitfield attributes in `Cu::member_bits`
    /// (0: it has none; see [`Cu::bits`]).
    pub bits: u32,
    pub die: u64,
    /// DW_AT_data_member_location in bytes (`None` if absent).
    pub loc: Option<u64>,
}

/// The attributes only bitfield members carry, kept apart from [`Member`]:
/// members are two fifths of a kernel's DIEs and each is copied twice while
/// decoding, and these four would make a member 112 bytes instead of 48.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemberBits {
    pub data_bit_offset: Option<u64>,
    pub bit_size: Option<u64>,
    pub byte_size: Option<u64>,
    pub bit_offset: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct Enumerator<'a> {
    pub name: &'a [u8],
    pub value: u64,
}

#[derive(Clone, Debug)]
pub struct Param<'a> {
    pub name: &'a [u8],
    pub ty: u32,
}

#[derive(Clone, Debug)]
pub struct Annot<'a> {
    pub value: &'a [u8],
    pub component: i32,
}

/// A formal parameter of a subprogram.
#[derive(Clone, Debug)]
pub struct FParam<'a> {
    pub uoff: u32,
    pub name: &'a [u8],
    pub ty: u32,
    pub has_type: bool,
    pub origin: u32,
    /// Location facts (`loc::param_facts`), for register parameters.
    pub facts: u8,
}

/// A DW_TAG_subprogram, in the reference's functions-table order (nested
/// subprograms before their parent).
#[derive(Clone, Debug)]
pub struct Func<'a> {
    pub uoff: u32,
    pub die: u64,
    pub name: &'a [u8],
    pub ty: u32,
    pub has_type: bool,
    pub origin: u32,
    pub spec: u32,
    pub declaration: bool,
    pub varargs: bool,
    pub params: u32,
    pub nparams: u32,
    pub annots: u32,
    pub nannots: u32,
}

/// A CU-level DW_TAG_variable.
#[derive(Clone, Debug)]
pub struct Var<'a> {
    pub uoff: u32,
    pub die: u64,
    pub name: &'a [u8],
    pub ty: u32,
    pub spec: u32,
    pub declaration: bool,
    pub external: bool,
    pub artificial: bool,
    pub addr: Option<u64>,
    pub annots: u32,
    pub nannots: u32,
}

/// What DIE offsets and references of a decoded unit are relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refs {
    /// The unit (references across units are refused).
    InUnit,
    /// `.debug_info` (the merged-unit mode).
    Section,
}

/// What the reference does with a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    Normal,
    /// Partial or skeleton unit: contributes nothing.
    Ignored,
}

/// One decoded CU.
#[derive(Debug)]
pub struct Cu<'a> {
    pub offset: u64,
    pub language: u16,
    pub name: &'a [u8],
    pub kind: UnitKind,
    pub address_size: u8,
    pub slots: Vec<Slot<'a>>,
    pub members: Vec<Member<'a>>,
    /// Bitfield attributes of members (`Member::bits`).
    pub member_bits: Vec<MemberBits>,
    pub enumerators: Vec<Enumerator<'a>>,
    pub params: Vec<Param<'a>>,
    pub annots: Vec<Annot<'a>>,
    pub funcs: Vec<Func<'a>>,
    pub fparams: Vec<FParam<'a>>,
    pub vars: Vec<Var<'a>>,
    /// (unit offset, core id), sorted by offset: reference resolution.
    pub index: Vec<(u32, u32)>,
    /// Per 2^BUCKET_SHIFT bytes of unit offset, the first `index` position at
    /// or past it (built with [`Cu::build_buckets`]; empty = binary search).
    /// Type references resolve in a step or two instead of a 13-step binary
    /// search with a cache miss per step, which was 4 % of an encode.
    pub buckets: Vec<u32>,
    /// Count of nested DW_TAG_unspecified_type slots (placed, never emitted).
    pub has_nested_unspecified: bool,
    /// DIEs read (null entries not counted).
    pub dies: u64,
    /// References to types in DWARF type units (DW_FORM_ref_sig8, and the
    /// DW_AT_signature of gcc's skeleton types). The reference resolves
    /// none of them: such a reference is void, a skeleton an empty
    /// anonymous struct. Counted so that the loss can be reported.
    pub type_unit_refs: u64,
    /// `.debug_info` offsets that resolved signature references point to
    /// (in type units this unit must be decoded with).
    pub type_unit_pulls: Vec<u64>,
    /// Skeleton types (offset) standing for a type-unit type (its offset),
    /// made references by [`Cu::finish_parts`].
    pub aliases: Vec<(u32, u32)>,
}

/// Unit-offset bytes per `Cu::buckets` entry: an eighth of the unit's size
/// in memory, a few index entries per bucket at most.
const BUCKET_SHIFT: u32 = 5;

impl<'a> Cu<'a> {
    /// An empty unit at section offset `offset`, its columns sized for a
    /// unit of `unit_len` bytes.
    pub fn new(offset: u64, address_size: u8, unit_len: usize) -> Cu<'a> {
        Cu {
            offset,
            language: 0,
            name: b"",
            kind: UnitKind::Normal,
            address_size,
            // Sized from the unit length so that the columns rarely grow:
            // on the 6.12 vmlinux nine CUs in ten have at least one slot per
            // 36 bytes of unit, a member per 21, an enumerator per 127, a
            // parameter per 109, a function per 228, a function parameter
            // per 166, a variable per 123 and bitfield attributes per 433
            // (the members' sizing at a 28th made most CUs copy the column
            // once: 0.3 G instructions).
            slots: Vec::with_capacity(unit_len / 34),
            members: Vec::with_capacity(unit_len / 19),
            member_bits: Vec::with_capacity(unit_len / 400),
            enumerators: Vec::with_capacity(unit_len / 120),
            params: Vec::with_capacity(unit_len / 100),
            annots: Vec::new(),
            funcs: Vec::with_capacity(unit_len / 200),
            fparams: Vec::with_capacity(unit_len / 150),
            vars: Vec::with_capacity(unit_len / 120),
            index: Vec::with_capacity(unit_len / 34),
            buckets: Vec::new(),
            has_nested_unspecified: false,
            dies: 0,
            type_unit_refs: 0,
            type_unit_pulls: Vec::new(),
            aliases: Vec::new(),
        }
    }

    /// Appends `next`, another part of a merged unit (both decoded by
    /// [`Decoder::decode_merged_part`]): its core ids continue this unit's
    /// and its ranges move with the columns, as if one unit had been
    /// decoded. [`Cu::finish_parts`] makes the whole ready for look-ups once
    /// the last part is in.
    pub fn append(&mut self, next: Cu<'a>) {
        let shift = |v: u32, by: usize| v + by as u32;
        let cores = self.slots.len();
        let (members, enumerators, params) = (self.members.len(), self.enumerators.len(), self.params.len());
        let (annots, fparams, bits) = (self.annots.len(), self.fparams.len(), self.member_bits.len());
        self.slots.extend(next.slots.into_iter().map(|mut s| {
            match s.tag {
                dw::DW_TAG_structure_type
                | dw::DW_TAG_class_type
                | dw::DW_TAG_union_type
                | dw::DW_TAG_interface_type => {
                    s.kids = shift(s.kids, members);
                    s.annots = shift(s.annots, annots);
                }
                dw::DW_TAG_enumeration_type => s.kids = shift(s.kids, enumerators),
                dw::DW_TAG_subroutine_type => s.kids = shift(s.kids, params),
                dw::DW_TAG_typedef | dw::DW_TAG_rvalue_reference_type => s.annots = shift(s.annots, annots),
                // arrays count their dimensions in `nkids`; other kinds have no ranges
                _ => {}
            }
            s
        }));
        self.members.extend(next.members.into_iter().map(|mut m| {
            if m.bits != 0 {
                m.bits = shift(m.bits, bits);
            }
            m
        }));
        self.member_bits.extend(next.member_bits);
        self.enumerators.extend(next.enumerators);
        self.params.extend(next.params);
        self.annots.extend(next.annots);
        self.funcs.extend(next.funcs.into_iter().map(|mut f| {
            f.params = shift(f.params, fparams);
            f.annots = shift(f.annots, annots);
            f
        }));
        self.fparams.extend(next.fparams);
        self.vars.extend(next.vars.into_iter().map(|mut v| {
            v.annots = shift(v.annots, annots);
            v
        }));
        self.index
            .extend(next.index.into_iter().map(|(off, core)| (off, shift(core, cores))));
        self.buckets.clear();
        self.has_nested_unspecified |= next.has_nested_unspecified;
        self.dies += next.dies;
        self.type_unit_refs += next.type_unit_refs;
        self.type_unit_pulls.extend(next.type_unit_pulls);
        self.aliases.extend(next.aliases);
    }

    /// Makes the appended parts one unit for look-ups: the reference index
    /// sorted (parts may come in any order), each skeleton's offset made to
    /// resolve to the core id of the type it stands for (a skeleton of a
    /// type that placed nothing stays void), the buckets built.
    pub fn finish_parts(&mut self) {
        self.index.sort_unstable_by_key(|e| e.0);
        self.build_buckets();
        if self.aliases.is_empty() {
            return;
        }
        let extra: Vec<(u32, u32)> = self
            .aliases
            .iter()
            .filter_map(|&(off, target)| Some((off, Some(self.core(target)).filter(|&c| c != 0)?)))
            .collect();
        self.index.extend(extra);
        self.index.sort_unstable_by_key(|e| e.0);
        self.build_buckets();
    }

    /// Keeps a member's bitfield attributes; the value for `Member::bits`
    /// (0 when it has none, as most members).
    pub fn add_member_bits(&mut self, b: MemberBits) -> u32 {
        if b.data_bit_offset.is_none() && b.bit_size.is_none() && b.byte_size.is_none() && b.bit_offset.is_none() {
            return 0;
        }
        self.member_bits.push(b);
        self.member_bits.len() as u32
    }

    /// Core id of the type at unit offset `off` (0 = void / not placed).
    #[inline]
    pub fn core(&self, off: u32) -> u32 {
        if off == NONE {
            return 0;
        }
        let Some(&first) = self.buckets.get((off >> BUCKET_SHIFT) as usize) else {
            return self.core_searched(off);
        };
        for &(o, core) in &self.index[first as usize..] {
            if o >= off {
                return if o == off { core } else { 0 };
            }
        }
        0
    }

    fn core_searched(&self, off: u32) -> u32 {
        match self.index.binary_search_by_key(&off, |e| e.0) {
            Ok(i) => self.index[i].1,
            Err(_) => 0,
        }
    }

    /// Fills `buckets` from the sorted `index`.
    pub fn build_buckets(&mut self) {
        let n = self.index.last().map_or(0, |e| (e.0 >> BUCKET_SHIFT) as usize + 1);
        self.buckets.clear();
        self.buckets.reserve_exact(n);
        let mut i = 0;
        for b in 0..n {
            let lo = (b as u32) << BUCKET_SHIFT;
            // stops at the last entry at the latest: its offset is >= lo
            while self.index[i].0 < lo {
                i += 1;
            }
            self.buckets.push(i as u32);
        }
    }
    /// The bitfield attributes of `m` (all `None` for most members).
    #[inline]
    pub fn bits(&self, m: &Member<'_>) -> MemberBits {
        match m.bits {
            0 => MemberBits::default(),
            i => self.member_bits[i as usize - 1],
        }
    }

    #[inline]
    pub fn slot(&self, core: u32) -> Option<&Slot<'a>> {
        if core == 0 {
            None
        } else {
            self.slots.get(core as usize - 1)
        }
    }
}

/// Decoder options (from the features).
#[derive(Clone, Copy, Debug)]
pub struct DecodeOpts {
    pub type_tag: bool,
    pub decl_tag: bool,
    /// The ABI's register parameters (location analysis of parameters).
    pub regs: loc::RegParams,
}

/// Builds the gimli view of the sections.
#[allow(clippy::field_reassign_with_default)]
pub fn dwarf<'a>(s: &'a DebugSections<'_>, endian: RunTimeEndian) -> Dwarf<'a> {
    let r = |d: &'a [u8]| EndianSlice::new(d, endian);
    let mut d = Dwarf::default();
    d.debug_info = gimli::DebugInfo::from(r(&s.info));
    d.debug_abbrev = gimli::DebugAbbrev::from(r(&s.abbrev));
    d.debug_str = gimli::DebugStr::from(r(&s.str));
    d.debug_line = gimli::DebugLine::from(r(&s.line));
    d.debug_line_str = gimli::DebugLineStr::from(r(&s.line_str));
    d.debug_str_offsets = gimli::DebugStrOffsets::from(r(&s.str_offsets));
    d.debug_addr = gimli::DebugAddr::from(r(&s.addr));
    d.locations = gimli::LocationLists::new(
        gimli::DebugLoc::from(r(&s.loc)),
        gimli::DebugLocLists::from(r(&s.loclists)),
    );
    d.ranges = gimli::RangeLists::new(
        gimli::DebugRanges::from(r(&s.ranges)),
        gimli::DebugRngLists::from(r(&s.rnglists)),
    );
    d
}

/// gimli's `Unit::new` without what BTF never reads: the unit's name and
/// directory as gimli resolves them, its `low_pc`, and above all the
/// line-number program header, which gimli parses for every unit (file and
/// directory tables of hundreds of entries per kernel CU: about 1 % of a
/// vmlinux encode, and `.debug_line` pages touched for nothing). The bases
/// the location and string readers use are set exactly as gimli sets them.
///
/// The unit's abbreviations are read by the DIE cursor ([`Dies`]), as far
/// as it needs them; gimli parses the whole table here only when the root
/// DIE carries one of those bases (split DWARF, clang's `strx` forms), to
/// read them exactly as gimli does. Otherwise the `Unit` holds no
/// abbreviations and nothing reads it through gimli.
pub fn unit<'a>(d: &Dwarf<'a>, header: gimli::UnitHeader<R<'a>>) -> gimli::Result<gimli::Unit<R<'a>>> {
    use gimli::{AttributeValue as V, constants as c};
    let sets_bases = dies::root_sets_bases(&header, *d.debug_abbrev.reader())?;
    let abbreviations = if sets_bases {
        d.abbreviations(&header)?
    } else {
        std::sync::Arc::new(gimli::Abbreviations::default())
    };
    let enc = header.encoding();
    let mut unit = gimli::Unit {
        abbreviations,
        name: None,
        comp_dir: None,
        low_pc: 0,
        str_offsets_base: gimli::DebugStrOffsetsBase::default_for_encoding_and_file(enc, d.file_type),
        addr_base: gimli::DebugAddrBase(0),
        loclists_base: gimli::DebugLocListsBase::default_for_encoding_and_file(enc, d.file_type),
        rnglists_base: gimli::DebugRngListsBase::default_for_encoding_and_file(enc, d.file_type),
        line_program: None,
        dwo_id: match header.type_() {
            gimli::UnitType::Skeleton(id) | gimli::UnitType::SplitCompilation(id) => Some(id),
            _ => None,
        },
        header,
    };
    if !sets_bases {
        return Ok(unit);
    }
    let mut cursor = unit.header.entries(&unit.abbreviations);
    cursor.next_dfs()?;
    let root = cursor.current().ok_or(gimli::Error::MissingUnitDie)?;
    let (mut str_base, mut addr_base, mut loc_base, mut rng_base, mut dwo) = (None, None, None, None, None);
    for attr in root.attrs() {
        match (attr.name(), attr.value()) {
            (c::DW_AT_str_offsets_base, V::DebugStrOffsetsBase(b)) => str_base = Some(b),
            (c::DW_AT_addr_base | c::DW_AT_GNU_addr_base, V::DebugAddrBase(b)) => addr_base = Some(b),
            (c::DW_AT_loclists_base, V::DebugLocListsBase(b)) => loc_base = Some(b),
            (c::DW_AT_rnglists_base | c::DW_AT_GNU_ranges_base, V::DebugRngListsBase(b)) => rng_base = Some(b),
            (c::DW_AT_GNU_dwo_id, V::DwoId(id)) => dwo = dwo.or(Some(id)),
            _ => {}
        }
    }
    unit.str_offsets_base = str_base.unwrap_or(unit.str_offsets_base);
    unit.addr_base = addr_base.unwrap_or(unit.addr_base);
    unit.loclists_base = loc_base.unwrap_or(unit.loclists_base);
    unit.rnglists_base = rng_base.unwrap_or(unit.rnglists_base);
    unit.dwo_id = unit.dwo_id.or(dwo);
    Ok(unit)
}

/// All unit headers of `.debug_info`, in order. A damaged header is an error
/// naming its offset.
pub fn unit_headers<'a>(d: &Dwarf<'a>, path: &Path) -> Result<Vec<gimli::UnitHeader<R<'a>>>, String> {
    let mut out = Vec::new();
    let mut it = d.units();
    let mut last_end = 0u64;
    loop {
        match it.next() {
            Ok(Some(h)) => {
                let off = h.offset().0 as u64;
                last_end = off + h.length_including_self() as u64;
                out.push(h);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(format!(
                    "{}: .debug_info: bad unit header at offset {:#x}: {}",
                    path.display(),
                    last_end,
                    unit_length_fault(d.debug_info.reader(), last_end).unwrap_or_else(|| e.to_string())
                ));
            }
        }
    }
    Ok(out)
}

/// Whether any unit's abbreviation table declares an attribute in
/// DW_FORM_ref_addr: without the kernel's LTO note, that is what makes the
/// reference read the file as one merged unit (whether or not a DIE uses
/// the abbreviation). A table that cannot be read counts as having none;
/// decoding reports the damage.
pub fn declares_cross_unit_refs(d: &Dwarf<'_>, headers: &[gimli::UnitHeader<R<'_>>]) -> bool {
    let mut tables: Vec<usize> = headers.iter().map(|h| h.debug_abbrev_offset().0).collect();
    tables.sort_unstable();
    tables.dedup();
    let section = *d.debug_abbrev.reader();
    tables
        .into_iter()
        .any(|at| dies::table_declares_form(section, at, dw::DW_FORM_ref_addr))
}

/// Where DIE `die` (a `.debug_info` offset) comes from in the source, for
/// error messages: its name and declaration place (`DW_AT_name`,
/// `DW_AT_decl_file`:`DW_AT_decl_line`), or, for a DIE without them (an
/// anonymous type), those of the first DIE that refers to it by
/// `DW_AT_type`, or of the nearest named DIE around that one. Read with
/// gimli's own reader (the line-number program included), on the error path
/// only; `None` if nothing names it.
pub fn die_context(d: &Dwarf<'_>, die: u64) -> Option<String> {
    use gimli::AttributeValue as V;
    let mut units = d.units();
    let header = loop {
        let h = units.next().ok()??;
        let start = h.offset().0 as u64;
        if start <= die && die < start + h.length_including_self() as u64 {
            break h;
        }
    };
    let start = header.offset().0 as u64;
    let unit = d.unit(header).ok()?;
    let target = UnitOffset((die - start) as usize);
    // (name, file, line) of a DIE, each where it has one
    let describe = |e: &gimli::DebuggingInformationEntry<R<'_>>| -> (Option<String>, Option<String>, Option<u64>) {
        let name = e
            .attr_value(dw::DW_AT_name)
            .and_then(|v| d.attr_string(&unit, v).ok())
            .map(|r| String::from_utf8_lossy(r.slice()).into_owned());
        let file = match e.attr_value(dw::DW_AT_decl_file) {
            Some(V::FileIndex(i)) | Some(V::Udata(i)) => Some(i),
            Some(V::Data1(i)) => Some(i as u64),
            Some(V::Data2(i)) => Some(i as u64),
            Some(V::Data4(i)) => Some(i as u64),
            _ => None,
        }
        .and_then(|i| {
            let lp = unit.line_program.as_ref()?;
            let f = lp.header().file(i)?;
            let n = d.attr_string(&unit, f.path_name()).ok()?;
            Some(String::from_utf8_lossy(n.slice()).into_owned())
        });
        let line = e.attr_value(dw::DW_AT_decl_line).and_then(|v| v.udata_value());
        (name, file, line)
    };
    let render = |(name, file, line): (Option<String>, Option<String>, Option<u64>)| -> Option<String> {
        let place = match (file, line) {
            (Some(f), Some(l)) => Some(format!("{f}:{l}")),
            (Some(f), None) => Some(f),
            _ => None,
        };
        match (name, place) {
            (Some(n), Some(p)) => Some(format!("`{n}` ({p})")),
            (Some(n), None) => Some(format!("`{n}`")),
            (None, Some(p)) => Some(p),
            (None, None) => None,
        }
    };
    let mut cursor = unit.entries();
    // the named DIEs around the current one: (depth, description)
    let mut named: Vec<(isize, String)> = Vec::new();
    let mut referrer: Option<String> = None;
    while let Ok(Some(e)) = cursor.next_dfs() {
        let depth = e.depth();
        while named.last().is_some_and(|n| n.0 >= depth) {
            named.pop();
        }
        let own = render(describe(e));
        if e.offset() == target {
            if let Some(o) = own {
                return Some(o);
            }
            continue;
        }
        if referrer.is_none() && matches!(e.attr_value(dw::DW_AT_type), Some(V::UnitRef(t)) if t == target) {
            referrer = match (&own, named.last()) {
                (Some(o), Some((_, outer))) if !o.starts_with('`') => Some(format!("{outer}, at {o}")),
                (Some(o), _) => Some(o.clone()),
                (None, Some((_, outer))) => Some(outer.clone()),
                (None, None) => None,
            };
        }
        if let Some(o) = own.filter(|o| o.starts_with('`')) {
            named.push((depth, o));
        }
    }
    referrer.map(|r| format!("used by {r}"))
}

/// What is wrong with the length field of the unit header at `at`, when
/// that is what gimli's "unexpected end of input" means.
fn unit_length_fault(r: &R<'_>, at: u64) -> Option<String> {
    use gimli::Reader;
    let sec = r.slice();
    let big = gimli::Endianity::is_big_endian(r.endian());
    let word = |at: u64, n: usize| -> Option<u64> {
        let b = sec.get(usize::try_from(at).ok()?..)?.get(..n)?;
        Some(if big {
            b.iter().fold(0, |v, &x| (v << 8) | x as u64)
        } else {
            b.iter().rev().fold(0, |v, &x| (v << 8) | x as u64)
        })
    };
    let (len, field) = match word(at, 4)? {
        0xffff_ffff => (word(at + 4, 8)?, 12),
        l if l >= 0xffff_fff0 => return None,
        l => (l, 4),
    };
    let size = sec.len() as u64;
    if (at + field).checked_add(len).is_none_or(|end| end > size) {
        return Some(format!(
            "unit length {len:#x} reaches past the end of the section ({size} bytes)"
        ));
    }
    // version, abbreviations offset and address size at least.
    if len < 7 {
        return Some(format!("unit length {len} is too short for a unit header"));
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ctx {
    Root,
    /// A struct/union/class: pending slot index in `pend`, member counter.
    Struct,
    Member,
    Pointer,
    Array,
    Enum,
    SubrType,
    Typedef,
    /// A subprogram (own params/annotations) …
    Func,
    /// … or a lexical block / inlined subroutine inside one.
    Block,
    FParam,
    Namespace,
    Var,
    /// A leaf type whose children are ignored.
    Leaf,
    Skip,
}

struct Frame<'a> {
    depth: isize,
    ctx: Ctx,
    /// Pending type slot (for type contexts).
    slot: Option<Slot<'a>>,
    /// Scratch start indices.
    kids_start: usize,
    annots_start: usize,
    fparams_start: usize,
    /// Member / param counter (decl-tag component of the next one).
    counter: i32,
    /// Current member or param's component index.
    component: i32,
    /// Pending function / variable.
    func: Option<Func<'a>>,
    var: Option<Var<'a>>,
    /// Type tags of a pointer: last placed annotation's unit offset.
    last_tag: u32,
}

/// Attributes of one DIE, the ones any handler needs, in compact form (this
/// is reset for every DIE read, so it is kept small).
struct Attrs<'a> {
    name: &'a [u8],
    /// References as unit offsets; `ABSENT`, or `NOT_UNIT` for a form that
    /// is not a unit reference (it resolves to void).
    ty: u64,
    origin: u64,
    spec: u64,
    byte_size: Option<u64>,
    encoding: u8,
    declaration: bool,
    external: bool,
    artificial: bool,
    upper_bound: Option<Option<u64>>,
    count: Option<Option<u64>>,
    member_loc: Option<u64>,
    data_bit_offset: Option<u64>,
    bit_size: Option<u64>,
    bit_offset: Option<i64>,
    const_value: Option<AttributeValue<R<'a>>>,
    location: Option<AttributeValue<R<'a>>>,
    language: Option<u16>,
    /// References by type signature (DW_FORM_ref_sig8, DW_AT_signature)
    /// left unresolved.
    type_unit_refs: u8,
    /// Which of `ty`, `origin`, `spec`, `signature` (bits 0-3) were resolved
    /// from a type signature (`Decoder::type_units`): the offsets to read
    /// the type units at.
    resolved: u8,
    /// The skeleton's type (DW_AT_signature), resolved.
    signature: Option<u64>,
}

const ABSENT: u64 = u64::MAX;
const NOT_UNIT: u64 = u64::MAX - 1;

impl Default for Attrs<'_> {
    fn default() -> Self {
        Attrs {
            name: b"",
            ty: ABSENT,
            origin: ABSENT,
            spec: ABSENT,
            byte_size: None,
            encoding: 0,
            declaration: false,
            external: false,
            artificial: false,
            upper_bound: None,
            count: None,
            member_loc: None,
            data_bit_offset: None,
            bit_size: None,
            bit_offset: None,
            const_value: None,
            location: None,
            language: None,
            type_unit_refs: 0,
            resolved: 0,
            signature: None,
        }
    }
}

fn udata(v: &AttributeValue<R<'_>>) -> Option<u64> {
    match *v {
        AttributeValue::Data1(x) => Some(x as u64),
        AttributeValue::Data2(x) => Some(x as u64),
        AttributeValue::Data4(x) => Some(x as u64),
        AttributeValue::Data8(x) => Some(x),
        AttributeValue::Udata(x) => Some(x),
        AttributeValue::Sdata(x) => Some(x as u64),
        _ => None,
    }
}

pub struct Decoder<'a, 'd> {
    pub dwarf: &'d Dwarf<'a>,
    pub opts: DecodeOpts,
    pub endian: RunTimeEndian,
    /// Type units to resolve signature references to (`--type-units=resolve`,
    /// in the merged-part decode only); `None`: left unresolved, as the
    /// reference leaves them.
    pub type_units: Option<&'d TypeUnits>,
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
    fn err(&self, cu: u64, die: Option<u64>, msg: impl Into<String>) -> DecodeError {
        DecodeError {
            cu,
            die,
            msg: msg.into(),
            kind: DecodeErrorKind::Damaged,
        }
    }

    fn string(&self, unit: &gimli::Unit<R<'a>>, v: &Option<AttributeValue<R<'a>>>) -> &'a [u8] {
        match v {
            Some(AttributeValue::String(r)) => r.slice(),
            // The common forms directly: gimli's generic path costs more
            // than the rest of a DIE.
            // Names are kept as the tail of .debug_str from their offset and
            // cut at the NUL only where the text is needed (`nm`): most are
            // only ever identified by offset, and finding the NUL means a
            // cache miss per name.
            Some(AttributeValue::DebugStrRef(off)) => {
                let sec = self.dwarf.debug_str.reader().slice();
                sec.get(off.0..).unwrap_or(b"")
            }
            Some(v) => self.dwarf.attr_string(unit, *v).map(|r| r.slice()).unwrap_or(b""),
            None => b"",
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
        let cu_off = header.offset().0 as u64;
        let abbrevs = header.debug_abbrev_offset().0;
        let abbrev_len = self.dwarf.debug_abbrev.reader().len();
        if abbrevs > abbrev_len {
            return Err(self.err(
                cu_off,
                None,
                format!(
                    "the unit's abbreviations offset {abbrevs:#x} is past the end of .debug_abbrev ({abbrev_len} bytes)"
                ),
            ));
        }
        let unit = unit(self.dwarf, header).map_err(|e| self.err(cu_off, None, format!("cannot read unit: {e}")))?;
        let unit_end = unit.header.length_including_self() as u64;
        let mut cu = Cu::new(cu_off, unit.encoding().address_size, unit_end as usize);
        let mut entries = Dies::new(&unit.header, *self.dwarf.debug_abbrev.reader())
            .map_err(|e| self.err(cu_off, None, format!("cannot read DIEs: {e}")))?;
        // What offsets are relative to, and where references must end.
        let (base, ref_end) = match refs {
            Refs::InUnit => (0, unit_end),
            Refs::Section => {
                let len = self.dwarf.debug_info.reader().len() as u64;
                if len >= NONE as u64 {
                    return Err(self.err(
                        cu_off,
                        None,
                        format!(
                            "merged-unit mode: .debug_info of {len} bytes is past the 4 GiB that offsets are kept in"
                        ),
                    ));
                }
                entries.read_cross_unit_refs();
                (cu_off, len)
            }
        };
        // Scratch columns (stack discipline: a frame owns [start..] until it
        // ends), with room for a kernel CU's deepest frames so that they do
        // not grow from empty in every CU (the decoder's pushes made 41 k
        // of a vmlinux encode's allocator calls, 30 k of them reallocs).
        let mut s_members: Vec<Member<'a>> = Vec::with_capacity(256);
        let mut s_enums: Vec<Enumerator<'a>> = Vec::with_capacity(256);
        let mut s_params: Vec<Param<'a>> = Vec::with_capacity(32);
        let mut s_annots: Vec<Annot<'a>> = Vec::with_capacity(8);
        let mut s_fparams: Vec<FParam<'a>> = Vec::with_capacity(32);
        let mut stack: Vec<Frame<'a>> = Vec::with_capacity(32);
        let mut first = true;
        let mut attrs = Attrs::default();
        let uref = |v: &u64| -> Result<u32, u64> {
            match *v {
                ABSENT | NOT_UNIT => Ok(NONE),
                o if o >= ref_end => Err(o),
                o => Ok(o as u32),
            }
        };

        loop {
            let depth = entries.next_depth();
            let die = cu_off + entries.next_offset();
            let uoff = (base + entries.next_offset()) as u32;
            if entries.is_empty() {
                break;
            }
            let abbrev = entries
                .entry()
                .map_err(|e| self.err(cu_off, Some(die), format!("cannot read DIE: {e}")))?;
            if abbrev.is_null() {
                continue;
            }
            cu.dies += 1;
            // Close finished frames.
            while stack.last().is_some_and(|f| f.depth >= depth) {
                let f = stack.pop().unwrap();
                self.finish(
                    f,
                    &mut cu,
                    &mut s_members,
                    &mut s_enums,
                    &mut s_params,
                    &mut s_annots,
                    &mut s_fparams,
                    &stack,
                );
            }
            let tag = abbrev.tag;
            if first {
                first = false;
                self.read_attrs(&unit, &mut entries, abbrev, &mut attrs, cu_off, die, refs, base)?;
                cu.language = attrs.language.unwrap_or(0);
                cu.name = nm(attrs.name);
                match tag {
                    dw::DW_TAG_compile_unit | dw::DW_TAG_type_unit => {}
                    // The merged unit takes every unit's children.
                    dw::DW_TAG_partial_unit | dw::DW_TAG_skeleton_unit if refs == Refs::Section => {}
                    dw::DW_TAG_partial_unit | dw::DW_TAG_skeleton_unit => {
                        cu.kind = UnitKind::Ignored;
                        return Ok(Some(cu));
                    }
                    _ => {
                        return Err(self.err(cu_off, Some(die), format!("unexpected unit DIE {tag}")));
                    }
                }
                if !keep(cu.language, cu.name) {
                    return Ok(None);
                }
                if abbrev.has_children {
                    stack.push(frame(depth, Ctx::Root));
                }
                continue;
            }
            let parent = stack.last().map(|f| f.ctx).unwrap_or(Ctx::Skip);
            // What this DIE is, in its parent's context.
            let role = classify(parent, tag);
            let mut ctx = Ctx::Skip;
            match role {
                Role::Skip => {
                    entries
                        .skip(abbrev)
                        .map_err(|e| self.err(cu_off, Some(die), format!("cannot read attributes: {e}")))?;
                }
                Role::ImportedUnit => {
                    let mut e = self.err(cu_off, Some(die), "DW_TAG_imported_unit");
                    e.kind = DecodeErrorKind::StopFile;
                    return Err(e);
                }
                Role::Block => {
                    entries
                        .skip(abbrev)
                        .map_err(|e| self.err(cu_off, Some(die), format!("cannot read attributes: {e}")))?;
                    ctx = Ctx::Block;
                }
                Role::Varargs => {
                    entries
                        .skip(abbrev)
                        .map_err(|e| self.err(cu_off, Some(die), format!("cannot read attributes: {e}")))?;
                    if let Some(f) = stack.last_mut() {
                        if let Some(s) = f.slot.as_mut() {
                            s.varargs = true;
                        }
                        if let Some(func) = f.func.as_mut() {
                            func.varargs = true;
                        }
                    }
                }
                Role::Type
                | Role::Member
                | Role::Enumerator
                | Role::Subrange
                | Role::Param
                | Role::FParam
                | Role::Annotation
                | Role::Func
                | Role::Var
                | Role::Namespace => {
                    self.read_attrs(&unit, &mut entries, abbrev, &mut attrs, cu_off, die, refs, base)?;
                    cu.type_unit_refs += attrs.type_unit_refs as u64;
                    if attrs.resolved != 0 {
                        let fields = [attrs.ty, attrs.origin, attrs.spec, attrs.signature.unwrap_or(ABSENT)];
                        let resolved = fields
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| attrs.resolved & (1 << i) != 0);
                        cu.type_unit_pulls.extend(resolved.map(|(_, &at)| at));
                    }
                    let bad_ref = |o: u64| {
                        self.err(
                            cu_off,
                            Some(die),
                            format!("reference to unit offset {o:#x} outside its unit"),
                        )
                    };
                    let ty = uref(&attrs.ty).map_err(bad_ref)?;
                    match role {
                        Role::Type if attrs.signature.is_some() => {
                            // A skeleton of a type-unit type: references to
                            // it are references to that type; its children
                            // (methods, nested types) are read as a
                            // namespace's.
                            cu.aliases.push((uoff, attrs.signature.unwrap_or(0) as u32));
                            ctx = Ctx::Namespace;
                        }
                        Role::Type => {
                            let mut s = Slot {
                                tag,
                                die,
                                uoff,
                                name: attrs.name,
                                spec: uref(&attrs.spec).map_err(bad_ref)?,
                                ty,
                                size: attrs.byte_size.unwrap_or(0),
                                encoding: attrs.encoding,
                                declaration: attrs.declaration,
                                varargs: false,
                                nelems: 1,
                                kids: 0,
                                nkids: 0,
                                annots: 0,
                                nannots: 0,
                            };
                            ctx = match tag {
                                dw::DW_TAG_structure_type
                                | dw::DW_TAG_class_type
                                | dw::DW_TAG_union_type
                                | dw::DW_TAG_interface_type => Ctx::Struct,
                                dw::DW_TAG_pointer_type => Ctx::Pointer,
                                dw::DW_TAG_array_type => {
                                    s.nelems = 1;
                                    s.nkids = 0;
                                    Ctx::Array
                                }
                                dw::DW_TAG_enumeration_type => Ctx::Enum,
                                dw::DW_TAG_subroutine_type => Ctx::SubrType,
                                dw::DW_TAG_typedef | dw::DW_TAG_rvalue_reference_type => Ctx::Typedef,
                                _ => Ctx::Leaf,
                            };
                            if tag == dw::DW_TAG_unspecified_type {
                                if parent == Ctx::Root {
                                    // Not placed: references to it are void.
                                    ctx = Ctx::Skip;
                                } else {
                                    cu.has_nested_unspecified = true;
                                }
                            }
                            if ctx != Ctx::Skip && !abbrev.has_children {
                                // What `finish` makes of a frame without
                                // children, without building one (most types
                                // are leaves; a frame is 248 bytes to move).
                                match ctx {
                                    Ctx::Struct => s.kids = cu.members.len() as u32,
                                    Ctx::Enum => s.kids = cu.enumerators.len() as u32,
                                    Ctx::SubrType => s.kids = cu.params.len() as u32,
                                    _ => {}
                                }
                                if matches!(ctx, Ctx::Struct | Ctx::Typedef) {
                                    s.annots = cu.annots.len() as u32;
                                }
                                place(&mut cu, s);
                                continue;
                            }
                            if ctx != Ctx::Skip {
                                let mut f = frame(depth, ctx);
                                f.kids_start = match ctx {
                                    Ctx::Struct => s_members.len(),
                                    Ctx::Enum => s_enums.len(),
                                    Ctx::SubrType => s_params.len(),
                                    _ => 0,
                                };
                                f.annots_start = s_annots.len();
                                f.last_tag = s.ty;
                                f.slot = Some(s);
                                stack.push(f);
                                continue;
                            }
                        }
                        Role::Member => {
                            let f = stack.last_mut().unwrap();
                            let comp = f.counter;
                            f.counter += 1;
                            if tag == dw::DW_TAG_member {
                                // kept in the unit directly: members move
                                // between columns, their index there does not
                                let bits = cu.add_member_bits(MemberBits {
                                    data_bit_offset: attrs.data_bit_offset,
                                    bit_size: attrs.bit_size,
                                    byte_size: attrs.byte_size,
                                    bit_offset: attrs.bit_offset,
                                });
                                s_members.push(Member {
                                    name: attrs.name,
                                    ty,
                                    bits,
                                    die,
                                    loc: attrs.member_loc,
                                });
                            }
                            ctx = Ctx::Member;
                            if abbrev.has_children {
                                let mut fr = frame(depth, ctx);
                                fr.component = comp;
                                stack.push(fr);
                            }
                            continue;
                        }
                        Role::Enumerator => {
                            let value = attrs.const_value.as_ref().and_then(udata).unwrap_or(0);
                            s_enums.push(Enumerator {
                                name: attrs.name,
                                value,
                            });
                        }
                        Role::Subrange => {
                            let f = stack.last_mut().unwrap();
                            let s = f.slot.as_mut().unwrap();
                            if s.nkids < 64 {
                                let dim = match attrs.upper_bound {
                                    Some(Some(ub)) => ub.wrapping_add(1),
                                    Some(None) => 0,
                                    None => match attrs.count {
                                        Some(Some(c)) => c,
                                        _ => 0,
                                    },
                                };
                                s.nelems = s.nelems.wrapping_mul(dim as u32);
                                s.nkids += 1;
                            }
                        }
                        Role::Param => {
                            s_params.push(Param { name: attrs.name, ty });
                        }
                        Role::FParam => {
                            let f = stack.last_mut().unwrap();
                            let comp = f.counter;
                            f.counter += 1;
                            let facts = self.param_facts(&unit, comp as usize, &attrs);
                            s_fparams.push(FParam {
                                uoff,
                                name: attrs.name,
                                ty,
                                has_type: attrs.ty != ABSENT,
                                origin: uref(&attrs.origin).map_err(bad_ref)?,
                                facts,
                            });
                            ctx = Ctx::FParam;
                            if abbrev.has_children {
                                let mut fr = frame(depth, ctx);
                                fr.component = comp;
                                stack.push(fr);
                            }
                            continue;
                        }
                        Role::Annotation => {
                            let name = nm(attrs.name);
                            self.annotation(
                                parent,
                                name,
                                &unit,
                                &attrs,
                                uoff,
                                die,
                                &mut stack,
                                &mut cu,
                                &mut s_annots,
                            );
                        }
                        Role::Func => {
                            let func = Func {
                                uoff,
                                die,
                                name: attrs.name,
                                ty,
                                has_type: attrs.ty != ABSENT,
                                origin: uref(&attrs.origin).map_err(bad_ref)?,
                                spec: uref(&attrs.spec).map_err(bad_ref)?,
                                declaration: attrs.declaration,
                                varargs: false,
                                params: 0,
                                nparams: 0,
                                annots: 0,
                                nannots: 0,
                            };
                            let mut f = frame(depth, Ctx::Func);
                            f.annots_start = s_annots.len();
                            f.fparams_start = s_fparams.len();
                            f.func = Some(func);
                            if abbrev.has_children {
                                stack.push(f);
                            } else {
                                self.finish(
                                    f,
                                    &mut cu,
                                    &mut s_members,
                                    &mut s_enums,
                                    &mut s_params,
                                    &mut s_annots,
                                    &mut s_fparams,
                                    &stack,
                                );
                            }
                            continue;
                        }
                        Role::Var
                            // Only CU-level DW_TAG_variable can become a VAR.
                            if parent == Ctx::Root && tag == dw::DW_TAG_variable => {
                                let addr = match &attrs.location {
                                    Some(AttributeValue::Exprloc(e)) => self.first_addr(&unit, e.0.slice()),
                                    Some(AttributeValue::Block(b)) => self.first_addr(&unit, b.slice()),
                                    _ => None,
                                };
                                let var = Var {
                                    uoff,
                                    die,
                                    name: attrs.name,
                                    ty,
                                    spec: uref(&attrs.spec).map_err(bad_ref)?,
                                    declaration: attrs.declaration,
                                    external: attrs.external,
                                    artificial: attrs.artificial,
                                    addr,
                                    annots: 0,
                                    nannots: 0,
                                };
                                let mut f = frame(depth, Ctx::Var);
                                f.annots_start = s_annots.len();
                                f.var = Some(var);
                                if abbrev.has_children {
                                    stack.push(f);
                                } else {
                                    self.finish(
                                        f,
                                        &mut cu,
                                        &mut s_members,
                                        &mut s_enums,
                                        &mut s_params,
                                        &mut s_annots,
                                        &mut s_fparams,
                                        &stack,
                                    );
                                }
                                continue;
                            }
                        Role::Namespace => ctx = Ctx::Namespace,
                        _ => {}
                    }
                }
            }
            if abbrev.has_children {
                stack.push(frame(depth, ctx));
            }
        }
        while let Some(f) = stack.pop() {
            self.finish(
                f,
                &mut cu,
                &mut s_members,
                &mut s_enums,
                &mut s_params,
                &mut s_annots,
                &mut s_fparams,
                &stack,
            );
        }
        cu.index.sort_unstable_by_key(|e| e.0);
        if refs == Refs::InUnit {
            // (a merged unit's, once its parts are appended)
            cu.build_buckets();
        }
        Ok(Some(cu))
    }

    #[allow(clippy::too_many_arguments)]
    fn annotation(
        &self,
        parent: Ctx,
        name: &'a [u8],
        unit: &gimli::Unit<R<'a>>,
        attrs: &Attrs<'a>,
        uoff: u32,
        die: u64,
        stack: &mut [Frame<'a>],
        cu: &mut Cu<'a>,
        s_annots: &mut Vec<Annot<'a>>,
    ) {
        let value = || self.string(unit, &attrs.const_value);
        match parent {
            Ctx::Pointer if self.opts.type_tag && name == b"btf_type_tag" => {
                let f = stack.last_mut().unwrap();
                let s = Slot {
                    tag: DW_TAG_LLVM_ANNOTATION,
                    die,
                    uoff,
                    name: value(),
                    spec: NONE,
                    ty: f.last_tag,
                    size: 0,
                    encoding: 0,
                    declaration: false,
                    varargs: false,
                    nelems: 0,
                    kids: 0,
                    nkids: 0,
                    annots: 0,
                    nannots: 0,
                };
                f.last_tag = uoff;
                place(cu, s);
            }
            Ctx::Struct | Ctx::Typedef | Ctx::Func | Ctx::Var if self.opts.decl_tag && name == b"btf_decl_tag" => {
                s_annots.push(Annot {
                    value: value(),
                    component: -1,
                });
            }
            Ctx::Member | Ctx::FParam if self.opts.decl_tag && name == b"btf_decl_tag" => {
                let comp = stack.last().unwrap().component;
                s_annots.push(Annot {
                    value: value(),
                    component: comp,
                });
            }
            _ => {}
        }
    }

    /// Address operand of a location whose first operation is DW_OP_addr or DW_OP_addrx.
    fn first_addr(&self, unit: &gimli::Unit<R<'a>>, expr: &[u8]) -> Option<u64> {
        let op = *expr.first()?;
        let mut r = EndianSlice::new(&expr[1..], self.endian);
        use gimli::Reader;
        match op {
            0x03 => r.read_address(unit.encoding().address_size).ok(),
            0xa1 => {
                let idx = r.read_uleb128().ok()?;
                self.dwarf.address(unit, gimli::DebugAddrIndex(idx as usize)).ok()
            }
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        mut f: Frame<'a>,
        cu: &mut Cu<'a>,
        s_members: &mut Vec<Member<'a>>,
        s_enums: &mut Vec<Enumerator<'a>>,
        s_params: &mut Vec<Param<'a>>,
        s_annots: &mut Vec<Annot<'a>>,
        s_fparams: &mut Vec<FParam<'a>>,
        _stack: &[Frame<'a>],
    ) {
        if let Some(mut s) = f.slot.take() {
            match f.ctx {
                Ctx::Struct => {
                    s.kids = cu.members.len() as u32;
                    s.nkids = (s_members.len() - f.kids_start) as u32;
                    move_tail(&mut cu.members, s_members, f.kids_start);
                }
                Ctx::Enum => {
                    s.kids = cu.enumerators.len() as u32;
                    s.nkids = (s_enums.len() - f.kids_start) as u32;
                    move_tail(&mut cu.enumerators, s_enums, f.kids_start);
                }
                Ctx::SubrType => {
                    s.kids = cu.params.len() as u32;
                    s.nkids = (s_params.len() - f.kids_start) as u32;
                    move_tail(&mut cu.params, s_params, f.kids_start);
                }
                Ctx::Pointer => {
                    // The pointer refers to its last type tag, if any.
                    s.ty = f.last_tag;
                }
                _ => {}
            }
            if matches!(f.ctx, Ctx::Struct | Ctx::Typedef) {
                s.annots = cu.annots.len() as u32;
                s.nannots = (s_annots.len() - f.annots_start) as u32;
                move_tail(&mut cu.annots, s_annots, f.annots_start);
            }
            place(cu, s);
        } else if let Some(mut func) = f.func.take() {
            func.params = cu.fparams.len() as u32;
            func.nparams = (s_fparams.len() - f.fparams_start) as u32;
            move_tail(&mut cu.fparams, s_fparams, f.fparams_start);
            func.annots = cu.annots.len() as u32;
            func.nannots = (s_annots.len() - f.annots_start) as u32;
            move_tail(&mut cu.annots, s_annots, f.annots_start);
            cu.funcs.push(func);
        } else if let Some(mut var) = f.var.take() {
            var.annots = cu.annots.len() as u32;
            var.nannots = (s_annots.len() - f.annots_start) as u32;
            move_tail(&mut cu.annots, s_annots, f.annots_start);
            cu.vars.push(var);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read_attrs(
        &self,
        unit: &gimli::Unit<R<'a>>,
        entries: &mut Dies<'a>,
        abbrev: dies::Abbrev,
        a: &mut Attrs<'a>,
        cu_off: u64,
        die: u64,
        refs: Refs,
        base: u64,
    ) -> Result<(), DecodeError> {
        *a = Attrs::default();
        let debug_str = self.dwarf.debug_str.reader().slice();
        let res = entries.read_into(
            abbrev,
            &mut AttrSink {
                dec: self,
                unit,
                a,
                debug_str,
                base,
                refs,
            },
        );
        match res {
            Ok(()) => Ok(()),
            Err(ReadError::RefAddr(at)) => {
                let mut e = self.err(
                    cu_off,
                    Some(die),
                    format!(
                        "{at} uses DW_FORM_ref_addr (a reference across units, as LTO builds make), but the \
                         file's kernel LTO note says it is not an LTO build: the reference then reads the units \
                         one by one and cannot resolve such a reference, which btfkit does not imitate"
                    ),
                );
                e.kind = DecodeErrorKind::MergedMode;
                Err(e)
            }
            Err(ReadError::Bad(Some(at), e)) => {
                Err(self.err(cu_off, Some(die), format!("cannot read attribute {at}: {e}")))
            }
            Err(ReadError::Bad(None, e)) => Err(self.err(cu_off, Some(die), format!("cannot read attributes: {e}"))),
        }
    }
}

/// [`Decoder::read_attrs`]'s receiver of a DIE's attributes.
struct AttrSink<'s, 'a> {
    dec: &'s Decoder<'a, 's>,
    unit: &'s gimli::Unit<R<'a>>,
    a: &'s mut Attrs<'a>,
    debug_str: &'a [u8],
    /// Added to unit references: 0, or the unit's `.debug_info` offset in
    /// the merged-unit mode (where DW_FORM_ref_addr is read as it is).
    base: u64,
    refs: Refs,
}

impl<'a> dies::Sink<'a> for AttrSink<'_, 'a> {
    #[inline]
    fn name_strp(&mut self, off: u64) {
        // Kept as the tail of .debug_str from the offset, cut at the NUL
        // only where the text is needed (see `string`).
        self.a.name = self.debug_str.get(off as usize..).unwrap_or(b"");
    }

    #[inline]
    fn unit_ref(&mut self, field: Field, off: u64) {
        let off = off + self.base;
        match field {
            Field::Type => self.a.ty = off,
            Field::Origin => self.a.origin = off,
            Field::Spec => self.a.spec = off,
            _ => self.value(field, Value::UnitRef(off)),
        }
    }

    #[inline]
    fn number(&mut self, field: Field, x: u64) {
        let a = &mut *self.a;
        match field {
            Field::ByteSize => a.byte_size = Some(x),
            Field::MemberLoc => a.member_loc = Some(x),
            Field::DataBitOffset => a.data_bit_offset = Some(x),
            Field::BitSize => a.bit_size = Some(x),
            Field::UpperBound => a.upper_bound = Some(Some(x)),
            Field::Count => a.count = Some(Some(x)),
            Field::Encoding => a.encoding = x as u8,
            _ => self.value(field, Value::Const(x)),
        }
    }

    #[inline(never)]
    fn value(&mut self, field: Field, v: Value<'a>) {
        let (a, debug_str, unit, base) = (&mut *self.a, self.debug_str, self.unit, self.base);
        if let Value::Other(AttributeValue::DebugTypesRef(sig)) = v
            && matches!(field, Field::Type | Field::Origin | Field::Spec | Field::Signature)
        {
            let at = self
                .dec
                .type_units
                .filter(|_| self.refs == Refs::Section)
                .and_then(|t| t.get(sig.0));
            let Some(at) = at else {
                a.type_unit_refs += 1;
                return;
            };
            let bit = match field {
                Field::Type => {
                    a.ty = at;
                    0
                }
                Field::Origin => {
                    a.origin = at;
                    1
                }
                Field::Spec => {
                    a.spec = at;
                    2
                }
                _ => {
                    a.signature = Some(at);
                    3
                }
            };
            a.resolved |= 1 << bit;
            return;
        }
        let refs = self.refs;
        let ref_value = |v| ref_value(v, refs, base);
        match field {
            Field::Name => {
                a.name = match v {
                    // Kept as the tail of .debug_str from the offset, cut at
                    // the NUL only where the text is needed (see `string`).
                    Value::Strp(off) => debug_str.get(off as usize..).unwrap_or(b""),
                    v => self.dec.string(unit, &Some(v.raw())),
                }
            }
            Field::Type => a.ty = ref_value(v),
            Field::Origin => a.origin = ref_value(v),
            Field::Spec => a.spec = ref_value(v),
            Field::ByteSize => a.byte_size = num_value(v),
            Field::Encoding => a.encoding = num_value(v).unwrap_or(0) as u8,
            Field::Declaration => a.declaration = flag(&v.raw()),
            Field::External => a.external = flag(&v.raw()),
            Field::Artificial => a.artificial = flag(&v.raw()),
            Field::UpperBound => a.upper_bound = Some(num_value(v)),
            Field::Count => a.count = Some(num_value(v)),
            Field::MemberLoc => {
                a.member_loc = Some(match v {
                    Value::Const(x) => x,
                    v => member_location(&v.raw()),
                })
            }
            Field::DataBitOffset => a.data_bit_offset = num_value(v),
            Field::BitSize => a.bit_size = num_value(v),
            Field::BitOffset => {
                a.bit_offset = match v.raw() {
                    AttributeValue::Sdata(x) => Some(x),
                    v => udata(&v).map(|x| x as i64),
                }
            }
            Field::ConstValue => a.const_value = Some(v.raw()),
            Field::Location => a.location = Some(v.raw()),
            Field::Language => a.language = num_value(v).map(|x| x as u16),
            // (a signature in a form that is not a reference)
            Field::Signature => a.type_unit_refs += 1,
        }
    }
}

/// A reference field: a unit offset plus `base`, or `NOT_UNIT` for any
/// other form. A `.debug_info` reference (DW_FORM_ref_addr) reaches here
/// only in the merged-unit mode, where offsets are the section's.
#[inline]
fn ref_value(v: Value<'_>, refs: Refs, base: u64) -> u64 {
    match v {
        Value::UnitRef(o) => o + base,
        Value::Other(AttributeValue::UnitRef(UnitOffset(o))) => o as u64 + base,
        Value::Other(AttributeValue::DebugInfoRef(gimli::DebugInfoOffset(o))) if refs == Refs::Section => o as u64,
        _ => NOT_UNIT,
    }
}

/// A numeric field: any constant form, `None` for others.
#[inline]
fn num_value(v: Value<'_>) -> Option<u64> {
    match v {
        Value::Const(x) => Some(x),
        v => udata(&v.raw()),
    }
}

/// A name as stored in the arena (possibly running on past its NUL) → its text.
#[inline]
pub fn nm(s: &[u8]) -> &[u8] {
    cstr(s)
}

/// The NUL-terminated string at the start of `s` (all of `s` if no NUL).
fn cstr(s: &[u8]) -> &[u8] {
    // memchr's SIMD search: the standard library's byte loop was 2.5 % of an encode
    match memchr::memchr(0, s) {
        Some(n) => &s[..n],
        None => s,
    }
}

fn flag(v: &AttributeValue<R<'_>>) -> bool {
    match *v {
        AttributeValue::Flag(b) => b,
        _ => true,
    }
}

/// DW_AT_data_member_location: a constant, or an expression DW_OP_plus_uconst N / DW_OP_constu N.
fn member_location(v: &AttributeValue<R<'_>>) -> u64 {
    if let Some(x) = udata(v) {
        return x;
    }
    let bytes = match v {
        AttributeValue::Exprloc(e) => e.0.slice(),
        AttributeValue::Block(b) => b.slice(),
        _ => return u64::MAX,
    };
    match bytes.first() {
        Some(0x23) | Some(0x10) => {
            let mut r = EndianSlice::new(&bytes[1..], RunTimeEndian::Little);
            gimli::leb128::read::unsigned(&mut r).unwrap_or(u64::MAX)
        }
        _ => u64::MAX,
    }
}

fn frame<'a>(depth: isize, ctx: Ctx) -> Frame<'a> {
    Frame {
        depth,
        ctx,
        slot: None,
        kids_start: 0,
        annots_start: 0,
        fparams_start: 0,
        counter: 0,
        component: -1,
        func: None,
        var: None,
        last_tag: NONE,
    }
}

fn place<'a>(cu: &mut Cu<'a>, s: Slot<'a>) {
    let core = cu.slots.len() as u32 + 1;
    cu.index.push((s.uoff, core));
    cu.slots.push(s);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Skip,
    ImportedUnit,
    Block,
    Varargs,
    Type,
    Member,
    Enumerator,
    Subrange,
    Param,
    FParam,
    Annotation,
    Func,
    Var,
    Namespace,
}

/// The loader's `process()` for a DIE of tag `tag`, wherever it is called.
fn process_role(tag: DwTag) -> Role {
    match tag {
        dw::DW_TAG_base_type
        | dw::DW_TAG_const_type
        | dw::DW_TAG_volatile_type
        | dw::DW_TAG_restrict_type
        | dw::DW_TAG_atomic_type
        | dw::DW_TAG_reference_type
        | dw::DW_TAG_rvalue_reference_type
        | dw::DW_TAG_unspecified_type
        | dw::DW_TAG_ptr_to_member_type
        | dw::DW_TAG_string_type
        | dw::DW_TAG_pointer_type
        | dw::DW_TAG_array_type
        | dw::DW_TAG_enumeration_type
        | dw::DW_TAG_structure_type
        | dw::DW_TAG_class_type
        | dw::DW_TAG_interface_type
        | dw::DW_TAG_union_type
        | dw::DW_TAG_subroutine_type
        | dw::DW_TAG_typedef => Role::Type,
        dw::DW_TAG_namespace => Role::Namespace,
        dw::DW_TAG_subprogram => Role::Func,
        dw::DW_TAG_variable | dw::DW_TAG_constant => Role::Var,
        dw::DW_TAG_imported_unit => Role::ImportedUnit,
        _ => Role::Skip,
    }
}

fn classify(parent: Ctx, tag: DwTag) -> Role {
    match parent {
        Ctx::Root | Ctx::Namespace => process_role(tag),
        Ctx::Struct => match tag {
            dw::DW_TAG_member | dw::DW_TAG_inheritance => Role::Member,
            DW_TAG_LLVM_ANNOTATION => Role::Annotation,
            dw::DW_TAG_template_type_parameter
            | dw::DW_TAG_template_value_parameter
            | dw::DW_TAG_GNU_template_parameter_pack
            | dw::DW_TAG_subrange_type
            | dw::DW_TAG_variant_part
            | dw::DW_TAG_GNU_formal_parameter_pack
            | dw::DW_TAG_GNU_template_template_param => Role::Skip,
            // Static members and methods are not types; nested types are.
            dw::DW_TAG_variable | dw::DW_TAG_constant => Role::Skip,
            _ => process_role(tag),
        },
        Ctx::Member | Ctx::Typedef | Ctx::Pointer | Ctx::FParam | Ctx::Var => match tag {
            DW_TAG_LLVM_ANNOTATION => Role::Annotation,
            _ => Role::Skip,
        },
        Ctx::Array => match tag {
            dw::DW_TAG_subrange_type => Role::Subrange,
            _ => Role::Skip,
        },
        Ctx::Enum => match tag {
            dw::DW_TAG_enumerator => Role::Enumerator,
            _ => Role::Skip,
        },
        Ctx::SubrType => match tag {
            dw::DW_TAG_formal_parameter => Role::Param,
            dw::DW_TAG_unspecified_parameters => Role::Varargs,
            dw::DW_TAG_subrange_type => Role::Skip,
            _ => process_role(tag),
        },
        Ctx::Func | Ctx::Block => match tag {
            dw::DW_TAG_formal_parameter => {
                if parent == Ctx::Func {
                    Role::FParam
                } else {
                    Role::Skip
                }
            }
            dw::DW_TAG_unspecified_parameters => {
                if parent == Ctx::Func {
                    Role::Varargs
                } else {
                    Role::Skip
                }
            }
            dw::DW_TAG_variable | dw::DW_TAG_constant => Role::Skip,
            dw::DW_TAG_lexical_block | dw::DW_TAG_inlined_subroutine => Role::Block,
            DW_TAG_LLVM_ANNOTATION => {
                if parent == Ctx::Func {
                    Role::Annotation
                } else {
                    Role::Skip
                }
            }
            dw::DW_TAG_label
            | dw::DW_TAG_call_site
            | dw::DW_TAG_call_site_parameter
            | dw::DW_TAG_GNU_call_site
            | dw::DW_TAG_GNU_call_site_parameter
            | dw::DW_TAG_dwarf_procedure
            | dw::DW_TAG_template_type_parameter
            | dw::DW_TAG_template_value_parameter
            | dw::DW_TAG_GNU_template_parameter_pack
            | dw::DW_TAG_GNU_formal_parameter_pack => Role::Skip,
            _ => process_role(tag),
        },
        Ctx::Leaf | Ctx::Skip => Role::Skip,
    }
}

/// Moves `from[start..]` to the end of `to`. Most calls move nothing (a
/// struct or typedef without annotations): those return before `drain`,
/// whose set-up cost 0.26 G instructions over a vmlinux's 4.6 M calls.
#[inline]
fn move_tail<T>(to: &mut Vec<T>, from: &mut Vec<T>, start: usize) {
    if from.len() > start {
        to.extend(from.drain(start..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::debug::DebugSections;
    use gimli::write::{self, AttributeValue as W, EndianVec, LineProgram, Sections, UnitEntryId};
    use std::borrow::Cow;

    #[test]
    fn bucketed_reference_lookup_matches_binary_search() {
        let mut cu = Cu::new(0, 8, 0);
        // gaps of 1..70 bytes, several entries per bucket and empty buckets
        let mut off = 11u32;
        for i in 0..500u32 {
            cu.index.push((off, i + 1));
            off += 1 + (i * 37) % 70;
        }
        cu.build_buckets();
        for probe in 0..off + 100 {
            assert_eq!(cu.core(probe), cu.core_searched(probe), "offset {probe}");
        }
        assert_eq!(cu.core(11), 1);
        assert_eq!(cu.core(NONE), 0);
    }

    /// Builds a one-unit DWARF 4 file with `build`, decodes it.
    fn decode_with(build: impl FnOnce(&mut write::Unit, UnitEntryId)) -> Cu<'static> {
        try_decode_with(build).unwrap().unwrap()
    }

    fn try_decode_with(build: impl FnOnce(&mut write::Unit, UnitEntryId)) -> Result<Option<Cu<'static>>, DecodeError> {
        let encoding = gimli::Encoding {
            format: gimli::Format::Dwarf32,
            version: 4,
            address_size: 8,
        };
        let mut dw = write::Dwarf::new();
        let id = dw.units.add(write::Unit::new(encoding, LineProgram::none()));
        let unit = dw.units.get_mut(id);
        let root = unit.root();
        unit.get_mut(root).set(gimli::DW_AT_language, W::Udata(0x1d));
        build(unit, root);
        let mut sections = Sections::new(EndianVec::new(gimli::LittleEndian));
        dw.write(&mut sections).unwrap();
        let leak = |v: &EndianVec<gimli::LittleEndian>| -> Cow<'static, [u8]> {
            Cow::Borrowed(Box::leak(v.slice().to_vec().into_boxed_slice()))
        };
        let secs: &'static DebugSections<'static> = Box::leak(Box::new(DebugSections {
            info: leak(&sections.debug_info),
            abbrev: leak(&sections.debug_abbrev),
            str: leak(&sections.debug_str),
            ..Default::default()
        }));
        let d: &'static Dwarf<'static> = Box::leak(Box::new(dwarf(secs, RunTimeEndian::Little)));
        let headers = unit_headers(d, Path::new("t.o")).unwrap();
        let dec = Decoder {
            dwarf: d,
            opts: DecodeOpts {
                type_tag: true,
                decl_tag: true,
                regs: loc::RegParams::for_machine(0),
            },
            endian: RunTimeEndian::Little,
            type_units: None,
        };
        dec.decode(headers[0], &|_, _| true)
    }

    #[test]
    fn unit_length_faults_are_named() {
        let fault = |b: &[u8]| unit_length_fault(&EndianSlice::new(b, RunTimeEndian::Little), 0);
        let mut b = vec![0u8; 16];
        b[..4].copy_from_slice(&0x100u32.to_le_bytes());
        assert_eq!(
            fault(&b).unwrap(),
            "unit length 0x100 reaches past the end of the section (16 bytes)"
        );
        b[..4].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(fault(&b).unwrap(), "unit length 3 is too short for a unit header");
        b[..4].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
        b[4..12].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(fault(&b).unwrap().contains("0x4000000000000000 reaches past the end"));
        b[..4].copy_from_slice(&12u32.to_le_bytes());
        assert_eq!(fault(&b), None);
    }

    #[test]
    fn a_chain_of_200000_typedefs_costs_no_stack() {
        let cu = decode_with(|u, root| {
            let mut prev = u.add(root, gimli::DW_TAG_base_type);
            for _ in 0..200_000 {
                let t = u.add(root, gimli::DW_TAG_typedef);
                ty(u, t, prev);
                prev = t;
            }
        });
        assert_eq!(cu.slots.len(), 200_001);
    }

    fn name(u: &mut write::Unit, e: UnitEntryId, n: &str) {
        u.get_mut(e).set(gimli::DW_AT_name, W::String(n.as_bytes().to_vec()));
    }
    fn ty(u: &mut write::Unit, e: UnitEntryId, t: UnitEntryId) {
        u.get_mut(e).set(gimli::DW_AT_type, W::UnitRef(t));
    }
    fn tags(cu: &Cu<'_>) -> Vec<(DwTag, String)> {
        cu.slots
            .iter()
            .map(|s| (s.tag, String::from_utf8_lossy(nm(s.name)).into_owned()))
            .collect()
    }

    #[test]
    fn containers_after_contents_and_type_tags_before_their_pointer() {
        let cu = decode_with(|u, root| {
            let a = u.add(root, gimli::DW_TAG_structure_type);
            name(u, a, "A");
            let int = u.add(root, gimli::DW_TAG_base_type);
            name(u, int, "int");
            let m = u.add(a, gimli::DW_TAG_member);
            name(u, m, "m");
            let b = u.add(a, gimli::DW_TAG_structure_type);
            name(u, b, "B");
            ty(u, m, b);
            let x = u.add(b, gimli::DW_TAG_member);
            name(u, x, "x");
            ty(u, x, int);
            let p = u.add(root, gimli::DW_TAG_pointer_type);
            ty(u, p, int);
            for v in ["t1", "t2"] {
                let an = u.add(p, DW_TAG_LLVM_ANNOTATION);
                name(u, an, "btf_type_tag");
                u.get_mut(an)
                    .set(gimli::DW_AT_const_value, W::String(v.as_bytes().to_vec()));
            }
            let other = u.add(p, DW_TAG_LLVM_ANNOTATION);
            name(u, other, "not_a_tag");
        });
        let t = tags(&cu);
        let names: Vec<&str> = t.iter().map(|x| x.1.as_str()).collect();
        // (gimli's writer emits the childless `int` DIE first.)
        assert_eq!(names, ["int", "B", "A", "t1", "t2", ""]);
        assert_eq!(t[3].0, DW_TAG_LLVM_ANNOTATION);
        // Chain: PTR -> t2 -> t1 -> int.
        let core = |i: usize| cu.core(cu.slots[i].ty);
        assert_eq!((core(5), core(4), core(3)), (5, 4, 1));
        // A's member refers to B (core 2), nested in A and numbered before it.
        assert_eq!(cu.core(cu.members[cu.slots[2].kids as usize].ty), 2);
    }

    #[test]
    fn unspecified_type_is_void_at_cu_level_and_placed_when_nested() {
        let cu = decode_with(|u, root| {
            let top = u.add(root, gimli::DW_TAG_unspecified_type);
            name(u, top, "decltype(nullptr)");
            let ns = u.add(root, gimli::DW_TAG_namespace);
            let inner = u.add(ns, gimli::DW_TAG_unspecified_type);
            name(u, inner, "decltype(nullptr)");
            let t1 = u.add(root, gimli::DW_TAG_typedef);
            name(u, t1, "a");
            ty(u, t1, top);
            let t2 = u.add(root, gimli::DW_TAG_typedef);
            name(u, t2, "b");
            ty(u, t2, inner);
        });
        assert_eq!(cu.slots.len(), 3);
        assert_eq!(cu.slots[0].tag, gimli::DW_TAG_unspecified_type);
        assert_eq!(cu.core(cu.slots[1].ty), 0);
        assert_eq!(cu.core(cu.slots[2].ty), 1);
        assert!(cu.has_nested_unspecified);
    }

    #[test]
    fn array_dimensions_multiply() {
        let cu = decode_with(|u, root| {
            let int = u.add(root, gimli::DW_TAG_base_type);
            name(u, int, "int");
            let a = u.add(root, gimli::DW_TAG_array_type);
            ty(u, a, int);
            let d1 = u.add(a, gimli::DW_TAG_subrange_type);
            u.get_mut(d1).set(gimli::DW_AT_upper_bound, W::Udata(2));
            let d2 = u.add(a, gimli::DW_TAG_subrange_type);
            u.get_mut(d2).set(gimli::DW_AT_count, W::Udata(4));
            let none = u.add(root, gimli::DW_TAG_array_type);
            ty(u, none, int);
            let flex = u.add(root, gimli::DW_TAG_array_type);
            ty(u, flex, int);
            let d = u.add(flex, gimli::DW_TAG_subrange_type);
            u.get_mut(d).set(gimli::DW_AT_upper_bound, W::Sdata(-1));
        });
        let n: Vec<u32> = cu.slots.iter().skip(1).map(|s| s.nelems).collect();
        assert_eq!(n, [12, 1, 0]);
    }

    #[test]
    fn types_in_blocks_count_and_nested_subprograms_come_first() {
        let cu = decode_with(|u, root| {
            let f = u.add(root, gimli::DW_TAG_subprogram);
            name(u, f, "outer");
            let p = u.add(f, gimli::DW_TAG_formal_parameter);
            name(u, p, "arg");
            let blk = u.add(f, gimli::DW_TAG_lexical_block);
            let s = u.add(blk, gimli::DW_TAG_structure_type);
            name(u, s, "local");
            let inl = u.add(blk, gimli::DW_TAG_inlined_subroutine);
            let ip = u.add(inl, gimli::DW_TAG_formal_parameter);
            name(u, ip, "ignored");
            let g = u.add(blk, gimli::DW_TAG_subprogram);
            name(u, g, "nested");
        });
        assert_eq!(tags(&cu), vec![(gimli::DW_TAG_structure_type, "local".to_string())]);
        let names: Vec<&[u8]> = cu.funcs.iter().map(|f| nm(f.name)).collect();
        assert_eq!(names, [&b"nested"[..], b"outer"]);
        let outer = &cu.funcs[1];
        assert_eq!(outer.nparams, 1);
        assert_eq!(nm(cu.fparams[outer.params as usize].name), b"arg");
    }
}
