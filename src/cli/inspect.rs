//! `dump`, `stats` and `verify`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use btfkit::btf::{self, Btf, Kind, cdump, dump};
use btfkit::verify::{self, Verdict};

use super::args::{base_for, load_base};
use super::{EXIT_ERR, EXIT_NO, EXIT_OK};

#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum DumpFormat {
    /// One line per type (plus one per member), as `bpftool btf dump format raw`.
    #[default]
    Raw,
    /// A JSON document `{"types": [...]}`.
    Json,
    /// A compilable C header (vmlinux.h), as `bpftool btf dump format c`;
    /// with --base, base types are included.
    C,
}

#[derive(clap::Args)]
pub struct DumpArgs {
    /// Raw BTF file, or an ELF file with a .BTF section.
    pub file: PathBuf,
    /// Base BTF (raw or ELF) when FILE is split BTF; raw and json print only FILE's own
    /// types, the C header holds the base types too (it must compile on its own).
    #[arg(long, short = 'B')]
    pub base: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: DumpFormat,
    /// Only these types and what they need, in any format (repeatable or
    /// comma separated; `struct X`, `union X`, `enum X` pick the kind). An
    /// unknown name is an error that suggests the closest ones.
    #[arg(long, value_delimiter = ',')]
    pub filter: Vec<String>,
    /// With --format c: add mode(byte)/mode(word) to 1- and 8-byte enums so
    /// structs holding them keep their BTF layout (newer libbpf does this;
    /// bpftool 7.1.0, whose output is otherwise reproduced, does not).
    #[arg(long)]
    pub enum_sizes: bool,
    /// With --format c: which bpftool to write as. Default: bpftool-7.8 (2026) for BTF
    /// in the 2026 format (32-byte header), else bpftool-7.1. bpftool-7.8 sorts the types
    /// (bpftool-7.8-unsorted: by id, its `format c unsorted`) and declares the kfuncs.
    #[arg(long, value_enum)]
    pub c_style: Option<CStyle>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CStyle {
    #[value(name = "bpftool-7.1")]
    Bpftool71,
    #[value(name = "bpftool-7.8")]
    Bpftool78,
    #[value(name = "bpftool-7.8-unsorted")]
    Bpftool78Unsorted,
}

pub fn dump(a: DumpArgs) -> anyhow::Result<i32> {
    let base = load_base(&base_for(&a.file, &a.base))?;
    let b = btfkit::elf::load_btf(&a.file, base)?;
    if a.enum_sizes && !matches!(a.format, DumpFormat::C) {
        anyhow::bail!("--enum-sizes only applies to --format c");
    }
    if a.c_style.is_some() && !matches!(a.format, DumpFormat::C) {
        anyhow::bail!("--c-style only applies to --format c");
    }
    // --filter for raw and json: the named types and every type they need, in id order.
    let roots = |b: &btf::Btf| -> anyhow::Result<Vec<btf::TypeId>> {
        let mut roots = Vec::new();
        for name in &a.filter {
            roots.extend(cdump::ids_named(b, name).with_context(|| a.file.display().to_string())?);
        }
        Ok(roots)
    };
    let needed = if a.filter.is_empty() || matches!(a.format, DumpFormat::C) {
        None
    } else {
        Some(btf::needed_by(&b, &roots(&b)?))
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let r = match a.format {
        DumpFormat::Raw => match &needed {
            None => dump::write_raw(&mut out, &b),
            Some(ids) => ids.iter().try_for_each(|&id| {
                dump::write_raw_type(&mut out, &b, id, b.ty(id))?;
                out.write_all(b"\n")
            }),
        },
        DumpFormat::Json => match &needed {
            None => dump::write_json(&mut out, &b),
            Some(ids) => dump::write_json_ids(&mut out, &b, ids.iter().copied()),
        },
        DumpFormat::C => {
            let style = match a.c_style {
                Some(CStyle::Bpftool71) => cdump::Style::Bpftool71,
                Some(CStyle::Bpftool78) => cdump::Style::Bpftool78 { sorted: true },
                Some(CStyle::Bpftool78Unsorted) => cdump::Style::Bpftool78 { sorted: false },
                // (a bpftool that reads the 2026 header is one of 2026)
                None if b.format().has_layout_fields() => cdump::Style::Bpftool78 { sorted: true },
                None => cdump::Style::Bpftool71,
            };
            let opts = cdump::Options {
                enum_sizes: a.enum_sizes,
                style,
            };
            let header = if a.filter.is_empty() {
                cdump::render(&b, None, opts)
            } else {
                let mut roots = Vec::new();
                for name in &a.filter {
                    roots.extend(cdump::ids_named(&b, name).with_context(|| a.file.display().to_string())?);
                }
                cdump::render(&b, Some(&roots), opts)
            };
            let header = header.with_context(|| format!("{}: cannot render as C", a.file.display()))?;
            out.write_all(&header)
        }
    };
    match r.and_then(|_| out.flush()) {
        Ok(()) => Ok(EXIT_OK),
        // A closed pipe (`| head`) is not an error worth reporting.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(EXIT_OK),
        Err(e) => Err(e).context("writing to standard output"),
    }
}

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Raw BTF file, or an ELF file with a .BTF section.
    pub file: PathBuf,
    /// Base BTF when FILE is split BTF; only FILE's own types are counted.
    #[arg(long, short = 'B')]
    pub base: Option<PathBuf>,
    /// Print a JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also list what the kernel's stricter rules (names, the kinds' field
    /// rules, member layout, DATASEC order) would object to; the reader
    /// accepts such files.
    #[arg(long)]
    pub warnings: bool,
    /// With --warnings: exit 1 when there is any (a CI gate).
    #[arg(long, requires = "warnings")]
    pub deny_warnings: bool,
}

pub struct Stats {
    /// Kind name (`KIND_<n>` for one this crate does not know), count, bytes.
    pub per_kind: Vec<(String, u64, u64)>,
    pub types: u64,
    pub type_bytes: u64,
    pub str_bytes: u64,
    /// Header and layout section (BTF 2026 has a 32-byte header).
    pub hdr_bytes: u64,
    pub layout_bytes: u64,
}

pub fn compute_stats(b: &Btf) -> Stats {
    let limit = btf::KIND_LIMIT as usize + 1;
    let mut count = vec![0u64; limit];
    let mut bytes = vec![0u64; limit];
    for id in b.own_ids() {
        let t = b.ty(id);
        let k = btf::Info(t.info()).kind() as usize;
        count[k] += 1;
        bytes[k] += t.words.len() as u64 * 4;
    }
    let per_kind = (1..limit)
        .filter(|&k| count[k] > 0)
        .map(|k| {
            let name = match Kind::from_u8(k as u8).filter(|_| k <= btf::KIND_MAX as usize) {
                Some(kind) => kind.name().to_string(),
                None => format!("KIND_{k}"),
            };
            (name, count[k], bytes[k])
        })
        .collect();
    Stats {
        per_kind,
        types: b.own_type_count() as u64,
        type_bytes: b.type_section_len() as u64,
        str_bytes: b.raw_strings().len() as u64,
        hdr_bytes: b.format().hdr_len() as u64,
        layout_bytes: b.format().layout().map_or(0, |l| l.byte_len()) as u64,
    }
}

pub fn stats(a: StatsArgs) -> anyhow::Result<i32> {
    let base = load_base(&base_for(&a.file, &a.base))?;
    let b = btfkit::elf::load_btf(&a.file, base)?;
    let s = compute_stats(&b);
    let total = s.hdr_bytes + s.type_bytes + s.layout_bytes + s.str_bytes;
    let warnings = if a.warnings {
        btf::lint::kernel_warnings(&b)
    } else {
        Vec::new()
    };
    if a.json {
        let kinds: serde_json::Map<String, serde_json::Value> = s
            .per_kind
            .iter()
            .map(|(k, n, by)| (k.clone(), serde_json::json!({"count": n, "bytes": by})))
            .collect();
        let v = serde_json::json!({
            "file": a.file.display().to_string(),
            "endian": format!("{:?}", b.endian()).to_lowercase(),
            "first_id": b.start_id(),
            "types": s.types,
            "kinds": kinds,
            "header_bytes": s.hdr_bytes,
            "type_bytes": s.type_bytes,
            "layout_bytes": s.layout_bytes,
            "string_bytes": s.str_bytes,
            "total_bytes": total,
        });
        let mut v = v;
        if a.warnings {
            v["warnings"] = warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>().into();
        }
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        out!(
            "{}: {} types (ids {}..={}), {:?}-endian",
            a.file.display(),
            s.types,
            b.start_id(),
            b.type_count(),
            b.endian()
        );
        out!("{:<12} {:>10} {:>12}", "kind", "count", "bytes");
        for (k, n, by) in &s.per_kind {
            out!("{:<12} {:>10} {:>12}", k, n, by);
        }
        out!("{:<12} {:>10} {:>12}", "header", "", s.hdr_bytes);
        out!("{:<12} {:>10} {:>12}", "types", s.types, s.type_bytes);
        if s.layout_bytes > 0 {
            out!("{:<12} {:>10} {:>12}", "layout", "", s.layout_bytes);
        }
        out!("{:<12} {:>10} {:>12}", "strings", "", s.str_bytes);
        out!("{:<12} {:>10} {:>12}", "total", "", total);
        if a.warnings {
            out!("{} kernel-rule warnings", warnings.len());
            for w in &warnings {
                out!("warning: {w}");
            }
        }
    }
    if a.deny_warnings && !warnings.is_empty() {
        return Ok(EXIT_NO);
    }
    Ok(EXIT_OK)
}

/// The kernel's BTF checker's common refusals (the end of the last log
/// line), in plain words.
const REFUSALS: &[(&str, &str)] = &[
    (
        "Invalid arg#",
        "a function prototype has a parameter of type void; void is only allowed as the last, unnamed parameter (`...`). The reference writes such prototypes where a type was lost (DWARF type units)",
    ),
    (
        "Invalid elem",
        "an array's element type is void or not a type the kernel accepts in an array",
    ),
    ("Invalid index", "an array's index type is void or not an integer"),
    (
        "Unsupported btf_header",
        "the header is longer than this kernel reads: BTF 2026's 32 bytes (layout_off, layout_len), read by kernels from 7.1; the v1.31 reference writes the 24-byte header older kernels take",
    ),
    (
        "Invalid name",
        "a name is not a valid C identifier (C++ templates and methods, Rust paths, `$`)",
    ),
    (
        "Member exceeds struct_size",
        "a member reaches past the end of its struct (a 32-bit target's BTF, or a wrong member offset)",
    ),
    ("Invalid member bitfield_size", "a bitfield is wider than its type"),
    (
        "Invalid btf_info kind_flag",
        "kind_flag is set on a kind that has none in this kernel (BTF newer than the kernel)",
    ),
    (
        "Invalid kind",
        "a BTF kind this kernel does not know (BTF newer than the kernel)",
    ),
    (
        "Invalid type_id",
        "a reference to a type id that does not exist, or to a type of the wrong kind",
    ),
    (
        "Loop detected",
        "a reference loop: a type that, through typedefs and modifiers, refers to itself",
    ),
    ("vlen != 0", "a kind without members has a member count"),
    (
        "Invalid offset",
        "DATASEC entries overlap, are out of order, or lie outside the section",
    ),
    (
        "Invalid linkage",
        "a FUNC or VAR with a linkage this kernel does not accept",
    ),
    ("nr_bits exceeds type_size", "an INT's bits do not fit in its size"),
    (
        "Unsupported size",
        "a type of a size the kernel does not accept for its kind",
    ),
    (
        "size == 0",
        "a DATASEC or struct of size 0 (a BPF object's sections before libbpf sizes them)",
    ),
    ("Invalid magic", "not BTF (wrong magic), or BTF of the other byte order"),
    (
        "Total section length too long",
        "the BTF is larger than this kernel accepts (16 MiB for a split, 4 GiB overall)",
    ),
];

/// [`REFUSALS`]' words for a verifier log line, if it is one of them.
fn explain_refusal(line: &str) -> Option<&'static str> {
    REFUSALS
        .iter()
        .find(|(msg, _)| line.contains(msg))
        .map(|(_, plain)| *plain)
}

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Raw BTF file, or an ELF file with a .BTF section (and optionally .BTF.base).
    pub file: PathBuf,
    /// Base BTF when FILE is split BTF: base and split are loaded merged into one blob.
    #[arg(long, short = 'B')]
    pub base: Option<PathBuf>,
}

pub fn verify(a: VerifyArgs) -> anyhow::Result<i32> {
    let base = load_base(&base_for(&a.file, &a.base))?;
    let verify::Payload {
        bytes: payload,
        own_len,
        reader_refused,
    } = verify::payload(&a.file, base)?;
    let size = if payload.len() == own_len {
        format!("{own_len} bytes")
    } else {
        format!("{own_len} bytes; {} loaded merged with its base", payload.len())
    };
    // Both verdicts, where they could differ: the kernel's, which is asked
    // all the same, and btfkit's reader's.
    let reader = || -> anyhow::Result<()> {
        if let Some(e) = &reader_refused {
            out!("btfkit's reader refuses it: {e}");
        }
        Ok(())
    };
    match verify::verify_bytes(&payload) {
        Verdict::Accepted => {
            out!("{}: accepted by the kernel ({size})", a.file.display());
            reader()?;
            Ok(EXIT_OK)
        }
        Verdict::Refused { errno, log } => {
            out!(
                "{}: refused by the kernel ({}); verifier log ends:\n{}",
                a.file.display(),
                std::io::Error::from_raw_os_error(errno),
                log
            );
            let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
            if let Some(plain) = explain_refusal(last) {
                out!("in plain words: {plain}");
            }
            reader()?;
            let base = load_base(&base_for(&a.file, &a.base))?;
            if btfkit::elf::load_btf(&a.file, base).is_ok_and(|b| {
                b.own_ids().any(|id| {
                    let t = b.ty(id);
                    t.kind() == btf::Kind::Datasec && t.size() == 0
                })
            }) {
                out!(
                    "note: a DATASEC of size 0: this looks like the BTF of a BPF object as clang writes it; libbpf \
                     fills in DATASEC sizes and offsets when it loads the object, so such BTF is not meant to be \
                     loaded as it is"
                );
            }
            if log.contains("Member exceeds struct_size") {
                let base = load_base(&base_for(&a.file, &a.base))?;
                if btfkit::elf::load_btf(&a.file, base).is_ok_and(|b| btf::lint::looks_32bit(&b)) {
                    out!(
                        "note: this BTF describes a 32-bit target (its structs fit 4-byte pointers); this 64-bit kernel \
                         measures pointers as 8 bytes, so it refuses every struct holding one. Load it on a 32-bit kernel."
                    );
                }
            }
            Ok(EXIT_NO)
        }
        Verdict::CannotAsk(why) => {
            match &reader_refused {
                Some(e) => eprintln!(
                    "btfkit: error: {}: cannot ask the kernel: {why}; btfkit's reader refuses it: {e}",
                    a.file.display()
                ),
                None => eprintln!("btfkit: error: {}: cannot ask the kernel: {why}", a.file.display()),
            }
            Ok(EXIT_ERR)
        }
    }
}
