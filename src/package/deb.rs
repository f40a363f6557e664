//! Debian packages: an ar archive of `debian-binary` (format `2.x`),
//! `control.tar[.*]` and `data.tar[.*]`, with optional `_`-prefixed members
//! (signatures) that dpkg ignores. Only `data.tar` is read; it is the last
//! member that matters, so reading stops after it.

use std::io::{self, Read};

use super::{Cx, Entry, Exact, PackageError, decoder, normalise, read_data};

pub(super) fn read(r: impl Read + Send, cx: &Cx) -> Result<(), PackageError> {
    let mut ar = ar::Archive::new(r);
    let mut index = 0usize;
    loop {
        let place = format!("ar member {index}");
        let Some(member) = ar.next_entry() else {
            return Err(cx.malformed("ar archive", "no data.tar member"));
        };
        let member = member.map_err(|e| cx.io(&place, e))?;
        let raw = member.header().identifier();
        let name = String::from_utf8_lossy(raw.strip_suffix(b"/").unwrap_or(raw)).into_owned();
        let size = member.header().size();
        let mut body = Exact::new(member, size);
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
            let Some(dec) = decoder(compressor, body) else {
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
                let data = read_data(&mut entry, size).map_err(|e| cx.io(&here, e))?;
                cx.emit(Entry {
                    path: path.clone(),
                    size: data.len() as u64,
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
fn trailing<R: Read>(ar: &mut ar::Archive<R>, mut index: usize, cx: &Cx) -> Result<(), PackageError> {
    while let Some(member) = ar.next_entry() {
        let place = format!("ar member {index} (after data.tar)");
        let member = member.map_err(|e| cx.io(&place, e))?;
        let size = member.header().size();
        io::copy(&mut Exact::new(member, size), &mut io::sink()).map_err(|e| cx.io(&place, e))?;
        index += 1;
    }
    Ok(())
}
