//! Emitting one decided function: `[TYPE_TAG, PTR]* FUNC_PROTO FUNC
//! [bpf_kfunc] [bpf_fastcall] [annotation]*`.

use crate::btf::{Btf, Kind, LINKAGE_STATIC, TypeId, make_info};

use super::super::kfuncs::{KF_ARENA_ARG1, KF_ARENA_ARG2, KF_ARENA_RET, KF_FASTCALL};
use super::super::{FuncStates, FuncsError, StateId};
use super::{Decide, EmitOptions, EmitSummary};

const ARENA_ATTR: &[u8] = b"address_space(1)";
const KFUNC_TAG: &[u8] = b"bpf_kfunc";
const FASTCALL_TAG: &[u8] = b"bpf_fastcall";

/// TYPE_TAG `address_space(1)` (kind flag 1) on the PTR's target, then a new
/// PTR to it; `None` if `ptr` is not a PTR.
fn arena_ptr(btf: &mut Btf, ptr: TypeId) -> Option<TypeId> {
    let t = btf.get(ptr)?;
    if ptr.get() == 0 || t.kind() != Kind::Ptr {
        return None;
    }
    let target = t.type_id();
    let tag = btf.add_type_tag(ARENA_ATTR, target, true);
    Some(btf.add_ref(Kind::Ptr, tag))
}

fn arena_tags(btf: &mut Btf, st: &mut FuncStates, s: StateId, kflags: u32, name: &[u8]) -> Result<usize, FuncsError> {
    let func = || String::from_utf8_lossy(name).into_owned();
    let mut n = 0;
    if kflags & KF_ARENA_RET != 0 {
        let ret = st.ret(s);
        let p = arena_ptr(btf, ret).ok_or_else(|| FuncsError::ArenaNotPtr {
            func: func(),
            flag: "KF_ARENA_RET",
            what: format!("the return type (id {}) is not a pointer", ret.get()),
        })?;
        st.set_ret(s, p);
        n += 1;
    }
    for (bit, idx, flag) in [
        (KF_ARENA_ARG1, 0usize, "KF_ARENA_ARG1"),
        (KF_ARENA_ARG2, 1, "KF_ARENA_ARG2"),
    ] {
        if kflags & bit == 0 {
            continue;
        }
        let Some(param) = st.params(s).get(idx).copied() else {
            return Err(FuncsError::ArenaNotPtr {
                func: func(),
                flag,
                what: format!("the function has only {} parameter(s)", st.params(s).len()),
            });
        };
        let p = arena_ptr(btf, param.ty).ok_or_else(|| FuncsError::ArenaNotPtr {
            func: func(),
            flag,
            what: format!("parameter {idx} (type id {}) is not a pointer", param.ty.get()),
        })?;
        st.set_param_type(s, idx, p);
        n += 1;
    }
    Ok(n)
}

/// `bpf_kfunc` (and `bpf_fastcall`) decl tags on a kfunc's FUNC.
fn kfunc_tags(btf: &mut Btf, func: TypeId, kfunc: Option<u32>, opts: &EmitOptions, sum: &mut EmitSummary) {
    if let Some(kf) = kfunc
        && opts.decl_tag_kfuncs
        && opts.decl_tag
    {
        btf.add_decl_tag(KFUNC_TAG, func, -1, false);
        sum.kfunc_tags += 1;
        if kf & KF_FASTCALL != 0 {
            btf.add_decl_tag(FASTCALL_TAG, func, -1, false);
            sum.fastcall_tags += 1;
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn emit_one(
    btf: &mut Btf,
    st: &mut FuncStates,
    s: StateId,
    name: &[u8],
    entry: u32,
    kfunc: Option<u32>,
    opts: &EmitOptions,
    sum: &mut EmitSummary,
) -> Result<(), FuncsError> {
    if let Some(kf) = kfunc
        && opts.decl_tag_kfuncs
        && opts.attributes
    {
        sum.arena_tags += arena_tags(btf, st, s, kf, name)?;
    }
    let params = st.params(s);
    if params.len() > 0xffff {
        return Err(FuncsError::TooManyParams {
            func: String::from_utf8_lossy(name).into_owned(),
            count: params.len(),
        });
    }
    // on the stack for up to 14 parameters: one allocation per function
    // added up in the serial tail of a vmlinux encode
    let mut words: smallvec::SmallVec<[u32; 32]> = smallvec::SmallVec::with_capacity(3 + 2 * params.len());
    words.extend_from_slice(&[
        0,
        make_info(Kind::FuncProto, false, params.len() as u32),
        st.ret(s).get(),
    ]);
    for p in params {
        words.extend_from_slice(&[p.name.get(), p.ty.get()]);
    }
    let proto = btf.push_words(&words);
    if name.is_empty() {
        return Err(FuncsError::EmptyName { entry });
    }
    let func = btf.add_func(name, proto, LINKAGE_STATIC);
    sum.emitted += 1;
    // the next reference tags a kfunc after its own annotations
    let kfunc_first = opts.decide == Decide::V1_31;
    if kfunc_first {
        kfunc_tags(btf, func, kfunc, opts, sum);
    }
    for a in st.annots(s) {
        btf.push_raw(
            a.value,
            make_info(Kind::DeclTag, false, 0),
            func.get(),
            &[a.component as u32],
        );
    }
    if !kfunc_first {
        kfunc_tags(btf, func, kfunc, opts, sum);
    }
    Ok(())
}
