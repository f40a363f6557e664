//! Safe output: everything is written to a temporary file beside the target
//! and renamed over it, so a failure or a kill never leaves a partial file.
//!
//! The temporary file is `.<name>.btfkit-tmp.<pid>.<seq>` in the target's
//! directory (same file system, so the rename is atomic). Its contents are
//! fsynced before the rename and the directory after it. A process killed
//! before the rename leaves its temporary file behind; the next btfkit
//! process that writes into that directory removes such files once their
//! process no longer exists (`remove_stale_temps`).

use std::ffi::OsStr;
use std::fs::{File, Permissions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const TMP_MARK: &str = ".btfkit-tmp.";

/// Writes `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Like `write_atomic`, but the content is produced by `fill` into a
/// buffered writer (for outputs too large to build in memory first).
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    write_impl(path, path, None, fill)
}

/// Replaces the existing file `path` with `bytes` atomically, keeping what
/// makes it the same file to its users: a symbolic link is followed (the
/// file it names is replaced, the link stays), and the mode (and, where
/// allowed, the owner) is set on the new file before it is renamed into
/// place, so no moment exists where the file has other permissions. Hard
/// links to the old file keep the old contents (as with any rename).
pub fn replace_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let target = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    let meta = std::fs::metadata(&target).map_err(|e| Error::io(path, e))?;
    write_impl(path, &target, Some(meta), |w| w.write_all(bytes))
}

/// Where a user-named output goes.
enum Destination {
    /// `-`: standard output.
    Stdout,
    /// A character device or a FIFO: written in place, as a stream.
    Stream(PathBuf),
    /// A regular file, or a path that does not exist yet: atomic replace of
    /// this path (a symbolic link's target, the link kept).
    File(PathBuf),
}

fn destination(path: &Path) -> Result<Destination> {
    use std::os::unix::fs::FileTypeExt;
    if path.as_os_str() == "-" {
        // SAFETY: isatty only inspects the descriptor.
        if unsafe { libc::isatty(libc::STDOUT_FILENO) } == 1 {
            return Err(Error::Input {
                path: path.to_path_buf(),
                msg: "standard output is a terminal: refusing to write binary BTF to it (redirect or pipe it)".into(),
            });
        }
        return Ok(Destination::Stdout);
    }
    let refuse = |what: &str| Error::Input {
        path: path.to_path_buf(),
        msg: format!("is {what}: btfkit writes BTF to regular files, character devices, FIFOs and `-`"),
    };
    match std::fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_dir() {
                Err(refuse("a directory"))
            } else if t.is_char_device() || t.is_fifo() {
                Ok(Destination::Stream(path.to_path_buf()))
            } else if t.is_block_device() {
                Err(refuse("a block device"))
            } else if t.is_socket() {
                Err(refuse("a socket"))
            } else {
                // A symbolic link is followed: its target is replaced.
                Ok(Destination::File(
                    std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?,
                ))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Destination::File(path.to_path_buf())),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Writes a user-named output: a regular file (or a new one) atomically, as
/// [`write_atomic_with`] (a symbolic link's target is replaced, the link
/// stays); a character device or a FIFO directly, as a stream, never
/// replaced by a file (`-o /dev/null` as root); `-` to standard output,
/// refused when that is a terminal. Directories, block devices and sockets
/// are refused.
pub fn write_output(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let (f, shown) = match destination(path)? {
        Destination::File(target) => return write_impl(path, &target, None, fill),
        Destination::Stdout => {
            use std::os::fd::AsFd;
            let fd = std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io(path, e))?;
            (File::from(fd), Path::new("standard output"))
        }
        Destination::Stream(p) => (
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(|e| Error::io(path, e))?,
            path,
        ),
    };
    let to_stdout = shown == Path::new("standard output");
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    fill(&mut w).and_then(|_| w.flush()).map_err(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe if to_stdout => Error::StdoutClosed,
        _ => Error::io(shown, e),
    })
}

/// `shown` names the file in errors, `target` is where it goes.
fn write_impl(
    shown: &Path,
    target: &Path,
    like: Option<std::fs::Metadata>,
    fill: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let file_name = target.file_name().ok_or_else(|| Error::Input {
        path: shown.to_path_buf(),
        msg: "output path has no file name".into(),
    })?;
    remove_stale_temps(dir);
    // Unique per process and per call: threads of one process may write
    // beside each other (batch mode; the tests decompress corpus files in parallel).
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}{TMP_MARK}{}.{}",
        file_name.to_string_lossy(),
        std::process::id(),
        seq
    ));
    let res = (|| -> std::io::Result<()> {
        let f = File::create(&tmp)?;
        if let Some(m) = &like {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            // Best effort: only root may give a file away; the mode is kept either way.
            let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
            f.set_permissions(Permissions::from_mode(m.mode() & 0o7777))?;
        }
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, target)?;
        // The rename itself is durable once the directory is synced; a
        // directory that cannot be opened for that is no reason to fail.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(shown, e));
    }
    Ok(())
}

/// Removes temporary files of btfkit processes that no longer exist from
/// `dir`, once per directory and process (batch mode writes thousands of
/// files into one directory). A process that still exists, or whose
/// existence cannot be decided, keeps its files.
fn remove_stale_temps(dir: &Path) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static DONE: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    {
        let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
        if !done.get_or_insert_with(HashSet::new).insert(dir.to_path_buf()) {
            return;
        }
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        if let Some(pid) = temp_pid(&name)
            && pid != std::process::id()
            && !process_exists(pid)
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The writer's pid of a temporary file name `.<name>.btfkit-tmp.<pid>.<seq>`.
fn temp_pid(name: &OsStr) -> Option<u32> {
    let n = name.to_str()?;
    if !n.starts_with('.') {
        return None;
    }
    let (_, tail) = n.rsplit_once(TMP_MARK)?;
    let (pid, seq) = tail.split_once('.')?;
    seq.parse::<u64>().ok()?;
    pid.parse().ok()
}

fn process_exists(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else { return true };
    if p <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks whether the process exists.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_give_their_pid() {
        assert_eq!(temp_pid(OsStr::new(".vmlinux.btfkit-tmp.1234.0")), Some(1234));
        assert_eq!(temp_pid(OsStr::new(".a.btfkit-tmp.b.btfkit-tmp.77.12")), Some(77));
        assert_eq!(temp_pid(OsStr::new("vmlinux.btfkit-tmp.1234.0")), None);
        assert_eq!(temp_pid(OsStr::new(".vmlinux.btfkit-tmp.x.0")), None);
        assert_eq!(temp_pid(OsStr::new(".vmlinux.btfkit-tmp.12")), None);
        assert_eq!(temp_pid(OsStr::new(".vmlinux")), None);
    }
}
