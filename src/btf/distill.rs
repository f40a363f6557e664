//! Distilled base BTF: a module's split BTF made self-describing enough to be
//! re-attached to another build of its base (libbpf's `btf__distill_base`,
//! as pahole's `distilled_base` feature uses it for `.BTF` + `.BTF.base`).
//!
//! Three steps:
//! 1. mark every base type the split types reach, transitively, without
//!    descending into *named* structs/unions (their members are not needed);
//! 2. the new base: in base-id order, INT/FLOAT/FWD copied, named
//!    STRUCT/UNION as member-less composites of the same size, named
//!    ENUM/ENUM64 as an empty ENUM of the same size;
//! 3. the new split: the original split types in order, then the marked base
//!    types the new base does not describe (anonymous composites and enums,
//!    arrays, typedefs, modifiers, prototypes, type tags) as full copies, in
//!    base-id order; every id remapped, strings re-interned (so the split's
//!    string section keeps only referenced strings, in first-use order).

use std::sync::Arc;

use thiserror::Error;

use super::{Btf, Kind, StrOff, TypeId};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DistillError {
    #[error("distilled base needs split BTF (no base given)")]
    NotSplit,
    #[error("split type [{from}] references base type [{to}] of kind {kind}, which a distilled base cannot describe")]
    UnsupportedKind { from: u32, to: u32, kind: &'static str },
}

fn allowed(k: Kind) -> bool {
    matches!(
        k,
        Kind::Int
            | Kind::Float
            | Kind::Fwd
            | Kind::Array
            | Kind::Struct
            | Kind::Union
            | Kind::Typedef
            | Kind::Enum
            | Kind::Enum64
            | Kind::Ptr
            | Kind::Const
            | Kind::Restrict
            | Kind::Volatile
            | Kind::FuncProto
            | Kind::TypeTag
    )
}

fn refs(words: &[u32]) -> Vec<u32> {
    let mut v = Vec::new();
    Btf::for_each_type_ref(words, |r| v.push(r));
    v
}

/// Where a marked base type goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Unmarked,
    Base,
    Split,
}

/// Returns `(new_base, new_split)` for split BTF `split`.
pub fn distill(split: &Btf) -> Result<(Arc<Btf>, Btf), DistillError> {
    let base = split.base().ok_or(DistillError::NotSplit)?;
    let start = split.start_id();
    let nbase = start as usize; // index by id, 0 = void
    let mut place = vec![Place::Unmarked; nbase];
    // Step 1: mark, depth first with an explicit stack.
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for id in split.own_ids() {
        for r in refs(split.ty(id).words) {
            stack.push((id.0, r));
            while let Some((from, to)) = stack.pop() {
                if to == 0 || to >= start || place[to as usize] != Place::Unmarked {
                    continue;
                }
                let t = base.ty(TypeId::new(to));
                let k = t.kind();
                if !allowed(k) {
                    return Err(DistillError::UnsupportedKind {
                        from,
                        to,
                        kind: k.name(),
                    });
                }
                let named = t.name_off().0 != 0;
                let to_base = match k {
                    Kind::Int | Kind::Float | Kind::Fwd => true,
                    Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 => named,
                    _ => false,
                };
                place[to as usize] = if to_base { Place::Base } else { Place::Split };
                if matches!(k, Kind::Struct | Kind::Union) && named {
                    continue;
                }
                // Reverse so the walk visits fields in record order.
                for r2 in refs(t.words).into_iter().rev() {
                    stack.push((to, r2));
                }
            }
        }
    }
    // Step 2: the new base.
    let mut map = vec![0u32; nbase];
    let mut nb = Btf::new(split.endian());
    for id in 1..start {
        if place[id as usize] != Place::Base {
            continue;
        }
        let t = base.ty(TypeId::new(id));
        let name = base.str_at(t.name_off()).unwrap_or(b"").to_vec();
        let new = match t.kind() {
            Kind::Int | Kind::Float | Kind::Fwd => {
                let n = nb.add_str(&name);
                let mut w = t.words.to_vec();
                w[0] = n.0;
                nb.push_words(&w)
            }
            Kind::Struct | Kind::Union => nb.begin(t.kind(), &name, t.size(), false),
            _ => nb.begin(Kind::Enum, &name, t.size(), false),
        };
        map[id as usize] = new.0;
    }
    let nb = Arc::new(nb);
    let new_base_count = nb.type_count();
    // Step 3: the new split.
    let mut ns = Btf::new_split(nb.clone());
    let copy = |ns: &mut Btf, words: &[u32]| -> TypeId {
        let mut w = words.to_vec();
        Btf::for_each_str_ref_mut(&mut w, |s| {
            if *s != 0 {
                let text = split.str_at(StrOff::new(*s)).unwrap_or(b"").to_vec();
                *s = ns.add_str(&text).0;
            }
        });
        ns.push_words(&w)
    };
    for id in split.own_ids() {
        copy(&mut ns, split.ty(id).words);
    }
    for id in 1..start {
        if place[id as usize] == Place::Split {
            map[id as usize] = copy(&mut ns, base.ty(TypeId::new(id)).words).0;
        }
    }
    let shift = start - new_base_count - 1;
    for id in ns.own_ids().collect::<Vec<_>>() {
        Btf::for_each_type_ref_mut(ns.words_mut(id), |r| {
            if *r >= start {
                *r -= shift;
            } else if *r != 0 {
                *r = map[*r as usize];
            }
        });
    }
    Ok((nb, ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, dump};

    /// The worked example of the spec (libbpf selftest `distilled_base`).
    #[test]
    fn selftest_example() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1); // 1
        let p = b.add_ref(Kind::Ptr, int); // 2
        let s1 = b.begin(Kind::Struct, b"s1", 8, false); // 3
        b.push_member(b"f1", p, 0, 0);
        let anon = b.begin(Kind::Struct, b"", 12, false); // 4
        b.push_member(b"f1", int, 0, 0);
        b.push_member(b"f2", s1, 32, 0);
        b.add_int(b"unsigned int", 4, 0); // 5
        let u1 = b.begin(Kind::Union, b"u1", 12, false); // 6
        b.push_member(b"f1", int, 0, 0);
        b.push_member(b"f2", p, 0, 0);
        let au = b.begin(Kind::Union, b"", 4, false); // 7
        b.push_member(b"f1", int, 0, 0);
        let e1 = b.begin(Kind::Enum, b"e1", 4, false); // 8
        b.push_enum_value(b"v1", 1);
        let ae = b.begin(Kind::Enum, b"", 4, false); // 9
        b.push_enum_value(b"av1", 2);
        let e641 = b.begin(Kind::Enum64, b"e641", 8, true); // 10
        b.push_enum64_value(b"v1", 1024);
        let ae64 = b.begin(Kind::Enum64, b"", 8, true); // 11
        b.push_enum64_value(b"v1", 1025);
        b.begin(Kind::Struct, b"unneeded", 4, false); // 12
        b.push_member(b"f1", int, 0, 0);
        let emb = b.begin(Kind::Struct, b"embedded", 4, false); // 13
        b.push_member(b"f1", int, 0, 0);
        let fp = b.begin(Kind::FuncProto, b"", int.0, false); // 14
        b.push_param(b"p1", int);
        let arr = b.add_array(int, int, 3); // 15
        let fromp = b.begin(Kind::Struct, b"from_proto", 4, false); // 16
        b.push_member(b"f1", int, 0, 0);
        b.begin(Kind::Union, b"u1", 4, false); // 17
        b.push_member(b"f1", int, 0, 0);
        let base = Arc::new(b);
        let mut s = Btf::new_split(base);
        s.add_ref(Kind::Ptr, s1); // 18
        s.add_ref(Kind::Ptr, anon); // 19
        s.add_ref(Kind::Const, u1); // 20
        s.add_ref(Kind::Restrict, au); // 21
        s.add_ref(Kind::Volatile, e1); // 22
        s.add_typedef(b"et", ae); // 23
        s.add_ref(Kind::Const, e641); // 24
        s.add_ref(Kind::Ptr, ae64); // 25
        s.begin(Kind::Struct, b"with_embedded", 4, false); // 26
        s.push_member(b"f1", emb, 0, 0);
        s.add_func(b"fn", fp, 0); // 27
        s.add_typedef(b"arraytype", arr); // 28
        s.begin(Kind::FuncProto, b"", int.0, false); // 29
        s.push_param(b"p1", fromp);
        let (nb, ns) = distill(&s).unwrap();
        assert_eq!(
            dump::raw_string(&nb),
            "[1] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED\n\
             [2] STRUCT 's1' size=8 vlen=0\n[3] UNION 'u1' size=12 vlen=0\n\
             [4] ENUM 'e1' encoding=UNSIGNED size=4 vlen=0\n[5] ENUM 'e641' encoding=UNSIGNED size=8 vlen=0\n\
             [6] STRUCT 'embedded' size=4 vlen=0\n[7] STRUCT 'from_proto' size=4 vlen=0\n"
        );
        let d = dump::raw_string(&ns);
        let lines: Vec<&str> = d.lines().filter(|l| l.starts_with('[')).collect();
        assert_eq!(lines[0], "[8] PTR '(anon)' type_id=2");
        assert_eq!(lines[1], "[9] PTR '(anon)' type_id=20");
        assert_eq!(lines[5], "[13] TYPEDEF 'et' type_id=22");
        assert_eq!(lines[9], "[17] FUNC 'fn' type_id=24 linkage=static");
        assert_eq!(lines[12], "[20] STRUCT '(anon)' size=12 vlen=2");
        assert_eq!(lines[17], "[25] ARRAY '(anon)' type_id=1 index_type_id=1 nr_elems=3");
        assert_eq!(
            ns.raw_strings(),
            b"et\0with_embedded\0f1\0fn\0arraytype\0p1\0f2\0av1\0v1\0"
        );
    }

    #[test]
    fn errors() {
        let b = Btf::new(Endian::Little);
        assert_eq!(distill(&b).unwrap_err(), DistillError::NotSplit);
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let v = b.add_var(b"v", int, 1);
        let mut s = Btf::new_split(Arc::new(b));
        s.add_ref(Kind::Ptr, v);
        assert!(matches!(
            distill(&s),
            Err(DistillError::UnsupportedKind { to: 2, kind: "VAR", .. })
        ));
    }
}
