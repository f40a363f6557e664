use std::path::Path;

use super::members::{bit_offset_of, plain_bit_offset};
use super::types::*;
use super::vars::valid_var_name;
use super::*;
use crate::dwarf::{CoreId, Enumerator, IdxRange, Slot, UnitOff};
use crate::elf::debug::DebugSections;
use crate::elf::functab::FuncTable;
use crate::encode::lang::DW_LANG_RUST;
use crate::funcs::StateId;

#[test]
fn plain_member_offsets_are_the_general_path_without_bitfields() {
    let big = [
        Some((1 << 29) - 1),
        Some(1 << 29),
        Some(u32::MAX as u64),
        Some(1 << 32),
        Some(u64::MAX),
    ];
    for loc in [None, Some(0), Some(1), Some(7)].into_iter().chain(big) {
        for little in [true, false] {
            let general = bit_offset_of(loc, Default::default(), || unreachable!(), little);
            assert_eq!(plain_bit_offset(loc), general, "{loc:?}");
        }
    }
}

fn elf(endian: btf::Endian) -> ElfInfo<'static> {
    ElfInfo::synthetic(endian, 62, true, DebugSections::default())
}

fn cu() -> Cu<'static> {
    let mut c = Cu::new(0, 8, 0);
    c.language = 0x1d;
    c.name = b"t.c";
    c
}

/// "No reference" in these tests' offsets ([`UnitOff::new`] makes it `None`).
const NONE: u32 = u32::MAX;

fn off(o: u32) -> Option<UnitOff> {
    UnitOff::new(o)
}

fn slot(tag: gimli::DwTag, uoff: u32, name: &'static [u8], ty: u32, size: u64) -> Slot<'static> {
    Slot {
        tag,
        die: crate::dwarf::DieOffset::new(uoff as u64),
        uoff: UnitOff::new(uoff).unwrap(),
        name: name.into(),
        spec: None,
        ty: off(ty),
        size,
        encoding: 0,
        flags: Default::default(),
        nelems: 1,
        kids: IdxRange::EMPTY,
        annots: IdxRange::EMPTY,
    }
}

fn add(cu: &mut Cu<'static>, s: Slot<'static>) -> u32 {
    let core = cu.place(s);
    cu.index.sort_unstable();
    core.get()
}

/// The encoding context of these tests' units, from `elf`.
fn ctx<'e>(elf: &'e ElfInfo<'static>, features: Features) -> Ctx<'e, 'static> {
    Ctx {
        reference: crate::encode::Reference::V1_31,
        features,
        elf,
        path: Path::new("t.o"),
        str_cache: None,
        collapse: false,
    }
}

fn run(cu: &Cu<'static>, endian: btf::Endian, features: Features) -> Result<CuOut<'static>, EncodeError> {
    let e = elf(endian);
    encode_cu(&ctx(&e, features), cu)
}

fn record(out: &CuOut<'_>, i: usize) -> Vec<u32> {
    let s = out.offs[i] as usize;
    let e = out.offs.get(i + 1).map(|&e| e as usize).unwrap_or(out.words.len());
    out.words[s..e].to_vec()
}

fn int(cu: &mut Cu<'static>, uoff: u32, name: &'static [u8], size: u64, enc: u8) -> u32 {
    let mut s = slot(gimli::DW_TAG_base_type, uoff, name, NONE, size);
    s.encoding = enc;
    add(cu, s)
}

#[test]
fn base_types_int_float_and_sanitized() {
    let mut c = cu();
    int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
    int(&mut c, 0x20, b"double", 8, ATE_FLOAT);
    int(&mut c, 0x30, b"()", 0, 7);
    int(&mut c, 0x40, b"_Bool", 1, ATE_BOOLEAN);
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    assert_eq!(out.int_core, Some(LocalTypeId::from_word(1)));
    assert_eq!(
        record(&out, 0),
        vec![1, make_info(Kind::Int, false, 0), 4, (btf::INT_SIGNED << 24) | 32]
    );
    // floats off (plain -J): an unsigned INT
    assert_eq!(record(&out, 1), vec![2, make_info(Kind::Int, false, 0), 8, 64]);
    assert_eq!(out.strs[2], b"__SANITIZED_FAKE_INT__");
    assert_eq!(record(&out, 2), vec![3, make_info(Kind::Int, false, 0), 4, 32]);
    assert_eq!(
        record(&out, 3),
        vec![4, make_info(Kind::Int, false, 0), 1, (btf::INT_BOOL << 24) | 8]
    );
    let mut f = Features::default();
    f.apply_list("float");
    let out = run(&c, btf::Endian::Little, f).unwrap();
    assert_eq!(record(&out, 1), vec![2, make_info(Kind::Float, false, 0), 8]);
}

#[test]
fn complex_float_is_fatal_only_with_floats() {
    let mut c = cu();
    int(&mut c, 0x10, b"complex double", 16, ATE_COMPLEX_FLOAT);
    assert!(run(&c, btf::Endian::Little, Features::default()).is_ok());
    let mut f = Features::default();
    f.apply_list("default");
    let e = run(&c, btf::Endian::Little, f).err().unwrap().to_string();
    assert!(e.contains("DW_TAG_base_type") && e.contains("complex"), "{e}");
}

fn bitfield_struct(endian: btf::Endian) -> Vec<u32> {
    let mut c = cu();
    let u = int(&mut c, 0x10, b"unsigned int", 4, 8);
    let _ = u;
    // struct s { unsigned a:3; unsigned b:5; unsigned c; } with DWARF 4 bit offsets
    let mut s = slot(gimli::DW_TAG_structure_type, 0x20, b"s", NONE, 8);
    s.kids = IdxRange::new(0, 3);
    let mut m = |name: &'static [u8], loc, bit_size: Option<u64>, bit_offset: Option<i64>| {
        let bits = crate::dwarf::MemberBits {
            bit_size,
            byte_size: bit_size.map(|_| 4),
            bit_offset,
            ..Default::default()
        };
        c.new_member(name, off(0x10), bits, Some(loc))
    };
    let members = vec![
        m(b"a", 0, Some(3), Some(29)),
        m(b"b", 0, Some(5), Some(24)),
        m(b"c", 4, None, None),
    ];
    c.members = members;
    add(&mut c, s);
    let out = run(&c, endian, Features::default()).unwrap();
    record(&out, 1)
}

/// A struct (or union) of members at the given byte offsets, the last
/// one a 3-bit bitfield if `bitfield`.
fn offsets_struct(tag: gimli::DwTag, locs: &[u64], bitfield: bool) -> Result<CuOut<'static>, EncodeError> {
    let mut c = cu();
    int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
    let mut s = slot(tag, 0x20, b"s", NONE, 1 << 26);
    s.kids = IdxRange::new(0, locs.len());
    let names: [&'static [u8]; 4] = [b"a", b"b", b"c", b"d"];
    for (i, &loc) in locs.iter().enumerate() {
        let mut bits = crate::dwarf::MemberBits::default();
        if bitfield && i + 1 == locs.len() {
            bits.data_bit_offset = Some(loc * 8);
            bits.bit_size = Some(3);
        }
        let m = c.new_member(names[i], off(0x10), bits, Some(loc));
        c.members.push(m);
    }
    add(&mut c, s);
    run(&c, btf::Endian::Little, Features::default())
}

/// Rust CUs: members in offset order, whatever order the DWARF lists them in.
#[test]
fn rust_members_are_placed_in_offset_order() {
    let mut c = cu();
    c.language = DW_LANG_RUST;
    int(&mut c, 0x10, b"i32", 4, ATE_SIGNED);
    let mut s = slot(gimli::DW_TAG_structure_type, 0x20, b"S", NONE, 12);
    s.kids = IdxRange::new(0, 3);
    for (name, loc) in [(&b"b"[..], 4), (b"c", 8), (b"a", 0)] {
        let m = c.new_member(name, off(0x10), Default::default(), Some(loc));
        c.members.push(m);
    }
    add(&mut c, s);
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    let rec = record(&out, 1);
    assert_eq!(rec[1], make_info(Kind::Struct, false, 3));
    // (offset, type) in record order; names interned as placed: a, b, c
    let placed: Vec<(u32, u32, u32)> = rec[3..].chunks(3).map(|m| (m[0], m[1], m[2])).collect();
    assert_eq!(placed, [(3, 1, 0), (4, 1, 32), (5, 1, 64)]);
}

#[test]
fn member_offsets_btf_cannot_hold_are_refused() {
    let s = gimli::DW_TAG_structure_type;
    // 0x300000 bytes = 0x1800000 bits: fits 32 bits, not 24
    let ok = offsets_struct(s, &[0, 0x30_0000], false).unwrap();
    assert_eq!(
        &record(&ok, 1)[1..],
        &[make_info(Kind::Struct, false, 2), 1 << 26, 3, 1, 0, 4, 1, 0x180_0000]
    );
    let ok = offsets_struct(s, &[0, 4], true).unwrap();
    assert_eq!(
        &record(&ok, 1)[1..],
        &[make_info(Kind::Struct, true, 2), 1 << 26, 3, 1, 0, 4, 1, (3 << 24) | 32]
    );
    let e = offsets_struct(s, &[0, 0x30_0000, 8], true).err().unwrap().to_string();
    assert!(e.contains("`b` lies 3145728 bytes") && e.contains("24-bit"), "{e}");
    let e = offsets_struct(s, &[0, 1 << 29], false).err().unwrap().to_string();
    assert!(e.contains("`b` lies 536870912 bytes") && e.contains("32-bit"), "{e}");
    // offsets past 4 GiB are kept beside the member, and refused as they are
    for far in [u32::MAX as u64, 1 << 32, u64::MAX / 8] {
        let e = offsets_struct(s, &[0, far], false).err().unwrap().to_string();
        assert!(
            e.contains(&format!("`b` lies {far} bytes")) && e.contains("DIE 0x20"),
            "{e}"
        );
    }
    let e = offsets_struct(gimli::DW_TAG_union_type, &[0, 0, 4], false)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("`c` of a union at bit offset 32"), "{e}");
}

#[test]
fn old_style_bitfields_follow_byte_order() {
    let le = bitfield_struct(btf::Endian::Little);
    assert_eq!(le[1], make_info(Kind::Struct, true, 3));
    // LE: 0*8 + (4*8 - 29 - 3) = 0; b: 32 - 24 - 5 = 3
    assert_eq!(&le[3..], &[3, 1, 3 << 24, 4, 1, (5 << 24) | 3, 5, 1, 32]);
    let be = bitfield_struct(btf::Endian::Big);
    // BE: byte_off*8 + bit_offset
    assert_eq!(&be[3..], &[3, 1, (3 << 24) | 29, 4, 1, (5 << 24) | 24, 5, 1, 32]);
}

/// A CU with a struct at 0x20 whose one member has type `member_ty`,
/// plus the slots `more` adds.
fn loop_cu(member_ty: u32, more: impl FnOnce(&mut Cu<'static>)) -> Result<CuOut<'static>, EncodeError> {
    let mut c = cu();
    int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
    more(&mut c);
    let mut st = slot(gimli::DW_TAG_structure_type, 0x20, b"s", NONE, 8);
    st.kids = IdxRange::new(0, 1);
    c.members = vec![c.new_member(b"m", off(member_ty), Default::default(), Some(0))];
    add(&mut c, st);
    run(&c, btf::Endian::Little, Features::default())
}

fn loop_msg(r: Result<CuOut<'static>, EncodeError>) -> String {
    match r {
        Err(e) if matches!(e.problem(), Some(crate::encode::Problem::TypeLoop { .. })) => e.to_string(),
        Err(e) => panic!("not a damaged-input error: {e}"),
        Ok(_) => panic!("no loop found"),
    }
}

#[test]
fn type_loops_are_refused_and_loops_through_structs_are_not() {
    // typedef A (0x30) -> typedef B (0x40) -> A.
    let m = loop_msg(loop_cu(0x10, |c| {
        add(c, slot(gimli::DW_TAG_typedef, 0x30, b"A", 0x40, 0));
        add(c, slot(gimli::DW_TAG_typedef, 0x40, b"B", 0x30, 0));
    }));
    assert!(
        m.contains("DW_TAG_typedef refers back to itself through 2 type(s)"),
        "{m}"
    );
    assert!(m.contains("at DIE 0x30"), "{m}");
    // struct s { const s m; }
    let m = loop_msg(loop_cu(0x30, |c| {
        add(c, slot(gimli::DW_TAG_const_type, 0x30, b"", 0x20, 0));
    }));
    assert!(m.contains("contains itself by value through 2 type(s)"), "{m}");
    // struct s { s *m; }: legal, and so is a pointer to a typedef of s.
    loop_cu(0x30, |c| {
        add(c, slot(gimli::DW_TAG_pointer_type, 0x30, b"", 0x40, 8));
        add(c, slot(gimli::DW_TAG_typedef, 0x40, b"T", 0x20, 0));
    })
    .unwrap();
}

#[test]
fn a_chain_of_200000_typedefs_costs_no_stack() {
    // Each typedef refers to the next (upward ids), so the search runs
    // the whole chain.
    let mut c = cu();
    int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
    const N: u32 = 200_000;
    for i in 0..N {
        let to = if i + 1 == N { 0x10 } else { 0x20 + i + 1 };
        // `add` re-sorts the index each time: pushed directly, sorted once.
        c.slots.push(slot(gimli::DW_TAG_typedef, 0x20 + i, b"t", to, 0));
        c.index
            .push((UnitOff::new(0x20 + i).unwrap(), CoreId::at(c.slots.len() - 1)));
    }
    c.index.sort_unstable();
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    assert_eq!(out.n_types, N as usize + 1);
}

fn enum_cu(size: u64, values: Vec<(&'static [u8], u64)>, signed_base: bool) -> Cu<'static> {
    let mut c = cu();
    int(&mut c, 0x10, b"long int", 8, if signed_base { ATE_SIGNED } else { 7 });
    let mut e = slot(gimli::DW_TAG_enumeration_type, 0x20, b"e", 0x10, size);
    e.kids = IdxRange::new(0, values.len());
    c.enumerators = values
        .into_iter()
        .map(|(name, value)| Enumerator { name, value })
        .collect();
    add(&mut c, e);
    c
}

#[test]
fn enum_kflag_and_enum64() {
    let c = enum_cu(4, vec![(b"A", u64::MAX), (b"B", 5)], true);
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    assert_eq!(
        record(&out, 1),
        vec![2, make_info(Kind::Enum, true, 2), 4, 3, 0xffff_ffff, 4, 5]
    );
    let c = enum_cu(8, vec![(b"A", u64::MAX - 1)], true);
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    assert_eq!(
        record(&out, 1),
        vec![2, make_info(Kind::Enum64, true, 1), 8, 3, 0xffff_fffe, 0xffff_ffff]
    );
    // enum64 off: an 8-byte ENUM with low 32 bits, kflag 0
    let mut f = Features::default();
    f.enum64 = false;
    let out = run(&c, btf::Endian::Little, f).unwrap();
    assert_eq!(
        record(&out, 1),
        vec![2, make_info(Kind::Enum, false, 1), 8, 3, 0xffff_fffe]
    );
    // a 4-byte enum value beyond UINT_MAX is rejected
    let c = enum_cu(4, vec![(b"A", 1 << 40)], false);
    assert!(run(&c, btf::Endian::Little, Features::default()).is_err());
}

#[test]
fn unsupported_tags_name_the_tag() {
    let mut c = cu();
    int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
    add(&mut c, slot(gimli::DW_TAG_atomic_type, 0x47, b"", 0x10, 0));
    let e = run(&c, btf::Endian::Little, Features::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("DW_TAG_atomic_type") && e.contains("DIE 0x47"), "{e}");
}

#[test]
fn nested_unspecified_type_emits_nothing_but_keeps_its_core_id() {
    let mut c = cu();
    add(
        &mut c,
        slot(gimli::DW_TAG_unspecified_type, 0x10, b"decltype(nullptr)", NONE, 0),
    );
    int(&mut c, 0x20, b"int", 4, ATE_SIGNED);
    add(&mut c, slot(gimli::DW_TAG_pointer_type, 0x30, b"", 0x20, 8));
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    assert_eq!(out.n_types, 2);
    assert_eq!(out.nslots, 4);
    // The PTR still names core id 2, which the merge turns into off+2.
    assert_eq!(record(&out, 1), vec![0, make_info(Kind::Ptr, false, 0), 2]);
}

#[test]
fn empty_decl_tag_value_drops_the_rest_of_the_cu() {
    let mut c = cu();
    let mut s = slot(gimli::DW_TAG_structure_type, 0x10, b"s", NONE, 0);
    s.annots = IdxRange::new(0, 2);
    c.annots = vec![
        crate::dwarf::Annot {
            value: b"ok",
            component: -1,
        },
        crate::dwarf::Annot {
            value: b"",
            component: -1,
        },
    ];
    add(&mut c, s);
    let mut t = slot(gimli::DW_TAG_typedef, 0x20, b"t", 0x10, 0);
    t.annots = IdxRange::new(0, 1);
    add(&mut c, t);
    let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
    // STRUCT, TYPEDEF, DECL_TAG "ok"; the empty one stops everything after it.
    assert_eq!(out.offs.len(), 3);
    assert_eq!(
        record(&out, 2),
        vec![3, make_info(Kind::DeclTag, false, 0), 1, u32::MAX]
    );
}

fn func(uoff: u32, name: &'static [u8], params: usize, nparams: usize) -> crate::dwarf::Func<'static> {
    crate::dwarf::Func {
        uoff: UnitOff::new(uoff).unwrap(),
        die: crate::dwarf::DieOffset::new(uoff as u64),
        name,
        ty: None,
        has_type: false,
        origin: None,
        spec: None,
        declaration: false,
        varargs: false,
        low_pc: None,
        nocall: false,
        inlined: false,
        params: IdxRange::new(params, nparams),
        annots: IdxRange::EMPTY,
    }
}

fn fparam(uoff: u32, name: &'static [u8], origin: u32) -> crate::dwarf::FParam<'static> {
    crate::dwarf::FParam {
        uoff: UnitOff::new(uoff).unwrap(),
        name,
        ty: None,
        has_type: origin == NONE,
        origin: off(origin),
        facts: 0,
        loc: None,
        const_value: false,
    }
}

#[test]
fn which_functions_are_recorded_and_their_param_names_interned() {
    let mut c = cu();
    c.fparams = vec![
        fparam(0x11, b"abs_a", NONE), // abstract f(abs_a)
        fparam(0x21, b"", 0x11),      // concrete f: name from its origin
        fparam(0x31, b"", NONE),      // g: unnamed parameter
        fparam(0x41, b"x", NONE),     // not_in_elf(x)
        fparam(0x51, b"d", NONE),     // a declaration
    ];
    let mut concrete = func(0x20, b"", 1, 1);
    concrete.origin = off(0x10);
    let mut decl = func(0x50, b"f", 4, 1);
    decl.declaration = true;
    c.funcs = vec![
        func(0x10, b"f", 0, 1),
        concrete,
        func(0x30, b"g", 2, 1),
        func(0x40, b"not_in_elf", 3, 1),
        decl,
    ];
    let mut e = elf(btf::Endian::Little);
    e.funcs = FuncTable::build(vec![(b"f", b"f", 0x10), (b"g", b"g", 0x20)]);
    let ctx = ctx(&e, Features::default());
    let out = encode_cu(&ctx, &c).unwrap();
    // Both instances of `f` (entry 0 of the table) are saved.
    assert_eq!(out.funcs.len(), 2);
    assert_eq!(
        (out.funcs.entry(StateId::new(0)), out.funcs.entry(StateId::new(1))),
        (0, 0)
    );
    // Both intern the parameter name once; nothing else is interned.
    assert_eq!(out.strs, vec![&b"abs_a"[..]]);
    let p = crate::funcs::Param {
        name: LocalStr::new(1),
        ty: LocalTypeId::from_word(0),
    };
    assert_eq!(
        (out.funcs.params(StateId::new(0)), out.funcs.params(StateId::new(1))),
        (&[p][..], &[p][..])
    );
}

/// Facts of a concrete parameter reach its abstract origin before any
/// flags are computed; a struct parameter (through a typedef) exempts a
/// function from the register rule; no location means optimized.
#[test]
fn recording_time_flags() {
    use crate::dwarf::loc::fact::{HAS_LOC, UNEXPECTED_REG as F_UNEXPECTED};
    use crate::funcs::flags::{OPTIMIZED_PARMS, UNEXPECTED_REG};
    let mut c = cu();
    int(&mut c, 0x5, b"int", 4, 5);
    add(&mut c, slot(gimli::DW_TAG_structure_type, 0x6, b"S", NONE, 8));
    add(&mut c, slot(gimli::DW_TAG_typedef, 0x7, b"T", 0x6, 0));
    let typed = |uoff, name, ty, facts| crate::dwarf::FParam {
        uoff: UnitOff::new(uoff).unwrap(),
        name,
        ty: off(ty),
        has_type: true,
        origin: None,
        facts,
        loc: None,
        const_value: false,
    };
    let mut concrete_p = fparam(0x21, b"", 0x11);
    concrete_p.facts = HAS_LOC | F_UNEXPECTED;
    c.fparams = vec![
        typed(0x11, b"a", 0x5, HAS_LOC),
        concrete_p,
        typed(0x31, b"s", 0x7, HAS_LOC | F_UNEXPECTED),
        typed(0x41, b"x", 0x5, 0),
    ];
    let mut concrete = func(0x20, b"", 1, 1);
    concrete.origin = off(0x10);
    c.funcs = vec![
        func(0x10, b"f", 0, 1),
        concrete,
        func(0x30, b"g", 2, 1),
        func(0x40, b"h", 3, 1),
    ];
    let mut e = elf(btf::Endian::Little);
    e.funcs = FuncTable::build(vec![(b"f", b"f", 0x10), (b"g", b"g", 0x20), (b"h", b"h", 0x30)]);
    let ctx = ctx(&e, Features::default());
    let out = encode_cu(&ctx, &c).unwrap();
    let flags: Vec<u8> = (0..out.funcs.len() as u32)
        .map(|s| out.funcs.flags(StateId::new(s)))
        .collect();
    assert_eq!(flags, [UNEXPECTED_REG, UNEXPECTED_REG, 0, OPTIMIZED_PARMS]);
}

#[test]
fn variable_names() {
    assert!(valid_var_name(b"per_cpu.x_1"));
    assert!(valid_var_name(b"_a"));
    assert!(!valid_var_name(b"1a"));
    assert!(!valid_var_name(b"_vptr$Shape"));
    assert!(!valid_var_name(&[b'a'; 129]));
}

/// Packed-struct inference's layouts are built for the struct asked about
/// and what it holds by value (a struct member, a union through an array),
/// each once, and for nothing else of the unit.
#[test]
fn layouts_are_built_for_what_a_struct_holds_by_value_only() {
    use crate::funcs::packed::Align;
    let mut c = cu();
    int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
    int(&mut c, 0x11, b"char", 1, ATE_SIGNED);
    let mut member =
        |name: &'static [u8], ty: u32, loc: u64| c.new_member(name, off(ty), Default::default(), Some(loc));
    // Inner { int a; }, Outer { char c; Inner in; U arr[2]; }, Unrelated { int x; }, U { int i; }
    c.members = vec![
        member(b"a", 0x10, 0),
        member(b"c", 0x11, 0),
        member(b"in", 0x20, 4),
        member(b"arr", 0x60, 8),
        member(b"x", 0x10, 0),
        member(b"i", 0x10, 0),
    ];
    let agg = |tag, uoff, name, size, first, n| {
        let mut s = slot(tag, uoff, name, NONE, size);
        s.kids = IdxRange::new(first, n);
        s
    };
    let inner = add(&mut c, agg(gimli::DW_TAG_structure_type, 0x20, b"Inner", 4, 0, 1));
    let outer = add(&mut c, agg(gimli::DW_TAG_structure_type, 0x30, b"Outer", 16, 1, 3));
    let unrelated = add(&mut c, agg(gimli::DW_TAG_structure_type, 0x40, b"Unrelated", 4, 4, 1));
    add(&mut c, agg(gimli::DW_TAG_union_type, 0x50, b"U", 4, 5, 1));
    let mut arr = slot(gimli::DW_TAG_array_type, 0x60, b"", 0x50, 0);
    arr.nelems = 2;
    arr.kids = IdxRange::new(0, 1);
    add(&mut c, arr);
    c.build_buckets();
    let e = elf(btf::Endian::Little);
    let ctx = ctx(&e, Features::default());
    let enc = Enc { ctx: &ctx, cu: &c };
    let mut lazy = super::funcflags::LazyLayouts::default();
    let core = |id: u32| CoreId::new(id).unwrap();
    assert_eq!(lazy.of(&enc, core(outer)), 0);
    let l = &lazy.layouts;
    // Outer, then Inner and U as Outer's members found them; not Unrelated
    assert_eq!(l.aggs.len(), 3, "{:?}", l.aggs);
    assert_eq!((l.aggs[0].size, l.aggs[1].size, l.aggs[2].is_struct), (16, 4, false));
    let outer_members = l.members(0);
    let got: Vec<(u32, u64, Align, Option<u32>)> = outer_members
        .iter()
        .map(|m| (m.byte_offset, m.byte_size, m.align, m.strct))
        .collect();
    assert_eq!(
        got,
        [
            (0, 1, Align::Bytes(1), None),
            (4, 4, Align::Of(1), Some(1)),
            (8, 8, Align::Of(2), None),
        ]
    );
    assert_eq!(l.members(1)[0].align, Align::Bytes(4));
    // Asked again, nothing is built again; asked about another, only it.
    assert_eq!(lazy.of(&enc, core(inner)), 1);
    assert_eq!(lazy.layouts.aggs.len(), 3);
    assert_eq!(lazy.of(&enc, core(unrelated)), 3);
    assert_eq!(lazy.layouts.aggs.len(), 4);
}
