//! Debian (`.deb`, `.ddeb`) and RPM packages read as a stream.
//!
//! [`open`] recognises the package by its magic (`!<arch>\n` for Debian's
//! ar archive, the lead magic `ed ab ee db` for RPM) and returns a
//! [`Package`]: an iterator over the payload's regular files, in archive
//! order, that the caller's filter ([`Package::select`]) keeps. Directories,
//! symlinks, devices and hardlinks that carry no data are never entries.
//!
//! Decompression and archive reading run on a thread of their own beside the
//! caller and hand entries over through a channel of capacity two, so memory
//! holds at most the entry being read, two queued ones and the one the caller
//! holds. Dropping the [`Package`] early stops that thread: every read it
//! makes checks a stop flag, and a blocked hand-over fails once the receiver
//! is gone.
//!
//! Supported: `data.tar` uncompressed or compressed with xz, zstd, gzip or
//! lzma (`data.tar.bz2` is refused by name); RPM payloads compressed with
//! xz, zstd, gzip or lzma (not bzip2) in cpio `newc` (`070701`/`070702`),
//! not the stripped `07070X` cpio that rpm uses for files over 4 GiB.
//!
//! This module knows nothing of ELF, DWARF or BTF.

mod deb;
mod rpm;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_tools;

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Which package format [`open`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackageKind {
    /// A Debian `.deb` or `.ddeb` (an ar archive).
    Deb,
    /// An RPM package.
    Rpm,
}

/// One regular file of the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The path inside the payload without a leading `./` or `/`, e.g.
    /// `usr/lib/debug/boot/vmlinux-6.1`.
    pub path: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch, as the archive records it.
    pub mtime: u64,
    /// The file's contents.
    pub data: Contents,
}

/// Where a file's contents are: in memory, or, for a file larger than the
/// package's spill size ([`Package::spill_over`]), in a temporary file
/// that is deleted when the last clone of it is dropped.
#[derive(Clone, Debug)]
pub enum Contents {
    Memory(Vec<u8>),
    Spilled(Arc<tempfile::TempPath>),
}

impl Contents {
    /// The bytes, if they are in memory.
    pub fn in_memory(&self) -> Option<&[u8]> {
        match self {
            Contents::Memory(v) => Some(v),
            Contents::Spilled(_) => None,
        }
    }
}

impl PartialEq for Contents {
    fn eq(&self, other: &Contents) -> bool {
        match (self, other) {
            (Contents::Memory(a), Contents::Memory(b)) => a == b,
            (Contents::Spilled(a), Contents::Spilled(b)) => AsRef::<Path>::as_ref(&**a) == AsRef::<Path>::as_ref(&**b),
            _ => false,
        }
    }
}
impl Eq for Contents {}

/// Files over `over` bytes go to temporary files in `dir`.
#[derive(Clone, Debug)]
struct SpillOver {
    over: u64,
    dir: PathBuf,
}

/// What went wrong, with the package's path and the place in it.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("{}: not a package (neither a Debian ar archive `!<arch>` nor an RPM lead `ed ab ee db`)", path.display())]
    NotAPackage { path: PathBuf },
    #[error("{}: {place}: truncated", path.display())]
    Truncated { path: PathBuf, place: String },
    #[error("{}: {place}: unsupported compressor {name:?} (supported: xz, zstd, gzip, lzma, none)", path.display())]
    UnknownCompressor { path: PathBuf, place: String, name: String },
    #[error("{}: {place}: {what}", path.display())]
    Malformed { path: PathBuf, place: String, what: String },
    #[error("{}: {place}: {source}", path.display())]
    Read {
        path: PathBuf,
        place: String,
        source: io::Error,
    },
    #[error("{}: the package reader thread failed: {what}", path.display())]
    Thread { path: PathBuf, what: String },
}

type Filter = Box<dyn Fn(&str) -> bool + Send>;

/// A package being read; iterate it for its [`Entry`]s.
pub struct Package {
    path: PathBuf,
    kind: PackageKind,
    filter: Arc<Mutex<Filter>>,
    spill: Option<SpillOver>,
    threads: u32,
    state: State,
}

enum State {
    Ready(File),
    Running(Running),
    Done,
}

struct Running {
    rx: Receiver<Result<Entry, PackageError>>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// Opens `path` and recognises its format by magic. Nothing past the magic
/// is read until the first [`Iterator::next`].
pub fn open(path: &Path) -> Result<Package, PackageError> {
    let open_err = |source| PackageError::Open {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(open_err)?;
    let mut magic = [0u8; 8];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(open_err(e)),
        }
    }
    let kind = if got == 8 && &magic == b"!<arch>\n" {
        PackageKind::Deb
    } else if got >= 4 && magic[..4] == rpm::LEAD_MAGIC {
        PackageKind::Rpm
    } else {
        return Err(PackageError::NotAPackage {
            path: path.to_path_buf(),
        });
    };
    file.seek(SeekFrom::Start(0)).map_err(open_err)?;
    Ok(Package {
        path: path.to_path_buf(),
        kind,
        filter: Arc::new(Mutex::new(Box::new(|_: &str| true))),
        spill: None,
        threads: 1,
        state: State::Ready(file),
    })
}

impl Package {
    /// The package's format.
    pub fn kind(&self) -> PackageKind {
        self.kind
    }

    /// The path [`open`] was given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps only the regular files whose normalised path `keep` accepts
    /// (all of them by default); the others are skipped without being
    /// held in memory. Set it before iterating: once reading has started,
    /// it applies to the files not yet read (up to two are already queued).
    pub fn select(self, keep: impl Fn(&str) -> bool + Send + 'static) -> Self {
        *lock(&self.filter) = Box::new(keep);
        self
    }

    /// Writes the files larger than `over` bytes to temporary files in `dir`
    /// as they are read, instead of holding them in memory
    /// ([`Contents::Spilled`]): a kernel's largest module is hundreds of MB,
    /// and the reader runs up to two files ahead. Set it before iterating.
    pub fn spill_over(mut self, over: u64, dir: PathBuf) -> Self {
        self.spill = Some(SpillOver { over, dir });
        self
    }

    /// Decompresses an xz payload of several blocks on up to `n` threads.
    /// `dpkg-deb` and `rpmbuild` write xz in independent blocks (Debian's
    /// kernel debug package: 273 blocks of 24 MiB), and one core
    /// decompressing 6.5 GB is what a package run waits for. Set it before
    /// iterating.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        self
    }

    fn start(&mut self, file: File) -> Result<Running, PackageError> {
        let (tx, rx) = sync_channel(2);
        let stop = Arc::new(AtomicBool::new(false));
        let cx = Cx {
            path: self.path.clone(),
            filter: Arc::clone(&self.filter),
            spill: self.spill.clone(),
            threads: self.threads,
            tx,
            stop: Arc::clone(&stop),
        };
        let kind = self.kind;
        let reader = BufReader::with_capacity(1 << 16, cx.stoppable(file));
        let handle = std::thread::Builder::new()
            .name("btfkit-package".into())
            .spawn(move || cx.run(kind, reader))
            .map_err(|e| PackageError::Thread {
                path: self.path.clone(),
                what: format!("cannot start it: {e}"),
            })?;
        Ok(Running { rx, stop, handle })
    }
}

impl Iterator for Package {
    type Item = Result<Entry, PackageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let State::Ready(_) = self.state {
            let State::Ready(file) = std::mem::replace(&mut self.state, State::Done) else {
                unreachable!("checked just above")
            };
            match self.start(file) {
                Ok(r) => self.state = State::Running(r),
                Err(e) => return Some(Err(e)),
            }
        }
        let State::Running(r) = &self.state else {
            return None;
        };
        match r.rx.recv() {
            Ok(Ok(entry)) => Some(Ok(entry)),
            Ok(Err(e)) => {
                self.finish();
                Some(Err(e))
            }
            Err(_) => self.finish().map(Err),
        }
    }
}

impl std::iter::FusedIterator for Package {}

impl Package {
    /// Ends the reader thread (stopping it if it still runs) and reports
    /// a panic on it as an error.
    fn finish(&mut self) -> Option<PackageError> {
        let State::Running(r) = std::mem::replace(&mut self.state, State::Done) else {
            return None;
        };
        r.stop.store(true, Ordering::Relaxed);
        drop(r.rx);
        r.handle.join().err().map(|p| PackageError::Thread {
            path: self.path.clone(),
            what: p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".into()),
        })
    }
}

impl Drop for Package {
    fn drop(&mut self) {
        self.finish();
    }
}

fn lock(f: &Mutex<Filter>) -> std::sync::MutexGuard<'_, Filter> {
    f.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reader that fails once the consumer has gone away, so that a thread
/// skipping through a large unselected stretch stops promptly. It wraps both
/// the file and the decompressed stream: a well-compressed stretch is megabytes
/// of output for one buffer of input.
pub(crate) struct Stoppable<R> {
    inner: R,
    stop: Arc<AtomicBool>,
}

impl<R: Read> Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("package reading stopped"));
        }
        self.inner.read(buf)
    }
}

/// A reader over exactly `left` bytes of `inner`: an end of input before
/// them is an `UnexpectedEof` error, not a quiet end.
pub(crate) struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Exact<R> {
    pub(crate) fn new(inner: R, len: u64) -> Self {
        Exact { inner, left: len }
    }
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The decompressing reader of a member or payload compressed with `name`
/// (None for a name not known); xz on up to `threads` threads.
pub(crate) fn decoder<'a, R: Read + Send + 'a>(
    name: &str,
    r: R,
    threads: u32,
) -> Option<io::Result<Box<dyn Read + Send + 'a>>> {
    Some(Ok(match name {
        "none" => Box::new(r),
        "xz" if threads > 1 => Box::new(ParallelXz {
            threads,
            stream: Some(io::BufReader::with_capacity(1 << 16, r)),
            started: false,
            decoder: None,
        }),
        "xz" => Box::new(liblzma::read::XzDecoder::new_multi_decoder(r)),
        "lzma" => {
            let stream = match liblzma::stream::Stream::new_lzma_decoder(u64::MAX) {
                Ok(s) => s,
                Err(e) => return Some(Err(io::Error::other(e))),
            };
            Box::new(liblzma::read::XzDecoder::new_stream(r, stream))
        }
        "zstd" => match zstd::stream::read::Decoder::new(r) {
            Ok(d) => Box::new(d),
            Err(e) => return Some(Err(e)),
        },
        "gzip" => Box::new(flate2::read::MultiGzDecoder::new(r)),
        _ => return None,
    }))
}

/// xz decompressed by liblzma's multi-threaded decoder, which spreads the
/// blocks of one stream over its threads (a file of one block decodes on
/// one). That decoder stops at the end of a stream, so the streams of a
/// concatenated file (and the zero padding between them) are taken here,
/// one decoder each, as `xz -d` does.
struct ParallelXz<R: Read> {
    threads: u32,
    /// The input before the first stream and between two.
    stream: Option<io::BufReader<R>>,
    /// Whether a stream has been decoded: padding may follow one only, and
    /// an input without any is truncated.
    started: bool,
    decoder: Option<liblzma::bufread::XzDecoder<io::BufReader<R>>>,
}

impl<R: Read> ParallelXz<R> {
    /// Starts the next stream's decoder; false at the end of the input.
    fn next_stream(&mut self) -> io::Result<bool> {
        let Some(mut r) = self.stream.take() else {
            return Ok(false);
        };
        if !self.started {
            if io::BufRead::fill_buf(&mut r)?.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.started = true;
            return self.start(r);
        }
        // Stream padding: zero bytes, a multiple of four.
        let mut padding = 0u64;
        loop {
            let buf = io::BufRead::fill_buf(&mut r)?;
            if buf.is_empty() {
                break;
            }
            let zeros = buf.iter().take_while(|&&b| b == 0).count();
            padding += zeros as u64;
            let more = zeros == buf.len();
            io::BufRead::consume(&mut r, zeros);
            if !more {
                break;
            }
        }
        if !padding.is_multiple_of(4) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("xz: {padding} bytes of stream padding, not a multiple of four"),
            ));
        }
        if io::BufRead::fill_buf(&mut r)?.is_empty() {
            return Ok(false);
        }
        self.start(r)
    }

    fn start(&mut self, r: io::BufReader<R>) -> io::Result<bool> {
        let mut mt = liblzma::stream::MtStreamBuilder::new();
        mt.threads(self.threads)
            // Two blocks of Debian's 24 MiB (with their dictionaries and
            // input) in flight per two threads, and no more: more buys no
            // speed here and costs memory (PERF.md). Blocks too large for
            // this take fewer threads.
            .memlimit_threading(u64::from(self.threads) * (48 << 20))
            .memlimit_stop(u64::MAX)
            .timeout_ms(0);
        let stream = mt.decoder().map_err(io::Error::other)?;
        self.decoder = Some(liblzma::bufread::XzDecoder::new_stream(r, stream));
        Ok(true)
    }
}

impl<R: Read> Read for ParallelXz<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if let Some(d) = &mut self.decoder {
                let n = d.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                // the end of a stream: the input goes on to the next
                let d = self.decoder.take().expect("matched just above");
                self.stream = Some(d.into_inner());
            }
            if !self.next_stream()? {
                return Ok(0);
            }
        }
    }
}

/// The reader thread's side: where it reads from, what it keeps, where it
/// sends.
pub(crate) struct Cx {
    path: PathBuf,
    filter: Arc<Mutex<Filter>>,
    spill: Option<SpillOver>,
    /// Threads for an xz payload ([`Package::threads`]).
    threads: u32,
    tx: SyncSender<Result<Entry, PackageError>>,
    stop: Arc<AtomicBool>,
}

impl Cx {
    fn run(self, kind: PackageKind, reader: BufReader<Stoppable<File>>) {
        let done = match kind {
            PackageKind::Deb => deb::read(reader, &self),
            PackageKind::Rpm => rpm::read(reader, &self),
        };
        // Once stopped, whatever error the stop caused is not the caller's.
        if let Err(e) = done
            && !self.stop.load(Ordering::Relaxed)
        {
            let _ = self.tx.send(Err(e));
        }
    }

    /// `r`, failing once the caller has gone away.
    pub(crate) fn stoppable<R: Read>(&self, r: R) -> Stoppable<R> {
        Stoppable {
            inner: r,
            stop: Arc::clone(&self.stop),
        }
    }

    /// Whether the caller wants the regular file at normalised `path`.
    pub(crate) fn wants(&self, path: &str) -> bool {
        (lock(&self.filter))(path)
    }

    /// Hands `entry` over; an error once the caller has gone.
    pub(crate) fn emit(&self, entry: Entry) -> Result<(), PackageError> {
        self.tx.send(Ok(entry)).map_err(|_| {
            self.stop.store(true, Ordering::Relaxed);
            self.malformed("", "the caller stopped reading")
        })
    }

    pub(crate) fn io(&self, place: impl Into<String>, e: io::Error) -> PackageError {
        let (path, place) = (self.path.clone(), place.into());
        if e.kind() == io::ErrorKind::UnexpectedEof {
            PackageError::Truncated { path, place }
        } else {
            PackageError::Read { path, place, source: e }
        }
    }

    pub(crate) fn malformed(&self, place: impl Into<String>, what: impl Into<String>) -> PackageError {
        PackageError::Malformed {
            path: self.path.clone(),
            place: place.into(),
            what: what.into(),
        }
    }

    pub(crate) fn unknown_compressor(&self, place: impl Into<String>, name: &str) -> PackageError {
        PackageError::UnknownCompressor {
            path: self.path.clone(),
            place: place.into(),
            name: name.to_string(),
        }
    }
}

/// `./usr/lib/x`, `/usr/lib/x` and `usr/lib/x` all become `usr/lib/x`.
pub(crate) fn normalise(path: &str) -> String {
    let mut p = path;
    loop {
        if let Some(rest) = p.strip_prefix("./") {
            p = rest;
        } else if let Some(rest) = p.strip_prefix('/') {
            p = rest;
        } else {
            break;
        }
    }
    p.to_string()
}

impl Cx {
    /// A file's `size` bytes of contents from `r`: in memory, or in a
    /// temporary file if it is larger than the spill size.
    pub(crate) fn contents(&self, r: &mut dyn Read, size: u64) -> io::Result<Contents> {
        match &self.spill {
            Some(s) if size > s.over => {
                let mut f = tempfile::Builder::new().prefix("btfkit-member-").tempfile_in(&s.dir)?;
                io::copy(&mut Exact::new(r, size), f.as_file_mut())?;
                Ok(Contents::Spilled(Arc::new(f.into_temp_path())))
            }
            _ => read_data(r, size).map(Contents::Memory),
        }
    }
}

/// Reads exactly `size` bytes of a file's contents, growing the buffer as
/// bytes arrive (a garbled size cannot make it allocate up front).
pub(crate) fn read_data(r: &mut dyn Read, size: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(usize::try_from(size.min(1 << 26)).unwrap_or(0));
    Exact::new(r, size).read_to_end(&mut data)?;
    Ok(data)
}
