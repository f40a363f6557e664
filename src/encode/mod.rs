//! DWARF → BTF encoding, before dedup.
//!
//! Two steps per CU. The *local* step (parallel, one rayon task per CU)
//! decodes the CU and turns it into BTF records whose type references are
//! the CU's core ids and whose names are indices into the CU's own string
//! list (in first-use order). The *merge* step (sequential, in CU order)
//! appends those records to the one growing BTF: it adds the CU's
//! `type_id_off` to every reference, interns the CU's strings into the run's
//! string table in order, decides the array index type, and remembers the
//! variables for the DATASECs. Only the merge touches run-wide state, and it
//! sees CUs in `.debug_info` order, so the bytes never depend on `-j`.

pub mod features;
pub use local::function_flags;
mod collapse;
pub mod lang;
mod local;
mod merge;
mod offmap;
mod strcache;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gimli::RunTimeEndian;
use rayon::prelude::*;
use thiserror::Error;

use crate::btf::{self, Btf};
use crate::dwarf::{self, Decoder};
use crate::elf::debug::{DebugSections, ElfInfo};
pub use merge::MergeError;
use merge::Merger;

pub use features::{Features, Reference};
pub use lang::LangFilter;
pub use local::CuOut;

/// An encode that failed. The file is said once, here: what went wrong
/// with it is the [`Problem`].
#[derive(Debug, Error)]
pub enum EncodeError {
    /// The file, or its supplementary file, could not be read as ELF (the
    /// error names the file).
    #[error(transparent)]
    Elf(#[from] crate::Error),
    #[error("{path}: {problem}")]
    File {
        path: PathBuf,
        #[source]
        problem: Problem,
    },
}

impl EncodeError {
    /// `problem` with the file at `path`.
    pub fn at(path: impl Into<PathBuf>, problem: Problem) -> EncodeError {
        EncodeError::File {
            path: path.into(),
            problem,
        }
    }

    /// What went wrong, unless the file could not be read at all.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            EncodeError::File { problem, .. } => Some(problem),
            EncodeError::Elf(_) => None,
        }
    }
}

/// What went wrong with a file being encoded (see [`EncodeError`]).
#[derive(Debug, Error)]
pub enum Problem {
    /// Damaged DWARF: a unit or DIE that cannot be read.
    #[error(".debug_info: {source}")]
    Damaged { source: dwarf::DecodeError },
    /// A reference across units in a file the reference reads unit by unit
    /// (its LTO note says it is no LTO build).
    #[error(".debug_info: {source}")]
    CrossUnitRef { source: dwarf::DecodeError },
    /// A loop in a CU's type references that BTF cannot hold.
    #[error(".debug_info: {tag} {what} at DIE {die:#x} (CU {cu:#x})")]
    TypeLoop {
        tag: gimli::DwTag,
        what: String,
        die: dwarf::DieOffset,
        cu: u64,
    },
    /// A construct BTF cannot express, or one the reference rejects, with
    /// the DIE's place in the source when the DWARF names it.
    #[error("{what} at DIE {die:#x} (CU {cu:#x}){}", context.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
    Unsupported {
        what: String,
        die: dwarf::DieOffset,
        cu: u64,
        context: Option<String>,
    },
    /// A CU-level variable BTF cannot hold.
    #[error("DW_TAG_variable `{name}` at DIE {die:#x} (CU {cu:#x}){problem}")]
    Variable {
        name: String,
        die: dwarf::DieOffset,
        cu: u64,
        problem: VarProblem,
    },
    /// DWARF 4 `.debug_types` with `--type-units=resolve`.
    #[error(
        ".debug_types: --type-units=resolve reads DWARF 5 type units only; DWARF 4 `.debug_types` are not \
         resolved (without the flag they are passed over, as the reference does)"
    )]
    Dwarf4TypeUnits,
    /// The input has no DWARF, or every CU was filtered out.
    #[error("{}", match .0 {
        Nothing::NoDebugInfo => "no DWARF debug info (.debug_info is missing or empty)",
        Nothing::AllFiltered => "nothing to encode: no compile unit is left after the language filters",
    })]
    Nothing(Nothing),
    /// A library caller's second encode of one loaded module, whose
    /// relocated `.debug_info` the first encode freed as it went.
    #[error(
        ".debug_info: this load's relocated copy was freed by an earlier encode as it was read; load the file again to encode it again"
    )]
    InfoGivenBack,
    /// Functions are wanted but the file has no symbol table.
    #[error("no .symtab section: cannot build the ELF function table")]
    NoSymtab,
    /// The function phase failed (a kfunc table the reference refuses too).
    #[error("{source}")]
    Funcs { source: crate::funcs::FuncsError },
    /// The encoder's own thread pool could not start.
    #[error("cannot start threads: {source}")]
    Threads { source: rayon::ThreadPoolBuildError },
    /// A unit header that cannot be read.
    #[error("{source}")]
    Header { source: dwarf::HeaderError },
    /// The merge refused the BTF built so far (a limit, or invalid BTF).
    #[error("{source}")]
    Merge { source: MergeError },
    /// The supplementary file (dwz -m) cannot be found, or is not the one
    /// the file names.
    #[error("{source}")]
    Alt { source: Box<crate::elf::alt::AltError> },
    /// A damaged unit of the supplementary file.
    #[error("supplementary file {alt}: {source}")]
    AltDamaged { alt: PathBuf, source: dwarf::HeaderError },
}

/// Where the reference stops reading a file but writes what it has: the
/// unit it could not decode. The encode succeeds without that unit and the
/// rest of the file ([`Summary::stopped`]); a warning, not an error.
#[derive(Clone, Debug)]
pub struct Stopped(pub dwarf::DecodeError);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: error decoding this CU; it and the rest of the file are dropped, as the reference does",
            self.0
        )
    }
}

/// Why there is nothing to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nothing {
    NoDebugInfo,
    AllFiltered,
}

/// What is wrong with a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarProblem {
    /// Its name is not a C identifier BTF accepts.
    BadName,
    /// It has no type.
    NoType,
}

impl std::fmt::Display for VarProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarProblem::BadName => ": not a valid BTF variable name",
            VarProblem::NoType => " has no type",
        })
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub features: Features,
    /// Which pahole's output to reproduce.
    pub reference: Reference,
    pub lang: LangFilter,
    /// `-X` / `--cu_exclude`: skip CUs whose name starts with this prefix.
    pub cu_exclude: Option<Vec<u8>>,
    /// Decode threads (1 = no parallelism).
    pub jobs: usize,
    /// Skip the function phase (FUNC/FUNC_PROTO emission).
    pub no_funcs: bool,
    /// Leave the BTF's offset column unbuilt ([`Btf::defer_offsets`]): the
    /// caller lays the records out itself ([`crate::dedup::Incremental`]).
    pub keep_offsets_deferred: bool,
    /// Measure where the CU loop's CPU time goes ([`Summary::loop_cpu`]), telling
    /// `on_phase` (if any) as each phase ends.
    pub timings: bool,
    pub on_phase: Option<PhaseHook>,
    pub type_units: TypeUnitMode,
    /// Keep the reference's `--verbose` lines about functions left out
    /// ([`Summary::func_skips`]).
    pub verbose: bool,
    /// Run on the rayon pool the caller is in (the global pool, which the
    /// caller sized, or a batch thread's own) instead of a pool of the
    /// encoder's own: the process then has the main thread (waiting) and the
    /// pool's, as many as `-j` says (the reference's count, which its tests
    /// check).
    pub global_pool: bool,
    /// When to leave out the types of a later CU that copy merged ones
    /// exactly (`collapse.rs`). Only for BTF that dedup follows, which then
    /// gives the same bytes: the pre-dedup BTF is not the reference's.
    pub collapse: CollapseMode,
    /// Where to find the supplementary file of a dwz-compressed input
    /// (`--alt-file`, `--debug-root`).
    pub alt: crate::elf::alt::AltLookup,
}

/// When the encoder collapses exact copies ([`Options::collapse`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CollapseMode {
    Never,
    Always,
    /// Where the input repeats its units ([`dwarf::units_repeat`]): the one
    /// case where collapsing pays. Elsewhere (every kernel and module
    /// measured) it costs the vmlinux a third more CPU than it saves
    /// (PERF.md), and the guess reads nothing of a unit that shares no
    /// length and abbreviation table with another.
    #[default]
    WhereUnitsRepeat,
}

/// What to do with DWARF type units (`-fdebug-types-section`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TypeUnitMode {
    /// As pahole v1.31: type units in section groups are passed over, those
    /// in `.debug_info` are units of their own, references by signature
    /// stay unresolved (void; a skeleton is an empty anonymous struct).
    #[default]
    Reference,
    /// Beyond the reference: each compile unit is read together with the
    /// type units it refers to (transitively), signature references and
    /// skeletons resolved to the types, so the BTF holds what the same
    /// source gives without `-fdebug-types-section` (type order aside).
    Resolve,
}

/// Called as each phase of an encode run ends, with its name: `"open"`
/// (mapping, sections, unit headers), `"cu_loop"` (decode, per-CU encode,
/// merge), `"functions"` (the function phase, DATASECs, offsets). The CLI
/// reads its clocks and heap counter there.
#[derive(Clone)]
pub struct PhaseHook(pub Arc<dyn Fn(&'static str) + Send + Sync>);

impl std::fmt::Debug for PhaseHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PhaseHook")
    }
}

/// CPU time of the CU loop by kind of work, summed over the threads that
/// did it (decode and per-CU encode run on the workers beside the merge).
#[derive(Debug, Default, Clone, Copy)]
pub struct LoopCpu {
    pub decode: Duration,
    pub cu_encode: Duration,
    pub merge: Duration,
    /// In the caller's `on_merged` (dedup's first passes, from -j2 on).
    pub on_merged: Duration,
}

/// Adds the thread CPU time `f` takes to `sum` (nanoseconds), if `on`.
#[inline]
fn cpu_into<T>(on: bool, sum: &AtomicU64, f: impl FnOnce() -> T) -> T {
    if !on {
        return f();
    }
    let t0 = crate::metrics::thread_cpu();
    let r = f();
    // an unreadable clock adds nothing rather than a made-up figure
    if let (Some(t0), Some(t1)) = (t0, crate::metrics::thread_cpu()) {
        sum.fetch_add(t1.saturating_sub(t0).as_nanos() as u64, Ordering::Relaxed);
    }
    r
}

impl Default for Options {
    fn default() -> Self {
        Options {
            features: Features::default(),
            reference: Reference::default(),
            lang: LangFilter::All,
            cu_exclude: None,
            jobs: 1,
            no_funcs: true,
            keep_offsets_deferred: false,
            timings: false,
            on_phase: None,
            type_units: TypeUnitMode::Reference,
            verbose: false,
            global_pool: false,
            collapse: CollapseMode::default(),
            alt: Default::default(),
        }
    }
}

impl Options {
    /// What the kernel's own build asks of pahole (6.12's
    /// scripts/Makefile.btf): its features, Rust units left out, functions
    /// encoded. `btfkit kernel`'s defaults; one thread.
    pub fn kernel_build() -> Options {
        let mut features = Features::default();
        let unknown = features.apply_list(features::KERNEL_BUILD_FEATURES);
        debug_assert!(unknown.is_empty(), "{unknown:?}");
        let rust = lang::parse_list(features::KERNEL_LANG_EXCLUDE).unwrap_or_default();
        Options {
            features,
            lang: LangFilter::Exclude(rust),
            no_funcs: false,
            ..Options::default()
        }
    }
}

/// What one run produced besides the BTF.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Where the reference stops reading the file, when it does: what
    /// came before that unit is the BTF (a warning for the caller to show).
    pub stopped: Option<Stopped>,
    pub cus: usize,
    pub cus_encoded: usize,
    pub func_states: usize,
    pub vars: usize,
    /// With [`Options::timings`].
    pub loop_cpu: Option<LoopCpu>,
    /// DIEs the decoder walked, in the CUs it kept.
    pub dies: u64,
    /// Of those, the DIEs whose attributes it read in full.
    pub dies_read: u64,
    /// References to types in DWARF type units, left unresolved as the
    /// reference leaves them (`dwarf::Cu::type_unit_refs`).
    pub type_unit_refs: u64,
    /// With [`Options::verbose`]: `NAME : skipping BTF encoding of function
    /// due to REASON` lines, as the reference prints them on stdout.
    pub func_skips: Vec<String>,
    /// Whether the units were encoded as one merged unit (an LTO file, as
    /// the reference does): its encoding then runs on one thread.
    pub merged_units: bool,
    /// Whether exact copies were looked for ([`Options::collapse`]).
    pub collapsing: bool,
    /// Types left out as exact copies of merged ones ([`Options::collapse`]).
    pub types_collapsed: u64,
    /// Whether names were cached by their `.debug_str` offset: a merged
    /// section, not a relocatable object's ([`strcache`]).
    pub debug_str_cached: bool,
}

/// The most types one BTF may have (ids are 31-bit in libbpf, whose
/// `btf__add_*` fail past it, and so the reference). The kernel caps lower
/// (BTF_MAX_TYPE, 2^20 - 1); that is its verdict, not a format limit.
pub const MAX_TYPES: u32 = 0x7fff_ffff;
/// The largest string offset (libbpf's BTF_MAX_STR_OFFSET).
pub const MAX_STR_OFFSET: u32 = 0x7fff_ffff;

/// The result of encoding one file.
pub struct Encoded {
    pub btf: Btf,
    pub summary: Summary,
}

/// Encodes `path` (an ELF with DWARF) into pre-dedup BTF, optionally as split
/// BTF over `base`, functions included unless `opts.no_funcs`.
pub fn encode_file(path: &Path, base: Option<Arc<Btf>>, opts: &Options) -> Result<Encoded, EncodeError> {
    encode_file_with(path, base, opts, &mut |_, _| {})
}

/// What runs on the merge thread after each chunk of CUs is merged (in CU
/// order, while later CUs are decoded), with the BTF so far (the encoder
/// only appends to it) and how it is merged.
pub type OnMerged<'f> = dyn FnMut(&mut Btf, Merging) + Send + 'f;

/// How the encoder merges, told with each chunk ([`OnMerged`]); the same
/// from the first chunk to the last.
#[derive(Clone, Copy, Debug)]
pub struct Merging {
    /// Later CUs' types may be left out as copies of earlier ones, whose
    /// records must then stay whole ([`Options::collapse`]).
    pub collapsing: bool,
}

/// [`encode_file`], calling `on_merged` after each chunk of CUs is merged.
pub fn encode_file_with(
    path: &Path,
    base: Option<Arc<Btf>>,
    opts: &Options,
    on_merged: &mut OnMerged<'_>,
) -> Result<Encoded, EncodeError> {
    let input = crate::elf::Input::open(path)?;
    encode_input_with(&input, base, opts, on_merged)
}

/// [`encode_file_with`] on an opened input: the file's mapping, or its
/// bytes read into memory (standard input, a pipe), which can be encoded
/// more than once.
pub fn encode_input_with(
    input: &crate::elf::Input,
    base: Option<Arc<Btf>>,
    opts: &Options,
    on_merged: &mut OnMerged<'_>,
) -> Result<Encoded, EncodeError> {
    let path = &input.path;
    let elf = ElfInfo::load_input(input)?;
    if let Some(m) = input.mapping()
        && elf.debug.info.as_borrowed().is_none()
    {
        // A relocatable object (a module): its debug sections were copied
        // out with relocations applied, and reading them touched every
        // page of the mapping. Those pages are not needed again (the
        // sections left in place are read back from the page cache).
        m.release_all();
    }
    encode_elf_with(path, &elf, input.bytes(), base, opts, on_merged)
}

/// `--type-units=resolve`: the compile unit of `h` decoded together with
/// the type units it refers to, transitively, as parts of one unit, the
/// skeletons made references to the types; `None` for a type unit itself
/// (it is read with the units that refer to it).
fn with_type_units<'a>(
    decoder: &Decoder<'a, '_>,
    headers: &[gimli::UnitHeader<dwarf::R<'a>>],
    h: &gimli::UnitHeader<dwarf::R<'a>>,
    keep: &dyn Fn(u16, &[u8]) -> bool,
) -> Result<Option<dwarf::Cu<'a>>, dwarf::DecodeError> {
    if matches!(
        h.type_(),
        gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. }
    ) {
        return Ok(None);
    }
    let Some(mut cu) = decoder.decode_merged_part(*h, keep)? else {
        return Ok(None);
    };
    let Some(units) = decoder.type_units else {
        return Ok(Some(cu));
    };
    let mut read: Vec<usize> = Vec::new();
    let mut next = 0;
    while next < cu.type_unit_pulls.len() {
        let at = cu.type_unit_pulls[next];
        next += 1;
        let Some(i) = units.unit_of(at) else { continue };
        if read.contains(&i) {
            continue;
        }
        read.push(i);
        if let Some(part) = decoder.decode_merged_part(headers[i], &|_, _| true)? {
            cu.append(part);
        }
    }
    cu.finish_parts();
    Ok(Some(cu))
}

/// Threads worth starting for `units` units of work at `-j requested`: no
/// more than there are units, nor more than four per core (a larger `-j`
/// buys nothing but memory and scheduling; -j 5000 on a one-CU object
/// spent seconds starting threads).
pub fn effective_jobs(requested: usize, units: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    requested.min(units).min(4 * cores).max(1)
}

/// [`encode_file_with`] on an ELF file's bytes already in memory (`name`
/// names it in messages).
pub fn encode_bytes_with(
    name: &Path,
    data: &[u8],
    base: Option<Arc<Btf>>,
    opts: &Options,
    on_merged: &mut OnMerged<'_>,
) -> Result<Encoded, EncodeError> {
    let elf = ElfInfo::load(name, data)?;
    encode_elf_with(name, &elf, data, base, opts, on_merged)
}

/// CUs handed to the workers at once: the window of decoded-but-not-merged
/// CUs is at most two chunks.
const CHUNK_BYTES: u64 = 8 << 20;
/// CUs per chunk: enough per thread that one large CU does not leave the
/// other threads idle at the chunk's end, few enough that the window stays
/// small. On the vmlinux at -j2, 8 per thread against 16 lowered the peak
/// RSS (the window's .debug_info pages and decoded CUs) at the same wall
/// and CPU time.
fn chunk_max_cus(jobs: usize) -> usize {
    (8 * jobs).max(4)
}

/// `data` is the whole file `elf` was loaded from (`.BTF_ids` is read from
/// it for the kfunc marks).
pub fn encode_elf(
    path: &Path,
    elf: &ElfInfo<'_>,
    data: &[u8],
    base: Option<Arc<Btf>>,
    opts: &Options,
) -> Result<Encoded, EncodeError> {
    encode_elf_with(path, elf, data, base, opts, &mut |_, _| {})
}

/// [`encode_elf`], calling `on_merged` after each chunk of CUs is merged.
pub fn encode_elf_with(
    path: &Path,
    elf: &ElfInfo<'_>,
    data: &[u8],
    base: Option<Arc<Btf>>,
    opts: &Options,
    on_merged: &mut OnMerged<'_>,
) -> Result<Encoded, EncodeError> {
    check_input(path, elf, opts)?;
    let endian = match elf.endian {
        btf::Endian::Little => RunTimeEndian::Little,
        btf::Endian::Big => RunTimeEndian::Big,
    };
    let resolve = opts.type_units == TypeUnitMode::Resolve;
    // dwz -m: the supplementary file, loaded here so that its bytes live
    // as long as the file's (its names end up in the decoded units).
    let alt_input = match &elf.alt_link {
        Some(link) => Some(crate::elf::alt::open(path, link, &opts.alt).map_err(|e| match e {
            crate::elf::alt::AltOpenError::Alt(source) => EncodeError::at(
                path,
                Problem::Alt {
                    source: Box::new(source),
                },
            ),
            crate::elf::alt::AltOpenError::Open(e) => EncodeError::Elf(e),
        })?),
        None => None,
    };
    let alt_elf = alt_input.as_ref().map(ElfInfo::load_input).transpose()?;
    if let (Some(a), Some(i)) = (&alt_elf, &alt_input)
        && a.endian != elf.endian
    {
        return Err(EncodeError::Elf(crate::Error::Input {
            path: i.path.clone(),
            msg: format!(
                "the supplementary file of {} is of the other byte order",
                path.display()
            ),
        }));
    }
    let joined_sections = joined_type_units(elf, resolve);
    let mut dw = dwarf::dwarf(joined_sections.as_ref().unwrap_or(&elf.debug), endian);
    // (gimli reads DW_FORM_strp_sup names through `sup`)
    let alt_dw = alt_elf.as_ref().map(|a| Arc::new(dwarf::dwarf(&a.debug, endian)));
    dw.sup = alt_dw.clone();
    // Reading a header touches a page per unit, and the kernel maps the
    // pages around each touched one with it: without dropping them behind
    // the scan, a third of .debug_info was resident before the first unit
    // was decoded (and the whole of it on inputs of repeated units).
    let mut released = 0;
    let headers = dwarf::unit_headers_passing(&dw, &mut |end| {
        elf.drop_mapped_info(released..end);
        released = end;
    })
    .map_err(|source| EncodeError::at(path, Problem::Header { source }))?;
    let type_units = resolve.then(|| dwarf::TypeUnits::index(&headers));
    let decode_opts = dwarf::DecodeOpts {
        type_tag: opts.features.type_tag,
        decl_tag: opts.features.decl_tag,
        regs: crate::dwarf::loc::RegParams::for_machine(elf.machine),
        addrx_plus_offset: opts.reference == Reference::Next,
        param_locations: opts.reference == Reference::Next,
        gnu_annotations: opts.reference == Reference::Next,
    };
    let alt_headers = match (&alt_dw, &alt_input) {
        (Some(a), Some(i)) => dwarf::unit_headers(a).map_err(|source| {
            EncodeError::at(
                path,
                Problem::AltDamaged {
                    alt: i.path.clone(),
                    source,
                },
            )
        })?,
        _ => Vec::new(),
    };
    // References into the supplementary file are kept past the file's own
    // `.debug_info`.
    let own_len = gimli::Section::reader(&dw.debug_info).len() as u64;
    let sup_len = alt_dw
        .as_ref()
        .map_or(0, |a| gimli::Section::reader(&a.debug_info).len() as u64);
    let space = dwarf::InfoSpace {
        own: 0,
        sup: alt_dw.as_ref().map(|_| own_len),
        end: own_len + sup_len,
    };
    let sup_decoder = alt_dw.as_deref().map(|a| Decoder {
        dwarf: a,
        opts: decode_opts,
        endian,
        type_units: None,
        space: dwarf::InfoSpace {
            own: own_len,
            sup: None,
            end: own_len + sup_len,
        },
        imports: None,
    });
    // dwz: units import partial units (of the file, or of the
    // supplementary file); each unit is read with what it imports. The
    // reference (v1.31) stops at the first import; btfkit reads them.
    let dwz = alt_dw.is_some() || dwarf::declares_imported_units(&dw, &headers);
    let imports = dwz.then(|| dwarf::Imports::new(&headers, sup_decoder.as_ref().map(|d| (d, &alt_headers[..]))));
    let decoder = Decoder {
        dwarf: &dw,
        opts: decode_opts,
        endian,
        type_units: type_units.as_ref(),
        space,
        imports: imports.as_ref(),
    };
    // The reference reads an LTO file as one unit: the kernel's LTO note
    // decides where there is one, else any abbreviation in
    // DW_FORM_ref_addr (units referring into each other), which in a dwz
    // file are its references into partial units instead: there GCC's
    // LTO units say it.
    let merged = match elf.lto_note {
        Some(lto) => lto,
        None if dwz => dwarf::has_gcc_lto_unit(&dw, &headers),
        None => dwarf::declares_cross_unit_refs(&dw, &headers),
    };
    let collapsing = match opts.collapse {
        CollapseMode::Never => false,
        CollapseMode::Always => true,
        // A merged file is one unit: no later unit can leave out copies of
        // its types (a ThinLTO kernel's repeated DWARF turned it on and
        // doubled the peak for nothing).
        CollapseMode::WhereUnitsRepeat if merged => false,
        // The pages the probe reads are dropped behind it, as the header
        // scan's: on a vmlinux whose units repeat it reads a page of each
        // unit, and the kernel maps the pages around each with it.
        CollapseMode::WhereUnitsRepeat => {
            let mut behind = 0;
            dwarf::units_repeat(&dw, &headers, &mut |end| {
                if end > behind {
                    elf.drop_mapped_info(behind..end);
                    behind = end;
                }
            })
        }
    };
    let chunks = chunk_ranges(&headers, merged, opts.jobs);
    elf.drop_mapped_info(released..elf.debug.info.len());
    // The scan reads every page of `.debug_str`: they are dropped behind
    // it (a module's can be 130 MB, then resident beside its DWARF).
    let str_cache = strcache::StrCache::for_section(&elf.debug.str, &mut || elf.release_str()).map(Arc::new);
    let mut m = Merger::new(base, elf.endian, str_cache.clone(), headers.len(), merged, collapsing);
    m.summary.debug_str_cached = str_cache.is_some();
    m.summary.collapsing = collapsing;
    let lctx = local::Ctx {
        features: opts.features,
        reference: opts.reference,
        elf,
        path,
        str_cache: str_cache.as_deref(),
        collapse: collapsing,
    };
    let counters = LoopCounters::default();
    let work = CuWork {
        path,
        decoder: &decoder,
        headers: &headers,
        lctx: &lctx,
        opts,
        resolve,
        merged,
        dwz,
        n: &counters,
    };
    let pool = if opts.global_pool {
        None
    } else {
        Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(effective_jobs(opts.jobs, headers.len()))
                .build()
                .map_err(|source| EncodeError::at(path, Problem::Threads { source }))?,
        )
    };
    if let Some(m) = elf.mapping {
        // read once, into `funcs` and `objects` (a vmlinux's is 4.3 MB)
        m.release(elf.symtab_bytes);
    }
    phase_ended(opts, "open");
    in_pool(&pool, || work.run_loop(&mut m, &chunks, elf, on_merged))?;
    if opts.timings {
        m.summary.loop_cpu = Some(counters.cpu());
    }
    m.summary.dies = counters.dies.load(Ordering::Relaxed);
    m.summary.dies_read = counters.dies_read.load(Ordering::Relaxed);
    m.summary.type_unit_refs = counters.type_unit_refs.load(Ordering::Relaxed);
    m.summary.types_collapsed = m.collapsed();
    phase_ended(opts, "cu_loop");
    if let Some(m) = elf.mapping {
        // Decoding is over: the function phase reads only `.BTF_ids` again.
        m.release(data);
    }
    // So is string interning by .debug_str offset: free it before the
    // function phase grows the BTF to its largest.
    m.str_cache = None;
    m.tail_strs = hashbrown::HashMap::new();
    drop(str_cache);
    // the workers' freed decode buffers (a vmlinux's, not a module's)
    crate::heap::release_free_after(elf.debug.info.len());
    functions_phase(&mut m, path, elf, data, opts, &pool)?;
    phase_ended(opts, "functions");
    let summary = m.summary.clone();
    let mut btf = m.btf;
    // (dedup keeps it; the writers lay the bytes out by it)
    btf.set_format(opts.reference.format(&opts.features, btf.base().is_some()));
    Ok(Encoded { btf, summary })
}

/// What the encoder refuses before reading any unit: no DWARF, no symbol
/// table, DWARF 4 type units to resolve.
fn check_input(path: &Path, elf: &ElfInfo<'_>, opts: &Options) -> Result<(), EncodeError> {
    if elf.info_given_back() {
        return Err(EncodeError::at(path, Problem::InfoGivenBack));
    }
    if elf.debug.info.is_empty() {
        return Err(EncodeError::at(path, Problem::Nothing(Nothing::NoDebugInfo)));
    }
    if !elf.has_symtab {
        return Err(EncodeError::at(path, Problem::NoSymtab));
    }
    if opts.type_units == TypeUnitMode::Resolve && elf.grouped_types {
        return Err(EncodeError::at(path, Problem::Dwarf4TypeUnits));
    }
    Ok(())
}

/// With --type-units=resolve, the type units of section groups follow the
/// file's own `.debug_info` in one buffer, so that every unit has its
/// own `.debug_info` offset; `None` when there are none to join.
fn joined_type_units<'e>(elf: &'e ElfInfo<'_>, resolve: bool) -> Option<DebugSections<'e>> {
    if !resolve || elf.grouped_info.is_empty() {
        return None;
    }
    let mut info = elf.debug.info.to_vec();
    elf.grouped_info.iter().for_each(|g| info.extend_from_slice(g));
    Some(elf.debug.with_info(info))
}

/// Chunks of CUs, by .debug_info bytes; in the merged mode one chunk,
/// whose units are decoded in parallel and then encoded as one.
fn chunk_ranges(headers: &[gimli::UnitHeader<dwarf::R<'_>>], merged: bool, jobs: usize) -> Vec<Range<usize>> {
    let mut chunks: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, h) in headers.iter().enumerate() {
        bytes += h.length_including_self() as u64;
        if !merged && (bytes >= CHUNK_BYTES || i + 1 - start >= chunk_max_cus(jobs)) {
            chunks.push(start..i + 1);
            start = i + 1;
            bytes = 0;
        }
    }
    if start < headers.len() {
        chunks.push(start..headers.len());
    }
    chunks
}

fn phase_ended(opts: &Options, name: &'static str) {
    if let Some(hook) = &opts.on_phase {
        (hook.0)(name)
    }
}

/// In the encoder's own pool, or in the global one; either way on a
/// worker of the pool, so that the loop's joins and parallel iterators
/// are local work-stealing, not a hand-over from an outside thread each
/// (that was a visible part of a vmlinux encode).
fn in_pool<R: Send>(pool: &Option<rayon::ThreadPool>, f: impl FnOnce() -> R + Send) -> R {
    match pool {
        Some(p) => p.install(f),
        None => rayon::scope(|_| f()),
    }
}

/// The CU loop's counters, added to from the worker threads.
#[derive(Default)]
struct LoopCounters {
    decode_ns: AtomicU64,
    cu_encode_ns: AtomicU64,
    merge_ns: AtomicU64,
    on_merged_ns: AtomicU64,
    dies: AtomicU64,
    dies_read: AtomicU64,
    type_unit_refs: AtomicU64,
}

impl LoopCounters {
    fn cpu(&self) -> LoopCpu {
        let d = |ns: &AtomicU64| Duration::from_nanos(ns.load(Ordering::Relaxed));
        LoopCpu {
            decode: d(&self.decode_ns),
            cu_encode: d(&self.cu_encode_ns),
            merge: d(&self.merge_ns),
            on_merged: d(&self.on_merged_ns),
        }
    }

    /// What a decoded unit adds to the run's counts.
    fn count(&self, cu: &dwarf::Cu<'_>) {
        self.dies.fetch_add(cu.dies, Ordering::Relaxed);
        self.dies_read.fetch_add(cu.dies_read, Ordering::Relaxed);
        self.type_unit_refs.fetch_add(cu.type_unit_refs, Ordering::Relaxed);
    }
}

/// One unit's outcome: its records, or none (filtered out, a type unit).
type Item<'x> = Result<Option<CuOut<'x>>, Halt>;

/// Why the CU loop goes no further than a unit.
enum Halt {
    /// The reference stops reading the file at this unit and writes what
    /// came before it.
    Stop(dwarf::DecodeError),
    Error(EncodeError),
}

impl From<EncodeError> for Halt {
    fn from(e: EncodeError) -> Halt {
        Halt::Error(e)
    }
}

/// The CU loop: chunks of units decoded and encoded on the pool's workers
/// while the previous chunk is merged in order.
struct CuWork<'w, 'a> {
    path: &'w Path,
    decoder: &'w Decoder<'a, 'w>,
    headers: &'w [gimli::UnitHeader<dwarf::R<'a>>],
    lctx: &'w local::Ctx<'w, 'a>,
    opts: &'w Options,
    resolve: bool,
    merged: bool,
    /// Units are read with the partial units they import.
    dwz: bool,
    n: &'w LoopCounters,
}

impl<'a> CuWork<'_, 'a> {
    fn decode_err(&self, e: dwarf::DecodeError) -> Halt {
        match e.kind {
            dwarf::DecodeErrorKind::StopFile => Halt::Stop(e),
            dwarf::DecodeErrorKind::MergedMode => {
                Halt::Error(EncodeError::at(self.path, Problem::CrossUnitRef { source: e }))
            }
            dwarf::DecodeErrorKind::Damaged => Halt::Error(EncodeError::at(self.path, Problem::Damaged { source: e })),
        }
    }

    /// Whether a unit of language `l` named `name` is encoded.
    fn keep(&self, l: u16, name: &[u8]) -> bool {
        self.opts.lang.keeps(l) && !self.opts.cu_exclude.as_deref().is_some_and(|p| name.starts_with(p))
    }

    /// The `.debug_info` bytes of the units `r`.
    fn unit_span(&self, r: &Range<usize>) -> Range<usize> {
        let (first, last) = (&self.headers[r.start], &self.headers[r.end - 1]);
        first.offset().0..last.offset().0 + last.length_including_self()
    }

    /// A chunk of units decoded and encoded, in parallel.
    fn chunk(&self, r: Range<usize>) -> Vec<Item<'a>> {
        if self.merged {
            return vec![self.merged_unit(r)];
        }
        let timed = self.opts.timings;
        let keep = |l: u16, name: &[u8]| self.keep(l, name);
        self.headers[r]
            .par_iter()
            .map(|h| {
                let cu = if self.dwz {
                    cpu_into(timed, &self.n.decode_ns, || self.decoder.decode_importing(*h, &keep))
                } else if self.resolve {
                    cpu_into(timed, &self.n.decode_ns, || {
                        with_type_units(self.decoder, self.headers, h, &keep)
                    })
                } else {
                    cpu_into(timed, &self.n.decode_ns, || self.decoder.decode(*h, &keep))
                }
                .map_err(|e| self.decode_err(e))?;
                if let Some(cu) = &cu {
                    self.n.count(cu);
                }
                match cu {
                    Some(cu) if cu.kind == dwarf::UnitKind::Normal => {
                        Ok(Some(cpu_into(timed, &self.n.cu_encode_ns, || {
                            local::encode_cu(self.lctx, &cu)
                        })?))
                    }
                    _ => Ok(None),
                }
            })
            .collect()
    }

    /// The merged mode: every unit decoded (in parallel) as a part of one,
    /// the parts appended in file order, and that one unit encoded.
    fn merged_unit(&self, r: Range<usize>) -> Item<'a> {
        let timed = self.opts.timings;
        // The merged unit's language is its first unit's, filtered or not.
        let first_language = AtomicU64::new(0);
        let decode_part = |i: usize| {
            let keep = |l: u16, name: &[u8]| {
                if i == r.start {
                    first_language.store(l as u64, Ordering::Relaxed);
                }
                self.keep(l, name)
            };
            cpu_into(timed, &self.n.decode_ns, || {
                self.decoder.decode_merged_part(self.headers[i], &keep)
            })
        };
        // A window of parts at a time, appended as the next one is decoded:
        // the decoded parts are larger than what they add to the whole.
        let window = chunk_max_cus(self.opts.jobs);
        let windows: Vec<Range<usize>> = (r.start..r.end)
            .step_by(window)
            .map(|s| s..(s + window).min(r.end))
            .collect();
        let decode_window = |w: Range<usize>| -> Vec<_> { w.into_par_iter().map(decode_part).collect() };
        // A mapped file's pages of .debug_info are dropped once their window
        // is decoded, as a chunk's are in the other modes: the merged unit's
        // encode, the peak, reads none of them but an inline name, whose page
        // comes back from the file. (A relocated copy stays whole: a later
        // part may refer into an earlier one's bytes.)
        let elf = self.lctx.elf;
        let mut one: Option<dwarf::Cu<'_>> = None;
        let mut cur = windows.first().map(|w| decode_window(w.clone())).unwrap_or_default();
        for i in 0..windows.len() {
            let next = windows.get(i + 1).cloned();
            let parts = std::mem::take(&mut cur);
            let (appended, nxt) = rayon::join(
                || -> Result<(), Halt> {
                    elf.drop_mapped_info(self.unit_span(&windows[i]));
                    for part in parts {
                        let Some(part) = part.map_err(|e| self.decode_err(e))? else {
                            continue;
                        };
                        self.n.count(&part);
                        match &mut one {
                            None => one = Some(part),
                            Some(cu) => cu.append(part),
                        }
                    }
                    Ok(())
                },
                || next.map(decode_window),
            );
            appended?;
            cur = nxt.unwrap_or_default();
        }
        // nor, from here on, the sections each part read its stretch of
        if let Some(m) = elf.mapping {
            per_cu_sections(elf).iter().for_each(|s| m.release(s));
        }
        let Some(mut cu) = one else { return Ok(None) };
        cu.offset = self.headers.get(r.start).map_or(0, |h| h.offset().0 as u64);
        cu.name = b"";
        cu.language = first_language.load(Ordering::Relaxed) as u16;
        // (the file's own partial units are parts already)
        self.decoder
            .pull_imports(&mut cu, true)
            .map_err(|e| self.decode_err(e))?;
        cu.finish_parts();
        Ok(Some(cpu_into(timed, &self.n.cu_encode_ns, || {
            local::encode_cu(self.lctx, &cu)
        })?))
    }

    /// Each chunk merged in order while the next is decoded, `on_merged`
    /// after each, and the mapped pages the chunk read released. A unit the
    /// reference stops reading at ends the loop with what came before it.
    fn run_loop(
        &self,
        m: &mut Merger,
        chunks: &[Range<usize>],
        elf: &ElfInfo<'_>,
        on_merged: &mut OnMerged<'_>,
    ) -> Result<(), EncodeError> {
        let timed = self.opts.timings;
        // What a merged chunk read of .debug_info, and of a large
        // .debug_str, is dropped from memory: a file mapping's pages come
        // back from the file if read again, a relocated copy's are freed.
        // Outside --type-units=resolve a unit reads only its own bytes of
        // .debug_info (references across units are the merged mode, one
        // chunk), so a chunk's bytes are not read again once it is merged.
        // (a unit may import a partial unit of an earlier chunk: a
        // relocated copy is then kept whole)
        let release_info = elf.info_is_file_mapped() || (!self.resolve && !self.dwz);
        let per_cu = per_cu_sections(elf);
        let mut cur = chunks.first().map(|r| self.chunk(r.clone())).unwrap_or_default();
        let mut stopped = false;
        for i in 0..chunks.len() {
            let next = chunks.get(i + 1).cloned();
            let items = std::mem::take(&mut cur);
            let range = self.unit_span(&chunks[i]);
            let (res, nxt) = rayon::join(
                || -> Result<(), EncodeError> {
                    for it in items {
                        match it {
                            Ok(Some(out)) => cpu_into(timed, &self.n.merge_ns, || m.merge(out))
                                .map_err(|source| EncodeError::at(self.path, Problem::Merge { source }))?,
                            Ok(None) => {}
                            Err(Halt::Stop(e)) => {
                                m.summary.stopped = Some(Stopped(e));
                                stopped = true;
                                break;
                            }
                            Err(Halt::Error(e)) => return Err(e),
                        }
                    }
                    let merging = Merging {
                        collapsing: m.collapsing(),
                    };
                    cpu_into(timed, &self.n.on_merged_ns, || on_merged(&mut m.btf, merging));
                    if release_info {
                        // SAFETY: this chunk's units are merged, and the merged
                        // BTF borrows nothing from .debug_info; no later unit
                        // reads these bytes (see above).
                        unsafe { elf.release_info(range) };
                    }
                    elf.release_str();
                    if let Some(m) = elf.mapping {
                        per_cu.iter().for_each(|s| m.release(s));
                    }
                    Ok(())
                },
                || next.map(|r| self.chunk(r)),
            );
            res?;
            if stopped {
                break;
            }
            cur = nxt.unwrap_or_default();
        }
        Ok(())
    }
}

/// Sections each CU reads its own stretch of, in CU order, where mapped:
/// what one chunk touched the next one does not need (a page it does need
/// is read back from the page cache). Abbreviation tables are per object
/// file, so in CU order as well (a table CUs share is simply read back);
/// the strings of `.debug_str` are shared by all CUs and stay.
fn per_cu_sections<'e>(elf: &'e ElfInfo<'_>) -> Vec<&'e [u8]> {
    if elf.mapping.is_none() {
        return Vec::new();
    }
    let d = &elf.debug;
    [
        &d.abbrev,
        &d.loc,
        &d.loclists,
        &d.ranges,
        &d.rnglists,
        &d.line,
        &d.addr,
        &d.str_offsets,
    ]
    .into_iter()
    .filter_map(|c| c.as_borrowed())
    .collect()
}

/// After the last CU: the function phase (unless `no_funcs`), the DATASECs,
/// the run's limits, and the offset column (unless the caller lays the
/// records out itself).
fn functions_phase(
    m: &mut Merger,
    path: &Path,
    elf: &ElfInfo<'_>,
    data: &[u8],
    opts: &Options,
    pool: &Option<rayon::ThreadPool>,
) -> Result<(), EncodeError> {
    let refused = |source: MergeError| EncodeError::at(path, Problem::Merge { source });
    if m.summary.cus_encoded == 0 {
        return Err(EncodeError::at(path, Problem::Nothing(Nothing::AllFiltered)));
    }
    if !opts.no_funcs {
        m.emit_funcs(elf, data, &opts.features, opts.reference, opts.verbose)
            .map_err(|source| EncodeError::at(path, Problem::Funcs { source }))?;
    }
    m.finish_datasecs(elf, &opts.features).map_err(refused)?;
    // Functions and DATASECs come after the last CU's check.
    m.check_limits(0, 0).map_err(refused)?;
    if let Some(cu) = m.shifted_cu {
        in_pool(pool, || m.btf.build_offsets());
        m.check_refs_in_range(cu).map_err(refused)?;
    }
    if !opts.keep_offsets_deferred {
        // in parallel, in the run's thread pool
        in_pool(pool, || m.btf.build_offsets());
    }
    m.btf.shrink_to_fit();
    Ok(())
}
