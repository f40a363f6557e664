//! The string section: NUL-terminated strings in first-use order, with a
//! hash index from content to offset so interning is O(1).
//!
//! A string table built from scratch starts with `\0` (standalone) or empty
//! (split). One parsed from bytes keeps those bytes verbatim — the reference
//! leaves unreferenced strings in its output and a round trip must keep them —
//! and builds its index only when something is interned or looked up.

use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use hashbrown::HashTable;

use super::Btf;

type Hasher = hashbrown::DefaultHashBuilder;

#[derive(Clone, Debug, Default)]
pub struct StrTab {
    /// First offset of this table in the combined (base + split) space.
    start: u32,
    buf: Vec<u8>,
    /// Content → offset (relative to `buf`) of the first string with it.
    index: OnceLock<HashTable<u32>>,
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
        let mut idx = HashTable::new();
        let h = t.hasher.hash_one(b"".as_slice());
        idx.insert_unique(h, 0u32, |_| h);
        t.index = OnceLock::from(idx);
        t
    }

    pub fn new_split(start: u32, base: Arc<Btf>) -> StrTab {
        StrTab {
            start,
            buf: Vec::new(),
            index: OnceLock::from(HashTable::new()),
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

    fn build_index(buf: &[u8], hasher: &Hasher) -> HashTable<u32> {
        let mut idx: HashTable<u32> = HashTable::with_capacity(buf.len() / 16);
        let mut rel = 0usize;
        while rel < buf.len() {
            let s = cstr_at(buf, rel);
            let h = hasher.hash_one(s);
            if idx.find(h, |&o| is_at(buf, o, s)).is_none() {
                idx.insert_unique(h, rel as u32, |&o| hasher.hash_one(cstr_at(buf, o as usize)));
            }
            rel += s.len() + 1;
        }
        idx
    }

    fn index(&self) -> &HashTable<u32> {
        self.index.get_or_init(|| Self::build_index(&self.buf, &self.hasher))
    }

    /// Absolute offset of the first string in *this* table equal to `s`.
    pub fn find_own(&self, s: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(s);
        self.index()
            .find(h, |&o| is_at(&self.buf, o, s))
            .map(|&o| o + self.start)
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
        if let Some(&o) = idx.find(h, |&o| is_at(buf, o, s)) {
            return o + self.start;
        }
        let rel = self.buf.len() as u32;
        self.buf.extend_from_slice(s);
        self.buf.push(0);
        let buf = &self.buf;
        let hasher = &self.hasher;
        idx.insert_unique(h, rel, |&o| hasher.hash_one(cstr_at(buf, o as usize)));
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
}
