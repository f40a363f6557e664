//! The whole of a `kernel` run: one kernel, or one shard of a list of
//! them, into an output directory, with its report rewritten for resume and
//! a summary line at the end. The command line and a program using the
//! crate run the same [`run`]; they differ only in how they show progress
//! ([`Progress`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{
    Header, InputKind, Item, ItemTotals, KernelError, KernelPlan, Line, Outcome, Reading, Record, ReportWriter, Totals,
    flags_string, open_item, read_list, read_report, run_item, settled, shard_entries, shard_report_name,
};
use crate::encode::Options;

/// Which kernels a run takes.
#[derive(Clone, Debug)]
pub enum Target {
    /// One kernel: a tree (an unpacked debug package, a build directory)
    /// or a package file; its report is `report.jsonl`.
    One(PathBuf),
    /// Entries `i` with `i % count == index` of a list of kernels, each
    /// into its own directory; the shard's report is
    /// `report-<index>-of-<count>.jsonl`.
    List { list: PathBuf, index: usize, count: usize },
}

/// A `kernel` run: what it takes, where it writes, how it encodes.
#[derive(Clone)]
pub struct KernelRun {
    pub target: Target,
    pub out_dir: PathBuf,
    /// The options of every encode (`jobs`: threads for a vmlinux, modules
    /// at once).
    pub opts: Options,
    /// The version recorded in each report line; a rerun reuses only lines
    /// of the same version.
    pub version: String,
    /// How packages are read: members over a size in temporary files
    /// ([`super::SPILL_OVER`]), xz on how many threads.
    pub reading: Reading,
}

/// What a run tells its caller as it goes. Every method has a default that
/// does nothing.
pub trait Progress: Sync {
    /// Line `line` of the previous report is not a report line: it is
    /// ignored (and dropped from the rewritten report).
    fn bad_report_line(&self, _report: &Path, _line: usize) {}
    /// `n` more inputs are coming (an item's known inputs when it opens; a
    /// package's modules one at a time, as its stream reaches them).
    fn expect(&self, _n: u64) {}
    /// An input's line is written (its outcome, its error if it failed).
    fn record(&self, _r: &Record) {}
}

/// The progress of a caller that shows none.
pub struct Quiet;
impl Progress for Quiet {}

/// A finished run: its summary (also the report's last line) and where the
/// report is.
#[derive(Clone, Debug)]
pub struct Finished {
    pub summary: Totals,
    pub report: PathBuf,
}

/// One kernel of the run, opened or still to be opened.
struct Planned {
    path: PathBuf,
    name: Option<String>,
    out_dir: PathBuf,
    item: Option<Result<Item, KernelError>>,
}

/// Runs `run`: every kernel of its target, then the summary. Fails only
/// when the run cannot start (an unreadable list, the one kernel of a
/// `Target::One` that cannot be opened, an output directory that cannot be
/// made) or its report cannot be written; a kernel or an input that fails
/// is a report line and the run goes on.
pub fn run(run: &KernelRun, progress: &dyn Progress) -> Result<Finished, KernelError> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&run.out_dir).map_err(|source| KernelError::OutDir {
        path: run.out_dir.clone(),
        source,
    })?;
    let (items, report_path, header) = match &run.target {
        Target::List { list, index, count } => {
            let (entries, list_sha256) = read_list(list)?;
            let mine = shard_entries(&entries, *index, *count);
            let header = Header {
                list: list.to_string_lossy().into_owned(),
                list_sha256,
                shard: [*index, *count],
                items: mine.iter().map(|e| e.name.clone()).collect(),
            };
            (
                mine.into_iter().map(|e| (e.path, Some(e.name))).collect::<Vec<_>>(),
                run.out_dir.join(shard_report_name(*index, *count)),
                Some(header),
            )
        }
        Target::One(root) => (vec![(root.clone(), None)], run.out_dir.join("report.jsonl"), None),
    };
    let (previous, bad) = read_report(&report_path)?;
    for n in bad {
        progress.bad_report_line(&report_path, n);
    }
    let reading = run.reading;
    let mut plan = KernelPlan::new(run.out_dir.clone(), run.opts.clone(), run.version.clone(), previous);
    // Every tree opened first (its files listed), so that the new report
    // starts with every line that can be reused as it is. A package in a
    // list is opened when its turn comes (opening one reads it up to its
    // vmlinux); the one root of a run is opened here, so that one that
    // cannot be read fails before the report is rewritten.
    let mut first: Vec<Line> = header.into_iter().map(Line::Header).collect();
    let mut planned = Vec::with_capacity(items.len());
    for (path, name) in items {
        let out_dir = match &name {
            Some(n) => run.out_dir.join(n),
            None => run.out_dir.clone(),
        };
        if name.is_some() && !path.is_dir() {
            planned.push(Planned {
                path,
                name,
                out_dir,
                item: None,
            });
            continue;
        }
        let item = match open_item(&path, name.clone(), reading, &plan, &out_dir) {
            Ok(mut i) => {
                let done = settled(&plan, &mut i, &out_dir);
                plan.mark_written(&done);
                first.extend(done);
                Ok(i)
            }
            // one list entry that cannot be opened: its line, and on to the next
            Err(e) if name.is_some() => Err(e),
            Err(e) => return Err(e),
        };
        planned.push(Planned {
            path,
            name,
            out_dir,
            item: Some(item),
        });
    }
    let report = ReportWriter::create(&report_path, &first)?;
    // A package's modules are not counted before they are read: each one
    // is announced as it comes.
    let streaming = AtomicBool::new(false);
    let on_record = |r: &Record| {
        if streaming.load(Ordering::Relaxed) && r.kind == InputKind::Module {
            progress.expect(1);
        }
        progress.record(r);
    };
    let mut totals = ItemTotals::default();
    for p in planned {
        let opened = match p.item {
            Some(i) => i,
            // A list's package, opened now: its lines that hold go into
            // the report before anything is encoded.
            None => open_item(&p.path, p.name.clone(), reading, &plan, &p.out_dir).and_then(|mut i| {
                let done = settled(&plan, &mut i, &p.out_dir);
                for l in &done {
                    report.append(l)?;
                }
                plan.mark_written(&done);
                Ok(i)
            }),
        };
        let item = match opened {
            Ok(i) => i,
            Err(e) => {
                let r = unopened(&plan, p.name, &p.path, &crate::error::one_line(&e));
                report.append(&Line::Record(Box::new(r.clone())))?;
                progress.expect(1);
                progress.record(&r);
                totals.failed += 1;
                continue;
            }
        };
        progress.expect(1 + item.module_count.unwrap_or(0) as u64);
        streaming.store(item.module_count.is_none(), Ordering::Relaxed);
        let t = run_item(&plan, item, &p.out_dir, &report, &on_record)?;
        totals.ok += t.ok;
        totals.reused += t.reused;
        totals.failed += t.failed;
    }
    let usage = crate::metrics::usage();
    let summary = Totals {
        inputs: totals.ok + totals.reused + totals.failed,
        ok: totals.ok,
        reused: totals.reused,
        failed: totals.failed,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: usage.map_or(0.0, |u| u.cpu.as_secs_f64()),
        peak_rss_bytes: usage.map_or(0, |u| u.peak_rss_bytes),
    };
    report.append(&Line::Summary {
        summary: summary.clone(),
    })?;
    Ok(Finished {
        summary,
        report: report_path,
    })
}

/// The line of a list entry that could not be opened (no vmlinux, a package
/// that cannot be read).
fn unopened(plan: &KernelPlan, name: Option<String>, path: &Path, error: &str) -> Record {
    Record {
        item: name,
        input: path.to_string_lossy().into_owned(),
        kind: InputKind::Vmlinux,
        size: 0,
        fingerprint: String::new(),
        outcome: Outcome::Failed,
        error: Some(error.to_string()),
        output: None,
        sha256: None,
        types: None,
        wall_s: 0.0,
        cpu_s: 0.0,
        version: plan.version.clone(),
        flags: flags_string(&plan.opts),
        base_sha256: None,
    }
}
