//! `btfkit encode`: btfkit's own flags turned into a [`Plan`] (or a batch),
//! and the reporting both front ends share around the pipeline's run.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;

use btfkit::btf;
use btfkit::encode::{self, LangFilter, Options};
use btfkit::pipeline::{self, Plan};

use super::EXIT_OK;
use super::args::{ReferenceArg, features_arg, jobs_arg, reference_arg};

#[derive(clap::Args)]
pub struct Args {
    /// ELF file(s) with DWARF (default: the sample shipped in data/). Several files, a directory
    /// (every `*.ko` under it), `--out-dir` or `--in-place` select batch mode: one module per thread.
    pub inputs: Vec<PathBuf>,
    /// Batch: write `<module>.btf` for each input into this directory.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Batch: write `.BTF` (and `.BTF.base` with the `distilled_base` feature) into each input.
    #[arg(long, conflicts_with = "out_dir")]
    pub in_place: bool,
    /// Output file (raw BTF); without it, only a summary is printed.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Base BTF (raw or ELF with .BTF): encode split BTF over it.
    #[arg(long, short = 'B')]
    pub base: Option<PathBuf>,
    /// Write the BTF before dedup.
    #[arg(long)]
    pub no_dedup: bool,
    /// Run dedup's first passes while later CUs are still being decoded,
    /// cutting the structs they will not compare again down to stubs
    /// (standalone BTF; the default from -j2 on; figures in docs/perf-history.md).
    #[arg(long, conflicts_with_all = ["no_dedup", "no_early_dedup"])]
    pub early_dedup: bool,
    /// Dedup the whole BTF after the last CU, even from -j2 on.
    #[arg(long)]
    pub no_early_dedup: bool,
    /// Leave out the types of a CU that copy an earlier CU's exactly, before
    /// dedup (same bytes; memory then follows the unique types when the
    /// input repeats its DWARF, but a vmlinux takes a third more CPU:
    /// PERF.md). Default: only where the input repeats its units, and not
    /// in an LTO file (read as one unit, it has no later CU to leave out).
    #[arg(long, conflicts_with_all = ["no_dedup", "no_collapse"])]
    pub collapse: bool,
    /// Never leave out exact copies, even where units repeat.
    #[arg(long)]
    pub no_collapse: bool,
    /// Skip the function phase (no FUNC / FUNC_PROTO for functions).
    #[arg(long)]
    pub no_funcs: bool,
    /// Threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Feature list, as pahole's --btf_features (may be repeated; spaces
    /// around names are ignored). Without it, pahole's bare set: no floats
    /// (FLOAT types come out as INT without an encoding), no kfunc tags,
    /// inconsistent prototypes kept. The kernel build's set (6.12's
    /// scripts/Makefile.btf, and `btfkit kernel`'s default):
    /// encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build
    /// ; `default` is pahole's default set, `+a,b` adds to it; `btfkit
    /// pahole --supported_btf_features` lists them.
    #[arg(long = "btf-features", alias = "btf_features")]
    pub btf_features: Vec<String>,
    /// Which pahole to reproduce: v1.31 (the default) or next (dwarves 1436daf with
    /// libbpf v1.8.0: BTF 2026's 32-byte header; the features layout and
    /// true_signature). Naming layout or true_signature implies next.
    #[arg(long, value_enum)]
    pub reference: Option<ReferenceArg>,
    /// Skip CUs of these languages (pahole names, comma separated).
    #[arg(long = "lang-exclude", alias = "lang_exclude")]
    pub lang_exclude: Option<String>,
    /// Print per-phase wall and CPU time, counts, peak RSS and peak heap (on stderr).
    #[arg(long)]
    pub stats: bool,
    /// With --stats: one JSON object instead of a table.
    #[arg(long, requires = "stats")]
    pub json: bool,
    /// No summary line (errors and warnings are still printed).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Say which functions are left out of BTF and why, one line each on
    /// stdout, as `pahole --verbose` does (`NAME : skipping BTF encoding of
    /// function due to REASON`).
    #[arg(long, short = 'V')]
    pub verbose: bool,
    /// DWARF type units (-fdebug-types-section): `reference` reads them as
    /// pahole v1.31 does (their types are lost: void, empty structs);
    /// `resolve` reads each compile unit with the type units it refers to,
    /// giving the types the same source has without type units (DWARF 5).
    #[arg(long, value_enum, default_value = "reference")]
    pub type_units: TypeUnitsArg,
    /// The supplementary file of a dwz-compressed input (`dwz -m`), instead of looking for
    /// the one its .gnu_debugaltlink or .debug_sup names.
    #[arg(long, value_name = "PATH")]
    pub alt_file: Option<PathBuf>,
    /// Stands in for /usr/lib/debug when looking for a supplementary file (.dwz/, .build-id/):
    /// the usr/lib/debug of an unpacked debug package.
    #[arg(long, value_name = "DIR")]
    pub debug_root: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum TypeUnitsArg {
    Reference,
    Resolve,
}

/// The sample encoded by `btfkit encode` without an input.
/// The demo input of `btfkit encode` run bare: an 11-CU `ld -r` object,
/// built into the binary so that an installed btfkit has it.
pub const SAMPLE: &[u8] = include_bytes!("../../data/multi_types.gcc-O2.ld-r.o");
pub const SAMPLE_NAME: &str = "multi_types.gcc-O2.ld-r.o (the sample built into btfkit)";

/// What the command line reports of a run besides its BTF.
pub struct Report {
    pub print_summary: bool,
    /// `--stats`: None, or Some(json).
    pub stats: Option<bool>,
}

impl Report {
    /// Nothing but the BTF (and `--verbose` lines).
    pub const NONE: Report = Report {
        print_summary: false,
        stats: None,
    };
}

/// Runs `plan` through the pipeline and reports it: `--verbose` lines once
/// encoded, then `--stats` and the summary line.
pub fn execute(mut plan: Plan, report: Report) -> anyhow::Result<i32> {
    let t0 = std::time::Instant::now();
    let phases = Arc::new(std::sync::Mutex::new(btfkit::metrics::Phases::start()));
    if report.stats.is_some() {
        // the pipeline's phases: base, the encoder's (open, the CU loop,
        // functions), dedup, write
        let p = phases.clone();
        plan.opts.on_phase = Some(encode::PhaseHook(Arc::new(move |name| {
            super::stats::mark_shared(&p, name)
        })));
    }
    let pending = pipeline::encode(&plan)?;
    for line in &pending.summary().func_skips {
        out!("{line}");
    }
    let done = pipeline::finish(&plan, pending)?;
    let (s, out_btf) = (&done.summary, &done.btf);
    let len = btf::write::raw_len(out_btf);
    if let Some(json) = report.stats {
        let counts = [
            ("cus", s.cus as u64),
            ("cus_encoded", s.cus_encoded as u64),
            ("dies", s.dies),
            // the rest were passed over by their abbreviations' sizes
            ("dies_read_in_full", s.dies_read),
            ("function_states", s.func_states as u64),
            ("variables", s.vars as u64),
            ("types_before_dedup", done.pre_dedup_types as u64),
            ("types_after_dedup", out_btf.own_type_count() as u64),
            ("btf_bytes", len as u64),
            ("dedup_during_cu_loop", done.overlapped as u64),
            // an LTO file read as one unit: its encoding ran on one thread
            ("merged_units", s.merged_units as u64),
            ("type_unit_refs", s.type_unit_refs),
            // exact copies of earlier CUs' types, never merged (--collapse,
            // or by default where the units repeat)
            ("collapsing", u64::from(s.collapsing)),
            ("types_collapsed", s.types_collapsed),
            // names cached by .debug_str offset (a linked file's merged
            // section; a module's repeats its strings per input)
            ("debug_str_cached", s.debug_str_cached as u64),
        ];
        let phases = phases.lock().unwrap_or_else(|e| e.into_inner());
        super::stats::report(&phases, s.loop_cpu.as_ref(), &counts, json);
    }
    if report.print_summary {
        let summary = format!(
            "{}: {} CUs ({} encoded), {} types before dedup, {} after, {} string bytes, {} variables, {} function states recorded, {} bytes of BTF{} in {:.3}s",
            plan.input.display(),
            s.cus,
            s.cus_encoded,
            done.pre_dedup_types,
            out_btf.own_type_count(),
            out_btf.raw_strings().len(),
            s.vars,
            s.func_states,
            len,
            match &plan.output {
                Some(o) if o.as_os_str() == "-" => " written to standard output".into(),
                Some(o) => format!(" written to {}", o.display()),
                None => " (not written)".into(),
            },
            t0.elapsed().as_secs_f64()
        );
        // With `-o -` standard output carries the BTF: the summary goes to stderr.
        if plan.output.as_deref().is_some_and(|o| o.as_os_str() == "-") {
            eprintln!("{summary}");
        } else {
            out!("{summary}");
        }
    }
    Ok(EXIT_OK)
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if a.stats {
        btfkit::metrics::enable_heap_counting();
    }
    let features = features_arg(a.btf_features.iter().map(String::as_str))?;
    let lang = match &a.lang_exclude {
        Some(l) => LangFilter::Exclude(encode::lang::parse_list(l).map_err(anyhow::Error::msg)?),
        None => LangFilter::All,
    };
    let reference = reference_arg(a.reference, &features)?;
    let opts = Options {
        features,
        reference,
        lang,
        cu_exclude: None,
        jobs: jobs_arg(a.jobs)?,
        no_funcs: a.no_funcs,
        keep_offsets_deferred: false,
        timings: a.stats,
        on_phase: None,
        type_units: match a.type_units {
            TypeUnitsArg::Reference => encode::TypeUnitMode::Reference,
            TypeUnitsArg::Resolve => encode::TypeUnitMode::Resolve,
        },
        verbose: a.verbose,
        global_pool: true,
        collapse: match (a.collapse, a.no_collapse) {
            (true, _) => encode::CollapseMode::Always,
            (false, true) => encode::CollapseMode::Never,
            (false, false) => encode::CollapseMode::WhereUnitsRepeat,
        },
        alt: btfkit::elf::alt::AltLookup {
            file: a.alt_file.clone(),
            debug_root: a.debug_root.clone(),
        },
    };
    let batch = a.inputs.len() > 1 || a.out_dir.is_some() || a.in_place || a.inputs.iter().any(|p| p.is_dir());
    if batch {
        if a.early_dedup {
            bail!("--early-dedup applies to one standalone input; batch mode encodes split BTF");
        }
        if a.no_early_dedup {
            bail!("--no-early-dedup applies to one standalone input; batch mode encodes split BTF");
        }
        if a.output.is_some() {
            bail!("-o names one output; with several inputs, a directory, --out-dir or --in-place use --out-dir DIR");
        }
        return super::batch::run(super::batch::Batch {
            inputs: a.inputs,
            out_dir: a.out_dir,
            in_place: a.in_place,
            base: a.base,
            dedup: !a.no_dedup,
            opts,
            quiet: a.quiet,
            stats: a.stats.then_some(a.json),
        });
    }
    let (input, input_bytes) = match a.inputs.into_iter().next() {
        Some(p) => (p, None),
        // `btfkit encode` alone is the demo; anything more without an input
        // is a mistake (an empty $VMLINUX in a script), not a request for it.
        None if std::env::args_os().len() > 2 => bail!(
            "no input file: give the ELF file to encode (`btfkit encode` with no arguments at all encodes the \
             built-in sample)"
        ),
        None => (PathBuf::from(SAMPLE_NAME), Some(Arc::new(SAMPLE.to_vec()))),
    };
    let plan = Plan {
        input,
        input_bytes,
        output: a.output.clone(),
        in_place: false,
        base: a.base,
        dedup: !a.no_dedup,
        early_dedup: match (a.early_dedup, a.no_early_dedup) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        opts,
    };
    let report = Report {
        print_summary: !a.quiet,
        stats: a.stats.then_some(a.json),
    };
    execute(plan, report)
}
