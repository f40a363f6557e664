//! The DIE cursor of the decoder: one unit's entries read straight from its
//! bytes, each abbreviation compiled once into a plan of what to read.
//!
//! Why not gimli's `EntriesRaw`: decoding is a third of an encode, and its
//! generic attribute path asked per attribute whether anyone reads it, then
//! dispatched on the form and built an `AttributeValue` even for the
//! decl_file/line/column triple every DIE carries. A plan turns each run of
//! unread fixed-size attributes into one cursor step and names, per read
//! attribute, the field it fills, so a DIE costs a handful of loads.
//!
//! Values are the raw values gimli would produce (`Attribute::raw_value`),
//! form by form, so everything downstream of `Attrs` is unchanged.

use gimli::{
    AttributeValue, DebugAddrIndex, DebugInfoOffset, DebugLineStrOffset, DebugLocListsIndex, DebugRngListsIndex,
    DebugStrOffset, DebugStrOffsetsIndex, DebugTypeSignature, DwAt, DwForm, DwTag, EndianSlice, Endianity, Expression,
    Format, ReaderOffsetId, RunTimeEndian, UnitOffset, constants as dw,
};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// Which `Attrs` field a read attribute fills.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Field {
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
            _ => return None,
        })
    }
}

/// One step of a plan.
#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
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
    /// 20 (2.3 % of a module's encode went into moving the larger one).
    /// Smaller still, with the skip plan's start kept among the ops, was
    /// slower again.
    End,
}

/// A compiled abbreviation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Abbrev {
    pub tag: DwTag,
    pub has_children: bool,
    /// `ops[read..]` up to `Op::End`: read the wanted attributes.
    read: u32,
    /// `ops[skip..]` up to `Op::End`: skip every attribute.
    skip: u32,
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
    pub(super) fn is_null(&self) -> bool {
        self.tag.0 == 0
    }
}

/// One read attribute, as [`Dies::read`] hands it to the decoder.
pub(super) enum Value<'a> {
    /// A `.debug_str` offset (DW_FORM_strp), the common name form.
    Strp(u64),
    /// A unit reference (DW_FORM_ref1/2/4/8/udata).
    UnitRef(u64),
    /// A constant (data1/2/4/8, udata, flag as 0/1) where the field wants a number.
    Const(u64),
    /// Anything else, as gimli's raw value.
    Other(AttributeValue<R<'a>>),
}

/// Where [`Dies::read_into`] puts the attributes it reads. The common
/// forms get a method each, so the receiver's match on the field is inlined
/// into the plan's loop instead of going through one generic call per value.
pub(super) trait Sink<'a> {
    /// Any read attribute.
    fn value(&mut self, field: Field, v: Value<'a>);
    /// A name in DW_FORM_strp.
    #[inline]
    fn name_strp(&mut self, off: u64) {
        self.value(Field::Name, Value::Strp(off))
    }
    /// A unit reference (DW_FORM_ref4).
    #[inline]
    fn unit_ref(&mut self, field: Field, off: u64) {
        self.value(field, Value::UnitRef(off))
    }
    /// A constant (DW_FORM_data1/2) for a field that wants a number.
    #[inline]
    fn number(&mut self, field: Field, x: u64) {
        self.value(field, Value::Const(x))
    }
}

/// One attribute specification of an abbreviation: name, form, and the
/// value of a `DW_FORM_implicit_const` (else 0).
type Spec = (DwAt, DwForm, i64);

/// Reads the abbreviation at `r` (code, tag, whether it has children), its
/// attribute specifications into `specs`, with the checks gimli's parser
/// makes; `None` at the table's end (a zero code, or the section's end,
/// which gimli also takes for one).
fn read_abbrev(r: &mut R<'_>, specs: &mut Vec<Spec>) -> Res<Option<(u64, DwTag, bool)>> {
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

/// Whether the abbreviation table at `at` in `debug_abbrev` declares an
/// attribute in `form` (whether or not a DIE uses it); a table that cannot
/// be read counts as not declaring it.
pub(super) fn table_declares_form(debug_abbrev: R<'_>, at: usize, form: DwForm) -> bool {
    let mut r = debug_abbrev;
    if gimli::Reader::skip(&mut r, at).is_err() {
        return false;
    }
    let mut specs = Vec::new();
    while let Ok(Some(_)) = read_abbrev(&mut r, &mut specs) {
        if specs.iter().any(|s| s.1 == form) {
            return true;
        }
    }
    false
}

/// Whether the abbreviation of `header`'s root DIE has an attribute that
/// sets one of the bases gimli's `Unit` keeps (string offsets, addresses,
/// location and range lists, the DWO id). Reads the table only up to that
/// abbreviation and compiles nothing.
pub(super) fn root_sets_bases(header: &gimli::UnitHeader<R<'_>>, debug_abbrev: R<'_>) -> Res<bool> {
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

/// Why [`Dies::read_into`] stopped.
pub(super) enum ReadError {
    /// A read attribute in DW_FORM_ref_addr (a reference across units).
    RefAddr(DwAt),
    /// Malformed input, while reading the named attribute if known.
    Bad(Option<DwAt>, gimli::Error),
}

impl<'a> Value<'a> {
    /// As gimli's raw value (a constant becomes `Udata`, which every
    /// consumer of a numeric field reads as it reads data1/data2).
    pub(super) fn raw(self) -> AttributeValue<R<'a>> {
        match self {
            Value::Strp(o) => AttributeValue::DebugStrRef(DebugStrOffset(o as usize)),
            Value::UnitRef(o) => AttributeValue::UnitRef(UnitOffset(o as usize)),
            Value::Const(x) => AttributeValue::Udata(x),
            Value::Other(v) => v,
        }
    }
}

pub(super) struct Dies<'a> {
    data: &'a [u8],
    pos: usize,
    /// Unit offset of `data[0]`.
    base: u64,
    depth: isize,
    endian: RunTimeEndian,
    enc: gimli::Encoding,
    /// The unit's abbreviation table, from its offset in `.debug_abbrev`
    /// on, read only as far as the codes met so far need: gimli parsed
    /// every table whole into per-abbreviation lists, and an attribute list
    /// past five entries went to the heap and grew one push at a time
    /// (400 k of a vmlinux encode's 700 k allocator calls).
    abbrev: R<'a>,
    /// Whether `abbrev` has reached the table's end.
    abbrev_done: bool,
    /// The attribute specifications of the abbreviation being compiled.
    specs: Vec<Spec>,
    /// Abbreviation code → index in `compiled` + 1 (0: not compiled yet).
    by_code: Vec<u32>,
    /// The same for codes of `DIRECT_CODES` and more.
    sparse: hashbrown::HashMap<u64, u32>,
    compiled: Vec<Abbrev>,
    ops: Vec<Op>,
    /// Whether DW_FORM_ref_addr references are read (the merged-unit mode)
    /// rather than reported as [`ReadError::RefAddr`].
    cross_unit: bool,
}

type Res<T> = Result<T, gimli::Error>;

/// Codes below this get a direct slot; larger ones (no producer we know of
/// uses them) a hash map entry.
const DIRECT_CODES: u64 = 1 << 16;

impl<'a> Dies<'a> {
    /// The entries of `header`'s unit from its root DIE, their
    /// abbreviations read from `debug_abbrev` (the whole section).
    pub(super) fn new(header: &gimli::UnitHeader<R<'a>>, debug_abbrev: R<'a>) -> Res<Dies<'a>> {
        let root = header.root_offset();
        let data = header.range_from(root..)?;
        let mut abbrev = debug_abbrev;
        gimli::Reader::skip(&mut abbrev, header.debug_abbrev_offset().0)?;
        Ok(Dies {
            data: data.slice(),
            pos: 0,
            base: root.0 as u64,
            depth: 0,
            endian: gimli::Reader::endian(&data),
            enc: header.encoding(),
            abbrev,
            abbrev_done: false,
            // room for a kernel CU's table (about 150 abbreviations, 8 ops
            // each): grown from empty, these made about 100 k of the 345 k
            // allocator calls left in a vmlinux encode
            specs: Vec::with_capacity(32),
            by_code: Vec::with_capacity(256),
            sparse: hashbrown::HashMap::new(),
            compiled: Vec::with_capacity(256),
            ops: Vec::with_capacity(2048),
            cross_unit: false,
        })
    }

    /// Reads DW_FORM_ref_addr attributes as `.debug_info` references
    /// (gimli's `DebugInfoRef`) instead of refusing them: the merged-unit
    /// mode, where every unit of the file is one. Call before the first DIE.
    pub(super) fn read_cross_unit_refs(&mut self) {
        self.cross_unit = true;
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Unit offset of the next DIE.
    #[inline]
    pub(super) fn next_offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Depth of the next DIE (the root is 0).
    #[inline]
    pub(super) fn next_depth(&self) -> isize {
        self.depth
    }

    /// Reads an abbreviation code: `None` for a null entry.
    #[inline]
    #[cfg(test)]
    pub(super) fn abbrev(&mut self) -> Res<Option<Abbrev>> {
        let a = self.entry()?;
        Ok(if a.is_null() { None } else { Some(a) })
    }

    /// Reads an abbreviation code: [`Abbrev::NULL`] for a null entry.
    /// (Not an `Option`: the decoder's loop is shorter without the wrapping.)
    #[inline]
    pub(super) fn entry(&mut self) -> Res<Abbrev> {
        let code = self.uleb()?;
        if code == 0 {
            self.depth -= 1;
            return Ok(Abbrev::NULL);
        }
        let a = match self.by_code.get(code as usize) {
            Some(&i) if i != 0 => self.compiled[i as usize - 1],
            _ => match self.sparse.get(&code) {
                Some(&i) => self.compiled[i as usize - 1],
                None => self.compile(code)?,
            },
        };
        if a.has_children {
            self.depth += 1;
        }
        Ok(a)
    }

    /// Compiles the abbreviations of the table up to the one of `code`
    /// (codes are met roughly in table order, so most units read their
    /// table once, and only as far as their DIEs use it).
    #[cold]
    fn compile(&mut self, code: u64) -> Res<Abbrev> {
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
        let read = self.plan(&specs, true);
        let skip = self.plan(&specs, false);
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

    fn plan(&mut self, specs: &[Spec], reading: bool) -> u32 {
        let start = self.ops.len() as u32;
        let mut run = 0u32;
        for &(name, form, implicit) in specs {
            let field = if reading { Field::of(name) } else { None };
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

    /// Skips all attributes of a DIE.
    #[inline(always)]
    pub(super) fn skip(&mut self, a: Abbrev) -> Res<()> {
        let mut i = a.skip as usize;
        loop {
            match self.ops[i] {
                Op::Skip(n) => self.advance(n as usize)?,
                Op::SkipForm(f) => self.skip_form(f)?,
                Op::End => return Ok(()),
                _ => unreachable!("skip plans hold skips only"),
            }
            i += 1;
        }
    }

    /// Reads the attributes of a DIE that some field wants, handing each to `f`.
    #[cfg(test)]
    pub(super) fn read(&mut self, a: Abbrev, f: impl FnMut(Field, Value<'a>)) -> Result<(), ReadError> {
        struct Each<F>(F);
        impl<'a, F: FnMut(Field, Value<'a>)> Sink<'a> for Each<F> {
            fn value(&mut self, field: Field, v: Value<'a>) {
                (self.0)(field, v)
            }
        }
        self.read_into(a, &mut Each(f))
    }

    /// Reads the attributes of a DIE that some field wants into `sink`.
    #[inline]
    pub(super) fn read_into(&mut self, a: Abbrev, sink: &mut impl Sink<'a>) -> Result<(), ReadError> {
        let mut i = a.read as usize;
        loop {
            match self.ops[i] {
                Op::End => return Ok(()),
                Op::Skip(n) => self.advance(n as usize).map_err(|e| ReadError::Bad(None, e))?,
                Op::NameStrp4(at) => sink.name_strp(self.u32().map_err(|e| ReadError::Bad(Some(at), e))? as u64),
                Op::Ref4(at, field) => {
                    sink.unit_ref(field, self.u32().map_err(|e| ReadError::Bad(Some(at), e))? as u64)
                }
                Op::Num1(at, field) => sink.number(field, self.u8().map_err(|e| ReadError::Bad(Some(at), e))? as u64),
                Op::Num2(at, field) => sink.number(field, self.u16().map_err(|e| ReadError::Bad(Some(at), e))? as u64),
                Op::Present(field) => sink.value(field, Value::Other(AttributeValue::Flag(true))),
                Op::SkipForm(form) => self.skip_form(form).map_err(|e| ReadError::Bad(None, e))?,
                Op::RefAddr(at) => return Err(ReadError::RefAddr(at)),
                Op::Read {
                    at,
                    form,
                    field,
                    implicit,
                } => {
                    let v = self
                        .value(at, form, field, implicit)
                        .map_err(|e| ReadError::Bad(Some(at), e))?;
                    sink.value(field, v);
                }
            }
            i += 1;
        }
    }

    #[inline]
    fn value(&mut self, at: DwAt, form: DwForm, field: Field, implicit: i64) -> Res<Value<'a>> {
        if form == dw::DW_FORM_strp && field == Field::Name {
            return Ok(Value::Strp(self.offset(self.enc.format)?));
        }
        self.raw_value(at, form, implicit).map(Value::Other)
    }

    /// gimli's raw value of an attribute in `form`.
    fn raw_value(&mut self, at: DwAt, mut form: DwForm, implicit: i64) -> Res<AttributeValue<R<'a>>> {
        let enc = self.enc;
        loop {
            return Ok(match form {
                dw::DW_FORM_indirect => {
                    form = DwForm(u16::try_from(self.uleb()?).map_err(|_| gimli::Error::BadUnsignedLeb128)?);
                    continue;
                }
                dw::DW_FORM_addr => AttributeValue::Addr(self.sized(enc.address_size)?),
                dw::DW_FORM_block1 => {
                    let n = self.u8()? as usize;
                    AttributeValue::Block(self.split(n)?)
                }
                dw::DW_FORM_block2 => {
                    let n = self.u16()? as usize;
                    AttributeValue::Block(self.split(n)?)
                }
                dw::DW_FORM_block4 => {
                    let n = self.u32()? as usize;
                    AttributeValue::Block(self.split(n)?)
                }
                dw::DW_FORM_block => {
                    let n = self.uleb_usize()?;
                    AttributeValue::Block(self.split(n)?)
                }
                dw::DW_FORM_data1 => AttributeValue::Data1(self.u8()?),
                dw::DW_FORM_data2 => AttributeValue::Data2(self.u16()?),
                dw::DW_FORM_data4 => {
                    if enc.format == Format::Dwarf32 && section_offset_allowed(at, enc.version) {
                        AttributeValue::SecOffset(self.u32()? as usize)
                    } else {
                        AttributeValue::Data4(self.u32()?)
                    }
                }
                dw::DW_FORM_data8 => {
                    if enc.format == Format::Dwarf64 && section_offset_allowed(at, enc.version) {
                        AttributeValue::SecOffset(self.offset(Format::Dwarf64)? as usize)
                    } else {
                        AttributeValue::Data8(self.u64()?)
                    }
                }
                dw::DW_FORM_data16 => {
                    let b = self.split(16)?.slice();
                    let v = self.endian.read_u128(b);
                    AttributeValue::Data16(v)
                }
                dw::DW_FORM_udata => AttributeValue::Udata(self.uleb()?),
                dw::DW_FORM_sdata => AttributeValue::Sdata(self.sleb()?),
                dw::DW_FORM_exprloc => {
                    let n = self.uleb_usize()?;
                    AttributeValue::Exprloc(Expression(self.split(n)?))
                }
                dw::DW_FORM_flag => AttributeValue::Flag(self.u8()? != 0),
                dw::DW_FORM_flag_present => AttributeValue::Flag(true),
                dw::DW_FORM_sec_offset => AttributeValue::SecOffset(self.offset(enc.format)? as usize),
                dw::DW_FORM_ref1 => AttributeValue::UnitRef(UnitOffset(self.u8()? as usize)),
                dw::DW_FORM_ref2 => AttributeValue::UnitRef(UnitOffset(self.u16()? as usize)),
                dw::DW_FORM_ref4 => AttributeValue::UnitRef(UnitOffset(self.u32()? as usize)),
                dw::DW_FORM_ref8 => AttributeValue::UnitRef(UnitOffset(to_usize(self.u64()?)?)),
                dw::DW_FORM_ref_udata => AttributeValue::UnitRef(UnitOffset(self.uleb_usize()?)),
                dw::DW_FORM_ref_addr => {
                    let o = if enc.version == 2 {
                        self.sized(enc.address_size)?
                    } else {
                        self.offset(enc.format)?
                    };
                    AttributeValue::DebugInfoRef(DebugInfoOffset(to_usize(o)?))
                }
                dw::DW_FORM_ref_sig8 => AttributeValue::DebugTypesRef(DebugTypeSignature(self.u64()?)),
                dw::DW_FORM_ref_sup4 => AttributeValue::DebugInfoRefSup(DebugInfoOffset(self.u32()? as usize)),
                dw::DW_FORM_ref_sup8 => AttributeValue::DebugInfoRefSup(DebugInfoOffset(to_usize(self.u64()?)?)),
                dw::DW_FORM_GNU_ref_alt => {
                    AttributeValue::DebugInfoRefSup(DebugInfoOffset(to_usize(self.offset(enc.format)?)?))
                }
                dw::DW_FORM_string => {
                    let rest = &self.data[self.pos..];
                    let n = memchr::memchr(0, rest).ok_or_else(|| self.eof())?;
                    let s = EndianSlice::new(&rest[..n], self.endian);
                    self.pos += n + 1;
                    AttributeValue::String(s)
                }
                dw::DW_FORM_strp => AttributeValue::DebugStrRef(DebugStrOffset(to_usize(self.offset(enc.format)?)?)),
                dw::DW_FORM_strp_sup | dw::DW_FORM_GNU_strp_alt => {
                    AttributeValue::DebugStrRefSup(DebugStrOffset(to_usize(self.offset(enc.format)?)?))
                }
                dw::DW_FORM_line_strp => {
                    AttributeValue::DebugLineStrRef(DebugLineStrOffset(to_usize(self.offset(enc.format)?)?))
                }
                dw::DW_FORM_implicit_const => AttributeValue::Sdata(implicit),
                dw::DW_FORM_strx | dw::DW_FORM_GNU_str_index => {
                    AttributeValue::DebugStrOffsetsIndex(DebugStrOffsetsIndex(self.uleb_usize()?))
                }
                dw::DW_FORM_strx1 => AttributeValue::DebugStrOffsetsIndex(DebugStrOffsetsIndex(self.u8()? as usize)),
                dw::DW_FORM_strx2 => AttributeValue::DebugStrOffsetsIndex(DebugStrOffsetsIndex(self.u16()? as usize)),
                dw::DW_FORM_strx3 => {
                    AttributeValue::DebugStrOffsetsIndex(DebugStrOffsetsIndex(self.sized(3)? as usize))
                }
                dw::DW_FORM_strx4 => AttributeValue::DebugStrOffsetsIndex(DebugStrOffsetsIndex(self.u32()? as usize)),
                dw::DW_FORM_addrx | dw::DW_FORM_GNU_addr_index => {
                    AttributeValue::DebugAddrIndex(DebugAddrIndex(self.uleb_usize()?))
                }
                dw::DW_FORM_addrx1 => AttributeValue::DebugAddrIndex(DebugAddrIndex(self.u8()? as usize)),
                dw::DW_FORM_addrx2 => AttributeValue::DebugAddrIndex(DebugAddrIndex(self.u16()? as usize)),
                dw::DW_FORM_addrx3 => AttributeValue::DebugAddrIndex(DebugAddrIndex(self.sized(3)? as usize)),
                dw::DW_FORM_addrx4 => AttributeValue::DebugAddrIndex(DebugAddrIndex(self.u32()? as usize)),
                dw::DW_FORM_loclistx => AttributeValue::DebugLocListsIndex(DebugLocListsIndex(self.uleb_usize()?)),
                dw::DW_FORM_rnglistx => AttributeValue::DebugRngListsIndex(DebugRngListsIndex(self.uleb_usize()?)),
                _ => return Err(gimli::Error::UnknownForm(form)),
            });
        }
    }

    fn skip_form(&mut self, mut form: DwForm) -> Res<()> {
        loop {
            if let Some(n) = fixed_size(form, self.enc) {
                return self.advance(n as usize);
            }
            let n = match form {
                dw::DW_FORM_indirect => {
                    form = DwForm(u16::try_from(self.uleb()?).map_err(|_| gimli::Error::BadUnsignedLeb128)?);
                    continue;
                }
                dw::DW_FORM_block1 => self.u8()? as usize,
                dw::DW_FORM_block2 => self.u16()? as usize,
                dw::DW_FORM_block4 => self.u32()? as usize,
                dw::DW_FORM_block | dw::DW_FORM_exprloc => self.uleb_usize()?,
                dw::DW_FORM_string => {
                    let rest = &self.data[self.pos..];
                    memchr::memchr(0, rest).ok_or_else(|| self.eof())? + 1
                }
                dw::DW_FORM_udata
                | dw::DW_FORM_sdata
                | dw::DW_FORM_ref_udata
                | dw::DW_FORM_strx
                | dw::DW_FORM_GNU_str_index
                | dw::DW_FORM_addrx
                | dw::DW_FORM_GNU_addr_index
                | dw::DW_FORM_loclistx
                | dw::DW_FORM_rnglistx => {
                    let rest = &self.data[self.pos..];
                    rest.iter().position(|&b| b & 0x80 == 0).ok_or_else(|| self.eof())? + 1
                }
                _ => return Err(gimli::Error::UnknownForm(form)),
            };
            return self.advance(n);
        }
    }

    #[cold]
    fn eof(&self) -> gimli::Error {
        gimli::Error::UnexpectedEof(ReaderOffsetId(self.next_offset()))
    }

    #[inline]
    fn advance(&mut self, n: usize) -> Res<()> {
        if self.data.len() - self.pos < n {
            return Err(self.eof());
        }
        self.pos += n;
        Ok(())
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Res<[u8; N]> {
        match self.data.get(self.pos..self.pos + N) {
            Some(b) => {
                self.pos += N;
                Ok(b.try_into().unwrap())
            }
            None => Err(self.eof()),
        }
    }

    #[inline]
    fn u8(&mut self) -> Res<u8> {
        Ok(self.take::<1>()?[0])
    }

    #[inline]
    fn u16(&mut self) -> Res<u16> {
        let b = self.take::<2>()?;
        Ok(self.endian.read_u16(&b))
    }

    #[inline]
    fn u32(&mut self) -> Res<u32> {
        let b = self.take::<4>()?;
        Ok(self.endian.read_u32(&b))
    }

    #[inline]
    fn u64(&mut self) -> Res<u64> {
        let b = self.take::<8>()?;
        Ok(self.endian.read_u64(&b))
    }

    /// An unsigned value of `n` bytes (an address, strx3/addrx3).
    fn sized(&mut self, n: u8) -> Res<u64> {
        match n {
            1 => self.u8().map(u64::from),
            2 => self.u16().map(u64::from),
            4 => self.u32().map(u64::from),
            8 => self.u64(),
            3 => {
                let b = self.take::<3>()?;
                let mut w = [0u8; 8];
                if self.endian.is_big_endian() {
                    w[5..].copy_from_slice(&b);
                    Ok(u64::from_be_bytes(w))
                } else {
                    w[..3].copy_from_slice(&b);
                    Ok(u64::from_le_bytes(w))
                }
            }
            n => Err(gimli::Error::UnsupportedAddressSize(n)),
        }
    }

    #[inline]
    fn offset(&mut self, format: Format) -> Res<u64> {
        match format {
            Format::Dwarf32 => self.u32().map(u64::from),
            Format::Dwarf64 => self.u64(),
        }
    }

    fn split(&mut self, n: usize) -> Res<R<'a>> {
        let s = self
            .data
            .get(self.pos..self.pos.checked_add(n).ok_or_else(|| self.eof())?)
            .ok_or_else(|| self.eof())?;
        self.pos += n;
        Ok(EndianSlice::new(s, self.endian))
    }

    #[inline(always)]
    fn uleb(&mut self) -> Res<u64> {
        let Some(&b) = self.data.get(self.pos) else {
            return Err(self.eof());
        };
        self.pos += 1;
        if b < 0x80 {
            return Ok(b as u64);
        }
        let mut v = (b & 0x7f) as u64;
        let mut shift = 7;
        loop {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(self.eof());
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(gimli::Error::BadUnsignedLeb128);
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(gimli::Error::BadUnsignedLeb128);
            }
        }
    }

    fn uleb_usize(&mut self) -> Res<usize> {
        to_usize(self.uleb()?)
    }

    fn sleb(&mut self) -> Res<i64> {
        let mut v = 0i64;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(self.eof());
            };
            self.pos += 1;
            if shift == 63 && b != 0 && b != 0x7f {
                return Err(gimli::Error::BadSignedLeb128);
            }
            v |= ((b & 0x7f) as i64) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    v |= !0 << shift;
                }
                return Ok(v);
            }
            if shift > 63 {
                return Err(gimli::Error::BadSignedLeb128);
            }
        }
    }
}

fn to_usize(v: u64) -> Res<usize> {
    usize::try_from(v).map_err(|_| gimli::Error::UnsupportedOffset)
}

/// Fields whose data1/data2 values are plain numbers (everything read but
/// names, references, flags and the raw-value fields).
#[inline]
fn wants_number(f: Field) -> bool {
    !matches!(
        f,
        Field::ConstValue | Field::Location | Field::Name | Field::Type | Field::Origin | Field::Spec
    )
}

/// gimli's rule for DWARF 2/3, where data4/data8 may hold a section offset.
fn section_offset_allowed(at: DwAt, version: u16) -> bool {
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
fn fixed_size(form: DwForm, enc: gimli::Encoding) -> Option<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use gimli::write::{self, AttributeValue as W, EndianVec, LineProgram, Sections};

    /// Every read attribute of every DIE, as `Dies` gives it and as gimli's
    /// own parser gives it, for a unit with one DIE per value form.
    #[test]
    fn values_match_gimli_form_by_form() {
        for format in [Format::Dwarf32, Format::Dwarf64] {
            for version in [2u16, 3, 4, 5] {
                let encoding = gimli::Encoding {
                    format,
                    version,
                    address_size: 8,
                };
                let mut dw = write::Dwarf::new();
                let id = dw.units.add(write::Unit::new(encoding, LineProgram::none()));
                let unit = dw.units.get_mut(id);
                let root = unit.root();
                let first = unit.add(root, gimli::DW_TAG_base_type);
                let strp = dw.strings.add("strp name");
                let unit = dw.units.get_mut(id);
                let values = [
                    W::Data1(7),
                    W::Data2(0x1234),
                    W::Data4(0x1234_5678),
                    W::Data8(0x1234_5678_9abc_def0),
                    W::Sdata(-5),
                    W::Udata(300),
                    W::Block(vec![1, 2, 3]),
                    W::Flag(true),
                    W::FlagPresent,
                    W::UnitRef(first),
                    W::String(b"inline".to_vec()),
                    W::StringRef(strp),
                    W::Exprloc(write::Expression::raw(vec![0x23, 0x10])),
                ];
                for v in values {
                    let die = unit.add(root, gimli::DW_TAG_variable);
                    let e = unit.get_mut(die);
                    e.set(gimli::DW_AT_decl_line, W::Udata(9));
                    e.set(gimli::DW_AT_const_value, v.clone());
                    e.set(gimli::DW_AT_location, v.clone());
                    e.set(gimli::DW_AT_name, W::String(b"n".to_vec()));
                    e.set(gimli::DW_AT_byte_size, W::Data1(4));
                    e.set(gimli::DW_AT_decl_file, W::Data2(3));
                    e.set(gimli::DW_AT_type, W::UnitRef(first));
                }
                let mut sections = Sections::new(EndianVec::new(gimli::LittleEndian));
                dw.write(&mut sections).unwrap();
                fn r(v: &EndianVec<gimli::LittleEndian>) -> R<'_> {
                    EndianSlice::new(v.slice(), RunTimeEndian::Little)
                }
                let d = gimli::Dwarf {
                    debug_info: gimli::DebugInfo::from(r(&sections.debug_info)),
                    debug_abbrev: gimli::DebugAbbrev::from(r(&sections.debug_abbrev)),
                    ..Default::default()
                };
                let header = d.units().next().unwrap().unwrap();
                let unit = d.unit(header).unwrap();

                let mut ours = Vec::new();
                let mut dies = Dies::new(&unit.header, *gimli::Section::reader(&d.debug_abbrev)).unwrap();
                while !dies.is_empty() {
                    let off = dies.next_offset();
                    let Some(a) = dies.abbrev().unwrap() else {
                        continue;
                    };
                    if dies.read(a, |f, v| ours.push((off, f, v.raw()))).is_err() {
                        panic!("read failed at {off:#x}");
                    }
                }
                let mut theirs = Vec::new();
                let mut raw = unit.entries_raw(None).unwrap();
                while !raw.is_empty() {
                    let off = raw.next_offset().0 as u64;
                    let Some(a) = raw.read_abbreviation().unwrap() else {
                        continue;
                    };
                    for spec in a.attributes() {
                        let at = raw.read_attribute(*spec).unwrap();
                        if let Some(f) = Field::of(at.name()) {
                            let v = match (f, at.raw_value()) {
                                // a constant read as a plain number
                                (Field::ByteSize, AttributeValue::Data1(x)) => AttributeValue::Udata(x as u64),
                                (_, v) => v,
                            };
                            theirs.push((off, f, v));
                        }
                    }
                }
                assert_eq!(ours.len(), theirs.len(), "{format:?} v{version}");
                for (a, b) in ours.iter().zip(&theirs) {
                    assert_eq!(a, b, "{format:?} v{version}");
                }
            }
        }
    }

    #[test]
    fn sparse_abbreviation_codes_are_compiled_once() {
        // code 1: compile_unit with children; code 70000: base_type, name as
        // an inline string, byte_size as data1
        let abbrev: &[u8] = &[
            1, 0x11, 1, 0, 0, //
            0xf0, 0xa2, 0x04, 0x24, 0, 0x03, 0x08, 0x0b, 0x0b, 0, 0, //
            0,
        ];
        let dies: &[u8] = &[
            1, 0xf0, 0xa2, 0x04, b'i', b'n', b't', 0, 4, 0xf0, 0xa2, 0x04, b'l', 0, 8, 0,
        ];
        let mut info = Vec::new();
        info.extend_from_slice(&((7 + dies.len()) as u32).to_le_bytes());
        info.extend_from_slice(&4u16.to_le_bytes());
        info.extend_from_slice(&0u32.to_le_bytes());
        info.push(8);
        info.extend_from_slice(dies);
        let d = gimli::Dwarf {
            debug_info: gimli::DebugInfo::from(EndianSlice::new(&info, RunTimeEndian::Little)),
            debug_abbrev: gimli::DebugAbbrev::from(EndianSlice::new(abbrev, RunTimeEndian::Little)),
            ..Default::default()
        };
        let header = d.units().next().unwrap().unwrap();
        let unit = d.unit(header).unwrap();
        let mut c = Dies::new(&unit.header, *gimli::Section::reader(&d.debug_abbrev)).unwrap();
        let mut got = Vec::new();
        while !c.is_empty() {
            let Some(a) = c.abbrev().unwrap() else {
                continue;
            };
            let mut name = Vec::new();
            let mut size = None;
            if c.read(a, |f, v| match (f, v) {
                (Field::Name, Value::Other(AttributeValue::String(s))) => name = s.slice().to_vec(),
                (Field::ByteSize, Value::Const(x)) => size = Some(x),
                _ => {}
            })
            .is_err()
            {
                panic!("read failed");
            }
            got.push((a.tag, name, size));
        }
        assert_eq!(
            got,
            [
                (gimli::DW_TAG_compile_unit, vec![], None),
                (gimli::DW_TAG_base_type, b"int".to_vec(), Some(4)),
                (gimli::DW_TAG_base_type, b"l".to_vec(), Some(8)),
            ]
        );
        assert_eq!(c.compiled.len(), 2);
        assert_eq!(c.depth, 0);
    }

    /// A cursor over `data` whose abbreviations are `table`.
    fn cursor<'a>(data: &'a [u8], table: &'a [u8]) -> Dies<'a> {
        Dies {
            data,
            pos: 0,
            base: 11,
            depth: 0,
            endian: RunTimeEndian::Little,
            enc: gimli::Encoding {
                format: Format::Dwarf32,
                version: 4,
                address_size: 8,
            },
            abbrev: EndianSlice::new(table, RunTimeEndian::Little),
            abbrev_done: false,
            specs: Vec::new(),
            by_code: Vec::new(),
            sparse: hashbrown::HashMap::new(),
            compiled: Vec::new(),
            ops: Vec::new(),
            cross_unit: false,
        }
    }

    #[test]
    fn abbreviations_are_read_as_far_as_the_dies_need() {
        // 1: base_type, name (string); 2: base_type, byte_size (data1);
        // then an entry with tag 0, which only a DIE using code 3 reaches
        let table = [
            1, 0x24, 0, 0x03, 0x08, 0, 0, 2, 0x24, 1, 0x0b, 0x0b, 0, 0, 3, 0, 0, 0, 0,
        ];
        // a DIE of code 2 (byte_size 4), then one of code 1 ("a")
        let dies = [2, 4, 1, b'a', 0];
        let mut c = cursor(&dies, &table);
        let a = c.abbrev().unwrap().unwrap();
        assert!(a.has_children && a.tag == gimli::DW_TAG_base_type);
        let mut got = Vec::new();
        c.read(a, |f, v| got.push((f, v.raw()))).ok().unwrap();
        let a = c.abbrev().unwrap().unwrap();
        assert!(!a.has_children);
        c.read(a, |f, v| got.push((f, v.raw()))).ok().unwrap();
        assert_eq!(
            got,
            [
                (Field::ByteSize, AttributeValue::Udata(4)),
                (
                    Field::Name,
                    AttributeValue::String(EndianSlice::new(b"a", RunTimeEndian::Little))
                )
            ]
        );
        // both compiled by the first look-up; the bad entry never read
        assert_eq!((c.compiled.len(), c.abbrev_done), (2, false));
        let mut c = cursor(&[3], &table);
        assert!(matches!(c.abbrev(), Err(gimli::Error::AbbreviationTagZero)));
        // a code past the table's end, and a code defined twice on the way
        let mut c = cursor(&[9], &table[..14]);
        assert!(matches!(c.abbrev(), Err(gimli::Error::InvalidAbbreviationCode(9))));
        assert!(c.abbrev_done);
        let twice = [1, 0x24, 0, 0, 0, 1, 0x24, 0, 0, 0, 2, 0x24, 0, 0, 0];
        let mut c = cursor(&[2], &twice);
        assert!(matches!(c.abbrev(), Err(gimli::Error::DuplicateAbbreviationCode(1))));
        let mut c = cursor(&[1], &[1, 0x24, 2, 0, 0]);
        assert!(matches!(c.abbrev(), Err(gimli::Error::InvalidAbbreviationChildren(_))));
        let mut c = cursor(&[1], &[1, 0x24, 0, 0x03, 0, 0, 0]);
        assert!(matches!(c.abbrev(), Err(gimli::Error::AttributeFormZero)));
    }

    #[test]
    fn truncated_input_is_an_error() {
        let mut d = cursor(&[0x80, 0x80], &[]);
        assert!(matches!(d.uleb(), Err(gimli::Error::UnexpectedEof(_))));
        d.pos = 0;
        d.data = &[0x05];
        assert!(matches!(d.abbrev(), Err(gimli::Error::InvalidAbbreviationCode(5))));
        d.pos = 0;
        d.data = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(matches!(d.uleb(), Err(gimli::Error::BadUnsignedLeb128)));
        d.pos = 0;
        assert_eq!(d.sleb().unwrap(), -1);
        d.pos = 0;
        d.data = b"abc";
        assert!(matches!(
            d.skip_form(dw::DW_FORM_string),
            Err(gimli::Error::UnexpectedEof(_))
        ));
        assert!(matches!(d.split(4), Err(gimli::Error::UnexpectedEof(_))));
    }
}
