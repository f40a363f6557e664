//! A CU's string ids by `.debug_str` offset, in a table each worker thread
//! keeps from CU to CU.
//!
//! Every name a CU's records use is looked up here (a vmlinux: about 13 M
//! look-ups in 2,400 CUs). A fresh `HashMap` per CU cost 4.5 % of an encode's
//! instructions: its allocation and clearing per CU, and the general probe.
//! Here a CU starts by bumping a generation number, which empties the table
//! without touching it, and a probe is a multiply, a shift and a compare.

/// One slot: `generation` tells whether it belongs to the current CU.
#[derive(Clone, Copy, Default)]
struct Slot {
    generation: u32,
    key: u32,
    val: u32,
}

/// Open addressing with linear probing, at most half full.
#[derive(Default)]
pub struct OffMap {
    slots: Vec<Slot>,
    /// The slots this CU uses: a power of two, sized to the CU. A table kept
    /// at the largest CU's size would spread every later CU's keys over
    /// megabytes (a cache miss per look-up).
    size: usize,
    /// `64 - log2(size)`: the shift of the multiplicative hash.
    shift: u32,
    generation: u32,
    len: usize,
}

impl OffMap {
    /// Empties the map for a new CU expecting about `expect` keys.
    pub fn start(&mut self, expect: usize) {
        self.next_generation();
        self.len = 0;
        self.resize((2 * expect.max(8)).next_power_of_two());
    }

    /// Makes every slot stale without touching it.
    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // after 2^32 generations on this thread: slots of generation 0
            // would look current
            self.slots.iter_mut().for_each(|s| *s = Slot::default());
            self.generation = 1;
        }
    }

    /// Uses the first `size` slots, allocating them if needed (stale slots
    /// there, of earlier generations, count as free).
    fn resize(&mut self, size: usize) {
        if self.slots.len() < size {
            self.slots = vec![Slot::default(); size];
        }
        self.size = size;
        self.shift = 64 - size.trailing_zeros();
    }

    #[inline]
    fn home(&self, key: u32) -> usize {
        ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The value of `key`, or `make()`'s, which is stored.
    #[inline]
    pub fn get_or_insert(&mut self, key: u32, make: impl FnOnce() -> u32) -> u32 {
        let mask = self.size - 1;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.generation != self.generation {
                break;
            }
            if s.key == key {
                return s.val;
            }
            i = (i + 1) & mask;
        }
        let val = make();
        self.slots[i] = Slot { generation: self.generation, key, val };
        self.len += 1;
        if self.len * 2 > self.size {
            self.grow();
        }
        val
    }

    /// Doubles the slots in use: the entries move to a new generation.
    #[cold]
    fn grow(&mut self) {
        let live: Vec<Slot> = self.slots[..self.size].iter().copied().filter(|s| s.generation == self.generation).collect();
        self.next_generation();
        self.resize(self.size * 2);
        let mask = self.size - 1;
        for s in live {
            let mut i = self.home(s.key);
            while self.slots[i].generation == self.generation {
                i = (i + 1) & mask;
            }
            self.slots[i] = Slot { generation: self.generation, ..s };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OffMap;

    #[test]
    fn cus_see_only_their_own_keys_and_growth_keeps_them() {
        let mut m = OffMap::default();
        let mut reference = std::collections::HashMap::new();
        for cu in 0..5u32 {
            m.start(if cu == 0 { 1 } else { 100 });
            reference.clear();
            for i in 0..3000u32 {
                let key = (i * 7919 + cu) % 2500;
                let next = reference.len() as u32 + 1;
                let want = *reference.entry(key).or_insert(next);
                assert_eq!(m.get_or_insert(key, || next), want, "CU {cu}, key {key}");
            }
        }
    }

    #[test]
    fn a_small_cu_after_a_large_one_uses_few_slots() {
        let mut m = OffMap::default();
        m.start(1);
        for key in 0..100_000u32 {
            assert_eq!(m.get_or_insert(key, || key + 1), key + 1);
        }
        let big = m.slots.len();
        assert!(big >= 200_000);
        m.start(10);
        assert_eq!(m.size, 32);
        for key in (0..40u32).map(|k| k * 1000) {
            assert_eq!(m.get_or_insert(key, || key + 7), key + 7, "a key of the last CU was seen");
        }
        // grew within the allocation, which it keeps
        assert_eq!((m.size, m.slots.len()), (128, big));
        assert!((0..40u32).all(|k| m.get_or_insert(k * 1000, || 0) == k * 1000 + 7));
    }

    #[test]
    fn generation_wrap_clears_the_slots() {
        let mut m = OffMap::default();
        m.start(4);
        assert_eq!(m.get_or_insert(5, || 1), 1);
        m.generation = u32::MAX;
        m.start(4);
        assert_eq!(m.get_or_insert(5, || 2), 2, "a slot of an old CU looked current");
    }
}
