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
    DebugStrOffset, DebugStrOffsetsIndex, DebugTypeSignature, DwAt, DwForm, EndianSlice, Endianity, Expression, Format,
    ReaderOffsetId, RunTimeEndian, UnitOffset, constants as dw,
};

mod plan;

pub(super) use plan::{Abbrev, Field, Spec, root_sets_bases, table_declares};
use plan::{Op, fixed_size, section_offset_allowed};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

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
    /// (most of a vmlinux encode's allocator calls).
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
            // each): grown from empty, these made a good part of the
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

#[cfg(test)]
mod tests;
