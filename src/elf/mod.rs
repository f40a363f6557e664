//! ELF input: the file is mapped once and read with `object`.
//!
//! This module owns the mapping; later phases borrow section bytes from it.

pub mod debug;
pub mod functab;

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod fuzz;
pub mod write;

use memmap2::Mmap;
use object::{Object, ObjectSection};

use crate::btf::{self, Btf};
use crate::error::{Error, Result};

/// A mapped input file.
pub struct Input {
    pub path: PathBuf,
    map: Mmap,
}

impl Input {
    pub fn open(path: &Path) -> Result<Input> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the mapping is read-only; a file changed under us can at worst
        // give wrong bytes, which every parser here treats as untrusted input.
        let map = unsafe { Mmap::map(&f) }.map_err(|e| Error::io(path, e))?;
        Ok(Input {
            path: path.to_path_buf(),
            map,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn is_elf(&self) -> bool {
        self.map.starts_with(b"\x7fELF")
    }

    pub fn is_btf(&self) -> bool {
        self.map.len() >= 2 && matches!([self.map[0], self.map[1]], [0x9f, 0xeb] | [0xeb, 0x9f])
    }

    pub fn object(&self) -> Result<object::File<'_>> {
        object::File::parse(&*self.map).map_err(|e| Error::elf(&self.path, format!("not a readable ELF file: {e}")))
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

/// Loads BTF from `path`: raw BTF, or the `.BTF` section of an ELF file. With
/// `base`, the BTF is read as split BTF over it. An ELF whose `.BTF` comes with
/// a `.BTF.base` (distilled base) and no explicit base uses that section as base.
pub fn load_btf(path: &Path, base: Option<Arc<Btf>>) -> Result<Btf> {
    let input = Input::open(path)?;
    load_btf_bytes(path, input.bytes(), base)
}

/// [`load_btf`] on the bytes of `path` already in memory (`path` only names
/// the file in errors).
pub fn load_btf_bytes(path: &Path, data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf> {
    let is_btf = data.len() >= 2 && matches!([data[0], data[1]], [0x9f, 0xeb] | [0xeb, 0x9f]);
    if is_btf {
        return btf::read::parse_split(data, base).map_err(|source| Error::Btf {
            path: path.into(),
            source,
        });
    }
    if !data.starts_with(b"\x7fELF") {
        return Err(Error::Input {
            path: path.into(),
            msg: "neither raw BTF (magic 0xeb9f) nor an ELF file".into(),
        });
    }
    let obj = object::File::parse(data).map_err(|e| Error::elf(path, format!("not a readable ELF file: {e}")))?;
    let data = section_data(path, &obj, ".BTF")?.ok_or_else(|| Error::elf(path, "ELF file has no .BTF section"))?;
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
    btf::read::parse_split(&data, base).map_err(|source| Error::Btf {
        path: PathBuf::from(format!("{} (section .BTF)", path.display())),
        source,
    })
}
