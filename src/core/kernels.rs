//! Where kernels come from: a BTF file, a `btfkit kernel` output directory,
//! `/sys/kernel/btf`, or an archive of many kernels (a directory of such
//! directories, a `--list` report, a BTFHub tree of `.btf.tar.xz` files).
//! [`sources`] expands a path into kernels without reading their BTF;
//! [`load`] reads one kernel's BTF, so an archive is read one kernel at a
//! time.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::target::Target;
use crate::error::{Error, Result};

/// One kernel, not yet read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A standalone BTF: raw, or the `.BTF` of an ELF such as a vmlinux.
    /// Modules are never searched, as with libbpf's `btf_custom_path`.
    File(PathBuf),
    /// `vmlinux.btf` with split module BTF under `modules/` (`btfkit
    /// kernel`'s layout), or `/sys/kernel/btf`'s (`vmlinux` and a file per
    /// module).
    Dir { root: PathBuf, vmlinux: PathBuf },
    /// A BTFHub `<kernel>.btf.tar.xz`: one BTF file inside.
    TarXz(PathBuf),
}

impl Source {
    /// The name reports give the kernel: its path, without `.btf.tar.xz`.
    pub fn name(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Dir { root, .. } => root.display().to_string(),
            Source::TarXz(p) => {
                let s = p.display().to_string();
                s.strip_suffix(".btf.tar.xz").map(str::to_string).unwrap_or(s)
            }
        }
    }
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(p, e)
}

/// The kernel directory at `dir`, if it is one: its vmlinux BTF.
fn kernel_dir(dir: &Path) -> Option<PathBuf> {
    ["vmlinux.btf", "vmlinux"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// Expands `path` into the kernels it holds, in a stable order.
pub fn sources(path: &Path) -> Result<Vec<Source>> {
    let meta = fs::metadata(path).map_err(io(path))?;
    if meta.is_file() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".tar.xz") {
            return Ok(vec![Source::TarXz(path.into())]);
        }
        if name.ends_with(".txt") || name.ends_with(".list") || name.ends_with(".jsonl") {
            return list(path);
        }
        return Ok(vec![Source::File(path.into())]);
    }
    if let Some(vmlinux) = kernel_dir(path) {
        return Ok(vec![Source::Dir {
            root: path.into(),
            vmlinux,
        }]);
    }
    // An archive: every kernel directory and .btf.tar.xz below, sorted.
    let mut out = Vec::new();
    walk_archive(path, &mut out)?;
    if out.is_empty() {
        return Err(Error::Input {
            path: path.into(),
            msg: "holds no kernel: no vmlinux.btf (or vmlinux), no kernel directories, no .btf.tar.xz files".into(),
        });
    }
    Ok(out)
}

fn walk_archive(dir: &Path, out: &mut Vec<Source>) -> Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io(dir))?
        .map(|e| e.map(|e| e.path()).map_err(io(dir)))
        .collect::<Result<_>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            match kernel_dir(&p) {
                Some(vmlinux) => out.push(Source::Dir { root: p, vmlinux }),
                None => walk_archive(&p, out)?,
            }
        } else if p.to_string_lossy().ends_with(".btf.tar.xz") {
            out.push(Source::TarXz(p));
        }
    }
    Ok(())
}

/// A list file: one kernel path per line (`#` comments), or the JSON lines
/// of a `btfkit kernel` report, whose `out` fields name the kernels.
fn list(path: &Path) -> Result<Vec<Source>> {
    let text = fs::read_to_string(path).map_err(io(path))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let entry = if line.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::Input {
                path: path.into(),
                msg: format!("line {}: not JSON: {e}", n + 1),
            })?;
            match v.get("out").and_then(|o| o.as_str()) {
                Some(o) => o.to_string(),
                None => continue,
            }
        } else {
            line.to_string()
        };
        let p = base.join(entry);
        let got = sources(&p).map_err(|e| Error::Input {
            path: path.into(),
            msg: format!("line {}: {e}", n + 1),
        })?;
        out.extend(got);
    }
    Ok(out)
}

/// Reads one kernel.
pub fn load(src: &Source) -> Result<Target> {
    match src {
        Source::File(p) => {
            let btf = crate::elf::load_btf(p, None).map_err(|e| match e {
                Error::Input { path, msg } if msg.contains(crate::elf::SPLIT_WITHOUT_BASE) => Error::Input {
                    path,
                    msg: "split BTF (a module's) cannot be a kernel alone: give its kernel's directory \
                          (vmlinux.btf and modules/, or /sys/kernel/btf)"
                        .into(),
                },
                e => e,
            })?;
            Ok(Target::single(src.name(), Arc::new(btf)))
        }
        Source::Dir { root, vmlinux } => {
            let base = Arc::new(crate::elf::load_btf(vmlinux, None)?);
            let mut files = Vec::new();
            let sysfs_style = vmlinux.file_name().is_some_and(|n| n == "vmlinux");
            if sysfs_style {
                for e in fs::read_dir(root).map_err(io(root))? {
                    let p = e.map_err(io(root))?.path();
                    if p != *vmlinux && p.is_file() {
                        files.push(p);
                    }
                }
            } else {
                let mods = root.join("modules");
                if mods.is_dir() {
                    module_files(&mods, &mut files)?;
                }
            }
            files.sort();
            let mut modules = Vec::with_capacity(files.len());
            for f in files {
                let name = module_name(&f);
                let btf = crate::elf::load_btf(&f, Some(base.clone()))?;
                modules.push((name, Arc::new(btf)));
            }
            Ok(Target::with_modules(src.name(), base, modules))
        }
        Source::TarXz(p) => {
            let bytes = tar_xz_btf(p)?;
            let btf = crate::btf::read::parse(&bytes).map_err(|source| Error::Btf {
                path: p.clone(),
                source,
            })?;
            Ok(Target::single(src.name(), Arc::new(btf)))
        }
    }
}

fn module_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in fs::read_dir(dir).map_err(io(dir))? {
        let p = e.map_err(io(dir))?.path();
        if p.is_dir() {
            module_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "btf") {
            out.push(p);
        }
    }
    Ok(())
}

/// A module's name as the kernel gives it (`kvm-amd.ko` is `kvm_amd`).
fn module_name(p: &Path) -> String {
    let stem = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem.strip_suffix(".btf").unwrap_or(&stem);
    stem.replace('-', "_")
}

/// The one BTF file inside a BTFHub `.btf.tar.xz`, read in memory.
fn tar_xz_btf(p: &Path) -> Result<Vec<u8>> {
    let f = fs::File::open(p).map_err(io(p))?;
    let xz = liblzma::read::XzDecoder::new(std::io::BufReader::new(f));
    let mut ar = tar::Archive::new(xz);
    let bad = |msg: String| Error::Input { path: p.into(), msg };
    for entry in ar.entries().map_err(io(p))? {
        let mut e = entry.map_err(io(p))?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let size = e.header().size().map_err(io(p))?;
        if size > 1 << 30 {
            return Err(bad(format!("member of {size} bytes is larger than any kernel's BTF")));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        e.read_to_end(&mut bytes).map_err(io(p))?;
        return Ok(bytes);
    }
    Err(bad("archive holds no file".into()))
}
