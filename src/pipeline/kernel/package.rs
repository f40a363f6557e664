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
use input::member_fingerprint;

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

/// How a package is read.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    /// A member larger than this is read into a temporary file
    /// ([`SPILL_OVER`] is what `btfkit kernel` takes).
    pub spill_over: u64,
    /// Threads decompressing an xz payload ([`package::Package::threads`]).
    pub threads: usize,
}

/// Members larger than this go to a temporary file as the package is read,
/// and are mapped from there when encoded, as a tree's files are: held in
/// memory, the largest module (`amdgpu.ko`, 596 MB) doubled the package
/// run's peak. Few modules are this large, so the rest still pass in
/// memory, never touching the disk.
pub const SPILL_OVER: u64 = 32 << 20;

/// What a rerun knows of a package before reading it: the members whose
/// previous lines still hold, so that it neither encodes them nor holds
/// their bytes, and how many modules the package has, so that it stops
/// decompressing once the others are read.
#[derive(Debug)]
pub struct Known {
    /// The package file's sha256.
    pub sha256: Arc<PackageSha>,
    /// The vmlinux's reused record, if its line holds.
    pub vmlinux: Option<Record>,
    /// The modules' reused records (over that vmlinux), by member path.
    pub modules: HashMap<String, Record>,
    /// The module count of the previous run's end-of-package line.
    pub module_count: Option<usize>,
}

impl Known {
    /// Nothing known of the package of sha256 `sha256` (a first run).
    pub fn nothing(sha256: Arc<PackageSha>) -> Known {
        Known {
            sha256,
            vmlinux: None,
            modules: HashMap::new(),
            module_count: None,
        }
    }
}

/// What `plan`'s previous report proves of the package of sha256 `sha256`
/// (item `item`, outputs in `out_dir`): a line holds when its member's
/// fingerprint (the package's sha256 and the member's path) and the rest
/// of [`super::reuse`]'s checks hold. A module counts only over a vmlinux
/// that holds, and with the sha256 of that vmlinux's output as its base.
pub fn known(plan: &KernelPlan, item: Option<&str>, sha256: &str, out_dir: &Path) -> Known {
    let mut k = Known::nothing(PackageSha::ready(sha256));
    let mine = || {
        plan.previous
            .iter()
            .filter(move |((i, _), _)| i.as_deref() == item)
            .map(|(_, r)| r)
    };
    let vm = mine().find(|r| r.kind == InputKind::Vmlinux && member(&r.input) == Some(Member::Vmlinux));
    let Some(vm) = vm.and_then(|r| {
        let fp = member_fingerprint(sha256, &r.input);
        reuse(plan, item, &r.input, "vmlinux.btf", &fp, None, out_dir)
    }) else {
        return k;
    };
    for r in mine().filter(|r| r.kind == InputKind::Module) {
        let Some(Member::Module(out)) = member(&r.input) else {
            continue;
        };
        let fp = member_fingerprint(sha256, &r.input);
        if let Some(rec) = reuse(plan, item, &r.input, &out, &fp, vm.sha256.as_deref(), out_dir) {
            k.modules.insert(r.input.clone(), rec);
        }
    }
    k.vmlinux = Some(vm);
    k.module_count = plan
        .packages
        .get(&item.map(str::to_string))
        .filter(|p| p.sha256 == sha256)
        .map(|p| p.modules);
    k
}

/// Opens the kernel package at `path`: reads its stream up to the vmlinux
/// (spilling any module before it to a temporary directory), and returns
/// the item whose modules are the spilled ones, then the rest of the
/// stream. Members `known` proves are not read: their inputs come first,
/// marked [`InputData::Proven`], and the vmlinux is not waited for if it
/// is one of them.
pub fn open_package(path: &Path, name: Option<String>, how: Reading, known: Known) -> Result<Item, KernelError> {
    let Known {
        sha256,
        vmlinux: known_vmlinux,
        modules: known_modules,
        module_count,
    } = known;
    let skip: HashSet<String> = known_modules
        .keys()
        .cloned()
        .chain(known_vmlinux.iter().map(|r| r.input.clone()))
        .collect();
    let mut pkg = package::open(path)?
        .select(move |p| member(p).is_some() && !skip.contains(p))
        .spill_over(how.spill_over, std::env::temp_dir())
        .threads(how.threads);
    let mut spill: Option<Spill> = None;
    let vm = match &known_vmlinux {
        Some(r) => Input::proven(r, "vmlinux.btf".into(), sha256.clone()),
        None => loop {
            let e = match pkg.next() {
                Some(e) => e?,
                None => {
                    return Err(KernelError::NoVmlinux {
                        root: path.to_path_buf(),
                    });
                }
            };
            match member(&e.path) {
                Some(Member::Vmlinux) => {
                    break Input::member(e, InputKind::Vmlinux, "vmlinux.btf".into(), sha256.clone());
                }
                Some(Member::Module(out)) => {
                    let s = match &mut spill {
                        Some(s) => s,
                        None => spill.insert(Spill::new(path, sha256.clone())?),
                    };
                    s.push(e, out)?;
                }
                None => {}
            }
        },
    };
    let mut proven_records: Vec<Record> = known_modules.into_values().collect();
    proven_records.sort_by(|a, b| a.input.cmp(&b.input));
    let proven: Vec<Input> = proven_records
        .iter()
        .filter_map(|r| match member(&r.input) {
            Some(Member::Module(out)) => Some(Input::proven(r, out, sha256.clone())),
            _ => None,
        })
        .collect();
    let spilled = spill
        .as_mut()
        .map(|s| std::mem::take(&mut s.inputs))
        .unwrap_or_default();
    let vmlinux_rel = vm.rel.clone();
    let ended = Arc::new(std::sync::OnceLock::new());
    let counted = proven.len() + spilled.len();
    // The modules still to read, when the previous run counted them all.
    let to_read = module_count.map(|n| n.saturating_sub(counted));
    Ok(Item {
        name,
        source: path.to_path_buf(),
        vmlinux: vm,
        module_count: None,
        package: Some(PackageState {
            sha256: sha256.clone(),
            proven: proven_records,
            known_count: module_count,
            count_written: None,
            ended: Arc::clone(&ended),
        }),
        modules: Box::new(Modules {
            package: path.to_path_buf(),
            sha256,
            vmlinux: vmlinux_rel,
            proven: proven.into_iter(),
            spilled: spilled.into_iter(),
            _spill: spill,
            stream: Some(pkg),
            to_read,
            counted,
            failed: false,
            ended,
        }),
    })
}

/// A package item's state shared with its run: its sha256, the previous
/// run's module count, and its own once the stream is read through.
pub struct PackageState {
    pub sha256: Arc<PackageSha>,
    /// The reused records of the modules [`known`] proved, until
    /// [`super::settled`] takes them into the new report.
    pub proven: Vec<Record>,
    pub known_count: Option<usize>,
    /// The module count of the package's line in the new report, once
    /// written.
    pub count_written: Option<usize>,
    /// Set when the modules' stream ends without an error: how many
    /// modules the package has.
    pub ended: Arc<std::sync::OnceLock<usize>>,
}

impl PackageState {
    /// The package's line, saying it has `modules` modules (None when its
    /// sha256 could not be read), noted as written.
    pub fn line(&mut self, item: Option<String>, source: &Path, modules: usize) -> Option<Line> {
        let sha256 = self.sha256.get().ok()?;
        self.count_written = Some(modules);
        Some(Line::Package {
            package: PackageRead {
                item,
                path: source.to_string_lossy().into_owned(),
                sha256: sha256.to_string(),
                modules,
            },
        })
    }
}

/// The modules of a package: the proven ones, the spilled ones, then the
/// stream's.
struct Modules {
    package: PathBuf,
    sha256: Arc<PackageSha>,
    /// The vmlinux's path in the package (another is a second kernel).
    vmlinux: String,
    proven: std::vec::IntoIter<Input>,
    spilled: std::vec::IntoIter<Input>,
    /// Removed (with the spilled files) when the modules are done.
    _spill: Option<Spill>,
    /// Dropped (its reading stopped) once the modules still to read are in.
    stream: Option<package::Package>,
    to_read: Option<usize>,
    /// Modules handed out, proven ones included.
    counted: usize,
    failed: bool,
    ended: Arc<std::sync::OnceLock<usize>>,
}

impl Modules {
    fn end(&mut self) -> Option<Result<Input, KernelError>> {
        self.stream = None;
        if !self.failed {
            let _ = self.ended.set(self.counted);
        }
        None
    }
}

impl Iterator for Modules {
    type Item = Result<Input, KernelError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(m) = self.proven.next() {
            return Some(Ok(m));
        }
        if let Some(m) = self.spilled.next() {
            return Some(Ok(m));
        }
        loop {
            if self.to_read == Some(0) {
                return self.end();
            }
            let e = match self.stream.as_mut()?.next() {
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    self.failed = true;
                    return Some(Err(e.into()));
                }
                None => return self.end(),
            };
            match member(&e.path) {
                Some(Member::Module(out)) => {
                    self.counted += 1;
                    if let Some(n) = &mut self.to_read {
                        *n -= 1;
                    }
                    return Some(Ok(Input::member(e, InputKind::Module, out, self.sha256.clone())));
                }
                // (a proven vmlinux is skipped by the reader, never met here)
                Some(Member::Vmlinux) => {
                    self.failed = true;
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
    /// The package's sha256, the inputs' identity.
    sha256: Arc<PackageSha>,
}

impl Spill {
    fn new(package: &Path, sha256: Arc<PackageSha>) -> Result<Spill, KernelError> {
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
            sha256,
        })
    }

    fn push(&mut self, e: Entry, out: String) -> Result<(), KernelError> {
        let package::Contents::Memory(data) = e.data else {
            // in a file of its own already
            self.inputs
                .push(Input::member(e, InputKind::Module, out, self.sha256.clone()));
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
        // The package's path, time and identity, not the spilled file's:
        // they are what a rerun sees again.
        let mut input = Input::file(path, e.path, InputKind::Module, out)?;
        input.mtime = e.mtime;
        input.package_sha256 = Some(self.sha256.clone());
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
