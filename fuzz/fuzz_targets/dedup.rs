//! Dedup on any BTF the reader accepts, by the rules of either libbpf: an
//! error or a BTF that reads back,
//! the same whether or not dedup re-checks the ids the reader checked, and
//! whether the reference pass uses its own index or libbpf's candidate
//! table; and deduplicating that result again changes nothing (dedup is
//! idempotent on its own output).
#![no_main]

use btfkit::btf::{read, write};
use btfkit::dedup::{Options, Rules, dedup};
use btfkit::testing::dedup_through_table;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(b) = read::parse(data) else { return };
    if b.own_type_count() > 4096 {
        return;
    }
    for rules in [Rules::Libbpf374f7807, Rules::Libbpf1_8] {
        check(&b, Options { rules, ..Options::default() });
    }
});

fn check(b: &btfkit::btf::Btf, opts: Options) {
    let result = dedup(b, &opts);
    // `btfkit dedup` tells dedup the reader checked the ids: same answer,
    // never a panic (a FWD's size/type word once slipped through there)
    let trusted = Options { ids_checked: true, ..opts.clone() };
    assert_eq!(
        dedup(b, &trusted).map(|d| write::to_bytes(&d)),
        result.as_ref().map(write::to_bytes).map_err(Clone::clone),
        "trusting the reader's id checks changes the result"
    );
    assert_eq!(
        dedup_through_table(b, &opts).map(|d| write::to_bytes(&d)),
        result.as_ref().map(write::to_bytes).map_err(Clone::clone),
        "the reference index and the candidate table disagree"
    );
    if let Ok(d) = result {
        let bytes = write::to_bytes(&d);
        let again = read::parse(&bytes).expect("dedup output must be valid BTF");
        let d2 = dedup(&again, &opts).expect("dedup of dedup output");
        assert_eq!(write::to_bytes(&d2), bytes, "dedup is not idempotent");
    }
}
