//! libbpf's map markers per type id (unprocessed, in progress, mapped) in two
//! bits each: 1 MiB for a vmlinux's 4.35 M ids instead of a byte each, at
//! dedup's memory peak.
//!
//! The words are atomics so that the two halves of a split reference pass
//! ([`super::refpass`]) can share them; read and written through `&mut`
//! or with relaxed loads and stores, they are plain memory accesses.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// libbpf's `map[id]` is UNPROCESSED, IN_PROGRESS or an id. We keep the id in
/// `link` (see `PassState::link`) and which of the three it is in two bits
/// ([`States`]).
pub(super) const ST_UNPROCESSED: u8 = 0;
pub(super) const ST_IN_PROGRESS: u8 = 1;
pub(super) const ST_MAPPED: u8 = 2;

#[derive(Default)]
pub(super) struct States {
    words: Vec<AtomicU64>,
}

impl States {
    /// From one state (below 4) per id.
    pub(super) fn pack(bytes: &[u8]) -> States {
        States {
            words: bytes
                .chunks(32)
                .map(|c| {
                    c.iter()
                        .enumerate()
                        .fold(0u64, |w, (i, &s)| w | (u64::from(s & 3) << (2 * i)))
                })
                .map(AtomicU64::new)
                .collect(),
        }
    }

    /// Ids below `n`, unprocessed but void, which represents itself.
    pub(super) fn with_void(n: u32) -> States {
        let mut s = States::default();
        s.grow_to(n.max(1) as usize);
        s.set(0, ST_MAPPED);
        s
    }

    /// Room for ids below `n`; new ids are unprocessed (0).
    pub(super) fn grow_to(&mut self, n: usize) {
        let words = n.div_ceil(32);
        let more = words.saturating_sub(self.words.len());
        super::incremental::reserve_step(&mut self.words, more);
        self.words.resize_with(words, || AtomicU64::new(0));
    }

    #[inline]
    pub(super) fn get(&self, id: u32) -> u8 {
        get_in(&self.words, id)
    }

    #[inline]
    pub(super) fn set(&mut self, id: u32, s: u8) {
        let w = self.words[(id >> 5) as usize].get_mut();
        let sh = 2 * (id & 31);
        *w = (*w & !(3 << sh)) | (u64::from(s & 3) << sh);
    }

    /// The words of ids below `n` all mapped (void and a base's types),
    /// for [`States::from_words`].
    pub(super) fn mapped_words(n: u32) -> Vec<u64> {
        // ST_MAPPED in every two-bit field
        let all = u64::MAX / 3 * u64::from(ST_MAPPED);
        let mut w = vec![all; n.div_ceil(32) as usize];
        if let Some(last) = w.last_mut().filter(|_| !n.is_multiple_of(32)) {
            *last &= (1u64 << (2 * (n % 32))) - 1;
        }
        w
    }

    /// States from words as [`States::mapped_words`] gives them, the other
    /// ids unprocessed.
    pub(super) fn from_words(words: &[u64]) -> States {
        States {
            words: words.iter().map(|&w| AtomicU64::new(w)).collect(),
        }
    }

    /// A copy of the words, for [`States::restore`].
    pub(super) fn snapshot(&self) -> Vec<u64> {
        self.words.iter().map(|w| w.load(Relaxed)).collect()
    }

    /// Every state as it was in `snapshot`.
    pub(super) fn restore(&mut self, snapshot: &[u64]) {
        for (w, &s) in self.words.iter_mut().zip(snapshot) {
            *w.get_mut() = s;
        }
    }

    /// The words, to be shared by threads that each write their own ids.
    pub(super) fn shared(&mut self) -> &[AtomicU64] {
        &self.words
    }
}

/// `id`'s state in words shared by threads.
#[inline]
pub(super) fn get_in(words: &[AtomicU64], id: u32) -> u8 {
    of_word(words[(id >> 5) as usize].load(Relaxed), id)
}

/// `id`'s state in a [`States::snapshot`].
#[inline]
pub(super) fn get_in_snapshot(words: &[u64], id: u32) -> u8 {
    of_word(words[(id >> 5) as usize], id)
}

#[inline]
fn of_word(w: u64, id: u32) -> u8 {
    ((w >> (2 * (id & 31))) & 3) as u8
}

/// Sets `id`'s state in words shared by threads. A plain load and store
/// unless `id`'s word is `shared_word`, which another thread writes too
/// (its ids' bits are then changed by atomic and/or, and nobody else's
/// change is lost).
#[inline]
pub(super) fn set_in(words: &[AtomicU64], id: u32, s: u8, shared_word: usize) {
    let i = (id >> 5) as usize;
    let sh = 2 * (id & 31);
    let w = &words[i];
    if i == shared_word {
        w.fetch_and(!(3 << sh), Relaxed);
        w.fetch_or(u64::from(s & 3) << sh, Relaxed);
    } else {
        let v = w.load(Relaxed);
        w.store((v & !(3 << sh)) | (u64::from(s & 3) << sh), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::States;

    #[test]
    fn two_bits_per_id_round_trip() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 3) as u8).collect();
        let mut s = States::pack(&bytes);
        assert!((0..1000u32).all(|i| s.get(i) == bytes[i as usize]));
        s.set(33, 2);
        s.set(34, 1);
        s.set(999, 0);
        assert_eq!(
            (s.get(32), s.get(33), s.get(34), s.get(35)),
            (bytes[32], 2, 1, bytes[35])
        );
        assert_eq!(s.get(999), 0);
    }
}
