//! Whole-pass tests of dedup on small BTFs.

use std::sync::Arc;

use super::*;
use crate::btf::{Endian, Kind, TypeId, dump};

fn run(b: &Btf) -> Btf {
    dedup(b, &Options::default()).expect("dedup")
}

fn run_by(b: &Btf, rules: Rules) -> Btf {
    dedup(
        b,
        &Options {
            rules,
            ..Options::default()
        },
    )
    .expect("dedup")
}

const BOTH_RULES: [Rules; 2] = [Rules::Libbpf374f7807, Rules::Libbpf1_8];

fn lines(b: &Btf) -> Vec<String> {
    dump::raw_string(b)
        .lines()
        .filter(|l| l.starts_with('['))
        .map(String::from)
        .collect()
}

/// Every line of the raw dump, members included.
fn full_lines(b: &Btf) -> Vec<String> {
    dump::raw_string(b).lines().map(String::from).collect()
}

fn int(b: &mut Btf) -> TypeId {
    b.add_int(b"int", 4, crate::btf::INT_SIGNED)
}

#[test]
fn identical_structs_collapse_and_strings_stay() {
    let mut b = Btf::new(Endian::Little);
    b.add_str(b"unused");
    for _ in 0..2 {
        let i = int(&mut b);
        b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"a", i, 0, 0);
        b.push_member(b"b", i, 32, 0);
    }
    let out = run(&b);
    assert_eq!(out.own_type_count(), 2);
    assert_eq!(
        out.raw_strings(),
        b.raw_strings(),
        "keep mode leaves strings byte-identical"
    );
    assert_eq!(lines(&out)[1], "[2] STRUCT 's' size=8 vlen=2");
}

/// A FWD's size/type word past the last id, which the reader lets
/// through (it is no reference in BTF) but compaction renumbers: an
/// error naming the type, whether or not ids were checked by the reader.
/// (Found by replaying the dedup fuzz corpus through `btfkit dedup`,
/// which trusts the reader: it panicked in compaction.)
#[test]
fn fwd_word_past_the_last_id_is_an_error() {
    let mut b = Btf::new(Endian::Little);
    int(&mut b);
    let f = b.add_fwd(b"foo", false);
    b.words_mut(f)[2] = 655_360;
    for ids_checked in [false, true] {
        let o = Options {
            ids_checked,
            ..Options::default()
        };
        let e = dedup(&b, &o).expect_err("refused");
        assert!(
            matches!(e, DedupError::Invalid { id, .. } if id == TypeId::new(2)),
            "{e}"
        );
    }
}

/// The same types appended to a Btf whose offsets are deferred (as the
/// encoder hands them over), strings interned in the same order.
fn deferred_copy(b: &Btf) -> Btf {
    let mut d = Btf::new(Endian::Little);
    for s in b.raw_strings().split(|&c| c == 0).skip(1) {
        d.add_str(s);
    }
    d.defer_offsets();
    for id in 1..=b.type_count() {
        d.push_words(b.ty(TypeId::new(id)).words);
    }
    d
}

#[test]
fn deferred_records_are_laid_out_by_one_walk() {
    let mut b = Btf::new(Endian::Little);
    for _ in 0..2 {
        let i = int(&mut b);
        b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"a", i, 0, 0);
        b.add_ref(Kind::Ptr, TypeId::new(2));
    }
    // 66 003 words in one 64-id block: the general packing takes over
    let i = int(&mut b);
    b.begin(Kind::Struct, b"big", 4, false);
    for _ in 0..22_000 {
        b.push_member(b"m", i, 0, 0);
    }
    b.add_ref(Kind::Ptr, i);
    let whole = crate::btf::write::to_bytes(&run(&b));
    let owned = dedup_owned(deferred_copy(&b), &Options::default()).expect("dedup of deferred records");
    assert_eq!(crate::btf::write::to_bytes(&owned), whole);
    // a reference past the last type is refused, not followed
    let mut bad = deferred_copy(&b);
    bad.push_words(&[0, crate::btf::make_info(Kind::Ptr, false, 0), 999]);
    let e = dedup_owned(bad, &Options::default()).expect_err("refused");
    assert!(matches!(e, DedupError::Invalid { .. }), "{e}");
    // the lowest malformed id is the one reported: a bad reference
    // before a record that runs past the end
    let mut two = deferred_copy(&b);
    let first_bad = two.push_words(&[0, crate::btf::make_info(Kind::Ptr, false, 0), 999]);
    two.push_words(&[0, crate::btf::make_info(Kind::Struct, false, 5), 4]);
    match dedup_owned(two, &Options::default()) {
        Err(DedupError::Invalid { id, .. }) => assert_eq!(id, first_bad),
        other => panic!("{:?}", other.map(|b| b.type_count())),
    }
}

#[test]
fn deferred_records_are_packed_in_parallel_stretches() {
    // over three stretches of 65,536 types, blocks straddling their
    // starts, and a VAR in each
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b);
    for n in 0..200_000u32 {
        match n % 7 {
            0 => {
                b.begin(Kind::Struct, b"s", 4, false);
                b.push_member(b"a", i, 0, 0);
            }
            1 if n % 65_536 < 7 => {
                b.add_var(b"v", i, 1);
            }
            _ => {
                b.add_ref(
                    if n % 2 == 0 { Kind::Ptr } else { Kind::Const },
                    TypeId::new(b.type_count()),
                );
            }
        }
    }
    let d = deferred_copy(&b);
    let (words, marks, ..) = deferred_copy(&b).into_parts_with_marks();
    assert!(marks.len() >= 2, "{} marks", marks.len());
    let end = b.type_count() + 1;
    let packed = pack_in_stretches(&words, TypeId::new(end), &marks).expect("packed in stretches");
    let (walked, walked_state) = layout_walk(&words, TypeId::new(end), true).expect("walked");
    assert!((0..end).all(|id| packed.nodes.get(TypeId::new(id)) == walked.get(TypeId::new(id))));
    assert!((0..end).all(|id| packed.state.get(TypeId::new(id)) == walked_state.get(TypeId::new(id))));
    let whole = crate::btf::write::to_bytes(&run(&b));
    let owned = dedup_owned(d, &Options::default()).expect("dedup of deferred records");
    assert_eq!(crate::btf::write::to_bytes(&owned), whole);
}

#[test]
fn lone_fwd_resolves_to_unique_struct_before_reference_pass() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b);
    let s = b.begin(Kind::Struct, b"foo", 4, false);
    b.push_member(b"x", i, 0, 0);
    b.add_ref(Kind::Ptr, s);
    let f = b.add_fwd(b"foo", false);
    b.add_ref(Kind::Ptr, f);
    let out = run(&b);
    assert_eq!(
        lines(&out),
        [
            "[1] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED",
            "[2] STRUCT 'foo' size=4 vlen=1",
            "[3] PTR '(anon)' type_id=2"
        ]
    );
}

#[test]
fn fwd_name_shared_by_struct_and_union_stays() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b);
    b.begin(Kind::Struct, b"n", 4, false);
    b.push_member(b"x", i, 0, 0);
    b.begin(Kind::Union, b"n", 4, false);
    b.push_member(b"x", i, 0, 0);
    b.add_fwd(b"n", true);
    assert_eq!(run(&b).own_type_count(), 4);
}

#[test]
fn self_referential_structs_close_their_cycle() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b); // 1
    b.begin(Kind::Struct, b"list", 16, false); // 2
    b.push_member(b"next", TypeId::new(3), 0, 0);
    b.push_member(b"val", i, 64, 0);
    b.add_ref(Kind::Ptr, TypeId::new(2)); // 3
    let i2 = int(&mut b); // 4
    b.add_ref(Kind::Ptr, TypeId::new(6)); // 5
    b.begin(Kind::Struct, b"list", 16, false); // 6
    b.push_member(b"next", TypeId::new(5), 0, 0);
    b.push_member(b"val", i2, 64, 0);
    let out = run(&b);
    assert_eq!(out.own_type_count(), 3);
    assert_eq!(lines(&out)[2], "[3] PTR '(anon)' type_id=2");
}

#[test]
fn candidate_side_fwd_is_resolved_by_merge() {
    // E4: the earlier 'holder' sees 'node' only as a FWD and survives, completed
    let mut b = Btf::new(Endian::Little);
    let f = b.add_fwd(b"node", false); // 1
    let p = b.add_ref(Kind::Ptr, f); // 2
    b.begin(Kind::Struct, b"holder", 8, false); // 3
    b.push_member(b"n", p, 0, 0);
    let i = int(&mut b); // 4
    let n = b.begin(Kind::Struct, b"node", 4, false); // 5
    b.push_member(b"v", i, 0, 0);
    let p2 = b.add_ref(Kind::Ptr, n); // 6
    b.begin(Kind::Struct, b"holder", 8, false); // 7
    b.push_member(b"n", p2, 0, 0);
    let out = run(&b);
    assert_eq!(
        lines(&out),
        [
            "[1] PTR '(anon)' type_id=4",
            "[2] STRUCT 'holder' size=8 vlen=1",
            "[3] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED",
            "[4] STRUCT 'node' size=4 vlen=1"
        ]
    );
}

#[test]
fn func_linkage_and_param_names_are_identity() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b);
    for (param, linkage) in [(&b"x"[..], 1), (b"x", 1), (b"y", 1), (b"x", 0)] {
        let p = b.begin(Kind::FuncProto, b"", i.get(), false);
        b.push_param(param, i);
        b.add_func(b"f", p, linkage);
    }
    // protos: (x) three times, merged, and (y); funcs: global f -> (x) twice,
    // merged; global f -> (y); static f -> (x)
    assert_eq!(run(&b).own_type_count(), 1 + 2 + 3);
}

#[test]
fn enum_fwd_takes_a_full_enum_and_full_enum_repoints_fwd() {
    let mut b = Btf::new(Endian::Little);
    b.begin(Kind::Enum, b"e", 4, false); // 1: fwd
    let full = b.begin(Kind::Enum, b"e", 4, false); // 2
    b.push_enum_value(b"A", 0);
    b.add_typedef(b"t", TypeId::new(1)); // 3 -> fwd, re-pointed to 2
    b.begin(Kind::Enum, b"e", 8, false); // 4: fwd of another size, takes 2
    let out = run(&b);
    assert_eq!(out.own_type_count(), 2);
    assert_eq!(lines(&out)[1], format!("[2] TYPEDEF 't' type_id={}", full.get() - 1));
}

#[test]
fn out_of_range_id_is_an_error_not_a_panic() {
    let mut b = Btf::new(Endian::Little);
    int(&mut b);
    b.add_ref(Kind::Ptr, TypeId::new(99));
    let e = dedup(&b, &Options::default()).unwrap_err();
    assert!(
        matches!(e, DedupError::Invalid { id, .. } if id == TypeId::new(2)),
        "{e}"
    );
}

#[test]
fn recursive_typedef_is_eloop() {
    let mut b = Btf::new(Endian::Little);
    b.add_typedef(b"t", TypeId::new(1));
    let e = dedup(&b, &Options::default()).unwrap_err();
    assert_eq!(e.errno(), -40);
}

/// libbpf 1.8 dedups typedefs in the struct pass, where a cycle through
/// one is a graph like a struct's (Go has them): two copies become one.
#[test]
fn recursive_typedefs_dedup_under_libbpf_1_8() {
    let mut b = Btf::new(Endian::Little);
    for _ in 0..2 {
        let t = b.add_typedef(b"t", TypeId::new(b.type_count() + 2));
        b.add_ref(Kind::Ptr, t);
    }
    assert_eq!(dedup(&b, &Options::default()).unwrap_err().errno(), -40);
    assert_eq!(
        lines(&run_by(&b, Rules::Libbpf1_8)),
        ["[1] TYPEDEF 't' type_id=2", "[2] PTR '(anon)' type_id=1"]
    );
}

/// Under libbpf 1.8 a split BTF's typedefs are filed under another key
/// than prep files the base's: they never map onto the base's, and what
/// refers to them stays in the split part too (every module's BTF keeps
/// its own `u8`, `size_t`, ...). Structs still map onto the base's.
#[test]
fn split_typedefs_stay_split_under_libbpf_1_8() {
    let mut base = Btf::new(Endian::Little);
    let i = int(&mut base);
    let t = base.add_typedef(b"u32", i);
    base.begin(Kind::Struct, b"s", 4, false);
    base.push_member(b"x", t, 0, 0);
    let base = Arc::new(base);
    let mut s = Btf::new_split(base.clone());
    let i2 = int(&mut s); // 4
    let t2 = s.add_typedef(b"u32", i2); // 5
    s.add_ref(Kind::Ptr, t2); // 6
    s.begin(Kind::Struct, b"s", 4, false); // 7
    s.push_member(b"x", t2, 0, 0);
    s.add_ref(Kind::Ptr, TypeId::new(7)); // 8
    assert_eq!(
        lines(&run_by(&s, Rules::Libbpf374f7807)),
        ["[4] PTR '(anon)' type_id=2", "[5] PTR '(anon)' type_id=3"]
    );
    let want = [
        "[4] TYPEDEF 'u32' type_id=1",
        "[5] PTR '(anon)' type_id=4",
        "[6] PTR '(anon)' type_id=3",
    ];
    assert_eq!(lines(&run_by(&s, Rules::Libbpf1_8)), want);
    let with = Options {
        rules: Rules::Libbpf1_8,
        base_index: Some(Arc::new(BaseIndex::new(&base).unwrap())),
        ..Default::default()
    };
    assert_eq!(lines(&dedup(&s, &with).unwrap()), want);
}

/// A CU whose struct has two copies of `const int *` (the compiler did not
/// merge them): libbpf 374f7807 accepts a second candidate only if it is an
/// identical array, struct or pointer to the same id, so the struct stays
/// twice; libbpf 1.8 compares the copies structurally and merges it.
#[test]
fn duplicated_reference_chains_within_a_cu_pass_under_libbpf_1_8() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b); // 1
    let c = b.add_ref(Kind::Const, i); // 2
    let p = b.add_ref(Kind::Ptr, c); // 3
    b.begin(Kind::Struct, b"s", 16, false); // 4
    b.push_member(b"a", p, 0, 0);
    b.push_member(b"b", p, 64, 0);
    let i2 = int(&mut b); // 5
    let c1 = b.add_ref(Kind::Const, i2); // 6
    let p1 = b.add_ref(Kind::Ptr, c1); // 7
    let c2 = b.add_ref(Kind::Const, i2); // 8
    let p2 = b.add_ref(Kind::Ptr, c2); // 9
    b.begin(Kind::Struct, b"s", 16, false); // 10
    b.push_member(b"a", p1, 0, 0);
    b.push_member(b"b", p2, 64, 0);
    let structs = |o: &Btf| lines(o).iter().filter(|l| l.contains("STRUCT")).count();
    assert_eq!(structs(&run_by(&b, Rules::Libbpf374f7807)), 2);
    assert_eq!(structs(&run_by(&b, Rules::Libbpf1_8)), 1);
}

/// libbpf 1.8's identity check compares an array's element count and size
/// but its first operand's element type with itself: two arrays of
/// different element types met for one canonical array count as the same.
#[test]
fn libbpf_1_8_identity_of_arrays_ignores_the_element_type() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b); // 1
    let a = b.add_array(i, i, 4); // 2
    b.begin(Kind::Struct, b"s", 32, false); // 3
    b.push_member(b"a", a, 0, 0);
    b.push_member(b"b", a, 128, 0);
    let i2 = int(&mut b); // 4
    let ch = b.add_int(b"char", 1, crate::btf::INT_SIGNED); // 5
    let a1 = b.add_array(i2, i2, 4); // 6
    let a2 = b.add_array(ch, i2, 4); // 7
    b.begin(Kind::Struct, b"s", 32, false); // 8
    b.push_member(b"a", a1, 0, 0);
    b.push_member(b"b", a2, 128, 0);
    let structs = |o: &Btf| lines(o).iter().filter(|l| l.contains("STRUCT")).count();
    assert_eq!(structs(&run_by(&b, Rules::Libbpf374f7807)), 2);
    assert_eq!(structs(&run_by(&b, Rules::Libbpf1_8)), 1);
}

#[test]
fn equivalence_reaching_a_var_is_einval() {
    let mut b = Btf::new(Endian::Little);
    let i = int(&mut b);
    for _ in 0..2 {
        let v = b.add_var(b"v", i, 0);
        b.begin(Kind::Struct, b"s", 4, false);
        b.push_member(b"m", v, 0, 0);
    }
    let e = dedup(&b, &Options::default()).unwrap_err();
    assert_eq!(e.errno(), -22);
}

#[test]
fn structs_embedding_each_other_stop_instead_of_overflowing() {
    let mut b = Btf::new(Endian::Little);
    // canonical side: x { w }, w { x }, k { x a; x b }
    b.begin(Kind::Struct, b"x", 4, false); // 1
    b.push_member(b"w", TypeId::new(2), 0, 0);
    b.begin(Kind::Struct, b"w", 4, false); // 2
    b.push_member(b"x", TypeId::new(1), 0, 0);
    b.begin(Kind::Struct, b"k", 8, false); // 3
    b.push_member(b"a", TypeId::new(1), 0, 0);
    b.push_member(b"b", TypeId::new(1), 32, 0);
    // candidate: k { x1 a; x2 b } with x1 != x2, each in its own cycle
    b.begin(Kind::Struct, b"k", 8, false); // 4
    b.push_member(b"a", TypeId::new(5), 0, 0);
    b.push_member(b"b", TypeId::new(6), 32, 0);
    b.begin(Kind::Struct, b"x", 4, false); // 5
    b.push_member(b"w", TypeId::new(7), 0, 0);
    b.begin(Kind::Struct, b"x", 4, false); // 6
    b.push_member(b"w", TypeId::new(8), 0, 0);
    b.begin(Kind::Struct, b"w", 4, false); // 7
    b.push_member(b"x", TypeId::new(5), 0, 0);
    b.begin(Kind::Struct, b"w", 4, false); // 8
    b.push_member(b"x", TypeId::new(6), 0, 0);
    let e = dedup(&b, &Options::default()).unwrap_err();
    assert!(matches!(e, DedupError::TooDeep { .. }), "{e}");
}

#[test]
fn string_pass_keeps_referenced_strings_in_first_reference_order() {
    let mut b = Btf::new(Endian::Little);
    b.add_str(b"unused");
    b.add_str(b"zzz");
    let i = int(&mut b);
    b.begin(Kind::Struct, b"s", 4, false);
    b.push_member(b"zzz", i, 0, 0);
    let parsed = crate::btf::read::parse(&crate::btf::write::to_bytes(&b)).unwrap();
    let out = dedup(
        &parsed,
        &Options {
            strings: StringMode::Dedup,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(out.raw_strings(), b"\0int\0s\0zzz\0");
    assert_eq!(lines(&out)[1], "[2] STRUCT 's' size=4 vlen=1");
}

#[test]
fn split_types_map_onto_base_and_base_stays() {
    let mut base = Btf::new(Endian::Little);
    let i = int(&mut base);
    base.add_ref(Kind::Ptr, i);
    let base = Arc::new(base);
    let mut s = Btf::new_split(base.clone());
    let i2 = int(&mut s); // 3 -> base 1
    let p = s.add_ref(Kind::Ptr, i2); // 4 -> base 2
    s.add_typedef(b"pint", p); // 5 survives as [3]
    let out = run(&s);
    assert_eq!(out.start_id(), 3);
    assert_eq!(lines(&out), ["[3] TYPEDEF 'pint' type_id=2"]);
}

#[test]
fn a_prebuilt_base_index_gives_the_same_result_and_only_for_its_base() {
    // base: int, int *, struct s { int *p; }, fwd s2
    let mut base = Btf::new(Endian::Little);
    let i = int(&mut base);
    let p = base.add_ref(Kind::Ptr, i);
    base.begin(Kind::Struct, b"s", 8, false);
    base.push_member(b"p", p, 0, 0);
    base.add_fwd(b"s2", false);
    let base = Arc::new(base);
    // split: the same three, struct s2 { int x; }, typedef ps
    let mut s = Btf::new_split(base.clone());
    let i2 = int(&mut s);
    let p2 = s.add_ref(Kind::Ptr, i2);
    s.begin(Kind::Struct, b"s", 8, false);
    s.push_member(b"p", p2, 0, 0);
    s.begin(Kind::Struct, b"s2", 4, false);
    s.push_member(b"x", i2, 0, 0);
    s.add_typedef(b"ps", p2);
    let plain = dedup(&s, &Options::default()).unwrap();
    let index = Arc::new(BaseIndex::new(&base).unwrap());
    let with = Options {
        base_index: Some(index.clone()),
        ..Default::default()
    };
    let indexed = dedup(&s, &with).unwrap();
    assert_eq!(lines(&plain), lines(&indexed));
    assert_eq!(
        crate::btf::write::to_bytes(&plain),
        crate::btf::write::to_bytes(&indexed)
    );
    let owned = dedup_owned(s.clone(), &with).unwrap();
    assert_eq!(crate::btf::write::to_bytes(&plain), crate::btf::write::to_bytes(&owned));
    // an index of another base is not used
    let other = Arc::new(BaseIndex::new(&Arc::new(Btf::new(Endian::Little))).unwrap());
    assert!(!other.serves(s.base()) && index.serves(s.base()));
}

/// A xorshift generator: `rnd(n)` is below `n`.
fn xorshift(mut seed: u64) -> impl FnMut(u32) -> u32 {
    move |n: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % u64::from(n)) as u32
    }
}

/// Appends `cus` random CUs sharing type names, with reference chains,
/// arrays, prototypes and FWDs (each CU refers to its own types only).
fn random_cus(b: &mut Btf, rnd: &mut impl FnMut(u32) -> u32, cus: u32) {
    for _ in 0..cus {
        let base = b.type_count() + 1;
        let t = |o: u32| TypeId::new(base + o);
        let name = |k: &str, n: u32| format!("{k}{n}").into_bytes();
        let i = int(b);
        b.add_fwd(&name("s", rnd(3)), false);
        b.begin(Kind::Struct, &name("s", rnd(3)), 16, false);
        b.push_member(b"a", i, 0, 0);
        b.push_member(b"b", t(4), 64, 0);
        b.push_member(b"c", t(5), 96, 0);
        b.begin(Kind::Struct, &name("s", rnd(3)), 16, false);
        b.push_member(b"a", t(6), 0, 0);
        b.push_member(b"b", t(7), 64, 0);
        let pick = |r: u32, xs: &[u32]| t(xs[r as usize % xs.len()]);
        b.add_ref(Kind::Ptr, pick(rnd(3), &[1, 2, 3]));
        b.add_typedef(&name("t", rnd(2)), pick(rnd(3), &[0, 4, 6]));
        b.add_ref(Kind::Const, pick(rnd(3), &[1, 2, 3]));
        b.add_array(pick(rnd(2), &[0, 4]), i, 1 + rnd(2));
        b.begin(Kind::FuncProto, b"", pick(rnd(2), &[0, 4]).get(), false);
        b.push_param(b"", t(5));
        b.push_param(b"", t(6));
        b.add_ref(Kind::Ptr, t(8));
        b.add_ref(Kind::Ptr, t(4));
        b.add_ref(Kind::Volatile, pick(rnd(3), &[9, 10, 7]));
    }
}

/// Random BTFs of several CUs sharing type names, with reference chains,
/// arrays, prototypes and FWDs: the reference pass gives the same result
/// with its own index as through libbpf's candidate table.
#[test]
fn reference_index_agrees_with_the_candidate_table() {
    let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
    for round in 0..400 {
        let mut b = Btf::new(Endian::Little);
        let cus = 1 + rnd(7);
        random_cus(&mut b, &mut rnd, cus);
        let rules = BOTH_RULES[round % 2];
        let with_index = run_by(&b, rules);
        let with_table = dedup_through_table(
            &b,
            &Options {
                rules,
                ..Options::default()
            },
        )
        .expect("dedup");
        assert_eq!(lines(&with_index), lines(&with_table));
        assert_eq!(with_index.raw_words(), with_table.raw_words());
    }
}

/// A batch of random split BTFs over one base, deduplicated one after the
/// other through the same [`BaseIndex`] (so each starts from the workspace
/// the one before gave back: its records cut back, its table's insertions
/// undone), gives what each gives on its own. One split has a struct of
/// 70 K words, which the packed offsets of 64-id blocks cannot hold.
#[test]
fn modules_in_turn_over_one_base_index_each_give_their_own_result() {
    let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut base = Btf::new(Endian::Little);
    random_cus(&mut base, &mut rnd, 40);
    let base = Arc::new(base);
    let index = Arc::new(BaseIndex::new(&base).unwrap());
    for round in 0..120 {
        let rules = BOTH_RULES[round % 2];
        let with = Options {
            base_index: Some(index.clone()),
            rules,
            ..Default::default()
        };
        let mut s = Btf::new_split(base.clone());
        let cus = rnd(12);
        random_cus(&mut s, &mut rnd, cus);
        // types of the split that refer to the base's
        let p = s.add_ref(Kind::Ptr, TypeId::new(1 + rnd(base.type_count())));
        s.add_typedef(b"t0", p);
        if round == 17 {
            let i = int(&mut s);
            s.begin(Kind::Struct, b"huge", 4, false);
            for m in 0..23_500u32 {
                s.push_member(format!("m{m}").as_bytes(), i, 0, 0);
            }
        }
        let alone = crate::btf::write::to_bytes(&run_by(&s, rules));
        let indexed = crate::btf::write::to_bytes(&dedup(&s, &with).unwrap());
        assert!(alone == indexed, "round {round}: dedup with the index differs");
        let owned = crate::btf::write::to_bytes(&dedup_owned(s, &with).unwrap());
        assert!(alone == owned, "round {round}: owned dedup with the index differs");
    }
}

/// A base FWD that a walk matched against a struct of the split is
/// re-pointed to that struct (libbpf's hypothetical-map merge), and a
/// split type that refers to the FWD then refers to the struct: the one
/// kind of base link that is not the id itself, which the final links
/// must still follow, with the base index as without it.
#[test]
fn a_base_fwd_resolved_by_a_split_struct_is_followed() {
    // base: [1] int, [2] FWD s, [3] PTR -> 2, [4] struct a { p: 3 }
    let mut base = Btf::new(Endian::Little);
    int(&mut base);
    let f = base.add_fwd(b"s", false);
    let p = base.add_ref(Kind::Ptr, f);
    base.begin(Kind::Struct, b"a", 8, false);
    base.push_member(b"p", p, 0, 0);
    let base = Arc::new(base);
    // split: [5] int, [6] struct s { x: int }, [7] PTR -> 6,
    // [8] struct a { p: 7 }, [9] PTR -> base FWD 2, [10] typedef ps -> 9,
    // [11] struct c { m: base FWD 2 }
    let mut s = Btf::new_split(base.clone());
    let i2 = int(&mut s);
    s.begin(Kind::Struct, b"s", 4, false);
    s.push_member(b"x", i2, 0, 0);
    let p2 = s.add_ref(Kind::Ptr, TypeId::new(6));
    s.begin(Kind::Struct, b"a", 8, false);
    s.push_member(b"p", p2, 0, 0);
    let pf = s.add_ref(Kind::Ptr, f);
    s.add_typedef(b"ps", pf);
    s.begin(Kind::Struct, b"c", 4, false);
    s.push_member(b"m", f, 0, 0);
    // struct a stays (its walk met the base FWD on the canonical side),
    // the PTR to the base FWD is the PTR to struct s, and struct c's
    // member is struct s
    let want = [
        "[5] STRUCT 's' size=4 vlen=1",
        "\t'x' type_id=1 bits_offset=0",
        "[6] PTR '(anon)' type_id=5",
        "[7] STRUCT 'a' size=8 vlen=1",
        "\t'p' type_id=6 bits_offset=0",
        "[8] TYPEDEF 'ps' type_id=6",
        "[9] STRUCT 'c' size=4 vlen=1",
        "\t'm' type_id=5 bits_offset=0",
    ];
    let alone = run(&s);
    assert_eq!(full_lines(&alone), want);
    let index = Arc::new(BaseIndex::new(&base).unwrap());
    let with = Options {
        base_index: Some(index),
        ..Default::default()
    };
    assert_eq!(full_lines(&dedup(&s, &with).unwrap()), want);
    assert_eq!(full_lines(&dedup_owned(s, &with).unwrap()), want);
}
