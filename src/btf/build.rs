//! The libbpf-compatible builder API: types added one by one, entries
//! pushed onto the last one.

use super::*;

impl Btf {
    pub fn add_int(&mut self, name: &[u8], size: u32, encoding: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(
            n,
            make_info(Kind::Int, false, 0),
            size,
            &[(encoding << 24) | (size * 8)],
        )
    }
    pub fn add_float(&mut self, name: &[u8], size: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Float, false, 0), size, &[])
    }
    /// PTR, CONST, VOLATILE, RESTRICT: anonymous references.
    pub fn add_ref(&mut self, kind: Kind, to: TypeId) -> TypeId {
        self.push_raw(StrOff::EMPTY, make_info(kind, false, 0), to.0, &[])
    }
    pub fn add_typedef(&mut self, name: &[u8], to: TypeId) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Typedef, false, 0), to.0, &[])
    }
    pub fn add_type_tag(&mut self, value: &[u8], to: TypeId, attr: bool) -> TypeId {
        let n = self.add_str(value);
        self.push_raw(n, make_info(Kind::TypeTag, attr, 0), to.0, &[])
    }
    pub fn add_decl_tag(&mut self, value: &[u8], to: TypeId, component_idx: i32, attr: bool) -> TypeId {
        let n = self.add_str(value);
        self.push_raw(n, make_info(Kind::DeclTag, attr, 0), to.0, &[component_idx as u32])
    }
    pub fn add_array(&mut self, elem: TypeId, index: TypeId, nelems: u32) -> TypeId {
        self.push_raw(
            StrOff::EMPTY,
            make_info(Kind::Array, false, 0),
            0,
            &[elem.0, index.0, nelems],
        )
    }
    /// FWD of a struct (`union == false`) or a union.
    pub fn add_fwd(&mut self, name: &[u8], union: bool) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Fwd, union, 0), 0, &[])
    }
    pub fn add_func(&mut self, name: &[u8], proto: TypeId, linkage: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Func, false, linkage), proto.0, &[])
    }
    pub fn add_var(&mut self, name: &[u8], ty: TypeId, linkage: u32) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(Kind::Var, false, 0), ty.0, &[linkage])
    }

    /// Starts a STRUCT/UNION/ENUM/ENUM64/FUNC_PROTO/DATASEC with vlen 0; add
    /// its entries with the `push_*` methods below, which bump vlen.
    pub fn begin(&mut self, kind: Kind, name: &[u8], size_or_type: u32, kflag: bool) -> TypeId {
        let n = self.add_str(name);
        self.push_raw(n, make_info(kind, kflag, 0), size_or_type, &[])
    }

    fn bump_vlen(&mut self) -> usize {
        let s = self.last_type_start();
        let info = &mut self.words[s + 1];
        *info = (*info & !super::VLEN_LIMIT) | ((*info + 1) & super::VLEN_LIMIT);
        s
    }

    /// Number of entries of the last type (callers check the format's
    /// limit themselves: [`Format::vlen_limit`](super::Format::vlen_limit)).
    pub fn last_vlen(&self) -> u32 {
        let s = self.last_type_start();
        self.words[s + 1] & super::VLEN_LIMIT
    }

    fn last_type_start(&self) -> usize {
        match &self.deferred {
            Some(d) if d.count > 0 => d.last,
            _ => *self.offs.last().expect("no open type") as usize,
        }
    }

    /// STRUCT/UNION member, libbpf style: offset word is `bit_off | size<<24`,
    /// kind_flag set once any member is a bitfield.
    pub fn push_member(&mut self, name: &[u8], ty: TypeId, bit_off: u32, bitfield_size: u32) {
        let n = self.add_str(name);
        let s = self.bump_vlen();
        if bitfield_size != 0 || !bit_off.is_multiple_of(8) {
            self.words[s + 1] |= 1 << 31;
        }
        extend_words(&mut self.words, &[n.0, ty.0, bit_off | (bitfield_size << 24)]);
    }
    /// ENUM value (low 32 bits; kind_flag set when negative).
    pub fn push_enum_value(&mut self, name: &[u8], val: i64) {
        let n = self.add_str(name);
        let s = self.bump_vlen();
        if val < 0 {
            self.words[s + 1] |= 1 << 31;
        }
        extend_words(&mut self.words, &[n.0, val as u32]);
    }
    pub fn push_enum64_value(&mut self, name: &[u8], val: u64) {
        let n = self.add_str(name);
        self.bump_vlen();
        extend_words(&mut self.words, &[n.0, val as u32, (val >> 32) as u32]);
    }
    pub fn push_param(&mut self, name: &[u8], ty: TypeId) {
        let n = self.add_str(name);
        self.bump_vlen();
        extend_words(&mut self.words, &[n.0, ty.0]);
    }
    pub fn push_var_secinfo(&mut self, var: TypeId, offset: u32, size: u32) {
        self.bump_vlen();
        extend_words(&mut self.words, &[var.0, offset, size]);
    }
}
