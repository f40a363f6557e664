//! The BTF model: types as flat host-order words, a string section, and the
//! ids/offsets that make split BTF continue a base.
//!
//! This module knows nothing about DWARF or ELF. Every type record is stored
//! exactly as the format lays it out (12-byte common part plus trailing data),
//! as `u32` words in host order, concatenated in one `Vec<u32>`; a second
//! column holds the word index where each type starts. That keeps 4 M types
//! in two allocations, makes the writer a byte-swap-and-copy, and lets every
//! phase (dedup, dump, diff) read records without decoding them into objects.

pub mod cdump;
pub mod distill;
pub mod dump;
pub mod kind;
pub mod lint;
pub mod read;
pub mod strtab;
pub mod write;

use std::sync::Arc;

pub use kind::{Info, KIND_MAX, Kind, RawRecord, make_info};
pub use strtab::StrTab;

/// A BTF type id. Id 0 is the implicit `void`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TypeId(pub u32);

impl TypeId {
    pub const VOID: TypeId = TypeId(0);
}

/// An offset into the (combined base + split) string space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StrOff(pub u32);

impl StrOff {
    pub const EMPTY: StrOff = StrOff(0);
}

pub const BTF_MAGIC: u16 = 0xEB9F;
pub const HDR_LEN: u32 = 24;
/// The kernel's `BPF_BTF_LOAD` size limit.
pub const KERNEL_MAX_BTF_SIZE: usize = 16 * 1024 * 1024;

/// Deferred types between two marks of [`Btf::build_offsets`]'s parallel walk.
const DEFER_MARK_TYPES: u32 = 1 << 16;

/// Byte order of a BTF blob (and of the ELF it came from or goes into).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn native() -> Endian {
        if cfg!(target_endian = "little") {
            Endian::Little
        } else {
            Endian::Big
        }
    }
    pub fn is_native(self) -> bool {
        self == Endian::native()
    }
}

pub const INT_SIGNED: u32 = 1;
pub const INT_CHAR: u32 = 2;
pub const INT_BOOL: u32 = 4;

pub const LINKAGE_STATIC: u32 = 0;
pub const LINKAGE_GLOBAL: u32 = 1;
pub const LINKAGE_EXTERN: u32 = 2;

/// A borrowed view of one type record (host-order words).
#[derive(Clone, Copy, Debug)]
pub struct Type<'a> {
    pub words: &'a [u32],
}

impl<'a> Type<'a> {
    #[inline]
    pub fn name_off(&self) -> StrOff {
        StrOff(self.words[0])
    }
    #[inline]
    pub fn info(&self) -> u32 {
        self.words[1]
    }
    #[inline]
    pub fn kind(&self) -> Kind {
        // The reader validated the kind; builders only push valid ones.
        Kind::from_u8(self.words.kind() as u8).unwrap_or(Kind::Unkn)
    }
    #[inline]
    pub fn vlen(&self) -> u32 {
        self.words.vlen() as u32
    }
    #[inline]
    pub fn kflag(&self) -> bool {
        self.words.kflag()
    }
    /// The size/type word, as a size.
    #[inline]
    pub fn size(&self) -> u32 {
        self.words[2]
    }
    /// The size/type word, as a type id.
    #[inline]
    pub fn type_id(&self) -> TypeId {
        TypeId(self.words[2])
    }
    #[inline]
    pub fn trailing(&self) -> &'a [u32] {
        &self.words[3..]
    }
    /// INT: the int_data word.
    pub fn int_encoding(&self) -> u32 {
        (self.words[3] >> 24) & 0x0f
    }
    pub fn int_offset(&self) -> u32 {
        (self.words[3] >> 16) & 0xff
    }
    pub fn int_bits(&self) -> u32 {
        self.words[3] & 0xff
    }
    /// ARRAY: (elem type, index type, nelems).
    pub fn array(&self) -> (TypeId, TypeId, u32) {
        (TypeId(self.words[3]), TypeId(self.words[4]), self.words[5])
    }
    /// STRUCT/UNION members, DATASEC entries and ENUM64 values: triples.
    pub fn triples(&self) -> impl ExactSizeIterator<Item = [u32; 3]> + 'a {
        self.words[3..].chunks_exact(3).map(|c| [c[0], c[1], c[2]])
    }
    /// ENUM values and FUNC_PROTO params: pairs.
    pub fn pairs(&self) -> impl ExactSizeIterator<Item = [u32; 2]> + 'a {
        self.words[3..].chunks_exact(2).map(|c| [c[0], c[1]])
    }
    /// VAR linkage, DECL_TAG component_idx (as u32).
    pub fn extra(&self) -> u32 {
        self.words[3]
    }
}

/// A BTF blob: its own types and strings, optionally continuing a base.
#[derive(Clone, Debug)]
pub struct Btf {
    /// Type records, host-order words.
    words: Vec<u32>,
    /// Word index of the start of each own type; `offs[i]` is type `start_id + i`.
    offs: Vec<u32>,
    /// Types appended while offsets are deferred (see [`Btf::defer_offsets`]).
    deferred: Option<Deferred>,
    /// The own string section (split: without the base's strings).
    strs: StrTab,
    endian: Endian,
    base: Option<Arc<Btf>>,
}

/// Makes room for `extra` more elements. Past 1 MiB a vector grows by a
/// sixty-fourth instead of doubling: a vmlinux's pre-dedup BTF is 168 MB,
/// and doubling would reserve up to twice that, an eighth up to 21 MB more
/// at the encoder's memory peak (large blocks are moved by `mremap`, so the
/// extra steps copy nothing; a thirty-second left up to 5 MB unused at the
/// end of the CU loop, where dedup's first passes now keep their state).
#[inline]
fn grow(v: &mut Vec<u32>, extra: usize) {
    let len = v.len();
    if len + extra <= v.capacity() {
        return;
    }
    let step = if len < (1 << 18) {
        len.max(extra).max(16)
    } else {
        (len / 64).max(extra)
    };
    v.reserve_exact(step);
}

/// Appends `w` to the records, growing them by [`grow`]'s step, never by
/// `Vec`'s doubling.
#[inline]
fn extend_words(words: &mut Vec<u32>, w: &[u32]) {
    grow(words, w.len());
    words.extend_from_slice(w);
}

/// Types appended while offsets are deferred: they follow `offs`.
#[derive(Clone, Debug)]
struct Deferred {
    /// How many, and the word where the first starts.
    count: u32,
    from: usize,
    /// Where deferred type `FINE_STEP * j` starts: a look-up walks at most
    /// `FINE_STEP - 1` records from there (the function phase looks types
    /// up without the offset column; 1 MiB for a vmlinux instead of 17).
    fine: Vec<u32>,
    /// Words taken out by [`Btf::cut_deferred`].
    cut_words: u64,
    /// Where the last deferred type starts (for adding entries to it).
    last: usize,
}

/// Deferred types per [`Deferred::fine`] entry.
const FINE_STEP: u32 = 16;

impl Deferred {
    /// `n` types appended, the first starting at word `at`, each at
    /// `at + rel(i)`: notes the starts that fall on a `FINE_STEP`.
    #[inline]
    fn note(&mut self, n: u32, at: usize, rel: impl Fn(usize) -> usize) {
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
    fn stretches(&self) -> Vec<(u32, usize)> {
        (DEFER_MARK_TYPES..self.count)
            .step_by(DEFER_MARK_TYPES as usize)
            .map(|n| (n, self.fine[(n / FINE_STEP) as usize] as usize))
            .collect()
    }

    /// Where deferred type `i` (counted from the first deferred one) starts.
    fn start_of(&self, words: &[u32], i: u32) -> usize {
        let mut w = self.fine[(i / FINE_STEP) as usize] as usize;
        for _ in 0..i % FINE_STEP {
            w += record_len(words[w + 1]);
        }
        w
    }
}

/// The number of words of a record whose info word is `info` (its kind is
/// one this crate wrote: the records were appended through the API).
#[inline]
fn record_len(info: u32) -> usize {
    debug_assert!(
        Info(info).kind() <= KIND_MAX as u32,
        "appended records have known kinds"
    );
    Info(info).len()
}

impl Btf {
    /// A new standalone BTF whose string section is the single empty string.
    pub fn new(endian: Endian) -> Btf {
        Btf {
            words: Vec::new(),
            offs: Vec::new(),
            deferred: None,
            strs: StrTab::new_base(),
            endian,
            base: None,
        }
    }

    /// A new split BTF continuing `base` (ids from `base.type_count()+1`).
    pub fn new_split(base: Arc<Btf>) -> Btf {
        let start = base.strs_end();
        let endian = base.endian;
        Btf {
            words: Vec::new(),
            offs: Vec::new(),
            deferred: None,
            strs: StrTab::new_split(start, base.clone()),
            endian,
            base: Some(base),
        }
    }

    pub(crate) fn from_parts(
        words: Vec<u32>,
        offs: Vec<u32>,
        strs: StrTab,
        endian: Endian,
        base: Option<Arc<Btf>>,
    ) -> Btf {
        Btf {
            words,
            offs,
            deferred: None,
            strs,
            endian,
            base,
        }
    }

    /// Drops unused capacity (the encoder's vectors grow in steps).
    pub fn shrink_to_fit(&mut self) {
        self.words.shrink_to_fit();
        self.offs.shrink_to_fit();
    }

    /// The parts [`Btf::from_parts`] takes, for a phase that consumes the BTF.
    pub(crate) fn into_parts(self) -> (Vec<u32>, Vec<u32>, StrTab, Endian, Option<Arc<Btf>>) {
        self.expect_offsets();
        (self.words, self.offs, self.strs, self.endian, self.base)
    }

    /// The records, strings, byte order and base of a BTF whose offsets
    /// are deferred, for a consumer that laid the records out itself.
    pub(crate) fn into_parts_deferred(self) -> (Vec<u32>, StrTab, Endian, Option<Arc<Btf>>) {
        let (words, _, strs, endian, base) = self.into_parts_with_marks();
        (words, strs, endian, base)
    }

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
    /// between two marks, in parallel (a vmlinux's 4.35 M types took 46 ms
    /// on one thread, between the CU loop and dedup where nothing else runs).
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

    #[inline]
    fn expect_offsets(&self) {
        assert!(
            self.deferred.is_none(),
            "type offsets are deferred: call Btf::build_offsets first"
        );
    }

    pub fn with_capacity(endian: Endian, types: usize, words: usize) -> Btf {
        let mut b = Btf::new(endian);
        b.offs.reserve(types);
        b.words.reserve(words);
        b
    }

    pub fn reserve(&mut self, types: usize, words: usize) {
        self.offs.reserve(types);
        self.words.reserve(words);
    }

    pub fn endian(&self) -> Endian {
        self.endian
    }
    pub fn set_endian(&mut self, e: Endian) {
        self.endian = e;
    }
    pub fn base(&self) -> Option<&Arc<Btf>> {
        self.base.as_ref()
    }

    /// First id of this BTF's own types (1 for standalone BTF).
    pub fn start_id(&self) -> u32 {
        match &self.base {
            Some(b) => b.type_count() + 1,
            None => 1,
        }
    }
    /// Number of ids in use including the base, i.e. the largest valid id.
    pub fn type_count(&self) -> u32 {
        self.start_id() - 1 + self.own_type_count()
    }
    /// Number of this BTF's own types.
    pub fn own_type_count(&self) -> u32 {
        self.offs.len() as u32 + self.deferred.as_ref().map_or(0, |d| d.count)
    }
    /// First string offset of the own string section.
    pub fn start_str_off(&self) -> u32 {
        self.strs.start()
    }
    /// One past the last string offset (base + own).
    pub fn strs_end(&self) -> u32 {
        self.strs.start() + self.strs.len() as u32
    }
    pub fn strtab(&self) -> &StrTab {
        &self.strs
    }
    pub fn strtab_mut(&mut self) -> &mut StrTab {
        &mut self.strs
    }
    pub fn raw_strings(&self) -> &[u8] {
        self.strs.bytes()
    }
    pub fn raw_words(&self) -> &[u32] {
        &self.words
    }
    pub fn type_offsets(&self) -> &[u32] {
        self.expect_offsets();
        &self.offs
    }

    /// Type `id`, looked up in the base when it belongs there. Panics on an
    /// id out of range: callers hold ids they got from this BTF.
    #[inline]
    pub fn ty(&self, id: TypeId) -> Type<'_> {
        self.get(id).expect("type id out of range")
    }

    pub fn get(&self, id: TypeId) -> Option<Type<'_>> {
        let start = self.start_id();
        if id.0 < start {
            return match &self.base {
                Some(b) if id.0 > 0 => b.get(id),
                _ => None,
            };
        }
        let i = (id.0 - start) as usize;
        if let Some(d) = &self.deferred
            && i >= self.offs.len()
        {
            let j = (i - self.offs.len()) as u32;
            if j >= d.count {
                return None;
            }
            let s = d.start_of(&self.words, j);
            let e = s + record_len(self.words[s + 1]);
            return Some(Type {
                words: &self.words[s..e],
            });
        }
        let s = *self.offs.get(i)? as usize;
        let e = match self.offs.get(i + 1) {
            Some(&e) => e as usize,
            // the last type before the deferred ones ends where they start
            None => self.deferred.as_ref().map_or(self.words.len(), |d| d.from),
        };
        Some(Type {
            words: &self.words[s..e],
        })
    }

    /// The string at `off` (in the combined space), without its NUL.
    pub fn str_at(&self, off: StrOff) -> Option<&[u8]> {
        if off.0 < self.strs.start() {
            return self.base.as_ref()?.str_at(off);
        }
        self.strs.get(off.0)
    }

    /// The string at `off` as text for display (lossy UTF-8).
    pub fn name(&self, off: StrOff) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.str_at(off).unwrap_or(b""))
    }

    pub fn add_str(&mut self, s: &[u8]) -> StrOff {
        if s.is_empty() {
            return StrOff::EMPTY;
        }
        StrOff(self.strs.intern(s))
    }

    /// Appends a record; returns its id.
    pub fn push_raw(&mut self, name: StrOff, info: u32, size_or_type: u32, trailing: &[u32]) -> TypeId {
        grow(&mut self.words, 3 + trailing.len());
        self.push_offset();
        self.words.extend_from_slice(&[name.0, info, size_or_type]);
        self.words.extend_from_slice(trailing);
        TypeId(self.type_count())
    }

    /// Appends a complete record of words (common part included).
    pub fn push_words(&mut self, w: &[u32]) -> TypeId {
        self.push_offset();
        extend_words(&mut self.words, w);
        TypeId(self.type_count())
    }

    /// Records that a type starts at the end of the words.
    #[inline]
    fn push_offset(&mut self) {
        if let Some(d) = &mut self.deferred {
            d.note(1, self.words.len(), |_| 0);
        } else {
            grow(&mut self.offs, 1);
            self.offs.push(self.words.len() as u32);
        }
    }

    /// Appends complete records in bulk: `words` holds them back to back and
    /// `offs` their start indices within `words`. Returns the word index at
    /// which they were placed (for fixing them up with `words_from_mut`).
    pub fn append_records(&mut self, words: &[u32], offs: &[u32]) -> usize {
        grow(&mut self.words, words.len());
        let base = self.words.len();
        if let Some(d) = &mut self.deferred {
            d.note(offs.len() as u32, base, |i| offs[i] as usize);
        } else {
            grow(&mut self.offs, offs.len());
            self.offs.extend(offs.iter().map(|&o| o + base as u32));
        }
        self.words.extend_from_slice(words);
        base
    }

    /// Own type words from word index `from` to the end.
    pub fn words_from_mut(&mut self, from: usize) -> &mut [u32] {
        &mut self.words[from..]
    }

    /// Mutable words of the last type (used by builders adding members).
    pub fn last_words_mut(&mut self) -> &mut Vec<u32> {
        &mut self.words
    }

    /// Mutable words of own type `id` (for id rewriting passes).
    pub fn words_mut(&mut self, id: TypeId) -> &mut [u32] {
        self.expect_offsets();
        let i = (id.0 - self.start_id()) as usize;
        let s = self.offs[i] as usize;
        let e = self.offs.get(i + 1).map(|&e| e as usize).unwrap_or(self.words.len());
        &mut self.words[s..e]
    }

    /// Iterates over own type ids.
    pub fn own_ids(&self) -> impl Iterator<Item = TypeId> + use<> {
        let s = self.start_id();
        (s..s + self.own_type_count()).map(TypeId)
    }

    // ---- libbpf-compatible builder API ----

    pub fn add_int(&mut self, name: &[u8], size: u32, encoding: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(
            n,
            make_info(Kind::Int, false, 0),
            size,
            &[(encoding << 24) | (size * 8)],
        )
    }
    pub fn add_float(&mut self, name: &[u8], size: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Float, false, 0), size, &[])
    }
    /// PTR, CONST, VOLATILE, RESTRICT: anonymous references.
    pub fn add_ref(&mut self, kind: Kind, to: TypeId) -> TypeId {
        self.push_raw(StrOff::EMPTY, make_info(kind, false, 0), to.0, &[])
    }
    pub fn add_typedef(&mut self, name: &[u8], to: TypeId) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Typedef, false, 0), to.0, &[])
    }
    pub fn add_type_tag(&mut self, value: &[u8], to: TypeId, attr: bool) -> TypeId {
        let n = self.add_str(value);
        self.push_raw(n, make_info(Kind::TypeTag, attr, 0), to.0, &[])
    }
    pub fn add_decl_tag(&mut self, value: &[u8], to: TypeId, component_idx: i32, attr: bool) -> TypeId {
        let n = self.add_str(value);
        self.push_raw(n, make_info(Kind::DeclTag, attr, 0), to.0, &[component_idx as u32])
    }
    pub fn add_array(&mut self, elem: TypeId, index: TypeId, nelems: u32) -> TypeId {
        self.push_raw(
            StrOff::EMPTY,
            make_info(Kind::Array, false, 0),
            0,
            &[elem.0, index.0, nelems],
        )
    }
    /// FWD of a struct (`union == false`) or a union.
    pub fn add_fwd(&mut self, name: &[u8], union: bool) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Fwd, union, 0), 0, &[])
    }
    pub fn add_func(&mut self, name: &[u8], proto: TypeId, linkage: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Func, false, linkage), proto.0, &[])
    }
    pub fn add_var(&mut self, name: &[u8], ty: TypeId, linkage: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Var, false, 0), ty.0, &[linkage])
    }

    /// Starts a STRUCT/UNION/ENUM/ENUM64/FUNC_PROTO/DATASEC with vlen 0; add
    /// its entries with the `push_*` methods below, which bump vlen.
    pub fn begin(&mut self, kind: Kind, name: &[u8], size_or_type: u32, kflag: bool) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(kind, kflag, 0), size_or_type, &[])
    }

    fn bump_vlen(&mut self) -> usize {
        let s = self.last_type_start();
        let info = &mut self.words[s + 1];
        *info = (*info & !0xffff) | (((*info & 0xffff) + 1) & 0xffff);
        s
    }

    /// Number of entries of the last type (untruncated by the 16-bit field is
    /// not tracked: callers check the 65535 limit themselves).
    pub fn last_vlen(&self) -> u32 {
        let s = self.last_type_start();
        self.words[s + 1] & 0xffff
    }

    fn last_type_start(&self) -> usize {
        match &self.deferred {
            Some(d) if d.count > 0 => d.last,
            _ => *self.offs.last().expect("no open type") as usize,
        }
    }

    /// STRUCT/UNION member, libbpf style: offset word is `bit_off | size<<24`,
    /// kind_flag set once any member is a bitfield.
    pub fn push_member(&mut self, name: &[u8], ty: TypeId, bit_off: u32, bitfield_size: u32) {
        let n = self.add_str(name);
        let s = self.bump_vlen();
        if bitfield_size != 0 || !bit_off.is_multiple_of(8) {
            self.words[s + 1] |= 1 << 31;
        }
        extend_words(&mut self.words, &[n.0, ty.0, bit_off | (bitfield_size << 24)]);
    }
    /// ENUM value (low 32 bits; kind_flag set when negative).
    pub fn push_enum_value(&mut self, name: &[u8], val: i64) {
        let n = self.add_str(name);
        let s = self.bump_vlen();
        if val < 0 {
            self.words[s + 1] |= 1 << 31;
        }
        extend_words(&mut self.words, &[n.0, val as u32]);
    }
    pub fn push_enum64_value(&mut self, name: &[u8], val: u64) {
        let n = self.add_str(name);
        self.bump_vlen();
        extend_words(&mut self.words, &[n.0, val as u32, (val >> 32) as u32]);
    }
    pub fn push_param(&mut self, name: &[u8], ty: TypeId) {
        let n = self.add_str(name);
        self.bump_vlen();
        extend_words(&mut self.words, &[n.0, ty.0]);
    }
    pub fn push_var_secinfo(&mut self, var: TypeId, offset: u32, size: u32) {
        self.bump_vlen();
        extend_words(&mut self.words, &[var.0, offset, size]);
    }

    /// Drops own types from id `keep_count+start` on (used to roll back a CU).
    pub fn truncate_types(&mut self, own_count: usize) {
        self.expect_offsets();
        if own_count < self.offs.len() {
            let w = self.offs[own_count] as usize;
            self.offs.truncate(own_count);
            self.words.truncate(w);
        }
    }

    /// Replaces the type section wholesale (dedup's compaction output).
    pub fn replace_types(&mut self, words: Vec<u32>, offs: Vec<u32>) {
        self.words = words;
        self.offs = offs;
        self.deferred = None;
    }

    /// Byte length of the type section as written.
    pub fn type_section_len(&self) -> usize {
        self.words.len() * 4
    }

    /// Calls `f` with the word index of every type-id field of a record
    /// whose info word is `info`, in record order: the one list both
    /// reference visitors walk (it reads no words, so a visitor may write them).
    #[inline]
    pub fn type_ref_positions(info: u32, mut f: impl FnMut(usize)) {
        use kind::*;
        let info = Info(info);
        let vlen = info.vlen();
        match info.kind() {
            PTR | TYPEDEF | VOLATILE | CONST | RESTRICT | FUNC | VAR | DECL_TAG | TYPE_TAG => f(2),
            ARRAY => {
                f(3);
                f(4);
            }
            STRUCT | UNION => (0..vlen).for_each(|i| f(3 + 3 * i + 1)),
            FUNC_PROTO => {
                f(2);
                (0..vlen).for_each(|i| f(3 + 2 * i + 1));
            }
            DATASEC => (0..vlen).for_each(|i| f(3 + 3 * i)),
            _ => {}
        }
    }

    /// Word indices of every string-offset field of a record whose info word
    /// is `info`, in record order (type name first, then entry names).
    #[inline]
    pub fn str_ref_positions(info: u32, mut f: impl FnMut(usize)) {
        use kind::*;
        let info = Info(info);
        let vlen = info.vlen();
        f(0);
        match info.kind() {
            STRUCT | UNION | ENUM64 => (0..vlen).for_each(|i| f(3 + 3 * i)),
            ENUM | FUNC_PROTO => (0..vlen).for_each(|i| f(3 + 2 * i)),
            _ => {}
        }
    }

    /// Calls `f` with every type-id field of the record, in record order.
    #[inline]
    pub fn for_each_type_ref(words: &[u32], mut f: impl FnMut(u32)) {
        Btf::type_ref_positions(words[1], |p| f(words[p]));
    }

    /// Calls `f` with every string-offset field of the record, in record order.
    #[inline]
    pub fn for_each_str_ref(words: &[u32], mut f: impl FnMut(u32)) {
        Btf::str_ref_positions(words[1], |p| f(words[p]));
    }

    /// Calls `f` on every type-id field of the record (mutable), in record order.
    #[inline]
    pub fn for_each_type_ref_mut(words: &mut [u32], mut f: impl FnMut(&mut u32)) {
        Btf::type_ref_positions(words[1], |p| f(&mut words[p]));
    }

    /// Calls `f` on every string-offset field of the record (mutable), in
    /// record order (type name first, then entry names).
    #[inline]
    pub fn for_each_str_ref_mut(words: &mut [u32], mut f: impl FnMut(&mut u32)) {
        Btf::str_ref_positions(words[1], |p| f(&mut words[p]));
    }
}

/// The types `roots` refer to, directly or through others, with `roots`
/// themselves, in id order (void left out).
pub fn needed_by(btf: &Btf, roots: &[TypeId]) -> Vec<TypeId> {
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<TypeId> = roots.to_vec();
    while let Some(id) = stack.pop() {
        if id.0 == 0 || !seen.insert(id) {
            continue;
        }
        if let Some(t) = btf.get(id) {
            Btf::for_each_type_ref(t.words, |r| stack.push(TypeId(r)));
        }
    }
    seen.into_iter().collect()
}

#[cfg(test)]
mod append_tests {
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
        assert_eq!(deferred.ty(TypeId(4)).vlen(), 2);
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
                deferred.get(TypeId(id)).map(|t| t.words) == plain.get(TypeId(id)).map(|t| t.words),
                "type {id}"
            );
        }
        assert!(deferred.get(TypeId(n + 1)).is_none());
        deferred.build_offsets();
        assert_eq!(deferred.type_offsets(), plain.type_offsets());
    }

    #[test]
    fn cut_records_move_the_later_ones_down() {
        let mut b = build(true);
        let before: Vec<Vec<u32>> = (1..=5).map(|id| b.ty(TypeId(id)).words.to_vec()).collect();
        let start = b.raw_words().len() - before[3].len() - before[4].len();
        let mut placed = Vec::new();
        // type 4, the struct, cut to its common part with vlen 0
        b.cut_deferred(
            TypeId(4),
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
        assert_eq!(b.ty(TypeId(4)).words, &[0, make_info(Kind::Struct, true, 0), 8]);
        assert_eq!(b.ty(TypeId(5)).words, &before[4][..]);
        assert_eq!(b.ty(TypeId(3)).words, &before[2][..]);
        b.build_offsets();
        assert_eq!(b.ty(TypeId(5)).words, &before[4][..]);
    }

    #[test]
    #[should_panic(expected = "deferred")]
    fn the_offset_column_while_deferred_panics() {
        let b = build(true);
        assert_eq!(b.ty(TypeId(4)).vlen(), 2, "look-ups work while deferred");
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
        assert_eq!(b.ty(TypeId(2)).kind(), Kind::Ptr);
        assert_eq!(b.ty(TypeId(3)).type_id(), TypeId(1));
    }
}
