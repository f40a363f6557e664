//! Command-line front end: parses flags into a plan, runs it, maps the
//! outcome to an exit code. Library errors get their context here.

/// `println!` that returns a failed write as an error instead of
/// panicking: [`StdoutError`], which [`finish`] turns into a quiet exit 0
/// for a closed pipe and the one-line error (exit 2) otherwise.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($t)*).map_err($crate::cli::StdoutError)?
    }};
}

/// Writes `text` (whole lines, already rendered) to standard output.
fn print_text(text: &str) -> Result<(), StdoutError> {
    use std::io::Write as _;
    std::io::stdout().lock().write_all(text.as_bytes()).map_err(StdoutError)
}

mod args;
mod batch;
mod conformance;
mod core;
mod dedup;
mod diff;
mod encode;
mod inspect;
mod kernel;
mod man;
mod pahole;
mod report;
pub mod stats;

use clap::{Parser, Subcommand};

/// Exit code for success.
pub const EXIT_OK: i32 = 0;
/// Exit code for a negative answer (differences found, BTF refused).
pub const EXIT_NO: i32 = 1;
/// Exit code for an error (bad input, unsupported construct, usage, I/O).
pub const EXIT_ERR: i32 = 2;

#[derive(Parser)]
#[command(name = "btfkit", version, about = "DWARF to BTF encoder and BTF inspection tools", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every type of a BTF file (raw BTF or an ELF with .BTF).
    Dump(inspect::DumpArgs),
    /// Count types per kind and bytes per section of a BTF file.
    Stats(inspect::StatsArgs),
    /// Ask the running kernel (bpf(BPF_BTF_LOAD)) whether it accepts a BTF file.
    Verify(inspect::VerifyArgs),
    /// Encode the DWARF of an ELF file as BTF (without INPUT: the sample in data/, summary only).
    Encode(encode::Args),
    /// pahole-compatible front end: `btfkit pahole -J --btf_encode_detached=OUT … INPUT`.
    Pahole(pahole::Args),
    /// Encode a kernel (vmlinux, then every module over it) into a directory, with a resumable
    /// report; or one shard of a list of kernels (--list, --shard).
    Kernel(kernel::Args),
    /// Merge and check the reports of `btfkit kernel` runs; exit 1 if anything is missing or failed.
    Report(report::Args),
    /// Replay the conformance corpus (manifest.tsv) and report byte-identical cases per profile.
    Conformance(conformance::Args),
    /// CO-RE: check whether BPF objects' relocations resolve on kernels (`btfkit core check`).
    Core(core::Args),
    /// Compare two BTF files semantically (ids, order and string layout ignored); exit 1 if they differ.
    Diff(diff::Args),
    /// Deduplicate a BTF file exactly as libbpf's btf__dedup does.
    Dedup(dedup::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Print a manual page (roff): btfkit(1), or a subcommand's (`btfkit man encode`);
    /// `--dir DIR` writes them all.
    Man(man::Args),
}

/// An error and its causes on one line (causes already quoted by the
/// message are not repeated).
pub fn one_line(e: &anyhow::Error) -> String {
    btfkit::error::one_line(e.as_ref())
}

/// Prints an error in the one-line form every subcommand uses.
pub fn report(e: &anyhow::Error) {
    eprintln!("btfkit: error: {}", one_line(e));
}

/// True when the program was started under a name starting with `pahole`
/// (a symlink the kernel build finds on its PATH, or `make
/// PAHOLE=pahole-btfkit`).
fn invoked_as_pahole() -> bool {
    std::env::args_os()
        .next()
        .and_then(|a0| {
            std::path::Path::new(&a0)
                .file_name()
                .map(|n| n.to_string_lossy().starts_with("pahole"))
        })
        .unwrap_or(false)
}

pub fn run() -> i32 {
    if invoked_as_pahole() {
        let args = std::env::args_os()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return finish(pahole::run(pahole::Args { args }));
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // --help and --version: clap's text on stdout.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return EXIT_OK;
        }
        // `btfkit` alone, or a command that needs a subcommand: the usage,
        // which is not an error message (but no job was done: exit 2).
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return EXIT_ERR;
        }
        // A usage error: the one-line form first, clap's usage after it.
        Err(e) => {
            let text = e.render().to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or_default();
            eprintln!("btfkit: error: {}", first.strip_prefix("error: ").unwrap_or(first));
            lines.for_each(|l| eprintln!("{l}"));
            return EXIT_ERR;
        }
    };
    let res = match cli.cmd {
        Cmd::Dump(a) => inspect::dump(a),
        Cmd::Stats(a) => inspect::stats(a),
        Cmd::Verify(a) => inspect::verify(a),
        Cmd::Conformance(a) => conformance::run(a),
        Cmd::Diff(a) => diff::run(a),
        Cmd::Core(a) => core::run(a),
        Cmd::Encode(a) => encode::run(a),
        Cmd::Pahole(a) => pahole::run(a),
        Cmd::Kernel(a) => kernel::run(a),
        Cmd::Report(a) => report::run(a),
        Cmd::Dedup(a) => dedup::run(a),
        Cmd::Completions { shell } => completions(shell),
        Cmd::Man(a) => man::run(a),
    };
    finish(res)
}

/// The completion script for `shell`, generated from the command definitions.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    use clap::CommandFactory;
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "btfkit", &mut buf);
    write_stdout(&buf)
}

fn write_stdout(bytes: &[u8]) -> anyhow::Result<i32> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|_| out.flush()).map_err(StdoutError)?;
    Ok(EXIT_OK)
}

/// A write to standard output that failed.
#[derive(Debug)]
pub struct StdoutError(pub std::io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

fn finish(res: anyhow::Result<i32>) -> i32 {
    match res {
        Ok(code) => code,
        // Whoever read our output stopped reading (`| head`): not an error,
        // as for any Unix filter.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<StdoutError>()
                    .is_some_and(|s| s.0.kind() == std::io::ErrorKind::BrokenPipe)
                    || matches!(c.downcast_ref::<btfkit::Error>(), Some(btfkit::Error::StdoutClosed))
                    || matches!(
                        c.downcast_ref::<btfkit::pipeline::Error>(),
                        Some(btfkit::pipeline::Error::Output(btfkit::Error::StdoutClosed))
                    )
            }) =>
        {
            EXIT_OK
        }
        Err(e) => {
            report(&e);
            EXIT_ERR
        }
    }
}
