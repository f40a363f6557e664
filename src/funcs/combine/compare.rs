//! The reference's comparison of two states of one function: loose type
//! matching, and why two states disagree (what "decide" reads).

use crate::btf::{Btf, RawRecord, StrOff, TypeId, kind};

use super::super::{FuncStates, Param, StateId};

/// The kind as `types_match` sees it: a FWD counts as the STRUCT or UNION it
/// declares.
#[inline]
fn match_kind(words: &[u32]) -> u32 {
    match words.kind() {
        kind::FWD if words.kflag() => kind::UNION,
        kind::FWD => kind::STRUCT,
        k => k,
    }
}

#[inline]
fn names_match(btf: &Btf, a: u32, b: u32) -> bool {
    a == b || btf.str_at(StrOff::new(a)).unwrap_or(b"") == btf.str_at(StrOff::new(b)).unwrap_or(b"")
}

/// How two FUNC_PROTOs reached through pointers are compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProtoMatch {
    /// Their vlen and return types only: v1.31 compares the return types
    /// once per parameter instead of the parameters.
    #[default]
    ReturnOnly,
    /// Return and parameter types, as the next reference (dwarves 2f9a77e).
    Params,
}

/// The reference's loose type comparison between two ids of one BTF: names
/// for named kinds, structure through modifiers, pointers and arrays, `const`
/// skipped where only one side has it; FUNC_PROTO as `protos` says. Ids
/// outside the BTF compare unequal.
pub fn types_match(btf: &Btf, mut x: TypeId, mut y: TypeId, protos: ProtoMatch) -> bool {
    loop {
        if x == y {
            return true;
        }
        if x.get() == 0 || y.get() == 0 {
            return false;
        }
        let (Some(tx), Some(ty)) = (btf.get(x), btf.get(y)) else {
            return false;
        };
        let (kx, ky) = (match_kind(tx.words), match_kind(ty.words));
        if kx != ky {
            if kx == kind::CONST {
                x = tx.type_id();
                continue;
            }
            if ky == kind::CONST {
                y = ty.type_id();
                continue;
            }
            return false;
        }
        use kind::*;
        match kx {
            INT => {
                return tx.size() == ty.size()
                    && tx.words.get(3) == ty.words.get(3)
                    && names_match(btf, tx.words[0], ty.words[0]);
            }
            FLOAT => return tx.size() == ty.size() && names_match(btf, tx.words[0], ty.words[0]),
            TYPEDEF | STRUCT | UNION | ENUM | ENUM64 => return names_match(btf, tx.words[0], ty.words[0]),
            PTR | VOLATILE | CONST | RESTRICT | TYPE_TAG => {
                x = tx.type_id();
                y = ty.type_id();
            }
            ARRAY => {
                let (ex, _, nx) = tx.array();
                let (ey, _, ny) = ty.array();
                if nx != ny {
                    return false;
                }
                x = ex;
                y = ey;
            }
            FUNC_PROTO => {
                return tx.vlen() == ty.vlen()
                    && types_match(btf, tx.type_id(), ty.type_id(), protos)
                    && (protos == ProtoMatch::ReturnOnly
                        || (tx.pairs().zip(ty.pairs()))
                            .all(|(p, q)| types_match(btf, TypeId::new(p[1]), TypeId::new(q[1]), protos)));
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many pairs of states this thread compared (the combine's work,
    /// which a test bounds instead of timing it).
    pub(in crate::funcs) static PAIRS_COMPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Why two states of a function disagree, in the reference's words (its
/// `--verbose` line), or `None` when they have the same parameter count
/// (varargs slot included), return type and parameter types; names are not
/// compared.
pub(super) fn funcs_mismatch(btf: &Btf, st: &FuncStates, a: StateId, b: StateId, protos: ProtoMatch) -> Option<String> {
    #[cfg(test)]
    PAIRS_COMPARED.with(|c| c.set(c.get() + 1));
    let (pa, pb) = (st.params(a), st.params(b));
    if pa.len() != pb.len() {
        return Some(format!(
            "param count mismatch; {} params != {} params",
            pa.len(),
            pb.len()
        ));
    }
    if !types_match(btf, st.ret(a), st.ret(b), protos) {
        return Some("return type mismatch".into());
    }
    let name = |p: &Param| String::from_utf8_lossy(btf.str_at(p.name).unwrap_or(b"")).into_owned();
    (pa.iter().zip(pb).enumerate())
        .find(|(_, (p, q))| !types_match(btf, p.ty, q.ty, protos))
        .map(|(i, (p, q))| format!("param type mismatch for param#{} {} != {}", i + 1, name(p), name(q)))
}
