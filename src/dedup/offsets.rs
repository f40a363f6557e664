//! Where each type id's record starts in dedup's word array.
//!
//! One `u32` per id would be 17 MiB for a vmlinux's 4.35 M pre-dedup types,
//! at dedup's memory peak. Records are laid out in id order, so a block of
//! 64 ids spans few words: a `u32` start per block and a `u16` step from it
//! per id hold the same in 8.8 MiB. An input where some block of 64 spans
//! 64 K words or more (structs with thousands of members) gets smaller
//! blocks, down to one id per block if it must; the look-up is the same two
//! loads and an add either way, with no branch.

use crate::btf::TypeId;

#[derive(Clone)]
pub(super) struct Offsets {
    block: Vec<u32>,
    step: Vec<u16>,
    /// log2 of the ids per block.
    bits: u32,
}

impl Offsets {
    const MAX_BITS: u32 = 6;

    /// From one offset per id (ascending by id, as records are laid out).
    pub(super) fn new(flat: Vec<u32>) -> Offsets {
        let fits = |bits: u32| {
            flat.chunks(1 << bits).all(|c| {
                let lo = c[0];
                c.iter().all(|&o| o >= lo && o - lo <= u16::MAX as u32)
            })
        };
        let bits = (0..=Self::MAX_BITS).rev().find(|&b| fits(b)).unwrap_or(0);
        let block = flat.chunks(1 << bits).map(|c| c[0]).collect::<Vec<_>>();
        let step = flat
            .iter()
            .enumerate()
            .map(|(i, &o)| o.wrapping_sub(block[i >> bits]) as u16)
            .collect();
        Offsets { block, step, bits }
    }

    /// An empty column that grows by [`Offsets::push`], in blocks of 64 ids.
    pub(super) fn growing() -> Offsets {
        Offsets {
            block: Vec::new(),
            step: Vec::new(),
            bits: Self::MAX_BITS,
        }
    }

    /// Appends the next id's offset (not below the previous one); `false`
    /// if it lies 64 K words or more past its block's first record, which
    /// this fixed layout cannot hold.
    pub(super) fn push(&mut self, off: u32) -> bool {
        let id = self.step.len();
        if id & ((1 << self.bits) - 1) == 0 {
            self.block.push(off);
        }
        match off.checked_sub(self.block[id >> self.bits]) {
            Some(d) if d <= u16::MAX as u32 => {
                self.step.push(d as u16);
                true
            }
            _ => false,
        }
    }

    /// From a block start per 64 ids and a step per id (see
    /// `layout_walk`, which fills them in parallel).
    pub(super) fn from_parts(block: Vec<u32>, step: Vec<u16>) -> Offsets {
        debug_assert_eq!(block.len(), step.len().div_ceil(1 << Self::MAX_BITS));
        Offsets {
            block,
            step,
            bits: Self::MAX_BITS,
        }
    }

    /// Room for `n` more ids without doubling (see [`super::incremental::reserve_step`]).
    pub(super) fn reserve(&mut self, n: usize) {
        super::incremental::reserve_step(&mut self.step, n);
        super::incremental::reserve_step(&mut self.block, n.div_ceil(1 << self.bits) + 1);
    }

    /// Moves `id`'s record down to `off`. Called for every id from some id
    /// to the last, in order ([`super::stub::stub_deferred`]): a block
    /// start moves with its first id, and a step only shrinks, since the
    /// records before it in its block shrank or stayed.
    pub(super) fn move_down(&mut self, id: TypeId, off: u32) {
        let id = id.get();
        let b = (id >> self.bits) as usize;
        if id & ((1 << self.bits) - 1) == 0 {
            self.block[b] = off;
        }
        self.step[id as usize] = (off - self.block[b]) as u16;
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.step.len()
    }

    /// Whether [`Offsets::push`] can append to this column (its blocks are
    /// 64 ids long).
    pub(super) fn growable(&self) -> bool {
        self.bits == Self::MAX_BITS
    }

    /// Keeps the first `n` ids.
    pub(super) fn truncate(&mut self, n: usize) {
        self.step.truncate(n);
        self.block.truncate(n.div_ceil(1 << self.bits));
    }

    #[inline(always)]
    pub(super) fn get(&self, id: TypeId) -> u32 {
        let id = id.get();
        let step = self.step[id as usize];
        // SAFETY: `block` has one entry per started block of 2^bits ids of
        // `step` (see `new`), and `id` indexes `step` (checked just above).
        let block = unsafe { *self.block.get_unchecked((id >> self.bits) as usize) };
        block + step as u32
    }

    /// [`Offsets::get`] for an id that may lie past the column (a hint's
    /// address, where a stray id must not panic).
    #[inline(always)]
    pub(super) fn try_get(&self, id: TypeId) -> Option<u32> {
        let id = id.get();
        let step = *self.step.get(id as usize)?;
        Some(self.block[(id >> self.bits) as usize] + step as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::Offsets;
    use crate::btf::TypeId;

    #[test]
    fn a_growing_column_reads_like_a_packed_one_and_refuses_long_steps() {
        let flat: Vec<u32> = (0..300u32).map(|i| i * 5).collect();
        let mut g = Offsets::growing();
        assert!(flat.iter().all(|&o| g.push(o)));
        assert_eq!(g.len(), 300);
        assert!((0..300u32).all(|i| g.get(TypeId::new(i)) == flat[i as usize]));
        // id 300 opens no block (300 % 64 != 0): 70 000 words past block 4's start
        assert!(!g.push(256 * 5 + 70_000));
    }

    #[test]
    fn blocks_shrink_until_every_step_fits() {
        // record starts: running sums of record lengths
        let small: Vec<u32> = (0..1000u32)
            .scan(0u32, |at, i| {
                let o = *at;
                *at += 3 + 3 * (i % 7);
                Some(o)
            })
            .collect();
        let o = Offsets::new(small.clone());
        assert_eq!(o.bits, 6);
        assert!((0..1000u32).all(|i| o.get(TypeId::new(i)) == small[i as usize]));

        // one record of 100 000 words (id 70): blocks of one id
        let mut big = small.clone();
        for x in &mut big[71..] {
            *x += 100_000;
        }
        let o = Offsets::new(big.clone());
        assert_eq!(o.bits, 0);
        assert!((0..1000u32).all(|i| o.get(TypeId::new(i)) == big[i as usize]));

        // a record of 65 400 words (id 70): its 64-id block does not fit,
        // smaller ones than a single id do
        let mut mid = small.clone();
        for x in &mut mid[71..] {
            *x += 65_400;
        }
        let o = Offsets::new(mid.clone());
        assert!(o.bits > 0 && o.bits < 6, "{}", o.bits);
        assert!((0..1000u32).all(|i| o.get(TypeId::new(i)) == mid[i as usize]));
    }
}
