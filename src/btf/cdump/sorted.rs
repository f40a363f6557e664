//! What bpftool of 2026 (v7.8.0, libbpf 1.8) adds around the same
//! rendering: the types taken as roots in a sorted order rather than by id,
//! and a list of `extern` kfunc prototypes after them.
//!
//! The order: a rank per kind (anonymous enums, named enums, ints and
//! floats, named structs and unions, named prototypes, the rest; a named
//! pointer, array, typedef or modifier ranks as what it leads to), then a
//! sort name (an anonymous enum's first enumerator; through pointers,
//! arrays, typedefs and modifiers the name of what they lead to), the own
//! name, a hash of names over members and enumerators, and the id. Void
//! (id 0) takes part, and the first of the sorted list is passed over, as
//! there.

use super::{Btf, Kind, MAX_DEPTH, StrOff, TypeId};

const MAX_RANK: u32 = 10;

/// The kinds bpftool 7.8 looks through to the type they lead to (arrays
/// too, for rank and sort name, but not for the hash, which adds the
/// element count).
fn leads_on(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::TypeTag | Kind::Const | Kind::Ptr | Kind::Volatile | Kind::Restrict | Kind::Typedef | Kind::DeclTag
    )
}

/// A type's place in bpftool 7.8's order, compared field by field.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct SortKey<'b> {
    rank: u32,
    sort_name: &'b [u8],
    own_name: &'b [u8],
    hash: u64,
    id: u32,
}

/// The ids to render as roots, in bpftool 7.8's order (the list's first
/// left out, as bpftool leaves it out).
pub(super) fn sorted_roots(btf: &Btf) -> Vec<u32> {
    let n = btf.type_count() + 1;
    let mut keys: Vec<SortKey<'_>> = (0..n)
        .map(|id| SortKey {
            rank: rank(btf, id, false, 0),
            sort_name: sort_name(btf, id, false, 0),
            own_name: name(btf, id),
            hash: names_hash(btf, id, true, 0),
            id,
        })
        .collect();
    keys.sort_unstable();
    keys.into_iter().skip(1).map(|k| k.id).collect()
}

fn name(btf: &Btf, id: u32) -> &[u8] {
    if id == 0 {
        return b"";
    }
    btf.str_at(btf.ty(TypeId::new(id)).name_off()).unwrap_or(b"")
}

/// The kind and target of `id` (void: no kind).
fn kind_of(btf: &Btf, id: u32) -> Option<(Kind, TypeId)> {
    (id != 0).then(|| {
        let t = btf.ty(TypeId::new(id));
        let target = if t.kind() == Kind::Array {
            t.array().0
        } else {
            t.type_id()
        };
        (t.kind(), target)
    })
}

fn rank(btf: &Btf, id: u32, has_name: bool, depth: u32) -> u32 {
    let Some((kind, target)) = kind_of(btf, id) else {
        return MAX_RANK;
    };
    let has_name = has_name || btf.ty(TypeId::new(id)).name_off() != StrOff::EMPTY;
    // (a loop in damaged BTF, which bpftool would follow forever)
    if depth > MAX_DEPTH {
        return MAX_RANK;
    }
    match kind {
        Kind::Enum | Kind::Enum64 => has_name as u32,
        Kind::Int | Kind::Float => 2,
        Kind::Struct | Kind::Union if has_name => 3,
        Kind::FuncProto if has_name => 4,
        k if has_name && (leads_on(k) || k == Kind::Array) => rank(btf, target.0, true, depth + 1),
        _ => MAX_RANK,
    }
}

fn sort_name(btf: &Btf, id: u32, from_ref: bool, depth: u32) -> &[u8] {
    let Some((kind, target)) = kind_of(btf, id) else {
        return b"";
    };
    if depth > MAX_DEPTH {
        return b"";
    }
    let t = btf.ty(TypeId::new(id));
    match kind {
        Kind::Enum | Kind::Enum64 => {
            let mut off = t.name_off();
            if !from_ref && off == StrOff::EMPTY && t.vlen() > 0 {
                off = StrOff::new(t.trailing()[0]);
            }
            btf.str_at(off).unwrap_or(b"")
        }
        k if leads_on(k) || k == Kind::Array => sort_name(btf, target.0, true, depth + 1),
        _ => btf.str_at(t.name_off()).unwrap_or(b""),
    }
}

/// libbpf's `str_hash` (its `char` is signed on the machines it runs on).
fn str_hash(s: &[u8]) -> u64 {
    s.iter()
        .fold(0u64, |h, &c| h.wrapping_mul(31).wrapping_add(c as i8 as i64 as u64))
}

fn mix(h: u64, v: u64) -> u64 {
    h.wrapping_mul(31).wrapping_add(v)
}

fn mix_name(h: u64, btf: &Btf, off: u32) -> u64 {
    if off == 0 {
        return h;
    }
    mix(h, str_hash(btf.str_at(StrOff::new(off)).unwrap_or(b"")))
}

fn names_hash(btf: &Btf, id: u32, members: bool, depth: u32) -> u64 {
    let Some((kind, target)) = kind_of(btf, id) else {
        return 0;
    };
    let t = btf.ty(TypeId::new(id));
    let mut h = mix_name(0, btf, t.name_off().0);
    if depth > MAX_DEPTH {
        return h;
    }
    match kind {
        Kind::Enum => t.pairs().for_each(|[n, _]| h = mix_name(h, btf, n)),
        Kind::Enum64 => t.triples().for_each(|[n, _, _]| h = mix_name(h, btf, n)),
        Kind::Struct | Kind::Union if members => {
            for [n, ty, _] in t.triples() {
                h = mix_name(h, btf, n);
                h = mix(h, names_hash(btf, ty, false, depth + 1));
            }
        }
        k if leads_on(k) => h = mix(h, names_hash(btf, target.0, members, depth + 1)),
        Kind::Array => {
            h = mix(h, t.array().2 as u64);
            h = mix(h, names_hash(btf, target.0, members, depth + 1));
        }
        _ => {}
    }
    h
}

/// The kfuncs to declare: functions with a `bpf_kfunc` decl tag on the
/// function itself, by name; and whether each is also `bpf_fastcall`.
pub(super) fn kfuncs(btf: &Btf) -> Vec<(u32, bool)> {
    let (mut kfuncs, mut fastcalls) = (Vec::new(), Vec::new());
    for id in 1..=btf.type_count() {
        let t = btf.ty(TypeId::new(id));
        if t.kind() != Kind::DeclTag || t.extra() as i32 != -1 {
            continue;
        }
        let f = t.type_id();
        if f.0 == 0 || f.0 > btf.type_count() || btf.ty(f).kind() != Kind::Func {
            continue;
        }
        match btf.str_at(t.name_off()).unwrap_or(b"") {
            b"bpf_kfunc" => kfuncs.push(f.0),
            b"bpf_fastcall" => fastcalls.push(f.0),
            _ => {}
        }
    }
    kfuncs.sort_by(|&a, &b| name(btf, a).cmp(name(btf, b)).then(a.cmp(&b)));
    kfuncs.into_iter().map(|f| (f, fastcalls.contains(&f))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn str_hash_is_libbpfs() {
        // h = h * 31 + c over the bytes, a byte past 0x7f counting negative
        assert_eq!(str_hash(b""), 0);
        assert_eq!(str_hash(b"a"), 97);
        assert_eq!(str_hash(b"ab"), 97 * 31 + 98);
        assert_eq!(str_hash(&[0x80]), (-128i64) as u64);
    }
}
