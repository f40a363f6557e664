//! The `next` reference (tests/next/): pahole at dwarves 1436daf with
//! libbpf v1.8.0, recorded as sha256 hashes by tests/next/record.py over
//! every corpus case (the same arguments), the corpus's kernel-profile
//! cases with `layout` or `true_signature` added, and the optimised
//! objects in tests/next/bin.
//!
//! `btfkit pahole` follows that reference under
//! `BTFKIT_PAHOLE_REFERENCE=next`. Every case in tests/next/floor.tsv must
//! stay byte-identical; the others are counted and listed (the floor only
//! grows: `BTFKIT_NEXT_UPDATE_FLOOR=1` adds the cases that pass).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use common::*;

fn floor_path() -> PathBuf {
    crate_dir().join("tests/next/floor.tsv")
}

fn read_floor() -> BTreeSet<String> {
    std::fs::read_to_string(floor_path())
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn input_path(rel: &str) -> PathBuf {
    if rel.starts_with("tests/") {
        crate_dir().join(rel)
    } else {
        corpus_file(rel)
    }
}

/// Runs one manifest row through `btfkit pahole`: the sha256 of what it
/// wrote ("-" for nothing) and its exit code.
fn replay(row: &HashMap<String, String>, dir: &std::path::Path) -> (String, i32) {
    let safe = row["case_id"].replace('/', "__");
    let out = dir.join(format!("{safe}.btf"));
    let _ = std::fs::remove_file(&out);
    let mut input = input_path(&row["input"]);
    let section = row["mode"].strip_prefix("inplace:");
    if section.is_some() {
        let copy = dir.join(format!("{safe}.in"));
        std::fs::copy(&input, &copy).unwrap();
        input = copy;
    }
    let base = (row["base"] != "-").then(|| s(&corpus_file(&row["base"])));
    let args: Vec<String> = row["args"]
        .split(' ')
        .map(|a| {
            a.replace("{input}", &s(&input))
                .replace("{output}", &s(&out))
                .replace("{base}", base.as_deref().unwrap_or(""))
        })
        .collect();
    let o = btfkit()
        .arg("pahole")
        .args(&args)
        .env("BTFKIT_PAHOLE_REFERENCE", "next")
        .output()
        .unwrap();
    if let Some(name) = section {
        let data = std::fs::read(&input).unwrap();
        let (off, size, _) = section_range(&data, name);
        std::fs::write(&out, &data[off..off + size]).unwrap();
        std::fs::remove_file(&input).unwrap();
    }
    // The same bytes by the slow path are a regression too: the chunked
    // dedup must not stop on an error (a stub mistaken for a union's FWD
    // once made every vmlinux encode twice, with the same output). It may
    // stop by design, e.g. on the `all` profile's DATASEC of 70 K words.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains("dedup during the CU loop stopped (an error"),
        "{}: the chunked dedup gave up:\n{stderr}",
        row["case_id"]
    );
    let got = match std::fs::metadata(&out) {
        Ok(m) if m.len() > 0 => sha256_hex(&out),
        _ => "-".to_string(),
    };
    let _ = std::fs::remove_file(&out);
    (got, o.status.code().unwrap_or(-1))
}

#[test]
fn next_reference_cases_stay_identical() {
    needs_corpus!();
    let rows = read_manifest(&crate_dir().join("tests/next/manifest.tsv"));
    let floor = read_floor();
    let ids: BTreeSet<&str> = rows.iter().map(|r| r["case_id"].as_str()).collect();
    for f in &floor {
        assert!(
            ids.contains(f.as_str()),
            "floor case {f} is not in tests/next/manifest.tsv"
        );
    }
    let dir = scratch("next-profile");
    let (mut regressed, mut passing, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let (got, code) = replay(row, &dir);
        let want = &row["expected_sha256"];
        // No output is no output whatever the exit code: the reference says
        // "Error while encoding BTF." and exits 0 where btfkit refuses the
        // input with exit 2 (and it crashed on some inputs, exit 139, where
        // btfkit writes BTF: those rows are not comparable).
        let same = got == *want;
        let id = row["case_id"].clone();
        if same {
            passing.push(id);
        } else if floor.contains(&id) {
            regressed.push(format!("{id}: got {got} (exit {code}), want {want}"));
        } else {
            other.push(id);
        }
    }
    if std::env::var_os("BTFKIT_NEXT_UPDATE_FLOOR").is_some() {
        let mut all = floor.clone();
        all.extend(passing.iter().cloned());
        let mut text = String::from(
            "# Cases of tests/next/manifest.tsv that must stay byte-identical to the next reference.\n\
             # Grown by BTFKIT_NEXT_UPDATE_FLOOR=1 cargo test --release --test next_profile; never remove a line.\n",
        );
        for id in &all {
            text.push_str(id);
            text.push('\n');
        }
        std::fs::write(floor_path(), text).unwrap();
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "next reference: {} of {} cases identical, {} in the floor; not yet: {}",
        passing.len(),
        rows.len(),
        floor.len(),
        other.len()
    );
    assert!(regressed.is_empty(), "floor cases regressed:\n{}", regressed.join("\n"));
}
