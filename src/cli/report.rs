//! `btfkit report DIR...`: the reports of `btfkit kernel` runs (one tree,
//! or every shard of a list) merged and checked: every item has its inputs
//! with exactly one outcome, every shard's report is there and finished,
//! nothing failed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, bail};

use btfkit::pipeline::kernel::{Header, InputKind, Line, Outcome, read_list, read_report};

use super::{EXIT_NO, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    /// Output directories of `btfkit kernel` (every report*.jsonl in them is read).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The list the runs took: its entries are the items expected (default: the items
    /// the shard reports' headers name, over all N shards).
    #[arg(long)]
    pub list: Option<PathBuf>,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// An input's outcome as a report line gives it, and its error if any.
type Reported = (Outcome, Option<String>);

pub fn run(a: Args) -> anyhow::Result<i32> {
    let mut files = Vec::new();
    for d in &a.dirs {
        for e in std::fs::read_dir(d).with_context(|| format!("{}", d.display()))? {
            let e = e.with_context(|| format!("{}", d.display()))?;
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("report") && n.ends_with(".jsonl") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    if files.is_empty() {
        let dirs: Vec<String> = a.dirs.iter().map(|d| d.display().to_string()).collect();
        bail!(
            "no report*.jsonl in {}: not the output directory of a `btfkit kernel` run",
            dirs.join(", ")
        );
    }
    let mut problems: Vec<String> = Vec::new();
    let mut headers: Vec<Header> = Vec::new();
    // (item, input) -> outcomes, each with its error
    let mut outcomes: BTreeMap<(Option<String>, String), Vec<Reported>> = BTreeMap::new();
    let mut vmlinux_of: BTreeSet<Option<String>> = BTreeSet::new();
    for f in &files {
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
    let expected: BTreeSet<Option<String>> = match &a.list {
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
    if a.json {
        let v = serde_json::json!({
            "reports": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "items": expected.len(),
            "missing_items": missing_items,
            "missing_shards": missing_shards,
            "inputs": outcomes.len(),
            "ok": ok, "reused": reused, "failed": failed,
            "problems": problems,
            "complete": good,
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for p in &problems {
            out!("{p}");
        }
        out!(
            "{} reports, {} items ({} missing), {} missing shards, {} inputs: {ok} ok, {reused} reused, {failed} failed: {}",
            files.len(),
            expected.len(),
            missing_items.len(),
            missing_shards.len(),
            outcomes.len(),
            if good { "complete" } else { "INCOMPLETE" }
        );
    }
    Ok(if good { EXIT_OK } else { EXIT_NO })
}
