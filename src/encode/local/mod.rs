//! The per-CU (parallel) half of the encoder: one decoded CU → BTF records
//! with CU-local references (core ids) and CU-local names (indices into the
//! CU's string list, in first-use order).

use std::path::Path;

use gimli::constants as dw;
use hashbrown::HashMap;

use super::features::Features;
use super::{EncodeError, Problem};
use crate::btf::{self, Kind, make_info};
use crate::dwarf::{CoreId, Cu, nm};
use crate::elf::debug::ElfInfo;
use crate::funcs::FuncStates;

mod funcflags;
mod funcs;
mod members;
mod out;
mod paramabi;
mod typeloop;
mod types;
mod vars;

pub use funcflags::function_flags;
use funcs::record_functions;
pub(crate) use out::DebugStrOff;
use out::{OFF_MAP, Out, finish};
use typeloop::{NO_EDGES, down_flags, type_loop};
use vars::encode_vars;

pub struct Ctx<'e, 'a> {
    pub features: Features,
    /// Which pahole's recording rules apply.
    pub reference: super::features::Reference,
    pub elf: &'e ElfInfo<'a>,
    pub path: &'e Path,
    /// The merge's `.debug_str` offset → BTF string offset cache (read only
    /// here), if the input has one.
    pub str_cache: Option<&'e super::strcache::StrCache>,
    /// Hash the types for the merge's collapse of exact copies.
    pub collapse: bool,
}

/// A VAR record of the CU and where it goes in a DATASEC.
#[derive(Clone, Copy, Debug)]
pub struct VarOut {
    /// The VAR's record.
    pub record: u32,
    /// The DECL_TAGs right after it that tag it: their type word is the
    /// VAR's id, set by the merge.
    pub tags: u32,
    pub section: u32,
    pub offset: u32,
    pub size: u32,
}

/// A CU's own type id, as its records and saved function states hold it
/// before the merge makes it the run's ([`super::merge`]): its core id (1,
/// 2, … in placing order), 0 for void.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalTypeId(u32);

impl LocalTypeId {
    /// The local id of a placed type, or of void.
    #[inline]
    pub(crate) fn of(core: Option<CoreId>) -> LocalTypeId {
        LocalTypeId(crate::dwarf::local_id(core))
    }
    /// The local id a record's type word holds.
    #[inline(always)]
    pub(crate) fn from_word(w: u32) -> LocalTypeId {
        LocalTypeId(w)
    }
    #[inline(always)]
    pub fn get(self) -> u32 {
        self.0
    }
}

/// A CU's own string: its position + 1 in the CU's string list
/// ([`CuOut::strs`]), 0 for the empty string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalStr(u32);

impl LocalStr {
    #[inline]
    pub(crate) fn new(n: u32) -> LocalStr {
        LocalStr(n)
    }
    #[inline]
    pub fn get(self) -> u32 {
        self.0
    }
}

/// One CU's records, ready for the in-order merge.
pub struct CuOut<'a> {
    pub words: Vec<u32>,
    pub offs: Vec<u32>,
    /// The first `n_types` records are the CU's types; then decl tags and VARs.
    pub n_types: usize,
    pub has_arrays: bool,
    pub strs: Vec<&'a [u8]>,
    /// Per local string: its `.debug_str` offset, if it has one (inline and
    /// synthesized names have none). Lets the merge skip hashing strings it
    /// has seen.
    pub(crate) strs_off: Vec<Option<DebugStrOff>>,
    /// Per local string: its BTF offset if the merge already knew it when
    /// this CU was encoded (never 0: that is the empty string's, which is
    /// not looked up); empty without a string cache.
    pub strs_known: Vec<Option<std::num::NonZeroU32>>,
    /// Local strings first used by the type records.
    pub strs_in_types: u32,
    pub int_core: Option<LocalTypeId>,
    /// Slots including slot 0.
    pub nslots: u32,
    /// A nested DW_TAG_unspecified_type holds a core id but emits nothing,
    /// so the CU's later ids are shifted (as in the reference).
    pub shifted_ids: bool,
    /// Section offset of the CU (for messages).
    pub cu_offset: u64,
    pub vars: Vec<VarOut>,
    /// Saved function states, with the CU's own type ids and strings.
    pub funcs: FuncStates<LocalTypeId, LocalStr>,
    /// Per local type id (0 = void), its hash for the merge's collapse of
    /// exact copies, when [`Ctx::collapse`]; else empty.
    pub type_hashes: Vec<Option<u64>>,
}

struct Enc<'c, 'e, 'a> {
    ctx: &'c Ctx<'e, 'a>,
    cu: &'c Cu<'a>,
}

impl<'a> Enc<'_, '_, 'a> {
    fn unsupported(&self, die: crate::dwarf::DieOffset, msg: String) -> EncodeError {
        // The source place, read again from the DWARF on this error path.
        let elf = self.ctx.elf;
        let endian = match elf.endian {
            btf::Endian::Little => gimli::RunTimeEndian::Little,
            btf::Endian::Big => gimli::RunTimeEndian::Big,
        };
        let context = crate::dwarf::die_context(&crate::dwarf::dwarf(&elf.debug, endian), self.cu.offset, die);
        EncodeError::at(
            self.ctx.path,
            Problem::Unsupported {
                what: msg,
                die,
                cu: self.cu.offset,
                context,
            },
        )
    }
    fn bad_var(&self, name: &[u8], die: crate::dwarf::DieOffset, problem: crate::encode::VarProblem) -> EncodeError {
        EncodeError::at(
            self.ctx.path,
            Problem::Variable {
                name: String::from_utf8_lossy(name).into_owned(),
                die,
                cu: self.cu.offset,
                problem,
            },
        )
    }
}

/// How many of `n` members, enumerators or parameters a record keeps, the
/// count wrapping at `vlen_mask` ([`vlen_mask`]). In 16 bits, the
/// references' (libbpf, v1.8.0 included, counts on with it wrapping, and
/// its compaction after dedup keeps the first `vlen` entries): past 65535
/// they keep `n mod 65536` (names of the others still go into the string
/// section). Writing only those here keeps the pre-dedup BTF valid too.
pub(crate) fn kept_entries(n: usize, vlen_mask: u32) -> usize {
    n & vlen_mask as usize
}

/// The vlen field's width as the encoder fills it: 24 bits when the output
/// is BTF 2026 with its layout section (read only by 2026's tools and
/// kernels, which read 24), else the 16 bits of the original format.
pub(crate) fn vlen_mask(f: &Features) -> u32 {
    if f.layout { crate::btf::VLEN_LIMIT } else { 0xffff }
}

/// Whether an arena name (see `dwarf::nm`) is empty, touching one byte only.
#[inline]
fn name_empty(s: &[u8]) -> bool {
    s.first().is_none_or(|&b| b == 0)
}

pub fn encode_cu<'a>(ctx: &Ctx<'_, 'a>, cu: &Cu<'a>) -> Result<CuOut<'a>, EncodeError> {
    let enc = Enc { ctx, cu };
    let names = expected_names(cu);
    let mut o = Out {
        o: CuOut {
            words: Vec::with_capacity(
                cu.slots.len() * 4
                    + cu.members.len() * 3
                    + cu.params.len() * 2
                    + cu.enumerators.len() * 3
                    + cu.annots.len() * 4,
            ),
            offs: Vec::with_capacity(cu.slots.len()),
            n_types: 0,
            has_arrays: false,
            strs: Vec::with_capacity(names),
            strs_off: Vec::with_capacity(names),
            strs_known: Vec::new(),
            type_hashes: Vec::new(),
            strs_in_types: 0,
            int_core: None,
            nslots: cu.slots.len() as u32 + 1,
            shifted_ids: cu.has_nested_unspecified,
            cu_offset: cu.offset,
            vars: Vec::new(),
            funcs: FuncStates::default(),
        },
        ids: HashMap::new(),
        by_off: OFF_MAP.with(|m| {
            let mut m = m.take();
            m.start(names);
            m
        }),
        str_sec: (ctx.elf.debug.str.as_ptr() as usize, ctx.elf.debug.str.len()),
        vlen_mask: vlen_mask(&ctx.features),
    };
    // Core id -> where in `o.o.words` the record it emitted starts, noted
    // while the record is hot (a gather afterwards costs a pass of misses).
    let mut rec_at = vec![None; cu.slots.len() + 1];
    let mut down = vec![NO_EDGES; cu.slots.len() + 1];
    for (i, s) in cu.slots.iter().enumerate() {
        let core = CoreId::at(i).get();
        if o.o.int_core.is_none() && s.tag == dw::DW_TAG_base_type && nm(s.name.get()) == b"int" {
            o.o.int_core = Some(LocalTypeId(core));
        }
        let before = o.o.offs.len();
        enc.encode_slot(&mut o, s)?;
        if o.o.offs.len() > before {
            let at = o.o.offs[before];
            // (word positions stay far below u32::MAX: the type section's
            // length in bytes is a u32)
            rec_at[core as usize] = nonmax::NonMaxU32::new(at);
            down[core as usize] = down_flags(&o.o.words[at as usize..], core);
        }
    }
    o.o.n_types = o.o.offs.len();
    if let Some((core, msg)) = type_loop(&o.o, &rec_at, &down) {
        let s = &cu.slots[core as usize - 1];
        return Err(EncodeError::at(
            ctx.path,
            Problem::TypeLoop {
                tag: s.tag,
                what: msg,
                die: s.die,
                cu: cu.offset,
            },
        ));
    }
    o.o.strs_in_types = o.o.strs.len() as u32;

    // Decl tags of structs, unions and typedefs. An empty value stops the rest
    // of the CU (decl tags, functions, variables), as in the reference.
    let mut truncated = false;
    'tags: for (i, s) in cu.slots.iter().enumerate() {
        if !matches!(
            s.tag,
            dw::DW_TAG_structure_type | dw::DW_TAG_union_type | dw::DW_TAG_typedef
        ) {
            continue;
        }
        for a in &cu.annots[s.annots] {
            if name_empty(a.value) {
                truncated = true;
                break 'tags;
            }
            let n = o.s(a.value);
            o.rec(&[n, make_info(Kind::DeclTag, false, 0), i as u32 + 1, a.component as u32]);
        }
    }
    if truncated {
        OFF_MAP.set(std::mem::take(&mut o.by_off));
        return Ok(finish(ctx, o.o));
    }

    record_functions(ctx, cu, &mut o);
    encode_vars(&enc, &mut o)?;
    OFF_MAP.set(std::mem::take(&mut o.by_off));
    Ok(finish(ctx, o.o))
}

/// How many distinct names the unit's records are expected to use, to size
/// their containers: one per slot and per two members (the median CU of the
/// vmlinux has 0.97 of that, nine in ten at most 1.14), up to
/// [`NAMES_SIZED_UP_TO`].
fn expected_names(cu: &Cu<'_>) -> usize {
    (cu.slots.len() + cu.members.len() / 2).min(NAMES_SIZED_UP_TO)
}

/// Past this many names the containers grow as they fill. The largest CU of
/// a 6.12 vmlinux or of amdgpu.ko uses 20 K names; an LTO file's merged unit
/// repeats its parts' names (the ThinLTO kernel's 2.2 M slots and 4.1 M
/// members use 23 K), and sized from its columns they took 147 MiB at its
/// peak.
const NAMES_SIZED_UP_TO: usize = 1 << 16;

#[cfg(test)]
mod tests;
