//! `btfkit diff` and `btfkit::diff::compare`: identical, equivalent (re-ordered
//! and re-laid copies, built here), the Debian-embedded vmlinux BTF against
//! the reference's `kernel` output, and small hand-made pairs with one change.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use btfkit::btf::{Btf, Endian, Kind, LINKAGE_GLOBAL, LINKAGE_STATIC, StrOff, TypeId, write::to_bytes};
use btfkit::diff::{self, DiffKind, Report, Verdict};

fn lines(r: &Report) -> Vec<String> {
    r.differences.iter().map(|d| d.to_string()).collect()
}

/// A copy of `src` whose types are added in `order` (old ids) and whose string
/// section is laid out anew (a padding string first, then first use in the new order).
fn permuted(src: &Btf, order: &[u32]) -> Btf {
    let mut map = vec![0u32; src.type_count() as usize + 1];
    for (i, &old) in order.iter().enumerate() {
        map[old as usize] = i as u32 + 1;
    }
    let mut out = Btf::new(src.endian());
    out.add_str(b"a string nothing refers to, to shift every offset");
    for &old in order {
        let mut w = src.ty(TypeId::new(old)).words.to_vec();
        Btf::for_each_type_ref_mut(&mut w, |r| *r = map[*r as usize]);
        Btf::for_each_str_ref_mut(&mut w, |s| {
            let text = src.str_at(StrOff::new(*s)).expect("valid string offset").to_vec();
            *s = out.add_str(&text).get();
        });
        out.push_words(&w);
    }
    out
}

fn reversed(src: &Btf) -> Btf {
    let order: Vec<u32> = (1..=src.type_count()).rev().collect();
    permuted(src, &order)
}

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("diff-test-{name}"))
}

/// `btfkit diff ARGS`: exit code, stdout, stderr.
fn diff(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = common::btfkit()
        .arg("diff")
        .args(args)
        .output()
        .expect("running btfkit");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kernel() -> PathBuf {
    common::corpus_file("expected/kernel/vmlinux.kernel.btf")
}

// ---- whole files ----

#[test]
fn a_file_against_itself_is_identical_bytes() {
    crate::needs_corpus!();
    let path = kernel();
    let a = btfkit::elf::load_btf(&path, None).unwrap();
    let b = btfkit::elf::load_btf(&path, None).unwrap();
    let r = diff::compare(&a, &b);
    assert_eq!(r.verdict, Verdict::IdenticalBytes);
    assert!(r.differences.is_empty());
    let (code, out, _) = diff(&[path.as_os_str(), path.as_os_str()]);
    assert_eq!((code, out.as_str()), (0, "identical bytes\n"));
}

/// The same types and strings behind libbpf 1.8's 32-byte header are not
/// the same bytes as behind the 24-byte one: `equivalent`, naming the
/// headers, never `identical bytes`.
#[test]
fn a_longer_header_is_equivalent_not_identical_bytes() {
    let input = common::crate_dir().join("tests/fixtures/ints.gcc-O2.o");
    let (a, b) = (tmp("hdr24.btf"), tmp("hdr32.btf"));
    let r = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .args(["encode", "-q", "-o"])
        .arg(&a)
        .arg(&input)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let d = std::fs::read(&a).unwrap();
    let mut long = d[..24].to_vec();
    long[4..8].copy_from_slice(&32u32.to_le_bytes());
    long.extend([0; 8]);
    long.extend(&d[24..]);
    std::fs::write(&b, &long).unwrap();
    let (code, out, err) = diff(&[a.as_os_str(), b.as_os_str()]);
    assert_eq!(
        (code, out.as_str()),
        (0, "equivalent (a 24-byte header against a 32-byte one)\n"),
        "{err}"
    );
    let (code, out, _) = diff(&["--json".as_ref(), a.as_os_str(), b.as_os_str()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, v["result"].as_str()), (0, Some("equivalent")));
    assert_eq!(v["layout"], "a 24-byte header against a 32-byte one");
    let (code, out, _) = diff(&[b.as_os_str(), b.as_os_str()]);
    assert_eq!((code, out.as_str()), (0, "identical bytes\n"));
}

#[test]
fn reordered_vmlinux_with_relaid_strings_is_equivalent() {
    crate::needs_corpus!();
    let path = kernel();
    let a = btfkit::elf::load_btf(&path, None).unwrap();
    let b = reversed(&a);
    assert_ne!(to_bytes(&a), to_bytes(&b));
    assert_ne!(a.raw_strings(), b.raw_strings());
    let r = diff::compare(&a, &b);
    assert_eq!(r.verdict, Verdict::Equivalent, "{}", r.first(10));
    // Through the command line as well, from a file.
    let out = tmp("vmlinux-reversed.btf");
    btfkit::output::write_atomic(&out, &to_bytes(&b)).unwrap();
    let (code, stdout, _) = diff(&[path.as_os_str(), out.as_os_str()]);
    assert_eq!((code, stdout.as_str()), (0, "equivalent\n"));
}

#[test]
fn single_changes_deep_in_vmlinux_are_found_after_reordering() {
    crate::needs_corpus!();
    let a = btfkit::elf::load_btf(&kernel(), None).unwrap();
    let mut b = reversed(&a);
    let find = |b: &Btf, kind: Kind, name: &str| {
        b.own_ids()
            .find(|&id| b.ty(id).kind() == kind && b.name(b.ty(id).name_off()) == name)
            .unwrap()
    };
    // struct sk_buff's `len` becomes a signed int.
    let int = find(&b, Kind::Int, "int");
    let skb = find(&b, Kind::Struct, "sk_buff");
    let len = b
        .ty(skb)
        .triples()
        .position(|m| b.name(StrOff::new(m[0])) == "len")
        .unwrap();
    b.words_mut(skb)[3 + 3 * len + 1] = int.get();
    // tcp_sendmsg gets a prototype of its own (the one it has is shared with
    // other functions) whose third parameter is an int.
    let func = find(&b, Kind::Func, "tcp_sendmsg");
    let mut proto = b.ty(b.ty(func).type_id()).words.to_vec();
    proto[3 + 2 * 2 + 1] = int.get();
    let new_proto = b.push_words(&proto);
    b.words_mut(func)[2] = new_proto.get();
    // SOCK_RAW changes its value.
    let e = find(&b, Kind::Enum, "sock_type");
    let raw = b
        .ty(e)
        .pairs()
        .position(|v| b.name(StrOff::new(v[0])) == "SOCK_RAW")
        .unwrap();
    b.words_mut(e)[3 + 2 * raw + 1] = 33;
    let r = diff::compare(&a, &b);
    assert_eq!(r.verdict, Verdict::Different);
    assert_eq!(
        lines(&r),
        [
            "enum sock_type.SOCK_RAW: value 3 -> 33",
            "func tcp_sendmsg: param 3 size_t -> int",
            "struct sk_buff.len: type unsigned int -> int"
        ]
    );
}

#[test]
fn debian_embedded_against_the_reference_kernel_output() {
    crate::needs_corpus!();
    let kpath = kernel();
    let dpath = common::corpus_file("expected/kernel/vmlinux.debian-embedded.btf");
    let k = btfkit::elf::load_btf(&kpath, None).unwrap();
    let d = btfkit::elf::load_btf(&dpath, None).unwrap();
    let r = diff::compare(&k, &d);
    assert_eq!(r.verdict, Verdict::Different);
    let l = lines(&r);
    // Checked by hand with `btfkit dump` of both files: the reference's kernel
    // profile tags kfuncs (132 DECL_TAG 'bpf_kfunc', Debian's file has none),
    // Debian's encoder kept functions the reference dropped and vice versa,
    // and the per-CPU variable fixed_percpu_data is only in the reference's.
    for want in [
        "- decl_tag bpf_kfunc on func bpf_cpumask_create",
        "- decl_tag bpf_kfunc on func bpf_arena_alloc_pages",
        "+ func PageHuge: static bool (const struct page *)",
        "- func ZSTD_BtFindBestMatch_dictMatchState_4: static size_t (ZSTD_matchState_t *, const BYTE *, const BYTE *const, size_t *)",
        "- var fixed_percpu_data: global struct fixed_percpu_data",
        "- datasec .data..percpu.fixed_percpu_data: offset 0, size 48",
    ] {
        assert!(l.iter().any(|x| x == want), "missing `{want}`");
    }
    let tags = l.iter().filter(|x| x.contains("decl_tag bpf_kfunc")).count();
    assert_eq!(tags, 132);
    assert!(l.iter().filter(|x| x.contains("decl_tag")).all(|x| x.starts_with("- ")));
    // Every FUNC name one file has more often than the other, and nothing
    // else, is reported as a function added or removed.
    let count = |b: &Btf| {
        let mut m: HashMap<String, i64> = HashMap::new();
        for id in b.own_ids() {
            if b.ty(id).kind() == Kind::Func {
                *m.entry(b.name(b.ty(id).name_off()).into_owned()).or_default() += 1;
            }
        }
        m
    };
    let (ck, cd) = (count(&k), count(&d));
    let mut want_removed: Vec<&str> = ck
        .iter()
        .filter(|(n, c)| **c > cd.get(*n).copied().unwrap_or(0))
        .map(|(n, _)| n.as_str())
        .collect();
    let mut want_added: Vec<&str> = cd
        .iter()
        .filter(|(n, c)| **c > ck.get(*n).copied().unwrap_or(0))
        .map(|(n, _)| n.as_str())
        .collect();
    want_removed.sort();
    want_added.sort();
    let names = |sign: &str| {
        let mut v: Vec<&str> = r
            .differences
            .iter()
            .filter(|d| d.path.starts_with("func ") && d.to_string().starts_with(sign))
            .map(|d| &d.path[5..])
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("- "), want_removed);
    assert_eq!(names("+ "), want_added);
    assert_eq!(want_removed.len(), 418);
    assert_eq!(want_added.len(), 346);
    // No struct, union, enum or typedef differs between the two encoders.
    assert!(!l.iter().any(|x| {
        ["struct ", "union ", "enum ", "typedef "]
            .iter()
            .any(|p| x.starts_with(p))
    }));
    let s = r.summary();
    assert_eq!(s.get(&DiffKind::Datasec), Some(&1));
    // Removed: 418 functions, 132 kfunc tags, 1 variable; added: 346 functions.
    assert_eq!(s.get(&DiffKind::Removed), Some(&(418 + 132 + 1)));
    assert_eq!(s.get(&DiffKind::Added), Some(&346));
    assert_eq!(r.differences.len(), 418 + 132 + 1 + 346 + 1);
    // The command line agrees and exits 1.
    let (code, out, _) = diff(&[kpath.as_os_str(), dpath.as_os_str()]);
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), r.differences.len() + 1);
    assert_eq!(out.lines().last().unwrap(), r.summary_line());
}

// ---- small hand-made pairs ----

#[derive(Clone)]
struct V {
    len_signed: bool,
    param3_int: bool,
    param1_name: &'static str,
    func_linkage: u32,
    enum_b: i64,
    enum_c: bool,
    extra_struct: bool,
    drop_bar: bool,
    anon_b_unsigned: bool,
    len_bitfield: u32,
    next_offset: u32,
    var_long: bool,
    skb_size: u32,
    extra_var: bool,
}

impl Default for V {
    fn default() -> V {
        V {
            len_signed: false,
            param3_int: false,
            param1_name: "sk",
            func_linkage: LINKAGE_GLOBAL,
            enum_b: 2,
            enum_c: false,
            extra_struct: false,
            drop_bar: false,
            anon_b_unsigned: false,
            len_bitfield: 0,
            next_offset: 128,
            var_long: false,
            skb_size: 24,
            extra_var: false,
        }
    }
}

/// A small BTF; each field of `v` changes one thing.
fn sample(v: &V) -> Btf {
    let mut b = Btf::new(Endian::Little);
    let int = b.add_int(b"int", 4, 1);
    let uint = b.add_int(b"unsigned int", 4, 0);
    let long = b.add_int(b"long", 8, 1);
    let ulong = b.add_int(b"unsigned long", 8, 0);
    let size_t = b.add_typedef(b"size_t", ulong);
    let ch = b.add_int(b"char", 1, 2);
    let cch = b.add_ref(Kind::Const, ch);
    let pcch = b.add_ref(Kind::Ptr, cch);
    let anon = b.begin(Kind::Union, b"", 8, false);
    b.push_member(b"a", int, 0, 0);
    b.push_member(b"b", if v.anon_b_unsigned { ulong } else { long }, 0, 0);
    let skb = TypeId::new(b.type_count() + 2);
    let pskb = b.add_ref(Kind::Ptr, skb);
    let s = b.begin(Kind::Struct, b"sk_buff", v.skb_size, false);
    assert_eq!(s, skb);
    b.push_member(b"len", if v.len_signed { int } else { uint }, 0, v.len_bitfield);
    b.push_member(b"", anon, 64, 0);
    b.push_member(b"next", pskb, v.next_offset, 0);
    let sock = b.begin(Kind::Struct, b"sock", 4, false);
    b.push_member(b"x", int, 0, 0);
    let psock = b.add_ref(Kind::Ptr, sock);
    let proto = b.begin(Kind::FuncProto, b"", int.get(), false);
    b.push_param(v.param1_name.as_bytes(), psock);
    b.push_param(b"msg", pcch);
    b.push_param(b"size", if v.param3_int { int } else { size_t });
    b.add_func(b"tcp_sendmsg", proto, v.func_linkage);
    let e = b.begin(Kind::Enum, b"e", 4, false);
    let _ = e;
    b.push_enum_value(b"A", 1);
    b.push_enum_value(b"B", v.enum_b);
    if v.enum_c {
        b.push_enum_value(b"C", 4);
    }
    if v.extra_struct {
        b.begin(Kind::Struct, b"foo", 4, false);
        b.push_member(b"y", int, 0, 0);
    }
    if !v.drop_bar {
        let vp = b.begin(Kind::FuncProto, b"", 0, false);
        b.add_func(b"bar", vp, LINKAGE_STATIC);
    }
    let var = b.add_var(b"counter", if v.var_long { long } else { int }, LINKAGE_GLOBAL);
    let extra = v.extra_var.then(|| b.add_var(b"extra", int, LINKAGE_STATIC));
    b.begin(Kind::Datasec, b".data", 8, false);
    b.push_var_secinfo(var, 0, if v.var_long { 8 } else { 4 });
    if let Some(e) = extra {
        b.push_var_secinfo(e, 4, 4);
    }
    b
}

fn diff_of(v: V) -> Report {
    diff::compare(&sample(&V::default()), &sample(&v))
}

#[test]
fn unchanged_sample_is_identical_and_its_permutations_equivalent() {
    let a = sample(&V::default());
    assert_eq!(
        diff::compare(&a, &sample(&V::default())).verdict,
        Verdict::IdenticalBytes
    );
    assert_eq!(diff::compare(&a, &reversed(&a)).verdict, Verdict::Equivalent);
    // Another order: every odd id first, then every even one.
    let n = a.type_count();
    let order: Vec<u32> = (1..=n)
        .filter(|i| i % 2 == 1)
        .chain((1..=n).filter(|i| i % 2 == 0))
        .collect();
    assert_eq!(
        diff::compare(&reversed(&a), &permuted(&a, &order)).verdict,
        Verdict::Equivalent
    );
}

#[test]
fn changed_member_type() {
    let r = diff_of(V {
        len_signed: true,
        ..V::default()
    });
    assert_eq!(lines(&r), ["struct sk_buff.len: type unsigned int -> int"]);
    assert_eq!(r.summary().get(&DiffKind::MemberType), Some(&1));
}

#[test]
fn changed_member_in_an_anonymous_union() {
    let r = diff_of(V {
        anon_b_unsigned: true,
        ..V::default()
    });
    assert_eq!(
        lines(&r),
        ["struct sk_buff.(anon union @64).b: type long -> unsigned long"]
    );
}

#[test]
fn changed_bitfield_and_offset() {
    let r = diff_of(V {
        len_bitfield: 20,
        next_offset: 192,
        ..V::default()
    });
    assert_eq!(
        lines(&r),
        [
            "struct sk_buff.len: bitfield none -> 20",
            "struct sk_buff.next: offset 128 -> 192"
        ]
    );
}

#[test]
fn changed_struct_size() {
    let r = diff_of(V {
        skb_size: 32,
        ..V::default()
    });
    assert_eq!(lines(&r), ["struct sk_buff: size 24 -> 32"]);
    assert_eq!(r.summary().get(&DiffKind::Size), Some(&1));
}

#[test]
fn changed_parameter_type_name_and_linkage() {
    let r = diff_of(V {
        param3_int: true,
        ..V::default()
    });
    assert_eq!(lines(&r), ["func tcp_sendmsg: param 3 size_t -> int"]);
    assert_eq!(r.summary().get(&DiffKind::Param), Some(&1));
    let r = diff_of(V {
        param1_name: "s",
        ..V::default()
    });
    assert_eq!(lines(&r), ["func tcp_sendmsg: param 1 name sk -> s"]);
    let r = diff_of(V {
        func_linkage: LINKAGE_STATIC,
        ..V::default()
    });
    assert_eq!(lines(&r), ["func tcp_sendmsg: linkage global -> static"]);
}

#[test]
fn changed_and_added_enum_values() {
    let r = diff_of(V {
        enum_b: 3,
        enum_c: true,
        ..V::default()
    });
    assert_eq!(lines(&r), ["enum e.B: value 2 -> 3", "+ enum e.C: value 4"]);
    assert_eq!(r.summary().get(&DiffKind::EnumValue), Some(&2));
    // and the other way round
    let r = diff::compare(
        &sample(&V {
            enum_c: true,
            ..V::default()
        }),
        &sample(&V::default()),
    );
    assert_eq!(lines(&r), ["- enum e.C: value 4"]);
}

#[test]
fn added_and_removed_types() {
    let r = diff_of(V {
        extra_struct: true,
        drop_bar: true,
        ..V::default()
    });
    assert_eq!(
        lines(&r),
        ["- func bar: static void (void)", "+ struct foo: size 4, 1 members"]
    );
    assert_eq!(r.summary().get(&DiffKind::Added), Some(&1));
    assert_eq!(r.summary().get(&DiffKind::Removed), Some(&1));
    // The reversed copy of B gives the same answer.
    let b = sample(&V {
        extra_struct: true,
        drop_bar: true,
        ..V::default()
    });
    let r2 = diff::compare(&sample(&V::default()), &reversed(&b));
    assert_eq!(lines(&r2), lines(&r));
}

#[test]
fn changed_variable_and_its_section_entry() {
    let r = diff_of(V {
        var_long: true,
        ..V::default()
    });
    assert_eq!(
        lines(&r),
        ["datasec .data.counter: size 4 -> 8", "var counter: type int -> long"]
    );
}

#[test]
fn added_section_entry() {
    let r = diff_of(V {
        extra_var: true,
        ..V::default()
    });
    assert_eq!(
        lines(&r),
        ["+ datasec .data.extra: offset 4, size 4", "+ var extra: static int"]
    );
    assert_eq!(r.summary().get(&DiffKind::Datasec), Some(&1));
}

#[test]
fn several_changes_are_sorted_by_path_with_a_summary() {
    let r = diff_of(V {
        len_signed: true,
        param3_int: true,
        extra_struct: true,
        enum_b: 5,
        ..V::default()
    });
    assert_eq!(
        lines(&r),
        [
            "enum e.B: value 2 -> 5",
            "func tcp_sendmsg: param 3 size_t -> int",
            "+ struct foo: size 4, 1 members",
            "struct sk_buff.len: type unsigned int -> int",
        ]
    );
    assert_eq!(
        r.summary_line(),
        "4 differences: 1 added, 1 member_type, 1 enum_value, 1 param"
    );
    assert_eq!(
        r.first(2).to_string(),
        "4 differences: 1 added, 1 member_type, 1 enum_value, 1 param; first: enum e.B: value 2 -> 5; \
         func tcp_sendmsg: param 3 size_t -> int; ... 2 more"
    );
}

/// Two `struct dup`s and a `struct user` pointing at one of them.
fn dups(user_points_to_second: bool, second_first: bool) -> Btf {
    let mut b = Btf::new(Endian::Little);
    let int = b.add_int(b"int", 4, 1);
    let long = b.add_int(b"long", 8, 1);
    let mk = |b: &mut Btf, ty: TypeId, size: u32| {
        let d = b.begin(Kind::Struct, b"dup", size, false);
        b.push_member(b"v", ty, 0, 0);
        d
    };
    let (d1, d2) = if second_first {
        let d2 = mk(&mut b, long, 8);
        (mk(&mut b, int, 4), d2)
    } else {
        let d1 = mk(&mut b, int, 4);
        (d1, mk(&mut b, long, 8))
    };
    let p = b.add_ref(Kind::Ptr, if user_points_to_second { d2 } else { d1 });
    b.begin(Kind::Struct, b"user", 8, false);
    b.push_member(b"p", p, 0, 0);
    b
}

#[test]
fn same_named_types_are_matched_by_structure() {
    // Order of the duplicates does not matter.
    assert_eq!(
        diff::compare(&dups(false, false), &dups(false, true)).verdict,
        Verdict::Equivalent
    );
    // The C name of user.p stays `struct dup *`, but it now means the other one.
    let r = diff::compare(&dups(false, false), &dups(true, true));
    assert_eq!(
        lines(&r),
        ["struct user.p: type struct dup * refers to struct dup (size 4, 1 members) -> struct dup (size 8, 1 members)"]
    );
    assert_eq!(r.summary().get(&DiffKind::Retarget), Some(&1));
}

#[test]
fn forward_declaration_replaced_by_a_definition() {
    crate::needs_corpus!();
    let build = |defined: bool| {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let x = if defined {
            let x = b.begin(Kind::Struct, b"x", 4, false);
            b.push_member(b"i", int, 0, 0);
            x
        } else {
            b.add_fwd(b"x", false)
        };
        let p = b.add_ref(Kind::Ptr, x);
        b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"p", p, 0, 0);
        b
    };
    let r = diff::compare(&build(false), &build(true));
    assert_eq!(
        lines(&r),
        [
            "- fwd struct x",
            "struct s.p: type struct x * refers to fwd struct x -> struct x (size 4, 1 members)",
            "+ struct x: size 4, 1 members",
        ]
    );
}

#[test]
fn same_named_functions_are_paired_by_prototype() {
    let build = |types: &[&[u8]]| {
        let mut b = Btf::new(Endian::Little);
        for (i, t) in types.iter().enumerate() {
            let ty = b.add_int(t, 4 << (i % 2), 1);
            let p = b.begin(Kind::FuncProto, b"", 0, false);
            b.push_param(b"x", ty);
            b.add_func(b"helper", p, LINKAGE_STATIC);
        }
        b
    };
    let r = diff::compare(&build(&[b"int", b"long"]), &build(&[b"int", b"long"]));
    assert_eq!(r.verdict, Verdict::IdenticalBytes);
    // B lost the `int` one and has a `short` one: the `long` pair is equal.
    let r = diff::compare(&build(&[b"int", b"long"]), &build(&[b"short", b"long"]));
    assert_eq!(
        lines(&r),
        [
            "func helper: param 1 int -> short",
            "- int 'int': size 4, signed, 32 bits",
            "+ int 'short': size 4, signed, 32 bits"
        ]
    );
}

#[test]
fn changed_function_pointer_member_and_added_param() {
    let build = |extra: bool| {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let vp = b.add_ref(Kind::Ptr, TypeId::VOID);
        let p = b.begin(Kind::FuncProto, b"", int.get(), false);
        b.push_param(b"", vp);
        if extra {
            b.push_param(b"", int);
        }
        let fp = b.add_ref(Kind::Ptr, p);
        b.begin(Kind::Struct, b"ops", 8, false);
        b.push_member(b"open", fp, 0, 0);
        let q = b.begin(Kind::FuncProto, b"", int.get(), false);
        b.push_param(b"a", vp);
        if extra {
            b.push_param(b"n", int);
        }
        b.add_func(b"f", q, LINKAGE_GLOBAL);
        b
    };
    let r = diff::compare(&build(false), &build(true));
    assert_eq!(
        lines(&r),
        [
            "+ func f: param 2 int n",
            "struct ops.open: type int (*)(void *) -> int (*)(void *, int)"
        ]
    );
}

// ---- command line ----

fn write_pair(name: &str, a: &Btf, b: &Btf) -> (PathBuf, PathBuf) {
    let (pa, pb) = (tmp(&format!("{name}-a.btf")), tmp(&format!("{name}-b.btf")));
    btfkit::output::write_atomic(&pa, &to_bytes(a)).unwrap();
    btfkit::output::write_atomic(&pb, &to_bytes(b)).unwrap();
    (pa, pb)
}

#[test]
fn cli_text_and_json() {
    let (pa, pb) = write_pair(
        "json",
        &sample(&V::default()),
        &sample(&V {
            len_signed: true,
            drop_bar: true,
            ..V::default()
        }),
    );
    let (code, out, err) = diff(&[pa.as_os_str(), pb.as_os_str()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        out,
        "- func bar: static void (void)\nstruct sk_buff.len: type unsigned int -> int\n2 differences: 1 removed, 1 member_type\n"
    );
    let (code, out, _) = diff(&[pa.as_os_str(), pb.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"], "different");
    assert_eq!(v["a"], pa.display().to_string());
    assert_eq!(v["summary"]["member_type"], 1);
    assert_eq!(v["summary"]["removed"], 1);
    let d = &v["differences"][1];
    assert_eq!(d["kind"], "member_type");
    assert_eq!(d["change"], "changed");
    assert_eq!(d["path"], "struct sk_buff.len");
    assert_eq!(d["aspect"], "type");
    assert_eq!(d["old"], "unsigned int");
    assert_eq!(d["new"], "int");
    assert_eq!(d["text"], "struct sk_buff.len: type unsigned int -> int");
    assert_eq!(v["differences"][0]["change"], "removed");
    assert_eq!(v["differences"][0]["old"], "static void (void)");
    assert_eq!(v["types"]["a"], sample(&V::default()).own_type_count());
    // equivalent, in JSON
    let a = sample(&V::default());
    let (pa, pb) = write_pair("json-eq", &a, &reversed(&a));
    let (code, out, _) = diff(&[pa.as_os_str(), pb.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"], "equivalent");
    assert_eq!(v["differences"].as_array().unwrap().len(), 0);
}

#[test]
fn cli_errors_exit_2_with_one_line_naming_the_file() {
    let good = tmp("good.btf");
    btfkit::output::write_atomic(&good, &to_bytes(&sample(&V::default()))).unwrap();
    let missing = tmp("does-not-exist.btf");
    let (code, out, err) = diff(&[good.as_os_str(), missing.as_os_str()]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&*missing.to_string_lossy()), "{err}");
    let junk = tmp("junk.btf");
    btfkit::output::write_atomic(&junk, b"\x9f\xeb\x01\x00short").unwrap();
    let (code, _, err) = diff(&[junk.as_os_str(), good.as_os_str()]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&*junk.to_string_lossy()) && err.contains("invalid BTF"),
        "{err}"
    );
    let (code, _, _) = diff(&[
        good.as_os_str(),
        good.as_os_str(),
        "--base".as_ref(),
        good.as_os_str(),
        "--base-a".as_ref(),
        good.as_os_str(),
    ]);
    assert_eq!(code, 2);
}

#[test]
fn split_btf_against_a_shared_and_against_different_bases() {
    let base = std::sync::Arc::new(sample(&V::default()));
    let split = |base: &std::sync::Arc<Btf>, long: bool| {
        let mut b = Btf::new_split(base.clone());
        let int = b.add_int(
            if long { b"long".as_slice() } else { b"int" },
            if long { 8 } else { 4 },
            1,
        );
        let _ = int;
        let skb = TypeId::new(
            (1..=base.type_count())
                .find(|&i| base.name(base.ty(TypeId::new(i)).name_off()) == "sk_buff")
                .unwrap(),
        );
        let p = b.add_ref(Kind::Ptr, skb);
        let proto = b.begin(Kind::FuncProto, b"", 0, false);
        b.push_param(b"skb", p);
        b.add_func(b"mod_fn", proto, LINKAGE_GLOBAL);
        b
    };
    assert_eq!(
        diff::compare(&split(&base, false), &split(&base, false)).verdict,
        Verdict::IdenticalBytes
    );
    let r = diff::compare(&split(&base, false), &split(&base, true));
    assert_eq!(
        lines(&r),
        [
            "- int 'int': size 4, signed, 32 bits",
            "+ int 'long': size 8, signed, 64 bits"
        ]
    );
    // Same split types over bases whose sk_buff differs: the function's
    // parameter type keeps its C name, the difference is in the bases.
    let other = std::sync::Arc::new(sample(&V {
        len_signed: true,
        ..V::default()
    }));
    let r = diff::compare(&split(&base, false), &split(&other, false));
    assert_eq!(
        lines(&r),
        ["func mod_fn: param 1 struct sk_buff *: struct sk_buff differs between the two bases"]
    );
    // The command line with --base-a/--base-b.
    let (pba, pbb) = write_pair("split-bases", &base, &other);
    let (pa, pb) = (tmp("split-a.btf"), tmp("split-b.btf"));
    btfkit::output::write_atomic(&pa, &to_bytes(&split(&base, false))).unwrap();
    btfkit::output::write_atomic(&pb, &to_bytes(&split(&other, false))).unwrap();
    let (code, out, err) = diff(&[
        pa.as_os_str(),
        pb.as_os_str(),
        "--base-a".as_ref(),
        pba.as_os_str(),
        "--base-b".as_ref(),
        pbb.as_os_str(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        out.starts_with("func mod_fn: param 1 struct sk_buff *: struct sk_buff differs between the two bases\n"),
        "{out}"
    );
    let (code, out, _) = diff(&[pa.as_os_str(), pa.as_os_str(), "--base".as_ref(), pba.as_os_str()]);
    assert_eq!((code, out.as_str()), (0, "identical bytes\n"));
}

#[test]
fn typedef_of_an_anonymous_struct_enum_kinds_and_int_encodings() {
    let build = |changed: bool| {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let c = b.add_int(b"char", 1, if changed { 0 } else { 2 });
        let anon = b.begin(Kind::Struct, b"", 8, false);
        b.push_member(b"x", int, 0, 0);
        b.push_member(b"y", if changed { c } else { int }, 32, 0);
        b.add_typedef(b"pair_t", anon);
        if changed {
            b.begin(Kind::Enum64, b"big", 8, false);
            b.push_enum64_value(b"HUGE", 1 << 40);
        } else {
            b.begin(Kind::Enum, b"big", 4, false);
            b.push_enum_value(b"HUGE", 1);
        }
        b
    };
    let r = diff::compare(&build(false), &build(true));
    assert_eq!(
        lines(&r),
        [
            "enum big: kind enum -> enum64",
            "enum big: size 4 -> 8",
            "enum big.HUGE: value 1 -> 1099511627776",
            "int 'char': encoding char -> unsigned",
            "typedef pair_t.y: type int -> char",
        ]
    );
    let s = r.summary();
    assert_eq!(
        (s[&DiffKind::Kind], s[&DiffKind::Size], s[&DiffKind::EnumValue]),
        (1, 1, 1)
    );
    assert_eq!((s[&DiffKind::Encoding], s[&DiffKind::MemberType]), (1, 1));
}
