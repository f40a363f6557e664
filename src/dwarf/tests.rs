use super::units::unit_length_fault;
use super::*;
use crate::elf::debug::{DebugSections, SectionBytes};
use gimli::write::{self, AttributeValue as W, EndianVec, LineProgram, Sections, UnitEntryId};

#[test]
fn bucketed_reference_lookup_matches_binary_search() {
    let mut cu = Cu::new(0, 8, 0);
    let off = |o: u32| UnitOff::new(o);
    // gaps of 1..70 bytes, several entries per bucket and empty buckets
    let mut at = 11u32;
    for i in 0..500usize {
        cu.index.push((off(at).unwrap(), CoreId::at(i)));
        at += 1 + (i as u32 * 37) % 70;
    }
    cu.build_buckets();
    for probe in 0..at + 100 {
        let probe = off(probe).unwrap();
        assert_eq!(cu.core(Some(probe)), cu.core_searched(probe), "offset {probe:?}");
    }
    assert_eq!(cu.core(off(11)), CoreId::new(1));
    assert_eq!(cu.core(None), None);
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
    let leak = |v: &EndianVec<gimli::LittleEndian>| -> SectionBytes<'static> {
        SectionBytes::Borrowed(Box::leak(v.slice().to_vec().into_boxed_slice()))
    };
    let secs: &'static DebugSections<'static> = Box::leak(Box::new(DebugSections {
        info: leak(&sections.debug_info),
        abbrev: leak(&sections.debug_abbrev),
        str: leak(&sections.debug_str),
        ..Default::default()
    }));
    let d: &'static Dwarf<'static> = Box::leak(Box::new(dwarf(secs, RunTimeEndian::Little)));
    let headers = unit_headers(d).unwrap();
    let dec = Decoder {
        dwarf: d,
        opts: DecodeOpts {
            type_tag: true,
            decl_tag: true,
            regs: loc::RegParams::for_machine(0),
            addrx_plus_offset: false,
            param_locations: false,
            gnu_annotations: false,
        },
        endian: RunTimeEndian::Little,
        type_units: None,
        space: Default::default(),
        imports: None,
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
        .map(|s| (s.tag, String::from_utf8_lossy(nm(s.name.get())).into_owned()))
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
    let core = |i: usize| local_id(cu.core(cu.slots[i].ty));
    assert_eq!((core(5), core(4), core(3)), (5, 4, 1));
    // A's member refers to B (core 2), nested in A and numbered before it.
    assert_eq!(local_id(cu.core(cu.members_of(&cu.slots[2])[0].ty)), 2);
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
    assert_eq!(cu.core(cu.slots[1].ty), None);
    assert_eq!(cu.core(cu.slots[2].ty), CoreId::new(1));
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
    assert_eq!(outer.params.len(), 1);
    assert_eq!(nm(cu.fparams[outer.params][0].name), b"arg");
}
