//! `btfkit report DIR...`: the reports of `btfkit kernel` runs (one tree,
//! or every shard of a list) merged and checked: every item has its inputs
//! with exactly one outcome, every shard's report is there and finished,
//! nothing failed. The shard reports of `btfkit core check --out-dir` in the
//! same directories are merged into one matrix. [`btfkit::report`] does
//! the work; this file parses the flags and prints.

use std::path::PathBuf;

use btfkit::report;

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

pub fn run(a: Args) -> anyhow::Result<i32> {
    let checked = report::check(&a.dirs, a.list.as_deref())?;
    if a.json {
        out!("{}", serde_json::to_string_pretty(&checked.to_json())?);
    } else {
        let mut text = String::new();
        checked.render(&mut text, a.verbose);
        super::print_text(&text)?;
    }
    Ok(if checked.good() { EXIT_OK } else { EXIT_NO })
}
