//! The decoded unit: flat columns of plain records, references as unit
//! offsets until the encoder resolves them to core ids.

use gimli::{DwTag, constants as dw};
use nonmax::NonMaxU32;

use super::Name;
use super::ids::{BitsId, CoreId, DieOffset, IdxRange, UnitOff};

/// One placed type (core id = index + 1). 64 bytes: an LTO file's merged
/// unit holds all of its 2.2 M at once.
#[derive(Clone, Debug)]
pub struct Slot<'a> {
    pub tag: DwTag,
    /// Section offset of the DIE (for messages).
    pub die: DieOffset,
    /// Unit offset of the DIE (for reference resolution).
    pub uoff: UnitOff,
    pub name: Name<'a>,
    pub spec: Option<UnitOff>,
    pub ty: Option<UnitOff>,
    pub size: u64,
    pub encoding: u8,
    pub flags: SlotFlags,
    pub nelems: u32,
    /// Members, enumerators or params by the tag: a run of the matching
    /// column (read through [`Cu::members_of`], [`Cu::enumerators_of`],
    /// [`Cu::params_of`]); for an array, `len` counts its dimensions.
    pub kids: IdxRange<()>,
    /// Decl-tag annotations.
    pub annots: IdxRange<Annot<'a>>,
}

const _: () = assert!(std::mem::size_of::<Slot<'static>>() == 64);

/// A slot's yes/no attributes, in one byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotFlags(u8);

impl SlotFlags {
    /// DW_AT_declaration: a struct, union or enum only declared.
    pub const DECLARATION: SlotFlags = SlotFlags(1);
    /// A subroutine type with a DW_TAG_unspecified_parameters child.
    pub const VARARGS: SlotFlags = SlotFlags(2);

    /// `f` if `on`, else none.
    #[inline]
    pub fn when(on: bool, f: SlotFlags) -> SlotFlags {
        if on { f } else { SlotFlags(0) }
    }
    #[inline]
    pub fn has(self, f: SlotFlags) -> bool {
        self.0 & f.0 != 0
    }
    #[inline]
    pub fn set(&mut self, f: SlotFlags) {
        self.0 |= f.0;
    }
}

/// A DW_TAG_member, made by [`Cu::new_member`]. 24 bytes: members are two
/// fifths of a kernel's DIEs, each copied twice while decoding, and an LTO
/// file's merged unit holds all of them at once (4.1 M in the ThinLTO
/// kernel). Messages about a member name it and point at its struct.
#[derive(Clone, Debug)]
pub struct Member<'a> {
    pub name: Name<'a>,
    pub ty: Option<UnitOff>,
    /// Its bitfield attributes, or an offset too large for `loc`, if it has
    /// any (see [`Cu::bits`]).
    pub bits: Option<BitsId>,
    /// DW_AT_data_member_location in bytes where it is below `u32::MAX`;
    /// read it with [`Cu::member_loc`].
    loc: Option<NonMaxU32>,
}

const _: () = assert!(std::mem::size_of::<Member<'static>>() == 24);

/// The attributes few members carry, kept apart from [`Member`] (they would
/// make a member 112 bytes instead of 24): a bitfield's, and a
/// DW_AT_data_member_location of 4 GiB or more, which no real struct has but
/// the encoder must refuse as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemberBits {
    pub data_bit_offset: Option<u64>,
    pub bit_size: Option<u64>,
    pub byte_size: Option<u64>,
    pub bit_offset: Option<i64>,
    /// The member's offset where it does not fit [`Member`].
    pub far_loc: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Enumerator<'a> {
    pub name: &'a [u8],
    pub value: u64,
}

#[derive(Clone, Debug)]
pub struct Param<'a> {
    pub name: Name<'a>,
    pub ty: Option<UnitOff>,
}

#[derive(Clone, Debug)]
pub struct Annot<'a> {
    pub value: &'a [u8],
    pub component: i32,
}

/// A formal parameter of a subprogram.
#[derive(Clone, Debug)]
pub struct FParam<'a> {
    pub uoff: UnitOff,
    pub name: &'a [u8],
    pub ty: Option<UnitOff>,
    pub has_type: bool,
    pub origin: Option<UnitOff>,
    /// Location facts (`loc::param_facts`), for register parameters.
    pub facts: u8,
    /// Its DW_AT_location as the next reference reads it (only decoded
    /// under [`super::DecodeOpts::param_locations`]).
    pub loc: Option<super::loc::LocFacts>,
    /// It has a DW_AT_const_value.
    pub const_value: bool,
}

/// A DW_TAG_subprogram, in the reference's functions-table order (nested
/// subprograms before their parent).
#[derive(Clone, Debug)]
pub struct Func<'a> {
    pub uoff: UnitOff,
    pub die: DieOffset,
    pub name: &'a [u8],
    pub ty: Option<UnitOff>,
    pub has_type: bool,
    pub origin: Option<UnitOff>,
    pub spec: Option<UnitOff>,
    pub declaration: bool,
    pub varargs: bool,
    /// DW_AT_low_pc: where the function's code starts.
    pub low_pc: Option<u64>,
    /// DW_AT_calling_convention is DW_CC_nocall (clang: the signature
    /// changed).
    pub nocall: bool,
    /// DW_AT_inline is present and not 0: an abstract instance.
    pub inlined: bool,
    pub params: IdxRange<FParam<'a>>,
    pub annots: IdxRange<Annot<'a>>,
}

/// A CU-level DW_TAG_variable.
#[derive(Clone, Debug)]
pub struct Var<'a> {
    pub uoff: UnitOff,
    pub die: DieOffset,
    pub name: &'a [u8],
    pub ty: Option<UnitOff>,
    pub spec: Option<UnitOff>,
    pub declaration: bool,
    pub external: bool,
    pub artificial: bool,
    pub addr: Option<u64>,
    pub annots: IdxRange<Annot<'a>>,
}

/// What the reference does with a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    Normal,
    /// Partial or skeleton unit: contributes nothing.
    Ignored,
}

/// One decoded CU.
#[derive(Clone, Debug)]
pub struct Cu<'a> {
    pub(crate) offset: u64,
    pub(crate) language: u16,
    /// DW_AT_producer names clang.
    pub(crate) producer_clang: bool,
    pub(crate) name: &'a [u8],
    pub(crate) kind: UnitKind,
    pub(crate) address_size: u8,
    pub(crate) slots: Vec<Slot<'a>>,
    pub(crate) members: Vec<Member<'a>>,
    /// Bitfield attributes of members (`Member::bits`).
    pub(crate) member_bits: Vec<MemberBits>,
    pub(crate) enumerators: Vec<Enumerator<'a>>,
    pub(crate) params: Vec<Param<'a>>,
    pub(crate) annots: Vec<Annot<'a>>,
    pub(crate) funcs: Vec<Func<'a>>,
    pub(crate) fparams: Vec<FParam<'a>>,
    pub(crate) vars: Vec<Var<'a>>,
    /// (unit offset, core id), sorted by offset: reference resolution.
    pub(crate) index: Vec<(UnitOff, CoreId)>,
    /// Per 2^BUCKET_SHIFT bytes of unit offset, the first `index` position at
    /// or past it (built with [`Cu::build_buckets`]; empty = binary search).
    /// Type references resolve in a step or two instead of a 13-step binary
    /// search with a cache miss per step, a visible part of an encode.
    pub(crate) buckets: Vec<u32>,
    /// Count of nested DW_TAG_unspecified_type slots (placed, never emitted).
    pub(crate) has_nested_unspecified: bool,
    /// DIEs walked (null entries not counted).
    pub(crate) dies: u64,
    /// Of those, the DIEs whose attributes were read in full; the rest were
    /// passed over by their abbreviation's sizes.
    pub(crate) dies_read: u64,
    /// References to types in DWARF type units (DW_FORM_ref_sig8, and the
    /// DW_AT_signature of gcc's skeleton types). The reference resolves
    /// none of them: such a reference is void, a skeleton an empty
    /// anonymous struct. Counted so that the loss can be reported.
    pub(crate) type_unit_refs: u64,
    /// `.debug_info` offsets that resolved signature references point to
    /// (in type units this unit must be decoded with).
    pub(crate) type_unit_pulls: Vec<u64>,
    /// Skeleton types (offset) standing for a type-unit type (its offset),
    /// made references by [`Cu::finish_parts`].
    pub(crate) aliases: Vec<(UnitOff, UnitOff)>,
    /// Where the unit's DW_TAG_imported_units point (dwz's partial units),
    /// as references are kept, until they are read as parts of it.
    pub(crate) imports: Vec<u64>,
    /// References leaving the unit, where they are tracked (dwz: each must
    /// land in a unit read with it).
    pub(crate) far_refs: Vec<u64>,
    /// Its root is a DW_TAG_partial_unit.
    pub(crate) partial: bool,
}

/// Unit-offset bytes per `Cu::buckets` entry: an eighth of the unit's size
/// in memory, a few index entries per bucket at most.
const BUCKET_SHIFT: u32 = 5;

impl<'a> Cu<'a> {
    /// The unit's offset in `.debug_info`.
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// Its placed types, in placing order (core id = index + 1).
    pub fn slots(&self) -> &[Slot<'a>] {
        &self.slots
    }
    /// Its subprograms.
    pub fn funcs(&self) -> &[Func<'a>] {
        &self.funcs
    }

    /// An empty unit at section offset `offset`, its columns sized for a
    /// unit of `unit_len` bytes.
    pub fn new(offset: u64, address_size: u8, unit_len: usize) -> Cu<'a> {
        Cu {
            offset,
            language: 0,
            producer_clang: false,
            name: b"",
            kind: UnitKind::Normal,
            address_size,
            // Sized from the unit length so that the columns rarely grow:
            // on the 6.12 vmlinux nine CUs in ten have at least one slot per
            // 36 bytes of unit, a member per 21, an enumerator per 127, a
            // parameter per 109, a function per 228, a function parameter
            // per 166, a variable per 123 and bitfield attributes per 433
            // (the members' sizing at a 28th made most CUs copy the column
            // once).
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
            dies_read: 0,
            type_unit_refs: 0,
            type_unit_pulls: Vec::new(),
            aliases: Vec::new(),
            imports: Vec::new(),
            far_refs: Vec::new(),
            partial: false,
        }
    }

    /// Appends `next`, another part of a merged unit (both decoded by
    /// [`Decoder::decode_merged_part`]): its core ids continue this unit's
    /// and its ranges move with the columns, as if one unit had been
    /// decoded. [`Cu::finish_parts`] makes the whole ready for look-ups once
    /// the last part is in.
    pub fn append(&mut self, next: Cu<'a>) {
        self.append_copy(&next);
    }

    /// [`Cu::append`] from a borrowed part (dwz's partial units are decoded
    /// once and copied into every unit that imports them).
    pub fn append_copy(&mut self, next: &Cu<'a>) {
        let cores = self.slots.len();
        let (members, enumerators, params) = (self.members.len(), self.enumerators.len(), self.params.len());
        let (annots, fparams, bits) = (self.annots.len(), self.fparams.len(), self.member_bits.len());
        self.slots.extend(next.slots.iter().map(|s| {
            let mut s = s.clone();
            match s.tag {
                dw::DW_TAG_structure_type
                | dw::DW_TAG_class_type
                | dw::DW_TAG_union_type
                | dw::DW_TAG_interface_type => {
                    s.kids = s.kids.shifted(members);
                    s.annots = s.annots.shifted(annots);
                }
                dw::DW_TAG_enumeration_type => s.kids = s.kids.shifted(enumerators),
                dw::DW_TAG_subroutine_type => s.kids = s.kids.shifted(params),
                dw::DW_TAG_typedef | dw::DW_TAG_rvalue_reference_type => s.annots = s.annots.shifted(annots),
                // arrays count their dimensions in `kids`; other kinds have no runs
                _ => {}
            }
            s
        }));
        self.members.extend(next.members.iter().map(|m| {
            let mut m = m.clone();
            m.bits = m.bits.map(|b| b.shifted(bits));
            m
        }));
        self.member_bits.extend_from_slice(&next.member_bits);
        self.enumerators.extend_from_slice(&next.enumerators);
        self.params.extend_from_slice(&next.params);
        self.annots.extend_from_slice(&next.annots);
        self.funcs.extend(next.funcs.iter().map(|f| {
            let mut f = f.clone();
            f.params = f.params.shifted(fparams);
            f.annots = f.annots.shifted(annots);
            f
        }));
        self.fparams.extend_from_slice(&next.fparams);
        self.vars.extend(next.vars.iter().map(|v| {
            let mut v = v.clone();
            v.annots = v.annots.shifted(annots);
            v
        }));
        self.index.extend(
            next.index
                .iter()
                .map(|&(off, core)| (off, CoreId::at(core.index() + cores))),
        );
        self.buckets.clear();
        self.has_nested_unspecified |= next.has_nested_unspecified;
        self.dies += next.dies;
        self.dies_read += next.dies_read;
        self.type_unit_refs += next.type_unit_refs;
        self.type_unit_pulls.extend_from_slice(&next.type_unit_pulls);
        self.aliases.extend_from_slice(&next.aliases);
        self.imports.extend_from_slice(&next.imports);
    }

    /// Makes the appended parts one unit for look-ups: the reference index
    /// sorted (parts may come in any order), each skeleton's offset made to
    /// resolve to the core id of the type it stands for (a skeleton of a
    /// type that placed nothing stays void), the buckets built.
    pub fn finish_parts(&mut self) {
        self.index.sort_unstable_by_key(|e| e.0);
        // Variables are found by offset (a definition's declaration): parts
        // appended out of file order (dwz's partial units lie before the
        // units that import them) leave them unsorted. Their order is also
        // the order VARs are emitted in, which file order keeps.
        if !self.vars.is_sorted_by_key(|v| v.uoff) {
            self.vars.sort_by_key(|v| v.uoff);
        }
        self.build_buckets();
        if self.aliases.is_empty() {
            return;
        }
        let extra: Vec<(UnitOff, CoreId)> = self
            .aliases
            .iter()
            .filter_map(|&(off, target)| Some((off, self.core(Some(target))?)))
            .collect();
        self.index.extend(extra);
        self.index.sort_unstable_by_key(|e| e.0);
        self.build_buckets();
    }

    /// Places a type: its core id is the next one, and references to its
    /// offset find it once the index is sorted.
    #[inline]
    pub fn place(&mut self, s: Slot<'a>) -> CoreId {
        let core = CoreId::at(self.slots.len());
        self.index.push((s.uoff, core));
        self.slots.push(s);
        core
    }

    /// A member of this unit named `name`, of type `ty`, with the bitfield
    /// attributes `bits` (default: none) at byte offset `loc`
    /// (DW_AT_data_member_location, if present). Its bitfield attributes
    /// are kept in the unit, as an offset too large for the member is.
    #[inline]
    pub fn new_member(
        &mut self,
        name: &'a [u8],
        ty: Option<UnitOff>,
        mut bits: MemberBits,
        loc: Option<u64>,
    ) -> Member<'a> {
        let near = loc.map(|l| u32::try_from(l).ok().and_then(NonMaxU32::new));
        let loc = match near {
            Some(None) => {
                bits.far_loc = loc;
                None
            }
            Some(near) => near,
            None => None,
        };
        Member {
            name: Name::new(name),
            ty,
            bits: self.add_member_bits(bits),
            loc,
        }
    }

    /// Keeps a member's bitfield attributes, if it has any (most do not).
    #[inline]
    fn add_member_bits(&mut self, b: MemberBits) -> Option<BitsId> {
        if b.data_bit_offset.is_none()
            && b.bit_size.is_none()
            && b.byte_size.is_none()
            && b.bit_offset.is_none()
            && b.far_loc.is_none()
        {
            return None;
        }
        self.member_bits.push(b);
        Some(BitsId::at(self.member_bits.len() - 1))
    }

    /// `m`'s DW_AT_data_member_location in bytes (`None` if absent).
    #[inline]
    pub fn member_loc(&self, m: &Member<'_>) -> Option<u64> {
        match m.loc {
            Some(l) => Some(l.get() as u64),
            None => m.bits.and_then(|b| self.member_bits[b.index()].far_loc),
        }
    }

    /// Core id of the type at unit offset `off` (`None`: void, or nothing
    /// placed there).
    #[inline]
    pub fn core(&self, off: Option<UnitOff>) -> Option<CoreId> {
        let off = off?;
        let Some(&first) = self.buckets.get((off.get() >> BUCKET_SHIFT) as usize) else {
            return self.core_searched(off);
        };
        for &(o, core) in &self.index[first as usize..] {
            if o >= off {
                return (o == off).then_some(core);
            }
        }
        None
    }

    pub(super) fn core_searched(&self, off: UnitOff) -> Option<CoreId> {
        let i = self.index.binary_search_by_key(&off, |e| e.0).ok()?;
        Some(self.index[i].1)
    }

    /// Fills `buckets` from the sorted `index`, unless its offsets are
    /// sparse (a unit with dwz's partial units spans the section, up to
    /// its supplementary file: buckets for all of it, per unit, were a
    /// fifth of a dwz'd vmlinux's CPU); look-ups then search.
    pub fn build_buckets(&mut self) {
        let n = self
            .index
            .last()
            .map_or(0, |e| (e.0.get() >> BUCKET_SHIFT) as usize + 1);
        self.buckets.clear();
        if n > 4 * self.index.len() + 1024 {
            return;
        }
        self.buckets.reserve_exact(n);
        let mut i = 0;
        for b in 0..n {
            let lo = (b as u32) << BUCKET_SHIFT;
            // stops at the last entry at the latest: its offset is >= lo
            while self.index[i].0.get() < lo {
                i += 1;
            }
            self.buckets.push(i as u32);
        }
    }

    /// The bitfield attributes of `m` (all `None` for most members).
    #[inline]
    pub fn bits(&self, m: &Member<'_>) -> MemberBits {
        m.bits.map_or_else(MemberBits::default, |b| self.member_bits[b.index()])
    }

    #[inline]
    pub fn slot(&self, core: CoreId) -> &Slot<'a> {
        &self.slots[core.index()]
    }

    /// The type placed at `off`, if any.
    #[inline]
    pub fn type_at(&self, off: Option<UnitOff>) -> Option<&Slot<'a>> {
        self.core(off).map(|c| self.slot(c))
    }

    /// A struct's or union's members.
    #[inline]
    pub fn members_of(&self, s: &Slot<'a>) -> &[Member<'a>] {
        &self.members[s.kids.range()]
    }

    /// An enumeration's enumerators.
    #[inline]
    pub fn enumerators_of(&self, s: &Slot<'a>) -> &[Enumerator<'a>] {
        &self.enumerators[s.kids.range()]
    }

    /// A subroutine type's parameters.
    #[inline]
    pub fn params_of(&self, s: &Slot<'a>) -> &[Param<'a>] {
        &self.params[s.kids.range()]
    }
}
