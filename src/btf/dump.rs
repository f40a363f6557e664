//! Text renderings of a BTF as bpftool 7.1.0 writes them: `raw` (`bpftool
//! btf dump file X format raw`) and JSON (the same with `-j`), so that
//! diffs against bpftool's output are empty.

use std::io::{self, Write};

use super::{Btf, Kind, StrOff, Type, TypeId};

/// A name as bpftool shows it: `(anon)` for none, `(invalid)` for an
/// offset outside the string section.
fn name_bytes(btf: &Btf, off: StrOff) -> &[u8] {
    match off.0 {
        0 => b"(anon)",
        _ => btf.str_at(off).unwrap_or(b"(invalid)"),
    }
}

fn name_or_anon(btf: &Btf, off: StrOff) -> String {
    String::from_utf8_lossy(name_bytes(btf, off)).into_owned()
}

fn int_enc(e: u32) -> &'static str {
    match e {
        0 => "(none)",
        1 => "SIGNED",
        2 => "CHAR",
        4 => "BOOL",
        _ => "UNKN",
    }
}

fn func_linkage(l: u32) -> &'static str {
    match l {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "(unknown)",
    }
}

fn var_linkage(l: u32) -> &'static str {
    match l {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "(unknown)",
    }
}

/// Writes one type in bpftool's raw format (no trailing newline).
pub fn write_raw_type(out: &mut impl Write, btf: &Btf, id: TypeId, t: Type<'_>) -> io::Result<()> {
    let kind = t.kind();
    write!(out, "[{}] {} '{}'", id.0, kind.name(), name_or_anon(btf, t.name_off()))?;
    match kind {
        Kind::Int => write!(
            out,
            " size={} bits_offset={} nr_bits={} encoding={}",
            t.size(),
            t.int_offset(),
            t.int_bits(),
            int_enc(t.int_encoding())
        )?,
        Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::Typedef | Kind::TypeTag => {
            write!(out, " type_id={}", t.type_id().0)?
        }
        Kind::Array => {
            let (e, i, n) = t.array();
            write!(out, " type_id={} index_type_id={} nr_elems={}", e.0, i.0, n)?
        }
        Kind::Struct | Kind::Union => {
            write!(out, " size={} vlen={}", t.size(), t.vlen())?;
            for [n, ty, off] in t.triples() {
                let (bit_off, bit_sz) = if t.kflag() {
                    (off & 0xff_ffff, off >> 24)
                } else {
                    (off, 0)
                };
                write!(
                    out,
                    "\n\t'{}' type_id={} bits_offset={}",
                    name_or_anon(btf, StrOff::new(n)),
                    ty,
                    bit_off
                )?;
                if bit_sz != 0 {
                    write!(out, " bitfield_size={}", bit_sz)?;
                }
            }
        }
        Kind::Enum => {
            let signed = t.kflag();
            write!(
                out,
                " encoding={} size={} vlen={}",
                if signed { "SIGNED" } else { "UNSIGNED" },
                t.size(),
                t.vlen()
            )?;
            for [n, v] in t.pairs() {
                if signed {
                    write!(out, "\n\t'{}' val={}", name_or_anon(btf, StrOff::new(n)), v as i32)?;
                } else {
                    write!(out, "\n\t'{}' val={}", name_or_anon(btf, StrOff::new(n)), v)?;
                }
            }
        }
        Kind::Enum64 => {
            let signed = t.kflag();
            write!(
                out,
                " encoding={} size={} vlen={}",
                if signed { "SIGNED" } else { "UNSIGNED" },
                t.size(),
                t.vlen()
            )?;
            for [n, lo, hi] in t.triples() {
                let v = ((hi as u64) << 32) | lo as u64;
                if signed {
                    write!(out, "\n\t'{}' val={}LL", name_or_anon(btf, StrOff::new(n)), v as i64)?;
                } else {
                    write!(out, "\n\t'{}' val={}ULL", name_or_anon(btf, StrOff::new(n)), v)?;
                }
            }
        }
        Kind::Fwd => write!(out, " fwd_kind={}", if t.kflag() { "union" } else { "struct" })?,
        Kind::Func => write!(out, " type_id={} linkage={}", t.type_id().0, func_linkage(t.vlen()))?,
        Kind::FuncProto => {
            write!(out, " ret_type_id={} vlen={}", t.type_id().0, t.vlen())?;
            for [n, ty] in t.pairs() {
                write!(out, "\n\t'{}' type_id={}", name_or_anon(btf, StrOff::new(n)), ty)?;
            }
        }
        Kind::Var => write!(out, " type_id={}, linkage={}", t.type_id().0, var_linkage(t.extra()))?,
        Kind::Datasec => {
            write!(out, " size={} vlen={}", t.size(), t.vlen())?;
            for [ty, off, sz] in t.triples() {
                let (vk, vn) = match btf.get(TypeId::new(ty)) {
                    Some(v) => (v.kind().name(), name_or_anon(btf, v.name_off())),
                    None => ("UNKNOWN", "(invalid)".to_string()),
                };
                write!(out, "\n\ttype_id={} offset={} size={} ({} '{}')", ty, off, sz, vk, vn)?;
            }
        }
        Kind::Float => write!(out, " size={}", t.size())?,
        Kind::DeclTag => write!(out, " type_id={} component_idx={}", t.type_id().0, t.extra() as i32)?,
        Kind::Unkn => {}
    }
    Ok(())
}

/// All own types of `btf` in bpftool's raw format, one per line.
pub fn write_raw(out: &mut impl Write, btf: &Btf) -> io::Result<()> {
    for id in btf.own_ids() {
        write_raw_type(out, btf, id, btf.ty(id))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

pub fn raw_string(btf: &Btf) -> String {
    let mut v = Vec::new();
    write_raw(&mut v, btf).expect("writing to memory");
    String::from_utf8(v).expect("dump is UTF-8")
}

/// A JSON string as bpftool's JSON writer writes it: tab, newline, CR,
/// form feed, backspace and `"` escaped, other bytes as they are. Two
/// deliberate differences keep the text JSON: bpftool 7.1.0 writes a
/// backslash as `\n` and a `'` as `\'`; here they are `\\` and `'` (no
/// C name has either).
fn json_str(out: &mut impl Write, s: &[u8]) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut from = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc: &[u8] = match c {
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            0x0c => b"\\f",
            0x08 => b"\\b",
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            _ => continue,
        };
        out.write_all(&s[from..i])?;
        out.write_all(esc)?;
        from = i + 1;
    }
    out.write_all(&s[from..])?;
    out.write_all(b"\"")
}

/// A type's name as bpftool shows it (`(anon)`, `(invalid)`), JSON-quoted.
fn json_name(out: &mut impl Write, btf: &Btf, off: u32) -> io::Result<()> {
    json_str(out, name_bytes(btf, StrOff::new(off)))
}

/// One type as bpftool's `btf dump file X -j` writes it: an object with
/// `id`, `kind`, `name`, then the kind's fields in bpftool's order (the raw
/// format's, as numbers and strings; member, value, parameter and variable
/// lists as arrays of objects).
pub fn write_json_type(out: &mut impl Write, btf: &Btf, id: TypeId, t: Type<'_>) -> io::Result<()> {
    let kind = t.kind();
    write!(out, "{{\"id\":{},\"kind\":\"{}\",\"name\":", id.0, kind.name())?;
    json_name(out, btf, t.name_off().0)?;
    match kind {
        Kind::Int => write!(
            out,
            ",\"size\":{},\"bits_offset\":{},\"nr_bits\":{},\"encoding\":\"{}\"",
            t.size(),
            t.int_offset(),
            t.int_bits(),
            int_enc(t.int_encoding())
        )?,
        Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::Typedef | Kind::TypeTag => {
            write!(out, ",\"type_id\":{}", t.type_id().0)?
        }
        Kind::Array => {
            let (e, i, n) = t.array();
            write!(out, ",\"type_id\":{},\"index_type_id\":{},\"nr_elems\":{}", e.0, i.0, n)?
        }
        Kind::Struct | Kind::Union => {
            write!(out, ",\"size\":{},\"vlen\":{},\"members\":[", t.size(), t.vlen())?;
            for (i, [n, ty, off]) in t.triples().enumerate() {
                let (bit_off, bit_sz) = if t.kflag() {
                    (off & 0xff_ffff, off >> 24)
                } else {
                    (off, 0)
                };
                out.write_all(if i == 0 { b"{\"name\":" } else { b",{\"name\":" })?;
                json_name(out, btf, n)?;
                write!(out, ",\"type_id\":{ty},\"bits_offset\":{bit_off}")?;
                if bit_sz != 0 {
                    write!(out, ",\"bitfield_size\":{bit_sz}")?;
                }
                out.write_all(b"}")?;
            }
            out.write_all(b"]")?;
        }
        Kind::Enum | Kind::Enum64 => {
            let signed = t.kflag();
            write!(
                out,
                ",\"encoding\":\"{}\",\"size\":{},\"vlen\":{},\"values\":[",
                if signed { "SIGNED" } else { "UNSIGNED" },
                t.size(),
                t.vlen()
            )?;
            let values: Vec<(u32, u64)> = if kind == Kind::Enum {
                t.pairs().map(|[n, v]| (n, v as u64)).collect()
            } else {
                t.triples()
                    .map(|[n, lo, hi]| (n, ((hi as u64) << 32) | lo as u64))
                    .collect()
            };
            for (i, (n, v)) in values.into_iter().enumerate() {
                out.write_all(if i == 0 { b"{\"name\":" } else { b",{\"name\":" })?;
                json_name(out, btf, n)?;
                // Plain integers, as bpftool writes them (past 2^53 too). A
                // 32-bit value is a signed field there, widened with its sign
                // even for an unsigned enum: 4294967295 is written as
                // 18446744073709551615.
                match (signed, kind) {
                    (true, Kind::Enum) => write!(out, ",\"val\":{}}}", v as u32 as i32)?,
                    (false, Kind::Enum) => write!(out, ",\"val\":{}}}", v as u32 as i32 as i64 as u64)?,
                    (true, _) => write!(out, ",\"val\":{}}}", v as i64)?,
                    (false, _) => write!(out, ",\"val\":{v}}}")?,
                }
            }
            out.write_all(b"]")?;
        }
        Kind::Fwd => write!(out, ",\"fwd_kind\":\"{}\"", if t.kflag() { "union" } else { "struct" })?,
        Kind::Func => write!(
            out,
            ",\"type_id\":{},\"linkage\":\"{}\"",
            t.type_id().0,
            func_linkage(t.vlen())
        )?,
        Kind::FuncProto => {
            write!(
                out,
                ",\"ret_type_id\":{},\"vlen\":{},\"params\":[",
                t.type_id().0,
                t.vlen()
            )?;
            for (i, [n, ty]) in t.pairs().enumerate() {
                out.write_all(if i == 0 { b"{\"name\":" } else { b",{\"name\":" })?;
                json_name(out, btf, n)?;
                write!(out, ",\"type_id\":{ty}}}")?;
            }
            out.write_all(b"]")?;
        }
        Kind::Var => write!(
            out,
            ",\"type_id\":{},\"linkage\":\"{}\"",
            t.type_id().0,
            var_linkage(t.extra())
        )?,
        Kind::Datasec => {
            write!(out, ",\"size\":{},\"vlen\":{},\"vars\":[", t.size(), t.vlen())?;
            for (i, [ty, off, sz]) in t.triples().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                write!(out, "{sep}{{\"type_id\":{ty},\"offset\":{off},\"size\":{sz}}}")?;
            }
            out.write_all(b"]")?;
        }
        Kind::Float => write!(out, ",\"size\":{}", t.size())?,
        Kind::DeclTag => write!(
            out,
            ",\"type_id\":{},\"component_idx\":{}",
            t.type_id().0,
            t.extra() as i32
        )?,
        Kind::Unkn => {}
    }
    out.write_all(b"}")
}

/// `bpftool btf dump file X -j` of every own type: `{"types":[...]}` on one
/// line (ids in order), then a newline.
pub fn write_json(out: &mut impl Write, btf: &Btf) -> io::Result<()> {
    write_json_ids(out, btf, btf.own_ids())
}

/// [`write_json`] of the types `ids`, in that order.
pub fn write_json_ids(out: &mut impl Write, btf: &Btf, ids: impl IntoIterator<Item = TypeId>) -> io::Result<()> {
    out.write_all(b"{\"types\":[")?;
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_json_type(out, btf, id, btf.ty(id))?;
    }
    out.write_all(b"]}\n")?;
    Ok(())
}
