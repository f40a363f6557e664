//! `btfkit kernel`: a kernel tree (or a list of them, one shard of it) in
//! one command, through [`btfkit::pipeline::kernel`]: flags into options,
//! the report file chosen and its previous lines read for resume, a
//! progress bar on a terminal, the summary line at the end.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use btfkit::encode::{self, LangFilter, Options};
use btfkit::pipeline::kernel::{
    self, Header, ItemTotals, KernelPlan, Line, Outcome, Record, ReportWriter, Totals, read_list, read_report,
    resolve_shard, shard_entries, shard_report_name,
};

use super::encode::{features_arg, jobs_arg};
use super::{EXIT_ERR, EXIT_OK};

/// The features of the kernel's own build (scripts/Makefile.btf) and of
/// the corpus's `kernel` profile.
pub const KERNEL_FEATURES: &str =
    "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";
/// The languages the kernel's build leaves out.
pub const KERNEL_LANG_EXCLUDE: &str = "rust";

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
    pub reference: Option<super::encode::ReferenceArg>,
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
        features_arg([KERNEL_FEATURES])?
    } else {
        features_arg(a.btf_features.iter().map(String::as_str))?
    };
    let lang = a.lang_exclude.as_deref().unwrap_or(KERNEL_LANG_EXCLUDE);
    let lang = encode::lang::parse_list(lang).map_err(anyhow::Error::msg)?;
    let reference = super::encode::reference_arg(a.reference, &features)?;
    Ok(Options {
        features,
        reference,
        lang: if lang.is_empty() {
            LangFilter::All
        } else {
            LangFilter::Exclude(lang)
        },
        cu_exclude: None,
        jobs: jobs_arg(a.jobs)?,
        no_funcs: false,
        keep_offsets_deferred: false,
        timings: false,
        on_phase: None,
        type_units: encode::TypeUnitMode::Reference,
        verbose: false,
        global_pool: true,
        collapse: false,
        alt: btfkit::elf::alt::AltLookup {
            file: a.alt_file.clone(),
            // an unpacked package carries its own .dwz/ and .build-id/
            debug_root: a
                .debug_root
                .clone()
                .or_else(|| a.root.as_ref().map(|r| r.join("usr/lib/debug")).filter(|d| d.is_dir())),
        },
    })
}

/// The progress bar (hidden when stderr is not a terminal).
fn progress_bar() -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {wide_msg}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// An entry to run: its path and its name in a list.
type Entry = (PathBuf, Option<String>);

pub fn run(a: Args) -> anyhow::Result<i32> {
    let t0 = Instant::now();
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
    std::fs::create_dir_all(&a.out_dir).with_context(|| format!("output directory {}", a.out_dir.display()))?;
    let (items, report_path, header): (Vec<Entry>, PathBuf, Option<Header>) = match &a.list {
        Some(list) => {
            let (entries, list_sha256) = read_list(list)?;
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let (k, n) = resolve_shard(a.shard.as_deref(), a.shard_count, &env)?;
            let mine = shard_entries(&entries, k, n);
            let header = Header {
                list: list.to_string_lossy().into_owned(),
                list_sha256,
                shard: [k, n],
                items: mine.iter().map(|e| e.name.clone()).collect(),
            };
            (
                mine.into_iter().map(|e| (e.path, Some(e.name))).collect(),
                a.out_dir.join(shard_report_name(k, n)),
                Some(header),
            )
        }
        None => (
            vec![(a.root.clone().expect("clap requires ROOT without --list"), None)],
            a.out_dir.join("report.jsonl"),
            None,
        ),
    };
    let (previous, bad) = read_report(&report_path)?;
    for n in bad {
        eprintln!(
            "btfkit: warning: {}:{n}: not a report line, ignored",
            report_path.display()
        );
    }
    let mut plan = KernelPlan::new(
        a.out_dir.clone(),
        opts.clone(),
        env!("CARGO_PKG_VERSION").to_string(),
        previous,
    );
    // Every tree opened first (its files listed), so that the new report
    // starts with every line that can be reused as it is. A package in a
    // list is opened when its turn comes (opening one reads it up to its
    // vmlinux); the one root of a run is opened here, so that one that
    // cannot be read fails before the report is rewritten.
    let mut first: Vec<Line> = header.into_iter().map(Line::Header).collect();
    let mut opened = Vec::with_capacity(items.len());
    for (path, name) in items {
        let out_dir = match &name {
            Some(n) => a.out_dir.join(n),
            None => a.out_dir.clone(),
        };
        if name.is_some() && !path.is_dir() {
            opened.push((path, name, out_dir, None));
            continue;
        }
        let item = match kernel::open_item(&path, name.clone()) {
            Ok(mut i) => {
                let done = kernel::settled(&plan, &mut i, &out_dir);
                plan.mark_written(&done);
                first.extend(done.into_iter().map(|r| Line::Record(Box::new(r))));
                Ok(i)
            }
            // one list entry that cannot be opened: its line, and on to the next
            Err(e) if name.is_some() => Err(e),
            Err(e) => return Err(e.into()),
        };
        opened.push((path, name, out_dir, Some(item)));
    }
    let report = ReportWriter::create(&report_path, &first)?;
    let pb = progress_bar();
    // A package's modules are not counted before they are read: its bar
    // grows with each one.
    let streaming = std::sync::atomic::AtomicBool::new(false);
    let on_record = |r: &Record| {
        if streaming.load(std::sync::atomic::Ordering::Relaxed) && r.kind == kernel::InputKind::Module {
            pb.inc_length(1);
        }
        pb.inc(1);
        pb.set_message(r.input.clone());
        if let (Outcome::Failed, Some(e)) = (r.outcome, &r.error) {
            let name = match &r.item {
                Some(i) => format!("{i}: {}", r.input),
                None => r.input.clone(),
            };
            pb.suspend(|| {
                if e.contains(&r.input) && !r.input.is_empty() {
                    eprintln!("btfkit: error: {e}");
                } else {
                    eprintln!("btfkit: error: {name}: {e}");
                }
            });
        }
    };
    let mut totals = ItemTotals::default();
    for (path, name, out_dir, item) in opened {
        let item = match item.unwrap_or_else(|| kernel::open_item(&path, name.clone())) {
            Ok(i) => i,
            Err(e) => {
                // the whole chain: an I/O error's reason is its source
                let r = unopened(&plan, name, &path, &super::one_line(&anyhow::Error::new(e)));
                report.append(&Line::Record(Box::new(r.clone())))?;
                pb.inc_length(1);
                on_record(&r);
                totals.failed += 1;
                continue;
            }
        };
        pb.inc_length(1 + item.module_count.unwrap_or(0) as u64);
        streaming.store(item.module_count.is_none(), std::sync::atomic::Ordering::Relaxed);
        let t = kernel::run_item(&plan, item, &out_dir, &report, &on_record)?;
        totals.ok += t.ok;
        totals.reused += t.reused;
        totals.failed += t.failed;
    }
    pb.finish_and_clear();
    let (cpu, rss) = kernel::process_cpu_and_peak_rss();
    let summary = Totals {
        inputs: totals.ok + totals.reused + totals.failed,
        ok: totals.ok,
        reused: totals.reused,
        failed: totals.failed,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: cpu.as_secs_f64(),
        peak_rss_bytes: rss,
    };
    report.append(&Line::Summary {
        summary: summary.clone(),
    })?;
    if !a.quiet {
        out!(
            "{} inputs: {} encoded, {} reused, {} failed; {:.3} s wall, {:.3} s CPU, peak RSS {:.1} MiB; report {}",
            summary.inputs,
            summary.ok,
            summary.reused,
            summary.failed,
            summary.wall_s,
            summary.cpu_s,
            rss as f64 / (1 << 20) as f64,
            report_path.display()
        );
    }
    Ok(if totals.failed > 0 { EXIT_ERR } else { EXIT_OK })
}

/// The line of a list entry that could not be opened (no vmlinux, a package).
fn unopened(plan: &KernelPlan, name: Option<String>, path: &Path, error: &str) -> Record {
    Record {
        item: name,
        input: path.to_string_lossy().into_owned(),
        kind: kernel::InputKind::Vmlinux,
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
        flags: kernel::flags_string(&plan.opts),
        base_sha256: None,
    }
}
