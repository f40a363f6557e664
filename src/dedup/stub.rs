//! Stubs: the structs and unions of the chunked passes ([`super::Incremental`])
//! that no later pass reads whole, cut down in the encoder's growing BTF to
//! their first three words (name, info, size), so the pre-dedup BTF never
//! exists whole. Name, kind and size stay for the function phase's look-ups.

use crate::btf::kind::{RawRecord, STRUCT, UNION};
use crate::btf::{Btf, TypeId};

/// An unused bit of the info word (bits 16–23 are unused in BTF), set on a
/// STRUCT or UNION record cut down to a stub (vlen 0): such a record must
/// never be compared.
const STUB_INFO: u32 = 1 << 23;

/// Whether the record starting at `w` (at least its first two words) is a
/// stub.
#[inline(always)]
pub(super) fn is_stub(w: &[u32]) -> bool {
    w[1] & STUB_INFO != 0
}

/// Whether either of two records is a stub (one test on the walk's path).
#[inline(always)]
pub(super) fn either_is_stub(a: &[u32], b: &[u32]) -> bool {
    (a[1] | b[1]) & STUB_INFO != 0
}

/// Cuts the structs and unions of the deferred types from id `first` on
/// (which start at word `at` and run to the end) down to stubs where
/// `stub(id)` says so; `placed(id, word)` learns where each record starts
/// now. A struct mapped onto an earlier copy is never compared again unless
/// a canonical type reaches it, and such structs are most of a vmlinux's
/// records.
pub(super) fn stub_deferred(
    btf: &mut Btf,
    first: TypeId,
    at: usize,
    mut stub: impl FnMut(u32) -> bool,
    placed: impl FnMut(u32, usize),
) {
    btf.cut_deferred(
        first,
        at,
        |id, rec| {
            let k = rec.kind();
            if (k == STRUCT || k == UNION) && stub(id) {
                rec[1] = (rec[1] & !0xffff) | STUB_INFO;
                3
            } else {
                rec.len()
            }
        },
        placed,
    );
}
