//! The comparison's driver: the verdict, matching of top-level items by
//! label, and the dispatch of each changed pair to its field comparison
//! (in [`super::fields`]).

use hashbrown::HashMap;

use super::equiv::{self, Classes};
use super::items::{UNPAIRED, definition, describe, int_encoding, items, linkage, pair_pass};
use super::{Change, DiffKind, Difference, Report, Verdict};
use crate::btf::{Btf, Kind, TypeId};

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
        layout: None,
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

pub(super) struct Engine<'a> {
    pub(super) a: &'a Btf,
    pub(super) b: &'a Btf,
    pub(super) cls: &'a Classes,
    /// B's partner of each paired A item.
    pub(super) pair: Vec<u32>,
    /// Whether a B item is paired.
    pub(super) paired_b: Vec<bool>,
    pub(super) own_classes_a: Option<hashbrown::HashSet<u32>>,
    pub(super) own_classes_b: Option<hashbrown::HashSet<u32>>,
    /// Pairs of anonymous types being compared, innermost last.
    pub(super) stack: Vec<(u32, u32)>,
    /// Nested comparisons left to do.
    pub(super) budget: u32,
    pub(super) out: Vec<Difference>,
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

    pub(super) fn push(&mut self, kind: DiffKind, path: &str, aspect: impl Into<String>, old: String, new: String) {
        self.out.push(Difference {
            kind,
            change: Change::Changed,
            path: path.to_string(),
            aspect: aspect.into(),
            old: Some(old),
            new: Some(new),
        });
    }

    pub(super) fn push_note(&mut self, kind: DiffKind, path: &str, aspect: String) {
        self.out.push(Difference {
            kind,
            change: Change::Changed,
            path: path.to_string(),
            aspect,
            old: None,
            new: None,
        });
    }

    pub(super) fn removed(&mut self, kind: DiffKind, path: String, desc: String) {
        self.out.push(Difference {
            kind,
            change: Change::Removed,
            path,
            aspect: String::new(),
            old: Some(desc),
            new: None,
        });
    }

    pub(super) fn added(&mut self, kind: DiffKind, path: String, desc: String) {
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
            Some(k) if self.a.ty(id).name_off().get() == 0 && k != Kind::Fwd => 1,
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
                self.pair[x.get() as usize] = y.get();
                self.paired_b[y.get() as usize] = true;
                paired.push((label.as_str(), x, y));
            }
            for x in only_a {
                // An anonymous type that is a root here but reached from an
                // item on the other side is not missing there.
                let c = self.cls.a(x);
                if self.a.ty(x).name_off().get() == 0 && self.classes_b().contains(&c) {
                    continue;
                }
                self.removed(DiffKind::Removed, label.clone(), describe(self.a, x));
            }
            for y in only_b {
                let c = self.cls.b(y);
                if self.b.ty(y).name_off().get() == 0 && self.classes_a().contains(&c) {
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
            |x| definition(self.a, &|i| self.cls.local_a(i), &|i| self.pair[i.get() as usize], x),
            |y| {
                definition(
                    self.b,
                    &|i| self.cls.local_b(i),
                    &|i| {
                        if self.paired_b[i.get() as usize] {
                            i.get()
                        } else {
                            UNPAIRED
                        }
                    },
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Endian;

    /// An anonymous struct whose members all point back at it (corrupt: C
    /// cannot write it), with a member type changed in B.
    fn self_referencing_anonymous(n: u32, changed: bool) -> Btf {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let p = b.add_ref(Kind::Ptr, TypeId::new(3));
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
    fn multiset_difference_counts_both_sides() {
        assert_eq!(multiset_difference(&[1, 1, 2, 5], &[1, 2, 2, 3]), (2, 2));
        assert_eq!(multiset_difference(&[], &[4]), (0, 1));
    }
}
