//! RPM packages: a 96-byte lead, the signature header (padded to 8 bytes),
//! the main header, then the payload: a cpio `newc` archive compressed as
//! the main header's tag 1125 (PAYLOADCOMPRESSOR) says (gzip when absent).
//!
//! A header is a magic `8e ad e8 01`, four reserved bytes, the index entry
//! count and the data store size (big-endian `u32`s), the 16-byte index
//! entries (tag, type, offset, count) and the store.

use std::io::{self, Read};

use super::{Cx, Entry, PackageError, decoder, normalise, read_data};

pub(super) const LEAD_MAGIC: [u8; 4] = [0xed, 0xab, 0xee, 0xdb];
const HEADER_MAGIC: [u8; 4] = [0x8e, 0xad, 0xe8, 0x01];
/// rpm's own limits: fewer than 2^16 index entries, a store under 256 MiB.
const MAX_TAGS: u32 = 0xffff;
const MAX_STORE: u32 = 0x0fff_ffff;
const TAG_PAYLOADFORMAT: u32 = 1124;
const TAG_PAYLOADCOMPRESSOR: u32 = 1125;
const TYPE_STRING: u32 = 6;

pub(super) fn read(mut r: impl Read + Send, cx: &Cx) -> Result<(), PackageError> {
    let mut lead = [0u8; 96];
    r.read_exact(&mut lead).map_err(|e| cx.io("lead", e))?;
    if lead[..4] != LEAD_MAGIC {
        return Err(cx.malformed("lead", "no RPM lead magic"));
    }
    if !(3..=4).contains(&lead[4]) {
        return Err(cx.malformed("lead", format!("format {}, only 3 and 4 are known", lead[4])));
    }
    let sig_type = u16::from_be_bytes([lead[78], lead[79]]);
    if sig_type != 5 {
        return Err(cx.malformed("lead", format!("signature type {sig_type}, only 5 (a header) is known")));
    }
    let sig = Header::read(&mut r, "signature header", cx)?;
    let pad = (8 - sig.store.len() % 8) % 8;
    let mut skip = [0u8; 8];
    r.read_exact(&mut skip[..pad])
        .map_err(|e| cx.io("signature header padding", e))?;
    let main = Header::read(&mut r, "main header", cx)?;
    let format = main.string(TAG_PAYLOADFORMAT, cx)?.unwrap_or("cpio");
    if format != "cpio" {
        return Err(cx.malformed("main header", format!("payload format {format:?}, only cpio is known")));
    }
    let compressor = main.string(TAG_PAYLOADCOMPRESSOR, cx)?.unwrap_or("gzip");
    let place = format!("payload ({compressor})");
    let Some(payload) = decoder(compressor, r, cx.threads) else {
        return Err(cx.unknown_compressor("main header (tag 1125)", compressor));
    };
    let payload = payload.map_err(|e| cx.io(&place, e))?;
    cpio(cx.stoppable(payload), &place, cx)
}

struct Header {
    /// (tag, type, offset, count), host order.
    index: Vec<[u32; 4]>,
    store: Vec<u8>,
}

impl Header {
    fn read(r: &mut dyn Read, place: &str, cx: &Cx) -> Result<Header, PackageError> {
        let mut head = [0u8; 16];
        r.read_exact(&mut head).map_err(|e| cx.io(place, e))?;
        if head[..4] != HEADER_MAGIC {
            return Err(cx.malformed(place, "no header magic 8e ad e8 01"));
        }
        let word = |i: usize| u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (count, size) = (word(8), word(12));
        if count > MAX_TAGS || size > MAX_STORE {
            return Err(cx.malformed(
                place,
                format!("{count} index entries and a {size}-byte store exceed rpm's limits"),
            ));
        }
        let raw = read_data(r, u64::from(count) * 16).map_err(|e| cx.io(place, e))?;
        let index = raw
            .chunks_exact(16)
            .map(|c| std::array::from_fn(|i| u32::from_be_bytes(c[i * 4..i * 4 + 4].try_into().unwrap_or_default())))
            .collect();
        let store = read_data(r, u64::from(size)).map_err(|e| cx.io(place, e))?;
        Ok(Header { index, store })
    }

    /// The string value of `tag`, if the header has it.
    fn string(&self, tag: u32, cx: &Cx) -> Result<Option<&str>, PackageError> {
        let Some(&[_, ty, off, _]) = self.index.iter().find(|e| e[0] == tag) else {
            return Ok(None);
        };
        let bad = |what: &str| cx.malformed("main header", format!("tag {tag}: {what}"));
        if ty != TYPE_STRING {
            return Err(bad(&format!("type {ty}, expected a string (6)")));
        }
        let rest = self
            .store
            .get(off as usize..)
            .ok_or_else(|| bad(&format!("offset {off} is past the {}-byte store", self.store.len())))?;
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| bad("string without a NUL"))?;
        std::str::from_utf8(&rest[..end])
            .map(Some)
            .map_err(|_| bad("string is not UTF-8"))
    }
}

const CPIO_HEADER: usize = 110;
/// Longer names are a garbled header (Linux's PATH_MAX is 4096).
const MAX_NAME: u32 = 1 << 16;

/// The regular files of a cpio `newc` archive, then the stream read to its
/// end so that a damaged compressed tail is an error too.
fn cpio(mut r: impl Read, payload: &str, cx: &Cx) -> Result<(), PackageError> {
    let mut pos: u64 = 0;
    let mut last = String::new();
    loop {
        let at = |last: &str| {
            if last.is_empty() {
                format!("{payload}: cpio header at offset {pos}")
            } else {
                format!("{payload}: cpio header at offset {pos}, after {last}")
            }
        };
        let mut h = [0u8; CPIO_HEADER];
        r.read_exact(&mut h).map_err(|e| cx.io(at(&last), e))?;
        match &h[..6] {
            b"070701" | b"070702" => {}
            b"07070X" => {
                return Err(cx.malformed(
                    at(&last),
                    "stripped cpio 07070X (rpm's payload for files over 4 GiB) is not supported",
                ));
            }
            m => {
                return Err(cx.malformed(
                    at(&last),
                    format!("bad cpio magic {:?}, expected newc 070701", String::from_utf8_lossy(m)),
                ));
            }
        }
        let mut field = [0u32; 13];
        for (i, f) in field.iter_mut().enumerate() {
            let hex = &h[6 + 8 * i..14 + 8 * i];
            *f = std::str::from_utf8(hex)
                .ok()
                .and_then(|s| u32::from_str_radix(s, 16).ok())
                .ok_or_else(|| cx.malformed(at(&last), format!("field {i} is not 8 hex digits")))?;
        }
        let (mode, nlink, mtime, size, namesize) = (field[1], field[4], field[5], field[6], field[11]);
        if namesize == 0 || namesize > MAX_NAME {
            return Err(cx.malformed(at(&last), format!("name size {namesize}")));
        }
        let name = read_data(&mut r, u64::from(namesize)).map_err(|e| cx.io(at(&last), e))?;
        let Some((&0, name)) = name.split_last() else {
            return Err(cx.malformed(at(&last), "name without a NUL"));
        };
        let name = String::from_utf8_lossy(name).into_owned();
        pos += (CPIO_HEADER + namesize as usize) as u64;
        skip(&mut r, pad4(pos)).map_err(|e| cx.io(format!("{payload}: {name}"), e))?;
        pos += pad4(pos);
        if name == "TRAILER!!!" {
            break;
        }
        let path = normalise(&name);
        let here = format!("{payload}: {path}");
        // In newc, hardlinked files carry their data on the last link only.
        let regular = mode & 0o170000 == 0o100000 && !(nlink > 1 && size == 0);
        if regular && cx.wants(&path) {
            let data = cx.contents(&mut r, u64::from(size)).map_err(|e| cx.io(&here, e))?;
            cx.emit(Entry {
                path: path.clone(),
                size: u64::from(size),
                mtime: u64::from(mtime),
                data,
            })?;
        } else {
            skip(&mut r, u64::from(size)).map_err(|e| cx.io(&here, e))?;
        }
        pos += u64::from(size);
        skip(&mut r, pad4(pos)).map_err(|e| cx.io(&here, e))?;
        pos += pad4(pos);
        last = path;
    }
    io::copy(&mut r, &mut io::sink()).map_err(|e| cx.io(format!("{payload}: after the cpio trailer"), e))?;
    Ok(())
}

fn pad4(pos: u64) -> u64 {
    (4 - pos % 4) % 4
}

fn skip(r: &mut dyn Read, n: u64) -> io::Result<()> {
    let got = io::copy(&mut r.take(n), &mut io::sink())?;
    if got < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}
