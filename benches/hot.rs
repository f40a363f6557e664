//! Criterion micro-benchmarks of the hot loops: DIE decode, per-file encode,
//! libbpf's type signature hashes, dedup, string interning, BTF parse and
//! write. `cargo bench --bench hot` (add a filter, e.g. `-- dedup`, to run one
//! group).
//!
//! Inputs come from the conformance corpus when it is present (the btrfs
//! module, its pre-dedup BTF over the vmlinux BTF, the vmlinux BTF); the
//! sample shipped in `data/` stands in for each of them otherwise, so the
//! benchmarks also run on a fresh clone without the corpus.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

use btfkit::btf::{Btf, StrTab, read, write};
use btfkit::dedup;
use btfkit::dwarf::{self, DecodeOpts, Decoder};
use btfkit::elf::debug::ElfInfo;
use btfkit::encode::{self, Options};
use btfkit::testing::corpus::Corpus;

const SAMPLE_ELF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/multi_types.gcc-O2.ld-r.o");
const SAMPLE_BTF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sample.btf");

/// A corpus file if the corpus is there, else `fallback` (and says so once).
fn input(rel: &str, fallback: &str) -> PathBuf {
    let c = Corpus::open_default();
    match c.exists().then(|| c.file(rel)) {
        Some(Ok(p)) => p,
        _ => {
            eprintln!("hot: corpus file {rel} not available, using {fallback}");
            PathBuf::from(fallback)
        }
    }
}

fn label(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn dwarf_decode(c: &mut Criterion) {
    let path = input("kernel/modules/btrfs.ko", SAMPLE_ELF);
    let data = std::fs::read(&path).unwrap();
    let elf = ElfInfo::load(&path, &data).unwrap();
    let endian = match elf.endian() {
        btfkit::btf::Endian::Little => gimli::RunTimeEndian::Little,
        btfkit::btf::Endian::Big => gimli::RunTimeEndian::Big,
    };
    let dw = dwarf::dwarf(elf.debug(), endian);
    let headers = dwarf::unit_headers(&dw).unwrap();
    let decoder = Decoder {
        dwarf: &dw,
        opts: DecodeOpts {
            type_tag: true,
            decl_tag: true,
            regs: btfkit::dwarf::loc::RegParams::for_machine(elf.machine()),
            addrx_plus_offset: false,
            param_locations: false,
            gnu_annotations: false,
        },
        endian,
        type_units: None,
        space: Default::default(),
        imports: None,
    };
    let keep = |_: u16, _: &[u8]| true;
    let mut g = c.benchmark_group("dwarf_decode");
    g.throughput(Throughput::Bytes(elf.debug().info.len() as u64));
    g.bench_function(label(&path), |b| {
        b.iter(|| {
            let mut n = 0usize;
            for h in &headers {
                if let Some(cu) = decoder.decode(*h, &keep).unwrap() {
                    n += cu.slots().len();
                }
            }
            n
        })
    });
    g.finish();
}

fn encode_file(c: &mut Criterion) {
    let path = input("kernel/modules/btrfs.ko", SAMPLE_ELF);
    let opts = Options {
        jobs: 1,
        no_funcs: false,
        ..Default::default()
    };
    let mut g = c.benchmark_group("encode");
    g.bench_function(
        format!("{} -j1 (decode, encode, merge, functions)", label(&path)),
        |b| b.iter(|| encode::encode_file(&path, None, &opts).unwrap().btf.own_type_count()),
    );
    g.finish();
}

/// The pre-dedup module BTF over its base, or the sample as standalone BTF.
fn prededup() -> (String, Vec<u8>, Option<Arc<Btf>>) {
    let c = Corpus::open_default();
    let files = c.exists().then(|| {
        (
            c.file("expected-prededup/modules/btrfs.kernel.btf"),
            c.file("expected/kernel/vmlinux.kernel.btf"),
        )
    });
    match files {
        Some((Ok(split), Ok(base))) => {
            let base = read::parse(&std::fs::read(base).unwrap()).unwrap();
            (
                "btrfs pre-dedup over vmlinux".into(),
                std::fs::read(split).unwrap(),
                Some(Arc::new(base)),
            )
        }
        _ => {
            eprintln!("hot: corpus pre-dedup BTF not available, using {SAMPLE_BTF}");
            ("sample.btf".into(), std::fs::read(SAMPLE_BTF).unwrap(), None)
        }
    }
}

fn type_hashes_and_dedup(c: &mut Criterion) {
    let (name, bytes, base) = prededup();
    let btf = read::parse_split(&bytes, base).unwrap();
    let mut g = c.benchmark_group("dedup");
    g.throughput(Throughput::Elements(btf.own_type_count() as u64));
    g.bench_function(format!("signature hashes, {name}"), |b| {
        b.iter(|| btfkit::testing::signature_hashes(&btf).len())
    });
    let opts = dedup::Options {
        ids_checked: true,
        ..Default::default()
    };
    g.bench_function(format!("all passes, {name}"), |b| {
        b.iter(|| dedup::dedup(&btf, &opts).unwrap().own_type_count())
    });
    g.finish();
}

fn strings(c: &mut Criterion) {
    let path = input("expected/kernel/vmlinux.kernel.btf", SAMPLE_BTF);
    let btf = read::parse(&std::fs::read(&path).unwrap()).unwrap();
    let all: Vec<&[u8]> = btf.raw_strings().split(|&b| b == 0).filter(|s| !s.is_empty()).collect();
    let mut g = c.benchmark_group("strings");
    g.throughput(Throughput::Elements(all.len() as u64));
    g.bench_function(format!("intern every string of {}", label(&path)), |b| {
        b.iter_batched(
            StrTab::new_base,
            |mut t| {
                for s in &all {
                    t.intern(s);
                }
                t.len()
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn btf_io(c: &mut Criterion) {
    let path = input("expected/kernel/vmlinux.kernel.btf", SAMPLE_BTF);
    let bytes = std::fs::read(&path).unwrap();
    let btf = read::parse(&bytes).unwrap();
    let mut g = c.benchmark_group("btf_io");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function(format!("parse {}", label(&path)), |b| {
        b.iter(|| read::parse(&bytes).unwrap().own_type_count())
    });
    g.bench_function(format!("write {}", label(&path)), |b| {
        b.iter(|| write::to_bytes(&btf).len())
    });
    g.finish();
}

fn config() -> Criterion {
    // Short runs: the whole suite takes about a minute on two cores.
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = hot;
    config = config();
    targets = dwarf_decode, encode_file, type_hashes_and_dedup, strings, btf_io
}
criterion_main!(hot);
