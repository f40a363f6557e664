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
//! A package's member is fingerprinted by the package file's sha256 and its
//! path, so a rerun knows what holds before reading the package
//! ([`known`]): those members are neither encoded nor held (the reader
//! skips them), their lines open the new report, and once the package's
//! module count is known (its `package` line) the stream is dropped as soon
//! as the members left to encode are read. A package whose every line
//! holds is not decompressed at all.
//!
//! Files: `drive` (a whole run: one kernel or a list's shard, the report
//! rewritten, the summary), `input` (an input and its fingerprint), `tree`
//! and `package` (finding a kernel's inputs), `report` (its lines, read and
//! appended), `list` (lists and shards); one item's run is here.

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
    /// A package could not be read (its error names the package and the place).
    #[error(transparent)]
    Package(crate::package::PackageError),
    /// A module met before its package's vmlinux could not be set aside.
    #[error("{package}: setting aside a module that comes before the vmlinux")]
    Spill { package: PathBuf, source: std::io::Error },
    /// An input a rerun took as done without reading it was asked for its
    /// bytes (a bug: its line was proven to hold).
    #[error("{input}: not read from its package (its previous line was taken as holding)")]
    NotRead { input: String },
    /// The package file's sha256 could not be read.
    #[error("the package's sha256: {why}")]
    PackageSha { why: String },
    #[error("{path}: neither a directory nor a package (.deb, .ddeb, .rpm)")]
    NotAnItem { path: PathBuf },
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("output directory {path}")]
    OutDir { path: PathBuf, source: std::io::Error },
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

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KernelError + '_ {
    move |source| KernelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

mod drive;
mod input;
mod list;
mod package;
mod report;
#[cfg(test)]
mod tests;
mod tree;

pub use drive::{Finished, KernelRun, Progress, Quiet, Target, run};
use input::file_sha256;
pub use input::{Input, InputData, InputKind, PackageSha, sha256_hex};
pub use list::{ListEntry, read_list, resolve_shard, shard_entries, shard_report_name};
pub use package::{Known, PackageState, Reading, SPILL_OVER, known, open_package};
pub use report::{Header, Line, Outcome, PackageRead, Record, ReportWriter, Totals, flags_string, read_report};
pub use tree::{module_output_name, open_tree};

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
    /// A package's: its identity, and what its reading found.
    pub package: Option<PackageState>,
}

/// Opens a list entry or the one root of a run: a directory is a tree
/// ([`open_tree`]), a file a package ([`open_package`], recognised by its
/// magic, whatever its name; what `plan`'s previous report proves of it,
/// its outputs in `out_dir`, is not read again).
pub fn open_item(
    path: &Path,
    name: Option<String>,
    how: Reading,
    plan: &KernelPlan,
    out_dir: &Path,
) -> Result<Item, KernelError> {
    let m = std::fs::metadata(path).map_err(io(path))?;
    if m.is_dir() {
        return open_tree(path, name);
    }
    // A rerun needs the package's sha256 to know what holds before it
    // reads the stream; a first run reads it beside the stream's start.
    let has_lines = plan.previous.keys().any(|(i, _)| i.as_deref() == name.as_deref());
    let known = if has_lines {
        known(plan, name.as_deref(), &input::stream_sha256(path)?, out_dir)
    } else {
        Known::nothing(PackageSha::reading(path))
    };
    match open_package(path, name, how, known) {
        Err(KernelError::Package(crate::package::PackageError::NotAPackage { .. })) => Err(KernelError::NotAnItem {
            path: path.to_path_buf(),
        }),
        r => r,
    }
}

pub(super) fn is_package_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| PACKAGE_EXTENSIONS.contains(&e))
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
    /// The previous run's end-of-package lines, by item.
    pub packages: HashMap<Option<String>, PackageRead>,
}

impl KernelPlan {
    /// A plan with the previous records of `lines` (the report being replaced).
    pub fn new(report_dir: PathBuf, opts: Options, version: String, lines: Vec<Line>) -> KernelPlan {
        let (mut previous, mut packages) = (HashMap::new(), HashMap::new());
        for l in lines {
            match l {
                Line::Record(r) => {
                    previous.insert((r.item.clone(), r.input.clone()), *r);
                }
                Line::Package { package } => {
                    packages.insert(package.item.clone(), package);
                }
                Line::Header(_) | Line::Summary { .. } => {}
            }
        }
        KernelPlan {
            report_dir,
            opts,
            version,
            previous,
            written: HashSet::new(),
            packages,
        }
    }

    /// Notes the records of `lines` as written into the new report (see
    /// [`settled`]): they replace the previous lines of their inputs.
    pub fn mark_written(&mut self, lines: &[Line]) {
        for l in lines {
            if let Line::Record(r) = l {
                let key = (r.item.clone(), r.input.clone());
                self.previous.insert(key.clone(), (**r).clone());
                self.written.insert(key);
            }
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

/// The `reused` record of input `rel` (of item `item`, output `out`,
/// fingerprint `fp`, split over a vmlinux.btf of sha256 `base`) if its
/// previous line still holds: same fingerprint, version and flags, outcome
/// ok or reused, the same base, and its output still has the recorded
/// sha256. A line the rewritten report holds already is taken as it is.
fn reuse(
    plan: &KernelPlan,
    item: Option<&str>,
    rel: &str,
    out: &str,
    fp: &str,
    base: Option<&str>,
    out_dir: &Path,
) -> Option<Record> {
    let key = (item.map(str::to_string), rel.to_string());
    let old = plan.previous.get(&key)?;
    if plan.written.contains(&key) {
        return Some(old.clone());
    }
    let same = old.fingerprint == fp
        && old.version == plan.version
        && old.flags == flags_string(&plan.opts)
        && matches!(old.outcome, Outcome::Ok | Outcome::Reused)
        && old.output.as_deref() == Some(output_rel(plan, out_dir, out).as_str())
        && old.base_sha256.as_deref() == base;
    if !same {
        return None;
    }
    let sha = file_sha256(&out_dir.join(out))?;
    (Some(&sha) == old.sha256.as_ref()).then(|| Record {
        outcome: Outcome::Reused,
        error: None,
        wall_s: 0.0,
        cpu_s: 0.0,
        ..old.clone()
    })
}

/// The lines of `item` that can be reused as they are, known before it
/// runs: its vmlinux's and, when that is reused, its modules' (a tree's
/// are collected to be checked and put back in their order; a package's
/// are those its previous report proves, [`known`], with the package's
/// module count). Write them into the new report, then
/// [`KernelPlan::mark_written`] them, so that [`run_item`] counts them
/// without writing them again: a rerun killed early keeps them.
pub fn settled(plan: &KernelPlan, item: &mut Item, out_dir: &Path) -> Vec<Line> {
    let name = item.name.clone();
    let check = |i: &Input, base: Option<&str>| {
        i.fingerprint()
            .ok()
            .and_then(|fp| reuse(plan, name.as_deref(), &i.rel, &i.out, &fp, base, out_dir))
    };
    let Some(vm_rec) = check(&item.vmlinux, None) else {
        return Vec::new();
    };
    let base = vm_rec.sha256.clone();
    let mut out = vec![Line::Record(Box::new(vm_rec))];
    if let Some(p) = &mut item.package {
        // The proven members come first in the package's modules; the
        // stream is not touched.
        out.extend(
            std::mem::take(&mut p.proven)
                .into_iter()
                .map(|r| Line::Record(Box::new(r))),
        );
        if let Some(n) = p.known_count {
            out.extend(p.line(name, &item.source, n));
        }
        return out;
    }
    let modules: Vec<_> = std::mem::replace(&mut item.modules, Box::new(std::iter::empty())).collect();
    for m in modules.iter().flatten() {
        if let Some(r) = check(m, base.as_deref()) {
            out.push(Line::Record(Box::new(r)));
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
    mut item: Item,
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
    let reusable = |input: &Input, fp: &str, base: Option<&str>| {
        reuse(plan, item.name.as_deref(), &input.rel, &input.out, fp, base, out_dir)
    };

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
    // A package's vmlinux is held in memory or in a temporary file; the
    // modules read its BTF only.
    match &mut item.vmlinux.data {
        InputData::Bytes(b) => *b = Arc::default(),
        d @ InputData::Spilled(_) => *d = InputData::Bytes(Arc::default()),
        InputData::File(_) | InputData::Proven => {}
    }
    let vm = &item.vmlinux;

    // The modules over it.
    let base = if vm_ok {
        Some(batch::load_shared_base(&vm_out, true).map_err(KernelError::Base)?)
    } else {
        None
    };
    let module_opts = |own_pool: bool| Options {
        timings: true,
        ..super::module_options(&plan.opts, own_pool)
    };
    let modules = Mutex::new(item.modules);
    let (mut item_package, item_name, item_source) = (item.package, item.name.clone(), item.source.clone());
    let failure: Mutex<Option<KernelError>> = Mutex::new(None);
    let threads = crate::encode::effective_jobs(plan.opts.jobs, item.module_count.unwrap_or(usize::MAX));
    let _batch_heap = crate::heap::keep_freed_memory_for_reuse();
    // Outputs are written (and synced) and their lines appended by one
    // writer thread, so that a module thread's core does not sit idle while
    // the disk syncs (two syncs per module, 0.3 ms each here).
    let (to_writer, written) = std::sync::mpsc::sync_channel::<Done>(2 * threads);
    std::thread::scope(|sc| {
        // joined with the module threads at the scope's end
        let _writer = std::thread::Builder::new()
            .spawn_scoped(sc, || {
                for done in written {
                    if let Err(e) = emit(done.finish()) {
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        // the module threads stop at their next module
                        break;
                    }
                }
            })
            .expect("cannot start the output thread");
        for _ in 0..threads {
            // the thread owns its sender (the writer ends when all are gone)
            // and borrows the rest
            let to_writer = to_writer.clone();
            let (failure, modules, module_opts) = (&failure, &modules, &module_opts);
            let (new_record, reusable, base, base_sha) = (&new_record, &reusable, &base, &base_sha);
            std::thread::Builder::new()
                // as batch: dedup and the DWARF walk recurse as deep as types nest
                .stack_size(64 << 20)
                .spawn_scoped(sc, move || {
                    let pool = super::own_pool();
                    let one = module_opts(pool.is_some());
                    loop {
                        if failure.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                            break;
                        }
                        let next = modules.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some(next) = next else { break };
                        let done = match next {
                            Err(e) => Done::record(Record {
                                error: Some(e.to_string()),
                                output: None,
                                kind: InputKind::Module,
                                input: match &e {
                                    KernelError::Io { path, .. } => path.to_string_lossy().into_owned(),
                                    _ => String::new(),
                                },
                                size: 0,
                                ..new_record(vm, String::new())
                            }),
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
                        if to_writer.send(done).is_err() {
                            // the writer stopped on a failure
                            break;
                        }
                    }
                })
                .expect("cannot start a module thread");
        }
        drop(to_writer);
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    // A package read through: how many modules it has, so that a rerun
    // stops its stream once the modules it must encode are read. A line
    // the rewritten report holds already is not written again (it is not
    // there when the vmlinux's line did not hold).
    if let Some(p) = &mut item_package
        && let Some(&n) = p.ended.get()
        && p.count_written != Some(n)
        && let Some(line) = p.line(item_name, &item_source, n)
    {
        report.append(&line)?;
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
) -> Done {
    let fp = match m.fingerprint() {
        Ok(fp) => fp,
        Err(e) => {
            return Done::record(Record {
                error: Some(e.to_string()),
                output: None,
                ..new_record(m, String::new())
            });
        }
    };
    if let Some(r) = reusable(m, &fp, base_sha) {
        return Done::record(r);
    }
    let rec = Record {
        base_sha256: base_sha.map(str::to_string),
        ..new_record(m, fp)
    };
    let Some((base, index)) = base else {
        return Done::record(Record {
            error: Some("not encoded: its vmlinux failed".into()),
            output: None,
            ..rec
        });
    };
    let (path, bytes) = match m.source() {
        Ok(s) => s,
        Err(e) => {
            return Done::record(Record {
                error: Some(e.to_string()),
                output: None,
                ..rec
            });
        }
    };
    let t0 = Instant::now();
    let c0 = crate::metrics::thread_cpu();
    let res = (|| -> Result<(Vec<u8>, u64, Duration), Error> {
        let bytes = bytes.map(|b| &b[..]);
        let (btf, summary, _) = encode_btf(&path, bytes, Some(base.clone()), index.as_ref(), opts, true)?;
        let raw = btf::write::to_bytes(&btf);
        // the CU loop's workers, unless it ran on this thread's own pool
        let pool = if opts.global_pool {
            Duration::ZERO
        } else {
            summary.loop_cpu.map(|c| c.decode + c.cu_encode).unwrap_or_default()
        };
        Ok((raw, btf.own_type_count() as u64, pool))
    })();
    let cpu = match (c0, crate::metrics::thread_cpu()) {
        (Some(c0), Some(c1)) => c1.saturating_sub(c0),
        _ => Duration::ZERO,
    };
    match res {
        Ok((raw, types, pool)) => Done {
            record: Record {
                outcome: Outcome::Ok,
                sha256: Some(sha256_hex(&raw)),
                types: Some(types),
                wall_s: t0.elapsed().as_secs_f64(),
                cpu_s: (cpu + pool).as_secs_f64(),
                ..rec
            },
            write: Some((out_dir.join(&m.out), raw)),
        },
        Err(e) => Done::record(Record {
            error: Some(crate::error::one_line(&e)),
            output: None,
            wall_s: t0.elapsed().as_secs_f64(),
            cpu_s: cpu.as_secs_f64(),
            ..rec
        }),
    }
}

/// A module's record, and the output still to be written before the record
/// may go into the report.
struct Done {
    record: Record,
    write: Option<(PathBuf, Vec<u8>)>,
}

impl Done {
    fn record(record: Record) -> Done {
        Done { record, write: None }
    }

    /// Writes the output (atomically, synced); a failure to write fails the record.
    fn finish(self) -> Record {
        let Some((path, raw)) = self.write else {
            return self.record;
        };
        let written = match path.parent() {
            Some(d) => std::fs::create_dir_all(d).map_err(|e| crate::Error::io(d, e)),
            None => Ok(()),
        }
        .and_then(|()| crate::output::write_atomic(&path, &raw));
        match written {
            Ok(()) => self.record,
            Err(e) => Record {
                outcome: Outcome::Failed,
                error: Some(crate::error::one_line(&Error::Output(e))),
                output: None,
                sha256: None,
                types: None,
                ..self.record
            },
        }
    }
}

fn encode_vmlinux(plan: &KernelPlan, vm: &Input, out: &Path, rec: Record) -> Record {
    let t0 = Instant::now();
    let c0 = crate::metrics::process_cpu();
    let (path, bytes) = match vm.source() {
        Ok(s) => s,
        Err(e) => {
            return Record {
                error: Some(e.to_string()),
                output: None,
                ..rec
            };
        }
    };
    let mut p = Plan::new(path, plan.opts.clone());
    p.input_bytes = bytes.cloned();
    p.output = Some(out.to_path_buf());
    let res = out
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(|e| Error::Output(crate::Error::io(out, e)))
        .and_then(|_| super::execute(&p));
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = match (c0, crate::metrics::process_cpu()) {
        (Some(c0), Some(c1)) => c1.saturating_sub(c0).as_secs_f64(),
        _ => 0.0,
    };
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
            error: Some(crate::error::one_line(&e)),
            output: None,
            wall_s,
            cpu_s,
            ..rec
        },
    }
}
