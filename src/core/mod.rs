//! CO-RE: will a BPF program's relocations resolve on a given kernel?
//!
//! A CO-RE object (`clang -target bpf -g` against a `vmlinux.h`) carries in
//! `.BTF.ext` one record per instruction whose value depends on a kernel
//! type: a field's offset, size or existence, a type's id or size, an
//! enumerator's value. libbpf resolves them at load time against the
//! running kernel's BTF; this module does the same offline, against any
//! kernel's BTF, with libbpf 1.1's rules (docs/core-relocation-rules.md).
//!
//! The layers, each a file:
//! - [`object`] reads the BPF ELF (programs, BTF) and [`ext`] its
//!   `.BTF.ext`;
//! - [`target`] holds a kernel (vmlinux and module BTF) with its types
//!   indexed by essential name once, for every object checked against it;
//! - [`spec`] parses access strings and walks them through candidate types,
//!   [`compat`] holds the three type-compatibility rules, [`types`] the BTF
//!   helpers they share;
//! - [`relocate`] runs one object against one kernel in libbpf's order,
//!   with its candidate cache (pruned per local type, so results depend on
//!   relocation order exactly as libbpf's do), and patches a copy of the
//!   instructions;
//! - [`reach`] decides whether a poisoned instruction matters: libbpf
//!   poisons the instructions of a relocation that found no target, and
//!   the program still loads if the verifier proves them dead, which is
//!   what a `bpf_core_field_exists()` guard is for;
//! - [`check`] turns that into a verdict per program and the summaries the
//!   command line prints; [`log`] reproduces libbpf's log lines, which is
//!   how the tests compare the engine with libbpf itself.
//!
//! Where libbpf 1.1 does something no later libbpf does (reads outside a
//! struct for a negative access index, ignores a damaged `.BTF.ext`), this
//! refuses instead: a checker must not guess.

pub mod check;
pub mod compat;
pub mod ext;
pub mod kernels;
pub mod log;
pub mod matrix;
pub mod min;
pub mod min_archive;
pub mod object;
pub mod reach;
pub mod relocate;
pub mod shards;
pub mod spec;
pub mod target;
pub mod types;

pub use check::{ObjectVerdict, ProgramVerdict, Verdict, check};
pub use log::Log;
pub use object::{BpfObject, ObjectError};
pub use relocate::{Outcome, Relocated, relocate};
pub use target::Target;

/// The relocation kinds (`enum bpf_core_relo_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReloKind {
    FieldByteOffset,
    FieldByteSize,
    FieldExists,
    FieldSigned,
    FieldLshiftU64,
    FieldRshiftU64,
    TypeIdLocal,
    TypeIdTarget,
    TypeExists,
    TypeSize,
    EnumvalExists,
    EnumvalValue,
    TypeMatches,
}

impl ReloKind {
    pub fn from_raw(k: u32) -> Option<ReloKind> {
        use ReloKind::*;
        Some(match k {
            0 => FieldByteOffset,
            1 => FieldByteSize,
            2 => FieldExists,
            3 => FieldSigned,
            4 => FieldLshiftU64,
            5 => FieldRshiftU64,
            6 => TypeIdLocal,
            7 => TypeIdTarget,
            8 => TypeExists,
            9 => TypeSize,
            10 => EnumvalExists,
            11 => EnumvalValue,
            12 => TypeMatches,
            _ => return None,
        })
    }

    /// The kind a [`ReloKind::log_name`] names.
    pub fn from_log_name(name: &str) -> Option<ReloKind> {
        (0..=12).filter_map(ReloKind::from_raw).find(|k| k.log_name() == name)
    }

    /// The short name libbpf's log uses.
    pub fn log_name(self) -> &'static str {
        use ReloKind::*;
        match self {
            FieldByteOffset => "byte_off",
            FieldByteSize => "byte_sz",
            FieldExists => "field_exists",
            FieldSigned => "signed",
            FieldLshiftU64 => "lshift_u64",
            FieldRshiftU64 => "rshift_u64",
            TypeIdLocal => "local_type_id",
            TypeIdTarget => "target_type_id",
            TypeExists => "type_exists",
            TypeSize => "type_size",
            EnumvalExists => "enumval_exists",
            EnumvalValue => "enumval_value",
            TypeMatches => "type_matches",
        }
    }

    pub fn is_field_based(self) -> bool {
        (self as u32) <= ReloKind::FieldRshiftU64 as u32
    }

    pub fn is_type_based(self) -> bool {
        matches!(
            self,
            ReloKind::TypeIdLocal
                | ReloKind::TypeIdTarget
                | ReloKind::TypeExists
                | ReloKind::TypeSize
                | ReloKind::TypeMatches
        )
    }

    pub fn is_enumval_based(self) -> bool {
        matches!(self, ReloKind::EnumvalExists | ReloKind::EnumvalValue)
    }

    /// Kinds whose answer on a kernel without the thing is 0, not a poison.
    pub fn is_existence(self) -> bool {
        matches!(
            self,
            ReloKind::FieldExists | ReloKind::TypeExists | ReloKind::EnumvalExists | ReloKind::TypeMatches
        )
    }
}
