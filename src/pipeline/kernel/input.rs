//! One input of a kernel and its fingerprint.

use super::*;

/// Where an input's bytes are.
#[derive(Clone, Debug)]
pub enum InputData {
    /// A file, mapped when it is encoded.
    File(PathBuf),
    /// Bytes in memory (a package's member); the input's `rel` names them.
    Bytes(Arc<Vec<u8>>),
    /// A package's member too large to hold in memory, in a temporary file
    /// (deleted with the last clone), mapped when it is encoded as a tree's
    /// file is; the input's `rel` names it.
    Spilled(Arc<tempfile::TempPath>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Vmlinux,
    Module,
}

/// One file of a kernel to encode.
#[derive(Clone, Debug)]
pub struct Input {
    /// Its path relative to the tree's root (or inside the package).
    pub rel: String,
    pub kind: InputKind,
    /// Its output relative to the item's output directory: `vmlinux.btf`,
    /// or `modules/<path under the modules' root, .ko replaced by .btf>`.
    pub out: String,
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: u64,
    pub data: InputData,
}

impl Input {
    /// A file of a tree: size and mtime from its metadata.
    pub fn file(path: PathBuf, rel: String, kind: InputKind, out: String) -> Result<Input, KernelError> {
        let m = std::fs::metadata(&path).map_err(io(&path))?;
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        Ok(Input {
            rel,
            kind,
            out,
            size: m.len(),
            mtime,
            data: InputData::File(path),
        })
    }

    /// Bytes in memory (a package's member at `rel`, with its recorded mtime).
    pub fn bytes(rel: String, kind: InputKind, out: String, mtime: u64, data: Arc<Vec<u8>>) -> Input {
        Input {
            rel,
            kind,
            out,
            size: data.len() as u64,
            mtime,
            data: InputData::Bytes(data),
        }
    }

    /// A package's member (named by its path in the package, with the time
    /// the package records), in memory or spilled to a temporary file.
    pub fn member(e: crate::package::Entry, kind: InputKind, out: String) -> Input {
        let data = match e.data {
            crate::package::Contents::Memory(v) => InputData::Bytes(Arc::new(v)),
            crate::package::Contents::Spilled(p) => InputData::Spilled(p),
        };
        Input {
            rel: e.path,
            kind,
            out,
            size: e.size,
            mtime: e.mtime,
            data,
        }
    }

    /// The name messages give it: the file's path, or its path in the package.
    pub fn name(&self) -> PathBuf {
        match &self.data {
            InputData::File(p) => p.clone(),
            InputData::Bytes(_) | InputData::Spilled(_) => PathBuf::from(&self.rel),
        }
    }

    /// What the encoder is given: the file it reads, or, for bytes in
    /// memory, the bytes and the name its messages use.
    pub fn source(&self) -> (PathBuf, Option<&Arc<Vec<u8>>>) {
        match &self.data {
            InputData::File(p) => (p.clone(), None),
            InputData::Spilled(p) => (p.to_path_buf(), None),
            InputData::Bytes(b) => (PathBuf::from(&self.rel), Some(b)),
        }
    }

    /// A sha256 over its size, mtime, ELF header and section header table
    /// (the bytes that move when anything in the file changes size or
    /// place), as hex. A file too short or not ELF hashes what it has.
    pub fn fingerprint(&self) -> Result<String, KernelError> {
        let mut h = Sha256::new();
        h.update(self.size.to_le_bytes());
        h.update(self.mtime.to_le_bytes());
        match &self.data {
            InputData::Bytes(b) => {
                let (ehdr, sht) = header_ranges(b);
                h.update(&b[..ehdr.min(b.len())]);
                if let Some((off, len)) = sht {
                    let end = off.saturating_add(len).min(b.len());
                    h.update(&b[off.min(end)..end]);
                }
            }
            InputData::File(p) => hash_headers_of(&mut h, p)?,
            InputData::Spilled(p) => hash_headers_of(&mut h, p)?,
        }
        Ok(hex(&h.finalize()))
    }
}

/// Feeds `h` a file's ELF header and section header table (as
/// [`Input::fingerprint`] hashes bytes in memory).
fn hash_headers_of(h: &mut Sha256, p: &Path) -> Result<(), KernelError> {
    let mut f = File::open(p).map_err(io(p))?;
    let mut head = Vec::with_capacity(64);
    (&mut f).take(64).read_to_end(&mut head).map_err(io(p))?;
    h.update(&head);
    if let (_, Some((off, len))) = header_ranges(&head) {
        let mut sht = Vec::new();
        f.seek(SeekFrom::Start(off as u64)).map_err(io(p))?;
        f.take(len as u64).read_to_end(&mut sht).map_err(io(p))?;
        h.update(&sht);
    }
    Ok(())
}

/// The ELF header's length and the section header table's place, read
/// from the first bytes of a file (None where they do not say).
pub(super) fn header_ranges(b: &[u8]) -> (usize, Option<(usize, usize)>) {
    if b.len() < 52 || &b[..4] != b"\x7fELF" {
        return (b.len().min(64), None);
    }
    let le = b[5] != 2;
    let u16_at = |o: usize| {
        let x = [b[o], b[o + 1]];
        if le {
            u16::from_le_bytes(x)
        } else {
            u16::from_be_bytes(x)
        }
    };
    let (ehdr, shoff, shentsize, shnum) = if b[4] == 2 {
        if b.len() < 64 {
            return (b.len(), None);
        }
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[0x28..0x30]);
        let off = if le {
            u64::from_le_bytes(x)
        } else {
            u64::from_be_bytes(x)
        };
        (64, off, u16_at(0x3a), u16_at(0x3c))
    } else {
        let mut x = [0u8; 4];
        x.copy_from_slice(&b[0x20..0x24]);
        let off = if le {
            u32::from_le_bytes(x)
        } else {
            u32::from_be_bytes(x)
        } as u64;
        (52, off, u16_at(0x2e), u16_at(0x30))
    };
    // Extended numbering (shnum 0): the first header holds the count; it is enough.
    let n = (shnum as usize).max(1);
    let sht = usize::try_from(shoff)
        .ok()
        .filter(|&o| o > 0)
        .map(|o| (o, n * shentsize as usize));
    (ehdr, sht)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The sha256 of `bytes` as hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(super) fn file_sha256(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| sha256_hex(&b))
}
