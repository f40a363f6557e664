//! BTF deduplication with exactly the result of libbpf 374f7807's `btf__dedup`
//! (pahole v1.31's), or of libbpf v1.8.0's under [`Rules::Libbpf1_8`]: the
//! passes below are the same, and [`Rules`] lists where the two differ.
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
//! [`passes`] lists them in this order over one [`PassState`].
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
//!   offsets, which lowered dedup's memory peak on a vmlinux.
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

/// The record of `id` in a [`Dedup`]'s words (a macro, not a method, so
/// that it borrows only the two fields it reads).
macro_rules! rec {
    ($d:expr, $id:expr) => {
        rec_of(&$d.words, &$d.st.nodes, $id)
    };
}

mod base_index;
mod compact;
mod fwds;
mod hypot;
mod incremental;
mod layout;
mod links;
mod offsets;
mod prim;
mod records;
mod refindex;
mod refpass;
mod signature;
mod states;
mod strings;
mod structs;
mod stub;
pub mod table;
#[cfg(test)]
mod tests;
mod timer;

use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

use thiserror::Error;

use crate::btf::kind::*;
use crate::btf::{Btf, StrTab, TypeId};
use compact::compact;
use fwds::in_stretches;
use hypot::HypotMap;
use layout::{check_packed, check_record, layout, layout_over_index, layout_walk, pack_in_stretches};
use links::{Links, TrackedLinks, resolve_in, resolve_shared, shared_u32};
use offsets::Offsets;
use records::*;
use signature::*;
use states::{State, States};
use strings::{dedup_strings, strings_already_unique};
use structs::Queued;
use table::CandTable;
use timer::Timer;

pub use base_index::BaseIndex;
pub use incremental::Incremental;
pub(crate) use signature::signature_hashes;

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
    /// every member of every struct, slow on a vmlinux). Record extents
    /// are always checked.
    pub ids_checked: bool,
    /// Print phase timings to stderr.
    pub timings: bool,
    /// What dedup derives from the base alone, computed once for a batch of
    /// split BTFs over the same base ([`BaseIndex::new`]); ignored unless it
    /// was built from the very base the input is split over.
    pub base_index: Option<std::sync::Arc<BaseIndex>>,
    /// Which libbpf's result to reproduce.
    pub rules: Rules,
}

/// The libbpf whose `btf__dedup` result [`dedup`] reproduces. Both give
/// the same result on most BTF; where they differ is listed here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rules {
    /// libbpf 374f7807, pahole v1.31's.
    #[default]
    Libbpf374f7807,
    /// libbpf v1.8.0 (dd92bef7): typedefs are deduplicated in the struct
    /// pass, by graph equivalence, and no longer in the reference pass
    /// (37027144, for Go's recursive typedefs); they are filed under their
    /// name and info only, while prep files a base's typedefs under name,
    /// info and type as before, so a split BTF's typedefs never meet the
    /// base's and stay in the split part. And where the equivalence walk
    /// meets a second candidate for a canonical type, any two structurally
    /// equal types pass, to depth 16 (5ee9fbf7), not only arrays, structs
    /// and pointers.
    Libbpf1_8,
}

impl Rules {
    /// Whether the struct pass takes typedefs too.
    fn typedefs_in_struct_pass(self) -> bool {
        self == Rules::Libbpf1_8
    }
}

/// Why dedup failed; the input is never modified.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DedupError {
    #[error("type [{}]: reference types form a cycle that no struct or union breaks (libbpf: -ELOOP)", .id.get())]
    Loop { id: TypeId },
    #[error("type [{}]: {what} (libbpf: -EINVAL)", .id.get())]
    Invalid { id: TypeId, what: &'static str },
    #[error("type [{}]: structs embed each other more than {depth} levels deep (libbpf would overflow its stack)", .id.get())]
    TooDeep { id: TypeId, depth: u32 },
    /// [`Incremental::finish`] after the chunked passes gave up, having cut
    /// records down to stubs: the whole-BTF dedup cannot run on them.
    #[error("dedup's chunked passes stopped after stubbing records: encode again without them")]
    Stubbed,
}

impl DedupError {
    /// The negative errno libbpf returns for the same input.
    pub fn errno(&self) -> i32 {
        match self {
            DedupError::Loop { .. } => -40,
            DedupError::Invalid { .. } | DedupError::TooDeep { .. } | DedupError::Stubbed => -22,
        }
    }
}

/// Everything the passes keep besides the records: the per-id columns, the
/// candidate table and one walk's scratch. A struct of its own so that the
/// chunked passes ([`Incremental`]) keep it whole between chunks.
///
/// Type ids are raw `u32` here and in the passes, not [`crate::btf::TypeId`]:
/// they index the dense per-id columns on dedup's hottest paths, and come
/// from records' words and go back into them; `TypeId` is where ids leave
/// dedup.
struct PassState<L: Links = Vec<u32>> {
    /// Where each id's record starts in the words; kind and length come from
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
    /// Base ids whose link a pass re-pointed (forward declarations of the
    /// base that a struct or enum of the split resolves): the only base
    /// links that are not the id itself, so that the final links need not
    /// read the others (a vmlinux's 108 K, for every module).
    base_moved: Vec<u32>,
    rules: Rules,
}

impl<L: Links> PassState<L> {
    /// The state before the first pass: one walk's scratch, nothing noted.
    fn new(nodes: Offsets, link: L, state: States, start: TypeId, end: TypeId, table: CandTable) -> Self {
        PassState {
            nodes,
            link,
            state,
            start: start.get(),
            end: end.get(),
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
            base_moved: Vec::new(),
            rules: Rules::default(),
        }
    }

    /// The same state over another form of the link column.
    fn with_links<M: Links>(self, f: impl FnOnce(L) -> M) -> PassState<M> {
        PassState {
            nodes: self.nodes,
            link: f(self.link),
            state: self.state,
            start: self.start,
            end: self.end,
            hypot: self.hypot,
            adjust_canon: self.adjust_canon,
            table: self.table,
            eq_stack: self.eq_stack,
            enum_fwds: self.enum_fwds,
            enums: self.enums,
            overlap: self.overlap,
            give_up: self.give_up,
            struct_done: self.struct_done,
            spare_hypot: self.spare_hypot,
            base_moved: self.base_moved,
            rules: self.rules,
        }
    }

    /// Drops the struct pass's scratch (a megabyte or more after its
    /// largest walk), at dedup's memory peak.
    fn drop_walk_scratch(&mut self) {
        self.hypot = HypotMap::new();
        self.spare_hypot = HypotMap::new();
        self.eq_stack = Vec::new();
    }
}

/// The passes' view: the records of every id and the state they work on.
struct Dedup<'a, L: Links = Vec<u32>> {
    /// Precomputed base state (prep's table, base struct names), if any.
    base_index: Option<&'a BaseIndex>,
    /// Records of every id: base and own in one slice (a plain slice here,
    /// so the hot paths index it without first asking whose it is).
    words: &'a [u32],
    st: PassState<L>,
}

impl<L: Links> Dedup<'_, L> {
    #[inline]
    pub(super) fn resolve(&self, id: TypeId) -> TypeId {
        resolve_in(&self.st.link, id)
    }

    /// The kind of `id`'s record (void's is `Unkn`, as libbpf's `btf_kind`
    /// of id 0 reads 0).
    #[inline]
    pub(super) fn kind_of(&self, id: TypeId) -> Kind {
        if id == TypeId::VOID {
            return Kind::Unkn;
        }
        // the layout pass checked every kind
        Kind::from_u8(Info(self.words[self.st.nodes.get(id) as usize + 1]).kind() as u8).unwrap_or(Kind::Unkn)
    }

    /// libbpf's `map[id] <= BTF_MAX_NR_TYPES`.
    #[inline]
    pub(super) fn mapped(&self, id: TypeId) -> bool {
        self.st.state.get(id) == State::Mapped
    }

    pub(super) fn set_map(&mut self, id: TypeId, to: TypeId) {
        if id.get() < self.st.start {
            self.st.base_moved.push(id.get());
        }
        self.st.state.set(id, State::Mapped);
        self.st.link.set(id, to);
    }
}

/// Which of the passes have run on the state handed to [`passes`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Done {
    /// Only the layout: every id unprocessed but VAR, DATASEC and the base.
    Layout,
    /// Also prep, primitives and structs, chunk by chunk during the CU loop
    /// ([`Incremental::feed`] runs the same passes over the same state).
    Structs,
}

/// The entries a run's candidate table has room for before it first grows.
const TABLE_ROOM: usize = 1 << 16;

/// What the passes leave: the surviving records and their offsets, and the
/// candidate table and packed offsets they worked on (a
/// [`Workspace`](base_index::Workspace)'s go back to its base index).
struct Passed {
    words: Vec<u32>,
    offs: Vec<u32>,
    table: CandTable,
    nodes: Offsets,
}

/// libbpf's passes, in order, over one state; the string pass and the
/// layout came first ([`dedup`], [`dedup_owned`], [`Incremental::feed`]:
/// they depend on how the input is held).
fn passes(
    words: Cow<'_, [u32]>,
    st: PassState,
    base_index: Option<&BaseIndex>,
    done: Done,
    clock: &Timer,
) -> Result<Passed, DedupError> {
    let mut d = Dedup {
        base_index,
        words: &words,
        st,
    };
    if done == Done::Layout {
        d.prep()?;
        clock.lap("prep");
        d.prim_types()?;
        clock.lap("primitives");
        d.struct_types()?;
        clock.lap("structs");
    }
    d.st.drop_walk_scratch();
    d.resolve_fwds();
    clock.lap("fwds");
    d.ref_types()?;
    clock.lap("refs");
    let (survivors, nwords) = d.final_links();
    // the rest of the state goes before compaction, at dedup's memory peak
    let PassState {
        nodes,
        link,
        table,
        start,
        ..
    } = d.st;
    let (words, offs) = compact(words, &nodes, &link, TypeId::new(start), &survivors, nwords)?;
    clock.lap("compact+remap");
    Ok(Passed {
        words,
        offs,
        table,
        nodes,
    })
}

/// Deduplicates `btf` (over its base, if split) as libbpf's `btf__dedup` does.
pub fn dedup(btf: &Btf, opts: &Options) -> Result<Btf, DedupError> {
    let clock = Timer::new(opts.timings);
    let start = TypeId::new(btf.start_id());
    let end = TypeId::new(btf.type_count() + 1);

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

    let offs = Cow::Borrowed(btf.type_offsets());
    let (words, offs) = match opts.base_index.as_deref().filter(|i| i.serves(btf.base())) {
        Some(ix) => run_over_index(ix, offs, &own, !opts.ids_checked, start, end, opts.rules, &clock)?,
        None => {
            let (words, nodes, state) = layout(btf.base(), offs, own, !opts.ids_checked)?;
            clock.lap("layout");
            let d = run(words, nodes, state, start, end, opts.rules, &clock)?;
            (d.words, d.offs)
        }
    };
    let mut out = Btf::from_parts(words, offs, strtab, btf.endian(), btf.base().cloned());
    // (the output is laid out as the input was: header and layout section)
    out.set_format(btf.format().clone());
    Ok(out)
}

/// [`dedup`] with the reference pass looking reference types up in the
/// candidate table as libbpf does, not in its own index ([`refindex`]):
/// the same result, which tests and fuzzing check.
pub(crate) fn dedup_through_table(btf: &Btf, opts: &Options) -> Result<Btf, DedupError> {
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
    let format = btf.format().clone();
    let clock = Timer::new(opts.timings);
    let start = TypeId::new(btf.start_id());
    let end = TypeId::new(btf.type_count() + 1);
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
        let table = CandTable::with_capacity(TABLE_ROOM);
        let d = run_packed(
            Cow::Owned(words),
            nodes,
            state,
            start,
            end,
            None,
            table,
            opts.rules,
            &clock,
        )?;
        let mut out = Btf::from_parts(d.words, d.offs, strtab, endian, base);
        out.set_format(format);
        return Ok(out);
    }
    if btf.offsets_deferred() {
        btf.build_offsets();
    }
    let (words, offs, strtab, endian, base) = btf.into_parts();
    let offs = Cow::Owned(offs);
    let (words, offs) = match opts.base_index.as_deref().filter(|i| i.serves(base.as_ref())) {
        Some(ix) => run_over_index(ix, offs, &words, !opts.ids_checked, start, end, opts.rules, &clock)?,
        None => {
            let (words, nodes, state) = layout(base.as_ref(), offs, Cow::Owned(words), !opts.ids_checked)?;
            clock.lap("layout");
            let d = run(words, nodes, state, start, end, opts.rules, &clock)?;
            (d.words, d.offs)
        }
    };
    let mut out = Btf::from_parts(words, offs, strtab, endian, base);
    out.set_format(format);
    Ok(out)
}

/// The layout and the passes after it over a base laid out once in `ix`,
/// in a [`Workspace`](base_index::Workspace) of the index's, given back
/// when the passes are done. Returns the surviving records and their
/// offsets.
#[allow(clippy::too_many_arguments)]
fn run_over_index(
    ix: &BaseIndex,
    offs: Cow<'_, [u32]>,
    own: &[u32],
    check_ids: bool,
    start: TypeId,
    end: TypeId,
    rules: Rules,
    clock: &Timer,
) -> Result<(Vec<u32>, Vec<u32>), DedupError> {
    let mut work = ix.take_workspace();
    let (nodes, state) = layout_over_index(ix, &mut work, &offs, own, check_ids)?;
    clock.lap("layout");
    let table = std::mem::replace(&mut work.table, CandTable::EMPTY);
    let d = run_packed(
        Cow::Borrowed(&work.words),
        nodes,
        state,
        start,
        end,
        Some(ix),
        table,
        rules,
        clock,
    )?;
    work.table = d.table;
    ix.give_back(work, d.nodes);
    Ok((d.words, d.offs))
}

/// The passes after layout, without a base index.
fn run(
    words: Cow<'_, [u32]>,
    nodes: Vec<u32>,
    state: Vec<State>,
    start: TypeId,
    end: TypeId,
    rules: Rules,
    clock: &Timer,
) -> Result<Passed, DedupError> {
    let table = CandTable::with_capacity(TABLE_ROOM);
    pack_and_run(words, nodes, state, start, end, None, table, rules, clock)
}

/// The passes after layout, starting from `table`.
#[allow(clippy::too_many_arguments)]
fn pack_and_run(
    words: Cow<'_, [u32]>,
    nodes: Vec<u32>,
    state: Vec<State>,
    start: TypeId,
    end: TypeId,
    base_index: Option<&BaseIndex>,
    table: CandTable,
    rules: Rules,
    clock: &Timer,
) -> Result<Passed, DedupError> {
    // packed before `link` exists: the flat offsets are the larger part
    let nodes = Offsets::new(nodes);
    let state = {
        let packed = States::pack(&state);
        drop(state);
        packed
    };
    // what layout freed (the flat offsets, its parallel scratch)
    crate::heap::release_free_after(words.len() * 4);
    run_packed(words, nodes, state, start, end, base_index, table, rules, clock)
}

/// [`pack_and_run`] on offsets and states already packed: the links, then
/// [`passes`].
#[allow(clippy::too_many_arguments)]
fn run_packed(
    words: Cow<'_, [u32]>,
    nodes: Offsets,
    state: States,
    start: TypeId,
    end: TypeId,
    base_index: Option<&BaseIndex>,
    table: CandTable,
    rules: Rules,
    clock: &Timer,
) -> Result<Passed, DedupError> {
    let link = {
        use rayon::prelude::*;
        (0..end.get()).into_par_iter().collect()
    };
    let mut st = PassState::new(nodes, link, state, start, end, table);
    st.rules = rules;
    passes(words, st, base_index, Done::Layout, clock)
}
