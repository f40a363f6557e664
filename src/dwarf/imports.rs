//! dwz's partial units: types that several units share, moved into
//! DW_TAG_partial_units (of the file itself, or of a supplementary file
//! that several files share) and brought back with DW_TAG_imported_unit.
//!
//! A unit that imports others is read as if their DIEs stood in it: it is
//! decoded with section-wide offsets (references into a partial unit are
//! DW_FORM_ref_addr, or DW_FORM_GNU_ref_alt into the supplementary file),
//! and each unit it imports, directly or through another import, is
//! decoded once and appended as a part ([`Cu::append`]), as type units are
//! with `--type-units=resolve`. A partial unit is read once per unit that
//! imports it, as the uncompressed file repeats its types in each unit;
//! it is decoded once, though, and copied into each (decoding a dwz'd
//! vmlinux's partial units for each of their importers was 24 of its 28
//! CPU seconds). Partial units are not read on their own: only what a
//! unit imports is.

use gimli::constants as dw;
use hashbrown::HashSet;

use super::walk::Walker;
use super::{Cu, DecodeError, Decoder, Dwarf, R, Refs, UnitKind};

/// The units an import may name: those of the file and of its
/// supplementary file, by where they sit in the decoders' offset space.
pub struct Imports<'a, 'd> {
    /// The supplementary file's decoder, when one was read.
    sup: Option<&'d Decoder<'a, 'd>>,
    /// (start, end, in the supplementary file, header), sorted by start.
    units: Vec<(u64, u64, bool, gimli::UnitHeader<R<'a>>)>,
    /// Each unit decoded as a part, once, when first imported.
    parts: Vec<std::sync::OnceLock<Result<Cu<'a>, DecodeError>>>,
}

impl<'a, 'd> Imports<'a, 'd> {
    /// `own`: the file's unit headers (its offsets are the space's own,
    /// from 0); `sup`: the supplementary file's decoder and headers.
    pub fn new(
        own: &[gimli::UnitHeader<R<'a>>],
        sup: Option<(&'d Decoder<'a, 'd>, &[gimli::UnitHeader<R<'a>>])>,
    ) -> Self {
        let span = |base: u64, h: &gimli::UnitHeader<R<'a>>| {
            let start = base + h.offset().0 as u64;
            (start, start + h.length_including_self() as u64)
        };
        let mut units: Vec<_> = own
            .iter()
            .map(|h| {
                let (s, e) = span(0, h);
                (s, e, false, *h)
            })
            .collect();
        if let Some((dec, headers)) = sup {
            let base = dec.space.own;
            units.extend(headers.iter().map(|h| {
                let (s, e) = span(base, h);
                (s, e, true, *h)
            }));
        }
        units.sort_unstable_by_key(|u| u.0);
        let parts = (0..units.len()).map(|_| std::sync::OnceLock::new()).collect();
        Imports {
            sup: sup.map(|s| s.0),
            units,
            parts,
        }
    }

    /// The unit holding offset `at`: its index, start, whether it is in
    /// the supplementary file.
    fn unit_at(&self, at: u64) -> Option<(usize, u64, bool)> {
        let i = self.units.partition_point(|u| u.0 <= at).checked_sub(1)?;
        let (start, end, sup, _) = self.units[i];
        (at < end).then_some((i, start, sup))
    }
}

impl<'a> Decoder<'a, '_> {
    /// Decodes a unit with the units it imports as parts of it (see the
    /// module's comment); a partial unit alone is passed over
    /// ([`UnitKind::Ignored`]).
    pub fn decode_importing(
        &self,
        header: gimli::UnitHeader<R<'a>>,
        keep: &dyn Fn(u16, &[u8]) -> bool,
    ) -> Result<Option<Cu<'a>>, DecodeError> {
        let Some(mut cu) = Walker::new(self, header, Refs::Section, false, true)?.run(keep)? else {
            return Ok(None);
        };
        if cu.kind == UnitKind::Ignored {
            return Ok(Some(cu));
        }
        self.pull_imports(&mut cu, false)?;
        cu.finish_parts();
        Ok(Some(cu))
    }

    /// Appends to `cu` every unit its imports bring in, transitively, each
    /// once, and any partial unit its references land in without an
    /// import; with `sup_only`, only the units of the supplementary file
    /// (a merged unit has the file's own among its parts already). A
    /// reference into another compile unit (an LTO build's, compressed) is
    /// refused: the unit alone cannot be read as the reference would read
    /// the uncompressed file. The caller finishes the parts.
    pub fn pull_imports(&self, cu: &mut Cu<'a>, sup_only: bool) -> Result<(), DecodeError> {
        let mut pending = std::mem::take(&mut cu.imports);
        let mut far = std::mem::take(&mut cu.far_refs);
        if pending.is_empty() && far.is_empty() {
            return Ok(());
        }
        let Some(imports) = self.imports else {
            return Err(self.err(
                cu.offset,
                None,
                "the unit imports units (DW_TAG_imported_unit), but none was indexed to read them from",
            ));
        };
        pending.reverse();
        let mut seen: HashSet<u64> = HashSet::new();
        seen.insert(cu.offset + self.space.own);
        loop {
            while let Some(at) = pending.pop() {
                let Some((i, start, in_sup)) = imports.unit_at(at) else {
                    return Err(self.err(
                        cu.offset,
                        None,
                        format!(
                            "a DW_TAG_imported_unit or reference names offset {at:#x}, which is in no unit of \
                             the file or of its supplementary file"
                        ),
                    ));
                };
                if (sup_only && !in_sup) || !seen.insert(start) {
                    continue;
                }
                let decoded = imports.parts[i].get_or_init(|| {
                    let dec = match (in_sup, imports.sup) {
                        (false, _) => self,
                        (true, Some(sup)) => sup,
                        (true, None) => unreachable!("units of a supplementary file are indexed only with its decoder"),
                    };
                    let header = imports.units[i].3;
                    let part = Walker::new(dec, header, Refs::Section, true, true)?.run(&|_, _| true)?;
                    Ok(part.expect("a part is never filtered out"))
                });
                let part = match decoded {
                    Ok(p) => p,
                    Err(e) => return Err(e.clone()),
                };
                if !part.partial {
                    return Err(self.err(
                        cu.offset,
                        None,
                        format!(
                            "it refers into compile unit {:#x}{}: units referring into each other (an LTO \
                             build) in a dwz-compressed file are not read (known gap: btfkit reads dwz's \
                             partial units, and LTO files merged only without dwz)",
                            imports.units[i].3.offset().0,
                            if in_sup { " of the supplementary file" } else { "" },
                        ),
                    ));
                }
                pending.extend(part.imports.iter().rev());
                if !sup_only {
                    far.extend_from_slice(&part.far_refs);
                }
                let own_imports = cu.imports.len();
                cu.append_copy(part);
                // (what it imports is pending already)
                cu.imports.truncate(own_imports);
            }
            // References that land in a unit not read yet: dwz imports
            // what a unit refers to, but a unit it references is read all
            // the same.
            for &o in &far {
                if let Some((_, start, in_sup)) = imports.unit_at(o)
                    && !seen.contains(&start)
                    && (!sup_only || in_sup)
                {
                    pending.push(o);
                }
            }
            far.clear();
            if pending.is_empty() {
                return Ok(());
            }
        }
    }
}

/// Whether any unit's abbreviation table declares DW_TAG_imported_unit
/// (whether or not a DIE uses it): a file dwz compressed. A table that
/// cannot be read counts as declaring none; decoding reports the damage.
pub fn declares_imported_units(d: &Dwarf<'_>, headers: &[gimli::UnitHeader<R<'_>>]) -> bool {
    super::units::any_table_declares(d, headers, &|tag, _| tag == dw::DW_TAG_imported_unit)
}

/// Whether a compile unit is one of GCC's LTO units (named `<artificial>`):
/// without the kernel's LTO note, the reference tells an LTO file by its
/// DW_FORM_ref_addr, which dwz also uses for its own references, so a dwz
/// file is read as one merged unit when GCC marked it. Reads each root DIE
/// until one is found; a unit that cannot be read counts as not one.
pub fn has_gcc_lto_unit(d: &Dwarf<'_>, headers: &[gimli::UnitHeader<R<'_>>]) -> bool {
    headers.iter().any(|h| {
        let Ok(abbrevs) = d.abbreviations(h) else { return false };
        let mut entries = h.entries(&abbrevs);
        let Ok(Some(root)) = entries.next_dfs().map(|e| e.cloned()) else {
            return false;
        };
        if root.tag() != dw::DW_TAG_compile_unit {
            return false;
        }
        let Ok(unit) = super::unit(d, *h) else { return false };
        root.attr_value(dw::DW_AT_name)
            .and_then(|v| d.attr_string(&unit, v).ok())
            .is_some_and(|n| n.slice() == b"<artificial>")
    })
}
