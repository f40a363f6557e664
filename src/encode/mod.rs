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
pub mod fuzz_input;
pub use local::function_flags;
pub mod lang;
mod local;
mod offmap;
mod strcache;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gimli::RunTimeEndian;
use rayon::prelude::*;
use thiserror::Error;

use crate::btf::{self, Btf, Kind, TypeId, make_info};
use crate::dwarf::{self, Decoder};
use crate::elf::debug::ElfInfo;

pub use features::Features;
pub use lang::LangFilter;
pub use local::CuOut;

use crate::funcs::FuncStates;

#[derive(Debug, Error)]
pub enum EncodeError {
    #[error("{path}: {msg}")]
    Input { path: PathBuf, msg: String },
    /// A construct BTF cannot express, or one the reference rejects.
    #[error("{path}: {msg}")]
    Unsupported { path: PathBuf, msg: String },
    /// The input has no DWARF, or every CU was filtered out.
    #[error("{path}: {msg}")]
    Nothing { path: PathBuf, msg: String },
    /// The reference stops reading the file at this CU but writes what it has.
    #[error("{path}: {msg}")]
    StopFile { path: PathBuf, msg: String },
    #[error(transparent)]
    Elf(#[from] crate::Error),
}

#[derive(Clone, Debug)]
pub struct Options {
    pub features: Features,
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
    /// Run on rayon's global pool, which the caller sized, instead of a pool
    /// of the encoder's own: the process then has the main thread (waiting)
    /// and the pool's, as many as `-j` says (the reference's count, which its
    /// tests check).
    pub global_pool: bool,
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

/// This thread's CPU time so far.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Adds the thread CPU time `f` takes to `sum` (nanoseconds), if `on`.
#[inline]
fn cpu_into<T>(on: bool, sum: &AtomicU64, f: impl FnOnce() -> T) -> T {
    if !on {
        return f();
    }
    let t0 = thread_cpu();
    let r = f();
    sum.fetch_add((thread_cpu().saturating_sub(t0)).as_nanos() as u64, Ordering::Relaxed);
    r
}

impl Default for Options {
    fn default() -> Self {
        Options {
            features: Features::default(),
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
        }
    }
}

/// What one run produced besides the BTF.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub cus: usize,
    pub cus_encoded: usize,
    pub func_states: usize,
    pub vars: usize,
    /// With [`Options::timings`].
    pub loop_cpu: Option<LoopCpu>,
    /// DIEs the decoder read, in the CUs it kept.
    pub dies: u64,
    /// References to types in DWARF type units, left unresolved as the
    /// reference leaves them (`dwarf::Cu::type_unit_refs`).
    pub type_unit_refs: u64,
    /// With [`Options::verbose`]: `NAME : skipping BTF encoding of function
    /// due to REASON` lines, as the reference prints them on stdout.
    pub func_skips: Vec<String>,
    /// Whether the units were encoded as one merged unit (an LTO file, as
    /// the reference does): its encoding then runs on one thread.
    pub merged_units: bool,
}

/// The most types one BTF may have (ids are 31-bit in libbpf, whose
/// `btf__add_*` fail past it, and so the reference). The kernel caps lower
/// (BTF_MAX_TYPE, 2^20 - 1); that is its verdict, not a format limit.
pub const MAX_TYPES: u32 = 0x7fff_ffff;
/// The largest string offset (libbpf's BTF_MAX_STR_OFFSET).
pub const MAX_STR_OFFSET: u32 = 0x7fff_ffff;

/// Run-wide merge state.
struct Merger {
    /// `MAX_TYPES`, smaller in tests.
    max_types: u32,
    /// The first CU whose ids a nested DW_TAG_unspecified_type shifted.
    shifted_cu: Option<u64>,
    btf: Btf,
    has_index: bool,
    index: u32,
    /// Section index → (VAR id, offset, size), in encounter order.
    datasecs: BTreeMap<u32, Vec<(u32, u32, u32)>>,
    map: Vec<u32>,
    /// `.debug_str` offset → BTF string offset (0: not seen yet). Interning
    /// is idempotent and the string section only grows, so a value once set
    /// is final: the workers read it too (see `CuOut::strs_known`) and the
    /// merge only looks up what they did not find.
    str_cache: Arc<strcache::StrCache>,
    /// The same for offsets into the middle of a string (linkers merge
    /// string tails), which `str_cache` has no slot for: 2 M of a vmlinux's
    /// name look-ups, each a hash of the text and a compare against the
    /// string table without this. Merge-only, so a plain map.
    tail_strs: hashbrown::HashMap<u32, u32>,
    scratch: Vec<u32>,
    summary: Summary,
    /// Saved function states (the function phase emits them).
    pub funcs: FuncStates,
}

impl Merger {
    fn push_record(&mut self, rec: &[u32], off: u32, last_var: u32) -> TypeId {
        self.scratch.clear();
        self.scratch.extend_from_slice(rec);
        let map = &self.map;
        Btf::for_each_str_ref_mut(&mut self.scratch, |w| *w = map[*w as usize]);
        if self.scratch[2] == local::VAR_REF_MARKER && (self.scratch[1] >> 24) & 0x1f == Kind::DeclTag as u32 {
            self.scratch[2] = last_var;
            return self.btf.push_words(&self.scratch);
        }
        Btf::for_each_type_ref_mut(&mut self.scratch, |w| {
            if *w != 0 {
                *w = w.wrapping_add(off)
            }
        });
        self.btf.push_words(&self.scratch)
    }

    fn intern_range<'a>(&mut self, out: &CuOut<'a>, from: usize, to: usize) {
        for i in from..to {
            let known = out.strs_known[i];
            if known != 0 {
                self.map[i + 1] = known;
                continue;
            }
            let s = out.strs[i];
            let off = out.strs_off[i];
            if off != dwarf::NONE {
                let btf = &mut self.btf;
                let mut intern = || btf.add_str(dwarf::nm(s)).0;
                self.map[i + 1] = match self.str_cache.get_or_insert_with(off, &mut intern) {
                    Some(b) => b,
                    None => *self.tail_strs.entry(off).or_insert_with(intern),
                };
            } else {
                self.map[i + 1] = self.btf.add_str(dwarf::nm(s)).0;
            }
        }
    }

    /// After a CU whose ids a nested DW_TAG_unspecified_type shifted: the
    /// reference writes such CUs with every later reference pointing one
    /// type further per unspecified type (we write the same bytes), which
    /// only goes unnoticed while the shifted ids stay inside the BTF. One
    /// past the last type is invalid BTF: refused instead. A pass over all
    /// references, paid only by runs with such a CU (C++ only).
    fn check_refs_in_range(&self, cu: u64) -> Result<(), String> {
        let (start, last) = (self.btf.start_id(), self.btf.type_count());
        for (i, &o) in self.btf.type_offsets().iter().enumerate() {
            let w = &self.btf.raw_words()[o as usize..];
            let mut bad = None;
            Btf::for_each_type_ref(w, |t| {
                if t > last && bad.is_none() {
                    bad = Some(t);
                }
            });
            if let Some(t) = bad {
                return Err(format!(
                    "type [{}] refers to type {t}, past the last type {last}: a DW_TAG_unspecified_type nested in another DIE \
                     (first in the CU at {cu:#x}) takes a type id but emits no type, shifting the CU's later references \
                     as the reference encoder does; here that would give invalid BTF",
                    start + i as u32
                ));
            }
        }
        Ok(())
    }

    /// Whether the BTF built so far, plus `more` types, is within the
    /// format's limits; the message says which limit is passed.
    fn check_limits(&self, more: usize, more_words: usize) -> Result<(), String> {
        // as built: with the words dedup's chunked passes took out
        let bytes = self.btf.type_section_len() as u64 + 4 * (self.btf.cut_words() + more_words as u64);
        if bytes > u32::MAX as u64 {
            return Err(format!("type section of {bytes} bytes: more than BTF's 32-bit length"));
        }
        let n = self.btf.type_count() as u64 + more as u64;
        if n > self.max_types as u64 {
            return Err(format!(
                "{n} types: more than BTF's {} (type ids are 31-bit)",
                self.max_types
            ));
        }
        if self.btf.strs_end() > MAX_STR_OFFSET {
            return Err(format!(
                "string section of {} bytes: more than BTF's {MAX_STR_OFFSET} (string offsets are 31-bit)",
                self.btf.strs_end()
            ));
        }
        Ok(())
    }

    fn merge<'a>(&mut self, mut out: CuOut<'a>) -> Result<(), String> {
        // Checked before any id is assigned: ids past the limit never exist,
        // so none can wrap. +1 for the `int` an array may need.
        self.check_limits(out.offs.len() + 1, out.words.len() + 4)?;
        if out.shifted_ids && self.shifted_cu.is_none() {
            self.shifted_cu = Some(out.cu_offset);
        }
        self.summary.cus_encoded += 1;
        let off = self.btf.type_count();
        let mut candidate = 0;
        if !self.has_index {
            match out.int_core {
                Some(k) => {
                    self.has_index = true;
                    self.index = off + k;
                }
                None => candidate = off + out.nslots,
            }
        }
        let index = if self.has_index { self.index } else { candidate };
        self.map.clear();
        self.map.resize(out.strs.len() + 1, 0);
        self.intern_range(&out, 0, out.strs_in_types as usize);
        let nrec = out.offs.len();
        let rec = |out: &CuOut<'a>, i: usize| {
            let s = out.offs[i] as usize;
            let e = if i + 1 < nrec {
                out.offs[i + 1] as usize
            } else {
                out.words.len()
            };
            (s, e)
        };
        // The CU's types: one bulk copy, then names and references fixed in place.
        let types_end = if out.n_types < nrec {
            out.offs[out.n_types] as usize
        } else {
            out.words.len()
        };
        let base = self
            .btf
            .append_records(&out.words[..types_end], &out.offs[..out.n_types]);
        let map = &self.map;
        let w = self.btf.words_from_mut(base);
        for i in 0..out.n_types {
            let s = out.offs[i] as usize;
            let e = if i + 1 < out.n_types {
                out.offs[i + 1] as usize
            } else {
                types_end
            };
            let r = &mut w[s..e];
            relocate(r, map, off);
            if (r[1] >> 24) & 0x1f == Kind::Array as u32 {
                r[4] = index;
            }
        }
        if out.has_arrays && !self.has_index {
            self.btf.add_int(b"int", 4, btf::INT_SIGNED);
            self.has_index = true;
            self.index = candidate;
        }
        self.intern_range(&out, out.strs_in_types as usize, out.strs.len());
        let mut vars = out.vars.iter().peekable();
        let mut last_var = 0;
        for i in out.n_types..nrec {
            let (s, e) = rec(&out, i);
            let words = std::mem::take(&mut out.words);
            let id = self.push_record(&words[s..e], off, last_var);
            out.words = words;
            if let Some(v) = vars.peek()
                && v.record as usize == i
            {
                self.datasecs
                    .entry(v.section)
                    .or_default()
                    .push((id.0, v.offset, v.size));
                self.summary.vars += 1;
                last_var = id.0;
                vars.next();
            }
        }
        let map = &self.map;
        self.funcs
            .extend_relocated(&out.funcs, off, |s| btf::StrOff(map[s.0 as usize]));
        self.summary.func_states = self.funcs.len();
        Ok(())
    }

    /// The function phase after the last CU (FUNC_PROTO, FUNC and their decl
    /// tags), before the DATASECs, as in the reference.
    fn emit_funcs(
        &mut self,
        elf: &ElfInfo<'_>,
        data: &[u8],
        f: &Features,
        verbose: bool,
    ) -> Result<(), crate::funcs::FuncsError> {
        let marks = if f.decl_tag_kfuncs {
            crate::funcs::KfuncMarks::from_elf(data, &elf.funcs)?
        } else {
            crate::funcs::KfuncMarks::none(elf.funcs.len())
        };
        let eo = crate::funcs::EmitOptions {
            consistent_func: f.consistent_func,
            decl_tag: f.decl_tag,
            decl_tag_kfuncs: f.decl_tag_kfuncs,
            attributes: f.attributes,
        };
        let log = verbose.then_some(&mut self.summary.func_skips);
        crate::funcs::emit_funcs_logged(&mut self.btf, &mut self.funcs, &elf.funcs, &marks, &eo, log)?;
        // The states are spent; their memory is not needed for the DATASECs or dedup.
        self.funcs = FuncStates::default();
        Ok(())
    }

    fn finish_datasecs(&mut self, elf: &ElfInfo<'_>) -> Result<(), String> {
        let secs = std::mem::take(&mut self.datasecs);
        for (sec, mut entries) in secs {
            // The reference counts a section's variables in 16 bits: it keeps
            // the first `n mod 65536` met, sorts those and sizes the section
            // by the last of them.
            let n = entries.len();
            entries.truncate(local::kept_entries(n));
            if entries.is_empty() {
                return Err(format!(
                    "section {}: {n} variables, a multiple of 65536: BTF's 16-bit DATASEC count would be 0 \
                     (the reference then writes an empty DATASEC sized from memory outside its list)",
                    String::from_utf8_lossy(elf.sections[sec as usize].name)
                ));
            }
            entries.sort_by_key(|e| e.1);
            let last = *entries.last().expect("datasec has entries");
            let name = elf.sections[sec as usize].name;
            let n = self.btf.add_str(name);
            let vlen = entries.len() as u32;
            let mut words = vec![n.0, make_info(Kind::Datasec, false, vlen), last.1.wrapping_add(last.2)];
            for (v, o, s) in entries {
                words.extend_from_slice(&[v, o, s]);
            }
            self.btf.push_words(&words);
        }
        Ok(())
    }
}

/// Tells the kernel it may drop the pages wholly inside `bytes`, a range of
/// the read-only private file mapping: they are re-read from the file if
/// touched again, so this only lowers the resident set.
fn release_pages(bytes: &[u8]) {
    const PAGE: usize = 4096;
    let start = (bytes.as_ptr() as usize).div_ceil(PAGE) * PAGE;
    let end = (bytes.as_ptr() as usize + bytes.len()) / PAGE * PAGE;
    if end > start {
        // SAFETY: the range lies inside a live read-only file mapping; for
        // such pages MADV_DONTNEED discards the cached copy only.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The result of encoding one file.
pub struct Encoded {
    pub btf: Btf,
    pub summary: Summary,
}

/// Encodes `path` (an ELF with DWARF) into pre-dedup BTF, optionally as split
/// BTF over `base`, functions included unless `opts.no_funcs`.
pub fn encode_file(path: &Path, base: Option<Arc<Btf>>, opts: &Options) -> Result<Encoded, EncodeError> {
    encode_file_with(path, base, opts, &mut |_| {})
}

/// What runs on the merge thread after each chunk of CUs is merged (in CU
/// order, while later CUs are decoded), with the BTF so far: the encoder
/// only appends to it.
pub type OnMerged<'f> = dyn FnMut(&mut Btf) + Send + 'f;

/// [`encode_file`], calling `on_merged` after each chunk of CUs is merged.
pub fn encode_file_with(
    path: &Path,
    base: Option<Arc<Btf>>,
    opts: &Options,
    on_merged: &mut OnMerged<'_>,
) -> Result<Encoded, EncodeError> {
    let input = crate::elf::Input::open(path)?;
    let mut elf = ElfInfo::load(path, input.bytes())?;
    // `Input` maps the file read-only (or read it, where it cannot be mapped).
    elf.file_mapped = input.is_mapped();
    if matches!(elf.debug.info, std::borrow::Cow::Owned(_)) {
        // A relocatable object (a module): its debug sections were copied
        // out with relocations applied, and reading them touched every
        // page of the mapping. Those pages are not needed again (the
        // sections left in place are read back from the page cache).
        release_pages(input.bytes());
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
/// took 7.5 s starting threads).
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
/// small. On the vmlinux at -j2, 8 per thread against 16: peak RSS 186 ->
/// 175 MiB (the window's .debug_info pages and decoded CUs), wall and CPU
/// medians the same over 6 alternating runs.
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
    encode_elf_with(path, elf, data, base, opts, &mut |_| {})
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
    let input_err = |msg: String| EncodeError::Input {
        path: path.to_path_buf(),
        msg,
    };
    if elf.debug.info.is_empty() {
        return Err(EncodeError::Nothing {
            path: path.to_path_buf(),
            msg: "no DWARF debug info (.debug_info is missing or empty)".into(),
        });
    }
    if !elf.has_symtab {
        return Err(input_err(
            "no .symtab section: cannot build the ELF function table".into(),
        ));
    }
    let endian = match elf.endian {
        btf::Endian::Little => RunTimeEndian::Little,
        btf::Endian::Big => RunTimeEndian::Big,
    };
    let resolve = opts.type_units == TypeUnitMode::Resolve;
    if resolve && elf.grouped_types {
        return Err(EncodeError::Unsupported {
            path: path.to_path_buf(),
            msg: ".debug_types: --type-units=resolve reads DWARF 5 type units only; DWARF 4 `.debug_types` \
                  are not resolved (without the flag they are passed over, as the reference does)"
                .into(),
        });
    }
    // With --type-units=resolve, the type units of section groups follow the
    // file's own `.debug_info` in one buffer, so that every unit has its
    // own `.debug_info` offset.
    let joined_sections;
    let sections = if resolve && !elf.grouped_info.is_empty() {
        let mut info = elf.debug.info.to_vec();
        elf.grouped_info.iter().for_each(|g| info.extend_from_slice(g));
        joined_sections = elf.debug.with_info(info);
        &joined_sections
    } else {
        &elf.debug
    };
    let dw = dwarf::dwarf(sections, endian);
    let headers = dwarf::unit_headers(&dw, path).map_err(|m| EncodeError::Input {
        path: path.to_path_buf(),
        msg: m.split_once(": ").map(|x| x.1.to_string()).unwrap_or(m),
    })?;
    let type_units = resolve.then(|| dwarf::TypeUnits::index(&headers));
    let decoder = Decoder {
        dwarf: &dw,
        opts: dwarf::DecodeOpts {
            type_tag: opts.features.type_tag,
            decl_tag: opts.features.decl_tag,
            regs: crate::dwarf::loc::RegParams::for_machine(elf.machine),
        },
        endian,
        type_units: type_units.as_ref(),
    };
    let lctx_features = opts.features;
    // The reference reads an LTO file as one unit: the kernel's LTO note
    // decides where there is one, else any abbreviation in
    // DW_FORM_ref_addr (units referring into each other).
    let merged = match elf.lto_note {
        Some(lto) => lto,
        None => dwarf::declares_cross_unit_refs(&dw, &headers),
    };

    // Chunks of CUs, by .debug_info bytes; in the merged mode one chunk,
    // whose units are decoded in parallel and then encoded as one.
    let mut chunks: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, h) in headers.iter().enumerate() {
        bytes += h.length_including_self() as u64;
        if !merged && (bytes >= CHUNK_BYTES || i + 1 - start >= chunk_max_cus(opts.jobs)) {
            chunks.push(start..i + 1);
            start = i + 1;
            bytes = 0;
        }
    }
    if start < headers.len() {
        chunks.push(start..headers.len());
    }

    let str_cache = Arc::new(strcache::StrCache::new(&elf.debug.str));
    let mut btf = match &base {
        Some(b) => Btf::new_split(b.clone()),
        None => Btf::new(elf.endian),
    };
    btf.set_endian(elf.endian);
    // the merge only appends; offsets are built after the CU loop
    btf.defer_offsets();
    let mut m = Merger {
        max_types: MAX_TYPES,
        shifted_cu: None,
        btf,
        has_index: false,
        index: 0,
        datasecs: BTreeMap::new(),
        map: Vec::new(),
        str_cache: str_cache.clone(),
        tail_strs: hashbrown::HashMap::new(),
        scratch: Vec::new(),
        summary: Summary {
            cus: headers.len(),
            merged_units: merged,
            ..Default::default()
        },
        funcs: FuncStates::default(),
    };

    let lctx = local::Ctx {
        features: lctx_features,
        elf,
        path,
        str_cache: &str_cache,
    };
    type Item<'x> = Result<Option<CuOut<'x>>, EncodeError>;
    let timed = opts.timings;
    let [decode_ns, cu_encode_ns, merge_ns, on_merged_ns, dies, type_unit_refs] = [(); 6].map(|_| AtomicU64::new(0));
    let lang = &opts.lang;
    let cu_exclude = opts.cu_exclude.as_deref();
    let decode_err = |e: dwarf::DecodeError| match e.kind {
        dwarf::DecodeErrorKind::StopFile => EncodeError::StopFile {
            path: path.to_path_buf(),
            msg: format!(
                "warning: {e}: error decoding this CU; it and the rest of the file are dropped, as the reference does"
            ),
        },
        dwarf::DecodeErrorKind::MergedMode => EncodeError::Unsupported {
            path: path.to_path_buf(),
            msg: format!(".debug_info: {e}"),
        },
        dwarf::DecodeErrorKind::Damaged => EncodeError::Input {
            path: path.to_path_buf(),
            msg: format!(".debug_info: {e}"),
        },
    };
    let keep = |l: u16, name: &[u8]| lang.keeps(l) && !cu_exclude.is_some_and(|p| name.starts_with(p));
    // what a decoded unit adds to the run's counts
    let count = |cu: &dwarf::Cu<'_>| {
        dies.fetch_add(cu.dies, Ordering::Relaxed);
        type_unit_refs.fetch_add(cu.type_unit_refs, Ordering::Relaxed);
    };
    // The merged mode: every unit decoded (in parallel) as a part of one,
    // the parts appended in file order, and that one unit encoded.
    let merged_work = |r: std::ops::Range<usize>| -> Item<'_> {
        // The merged unit's language is its first unit's, filtered or not.
        let first_language = AtomicU64::new(0);
        let decode_part = |i: usize| {
            let keep = |l: u16, name: &[u8]| {
                if i == r.start {
                    first_language.store(l as u64, Ordering::Relaxed);
                }
                keep(l, name)
            };
            cpu_into(timed, &decode_ns, || decoder.decode_merged_part(headers[i], &keep))
        };
        // A window of parts at a time, appended as the next one is decoded:
        // the decoded parts are larger than what they add to the whole.
        let window = chunk_max_cus(opts.jobs);
        let windows: Vec<std::ops::Range<usize>> = (r.start..r.end)
            .step_by(window)
            .map(|s| s..(s + window).min(r.end))
            .collect();
        let decode_window = |w: std::ops::Range<usize>| -> Vec<_> { w.into_par_iter().map(decode_part).collect() };
        let mut one: Option<dwarf::Cu<'_>> = None;
        let mut cur = windows.first().map(|w| decode_window(w.clone())).unwrap_or_default();
        for i in 0..windows.len() {
            let next = windows.get(i + 1).cloned();
            let parts = std::mem::take(&mut cur);
            let (appended, nxt) = rayon::join(
                || -> Result<(), EncodeError> {
                    for part in parts {
                        let Some(part) = part.map_err(decode_err)? else {
                            continue;
                        };
                        count(&part);
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
        let Some(mut cu) = one else { return Ok(None) };
        cu.offset = headers.get(r.start).map_or(0, |h| h.offset().0 as u64);
        cu.name = b"";
        cu.language = first_language.load(Ordering::Relaxed) as u16;
        cu.finish_parts();
        cpu_into(timed, &cu_encode_ns, || local::encode_cu(&lctx, &cu)).map(Some)
    };
    let work = |r: std::ops::Range<usize>| -> Vec<Item<'_>> {
        if merged {
            return vec![merged_work(r)];
        }
        headers[r]
            .par_iter()
            .map(|h| {
                let cu = if resolve {
                    cpu_into(timed, &decode_ns, || with_type_units(&decoder, &headers, h, &keep))
                } else {
                    cpu_into(timed, &decode_ns, || decoder.decode(*h, &keep))
                }
                .map_err(decode_err)?;
                if let Some(cu) = &cu {
                    count(cu);
                }
                match cu {
                    Some(cu) if cu.kind == dwarf::UnitKind::Normal => {
                        cpu_into(timed, &cu_encode_ns, || local::encode_cu(&lctx, &cu)).map(Some)
                    }
                    _ => Ok(None),
                }
            })
            .collect()
    };
    let pool = if opts.global_pool {
        None
    } else {
        Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(effective_jobs(opts.jobs, headers.len()))
                .build()
                .map_err(|e| input_err(format!("cannot start threads: {e}")))?,
        )
    };
    // In the encoder's own pool, or in the global one; either way on a
    // worker of the pool, so that the loop's joins and parallel iterators
    // are local work-stealing, not a hand-over from an outside thread each
    // (that cost 4-6 % of a vmlinux encode).
    fn in_pool<R: Send>(pool: &Option<rayon::ThreadPool>, f: impl FnOnce() -> R + Send) -> R {
        match pool {
            Some(p) => p.install(f),
            None => rayon::scope(|_| f()),
        }
    }
    if elf.file_mapped {
        // read once, into `funcs` and `objects` (a vmlinux's is 4.3 MB)
        release_pages(elf.symtab_bytes);
    }
    // The mapped .debug_info (read straight from the file, not decompressed
    // or relocated) can be dropped from memory chunk by chunk once merged.
    let info_mapped = elf.file_mapped && matches!(elf.debug.info, std::borrow::Cow::Borrowed(_));
    // Sections each CU reads its own stretch of, in CU order: what one chunk
    // touched the next one does not need (a page it does need is read back
    // from the page cache). Abbreviation tables are per object file, so in
    // CU order as well (a table CUs share is simply read back); the
    // strings of `.debug_str` are shared by all CUs and stay.
    let per_cu: Vec<&[u8]> = if elf.file_mapped {
        let d = &elf.debug;
        [&d.abbrev, &d.loc, &d.loclists, &d.ranges, &d.rnglists, &d.line, &d.addr]
            .into_iter()
            .filter_map(|c| match c {
                std::borrow::Cow::Borrowed(b) => Some(*b),
                std::borrow::Cow::Owned(_) => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let unit_range = |r: &std::ops::Range<usize>| -> (usize, usize) {
        let first = &headers[r.start];
        let last = &headers[r.end - 1];
        (first.offset().0, last.offset().0 + last.length_including_self())
    };
    let phase_ended = |name: &'static str| {
        if let Some(hook) = &opts.on_phase {
            (hook.0)(name)
        }
    };
    phase_ended("open");
    let result: Result<(), EncodeError> = in_pool(&pool, || {
        let mut cur = chunks.first().map(|r| work(r.clone())).unwrap_or_default();
        let mut stopped = false;
        for i in 0..chunks.len() {
            let next = chunks.get(i + 1).cloned();
            let items = std::mem::take(&mut cur);
            let range = unit_range(&chunks[i]);
            let (res, nxt) = rayon::join(
                || -> Result<(), EncodeError> {
                    for it in items {
                        match it {
                            Ok(Some(out)) => {
                                cpu_into(timed, &merge_ns, || m.merge(out)).map_err(|msg| EncodeError::Unsupported {
                                    path: path.to_path_buf(),
                                    msg,
                                })?
                            }
                            Ok(None) => {}
                            Err(e @ EncodeError::StopFile { .. }) => {
                                eprintln!("btfkit: {e}");
                                stopped = true;
                                break;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    cpu_into(timed, &on_merged_ns, || on_merged(&mut m.btf));
                    if info_mapped {
                        release_pages(&elf.debug.info[range.0..range.1.min(elf.debug.info.len())]);
                    }
                    per_cu.iter().for_each(|s| release_pages(s));
                    Ok(())
                },
                || next.map(work),
            );
            res?;
            if stopped {
                break;
            }
            cur = nxt.unwrap_or_default();
        }
        Ok(())
    });
    result?;
    if timed {
        let d = |ns: &AtomicU64| Duration::from_nanos(ns.load(Ordering::Relaxed));
        m.summary.loop_cpu = Some(LoopCpu {
            decode: d(&decode_ns),
            cu_encode: d(&cu_encode_ns),
            merge: d(&merge_ns),
            on_merged: d(&on_merged_ns),
        });
    }
    m.summary.dies = dies.load(Ordering::Relaxed);
    m.summary.type_unit_refs = type_unit_refs.load(Ordering::Relaxed);
    phase_ended("cu_loop");
    if elf.file_mapped {
        // Decoding is over: the function phase reads only `.BTF_ids` again.
        release_pages(data);
    }
    // So is string interning by .debug_str offset: free it before the
    // function phase grows the BTF to its largest.
    m.str_cache = Arc::new(strcache::StrCache::empty());
    m.tail_strs = hashbrown::HashMap::new();
    drop(str_cache);
    // the workers' freed decode buffers (a vmlinux's, not a module's)
    crate::heap::release_free_after(elf.debug.info.len());
    if m.summary.cus_encoded == 0 {
        return Err(EncodeError::Nothing {
            path: path.to_path_buf(),
            msg: "nothing to encode: no compile unit is left after the language filters".into(),
        });
    }
    if !opts.no_funcs {
        m.emit_funcs(elf, data, &opts.features, opts.verbose)
            .map_err(|e| input_err(e.to_string()))?;
    }
    m.finish_datasecs(elf).map_err(|msg| EncodeError::Unsupported {
        path: path.to_path_buf(),
        msg,
    })?;
    // Functions and DATASECs come after the last CU's check.
    m.check_limits(0, 0).map_err(|msg| EncodeError::Unsupported {
        path: path.to_path_buf(),
        msg,
    })?;
    if let Some(cu) = m.shifted_cu {
        in_pool(&pool, || m.btf.build_offsets());
        m.check_refs_in_range(cu).map_err(|msg| EncodeError::Unsupported {
            path: path.to_path_buf(),
            msg,
        })?;
    }
    if !opts.keep_offsets_deferred {
        // in parallel, in the run's thread pool
        in_pool(&pool, || m.btf.build_offsets());
    }
    m.btf.shrink_to_fit();
    phase_ended("functions");
    let summary = m.summary.clone();
    Ok(Encoded { btf: m.btf, summary })
}

/// The merge's rewrite of one of a CU's records: string ids through `map`,
/// type ids but void shifted by `off`. The fields are those of
/// [`Btf::str_ref_positions`] and [`Btf::type_ref_positions`], in one pass
/// whose entry loops go over chunks (through the two position visitors it
/// was 1.5 % of a vmlinux encode, on the merging thread).
#[inline]
fn relocate(r: &mut [u32], map: &[u32], off: u32) {
    let shift = |x: &mut u32| {
        if *x != 0 {
            *x = x.wrapping_add(off)
        }
    };
    r[0] = map[r[0] as usize];
    let vlen = (r[1] & 0xffff) as usize;
    match Kind::from_u8(((r[1] >> 24) & 0x1f) as u8).unwrap_or(Kind::Unkn) {
        Kind::Ptr
        | Kind::Typedef
        | Kind::Volatile
        | Kind::Const
        | Kind::Restrict
        | Kind::Func
        | Kind::Var
        | Kind::DeclTag
        | Kind::TypeTag => shift(&mut r[2]),
        Kind::Array => {
            shift(&mut r[3]);
            shift(&mut r[4]);
        }
        Kind::Struct | Kind::Union => {
            for m in r[3..3 + 3 * vlen].chunks_exact_mut(3) {
                m[0] = map[m[0] as usize];
                shift(&mut m[1]);
            }
        }
        Kind::Enum => r[3..3 + 2 * vlen]
            .chunks_exact_mut(2)
            .for_each(|e| e[0] = map[e[0] as usize]),
        Kind::Enum64 => r[3..3 + 3 * vlen]
            .chunks_exact_mut(3)
            .for_each(|e| e[0] = map[e[0] as usize]),
        Kind::FuncProto => {
            shift(&mut r[2]);
            for p in r[3..3 + 2 * vlen].chunks_exact_mut(2) {
                p[0] = map[p[0] as usize];
                shift(&mut p[1]);
            }
        }
        Kind::Datasec => r[3..3 + 3 * vlen].chunks_exact_mut(3).for_each(|v| shift(&mut v[0])),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn relocate_rewrites_what_the_position_visitors_list() {
        use super::*;
        let info = |k: Kind, vlen: u32| make_info(k, false, vlen);
        let recs: Vec<Vec<u32>> = vec![
            vec![1, info(Kind::Int, 0), 4, 32],
            vec![2, info(Kind::Ptr, 0), 3],
            vec![0, info(Kind::Const, 0), 0],
            vec![1, info(Kind::Array, 0), 0, 5, 0, 3],
            vec![3, info(Kind::Struct, 3), 8, 1, 2, 0, 2, 0, 32, 3, 6, 64],
            vec![1, info(Kind::Union, 0), 0],
            vec![1, info(Kind::Enum, 2), 4, 2, 0, 3, 1],
            vec![1, info(Kind::Enum64, 1), 8, 2, 0, 0],
            vec![0, info(Kind::FuncProto, 2), 4, 1, 12, 0, 0],
            vec![3, info(Kind::Datasec, 2), 8, 13, 0, 4, 0, 4, 4],
            vec![1, info(Kind::Var, 0), 10, 1],
            vec![2, info(Kind::DeclTag, 0), 14, 0],
            vec![1, info(Kind::Fwd, 0), 0],
        ];
        let map = [0u32, 100, 200, 300];
        for r in &recs {
            let mut want = r.clone();
            Btf::for_each_str_ref_mut(&mut want, |x| *x = map[*x as usize]);
            Btf::for_each_type_ref_mut(&mut want, |x| {
                if *x != 0 {
                    *x = x.wrapping_add(7)
                }
            });
            let mut got = r.clone();
            relocate(&mut got, &map, 7);
            assert_eq!(got, want, "{r:?}");
        }
    }

    use super::*;

    fn merger() -> Merger {
        Merger {
            max_types: MAX_TYPES,
            shifted_cu: None,
            btf: Btf::new(btf::Endian::Little),
            has_index: false,
            index: 0,
            datasecs: BTreeMap::new(),
            map: Vec::new(),
            str_cache: Arc::new(strcache::StrCache::empty()),
            tail_strs: hashbrown::HashMap::new(),
            scratch: Vec::new(),
            summary: Summary::default(),
            funcs: FuncStates::default(),
        }
    }

    /// A CU of records (names are local string ids, refs core ids).
    fn cu(records: Vec<Vec<u32>>, strs: Vec<&'static [u8]>, int_core: Option<u32>, nslots: u32) -> CuOut<'static> {
        let mut words = Vec::new();
        let mut offs = Vec::new();
        let mut has_arrays = false;
        for r in &records {
            offs.push(words.len() as u32);
            has_arrays |= (r[1] >> 24) & 0x1f == Kind::Array as u32;
            words.extend_from_slice(r);
        }
        let n = strs.len() as u32;
        CuOut {
            words,
            offs,
            n_types: records.len(),
            has_arrays,
            strs_off: vec![dwarf::NONE; strs.len()],
            strs_known: vec![0; strs.len()],
            strs,
            strs_in_types: n,
            int_core,
            nslots,
            shifted_ids: false,
            cu_offset: 0,
            vars: vec![],
            funcs: FuncStates::default(),
        }
    }

    fn arr(elem: u32, n: u32) -> Vec<u32> {
        vec![0, make_info(Kind::Array, false, 0), 0, elem, 0, n]
    }
    fn int(name: u32, size: u32) -> Vec<u32> {
        vec![name, make_info(Kind::Int, false, 0), size, size * 8]
    }

    #[test]
    fn index_type_is_decided_once_and_synthesized_when_missing() {
        let mut m = merger();
        // CU 1: char + char[4], no `int`: arrays use id off+N = 3, an `int` is appended there.
        m.merge(cu(vec![int(1, 1), arr(1, 4)], vec![b"char"], None, 3)).unwrap();
        assert_eq!(m.btf.type_count(), 3);
        assert_eq!(m.btf.ty(TypeId(2)).array(), (TypeId(1), TypeId(3), 4));
        assert_eq!(m.btf.name(m.btf.ty(TypeId(3)).name_off()), "int");
        // CU 2 has its own `int`, but the index stays id 3.
        m.merge(cu(vec![int(1, 4), arr(1, 2)], vec![b"int"], Some(1), 3))
            .unwrap();
        assert_eq!(m.btf.ty(TypeId(5)).array(), (TypeId(4), TypeId(3), 2));
        // Strings: first use order, "int" not duplicated.
        assert_eq!(m.btf.raw_strings(), b"\0char\0int\0");
    }

    #[test]
    fn more_types_than_the_format_allows_is_an_error_before_any_id_is_given() {
        let mut m = merger();
        m.max_types = 5;
        m.merge(cu(vec![int(1, 4), int(1, 4)], vec![b"int"], Some(1), 2))
            .unwrap();
        // 2 + 3, +1 for an `int` arrays may need: refused whole.
        let e = m
            .merge(cu(vec![int(1, 4), int(1, 4), int(1, 4)], vec![b"int"], Some(1), 3))
            .unwrap_err();
        assert_eq!(e, "6 types: more than BTF's 5 (type ids are 31-bit)");
        assert_eq!(m.btf.type_count(), 2, "nothing of a refused CU is kept");
        m.merge(cu(vec![int(1, 4), int(1, 4)], vec![b"int"], Some(1), 2))
            .unwrap();
        assert_eq!(m.btf.type_count(), 4);
        // The final check (functions and DATASECs are added after the CUs).
        assert!(m.check_limits(1, 0).is_ok());
        assert!(m.check_limits(2, 0).unwrap_err().starts_with("6 types"));
        // The type section's length is 32-bit too.
        let e = m.check_limits(0, (u32::MAX / 4) as usize).unwrap_err();
        assert_eq!(
            e,
            format!(
                "type section of {} bytes: more than BTF's 32-bit length",
                64 + 4 * (u32::MAX as u64 / 4)
            )
        );
        // The real limit is libbpf's BTF_MAX_NR_TYPES.
        assert_eq!(MAX_TYPES, 0x7fff_ffff);
    }

    #[test]
    fn a_cu_with_int_decides_the_index_before_any_array() {
        let mut m = merger();
        m.merge(cu(vec![int(1, 4)], vec![b"int"], Some(1), 2)).unwrap();
        m.merge(cu(vec![int(1, 1), arr(1, 8)], vec![b"char"], None, 3)).unwrap();
        assert_eq!(m.btf.type_count(), 3);
        assert_eq!(m.btf.ty(TypeId(3)).array(), (TypeId(2), TypeId(1), 8));
    }

    #[test]
    fn shifted_ids_are_refused_only_when_they_leave_the_btf() {
        let ptr = |to: u32| vec![0, make_info(Kind::Ptr, false, 0), to];
        // Core ids 1 (an unspecified type: no record), 2 int, 3 pointer to
        // core 2: the records are int, ptr -> 2 (the int is type 1 now).
        let mut shifted = cu(vec![int(1, 4), ptr(2)], vec![b"int"], Some(2), 4);
        shifted.shifted_ids = true;
        let mut m = merger();
        m.merge(shifted).unwrap();
        assert_eq!(m.shifted_cu, Some(0));
        // type 2 -> 2 stays inside the BTF: the reference's bytes, accepted
        assert!(m.check_refs_in_range(0).is_ok());
        // a pointer to core 3 would be type 3, past the last: refused
        let mut past = cu(vec![int(1, 4), ptr(3)], vec![b"int"], Some(2), 4);
        past.shifted_ids = true;
        let mut m = merger();
        m.merge(past).unwrap();
        let e = m.check_refs_in_range(0).unwrap_err();
        assert!(
            e.contains("type [2] refers to type 3") && e.contains("DW_TAG_unspecified_type"),
            "{e}"
        );
    }
}
