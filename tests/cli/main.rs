//! The command line, one binary: the contract every subcommand keeps (exit
//! codes, one-line errors), the encode and pahole front ends, and `dedup`.

#[path = "../common/mod.rs"]
mod common;

mod checks;
mod contract;
mod core;
mod dedup;
mod encode;
mod first_hour;
