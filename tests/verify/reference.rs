//! The kernel as judge of the reference's own files: `verify` accepts every
//! little-endian corpus BTF that `kernel-rejects.tsv` does not list, refuses
//! every listed one with the listed message, and refuses a corrupted blob.
//! Needs root (BPF_BTF_LOAD); without it the test says so and fails, since
//! CI runs as root and a silent skip would hide a broken verifier path.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use btfkit::btf::{Btf, KERNEL_MAX_BTF_SIZE};
use btfkit::testing::corpus::Corpus;
use btfkit::verify::{self, Verdict};

fn rejects(c: &Corpus) -> HashMap<String, String> {
    let text = std::fs::read_to_string(c.dir.join("kernel-rejects.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[3].to_string())
        })
        .collect()
}

#[test]
fn kernel_judges_corpus_like_the_reference_notes() {
    crate::needs_corpus!();
    let c = Corpus::open_default();
    let rejects = rejects(&c);
    let mut bases: HashMap<String, String> = HashMap::new();
    for r in c.all_rows().unwrap() {
        if r.mode == "inplace:.BTF" {
            bases.insert(
                r.expected.clone(),
                r.expected.replace(".inplace.BTF", ".inplace.BTF.base"),
            );
        } else if r.base != "-" && r.expected != "-" && r.mode != "inplace:.BTF.base" {
            bases.insert(r.expected.clone(), r.base.clone());
        }
    }
    let mut base_cache: HashMap<String, Arc<Btf>> = HashMap::new();
    let mut files = c.expected_files(".btf");
    files.extend(c.expected_files(".inplace.BTF"));
    files.extend(c.expected_files(".inplace.BTF.base"));
    let (mut accepted, mut refused, mut converted_be, mut skipped_big) = (0, 0, 0, 0);
    let mut listed_seen = 0;
    for rel in &files {
        let path = c.file(rel).unwrap();
        let head = std::fs::read(&path).unwrap();
        if head[..2] != [0x9f, 0xeb] {
            // Big-endian (s390x, powerpc64): verify converts to native first.
            converted_be += 1;
        }
        let base = bases.get(rel).map(|b| {
            base_cache
                .entry(b.clone())
                .or_insert_with(|| Arc::new(btfkit::elf::load_btf(&c.file(b).unwrap(), None).unwrap()))
                .clone()
        });
        let payload = verify::payload(&path, base).unwrap().bytes;
        if payload.len() > KERNEL_MAX_BTF_SIZE {
            skipped_big += 1;
            assert!(!rejects.contains_key(rel), "{rel} is listed but too big to load");
            continue;
        }
        match (verify::verify_bytes(&payload), rejects.get(rel)) {
            (Verdict::Accepted, None) => accepted += 1,
            (Verdict::Refused { log, .. }, Some(msg)) => {
                assert_eq!(
                    verify::last_line(&log).trim(),
                    msg.trim(),
                    "{rel}: refused for another reason"
                );
                refused += 1;
                listed_seen += 1;
            }
            (Verdict::CannotAsk(why), _) => panic!("cannot ask the kernel ({why}); this test needs root"),
            (v, listed) => panic!("{rel}: kernel said {v:?}, kernel-rejects.tsv says {listed:?}"),
        }
    }
    eprintln!(
        "accepted {accepted}, refused as listed {refused}, big-endian converted {converted_be}, over 16 MiB skipped {skipped_big}"
    );
    assert_eq!(listed_seen, rejects.len(), "every listed reject was replayed");
    assert!(accepted > 1000);
    assert_eq!(converted_be, 132, "every big-endian file was converted and judged");
}

#[test]
fn corrupted_blob_is_refused_with_the_kernel_log() {
    crate::needs_corpus!();
    let c = Corpus::open_default();
    let src = c.file("expected/fixtures/structs_unions.gcc-O2.kernel.btf").unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    // Point the first member of the first struct outside the struct's size.
    let b = btfkit::btf::read::parse(&bytes).unwrap();
    let (id, t) = b
        .own_ids()
        .map(|id| (id, b.ty(id)))
        .find(|(_, t)| t.kind() == btfkit::btf::Kind::Struct && t.vlen() > 0)
        .unwrap();
    let word = b.type_offsets()[(id.get() - 1) as usize] as usize + 3 + 2; // first member's offset word
    let at = 24 + word * 4;
    let bogus = (t.size() * 8 + 64).to_le_bytes();
    bytes[at..at + 4].copy_from_slice(&bogus);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let bad = dir.join("corrupted.btf");
    std::fs::write(&bad, &bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .arg("verify")
        .arg(&bad)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("refused by the kernel"), "{stdout}");
    assert!(
        stdout.contains("Member exceeds struct_size") || stdout.contains("Invalid"),
        "{stdout}"
    );
    // And the original is accepted through the CLI.
    let out = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .arg("verify")
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn too_large_blob_cannot_be_asked() {
    let v = verify::verify_bytes(&vec![0u8; KERNEL_MAX_BTF_SIZE + 1]);
    assert!(matches!(v, Verdict::CannotAsk(ref m) if m.contains("limit")), "{v:?}");
}

#[test]
fn thirty_two_bit_btf_is_explained() {
    crate::needs_corpus!();
    let c = Corpus::open_default();
    let p = c.file("expected/fixtures/arrays.i686-gcc-O2.kernel.btf").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .arg("verify")
        .arg(&p)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("describes a 32-bit target"), "{stdout}");
    // A 64-bit file refused for another reason gets no such note.
    let p = c.file("expected/fixtures/cxx_basics.clang++-O2.kernel.btf").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .arg("verify")
        .arg(&p)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("32-bit"));
}
