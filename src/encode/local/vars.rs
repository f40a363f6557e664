//! VAR records (and their decl tags) of the CU's variables.

use super::out::Out;
use super::{Enc, VarOut};
use crate::btf::{self, Kind, make_info};
use crate::dwarf::{UnitOff, nm};
use crate::encode::{EncodeError, VarProblem};

pub(super) fn valid_var_name(n: &[u8]) -> bool {
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

pub(super) fn encode_vars<'a>(enc: &Enc<'_, '_, 'a>, o: &mut Out<'a>) -> Result<(), EncodeError> {
    let ctx = enc.ctx;
    let cu = enc.cu;
    let f = &ctx.features;
    if !f.var && !f.global_var {
        return Ok(());
    }
    let var_at = |off: UnitOff| cu.vars.binary_search_by_key(&off, |v| v.uoff).ok().map(|i| &cu.vars[i]);
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
        // A definition takes what its declaration (DW_AT_specification)
        // says; one whose declaration is not a CU-level variable gets nothing.
        let (name, ty, external, annots) = match v.spec.map(var_at) {
            Some(Some(d)) => (d.name, d.ty, d.external, &cu.annots[d.annots]),
            Some(None) => (&b""[..], None, false, &cu.annots[0..0]),
            None => (v.name, v.ty, v.external, &cu.annots[v.annots]),
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
            return Err(enc.bad_var(name, v.die, VarProblem::BadName));
        }
        let core = cu.core(ty);
        let Some(id) = core else {
            if f.encode_force {
                continue;
            }
            return Err(enc.bad_var(name, v.die, VarProblem::NoType));
        };
        let size = if enc.is_empty_base(core) {
            0
        } else {
            enc.size_of(core, 0)
        };
        if size == 0 || size > u32::MAX as u64 || offset > u32::MAX as u64 {
            continue;
        }
        let n = o.s(name);
        let record = o.o.offs.len() as u32;
        o.rec(&[
            n,
            make_info(Kind::Var, false, 0),
            id.get(),
            if external {
                btf::LINKAGE_GLOBAL
            } else {
                btf::LINKAGE_STATIC
            },
        ]);
        // The tags refer to the VAR, whose id only the merge knows: their
        // type word is set there ([`VarOut::tags`]).
        for a in annots {
            let an = o.s(a.value);
            o.rec(&[an, make_info(Kind::DeclTag, false, 0), 0, u32::MAX]);
        }
        o.o.vars.push(VarOut {
            record,
            tags: annots.len() as u32,
            section: sec,
            offset: offset as u32,
            size: size as u32,
        });
    }
    Ok(())
}
