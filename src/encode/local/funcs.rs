//! The CU's saved function states.

use super::funcflags::Saved;
use super::out::Out;
use super::{Ctx, Enc, LocalStr, LocalTypeId, funcflags, name_empty};
use crate::dwarf::{Cu, UnitOff, nm};

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
        let fl = flags.flags(index, fun, func(fun.origin), &params);
        o.o.funcs.push(entry, LocalTypeId::of(cu.core(ret_off)), fl, fun.low_pc);
        for (k, &(pn, ty)) in params.iter().enumerate() {
            let (pn, ty) = match flags.saved(k) {
                Saved::As => (pn, ty),
                Saved::Dropped => continue,
                Saved::Member { member, retyped } => {
                    let m = &cu.members[member as usize];
                    (member_param_name(pn, nm(m.name.get())), if retyped { m.ty } else { ty })
                }
            };
            let n = o.s(pn);
            o.o.funcs.push_param(LocalStr::new(n), LocalTypeId::of(cu.core(ty)));
        }
        if fun.varargs {
            o.o.funcs.push_varargs();
        }
        if ctx.features.decl_tag {
            for a in &cu.annots[fun.annots] {
                let n = o.s(a.value);
                o.o.funcs.push_annot(LocalStr::new(n), a.component);
            }
        }
    }
}

/// `<param>__<member>`, the name a true signature gives a parameter passed
/// as one member of its struct. Such names are made, not read from DWARF,
/// and the CU's string list borrows its strings for the whole run: each
/// distinct one is kept once for the life of the process (a handful, from
/// clang's `DW_CC_nocall` functions only).
fn member_param_name(param: &[u8], member: &[u8]) -> &'static [u8] {
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<hashbrown::HashSet<&'static [u8]>>> = OnceLock::new();
    let mut name = Vec::with_capacity(param.len() + 2 + member.len());
    name.extend_from_slice(nm(param));
    name.extend_from_slice(b"__");
    name.extend_from_slice(member);
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&kept) = names.get(name.as_slice()) {
        return kept;
    }
    let kept: &'static [u8] = Box::leak(name.into_boxed_slice());
    names.insert(kept);
    kept
}
