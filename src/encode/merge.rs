//! The merge: each CU's records appended to the run's BTF in CU order
//! (ids shifted, strings interned, the array index type decided, variables
//! noted for the DATASECs), then the function phase and the DATASECs.

use std::collections::BTreeMap;
use std::sync::Arc;

use thiserror::Error;

use super::collapse::Collapse;
use super::features::Features;
use super::local::LocalTypeId;
use super::{CuOut, MAX_STR_OFFSET, MAX_TYPES, Summary, local, strcache};
use crate::btf::{self, Btf, Kind, RawRecord, TypeId, kind, make_info};
use crate::dwarf;
use crate::elf::debug::ElfInfo;
use crate::funcs::FuncStates;

/// Why the merge refuses what it was given: a format limit the BTF would
/// pass, or BTF that would be invalid. Where it happened is in the fields;
/// the file is added by [`super::EncodeError::Merge`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MergeError {
    #[error("type section of {bytes} bytes: more than BTF's 32-bit length")]
    TypeSectionTooLong { bytes: u64 },
    #[error("{types} types: more than BTF's {max} (type ids are 31-bit)")]
    TooManyTypes { types: u64, max: u32 },
    #[error("string section of {bytes} bytes: more than BTF's {MAX_STR_OFFSET} (string offsets are 31-bit)")]
    StringsTooLong { bytes: u32 },
    #[error(
        "type [{id}] refers to type {target}, past the last type {last}: a DW_TAG_unspecified_type nested in another DIE \
         (first in the CU at {cu:#x}) takes a type id but emits no type, shifting the CU's later references \
         as the reference encoder does; here that would give invalid BTF"
    )]
    ShiftedPastEnd { id: u32, target: u32, last: u32, cu: u64 },
    #[error(
        "section {section}: {vars} variables, a multiple of 65536: BTF's 16-bit DATASEC count would be 0 \
         (the reference then writes an empty DATASEC sized from memory outside its list)"
    )]
    DatasecCountWraps { section: String, vars: usize },
}

/// What a CU's local ids are shifted by in the run's BTF: the number of
/// types before the CU. [`IdShift::apply`] is the one place where a local
/// id becomes a run-wide one.
#[derive(Clone, Copy, Debug)]
struct IdShift {
    types_before: u32,
}

impl IdShift {
    /// The run-wide id of `local` (void stays void). Wrapping: a CU whose
    /// ids a nested DW_TAG_unspecified_type shifted may point one past its
    /// last type, which [`Merger::check_refs_in_range`] refuses afterwards.
    #[inline(always)]
    fn apply(self, local: LocalTypeId) -> TypeId {
        match local.get() {
            0 => TypeId::VOID,
            l => TypeId::new(l.wrapping_add(self.types_before)),
        }
    }

    /// [`IdShift::apply`] on a type-id word of a record, in place.
    #[inline(always)]
    fn word(self, w: &mut u32) {
        *w = self.apply(LocalTypeId::from_word(*w)).get();
    }
}

/// A variable of a DATASEC: its VAR's id, its offset and size in the
/// section.
#[derive(Clone, Copy, Debug)]
struct SecVar {
    var: TypeId,
    offset: u32,
    size: u32,
}

/// Run-wide merge state.
pub(super) struct Merger {
    /// `MAX_TYPES`, smaller in tests.
    max_types: u32,
    /// The first CU whose ids a nested DW_TAG_unspecified_type shifted.
    pub(super) shifted_cu: Option<u64>,
    pub(super) btf: Btf,
    /// The array index type (`int`), once a CU has placed or synthesized it.
    index: Option<TypeId>,
    /// ELF section index → its variables, in encounter order.
    datasecs: BTreeMap<u32, Vec<SecVar>>,
    map: Vec<u32>,
    /// `.debug_str` offset → BTF string offset (0: not seen yet). Interning
    /// is idempotent and the string section only grows, so a value once set
    /// is final: the workers read it too (see `CuOut::strs_known`) and the
    /// merge only looks up what they did not find. `None` for an unmerged
    /// `.debug_str`, whose offsets do not repeat ([`strcache`]).
    pub(super) str_cache: Option<Arc<strcache::StrCache>>,
    /// The same for offsets into the middle of a string (linkers merge
    /// string tails), which `str_cache` has no slot for: 2 M of a vmlinux's
    /// name look-ups, each a hash of the text and a compare against the
    /// string table without this. Merge-only, so a plain map.
    pub(super) tail_strs: hashbrown::HashMap<u32, u32>,
    scratch: Vec<u32>,
    pub(super) summary: Summary,
    /// Saved function states (the function phase emits them).
    pub(super) funcs: FuncStates,
    /// Leaves out the types of a CU that copy merged ones exactly (see
    /// `collapse.rs`), when dedup follows.
    collapse: Option<Collapse>,
    /// Local id → merged id of the CU being merged, when collapsing.
    ids: Vec<u32>,
}

impl Merger {
    /// The merge of a run of `cus` units into a new BTF (split over `base`
    /// if given) whose offsets are built after the CU loop.
    pub(super) fn new(
        base: Option<Arc<Btf>>,
        endian: btf::Endian,
        str_cache: Option<Arc<strcache::StrCache>>,
        cus: usize,
        merged: bool,
        collapse: bool,
    ) -> Merger {
        let mut btf = match base {
            Some(b) => Btf::new_split(b),
            None => Btf::new(endian),
        };
        btf.set_endian(endian);
        // the merge only appends; offsets are built after the CU loop
        btf.defer_offsets();
        let collapse = collapse.then(|| Collapse::new(btf.type_count() + 1));
        Merger {
            max_types: MAX_TYPES,
            shifted_cu: None,
            btf,
            index: None,
            datasecs: BTreeMap::new(),
            map: Vec::new(),
            str_cache,
            tail_strs: hashbrown::HashMap::new(),
            scratch: Vec::new(),
            summary: Summary {
                cus,
                merged_units: merged,
                ..Default::default()
            },
            funcs: FuncStates::default(),
            collapse,
            ids: Vec::new(),
        }
    }

    /// Types left out as exact copies so far.
    pub(super) fn collapsing(&self) -> bool {
        self.collapse.is_some()
    }

    pub(super) fn collapsed(&self) -> u64 {
        self.collapse.as_ref().map_or(0, |c| c.collapsed)
    }

    /// Appends a CU's record after its types (a VAR or a decl tag), its
    /// local ids shifted by `shift`, or mapped through `self.ids` when the
    /// CU was collapsed; a decl tag of a variable (`tags_var`) refers to it.
    fn push_record(&mut self, rec: &[u32], shift: IdShift, tags_var: Option<TypeId>, collapsed: bool) -> TypeId {
        self.scratch.clear();
        self.scratch.extend_from_slice(rec);
        let map = &self.map;
        Btf::for_each_str_ref_mut(&mut self.scratch, |w| *w = map[*w as usize]);
        if let Some(var) = tags_var {
            debug_assert_eq!(self.scratch.kind(), kind::DECL_TAG);
            self.scratch[2] = var.get();
        } else if collapsed {
            let ids = &self.ids;
            Btf::for_each_type_ref_mut(&mut self.scratch, |w| *w = ids[*w as usize]);
        } else {
            Btf::for_each_type_ref_mut(&mut self.scratch, |w| shift.word(w));
        }
        let id = self.btf.push_words(&self.scratch);
        if let Some(c) = &mut self.collapse {
            c.push(id.get(), None);
        }
        id
    }

    fn intern_range<'a>(&mut self, out: &CuOut<'a>, from: usize, to: usize) {
        let Some(str_cache) = &self.str_cache else {
            for i in from..to {
                self.map[i + 1] = self.btf.add_str(dwarf::nm(out.strs[i])).get();
            }
            return;
        };
        for i in from..to {
            if let Some(known) = out.strs_known[i] {
                self.map[i + 1] = known.get();
                continue;
            }
            let s = out.strs[i];
            let off = out.strs_off[i];
            if let Some(off) = off.map(local::DebugStrOff::get) {
                let btf = &mut self.btf;
                let mut intern = || btf.add_str(dwarf::nm(s)).get();
                self.map[i + 1] = match str_cache.get_or_insert_with(off, &mut intern) {
                    Some(b) => b,
                    None => *self.tail_strs.entry(off).or_insert_with(intern),
                };
            } else {
                self.map[i + 1] = self.btf.add_str(dwarf::nm(s)).get();
            }
        }
    }

    /// After a CU whose ids a nested DW_TAG_unspecified_type shifted: the
    /// reference writes such CUs with every later reference pointing one
    /// type further per unspecified type (we write the same bytes), which
    /// only goes unnoticed while the shifted ids stay inside the BTF. One
    /// past the last type is invalid BTF: refused instead. A pass over all
    /// references, paid only by runs with such a CU (C++ only).
    pub(super) fn check_refs_in_range(&self, cu: u64) -> Result<(), MergeError> {
        let (start, last) = (self.btf.start_id(), self.btf.type_count());
        for (i, &o) in self.btf.type_offsets().iter().enumerate() {
            let w = &self.btf.raw_words()[o as usize..];
            let mut bad = None;
            Btf::for_each_type_ref(w, |t| {
                if t > last && bad.is_none() {
                    bad = Some(t);
                }
            });
            if let Some(t) = bad {
                return Err(MergeError::ShiftedPastEnd {
                    id: start + i as u32,
                    target: t,
                    last,
                    cu,
                });
            }
        }
        Ok(())
    }

    /// Whether the BTF built so far, plus `more` types, is within the
    /// format's limits; the message says which limit is passed.
    pub(super) fn check_limits(&self, more: usize, more_words: usize) -> Result<(), MergeError> {
        // as built: with the words dedup's chunked passes took out
        let bytes = self.btf.type_section_len() as u64 + 4 * (self.btf.cut_words() + more_words as u64);
        if bytes > u32::MAX as u64 {
            return Err(MergeError::TypeSectionTooLong { bytes });
        }
        let n = self.btf.type_count() as u64 + more as u64;
        if n > self.max_types as u64 {
            return Err(MergeError::TooManyTypes {
                types: n,
                max: self.max_types,
            });
        }
        if self.btf.strs_end() > MAX_STR_OFFSET {
            return Err(MergeError::StringsTooLong {
                bytes: self.btf.strs_end(),
            });
        }
        Ok(())
    }

    pub(super) fn merge<'a>(&mut self, mut out: CuOut<'a>) -> Result<(), MergeError> {
        // Checked before any id is assigned: ids past the limit never exist,
        // so none can wrap. +1 for the `int` an array may need.
        self.check_limits(out.offs.len() + 1, out.words.len() + 4)?;
        if out.shifted_ids && self.shifted_cu.is_none() {
            self.shifted_cu = Some(out.cu_offset);
        }
        self.summary.cus_encoded += 1;
        let shift = IdShift {
            types_before: self.btf.type_count(),
        };
        // (the first CU with an `int` places the array index type by its local id)
        let collapsing = self.collapse.is_some() && self.index.is_some() && !out.shifted_ids;
        if self.index.is_none()
            && let Some(k) = out.int_core
        {
            self.index = Some(shift.apply(k));
        }
        // else the `int` synthesized after the CU's types, if it has arrays
        let synthesized = shift.apply(LocalTypeId::from_word(out.nslots));
        let index = self.index.unwrap_or(synthesized);
        self.map.clear();
        self.map.resize(out.strs.len() + 1, 0);
        self.intern_range(&out, 0, out.strs_in_types as usize);
        let nrec = out.offs.len();
        let rec = |out: &CuOut<'a>, i: usize| {
            let s = out.offs[i] as usize;
            let e = if i + 1 < nrec {
                out.offs[i + 1] as usize
            } else {
                out.words.len()
            };
            (s, e)
        };
        if collapsing {
            self.append_collapsed(&out, index);
        } else {
            self.append_types(&out, shift, index);
        }
        if out.has_arrays && self.index.is_none() {
            // (the CU's arrays point at the id after its slots, as the
            // reference's: past the `int` when its ids are shifted)
            let id = self.btf.add_int(b"int", 4, btf::INT_SIGNED);
            if let Some(c) = &mut self.collapse {
                c.push(id.get(), None);
            }
            self.index = Some(synthesized);
        }
        self.intern_range(&out, out.strs_in_types as usize, out.strs.len());
        let mut vars = out.vars.iter().peekable();
        // the variable whose tags come next, and how many are left
        let (mut tagged, mut tags_left) = (TypeId::VOID, 0u32);
        for i in out.n_types..nrec {
            let (s, e) = rec(&out, i);
            let words = std::mem::take(&mut out.words);
            let tags_var = (tags_left > 0).then_some(tagged);
            tags_left = tags_left.saturating_sub(1);
            let id = self.push_record(&words[s..e], shift, tags_var, collapsing);
            out.words = words;
            if let Some(v) = vars.peek()
                && v.record as usize == i
            {
                self.datasecs.entry(v.section).or_default().push(SecVar {
                    var: id,
                    offset: v.offset,
                    size: v.size,
                });
                self.summary.vars += 1;
                (tagged, tags_left) = (id, v.tags);
                vars.next();
            }
        }
        let (map, ids) = (&self.map, &self.ids);
        // the saved function states hold the CU's local ids
        let ty = |t: LocalTypeId| match t.get() {
            0 => TypeId::VOID,
            x if collapsing => TypeId::new(ids[x as usize]),
            _ => shift.apply(t),
        };
        self.funcs.extend_relocated(&out.funcs, ty, |s: local::LocalStr| {
            btf::StrOff::new(map[s.get() as usize])
        });
        self.summary.func_states = self.funcs.len();
        Ok(())
    }

    /// The CU's types as the reference merges them: one bulk copy, then
    /// names and references fixed in place (ids shifted by `shift`; arrays
    /// indexed by `index`).
    fn append_types(&mut self, out: &CuOut<'_>, shift: IdShift, index: TypeId) {
        let types_end = if out.n_types < out.offs.len() {
            out.offs[out.n_types] as usize
        } else {
            out.words.len()
        };
        let base = self
            .btf
            .append_records(&out.words[..types_end], &out.offs[..out.n_types]);
        let map = &self.map;
        let w = self.btf.words_from_mut(base);
        for i in 0..out.n_types {
            let s = out.offs[i] as usize;
            let e = if i + 1 < out.n_types {
                out.offs[i + 1] as usize
            } else {
                types_end
            };
            let r = &mut w[s..e];
            relocate(r, map, shift);
            if r.kind() == kind::ARRAY {
                r[4] = index.get();
            }
        }
        if let Some(c) = &mut self.collapse {
            // indexed for later CUs, unless its ids are shifted (C++)
            let pairable = !out.shifted_ids;
            let words = self.btf.raw_words();
            for i in 0..out.n_types {
                let start = base + out.offs[i] as usize;
                let id = shift.apply(LocalTypeId::from_word(i as u32 + 1)).get();
                c.push(id, pairable.then_some(start as u32));
                if pairable {
                    let len = words[start..start + 2].rec_len();
                    c.index(out, i as u32 + 1, id, &words[start..start + len]);
                }
            }
        }
    }

    /// The CU's types, those that copy merged ones exactly left out
    /// (`self.ids` then maps every local id to its merged id).
    fn append_collapsed(&mut self, out: &CuOut<'_>, index: TypeId) {
        let c = self.collapse.as_mut().expect("collapsing");
        let copies = c.decide(out, &self.map, &self.btf, index.get());
        let n = out.n_types;
        self.ids.clear();
        self.ids.push(0);
        let first_new = self.btf.type_count() + 1;
        let mut next = first_new;
        for &copy in &copies[1..=n] {
            if copy != 0 {
                self.ids.push(copy);
            } else {
                self.ids.push(next);
                next += 1;
            }
        }
        for i in 0..n {
            if self.ids[i + 1] < first_new {
                continue;
            }
            let s = out.offs[i] as usize;
            let e = out.offs.get(i + 1).map_or(out.words.len(), |&e| e as usize);
            self.scratch.clear();
            self.scratch.extend_from_slice(&out.words[s..e]);
            let (map, ids) = (&self.map, &self.ids);
            Btf::for_each_str_ref_mut(&mut self.scratch, |w| *w = map[*w as usize]);
            Btf::for_each_type_ref_mut(&mut self.scratch, |w| *w = ids[*w as usize]);
            if self.scratch.kind() == kind::ARRAY {
                self.scratch[4] = index.get();
            }
            let start = self.btf.raw_words().len() as u32;
            let id = self.btf.push_words(&self.scratch);
            debug_assert_eq!(id.get(), self.ids[i + 1]);
            c.push(id.get(), Some(start));
            c.index(out, i as u32 + 1, id.get(), &self.scratch);
        }
    }

    /// The function phase after the last CU (FUNC_PROTO, FUNC and their decl
    /// tags), before the DATASECs, as in the reference.
    pub(super) fn emit_funcs(
        &mut self,
        elf: &ElfInfo<'_>,
        data: &[u8],
        f: &Features,
        reference: crate::encode::Reference,
        verbose: bool,
    ) -> Result<(), crate::funcs::FuncsError> {
        let marks = if f.decl_tag_kfuncs {
            crate::funcs::KfuncMarks::from_elf(data, &elf.funcs)?
        } else {
            crate::funcs::KfuncMarks::none(elf.funcs.len())
        };
        let eo = crate::funcs::EmitOptions {
            consistent_func: f.consistent_func,
            decl_tag: f.decl_tag,
            decl_tag_kfuncs: f.decl_tag_kfuncs,
            attributes: f.attributes,
            protos: match reference {
                crate::encode::Reference::V1_31 => crate::funcs::ProtoMatch::ReturnOnly,
                crate::encode::Reference::Next => crate::funcs::ProtoMatch::Params,
            },
            pick: match reference {
                crate::encode::Reference::V1_31 => crate::funcs::Pick::First,
                crate::encode::Reference::Next => crate::funcs::Pick::Linked,
            },
            decide: match reference {
                crate::encode::Reference::V1_31 => crate::funcs::Decide::V1_31,
                crate::encode::Reference::Next => crate::funcs::Decide::Next,
            },
            true_signature: f.true_signature && reference == crate::encode::Reference::Next,
        };
        let log = verbose.then_some(&mut self.summary.func_skips);
        crate::funcs::emit_funcs_logged(&mut self.btf, &mut self.funcs, &elf.funcs, &marks, &eo, log)?;
        // The states are spent; their memory is not needed for the DATASECs or dedup.
        self.funcs = FuncStates::default();
        Ok(())
    }

    pub(super) fn finish_datasecs(&mut self, elf: &ElfInfo<'_>, f: &Features) -> Result<(), MergeError> {
        let secs = std::mem::take(&mut self.datasecs);
        for (sec, mut entries) in secs {
            // The reference counts a section's variables in 16 bits: it keeps
            // the first `n mod 65536` met, sorts those and sizes the section
            // by the last of them.
            let n = entries.len();
            entries.truncate(local::kept_entries(n, local::vlen_mask(f)));
            if entries.is_empty() {
                return Err(MergeError::DatasecCountWraps {
                    section: String::from_utf8_lossy(elf.sections[sec as usize].name).into_owned(),
                    vars: n,
                });
            }
            entries.sort_by_key(|e| e.offset);
            let last = *entries.last().expect("datasec has entries");
            let name = elf.sections[sec as usize].name;
            let n = self.btf.add_str(name);
            let vlen = entries.len() as u32;
            let mut words = vec![
                n.get(),
                make_info(Kind::Datasec, false, vlen),
                last.offset.wrapping_add(last.size),
            ];
            for v in entries {
                words.extend_from_slice(&[v.var.get(), v.offset, v.size]);
            }
            self.btf.push_words(&words);
        }
        Ok(())
    }
}

/// The merge's rewrite of one of a CU's records: string ids through `map`,
/// type ids through `shift`. The fields are those of
/// [`Btf::str_ref_positions`] and [`Btf::type_ref_positions`], in one pass
/// whose entry loops go over chunks (through the two position visitors it
/// showed in a vmlinux encode's profile, on the merging thread).
#[inline]
fn relocate(r: &mut [u32], map: &[u32], shift: IdShift) {
    let shift = |x: &mut u32| shift.word(x);
    r[0] = map[r[0] as usize];
    let vlen = r.vlen();
    match Kind::from_u8(r.kind() as u8).unwrap_or(Kind::Unkn) {
        Kind::Ptr
        | Kind::Typedef
        | Kind::Volatile
        | Kind::Const
        | Kind::Restrict
        | Kind::Func
        | Kind::Var
        | Kind::DeclTag
        | Kind::TypeTag => shift(&mut r[2]),
        Kind::Array => {
            shift(&mut r[3]);
            shift(&mut r[4]);
        }
        Kind::Struct | Kind::Union => {
            for m in r[3..3 + 3 * vlen].chunks_exact_mut(3) {
                m[0] = map[m[0] as usize];
                shift(&mut m[1]);
            }
        }
        Kind::Enum => r[3..3 + 2 * vlen]
            .chunks_exact_mut(2)
            .for_each(|e| e[0] = map[e[0] as usize]),
        Kind::Enum64 => r[3..3 + 3 * vlen]
            .chunks_exact_mut(3)
            .for_each(|e| e[0] = map[e[0] as usize]),
        Kind::FuncProto => {
            shift(&mut r[2]);
            for p in r[3..3 + 2 * vlen].chunks_exact_mut(2) {
                p[0] = map[p[0] as usize];
                shift(&mut p[1]);
            }
        }
        Kind::Datasec => r[3..3 + 3 * vlen].chunks_exact_mut(3).for_each(|v| shift(&mut v[0])),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn relocate_rewrites_what_the_position_visitors_list() {
        use super::*;
        let info = |k: Kind, vlen: u32| make_info(k, false, vlen);
        let recs: Vec<Vec<u32>> = vec![
            vec![1, info(Kind::Int, 0), 4, 32],
            vec![2, info(Kind::Ptr, 0), 3],
            vec![0, info(Kind::Const, 0), 0],
            vec![1, info(Kind::Array, 0), 0, 5, 0, 3],
            vec![3, info(Kind::Struct, 3), 8, 1, 2, 0, 2, 0, 32, 3, 6, 64],
            vec![1, info(Kind::Union, 0), 0],
            vec![1, info(Kind::Enum, 2), 4, 2, 0, 3, 1],
            vec![1, info(Kind::Enum64, 1), 8, 2, 0, 0],
            vec![0, info(Kind::FuncProto, 2), 4, 1, 12, 0, 0],
            vec![3, info(Kind::Datasec, 2), 8, 13, 0, 4, 0, 4, 4],
            vec![1, info(Kind::Var, 0), 10, 1],
            vec![2, info(Kind::DeclTag, 0), 14, 0],
            vec![1, info(Kind::Fwd, 0), 0],
        ];
        let map = [0u32, 100, 200, 300];
        for r in &recs {
            let mut want = r.clone();
            Btf::for_each_str_ref_mut(&mut want, |x| *x = map[*x as usize]);
            Btf::for_each_type_ref_mut(&mut want, |x| {
                if *x != 0 {
                    *x = x.wrapping_add(7)
                }
            });
            let mut got = r.clone();
            relocate(&mut got, &map, IdShift { types_before: 7 });
            assert_eq!(got, want, "{r:?}");
        }
    }

    use super::*;

    fn merger() -> Merger {
        Merger {
            max_types: MAX_TYPES,
            shifted_cu: None,
            btf: Btf::new(btf::Endian::Little),
            index: None,
            datasecs: BTreeMap::new(),
            map: Vec::new(),
            str_cache: None,
            tail_strs: hashbrown::HashMap::new(),
            scratch: Vec::new(),
            summary: Summary::default(),
            funcs: FuncStates::default(),
            collapse: None,
            ids: Vec::new(),
        }
    }

    /// A CU of records (names are local string ids, refs core ids).
    fn cu(records: Vec<Vec<u32>>, strs: Vec<&'static [u8]>, int_core: Option<u32>, nslots: u32) -> CuOut<'static> {
        let int_core = int_core.map(LocalTypeId::from_word);
        let mut words = Vec::new();
        let mut offs = Vec::new();
        let mut has_arrays = false;
        for r in &records {
            offs.push(words.len() as u32);
            has_arrays |= r.kind() == kind::ARRAY;
            words.extend_from_slice(r);
        }
        let n = strs.len() as u32;
        CuOut {
            words,
            offs,
            n_types: records.len(),
            has_arrays,
            strs_off: vec![None; strs.len()],
            strs_known: vec![],
            strs,
            strs_in_types: n,
            int_core,
            nslots,
            shifted_ids: false,
            cu_offset: 0,
            vars: vec![],
            funcs: FuncStates::default(),
            type_hashes: vec![],
        }
    }

    fn arr(elem: u32, n: u32) -> Vec<u32> {
        vec![0, make_info(Kind::Array, false, 0), 0, elem, 0, n]
    }
    fn int(name: u32, size: u32) -> Vec<u32> {
        vec![name, make_info(Kind::Int, false, 0), size, size * 8]
    }

    #[test]
    fn index_type_is_decided_once_and_synthesized_when_missing() {
        let mut m = merger();
        // CU 1: char + char[4], no `int`: arrays use id off+N = 3, an `int` is appended there.
        m.merge(cu(vec![int(1, 1), arr(1, 4)], vec![b"char"], None, 3)).unwrap();
        assert_eq!(m.btf.type_count(), 3);
        assert_eq!(m.btf.ty(TypeId::new(2)).array(), (TypeId::new(1), TypeId::new(3), 4));
        assert_eq!(m.btf.name(m.btf.ty(TypeId::new(3)).name_off()), "int");
        // CU 2 has its own `int`, but the index stays id 3.
        m.merge(cu(vec![int(1, 4), arr(1, 2)], vec![b"int"], Some(1), 3))
            .unwrap();
        assert_eq!(m.btf.ty(TypeId::new(5)).array(), (TypeId::new(4), TypeId::new(3), 2));
        // Strings: first use order, "int" not duplicated.
        assert_eq!(m.btf.raw_strings(), b"\0char\0int\0");
    }

    #[test]
    fn exact_copies_of_merged_types_are_left_out_and_only_those() {
        let mut m = merger();
        m.collapse = Some(Collapse::new(1));
        let hashed = |mut out: CuOut<'static>| {
            out.type_hashes = super::super::collapse::hash_types(&out);
            out
        };
        let ptr = |to: u32| vec![0, make_info(Kind::Ptr, false, 0), to];
        let st = |name: u32, members: &[(u32, u32, u32)]| {
            let mut r = vec![name, make_info(Kind::Struct, false, members.len() as u32), 16];
            members.iter().for_each(|&(n, t, o)| r.extend([n, t, o]));
            r
        };
        let fwd = |name: u32| vec![name, make_info(Kind::Fwd, false, 0), 0];
        let strs: Vec<&'static [u8]> = vec![b"int", b"list", b"next", b"prev"];
        // a cycle: struct list { struct list *next; }
        let list = || vec![int(1, 4), st(2, &[(3, 3, 0)]), ptr(2)];
        m.merge(hashed(cu(list(), strs.clone(), Some(1), 4))).unwrap();
        assert_eq!(m.btf.type_count(), 3);
        m.merge(hashed(cu(list(), strs.clone(), Some(1), 4))).unwrap();
        assert_eq!(m.btf.type_count(), 3, "the second CU is a copy of the first");
        assert_eq!(m.collapsed(), 3);
        // the same struct reaching a FWD: only the int is a copy
        let other = vec![int(1, 4), st(2, &[(3, 3, 0)]), ptr(4), fwd(2)];
        m.merge(hashed(cu(other, strs.clone(), Some(1), 5))).unwrap();
        assert_eq!(m.btf.type_count(), 6);
        // (names are string offsets now: list 5, next 10, prev 15)
        assert_eq!(
            m.btf.ty(TypeId::new(4)).words,
            &st(5, &[(10, 5, 0)])[..],
            "references go to the new ids"
        );
        // one pointer shared by two members is not the same graph as two
        // equal pointers: the struct stays, one pointer is a copy
        let shared = vec![int(1, 4), st(2, &[(3, 3, 0), (4, 3, 64)]), ptr(1)];
        m.merge(hashed(cu(shared, strs.clone(), Some(1), 4))).unwrap();
        assert_eq!(m.btf.type_count(), 8);
        let two = vec![int(1, 4), st(2, &[(3, 3, 0), (4, 4, 64)]), ptr(1), ptr(1)];
        m.merge(hashed(cu(two, strs.clone(), Some(1), 5))).unwrap();
        assert_eq!(m.btf.type_count(), 10);
        assert_eq!(m.btf.ty(TypeId::new(9)).words, &st(5, &[(10, 10, 0), (15, 8, 64)])[..]);
        // an enum is appended every time
        let e = || vec![int(1, 4), vec![2, make_info(Kind::Enum, false, 1), 4, 3, 7]];
        m.merge(hashed(cu(e(), strs.clone(), Some(1), 3))).unwrap();
        m.merge(hashed(cu(e(), strs.clone(), Some(1), 3))).unwrap();
        assert_eq!(m.btf.type_count(), 12);
    }

    #[test]
    fn more_types_than_the_format_allows_is_an_error_before_any_id_is_given() {
        let mut m = merger();
        m.max_types = 5;
        m.merge(cu(vec![int(1, 4), int(1, 4)], vec![b"int"], Some(1), 2))
            .unwrap();
        // 2 + 3, +1 for an `int` arrays may need: refused whole.
        let e = m
            .merge(cu(vec![int(1, 4), int(1, 4), int(1, 4)], vec![b"int"], Some(1), 3))
            .unwrap_err();
        assert_eq!(e.to_string(), "6 types: more than BTF's 5 (type ids are 31-bit)");
        assert_eq!(m.btf.type_count(), 2, "nothing of a refused CU is kept");
        m.merge(cu(vec![int(1, 4), int(1, 4)], vec![b"int"], Some(1), 2))
            .unwrap();
        assert_eq!(m.btf.type_count(), 4);
        // The final check (functions and DATASECs are added after the CUs).
        assert!(m.check_limits(1, 0).is_ok());
        assert_eq!(m.check_limits(2, 0), Err(MergeError::TooManyTypes { types: 6, max: 5 }));
        // The type section's length is 32-bit too.
        let e = m.check_limits(0, (u32::MAX / 4) as usize).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "type section of {} bytes: more than BTF's 32-bit length",
                64 + 4 * (u32::MAX as u64 / 4)
            )
        );
        // The real limit is libbpf's BTF_MAX_NR_TYPES.
        assert_eq!(MAX_TYPES, 0x7fff_ffff);
    }

    #[test]
    fn a_cu_with_int_decides_the_index_before_any_array() {
        let mut m = merger();
        m.merge(cu(vec![int(1, 4)], vec![b"int"], Some(1), 2)).unwrap();
        m.merge(cu(vec![int(1, 1), arr(1, 8)], vec![b"char"], None, 3)).unwrap();
        assert_eq!(m.btf.type_count(), 3);
        assert_eq!(m.btf.ty(TypeId::new(3)).array(), (TypeId::new(2), TypeId::new(1), 8));
    }

    #[test]
    fn shifted_ids_are_refused_only_when_they_leave_the_btf() {
        let ptr = |to: u32| vec![0, make_info(Kind::Ptr, false, 0), to];
        // Core ids 1 (an unspecified type: no record), 2 int, 3 pointer to
        // core 2: the records are int, ptr -> 2 (the int is type 1 now).
        let mut shifted = cu(vec![int(1, 4), ptr(2)], vec![b"int"], Some(2), 4);
        shifted.shifted_ids = true;
        let mut m = merger();
        m.merge(shifted).unwrap();
        assert_eq!(m.shifted_cu, Some(0));
        // type 2 -> 2 stays inside the BTF: the reference's bytes, accepted
        assert!(m.check_refs_in_range(0).is_ok());
        // a pointer to core 3 would be type 3, past the last: refused
        let mut past = cu(vec![int(1, 4), ptr(3)], vec![b"int"], Some(2), 4);
        past.shifted_ids = true;
        let mut m = merger();
        m.merge(past).unwrap();
        let e = m.check_refs_in_range(0).unwrap_err().to_string();
        assert!(
            e.contains("type [2] refers to type 3") && e.contains("DW_TAG_unspecified_type"),
            "{e}"
        );
    }
}
