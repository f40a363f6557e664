//! The supplementary file of a dwz-compressed file (`dwz -m`): the types
//! several files share, which they refer to with DW_FORM_GNU_ref_alt and
//! DW_FORM_GNU_strp_alt (DWARF 5: DW_FORM_ref_sup4/8, DW_FORM_strp_sup).
//! The file names it in `.gnu_debugaltlink` (a path, then the build id of
//! the supplementary file) or in DWARF 5's `.debug_sup` (a path and a
//! checksum, which dwz fills with the build id).
//!
//! Where it is looked for, in order: `--alt-file`, alone when given; the
//! recorded path as it is (an absolute one under `--debug-root` first, its
//! `/usr/lib/debug` prefix replaced), and relative to the input's
//! directory; the build-id path `.build-id/xx/rest.debug` under the debug
//! root (`--debug-root`, else `/usr/lib/debug`); and the distributions'
//! common place, `.dwz/` under the debug root, by the recorded name. The
//! first file whose build id matches is read.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// What a file says of its supplementary file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AltLink<'a> {
    /// The recorded path (not necessarily UTF-8).
    pub path: &'a [u8],
    /// The build id the supplementary file must have (empty: none recorded).
    pub build_id: &'a [u8],
    /// The section it was read from.
    pub section: &'static str,
}

/// Where to look besides the recorded path (`--alt-file`, `--debug-root`).
#[derive(Clone, Debug, Default)]
pub struct AltLookup {
    /// The supplementary file itself: no other place is tried.
    pub file: Option<PathBuf>,
    /// Stands in for `/usr/lib/debug` (an unpacked debug package).
    pub debug_root: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum AltError {
    #[error(
        "its DWARF refers to a supplementary file (dwz -m; {section} names {link}), not found: looked for {}; \
         give it with --alt-file PATH, or --debug-root DIR for an unpacked debug package",
        list(tried)
    )]
    NotFound {
        section: &'static str,
        link: String,
        tried: Vec<PathBuf>,
    },
    #[error(
        "supplementary file {}: {} {} differs from {want} recorded in {section}{}",
        path.display(),
        if *section == ".debug_sup" { "checksum" } else { "build id" },
        got.as_deref().unwrap_or("(none)"),
        if others.is_empty() { String::new() } else { format!(" (also tried: {})", list(others)) }
    )]
    BuildIdMismatch {
        path: PathBuf,
        section: &'static str,
        want: String,
        got: Option<String>,
        others: Vec<PathBuf>,
    },
    #[error("{section}: damaged: {why}")]
    BadLink { section: &'static str, why: &'static str },
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `.gnu_debugaltlink`: the path, a NUL, the build id.
pub fn parse_gnu_debugaltlink(data: &[u8]) -> Result<AltLink<'_>, AltError> {
    const SECTION: &str = ".gnu_debugaltlink";
    let nul = memchr::memchr(0, data).ok_or(AltError::BadLink {
        section: SECTION,
        why: "the path has no terminating NUL",
    })?;
    if nul == 0 {
        return Err(AltError::BadLink {
            section: SECTION,
            why: "the path is empty",
        });
    }
    Ok(AltLink {
        path: &data[..nul],
        build_id: &data[nul + 1..],
        section: SECTION,
    })
}

/// DWARF 5 `.debug_sup`: version (2 bytes, 5), is_supplementary (1 byte),
/// the file name (NUL-terminated), the checksum's length (ULEB128) and
/// bytes. `None` for the supplementary file's own section (it names no
/// other file).
pub fn parse_debug_sup(data: &[u8], big_endian: bool) -> Result<Option<AltLink<'_>>, AltError> {
    let (is_sup, name, sum) = debug_sup_fields(data, big_endian)?;
    if is_sup {
        return Ok(None);
    }
    if name.is_empty() {
        return Err(AltError::BadLink {
            section: ".debug_sup",
            why: "the file name is empty",
        });
    }
    Ok(Some(AltLink {
        path: name,
        build_id: sum,
        section: ".debug_sup",
    }))
}

/// `.debug_sup`'s is_supplementary flag, file name and checksum.
fn debug_sup_fields(data: &[u8], big_endian: bool) -> Result<(bool, &[u8], &[u8]), AltError> {
    let bad = |why| AltError::BadLink {
        section: ".debug_sup",
        why,
    };
    let v = data.get(..2).ok_or(bad("shorter than its header"))?;
    let version = if big_endian {
        u16::from_be_bytes([v[0], v[1]])
    } else {
        u16::from_le_bytes([v[0], v[1]])
    };
    if version != 5 {
        return Err(bad("version is not 5"));
    }
    let is_sup = *data.get(2).ok_or(bad("shorter than its header"))?;
    let rest = &data[3..];
    let nul = memchr::memchr(0, rest).ok_or(bad("the file name has no terminating NUL"))?;
    let (name, mut rest) = (&rest[..nul], &rest[nul + 1..]);
    let mut len = 0u64;
    let mut shift = 0;
    loop {
        let (&b, tail) = rest.split_first().ok_or(bad("the checksum length is cut short"))?;
        rest = tail;
        if shift >= 64 {
            return Err(bad("the checksum length does not fit 64 bits"));
        }
        len |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let sum = usize::try_from(len)
        .ok()
        .and_then(|n| rest.get(..n))
        .ok_or(bad("the checksum is cut short"))?;
    Ok((is_sup != 0, name, sum))
}

fn bytes_path(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

/// The places to look for `link`'s file, in order (see the module's
/// comment); `input` is the file that names it.
pub fn candidates(input: &Path, link: &AltLink<'_>, lookup: &AltLookup) -> Vec<PathBuf> {
    if let Some(f) = &lookup.file {
        return vec![f.clone()];
    }
    let recorded = bytes_path(link.path);
    let root = lookup
        .debug_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/usr/lib/debug"));
    let mut out = Vec::new();
    if recorded.is_absolute() {
        if let Some(r) = &lookup.debug_root {
            let tail = recorded.strip_prefix("/usr/lib/debug").unwrap_or(&recorded);
            out.push(r.join(tail.strip_prefix("/").unwrap_or(tail)));
        }
        out.push(recorded.clone());
    } else {
        let dir = input
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        out.push(dir.join(&recorded));
        out.push(recorded.clone());
    }
    if link.build_id.len() >= 2 {
        let h = hex(link.build_id);
        out.push(root.join(".build-id").join(&h[..2]).join(format!("{}.debug", &h[2..])));
    }
    // `.dwz/<what follows .dwz/ in the recorded path>`, else its file name
    let s = link.path;
    let after = s
        .windows(5)
        .position(|w| w == b".dwz/")
        .map(|i| &s[i + 5..])
        .filter(|t| !t.is_empty());
    match after {
        Some(t) => out.push(root.join(".dwz").join(bytes_path(t))),
        None => {
            if let Some(name) = recorded.file_name() {
                out.push(root.join(".dwz").join(name));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// The GNU build id of an ELF file (its NT_GNU_BUILD_ID note), if it has
/// one; `None` also for what is not an ELF file.
pub fn build_id(data: &[u8]) -> Option<Vec<u8>> {
    use object::read::elf::{FileHeader, SectionHeader};
    fn of<H: FileHeader<Endian = object::Endianness>>(data: &[u8]) -> Option<Vec<u8>> {
        let hdr = H::parse(data).ok()?;
        let e = hdr.endian().ok()?;
        let sections = hdr.sections(e, data).ok()?;
        for sh in sections.iter() {
            if let Ok(Some(mut notes)) = sh.notes(e, data) {
                while let Ok(Some(n)) = notes.next() {
                    if n.n_type(e) == object::elf::NT_GNU_BUILD_ID && n.name() == b"GNU" {
                        return Some(n.desc().to_vec());
                    }
                }
            }
        }
        None
    }
    match data.get(4)? {
        1 => of::<object::elf::FileHeader32<object::Endianness>>(data),
        2 => of::<object::elf::FileHeader64<object::Endianness>>(data),
        _ => None,
    }
}

/// What a supplementary file is known by to the link in `section`: for
/// `.debug_sup`, the checksum in its own `.debug_sup` (dwz writes no build
/// id note there), else its build id.
fn identity(data: &[u8], section: &str) -> Option<Vec<u8>> {
    use object::{Object, ObjectSection};
    if section == ".debug_sup"
        && let Ok(f) = object::File::parse(data)
        && let Some(sup) = f.section_by_name(".debug_sup").and_then(|s| s.data().ok())
        && let Some(sum) = own_checksum(sup, !f.is_little_endian())
    {
        return Some(sum);
    }
    build_id(data)
}

/// The checksum of a supplementary file's own `.debug_sup` (is_supplementary set).
fn own_checksum(data: &[u8], big_endian: bool) -> Option<Vec<u8>> {
    match debug_sup_fields(data, big_endian) {
        Ok((true, _, sum)) => Some(sum.to_vec()),
        _ => None,
    }
}

/// The first of `link`'s candidate files that exists and whose build id
/// matches (any build id, where the link records none), opened.
pub fn open(input: &Path, link: &AltLink<'_>, lookup: &AltLookup) -> Result<super::Input, AltOpenError> {
    let tried = candidates(input, link, lookup);
    let mut mismatched: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
    for p in &tried {
        // (a pseudo-file of /proc or /sys is a "regular file" that refuses
        // to be mapped and would be read whole: /proc/kcore)
        if !p.is_file() || p.starts_with("/proc") || p.starts_with("/sys") {
            continue;
        }
        let f = super::Input::open(p).map_err(AltOpenError::Open)?;
        let id = identity(f.bytes(), link.section);
        if link.build_id.is_empty() || id.as_deref() == Some(link.build_id) {
            return Ok(f);
        }
        mismatched.push((p.clone(), id));
    }
    let link_text = String::from_utf8_lossy(link.path).into_owned();
    Err(AltOpenError::Alt(match mismatched.first() {
        Some((path, got)) => AltError::BuildIdMismatch {
            path: path.clone(),
            section: link.section,
            want: hex(link.build_id),
            got: got.as_deref().map(hex),
            others: mismatched[1..].iter().map(|m| m.0.clone()).collect(),
        },
        None => AltError::NotFound {
            section: link.section,
            link: link_text,
            tried,
        },
    }))
}

/// Why the supplementary file could not be opened.
#[derive(Debug)]
pub enum AltOpenError {
    Alt(AltError),
    /// It exists but cannot be read.
    Open(crate::error::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_parse() {
        let l = parse_gnu_debugaltlink(b"/usr/lib/debug/.dwz/x86_64-linux-gnu/p.debug\0\x01\x02").unwrap();
        assert_eq!(l.path, b"/usr/lib/debug/.dwz/x86_64-linux-gnu/p.debug");
        assert_eq!(l.build_id, b"\x01\x02");
        assert!(parse_gnu_debugaltlink(b"no nul").is_err());
        assert!(parse_gnu_debugaltlink(b"\0\x01").is_err());
        let s = parse_debug_sup(b"\x05\x00\x00common.sup\0\x02\xab\xcd", false)
            .unwrap()
            .unwrap();
        assert_eq!((s.path, s.build_id), (&b"common.sup"[..], &b"\xab\xcd"[..]));
        assert_eq!(parse_debug_sup(b"\x05\x00\x01\0\x00", false).unwrap(), None);
        assert!(parse_debug_sup(b"\x05\x00\x00x\0\x05\xab", false).is_err());
        assert!(parse_debug_sup(b"\x00\x05\x00x\0\x00", false).is_err());
        assert!(parse_debug_sup(b"\x00\x05\x00x\0\x00", true).is_ok());
    }

    #[test]
    fn candidates_follow_the_documented_order() {
        let l = AltLink {
            path: b"/usr/lib/debug/.dwz/x86_64-linux-gnu/p.debug",
            build_id: b"\xab\xcd\xef",
            section: ".gnu_debugaltlink",
        };
        let lookup = AltLookup {
            file: None,
            debug_root: Some("/pkg/usr/lib/debug".into()),
        };
        let c = candidates(Path::new("/pkg/usr/lib/debug/.build-id/12/34.debug"), &l, &lookup);
        let want: Vec<PathBuf> = [
            "/pkg/usr/lib/debug/.dwz/x86_64-linux-gnu/p.debug",
            "/usr/lib/debug/.dwz/x86_64-linux-gnu/p.debug",
            "/pkg/usr/lib/debug/.build-id/ab/cdef.debug",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(c, want);
        let rel = AltLink {
            path: b"common.dwz",
            build_id: b"",
            section: ".gnu_debugaltlink",
        };
        let c = candidates(Path::new("out/a.so"), &rel, &AltLookup::default());
        let want: Vec<PathBuf> = ["out/common.dwz", "common.dwz", "/usr/lib/debug/.dwz/common.dwz"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(c, want);
        let only = AltLookup {
            file: Some("x.dwz".into()),
            debug_root: None,
        };
        assert_eq!(candidates(Path::new("a"), &rel, &only), vec![PathBuf::from("x.dwz")]);
    }
}
