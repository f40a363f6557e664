//! BTF deduplication with exactly the result of libbpf 374f7807's `btf__dedup`.
//!
//! # What the reference does
//!
//! pahole concatenates the BTF of every compilation unit into one blob and lets
//! libbpf collapse the copies. Each type gets a *canonical representative*
//! (`map[id]`, followed transitively by `resolve`); survivors are the types
//! that represent themselves, kept in input order and renumbered densely. The
//! passes run in this order (spec `btf-format-dedup.md` §4):
//!
//! 1. **prep** (split BTF): every base type represents itself and — except
//!    VAR/DATASEC — goes into the candidate table, duplicates included;
//! 2. **strings** (only for BTF parsed from bytes, [`StringMode::Dedup`]):
//!    a fresh table of the referenced strings in first-reference order;
//! 3. **primitives** (INT, FLOAT, FWD, ENUM, ENUM64): first equal candidate,
//!    with the enum forward-declaration rules;
//! 4. **structs/unions**: for each candidate with the same shallow shape, a
//!    side-by-side walk of both type graphs (`is_equiv`) that records a
//!    hypothetical canonical→candidate map; on success that map is merged
//!    (resolving FWDs and mapping inner structs early);
//! 5. **unambiguous FWDs**: a FWD nobody resolved goes to the only canonical
//!    struct or union of its name;
//! 6. **reference types**: post-order, each reference type's referenced ids
//!    become canonical first, then it is looked up by exact content;
//! 7. **compaction** and 8. **id remapping**.
//!
//! # Why our result is the reference's
//!
//! Everything observable depends on three things, and each is reproduced
//! rather than approximated:
//!
//! * **Visiting order.** Every pass walks ids in ascending order, and within a
//!   graph walk the children in libbpf's order (ARRAY index before element,
//!   FUNC_PROTO return before parameters). The graph walks use explicit stacks
//!   instead of recursion, but push children in reverse so they pop in the
//!   same pre-order (struct equivalence) or post-order (reference types); a
//!   failing comparison anywhere ends a struct check in both, so the
//!   hypothetical map holds the same entries in the same order.
//! * **Candidate order.** Several lookups take the *first* acceptable
//!   candidate; libbpf's chained hash map makes that "newest first, reversed
//!   at every growth". [`table::CandTable`] keys entries by libbpf's own
//!   64-bit hash values (so even its hash collisions share a list as they do
//!   there) and replays the growth rule with a parity bit.
//! * **State seen by each comparison.** libbpf rewrites a reference type's
//!   fields to canonical ids when it processes it and compares records with
//!   those rewritten fields. We never write into the input: a processed
//!   type's rewritten field is `resolve(original)`, and that value is a fixed
//!   point from the moment it is computed (only unprocessed reference types
//!   change their map entry during the reference pass), so recomputing it on
//!   demand gives the same words. Base types are the exception — libbpf
//!   never rewrites them — so base candidates are compared by their stored
//!   words even when a base FWD has since been re-pointed into the split
//!   part. The struct pass's "identical duplicate" tolerances read raw ids,
//!   which at that point are still the input ids in libbpf too.
//!
//! # Where we do less work than libbpf, with the same result
//!
//! * **Settled pairs are not queued.** libbpf's first test at each node of a
//!   graph walk is "both ends resolve to the same type". `map` never changes during one
//!   walk, so that test gives the same answer when a pair is queued as when
//!   it is popped, and such a pair has no side effect: it is dropped at once.
//!   A struct member (or parameter) pair equal to the previous one is dropped
//!   too: it pops after the first one's whole walk, by which time the
//!   hypothetical map answers "equivalent" for it, again without side effects.
//!   So is any pair the hypothetical map already holds when it is queued
//!   (half of a vmlinux's walk steps).
//! * **Merging.** After a successful walk every recorded pair passed its
//!   kind test, so a pair whose candidate side is neither a FWD nor a struct
//!   or union can neither resolve a FWD nor map a struct: it is not looked at.
//! * **Anonymous enums.** All of them share libbpf's hash key (the name
//!   offset, 0), so each one walked every canonical anonymous enum. Without a
//!   base, and when no enum forward declaration of that name has been seen,
//!   the walk can only end at an *equal* candidate, and canonical enums are
//!   pairwise unequal, so there is at most one: a content index finds it.
//!   The candidate table is still updated exactly as libbpf does, since its
//!   growth points decide later candidate orders.
//! * **Reference pass.** A reference to an already mapped type is looked up
//!   directly (libbpf's recursion would return at once for its child); other
//!   types queue their ids in one go, which examines them in the recursion's
//!   order and at the same moments (see [`refpass`]); on two threads, a
//!   second stretch of ids runs beside the first when no walk crosses
//!   between them, and its canonical types are then looked up in the first
//!   one's index.
//! * **Reference index.** Without a base, a reference type's lookup has at
//!   most one equal candidate and no pass looks anything up afterwards, so
//!   the reference pass keeps the canonical reference types by their
//!   rewritten content in an index of its own ([`refindex`]): a lookup reads
//!   no candidate's record and resolves none of its ids. (With a base,
//!   duplicates among the base types make the candidate order matter.)
//! * **Layout.** Per id: the record's start (a `u16` step from a `u32` per
//!   block of 64 ids, [`offsets`]), the link `resolve` follows (the
//!   canonical id if mapped, else the id itself: one dense array and one
//!   test per hop) and two state bits ([`states`]) — under 7 bytes, against
//!   libbpf's 12 (map, hypothetical map, offset). The hypothetical map lives
//!   only for one walk, in pages of an id-indexed array that exist only where
//!   the walk records something ([`hypot`]); compaction turns
//!   `link` into the old → new id map and moves the survivors' records down
//!   in place. Records are read in place, never copied (except with a base,
//!   whose records are prepended so one slice covers the ids);
//!   [`dedup_owned`] turns the input's offset column into the per-id
//!   offsets. On a vmlinux this put dedup's peak at 196 MiB, from 224.
//!
//! # Invariants
//!
//! * `map[id]` is UNPROCESSED, IN_PROGRESS or an id (`state` + `link`). Every write makes an
//!   entry point at a type that is, at that moment, the end of its own chain
//!   (a `resolve` result, a canonical candidate, or the type being processed),
//!   which can never close a cycle: the links form a forest and `resolve`
//!   terminates. The `link` array mirrors `map` for `resolve`.
//! * A type is inserted into the candidate table only when it becomes
//!   canonical (plus every base type in prep); nothing is ever removed.
//! * Base types are never renumbered and never emitted; survivors keep their
//!   relative order.
//!
//! Errors are libbpf's: a reference cycle that does not pass through a struct
//! (`-ELOOP`), a graph walk reaching VAR/DATASEC/DECL_TAG or an unknown kind
//! (`-EINVAL`). One case is ours: structs that embed each other (by value) in
//! a cycle make libbpf's recursive "identical structs" check overflow its
//! stack; we stop at a fixed depth and report it.

mod hypot;
mod incremental;
mod offsets;
mod refindex;
mod refpass;
mod states;
mod stub;
pub mod table;

use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use thiserror::Error;

use crate::btf::kind::*;
use crate::btf::{Btf, StrTab};
use hypot::{HypotMap, Mark};
use offsets::Offsets;
use states::States;

pub use incremental::Incremental;
use table::CandTable;

/// What happens to the string section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StringMode {
    /// Leave it byte-identical (BTF built with libbpf's add API: pahole's case).
    #[default]
    Keep,
    /// libbpf's string pass for BTF parsed from bytes: keep only referenced
    /// strings, in first-reference order.
    Dedup,
}

#[derive(Clone, Default)]
pub struct Options {
    pub strings: StringMode,
    /// The BTF comes from [`crate::btf::read`], which already rejected type
    /// ids past the last type: skip checking them again (a full pass over
    /// every member of every struct, ~100 ms on a vmlinux). Record extents
    /// are always checked.
    pub ids_checked: bool,
    /// Print phase timings to stderr.
    pub timings: bool,
    /// What dedup derives from the base alone, computed once for a batch of
    /// split BTFs over the same base ([`BaseIndex::new`]); ignored unless it
    /// was built from the very base the input is split over.
    pub base_index: Option<std::sync::Arc<BaseIndex>>,
}

/// What dedup derives from a base BTF alone: its records and nodes laid out,
/// the candidate table after the prep pass, and the names of its structs and
/// unions for the unambiguous-FWD pass. A batch of modules over one vmlinux
/// builds it once instead of once per module, where it was a third of the
/// CPU time (inserting 107 k base types, checking and copying their records).
/// Using it gives the same state the per-module passes would build: they
/// depend on the base alone.
pub struct BaseIndex {
    base: std::sync::Arc<Btf>,
    words: Vec<u32>,
    nodes: Vec<u32>,
    table: CandTable,
    composite_names: hashbrown::HashMap<u32, u32>,
}

impl BaseIndex {
    pub fn new(base: &std::sync::Arc<Btf>) -> Result<BaseIndex, DedupError> {
        let (words, nodes, _) = layout(
            base.base(),
            Cow::Borrowed(base.type_offsets()),
            Cow::Borrowed(base.raw_words()),
            true,
            None,
        )?;
        let words = words.into_owned();
        let mut table = CandTable::with_capacity(1 << 16);
        let mut composite_names = hashbrown::HashMap::new();
        for id in 1..nodes.len() as u32 {
            let w = rec_at(&words, nodes[id as usize]);
            if let Some(h) = prep_hash(w, id)? {
                table.insert(h, id);
            }
            if is_composite(w.kind()) {
                composite_names.entry(w[0]).and_modify(|v| *v = 0).or_insert(id);
            }
        }
        Ok(BaseIndex {
            base: base.clone(),
            words,
            nodes,
            table,
            composite_names,
        })
    }

    fn serves(&self, base: Option<&std::sync::Arc<Btf>>) -> bool {
        base.is_some_and(|b| std::sync::Arc::ptr_eq(b, &self.base))
    }
}

/// The hash the prep pass files base type `id` under (None: not filed).
fn prep_hash(w: &[u32], id: u32) -> Result<Option<u64>, DedupError> {
    Ok(Some(match w.kind() {
        VAR | DATASEC => return Ok(None),
        CONST | VOLATILE | RESTRICT | PTR | FWD | TYPEDEF | FUNC | FLOAT | TYPE_TAG => hash_common(w),
        INT | DECL_TAG => hash_int_tag(w),
        ENUM | ENUM64 => hash_enum(w),
        STRUCT | UNION => hash_struct(w),
        ARRAY => hash_array(w),
        FUNC_PROTO => hash_fnproto(w),
        _ => {
            return Err(DedupError::Invalid {
                id,
                what: "unknown kind in the base",
            });
        }
    }))
}

/// Why dedup failed; the input is never modified.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DedupError {
    #[error("type [{id}]: reference types form a cycle that no struct or union breaks (libbpf: -ELOOP)")]
    Loop { id: u32 },
    #[error("type [{id}]: {what} (libbpf: -EINVAL)")]
    Invalid { id: u32, what: &'static str },
    #[error("type [{id}]: structs embed each other more than {depth} levels deep (libbpf would overflow its stack)")]
    TooDeep { id: u32, depth: u32 },
}

impl DedupError {
    /// The negative errno libbpf returns for the same input.
    pub fn errno(&self) -> i32 {
        match self {
            DedupError::Loop { .. } => -40,
            DedupError::Invalid { .. } | DedupError::TooDeep { .. } => -22,
        }
    }
}

const MAX_ID: u32 = 0x7fff_ffff;
const MAX_EMBED_DEPTH: u32 = 4096;

#[inline]
fn is_composite(k: u32) -> bool {
    k == STRUCT || k == UNION
}
#[inline]
fn is_any_enum(k: u32) -> bool {
    k == ENUM || k == ENUM64
}

// ---- libbpf's type signature hashes: h = h * 31 + value ----

#[inline]
fn hc(h: u64, v: u32) -> u64 {
    h.wrapping_mul(31).wrapping_add(v as u64)
}
#[inline]
fn hash_common(w: &[u32]) -> u64 {
    hc(hc(hc(0, w[0]), w[1]), w[2])
}
#[inline]
fn hash_int_tag(w: &[u32]) -> u64 {
    hc(hash_common(w), w[3])
}
#[inline]
fn hash_enum(w: &[u32]) -> u64 {
    hc(0, w[0])
}
/// A hash of a whole record or rewritten content (for the exact-content
/// side indexes: full enums here, reference types in [`refindex`]).
fn content_hash(w: &[u32]) -> u64 {
    let mut h: u64 = 0;
    for &x in w {
        h = (h.rotate_left(5) ^ x as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 32)
}

fn hash_struct(w: &[u32]) -> u64 {
    let mut h = hash_common(w);
    for m in w[3..].chunks_exact(3) {
        h = hc(hc(h, m[0]), m[2]);
    }
    h
}
#[inline]
fn hash_array(w: &[u32]) -> u64 {
    hc(hc(hc(hash_common(w), w[3]), w[4]), w[5])
}
fn hash_fnproto(w: &[u32]) -> u64 {
    let mut h = hash_common(w);
    for p in w[3..].chunks_exact(2) {
        h = hc(hc(h, p[0]), p[1]);
    }
    h
}

// ---- libbpf's equality tests on raw words ----

#[inline]
fn equal_common(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0] && a[1] == b[1] && a[2] == b[2]
}
#[inline]
fn equal_int_tag(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[3] == b[3]
}
fn equal_enum(a: &[u32], b: &[u32]) -> bool {
    // equal info implies equal kind and vlen, hence equal length
    equal_common(a, b) && a[3..] == b[3..]
}
#[inline]
fn is_enum_fwd(w: &[u32]) -> bool {
    is_any_enum(w.kind()) && w.vlen() == 0
}
fn compat_enum(a: &[u32], b: &[u32]) -> bool {
    if !is_enum_fwd(a) && !is_enum_fwd(b) {
        return equal_enum(a, b);
    }
    a[0] == b[0] && is_any_enum(a.kind()) && is_any_enum(b.kind())
}
fn shallow_equal_struct(a: &[u32], b: &[u32]) -> bool {
    if !equal_common(a, b) {
        return false;
    }
    a[3..]
        .chunks_exact(3)
        .zip(b[3..].chunks_exact(3))
        .all(|(x, y)| x[0] == y[0] && x[2] == y[2])
}
fn equal_array(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[3] == b[3] && a[4] == b[4] && a[5] == b[5]
}
fn compat_fnproto(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0]
        && a[1] == b[1]
        && a[3..]
            .chunks_exact(2)
            .zip(b[3..].chunks_exact(2))
            .all(|(x, y)| x[0] == y[0])
}

/// Positions of the type-id words of a record, in libbpf's field-iterator order
/// (`BTF_FIELD_ITER_IDS`; note FWD's size/type word counts).
fn for_each_id_pos(w: &[u32], mut f: impl FnMut(usize)) {
    match w.kind() {
        FWD | CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | VAR | DECL_TAG | TYPE_TAG => f(2),
        ARRAY => {
            f(3);
            f(4);
        }
        STRUCT | UNION => (0..w.vlen()).for_each(|i| f(3 + 3 * i + 1)),
        FUNC_PROTO => {
            f(2);
            (0..w.vlen()).for_each(|i| f(3 + 2 * i + 1));
        }
        DATASEC => (0..w.vlen()).for_each(|i| f(3 + 3 * i)),
        _ => {}
    }
}

/// Whether every type id of the record `w` (exactly one record: what
/// [`for_each_id_pos`] visits) is below `end`. Member lists are scanned
/// as chunks, without a bounds check per id: every record of a vmlinux goes
/// through this when dedup runs during the CU loop.
#[inline(always)]
fn ids_below(w: &[u32], end: u32) -> bool {
    let all_below = |stride: usize, at: usize| w.get(3..).unwrap_or(&[]).chunks_exact(stride).all(|e| e[at] < end);
    match w.kind() {
        FWD | CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | VAR | DECL_TAG | TYPE_TAG => w[2] < end,
        ARRAY => w[3] < end && w[4] < end,
        STRUCT | UNION => all_below(3, 1),
        FUNC_PROTO => w[2] < end && all_below(2, 1),
        DATASEC => all_below(3, 0),
        _ => true,
    }
}

static VOID: [u32; 3] = [0, 0, 0];

/// The length of the record at word `off`, if it fits in `words`.
#[inline]
fn fitting_len(words: &[u32], off: usize) -> Option<usize> {
    words
        .get(off + 1)
        .map(|&info| Info(info).len())
        .filter(|len| off + len <= words.len())
}

/// VAR and DATASEC represent themselves from the start (libbpf's prep).
#[inline]
fn represents_itself(k: u32) -> bool {
    k == VAR || k == DATASEC
}

/// libbpf's `map[id]` is UNPROCESSED, IN_PROGRESS or an id. We keep the id in
/// `link` (see [`Dedup::link`]) and which of the three it is in two bits
/// ([`States`]).
const ST_UNPROCESSED: u8 = 0;
const ST_IN_PROGRESS: u8 = 1;
const ST_MAPPED: u8 = 2;

/// The record that starts at word `off`.
#[inline(always)]
fn rec_at(words: &[u32], off: u32) -> &[u32] {
    let s = off as usize;
    &words[s..s + Info(words[s + 1]).len()]
}

/// The words from the record of `id` on (0 is void): for reading fields at
/// fixed places or counted by its vlen without first working out where it
/// ends (the graph walk's hottest reads). [`exact`] cuts it to the record.
#[inline(always)]
fn rec_from<'w>(words: &'w [u32], nodes: &Offsets, id: u32) -> &'w [u32] {
    if id == 0 {
        return &VOID;
    }
    &words[nodes.get(id) as usize..]
}

/// A [`rec_from`] slice cut to its record.
#[inline(always)]
fn exact(w: &[u32]) -> &[u32] {
    &w[..w.rec_len()]
}

/// The record of `id` (ids of the whole space; 0 is void).
#[inline(always)]
fn rec_of<'w>(words: &'w [u32], nodes: &Offsets, id: u32) -> &'w [u32] {
    if id == 0 {
        return &VOID;
    }
    rec_at(words, nodes.get(id))
}

struct Dedup<'a, L: Links = Vec<u32>> {
    /// Precomputed base state (prep's table, base struct names), if any.
    base_index: Option<&'a BaseIndex>,
    /// Records of every id: base and own in one slice (a plain slice here,
    /// so the hot paths index it without first asking whose it is).
    words: &'a [u32],
    /// Where each id's record starts in `words`; kind and length come from
    /// the record itself.
    nodes: Offsets,
    /// `map` as `resolve` reads it: the link if mapped, else the id itself —
    /// one dense array and one test per hop on the hottest path.
    link: L,
    /// `ST_*`: whether `map` is an id (then `link` holds it) or which of
    /// libbpf's two markers it is.
    state: States,
    /// First own id; one past the last id.
    start: u32,
    end: u32,
    /// The current walk's hypothetical canonical → candidate map.
    hypot: HypotMap,
    adjust_canon: bool,
    table: CandTable,
    /// Pending (candidate, canonical) pairs of one graph-equivalence check.
    eq_stack: Vec<Queued>,
    /// Names of enum forward declarations seen (primitive pass fast path).
    enum_fwds: hashbrown::HashSet<u32>,
    /// Canonical full enums by content (primitive pass fast path).
    enums: hashbrown::HashTable<u32>,
    /// Set while the primitive and struct passes run chunk by chunk during
    /// the encoder's CU loop ([`Incremental`]): the struct pass then proves
    /// its choice independent of candidate order, and walks note the enum
    /// forward declarations they meet.
    overlap: bool,
    /// Why the chunked passes cannot stand for the whole-BTF ones.
    give_up: Option<&'static str>,
    /// Ids below this have been through the struct pass.
    struct_done: u32,
    /// The passing candidate's walk, kept while the others are tried.
    spare_hypot: HypotMap,
}

macro_rules! rec {
    ($d:expr, $id:expr) => {
        rec_of(&$d.words, &$d.nodes, $id)
    };
}

/// Deduplicates `btf` (over its base, if split) as libbpf's `btf__dedup` does.
pub fn dedup(btf: &Btf, opts: &Options) -> Result<Btf, DedupError> {
    let clock = Timer::new(opts.timings);
    let start = btf.start_id();
    let end = btf.type_count() + 1;

    // Strings first: the pass only rewrites name offsets, and doing it before
    // prep (as libbpf does) changes nothing the prep pass looks at.
    let (own, strtab) = match opts.strings {
        StringMode::Dedup if !strings_already_unique(btf) => {
            let (w, s) = dedup_strings(btf);
            (Cow::Owned(w), s)
        }
        _ => (
            Cow::Borrowed(btf.raw_words()),
            StrTab::from_bytes(btf.start_str_off(), btf.raw_strings().to_vec(), btf.base().cloned()),
        ),
    };
    clock.lap("strings");

    let index = opts.base_index.as_deref().filter(|i| i.serves(btf.base()));
    let (words, nodes, state) = layout(
        btf.base(),
        Cow::Borrowed(btf.type_offsets()),
        own,
        !opts.ids_checked,
        index,
    )?;
    clock.lap("layout");
    let d = run(words, nodes, state, start, end, index, &clock)?;
    Ok(Btf::from_parts(d.0, d.1, strtab, btf.endian(), btf.base().cloned()))
}

/// [`dedup`] with the reference pass looking reference types up in the
/// candidate table as libbpf does, not in its own index ([`refindex`]):
/// the same result, which tests and fuzzing check.
#[doc(hidden)]
pub fn dedup_through_table(btf: &Btf, opts: &Options) -> Result<Btf, DedupError> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            refindex::force_off(false);
        }
    }
    let _reset = Reset;
    refindex::force_off(true);
    dedup(btf, opts)
}

/// [`dedup`] on a BTF the caller no longer needs: its record offsets are
/// freed once laid out and its records and strings are not copied, which
/// lowers the peak memory of an encode run by the size of the input's
/// offset column (17 MB on a vmlinux).
pub fn dedup_owned(mut btf: Btf, opts: &Options) -> Result<Btf, DedupError> {
    if opts.strings == StringMode::Dedup && !strings_already_unique(&btf) {
        if btf.offsets_deferred() {
            btf.build_offsets();
        }
        return dedup(&btf, opts);
    }
    let clock = Timer::new(opts.timings);
    let start = btf.start_id();
    let end = btf.type_count() + 1;
    if btf.offsets_deferred() && btf.base().is_none() && opts.base_index.is_none() {
        // The encoder's records, never given an offset column: laid out
        // straight into the packed form (the flat column would be 17 MiB
        // more at dedup's memory peak).
        let (words, marks, strtab, endian, base) = btf.into_parts_with_marks();
        let (nodes, state) = match pack_in_stretches(&words, end, &marks) {
            Some(packed) => check_packed(&words, end, !opts.ids_checked, packed)?,
            None => layout_walk(&words, end, !opts.ids_checked)?,
        };
        // what the encoder's last phases freed, before the links exist
        crate::heap::release_free_after(words.len() * 4);
        clock.lap("layout");
        let d = run_packed(Cow::Owned(words), nodes, state, start, end, None, &clock)?;
        return Ok(Btf::from_parts(d.0, d.1, strtab, endian, base));
    }
    if btf.offsets_deferred() {
        btf.build_offsets();
    }
    let (words, offs, strtab, endian, base) = btf.into_parts();
    let index = opts.base_index.as_deref().filter(|i| i.serves(base.as_ref()));
    let (words, nodes, state) = layout(
        base.as_ref(),
        Cow::Owned(offs),
        Cow::Owned(words),
        !opts.ids_checked,
        index,
    )?;
    clock.lap("layout");
    let d = run(words, nodes, state, start, end, index, &clock)?;
    Ok(Btf::from_parts(d.0, d.1, strtab, endian, base))
}

/// The passes after layout; returns the surviving records and their offsets.
fn run(
    words: Cow<'_, [u32]>,
    nodes: Vec<u32>,
    state: Vec<u8>,
    start: u32,
    end: u32,
    base_index: Option<&BaseIndex>,
    clock: &Timer,
) -> Result<(Vec<u32>, Vec<u32>), DedupError> {
    // packed before `link` exists: the flat offsets are the larger part
    let nodes = Offsets::new(nodes);
    let state = {
        let packed = States::pack(&state);
        drop(state);
        packed
    };
    // what layout freed (the flat offsets, its parallel scratch)
    crate::heap::release_free_after(words.len() * 4);
    run_packed(words, nodes, state, start, end, base_index, clock)
}

/// A standalone BTF's records laid out by one walk, straight into packed
/// offsets and state bits, then checked in parallel (see [`layout`] for what
/// is checked and set; the lowest malformed id is reported either way).
fn layout_walk(words: &[u32], end: u32, check_ids: bool) -> Result<(Offsets, States), DedupError> {
    let mut nodes = Offsets::growing();
    nodes.reserve(end as usize);
    let mut state = States::with_void(end);
    // void
    nodes.push(0);
    let mut off = 0usize;
    let mut flat: Option<Vec<u32>> = None;
    // the first id whose record does not fit in the words (the walk cannot
    // go past it), or one past the last
    let mut laid = end;
    for id in 1..end {
        let Some(len) = fitting_len(words, off) else {
            laid = id;
            break;
        };
        match &mut flat {
            None if nodes.push(off as u32) => {}
            // a 64-id block spanning 64 K words or more: the general packing
            None => {
                let mut f: Vec<u32> = (0..id).map(|i| nodes.get(i)).collect();
                f.reserve_exact(end as usize - f.len());
                f.push(off as u32);
                flat = Some(f);
            }
            Some(f) => f.push(off as u32),
        }
        if represents_itself(words[off..off + len].kind()) {
            state.set(id, ST_MAPPED);
        }
        off += len;
    }
    let nodes = flat.map_or(nodes, Offsets::new);
    let whole = laid == end && off == words.len();
    check_packed(
        words,
        end,
        check_ids,
        Packed {
            nodes,
            state,
            laid,
            whole,
        },
    )
}

/// Records laid out up to `laid` (the first that does not fit in the
/// words, or `end`); `whole` if they end exactly at the words' end.
struct Packed {
    nodes: Offsets,
    state: States,
    laid: u32,
    whole: bool,
}

/// Checks the laid-out records in parallel; the lowest malformed id is the
/// one reported (a record that does not fit counts at its own id).
fn check_packed(words: &[u32], end: u32, check_ids: bool, p: Packed) -> Result<(Offsets, States), DedupError> {
    use rayon::prelude::*;
    let Packed {
        nodes,
        state,
        laid,
        whole,
    } = p;
    let bad = (1..laid)
        .into_par_iter()
        .with_min_len(1 << 15)
        .filter(|&id| check_record(words, nodes.get(id) as usize, end, check_ids).is_none())
        .min();
    match bad {
        Some(id) => Err(bad_record(id)),
        None if laid < end => Err(bad_record(laid)),
        None if !whole => Err(bad_record(end - 1)),
        None => Ok((nodes, state)),
    }
}

/// [`layout_walk`]'s packing split at `marks` (where stretches of records
/// start, from the encoder) and run in parallel: each stretch fills the
/// blocks that start in it and the steps of its ids; the few ids of a block
/// begun in the stretch before get their steps afterwards. `None` when a
/// step does not fit (a 64-id block of 64 K words or more) or a record does
/// not fit or the marks do not describe the records: [`layout_walk`] then
/// does it all, and says which record is malformed.
fn pack_in_stretches(words: &[u32], end: u32, marks: &[(u32, usize)]) -> Option<Packed> {
    use rayon::prelude::*;
    const B: u32 = 64;
    let mut starts: Vec<(u32, usize)> = vec![(1, 0)];
    starts.extend(marks.iter().copied().filter(|&(id, _)| id > 1 && id < end));
    if starts.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1) {
        return None;
    }
    let mut step = vec![0u16; end as usize];
    let mut block = vec![0u32; (end as usize).div_ceil(B as usize)];
    // per stretch: ids, first block it owns, its slices of both columns
    let mut jobs = Vec::with_capacity(starts.len());
    let (mut step_rest, mut block_rest) = (&mut step[1..], &mut block[1..]);
    for (i, &(a, w)) in starts.iter().enumerate() {
        let b = starts.get(i + 1).map_or(end, |s| s.0);
        let (s, sr) = std::mem::take(&mut step_rest).split_at_mut((b - a) as usize);
        let (first_blk, last_blk) = (a.div_ceil(B).max(1), b.div_ceil(B));
        let (bl, br) = std::mem::take(&mut block_rest).split_at_mut((last_blk - first_blk) as usize);
        step_rest = sr;
        block_rest = br;
        jobs.push((a, b, w, first_blk, s, bl));
    }
    // fix-ups (id and offset of ids in a block begun before their stretch)
    // and VAR/DATASEC ids; None if a record does not fit or the stretch
    // does not end where the next begins
    type Stretch = Option<(Vec<(u32, u32)>, Vec<u32>)>;
    let out: Vec<Stretch> = jobs
        .into_par_iter()
        .zip(
            starts
                .par_iter()
                .skip(1)
                .map(|s| s.1)
                .chain(rayon::iter::once(words.len())),
        )
        .map(|((a, b, w, first_blk, s, bl), next)| {
            let (mut fix, mut mapped) = (Vec::new(), Vec::new());
            let mut off = w;
            let mut base = 0u32;
            for id in a..b {
                let len = fitting_len(words, off)?;
                let o = u32::try_from(off).ok()?;
                if id % B == 0 {
                    base = o;
                    bl[(id / B - first_blk) as usize] = o;
                }
                if id / B < first_blk {
                    fix.push((id, o));
                } else {
                    s[(id - a) as usize] = u16::try_from(o - base).ok()?;
                }
                if represents_itself(words[off..off + len].kind()) {
                    mapped.push(id);
                }
                off += len;
            }
            (off == next).then_some((fix, mapped))
        })
        .collect();
    let mut state = States::with_void(end);
    for r in out {
        let (fix, mapped) = r?;
        for (id, o) in fix {
            step[id as usize] = u16::try_from(o.checked_sub(block[(id / B) as usize])?).ok()?;
        }
        for id in mapped {
            state.set(id, ST_MAPPED);
        }
    }
    Some(Packed {
        nodes: Offsets::from_parts(block, step),
        state,
        laid: end,
        whole: true,
    })
}

/// [`run`] on offsets and states already packed.
fn run_packed(
    words: Cow<'_, [u32]>,
    nodes: Offsets,
    state: States,
    start: u32,
    end: u32,
    base_index: Option<&BaseIndex>,
    clock: &Timer,
) -> Result<(Vec<u32>, Vec<u32>), DedupError> {
    let link = {
        use rayon::prelude::*;
        (0..end).into_par_iter().collect()
    };
    let table = match base_index {
        Some(i) => i.table.clone(),
        None => CandTable::with_capacity(1 << 16),
    };
    let mut d = Dedup::new(&words, nodes, link, state, start, end, table, base_index);
    d.prep()?;
    clock.lap("prep");
    d.prim_types()?;
    clock.lap("primitives");
    d.struct_types()?;
    clock.lap("structs");
    let (survivors, nwords) = d.last_passes(clock)?;
    let Dedup { nodes, link, .. } = d;
    let out = compact(words, &nodes, &link, &survivors, nwords)?;
    clock.lap("compact+remap");
    Ok(out)
}

/// libbpf's signature hash of every own type, the value each pass looks its
/// candidates up by (for the `hot` micro-benchmark; dedup computes them as
/// it goes). Kinds dedup never hashes (VAR, DATASEC, unknown) give 0.
#[doc(hidden)]
pub fn signature_hashes(btf: &Btf) -> Vec<u64> {
    let (w, offs) = (btf.raw_words(), btf.type_offsets());
    offs.iter()
        // the prep pass's hash: the same per-kind choice every pass makes
        .map(|&o| prep_hash(rec_at(w, o), 0).ok().flatten().unwrap_or(0))
        .collect()
}

/// Builds the id-indexed state: record offsets, kinds and the initial map
/// (base types and VAR/DATASEC represent themselves, the rest unprocessed).
/// Own types are checked in parallel; the result does not depend on it. An
/// owned offset column becomes the offsets of all ids in place.
#[inline(never)]
#[allow(clippy::type_complexity)]
fn layout<'a>(
    base: Option<&'a std::sync::Arc<Btf>>,
    offs: Cow<'_, [u32]>,
    own: Cow<'a, [u32]>,
    check_ids: bool,
    index: Option<&BaseIndex>,
) -> Result<(Cow<'a, [u32]>, Vec<u32>, Vec<u8>), DedupError> {
    use rayon::prelude::*;
    let mut chain = Vec::new();
    let mut b = base;
    while let Some(x) = b {
        chain.push(&**x);
        b = x.base();
    }
    chain.reverse();
    let start = base.map_or(1, |b| b.type_count() as usize + 1);
    let end = start + offs.len();
    // void and every base type represent themselves
    let mut state: Vec<u8> = Vec::with_capacity(end);
    state.resize(start, ST_MAPPED);
    // the base part of the offsets (void first) and the shift of own records
    let mut head: Vec<u32> = vec![0];
    let (words, shift) = if let Some(ix) = index {
        // the base's records and offsets, checked when the index was built
        head = ix.nodes.clone();
        let mut all = Vec::with_capacity(ix.words.len() + own.len());
        all.extend_from_slice(&ix.words);
        all.extend_from_slice(&own);
        (Cow::Owned(all), ix.words.len() as u32)
    } else if chain.is_empty() {
        (own, 0u32)
    } else {
        let mut all = Vec::with_capacity(chain.iter().map(|b| b.raw_words().len()).sum::<usize>() + own.len());
        for b in &chain {
            let w0 = all.len() as u32;
            all.extend_from_slice(b.raw_words());
            for &o in b.type_offsets() {
                if check_record(&all, (o + w0) as usize, end as u32, check_ids).is_none() {
                    return Err(bad_record(head.len() as u32));
                }
                head.push(o + w0);
            }
        }
        let shift = all.len() as u32;
        all.extend_from_slice(&own);
        (Cow::Owned(all), shift)
    };
    debug_assert_eq!(head.len(), start);
    let mut nodes = offs.into_owned();
    // exact: a doubling here would be 17 MB on a vmlinux, at the peak
    nodes.reserve_exact(head.len());
    nodes.splice(0..0, head);
    const CHUNK: usize = 1 << 15;
    if shift != 0 {
        nodes[start..]
            .par_iter_mut()
            .with_min_len(CHUNK)
            .for_each(|o| *o += shift);
    }
    let w: &[u32] = &words;
    // the lowest id of a malformed record, if any (deterministic at any thread count)
    let bad = std::sync::atomic::AtomicU32::new(u32::MAX);
    state.par_extend(
        nodes[start..]
            .par_iter()
            .enumerate()
            .with_min_len(CHUNK)
            .map(|(i, &off)| {
                if check_record(w, off as usize, end as u32, check_ids).is_none() {
                    bad.fetch_min((start + i) as u32, std::sync::atomic::Ordering::Relaxed);
                    return ST_MAPPED;
                }
                if represents_itself(Info(w[off as usize + 1]).kind()) {
                    ST_MAPPED
                } else {
                    ST_UNPROCESSED
                }
            }),
    );
    match bad.into_inner() {
        u32::MAX => Ok((words, nodes, state)),
        id => Err(bad_record(id)),
    }
}

fn bad_record(id: u32) -> DedupError {
    DedupError::Invalid {
        id,
        what: "record runs past the type data or references an id past the last type",
    }
}

/// The length of the record at `off` if it lies inside `w` and (with
/// `check_ids`) every type id it holds is below `end`. The reader guarantees
/// both for parsed BTF; this keeps BTF built through the API from making
/// dedup index out of bounds.
#[inline(always)]
fn check_record(w: &[u32], off: usize, end: u32, check_ids: bool) -> Option<usize> {
    let info = *w.get(off + 1)?;
    let len = Info(info).len();
    let r = w.get(off..off + len)?;
    let mut ok = true;
    if check_ids {
        ok = ids_below(r, end);
    } else if r.kind() == FWD {
        // libbpf's id iterator counts a FWD's size/type word, which the
        // reader does not check (it is no reference in BTF): compaction
        // renumbers it, so an id past the end must be refused here.
        ok = r[2] < end;
    }
    ok.then_some(len)
}

/// libbpf marks strings as already deduplicated when the own string section
/// is empty (split) or just the empty string (standalone) on first change.
fn strings_already_unique(btf: &Btf) -> bool {
    let n = btf.raw_strings().len();
    n == 0 || (btf.base().is_none() && n == 1)
}

/// The string pass: a new table with `""` (standalone only) and then every
/// referenced string in id order, record order; base strings keep base offsets.
fn dedup_strings(btf: &Btf) -> (Vec<u32>, StrTab) {
    let mut words = btf.raw_words().to_vec();
    let start_str = btf.start_str_off();
    let mut tab = match btf.base() {
        Some(b) => StrTab::new_split(start_str, b.clone()),
        None => StrTab::new_base(),
    };
    let offs = btf.type_offsets();
    // Old own offset -> new offset (0: not seen). A string is interned once
    // however many records name it (a vmlinux: 12 M references, 2 MB of
    // strings), and interning is idempotent, so the result is the same.
    let mut memo = vec![0u32; btf.raw_strings().len()];
    for (i, &s) in offs.iter().enumerate() {
        let e = offs.get(i + 1).map(|&e| e as usize).unwrap_or(words.len());
        Btf::for_each_str_ref_mut(&mut words[s as usize..e], |off| {
            if *off == 0 || *off < start_str {
                return;
            }
            let slot = memo.get_mut((*off - start_str) as usize);
            if let Some(&m) = slot.as_deref()
                && m != 0
            {
                *off = m;
                return;
            }
            let s = btf.str_at(crate::btf::StrOff(*off)).unwrap_or(b"");
            // `intern` looks in the base first, then the new table: libbpf's order.
            let new = tab.intern(s);
            if let Some(m) = slot {
                *m = new;
            }
            *off = new;
        });
    }
    (words, tab)
}

/// Whether word `pos` of a record of kind `k` is a type id that libbpf's
/// reference pass rewrites to its canonical id.
#[inline]
fn is_ref_pos(k: u32, pos: usize) -> bool {
    match k {
        ARRAY => pos == 3 || pos == 4,
        FUNC_PROTO => pos == 2 || (pos >= 4 && pos.is_multiple_of(2)),
        _ => pos == 2,
    }
}

/// `map` as `resolve` reads it, per id: the id itself unless mapped.
trait Links {
    fn get(&self, id: u32) -> u32;
    fn set(&mut self, id: u32, to: u32);
    /// libbpf's first test of a pair: both ends resolve to the same type.
    #[inline(always)]
    fn settled(&self, c: u32, k: u32) -> bool
    where
        Self: Sized,
    {
        resolve_in(self, c) == resolve_in(self, k)
    }
    /// Whether a walk compared a type whose link goes through `f`.
    fn touched_through(&self, _f: u32) -> bool {
        false
    }
}

impl Links for Vec<u32> {
    #[inline(always)]
    fn get(&self, id: u32) -> u32 {
        self[id as usize]
    }
    #[inline(always)]
    fn set(&mut self, id: u32, to: u32) {
        self[id as usize] = to;
    }
}

/// The link column of dedup's chunked passes ([`Incremental`]): a link per
/// id, the ids of enum forward declarations tagged with [`ENUM_FWD`] (type
/// ids are below 2^31), and which of those a walk compared by their links.
/// The tag rides on the word the walk loads anyway: a separate bit column
/// cost 0.33 G instructions on a vmlinux, which has ten enum fwds.
#[derive(Default)]
struct TrackedLinks {
    link: Vec<u32>,
    touched: std::cell::RefCell<hashbrown::HashSet<u32>>,
}

/// The tag of an enum forward declaration's link ([`TrackedLinks`]).
const ENUM_FWD: u32 = 1 << 31;

impl TrackedLinks {
    /// Room for `n` more ids.
    fn reserve(&mut self, n: usize) {
        incremental::reserve_step(&mut self.link, n);
    }

    fn push(&mut self, id: u32, enum_fwd: bool) {
        debug_assert_eq!(id as usize, self.link.len());
        self.link.push(if enum_fwd { id | ENUM_FWD } else { id });
    }

    #[cold]
    fn note_touched(&self, c: u32, k: u32) {
        let mut t = self.touched.borrow_mut();
        for id in [c, k] {
            if self.link[id as usize] & ENUM_FWD != 0 {
                t.insert(id);
            }
        }
    }

    /// The plain link column (tags dropped).
    fn into_column(self) -> Vec<u32> {
        let mut link = self.link;
        for l in &mut link {
            *l &= !ENUM_FWD;
        }
        link
    }
}

impl Links for TrackedLinks {
    #[inline(always)]
    fn get(&self, id: u32) -> u32 {
        self.link[id as usize] & !ENUM_FWD
    }
    #[inline(always)]
    fn set(&mut self, id: u32, to: u32) {
        let l = &mut self.link[id as usize];
        *l = to | (*l & ENUM_FWD);
    }
    /// Also notes the enum fwds among `c` and `k` (see [`Incremental`]).
    #[inline(always)]
    fn settled(&self, c: u32, k: u32) -> bool {
        let (lc, lk) = (self.link[c as usize], self.link[k as usize]);
        if (lc | lk) & ENUM_FWD != 0 {
            self.note_touched(c, k);
        }
        let (lc, lk) = (lc & !ENUM_FWD, lk & !ENUM_FWD);
        let rc = if lc == c { c } else { resolve_in(self, lc) };
        let rk = if lk == k { k } else { resolve_in(self, lk) };
        rc == rk
    }
    fn touched_through(&self, f: u32) -> bool {
        self.touched.borrow().iter().any(|&x| x == f || self.get(x) == f)
    }
}

/// Follows canonical links to the end of the chain.
#[inline(always)]
fn resolve_in<L: Links>(link: &L, mut id: u32) -> u32 {
    loop {
        let m = link.get(id);
        if m == id {
            return id;
        }
        id = m;
    }
}

/// A pair waiting on the walk's stack, with where its two records start
/// (looked up once, when it is queued, for the prefetch; [`NO_REC`] for
/// void or an id the offsets do not cover, which the step looks up again).
#[derive(Clone, Copy)]
pub(super) struct Queued {
    c: u32,
    k: u32,
    oc: u32,
    ok: u32,
}

/// [`Queued`]'s offset of a record it did not look up.
const NO_REC: u32 = u32::MAX;

/// The record of a queued id.
#[inline(always)]
fn rec_queued<'w>(words: &'w [u32], nodes: &Offsets, id: u32, off: u32) -> &'w [u32] {
    if off != NO_REC {
        &words[off as usize..]
    } else {
        rec_from(words, nodes, id)
    }
}

/// Queues a pair for the equivalence walk, unless it is settled already.
/// `map` does not change during one walk, so a pair whose ends resolve to the
/// same type would return "equivalent" without side effects when popped. So
/// would a pair the hypothetical map already holds: its canonical side is a
/// key, so it is not a FWD that resolves elsewhere, and entries are never
/// removed during a walk (half of a vmlinux's 18.8 M walk steps were such
/// repeats, each reading a canonical-side record first).
#[inline(always)]
fn push_pair<L: Links>(st: &mut Vec<Queued>, w: Walked<'_, L>, c: u32, k: u32) {
    // The map first: its pages stay in cache, the links are two loads
    // anywhere in the id space, and it answers more pushes (8.1 M against
    // 6.4 M settled of 25.2 M in a vmlinux).
    if w.hypot.get(k) != Some(c) && !w.link.settled(c, k) {
        // Its step reads both records: ask for them now, so that the
        // misses of a struct's members overlap instead of coming one by one,
        // and keep where they are for the step.
        let oc = offset_of(w, c);
        let ok = offset_of(w, k);
        st.push(Queued { c, k, oc, ok });
    }
}

/// Where `id`'s record starts ([`NO_REC`] for void or a stray id), asking
/// the CPU for its cache line.
#[inline(always)]
fn offset_of<L>(w: Walked<'_, L>, id: u32) -> u32 {
    match w.nodes.try_get(id) {
        Some(at) if id != 0 && (at as usize) < w.words.len() => {
            prefetch(w.words, at);
            at
        }
        _ => NO_REC,
    }
}

/// What [`push_pair`] reads besides the stack.
struct Walked<'d, L> {
    words: &'d [u32],
    nodes: &'d Offsets,
    link: &'d L,
    hypot: &'d HypotMap,
}

impl<L> Clone for Walked<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<L> Copy for Walked<'_, L> {}

/// Asks the CPU for the cache line of `words[at]` (`at` is in bounds).
#[inline(always)]
fn prefetch(words: &[u32], at: u32) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        debug_assert!((at as usize) < words.len());
        // SAFETY: a prefetch only hints the cache, and `at` is in bounds.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(words.as_ptr().add(at as usize).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (words, at);
}

/// A walk of the chunked passes read a record cut down to a stub
/// ([`stub::stub_deferred`]): they give up.
#[cold]
fn stub_reached(a: u32, b: u32) -> DedupError {
    DedupError::Invalid {
        id: a.min(b),
        what: "a struct walk reached a record stubbed after an earlier chunk",
    }
}

impl<'a, L: Links> Dedup<'a, L> {
    /// The state before the first pass: one walk's scratch, nothing noted.
    #[allow(clippy::too_many_arguments)]
    fn new(
        words: &'a [u32],
        nodes: Offsets,
        link: L,
        state: States,
        start: u32,
        end: u32,
        table: CandTable,
        base_index: Option<&'a BaseIndex>,
    ) -> Self {
        Dedup {
            base_index,
            words,
            nodes,
            link,
            state,
            start,
            end,
            hypot: HypotMap::new(),
            adjust_canon: false,
            table,
            eq_stack: Vec::new(),
            enum_fwds: Default::default(),
            enums: Default::default(),
            overlap: false,
            give_up: None,
            struct_done: 0,
            spare_hypot: HypotMap::default(),
        }
    }

    #[inline]
    fn resolve(&self, id: u32) -> u32 {
        resolve_in(&self.link, id)
    }

    #[inline]
    fn kind_of(&self, id: u32) -> u32 {
        if id == 0 {
            return 0;
        }
        Info(self.words[self.nodes.get(id) as usize + 1]).kind()
    }

    /// libbpf's `map[id] <= BTF_MAX_NR_TYPES`.
    #[inline]
    fn mapped(&self, id: u32) -> bool {
        self.state.get(id) == ST_MAPPED
    }

    fn set_map(&mut self, id: u32, to: u32) {
        self.state.set(id, ST_MAPPED);
        self.link.set(id, to);
    }

    #[inline(never)]
    fn prep(&mut self) -> Result<(), DedupError> {
        if self.base_index.is_some() {
            // the index's table is this pass's result, cloned in `run`
            return Ok(());
        }
        for id in 1..self.start {
            if let Some(h) = prep_hash(rec!(self, id), id)? {
                self.table.insert(h, id);
            }
        }
        Ok(())
    }

    fn add_canonical(&mut self, h: u64, id: u32) {
        self.table.insert(h, id);
    }

    fn prim_types(&mut self) -> Result<(), DedupError> {
        self.prim_types_in(self.start, self.end)
    }

    #[inline(never)]
    fn prim_types_in(&mut self, from: u32, to: u32) -> Result<(), DedupError> {
        for id in from..to {
            let (h, new) = match self.kind_of(id) {
                CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | ARRAY | STRUCT | UNION | FUNC | FUNC_PROTO | VAR
                | DATASEC | DECL_TAG | TYPE_TAG => continue,
                INT => {
                    let w = rec!(self, id);
                    let h = hash_int_tag(w);
                    (h, self.first_match(h, |c| equal_int_tag(w, c)))
                }
                FWD | FLOAT => {
                    let w = rec!(self, id);
                    let h = hash_common(w);
                    (h, self.first_match(h, |c| equal_common(w, c)))
                }
                ENUM | ENUM64
                    if self.start == 1 && rec!(self, id).vlen() > 0 && !self.enum_fwds.contains(&rec!(self, id)[0]) =>
                {
                    // Fast path, same result: no enum fwd shares the name, so
                    // the walk could only stop at an equal candidate, and
                    // without a base canonical enums are pairwise unequal —
                    // there is at most one, found here by content.
                    let w = rec!(self, id);
                    let h = hash_enum(w);
                    let ch = content_hash(w);
                    let (words, nodes) = (&self.words, &self.nodes);
                    let found = self.enums.find(ch, |&e| rec_of(words, nodes, e) == w).copied();
                    if found.is_none() {
                        self.enums
                            .insert_unique(ch, id, |&e| content_hash(rec_of(words, nodes, e)));
                    }
                    (h, found)
                }
                ENUM | ENUM64 => {
                    let w = rec!(self, id);
                    let h = hash_enum(w);
                    if w.vlen() == 0 {
                        self.enum_fwds.insert(w[0]);
                    }
                    let mut found = None;
                    let mut cur = self.table.first(h);
                    while let Some((cand, c)) = cur {
                        let cw = rec!(self, cand);
                        if equal_enum(w, cw) {
                            found = Some(cand);
                            break;
                        }
                        if compat_enum(w, cw) {
                            if is_enum_fwd(w) {
                                found = Some(cand);
                                break;
                            }
                            // a full enum re-points a canonical enum fwd and keeps looking
                            if self.overlap && cand < self.struct_done && self.link.touched_through(cand) {
                                // A walk since the fwd's CU compared a type by
                                // its link through it; the whole-BTF struct
                                // pass saw this re-pointing done.
                                self.give_up =
                                    Some("an enum forward declaration compared in a walk was re-pointed later");
                                return Ok(());
                            }
                            self.state.set(cand, ST_MAPPED);
                            self.link.set(cand, id);
                        }
                        cur = self.table.next(c);
                    }
                    if found.is_none() && w.vlen() > 0 && self.start == 1 {
                        let ch = content_hash(w);
                        let (words, nodes) = (&self.words, &self.nodes);
                        self.enums
                            .insert_unique(ch, id, |&e| content_hash(rec_of(words, nodes, e)));
                    }
                    (h, found)
                }
                _ => {
                    return Err(DedupError::Invalid {
                        id,
                        what: "unknown kind",
                    });
                }
            };
            let target = new.unwrap_or(id);
            self.set_map(id, target);
            if target == id {
                self.add_canonical(h, id);
            }
        }
        Ok(())
    }

    /// First candidate under `h`, in table order, that `eq` accepts.
    #[inline]
    fn first_match(&self, h: u64, eq: impl Fn(&[u32]) -> bool) -> Option<u32> {
        let mut cur = self.table.first(h);
        while let Some((cand, c)) = cur {
            if eq(rec!(self, cand)) {
                return Some(cand);
            }
            cur = self.table.next(c);
        }
        None
    }

    fn identical_arrays(&self, a: u32, b: u32) -> bool {
        let (x, y) = (rec!(self, a), rec!(self, b));
        x.kind() == ARRAY && y.kind() == ARRAY && equal_array(x, y)
    }

    fn identical_ptrs(&self, a: u32, b: u32) -> bool {
        let (x, y) = (rec!(self, a), rec!(self, b));
        x.kind() == PTR && y.kind() == PTR && x[2] == y[2]
    }

    /// Structs equal down to raw member ids (or identical arrays/structs there).
    fn identical_structs(&self, a: u32, b: u32, depth: u32) -> Result<bool, DedupError> {
        if depth > MAX_EMBED_DEPTH {
            return Err(DedupError::TooDeep {
                id: a,
                depth: MAX_EMBED_DEPTH,
            });
        }
        let (x, y) = (rec!(self, a), rec!(self, b));
        if self.overlap && stub::either_is_stub(x, y) {
            return Err(stub_reached(a, b));
        }
        if !is_composite(x.kind()) || x.kind() != y.kind() || !shallow_equal_struct(x, y) {
            return Ok(false);
        }
        for (m1, m2) in x[3..].chunks_exact(3).zip(y[3..].chunks_exact(3)) {
            if m1[1] != m2[1]
                && !self.identical_arrays(m1[1], m2[1])
                && !self.identical_structs(m1[1], m2[1], depth + 1)?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn clear_hypot(&mut self) {
        self.hypot.clear();
        self.adjust_canon = false;
    }

    /// libbpf's `btf_dedup_is_equiv`, walking pairs from an explicit stack in
    /// the recursion's pre-order.
    #[inline(never)]
    fn is_equiv(&mut self, cand: u32, canon: u32) -> Result<bool, DedupError> {
        self.eq_stack.clear();
        let w = Walked {
            words: self.words,
            nodes: &self.nodes,
            link: &self.link,
            hypot: &self.hypot,
        };
        push_pair(&mut self.eq_stack, w, cand, canon);
        while let Some(q) = self.eq_stack.pop() {
            if !self.equiv_step(q)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One node of the walk: `false` ends the check as "not equivalent";
    /// children to compare are pushed onto `eq_stack`. Every pair on the stack
    /// went through [`push_pair`], so libbpf's first test (both ends resolve
    /// to the same type) is known to fail here.
    #[inline]
    fn equiv_step(&mut self, q: Queued) -> Result<bool, DedupError> {
        let Queued { c, k, oc, ok } = q;
        // resolve_fwd, fused with reading the record the step needs anyway.
        // A key of the hypothetical map is never a FWD that resolves
        // elsewhere, so one look-up with the resolved id answers both "is
        // this canonical type mapped already" and "record it" (almost every
        // popped pair is new: the queue drops pairs the map holds).
        let mut kw = rec_queued(self.words, &self.nodes, k, ok);
        let mut k = k;
        if kw.kind() == FWD {
            let r = self.resolve(k);
            let rw = rec_from(self.words, &self.nodes, r);
            if rw.kind() != FWD {
                (k, kw) = (r, rw);
            }
        }
        let cw = rec_queued(self.words, &self.nodes, c, oc);
        if self.overlap && stub::either_is_stub(cw, kw) {
            return Err(stub_reached(c, k));
        }
        let (ck, kk) = (cw.kind(), kw.kind());
        // what the merge after a successful walk looks at (see merge_hypot)
        let mark = match (ck == FWD || kk == FWD, is_composite(ck)) {
            (true, _) => Mark::Fwd,
            (false, true) => Mark::Composites,
            (false, false) => Mark::No,
        };
        let hit = self.hypot.get_or_insert_marked(k, c, mark);
        if let Some(h) = hit {
            if h == c {
                return Ok(true);
            }
            return Ok(self.identical_arrays(h, c) || self.identical_structs(h, c, 0)? || self.identical_ptrs(h, c));
        }

        if cw[0] != kw[0] {
            return Ok(false);
        }
        if (ck == FWD || kk == FWD) && ck != kk {
            let fwd_kind = |w: &[u32]| if w.kflag() { UNION } else { STRUCT };
            let (real, fwd) = if ck == FWD {
                (kk, fwd_kind(cw))
            } else {
                let fwd = fwd_kind(kw);
                if fwd == ck && k < self.start {
                    // equivalence would need the immutable base FWD resolved
                    self.adjust_canon = true;
                }
                (ck, fwd)
            };
            return Ok(fwd == real);
        }
        if ck != kk {
            return Ok(false);
        }
        let st = &mut self.eq_stack;
        let w = Walked {
            words: self.words,
            nodes: &self.nodes,
            link: &self.link,
            hypot: &self.hypot,
        };
        match ck {
            INT => Ok(equal_int_tag(cw, kw)),
            ENUM | ENUM64 => Ok(compat_enum(exact(cw), exact(kw))),
            FWD | FLOAT => Ok(equal_common(cw, kw)),
            CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG => {
                if cw[1] != kw[1] {
                    return Ok(false);
                }
                push_pair(st, w, cw[2], kw[2]);
                Ok(true)
            }
            ARRAY => {
                if !(equal_common(cw, kw) && cw[5] == kw[5]) {
                    return Ok(false);
                }
                // index type first, then element type
                push_pair(st, w, cw[3], kw[3]);
                push_pair(st, w, cw[4], kw[4]);
                Ok(true)
            }
            STRUCT | UNION => {
                // libbpf's shallow comparison (common part, then member names
                // and offsets) fused with queuing the member pairs: on a
                // mismatch the walk ends and whatever was queued is dropped.
                if !equal_common(cw, kw) {
                    return Ok(false);
                }
                // A member pair equal to the one before it would be popped
                // after that one's whole walk and answer "equivalent" from
                // the hypothetical map without side effects: skip it.
                // Queued first to last, then turned around so the first member
                // pops first, as in libbpf's recursion (equal info: equal
                // lengths).
                let n = cw.vlen();
                let (cm, km) = (&cw[3..3 + 3 * n], &kw[3..3 + 3 * n]);
                let from = st.len();
                let mut prev = (u32::MAX, u32::MAX);
                for (a, b) in cm.chunks_exact(3).zip(km.chunks_exact(3)) {
                    if a[0] != b[0] || a[2] != b[2] {
                        return Ok(false);
                    }
                    if (a[1], b[1]) != prev {
                        prev = (a[1], b[1]);
                        push_pair(st, w, a[1], b[1]);
                    }
                }
                st[from..].reverse();
                Ok(true)
            }
            FUNC_PROTO => {
                if !compat_fnproto(exact(cw), exact(kw)) {
                    return Ok(false);
                }
                // as for struct members, a repeat of the previous pair (the
                // return type's for the first parameter) is settled
                let n = cw.vlen();
                let (cp, kp) = (&cw[3..3 + 2 * n], &kw[3..3 + 2 * n]);
                let from = st.len();
                let mut prev = (cw[2], kw[2]);
                for (a, b) in cp.chunks_exact(2).zip(kp.chunks_exact(2)) {
                    if (a[1], b[1]) != prev {
                        prev = (a[1], b[1]);
                        push_pair(st, w, a[1], b[1]);
                    }
                }
                st[from..].reverse();
                push_pair(st, w, cw[2], kw[2]);
                Ok(true)
            }
            _ => Err(DedupError::Invalid {
                id: c,
                what: "struct equivalence reached a VAR, DATASEC or DECL_TAG",
            }),
        }
    }

    #[inline(never)]
    fn merge_hypot(&mut self) {
        // Only called after a successful walk, where every recorded pair
        // passed its kind test: equal kinds, or a FWD against a struct or
        // union. A pair whose candidate side is neither FWD nor composite
        // therefore has a reference type (never mapped during this pass) or a
        // primitive on both sides, and none of the rules below fires. The
        // walk marked the others when it read the candidate's record.
        //
        // A struct or union only ever links to a struct or union (a FWD
        // links to one of those or to a FWD), so a pair the walk read as two
        // composites still is one here, wherever its ends link by now. Of the
        // three rules only the last can fire for it, and only if the
        // candidate's end is not mapped yet: two loads of the candidate's CU
        // decide most pairs, where reading both records took two misses.
        for i in 0..self.hypot.len() {
            let Some((k, c, fwd_side)) = self.hypot.marked_pair(i) else {
                continue;
            };
            let t_id = self.resolve(c);
            if !fwd_side {
                debug_assert!(is_composite(self.kind_of(t_id)) && is_composite(self.kind_of(self.resolve(k))));
                if self.adjust_canon || self.mapped(t_id) {
                    continue;
                }
                let c_id = self.resolve(k);
                if self.mapped(c_id) {
                    self.set_map(t_id, c_id);
                }
                continue;
            }
            let c_id = self.resolve(k);
            let t_kind = self.kind_of(t_id);
            let c_kind = self.kind_of(c_id);
            if t_kind != FWD && c_kind == FWD {
                self.set_map(c_id, t_id);
            }
            if self.adjust_canon {
                continue;
            }
            if t_kind == FWD && c_kind != FWD {
                self.set_map(t_id, c_id);
            }
            if is_composite(t_kind) && c_kind != FWD && self.mapped(c_id) && !self.mapped(t_id) {
                self.set_map(t_id, c_id);
            }
        }
    }

    fn struct_types(&mut self) -> Result<(), DedupError> {
        self.struct_types_in(self.start, self.end)
    }

    #[inline(never)]
    fn struct_types_in(&mut self, from: u32, to: u32) -> Result<(), DedupError> {
        for id in from..to {
            if !is_composite(self.kind_of(id)) || self.mapped(id) {
                continue;
            }
            let w = rec_of(self.words, &self.nodes, id);
            let h = hash_struct(w);
            let mut new = id;
            let mut cur = self.table.first(h);
            while let Some((cand, c)) = cur {
                cur = self.table.next(c);
                // guards against a colliding FWD, which is_equiv would accept
                if !shallow_equal_struct(w, rec!(self, cand)) {
                    continue;
                }
                self.clear_hypot();
                if !self.is_equiv(id, cand)? {
                    continue;
                }
                if self.overlap {
                    // The order of equal keys in the whole-BTF table depends
                    // on how many primitives later CUs add: the choice
                    // stands only if no other candidate passes. A failed
                    // walk changes nothing but the hypothetical map.
                    if new != id {
                        self.give_up = Some("a struct matched two candidates");
                        return Ok(());
                    }
                    new = cand;
                    std::mem::swap(&mut self.hypot, &mut self.spare_hypot);
                    continue;
                }
                self.merge_hypot();
                if self.adjust_canon {
                    continue;
                }
                new = cand;
                break;
            }
            if self.overlap && new != id {
                std::mem::swap(&mut self.hypot, &mut self.spare_hypot);
                self.merge_hypot();
                self.spare_hypot.clear();
            }
            self.set_map(id, new);
            if new == id {
                self.add_canonical(h, id);
            }
        }
        self.struct_done = to;
        Ok(())
    }
}

impl Dedup<'_> {
    /// The reference pass ([`refpass`]): with its own index when there is
    /// no base, else through libbpf's candidate table.
    #[inline(never)]
    fn ref_types(&mut self) -> Result<(), DedupError> {
        let lookup = if self.start == 1 && !refindex::forced_off() {
            // nothing looks the table up any more: its memory goes to the
            // index (at dedup's peak)
            self.table = CandTable::EMPTY;
            refpass::Lookup::Index(refindex::RefIndex::default())
        } else {
            refpass::Lookup::Table {
                table: &mut self.table,
                start: self.start,
            }
        };
        refpass::run(
            self.words,
            &self.nodes,
            &mut self.link,
            &mut self.state,
            lookup,
            self.start,
            self.end,
        )
    }

    /// The passes after the struct pass: FWDs, references, and the final
    /// links; returns the surviving own ids and their words.
    fn last_passes(&mut self, clock: &Timer) -> Result<(Vec<u32>, usize), DedupError> {
        // the struct pass's scratch (a megabyte or more after its largest
        // walk) is not needed any more, at dedup's memory peak
        self.hypot = HypotMap::new();
        self.spare_hypot = HypotMap::new();
        self.eq_stack = Vec::new();
        self.resolve_fwds();
        clock.lap("fwds");
        self.ref_types()?;
        clock.lap("refs");
        Ok(self.final_links())
    }

    /// libbpf's FWD pass: a canonical FWD that nothing resolved goes to the
    /// only canonical struct or union of its name, if there is one (and of
    /// its kind). Neither part depends on order (a name met twice is
    /// ambiguous whichever comes first; each FWD is decided alone), so both
    /// scan the ids in parallel.
    #[inline(never)]
    fn resolve_fwds(&mut self) {
        // name_off -> the only canonical struct/union with it, or 0 if several
        let (mut names, first) = match self.base_index {
            // base structs and unions stay canonical: they never get mapped
            Some(i) => (i.composite_names.clone(), self.start),
            None => (hashbrown::HashMap::new(), 1),
        };
        let (words, nodes, link, state) = (self.words, &self.nodes, &self.link, &self.state);
        let canonical = |id: u32| state.get(id) == ST_MAPPED && link[id as usize] == id;
        // Canonical first: the state bits and links are read in order and
        // only about one type in forty is canonical, so the records (160 MB
        // on a vmlinux) are not streamed through.
        let composites = in_stretches(first, self.end, |ids, out| {
            for id in ids.filter(|&id| canonical(id)) {
                let w = rec_from(words, nodes, id);
                if is_composite(w.kind()) {
                    out.push((w[0], id));
                }
            }
        });
        for (name, id) in composites {
            names.entry(name).and_modify(|v| *v = 0).or_insert(id);
        }
        let resolved = in_stretches(self.start, self.end, |ids, out| {
            for id in ids.filter(|&id| canonical(id)) {
                let w = rec_from(words, nodes, id);
                if w.kind() != FWD {
                    continue;
                }
                let Some(&cand) = names.get(&w[0]).filter(|&&c| c != 0) else {
                    continue;
                };
                let ck = rec_from(words, nodes, cand).kind();
                let union = w.kflag();
                if (ck == STRUCT && !union) || (ck == UNION && union) {
                    out.push((id, cand));
                }
            }
        });
        for (id, cand) in resolved {
            self.set_map(id, cand);
        }
    }

    /// Turns `link` into old id -> new id (libbpf reuses its hypothetical
    /// map for this): first every link points straight at its canonical
    /// type, then each survivor's own link holds its new id, tagged with
    /// [`NEW`] so a lookup through a non-survivor can tell "new id" from
    /// "canonical old id". Returns the surviving own ids and their words.
    /// The first part runs over stretches of ids in parallel: a link is
    /// rewritten only by its own stretch, and whether a reader following it
    /// sees it before or after, it ends at the same canonical type.
    #[inline(never)]
    fn final_links(&mut self) -> (Vec<u32>, usize) {
        let (start, end) = (self.start, self.end);
        let (words, nodes, state) = (self.words, &self.nodes, &self.state);
        let link = shared_u32(&mut self.link);
        // the survivors with their lengths
        let kept = in_stretches(0, end, |ids, out| {
            for id in ids {
                let l = link[id as usize].load(Relaxed);
                if id >= start && l == id && state.get(id) == ST_MAPPED {
                    out.push((id, Info(words[nodes.get(id) as usize + 1]).len()));
                } else if l != id {
                    link[id as usize].store(resolve_shared(link, l), Relaxed);
                }
            }
        });
        let nwords = kept.iter().map(|&(_, len)| len).sum();
        let survivors: Vec<u32> = kept.into_iter().map(|(id, _)| id).collect();
        // base types keep their ids
        for id in 0..start {
            if self.link[id as usize] == id {
                self.link[id as usize] = id | NEW;
            }
        }
        for (i, &id) in survivors.iter().enumerate() {
            self.link[id as usize] = (start + i as u32) | NEW;
        }
        (survivors, nwords)
    }
}

/// What `f` pushes for the ids of `from..to`, in id order, from stretches
/// of ids scanned in parallel: `f` gets a stretch and loops over it itself
/// (called per id, it was not inlined: 85 against 40 ms for the FWD pass).
/// A stretch may also rewrite what belongs to its own ids (the final links).
fn in_stretches<T: Send>(from: u32, to: u32, f: impl Fn(std::ops::Range<u32>, &mut Vec<T>) + Sync) -> Vec<T> {
    use rayon::prelude::*;
    const STRETCH: u32 = 1 << 16;
    let parts: Vec<Vec<T>> = (from / STRETCH..to.div_ceil(STRETCH))
        .into_par_iter()
        .map(|s| {
            let mut out = Vec::new();
            f((s * STRETCH).max(from)..((s + 1) * STRETCH).min(to), &mut out);
            out
        })
        .collect();
    parts.into_iter().flatten().collect()
}

/// `v` as atomics, for threads that each write their own elements.
fn shared_u32(v: &mut [u32]) -> &[std::sync::atomic::AtomicU32] {
    use std::sync::atomic::AtomicU32;
    const { assert!(std::mem::align_of::<AtomicU32>() == std::mem::align_of::<u32>()) };
    // SAFETY: AtomicU32 has the size and bit validity of u32 and (asserted
    // above) its alignment; `v` is borrowed exclusively for as long as the
    // view lives, so every access meanwhile goes through the atomics.
    unsafe { &*(v as *mut [u32] as *const [AtomicU32]) }
}

/// Follows links shared by threads to the end of the chain ([`resolve_in`]
/// on a [`shared_u32`] view): a link another thread rewrites meanwhile
/// points further along the same chain.
#[inline]
fn resolve_shared(link: &[std::sync::atomic::AtomicU32], mut id: u32) -> u32 {
    loop {
        let m = link[id as usize].load(Relaxed);
        if m == id {
            return id;
        }
        id = m;
    }
}

/// Tags a final link as a new id (see [`Dedup::final_links`]).
const NEW: u32 = 1 << 31;

/// The new id of `id` from the final links; above `MAX_ID` if its canonical
/// type did not survive.
#[inline]
fn new_id(link: &[u32], id: u32) -> u32 {
    let l = link[id as usize];
    if l & NEW != 0 {
        return l & !NEW;
    }
    let c = link[l as usize];
    if c & NEW != 0 { c & !NEW } else { u32::MAX }
}

/// Rewrites the type ids of `rec` (a survivor's record, already in its
/// output place) to new ids; `false` if one has no surviving representative.
#[inline]
fn renumber(rec: &mut [u32], link: &[u32]) -> bool {
    let mut pos: smallvec::SmallVec<[usize; 16]> = smallvec::SmallVec::new();
    for_each_id_pos(rec, |p| pos.push(p));
    for p in pos {
        let n = new_id(link, rec[p]);
        if n > MAX_ID {
            return false;
        }
        rec[p] = n;
    }
    true
}

/// The survivors' records with their ids renumbered, and their offsets.
#[inline(never)]
fn compact(
    mut words: Cow<'_, [u32]>,
    nodes: &Offsets,
    link: &[u32],
    survivors: &[u32],
    nwords: usize,
) -> Result<(Vec<u32>, Vec<u32>), DedupError> {
    // Owned records are compacted in place: survivors keep their order, so
    // each record moves to or below where it was and never over one not yet
    // moved. That saves the output's allocation at dedup's memory peak.
    let (mut out, in_place) = match &mut words {
        Cow::Owned(w) => (std::mem::take(w), true),
        Cow::Borrowed(_) => (Vec::with_capacity(nwords), false),
    };
    let mut offs = Vec::with_capacity(survivors.len());
    let mut at = 0usize;
    for &id in survivors {
        let off = nodes.get(id) as usize;
        let len = if in_place {
            let len = Info(out[off + 1]).len();
            out.copy_within(off..off + len, at);
            len
        } else {
            let rec = rec_at(&words, off as u32);
            out.extend_from_slice(rec);
            rec.len()
        };
        offs.push(at as u32);
        if !renumber(&mut out[at..at + len], link) {
            return Err(DedupError::Invalid {
                id,
                what: "a referenced type has no surviving representative",
            });
        }
        at += len;
    }
    debug_assert_eq!(at, nwords);
    out.truncate(at);
    out.shrink_to_fit();
    Ok((out, offs))
}

/// Phase timings on stderr (wall clock and process CPU time: the machine is
/// shared, so CPU time is the steadier figure), for `--timings` and the benchmark.
struct Timer {
    on: bool,
    t0: (Instant, f64),
    last: std::cell::Cell<(Instant, f64)>,
}

fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

impl Timer {
    fn new(on: bool) -> Timer {
        let now = (Instant::now(), if on { cpu_seconds() } else { 0.0 });
        Timer {
            on,
            t0: now,
            last: std::cell::Cell::new(now),
        }
    }
    fn lap(&self, what: &str) {
        if self.on {
            let now = (Instant::now(), cpu_seconds());
            let last = self.last.get();
            eprintln!(
                "dedup: {what:<14} wall {:7.1} ms  cpu {:7.1} ms   (total wall {:7.1} ms, cpu {:7.1} ms)",
                (now.0 - last.0).as_secs_f64() * 1e3,
                (now.1 - last.1) * 1e3,
                (now.0 - self.t0.0).as_secs_f64() * 1e3,
                (now.1 - self.t0.1) * 1e3,
            );
            self.last.set(now);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_below_agrees_with_the_id_iterator() {
        use super::*;
        let info = |k: u32, vlen: u32| (k << 24) | vlen;
        let recs: Vec<Vec<u32>> = vec![
            vec![1, info(INT, 0), 4, 32],
            vec![1, info(PTR, 0), 7],
            vec![1, info(FWD, 0), 9],
            vec![1, info(ARRAY, 0), 0, 5, 8, 3],
            vec![1, info(STRUCT, 3), 8, 1, 2, 0, 1, 11, 32, 1, 6, 64],
            vec![1, info(UNION, 0), 0],
            vec![0, info(FUNC_PROTO, 2), 4, 1, 12, 1, 3],
            vec![1, info(DATASEC, 2), 8, 13, 0, 4, 2, 4, 4],
            vec![1, info(ENUM, 2), 4, 1, 0, 1, 1],
            vec![1, info(VAR, 0), 10, 1],
            vec![1, info(DECL_TAG, 0), 14, 0],
        ];
        for r in &recs {
            assert_eq!(r.len(), Info(r[1]).len());
            for end in 0..16 {
                let mut all = true;
                for_each_id_pos(r, |p| all &= r[p] < end);
                assert_eq!(ids_below(r, end), all, "{r:?} below {end}");
            }
        }
    }

    use std::sync::Arc;

    use super::*;
    use crate::btf::{Endian, Kind, TypeId, dump};

    fn run(b: &Btf) -> Btf {
        dedup(b, &Options::default()).expect("dedup")
    }

    fn lines(b: &Btf) -> Vec<String> {
        dump::raw_string(b)
            .lines()
            .filter(|l| l.starts_with('['))
            .map(String::from)
            .collect()
    }

    fn int(b: &mut Btf) -> TypeId {
        b.add_int(b"int", 4, crate::btf::INT_SIGNED)
    }

    #[test]
    fn identical_structs_collapse_and_strings_stay() {
        let mut b = Btf::new(Endian::Little);
        b.add_str(b"unused");
        for _ in 0..2 {
            let i = int(&mut b);
            b.begin(Kind::Struct, b"s", 8, false);
            b.push_member(b"a", i, 0, 0);
            b.push_member(b"b", i, 32, 0);
        }
        let out = run(&b);
        assert_eq!(out.own_type_count(), 2);
        assert_eq!(
            out.raw_strings(),
            b.raw_strings(),
            "keep mode leaves strings byte-identical"
        );
        assert_eq!(lines(&out)[1], "[2] STRUCT 's' size=8 vlen=2");
    }

    /// A FWD's size/type word past the last id, which the reader lets
    /// through (it is no reference in BTF) but compaction renumbers: an
    /// error naming the type, whether or not ids were checked by the reader.
    /// (Found by replaying the dedup fuzz corpus through `btfkit dedup`,
    /// which trusts the reader: it panicked in compaction.)
    #[test]
    fn fwd_word_past_the_last_id_is_an_error() {
        let mut b = Btf::new(Endian::Little);
        int(&mut b);
        let f = b.add_fwd(b"foo", false);
        b.words_mut(f)[2] = 655_360;
        for ids_checked in [false, true] {
            let o = Options {
                ids_checked,
                ..Options::default()
            };
            let e = dedup(&b, &o).expect_err("refused");
            assert!(matches!(e, DedupError::Invalid { id: 2, .. }), "{e}");
        }
    }

    /// The same types appended to a Btf whose offsets are deferred (as the
    /// encoder hands them over), strings interned in the same order.
    fn deferred_copy(b: &Btf) -> Btf {
        let mut d = Btf::new(Endian::Little);
        for s in b.raw_strings().split(|&c| c == 0).skip(1) {
            d.add_str(s);
        }
        d.defer_offsets();
        for id in 1..=b.type_count() {
            d.push_words(b.ty(TypeId(id)).words);
        }
        d
    }

    #[test]
    fn deferred_records_are_laid_out_by_one_walk() {
        let mut b = Btf::new(Endian::Little);
        for _ in 0..2 {
            let i = int(&mut b);
            b.begin(Kind::Struct, b"s", 8, false);
            b.push_member(b"a", i, 0, 0);
            b.add_ref(Kind::Ptr, TypeId(2));
        }
        // 66 003 words in one 64-id block: the general packing takes over
        let i = int(&mut b);
        b.begin(Kind::Struct, b"big", 4, false);
        for _ in 0..22_000 {
            b.push_member(b"m", i, 0, 0);
        }
        b.add_ref(Kind::Ptr, i);
        let whole = crate::btf::write::to_bytes(&run(&b));
        let owned = dedup_owned(deferred_copy(&b), &Options::default()).expect("dedup of deferred records");
        assert_eq!(crate::btf::write::to_bytes(&owned), whole);
        // a reference past the last type is refused, not followed
        let mut bad = deferred_copy(&b);
        bad.push_words(&[0, crate::btf::make_info(Kind::Ptr, false, 0), 999]);
        let e = dedup_owned(bad, &Options::default()).expect_err("refused");
        assert!(matches!(e, DedupError::Invalid { .. }), "{e}");
        // the lowest malformed id is the one reported: a bad reference
        // before a record that runs past the end
        let mut two = deferred_copy(&b);
        let first_bad = two.push_words(&[0, crate::btf::make_info(Kind::Ptr, false, 0), 999]);
        two.push_words(&[0, crate::btf::make_info(Kind::Struct, false, 5), 4]);
        match dedup_owned(two, &Options::default()) {
            Err(DedupError::Invalid { id, .. }) => assert_eq!(id, first_bad.0),
            other => panic!("{:?}", other.map(|b| b.type_count())),
        }
    }

    #[test]
    fn deferred_records_are_packed_in_parallel_stretches() {
        // over three stretches of 65,536 types, blocks straddling their
        // starts, and a VAR in each
        let mut b = Btf::new(Endian::Little);
        let i = int(&mut b);
        for n in 0..200_000u32 {
            match n % 7 {
                0 => {
                    b.begin(Kind::Struct, b"s", 4, false);
                    b.push_member(b"a", i, 0, 0);
                }
                1 if n % 65_536 < 7 => {
                    b.add_var(b"v", i, 1);
                }
                _ => {
                    b.add_ref(if n % 2 == 0 { Kind::Ptr } else { Kind::Const }, TypeId(b.type_count()));
                }
            }
        }
        let d = deferred_copy(&b);
        let (words, marks, ..) = deferred_copy(&b).into_parts_with_marks();
        assert!(marks.len() >= 2, "{} marks", marks.len());
        let end = b.type_count() + 1;
        let packed = pack_in_stretches(&words, end, &marks).expect("packed in stretches");
        let (walked, walked_state) = layout_walk(&words, end, true).expect("walked");
        assert!((0..end).all(|id| packed.nodes.get(id) == walked.get(id)));
        assert!((0..end).all(|id| packed.state.get(id) == walked_state.get(id)));
        let whole = crate::btf::write::to_bytes(&run(&b));
        let owned = dedup_owned(d, &Options::default()).expect("dedup of deferred records");
        assert_eq!(crate::btf::write::to_bytes(&owned), whole);
    }

    #[test]
    fn lone_fwd_resolves_to_unique_struct_before_reference_pass() {
        let mut b = Btf::new(Endian::Little);
        let i = int(&mut b);
        let s = b.begin(Kind::Struct, b"foo", 4, false);
        b.push_member(b"x", i, 0, 0);
        b.add_ref(Kind::Ptr, s);
        let f = b.add_fwd(b"foo", false);
        b.add_ref(Kind::Ptr, f);
        let out = run(&b);
        assert_eq!(
            lines(&out),
            [
                "[1] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED",
                "[2] STRUCT 'foo' size=4 vlen=1",
                "[3] PTR '(anon)' type_id=2"
            ]
        );
    }

    #[test]
    fn fwd_name_shared_by_struct_and_union_stays() {
        let mut b = Btf::new(Endian::Little);
        let i = int(&mut b);
        b.begin(Kind::Struct, b"n", 4, false);
        b.push_member(b"x", i, 0, 0);
        b.begin(Kind::Union, b"n", 4, false);
        b.push_member(b"x", i, 0, 0);
        b.add_fwd(b"n", true);
        assert_eq!(run(&b).own_type_count(), 4);
    }

    #[test]
    fn self_referential_structs_close_their_cycle() {
        let mut b = Btf::new(Endian::Little);
        let i = int(&mut b); // 1
        b.begin(Kind::Struct, b"list", 16, false); // 2
        b.push_member(b"next", TypeId(3), 0, 0);
        b.push_member(b"val", i, 64, 0);
        b.add_ref(Kind::Ptr, TypeId(2)); // 3
        let i2 = int(&mut b); // 4
        b.add_ref(Kind::Ptr, TypeId(6)); // 5
        b.begin(Kind::Struct, b"list", 16, false); // 6
        b.push_member(b"next", TypeId(5), 0, 0);
        b.push_member(b"val", i2, 64, 0);
        let out = run(&b);
        assert_eq!(out.own_type_count(), 3);
        assert_eq!(lines(&out)[2], "[3] PTR '(anon)' type_id=2");
    }

    #[test]
    fn candidate_side_fwd_is_resolved_by_merge() {
        // E4: the earlier 'holder' sees 'node' only as a FWD and survives, completed
        let mut b = Btf::new(Endian::Little);
        let f = b.add_fwd(b"node", false); // 1
        let p = b.add_ref(Kind::Ptr, f); // 2
        b.begin(Kind::Struct, b"holder", 8, false); // 3
        b.push_member(b"n", p, 0, 0);
        let i = int(&mut b); // 4
        let n = b.begin(Kind::Struct, b"node", 4, false); // 5
        b.push_member(b"v", i, 0, 0);
        let p2 = b.add_ref(Kind::Ptr, n); // 6
        b.begin(Kind::Struct, b"holder", 8, false); // 7
        b.push_member(b"n", p2, 0, 0);
        let out = run(&b);
        assert_eq!(
            lines(&out),
            [
                "[1] PTR '(anon)' type_id=4",
                "[2] STRUCT 'holder' size=8 vlen=1",
                "[3] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED",
                "[4] STRUCT 'node' size=4 vlen=1"
            ]
        );
    }

    #[test]
    fn func_linkage_and_param_names_are_identity() {
        let mut b = Btf::new(Endian::Little);
        let i = int(&mut b);
        for (param, linkage) in [(&b"x"[..], 1), (b"x", 1), (b"y", 1), (b"x", 0)] {
            let p = b.begin(Kind::FuncProto, b"", i.0, false);
            b.push_param(param, i);
            b.add_func(b"f", p, linkage);
        }
        // protos: (x) three times, merged, and (y); funcs: global f -> (x) twice,
        // merged; global f -> (y); static f -> (x)
        assert_eq!(run(&b).own_type_count(), 1 + 2 + 3);
    }

    #[test]
    fn enum_fwd_takes_a_full_enum_and_full_enum_repoints_fwd() {
        let mut b = Btf::new(Endian::Little);
        b.begin(Kind::Enum, b"e", 4, false); // 1: fwd
        let full = b.begin(Kind::Enum, b"e", 4, false); // 2
        b.push_enum_value(b"A", 0);
        b.add_typedef(b"t", TypeId(1)); // 3 -> fwd, re-pointed to 2
        b.begin(Kind::Enum, b"e", 8, false); // 4: fwd of another size, takes 2
        let out = run(&b);
        assert_eq!(out.own_type_count(), 2);
        assert_eq!(lines(&out)[1], format!("[2] TYPEDEF 't' type_id={}", full.0 - 1));
    }

    #[test]
    fn out_of_range_id_is_an_error_not_a_panic() {
        let mut b = Btf::new(Endian::Little);
        int(&mut b);
        b.add_ref(Kind::Ptr, TypeId(99));
        let e = dedup(&b, &Options::default()).unwrap_err();
        assert!(matches!(e, DedupError::Invalid { id: 2, .. }), "{e}");
    }

    #[test]
    fn recursive_typedef_is_eloop() {
        let mut b = Btf::new(Endian::Little);
        b.add_typedef(b"t", TypeId(1));
        let e = dedup(&b, &Options::default()).unwrap_err();
        assert_eq!(e.errno(), -40);
    }

    #[test]
    fn equivalence_reaching_a_var_is_einval() {
        let mut b = Btf::new(Endian::Little);
        let i = int(&mut b);
        for _ in 0..2 {
            let v = b.add_var(b"v", i, 0);
            b.begin(Kind::Struct, b"s", 4, false);
            b.push_member(b"m", v, 0, 0);
        }
        let e = dedup(&b, &Options::default()).unwrap_err();
        assert_eq!(e.errno(), -22);
    }

    #[test]
    fn structs_embedding_each_other_stop_instead_of_overflowing() {
        let mut b = Btf::new(Endian::Little);
        // canonical side: x { w }, w { x }, k { x a; x b }
        b.begin(Kind::Struct, b"x", 4, false); // 1
        b.push_member(b"w", TypeId(2), 0, 0);
        b.begin(Kind::Struct, b"w", 4, false); // 2
        b.push_member(b"x", TypeId(1), 0, 0);
        b.begin(Kind::Struct, b"k", 8, false); // 3
        b.push_member(b"a", TypeId(1), 0, 0);
        b.push_member(b"b", TypeId(1), 32, 0);
        // candidate: k { x1 a; x2 b } with x1 != x2, each in its own cycle
        b.begin(Kind::Struct, b"k", 8, false); // 4
        b.push_member(b"a", TypeId(5), 0, 0);
        b.push_member(b"b", TypeId(6), 32, 0);
        b.begin(Kind::Struct, b"x", 4, false); // 5
        b.push_member(b"w", TypeId(7), 0, 0);
        b.begin(Kind::Struct, b"x", 4, false); // 6
        b.push_member(b"w", TypeId(8), 0, 0);
        b.begin(Kind::Struct, b"w", 4, false); // 7
        b.push_member(b"x", TypeId(5), 0, 0);
        b.begin(Kind::Struct, b"w", 4, false); // 8
        b.push_member(b"x", TypeId(6), 0, 0);
        let e = dedup(&b, &Options::default()).unwrap_err();
        assert!(matches!(e, DedupError::TooDeep { .. }), "{e}");
    }

    #[test]
    fn string_pass_keeps_referenced_strings_in_first_reference_order() {
        let mut b = Btf::new(Endian::Little);
        b.add_str(b"unused");
        b.add_str(b"zzz");
        let i = int(&mut b);
        b.begin(Kind::Struct, b"s", 4, false);
        b.push_member(b"zzz", i, 0, 0);
        let parsed = crate::btf::read::parse(&crate::btf::write::to_bytes(&b)).unwrap();
        let out = dedup(
            &parsed,
            &Options {
                strings: StringMode::Dedup,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(out.raw_strings(), b"\0int\0s\0zzz\0");
        assert_eq!(lines(&out)[1], "[2] STRUCT 's' size=4 vlen=1");
    }

    #[test]
    fn split_types_map_onto_base_and_base_stays() {
        let mut base = Btf::new(Endian::Little);
        let i = int(&mut base);
        base.add_ref(Kind::Ptr, i);
        let base = Arc::new(base);
        let mut s = Btf::new_split(base.clone());
        let i2 = int(&mut s); // 3 -> base 1
        let p = s.add_ref(Kind::Ptr, i2); // 4 -> base 2
        s.add_typedef(b"pint", p); // 5 survives as [3]
        let out = run(&s);
        assert_eq!(out.start_id(), 3);
        assert_eq!(lines(&out), ["[3] TYPEDEF 'pint' type_id=2"]);
    }

    #[test]
    fn a_prebuilt_base_index_gives_the_same_result_and_only_for_its_base() {
        // base: int, int *, struct s { int *p; }, fwd s2
        let mut base = Btf::new(Endian::Little);
        let i = int(&mut base);
        let p = base.add_ref(Kind::Ptr, i);
        base.begin(Kind::Struct, b"s", 8, false);
        base.push_member(b"p", p, 0, 0);
        base.add_fwd(b"s2", false);
        let base = Arc::new(base);
        // split: the same three, struct s2 { int x; }, typedef ps
        let mut s = Btf::new_split(base.clone());
        let i2 = int(&mut s);
        let p2 = s.add_ref(Kind::Ptr, i2);
        s.begin(Kind::Struct, b"s", 8, false);
        s.push_member(b"p", p2, 0, 0);
        s.begin(Kind::Struct, b"s2", 4, false);
        s.push_member(b"x", i2, 0, 0);
        s.add_typedef(b"ps", p2);
        let plain = dedup(&s, &Options::default()).unwrap();
        let index = Arc::new(BaseIndex::new(&base).unwrap());
        let with = Options {
            base_index: Some(index.clone()),
            ..Default::default()
        };
        let indexed = dedup(&s, &with).unwrap();
        assert_eq!(lines(&plain), lines(&indexed));
        assert_eq!(
            crate::btf::write::to_bytes(&plain),
            crate::btf::write::to_bytes(&indexed)
        );
        let owned = dedup_owned(s.clone(), &with).unwrap();
        assert_eq!(crate::btf::write::to_bytes(&plain), crate::btf::write::to_bytes(&owned));
        // an index of another base is not used
        let other = Arc::new(BaseIndex::new(&Arc::new(Btf::new(Endian::Little))).unwrap());
        assert!(!other.serves(s.base()) && index.serves(s.base()));
    }

    /// Random BTFs of several CUs sharing type names, with reference chains,
    /// arrays, prototypes and FWDs: the reference pass gives the same result
    /// with its own index as through libbpf's candidate table.
    #[test]
    fn reference_index_agrees_with_the_candidate_table() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        for _ in 0..200 {
            let mut b = Btf::new(Endian::Little);
            for _ in 0..1 + rnd(7) {
                let base = b.type_count() + 1;
                let t = |o: u32| TypeId(base + o);
                let name = |k: &str, n: u32| format!("{k}{n}").into_bytes();
                let i = int(&mut b);
                b.add_fwd(&name("s", rnd(3)), false);
                b.begin(Kind::Struct, &name("s", rnd(3)), 16, false);
                b.push_member(b"a", i, 0, 0);
                b.push_member(b"b", t(4), 64, 0);
                b.push_member(b"c", t(5), 96, 0);
                b.begin(Kind::Struct, &name("s", rnd(3)), 16, false);
                b.push_member(b"a", t(6), 0, 0);
                b.push_member(b"b", t(7), 64, 0);
                let pick = |r: u32, xs: &[u32]| t(xs[r as usize % xs.len()]);
                b.add_ref(Kind::Ptr, pick(rnd(3), &[1, 2, 3]));
                b.add_typedef(&name("t", rnd(2)), pick(rnd(3), &[0, 4, 6]));
                b.add_ref(Kind::Const, pick(rnd(3), &[1, 2, 3]));
                b.add_array(pick(rnd(2), &[0, 4]), i, 1 + rnd(2));
                b.begin(Kind::FuncProto, b"", pick(rnd(2), &[0, 4]).0, false);
                b.push_param(b"", t(5));
                b.push_param(b"", t(6));
                b.add_ref(Kind::Ptr, t(8));
                b.add_ref(Kind::Ptr, t(4));
                b.add_ref(Kind::Volatile, pick(rnd(3), &[9, 10, 7]));
            }
            let with_index = run(&b);
            let with_table = dedup_through_table(&b, &Options::default()).expect("dedup");
            assert_eq!(lines(&with_index), lines(&with_table));
            assert_eq!(with_index.raw_words(), with_table.raw_words());
        }
    }
}
