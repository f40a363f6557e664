use super::*;
use crate::btf::{Endian, INT_SIGNED};

fn new() -> Btf {
    Btf::new(Endian::native())
}

fn body(btf: &Btf) -> String {
    let out = String::from_utf8(to_c(btf).unwrap()).unwrap();
    out.strip_prefix(std::str::from_utf8(HEADER).unwrap())
        .and_then(|s| s.strip_suffix(std::str::from_utf8(FOOTER).unwrap()))
        .expect("header/footer")
        .to_string()
}

/// struct list { struct node *head; }; struct node { struct node *next; struct list owner; };
fn pointer_cycle() -> Btf {
    let mut b = new();
    let int = b.add_int(b"int", 4, INT_SIGNED);
    let list = b.begin(Kind::Struct, b"list", 8, false);
    b.push_member(b"head", TypeId::new(4), 0, 0);
    let node = b.begin(Kind::Struct, b"node", 16, false);
    b.push_member(b"next", TypeId::new(4), 0, 0);
    b.push_member(b"owner", list, 64, 0);
    let p = b.add_ref(Kind::Ptr, node);
    assert_eq!((int.0, p.0), (1, 4));
    b
}

#[test]
fn pointer_cycle_gets_a_forward_declaration() {
    assert_eq!(
        body(&pointer_cycle()),
        "struct node;\n\nstruct list {\n\tstruct node *head;\n};\n\n\
         struct node {\n\tstruct node *next;\n\tstruct list owner;\n};\n\n"
    );
}

#[test]
fn roots_pull_in_only_what_they_need() {
    let mut b = pointer_cycle();
    b.begin(Kind::Struct, b"unrelated", 4, false);
    b.push_member(b"x", TypeId::new(1), 0, 0);
    // node needs list by value, list needs a declaration of node.
    let out = String::from_utf8(to_c_roots(&b, &[TypeId::new(3)]).unwrap()).unwrap();
    let body = "struct node;\n\nstruct list {\n\tstruct node *head;\n};\n\nstruct node {\n";
    assert!(out.contains(body), "{out}");
    assert!(!out.contains("unrelated"), "{out}");
    assert_eq!(ids_named(&b, "struct node").unwrap(), vec![TypeId::new(3)]);
    assert_eq!(
        ids_named(&b, "union node"),
        Err(CDumpError::NoSuchName {
            name: "union node".into(),
            near: vec!["node".into()]
        })
    );
}

/// By-value containment loop: no C declaration order exists.
#[test]
fn by_value_cycle_is_an_error() {
    let mut b = new();
    b.begin(Kind::Struct, b"a", 4, false);
    b.push_member(b"b", TypeId::new(2), 0, 0);
    b.begin(Kind::Struct, b"b", 4, false);
    b.push_member(b"a", TypeId::new(1), 0, 0);
    assert_eq!(to_c(&b), Err(CDumpError::Cycle { id: 1 }));
}

#[test]
fn modifier_loop_is_an_error_not_a_crash() {
    let mut b = new();
    b.add_ref(Kind::Const, TypeId::new(2));
    b.add_ref(Kind::Volatile, TypeId::new(1));
    b.add_typedef(b"t", TypeId::new(1));
    assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));
}

/// Thousands of nested anonymous structs, typedefs or pointers: an
/// error, not a stack overflow (test threads have small stacks).
#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    const N: u32 = 20_000;
    let mut b = new();
    b.add_int(b"int", 4, INT_SIGNED);
    for i in 0..N {
        b.begin(Kind::Struct, if i == 0 { b"outer" } else { b"" }, 4, false);
        b.push_member(b"m", TypeId::new(i + 3), 0, 0);
    }
    b.begin(Kind::Struct, b"", 4, false);
    b.push_member(b"x", TypeId::new(1), 0, 0);
    assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));

    // A long typedef chain is fine when each link is written before the
    // next (ids ascending), too deep when the first needs all the others.
    let mut b = new();
    b.add_int(b"int", 4, INT_SIGNED);
    for i in 0..N {
        b.add_typedef(format!("t{i}").as_bytes(), TypeId::new(i + 1));
    }
    assert!(to_c(&b).is_ok());
    let mut b = new();
    for i in 0..N {
        b.add_typedef(format!("t{i}").as_bytes(), TypeId::new(i + 2));
    }
    b.add_int(b"int", 4, INT_SIGNED);
    assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));

    let mut b = new();
    b.add_int(b"int", 4, INT_SIGNED);
    for i in 0..N {
        b.add_ref(Kind::Ptr, TypeId::new(i + 1));
    }
    b.begin(Kind::Struct, b"s", 8, false);
    b.push_member(b"p", TypeId::new(N + 1), 0, 0);
    assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));
}

#[test]
fn dangling_reference_is_an_error() {
    let mut b = new();
    b.add_ref(Kind::Ptr, TypeId::new(7));
    assert_eq!(to_c(&b), Err(CDumpError::BadRef { id: 1, target: 7 }));
}

/// struct s { int kind; union { int i; struct { short lo; short hi; } parts; }; long tail; };
fn anon_nested() -> Btf {
    let mut b = new();
    let int = b.add_int(b"int", 4, INT_SIGNED);
    let short = b.add_int(b"short", 2, INT_SIGNED);
    let long = b.add_int(b"long", 8, INT_SIGNED);
    b.begin(Kind::Struct, b"s", 16, false);
    b.push_member(b"kind", int, 0, 0);
    b.push_member(b"", TypeId::new(5), 32, 0);
    b.push_member(b"tail", long, 64, 0);
    b.begin(Kind::Union, b"", 4, false);
    b.push_member(b"i", int, 0, 0);
    b.push_member(b"parts", TypeId::new(6), 0, 0);
    b.begin(Kind::Struct, b"", 4, false);
    b.push_member(b"lo", short, 0, 0);
    b.push_member(b"hi", short, 16, 0);
    b
}

#[test]
fn anonymous_unions_and_structs_are_written_inline() {
    assert_eq!(
        body(&anon_nested()),
        "struct s {\n\tint kind;\n\tunion {\n\t\tint i;\n\t\tstruct {\n\t\t\tshort lo;\n\t\t\tshort hi;\n\
         \t\t} parts;\n\t};\n\tlong tail;\n};\n\n"
    );
}

/// Bitfields with a hole between them, a byte member after a gap, and
/// tail padding.
fn bitfields() -> Btf {
    let mut b = new();
    let uint = b.add_int(b"unsigned int", 4, 0);
    let uchar = b.add_int(b"unsigned char", 1, 0);
    b.begin(Kind::Struct, b"flags", 8, false);
    b.push_member(b"a", uint, 0, 3);
    b.push_member(b"b", uint, 3, 5);
    b.push_member(b"c", uint, 16, 4);
    b.push_member(b"d", uchar, 32, 0);
    b
}

#[test]
fn bitfields_and_padding() {
    assert_eq!(
        body(&bitfields()),
        "struct flags {\n\tunsigned int a: 3;\n\tunsigned int b: 5;\n\tshort: 8;\n\tunsigned int c: 4;\n\
         \tint: 0;\n\tunsigned char d;\n};\n\n"
    );
}

/// struct p { char c; int i; } with i at byte 1; struct outer embeds it at byte 1.
fn packed() -> Btf {
    let mut b = new();
    let ch = b.add_int(b"char", 1, INT_SIGNED);
    let int = b.add_int(b"int", 4, INT_SIGNED);
    let p = b.begin(Kind::Struct, b"p", 5, false);
    b.push_member(b"c", ch, 0, 0);
    b.push_member(b"i", int, 8, 0);
    b.begin(Kind::Struct, b"outer", 6, false);
    b.push_member(b"x", ch, 0, 0);
    b.push_member(b"inner", p, 8, 0);
    b
}

#[test]
fn packed_is_detected_from_offsets() {
    assert_eq!(
        body(&packed()),
        "struct p {\n\tchar c;\n\tint i;\n} __attribute__((packed));\n\n\
         struct outer {\n\tchar x;\n\tstruct p inner;\n};\n\n"
    );
}

/// Clashing names, a top-level anonymous enum, signed enum64, function
/// pointers (no args, varargs, arrays of them), qualifiers, type tags.
fn assorted() -> Btf {
    let mut b = new();
    let int = b.add_int(b"int", 4, INT_SIGNED); // 1
    let ch = b.add_int(b"char", 1, INT_SIGNED); // 2
    b.begin(Kind::Struct, b"dup", 4, false); // 3
    b.push_member(b"a", int, 0, 0);
    b.begin(Kind::Struct, b"dup", 8, false); // 4
    b.push_member(b"a", int, 0, 0);
    b.push_member(b"b", int, 32, 0);
    b.add_typedef(b"T", int); // 5
    b.begin(Kind::Enum, b"", 4, false); // 6: nobody refers to it
    b.push_enum_value(b"T", 1);
    b.push_enum_value(b"NEG", -1);
    b.begin(Kind::Enum64, b"big", 8, true); // 7
    b.push_enum64_value(b"SMALL", -5i64 as u64);
    b.push_enum64_value(b"HUGE", 1 << 40);
    let cc = b.add_ref(Kind::Const, ch); // 8
    let pcc = b.add_ref(Kind::Ptr, cc); // 9
    let fmt = b.begin(Kind::FuncProto, b"", int.0, false); // 10: int (const char *, ...)
    b.push_param(b"fmt", pcc);
    b.push_param(b"", TypeId::new(0));
    let noargs = b.begin(Kind::FuncProto, b"", 0, false); // 11: void (void)
    let pfmt = b.add_ref(Kind::Ptr, fmt); // 12
    let pnoargs = b.add_ref(Kind::Ptr, noargs); // 13
    b.add_typedef(b"printf_fn", pfmt); // 14
    let arr = b.add_array(pnoargs, int, 4); // 15
    let cvp = b.add_ref(Kind::Volatile, pcc); // 16
    let cvp = b.add_ref(Kind::Const, cvp); // 17
    let tag = b.add_type_tag(b"user", ch, false); // 18
    let ptag = b.add_ref(Kind::Ptr, tag); // 19
    b.begin(Kind::Struct, b"ops", 56, false); // 20
    b.push_member(b"hooks", arr, 0, 0);
    b.push_member(b"p", cvp, 256, 0);
    b.push_member(b"ubuf", ptag, 320, 0);
    b.push_member(b"big", TypeId::new(7), 384, 0);
    b
}

#[test]
fn names_enums_and_declarators() {
    assert_eq!(
        body(&assorted()),
        "struct dup {\n\tint a;\n};\n\nstruct dup___2 {\n\tint a;\n\tint b;\n};\n\ntypedef int T;\n\n\
         enum {\n\tT___2 = 1,\n\tNEG = -1,\n};\n\n\
         enum big {\n\tSMALL = -5LL,\n\tHUGE = 1099511627776LL,\n};\n\n\
         typedef int (*printf_fn)(const char *fmt, ...);\n\n\
         struct ops {\n\tvoid (*hooks[4])(void);\n\tconst char * volatile const p;\n\
         \tchar __attribute__((btf_type_tag(\"user\"))) *ubuf;\n\tenum big big;\n};\n\n"
    );
}

/// The hand-built cases above, rendered by the reference when it is
/// installed: the expectations are the reference's, not ours.
#[test]
fn hand_built_cases_match_bpftool() {
    // Debian puts it in /usr/sbin, off a normal user's PATH.
    let found = std::env::var("BPFTOOL")
        .ok()
        .into_iter()
        .chain(["bpftool".into(), "/usr/sbin/bpftool".into()])
        .find(|c| {
            std::process::Command::new(c)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(bpftool) = found else {
        eprintln!("SKIPPED: bpftool is not installed; hand-built cases not checked against it");
        return;
    };
    let dir = std::env::temp_dir().join(format!("btfkit-cdump-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, btf) in [
        ("pointer_cycle", pointer_cycle()),
        ("anon_nested", anon_nested()),
        ("bitfields", bitfields()),
        ("packed", packed()),
        ("assorted", assorted()),
    ] {
        let path = dir.join(format!("{name}.btf"));
        std::fs::write(&path, crate::btf::write::to_bytes(&btf)).unwrap();
        let r = std::process::Command::new(&bpftool)
            .args(["btf", "dump", "file"])
            .arg(&path)
            .args(["format", "c"])
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "{name}: bpftool failed: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&to_c(&btf).unwrap()),
            String::from_utf8_lossy(&r.stdout),
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
