//! `btfkit diff`: semantic comparison of two BTF files.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use btfkit::diff::{self, Verdict};
use btfkit::elf::Input;

use super::args::load_base;
use super::{EXIT_NO, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    /// First BTF (raw BTF or an ELF file with .BTF).
    pub a: PathBuf,
    /// Second BTF (raw BTF or an ELF file with .BTF).
    pub b: PathBuf,
    /// Base BTF of both A and B when they are split BTF.
    #[arg(long, short = 'B', conflicts_with_all = ["base_a", "base_b"])]
    pub base: Option<PathBuf>,
    /// Base BTF of A only.
    #[arg(long)]
    pub base_a: Option<PathBuf>,
    /// Base BTF of B only.
    #[arg(long)]
    pub base_b: Option<PathBuf>,
    /// Print a JSON object (schema in README.md) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let shared = load_base(&a.base)?;
    let (base_a, base_b) = match shared {
        Some(s) => (Some(s.clone()), Some(s)),
        None => (load_base(&a.base_a)?, load_base(&a.base_b)?),
    };
    // Each file is read once (it may be a pipe), for its types and its bytes.
    let (in_a, in_b) = (Input::open(&a.a)?, Input::open(&a.b)?);
    let btf_a = btfkit::elf::load_btf_bytes(&a.a, in_a.bytes(), base_a)?;
    let btf_b = btfkit::elf::load_btf_bytes(&a.b, in_b.bytes(), base_b.map(|b: Arc<_>| b))?;
    let report = diff::compare_files(
        &btf_a,
        &btfkit::elf::raw_btf(&a.a, in_a.bytes())?,
        &btf_b,
        &btfkit::elf::raw_btf(&a.b, in_b.bytes())?,
    );
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let r = if a.json {
        let v = report.to_json(&a.a.display().to_string(), &a.b.display().to_string());
        serde_json::to_writer_pretty(&mut out, &v)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out))
    } else {
        write!(out, "{report}")
    };
    match r.and_then(|_| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(e).context("writing to standard output"),
    }
    Ok(match report.verdict {
        Verdict::IdenticalBytes | Verdict::Equivalent => EXIT_OK,
        Verdict::Different => EXIT_NO,
    })
}
