//! A kernel in one run: its vmlinux, then every module split over it, with a
//! report line per input (`report.jsonl`) that lets a rerun skip what is
//! already done, and lists of kernels split into shards for job arrays.
//!
//! An [`Item`] is one kernel: a tree on disk (an unpacked debug package, or
//! a build directory) found by [`open_item`]. It yields its vmlinux first,
//! then its modules one by one as [`Input`]s, each a file (mapped when
//! encoded) or bytes in memory with a name (a package's member), so a
//! package reader can stream its members through the same run.
//!
//! [`run_item`] encodes an item: the vmlinux with the caller's options (its
//! `jobs` threads), written to `vmlinux.btf` and loaded back as the shared
//! base of the modules (the bytes `encode --base vmlinux.btf` reads), then
//! the modules on `jobs` plain threads, one module each (as
//! [`super::batch`]), each written to `modules/<path>.btf`. Every output is
//! written atomically; the report line of an input is appended (one write,
//! whole line) after its output is in place, so a kill leaves every line
//! true. A module that fails is reported and the others go on.
//!
//! Resume: an input is reused (not encoded again) when the previous report
//! has a line for it with the same fingerprint, btfkit version and flags,
//! outcome `ok` or `reused`, its output still has the recorded sha256, and
//! (for a module) the base it was split over is the current `vmlinux.btf`.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error as ThisError;

use super::{Error, Plan, batch, encode_btf};
use crate::btf;
use crate::encode::{LangFilter, Options};

/// The extensions of package files a list may name.
pub const PACKAGE_EXTENSIONS: &[&str] = &["ddeb", "deb", "rpm"];

/// Why a kernel run could not start, or could not go on.
#[derive(Debug, ThisError)]
pub enum KernelError {
    #[error(
        "{root}: no vmlinux found (looked for {root}/vmlinux, usr/lib/debug/boot/vmlinux-* and \
         usr/lib/debug/lib/modules/*/vmlinux)"
    )]
    NoVmlinux { root: PathBuf },
    #[error("{root}: several kernels in one tree: {a} and {b} (give each its own run)")]
    SeveralKernels { root: PathBuf, a: PathBuf, b: PathBuf },
    #[error(
        "{path}: packages (.deb, .ddeb, .rpm) cannot be read by this build yet (the streaming package reader \
         is not wired in); unpack it (`dpkg-deb -x`, `rpm2cpio | cpio -idm`) and give the directory"
    )]
    PackageUnsupported { path: PathBuf },
    #[error("{path}: neither a directory nor a package (.deb, .ddeb, .rpm)")]
    NotAnItem { path: PathBuf },
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("list {list}: entries {a} and {b} have the same name `{name}` (their outputs would share one directory)")]
    DuplicateName {
        list: PathBuf,
        name: String,
        a: PathBuf,
        b: PathBuf,
    },
    #[error("list {list}: entry {entry} has no name to give its output directory")]
    Unnamed { list: PathBuf, entry: PathBuf },
    #[error("shard {spec}: {why}")]
    Shard { spec: String, why: String },
    #[error("report {path}")]
    Report { path: PathBuf, source: std::io::Error },
    /// The vmlinux's BTF could not be loaded back as the modules' base.
    #[error(transparent)]
    Base(Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KernelError + '_ {
    move |source| KernelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where an input's bytes are.
#[derive(Clone, Debug)]
pub enum InputData {
    /// A file, mapped when it is encoded.
    File(PathBuf),
    /// Bytes in memory (a package's member); the input's `rel` names them.
    Bytes(Arc<[u8]>),
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
    pub fn bytes(rel: String, kind: InputKind, out: String, mtime: u64, data: Arc<[u8]>) -> Input {
        Input {
            rel,
            kind,
            out,
            size: data.len() as u64,
            mtime,
            data: InputData::Bytes(data),
        }
    }

    /// The name messages give it: the file's path, or its path in the package.
    pub fn name(&self) -> PathBuf {
        match &self.data {
            InputData::File(p) => p.clone(),
            InputData::Bytes(_) => PathBuf::from(&self.rel),
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
            InputData::File(p) => {
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
            }
        }
        Ok(hex(&h.finalize()))
    }
}

/// The ELF header's length and the section header table's place, read
/// from the first bytes of a file (None where they do not say).
fn header_ranges(b: &[u8]) -> (usize, Option<(usize, usize)>) {
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

fn file_sha256(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| sha256_hex(&b))
}

/// One kernel to encode: its vmlinux, then its modules as they come.
pub struct Item {
    /// Its name in a list (its outputs' directory), None for a single run.
    pub name: Option<String>,
    /// Where it was found (a tree's root, a package file).
    pub source: PathBuf,
    pub vmlinux: Input,
    /// The modules, in the order they are encoded (a tree's: sorted by path).
    pub modules: Box<dyn Iterator<Item = Result<Input, KernelError>> + Send>,
    /// How many modules, when known in advance.
    pub module_count: Option<usize>,
}

/// Opens a list entry or the one root of a run: a directory is a tree
/// ([`open_tree`]); a package is refused until the package reader is wired in.
pub fn open_item(path: &Path, name: Option<String>) -> Result<Item, KernelError> {
    let m = std::fs::metadata(path).map_err(io(path))?;
    if m.is_dir() {
        return open_tree(path, name);
    }
    if is_package_name(path) {
        return Err(KernelError::PackageUnsupported {
            path: path.to_path_buf(),
        });
    }
    Err(KernelError::NotAnItem {
        path: path.to_path_buf(),
    })
}

fn is_package_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| PACKAGE_EXTENSIONS.contains(&e))
}

/// A kernel tree: a build directory (`vmlinux` at the top, `*.ko` below
/// it), or an unpacked debug package (`usr/lib/debug/boot/vmlinux-<ver>`
/// with modules under `usr/lib/debug/lib/modules/<ver>/`, Debian and
/// Ubuntu; or `usr/lib/debug/lib/modules/<ver>/vmlinux` with `*.ko.debug`
/// beside it, Fedora). Modules are sorted by path.
pub fn open_tree(root: &Path, name: Option<String>) -> Result<Item, KernelError> {
    let (vmlinux, modules_root) = find_kernel(root)?;
    let rel = |p: &Path| -> String { p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned() };
    let vm = Input::file(vmlinux.clone(), rel(&vmlinux), InputKind::Vmlinux, "vmlinux.btf".into())?;
    let mut found = Vec::new();
    if let Some(mr) = &modules_root {
        walk_modules(mr, &mut found)?;
    }
    found.sort();
    let mut modules = Vec::with_capacity(found.len());
    for p in found {
        let under = p
            .strip_prefix(modules_root.as_deref().unwrap_or(root))
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        let out = format!("modules/{}", module_output_name(&under));
        modules.push(Input::file(p.clone(), rel(&p), InputKind::Module, out));
    }
    Ok(Item {
        name,
        source: root.to_path_buf(),
        vmlinux: vm,
        module_count: Some(modules.len()),
        modules: Box::new(modules.into_iter()),
    })
}

/// `kernel/net/fou.ko` → `kernel/net/fou.btf` (`.ko.debug` likewise).
pub fn module_output_name(path: &str) -> String {
    let stem = path
        .strip_suffix(".ko.debug")
        .or_else(|| path.strip_suffix(".ko"))
        .unwrap_or(path);
    format!("{stem}.btf")
}

fn is_module(p: &Path) -> bool {
    let n = p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    n.ends_with(".ko") || n.ends_with(".ko.debug")
}

/// The vmlinux of the tree at `root` and the root of its modules.
fn find_kernel(root: &Path) -> Result<(PathBuf, Option<PathBuf>), KernelError> {
    let top = root.join("vmlinux");
    if top.is_file() {
        return Ok((top, Some(root.to_path_buf())));
    }
    let debug = root.join("usr/lib/debug");
    let mods_dirs = [debug.join("lib/modules"), debug.join("usr/lib/modules")];
    // Debian/Ubuntu: boot/vmlinux-<ver>
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(debug.join("boot")) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(ver) = n.strip_prefix("vmlinux-")
                && e.path().is_file()
            {
                found.push((e.path(), ver.to_string()));
            }
        }
    }
    // Fedora: lib/modules/<ver>/vmlinux
    for md in &mods_dirs {
        if let Ok(rd) = std::fs::read_dir(md) {
            for e in rd.flatten() {
                let v = e.path().join("vmlinux");
                if v.is_file() {
                    found.push((v, e.file_name().to_string_lossy().into_owned()));
                }
            }
        }
    }
    found.sort();
    match found.as_slice() {
        [] => Err(KernelError::NoVmlinux {
            root: root.to_path_buf(),
        }),
        [(vm, ver)] => {
            let mods = mods_dirs.iter().map(|d| d.join(ver)).find(|d| d.is_dir());
            Ok((vm.clone(), mods))
        }
        [(a, _), (b, _), ..] => Err(KernelError::SeveralKernels {
            root: root.to_path_buf(),
            a: a.clone(),
            b: b.clone(),
        }),
    }
}

fn walk_modules(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), KernelError> {
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let p = e.path();
        let ft = e.file_type().map_err(io(&p))?;
        if ft.is_dir() {
            walk_modules(&p, out)?;
        } else if (ft.is_file() || (ft.is_symlink() && p.is_file())) && is_module(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// The flags of a run that decide its outputs' bytes, spelled one way
/// (features in their canonical order, then the language filter), so two
/// runs compare them as strings.
pub fn flags_string(opts: &Options) -> String {
    let mut s = format!("btf_features={}", opts.features.enabled_names().join(","));
    let codes = |l: &[u16]| {
        let mut l = l.to_vec();
        l.sort_unstable();
        l.dedup();
        l.iter().map(|c| format!("{c:#x}")).collect::<Vec<_>>().join(",")
    };
    match &opts.lang {
        LangFilter::All => {}
        LangFilter::Only(l) => s += &format!(" lang={}", codes(l)),
        LangFilter::Exclude(l) => s += &format!(" lang_exclude={}", codes(l)),
    }
    if opts.no_funcs {
        s += " no_funcs";
    }
    s
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Failed,
    Reused,
}

/// One line of a report: what became of one input.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// The list entry it belongs to (list runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    pub input: String,
    pub kind: InputKind,
    pub size: u64,
    pub fingerprint: String,
    pub outcome: Outcome,
    pub error: Option<String>,
    /// Relative to the report's directory.
    pub output: Option<String>,
    pub sha256: Option<String>,
    pub types: Option<u64>,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub version: String,
    pub flags: String,
    /// A module's: the sha256 of the `vmlinux.btf` it was split over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_sha256: Option<String>,
}

/// A list run's first report line.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub list: String,
    pub list_sha256: String,
    pub shard: [usize; 2],
    pub items: Vec<String>,
}

/// The last line of a finished run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    pub inputs: usize,
    pub ok: usize,
    pub reused: usize,
    pub failed: usize,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_rss_bytes: u64,
}

/// Any line of a report.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    Header(Header),
    Summary { summary: Totals },
    Record(Box<Record>),
}

/// A report's lines. A line that does not parse is dropped: the last one
/// may be torn by a kill; any other is returned in `bad` (its number).
pub fn read_report(path: &Path) -> Result<(Vec<Line>, Vec<usize>), KernelError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => {
            return Err(KernelError::Report {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.split('\n').collect();
    let (mut out, mut bad) = (Vec::new(), Vec::new());
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(l) {
            Ok(x) => out.push(x),
            // A kill tears only the last line, which has no newline after it.
            Err(_) if i + 1 == lines.len() => {}
            Err(_) => bad.push(i + 1),
        }
    }
    Ok((out, bad))
}

/// The report being written: the lines are appended, one write each.
pub struct ReportWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl ReportWriter {
    /// Replaces `path` atomically with `first` (a header, or nothing), then
    /// opens it for appending.
    pub fn create(path: &Path, first: &[Line]) -> Result<ReportWriter, KernelError> {
        let mut text = String::new();
        for l in first {
            text += &serde_json::to_string(l).expect("report lines serialize");
            text.push('\n');
        }
        let rep = |source| KernelError::Report {
            path: path.to_path_buf(),
            source,
        };
        crate::output::write_atomic(path, text.as_bytes()).map_err(|e| rep(std::io::Error::other(e.to_string())))?;
        let file = std::fs::OpenOptions::new().append(true).open(path).map_err(rep)?;
        Ok(ReportWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends one line (the whole line in one write).
    pub fn append(&self, l: &Line) -> Result<(), KernelError> {
        let mut s = serde_json::to_string(l).expect("report lines serialize");
        s.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(s.as_bytes()).map_err(|source| KernelError::Report {
            path: self.path.clone(),
            source,
        })
    }
}

/// What a run is told besides its item.
pub struct KernelPlan {
    /// The directory the report is in; outputs are named relative to it.
    pub report_dir: PathBuf,
    /// The options of every encode; `jobs` threads for the vmlinux, and as
    /// many modules at once.
    pub opts: Options,
    /// btfkit's version, recorded and compared on resume.
    pub version: String,
    /// The previous run's records, by (item, input), for resume.
    pub previous: HashMap<(Option<String>, String), Record>,
    /// The (item, input) whose `reused` line the new report holds already
    /// (the new report's first lines).
    pub written: HashSet<(Option<String>, String)>,
}

impl KernelPlan {
    /// A plan with the previous records of `lines` (the report being replaced).
    pub fn new(report_dir: PathBuf, opts: Options, version: String, lines: Vec<Line>) -> KernelPlan {
        let previous = lines
            .into_iter()
            .filter_map(|l| match l {
                Line::Record(r) => Some(((r.item.clone(), r.input.clone()), *r)),
                _ => None,
            })
            .collect();
        KernelPlan {
            report_dir,
            opts,
            version,
            previous,
            written: HashSet::new(),
        }
    }

    /// Notes `records` as written into the new report (see [`settled`]):
    /// they replace the previous lines of their inputs.
    pub fn mark_written(&mut self, records: &[Record]) {
        for r in records {
            let key = (r.item.clone(), r.input.clone());
            self.previous.insert(key.clone(), r.clone());
            self.written.insert(key);
        }
    }
}

/// What one item's run did.
#[derive(Debug, Default, Clone)]
pub struct ItemTotals {
    pub ok: usize,
    pub reused: usize,
    pub failed: usize,
}

impl ItemTotals {
    fn count(&mut self, o: Outcome) {
        match o {
            Outcome::Ok => self.ok += 1,
            Outcome::Reused => self.reused += 1,
            Outcome::Failed => self.failed += 1,
        }
    }
}

/// `out` (relative to `out_dir`) relative to the report's directory.
fn output_rel(plan: &KernelPlan, out_dir: &Path, out: &str) -> String {
    let p = out_dir.join(out);
    p.strip_prefix(&plan.report_dir)
        .unwrap_or(&p)
        .to_string_lossy()
        .into_owned()
}

/// The `reused` record of `input` (of item `item`, fingerprint `fp`, split
/// over a vmlinux.btf of sha256 `base`) if its previous line still holds:
/// same fingerprint, version and flags, outcome ok or reused, the same
/// base, and its output still has the recorded sha256. A line the
/// rewritten report holds already is taken as it is.
fn reuse(
    plan: &KernelPlan,
    item: Option<&str>,
    input: &Input,
    fp: &str,
    base: Option<&str>,
    out_dir: &Path,
) -> Option<Record> {
    let key = (item.map(str::to_string), input.rel.clone());
    let old = plan.previous.get(&key)?;
    if plan.written.contains(&key) {
        return Some(old.clone());
    }
    let same = old.fingerprint == fp
        && old.version == plan.version
        && old.flags == flags_string(&plan.opts)
        && matches!(old.outcome, Outcome::Ok | Outcome::Reused)
        && old.output.as_deref() == Some(output_rel(plan, out_dir, &input.out).as_str())
        && old.base_sha256.as_deref() == base;
    if !same {
        return None;
    }
    let sha = file_sha256(&out_dir.join(&input.out))?;
    (Some(&sha) == old.sha256.as_ref()).then(|| Record {
        outcome: Outcome::Reused,
        error: None,
        wall_s: 0.0,
        cpu_s: 0.0,
        ..old.clone()
    })
}

/// The lines of `item` that can be reused as they are, known before it
/// runs: its vmlinux's and, when that is reused, its modules' (the modules
/// are collected to be checked and put back in their order: for a tree, a
/// list of paths). Write them into the new report, then [`KernelPlan::mark_written`]
/// them, so that [`run_item`] counts them without writing them again.
pub fn settled(plan: &KernelPlan, item: &mut Item, out_dir: &Path) -> Vec<Record> {
    let name = item.name.clone();
    let vm = &item.vmlinux;
    let Some(vm_rec) = vm
        .fingerprint()
        .ok()
        .and_then(|fp| reuse(plan, name.as_deref(), vm, &fp, None, out_dir))
    else {
        return Vec::new();
    };
    let base = vm_rec.sha256.clone();
    let mut out = vec![vm_rec];
    let modules: Vec<_> = std::mem::replace(&mut item.modules, Box::new(std::iter::empty())).collect();
    for m in modules.iter().flatten() {
        if let Some(r) = m
            .fingerprint()
            .ok()
            .and_then(|fp| reuse(plan, name.as_deref(), m, &fp, base.as_deref(), out_dir))
        {
            out.push(r);
        }
    }
    item.module_count = Some(modules.len());
    item.modules = Box::new(modules.into_iter());
    out
}

/// Called with each input's record as it is written (progress).
pub type OnRecord<'a> = dyn Fn(&Record) + Sync + 'a;

/// Encodes `item` into `out_dir` (the vmlinux, then its modules; see the
/// module docs), appending a line per input to `report`. Fails only when
/// the report cannot be written or the vmlinux's BTF cannot be read back;
/// an input's failure is its record.
pub fn run_item(
    plan: &KernelPlan,
    item: Item,
    out_dir: &Path,
    report: &ReportWriter,
    on_record: &OnRecord<'_>,
) -> Result<ItemTotals, KernelError> {
    let flags = flags_string(&plan.opts);
    let out_rel = |out: &str| output_rel(plan, out_dir, out);
    let totals = Mutex::new(ItemTotals::default());
    let emit = |r: Record| -> Result<(), KernelError> {
        // a line the rewritten report holds already ([`settled`])
        if !(r.outcome == Outcome::Reused && plan.written.contains(&(r.item.clone(), r.input.clone()))) {
            report.append(&Line::Record(Box::new(r.clone())))?;
        }
        totals.lock().unwrap_or_else(|e| e.into_inner()).count(r.outcome);
        on_record(&r);
        Ok(())
    };
    let new_record = |input: &Input, fingerprint: String| Record {
        item: item.name.clone(),
        input: input.rel.clone(),
        kind: input.kind,
        size: input.size,
        fingerprint,
        outcome: Outcome::Failed,
        error: None,
        output: Some(out_rel(&input.out)),
        sha256: None,
        types: None,
        wall_s: 0.0,
        cpu_s: 0.0,
        version: plan.version.clone(),
        flags: flags.clone(),
        base_sha256: None,
    };
    let reusable =
        |input: &Input, fp: &str, base: Option<&str>| reuse(plan, item.name.as_deref(), input, fp, base, out_dir);

    // The vmlinux.
    let vm = &item.vmlinux;
    let vm_out = out_dir.join(&vm.out);
    let vm_fp = vm.fingerprint();
    let vm_rec = match &vm_fp {
        Ok(fp) => match reusable(vm, fp, None) {
            Some(r) => r,
            None => encode_vmlinux(plan, vm, &vm_out, new_record(vm, fp.clone())),
        },
        Err(e) => Record {
            error: Some(e.to_string()),
            output: None,
            ..new_record(vm, String::new())
        },
    };
    let base_sha = vm_rec.sha256.clone();
    let vm_ok = vm_rec.outcome != Outcome::Failed;
    emit(vm_rec)?;

    // The modules over it.
    let base = if vm_ok {
        Some(batch::load_shared_base(&vm_out, true).map_err(KernelError::Base)?)
    } else {
        None
    };
    let one = Options {
        jobs: 1,
        global_pool: false,
        timings: true,
        ..plan.opts.clone()
    };
    let modules = Mutex::new(item.modules);
    let failure: Mutex<Option<KernelError>> = Mutex::new(None);
    let threads = crate::encode::effective_jobs(plan.opts.jobs, item.module_count.unwrap_or(usize::MAX));
    std::thread::scope(|sc| {
        for _ in 0..threads {
            std::thread::Builder::new()
                // as batch: dedup and the DWARF walk recurse as deep as types nest
                .stack_size(64 << 20)
                .spawn_scoped(sc, || {
                    loop {
                        if failure.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                            break;
                        }
                        let next = modules.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some(next) = next else { break };
                        let rec = match next {
                            Err(e) => Record {
                                error: Some(e.to_string()),
                                output: None,
                                kind: InputKind::Module,
                                input: match &e {
                                    KernelError::Io { path, .. } => path.to_string_lossy().into_owned(),
                                    _ => String::new(),
                                },
                                size: 0,
                                ..new_record(vm, String::new())
                            },
                            Ok(m) => module_record(
                                &m,
                                &new_record,
                                &reusable,
                                base.as_ref(),
                                base_sha.as_deref(),
                                &one,
                                out_dir,
                            ),
                        };
                        if let Err(e) = emit(rec) {
                            *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                            break;
                        }
                    }
                })
                .expect("cannot start a module thread");
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(totals.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// [`reuse`] for one item: (input, fingerprint, base sha256).
type ReuseCheck<'a> = dyn Fn(&Input, &str, Option<&str>) -> Option<Record> + 'a;

type SharedBase = (Arc<btf::Btf>, Option<Arc<crate::dedup::BaseIndex>>);

fn module_record(
    m: &Input,
    new_record: &dyn Fn(&Input, String) -> Record,
    reusable: &ReuseCheck<'_>,
    base: Option<&SharedBase>,
    base_sha: Option<&str>,
    opts: &Options,
    out_dir: &Path,
) -> Record {
    let fp = match m.fingerprint() {
        Ok(fp) => fp,
        Err(e) => {
            return Record {
                error: Some(e.to_string()),
                output: None,
                ..new_record(m, String::new())
            };
        }
    };
    if let Some(r) = reusable(m, &fp, base_sha) {
        return r;
    }
    let rec = Record {
        base_sha256: base_sha.map(str::to_string),
        ..new_record(m, fp)
    };
    let Some((base, index)) = base else {
        return Record {
            error: Some("not encoded: its vmlinux failed".into()),
            output: None,
            ..rec
        };
    };
    let t0 = Instant::now();
    let c0 = thread_cpu();
    let res = (|| -> Result<(String, u64, Duration), Error> {
        let bytes = match &m.data {
            InputData::Bytes(b) => Some(&b[..]),
            InputData::File(_) => None,
        };
        let (btf, summary, _) = encode_btf(&m.name(), bytes, Some(base.clone()), index.as_ref(), opts, true)?;
        let raw = btf::write::to_bytes(&btf);
        let path = out_dir.join(&m.out);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::Output(crate::Error::io(d, e)))?;
        }
        crate::output::write_atomic(&path, &raw).map_err(Error::Output)?;
        let pool = summary.loop_cpu.map(|c| c.decode + c.cu_encode).unwrap_or_default();
        Ok((sha256_hex(&raw), btf.own_type_count() as u64, pool))
    })();
    let cpu = thread_cpu().saturating_sub(c0);
    match res {
        Ok((sha, types, pool)) => Record {
            outcome: Outcome::Ok,
            sha256: Some(sha),
            types: Some(types),
            wall_s: t0.elapsed().as_secs_f64(),
            cpu_s: (cpu + pool).as_secs_f64(),
            ..rec
        },
        Err(e) => Record {
            error: Some(error_line(&e)),
            output: None,
            wall_s: t0.elapsed().as_secs_f64(),
            cpu_s: cpu.as_secs_f64(),
            ..rec
        },
    }
}

fn encode_vmlinux(plan: &KernelPlan, vm: &Input, out: &Path, rec: Record) -> Record {
    let t0 = Instant::now();
    let (c0, _) = process_cpu_and_peak_rss();
    let mut p = Plan::new(vm.name(), plan.opts.clone());
    if let InputData::Bytes(b) = &vm.data {
        p.input_bytes = Some(b.clone());
    }
    p.output = Some(out.to_path_buf());
    let res = out
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(|e| Error::Output(crate::Error::io(out, e)))
        .and_then(|_| super::execute(&p));
    let (c1, _) = process_cpu_and_peak_rss();
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = c1.saturating_sub(c0).as_secs_f64();
    match res {
        Ok(done) => {
            let Some(sha) = file_sha256(out) else {
                return Record {
                    error: Some(format!("{}: written, but cannot be read back", out.display())),
                    output: None,
                    wall_s,
                    cpu_s,
                    ..rec
                };
            };
            Record {
                outcome: Outcome::Ok,
                sha256: Some(sha),
                types: Some(done.btf.own_type_count() as u64),
                wall_s,
                cpu_s,
                ..rec
            }
        }
        Err(e) => Record {
            error: Some(error_line(&e)),
            output: None,
            wall_s,
            cpu_s,
            ..rec
        },
    }
}

/// An error and its causes on one line.
fn error_line(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg += ": ";
            msg += &t;
        }
        src = s.source();
    }
    msg.replace('\n', " ")
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The process's CPU time (user + system) and peak RSS in bytes.
pub fn process_cpu_and_peak_rss() -> (Duration, u64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (Duration::ZERO, 0);
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_maxrss as u64 * 1024)
}

/// One entry of a list: a tree or a package, and its name.
#[derive(Clone, Debug, PartialEq)]
pub struct ListEntry {
    pub path: PathBuf,
    pub name: String,
}

/// A list file: one tree or package per line (relative paths from the
/// list's directory), blank lines and `#` comments ignored. Names are the
/// file name without its package extension, or the directory's name; two
/// entries of one name are an error.
pub fn read_list(list: &Path) -> Result<(Vec<ListEntry>, String), KernelError> {
    let bytes = std::fs::read(list).map_err(io(list))?;
    let sha = sha256_hex(&bytes);
    let text = String::from_utf8_lossy(&bytes);
    let dir = list.parent().unwrap_or(Path::new("."));
    let mut out: Vec<ListEntry> = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for l in text.lines() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let path = dir.join(l);
        let name = entry_name(&path).ok_or_else(|| KernelError::Unnamed {
            list: list.to_path_buf(),
            entry: path.clone(),
        })?;
        if let Some(prev) = seen.insert(name.clone(), path.clone()) {
            return Err(KernelError::DuplicateName {
                list: list.to_path_buf(),
                name,
                a: prev,
                b: path,
            });
        }
        out.push(ListEntry { path, name });
    }
    Ok((out, sha))
}

fn entry_name(path: &Path) -> Option<String> {
    let n = path.file_name()?.to_string_lossy().into_owned();
    let n = if is_package_name(path) {
        path.file_stem()?.to_string_lossy().into_owned()
    } else {
        n
    };
    (!n.is_empty() && n != "." && n != "..").then_some(n)
}

/// Shard `k` of `n`: list entries whose index i has i % n == k.
pub fn shard_entries(entries: &[ListEntry], k: usize, n: usize) -> Vec<ListEntry> {
    entries
        .iter()
        .enumerate()
        .filter(|(i, _)| i % n == k)
        .map(|(_, e)| e.clone())
        .collect()
}

/// Which shard this process is: `--shard K/N`; else Slurm's array
/// (`SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN` over
/// `SLURM_ARRAY_TASK_COUNT`); else a Kubernetes Indexed Job's
/// `JOB_COMPLETION_INDEX` over `shard_count` (`--shard-count`) or
/// `BTFKIT_SHARD_COUNT`; else 0 of 1. `env` reads the environment.
pub fn resolve_shard(
    flag: Option<&str>,
    shard_count: Option<usize>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(usize, usize), KernelError> {
    let bad = |spec: &str, why: &str| KernelError::Shard {
        spec: spec.to_string(),
        why: why.to_string(),
    };
    let num = |name: &str, v: &str| -> Result<usize, KernelError> {
        v.trim()
            .parse::<usize>()
            .map_err(|_| bad(&format!("{name}={v}"), "not a whole number"))
    };
    let check = |k: usize, n: usize, spec: &str| {
        if n == 0 {
            Err(bad(spec, "the shard count must be at least 1"))
        } else if k >= n {
            Err(bad(
                spec,
                &format!("shard index {k} is not below the count {n} (indices are 0..{n})"),
            ))
        } else {
            Ok((k, n))
        }
    };
    if let Some(spec) = flag {
        let (k, n) = spec.split_once('/').ok_or_else(|| bad(spec, "give K/N, e.g. 0/4"))?;
        let (k, n) = (
            k.parse().map_err(|_| bad(spec, "K is not a whole number"))?,
            n.parse().map_err(|_| bad(spec, "N is not a whole number"))?,
        );
        return check(k, n, spec);
    }
    if let Some(id) = env("SLURM_ARRAY_TASK_ID") {
        let id = num("SLURM_ARRAY_TASK_ID", &id)?;
        let min = match env("SLURM_ARRAY_TASK_MIN") {
            Some(m) => num("SLURM_ARRAY_TASK_MIN", &m)?,
            None => 0,
        };
        let count = env("SLURM_ARRAY_TASK_COUNT")
            .ok_or_else(|| bad("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT is not set"))?;
        let n = num("SLURM_ARRAY_TASK_COUNT", &count)?;
        let k = id
            .checked_sub(min)
            .ok_or_else(|| bad("SLURM_ARRAY_TASK_ID", "below SLURM_ARRAY_TASK_MIN"))?;
        return check(k, n, "SLURM_ARRAY_TASK_ID");
    }
    if let Some(idx) = env("JOB_COMPLETION_INDEX") {
        let k = num("JOB_COMPLETION_INDEX", &idx)?;
        let n = match shard_count {
            Some(n) => n,
            None => match env("BTFKIT_SHARD_COUNT") {
                Some(c) => num("BTFKIT_SHARD_COUNT", &c)?,
                None => {
                    return Err(bad(
                        "JOB_COMPLETION_INDEX",
                        "the shard count is unknown: give --shard-count N or set BTFKIT_SHARD_COUNT",
                    ));
                }
            },
        };
        return check(k, n, "JOB_COMPLETION_INDEX");
    }
    Ok((0, 1))
}

/// The report file of shard `k` of `n`.
pub fn shard_report_name(k: usize, n: usize) -> String {
    format!("report-{k}-of-{n}.jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_outputs_replace_ko_by_btf() {
        assert_eq!(module_output_name("kernel/net/fou.ko"), "kernel/net/fou.btf");
        assert_eq!(module_output_name("extra/x.ko.debug"), "extra/x.btf");
    }

    #[test]
    fn shards_from_flag_slurm_and_indexed_jobs() {
        let none = |_: &str| None;
        assert_eq!(resolve_shard(Some("2/5"), None, &none).unwrap(), (2, 5));
        assert!(resolve_shard(Some("5/5"), None, &none).is_err());
        assert!(resolve_shard(Some("0/0"), None, &none).is_err());
        assert!(resolve_shard(Some("x"), None, &none).is_err());
        assert_eq!(resolve_shard(None, None, &none).unwrap(), (0, 1));
        let slurm = |k: &str| match k {
            "SLURM_ARRAY_TASK_ID" => Some("11".into()),
            "SLURM_ARRAY_TASK_MIN" => Some("10".into()),
            "SLURM_ARRAY_TASK_COUNT" => Some("3".into()),
            _ => None,
        };
        assert_eq!(resolve_shard(None, None, &slurm).unwrap(), (1, 3));
        // the flag wins over the environment
        assert_eq!(resolve_shard(Some("0/2"), None, &slurm).unwrap(), (0, 2));
        let k8s = |k: &str| match k {
            "JOB_COMPLETION_INDEX" => Some("3".into()),
            "BTFKIT_SHARD_COUNT" => Some("4".into()),
            _ => None,
        };
        assert_eq!(resolve_shard(None, None, &k8s).unwrap(), (3, 4));
        assert_eq!(resolve_shard(None, Some(8), &k8s).unwrap(), (3, 8));
        let k8s_no_count = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "0".to_string());
        assert!(resolve_shard(None, None, &k8s_no_count).is_err());
    }

    #[test]
    fn shards_partition_the_list() {
        let entries: Vec<ListEntry> = (0..7)
            .map(|i| ListEntry {
                path: format!("/x/{i}").into(),
                name: i.to_string(),
            })
            .collect();
        let mut all: Vec<String> = (0..3)
            .flat_map(|k| shard_entries(&entries, k, 3))
            .map(|e| e.name)
            .collect();
        assert_eq!(shard_entries(&entries, 1, 3).len(), 2);
        all.sort();
        assert_eq!(all, (0..7).map(|i| i.to_string()).collect::<Vec<_>>());
    }

    #[test]
    fn list_names_and_duplicates() {
        let d = std::env::temp_dir().join(format!("btfkit-kernel-list-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let l = d.join("list");
        std::fs::write(
            &l,
            "# c\n\na/linux-image-6.1-dbg_6.1_amd64.deb\n/abs/tree/\n  b.rpm  \n",
        )
        .unwrap();
        let (e, _) = read_list(&l).unwrap();
        let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["linux-image-6.1-dbg_6.1_amd64", "tree", "b"]);
        assert_eq!(e[0].path, d.join("a/linux-image-6.1-dbg_6.1_amd64.deb"));
        std::fs::write(&l, "x/k.deb\ny/k.ddeb\n").unwrap();
        let err = read_list(&l).unwrap_err().to_string();
        assert!(
            err.contains("x/k.deb") && err.contains("y/k.ddeb") && err.contains("`k`"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_torn_last_line_is_dropped_others_are_reported() {
        let d = std::env::temp_dir().join(format!("btfkit-kernel-report-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("report.jsonl");
        let t = Totals::default();
        let good = serde_json::to_string(&Line::Summary { summary: t }).unwrap();
        std::fs::write(&p, format!("{good}\n{{bad\n{good}\n{{\"inp")).unwrap();
        let (lines, bad) = read_report(&p).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(bad, [2]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn flags_are_canonical() {
        let mut a = Options::default();
        a.features.apply_list("var,encode_force");
        a.lang = LangFilter::Exclude(vec![0x1c, 0x1c]);
        let mut b = Options::default();
        b.features.apply_list("encode_force");
        b.features.apply_list("var");
        b.lang = LangFilter::Exclude(vec![0x1c]);
        assert_eq!(flags_string(&a), flags_string(&b));
        assert!(flags_string(&a).starts_with("btf_features=encode_force,var lang_exclude=0x1c"));
    }

    #[test]
    fn fingerprint_of_bytes_and_file_agree() {
        let data: Vec<u8> = include_bytes!("../../data/multi_types.gcc-O2.ld-r.o").to_vec();
        let d = std::env::temp_dir().join(format!("btfkit-kernel-fp-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("m.ko");
        std::fs::write(&p, &data).unwrap();
        let f = Input::file(p, "m.ko".into(), InputKind::Module, "modules/m.btf".into()).unwrap();
        let b = Input::bytes(
            "m.ko".into(),
            InputKind::Module,
            "modules/m.btf".into(),
            f.mtime,
            data.into(),
        );
        assert_eq!(f.fingerprint().unwrap(), b.fingerprint().unwrap());
        let other = Input {
            mtime: f.mtime + 1,
            ..b.clone()
        };
        assert_ne!(other.fingerprint().unwrap(), b.fingerprint().unwrap());
        let _ = std::fs::remove_dir_all(&d);
    }
}
