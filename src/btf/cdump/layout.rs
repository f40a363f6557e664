//! Sizes and alignments as the C compiler sees them.

use super::MAX_DEPTH;
use crate::btf::{Btf, Kind, Type, TypeId};

#[inline]
pub(super) fn roundup(x: i64, to: i64) -> i64 {
    // A zero alignment only comes from malformed members (the reference
    // divides by zero there); treat it as no constraint.
    if to <= 0 { x } else { (x + to - 1) / to * to }
}

/// Pointer size in bytes: the size of the first integer called some
/// spelling of `long`, else 8.
pub fn pointer_size(btf: &Btf) -> u32 {
    btf.long_size().unwrap_or(8)
}

/// Byte size of type `id`, following typedefs, modifiers and arrays (at most
/// 32 links, like the reference); None for void, forward declarations,
/// functions, or an overflowing array.
pub fn resolve_size(btf: &Btf, ptr_sz: u32, id: u32) -> Option<u64> {
    let mut id = id;
    let mut nelems: u64 = 1;
    for _ in 0..32 {
        if id == 0 {
            return None;
        }
        let t = btf.get(TypeId::new(id))?;
        match t.kind() {
            Kind::Int | Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 | Kind::Datasec | Kind::Float => {
                let size = t.size() as u64;
                return (nelems == 0 || size <= u32::MAX as u64 / nelems).then_some(nelems * size);
            }
            Kind::Ptr => return Some(nelems * ptr_sz as u64),
            Kind::Typedef
            | Kind::Volatile
            | Kind::Const
            | Kind::Restrict
            | Kind::Var
            | Kind::DeclTag
            | Kind::TypeTag => id = t.type_id().0,
            Kind::Array => {
                let (elem, _, n) = t.array();
                if nelems != 0 && n as u64 > u32::MAX as u64 / nelems {
                    return None;
                }
                nelems *= n as u64;
                id = elem.0;
            }
            Kind::Fwd | Kind::Func | Kind::FuncProto | Kind::Unkn => return None,
        }
    }
    None
}

/// Alignment of type `id` in bytes; 0 when it has none (void, forward
/// declarations, functions). A struct whose layout contradicts its natural
/// alignment counts as packed (alignment 1).
pub fn align_of(btf: &Btf, ptr_sz: u32, id: u32, depth: u32) -> u32 {
    if id == 0 || depth > MAX_DEPTH {
        return 0;
    }
    let Some(t) = btf.get(TypeId::new(id)) else { return 0 };
    match t.kind() {
        Kind::Int | Kind::Enum | Kind::Enum64 | Kind::Float => ptr_sz.min(t.size()),
        Kind::Ptr => ptr_sz,
        Kind::Typedef | Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag => {
            align_of(btf, ptr_sz, t.type_id().0, depth + 1)
        }
        Kind::Array => align_of(btf, ptr_sz, t.array().0.0, depth + 1),
        Kind::Struct | Kind::Union => {
            let kflag = t.kflag();
            let mut max_align = 1;
            for [_, ty, off] in t.triples() {
                let a = align_of(btf, ptr_sz, ty, depth + 1);
                if a == 0 {
                    return 0;
                }
                max_align = max_align.max(a);
                let bitfield = kflag && off >> 24 != 0;
                if !bitfield && off % (8 * a) != 0 {
                    return 1;
                }
            }
            if t.size() % max_align != 0 { 1 } else { max_align }
        }
        _ => 0,
    }
}

/// Whether a struct needs `__attribute__((packed))` to get its recorded
/// layout: a non-bitfield member off its natural alignment, or a size that
/// is not a multiple of the largest member alignment.
pub(super) fn is_packed(btf: &Btf, ptr_sz: u32, t: Type<'_>) -> bool {
    let kflag = t.kflag();
    let mut max_align = 1;
    for [_, ty, off] in t.triples() {
        let a = align_of(btf, ptr_sz, ty, 0);
        let bitfield = kflag && off >> 24 != 0;
        if a != 0 && !bitfield && off % (8 * a) != 0 {
            return true;
        }
        max_align = max_align.max(a);
    }
    !t.size().is_multiple_of(max_align)
}
