//! `btfkit report DIR...`: the reports of `btfkit kernel` runs (one tree,
//! or every shard of a list) merged and checked: every item has its inputs
//! with exactly one outcome, every shard's report is there and finished,
//! nothing failed. The shard reports of `btfkit core check --out-dir` in the
//! same directories are merged into one matrix.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use btfkit::core::shards;
use btfkit::pipeline::kernel::{Header, InputKind, Line, Outcome, read_list, read_report};

use super::{EXIT_NO, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    /// Output directories of `btfkit kernel` (every report*.jsonl in them is read) or of
    /// `btfkit core check --out-dir` (every core-check-*.json).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The list the runs took: its entries are the items expected (default: the items
    /// the shard reports' headers name, over all N shards).
    #[arg(long)]
    pub list: Option<PathBuf>,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// With core check shards: print every program and relocation per kernel.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// An input's outcome as a report line gives it, and its error if any.
type Reported = (Outcome, Option<String>);

/// One kind of report merged: complete or not, as JSON and as text.
struct Merged {
    good: bool,
    json: serde_json::Value,
    text: String,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let mut files = Vec::new();
    let mut core_files = Vec::new();
    for d in &a.dirs {
        for e in std::fs::read_dir(d).with_context(|| format!("{}", d.display()))? {
            let e = e.with_context(|| format!("{}", d.display()))?;
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("report") && n.ends_with(".jsonl") {
                files.push(e.path());
            } else if shards::is_shard_file(&n) {
                core_files.push(e.path());
            }
        }
    }
    files.sort();
    core_files.sort();
    if files.is_empty() && core_files.is_empty() {
        let dirs: Vec<String> = a.dirs.iter().map(|d| d.display().to_string()).collect();
        bail!(
            "no report*.jsonl or core-check-*.json in {}: not the output directory of a `btfkit kernel` or `btfkit core check --out-dir` run",
            dirs.join(", ")
        );
    }
    let kernel = if files.is_empty() {
        None
    } else {
        Some(kernel_reports(&files, a.list.as_deref())?)
    };
    let core = if core_files.is_empty() {
        None
    } else {
        Some(core_reports(&core_files, a.verbose)?)
    };
    if a.json {
        let v = match (&kernel, &core) {
            (Some(k), Some(c)) => serde_json::json!({"kernel": k.json, "core": c.json}),
            (Some(m), None) | (None, Some(m)) => m.json.clone(),
            (None, None) => unreachable!("one kind of report at least"),
        };
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for m in kernel.iter().chain(&core) {
            use std::io::Write as _;
            std::io::stdout()
                .lock()
                .write_all(m.text.as_bytes())
                .map_err(super::StdoutError)?;
        }
    }
    let good = kernel.iter().chain(&core).all(|m| m.good);
    Ok(if good { EXIT_OK } else { EXIT_NO })
}

/// The shards of `core check` runs, merged: complete when every shard and
/// kernel is there and every object is ok everywhere.
fn core_reports(files: &[PathBuf], verbose: bool) -> anyhow::Result<Merged> {
    let parts = files
        .iter()
        .map(|f| Ok((f.clone(), shards::read(f)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let m = shards::merge(parts);
    let r = &m.result;
    let unreadable: Vec<String> = r
        .kernels
        .iter()
        .filter_map(|k| {
            k.load_error
                .as_ref()
                .map(|e| format!("kernel {}: unreadable: {e}", k.kernel))
        })
        .collect();
    let good = m.complete() && unreadable.is_empty() && r.worst() == btfkit::core::Verdict::Ok;
    let mut json = r.to_json(true);
    json["reports"] = files.iter().map(|f| f.display().to_string()).collect();
    json["missing_shards"] = m.missing_shards.clone().into();
    json["missing_kernels"] = m.missing_kernels.clone().into();
    json["problems"] = m.problems.iter().chain(&unreadable).cloned().collect();
    json["complete"] = m.complete().into();
    let mut text = String::new();
    for p in &m.problems {
        let _ = writeln!(text, "{p}");
    }
    r.render(&mut text, verbose);
    let _ = writeln!(
        text,
        "{} core check reports, {} shards missing, {} kernels missing: {}",
        files.len(),
        m.missing_shards.len(),
        m.missing_kernels.len(),
        if m.complete() { "complete" } else { "INCOMPLETE" }
    );
    Ok(Merged { good, json, text })
}

/// The reports of `btfkit kernel` runs.
fn kernel_reports(files: &[PathBuf], list: Option<&Path>) -> anyhow::Result<Merged> {
    let mut problems: Vec<String> = Vec::new();
    let mut headers: Vec<Header> = Vec::new();
    // (item, input) -> outcomes, each with its error
    let mut outcomes: BTreeMap<(Option<String>, String), Vec<Reported>> = BTreeMap::new();
    let mut vmlinux_of: BTreeSet<Option<String>> = BTreeSet::new();
    for f in files {
        let (lines, bad) = read_report(f)?;
        for n in bad {
            problems.push(format!("{}:{n}: not a report line", f.display()));
        }
        let mut finished = false;
        for l in lines {
            match l {
                Line::Header(h) => headers.push(h),
                Line::Summary { .. } => finished = true,
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
    let good = problems.is_empty();
    let json = serde_json::json!({
        "reports": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "items": expected.len(),
        "missing_items": missing_items,
        "missing_shards": missing_shards,
        "inputs": outcomes.len(),
        "ok": ok, "reused": reused, "failed": failed,
        "problems": problems,
        "complete": good,
    });
    let mut text = String::new();
    for p in &problems {
        let _ = writeln!(text, "{p}");
    }
    let _ = writeln!(
        text,
        "{} reports, {} items ({} missing), {} missing shards, {} inputs: {ok} ok, {reused} reused, {failed} failed: {}",
        files.len(),
        expected.len(),
        missing_items.len(),
        missing_shards.len(),
        outcomes.len(),
        if good { "complete" } else { "INCOMPLETE" }
    );
    Ok(Merged { good, json, text })
}
