//! Text renderings of a BTF: `raw` (the same lines as `bpftool btf dump file
//! X format raw`, so diffs against bpftool output are empty) and `json`.

use std::io::{self, Write};

use serde_json::{Value, json};

use super::{Btf, Kind, StrOff, Type, TypeId};

fn name_or_anon(btf: &Btf, off: StrOff) -> String {
    if off.0 == 0 {
        return "(anon)".to_string();
    }
    match btf.str_at(off) {
        Some(s) => String::from_utf8_lossy(s).into_owned(),
        None => "(invalid)".to_string(),
    }
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
                    name_or_anon(btf, StrOff(n)),
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
                    write!(out, "\n\t'{}' val={}", name_or_anon(btf, StrOff(n)), v as i32)?;
                } else {
                    write!(out, "\n\t'{}' val={}", name_or_anon(btf, StrOff(n)), v)?;
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
                    write!(out, "\n\t'{}' val={}LL", name_or_anon(btf, StrOff(n)), v as i64)?;
                } else {
                    write!(out, "\n\t'{}' val={}ULL", name_or_anon(btf, StrOff(n)), v)?;
                }
            }
        }
        Kind::Fwd => write!(out, " fwd_kind={}", if t.kflag() { "union" } else { "struct" })?,
        Kind::Func => write!(out, " type_id={} linkage={}", t.type_id().0, func_linkage(t.vlen()))?,
        Kind::FuncProto => {
            write!(out, " ret_type_id={} vlen={}", t.type_id().0, t.vlen())?;
            for [n, ty] in t.pairs() {
                write!(out, "\n\t'{}' type_id={}", name_or_anon(btf, StrOff(n)), ty)?;
            }
        }
        Kind::Var => write!(out, " type_id={}, linkage={}", t.type_id().0, var_linkage(t.extra()))?,
        Kind::Datasec => {
            write!(out, " size={} vlen={}", t.size(), t.vlen())?;
            for [ty, off, sz] in t.triples() {
                let (vk, vn) = match btf.get(TypeId(ty)) {
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

fn s(btf: &Btf, off: u32) -> Value {
    Value::String(btf.name(StrOff(off)).into_owned())
}

/// One type as a JSON object (field names follow the format's own terms).
pub fn type_json(btf: &Btf, id: TypeId, t: Type<'_>) -> Value {
    let kind = t.kind();
    let mut o = json!({ "id": id.0, "kind": kind.name(), "name": s(btf, t.name_off().0) });
    let m = o.as_object_mut().expect("object");
    match kind {
        Kind::Int => {
            m.insert("size".into(), t.size().into());
            m.insert("bits_offset".into(), t.int_offset().into());
            m.insert("nr_bits".into(), t.int_bits().into());
            m.insert("encoding".into(), int_enc(t.int_encoding()).into());
        }
        Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::Typedef | Kind::TypeTag => {
            m.insert("type_id".into(), t.type_id().0.into());
            if kind == Kind::TypeTag {
                m.insert("kind_flag".into(), (t.kflag() as u32).into());
            }
        }
        Kind::Array => {
            let (e, i, n) = t.array();
            m.insert("type_id".into(), e.0.into());
            m.insert("index_type_id".into(), i.0.into());
            m.insert("nr_elems".into(), n.into());
        }
        Kind::Struct | Kind::Union => {
            m.insert("size".into(), t.size().into());
            m.insert("kind_flag".into(), (t.kflag() as u32).into());
            let members: Vec<Value> = t
                .triples()
                .map(|[n, ty, off]| {
                    let (bo, bs) = if t.kflag() {
                        (off & 0xff_ffff, off >> 24)
                    } else {
                        (off, 0)
                    };
                    json!({"name": s(btf, n), "type_id": ty, "bits_offset": bo, "bitfield_size": bs})
                })
                .collect();
            m.insert("members".into(), members.into());
        }
        Kind::Enum => {
            m.insert("size".into(), t.size().into());
            m.insert("signed".into(), t.kflag().into());
            let vals: Vec<Value> = t
                .pairs()
                .map(|[n, v]| {
                    let v: i64 = if t.kflag() { v as i32 as i64 } else { v as i64 };
                    json!({"name": s(btf, n), "val": v})
                })
                .collect();
            m.insert("values".into(), vals.into());
        }
        Kind::Enum64 => {
            m.insert("size".into(), t.size().into());
            m.insert("signed".into(), t.kflag().into());
            let vals: Vec<Value> = t
                .triples()
                .map(|[n, lo, hi]| {
                    let v = ((hi as u64) << 32) | lo as u64;
                    if t.kflag() {
                        json!({"name": s(btf, n), "val": v as i64})
                    } else {
                        json!({"name": s(btf, n), "val": v})
                    }
                })
                .collect();
            m.insert("values".into(), vals.into());
        }
        Kind::Fwd => {
            m.insert("fwd_kind".into(), (if t.kflag() { "union" } else { "struct" }).into());
        }
        Kind::Func => {
            m.insert("type_id".into(), t.type_id().0.into());
            m.insert("linkage".into(), func_linkage(t.vlen()).into());
        }
        Kind::FuncProto => {
            m.insert("ret_type_id".into(), t.type_id().0.into());
            let ps: Vec<Value> = t
                .pairs()
                .map(|[n, ty]| json!({"name": s(btf, n), "type_id": ty}))
                .collect();
            m.insert("params".into(), ps.into());
        }
        Kind::Var => {
            m.insert("type_id".into(), t.type_id().0.into());
            m.insert("linkage".into(), var_linkage(t.extra()).into());
        }
        Kind::Datasec => {
            m.insert("size".into(), t.size().into());
            let vs: Vec<Value> = t
                .triples()
                .map(|[ty, off, sz]| json!({"type_id": ty, "offset": off, "size": sz}))
                .collect();
            m.insert("vars".into(), vs.into());
        }
        Kind::Float => {
            m.insert("size".into(), t.size().into());
        }
        Kind::DeclTag => {
            m.insert("type_id".into(), t.type_id().0.into());
            m.insert("component_idx".into(), (t.extra() as i32).into());
            m.insert("kind_flag".into(), (t.kflag() as u32).into());
        }
        Kind::Unkn => {}
    }
    o
}

/// `{"types": [...]}` with every own type, streamed one type per line.
pub fn write_json(out: &mut impl Write, btf: &Btf) -> io::Result<()> {
    out.write_all(b"{\"types\": [\n")?;
    let mut first = true;
    for id in btf.own_ids() {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, &type_json(btf, id, btf.ty(id)))?;
    }
    out.write_all(b"\n]}\n")?;
    Ok(())
}
