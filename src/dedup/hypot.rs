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

/// A free slot: no type id reaches it (ids are below 2^31).
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
    fn slot(&self, key: u32) -> Option<usize> {
        match self.dir.get((key >> PAGE_BITS) as usize) {
            Some(&p) if p != NO_PAGE => Some(p as usize * PAGE + (key as usize & (PAGE - 1))),
            _ => None,
        }
    }

    /// The candidate recorded for `key` in this walk.
    #[inline(always)]
    pub(super) fn get(&self, key: u32) -> Option<u32> {
        let v = self.pool[self.slot(key)?];
        (v != EMPTY).then_some(v)
    }

    #[cfg(test)]
    fn get_or_insert(&mut self, key: u32, val: u32) -> Option<u32> {
        self.get_or_insert_marked(key, val, Mark::No)
    }

    /// The candidate recorded for `key`, or else records `val` for it (one
    /// look-up for the walk's look-up-then-record step), marking the new
    /// pair as `mark` says (see [`HypotMap::marked_pair`]).
    #[inline(always)]
    pub(super) fn get_or_insert_marked(&mut self, key: u32, val: u32, mark: Mark) -> Option<u32> {
        debug_assert!(key & MARK == 0 && val & FWD_SIDE == 0);
        let i = match self.slot(key) {
            Some(i) => i,
            None => self.add_page(key),
        };
        let v = self.pool[i];
        if v != EMPTY {
            return Some(v);
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
    fn add_page(&mut self, key: u32) -> usize {
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
    fn pair(&self, n: usize) -> (u32, u32) {
        let (k, v) = self.pairs[n];
        (k & !MARK, v & !FWD_SIDE)
    }

    /// The `n`th pair of this walk if it is marked, and whether it was
    /// marked [`Mark::Fwd`].
    #[inline]
    pub(super) fn marked_pair(&self, n: usize) -> Option<(u32, u32, bool)> {
        let (k, v) = self.pairs[n];
        (k & MARK != 0).then_some((k & !MARK, v & !FWD_SIDE, v & FWD_SIDE != 0))
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

    fn is_empty(m: &HypotMap) -> bool {
        m.pool.iter().all(|&v| v == EMPTY) && m.dir.iter().all(|&p| p == NO_PAGE) && m.len() == 0
    }

    #[test]
    fn entries_live_for_one_walk() {
        let mut m = HypotMap::new();
        for k in 0..5000u32 {
            assert_eq!(m.get_or_insert(k * 7, k + 1), None);
        }
        assert!((0..5000u32).all(|k| m.get_or_insert(k * 7, 0) == Some(k + 1)));
        assert_eq!(m.len(), 5000);
        assert_eq!(m.pair(4999), (4999 * 7, 5000));
        assert_eq!(m.get(8), None, "an id between recorded ones, on a page that exists");
        assert_eq!(m.get(1 << 30), None, "an id past the directory");
        m.clear();
        assert!(is_empty(&m));
        assert_eq!(m.get(14), None);
        assert_eq!(m.get_or_insert(14, 3), None);
        assert_eq!(m.get(14), Some(3));
        assert_eq!(m.get_or_insert(14, 4), Some(3));
        assert_eq!(m.get_or_insert(21, 4), None);
        assert_eq!((m.len(), m.pair(0), m.pair(1)), (2, (14, 3), (21, 4)));
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
            m.get_or_insert_marked(k * 3 + 1, k, mark(k));
        }
        assert_eq!(m.get(3 * 3 + 1), Some(3), "the map's value carries no tag");
        assert_eq!(m.pair(3), (3 * 3 + 1, 3), "nor does the pair's");
        let marked: Vec<(u32, u32, bool)> = (0..m.len()).filter_map(|n| m.marked_pair(n)).collect();
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
            m.get_or_insert(k, k + 1);
        }
        assert_eq!(m.pool.len(), 3 * PAGE);
        m.clear();
        assert_eq!(m.free.len(), 3);
        // the next walk on other pages takes the same three back, all empty
        for k in [70_000u32, 70_001, 2_000_000, 300] {
            assert_eq!(m.get(k), None);
            assert_eq!(m.get_or_insert(k, 9), None);
        }
        assert_eq!(m.pool.len(), 3 * PAGE, "no page was added");
        assert!(m.free.is_empty());
        assert_eq!([5u32, 6, 40_000, 1_000_000].map(|k| m.get(k)), [None; 4]);
        assert_eq!(m.get(70_002), None, "a reused page holds nothing of the last walk");
        m.clear();
        assert!(is_empty(&m));
    }
}
