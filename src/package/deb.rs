//! Debian packages: an ar archive of `debian-binary` (format `2.x`),
//! `control.tar[.*]` and `data.tar[.*]`, with optional `_`-prefixed members
//! (signatures) that dpkg ignores. Only `data.tar` is read; it is the last
//! member that matters, so reading stops after it.

use std::io::{self, Read};

use super::{Cx, Entry, Exact, PackageError, decoder, normalise, read_data};

pub(super) fn read(r: impl Read + Send, cx: &Cx) -> Result<(), PackageError> {
    let mut ar = Ar::open(r).map_err(|e| cx.io("ar archive", e))?;
    let mut index = 0usize;
    loop {
        let place = format!("ar member {index}");
        let Some((raw, size)) = ar.next_member().map_err(|e| cx.io(&place, e))? else {
            return Err(cx.malformed("ar archive", "no data.tar member"));
        };
        let name = String::from_utf8_lossy(raw.strip_suffix(b"/").unwrap_or(&raw)).into_owned();
        let mut body = Exact::new(ar.body(), size);
        if index == 0 {
            if name != "debian-binary" {
                return Err(cx.malformed(&name, "the first member is not debian-binary: not a Debian package"));
            }
            let version = read_data(&mut body, size.min(64)).map_err(|e| cx.io(&name, e))?;
            if !version.starts_with(b"2.") {
                return Err(cx.malformed(
                    &name,
                    format!(
                        "format version {:?}, only 2.x is known",
                        String::from_utf8_lossy(&version).trim_end()
                    ),
                ));
            }
        } else if let Some(suffix) = name.strip_prefix("data.tar") {
            let compressor = match suffix {
                "" => "none",
                ".xz" => "xz",
                ".zst" => "zstd",
                ".gz" => "gzip",
                ".lzma" => "lzma",
                other => return Err(cx.unknown_compressor(&name, other.trim_start_matches('.'))),
            };
            let Some(dec) = decoder(compressor, body, cx.threads) else {
                return Err(cx.unknown_compressor(&name, compressor));
            };
            let dec = dec.map_err(|e| cx.io(&name, e))?;
            data_tar(cx.stoppable(dec), &name, cx)?;
            return trailing(&mut ar, index + 1, cx);
        }
        // debian-binary's rest, control.tar.*, signatures: skipped by ar
        index += 1;
    }
}

/// The regular files of a tar stream, then the stream's end read through so
/// that a damaged compressed tail is an error too.
fn data_tar(r: impl Read, member: &str, cx: &Cx) -> Result<(), PackageError> {
    let mut tar = tar::Archive::new(r);
    let mut last = String::new();
    let place = |last: &str| {
        if last.is_empty() {
            member.to_string()
        } else {
            format!("{member}: after {last}")
        }
    };
    {
        let entries = tar.entries().map_err(|e| cx.io(member, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| cx.io(place(&last), e))?;
            let path = normalise(&String::from_utf8_lossy(&entry.path_bytes()));
            let here = format!("{member}: {path}");
            let regular = matches!(
                entry.header().entry_type(),
                tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse
            );
            if regular && cx.wants(&path) {
                let mtime = entry.header().mtime().map_err(|e| cx.io(&here, e))?;
                let size = entry.size();
                let data = cx.contents(&mut entry, size).map_err(|e| cx.io(&here, e))?;
                cx.emit(Entry {
                    path: path.clone(),
                    size,
                    mtime,
                    data,
                })?;
            }
            last = path;
        }
    }
    io::copy(&mut tar.into_inner(), &mut io::sink()).map_err(|e| cx.io(format!("{member}: after the tar end"), e))?;
    Ok(())
}

/// deb(5): members after `data.tar` are ignored, but read through, so that a
/// package cut short after its data (in the ar padding byte, say) is an
/// error rather than a quiet success.
fn trailing<R: Read>(ar: &mut Ar<R>, mut index: usize, cx: &Cx) -> Result<(), PackageError> {
    loop {
        let place = format!("ar member {index} (after data.tar)");
        let Some((_, size)) = ar.next_member().map_err(|e| cx.io(&place, e))? else {
            return Ok(());
        };
        io::copy(&mut Exact::new(ar.body(), size), &mut io::sink()).map_err(|e| cx.io(&place, e))?;
        index += 1;
    }
}

/// deb(5)'s container, an ar archive, read as a stream: the magic, then
/// per member a 60-byte header (name 16, dates and ids 32, size 10, "`\n")
/// and its body, padded to an even length. dpkg writes short names only;
/// the GNU and BSD long-name forms (`/N`, `//`, `#1/N`) are refused, so no
/// name table is ever read or allocated from a size the file claims.
struct Ar<R> {
    r: R,
    /// Unread bytes of the current member's body.
    left: u64,
    /// Whether a padding byte follows the current body.
    pad: bool,
}

impl<R: Read> Ar<R> {
    fn open(mut r: R) -> io::Result<Ar<R>> {
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic)?;
        if &magic != b"!<arch>\n" {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "no ar magic (!<arch>)"));
        }
        Ok(Ar { r, left: 0, pad: false })
    }

    /// The next member's name and size, past what is left of the current
    /// one; `None` at the archive's end.
    fn next_member(&mut self) -> io::Result<Option<(Vec<u8>, u64)>> {
        let skip = self.left + u64::from(self.pad);
        if io::copy(&mut (&mut self.r).take(skip), &mut io::sink())? != skip {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left = 0;
        self.pad = false;
        let mut h = [0u8; 60];
        let mut got = 0;
        while got < h.len() {
            match self.r.read(&mut h[got..])? {
                0 if got == 0 => return Ok(None),
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "an ar member header cut short",
                    ));
                }
                n => got += n,
            }
        }
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("ar member header: {what}"));
        if &h[58..60] != b"`\n" {
            return Err(bad("no end marker"));
        }
        let name = h[..16].trim_ascii_end().to_vec();
        if name.starts_with(b"/") || name.starts_with(b"#1/") {
            return Err(bad("a long-name form (GNU or BSD), which Debian packages do not use"));
        }
        let size = std::str::from_utf8(h[48..58].trim_ascii())
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| bad("its size is not a decimal number"))?;
        self.left = size;
        self.pad = size % 2 == 1;
        Ok(Some((name, size)))
    }

    /// The current member's body.
    fn body(&mut self) -> Body<'_, R> {
        Body { ar: self }
    }
}

struct Body<'a, R> {
    ar: &'a mut Ar<R>,
}

impl<R: Read> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(usize::try_from(self.ar.left).unwrap_or(usize::MAX));
        if n == 0 {
            return Ok(0);
        }
        let got = self.ar.r.read(&mut buf[..n])?;
        self.ar.left -= got as u64;
        Ok(got)
    }
}
