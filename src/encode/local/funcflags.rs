//! Recording-time flags of a saved function state (encoding-funcs-vars.md §3):
//! the register rule over the parameters' location facts and the
//! packed-struct rule, computed per CU with the `funcs` module's rules.

use gimli::constants as dw;

use super::paramabi::{self, Abi, ParamIn};
use super::{Enc, name_empty};
use crate::btf;
use crate::dwarf::loc::{RegParams, fact};
use crate::dwarf::{CoreId, Func, UnitOff};
use crate::encode::features::Reference;
use crate::funcs::packed::{AggId, Align, Layouts, MemberLayout, PackedCache, RawMember};
use crate::funcs::{flags, packed};

fn is_agg(t: gimli::DwTag) -> bool {
    matches!(
        t,
        dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_interface_type | dw::DW_TAG_union_type
    )
}

fn is_struct_tag(t: gimli::DwTag) -> bool {
    matches!(
        t,
        dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_interface_type
    )
}

/// Per-CU state of the flag computation.
pub(super) struct FuncFlags<'c, 'e, 'a> {
    enc: &'c Enc<'c, 'e, 'a>,
    /// Location facts per formal parameter of the CU, already shared with
    /// abstract origins.
    facts: Vec<u8>,
    regs: RegParams,
    /// The layouts of the CU's aggregates that packed-struct inference asked about.
    layouts: LazyLayouts,
    /// Packed verdicts persist over the CU (the reference caches them per
    /// struct, side effects included).
    verdicts: PackedCache,
    /// Under the next reference: what its analysis reads of each formal
    /// parameter, shared with abstract origins, and which functions list
    /// their parameters in another order than their origin.
    next: Option<NextParams>,
    /// How the next reference saves each parameter of the function last
    /// asked about (empty under v1.31: as it is).
    saved: Vec<Saved>,
}

/// How a parameter goes into its function's saved state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Saved {
    /// Its name and type.
    As,
    /// Left out: a reordered instance's parameter without a location or
    /// optimized out, or one a true signature does not have.
    Dropped,
    /// (true signatures) Named `<name>__<member>` after the member of its
    /// struct its pieces hold (an index into the CU's members), and typed
    /// as that member if it is passed as it.
    Member { member: u32, retyped: bool },
}

struct NextParams {
    params: Vec<ParamIn>,
    reordered: Vec<bool>,
    abi: Abi,
    true_signature: bool,
}

impl<'c, 'e, 'a> FuncFlags<'c, 'e, 'a> {
    /// `by_off`: (unit offset, index) of the CU's formal parameters, sorted.
    /// All of the CU's propagation to abstract origins happens before any
    /// function's flags are computed, as in the reference.
    pub(super) fn new(enc: &'c Enc<'c, 'e, 'a>, by_off: &[(UnitOff, u32)]) -> Self {
        let cu = enc.cu;
        // v1.31's facts, or the next reference's reading (not both)
        let next = (enc.ctx.reference == Reference::Next).then(|| next_params(enc, by_off));
        let mut facts: Vec<u8> = Vec::new();
        if next.is_none() {
            facts = cu.fparams.iter().map(|p| p.facts).collect();
            for (_, i, j) in instances(cu, by_off) {
                crate::dwarf::loc::propagate(&mut facts, i, j);
            }
        }
        FuncFlags {
            enc,
            facts,
            regs: RegParams::for_machine(enc.ctx.elf.machine),
            layouts: LazyLayouts::default(),
            verdicts: PackedCache::default(),
            next,
            saved: Vec::new(),
        }
    }

    /// How the saved state of the function [`FuncFlags::flags`] was last
    /// asked about takes its `k`-th parameter.
    pub(super) fn saved(&self, k: usize) -> Saved {
        self.saved.get(k).copied().unwrap_or(Saved::As)
    }

    /// The flags of `fun` (the CU's `index`-th function, an instance of
    /// `origin` if that is in the CU), whose resolved parameters are
    /// `params` (name, DWARF type reference).
    pub(super) fn flags(
        &mut self,
        index: usize,
        fun: &Func<'a>,
        origin: Option<&Func<'a>>,
        params: &[(&'a [u8], Option<UnitOff>)],
    ) -> u8 {
        let cu = self.enc.cu;
        // A struct parameter (behind const and typedefs) exempts the function
        // from the register rule.
        let is_struct = |mut off: Option<UnitOff>| -> bool {
            for _ in 0..64 {
                let Some(s) = cu.type_at(off) else { return false };
                match s.tag {
                    dw::DW_TAG_structure_type => return true,
                    dw::DW_TAG_const_type | dw::DW_TAG_typedef => off = s.ty,
                    _ => return false,
                }
            }
            false
        };
        let has_struct_param = || params.iter().any(|&(_, ty)| is_struct(ty));
        let mut out = match &self.next {
            None => function_flags(fun.params.range().map(|i| self.facts[i]), has_struct_param),
            Some(next) => next.flags(cu, index, fun, origin, has_struct_param, &mut self.saved),
        };
        let named_struct = |ty: Option<UnitOff>| {
            cu.type_at(ty)
                .is_some_and(|x| is_struct_tag(x.tag) && !x.name.is_empty())
        };
        let nregs = self.regs.count();
        if params.len() >= nregs && params[nregs..].iter().any(|&(_, ty)| named_struct(ty)) {
            let enc = self.enc;
            let aggs: Vec<Option<AggId>> = params
                .iter()
                .enumerate()
                .map(|(i, &(_, ty))| {
                    let core = cu.core(ty).filter(|_| i >= nregs && named_struct(ty))?;
                    Some(self.layouts.of(enc, core))
                })
                .collect();
            let mut pk = packed::Packed::with_cache(&self.layouts.layouts, std::mem::take(&mut self.verdicts));
            if packed::uncertain_parm_loc(params.len(), nregs, &mut pk, |i| aggs[i]) {
                out |= flags::UNCERTAIN_PARM_LOC;
            }
            self.verdicts = pk.into_cache();
        }
        out
    }
}

impl NextParams {
    /// The next reference's flags of the CU's `index`-th function;
    /// `saved` gets how its saved state takes each parameter.
    fn flags(
        &self,
        cu: &crate::dwarf::Cu<'_>,
        index: usize,
        fun: &Func<'_>,
        origin: Option<&Func<'_>>,
        has_struct_param: impl FnOnce() -> bool,
        saved: &mut Vec<Saved>,
    ) -> u8 {
        let params = &self.params[fun.params.range()];
        let changed = cu.producer_clang && signature_changed(fun, origin);
        let true_sig = self.true_signature && changed;
        let verdicts = paramabi::analyse(params, &self.abi, cu.producer_clang, changed, true_sig);
        let reordered = self.reordered[index];
        saved.clear();
        saved.extend(params.iter().zip(&verdicts).map(|(p, v)| {
            if (reordered && (!p.has_loc || v.optimized)) || (true_sig && v.optimized) {
                return Saved::Dropped;
            }
            match p.member {
                Some(member) if true_sig && !v.member_dropped => Saved::Member {
                    member,
                    retyped: v.as_member,
                },
                _ => Saved::As,
            }
        }));
        let mut out = 0;
        if params.iter().zip(&verdicts).any(|(p, v)| v.optimized || !p.has_loc) {
            out |= flags::OPTIMIZED_PARMS;
        }
        if verdicts.iter().any(|v| v.unexpected_reg) && !has_struct_param() {
            out |= flags::UNEXPECTED_REG;
        }
        if reordered {
            out |= flags::REORDERED_PARM;
        }
        if changed {
            out |= flags::SIGNATURE_CHANGED;
        }
        out
    }
}

/// Clang's mark of a changed signature, `DW_CC_nocall`, on the function
/// or (for a concrete instance) on its abstract origin; never on an
/// abstract instance itself.
fn signature_changed(fun: &Func<'_>, origin: Option<&Func<'_>>) -> bool {
    if fun.inlined {
        return false;
    }
    match fun.origin {
        None => fun.nocall,
        Some(_) => origin.is_some_and(|f| f.nocall),
    }
}

/// The CU's formal parameter `i`'s abstract origin among its formal
/// parameters (`by_off`: theirs by unit offset), if it names one there.
fn origin_index(cu: &crate::dwarf::Cu<'_>, by_off: &[(UnitOff, u32)], i: usize) -> Option<usize> {
    let o = cu.fparams[i].origin?;
    by_off
        .binary_search_by_key(&o, |e| e.0)
        .ok()
        .map(|j| by_off[j].1 as usize)
}

/// Each formal parameter that is a concrete instance of another (no type
/// of its own, an origin in the CU): (its function's index, its index,
/// its origin's), in the CU's function order, the order in which the
/// reference's type recoding shares what instances know.
fn instances<'x>(
    cu: &'x crate::dwarf::Cu<'_>,
    by_off: &'x [(UnitOff, u32)],
) -> impl Iterator<Item = (usize, usize, usize)> + 'x {
    cu.funcs.iter().enumerate().flat_map(move |(f, fun)| {
        fun.params
            .range()
            .filter(|&i| !cu.fparams[i].has_type)
            .filter_map(move |i| origin_index(cu, by_off, i).map(|j| (f, i, j)))
    })
}

/// What the next reference's analysis reads of each of the CU's formal
/// parameters, after every concrete instance shared its location with its
/// abstract origin (in the CU's function order, as the reference's type
/// recoding does), and which functions are reordered instances.
fn next_params(enc: &Enc<'_, '_, '_>, by_off: &[(UnitOff, u32)]) -> NextParams {
    let cu = enc.cu;
    let addr_size = cu.address_size;
    let abi = Abi::new(enc.ctx.elf.machine, addr_size);
    // the position of each parameter in its function
    let mut position = vec![0u32; cu.fparams.len()];
    for fun in &cu.funcs {
        for (k, i) in fun.params.range().enumerate() {
            position[i] = k as u32;
        }
    }
    let mut params: Vec<ParamIn> = (0..cu.fparams.len())
        .map(|i| {
            let p = &cu.fparams[i];
            // the size of the origin's type, for an instance of one
            let ty = match origin_index(cu, by_off, i) {
                Some(j) => cu.fparams[j].ty,
                None if p.origin.is_some() => None,
                None => p.ty,
            };
            let mut pin = ParamIn {
                has_loc: p.loc.is_some(),
                const_value: p.const_value,
                loc: p.loc.unwrap_or_default(),
                size: type_byte_size(cu, ty, addr_size) as u16,
                member: None,
            };
            // a named parameter with its own type whose pieces hold one
            // member of its struct
            if p.has_type && !name_empty(p.name) {
                pin.member = abi.single_piece(&pin).and_then(|off| member_at(cu, p.ty, off));
            }
            pin
        })
        .collect();
    let mut reordered = vec![false; cu.funcs.len()];
    for (f, i, j) in instances(cu, by_off) {
        reordered[f] |= position[i] != position[j];
        let p = params[i];
        p.share_into(&mut params[j]);
    }
    NextParams {
        params,
        reordered,
        abi,
        true_signature: enc.ctx.features.true_signature,
    }
}

/// The member of the struct behind `ty` (through types without a size)
/// at byte `off`, if it has a name and a type.
fn member_at(cu: &crate::dwarf::Cu<'_>, mut ty: Option<UnitOff>, off: u64) -> Option<u32> {
    for _ in 0..64 {
        let s = cu.type_at(ty)?;
        if s.size == 0 {
            ty = s.ty;
            continue;
        }
        if s.tag != dw::DW_TAG_structure_type {
            return None;
        }
        let first = s.kids.range().start;
        // the first member at that offset decides
        let (i, m) = cu.members_of(s).iter().enumerate().find(|(_, m)| {
            let at = cu
                .bits(m)
                .data_bit_offset
                .or(cu.member_loc(m).map(|l| l.wrapping_mul(8)));
            at == Some(off.wrapping_mul(8))
        })?;
        return (!name_empty(m.name.get()) && m.ty.is_some()).then_some((first + i) as u32);
    }
    None
}

/// A type's size as the next reference reads it: a pointer is an address,
/// else its DW_AT_byte_size, else that of the type it names (0 at the end
/// of the chain).
fn type_byte_size(cu: &crate::dwarf::Cu<'_>, mut ty: Option<UnitOff>, addr_size: u8) -> u64 {
    for _ in 0..64 {
        let Some(s) = cu.type_at(ty) else { return 0 };
        if s.tag == dw::DW_TAG_pointer_type {
            return addr_size as u64;
        }
        if s.size != 0 {
            return s.size;
        }
        ty = s.ty;
    }
    0
}

/// The layouts packed-struct inference reads, built per struct on first
/// need: a struct passed by value and, transitively, the structs and unions
/// it holds by value (whose alignments and offsets the verdict reads).
/// Building every aggregate of the unit up front cost an LTO kernel's merged
/// unit 266 MiB of layouts at its peak, for the few dozen structs that are
/// passed on the stack.
#[derive(Default)]
pub(super) struct LazyLayouts {
    pub(super) layouts: Layouts,
    /// Slot → its aggregate id, once discovered.
    ids: hashbrown::HashMap<CoreId, AggId>,
    /// Discovered, not yet built; built in discovery order, which is the
    /// order [`Layouts::push`] numbers them in.
    queue: std::collections::VecDeque<CoreId>,
}

impl LazyLayouts {
    /// The aggregate id of the struct, class or union at `core`, its layout
    /// and those of the aggregates it holds by value built.
    pub(super) fn of(&mut self, enc: &Enc<'_, '_, '_>, core: CoreId) -> AggId {
        let id = self.discover(core);
        let cu = enc.cu;
        let little = enc.ctx.elf.endian == btf::Endian::Little;
        let mut ms = Vec::new();
        while let Some(c) = self.queue.pop_front() {
            let sl = cu.slot(c);
            ms.clear();
            let in_union = sl.tag == dw::DW_TAG_union_type;
            for m in cu.members_of(sl) {
                let core = cu.core(m.ty);
                let stripped = enc.strip(core);
                let mb = cu.bits(m);
                let bits = mb.bit_size.unwrap_or(0);
                let byte_size = if bits == 0 {
                    enc.size_of(core, 0)
                } else {
                    mb.byte_size.unwrap_or_else(|| enc.size_of(stripped, 0))
                };
                let raw = RawMember {
                    data_bit_offset: mb.data_bit_offset,
                    data_member_location: cu.member_loc(m),
                    dw_bit_offset: mb.bit_offset.unwrap_or(0),
                    dw_bit_size: bits,
                    byte_size,
                    in_union,
                };
                let strct = stripped
                    .filter(|&c| is_struct_tag(cu.slot(c).tag))
                    .map(|c| self.discover(c));
                let align = self.align_of(enc, stripped);
                ms.push(MemberLayout::normalize(&raw, little, align, strct));
            }
            let pushed = self.layouts.push(is_struct_tag(sl.tag), sl.size as u32, &ms);
            debug_assert_eq!(Some(&pushed), self.ids.get(&c));
        }
        id
    }

    /// `core`'s aggregate id, queued for building if new.
    fn discover(&mut self, core: CoreId) -> AggId {
        let next = self.ids.len() as AggId;
        *self.ids.entry(core).or_insert_with(|| {
            self.queue.push_back(core);
            next
        })
    }

    /// Where the natural alignment of a member whose stripped type is
    /// `core` comes from (arrays: their element).
    fn align_of(&mut self, enc: &Enc<'_, '_, '_>, core: Option<CoreId>) -> Align {
        let cu = enc.cu;
        let mut c = core;
        for _ in 0..64 {
            let Some(core) = c else { return Align::Bytes(1) };
            let sl = cu.slot(core);
            return match sl.tag {
                dw::DW_TAG_pointer_type => Align::Bytes(cu.address_size as u32),
                dw::DW_TAG_base_type | dw::DW_TAG_enumeration_type => Align::Bytes(sl.size as u32),
                t if is_agg(t) => Align::Of(self.discover(core)),
                dw::DW_TAG_array_type => {
                    c = enc.strip(cu.core(sl.ty));
                    continue;
                }
                _ => Align::Bytes(1),
            };
        }
        Align::Bytes(1)
    }
}

/// `OPTIMIZED_PARMS` if some parameter is optimized or has no location;
/// `UNEXPECTED_REG` if some parameter has an unexpected register and no
/// parameter's type is a struct (`DW_TAG_structure_type` behind `const` and
/// typedefs; asked lazily through `has_struct_param`).
pub fn function_flags(params: impl IntoIterator<Item = u8>, has_struct_param: impl FnOnce() -> bool) -> u8 {
    let mut out = 0;
    let mut unexpected = false;
    for f in params {
        if f & fact::OPTIMIZED != 0 || f & fact::HAS_LOC == 0 {
            out |= flags::OPTIMIZED_PARMS;
        }
        unexpected |= f & fact::UNEXPECTED_REG != 0;
    }
    if unexpected && !has_struct_param() {
        out |= flags::UNEXPECTED_REG;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_level_flags() {
        let ok = fact::HAS_LOC;
        let unexp = fact::HAS_LOC | fact::UNEXPECTED_REG;
        assert_eq!(
            function_flags([ok, ok], || unreachable!("only asked with an unexpected register")),
            0
        );
        assert_eq!(function_flags([ok, unexp], || false), flags::UNEXPECTED_REG);
        // A struct parameter anywhere exempts the function.
        assert_eq!(function_flags([ok, unexp], || true), 0);
        // A parameter with no location (e.g. the 7th on x86-64) → optimized.
        assert_eq!(function_flags([ok, 0], || false), flags::OPTIMIZED_PARMS);
        assert_eq!(
            function_flags([fact::OPTIMIZED | fact::HAS_LOC, unexp], || false),
            flags::OPTIMIZED_PARMS | flags::UNEXPECTED_REG
        );
        // No parameters: nothing.
        assert_eq!(function_flags([], || false), 0);
    }

    #[test]
    fn a_parameter_without_location_counts_as_optimized() {
        // Without propagation the abstract instance would count as optimized.
        assert_eq!(function_flags([0u8, 0], || false), flags::OPTIMIZED_PARMS);
        assert_eq!(function_flags([fact::HAS_LOC], || false), 0);
    }
}
