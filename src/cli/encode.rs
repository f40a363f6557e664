//! `btfkit encode`: DWARF → BTF with btfkit's own flags, and the driver the
//! pahole-compatible front end shares.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};

use btfkit::btf::{self, Btf};
use btfkit::dedup;
use btfkit::encode::{self, Features, LangFilter, Options};

use super::EXIT_OK;

#[derive(clap::Args)]
pub struct Args {
    /// ELF file(s) with DWARF (default: the sample shipped in data/). Several files, a directory
    /// (every `*.ko` under it), `--out-dir` or `--in-place` select batch mode: one module per thread.
    pub inputs: Vec<PathBuf>,
    /// Batch: write `<module>.btf` for each input into this directory.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Batch: write `.BTF` (and `.BTF.base` with the `distilled_base` feature) into each input.
    #[arg(long)]
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
    /// Skip the function phase (no FUNC / FUNC_PROTO for functions).
    #[arg(long)]
    pub no_funcs: bool,
    /// Threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Feature list, as pahole's --btf_features (may be repeated). Without
    /// it, pahole's bare set: no floats (FLOAT types come out as INT without
    /// an encoding), no kfunc tags, inconsistent prototypes kept. The kernel
    /// build's set: encode_force,var,float,enum64,decl_tag,type_tag,
    /// optimized_func,consistent_func,decl_tag_kfuncs (its
    /// scripts/Makefile.btf); `default` is pahole's default set, `+a,b`
    /// adds to it; `btfkit pahole --supported_btf_features` lists them.
    #[arg(long = "btf-features", alias = "btf_features")]
    pub btf_features: Vec<String>,
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

pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// One encoding job, as both front ends describe it.
pub struct Plan {
    pub input: PathBuf,
    /// The input's bytes when they are not in a file (the built-in sample).
    pub input_bytes: Option<&'static [u8]>,
    pub output: Option<PathBuf>,
    /// Write `.BTF` (and, with `distilled_base` over a base, `.BTF.base`)
    /// into the input file itself, as `pahole -J` without a detached file.
    pub in_place: bool,
    pub base: Option<PathBuf>,
    pub dedup: bool,
    /// Overlap dedup's first passes with decoding (see [`encode_overlapped`]);
    /// `None`: from two threads on.
    pub early_dedup: Option<bool>,
    pub opts: Options,
    pub print_summary: bool,
    /// `--stats`: None, or Some(json).
    pub stats: Option<bool>,
}

/// Encodes `input` (split over `base` if given) and dedups it unless told not to
/// (with `base_index`, dedup's state for that base, if the caller built it).
/// Returns the final BTF, the encoder's summary and the pre-dedup type count.
pub fn encode_btf(
    input: &Path,
    base: Option<Arc<Btf>>,
    base_index: Option<&Arc<dedup::BaseIndex>>,
    opts: &Options,
    dedup: bool,
) -> anyhow::Result<(Btf, encode::Summary, u32)> {
    let (enc, _) = encode_overlapped(input, None, base, opts, dedup, false)?;
    warn_type_units(input, &enc.summary);
    let pre_dedup_types = enc.btf.own_type_count();
    // The encoder's string section is kept as built (pahole's libbpf dedups
    // BTF it built itself, whose strings are already unique).
    let out_btf = if dedup {
        dedup_keep(input, enc.btf, base_index, None)?
    } else {
        enc.btf
    };
    Ok((out_btf, enc.summary, pre_dedup_types))
}

/// Says on stderr that types in DWARF type units were lost, as the
/// reference loses them (its own warnings name some of them, only in
/// linked files); the bytes are still the reference's.
fn warn_type_units(input: &Path, s: &encode::Summary) {
    if s.type_unit_refs > 0 {
        eprintln!(
            "btfkit: warning: {}: {} references to types in DWARF type units (-fdebug-types-section: \
             DW_FORM_ref_sig8, DW_AT_signature) left unresolved, as pahole v1.31 leaves them: those types \
             are void or empty anonymous structs in this BTF",
            input.display(),
            s.type_unit_refs
        );
    }
}

/// Dedup as the reference pipeline does it: the string section stays as the
/// encoder built it. The pre-dedup BTF is consumed, so its memory goes as
/// soon as dedup no longer needs it.
fn dedup_keep(
    input: &Path,
    btf: Btf,
    base_index: Option<&Arc<dedup::BaseIndex>>,
    early: Option<dedup::Incremental>,
) -> anyhow::Result<Btf> {
    let o = dedup::Options {
        strings: dedup::StringMode::Keep,
        ids_checked: false,
        timings: false,
        base_index: base_index.cloned(),
    };
    match early {
        Some(inc) => inc.finish(btf, &o),
        None => dedup::dedup_owned(btf, &o),
    }
    .with_context(|| format!("{}: dedup failed", input.display()))
}

/// Encodes `input`; with `early`, for a standalone BTF that will be
/// deduplicated, dedup's first passes run on the merge thread as chunks of
/// CUs are merged ([`dedup::Incremental`]), overlapping the decoding of
/// later ones instead of running alone after the last, and the structs
/// they map onto earlier copies (and no canonical type reaches) are cut
/// down to stubs as they go: on a vmlinux the heap peaks at 150-154 MiB
/// instead of 196. If the passes have to stop after stubbing (a case the
/// corpus never reaches), the input is encoded again for the whole-BTF
/// dedup.
fn encode_overlapped(
    input: &Path,
    input_bytes: Option<&[u8]>,
    base: Option<Arc<Btf>>,
    opts: &encode::Options,
    dedup: bool,
    early: bool,
) -> anyhow::Result<(encode::Encoded, Option<dedup::Incremental>)> {
    let encode_with =
        |base: Option<Arc<Btf>>, opts: &encode::Options, on_merged: &mut encode::OnMerged<'_>| match input_bytes {
            Some(data) => encode::encode_bytes_with(input, data, base, opts, on_merged),
            None => encode::encode_file_with(input, base, opts, on_merged),
        };
    // A standalone BTF's records go to dedup without an offset column: it
    // lays them out itself.
    let standalone = dedup && base.is_none();
    let opts = encode::Options {
        keep_offsets_deferred: standalone,
        ..opts.clone()
    };
    if !early || !standalone {
        return Ok((encode_with(base, &opts, &mut |_| {})?, None));
    }
    let mut inc = dedup::Incremental::new();
    let mut enc = encode_with(base.clone(), &opts, &mut |b| inc.feed(b))?;
    // the function phase's types
    inc.feed(&mut enc.btf);
    if let (Some(why), true) = (inc.gave_up(), inc.stubbed()) {
        // The whole-BTF dedup needs every record, and the chunked passes
        // cut some down before they had to stop (never on the corpus).
        eprintln!(
            "btfkit: {}: dedup during the CU loop stopped ({why}) after compacting records; encoding again for the whole-BTF dedup",
            input.display()
        );
        drop((inc, enc));
        return Ok((encode_with(base, &opts, &mut |_| {})?, None));
    }
    Ok((enc, Some(inc)))
}

/// Sizes rayon's global pool, where dedup's parallel steps run, to `-j`
/// (the encoder builds its own pool of that size): `-j1` means one thread
/// for the whole run.
pub fn size_global_pool(jobs: usize) {
    // Err only if the pool exists already (a second job in this process),
    // which was sized by the first call.
    let threads = encode::effective_jobs(jobs, usize::MAX);
    let _ = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global();
}

pub fn execute(plan: Plan) -> anyhow::Result<i32> {
    size_global_pool(plan.opts.jobs);
    let base: Option<Arc<Btf>> = match &plan.base {
        Some(p) => Some(Arc::new(
            btfkit::elf::load_btf(p, None).with_context(|| format!("base BTF {}", p.display()))?,
        )),
        None => None,
    };
    let t0 = std::time::Instant::now();
    let phases = Arc::new(std::sync::Mutex::new(super::stats::Phases::start()));
    let mark = |name: &'static str| super::stats::mark_shared(&phases, name);
    if plan.base.is_some() {
        mark("base");
    }
    let early = plan.early_dedup.unwrap_or(plan.opts.jobs >= 2);
    let mut opts = plan.opts.clone();
    if plan.stats.is_some() {
        // the encoder's own phases: open, the CU loop, functions
        let p = phases.clone();
        opts.on_phase = Some(encode::PhaseHook(Arc::new(move |name| {
            super::stats::mark_shared(&p, name)
        })));
    }
    let (enc, early) = encode_overlapped(&plan.input, plan.input_bytes, base, &opts, plan.dedup, early)?;
    warn_type_units(&plan.input, &enc.summary);
    for line in &enc.summary.func_skips {
        out!("{line}");
    }
    let pre_dedup_types = enc.btf.own_type_count();
    let s = enc.summary;
    // whether dedup's first passes ran during the CU loop to the end
    let overlapped = early.as_ref().is_some_and(|i| i.gave_up().is_none());
    let out_btf = if plan.dedup {
        dedup_keep(&plan.input, enc.btf, None, early)?
    } else {
        enc.btf
    };
    if plan.dedup {
        mark("dedup");
    }
    let len = btf::write::raw_len(&out_btf);
    if let Some(out) = &plan.output {
        btfkit::output::write_output(out, |w| btf::write::write_to(&out_btf, w))?;
    }
    if plan.in_place {
        write_in_place(&plan.input, &out_btf, plan.opts.features.distilled_base)?;
    }
    if plan.output.is_some() || plan.in_place {
        mark("write");
    }
    if let Some(json) = plan.stats {
        let counts = [
            ("cus", s.cus as u64),
            ("cus_encoded", s.cus_encoded as u64),
            ("dies", s.dies),
            ("function_states", s.func_states as u64),
            ("variables", s.vars as u64),
            ("types_before_dedup", pre_dedup_types as u64),
            ("types_after_dedup", out_btf.own_type_count() as u64),
            ("btf_bytes", len as u64),
            ("dedup_during_cu_loop", overlapped as u64),
            // an LTO file read as one unit: its encoding ran on one thread
            ("merged_units", s.merged_units as u64),
            ("type_unit_refs", s.type_unit_refs),
        ];
        let phases = phases.lock().unwrap_or_else(|e| e.into_inner());
        super::stats::report(&phases, s.loop_cpu.as_ref(), &counts, json);
    }
    if plan.print_summary {
        let summary = format!(
            "{}: {} CUs ({} encoded), {} types before dedup, {} after, {} string bytes, {} variables, {} function states recorded, {} bytes of BTF{} in {:.3}s",
            plan.input.display(),
            s.cus,
            s.cus_encoded,
            pre_dedup_types,
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

/// Replaces or adds the BTF sections of `input` (a new file renamed over it).
/// Split BTF under `distilled_base` is distilled first: `.BTF` holds the new
/// split part, `.BTF.base` the distilled base.
pub fn write_in_place(input: &Path, out: &Btf, distilled_base: bool) -> anyhow::Result<()> {
    let (btf_sec, base_sec) = if distilled_base && out.base().is_some() {
        let (base, split) =
            btf::distill::distill(out).with_context(|| format!("{}: distilling the base BTF", input.display()))?;
        (btf::write::to_bytes(&split), Some(btf::write::to_bytes(&base)))
    } else {
        (btf::write::to_bytes(out), None)
    };
    let data = std::fs::read(input).with_context(|| format!("{}", input.display()))?;
    let mut secs: Vec<(&str, &[u8])> = vec![(".BTF", &btf_sec)];
    if let Some(b) = &base_sec {
        secs.push((".BTF.base", b));
    }
    let new = btfkit::elf::write::set_sections(&data, &secs).with_context(|| format!("{}", input.display()))?;
    // A new file with the input's mode (an executable vmlinux stays one)
    // renamed over it: a kill at any moment leaves the old or the new file.
    btfkit::output::replace_atomic(input, &new)?;
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if a.stats {
        super::stats::enable_heap_counting();
    }
    let mut features = Features::default();
    for f in &a.btf_features {
        let unknown = features.apply_list(f);
        if !unknown.is_empty() {
            bail!(
                "unknown BTF feature(s): {} (known: default, {})",
                unknown.join(", "),
                encode::features::FEATURE_NAMES.join(", ")
            );
        }
    }
    let lang = match &a.lang_exclude {
        Some(l) => LangFilter::Exclude(encode::lang::parse_list(l).map_err(anyhow::Error::msg)?),
        None => LangFilter::All,
    };
    let opts = Options {
        features,
        lang,
        cu_exclude: None,
        jobs: match a.jobs {
            Some(0) => bail!("bad thread count 0 for -j (give 1 or more)"),
            Some(n) => n,
            None => default_jobs(),
        },
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
        None => (PathBuf::from(SAMPLE_NAME), Some(SAMPLE)),
    };
    execute(Plan {
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
        print_summary: !a.quiet,
        stats: a.stats.then_some(a.json),
    })
}
