//! `btfkit kernel` and `btfkit report`: a tree in one command equals the
//! reference's files (and `btfkit pahole` run input by input), a rerun
//! reuses what is done, a killed run leaves no partial output and resumes,
//! shards partition a list, and the report check catches what is missing.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

use btfkit::encode::features::KERNEL_BUILD_FEATURES as FEATURES;

/// Small corpus modules, and where a debug package puts them.
const MODULES: &[(&str, &str)] = &[
    ("crc7.ko", "kernel/lib/crc7.ko"),
    ("tcp_bbr.ko", "kernel/net/ipv4/tcp_bbr.ko"),
    ("zsmalloc.ko", "kernel/mm/zsmalloc.ko"),
    ("x_tables.ko", "kernel/net/netfilter/x_tables.ko"),
    ("fou.ko", "kernel/net/ipv4/fou.ko"),
    ("virtio_net.ko", "kernel/drivers/net/virtio_net.ko"),
];

fn link(target: &Path, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    // corpus paths may be relative to the crate
    std::os::unix::fs::symlink(std::fs::canonicalize(target).unwrap(), at).unwrap();
}

/// An unpacked debug package: `vmlinux` (a corpus file) as
/// usr/lib/debug/boot/vmlinux-6.12-t (and linked from
/// lib/modules/6.12-t/vmlinux) and `modules` under lib/modules.
fn debug_tree(root: &Path, vmlinux: &Path, modules: &[(&str, &str)]) {
    link(vmlinux, &root.join("usr/lib/debug/boot/vmlinux-6.12-t"));
    // as Debian's packages: the same vmlinux under lib/modules/<ver> too
    let again = root.join("usr/lib/debug/lib/modules/6.12-t/vmlinux");
    std::fs::create_dir_all(again.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("../../../boot/vmlinux-6.12-t", again).unwrap();
    for (m, at) in modules {
        link(
            &corpus_file(&format!("kernel/modules/{m}")),
            &root.join("usr/lib/debug/lib/modules/6.12-t").join(at),
        );
    }
}

/// A small stand-in for a vmlinux: a fixture object (the modules' split BTF
/// over it is as valid as over a kernel's).
fn small_vmlinux() -> PathBuf {
    corpus_file("fixtures/bin/structs_unions.gcc-O2.o")
}

fn kernel(args: &[&str]) -> std::process::Output {
    btfkit().arg("kernel").args(args).output().unwrap()
}

/// The report's input lines. A last line without its newline is one a kill
/// cut short (as the run itself, this drops it).
fn records(report: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(report).unwrap();
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    whole
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .filter(|v| v.get("input").is_some())
        .collect()
}

/// Field `key` of each input's line (a string as it is, anything else as JSON).
fn by_input(report: &Path, key: &str) -> HashMap<String, String> {
    records(report)
        .into_iter()
        .map(|v| {
            let value = match &v[key] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (v["input"].as_str().unwrap().to_string(), value)
        })
        .collect()
}

fn outcomes(report: &Path) -> HashMap<String, String> {
    by_input(report, "outcome")
}

/// `btfkit pahole` with the kernel's flags, one input: its bytes.
fn pahole_one(input: &Path, base: Option<&Path>, out: &Path) -> Vec<u8> {
    let mut c = btfkit();
    c.args([
        "pahole",
        "-J",
        "-j2",
        &format!("--btf_features={FEATURES}"),
        "--lang_exclude=rust",
    ]);
    if let Some(b) = base {
        c.arg(format!("--btf_base={}", b.display()));
    }
    let st = c
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(input)
        .status()
        .unwrap();
    assert!(st.success(), "pahole {}", input.display());
    std::fs::read(out).unwrap()
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "btfkit failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The corpus's vmlinux and two modules as a build directory: the outputs
/// are the reference's files (the manifest's `kernel` profile).
#[test]
fn a_build_tree_gives_the_reference_bytes() {
    crate::needs_corpus!();
    let dir = scratch("kernel-ref");
    let root = dir.join("linux");
    link(
        &corpus_file("kernel/vmlinux-6.12.117+deb12-cloud-amd64"),
        &root.join("vmlinux"),
    );
    link(&corpus_file("kernel/modules/crc7.ko"), &root.join("lib/crc7.ko"));
    link(
        &corpus_file("kernel/modules/tcp_bbr.ko"),
        &root.join("net/ipv4/tcp_bbr.ko"),
    );
    let out = dir.join("out");
    ok(&kernel(&[&s(&root), "--out-dir", &s(&out), "-j2"]));
    let want: HashMap<String, String> = read_manifest(&corpus_dir().join("manifest.tsv"))
        .into_iter()
        .map(|r| (r["case_id"].clone(), r["expected_sha256"].clone()))
        .collect();
    assert_eq!(sha256_hex(&out.join("vmlinux.btf")), want["vmlinux/kernel"]);
    assert_eq!(
        sha256_hex(&out.join("modules/lib/crc7.btf")),
        want["module/crc7/kernel"]
    );
    assert_eq!(
        sha256_hex(&out.join("modules/net/ipv4/tcp_bbr.btf")),
        want["module/tcp_bbr/kernel"]
    );
    let recs = records(&out.join("report.jsonl"));
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0]["kind"], "vmlinux");
    assert_eq!(recs[0]["input"], "vmlinux");
    assert_eq!(recs[0]["sha256"].as_str().unwrap(), want["vmlinux/kernel"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A debug package's layout; outputs equal `btfkit pahole` run one by one;
/// a rerun reuses everything, a touched module is encoded again.
#[test]
fn a_debug_tree_equals_pahole_one_by_one_and_a_rerun_reuses() {
    crate::needs_corpus!();
    let dir = scratch("kernel-tree");
    let root = dir.join("pkg");
    debug_tree(&root, &small_vmlinux(), MODULES);
    let out = dir.join("out");
    ok(&kernel(&[&s(&root), "--out-dir", &s(&out), "-j2"]));
    let vm = pahole_one(&small_vmlinux(), None, &dir.join("vm.btf"));
    assert!(
        std::fs::read(out.join("vmlinux.btf")).unwrap() == vm,
        "vmlinux.btf differs"
    );
    for (m, at) in MODULES {
        let want = pahole_one(
            &corpus_file(&format!("kernel/modules/{m}")),
            Some(&dir.join("vm.btf")),
            &dir.join("m.btf"),
        );
        let got = out.join("modules").join(at.replace(".ko", ".btf"));
        assert!(std::fs::read(&got).unwrap() == want, "{} differs", got.display());
    }
    let report = out.join("report.jsonl");
    let first = outcomes(&report);
    assert_eq!(first.len(), MODULES.len() + 1);
    assert!(first.values().all(|o| o == "ok"), "{first:?}");
    assert!(first.contains_key("usr/lib/debug/lib/modules/6.12-t/kernel/lib/crc7.ko"));
    let text = std::fs::read_to_string(&report).unwrap();
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["ok"], MODULES.len() + 1);

    // Everything reused.
    ok(&kernel(&[&s(&root), "--out-dir", &s(&out), "-j2"]));
    assert!(
        outcomes(&report).values().all(|o| o == "reused"),
        "{:?}",
        outcomes(&report)
    );
    // Reused again from a report of reused lines; a module whose output was
    // changed is encoded again.
    let fou = out.join("modules/kernel/net/ipv4/fou.btf");
    std::fs::write(&fou, b"garbage").unwrap();
    ok(&kernel(&[&s(&root), "--out-dir", &s(&out), "-j2"]));
    let third = outcomes(&report);
    // The reused lines are the new report's first: written before any encode
    // (fou comes before tcp_bbr and x_tables in the tree's order).
    let recs = records(&report);
    assert!(
        recs.last().unwrap()["input"].as_str().unwrap().ends_with("fou.ko"),
        "{recs:?}"
    );
    assert_eq!(third["usr/lib/debug/lib/modules/6.12-t/kernel/net/ipv4/fou.ko"], "ok");
    assert_eq!(third.values().filter(|o| *o == "reused").count(), MODULES.len());
    assert!(std::fs::read(&fou).unwrap() != b"garbage");
    // Other flags: nothing reused.
    ok(&kernel(&[&s(&root), "--out-dir", &s(&out), "-j2", "--lang-exclude="]));
    assert!(outcomes(&report).values().all(|o| o == "ok"));
    // `btfkit report` accepts the finished run.
    let r = run(&["report", &s(&out)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same run from the library: `pipeline::kernel::run` writes what the
/// command line writes, tells its progress, and `report::check` reads the
/// report back as `btfkit report` does.
#[test]
fn the_library_runs_a_kernel_and_checks_its_report() {
    use btfkit::encode::Options;
    use btfkit::pipeline::kernel::{self, KernelRun, Outcome, Progress, Record, Target};
    use std::sync::Mutex;

    crate::needs_corpus!();
    let dir = scratch("kernel-library");
    let root = dir.join("pkg");
    debug_tree(&root, &small_vmlinux(), &MODULES[..3]);
    let by_cli = dir.join("cli");
    ok(&kernel(&[&s(&root), "--out-dir", &s(&by_cli), "-j2"]));

    #[derive(Default)]
    struct Seen {
        expected: Mutex<u64>,
        records: Mutex<Vec<(String, Outcome)>>,
    }
    impl Progress for Seen {
        fn expect(&self, n: u64) {
            *self.expected.lock().unwrap() += n;
        }
        fn record(&self, r: &Record) {
            self.records.lock().unwrap().push((r.input.clone(), r.outcome));
        }
    }
    let opts = Options {
        jobs: 2,
        ..Options::kernel_build()
    };
    let by_lib = dir.join("lib");
    let run = KernelRun {
        target: Target::One(root.clone()),
        out_dir: by_lib.clone(),
        opts,
        version: "library-test".into(),
        reading: btfkit::pipeline::kernel::Reading {
            spill_over: btfkit::pipeline::kernel::SPILL_OVER,
            threads: 1,
        },
    };
    let seen = Seen::default();
    let done = kernel::run(&run, &seen).unwrap();
    assert_eq!(done.report, by_lib.join("report.jsonl"));
    assert_eq!((done.summary.inputs, done.summary.ok, done.summary.failed), (4, 4, 0));
    assert_eq!(*seen.expected.lock().unwrap(), 4);
    let recs = seen.records.lock().unwrap();
    assert_eq!(recs.len(), 4);
    assert!(recs.iter().all(|(_, o)| *o == Outcome::Ok), "{recs:?}");
    let mut files = vec!["vmlinux.btf".to_string()];
    files.extend(
        MODULES[..3]
            .iter()
            .map(|(_, at)| format!("modules/{}", at.replace(".ko", ".btf"))),
    );
    for f in &files {
        assert!(
            std::fs::read(by_lib.join(f)).unwrap() == std::fs::read(by_cli.join(f)).unwrap(),
            "{f}: the library's bytes differ from the command line's"
        );
    }
    // The report check, from the library: both runs complete.
    let checked = btfkit::report::check(&[by_lib.clone(), by_cli.clone()], None).unwrap();
    assert!(checked.good(), "{:?}", checked.kernel);
    let k = checked.kernel.as_ref().unwrap();
    assert_eq!((k.reports.len(), k.items, k.inputs, k.ok), (2, 2, 8, 8));
    assert!(checked.core.is_none());
    // A directory without reports is an error naming it.
    let e = btfkit::report::check(std::slice::from_ref(&root), None).err().unwrap();
    assert!(e.to_string().contains(&s(&root)), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failing module is reported, the others are written, exit 2; report says 1.
#[test]
fn a_failing_module_does_not_stop_the_others() {
    crate::needs_corpus!();
    let dir = scratch("kernel-fail");
    let root = dir.join("pkg");
    debug_tree(&root, &small_vmlinux(), &MODULES[..2]);
    let bad = root.join("usr/lib/debug/lib/modules/6.12-t/kernel/bad.ko");
    std::fs::write(&bad, b"\x7fELF not really").unwrap();
    let out = dir.join("out");
    let o = kernel(&[&s(&root), "--out-dir", &s(&out), "-j2"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.ko"));
    let got = outcomes(&out.join("report.jsonl"));
    assert_eq!(got["usr/lib/debug/lib/modules/6.12-t/kernel/bad.ko"], "failed");
    assert_eq!(got.values().filter(|o| *o == "ok").count(), 3);
    assert!(out.join("modules/kernel/lib/crc7.btf").is_file());
    let r = run(&["report", &s(&out)]);
    assert_eq!(r.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_output_that_cannot_be_written_fails_its_module_only() {
    crate::needs_corpus!();
    let dir = scratch("kernel-unwritable");
    let root = dir.join("pkg");
    debug_tree(&root, &small_vmlinux(), &MODULES[..2]);
    let out = dir.join("out");
    // a file where tcp_bbr's output directory has to go
    std::fs::create_dir_all(out.join("modules/kernel/net")).unwrap();
    std::fs::write(out.join("modules/kernel/net/ipv4"), b"in the way").unwrap();
    let o = kernel(&[&s(&root), "--out-dir", &s(&out), "-j2"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let got = outcomes(&out.join("report.jsonl"));
    assert_eq!(
        got["usr/lib/debug/lib/modules/6.12-t/kernel/net/ipv4/tcp_bbr.ko"],
        "failed"
    );
    assert_eq!(got["usr/lib/debug/lib/modules/6.12-t/kernel/lib/crc7.ko"], "ok");
    let errors = by_input(&out.join("report.jsonl"), "error");
    let why = &errors["usr/lib/debug/lib/modules/6.12-t/kernel/net/ipv4/tcp_bbr.ko"];
    assert!(why.contains("modules/kernel/net/ipv4"), "{why}");
    assert!(out.join("modules/kernel/lib/crc7.btf").is_file());
    assert_eq!(
        std::fs::read(out.join("modules/kernel/net/ipv4")).unwrap(),
        b"in the way"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Output files of `dir` (report and temporaries aside), relative.
fn outputs(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let n = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                walk(&p, base, out);
            } else if !n.contains(".btfkit-tmp.") && !n.starts_with("report") {
                out.push(p.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    let mut v = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut v);
    }
    v.sort();
    v
}

/// SIGKILL at several points: every output present is complete, and a
/// rerun finishes, reusing the inputs the killed run had reported.
#[test]
fn a_killed_run_leaves_no_partial_output_and_resumes() {
    crate::needs_corpus!();
    let dir = scratch("kernel-kill");
    let root = dir.join("pkg");
    let mut mods = MODULES.to_vec();
    mods.extend([
        ("nf_conntrack.ko", "kernel/net/netfilter/nf_conntrack.ko"),
        ("kvm-amd.ko", "kernel/arch/x86/kvm/kvm-amd.ko"),
        ("mlx4_core.ko", "kernel/drivers/net/mlx4_core.ko"),
    ]);
    debug_tree(&root, &small_vmlinux(), &mods);
    // The reference: one run, not killed.
    let full = dir.join("full");
    ok(&kernel(&[&s(&root), "--out-dir", &s(&full), "-j1"]));
    let reference: HashMap<PathBuf, Vec<u8>> = outputs(&full)
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(full.join(&p)).unwrap()))
        .collect();
    assert_eq!(reference.len(), mods.len() + 1);

    let out = dir.join("out");
    let report = out.join("report.jsonl");
    let mut kills = 0;
    for lines in [1usize, 3, 5, 7] {
        let mut child = btfkit()
            .args(["kernel", &s(&root), "--out-dir", &s(&out), "-j1"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            let n = std::fs::read_to_string(&report).map(|t| t.lines().count()).unwrap_or(0);
            if n >= lines {
                kills += 1;
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(300), "run did not progress");
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill();
        child.wait().unwrap();
        for p in outputs(&out) {
            let now = std::fs::read(out.join(&p)).unwrap();
            assert!(
                reference.get(&p) == Some(&now),
                "after a kill at {lines} lines: {} is not the complete output",
                p.display()
            );
        }
        // Every reported input's output is in place.
        for r in records(&report) {
            if r["outcome"] != "failed" {
                let o = out.join(r["output"].as_str().unwrap());
                assert!(o.is_file(), "{} reported but missing", o.display());
            }
        }
    }
    assert!(kills >= 2, "only {kills} kills landed during the run");
    let before: Vec<String> = records(&report)
        .into_iter()
        .map(|r| r["input"].as_str().unwrap().to_string())
        .collect();
    let o = kernel(&[&s(&root), "--out-dir", &s(&out), "-j1"]);
    ok(&o);
    let after = outcomes(&report);
    assert_eq!(after.len(), mods.len() + 1);
    for i in &before {
        assert_eq!(after[i], "reused", "{i} was done before the last kill");
    }
    assert!(after.values().any(|o| o == "ok"), "the last run encoded nothing");
    for p in outputs(&out) {
        assert!(reference.get(&p) == Some(&std::fs::read(out.join(&p)).unwrap()));
    }
    assert_eq!(outputs(&out).len(), reference.len());
    let temps: Vec<_> = walkdir_names(&out)
        .into_iter()
        .filter(|n| n.contains(".btfkit-tmp."))
        .collect();
    assert_eq!(temps, Vec::<String>::new(), "temporary files left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walkdir_names(d: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        if e.path().is_dir() {
            v.extend(walkdir_names(&e.path()));
        } else {
            v.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    v
}

/// Shards of a list together do what one run over the list does, each
/// entry in its own directory; the report check sees a missing shard.
#[test]
fn shards_partition_a_list_and_report_catches_a_missing_shard() {
    crate::needs_corpus!();
    let dir = scratch("kernel-shards");
    let mut list = String::from("# kernels\n\n");
    for (i, name) in ["k0", "k1", "k2"].iter().enumerate() {
        debug_tree(&dir.join("trees").join(name), &small_vmlinux(), &MODULES[i..i + 2]);
        list += &format!("trees/{name}\n");
    }
    list += "pkgs/linux-image-x-dbg_1_amd64.deb\n";
    std::fs::create_dir_all(dir.join("pkgs")).unwrap();
    std::fs::write(dir.join("pkgs/linux-image-x-dbg_1_amd64.deb"), b"!<arch>\n").unwrap();
    let lst = dir.join("list");
    std::fs::write(&lst, &list).unwrap();

    let whole = dir.join("whole");
    let o = kernel(&["--list", &s(&lst), "--out-dir", &s(&whole), "-j2"]);
    // the package entry is an ar archive with nothing in it: failed, the rest done
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("linux-image-x-dbg_1_amd64.deb"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(whole.join("report-0-of-1.jsonl").is_file());

    let sharded = dir.join("sharded");
    for k in 0..2 {
        let o = btfkit()
            .args(["kernel", "--list", &s(&lst), "--out-dir", &s(&sharded), "-j2"])
            .env("SLURM_ARRAY_TASK_ID", (k + 5).to_string())
            .env("SLURM_ARRAY_TASK_MIN", "5")
            .env("SLURM_ARRAY_TASK_COUNT", "2")
            .output()
            .unwrap();
        assert!(o.status.code() == Some(0) || o.status.code() == Some(2));
        let text = std::fs::read_to_string(sharded.join(format!("report-{k}-of-2.jsonl"))).unwrap();
        let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(header["shard"], serde_json::json!([k, 2]));
        let want: Vec<&str> = if k == 0 {
            vec!["k0", "k2"]
        } else {
            vec!["k1", "linux-image-x-dbg_1_amd64"]
        };
        assert_eq!(header["items"], serde_json::json!(want));
        for v in text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        {
            if let Some(item) = v.get("item") {
                assert!(want.contains(&item.as_str().unwrap()));
            }
        }
    }
    assert_eq!(outputs(&whole), outputs(&sharded));
    for p in outputs(&whole) {
        assert!(std::fs::read(whole.join(&p)).unwrap() == std::fs::read(sharded.join(&p)).unwrap());
    }
    assert!(whole.join("k1/modules/kernel/net/ipv4/tcp_bbr.btf").is_file());

    // The failed package entry makes the merged report fail; without it,
    // the check passes; without shard 1's report, a missing shard.
    let r = run(&["report", &s(&sharded)]);
    assert_eq!(r.status.code(), Some(1));
    let good = dir.join("good");
    let trees_list = dir.join("trees.list");
    std::fs::write(&trees_list, "trees/k0\ntrees/k1\ntrees/k2\n").unwrap();
    for k in 0..2 {
        ok(&kernel(&[
            "--list",
            &s(&trees_list),
            "--out-dir",
            &s(&good),
            "--shard",
            &format!("{k}/2"),
        ]));
    }
    let r = run(&["report", &s(&good), "--json"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stdout));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["items"], 3);
    std::fs::remove_file(good.join("report-1-of-2.jsonl")).unwrap();
    let r = run(&["report", &s(&good)]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stdout).contains("shard 1/2 is missing"));
    // and the list says which item is missing when the headers cannot
    let r = run(&["report", &s(&good), "--list", &s(&trees_list)]);
    assert!(String::from_utf8_lossy(&r.stdout).contains("item k1"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two entries of one name are refused before anything runs.
#[test]
fn duplicate_list_names_are_refused() {
    let dir = scratch("kernel-dup");
    let lst = dir.join("list");
    std::fs::write(&lst, "a/k.deb\nb/k.rpm\n").unwrap();
    let o = kernel(&["--list", &s(&lst), "--out-dir", &s(&dir.join("out"))]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("a/k.deb") && e.contains("b/k.rpm"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inputs held in memory (what a package reader hands over) give the bytes
/// the same files give, through the library's run.
#[test]
fn inputs_in_memory_equal_inputs_in_files() {
    crate::needs_corpus!();
    use btfkit::pipeline::kernel::{Input, InputKind, Item, KernelPlan, ReportWriter, open_tree, run_item};
    let dir = scratch("kernel-bytes");
    let root = dir.join("pkg");
    debug_tree(&root, &small_vmlinux(), &MODULES[..3]);
    let mut opts = btfkit::encode::Options {
        jobs: 2,
        no_funcs: false,
        ..Default::default()
    };
    opts.features.apply_list(FEATURES);
    let run_one = |item: Item, out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        let plan = KernelPlan::new(out.to_path_buf(), opts.clone(), "t".into(), Vec::new());
        let report = ReportWriter::create(&out.join("report.jsonl"), &[]).unwrap();
        let t = run_item(&plan, item, out, &report, &|_| {}).unwrap();
        assert_eq!((t.ok, t.failed), (4, 0));
    };
    let files = dir.join("files");
    run_one(open_tree(&root, None).unwrap(), &files);
    let tree = open_tree(&root, None).unwrap();
    let to_bytes = |i: Input| {
        let data = std::fs::read(i.name()).unwrap();
        Input::bytes(i.rel, i.kind, i.out, i.mtime, data.into())
    };
    let modules: Vec<_> = tree.modules.map(|m| to_bytes(m.unwrap())).collect();
    assert!(modules.iter().all(|m| m.kind == InputKind::Module));
    let item = Item {
        name: None,
        source: root.clone(),
        vmlinux: to_bytes(tree.vmlinux),
        module_count: None,
        modules: Box::new(modules.into_iter().map(Ok)),
        package: None,
    };
    let mem = dir.join("mem");
    run_one(item, &mem);
    assert_eq!(outputs(&files), outputs(&mem));
    for p in outputs(&files) {
        assert!(std::fs::read(files.join(&p)).unwrap() == std::fs::read(mem.join(&p)).unwrap());
    }
    // the report lines agree too (fingerprints included)
    let strip = |p: &Path| -> Vec<(String, String, String)> {
        records(p)
            .into_iter()
            .map(|r| {
                (
                    r["input"].to_string(),
                    r["fingerprint"].to_string(),
                    r["sha256"].to_string(),
                )
            })
            .collect()
    };
    let (mut a, mut b) = (strip(&files.join("report.jsonl")), strip(&mem.join("report.jsonl")));
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file under `d`, relative to it, with its bytes; reports left out.
fn files(d: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut m = std::collections::BTreeMap::new();
    for p in outputs(d) {
        if !p.to_string_lossy().ends_with(".jsonl") {
            let bytes = std::fs::read(d.join(&p)).unwrap();
            m.insert(p, bytes);
        }
    }
    m
}

/// The package reader's temporary files in the temporary directory.
fn member_files() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("btfkit-member-"))
        .collect();
    v.sort();
    v
}

/// Where a package puts its vmlinux: Debian's layout (before the modules)
/// and Fedora's (after them, so the modules are set aside until it comes).
const PACKAGE_LAYOUTS: [(&str, &str); 2] = [
    ("debian", "usr/lib/debug/boot/vmlinux-6.12-t"),
    ("fedora", "usr/lib/debug/lib/modules/6.12-t/vmlinux"),
];

/// A debug package built by dpkg-deb (xz) in `dir`: a small vmlinux at
/// `vm_at` and `modules` under usr/lib/debug/lib/modules/6.12-t; returns
/// the unpacked root and the package.
fn build_deb(dir: &Path, vm_at: &str, modules: &[(&str, &str)]) -> (PathBuf, PathBuf) {
    let root = dir.join("root");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    };
    copy(&small_vmlinux(), &root.join(vm_at));
    for (m, at) in modules {
        let to = root.join("usr/lib/debug/lib/modules/6.12-t").join(at);
        copy(&corpus_file(&format!("kernel/modules/{m}")), &to);
    }
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        "Package: linux-image-t-dbg\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n",
    )
    .unwrap();
    let deb = dir.join("linux-image-t-dbg_1_amd64.deb");
    let st = std::process::Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build", &s(&root), &s(&deb)])
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    (root, deb)
}

/// A package read as a stream gives what its unpacked tree gives: with
/// Debian's layout (the vmlinux first) and Fedora's (the modules first, set
/// aside on disk until the vmlinux has been read). A rerun reuses it all.
#[test]
fn a_package_equals_its_unpacked_tree() {
    crate::needs_corpus!();
    if !have_tool("dpkg-deb", "--version") {
        eprintln!("skipped: dpkg-deb not found");
        return;
    }
    let dir = scratch("kernel-package");
    for (layout, vm_at) in PACKAGE_LAYOUTS {
        let (root, deb) = build_deb(&dir.join(layout), vm_at, &MODULES[..4]);

        let (tree_out, deb_out) = (dir.join(layout).join("tree"), dir.join(layout).join("deb"));
        ok(&kernel(&[&s(&root), "--out-dir", &s(&tree_out), "-j2"]));
        ok(&kernel(&[&s(&deb), "--out-dir", &s(&deb_out), "-j2"]));
        let want = files(&tree_out);
        assert_eq!(want.len(), 5, "{layout}: {:?}", want.keys());
        assert!(
            files(&deb_out) == want,
            "{layout}: the package's outputs differ from the tree's"
        );
        let (tree_shas, deb_shas) = (
            by_input(&tree_out.join("report.jsonl"), "sha256"),
            by_input(&deb_out.join("report.jsonl"), "sha256"),
        );
        assert_eq!(deb_shas, tree_shas, "{layout}");
        // Every member spilled to a temporary file (as the largest modules
        // of a real package are): the same outputs, and no file left.
        let spill_out = dir.join(layout).join("spilled");
        let run = btfkit::pipeline::kernel::KernelRun {
            target: btfkit::pipeline::kernel::Target::One(deb.clone()),
            out_dir: spill_out.clone(),
            opts: btfkit::encode::Options {
                jobs: 2,
                ..btfkit::encode::Options::kernel_build()
            },
            version: "spill-test".into(),
            reading: btfkit::pipeline::kernel::Reading {
                spill_over: 0,
                threads: 2,
            },
        };
        let tmp_before = member_files();
        let done = btfkit::pipeline::kernel::run(&run, &btfkit::pipeline::kernel::Quiet).unwrap();
        assert_eq!((done.summary.ok, done.summary.failed), (5, 0), "{layout}");
        assert!(
            files(&spill_out) == want,
            "{layout}: the spilled members' outputs differ"
        );
        assert_eq!(
            member_files(),
            tmp_before,
            "{layout}: a spilled member outlived its run"
        );

        ok(&kernel(&[&s(&deb), "--out-dir", &s(&deb_out), "-j2"]));
        let again = outcomes(&deb_out.join("report.jsonl"));
        assert_eq!(again.len(), 5, "{layout}: {again:?}");
        assert!(again.values().all(|o| o == "reused"), "{layout}: {again:?}");
    }
    // nothing set aside is left behind
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every line of a report, parsed.
fn report_lines(report: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(report)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A rerun of the same package reads only what is not done. With every
/// line holding, it reads nothing of the package's stream (a copy cut
/// short at its end opens, where reading it through fails); with one
/// module's output gone, it reads up to that module and stops. The lines
/// that hold are the rewritten report's first, before anything is encoded,
/// so a rerun killed early keeps them; `btfkit report` finds a package
/// whose modules are not all reported.
#[test]
fn a_package_rerun_reads_only_what_is_not_done() {
    use btfkit::pipeline::kernel::{InputData, KernelPlan, Reading, SPILL_OVER, known, open_package, read_report};
    crate::needs_corpus!();
    if !have_tool("dpkg-deb", "--version") {
        eprintln!("skipped: dpkg-deb not found");
        return;
    }
    let dir = scratch("kernel-package-rerun");
    let reading = Reading {
        spill_over: SPILL_OVER,
        threads: 2,
    };
    for (layout, vm_at) in PACKAGE_LAYOUTS {
        let (_, deb) = build_deb(&dir.join(layout), vm_at, &MODULES[..4]);
        let out = dir.join(layout).join("out");
        let report = out.join("report.jsonl");
        ok(&kernel(&[&s(&deb), "--out-dir", &s(&out), "-j2"]));
        let packages: Vec<serde_json::Value> = report_lines(&report)
            .into_iter()
            .filter_map(|l| l.get("package").cloned())
            .collect();
        assert_eq!(packages.len(), 1, "{layout}: {packages:?}");
        assert_eq!(packages[0]["modules"], 4, "{layout}");
        let sha = packages[0]["sha256"].as_str().unwrap().to_string();

        let bytes = std::fs::read(&deb).unwrap();
        let cut = dir.join(layout).join("cut.deb");
        std::fs::write(&cut, &bytes[..bytes.len() - 8]).unwrap();
        // What a rerun of the package (sha256 `sha`) would open, on `pkg`.
        let plan = |with_report: bool| {
            let lines = if with_report {
                read_report(&report).unwrap().0
            } else {
                Vec::new()
            };
            KernelPlan::new(
                out.clone(),
                btfkit::encode::Options::kernel_build(),
                env!("CARGO_PKG_VERSION").to_string(),
                lines,
            )
        };
        let open = |pkg: &Path, with_report: bool| {
            let k = known(&plan(with_report), None, &sha, &out);
            open_package(pkg, None, reading, k).map(|item| (item.vmlinux, item.modules.collect::<Vec<_>>()))
        };
        // Read through, the cut copy fails.
        let read_through = open(&cut, false);
        assert!(
            read_through.map_or(true, |(_, mods)| mods.iter().any(|m| m.is_err())),
            "{layout}: the cut copy reads without an error"
        );
        // Every line holds: nothing of the stream is read.
        let (vm, mods) = open(&cut, true).unwrap_or_else(|e| panic!("{layout}: {e}"));
        assert!(matches!(vm.data, InputData::Proven), "{layout}: the vmlinux was read");
        assert_eq!(mods.len(), 4, "{layout}");
        for m in &mods {
            let m = m.as_ref().unwrap_or_else(|e| panic!("{layout}: {e}"));
            assert!(matches!(m.data, InputData::Proven), "{layout}: {} was read", m.rel);
        }
        // One output gone: that module alone is read, and the stream stops
        // before the cut.
        let gone = out.join("modules/kernel/net/ipv4/tcp_bbr.btf");
        let gone_bytes = std::fs::read(&gone).unwrap();
        std::fs::remove_file(&gone).unwrap();
        let (vm, mods) = open(&cut, true).unwrap_or_else(|e| panic!("{layout}: {e}"));
        assert!(matches!(vm.data, InputData::Proven), "{layout}");
        let read: Vec<String> = mods
            .iter()
            .map(|m| m.as_ref().unwrap_or_else(|e| panic!("{layout}: {e}")))
            .filter(|m| !matches!(m.data, InputData::Proven))
            .map(|m| m.rel.clone())
            .collect();
        assert_eq!(mods.len(), 4, "{layout}");
        assert_eq!(
            read,
            ["usr/lib/debug/lib/modules/6.12-t/kernel/net/ipv4/tcp_bbr.ko"],
            "{layout}"
        );

        // The command's rerun: the lines that hold first, then the package's
        // line, then the module encoded again (to the same bytes).
        ok(&kernel(&[&s(&deb), "--out-dir", &s(&out), "-j2"]));
        let lines = report_lines(&report);
        let kinds: Vec<String> = lines
            .iter()
            .map(|l| match (l.get("outcome"), l.get("package"), l.get("summary")) {
                (Some(o), _, _) => o.as_str().unwrap().to_string(),
                (_, Some(_), _) => "package".into(),
                (_, _, Some(_)) => "summary".into(),
                _ => panic!("{l}"),
            })
            .collect();
        assert_eq!(
            kinds,
            ["reused", "reused", "reused", "reused", "package", "ok", "summary"],
            "{layout}"
        );
        assert!(lines[5]["input"].as_str().unwrap().ends_with("tcp_bbr.ko"), "{layout}");
        assert_eq!(std::fs::read(&gone).unwrap(), gone_bytes, "{layout}");
        let r = run(&["report", &s(&out)]);
        assert!(r.status.success(), "{layout}: {}", String::from_utf8_lossy(&r.stdout));
        // Other flags: nothing holds, the count is known, and the new report
        // still says it.
        let other = dir.join(layout).join("other");
        ok(&kernel(&[&s(&deb), "--out-dir", &s(&other), "-j2"]));
        ok(&kernel(&[&s(&deb), "--out-dir", &s(&other), "-j2", "--lang-exclude="]));
        let lines = report_lines(&other.join("report.jsonl"));
        assert_eq!(
            lines.iter().filter(|l| l.get("package").is_some()).count(),
            1,
            "{layout}: {lines:?}"
        );
        assert!(
            lines
                .iter()
                .filter(|l| l.get("outcome").is_some())
                .all(|l| l["outcome"] == "ok"),
            "{layout}"
        );
        // A module's line missing: the package's count says so.
        let text = std::fs::read_to_string(&report).unwrap();
        let kept: Vec<&str> = text.lines().filter(|l| !l.contains("tcp_bbr.ko")).collect();
        std::fs::write(&report, kept.join("\n") + "\n").unwrap();
        let r = run(&["report", &s(&out)]);
        let said = String::from_utf8_lossy(&r.stdout);
        assert!(!r.status.success(), "{layout}: {said}");
        assert!(
            said.contains("its package has 4 modules, 3 reported"),
            "{layout}: {said}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A root that is neither a tree nor a package is refused before anything
/// is written: no report, so an earlier run's report stays as it was.
#[test]
fn an_unreadable_root_writes_no_report() {
    let dir = scratch("kernel-bad-root");
    let bad = dir.join("linux-image-x-dbg_1_amd64.deb");
    std::fs::write(&bad, b"not an ar archive").unwrap();
    let out = dir.join("out");
    let o = kernel(&[&s(&bad), "--out-dir", &s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("linux-image-x-dbg_1_amd64.deb"));
    assert!(!out.join("report.jsonl").exists(), "a report was written");
    std::fs::write(out.join("report.jsonl"), "kept\n").unwrap();
    let o = kernel(&[&s(&bad), "--out-dir", &s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(out.join("report.jsonl")).unwrap(), "kept\n");
    let _ = std::fs::remove_dir_all(&dir);
}
