//! The kernel as judge (`bpf(BPF_BTF_LOAD)`, needs root), one binary: of the
//! reference's own files and of what btfkit writes.

#[path = "../common/mod.rs"]
mod common;

mod outputs;
mod reference;
