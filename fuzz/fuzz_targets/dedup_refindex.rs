//! The reference pass's own index against libbpf's candidate table, on any
//! BTF the reader accepts: the same error or the same bytes.
#![no_main]

use btfkit::btf::{read, write};
use btfkit::dedup::{Options, dedup, dedup_through_table};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(b) = read::parse(data) else { return };
    if b.own_type_count() > 4096 {
        return;
    }
    let opts = Options::default();
    let index = dedup(&b, &opts).map(|d| write::to_bytes(&d));
    let table = dedup_through_table(&b, &opts).map(|d| write::to_bytes(&d));
    assert_eq!(index, table, "the reference index and the candidate table disagree");
});
