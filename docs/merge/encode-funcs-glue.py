# Applies the function-phase glue to a copy of the encode branch (cwd).
import sys
def edit(p, old, new, count=1):
    s = open(p).read()
    if old not in s:
        sys.exit(f"{p}: anchor not found:\n{old[:200]}")
    s = s.replace(old, new, count)
    open(p, 'w').write(s)

# elf: one FuncTable definition (src/elf/functab.rs from the funcs branch).
p = 'src/elf/debug.rs'
s = open(p).read()
a = s.index('/// One function name of the ELF function table')
b = s.index('/// The ELF facts the encoder uses.')
open(p, 'w').write(s[:a] + 'pub use super::functab::{FuncEntry, FuncTable, func_key};\n\n' + s[b:])
edit('src/elf/mod.rs', 'pub mod debug;', 'pub mod debug;\npub mod functab;')
edit('src/lib.rs', 'pub mod error;', 'pub mod error;\npub mod funcs;')

# dwarf: location facts per formal parameter.
p = 'src/dwarf/mod.rs'
edit(p, '''    pub has_type: bool,
    pub origin: u32,
}

/// A DW_TAG_subprogram''', '''    pub has_type: bool,
    pub origin: u32,
    /// Location facts (`funcs::record::fact`), for the register parameters.
    pub facts: u8,
}

/// A DW_TAG_subprogram''')
edit(p, '''pub struct DecodeOpts {
    pub type_tag: bool,
    pub decl_tag: bool,
}''', '''pub struct DecodeOpts {
    pub type_tag: bool,
    pub decl_tag: bool,
    /// The ABI's register parameters (location analysis).
    pub regs: crate::funcs::loc::RegParams,
}''')
edit(p, '''                            f.counter += 1;
                            s_fparams.push(FParam {''', '''                            f.counter += 1;
                            let expected = self.opts.regs.expected(comp as usize);
                            let actual = match (expected, &attrs.location) {
                                (Some(e), Some(v)) => Some(crate::funcs::loc::loc_reg_in_unit(self.dwarf, &unit, v, e)),
                                _ => None,
                            };
                            let facts = crate::funcs::record::param_facts(expected, actual, attrs.const_value.is_some());
                            s_fparams.push(FParam {''')
edit(p, '''                                origin: uref(&attrs.origin).map_err(bad_ref)?,
                            });''', '''                                origin: uref(&attrs.origin).map_err(bad_ref)?,
                                facts,
                            });''')

# encode: decoder options, recording flags, emission after the last CU.
p = 'src/encode/mod.rs'
edit(p, '''opts: dwarf::DecodeOpts { type_tag: opts.features.type_tag, decl_tag: opts.features.decl_tag },''', '''opts: dwarf::DecodeOpts {
            type_tag: opts.features.type_tag,
            decl_tag: opts.features.decl_tag,
            regs: crate::funcs::loc::RegParams::for_machine(elf.machine),
        },''')
edit(p, '''    m.finish_datasecs(elf);
    let summary = m.summary.clone();''', '''    if !opts.no_funcs {
        let mut st = crate::funcs::FuncStates::with_capacity(m.funcs.len(), m.funcs.len() * 3);
        for f in &m.funcs {
            st.push(f.entry, btf::TypeId(f.ret), f.flags);
            for &(n, t) in &f.params {
                st.push_param(btf::StrOff(n), btf::TypeId(t));
            }
            for &(v, c) in &f.annots {
                st.push_annot(btf::StrOff(v), c);
            }
        }
        let marks = if opts.features.decl_tag_kfuncs {
            // Mapped again: only the section headers, .symtab and .BTF_ids get paged in.
            let input = crate::elf::Input::open(path)?;
            crate::funcs::KfuncMarks::from_elf(input.bytes(), &elf.funcs).map_err(|e| input_err(e.to_string()))?
        } else {
            crate::funcs::KfuncMarks::none(elf.funcs.len())
        };
        let f = &opts.features;
        let eo = crate::funcs::EmitOptions {
            consistent_func: f.consistent_func,
            decl_tag: f.decl_tag,
            decl_tag_kfuncs: f.decl_tag_kfuncs,
            attributes: f.attributes,
        };
        crate::funcs::emit_funcs(&mut m.btf, &mut st, &elf.funcs, &marks, &eo).map_err(|e| input_err(e.to_string()))?;
    }
    m.finish_datasecs(elf);
    let summary = m.summary.clone();''')

p = 'src/encode/local.rs'
edit(p, '''    /// (value string offset, component).
    pub annots: Vec<(u32, i32)>,
}''', '''    /// (value string offset, component).
    pub annots: Vec<(u32, i32)>,
    /// Recording-time flags (`funcs::flags`).
    pub flags: u8,
}''')
edit(p, '''    let mut params: Vec<(&'a [u8], u32)> = Vec::new();
    for fun in &cu.funcs {''', '''    // Location facts, shared with abstract-origin parameters (all of the
    // CU's propagation happens before any function's flags are computed).
    let mut facts: Vec<u8> = cu.fparams.iter().map(|p| p.facts).collect();
    for fun in &cu.funcs {
        for i in fun.params as usize..(fun.params + fun.nparams) as usize {
            let p = &cu.fparams[i];
            if !p.has_type && p.origin != NONE {
                if let Ok(j) = by_off.binary_search_by_key(&p.origin, |e| e.0) {
                    crate::funcs::record::propagate(&mut facts, i, by_off[j].1 as usize);
                }
            }
        }
    }
    // A struct parameter (behind const and typedefs) exempts a function
    // from the register rule.
    let is_struct = |mut off: u32| -> bool {
        for _ in 0..64 {
            let Some(s) = cu.slot(cu.core(off)) else { return false };
            match s.tag {
                dw::DW_TAG_structure_type => return true,
                dw::DW_TAG_const_type | dw::DW_TAG_typedef => off = s.ty,
                _ => return false,
            }
        }
        false
    };
    // Packed-struct inference: the CU's aggregate layouts, built on first need.
    let enc = Enc { ctx, cu };
    let regs = crate::funcs::loc::RegParams::for_machine(ctx.elf.machine);
    let is_agg = |t: gimli::DwTag| {
        matches!(t, dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_interface_type | dw::DW_TAG_union_type)
    };
    let is_strct = |t: gimli::DwTag| matches!(t, dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_interface_type);
    let build_layouts = || {
        use crate::funcs::packed::{Align, Layouts, MemberLayout, RawMember};
        let mut agg_of = vec![u32::MAX; cu.slots.len() + 1];
        let mut n = 0;
        for (i, sl) in cu.slots.iter().enumerate() {
            if is_agg(sl.tag) {
                agg_of[i + 1] = n;
                n += 1;
            }
        }
        // Natural alignment source of a stripped type (arrays: their element).
        let align_of = |core: u32| -> Align {
            let mut c = core;
            for _ in 0..64 {
                let Some(sl) = cu.slot(c) else { return Align::Bytes(1) };
                return match sl.tag {
                    dw::DW_TAG_pointer_type => Align::Bytes(cu.address_size as u32),
                    dw::DW_TAG_base_type | dw::DW_TAG_enumeration_type => Align::Bytes(sl.size as u32),
                    t if is_agg(t) => Align::Of(agg_of[c as usize]),
                    dw::DW_TAG_array_type => {
                        c = enc.strip(cu.core(sl.ty));
                        continue;
                    }
                    _ => Align::Bytes(1),
                };
            }
            Align::Bytes(1)
        };
        let little = ctx.elf.endian == btf::Endian::Little;
        let mut l = Layouts::default();
        let mut ms = Vec::new();
        for sl in cu.slots.iter().filter(|sl| is_agg(sl.tag)) {
            ms.clear();
            let in_union = sl.tag == dw::DW_TAG_union_type;
            for m in &cu.members[sl.kids as usize..(sl.kids + sl.nkids) as usize] {
                let core = cu.core(m.ty);
                let stripped = enc.strip(core);
                let bits = m.bit_size.unwrap_or(0);
                let byte_size =
                    if bits == 0 { enc.size_of(core, 0) } else { m.byte_size.unwrap_or_else(|| enc.size_of(stripped, 0)) };
                let raw = RawMember {
                    data_bit_offset: m.data_bit_offset,
                    data_member_location: m.loc,
                    dw_bit_offset: m.bit_offset.unwrap_or(0),
                    dw_bit_size: bits,
                    byte_size,
                    in_union,
                };
                let strct = cu.slot(stripped).filter(|x| is_strct(x.tag)).map(|_| agg_of[stripped as usize]);
                ms.push(MemberLayout::normalize(&raw, little, align_of(stripped), strct));
            }
            l.push(is_strct(sl.tag), sl.size as u32, &ms);
        }
        (l, agg_of)
    };
    let mut layouts: Option<(crate::funcs::packed::Layouts, Vec<u32>)> = None;
    // Verdicts persist per CU (the reference caches them, side effects included).
    let mut verdicts = crate::funcs::packed::PackedCache::default();
    let mut params: Vec<(&'a [u8], u32)> = Vec::new();
    for fun in &cu.funcs {''')
edit(p, '''        let mut st = FuncState { name, entry, ret: cu.core(ret_off), params: Vec::with_capacity(params.len() + 1), annots: Vec::new() };''', '''        let range = fun.params as usize..(fun.params + fun.nparams) as usize;
        let mut flags =
            crate::funcs::record::function_flags(range.map(|i| facts[i]), || params.iter().any(|&(_, ty)| is_struct(ty)));
        let named_struct = |ty: u32| cu.slot(cu.core(ty)).is_some_and(|x| is_strct(x.tag) && !x.name.is_empty());
        let nregs = regs.count();
        if params.len() >= nregs && params[nregs..].iter().any(|&(_, ty)| named_struct(ty)) {
            let (l, agg_of) = layouts.get_or_insert_with(build_layouts);
            let mut pk = crate::funcs::packed::Packed::with_cache(l, std::mem::take(&mut verdicts));
            if crate::funcs::packed::uncertain_parm_loc(params.len(), nregs, &mut pk, |i| {
                named_struct(params[i].1).then(|| agg_of[cu.core(params[i].1) as usize])
            }) {
                flags |= crate::funcs::flags::UNCERTAIN_PARM_LOC;
            }
            verdicts = pk.into_cache();
        }
        let mut st = FuncState {
            name,
            entry,
            ret: cu.core(ret_off),
            params: Vec::with_capacity(params.len() + 1),
            annots: Vec::new(),
            flags,
        };''')

# cli: emission is available now (dedup still is not).
edit('src/cli/encode.rs', '''    if plan.funcs && plan.output.is_some() {
        bail!("function emission not implemented yet: pass --no-funcs (functions are issue 4)");
    }''', '')
print("glue applied")
