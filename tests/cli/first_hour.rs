//! What a new user meets in the first hour: quiet pipes at any size, errors
//! that say what to do, help text that can be pasted back, a manual page
//! per subcommand and a README that names every flag.

use std::io::Read;
use std::process::{Command, Output, Stdio};

use crate::common::{corpus_file, crate_dir, repo_fixture as fixture, run as btfkit, s, scratch};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs btfkit with its standard output a pipe whose reader takes 10 bytes
/// and closes it, as `| head -c 10` does.
fn into_head(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_btfkit"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut ten = [0u8; 10];
    out.read_exact(&mut ten).unwrap();
    drop(out);
    child.wait_with_output().unwrap()
}

/// Outputs far larger than a pipe's buffer (the vmlinux's BTF, 5 MB), cut
/// short by their reader: exit 0 and nothing on stderr, as for small ones.
#[test]
fn a_closed_pipe_is_quiet_at_any_size() {
    crate::needs_corpus!();
    let vmlinux_btf = corpus_file("expected/kernel/vmlinux.kernel.btf");
    let module = corpus_file("kernel/modules/fou.ko");
    for args in [
        vec!["dedup".to_string(), s(&vmlinux_btf), "-o".into(), "-".into()],
        vec!["dump".to_string(), s(&vmlinux_btf)],
        vec![
            "encode".to_string(),
            s(&module),
            "--base".into(),
            s(&vmlinux_btf),
            "--no-dedup".into(),
            "-o".into(),
            "-".into(),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = into_head(&args);
        assert_eq!((r.status.code(), stderr(&r).as_str()), (Some(0), ""), "{args:?}");
    }
    // and a small one
    let r = into_head(&["encode", &s(&fixture("ints.gcc-O2.o")), "-o", "-", "-q"]);
    assert_eq!((r.status.code(), stderr(&r).as_str()), (Some(0), ""));
}

/// A module's `.BTF` is split BTF: every reader says to pass its base.
#[test]
fn a_modules_split_btf_section_asks_for_its_base() {
    let dir = scratch("first-hour-split");
    let base = dir.join("base.btf");
    assert!(
        btfkit(&["encode", &s(&fixture("structs_unions.gcc-O2.o")), "-o", &s(&base), "-q"])
            .status
            .success()
    );
    let m = dir.join("m.ko");
    std::fs::copy(fixture("multi_cu_pair.gcc-O2.ld-r.o"), &m).unwrap();
    let r = btfkit(&["pahole", "-J", &format!("--btf_base={}", s(&base)), &s(&m)]);
    assert!(r.status.success(), "{}", stderr(&r));
    let m_s = s(&m);
    for args in [
        vec!["dump", &m_s],
        vec!["stats", &m_s],
        vec!["diff", &m_s, &m_s],
        vec!["dump", &m_s, "--format", "c"],
    ] {
        let r = btfkit(&args);
        let err = stderr(&r);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("section .BTF: this looks like split BTF; pass its base with -B"),
            "{args:?}: {err}"
        );
    }
    assert!(btfkit(&["dump", &m_s, "-B", &s(&base)]).status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A list entry that cannot be opened: the reason on stderr, in its report
/// line, and in `btfkit report`.
#[test]
fn a_list_entry_that_cannot_be_opened_says_why() {
    let dir = scratch("first-hour-list");
    std::fs::write(dir.join("list.txt"), "nosuch.deb\n").unwrap();
    let out = dir.join("out");
    let r = btfkit(&[
        "kernel",
        "--list",
        &s(&dir.join("list.txt")),
        "--out-dir",
        &s(&out),
        "-q",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("nosuch.deb: No such file or directory"),
        "{}",
        stderr(&r)
    );
    let report = std::fs::read_to_string(out.join("report-0-of-1.jsonl")).unwrap();
    assert!(
        report.contains("nosuch.deb: No such file or directory (os error 2)\""),
        "{report}"
    );
    let r = btfkit(&["report", &s(&out)]);
    let said = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        said.contains("nosuch.deb: failed: ") && said.contains("nosuch.deb: No such file or directory"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_of_a_directory_without_reports_is_an_error() {
    let dir = scratch("first-hour-noreport");
    let r = btfkit(&["report", &s(&dir)]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(r.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("btfkit: error: no report*.jsonl or core-check-*.json in "),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two runs of one kernel each are two items.
#[test]
fn report_counts_each_kernel_of_single_runs() {
    let dir = scratch("first-hour-two-kernels");
    let mut outs = Vec::new();
    for k in ["a", "b"] {
        let tree = dir.join(format!("tree-{k}"));
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::copy(fixture("prog.gcc-O2.exe"), tree.join("vmlinux")).unwrap();
        let out = dir.join(format!("out-{k}"));
        let r = btfkit(&["kernel", &s(&tree), "--out-dir", &s(&out), "-q"]);
        assert!(r.status.success(), "{}", stderr(&r));
        outs.push(s(&out));
    }
    let r = btfkit(&["report", &outs[0], &outs[1]]);
    let said = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{said}");
    assert!(said.contains("2 reports, 2 items (0 missing)"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn btfkit_alone_prints_its_usage_without_calling_it_an_error() {
    let r = btfkit(&[]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(2));
    assert!(!err.contains("error"), "{err}");
    assert!(
        err.contains("Usage: btfkit <COMMAND>") && err.contains("encode"),
        "{err}"
    );
}

#[test]
fn encode_of_a_directory_without_modules_prints_only_the_error() {
    let dir = scratch("first-hour-empty-dir");
    let r = btfkit(&["encode", &s(&dir)]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("btfkit: error: no input modules"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The kernel set as the help texts print it, pasted back with the spaces
/// a wrapped line leaves, is accepted; both help texts list the same set.
#[test]
fn feature_lists_from_the_help_can_be_pasted() {
    let help = |cmd: &str| String::from_utf8(btfkit(&[cmd, "--help"]).stdout).unwrap();
    let set = "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";
    for cmd in ["encode", "kernel"] {
        assert!(help(cmd).contains(set), "{cmd} --help does not list {set}");
    }
    let pasted = set.replace(',', ", ");
    let dir = scratch("first-hour-features");
    let (a, b) = (dir.join("a.btf"), dir.join("b.btf"));
    let input = s(&fixture("ints.gcc-O2.o"));
    let r = btfkit(&["encode", &input, "--btf-features", &pasted, "-o", &s(&a), "-q"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(
        btfkit(&["encode", &input, "--btf-features", set, "-o", &s(&b), "-q"])
            .status
            .success()
    );
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The subcommands, as `btfkit --help` lists them.
fn subcommands() -> Vec<String> {
    let help = String::from_utf8(btfkit(&["--help"]).stdout).unwrap();
    let list = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap();
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The long flags a subcommand's `--help` names.
fn flags(cmd: &str) -> Vec<String> {
    let help = String::from_utf8(btfkit(&[cmd, "--help"]).stdout).unwrap();
    let mut v: Vec<String> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| w.starts_with("--") && w.len() > 2 && w.as_bytes()[2].is_ascii_lowercase())
        .filter(|w| *w != "--help")
        .map(String::from)
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn every_subcommand_has_a_manual_page_with_options_exit_codes_and_examples() {
    let dir = scratch("first-hour-man");
    let r = btfkit(&["man", "--dir", &s(&dir)]);
    assert!(r.status.success(), "{}", stderr(&r));
    let main = std::fs::read_to_string(dir.join("btfkit.1")).unwrap();
    let subs = subcommands();
    assert!(subs.len() >= 10, "{subs:?}");
    for sub in &subs {
        let page = std::fs::read_to_string(dir.join(format!("btfkit-{sub}.1")))
            .unwrap_or_else(|e| panic!("btfkit-{sub}.1: {e}"));
        assert!(
            main.contains(&format!("btfkit\\-{sub}(1)")),
            "btfkit.1 does not point to btfkit-{sub}(1)"
        );
        for section in [".SH NAME", ".SH SYNOPSIS", ".SH \"EXIT STATUS\"", ".SH EXAMPLES"] {
            assert!(page.contains(section), "btfkit-{sub}.1 has no {section}");
        }
        for f in flags(sub) {
            assert!(
                page.contains(&f.replace('-', "\\-")),
                "btfkit-{sub}.1 does not name {f}"
            );
        }
        // the page printed alone is the one written
        let one = btfkit(&["man", sub]);
        assert_eq!(String::from_utf8(one.stdout).unwrap(), page, "btfkit man {sub}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_readme_names_every_flag_of_every_subcommand() {
    let readme = std::fs::read_to_string(crate_dir().join("README.md")).unwrap();
    let mut missing = Vec::new();
    for sub in subcommands().iter().filter(|s| *s != "pahole") {
        for f in flags(sub) {
            if !readme.contains(&f) {
                missing.push(format!("{sub} {f}"));
            }
        }
    }
    assert!(missing.is_empty(), "README.md does not name: {}", missing.join(", "));
}

#[test]
fn diff_json_describes_a_removed_tag() {
    let dir = scratch("first-hour-diff-tag");
    let input = s(&fixture("kfuncs.gcc-O2.o"));
    let (a, b) = (dir.join("a.btf"), dir.join("b.btf"));
    let base = "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func";
    let with = format!("{base},decl_tag_kfuncs");
    assert!(
        btfkit(&["encode", &input, "--btf-features", &with, "-o", &s(&a), "-q"])
            .status
            .success()
    );
    assert!(
        btfkit(&["encode", &input, "--btf-features", base, "-o", &s(&b), "-q"])
            .status
            .success()
    );
    let r = btfkit(&["diff", "--json", &s(&a), &s(&b)]);
    assert_eq!(r.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let removed: Vec<&serde_json::Value> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("decl_tag bpf_kfunc on func"))
        })
        .collect();
    assert!(!removed.is_empty(), "{v}");
    for d in removed {
        assert_eq!(d["change"], "removed");
        assert_eq!(d["old"], d["path"], "{d}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
