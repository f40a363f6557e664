//! Inputs the fuzzers found (tests/fuzz-regressions/<target>/): each must
//! now give an error or a result that keeps the target's invariant, and
//! never a panic.

use std::path::Path;

mod common;

use btfkit::btf::{dump, lint, read, write};

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs `check` on every checked-in input of `target` (there must be some),
/// naming each on stderr first so a panic points at its file.
fn replay(target: &str, check: impl Fn(&str, &[u8])) {
    let cases = inputs(target);
    assert!(!cases.is_empty());
    for (name, data) in cases {
        eprintln!("{name}");
        check(&name, &data);
    }
}

#[test]
fn btf_read_regressions() {
    replay("btf_read", |name, data| {
        if let Ok(b) = read::parse(data) {
            assert_eq!(write::to_bytes(&b), data, "{name}: round trip");
            let _ = dump::raw_string(&b);
            let _ = lint::kernel_warnings(&b);
        }
    });
}

/// The `dwarf_cu` input layout carries the DWARF of a file completely: the
/// types encoded from an input built from a fixture's sections are the
/// fixture's own (variables and functions need the real ELF, so they are off).
#[test]
fn dwarf_cu_input_encodes_like_its_fixture() {
    crate::needs_corpus!();
    use btfkit::elf::debug::ElfInfo;
    use btfkit::encode::{Options, encode_elf};
    use btfkit::testing::fuzz_input;
    let mut opts = Options::default();
    opts.features.var = false;
    for name in [
        "structs_unions.gcc-O2.o",
        "arrays.clang-O2.o",
        "structs_unions.s390x-gcc-O2.o",
        "bitfields.aarch64-gcc-O2.o",
    ] {
        let path = Path::new(name);
        let data = common::read_corpus(&format!("fixtures/bin/{name}"));
        let elf = ElfInfo::load(path, &data).unwrap();
        let syms: Vec<&[u8]> = elf.funcs().syms.iter().map(|s| s.0).collect();
        let flags = if elf.endian() == btfkit::btf::Endian::Big {
            fuzz_input::BIG_ENDIAN
        } else {
            0
        };
        let bytes = fuzz_input::build(flags, elf.debug(), &syms);
        let input = fuzz_input::parse(&bytes).unwrap();
        let synthetic = input.elf_info();
        let want = encode_elf(path, &elf, &data, None, &opts).unwrap();
        let got = encode_elf(path, &synthetic, &[], None, &opts).unwrap();
        assert!(want.btf.own_type_count() > 5, "{name}: too few types to compare");
        assert_eq!(write::to_bytes(&got.btf), write::to_bytes(&want.btf), "{name}");
        fuzz_input::check(&bytes);
    }
}

#[test]
fn dwarf_cu_regressions() {
    replay("dwarf_cu", |_, data| btfkit::testing::fuzz_input::check(data));
}

#[test]
fn elf_open_regressions() {
    replay("elf_open", |_, data| btfkit::testing::elf_open::check_open(data));
}
