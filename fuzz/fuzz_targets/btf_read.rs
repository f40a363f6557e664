//! The BTF reader on arbitrary bytes: it must return an error or a model
//! that writes back to the same bytes (when the header is canonical) and
//! renders without panicking.
#![no_main]

use btfkit::btf::{dump, lint, read, write};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = read::parse(data) {
        let out = write::to_bytes(&b);
        let h = read::parse_header(data).unwrap();
        let canonical = h.hdr_len == 24 && h.type_off == 0 && h.str_off == h.type_len && data.len() == 24 + h.type_len as usize + h.str_len as usize;
        if canonical {
            assert_eq!(out, data);
        }
        let _ = dump::raw_string(&b);
        let _ = lint::kernel_warnings(&b);
    }
});
