//! libbpf's type signature hashes (the keys its candidate table files types
//! under) and its equality tests on raw words.

use super::DedupError;
use super::records::{is_any_enum, rec_at};
use crate::btf::kind::*;

// Every function here is `#[inline]`: the passes that call them are in
// other modules (other codegen units), and these are their inner loops.
use crate::btf::{Btf, TypeId};

/// libbpf's hash step: `h = h * 31 + value`.
#[inline]
pub(super) fn hc(h: u64, word: u32) -> u64 {
    h.wrapping_mul(31).wrapping_add(word as u64)
}
#[inline]
pub(super) fn hash_common(w: &[u32]) -> u64 {
    hc(hc(hc(0, w[0]), w[1]), w[2])
}
/// libbpf 1.8's key for a typedef in the struct pass: name and info, not
/// the type it names (prep still files a base's typedefs by
/// [`hash_common`]).
#[inline]
pub(super) fn hash_typedef(w: &[u32]) -> u64 {
    hc(hc(0, w[0]), w[1])
}
#[inline]
pub(super) fn hash_int_tag(w: &[u32]) -> u64 {
    hc(hash_common(w), w[3])
}
#[inline]
pub(super) fn hash_enum(w: &[u32]) -> u64 {
    hc(0, w[0])
}
/// A hash of a whole record or rewritten content (for the exact-content
/// side indexes: full enums here, reference types in [`refindex`]).
#[inline]
pub(super) fn content_hash(w: &[u32]) -> u64 {
    let mut h: u64 = 0;
    for &x in w {
        h = (h.rotate_left(5) ^ x as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 32)
}

#[inline]
pub(super) fn hash_struct(w: &[u32]) -> u64 {
    let mut h = hash_common(w);
    for m in w[3..].chunks_exact(3) {
        h = hc(hc(h, m[0]), m[2]);
    }
    h
}
#[inline]
pub(super) fn hash_array(w: &[u32]) -> u64 {
    hc(hc(hc(hash_common(w), w[3]), w[4]), w[5])
}
#[inline]
pub(super) fn hash_fnproto(w: &[u32]) -> u64 {
    let mut h = hash_common(w);
    for p in w[3..].chunks_exact(2) {
        h = hc(hc(h, p[0]), p[1]);
    }
    h
}

#[inline]
pub(super) fn equal_common(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0] && a[1] == b[1] && a[2] == b[2]
}
#[inline]
pub(super) fn equal_typedef(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0] && a[1] == b[1]
}
#[inline]
pub(super) fn equal_int_tag(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[3] == b[3]
}
#[inline]
pub(super) fn equal_enum(a: &[u32], b: &[u32]) -> bool {
    // equal info implies equal kind and vlen, hence equal length
    equal_common(a, b) && a[3..] == b[3..]
}
#[inline]
pub(super) fn is_enum_fwd(w: &[u32]) -> bool {
    is_any_enum(w.kind()) && w.vlen() == 0
}
#[inline]
pub(super) fn compat_enum(a: &[u32], b: &[u32]) -> bool {
    if !is_enum_fwd(a) && !is_enum_fwd(b) {
        return equal_enum(a, b);
    }
    a[0] == b[0] && is_any_enum(a.kind()) && is_any_enum(b.kind())
}
#[inline]
pub(super) fn shallow_equal_struct(a: &[u32], b: &[u32]) -> bool {
    if !equal_common(a, b) {
        return false;
    }
    a[3..]
        .chunks_exact(3)
        .zip(b[3..].chunks_exact(3))
        .all(|(x, y)| x[0] == y[0] && x[2] == y[2])
}
#[inline]
pub(super) fn equal_array(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[3] == b[3] && a[4] == b[4] && a[5] == b[5]
}
#[inline]
pub(super) fn compat_fnproto(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0]
        && a[1] == b[1]
        && a[3..]
            .chunks_exact(2)
            .zip(b[3..].chunks_exact(2))
            .all(|(x, y)| x[0] == y[0])
}

/// The hash the prep pass files base type `id` under (None: not filed).
pub(super) fn prep_hash(w: &[u32], id: TypeId) -> Result<Option<u64>, DedupError> {
    Ok(Some(match w.kind() {
        VAR | DATASEC => return Ok(None),
        CONST | VOLATILE | RESTRICT | PTR | FWD | TYPEDEF | FUNC | FLOAT | TYPE_TAG => hash_common(w),
        INT | DECL_TAG => hash_int_tag(w),
        ENUM | ENUM64 => hash_enum(w),
        STRUCT | UNION => hash_struct(w),
        ARRAY => hash_array(w),
        FUNC_PROTO => hash_fnproto(w),
        _ => {
            return Err(DedupError::Invalid {
                id,
                what: "unknown kind in the base",
            });
        }
    }))
}

/// libbpf's signature hash of every own type, the value each pass looks its
/// candidates up by (for the `hot` micro-benchmark; dedup computes them as
/// it goes). Kinds dedup never hashes (VAR, DATASEC, unknown) give 0.
pub(crate) fn signature_hashes(btf: &Btf) -> Vec<u64> {
    let (w, offs) = (btf.raw_words(), btf.type_offsets());
    offs.iter()
        // the prep pass's hash: the same per-kind choice every pass makes
        .map(|&o| prep_hash(rec_at(w, o), TypeId::VOID).ok().flatten().unwrap_or(0))
        .collect()
}
