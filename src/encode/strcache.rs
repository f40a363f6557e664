//! `.debug_str` offset → BTF string offset, shared by the workers (readers)
//! and the in-order merge (the only writer).
//!
//! Names are referenced by their `.debug_str` offset, and one offset is one
//! string, so a name seen once never needs hashing again. A slot per byte of
//! the section would cost 4 bytes per byte (18 MiB for a vmlinux, at the
//! encoder's memory peak); slots exist only for offsets that start a string
//! (offset 0 and every offset after a NUL), found by rank in a bitmap: about
//! 2 MiB. An offset into the middle of a string (linkers merge string tails)
//! has no slot and is simply not cached.

use std::sync::atomic::{AtomicU32, Ordering};

pub struct StrCache {
    /// Bit `i`: offset `i` starts a string.
    starts: Vec<u64>,
    /// Set bits in `starts[..w]`, per word `w`.
    rank: Vec<u32>,
    /// One slot per string start; 0: not known yet.
    vals: Vec<AtomicU32>,
}

/// How far [`StrCache::new_passing`] scans between calls.
pub const SCAN_STEP: usize = 16 << 20;

impl StrCache {
    #[cfg(test)]
    pub fn new(section: &[u8]) -> StrCache {
        Self::new_passing(section, &mut || {})
    }

    /// [`StrCache::new`], calling `passed` each time the scan has gone past
    /// another [`SCAN_STEP`] bytes of `section`, so that a caller can drop
    /// what the scan touched behind it.
    pub fn new_passing(section: &[u8], passed: &mut dyn FnMut()) -> StrCache {
        let mut starts = vec![0u64; section.len().div_ceil(64)];
        if !section.is_empty() {
            starts[0] = 1;
        }
        // every offset after a NUL (but not past the end)
        for (k, stretch) in section.chunks(SCAN_STEP).enumerate() {
            for nul in memchr::memchr_iter(0, stretch) {
                let i = k * SCAN_STEP + nul + 1;
                if i < section.len() {
                    starts[i >> 6] |= 1 << (i & 63);
                }
            }
            passed();
        }
        let mut rank = Vec::with_capacity(starts.len());
        let mut n = 0u32;
        for w in &starts {
            rank.push(n);
            n += w.count_ones();
        }
        StrCache {
            starts,
            rank,
            vals: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// A cache that knows no offsets (tests, inputs without `.debug_str`).
    pub fn empty() -> StrCache {
        StrCache {
            starts: Vec::new(),
            rank: Vec::new(),
            vals: Vec::new(),
        }
    }

    #[inline]
    fn slot(&self, off: u32) -> Option<&AtomicU32> {
        let w = (off >> 6) as usize;
        let bit = off & 63;
        let word = *self.starts.get(w)?;
        if (word >> bit) & 1 == 0 {
            return None;
        }
        let below = (word & ((1u64 << bit) - 1)).count_ones();
        self.vals.get((self.rank[w] + below) as usize)
    }

    /// The BTF offset cached for `off`, or 0.
    #[inline]
    pub fn get(&self, off: u32) -> u32 {
        self.slot(off).map_or(0, |s| s.load(Ordering::Relaxed))
    }

    /// The BTF offset for `off`, computing and caching it with `intern` if
    /// it is not known yet; `None` (and `intern` not called) if `off` is
    /// not a string start and so has no slot. One slot look-up for the
    /// merge, the only writer.
    #[inline]
    pub fn get_or_insert_with(&self, off: u32, intern: impl FnOnce() -> u32) -> Option<u32> {
        let s = self.slot(off)?;
        Some(match s.load(Ordering::Relaxed) {
            0 => {
                let v = intern();
                s.store(v, Ordering::Relaxed);
                v
            }
            v => v,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::StrCache;

    #[test]
    fn only_string_starts_have_slots() {
        // "ab\0c\0\0d" : starts at 0, 3, 5, 6
        let sec = b"ab\0c\0\0d";
        let c = StrCache::new(sec);
        for off in [0, 3, 5, 6] {
            assert_eq!(c.get(off), 0);
            assert_eq!(c.get_or_insert_with(off, || off + 100), Some(off + 100));
        }
        assert_eq!([c.get(0), c.get(3), c.get(5), c.get(6)], [100, 103, 105, 106]);
        // a known value is returned without interning again
        assert_eq!(c.get_or_insert_with(3, || unreachable!()), Some(103));
        // the tail "b" of "ab" and offsets past the end are not cached
        assert_eq!(c.get_or_insert_with(1, || unreachable!()), None);
        assert_eq!(c.get(1), 0);
        assert_eq!(c.get(7), 0);
        assert_eq!(c.get(u32::MAX), 0);
        assert_eq!(StrCache::empty().get(0), 0);
    }

    #[test]
    fn ranks_cross_word_boundaries() {
        let mut sec = vec![b'x'; 200];
        for i in (9..200).step_by(10) {
            sec[i] = 0;
        }
        let c = StrCache::new(&sec);
        let starts: Vec<u32> = std::iter::once(0).chain((10..200).step_by(10)).collect();
        for (n, &s) in starts.iter().enumerate() {
            c.get_or_insert_with(s, || n as u32 + 1);
        }
        for (n, &s) in starts.iter().enumerate() {
            assert_eq!(c.get(s), n as u32 + 1, "offset {s}");
            assert_eq!(c.get(s + 1), 0);
        }
    }
}
