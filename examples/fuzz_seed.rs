//! Seeds for the `dwarf_cu` fuzz target (fuzz/run.sh runs this): one input
//! per compile unit of each given ELF file, built from the sections as the
//! encoder sees them (decompressed, relocated), in the layout of
//! `btfkit::testing::fuzz_input`. Units whose input would exceed 128 KiB are
//! left out (small inputs fuzz faster).
//! Usage: fuzz_seed OUTDIR ELF...

use std::path::Path;

use btfkit::btf::Endian;
use btfkit::dwarf;
use btfkit::elf::debug::{DebugSections, ElfInfo, SectionBytes};
use btfkit::testing::fuzz_input;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((out, files)) = args.split_first() else {
        eprintln!("usage: fuzz_seed OUTDIR ELF...");
        std::process::exit(2);
    };
    let mut written = 0;
    for f in files {
        let path = Path::new(f);
        let Ok(data) = std::fs::read(path) else { continue };
        let Ok(elf) = ElfInfo::load(path, &data) else { continue };
        let endian = match elf.endian() {
            Endian::Little => gimli::RunTimeEndian::Little,
            Endian::Big => gimli::RunTimeEndian::Big,
        };
        let dw = dwarf::dwarf(elf.debug(), endian);
        let Ok(headers) = dwarf::unit_headers(&dw) else {
            continue;
        };
        let mut syms: Vec<&[u8]> = elf.funcs().syms.iter().map(|s| s.0).collect();
        syms.extend(elf.objects().iter().map(|o| o.0));
        let mut flags = 0;
        if elf.endian() == Endian::Big {
            flags |= fuzz_input::BIG_ENDIAN;
        }
        if elf.machine() == 183 {
            flags |= fuzz_input::AARCH64;
        }
        let d = elf.debug();
        for (i, h) in headers.iter().enumerate() {
            let (start, len) = (h.offset().0, h.length_including_self());
            let b = |s: &SectionBytes<'_>| SectionBytes::Owned(s.to_vec());
            let one = DebugSections {
                info: SectionBytes::Borrowed(&d.info[start..start + len]),
                abbrev: b(&d.abbrev),
                str: b(&d.str),
                line: b(&d.line),
                line_str: b(&d.line_str),
                str_offsets: b(&d.str_offsets),
                addr: b(&d.addr),
                loc: b(&d.loc),
                loclists: b(&d.loclists),
                ranges: b(&d.ranges),
                rnglists: b(&d.rnglists),
            };
            // Every other seed with functions and all features on.
            let extra = if (written + i) % 2 == 0 {
                fuzz_input::FUNCS | fuzz_input::ALL_FEATURES
            } else {
                0
            };
            let bytes = fuzz_input::build(flags | extra, &one, &syms);
            if bytes.len() > 128 << 10 {
                continue;
            }
            let name = format!("{}.cu{i}", path.file_name().unwrap().to_string_lossy());
            std::fs::write(Path::new(out).join(name), bytes).unwrap();
            written += 1;
        }
    }
    eprintln!("fuzz_seed: {written} seeds in {out}");
}
