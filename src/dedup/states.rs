//! libbpf's map markers per type id (unprocessed, in progress, mapped) in two
//! bits each: 1 MiB for a vmlinux's 4.35 M ids instead of a byte each, at
//! dedup's memory peak.
//!
//! The words are atomics so that the two halves of a split reference pass
//! ([`super::refpass`]) can share them; read and written through `&mut`
//! or with relaxed loads and stores, they are plain memory accesses.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::btf::TypeId;

/// libbpf's `map[id]` is UNPROCESSED, IN_PROGRESS or an id. We keep the id in
/// `link` (see `PassState::link`) and which of the three it is in two bits
/// ([`States`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum State {
    Unprocessed = 0,
    InProgress = 1,
    Mapped = 2,
}

impl State {
    /// The state of two bits as [`States`] stores them (3 never is).
    #[inline(always)]
    fn of_bits(b: u64) -> State {
        match b {
            0 => State::Unprocessed,
            1 => State::InProgress,
            _ => State::Mapped,
        }
    }
    #[inline(always)]
    fn bits(self) -> u64 {
        self as u64
    }
}

#[derive(Default)]
pub(super) struct States {
    words: Vec<AtomicU64>,
}

impl States {
    /// From one state per id.
    pub(super) fn pack(states: &[State]) -> States {
        States {
            words: states
                .chunks(32)
                .map(|c| c.iter().enumerate().fold(0u64, |w, (i, &s)| w | (s.bits() << (2 * i))))
                .map(AtomicU64::new)
                .collect(),
        }
    }

    /// Ids below `n`, unprocessed but void, which represents itself.
    pub(super) fn with_void(n: u32) -> States {
        let mut s = States::default();
        s.grow_to(n.max(1) as usize);
        s.set(TypeId::VOID, State::Mapped);
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
    pub(super) fn get(&self, id: TypeId) -> State {
        get_in(&self.words, id)
    }

    #[inline]
    pub(super) fn set(&mut self, id: TypeId, s: State) {
        let id = id.get();
        let w = self.words[(id >> 5) as usize].get_mut();
        let sh = 2 * (id & 31);
        *w = (*w & !(3 << sh)) | (s.bits() << sh);
    }

    /// The words of ids below `n` all mapped (void and a base's types),
    /// for [`States::from_words`].
    pub(super) fn mapped_words(n: u32) -> Vec<u64> {
        // Mapped in every two-bit field
        let all = u64::MAX / 3 * State::Mapped.bits();
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
pub(super) fn get_in(words: &[AtomicU64], id: TypeId) -> State {
    of_word(words[(id.get() >> 5) as usize].load(Relaxed), id)
}

/// `id`'s state in a [`States::snapshot`].
#[inline]
pub(super) fn get_in_snapshot(words: &[u64], id: TypeId) -> State {
    of_word(words[(id.get() >> 5) as usize], id)
}

#[inline]
fn of_word(w: u64, id: TypeId) -> State {
    State::of_bits((w >> (2 * (id.get() & 31))) & 3)
}

/// Sets `id`'s state in words shared by threads. A plain load and store
/// unless `id`'s word is `shared_word`, which another thread writes too
/// (its ids' bits are then changed by atomic and/or, and nobody else's
/// change is lost).
#[inline]
pub(super) fn set_in(words: &[AtomicU64], id: TypeId, s: State, shared_word: usize) {
    let id = id.get();
    let i = (id >> 5) as usize;
    let sh = 2 * (id & 31);
    let w = &words[i];
    if i == shared_word {
        w.fetch_and(!(3 << sh), Relaxed);
        w.fetch_or(s.bits() << sh, Relaxed);
    } else {
        let v = w.load(Relaxed);
        w.store((v & !(3 << sh)) | (s.bits() << sh), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{State, States};
    use crate::btf::TypeId;

    #[test]
    fn two_bits_per_id_round_trip() {
        let all = [State::Unprocessed, State::InProgress, State::Mapped];
        let states: Vec<State> = (0..1000usize).map(|i| all[i * 7 % 3]).collect();
        let mut s = States::pack(&states);
        let id = TypeId::new;
        assert!((0..1000u32).all(|i| s.get(id(i)) == states[i as usize]));
        s.set(id(33), State::Mapped);
        s.set(id(34), State::InProgress);
        s.set(id(999), State::Unprocessed);
        assert_eq!(
            (s.get(id(32)), s.get(id(33)), s.get(id(34)), s.get(id(35))),
            (states[32], State::Mapped, State::InProgress, states[35])
        );
        assert_eq!(s.get(id(999)), State::Unprocessed);
    }
}
