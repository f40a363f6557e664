//! Dedup's primitive and struct passes run chunk by chunk while the encoder
//! is still merging CUs, so that on a multi-core machine they overlap the
//! decoding of later CUs instead of running after it, alone on one core.
//!
//! libbpf runs each pass over all types before the next pass starts. Run per
//! chunk in id order, the passes do the same work in the same order, and a
//! struct walk for a type of CU k reads only CU k and earlier ones (a CU's
//! records refer to its own types; links only ever point at ids a walk has
//! already reached). Three things can still differ, and each is checked; when
//! one happens the chunked state is dropped and [`Incremental::finish`]
//! runs the whole-BTF dedup instead, so the result is always libbpf's:
//!
//! * *Candidate order.* libbpf keeps primitives and structs in one hash map,
//!   whose order for equal keys flips at every growth; when the struct pass
//!   runs, all primitives are in it, here only those of the CUs so far. So a
//!   struct's candidates are all walked, and the first pass stands only if
//!   no other candidate passes (a failed walk changes nothing).
//! * *Enum forward declarations.* A full enum re-points the earlier
//!   canonical enum fwd of its name in the primitive pass (again for every
//!   later full enum of that name); the whole-BTF struct pass sees the last
//!   re-pointing done for every CU, the chunked one what was done by the
//!   CUs so far. The walk compares a pair by its links before it reads the
//!   records, so the answer can differ when one end is an enum fwd whose
//!   link goes through the re-pointed one. Walks note the enum fwds they
//!   compare that way; re-pointing a fwd through which a noted one links,
//!   after its CU's struct pass, gives up.
//! * *A record referring past the types merged so far* (a C++ CU whose ids
//!   a nested DW_TAG_unspecified_type shifted): a walk would read types not
//!   laid out yet. Gives up.
//!
//! At the end the candidate table is rebuilt as libbpf's would be after its
//! struct pass (every primitive insertion, then every struct one, each in
//! order), and the remaining passes run on the whole BTF as before.
//!
//! Only standalone BTF (no base) with the encoder's string section kept is
//! handled this way; anything else goes to [`dedup_owned`]. The state kept
//! during the CU loop is what the struct pass reads for every id: packed
//! record offsets (`Offsets`), the state bits, and links for only the ids
//! those passes map ([`SparseLinks`]); about 20 MiB for a vmlinux, on top of
//! the encoder's peak, which the offset column the encoder no longer builds
//! (17 MiB) pays for most of.

use std::borrow::Cow;

use super::*;

/// The state of libbpf's first passes over the CUs merged so far.
pub struct Incremental {
    nodes: Offsets,
    link: SparseLinks,
    state: States,
    prim_table: CandTable,
    struct_table: CandTable,
    prim_log: Vec<(u64, u32)>,
    struct_log: Vec<(u64, u32)>,
    hypot: HypotMap,
    spare_hypot: HypotMap,
    eq_stack: Vec<(u32, u32)>,
    enum_fwds: hashbrown::HashSet<u32>,
    enums: hashbrown::HashTable<u32>,
    /// Ids `1..end` are laid out and through both passes.
    end: u32,
    /// Where the record of id `end` starts.
    words_done: usize,
    /// Why the chunked passes stopped (the whole-BTF dedup runs instead).
    gave_up: Option<&'static str>,
}

impl Default for Incremental {
    fn default() -> Self {
        Self::new()
    }
}

impl Incremental {
    pub fn new() -> Incremental {
        let mut inc = Incremental::empty();
        // void
        inc.nodes.push(0);
        inc.state = States::with_void(1);
        inc.link.push(0, false, false);
        inc.prim_table = CandTable::with_capacity(1 << 12);
        inc.struct_table = CandTable::with_capacity(1 << 12);
        inc.gave_up = (!Self::supported()).then_some("the CPU has no POPCNT");
        inc
    }

    /// Whether this machine runs the chunked passes: on x86-64 they count
    /// bits with POPCNT, which the baseline target does not include (every
    /// x86-64 CPU since 2008 has it). Without it [`Incremental::finish`]
    /// runs the whole-BTF dedup.
    pub fn supported() -> bool {
        #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
        {
            std::arch::is_x86_feature_detected!("popcnt")
        }
        #[cfg(not(all(target_arch = "x86_64", not(target_feature = "popcnt"))))]
        {
            true
        }
    }

    /// Why the chunked passes stopped, if they did.
    pub fn gave_up(&self) -> Option<&'static str> {
        self.gave_up
    }

    fn stop(&mut self, why: &'static str) {
        // its memory goes now, not when the whole-BTF dedup is done
        *self = Incremental { gave_up: Some(why), ..Incremental::empty() };
    }

    fn empty() -> Incremental {
        Incremental {
            nodes: Offsets::growing(),
            link: SparseLinks::default(),
            state: States::default(),
            prim_table: CandTable::with_capacity(0),
            struct_table: CandTable::with_capacity(0),
            prim_log: Vec::new(),
            struct_log: Vec::new(),
            hypot: HypotMap::new(),
            spare_hypot: HypotMap::new(),
            eq_stack: Vec::new(),
            enum_fwds: Default::default(),
            enums: Default::default(),
            end: 1,
            words_done: 0,
            gave_up: None,
        }
    }

    /// Lays out the types `btf` gained since the last call and runs the
    /// primitive and struct passes over them. `btf` only ever grows by
    /// appending whole types (the encoder's merge).
    pub fn feed(&mut self, btf: &Btf) {
        if self.gave_up.is_some() {
            return;
        }
        if btf.base().is_some() {
            return self.stop("split BTF");
        }
        let words = btf.raw_words();
        let new_end = btf.type_count() + 1;
        let from = self.end;
        let n = (new_end - from) as usize;
        self.state.grow_to(new_end as usize);
        self.nodes.reserve(n);
        self.link.reserve(n);
        let mut off = self.words_done;
        for id in from..new_end {
            // a reference past the types so far (a shifted C++ CU) would
            // make a walk read types not laid out yet
            let Some(len) = check_record(words, off, new_end, true) else {
                return self.stop("a record refers past the types merged so far");
            };
            if off > u32::MAX as usize || !self.nodes.push(off as u32) {
                return self.stop("records too long for the packed offsets");
            }
            let rec = &words[off..off + len];
            let k = kind(rec);
            self.link.push(id, matches!(k, INT | ENUM | ENUM64 | FWD | FLOAT | STRUCT | UNION), is_enum_fwd(rec));
            if represents_itself(k) {
                self.state.set(id, ST_MAPPED);
            }
            off += len;
        }
        self.words_done = off;
        let mut d = self.take_dedup(words, new_end, from);
        std::mem::swap(&mut d.table, &mut self.prim_table);
        std::mem::swap(&mut d.log, &mut self.prim_log);
        let mut ok = d.prim_types_in(from, new_end).is_ok() && d.give_up.is_none();
        std::mem::swap(&mut d.table, &mut self.prim_table);
        std::mem::swap(&mut d.log, &mut self.prim_log);
        if ok {
            std::mem::swap(&mut d.table, &mut self.struct_table);
            std::mem::swap(&mut d.log, &mut self.struct_log);
            ok = d.struct_types_in(from, new_end).is_ok() && d.give_up.is_none();
            std::mem::swap(&mut d.table, &mut self.struct_table);
            std::mem::swap(&mut d.log, &mut self.struct_log);
        }
        let why = d.give_up.unwrap_or("an error in the primitive or struct pass");
        self.put_back(d);
        self.end = new_end;
        if !ok {
            self.stop(why);
        }
    }

    /// Dedups `btf`, the BTF every [`Incremental::feed`] saw a prefix of, as
    /// [`dedup_owned`] would: from the chunked passes' state if they went
    /// through, else from scratch.
    pub fn finish(mut self, btf: Btf, opts: &Options) -> Result<Btf, DedupError> {
        let usable = opts.base_index.is_none()
            && (opts.strings == StringMode::Keep || strings_already_unique(&btf));
        if usable {
            // the types after the last chunk: functions, DATASECs
            self.feed(&btf);
        }
        if !usable || self.gave_up.is_some() {
            drop(self);
            let mut btf = btf;
            if btf.offsets_deferred() {
                btf.build_offsets();
            }
            return dedup_owned(btf, opts);
        }
        let clock = Timer::new(opts.timings);
        let end = self.end;
        let (words, strtab, endian, base) = if btf.offsets_deferred() {
            btf.into_parts_deferred()
        } else {
            let (w, offs, s, e, b) = btf.into_parts();
            drop(offs);
            (w, s, e, b)
        };
        // libbpf's table after its struct pass: every primitive, then every
        // struct, in the order the passes inserted them
        let mut table = CandTable::with_capacity(1 << 16);
        for &(h, id) in self.prim_log.iter().chain(&self.struct_log) {
            table.insert(h, id);
        }
        let Incremental { nodes, link, state, .. } = self;
        let mut d = Dedup::new(&words, nodes, link.into_dense(), state, 1, end, table, None);
        clock.lap("table");
        let (survivors, nwords) = d.last_passes(&clock)?;
        let Dedup { nodes, link, .. } = d;
        let (w, o) = compact(Cow::Owned(words), &nodes, &link, &survivors, nwords)?;
        clock.lap("compact+remap");
        Ok(Btf::from_parts(w, o, strtab, endian, base))
    }

    fn take_dedup<'w>(&mut self, words: &'w [u32], end: u32, struct_done: u32) -> Dedup<'w, SparseLinks> {
        let nodes = std::mem::replace(&mut self.nodes, Offsets::growing());
        let (link, state) = (std::mem::take(&mut self.link), std::mem::take(&mut self.state));
        let mut d = Dedup::new(words, nodes, link, state, 1, end, CandTable::with_capacity(0), None);
        d.hypot = std::mem::take(&mut self.hypot);
        d.spare_hypot = std::mem::take(&mut self.spare_hypot);
        d.eq_stack = std::mem::take(&mut self.eq_stack);
        d.enum_fwds = std::mem::take(&mut self.enum_fwds);
        d.enums = std::mem::take(&mut self.enums);
        d.overlap = true;
        d.struct_done = struct_done;
        d
    }

    fn put_back(&mut self, d: Dedup<'_, SparseLinks>) {
        self.nodes = d.nodes;
        self.link = d.link;
        self.state = d.state;
        self.hypot = d.hypot;
        self.eq_stack = d.eq_stack;
        self.enum_fwds = d.enum_fwds;
        self.enums = d.enums;
        self.spare_hypot = d.spare_hypot;
    }
}

/// Makes room for `extra` more elements, growing by a thirty-second past
/// 64 K elements instead of doubling: these columns get an entry per type
/// (or per 32 or 64 types) and sit at the encoder's memory peak.
pub(super) fn reserve_step<T>(v: &mut Vec<T>, extra: usize) {
    let len = v.len();
    if len + extra <= v.capacity() {
        return;
    }
    let step = if len < (1 << 16) { len.max(extra) } else { (len / 32).max(extra) };
    v.reserve_exact(step);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, Kind, TypeId, write::to_bytes};

    /// Builds a BTF chunk by chunk, feeding an `Incremental` after each, and
    /// checks its result against the whole-BTF dedup; returns why the
    /// chunked passes gave up, if they did.
    fn same_as_whole(chunks: &[&dyn Fn(&mut Btf)]) -> Option<&'static str> {
        let mut b = Btf::new(Endian::Little);
        let mut inc = Incremental::new();
        for add in chunks {
            add(&mut b);
            inc.feed(&b);
        }
        let why = inc.gave_up();
        let whole = dedup(&b, &Options::default()).expect("whole dedup");
        let chunked = inc.finish(b, &Options::default()).expect("chunked dedup");
        assert_eq!(to_bytes(&chunked), to_bytes(&whole), "chunked and whole dedup differ");
        why
    }

    fn int(b: &mut Btf) -> TypeId {
        b.add_int(b"int", 4, crate::btf::INT_SIGNED)
    }

    /// struct `name` { `ty` x; }
    fn holder(b: &mut Btf, name: &[u8], ty: TypeId) -> TypeId {
        let s = b.begin(Kind::Struct, name, 8, false);
        b.push_member(b"x", ty, 0, 0);
        s
    }

    #[test]
    fn chunks_give_the_whole_result_across_fwds_and_duplicates() {
        // CU 1: holder -> fwd node; CU 2: node defined (resolves CU 1's fwd
        // by a walk); CU 3: both again, mapped onto the first copies
        let cu1 = |b: &mut Btf| {
            let f = b.add_fwd(b"node", false);
            let p = b.add_ref(Kind::Ptr, f);
            holder(b, b"holder", p);
        };
        let cu2 = |b: &mut Btf| {
            let i = int(b);
            let n = holder(b, b"node", i);
            let p = b.add_ref(Kind::Ptr, n);
            holder(b, b"holder", p);
        };
        assert_eq!(same_as_whole(&[&cu1, &cu2, &cu2, &cu1]), None);
    }

    #[test]
    fn a_struct_passing_two_candidates_gives_up_with_the_same_result() {
        // two holders that differ in what `a` is, then one that only has a
        // fwd of `a`: equivalent to both, and which one libbpf's table
        // offers first depends on primitives not merged yet
        let with_a = |size: u32| {
            move |b: &mut Btf| {
                let i = b.add_int(b"int", size, 0);
                let a = holder(b, b"a", i);
                let p = b.add_ref(Kind::Ptr, a);
                holder(b, b"h", p);
            }
        };
        let (a4, a8) = (with_a(4), with_a(8));
        let fwd = |b: &mut Btf| {
            let f = b.add_fwd(b"a", false);
            let p = b.add_ref(Kind::Ptr, f);
            holder(b, b"h", p);
        };
        let why = same_as_whole(&[&a4, &a8, &fwd]);
        if Incremental::supported() {
            assert_eq!(why, Some("a struct matched two candidates"));
        }
    }

    #[test]
    fn an_enum_fwd_re_pointed_after_a_walk_compared_it_gives_up_with_the_same_result() {
        // CU 1: a holder of a pointer to an enum fwd `e`. CU 2: the same
        // (its fwd maps to CU 1's), or a holder of a pointer to a full
        // `e {A}`, which re-points CU 1's fwd in its primitive pass; its
        // walk then settles (full e, CU 1's fwd) by their links. CU 3: a
        // full `e {B}` re-points CU 1's fwd again: the whole-BTF walk of
        // CU 2 saw that done, the chunked one did not.
        let fwd_holder = |b: &mut Btf| {
            let f = b.begin(Kind::Enum, b"e", 4, false);
            let p = b.add_ref(Kind::Ptr, f);
            holder(b, b"h", p);
        };
        let cu1 = |b: &mut Btf| fwd_holder(b);
        let cu2 = |b: &mut Btf| fwd_holder(b);
        let cu3 = |b: &mut Btf| {
            b.begin(Kind::Enum, b"e", 4, false);
            b.push_enum_value(b"B", 1);
            let i = int(b);
            holder(b, b"other", i);
        };
        let cu2b = |b: &mut Btf| {
            // a holder whose member is a full enum: compared with CU 1's
            // fwd through links
            let e = b.begin(Kind::Enum, b"e", 4, false);
            b.push_enum_value(b"A", 0);
            let p = b.add_ref(Kind::Ptr, e);
            holder(b, b"h", p);
        };
        same_as_whole(&[&cu1, &cu2, &cu3]);
        let why = same_as_whole(&[&cu1, &cu2b, &cu3]);
        if Incremental::supported() {
            assert_eq!(why, Some("an enum forward declaration compared in a walk was re-pointed later"));
        }
    }

    #[test]
    fn a_reference_past_the_chunk_gives_up_with_the_same_result() {
        let cu1 = |b: &mut Btf| {
            // a pointer to the type the next chunk adds
            let next = TypeId(b.type_count() + 2);
            b.add_ref(Kind::Ptr, next);
        };
        let cu2 = |b: &mut Btf| {
            let i = int(b);
            holder(b, b"s", i);
        };
        let why = same_as_whole(&[&cu1, &cu2, &cu2]);
        if Incremental::supported() {
            assert_eq!(why, Some("a record refers past the types merged so far"));
        }
    }

    #[test]
    fn sparse_links_read_like_a_dense_column() {
        let mut l = SparseLinks::default();
        let stored = |id: u32| id % 3 != 1;
        for id in 0..300 {
            l.push(id, stored(id), false);
        }
        for id in (0..300).filter(|&id| stored(id)) {
            l.set(id, id / 2);
        }
        let want: Vec<u32> = (0..300).map(|id| if stored(id) { id / 2 } else { id }).collect();
        assert!((0..300).all(|id| l.get(id) == want[id as usize]));
        assert_eq!(l.into_dense(), want);
    }
}
