//! The BTF questions relocation asks, answered as libbpf answers them:
//! modifiers and typedefs skipped, sizes resolved with a BTF's own pointer
//! size, flavor suffixes stripped from names.

use crate::btf::{Btf, Kind, StrOff, Type, TypeId};

/// libbpf's errno values, which its messages print negated.
pub mod errno {
    pub const E2BIG: i32 = 7;
    pub const EINVAL: i32 = 22;
    pub const ERANGE: i32 = 34;
    pub const EOPNOTSUPP: i32 = 95;
}

const VOID_WORDS: [u32; 3] = [0, 0, 0];

/// Type `id`, with id 0 as libbpf's `void` record (kind 0, no name).
pub fn type_of(btf: &Btf, id: TypeId) -> Option<Type<'_>> {
    if id == TypeId::VOID {
        return Some(Type { words: &VOID_WORDS });
    }
    btf.get(id)
}

/// The raw kind number of a record (unknown numbers included).
pub fn kind_raw(t: &Type<'_>) -> u32 {
    crate::btf::Info(t.info()).kind()
}

pub fn kind_of(t: &Type<'_>) -> Kind {
    t.kind()
}

/// libbpf's lower-case kind names, as its log lines print them.
pub fn kind_str(t: &Type<'_>) -> &'static str {
    const NAMES: [&str; 20] = [
        "void",
        "int",
        "ptr",
        "array",
        "struct",
        "union",
        "enum",
        "fwd",
        "typedef",
        "volatile",
        "const",
        "restrict",
        "func",
        "func_proto",
        "var",
        "datasec",
        "float",
        "decl_tag",
        "type_tag",
        "enum64",
    ];
    NAMES.get(kind_raw(t) as usize).copied().unwrap_or("unknown")
}

pub fn name<'b>(btf: &'b Btf, t: &Type<'_>) -> &'b [u8] {
    btf.str_at(t.name_off()).unwrap_or(b"")
}

pub fn str_at(btf: &Btf, off: u32) -> &[u8] {
    btf.str_at(StrOff::new(off)).unwrap_or(b"")
}

/// A name for display: the bytes, lossily, or `<anon>` when empty.
pub fn show(name: &[u8]) -> std::borrow::Cow<'_, str> {
    if name.is_empty() {
        "<anon>".into()
    } else {
        String::from_utf8_lossy(name)
    }
}

pub fn is_composite(t: &Type<'_>) -> bool {
    matches!(t.kind(), Kind::Struct | Kind::Union)
}

pub fn is_any_enum(t: &Type<'_>) -> bool {
    matches!(t.kind(), Kind::Enum | Kind::Enum64)
}

/// Follows CONST, VOLATILE, RESTRICT, TYPE_TAG and TYPEDEF to the first
/// other type (libbpf's `skip_mods_and_typedefs`). `None` for a dangling id.
pub fn skip_mods(btf: &Btf, mut id: TypeId) -> Option<(TypeId, Type<'_>)> {
    // A loop of modifiers is bounded by the type count: each step visits a
    // type, and a BTF the reader accepted has no more ids than that.
    for _ in 0..=btf.type_count() {
        let t = type_of(btf, id)?;
        match t.kind() {
            Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag | Kind::Typedef => id = t.type_id(),
            _ => return Some((id, t)),
        }
    }
    None
}

/// The member `i` of a struct or union: (name offset, type, bit offset,
/// bitfield size).
pub fn member(t: &Type<'_>, i: usize) -> Option<(u32, TypeId, u32, u32)> {
    let w = t.trailing().get(i * 3..i * 3 + 3)?;
    let (bit_off, bits) = if t.kflag() {
        (w[2] & 0x00ff_ffff, w[2] >> 24)
    } else {
        (w[2], 0)
    };
    Some((w[0], TypeId::new(w[1]), bit_off, bits))
}

/// Enumerator `i` of an ENUM (value sign-extended from 32 bits, as libbpf
/// reads it) or ENUM64: (name offset, value).
pub fn enumerator(t: &Type<'_>, i: usize) -> Option<(u32, u64)> {
    match t.kind() {
        Kind::Enum => {
            let w = t.trailing().get(i * 2..i * 2 + 2)?;
            Some((w[0], w[1] as i32 as i64 as u64))
        }
        Kind::Enum64 => {
            let w = t.trailing().get(i * 3..i * 3 + 3)?;
            Some((w[0], ((w[2] as u64) << 32) | w[1] as u64))
        }
        _ => None,
    }
}

const MAX_RESOLVE_DEPTH: usize = 32;

/// `btf__resolve_size`: the byte size of type `id` with pointers of
/// `ptr_size` bytes, or libbpf's errno.
pub fn resolve_size(btf: &Btf, mut id: TypeId, ptr_size: u32) -> Result<u32, i32> {
    let mut nelems: u64 = 1;
    let mut size: Option<u64> = None;
    for _ in 0..MAX_RESOLVE_DEPTH {
        let t = type_of(btf, id).ok_or(errno::EINVAL)?;
        match t.kind() {
            Kind::Int | Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 | Kind::Datasec | Kind::Float => {
                size = Some(t.size() as u64);
                break;
            }
            Kind::Ptr => {
                size = Some(ptr_size as u64);
                break;
            }
            Kind::Typedef
            | Kind::Volatile
            | Kind::Const
            | Kind::Restrict
            | Kind::Var
            | Kind::DeclTag
            | Kind::TypeTag => {
                id = t.type_id();
            }
            Kind::Array => {
                let (elem, _, n) = t.array();
                if nelems != 0 && n as u64 > u32::MAX as u64 / nelems {
                    return Err(errno::E2BIG);
                }
                nelems *= n as u64;
                id = elem;
            }
            _ => return Err(errno::EINVAL),
        }
    }
    let size = size.ok_or(errno::EINVAL)?;
    let total = nelems * size;
    if total > u32::MAX as u64 {
        return Err(errno::E2BIG);
    }
    Ok(total as u32)
}

/// The length of `name` without a `___flavor` suffix: the last `___`
/// that follows a non-underscore and precedes one ends the name.
pub fn essential_len(name: &[u8]) -> usize {
    let n = name.len();
    if n < 5 {
        return n;
    }
    for i in (0..=n - 5).rev() {
        if name[i] != b'_' && &name[i + 1..i + 4] == b"___" && name[i + 4] != b'_' {
            return i + 1;
        }
    }
    n
}

/// The name without its flavor suffix.
pub fn essential(name: &[u8]) -> &[u8] {
    &name[..essential_len(name)]
}

/// libbpf's `determine_ptr_size`: the size of the first `long`-like INT
/// (a split BTF's base is searched first), else the host's.
pub fn ptr_size(btf: &Btf) -> u32 {
    btf.long_size().unwrap_or(std::mem::size_of::<usize>() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn essential_names_follow_libbpf() {
        for (name, ess) in [
            ("task_struct", "task_struct"),
            ("task_struct___v2", "task_struct"),
            ("a___b___c", "a___b"),
            ("a____b", "a____b"),
            ("___x", "___x"),
            ("ab___", "ab___"),
            ("x___y", "x"),
            ("abc", "abc"),
        ] {
            assert_eq!(essential(name.as_bytes()), ess.as_bytes(), "{name}");
        }
    }
}
