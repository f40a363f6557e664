//! Setting up gimli over the debug sections, unit headers, and the
//! source context of a DIE for error messages.

use gimli::{EndianSlice, RunTimeEndian, Section, UnitOffset, constants as dw};
use smallvec::SmallVec;

use super::dies;
use super::{Dwarf, R};
use crate::elf::debug::DebugSections;

/// Builds the gimli view of the sections.
#[allow(clippy::field_reassign_with_default)]
pub fn dwarf<'a>(s: &'a DebugSections<'_>, endian: RunTimeEndian) -> Dwarf<'a> {
    let r = |d: &'a [u8]| EndianSlice::new(d, endian);
    let mut d = Dwarf::default();
    d.debug_info = gimli::DebugInfo::from(r(&s.info));
    d.debug_abbrev = gimli::DebugAbbrev::from(r(&s.abbrev));
    d.debug_str = gimli::DebugStr::from(r(&s.str));
    d.debug_line = gimli::DebugLine::from(r(&s.line));
    d.debug_line_str = gimli::DebugLineStr::from(r(&s.line_str));
    d.debug_str_offsets = gimli::DebugStrOffsets::from(r(&s.str_offsets));
    d.debug_addr = gimli::DebugAddr::from(r(&s.addr));
    d.locations = gimli::LocationLists::new(
        gimli::DebugLoc::from(r(&s.loc)),
        gimli::DebugLocLists::from(r(&s.loclists)),
    );
    d.ranges = gimli::RangeLists::new(
        gimli::DebugRanges::from(r(&s.ranges)),
        gimli::DebugRngLists::from(r(&s.rnglists)),
    );
    d
}

/// gimli's `Unit::new` without what BTF never reads: the unit's name and
/// directory as gimli resolves them, its `low_pc`, and above all the
/// line-number program header, which gimli parses for every unit (file and
/// directory tables of hundreds of entries per kernel CU: a visible part of a
/// vmlinux encode, and `.debug_line` pages touched for nothing). The bases
/// the location and string readers use are set exactly as gimli sets them.
///
/// The unit's abbreviations are read by the DIE cursor ([`Dies`]), as far
/// as it needs them; gimli parses the whole table here only when the root
/// DIE carries one of those bases (split DWARF, clang's `strx` forms), to
/// read them exactly as gimli does. Otherwise the `Unit` holds no
/// abbreviations and nothing reads it through gimli.
pub fn unit<'a>(d: &Dwarf<'a>, header: gimli::UnitHeader<R<'a>>) -> gimli::Result<gimli::Unit<R<'a>>> {
    use gimli::{AttributeValue as V, constants as c};
    let sets_bases = dies::root_sets_bases(&header, *d.debug_abbrev.reader())?;
    let abbreviations = if sets_bases {
        d.abbreviations(&header)?
    } else {
        std::sync::Arc::new(gimli::Abbreviations::default())
    };
    let enc = header.encoding();
    let mut unit = gimli::Unit {
        abbreviations,
        name: None,
        comp_dir: None,
        low_pc: 0,
        str_offsets_base: gimli::DebugStrOffsetsBase::default_for_encoding_and_file(enc, d.file_type),
        addr_base: gimli::DebugAddrBase(0),
        loclists_base: gimli::DebugLocListsBase::default_for_encoding_and_file(enc, d.file_type),
        rnglists_base: gimli::DebugRngListsBase::default_for_encoding_and_file(enc, d.file_type),
        line_program: None,
        dwo_id: match header.type_() {
            gimli::UnitType::Skeleton(id) | gimli::UnitType::SplitCompilation(id) => Some(id),
            _ => None,
        },
        header,
    };
    if !sets_bases {
        return Ok(unit);
    }
    let mut cursor = unit.header.entries(&unit.abbreviations);
    cursor.next_dfs()?;
    let root = cursor.current().ok_or(gimli::Error::MissingUnitDie)?;
    let (mut str_base, mut addr_base, mut loc_base, mut rng_base, mut dwo) = (None, None, None, None, None);
    for attr in root.attrs() {
        match (attr.name(), attr.value()) {
            (c::DW_AT_str_offsets_base, V::DebugStrOffsetsBase(b)) => str_base = Some(b),
            (c::DW_AT_addr_base | c::DW_AT_GNU_addr_base, V::DebugAddrBase(b)) => addr_base = Some(b),
            (c::DW_AT_loclists_base, V::DebugLocListsBase(b)) => loc_base = Some(b),
            (c::DW_AT_rnglists_base | c::DW_AT_GNU_ranges_base, V::DebugRngListsBase(b)) => rng_base = Some(b),
            (c::DW_AT_GNU_dwo_id, V::DwoId(id)) => dwo = dwo.or(Some(id)),
            _ => {}
        }
    }
    unit.str_offsets_base = str_base.unwrap_or(unit.str_offsets_base);
    unit.addr_base = addr_base.unwrap_or(unit.addr_base);
    unit.loclists_base = loc_base.unwrap_or(unit.loclists_base);
    unit.rnglists_base = rng_base.unwrap_or(unit.rnglists_base);
    unit.dwo_id = unit.dwo_id.or(dwo);
    Ok(unit)
}

/// A unit header of `.debug_info` that cannot be read.
#[derive(Debug, Clone)]
pub struct HeaderError {
    /// Where the header starts (the end of the last good unit).
    pub at: u64,
    /// What is wrong with it.
    pub why: String,
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, ".debug_info: bad unit header at offset {:#x}: {}", self.at, self.why)
    }
}

impl std::error::Error for HeaderError {}

/// All unit headers of `.debug_info`, in order.
pub fn unit_headers<'a>(d: &Dwarf<'a>) -> Result<Vec<gimli::UnitHeader<R<'a>>>, HeaderError> {
    unit_headers_passing(d, &mut |_| {})
}

/// [`unit_headers`], calling `passed(end)` each time the scan has gone
/// past another [`PASSED_STEP`] bytes of `.debug_info` (`end`: where it
/// is), so that a caller can drop what the scan touched behind it.
pub fn unit_headers_passing<'a>(
    d: &Dwarf<'a>,
    passed: &mut dyn FnMut(usize),
) -> Result<Vec<gimli::UnitHeader<R<'a>>>, HeaderError> {
    let mut out = Vec::new();
    let mut it = d.units();
    let mut last_end = 0u64;
    let mut next_step = PASSED_STEP as u64;
    loop {
        match it.next() {
            Ok(Some(h)) => {
                let off = h.offset().0 as u64;
                last_end = off + h.length_including_self() as u64;
                out.push(h);
                if off >= next_step {
                    passed(off as usize);
                    next_step = off + PASSED_STEP as u64;
                }
            }
            Ok(None) => break,
            Err(e) => {
                return Err(HeaderError {
                    at: last_end,
                    why: unit_length_fault(d.debug_info.reader(), last_end).unwrap_or_else(|| e.to_string()),
                });
            }
        }
    }
    Ok(out)
}

/// How far [`unit_headers_passing`] scans between calls.
pub const PASSED_STEP: usize = 16 << 20;

/// Whether any unit's abbreviation table declares an attribute in
/// DW_FORM_ref_addr: without the kernel's LTO note, that is what makes the
/// reference read the file as one merged unit (whether or not a DIE uses
/// the abbreviation). A table that cannot be read counts as having none;
/// decoding reports the damage.
pub fn declares_cross_unit_refs(d: &Dwarf<'_>, headers: &[gimli::UnitHeader<R<'_>>]) -> bool {
    any_table_declares(d, headers, &|_, specs| {
        specs.iter().any(|s| s.1 == dw::DW_FORM_ref_addr)
    })
}

/// Whether the units repeat: at least a quarter of `.debug_info`'s bytes
/// are in units that look like an earlier unit's copy (the same length,
/// the same abbreviation table, the same first 256 bytes after the
/// header). Only units that share a length and a table with another are
/// read, which distinct compile units do not; those are read in section
/// order, and `passed(end)` is called as the reading passes offset `end`,
/// so the caller can drop the pages behind it. A guess that turns on the
/// collapse of exact copies, which is exact either way.
pub fn units_repeat(d: &Dwarf<'_>, headers: &[gimli::UnitHeader<R<'_>>], passed: &mut dyn FnMut(usize)) -> bool {
    let info = d.debug_info.reader().slice();
    let key = |h: &gimli::UnitHeader<R<'_>>| (h.length_including_self(), h.debug_abbrev_offset().0);
    let mut count: hashbrown::HashMap<(usize, usize), u32> = hashbrown::HashMap::new();
    let mut total = 0usize;
    for h in headers {
        total += h.length_including_self();
        *count.entry(key(h)).or_default() += 1;
    }
    // (length, table) -> the hashes of the distinct samples met
    let mut seen: hashbrown::HashMap<(usize, usize), SmallVec<[u64; 2]>> = hashbrown::HashMap::new();
    let mut repeated = 0usize;
    for h in headers.iter().filter(|h| count[&key(h)] > 1) {
        let (start, len) = (h.offset().0, h.length_including_self());
        let at = start + h.header_size();
        let end = (start + len).min(at + 256);
        let sample = info.get(at..end).unwrap_or_default();
        let hash = {
            use std::hash::Hasher;
            let mut x = std::hash::DefaultHasher::new();
            x.write(sample);
            x.finish()
        };
        let hashes = seen.entry(key(h)).or_default();
        if hashes.contains(&hash) {
            repeated += len;
        } else {
            hashes.push(hash);
        }
        passed(end);
    }
    repeated > 0 && repeated >= total / 4
}

/// Whether an abbreviation of any unit's table passes `test` (each table
/// read once, however many units share it).
pub(super) fn any_table_declares(
    d: &Dwarf<'_>,
    headers: &[gimli::UnitHeader<R<'_>>],
    test: &dyn Fn(gimli::DwTag, &[dies::Spec]) -> bool,
) -> bool {
    let mut tables: Vec<usize> = headers.iter().map(|h| h.debug_abbrev_offset().0).collect();
    tables.sort_unstable();
    tables.dedup();
    let section = *d.debug_abbrev.reader();
    tables.into_iter().any(|at| dies::table_declares(section, at, test))
}

/// Where DIE `die` (a `.debug_info` offset) comes from in the source, for
/// error messages: its name and declaration place (`DW_AT_name`,
/// `DW_AT_decl_file`:`DW_AT_decl_line`), or, for a DIE without them (an
/// anonymous type), those of the first DIE that refers to it by
/// `DW_AT_type`, or of the nearest named DIE around that one. Read with
/// gimli's own reader (the line-number program included), on the error path
/// only; `None` if nothing names it. `cu` is the offset of the unit being
/// decoded: the DIE's own unit is read without the units before it, whose
/// bytes may already be given back; a DIE outside it (a later part of a
/// merged unit) is looked for from the first unit on.
pub fn die_context(d: &Dwarf<'_>, cu: u64, die: super::DieOffset) -> Option<String> {
    let die = die.get();
    use gimli::AttributeValue as V;
    let holds = |h: &gimli::UnitHeader<R<'_>>| {
        let start = h.offset().0 as u64;
        start <= die && die < start + h.length_including_self() as u64
    };
    let own = usize::try_from(cu)
        .ok()
        .and_then(|cu| d.debug_info.header_from_offset(gimli::DebugInfoOffset(cu)).ok())
        .filter(holds);
    let header = match own {
        Some(h) => h,
        None => {
            let mut units = d.units();
            loop {
                let h = units.next().ok()??;
                if holds(&h) {
                    break h;
                }
            }
        }
    };
    let start = header.offset().0 as u64;
    let unit = d.unit(header).ok()?;
    let target = UnitOffset((die - start) as usize);
    // (name, file, line) of a DIE, each where it has one
    let describe = |e: &gimli::DebuggingInformationEntry<R<'_>>| -> (Option<String>, Option<String>, Option<u64>) {
        let name = e
            .attr_value(dw::DW_AT_name)
            .and_then(|v| d.attr_string(&unit, v).ok())
            .map(|r| String::from_utf8_lossy(r.slice()).into_owned());
        let file = match e.attr_value(dw::DW_AT_decl_file) {
            Some(V::FileIndex(i)) | Some(V::Udata(i)) => Some(i),
            Some(V::Data1(i)) => Some(i as u64),
            Some(V::Data2(i)) => Some(i as u64),
            Some(V::Data4(i)) => Some(i as u64),
            _ => None,
        }
        .and_then(|i| {
            let lp = unit.line_program.as_ref()?;
            let f = lp.header().file(i)?;
            let n = d.attr_string(&unit, f.path_name()).ok()?;
            Some(String::from_utf8_lossy(n.slice()).into_owned())
        });
        let line = e.attr_value(dw::DW_AT_decl_line).and_then(|v| v.udata_value());
        (name, file, line)
    };
    let render = |(name, file, line): (Option<String>, Option<String>, Option<u64>)| -> Option<String> {
        let place = match (file, line) {
            (Some(f), Some(l)) => Some(format!("{f}:{l}")),
            (Some(f), None) => Some(f),
            _ => None,
        };
        match (name, place) {
            (Some(n), Some(p)) => Some(format!("`{n}` ({p})")),
            (Some(n), None) => Some(format!("`{n}`")),
            (None, Some(p)) => Some(p),
            (None, None) => None,
        }
    };
    let mut cursor = unit.entries();
    // the named DIEs around the current one: (depth, description)
    let mut named: Vec<(isize, String)> = Vec::new();
    let mut referrer: Option<String> = None;
    while let Ok(Some(e)) = cursor.next_dfs() {
        let depth = e.depth();
        while named.last().is_some_and(|n| n.0 >= depth) {
            named.pop();
        }
        let own = render(describe(e));
        if e.offset() == target {
            if let Some(o) = own {
                return Some(o);
            }
            continue;
        }
        if referrer.is_none() && matches!(e.attr_value(dw::DW_AT_type), Some(V::UnitRef(t)) if t == target) {
            referrer = match (&own, named.last()) {
                (Some(o), Some((_, outer))) if !o.starts_with('`') => Some(format!("{outer}, at {o}")),
                (Some(o), _) => Some(o.clone()),
                (None, Some((_, outer))) => Some(outer.clone()),
                (None, None) => None,
            };
        }
        if let Some(o) = own.filter(|o| o.starts_with('`')) {
            named.push((depth, o));
        }
    }
    referrer.map(|r| format!("used by {r}"))
}

/// What is wrong with the length field of the unit header at `at`, when
/// that is what gimli's "unexpected end of input" means.
pub(super) fn unit_length_fault(r: &R<'_>, at: u64) -> Option<String> {
    use gimli::Reader;
    let sec = r.slice();
    let big = gimli::Endianity::is_big_endian(r.endian());
    let word = |at: u64, n: usize| -> Option<u64> {
        let b = sec.get(usize::try_from(at).ok()?..)?.get(..n)?;
        Some(if big {
            b.iter().fold(0, |v, &x| (v << 8) | x as u64)
        } else {
            b.iter().rev().fold(0, |v, &x| (v << 8) | x as u64)
        })
    };
    let (len, field) = match word(at, 4)? {
        0xffff_ffff => (word(at + 4, 8)?, 12),
        l if l >= 0xffff_fff0 => return None,
        l => (l, 4),
    };
    let size = sec.len() as u64;
    if (at + field).checked_add(len).is_none_or(|end| end > size) {
        return Some(format!(
            "unit length {len:#x} reaches past the end of the section ({size} bytes)"
        ));
    }
    // version, abbreviations offset and address size at least.
    if len < 7 {
        return Some(format!("unit length {len} is too short for a unit header"));
    }
    None
}
