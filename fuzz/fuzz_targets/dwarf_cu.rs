//! DWARF decode and per-CU encode of the DWARF sections of one compile unit,
//! without an ELF around them: an error, never a panic, and any BTF produced
//! reads back.
//!
//! Input: `btfkit::testing::fuzz_input` (a flags byte, the section lengths,
//! the section bytes). Keeping the ELF out of the input means mutations land
//! in the DWARF, not in section headers that would stop the file before the
//! decoder sees it.
#![no_main]

use btfkit::testing::fuzz_input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzz_input::check(data);
});
