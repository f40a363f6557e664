//! The command line's contract: exit codes (0 ok, 1 negative answer, 2 error),
//! one-line errors naming the file, and no panic on damaged input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::run as btfkit;

fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn fixture(rel: &str) -> PathBuf {
    crate::common::corpus_file(rel)
}

/// Asserts exit 2 and a single stderr line that mentions `path` and `what`.
fn assert_error(out: &Output, path: &Path, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    assert!(err.contains(&*path.to_string_lossy()), "no file name in: {err}");
    assert!(err.contains(what), "expected `{what}` in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn missing_file() {
    let p = tmp("does-not-exist.btf");
    assert_error(&btfkit(&["dump", p.to_str().unwrap()]), &p, "No such file");
}

#[test]
fn not_btf_nor_elf() {
    let p = tmp("text.btf");
    std::fs::write(&p, b"hello world, this is not BTF").unwrap();
    assert_error(&btfkit(&["stats", p.to_str().unwrap()]), &p, "neither raw BTF");
}

#[test]
fn truncated_btf_at_every_offset_class() {
    let src = std::fs::read(fixture("expected/fixtures/structs_unions.gcc-O2.kernel.btf")).unwrap();
    let p = tmp("truncated.btf");
    for n in [0usize, 1, 2, 10, 23, 24, 30, 100, src.len() / 2, src.len() - 1] {
        std::fs::write(&p, &src[..n]).unwrap();
        let out = btfkit(&["dump", p.to_str().unwrap()]);
        let what = if n < 2 { "neither raw BTF" } else { "invalid BTF" };
        assert_error(&out, &p, what);
    }
}

#[test]
fn elf_without_btf_section() {
    let p = fixture("fixtures/bin/ints.gcc-O2.o");
    assert_error(&btfkit(&["dump", p.to_str().unwrap()]), &p, "no .BTF section");
}

#[test]
fn elf_with_btf_section_is_read() {
    crate::needs_corpus!();
    let p = fixture("kernel/modules/crc7.ko");
    let out = btfkit(&[
        "stats",
        "--json",
        p.to_str().unwrap(),
        "--base",
        fixture("kernel/vmlinux-6.12.117+deb12-cloud-amd64").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["types"].as_u64().unwrap() > 0);
}

#[test]
fn usage_error_is_exit_2() {
    let out = btfkit(&["dump"]);
    assert_eq!(out.status.code(), Some(2));
    let out = btfkit(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
    let out = btfkit(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn stats_counts_match_dump() {
    let p = fixture("expected/fixtures/multi_types.gcc-O2.ld-r.kernel.btf");
    let out = btfkit(&["stats", "--json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dump = btfkit(&["dump", p.to_str().unwrap()]);
    let text = String::from_utf8(dump.stdout).unwrap();
    let types = text.lines().filter(|l| l.starts_with('[')).count() as u64;
    assert_eq!(v["types"].as_u64().unwrap(), types);
    let structs = text.lines().filter(|l| l.contains("] STRUCT ")).count() as u64;
    assert_eq!(v["kinds"]["STRUCT"]["count"].as_u64().unwrap(), structs);
    let len = std::fs::metadata(&p).unwrap().len();
    assert_eq!(v["total_bytes"].as_u64().unwrap(), len);
}

#[test]
fn dump_json_is_json_with_every_type() {
    let p = fixture("expected/fixtures/btf_tags.clang-O2.all.btf");
    let out = btfkit(&["dump", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let types = v["types"].as_array().unwrap();
    assert_eq!(types.len(), 45);
    assert_eq!(types[0]["kind"], "TYPE_TAG");
    assert_eq!(types[0]["name"], "tag1");
}

#[test]
fn stats_warnings_name_what_the_kernel_refuses() {
    crate::needs_corpus!();
    // kernel-rejects.tsv: this file is refused for `_vptr$Shape ... Invalid name`.
    let p = fixture("expected/fixtures/cxx_basics.clang++-O2.kernel.btf");
    let out = btfkit(&["stats", "--warnings", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("member '_vptr$Shape' has an invalid name"), "{text}");
    // and a file the kernel accepts has none
    let p = fixture("expected/fixtures/structs_unions.gcc-O2.kernel.btf");
    let text = String::from_utf8(btfkit(&["stats", "--warnings", p.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("0 kernel-rule warnings"), "{text}");
    // --deny-warnings makes them a CI gate: 1 with warnings, 0 without
    let deny = |rel: &str| {
        btfkit(&["stats", "--warnings", "--deny-warnings", fixture(rel).to_str().unwrap()])
            .status
            .code()
    };
    assert_eq!(deny("expected/fixtures/structs_unions.gcc-O2.kernel.btf"), Some(0));
    assert_eq!(deny("expected/fixtures/structs_unions.gcc-O2-tu.kernel.btf"), Some(1));
}

#[test]
fn encode_stats_json_reports_phases_counts_and_memory() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/data/multi_types.gcc-O2.ld-r.o");
    let out = btfkit(&["encode", sample, "--stats", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stderr).expect("--stats --json prints one JSON object on stderr");
    let phases: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["open", "cu_loop", "functions", "dedup"]);
    // the CU loop's CPU by kind of work: decode and per-CU encode run on
    // the workers, summed over them; they cannot exceed the process's
    let lp = &v["phases"][1];
    let part = |k: &str| {
        lp["cpu_parts"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("cpu_parts.{k} in {lp}"))
    };
    let parts = ["decode_cpu_s", "encode_cpu_s", "merge_cpu_s", "dedup_cpu_s"].map(part);
    assert!(
        parts[0] > 0.0 && parts[1] > 0.0,
        "the sample is decoded and encoded: {lp}"
    );
    assert!(
        parts.iter().sum::<f64>() <= lp["cpu_s"].as_f64().unwrap() + 0.005,
        "{lp}"
    );
    assert_eq!(v["counts"]["cus"], 11);
    // every CU has a root DIE and the sample's have types and functions
    assert!(v["counts"]["dies"].as_u64().unwrap() > 11 * 10, "{}", v["counts"]);
    // some DIEs read in full (every root, the types), some passed over (a
    // function's lexical blocks and locals are never read)
    let read = v["counts"]["dies_read_in_full"].as_u64().unwrap();
    assert!(
        read >= 11 && read < v["counts"]["dies"].as_u64().unwrap(),
        "{}",
        v["counts"]
    );
    assert!(v["counts"]["types_before_dedup"].as_u64().unwrap() > v["counts"]["types_after_dedup"].as_u64().unwrap());
    // dedup's first passes ran during the CU loop (the default from -j2),
    // or not (-j1)
    let overlapped = |j: &str| {
        let out = btfkit(&["encode", sample, "--stats", "--json", j]);
        let v: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
        v["counts"]["dedup_during_cu_loop"].as_u64().unwrap()
    };
    assert_eq!((overlapped("-j2"), overlapped("-j1")), (1, 0));
    // an `ld -r` object: its inputs' .debug_str end to end, each string
    // once per input, is not cached by offset (a linked file's is:
    // tests/real_world.rs)
    assert_eq!(v["counts"]["debug_str_cached"], 0);
    assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(v["peak_heap_bytes"].as_u64().unwrap() > 0);
    // the run's peak is the largest of the phases' peaks
    let per_phase: Vec<u64> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["peak_heap_bytes"].as_u64().unwrap())
        .collect();
    assert!(per_phase.iter().all(|&h| h > 0), "{per_phase:?}");
    assert_eq!(per_phase.iter().max(), v["peak_heap_bytes"].as_u64().as_ref());
    // Batch mode: per-module figures and totals (here two failures, exit 2).
    let out = btfkit(&["encode", "--stats", "--json", "--out-dir", "/tmp", "a.ko", "b.ko"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let json = &err[err.find("{\n").expect("a JSON object on stderr")..];
    let json = &json[..=json.rfind('}').unwrap()];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["totals"]["failed"], 2);
    assert_eq!(v["modules"][0]["ok"], false);
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/data/multi_types.gcc-O2.ld-r.o");
    let dir = std::env::temp_dir().join(format!("btfkit-batch-stats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = btfkit(&[
        "encode",
        "--stats",
        "--json",
        "-q",
        "--out-dir",
        dir.to_str().unwrap(),
        sample,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(
        (v["totals"]["encoded"].as_u64(), v["modules"][0]["types"].as_u64()),
        (Some(1), Some(257))
    );
    assert!(v["modules"][0]["cpu_s"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that stops early (`btfkit dump X | head -1`) ends btfkit
/// quietly with 0, as for any Unix filter, not with a panic.
#[test]
fn closed_pipe_is_not_a_panic() {
    crate::needs_corpus!();
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let input = fixture("expected/kernel/vmlinux.kernel.btf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .args(["dump", &input.to_string_lossy()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("[1] "), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // EPIPE ends the run quietly with 0 (a reader that stopped is no error).
    assert_eq!(
        (out.status.signal(), out.status.code()),
        (None, Some(0)),
        "status {:?}, stderr: {err}",
        out.status
    );
}
