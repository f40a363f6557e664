//! The reports of runs, merged and checked: `kernel` runs' (one tree, or
//! every shard of a list: every item has its inputs with exactly one
//! outcome, every shard's report is there and finished, nothing failed)
//! and `core check --out-dir` runs' shard files (merged into one matrix by
//! [`crate::core::shards`]). The command line's `report` prints what
//! [`check`] returns; a program using the crate reads the same fields.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error as ThisError;

use crate::core::{self, shards};
use crate::pipeline::kernel::{Header, InputKind, KernelError, Line, Outcome, read_list, read_report};

#[derive(Debug, ThisError)]
pub enum ReportError {
    #[error("{path}")]
    Dir { path: PathBuf, source: std::io::Error },
    #[error(
        "no report*.jsonl or core-check-*.json in {dirs}: not the output directory of a `btfkit kernel` or \
         `btfkit core check --out-dir` run"
    )]
    Empty { dirs: String },
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Core(#[from] shards::ShardError),
}

/// The report files found in some output directories, each kind sorted.
#[derive(Debug, Default)]
pub struct Found {
    /// `report*.jsonl` of `kernel` runs.
    pub kernel: Vec<PathBuf>,
    /// `core-check-*.json` of `core check --out-dir` runs.
    pub core: Vec<PathBuf>,
}

/// The report files in `dirs`; an error when there are none.
pub fn find(dirs: &[PathBuf]) -> Result<Found, ReportError> {
    let mut found = Found::default();
    for d in dirs {
        let dir_err = |source| ReportError::Dir {
            path: d.clone(),
            source,
        };
        for e in std::fs::read_dir(d).map_err(dir_err)? {
            let e = e.map_err(dir_err)?;
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("report") && n.ends_with(".jsonl") {
                found.kernel.push(e.path());
            } else if shards::is_shard_file(&n) {
                found.core.push(e.path());
            }
        }
    }
    found.kernel.sort();
    found.core.sort();
    if found.kernel.is_empty() && found.core.is_empty() {
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(ReportError::Empty { dirs: dirs.join(", ") });
    }
    Ok(found)
}

/// Every kind of report found, merged.
pub struct Checked {
    pub kernel: Option<KernelCheck>,
    pub core: Option<CoreCheck>,
}

impl Checked {
    /// Every report complete and nothing failed.
    pub fn good(&self) -> bool {
        self.kernel.as_ref().is_none_or(KernelCheck::good) && self.core.as_ref().is_none_or(CoreCheck::good)
    }

    /// One JSON object: the one kind's, or `{"kernel": …, "core": …}`.
    pub fn to_json(&self) -> Value {
        match (&self.kernel, &self.core) {
            (Some(k), Some(c)) => serde_json::json!({"kernel": k.to_json(), "core": c.to_json()}),
            (Some(k), None) => k.to_json(),
            (None, Some(c)) => c.to_json(),
            (None, None) => Value::Null,
        }
    }

    /// The text: each kind's problems, then its summary line.
    pub fn render(&self, out: &mut String, verbose: bool) {
        if let Some(k) = &self.kernel {
            k.render(out);
        }
        if let Some(c) = &self.core {
            c.render(out, verbose);
        }
    }
}

/// Merges and checks the reports in `dirs`: `kernel` runs' against `list`
/// (the list they took; default: the items their headers name), `core
/// check` shards into one matrix.
pub fn check(dirs: &[PathBuf], list: Option<&Path>) -> Result<Checked, ReportError> {
    let found = find(dirs)?;
    let kernel = if found.kernel.is_empty() {
        None
    } else {
        Some(kernel_check(found.kernel, list)?)
    };
    let core = if found.core.is_empty() {
        None
    } else {
        Some(core_check(found.core)?)
    };
    Ok(Checked { kernel, core })
}

/// The shards of `core check` runs, merged.
pub struct CoreCheck {
    pub reports: Vec<PathBuf>,
    pub merged: shards::Merged,
    /// Kernels a shard could not read.
    pub unreadable: Vec<String>,
}

impl CoreCheck {
    /// Every shard and kernel there, every kernel read, every object ok
    /// everywhere.
    pub fn good(&self) -> bool {
        self.merged.complete() && self.unreadable.is_empty() && self.merged.result.worst() == core::Verdict::Ok
    }

    /// The merged matrix with every program and relocation, and the
    /// completeness fields.
    pub fn to_json(&self) -> Value {
        let m = &self.merged;
        let mut json = m.result.to_json(true);
        json["reports"] = self.reports.iter().map(|f| f.display().to_string()).collect();
        json["missing_shards"] = m.missing_shards.clone().into();
        json["missing_kernels"] = m.missing_kernels.clone().into();
        json["problems"] = m.problems.iter().chain(&self.unreadable).cloned().collect();
        json["complete"] = m.complete().into();
        json
    }

    pub fn render(&self, out: &mut String, verbose: bool) {
        let m = &self.merged;
        for p in &m.problems {
            let _ = writeln!(out, "{p}");
        }
        m.result.render(out, verbose);
        let _ = writeln!(
            out,
            "{} core check reports, {} shards missing, {} kernels missing: {}",
            self.reports.len(),
            m.missing_shards.len(),
            m.missing_kernels.len(),
            if m.complete() { "complete" } else { "INCOMPLETE" }
        );
    }
}

/// Reads and merges the shard files of `core check` runs.
pub fn core_check(reports: Vec<PathBuf>) -> Result<CoreCheck, ReportError> {
    let parts = reports
        .iter()
        .map(|f| Ok((f.clone(), shards::read(f)?)))
        .collect::<Result<Vec<_>, ReportError>>()?;
    let merged = shards::merge(parts);
    let unreadable = merged
        .result
        .kernels
        .iter()
        .filter_map(|k| {
            k.load_error
                .as_ref()
                .map(|e| format!("kernel {}: unreadable: {e}", k.kernel))
        })
        .collect();
    Ok(CoreCheck {
        reports,
        merged,
        unreadable,
    })
}

/// The reports of `kernel` runs, merged.
#[derive(Debug)]
pub struct KernelCheck {
    pub reports: Vec<PathBuf>,
    /// How many items were expected (a list's entries; a run of one kernel
    /// counts as one, named by its report's directory).
    pub items: usize,
    pub missing_items: Vec<String>,
    /// `K/N` of every shard whose report is missing.
    pub missing_shards: Vec<String>,
    /// Inputs reported, each counted once, by its last outcome.
    pub inputs: usize,
    pub ok: usize,
    pub reused: usize,
    pub failed: usize,
    /// Every problem found, one line each; none when complete.
    pub problems: Vec<String>,
}

impl KernelCheck {
    pub fn good(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "reports": self.reports.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "items": self.items,
            "missing_items": self.missing_items,
            "missing_shards": self.missing_shards,
            "inputs": self.inputs,
            "ok": self.ok, "reused": self.reused, "failed": self.failed,
            "problems": self.problems,
            "complete": self.good(),
        })
    }

    pub fn render(&self, out: &mut String) {
        for p in &self.problems {
            let _ = writeln!(out, "{p}");
        }
        let _ = writeln!(
            out,
            "{} reports, {} items ({} missing), {} missing shards, {} inputs: {} ok, {} reused, {} failed: {}",
            self.reports.len(),
            self.items,
            self.missing_items.len(),
            self.missing_shards.len(),
            self.inputs,
            self.ok,
            self.reused,
            self.failed,
            if self.good() { "complete" } else { "INCOMPLETE" }
        );
    }
}

/// An input's outcome as a report line gives it, and its error if any.
type Reported = (Outcome, Option<String>);

/// Reads and checks the reports of `kernel` runs against `list` (see
/// [`check`]).
pub fn kernel_check(reports: Vec<PathBuf>, list: Option<&Path>) -> Result<KernelCheck, ReportError> {
    let mut problems: Vec<String> = Vec::new();
    let mut headers: Vec<Header> = Vec::new();
    // (item, input) -> outcomes, each with its error
    let mut outcomes: BTreeMap<(Option<String>, String), Vec<Reported>> = BTreeMap::new();
    let mut vmlinux_of: BTreeSet<Option<String>> = BTreeSet::new();
    // item -> the module count its package's end-of-package line gives
    let mut package_modules: BTreeMap<Option<String>, usize> = BTreeMap::new();
    for f in &reports {
        let (lines, bad) = read_report(f)?;
        for n in bad {
            problems.push(format!("{}:{n}: not a report line", f.display()));
        }
        let mut finished = false;
        for l in lines {
            match l {
                Line::Header(h) => headers.push(h),
                Line::Summary { .. } => finished = true,
                Line::Package { package } => {
                    let item = package.item.or_else(|| f.parent().map(|d| d.display().to_string()));
                    package_modules.insert(item, package.modules);
                }
                Line::Record(r) => {
                    // A run of one kernel names no item: its report's
                    // directory tells it from another such run's.
                    let item = r.item.clone().or_else(|| f.parent().map(|d| d.display().to_string()));
                    if r.kind == InputKind::Vmlinux {
                        vmlinux_of.insert(item.clone());
                    }
                    outcomes
                        .entry((item, r.input.clone()))
                        .or_default()
                        .push((r.outcome, r.error.clone()));
                }
            }
        }
        if !finished {
            problems.push(format!("{}: the run did not finish (no summary line)", f.display()));
        }
    }
    // The items expected.
    let expected: BTreeSet<Option<String>> = match list {
        Some(list) => read_list(list)?.0.into_iter().map(|e| Some(e.name)).collect(),
        None if headers.is_empty() => outcomes.keys().map(|(i, _)| i.clone()).collect(),
        None => headers.iter().flat_map(|h| h.items.iter().cloned().map(Some)).collect(),
    };
    // Every shard of each shard count seen.
    let mut shards: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for h in &headers {
        if !shards.entry(h.shard[1]).or_default().insert(h.shard[0]) {
            problems.push(format!("shard {}/{} has two reports", h.shard[0], h.shard[1]));
        }
    }
    let mut missing_shards = Vec::new();
    for (n, ks) in &shards {
        for k in 0..*n {
            if !ks.contains(&k) {
                missing_shards.push(format!("{k}/{n}"));
                problems.push(format!("the report of shard {k}/{n} is missing"));
            }
        }
    }
    let mut missing_items = Vec::new();
    for i in &expected {
        if !vmlinux_of.contains(i) {
            let name = i.clone().unwrap_or_else(|| "(the tree)".into());
            problems.push(format!("item {name}: no report of its vmlinux"));
            missing_items.push(name);
        }
    }
    // A package that says how many modules it has: each has its line.
    for (item, &n) in &package_modules {
        let got = outcomes
            .iter()
            .filter(|((i, _), _)| i == item)
            .count()
            .saturating_sub(usize::from(vmlinux_of.contains(item)));
        if got < n {
            let name = item.clone().unwrap_or_else(|| "(the tree)".into());
            problems.push(format!("item {name}: its package has {n} modules, {got} reported"));
        }
    }
    let (mut ok, mut reused, mut failed) = (0usize, 0usize, 0usize);
    for ((item, input), os) in &outcomes {
        let name = match item {
            Some(i) => format!("{i}: {input}"),
            None => input.clone(),
        };
        if os.len() > 1 {
            problems.push(format!("{name}: {} outcomes reported (one expected)", os.len()));
        }
        if !expected.contains(item) {
            problems.push(format!("{name}: not an item of the list"));
        }
        match os.last() {
            Some((Outcome::Ok, _)) => ok += 1,
            Some((Outcome::Reused, _)) => reused += 1,
            Some((Outcome::Failed, why)) => {
                failed += 1;
                problems.push(format!(
                    "{name}: failed: {}",
                    why.as_deref().unwrap_or("(no reason recorded)")
                ));
            }
            None => {}
        }
    }
    Ok(KernelCheck {
        items: expected.len(),
        missing_items,
        missing_shards,
        inputs: outcomes.len(),
        ok,
        reused,
        failed,
        problems,
        reports,
    })
}
