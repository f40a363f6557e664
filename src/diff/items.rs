//! The top-level items of one BTF and the texts that name, describe and
//! pair them: labels (`struct sk_buff`, `decl_tag x on func f`), `+`/`-`
//! descriptions, id-free definitions, and the record readers the comparison
//! shares.

use std::collections::VecDeque;

use hashbrown::HashMap;

use super::render::{named_label, tag_keyword, type_name};
use crate::btf::{Btf, Kind, StrOff, Type, TypeId};

/// Nesting of anonymous aggregates followed before giving up (real C nests a
/// handful deep; only corrupt input gets near this).
pub(super) const MAX_NEST: u32 = 32;
/// The partner of an item not paired (yet).
pub(super) const UNPAIRED: u32 = u32::MAX;

/// Calls `f` with every type id a record refers to.
fn for_each_ref(t: Type<'_>, f: impl FnMut(u32)) {
    Btf::for_each_type_ref(t.words, f)
}

pub(super) fn text(btf: &Btf, off: u32) -> String {
    btf.name(StrOff::new(off)).into_owned()
}

pub(super) fn linkage(l: u32) -> &'static str {
    match l {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "unknown",
    }
}

pub(super) fn int_encoding(e: u32) -> &'static str {
    match e {
        0 => "unsigned",
        1 => "signed",
        2 => "char",
        4 => "bool",
        _ => "unknown",
    }
}

/// The label of a member, `x` or `(anon union @64)`.
pub(super) fn member_label(btf: &Btf, name: u32, ty: u32, bit_off: u32) -> String {
    if name != 0 {
        return text(btf, name);
    }
    match tag_keyword(btf, TypeId::new(ty)) {
        "" => format!("(anon @{bit_off})"),
        kw => format!("(anon {kw} @{bit_off})"),
    }
}

/// (name, type, bit offset, bitfield size) of each member.
pub(super) fn members(t: Type<'_>) -> Vec<(u32, u32, u32, u32)> {
    let kflag = t.kflag();
    t.triples()
        .map(|[n, ty, off]| {
            if kflag {
                (n, ty, off & 0xff_ffff, off >> 24)
            } else {
                (n, ty, off, 0)
            }
        })
        .collect()
}

/// Enum values as (name, value), widened so signed and unsigned compare.
pub(super) fn enum_values(t: Type<'_>) -> Vec<(u32, i128)> {
    let signed = t.kflag();
    if t.kind() == Kind::Enum64 {
        t.triples()
            .map(|[n, lo, hi]| {
                let v = ((hi as u64) << 32) | lo as u64;
                (n, if signed { v as i64 as i128 } else { v as i128 })
            })
            .collect()
    } else {
        t.pairs()
            .map(|[n, v]| (n, if signed { v as i32 as i128 } else { v as i128 }))
            .collect()
    }
}

/// Pairs two lists by key, equal keys in order; returns the pairs (in A's
/// order) and the indices left over on each side.
pub(super) fn pair_by_key<K: std::hash::Hash + Eq>(
    a: impl Iterator<Item = K>,
    b: impl Iterator<Item = K>,
) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
    let mut by_key: HashMap<K, VecDeque<usize>> = HashMap::new();
    let mut nb = 0;
    for (j, k) in b.enumerate() {
        by_key.entry(k).or_default().push_back(j);
        nb += 1;
    }
    let mut used = vec![false; nb];
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for (i, k) in a.enumerate() {
        match by_key.get_mut(&k).and_then(|q| q.pop_front()) {
            Some(j) => {
                used[j] = true;
                pairs.push((i, j));
            }
            None => only_a.push(i),
        }
    }
    let only_b = (0..nb).filter(|&j| !used[j]).collect();
    (pairs, only_a, only_b)
}

/// Pairs what is left of two lists by one key; returns what is still left.
pub(super) fn pair_pass<K: std::hash::Hash + Eq>(
    pairs: &mut Vec<(TypeId, TypeId)>,
    va: &[TypeId],
    vb: &[TypeId],
    ka: impl Fn(TypeId) -> K,
    kb: impl Fn(TypeId) -> K,
) -> (Vec<TypeId>, Vec<TypeId>) {
    if va.is_empty() || vb.is_empty() {
        return (va.to_vec(), vb.to_vec());
    }
    let (p, ra, rb) = pair_by_key(va.iter().map(|&x| ka(x)), vb.iter().map(|&y| kb(y)));
    pairs.extend(p.iter().map(|&(i, j)| (va[i], vb[j])));
    (ra.iter().map(|&i| va[i]).collect(), rb.iter().map(|&j| vb[j]).collect())
}

/// An id-free text of a type one level deep: its own record (as its local
/// class) and the C name of everything it refers to, with anonymous
/// aggregates below those references spelled out the same way, and each own
/// named type reached tagged with its partner once it has one (`partner`:
/// for A the paired B id, for B its own id, else `UNPAIRED`), so that of two `struct x *` the one pointing at the
/// partner of the other's `struct x` matches it.
pub(super) fn definition(
    btf: &Btf,
    local: &dyn Fn(TypeId) -> u32,
    partner: &dyn Fn(TypeId) -> u32,
    id: TypeId,
) -> String {
    let mut out = String::new();
    define(btf, local, partner, id, &mut out, 0);
    out
}

fn define(
    btf: &Btf,
    local: &dyn Fn(TypeId) -> u32,
    partner: &dyn Fn(TypeId) -> u32,
    id: TypeId,
    out: &mut String,
    depth: u32,
) {
    use std::fmt::Write;
    let Some(t) = btf.get(id) else { return };
    let _ = write!(out, "#{}(", local(id));
    for_each_ref(t, |r| {
        out.push_str(&type_name(btf, TypeId::new(r)));
        match below(btf, TypeId::new(r)) {
            Some(agg) if btf.ty(agg).name_off().get() == 0 && depth < MAX_NEST => {
                out.push('{');
                define(btf, local, partner, agg, out, depth + 1);
                out.push('}');
            }
            Some(named)
                if btf.ty(named).name_off().get() != 0
                    && named.get() >= btf.start_id()
                    && partner(named) != UNPAIRED =>
            {
                let _ = write!(out, "@{}", partner(named));
            }
            _ => {}
        }
        out.push(';');
    });
    out.push(')');
}

/// The first type a reference reaches through modifiers, pointers and
/// arrays that is named or an anonymous struct, union or enum.
fn below(btf: &Btf, mut id: TypeId) -> Option<TypeId> {
    for _ in 0..MAX_NEST {
        let t = btf.get(id)?;
        match t.kind() {
            Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag => id = t.type_id(),
            Kind::Array => id = t.array().0,
            Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 => return Some(id),
            _ if t.name_off().get() != 0 => return Some(id),
            _ => return None,
        }
    }
    None
}

/// `type struct foo *: ` before a note about a reference; nothing when the
/// path names the reference itself (an unreferenced anonymous item).
pub(super) fn subject(aspect: &str, shown: &str) -> String {
    if aspect.is_empty() {
        String::new()
    } else {
        format!("{aspect} {shown}: ")
    }
}

/// A short description of an item for `+`/`-` lines.
pub(super) fn describe(btf: &Btf, id: TypeId) -> String {
    let Some(t) = btf.get(id) else { return String::new() };
    match t.kind() {
        Kind::Struct | Kind::Union => format!("size {}, {} members", t.size(), t.vlen()),
        Kind::Enum | Kind::Enum64 => format!("size {}, {} values", t.size(), t.vlen()),
        Kind::Typedef => type_name(btf, t.type_id()),
        Kind::Int => format!(
            "size {}, {}, {} bits",
            t.size(),
            int_encoding(t.int_encoding()),
            t.int_bits()
        ),
        Kind::Float => format!("size {}", t.size()),
        Kind::Func => format!("{} {}", linkage(t.vlen()), type_name(btf, t.type_id())),
        Kind::Var => format!("{} {}", linkage(t.extra()), type_name(btf, t.type_id())),
        Kind::Datasec => format!("size {}, {} entries", t.size(), t.vlen()),
        // its label names it whole: the tag, and what it is on
        Kind::DeclTag => decl_tag_label(btf, id),
        _ => String::new(),
    }
}

/// Label of an anonymous type nothing else refers to.
fn anon_label(btf: &Btf, id: TypeId) -> String {
    let t = btf.ty(id);
    match t.kind() {
        Kind::Enum | Kind::Enum64 | Kind::Struct | Kind::Union => {
            let first = match t.kind() {
                Kind::Enum => t.pairs().next().map(|p| p[0]),
                _ => t.triples().next().map(|m| m[0]),
            };
            let first_type = match t.kind() {
                Kind::Struct | Kind::Union => t
                    .triples()
                    .next()
                    .map(|m| format!(": {}", type_name(btf, TypeId::new(m[1])))),
                _ => None,
            };
            match first.filter(|&n| n != 0) {
                Some(n) => {
                    format!(
                        "{} (anon {}{})",
                        tag_keyword(btf, id),
                        text(btf, n),
                        first_type.unwrap_or_default()
                    )
                }
                None => format!("{} (anon)", tag_keyword(btf, id)),
            }
        }
        _ => format!("(unreferenced) {}", type_name(btf, id)),
    }
}

/// `decl_tag bpf_kfunc on func bpf_foo`, `decl_tag x on struct s member m`.
fn decl_tag_label(btf: &Btf, id: TypeId) -> String {
    let t = btf.ty(id);
    let target = t.type_id();
    let comp = t.extra() as i32;
    let tl = named_label(btf, target).unwrap_or_else(|| format!("(anon) {}", type_name(btf, target)));
    let component = match btf.get(target) {
        _ if comp < 0 => String::new(),
        Some(tt) if matches!(tt.kind(), Kind::Struct | Kind::Union) => match tt.triples().nth(comp as usize) {
            Some([n, ty, off]) => format!(" member {}", member_label(btf, n, ty, off & 0xff_ffff)),
            None => format!(" member #{comp}"),
        },
        Some(tt) if tt.kind() == Kind::Func => format!(" param {}", comp + 1),
        _ => format!(" component {comp}"),
    };
    let attr = if t.kflag() { " (attribute)" } else { "" };
    format!("decl_tag {}{attr} on {tl}{component}", text(btf, t.name_off().get()))
}

/// The top-level items of a BTF's own types, as (label, id).
pub(super) fn items(btf: &Btf) -> Vec<(String, TypeId)> {
    let start = btf.start_id();
    let mut referenced = vec![false; btf.own_type_count() as usize];
    for id in btf.own_ids() {
        let t = btf.ty(id);
        // A tag on an anonymous type does not make it part of another item.
        if t.kind() == Kind::DeclTag {
            continue;
        }
        for_each_ref(t, |r| {
            if r >= start {
                referenced[(r - start) as usize] = true;
            }
        });
    }
    let mut out = Vec::new();
    for id in btf.own_ids() {
        let t = btf.ty(id);
        let label = if t.kind() == Kind::DeclTag {
            decl_tag_label(btf, id)
        } else if let Some(l) = named_label(btf, id) {
            l
        } else if !referenced[(id.get() - start) as usize] {
            anon_label(btf, id)
        } else {
            continue;
        };
        out.push((label, id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, LINKAGE_GLOBAL};

    #[test]
    fn pairing_by_key_keeps_order_and_duplicates() {
        let (p, a, b) = pair_by_key(["x", "", "y", ""].into_iter(), ["", "y", "z", ""].into_iter());
        assert_eq!(p, [(1, 0), (2, 1), (3, 3)]);
        assert_eq!(a, [0]);
        assert_eq!(b, [2]);
    }

    #[test]
    fn items_and_their_labels() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let s = b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"", TypeId::new(4), 0, 0);
        b.add_decl_tag(b"tagged", s, 0, false);
        b.begin(Kind::Union, b"", 4, false); // [4], reached from s: not an item
        b.push_member(b"u", int, 0, 0);
        b.begin(Kind::Enum, b"", 4, false); // [5], reached from nothing
        b.push_enum_value(b"FIRST", 0);
        let p = b.add_ref(Kind::Ptr, s); // [6], unreferenced
        let proto = b.begin(Kind::FuncProto, b"", 0, false);
        b.push_param(b"x", p);
        let f = b.add_func(b"f", proto, LINKAGE_GLOBAL);
        b.add_decl_tag(b"bpf_kfunc", f, -1, false);
        b.add_decl_tag(b"nonnull", f, 0, true);
        let labels: Vec<String> = items(&b).into_iter().map(|(l, _)| l).collect();
        assert_eq!(
            labels,
            [
                "int 'int'",
                "struct s",
                "decl_tag tagged on struct s member (anon union @0)",
                "enum (anon FIRST)",
                "func f",
                "decl_tag bpf_kfunc on func f",
                "decl_tag nonnull (attribute) on func f param 1",
            ]
        );
    }

    #[test]
    fn definitions_spell_out_anonymous_aggregates_and_partners() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let u = b.begin(Kind::Union, b"", 4, false);
        b.push_member(b"v", int, 0, 0);
        let s = b.begin(Kind::Struct, b"s", 4, false);
        b.push_member(b"", u, 0, 0);
        let p = b.add_ref(Kind::Ptr, s);
        let local = |i: TypeId| i.get() * 10;
        let none = |_: TypeId| UNPAIRED;
        assert_eq!(definition(&b, &local, &none, s), "#30(union {...}{#20(int;)};)");
        assert_eq!(definition(&b, &local, &none, p), "#40(struct s;)");
        assert_eq!(
            definition(&b, &local, &|i: TypeId| i.get() + 100, p),
            "#40(struct s@103;)"
        );
    }
}
