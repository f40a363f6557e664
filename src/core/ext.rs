//! The `.BTF.ext` section of a BPF object: its header, and the CO-RE
//! relocation records grouped by the ELF section they patch.
//!
//! The checks are libbpf 1.1's (docs/core-relocation-rules.md §1), with one
//! difference on purpose: libbpf ignores a `.BTF.ext` it cannot parse and
//! loads the program with its compile-time offsets, which is exactly the
//! silent wrong answer a checker must not give, so here a damaged section
//! is an error. The func_info and line_info subsections are bounds-checked
//! as libbpf does (a fault there makes libbpf drop CO-RE too) but not kept.
//! Either byte order is read, as libbpf does from 1.5 on.

use thiserror::Error;

use crate::btf::{BTF_MAGIC, Endian, StrOff, TypeId};

/// A fault in `.BTF.ext`, with the byte offset in the section.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ExtError {
    #[error("{len} bytes, shorter than its header")]
    Truncated { len: usize },
    #[error("bad magic {0:#06x} at offset 0 (expected 0xeb9f)")]
    BadMagic(u16),
    #[error("version {0} at offset 2 (only 1 is defined)")]
    BadVersion(u8),
    #[error("flags {0:#04x} at offset 3 (must be 0)")]
    BadFlags(u8),
    #[error("header length {0} at offset 4 is below 24 or past the end")]
    BadHdrLen(u32),
    #[error("{what} subsection at offset {off}: {fault}")]
    Subsection {
        what: &'static str,
        off: u64,
        fault: &'static str,
    },
    #[error("{what} record size {size} at offset {off} (must be a multiple of 4, at least {min})")]
    BadRecordSize {
        what: &'static str,
        off: u64,
        size: u32,
        min: u32,
    },
    #[error("{what} block at offset {off} claims {count} records of {size} bytes, past the subsection's end")]
    BlockOverrun {
        what: &'static str,
        off: u64,
        count: u32,
        size: u32,
    },
    #[error("{what} block at offset {off} has no records")]
    EmptyBlock { what: &'static str, off: u64 },
}

/// One CO-RE relocation record (`struct bpf_core_relo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreRelo {
    /// Byte offset of the instruction in its ELF section.
    pub insn_off: u32,
    /// The local root type, in the object's own BTF.
    pub type_id: TypeId,
    /// The access string, in the object's BTF strings.
    pub access: StrOff,
    /// The relocation kind as recorded ([`super::ReloKind::from_raw`]).
    pub kind: u32,
}

/// The CO-RE relocations of one ELF section, in record order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReloBlock {
    /// The ELF section's name, in the object's BTF strings.
    pub sec_name: StrOff,
    pub relos: Vec<CoreRelo>,
}

/// What `.BTF.ext` says for CO-RE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BtfExt {
    pub blocks: Vec<ReloBlock>,
}

impl BtfExt {
    pub fn relo_count(&self) -> usize {
        self.blocks.iter().map(|b| b.relos.len()).sum()
    }
}

struct Rd<'a> {
    b: &'a [u8],
    big: bool,
}

impl Rd<'_> {
    fn u32(&self, at: u64) -> Option<u32> {
        let at = usize::try_from(at).ok()?;
        let w: [u8; 4] = self.b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    }
}

const MIN_FUNC_INFO: u32 = 8;
const MIN_LINE_INFO: u32 = 16;
const MIN_CORE_RELO: u32 = 16;

/// Parses `.BTF.ext`. Returns its byte order with it (the object's ELF
/// header should agree; the caller checks).
pub fn parse(data: &[u8]) -> Result<(BtfExt, Endian), ExtError> {
    if data.len() < 8 {
        return Err(ExtError::Truncated { len: data.len() });
    }
    let magic_le = u16::from_le_bytes([data[0], data[1]]);
    let big = match magic_le {
        BTF_MAGIC => false,
        m if m.swap_bytes() == BTF_MAGIC => true,
        m => return Err(ExtError::BadMagic(m)),
    };
    if data[2] != 1 {
        return Err(ExtError::BadVersion(data[2]));
    }
    if data[3] != 0 {
        return Err(ExtError::BadFlags(data[3]));
    }
    let rd = Rd { b: data, big };
    let hdr_len = rd.u32(4).unwrap_or(0);
    if (hdr_len as usize) < 24 || hdr_len as usize >= data.len() {
        return Err(ExtError::BadHdrLen(hdr_len));
    }
    let sub = |at: u64| (rd.u32(at).unwrap_or(0), rd.u32(at + 4).unwrap_or(0));
    let (fi_off, fi_len) = sub(8);
    let (li_off, li_len) = sub(16);
    walk(&rd, hdr_len, fi_off, fi_len, "func_info", MIN_FUNC_INFO, |_, _| {})?;
    walk(&rd, hdr_len, li_off, li_len, "line_info", MIN_LINE_INFO, |_, _| {})?;
    let mut ext = BtfExt::default();
    // A header without the core_relo fields (hdr_len < 32) means no CO-RE.
    if hdr_len >= 32 {
        let (cr_off, cr_len) = sub(24);
        walk(
            &rd,
            hdr_len,
            cr_off,
            cr_len,
            "core_relo",
            MIN_CORE_RELO,
            |sec_name, at| {
                if sec_name.is_some() {
                    ext.blocks.push(ReloBlock {
                        sec_name: StrOff::new(sec_name.unwrap_or(0)),
                        relos: Vec::new(),
                    });
                }
                if let Some(at) = at {
                    let r = |k: u64| rd.u32(at + k).unwrap_or(0);
                    ext.blocks.last_mut().expect("a block is open").relos.push(CoreRelo {
                        insn_off: r(0),
                        type_id: TypeId::new(r(4)),
                        access: StrOff::new(r(8)),
                        kind: r(12),
                    });
                }
            },
        )?;
    }
    Ok((ext, if big { Endian::Big } else { Endian::Little }))
}

/// Walks one subsection, calling `each(Some(sec_name_off), None)` at each
/// block and `each(None, Some(record_offset))` for each record in it.
fn walk(
    rd: &Rd<'_>,
    hdr_len: u32,
    off: u32,
    len: u32,
    what: &'static str,
    min: u32,
    mut each: impl FnMut(Option<u32>, Option<u64>),
) -> Result<(), ExtError> {
    if len == 0 {
        return Ok(());
    }
    let start = hdr_len as u64 + off as u64;
    let end = start + len as u64;
    let fault = |fault| ExtError::Subsection {
        what,
        off: start,
        fault,
    };
    if !off.is_multiple_of(4) {
        return Err(fault("offset not 4-byte aligned"));
    }
    if end > rd.b.len() as u64 {
        return Err(fault("runs past the end of the section"));
    }
    let size = rd.u32(start).ok_or_else(|| fault("no record size"))?;
    if size < min || size % 4 != 0 {
        return Err(ExtError::BadRecordSize {
            what,
            off: start,
            size,
            min,
        });
    }
    let mut at = start + 4;
    if at >= end {
        return Err(fault("no blocks after the record size"));
    }
    while at < end {
        if at + 8 > end {
            return Err(fault("a block header runs past the end"));
        }
        let name = rd.u32(at).unwrap_or(0);
        let count = rd.u32(at + 4).unwrap_or(0);
        if count == 0 {
            return Err(ExtError::EmptyBlock { what, off: at });
        }
        let body = count as u64 * size as u64;
        if at + 8 + body > end {
            return Err(ExtError::BlockOverrun {
                what,
                off: at,
                count,
                size,
            });
        }
        each(Some(name), None);
        for i in 0..count as u64 {
            each(None, Some(at + 8 + i * size as u64));
        }
        at += 8 + body;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(big: bool, relos: &[[u32; 4]]) -> Vec<u8> {
        let w = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut core = Vec::new();
        core.extend(w(16));
        core.extend(w(7)); // section name offset
        core.extend(w(relos.len() as u32));
        for r in relos {
            for v in r {
                core.extend(w(*v));
            }
        }
        let mut d = Vec::new();
        d.extend(if big {
            BTF_MAGIC.to_be_bytes()
        } else {
            BTF_MAGIC.to_le_bytes()
        });
        d.extend([1, 0]);
        d.extend(w(32));
        d.extend(w(0));
        d.extend(w(0));
        d.extend(w(0));
        d.extend(w(0));
        d.extend(w(0));
        d.extend(w(core.len() as u32));
        d.extend(core);
        d
    }

    #[test]
    fn reads_both_byte_orders_alike() {
        let relos = [[8, 3, 1, 0], [16, 4, 9, 2]];
        for big in [false, true] {
            let (ext, e) = parse(&section(big, &relos)).unwrap();
            assert_eq!(e, if big { Endian::Big } else { Endian::Little });
            assert_eq!(ext.blocks.len(), 1);
            assert_eq!(ext.blocks[0].sec_name, StrOff::new(7));
            assert_eq!(
                ext.blocks[0].relos[1],
                CoreRelo {
                    insn_off: 16,
                    type_id: TypeId::new(4),
                    access: StrOff::new(9),
                    kind: 2
                }
            );
        }
    }

    #[test]
    fn every_cut_is_an_error_not_a_panic() {
        let d = section(false, &[[8, 3, 1, 0], [16, 4, 9, 2]]);
        for n in 0..d.len() {
            assert!(parse(&d[..n]).is_err(), "cut at {n}");
        }
        let mut bad = d.clone();
        bad[32 + 8] = 0; // record count of the block: 0
        bad[32 + 9] = 0;
        assert!(matches!(parse(&bad), Err(ExtError::EmptyBlock { .. })));
        let mut bad = d;
        bad[32] = 12; // record size below the minimum
        assert!(matches!(parse(&bad), Err(ExtError::BadRecordSize { .. })));
    }
}
