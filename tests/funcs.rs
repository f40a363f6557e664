//! The function phase against the corpus, without the DWARF decoder:
//!
//! * kfunc marks parsed from the fixtures' `.BTF_ids` and from the vmlinux
//!   agree with the functions the reference tagged `bpf_kfunc`;
//! * for the kfuncs fixture, the reference's pre-dedup BTF *without* the
//!   function phase plus hand-recorded states (the prototypes the source
//!   declares) gives, after `emit_funcs`, exactly the reference's pre-dedup
//!   bytes *with* it — arena tags, kfunc tags, order and strings — for all
//!   four profiles and both compilers.

mod common;

use std::collections::BTreeSet;

use btfkit::btf::{Btf, Kind, TypeId, read, write};
use btfkit::elf::functab::FuncTable;
use btfkit::funcs::{EmitOptions, FuncStates, KfuncMarks, emit_funcs};
use btfkit::testing::corpus::Corpus;

fn corpus() -> Corpus {
    let c = Corpus::open_default();
    assert!(
        c.exists(),
        "corpus not found at {} (set BTFKIT_CORPUS)",
        c.dir.display()
    );
    c
}

/// FUNC names the reference tagged `bpf_kfunc` / `bpf_fastcall` in a dump.
fn tagged(dump: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut funcs = std::collections::HashMap::new();
    let mut kf = BTreeSet::new();
    let mut fc = BTreeSet::new();
    for line in dump.lines() {
        let Some(rest) = line.strip_prefix('[') else { continue };
        let Some((id, rest)) = rest.split_once("] ") else {
            continue;
        };
        let mut parts = rest.splitn(3, ' ');
        let (kind, name, tail) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let name = name.trim_matches('\'').to_string();
        match kind {
            "FUNC" => {
                funcs.insert(id.to_string(), name);
            }
            "DECL_TAG" if name == "bpf_kfunc" || name == "bpf_fastcall" => {
                let target = tail
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("type_id="))
                    .unwrap()
                    .to_string();
                let f = funcs
                    .get(&target)
                    .cloned()
                    .unwrap_or_else(|| panic!("tag on non-FUNC {target}"));
                if name == "bpf_kfunc" {
                    kf.insert(f)
                } else {
                    fc.insert(f)
                };
            }
            _ => {}
        }
    }
    (kf, fc)
}

fn marked(table: &FuncTable<'_>, marks: &KfuncMarks) -> Vec<(String, u32)> {
    marks
        .iter()
        .map(|(e, f)| (String::from_utf8_lossy(table.entries[e as usize].key).into_owned(), f))
        .collect()
}

#[test]
fn kfunc_marks_of_the_fixtures() {
    crate::needs_corpus!();
    let c = corpus();
    for cc in ["gcc-O2", "clang-O2"] {
        let data = std::fs::read(c.file(&format!("fixtures/bin/kfuncs.{cc}.o")).unwrap()).unwrap();
        let table = FuncTable::from_elf(&data).unwrap().expect(".symtab");
        let marks = KfuncMarks::from_elf(&data, &table).unwrap();
        assert_eq!(
            marked(&table, &marks),
            vec![
                ("bpf_arena_alloc_node".to_string(), (1 << 13) | (1 << 15)),
                ("bpf_arena_walk".to_string(), (1 << 14) | (1 << 15)),
                ("bpf_fast_helper".to_string(), 1 << 12),
                ("bpf_obj_acquire".to_string(), 1),
                ("bpf_obj_release".to_string(), 2),
            ],
            "{cc}"
        );
        // The same set the reference tagged.
        let dump = std::fs::read_to_string(c.file(&format!("expected/fixtures/kfuncs.{cc}.all.txt")).unwrap()).unwrap();
        let (kf, fc) = tagged(&dump);
        let ours: BTreeSet<String> = marked(&table, &marks).into_iter().map(|x| x.0).collect();
        assert_eq!(ours, kf, "{cc}");
        assert_eq!(fc, BTreeSet::from(["bpf_fast_helper".to_string()]));
    }
}

#[test]
fn object_without_btf_ids_has_no_kfuncs() {
    crate::needs_corpus!();
    let c = corpus();
    let data = std::fs::read(c.file("fixtures/bin/clones.gcc-O2.o").unwrap()).unwrap();
    let table = FuncTable::from_elf(&data).unwrap().expect(".symtab");
    assert!(!table.is_empty());
    assert_eq!(KfuncMarks::from_elf(&data, &table).unwrap().count(), 0);
}

#[test]
fn part_only_function_has_no_table_entry() {
    crate::needs_corpus!();
    // clones.c has a function gcc splits into `<name>.part.0` only; whatever
    // its name, no table key may come from a `.part` symbol.
    let c = corpus();
    let data = std::fs::read(c.file("fixtures/bin/clones.gcc-O2.o").unwrap()).unwrap();
    let table = FuncTable::from_elf(&data).unwrap().unwrap();
    for e in &table.entries {
        for (name, _) in &table.syms[e.first as usize..(e.first + e.count) as usize] {
            let n = String::from_utf8_lossy(name);
            assert!(!n.contains(".part") && !n.contains(".cold"), "{n}");
        }
    }
}

#[test]
fn kfunc_marks_of_the_vmlinux() {
    crate::needs_corpus!();
    let c = corpus();
    let path = c.file("kernel/vmlinux-6.12.117+deb12-cloud-amd64").unwrap();
    let data = std::fs::read(&path).unwrap();
    let t0 = std::time::Instant::now();
    let table = FuncTable::from_elf(&data).unwrap().expect(".symtab");
    let t1 = t0.elapsed();
    let marks = KfuncMarks::from_elf(&data, &table).unwrap();
    let t2 = t0.elapsed() - t1;
    let ours: BTreeSet<String> = marked(&table, &marks).into_iter().map(|x| x.0).collect();
    let dump = std::fs::read_to_string(c.file("expected/kernel/vmlinux.kernel.txt").unwrap()).unwrap();
    let (kf, fc) = tagged(&dump);
    eprintln!(
        "vmlinux: {} ELF function entries ({:?}), {} kfunc-marked ({:?}), reference tagged {} FUNCs bpf_kfunc",
        table.len(),
        t1,
        marks.count(),
        t2,
        kf.len()
    );
    assert_eq!(kf.len(), 132);
    assert!(fc.is_empty(), "6.12 has no KF_FASTCALL");
    // Every tagged FUNC is marked; marked names the reference did not tag
    // are names it did not emit (no DWARF instance, or dropped).
    let missing: Vec<&String> = kf.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "tagged by the reference, not marked here: {missing:?}"
    );
    let emitted: BTreeSet<String> = dump
        .lines()
        .filter_map(|l| {
            l.split_once("] FUNC '")
                .map(|x| x.1.split('\'').next().unwrap().to_string())
        })
        .collect();
    let extra: Vec<&String> = ours.difference(&kf).filter(|n| emitted.contains(*n)).collect();
    assert!(
        extra.is_empty(),
        "marked here and emitted by the reference without a tag: {extra:?}"
    );
    eprintln!(
        "vmlinux: {} marked kfuncs have no FUNC in the reference output",
        ours.difference(&kf).count()
    );
}

/// The first own type matching `pred`.
fn find(b: &Btf, what: &str, pred: impl Fn(&Btf, TypeId) -> bool) -> TypeId {
    b.own_ids()
        .find(|&id| pred(b, id))
        .unwrap_or_else(|| panic!("no type {what}"))
}

fn named(b: &Btf, id: TypeId, kind: Kind, name: &str) -> bool {
    let t = b.ty(id);
    t.kind() == kind && b.str_at(t.name_off()) == Some(name.as_bytes())
}

fn is_int(b: &Btf, id: TypeId, size: u32, signed: bool) -> bool {
    let t = b.ty(id);
    t.kind() == Kind::Int && t.size() == size && (t.int_encoding() & 1 != 0) == signed
}

fn ptr_to(b: &Btf, id: TypeId, kind: Kind, name: &str) -> bool {
    let t = b.ty(id);
    t.kind() == Kind::Ptr
        && (if kind == Kind::Unkn {
            t.type_id().get() == 0
        } else {
            t.type_id().get() != 0 && named(b, t.type_id(), kind, name)
        })
}

#[test]
fn kfuncs_fixture_emission_matches_reference_prededup() {
    crate::needs_corpus!();
    let c = corpus();
    let base_opts = EmitOptions {
        consistent_func: true,
        decl_tag: true,
        decl_tag_kfuncs: true,
        attributes: false,
        protos: Default::default(),
        pick: Default::default(),
        decide: Default::default(),
        true_signature: false,
    };
    let profiles = [
        ("kernel", base_opts),
        ("default", base_opts),
        (
            "bare",
            EmitOptions {
                consistent_func: false,
                decl_tag: true,
                decl_tag_kfuncs: false,
                attributes: false,
                protos: Default::default(),
                pick: Default::default(),
                decide: Default::default(),
                true_signature: false,
            },
        ),
        (
            "all",
            EmitOptions {
                attributes: true,
                ..base_opts
            },
        ),
    ];
    for cc in ["gcc-O2", "clang-O2"] {
        let data = std::fs::read(c.file(&format!("fixtures/bin/kfuncs.{cc}.o")).unwrap()).unwrap();
        let table = FuncTable::from_elf(&data).unwrap().unwrap();
        for (profile, opts) in profiles {
            let rel = format!("expected-prededup/fixtures/kfuncs.{cc}.{profile}");
            let nofuncs = std::fs::read(c.file(&format!("{rel}.nofuncs.btf")).unwrap()).unwrap();
            let full = std::fs::read(c.file(&format!("{rel}.btf")).unwrap()).unwrap();
            let mut b = read::parse(&nofuncs).unwrap();
            let int = find(&b, "int", |b, id| named(b, id, Kind::Int, "int"));
            let long = find(&b, "long", |b, id| is_int(b, id, 8, true));
            let ulong = find(&b, "unsigned long", |b, id| is_int(b, id, 8, false));
            let pobj = find(&b, "bpf_obj *", |b, id| ptr_to(b, id, Kind::Struct, "bpf_obj"));
            let pnode = find(&b, "arena_node *", |b, id| ptr_to(b, id, Kind::Struct, "arena_node"));
            let pvoid = find(&b, "void *", |b, id| ptr_to(b, id, Kind::Unkn, ""));
            // What recording would have saved (the source's prototypes; the
            // parameter names are already in the string table).
            type Proto<'a> = (&'a str, TypeId, &'a [(&'a str, TypeId)]);
            let protos: [Proto<'_>; 6] = [
                ("bpf_obj_acquire", pobj, &[("id", long)]),
                ("bpf_obj_release", TypeId::VOID, &[("o", pobj)]),
                ("bpf_fast_helper", ulong, &[("x", ulong)]),
                (
                    "bpf_arena_alloc_node",
                    pnode,
                    &[("arena", pvoid), ("hint", pnode), ("cnt", int)],
                ),
                ("bpf_arena_walk", long, &[("head", pnode), ("stop", pnode)]),
                ("not_a_kfunc_but_listed", int, &[("x", int)]),
            ];
            let mut st = FuncStates::new();
            for (name, ret, params) in protos {
                st.push(table.lookup(name.as_bytes()).expect(name), ret, 0, None);
                for (pn, ty) in params {
                    let off = b
                        .strtab()
                        .find_own(pn.as_bytes())
                        .unwrap_or_else(|| panic!("{rel}: param name {pn}"));
                    st.push_param(btfkit::btf::StrOff::new(off), *ty);
                }
            }
            let marks = if opts.decl_tag_kfuncs {
                KfuncMarks::from_elf(&data, &table).unwrap()
            } else {
                KfuncMarks::none(table.len())
            };
            let sum = emit_funcs(&mut b, &mut st, &table, &marks, &opts).unwrap();
            assert_eq!(sum.emitted, 6, "{rel}");
            let ours = write::to_bytes(&b);
            assert!(
                ours == full,
                "{rel}: emitted bytes differ from the reference's pre-dedup output"
            );
        }
    }
}

#[test]
fn kfunc_marks_of_the_modules() {
    crate::needs_corpus!();
    // ET_REL: set and function symbols hold section offsets, `.BTF_ids` has
    // address 0; the marks must be the FUNCs the reference tagged.
    let c = corpus();
    let mut total = 0;
    for m in [
        "btrfs",
        "crc7",
        "fou",
        "kvm-amd",
        "mlx4_core",
        "nf_conntrack",
        "tcp_bbr",
        "virtio_net",
        "x_tables",
        "zsmalloc",
    ] {
        let data = std::fs::read(c.file(&format!("kernel/modules/{m}.ko")).unwrap()).unwrap();
        let table = FuncTable::from_elf(&data).unwrap().expect(".symtab");
        let marks = KfuncMarks::from_elf(&data, &table).unwrap();
        let dump = std::fs::read_to_string(c.file(&format!("expected/modules/{m}.kernel.txt")).unwrap()).unwrap();
        let (kf, _) = tagged(&dump);
        let ours: BTreeSet<String> = marked(&table, &marks).into_iter().map(|x| x.0).collect();
        assert_eq!(ours, kf, "{m}");
        total += ours.len();
    }
    assert_eq!(total, 20, "fou 2 + nf_conntrack 10 + tcp_bbr 8");
}

/// The kfuncs fixture with symbol `name`'s st_value / st_size rewritten.
fn patched_kfuncs(c: &Corpus, edits: &[(&str, Option<u64>, Option<u64>)]) -> (Vec<u8>, u64) {
    use object::read::elf::{ElfFile64, FileHeader, SectionHeader, Sym};
    let mut data = std::fs::read(c.file("fixtures/bin/kfuncs.gcc-O2.o").unwrap()).unwrap();
    let (symtab_off, syms, ids_size) = {
        let f = ElfFile64::<object::Endianness>::parse(&data[..]).unwrap();
        let e = f.endian();
        let secs = f.elf_header().sections(e, &data[..]).unwrap();
        let (_, ids) = secs.section_by_name(e, b".BTF_ids").unwrap();
        let (_, st) = secs
            .iter()
            .enumerate()
            .find(|(_, s)| s.sh_type(e) == object::elf::SHT_SYMTAB)
            .unwrap();
        let symtab = secs.symbols(e, &data[..], object::elf::SHT_SYMTAB).unwrap();
        let names: Vec<Vec<u8>> = symtab
            .symbols()
            .iter()
            .map(|s| s.name(e, symtab.strings()).unwrap_or(b"").to_vec())
            .collect();
        (st.sh_offset(e) as usize, names, ids.sh_size(e))
    };
    for (name, value, size) in edits {
        let i = syms
            .iter()
            .position(|n| n == name.as_bytes())
            .unwrap_or_else(|| panic!("no symbol {name}"));
        let at = symtab_off + i * 24;
        if let Some(v) = value {
            data[at + 8..at + 16].copy_from_slice(&v.to_le_bytes());
        }
        if let Some(s) = size {
            data[at + 16..at + 24].copy_from_slice(&s.to_le_bytes());
        }
    }
    (data, ids_size)
}

#[test]
fn kfunc_pair_outside_btf_ids_is_an_error() {
    crate::needs_corpus!();
    let c = corpus();
    let (_, size) = patched_kfuncs(&c, &[]);
    // The set grows past the section and a kfunc sits in its last 4 bytes.
    let (data, _) = patched_kfuncs(
        &c,
        &[
            ("__BTF_ID__set8__test_kfunc_set", None, Some(0x1000)),
            ("__BTF_ID__func__bpf_obj_acquire__1", Some(size - 4), None),
        ],
    );
    let table = FuncTable::from_elf(&data).unwrap().unwrap();
    let err = KfuncMarks::from_elf(&data, &table).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(".BTF_ids") && msg.contains("bpf_obj_acquire") && msg.contains("outside"),
        "{msg}"
    );
    // A set header outside the section is skipped: nothing is marked.
    let (data, _) = patched_kfuncs(&c, &[("__BTF_ID__set8__test_kfunc_set", Some(size + 64), None)]);
    let table = FuncTable::from_elf(&data).unwrap().unwrap();
    assert_eq!(KfuncMarks::from_elf(&data, &table).unwrap().count(), 0);
}

#[test]
fn no_section_named_symtab_means_no_table() {
    crate::needs_corpus!();
    use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
    let c = corpus();
    let mut data = std::fs::read(c.file("fixtures/bin/kfuncs.gcc-O2.o").unwrap()).unwrap();
    let at = {
        let f = ElfFile64::<object::Endianness>::parse(&data[..]).unwrap();
        let e = f.endian();
        let h = f.elf_header();
        let secs = h.sections(e, &data[..]).unwrap();
        let (_, st) = secs.section_by_name(e, b".symtab").unwrap();
        let shstr = secs.section(object::SectionIndex(h.e_shstrndx(e).0 as usize)).unwrap();
        shstr.sh_offset(e) as usize + st.sh_name(e) as usize
    };
    assert_eq!(&data[at..at + 7], b".symtab");
    data[at + 1] = b'x';
    assert!(FuncTable::from_elf(&data).unwrap().is_none());
}
