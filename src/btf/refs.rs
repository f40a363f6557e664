//! Where a record's type ids and string offsets are, and visiting them.

use super::*;

impl Btf {
    /// Calls `f` with the word index of every type-id field of a record
    /// whose info word is `info`, in record order: the one list both
    /// reference visitors walk (it reads no words, so a visitor may write them).
    #[inline]
    pub fn type_ref_positions(info: u32, mut f: impl FnMut(usize)) {
        use kind::*;
        let info = Info(info);
        let vlen = info.vlen();
        match info.kind() {
            PTR | TYPEDEF | VOLATILE | CONST | RESTRICT | FUNC | VAR | DECL_TAG | TYPE_TAG => f(2),
            ARRAY => {
                f(3);
                f(4);
            }
            STRUCT | UNION => (0..vlen).for_each(|i| f(3 + 3 * i + 1)),
            FUNC_PROTO => {
                f(2);
                (0..vlen).for_each(|i| f(3 + 2 * i + 1));
            }
            DATASEC => (0..vlen).for_each(|i| f(3 + 3 * i)),
            _ => {}
        }
    }

    /// Word indices of every string-offset field of a record whose info word
    /// is `info`, in record order (type name first, then entry names).
    #[inline]
    pub fn str_ref_positions(info: u32, mut f: impl FnMut(usize)) {
        use kind::*;
        let info = Info(info);
        let vlen = info.vlen();
        f(0);
        match info.kind() {
            STRUCT | UNION | ENUM64 => (0..vlen).for_each(|i| f(3 + 3 * i)),
            ENUM | FUNC_PROTO => (0..vlen).for_each(|i| f(3 + 2 * i)),
            _ => {}
        }
    }

    /// Calls `f` with every type-id field of the record, in record order.
    #[inline]
    pub fn for_each_type_ref(words: &[u32], mut f: impl FnMut(u32)) {
        Btf::type_ref_positions(words[1], |p| f(words[p]));
    }

    /// Calls `f` with every string-offset field of the record, in record order.
    #[inline]
    pub fn for_each_str_ref(words: &[u32], mut f: impl FnMut(u32)) {
        Btf::str_ref_positions(words[1], |p| f(words[p]));
    }

    /// Calls `f` on every type-id field of the record (mutable), in record order.
    #[inline]
    pub fn for_each_type_ref_mut(words: &mut [u32], mut f: impl FnMut(&mut u32)) {
        Btf::type_ref_positions(words[1], |p| f(&mut words[p]));
    }

    /// Calls `f` on every string-offset field of the record (mutable), in
    /// record order (type name first, then entry names).
    #[inline]
    pub fn for_each_str_ref_mut(words: &mut [u32], mut f: impl FnMut(&mut u32)) {
        Btf::str_ref_positions(words[1], |p| f(&mut words[p]));
    }
}

/// The types `roots` refer to, directly or through others, with `roots`
/// themselves, in id order (void left out).
pub fn needed_by(btf: &Btf, roots: &[TypeId]) -> Vec<TypeId> {
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<TypeId> = roots.to_vec();
    while let Some(id) = stack.pop() {
        if id.0 == 0 || !seen.insert(id) {
            continue;
        }
        if let Some(t) = btf.get(id) {
            Btf::for_each_type_ref(t.words, |r| stack.push(TypeId::new(r)));
        }
    }
    seen.into_iter().collect()
}
