//! Dedup on any BTF the reader accepts: an error or a BTF that reads back,
//! and deduplicating that result again changes nothing (dedup is idempotent
//! on its own output).
#![no_main]

use btfkit::btf::{read, write};
use btfkit::dedup::{Options, dedup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(b) = read::parse(data) else { return };
    if b.own_type_count() > 4096 {
        return;
    }
    let opts = Options::default();
    if let Ok(d) = dedup(&b, &opts) {
        let bytes = write::to_bytes(&d);
        let again = read::parse(&bytes).expect("dedup output must be valid BTF");
        let d2 = dedup(&again, &opts).expect("dedup of dedup output");
        assert_eq!(write::to_bytes(&d2), bytes, "dedup is not idempotent");
    }
});
