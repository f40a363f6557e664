//! btfkit: DWARF → BTF encoding, deduplication and inspection.
//!
//! Phases (see ARCHITECTURE.md): `elf` → `dwarf` → `encode` → `dedup` →
//! `btf` (model, reader, writer). `cli` sits on top and is the only place
//! that knows about command lines and exit codes.

pub mod btf;
pub mod corpus;
pub mod dedup;
pub mod diff;
pub mod elf;
pub mod error;
pub mod funcs;
pub mod heap;
pub mod output;
pub mod verify;

pub use error::Error;
pub mod dwarf;
pub mod encode;
