//! The CU's saved function states.

use super::out::Out;
use super::{Ctx, Enc, funcflags, name_empty};
use crate::btf;
use crate::dwarf::{Cu, UnitOff, local_id, nm};

/// The reference's per-CU function recording: which subprograms are saved
/// and, as they are, their parameter names and annotation values interned.
pub(super) fn record_functions<'a>(ctx: &Ctx<'_, 'a>, cu: &Cu<'a>, o: &mut Out<'a>) {
    let table = &ctx.elf.funcs;
    if table.is_empty() || cu.funcs.is_empty() {
        return;
    }
    let mut by_off: Vec<(UnitOff, u32)> = cu.fparams.iter().enumerate().map(|(i, p)| (p.uoff, i as u32)).collect();
    by_off.sort_unstable();
    let mut funcs_by_off: Vec<(UnitOff, u32)> = cu.funcs.iter().enumerate().map(|(i, f)| (f.uoff, i as u32)).collect();
    funcs_by_off.sort_unstable();
    let fparam = |off: UnitOff| {
        by_off
            .binary_search_by_key(&off, |e| e.0)
            .ok()
            .map(|i| &cu.fparams[by_off[i].1 as usize])
    };
    let func = |off: Option<UnitOff>| {
        let off = off?;
        funcs_by_off
            .binary_search_by_key(&off, |e| e.0)
            .ok()
            .map(|i| &cu.funcs[funcs_by_off[i].1 as usize])
    };
    let enc = Enc { ctx, cu };
    let mut flags = funcflags::FuncFlags::new(&enc, &by_off);
    let mut params: Vec<(&'a [u8], Option<UnitOff>)> = Vec::new();
    for (index, fun) in cu.funcs.iter().enumerate() {
        if fun.declaration {
            continue;
        }
        params.clear();
        let mut unnamed = false;
        for p in &cu.fparams[fun.params] {
            let (name, ty) = match p.origin {
                Some(origin) if !p.has_type => match fparam(origin) {
                    Some(op) => (op.name, op.ty),
                    None => (p.name, None),
                },
                _ => (p.name, p.ty),
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
        if name.is_empty() {
            name = func(fun.origin).map(|f| nm(f.name)).unwrap_or(b"");
        }
        if name.is_empty() {
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
            func(fun.origin).and_then(|f| f.ty)
        };
        let fl = flags.flags(index, fun, &params);
        o.o.funcs
            .push(entry, btf::TypeId(local_id(cu.core(ret_off))), fl, fun.low_pc);
        for (k, &(pn, ty)) in params.iter().enumerate() {
            if flags.param_dropped(k) {
                continue;
            }
            let n = o.s(pn);
            o.o.funcs.push_param(btf::StrOff(n), btf::TypeId(local_id(cu.core(ty))));
        }
        if fun.varargs {
            o.o.funcs.push_varargs();
        }
        if ctx.features.decl_tag {
            for a in &cu.annots[fun.annots] {
                let n = o.s(a.value);
                o.o.funcs.push_annot(btf::StrOff(n), a.component);
            }
        }
    }
}
