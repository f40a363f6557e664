//! The kernel's stricter rules, as warnings. The reader accepts BTF that
//! breaks them (the reference emits such files, see `kernel-rejects.tsv`);
//! `stats --warnings` lists them so a user learns before loading.

use super::{Btf, Kind, StrOff, Type, TypeId};

/// The kernel's "valid identifier": `[A-Za-z_.][A-Za-z0-9_.]*`, shorter than 512.
pub fn is_valid_ident(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() < 512
        && (s[0].is_ascii_alphabetic() || s[0] == b'_' || s[0] == b'.')
        && s.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// Byte size of a type as the kernel computes it (pointers are 8 bytes, as
/// on the 64-bit kernels that load BTF); `None` for unsized or cyclic types.
pub fn type_size(btf: &Btf, id: TypeId) -> Option<u64> {
    type_size_with(btf, id, 8)
}

/// [`type_size`] with pointers of `ptr_size` bytes.
pub fn type_size_with(btf: &Btf, mut id: TypeId, ptr_size: u64) -> Option<u64> {
    let mut mult = 1u64;
    for _ in 0..32 {
        let t = btf.get(id)?;
        match t.kind() {
            Kind::Int | Kind::Float | Kind::Enum | Kind::Enum64 | Kind::Struct | Kind::Union | Kind::Datasec => {
                return Some(mult.saturating_mul(t.size() as u64));
            }
            Kind::Ptr => return Some(mult.saturating_mul(ptr_size)),
            Kind::Typedef | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag | Kind::Var => {
                id = t.type_id()
            }
            Kind::Array => {
                let (elem, _, n) = t.array();
                mult = mult.saturating_mul(n as u64);
                id = elem;
            }
            _ => return None,
        }
    }
    None
}

/// One finding: the type it concerns and what the kernel would object to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub id: TypeId,
    pub msg: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.id.0, self.msg)
    }
}

/// Checks own types against the kernel's name, layout and DATASEC rules.
pub fn kernel_warnings(btf: &Btf) -> Vec<Warning> {
    kernel_warnings_with(btf, 8)
}

/// Whether the BTF's struct layouts only fit with 4-byte pointers: it was
/// made for a 32-bit target, and a 64-bit kernel will refuse structs that
/// hold pointers ("Member exceeds struct_size").
pub fn looks_32bit(btf: &Btf) -> bool {
    let exceeds = |w: &Vec<Warning>| w.iter().any(|w| w.msg.contains("exceeds the struct size"));
    exceeds(&kernel_warnings_with(btf, 8)) && !exceeds(&kernel_warnings_with(btf, 4))
}

/// [`kernel_warnings`] measuring pointers as `ptr_size` bytes.
pub fn kernel_warnings_with(btf: &Btf, ptr_size: u64) -> Vec<Warning> {
    let mut out = Vec::new();
    for id in btf.own_ids() {
        let t = btf.ty(id);
        let kind = t.kind();
        let name = btf.str_at(t.name_off()).unwrap_or(b"");
        let mut warn = |msg: String| {
            out.push(Warning {
                id,
                msg: format!("{} '{}': {}", kind.name(), String::from_utf8_lossy(name), msg),
            })
        };
        // The order of the rules is the order of the warnings.
        name_rule(t, name, &mut warn);
        info_rules(t, &mut warn);
        field_rules(btf, t, &mut warn);
        match kind {
            Kind::Struct | Kind::Union => member_rules(btf, t, ptr_size, &mut warn),
            Kind::Enum | Kind::Enum64 => enumerator_rules(btf, t, &mut warn),
            Kind::FuncProto => param_rules(btf, t, &mut warn),
            Kind::Array => array_rules(t, &mut warn),
            Kind::Func if t.vlen() > 1 => warn(format!("linkage {} (kernel 6.12 accepts static and global)", t.vlen())),
            Kind::TypeTag | Kind::DeclTag if t.kflag() => {
                warn("kind_flag 1 (attribute) is refused by kernel 6.12".into())
            }
            Kind::Datasec => datasec_rules(t, &mut warn),
            _ => {}
        }
    }
    out
}

/// A name of a type, own or member, as the kernel reads it.
fn ident(btf: &Btf, off: u32) -> &[u8] {
    btf.str_at(StrOff::new(off)).unwrap_or(b"")
}

/// Which kinds must be named by a valid identifier, may be, or must be anonymous.
fn name_rule(t: Type<'_>, name: &[u8], warn: &mut impl FnMut(String)) {
    match t.kind() {
        Kind::Typedef | Kind::Fwd | Kind::Func | Kind::Var if !is_valid_ident(name) => warn("invalid name".into()),
        Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 if !name.is_empty() && !is_valid_ident(name) => {
            warn("invalid name".into())
        }
        Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::Array | Kind::FuncProto
            if t.name_off().0 != 0 =>
        {
            warn("must be anonymous".into())
        }
        _ => {}
    }
}

/// The kinds' rules for the info word (btf_*_check_meta): which kinds may set
/// kind_flag, which may have members.
fn info_rules(t: Type<'_>, warn: &mut impl FnMut(String)) {
    let kind = t.kind();
    let vlen = t.vlen();
    let kflag_allowed = matches!(
        kind,
        Kind::Struct | Kind::Union | Kind::Fwd | Kind::Enum | Kind::Enum64 | Kind::DeclTag | Kind::TypeTag
    );
    if t.kflag() && !kflag_allowed {
        warn("kind_flag set on a kind without one (\"Invalid btf_info kind_flag\")".into());
    }
    let no_members = matches!(
        kind,
        Kind::Int
            | Kind::Ptr
            | Kind::Array
            | Kind::Fwd
            | Kind::Typedef
            | Kind::Volatile
            | Kind::Const
            | Kind::Restrict
            | Kind::Var
            | Kind::Float
            | Kind::DeclTag
            | Kind::TypeTag
    );
    if no_members && vlen != 0 {
        warn(format!("vlen {vlen} on a kind without members (\"vlen != 0\")"));
    }
}

/// The kinds' rules for their own fields: sizes, encodings, linkage, the
/// FUNC's prototype, a tag's component.
fn field_rules(btf: &Btf, t: Type<'_>, warn: &mut impl FnMut(String)) {
    match t.kind() {
        Kind::Int => {
            let (enc, off, bits) = (t.int_encoding(), t.int_offset(), t.int_bits());
            let size = t.size();
            if !matches!(size, 1 | 2 | 4 | 8 | 16) {
                warn(format!("size {size} is not 1, 2, 4, 8 or 16 (\"Unsupported size\")"));
            }
            if bits > 128 || off + bits > size.saturating_mul(8) {
                warn(format!(
                    "{bits} bits at bit {off} do not fit in {size} bytes (\"nr_bits exceeds type_size\")"
                ));
            }
            if enc.count_ones() > 1 || enc & !0x7 != 0 {
                warn(format!(
                    "encoding {enc:#x} is not one of SIGNED, CHAR, BOOL (\"Unsupported encoding\")"
                ));
            }
        }
        Kind::Enum if !matches!(t.size(), 1 | 2 | 4 | 8) => {
            warn(format!("size {} is not 1, 2, 4 or 8 (\"Unexpected size\")", t.size()))
        }
        Kind::Float if !matches!(t.size(), 2 | 4 | 8 | 12 | 16) => warn(format!(
            "size {} is not 2, 4, 8, 12 or 16 (\"Invalid type_size\")",
            t.size()
        )),
        Kind::Func if btf.get(t.type_id()).is_none_or(|p| p.kind() != Kind::FuncProto) => warn(format!(
            "type {} is not a FUNC_PROTO (\"Invalid type_id\")",
            t.type_id().0
        )),
        Kind::Var if t.extra() > 2 => warn(format!("linkage {} (\"Linkage not supported\")", t.extra())),
        Kind::DeclTag if (t.extra() as i32) < -1 => warn(format!(
            "component index {} (\"Invalid component_idx\")",
            t.extra() as i32
        )),
        _ => {}
    }
}

/// A struct's or union's members: names, offsets, and that each fits.
fn member_rules(btf: &Btf, t: Type<'_>, ptr_size: u64, warn: &mut impl FnMut(String)) {
    let mut prev = 0;
    for [n, ty, off] in t.triples() {
        let m = ident(btf, n);
        if !m.is_empty() && !is_valid_ident(m) {
            warn(format!("member '{}' has an invalid name", String::from_utf8_lossy(m)));
        }
        let (bit_off, bits) = if t.kflag() {
            (off & 0xff_ffff, off >> 24)
        } else {
            (off, 0)
        };
        if t.kind() == Kind::Union && bit_off != 0 {
            warn(format!(
                "union member '{}' at bit offset {bit_off}",
                String::from_utf8_lossy(m)
            ));
        }
        // Sizes saturate (an array of 2^32 elements of a huge
        // struct): so does the end, which then exceeds any size.
        let end_bits = if bits != 0 {
            bit_off as u64 + bits as u64
        } else {
            let size = type_size_with(btf, TypeId::new(ty), ptr_size).unwrap_or(0);
            (bit_off as u64).saturating_add(size.saturating_mul(8))
        };
        if end_bits.div_ceil(8) > t.size() as u64 {
            warn(format!(
                "member '{}' exceeds the struct size {}",
                String::from_utf8_lossy(m),
                t.size()
            ));
        }
        if bit_off < prev {
            warn(format!("member '{}' offset goes backwards", String::from_utf8_lossy(m)));
        }
        prev = bit_off;
    }
}

fn enumerator_rules(btf: &Btf, t: Type<'_>, warn: &mut impl FnMut(String)) {
    let names: Vec<u32> = if t.kind() == Kind::Enum {
        t.pairs().map(|[n, _]| n).collect()
    } else {
        t.triples().map(|[n, _, _]| n).collect()
    };
    for n in names {
        if !is_valid_ident(ident(btf, n)) {
            warn(format!(
                "enumerator '{}' has an invalid name",
                String::from_utf8_lossy(ident(btf, n))
            ));
        }
    }
}

fn param_rules(btf: &Btf, t: Type<'_>, warn: &mut impl FnMut(String)) {
    let nargs = t.vlen() as usize;
    for (i, [n, ty]) in t.pairs().enumerate() {
        let p = ident(btf, n);
        if !p.is_empty() && !is_valid_ident(p) {
            warn(format!(
                "parameter '{}' has an invalid name",
                String::from_utf8_lossy(p)
            ));
        }
        // Type 0 is only `...`: the last parameter, unnamed (the
        // kernel's "Invalid arg#N"; the reference writes such
        // parameters where a type unit's type was lost).
        if ty == 0 && (i + 1 < nargs || !p.is_empty()) {
            warn(format!(
                "parameter #{} '{}' has type void (void is only the last, unnamed `...`)",
                i + 1,
                String::from_utf8_lossy(p)
            ));
        }
    }
}

/// The kernel's "Invalid elem" / "Invalid index".
fn array_rules(t: Type<'_>, warn: &mut impl FnMut(String)) {
    let (elem, index, _) = t.array();
    if elem.0 == 0 {
        warn("element type is void".into());
    }
    if index.0 == 0 {
        warn("index type is void".into());
    }
}

/// A DATASEC's entries: in order, not overlapping, inside the section.
fn datasec_rules(t: Type<'_>, warn: &mut impl FnMut(String)) {
    let mut end = 0u64;
    for [_, off, sz] in t.triples() {
        if (off as u64) < end {
            warn(format!("entry at offset {off} overlaps or is out of order"));
        }
        if sz == 0 || off as u64 + sz as u64 > t.size() as u64 {
            warn(format!(
                "entry at offset {off} size {sz} outside the section size {}",
                t.size()
            ));
        }
        end = off as u64 + sz as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Endian;

    #[test]
    fn identifiers() {
        assert!(is_valid_ident(b"task_struct"));
        assert!(is_valid_ident(b".data"));
        assert!(!is_valid_ident(b"_vptr$Shape"));
        assert!(!is_valid_ident(b"Wrapper<u32>"));
        assert!(!is_valid_ident(b"1abc"));
        assert!(!is_valid_ident(b""));
    }

    #[test]
    fn finds_names_layout_and_datasec_order() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        b.begin(Kind::Struct, b"Wrapper<u32>", 4, false);
        b.push_member(b"a", int, 0, 0);
        b.push_member(b"b", int, 32, 0);
        let v1 = b.add_var(b"x", int, 1);
        let v2 = b.add_var(b"y", int, 1);
        b.begin(Kind::Datasec, b".data", 8, false);
        b.push_var_secinfo(v1, 4, 4);
        b.push_var_secinfo(v2, 0, 4);
        let w: Vec<String> = kernel_warnings(&b).iter().map(|w| w.to_string()).collect();
        assert!(
            w.iter()
                .any(|w| w.starts_with("[2] STRUCT 'Wrapper<u32>': invalid name")),
            "{w:?}"
        );
        assert!(
            w.iter().any(|w| w.contains("member 'b' exceeds the struct size 4")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("entry at offset 0 overlaps or is out of order")),
            "{w:?}"
        );
    }

    /// The kinds' field rules: an INT with members, a bad INT, kind_flag on a
    /// pointer, a FUNC that is not of a FUNC_PROTO.
    #[test]
    fn finds_field_rule_breaks() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        b.push_words(&[0, crate::btf::make_info(Kind::Int, false, 1), 4, 32]);
        b.push_words(&[0, crate::btf::make_info(Kind::Int, false, 0), 3, 33 | (3 << 24)]);
        b.push_words(&[0, crate::btf::make_info(Kind::Ptr, true, 0), int.0]);
        let name = b.add_str(b"f");
        b.push_words(&[name.0, crate::btf::make_info(Kind::Func, false, 0), int.0]);
        let w: Vec<String> = kernel_warnings(&b).iter().map(|w| w.to_string()).collect();
        for want in [
            "[2] INT '': vlen 1 on a kind without members",
            "[3] INT '': size 3 is not 1, 2, 4, 8 or 16",
            "[3] INT '': 33 bits at bit 0 do not fit in 3 bytes",
            "[3] INT '': encoding 0x3 is not one of SIGNED, CHAR, BOOL",
            "[4] PTR '': kind_flag set",
            "[5] FUNC 'f': type 1 is not a FUNC_PROTO",
        ] {
            assert!(w.iter().any(|x| x.starts_with(want)), "{want} not in {w:?}");
        }
        let good = kernel_warnings(&{
            let mut g = Btf::new(Endian::Little);
            g.add_int(b"int", 4, 1);
            g
        });
        assert!(good.is_empty(), "{good:?}");
    }

    /// What the reference writes where a type unit's type was lost, and the
    /// kernel refuses ("Invalid arg#2", "Invalid elem").
    #[test]
    fn finds_void_parameters_and_elements() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        b.begin(Kind::FuncProto, b"", int.0, false);
        b.push_param(b"x", int);
        b.push_param(b"u", TypeId::new(0));
        b.begin(Kind::FuncProto, b"", int.0, false);
        b.push_param(b"x", int);
        b.push_param(b"", TypeId::new(0));
        b.add_array(TypeId::new(0), int, 2);
        let w: Vec<String> = kernel_warnings(&b).iter().map(|w| w.to_string()).collect();
        assert_eq!(
            w,
            [
                "[2] FUNC_PROTO '': parameter #2 'u' has type void (void is only the last, unnamed `...`)",
                "[4] ARRAY '': element type is void"
            ]
        );
    }
}
