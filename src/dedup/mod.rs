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
//! # Invariants
//!
//! * `map[id]` is UNPROCESSED, IN_PROGRESS or an id; every write points one
//!   chain end at another chain end (or at a type being processed), so the
//!   links form a forest and `resolve` terminates.
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

pub mod table;

use std::borrow::Cow;
use std::time::Instant;

use thiserror::Error;

use crate::btf::{Btf, StrTab};
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

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub strings: StringMode,
    /// Print phase timings to stderr.
    pub timings: bool,
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

const UNPROCESSED: u32 = u32::MAX;
const IN_PROGRESS: u32 = u32::MAX - 1;
const MAX_ID: u32 = 0x7fff_ffff;
const MAX_EMBED_DEPTH: u32 = 4096;

const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const UNION: u32 = 5;
const ENUM: u32 = 6;
const FWD: u32 = 7;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const FUNC: u32 = 12;
const FUNC_PROTO: u32 = 13;
const VAR: u32 = 14;
const DATASEC: u32 = 15;
const FLOAT: u32 = 16;
const DECL_TAG: u32 = 17;
const TYPE_TAG: u32 = 18;
const ENUM64: u32 = 19;

#[inline]
fn kind(w: &[u32]) -> u32 {
    (w[1] >> 24) & 0x1f
}
#[inline]
fn vlen(w: &[u32]) -> usize {
    (w[1] & 0xffff) as usize
}
#[inline]
fn kflag(w: &[u32]) -> bool {
    w[1] >> 31 != 0
}
#[inline]
fn is_composite(k: u32) -> bool {
    k == STRUCT || k == UNION
}
#[inline]
fn is_any_enum(k: u32) -> bool {
    k == ENUM || k == ENUM64
}
#[inline]
fn is_mapped(m: u32) -> bool {
    m <= MAX_ID
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
    is_any_enum(kind(w)) && vlen(w) == 0
}
fn compat_enum(a: &[u32], b: &[u32]) -> bool {
    if !is_enum_fwd(a) && !is_enum_fwd(b) {
        return equal_enum(a, b);
    }
    a[0] == b[0] && is_any_enum(kind(a)) && is_any_enum(kind(b))
}
fn shallow_equal_struct(a: &[u32], b: &[u32]) -> bool {
    if !equal_common(a, b) {
        return false;
    }
    a[3..].chunks_exact(3).zip(b[3..].chunks_exact(3)).all(|(x, y)| x[0] == y[0] && x[2] == y[2])
}
fn equal_array(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[3] == b[3] && a[4] == b[4] && a[5] == b[5]
}
fn compat_fnproto(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0]
        && a[1] == b[1]
        && a[3..].chunks_exact(2).zip(b[3..].chunks_exact(2)).all(|(x, y)| x[0] == y[0])
}

/// Positions of the type-id words of a record, in libbpf's field-iterator order
/// (`BTF_FIELD_ITER_IDS`; note FWD's size/type word counts).
fn for_each_id_pos(w: &[u32], mut f: impl FnMut(usize)) {
    match kind(w) {
        FWD | CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | VAR | DECL_TAG | TYPE_TAG => f(2),
        ARRAY => {
            f(3);
            f(4);
        }
        STRUCT | UNION => (0..vlen(w)).for_each(|i| f(3 + 3 * i + 1)),
        FUNC_PROTO => {
            f(2);
            (0..vlen(w)).for_each(|i| f(3 + 2 * i + 1));
        }
        DATASEC => (0..vlen(w)).for_each(|i| f(3 + 3 * i)),
        _ => {}
    }
}

static VOID: [u32; 3] = [0, 0, 0];

/// Read access to every record of the id space (base and own).
struct Types<'a> {
    base: Option<&'a Btf>,
    start: u32,
    own: Cow<'a, [u32]>,
    offs: &'a [u32],
}

impl Types<'_> {
    #[inline]
    fn rec(&self, id: u32) -> &[u32] {
        if id >= self.start {
            let i = (id - self.start) as usize;
            let s = self.offs[i] as usize;
            let e = match self.offs.get(i + 1) {
                Some(&e) => e as usize,
                None => self.own.len(),
            };
            &self.own[s..e]
        } else if id == 0 {
            &VOID
        } else {
            // ids below `start` exist only with a base
            self.base.map(|b| b.ty(crate::btf::TypeId(id)).words).unwrap_or(&VOID)
        }
    }
}

struct Dedup<'a> {
    t: Types<'a>,
    /// One past the last id.
    end: u32,
    map: Vec<u32>,
    hypot: Vec<u32>,
    hypot_list: Vec<u32>,
    adjust_canon: bool,
    table: CandTable,
    /// Pending (candidate, canonical) pairs of one graph-equivalence check.
    eq_stack: Vec<(u32, u32)>,
    /// (type, next child) frames of the reference pass.
    ref_stack: Vec<(u32, u32)>,
    scratch: Vec<u32>,
    scratch2: Vec<u32>,
}

/// Deduplicates `btf` (over its base, if split) as libbpf's `btf__dedup` does.
pub fn dedup(btf: &Btf, opts: &Options) -> Result<Btf, DedupError> {
    let clock = Timer::new(opts.timings);
    let base = btf.base().map(|b| &**b);
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

    let mut d = Dedup {
        t: Types { base, start, own, offs: btf.type_offsets() },
        end,
        map: Vec::new(),
        hypot: vec![UNPROCESSED; end as usize],
        hypot_list: Vec::new(),
        adjust_canon: false,
        table: CandTable::with_capacity(1024),
        eq_stack: Vec::new(),
        ref_stack: Vec::new(),
        scratch: Vec::new(),
        scratch2: Vec::new(),
    };
    d.init_map();
    d.prep()?;
    clock.lap("init+prep");
    d.prim_types()?;
    clock.lap("primitives");
    d.struct_types()?;
    clock.lap("structs");
    d.resolve_fwds();
    clock.lap("fwds");
    d.ref_types()?;
    clock.lap("refs");
    let (words, offs) = d.compact_and_remap()?;
    clock.lap("compact+remap");
    Ok(Btf::from_parts(words, offs, strtab, btf.endian(), btf.base().cloned()))
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
    for (i, &s) in offs.iter().enumerate() {
        let e = offs.get(i + 1).map(|&e| e as usize).unwrap_or(words.len());
        Btf::for_each_str_ref_mut(&mut words[s as usize..e], |off| {
            if *off == 0 || *off < start_str {
                return;
            }
            let s = btf.str_at(crate::btf::StrOff(*off)).unwrap_or(b"");
            // `intern` looks in the base first, then the new table: libbpf's order.
            *off = tab.intern(s);
        });
    }
    (words, tab)
}

impl Dedup<'_> {
    #[inline]
    fn resolve(&self, mut id: u32) -> u32 {
        loop {
            let m = self.map[id as usize];
            if !is_mapped(m) || m == id {
                return id;
            }
            id = m;
        }
    }

    /// A FWD whose chain ends in a non-FWD type resolves to it.
    fn resolve_fwd(&self, id: u32) -> u32 {
        if kind(self.t.rec(id)) != FWD {
            return id;
        }
        let r = self.resolve(id);
        if kind(self.t.rec(r)) != FWD { r } else { id }
    }

    fn init_map(&mut self) {
        let n = self.end as usize;
        let mut map = vec![UNPROCESSED; n];
        map[0] = 0;
        for id in 1..self.t.start {
            map[id as usize] = id;
        }
        for id in self.t.start..self.end {
            let k = kind(self.t.rec(id));
            if k == VAR || k == DATASEC {
                map[id as usize] = id;
            }
        }
        self.map = map;
    }

    fn prep(&mut self) -> Result<(), DedupError> {
        for id in 1..self.t.start {
            let w = self.t.rec(id);
            let h = match kind(w) {
                VAR | DATASEC => continue,
                CONST | VOLATILE | RESTRICT | PTR | FWD | TYPEDEF | FUNC | FLOAT | TYPE_TAG => hash_common(w),
                INT | DECL_TAG => hash_int_tag(w),
                ENUM | ENUM64 => hash_enum(w),
                STRUCT | UNION => hash_struct(w),
                ARRAY => hash_array(w),
                FUNC_PROTO => hash_fnproto(w),
                _ => return Err(DedupError::Invalid { id, what: "unknown kind in the base" }),
            };
            self.table.insert(h, id);
        }
        Ok(())
    }

    fn prim_types(&mut self) -> Result<(), DedupError> {
        for id in self.t.start..self.end {
            let w = self.t.rec(id);
            let (h, mut new) = match kind(w) {
                CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | ARRAY | STRUCT | UNION | FUNC | FUNC_PROTO | VAR
                | DATASEC | DECL_TAG | TYPE_TAG => continue,
                INT => {
                    let h = hash_int_tag(w);
                    (h, self.first_match(h, |c| equal_int_tag(w, c)))
                }
                FWD | FLOAT => {
                    let h = hash_common(w);
                    (h, self.first_match(h, |c| equal_common(w, c)))
                }
                ENUM | ENUM64 => {
                    let h = hash_enum(w);
                    let mut found = None;
                    let mut cur = self.table.first(h);
                    while let Some((cand, c)) = cur {
                        let cw = self.t.rec(cand);
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
                            self.map[cand as usize] = id;
                        }
                        cur = self.table.next(c);
                    }
                    (h, found)
                }
                _ => return Err(DedupError::Invalid { id, what: "unknown kind" }),
            };
            let target = new.get_or_insert(id);
            self.map[id as usize] = *target;
            if *target == id {
                self.table.insert(h, id);
            }
        }
        Ok(())
    }

    /// First candidate under `h`, in table order, that `eq` accepts.
    #[inline]
    fn first_match(&self, h: u64, eq: impl Fn(&[u32]) -> bool) -> Option<u32> {
        let mut cur = self.table.first(h);
        while let Some((cand, c)) = cur {
            if eq(self.t.rec(cand)) {
                return Some(cand);
            }
            cur = self.table.next(c);
        }
        None
    }

    fn identical_arrays(&self, a: u32, b: u32) -> bool {
        let (x, y) = (self.t.rec(a), self.t.rec(b));
        kind(x) == ARRAY && kind(y) == ARRAY && equal_array(x, y)
    }

    fn identical_ptrs(&self, a: u32, b: u32) -> bool {
        let (x, y) = (self.t.rec(a), self.t.rec(b));
        kind(x) == PTR && kind(y) == PTR && x[2] == y[2]
    }

    /// Structs equal down to raw member ids (or identical arrays/structs there).
    fn identical_structs(&self, a: u32, b: u32, depth: u32) -> Result<bool, DedupError> {
        if depth > MAX_EMBED_DEPTH {
            return Err(DedupError::TooDeep { id: a, depth: MAX_EMBED_DEPTH });
        }
        let (x, y) = (self.t.rec(a), self.t.rec(b));
        if !is_composite(kind(x)) || kind(x) != kind(y) || !shallow_equal_struct(x, y) {
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
        for &k in &self.hypot_list {
            self.hypot[k as usize] = UNPROCESSED;
        }
        self.hypot_list.clear();
        self.adjust_canon = false;
    }

    /// libbpf's `btf_dedup_is_equiv`, walking pairs from an explicit stack in
    /// the recursion's pre-order.
    fn is_equiv(&mut self, cand: u32, canon: u32) -> Result<bool, DedupError> {
        self.eq_stack.clear();
        self.eq_stack.push((cand, canon));
        while let Some((c, k)) = self.eq_stack.pop() {
            if !self.equiv_step(c, k)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One node of the walk: `false` ends the check as "not equivalent";
    /// children to compare are pushed onto `eq_stack`.
    fn equiv_step(&mut self, c: u32, k: u32) -> Result<bool, DedupError> {
        if self.resolve(c) == self.resolve(k) {
            return Ok(true);
        }
        let k = self.resolve_fwd(k);
        let h = self.hypot[k as usize];
        if is_mapped(h) {
            if h == c {
                return Ok(true);
            }
            return Ok(self.identical_arrays(h, c) || self.identical_structs(h, c, 0)? || self.identical_ptrs(h, c));
        }
        self.hypot[k as usize] = c;
        self.hypot_list.push(k);

        let cw = self.t.rec(c);
        let kw = self.t.rec(k);
        if cw[0] != kw[0] {
            return Ok(false);
        }
        let (ck, kk) = (kind(cw), kind(kw));
        if (ck == FWD || kk == FWD) && ck != kk {
            let fwd_kind = |w: &[u32]| if kflag(w) { UNION } else { STRUCT };
            let (real, fwd) = if ck == FWD {
                (kk, fwd_kind(cw))
            } else {
                let fwd = fwd_kind(kw);
                if fwd == ck && k < self.t.start {
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
        match ck {
            INT => Ok(equal_int_tag(cw, kw)),
            ENUM | ENUM64 => Ok(compat_enum(cw, kw)),
            FWD | FLOAT => Ok(equal_common(cw, kw)),
            CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG => {
                if cw[1] != kw[1] {
                    return Ok(false);
                }
                st.push((cw[2], kw[2]));
                Ok(true)
            }
            ARRAY => {
                if !(equal_common(cw, kw) && cw[5] == kw[5]) {
                    return Ok(false);
                }
                // index type first, then element type
                st.push((cw[3], kw[3]));
                st.push((cw[4], kw[4]));
                Ok(true)
            }
            STRUCT | UNION => {
                if !shallow_equal_struct(cw, kw) {
                    return Ok(false);
                }
                for (m1, m2) in cw[3..].chunks_exact(3).zip(kw[3..].chunks_exact(3)).rev() {
                    st.push((m1[1], m2[1]));
                }
                Ok(true)
            }
            FUNC_PROTO => {
                if !compat_fnproto(cw, kw) {
                    return Ok(false);
                }
                for (p1, p2) in cw[3..].chunks_exact(2).zip(kw[3..].chunks_exact(2)).rev() {
                    st.push((p1[1], p2[1]));
                }
                st.push((cw[2], kw[2]));
                Ok(true)
            }
            _ => Err(DedupError::Invalid { id: c, what: "struct equivalence reached a VAR, DATASEC or DECL_TAG" }),
        }
    }

    fn merge_hypot(&mut self) {
        for i in 0..self.hypot_list.len() {
            let k = self.hypot_list[i];
            let c = self.hypot[k as usize];
            let t_id = self.resolve(c);
            let c_id = self.resolve(k);
            let t_kind = kind(self.t.rec(t_id));
            let c_kind = kind(self.t.rec(c_id));
            if t_kind != FWD && c_kind == FWD {
                self.map[c_id as usize] = t_id;
            }
            if self.adjust_canon {
                continue;
            }
            if t_kind == FWD && c_kind != FWD {
                self.map[t_id as usize] = c_id;
            }
            if is_composite(t_kind)
                && c_kind != FWD
                && is_mapped(self.map[c_id as usize])
                && !is_mapped(self.map[t_id as usize])
            {
                self.map[t_id as usize] = c_id;
            }
        }
    }

    fn struct_types(&mut self) -> Result<(), DedupError> {
        for id in self.t.start..self.end {
            if is_mapped(self.map[id as usize]) {
                continue;
            }
            let w = self.t.rec(id);
            if !is_composite(kind(w)) {
                continue;
            }
            let h = hash_struct(w);
            let mut new = id;
            let mut cur = self.table.first(h);
            while let Some((cand, c)) = cur {
                cur = self.table.next(c);
                // guards against a colliding FWD, which is_equiv would accept
                if !shallow_equal_struct(self.t.rec(id), self.t.rec(cand)) {
                    continue;
                }
                self.clear_hypot();
                if !self.is_equiv(id, cand)? {
                    continue;
                }
                self.merge_hypot();
                if self.adjust_canon {
                    continue;
                }
                new = cand;
                break;
            }
            self.map[id as usize] = new;
            if new == id {
                self.table.insert(h, id);
            }
        }
        Ok(())
    }

    fn resolve_fwds(&mut self) {
        // name_off -> the only canonical struct/union with it, or 0 if several
        let mut names: hashbrown::HashMap<u32, u32> = hashbrown::HashMap::new();
        for id in 1..self.end {
            let w = self.t.rec(id);
            if !is_composite(kind(w)) || self.map[id as usize] != id {
                continue;
            }
            names.entry(w[0]).and_modify(|v| *v = 0).or_insert(id);
        }
        for id in self.t.start..self.end {
            let w = self.t.rec(id);
            if kind(w) != FWD || self.map[id as usize] != id {
                continue;
            }
            let Some(&cand) = names.get(&w[0]) else { continue };
            if cand == 0 {
                continue;
            }
            let ck = kind(self.t.rec(cand));
            let union = kflag(w);
            if (ck == STRUCT && union) || (ck == UNION && !union) {
                continue;
            }
            self.map[id as usize] = cand;
        }
    }

    fn ref_types(&mut self) -> Result<(), DedupError> {
        for id in self.t.start..self.end {
            self.dedup_ref(id)?;
        }
        Ok(())
    }

    /// libbpf's `btf_dedup_ref_type` as a post-order walk with explicit frames.
    fn dedup_ref(&mut self, root: u32) -> Result<(), DedupError> {
        match self.map[root as usize] {
            IN_PROGRESS => return Err(DedupError::Loop { id: root }),
            m if is_mapped(m) => return Ok(()),
            _ => {}
        }
        self.map[root as usize] = IN_PROGRESS;
        self.ref_stack.clear();
        self.ref_stack.push((root, 0));
        while let Some(&(id, ci)) = self.ref_stack.last() {
            let w = self.t.rec(id);
            let child = match kind(w) {
                CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | TYPE_TAG | DECL_TAG => {
                    if ci == 0 { Some(w[2]) } else { None }
                }
                ARRAY => match ci {
                    0 => Some(w[3]),
                    1 => Some(w[4]),
                    _ => None,
                },
                FUNC_PROTO => match ci as usize {
                    0 => Some(w[2]),
                    i if i <= vlen(w) => Some(w[3 + 2 * (i - 1) + 1]),
                    _ => None,
                },
                _ => return Err(DedupError::Invalid { id, what: "reference pass reached an unexpected kind" }),
            };
            if let Some(child) = child {
                self.ref_stack.last_mut().unwrap().1 += 1;
                match self.map[child as usize] {
                    IN_PROGRESS => return Err(DedupError::Loop { id: child }),
                    m if is_mapped(m) => {}
                    _ => {
                        self.map[child as usize] = IN_PROGRESS;
                        self.ref_stack.push((child, 0));
                    }
                }
                continue;
            }
            self.ref_stack.pop();
            self.finish_ref(id);
        }
        Ok(())
    }

    /// All referenced ids of `id` are canonical now: look it up by content.
    fn finish_ref(&mut self, id: u32) {
        let mut s = std::mem::take(&mut self.scratch);
        let mut s2 = std::mem::take(&mut self.scratch2);
        self.canonical_words(id, &mut s);
        let h = match kind(&s) {
            DECL_TAG => hash_int_tag(&s),
            ARRAY => hash_array(&s),
            FUNC_PROTO => hash_fnproto(&s),
            _ => hash_common(&s),
        };
        let mut new = id;
        let mut cur = self.table.first(h);
        while let Some((cand, c)) = cur {
            cur = self.table.next(c);
            let cw = self.t.rec(cand);
            if cw[1] != s[1] || cw.len() != s.len() {
                continue;
            }
            let eq = if cand < self.t.start {
                // base records are never rewritten
                cw == &s[..]
            } else {
                self.canonical_words(cand, &mut s2);
                s2 == s
            };
            if eq {
                new = cand;
                break;
            }
        }
        self.map[id as usize] = new;
        if new == id {
            self.table.insert(h, id);
        }
        self.scratch = s;
        self.scratch2 = s2;
    }

    /// The record of own type `id` with the fields libbpf's reference pass
    /// rewrites replaced by their canonical ids.
    fn canonical_words(&self, id: u32, out: &mut Vec<u32>) {
        let w = self.t.rec(id);
        out.clear();
        out.extend_from_slice(w);
        match kind(w) {
            ARRAY => {
                out[3] = self.resolve(w[3]);
                out[4] = self.resolve(w[4]);
            }
            FUNC_PROTO => {
                out[2] = self.resolve(w[2]);
                for i in 0..vlen(w) {
                    out[3 + 2 * i + 1] = self.resolve(w[3 + 2 * i + 1]);
                }
            }
            _ => out[2] = self.resolve(w[2]),
        }
    }

    fn compact_and_remap(&mut self) -> Result<(Vec<u32>, Vec<u32>), DedupError> {
        // hypot becomes old id -> new id, as in libbpf
        let start = self.t.start;
        let new_id = &mut self.hypot;
        new_id[0] = 0;
        for id in 1..start {
            new_id[id as usize] = id;
        }
        let mut next = start;
        let mut nwords = 0usize;
        for id in start..self.end {
            if self.map[id as usize] == id {
                new_id[id as usize] = next;
                next += 1;
                nwords += self.t.rec(id).len();
            } else {
                new_id[id as usize] = UNPROCESSED;
            }
        }
        let mut words = Vec::with_capacity(nwords);
        let mut offs = Vec::with_capacity((next - start) as usize);
        for id in start..self.end {
            if self.map[id as usize] != id {
                continue;
            }
            let w = self.t.rec(id);
            let at = words.len();
            offs.push(at as u32);
            words.extend_from_slice(w);
            let mut bad = false;
            for_each_id_pos(w, |p| {
                let r = self.resolve(w[p]);
                let n = self.hypot[r as usize];
                if n > MAX_ID {
                    bad = true;
                }
                words[at + p] = n;
            });
            if bad {
                return Err(DedupError::Invalid { id, what: "a referenced type has no surviving representative" });
            }
        }
        Ok((words, offs))
    }
}

/// Phase timings on stderr, for `--timings` and the benchmark.
struct Timer {
    on: bool,
    t0: Instant,
    last: std::cell::Cell<Instant>,
}

impl Timer {
    fn new(on: bool) -> Timer {
        let now = Instant::now();
        Timer { on, t0: now, last: std::cell::Cell::new(now) }
    }
    fn lap(&self, what: &str) {
        if self.on {
            let now = Instant::now();
            eprintln!(
                "dedup: {what:<14} {:8.1} ms (total {:8.1} ms)",
                (now - self.last.get()).as_secs_f64() * 1e3,
                (now - self.t0).as_secs_f64() * 1e3
            );
            self.last.set(now);
        }
    }
}
