//! Writing the model as raw BTF in its byte order: header, type words,
//! the layout section when the format has one (BTF 2026), strings, in one
//! buffer of exactly the final size.

use super::{Btf, Endian};

/// The header and layout section of `btf` as written before/after its type
/// words: `(header, layout)`.
fn frame(btf: &Btf) -> (Vec<u8>, Vec<u8>) {
    let big = btf.endian() == Endian::Big;
    let fmt = btf.format();
    let type_len = btf.type_section_len() as u32;
    let strs_len = btf.raw_strings().len() as u32;
    let mut layout = Vec::new();
    if let Some(l) = fmt.layout() {
        for e in l.entries() {
            layout.push(e.info_sz);
            layout.push(e.elem_sz);
            layout.extend_from_slice(&if big {
                e.flags.to_be_bytes()
            } else {
                e.flags.to_le_bytes()
            });
        }
    }
    let layout_len = layout.len() as u32;
    let mut hdr = Vec::with_capacity(fmt.hdr_len() as usize);
    let put32 = |o: &mut Vec<u8>, v: u32| o.extend_from_slice(&if big { v.to_be_bytes() } else { v.to_le_bytes() });
    hdr.extend_from_slice(&if big {
        super::BTF_MAGIC.to_be_bytes()
    } else {
        super::BTF_MAGIC.to_le_bytes()
    });
    hdr.push(1);
    hdr.push(0);
    put32(&mut hdr, fmt.hdr_len());
    put32(&mut hdr, 0);
    put32(&mut hdr, type_len);
    put32(&mut hdr, type_len + layout_len);
    put32(&mut hdr, strs_len);
    if fmt.has_layout_fields() {
        // libbpf leaves `layout_off` 0 when there is no section.
        put32(&mut hdr, if layout_len == 0 { 0 } else { type_len });
        put32(&mut hdr, layout_len);
    }
    // A longer header read from a newer blob: its extra bytes were zeros.
    hdr.resize(fmt.hdr_len() as usize, 0);
    (hdr, layout)
}

/// The raw bytes of `btf` (its own types and strings; split BTF is written
/// without its base, as libbpf does).
pub fn to_bytes(btf: &Btf) -> Vec<u8> {
    let (hdr, layout) = frame(btf);
    let strs = btf.raw_strings();
    let total = raw_len(btf);
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&hdr);
    let big = btf.endian() == Endian::Big;
    let words = btf.raw_words();
    let at = out.len();
    out.resize(at + words.len() * 4, 0);
    let swap = big != cfg!(target_endian = "big");
    for (dst, w) in out[at..].chunks_exact_mut(4).zip(words) {
        let w = if swap { w.swap_bytes() } else { *w };
        dst.copy_from_slice(&w.to_ne_bytes());
    }
    out.extend_from_slice(&layout);
    out.extend_from_slice(strs);
    debug_assert_eq!(out.len(), total);
    out
}

/// Base and split merged into one standalone blob (base types then split
/// types, base strings then split strings): ids and offsets are unchanged,
/// which is what the kernel needs to judge a split BTF on its own.
pub fn merged_bytes(split: &Btf) -> Vec<u8> {
    let mut chain = Vec::new();
    let mut cur = Some(split);
    while let Some(b) = cur {
        chain.push(b);
        cur = b.base().map(|a| &**a);
    }
    chain.reverse();
    let mut words = Vec::new();
    let mut offs = Vec::new();
    let mut strs = Vec::new();
    for b in &chain {
        let w0 = words.len() as u32;
        offs.extend(b.type_offsets().iter().map(|&o| o + w0));
        words.extend_from_slice(b.raw_words());
        strs.extend_from_slice(b.raw_strings());
    }
    let merged = Btf::from_parts(
        words,
        offs,
        super::StrTab::from_bytes(0, strs, None),
        split.endian(),
        None,
    );
    let mut merged = merged;
    merged.set_format(split.format().clone());
    to_bytes(&merged)
}

/// Size in bytes of what `to_bytes` / `write_to` produce.
pub fn raw_len(btf: &Btf) -> usize {
    let layout = btf.format().layout().map_or(0, |l| l.byte_len());
    btf.format().hdr_len() as usize + btf.type_section_len() + layout + btf.raw_strings().len()
}

/// Writes the same bytes as `to_bytes` to `w` without building them in
/// memory first (a pre-dedup vmlinux is 170 MB).
pub fn write_to(btf: &Btf, w: &mut impl std::io::Write) -> std::io::Result<()> {
    let big = btf.endian() == Endian::Big;
    let (hdr, layout) = frame(btf);
    w.write_all(&hdr)?;
    let swap = big != cfg!(target_endian = "big");
    let mut buf = Vec::with_capacity(64 * 1024);
    for chunk in btf.raw_words().chunks(16 * 1024) {
        buf.clear();
        for &x in chunk {
            buf.extend_from_slice(&if swap { x.swap_bytes() } else { x }.to_ne_bytes());
        }
        w.write_all(&buf)?;
    }
    w.write_all(&layout)?;
    w.write_all(btf.raw_strings())
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    #[test]
    fn streamed_bytes_equal_buffered_bytes() {
        for e in [Endian::Little, Endian::Big] {
            let mut b = Btf::new(e);
            let int = b.add_int(b"int", 4, crate::btf::INT_SIGNED);
            b.add_ref(crate::btf::Kind::Ptr, int);
            let mut out = Vec::new();
            write_to(&b, &mut out).unwrap();
            assert_eq!(out, to_bytes(&b));
            assert_eq!(raw_len(&b), out.len());
        }
    }
}
