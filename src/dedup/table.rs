//! The candidate table: a multimap from a 64-bit type hash to canonical type
//! ids that reproduces the *iteration order* of libbpf's chained hash map.
//!
//! libbpf links a new entry at the head of its bucket chain, and when the map
//! grows it relinks every entry, walking each old chain from head to tail and
//! pushing onto the head of the new chain. Entries with equal keys always share
//! a chain, so for one key the observable order is: newest first, and every
//! growth reverses the whole list. Growth happens before linking the entry,
//! when the map is empty or `(size + 1) * 4 / 3 > capacity` (4, 8, 16, …).
//!
//! Because every growth reverses *every* list, a global parity bit is enough:
//! each key keeps a doubly linked list in physical order, a logical prepend
//! goes to the physical front when the parity is even and to the back when it
//! is odd, and iteration runs front-to-back or back-to-front by the parity.
//! That is O(1) per insertion and per step, with no per-growth work at all.

use crate::btf::TypeId;

const NIL: u32 = u32::MAX;

/// Spreads libbpf's weak `h * 31 + v` hashes over the table's bits.
#[inline]
fn mix(key: u64) -> u64 {
    let m = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    m ^ (m >> 29)
}

/// One key's list; `front == NIL` marks a free slot (a used one always has
/// an entry, and any `u64` can be a key).
#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    front: u32,
    back: u32,
}

const FREE: Slot = Slot {
    key: 0,
    front: NIL,
    back: NIL,
};

#[derive(Clone)]
pub struct CandTable {
    /// Open addressing with linear probing, at most 7/8 full: one load of
    /// 16 bytes for most look-ups (hashbrown's control-byte group first and
    /// the slot second measured slower in the reference pass).
    slots: Vec<Slot>,
    keys: usize,
    ids: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// libbpf's entry count and bucket count, for the growth rule.
    size: u64,
    cap: u64,
    /// Number of growths so far, modulo 2.
    odd: bool,
    /// What the insertions since [`CandTable::mark`] changed, so that
    /// [`CandTable::undo`] can give back the table as it was.
    journal: Option<Box<Journal>>,
}

/// The table as it was at a mark, and the old values of what insertions
/// changed since: a batch's modules each start from the base's table, and
/// undoing one module's few insertions is cheaper than copying the table
/// (3.3 MB over a vmlinux) for the next.
#[derive(Clone)]
struct Journal {
    entries: u32,
    keys: usize,
    size: u64,
    cap: u64,
    odd: bool,
    /// Slots as they were before an insertion changed them, oldest first.
    slots: Vec<(u32, Slot)>,
    /// An entry of the marked table whose `next` or `prev` an insertion
    /// changed, with their old values, oldest first.
    links: Vec<(u32, u32, u32)>,
    /// The slots were rehashed: only a copy gives the marked table back.
    rehashed: bool,
}

/// A position while walking one key's candidates.
#[derive(Clone, Copy)]
pub struct Cursor {
    entry: u32,
    forward: bool,
}

impl CandTable {
    /// A table without room, for passes that look nothing up.
    pub const EMPTY: CandTable = CandTable {
        slots: Vec::new(),
        keys: 0,
        ids: Vec::new(),
        next: Vec::new(),
        prev: Vec::new(),
        size: 0,
        cap: 0,
        odd: false,
        journal: None,
    };

    pub fn with_capacity(n: usize) -> CandTable {
        CandTable {
            slots: vec![FREE; (n * 8 / 7 + 1).next_power_of_two().max(16)],
            keys: 0,
            ids: Vec::with_capacity(n),
            next: Vec::with_capacity(n),
            prev: Vec::with_capacity(n),
            size: 0,
            cap: 0,
            odd: false,
            journal: None,
        }
    }

    /// Starts recording insertions, so that [`CandTable::undo`] can return
    /// to the table as it is now.
    pub fn mark(&mut self) {
        self.journal = Some(Box::new(Journal {
            entries: self.ids.len() as u32,
            keys: self.keys,
            size: self.size,
            cap: self.cap,
            odd: self.odd,
            slots: Vec::new(),
            links: Vec::new(),
            rehashed: false,
        }));
    }

    /// Returns to the table as it was at the last [`CandTable::mark`] and
    /// keeps recording from there; `false` (and the table as it is) if the
    /// slots were rehashed since, or nothing was marked: the caller then
    /// needs a copy of the marked table.
    pub fn undo(&mut self) -> bool {
        let Some(j) = self.journal.as_deref_mut() else {
            return false;
        };
        if j.rehashed {
            return false;
        }
        for &(i, old) in j.slots.iter().rev() {
            self.slots[i as usize] = old;
        }
        let n = j.entries as usize;
        self.ids.truncate(n);
        self.next.truncate(n);
        self.prev.truncate(n);
        for &(e, next, prev) in j.links.iter().rev() {
            self.next[e as usize] = next;
            self.prev[e as usize] = prev;
        }
        self.keys = j.keys;
        self.size = j.size;
        self.cap = j.cap;
        self.odd = j.odd;
        j.slots.clear();
        j.links.clear();
        true
    }

    /// Appends `id` under `key` (libbpf's `hashmap__append`).
    pub fn insert(&mut self, key: u64, id: TypeId) {
        let id = id.get();
        if self.cap == 0 || (self.size + 1) * 4 / 3 > self.cap {
            self.cap = if self.cap == 0 { 4 } else { self.cap * 2 };
            self.odd = !self.odd;
        }
        self.size += 1;
        let e = self.ids.len() as u32;
        self.ids.push(id);
        self.next.push(NIL);
        self.prev.push(NIL);
        if (self.keys + 1) * 8 > self.slots.len() * 7 {
            self.grow_slots();
        }
        let i = self.probe(key);
        if let Some(j) = self.journal.as_deref_mut() {
            j.note(i, &self.slots[i], &self.next, &self.prev, self.odd);
        }
        let slot = &mut self.slots[i];
        match slot.front {
            NIL => {
                *slot = Slot { key, front: e, back: e };
                self.keys += 1;
            }
            _ => {
                if !self.odd {
                    // logical head == physical front
                    self.next[e as usize] = slot.front;
                    self.prev[slot.front as usize] = e;
                    slot.front = e;
                } else {
                    self.prev[e as usize] = slot.back;
                    self.next[slot.back as usize] = e;
                    slot.back = e;
                }
            }
        }
    }

    /// The slot of `key`, or the free slot that ends its probe run.
    #[inline(always)]
    fn probe(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = mix(key) as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.front == NIL || s.key == key {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    #[cold]
    fn grow_slots(&mut self) {
        if let Some(j) = self.journal.as_deref_mut() {
            j.rehashed = true;
        }
        let bigger = vec![FREE; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for s in old.into_iter().filter(|s| s.front != NIL) {
            // keys are distinct, so each probe ends at a free slot
            let i = self.probe(s.key);
            self.slots[i] = s;
        }
    }

    /// The first candidate under `key` in libbpf's order.
    #[inline]
    pub fn first(&self, key: u64) -> Option<(TypeId, Cursor)> {
        let slot = &self.slots[self.probe(key)];
        if slot.front == NIL {
            return None;
        }
        let c = if !self.odd {
            Cursor {
                entry: slot.front,
                forward: true,
            }
        } else {
            Cursor {
                entry: slot.back,
                forward: false,
            }
        };
        Some((TypeId::new(self.ids[c.entry as usize]), c))
    }

    /// The candidate after `c`.
    #[inline]
    pub fn next(&self, c: Cursor) -> Option<(TypeId, Cursor)> {
        let e = if c.forward {
            self.next[c.entry as usize]
        } else {
            self.prev[c.entry as usize]
        };
        if e == NIL {
            return None;
        }
        let c = Cursor {
            entry: e,
            forward: c.forward,
        };
        Some((TypeId::new(self.ids[e as usize]), c))
    }

    #[cfg(test)]
    fn list(&self, key: u64) -> Vec<u32> {
        let mut v = Vec::new();
        let mut cur = self.first(key);
        while let Some((id, c)) = cur {
            v.push(id.get());
            cur = self.next(c);
        }
        v
    }
}

impl Journal {
    /// Records what an insertion at slot `i` (as it is now) is about to
    /// change: the slot, and, when it joins a list of the marked table, the
    /// link of that list's end it writes (`prev` of the front when the
    /// parity is even, `next` of the back when odd).
    #[inline]
    fn note(&mut self, i: usize, slot: &Slot, next: &[u32], prev: &[u32], odd: bool) {
        if self.rehashed {
            return;
        }
        self.slots.push((i as u32, *slot));
        let end = match (slot.front, odd) {
            (NIL, _) => return,
            (_, false) => slot.front,
            (_, true) => slot.back,
        };
        if end < self.entries {
            self.links.push((end, next[end as usize], prev[end as usize]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal model of libbpf's chained map: per-key lists, prepend,
    /// reverse everything on growth.
    struct Model {
        lists: std::collections::BTreeMap<u64, Vec<u32>>,
        size: u64,
        cap: u64,
    }

    impl Model {
        fn insert(&mut self, key: u64, id: u32) {
            if self.cap == 0 || (self.size + 1) * 4 / 3 > self.cap {
                self.cap = if self.cap == 0 { 4 } else { self.cap * 2 };
                for l in self.lists.values_mut() {
                    l.reverse();
                }
            }
            self.size += 1;
            self.lists.entry(key).or_default().insert(0, id);
        }
    }

    #[test]
    fn growth_points() {
        // growths at the 1st, 4th, 7th, 13th, 25th insertion
        let mut t = CandTable::with_capacity(0);
        let mut flips = Vec::new();
        for i in 1..=30u32 {
            let before = t.odd;
            t.insert(i as u64 + 1000, TypeId::new(i));
            if before != t.odd {
                flips.push(i);
            }
        }
        assert_eq!(flips, vec![1, 4, 7, 13, 25]);
    }

    #[test]
    fn matches_reversal_model() {
        let mut t = CandTable::with_capacity(0);
        let mut m = Model {
            lists: Default::default(),
            size: 0,
            cap: 0,
        };
        // a deterministic mix of a few hot keys and many cold ones
        let mut x: u64 = 12345;
        for id in 1..2000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = if x >> 60 < 6 { (x >> 61) & 3 } else { x >> 20 };
            t.insert(key, TypeId::new(id));
            m.insert(key, id);
            if id % 97 == 0 {
                for (k, l) in &m.lists {
                    assert_eq!(&t.list(*k), l, "key {k} after {id} insertions");
                }
            }
        }
        for (k, l) in &m.lists {
            assert_eq!(&t.list(*k), l);
        }
    }

    /// Everything a look-up or a later insertion can observe.
    fn internals(t: &CandTable) -> impl PartialEq + std::fmt::Debug {
        let slots: Vec<(u64, u32, u32)> = t.slots.iter().map(|s| (s.key, s.front, s.back)).collect();
        (
            slots,
            t.keys,
            t.ids.clone(),
            t.next.clone(),
            t.prev.clone(),
            (t.size, t.cap, t.odd),
        )
    }

    fn keys(x: &mut u64, hot: u64) -> u64 {
        *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        if *x >> 60 < 8 { (*x >> 61) % hot } else { *x >> 20 }
    }

    #[test]
    fn undo_gives_back_the_marked_table() {
        let mut base = CandTable::with_capacity(0);
        let mut x: u64 = 99;
        for id in 1..3000u32 {
            base.insert(keys(&mut x, 5), TypeId::new(id));
        }
        let mut work = base.clone();
        work.mark();
        // rounds of different sizes, each undone; the parity flips in some
        for (round, n) in [1u32, 7, 200, 0, 1500].into_iter().enumerate() {
            for id in 0..n {
                work.insert(keys(&mut x, 5), TypeId::new(10_000 + id));
            }
            if work.journal.as_ref().unwrap().rehashed {
                assert!(!work.undo(), "round {round}: a rehashed table cannot be undone");
                work = base.clone();
                work.mark();
                continue;
            }
            assert!(work.undo(), "round {round}");
            assert_eq!(internals(&work), internals(&base), "round {round} ({n} insertions)");
        }
        // the undone table goes on as the base would
        let mut b2 = base.clone();
        for id in 0..50u32 {
            let k = keys(&mut x, 5);
            work.insert(k, TypeId::new(20_000 + id));
            b2.insert(k, TypeId::new(20_000 + id));
        }
        assert_eq!(internals(&work), internals(&b2));
    }

    #[test]
    fn undo_refuses_after_a_rehash() {
        let mut t = CandTable::with_capacity(0);
        assert!(!t.undo(), "nothing marked");
        t.mark();
        for id in 0..100u32 {
            t.insert(u64::from(id) * 7919, TypeId::new(id));
        }
        assert!(!t.undo(), "16 slots rehashed on the way to 100 keys");
        assert_eq!(t.ids.len(), 100, "a refused undo leaves the table as it is");
    }

    #[test]
    fn newest_first_then_reversed() {
        let mut t = CandTable::with_capacity(0);
        t.insert(7, TypeId::new(1)); // growth (1st)
        t.insert(7, TypeId::new(2));
        t.insert(9, TypeId::new(3));
        assert_eq!(t.list(7), vec![2, 1]);
        t.insert(9, TypeId::new(4)); // growth (4th): [1, 2]
        assert_eq!(t.list(7), vec![1, 2]);
        t.insert(7, TypeId::new(5));
        assert_eq!(t.list(7), vec![5, 1, 2]);
        assert!(t.first(8).is_none());
    }
}
