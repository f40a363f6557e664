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
    /// A package's member this run does not read: its previous line holds
    /// (the package is byte-identical, and the output is as recorded), so
    /// it is reused without its bytes, and the package reader skips it.
    Proven,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Vmlinux,
    Module,
}

/// What the encoder reads: a file, or bytes in memory and the name its
/// messages give them.
pub type Source<'a> = (PathBuf, Option<&'a Arc<Vec<u8>>>);

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
    /// A package member's: the sha256 of the package file (hex). Its
    /// fingerprint is then the package's and its path's, which a rerun can
    /// check before reading the package.
    pub package_sha256: Option<Arc<PackageSha>>,
}

/// A package file's sha256 (hex). A rerun reads it before the stream, to
/// know which lines hold; a first run reads it on a thread of its own
/// beside the stream's start, and the first fingerprint waits for it.
pub struct PackageSha {
    value: std::sync::OnceLock<Result<Arc<str>, String>>,
    pending: Mutex<Option<std::thread::JoinHandle<Result<String, KernelError>>>>,
}

impl std::fmt::Debug for PackageSha {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value.get() {
            Some(v) => write!(f, "PackageSha({v:?})"),
            None => f.write_str("PackageSha(reading)"),
        }
    }
}

impl PackageSha {
    /// One already read.
    pub fn ready(sha256: &str) -> Arc<PackageSha> {
        PackageSha::settled(Ok(sha256.into()))
    }

    fn settled(v: Result<Arc<str>, String>) -> Arc<PackageSha> {
        Arc::new(PackageSha {
            value: v.into(),
            pending: Mutex::new(None),
        })
    }

    /// `path`'s, read on a thread of its own (here, if none can start).
    pub fn reading(path: &Path) -> Arc<PackageSha> {
        let p = path.to_path_buf();
        match std::thread::Builder::new()
            .name("btfkit-package-sha".into())
            .spawn(move || stream_sha256(&p))
        {
            Ok(h) => Arc::new(PackageSha {
                value: std::sync::OnceLock::new(),
                pending: Mutex::new(Some(h)),
            }),
            Err(_) => PackageSha::settled(
                stream_sha256(path)
                    .map(Into::into)
                    .map_err(|e| crate::error::one_line(&e)),
            ),
        }
    }

    /// The sha256, once read.
    pub fn get(&self) -> Result<Arc<str>, KernelError> {
        let v = self.value.get_or_init(|| {
            let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
            match pending.map(|h| h.join()) {
                Some(Ok(Ok(s))) => Ok(s.into()),
                Some(Ok(Err(e))) => Err(crate::error::one_line(&e)),
                Some(Err(_)) => Err("the thread reading it stopped".into()),
                None => Err("not read".into()),
            }
        });
        v.clone().map_err(|why| KernelError::PackageSha { why })
    }
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
            package_sha256: None,
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
            package_sha256: None,
        }
    }

    /// A package's member (named by its path in the package, with the time
    /// the package records), in memory or spilled to a temporary file, from
    /// the package of sha256 `package`.
    pub fn member(e: crate::package::Entry, kind: InputKind, out: String, package: Arc<PackageSha>) -> Input {
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
            package_sha256: Some(package),
        }
    }

    /// The member `r` records, not read: see [`InputData::Proven`].
    pub fn proven(r: &Record, out: String, package: Arc<PackageSha>) -> Input {
        Input {
            rel: r.input.clone(),
            kind: r.kind,
            out,
            size: r.size,
            mtime: 0,
            data: InputData::Proven,
            package_sha256: Some(package),
        }
    }

    /// The name messages give it: the file's path, or its path in the package.
    pub fn name(&self) -> PathBuf {
        match &self.data {
            InputData::File(p) => p.clone(),
            InputData::Bytes(_) | InputData::Spilled(_) | InputData::Proven => PathBuf::from(&self.rel),
        }
    }

    /// What the encoder is given: the file it reads, or, for bytes in
    /// memory, the bytes and the name its messages use. A member this run
    /// does not read has neither.
    pub fn source(&self) -> Result<Source<'_>, KernelError> {
        match &self.data {
            InputData::File(p) => Ok((p.clone(), None)),
            InputData::Spilled(p) => Ok((p.to_path_buf(), None)),
            InputData::Bytes(b) => Ok((PathBuf::from(&self.rel), Some(b))),
            InputData::Proven => Err(KernelError::NotRead {
                input: self.rel.clone(),
            }),
        }
    }

    /// What tells it from another input of the same path, as hex. For a
    /// package's member: a sha256 over the package's sha256 and the
    /// member's path (a byte-identical package holds the same bytes there).
    /// For a file: a sha256 over its size, mtime, ELF header and section
    /// header table (the bytes that move when anything in the file changes
    /// size or place); a file too short or not ELF hashes what it has.
    pub fn fingerprint(&self) -> Result<String, KernelError> {
        if let Some(p) = &self.package_sha256 {
            return Ok(member_fingerprint(&p.get()?, &self.rel));
        }
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
            InputData::Proven => {
                return Err(KernelError::NotRead {
                    input: self.rel.clone(),
                });
            }
        }
        Ok(hex(&h.finalize()))
    }
}

/// The fingerprint of the member at `rel` of the package of sha256 `package`.
pub(super) fn member_fingerprint(package: &str, rel: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"package member\0");
    h.update(package.as_bytes());
    h.update(b"\0");
    h.update(rel.as_bytes());
    hex(&h.finalize())
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
    stream_sha256(path).ok()
}

/// The sha256 of a file read as a stream (a package of a gigabyte is
/// never held), as hex.
pub(super) fn stream_sha256(path: &Path) -> Result<String, KernelError> {
    let mut f = File::open(path).map_err(io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(hex(&h.finalize())),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(path)(e)),
        }
    }
}
