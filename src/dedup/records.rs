//! What dedup reads from records beyond [`crate::btf::kind`]: where a
//! record's type ids are in libbpf's iterator order, the checks that keep
//! a malformed record from making dedup index out of bounds, and reading a
//! record by id.

use super::offsets::Offsets;
use crate::btf::TypeId;
use crate::btf::kind::*;

#[inline]
pub(super) fn is_composite(kind: u32) -> bool {
    kind == STRUCT || kind == UNION
}
#[inline]
pub(super) fn is_any_enum(kind: u32) -> bool {
    kind == ENUM || kind == ENUM64
}

/// Positions of the type-id words of a record, in libbpf's field-iterator order
/// (`BTF_FIELD_ITER_IDS`; note FWD's size/type word counts).
pub(super) fn for_each_id_pos(w: &[u32], mut f: impl FnMut(usize)) {
    match w.kind() {
        FWD | CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | VAR | DECL_TAG | TYPE_TAG => f(2),
        ARRAY => {
            f(3);
            f(4);
        }
        STRUCT | UNION => (0..w.vlen()).for_each(|i| f(3 + 3 * i + 1)),
        FUNC_PROTO => {
            f(2);
            (0..w.vlen()).for_each(|i| f(3 + 2 * i + 1));
        }
        DATASEC => (0..w.vlen()).for_each(|i| f(3 + 3 * i)),
        _ => {}
    }
}

/// Whether every type id of the record `w` (exactly one record: what
/// [`for_each_id_pos`] visits) is below `end`. Member lists are scanned
/// as chunks, without a bounds check per id: every record of a vmlinux goes
/// through this when dedup runs during the CU loop.
#[inline(always)]
pub(super) fn ids_below(w: &[u32], end: TypeId) -> bool {
    let end = end.get();
    let all_below = |stride: usize, at: usize| w.get(3..).unwrap_or(&[]).chunks_exact(stride).all(|e| e[at] < end);
    match w.kind() {
        FWD | CONST | VOLATILE | RESTRICT | PTR | TYPEDEF | FUNC | VAR | DECL_TAG | TYPE_TAG => w[2] < end,
        ARRAY => w[3] < end && w[4] < end,
        STRUCT | UNION => all_below(3, 1),
        FUNC_PROTO => w[2] < end && all_below(2, 1),
        DATASEC => all_below(3, 0),
        _ => true,
    }
}

pub(super) static VOID: [u32; 3] = [0, 0, 0];

/// The length of the record at word `off`, if it fits in `words`.
#[inline]
pub(super) fn fitting_len(words: &[u32], off: usize) -> Option<usize> {
    words
        .get(off + 1)
        .map(|&info| Info(info).len())
        .filter(|len| off + len <= words.len())
}

/// VAR and DATASEC represent themselves from the start (libbpf's prep).
#[inline]
pub(super) fn represents_itself(kind: u32) -> bool {
    kind == VAR || kind == DATASEC
}

/// The record that starts at word `off`.
#[inline(always)]
pub(super) fn rec_at(words: &[u32], off: u32) -> &[u32] {
    let s = off as usize;
    &words[s..s + Info(words[s + 1]).len()]
}

/// The words from the record of `id` on (0 is void): for reading fields at
/// fixed places or counted by its vlen without first working out where it
/// ends (the graph walk's hottest reads). [`exact`] cuts it to the record.
#[inline(always)]
pub(super) fn rec_from<'w>(words: &'w [u32], nodes: &Offsets, id: TypeId) -> &'w [u32] {
    if id == TypeId::VOID {
        return &VOID;
    }
    &words[nodes.get(id) as usize..]
}

/// A [`rec_from`] slice cut to its record.
#[inline(always)]
pub(super) fn exact(w: &[u32]) -> &[u32] {
    &w[..w.rec_len()]
}

/// The record of `id` (ids of the whole space; 0 is void).
#[inline(always)]
pub(super) fn rec_of<'w>(words: &'w [u32], nodes: &Offsets, id: TypeId) -> &'w [u32] {
    if id == TypeId::VOID {
        return &VOID;
    }
    rec_at(words, nodes.get(id))
}

/// Whether word `pos` of a record of kind `kind` is a type id that libbpf's
/// reference pass rewrites to its canonical id.
#[inline]
pub(super) fn is_ref_pos(kind: u32, pos: usize) -> bool {
    match kind {
        ARRAY => pos == 3 || pos == 4,
        FUNC_PROTO => pos == 2 || (pos >= 4 && pos.is_multiple_of(2)),
        _ => pos == 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::kind::Info;

    #[test]
    fn ids_below_agrees_with_the_id_iterator() {
        let info = |k: u32, vlen: u32| (k << 24) | vlen;
        let recs: Vec<Vec<u32>> = vec![
            vec![1, info(INT, 0), 4, 32],
            vec![1, info(PTR, 0), 7],
            vec![1, info(FWD, 0), 9],
            vec![1, info(ARRAY, 0), 0, 5, 8, 3],
            vec![1, info(STRUCT, 3), 8, 1, 2, 0, 1, 11, 32, 1, 6, 64],
            vec![1, info(UNION, 0), 0],
            vec![0, info(FUNC_PROTO, 2), 4, 1, 12, 1, 3],
            vec![1, info(DATASEC, 2), 8, 13, 0, 4, 2, 4, 4],
            vec![1, info(ENUM, 2), 4, 1, 0, 1, 1],
            vec![1, info(VAR, 0), 10, 1],
            vec![1, info(DECL_TAG, 0), 14, 0],
        ];
        for r in &recs {
            assert_eq!(r.len(), Info(r[1]).len());
            for end in 0..16 {
                let mut all = true;
                for_each_id_pos(r, |p| all &= r[p] < end);
                assert_eq!(ids_below(r, TypeId::new(end)), all, "{r:?} below {end}");
            }
        }
    }
}
