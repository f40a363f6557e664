//! The type-loop check: references BTF cannot hold, found on the CU's
//! records just encoded.

use crate::btf::RawRecord;
use crate::btf::kind::{ARRAY, CONST, FUNC_PROTO, PTR, RESTRICT, STRUCT, TYPE_TAG, TYPEDEF, UNION, VOLATILE};

use nonmax::NonMaxU32;

use super::CuOut;

/// Which references a loop check follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loop {
    /// Through qualifiers, typedefs, pointers, arrays and prototypes, which
    /// BTF dedup resolves depth-first: a loop that no struct or union breaks
    /// cannot be deduplicated (libbpf fails with ELOOP, and so the reference).
    Reference,
    /// Through qualifiers, typedefs, arrays and members: a struct that holds
    /// itself by value has no size (the kernel refuses it as a loop; the
    /// reference writes it).
    Containment,
}

/// [`down_flags`]: every reference edge goes to a smaller core id.
const REF_DOWN: u8 = 1;
/// Every containment edge does.
const CONTAIN_DOWN: u8 = 2;
/// No reference edge at all.
const REF_LEAF: u8 = 4;
/// No containment edge at all.
const CONTAIN_LEAF: u8 = 8;
/// The flags of a core id without a record (and of void).
pub(super) const NO_EDGES: u8 = REF_DOWN | CONTAIN_DOWN | REF_LEAF | CONTAIN_LEAF;

/// For [`type_loop`]: whether all edges of each kind out of `root`'s record
/// `w` go to smaller ids (the common case, which needs no search) and
/// whether it has none at all (a search reaching it is done with it at
/// once: a pointer's struct, a member's base type). Taken as each record is
/// written, while it is in cache; it mirrors `edges` in [`type_loop`]
/// (deriving it through `edges` per member measured more instructions
/// for a whole vmlinux encode).
pub(super) fn down_flags(w: &[u32], root: u32) -> u8 {
    let vlen = w.vlen();
    let below = |t: u32| t < root;
    // (references down, containment down, no reference edge, no containment edge)
    let (r, c, rl, cl) = match w.kind() {
        STRUCT | UNION => (
            true,
            w[3..3 + 3 * vlen].chunks_exact(3).all(|m| below(m[1])),
            true,
            vlen == 0,
        ),
        FUNC_PROTO => (
            below(w[2]) && w[3..3 + 2 * vlen].chunks_exact(2).all(|p| below(p[1])),
            true,
            false,
            true,
        ),
        CONST | VOLATILE | RESTRICT | TYPEDEF => (below(w[2]), below(w[2]), false, false),
        ARRAY => (below(w[3]), below(w[3]), false, false),
        PTR | TYPE_TAG => (below(w[2]), true, false, true),
        _ => (true, true, true, true),
    };
    (r as u8 * REF_DOWN) | (c as u8 * CONTAIN_DOWN) | (rl as u8 * REF_LEAF) | (cl as u8 * CONTAIN_LEAF)
}

/// A loop in the CU's type references that BTF cannot hold, as (core id
/// where it closes, message); only damaged DWARF has one. It runs on the
/// records just encoded, whose references are already resolved to core ids
/// (no lookups), depth-first with an explicit stack (chains of any depth
/// cost no stack).
pub(super) fn type_loop(o: &CuOut<'_>, start: &[Option<NonMaxU32>], down: &[u8]) -> Option<(u32, String)> {
    // `start`: per core id, where its record starts in `o.words`, if it
    // has one; `down`: its [`down_flags`].
    let n = start.len();
    let words = &o.words[..];
    for mode in [Loop::Reference, Loop::Containment] {
        // Where the references `mode` follows out of `core`'s record lie:
        // (first word, count, stride); every kind's are evenly spaced.
        let edges = |core: u32| -> (usize, u32, usize) {
            let Some(s) = start[core as usize] else {
                return (0, 0, 0);
            };
            let s = s.get() as usize;
            let info = crate::btf::Info(words[s + 1]);
            let vlen = info.vlen() as u32;
            match (info.kind(), mode) {
                (CONST | VOLATILE | RESTRICT | TYPEDEF, _) => (s + 2, 1, 0),
                // The element type.
                (ARRAY, _) => (s + 3, 1, 0),
                (PTR | TYPE_TAG, Loop::Reference) => (s + 2, 1, 0),
                // The return type, then each parameter's.
                (FUNC_PROTO, Loop::Reference) => (s + 2, vlen + 1, 2),
                // Each member's type.
                (STRUCT | UNION, Loop::Containment) => (s + 4, vlen, 3),
                _ => (0, 0, 0),
            }
        };
        // 0 unvisited, 1 on the path, 2 done. Nodes are taken in id order,
        // so those below `root` are done: a node whose references all go
        // down is done at once, and only one with an upward reference (a
        // loop has one) needs the search. A path entry is a node and what
        // is left of its references: (node, next word, count left, stride).
        let mut color = vec![0u8; n];
        let mut path: Vec<(u32, usize, u32, usize)> = Vec::new();
        let (bit, leaf) = match mode {
            Loop::Reference => (REF_DOWN, REF_LEAF),
            Loop::Containment => (CONTAIN_DOWN, CONTAIN_LEAF),
        };
        for root in 1..n as u32 {
            if color[root as usize] != 0 {
                continue;
            }
            if down[root as usize] & bit != 0 {
                color[root as usize] = 2;
                continue;
            }
            color[root as usize] = 1;
            let (at, left, stride) = edges(root);
            path.push((root, at, left, stride));
            while let Some(top) = path.last_mut() {
                if top.2 == 0 {
                    color[top.0 as usize] = 2;
                    path.pop();
                    continue;
                }
                let t = words[top.1];
                top.1 += top.3;
                top.2 -= 1;
                match t {
                    t if t == 0 || t as usize >= n || color[t as usize] == 2 => {}
                    t if color[t as usize] == 0 && down[t as usize] & leaf != 0 => color[t as usize] = 2,
                    t if color[t as usize] == 0 => {
                        color[t as usize] = 1;
                        let (at, left, stride) = edges(t);
                        path.push((t, at, left, stride));
                    }
                    t => {
                        let len = path.len() - path.iter().position(|p| p.0 == t).unwrap_or(0);
                        let msg = match mode {
                            Loop::Reference => format!(
                                "refers back to itself through {len} type(s) with no struct or union between (a type loop BTF cannot hold)"
                            ),
                            Loop::Containment => {
                                format!("contains itself by value through {len} type(s) (a type loop BTF cannot hold)")
                            }
                        };
                        return Some((t, msg));
                    }
                }
            }
        }
    }
    None
}
