//! Whole-file timings of the BTF reader, writer and raw dump on the corpus
//! vmlinux BTF (final, 107 k types) and, if present, the pre-dedup one
//! (4.35 M types). Run: `cargo bench --bench btf_io`. Prints the median of
//! several runs; no external harness so it runs offline and fast.

use std::time::{Duration, Instant};

use btfkit::btf::{dump, read, write};
use btfkit::testing::corpus::Corpus;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let c = Corpus::open_default();
    for (rel, runs) in [
        ("expected/kernel/vmlinux.kernel.btf", 9),
        ("expected-prededup/kernel/vmlinux.kernel.btf", 3),
    ] {
        let path = match c.file(rel) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("skipping {rel}: {e}");
                continue;
            }
        };
        let bytes = std::fs::read(&path).unwrap();
        let btf = read::parse(&bytes).unwrap();
        let parse = time(runs, || read::parse(&bytes).unwrap());
        let wr = time(runs, || write::to_bytes(&btf));
        let dm = time(runs.min(3), || dump::raw_string(&btf).len());
        println!(
            "{rel}: {} types, {} bytes: parse {:.1} ms, write {:.1} ms, raw dump {:.1} ms",
            btf.own_type_count(),
            bytes.len(),
            parse.as_secs_f64() * 1e3,
            wr.as_secs_f64() * 1e3,
            dm.as_secs_f64() * 1e3
        );
    }
}
