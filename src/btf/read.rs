//! Reading raw BTF bytes (either byte order) into the model.
//!
//! Structural faults are errors; the kernel's stricter rules (valid C names,
//! member offsets within the struct, DATASEC order) are not checked here —
//! the reference emits files that break them and those must round-trip.

use std::sync::Arc;

use thiserror::Error;

use super::layout::{HDR_LEN_2026, kind_in_range};
use super::{Btf, Endian, Format, HDR_LEN, Kind, KindLayout, Layout, StrTab};

/// A structural fault in a BTF blob, with the byte offset where it was found.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReadError {
    #[error("truncated: {len} bytes, the header needs 24")]
    TruncatedHeader { len: usize },
    #[error("bad magic {magic:#06x} at offset 0 (expected 0xeb9f in either byte order)")]
    BadMagic { magic: u16 },
    #[error("unsupported version {0} at offset 2 (expected 1)")]
    BadVersion(u8),
    #[error("header flags {0:#04x} at offset 3 (must be 0)")]
    BadFlags(u8),
    #[error("header length {0} at offset 4 is smaller than 24 or past the end of the file")]
    BadHdrLen(u32),
    #[error("{what} section [{off}, +{len}) lies outside the {size}-byte file")]
    SectionOutOfFile {
        what: &'static str,
        off: u64,
        len: u64,
        size: usize,
    },
    #[error("type section offset {0} is not 4-byte aligned")]
    MisalignedTypes(u32),
    #[error("type section length {0} is not a multiple of 4")]
    TypeLenNotMultipleOf4(u32),
    #[error("type section does not end before the string section starts")]
    Overlap,
    #[error(
        "header byte {at} is {value:#04x}: a header field this reader does not know (past the 32 bytes of BTF 2026)"
    )]
    UnknownHeaderData { at: u32, value: u8 },
    #[error("layout section [{off}, +{len}) must be 4-byte aligned and lie between the types and the strings")]
    LayoutPlacement { off: u32, len: u32 },
    #[error("layout section length {0} is not a multiple of 4 (one entry per kind)")]
    LayoutLen(u32),
    #[error("layout section: kind {kind} has {what} {value}, not a multiple of 4")]
    LayoutUnaligned { kind: u32, what: &'static str, value: u8 },
    #[error(
        "layout section: kind {kind} ({name}) is described as {info_sz}+{elem_sz}×vlen bytes, but its records are {want_info}+{want_elem}×vlen"
    )]
    LayoutDisagrees {
        kind: u32,
        name: &'static str,
        info_sz: u8,
        elem_sz: u8,
        want_info: u8,
        want_elem: u8,
    },
    #[error(
        "layout section: kind {kind} has flags {flags:#06x}; BTF 2026 defines none, so its records cannot be read safely"
    )]
    LayoutFlags { kind: u32, flags: u16 },
    #[error("type [{id}] at byte {off}: unknown kind {kind}")]
    UnknownKind { id: u32, off: usize, kind: u32 },
    #[error("type [{id}] at byte {off}: record runs past the end of the type section")]
    TruncatedType { id: u32, off: usize },
    #[error("type [{id}] at byte {off}: references type id {target}, but the last id is {max}")]
    TypeIdOutOfRange { id: u32, off: usize, target: u32, max: u32 },
    #[error("type [{id}] at byte {off}: string offset {str_off} is outside the string section (end {end})")]
    StrOffOutOfRange {
        id: u32,
        off: usize,
        str_off: u32,
        end: u32,
    },
    #[error("string section does not start with a NUL byte")]
    StringsNoLeadingNul,
    #[error("string section does not end with a NUL byte")]
    StringsNoTrailingNul,
    #[error("split BTF has byte order {split:?} but its base has {base:?}")]
    EndianMismatch { split: Endian, base: Endian },
    #[error("too many types ({0})")]
    TooManyTypes(u64),
    #[error("the base's and the split BTF's strings together ({0} bytes) pass 4 GiB")]
    TooManyStrings(u64),
}

struct Rd<'a> {
    b: &'a [u8],
    big: bool,
}

impl Rd<'_> {
    #[inline]
    fn u32(&self, off: usize) -> u32 {
        let a = [self.b[off], self.b[off + 1], self.b[off + 2], self.b[off + 3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
}

/// Header fields, in host order.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub endian: Endian,
    pub version: u8,
    pub flags: u8,
    pub hdr_len: u32,
    pub type_off: u32,
    pub type_len: u32,
    pub str_off: u32,
    pub str_len: u32,
    /// BTF 2026 (a header of 32 bytes or more); 0 in a shorter header.
    pub layout_off: u32,
    pub layout_len: u32,
}

pub fn parse_header(data: &[u8]) -> Result<Header, ReadError> {
    if data.len() < HDR_LEN as usize {
        return Err(ReadError::TruncatedHeader { len: data.len() });
    }
    let endian = match [data[0], data[1]] {
        [0x9f, 0xeb] => Endian::Little,
        [0xeb, 0x9f] => Endian::Big,
        m => {
            return Err(ReadError::BadMagic {
                magic: u16::from_le_bytes(m),
            });
        }
    };
    let rd = Rd {
        b: data,
        big: endian == Endian::Big,
    };
    let h = Header {
        endian,
        version: data[2],
        flags: data[3],
        hdr_len: rd.u32(4),
        type_off: rd.u32(8),
        type_len: rd.u32(12),
        str_off: rd.u32(16),
        str_len: rd.u32(20),
        layout_off: 0,
        layout_len: 0,
    };
    if h.version != 1 {
        return Err(ReadError::BadVersion(h.version));
    }
    if h.flags != 0 {
        return Err(ReadError::BadFlags(h.flags));
    }
    if h.hdr_len < HDR_LEN || h.hdr_len as usize > data.len() {
        return Err(ReadError::BadHdrLen(h.hdr_len));
    }
    // A header shorter than 32 bytes has no layout fields (or only
    // `layout_off`, as the kernel reads a short one: the rest as zero).
    let mut h = h;
    if h.hdr_len >= 28 {
        h.layout_off = rd.u32(24);
    }
    if h.hdr_len >= HDR_LEN_2026 {
        h.layout_len = rd.u32(28);
    }
    // Past the fields we know, a newer header may only carry zeros (the
    // kernel's rule: a field it cannot read must not be in use).
    if let Some(at) = (HDR_LEN_2026..h.hdr_len).find(|&i| data[i as usize] != 0) {
        return Err(ReadError::UnknownHeaderData {
            at,
            value: data[at as usize],
        });
    }
    Ok(h)
}

/// The layout section, validated: entries for the kinds this crate knows
/// must describe them as it reads them, and no entry may use flags.
fn parse_layout(data: &[u8], h: &Header) -> Result<Option<Layout>, ReadError> {
    if h.layout_len == 0 {
        return Ok(None);
    }
    let placement = ReadError::LayoutPlacement {
        off: h.layout_off,
        len: h.layout_len,
    };
    let end = h.layout_off as u64 + h.layout_len as u64;
    if !h.layout_off.is_multiple_of(4)
        || (h.layout_off as u64) < h.type_off as u64 + h.type_len as u64
        || end > h.str_off as u64
    {
        return Err(placement);
    }
    if !h.layout_len.is_multiple_of(4) {
        return Err(ReadError::LayoutLen(h.layout_len));
    }
    let at = h.hdr_len as u64 + h.layout_off as u64;
    if at + h.layout_len as u64 > data.len() as u64 {
        return Err(ReadError::SectionOutOfFile {
            what: "layout",
            off: at,
            len: h.layout_len as u64,
            size: data.len(),
        });
    }
    let bytes = &data[at as usize..(at + h.layout_len as u64) as usize];
    let mut entries = Vec::with_capacity(bytes.len() / 4);
    for (k, e) in bytes.chunks_exact(4).enumerate() {
        let kind = k as u32;
        let flags = match h.endian {
            Endian::Little => u16::from_le_bytes([e[2], e[3]]),
            Endian::Big => u16::from_be_bytes([e[2], e[3]]),
        };
        let l = KindLayout {
            info_sz: e[0],
            elem_sz: e[1],
            flags,
        };
        if l.flags != 0 {
            return Err(ReadError::LayoutFlags { kind, flags });
        }
        for (what, value) in [("info_sz", l.info_sz), ("elem_sz", l.elem_sz)] {
            if !value.is_multiple_of(4) {
                return Err(ReadError::LayoutUnaligned { kind, what, value });
            }
        }
        if let Some(known) = Kind::from_u8(k as u8).filter(|_| k <= super::KIND_MAX as usize) {
            let want = KindLayout::of(known);
            if (l.info_sz, l.elem_sz) != (want.info_sz, want.elem_sz) {
                return Err(ReadError::LayoutDisagrees {
                    kind,
                    name: known.name(),
                    info_sz: l.info_sz,
                    elem_sz: l.elem_sz,
                    want_info: want.info_sz,
                    want_elem: want.elem_sz,
                });
            }
        }
        entries.push(l);
    }
    Ok(Some(Layout::from_entries(entries)))
}

/// Parses a standalone BTF blob.
pub fn parse(data: &[u8]) -> Result<Btf, ReadError> {
    parse_split(data, None)
}

/// Parses a BTF blob; with `base`, as split BTF continuing it.
pub fn parse_split(data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf, ReadError> {
    let h = parse_header(data)?;
    let size = data.len();
    let body = h.hdr_len as u64;
    let t0 = body + h.type_off as u64;
    let s0 = body + h.str_off as u64;
    if t0 + h.type_len as u64 > size as u64 {
        return Err(ReadError::SectionOutOfFile {
            what: "type",
            off: t0,
            len: h.type_len as u64,
            size,
        });
    }
    if s0 + h.str_len as u64 > size as u64 {
        return Err(ReadError::SectionOutOfFile {
            what: "string",
            off: s0,
            len: h.str_len as u64,
            size,
        });
    }
    if h.type_off % 4 != 0 {
        return Err(ReadError::MisalignedTypes(h.type_off));
    }
    if h.type_len % 4 != 0 {
        return Err(ReadError::TypeLenNotMultipleOf4(h.type_len));
    }
    // libbpf requires the type section to end where (or before) strings begin.
    if h.type_off as u64 + h.type_len as u64 > h.str_off as u64 {
        return Err(ReadError::Overlap);
    }
    if let Some(b) = &base
        && b.endian() != h.endian
    {
        return Err(ReadError::EndianMismatch {
            split: h.endian,
            base: b.endian(),
        });
    }
    let strs = &data[s0 as usize..(s0 + h.str_len as u64) as usize];
    if base.is_none() && strs.first() != Some(&0) {
        return Err(ReadError::StringsNoLeadingNul);
    }
    if !strs.is_empty() && strs.last() != Some(&0) {
        return Err(ReadError::StringsNoTrailingNul);
    }
    let layout = parse_layout(data, &h)?;
    let base_layout = base.as_ref().and_then(|b| b.format().layout());
    let tsec = &data[t0 as usize..(t0 + h.type_len as u64) as usize];
    let rd = Rd {
        b: tsec,
        big: h.endian == Endian::Big,
    };
    let nwords = tsec.len() / 4;
    let words: Vec<u32> = if rd.big {
        tsec.chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else {
        tsec.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let start_id = base.as_ref().map(|b| b.type_count() + 1).unwrap_or(1);
    let start_str = base.as_ref().map(|b| b.strs_end()).unwrap_or(0);
    // Pass 1: record boundaries and kinds.
    let mut offs = Vec::with_capacity(nwords / 4);
    let mut w = 0usize;
    while w < nwords {
        let id = start_id + offs.len() as u32;
        let off = t0 as usize + w * 4;
        if w + 3 > nwords {
            return Err(ReadError::TruncatedType { id, off });
        }
        let info = super::Info(words[w + 1]);
        let kind = info.kind();
        let len = match Kind::from_u8(kind as u8) {
            Some(k) if k != Kind::Unkn => 3 + k.trailing_words(info.vlen() as u32) as usize,
            // A kind this crate does not know: stepped over by the layout
            // section (split BTF may rely on its base's, as libbpf's does).
            _ => match kind_in_range(kind)
                .then(|| layout.as_ref().or(base_layout))
                .flatten()
                .and_then(|l| l.record_words(kind, info.vlen()))
            {
                Some(len) => len,
                None => return Err(ReadError::UnknownKind { id, off, kind }),
            },
        };
        if w + len > nwords {
            return Err(ReadError::TruncatedType { id, off });
        }
        offs.push(w as u32);
        w += len;
    }
    if start_id as u64 + offs.len() as u64 > u32::MAX as u64 {
        return Err(ReadError::TooManyTypes(offs.len() as u64));
    }
    let max_id = start_id - 1 + offs.len() as u32;
    let str_end = start_str
        .checked_add(h.str_len)
        .ok_or(ReadError::TooManyStrings(start_str as u64 + h.str_len as u64))?;
    // Pass 2: references and string offsets in range.
    for (i, &o) in offs.iter().enumerate() {
        let e = offs.get(i + 1).map(|&e| e as usize).unwrap_or(nwords);
        let rec = &words[o as usize..e];
        let id = start_id + i as u32;
        let off = t0 as usize + o as usize * 4;
        let mut bad_ref = None;
        Btf::for_each_type_ref(rec, |r| {
            if r > max_id && bad_ref.is_none() {
                bad_ref = Some(r);
            }
        });
        if let Some(target) = bad_ref {
            return Err(ReadError::TypeIdOutOfRange {
                id,
                off,
                target,
                max: max_id,
            });
        }
        let mut bad_str = None;
        Btf::for_each_str_ref(rec, |s| {
            if s != 0 && s >= str_end && bad_str.is_none() {
                bad_str = Some(s);
            }
        });
        if let Some(str_off) = bad_str {
            return Err(ReadError::StrOffOutOfRange {
                id,
                off,
                str_off,
                end: str_end,
            });
        }
    }
    let strtab = StrTab::from_bytes(start_str, strs.to_vec(), base.clone());
    let mut btf = Btf::from_parts(words, offs, strtab, h.endian, base);
    btf.set_format(Format::read(h.hdr_len, layout));
    Ok(btf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::write::to_bytes;
    use crate::btf::{TypeId, make_info};

    fn sample() -> Vec<u8> {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let p = b.add_ref(Kind::Ptr, int);
        b.begin(Kind::Struct, b"s", 16, false);
        b.push_member(b"a", int, 0, 0);
        b.push_member(b"p", p, 64, 0);
        to_bytes(&b)
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        let b = parse(&bytes).unwrap();
        assert_eq!(b.type_count(), 3);
        assert_eq!(to_bytes(&b), bytes);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = sample();
        for n in 0..bytes.len() {
            assert!(parse(&bytes[..n]).is_err(), "prefix of {n} bytes accepted");
        }
    }

    #[test]
    fn structural_faults() {
        let good = sample();
        let mut bad = good.clone();
        bad[0] = 0;
        assert!(matches!(parse(&bad), Err(ReadError::BadMagic { .. })));
        let mut bad = good.clone();
        bad[2] = 2;
        assert_eq!(parse(&bad).unwrap_err(), ReadError::BadVersion(2));
        let mut bad = good.clone();
        bad[3] = 0x3b;
        assert_eq!(parse(&bad).unwrap_err(), ReadError::BadFlags(0x3b));
        let mut bad = good.clone();
        bad[4] = 8;
        assert_eq!(parse(&bad).unwrap_err(), ReadError::BadHdrLen(8));
        // kind 25 in the first type's info
        let mut bad = good.clone();
        bad[24 + 7] = 25;
        assert!(matches!(parse(&bad), Err(ReadError::UnknownKind { .. })));
        // PTR -> id 99
        let mut bad = good.clone();
        bad[24 + 16 + 8] = 99;
        assert!(matches!(
            parse(&bad),
            Err(ReadError::TypeIdOutOfRange { target: 99, .. })
        ));
        // name offset past the strings
        let mut bad = good.clone();
        bad[24] = 200;
        assert!(matches!(parse(&bad), Err(ReadError::StrOffOutOfRange { .. })));
        // type_len not a multiple of 4
        let mut bad = good.clone();
        bad[12] += 1;
        assert!(parse(&bad).is_err());
        // string section without its trailing NUL
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] = b'x';
        assert_eq!(parse(&bad).unwrap_err(), ReadError::StringsNoTrailingNul);
        // string section without its leading NUL
        let mut bad = good.clone();
        let so = 24 + u32::from_le_bytes(bad[16..20].try_into().unwrap()) as usize;
        bad[so] = b'x';
        assert_eq!(parse(&bad).unwrap_err(), ReadError::StringsNoLeadingNul);
        // string section longer than the file
        let mut bad = good.clone();
        bad[20] = 0xff;
        assert!(matches!(
            parse(&bad),
            Err(ReadError::SectionOutOfFile { what: "string", .. })
        ));
    }

    #[test]
    fn layout_faults() {
        let good = sample();
        let put = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        let type_len = u32::from_le_bytes(good[12..16].try_into().unwrap());
        // type_off not 4-byte aligned
        let mut bad = good.clone();
        put(&mut bad, 8, 2);
        assert_eq!(parse(&bad).unwrap_err(), ReadError::MisalignedTypes(2));
        // type section running into the strings
        let mut bad = good.clone();
        put(&mut bad, 16, type_len - 4);
        put(&mut bad, 20, 4);
        assert_eq!(parse(&bad).unwrap_err(), ReadError::Overlap);
        // type section past the end of the file
        let mut bad = good.clone();
        put(&mut bad, 12, 4096);
        assert!(matches!(
            parse(&bad),
            Err(ReadError::SectionOutOfFile { what: "type", .. })
        ));
        // a record whose vlen runs past the type section: STRUCT with vlen 9
        let mut bad = good.clone();
        bad[24 + 16 + 12 + 4] = 9;
        assert!(matches!(parse(&bad), Err(ReadError::TruncatedType { id: 3, .. })));
    }

    #[test]
    fn split_over_base_of_other_byte_order() {
        let base = Arc::new(parse(&sample()).unwrap());
        let mut split = Btf::new_split(base.clone());
        split.add_int(b"long", 8, 1);
        split.set_endian(Endian::Big);
        let bytes = to_bytes(&split);
        assert!(matches!(
            parse_split(&bytes, Some(base)),
            Err(ReadError::EndianMismatch { .. })
        ));
    }

    #[test]
    fn split_ids_and_strings_continue_the_base() {
        let base = Arc::new(parse(&sample()).unwrap());
        let mut split = Btf::new_split(base.clone());
        let l = split.add_int(b"long", 8, 1);
        split.add_ref(Kind::Ptr, TypeId::new(1));
        assert_eq!(l, TypeId::new(4));
        let bytes = to_bytes(&split);
        let back = parse_split(&bytes, Some(base.clone())).unwrap();
        assert_eq!(back.start_id(), 4);
        assert_eq!(back.name(back.ty(TypeId::new(4)).name_off()), "long");
        assert_eq!(back.name(back.ty(TypeId::new(1)).name_off()), "int");
        // split string section has no leading NUL
        assert_eq!(back.raw_strings(), b"long\0");
        // without its base, the split blob is not valid standalone BTF
        assert!(parse(&bytes).is_err());
    }

    /// A little-endian blob laid out by hand: a header of `hdr_len` bytes,
    /// the type words, the layout entries, the strings.
    fn blob(hdr_len: u32, types: &[u32], layout: &[[u8; 4]], strs: &[u8]) -> Vec<u8> {
        let type_len = types.len() as u32 * 4;
        let layout_len = layout.len() as u32 * 4;
        let mut b = vec![0x9f, 0xeb, 1, 0];
        for v in [hdr_len, 0, type_len, type_len + layout_len, strs.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        if hdr_len >= 32 {
            let off = if layout.is_empty() { 0 } else { type_len };
            b.extend_from_slice(&off.to_le_bytes());
            b.extend_from_slice(&layout_len.to_le_bytes());
        }
        b.resize(hdr_len as usize, 0);
        types.iter().for_each(|w| b.extend_from_slice(&w.to_le_bytes()));
        layout.iter().for_each(|e| b.extend_from_slice(e));
        b.extend_from_slice(strs);
        b
    }

    fn known_layout_bytes() -> Vec<[u8; 4]> {
        crate::btf::Layout::known()
            .entries()
            .iter()
            .map(|e| [e.info_sz, e.elem_sz, 0, 0])
            .collect()
    }

    #[test]
    fn btf_2026_round_trips_with_and_without_layout() {
        for layout in [false, true] {
            let mut b = parse(&sample()).unwrap();
            b.set_format(Format::btf_2026(layout));
            let bytes = to_bytes(&b);
            assert_eq!(&bytes[4..8], &32u32.to_le_bytes());
            let layout_len = u32::from_le_bytes(bytes[28..32].try_into().unwrap());
            assert_eq!(layout_len, if layout { 80 } else { 0 });
            let back = parse(&bytes).unwrap();
            assert_eq!(back.format(), b.format());
            assert_eq!(back.type_count(), 3);
            assert_eq!(to_bytes(&back), bytes);
            let mut be = back.clone();
            be.set_endian(Endian::Big);
            let bytes = to_bytes(&be);
            assert_eq!(to_bytes(&parse(&bytes).unwrap()), bytes);
        }
    }

    #[test]
    fn an_unknown_kind_is_stepped_over_by_the_layout() {
        // [1] int, [2] kind 20 (8 bytes of info, 4 per entry, vlen 2),
        // [3] a pointer to [1]: read only if [2] is sized right.
        let int = [1, make_info(Kind::Int, false, 0), 4, 32];
        let unknown = [5, (20 << 24) | 2, 1, 0xaaaa, 0xbbbb, 0xcccc, 0xdddd];
        let ptr = [0, make_info(Kind::Ptr, false, 0), 1];
        let types: Vec<u32> = [&int[..], &unknown, &ptr].concat();
        let mut layout = known_layout_bytes();
        layout.push([8, 4, 0, 0]);
        let strs = b"\0int\0new\0";
        let b = parse(&blob(32, &types, &layout, strs)).unwrap();
        assert_eq!(b.type_count(), 3);
        assert_eq!(b.unknown_kinds().collect::<Vec<_>>(), [(TypeId::new(2), 20)]);
        assert_eq!(b.ty(TypeId::new(3)).kind(), Kind::Ptr);
        assert_eq!(b.ty(TypeId::new(3)).type_id(), TypeId::new(1));
        assert_eq!(b.ty(TypeId::new(2)).words.len(), 7);
        assert_eq!(to_bytes(&b), blob(32, &types, &layout, strs));
        // without a layout entry for it, the kind cannot be read past
        let short = &layout[..20];
        assert!(matches!(
            parse(&blob(32, &types, short, strs)),
            Err(ReadError::UnknownKind { id: 2, kind: 20, .. })
        ));
        assert!(matches!(
            parse(&blob(24, &types, &[], strs)),
            Err(ReadError::UnknownKind { id: 2, kind: 20, .. })
        ));
        // split BTF without a section of its own uses its base's
        let base = Arc::new(parse(&blob(32, &int, &layout, b"\0int\0")).unwrap());
        let split_types: Vec<u32> = [&unknown[..]].concat();
        let split = parse_split(&blob(32, &split_types, &[], b"new\0"), Some(base)).unwrap();
        assert_eq!(split.unknown_kinds().collect::<Vec<_>>(), [(TypeId::new(2), 20)]);
    }

    #[test]
    fn more_than_65535_members_keep_their_count() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        b.begin(Kind::Struct, b"wide", 4 * 70_000, false);
        for i in 0..70_000u32 {
            b.push_member(b"", int, i * 32, 0);
        }
        b.set_format(Format::btf_2026(true));
        assert!(70_000 <= b.format().vlen_limit());
        let bytes = to_bytes(&b);
        let back = parse(&bytes).unwrap();
        let s = back.ty(TypeId::new(2));
        assert_eq!(s.vlen(), 70_000);
        assert_eq!(s.triples().len(), 70_000);
        // An original-format reader takes 16 bits and sees 4,464 members,
        // and a kind byte with bits it refuses: the count is in bits 16-23.
        assert_eq!(s.info() & 0xffff, 70_000 - 65_536);
        assert_ne!(s.info() & 0x00ff_0000, 0);
        assert_eq!(Format::original().vlen_limit(), 0xffff);
    }

    #[test]
    fn layout_section_faults() {
        let int = [1, make_info(Kind::Int, false, 0), 4, 32];
        let strs = b"\0int\0";
        let good = known_layout_bytes();
        assert!(parse(&blob(32, &int, &good, strs)).is_ok());
        let mut flags = good.clone();
        flags[3][2] = 1;
        assert_eq!(
            parse(&blob(32, &int, &flags, strs)).unwrap_err(),
            ReadError::LayoutFlags { kind: 3, flags: 1 }
        );
        let mut wrong = good.clone();
        wrong[Kind::Struct as usize] = [0, 16, 0, 0];
        assert!(matches!(
            parse(&blob(32, &int, &wrong, strs)),
            Err(ReadError::LayoutDisagrees {
                kind: 4,
                name: "STRUCT",
                ..
            })
        ));
        let mut odd = good.clone();
        odd.push([6, 0, 0, 0]);
        assert!(matches!(
            parse(&blob(32, &int, &odd, strs)),
            Err(ReadError::LayoutUnaligned {
                kind: 20,
                what: "info_sz",
                value: 6
            })
        ));
        // a section overlapping the types
        let mut bad = blob(32, &int, &good, strs);
        bad[24..28].copy_from_slice(&4u32.to_le_bytes());
        assert!(matches!(parse(&bad), Err(ReadError::LayoutPlacement { off: 4, .. })));
        // a length that is not whole entries
        let mut bad = blob(32, &int, &good, strs);
        bad[28..32].copy_from_slice(&78u32.to_le_bytes());
        assert!(matches!(parse(&bad), Err(ReadError::LayoutLen(78))));
        // header bytes past the known 32: zeros are read, others refused
        let long = blob(40, &int, &good, strs);
        let b = parse(&long).unwrap();
        assert_eq!(b.format().hdr_len(), 40);
        assert_eq!(to_bytes(&b), long);
        let mut bad = long.clone();
        bad[36] = 7;
        assert_eq!(
            parse(&bad).unwrap_err(),
            ReadError::UnknownHeaderData { at: 36, value: 7 }
        );
    }

    #[test]
    fn big_endian_round_trip() {
        let mut b = parse(&sample()).unwrap();
        b.set_endian(Endian::Big);
        let be = to_bytes(&b);
        assert_eq!(&be[..2], &[0xeb, 0x9f]);
        let back = parse(&be).unwrap();
        assert_eq!(back.endian(), Endian::Big);
        assert_eq!(to_bytes(&back), be);
    }
}
