//! Collapse of exact copies: a type of a later CU whose whole type graph is
//! an exact copy of one already merged is not appended again; whatever
//! referred to it refers to the earlier copy.
//!
//! Why it is safe. libbpf's dedup maps each type to the first canonical type
//! equivalent to it, and its equivalence is a walk over the two type graphs;
//! an exact copy (same records, its references leading to exact copies in
//! turn, one to one) is equivalent to its original, and the dedup maps both
//! to the same canonical type: the copy is never canonical itself, so no
//! canonical type, no candidate table and no id after compaction changes
//! when it is left out. Its strings are the original's, already in the
//! string section in first-use order. What is *not* order-free is kept out:
//! a full enum re-points the canonical enum forward declaration of its name
//! each time one is met (the last one wins), so enums are always appended;
//! in a walk an enum pairs with an equal enum without being collapsed. The
//! reasoning is checked, not trusted: the corpus, and tests/differential.rs
//! (random multi-CU C programs from gcc and clang, collapsed against
//! `--no-collapse`, byte for byte).
//!
//! How copies are found. Each type of the CU gets a hash of its record and,
//! through its references, of the records it reaches, cut at named structs
//! and unions (a reference to one hashes its name and kind only), which
//! keeps the hash a bottom-up pass even though C's type graphs have cycles
//! (every cycle goes through a named struct or union). Types already merged
//! are indexed by that hash. A hit is then proved by a walk over both
//! graphs in step, pairing each local type with one merged type (one to one
//! over the CU), comparing whole records; the walk goes through the cut
//! references, so the pairing covers the whole graph. A walk that succeeds
//! collapses every type it paired. Types are tried in local id order, and
//! the encoder places containers after their contents, so most walks end at
//! types already paired one step down.
//!
//! What it costs is bounded: a pair found different is remembered with the
//! pairs that led to it, and past a step budget per CU the rest of the CU
//! is appended as it is (the budget is an optimisation's, the result is
//! exact either way).

use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroU32;

use hashbrown::{HashMap, HashSet};
use smallvec::SmallVec;

use super::local::CuOut;
use crate::btf::{Btf, RawRecord, kind};

/// Candidates kept per hash: the variants of one shape (a pointer to a
/// struct whose graph differs deep down, one per header configuration) past
/// which a later copy is simply appended.
const MAX_CANDIDATES: usize = 16;
/// Walk steps a CU may spend per type it has (plus a floor for small CUs).
const STEPS_PER_TYPE: usize = 64;
const STEPS_FLOOR: usize = 1 << 14;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Undecided,
    /// Paired by the walk in progress.
    InWalk,
    /// Paired for good: `phi` is its merged copy.
    Collapsed,
    /// Appended as a new type.
    New,
}

/// The run-wide index of merged types and the per-CU scratch of the walks.
#[derive(Default)]
pub(super) struct Collapse {
    /// A type's hash (its top half: a hit is proved by a walk anyway) →
    /// the first merged id with it; the ones after it in `more`.
    first: HashMap<u32, u32, BuildHasherDefault<KeyHasher>>,
    more: HashMap<u32, SmallVec<[u32; 4]>, BuildHasherDefault<KeyHasher>>,
    /// The keys of `first` as a Bloom filter: most types have no copy
    /// merged before them, and this answers that from the cache instead
    /// of a miss in the table per type.
    seen: Bloom,
    /// One past the word index in the BTF of each own record, by id −
    /// `first_id`; `None` for records no walk may pair with (variables,
    /// their tags, types of a CU whose ids were shifted).
    starts: Vec<Option<NonZeroU32>>,
    first_id: u32,
    /// Types left out so far.
    pub(super) collapsed: u64,
    // per CU, by local id (0 = void)
    state: Vec<State>,
    phi: Vec<u32>,
    /// Merged id → local id paired with it (committed and in the walk).
    rev: HashMap<u32, u32, BuildHasherDefault<KeyHasher>>,
    children: Vec<(u32, u32)>,
    failed: HashSet<(u32, u32)>,
    log: Vec<u32>,
    /// Pairs of the walk: (local, merged, index of the pair that pushed it).
    stack: Vec<(u32, u32, u32)>,
    visited: Vec<(u32, u32, u32)>,
    scratch: Vec<u32>,
    refs: Vec<(usize, u32)>,
}

/// One CU's records, with a value per local string index: an identity
/// for hashing ([`Names`]), the BTF string offset for the walks ([`Local`]).
struct View<'o, 'a, N> {
    out: &'o CuOut<'a>,
    names: &'o [N],
}

/// Names by identity (`.debug_str` offset or text): the workers' hashes.
type Names<'o, 'a> = View<'o, 'a, u64>;
/// Names as the merge interned them (the CU's type strings): the walks.
type Local<'o, 'a> = View<'o, 'a, u32>;

impl<N> View<'_, '_, N> {
    /// The record of local type `id` (1-based).
    fn rec(&self, id: u32) -> &[u32] {
        let out = self.out;
        let i = id as usize - 1;
        let s = out.offs[i] as usize;
        let e = out.offs.get(i + 1).map_or(out.words.len(), |&e| e as usize);
        &out.words[s..e]
    }
}

fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95)
}

fn is_enum(k: u32) -> bool {
    k == kind::ENUM || k == kind::ENUM64
}

/// Array index positions hash and compare as this (they all name the run's one index type).
const INDEX: u64 = 0x1d_e0;

impl Collapse {
    pub(super) fn new(first_id: u32) -> Collapse {
        Collapse {
            first_id,
            ..Default::default()
        }
    }

    /// Notes where own record `id` starts (`None`: a record no walk may
    /// pair with). Every record the merge appends is noted, in id order.
    pub(super) fn push(&mut self, id: u32, start: Option<u32>) {
        debug_assert_eq!(id, self.first_id + self.starts.len() as u32);
        self.starts.push(start.and_then(|s| NonZeroU32::new(s + 1)));
    }

    /// Indexes merged `id`, appended for local type `local` of the CU last
    /// hashed, for the CUs after it (enums are never looked up).
    pub(super) fn index(&mut self, out: &CuOut<'_>, local: u32, id: u32, rec: &[u32]) {
        if is_enum(rec.kind()) {
            return;
        }
        let Some(h) = out.type_hashes.get(local as usize).copied().flatten() else {
            return;
        };
        let key = (h >> 32) as u32;
        match self.first.entry(key) {
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(id);
                self.seen.insert(key, &self.first);
            }
            hashbrown::hash_map::Entry::Occupied(_) => {
                let v = self.more.entry(key).or_default();
                if v.len() + 1 < MAX_CANDIDATES {
                    v.push(id);
                }
            }
        }
    }

    /// The merged ids whose hash is `h`'s, oldest first.
    fn candidates(&self, h: u64) -> SmallVec<[u32; 4]> {
        let key = (h >> 32) as u32;
        let mut c = SmallVec::new();
        if !self.seen.may_hold(key) {
            return c;
        }
        if let Some(&id) = self.first.get(&key) {
            c.push(id);
            if let Some(more) = self.more.get(&key) {
                c.extend_from_slice(more);
            }
        }
        c
    }

    /// Decides which types of `out` are copies of merged ones. Returns,
    /// per local id, the merged id of its copy, or 0 for a type to append.
    pub(super) fn decide(&mut self, out: &CuOut<'_>, strs: &[u32], btf: &Btf, index: u32) -> &[u32] {
        let n = out.n_types;
        let hashes = &out.type_hashes;
        self.state.clear();
        self.state.resize(n + 1, State::Undecided);
        self.phi.clear();
        self.phi.resize(n + 1, 0);
        self.rev.clear();
        self.failed.clear();
        let local = Local { out, names: strs };
        let mut budget = STEPS_FLOOR + STEPS_PER_TYPE * n;
        // Containers first: a walk from one pairs what it reaches, which is
        // then not looked up on its own.
        for u in (1..=n as u32).rev() {
            if self.state[u as usize] != State::Undecided {
                continue;
            }
            if is_enum(local.rec(u).kind()) || budget == 0 {
                self.state[u as usize] = State::New;
                continue;
            }
            let cands = hashes[u as usize].map_or_else(SmallVec::new, |h| self.candidates(h));
            for g in cands {
                if self.walk(&local, btf, index, u, g, &mut budget) {
                    break;
                }
            }
            if self.state[u as usize] != State::Collapsed {
                self.state[u as usize] = State::New;
            }
        }
        for u in 1..=n {
            if self.state[u] == State::Collapsed {
                self.collapsed += 1;
            } else {
                self.phi[u] = 0;
            }
        }
        &self.phi
    }

    /// The merged record of `id`, if a walk may pair with it.
    fn merged<'b>(&self, btf: &'b Btf, id: u32) -> Option<&'b [u32]> {
        let i = id.checked_sub(self.first_id)? as usize;
        let s = self.starts.get(i)?.map(|s| s.get() as usize - 1)?;
        let words = btf.raw_words();
        let len = words.get(s..s + 2)?.rec_len();
        words.get(s..s + len)
    }

    /// Pairs `u` with merged `g` and everything they reach; commits the
    /// pairs if all match, else leaves no trace but remembered failures.
    fn walk(&mut self, l: &Local<'_, '_>, btf: &Btf, index: u32, u: u32, g: u32, budget: &mut usize) -> bool {
        self.stack.clear();
        self.visited.clear();
        self.log.clear();
        self.stack.push((u, g, u32::MAX));
        let mut ok = true;
        while let Some((a, b, parent)) = self.stack.pop() {
            if *budget == 0 {
                ok = false;
                break;
            }
            *budget -= 1;
            let me = self.visited.len() as u32;
            self.visited.push((a, b, parent));
            match self.pair(l, btf, index, a, b) {
                Pair::Same => {}
                Pair::Differs => {
                    // every pair that led here needs this one
                    let mut i = me;
                    while i != u32::MAX {
                        let (x, y, p) = self.visited[i as usize];
                        self.failed.insert((x, y));
                        i = p;
                    }
                    ok = false;
                    break;
                }
                Pair::Conflict => {
                    ok = false;
                    break;
                }
                Pair::New => {
                    self.phi[a as usize] = b;
                    self.state[a as usize] = State::InWalk;
                    self.rev.insert(b, a);
                    self.log.push(a);
                    for i in 0..self.children.len() {
                        let (la, gb) = self.children[i];
                        self.stack.push((la, gb, me));
                    }
                }
            }
        }
        for &a in &self.log {
            if ok {
                self.state[a as usize] = State::Collapsed;
            } else {
                self.state[a as usize] = State::Undecided;
                self.rev.remove(&self.phi[a as usize]);
                self.phi[a as usize] = 0;
            }
        }
        ok
    }

    /// Compares local `a` with merged `b` (one step of a walk).
    fn pair(&mut self, l: &Local<'_, '_>, btf: &Btf, index: u32, a: u32, b: u32) -> Pair {
        if !self.failed.is_empty() && self.failed.contains(&(a, b)) {
            return Pair::Differs;
        }
        let la = a as usize;
        let enum_pair = is_enum(l.rec(a).kind());
        if !enum_pair {
            match self.state[la] {
                State::New => return Pair::Differs,
                State::Collapsed => return if self.phi[la] == b { Pair::Same } else { Pair::Differs },
                State::InWalk => return if self.phi[la] == b { Pair::Same } else { Pair::Conflict },
                State::Undecided => {}
            }
            if let Some(&x) = self.rev.get(&b)
                && x != a
            {
                return if self.state[x as usize] == State::Collapsed {
                    Pair::Differs
                } else {
                    Pair::Conflict
                };
            }
        }
        let Some(grec) = self.merged(btf, b) else {
            return Pair::Differs;
        };
        let lrec = l.rec(a);
        if lrec.len() != grec.len() || lrec[1] != grec[1] {
            return Pair::Differs;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(lrec);
        let strs = l.names;
        Btf::for_each_str_ref_mut(&mut self.scratch, |w| *w = strs[*w as usize]);
        self.refs.clear();
        let (scratch, refs) = (&mut self.scratch, &mut self.refs);
        Btf::type_ref_positions(lrec[1], |p| {
            refs.push((p, scratch[p]));
            scratch[p] = grec[p];
        });
        if self.scratch[..] != grec[..] {
            return Pair::Differs;
        }
        let array = lrec.kind() == kind::ARRAY;
        let n = l.out.n_types as u32;
        self.children.clear();
        for &(p, x) in &self.refs {
            let y = grec[p];
            if array && p == 4 {
                if y != index {
                    return Pair::Differs;
                }
            } else if x == 0 || y == 0 {
                if x != y {
                    return Pair::Differs;
                }
            } else if x > n {
                return Pair::Differs;
            } else if self.state[x as usize] == State::Collapsed {
                // settled one step down (the usual case: containers come
                // after their contents), no need to visit it
                if self.phi[x as usize] != y {
                    return Pair::Differs;
                }
            } else {
                self.children.push((x, y));
            }
        }
        if enum_pair {
            // equal records: paired, never collapsed
            return Pair::Same;
        }
        Pair::New
    }
}

/// The hash of every type of a CU by local id (`None`: refers past its
/// types, never collapsed), computed by the worker that encoded it. Names
/// hash by their `.debug_str` offset (or text): a hit is proved by the
/// merge's walk, so a name found under two offsets costs a miss only. By
/// strongly connected component, components below first (Tarjan's order).
pub(super) fn hash_types(out: &CuOut<'_>) -> Vec<Option<u64>> {
    let n = out.n_types;
    let mut names = Vec::with_capacity(out.strs.len() + 1);
    names.push(0);
    names.extend(out.strs.iter().zip(&out.strs_off).map(|(&s, &off)| match off {
        Some(off) => mix(1, off.get() as u64),
        None => crate::dwarf::nm(s).iter().fold(2, |h, &b| mix(h, b as u64)),
    }));
    let l = Names { out, names: &names };
    let mut hash = vec![None; n + 1];
    let mut g = Graph::default();
    g.build(&l);
    let mut scc = Vec::new();
    let mut scratch = Vec::new();
    let mut t = Tarjan::new(n);
    for root in 1..=n as u32 {
        if t.index[root as usize] != 0 {
            continue;
        }
        t.call.push((root, g.start[root as usize - 1]));
        t.open(root);
        while let Some(&mut (u, ref mut next)) = t.call.last_mut() {
            if *next < g.start[u as usize] {
                let v = g.adj[*next as usize];
                *next += 1;
                if t.index[v as usize] == 0 {
                    t.open(v);
                    t.call.push((v, g.start[v as usize - 1]));
                } else if t.on_stack[v as usize] {
                    t.low[u as usize] = t.low[u as usize].min(t.index[v as usize]);
                }
                continue;
            }
            t.call.pop();
            if let Some(&(p, _)) = t.call.last() {
                t.low[p as usize] = t.low[p as usize].min(t.low[u as usize]);
            }
            if t.low[u as usize] == t.index[u as usize] {
                scc.clear();
                loop {
                    let x = t.stack.pop().expect("on the stack");
                    t.on_stack[x as usize] = false;
                    t.comp[x as usize] = u;
                    scc.push(x);
                    if x == u {
                        break;
                    }
                }
                let self_loop = scc.len() == 1 && g.refs(u).contains(&u);
                let cyclic = scc.len() > 1 || self_loop;
                hash_component(&mut hash, &t.comp, &l, &g, &scc, cyclic, &mut scratch);
            }
        }
    }
    hash
}

/// A Bloom filter over 32-bit keys that are hashes already (two probes,
/// 8 to 16 bits a key, rebuilt twice as large from the table when fuller:
/// small enough to stay in the cache, which is its point).
#[derive(Default)]
struct Bloom {
    bits: Vec<u64>,
    keys: usize,
}

impl Bloom {
    fn probes(&self, key: u32) -> [usize; 2] {
        let mask = self.bits.len() * 64 - 1;
        let x = (key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        [(x >> 40) as usize & mask, (x >> 12) as usize & mask]
    }

    fn may_hold(&self, key: u32) -> bool {
        !self.bits.is_empty()
            && self
                .probes(key)
                .iter()
                .all(|&b| self.bits[b >> 6] & (1 << (b & 63)) != 0)
    }

    /// Adds `key`, which `table` (every key so far) now holds.
    fn insert<V, S>(&mut self, key: u32, table: &HashMap<u32, V, S>) {
        self.keys += 1;
        if self.keys * 8 > self.bits.len() * 64 {
            let words = (self.keys * 16 / 64).next_power_of_two().max(1 << 8);
            self.bits = vec![0; words];
            self.keys = 0;
            for &k in table.keys() {
                self.set(k);
                self.keys += 1;
            }
            return;
        }
        self.set(key);
    }

    fn set(&mut self, key: u32) {
        for b in self.probes(key) {
            self.bits[b >> 6] |= 1 << (b & 63);
        }
    }
}

/// A 32-bit key that is already a hash, spread for the table's buckets.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0, b as u64);
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = (x as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Every reference of each local type, flattened (a type's are
/// `adj[start[u - 1]..start[u]]`), array index positions left out, and
/// whether a type refers past the CU's types.
#[derive(Default)]
struct Graph {
    start: Vec<u32>,
    adj: Vec<u32>,
    bad: Vec<bool>,
}

impl Graph {
    fn build(&mut self, l: &Names<'_, '_>) {
        let n = l.out.n_types as u32;
        self.start.clear();
        self.adj.clear();
        self.bad.clear();
        self.bad.push(false);
        self.start.push(0);
        for u in 1..=n {
            let rec = l.rec(u);
            let array = rec.kind() == kind::ARRAY;
            let mut bad = false;
            let adj = &mut self.adj;
            Btf::type_ref_positions(rec[1], |p| {
                let x = rec[p];
                if array && p == 4 || x == 0 {
                } else if x > n {
                    bad = true;
                } else {
                    adj.push(x);
                }
            });
            self.bad.push(bad);
            self.start.push(self.adj.len() as u32);
        }
    }

    fn refs(&self, u: u32) -> &[u32] {
        &self.adj[self.start[u as usize - 1] as usize..self.start[u as usize] as usize]
    }
}

/// Tarjan's strongly connected components, iterative.
struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    /// The component's root, once assigned.
    comp: Vec<u32>,
    stack: Vec<u32>,
    call: Vec<(u32, u32)>,
    next_index: u32,
}

impl Tarjan {
    fn new(n: usize) -> Tarjan {
        Tarjan {
            index: vec![0; n + 1],
            low: vec![0; n + 1],
            on_stack: vec![false; n + 1],
            comp: vec![0; n + 1],
            stack: Vec::new(),
            call: Vec::new(),
            next_index: 1,
        }
    }

    fn open(&mut self, u: u32) {
        self.index[u as usize] = self.next_index;
        self.low[u as usize] = self.next_index;
        self.next_index += 1;
        self.stack.push(u);
        self.on_stack[u as usize] = true;
    }
}

/// A record's words, names by their identity, each reference replaced by
/// `reference(target)` (`None`: the record is not hashed either).
fn record_hash(
    l: &Names<'_, '_>,
    u: u32,
    scratch: &mut Vec<u32>,
    mut reference: impl FnMut(u32) -> Option<u64>,
) -> Option<u64> {
    let rec = l.rec(u);
    scratch.clear();
    scratch.extend_from_slice(rec);
    let names = l.names;
    Btf::for_each_str_ref_mut(scratch, |w| *w = names[*w as usize] as u32);
    let mut ok = true;
    Btf::for_each_type_ref_mut(scratch, |w| {
        if *w != 0 {
            match reference(*w) {
                Some(h) => *w = (h ^ (h >> 32)) as u32,
                None => ok = false,
            }
        }
    });
    if rec.kind() == kind::ARRAY {
        scratch[4] = INDEX as u32;
    }
    ok.then(|| scratch.iter().fold(mix(0, rec.len() as u64), |h, &w| mix(h, w as u64)))
}

/// A type's kind, name and size word: what a reference inside its own
/// component hashes as.
fn shallow(l: &Names<'_, '_>, u: u32) -> u64 {
    let r = l.rec(u);
    let name = l.names[r[0] as usize];
    mix(mix(mix(7, r[1] as u64), name), r.get(2).copied().unwrap_or(0) as u64)
}

/// Hashes the members of one component (`cyclic`: more than one type, or
/// one referring to itself). A type outside a cycle hashes its whole graph.
/// In a cycle, each type hashes its record (references inside the cycle by
/// their targets' kind, name and size, refined over three rounds), then the
/// sum over the component, which any exact copy of the component shares.
fn hash_component(
    hash: &mut [Option<u64>],
    comp: &[u32],
    l: &Names<'_, '_>,
    g: &Graph,
    scc: &[u32],
    cyclic: bool,
    scratch: &mut Vec<u32>,
) {
    let root = comp[scc[0] as usize];
    let bad = scc.iter().any(|&u| g.bad[u as usize]);
    if bad {
        return;
    }
    if !cyclic {
        let u = scc[0];
        let h = record_hash(l, u, scratch, |x| hash[x as usize]);
        hash[u as usize] = h;
        return;
    }
    // round 0 in `hash`, then refined in place
    for &u in scc {
        let h = record_hash(l, u, scratch, |x| {
            if comp[x as usize] == root {
                Some(shallow(l, x))
            } else {
                hash[x as usize]
            }
        });
        if h.is_none() {
            // below a type that is never collapsed
            for &v in scc {
                hash[v as usize] = None;
            }
            return;
        }
        hash[u as usize] = h;
    }
    let mut next: SmallVec<[u64; 16]> = SmallVec::new();
    for _ in 0..3 {
        next.clear();
        for &u in scc {
            let mut h = hash[u as usize].expect("hashed in round 0");
            for &x in g.refs(u) {
                if comp[x as usize] == root {
                    h = mix(h, hash[x as usize].expect("same component"));
                }
            }
            next.push(h);
        }
        for (&u, &h) in scc.iter().zip(&next) {
            hash[u as usize] = Some(h);
        }
    }
    let sum = scc.iter().fold(mix(scc.len() as u64, 0), |s, &u| {
        s.wrapping_add(hash[u as usize].expect("hashed"))
    });
    for &u in scc {
        hash[u as usize] = hash[u as usize].map(|h| mix(h, sum));
    }
}

enum Pair {
    /// Already paired this way (or equal enums).
    Same,
    /// Cannot pair, whatever leads here.
    Differs,
    /// Cannot pair in this walk (one side paired otherwise in it).
    Conflict,
    /// Pairs if the pairs left in `children` do.
    New,
}
