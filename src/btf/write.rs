//! Writing the model as raw BTF in its byte order: header, type words,
//! strings, in one buffer of exactly the final size.

use super::{Btf, Endian, HDR_LEN};

/// The raw bytes of `btf` (its own types and strings; split BTF is written
/// without its base, as libbpf does).
pub fn to_bytes(btf: &Btf) -> Vec<u8> {
    let type_len = btf.type_section_len() as u32;
    let strs = btf.raw_strings();
    let total = HDR_LEN as usize + type_len as usize + strs.len();
    let mut out = Vec::with_capacity(total);
    let big = btf.endian() == Endian::Big;
    let put16 = |o: &mut Vec<u8>, v: u16| o.extend_from_slice(&if big { v.to_be_bytes() } else { v.to_le_bytes() });
    let put32 = |o: &mut Vec<u8>, v: u32| o.extend_from_slice(&if big { v.to_be_bytes() } else { v.to_le_bytes() });
    put16(&mut out, super::BTF_MAGIC);
    out.push(1);
    out.push(0);
    put32(&mut out, HDR_LEN);
    put32(&mut out, 0);
    put32(&mut out, type_len);
    put32(&mut out, type_len);
    put32(&mut out, strs.len() as u32);
    let words = btf.raw_words();
    let at = out.len();
    out.resize(at + words.len() * 4, 0);
    let swap = big != cfg!(target_endian = "big");
    for (dst, w) in out[at..].chunks_exact_mut(4).zip(words) {
        let w = if swap { w.swap_bytes() } else { *w };
        dst.copy_from_slice(&w.to_ne_bytes());
    }
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
    to_bytes(&merged)
}
