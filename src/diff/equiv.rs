//! Structural equivalence of the types of two BTFs, independent of ids,
//! record order and string layout.
//!
//! Both type graphs (each with its base, if split) are numbered into one node
//! space and partitioned by partition refinement: nodes start in classes by
//! their id-free local record (kind, name text, sizes, offsets, member and
//! value names, with type references blanked out), and each round splits a
//! class whose members reference different classes. The fixpoint is the
//! coarsest partition that is stable under "same local record and same
//! classes referenced in the same positions", i.e. the largest bisimulation,
//! so two types land in one class exactly when they unfold to the same
//! (possibly infinite, through pointer cycles) type tree. Keys are interned
//! exactly (no hash-only comparison), so the result has no false positives.

use std::hash::BuildHasher;

use hashbrown::{HashMap, HashTable};

use crate::btf::{Btf, Kind, TypeId};

type Hasher = hashbrown::DefaultHashBuilder;

/// Exact interner of `u32` slices: equal slices get equal dense ids.
struct SliceInterner {
    table: HashTable<u32>,
    starts: Vec<u32>,
    arena: Vec<u32>,
    hasher: Hasher,
}

impl SliceInterner {
    fn with_capacity(keys: usize, words: usize) -> SliceInterner {
        let mut starts = Vec::with_capacity(keys + 1);
        starts.push(0);
        SliceInterner {
            table: HashTable::with_capacity(keys),
            starts,
            arena: Vec::with_capacity(words),
            hasher: Hasher::default(),
        }
    }

    fn len(&self) -> u32 {
        (self.starts.len() - 1) as u32
    }

    fn intern(&mut self, key: &[u32]) -> u32 {
        let SliceInterner {
            table,
            starts,
            arena,
            hasher,
        } = self;
        let slice = |c: u32, starts: &[u32]| -> std::ops::Range<usize> {
            starts[c as usize] as usize..starts[c as usize + 1] as usize
        };
        let h = hasher.hash_one(key);
        if let Some(&c) = table.find(h, |&c| &arena[slice(c, starts)] == key) {
            return c;
        }
        let c = (starts.len() - 1) as u32;
        arena.extend_from_slice(key);
        starts.push(arena.len() as u32);
        table.insert_unique(h, c, |&c| hasher.hash_one(&arena[slice(c, starts)]));
        c
    }
}

/// Equivalence classes of every type of A (ids `0..=a.type_count()`, base
/// included) and of B, in one class space.
pub struct Classes {
    /// Final class per node; A's nodes first, then B's.
    class: Vec<u32>,
    /// Class of the local record alone (the first partition): "same shape".
    local: Vec<u32>,
    a_nodes: u32,
    /// Refinement rounds until the partition was stable.
    pub rounds: u32,
    /// Number of distinct classes.
    pub count: u32,
}

impl Classes {
    #[inline]
    pub fn a(&self, id: TypeId) -> u32 {
        self.class[id.get() as usize]
    }
    #[inline]
    pub fn b(&self, id: TypeId) -> u32 {
        self.class[(self.a_nodes + id.get()) as usize]
    }
    #[inline]
    pub fn local_a(&self, id: TypeId) -> u32 {
        self.local[id.get() as usize]
    }
    #[inline]
    pub fn local_b(&self, id: TypeId) -> u32 {
        self.local[(self.a_nodes + id.get()) as usize]
    }
}

/// The marker record of `void` (id 0); no real record has kind 31.
const VOID_KEY: [u32; 1] = [u32::MAX];

/// Computes the classes of all types of `a` and `b`.
pub fn compute(a: &Btf, b: &Btf) -> Classes {
    let a_nodes = a.type_count() + 1;
    let n = a_nodes as usize + b.type_count() as usize + 1;
    let words = a.raw_words().len() + b.raw_words().len();
    let mut strs: HashMap<&[u8], u32> = HashMap::with_capacity(n);
    strs.insert(b"", 0);
    let mut refs_start: Vec<u32> = Vec::with_capacity(n + 1);
    let mut refs: Vec<u32> = Vec::with_capacity(words / 3);
    let mut local_sigs = SliceInterner::with_capacity(n, words);
    let mut local = Vec::with_capacity(n);
    let mut scratch: Vec<u32> = Vec::with_capacity(64);
    for (btf, off) in [(a, 0u32), (b, a_nodes)] {
        refs_start.push(refs.len() as u32);
        local.push(local_sigs.intern(&VOID_KEY));
        for id in 1..=btf.type_count() {
            refs_start.push(refs.len() as u32);
            let t = btf.ty(TypeId::new(id));
            scratch.clear();
            scratch.extend_from_slice(t.words);
            // Member offset words below 2^24 mean the same with or without
            // kind_flag (no bitfield sizes): compare what they mean.
            if matches!(t.kind(), Kind::Struct | Kind::Union) && t.triples().all(|m| m[2] >> 24 == 0) {
                scratch[1] &= !(1 << 31);
            }
            Btf::for_each_str_ref_mut(&mut scratch, |s| {
                let text = btf.str_at(crate::btf::StrOff::new(*s)).unwrap_or(b"");
                let next = strs.len() as u32;
                *s = *strs.entry(text).or_insert(next);
            });
            Btf::for_each_type_ref_mut(&mut scratch, |r| {
                refs.push(off + *r);
                *r = 0;
            });
            local.push(local_sigs.intern(&scratch));
        }
    }
    refs_start.push(refs.len() as u32);
    debug_assert_eq!(local.len(), n);
    let mut count = local_sigs.len();
    drop(local_sigs);
    let mut class = local.clone();
    let mut next = vec![0u32; n];
    let mut rounds = 0;
    let mut key: Vec<u32> = Vec::with_capacity(64);
    loop {
        rounds += 1;
        let mut sigs = SliceInterner::with_capacity(count as usize * 2, n + refs.len());
        for i in 0..n {
            key.clear();
            key.push(class[i]);
            let (s, e) = (refs_start[i] as usize, refs_start[i + 1] as usize);
            key.extend(refs[s..e].iter().map(|&r| class[r as usize]));
            next[i] = sigs.intern(&key);
        }
        let new_count = sigs.len();
        std::mem::swap(&mut class, &mut next);
        // Refinement only ever splits classes: an unchanged count means an
        // unchanged partition, the fixpoint.
        if new_count == count {
            break;
        }
        count = new_count;
    }
    Classes {
        class,
        local,
        a_nodes,
        rounds,
        count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, Kind};

    /// struct list { struct list *next; int v; } built with a given id layout.
    fn list(extra_first: bool, member: &[u8]) -> (Btf, TypeId) {
        let mut b = Btf::new(Endian::Little);
        if extra_first {
            b.add_int(b"long", 8, 1);
        }
        let int = b.add_int(b"int", 4, 1);
        let s = TypeId::new(b.type_count() + 2);
        let p = b.add_ref(Kind::Ptr, s);
        let s2 = b.begin(Kind::Struct, b"list", 16, false);
        assert_eq!(s, s2);
        b.push_member(b"next", p, 0, 0);
        b.push_member(member, int, 64, 0);
        (b, s)
    }

    #[test]
    fn cycles_through_pointers_are_equal_across_id_layouts() {
        let (a, sa) = list(false, b"v");
        let (b, sb) = list(true, b"v");
        let c = compute(&a, &b);
        assert_eq!(c.a(sa), c.b(sb));
        assert_ne!(c.a(sa), c.b(TypeId::new(1)), "struct vs long");
    }

    #[test]
    fn a_change_below_a_cycle_separates_the_cycle() {
        let (a, sa) = list(false, b"v");
        let (b, sb) = list(false, b"w");
        let c = compute(&a, &b);
        assert_ne!(c.a(sa), c.b(sb));
        // the pointers to them differ too, although their own records match
        assert_eq!(c.local_a(TypeId::new(2)), c.local_b(TypeId::new(2)));
        assert_ne!(c.a(TypeId::new(2)), c.b(TypeId::new(2)));
        // int is untouched
        assert_eq!(c.a(TypeId::new(1)), c.b(TypeId::new(1)));
    }

    #[test]
    fn two_unrollings_of_one_cycle_are_equivalent() {
        // a: struct s { struct s *p; }
        // b: struct s { struct s' *p; } struct s' { struct s *p; } — same infinite tree
        let mut a = Btf::new(Endian::Little);
        let p = a.add_ref(Kind::Ptr, TypeId::new(2));
        a.begin(Kind::Struct, b"s", 8, false);
        a.push_member(b"p", p, 0, 0);
        let mut b = Btf::new(Endian::Little);
        let p1 = b.add_ref(Kind::Ptr, TypeId::new(4));
        b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"p", p1, 0, 0);
        let p2 = b.add_ref(Kind::Ptr, TypeId::new(2));
        b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"p", p2, 0, 0);
        let c = compute(&a, &b);
        assert_eq!(c.a(TypeId::new(2)), c.b(TypeId::new(2)));
        assert_eq!(c.a(TypeId::new(2)), c.b(TypeId::new(4)));
    }

    #[test]
    fn kind_flag_matters_only_when_offset_words_use_the_bitfield_byte() {
        let build = |kflag: bool, word: u32| {
            let mut b = Btf::new(Endian::Little);
            let int = b.add_int(b"int", 4, 1);
            b.begin(Kind::Struct, b"s", 4, kflag);
            b.push_member(b"m", int, 0, 0);
            b.words_mut(TypeId::new(2))[5] = word;
            b
        };
        let c = compute(&build(false, 8), &build(true, 8));
        assert_eq!(c.a(TypeId::new(2)), c.b(TypeId::new(2)));
        // 5 << 24 | 3: a 5-bit field at bit 3 with kind_flag, bit 83886083 without
        let c = compute(&build(false, 5 << 24 | 3), &build(true, 5 << 24 | 3));
        assert_ne!(c.a(TypeId::new(2)), c.b(TypeId::new(2)));
    }

    #[test]
    fn string_offsets_do_not_matter_but_text_does() {
        let mut a = Btf::new(Endian::Little);
        a.add_str(b"padding");
        let ia = a.add_int(b"int", 4, 1);
        let mut b = Btf::new(Endian::Little);
        let ib = b.add_int(b"int", 4, 1);
        let ub = b.add_int(b"unsigned int", 4, 0);
        let c = compute(&a, &b);
        assert_ne!(a.ty(ia).name_off(), b.ty(ib).name_off());
        assert_eq!(c.a(ia), c.b(ib));
        assert_ne!(c.a(ia), c.b(ub));
    }
}
