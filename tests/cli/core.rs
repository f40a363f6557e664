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
