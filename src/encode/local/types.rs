//! Type records: one DWARF type slot → one BTF record (or none).

use gimli::constants as dw;

use super::out::Out;
use super::{Enc, kept_entries, name_empty};
use crate::btf::{self, Kind, make_info};
use crate::dwarf::{CoreId, DW_TAG_LLVM_ANNOTATION, Slot, SlotFlags, local_id, nm};
use crate::encode::EncodeError;
use crate::encode::lang::DW_LANG_RUST;

pub(super) const ATE_BOOLEAN: u8 = 2;
pub(super) const ATE_COMPLEX_FLOAT: u8 = 3;
pub(super) const ATE_FLOAT: u8 = 4;
pub(super) const ATE_SIGNED: u8 = 5;
pub(super) const ATE_SIGNED_CHAR: u8 = 6;
pub(super) const ATE_IMAGINARY_FLOAT: u8 = 9;

impl<'a> Enc<'_, '_, 'a> {
    /// The name of a type, inheriting it through DW_AT_specification.
    pub(super) fn type_name(&self, s: &Slot<'a>) -> &'a [u8] {
        if name_empty(s.name.get())
            && let Some(t) = self.cu.type_at(s.spec)
        {
            return t.name.get();
        }
        s.name.get()
    }

    /// Size in bytes of the type with core id `core`, as the reference's `tag__size`.
    pub(super) fn size_of(&self, core: Option<CoreId>, depth: u32) -> u64 {
        let Some(s) = core.map(|c| self.cu.slot(c)) else {
            return 0;
        };
        if depth > 64 {
            return 0;
        }
        match s.tag {
            dw::DW_TAG_pointer_type | dw::DW_TAG_reference_type | dw::DW_TAG_rvalue_reference_type => {
                self.cu.address_size as u64
            }
            dw::DW_TAG_base_type => s.size,
            dw::DW_TAG_enumeration_type => {
                if s.size == 0 {
                    4
                } else {
                    s.size
                }
            }
            dw::DW_TAG_subroutine_type => self.cu.address_size as u64,
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type | dw::DW_TAG_interface_type => {
                s.size
            }
            _ => {
                let inner = match s.ty {
                    None => s.size,
                    Some(_) => self.size_of(self.cu.core(s.ty), depth + 1),
                };
                if s.tag == dw::DW_TAG_array_type {
                    inner.wrapping_mul(s.nelems as u64)
                } else {
                    inner
                }
            }
        }
    }

    /// Whether the reference sizes a variable of this type 0, and so leaves
    /// it out: a struct or union of one byte without members (what C++
    /// calls an empty base, and what gcc and clang make of a struct of
    /// unnamed bitfields), reached through typedefs, qualifiers and arrays.
    pub(super) fn is_empty_base(&self, core: Option<CoreId>) -> bool {
        let mut core = self.strip(core);
        for _ in 0..64 {
            let Some(s) = core.map(|c| self.cu.slot(c)) else {
                return false;
            };
            match s.tag {
                dw::DW_TAG_array_type => core = self.strip(self.cu.core(s.ty)),
                dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type => {
                    return s.size == 1 && s.kids.is_empty();
                }
                _ => return false,
            }
        }
        false
    }

    /// Follows typedefs and qualifiers.
    pub(super) fn strip(&self, mut core: Option<CoreId>) -> Option<CoreId> {
        for _ in 0..64 {
            match core.map(|c| self.cu.slot(c)) {
                Some(s)
                    if matches!(
                        s.tag,
                        dw::DW_TAG_typedef
                            | dw::DW_TAG_const_type
                            | dw::DW_TAG_volatile_type
                            | dw::DW_TAG_restrict_type
                            | dw::DW_TAG_atomic_type
                    ) =>
                {
                    core = self.cu.core(s.ty)
                }
                _ => return core,
            }
        }
        core
    }

    /// The record of the type in slot `core` (none for an unspecified type).
    pub(super) fn encode_slot(&self, o: &mut Out<'a>, s: &Slot<'a>) -> Result<(), EncodeError> {
        let r = |off| local_id(self.cu.core(off));
        match s.tag {
            dw::DW_TAG_base_type => return self.base_type(o, s),
            dw::DW_TAG_pointer_type => o.rec(&[0, make_info(Kind::Ptr, false, 0), r(s.ty)]),
            dw::DW_TAG_const_type => o.rec(&[0, make_info(Kind::Const, false, 0), r(s.ty)]),
            dw::DW_TAG_volatile_type => o.rec(&[0, make_info(Kind::Volatile, false, 0), r(s.ty)]),
            dw::DW_TAG_restrict_type => o.rec(&[0, make_info(Kind::Restrict, false, 0), r(s.ty)]),
            dw::DW_TAG_typedef => {
                let name = self.type_name(s);
                if name_empty(name) {
                    return Err(self.unsupported(s.die, "DW_TAG_typedef without a name: BTF TYPEDEF needs one".into()));
                }
                let n = o.s(name);
                o.rec(&[n, make_info(Kind::Typedef, false, 0), r(s.ty)]);
            }
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type => {
                return self.struct_or_union(o, s);
            }
            dw::DW_TAG_enumeration_type => return self.enumeration(o, s),
            dw::DW_TAG_array_type => {
                o.o.has_arrays = true;
                o.rec(&[0, make_info(Kind::Array, false, 0), 0, r(s.ty), 0, s.nelems]);
            }
            dw::DW_TAG_subroutine_type => self.func_proto(o, s),
            DW_TAG_LLVM_ANNOTATION => {
                if name_empty(s.name.get()) {
                    return Err(self.unsupported(s.die, "btf_type_tag annotation without a value".into()));
                }
                let n = o.s(s.name.get());
                o.rec(&[n, make_info(Kind::TypeTag, false, 0), r(s.ty)]);
            }
            dw::DW_TAG_unspecified_type => {
                // Placed by the loader but never emitted (shifts later ids).
            }
            other => {
                return Err(self.unsupported(s.die, format!("unsupported {other}: BTF has no kind for it")));
            }
        }
        Ok(())
    }

    /// INT or FLOAT; an INT of a size BTF cannot hold becomes the
    /// reference's sanitized 4-byte stand-in.
    fn base_type(&self, o: &mut Out<'a>, s: &Slot<'a>) -> Result<(), EncodeError> {
        let f = &self.ctx.features;
        let enc = s.encoding;
        let signed = enc == ATE_SIGNED || enc == ATE_SIGNED_CHAR;
        let boolean = enc == ATE_BOOLEAN;
        let mut encoding = 0;
        if signed {
            encoding = btf::INT_SIGNED;
        } else if boolean {
            encoding = btf::INT_BOOL;
        } else if f.float && enc == ATE_FLOAT {
            if !matches!(s.size, 2 | 4 | 8 | 12 | 16) {
                return Err(self.unsupported(
                    s.die,
                    format!(
                        "DW_TAG_base_type float `{}` of size {}: BTF has no FLOAT of that size",
                        String::from_utf8_lossy(nm(s.name.get())),
                        s.size
                    ),
                ));
            }
            let n = o.s(s.name.get());
            o.rec(&[n, make_info(Kind::Float, false, 0), s.size as u32]);
            return Ok(());
        } else if f.float && (enc == ATE_COMPLEX_FLOAT || enc == ATE_IMAGINARY_FLOAT) {
            return Err(self.unsupported(
                s.die,
                "DW_TAG_base_type: complex, interval and imaginary float types are not supported (BTF has no kind for them)".into(),
            ));
        }
        let size = s.size;
        if size == 0 || !size.is_power_of_two() || size > 16 {
            let n = o.s(b"__SANITIZED_FAKE_INT__");
            o.rec(&[n, make_info(Kind::Int, false, 0), 4, (encoding << 24) | 32]);
        } else {
            if name_empty(s.name.get()) {
                return Err(self.unsupported(s.die, "DW_TAG_base_type without a name: BTF INT needs one".into()));
            }
            let n = o.s(s.name.get());
            o.rec(&[
                n,
                make_info(Kind::Int, false, 0),
                size as u32,
                (encoding << 24) | (size as u32 * 8),
            ]);
        }
        Ok(())
    }

    /// STRUCT or UNION with its members, or FWD for a declaration.
    fn struct_or_union(&self, o: &mut Out<'a>, s: &Slot<'a>) -> Result<(), EncodeError> {
        let cu = self.cu;
        let union = s.tag == dw::DW_TAG_union_type;
        let name = self.type_name(s);
        if s.flags.has(SlotFlags::DECLARATION) {
            if name_empty(name) {
                return Err(self.unsupported(
                    s.die,
                    format!("{} declaration without a name: BTF FWD needs one", s.tag),
                ));
            }
            let n = o.s(name);
            o.rec(&[n, make_info(Kind::Fwd, union, 0), 0]);
            return Ok(());
        }
        let n = o.s(name);
        let kind = if union { Kind::Union } else { Kind::Struct };
        o.rec(&[n, make_info(kind, false, 0), s.size as u32]);
        let members = cu.members_of(s);
        // Rust CUs: members in offset order, as the reference sorts them
        let order: Option<smallvec::SmallVec<[u32; 32]>> = (cu.language == DW_LANG_RUST).then(|| {
            let mut order: smallvec::SmallVec<[u32; 32]> = (0..members.len() as u32).collect();
            order.sort_by_key(|&i| {
                let m = &members[i as usize];
                match cu.bits(m).data_bit_offset {
                    Some(_) => self.member_bit_offset(m).0 / 8,
                    None => self.cu.member_loc(m).unwrap_or(0) as u32,
                }
            });
            order
        });
        let placed = match &order {
            None => self.emit_members(o, members.iter(), union),
            Some(order) => self.emit_members(o, order.iter().map(|&i| &members[i as usize]), union),
        };
        if !placed {
            return Err(self.member_error(members, order.as_deref(), union, s.die));
        }
        Ok(())
    }

    /// ENUM, or ENUM64 for an 8-byte enum when the feature is on.
    fn enumeration(&self, o: &mut Out<'a>, s: &Slot<'a>) -> Result<(), EncodeError> {
        let f = &self.ctx.features;
        let cu = self.cu;
        let name = self.type_name(s);
        // tested as bytes: `size * 8` overflows for a damaged DW_AT_byte_size
        let bytes = if s.size == 0 { 4 } else { s.size };
        if !matches!(bytes, 1 | 2 | 4 | 8) {
            return Err(self.unsupported(
                s.die,
                format!("DW_TAG_enumeration_type of size {bytes}: BTF enums are 1, 2, 4 or 8 bytes"),
            ));
        }
        let n = o.s(name);
        let enums = cu.enumerators_of(s);
        if f.enum64 && bytes > 4 {
            let signed = cu.type_at(s.ty).is_some_and(|t| {
                t.tag == dw::DW_TAG_base_type && (t.encoding == ATE_SIGNED || t.encoding == ATE_SIGNED_CHAR)
            });
            o.rec(&[n, make_info(Kind::Enum64, signed, 0), bytes as u32]);
            let keep = kept_entries(enums.len(), o.vlen_mask);
            for (pos, e) in enums.iter().enumerate() {
                if name_empty(e.name) {
                    return Err(self.unsupported(s.die, "DW_TAG_enumerator without a name".into()));
                }
                let en = o.s(e.name);
                o.bump_vlen();
                if pos < keep {
                    o.o.words
                        .extend_from_slice(&[en, e.value as u32, (e.value >> 32) as u32]);
                }
            }
        } else {
            o.rec(&[n, make_info(Kind::Enum, false, 0), bytes as u32]);
            let keep = kept_entries(enums.len(), o.vlen_mask);
            for (pos, e) in enums.iter().enumerate() {
                if name_empty(e.name) {
                    return Err(self.unsupported(s.die, "DW_TAG_enumerator without a name".into()));
                }
                let v = if f.enum64 {
                    e.value as i64
                } else {
                    e.value as u32 as i64
                };
                if v < i32::MIN as i64 || v > u32::MAX as i64 {
                    return Err(self.unsupported(
                        s.die,
                        format!(
                            "DW_TAG_enumerator `{}` value {v} does not fit a 4-byte BTF enum",
                            String::from_utf8_lossy(nm(e.name))
                        ),
                    ));
                }
                let en = o.s(e.name);
                o.bump_vlen();
                if v < 0 {
                    o.set_kflag();
                }
                if pos < keep {
                    o.o.words.extend_from_slice(&[en, v as u32]);
                }
            }
        }
        Ok(())
    }

    /// FUNC_PROTO with its parameters (varargs as a last, empty one).
    fn func_proto(&self, o: &mut Out<'a>, s: &Slot<'a>) {
        let cu = self.cu;
        o.rec(&[0, make_info(Kind::FuncProto, false, 0), local_id(cu.core(s.ty))]);
        let keep = kept_entries(s.kids.len() + s.flags.has(SlotFlags::VARARGS) as usize, o.vlen_mask);
        for (pos, p) in cu.params_of(s).iter().enumerate() {
            let pn = o.s(p.name.get());
            o.bump_vlen();
            if pos < keep {
                o.o.words.extend_from_slice(&[pn, local_id(cu.core(p.ty))]);
            }
        }
        if s.flags.has(SlotFlags::VARARGS) {
            o.bump_vlen();
            if s.kids.len() < keep {
                o.o.words.extend_from_slice(&[0, 0]);
            }
        }
    }
}
