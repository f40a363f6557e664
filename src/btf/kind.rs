//! The kinds of BTF records, and reading a record's info word.
//!
//! Two spellings of one vocabulary: [`Kind`], an enum for code that names
//! kinds, and the raw numbers ([`INT`] ... [`ENUM64`]) for the hot paths that
//! `match` on the info word's kind bits without a conversion. [`Info`] and
//! [`RawRecord`] read a record's words in place: kind, vlen, kind flag and
//! the record's length, from const tables.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    Unkn = 0,
    Int = 1,
    Ptr = 2,
    Array = 3,
    Struct = 4,
    Union = 5,
    Enum = 6,
    Fwd = 7,
    Typedef = 8,
    Volatile = 9,
    Const = 10,
    Restrict = 11,
    Func = 12,
    FuncProto = 13,
    Var = 14,
    Datasec = 15,
    Float = 16,
    DeclTag = 17,
    TypeTag = 18,
    Enum64 = 19,
}

pub const KIND_MAX: u8 = 19;

/// The largest kind number the info word can hold (7 bits since BTF 2026;
/// kinds past [`KIND_MAX`] are ones this crate does not know).
pub const KIND_LIMIT: u32 = 0x7f;

/// The largest vlen the info word can hold (24 bits since BTF 2026; the
/// original format had 16 and kept bits 16-23 zero, so reading 24 bits
/// reads either).
pub const VLEN_LIMIT: u32 = 0x00ff_ffff;

impl Kind {
    /// A struct or a union.
    #[inline]
    pub fn is_composite(self) -> bool {
        matches!(self, Kind::Struct | Kind::Union)
    }

    #[inline]
    pub fn from_u8(k: u8) -> Option<Kind> {
        if k > KIND_MAX {
            return None;
        }
        // SAFETY-free: table lookup.
        const ALL: [Kind; 20] = [
            Kind::Unkn,
            Kind::Int,
            Kind::Ptr,
            Kind::Array,
            Kind::Struct,
            Kind::Union,
            Kind::Enum,
            Kind::Fwd,
            Kind::Typedef,
            Kind::Volatile,
            Kind::Const,
            Kind::Restrict,
            Kind::Func,
            Kind::FuncProto,
            Kind::Var,
            Kind::Datasec,
            Kind::Float,
            Kind::DeclTag,
            Kind::TypeTag,
            Kind::Enum64,
        ];
        Some(ALL[k as usize])
    }

    /// The name bpftool prints for the kind.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Unkn => "UNKNOWN",
            Kind::Int => "INT",
            Kind::Ptr => "PTR",
            Kind::Array => "ARRAY",
            Kind::Struct => "STRUCT",
            Kind::Union => "UNION",
            Kind::Enum => "ENUM",
            Kind::Fwd => "FWD",
            Kind::Typedef => "TYPEDEF",
            Kind::Volatile => "VOLATILE",
            Kind::Const => "CONST",
            Kind::Restrict => "RESTRICT",
            Kind::Func => "FUNC",
            Kind::FuncProto => "FUNC_PROTO",
            Kind::Var => "VAR",
            Kind::Datasec => "DATASEC",
            Kind::Float => "FLOAT",
            Kind::DeclTag => "DECL_TAG",
            Kind::TypeTag => "TYPE_TAG",
            Kind::Enum64 => "ENUM64",
        }
    }

    /// Words of trailing data per vlen entry, and fixed trailing words.
    #[inline]
    pub fn trailing_words(self, vlen: u32) -> u32 {
        FIXED[self as usize] as u32 + PER_ENTRY[self as usize] as u32 * vlen
    }

    /// Kinds whose third word is a type id (as opposed to a size).
    pub fn has_type_ref(self) -> bool {
        matches!(
            self,
            Kind::Ptr
                | Kind::Typedef
                | Kind::Volatile
                | Kind::Const
                | Kind::Restrict
                | Kind::Func
                | Kind::FuncProto
                | Kind::Var
                | Kind::DeclTag
                | Kind::TypeTag
        )
    }
}

/// The kind numbers as they sit in the info word, for `match` on raw
/// records ([`RawRecord::kind`]).
pub const INT: u32 = Kind::Int as u32;
pub const PTR: u32 = Kind::Ptr as u32;
pub const ARRAY: u32 = Kind::Array as u32;
pub const STRUCT: u32 = Kind::Struct as u32;
pub const UNION: u32 = Kind::Union as u32;
pub const ENUM: u32 = Kind::Enum as u32;
pub const FWD: u32 = Kind::Fwd as u32;
pub const TYPEDEF: u32 = Kind::Typedef as u32;
pub const VOLATILE: u32 = Kind::Volatile as u32;
pub const CONST: u32 = Kind::Const as u32;
pub const RESTRICT: u32 = Kind::Restrict as u32;
pub const FUNC: u32 = Kind::Func as u32;
pub const FUNC_PROTO: u32 = Kind::FuncProto as u32;
pub const VAR: u32 = Kind::Var as u32;
pub const DATASEC: u32 = Kind::Datasec as u32;
pub const FLOAT: u32 = Kind::Float as u32;
pub const DECL_TAG: u32 = Kind::DeclTag as u32;
pub const TYPE_TAG: u32 = Kind::TypeTag as u32;
pub const ENUM64: u32 = Kind::Enum64 as u32;

/// Trailing words of a record: `FIXED[kind] + PER_ENTRY[kind] * vlen`
/// (indexed by the info word's seven kind bits; unknown kinds have none
/// here: a record of one is sized by the blob's layout section).
const FIXED: [u8; 128] = {
    let mut t = [0u8; 128];
    t[INT as usize] = 1;
    t[VAR as usize] = 1;
    t[DECL_TAG as usize] = 1;
    t[ARRAY as usize] = 3;
    t
};
const PER_ENTRY: [u8; 128] = {
    let mut t = [0u8; 128];
    t[STRUCT as usize] = 3;
    t[UNION as usize] = 3;
    t[DATASEC as usize] = 3;
    t[ENUM64 as usize] = 3;
    t[ENUM as usize] = 2;
    t[FUNC_PROTO as usize] = 2;
    t
};

/// A record's info word: kind flag (bit 31), kind (bits 24-30), vlen
/// (bits 0-23), as BTF 2026 lays it out; a blob of the original format has
/// zeros in bits 16-23 and 29-30, so it reads the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info(pub u32);

#[allow(clippy::len_without_is_empty)] // a record is never empty
impl Info {
    #[inline(always)]
    pub const fn new(kind: Kind, kflag: bool, vlen: u32) -> Info {
        Info(((kflag as u32) << 31) | ((kind as u32) << 24) | (vlen & VLEN_LIMIT))
    }
    /// The raw kind number (compare with [`INT`] ... [`ENUM64`]).
    #[inline(always)]
    pub const fn kind(self) -> u32 {
        (self.0 >> 24) & KIND_LIMIT
    }
    #[inline(always)]
    pub const fn vlen(self) -> usize {
        (self.0 & VLEN_LIMIT) as usize
    }
    #[inline(always)]
    pub const fn kflag(self) -> bool {
        self.0 >> 31 != 0
    }
    /// The length in words of a record with this info word, common part
    /// included (for a kind this crate knows; see [`Layout`](super::Layout)
    /// for the others).
    #[inline(always)]
    pub const fn len(self) -> usize {
        let k = self.kind() as usize;
        3 + FIXED[k] as usize + PER_ENTRY[k] as usize * self.vlen()
    }
}

/// The info word of a record whose kind, kind flag and vlen are given.
#[inline]
pub fn make_info(kind: Kind, kflag: bool, vlen: u32) -> u32 {
    Info::new(kind, kflag, vlen).0
}

/// A record's words read in place (host order, the info word second): the
/// view the hot paths use, without a [`Kind`] conversion.
pub trait RawRecord {
    fn info(&self) -> Info;
    /// The raw kind number.
    #[inline(always)]
    fn kind(&self) -> u32 {
        self.info().kind()
    }
    #[inline(always)]
    fn vlen(&self) -> usize {
        self.info().vlen()
    }
    #[inline(always)]
    fn kflag(&self) -> bool {
        self.info().kflag()
    }
    /// The record's length in words, from its info word.
    #[inline(always)]
    fn rec_len(&self) -> usize {
        self.info().len()
    }
}

impl RawRecord for [u32] {
    #[inline(always)]
    fn info(&self) -> Info {
        Info(self[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_numbers_and_lengths_agree_with_the_enum() {
        for k in 0..=KIND_MAX {
            let kind = Kind::from_u8(k).expect("kind");
            assert_eq!(kind as u32, k as u32);
            for vlen in [0, 1, 5] {
                let info = Info::new(kind, true, vlen);
                assert_eq!(
                    (info.kind(), info.vlen(), info.kflag()),
                    (k as u32, vlen as usize, true)
                );
                let trailing = match kind {
                    Kind::Int | Kind::Var | Kind::DeclTag => 1,
                    Kind::Array => 3,
                    Kind::Struct | Kind::Union | Kind::Datasec | Kind::Enum64 => 3 * vlen,
                    Kind::Enum | Kind::FuncProto => 2 * vlen,
                    _ => 0,
                };
                assert_eq!(kind.trailing_words(vlen), trailing, "{kind:?}");
                assert_eq!(info.len(), 3 + trailing as usize);
            }
        }
    }
}
