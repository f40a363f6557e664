//! Compiling an abbreviation into a plan: what [`super::Dies`] reads of each
//! of its attributes, what it steps over, and into which field each read
//! attribute goes.

use gimli::{DwAt, DwForm, DwTag, EndianSlice, Format, RunTimeEndian, constants as dw};

use super::{DIRECT_CODES, Dies, Res};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// Which `Attrs` field a read attribute fills.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::dwarf) enum Field {
    Name,
    Type,
    Origin,
    Spec,
    ByteSize,
    Encoding,
    Declaration,
    External,
    Artificial,
    UpperBound,
    Count,
    MemberLoc,
    DataBitOffset,
    BitSize,
    BitOffset,
    ConstValue,
    Location,
    Language,
    /// DW_AT_signature: a type unit's type, which only counts (see
    /// `Cu::type_unit_refs`).
    Signature,
    /// DW_AT_import: the unit a DW_TAG_imported_unit brings in.
    Import,
    /// DW_AT_low_pc of a DW_TAG_subprogram (read on no other tag).
    LowPc,
    /// DW_AT_calling_convention of a DW_TAG_subprogram (read on no other
    /// tag): clang's `DW_CC_nocall` marks a changed signature.
    CallingConvention,
    /// DW_AT_inline of a DW_TAG_subprogram (read on no other tag).
    Inline,
    /// DW_AT_producer (of a unit): which compiler.
    Producer,
    /// DW_AT_GNU_annotation: the first of a chain of DW_TAG_GNU_annotation
    /// DIEs (gcc 16's btf_decl_tag and btf_type_tag).
    GnuAnnotation,
}

impl Field {
    /// Read on subprograms only: inlined instances and blocks, far more
    /// numerous, keep skipping theirs.
    fn subprogram_only(self) -> bool {
        matches!(self, Field::LowPc | Field::CallingConvention | Field::Inline)
    }
}

impl Field {
    /// The field an attribute fills, or `None` if nothing reads it.
    pub(super) fn of(at: DwAt) -> Option<Field> {
        Some(match at {
            dw::DW_AT_name => Field::Name,
            dw::DW_AT_type => Field::Type,
            dw::DW_AT_abstract_origin => Field::Origin,
            dw::DW_AT_specification => Field::Spec,
            dw::DW_AT_byte_size => Field::ByteSize,
            dw::DW_AT_encoding => Field::Encoding,
            dw::DW_AT_declaration => Field::Declaration,
            dw::DW_AT_external => Field::External,
            dw::DW_AT_artificial => Field::Artificial,
            dw::DW_AT_upper_bound => Field::UpperBound,
            dw::DW_AT_count => Field::Count,
            dw::DW_AT_data_member_location => Field::MemberLoc,
            dw::DW_AT_signature => Field::Signature,
            dw::DW_AT_data_bit_offset => Field::DataBitOffset,
            dw::DW_AT_bit_size => Field::BitSize,
            dw::DW_AT_bit_offset => Field::BitOffset,
            dw::DW_AT_const_value => Field::ConstValue,
            dw::DW_AT_location => Field::Location,
            dw::DW_AT_language => Field::Language,
            dw::DW_AT_import => Field::Import,
            dw::DW_AT_low_pc => Field::LowPc,
            dw::DW_AT_calling_convention => Field::CallingConvention,
            dw::DW_AT_inline => Field::Inline,
            dw::DW_AT_producer => Field::Producer,
            super::super::DW_AT_GNU_ANNOTATION => Field::GnuAnnotation,
            _ => return None,
        })
    }
}

/// One step of a plan.
#[derive(Clone, Copy, Debug)]
pub(in crate::dwarf) enum Op {
    /// Unread attributes of known total size.
    Skip(u32),
    /// An unread attribute of variable size.
    SkipForm(DwForm),
    /// A read attribute: its name (for messages and gimli's DWARF 2/3
    /// section-offset rule), form, target field and implicit constant.
    Read {
        at: DwAt,
        form: DwForm,
        field: Field,
        implicit: i64,
    },
    /// A read attribute in DW_FORM_ref_addr: the decoder reports it.
    RefAddr(DwAt),
    // The forms of nearly every read attribute, decided when the plan is
    // compiled rather than per DIE.
    /// A name in DW_FORM_strp of a 32-bit unit.
    NameStrp4(DwAt),
    /// A unit reference in DW_FORM_ref4.
    Ref4(DwAt, Field),
    /// A number in DW_FORM_data1 for a field that wants one.
    Num1(DwAt, Field),
    /// A number in DW_FORM_data2 for a field that wants one.
    Num2(DwAt, Field),
    /// DW_FORM_flag_present.
    Present(Field),
    /// The end of a plan. Plans end in a marker rather than carry their
    /// lengths: the compiled abbreviation every DIE copies is 12 bytes, not
    /// 20 (moving the larger one showed in a module's encode).
    /// Smaller still, with the skip plan's start kept among the ops, was
    /// slower again.
    End,
}

/// A compiled abbreviation.
#[derive(Clone, Copy, Debug)]
pub(in crate::dwarf) struct Abbrev {
    pub tag: DwTag,
    pub has_children: bool,
    /// `ops[read..]` up to `Op::End`: read the wanted attributes.
    pub(super) read: u32,
    /// `ops[skip..]` up to `Op::End`: skip every attribute.
    pub(super) skip: u32,
}

impl Abbrev {
    /// A null entry (tag 0, which no abbreviation has: gimli rejects it).
    pub(super) const NULL: Abbrev = Abbrev {
        tag: DwTag(0),
        has_children: false,
        read: 0,
        skip: 0,
    };

    #[inline]
    pub(in crate::dwarf) fn is_null(&self) -> bool {
        self.tag.0 == 0
    }
}

/// One attribute specification of an abbreviation: name, form, and the
/// value of a `DW_FORM_implicit_const` (else 0).
pub(in crate::dwarf) type Spec = (DwAt, DwForm, i64);

/// Reads the abbreviation at `r` (code, tag, whether it has children), its
/// attribute specifications into `specs`, with the checks gimli's parser
/// makes; `None` at the table's end (a zero code, or the section's end,
/// which gimli also takes for one).
pub(super) fn read_abbrev(r: &mut R<'_>, specs: &mut Vec<Spec>) -> Res<Option<(u64, DwTag, bool)>> {
    use gimli::Reader;
    if r.is_empty() {
        return Ok(None);
    }
    let code = r.read_uleb128()?;
    if code == 0 {
        return Ok(None);
    }
    let tag = match r.read_uleb128_u16()? {
        0 => return Err(gimli::Error::AbbreviationTagZero),
        t => DwTag(t),
    };
    let has_children = match gimli::DwChildren(r.read_u8()?) {
        dw::DW_CHILDREN_yes => true,
        dw::DW_CHILDREN_no => false,
        other => return Err(gimli::Error::InvalidAbbreviationChildren(other)),
    };
    specs.clear();
    loop {
        let (name, form) = (r.read_uleb128_u16()?, r.read_uleb128_u16()?);
        match (name, form) {
            (0, 0) => break,
            (0, _) => return Err(gimli::Error::AttributeNameZero),
            (_, 0) => return Err(gimli::Error::AttributeFormZero),
            _ => {}
        }
        let form = DwForm(form);
        let implicit = if form == dw::DW_FORM_implicit_const {
            r.read_sleb128()?
        } else {
            0
        };
        specs.push((DwAt(name), form, implicit));
    }
    Ok(Some((code, tag, has_children)))
}

/// Whether an abbreviation of the table at `at` in `debug_abbrev` passes
/// `test(tag, attribute specifications)`, whether or not a DIE uses it; a
/// table that cannot be read counts as having none that does.
pub(in crate::dwarf) fn table_declares(debug_abbrev: R<'_>, at: usize, test: &dyn Fn(DwTag, &[Spec]) -> bool) -> bool {
    let mut r = debug_abbrev;
    if gimli::Reader::skip(&mut r, at).is_err() {
        return false;
    }
    let mut specs = Vec::new();
    while let Ok(Some((_, tag, _))) = read_abbrev(&mut r, &mut specs) {
        if test(tag, &specs) {
            return true;
        }
    }
    false
}

/// Whether the abbreviation of `header`'s root DIE has an attribute that
/// sets one of the bases gimli's `Unit` keeps (string offsets, addresses,
/// location and range lists, the DWO id). Reads the table only up to that
/// abbreviation and compiles nothing.
pub(in crate::dwarf) fn root_sets_bases(header: &gimli::UnitHeader<R<'_>>, debug_abbrev: R<'_>) -> Res<bool> {
    use gimli::Reader;
    let mut root = header.range_from(header.root_offset()..)?;
    let code = root.read_uleb128()?;
    if code == 0 {
        return Err(gimli::Error::MissingUnitDie);
    }
    let mut r = debug_abbrev;
    r.skip(header.debug_abbrev_offset().0)?;
    let mut specs = Vec::with_capacity(32);
    loop {
        match read_abbrev(&mut r, &mut specs)? {
            Some((c, ..)) if c == code => break,
            Some(_) => {}
            None => return Err(gimli::Error::InvalidAbbreviationCode(code)),
        }
    }
    Ok(specs.iter().any(|&(name, ..)| {
        matches!(
            name,
            dw::DW_AT_str_offsets_base
                | dw::DW_AT_addr_base
                | dw::DW_AT_GNU_addr_base
                | dw::DW_AT_loclists_base
                | dw::DW_AT_rnglists_base
                | dw::DW_AT_GNU_ranges_base
                | dw::DW_AT_GNU_dwo_id
        )
    }))
}

impl Dies<'_> {
    /// Compiles the abbreviations of the table up to the one of `code`
    /// (codes are met roughly in table order, so most units read their
    /// table once, and only as far as their DIEs use it).
    #[cold]
    pub(super) fn compile(&mut self, code: u64) -> Res<Abbrev> {
        loop {
            match self.next_abbrev()? {
                Some((c, a)) if c == code => return Ok(a),
                Some(_) => {}
                None => return Err(gimli::Error::InvalidAbbreviationCode(code)),
            }
        }
    }

    /// Reads and compiles the table's next abbreviation, with the checks
    /// gimli's parser makes; `None` at the table's end (a zero code, or the
    /// section's end, which gimli also takes for one).
    fn next_abbrev(&mut self) -> Res<Option<(u64, Abbrev)>> {
        if self.abbrev_done {
            return Ok(None);
        }
        let Some((code, tag, has_children)) = read_abbrev(&mut self.abbrev, &mut self.specs)? else {
            self.abbrev_done = true;
            return Ok(None);
        };
        let specs = std::mem::take(&mut self.specs);
        let read = self.plan(&specs, true, tag);
        let skip = self.plan(&specs, false, tag);
        self.specs = specs;
        let a = Abbrev {
            tag,
            has_children,
            read,
            skip,
        };
        let known = match self.by_code.get(code as usize) {
            Some(&i) => i != 0,
            None => self.sparse.contains_key(&code),
        };
        if known {
            return Err(gimli::Error::DuplicateAbbreviationCode(code));
        }
        self.compiled.push(a);
        let index = self.compiled.len() as u32;
        if code < DIRECT_CODES {
            if self.by_code.len() <= code as usize {
                self.by_code.resize(code as usize + 1, 0);
            }
            self.by_code[code as usize] = index;
        } else {
            self.sparse.insert(code, index);
        }
        Ok(Some((code, a)))
    }

    fn plan(&mut self, specs: &[Spec], reading: bool, tag: DwTag) -> u32 {
        let start = self.ops.len() as u32;
        let mut run = 0u32;
        for &(name, form, implicit) in specs {
            // (a function's address and how it was compiled, for the next
            // reference's choice among its definitions and its parameter
            // analysis)
            let field = if reading { Field::of(name) } else { None }
                .filter(|&f| !f.subprogram_only() || tag == dw::DW_TAG_subprogram);
            if let Some(field) = field {
                if run > 0 {
                    self.ops.push(Op::Skip(run));
                    run = 0;
                }
                self.ops.push(match form {
                    dw::DW_FORM_ref_addr if !self.cross_unit => Op::RefAddr(name),
                    dw::DW_FORM_strp if field == Field::Name && self.enc.format == Format::Dwarf32 => {
                        Op::NameStrp4(name)
                    }
                    dw::DW_FORM_ref4 => Op::Ref4(name, field),
                    dw::DW_FORM_data1 if wants_number(field) => Op::Num1(name, field),
                    dw::DW_FORM_data2 if wants_number(field) => Op::Num2(name, field),
                    dw::DW_FORM_flag_present => Op::Present(field),
                    form => Op::Read {
                        at: name,
                        form,
                        field,
                        implicit,
                    },
                });
                continue;
            }
            match fixed_size(form, self.enc) {
                Some(n) => run += n as u32,
                None => {
                    if run > 0 {
                        self.ops.push(Op::Skip(run));
                        run = 0;
                    }
                    self.ops.push(Op::SkipForm(form));
                }
            }
        }
        if run > 0 {
            self.ops.push(Op::Skip(run));
        }
        self.ops.push(Op::End);
        start
    }
}

/// Fields whose data1/data2 values are plain numbers (everything read but
/// names, references, flags and the raw-value fields).
#[inline]
pub(super) fn wants_number(f: Field) -> bool {
    !matches!(
        f,
        Field::ConstValue
            | Field::Location
            | Field::Name
            | Field::Type
            | Field::Origin
            | Field::Spec
            | Field::Import
            | Field::LowPc
            | Field::Producer
            | Field::GnuAnnotation
    )
}

/// gimli's rule for DWARF 2/3, where data4/data8 may hold a section offset.
pub(super) fn section_offset_allowed(at: DwAt, version: u16) -> bool {
    match at {
        dw::DW_AT_location
        | dw::DW_AT_stmt_list
        | dw::DW_AT_string_length
        | dw::DW_AT_return_addr
        | dw::DW_AT_start_scope
        | dw::DW_AT_frame_base
        | dw::DW_AT_macro_info
        | dw::DW_AT_macros
        | dw::DW_AT_segment
        | dw::DW_AT_static_link
        | dw::DW_AT_use_location
        | dw::DW_AT_vtable_elem_location
        | dw::DW_AT_ranges => true,
        dw::DW_AT_data_member_location => version == 2 || version == 3,
        _ => false,
    }
}

/// The encoded size of a fixed-size form.
pub(super) fn fixed_size(form: DwForm, enc: gimli::Encoding) -> Option<u8> {
    Some(match form {
        dw::DW_FORM_addr => enc.address_size,
        dw::DW_FORM_implicit_const | dw::DW_FORM_flag_present => 0,
        dw::DW_FORM_data1 | dw::DW_FORM_flag | dw::DW_FORM_strx1 | dw::DW_FORM_ref1 | dw::DW_FORM_addrx1 => 1,
        dw::DW_FORM_data2 | dw::DW_FORM_ref2 | dw::DW_FORM_addrx2 | dw::DW_FORM_strx2 => 2,
        dw::DW_FORM_addrx3 | dw::DW_FORM_strx3 => 3,
        dw::DW_FORM_data4 | dw::DW_FORM_ref_sup4 | dw::DW_FORM_ref4 | dw::DW_FORM_strx4 | dw::DW_FORM_addrx4 => 4,
        dw::DW_FORM_data8 | dw::DW_FORM_ref8 | dw::DW_FORM_ref_sig8 | dw::DW_FORM_ref_sup8 => 8,
        dw::DW_FORM_data16 => 16,
        dw::DW_FORM_sec_offset
        | dw::DW_FORM_GNU_ref_alt
        | dw::DW_FORM_strp
        | dw::DW_FORM_strp_sup
        | dw::DW_FORM_GNU_strp_alt
        | dw::DW_FORM_line_strp => enc.format.word_size(),
        dw::DW_FORM_ref_addr => {
            if enc.version == 2 {
                enc.address_size
            } else {
                enc.format.word_size()
            }
        }
        _ => return None,
    })
}
