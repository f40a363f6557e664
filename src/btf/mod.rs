//! The BTF model: types as flat host-order words, a string section, and the
//! ids/offsets that make split BTF continue a base.
//!
//! This module knows nothing about DWARF or ELF. Every type record is stored
//! exactly as the format lays it out (12-byte common part plus trailing data),
//! as `u32` words in host order, concatenated in one `Vec<u32>`; a second
//! column holds the word index where each type starts. That keeps 4 M types
//! in two allocations, makes the writer a byte-swap-and-copy, and lets every
//! phase (dedup, dump, diff) read records without decoding them into objects.

mod build;
pub mod cdump;
mod deferred;
pub mod distill;
pub mod dump;
pub mod kind;
mod layout;
pub mod lint;
pub mod read;
mod refs;
pub mod strtab;
pub mod write;

use std::sync::Arc;

use deferred::Deferred;

pub use kind::{Info, KIND_LIMIT, KIND_MAX, Kind, RawRecord, VLEN_LIMIT, make_info};
pub use layout::{Format, HDR_LEN_2026, KindLayout, Layout};
pub use refs::needed_by;
pub use strtab::StrTab;

/// A BTF type id. Id 0 is the implicit `void`.
///
/// The value is private, as in la-arena's `Idx`: an id is made from a raw
/// number only where one is read from a record or computed from a count,
/// and code that needs the number says so with [`TypeId::get`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct TypeId(u32);

impl TypeId {
    pub const VOID: TypeId = TypeId(0);

    /// The id whose number is `raw` (as stored in a record's words).
    #[inline(always)]
    pub const fn new(raw: u32) -> TypeId {
        TypeId(raw)
    }
    /// The id's number, as a record stores it.
    #[inline(always)]
    pub const fn get(self) -> u32 {
        self.0
    }
    /// The id as an index into a column with a slot per id.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// An offset into the (combined base + split) string space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct StrOff(u32);

impl StrOff {
    pub const EMPTY: StrOff = StrOff(0);

    #[inline(always)]
    pub const fn new(raw: u32) -> StrOff {
        StrOff(raw)
    }
    /// The offset as a record stores it.
    #[inline(always)]
    pub const fn get(self) -> u32 {
        self.0
    }
}

pub const BTF_MAGIC: u16 = 0xEB9F;
/// The shortest header (the original format's); see [`Format`].
pub const HDR_LEN: u32 = layout::HDR_LEN_ORIGINAL;
/// The kernel's `BPF_BTF_LOAD` size limit.
pub const KERNEL_MAX_BTF_SIZE: usize = 16 * 1024 * 1024;

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
        StrOff::new(self.words[0])
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
        TypeId::new(self.words[2])
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
        (TypeId::new(self.words[3]), TypeId::new(self.words[4]), self.words[5])
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
    /// Header length and layout section, kept from a read blob or chosen
    /// by the encoder; the records do not depend on it.
    format: Format,
}

/// Makes room for `extra` more elements. Past 1 MiB a vector grows by a
/// sixty-fourth instead of doubling: a vmlinux's pre-dedup BTF is large,
/// and doubling, or even an eighth, would reserve much of it again unused
/// at the encoder's memory peak (large blocks are moved by `mremap`, so the
/// extra steps copy nothing; a thirty-second still left megabytes unused at
/// the end of the CU loop, where dedup's first passes now keep their state).
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
            format: Format::default(),
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
            format: Format::default(),
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
            format: Format::default(),
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
    pub fn format(&self) -> &Format {
        &self.format
    }
    pub fn set_format(&mut self, f: Format) {
        self.format = f;
    }

    /// Own types of a kind this crate does not know (a newer format's,
    /// stepped over by the blob's layout section): their ids and kinds.
    pub fn unknown_kinds(&self) -> impl Iterator<Item = (TypeId, u32)> + '_ {
        self.own_ids().filter_map(|id| {
            let k = self.ty(id).words.kind();
            (k > KIND_MAX as u32).then_some((id, k))
        })
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
        StrOff::new(self.strs.intern(s))
    }

    /// Appends a record; returns its id.
    pub fn push_raw(&mut self, name: StrOff, info: u32, size_or_type: u32, trailing: &[u32]) -> TypeId {
        grow(&mut self.words, 3 + trailing.len());
        self.push_offset();
        self.words.extend_from_slice(&[name.0, info, size_or_type]);
        self.words.extend_from_slice(trailing);
        TypeId::new(self.type_count())
    }

    /// Appends a complete record of words (common part included).
    pub fn push_words(&mut self, w: &[u32]) -> TypeId {
        self.push_offset();
        extend_words(&mut self.words, w);
        TypeId::new(self.type_count())
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

    /// The size of the first INT of 4 or 8 bytes named some spelling of
    /// `long` (base types first), which is how libbpf and bpftool guess a
    /// BTF's pointer size.
    pub fn long_size(&self) -> Option<u32> {
        const LONGS: [&[u8]; 11] = [
            b"long",
            b"long int",
            b"int long",
            b"unsigned long",
            b"long unsigned",
            b"unsigned long int",
            b"unsigned int long",
            b"long unsigned int",
            b"long int unsigned",
            b"int unsigned long",
            b"int long unsigned",
        ];
        (1..=self.type_count())
            .map(|id| self.ty(TypeId::new(id)))
            .find_map(|t| {
                let long = t.kind() == Kind::Int
                    && (t.size() == 4 || t.size() == 8)
                    && self.str_at(t.name_off()).is_some_and(|n| LONGS.contains(&n));
                long.then(|| t.size())
            })
    }

    /// Byte length of the type section as written.
    pub fn type_section_len(&self) -> usize {
        self.words.len() * 4
    }
}
