//! The attributes of one DIE that any role needs, read through the DIE
//! cursor's plan into a compact record.

use gimli::{AttributeValue, EndianSlice, RunTimeEndian, Section, UnitOffset, constants as dw};
use nonmax::NonMaxU64;

use super::dies::{self, Dies, Field, ReadError, Value};
use super::ids::DieOffset;
use super::{DecodeError, DecodeErrorKind, Decoder, InfoSpace, R, Refs};

/// Attributes of one DIE, the ones any handler needs, in compact form (this
/// is reset for every DIE read, so it is kept small).
pub(super) struct Attrs<'a> {
    pub(super) name: &'a [u8],
    /// References, `None` where the DIE has none (see [`DieRef`]).
    pub(super) ty: Option<DieRef>,
    pub(super) origin: Option<DieRef>,
    pub(super) spec: Option<DieRef>,
    pub(super) byte_size: Option<u64>,
    pub(super) encoding: u8,
    pub(super) declaration: bool,
    pub(super) external: bool,
    pub(super) artificial: bool,
    pub(super) upper_bound: Option<Option<u64>>,
    pub(super) count: Option<Option<u64>>,
    pub(super) member_loc: Option<u64>,
    pub(super) data_bit_offset: Option<u64>,
    pub(super) bit_size: Option<u64>,
    pub(super) bit_offset: Option<i64>,
    pub(super) const_value: Option<AttributeValue<R<'a>>>,
    pub(super) location: Option<AttributeValue<R<'a>>>,
    pub(super) language: Option<u16>,
    /// References by type signature (DW_FORM_ref_sig8, DW_AT_signature)
    /// left unresolved.
    pub(super) type_unit_refs: u8,
    /// Which of `ty`, `origin`, `spec`, `signature` (bits 0-3) were resolved
    /// from a type signature (`Decoder::type_units`): the offsets to read
    /// the type units at.
    pub(super) resolved: u8,
    /// The skeleton's type (DW_AT_signature), resolved.
    pub(super) signature: Option<u64>,
    /// DW_AT_import (a DW_TAG_imported_unit's unit).
    pub(super) import: Option<DieRef>,
    /// A subprogram's DW_AT_low_pc (DW_FORM_addr, or an index into
    /// `.debug_addr`).
    pub(super) low_pc: Option<u64>,
    /// A subprogram's DW_AT_calling_convention is DW_CC_nocall.
    pub(super) nocall: bool,
    /// A subprogram's DW_AT_inline is present and not 0.
    pub(super) inline: bool,
    /// A unit's DW_AT_producer names clang.
    pub(super) producer_clang: bool,
    /// DW_AT_GNU_annotation.
    pub(super) gnu_annotation: Option<DieRef>,
}

/// A reference attribute as read: a unit offset (plus the unit's base), or
/// a form that is no unit reference (it resolves to void). `Option<DieRef>`
/// is the eight bytes of an offset: the record is reset for every DIE read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(super) struct DieRef(NonMaxU64);

impl DieRef {
    const NOT_UNIT_RAW: u64 = u64::MAX - 1;
    /// A form that is not a unit reference.
    pub(super) const NOT_UNIT: DieRef = match NonMaxU64::new(DieRef::NOT_UNIT_RAW) {
        Some(n) => DieRef(n),
        None => unreachable!(),
    };

    /// The reference to `off`; an offset that overflowed (a ref8 near 2^64)
    /// is one past every unit, so that it is refused as outside its unit,
    /// never wrapped into it.
    #[inline]
    pub(super) fn at(off: Option<u64>) -> DieRef {
        let off = off
            .filter(|&o| o < Self::NOT_UNIT_RAW)
            .unwrap_or(Self::NOT_UNIT_RAW - 1);
        DieRef(NonMaxU64::new(off).unwrap_or(Self::NOT_UNIT.0))
    }

    /// The offset, or `None` for a form that is no unit reference.
    #[inline]
    pub(super) fn offset(self) -> Option<u64> {
        Some(self.0.get()).filter(|&o| o != Self::NOT_UNIT_RAW)
    }
}

impl Default for Attrs<'_> {
    fn default() -> Self {
        Attrs {
            name: b"",
            ty: None,
            origin: None,
            spec: None,
            byte_size: None,
            encoding: 0,
            declaration: false,
            external: false,
            artificial: false,
            upper_bound: None,
            count: None,
            member_loc: None,
            data_bit_offset: None,
            bit_size: None,
            bit_offset: None,
            const_value: None,
            location: None,
            language: None,
            type_unit_refs: 0,
            resolved: 0,
            signature: None,
            import: None,
            low_pc: None,
            nocall: false,
            inline: false,
            producer_clang: false,
            gnu_annotation: None,
        }
    }
}

pub(super) fn udata(v: &AttributeValue<R<'_>>) -> Option<u64> {
    match *v {
        AttributeValue::Data1(x) => Some(x as u64),
        AttributeValue::Data2(x) => Some(x as u64),
        AttributeValue::Data4(x) => Some(x as u64),
        AttributeValue::Data8(x) => Some(x),
        AttributeValue::Udata(x) => Some(x),
        AttributeValue::Sdata(x) => Some(x as u64),
        _ => None,
    }
}

impl<'a> Decoder<'a, '_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_attrs(
        &self,
        unit: &gimli::Unit<R<'a>>,
        entries: &mut Dies<'a>,
        abbrev: dies::Abbrev,
        a: &mut Attrs<'a>,
        cu_off: u64,
        die: DieOffset,
        refs: Refs,
        base: u64,
    ) -> Result<(), DecodeError> {
        *a = Attrs::default();
        let debug_str = self.dwarf.debug_str.reader().slice();
        let mut sink = AttrSink {
            dec: self,
            unit,
            a,
            debug_str,
            base,
            refs,
            bad: None,
        };
        let res = entries.read_into(abbrev, &mut sink);
        if let (Ok(()), Some(msg)) = (&res, sink.bad) {
            return Err(self.err(cu_off, Some(die), msg));
        }
        match res {
            Ok(()) => Ok(()),
            Err(ReadError::RefAddr(at)) => {
                let mut e = self.err(
                    cu_off,
                    Some(die),
                    format!(
                        "{at} uses DW_FORM_ref_addr (a reference across units, as LTO builds make), but the \
                         file's kernel LTO note says it is not an LTO build: the reference then reads the units \
                         one by one and cannot resolve such a reference, which btfkit does not imitate"
                    ),
                );
                e.kind = DecodeErrorKind::MergedMode;
                Err(e)
            }
            Err(ReadError::Bad(Some(at), e)) => {
                Err(self.err(cu_off, Some(die), format!("cannot read attribute {at}: {e}")))
            }
            Err(ReadError::Bad(None, e)) => Err(self.err(cu_off, Some(die), format!("cannot read attributes: {e}"))),
        }
    }
}

/// [`Decoder::read_attrs`]'s receiver of a DIE's attributes.
struct AttrSink<'s, 'a> {
    dec: &'s Decoder<'a, 's>,
    unit: &'s gimli::Unit<R<'a>>,
    a: &'s mut Attrs<'a>,
    debug_str: &'a [u8],
    /// Added to unit references: 0, or the unit's `.debug_info` offset in
    /// the merged-unit mode (where DW_FORM_ref_addr is read as it is).
    base: u64,
    refs: Refs,
    /// Why an attribute's value leads nowhere (a string offset past its
    /// section): the DIE is then refused once its attributes are read.
    bad: Option<String>,
}

impl AttrSink<'_, '_> {
    #[cold]
    fn bad(&mut self, what: &str, msg: String) {
        self.bad.get_or_insert(format!("{what}: {msg}"));
    }
}

impl<'a> dies::Sink<'a> for AttrSink<'_, 'a> {
    #[inline]
    fn name_strp(&mut self, off: u64) {
        // Kept as the tail of .debug_str from the offset, cut at the NUL
        // only where the text is needed (see `string`).
        match super::strp(self.debug_str, off) {
            Ok(s) => self.a.name = s,
            Err(msg) => self.bad("DW_AT_name", msg),
        }
    }

    #[inline]
    fn unit_ref(&mut self, field: Field, off: u64) {
        let off = off + self.base;
        let r = Some(DieRef::at(Some(off)));
        match field {
            Field::Type => self.a.ty = r,
            Field::Origin => self.a.origin = r,
            Field::Spec => self.a.spec = r,
            Field::Import => self.a.import = r,
            Field::GnuAnnotation => self.a.gnu_annotation = r,
            _ => self.value(field, Value::UnitRef(off)),
        }
    }

    #[inline]
    fn number(&mut self, field: Field, x: u64) {
        let a = &mut *self.a;
        match field {
            Field::ByteSize => a.byte_size = Some(x),
            Field::MemberLoc => a.member_loc = Some(x),
            Field::DataBitOffset => a.data_bit_offset = Some(x),
            Field::BitSize => a.bit_size = Some(x),
            Field::UpperBound => a.upper_bound = Some(Some(x)),
            Field::Count => a.count = Some(Some(x)),
            Field::Encoding => a.encoding = x as u8,
            Field::CallingConvention => a.nocall = x == u64::from(dw::DW_CC_nocall.0),
            Field::Inline => a.inline = x != 0,
            _ => self.value(field, Value::Const(x)),
        }
    }

    #[inline(never)]
    fn value(&mut self, field: Field, v: Value<'a>) {
        if let Value::Other(AttributeValue::DebugInfoRefSup(_)) = v
            && self.dec.space.sup.is_none()
        {
            self.bad(
                "a reference into a supplementary file (DW_FORM_GNU_ref_alt or DW_FORM_ref_sup)",
                "no supplementary file was read for it (dwz's .gnu_debugaltlink or DWARF 5's .debug_sup names one)"
                    .into(),
            );
            return;
        }
        let (a, debug_str, unit, base) = (&mut *self.a, self.debug_str, self.unit, self.base);
        if let Value::Other(AttributeValue::DebugTypesRef(sig)) = v
            && matches!(field, Field::Type | Field::Origin | Field::Spec | Field::Signature)
        {
            let at = self
                .dec
                .type_units
                .filter(|_| self.refs == Refs::Section)
                .and_then(|t| t.get(sig.0));
            let Some(at) = at else {
                a.type_unit_refs = a.type_unit_refs.saturating_add(1);
                return;
            };
            let bit = match field {
                Field::Type => {
                    a.ty = Some(DieRef::at(Some(at)));
                    0
                }
                Field::Origin => {
                    a.origin = Some(DieRef::at(Some(at)));
                    1
                }
                Field::Spec => {
                    a.spec = Some(DieRef::at(Some(at)));
                    2
                }
                _ => {
                    a.signature = Some(at);
                    3
                }
            };
            a.resolved |= 1 << bit;
            return;
        }
        let (refs, space) = (self.refs, self.dec.space);
        let ref_value = |v| ref_value(v, refs, base, space);
        match field {
            Field::Name => {
                let name = match v {
                    // Kept as the tail of .debug_str from the offset, cut at
                    // the NUL only where the text is needed (see `string`).
                    Value::Strp(off) => super::strp(debug_str, off),
                    v => self.dec.string(unit, &Some(v.raw())),
                };
                match name {
                    Ok(name) => a.name = name,
                    Err(msg) => self.bad("DW_AT_name", msg),
                }
            }
            Field::Type => a.ty = Some(ref_value(v)),
            Field::Origin => a.origin = Some(ref_value(v)),
            Field::Spec => a.spec = Some(ref_value(v)),
            Field::ByteSize => a.byte_size = num_value(v),
            Field::Encoding => a.encoding = num_value(v).unwrap_or(0) as u8,
            Field::Declaration => a.declaration = flag(&v.raw()),
            Field::External => a.external = flag(&v.raw()),
            Field::Artificial => a.artificial = flag(&v.raw()),
            Field::UpperBound => a.upper_bound = Some(num_value(v)),
            Field::Count => a.count = Some(num_value(v)),
            Field::MemberLoc => {
                a.member_loc = Some(match v {
                    Value::Const(x) => x,
                    v => member_location(&v.raw()),
                })
            }
            Field::DataBitOffset => a.data_bit_offset = num_value(v),
            Field::BitSize => a.bit_size = num_value(v),
            Field::BitOffset => {
                a.bit_offset = match v.raw() {
                    AttributeValue::Sdata(x) => Some(x),
                    v => udata(&v).map(|x| x as i64),
                }
            }
            Field::ConstValue => a.const_value = Some(v.raw()),
            Field::Location => a.location = Some(v.raw()),
            Field::Language => a.language = num_value(v).map(|x| x as u16),
            Field::Import => a.import = Some(ref_value(v)),
            Field::GnuAnnotation => a.gnu_annotation = Some(ref_value(v)),
            Field::LowPc => {
                a.low_pc = match v.raw() {
                    AttributeValue::Addr(x) => Some(x),
                    AttributeValue::DebugAddrIndex(i) => self.dec.dwarf.address(unit, i).ok(),
                    _ => None,
                }
            }
            Field::CallingConvention => a.nocall = num_value(v) == Some(u64::from(dw::DW_CC_nocall.0)),
            Field::Inline => a.inline = num_value(v).is_some_and(|x| x != 0),
            Field::Producer => {
                let producer = match v {
                    Value::Strp(off) => super::strp(debug_str, off),
                    v => self.dec.string(unit, &Some(v.raw())),
                };
                // (an unreadable producer is no compiler in particular)
                if let Ok(p) = producer {
                    let p = super::nm(p);
                    a.producer_clang = p.windows(5).any(|w| w == b"clang");
                }
            }
            // (a signature in a form that is not a reference)
            Field::Signature => a.type_unit_refs = a.type_unit_refs.saturating_add(1),
        }
    }
}

/// A reference field: a unit offset plus `base`, or [`DieRef::NOT_UNIT`]
/// for any other form. A `.debug_info` reference (DW_FORM_ref_addr) reaches here
/// only in the merged-unit mode, where offsets are the section's (placed
/// in `space`, as are those into a supplementary file).
#[inline]
fn ref_value(v: Value<'_>, refs: Refs, base: u64, space: InfoSpace) -> DieRef {
    match v {
        Value::UnitRef(o) => DieRef::at(o.checked_add(base)),
        Value::Other(AttributeValue::UnitRef(UnitOffset(o))) => DieRef::at((o as u64).checked_add(base)),
        Value::Other(AttributeValue::DebugInfoRef(gimli::DebugInfoOffset(o))) if refs == Refs::Section => {
            DieRef::at((o as u64).checked_add(space.own))
        }
        Value::Other(AttributeValue::DebugInfoRefSup(gimli::DebugInfoOffset(o))) if refs == Refs::Section => {
            DieRef::at(space.sup.and_then(|s| s.checked_add(o as u64)))
        }
        _ => DieRef::NOT_UNIT,
    }
}

/// A numeric field: any constant form, `None` for others.
#[inline]
fn num_value(v: Value<'_>) -> Option<u64> {
    match v {
        Value::Const(x) => Some(x),
        v => udata(&v.raw()),
    }
}

fn flag(v: &AttributeValue<R<'_>>) -> bool {
    match *v {
        AttributeValue::Flag(b) => b,
        _ => true,
    }
}

/// DW_AT_data_member_location: a constant, or an expression DW_OP_plus_uconst N / DW_OP_constu N.
fn member_location(v: &AttributeValue<R<'_>>) -> u64 {
    if let Some(x) = udata(v) {
        return x;
    }
    let bytes = match v {
        AttributeValue::Exprloc(e) => e.0.slice(),
        AttributeValue::Block(b) => b.slice(),
        _ => return u64::MAX,
    };
    match bytes.first() {
        Some(0x23) | Some(0x10) => {
            let mut r = EndianSlice::new(&bytes[1..], RunTimeEndian::Little);
            gimli::leb128::read::unsigned(&mut r).unwrap_or(u64::MAX)
        }
        _ => u64::MAX,
    }
}
