//! Every way of handing btfkit an input gives the bytes the file path
//! gives: standard input, a pipe, a FIFO and bash's `<(…)` (a `/dev/fd`
//! path), for `encode`, the pahole front end, `dump`, `stats` and `diff`.
//! A relocatable object read from a pipe once lost its relocations (its
//! heap copy was handed to `madvise` as if it were a file mapping) and gave
//! other BTF with exit 0.
//!
//! The repository's fixtures run from a bare clone; with the corpus, every
//! corpus fixture and a module over its vmlinux run too.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

/// How the input reaches btfkit.
#[derive(Clone, Copy, Debug)]
enum Via {
    Path,
    /// `-`, standard input redirected from the file.
    Stdin,
    /// `-`, standard input a pipe that a thread writes the bytes into.
    Pipe,
    /// A FIFO's path, a thread writing the bytes into it.
    Fifo,
    /// bash's process substitution: `<(cat FILE)`.
    ProcSubst,
}

const ALL: [Via; 5] = [Via::Path, Via::Stdin, Via::Pipe, Via::Fifo, Via::ProcSubst];

/// Runs btfkit with `args`, where `{in}` is the input handed over `via`.
fn run_via(via: Via, input: &Path, args: &[&str], dir: &Path) -> Output {
    let bytes = std::fs::read(input).unwrap();
    let with = |arg: &str| -> Vec<String> { args.iter().map(|a| a.replace("{in}", arg)).collect() };
    match via {
        Via::Path => btfkit().args(with(&s(input))).output().unwrap(),
        Via::Stdin => btfkit()
            .args(with("-"))
            .stdin(std::fs::File::open(input).unwrap())
            .output()
            .unwrap(),
        Via::Pipe => {
            let mut child = btfkit()
                .args(with("-"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let writer = std::thread::spawn(move || {
                // in small writes, so the reader sees short reads
                for chunk in bytes.chunks(4093) {
                    if stdin.write_all(chunk).is_err() {
                        break;
                    }
                }
            });
            let out = child.wait_with_output().unwrap();
            writer.join().unwrap();
            out
        }
        Via::Fifo => {
            let fifo = dir.join("input.fifo");
            let _ = std::fs::remove_file(&fifo);
            let c = std::ffi::CString::new(s(&fifo)).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
            let f2 = fifo.clone();
            let writer = std::thread::spawn(move || {
                // blocks until btfkit opens the FIFO for reading
                let mut w = std::fs::OpenOptions::new().write(true).open(&f2).unwrap();
                let _ = w.write_all(&bytes);
            });
            let out = btfkit().args(with(&s(&fifo))).output().unwrap();
            writer.join().unwrap();
            let _ = std::fs::remove_file(&fifo);
            out
        }
        Via::ProcSubst => {
            let quoted: Vec<String> = with("__IN__")
                .iter()
                .map(|a| {
                    if a == "__IN__" {
                        format!("<(cat '{}')", s(input))
                    } else {
                        format!("'{a}'")
                    }
                })
                .collect();
            Command::new("bash")
                .arg("-c")
                .arg(format!("exec '{}' {}", env!("CARGO_BIN_EXE_btfkit"), quoted.join(" ")))
                .output()
                .unwrap()
        }
    }
}

/// Runs `args` over `input` every way; the outcome by path must be a
/// success, and every other way must give its stdout and, if `out` is in
/// the arguments, the same output file's bytes.
fn same_every_way(tag: &str, input: &Path, args: &[&str], out: Option<&Path>, dir: &Path) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut by_path: Option<(Vec<u8>, Vec<u8>)> = None;
    for via in ALL {
        if let Some(o) = out {
            let _ = std::fs::remove_file(o);
        }
        let r = run_via(via, input, args, dir);
        let stderr = String::from_utf8_lossy(&r.stderr);
        if !r.status.success() {
            wrong.push(format!("{tag} via {via:?}: exit {:?}: {stderr}", r.status.code()));
            continue;
        }
        let file = out.map(|o| std::fs::read(o).unwrap_or_default()).unwrap_or_default();
        // `stats` names its input on its first line: what it says of it
        // must be the same
        let stdout = match r.stdout.iter().position(|&b| b == b'\n') {
            Some(n) if args[0] == "stats" => {
                let first = String::from_utf8_lossy(&r.stdout[..n]);
                let said = first.split_once(": ").map_or(&first[..], |(_, said)| said).to_string();
                [said.as_bytes(), &r.stdout[n..]].concat()
            }
            _ => r.stdout,
        };
        match &by_path {
            None => by_path = Some((file, stdout)),
            Some((f, o)) => {
                if f != &file {
                    wrong.push(format!("{tag} via {via:?}: other output bytes than by path"));
                }
                if o != &stdout {
                    wrong.push(format!("{tag} via {via:?}: other stdout than by path"));
                }
            }
        }
    }
    wrong
}

/// Every way, for every ELF command over one ELF input, and for the BTF
/// commands over the BTF it gives.
fn check_elf(input: &Path, base: Option<&Path>, dir: &Path) -> Vec<String> {
    let name = input.file_name().unwrap().to_string_lossy().into_owned();
    let out = dir.join("out.btf");
    let out_s = s(&out);
    let mut encode = vec!["encode", "{in}", "-o", &out_s, "-q"];
    let detached = format!("--btf_encode_detached={out_s}");
    let mut pahole = vec!["pahole", "-J", &detached];
    let base_s = base.map(s).unwrap_or_default();
    let base_arg = format!("--btf_base={base_s}");
    if base.is_some() {
        encode.extend(["--base", &base_s]);
        pahole.push(&base_arg);
    }
    pahole.push("{in}");
    let mut wrong = same_every_way(&format!("{name}: encode"), input, &encode, Some(&out), dir);
    wrong.extend(same_every_way(
        &format!("{name}: pahole -J"),
        input,
        &pahole,
        Some(&out),
        dir,
    ));
    // The BTF commands, on the output by path.
    let btf = dir.join("by-path.btf");
    let r = btfkit()
        .args([&encode[..1], &[&s(input)], &encode[2..]].concat())
        .output()
        .unwrap();
    assert!(r.status.success(), "{name}: {}", String::from_utf8_lossy(&r.stderr));
    std::fs::rename(&out, &btf).unwrap();
    let with_base = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if base.is_some() {
            v.extend(["-B".into(), base_s.clone()]);
        }
        v
    };
    for args in [
        with_base(&["dump", "{in}"]),
        with_base(&["dump", "{in}", "--format", "json"]),
        with_base(&["stats", "{in}"]),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        wrong.extend(same_every_way(&format!("{name}: {}", args[0]), &btf, &args, None, dir));
    }
    // diff of the BTF against itself, the second file handed over each way
    let btf_s = s(&btf);
    let mut diff = vec!["diff", &btf_s, "{in}"];
    if base.is_some() {
        diff.extend(["--base", &base_s]);
    }
    wrong.extend(same_every_way(&format!("{name}: diff"), &btf, &diff, None, dir));
    wrong
}

fn report(what: &str, checked: usize, wrong: &[String]) {
    eprintln!("{what}: {checked} inputs, {} wrong", wrong.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_repository_fixtures_give_the_same_bytes_every_way() {
    let dir = scratch("input-paths-repo");
    let fixtures = repo_fixtures();
    assert!(fixtures.len() >= 10);
    let mut wrong = Vec::new();
    for f in &fixtures {
        wrong.extend(check_elf(f, None, &dir));
    }
    // Split BTF: a fixture over another's BTF as its base.
    let base = dir.join("base.btf");
    let base_input = crate_dir().join("tests/fixtures/structs_unions.gcc-O2.o");
    let r = run(&["encode", &s(&base_input), "-o", &s(&base), "-q"]);
    assert!(r.status.success());
    wrong.extend(check_elf(
        &crate_dir().join("tests/fixtures/multi_cu_pair.gcc-O2.ld-r.o"),
        Some(&base),
        &dir,
    ));
    report("repository fixtures", fixtures.len() + 1, &wrong);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every corpus fixture that encodes by path, and a module over its
/// vmlinux's BTF.
#[test]
fn every_corpus_fixture_and_a_module_give_the_same_bytes_every_way() {
    needs_corpus!();
    let dir = scratch("input-paths-corpus");
    let mut wrong = Vec::new();
    let mut checked = 0;
    for name in corpus_list("fixtures/bin", "") {
        let f = corpus_file(&format!("fixtures/bin/{name}"));
        let by_path = run(&["encode", &s(&f), "-o", &s(&dir.join("probe.btf")), "-q"]);
        if !by_path.status.success() {
            // refused by path (an unsupported construct): refused every way
            for via in ALL {
                let r = run_via(via, &f, &["encode", "{in}", "-o", &s(&dir.join("x.btf")), "-q"], &dir);
                if r.status.code() != Some(2) {
                    wrong.push(format!(
                        "{name}: refused by path, exit {:?} via {via:?}",
                        r.status.code()
                    ));
                }
            }
            continue;
        }
        checked += 1;
        wrong.extend(check_elf(&f, None, &dir));
    }
    assert!(checked >= 120, "only {checked} corpus fixtures encode");
    let base: PathBuf = corpus_file("expected/kernel/vmlinux.kernel.btf");
    wrong.extend(check_elf(&corpus_file("kernel/modules/fou.ko"), Some(&base), &dir));
    report("corpus fixtures and fou.ko", checked + 1, &wrong);
    let _ = std::fs::remove_dir_all(&dir);
}
