//! The field-by-field comparison of two paired items: members, enum values,
//! section entries, prototypes, and references whose C name stayed while
//! their structure changed.

use super::DiffKind;
use super::engine::Engine;
use super::items::{MAX_NEST, describe, enum_values, member_label, members, pair_by_key, subject, text};
use super::render::{declaration, named_label, tag_keyword, type_name};
use crate::btf::{Btf, Kind, StrOff, Type, TypeId};

impl Engine<'_> {
    /// Enters the pair (x, y) of anonymous types: false when it is already
    /// being compared further up (a cycle, only in corrupt input) or when the
    /// work budget is spent (shared sub-graphs in crafted input could make
    /// the descent exponential).
    fn enter(&mut self, x: TypeId, y: TypeId, depth: u32) -> bool {
        if depth > MAX_NEST || self.budget == 0 || self.stack.contains(&(x.get(), y.get())) {
            return false;
        }
        self.budget -= 1;
        self.stack.push((x.get(), y.get()));
        true
    }

    pub(super) fn composite(&mut self, path: &str, x: TypeId, y: TypeId, depth: u32) {
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
            ma.iter().map(|m| a.str_at(StrOff::new(m.0)).unwrap_or(b"")),
            mb.iter().map(|m| b.str_at(StrOff::new(m.0)).unwrap_or(b"")),
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
            let (ra, rb) = (TypeId::new(tya), TypeId::new(tyb));
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
                format!("{} @{off}{}", type_name(a, TypeId::new(ty)), bits(bs)),
            );
        }
        for j in only_b {
            let (n, ty, off, bs) = mb[j];
            let mp = format!("{path}.{}", member_label(b, n, ty, off));
            self.added(
                DiffKind::Member,
                mp,
                format!("{} @{off}{}", type_name(b, TypeId::new(ty)), bits(bs)),
            );
        }
        if pairs.windows(2).any(|w| w[0].1 > w[1].1) {
            self.push_note(DiffKind::Member, path, "member order changed".into());
        }
    }

    fn anon_aggregate(&self, btf: &Btf, id: TypeId) -> bool {
        btf.get(id)
            .is_some_and(|t| matches!(t.kind(), Kind::Struct | Kind::Union) && t.name_off().get() == 0)
    }

    pub(super) fn enumeration(&mut self, path: &str, x: TypeId, y: TypeId) {
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
            va.iter().map(|v| a.str_at(StrOff::new(v.0)).unwrap_or(b"")),
            vb.iter().map(|v| b.str_at(StrOff::new(v.0)).unwrap_or(b"")),
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

    pub(super) fn datasec(&mut self, path: &str, x: TypeId, y: TypeId) {
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
            btf.get(TypeId::new(v))
                .map(|t| text(btf, t.name_off().get()))
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
    pub(super) fn proto(&mut self, path: &str, x: TypeId, y: TypeId, depth: u32) {
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
                TypeId::new(p[1]),
                TypeId::new(q[1]),
                depth,
            );
        }
        let param = |btf: &Btf, i: usize, p: [u32; 2], n: usize| {
            if p[1] == 0 && i + 1 == n {
                format!("param {} ...", i + 1)
            } else {
                format!(
                    "param {} {}",
                    i + 1,
                    declaration(btf, TypeId::new(p[1]), &text(btf, p[0]))
                )
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
    pub(super) fn cmp_ref(&mut self, path: &str, aspect: &str, kind: DiffKind, x: TypeId, y: TypeId, depth: u32) {
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
    pub(super) fn explain(
        &mut self,
        path: &str,
        aspect: &str,
        kind: DiffKind,
        mut x: TypeId,
        mut y: TypeId,
        depth: u32,
    ) {
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
            let anonymous = tx.name_off().get() == 0 && ty.name_off().get() == 0;
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
                _ if tx.name_off().get() != 0 || ty.name_off().get() != 0 => {
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
        let (base_x, base_y) = (x.get() < a.start_id(), y.get() < b.start_id());
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
        if self.pair[x.get() as usize] == y.get() {
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
