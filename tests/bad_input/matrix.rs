//! The bad-input matrix (issue #8): damaged ELF, DWARF, compressed sections
//! and BTF, each made here from a small corpus fixture (or, for DWARF shapes
//! a byte patch cannot make, from C compiled with gcc). Every case must end
//! with exit 2 and exactly one error line that names the file and what is
//! wrong, no output file, no stray file, no panic — within a time limit and
//! under a 1 GiB address-space limit, so a hang or a huge allocation fails
//! the test instead of the machine.
//!
//! Where btfkit accepts a damaged input, the case says so and why (the
//! reference pahole v1.31 accepts it too and writes the same bytes).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use std::time::{Duration, Instant};

use crate::common::*;

const FIXTURE: &str = "fixtures/bin/structs_unions.gcc-O2.o";
/// Address-space limit for every run.
const MEM_LIMIT: u64 = 1 << 30;
/// Wall-clock limit for every run (generous: the machine is shared).
const TIME_LIMIT: Duration = Duration::from_secs(20);

fn fixture() -> Vec<u8> {
    std::fs::read(corpus_file(FIXTURE)).unwrap()
}

// ---------------------------------------------------------------- running

pub(crate) struct Outcome {
    pub(crate) code: Option<i32>,
    pub(crate) stderr: String,
    pub(crate) stdout: Vec<u8>,
}

/// Runs btfkit with `args` under the memory limit; panics (naming `case`)
/// if it does not finish within the time limit.
pub(crate) fn run_bounded(case: &str, args: &[String]) -> Outcome {
    let logs = scratch(&format!("logs-{case}"));
    let out_p = logs.join("stdout");
    let err_p = logs.join("stderr");
    let mut cmd = btfkit();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_p).unwrap())
        .stderr(std::fs::File::create(&err_p).unwrap());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEM_LIMIT,
                rlim_max: MEM_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn btfkit");
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{case}: still running after {TIME_LIMIT:?} (hang?): btfkit {}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let o = Outcome {
        code: status.code(),
        stderr: std::fs::read_to_string(&err_p).unwrap(),
        stdout: std::fs::read(&out_p).unwrap(),
    };
    let _ = std::fs::remove_dir_all(&logs);
    o
}

/// `btfkit pahole -J --btf_encode_detached=OUT INPUT` under the limits.
fn encode_detached(case: &str, input: &Path, out: &Path) -> Outcome {
    run_bounded(
        case,
        &[
            "pahole".into(),
            "-J".into(),
            format!("--btf_encode_detached={}", s(out)),
            s(input),
        ],
    )
}

/// Checks the failure shape: exit 2, one line naming `input`, each of
/// `mention`, nothing on stdout, no panic.
fn check_failure(case: &str, o: &Outcome, input: &Path, mention: &[&str]) {
    let stderr = &o.stderr;
    assert!(!stderr.contains("panicked"), "{case}: panic: {stderr}");
    assert_eq!(o.code, Some(2), "{case}: exit {:?}, stderr: {stderr}", o.code);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{case}: not one line: {stderr}");
    assert!(stderr.starts_with("btfkit: error: "), "{case}: {stderr}");
    assert!(stderr.contains(&s(input)), "{case}: file not named: {stderr}");
    // The words are looked for in what is said about the file, not in its name.
    let said = stderr.replace(&s(input), "");
    for m in mention {
        assert!(said.contains(m), "{case}: `{m}` not in: {stderr}");
    }
    assert!(o.stdout.is_empty(), "{case}: output on stdout");
}

/// Encodes `bytes` (written as `name`) with the pahole front end and checks
/// the failure shape, no output file and no stray file.
fn expect_encode_failure(name: &str, bytes: &[u8], mention: &[&str]) {
    let dir = scratch(&format!("mx-{name}"));
    let input = dir.join(name);
    std::fs::write(&input, bytes).unwrap();
    let out = dir.join("out.btf");
    let o = encode_detached(name, &input, &out);
    check_failure(name, &o, &input, mention);
    assert!(!out.exists(), "{name}: an output file was written");
    assert_eq!(files_in(&dir), vec![input.clone()], "{name}: stray files");
    let _ = std::fs::remove_dir_all(&dir);
}

pub(crate) fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

// ---------------------------------------------------------------- ELF64 LE patching

fn rd16(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}
fn rd32(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
fn rd64(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}
fn wr16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn wr32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn wr64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

const E_SHOFF: usize = 0x28;
const E_SHENTSIZE: usize = 0x3a;
const E_SHNUM: usize = 0x3c;
const E_SHSTRNDX: usize = 0x3e;
const SH_FLAGS: usize = 8;
const SH_OFFSET: usize = 0x18;
const SH_SIZE: usize = 0x20;

/// File position of section header `idx`.
fn shdr(d: &[u8], idx: usize) -> usize {
    rd64(d, E_SHOFF) as usize + idx * 64
}

// ---------------------------------------------------------------- truncation

/// The file cut at every section boundary and at a stride through it: the
/// section header table (at the end) goes with it, so each is refused as a
/// damaged ELF header.
#[test]
fn truncated_at_many_offsets() {
    let data = fixture();
    let mut cuts: Vec<usize> = (0..data.len()).step_by(97).collect();
    let shnum = rd16(&data, E_SHNUM) as usize;
    for i in 1..shnum {
        let h = shdr(&data, i);
        let off = rd64(&data, h + SH_OFFSET) as usize;
        let size = rd64(&data, h + SH_SIZE) as usize;
        cuts.extend([off, off + size / 2, off + size, shdr(&data, i), shdr(&data, i) + 30]);
    }
    cuts.extend([0, 1, 4, 15, 16, 63, 64, data.len() - 1]);
    cuts.retain(|&c| c < data.len());
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        expect_encode_failure(&format!("trunc-{cut}.o"), &data[..cut], &[]);
    }
}

/// Section contents cut at every section boundary (and halfway through each
/// section) with the section header table kept (re-appended after the cut).
/// A section beyond the cut now either reaches past the end (named as such)
/// or overlaps the re-appended table and reads as garbage (then the garbage
/// is what the one error line describes), so no wording is required here;
/// `debug_section_past_the_end` pins the wording.
#[test]
fn truncated_contents_with_headers_kept() {
    let data = fixture();
    let shoff = rd64(&data, E_SHOFF) as usize;
    let shnum = rd16(&data, E_SHNUM) as usize;
    let table = data[shoff..shoff + shnum * 64].to_vec();
    let mut cuts = Vec::new();
    for i in 1..shnum {
        let h = shdr(&data, i);
        let off = rd64(&data, h + SH_OFFSET) as usize;
        let size = rd64(&data, h + SH_SIZE) as usize;
        cuts.extend([off, off + size / 2]);
    }
    cuts.retain(|&c| c > 64 && c < shoff);
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        let mut d = data[..cut].to_vec();
        while !d.len().is_multiple_of(8) {
            d.push(0);
        }
        let new_shoff = d.len();
        d.extend_from_slice(&table);
        wr64(&mut d, E_SHOFF, new_shoff as u64);
        expect_encode_failure(&format!("cut-contents-{cut:#x}.o"), &d, &[]);
    }
}

// ---------------------------------------------------------------- ELF headers

#[test]
fn section_header_table_past_the_end() {
    let mut d = fixture();
    let len = d.len() as u64;
    wr64(&mut d, E_SHOFF, len - 64);
    expect_encode_failure("shoff-past-eof.o", &d, &["section header"]);
    wr64(&mut d, E_SHOFF, u64::MAX - 63);
    expect_encode_failure("shoff-wraps.o", &d, &["section header"]);
}

#[test]
fn section_header_entry_size_wrong() {
    for size in [0u16, 32, 40, 63, 65, 128, 0xffff] {
        let mut d = fixture();
        wr16(&mut d, E_SHENTSIZE, size);
        expect_encode_failure(&format!("shentsize-{size}.o"), &d, &["section header"]);
    }
}

#[test]
fn section_name_table_index_out_of_range() {
    for idx in [24u16, 100, 0xfeff] {
        let mut d = fixture();
        wr16(&mut d, E_SHSTRNDX, idx);
        expect_encode_failure(&format!("shstrndx-{idx}.o"), &d, &["section name"]);
    }
}

/// A huge section count, plain (65280, the most e_shnum can say without
/// extended numbering) and extended (section 0's sh_size claiming 50 million):
/// the table would reach far past the end of the file.
#[test]
fn huge_section_count() {
    let mut d = fixture();
    wr16(&mut d, E_SHNUM, 0xff00);
    expect_encode_failure("shnum-65280.o", &d, &["section header"]);
    for count in [50_000_000u64, u64::MAX / 64, u64::MAX] {
        let mut d = fixture();
        wr16(&mut d, E_SHNUM, 0);
        let h0 = shdr(&d, 0);
        wr64(&mut d, h0 + SH_SIZE, count);
        expect_encode_failure(&format!("shnum-ext-{count}.o"), &d, &["section header"]);
    }
}

/// A section btfkit reads whose contents reach past the end of the file.
#[test]
fn debug_section_past_the_end() {
    for (name, size) in [
        (".debug_info", 0x10_0000u64),
        (".debug_abbrev", u64::MAX / 2),
        (".debug_str", u64::MAX),
    ] {
        let mut d = fixture();
        let (_, _, idx) = section_range(&d, name);
        let h = shdr(&d, idx);
        wr64(&mut d, h + SH_SIZE, size);
        expect_encode_failure(&format!("past-eof{name}.o"), &d, &[name, "past the end of the file"]);
    }
    // The offset, not the size, is out of the file.
    let mut d = fixture();
    let (_, _, idx) = section_range(&d, ".debug_info");
    let h = shdr(&d, idx);
    wr64(&mut d, h + SH_OFFSET, 1 << 40);
    expect_encode_failure("offset-past-eof.o", &d, &[".debug_info", "past the end of the file"]);
}

/// .debug_abbrev made to overlap .debug_info (same offset): ELF does not
/// forbid overlapping sections and neither btfkit nor the reference checks;
/// the abbreviations then read as garbage and decoding fails on them.
#[test]
fn overlapping_sections() {
    let mut d = fixture();
    let (info_off, _, _) = section_range(&d, ".debug_info");
    let (_, _, ab) = section_range(&d, ".debug_abbrev");
    let h = shdr(&d, ab);
    wr64(&mut d, h + SH_OFFSET, info_off as u64);
    expect_encode_failure("overlap.o", &d, &[".debug_info"]);
}

// ---------------------------------------------------------------- compressed sections

const ELFCOMPRESS_ZLIB: u32 = 1;
const ELFCOMPRESS_ZSTD: u32 = 2;
const SHF_COMPRESSED: u64 = 0x800;

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The fixture with section `name` replaced by an SHF_COMPRESSED copy whose
/// header claims `claimed` bytes (appended at the end of the file).
fn with_compressed(name: &str, ch_type: u32, claimed: impl Fn(u64) -> u64) -> Vec<u8> {
    let mut d = fixture();
    let (off, size, idx) = section_range(&d, name);
    let plain = d[off..off + size].to_vec();
    let packed = match ch_type {
        ELFCOMPRESS_ZSTD => zstd::encode_all(&plain[..], 3).unwrap(),
        _ => zlib(&plain),
    };
    while !d.len().is_multiple_of(8) {
        d.push(0);
    }
    let at = d.len();
    d.extend_from_slice(&ch_type.to_le_bytes());
    d.extend_from_slice(&0u32.to_le_bytes());
    d.extend_from_slice(&claimed(size as u64).to_le_bytes());
    d.extend_from_slice(&1u64.to_le_bytes());
    d.extend_from_slice(&packed);
    let h = shdr(&d, idx);
    wr64(&mut d, h + SH_OFFSET, at as u64);
    wr64(&mut d, h + SH_SIZE, (24 + packed.len()) as u64);
    let flags = rd64(&d, h + SH_FLAGS);
    wr64(&mut d, h + SH_FLAGS, flags | SHF_COMPRESSED);
    d
}

/// Control: an honest header gives the same BTF as the plain fixture.
#[test]
fn compressed_sections_with_honest_headers_encode() {
    let dir = scratch("mx-compressed-ok");
    let plain = dir.join("plain.o");
    std::fs::write(&plain, fixture()).unwrap();
    let want = dir.join("plain.btf");
    let o = encode_detached("plain", &plain, &want);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for (tag, ty) in [("zlib", ELFCOMPRESS_ZLIB), ("zstd", ELFCOMPRESS_ZSTD)] {
        for name in [".debug_info", ".debug_abbrev", ".debug_str"] {
            let input = dir.join(format!("{tag}{name}.o"));
            std::fs::write(&input, with_compressed(name, ty, |n| n)).unwrap();
            let out = dir.join(format!("{tag}{name}.btf"));
            let o = encode_detached(tag, &input, &out);
            assert_eq!(o.code, Some(0), "{tag}{name}: {}", o.stderr);
            assert_eq!(
                std::fs::read(&out).unwrap(),
                std::fs::read(&want).unwrap(),
                "{tag}{name}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Headers that lie about the uncompressed size, smaller or larger than the
/// data, up to sizes that must not be allocated (the run is limited to 1 GiB).
#[test]
fn compressed_sections_that_lie_about_their_size() {
    type Lie = (&'static str, fn(u64) -> u64);
    let lies: [Lie; 8] = [
        ("minus1", |n| n - 1),
        ("half", |n| n / 2),
        ("zero", |_| 0),
        ("plus1", |n| n + 1),
        ("double", |n| n * 2),
        ("4GiB", |_| 1 << 32),
        ("2pow62", |_| 1 << 62),
        ("max", |_| u64::MAX),
    ];
    for (tag, ty) in [("zlib", ELFCOMPRESS_ZLIB), ("zstd", ELFCOMPRESS_ZSTD)] {
        for name in [".debug_info", ".debug_abbrev"] {
            for (lie, f) in lies {
                let d = with_compressed(name, ty, f);
                expect_encode_failure(&format!("{tag}-{lie}{name}.o"), &d, &[name, "compress"]);
            }
        }
    }
}

#[test]
fn compressed_section_with_unknown_algorithm_or_short_header() {
    let d = with_compressed(".debug_info", 7, |n| n);
    expect_encode_failure("ch-type-7.o", &d, &[".debug_info", "compress"]);
    let mut d = fixture();
    let (_, _, idx) = section_range(&d, ".debug_info");
    let h = shdr(&d, idx);
    wr64(&mut d, h + SH_SIZE, 12);
    let flags = rd64(&d, h + SH_FLAGS);
    wr64(&mut d, h + SH_FLAGS, flags | SHF_COMPRESSED);
    expect_encode_failure("ch-short.o", &d, &[".debug_info", "compress"]);
}

// ---------------------------------------------------------------- DWARF

/// One DIE of a fixture's first unit: its unit offset, tag, and for each
/// attribute (name, form, position in the section).
struct Die {
    uoff: usize,
    tag: gimli::DwTag,
    attrs: Vec<(gimli::DwAt, gimli::DwForm, usize)>,
}

/// The DIEs of the first unit (all fixtures used here have one) and the
/// .debug_info file offset.
fn dies(data: &[u8]) -> (Vec<Die>, usize) {
    use gimli::LittleEndian;
    let (info_off, info_size, _) = section_range(data, ".debug_info");
    let (ab_off, ab_size, _) = section_range(data, ".debug_abbrev");
    let info = gimli::DebugInfo::new(&data[info_off..info_off + info_size], LittleEndian);
    let abbrev = gimli::DebugAbbrev::new(&data[ab_off..ab_off + ab_size], LittleEndian);
    let header = info.units().next().unwrap().unwrap();
    let abbrevs = header.abbreviations(&abbrev).unwrap();
    let mut entries = header.entries_raw(&abbrevs, None).unwrap();
    let mut out = Vec::new();
    while !entries.is_empty() {
        let at = entries.next_offset().0;
        let Some(ab) = entries.read_abbreviation().unwrap() else {
            continue;
        };
        let mut attrs = Vec::new();
        for spec in ab.attributes() {
            let pos = entries.next_offset().0;
            entries.read_attribute(*spec).unwrap();
            attrs.push((spec.name(), spec.form(), pos));
        }
        out.push(Die {
            uoff: at,
            tag: ab.tag(),
            attrs,
        });
    }
    (out, info_off)
}

impl Die {
    /// Section position of this DIE's DW_AT_type, which must be a ref4.
    fn type_at(&self) -> usize {
        let &(_, form, pos) = self
            .attrs
            .iter()
            .find(|a| a.0 == gimli::DW_AT_type)
            .expect("DW_AT_type");
        assert_eq!(form, gimli::DW_FORM_ref4);
        pos
    }
}

/// `fixture` with the DW_AT_type of the `nth` DIE tagged `tag` pointed at
/// the DIE `to` picks (given all DIEs and the patched one's index).
fn retarget(fixture: &str, tag: gimli::DwTag, nth: usize, to: impl Fn(&[Die], usize) -> usize) -> Vec<u8> {
    let mut d = read_corpus(fixture);
    let (all, info) = dies(&d);
    let i = all
        .iter()
        .enumerate()
        .filter(|(_, x)| x.tag == tag)
        .nth(nth)
        .expect("no such DIE")
        .0;
    let target = to(&all, i);
    let at = info + all[i].type_at();
    wr32(&mut d, at, target as u32);
    d
}

/// The damaged-DWARF inputs: (file name, bytes, words the error must contain).
fn dwarf_cases() -> Vec<(String, Vec<u8>, Vec<&'static str>)> {
    let mut v: Vec<(String, Vec<u8>, Vec<&'static str>)> = Vec::new();
    let base = fixture();
    let (info_off, _, _) = section_range(&base, ".debug_info");
    // Unit lengths: too long, too short (the unit ends inside a DIE), zero,
    // the 64-bit escape followed by a huge length, a reserved value.
    for (tag, len, what) in [
        ("long", 0x7fff_fff0u32, "unit length 0x7ffffff0 reaches past the end"),
        // The unit ends inside a DIE; its "next unit" reads as length 0.
        ("short", 0x20, "offset 0x24: unit length 0 is too short"),
        ("tiny", 4, "unit length 4 is too short"),
        ("zero", 0, "unit length 0 is too short"),
        ("reserved", 0xffff_fff0, "reserved length"),
    ] {
        let mut d = base.clone();
        wr32(&mut d, info_off, len);
        v.push((format!("unit-length-{tag}.o"), d, vec![".debug_info", what]));
    }
    // The 64-bit escape and a huge length. (The object's relocation of the
    // 32-bit abbreviations offset at +8 overwrites the length's upper half,
    // so the lower half carries the size.)
    let mut d = base.clone();
    wr32(&mut d, info_off, 0xffff_ffff);
    wr64(&mut d, info_off + 4, (1 << 60) | 0x7000_0000);
    v.push((
        "unit-length-64bit-huge.o".into(),
        d,
        vec![".debug_info", "unit length 0x70000000 reaches past the end"],
    ));
    // Versions.
    for ver in [0u16, 1, 6, 0xffff] {
        let mut d = base.clone();
        wr16(&mut d, info_off + 4, ver);
        v.push((
            format!("version-{ver}.o"),
            d,
            vec![".debug_info", "unknown DWARF version"],
        ));
    }
    // The unit's abbreviations offset past the end of .debug_abbrev. In an
    // object file the field (DWARF 5: at +8) is filled by a relocation, so
    // its addend is what is changed.
    let mut d = base.clone();
    let (rela, rela_size, _) = section_range(&d, ".rela.debug_info");
    let r = (rela..rela + rela_size)
        .step_by(24)
        .find(|&r| rd64(&d, r) == 8)
        .expect("relocation at +8");
    wr64(&mut d, r + 16, 0x10_0000);
    v.push((
        "abbrev-offset-past-end.o".into(),
        d,
        vec!["offset 0x100000 is past the end of .debug_abbrev"],
    ));
    // A relocation that would write past its section (x86-64 RELA, read
    // without the generic relocation iterator).
    let mut d = base.clone();
    wr64(&mut d, rela, 0x7fff_0000);
    v.push((
        "relocation-past-section.o".into(),
        d,
        vec![
            "section .debug_info",
            "relocation at offset 0x7fff0000 is outside the section",
        ],
    ));
    // Unknown forms: the first DW_AT_name form in .debug_abbrev replaced.
    let (ab_off, ab_size, _) = section_range(&base, ".debug_abbrev");
    let name_form = (ab_off..ab_off + ab_size - 1)
        .find(|&i| base[i] == 0x03 && matches!(base[i + 1], 0x08 | 0x0e | 0x1f))
        .unwrap();
    for form in [0x7eu8, 0x30, 0x00] {
        let mut d = base.clone();
        d[name_form + 1] = form;
        v.push((format!("unknown-form-{form:#x}.o"), d, vec!["attribute form"]));
    }
    // Cycles through type references.
    v.push((
        "cycle-typedef-self.o".into(),
        retarget("fixtures/bin/typedefs.gcc-O2.o", gimli::DW_TAG_typedef, 0, |all, i| {
            all[i].uoff
        }),
        vec!["loop", "DIE"],
    ));
    v.push((
        "cycle-pointer-self.o".into(),
        retarget(
            "fixtures/bin/pointers.gcc-O2.o",
            gimli::DW_TAG_pointer_type,
            0,
            |all, i| all[i].uoff,
        ),
        vec!["loop", "DIE"],
    ));
    v.push((
        "cycle-typedef-pair.o".into(),
        {
            // typedef #1 -> typedef #0, and typedef #0 -> typedef #1.
            let d = retarget("fixtures/bin/typedefs.gcc-O2.o", gimli::DW_TAG_typedef, 1, |all, _| {
                all.iter().find(|x| x.tag == gimli::DW_TAG_typedef).unwrap().uoff
            });
            let (all, info) = dies(&d);
            let tds: Vec<&Die> = all.iter().filter(|x| x.tag == gimli::DW_TAG_typedef).collect();
            let mut d = d.clone();
            wr32(&mut d, info + tds[0].type_at(), tds[1].uoff as u32);
            d
        },
        vec!["loop", "DIE"],
    ));
    v.push((
        "cycle-member-own-struct.o".into(),
        retarget(FIXTURE, gimli::DW_TAG_member, 0, |all, i| {
            all[..i]
                .iter()
                .rev()
                .find(|x| x.tag == gimli::DW_TAG_structure_type)
                .unwrap()
                .uoff
        }),
        vec!["loop", "DIE"],
    ));
    v.push((
        "cycle-array-self.o".into(),
        retarget("fixtures/bin/arrays.gcc-O2.o", gimli::DW_TAG_array_type, 0, |all, i| {
            all[i].uoff
        }),
        vec!["loop", "DIE"],
    ));
    // A reference past the end of its unit (the reference pahole v1.31 makes
    // it void silently, exit 0; btfkit refuses).
    let d = retarget(FIXTURE, gimli::DW_TAG_member, 0, |_, _| 0x7fff_0000);
    v.push(("ref-past-unit.o".into(), d, vec!["outside its unit", "DIE"]));
    v
}

/// Damaged DWARF that btfkit accepts because the reference does and the
/// result is valid BTF: (file name, bytes, SHA-256 of the reference's output).
fn accepted_dwarf_cases() -> Vec<(String, Vec<u8>, &'static str)> {
    // A reference inside the unit that lands on no DIE (the unit header, the
    // middle of a DIE): pahole v1.31 warns "couldn't find 0x.. type for 0x36
    // (member)", makes the member's type void and exits 0. btfkit writes the
    // same bytes (only a set of every DIE offset could tell "no DIE" from "a
    // DIE that is not a type", e.g. a subprogram, which is legal). Determined
    // by running /work/ref/dwarves/build/pahole -J on the files `write_cases`
    // writes; both outputs load into the kernel.
    const VOID_MEMBER: &str = "d38af22f4d3e2f9cc2165b2a232025ec902cfd0b0ca34df1f843bb7d0232c000";
    let mut v: Vec<(String, Vec<u8>, &'static str)> = vec![
        (
            "ref-header.o".into(),
            retarget(FIXTURE, gimli::DW_TAG_member, 0, |_, _| 2),
            VOID_MEMBER,
        ),
        (
            "ref-mid-die.o".into(),
            retarget(FIXTURE, gimli::DW_TAG_member, 0, |all, _| all[3].uoff + 1),
            VOID_MEMBER,
        ),
    ];
    // Absurd array bounds follow the reference's arithmetic: each dimension
    // is cut to 32 bits and the product wraps. An upper bound of 2^64-1
    // gives 0 elements (old gcc's encoding of `int a[0]`; valid BTF). A
    // DW_AT_count of 2^64-1 gives 4294967295 elements inside an 8-byte
    // struct: pahole v1.31 writes exactly these bytes, which the kernel
    // refuses ("Member exceeds struct_size") and `btfkit stats --warnings`
    // flags. No compiler emits such a count; matching the reference is the
    // rule for damaged input btfkit can encode.
    let hashes = [
        (
            "upper-bound-max.o",
            "dd225f890c30c5ffddfe5fb698922955b14e5b07597eac344f4d475954fb0db3",
        ),
        (
            "count-max.o",
            "a35cd1c1d7fedb9a11055103e3aa83783f2d4638df4bc409980bee5156d731bc",
        ),
    ];
    for (name, bytes) in array_bound_cases() {
        let h = hashes.iter().find(|h| h.0 == name).unwrap().1;
        v.push((name, bytes, h));
    }
    v
}

#[test]
fn damaged_dwarf_the_reference_accepts() {
    crate::needs_corpus!();
    for (name, bytes, want) in accepted_dwarf_cases() {
        let dir = scratch(&format!("mx-ok-{name}"));
        let input = dir.join(&name);
        std::fs::write(&input, &bytes).unwrap();
        let out = dir.join("out.btf");
        let o = encode_detached(&name, &input, &out);
        assert_eq!(o.code, Some(0), "{name}: {}", o.stderr);
        assert_eq!(sha256_hex(&out), want, "{name}: not the reference's bytes");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Runs every case, then fails listing all that failed (one failure does
/// not hide the next).
fn all_cases(cases: Vec<(String, Vec<u8>, Vec<&'static str>)>) {
    let mut failed = Vec::new();
    for (name, bytes, mention) in cases {
        if let Err(e) = std::panic::catch_unwind(|| expect_encode_failure(&name, &bytes, &mention)) {
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            failed.push(format!("{name}: {msg}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn damaged_dwarf() {
    crate::needs_corpus!();
    all_cases(dwarf_cases());
}

/// Writes the damaged inputs to $BTFKIT_MATRIX_DIR, to run the reference on
/// them by hand (`cargo test --test bad_input -- --ignored matrix::write_cases`).
#[test]
#[ignore]
fn write_cases() {
    let dir = PathBuf::from(std::env::var("BTFKIT_MATRIX_DIR").expect("BTFKIT_MATRIX_DIR"));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes, _) in dwarf_cases() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    for (name, bytes, _) in accepted_dwarf_cases() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Absurd array bounds, patched into the arrays fixture: its subrange
/// abbreviation (DW_AT_upper_bound, DW_FORM_data1) becomes DW_FORM_sdata
/// (every bound there is below 0x40, so all read the same) and the first
/// bound becomes -1, i.e. 2^64-1 elements - 1; and the implicit DW_AT_count
/// 0 of the flexible arrays becomes -1 (2^64-1).
fn array_bound_cases() -> Vec<(String, Vec<u8>)> {
    let base = read_corpus("fixtures/bin/arrays.gcc-O2.o");
    let (ab, ab_size, _) = section_range(&base, ".debug_abbrev");
    let abbrevs = &base[ab..ab + ab_size];
    let ub = ab
        + abbrevs
            .windows(4)
            .position(|w| w == [0x49, 0x13, 0x2f, 0x0b])
            .expect("upper_bound data1")
        + 3;
    let cnt = ab
        + abbrevs
            .windows(3)
            .position(|w| w == [0x37, 0x21, 0x00])
            .expect("count implicit 0")
        + 2;
    let mut v = Vec::new();
    let mut d = base.clone();
    d[ub] = 0x0d;
    let (all, info) = dies(&d);
    let first = all
        .iter()
        .find(|x| x.tag == gimli::DW_TAG_subrange_type && x.attrs.iter().any(|a| a.0 == gimli::DW_AT_upper_bound))
        .unwrap();
    let at = first.attrs.iter().find(|a| a.0 == gimli::DW_AT_upper_bound).unwrap().2;
    d[info + at] = 0x7f;
    v.push(("upper-bound-max.o".to_string(), d));
    let mut d = base.clone();
    d[cnt] = 0x7f;
    v.push(("count-max.o".to_string(), d));
    v
}

// ---------------------------------------------------------------- deep nesting (gcc)

/// Encodes `obj` (bounded), checks exit 0, the type count, and, as root,
/// that the kernel accepts the result.
fn encode_ok(obj: &Path, types: usize) {
    let out = obj.with_extension("btf");
    let o = encode_detached(&s(obj), obj, &out);
    assert_eq!(o.code, Some(0), "{}: {}", obj.display(), o.stderr);
    let btf = btfkit::btf::read::parse(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(btf.type_count() as usize, types, "{}", obj.display());
    if crate::common::is_root() {
        let v = run_bounded("verify", &["verify".into(), s(&out)]);
        assert_eq!(
            v.code,
            Some(0),
            "{}: kernel refused: {}{}",
            obj.display(),
            String::from_utf8_lossy(&v.stdout),
            v.stderr
        );
    }
}

/// Thousands of levels: typedef chains, pointer-to-typedef chains, structs
/// holding structs, lexical blocks inside blocks. Decode, encode and dedup
/// must not recurse per level (the run has the default 8 MiB main stack).
/// pahole v1.31 writes the same bytes on each (checked by hand with `cmp`
/// at 20,000 levels; these sizes keep gcc fast).
#[test]
fn deeply_nested_types() {
    let dir = scratch("mx-deep");
    const N: usize = 20_000;
    let mut src = String::from("typedef int t0;\n");
    for i in 1..N {
        src.push_str(&format!("typedef t{} t{i};\n", i - 1));
    }
    src.push_str(&format!("t{} v;\n", N - 1));
    let Some(o) = gcc_object(&dir, "typedefs", &src) else {
        return;
    };
    encode_ok(&o, N + 1); // int and the typedefs
    const P: usize = 4_000;
    let mut src = String::from("typedef int p0;\n");
    for i in 1..P {
        src.push_str(&format!("typedef p{} *p{i};\n", i - 1));
    }
    src.push_str(&format!("p{} v;\n", P - 1));
    let o = gcc_object(&dir, "pointers", &src).unwrap();
    encode_ok(&o, 2 * P); // int, the typedefs, the pointers
    const S: usize = 5_000;
    let mut src = String::from("struct s0 { int x; };\n");
    for i in 1..S {
        src.push_str(&format!("struct s{i} {{ struct s{} m; }};\n", i - 1));
    }
    src.push_str(&format!("struct s{} v;\n", S - 1));
    let o = gcc_object(&dir, "structs", &src).unwrap();
    encode_ok(&o, S + 1);
    const B: usize = 3_000;
    let mut src = String::from("int f(int a) {\n");
    for i in 0..B {
        src.push_str(&format!("{{ int v{i} = a + {i};\n"));
    }
    src.push_str(&format!("struct deep {{ int a; }} x = {{ v{} }}; return x.a;\n", B - 1));
    src.push_str(&"}".repeat(B));
    src.push_str("\n}\n");
    let o = gcc_object(&dir, "blocks", &src).unwrap();
    encode_ok(&o, 4);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- BTF

const GOOD_BTF: &str = "expected/fixtures/structs_unions.gcc-O2.default.btf";

/// Every structural fault the BTF reader knows, made from a small file:
/// (file name, bytes, words the error must contain).
fn btf_cases() -> Vec<(String, Vec<u8>, Vec<&'static str>)> {
    let good = read_corpus(GOOD_BTF);
    let hdr = rd32(&good, 4) as usize;
    let (type_off, type_len, str_off, str_len) = (
        rd32(&good, 8) as usize,
        rd32(&good, 12) as usize,
        rd32(&good, 16) as usize,
        rd32(&good, 20) as usize,
    );
    let t0 = hdr + type_off;
    // The first type is a struct with members: name, info, size, then (name, type, offset) each.
    let info = rd32(&good, t0 + 4);
    assert_eq!((info >> 24) & 0x1f, 4, "{GOOD_BTF}: the first type is no struct");
    let mut v: Vec<(String, Vec<u8>, Vec<&'static str>)> = Vec::new();
    let mut case = |name: &str, mention: Vec<&'static str>, f: &dyn Fn(&mut Vec<u8>)| {
        let mut d = good.clone();
        f(&mut d);
        v.push((format!("{name}.btf"), d, mention));
    };
    case("truncated-header", vec!["the header needs 24"], &|d| d.truncate(10));
    case("bad-magic", vec!["neither raw BTF"], &|d| d[0] = 0x9e);
    case("version-2", vec!["version 2"], &|d| d[2] = 2);
    case("flags", vec!["header flags 0x01"], &|d| d[3] = 1);
    case("hdr-len-small", vec!["header length 12"], &|d| wr32(d, 4, 12));
    case("hdr-len-past-end", vec!["header length"], &|d| wr32(d, 4, 0x7fff_ffff));
    case("types-past-end", vec!["type section", "outside"], &|d| {
        wr32(d, 12, 0xffff_fff0)
    });
    case("strings-past-end", vec!["string section", "outside"], &|d| {
        wr32(d, 20, str_len as u32 + 1)
    });
    case("strings-offset-past-end", vec!["string section", "outside"], &|d| {
        wr32(d, 16, 0xffff_0000)
    });
    case("types-misaligned", vec!["offset 2 is not 4-byte aligned"], &|d| {
        wr32(d, 8, 2)
    });
    case("types-len-odd", vec!["multiple of 4"], &|d| {
        wr32(d, 12, type_len as u32 - 2)
    });
    case("sections-overlap", vec!["string section starts"], &|d| {
        wr32(d, 16, (type_off + type_len - 4) as u32)
    });
    // Indistinguishable from split BTF read without its base, and said so.
    case(
        "strings-no-leading-nul",
        vec!["looks like split BTF", "does not start with the empty string"],
        &|d| d[hdr + str_off] = b'a',
    );
    case("strings-no-trailing-nul", vec!["does not end with a NUL"], &|d| {
        let last = hdr + str_off + str_len - 1;
        d[last] = b'a'
    });
    case("unknown-kind", vec!["[1]", "unknown kind 31"], &|d| {
        wr32(d, t0 + 4, info | 0x1f00_0000)
    });
    // Bits 29-30, reserved before BTF 2026, are its kind's high bits: a
    // kind of 64 or more, which no layout section here describes.
    case("reserved-info-bits", vec!["[1]", "unknown kind"], &|d| {
        wr32(d, t0 + 4, info | 0x4000_0000)
    });
    // Bits 16-23 are BTF 2026's vlen: 65,536 more entries than there are.
    case(
        "vlen-high-bits",
        vec!["[1]", "past the end of the type section"],
        &|d| wr32(d, t0 + 4, info | 0x0001_0000),
    );
    case("vlen-past-end", vec!["[1]", "past the end of the type section"], &|d| {
        wr32(d, t0 + 4, info | 0xffff)
    });
    case("type-id-past-last", vec!["[1]", "type id 2147418112"], &|d| {
        wr32(d, t0 + 12 + 4, 0x7fff_0000)
    });
    case("name-past-strings", vec!["[1]", "string offset"], &|d| {
        wr32(d, t0, str_len as u32 + 100)
    });
    case("member-name-past-strings", vec!["[1]", "string offset"], &|d| {
        wr32(d, t0 + 12, 0xffff_fff0)
    });
    v
}

/// Each damaged BTF through each command that reads BTF: `dump`, `stats`,
/// `verify`, `dedup`, as `-B` base of `dump`, and as `--base` of `encode`.
#[test]
fn damaged_btf_through_every_command() {
    let dir = scratch("mx-btf");
    let obj = dir.join("fixture.o");
    std::fs::write(&obj, fixture()).unwrap();
    let good = corpus_file(GOOD_BTF);
    let mut failed = Vec::new();
    for (name, bytes, mention) in btf_cases() {
        let input = dir.join(&name);
        std::fs::write(&input, &bytes).unwrap();
        let out = dir.join("out.btf");
        let i = s(&input);
        let commands: Vec<(&str, Vec<String>)> = vec![
            ("dump", vec!["dump".into(), i.clone()]),
            (
                "dump-json",
                vec!["dump".into(), i.clone(), "--format".into(), "json".into()],
            ),
            ("dump-c", vec!["dump".into(), i.clone(), "--format".into(), "c".into()]),
            ("stats", vec!["stats".into(), i.clone(), "--warnings".into()]),
            ("verify", vec!["verify".into(), i.clone()]),
            ("dedup", vec!["dedup".into(), i.clone(), "-o".into(), s(&out)]),
            ("diff", vec!["diff".into(), i.clone(), s(&good)]),
            ("dump-base", vec!["dump".into(), s(&good), "-B".into(), i.clone()]),
            (
                "encode-base",
                vec![
                    "encode".into(),
                    s(&obj),
                    "--base".into(),
                    i.clone(),
                    "-o".into(),
                    s(&out),
                ],
            ),
        ];
        for (cmd, args) in commands {
            let case = format!("{name} {cmd}");
            let r = std::panic::catch_unwind(|| {
                let o = run_bounded(&format!("{name}-{cmd}"), &args);
                if cmd == "verify" && o.code == Some(1) {
                    // The kernel was asked all the same (the bytes could be
                    // passed as they are): both verdicts, the reader's in
                    // its own words.
                    let said = String::from_utf8_lossy(&o.stdout);
                    assert!(said.contains("refused by the kernel"), "{case}: {said}");
                    let reader = said.lines().find(|l| l.starts_with("btfkit's reader refuses it: "));
                    let reader = reader.unwrap_or_else(|| panic!("{case}: no reader's verdict: {said}"));
                    for m in &mention {
                        assert!(reader.contains(m), "{case}: `{m}` not in: {reader}");
                    }
                    assert!(!o.stderr.contains("panicked"), "{case}: {}", o.stderr);
                    return;
                }
                check_failure(&case, &o, &input, &mention);
                assert!(!out.exists(), "{case}: an output file was written");
            });
            if let Err(e) = r {
                failed.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
                let _ = std::fs::remove_file(&out);
            }
        }
        let mut left = files_in(&dir);
        left.retain(|p| p != &obj && p != &input);
        assert!(left.is_empty(), "{name}: stray files {left:?}");
        std::fs::remove_file(&input).unwrap();
    }
    assert!(
        failed.is_empty(),
        "{} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The section-header faults on a 32-bit (i686) and a big-endian (s390x)
/// fixture: the header fields sit elsewhere and read the other way round.
#[test]
fn section_header_faults_in_other_classes_and_byte_orders() {
    crate::needs_corpus!();
    for rel in [
        "fixtures/bin/structs_unions.i686-gcc-O2.o",
        "fixtures/bin/structs_unions.s390x-gcc-O2.o",
    ] {
        let base = read_corpus(rel);
        let is64 = base[4] == 2;
        let big = base[5] == 2;
        let put = |d: &mut Vec<u8>, at: usize, n: usize, v: u64| {
            let b = v.to_be_bytes();
            let bytes = &b[8 - n..];
            if big {
                d[at..at + n].copy_from_slice(bytes);
            } else {
                let le: Vec<u8> = bytes.iter().rev().copied().collect();
                d[at..at + n].copy_from_slice(&le);
            }
        };
        let (shoff, shoff_n, shentsize, shstrndx) = if is64 {
            (0x28, 8, 0x3a, 0x3e)
        } else {
            (0x20, 4, 0x2e, 0x32)
        };
        let tag = if is64 { "be64" } else { "le32" };
        let mut d = base.clone();
        put(&mut d, shoff, shoff_n, base.len() as u64 - 8);
        expect_encode_failure(&format!("{tag}-shoff.o"), &d, &["section header"]);
        let mut d = base.clone();
        put(&mut d, shentsize, 2, 12);
        expect_encode_failure(&format!("{tag}-shentsize.o"), &d, &["e_shentsize is 12"]);
        let mut d = base.clone();
        put(&mut d, shstrndx, 2, 300);
        expect_encode_failure(&format!("{tag}-shstrndx.o"), &d, &["e_shstrndx 300"]);
    }
}

/// Sections past the end of the file besides the debug sections. Refused:
/// .rela.debug_info (the reference skips those relocations silently and
/// writes a different, wrong BTF), .symtab (the reference: "Error creating
/// BTF encoder.", exit 0, no file), the section name table (the reference:
/// exit 0, no file, no message). Ignored, as the reference ignores them
/// (its output is then byte-identical to the undamaged file's; checked with
/// `cmp` by hand): relocations of sections neither tool reads
/// (.debug_frame, .debug_aranges) and .text.
#[test]
fn other_sections_past_the_end() {
    let dir = scratch("mx-rela");
    let clean = dir.join("clean.o");
    std::fs::write(&clean, fixture()).unwrap();
    let want = dir.join("clean.btf");
    let o = encode_detached("clean", &clean, &want);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for (rela, refused) in [
        (".rela.debug_info", Some(".rela.debug_info")),
        (".symtab", Some("section 21")),
        (".shstrtab", Some("the section name table")),
        (".rela.debug_frame", None),
        (".rela.debug_aranges", None),
        (".text", None),
    ] {
        let mut d = fixture();
        let (_, _, idx) = section_range(&d, rela);
        let h = shdr(&d, idx);
        wr64(&mut d, h + SH_SIZE, 0x10_0000);
        if let Some(what) = refused {
            expect_encode_failure(&format!("past-eof{rela}.o"), &d, &[what, "past the end of the file"]);
            continue;
        }
        let input = dir.join(format!("past-eof{rela}.o"));
        std::fs::write(&input, &d).unwrap();
        let out = dir.join("out.btf");
        let o = encode_detached(rela, &input, &out);
        assert_eq!(o.code, Some(0), "{rela}: {}", o.stderr);
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&want).unwrap(), "{rela}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Split BTF over a base of the other byte order: one line naming the
/// split file and both orders, from every command that reads a base.
#[test]
fn split_btf_over_a_base_of_the_other_byte_order() {
    crate::needs_corpus!();
    let base = corpus_file("expected/fixtures/structs_unions.s390x-gcc-O2.kernel.btf");
    let split = corpus_file("expected/modules/fou.default.btf");
    let dir = scratch("mx-endian");
    let out = dir.join("out.btf");
    let (b, sp) = (s(&base), s(&split));
    for args in [
        vec!["dump", &*sp, "-B", &*b],
        vec!["stats", &*sp, "-B", &*b],
        vec!["verify", &*sp, "-B", &*b],
        vec!["dedup", &*sp, "--base", &*b, "-o", &*s(&out)],
    ]
    .iter()
    .map(|a| a.iter().map(|x| x.to_string()).collect::<Vec<String>>())
    {
        let o = run_bounded("endian", &args);
        check_failure(&args[0], &o, &split, &["byte order", "Big", "Little"]);
        assert!(!out.exists(), "{}: output written", args[0]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
