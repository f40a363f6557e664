//! The hypothetical canonical → candidate map of one struct-equivalence walk.
//!
//! libbpf keeps it as an array over all type ids. A walk records a few
//! hundred pairs on average (a vmlinux: 18 M pairs over 395 k walks), so a
//! small open-addressing table, emptied slot by slot after each walk, holds
//! the same entries in a few kilobytes that stay in cache, instead of 4 bytes
//! for each of 4.35 M ids (17 MiB at dedup's memory peak).

/// A free slot's key: no type id reaches it (ids are below 2^31).
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    key: u32,
    val: u32,
}

const FREE: Slot = Slot { key: EMPTY, val: 0 };

pub(super) struct HypotMap {
    slots: Vec<Slot>,
    /// 32 − log2(slots.len()).
    shift: u32,
    /// Pairs of the current walk in insertion order (libbpf's hypot_list),
    /// each with the slot it occupies (for clearing), tagged with [`MARK`]
    /// if it was recorded marked ([`HypotMap::get_or_insert_marked`]); the
    /// value's copy here carries [`FWD_SIDE`].
    pairs: Vec<(u32, u32, u32)>,
}

/// Tag of a marked pair, in its slot index (slots are far fewer than 2^31).
const MARK: u32 = 1 << 31;
/// Tag of a marked pair with a FWD on either side, in the pair list's copy
/// of the value (type ids are below 2^31).
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

impl Default for HypotMap {
    fn default() -> HypotMap {
        HypotMap::new()
    }
}

impl HypotMap {
    const MIN_BITS: u32 = 10;

    pub(super) fn new() -> HypotMap {
        HypotMap {
            slots: vec![FREE; 1 << Self::MIN_BITS],
            shift: 32 - Self::MIN_BITS,
            pairs: Vec::new(),
        }
    }

    #[inline]
    fn home(&self, key: u32) -> usize {
        // Fibonacci hashing: a walk's ids cluster by CU; their low bits
        // alone make long probe runs (measured: twice the struct pass)
        (key.wrapping_mul(0x9e37_79b1) >> self.shift) as usize
    }

    /// Where `key` is (`Ok`) or would go (`Err`: the free slot that ends
    /// its probe run).
    #[inline(always)]
    fn probe(&self, key: u32) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.slots[i].key {
                k if k == key => return Ok(i),
                EMPTY => return Err(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The candidate recorded for `key` in this walk.
    #[inline(always)]
    pub(super) fn get(&self, key: u32) -> Option<u32> {
        self.probe(key).ok().map(|i| self.slots[i].val)
    }

    #[cfg(test)]
    fn get_or_insert(&mut self, key: u32, val: u32) -> Option<u32> {
        self.get_or_insert_marked(key, val, Mark::No)
    }

    /// The candidate recorded for `key`, or else records `val` for it (one
    /// probe for the walk's look-up-then-record step), marking the new pair
    /// as `mark` says (see [`HypotMap::marked_pair`]).
    #[inline(always)]
    pub(super) fn get_or_insert_marked(&mut self, key: u32, val: u32, mark: Mark) -> Option<u32> {
        debug_assert!(key != EMPTY);
        if (self.pairs.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        match self.probe(key) {
            Ok(i) => Some(self.slots[i].val),
            Err(i) => {
                self.slots[i] = Slot { key, val };
                // as bits: a walk step's kinds decide them without branches
                let fwd = (mark == Mark::Fwd) as u32;
                let marked = (mark != Mark::No) as u32;
                self.pairs.push((key, val | fwd << 31, i as u32 | marked << 31));
                None
            }
        }
    }

    #[cold]
    fn grow(&mut self) {
        self.slots = vec![FREE; self.slots.len() * 2];
        self.shift -= 1;
        for n in 0..self.pairs.len() {
            let (key, val, at) = self.pairs[n];
            // keys are distinct, so each probe ends at a free slot
            let i = self.probe(key).unwrap_err();
            self.slots[i] = Slot { key, val: val & !FWD_SIDE };
            self.pairs[n].2 = i as u32 | (at & MARK);
        }
    }

    /// The number of pairs recorded in this walk.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.pairs.len()
    }

    /// The `n`th (key, value) pair of this walk, in insertion order.
    #[cfg(test)]
    fn pair(&self, n: usize) -> (u32, u32) {
        let (k, v, _) = self.pairs[n];
        (k, v & !FWD_SIDE)
    }

    /// The `n`th pair of this walk if it is marked, and whether it was
    /// marked [`Mark::Fwd`].
    #[inline]
    pub(super) fn marked_pair(&self, n: usize) -> Option<(u32, u32, bool)> {
        let (k, v, at) = self.pairs[n];
        (at & MARK != 0).then_some((k, v & !FWD_SIDE, v & FWD_SIDE != 0))
    }

    /// Empties the map for the next walk: only the slots it used.
    #[inline]
    pub(super) fn clear(&mut self) {
        for &(_, _, i) in &self.pairs {
            self.slots[(i & !MARK) as usize] = FREE;
        }
        self.pairs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::HypotMap;

    #[test]
    fn entries_live_for_one_walk_and_survive_growth() {
        let mut m = HypotMap::new();
        for k in 0..5000u32 {
            assert_eq!(m.get_or_insert(k * 7, k + 1), None);
        }
        assert!((0..5000u32).all(|k| m.get_or_insert(k * 7, 0) == Some(k + 1)));
        assert_eq!(m.len(), 5000);
        assert_eq!(m.pair(4999), (4999 * 7, 5000));
        m.clear();
        assert_eq!(m.len(), 0);
        assert!(m.slots.iter().all(|s| s.key == super::EMPTY));
        assert_eq!(m.get(14), None);
        assert_eq!(m.get_or_insert(14, 3), None);
        assert_eq!(m.get(14), Some(3));
        assert_eq!(m.get_or_insert(14, 4), Some(3));
        assert_eq!(m.get_or_insert(21, 4), None);
        assert_eq!((m.len(), m.pair(0), m.pair(1)), (2, (14, 3), (21, 4)));
    }

    #[test]
    fn marks_survive_growth_and_clearing_frees_marked_slots() {
        use super::Mark;
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
        let marked: Vec<(u32, u32, bool)> = (0..m.len()).filter_map(|n| m.marked_pair(n)).collect();
        let want = (0..3000u32)
            .filter(|&k| mark(k) != Mark::No)
            .map(|k| (k * 3 + 1, k, mark(k) == Mark::Fwd))
            .collect::<Vec<_>>();
        assert_eq!(marked, want);
        m.clear();
        assert!(m.slots.iter().all(|s| s.key == super::EMPTY));
        assert_eq!(m.len(), 0);
    }
}
