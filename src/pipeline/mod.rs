//! The encoding pipeline, as the command line runs it: load the base, encode
//! (overlapping dedup's first passes with the CU loop from two threads on),
//! dedup, write. A [`Plan`] says what to do; [`execute`] does it, or
//! [`encode`] then [`finish`] for a caller that reads the encoder's summary
//! before dedup (the CLI prints `--verbose` lines there). [`batch`] runs
//! many modules over one shared base.
//!
//! Knows nothing of flags: front ends build the plan.

pub mod batch;
pub mod kernel;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use crate::btf::distill::DistillError;
use crate::btf::{self, Btf};
use crate::dedup::{self, DedupError};
use crate::elf::write::ElfWriteError;
use crate::encode::{self, CollapseMode, EncodeError, Options, Summary};

/// Why a pipeline run failed. Each variant names the file it concerns; its
/// source (if any) says what went wrong there.
#[derive(Debug, Error)]
pub enum Error {
    /// The base BTF could not be loaded.
    #[error("base BTF {path}")]
    Base { path: PathBuf, source: crate::Error },
    /// Dedup's view of the base could not be built.
    #[error("base BTF {path}")]
    BaseIndex { path: PathBuf, source: DedupError },
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("{input}: dedup failed")]
    Dedup { input: PathBuf, source: DedupError },
    #[error("{input}: distilling the base BTF")]
    Distill { input: PathBuf, source: DistillError },
    /// The input could not be read again to write its BTF into it.
    #[error("{input}")]
    Reread { input: PathBuf, source: std::io::Error },
    /// The input's BTF sections could not be replaced.
    #[error("{input}")]
    ElfWrite { input: PathBuf, source: ElfWriteError },
    /// The BTF cannot be written into the input as asked.
    #[error("{input}: {msg}")]
    InPlace { input: PathBuf, msg: String },
    /// An output could not be written.
    #[error(transparent)]
    Output(crate::Error),
}

/// One encoding job: the input, its base, what dedup does and where the BTF goes.
#[derive(Clone, Debug)]
pub struct Plan {
    pub input: PathBuf,
    /// The input's bytes when they are not in a file (`input` then only
    /// names it in messages): the built-in sample, a package's member.
    pub input_bytes: Option<Arc<Vec<u8>>>,
    /// Write raw BTF here (`-` for standard output; see [`crate::output::write_output`]).
    pub output: Option<PathBuf>,
    /// Write `.BTF` (and, with `distilled_base` over a base, `.BTF.base`)
    /// into the input file itself, as `pahole -J` without a detached file.
    pub in_place: bool,
    /// Encode split BTF over this base (raw BTF or an ELF with `.BTF`).
    pub base: Option<PathBuf>,
    pub dedup: bool,
    /// Overlap dedup's first passes with decoding (see [`encode_overlapped`]);
    /// `None`: from two threads on.
    pub early_dedup: Option<bool>,
    /// The encoder's options; `on_phase` also hears `"base"`, `"dedup"` and
    /// `"write"` as those steps end.
    pub opts: Options,
}

impl Plan {
    /// Encode `input` with `opts` and dedup it, writing nothing.
    pub fn new(input: impl Into<PathBuf>, opts: Options) -> Plan {
        Plan {
            input: input.into(),
            input_bytes: None,
            output: None,
            in_place: false,
            base: None,
            dedup: true,
            early_dedup: None,
            opts,
        }
    }
}

/// What a run produced.
pub struct Outcome {
    /// The final BTF (deduplicated unless the plan said not to).
    pub btf: Btf,
    pub summary: Summary,
    /// The input's own types before dedup.
    pub pre_dedup_types: u32,
    /// Whether dedup's first passes ran during the CU loop to its end.
    pub overlapped: bool,
}

/// An input encoded; its dedup and writes are still to run ([`finish`]).
pub struct Pending {
    enc: encode::Encoded,
    early: Option<dedup::Incremental>,
}

impl Pending {
    pub fn summary(&self) -> &Summary {
        &self.enc.summary
    }
}

/// Runs the whole plan.
pub fn execute(plan: &Plan) -> Result<Outcome, Error> {
    let pending = encode(plan)?;
    finish(plan, pending)
}

/// The plan's first half: the base loaded, the input encoded (with dedup's
/// first passes, if they overlap).
pub fn encode(plan: &Plan) -> Result<Pending, Error> {
    size_global_pool(plan.opts.jobs);
    if plan.in_place && plan.input_bytes.is_none() && !std::fs::metadata(&plan.input).is_ok_and(|m| m.is_file()) {
        return Err(Error::InPlace {
            input: plan.input.clone(),
            msg: "is not a regular file, so its .BTF cannot be written into it: give a detached output".into(),
        });
    }
    let base: Option<Arc<Btf>> = match &plan.base {
        Some(p) => Some(Arc::new(crate::elf::load_btf(p, None).map_err(|source| {
            Error::Base {
                path: p.clone(),
                source,
            }
        })?)),
        None => None,
    };
    if plan.base.is_some() {
        phase_ended(&plan.opts, "base");
    }
    let early = plan.early_dedup.unwrap_or(plan.opts.jobs >= 2);
    let (enc, early) = encode_overlapped(
        &plan.input,
        plan.input_bytes.as_deref().map(Vec::as_slice),
        base,
        &plan.opts,
        plan.dedup,
        early,
    )?;
    warn(&plan.input, &enc.summary);
    Ok(Pending { enc, early })
}

/// The plan's second half: dedup and the writes.
pub fn finish(plan: &Plan, pending: Pending) -> Result<Outcome, Error> {
    let Pending { enc, early } = pending;
    let pre_dedup_types = enc.btf.own_type_count();
    let overlapped = early.as_ref().is_some_and(|i| i.gave_up().is_none());
    let btf = if plan.dedup {
        dedup_keep(&plan.input, enc.btf, None, early, plan.opts.reference)?
    } else {
        enc.btf
    };
    if plan.dedup {
        phase_ended(&plan.opts, "dedup");
    }
    if let Some(out) = &plan.output {
        crate::output::write_output(out, |w| btf::write::write_to(&btf, w)).map_err(Error::Output)?;
    }
    if plan.in_place {
        write_in_place(&plan.input, &btf, plan.opts.features.distilled_base)?;
    }
    if plan.output.is_some() || plan.in_place {
        phase_ended(&plan.opts, "write");
    }
    Ok(Outcome {
        btf,
        summary: enc.summary,
        pre_dedup_types,
        overlapped,
    })
}

fn phase_ended(opts: &Options, name: &'static str) {
    if let Some(hook) = &opts.on_phase {
        (hook.0)(name)
    }
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

/// Makes the calling thread (a batch's module thread) a rayon pool of its
/// own, of that one thread, for as long as the returned pool lives: the
/// encoder's and dedup's parallel steps then run inline on it. A pool built
/// per module, with dedup on the global pool, handed every module's work
/// between three threads (4,230 pools and their context switches in a
/// distribution kernel's batch). `None` if rayon cannot make one (the
/// thread is in a pool already): then each encode builds its own.
pub fn own_pool() -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .ok()
}

/// Options for one module of a batch on a thread of its own: one job, on
/// the thread's [`own_pool`] if it has one.
pub fn module_options(opts: &encode::Options, own_pool: bool) -> encode::Options {
    encode::Options {
        jobs: 1,
        global_pool: own_pool,
        ..opts.clone()
    }
}

/// Encodes `input` (split over `base` if given) and dedups it unless told not to
/// (with `base_index`, dedup's state for that base, if the caller built it).
/// With `bytes`, those are the input (`input` only names it). Returns the
/// final BTF, the encoder's summary and the pre-dedup type count.
pub fn encode_btf(
    input: &Path,
    bytes: Option<&[u8]>,
    base: Option<Arc<Btf>>,
    base_index: Option<&Arc<dedup::BaseIndex>>,
    opts: &Options,
    dedup: bool,
) -> Result<(Btf, Summary, u32), Error> {
    let (enc, _) = encode_overlapped(input, bytes, base, opts, dedup, false)?;
    warn(input, &enc.summary);
    let pre_dedup_types = enc.btf.own_type_count();
    // The encoder's string section is kept as built (pahole's libbpf dedups
    // BTF it built itself, whose strings are already unique).
    let out_btf = if dedup {
        dedup_keep(input, enc.btf, base_index, None, opts.reference)?
    } else {
        enc.btf
    };
    Ok((out_btf, enc.summary, pre_dedup_types))
}

/// Says on stderr what the encode's summary holds as warnings: a unit
/// where the reference stops reading the file, and types in DWARF type
/// units lost as the reference loses them (its own warnings name some of
/// them, only in linked files). The bytes are the reference's either way.
fn warn(input: &Path, s: &Summary) {
    if let Some(stopped) = &s.stopped {
        eprintln!("btfkit: {}: warning: {stopped}", input.display());
    }
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
    reference: encode::Reference,
) -> Result<Btf, Error> {
    let o = dedup::Options {
        strings: dedup::StringMode::Keep,
        ids_checked: false,
        timings: false,
        base_index: base_index.cloned(),
        rules: dedup_rules(reference),
    };
    match early {
        Some(inc) => inc.finish(btf, &o),
        None => dedup::dedup_owned(btf, &o),
    }
    .map_err(|source| Error::Dedup {
        input: input.to_path_buf(),
        source,
    })
}

/// The libbpf whose dedup the reference ran.
pub fn dedup_rules(reference: encode::Reference) -> dedup::Rules {
    match reference {
        encode::Reference::V1_31 => dedup::Rules::Libbpf374f7807,
        encode::Reference::Next => dedup::Rules::Libbpf1_8,
    }
}

/// Encodes `input`; with `early`, for a standalone BTF that will be
/// deduplicated, dedup's first passes run on the merge thread as chunks of
/// CUs are merged ([`dedup::Incremental`]), overlapping the decoding of
/// later ones instead of running alone after the last, and the structs
/// they map onto earlier copies (and no canonical type reaches) are cut
/// down to stubs as they go, which lowers a vmlinux's heap peak well below
/// the whole-BTF dedup's. If the passes have to stop after stubbing (a case
/// the corpus never reaches), the input is encoded again for the whole-BTF
/// dedup.
fn encode_overlapped(
    input: &Path,
    input_bytes: Option<&[u8]>,
    base: Option<Arc<Btf>>,
    opts: &Options,
    dedup: bool,
    early: bool,
) -> Result<(encode::Encoded, Option<dedup::Incremental>), Error> {
    enum Source<'b> {
        Bytes(&'b [u8]),
        // Opened once: standard input or a pipe can be read only once, and
        // the input may be encoded twice (below).
        Opened(crate::elf::Input),
    }
    let source = match input_bytes {
        Some(data) => Source::Bytes(data),
        None => Source::Opened(crate::elf::Input::open(input).map_err(EncodeError::from)?),
    };
    let encode_with = |base: Option<Arc<Btf>>, opts: &Options, on_merged: &mut encode::OnMerged<'_>| match &source {
        Source::Bytes(data) => encode::encode_bytes_with(input, data, base, opts, on_merged),
        Source::Opened(opened) => encode::encode_input_with(opened, base, opts, on_merged),
    };
    // A standalone BTF's records go to dedup without an offset column: it
    // lays them out itself.
    let standalone = dedup && base.is_none();
    let opts = Options {
        keep_offsets_deferred: standalone,
        // left-out copies are only exact once dedup has run
        collapse: if dedup { opts.collapse } else { CollapseMode::Never },
        ..opts.clone()
    };
    if !early || !standalone {
        return Ok((encode_with(base, &opts, &mut |_, _| {})?, None));
    }
    let mut inc = dedup::Incremental::new().with_rules(dedup_rules(opts.reference));
    let mut enc = encode_with(base.clone(), &opts, &mut |b, how| {
        if how.collapsing {
            // later CUs' copies refer to earlier records: none is cut down
            inc.keep_records();
        }
        inc.feed(b)
    })?;
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
        return Ok((encode_with(base, &opts, &mut |_, _| {})?, None));
    }
    Ok((enc, Some(inc)))
}

/// Replaces or adds the BTF sections of `input` (a new file renamed over it).
/// Split BTF under `distilled_base` is distilled first: `.BTF` holds the new
/// split part, `.BTF.base` the distilled base.
pub fn write_in_place(input: &Path, out: &Btf, distilled_base: bool) -> Result<(), Error> {
    let (btf_sec, base_sec) = if distilled_base && out.base().is_some() {
        let (base, mut split) = btf::distill::distill(out).map_err(|source| Error::Distill {
            input: input.to_path_buf(),
            source,
        })?;
        // both in the split BTF's format (the distilled base has no layout
        // section either, as libbpf makes it)
        let mut base = Arc::unwrap_or_clone(base);
        base.set_format(out.format().clone());
        split.set_format(out.format().clone());
        (btf::write::to_bytes(&split), Some(btf::write::to_bytes(&base)))
    } else {
        (btf::write::to_bytes(out), None)
    };
    let data = std::fs::read(input).map_err(|source| Error::Reread {
        input: input.to_path_buf(),
        source,
    })?;
    // A .BTF.base left from an earlier encoding with distilled_base would
    // be read as the new .BTF's base, which it is not (the reference leaves
    // it so; btfkit refuses rather than write a file that reads wrongly).
    if base_sec.is_none()
        && object::File::parse(&data[..]).is_ok_and(|o| object::Object::section_by_name(&o, ".BTF.base").is_some())
    {
        return Err(Error::InPlace {
            input: input.to_path_buf(),
            msg: "has a .BTF.base section from an earlier encoding with distilled_base, which the new .BTF \
                  would be read over: encode with --btf_features=+distilled_base (and a base), or remove the \
                  section first (objcopy --remove-section .BTF.base)"
                .into(),
        });
    }
    let mut secs: Vec<(&str, &[u8])> = vec![(".BTF", &btf_sec)];
    if let Some(b) = &base_sec {
        secs.push((".BTF.base", b));
    }
    let new = crate::elf::write::set_sections(&data, &secs).map_err(|source| Error::ElfWrite {
        input: input.to_path_buf(),
        source,
    })?;
    // A new file with the input's mode (an executable vmlinux stays one)
    // renamed over it: a kill at any moment leaves the old or the new file.
    crate::output::replace_atomic(input, &new).map_err(Error::Output)
}
