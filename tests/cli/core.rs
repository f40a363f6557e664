//! `btfkit core check` from the command line: verdicts and exit codes on
//! real objects, and bad input refused in one line naming the file and
//! the section, never a panic.

use std::sync::Arc;

use crate::common::{crate_dir, repo_fixture as fixture, run as btfkit, s, scratch, section_range};

fn object(name: &str) -> std::path::PathBuf {
    crate_dir().join("tests/core/objects").join(name)
}

fn one_error_line(o: &std::process::Output, must: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}{}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("btfkit: error: "), "{err}");
    for m in must {
        assert!(err.contains(m), "{m:?} not in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// A 4-byte change at `at` (little-endian u32) in a copy of `src`.
fn patched(dir: &std::path::Path, src: &std::path::Path, at: usize, v: u32, name: &str) -> std::path::PathBuf {
    let mut d = std::fs::read(src).unwrap();
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let p = dir.join(name);
    std::fs::write(&p, d).unwrap();
    p
}

#[test]
fn bad_input_is_one_line_naming_file_and_section() {
    let dir = scratch("core_bad_input");
    let sample = crate_dir().join("data/sample.btf");
    let obj = object("biosnoop.bpf.o");

    // Not a BPF object.
    let x86 = fixture("ints.gcc-O2.o");
    one_error_line(
        &btfkit(&["core", "check", &s(&x86), "-t", &s(&sample)]),
        &["ints.gcc-O2.o", "not a BPF object"],
    );
    // Not ELF at all.
    one_error_line(
        &btfkit(&["core", "check", &s(&sample), "-t", &s(&sample)]),
        &["sample.btf", "not an ELF file"],
    );

    // No .BTF.ext: its name in the section header string table renamed.
    let mut d = std::fs::read(&obj).unwrap();
    // ".BTF.ext" is the tail of ".rel.BTF.ext" in the name table: both go
    let at = memchr_all(&d, b".BTF.ext\0");
    d[at + 4] = b'X';
    let no_ext = dir.join("no_ext.bpf.o");
    std::fs::write(&no_ext, &d).unwrap();
    one_error_line(
        &btfkit(&["core", "check", &s(&no_ext), "-t", &s(&sample)]),
        &["no_ext.bpf.o", "no .BTF.ext"],
    );

    // Damaged relocation records: a core_relo record size of 12.
    let raw = std::fs::read(&obj).unwrap();
    let (off, _, _) = section_range(&raw, ".BTF.ext");
    let hdr_len = u32::from_le_bytes(raw[off + 4..off + 8].try_into().unwrap()) as usize;
    let core_off = u32::from_le_bytes(raw[off + 24..off + 28].try_into().unwrap()) as usize;
    let bad = patched(&dir, &obj, off + hdr_len + core_off, 12, "bad_records.bpf.o");
    one_error_line(
        &btfkit(&["core", "check", &s(&bad), "-t", &s(&sample)]),
        &["bad_records.bpf.o", "section .BTF.ext", "core_relo record size 12"],
    );
    // A record count that runs past the subsection.
    let bad = patched(&dir, &obj, off + hdr_len + core_off + 8, 100_000, "overrun.bpf.o");
    one_error_line(
        &btfkit(&["core", "check", &s(&bad), "-t", &s(&sample)]),
        &["overrun.bpf.o", "section .BTF.ext", "past the subsection's end"],
    );

    // Split BTF as the target, without its base.
    let base = Arc::new(btfkit::btf::read::parse(&std::fs::read(&sample).unwrap()).unwrap());
    let mut split = btfkit::btf::Btf::new_split(base);
    split.add_int(b"split_only", 4, 0);
    let split_file = dir.join("module.btf");
    std::fs::write(&split_file, btfkit::btf::write::to_bytes(&split)).unwrap();
    let o = btfkit(&["core", "check", &s(&obj), "-t", &s(&split_file)]);
    one_error_line(&o, &["module.btf", "split BTF", "kernel's directory"]);
}

/// An access string that does not parse is libbpf refusing the object on
/// that kernel: verdict `error` (exit 1), naming section and relocation.
#[test]
fn an_access_string_that_does_not_parse_is_an_error_verdict() {
    let dir = scratch("core_bad_access");
    let obj = object("biosnoop.bpf.o");
    let raw = std::fs::read(&obj).unwrap();
    let (off, _, _) = section_range(&raw, ".BTF.ext");
    let hdr_len = u32::from_le_bytes(raw[off + 4..off + 8].try_into().unwrap()) as usize;
    let core_off = u32::from_le_bytes(raw[off + 24..off + 28].try_into().unwrap()) as usize;
    // first record's access string offset := 1, the start of some type name
    let rec = off + hdr_len + core_off + 4 + 8;
    let bad = patched(&dir, &obj, rec + 8, 1, "bad_access.bpf.o");
    let o = btfkit(&["core", "check", &s(&bad), "-t", "/sys/kernel/btf/vmlinux"]);
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").is_file() {
        return;
    }
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains(": error") && out.contains("libbpf refuses the object: section ") && out.contains("access string"),
        "{out}"
    );
}

#[test]
fn verdicts_and_exit_codes_on_real_objects() {
    let dir = scratch("core_verdicts");
    let xz = crate_dir().join("tests/core/kernels/debian-6.1.0-57-amd64.btf.xz");
    let k61 = dir.join("6.1.btf");
    let mut r = liblzma::read::XzDecoder::new(std::fs::File::open(xz).unwrap());
    std::io::copy(&mut r, &mut std::fs::File::create(&k61).unwrap()).unwrap();
    // biosnoop guards request.rq_disk with bpf_core_field_exists: its poisons
    // on a kernel without the field are dead code, so it is ok.
    let o = btfkit(&["core", "check", &s(&object("biosnoop.bpf.o")), "-t", &s(&k61)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("biosnoop.bpf.o on ") && out.contains(": ok ("), "{out}");
    // JSON for CI: one document, the worst verdict first.
    let o = btfkit(&[
        "core",
        "check",
        &s(&object("biosnoop.bpf.o")),
        &s(&object("execsnoop.bpf.o")),
        "-t",
        &s(&k61),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "btfkit-core-check/1");
    assert_eq!(v["kernels"][0]["objects"].as_array().unwrap().len(), 2);
    assert!(v["kernels"][0]["objects"][0]["relocations"].as_array().unwrap().len() > 10);
}

fn memchr_all(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present")
}

/// Decompresses a committed kernel BTF (tests/core/kernels/NAME.btf.xz).
fn kernel_btf(name: &str) -> Vec<u8> {
    let xz = crate_dir().join(format!("tests/core/kernels/{name}.btf.xz"));
    let mut out = Vec::new();
    let mut r = liblzma::read::XzDecoder::new(std::fs::File::open(xz).unwrap());
    std::io::Read::read_to_end(&mut r, &mut out).unwrap();
    out
}

/// `bytes` as BTFHub ships a kernel's BTF: `<name>.btf` in a tar, xz.
fn btfhub_file(path: &std::path::Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let xz = liblzma::write::XzEncoder::new(std::fs::File::create(path).unwrap(), 1);
    let mut tar = tar::Builder::new(xz);
    let mut h = tar::Header::new_gnu();
    h.set_size(bytes.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, format!("{name}.btf"), bytes).unwrap();
    tar.into_inner().unwrap().finish().unwrap();
}

fn json_of(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The kernels of a report, without the timings (which differ run to run).
fn kernels_without_times(v: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut ks = v["kernels"].as_array().unwrap().clone();
    for k in &mut ks {
        let k = k.as_object_mut().unwrap();
        k.remove("load_seconds");
        k.remove("check_seconds");
    }
    ks
}

/// An archive (kernel directories and a BTFHub tree) and a list file in one
/// command; then the same run in three shards, merged by `btfkit report`.
#[test]
fn archive_btfhub_list_and_shards_merged_by_report() {
    let dir = scratch("core_archive");
    let k61 = kernel_btf("debian-6.1.0-57-amd64");
    let arm = kernel_btf("debian-6.12.118-cloud-arm64");
    for (d, b) in [("archive/6.1-amd64", &k61), ("archive/6.12-cloud-arm64", &arm)] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
        std::fs::write(dir.join(d).join("vmlinux.btf"), b).unwrap();
    }
    btfhub_file(
        &dir.join("btfhub/debian/12/x86_64/6.1.0-57-amd64.btf.tar.xz"),
        "6.1.0-57-amd64",
        &k61,
    );
    btfhub_file(
        &dir.join("btfhub/debian/12/arm64/6.12.118-cloud-arm64.btf.tar.xz"),
        "6.12.118-cloud-arm64",
        &arm,
    );
    let objs: Vec<String> = ["vfsstat.bpf.o", "tcpconnect.bpf.o", "execsnoop.bpf.o"]
        .iter()
        .map(|o| s(&object(o)))
        .collect();
    let (archive, btfhub) = (s(&dir.join("archive")), s(&dir.join("btfhub")));
    let mut args: Vec<&str> = vec!["core", "check"];
    args.extend(objs.iter().map(String::as_str));
    args.extend(["-t", &archive, "-t", &btfhub, "-q"]);

    // tcpconnect reads x86's pt_regs.ax: poisoned on both arm64 copies.
    let o = btfkit(&args);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("vfsstat.bpf.o: 4 kernels ok, 0 poisoned, 0 error"),
        "{text}"
    );
    assert!(
        text.contains("tcpconnect.bpf.o: 2 kernels ok, 2 poisoned, 0 error"),
        "{text}"
    );
    assert!(text.contains("  2 kernels poisoned at struct pt_regs."), "{text}");
    assert!(text.contains("3 objects x 4 kernels: 10 ok, 2 not"), "{text}");

    let mut json_args = args.clone();
    json_args.push("--json");
    let whole = json_of(&btfkit(&json_args));
    let names: Vec<&str> = whole["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names[0].ends_with("archive/6.1-amd64"), "{names:?}");
    assert!(
        names[3].ends_with("btfhub/debian/12/x86_64/6.1.0-57-amd64"),
        "{names:?}"
    );
    assert_eq!(whole["worst"], "poisoned");

    // A list file: paths relative to it, comments skipped.
    let list = dir.join("kernels.txt");
    std::fs::write(
        &list,
        "# two of them\narchive/6.12-cloud-arm64\nbtfhub/debian/12/x86_64/6.1.0-57-amd64.btf.tar.xz\n",
    )
    .unwrap();
    let o = btfkit(&["core", "check", &objs[1], "-t", &s(&list), "--json"]);
    let v = json_of(&o);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(v["summary"][0]["kernels"]["ok"], 1);
    assert_eq!(v["summary"][0]["kernels"]["poisoned"], 1);

    // Three shards into one directory; report merges them into the run's
    // result, kernel for kernel.
    let out = s(&dir.join("shards"));
    for k in 0..3 {
        let shard = format!("{k}/3");
        let mut a = args.clone();
        a.extend(["--shard", &shard, "--out-dir", &out]);
        let o = btfkit(&a);
        assert!(
            o.status.code().is_some_and(|c| c < 2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = btfkit(&["report", &out]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "poisoned kernels: {text}");
    assert!(text.contains("3 objects x 4 kernels: 10 ok, 2 not"), "{text}");
    assert!(
        text.contains("3 core check reports, 0 shards missing, 0 kernels missing: complete"),
        "{text}"
    );
    let merged = json_of(&btfkit(&["report", &out, "--json"]));
    assert_eq!(merged["complete"], true);
    assert_eq!(kernels_without_times(&merged), kernels_without_times(&whole));
    assert_eq!(merged["summary"], whole["summary"]);

    // A lost shard is named, with its kernels.
    std::fs::remove_file(dir.join("shards/core-check-1-of-3.json")).unwrap();
    let o = btfkit(&["report", &out, "--json"]);
    let v = json_of(&o);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(v["missing_shards"], serde_json::json!(["1/3"]));
    assert_eq!(v["missing_kernels"].as_array().unwrap().len(), 1);
    assert_eq!(v["complete"], false);
    // A damaged report is refused in one line naming it.
    std::fs::write(dir.join("shards/core-check-2-of-3.json"), "{\"schema\": 1}").unwrap();
    one_error_line(
        &btfkit(&["report", &out]),
        &["core-check-2-of-3.json", "not a `btfkit core check` JSON report"],
    );
}

/// `core min`: one kernel, then an archive (kernel directories and a
/// BTFHub tree) with its report, resume, shards and bundle.
#[test]
fn core_min_one_kernel_and_an_archive() {
    let dir = scratch("core_min");
    let k61 = kernel_btf("debian-6.1.0-57-amd64");
    let arm = kernel_btf("debian-6.12.118-cloud-arm64");
    let root = dir.join("kernels");
    for (d, b) in [("archive/6.1-amd64", &k61), ("archive/6.12-cloud-arm64", &arm)] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        std::fs::write(root.join(d).join("vmlinux.btf"), b).unwrap();
    }
    btfhub_file(
        &root.join("btfhub/debian/12/x86_64/6.1.0-57-amd64.btf.tar.xz"),
        "6.1.0-57-amd64",
        &k61,
    );
    btfhub_file(
        &root.join("btfhub/debian/12/arm64/6.12.118-cloud-arm64.btf.tar.xz"),
        "6.12.118-cloud-arm64",
        &arm,
    );
    let objs: Vec<String> = ["biosnoop.bpf.o", "tcpconnect.bpf.o", "execsnoop.bpf.o"]
        .iter()
        .map(|o| s(&object(o)))
        .collect();

    // One kernel: the output stands in for the kernel's BTF.
    let one = dir.join("one.btf");
    let k61_file = root.join("archive/6.1-amd64/vmlinux.btf");
    let mut args = vec!["core", "min", "--btf", &s(&k61_file), "-o", &s(&one)]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    args.extend(objs.iter().cloned());
    let o = btfkit(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("relocations resolved"), "{err}");
    let size = std::fs::metadata(&one).unwrap().len();
    assert!((1000..20_000).contains(&size), "{size} bytes");
    let o = btfkit(&["core", "check", &objs[1], "-t", &s(&one)]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    // --btf takes one kernel only.
    one_error_line(
        &btfkit(&["core", "min", "--btf", &s(&root), "-o", &s(&one), &objs[0]]),
        &["takes one kernel", "--archive"],
    );

    // The archive, with a bundle.
    let out = dir.join("out");
    let bundle = dir.join("min.tar.xz");
    let run = |extra: &[&str]| {
        let mut a = vec!["core", "min", "--archive", &s(&root), "--out-dir", &s(&out), "-q"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        a.extend(extra.iter().map(|x| x.to_string()));
        a.extend(objs.iter().cloned());
        btfkit(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let o = run(&["--bundle", &s(&bundle)]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let outputs = [
        "archive/6.1-amd64.btf",
        "archive/6.12-cloud-arm64.btf",
        "btfhub/debian/12/arm64/6.12.118-cloud-arm64.btf",
        "btfhub/debian/12/x86_64/6.1.0-57-amd64.btf",
    ];
    for f in outputs {
        assert!(out.join(f).is_file(), "{f}");
    }
    // The same kernel from a directory and from BTFHub: the same bytes.
    assert_eq!(
        std::fs::read(out.join(outputs[0])).unwrap(),
        std::fs::read(&one).unwrap()
    );
    assert_eq!(
        std::fs::read(out.join(outputs[0])).unwrap(),
        std::fs::read(out.join(outputs[3])).unwrap()
    );
    let report = std::fs::read_to_string(out.join("core-min-0-of-1.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = report.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 6, "{report}");
    assert_eq!(lines[0]["schema"], "btfkit-core-min/1");
    let kernels: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("kernel").is_some()).collect();
    assert!(kernels.iter().all(|l| l["outcome"] == "ok"), "{report}");
    // tcpconnect's x86 registers are not in arm64's pt_regs: left out, named.
    let arm_line = kernels.iter().find(|l| l["out"] == outputs[1]).unwrap();
    assert!(
        arm_line["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_str().unwrap().contains("pt_regs")),
        "{arm_line}"
    );
    assert_eq!(lines[5]["summary"]["bundle"]["outputs"], 4);
    assert_eq!(lines[5]["summary"]["bundle"]["distinct"], 2);
    // The bundle: every path, identical outputs once.
    let mut tar = tar::Archive::new(liblzma::read::XzDecoder::new(std::fs::File::open(&bundle).unwrap()));
    let mut entries: Vec<(String, bool)> = tar
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.path().unwrap().display().to_string(),
                e.header().entry_type() == tar::EntryType::Link,
            )
        })
        .collect();
    entries.sort();
    assert_eq!(entries.len(), 4);
    assert_eq!(entries.iter().filter(|(_, link)| *link).count(), 2, "{entries:?}");

    // A rerun reuses all; a lost output is made again.
    std::fs::remove_file(out.join(outputs[2])).unwrap();
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(0));
    let report = std::fs::read_to_string(out.join("core-min-0-of-1.jsonl")).unwrap();
    let last: Vec<serde_json::Value> = report
        .lines()
        .rev()
        .take(5)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(last[0]["summary"]["reused"], 3, "{report}");
    assert_eq!(last[0]["summary"]["ok"], 1, "{report}");
    assert!(out.join(outputs[2]).is_file());

    // A kernel that cannot be read is reported; the others go on.
    std::fs::create_dir_all(root.join("archive/broken")).unwrap();
    std::fs::write(root.join("archive/broken/vmlinux.btf"), b"not BTF").unwrap();
    let o = run(&["--shard", "0/2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("archive/broken"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let report = std::fs::read_to_string(out.join("core-min-0-of-2.jsonl")).unwrap();
    assert!(report.contains("\"outcome\":\"failed\""), "{report}");
}
