//! Dedup of the reference's pre-dedup output (`expected-prededup`, variant
//! `full`) must give the reference's final bytes (`expected/`): fixtures,
//! modules (split over the final vmlinux BTF of their profile) and the vmlinux.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use btfkit::btf::{Btf, read, write};
use btfkit::dedup::{Options, dedup};
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
            expected: finals.get(&r["case_id"]).unwrap_or_else(|| panic!("{}: no final row", r["case_id"])).clone(),
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
    let all: Vec<Case> = cases().into_iter().filter(|c| !c.id.starts_with("vmlinux/")).collect();
    assert!(all.len() >= 389, "only {} rows", all.len());
    let mut bases: HashMap<String, Arc<Btf>> = HashMap::new();
    for c in &all {
        if let Some(b) = &c.base {
            bases.entry(b.clone()).or_insert_with(|| Arc::new(read::parse(&common::read_corpus(b)).expect("base")));
        }
    }
    let fails: Vec<String> =
        all.par_iter().filter_map(|c| check(c, c.base.as_ref().map(|b| bases[b].clone())).err()).collect();
    assert!(fails.is_empty(), "{} of {} cases differ:\n{}", fails.len(), all.len(), fails.join("\n"));
}

#[test]
fn vmlinux_matches_reference() {
    let c = cases().into_iter().find(|c| c.id == "vmlinux/kernel").expect("vmlinux/kernel row");
    assert_eq!(c.base, None);
    check(&c, None).unwrap();
}
