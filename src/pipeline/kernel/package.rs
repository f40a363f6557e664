//! A kernel read from its debug package as a stream (see [`crate::package`]):
//! nothing is unpacked to disk unless the package puts modules before its
//! vmlinux.
//!
//! The modules need the vmlinux's BTF as their base, so the vmlinux must be
//! encoded first. Debian and Ubuntu packages (`usr/lib/debug/boot/` sorts
//! before `usr/lib/debug/lib/`) hold it first, and then nothing waits. Where
//! modules come first (RPM payloads are sorted by path, and Fedora's vmlinux
//! sits at `lib/modules/<ver>/vmlinux`, after `kernel/`), those modules are
//! written to a temporary directory as they pass and encoded from there once
//! the vmlinux has been reached: held in memory they would be gigabytes.

use std::io::Write;

use super::*;
use crate::package::{self, Entry, PackageError};

/// What a member of a kernel package is to the run.
#[derive(Debug, PartialEq)]
enum Member {
    Vmlinux,
    /// A module, with its output name under `modules/`.
    Module(String),
}

/// `usr/lib/debug/boot/vmlinux-<ver>` (Debian, Ubuntu) or
/// `usr/lib/debug/{,usr/}lib/modules/<ver>/vmlinux` (Fedora) is the vmlinux;
/// `*.ko` or `*.ko.debug` below `usr/lib/debug/{,usr/}lib/modules/<ver>/`
/// a module, named by its path below that directory.
fn member(path: &str) -> Option<Member> {
    let debug = path.strip_prefix("usr/lib/debug/")?;
    if let Some(name) = debug.strip_prefix("boot/") {
        return name.starts_with("vmlinux-").then_some(Member::Vmlinux);
    }
    let mods = debug
        .strip_prefix("lib/modules/")
        .or_else(|| debug.strip_prefix("usr/lib/modules/"))?;
    let (_version, under) = mods.split_once('/')?;
    if under == "vmlinux" {
        return Some(Member::Vmlinux);
    }
    (under.ends_with(".ko") || under.ends_with(".ko.debug"))
        .then(|| Member::Module(format!("modules/{}", module_output_name(under))))
}

fn module_input(e: Entry, out: String) -> Input {
    Input::member(e, InputKind::Module, out)
}

/// Members larger than this go to a temporary file as the package is read,
/// and are mapped from there when encoded, as a tree's files are: held in
/// memory, the largest module (`amdgpu.ko`, 596 MB) doubled the package
/// run's peak. Few modules are this large, so the rest still pass in
/// memory, never touching the disk.
pub const SPILL_OVER: u64 = 32 << 20;

/// Opens the kernel package at `path`: reads its stream up to the vmlinux
/// (spilling any module before it to a temporary directory), and returns
/// the item whose modules are the spilled ones, then the rest of the stream.
/// A member larger than `spill_over` bytes is read into a temporary file
/// ([`SPILL_OVER`] is what `btfkit kernel` takes).
pub fn open_package(path: &Path, name: Option<String>, spill_over: u64) -> Result<Item, KernelError> {
    let mut pkg = package::open(path)?
        .select(|p| member(p).is_some())
        .spill_over(spill_over, std::env::temp_dir());
    let mut spill: Option<Spill> = None;
    let vmlinux = loop {
        let e = match pkg.next() {
            Some(e) => e?,
            None => {
                return Err(KernelError::NoVmlinux {
                    root: path.to_path_buf(),
                });
            }
        };
        match member(&e.path) {
            Some(Member::Vmlinux) => break e,
            Some(Member::Module(out)) => {
                let s = match &mut spill {
                    Some(s) => s,
                    None => spill.insert(Spill::new(path)?),
                };
                s.push(e, out)?;
            }
            None => {}
        }
    };
    let vmlinux_path = vmlinux.path.clone();
    let vm = Input::member(vmlinux, InputKind::Vmlinux, "vmlinux.btf".into());
    let spilled = spill
        .as_mut()
        .map(|s| std::mem::take(&mut s.inputs))
        .unwrap_or_default();
    Ok(Item {
        name,
        source: path.to_path_buf(),
        vmlinux: vm,
        module_count: None,
        modules: Box::new(Modules {
            package: path.to_path_buf(),
            vmlinux: vmlinux_path,
            spilled: spilled.into_iter(),
            _spill: spill,
            stream: pkg,
        }),
    })
}

/// The modules of a package: the spilled ones, then the stream's.
struct Modules {
    package: PathBuf,
    vmlinux: String,
    spilled: std::vec::IntoIter<Input>,
    /// Removed (with the spilled files) when the modules are done.
    _spill: Option<Spill>,
    stream: package::Package,
}

impl Iterator for Modules {
    type Item = Result<Input, KernelError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(m) = self.spilled.next() {
            return Some(Ok(m));
        }
        loop {
            let e = match self.stream.next()? {
                Ok(e) => e,
                Err(e) => return Some(Err(e.into())),
            };
            match member(&e.path) {
                Some(Member::Module(out)) => return Some(Ok(module_input(e, out))),
                Some(Member::Vmlinux) => {
                    return Some(Err(KernelError::SeveralKernels {
                        root: self.package.clone(),
                        a: PathBuf::from(&self.vmlinux),
                        b: PathBuf::from(e.path),
                    }));
                }
                None => {}
            }
        }
    }
}

/// Modules met before the vmlinux, written out until it is encoded.
struct Spill {
    dir: tempfile::TempDir,
    inputs: Vec<Input>,
}

impl Spill {
    fn new(package: &Path) -> Result<Spill, KernelError> {
        let dir = tempfile::Builder::new()
            .prefix("btfkit-spill-")
            .tempdir()
            .map_err(|source| KernelError::Spill {
                package: package.to_path_buf(),
                source,
            })?;
        Ok(Spill {
            dir,
            inputs: Vec::new(),
        })
    }

    fn push(&mut self, e: Entry, out: String) -> Result<(), KernelError> {
        let package::Contents::Memory(data) = e.data else {
            // in a file of its own already
            self.inputs.push(module_input(e, out));
            return Ok(());
        };
        let path = self.dir.path().join(format!("{}.ko", self.inputs.len()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&path)?;
            f.write_all(&data)
        };
        write().map_err(|source| KernelError::Spill {
            package: path.clone(),
            source,
        })?;
        // The package's path and time, not the spilled file's: they are what
        // a rerun sees again.
        let mut input = Input::file(path, e.path, InputKind::Module, out)?;
        input.mtime = e.mtime;
        self.inputs.push(input);
        Ok(())
    }
}

impl From<PackageError> for KernelError {
    fn from(e: PackageError) -> KernelError {
        KernelError::Package(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_debian_and_fedora_packages() {
        assert_eq!(member("usr/lib/debug/boot/vmlinux-6.12.1-amd64"), Some(Member::Vmlinux));
        assert_eq!(member("usr/lib/debug/boot/System.map-6.12.1-amd64"), None);
        assert_eq!(
            member("usr/lib/debug/lib/modules/6.12.1/kernel/fs/btrfs/btrfs.ko"),
            Some(Member::Module("modules/kernel/fs/btrfs/btrfs.btf".into()))
        );
        assert_eq!(
            member("usr/lib/debug/lib/modules/6.12.1/vmlinux"),
            Some(Member::Vmlinux)
        );
        assert_eq!(
            member("usr/lib/debug/usr/lib/modules/6.8.0/kernel/net/fou.ko.debug"),
            Some(Member::Module("modules/kernel/net/fou.btf".into()))
        );
        assert_eq!(member("usr/lib/debug/.build-id/ab/cdef.debug"), None);
        assert_eq!(member("usr/share/doc/linux/changelog.gz"), None);
        assert_eq!(member("usr/lib/debug/lib/modules/6.12.1/modules.order"), None);
    }
}
