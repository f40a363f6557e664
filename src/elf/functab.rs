//! The ELF function table (reference §2 of encoding-funcs-vars.md): every
//! `STT_FUNC` symbol of `.symtab`, keyed by the part of its name before the
//! first `.`, sorted by key, equal keys merged into one entry.
//!
//! The encoder builds it from the symbols it reads anyway (`elf::debug`);
//! `from_elf` serves callers that only need the table (e.g. the kfunc tests).
//!
//! Built once, immutable afterwards: decode workers share it without locks.

use std::hash::BuildHasher;

use object::read::elf::{ElfFile, FileHeader, SectionHeader, Sym};

/// One function name of the table: the key with every symbol that has it.
#[derive(Clone, Debug)]
pub struct FuncEntry<'a> {
    pub key: &'a [u8],
    /// Range in `FuncTable::syms`.
    pub first: u32,
    pub count: u32,
    /// Several distinct non-zero addresses (never set on the last entry).
    pub ambiguous: bool,
}

/// The ELF function table, sorted by key (bytewise).
#[derive(Default)]
pub struct FuncTable<'a> {
    pub entries: Vec<FuncEntry<'a>>,
    /// (full symbol name, address) per symbol, grouped by entry.
    pub syms: Vec<(&'a [u8], u64)>,
    /// Entry index by key hash: every DWARF function of every CU looks its
    /// name up, and a binary search over a vmlinux's 60 k keys (16 string
    /// compares, each a likely cache miss) was a visible part of an encode.
    index: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl std::fmt::Debug for FuncTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FuncTable")
            .field("entries", &self.entries)
            .field("syms", &self.syms)
            .finish()
    }
}

impl<'a> FuncTable<'a> {
    /// Builds the table from `(key, full name, address)` records of STT_FUNC
    /// symbols in symbol-table order (already filtered by [`func_key`]).
    pub fn build(recs: Vec<(&'a [u8], &'a [u8], u64)>) -> FuncTable<'a> {
        // Stable: equal keys keep symbol-table order (the reference's qsort is
        // glibc's merge sort). Each key's first 32 bytes go inline, as two
        // big-endian numbers (zero-padded: names hold no NUL, so a shorter
        // key still sorts first), with its length: they decide all but a
        // few comparisons, and the grouping of equal keys, without reading
        // the names. A vmlinux's 100 k keys share long prefixes (`__pfx_`,
        // `__x64_sys_`); sorted and grouped by name they took tens of
        // milliseconds of cache misses before the first CU could start.
        let mut keyed: Vec<Keyed> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (hi, lo) = prefix32(r.0);
                Keyed {
                    hi,
                    lo,
                    len: r.0.len() as u32,
                    at: i as u32,
                }
            })
            .collect();
        let key = |k: &Keyed| recs[k.at as usize].0;
        keyed.sort_unstable_by(|x, y| {
            (x.hi, x.lo)
                .cmp(&(y.hi, y.lo))
                .then_with(|| key(x).cmp(key(y)))
                .then(x.at.cmp(&y.at))
        });
        let same =
            |x: &Keyed, y: &Keyed| (x.hi, x.lo, x.len) == (y.hi, y.lo, y.len) && (x.len <= 32 || key(x) == key(y));
        let mut t = FuncTable::default();
        // exact: growing by doubling costs page faults (3 µs each here) on
        // memory copied and thrown away
        t.syms.reserve_exact(keyed.len());
        t.entries.reserve_exact(keyed.len());
        let mut i = 0;
        while i < keyed.len() {
            let head = &keyed[i];
            let first = t.syms.len() as u32;
            while i < keyed.len() && same(head, &keyed[i]) {
                let r = &recs[keyed[i].at as usize];
                t.syms.push((r.1, r.2));
                i += 1;
            }
            t.entries.push(FuncEntry {
                key: key(head),
                first,
                count: t.syms.len() as u32 - first,
                ambiguous: false,
            });
        }
        drop(keyed);
        let (entries, hasher) = (&t.entries, &t.hasher);
        let rehash = |&j: &u32| hasher.hash_one(entries[j as usize].key);
        t.index.reserve(entries.len(), rehash);
        for (i, e) in entries.iter().enumerate() {
            // keys are unique after the merge above
            t.index.insert_unique(hasher.hash_one(e.key), i as u32, rehash);
        }
        // The reference checks each entry when the next key starts, so the
        // last entry is never checked; address 0 counts as "unset".
        let n = t.entries.len();
        for e in t.entries.iter_mut().take(n.saturating_sub(1)) {
            let mut r = 0u64;
            for &(_, a) in &t.syms[e.first as usize..(e.first + e.count) as usize] {
                if r != 0 && a != r {
                    e.ambiguous = true;
                    break;
                }
                r = a;
            }
        }
        t
    }

    /// The table of an ELF file: `None` when it has no section named
    /// `.symtab` (the reference then cannot create its encoder).
    pub fn from_elf(data: &'a [u8]) -> Result<Option<FuncTable<'a>>, String> {
        match object::File::parse(data).map_err(|e| format!("not a readable ELF file: {e}"))? {
            object::File::Elf32(f) => collect(&f),
            object::File::Elf64(f) => collect(&f),
            _ => Err("not an ELF file".into()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry whose key is exactly `name`.
    pub fn lookup(&self, name: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(name);
        self.index.find(h, |&i| self.entries[i as usize].key == name).copied()
    }
}

/// A function key in [`FuncTable::build`]'s sort: its first 32 bytes,
/// its length, and the record it comes from.
struct Keyed {
    hi: u128,
    lo: u128,
    len: u32,
    at: u32,
}

/// The first 32 bytes of `key` as two big-endian numbers, zero-padded.
#[inline]
fn prefix32(key: &[u8]) -> (u128, u128) {
    let mut b = [0u8; 32];
    let n = key.len().min(32);
    b[..n].copy_from_slice(&key[..n]);
    let (hi, lo) = b.split_at(16);
    let num = |h: &[u8]| u128::from_be_bytes(h.try_into().expect("16 bytes"));
    (num(hi), num(lo))
}

/// The key of a function symbol, or `None` if the symbol is dropped (a
/// `.cold` or `.part` anywhere after the first dot).
pub fn func_key(name: &[u8]) -> Option<&[u8]> {
    match suffixes(name) {
        None => Some(name),
        Some(tail) if contains(tail, b".cold") || contains(tail, b".part") => None,
        Some(tail) => Some(&name[..name.len() - tail.len()]),
    }
}

/// Whether a function symbol names a clone the compiler made with another
/// signature: `.isra` or `.constprop` anywhere after the first dot.
pub fn is_signature_clone(name: &[u8]) -> bool {
    suffixes(name).is_some_and(|tail| contains(tail, b".isra") || contains(tail, b".constprop"))
}

/// A symbol's suffixes: from its first dot on, if it has one.
fn suffixes(name: &[u8]) -> Option<&[u8]> {
    name.iter().position(|&b| b == b'.').map(|dot| &name[dot..])
}

fn contains(h: &[u8], n: &[u8]) -> bool {
    h.windows(n.len()).any(|w| w == n)
}

fn collect<'a, H: FileHeader<Endian = object::Endianness>>(
    f: &ElfFile<'a, H, &'a [u8]>,
) -> Result<Option<FuncTable<'a>>, String> {
    let e = f.endian();
    let data = f.data();
    let sections = f.elf_section_table();
    // The first section *named* .symtab.
    let Some((idx, sh)) = sections.section_by_name(e, b".symtab") else {
        return Ok(None);
    };
    if !matches!(sh.sh_type(e), object::elf::SHT_SYMTAB | object::elf::SHT_DYNSYM) {
        return Err(format!(".symtab: section type {} is not a symbol table", sh.sh_type(e)));
    }
    let symtab = object::read::elf::SymbolTable::<H, &[u8]>::parse(e, data, sections, idx, sh)
        .map_err(|err| format!(".symtab: {err}"))?;
    let strings = symtab.strings();
    let mut recs = Vec::new();
    for sym in symtab.symbols().iter() {
        if sym.st_type() != object::elf::STT_FUNC {
            continue;
        }
        let name = sym
            .name(e, strings)
            .map_err(|err| format!(".symtab: symbol name: {err}"))?;
        if let Some(key) = func_key(name) {
            recs.push((key, name, sym.st_value(e).into()));
        }
    }
    Ok(Some(FuncTable::build(recs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_drop_cold_and_part() {
        assert_eq!(func_key(b"f"), Some(&b"f"[..]));
        assert_eq!(func_key(b"f.isra.0"), Some(&b"f"[..]));
        assert_eq!(func_key(b"f.constprop.0.isra.0"), Some(&b"f"[..]));
        assert_eq!(func_key(b"f.part.0"), None);
        assert_eq!(func_key(b"f.cold"), None);
        assert_eq!(func_key(b"f.isra.0.cold"), None);
        assert_eq!(func_key(b"f.partial"), None);
        assert!(is_signature_clone(b"f.isra.0"));
        assert!(is_signature_clone(b"f.constprop.0.isra.0"));
        assert!(is_signature_clone(b"f.part.0.constprop.1"));
        assert!(!is_signature_clone(b"f.cold"));
        assert!(!is_signature_clone(b"isra"));
        assert_eq!(func_key(b""), Some(&b""[..]));
    }

    #[test]
    fn entries_are_a_stable_sort_by_key() {
        // keys sharing long prefixes, prefixes of each other, and repeats
        // in symbol-table order
        let keys: [&[u8]; 14] = [
            b"__pfx_acpi_ns_walk_namespace_callback_b",
            b"__pfx_acpi_ns_walk_namespace_callback",
            b"__pfx_acpi_ns_walk_namespace_callback_a",
            b"__pfx_acpi_ns_walk_namespace_cal",
            b"__pfx_acpi_ns_walk_namespace_callback_a",
            b"acpi_ns_walk_namespace_x",
            b"acpi_ns_walk_namespace",
            b"acpi_ns_walk_nam",
            b"acpi_ns_walk_namespace_a",
            b"acpi_ns_walk_na",
            b"acpi_ns_walk_nam",
            b"b",
            b"acpi_ns_walk_namespace",
            b"",
        ];
        let recs: Vec<(&[u8], &[u8], u64)> = keys.iter().enumerate().map(|(i, &k)| (k, k, i as u64 + 1)).collect();
        let mut want = recs.clone();
        want.sort_by(|a, b| a.0.cmp(b.0));
        let t = FuncTable::build(recs);
        let got: Vec<(&[u8], u64)> = t.syms.clone();
        assert_eq!(got, want.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>());
        let entry_keys: Vec<&[u8]> = t.entries.iter().map(|e| e.key).collect();
        let mut distinct: Vec<&[u8]> = want.iter().map(|r| r.0).collect();
        distinct.dedup();
        assert_eq!(entry_keys, distinct);
    }

    #[test]
    fn ambiguity_ignores_zero_and_last_entry() {
        let t = FuncTable::build(vec![
            (b"z", b"z", 0x10),
            (b"a", b"a", 0),
            (b"b", b"b", 0x10),
            (b"a", b"a.isra.0", 0x10),
            (b"b", b"b.constprop.0", 0x20),
            (b"c", b"c", 0x30),
            (b"c", b"c_alias", 0x30),
            (b"z", b"z.constprop.0", 0x20),
        ]);
        let keys: Vec<&[u8]> = t.entries.iter().map(|e| e.key).collect();
        assert_eq!(keys, vec![&b"a"[..], b"b", b"c", b"z"]);
        let amb: Vec<bool> = t.entries.iter().map(|e| e.ambiguous).collect();
        // a: 0 then 0x10 (0 is unset); b: two addresses; c: same address;
        // z: two addresses but last in order.
        assert_eq!(amb, vec![false, true, false, false]);
        // Equal keys keep symbol-table order.
        let b = &t.entries[1];
        assert_eq!(t.syms[b.first as usize].0, b"b");
        assert_eq!(t.lookup(b"b"), Some(1));
        assert_eq!(t.lookup(b"bb"), None);
    }

    #[test]
    fn nonzero_then_zero_is_ambiguous() {
        let t = FuncTable::build(vec![(b"a", b"a", 0x10), (b"a", b"a.isra.0", 0), (b"b", b"b", 1)]);
        assert!(t.entries[0].ambiguous);
    }
}
