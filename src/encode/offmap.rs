//! A CU's string ids by `.debug_str` offset, in a table each worker thread
//! keeps from CU to CU.
//!
//! Every name a CU's records use is looked up here (a vmlinux: about 13 M
//! look-ups in 2,400 CUs, 2,750 distinct names in an average CU). A fresh
//! `HashMap` per CU cost a share of an encode's instructions: its allocation
//! and the general probe. Here a CU uses a power-of-two prefix of one
//! allocation, sized to the CU and zeroed at its start (tens of kilobytes:
//! it stays in the first-level cache while the decoder streams through
//! megabytes, where a table kept at the largest CU's size missed it on
//! most look-ups), and a probe is a multiply, a shift and a compare.

/// One slot: the key plus one (0: free) and its value.
#[derive(Clone, Copy, Default)]
struct Slot {
    key1: u32,
    val: u32,
}

/// Open addressing with linear probing, at most three quarters full.
#[derive(Default)]
pub struct OffMap {
    slots: Vec<Slot>,
    /// The slots this CU uses: a power of two.
    size: usize,
    /// `64 - log2(size)`: the shift of the multiplicative hash.
    shift: u32,
    len: usize,
}

impl OffMap {
    /// Empties the map for a new CU expecting at most about `expect` keys.
    /// The encoder's estimate is about 1.5 times a CU's names; 1.5 times
    /// that, rounded up, leaves the table under half full in most CUs, and
    /// growing (visible in an encode's profile when the estimate alone was
    /// the size) rare.
    pub fn start(&mut self, expect: usize) {
        self.len = 0;
        self.resize((expect + expect / 2).max(16).next_power_of_two());
    }

    /// Uses the first `size` slots, all free.
    fn resize(&mut self, size: usize) {
        if self.slots.len() < size {
            self.slots = vec![Slot::default(); size];
        } else {
            self.slots[..size].fill(Slot::default());
        }
        self.size = size;
        self.shift = 64 - size.trailing_zeros();
    }

    #[inline]
    fn home(&self, key1: u32) -> usize {
        ((key1 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The value of `key` (below `u32::MAX`), or `make()`'s, which is stored.
    #[inline]
    pub fn get_or_insert(&mut self, key: u32, make: impl FnOnce() -> u32) -> u32 {
        debug_assert!(key != u32::MAX);
        let key1 = key.wrapping_add(1);
        let mask = self.size - 1;
        let mut i = self.home(key1);
        loop {
            let s = self.slots[i];
            if s.key1 == key1 {
                return s.val;
            }
            if s.key1 == 0 {
                break;
            }
            i = (i + 1) & mask;
        }
        let val = make();
        self.slots[i] = Slot { key1, val };
        self.len += 1;
        if self.len * 4 > self.size * 3 {
            self.grow();
        }
        val
    }

    /// Doubles the slots in use.
    #[cold]
    fn grow(&mut self) {
        let live: Vec<Slot> = self.slots[..self.size]
            .iter()
            .copied()
            .filter(|s| s.key1 != 0)
            .collect();
        self.resize(self.size * 2);
        let mask = self.size - 1;
        for s in live {
            let mut i = self.home(s.key1);
            while self.slots[i].key1 != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
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
                // key 0 included: stored as 1, never mistaken for a free slot
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
        assert!(big >= 131_072);
        m.start(10);
        assert_eq!(m.size, 16);
        for key in (0..40u32).map(|k| k * 1000) {
            assert_eq!(
                m.get_or_insert(key, || key + 7),
                key + 7,
                "a key of the last CU was seen"
            );
        }
        // grew within the allocation, which it keeps
        assert_eq!((m.size, m.slots.len()), (64, big));
        assert!((0..40u32).all(|k| m.get_or_insert(k * 1000, || 0) == k * 1000 + 7));
        assert_eq!(m.get_or_insert(u32::MAX - 1, || 5), 5);
    }
}
