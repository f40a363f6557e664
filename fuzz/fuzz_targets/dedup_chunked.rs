//! Dedup's first passes run chunk by chunk ([`Incremental`], as the encoder
//! runs them during its CU loop, offsets deferred so that structs are cut
//! down to stubs) against the whole-BTF dedup, on any standalone BTF the
//! reader accepts, chunked every 1–8 types (the first input byte, whose
//! bit 3 picks libbpf 1.8's rules instead of 374f7807's): the same
//! bytes or the same error; or, when the passes gave up after stubbing,
//! an error from `finish` (the encoder then encodes again), never a
//! different result and never a panic. Inputs that refer across chunks
//! make walks reach stubs: that must be caught, not read.
#![no_main]

use btfkit::btf::{Btf, TypeId, read, write};
use btfkit::dedup::{Incremental, Options, Rules, StringMode, dedup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else { return };
    let Ok(btf) = read::parse(rest) else { return };
    let n = btf.own_type_count();
    if n > 4096 {
        return;
    }
    // the encoder's string section, interned in order
    let mut b = Btf::new(btf.endian());
    for s in btf.raw_strings().split(|&c| c == 0).skip(1) {
        b.add_str(s);
    }
    if b.raw_strings() != btf.raw_strings() {
        return;
    }
    let rules = if seed & 8 != 0 { Rules::Libbpf1_8 } else { Rules::Libbpf374f7807 };
    let keep = Options { strings: StringMode::Keep, rules, ..Options::default() };
    let whole = dedup(&btf, &keep).map(|d| write::to_bytes(&d)).map_err(|e| e.to_string());
    b.defer_offsets();
    let mut inc = Incremental::new().with_rules(rules);
    let step = 1 + u32::from(seed % 8);
    for id in 1..=n {
        b.push_words(btf.ty(TypeId::new(id)).words);
        if id % step == 0 {
            inc.feed(&mut b);
        }
    }
    let (gave_up, stubbed) = (inc.gave_up().is_some(), inc.stubbed());
    let chunked = inc.finish(b, &keep).map(|d| write::to_bytes(&d)).map_err(|e| e.to_string());
    if gave_up && stubbed {
        assert!(chunked.is_err(), "finish went on after giving up with stubbed records");
    } else {
        assert_eq!(chunked, whole, "chunked and whole dedup differ (gave up: {gave_up}, stubbed: {stubbed})");
    }
});
