//! Stubs: the structs and unions of the chunked passes ([`super::Incremental`])
//! that no later pass reads whole, cut down in the encoder's growing BTF to
//! their first three words (name, info, size), so the pre-dedup BTF never
//! exists whole. Name, kind and size stay for the function phase's look-ups.

use crate::btf::kind::{RawRecord, STRUCT, UNION};
use crate::btf::{Btf, TypeId};

/// A stub's info word: STRUCT or UNION, vlen 0 and the kind flag, which the
/// encoder never sets on a struct or union without members (the flag says
/// how members encode bitfields; every bit of the info word has a meaning
/// since BTF 2026, so no spare bit is left to mark one; a FWD of a union
/// has the flag too, hence the kind test). Such a record must never be
/// compared.
const KFLAG: u32 = 1 << 31;
const STUB_MASK: u32 = KFLAG | crate::btf::VLEN_LIMIT;

/// Whether the record starting at `w` (at least its first two words) is a
/// stub.
#[inline(always)]
pub(super) fn is_stub(w: &[u32]) -> bool {
    w[1] & STUB_MASK == KFLAG && matches!(w.kind(), STRUCT | UNION)
}

/// Whether either of two records is a stub.
#[inline(always)]
pub(super) fn either_is_stub(a: &[u32], b: &[u32]) -> bool {
    is_stub(a) || is_stub(b)
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
                rec[1] = (rec[1] & !crate::btf::VLEN_LIMIT) | KFLAG;
                3
            } else {
                rec.len()
            }
        },
        placed,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Kind, make_info};

    #[test]
    fn only_a_cut_struct_or_union_is_a_stub() {
        let stub = |k| [1, (make_info(k, false, 0) & !crate::btf::VLEN_LIMIT) | KFLAG, 8];
        assert!(is_stub(&stub(Kind::Struct)));
        assert!(is_stub(&stub(Kind::Union)));
        // A FWD of a union carries the kind flag with vlen 0 too.
        assert!(!is_stub(&[1, make_info(Kind::Fwd, true, 0), 0]));
        assert!(!is_stub(&[1, make_info(Kind::Enum, true, 0), 4]));
        // A struct with bitfield members has the flag and members.
        assert!(!is_stub(&[1, make_info(Kind::Struct, true, 1), 4, 0, 0, 0]));
        assert!(!either_is_stub(
            &[1, make_info(Kind::Fwd, true, 0), 0],
            &[1, make_info(Kind::Struct, false, 0), 0]
        ));
    }
}
