//! `btfkit kernel`: a kernel tree (or a list of them, one shard of it) in
//! one command, run by [`btfkit::pipeline::kernel::run`]: flags into a
//! [`KernelRun`], a progress bar on a terminal, the summary line at the end.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::bail;

use btfkit::encode::{self, LangFilter, Options};
use btfkit::pipeline::kernel::{self, KernelRun, Outcome, Progress, Record, Target, resolve_shard};

use super::args::{ReferenceArg, features_arg, jobs_arg, reference_arg};
use super::{EXIT_ERR, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    /// The kernel: a debug package (.deb, .ddeb, .rpm; read as a stream, not unpacked), an
    /// unpacked one (usr/lib/debug/boot/vmlinux-*, modules under usr/lib/debug/lib/modules/<ver>/)
    /// or a build directory (vmlinux at the top, *.ko below).
    #[arg(required_unless_present = "list", conflicts_with = "list")]
    pub root: Option<PathBuf>,
    /// Where the BTF goes: vmlinux.btf, modules/<path>.btf and report.jsonl (with --list,
    /// <entry name>/... for each entry and report-<K>-of-<N>.jsonl).
    #[arg(long)]
    pub out_dir: PathBuf,
    /// Threads for the vmlinux, and modules encoded at once (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Feature list as pahole's --btf_features (may be repeated; spaces around names are
    /// ignored); default: the kernel build's set (6.12's scripts/Makefile.btf):
    /// encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build
    /// ; the set is not chosen by the kernel's version: later kernels built with pahole 1.30
    /// or newer also ask for `attributes`, kernels before --btf_features for other flags.
    #[arg(long = "btf-features", alias = "btf_features")]
    pub btf_features: Vec<String>,
    /// Which pahole to reproduce: v1.31 (the default) or next (see `btfkit encode --help`).
    #[arg(long, value_enum)]
    pub reference: Option<ReferenceArg>,
    /// Skip CUs of these languages (pahole names, comma separated; default: rust, as the
    /// kernel's build; an empty value keeps every language).
    #[arg(long = "lang-exclude", alias = "lang_exclude")]
    pub lang_exclude: Option<String>,
    /// A file naming trees or packages, one a line (relative to the list's directory;
    /// blank lines and # comments ignored).
    #[arg(long)]
    pub list: Option<PathBuf>,
    /// With --list: take entries i with i % N == K. Default: from SLURM_ARRAY_TASK_ID
    /// (minus SLURM_ARRAY_TASK_MIN) over SLURM_ARRAY_TASK_COUNT, else JOB_COMPLETION_INDEX
    /// over --shard-count or BTFKIT_SHARD_COUNT, else the whole list.
    #[arg(long, requires = "list", value_name = "K/N")]
    pub shard: Option<String>,
    /// With --list under a Kubernetes Indexed Job: the number of shards (completions).
    #[arg(long, requires = "list", value_name = "N")]
    pub shard_count: Option<usize>,
    /// Threads decompressing a package's xz payload, for one written in blocks (as
    /// dpkg-deb and rpmbuild write them). Each thread holds a block in flight: two take
    /// Debian's kernel debug package from 60 to 45 s at 2 cores, and its peak memory from
    /// 1.0 to 1.2 times the unpacked tree's (PERF.md).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub xz_threads: usize,
    /// No summary line.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The supplementary file of dwz-compressed inputs (`dwz -m`), instead of looking for
    /// the one each file names.
    #[arg(long, value_name = "PATH")]
    pub alt_file: Option<PathBuf>,
    /// Stands in for /usr/lib/debug when looking for a supplementary file (.dwz/, .build-id/);
    /// default for an unpacked package: its own usr/lib/debug.
    #[arg(long, value_name = "DIR")]
    pub debug_root: Option<PathBuf>,
}

fn options(a: &Args) -> anyhow::Result<Options> {
    let features = if a.btf_features.is_empty() {
        features_arg([encode::features::KERNEL_BUILD_FEATURES])?
    } else {
        features_arg(a.btf_features.iter().map(String::as_str))?
    };
    let lang = a
        .lang_exclude
        .as_deref()
        .unwrap_or(encode::features::KERNEL_LANG_EXCLUDE);
    let lang = encode::lang::parse_list(lang).map_err(anyhow::Error::msg)?;
    let reference = reference_arg(a.reference, &features)?;
    Ok(Options {
        features,
        reference,
        lang: if lang.is_empty() {
            LangFilter::All
        } else {
            LangFilter::Exclude(lang)
        },
        jobs: jobs_arg(a.jobs)?,
        global_pool: true,
        alt: btfkit::elf::alt::AltLookup {
            file: a.alt_file.clone(),
            // an unpacked package carries its own .dwz/ and .build-id/
            debug_root: a
                .debug_root
                .clone()
                .or_else(|| a.root.as_ref().map(|r| r.join("usr/lib/debug")).filter(|d| d.is_dir())),
        },
        ..Options::kernel_build()
    })
}

/// The progress bar (hidden when stderr is not a terminal), and the one
/// line of each input that failed.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new() -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let pb = indicatif::ProgressBar::new(0);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {wide_msg}")
        {
            pb.set_style(style.progress_chars("=> "));
        }
        Bar(pb)
    }
}

impl Progress for Bar {
    fn bad_report_line(&self, report: &Path, line: usize) {
        eprintln!(
            "btfkit: warning: {}:{line}: not a report line, ignored",
            report.display()
        );
    }
    fn expect(&self, n: u64) {
        self.0.inc_length(n);
    }
    fn record(&self, r: &Record) {
        self.0.inc(1);
        self.0.set_message(r.input.clone());
        if let (Outcome::Failed, Some(e)) = (r.outcome, &r.error) {
            self.0.suspend(|| {
                if e.contains(&r.input) && !r.input.is_empty() {
                    eprintln!("btfkit: error: {e}");
                } else {
                    match &r.item {
                        Some(i) => eprintln!("btfkit: error: {i}: {}: {e}", r.input),
                        None => eprintln!("btfkit: error: {}: {e}", r.input),
                    }
                }
            });
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    // clap leaves `requires = "list"` unchecked when ROOT, which conflicts
    // with --list, is given: a tree with --shard would be encoded whole.
    if a.list.is_none() {
        for (flag, given) in [
            ("--shard", a.shard.is_some()),
            ("--shard-count", a.shard_count.is_some()),
        ] {
            if given {
                bail!("{flag} divides a --list of kernels among tasks; one kernel (ROOT) is not divided: drop {flag}");
            }
        }
    }
    let opts = options(&a)?;
    btfkit::pipeline::size_global_pool(opts.jobs);
    let target = match (&a.list, &a.root) {
        (Some(list), _) => {
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let (index, count) = resolve_shard(a.shard.as_deref(), a.shard_count, &env)?;
            Target::List {
                list: list.clone(),
                index,
                count,
            }
        }
        (None, Some(root)) => Target::One(root.clone()),
        (None, None) => bail!("a kernel (ROOT) or --list is needed"),
    };
    let run = KernelRun {
        target,
        out_dir: a.out_dir.clone(),
        opts,
        version: env!("CARGO_PKG_VERSION").to_string(),
        reading: kernel::Reading {
            spill_over: kernel::SPILL_OVER,
            threads: a.xz_threads,
        },
    };
    let bar = Bar::new();
    let done = kernel::run(&run, &bar)?;
    bar.0.finish_and_clear();
    let s = &done.summary;
    if !a.quiet {
        out!(
            "{} inputs: {} encoded, {} reused, {} failed; {:.3} s wall, {:.3} s CPU, peak RSS {:.1} MiB; report {}",
            s.inputs,
            s.ok,
            s.reused,
            s.failed,
            s.wall_s,
            s.cpu_s,
            s.peak_rss_bytes as f64 / (1 << 20) as f64,
            done.report.display()
        );
    }
    Ok(if s.failed > 0 { EXIT_ERR } else { EXIT_OK })
}
