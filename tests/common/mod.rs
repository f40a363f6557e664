//! Shared helpers for integration tests: corpus files by their decompressed
//! names, through the library's corpus cache (`btfkit::testing::corpus::cache_dir()`, `files/`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub use btfkit::testing::corpus::corpus_dir;

/// Whether the conformance corpus is here. A test that needs it starts with
/// [`needs_corpus!`]: without the corpus it is skipped, and the first skip
/// in a test binary says so on stderr with how to get it, unless
/// `BTFKIT_REQUIRE_CORPUS` is set (CI sets it), which makes a missing corpus
/// a failure.
pub fn have_corpus() -> bool {
    static SAID: std::sync::Once = std::sync::Once::new();
    let dir = corpus_dir();
    if dir.join("manifest.tsv").is_file() {
        return true;
    }
    if std::env::var_os("BTFKIT_REQUIRE_CORPUS").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!(
            "the conformance corpus is not at {} and BTFKIT_REQUIRE_CORPUS is set: point BTFKIT_CORPUS at it",
            dir.display()
        );
    }
    SAID.call_once(|| {
        // Straight to stderr: the test harness keeps what `eprintln!` prints
        // in a passing test to itself.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED in {}: the tests that need the conformance corpus (no manifest.tsv at {}); put the corpus at \
             ../shared/corpus or point BTFKIT_CORPUS at it to run them",
            std::env::args()
                .next()
                .unwrap_or_default()
                .rsplit('/')
                .next()
                .unwrap_or_default(),
            dir.display()
        );
    });
    false
}

/// Returns from the calling test, skipped, when the corpus is absent
/// ([`have_corpus`]).
#[macro_export]
macro_rules! needs_corpus {
    () => {
        if !$crate::common::have_corpus() {
            return;
        }
    };
}

/// The repository's fixture `name` (`tests/fixtures/NAME`).
pub fn repo_fixture(name: &str) -> PathBuf {
    crate_dir().join("tests/fixtures").join(name)
}

/// The small fixtures kept in the repository (`tests/fixtures/*`), sorted.
pub fn repo_fixtures() -> Vec<PathBuf> {
    let dir = crate_dir().join("tests/fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF")))
        .collect();
    v.sort();
    v
}

/// A readable path of corpus file `rel` (named without `.zst`). Panics when the
/// corpus does not have it: a test that needs it must not pass silently.
pub fn corpus_file(rel: &str) -> PathBuf {
    if let Some(p) = in_repository(rel) {
        return p;
    }
    if !have_corpus() {
        panic!(
            "{rel}: the conformance corpus is not here (see the SKIPPED line above) and the repository has no copy; \
             a test that needs it starts with needs_corpus!()"
        );
    }
    btfkit::testing::corpus::Corpus::open_default()
        .file(rel)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The repository's copy of corpus file `rel`, if it keeps one: the small
/// fixtures in `tests/fixtures/` (and `data/`), their expected BTF and
/// dumps in `tests/fixtures/expected/`. Byte for byte the corpus's files.
pub fn in_repository(rel: &str) -> Option<PathBuf> {
    let root = crate_dir();
    let candidates = if let Some(name) = rel.strip_prefix("fixtures/bin/") {
        vec![root.join("tests/fixtures").join(name), root.join("data").join(name)]
    } else if let Some(name) = rel.strip_prefix("expected/fixtures/") {
        vec![root.join("tests/fixtures/expected").join(name)]
    } else {
        vec![]
    };
    candidates.into_iter().find(|p| p.is_file())
}

/// Names (decompressed) of the files in corpus folder `rel` ending in `suffix`.
pub fn corpus_list(rel: &str, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus_dir().join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .map(|n| n.strip_suffix(".zst").map(str::to_string).unwrap_or(n))
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether `tool` can be run (it answers `--version`/`version`).
pub fn have_tool(tool: &str, arg: &str) -> bool {
    std::process::Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes `input` with its `.debug_info` twice over to `out` (the units
/// repeated, as benches/mem-scale.py makes its k = 2 input), with objcopy;
/// the caller checks `have_tool("objcopy", "--version")` first.
pub fn with_info_twice(input: &Path, out: &Path) {
    let info = out.with_extension("info");
    let objcopy = |args: &[&str]| {
        let o = std::process::Command::new("objcopy").args(args).output().unwrap();
        assert!(
            o.status.success(),
            "objcopy {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    // (objcopy writes a copy while dumping: into `out`, replaced below)
    objcopy(&[
        "--dump-section",
        &format!(".debug_info={}", s(&info)),
        &s(input),
        &s(out),
    ]);
    let bytes = std::fs::read(&info).unwrap();
    std::fs::write(&info, [&bytes[..], &bytes[..]].concat()).unwrap();
    objcopy(&[
        &format!("--update-section=.debug_info={}", s(&info)),
        &s(input),
        &s(out),
    ]);
    let _ = std::fs::remove_file(&info);
}

/// The bpftool to compare with: $BPFTOOL, else `bpftool` on PATH, else
/// Debian's /usr/sbin/bpftool (not on a normal user's PATH); None if none runs.
pub fn bpftool() -> Option<String> {
    let candidates = std::env::var("BPFTOOL")
        .ok()
        .into_iter()
        .chain(["bpftool".into(), "/usr/sbin/bpftool".into()]);
    candidates.into_iter().find(|c| have_tool(c, "version"))
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn cache_dir() -> PathBuf {
    btfkit::testing::corpus::cache_dir()
}

pub fn btfkit() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_btfkit"))
}

pub fn run(args: &[&str]) -> std::process::Output {
    btfkit().args(args).output().expect("run btfkit")
}

/// A fresh scratch folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = cache_dir()
        .join("test-scratch")
        .join(format!("{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn s(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

pub fn read_corpus(rel: &str) -> Vec<u8> {
    let p = corpus_file(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One TSV manifest as rows of column name -> value.
pub fn read_manifest(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("empty manifest")
        .split('\t')
        .map(String::from)
        .collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| header.iter().cloned().zip(l.split('\t').map(String::from)).collect())
        .collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Compiles C `src` with `gcc -g -O0 -c` into `dir/stem.o`; `None`, after a
/// SKIPPED line naming the case, when gcc is not installed.
#[allow(dead_code)]
pub fn gcc_object(dir: &std::path::Path, stem: &str, src: &str) -> Option<std::path::PathBuf> {
    if !have_tool("gcc", "--version") {
        eprintln!("SKIPPED {stem}: gcc not found; this case compiles its input with gcc");
        return None;
    }
    let c = dir.join(format!("{stem}.c"));
    let o = dir.join(format!("{stem}.o"));
    std::fs::write(&c, src).unwrap();
    let r = std::process::Command::new("gcc")
        .args(["-g", "-O0", "-c"])
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .output()
        .unwrap();
    assert!(r.status.success(), "gcc {stem}: {}", String::from_utf8_lossy(&r.stderr));
    Some(o)
}

/// File offset, size and section index of ELF section `name` in `data`
/// (panics naming the section when it is missing).
pub fn section_range(data: &[u8], name: &str) -> (usize, usize, usize) {
    use object::{Object, ObjectSection};
    let obj = object::File::parse(data).unwrap();
    let s = obj.section_by_name(name).unwrap_or_else(|| panic!("no {name}"));
    let (off, size) = s.file_range().unwrap();
    (off as usize, size as usize, s.index().0)
}

/// The sha256 of a file's bytes, as lower-case hex (the manifests' form).
pub fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The conformance floor (tests/conformance-floor.tsv) as (variant, case id)
/// pairs: the corpus rows btfkit is known to reproduce byte for byte.
/// Tests that walk every manifest row check the rows of the floor and
/// report the others (new corpus rows not passing yet) instead of failing.
pub fn conformance_floor() -> std::collections::HashSet<(String, String)> {
    let path = crate_dir().join("tests/conformance-floor.tsv");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split_once('\t'))
        .map(|(v, c)| (v.to_string(), c.to_string()))
        .collect()
}

/// Whether the tests run as root (the kernel's `BPF_BTF_LOAD` needs it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
