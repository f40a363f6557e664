//! Differential test of random multi-CU C programs (issue 31).
//!
//! The collapse of exact copies (a later CU's type whose whole graph is an
//! exact copy of one already merged is never appended) must not change a
//! byte of the output. This test generates random programs
//! (`differential/gen.rs`, module `program`: 2–6 CUs sharing type definitions, with the
//! variations libbpf's dedup has to sort out), compiles each with gcc and
//! with clang, links the objects with `ld -r` (a relocatable object, like
//! a kernel module) and checks, for the kernel's feature set and the bare
//! default, that `btfkit encode --collapse` at -j1 and -j2, and plain
//! `btfkit encode -j2`, write the bytes of `btfkit encode -j1 --no-collapse`
//! (the full algorithm). A linked program whose units are repeated turns
//! the collapse on by default, with the same bytes.
//!
//! Environment:
//! - `BTFKIT_DIFFERENTIAL_CASES=N`: seeds 1..=N (default 16);
//!   `BTFKIT_DIFFERENTIAL_SEED=S`: only seed S, its files kept.
//! - `BTFKIT_REFERENCE_PAHOLE=/path/to/pahole`: also compare with
//!   `pahole -J -j1` (v1.31) on every case.
//!
//! A failing case keeps its sources, objects, outputs and a `commands.sh`
//! that rebuilds and re-encodes it, in the scratch folder the message
//! names; a passing case's folder is removed.

mod common;
#[path = "differential/gen.rs"]
mod program;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{have_tool, s};

use btfkit::encode::features::KERNEL_BUILD_FEATURES as KERNEL_FEATURES;

/// (name, `--btf-features` value); None: the bare default, no flag.
const FEATURE_SETS: &[(&str, Option<&str>)] = &[("kernel", Some(KERNEL_FEATURES)), ("bare", None)];

const DEFAULT_CASES: u64 = 16;

#[derive(Clone, Copy, Debug)]
enum Cc {
    Gcc,
    Clang,
}

impl Cc {
    fn name(self) -> &'static str {
        match self {
            Cc::Gcc => "gcc",
            Cc::Clang => "clang",
        }
    }

    /// The flags of one CU's compile. `-fno-eliminate-unused-debug-types`
    /// makes every defined type reach the DWARF, used or not; clang's
    /// `-fstandalone-debug` keeps it from leaving a struct's definition to
    /// another CU; `-w`: the generated code is valid but not warning-free
    /// (gcc 12 warns about clang's BTF tag attributes).
    fn flags(self, dwarf: u8) -> Vec<String> {
        let mut f: Vec<String> = ["-g", "-c", "-O2", "-w", "-fno-eliminate-unused-debug-types"]
            .map(String::from)
            .to_vec();
        f.push(format!("-gdwarf-{dwarf}"));
        if let Cc::Clang = self {
            f.push("-fstandalone-debug".into());
        }
        f
    }
}

struct Config {
    seeds: Vec<u64>,
    pahole: Option<PathBuf>,
    keep: bool,
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

fn config() -> Config {
    let (seeds, keep) = match env_u64("BTFKIT_DIFFERENTIAL_SEED") {
        Some(s) => (vec![s], true),
        None => (
            (1..=env_u64("BTFKIT_DIFFERENTIAL_CASES").unwrap_or(DEFAULT_CASES)).collect(),
            false,
        ),
    };
    let pahole = std::env::var_os("BTFKIT_REFERENCE_PAHOLE").map(PathBuf::from);
    Config { seeds, pahole, keep }
}

#[test]
fn collapse_matches_uncollapsed_on_random_programs() {
    // CI installs both compilers: a missing one is a broken setup, not a
    // reason to pass.
    for tool in ["gcc", "clang", "ld"] {
        assert!(
            have_tool(tool, "--version"),
            "{tool} not found: this test compiles and links C with gcc, clang and ld"
        );
    }
    let cfg = config();
    let root = common::scratch("differential");
    let start = Instant::now();
    let mut failures = Vec::new();
    let mut cases = 0;
    for &seed in &cfg.seeds {
        let prog = program::generate(seed);
        for cc in [Cc::Gcc, Cc::Clang] {
            cases += 1;
            let dir = root.join(format!("seed{seed}-{}", cc.name()));
            std::fs::create_dir_all(&dir).unwrap();
            match run_case(&dir, seed, &prog, cc, &cfg) {
                Ok(()) if !cfg.keep => std::fs::remove_dir_all(&dir).unwrap(),
                Ok(()) => eprintln!("seed {seed} {}: same; files in {}", cc.name(), dir.display()),
                Err(e) => failures.push(e),
            }
        }
    }
    eprintln!(
        "differential: {cases} cases ({} seeds x gcc, clang), {} failed, {:.1}s{}",
        cfg.seeds.len(),
        failures.len(),
        start.elapsed().as_secs_f64(),
        if cfg.pahole.is_some() {
            "; and against pahole"
        } else {
            ""
        }
    );
    if failures.is_empty() && !cfg.keep {
        let _ = std::fs::remove_dir_all(&root);
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n\n{}",
        failures.len(),
        failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n\n")
    );
}

/// The commands of one case, run and written to `commands.sh` in its
/// folder so a kept case can be replayed by hand.
struct Case<'a> {
    dir: &'a Path,
    seed: u64,
    script: String,
    what: String,
}

impl Case<'_> {
    /// Runs `cmd` in the case's folder; Err with its stderr on failure.
    fn run(&mut self, prog: &str, args: &[String]) -> Result<(), String> {
        let _ = writeln!(self.script, "{prog} {}", args.join(" "));
        let out = Command::new(prog)
            .args(args)
            .current_dir(self.dir)
            .output()
            .map_err(|e| format!("{prog}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "`{prog} {}` exited with {}:\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        ))
    }

    fn fail(&self, msg: &str) -> String {
        let _ = std::fs::write(self.dir.join("commands.sh"), &self.script);
        let commands: String = self.script.lines().skip(2).map(|l| format!("    {l}\n")).collect();
        format!(
            "{}: {msg}\n  files: {}; commands.sh replays the case:\n{commands}  rerun: \
             BTFKIT_DIFFERENTIAL_SEED={} cargo test --test differential",
            self.what,
            self.dir.display(),
            self.seed,
        )
    }
}

fn run_case(dir: &Path, seed: u64, prog: &program::Program, cc: Cc, cfg: &Config) -> Result<(), String> {
    let mut case = Case {
        dir,
        seed,
        script: format!("# seed {seed}, {}, in {}\nset -e\n", cc.name(), dir.display()),
        what: format!("seed {seed} {} (-gdwarf-{})", cc.name(), prog.dwarf),
    };
    let mut objects = Vec::new();
    for (i, cu) in prog.cus.iter().enumerate() {
        let c = format!("cu{i}.c");
        std::fs::write(dir.join(&c), &cu.source).unwrap();
        let mut args = cc.flags(prog.dwarf);
        // After the program's flags, so a CU's -gdwarf-N wins.
        args.extend(cu.flags.iter().cloned());
        args.extend([c, "-o".into(), format!("cu{i}.o")]);
        case.run(cc.name(), &args)
            .map_err(|e| case.fail(&format!("generator bug, the program does not compile: {e}")))?;
        objects.push(format!("cu{i}.o"));
    }
    let mut args = vec!["-r".to_string(), "-o".into(), "prog.o".into()];
    args.extend(objects);
    case.run("ld", &args).map_err(|e| case.fail(&e))?;

    // Every feature set is checked, even after one differs: which sets a
    // difference shows in is half the diagnosis.
    let errors: Vec<String> = FEATURE_SETS
        .iter()
        .filter_map(|&(set, features)| check_set(&mut case, cfg, set, features).err())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(case.fail(&errors.join("\n")))
    }
}

/// One feature set of a built case: btfkit's runs against the base run,
/// and the base run against pahole when there is one.
fn check_set(case: &mut Case, cfg: &Config, set: &str, features: Option<&str>) -> Result<(), String> {
    let dir = case.dir;
    let encode = |case: &mut Case, out: &str, extra: &[&str]| -> Result<Vec<u8>, String> {
        let mut args: Vec<String> = ["encode", "prog.o", "-q", "-o", out].map(String::from).to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        if let Some(f) = features {
            args.extend(["--btf-features".into(), f.into()]);
        }
        case.run(env!("CARGO_BIN_EXE_btfkit"), &args)
            .map_err(|e| format!("{set} features: {e}"))?;
        Ok(std::fs::read(dir.join(out)).unwrap())
    };
    let base_name = format!("{set}.j1.btf");
    let base = encode(case, &base_name, &["-j1", "--no-collapse"])?;
    let runs: [&[&str]; 3] = [&["--collapse", "-j1"], &["--collapse", "-j2"], &["-j2"]];
    for flags in runs {
        let name = format!("{set}.{}.btf", flags.join("").replace("--", "."));
        let ours = encode(case, &name, flags)?;
        if ours != base {
            let d = semantic_diff(dir, &name, &base_name);
            return Err(format!(
                "{set} features: `encode {}` ({name}) differs from `encode -j1` ({base_name}):\n{d}",
                flags.join(" ")
            ));
        }
    }
    let Some(pahole) = &cfg.pahole else { return Ok(()) };
    // A fresh name each time: pahole v1.31 does not truncate an existing
    // --btf_encode_detached file, so a longer old one leaves its tail behind.
    let name = format!("{set}.pahole.btf");
    let mut args = vec!["-J".to_string(), "-j1".into(), format!("--btf_encode_detached={name}")];
    if let Some(f) = features {
        args.push(format!("--btf_features={f}"));
    }
    args.push("prog.o".into());
    case.run(&s(pahole), &args)
        .map_err(|e| format!("{set} features: reference: {e}"))?;
    let reference = std::fs::read(dir.join(&name)).unwrap();
    if reference != base {
        let d = semantic_diff(dir, &base_name, &name);
        return Err(format!(
            "{set} features: btfkit ({base_name}) differs from pahole ({name}):\n{d}"
        ));
    }
    Ok(())
}

/// `btfkit diff`'s first lines, to say what differs, not only that.
fn semantic_diff(dir: &Path, a: &str, b: &str) -> String {
    let out = common::btfkit().args(["diff", a, b]).current_dir(dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let mut d = lines
        .iter()
        .take(30)
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > 30 {
        let _ = write!(d, "\n    ... {} more lines", lines.len() - 30);
    }
    d
}

/// Seed 88's finding, kept as a case of its own: gcc and clang describe a
/// struct of unnamed bitfields as one byte without members, which the
/// reference sizes 0 (directly, through a typedef and qualifier, as array
/// elements), so such a variable gets no VAR; the others still do.
#[test]
fn a_one_byte_struct_without_members_makes_no_variable() {
    let dir = common::scratch("differential-empty-base");
    std::fs::create_dir_all(&dir).unwrap();
    let src = "struct h { unsigned int : 6; };\n\
               __attribute__((section(\".data..percpu\"))) struct h pv;\n\
               typedef volatile struct h vh;\n\
               __attribute__((section(\".data..percpu\"))) vh pv2[3];\n\
               __attribute__((section(\".data..percpu\"))) int keep;\n";
    std::fs::write(dir.join("e.c"), src).unwrap();
    for cc in ["gcc", "clang"] {
        let st = Command::new(cc)
            .args(["-g", "-O2", "-c", "e.c", "-o", "e.o"])
            .current_dir(&dir)
            .status()
            .unwrap_or_else(|e| panic!("{cc}: {e} (this test needs gcc and clang)"));
        assert!(st.success(), "{cc} failed");
        let out = common::run(&[
            "encode",
            &s(&dir.join("e.o")),
            "-q",
            "--btf-features",
            "var",
            "-o",
            &s(&dir.join("e.btf")),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dump = common::run(&["dump", &s(&dir.join("e.btf"))]);
        let text = String::from_utf8_lossy(&dump.stdout);
        let vars: Vec<&str> = text.lines().filter(|l| l.contains("] VAR ")).collect();
        assert_eq!(vars.len(), 1, "{cc}: {text}");
        assert!(vars[0].contains("'keep'"), "{cc}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program whose `.debug_info` holds its units twice (as
/// benches/mem-scale.py makes them): the default encode finds the units
/// repeating and collapses their copies, which it does not on the program
/// itself, and writes the bytes of `--no-collapse` on both.
#[test]
fn repeated_units_turn_the_collapse_on_with_the_same_bytes() {
    if !have_tool("gcc", "--version") || !have_tool("objcopy", "--version") {
        eprintln!("skipped: gcc or objcopy not found");
        return;
    }
    let dir = common::scratch("collapse-repeated-units");
    std::fs::create_dir_all(&dir).unwrap();
    let shared = "struct node { struct node *next; int v; };\nstruct list { struct node *head; unsigned long n; };\n";
    std::fs::write(
        dir.join("a.c"),
        format!("{shared}struct list la;\nint count(struct list *l) {{ return l->n; }}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("b.c"),
        format!("{shared}struct list lb;\nint main(void) {{ return (int)lb.n; }}\n"),
    )
    .unwrap();
    let run = |cmd: &mut Command| {
        let o = cmd.current_dir(&dir).output().unwrap();
        assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
        o.stderr
    };
    run(Command::new("gcc").args(["-g", "-O2", "a.c", "b.c", "-o", "prog"]));
    common::with_info_twice(&dir.join("prog"), &dir.join("prog2"));
    for (input, repeats) in [("prog", false), ("prog2", true)] {
        let stats = run(Command::new(env!("CARGO_BIN_EXE_btfkit")).args([
            "encode",
            input,
            "--stats",
            "--json",
            "-o",
            &format!("{input}.btf"),
        ]));
        // --stats --json: one object, on stderr
        let v: serde_json::Value = serde_json::from_slice(&stats)
            .unwrap_or_else(|e| panic!("{input}: {e}: {}", String::from_utf8_lossy(&stats)));
        assert_eq!(v["counts"]["collapsing"], u64::from(repeats), "{input}: {v}");
        if repeats {
            assert!(v["counts"]["types_collapsed"].as_u64().unwrap() > 0, "{input}: {v}");
        }
        run(Command::new(env!("CARGO_BIN_EXE_btfkit")).args([
            "encode",
            input,
            "--no-collapse",
            "-q",
            "-o",
            &format!("{input}.full.btf"),
        ]));
        let (ours, full) = (
            std::fs::read(dir.join(format!("{input}.btf"))).unwrap(),
            std::fs::read(dir.join(format!("{input}.full.btf"))).unwrap(),
        );
        assert!(ours == full, "{input}: the collapsed bytes differ from --no-collapse");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
