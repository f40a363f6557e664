//! The register rule on real compiler output: a minimal DWARF walk (this
//! test's own, standing in for the decoder) feeds `funcs::loc` and
//! `funcs::record`, and the functions it flags `unexpected_reg` must be
//! exactly the ones the reference emits without `consistent_func` (profile
//! `bare`) but drops with it (profile `kernel`) — for the x86-64 fixtures,
//! leaving out names dropped for the other reasons (ambiguous addresses,
//! prototype mismatches), which are listed per fixture.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use btfkit::dwarf::loc::{RegParams, loc_reg_in_unit, param_facts, propagate};
use btfkit::encode::function_flags;
use btfkit::funcs::flags;
use btfkit::testing::corpus::Corpus;
use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset, constants as dw};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// Debug sections of an x86-64 object, with absolute relocations applied
/// (sections sit at address 0, as in the file).
fn sections(data: &[u8]) -> HashMap<String, Vec<u8>> {
    let obj = object::File::parse(data).unwrap();
    let mut out = HashMap::new();
    for sec in obj.sections() {
        let name = sec.name().unwrap_or("").to_string();
        if !name.starts_with(".debug_") {
            continue;
        }
        let mut bytes = sec.uncompressed_data().unwrap().into_owned();
        for (off, r) in sec.relocations() {
            let s = match r.target() {
                RelocationTarget::Symbol(i) => obj.symbol_by_index(i).map(|s| s.address()).unwrap_or(0),
                _ => 0,
            };
            let v = s.wrapping_add(r.addend() as u64);
            let off = off as usize;
            match r.size() {
                32 => bytes[off..off + 4].copy_from_slice(&(v as u32).to_le_bytes()),
                64 => bytes[off..off + 8].copy_from_slice(&v.to_le_bytes()),
                _ => {}
            }
        }
        out.insert(name, bytes);
    }
    out
}

struct Sub {
    name: Vec<u8>,
    declaration: bool,
    origin: Option<usize>,
    /// Parameter indices into `params`.
    params: Vec<usize>,
}

struct Par {
    origin: Option<usize>,
    ty: Option<usize>,
}

/// name → recording flags of each instance, for every subprogram instance
/// of every CU (declarations left out).
fn flagged(data: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let secs = sections(data);
    let get = |n: &str| EndianSlice::new(secs.get(n).map(|v| v.as_slice()).unwrap_or(&[]), LittleEndian);
    let dwarf: gimli::Dwarf<R<'_>> = gimli::Dwarf::load(|id| -> Result<R<'_>, ()> { Ok(get(id.name())) }).unwrap();
    let regs = RegParams::for_machine(62);
    let mut out: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut units = dwarf.units();
    while let Some(h) = units.next().unwrap() {
        let unit = dwarf.unit(h).unwrap();
        let mut subs: Vec<Sub> = Vec::new();
        let mut params: Vec<Par> = Vec::new();
        let mut facts: Vec<u8> = Vec::new();
        let mut sub_at: HashMap<usize, usize> = HashMap::new();
        let mut par_at: HashMap<usize, usize> = HashMap::new();
        // tag and type ref of every DIE, for the struct-parameter test.
        let mut tags: HashMap<usize, (gimli::DwTag, Option<usize>)> = HashMap::new();
        // (depth, subprogram) of the enclosing DIEs.
        let mut stack: Vec<(isize, Option<usize>)> = Vec::new();
        let mut cur = unit.entries();
        while cur.next_dfs().unwrap().is_some() {
            let depth = cur.depth();
            let e = cur.current().unwrap();
            while stack.last().is_some_and(|t| t.0 >= depth) {
                stack.pop();
            }
            let off = e.offset().0;
            let uref = |a: Option<AttributeValue<R<'_>>>| match a {
                Some(AttributeValue::UnitRef(UnitOffset(o))) => Some(o),
                _ => None,
            };
            let ty = uref(e.attr_value(dw::DW_AT_type));
            tags.insert(off, (e.tag(), ty));
            // Only a subprogram's direct children are its parameters.
            let parent = stack.last().filter(|t| t.0 == depth - 1).and_then(|t| t.1);
            let mut mine = None;
            match e.tag() {
                dw::DW_TAG_subprogram => {
                    let name = match e.attr_value(dw::DW_AT_name) {
                        Some(v) => dwarf.attr_string(&unit, v).unwrap().slice().to_vec(),
                        None => Vec::new(),
                    };
                    sub_at.insert(off, subs.len());
                    mine = Some(subs.len());
                    subs.push(Sub {
                        name,
                        declaration: e.attr_value(dw::DW_AT_declaration).is_some(),
                        origin: uref(e.attr_value(dw::DW_AT_abstract_origin)),
                        params: Vec::new(),
                    });
                }
                dw::DW_TAG_formal_parameter if parent.is_some() => {
                    let s = parent.unwrap();
                    let i = subs[s].params.len();
                    let loc = e.attr_value(dw::DW_AT_location);
                    let expected = regs.expected(i);
                    let actual = loc
                        .as_ref()
                        .map(|v| loc_reg_in_unit(&dwarf, &unit, v, expected.flatten()));
                    let cv = e.attr_value(dw::DW_AT_const_value).is_some();
                    par_at.insert(off, params.len());
                    subs[s].params.push(params.len());
                    params.push(Par {
                        origin: uref(e.attr_value(dw::DW_AT_abstract_origin)),
                        ty,
                    });
                    facts.push(param_facts(expected, actual, cv));
                }
                _ => {}
            }
            stack.push((depth, mine));
        }
        // Propagation to abstract-origin parameters, functions-table order
        // (post-order; the order does not change an OR).
        for s in &subs {
            for &p in &s.params {
                if params[p].ty.is_none()
                    && let Some(o) = params[p].origin.and_then(|o| par_at.get(&o).copied())
                {
                    propagate(&mut facts, p, o);
                    params[p].ty = params[o].ty;
                }
            }
        }
        let is_struct = |mut t: Option<usize>| loop {
            match t.and_then(|o| tags.get(&o)) {
                Some((tag, _)) if *tag == dw::DW_TAG_structure_type => return true,
                Some((tag, next)) if *tag == dw::DW_TAG_const_type || *tag == dw::DW_TAG_typedef => t = *next,
                _ => return false,
            }
        };
        for s in &subs {
            if s.declaration {
                continue;
            }
            let name = if s.name.is_empty() {
                s.origin
                    .and_then(|o| sub_at.get(&o))
                    .map(|&i| subs[i].name.clone())
                    .unwrap_or_default()
            } else {
                s.name.clone()
            };
            let f = function_flags(s.params.iter().map(|&p| facts[p]), || {
                s.params.iter().any(|&p| is_struct(params[p].ty))
            });
            out.entry(String::from_utf8_lossy(&name).into_owned())
                .or_default()
                .push(f);
        }
    }
    out
}

fn emitted(dump: &str) -> BTreeSet<String> {
    dump.lines()
        .filter_map(|l| {
            l.split_once("] FUNC '")
                .map(|x| x.1.split('\'').next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn unexpected_register_drops_match_the_reference() {
    crate::needs_corpus!();
    let c = Corpus::open_default();
    assert!(c.exists(), "corpus not found at {}", c.dir.display());
    // Names dropped under consistent_func for another reason than the
    // register rule (checked by the combine unit tests): prototype mismatch
    // between instances or ambiguous addresses.
    let other: &[(&str, &[&str])] = &[
        ("clones.gcc-O2", &["use_one_field"]),
        ("clones.gcc-O2-dwarf4", &["use_one_field"]),
    ];
    let mut checked = 0;
    let mut flagged_total = 0;
    for fixture in [
        "clones.gcc-O2",
        "clones.clang-O2",
        "clones.gcc-O0",
        "clones.gcc-O2-dwarf4",
        "optimized_params.gcc-O2",
        "optimized_params.clang-O2",
        "optimized_params.gcc-O0",
        "floats.gcc-O2",
        "floats.clang-O2",
        "ints.gcc-O2",
        "ints.gcc-O2-dwarf4",
        "misc_types.gcc-O2",
        "func_protos.gcc-O2",
        "func_protos.clang-O2",
        "func_protos.gcc-O0",
        "packed_aligned.gcc-O2",
        "structs_unions.gcc-O2",
        "kfuncs.gcc-O2",
    ] {
        let Ok(bin) = c.file(&format!("fixtures/bin/{fixture}.o")) else {
            continue;
        };
        let data = std::fs::read(bin).unwrap();
        let fl = flagged(&data);
        let bare = emitted(
            &std::fs::read_to_string(c.file(&format!("expected/fixtures/{fixture}.bare.txt")).unwrap()).unwrap(),
        );
        let kernel = emitted(
            &std::fs::read_to_string(c.file(&format!("expected/fixtures/{fixture}.kernel.txt")).unwrap()).unwrap(),
        );
        let dropped: BTreeSet<String> = bare.difference(&kernel).cloned().collect();
        let unexpected: BTreeSet<String> = fl
            .iter()
            .filter(|(n, f)| bare.contains(*n) && f.iter().any(|x| x & flags::UNEXPECTED_REG != 0))
            .map(|(n, _)| n.clone())
            .collect();
        let others: BTreeSet<String> = other
            .iter()
            .find(|(f, _)| *f == fixture)
            .map(|(_, n)| n.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        let want: BTreeSet<String> = dropped.difference(&others).cloned().collect();
        eprintln!("{fixture}: unexpected_reg {unexpected:?}, dropped by the reference {dropped:?}");
        assert_eq!(unexpected, want, "{fixture}");
        checked += 1;
        flagged_total += unexpected.len();
    }
    assert!(checked >= 15, "only {checked} fixtures found");
    assert!(flagged_total > 0, "no fixture exercised the rule");
}

#[test]
fn unexpected_register_drops_on_the_vmlinux() {
    crate::needs_corpus!();
    // The reference's vmlinux without (bare) and with (kernel) consistent_func:
    // every name the register rule flags must be among the dropped ones; the
    // rest of the dropped names are ambiguous addresses or mismatches.
    let c = Corpus::open_default();
    let data = std::fs::read(c.file("kernel/vmlinux-6.12.117+deb12-cloud-amd64").unwrap()).unwrap();
    let t0 = std::time::Instant::now();
    let fl = flagged(&data);
    let walk = t0.elapsed();
    let bare = emitted(&std::fs::read_to_string(c.file("expected/kernel/vmlinux.bare.txt").unwrap()).unwrap());
    let kernel = emitted(&std::fs::read_to_string(c.file("expected/kernel/vmlinux.kernel.txt").unwrap()).unwrap());
    let dropped: BTreeSet<String> = bare.difference(&kernel).cloned().collect();
    let unexpected: BTreeSet<String> = fl
        .iter()
        .filter(|(n, f)| bare.contains(*n) && f.iter().any(|x| x & flags::UNEXPECTED_REG != 0))
        .map(|(n, _)| n.clone())
        .collect();
    let table = btfkit::elf::functab::FuncTable::from_elf(&data).unwrap().unwrap();
    let ambiguous: BTreeSet<String> = table
        .entries
        .iter()
        .filter(|e| e.ambiguous)
        .map(|e| String::from_utf8_lossy(e.key).into_owned())
        .filter(|n| bare.contains(n))
        .collect();
    if let Some(p) = std::env::var_os("BTFKIT_DUMP_UNEXPECTED") {
        std::fs::write(p, unexpected.iter().map(|n| format!("{n}\n")).collect::<String>()).unwrap();
    }
    let not_dropped: Vec<&String> = unexpected.difference(&dropped).collect();
    let rest = dropped
        .iter()
        .filter(|n| !unexpected.contains(*n) && !ambiguous.contains(*n))
        .count();
    eprintln!(
        "vmlinux: DWARF walk {walk:?}; {} FUNCs without consistent_func, {} with; dropped {}: unexpected_reg {}, \
         ambiguous address {} (overlapping {}), other reasons {rest}",
        bare.len(),
        kernel.len(),
        dropped.len(),
        unexpected.len(),
        ambiguous.len(),
        unexpected.intersection(&ambiguous).count()
    );
    assert!(
        not_dropped.is_empty(),
        "flagged unexpected_reg but kept by the reference: {not_dropped:?}"
    );
    assert!(ambiguous.is_subset(&dropped), "ambiguous but kept");
    assert!(
        unexpected.len() > 100,
        "the rule fired on only {} names",
        unexpected.len()
    );
}
