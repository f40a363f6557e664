//! Every section of every small fixture, damaged one at a time in its
//! section header or its contents, the way a truncated download or a broken
//! strip tool leaves a file: its size cut to 0, 1 byte, a third, a half and
//! one byte short (a string section's last string then loses its NUL), its
//! offset set past the end of the file, and a few bytes garbled at its start
//! and at its end. `encode` (and `dump`, for a `.BTF` section) must end each
//! run with exit 0 or 2 within the time limit, never a panic, and write no
//! output when it fails.
//!
//! The fixtures are the repository's own (`tests/fixtures/`: every
//! architecture, DWARF 4 and 5, gcc, clang and rustc, `ld -r`, type units,
//! LTO, a linked executable), so this runs from a bare clone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::*;
use crate::matrix::{Outcome, files_in, run_bounded};

/// The parts of an ELF file's section table this test edits, for either
/// class and byte order.
struct Layout {
    is64: bool,
    big: bool,
}

impl Layout {
    fn of(d: &[u8]) -> Layout {
        Layout {
            is64: d[4] == 2,
            big: d[5] == 2,
        }
    }

    fn get(&self, d: &[u8], at: usize, n: usize) -> u64 {
        let b = &d[at..at + n];
        if self.big {
            b.iter().fold(0, |v, &x| (v << 8) | x as u64)
        } else {
            b.iter().rev().fold(0, |v, &x| (v << 8) | x as u64)
        }
    }

    fn put(&self, d: &mut [u8], at: usize, n: usize, v: u64) {
        for i in 0..n {
            let byte = (v >> (8 * i)) as u8;
            let pos = if self.big { at + n - 1 - i } else { at + i };
            d[pos] = byte;
        }
    }

    /// The word size of address-sized fields.
    fn word(&self) -> usize {
        if self.is64 { 8 } else { 4 }
    }

    fn shdr(&self, d: &[u8], i: usize) -> usize {
        let (shoff, ent) = if self.is64 { (0x28, 64) } else { (0x20, 40) };
        self.get(d, shoff, self.word()) as usize + i * ent
    }

    fn count(&self, d: &[u8]) -> usize {
        self.get(d, if self.is64 { 0x3c } else { 0x30 }, 2) as usize
    }

    fn sh_type(&self, d: &[u8], i: usize) -> u32 {
        self.get(d, self.shdr(d, i) + 4, 4) as u32
    }

    /// Where the section's offset and size fields are.
    fn offset_at(&self, d: &[u8], i: usize) -> usize {
        self.shdr(d, i) + if self.is64 { 0x18 } else { 0x10 }
    }

    fn size_at(&self, d: &[u8], i: usize) -> usize {
        self.shdr(d, i) + if self.is64 { 0x20 } else { 0x14 }
    }

    fn range(&self, d: &[u8], i: usize) -> (usize, usize) {
        let w = self.word();
        (
            self.get(d, self.offset_at(d, i), w) as usize,
            self.get(d, self.size_at(d, i), w) as usize,
        )
    }

    fn name(&self, d: &[u8], i: usize) -> String {
        let strndx = self.get(d, if self.is64 { 0x3e } else { 0x32 }, 2) as usize;
        let (stroff, _) = self.range(d, strndx);
        let at = stroff + self.get(d, self.shdr(d, i), 4) as usize;
        let end = d[at..].iter().position(|&b| b == 0).unwrap();
        String::from_utf8_lossy(&d[at..at + end]).into_owned()
    }
}

const SHT_NOBITS: u32 = 8;

/// One damaged copy of a file: what was done, and the bytes.
struct Case {
    what: String,
    bytes: Vec<u8>,
}

/// The damaged copies of `d`, section by section (section 0 and sections
/// without contents in the file are left alone).
fn damaged(d: &[u8], only: Option<&str>) -> Vec<Case> {
    let l = Layout::of(d);
    let mut cases = Vec::new();
    for i in 1..l.count(d) {
        if l.sh_type(d, i) == SHT_NOBITS {
            continue;
        }
        let name = l.name(d, i);
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let (off, size) = l.range(d, i);
        let mut sized = |what: String, v: usize, field: usize| {
            let mut b = d.to_vec();
            l.put(&mut b, field, l.word(), v as u64);
            cases.push(Case {
                what: format!("section {i} ({name}): {what}"),
                bytes: b,
            });
        };
        let mut cuts = vec![0, 1, size / 3, size / 2, size.saturating_sub(1)];
        cuts.retain(|&c| c < size);
        cuts.dedup();
        for cut in cuts {
            sized(format!("size {size} cut to {cut}"), cut, l.size_at(d, i));
        }
        sized(format!("offset {off:#x} past the end"), d.len() + 16, l.offset_at(d, i));
        if size > 0 {
            let n = size.min(8);
            for (where_, at) in [("start", off), ("end", off + size - n)] {
                let mut b = d.to_vec();
                for (k, byte) in b[at..at + n].iter_mut().enumerate() {
                    *byte ^= 0xa5 ^ (k as u8).wrapping_mul(0x3b);
                }
                cases.push(Case {
                    what: format!("section {i} ({name}): {n} bytes garbled at its {where_}"),
                    bytes: b,
                });
            }
        }
    }
    cases
}

fn fixtures() -> Vec<PathBuf> {
    let v = repo_fixtures();
    assert!(v.len() >= 10, "tests/fixtures holds {} ELF files", v.len());
    v
}

/// Runs `args` (with `{in}` and `{out}` standing for the damaged input and
/// an output path) on every case, on two threads; returns the failures.
fn run_all(tag: &str, cases: Vec<(String, Case)>, args: &[&str]) -> (usize, Vec<String>) {
    let next = AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(Vec::new());
    let errors = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for t in 0..2 {
            let (cases, next, failed, errors) = (&cases, &next, &failed, &errors);
            sc.spawn(move || {
                let dir = scratch(&format!("sections-{tag}-{t}"));
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some((file, case)) = cases.get(k) else { break };
                    let input = dir.join(file);
                    let out = dir.join("out.btf");
                    std::fs::write(&input, &case.bytes).unwrap();
                    let argv: Vec<String> = args
                        .iter()
                        .map(|a| a.replace("{in}", &s(&input)).replace("{out}", &s(&out)))
                        .collect();
                    let o = run_bounded(&format!("{tag}-{t}"), &argv);
                    if let Some(why) = judge(&o, &input, &out, &dir) {
                        failed.lock().unwrap().push(format!("{file}: {}: {why}", case.what));
                    }
                    if o.code == Some(2) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = std::fs::remove_file(&out);
                    let _ = std::fs::remove_file(&input);
                }
                let _ = std::fs::remove_dir_all(&dir);
            });
        }
    });
    (errors.into_inner(), failed.into_inner().unwrap())
}

/// What is wrong with a run's outcome, if anything.
fn judge(o: &Outcome, input: &Path, out: &Path, dir: &Path) -> Option<String> {
    let stderr = o.stderr.trim_end();
    if stderr.contains("panicked") || o.code == Some(101) {
        return Some(format!("panic: {stderr}"));
    }
    match o.code {
        Some(0) => None,
        Some(2) => {
            let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("btfkit: error: ")).collect();
            if errors.len() != 1 {
                Some(format!("exit 2 without exactly one error line: {stderr}"))
            } else if !errors[0].contains(&s(input)) {
                Some(format!("the error does not name the file: {stderr}"))
            } else if out.exists() || !o.stdout.is_empty() {
                Some("exit 2 and an output file".into())
            } else if files_in(dir) != vec![input.to_path_buf()] {
                Some(format!("stray files: {:?}", files_in(dir)))
            } else {
                None
            }
        }
        c => Some(format!("exit {c:?}: {stderr}")),
    }
}

fn report(what: &str, total: usize, errors: usize, failed: &[String]) {
    eprintln!(
        "{what}: {total} damaged inputs, {errors} refused with exit 2, {} wrong",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {total} damaged inputs went wrong:\n{}",
        failed.len(),
        failed.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn every_section_of_every_fixture_damaged_encodes_or_is_refused() {
    let mut cases = Vec::new();
    for f in fixtures() {
        let d = std::fs::read(&f).unwrap();
        let file = f.file_name().unwrap().to_string_lossy().into_owned();
        cases.extend(damaged(&d, None).into_iter().map(|c| (file.clone(), c)));
    }
    // fuzz/run.sh seeds the ELF fuzz targets with these inputs
    if let Some(dir) = std::env::var_os("BTFKIT_DAMAGE_SEEDS") {
        std::fs::create_dir_all(&dir).unwrap();
        for (k, (_, c)) in cases.iter().enumerate() {
            std::fs::write(Path::new(&dir).join(format!("section-damage-{k:05}")), &c.bytes).unwrap();
        }
    }
    let total = cases.len();
    assert!(total > 1000, "only {total} cases");
    let (errors, failed) = run_all("encode", cases, &["encode", "{in}", "-o", "{out}", "-q"]);
    report("encode", total, errors, &failed);
    // Most damage is seen: a test whose inputs all encoded would prove little.
    assert!(errors > total / 4, "only {errors} of {total} refused");
}

/// A cut-short `.debug_str` (its last string without a NUL) is refused by
/// name, never read past its end (a panic in the string-cache probe before).
#[test]
fn a_debug_str_one_byte_short_is_refused_naming_the_section() {
    for f in fixtures() {
        let d = std::fs::read(&f).unwrap();
        let l = Layout::of(&d);
        let Some(i) = (1..l.count(&d)).find(|&i| l.name(&d, i) == ".debug_str") else {
            continue;
        };
        let (_, size) = l.range(&d, i);
        let mut b = d.clone();
        l.put(&mut b, l.size_at(&d, i), l.word(), size as u64 - 1);
        let dir = scratch(&format!("short-str-{}", f.file_name().unwrap().to_string_lossy()));
        let input = dir.join("in.o");
        std::fs::write(&input, &b).unwrap();
        let out = dir.join("out.btf");
        let o = run_bounded("short-str", &["encode".into(), s(&input), "-o".into(), s(&out)]);
        assert_eq!(o.code, Some(2), "{}: {}", f.display(), o.stderr);
        assert!(
            o.stderr.contains(".debug_str") && o.stderr.contains("without its terminating NUL"),
            "{}: {}",
            f.display(),
            o.stderr
        );
        assert!(!out.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn every_damaged_btf_section_dumps_or_is_refused() {
    // A `.BTF` section to damage: a fixture encoded in place.
    let mut cases = Vec::new();
    for f in fixtures().into_iter().take(6) {
        let dir = scratch(&format!("sections-btf-{}", f.file_name().unwrap().to_string_lossy()));
        let copy = dir.join("with-btf.o");
        std::fs::copy(&f, &copy).unwrap();
        let r = run(&["pahole", "-J", &s(&copy)]);
        assert!(
            r.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&r.stderr)
        );
        let d = std::fs::read(&copy).unwrap();
        let file = f.file_name().unwrap().to_string_lossy().into_owned();
        let found = damaged(&d, Some(".BTF"));
        assert!(!found.is_empty(), "{file}: no .BTF section after pahole -J");
        cases.extend(found.into_iter().map(|c| (file.clone(), c)));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let total = cases.len();
    let (errors, failed) = run_all("dump", cases, &["dump", "{in}"]);
    report("dump", total, errors, &failed);
    assert!(errors > 0);
}
