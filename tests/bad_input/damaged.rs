//! Damaged inputs: one clear error line naming the file and the place,
//! exit 2, no output file, no panic. Each damaged file is made here from a
//! corpus fixture.

use std::path::{Path, PathBuf};

use crate::common::*;
use gimli::{EndianSlice, LittleEndian};

const FIXTURE: &str = "fixtures/bin/structs_unions.gcc-O2.o";

fn fixture() -> Vec<u8> {
    std::fs::read(corpus_file(FIXTURE)).unwrap()
}

/// Writes `bytes` as `name` in a fresh scratch folder (`tag`-`name`) and
/// runs `btfkit pahole -J` on it with a detached output there: the run,
/// the folder, the input and the output paths.
fn pahole_on(tag: &str, name: &str, bytes: &[u8]) -> (std::process::Output, PathBuf, PathBuf, PathBuf) {
    let dir = scratch(&format!("{tag}-{name}"));
    let input = dir.join(name);
    std::fs::write(&input, bytes).unwrap();
    let out = dir.join("out.btf");
    let r = run(&[
        "pahole",
        "-J",
        &format!("--btf_encode_detached={}", s(&out)),
        &s(&input),
    ]);
    (r, dir, input, out)
}

/// Encodes `bytes` (written as `name`) and checks the failure shape.
fn expect_failure(name: &str, bytes: &[u8], must_mention: &[&str]) {
    let (r, dir, input, out) = pahole_on("bad", name, bytes);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(2),
        "{name}: exit {:?}, stderr: {stderr}",
        r.status.code()
    );
    assert!(!stderr.contains("panicked"), "{name}: panic: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: not one line: {stderr}");
    assert!(stderr.contains(&s(&input)), "{name}: file not named: {stderr}");
    for m in must_mention {
        assert!(stderr.contains(m), "{name}: `{m}` not in: {stderr}");
    }
    assert!(!out.exists(), "{name}: an output file was written");
    let leftovers: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(leftovers, vec![input.clone()], "{name}: stray files");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Offsets (in .debug_info) of the first CU's DIEs and of its first
/// DW_AT_type attribute with form DW_FORM_ref4.
fn first_cu_layout(data: &[u8]) -> (Vec<usize>, usize) {
    let (info_off, info_size, _) = section_range(data, ".debug_info");
    let (ab_off, ab_size, _) = section_range(data, ".debug_abbrev");
    let info = gimli::DebugInfo::new(&data[info_off..info_off + info_size], LittleEndian);
    let abbrev = gimli::DebugAbbrev::new(&data[ab_off..ab_off + ab_size], LittleEndian);
    let header = info.units().next().unwrap().unwrap();
    let abbrevs = header.abbreviations(&abbrev).unwrap();
    let mut entries = header.entries_raw(&abbrevs, None).unwrap();
    let _ = EndianSlice::new(&[][..], LittleEndian);
    let mut dies = Vec::new();
    let mut type_ref = None;
    while !entries.is_empty() {
        let at = entries.next_offset().0;
        let Some(ab) = entries.read_abbreviation().unwrap() else {
            continue;
        };
        dies.push(at);
        for spec in ab.attributes() {
            let pos = entries.next_offset().0;
            entries.read_attribute(*spec).unwrap();
            if type_ref.is_none() && spec.name() == gimli::DW_AT_type && spec.form() == gimli::DW_FORM_ref4 {
                type_ref = Some(pos);
            }
        }
    }
    (dies, type_ref.expect("a DW_AT_type ref4"))
}

#[test]
fn truncated_elf() {
    let data = fixture();
    expect_failure("truncated.o", &data[..200], &["ELF"]);
}

#[test]
fn unit_header_with_wrong_length() {
    let mut data = fixture();
    let (off, _, _) = section_range(&data, ".debug_info");
    data[off..off + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    expect_failure("bad-length.o", &data, &[".debug_info", "offset 0x0"]);
}

#[test]
fn missing_abbreviation() {
    let mut data = fixture();
    let (off, _, _) = section_range(&data, ".debug_info");
    let (dies, _) = first_cu_layout(&data);
    // The second DIE (the first child of the unit) gets a code no abbreviation has.
    let die = dies[1];
    data[off + die] = 0x7f;
    expect_failure("bad-abbrev.o", &data, &["abbreviation", &format!("DIE {die:#x}")]);
}

#[test]
fn reference_outside_its_unit() {
    let mut data = fixture();
    let (off, _, _) = section_range(&data, ".debug_info");
    let (_, at) = first_cu_layout(&data);
    data[off + at..off + at + 4].copy_from_slice(&0x00ff_ff00u32.to_le_bytes());
    expect_failure("bad-ref.o", &data, &["outside its unit", "DIE 0x"]);
}

#[test]
fn compressed_section_that_does_not_inflate() {
    let mut data = fixture();
    let (off, size, idx) = section_range(&data, ".debug_info");
    // Elf64_Chdr: zlib, claimed size, alignment; then bytes that are no zlib stream.
    let mut chdr = Vec::new();
    chdr.extend_from_slice(&1u32.to_le_bytes());
    chdr.extend_from_slice(&0u32.to_le_bytes());
    chdr.extend_from_slice(&(size as u64 * 4).to_le_bytes());
    chdr.extend_from_slice(&1u64.to_le_bytes());
    data[off..off + 24].copy_from_slice(&chdr);
    for b in &mut data[off + 24..off + 64] {
        *b = 0xa5;
    }
    let shoff = u64::from_le_bytes(data[0x28..0x30].try_into().unwrap()) as usize;
    let flags_at = shoff + idx * 64 + 8;
    let mut flags = u64::from_le_bytes(data[flags_at..flags_at + 8].try_into().unwrap());
    flags |= 0x800; // SHF_COMPRESSED
    data[flags_at..flags_at + 8].copy_from_slice(&flags.to_le_bytes());
    expect_failure("bad-zlib.o", &data, &[".debug_info", "inflate"]);
}

#[test]
fn object_without_debug_info() {
    let mut data = fixture();
    // Rename .debug_info (in the section-name table) so that no section has the name.
    let pos = data.windows(12).position(|w| w == b".debug_info\0").unwrap();
    data[pos + 1] = b'x';
    expect_failure("no-debug.o", &data, &["debug info"]);
}

#[test]
fn output_is_never_half_written() {
    // A good input into a folder that does not exist: error, and nothing left behind.
    let input = corpus_file(FIXTURE);
    let r = run(&[
        "pahole",
        "-J",
        "--btf_encode_detached=/nonexistent-dir/x.btf",
        &s(&input),
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(!Path::new("/nonexistent-dir/x.btf").exists());
}

/// The fixture with its first (DW_AT_type, DW_FORM_ref4) abbreviation
/// entry turned into (DW_AT_type, DW_FORM_ref_addr): the same size, and for
/// the first unit (at offset 0) the same value, now a `.debug_info` offset.
fn with_ref_addr(mut data: Vec<u8>) -> Vec<u8> {
    let (off, size, _) = section_range(&data, ".debug_abbrev");
    let pos = data[off..off + size]
        .windows(2)
        .position(|w| w == [0x49, 0x13])
        .unwrap();
    data[off + pos + 1] = 0x10;
    data
}

/// The fixture with `.comment` turned into an SHT_NOTE holding the
/// kernel's LTO note (owner Linux, type 0x101) with descriptor `value`.
fn with_lto_note(mut data: Vec<u8>, value: u32) -> Vec<u8> {
    let (off, size, idx) = section_range(&data, ".comment");
    let mut note = Vec::new();
    note.extend_from_slice(&6u32.to_le_bytes());
    note.extend_from_slice(&4u32.to_le_bytes());
    note.extend_from_slice(&0x101u32.to_le_bytes());
    note.extend_from_slice(b"Linux\0\0\0");
    note.extend_from_slice(&value.to_le_bytes());
    assert!(size >= note.len());
    data[off..off + note.len()].copy_from_slice(&note);
    let shoff = u64::from_le_bytes(data[0x28..0x30].try_into().unwrap()) as usize;
    let type_at = shoff + idx * 64 + 4;
    data[type_at..type_at + 4].copy_from_slice(&7u32.to_le_bytes());
    data
}

/// Encodes `bytes` (written as `name`) with pahole's default features; the output.
fn encode_ok(name: &str, bytes: &[u8]) -> Vec<u8> {
    let (r, dir, _, out) = pahole_on("ok", name, bytes);
    assert!(r.status.success(), "{name}: {}", String::from_utf8_lossy(&r.stderr));
    let b = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    b
}

/// An abbreviation in DW_FORM_ref_addr, or the LTO note, makes the file one
/// merged unit, as in the reference; a file of one unit then gives the
/// bytes it gives read as a unit (the merged unit's name and offsets
/// differ, its types do not).
#[test]
fn cross_unit_references_and_the_lto_note_merge_the_units() {
    let plain = encode_ok("plain.o", &fixture());
    assert_eq!(encode_ok("ref-addr.o", &with_ref_addr(fixture())), plain);
    assert_eq!(encode_ok("lto-note.o", &with_lto_note(fixture(), 1)), plain);
    assert_eq!(
        encode_ok("lto-note-and-ref-addr.o", &with_ref_addr(with_lto_note(fixture(), 1))),
        plain
    );
}

/// A reference across units in a file whose LTO note says "not LTO": the
/// reference reads such a file unit by unit and cannot resolve it, which
/// btfkit does not imitate.
#[test]
fn cross_unit_reference_where_the_lto_note_says_no_is_refused() {
    let data = with_ref_addr(with_lto_note(fixture(), 0));
    expect_failure("no-lto-ref-addr.o", &data, &["DW_FORM_ref_addr", "LTO note"]);
}

/// A DW_FORM_ref_addr past the end of `.debug_info`.
#[test]
fn cross_unit_reference_outside_the_section() {
    // The attribute the abbreviation change turns into DW_FORM_ref_addr
    // (the first unit starts the section: unit and section offsets agree).
    let (_, attr) = first_cu_layout(&fixture());
    let mut data = with_ref_addr(fixture());
    let (off, size, _) = section_range(&data, ".debug_info");
    data[off + attr..off + attr + 4].copy_from_slice(&(size as u32 + 16).to_le_bytes());
    expect_failure("ref-addr-outside.o", &data, &["outside"]);
}

/// Two `.debug_info` sections outside section groups: which one holds the
/// DWARF cannot be told (reading one would silently drop the other).
#[test]
fn two_debug_info_sections_are_refused() {
    crate::needs_corpus!();
    // The type-unit object has 12 `.debug_info` sections, 11 of them in
    // COMDAT groups (passed over, as the reference does); clearing
    // SHF_GROUP on them leaves several outside any group.
    let mut data = std::fs::read(corpus_file("fixtures/bin/structs_unions.gcc-O2-tu.o")).unwrap();
    use object::{Object, ObjectSection};
    let obj = object::File::parse(&*data).unwrap();
    let idx: Vec<usize> = obj
        .sections()
        .filter(|s| s.name() == Ok(".debug_info"))
        .map(|s| s.index().0)
        .collect();
    assert_eq!(idx.len(), 12);
    drop(obj);
    let shoff = u64::from_le_bytes(data[0x28..0x30].try_into().unwrap()) as usize;
    for i in idx {
        let flags_at = shoff + i * 64 + 8;
        let f = u64::from_le_bytes(data[flags_at..flags_at + 8].try_into().unwrap());
        data[flags_at..flags_at + 8].copy_from_slice(&(f & !0x200).to_le_bytes());
    }
    expect_failure("two-debug-info.o", &data, &["both named .debug_info"]);
}
