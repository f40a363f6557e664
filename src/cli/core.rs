//! `btfkit core check`: will these CO-RE objects load on these kernels?

use std::path::PathBuf;

use anyhow::Context as _;

use btfkit::core::matrix::{self, Run};
use btfkit::core::shards;
use btfkit::core::{BpfObject, kernels};
use btfkit::core::{min, min_archive};

use super::{EXIT_ERR, EXIT_NO, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Sub,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Resolve every CO-RE relocation of BPF objects against kernels' BTF, with libbpf's rules;
    /// exit 0 if every program loads everywhere, 1 if one does not, 2 on an error.
    Check(CheckArgs),
    /// Minimal BTF for CO-RE objects (bpftool's `gen min_core_btf`, with module BTF): one
    /// kernel (`--btf`, `-o`) or every kernel of an archive (`--archive`, `--out-dir`).
    Min(MinArgs),
}

#[derive(clap::Args)]
pub struct MinArgs {
    /// BPF objects whose relocations say what to keep.
    #[arg(required = true)]
    pub objects: Vec<PathBuf>,
    /// One kernel: a BTF file (raw, or an ELF's .BTF), a kernel directory (vmlinux.btf +
    /// modules/, or /sys/kernel/btf: module types are kept too) or a BTFHub `.btf.tar.xz`.
    #[arg(long, value_name = "KERNEL", conflicts_with = "archive", requires = "output")]
    pub btf: Option<PathBuf>,
    /// Where the one kernel's minimal BTF goes.
    #[arg(long, short = 'o', requires = "btf")]
    pub output: Option<PathBuf>,
    /// Every kernel of an archive: a directory of kernel directories and BTFHub `.btf.tar.xz`
    /// files, or a list file (`.txt`, `.list`, a `btfkit kernel` `.jsonl` report).
    #[arg(long, value_name = "DIR|LIST", requires = "out_dir")]
    pub archive: Option<PathBuf>,
    /// The archive's minimal BTFs, in its layout (BTFHub's for a BTFHub tree), and the report.
    #[arg(long, value_name = "DIR", requires = "archive")]
    pub out_dir: Option<PathBuf>,
    /// Also write every kernel's minimal BTF into one tar.xz, identical ones stored once.
    #[arg(long, value_name = "FILE", requires = "archive")]
    pub bundle: Option<PathBuf>,
    /// Kernels done at once (default: all cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Only shard K of N of the archive's kernels (`K/N`, K from 0); without it, Slurm's
    /// array or a Kubernetes Indexed Job's index choose, as for `btfkit kernel`.
    #[arg(long, requires = "archive")]
    pub shard: Option<String>,
    /// With a Kubernetes Indexed Job: the number of shards.
    #[arg(long, requires = "archive")]
    pub shard_count: Option<usize>,
    /// No progress bar and no summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// BPF objects (`*.bpf.o`, as clang or `bpftool gen object` write them).
    #[arg(required = true)]
    pub objects: Vec<PathBuf>,
    /// A kernel, or many: a BTF file (raw, or an ELF's .BTF such as a vmlinux), a `btfkit kernel`
    /// directory (vmlinux.btf + modules/), /sys/kernel/btf, an archive directory of kernel
    /// directories or BTFHub `.btf.tar.xz` files, or a list file (`.txt`, `.list`, or a
    /// `btfkit kernel` `.jsonl` report). Repeatable.
    #[arg(long = "target", short = 't', required = true)]
    pub targets: Vec<PathBuf>,
    /// Print every relocation of every program: its path, target and value.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Print JSON (one document: kernels, objects, programs, relocations with --verbose).
    #[arg(long)]
    pub json: bool,
    /// Print the lines libbpf 1.1 would log while relocating (one object, one kernel).
    #[arg(long)]
    pub libbpf_log: bool,
    /// Kernels checked at once (default: all cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Check only shard K of N of the kernels (`K/N`, K from 0); without it, Slurm's array or a
    /// Kubernetes Indexed Job's index choose, as for `btfkit kernel`.
    #[arg(long)]
    pub shard: Option<String>,
    /// With a Kubernetes Indexed Job: the number of shards.
    #[arg(long)]
    pub shard_count: Option<usize>,
    /// Also write this run's JSON report (every relocation) to DIR/core-check-K-of-N.json,
    /// for `btfkit report DIR` to merge the shards.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    match a.cmd {
        Sub::Check(c) => check(c),
        Sub::Min(m) => min(m),
    }
}

fn min(a: MinArgs) -> anyhow::Result<i32> {
    let objects = a
        .objects
        .iter()
        .map(|p| BpfObject::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    if let (Some(kernel), Some(output)) = (&a.btf, &a.output) {
        let sources = kernels::sources(kernel)?;
        anyhow::ensure!(
            sources.len() == 1,
            "{}: --btf takes one kernel, this is an archive of {} (use --archive)",
            kernel.display(),
            sources.len()
        );
        let target = kernels::load(&sources[0])?;
        let (marks, min) = btfkit::core::min::minimize(&target, &objects)?;
        let bytes = btfkit::btf::write::to_bytes(&min.btf);
        btfkit::output::write_atomic(output, &bytes)?;
        if !a.quiet {
            eprintln!("{}", min::summary(&marks, &min, bytes.len()));
        }
        return Ok(EXIT_OK);
    }
    let (Some(archive), Some(out_dir)) = (&a.archive, &a.out_dir) else {
        anyhow::bail!("give one kernel (--btf KERNEL -o OUTPUT) or an archive (--archive DIR|LIST --out-dir DIR)");
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (k, n) = btfkit::pipeline::kernel::resolve_shard(a.shard.as_deref(), a.shard_count, &env)?;
    let run = min_archive::Run {
        archive: archive.clone(),
        out_dir: out_dir.clone(),
        bundle: a.bundle.clone(),
        shard: (k, n),
        jobs: a.jobs,
        progress: !a.quiet,
    };
    let done = min_archive::run(&objects, &run)?;
    for f in &done.failed {
        eprintln!("btfkit: error: {f}");
    }
    if !a.quiet {
        eprintln!("{}", done.summary());
    }
    Ok(if done.failed.is_empty() { EXIT_OK } else { EXIT_ERR })
}

fn check(a: CheckArgs) -> anyhow::Result<i32> {
    let objects = a
        .objects
        .iter()
        .map(|p| BpfObject::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sources = Vec::new();
    for t in &a.targets {
        sources.extend(kernels::sources(t)?);
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (k, n) = btfkit::pipeline::kernel::resolve_shard(a.shard.as_deref(), a.shard_count, &env)?;
    let targets: Vec<String> = sources.iter().map(|s| s.name()).collect();
    sources = matrix::shard(sources, k, n);
    if a.libbpf_log {
        anyhow::ensure!(
            objects.len() == 1 && sources.len() == 1,
            "--libbpf-log takes one object and one kernel ({} objects, {} kernels given)",
            objects.len(),
            sources.len()
        );
        let target = kernels::load(&sources[0])?;
        let mut log = btfkit::core::Log::on();
        let v = btfkit::core::check(&objects[0], &target, &mut log);
        for l in log.into_lines() {
            out!("{l}");
        }
        return Ok(exit_code(v.verdict));
    }
    let progress = !a.quiet && !a.json && sources.len() > 1;
    let run = Run {
        verbose: a.verbose || a.json || a.out_dir.is_some(),
        jobs: a.jobs,
    };
    let mut result = matrix::check_all(&objects, &sources, &run, progress);
    result.shard = Some(matrix::Shard {
        index: k,
        count: n,
        targets,
    });
    if let Some(dir) = &a.out_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        let json = serde_json::to_string_pretty(&result.to_json(true))?;
        btfkit::output::write_atomic(&dir.join(shards::file_name(k, n)), json.as_bytes())?;
    }
    if a.json {
        let v = result.to_json(true);
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut text = String::new();
        result.render(&mut text, a.verbose);
        super::print_text(&text)?;
    }
    // A kernel that could not be read is an error of the run (the others
    // were still checked): said on stderr, and exit 2.
    for k in &result.kernels {
        if let Some(e) = &k.load_error {
            eprintln!("btfkit: error: {e}");
        }
    }
    Ok(if result.kernel_errors() > 0 {
        EXIT_ERR
    } else {
        exit_code(result.worst())
    })
}

fn exit_code(v: btfkit::core::Verdict) -> i32 {
    match v {
        btfkit::core::Verdict::Ok => EXIT_OK,
        btfkit::core::Verdict::Poisoned | btfkit::core::Verdict::Error => EXIT_NO,
    }
}
