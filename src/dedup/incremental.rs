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
//! At the end the remaining passes run on the whole BTF as before. They
//! need no candidate table: the FWD pass looks nothing up, and the
//! reference pass keeps its own index without a base (`refindex`).
//!
//! Only standalone BTF (no base) with the encoder's string section kept is
//! handled this way; anything else goes to [`dedup_owned`]. The state kept
//! during the CU loop is what the struct pass reads for every id: packed
//! record offsets (`Offsets`), the state bits and the links. It pays for
//! itself many times over: after each chunk, the structs and unions no
//! later pass will read (mapped onto an earlier copy, and not reachable
//! from a canonical type) are cut down to stubs ([`stub_deferred`]), much
//! of a vmlinux's records. A walk
//! that reaches a stub anyway makes the passes give up; the BTF can then
//! not go through the whole-BTF dedup, and the caller encodes it again
//! ([`Incremental::stubbed`]).

use std::borrow::Cow;

use super::stub::{is_stub, stub_deferred};
use super::*;
use crate::btf::TypeId;

/// The state of libbpf's first passes over the CUs merged so far.
pub struct Incremental {
    /// Ids `1..st.end` are laid out and through both passes.
    st: PassState<TrackedLinks>,
    /// The primitive pass's and the struct pass's candidate tables, swapped
    /// into `st` for their pass.
    prim_table: CandTable,
    struct_table: CandTable,
    /// Where the record of id `st.end` starts.
    words_done: usize,
    /// Why the chunked passes stopped (the whole-BTF dedup runs instead).
    gave_up: Option<&'static str>,
    /// Whether records were stubbed ([`stub_deferred`]): the BTF fed
    /// can then no longer go through the whole-BTF dedup.
    stubbed: bool,
    /// Whether to stub at all: not when later CUs may refer to this
    /// chunk's records (the encoder's collapse of exact copies).
    stubs: bool,
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
        inc.st.nodes.push(0);
        inc.st.state = States::with_void(1);
        inc.st.link.push(TypeId::VOID, false);
        inc.st.overlap = true;
        inc.prim_table = CandTable::with_capacity(1 << 12);
        inc.struct_table = CandTable::with_capacity(1 << 12);
        inc
    }

    /// The passes by `rules` (libbpf 374f7807's by default).
    pub fn with_rules(mut self, rules: Rules) -> Incremental {
        self.st.rules = rules;
        self
    }

    /// No stubbing from now on: for a BTF whose later types may refer to
    /// earlier chunks' records (the encoder leaving out exact copies). The
    /// encoder says so with its first chunk, before any stub is cut.
    pub fn keep_records(&mut self) {
        debug_assert!(!self.stubbed, "records kept after some were stubbed");
        self.stubs = false;
    }

    /// Why the chunked passes stopped, if they did.
    pub fn gave_up(&self) -> Option<&'static str> {
        self.gave_up
    }

    /// Whether the BTF fed has lost records: if the passes gave up too, it
    /// must be encoded again for the whole-BTF dedup.
    pub fn stubbed(&self) -> bool {
        self.stubbed
    }

    fn stop(&mut self, why: &'static str) {
        // its memory goes now, not when the whole-BTF dedup is done
        *self = Incremental {
            gave_up: Some(why),
            stubbed: self.stubbed,
            stubs: self.stubs,
            ..Incremental::empty()
        };
    }

    fn empty() -> Incremental {
        Incremental {
            st: Incremental::placeholder(),
            prim_table: CandTable::with_capacity(0),
            struct_table: CandTable::with_capacity(0),
            words_done: 0,
            gave_up: None,
            stubbed: false,
            stubs: true,
        }
    }

    /// A state of no ids, holding no memory (taken out while a chunk's
    /// passes run on the real one).
    fn placeholder() -> PassState<TrackedLinks> {
        PassState::new(
            Offsets::growing(),
            TrackedLinks::default(),
            States::default(),
            TypeId::new(1),
            TypeId::new(1),
            CandTable::EMPTY,
        )
    }

    /// Lays out the types `btf` gained since the last call and runs the
    /// primitive and struct passes over them; then, if `btf`'s offsets are
    /// deferred, cuts the structs no later pass compares down to stubs
    /// ([`stub_deferred`]). `btf` only ever grows by appending whole
    /// types (the encoder's merge).
    pub fn feed(&mut self, btf: &mut Btf) {
        if self.gave_up.is_some() {
            return;
        }
        if btf.base().is_some() {
            return self.stop("split BTF");
        }
        let words = btf.raw_words();
        let new_end = btf.type_count() + 1;
        let from = self.st.end;
        let n = (new_end - from) as usize;
        self.st.state.grow_to(new_end as usize);
        self.st.nodes.reserve(n);
        self.st.link.reserve(n);
        let mut off = self.words_done;
        for id in from..new_end {
            // a reference past the types so far (a shifted C++ CU) would
            // make a walk read types not laid out yet
            let Some(len) = check_record(words, off, TypeId::new(new_end), true) else {
                return self.stop("a record refers past the types merged so far");
            };
            if off > u32::MAX as usize || !self.st.nodes.push(off as u32) {
                return self.stop("records too long for the packed offsets");
            }
            let rec = &words[off..off + len];
            let k = rec.kind();
            let id = TypeId::new(id);
            self.st.link.push(id, is_enum_fwd(rec));
            if represents_itself(k) {
                self.st.state.set(id, State::Mapped);
            }
            off += len;
        }
        self.words_done = off;
        self.st.end = new_end;
        let mut d = Dedup {
            base_index: None,
            words,
            st: std::mem::replace(&mut self.st, Incremental::placeholder()),
        };
        std::mem::swap(&mut d.st.table, &mut self.prim_table);
        let (from, new_end) = (TypeId::new(from), TypeId::new(new_end));
        let mut ok = d.prim_types_in(from, new_end).is_ok() && d.st.give_up.is_none();
        std::mem::swap(&mut d.st.table, &mut self.prim_table);
        if ok {
            std::mem::swap(&mut d.st.table, &mut self.struct_table);
            ok = d.struct_types_in(from, new_end).is_ok() && d.st.give_up.is_none();
            std::mem::swap(&mut d.st.table, &mut self.struct_table);
        }
        let why = d.st.give_up.unwrap_or("an error in the primitive or struct pass");
        self.st = d.st;
        if !ok {
            return self.stop(why);
        }
        if self.stubs
            && btf.offsets_deferred()
            && let Err(why) = self.stub_unreachable(btf, from, new_end)
        {
            self.stop(why);
        }
    }

    /// Stubs the structs and unions of `from..end` (the chunk just through
    /// both passes) that later passes never read. A struct pass walk reads
    /// a record on its candidate side (the chunk it runs for) or on its
    /// canonical side, which starts at a canonical struct and follows the
    /// record's own references, and resolved FWDs, which are canonical. So
    /// a record of this chunk is read again only if it is canonical or
    /// reachable from a canonical struct or union of this chunk: the
    /// others are stubbed (55 of a vmlinux's 99 MB of struct records). The
    /// reference pass reads only reference kinds and canonical types, the
    /// FWD pass canonical ones, and the function phase names and kinds. A
    /// walk that meets a stub anyway (a CU referring to an earlier one's
    /// types) fails with an error, and the chunked passes give up.
    fn stub_unreachable(&mut self, btf: &mut Btf, from: TypeId, end: TypeId) -> Result<(), &'static str> {
        let (from, end) = (from.get(), end.get());
        let tid = TypeId::new;
        let words = btf.raw_words();
        let n = (end - from) as usize;
        let mut live = vec![0u64; n.div_ceil(64)];
        let mark = |live: &mut [u64], id: u32| -> bool {
            let (i, b) = (((id - from) >> 6) as usize, 1u64 << ((id - from) & 63));
            let new = live[i] & b == 0;
            live[i] |= b;
            new
        };
        let mut stack = Vec::new();
        // the first struct or union mapped onto another: none, nothing to stub
        let mut first_mapped = None;
        // (under libbpf 1.8 typedefs are compared in the struct pass too:
        // what a canonical one refers to stays whole)
        let typedefs = self.st.rules.typedefs_in_struct_pass();
        for id in from..end {
            let w = rec_from(words, &self.st.nodes, tid(id));
            let composite = is_composite(w.kind());
            let compared = composite || (typedefs && w.kind() == TYPEDEF);
            if !compared {
                continue;
            }
            let canonical = self.st.state.get(tid(id)) == State::Mapped && self.st.link.get(tid(id)) == tid(id);
            if !canonical {
                if composite {
                    first_mapped = first_mapped.or(Some(id));
                }
                continue;
            }
            if mark(&mut live, id) {
                stack.push(id);
            }
            while let Some(x) = stack.pop() {
                let w = rec_from(words, &self.st.nodes, tid(x));
                let mut bad = false;
                for_each_id_pos(w, |p| {
                    let t = w[p];
                    if t >= from {
                        if mark(&mut live, t) {
                            stack.push(t);
                        }
                    } else if t != 0 && is_stub(rec_from(words, &self.st.nodes, tid(t))) {
                        bad = true;
                    }
                });
                if bad {
                    return Err("a canonical type refers to a stubbed record of an earlier chunk");
                }
            }
        }
        let is_live = |id: u32| live[((id - from) >> 6) as usize] & (1u64 << ((id - from) & 63)) != 0;
        // the first record to stub: the ones before it stay where they are
        let Some(first) = first_mapped.and_then(|m| {
            (m..end).find(|&id| is_composite(rec_from(words, &self.st.nodes, tid(id)).kind()) && !is_live(id))
        }) else {
            return Ok(());
        };
        let at = self.st.nodes.get(tid(first)) as usize;
        let nodes = &mut self.st.nodes;
        stub_deferred(
            btf,
            TypeId::new(first),
            at,
            |id| !is_live(id),
            |id, off| nodes.move_down(TypeId::new(id), off as u32),
        );
        self.stubbed = true;
        self.words_done = btf.raw_words().len();
        Ok(())
    }

    /// Dedups `btf`, the BTF every [`Incremental::feed`] saw a prefix of, as
    /// [`dedup_owned`] would: from the chunked passes' state if they went
    /// through, else from scratch.
    pub fn finish(mut self, btf: Btf, opts: &Options) -> Result<Btf, DedupError> {
        let usable = opts.base_index.is_none()
            && opts.rules == self.st.rules
            && (opts.strings == StringMode::Keep || strings_already_unique(&btf));
        let mut btf = btf;
        if usable {
            // the types after the last chunk: functions, DATASECs
            self.feed(&mut btf);
        }
        if !usable || self.gave_up.is_some() {
            if self.stubbed {
                return Err(DedupError::Stubbed);
            }
            drop(self);
            if btf.offsets_deferred() {
                btf.build_offsets();
            }
            return dedup_owned(btf, opts);
        }
        let clock = Timer::new(opts.timings);
        let format = btf.format().clone();
        let (words, strtab, endian, base) = if btf.offsets_deferred() {
            btf.into_parts_deferred()
        } else {
            let (w, offs, s, e, b) = btf.into_parts();
            drop(offs);
            (w, s, e, b)
        };
        // The passes left are the FWD pass, which looks nothing up, and the
        // reference pass, which without a base keeps its own index
        // (`refindex`): libbpf's table after the struct pass is not needed.
        let Incremental { st, .. } = self;
        let mut st = st.with_links(TrackedLinks::into_column);
        st.overlap = false;
        // the primitive pass's indexes go before the passes left, as the
        // tables do
        st.enum_fwds = Default::default();
        st.enums = Default::default();
        let Passed { words: w, offs: o, .. } = passes(Cow::Owned(words), st, None, Done::Structs, &clock)?;
        let mut out = Btf::from_parts(w, o, strtab, endian, base);
        out.set_format(format);
        Ok(out)
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
    let step = if len < (1 << 16) {
        len.max(extra)
    } else {
        (len / 32).max(extra)
    };
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
            inc.feed(&mut b);
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
        assert_eq!(why, Some("a struct matched two candidates"));
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
        assert_eq!(
            why,
            Some("an enum forward declaration compared in a walk was re-pointed later")
        );
    }

    /// The chunks of [`same_as_whole`] appended with offsets deferred, as
    /// the encoder does: the passes stub what they will not compare again.
    /// Returns the chunked result (or error) and whether records were
    /// stubbed, and checks a result against the whole-BTF dedup.
    fn stubbed_run(chunks: &[&dyn Fn(&mut Btf)]) -> (Result<Btf, DedupError>, bool, Option<&'static str>) {
        stubbed_run_by(Rules::default(), chunks)
    }

    fn stubbed_run_by(
        rules: Rules,
        chunks: &[&dyn Fn(&mut Btf)],
    ) -> (Result<Btf, DedupError>, bool, Option<&'static str>) {
        let mut plain = Btf::new(Endian::Little);
        let mut b = Btf::new(Endian::Little);
        b.defer_offsets();
        let mut inc = Incremental::new().with_rules(rules);
        for add in chunks {
            add(&mut plain);
            add(&mut b);
            inc.feed(&mut b);
        }
        let (stubbed, why) = (inc.stubbed(), inc.gave_up());
        let opts = Options {
            rules,
            ..Options::default()
        };
        let whole = dedup(&plain, &opts).expect("whole dedup");
        let chunked = inc.finish(b, &opts);
        if let Ok(c) = &chunked {
            assert_eq!(
                to_bytes(c),
                to_bytes(&whole),
                "chunked (stubbing) and whole dedup differ"
            );
        }
        (chunked, stubbed, why)
    }

    #[test]
    fn mapped_structs_no_canonical_reaches_are_stubbed_and_the_result_stays() {
        // CU: struct inner { int x; }; struct outer { struct inner *x; }.
        // Its second and third copies map onto the first: no canonical type
        // reaches them, so both structs of each are stubbed; the first
        // copy's are canonical and stay.
        let cu = |b: &mut Btf| {
            let i = int(b);
            let inner = holder(b, b"inner", i);
            let p = b.add_ref(Kind::Ptr, inner);
            holder(b, b"outer", p);
        };
        let mut b = Btf::new(Endian::Little);
        b.defer_offsets();
        let mut inc = Incremental::new();
        let mut lens = Vec::new();
        for _ in 0..3 {
            cu(&mut b);
            inc.feed(&mut b);
            lens.push(b.raw_words().len());
        }
        // each copy: int 4 words, two one-member structs 6 each, ptr 3;
        // stubbed, the structs take 3 each
        assert_eq!(lens, vec![19, 19 + 13, 19 + 26]);
        assert!(inc.stubbed() && inc.gave_up().is_none());
        // stubs keep name, kind and size for the function phase
        let t = b.get(TypeId::new(6)).expect("type 6");
        assert_eq!((t.kind(), t.vlen(), t.size()), (Kind::Struct, 0, 8));
        let (r, stubbed, why) = stubbed_run(&[&cu, &cu, &cu]);
        assert!(r.is_ok() && stubbed && why.is_none());
    }

    /// Under libbpf 1.8 a canonical typedef is compared in the struct pass
    /// like a struct: the mapped struct it names stays whole, so that a
    /// later typedef of the name whose struct differs is compared with it,
    /// not with a stub.
    #[test]
    fn a_struct_a_canonical_typedef_names_is_not_stubbed_under_libbpf_1_8() {
        let s_of = |b: &mut Btf, size: u32| {
            let i = b.add_int(b"int", size, crate::btf::INT_SIGNED);
            holder(b, b"s", i)
        };
        let cu1 = |b: &mut Btf| {
            s_of(b, 4);
        };
        let cu2 = |b: &mut Btf| {
            let s = s_of(b, 4);
            b.add_typedef(b"T", s);
        };
        let cu3 = |b: &mut Btf| {
            let s = s_of(b, 8);
            b.add_typedef(b"T", s);
        };
        let (r, stubbed, why) = stubbed_run_by(Rules::Libbpf1_8, &[&cu1, &cu2, &cu3]);
        assert!(r.is_ok(), "{:?}", r.err());
        assert_eq!((stubbed, why), (false, None), "CU 2's s stays whole: T names it");
        // the same under v1.31's rules, where typedefs wait for the
        // reference pass
        let (r, _, why) = stubbed_run_by(Rules::Libbpf374f7807, &[&cu1, &cu2, &cu3]);
        assert!(r.is_ok() && why.is_none());
    }

    #[test]
    fn a_struct_a_canonical_type_reaches_is_not_stubbed() {
        // CU 2's `inner` maps onto CU 1's, but CU 2's new `other` (canonical)
        // reaches it: a later walk against `other` reads it
        let cu1 = |b: &mut Btf| {
            let i = int(b);
            holder(b, b"inner", i);
        };
        let cu2 = |b: &mut Btf| {
            let i = int(b);
            let inner = holder(b, b"inner", i);
            let p = b.add_ref(Kind::Ptr, inner);
            holder(b, b"other", p);
        };
        let (r, stubbed, why) = stubbed_run(&[&cu1, &cu2, &cu2]);
        assert!(r.is_ok() && why.is_none());
        // CU 3's copy of both is stubbed
        assert!(stubbed);
        let (r, stubbed, _) = stubbed_run(&[&cu1, &cu2]);
        assert!(r.is_ok() && !stubbed, "nothing unreachable to stub");
    }

    #[test]
    fn reaching_a_stub_gives_up_and_finish_refuses() {
        // CU 2 (ids 3, 4) maps onto CU 1 and its struct 4 is stubbed. Later
        // CUs that point at it (not what a compiler emits) make the passes
        // give up: a canonical type reaching it, or a walk reading it.
        let cu = |b: &mut Btf| {
            let i = int(b);
            holder(b, b"s", i);
        };
        let back = |b: &mut Btf| {
            let p = b.add_ref(Kind::Ptr, TypeId::new(4));
            holder(b, b"h", p);
        };
        let (r, stubbed, why) = stubbed_run(&[&cu, &cu, &back]);
        assert!(
            stubbed && r.is_err(),
            "the whole-BTF dedup cannot run on stubbed records"
        );
        assert_eq!(
            why,
            Some("a canonical type refers to a stubbed record of an earlier chunk")
        );
        // an `h` over another `s`, then one over the stub: the walk
        // compares the stub with that `s`
        let other = |b: &mut Btf| {
            let i = b.add_int(b"long", 8, 0);
            let s = holder(b, b"s", i);
            let p = b.add_ref(Kind::Ptr, s);
            holder(b, b"h", p);
        };
        let (r, stubbed, why) = stubbed_run(&[&cu, &cu, &other, &back]);
        assert!(stubbed && r.is_err());
        assert_eq!(why, Some("an error in the primitive or struct pass"));
    }

    #[test]
    fn a_reference_past_the_chunk_gives_up_with_the_same_result() {
        let cu1 = |b: &mut Btf| {
            // a pointer to the type the next chunk adds
            let next = TypeId::new(b.type_count() + 2);
            b.add_ref(Kind::Ptr, next);
        };
        let cu2 = |b: &mut Btf| {
            let i = int(b);
            holder(b, b"s", i);
        };
        let why = same_as_whole(&[&cu1, &cu2, &cu2]);
        assert_eq!(why, Some("a record refers past the types merged so far"));
    }
}
