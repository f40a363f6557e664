//! Access specs: the parsed access string of a relocation on the local
//! side, and the same path found in a candidate type on the target side
//! (libbpf's `bpf_core_spec`), with libbpf's text form for both.
//!
//! The matching keeps libbpf's bookkeeping literally (a raw index pushed
//! and popped per member tried, a bit offset added and taken back), since
//! a non-matching candidate's spec is printed with whatever that left
//! behind, and the oracle compares those lines.

use std::fmt::Write as _;

use super::ReloKind;
use super::log::Log;
use super::types::{self, errno, is_any_enum, is_composite, skip_mods};
use crate::btf::{Btf, Kind, TypeId};

pub const SPEC_MAX_LEN: usize = 64;

/// One high-level step: a member (named) or an array index (unnamed).
#[derive(Clone, Copy, Debug, Default)]
pub struct Accessor {
    /// The struct (named step) or the element type (unnamed step).
    pub type_id: TypeId,
    pub idx: i32,
    /// The member's or enumerator's name offset in the spec's BTF.
    pub name: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct Spec<'b> {
    pub btf: &'b Btf,
    pub ptr_size: u32,
    pub root: TypeId,
    pub kind: ReloKind,
    pub raw: [i32; SPEC_MAX_LEN],
    pub raw_len: usize,
    pub acc: [Accessor; SPEC_MAX_LEN],
    pub len: usize,
    pub bit_offset: u32,
}

impl<'b> Spec<'b> {
    pub fn new(btf: &'b Btf, ptr_size: u32, root: TypeId, kind: ReloKind) -> Spec<'b> {
        Spec {
            btf,
            ptr_size,
            root,
            kind,
            raw: [0; SPEC_MAX_LEN],
            raw_len: 0,
            acc: [Accessor::default(); SPEC_MAX_LEN],
            len: 0,
            bit_offset: 0,
        }
    }

    pub fn raw(&self) -> &[i32] {
        &self.raw[..self.raw_len]
    }

    pub fn accessors(&self) -> &[Accessor] {
        &self.acc[..self.len]
    }

    fn push_raw(&mut self, v: i32) {
        self.raw[self.raw_len] = v;
        self.raw_len += 1;
    }

    fn size_of(&self, id: TypeId) -> Result<u32, i32> {
        types::resolve_size(self.btf, id, self.ptr_size)
    }

    /// Text as libbpf logs it (`bpf_core_format_spec`), cut at 255 bytes.
    pub fn format(&self) -> String {
        let btf = self.btf;
        let mut s = String::new();
        let root = types::type_of(btf, self.root);
        let (kstr, name) = match &root {
            Some(t) => (types::kind_str(t), types::show(types::name(btf, t)).into_owned()),
            None => ("unknown", "<anon>".into()),
        };
        let _ = write!(s, "<{}> [{}] {} {}", self.kind.log_name(), self.root.get(), kstr, name);
        if self.kind.is_type_based() {
            return cut(s);
        }
        if self.kind.is_enumval_based() {
            // libbpf prints the enumerator at raw[0] even for a spec that
            // matched nothing (raw[0] is then 0: the first enumerator).
            if let Some((_, t)) = skip_mods(btf, self.root) {
                let i = self.raw[0] as usize;
                if let Some((n, v)) = types::enumerator(&t, i) {
                    let n = String::from_utf8_lossy(types::str_at(btf, n)).into_owned();
                    let _ = match (t.kind(), t.kflag()) {
                        (Kind::Enum, true) => write!(s, "::{n} = {}", v as i32),
                        (Kind::Enum, false) => write!(s, "::{n} = {}", v as u32),
                        (_, true) => write!(s, "::{n} = {}", v as i64),
                        (_, false) => write!(s, "::{n} = {v}"),
                    };
                }
            }
            return cut(s);
        }
        if self.kind.is_field_based() {
            for (i, a) in self.accessors().iter().enumerate() {
                if let Some(n) = a.name {
                    let _ = write!(s, ".{}", String::from_utf8_lossy(types::str_at(btf, n)));
                } else if i > 0 || a.idx > 0 {
                    let _ = write!(s, "[{}]", a.idx as u32);
                }
            }
            s.push_str(" (");
            for (i, r) in self.raw().iter().enumerate() {
                let _ = write!(s, "{}{}", if i == 0 { "" } else { ":" }, r);
            }
            let b = self.bit_offset;
            let _ = if !b.is_multiple_of(8) {
                write!(s, " @ offset {}.{})", b / 8, b % 8)
            } else {
                write!(s, " @ offset {})", b / 8)
            };
        }
        cut(s)
    }

    /// The access path for people: `struct task_struct.__state`,
    /// `struct sk_buff.cb[2]`, `enum bpf_func_id::BPF_FUNC_x`.
    pub fn path(&self) -> String {
        let btf = self.btf;
        let mut s = match types::type_of(btf, self.root) {
            Some(t) => format!("{} {}", types::kind_str(&t), types::show(types::name(btf, &t))),
            None => format!("[{}]", self.root.get()),
        };
        if self.kind.is_enumval_based() {
            if let Some(n) = self.acc[0].name {
                let _ = write!(s, "::{}", String::from_utf8_lossy(types::str_at(btf, n)));
            }
        } else if self.kind.is_field_based() {
            for (i, a) in self.accessors().iter().enumerate() {
                if let Some(n) = a.name {
                    let _ = write!(s, ".{}", String::from_utf8_lossy(types::str_at(btf, n)));
                } else if i > 0 || a.idx > 0 {
                    let _ = write!(s, "[{}]", a.idx);
                }
            }
        }
        s
    }
}

fn cut(mut s: String) -> String {
    if s.len() > 255 {
        let mut n = 255;
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s.truncate(n);
    }
    s
}

/// Parses C `%d` at the start of `s` as `sscanf` does: leading white
/// space, an optional sign, digits. Returns the value and bytes used.
/// Values outside `i32` are refused (glibc's result there is not one to
/// copy).
fn scan_int(s: &[u8]) -> Option<(i32, usize)> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v * 10 + (s[i] - b'0') as i64;
        if v > i32::MAX as i64 + 1 {
            return None;
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    let v = if neg { -v } else { v };
    i32::try_from(v).ok().map(|v| (v, i))
}

/// Why a local spec did not parse, beyond the errno.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseFault {
    /// libbpf warns that the path runs into a type of this kind; the rest
    /// of the message is the errno alone.
    UnexpectedKind {
        at: usize,
        id: TypeId,
        kind: &'static str,
    },
    Errno,
}

/// Parses the local spec of a relocation (`bpf_core_parse_spec`).
pub fn parse<'b>(btf: &'b Btf, root: TypeId, access: &[u8], kind: ReloKind) -> Result<Spec<'b>, (i32, ParseFault)> {
    let einval = Err((errno::EINVAL, ParseFault::Errno));
    if access.is_empty() || access[0] == b':' {
        return einval;
    }
    let mut spec = Spec::new(btf, 8, root, kind);
    if kind.is_type_based() {
        return if access == b"0" { Ok(spec) } else { einval };
    }
    let mut s = access;
    while !s.is_empty() {
        if s[0] == b':' {
            s = &s[1..];
        }
        let Some((v, used)) = scan_int(s) else {
            return einval;
        };
        if spec.raw_len == SPEC_MAX_LEN {
            return Err((errno::E2BIG, ParseFault::Errno));
        }
        // libbpf 1.1 goes on with a negative index and reads outside the
        // type's members; later versions refuse it, as this does.
        if v < 0 {
            return einval;
        }
        s = &s[used..];
        spec.push_raw(v);
    }
    if spec.raw_len == 0 {
        return einval;
    }
    let Some((mut id, t)) = skip_mods(btf, root) else {
        return einval;
    };
    let first = spec.raw[0];
    spec.acc[0] = Accessor {
        type_id: id,
        idx: first,
        name: None,
    };
    spec.len = 1;
    if kind.is_enumval_based() {
        if !is_any_enum(&t) || spec.raw_len > 1 || first as u32 >= t.vlen() {
            return einval;
        }
        spec.acc[0].name = types::enumerator(&t, first as usize).map(|(n, _)| n);
        return Ok(spec);
    }
    if !kind.is_field_based() {
        return einval;
    }
    let sz = spec.size_of(id).map_err(|e| (e, ParseFault::Errno))?;
    spec.bit_offset = (first as i64 * sz as i64 * 8) as u32;
    for i in 1..spec.raw_len {
        let Some((rid, t)) = skip_mods(btf, id) else {
            return einval;
        };
        id = rid;
        let a = spec.raw[i];
        if is_composite(&t) {
            if a as u32 >= t.vlen() {
                return einval;
            }
            let (name_off, mtype, bit_off, _) = types::member(&t, a as usize).expect("index below vlen");
            spec.bit_offset = spec.bit_offset.wrapping_add(bit_off);
            if name_off != 0 {
                if types::str_at(btf, name_off).is_empty() {
                    return einval;
                }
                spec.acc[spec.len] = Accessor {
                    type_id: id,
                    idx: a,
                    name: Some(name_off),
                };
                spec.len += 1;
            }
            id = mtype;
        } else if t.kind() == Kind::Array {
            let (elem, _, nelems) = t.array();
            let Some((eid, _)) = skip_mods(btf, elem) else {
                return einval;
            };
            id = eid;
            let flex = is_flex(btf, &spec.acc[spec.len - 1], nelems);
            if !flex && a as u32 >= nelems {
                return einval;
            }
            spec.acc[spec.len] = Accessor {
                type_id: id,
                idx: a,
                name: None,
            };
            spec.len += 1;
            let sz = spec.size_of(id).map_err(|e| (e, ParseFault::Errno))?;
            spec.bit_offset = spec.bit_offset.wrapping_add((a as i64 * sz as i64 * 8) as u32);
        } else {
            return Err((
                errno::EINVAL,
                ParseFault::UnexpectedKind {
                    at: i,
                    id,
                    kind: types::kind_str(&t),
                },
            ));
        }
    }
    Ok(spec)
}

/// An array is flexible when it is the last, named member of its struct
/// and has no elements.
fn is_flex(btf: &Btf, prev: &Accessor, nelems: u32) -> bool {
    if prev.name.is_none() || nelems > 0 {
        return false;
    }
    types::type_of(btf, prev.type_id).is_some_and(|t| prev.idx as i64 == t.vlen() as i64 - 1)
}

/// Matches the local spec against candidate `cand` of `targ` into `out`
/// (`bpf_core_spec_match`): 1 for a match, 0 for none, or an errno.
pub fn spec_match(local: &Spec<'_>, targ: &mut Spec<'_>, log: &mut Log) -> Result<bool, i32> {
    let kind = local.kind;
    let cand = targ.root;
    if kind.is_type_based() {
        return if kind == ReloKind::TypeMatches {
            super::compat::types_match(local.btf, local.root, targ.btf, cand, log)
        } else {
            super::compat::types_are_compat(local.btf, local.root, targ.btf, cand, log)
        };
    }
    let tbtf = targ.btf;
    if kind.is_enumval_based() {
        let Some((tid, t)) = skip_mods(tbtf, cand) else {
            return Ok(false);
        };
        if !is_any_enum(&t) {
            return Ok(false);
        }
        let lname = types::str_at(local.btf, local.acc[0].name.unwrap_or(0));
        let lname = types::essential(lname);
        for i in 0..t.vlen() as usize {
            let (n, _) = types::enumerator(&t, i).expect("index below vlen");
            if types::essential(types::str_at(tbtf, n)) == lname {
                targ.acc[0] = Accessor {
                    type_id: tid,
                    idx: i as i32,
                    name: Some(n),
                };
                targ.len = 1;
                targ.push_raw(i as i32);
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if !kind.is_field_based() {
        return Err(errno::EINVAL);
    }
    let mut tid = cand;
    for i in 0..local.len {
        let la = local.acc[i];
        let Some((rid, t)) = skip_mods(tbtf, tid) else {
            return Err(errno::EINVAL);
        };
        tid = rid;
        if la.name.is_some() {
            match match_member(local, &la, targ, tid)? {
                Some(next) => tid = next,
                None => return Ok(false),
            }
        } else {
            if i > 0 {
                if t.kind() != Kind::Array {
                    return Ok(false);
                }
                let (elem, _, nelems) = t.array();
                let flex = is_flex(tbtf, &targ.acc[i - 1], nelems);
                if !flex && la.idx as u32 >= nelems {
                    return Ok(false);
                }
                let Some((eid, _)) = skip_mods(tbtf, elem) else {
                    return Err(errno::EINVAL);
                };
                tid = eid;
            }
            if targ.raw_len == SPEC_MAX_LEN {
                return Err(errno::E2BIG);
            }
            targ.acc[i] = Accessor {
                type_id: tid,
                idx: la.idx,
                name: None,
            };
            targ.len += 1;
            targ.push_raw(la.idx);
            let sz = targ.size_of(tid)?;
            let add = (la.idx).wrapping_mul(sz as i32).wrapping_mul(8);
            targ.bit_offset = targ.bit_offset.wrapping_add(add as u32);
        }
    }
    Ok(true)
}

/// Finds the local accessor's member by exact name in the target struct
/// `tid`, looking through anonymous members depth first
/// (`bpf_core_match_member`). `Some(next type)` when found and compatible.
fn match_member(local: &Spec<'_>, la: &Accessor, targ: &mut Spec<'_>, tid: TypeId) -> Result<Option<TypeId>, i32> {
    let tbtf = targ.btf;
    let Some((tid, t)) = skip_mods(tbtf, tid) else {
        return Err(errno::EINVAL);
    };
    if !is_composite(&t) {
        return Ok(None);
    }
    let lt = types::type_of(local.btf, la.type_id).ok_or(errno::EINVAL)?;
    let (lname_off, ltype, _, _) = types::member(&lt, la.idx as usize).ok_or(errno::EINVAL)?;
    let lname = types::str_at(local.btf, lname_off);
    for i in 0..t.vlen() as usize {
        let (tname_off, ttype, bit_off, _) = types::member(&t, i).expect("index below vlen");
        if targ.raw_len == SPEC_MAX_LEN {
            return Err(errno::E2BIG);
        }
        targ.bit_offset = targ.bit_offset.wrapping_add(bit_off);
        targ.push_raw(i as i32);
        let tname = types::str_at(tbtf, tname_off);
        if tname.is_empty() {
            if let Some(next) = match_member(local, la, targ, ttype)? {
                return Ok(Some(next));
            }
        } else if tname == lname {
            targ.acc[targ.len] = Accessor {
                type_id: tid,
                idx: i as i32,
                name: Some(tname_off),
            };
            targ.len += 1;
            let ok = super::compat::fields_are_compat(local.btf, ltype, tbtf, ttype)?;
            if !ok {
                targ.len -= 1;
                return Ok(None);
            }
            return Ok(Some(ttype));
        }
        targ.bit_offset = targ.bit_offset.wrapping_sub(bit_off);
        targ.raw_len -= 1;
    }
    Ok(None)
}
