//! Deferred offsets: while the encoder's merge appends whole records, where
//! each type starts is noted only every [`FINE_STEP`] types
//! ([`Btf::defer_offsets`]), and the offset column is built at the end by
//! walking the records in parallel stretches ([`Btf::build_offsets`]).

use super::*;

/// Deferred types between two marks of [`Btf::build_offsets`]'s parallel walk.
const DEFER_MARK_TYPES: u32 = 1 << 16;

/// Types appended while offsets are deferred: they follow `offs`.
#[derive(Clone, Debug)]
pub(super) struct Deferred {
    /// How many, and the word where the first starts.
    pub(super) count: u32,
    pub(super) from: usize,
    /// Where deferred type `FINE_STEP * j` starts: a look-up walks at most
    /// `FINE_STEP - 1` records from there (the function phase looks types
    /// up without the offset column; 1 MiB for a vmlinux instead of 17).
    pub(super) fine: Vec<u32>,
    /// Words taken out by [`Btf::cut_deferred`].
    pub(super) cut_words: u64,
    /// Where the last deferred type starts (for adding entries to it).
    pub(super) last: usize,
}

/// Deferred types per [`Deferred::fine`] entry.
const FINE_STEP: u32 = 16;

impl Deferred {
    /// `n` types appended, the first starting at word `at`, each at
    /// `at + rel(i)`: notes the starts that fall on a `FINE_STEP`.
    #[inline]
    pub(super) fn note(&mut self, n: u32, at: usize, rel: impl Fn(usize) -> usize) {
        let mut i = self.count.next_multiple_of(FINE_STEP) - self.count;
        while i < n {
            self.fine.push((at + rel(i as usize)) as u32);
            i += FINE_STEP;
        }
        if n > 0 {
            self.last = at + rel(n as usize - 1);
        }
        self.count += n;
    }

    /// Where every [`DEFER_MARK_TYPES`]th deferred type after the first
    /// starts, as (deferred types before, word index): the places
    /// [`Btf::build_offsets`] splits its walk at to run it in parallel.
    pub(super) fn stretches(&self) -> Vec<(u32, usize)> {
        (DEFER_MARK_TYPES..self.count)
            .step_by(DEFER_MARK_TYPES as usize)
            .map(|n| (n, self.fine[(n / FINE_STEP) as usize] as usize))
            .collect()
    }

    /// Where deferred type `i` (counted from the first deferred one) starts.
    #[inline]
    pub(super) fn start_of(&self, words: &[u32], i: u32) -> usize {
        let mut w = self.fine[(i / FINE_STEP) as usize] as usize;
        for _ in 0..i % FINE_STEP {
            w += record_len(words[w + 1]);
        }
        w
    }
}

impl Btf {
    /// [`Btf::into_parts_deferred`], with where stretches of records start
    /// as (id, word index), about every 65,536 types after the first: the
    /// places a walk can be split at.
    #[allow(clippy::type_complexity)] // the model's parts, handed over once
    pub(crate) fn into_parts_with_marks(self) -> (Vec<u32>, Vec<(u32, usize)>, StrTab, Endian, Option<Arc<Btf>>) {
        assert!(self.offs.is_empty(), "only the deferred types are handed over");
        let start = self.start_id();
        let marks = self
            .deferred
            .as_ref()
            .map(|d| d.stretches().into_iter().map(|(n, at)| (start + n, at)).collect())
            .unwrap_or_default();
        (self.words, marks, self.strs, self.endian, self.base)
    }

    /// Cuts records of the deferred types from id `first` on, which start
    /// at word `at` and run to the end, down to a prefix: `cut(id, record)`
    /// may rewrite the record in place and returns how many of its first
    /// words stay (its whole length to keep it), and a record cut short
    /// must have an info word that gives its new length. The records kept
    /// move down over the freed words; `placed(id, word)` learns where each
    /// one starts now. For a consumer that knows which records nothing will
    /// read whole again (dedup's chunked passes), at the encoder's memory
    /// peak.
    pub(crate) fn cut_deferred(
        &mut self,
        first: TypeId,
        at: usize,
        mut cut: impl FnMut(u32, &mut [u32]) -> usize,
        mut placed: impl FnMut(u32, usize),
    ) {
        let first_deferred = self.start_id() + self.offs.len() as u32;
        let d = self.deferred.as_mut().expect("only deferred records are cut");
        assert!(
            first.0 >= first_deferred && first.0 - first_deferred <= d.count,
            "type {} is not deferred",
            first.0
        );
        let (mut src, mut dst) = (at, at);
        // records kept whole since the last cut: `run..src`, moved in one copy
        let mut run = src;
        let mut last = d.last;
        let flush = |words: &mut Vec<u32>, run: usize, src: usize, dst: &mut usize| {
            if run != *dst {
                words.copy_within(run..src, *dst);
            }
            *dst += src - run;
        };
        for j in first.0 - first_deferred..d.count {
            let id = first_deferred + j;
            let len = record_len(self.words[src + 1]);
            let now = dst + (src - run);
            last = now;
            if j % FINE_STEP == 0 {
                d.fine[(j / FINE_STEP) as usize] = now as u32;
            }
            placed(id, now);
            let keep = cut(id, &mut self.words[src..src + len]);
            if keep < len {
                assert_eq!(
                    record_len(self.words[src + 1]),
                    keep,
                    "a cut record's info word gives its length"
                );
                flush(&mut self.words, run, src, &mut dst);
                self.words.copy_within(src..src + keep, dst);
                dst += keep;
                run = src + len;
            }
            src += len;
        }
        flush(&mut self.words, run, src, &mut dst);
        assert_eq!(src, self.words.len(), "the cut records run to the end");
        d.last = last;
        d.cut_words += (src - dst) as u64;
        self.words.truncate(dst);
    }

    /// Words [`Btf::cut_deferred`] took out: the type section as built
    /// is this much longer than the records kept.
    pub fn cut_words(&self) -> u64 {
        self.deferred.as_ref().map_or(0, |d| d.cut_words)
    }

    /// Whether offsets are deferred (see [`Btf::defer_offsets`]).
    pub fn offsets_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// Stops recording where each appended type starts until
    /// [`Btf::build_offsets`]. The encoder's merge only appends whole
    /// records, and a vmlinux's 4.35 M offsets (17 MiB) would otherwise sit
    /// through the CU loop, at the encoder's memory peak, unread. Looking a
    /// type up in between walks at most 15 records from a start noted every
    /// 16 types; anything that needs the column itself panics.
    pub fn defer_offsets(&mut self) {
        if self.deferred.is_none() {
            self.deferred = Some(Deferred {
                count: 0,
                from: self.words.len(),
                fine: Vec::new(),
                cut_words: 0,
                last: 0,
            });
        }
    }

    /// Records the offsets of the types appended since
    /// [`Btf::defer_offsets`], by walking their records: one walk per stretch
    /// between two marks, in parallel (on one thread a vmlinux's walk was
    /// a pause between the CU loop and dedup, where nothing else runs).
    pub fn build_offsets(&mut self) {
        use rayon::prelude::*;
        let Some(d) = self.deferred.take() else {
            return;
        };
        let (count, from, mut marks) = (d.count, d.from, d.stretches());
        let n = count as usize;
        self.offs.reserve_exact(n);
        marks.insert(0, (0, from));
        marks.push((count, self.words.len()));
        // each stretch's part of the offset column, then its records
        let mut outs = Vec::with_capacity(marks.len() - 1);
        let mut rest = &mut self.offs.spare_capacity_mut()[..n];
        for m in marks.windows(2) {
            let (out, tail) = std::mem::take(&mut rest).split_at_mut((m[1].0 - m[0].0) as usize);
            outs.push((out, m[0].1, m[1].1));
            rest = tail;
        }
        let words = &self.words;
        outs.into_par_iter().for_each(|(out, from, to)| {
            let mut w = from;
            for o in out.iter_mut() {
                o.write(w as u32);
                w += record_len(words[w + 1]);
            }
            assert_eq!(w, to, "appended records end where the next stretch starts");
        });
        // SAFETY: the stretches cover the `n` slots after the length (their
        // lengths add up to `count`), and each walk wrote every slot of its own.
        unsafe { self.offs.set_len(self.offs.len() + n) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same types appended with offsets recorded and with them deferred.
    fn build(defer: bool) -> Btf {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, INT_SIGNED);
        if defer {
            b.defer_offsets();
        }
        let words = [
            0,
            make_info(Kind::Ptr, false, 0),
            1,
            0,
            make_info(Kind::Array, false, 0),
            0,
            1,
            1,
            4,
        ];
        b.append_records(&words, &[0, 3]);
        // struct { int; int :3; } (names left empty)
        b.push_words(&[
            0,
            make_info(Kind::Struct, true, 2),
            8,
            0,
            int.0,
            0,
            0,
            int.0,
            32 | (3 << 24),
        ]);
        b.push_words(&[0, make_info(Kind::Const, false, 0), 2]);
        assert_eq!(b.type_count(), 5);
        b
    }

    #[test]
    fn deferred_offsets_are_rebuilt_from_the_records() {
        let plain = build(false);
        let mut deferred = build(true);
        assert_eq!(deferred.own_type_count(), 5);
        deferred.build_offsets();
        assert_eq!(deferred.type_offsets(), plain.type_offsets());
        assert_eq!(deferred.raw_words(), plain.raw_words());
        assert_eq!(deferred.ty(TypeId::new(4)).vlen(), 2);
        // building again is a no-op
        deferred.build_offsets();
        assert_eq!(deferred.type_offsets(), plain.type_offsets());
    }

    /// Enough types for several stretches of the parallel rebuild, appended
    /// one by one and in bulk, records of varying length.
    #[test]
    fn deferred_offsets_over_many_stretches() {
        let fill = |b: &mut Btf| {
            for i in 0..3 * DEFER_MARK_TYPES + 123 {
                match i % 3 {
                    0 => {
                        b.push_words(&[0, make_info(Kind::Ptr, false, 0), 1]);
                    }
                    1 => {
                        let n = i % 5;
                        let mut w = vec![0, make_info(Kind::Struct, false, n), 4];
                        w.extend(std::iter::repeat_n([0, 1, 0], n as usize).flatten());
                        b.push_words(&w);
                    }
                    _ => {
                        let words = [
                            0,
                            make_info(Kind::Const, false, 0),
                            1,
                            0,
                            make_info(Kind::Volatile, false, 0),
                            1,
                        ];
                        b.append_records(&words, &[0, 3]);
                    }
                }
            }
        };
        let mut plain = Btf::new(Endian::Little);
        plain.add_int(b"int", 4, INT_SIGNED);
        fill(&mut plain);
        let mut deferred = Btf::new(Endian::Little);
        deferred.add_int(b"int", 4, INT_SIGNED);
        deferred.defer_offsets();
        fill(&mut deferred);
        let marks = deferred.deferred.as_ref().map_or(0, |d| d.stretches().len());
        assert!(marks >= 3, "{marks}");
        // look-ups while deferred: from a start noted every 16 types, also
        // inside bulk appends, and past the types appended before deferring
        let n = plain.type_count();
        assert_eq!(deferred.type_count(), n);
        for id in 1..=n {
            assert!(
                deferred.get(TypeId::new(id)).map(|t| t.words) == plain.get(TypeId::new(id)).map(|t| t.words),
                "type {id}"
            );
        }
        assert!(deferred.get(TypeId::new(n + 1)).is_none());
        deferred.build_offsets();
        assert_eq!(deferred.type_offsets(), plain.type_offsets());
    }

    #[test]
    fn cut_records_move_the_later_ones_down() {
        let mut b = build(true);
        let before: Vec<Vec<u32>> = (1..=5).map(|id| b.ty(TypeId::new(id)).words.to_vec()).collect();
        let start = b.raw_words().len() - before[3].len() - before[4].len();
        let mut placed = Vec::new();
        // type 4, the struct, cut to its common part with vlen 0
        b.cut_deferred(
            TypeId::new(4),
            start,
            |id, rec| {
                if id == 4 {
                    rec[1] &= !0xffff;
                    3
                } else {
                    rec.len()
                }
            },
            |id, w| placed.push((id, w)),
        );
        assert_eq!(placed, [(4, start), (5, start + 3)]);
        assert_eq!(b.cut_words(), 6);
        assert_eq!(b.ty(TypeId::new(4)).words, &[0, make_info(Kind::Struct, true, 0), 8]);
        assert_eq!(b.ty(TypeId::new(5)).words, &before[4][..]);
        assert_eq!(b.ty(TypeId::new(3)).words, &before[2][..]);
        b.build_offsets();
        assert_eq!(b.ty(TypeId::new(5)).words, &before[4][..]);
    }

    #[test]
    #[should_panic(expected = "deferred")]
    fn the_offset_column_while_deferred_panics() {
        let b = build(true);
        assert_eq!(b.ty(TypeId::new(4)).vlen(), 2, "look-ups work while deferred");
        b.type_offsets();
    }

    #[test]
    fn bulk_append_keeps_record_boundaries() {
        let mut b = Btf::new(Endian::Little);
        b.add_int(b"int", 4, INT_SIGNED);
        let words = [
            0,
            make_info(Kind::Ptr, false, 0),
            1,
            0,
            make_info(Kind::Const, false, 0),
            2,
        ];
        let at = b.append_records(&words, &[0, 3]);
        b.words_from_mut(at)[5] = 1;
        assert_eq!(b.type_count(), 3);
        assert_eq!(b.ty(TypeId::new(2)).kind(), Kind::Ptr);
        assert_eq!(b.ty(TypeId::new(3)).type_id(), TypeId::new(1));
    }
}
