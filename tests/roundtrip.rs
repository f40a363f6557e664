//! Every BTF file of the corpus (final and pre-dedup, all architectures,
//! modules over their base, the vmlinux, Debian's embedded .BTF) reads and
//! writes back to identical bytes, and `dump` of it equals bpftool's text
//! dump where the corpus has one.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use btfkit::btf::{Btf, dump, read, write};
use btfkit::testing::corpus::Corpus;
use rayon::prelude::*;

/// expected file → base file, from the manifests (in-place .BTF sections are
/// split over the distilled .BTF.base written beside them).
fn bases(c: &Corpus) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for r in c.all_rows().expect("manifests") {
        // The distilled .BTF.base is standalone BTF.
        if r.expected == "-" || r.mode == "inplace:.BTF.base" {
            continue;
        }
        let base = if r.mode == "inplace:.BTF" {
            r.expected.replace(".inplace.BTF", ".inplace.BTF.base")
        } else {
            r.base.clone()
        };
        if base != "-" {
            m.insert(r.expected.clone(), base);
        }
    }
    m
}

fn load(c: &Corpus, rel: &str, base: Option<Arc<Btf>>) -> (Vec<u8>, Btf) {
    let path = c.file(rel).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let b = read::parse_split(&bytes, base).unwrap_or_else(|e| panic!("{rel}: {e}"));
    (bytes, b)
}

#[test]
fn corpus_round_trip_and_dump() {
    crate::needs_corpus!();
    let c = Corpus::open_default();
    assert!(
        c.exists(),
        "corpus not found at {} (set BTFKIT_CORPUS)",
        c.dir.display()
    );
    let bases = bases(&c);
    let mut files = c.expected_files(".btf");
    files.extend(c.expected_files(".inplace.BTF"));
    files.extend(c.expected_files(".inplace.BTF.base"));
    assert!(files.len() > 1000, "only {} BTF files found", files.len());
    // Bases are loaded once and shared.
    let base_cache: HashMap<String, Arc<Btf>> = bases
        .values()
        .collect::<std::collections::BTreeSet<_>>()
        .into_par_iter()
        .map(|b| (b.clone(), Arc::new(load(&c, b, None).1)))
        .collect();
    let dumps_checked: usize = files
        .par_iter()
        .map(|rel| {
            let base = bases.get(rel).map(|b| base_cache[b].clone());
            let (bytes, btf) = load(&c, rel, base);
            assert!(write::to_bytes(&btf) == bytes, "{rel}: round trip changed the bytes");
            let txt = rel.replace(".btf", ".txt");
            let txt = if rel.ends_with(".inplace.BTF") {
                format!("{rel}.txt")
            } else {
                txt
            };
            let has_txt = c.dir.join(&txt).exists() || c.dir.join(format!("{txt}.zst")).exists();
            if has_txt && txt != *rel {
                let want = std::fs::read_to_string(c.file(&txt).unwrap()).unwrap();
                let got = dump::raw_string(&btf);
                if got != want {
                    let (n, (g, w)) = got
                        .lines()
                        .zip(want.lines())
                        .enumerate()
                        .find(|(_, (g, w))| g != w)
                        .unwrap_or((0, ("<length>", "<length>")));
                    panic!(
                        "{rel}: dump differs from {txt} at line {}: ours `{g}` bpftool `{w}`",
                        n + 1
                    );
                }
                1
            } else {
                0
            }
        })
        .sum();
    eprintln!("{} files round-tripped, {} dumps compared", files.len(), dumps_checked);
    // Every text dump in the corpus (398 files) is compared.
    let txts = c.expected_files(".txt").len();
    assert_eq!(dumps_checked, txts, "some text dumps have no BTF beside them");
}
