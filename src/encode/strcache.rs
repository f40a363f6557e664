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
//!
//! That holds for a linked file, whose linker merged `.debug_str`. A
//! relocatable object's section (a kernel module's) is its inputs' sections
//! end to end, each string once per input that used it, so no offset comes
//! back from another unit and the cache would cost its scan and its slots
//! for nothing (docs/perf-notes.md, "A module's string cache that never
//! hit"). [`StrCache::for_section`] leaves such a section uncached, and the
//! merge interns its names by content alone.

use std::num::NonZeroU32;
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

    /// The cache for `section` ([`StrCache::new_passing`]), or `None` when
    /// [`repeats_strings`] finds its strings unmerged: a cache that no
    /// look-up would hit.
    pub fn for_section(section: &[u8], passed: &mut dyn FnMut()) -> Option<StrCache> {
        (!repeats_strings(section)).then(|| Self::new_passing(section, passed))
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

    /// The BTF offset cached for `off`, if the merge has interned it.
    #[inline]
    pub fn get(&self, off: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(self.slot(off)?.load(Ordering::Relaxed))
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

/// How much of `.debug_str` [`repeats_strings`] reads from each place.
const PROBE_WINDOW: usize = 64 << 10;
/// The places it reads from, spread over the section.
const PROBE_PLACES: usize = 8;

/// Whether a sample of `section` holds a non-empty string twice, which a
/// merged section never does (a merged string is one copy, a tail of a
/// longer one included). The sample is the strings starting in
/// [`PROBE_PLACES`] windows spread over the section, the whole of a small
/// one. An unmerged section repeats in any two inputs' stretches the names
/// nearly every unit uses (`int`, `char`, `long unsigned int`); one that
/// repeats none in the sample is cached as before. The answer only chooses
/// how names are interned, never which offsets they get.
pub fn repeats_strings(section: &[u8]) -> bool {
    let mut seen = hashbrown::HashSet::new();
    let mut next = 0;
    for place in 0..PROBE_PLACES {
        let mut at = (section.len() / PROBE_PLACES * place).max(next);
        if at > 0 && section.get(at - 1) != Some(&0) {
            // to the start of the next string
            match memchr::memchr(0, section.get(at..).unwrap_or_default()) {
                Some(n) => at += n + 1,
                None => break,
            }
        }
        let end = (at + PROBE_WINDOW).min(section.len());
        // `at < end` keeps `at` inside the section; the last string may
        // lack its NUL (a damaged section), and then ends the scan.
        while at < end {
            let rest = &section[at..];
            let s = memchr::memchr(0, rest).map_or(rest, |n| &rest[..n]);
            if !s.is_empty() && !seen.insert(s) {
                return true;
            }
            at += s.len() + 1;
        }
        next = at;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{PROBE_WINDOW, StrCache, repeats_strings};

    #[test]
    fn a_last_string_without_its_nul_ends_the_probe() {
        // every place past the first lands beyond a cut-short last string
        for len in 1..40 {
            let mut sec = vec![b'a'; len];
            sec[0] = 0;
            assert!(!repeats_strings(&sec), "len {len}");
            assert!(!repeats_strings(&sec[1..]), "len {len}, no NUL at all");
        }
        assert!(repeats_strings(b"int\0int"));
    }

    #[test]
    fn only_string_starts_have_slots() {
        // "ab\0c\0\0d" : starts at 0, 3, 5, 6
        let sec = b"ab\0c\0\0d";
        let c = StrCache::new(sec);
        for off in [0, 3, 5, 6] {
            assert_eq!(c.get(off), None);
            assert_eq!(c.get_or_insert_with(off, || off + 100), Some(off + 100));
        }
        assert_eq!(
            [c.get(0), c.get(3), c.get(5), c.get(6)].map(|v| v.map_or(0, |v| v.get())),
            [100, 103, 105, 106]
        );
        // a known value is returned without interning again
        assert_eq!(c.get_or_insert_with(3, || unreachable!()), Some(103));
        // the tail "b" of "ab" and offsets past the end are not cached
        assert_eq!(c.get_or_insert_with(1, || unreachable!()), None);
        assert_eq!(c.get(1), None);
        assert_eq!(c.get(7), None);
        assert_eq!(c.get(u32::MAX), None);
    }

    /// `n` distinct names, as one merged section holds them.
    fn names(n: usize, tag: &str) -> Vec<u8> {
        (0..n).flat_map(|i| format!("{tag}{i}\0").into_bytes()).collect()
    }

    #[test]
    fn a_merged_section_does_not_repeat_and_is_cached() {
        let mut sec = b"\0".to_vec();
        sec.extend(names(300_000, "name_"));
        assert!(sec.len() > 8 * PROBE_WINDOW);
        assert!(!repeats_strings(&sec));
        assert!(StrCache::for_section(&sec, &mut || {}).is_some());
        assert!(!repeats_strings(b""));
        assert!(!repeats_strings(b"\0\0\0ab\0b\0"));
    }

    #[test]
    fn inputs_end_to_end_repeat_and_are_not_cached() {
        // each input's own names, and the few every input uses
        let mut sec = Vec::new();
        for k in 0..40 {
            sec.extend(names(4000, &format!("in{k}_")));
            sec.extend_from_slice(b"int\0char\0long unsigned int\0");
        }
        assert!(sec.len() > 8 * PROBE_WINDOW);
        assert!(repeats_strings(&sec));
        assert!(StrCache::for_section(&sec, &mut || {}).is_none());
        // two small inputs
        assert!(repeats_strings(b"int\0a\0int\0b\0"));
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
            assert_eq!(c.get(s).map(|v| v.get()), Some(n as u32 + 1), "offset {s}");
            assert_eq!(c.get(s + 1), None);
        }
    }
}
