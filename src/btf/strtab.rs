//! The string section: NUL-terminated strings in first-use order, with a
//! hash index from content to offset so interning is O(1).
//!
//! A string table built from scratch starts with `\0` (standalone) or empty
//! (split). One parsed from bytes keeps those bytes verbatim — the reference
//! leaves unreferenced strings in its output and a round trip must keep them —
//! and builds its index only when something is interned or looked up.

use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use super::Btf;

type Hasher = hashbrown::DefaultHashBuilder;

/// Content → offset of the first string with it: open addressing with linear
/// probing, each slot the string's offset beside the low half of its hash.
/// A probe touches one cache line, and the string's bytes only when the
/// halves agree. Looking a module's names up in the vmlinux table (megabytes,
/// out of cache) waited on two lines per probe with hashbrown's control
/// bytes kept apart from its slots (docs/perf-notes.md, "Measured reasons").
#[derive(Clone, Debug, Default)]
struct Index {
    /// `tag << 32 | offset`, or [`Index::EMPTY`]; a power of two long, at
    /// most half full.
    slots: Vec<u64>,
    len: usize,
}

impl Index {
    /// No string starts at offset `u32::MAX`: a table is shorter than 4 GiB.
    const EMPTY: u64 = u64::MAX;

    fn with_capacity(n: usize) -> Index {
        Index {
            slots: vec![Self::EMPTY; (2 * n).next_power_of_two().max(16)],
            len: 0,
        }
    }

    /// The probe sequence starts where the tag says, so growing needs no
    /// strings rehashed.
    fn tag(hash: u64) -> u32 {
        hash as u32
    }

    fn find(&self, hash: u64, is: impl Fn(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let tag = Self::tag(hash);
        let mut i = tag as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == Self::EMPTY {
                return None;
            }
            if (slot >> 32) as u32 == tag && is(slot as u32) {
                return Some(slot as u32);
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks the cache for the line where a look-up of `hash` starts.
    #[inline]
    fn prefetch(&self, hash: u64) {
        if self.slots.is_empty() {
            return;
        }
        let slot = &self.slots[Self::tag(hash) as usize & (self.slots.len() - 1)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is only a hint, and SSE is part of x86-64;
        // the address is a valid slot besides.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>((slot as *const u64).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// Adds `off` for a string not yet in the index.
    fn insert_unique(&mut self, hash: u64, off: u32) {
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        Self::place(&mut self.slots, u64::from(Self::tag(hash)) << 32 | u64::from(off));
        self.len += 1;
    }

    fn place(slots: &mut [u64], slot: u64) {
        let mask = slots.len() - 1;
        let mut i = (slot >> 32) as usize & mask;
        while slots[i] != Self::EMPTY {
            i = (i + 1) & mask;
        }
        slots[i] = slot;
    }

    fn grow(&mut self) {
        let mut slots = vec![Self::EMPTY; (2 * self.slots.len()).max(16)];
        for &s in self.slots.iter().filter(|&&s| s != Self::EMPTY) {
            Self::place(&mut slots, s);
        }
        self.slots = slots;
    }
}

#[derive(Clone, Debug, Default)]
pub struct StrTab {
    /// First offset of this table in the combined (base + split) space.
    start: u32,
    buf: Vec<u8>,
    /// Content → offset (relative to `buf`) of the first string with it.
    index: OnceLock<Index>,
    hasher: Hasher,
    /// The base whose strings take precedence (split BTF only).
    base: Option<Arc<Btf>>,
}

fn cstr_at(buf: &[u8], rel: usize) -> &[u8] {
    let s = &buf[rel..];
    let n = memchr0(s);
    &s[..n]
}

/// Whether the string at `rel` is `s`: a compare of `s.len()` bytes and the
/// NUL after them, without scanning for the NUL first (lookups of a module's
/// names in the vmlinux table spent most of their time in that scan).
#[inline]
fn is_at(buf: &[u8], rel: u32, s: &[u8]) -> bool {
    let r = rel as usize;
    buf.get(r..r + s.len()) == Some(s) && buf.get(r + s.len()) == Some(&0)
}

#[inline]
fn memchr0(s: &[u8]) -> usize {
    s.iter().position(|&b| b == 0).unwrap_or(s.len())
}

impl StrTab {
    pub fn new_base() -> StrTab {
        let mut t = StrTab {
            start: 0,
            buf: vec![0],
            ..Default::default()
        };
        let mut idx = Index::default();
        idx.insert_unique(t.hasher.hash_one(b"".as_slice()), 0);
        t.index = OnceLock::from(idx);
        t
    }

    pub fn new_split(start: u32, base: Arc<Btf>) -> StrTab {
        StrTab {
            start,
            buf: Vec::new(),
            index: OnceLock::from(Index::default()),
            base: Some(base),
            ..Default::default()
        }
    }

    /// A table over bytes read from a file; `start` is the base's string length
    /// for split BTF, 0 otherwise.
    pub fn from_bytes(start: u32, buf: Vec<u8>, base: Option<Arc<Btf>>) -> StrTab {
        StrTab {
            start,
            buf,
            base,
            ..Default::default()
        }
    }

    pub fn start(&self) -> u32 {
        self.start
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The string starting at absolute offset `off` of this table.
    pub fn get(&self, off: u32) -> Option<&[u8]> {
        let rel = off.checked_sub(self.start)? as usize;
        if rel >= self.buf.len() {
            return None;
        }
        Some(cstr_at(&self.buf, rel))
    }

    fn build_index(buf: &[u8], hasher: &Hasher) -> Index {
        let mut idx = Index::with_capacity(buf.len() / 16);
        let mut rel = 0usize;
        while rel < buf.len() {
            let s = cstr_at(buf, rel);
            let h = hasher.hash_one(s);
            if idx.find(h, |o| is_at(buf, o, s)).is_none() {
                idx.insert_unique(h, rel as u32);
            }
            rel += s.len() + 1;
        }
        idx
    }

    fn index(&self) -> &Index {
        self.index.get_or_init(|| Self::build_index(&self.buf, &self.hasher))
    }

    /// Absolute offset of the first string in *this* table equal to `s`.
    pub fn find_own(&self, s: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(s);
        self.index().find(h, |o| is_at(&self.buf, o, s)).map(|o| o + self.start)
    }

    /// Starts loading what [`StrTab::intern`] of `s` will read first, in the
    /// base (split only) and in this table, so that the cache misses of many
    /// look-ups overlap instead of each waiting for its own.
    #[inline]
    pub fn prefetch(&self, s: &[u8]) {
        if let Some(b) = &self.base
            && let Some(idx) = b.strtab().index.get()
        {
            idx.prefetch(b.strtab().hasher.hash_one(s));
        }
        if let Some(idx) = self.index.get() {
            idx.prefetch(self.hasher.hash_one(s));
        }
    }

    /// Offset of `s` in the base (split only) or in this table, if present.
    pub fn find(&self, s: &[u8]) -> Option<u32> {
        if let Some(b) = &self.base
            && let Some(o) = b.strtab().find(s)
        {
            return Some(o);
        }
        self.find_own(s)
    }

    /// libbpf's `btf__add_str`: base first (split), then own table, else append.
    pub fn intern(&mut self, s: &[u8]) -> u32 {
        if let Some(b) = &self.base
            && let Some(o) = b.strtab().find(s)
        {
            return o;
        }
        let h = self.hasher.hash_one(s);
        self.index();
        let idx = self.index.get_mut().expect("index built above");
        let buf = &self.buf;
        if let Some(o) = idx.find(h, |o| is_at(buf, o, s)) {
            return o + self.start;
        }
        let rel = self.buf.len() as u32;
        self.buf.extend_from_slice(s);
        self.buf.push(0);
        idx.insert_unique(h, rel);
        rel + self.start
    }

    /// Appends a string without looking it up (for rebuilding tables).
    pub fn append_unchecked(&mut self, s: &[u8]) -> u32 {
        let rel = self.buf.len() as u32;
        self.buf.extend_from_slice(s);
        self.buf.push(0);
        self.index = OnceLock::new();
        rel + self.start
    }

    pub fn base(&self) -> Option<&Arc<Btf>> {
        self.base.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Endian;

    #[test]
    fn interns_in_first_use_order() {
        let mut t = StrTab::new_base();
        assert_eq!(t.intern(b"int"), 1);
        assert_eq!(t.intern(b"char"), 5);
        assert_eq!(t.intern(b"int"), 1);
        assert_eq!(t.bytes(), b"\0int\0char\0");
    }

    #[test]
    fn parsed_table_keeps_duplicates_and_finds_first() {
        let t = StrTab::from_bytes(0, b"\0a\0b\0a\0".to_vec(), None);
        assert_eq!(t.find_own(b"a"), Some(1));
        assert_eq!(t.get(5), Some(&b"a"[..]));
    }

    #[test]
    fn split_prefers_base_strings() {
        let mut base = Btf::new(Endian::Little);
        base.add_str(b"int");
        let base = Arc::new(base);
        let mut split = StrTab::new_split(base.strs_end(), base.clone());
        assert_eq!(split.intern(b"int"), 1);
        assert_eq!(split.intern(b"long"), 5);
        assert_eq!(split.bytes(), b"long\0");
        // suffixes of base strings are not base strings
        assert_eq!(split.intern(b"nt"), 10);
    }

    /// Growing the index many times over, from one slot per string to
    /// half, keeps every string findable at its first offset, and a table
    /// read back with every string twice finds the first copies.
    #[test]
    fn index_grows_and_finds_first_copies() {
        let mut t = StrTab::new_base();
        let names: Vec<Vec<u8>> = (0..50_000).map(|i| format!("s{i}").into_bytes()).collect();
        let offs: Vec<u32> = names.iter().map(|n| t.intern(n)).collect();
        for (n, &o) in names.iter().zip(&offs) {
            assert_eq!(t.find_own(n), Some(o));
            t.prefetch(n);
            assert_eq!(t.intern(n), o);
        }
        assert_eq!(t.find_own(b"s50000"), None);

        let mut twice = t.bytes().to_vec();
        twice.extend_from_slice(&t.bytes()[1..]);
        let parsed = StrTab::from_bytes(0, twice, None);
        for (n, &o) in names.iter().zip(&offs) {
            assert_eq!(parsed.find_own(n), Some(o));
        }
    }
}
