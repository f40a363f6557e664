//! libbpf's struct pass: for each struct or union, candidates of the same
//! shallow shape are compared by a side-by-side walk of both type graphs
//! (`is_equiv`) that records a hypothetical canonical → candidate map,
//! merged on success.

use super::hypot::Mark;
use super::*;

const MAX_EMBED_DEPTH: u32 = 4096;

/// How deep libbpf 1.8 compares two candidates for identity.
const IDENTICAL_DEPTH: u32 = 16;

/// A pair waiting on the walk's stack, with where its two records start
/// (looked up once, when it is queued, for the prefetch; [`NO_REC`] for
/// void or an id the offsets do not cover, which the step looks up again).
#[derive(Clone, Copy)]
pub(super) struct Queued {
    c: TypeId,
    k: TypeId,
    oc: u32,
    ok: u32,
}

/// [`Queued`]'s offset of a record it did not look up.
pub(super) const NO_REC: u32 = u32::MAX;

/// The record of a queued id.
#[inline(always)]
pub(super) fn rec_queued<'w>(words: &'w [u32], nodes: &Offsets, id: TypeId, off: u32) -> &'w [u32] {
    if off != NO_REC {
        &words[off as usize..]
    } else {
        rec_from(words, nodes, id)
    }
}

/// Queues a pair for the equivalence walk, unless it is settled already.
/// `map` does not change during one walk, so a pair whose ends resolve to the
/// same type would return "equivalent" without side effects when popped. So
/// would a pair the hypothetical map already holds: its canonical side is a
/// key, so it is not a FWD that resolves elsewhere, and entries are never
/// removed during a walk (half of a vmlinux's 18.8 M walk steps were such
/// repeats, each reading a canonical-side record first).
#[inline(always)]
pub(super) fn push_pair<L: Links>(st: &mut Vec<Queued>, w: Walked<'_, L>, c: TypeId, k: TypeId) {
    // The map first: its pages stay in cache, the links are two loads
    // anywhere in the id space, and it answers more pushes (8.1 M against
    // 6.4 M settled of 25.2 M in a vmlinux).
    if w.hypot.get(k) != Some(c) && !w.link.settled(c, k) {
        // Its step reads both records: ask for them now, so that the
        // misses of a struct's members overlap instead of coming one by one,
        // and keep where they are for the step.
        let oc = offset_of(w, c);
        let ok = offset_of(w, k);
        st.push(Queued { c, k, oc, ok });
    }
}

/// Where `id`'s record starts ([`NO_REC`] for void or a stray id), asking
/// the CPU for its cache line.
#[inline(always)]
pub(super) fn offset_of<L>(w: Walked<'_, L>, id: TypeId) -> u32 {
    match w.nodes.try_get(id) {
        Some(at) if id != TypeId::VOID && (at as usize) < w.words.len() => {
            prefetch(w.words, at);
            at
        }
        _ => NO_REC,
    }
}

/// What [`push_pair`] reads besides the stack.
pub(super) struct Walked<'d, L> {
    words: &'d [u32],
    nodes: &'d Offsets,
    link: &'d L,
    hypot: &'d HypotMap,
}

impl<L> Clone for Walked<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<L> Copy for Walked<'_, L> {}

/// Asks the CPU for the cache line of `words[at]` (`at` is in bounds).
#[inline(always)]
pub(super) fn prefetch(words: &[u32], at: u32) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        debug_assert!((at as usize) < words.len());
        // SAFETY: a prefetch only hints the cache, and `at` is in bounds.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(words.as_ptr().add(at as usize).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (words, at);
}

/// A walk of the chunked passes read a record cut down to a stub
/// ([`stub::stub_deferred`]): they give up.
#[cold]
pub(super) fn stub_reached(a: TypeId, b: TypeId) -> DedupError {
    DedupError::Invalid {
        id: a.min(b),
        what: "a struct walk reached a record stubbed after an earlier chunk",
    }
}

impl<L: Links> Dedup<'_, L> {
    pub(super) fn identical_arrays(&self, a: TypeId, b: TypeId) -> bool {
        let (x, y) = (rec!(self, a), rec!(self, b));
        x.kind() == ARRAY && y.kind() == ARRAY && equal_array(x, y)
    }

    pub(super) fn identical_ptrs(&self, a: TypeId, b: TypeId) -> bool {
        let (x, y) = (rec!(self, a), rec!(self, b));
        x.kind() == PTR && y.kind() == PTR && x[2] == y[2]
    }

    /// Structs equal down to raw member ids (or identical arrays/structs there).
    pub(super) fn identical_structs(&self, a: TypeId, b: TypeId, depth: u32) -> Result<bool, DedupError> {
        if depth > MAX_EMBED_DEPTH {
            return Err(DedupError::TooDeep {
                id: a,
                depth: MAX_EMBED_DEPTH,
            });
        }
        let (x, y) = (rec!(self, a), rec!(self, b));
        if self.st.overlap && stub::either_is_stub(x, y) {
            return Err(stub_reached(a, b));
        }
        if !is_composite(x.kind()) || x.kind() != y.kind() || !shallow_equal_struct(x, y) {
            return Ok(false);
        }
        for (m1, m2) in x[3..].chunks_exact(3).zip(y[3..].chunks_exact(3)) {
            let (t1, t2) = (TypeId::new(m1[1]), TypeId::new(m2[1]));
            if t1 != t2 && !self.identical_arrays(t1, t2) && !self.identical_structs(t1, t2, depth + 1)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// libbpf 1.8's test for a second candidate met for one canonical type
    /// (5ee9fbf7): the two are equal in kind and content, through the
    /// types they refer to, to `depth` levels of arrays, structs, unions and
    /// prototypes (a chain of reference types does not count a level).
    /// Two quirks of that libbpf are kept: arrays compare their element
    /// counts and sizes only (the element and index types of the first one
    /// are compared with themselves), and DECL_TAG, VAR and DATASEC are
    /// never identical.
    pub(super) fn identical_types(&self, a: TypeId, b: TypeId, depth: u32) -> Result<bool, DedupError> {
        let (mut a, mut b) = (a, b);
        // A chain of reference types is followed without counting a level;
        // one longer than there are ids is a cycle, where libbpf would spin
        // for ever (its reference pass fails on such a cycle anyway).
        let mut chain = 0u32;
        loop {
            if depth == 0 {
                return Ok(false);
            }
            let (x, y) = (rec!(self, a), rec!(self, b));
            if self.st.overlap && stub::either_is_stub(x, y) {
                return Err(stub_reached(a, b));
            }
            if x.kind() != y.kind() {
                return Ok(false);
            }
            return Ok(match x.kind() {
                0 => true,
                INT => equal_int_tag(x, y),
                ENUM | ENUM64 => compat_enum(x, y),
                FWD | FLOAT => equal_common(x, y),
                CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG => {
                    if x[0] != y[0] || x[1] != y[1] {
                        return Ok(false);
                    }
                    chain += 1;
                    if chain > self.st.end {
                        return Err(DedupError::Loop { id: a });
                    }
                    (a, b) = (TypeId::new(x[2]), TypeId::new(y[2]));
                    continue;
                }
                ARRAY => equal_common(x, y) && x[5] == y[5],
                STRUCT | UNION => {
                    if !shallow_equal_struct(x, y) {
                        return Ok(false);
                    }
                    for (m1, m2) in x[3..].chunks_exact(3).zip(y[3..].chunks_exact(3)) {
                        if m1[1] != m2[1] && !self.identical_types(TypeId::new(m1[1]), TypeId::new(m2[1]), depth - 1)? {
                            return Ok(false);
                        }
                    }
                    true
                }
                FUNC_PROTO => {
                    if !compat_fnproto(x, y) {
                        return Ok(false);
                    }
                    if x[2] != y[2] && !self.identical_types(TypeId::new(x[2]), TypeId::new(y[2]), depth - 1)? {
                        return Ok(false);
                    }
                    for (p1, p2) in x[3..].chunks_exact(2).zip(y[3..].chunks_exact(2)) {
                        if p1[1] != p2[1] && !self.identical_types(TypeId::new(p1[1]), TypeId::new(p2[1]), depth - 1)? {
                            return Ok(false);
                        }
                    }
                    true
                }
                _ => false,
            });
        }
    }

    /// Whether `h`, the candidate the walk recorded for a canonical type,
    /// and `c`, a second one met for it, count as the same.
    fn second_candidate_passes(&self, h: TypeId, c: TypeId) -> Result<bool, DedupError> {
        match self.st.rules {
            Rules::Libbpf374f7807 => {
                Ok(self.identical_arrays(h, c) || self.identical_structs(h, c, 0)? || self.identical_ptrs(h, c))
            }
            Rules::Libbpf1_8 => self.identical_types(h, c, IDENTICAL_DEPTH),
        }
    }

    pub(super) fn clear_hypot(&mut self) {
        self.st.hypot.clear();
        self.st.adjust_canon = false;
    }

    /// libbpf's `btf_dedup_is_equiv`, walking pairs from an explicit stack in
    /// the recursion's pre-order.
    #[inline(never)]
    pub(super) fn is_equiv(&mut self, cand: TypeId, canon: TypeId) -> Result<bool, DedupError> {
        self.st.eq_stack.clear();
        let w = Walked {
            words: self.words,
            nodes: &self.st.nodes,
            link: &self.st.link,
            hypot: &self.st.hypot,
        };
        push_pair(&mut self.st.eq_stack, w, cand, canon);
        while let Some(q) = self.st.eq_stack.pop() {
            if !self.equiv_step(q)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One node of the walk: `false` ends the check as "not equivalent";
    /// children to compare are pushed onto `eq_stack`. Every pair on the stack
    /// went through [`push_pair`], so libbpf's first test (both ends resolve
    /// to the same type) is known to fail here.
    #[inline]
    pub(super) fn equiv_step(&mut self, q: Queued) -> Result<bool, DedupError> {
        let Queued { c, k, oc, ok } = q;
        // resolve_fwd, fused with reading the record the step needs anyway.
        // A key of the hypothetical map is never a FWD that resolves
        // elsewhere, so one look-up with the resolved id answers both "is
        // this canonical type mapped already" and "record it" (almost every
        // popped pair is new: the queue drops pairs the map holds).
        let mut kw = rec_queued(self.words, &self.st.nodes, k, ok);
        let mut k = k;
        if kw.kind() == FWD {
            let r = self.resolve(k);
            let rw = rec_from(self.words, &self.st.nodes, r);
            if rw.kind() != FWD {
                (k, kw) = (r, rw);
            }
        }
        let cw = rec_queued(self.words, &self.st.nodes, c, oc);
        if self.st.overlap && stub::either_is_stub(cw, kw) {
            return Err(stub_reached(c, k));
        }
        let (ck, kk) = (cw.kind(), kw.kind());
        // what the merge after a successful walk looks at (see merge_hypot)
        let mark = match (ck == FWD || kk == FWD, is_composite(ck)) {
            (true, _) => Mark::Fwd,
            (false, true) => Mark::Composites,
            (false, false) => Mark::No,
        };
        let hit = self.st.hypot.get_or_insert_marked(k, c, mark);
        if let Some(h) = hit {
            if h == c {
                return Ok(true);
            }
            return self.second_candidate_passes(h, c);
        }

        if cw[0] != kw[0] {
            return Ok(false);
        }
        if (ck == FWD || kk == FWD) && ck != kk {
            let fwd_kind = |w: &[u32]| if w.kflag() { UNION } else { STRUCT };
            let (real, fwd) = if ck == FWD {
                (kk, fwd_kind(cw))
            } else {
                let fwd = fwd_kind(kw);
                if fwd == ck && k.get() < self.st.start {
                    // equivalence would need the immutable base FWD resolved
                    self.st.adjust_canon = true;
                }
                (ck, fwd)
            };
            return Ok(fwd == real);
        }
        if ck != kk {
            return Ok(false);
        }
        let st = &mut self.st.eq_stack;
        let w = Walked {
            words: self.words,
            nodes: &self.st.nodes,
            link: &self.st.link,
            hypot: &self.st.hypot,
        };
        match ck {
            INT => Ok(equal_int_tag(cw, kw)),
            ENUM | ENUM64 => Ok(compat_enum(exact(cw), exact(kw))),
            FWD | FLOAT => Ok(equal_common(cw, kw)),
            CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG => {
                if cw[1] != kw[1] {
                    return Ok(false);
                }
                push_pair(st, w, TypeId::new(cw[2]), TypeId::new(kw[2]));
                Ok(true)
            }
            ARRAY => {
                if !(equal_common(cw, kw) && cw[5] == kw[5]) {
                    return Ok(false);
                }
                // index type first, then element type
                push_pair(st, w, TypeId::new(cw[3]), TypeId::new(kw[3]));
                push_pair(st, w, TypeId::new(cw[4]), TypeId::new(kw[4]));
                Ok(true)
            }
            STRUCT | UNION => {
                // libbpf's shallow comparison (common part, then member names
                // and offsets) fused with queuing the member pairs: on a
                // mismatch the walk ends and whatever was queued is dropped.
                if !equal_common(cw, kw) {
                    return Ok(false);
                }
                // A member pair equal to the one before it would be popped
                // after that one's whole walk and answer "equivalent" from
                // the hypothetical map without side effects: skip it.
                // Queued first to last, then turned around so the first member
                // pops first, as in libbpf's recursion (equal info: equal
                // lengths).
                let n = cw.vlen();
                let (cm, km) = (&cw[3..3 + 3 * n], &kw[3..3 + 3 * n]);
                let from = st.len();
                let mut prev = (u32::MAX, u32::MAX);
                for (a, b) in cm.chunks_exact(3).zip(km.chunks_exact(3)) {
                    if a[0] != b[0] || a[2] != b[2] {
                        return Ok(false);
                    }
                    if (a[1], b[1]) != prev {
                        prev = (a[1], b[1]);
                        push_pair(st, w, TypeId::new(a[1]), TypeId::new(b[1]));
                    }
                }
                st[from..].reverse();
                Ok(true)
            }
            FUNC_PROTO => {
                if !compat_fnproto(exact(cw), exact(kw)) {
                    return Ok(false);
                }
                // as for struct members, a repeat of the previous pair (the
                // return type's for the first parameter) is settled
                let n = cw.vlen();
                let (cp, kp) = (&cw[3..3 + 2 * n], &kw[3..3 + 2 * n]);
                let from = st.len();
                let mut prev = (cw[2], kw[2]);
                for (a, b) in cp.chunks_exact(2).zip(kp.chunks_exact(2)) {
                    if (a[1], b[1]) != prev {
                        prev = (a[1], b[1]);
                        push_pair(st, w, TypeId::new(a[1]), TypeId::new(b[1]));
                    }
                }
                st[from..].reverse();
                push_pair(st, w, TypeId::new(cw[2]), TypeId::new(kw[2]));
                Ok(true)
            }
            _ => Err(DedupError::Invalid {
                id: c,
                what: "struct equivalence reached a VAR, DATASEC or DECL_TAG",
            }),
        }
    }

    #[inline(never)]
    pub(super) fn merge_hypot(&mut self) {
        // Only called after a successful walk, where every recorded pair
        // passed its kind test: equal kinds, or a FWD against a struct or
        // union. A pair whose candidate side is neither FWD nor composite
        // therefore has a reference type (never mapped during this pass) or a
        // primitive on both sides, and none of the rules below fires. The
        // walk marked the others when it read the candidate's record.
        //
        // A struct or union only ever links to a struct or union (a FWD
        // links to one of those or to a FWD), so a pair the walk read as two
        // composites still is one here, wherever its ends link by now. Of the
        // three rules only the last can fire for it, and only if the
        // candidate's end is not mapped yet: two loads of the candidate's CU
        // decide most pairs, where reading both records took two misses.
        for i in 0..self.st.hypot.len() {
            let Some((k, c, fwd_side)) = self.st.hypot.marked_pair(i) else {
                continue;
            };
            let t_id = self.resolve(c);
            if !fwd_side {
                debug_assert!(self.kind_of(t_id).is_composite() && self.kind_of(self.resolve(k)).is_composite());
                if self.st.adjust_canon || self.mapped(t_id) {
                    continue;
                }
                let c_id = self.resolve(k);
                if self.mapped(c_id) {
                    self.set_map(t_id, c_id);
                }
                continue;
            }
            let c_id = self.resolve(k);
            let t_kind = self.kind_of(t_id);
            let c_kind = self.kind_of(c_id);
            if t_kind != Kind::Fwd && c_kind == Kind::Fwd {
                self.set_map(c_id, t_id);
            }
            if self.st.adjust_canon {
                continue;
            }
            if t_kind == Kind::Fwd && c_kind != Kind::Fwd {
                self.set_map(t_id, c_id);
            }
            if t_kind.is_composite() && c_kind != Kind::Fwd && self.mapped(c_id) && !self.mapped(t_id) {
                self.set_map(t_id, c_id);
            }
        }
    }

    pub(super) fn struct_types(&mut self) -> Result<(), DedupError> {
        self.struct_types_in(TypeId::new(self.st.start), TypeId::new(self.st.end))
    }

    #[inline(never)]
    pub(super) fn struct_types_in(&mut self, from: TypeId, to: TypeId) -> Result<(), DedupError> {
        let typedefs = self.st.rules.typedefs_in_struct_pass();
        for id in (from.get()..to.get()).map(TypeId::new) {
            let kind = self.kind_of(id);
            let typedef = typedefs && kind == Kind::Typedef;
            if !(kind.is_composite() || typedef) || self.mapped(id) {
                continue;
            }
            let w = rec_of(self.words, &self.st.nodes, id);
            let h = if typedef { hash_typedef(w) } else { hash_struct(w) };
            let mut new = id;
            let mut cur = self.st.table.first(h);
            while let Some((cand, c)) = cur {
                cur = self.st.table.next(c);
                // guards against a colliding FWD, which is_equiv would accept
                let shallow_equal = if typedef {
                    equal_typedef(w, rec!(self, cand))
                } else {
                    shallow_equal_struct(w, rec!(self, cand))
                };
                if !shallow_equal {
                    continue;
                }
                self.clear_hypot();
                if !self.is_equiv(id, cand)? {
                    continue;
                }
                if self.st.overlap {
                    // The order of equal keys in the whole-BTF table depends
                    // on how many primitives later CUs add: the choice
                    // stands only if no other candidate passes. A failed
                    // walk changes nothing but the hypothetical map.
                    if new != id {
                        self.st.give_up = Some("a struct matched two candidates");
                        return Ok(());
                    }
                    new = cand;
                    std::mem::swap(&mut self.st.hypot, &mut self.st.spare_hypot);
                    continue;
                }
                self.merge_hypot();
                if self.st.adjust_canon {
                    continue;
                }
                new = cand;
                break;
            }
            if self.st.overlap && new != id {
                std::mem::swap(&mut self.st.hypot, &mut self.st.spare_hypot);
                self.merge_hypot();
                self.st.spare_hypot.clear();
            }
            self.set_map(id, new);
            if new == id {
                self.add_canonical(h, id);
            }
        }
        self.st.struct_done = to.get();
        Ok(())
    }
}
