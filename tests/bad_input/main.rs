//! Bad input, one binary: damaged ELF, DWARF, compressed sections and BTF
//! end with one clear error (exit 2), never a panic, a hang or a half-written
//! output; where the BTF format cannot hold an input, btfkit does what its
//! `format_limits` module says.

#[path = "../common/mod.rs"]
mod common;

mod corrupt_no_panic;
mod damaged;
mod format_limits;
mod matrix;
mod sections;
