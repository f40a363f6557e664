//! ELF input: the file is mapped once and read with `object`.
//!
//! This module owns the mapping; later phases borrow section bytes from it.

pub mod alt;
pub mod debug;
pub mod functab;

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod write;

use memmap2::Mmap;
use object::{Object, ObjectSection};

use crate::btf::{self, Btf};
use crate::error::{Error, Result};

/// The pages wholly inside `bytes`, as (start, length); `None` if none.
fn whole_pages(bytes: &[u8]) -> Option<(*mut libc::c_void, usize)> {
    const PAGE: usize = 4096;
    let start = (bytes.as_ptr() as usize).div_ceil(PAGE) * PAGE;
    let end = (bytes.as_ptr() as usize + bytes.len()) / PAGE * PAGE;
    (end > start).then(|| (start as *mut libc::c_void, end - start))
}

/// A read-only private mapping of a whole input file. Its pages may be
/// dropped from memory once read: they come back from the file if touched
/// again. Only a mapped [`Input`] hands one out, so that bytes read into
/// the heap (standard input, a pipe) can never be given to `madvise`,
/// which would zero them.
#[derive(Clone, Copy)]
pub struct Mapping<'a>(&'a [u8]);

impl Mapping<'_> {
    /// Drops the pages wholly inside `bytes` from memory; does nothing for
    /// bytes that are not part of this mapping.
    pub fn release(&self, bytes: &[u8]) {
        let (lo, hi) = (self.0.as_ptr() as usize, self.0.as_ptr() as usize + self.0.len());
        let (start, end) = (bytes.as_ptr() as usize, bytes.as_ptr() as usize + bytes.len());
        if start < lo || end > hi {
            return;
        }
        if let Some((start, len)) = whole_pages(bytes) {
            // SAFETY: the range lies inside a live read-only private file
            // mapping (checked above); for its pages MADV_DONTNEED discards
            // the cached copy only.
            unsafe {
                libc::madvise(start, len, libc::MADV_DONTNEED);
            }
        }
    }

    /// Drops every page of the file from memory.
    pub fn release_all(&self) {
        self.release(self.0)
    }
}

/// Frees the whole pages inside `bytes`, part of a private anonymous
/// mapping: they read as zeros afterwards; with debug assertions they are
/// also made unreadable, so that a read the caller promised not to make
/// faults at once.
///
/// # Safety
///
/// `bytes` lies in a live private anonymous mapping, and no byte of it is
/// read after this call.
pub unsafe fn free_copied_pages(bytes: &[u8]) {
    if let Some((start, len)) = whole_pages(bytes) {
        // SAFETY: by the caller's promise, the pages are the mapping's own
        // and nothing reads them again; unmapping the whole mapping later
        // is unaffected by either call.
        unsafe {
            libc::madvise(start, len, libc::MADV_DONTNEED);
            if cfg!(debug_assertions) {
                libc::mprotect(start, len, libc::PROT_NONE);
            }
        }
    }
}

/// An input file: mapped, or read into memory where it cannot be mapped.
pub struct Input {
    pub path: PathBuf,
    map: Contents,
}

enum Contents {
    Mapped(Mmap),
    /// Standard input (`-`), pipes, devices, and files the kernel will not
    /// map (sysfs: `/sys/kernel/btf/vmlinux` refuses mmap even to root).
    Read(Vec<u8>),
}

impl Input {
    /// Opens `path` (`-`: standard input). A regular file is mapped; what
    /// cannot be mapped is read.
    pub fn open(path: &Path) -> Result<Input> {
        use std::io::Read;
        let read_all = |r: &mut dyn Read| -> Result<Input> {
            let mut v = Vec::new();
            r.read_to_end(&mut v).map_err(|e| Error::io(path, e))?;
            Ok(Input {
                path: path.to_path_buf(),
                map: Contents::Read(v),
            })
        };
        if path.as_os_str() == "-" {
            return read_all(&mut std::io::stdin().lock());
        }
        let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = f.metadata().map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            return Err(Error::Input {
                path: path.to_path_buf(),
                msg: "is a directory, not a file".into(),
            });
        }
        if !meta.is_file() || meta.len() == 0 {
            return read_all(&mut f);
        }
        // SAFETY: the mapping is read-only; a file changed under us can at worst
        // give wrong bytes, which every parser here treats as untrusted input.
        match unsafe { Mmap::map(&f) } {
            Ok(map) => Ok(Input {
                path: path.to_path_buf(),
                map: Contents::Mapped(map),
            }),
            Err(_) => read_all(&mut f),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.map {
            Contents::Mapped(m) => m,
            Contents::Read(v) => v,
        }
    }

    /// The file's mapping, if its bytes are one (pages of it may then be
    /// dropped from memory once read); `None` for bytes read into memory.
    pub fn mapping(&self) -> Option<Mapping<'_>> {
        match &self.map {
            Contents::Mapped(m) => Some(Mapping(m)),
            Contents::Read(_) => None,
        }
    }

    pub fn is_elf(&self) -> bool {
        self.bytes().starts_with(b"\x7fELF")
    }

    pub fn is_btf(&self) -> bool {
        is_raw_btf(self.bytes())
    }

    pub fn object(&self) -> Result<object::File<'_>> {
        object::File::parse(self.bytes()).map_err(|e| Error::elf(&self.path, format!("not a readable ELF file: {e}")))
    }
}

/// The contents of section `name`, decompressed if needed; `None` if absent.
pub fn section_data<'a>(path: &Path, obj: &object::File<'a>, name: &str) -> Result<Option<Cow<'a, [u8]>>> {
    let Some(sec) = obj.section_by_name(name) else {
        return Ok(None);
    };
    let data = sec
        .uncompressed_data()
        .map_err(|e| Error::elf(path, format!("section {name}: cannot read contents: {e}")))?;
    Ok(Some(data))
}

/// Raw BTF, split over `base` if given, with the two mistakes of a base said
/// plainly: split BTF read alone (its string section does not start with
/// the empty string every standalone BTF starts with), and standalone BTF
/// given a base (it reads alone, and a base would shift its ids and
/// strings).
fn parse_raw(path: &Path, data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf> {
    let btf_err = |source| Error::Btf {
        path: path.into(),
        source,
    };
    match base {
        None => btf::read::parse(data).map_err(|e| match e {
            btf::read::ReadError::StringsNoLeadingNul => Error::Input {
                path: path.into(),
                msg: SPLIT_WITHOUT_BASE.into(),
            },
            e => btf_err(e),
        }),
        Some(base) => {
            if btf::read::parse(data).is_ok() {
                return Err(Error::Input {
                    path: path.into(),
                    msg: "is standalone BTF (it reads without a base): with -B its type ids and strings would be \
                          shifted past the base's; drop -B"
                        .into(),
                });
            }
            btf::read::parse_split(data, Some(base)).map_err(btf_err)
        }
    }
}

/// Loads BTF from `path`: raw BTF, or the `.BTF` section of an ELF file. With
/// `base`, the BTF is read as split BTF over it. An ELF whose `.BTF` comes with
/// a `.BTF.base` (distilled base) and no explicit base uses that section as base.
pub fn load_btf(path: &Path, base: Option<Arc<Btf>>) -> Result<Btf> {
    let input = Input::open(path)?;
    load_btf_bytes(path, input.bytes(), base)
}

/// The raw BTF bytes of a file's contents `data`: all of it for raw BTF,
/// the `.BTF` section's for an ELF file (`path` only names the file in
/// errors).
pub fn raw_btf<'a>(path: &Path, data: &'a [u8]) -> Result<Cow<'a, [u8]>> {
    if is_raw_btf(data) {
        return Ok(Cow::Borrowed(data));
    }
    btf_section(path, &btf_elf(path, data)?)
}

/// Whether `data` starts with the BTF magic, in either byte order.
fn is_raw_btf(data: &[u8]) -> bool {
    data.len() >= 2 && matches!([data[0], data[1]], [0x9f, 0xeb] | [0xeb, 0x9f])
}

/// The ELF file a BTF reader was given where it is not raw BTF.
fn btf_elf<'a>(path: &Path, data: &'a [u8]) -> Result<object::File<'a>> {
    if !data.starts_with(b"\x7fELF") {
        return Err(Error::Input {
            path: path.into(),
            msg: "neither raw BTF (magic 0xeb9f) nor an ELF file".into(),
        });
    }
    object::File::parse(data).map_err(|e| Error::elf(path, format!("not a readable ELF file: {e}")))
}

/// The `.BTF` section's bytes of `obj`.
fn btf_section<'a>(path: &Path, obj: &object::File<'a>) -> Result<Cow<'a, [u8]>> {
    section_data(path, obj, ".BTF")?.ok_or_else(|| Error::elf(path, "ELF file has no .BTF section"))
}

/// [`load_btf`] on the bytes of `path` already in memory (`path` only names
/// the file in errors).
pub fn load_btf_bytes(path: &Path, data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf> {
    if is_raw_btf(data) {
        return parse_raw(path, data, base);
    }
    let obj = btf_elf(path, data)?;
    let data = btf_section(path, &obj)?;
    let base = match base {
        Some(b) => Some(b),
        None => match section_data(path, &obj, ".BTF.base")? {
            Some(bb) => Some(Arc::new(btf::read::parse(&bb).map_err(|source| Error::Btf {
                path: PathBuf::from(format!("{} (section .BTF.base)", path.display())),
                source,
            })?)),
            None => None,
        },
    };
    let standalone = base.is_none();
    btf::read::parse_split(&data, base).map_err(|source| match source {
        // A module's .BTF is split BTF over the vmlinux's.
        btf::read::ReadError::StringsNoLeadingNul if standalone => Error::Input {
            path: path.into(),
            msg: format!("section .BTF: {SPLIT_WITHOUT_BASE}"),
        },
        source => Error::Btf {
            path: PathBuf::from(format!("{} (section .BTF)", path.display())),
            source,
        },
    })
}

/// What a split BTF read without its base is told.
/// The message for split BTF read without its base (a caller that offers
/// another remedy than `-B` recognises it by this text).
pub const SPLIT_WITHOUT_BASE: &str = "this looks like split BTF; pass its base with -B BASE (for a module, the vmlinux \
                                  BTF): its string section does not start with the empty string every standalone \
                                  BTF starts with";
