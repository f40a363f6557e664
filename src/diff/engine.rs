//! Matching of top-level items and the field-by-field comparison of pairs.

use std::collections::VecDeque;

use hashbrown::HashMap;

use super::equiv::{self, Classes};
use super::render::{declaration, named_label, tag_keyword, type_name};
use super::{Change, DiffKind, Difference, Report, Verdict};
use crate::btf::{Btf, Kind, StrOff, Type, TypeId};

/// Nesting of anonymous aggregates followed before giving up (real C nests a
/// handful deep; only corrupt input gets near this).
const MAX_NEST: u32 = 32;
const UNPAIRED: u32 = u32::MAX;
/// Nested comparisons (anonymous aggregates, prototypes) per run: far above
/// what two vmlinux files need (every item examined once is ~100 k).
const WORK_BUDGET: u32 = 4_000_000;

/// Compares two BTFs (each with its base, if split) and reports whether they
/// are the same bytes, equivalent, or how they differ.
pub fn compare(a: &Btf, b: &Btf) -> Report {
    let mut report = Report {
        verdict: Verdict::IdenticalBytes,
        differences: Vec::new(),
        types_a: a.own_type_count(),
        types_b: b.own_type_count(),
        rounds: 0,
        classes: 0,
    };
    if super::identical_bytes(a, b) {
        return report;
    }
    let cls = equiv::compute(a, b);
    report.rounds = cls.rounds;
    report.classes = cls.count;
    let mut ca: Vec<u32> = a.own_ids().map(|id| cls.a(id)).collect();
    let mut cb: Vec<u32> = b.own_ids().map(|id| cls.b(id)).collect();
    ca.sort_unstable();
    cb.sort_unstable();
    if ca == cb {
        report.verdict = Verdict::Equivalent;
        return report;
    }
    report.verdict = Verdict::Different;
    let mut e = Engine {
        a,
        b,
        cls: &cls,
        pair: vec![UNPAIRED; a.type_count() as usize + 1],
        paired_b: vec![false; b.type_count() as usize + 1],
        own_classes_a: None,
        own_classes_b: None,
        stack: Vec::new(),
        budget: WORK_BUDGET,
        out: Vec::new(),
    };
    e.run();
    if e.budget == 0 {
        e.push_note(
            DiffKind::Other,
            "(comparison)",
            format!(
                "stopped after {WORK_BUDGET} nested comparisons: differences inside anonymous types may be missing"
            ),
        );
    }
    let mut out = e.out;
    out.sort_by(|x, y| x.sort_key().cmp(&y.sort_key()));
    out.dedup();
    if out.is_empty() {
        let (only_a, only_b) = multiset_difference(&ca, &cb);
        out.push(Difference {
            kind: DiffKind::Other,
            change: Change::Changed,
            path: "(types)".into(),
            aspect: format!(
                "{only_a} types of A and {only_b} of B have no structural counterpart, \
                 but no named item differs (anonymous types outside every item)"
            ),
            old: None,
            new: None,
        });
    }
    report.differences = out;
    report
}

/// Sizes of `a - b` and `b - a` for sorted multisets.
fn multiset_difference(a: &[u32], b: &[u32]) -> (usize, usize) {
    let (mut i, mut j, mut only_a, mut only_b) = (0, 0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => {
                only_a += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                only_b += 1;
                j += 1;
            }
        }
    }
    (only_a + a.len() - i, only_b + b.len() - j)
}

/// Calls `f` with every type id a record refers to.
fn for_each_ref(t: Type<'_>, f: impl FnMut(u32)) {
    Btf::for_each_type_ref(t.words, f)
}

fn text(btf: &Btf, off: u32) -> String {
    btf.name(StrOff(off)).into_owned()
}

fn linkage(l: u32) -> &'static str {
    match l {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "unknown",
    }
}

fn int_encoding(e: u32) -> &'static str {
    match e {
        0 => "unsigned",
        1 => "signed",
        2 => "char",
        4 => "bool",
        _ => "unknown",
    }
}

/// The label of a member, `x` or `(anon union @64)`.
fn member_label(btf: &Btf, name: u32, ty: u32, bit_off: u32) -> String {
    if name != 0 {
        return text(btf, name);
    }
    match tag_keyword(btf, TypeId(ty)) {
        "" => format!("(anon @{bit_off})"),
        kw => format!("(anon {kw} @{bit_off})"),
    }
}

/// (name, type, bit offset, bitfield size) of each member.
fn members(t: Type<'_>) -> Vec<(u32, u32, u32, u32)> {
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
fn enum_values(t: Type<'_>) -> Vec<(u32, i128)> {
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
fn pair_by_key<K: std::hash::Hash + Eq>(
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
fn pair_pass<K: std::hash::Hash + Eq>(
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
fn definition(btf: &Btf, local: &dyn Fn(TypeId) -> u32, partner: &dyn Fn(TypeId) -> u32, id: TypeId) -> String {
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
        out.push_str(&type_name(btf, TypeId(r)));
        match below(btf, TypeId(r)) {
            Some(agg) if btf.ty(agg).name_off().0 == 0 && depth < MAX_NEST => {
                out.push('{');
                define(btf, local, partner, agg, out, depth + 1);
                out.push('}');
            }
            Some(named)
                if btf.ty(named).name_off().0 != 0 && named.0 >= btf.start_id() && partner(named) != UNPAIRED =>
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
            _ if t.name_off().0 != 0 => return Some(id),
            _ => return None,
        }
    }
    None
}

/// `type struct foo *: ` before a note about a reference; nothing when the
/// path names the reference itself (an unreferenced anonymous item).
fn subject(aspect: &str, shown: &str) -> String {
    if aspect.is_empty() {
        String::new()
    } else {
        format!("{aspect} {shown}: ")
    }
}

/// A short description of an item for `+`/`-` lines.
fn describe(btf: &Btf, id: TypeId) -> String {
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
                    .map(|m| format!(": {}", type_name(btf, TypeId(m[1])))),
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
    format!("decl_tag {}{attr} on {tl}{component}", text(btf, t.name_off().0))
}

/// The top-level items of a BTF's own types, as (label, id).
fn items(btf: &Btf) -> Vec<(String, TypeId)> {
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
        } else if !referenced[(id.0 - start) as usize] {
            anon_label(btf, id)
        } else {
            continue;
        };
        out.push((label, id));
    }
    out
}

struct Engine<'a> {
    a: &'a Btf,
    b: &'a Btf,
    cls: &'a Classes,
    /// B's partner of each paired A item.
    pair: Vec<u32>,
    /// Whether a B item is paired.
    paired_b: Vec<bool>,
    own_classes_a: Option<hashbrown::HashSet<u32>>,
    own_classes_b: Option<hashbrown::HashSet<u32>>,
    /// Pairs of anonymous types being compared, innermost last.
    stack: Vec<(u32, u32)>,
    /// Nested comparisons left to do.
    budget: u32,
    out: Vec<Difference>,
}

impl Engine<'_> {
    /// Classes of all own types of A (built on first use).
    fn classes_a(&mut self) -> &hashbrown::HashSet<u32> {
        let (a, cls) = (self.a, self.cls);
        self.own_classes_a
            .get_or_insert_with(|| a.own_ids().map(|id| cls.a(id)).collect())
    }
    fn classes_b(&mut self) -> &hashbrown::HashSet<u32> {
        let (b, cls) = (self.b, self.cls);
        self.own_classes_b
            .get_or_insert_with(|| b.own_ids().map(|id| cls.b(id)).collect())
    }

    fn push(&mut self, kind: DiffKind, path: &str, aspect: impl Into<String>, old: String, new: String) {
        self.out.push(Difference {
            kind,
            change: Change::Changed,
            path: path.to_string(),
            aspect: aspect.into(),
            old: Some(old),
            new: Some(new),
        });
    }

    fn push_note(&mut self, kind: DiffKind, path: &str, aspect: String) {
        self.out.push(Difference {
            kind,
            change: Change::Changed,
            path: path.to_string(),
            aspect,
            old: None,
            new: None,
        });
    }

    fn removed(&mut self, kind: DiffKind, path: String, desc: String) {
        self.out.push(Difference {
            kind,
            change: Change::Removed,
            path,
            aspect: String::new(),
            old: Some(desc),
            new: None,
        });
    }

    fn added(&mut self, kind: DiffKind, path: String, desc: String) {
        self.out.push(Difference {
            kind,
            change: Change::Added,
            path,
            aspect: String::new(),
            old: None,
            new: Some(desc),
        });
    }

    fn run(&mut self) {
        let mut groups: HashMap<String, (Vec<TypeId>, Vec<TypeId>)> = HashMap::new();
        for (l, id) in items(self.a) {
            groups.entry(l).or_default().0.push(id);
        }
        for (l, id) in items(self.b) {
            groups.entry(l).or_default().1.push(id);
        }
        // Types first, then what refers to them by name (functions,
        // variables, unreferenced anonymous types), then tags and sections,
        // so that a group's definitions can name the partners chosen before.
        let rank = |id: TypeId| match self.a.get(id).map(|t| t.kind()) {
            Some(Kind::DeclTag | Kind::Datasec) => 2,
            Some(Kind::Func | Kind::Var) => 1,
            Some(k) if self.a.ty(id).name_off().0 == 0 && k != Kind::Fwd => 1,
            _ => 0,
        };
        let mut order: Vec<(u8, &String)> = groups
            .iter()
            .map(|(l, (va, vb))| {
                let r = match (va.first(), vb.first()) {
                    (Some(&x), _) => rank(x),
                    // B-only groups pair nothing; their rank does not matter.
                    _ => 0,
                };
                (r, l)
            })
            .collect();
        order.sort_unstable();
        let mut paired = Vec::new();
        for (_, label) in order {
            let (va, vb) = &groups[label];
            let (pairs, only_a, only_b) = self.match_group(va, vb);
            for &(x, y) in &pairs {
                self.pair[x.0 as usize] = y.0;
                self.paired_b[y.0 as usize] = true;
                paired.push((label.as_str(), x, y));
            }
            for x in only_a {
                // An anonymous type that is a root here but reached from an
                // item on the other side is not missing there.
                let c = self.cls.a(x);
                if self.a.ty(x).name_off().0 == 0 && self.classes_b().contains(&c) {
                    continue;
                }
                self.removed(DiffKind::Removed, label.clone(), describe(self.a, x));
            }
            for y in only_b {
                let c = self.cls.b(y);
                if self.b.ty(y).name_off().0 == 0 && self.classes_a().contains(&c) {
                    continue;
                }
                self.added(DiffKind::Added, label.clone(), describe(self.b, y));
            }
        }
        for (label, x, y) in paired {
            if self.cls.a(x) != self.cls.b(y) {
                self.item(label, x, y);
            }
        }
    }

    /// Pairs items of one label: equal classes first, then equal definitions
    /// (the record and the C names it refers to, anonymous aggregates
    /// spelled out), then equal shape (the record alone), then in order.
    fn match_group(&self, va: &[TypeId], vb: &[TypeId]) -> (Vec<(TypeId, TypeId)>, Vec<TypeId>, Vec<TypeId>) {
        if va.len() == 1 && vb.len() == 1 {
            return (vec![(va[0], vb[0])], vec![], vec![]);
        }
        let mut pairs = Vec::new();
        let (ra, rb) = pair_pass(&mut pairs, va, vb, |x| self.cls.a(x), |y| self.cls.b(y));
        let (ra, rb) = pair_pass(
            &mut pairs,
            &ra,
            &rb,
            |x| definition(self.a, &|i| self.cls.local_a(i), &|i| self.pair[i.0 as usize], x),
            |y| {
                definition(
                    self.b,
                    &|i| self.cls.local_b(i),
                    &|i| if self.paired_b[i.0 as usize] { i.0 } else { UNPAIRED },
                    y,
                )
            },
        );
        let (ra, rb) = pair_pass(&mut pairs, &ra, &rb, |x| self.shape_a(x), |y| self.shape_b(y));
        let n = ra.len().min(rb.len());
        pairs.extend(ra.iter().zip(&rb).map(|(&x, &y)| (x, y)));
        (pairs, ra[n..].to_vec(), rb[n..].to_vec())
    }

    /// Shape of an item: its own record's class, or for a FUNC its prototype's.
    fn shape_a(&self, id: TypeId) -> u32 {
        match self.a.ty(id).kind() {
            Kind::Func => self.cls.local_a(self.a.ty(id).type_id()),
            _ => self.cls.local_a(id),
        }
    }
    fn shape_b(&self, id: TypeId) -> u32 {
        match self.b.ty(id).kind() {
            Kind::Func => self.cls.local_b(self.b.ty(id).type_id()),
            _ => self.cls.local_b(id),
        }
    }

    fn item(&mut self, label: &str, x: TypeId, y: TypeId) {
        let (ta, tb) = (self.a.ty(x), self.b.ty(y));
        match (ta.kind(), tb.kind()) {
            (Kind::Struct | Kind::Union, Kind::Struct | Kind::Union) => self.composite(label, x, y, 0),
            (Kind::Enum | Kind::Enum64, Kind::Enum | Kind::Enum64) => self.enumeration(label, x, y),
            (Kind::Int, Kind::Int) => {
                if ta.size() != tb.size() {
                    self.push(
                        DiffKind::Size,
                        label,
                        "size",
                        ta.size().to_string(),
                        tb.size().to_string(),
                    );
                }
                if ta.int_encoding() != tb.int_encoding() {
                    let (o, n) = (int_encoding(ta.int_encoding()), int_encoding(tb.int_encoding()));
                    self.push(DiffKind::Encoding, label, "encoding", o.into(), n.into());
                }
                if ta.int_bits() != tb.int_bits() {
                    self.push(
                        DiffKind::Encoding,
                        label,
                        "bits",
                        ta.int_bits().to_string(),
                        tb.int_bits().to_string(),
                    );
                }
                if ta.int_offset() != tb.int_offset() {
                    let (o, n) = (ta.int_offset().to_string(), tb.int_offset().to_string());
                    self.push(DiffKind::Encoding, label, "bit offset", o, n);
                }
            }
            (Kind::Float, Kind::Float) => {
                if ta.size() != tb.size() {
                    self.push(
                        DiffKind::Size,
                        label,
                        "size",
                        ta.size().to_string(),
                        tb.size().to_string(),
                    );
                }
            }
            (Kind::Typedef, Kind::Typedef) => {
                self.cmp_ref(label, "type", DiffKind::Type, ta.type_id(), tb.type_id(), 0)
            }
            (Kind::Func, Kind::Func) => {
                if ta.vlen() != tb.vlen() {
                    self.push(
                        DiffKind::Linkage,
                        label,
                        "linkage",
                        linkage(ta.vlen()).into(),
                        linkage(tb.vlen()).into(),
                    );
                }
                let (pa, pb) = (ta.type_id(), tb.type_id());
                let protos = self.a.get(pa).is_some_and(|t| t.kind() == Kind::FuncProto)
                    && self.b.get(pb).is_some_and(|t| t.kind() == Kind::FuncProto);
                if protos {
                    if self.cls.a(pa) != self.cls.b(pb) {
                        self.proto(label, pa, pb, 0);
                    }
                } else {
                    self.cmp_ref(label, "type", DiffKind::Type, pa, pb, 0);
                }
            }
            (Kind::Var, Kind::Var) => {
                if ta.extra() != tb.extra() {
                    let (o, n) = (linkage(ta.extra()).into(), linkage(tb.extra()).into());
                    self.push(DiffKind::Linkage, label, "linkage", o, n);
                }
                self.cmp_ref(label, "type", DiffKind::Type, ta.type_id(), tb.type_id(), 0);
            }
            (Kind::Datasec, Kind::Datasec) => self.datasec(label, x, y),
            // The label holds everything about a tag or a forward declaration
            // that is not in another item.
            (Kind::DeclTag, Kind::DeclTag) | (Kind::Fwd, Kind::Fwd) => {}
            // An unreferenced anonymous type: its label is its C name already.
            _ => self.explain(label, "", DiffKind::Other, x, y, 0),
        }
    }

    /// Enters the pair (x, y) of anonymous types: false when it is already
    /// being compared further up (a cycle, only in corrupt input) or when the
    /// work budget is spent (shared sub-graphs in crafted input could make
    /// the descent exponential).
    fn enter(&mut self, x: TypeId, y: TypeId, depth: u32) -> bool {
        if depth > MAX_NEST || self.budget == 0 || self.stack.contains(&(x.0, y.0)) {
            return false;
        }
        self.budget -= 1;
        self.stack.push((x.0, y.0));
        true
    }

    fn composite(&mut self, path: &str, x: TypeId, y: TypeId, depth: u32) {
        if !self.enter(x, y, depth) {
            return;
        }
        self.composite_inner(path, x, y, depth);
        self.stack.pop();
    }

    fn composite_inner(&mut self, path: &str, x: TypeId, y: TypeId, depth: u32) {
        let (a, b) = (self.a, self.b);
        let (ta, tb) = (a.ty(x), b.ty(y));
        if ta.kind() != tb.kind() {
            self.push(
                DiffKind::Kind,
                path,
                "kind",
                tag_keyword(a, x).into(),
                tag_keyword(b, y).into(),
            );
            return;
        }
        if ta.size() != tb.size() {
            self.push(
                DiffKind::Size,
                path,
                "size",
                ta.size().to_string(),
                tb.size().to_string(),
            );
        }
        let (ma, mb) = (members(ta), members(tb));
        let (pairs, only_a, only_b) = pair_by_key(
            ma.iter().map(|m| a.str_at(StrOff(m.0)).unwrap_or(b"")),
            mb.iter().map(|m| b.str_at(StrOff(m.0)).unwrap_or(b"")),
        );
        for &(i, j) in &pairs {
            let ((na, tya, offa, bitsa), (_, tyb, offb, bitsb)) = (ma[i], mb[j]);
            let mp = format!("{path}.{}", member_label(a, na, tya, offa));
            if offa != offb {
                self.push(DiffKind::Offset, &mp, "offset", offa.to_string(), offb.to_string());
            }
            if bitsa != bitsb {
                let show = |n: u32| if n == 0 { "none".to_string() } else { n.to_string() };
                self.push(DiffKind::Bitfield, &mp, "bitfield", show(bitsa), show(bitsb));
            }
            let (ra, rb) = (TypeId(tya), TypeId(tyb));
            if self.cls.a(ra) != self.cls.b(rb) {
                if self.anon_aggregate(a, ra) && self.anon_aggregate(b, rb) {
                    self.composite(&mp, ra, rb, depth + 1);
                } else {
                    self.cmp_ref(&mp, "type", DiffKind::MemberType, ra, rb, depth);
                }
            }
        }
        let bits = |n: u32| if n == 0 { String::new() } else { format!(":{n}") };
        for i in only_a {
            let (n, ty, off, bs) = ma[i];
            let mp = format!("{path}.{}", member_label(a, n, ty, off));
            self.removed(
                DiffKind::Member,
                mp,
                format!("{} @{off}{}", type_name(a, TypeId(ty)), bits(bs)),
            );
        }
        for j in only_b {
            let (n, ty, off, bs) = mb[j];
            let mp = format!("{path}.{}", member_label(b, n, ty, off));
            self.added(
                DiffKind::Member,
                mp,
                format!("{} @{off}{}", type_name(b, TypeId(ty)), bits(bs)),
            );
        }
        if pairs.windows(2).any(|w| w[0].1 > w[1].1) {
            self.push_note(DiffKind::Member, path, "member order changed".into());
        }
    }

    fn anon_aggregate(&self, btf: &Btf, id: TypeId) -> bool {
        btf.get(id)
            .is_some_and(|t| matches!(t.kind(), Kind::Struct | Kind::Union) && t.name_off().0 == 0)
    }

    fn enumeration(&mut self, path: &str, x: TypeId, y: TypeId) {
        let (a, b) = (self.a, self.b);
        let (ta, tb) = (a.ty(x), b.ty(y));
        if ta.kind() != tb.kind() {
            let k = |t: Type<'_>| t.kind().name().to_lowercase();
            self.push(DiffKind::Kind, path, "kind", k(ta), k(tb));
        }
        if ta.size() != tb.size() {
            self.push(
                DiffKind::Size,
                path,
                "size",
                ta.size().to_string(),
                tb.size().to_string(),
            );
        }
        if ta.kflag() != tb.kflag() {
            let s = |f: bool| if f { "signed" } else { "unsigned" }.to_string();
            self.push(DiffKind::Encoding, path, "signedness", s(ta.kflag()), s(tb.kflag()));
        }
        let (va, vb) = (enum_values(ta), enum_values(tb));
        let (pairs, only_a, only_b) = pair_by_key(
            va.iter().map(|v| a.str_at(StrOff(v.0)).unwrap_or(b"")),
            vb.iter().map(|v| b.str_at(StrOff(v.0)).unwrap_or(b"")),
        );
        for (i, j) in pairs {
            if va[i].1 != vb[j].1 {
                let p = format!("{path}.{}", text(a, va[i].0));
                self.push(
                    DiffKind::EnumValue,
                    &p,
                    "value",
                    va[i].1.to_string(),
                    vb[j].1.to_string(),
                );
            }
        }
        for i in only_a {
            self.removed(
                DiffKind::EnumValue,
                format!("{path}.{}", text(a, va[i].0)),
                format!("value {}", va[i].1),
            );
        }
        for j in only_b {
            self.added(
                DiffKind::EnumValue,
                format!("{path}.{}", text(b, vb[j].0)),
                format!("value {}", vb[j].1),
            );
        }
    }

    fn datasec(&mut self, path: &str, x: TypeId, y: TypeId) {
        let (a, b) = (self.a, self.b);
        let (ta, tb) = (a.ty(x), b.ty(y));
        if ta.size() != tb.size() {
            self.push(
                DiffKind::Size,
                path,
                "size",
                ta.size().to_string(),
                tb.size().to_string(),
            );
        }
        let entry_name = |btf: &Btf, v: u32| {
            btf.get(TypeId(v))
                .map(|t| text(btf, t.name_off().0))
                .unwrap_or_default()
        };
        let ea: Vec<[u32; 3]> = ta.triples().collect();
        let eb: Vec<[u32; 3]> = tb.triples().collect();
        let (pairs, only_a, only_b) = pair_by_key(
            ea.iter().map(|e| entry_name(a, e[0])),
            eb.iter().map(|e| entry_name(b, e[0])),
        );
        for (i, j) in pairs {
            let p = format!("{path}.{}", entry_name(a, ea[i][0]));
            if ea[i][1] != eb[j][1] {
                self.push(
                    DiffKind::Datasec,
                    &p,
                    "offset",
                    ea[i][1].to_string(),
                    eb[j][1].to_string(),
                );
            }
            if ea[i][2] != eb[j][2] {
                self.push(
                    DiffKind::Datasec,
                    &p,
                    "size",
                    ea[i][2].to_string(),
                    eb[j][2].to_string(),
                );
            }
        }
        for i in only_a {
            let [v, off, sz] = ea[i];
            self.removed(
                DiffKind::Datasec,
                format!("{path}.{}", entry_name(a, v)),
                format!("offset {off}, size {sz}"),
            );
        }
        for j in only_b {
            let [v, off, sz] = eb[j];
            self.added(
                DiffKind::Datasec,
                format!("{path}.{}", entry_name(b, v)),
                format!("offset {off}, size {sz}"),
            );
        }
    }

    /// Return type and parameters of two FUNC_PROTOs.
    fn proto(&mut self, path: &str, x: TypeId, y: TypeId, depth: u32) {
        if !self.enter(x, y, depth) {
            return;
        }
        self.proto_inner(path, x, y, depth);
        self.stack.pop();
    }

    fn proto_inner(&mut self, path: &str, x: TypeId, y: TypeId, depth: u32) {
        let (a, b) = (self.a, self.b);
        let (ta, tb) = (a.ty(x), b.ty(y));
        self.cmp_ref(path, "return", DiffKind::Return, ta.type_id(), tb.type_id(), depth);
        let pa: Vec<[u32; 2]> = ta.pairs().collect();
        let pb: Vec<[u32; 2]> = tb.pairs().collect();
        for (i, (p, q)) in pa.iter().zip(&pb).enumerate() {
            let (na, nb) = (text(a, p[0]), text(b, q[0]));
            if na != nb {
                let show = |s: String| if s.is_empty() { "(none)".to_string() } else { s };
                self.push(
                    DiffKind::ParamName,
                    path,
                    format!("param {} name", i + 1),
                    show(na),
                    show(nb),
                );
            }
            self.cmp_ref(
                path,
                &format!("param {}", i + 1),
                DiffKind::Param,
                TypeId(p[1]),
                TypeId(q[1]),
                depth,
            );
        }
        let param = |btf: &Btf, i: usize, p: [u32; 2], n: usize| {
            if p[1] == 0 && i + 1 == n {
                format!("param {} ...", i + 1)
            } else {
                format!("param {} {}", i + 1, declaration(btf, TypeId(p[1]), &text(btf, p[0])))
            }
        };
        for (i, &p) in pa.iter().enumerate().skip(pb.len()) {
            self.removed(DiffKind::Param, path.to_string(), param(a, i, p, pa.len()));
        }
        for (i, &q) in pb.iter().enumerate().skip(pa.len()) {
            self.added(DiffKind::Param, path.to_string(), param(b, i, q, pb.len()));
        }
    }

    /// Compares two type references by C name; when the names agree but the
    /// structure does not, looks for the reason below them.
    fn cmp_ref(&mut self, path: &str, aspect: &str, kind: DiffKind, x: TypeId, y: TypeId, depth: u32) {
        if self.cls.a(x) == self.cls.b(y) {
            return;
        }
        let (sa, sb) = (type_name(self.a, x), type_name(self.b, y));
        if sa != sb {
            self.push(kind, path, aspect, sa, sb);
            return;
        }
        self.explain(path, aspect, kind, x, y, depth);
    }

    /// Two references with one C name and different structure: walk both
    /// through the anonymous types they share to where they part.
    fn explain(&mut self, path: &str, aspect: &str, kind: DiffKind, mut x: TypeId, mut y: TypeId, depth: u32) {
        if depth > MAX_NEST {
            return;
        }
        let (a, b) = (self.a, self.b);
        let shown = type_name(a, x);
        // Nested findings read `struct s.cb param 2: ...`, not `struct s.cb: param 2 ...`.
        let sub = if aspect == "type" || aspect.is_empty() {
            path.to_string()
        } else {
            format!("{path} {aspect}")
        };
        for _ in 0..64 {
            if self.cls.a(x) == self.cls.b(y) {
                return;
            }
            let (Some(tx), Some(ty)) = (a.get(x), b.get(y)) else {
                break;
            };
            let (kx, ky) = (tx.kind(), ty.kind());
            let anonymous = tx.name_off().0 == 0 && ty.name_off().0 == 0;
            match (kx, ky) {
                (kx, ky)
                    if kx == ky
                        && matches!(
                            kx,
                            Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag
                        ) =>
                {
                    x = tx.type_id();
                    y = ty.type_id();
                }
                (Kind::Array, Kind::Array) => {
                    let ((ea, ia, _), (eb, ib, _)) = (tx.array(), ty.array());
                    if self.cls.a(ea) == self.cls.b(eb) {
                        self.cmp_ref(
                            path,
                            format!("{aspect} index type").trim_start(),
                            kind,
                            ia,
                            ib,
                            depth + 1,
                        );
                        return;
                    }
                    x = ea;
                    y = eb;
                }
                (Kind::FuncProto, Kind::FuncProto) => {
                    self.proto(&sub, x, y, depth + 1);
                    return;
                }
                (Kind::Struct | Kind::Union, Kind::Struct | Kind::Union) if anonymous => {
                    self.composite(&sub, x, y, depth + 1);
                    return;
                }
                (Kind::Enum | Kind::Enum64, Kind::Enum | Kind::Enum64) if anonymous => {
                    self.enumeration(&sub, x, y);
                    return;
                }
                _ if tx.name_off().0 != 0 || ty.name_off().0 != 0 => {
                    self.named_leaf(path, aspect, &shown, x, y);
                    return;
                }
                _ => break,
            }
        }
        self.push_note(
            DiffKind::Other,
            path,
            format!("{}structure differs", subject(aspect, &shown)),
        );
    }

    /// A named type reached from a reference whose C name did not change.
    fn named_leaf(&mut self, path: &str, aspect: &str, shown: &str, x: TypeId, y: TypeId) {
        let (a, b) = (self.a, self.b);
        let (base_x, base_y) = (x.0 < a.start_id(), y.0 < b.start_id());
        if base_x || base_y {
            let leaf = type_name(a, x);
            let note = if base_x && base_y {
                format!("{}{leaf} differs between the two bases", subject(aspect, shown))
            } else {
                format!(
                    "{}{leaf} is in {}'s base only",
                    subject(aspect, shown),
                    if base_x { "A" } else { "B" }
                )
            };
            self.push_note(DiffKind::Retarget, path, note);
            return;
        }
        if self.pair[x.0 as usize] == y.0 {
            // The pair is an item of its own and reports its differences there.
            return;
        }
        // Item labels carry the kind: `fwd struct x`, `float 'double'`.
        let desc = |btf: &Btf, id: TypeId| {
            let l = named_label(btf, id).unwrap_or_else(|| type_name(btf, id));
            match describe(btf, id) {
                d if d.is_empty() => l,
                d => format!("{l} ({d})"),
            }
        };
        let (o, n) = (desc(a, x), desc(b, y));
        let what = if aspect.is_empty() {
            "refers to".to_string()
        } else {
            format!("{aspect} {shown} refers to")
        };
        self.push(DiffKind::Retarget, path, what, o, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, LINKAGE_GLOBAL};

    /// An anonymous struct whose members all point back at it (corrupt: C
    /// cannot write it), with a member type changed in B.
    fn self_referencing_anonymous(n: u32, changed: bool) -> Btf {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let p = b.add_ref(Kind::Ptr, TypeId(3));
        b.begin(Kind::Struct, b"", 8 * n + 4, false);
        for i in 0..n {
            b.push_member(format!("p{i}").as_bytes(), p, 64 * i, 0);
        }
        b.push_member(b"v", if changed { p } else { int }, 64 * n, 0);
        b.begin(Kind::Struct, b"outer", 8, false);
        b.push_member(b"s", p, 0, 0);
        b
    }

    #[test]
    fn anonymous_cycles_terminate() {
        let r = compare(
            &self_referencing_anonymous(8, false),
            &self_referencing_anonymous(8, true),
        );
        let lines: Vec<String> = r.differences.iter().map(|d| d.to_string()).collect();
        assert!(
            lines.contains(&"struct outer.s.v: type int -> struct {...} *".to_string()),
            "{lines:?}"
        );
    }

    #[test]
    fn pairing_by_key_keeps_order_and_duplicates() {
        let (p, a, b) = pair_by_key(["x", "", "y", ""].into_iter(), ["", "y", "z", ""].into_iter());
        assert_eq!(p, [(1, 0), (2, 1), (3, 3)]);
        assert_eq!(a, [0]);
        assert_eq!(b, [2]);
    }

    #[test]
    fn multiset_difference_counts_both_sides() {
        assert_eq!(multiset_difference(&[1, 1, 2, 5], &[1, 2, 2, 3]), (2, 2));
        assert_eq!(multiset_difference(&[], &[4]), (0, 1));
    }

    #[test]
    fn items_and_their_labels() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let s = b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"", TypeId(4), 0, 0);
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
        let local = |i: TypeId| i.0 * 10;
        let none = |_: TypeId| UNPAIRED;
        assert_eq!(definition(&b, &local, &none, s), "#30(union {...}{#20(int;)};)");
        assert_eq!(definition(&b, &local, &none, p), "#40(struct s;)");
        assert_eq!(definition(&b, &local, &|i: TypeId| i.0 + 100, p), "#40(struct s@103;)");
    }
}
