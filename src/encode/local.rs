//! The per-CU (parallel) half of the encoder: one decoded CU → BTF records
//! with CU-local references (core ids) and CU-local names (indices into the
//! CU's string list, in first-use order).

use std::path::{Path, PathBuf};

use gimli::constants as dw;
use hashbrown::HashMap;

use super::EncodeError;
use super::features::Features;
use super::lang::DW_LANG_RUST;
use super::offmap::OffMap;
use crate::btf::{self, Kind, make_info};
use crate::dwarf::{Cu, DW_TAG_LLVM_ANNOTATION, NONE, Slot, nm};
use crate::elf::debug::ElfInfo;
use crate::funcs::FuncStates;

mod funcflags;
pub use funcflags::function_flags;

pub struct Ctx<'e, 'a> {
    pub features: Features,
    pub elf: &'e ElfInfo<'a>,
    pub path: &'e Path,
    /// The merge's `.debug_str` offset → BTF string offset cache (read only here).
    pub str_cache: &'e super::strcache::StrCache,
}

/// A VAR record of the CU and where it goes in a DATASEC.
#[derive(Clone, Copy, Debug)]
pub struct VarOut {
    pub record: u32,
    pub section: u32,
    pub offset: u32,
    pub size: u32,
}

/// One CU's records, ready for the in-order merge.
pub struct CuOut<'a> {
    pub words: Vec<u32>,
    pub offs: Vec<u32>,
    /// The first `n_types` records are the CU's types; then decl tags and VARs.
    pub n_types: usize,
    pub has_arrays: bool,
    pub strs: Vec<&'a [u8]>,
    /// Per local string: its `.debug_str` offset, or `NONE` (inline or
    /// synthesized). Lets the merge skip hashing strings it has seen.
    pub strs_off: Vec<u32>,
    /// Per local string: its BTF offset if the merge already knew it when
    /// this CU was encoded, else 0.
    pub strs_known: Vec<u32>,
    /// Local strings first used by the type records.
    pub strs_in_types: u32,
    pub int_core: Option<u32>,
    /// Slots including slot 0.
    pub nslots: u32,
    /// A nested DW_TAG_unspecified_type holds a core id but emits nothing,
    /// so the CU's later ids are shifted (as in the reference).
    pub shifted_ids: bool,
    /// Section offset of the CU (for messages).
    pub cu_offset: u64,
    pub vars: Vec<VarOut>,
    /// Saved function states with CU-local ids (core ids, local string indices).
    pub funcs: FuncStates,
}

struct Out<'a> {
    o: CuOut<'a>,
    /// Strings not in `.debug_str`, by content.
    ids: HashMap<&'a [u8], u32>,
    /// Strings in `.debug_str`, by offset: a name at one offset is one
    /// string. The worker thread's map, lent for the CU ([`OFF_MAP`]).
    by_off: OffMap,
    /// Address and length of `.debug_str`.
    str_sec: (usize, usize),
}

impl<'a> Out<'a> {
    fn s(&mut self, s: &'a [u8]) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let n = self.o.strs.len() as u32 + 1;
        let p = (s.as_ptr() as usize).wrapping_sub(self.str_sec.0);
        if p < self.str_sec.1 {
            let strs = &mut self.o.strs;
            let offs = &mut self.o.strs_off;
            return self.by_off.get_or_insert(p as u32, || {
                strs.push(s);
                offs.push(p as u32);
                n
            });
        }
        let strs = &mut self.o.strs;
        let offs = &mut self.o.strs_off;
        *self.ids.entry(s).or_insert_with(|| {
            strs.push(s);
            offs.push(NONE);
            n
        })
    }
    fn begin(&mut self) {
        self.o.offs.push(self.o.words.len() as u32);
    }
    fn rec(&mut self, w: &[u32]) {
        self.begin();
        self.o.words.extend_from_slice(w);
    }
    fn bump_vlen(&mut self) {
        let s = *self.o.offs.last().unwrap() as usize;
        let info = &mut self.o.words[s + 1];
        *info = (*info & !0xffff) | (((*info & 0xffff) + 1) & 0xffff);
    }
    fn set_kflag(&mut self) {
        let s = *self.o.offs.last().unwrap() as usize;
        self.o.words[s + 1] |= 1 << 31;
    }
}

const ATE_BOOLEAN: u8 = 2;
const ATE_COMPLEX_FLOAT: u8 = 3;
const ATE_FLOAT: u8 = 4;
const ATE_SIGNED: u8 = 5;
const ATE_SIGNED_CHAR: u8 = 6;
const ATE_IMAGINARY_FLOAT: u8 = 9;

struct Enc<'c, 'e, 'a> {
    ctx: &'c Ctx<'e, 'a>,
    cu: &'c Cu<'a>,
}

impl<'a> Enc<'_, '_, 'a> {
    fn unsupported(&self, die: u64, msg: String) -> EncodeError {
        // The source place, read again from the DWARF on this error path.
        let elf = self.ctx.elf;
        let endian = match elf.endian {
            btf::Endian::Little => gimli::RunTimeEndian::Little,
            btf::Endian::Big => gimli::RunTimeEndian::Big,
        };
        let context = crate::dwarf::die_context(&crate::dwarf::dwarf(&elf.debug, endian), die)
            .map(|c| format!(": {c}"))
            .unwrap_or_default();
        EncodeError::Unsupported {
            path: self.path(),
            msg: format!("{msg} at DIE {die:#x} (CU {:#x}){context}", self.cu.offset),
        }
    }
    fn path(&self) -> PathBuf {
        self.ctx.path.to_path_buf()
    }

    /// The name of a type, inheriting it through DW_AT_specification.
    fn type_name(&self, s: &Slot<'a>) -> &'a [u8] {
        if s.spec != NONE
            && name_empty(s.name)
            && let Some(t) = self.cu.slot(self.cu.core(s.spec))
        {
            return t.name;
        }
        s.name
    }

    /// Size in bytes of the type with core id `core`, as the reference's `tag__size`.
    fn size_of(&self, core: u32, depth: u32) -> u64 {
        let Some(s) = self.cu.slot(core) else {
            return 0;
        };
        if depth > 64 {
            return 0;
        }
        match s.tag {
            dw::DW_TAG_pointer_type | dw::DW_TAG_reference_type | dw::DW_TAG_rvalue_reference_type => {
                self.cu.address_size as u64
            }
            dw::DW_TAG_base_type => s.size,
            dw::DW_TAG_enumeration_type => {
                if s.size == 0 {
                    4
                } else {
                    s.size
                }
            }
            dw::DW_TAG_subroutine_type => self.cu.address_size as u64,
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type | dw::DW_TAG_interface_type => {
                s.size
            }
            _ => {
                let inner = if s.ty == NONE {
                    s.size
                } else {
                    self.size_of(self.cu.core(s.ty), depth + 1)
                };
                if s.tag == dw::DW_TAG_array_type {
                    inner.wrapping_mul(s.nelems as u64)
                } else {
                    inner
                }
            }
        }
    }

    /// Follows typedefs and qualifiers.
    fn strip(&self, mut core: u32) -> u32 {
        for _ in 0..64 {
            match self.cu.slot(core) {
                Some(s)
                    if matches!(
                        s.tag,
                        dw::DW_TAG_typedef
                            | dw::DW_TAG_const_type
                            | dw::DW_TAG_volatile_type
                            | dw::DW_TAG_restrict_type
                            | dw::DW_TAG_atomic_type
                    ) =>
                {
                    core = self.cu.core(s.ty)
                }
                _ => return core,
            }
        }
        core
    }

    /// (bit offset, bit size) as BTF stores them (32 bits, cut as the
    /// reference cuts them), and whether the offset was cut: then the
    /// member lies 512 MiB or more into its struct.
    #[inline]
    fn member_bit_offset(&self, m: &crate::dwarf::Member<'a>) -> (u32, u32, bool) {
        if m.bits == 0 {
            return plain_bit_offset(m.loc);
        }
        let little = self.ctx.elf.endian == btf::Endian::Little;
        let storage = || self.size_of(self.strip(self.cu.core(m.ty)), 0);
        bit_offset_of(m.loc, self.cu.bits(m), storage, little)
    }

    /// Writes the members of the struct or union just begun, in the order
    /// given, with vlen and kind_flag set once. `false` if BTF cannot place some member: nothing
    /// is written then, and [`Enc::member_error`] names it (the CU then
    /// fails, so the names interned here are moot).
    fn emit_members<'m>(
        &self,
        o: &mut Out<'a>,
        members: impl ExactSizeIterator<Item = &'m crate::dwarf::Member<'a>>,
        union: bool,
    ) -> bool
    where
        'a: 'm,
    {
        let rec_start = *o.o.offs.last().expect("the struct's record was just begun") as usize;
        let n = members.len();
        let keep = kept_entries(n);
        o.o.words.reserve(3 * keep);
        let (mut kflag, mut big) = (false, false);
        for (pos, m) in members.enumerate() {
            let (bit_off, bit_size, cut) = self.member_bit_offset(m);
            let is_bitfield = bit_size != 0 || bit_off % 8 != 0;
            // what member_error refuses (some only once the struct's
            // kind_flag is known, hence `big`)
            if cut || (is_bitfield && (bit_size == 0 || bit_off > 0xff_ffff)) || (union && bit_off != 0) {
                o.o.words.truncate(rec_start + 3);
                return false;
            }
            kflag |= is_bitfield;
            big |= bit_off > 0xff_ffff;
            let mn = o.s(m.name);
            if pos < keep {
                let ty = self.cu.core(m.ty);
                o.o.words.extend_from_slice(&[mn, ty, bit_off | (bit_size << 24)]);
            }
        }
        if kflag && big {
            o.o.words.truncate(rec_start + 3);
            return false;
        }
        let info = &mut o.o.words[rec_start + 1];
        *info = (*info & !0xffff) | (n as u32 & 0xffff) | if kflag { 1 << 31 } else { 0 };
        true
    }

    /// Why [`Enc::emit_members`] refused these members: first a member
    /// lying further into the struct than BTF's offset field holds (32
    /// bits; 24 once the struct has a bitfield, as kind_flag takes the top
    /// 8) — the reference cuts such an offset silently, giving a wrong
    /// layout or one the kernel refuses — then, in `order`, a bitfield BTF
    /// cannot place or a union member off offset 0.
    #[cold]
    #[inline(never)]
    fn member_error(
        &self,
        members: &[crate::dwarf::Member<'a>],
        order: Option<&[u32]>,
        union: bool,
        die: u64,
    ) -> EncodeError {
        let placed: smallvec::SmallVec<[(u32, u32, bool); 32]> =
            members.iter().map(|m| self.member_bit_offset(m)).collect();
        let kflag = placed.iter().any(|&(bo, bs, _)| bs != 0 || bo % 8 != 0);
        let name = |m: &crate::dwarf::Member<'_>| String::from_utf8_lossy(nm(m.name)).into_owned();
        for (m, &(bo, _, cut)) in members.iter().zip(&placed) {
            if cut || (kflag && bo > 0xff_ffff) {
                return self.unsupported(
                    m.die,
                    format!(
                        "DW_TAG_member `{}` lies {} bytes into its struct: more than BTF's {}-bit member offset holds{}",
                        name(m),
                        m.loc.or(self.cu.bits(m).data_bit_offset.map(|b| b / 8)).unwrap_or(0),
                        if cut { 32 } else { 24 },
                        if cut { "" } else { " in a struct with bitfields" },
                    ),
                );
            }
        }
        for pos in 0..members.len() {
            let i = order.map_or(pos, |o| o[pos] as usize);
            let (m, (bit_off, bit_size, _)) = (&members[i], placed[i]);
            if (bit_size != 0 || bit_off % 8 != 0) && (bit_size == 0 || bit_off > 0xff_ffff) {
                return self.unsupported(
                    m.die,
                    format!(
                        "DW_TAG_member `{}` at bit offset {bit_off}: BTF cannot place it",
                        name(m)
                    ),
                );
            }
            if union && bit_off != 0 {
                return self.unsupported(
                    m.die,
                    format!(
                        "DW_TAG_member `{}` of a union at bit offset {bit_off}: BTF cannot place it",
                        name(m)
                    ),
                );
            }
        }
        // emit_members refuses only what one of the loops above names
        self.unsupported(die, "a member BTF cannot place".into())
    }

    fn encode_slot(&self, o: &mut Out<'a>, core: u32, s: &Slot<'a>) -> Result<(), EncodeError> {
        let f = &self.ctx.features;
        let cu = self.cu;
        let r = |off: u32| cu.core(off);
        match s.tag {
            dw::DW_TAG_base_type => {
                let enc = s.encoding;
                let signed = enc == ATE_SIGNED || enc == ATE_SIGNED_CHAR;
                let boolean = enc == ATE_BOOLEAN;
                let mut encoding = 0;
                if signed {
                    encoding = btf::INT_SIGNED;
                } else if boolean {
                    encoding = btf::INT_BOOL;
                } else if f.float && enc == ATE_FLOAT {
                    if !matches!(s.size, 2 | 4 | 8 | 12 | 16) {
                        return Err(self.unsupported(
                            s.die,
                            format!(
                                "DW_TAG_base_type float `{}` of size {}: BTF has no FLOAT of that size",
                                String::from_utf8_lossy(nm(s.name)),
                                s.size
                            ),
                        ));
                    }
                    let n = o.s(s.name);
                    o.rec(&[n, make_info(Kind::Float, false, 0), s.size as u32]);
                    return Ok(());
                } else if f.float && (enc == ATE_COMPLEX_FLOAT || enc == ATE_IMAGINARY_FLOAT) {
                    return Err(self.unsupported(
                        s.die,
                        "DW_TAG_base_type: complex, interval and imaginary float types are not supported (BTF has no kind for them)".into(),
                    ));
                }
                let size = s.size;
                if size == 0 || !size.is_power_of_two() || size > 16 {
                    let n = o.s(b"__SANITIZED_FAKE_INT__");
                    o.rec(&[n, make_info(Kind::Int, false, 0), 4, (encoding << 24) | 32]);
                } else {
                    if name_empty(s.name) {
                        return Err(
                            self.unsupported(s.die, "DW_TAG_base_type without a name: BTF INT needs one".into())
                        );
                    }
                    let n = o.s(s.name);
                    o.rec(&[
                        n,
                        make_info(Kind::Int, false, 0),
                        size as u32,
                        (encoding << 24) | (size as u32 * 8),
                    ]);
                }
            }
            dw::DW_TAG_pointer_type => o.rec(&[0, make_info(Kind::Ptr, false, 0), r(s.ty)]),
            dw::DW_TAG_const_type => o.rec(&[0, make_info(Kind::Const, false, 0), r(s.ty)]),
            dw::DW_TAG_volatile_type => o.rec(&[0, make_info(Kind::Volatile, false, 0), r(s.ty)]),
            dw::DW_TAG_restrict_type => o.rec(&[0, make_info(Kind::Restrict, false, 0), r(s.ty)]),
            dw::DW_TAG_typedef => {
                let name = self.type_name(s);
                if name_empty(name) {
                    return Err(self.unsupported(s.die, "DW_TAG_typedef without a name: BTF TYPEDEF needs one".into()));
                }
                let n = o.s(name);
                o.rec(&[n, make_info(Kind::Typedef, false, 0), r(s.ty)]);
            }
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type => {
                let union = s.tag == dw::DW_TAG_union_type;
                let name = self.type_name(s);
                if s.declaration {
                    if name_empty(name) {
                        return Err(self.unsupported(
                            s.die,
                            format!("{} declaration without a name: BTF FWD needs one", s.tag),
                        ));
                    }
                    let n = o.s(name);
                    o.rec(&[n, make_info(Kind::Fwd, union, 0), 0]);
                    return Ok(());
                }
                let n = o.s(name);
                let kind = if union { Kind::Union } else { Kind::Struct };
                o.rec(&[n, make_info(kind, false, 0), s.size as u32]);
                let members = &cu.members[s.kids as usize..(s.kids + s.nkids) as usize];
                // Rust CUs: members in offset order, as the reference sorts them
                let order: Option<smallvec::SmallVec<[u32; 32]>> = (cu.language == DW_LANG_RUST).then(|| {
                    let mut order: smallvec::SmallVec<[u32; 32]> = (0..members.len() as u32).collect();
                    order.sort_by_key(|&i| {
                        let m = &members[i as usize];
                        match cu.bits(m).data_bit_offset {
                            Some(_) => self.member_bit_offset(m).0 / 8,
                            None => m.loc.unwrap_or(0) as u32,
                        }
                    });
                    order
                });
                let placed = match &order {
                    None => self.emit_members(o, members.iter(), union),
                    Some(order) => self.emit_members(o, order.iter().map(|&i| &members[i as usize]), union),
                };
                if !placed {
                    return Err(self.member_error(members, order.as_deref(), union, s.die));
                }
            }
            dw::DW_TAG_enumeration_type => {
                let name = self.type_name(s);
                let size_bits = if s.size == 0 { 32 } else { s.size * 8 };
                let bytes = size_bits / 8;
                if !matches!(bytes, 1 | 2 | 4 | 8) {
                    return Err(self.unsupported(
                        s.die,
                        format!("DW_TAG_enumeration_type of size {bytes}: BTF enums are 1, 2, 4 or 8 bytes"),
                    ));
                }
                let n = o.s(name);
                let enums = &cu.enumerators[s.kids as usize..(s.kids + s.nkids) as usize];
                if f.enum64 && bytes > 4 {
                    let signed = cu.slot(r(s.ty)).is_some_and(|t| {
                        t.tag == dw::DW_TAG_base_type && (t.encoding == ATE_SIGNED || t.encoding == ATE_SIGNED_CHAR)
                    });
                    o.rec(&[n, make_info(Kind::Enum64, signed, 0), bytes as u32]);
                    let keep = kept_entries(enums.len());
                    for (pos, e) in enums.iter().enumerate() {
                        if name_empty(e.name) {
                            return Err(self.unsupported(s.die, "DW_TAG_enumerator without a name".into()));
                        }
                        let en = o.s(e.name);
                        o.bump_vlen();
                        if pos < keep {
                            o.o.words
                                .extend_from_slice(&[en, e.value as u32, (e.value >> 32) as u32]);
                        }
                    }
                } else {
                    o.rec(&[n, make_info(Kind::Enum, false, 0), bytes as u32]);
                    let keep = kept_entries(enums.len());
                    for (pos, e) in enums.iter().enumerate() {
                        if name_empty(e.name) {
                            return Err(self.unsupported(s.die, "DW_TAG_enumerator without a name".into()));
                        }
                        let v = if f.enum64 {
                            e.value as i64
                        } else {
                            e.value as u32 as i64
                        };
                        if v < i32::MIN as i64 || v > u32::MAX as i64 {
                            return Err(self.unsupported(
                                s.die,
                                format!(
                                    "DW_TAG_enumerator `{}` value {v} does not fit a 4-byte BTF enum",
                                    String::from_utf8_lossy(nm(e.name))
                                ),
                            ));
                        }
                        let en = o.s(e.name);
                        o.bump_vlen();
                        if v < 0 {
                            o.set_kflag();
                        }
                        if pos < keep {
                            o.o.words.extend_from_slice(&[en, v as u32]);
                        }
                    }
                }
            }
            dw::DW_TAG_array_type => {
                o.o.has_arrays = true;
                o.rec(&[0, make_info(Kind::Array, false, 0), 0, r(s.ty), 0, s.nelems]);
            }
            dw::DW_TAG_subroutine_type => {
                o.rec(&[0, make_info(Kind::FuncProto, false, 0), r(s.ty)]);
                let keep = kept_entries(s.nkids as usize + s.varargs as usize);
                for (pos, p) in cu.params[s.kids as usize..(s.kids + s.nkids) as usize]
                    .iter()
                    .enumerate()
                {
                    let pn = o.s(p.name);
                    o.bump_vlen();
                    if pos < keep {
                        o.o.words.extend_from_slice(&[pn, r(p.ty)]);
                    }
                }
                if s.varargs {
                    o.bump_vlen();
                    if (s.nkids as usize) < keep {
                        o.o.words.extend_from_slice(&[0, 0]);
                    }
                }
            }
            DW_TAG_LLVM_ANNOTATION => {
                if name_empty(s.name) {
                    return Err(self.unsupported(s.die, "btf_type_tag annotation without a value".into()));
                }
                let n = o.s(s.name);
                o.rec(&[n, make_info(Kind::TypeTag, false, 0), r(s.ty)]);
            }
            dw::DW_TAG_unspecified_type => {
                // Placed by the loader but never emitted (shifts later ids).
            }
            other => {
                let _ = core;
                return Err(self.unsupported(s.die, format!("unsupported {other}: BTF has no kind for it")));
            }
        }
        Ok(())
    }
}

/// How many of `n` members, enumerators or parameters a record keeps. BTF's
/// vlen is 16 bits: the reference (libbpf) counts on with it wrapping, and
/// its compaction after dedup keeps the first `vlen` entries, so past 65535
/// it keeps `n mod 65536` (names of the others still go into the string
/// section). Writing only those here keeps the pre-dedup BTF valid too.
pub(crate) fn kept_entries(n: usize) -> usize {
    n % 65536
}

/// Whether an arena name (see `dwarf::nm`) is empty, touching one byte only.
#[inline]
fn name_empty(s: &[u8]) -> bool {
    s.first().is_none_or(|&b| b == 0)
}

fn valid_var_name(n: &[u8]) -> bool {
    if n.is_empty() || n.len() > 128 {
        return false;
    }
    let ok_first = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b'.';
    ok_first(n[0]) && n[1..].iter().all(|&c| ok_first(c) || c.is_ascii_digit())
}

const SKIPPED_VAR_PREFIXES: &[&[u8]] = &[
    b"__UNIQUE_ID",
    b"__tpstrtab_",
    b"__exitcall_",
    b"__gendwarfksyms_ptr_",
    b"__func_stack_frame_non_standard_",
];

pub fn encode_cu<'a>(ctx: &Ctx<'_, 'a>, cu: &Cu<'a>) -> Result<CuOut<'a>, EncodeError> {
    let enc = Enc { ctx, cu };
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
            // one string per slot and per two members: the median CU of the
            // vmlinux has 0.97 of that, nine in ten at most 1.14
            strs: Vec::with_capacity(cu.slots.len() + cu.members.len() / 2),
            strs_off: Vec::with_capacity(cu.slots.len() + cu.members.len() / 2),
            strs_known: Vec::new(),
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
            m.start(cu.slots.len() + cu.members.len() / 2);
            m
        }),
        str_sec: (ctx.elf.debug.str.as_ptr() as usize, ctx.elf.debug.str.len()),
    };
    // Core id -> where in `o.o.words` the record it emitted starts (NONE:
    // none), noted while the record is hot (a gather afterwards was 2 % of
    // an encode without dedup).
    let mut rec_at = vec![NONE; cu.slots.len() + 1];
    let mut down = vec![NO_EDGES; cu.slots.len() + 1];
    for (i, s) in cu.slots.iter().enumerate() {
        let core = i as u32 + 1;
        if o.o.int_core.is_none() && s.tag == dw::DW_TAG_base_type && nm(s.name) == b"int" {
            o.o.int_core = Some(core);
        }
        let before = o.o.offs.len();
        enc.encode_slot(&mut o, core, s)?;
        if o.o.offs.len() > before {
            let at = o.o.offs[before];
            rec_at[core as usize] = at;
            down[core as usize] = down_flags(&o.o.words[at as usize..], core);
        }
    }
    o.o.n_types = o.o.offs.len();
    if let Some((core, msg)) = type_loop(&o.o, &rec_at, &down) {
        let s = &cu.slots[core as usize - 1];
        return Err(EncodeError::Input {
            path: enc.path(),
            msg: format!(".debug_info: {} {msg} at DIE {:#x} (CU {:#x})", s.tag, s.die, cu.offset),
        });
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
        for a in &cu.annots[s.annots as usize..(s.annots + s.nannots) as usize] {
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

thread_local! {
    /// The worker thread's string map, kept from CU to CU (a CU that fails
    /// drops it; the next one starts a new map).
    static OFF_MAP: std::cell::Cell<OffMap> = std::cell::Cell::new(OffMap::default());
}

/// Which references a loop check follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loop {
    /// Through qualifiers, typedefs, pointers, arrays and prototypes, which
    /// BTF dedup resolves depth-first: a loop that no struct or union breaks
    /// cannot be deduplicated (libbpf fails with ELOOP, and so the reference).
    Reference,
    /// Through qualifiers, typedefs, arrays and members: a struct that holds
    /// itself by value has no size (the kernel refuses it as a loop; the
    /// reference writes it).
    Containment,
}

const PTR: u32 = Kind::Ptr as u32;
const ARRAY: u32 = Kind::Array as u32;
const STRUCT: u32 = Kind::Struct as u32;
const UNION: u32 = Kind::Union as u32;
const TYPEDEF: u32 = Kind::Typedef as u32;
const VOLATILE: u32 = Kind::Volatile as u32;
const CONST: u32 = Kind::Const as u32;
const RESTRICT: u32 = Kind::Restrict as u32;
const FUNC_PROTO: u32 = Kind::FuncProto as u32;
const TYPE_TAG: u32 = Kind::TypeTag as u32;
/// [`down_flags`]: every reference edge goes to a smaller core id.
const REF_DOWN: u8 = 1;
/// Every containment edge does.
const CONTAIN_DOWN: u8 = 2;
/// No reference edge at all.
const REF_LEAF: u8 = 4;
/// No containment edge at all.
const CONTAIN_LEAF: u8 = 8;
/// The flags of a core id without a record (and of void).
const NO_EDGES: u8 = REF_DOWN | CONTAIN_DOWN | REF_LEAF | CONTAIN_LEAF;

/// For [`type_loop`]: whether all edges of each kind out of `root`'s record
/// `w` go to smaller ids (the common case, which needs no search) and
/// whether it has none at all (a search reaching it is done with it at
/// once: a pointer's struct, a member's base type). Taken as each record is
/// written, while it is in cache; it mirrors `edges` in [`type_loop`]
/// (deriving it through `edges` per member measured 1.5 % more
/// instructions for a whole vmlinux encode).
fn down_flags(w: &[u32], root: u32) -> u8 {
    let vlen = (w[1] & 0xffff) as usize;
    let below = |t: u32| t < root;
    // (references down, containment down, no reference edge, no containment edge)
    let (r, c, rl, cl) = match (w[1] >> 24) & 0x1f {
        STRUCT | UNION => (
            true,
            w[3..3 + 3 * vlen].chunks_exact(3).all(|m| below(m[1])),
            true,
            vlen == 0,
        ),
        FUNC_PROTO => (
            below(w[2]) && w[3..3 + 2 * vlen].chunks_exact(2).all(|p| below(p[1])),
            true,
            false,
            true,
        ),
        CONST | VOLATILE | RESTRICT | TYPEDEF => (below(w[2]), below(w[2]), false, false),
        ARRAY => (below(w[3]), below(w[3]), false, false),
        PTR | TYPE_TAG => (below(w[2]), true, false, true),
        _ => (true, true, true, true),
    };
    (r as u8 * REF_DOWN) | (c as u8 * CONTAIN_DOWN) | (rl as u8 * REF_LEAF) | (cl as u8 * CONTAIN_LEAF)
}

/// A loop in the CU's type references that BTF cannot hold, as (core id
/// where it closes, message); only damaged DWARF has one. It runs on the
/// records just encoded, whose references are already resolved to core ids
/// (no lookups), depth-first with an explicit stack (chains of any depth
/// cost no stack).
fn type_loop(o: &CuOut<'_>, start: &[u32], down: &[u8]) -> Option<(u32, String)> {
    // `start`: per core id, where its record starts in `o.words` (NONE:
    // none); `down`: its [`down_flags`].
    let n = start.len();
    let words = &o.words[..];
    for mode in [Loop::Reference, Loop::Containment] {
        // Where the references `mode` follows out of `core`'s record lie:
        // (first word, count, stride); every kind's are evenly spaced.
        let edges = |core: u32| -> (usize, u32, usize) {
            let s = start[core as usize];
            if s == NONE {
                return (0, 0, 0);
            }
            let s = s as usize;
            let info = words[s + 1];
            let vlen = info & 0xffff;
            match ((info >> 24) & 0x1f, mode) {
                (CONST | VOLATILE | RESTRICT | TYPEDEF, _) => (s + 2, 1, 0),
                // The element type.
                (ARRAY, _) => (s + 3, 1, 0),
                (PTR | TYPE_TAG, Loop::Reference) => (s + 2, 1, 0),
                // The return type, then each parameter's.
                (FUNC_PROTO, Loop::Reference) => (s + 2, vlen + 1, 2),
                // Each member's type.
                (STRUCT | UNION, Loop::Containment) => (s + 4, vlen, 3),
                _ => (0, 0, 0),
            }
        };
        // 0 unvisited, 1 on the path, 2 done. Nodes are taken in id order,
        // so those below `root` are done: a node whose references all go
        // down is done at once, and only one with an upward reference (a
        // loop has one) needs the search. A path entry is a node and what
        // is left of its references: (node, next word, count left, stride).
        let mut color = vec![0u8; n];
        let mut path: Vec<(u32, usize, u32, usize)> = Vec::new();
        let (bit, leaf) = match mode {
            Loop::Reference => (REF_DOWN, REF_LEAF),
            Loop::Containment => (CONTAIN_DOWN, CONTAIN_LEAF),
        };
        for root in 1..n as u32 {
            if color[root as usize] != 0 {
                continue;
            }
            if down[root as usize] & bit != 0 {
                color[root as usize] = 2;
                continue;
            }
            color[root as usize] = 1;
            let (at, left, stride) = edges(root);
            path.push((root, at, left, stride));
            while let Some(top) = path.last_mut() {
                if top.2 == 0 {
                    color[top.0 as usize] = 2;
                    path.pop();
                    continue;
                }
                let t = words[top.1];
                top.1 += top.3;
                top.2 -= 1;
                match t {
                    t if t == 0 || t as usize >= n || color[t as usize] == 2 => {}
                    t if color[t as usize] == 0 && down[t as usize] & leaf != 0 => color[t as usize] = 2,
                    t if color[t as usize] == 0 => {
                        color[t as usize] = 1;
                        let (at, left, stride) = edges(t);
                        path.push((t, at, left, stride));
                    }
                    t => {
                        let len = path.len() - path.iter().position(|p| p.0 == t).unwrap_or(0);
                        let msg = match mode {
                            Loop::Reference => format!(
                                "refers back to itself through {len} type(s) with no struct or union between (a type loop BTF cannot hold)"
                            ),
                            Loop::Containment => {
                                format!("contains itself by value through {len} type(s) (a type loop BTF cannot hold)")
                            }
                        };
                        return Some((t, msg));
                    }
                }
            }
        }
    }
    None
}

/// Looks up, in parallel with the merge, which strings already have a BTF
/// offset, so that the sequential merge does not have to.
fn finish<'a>(ctx: &Ctx<'_, 'a>, mut o: CuOut<'a>) -> CuOut<'a> {
    let cache = ctx.str_cache;
    o.strs_known = o
        .strs_off
        .iter()
        .map(|&off| if off != NONE { cache.get(off) } else { 0 })
        .collect();
    o
}

/// The reference's per-CU function recording: which subprograms are saved
/// and, as they are, their parameter names and annotation values interned.
fn record_functions<'a>(ctx: &Ctx<'_, 'a>, cu: &Cu<'a>, o: &mut Out<'a>) {
    let table = &ctx.elf.funcs;
    if table.is_empty() || cu.funcs.is_empty() {
        return;
    }
    let mut by_off: Vec<(u32, u32)> = cu.fparams.iter().enumerate().map(|(i, p)| (p.uoff, i as u32)).collect();
    by_off.sort_unstable();
    let mut funcs_by_off: Vec<(u32, u32)> = cu.funcs.iter().enumerate().map(|(i, f)| (f.uoff, i as u32)).collect();
    funcs_by_off.sort_unstable();
    let fparam = |off: u32| {
        by_off
            .binary_search_by_key(&off, |e| e.0)
            .ok()
            .map(|i| &cu.fparams[by_off[i].1 as usize])
    };
    let func = |off: u32| {
        funcs_by_off
            .binary_search_by_key(&off, |e| e.0)
            .ok()
            .map(|i| &cu.funcs[funcs_by_off[i].1 as usize])
    };
    let enc = Enc { ctx, cu };
    let mut flags = funcflags::FuncFlags::new(&enc, &by_off);
    let mut params: Vec<(&'a [u8], u32)> = Vec::new();
    for fun in &cu.funcs {
        if fun.declaration {
            continue;
        }
        params.clear();
        let mut unnamed = false;
        for p in &cu.fparams[fun.params as usize..(fun.params + fun.nparams) as usize] {
            let (name, ty) = if !p.has_type && p.origin != NONE {
                match fparam(p.origin) {
                    Some(op) => (op.name, op.ty),
                    None => (p.name, NONE),
                }
            } else {
                (p.name, p.ty)
            };
            if name_empty(name) {
                unnamed = true;
                break;
            }
            params.push((name, ty));
        }
        if unnamed {
            continue;
        }
        let mut name = nm(fun.name);
        if name.is_empty() && fun.origin != NONE {
            name = func(fun.origin).map(|f| nm(f.name)).unwrap_or(b"");
        }
        if name.is_empty() && fun.spec != NONE {
            name = func(fun.spec).map(|f| nm(f.name)).unwrap_or(b"");
        }
        if name.is_empty() {
            continue;
        }
        let Some(entry) = table.lookup(name) else {
            continue;
        };
        let ret_off = if fun.has_type {
            fun.ty
        } else {
            func(fun.origin).map(|f| f.ty).unwrap_or(NONE)
        };
        let fl = flags.flags(fun, &params);
        o.o.funcs.push(entry, btf::TypeId(cu.core(ret_off)), fl);
        for &(pn, ty) in &params {
            let n = o.s(pn);
            o.o.funcs.push_param(btf::StrOff(n), btf::TypeId(cu.core(ty)));
        }
        if fun.varargs {
            o.o.funcs.push_varargs();
        }
        if ctx.features.decl_tag {
            for a in &cu.annots[fun.annots as usize..(fun.annots + fun.nannots) as usize] {
                let n = o.s(a.value);
                o.o.funcs.push_annot(btf::StrOff(n), a.component);
            }
        }
    }
}

fn encode_vars<'a>(enc: &Enc<'_, '_, 'a>, o: &mut Out<'a>) -> Result<(), EncodeError> {
    let ctx = enc.ctx;
    let cu = enc.cu;
    let f = &ctx.features;
    if !f.var && !f.global_var {
        return Ok(());
    }
    let var_at = |off: u32| cu.vars.binary_search_by_key(&off, |v| v.uoff).ok().map(|i| &cu.vars[i]);
    for v in &cu.vars {
        if v.declaration || v.artificial {
            continue;
        }
        let Some(addr) = v.addr else { continue };
        let Some(sec) = ctx.elf.section_of(addr) else {
            continue;
        };
        let section = &ctx.elf.sections[sec as usize];
        if !f.global_var && section.name != b".data..percpu" {
            continue;
        }
        let offset = addr - section.addr;
        let (name, ty, external, annots) = match (v.spec != NONE).then(|| var_at(v.spec)).flatten() {
            Some(d) => (
                d.name,
                d.ty,
                d.external,
                &cu.annots[d.annots as usize..(d.annots + d.nannots) as usize],
            ),
            None if v.spec != NONE => (&b""[..], NONE, false, &cu.annots[0..0]),
            None => (
                v.name,
                v.ty,
                v.external,
                &cu.annots[v.annots as usize..(v.annots + v.nannots) as usize],
            ),
        };
        let name = nm(name);
        if name.is_empty() || SKIPPED_VAR_PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        if offset == 0 && !ctx.elf.has_object_symbol(name, sec) {
            continue;
        }
        if !valid_var_name(name) {
            if f.encode_force {
                continue;
            }
            return Err(EncodeError::Unsupported {
                path: enc.path(),
                msg: format!(
                    "DW_TAG_variable `{}` at DIE {:#x} (CU {:#x}): not a valid BTF variable name",
                    String::from_utf8_lossy(name),
                    v.die,
                    cu.offset
                ),
            });
        }
        let core = cu.core(ty);
        if core == 0 {
            if f.encode_force {
                continue;
            }
            return Err(EncodeError::Unsupported {
                path: enc.path(),
                msg: format!(
                    "DW_TAG_variable `{}` at DIE {:#x} (CU {:#x}) has no type",
                    String::from_utf8_lossy(name),
                    v.die,
                    cu.offset
                ),
            });
        }
        let size = enc.size_of(core, 0);
        if size == 0 || size > u32::MAX as u64 || offset > u32::MAX as u64 {
            continue;
        }
        let n = o.s(name);
        let record = o.o.offs.len() as u32;
        o.rec(&[
            n,
            make_info(Kind::Var, false, 0),
            core,
            if external {
                btf::LINKAGE_GLOBAL
            } else {
                btf::LINKAGE_STATIC
            },
        ]);
        for a in annots {
            let an = o.s(a.value);
            o.rec(&[an, make_info(Kind::DeclTag, false, 0), 0, u32::MAX]);
            // The tag refers to the VAR: the merge only knows its id, so the
            // reference is fixed there (type word 0 + marker below).
            let s = *o.o.offs.last().unwrap() as usize;
            o.o.words[s + 2] = VAR_REF_MARKER;
        }
        o.o.vars.push(VarOut {
            record,
            section: sec,
            offset: offset as u32,
            size: size as u32,
        });
    }
    Ok(())
}

/// Type word of a variable's DECL_TAG before the merge: "the VAR just before".
pub const VAR_REF_MARKER: u32 = u32::MAX;

/// [`bit_offset_of`] for a member without bitfield attributes (nearly every
/// member; the general path was 1.4 % of a vmlinux encode): every
/// adjustment is zero, and the byte offset's bits fit 32 bits below 2^29
/// bytes.
#[inline]
fn plain_bit_offset(loc: Option<u64>) -> (u32, u32, bool) {
    let loc = loc.unwrap_or(0);
    ((loc as u32).wrapping_mul(8), 0, loc >= 1 << 29)
}

/// A member's (bit offset, bit size, cut) from its byte offset and bitfield
/// attributes; `storage` gives the byte size of its type when the member
/// has none of its own.
fn bit_offset_of(
    loc: Option<u64>,
    b: crate::dwarf::MemberBits,
    storage: impl FnOnce() -> u64,
    little: bool,
) -> (u32, u32, bool) {
    let bit_size = b.bit_size.map(|b| b as u8 as u32).unwrap_or(0);
    if let Some(dbo) = b.data_bit_offset {
        return (dbo as u32, bit_size, dbo > u32::MAX as u64);
    }
    let wide = loc.unwrap_or(0) as u128 * 8;
    let byte_off = loc.unwrap_or(0) as u32;
    let mut bit_off = byte_off.wrapping_mul(8);
    if b.bit_size.is_some() {
        let storage = match b.byte_size {
            Some(b) => b,
            None => storage(),
        } as u32;
        let bo = b.bit_offset.unwrap_or(0) as i8 as i32 as u32;
        if little {
            bit_off = bit_off.wrapping_add(storage.wrapping_mul(8).wrapping_sub(bo).wrapping_sub(bit_size));
        } else {
            bit_off = bit_off.wrapping_add(bo);
        }
    }
    // The bitfield adjustment is small (within the storage unit), so the
    // true offset is the byte offset's plus the cut offset's distance
    // from the cut byte offset.
    let adjust = bit_off.wrapping_sub(byte_off.wrapping_mul(8)) as i32 as i128;
    let cut = wide as i128 + adjust != bit_off as i128;
    (bit_off, bit_size, cut)
}

#[cfg(test)]
mod tests {
    #[test]
    fn plain_member_offsets_are_the_general_path_without_bitfields() {
        let big = [
            Some((1 << 29) - 1),
            Some(1 << 29),
            Some(u32::MAX as u64),
            Some(1 << 32),
            Some(u64::MAX),
        ];
        for loc in [None, Some(0), Some(1), Some(7)].into_iter().chain(big) {
            for little in [true, false] {
                let general = super::bit_offset_of(loc, Default::default(), || unreachable!(), little);
                assert_eq!(super::plain_bit_offset(loc), general, "{loc:?}");
            }
        }
    }

    use super::*;
    use crate::dwarf::{Enumerator, Member};
    use crate::elf::debug::DebugSections;
    use crate::elf::functab::FuncTable;
    use crate::encode::strcache::StrCache;

    fn elf(endian: btf::Endian) -> ElfInfo<'static> {
        ElfInfo {
            endian,
            is_64: true,
            machine: 62,
            is_rel: true,
            has_symtab: true,
            sections: vec![],
            funcs: FuncTable::default(),
            objects: vec![],
            debug: DebugSections::default(),
            lto_note: None,
            grouped_info: Vec::new(),
            grouped_types: false,
            symtab_bytes: &[],
            file_mapped: false,
        }
    }

    fn cu() -> Cu<'static> {
        let mut c = Cu::new(0, 8, 0);
        c.language = 0x1d;
        c.name = b"t.c";
        c
    }

    fn slot(tag: gimli::DwTag, uoff: u32, name: &'static [u8], ty: u32, size: u64) -> Slot<'static> {
        Slot {
            tag,
            die: uoff as u64,
            uoff,
            name,
            spec: NONE,
            ty,
            size,
            encoding: 0,
            declaration: false,
            varargs: false,
            nelems: 1,
            kids: 0,
            nkids: 0,
            annots: 0,
            nannots: 0,
        }
    }

    fn add(cu: &mut Cu<'static>, s: Slot<'static>) -> u32 {
        let core = cu.slots.len() as u32 + 1;
        cu.index.push((s.uoff, core));
        cu.index.sort_unstable();
        cu.slots.push(s);
        core
    }

    fn run(cu: &Cu<'static>, endian: btf::Endian, features: Features) -> Result<CuOut<'static>, EncodeError> {
        let e = elf(endian);
        let ctx = Ctx {
            features,
            elf: &e,
            path: Path::new("t.o"),
            str_cache: &StrCache::empty(),
        };
        encode_cu(&ctx, cu)
    }

    fn record(out: &CuOut<'_>, i: usize) -> Vec<u32> {
        let s = out.offs[i] as usize;
        let e = out.offs.get(i + 1).map(|&e| e as usize).unwrap_or(out.words.len());
        out.words[s..e].to_vec()
    }

    fn int(cu: &mut Cu<'static>, uoff: u32, name: &'static [u8], size: u64, enc: u8) -> u32 {
        let mut s = slot(gimli::DW_TAG_base_type, uoff, name, NONE, size);
        s.encoding = enc;
        add(cu, s)
    }

    #[test]
    fn base_types_int_float_and_sanitized() {
        let mut c = cu();
        int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
        int(&mut c, 0x20, b"double", 8, ATE_FLOAT);
        int(&mut c, 0x30, b"()", 0, 7);
        int(&mut c, 0x40, b"_Bool", 1, ATE_BOOLEAN);
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        assert_eq!(out.int_core, Some(1));
        assert_eq!(
            record(&out, 0),
            vec![1, make_info(Kind::Int, false, 0), 4, (btf::INT_SIGNED << 24) | 32]
        );
        // floats off (plain -J): an unsigned INT
        assert_eq!(record(&out, 1), vec![2, make_info(Kind::Int, false, 0), 8, 64]);
        assert_eq!(out.strs[2], b"__SANITIZED_FAKE_INT__");
        assert_eq!(record(&out, 2), vec![3, make_info(Kind::Int, false, 0), 4, 32]);
        assert_eq!(
            record(&out, 3),
            vec![4, make_info(Kind::Int, false, 0), 1, (btf::INT_BOOL << 24) | 8]
        );
        let mut f = Features::default();
        f.apply_list("float");
        let out = run(&c, btf::Endian::Little, f).unwrap();
        assert_eq!(record(&out, 1), vec![2, make_info(Kind::Float, false, 0), 8]);
    }

    #[test]
    fn complex_float_is_fatal_only_with_floats() {
        let mut c = cu();
        int(&mut c, 0x10, b"complex double", 16, ATE_COMPLEX_FLOAT);
        assert!(run(&c, btf::Endian::Little, Features::default()).is_ok());
        let mut f = Features::default();
        f.apply_list("default");
        let e = run(&c, btf::Endian::Little, f).err().unwrap().to_string();
        assert!(e.contains("DW_TAG_base_type") && e.contains("complex"), "{e}");
    }

    fn bitfield_struct(endian: btf::Endian) -> Vec<u32> {
        let mut c = cu();
        let u = int(&mut c, 0x10, b"unsigned int", 4, 8);
        let _ = u;
        // struct s { unsigned a:3; unsigned b:5; unsigned c; } with DWARF 4 bit offsets
        let mut s = slot(gimli::DW_TAG_structure_type, 0x20, b"s", NONE, 8);
        s.kids = 0;
        s.nkids = 3;
        let mut m = |name: &'static [u8], loc, bit_size: Option<u64>, bit_offset: Option<i64>| {
            let bits = c.add_member_bits(crate::dwarf::MemberBits {
                data_bit_offset: None,
                bit_size,
                byte_size: bit_size.map(|_| 4),
                bit_offset,
            });
            Member {
                name,
                ty: 0x10,
                bits,
                die: 0,
                loc: Some(loc),
            }
        };
        let members = vec![
            m(b"a", 0, Some(3), Some(29)),
            m(b"b", 0, Some(5), Some(24)),
            m(b"c", 4, None, None),
        ];
        c.members = members;
        add(&mut c, s);
        let out = run(&c, endian, Features::default()).unwrap();
        record(&out, 1)
    }

    /// A struct (or union) of members at the given byte offsets, the last
    /// one a 3-bit bitfield if `bitfield`.
    fn offsets_struct(tag: gimli::DwTag, locs: &[u64], bitfield: bool) -> Result<CuOut<'static>, EncodeError> {
        let mut c = cu();
        int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
        let mut s = slot(tag, 0x20, b"s", NONE, 1 << 26);
        s.nkids = locs.len() as u32;
        let names: [&'static [u8]; 4] = [b"a", b"b", b"c", b"d"];
        for (i, &loc) in locs.iter().enumerate() {
            let bits = if bitfield && i + 1 == locs.len() {
                c.add_member_bits(crate::dwarf::MemberBits {
                    data_bit_offset: Some(loc * 8),
                    bit_size: Some(3),
                    byte_size: None,
                    bit_offset: None,
                })
            } else {
                0
            };
            c.members.push(Member {
                name: names[i],
                ty: 0x10,
                bits,
                die: 0,
                loc: Some(loc),
            });
        }
        add(&mut c, s);
        run(&c, btf::Endian::Little, Features::default())
    }

    /// Rust CUs: members in offset order, whatever order the DWARF lists them in.
    #[test]
    fn rust_members_are_placed_in_offset_order() {
        let mut c = cu();
        c.language = DW_LANG_RUST;
        int(&mut c, 0x10, b"i32", 4, ATE_SIGNED);
        let mut s = slot(gimli::DW_TAG_structure_type, 0x20, b"S", NONE, 12);
        s.nkids = 3;
        for (name, loc) in [(&b"b"[..], 4), (b"c", 8), (b"a", 0)] {
            c.members.push(Member {
                name,
                ty: 0x10,
                bits: 0,
                die: 0,
                loc: Some(loc),
            });
        }
        add(&mut c, s);
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        let rec = record(&out, 1);
        assert_eq!(rec[1], make_info(Kind::Struct, false, 3));
        // (offset, type) in record order; names interned as placed: a, b, c
        let placed: Vec<(u32, u32, u32)> = rec[3..].chunks(3).map(|m| (m[0], m[1], m[2])).collect();
        assert_eq!(placed, [(3, 1, 0), (4, 1, 32), (5, 1, 64)]);
    }

    #[test]
    fn member_offsets_btf_cannot_hold_are_refused() {
        let s = gimli::DW_TAG_structure_type;
        // 0x300000 bytes = 0x1800000 bits: fits 32 bits, not 24
        let ok = offsets_struct(s, &[0, 0x30_0000], false).unwrap();
        assert_eq!(
            &record(&ok, 1)[1..],
            &[make_info(Kind::Struct, false, 2), 1 << 26, 3, 1, 0, 4, 1, 0x180_0000]
        );
        let ok = offsets_struct(s, &[0, 4], true).unwrap();
        assert_eq!(
            &record(&ok, 1)[1..],
            &[make_info(Kind::Struct, true, 2), 1 << 26, 3, 1, 0, 4, 1, (3 << 24) | 32]
        );
        let e = offsets_struct(s, &[0, 0x30_0000, 8], true).err().unwrap().to_string();
        assert!(e.contains("`b` lies 3145728 bytes") && e.contains("24-bit"), "{e}");
        let e = offsets_struct(s, &[0, 1 << 29], false).err().unwrap().to_string();
        assert!(e.contains("`b` lies 536870912 bytes") && e.contains("32-bit"), "{e}");
        let e = offsets_struct(gimli::DW_TAG_union_type, &[0, 0, 4], false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`c` of a union at bit offset 32"), "{e}");
    }

    #[test]
    fn old_style_bitfields_follow_byte_order() {
        let le = bitfield_struct(btf::Endian::Little);
        assert_eq!(le[1], make_info(Kind::Struct, true, 3));
        // LE: 0*8 + (4*8 - 29 - 3) = 0; b: 32 - 24 - 5 = 3
        assert_eq!(&le[3..], &[3, 1, 3 << 24, 4, 1, (5 << 24) | 3, 5, 1, 32]);
        let be = bitfield_struct(btf::Endian::Big);
        // BE: byte_off*8 + bit_offset
        assert_eq!(&be[3..], &[3, 1, (3 << 24) | 29, 4, 1, (5 << 24) | 24, 5, 1, 32]);
    }

    /// A CU with a struct at 0x20 whose one member has type `member_ty`,
    /// plus the slots `more` adds.
    fn loop_cu(member_ty: u32, more: impl FnOnce(&mut Cu<'static>)) -> Result<CuOut<'static>, EncodeError> {
        let mut c = cu();
        int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
        more(&mut c);
        let mut st = slot(gimli::DW_TAG_structure_type, 0x20, b"s", NONE, 8);
        st.nkids = 1;
        c.members = vec![Member {
            name: b"m",
            ty: member_ty,
            bits: 0,
            die: 0x21,
            loc: Some(0),
        }];
        add(&mut c, st);
        run(&c, btf::Endian::Little, Features::default())
    }

    fn loop_msg(r: Result<CuOut<'static>, EncodeError>) -> String {
        match r {
            Err(EncodeError::Input { msg, .. }) => msg,
            Err(e) => panic!("not a damaged-input error: {e}"),
            Ok(_) => panic!("no loop found"),
        }
    }

    #[test]
    fn type_loops_are_refused_and_loops_through_structs_are_not() {
        // typedef A (0x30) -> typedef B (0x40) -> A.
        let m = loop_msg(loop_cu(0x10, |c| {
            add(c, slot(gimli::DW_TAG_typedef, 0x30, b"A", 0x40, 0));
            add(c, slot(gimli::DW_TAG_typedef, 0x40, b"B", 0x30, 0));
        }));
        assert!(
            m.contains("DW_TAG_typedef refers back to itself through 2 type(s)"),
            "{m}"
        );
        assert!(m.contains("at DIE 0x30"), "{m}");
        // struct s { const s m; }
        let m = loop_msg(loop_cu(0x30, |c| {
            add(c, slot(gimli::DW_TAG_const_type, 0x30, b"", 0x20, 0));
        }));
        assert!(m.contains("contains itself by value through 2 type(s)"), "{m}");
        // struct s { s *m; }: legal, and so is a pointer to a typedef of s.
        loop_cu(0x30, |c| {
            add(c, slot(gimli::DW_TAG_pointer_type, 0x30, b"", 0x40, 8));
            add(c, slot(gimli::DW_TAG_typedef, 0x40, b"T", 0x20, 0));
        })
        .unwrap();
    }

    #[test]
    fn a_chain_of_200000_typedefs_costs_no_stack() {
        // Each typedef refers to the next (upward ids), so the search runs
        // the whole chain.
        let mut c = cu();
        int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
        const N: u32 = 200_000;
        for i in 0..N {
            let to = if i + 1 == N { 0x10 } else { 0x20 + i + 1 };
            // `add` re-sorts the index each time: pushed directly, sorted once.
            c.slots.push(slot(gimli::DW_TAG_typedef, 0x20 + i, b"t", to, 0));
            c.index.push((0x20 + i, c.slots.len() as u32));
        }
        c.index.sort_unstable();
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        assert_eq!(out.n_types, N as usize + 1);
    }

    fn enum_cu(size: u64, values: Vec<(&'static [u8], u64)>, signed_base: bool) -> Cu<'static> {
        let mut c = cu();
        int(&mut c, 0x10, b"long int", 8, if signed_base { ATE_SIGNED } else { 7 });
        let mut e = slot(gimli::DW_TAG_enumeration_type, 0x20, b"e", 0x10, size);
        e.nkids = values.len() as u32;
        c.enumerators = values
            .into_iter()
            .map(|(name, value)| Enumerator { name, value })
            .collect();
        add(&mut c, e);
        c
    }

    #[test]
    fn enum_kflag_and_enum64() {
        let c = enum_cu(4, vec![(b"A", u64::MAX), (b"B", 5)], true);
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        assert_eq!(
            record(&out, 1),
            vec![2, make_info(Kind::Enum, true, 2), 4, 3, 0xffff_ffff, 4, 5]
        );
        let c = enum_cu(8, vec![(b"A", u64::MAX - 1)], true);
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        assert_eq!(
            record(&out, 1),
            vec![2, make_info(Kind::Enum64, true, 1), 8, 3, 0xffff_fffe, 0xffff_ffff]
        );
        // enum64 off: an 8-byte ENUM with low 32 bits, kflag 0
        let mut f = Features::default();
        f.enum64 = false;
        let out = run(&c, btf::Endian::Little, f).unwrap();
        assert_eq!(
            record(&out, 1),
            vec![2, make_info(Kind::Enum, false, 1), 8, 3, 0xffff_fffe]
        );
        // a 4-byte enum value beyond UINT_MAX is rejected
        let c = enum_cu(4, vec![(b"A", 1 << 40)], false);
        assert!(run(&c, btf::Endian::Little, Features::default()).is_err());
    }

    #[test]
    fn unsupported_tags_name_the_tag() {
        let mut c = cu();
        int(&mut c, 0x10, b"int", 4, ATE_SIGNED);
        add(&mut c, slot(gimli::DW_TAG_atomic_type, 0x47, b"", 0x10, 0));
        let e = run(&c, btf::Endian::Little, Features::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("DW_TAG_atomic_type") && e.contains("DIE 0x47"), "{e}");
    }

    #[test]
    fn nested_unspecified_type_emits_nothing_but_keeps_its_core_id() {
        let mut c = cu();
        add(
            &mut c,
            slot(gimli::DW_TAG_unspecified_type, 0x10, b"decltype(nullptr)", NONE, 0),
        );
        int(&mut c, 0x20, b"int", 4, ATE_SIGNED);
        add(&mut c, slot(gimli::DW_TAG_pointer_type, 0x30, b"", 0x20, 8));
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        assert_eq!(out.n_types, 2);
        assert_eq!(out.nslots, 4);
        // The PTR still names core id 2, which the merge turns into off+2.
        assert_eq!(record(&out, 1), vec![0, make_info(Kind::Ptr, false, 0), 2]);
    }

    #[test]
    fn empty_decl_tag_value_drops_the_rest_of_the_cu() {
        let mut c = cu();
        let mut s = slot(gimli::DW_TAG_structure_type, 0x10, b"s", NONE, 0);
        s.nannots = 2;
        c.annots = vec![
            crate::dwarf::Annot {
                value: b"ok",
                component: -1,
            },
            crate::dwarf::Annot {
                value: b"",
                component: -1,
            },
        ];
        add(&mut c, s);
        let mut t = slot(gimli::DW_TAG_typedef, 0x20, b"t", 0x10, 0);
        t.annots = 0;
        t.nannots = 1;
        add(&mut c, t);
        let out = run(&c, btf::Endian::Little, Features::default()).unwrap();
        // STRUCT, TYPEDEF, DECL_TAG "ok"; the empty one stops everything after it.
        assert_eq!(out.offs.len(), 3);
        assert_eq!(
            record(&out, 2),
            vec![3, make_info(Kind::DeclTag, false, 0), 1, u32::MAX]
        );
    }

    fn func(uoff: u32, name: &'static [u8], params: u32, nparams: u32) -> crate::dwarf::Func<'static> {
        crate::dwarf::Func {
            uoff,
            die: uoff as u64,
            name,
            ty: NONE,
            has_type: false,
            origin: NONE,
            spec: NONE,
            declaration: false,
            varargs: false,
            params,
            nparams,
            annots: 0,
            nannots: 0,
        }
    }

    fn fparam(uoff: u32, name: &'static [u8], origin: u32) -> crate::dwarf::FParam<'static> {
        crate::dwarf::FParam {
            uoff,
            name,
            ty: NONE,
            has_type: origin == NONE,
            origin,
            facts: 0,
        }
    }

    #[test]
    fn which_functions_are_recorded_and_their_param_names_interned() {
        let mut c = cu();
        c.fparams = vec![
            fparam(0x11, b"abs_a", NONE), // abstract f(abs_a)
            fparam(0x21, b"", 0x11),      // concrete f: name from its origin
            fparam(0x31, b"", NONE),      // g: unnamed parameter
            fparam(0x41, b"x", NONE),     // not_in_elf(x)
            fparam(0x51, b"d", NONE),     // a declaration
        ];
        let mut concrete = func(0x20, b"", 1, 1);
        concrete.origin = 0x10;
        let mut decl = func(0x50, b"f", 4, 1);
        decl.declaration = true;
        c.funcs = vec![
            func(0x10, b"f", 0, 1),
            concrete,
            func(0x30, b"g", 2, 1),
            func(0x40, b"not_in_elf", 3, 1),
            decl,
        ];
        let mut e = elf(btf::Endian::Little);
        e.funcs = FuncTable::build(vec![(b"f", b"f", 0x10), (b"g", b"g", 0x20)]);
        let ctx = Ctx {
            features: Features::default(),
            elf: &e,
            path: Path::new("t.o"),
            str_cache: &StrCache::empty(),
        };
        let out = encode_cu(&ctx, &c).unwrap();
        // Both instances of `f` (entry 0 of the table) are saved.
        assert_eq!(out.funcs.len(), 2);
        assert_eq!((out.funcs.entry(0), out.funcs.entry(1)), (0, 0));
        // Both intern the parameter name once; nothing else is interned.
        assert_eq!(out.strs, vec![&b"abs_a"[..]]);
        let p = crate::funcs::Param {
            name: btf::StrOff(1),
            ty: btf::TypeId(0),
        };
        assert_eq!((out.funcs.params(0), out.funcs.params(1)), (&[p][..], &[p][..]));
    }

    /// Facts of a concrete parameter reach its abstract origin before any
    /// flags are computed; a struct parameter (through a typedef) exempts a
    /// function from the register rule; no location means optimized.
    #[test]
    fn recording_time_flags() {
        use crate::dwarf::loc::fact::{HAS_LOC, UNEXPECTED_REG as F_UNEXPECTED};
        use crate::funcs::flags::{OPTIMIZED_PARMS, UNEXPECTED_REG};
        let mut c = cu();
        int(&mut c, 0x5, b"int", 4, 5);
        add(&mut c, slot(gimli::DW_TAG_structure_type, 0x6, b"S", NONE, 8));
        add(&mut c, slot(gimli::DW_TAG_typedef, 0x7, b"T", 0x6, 0));
        let typed = |uoff, name, ty, facts| crate::dwarf::FParam {
            uoff,
            name,
            ty,
            has_type: true,
            origin: NONE,
            facts,
        };
        let mut concrete_p = fparam(0x21, b"", 0x11);
        concrete_p.facts = HAS_LOC | F_UNEXPECTED;
        c.fparams = vec![
            typed(0x11, b"a", 0x5, HAS_LOC),
            concrete_p,
            typed(0x31, b"s", 0x7, HAS_LOC | F_UNEXPECTED),
            typed(0x41, b"x", 0x5, 0),
        ];
        let mut concrete = func(0x20, b"", 1, 1);
        concrete.origin = 0x10;
        c.funcs = vec![
            func(0x10, b"f", 0, 1),
            concrete,
            func(0x30, b"g", 2, 1),
            func(0x40, b"h", 3, 1),
        ];
        let mut e = elf(btf::Endian::Little);
        e.funcs = FuncTable::build(vec![(b"f", b"f", 0x10), (b"g", b"g", 0x20), (b"h", b"h", 0x30)]);
        let ctx = Ctx {
            features: Features::default(),
            elf: &e,
            path: Path::new("t.o"),
            str_cache: &StrCache::empty(),
        };
        let out = encode_cu(&ctx, &c).unwrap();
        let flags: Vec<u8> = (0..out.funcs.len() as u32).map(|s| out.funcs.flags(s)).collect();
        assert_eq!(flags, [UNEXPECTED_REG, UNEXPECTED_REG, 0, OPTIMIZED_PARMS]);
    }

    #[test]
    fn variable_names() {
        assert!(valid_var_name(b"per_cpu.x_1"));
        assert!(valid_var_name(b"_a"));
        assert!(!valid_var_name(b"1a"));
        assert!(!valid_var_name(b"_vptr$Shape"));
        assert!(!valid_var_name(&[b'a'; 129]));
    }
}
