//! The hypothetical canonical → candidate map of one struct-equivalence walk.
//!
//! libbpf keeps it as an array over all type ids. A walk records a few
//! hundred pairs on average (a vmlinux: 18 M pairs over 395 k walks), and
//! the ids of one walk cluster by CU. So the map is an id-indexed array cut
//! into pages of 256 ids: a directory says which page (if any) holds an id's
//! slot, and only the pages a walk touches exist. After a walk its slots are
//! emptied pair by pair and its pages go back to a free list, to be reused
//! by the next walk while still in cache. A look-up is two dependent loads
//! and no probing; an open-addressing table in this place (the first design)
//! took twice the cache misses, its probes scattering a walk's clustered ids
//! over the whole table.

use crate::btf::TypeId;

/// A free slot: no type id reaches it (ids are below 2^31). A slot is a
/// word of a page and pages are what the walk's cache misses are made of,
/// so the map keeps this sentinel inside and answers `Option<TypeId>`.
const EMPTY: u32 = u32::MAX;
/// A directory entry without a page.
const NO_PAGE: u32 = u32::MAX;

const PAGE_BITS: u32 = 8;
const PAGE: usize = 1 << PAGE_BITS;

/// Tag of a marked pair, in the pair list's copy of the key (type ids are
/// below 2^31).
const MARK: u32 = 1 << 31;
/// Tag of a marked pair with a FWD on either side, in the pair list's copy
/// of the value.
const FWD_SIDE: u32 = 1 << 31;

/// What the merge after a successful walk needs to know of a pair
/// ([`HypotMap::get_or_insert_marked`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Mark {
    /// Nothing: the merge skips it.
    No,
    /// Composites on both sides.
    Composites,
    /// A FWD on either side.
    Fwd,
}

#[derive(Default)]
pub(super) struct HypotMap {
    /// Page number (id >> 8) → index of its page in `pool`, or [`NO_PAGE`].
    dir: Vec<u32>,
    /// The pages' slots, [`EMPTY`] or the candidate recorded for the id.
    pool: Vec<u32>,
    /// Pages of `pool` no walk holds now; every slot of them is empty.
    free: Vec<u32>,
    /// Directory entries given a page in the current walk.
    used: Vec<u32>,
    /// Pairs of the current walk in insertion order (libbpf's hypot_list);
    /// the key's copy here carries [`MARK`] if the pair was recorded marked
    /// ([`HypotMap::get_or_insert_marked`]), the value's [`FWD_SIDE`].
    pairs: Vec<(u32, u32)>,
}

impl HypotMap {
    pub(super) fn new() -> HypotMap {
        HypotMap::default()
    }

    /// The slot of `key`, if its page exists in this walk.
    #[inline(always)]
    fn slot(&self, key: TypeId) -> Option<usize> {
        let key = key.get();
        match self.dir.get((key >> PAGE_BITS) as usize) {
            Some(&p) if p != NO_PAGE => Some(p as usize * PAGE + (key as usize & (PAGE - 1))),
            _ => None,
        }
    }

    /// The candidate recorded for `key` in this walk.
    #[inline(always)]
    pub(super) fn get(&self, key: TypeId) -> Option<TypeId> {
        let v = self.pool[self.slot(key)?];
        (v != EMPTY).then_some(TypeId::new(v))
    }

    #[cfg(test)]
    fn get_or_insert(&mut self, key: TypeId, val: TypeId) -> Option<TypeId> {
        self.get_or_insert_marked(key, val, Mark::No)
    }

    /// The candidate recorded for `key`, or else records `val` for it (one
    /// look-up for the walk's look-up-then-record step), marking the new
    /// pair as `mark` says (see [`HypotMap::marked_pair`]).
    #[inline(always)]
    pub(super) fn get_or_insert_marked(&mut self, key: TypeId, val: TypeId, mark: Mark) -> Option<TypeId> {
        let i = match self.slot(key) {
            Some(i) => i,
            None => self.add_page(key),
        };
        let (key, val) = (key.get(), val.get());
        debug_assert!(key & MARK == 0 && val & FWD_SIDE == 0);
        let v = self.pool[i];
        if v != EMPTY {
            return Some(TypeId::new(v));
        }
        self.pool[i] = val;
        // as bits: a walk step's kinds decide them without branches
        let fwd = (mark == Mark::Fwd) as u32;
        let marked = (mark != Mark::No) as u32;
        self.pairs.push((key | marked << 31, val | fwd << 31));
        None
    }

    /// Gives `key`'s page a place in the pool (a free page if there is
    /// one) and returns `key`'s slot.
    #[inline(never)]
    fn add_page(&mut self, key: TypeId) -> usize {
        let key = key.get();
        let pg = (key >> PAGE_BITS) as usize;
        if pg >= self.dir.len() {
            self.dir.resize(pg + 1, NO_PAGE);
        }
        let p = match self.free.pop() {
            Some(p) => p,
            None => {
                let p = (self.pool.len() / PAGE) as u32;
                self.pool.resize(self.pool.len() + PAGE, EMPTY);
                p
            }
        };
        self.dir[pg] = p;
        self.used.push(pg as u32);
        p as usize * PAGE + (key as usize & (PAGE - 1))
    }

    /// The number of pairs recorded in this walk.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.pairs.len()
    }

    /// The `n`th (key, value) pair of this walk, in insertion order.
    #[cfg(test)]
    fn pair(&self, n: usize) -> (TypeId, TypeId) {
        let (k, v) = self.pairs[n];
        (TypeId::new(k & !MARK), TypeId::new(v & !FWD_SIDE))
    }

    /// The `n`th pair of this walk if it is marked, and whether it was
    /// marked [`Mark::Fwd`].
    #[inline]
    pub(super) fn marked_pair(&self, n: usize) -> Option<(TypeId, TypeId, bool)> {
        let (k, v) = self.pairs[n];
        (k & MARK != 0).then_some((TypeId::new(k & !MARK), TypeId::new(v & !FWD_SIDE), v & FWD_SIDE != 0))
    }

    /// Empties the map for the next walk: the slots it set, then its pages
    /// go back to the free list (all empty again, so nothing is zeroed).
    #[inline]
    pub(super) fn clear(&mut self) {
        for &(k, _) in &self.pairs {
            let k = k & !MARK;
            let p = self.dir[(k >> PAGE_BITS) as usize] as usize;
            self.pool[p * PAGE + (k as usize & (PAGE - 1))] = EMPTY;
        }
        self.pairs.clear();
        for &pg in &self.used {
            self.free.push(self.dir[pg as usize]);
            self.dir[pg as usize] = NO_PAGE;
        }
        self.used.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::{EMPTY, HypotMap, Mark, NO_PAGE, PAGE};
    use crate::btf::TypeId;

    // The map with raw numbers, to keep the cases short.
    fn gi(m: &mut HypotMap, k: u32, v: u32) -> Option<u32> {
        m.get_or_insert(TypeId::new(k), TypeId::new(v)).map(TypeId::get)
    }
    fn gim(m: &mut HypotMap, k: u32, v: u32, mark: Mark) -> Option<u32> {
        m.get_or_insert_marked(TypeId::new(k), TypeId::new(v), mark)
            .map(TypeId::get)
    }
    fn g(m: &HypotMap, k: u32) -> Option<u32> {
        m.get(TypeId::new(k)).map(TypeId::get)
    }
    fn pair(m: &HypotMap, n: usize) -> (u32, u32) {
        let (k, v) = m.pair(n);
        (k.get(), v.get())
    }
    fn marked(m: &HypotMap, n: usize) -> Option<(u32, u32, bool)> {
        m.marked_pair(n).map(|(k, v, f)| (k.get(), v.get(), f))
    }

    fn is_empty(m: &HypotMap) -> bool {
        m.pool.iter().all(|&v| v == EMPTY) && m.dir.iter().all(|&p| p == NO_PAGE) && m.len() == 0
    }

    #[test]
    fn entries_live_for_one_walk() {
        let mut m = HypotMap::new();
        for k in 0..5000u32 {
            assert_eq!(gi(&mut m, k * 7, k + 1), None);
        }
        assert!((0..5000u32).all(|k| gi(&mut m, k * 7, 0) == Some(k + 1)));
        assert_eq!(m.len(), 5000);
        assert_eq!(pair(&m, 4999), (4999 * 7, 5000));
        assert_eq!(g(&m, 8), None, "an id between recorded ones, on a page that exists");
        assert_eq!(g(&m, 1 << 30), None, "an id past the directory");
        m.clear();
        assert!(is_empty(&m));
        assert_eq!(g(&m, 14), None);
        assert_eq!(gi(&mut m, 14, 3), None);
        assert_eq!(g(&m, 14), Some(3));
        assert_eq!(gi(&mut m, 14, 4), Some(3));
        assert_eq!(gi(&mut m, 21, 4), None);
        assert_eq!((m.len(), pair(&m, 0), pair(&m, 1)), (2, (14, 3), (21, 4)));
    }

    #[test]
    fn marks_are_kept_beside_the_pairs_and_clearing_empties_marked_slots() {
        let mut m = HypotMap::new();
        let mark = |k: u32| match k % 7 {
            0 => Mark::Composites,
            3 => Mark::Fwd,
            _ => Mark::No,
        };
        for k in 0..3000u32 {
            gim(&mut m, k * 3 + 1, k, mark(k));
        }
        assert_eq!(g(&m, 3 * 3 + 1), Some(3), "the map's value carries no tag");
        assert_eq!(pair(&m, 3), (3 * 3 + 1, 3), "nor does the pair's");
        let marked: Vec<(u32, u32, bool)> = (0..m.len()).filter_map(|n| marked(&m, n)).collect();
        let want = (0..3000u32)
            .filter(|&k| mark(k) != Mark::No)
            .map(|k| (k * 3 + 1, k, mark(k) == Mark::Fwd))
            .collect::<Vec<_>>();
        assert_eq!(marked, want);
        m.clear();
        assert!(is_empty(&m));
    }

    #[test]
    fn pages_go_back_after_each_walk_and_are_reused_empty() {
        let mut m = HypotMap::new();
        // one walk over three pages far apart
        for k in [5u32, 6, 40_000, 1_000_000] {
            gi(&mut m, k, k + 1);
        }
        assert_eq!(m.pool.len(), 3 * PAGE);
        m.clear();
        assert_eq!(m.free.len(), 3);
        // the next walk on other pages takes the same three back, all empty
        for k in [70_000u32, 70_001, 2_000_000, 300] {
            assert_eq!(g(&m, k), None);
            assert_eq!(gi(&mut m, k, 9), None);
        }
        assert_eq!(m.pool.len(), 3 * PAGE, "no page was added");
        assert!(m.free.is_empty());
        assert_eq!([5u32, 6, 40_000, 1_000_000].map(|k| g(&m, k)), [None; 4]);
        assert_eq!(g(&m, 70_002), None, "a reused page holds nothing of the last walk");
        m.clear();
        assert!(is_empty(&m));
    }
}
