//! Dedup of the reference's pre-dedup output (`expected-prededup`, variant
//! `full`) must give the reference's final bytes (`expected/`): fixtures,
//! modules (split over the final vmlinux BTF of their profile) and the vmlinux.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use btfkit::btf::{Btf, Kind, TypeId, read, write};
use btfkit::dedup::{Incremental, Options, dedup};
use rayon::prelude::*;

struct Case {
    id: String,
    input: String,
    base: Option<String>,
    expected: String,
}

fn cases() -> Vec<Case> {
    let dir = common::corpus_dir();
    let finals: HashMap<String, String> = common::read_manifest(&dir.join("manifest.tsv"))
        .into_iter()
        .filter(|r| r["mode"] == "detached" && r["expected"] != "-")
        .map(|r| (r["case_id"].clone(), r["expected"].clone()))
        .collect();
    common::read_manifest(&dir.join("expected-prededup/manifest.tsv"))
        .into_iter()
        .filter(|r| r["variant"] == "full")
        .map(|r| Case {
            expected: finals
                .get(&r["case_id"])
                .unwrap_or_else(|| panic!("{}: no final row", r["case_id"]))
                .clone(),
            id: r["case_id"].clone(),
            input: r["expected"].clone(),
            base: (r["base"] != "-").then(|| r["base"].clone()),
        })
        .collect()
}

fn check(c: &Case, base: Option<Arc<Btf>>) -> Result<(), String> {
    let input = common::read_corpus(&c.input);
    let btf = read::parse_split(&input, base).map_err(|e| format!("{}: {}: {e}", c.id, c.input))?;
    let out = dedup(&btf, &Options::default()).map_err(|e| format!("{}: {e}", c.id))?;
    let got = write::to_bytes(&out);
    let want = common::read_corpus(&c.expected);
    if got != want {
        return Err(format!(
            "{}: differs from {} ({} types, expected bytes {} vs ours {})",
            c.id,
            c.expected,
            out.own_type_count(),
            want.len(),
            got.len()
        ));
    }
    Ok(())
}

#[test]
fn fixtures_and_modules_match_reference() {
    crate::needs_corpus!();
    let all: Vec<Case> = cases().into_iter().filter(|c| !c.id.starts_with("vmlinux/")).collect();
    assert!(all.len() >= 389, "only {} rows", all.len());
    let mut bases: HashMap<String, Arc<Btf>> = HashMap::new();
    for c in &all {
        if let Some(b) = &c.base {
            bases
                .entry(b.clone())
                .or_insert_with(|| Arc::new(read::parse(&common::read_corpus(b)).expect("base")));
        }
    }
    let fails: Vec<String> = all
        .par_iter()
        .filter_map(|c| check(c, c.base.as_ref().map(|b| bases[b].clone())).err())
        .collect();
    assert!(
        fails.is_empty(),
        "{} of {} cases differ:\n{}",
        fails.len(),
        all.len(),
        fails.join("\n")
    );
}

#[test]
fn vmlinux_matches_reference() {
    crate::needs_corpus!();
    let c = cases()
        .into_iter()
        .find(|c| c.id == "vmlinux/kernel")
        .expect("vmlinux/kernel row");
    assert_eq!(c.base, None);
    check(&c, None).unwrap();
}

/// The reference's pre-dedup BTF appended in chunks, with dedup's first
/// passes run after each ([`Incremental`], as the encoder does after each
/// chunk of CUs), must dedup to the same bytes as the whole BTF at once.
/// Chunks end where no type so far refers past the chunk (as CUs do):
/// at every such place, and at every `step`th. With `stub`, the records
/// are appended with offsets deferred, as the encoder does, so the passes
/// stub the structs they will not compare again, and chunks end only where
/// no later type refers back into them either (CU boundaries: the
/// encoder's chunks are whole CUs), up to the function phase's types,
/// which refer anywhere and go in the last chunk. A run that gives up
/// after stubbing counts as given up (the encoder would encode again) and
/// its result is not compared.
fn chunked_matches_whole(c: &Case, steps: &[usize], stub: bool) -> Result<usize, String> {
    let input = common::read_corpus(&c.input);
    let btf = read::parse(&input).map_err(|e| format!("{}: {e}", c.input))?;
    let whole = write::to_bytes(&dedup(&btf, &Options::default()).map_err(|e| format!("{}: {e}", c.id))?);
    let n = btf.own_type_count();
    // the first FUNC: the reference's CUs emit none, its function phase
    // starts with one
    let tail = (1..=n)
        .find(|&id| btf.ty(TypeId::new(id)).kind() == Kind::Func)
        .unwrap_or(n + 1);
    // the lowest id referred to from each type on, before the tail
    let mut min_after = vec![u32::MAX; n as usize + 2];
    if stub {
        for id in (1..tail).rev() {
            let mut m = min_after[id as usize + 1];
            Btf::for_each_type_ref(btf.ty(TypeId::new(id)).words, |t| {
                if t != 0 {
                    m = m.min(t)
                }
            });
            min_after[id as usize] = m;
        }
    }
    // where each type ends and the highest id referred to so far
    let mut cuts = Vec::new();
    let mut max_ref = 0;
    for id in 1..=n {
        Btf::for_each_type_ref(btf.ty(TypeId::new(id)).words, |t| max_ref = max_ref.max(t));
        if max_ref <= id && (!stub || (id < tail && min_after[id as usize + 1] > id)) {
            cuts.push(id);
        }
    }
    let mut gave_up = 0;
    for &step in steps {
        let mut b = Btf::new(btf.endian());
        // the same string section: interned in order, as the reference's was
        for s in btf.raw_strings().split(|&c| c == 0).skip(1) {
            b.add_str(s);
        }
        if b.raw_strings() != btf.raw_strings() {
            return Err(format!("{}: string section not rebuilt", c.id));
        }
        if stub {
            b.defer_offsets();
        }
        let mut inc = Incremental::new();
        let mut next = 1;
        for &cut in cuts.iter().skip(step - 1).step_by(step).chain(std::iter::once(&n)) {
            for id in next..=cut {
                b.push_words(btf.ty(TypeId::new(id)).words);
            }
            next = cut + 1;
            inc.feed(&mut b);
        }
        gave_up += inc.gave_up().is_some() as usize;
        if inc.gave_up().is_some() && inc.stubbed() {
            if inc.finish(b, &Options::default()).is_ok() {
                return Err(format!(
                    "{}: dedup of stubbed records after giving up did not fail",
                    c.id
                ));
            }
            continue;
        }
        let out = inc
            .finish(b, &Options::default())
            .map_err(|e| format!("{}: {e}", c.id))?;
        if write::to_bytes(&out) != whole {
            return Err(format!(
                "{}: chunks ending every {step} reference-closed places: differs",
                c.id
            ));
        }
    }
    Ok(gave_up)
}

#[test]
fn chunked_first_passes_match_whole_dedup_on_fixtures() {
    crate::needs_corpus!();
    let all: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.base.is_none() && !c.id.starts_with("vmlinux/"))
        .collect();
    assert!(all.len() >= 100, "only {} rows", all.len());
    for stub in [false, true] {
        let res: Vec<Result<usize, String>> = all
            .par_iter()
            .map(|c| chunked_matches_whole(c, &[1, 3, 50], stub))
            .collect();
        let fails: Vec<&String> = res.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(
            fails.is_empty(),
            "{} of {} cases differ:\n{:?}",
            fails.len(),
            all.len(),
            fails
        );
        // most of them run through the chunked passes to the end
        let gave_up: usize = res.iter().map(|r| *r.as_ref().unwrap()).sum();
        eprintln!(
            "stubbing {stub}: chunked passes gave up in {gave_up} of {} runs",
            3 * all.len()
        );
        assert!(
            gave_up * 10 < 3 * all.len(),
            "gave up in {gave_up} of {} runs",
            3 * all.len()
        );
    }
}

#[test]
fn chunked_first_passes_match_whole_dedup_on_vmlinux() {
    crate::needs_corpus!();
    let c = cases()
        .into_iter()
        .find(|c| c.id == "vmlinux/kernel")
        .expect("vmlinux/kernel row");
    // about one chunk per 32 CUs, as at -j2
    for stub in [false, true] {
        let gave_up = chunked_matches_whole(&c, &[100], stub).unwrap();
        assert_eq!(
            gave_up, 0,
            "the chunked passes gave up on the vmlinux (stubbing {stub})"
        );
    }
}
