//! `btfkit dedup IN -o OUT [--base BASE] [--strings=keep|dedup] [--libbpf 374f7807|1.8] [-j N]`:
//! libbpf's `btf__dedup` on a BTF file.

use std::path::PathBuf;

use anyhow::Context;
use btfkit::dedup::{self, Options, StringMode};

use super::EXIT_OK;
use super::args::load_base;

#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum Strings {
    /// Leave the string section byte-identical (BTF built by an encoder, as pahole does).
    #[default]
    Keep,
    /// libbpf's string pass for BTF parsed from bytes: only referenced strings, first-reference order.
    Dedup,
}

#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum Libbpf {
    /// libbpf 374f7807, pahole v1.31's.
    #[default]
    #[value(name = "374f7807")]
    V374f7807,
    /// libbpf v1.8.0, the newer pahole's: typedefs deduplicated with structs, wider identity checks.
    #[value(name = "1.8")]
    V1_8,
}

#[derive(clap::Args)]
pub struct Args {
    /// Raw BTF file, or an ELF file with a .BTF section.
    pub input: PathBuf,
    /// Output raw BTF file (split BTF when --base is given).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// Base BTF (raw or ELF) when INPUT is split BTF.
    #[arg(long, short = 'B')]
    pub base: Option<PathBuf>,
    /// What happens to the string section.
    #[arg(long, value_enum, default_value_t)]
    pub strings: Strings,
    /// Whose dedup to reproduce.
    #[arg(long, value_enum, default_value_t)]
    pub libbpf: Libbpf,
    /// Print phase timings to stderr.
    #[arg(long)]
    pub timings: bool,
    /// Threads (default: all cores): the layout, the FWD pass, the final
    /// links and, without a base, the reference pass use them; the output
    /// is the same at any count.
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    btfkit::pipeline::size_global_pool(super::args::jobs_arg(a.jobs)?);
    let base = load_base(&a.base)?;
    let btf = btfkit::elf::load_btf(&a.input, base)?;
    let opts = Options {
        strings: match a.strings {
            Strings::Keep => StringMode::Keep,
            Strings::Dedup => StringMode::Dedup,
        },
        timings: a.timings,
        // load_btf parsed it: ids are known to be in range
        ids_checked: true,
        base_index: None,
        rules: match a.libbpf {
            Libbpf::V374f7807 => dedup::Rules::Libbpf374f7807,
            Libbpf::V1_8 => dedup::Rules::Libbpf1_8,
        },
    };
    let out = dedup::dedup(&btf, &opts).with_context(|| format!("{}: dedup failed", a.input.display()))?;
    let bytes = btfkit::btf::write::to_bytes(&out);
    btfkit::output::write_output(&a.output, |w| std::io::Write::write_all(w, &bytes))?;
    Ok(EXIT_OK)
}
