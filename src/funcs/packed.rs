//! Packed-struct inference (encoding-funcs-vars.md §4.1), used for a
//! function's `uncertain_parm_loc`: a named struct passed by value past the
//! register parameters that looks packed.
//!
//! The decoder describes the CU's structs and unions as [`Layouts`] (one
//! [`Aggregate`] per struct/class/union, its members as [`MemberLayout`]s in
//! DIE order); [`Packed`] answers per struct and caches per CU, including the
//! reference's side effect: a struct found at an unnatural offset inside a
//! non-packed struct is marked packed for good.
//!
//! The arithmetic mirrors the reference's field widths (32-bit offsets, an
//! 8-bit hole counter, a 16-bit padding, an 8-bit bitfield size and a signed
//! 8-bit bitfield offset) because those wrap-arounds decide the verdict on
//! odd layouts.

/// Index of an aggregate in [`Layouts::aggs`].
pub type AggId = u32;

/// Where a member's natural alignment comes from (its type with typedefs and
/// cv-qualifiers stripped; for arrays, the element type so stripped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Pointer: address size; base type and enum: byte size; other kinds: 1.
    /// 0 counts as 1.
    Bytes(u32),
    /// A struct, class or union: the largest natural alignment of its members.
    Of(AggId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Inheritance {
    /// An ordinary data member.
    #[default]
    No,
    /// `DW_TAG_inheritance`, not virtual.
    Plain,
    /// `DW_TAG_inheritance` with `DW_VIRTUALITY_virtual`.
    Virtual,
}

/// One member, with the reference's normalized layout fields (see
/// [`MemberLayout::normalize`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberLayout {
    pub bit_offset: u32,
    pub byte_offset: u32,
    /// Size of the member's type (of the bitfield's storage unit).
    pub byte_size: u64,
    /// `byte_size * 8` (32 bits wide, as the reference keeps it).
    pub bit_size: u32,
    /// `DW_AT_bit_size`, 0 for ordinary members.
    pub bitfield_size: u8,
    pub is_static: bool,
    pub inheritance: Inheritance,
    pub align: Align,
    /// The stripped type is a struct/class (not a union, not an array).
    pub strct: Option<AggId>,
}

/// A struct, class or union of the CU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aggregate {
    /// Struct or class (true) or union (false).
    pub is_struct: bool,
    /// `DW_AT_byte_size`.
    pub size: u32,
    /// Range in [`Layouts::members`].
    pub first: u32,
    pub count: u32,
}

/// The CU's aggregates and their members.
#[derive(Clone, Debug, Default)]
pub struct Layouts {
    pub aggs: Vec<Aggregate>,
    pub members: Vec<MemberLayout>,
}

impl Layouts {
    /// Adds an aggregate with `members`; returns its id.
    pub fn push(&mut self, is_struct: bool, size: u32, members: &[MemberLayout]) -> AggId {
        let first = self.members.len() as u32;
        self.members.extend_from_slice(members);
        self.aggs.push(Aggregate {
            is_struct,
            size,
            first,
            count: members.len() as u32,
        });
        (self.aggs.len() - 1) as AggId
    }

    /// The members of aggregate `a`, in DIE order.
    pub fn members(&self, a: AggId) -> &[MemberLayout] {
        let g = &self.aggs[a as usize];
        &self.members[g.first as usize..(g.first + g.count) as usize]
    }
}

/// What the DWARF says about a member, before normalization.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawMember {
    /// `DW_AT_data_bit_offset`, if present.
    pub data_bit_offset: Option<u64>,
    /// `DW_AT_data_member_location` as a byte offset, if present.
    pub data_member_location: Option<u64>,
    /// `DW_AT_bit_offset` (DWARF ≤ 3 style bitfields), 0 if absent.
    pub dw_bit_offset: i64,
    /// `DW_AT_bit_size`, 0 if absent.
    pub dw_bit_size: u64,
    /// For an ordinary member the size of its type; for a bitfield its
    /// `DW_AT_byte_size`, else the size of its stripped type (for a base type
    /// of size 0: its bit size rounded up to bytes, times 8, as the
    /// reference does).
    pub byte_size: u64,
    pub in_union: bool,
}

impl MemberLayout {
    /// The reference's member normalization (`class_member__cache_byte_size`
    /// in its loader): byte/bit offsets of bitfields aligned on their storage
    /// unit, little-endian `DW_AT_bit_offset` converted.
    pub fn normalize(raw: &RawMember, little_endian: bool, align: Align, strct: Option<AggId>) -> MemberLayout {
        let mut m = MemberLayout {
            bit_offset: 0,
            byte_offset: 0,
            byte_size: raw.byte_size,
            bit_size: 0,
            bitfield_size: raw.dw_bit_size as u8,
            is_static: false,
            inheritance: Inheritance::No,
            align,
            strct,
        };
        let mut bitfield_offset: i8 = 0;
        match raw.data_bit_offset {
            Some(b) => m.bit_offset = b as u32,
            None => {
                match raw.data_member_location {
                    Some(o) => m.byte_offset = o as u32,
                    None => m.is_static = !raw.in_union,
                }
                m.bit_offset = m.byte_offset.wrapping_mul(8);
                bitfield_offset = raw.dw_bit_offset as i8;
            }
        }
        if m.is_static {
            return m;
        }
        m.bit_size = (m.byte_size.wrapping_mul(8)) as u32;
        if m.bitfield_size == 0 || m.byte_size == 0 {
            return m;
        }
        if raw.data_bit_offset.is_none() {
            if little_endian {
                bitfield_offset = (m.bit_size as i32 - bitfield_offset as i32 - m.bitfield_size as i32) as i8;
            }
            m.bit_offset = m
                .byte_offset
                .wrapping_mul(8)
                .wrapping_add(bitfield_offset as i32 as u32);
        } else {
            m.byte_offset = m.bit_offset / 8;
            bitfield_offset = (m.bit_offset - m.byte_offset * 8) as i8;
        }
        if bitfield_offset < 0 {
            bitfield_offset = (bitfield_offset as i32 + m.bit_size as i32) as i8;
            m.byte_offset = m.byte_offset.wrapping_sub(m.byte_size as u32);
            m.bit_offset = m
                .byte_offset
                .wrapping_mul(8)
                .wrapping_add(bitfield_offset as i32 as u32);
        }
        let bfo = bitfield_offset as i32 + ((m.byte_offset as u64 % m.byte_size) * 8) as i32;
        bitfield_offset = bfo as i8;
        if let Some(units) = m.bit_offset.checked_div(m.bit_size) {
            m.byte_offset = units * m.bit_size / 8;
        }
        // The reference compares its signed 8-bit offset with the unsigned
        // size: a negative offset counts as huge.
        if bitfield_offset as i32 as u32 >= m.bit_size {
            m.byte_offset = m.byte_offset.wrapping_add(m.byte_size as u32);
        }
        m
    }
}

const INFERRED: u8 = 1;
const PACKED: u8 = 2;
const HOLES_DONE: u8 = 4;
const ALIGN_BUSY: u8 = 8;

/// The cached verdicts and alignments of one CU, kept between queries (the
/// reference caches them per struct, side effects included).
#[derive(Clone, Debug, Default)]
pub struct PackedCache {
    state: Vec<u8>,
    /// Cached natural alignment (0 = not computed or 0).
    natural: Vec<u32>,
    /// (tail padding, byte holes) as the reference's 16- and 8-bit fields.
    holes: Vec<(u16, u8)>,
}

/// Per-CU inference over a [`Layouts`].
pub struct Packed<'l> {
    layouts: &'l Layouts,
    state: Vec<u8>,
    natural: Vec<u32>,
    holes: Vec<(u16, u8)>,
}

impl<'l> Packed<'l> {
    pub fn new(layouts: &'l Layouts) -> Packed<'l> {
        Packed::with_cache(layouts, PackedCache::default())
    }

    /// Resumes with the cache of earlier queries on the same `layouts`.
    pub fn with_cache(layouts: &'l Layouts, cache: PackedCache) -> Packed<'l> {
        let n = layouts.aggs.len();
        let PackedCache {
            mut state,
            mut natural,
            mut holes,
        } = cache;
        state.resize(n, 0);
        natural.resize(n, 0);
        holes.resize(n, (0, 0));
        Packed {
            layouts,
            state,
            natural,
            holes,
        }
    }

    /// The cache, to resume later with [`Packed::with_cache`].
    pub fn into_cache(self) -> PackedCache {
        PackedCache {
            state: self.state,
            natural: self.natural,
            holes: self.holes,
        }
    }

    /// Natural alignment of a member type (never 0).
    fn align_of(&mut self, a: Align) -> u64 {
        let v = match a {
            Align::Bytes(n) => n as u64,
            Align::Of(id) => self.aggregate_align(id) as u64,
        };
        v.max(1)
    }

    /// Largest natural alignment of the members (0 for none), cached.
    fn aggregate_align(&mut self, id: AggId) -> u32 {
        let i = id as usize;
        if self.natural[i] != 0 {
            return self.natural[i];
        }
        // A cycle (only in damaged DWARF) resolves to "no contribution".
        if self.state[i] & ALIGN_BUSY != 0 {
            return 0;
        }
        self.state[i] |= ALIGN_BUSY;
        let mut best = 0u64;
        let layouts = self.layouts;
        for m in layouts.members(id) {
            if m.inheritance == Inheritance::Virtual || m.is_static {
                continue;
            }
            best = best.max(self.align_of(m.align));
        }
        self.state[i] &= !ALIGN_BUSY;
        self.natural[i] = best as u32;
        best as u32
    }

    fn find_holes(&mut self, id: AggId) -> (u16, u8) {
        let i = id as usize;
        if self.state[i] & HOLES_DONE != 0 {
            return self.holes[i];
        }
        let agg = self.layouts.aggs[i];
        let mut cur_bitfield_end: u32 = agg.size.wrapping_mul(8);
        let mut cur_bitfield_size: u32 = 0;
        let mut last_seen_bit: u32 = 0;
        let mut in_bitfield = false;
        let mut nr_holes: u8 = 0;
        for m in self.layouts.members(id) {
            if m.inheritance != Inheritance::No && (m.inheritance == Inheritance::Virtual || m.byte_size == 0) {
                continue;
            }
            if m.is_static {
                continue;
            }
            let bit_start = m.bit_offset;
            let bit_end = if m.bitfield_size != 0 {
                bit_start.wrapping_add(m.bitfield_size as u32)
            } else {
                (bit_start as u64).wrapping_add(m.byte_size.wrapping_mul(8)) as u32
            };
            let mut byte_holes: i32 = 0;
            if in_bitfield {
                last_seen_bit = bit_start.min(cur_bitfield_end);
            }
            if m.bitfield_size != 0 {
                let aligned_start = m.byte_offset.wrapping_mul(8);
                if last_seen_bit < aligned_start && aligned_start <= bit_start {
                    byte_holes = m.byte_offset.wrapping_sub(last_seen_bit / 8) as i32;
                }
            } else {
                byte_holes = (bit_start / 8).wrapping_sub(last_seen_bit / 8) as i32;
            }
            last_seen_bit = bit_end;
            if m.bitfield_size != 0 {
                in_bitfield = true;
                if bit_end > cur_bitfield_end || m.bit_size > cur_bitfield_size {
                    cur_bitfield_size = m.bit_size;
                    cur_bitfield_end = m.byte_offset.wrapping_mul(8).wrapping_add(cur_bitfield_size);
                    if bit_end > cur_bitfield_end {
                        cur_bitfield_end = cur_bitfield_end.wrapping_add(cur_bitfield_size);
                    }
                }
            } else {
                in_bitfield = false;
                cur_bitfield_size = 0;
                cur_bitfield_end = bit_end;
            }
            if byte_holes > 0 {
                nr_holes = nr_holes.wrapping_add(1);
            }
        }
        if in_bitfield {
            last_seen_bit = agg.size.wrapping_mul(8).min(cur_bitfield_end);
        }
        let padding = agg.size.wrapping_sub(last_seen_bit / 8) as u16;
        self.holes[i] = (padding, nr_holes);
        self.state[i] |= HOLES_DONE;
        (padding, nr_holes)
    }

    /// Whether struct `id` is inferred packed (unions never are).
    pub fn is_packed(&mut self, id: AggId) -> bool {
        let i = id as usize;
        let agg = self.layouts.aggs[i];
        if !agg.is_struct {
            return false;
        }
        if self.state[i] & INFERRED != 0 {
            return self.state[i] & PACKED != 0;
        }
        let (padding, nr_holes) = self.find_holes(id);
        let layouts = self.layouts;
        let mut packed = false;
        if padding != 0 || nr_holes != 0 {
            // Not packed itself; but member structs at offsets their own
            // alignment forbids must be packed.
            for m in layouts.members(id) {
                let Some(s) = m.strct else { continue };
                let na = self.align_of(Align::Of(s));
                if !(m.byte_offset as u64).is_multiple_of(na) {
                    self.state[s as usize] |= INFERRED | PACKED;
                }
            }
        } else {
            let mut max_align: u16 = 1;
            for m in layouts.members(id) {
                if m.inheritance == Inheritance::Virtual || m.is_static {
                    continue;
                }
                let na = self.align_of(m.align);
                if na == 1 {
                    continue;
                }
                if (max_align as u64) < na {
                    max_align = na as u16;
                }
                if !(m.byte_offset as u64).is_multiple_of(na) {
                    packed = true;
                    break;
                }
            }
            // (The reference also tests an explicit alignment of 1, which
            // `-J` never loads.)
            if !packed && max_align != 0 && !agg.size.is_multiple_of(max_align as u32) {
                packed = true;
            }
        }
        // A struct marked through the side effect above while this one was
        // computed keeps that mark.
        let keep = self.state[i] & PACKED;
        self.state[i] |= INFERRED | if packed { PACKED } else { keep };
        self.state[i] & PACKED != 0
    }
}

/// The recording rule for `uncertain_parm_loc`: with `nparams ≥ nregs`, some
/// parameter at index ≥ `nregs` whose *immediate* type is a named
/// struct/class (`named_struct(i)`) is packed.
pub fn uncertain_parm_loc(
    nparams: usize,
    nregs: usize,
    packed: &mut Packed<'_>,
    mut named_struct: impl FnMut(usize) -> Option<AggId>,
) -> bool {
    if nparams < nregs {
        return false;
    }
    (nregs..nparams).any(|i| named_struct(i).is_some_and(|s| packed.is_packed(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(byte_offset: u32, byte_size: u64, align: Align) -> MemberLayout {
        MemberLayout {
            bit_offset: byte_offset * 8,
            byte_offset,
            byte_size,
            bit_size: (byte_size * 8) as u32,
            bitfield_size: 0,
            is_static: false,
            inheritance: Inheritance::No,
            align,
            strct: None,
        }
    }

    fn sub(byte_offset: u32, byte_size: u64, s: AggId) -> MemberLayout {
        MemberLayout {
            strct: Some(s),
            ..member(byte_offset, byte_size, Align::Of(s))
        }
    }

    fn bitfield(bit_offset: u32, bits: u8, unit: u64) -> MemberLayout {
        let raw = RawMember {
            data_bit_offset: Some(bit_offset as u64),
            dw_bit_size: bits as u64,
            byte_size: unit,
            ..Default::default()
        };
        MemberLayout::normalize(&raw, true, Align::Bytes(unit as u32), None)
    }

    #[test]
    fn ordinary_struct_is_not_packed() {
        // struct { int a; long b; } – a 4-byte hole after a.
        let mut l = Layouts::default();
        let s = l.push(
            true,
            16,
            &[member(0, 4, Align::Bytes(4)), member(8, 8, Align::Bytes(8))],
        );
        // struct { int a; int b; } – no hole, aligned.
        let t = l.push(true, 8, &[member(0, 4, Align::Bytes(4)), member(4, 4, Align::Bytes(4))]);
        let mut p = Packed::new(&l);
        assert!(!p.is_packed(s));
        assert!(!p.is_packed(t));
    }

    #[test]
    fn misaligned_member_is_packed() {
        // struct __attribute__((packed)) { char c; int i; } (size 5)
        let mut l = Layouts::default();
        let s = l.push(true, 5, &[member(0, 1, Align::Bytes(1)), member(1, 4, Align::Bytes(4))]);
        let mut p = Packed::new(&l);
        assert!(p.is_packed(s));
    }

    #[test]
    fn size_not_multiple_of_alignment_is_packed() {
        // struct __attribute__((packed)) { int i; char c; } (size 5): no hole,
        // no misaligned member, but 5 % 4 != 0.
        let mut l = Layouts::default();
        let s = l.push(true, 5, &[member(0, 4, Align::Bytes(4)), member(4, 1, Align::Bytes(1))]);
        let mut p = Packed::new(&l);
        assert!(p.is_packed(s));
    }

    #[test]
    fn tail_padding_or_hole_means_not_packed() {
        // { int i; char c; } size 8: tail padding 3 → not packed even though
        // nothing else is odd.
        let mut l = Layouts::default();
        let tail = l.push(true, 8, &[member(0, 4, Align::Bytes(4)), member(4, 1, Align::Bytes(1))]);
        // { char c; <hole> short s; } with s misaligned at 3 (size 5): the hole
        // wins, not packed.
        let hole = l.push(true, 5, &[member(0, 1, Align::Bytes(1)), member(3, 2, Align::Bytes(2))]);
        let mut p = Packed::new(&l);
        assert!(!p.is_packed(tail));
        assert!(!p.is_packed(hole));
    }

    #[test]
    fn unions_are_never_packed() {
        let mut l = Layouts::default();
        let u = l.push(
            false,
            5,
            &[member(0, 5, Align::Bytes(1)), member(0, 4, Align::Bytes(4))],
        );
        assert!(!Packed::new(&l).is_packed(u));
    }

    #[test]
    fn side_effect_marks_member_struct() {
        // inner = { int a; int b; } (align 4, not packed by itself);
        // outer = { char c; inner in @1; long l @16 } has a hole → not packed,
        // but inner sits at offset 1 → inner is marked packed.
        let mut l = Layouts::default();
        let inner = l.push(true, 8, &[member(0, 4, Align::Bytes(4)), member(4, 4, Align::Bytes(4))]);
        let outer = l.push(
            true,
            24,
            &[
                member(0, 1, Align::Bytes(1)),
                sub(1, 8, inner),
                member(16, 8, Align::Bytes(8)),
            ],
        );
        let mut p = Packed::new(&l);
        assert!(!p.is_packed(outer));
        assert!(p.is_packed(inner), "marked by the outer struct's check");
        // The cache carries over between queries.
        let mut r = Packed::with_cache(&l, Packed::new(&l).into_cache());
        assert!(!r.is_packed(inner));
        let mut r = Packed::with_cache(&l, r.into_cache());
        assert!(!r.is_packed(outer));
        assert!(
            Packed::with_cache(&l, r.into_cache()).is_packed(inner),
            "the side effect survives the hand-over"
        );
        // Asked first, inner alone is not packed (a fresh cache).
        let mut q = Packed::new(&l);
        assert!(!q.is_packed(inner));
        // The outer check overwrites an earlier verdict on the member struct.
        assert!(!q.is_packed(outer));
        assert!(q.is_packed(inner), "marked packed after the fact");
    }

    #[test]
    fn nested_alignment_comes_from_members() {
        // inner = { long x; } (align 8); outer = { int a; inner @4 } size 12:
        // no hole, inner misaligned → packed.
        let mut l = Layouts::default();
        let inner = l.push(true, 8, &[member(0, 8, Align::Bytes(8))]);
        let outer = l.push(true, 12, &[member(0, 4, Align::Bytes(4)), sub(4, 8, inner)]);
        let mut p = Packed::new(&l);
        assert!(p.is_packed(outer));
        assert!(!p.is_packed(inner));
    }

    #[test]
    fn bitfields_without_holes() {
        // struct { unsigned a:3, b:5; unsigned char c; } size 4 (gcc): bits
        // 0..8 in the unit at 0, c at byte 1, tail padding 2 → not packed.
        let mut l = Layouts::default();
        let s = l.push(
            true,
            4,
            &[bitfield(0, 3, 4), bitfield(3, 5, 4), member(1, 1, Align::Bytes(1))],
        );
        // struct __attribute__((packed)) { unsigned a:4; unsigned b:4; } size 1:
        // the unit int (align 4) is at offset 0, size 1 % 4 != 0 → packed.
        let t = l.push(true, 1, &[bitfield(0, 4, 4), bitfield(4, 4, 4)]);
        let mut p = Packed::new(&l);
        assert!(!p.is_packed(s));
        assert!(p.is_packed(t));
    }

    #[test]
    fn normalize_bitfields() {
        // DWARF 5: data_bit_offset 38 in an int unit → byte_offset 4.
        let m = bitfield(38, 4, 4);
        assert_eq!((m.bit_offset, m.byte_offset, m.bit_size), (38, 4, 32));
        // DWARF 4 little endian: location 4, DW_AT_bit_offset 27, size 5 →
        // bit 0 of the unit → bit_offset 32.
        let raw = RawMember {
            data_member_location: Some(4),
            dw_bit_offset: 27,
            dw_bit_size: 5,
            byte_size: 4,
            ..Default::default()
        };
        let m = MemberLayout::normalize(&raw, true, Align::Bytes(4), None);
        assert_eq!((m.bit_offset, m.byte_offset), (32, 4));
        // Big endian keeps DW_AT_bit_offset as is.
        let m = MemberLayout::normalize(&raw, false, Align::Bytes(4), None);
        assert_eq!((m.bit_offset, m.byte_offset), (59, 4));
        // Packed straddling unit: location 1, LE bit offset → 30 in the unit
        // at byte 1: the reference's byte offset lands on 8.
        let raw = RawMember {
            data_member_location: Some(1),
            dw_bit_offset: -2,
            dw_bit_size: 4,
            byte_size: 4,
            ..Default::default()
        };
        let m = MemberLayout::normalize(&raw, true, Align::Bytes(4), None);
        assert_eq!((m.bit_offset, m.byte_offset), (38, 8));
        // No location outside a union: static member.
        let raw = RawMember {
            byte_size: 4,
            ..Default::default()
        };
        assert!(MemberLayout::normalize(&raw, true, Align::Bytes(4), None).is_static);
        let raw = RawMember {
            byte_size: 4,
            in_union: true,
            ..Default::default()
        };
        assert!(!MemberLayout::normalize(&raw, true, Align::Bytes(4), None).is_static);
    }

    #[test]
    fn uncertain_only_past_the_register_params() {
        let mut l = Layouts::default();
        let pk = l.push(true, 5, &[member(0, 1, Align::Bytes(1)), member(1, 4, Align::Bytes(4))]);
        let plain = l.push(true, 8, &[member(0, 4, Align::Bytes(4)), member(4, 4, Align::Bytes(4))]);
        let mut p = Packed::new(&l);
        // f7(int ×6, struct pk) on x86-64 (N = 6): flagged.
        assert!(uncertain_parm_loc(7, 6, &mut p, |i| (i == 6).then_some(pk)));
        // The same with an ordinary struct: not flagged.
        assert!(!uncertain_parm_loc(7, 6, &mut p, |i| (i == 6).then_some(plain)));
        // The packed struct as first argument: not flagged.
        assert!(!uncertain_parm_loc(7, 6, &mut p, |i| (i == 0).then_some(pk)));
        // Fewer parameters than registers: never.
        assert!(!uncertain_parm_loc(2, 6, &mut p, |_| Some(pk)));
        // N = 0 (i386): every parameter is examined.
        assert!(uncertain_parm_loc(1, 0, &mut p, |_| Some(pk)));
    }
}
