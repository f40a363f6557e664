//! The reference pass's canonical types, by their content as libbpf has
//! rewritten it (referenced ids resolved).
//!
//! libbpf looks a reference type up in its one candidate table and compares
//! it with each candidate's record, resolving the candidate's referenced ids
//! again: two reads at places unrelated to the type at hand (a canonical
//! type lives in whichever CU first had it), for every one of a vmlinux's
//! millions of reference types. Without a base, a reference type's lookup
//! has at most one equal candidate (a type becomes canonical only when none
//! is equal, and a canonical type's content never changes afterwards), so
//! the order of candidates does not matter, and no pass after this one
//! looks anything up. So the canonical types can be kept by content, in a
//! table of their own, with the content next to the entry: one lookup that
//! touches nothing else.

use crate::btf::TypeId;

/// Canonical reference types by rewritten content.
#[derive(Default)]
pub(super) struct RefIndex {
    table: hashbrown::HashTable<Entry>,
    /// Contents longer than [`INLINE`] words.
    words: Vec<u32>,
}

/// Words of content kept in the entry itself: PTR, CONST, VOLATILE,
/// RESTRICT, TYPEDEF, FUNC and TYPE_TAG, almost all reference types.
const INLINE: usize = 3;

/// A canonical type: its content inline, or where it is in `words`. Kept in
/// the table's own slots (20 bytes): a look-up reads the control bytes and
/// the slot and, for most types, nothing else (with the entries and the
/// content in arrays of their own, two more cache misses per look-up).
#[derive(Clone, Copy)]
struct Entry {
    id: TypeId,
    len: u32,
    /// The content if `len <= INLINE`, else its start in `words` at `[0]`.
    w: [u32; INLINE],
}

/// An entry's content.
#[inline]
fn content<'e>(words: &'e [u32], e: &'e Entry) -> &'e [u32] {
    let len = e.len as usize;
    if len <= INLINE {
        &e.w[..len]
    } else {
        &words[e.w[0] as usize..e.w[0] as usize + len]
    }
}

impl RefIndex {
    /// The canonical type whose rewritten record is `key`, or `id` (which
    /// has it) after recording it as that type.
    #[inline]
    pub(super) fn canonical(&mut self, key: &[u32], id: TypeId) -> TypeId {
        let h = super::content_hash(key);
        let RefIndex { table, words } = self;
        // word by word: most keys are three words, and `==` on slices calls
        // memcmp
        let found = table.find(h, |e| {
            e.len as usize == key.len() && content(words, e).iter().zip(key).all(|(a, b)| a == b)
        });
        if let Some(e) = found {
            return e.id;
        }
        let mut e = Entry {
            id,
            len: key.len() as u32,
            w: [0; INLINE],
        };
        if key.len() <= INLINE {
            e.w[..key.len()].copy_from_slice(key);
        } else {
            e.w[0] = words.len() as u32;
            words.extend_from_slice(key);
        }
        table.insert_unique(h, e, |e| super::content_hash(content(words, e)));
        id
    }
}

thread_local! {
    static FORCED_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread's dedups go through the candidate table instead
/// (tests and fuzzing compare the two: [`super::dedup_through_table`]).
pub(super) fn force_off(off: bool) {
    FORCED_OFF.with(|c| c.set(off));
}

pub(super) fn forced_off() -> bool {
    FORCED_OFF.with(|c| c.get())
}

#[cfg(test)]
mod tests {
    use super::RefIndex;
    use crate::btf::TypeId;

    #[test]
    fn equal_content_finds_the_first_type_that_had_it() {
        let mut ix = RefIndex::default();
        assert_eq!(ix.canonical(&[0, 2 << 24, 7], TypeId::new(10)), TypeId::new(10));
        assert_eq!(ix.canonical(&[0, 2 << 24, 8], TypeId::new(11)), TypeId::new(11));
        assert_eq!(ix.canonical(&[0, 2 << 24, 7], TypeId::new(12)), TypeId::new(10));
        // a prefix or an extension is other content
        assert_eq!(ix.canonical(&[0, 2 << 24], TypeId::new(13)), TypeId::new(13));
        assert_eq!(ix.canonical(&[0, 2 << 24, 7, 0], TypeId::new(14)), TypeId::new(14));
        assert_eq!(ix.canonical(&[0, 2 << 24, 7, 0], TypeId::new(15)), TypeId::new(14));
        for n in 0..10_000u32 {
            assert_eq!(ix.canonical(&[n, 1, n * 3], TypeId::new(100 + n)), TypeId::new(100 + n));
        }
        assert!((0..10_000u32).all(|n| ix.canonical(&[n, 1, n * 3], TypeId::new(1)) == TypeId::new(100 + n)));
        assert_eq!(ix.canonical(&[0, 2 << 24, 8], TypeId::new(16)), TypeId::new(11));
    }
}
