//! What a BPF or kernel-build engineer points btfkit at outside the corpus:
//! devices, pipes and standard output as outputs; sysfs, pipes and
//! standard input as inputs; full disks and closed pipes; scripts with an
//! empty variable; absurd thread counts.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

fn fixture() -> PathBuf {
    corpus_file("fixtures/bin/ints.gcc-O2.o")
}

/// What `encode` writes for `fixture()` with the default (bare) features.
fn expected_bare() -> Vec<u8> {
    read_corpus("expected/fixtures/ints.gcc-O2.bare.btf")
}

fn small_btf() -> PathBuf {
    corpus_file("expected/fixtures/ints.gcc-O2.kernel.btf")
}

/// The one error line of a failed run (notes aside), checked for shape.
fn one_error_line(out: &std::process::Output, what: &str) -> String {
    let stderr: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("btfkit: note: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: exit {:?}: {stderr}",
        out.status.code()
    );
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{what}: {stderr}");
    assert!(stderr.starts_with("btfkit: error: "), "{what}: {stderr}");
    stderr
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// A FIFO at `-o` receives the bytes and stays a FIFO; as root, a
/// character device node (a /dev/null made here) stays a device.
#[test]
fn devices_and_fifos_at_the_output_path_are_written_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("rw-fifo-out");
    let fifo = dir.join("out.fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            std::fs::File::open(&fifo).unwrap().read_to_end(&mut v).unwrap();
            v
        })
    };
    let r = run(&["encode", &s(&fixture()), "-o", &s(&fifo)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(reader.join().unwrap(), expected_bare());
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    if common::is_root() {
        let null = dir.join("null");
        let st = Command::new("mknod").arg(&null).args(["c", "1", "3"]).status().unwrap();
        assert!(st.success());
        for args in [
            vec!["encode".to_string(), s(&fixture()), "-o".into(), s(&null)],
            vec![
                "pahole".into(),
                "-J".into(),
                format!("--btf_encode_detached={}", s(&null)),
                s(&fixture()),
            ],
            vec!["dedup".into(), s(&small_btf()), "-o".into(), s(&null)],
        ] {
            let r = btfkit().args(&args).output().unwrap();
            assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
            assert!(
                std::fs::metadata(&null).unwrap().file_type().is_char_device(),
                "{args:?}: replaced"
            );
        }
    } else {
        eprintln!("SKIPPED the device-node case: it needs root (mknod)");
    }
    // A directory at the output path is named as one.
    let r = run(&["encode", &s(&fixture()), "-o", &s(&dir)]);
    assert!(one_error_line(&r, "dir").contains("is a directory"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-o -` writes the BTF to standard output, the summary to stderr.
#[test]
fn dash_output_is_standard_output() {
    let r = run(&["encode", &s(&fixture()), "-o", "-"]);
    assert!(r.status.success());
    assert_eq!(r.stdout, expected_bare());
    assert!(String::from_utf8_lossy(&r.stderr).contains("written to standard output"));
    let r = run(&["pahole", "-J", "--btf_encode_detached=-", &s(&fixture())]);
    assert!(r.status.success());
    assert_eq!(r.stdout, expected_bare());
}

/// On a terminal, `-o -` is refused rather than spraying binary.
#[test]
fn dash_output_on_a_terminal_is_refused() {
    if !have_tool("script", "--version") {
        eprintln!("SKIPPED: no `script` to give btfkit a terminal");
        return;
    }
    let cmd = format!("{} encode {} -o -", env!("CARGO_BIN_EXE_btfkit"), s(&fixture()));
    let r = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let all = String::from_utf8_lossy(&r.stdout);
    assert!(all.contains("standard output is a terminal"), "{all}");
    assert_eq!(r.status.code(), Some(2), "{all}");
}

/// A full disk behind standard output is the one-line error and exit 2,
/// never a panic; `encode -o OUT` still writes OUT.
#[test]
fn full_standard_output_is_an_error_not_a_panic() {
    if !Path::new("/dev/full").exists() {
        eprintln!("SKIPPED: no /dev/full");
        return;
    }
    let dir = scratch("rw-full");
    let out = dir.join("out.btf");
    let cases: Vec<Vec<String>> = vec![
        vec!["stats".into(), s(&small_btf())],
        vec!["stats".into(), s(&small_btf()), "--json".into()],
        vec!["dump".into(), s(&small_btf())],
        vec!["encode".into(), s(&fixture())],
        vec!["encode".into(), s(&fixture()), "-o".into(), s(&out)],
        vec!["encode".into(), "--out-dir".into(), s(&dir), s(&fixture())],
        vec!["pahole".into(), "--version".into()],
        vec!["pahole".into(), "--supported_btf_features".into()],
    ];
    for args in cases {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let r = btfkit().args(&args).stdout(full).output().unwrap();
        let line = one_error_line(&r, &format!("{args:?}"));
        assert!(line.contains("No space left"), "{args:?}: {line}");
    }
    assert_eq!(std::fs::read(&out).unwrap(), expected_bare());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that stops early (`| head`) ends btfkit quietly with 0.
#[test]
fn closed_pipe_ends_quietly() {
    crate::needs_corpus!();
    let big = corpus_file("expected/kernel/vmlinux.kernel.btf");
    for args in [
        vec!["dump", &*s(&big)],
        vec!["stats", &*s(&big), "--json"],
        vec!["dump", &*s(&big), "--format", "c"],
    ] {
        let mut child = btfkit()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.as_mut().unwrap().read_exact(&mut first[..1]).unwrap();
        drop(child.stdout.take());
        let r = child.wait_with_output().unwrap();
        assert_eq!(
            r.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(r.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
    }
}

/// BTF from a pipe, from `-` (standard input), from a FIFO, and from a
/// file that refuses mmap (sysfs) is read into memory.
#[test]
fn btf_from_pipes_stdin_fifos_and_sysfs() {
    let want = run(&["dump", &s(&small_btf())]).stdout;
    assert!(!want.is_empty());
    for name in ["-", "/dev/stdin"] {
        let mut child = btfkit()
            .args(["dump", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&std::fs::read(small_btf()).unwrap())
            .unwrap();
        let r = child.wait_with_output().unwrap();
        assert!(r.status.success(), "{name}");
        assert_eq!(r.stdout, want, "{name}");
    }
    let dir = scratch("rw-fifo-in");
    let fifo = dir.join("in.fifo");
    mkfifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(&fifo, std::fs::read(small_btf()).unwrap()).unwrap())
    };
    let r = run(&["dump", &s(&fifo)]);
    writer.join().unwrap();
    assert_eq!(r.stdout, want);
    let _ = std::fs::remove_dir_all(&dir);
    let sysfs = Path::new("/sys/kernel/btf/vmlinux");
    if sysfs.exists() {
        let r = run(&["stats", "/sys/kernel/btf/vmlinux"]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    } else {
        eprintln!("SKIPPED the sysfs case: no /sys/kernel/btf/vmlinux");
    }
    let r = run(&["dump", "/"]);
    assert!(one_error_line(&r, "dir").contains("is a directory"));
}

/// A base forgotten, or given to a standalone BTF, is said in those words.
#[test]
fn split_without_base_and_standalone_with_base_are_explained() {
    crate::needs_corpus!();
    let split = corpus_file("expected/modules/crc7.kernel.btf");
    let r = run(&["dump", &s(&split)]);
    assert!(one_error_line(&r, "split").contains("looks like split BTF; pass its base with -B"));
    let r = run(&["dump", &s(&small_btf()), "-B", &s(&small_btf())]);
    assert!(one_error_line(&r, "standalone").contains("is standalone BTF"));
}

/// `btfkit encode` alone is the demo (the sample is built in: it works from
/// any directory); any option without an input is a usage error.
#[test]
fn no_input_is_the_demo_only_when_bare() {
    let r = btfkit().arg("encode").current_dir("/").output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("the sample built into btfkit"));
    let dir = scratch("rw-noinput");
    let out = dir.join("x.btf");
    for args in [vec!["encode", "-o", &*s(&out)], vec!["encode", "-j2"]] {
        let r = run(&args);
        assert!(one_error_line(&r, "no input").contains("no input file"), "{args:?}");
    }
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-j` far past the work starts no more threads than there is work for;
/// `-j0` is an error in both front ends.
#[test]
fn thread_counts_are_bounded_and_zero_refused() {
    let t = std::time::Instant::now();
    let r = run(&["encode", &s(&fixture()), "-j", "100000"]);
    assert!(r.status.success());
    assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
    let r = run(&["encode", &s(&fixture()), "-j", "0"]);
    assert!(one_error_line(&r, "-j0").contains("bad thread count"));
    let r = run(&["pahole", "-J", "-j0", "--btf_encode_detached=/dev/null", &s(&fixture())]);
    assert!(one_error_line(&r, "pahole -j0").contains("bad thread count"));
}

/// Batch mode without a base says its outputs are standalone.
#[test]
fn batch_without_base_says_so() {
    let dir = scratch("rw-batch");
    let r = run(&["encode", "--out-dir", &s(&dir), &s(&fixture())]);
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("no --base given: each output is standalone BTF"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pahole --help`; the pahole front end under any name starting with
/// `pahole`; encode's `-B` and pahole's spellings of its options.
#[test]
fn pahole_help_names_and_spellings() {
    crate::needs_corpus!();
    let r = run(&["pahole", "--help"]);
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stdout).contains("--btf_encode_detached"));
    let dir = scratch("rw-names");
    let link = dir.join("pahole-btfkit");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_btfkit"), &link).unwrap();
    let r = Command::new(&link).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), "v1.31");
    let out = dir.join("o.btf");
    let r = run(&[
        "encode",
        &s(&fixture()),
        "--btf_features=+reproducible_build",
        "--lang_exclude=rust",
        "-o",
        &s(&out),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        read_corpus("expected/fixtures/ints.gcc-O2.default.btf")
    );
    let module = corpus_file("kernel/modules/crc7.ko");
    let vmlinux = corpus_file("expected/kernel/vmlinux.kernel.btf");
    let r = run(&[
        "encode",
        &s(&module),
        "-B",
        &s(&vmlinux),
        "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build",
        "--lang_exclude=rust",
        "-o",
        &s(&out),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        read_corpus("expected/modules/crc7.kernel.btf")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `verify` says the common refusals in plain words, and that a clang BPF
/// object's BTF (DATASECs of size 0) is completed by the loader.
#[test]
fn verify_explains_refusals() {
    crate::needs_corpus!();
    if !common::is_root() {
        eprintln!("SKIPPED: verify needs root");
        return;
    }
    let lost = corpus_file("expected/fixtures/structs_unions.gcc-O2-tu.kernel.btf");
    let r = run(&["verify", &s(&lost)]);
    assert_eq!(r.status.code(), Some(1));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        text.contains("Invalid arg#2") && text.contains("in plain words: a function prototype"),
        "{text}"
    );
    if !have_tool("clang", "--version") {
        eprintln!("SKIPPED the BPF object case: no clang");
        return;
    }
    let dir = scratch("rw-bpf");
    let c = dir.join("prog.c");
    std::fs::write(
        &c,
        "int counter;\n__attribute__((section(\"tp/x\"), used)) int prog(void *ctx) { counter++; return 0; }\n",
    )
    .unwrap();
    let o = dir.join("prog.o");
    let st = Command::new("clang")
        .args(["-g", "-O2", "-target", "bpf", "-c"])
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .status()
        .unwrap();
    assert!(st.success());
    let r = run(&["verify", &s(&o)]);
    assert_eq!(r.status.code(), Some(1));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("libbpf fills in DATASEC sizes"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Shell completions and the manual page come from the command definitions.
#[test]
fn completions_and_man_page_generate() {
    for shell in ["bash", "zsh", "fish"] {
        let r = run(&["completions", shell]);
        assert!(r.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(
            text.contains("btfkit") && text.contains("encode") && text.contains("type-units"),
            "{shell}"
        );
    }
    let r = run(&["man"]);
    assert!(r.status.success());
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains(".TH btfkit 1") && text.contains("conformance"), "{text}");
    if have_tool("bash", "--version") {
        let script = String::from_utf8(run(&["completions", "bash"]).stdout).unwrap();
        let st = Command::new("bash").args(["-n", "-c", &script]).status().unwrap();
        assert!(st.success(), "the bash completion script does not parse");
    }
}

/// `conformance` says which corpus it replays and where that came from; a
/// folder that is not the corpus is named as such.
#[test]
fn conformance_says_which_corpus() {
    crate::needs_corpus!();
    let corpus = corpus_dir();
    let r = btfkit()
        .args([
            "conformance",
            "--variants",
            "final",
            "--filter",
            "fixture/ints.gcc-O2/bare",
            "--corpus",
        ])
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!("corpus {} (from --corpus)", corpus.display())),
        "{err}"
    );
    let r = btfkit()
        .arg("conformance")
        .env_remove("BTFKIT_CORPUS")
        .current_dir("/")
        .output()
        .unwrap();
    let line = one_error_line(&r, "no corpus");
    assert!(
        line.contains("no manifest.tsv") && line.contains("../shared/corpus from the current directory"),
        "{line}"
    );
}

/// `--quiet` leaves out the summary (and batch mode's note), not errors.
#[test]
fn quiet_means_no_summary() {
    let r = run(&["encode", "-q", &s(&fixture())]);
    assert!(r.status.success() && r.stdout.is_empty() && r.stderr.is_empty());
    let dir = scratch("rw-quiet");
    let r = run(&["encode", "--quiet", "--out-dir", &s(&dir), &s(&fixture())]);
    assert!(r.status.success() && r.stdout.is_empty() && r.stderr.is_empty());
    let r = run(&["encode", "-q", "/nonexistent.o"]);
    one_error_line(&r, "quiet error");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An unsupported construct is named with the source it comes from: the
/// DIE's own name and declaration, or those of what uses it.
#[test]
fn unsupported_dwarf_names_its_source() {
    crate::needs_corpus!();
    for (bin, says) in [
        (
            "atomic.gcc-O2.o",
            "unsupported DW_TAG_atomic_type: BTF has no kind for it at DIE 0x4a (CU 0x0): used by `g_atomic_int` (atomic.c:2)",
        ),
        ("cxx_refs.g++-O2.o", "used by `g_member_ptr` (cxx_refs.cc:4)"),
        ("complex_float.gcc-O2.o", "at DIE 0x43 (CU 0x0): `complex double`"),
    ] {
        let input = corpus_file(&format!("fixtures/bin/{bin}"));
        let r = run(&[
            "pahole",
            "-J",
            "--btf_features=default",
            "--btf_encode_detached=/dev/null",
            &s(&input),
        ]);
        assert!(
            one_error_line(&r, bin).contains(says),
            "{bin}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
}

/// A symbolic link at `-o` is followed: its target gets the bytes, the
/// link stays a link.
#[test]
fn symlink_output_is_followed() {
    let dir = scratch("rw-symlink");
    let target = dir.join("target.btf");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.join("link.btf");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let r = run(&["encode", &s(&fixture()), "-o", &s(&link)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), expected_bare());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A large module's relocated `.debug_info` is a mapping of its own whose
/// pages are freed chunk by chunk once merged, instead of the whole copy
/// being held to the last unit (163 MB on amdgpu.ko). Taken here on
/// btrfs.ko by lowering the size from which that happens: the bytes equal
/// those encoded from the whole copy, at -j1 and -j2. The tests build with
/// debug assertions, under which a freed page faults when read, so a read
/// of a unit already given back fails this test instead of seeing zeros.
#[test]
fn a_modules_relocated_dwarf_given_back_chunk_by_chunk_gives_the_same_bytes() {
    crate::needs_corpus!();
    use btfkit::btf::write::to_bytes;
    use btfkit::elf::debug::{ElfInfo, SectionBytes};
    use btfkit::encode::{Options, encode_elf};
    let path = corpus_file("kernel/modules/btrfs.ko");
    let input = btfkit::elf::Input::open(&path).unwrap();
    assert!(input.mapping().is_some(), "the corpus file is mapped");
    let whole = ElfInfo::load_input_releasing_from(&input, usize::MAX).unwrap();
    assert!(matches!(whole.debug().info, SectionBytes::Owned(_)));
    for jobs in [1, 2] {
        let opts = Options {
            jobs,
            ..Options::default()
        };
        let want = encode_elf(&path, &whole, input.bytes(), None, &opts).unwrap();
        assert!(want.summary.cus > 3 * 8 * jobs, "too few chunks to give any back");
        // its .debug_str is its inputs' end to end: no offset comes back,
        // so names are not cached by offset (see the test below)
        assert!(!want.summary.debug_str_cached);
        let given_back = ElfInfo::load_input_releasing_from(&input, 1 << 20).unwrap();
        assert!(matches!(given_back.debug().info, SectionBytes::Relocated(_)));
        let got = encode_elf(&path, &given_back, input.bytes(), None, &opts).unwrap();
        assert!(to_bytes(&got.btf) == to_bytes(&want.btf), "-j{jobs}: bytes differ");
        // what was freed is not read again: a second encode of that load is refused
        let again = encode_elf(&path, &given_back, input.bytes(), None, &opts)
            .err()
            .expect("refused");
        assert!(again.to_string().contains("load the file again"), "{again}");
    }
}

/// A linked file's `.debug_str` is merged (one copy of each string), so a
/// name's offset comes back in every unit that uses it and names are
/// cached by offset; the same program as an `ld -r` object (the CLI
/// sample) and a module are not. Either way the bytes are the
/// reference's (the conformance floor replays both).
#[test]
fn a_linked_files_merged_strings_are_cached_by_offset() {
    use btfkit::elf::debug::ElfInfo;
    use btfkit::encode::{Options, encode_elf};
    let path = corpus_file("fixtures/bin/prog.gcc-O2.exe");
    let input = btfkit::elf::Input::open(&path).unwrap();
    let elf = ElfInfo::load_input(&input).unwrap();
    let got = encode_elf(&path, &elf, input.bytes(), None, &Options::default()).unwrap();
    assert!(got.summary.cus > 1);
    assert!(got.summary.debug_str_cached);
}
