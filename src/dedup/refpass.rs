//! The reference pass (libbpf's `btf_dedup_ref_types`), on two threads when
//! the ids split cleanly.
//!
//! libbpf processes the reference types in id order, each one after its
//! referenced types (post-order), and a type becomes canonical when no
//! processed type has its rewritten content; so the canonical type of each
//! content is the first one *processed*. Without a base (the reference
//! index, [`super::refindex`]), that is all that decides the result.
//!
//! Take a point `m` between two CUs near the middle of the ids. The walks
//! from the roots below `m` stay below `m` (a CU's records refer to its own
//! types), and they are all done before the first root at `m`. The walks
//! from the roots at `m` and after stay at or after `m` until the function
//! phase's prototypes, which refer to every CU. So a second thread runs the
//! roots from `m` on with an index of its own, beside the first one running
//! the roots below `m`; each of its types gets the first processed type *of
//! its stretch* with its content. It stops at the first root whose walk
//! would reach an id below `m` that was not mapped when the pass began
//! (undoing what that walk did). Then, in the order they were made, each of
//! the second stretch's canonical types is looked up in the first one's
//! index with its content rewritten again (its referenced ids may have
//! moved to the first stretch by then): found, it links to the type found,
//! which was processed first; not found, it stays canonical and joins the
//! index. The types that linked to it follow it through `resolve`. The
//! first thread then runs the remaining roots as before.
//!
//! Both stretches check their walks against the state bits as they were
//! when the pass began, so neither can be misled by the other's progress.
//! Should the first one's walk reach past `m` (no CU boundary after all),
//! everything is put back and the pass runs on one thread. The two threads
//! write the links and states of their own ids only; the one word of state
//! bits holding ids of both stretches is changed with atomic and/or
//! ([`set_in`]).

use std::sync::atomic::{AtomicU32, AtomicU64};

use smallvec::SmallVec;

use super::states::{get_in, get_in_snapshot, set_in};
use super::*;

/// Where the reference pass looks up a type's canonical type.
pub(super) enum Lookup<'d> {
    /// By content, without a base.
    Index(refindex::RefIndex),
    /// libbpf's candidate table, whose order matters with a base: base ids
    /// are below `start`, and their records are never rewritten.
    Table { table: &'d mut CandTable, start: u32 },
}

/// One thread's share of the reference pass, over columns it may share.
pub(super) struct RefPass<'d> {
    words: &'d [u32],
    nodes: &'d Offsets,
    link: &'d [AtomicU32],
    state: &'d [AtomicU64],
    /// The state word the other thread also writes ([`set_in`]).
    shared_word: usize,
    lookup: Lookup<'d>,
    /// (type, ENTER or FINISH) frames of the walk.
    stack: Vec<(u32, u32)>,
    /// While split: the other stretch's ids, which a walk must not reach
    /// unless they were mapped when the pass began (`before`).
    fence: Option<Fence<'d>>,
    /// The types the current walk entered, to undo it (second stretch).
    entered: Vec<u32>,
    /// The types this share made canonical, in order (second stretch).
    made: Vec<u32>,
    /// How many of `made` there were when the current walk began.
    made_before_walk: usize,
}

/// The ids on the other side of a split, and the state bits as they were
/// when the pass began.
#[derive(Clone, Copy)]
struct Fence<'d> {
    /// The other stretch is the ids `>= at` (first stretch) or `< at`.
    at: u32,
    above: bool,
    before: &'d [u64],
}

impl Fence<'_> {
    /// Whether a walk reaching `t` would leave its stretch.
    #[inline]
    fn blocks(&self, t: TypeId) -> bool {
        (t.get() >= self.at) == self.above && get_in_snapshot(self.before, t) != State::Mapped
    }
}

/// A reference type's rewritten content: most are three words (PTR,
/// TYPEDEF, CONST, ...), kept off the heap and out of a long buffer.
enum Key {
    Short([u32; 4], usize),
    Long(SmallVec<[u32; 16]>),
}

impl Key {
    #[inline]
    fn words(&self) -> &[u32] {
        match self {
            Key::Short(w, n) => &w[..*n],
            Key::Long(w) => w,
        }
    }
}

/// A walk reached the other stretch ([`Fence`]).
struct Stop;

/// Stretches shorter than this run on one thread: the split costs more
/// than it saves.
const MIN_SPLIT: u32 = 1 << 16;
/// How far [`cu_boundary_near`] looks at the references around a place:
/// before the middle, and ahead of each place it tries.
const WINDOW: u32 = 4096;

thread_local! {
    /// `MIN_SPLIT` and `WINDOW`, which tests lower.
    static TUNING: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((MIN_SPLIT, WINDOW)) };
}

/// Lets tests split small BTFs (this thread's dedups only).
impl Dedup<'_> {
    /// The reference pass ([`refpass`]): with its own index when there is
    /// no base, else through libbpf's candidate table.
    #[inline(never)]
    pub(super) fn ref_types(&mut self) -> Result<(), DedupError> {
        let lookup = if self.st.start == 1 && !refindex::forced_off() {
            // nothing looks the table up any more: its memory goes to the
            // index (at dedup's peak)
            self.st.table = CandTable::EMPTY;
            refpass::Lookup::Index(refindex::RefIndex::default())
        } else {
            refpass::Lookup::Table {
                table: &mut self.st.table,
                start: self.st.start,
            }
        };
        refpass::run(
            self.words,
            &self.st.nodes,
            &mut self.st.link,
            &mut self.st.state,
            lookup,
            TypeId::new(self.st.start),
            TypeId::new(self.st.end),
        )
    }
}

#[cfg(test)]
fn set_tuning(min: u32, window: u32) {
    TUNING.with(|c| c.set((min, window)));
}

/// Which way the last split-worthy pass went (tests check that theirs did
/// split).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Path {
    Split,
    Undone,
}

#[cfg(test)]
thread_local! {
    pub(super) static LAST_PATH: std::cell::Cell<Option<Path>> = const { std::cell::Cell::new(None) };
}

#[cfg(test)]
fn note(p: Path) {
    LAST_PATH.with(|c| c.set(Some(p)));
}

impl<'d> RefPass<'d> {
    fn new(
        words: &'d [u32],
        nodes: &'d Offsets,
        link: &'d [AtomicU32],
        state: &'d [AtomicU64],
        lookup: Lookup<'d>,
    ) -> RefPass<'d> {
        RefPass {
            words,
            nodes,
            link,
            state,
            shared_word: usize::MAX,
            lookup,
            stack: Vec::new(),
            fence: None,
            entered: Vec::new(),
            made: Vec::new(),
            made_before_walk: 0,
        }
    }

    #[inline]
    fn mapped(&self, id: TypeId) -> bool {
        get_in(self.state, id) == State::Mapped
    }

    #[inline]
    fn resolve(&self, id: TypeId) -> TypeId {
        resolve_shared(self.link, id)
    }

    #[inline]
    fn set_state(&self, id: TypeId, s: State) {
        set_in(self.state, id, s, self.shared_word);
    }

    #[inline]
    fn set_map(&self, id: TypeId, to: TypeId) {
        self.set_state(id, State::Mapped);
        self.link[id.index()].store(to.get(), Relaxed);
    }

    #[inline]
    fn rec(&self, id: TypeId) -> &'d [u32] {
        rec_of(self.words, self.nodes, id)
    }

    #[inline]
    fn fenced(&self, t: TypeId) -> bool {
        self.fence.is_some_and(|f| f.blocks(t))
    }

    /// Processes the roots `from..to` in order. With a fence, stops at the
    /// first root whose walk would cross it, undone, and returns it.
    fn run(&mut self, from: TypeId, to: TypeId) -> Result<Option<TypeId>, DedupError> {
        for id in (from.get()..to.get()).map(TypeId::new) {
            if self.mapped(id) {
                continue;
            }
            // The common case, a single reference to an already mapped type,
            // needs no walk: libbpf would just resolve it and look it up.
            let w = self.rec(id);
            let single = matches!(
                w.kind(),
                CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG | DECL_TAG
            );
            if single && self.fenced(TypeId::new(w[2])) {
                return Ok(Some(id));
            }
            if single && self.mapped(TypeId::new(w[2])) {
                self.finish(id, w);
                continue;
            }
            match self.walk(id) {
                Ok(()) => {}
                Err(Ok(Stop)) => {
                    self.undo_walk();
                    return Ok(Some(id));
                }
                // the second stretch leaves its errors to the run after it
                Err(Err(_)) if self.fence.is_some_and(|f| !f.above) => {
                    self.undo_walk();
                    return Ok(Some(id));
                }
                Err(Err(e)) => return Err(e),
            }
        }
        Ok(None)
    }

    /// libbpf's `btf_dedup_ref_type` as a post-order walk on an explicit
    /// stack. Entering a type queues "finish it" and then its referenced ids
    /// in reverse, so they are examined in libbpf's order (ARRAY element
    /// before index, FUNC_PROTO return before parameters), each one only when
    /// the previous one's whole walk is done — exactly when the recursion
    /// would look at it. A type on the stack in IN_PROGRESS state is an
    /// ancestor of the current one: meeting it again is libbpf's -ELOOP.
    fn walk(&mut self, root: TypeId) -> Result<(), Result<Stop, DedupError>> {
        const ENTER: u32 = 0;
        const FINISH: u32 = 1;
        self.stack.clear();
        self.entered.clear();
        self.made_before_walk = self.made.len();
        self.stack.push((root.get(), ENTER));
        let keep_entered = self.fence.is_some();
        while let Some((id, ev)) = self.stack.pop() {
            let id = TypeId::new(id);
            if ev == FINISH {
                self.finish(id, self.rec(id));
                continue;
            }
            match get_in(self.state, id) {
                State::InProgress => return Err(Err(DedupError::Loop { id })),
                State::Mapped => continue,
                State::Unprocessed => {}
            }
            self.set_state(id, State::InProgress);
            if keep_entered {
                self.entered.push(id.get());
            }
            self.stack.push((id.get(), FINISH));
            let w = self.rec(id);
            let (st, state, fence) = (&mut self.stack, self.state, self.fence);
            let mut crossed = false;
            // a referenced type that is mapped now stays mapped: not queued
            let mut visit = |t: u32| {
                let tid = TypeId::new(t);
                crossed |= fence.is_some_and(|f| f.blocks(tid));
                if get_in(state, tid) != State::Mapped {
                    st.push((t, ENTER));
                }
            };
            match w.kind() {
                CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG | DECL_TAG => visit(w[2]),
                ARRAY => {
                    visit(w[4]);
                    visit(w[3]);
                }
                FUNC_PROTO => {
                    for p in w[3..].chunks_exact(2).rev() {
                        visit(p[1]);
                    }
                    visit(w[2]);
                }
                _ => {
                    return Err(Err(DedupError::Invalid {
                        id,
                        what: "reference pass reached an unexpected kind",
                    }));
                }
            }
            if crossed {
                return Err(Ok(Stop));
            }
        }
        Ok(())
    }

    /// Puts back the types the last walk entered, as the pass found them
    /// (unmapped, linking to themselves), and forgets the canonical types it
    /// made. The stretch's index keeps them, but it stops here and is only
    /// read through `made` again.
    fn undo_walk(&mut self) {
        for &id in &self.entered {
            self.set_state(TypeId::new(id), State::Unprocessed);
            self.link[id as usize].store(id, Relaxed);
        }
        self.made.truncate(self.made_before_walk);
    }

    /// `w`'s content as libbpf has rewritten it by the time it is processed:
    /// its referenced ids resolved.
    #[inline]
    fn rewritten(&self, w: &[u32]) -> Key {
        let k = w.kind();
        if k != ARRAY && k != FUNC_PROTO {
            // only the third word is an id (DECL_TAG's fourth is an index)
            let four = if k == DECL_TAG { w[3] } else { 0 };
            return Key::Short(
                [w[0], w[1], self.resolve(TypeId::new(w[2])).get(), four],
                if k == DECL_TAG { 4 } else { 3 },
            );
        }
        let mut c = SmallVec::from_slice(exact(w));
        if k == ARRAY {
            c[3] = self.resolve(TypeId::new(w[3])).get();
            c[4] = self.resolve(TypeId::new(w[4])).get();
        } else {
            c[2] = self.resolve(TypeId::new(w[2])).get();
            for i in 0..w.vlen() {
                c[3 + 2 * i + 1] = self.resolve(TypeId::new(w[3 + 2 * i + 1])).get();
            }
        }
        Key::Long(c)
    }

    /// All referenced ids of `id` are canonical now: look it up by content
    /// (most types are one of the three-word kinds: their key is built here,
    /// on the stack, without going through [`RefPass::rewritten`]).
    #[inline]
    fn finish(&mut self, id: TypeId, w: &[u32]) {
        let k = w.kind();
        let new = if k != ARRAY && k != FUNC_PROTO {
            let key = [
                w[0],
                w[1],
                self.resolve(TypeId::new(w[2])).get(),
                if k == DECL_TAG { w[3] } else { 0 },
            ];
            self.look_up(id, w, &key[..if k == DECL_TAG { 4 } else { 3 }])
        } else {
            let key = self.rewritten(w);
            self.look_up(id, w, key.words())
        };
        self.set_map(id, new);
        if new == id && self.fence.is_some_and(|f| !f.above) {
            self.made.push(id.get());
        }
    }

    #[inline]
    fn look_up(&mut self, id: TypeId, w: &[u32], key: &[u32]) -> TypeId {
        if let Lookup::Index(ix) = &mut self.lookup {
            ix.canonical(key, id)
        } else {
            self.in_table(id, w, key)
        }
    }

    /// libbpf's look-up of `id` (record `w`, rewritten `key`) in its
    /// candidate table, adding it if no candidate is equal.
    fn in_table(&mut self, id: TypeId, w: &[u32], key: &[u32]) -> TypeId {
        let k = w.kind();
        let h = match k {
            ARRAY => hash_array(key),
            FUNC_PROTO => hash_fnproto(key),
            DECL_TAG => hc(hc(hc(hc(0, key[0]), key[1]), key[2]), key[3]),
            _ => hc(hc(hc(0, key[0]), key[1]), key[2]),
        };
        let Lookup::Table { table, start } = &mut self.lookup else {
            unreachable!("in_table is only called with a candidate table");
        };
        let (words, nodes, link) = (self.words, self.nodes, self.link);
        let mut cur = table.first(h);
        while let Some((cand, c)) = cur {
            cur = table.next(c);
            let cw = rec_of(words, nodes, cand);
            // equal info means equal kind and length
            if cw[1] != w[1] || cw[0] != w[0] {
                continue;
            }
            let eq = if cand.get() < *start {
                // base records are never rewritten
                cw == key
            } else {
                (2..key.len()).all(|p| {
                    key[p]
                        == if is_ref_pos(k, p) {
                            resolve_shared(link, TypeId::new(cw[p])).get()
                        } else {
                            cw[p]
                        }
                })
            };
            if eq {
                return cand;
            }
        }
        table.insert(h, id);
        id
    }

    /// Takes in the canonical types `other` made (see the module's
    /// summary): each one found here links to the type found, the others
    /// join this share's index.
    fn absorb(&mut self, other: RefPass<'_>) {
        for id in other.made.into_iter().map(TypeId::new) {
            let key = self.rewritten(self.rec(id));
            let Lookup::Index(ix) = &mut self.lookup else {
                unreachable!("only a pass with a reference index is split");
            };
            let c = ix.canonical(key.words(), id);
            if c != id {
                self.link[id.index()].store(c.get(), Relaxed);
            }
        }
    }
}

/// The lowest and highest unmapped id that unmapped `id`'s record refers
/// to, if any: where the walk from it can go.
fn walk_span(words: &[u32], nodes: &Offsets, state: &[AtomicU64], id: TypeId) -> Option<(TypeId, TypeId)> {
    if get_in(state, id) == State::Mapped {
        return None;
    }
    let w = rec_of(words, nodes, id);
    let mut span: Option<(TypeId, TypeId)> = None;
    for_each_id_pos(w, |p| {
        let t = TypeId::new(w[p]);
        if get_in(state, t) != State::Mapped {
            span = Some(span.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
        }
    });
    span
}

/// A likely boundary between two CUs at or after `mid`: no walk from the
/// ids before it (from `mid - WINDOW` on) goes to it or past it, and none
/// from the `WINDOW` ids after it goes below it. Only a guess: the walks
/// check it ([`Fence`]).
fn cu_boundary_near(
    words: &[u32],
    nodes: &Offsets,
    state: &[AtomicU64],
    start: TypeId,
    mid: TypeId,
    end: TypeId,
) -> Option<TypeId> {
    const SEARCH: u32 = 1 << 16;
    let (start, mid, end) = (start.get(), mid.get(), end.get());
    let window = TUNING.with(|c| c.get().1);
    let span = |id: u32| walk_span(words, nodes, state, TypeId::new(id));
    let highest = |id: u32| span(id).map_or(0, |(_, hi)| hi.get());
    let mut before = (mid.saturating_sub(window).max(start)..mid).fold(0, |h, id| h.max(highest(id)));
    let mut b = mid;
    while b < (mid + SEARCH).min(end) {
        if before < b {
            // most places inside a CU fail at once: a type soon after refers
            // back to one before
            let Some(x) = (b..(b + window).min(end)).find(|&id| span(id).is_some_and(|(lo, _)| lo.get() < b)) else {
                return Some(TypeId::new(b));
            };
            // every place up to x fails at x too: go on after it (each id is
            // scanned at most twice)
            before = (b..=x).fold(before, |h, id| h.max(highest(id)));
            b = x + 1;
            continue;
        }
        before = before.max(highest(b));
        b += 1;
    }
    None
}

/// The reference pass over `start..end`: split over two threads when there
/// are two and the pass has an index (see the module's summary).
pub(super) fn run(
    words: &[u32],
    nodes: &Offsets,
    link: &mut [u32],
    state: &mut States,
    lookup: Lookup<'_>,
    start: TypeId,
    end: TypeId,
) -> Result<(), DedupError> {
    let (start_id, end_id) = (start, end);
    let (start, end) = (start.get(), end.get());
    let min = TUNING.with(|c| c.get().0);
    let split = matches!(lookup, Lookup::Index(_)) && rayon::current_num_threads() > 1 && end - start >= 2 * min;
    // a little before the middle: the function phase's prototypes at the
    // end run after both stretches, and the first one's CUs cost more per
    // id (more of their types become canonical)
    let m = split
        .then(|| {
            cu_boundary_near(
                words,
                nodes,
                state.shared(),
                start_id,
                TypeId::new(start + ((end - start) as u64 * 47 / 100) as u32),
                end_id,
            )
        })
        .flatten()
        .map(TypeId::get);
    let Some(m) = m.filter(|&m| m - start >= min && end - m >= min) else {
        let mut a = RefPass::new(words, nodes, shared_u32(link), state.shared(), lookup);
        return a.run(start_id, end_id).map(|_| ());
    };
    let before: Vec<u64> = state.snapshot();
    {
        let (link, states) = (shared_u32(link), state.shared());
        let fence = |above| {
            Some(Fence {
                at: m,
                above,
                before: &before,
            })
        };
        let mut a = RefPass::new(words, nodes, link, states, lookup);
        let mut b = RefPass::new(words, nodes, link, states, Lookup::Index(refindex::RefIndex::default()));
        (a.fence, b.fence) = (fence(true), fence(false));
        a.shared_word = (m >> 5) as usize;
        b.shared_word = a.shared_word;
        let mid = TypeId::new(m);
        let (ra, rb) = rayon::join(|| a.run(start_id, mid), || b.run(mid, end_id));
        // an error below m is the one libbpf meets first
        if ra?.is_none() {
            (a.fence, a.shared_word) = (None, usize::MAX);
            // the second stretch stops instead of failing
            let stop = rb.unwrap_or(Some(mid));
            a.absorb(b);
            #[cfg(test)]
            note(Path::Split);
            return a.run(stop.unwrap_or(end_id), end_id).map(|_| ());
        }
        // a walk below m reached past it: no CU boundary there after all
    };
    for (id, l) in link.iter_mut().enumerate().take(end as usize).skip(start as usize) {
        if get_in_snapshot(&before, TypeId::new(id as u32)) != State::Mapped {
            *l = id as u32;
        }
    }
    state.restore(&before);
    #[cfg(test)]
    note(Path::Undone);
    let mut a = RefPass::new(
        words,
        nodes,
        shared_u32(link),
        state.shared(),
        Lookup::Index(Default::default()),
    );
    a.run(start_id, end_id).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, Kind, TypeId};

    fn int(b: &mut Btf) -> TypeId {
        b.add_int(b"int", 4, crate::btf::INT_SIGNED)
    }

    /// A small xorshift generator, cloned to build the same BTF twice.
    #[derive(Clone)]
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u32) -> u32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % u64::from(n.max(1))) as u32
        }
    }

    /// Dedup of `b` on two threads with the pass split wherever it can be,
    /// and the way it went.
    fn split_run(b: &Btf) -> (Result<Btf, DedupError>, Option<Path>) {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
        pool.install(|| {
            set_tuning(4, 2);
            LAST_PATH.with(|c| c.set(None));
            let r = dedup(b, &Options::default());
            set_tuning(MIN_SPLIT, WINDOW);
            (r, LAST_PATH.with(|c| c.get()))
        })
    }

    fn one_thread(b: &Btf) -> Result<Btf, DedupError> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
        pool.install(|| dedup(b, &Options::default()))
    }

    /// CUs of reference chains over their own types (names drawn from a few,
    /// so that CUs share content), then a tail of prototypes and functions
    /// over every CU's types, as the function phase leaves it; with
    /// `cross`, a type of the first CU also refers to that id (the last).
    fn random_btf(rng: &mut Rng, cross: Option<u32>) -> Btf {
        let mut rnd = |n: u32| rng.below(n);
        let mut b = Btf::new(Endian::Little);
        let mut refs = Vec::new();
        let ncu = 4 + rnd(6);
        for cu in 0..ncu {
            let i = int(&mut b);
            let name = |k: &str, n: u32| format!("{k}{n}").into_bytes();
            let s = b.begin(Kind::Struct, &name("s", rnd(3)), 8, false);
            b.push_member(b"a", i, 0, 0);
            let mut own = vec![i, s];
            for _ in 0..3 + rnd(8) {
                let to = own[rnd(own.len() as u32) as usize];
                let t = match rnd(6) {
                    0 => b.add_ref(Kind::Ptr, to),
                    1 => b.add_ref(Kind::Const, to),
                    2 => b.add_typedef(&name("t", rnd(3)), to),
                    3 => b.add_array(to, i, 1 + rnd(2)),
                    4 => {
                        let p = b.begin(Kind::FuncProto, b"", to.get(), false);
                        b.push_param(b"", own[rnd(own.len() as u32) as usize]);
                        p
                    }
                    _ => b.add_ref(Kind::Volatile, to),
                };
                own.push(t);
            }
            if let Some(last) = cross.filter(|_| cu == 0) {
                // a reference from the first CU past every CU boundary
                b.add_ref(Kind::Const, TypeId::new(last));
            }
            refs.extend(own);
        }
        for _ in 0..2 + rnd(5) {
            let ret = refs[rnd(refs.len() as u32) as usize];
            let p = b.begin(Kind::FuncProto, b"", ret.get(), false);
            for _ in 0..rnd(3) {
                b.push_param(b"x", refs[rnd(refs.len() as u32) as usize]);
            }
            let ptr = b.add_ref(Kind::Ptr, p);
            b.add_func(format!("f{}", rnd(4)).as_bytes(), p, 1);
            b.add_ref(Kind::Const, ptr);
            // a prototype over the two types after it, so that its walk
            // may finish one (into a later CU) before the other leads into
            // an earlier CU
            let p = b.type_count() + 1;
            b.begin(Kind::FuncProto, b"", p + 1, false);
            b.push_param(b"y", TypeId::new(p + 2));
            b.add_ref(Kind::Const, refs[refs.len() - 1 - rnd(4) as usize]);
            b.add_ref(Kind::Ptr, refs[rnd(refs.len() as u32) as usize]);
        }
        b
    }

    /// Split at a CU boundary, on two threads, the pass gives the result of
    /// one thread, and of libbpf's candidate table; where no boundary holds,
    /// it puts everything back and gives it all the same.
    #[test]
    fn split_pass_gives_the_one_thread_result() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut seen = Vec::new();
        for round in 0..300 {
            let again = rng.clone();
            let mut b = random_btf(&mut rng, None);
            if round % 5 == 4 {
                // the same types and one more, which refers to the last
                let last = b.type_count() + 1;
                rng = again;
                b = random_btf(&mut rng, Some(last));
                assert_eq!(b.type_count(), last);
            }
            let (split, path) = split_run(&b);
            let split = split.expect("dedup");
            let one = one_thread(&b).expect("dedup");
            let table = dedup_through_table(&b, &Options::default()).expect("dedup");
            assert_eq!(
                crate::btf::dump::raw_string(&split),
                crate::btf::dump::raw_string(&one),
                "round {round}"
            );
            assert_eq!(split.raw_words(), one.raw_words(), "round {round}");
            assert_eq!(split.raw_words(), table.raw_words(), "round {round}");
            seen.extend(path);
        }
        assert!(seen.contains(&Path::Split) && seen.contains(&Path::Undone), "{seen:?}");
    }

    /// A reference loop in the second stretch stops it there, and the run
    /// after it reports the loop as one thread does.
    #[test]
    fn a_loop_after_the_split_is_reported_as_on_one_thread() {
        let mut b = Btf::new(Endian::Little);
        for _ in 0..6 {
            let i = int(&mut b);
            let p = b.add_ref(Kind::Ptr, i);
            b.add_ref(Kind::Const, p);
        }
        // two pointers to each other
        let p = b.add_ref(Kind::Ptr, TypeId::new(b.type_count() + 2));
        b.add_ref(Kind::Ptr, p);
        for _ in 0..6 {
            let i = int(&mut b);
            b.add_ref(Kind::Ptr, i);
        }
        let (split, path) = split_run(&b);
        let one = one_thread(&b);
        assert_eq!(path, Some(Path::Split));
        assert!(matches!(one, Err(DedupError::Loop { .. })), "{:?}", one.as_ref().err());
        assert_eq!(format!("{:?}", split.err()), format!("{:?}", one.err()));
    }
}
