//! `btfkit man`: manual pages generated from the command definitions, one
//! for btfkit and one for each subcommand (btfkit-encode(1), …), each with
//! every option, the exit codes and examples.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use super::{Cli, write_stdout};

#[derive(clap::Args)]
pub struct Args {
    /// The page of this subcommand (default: btfkit(1) itself).
    pub command: Option<String>,
    /// Write every page (btfkit.1, btfkit-encode.1, …) into this directory instead.
    #[arg(long, conflicts_with = "command")]
    pub dir: Option<PathBuf>,
}

/// Examples per page: (command line, what it does).
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "core",
        &[
            (
                "btfkit core check prog.bpf.o -t /sys/kernel/btf",
                "will prog.bpf.o load on the running kernel (modules included)?",
            ),
            (
                "btfkit core check *.bpf.o -t btfhub-archive/ --json > result.json",
                "every object against every kernel of a BTFHub tree, as JSON for CI",
            ),
            (
                "btfkit core check *.bpf.o -t archive.list --shard 3/16 --out-dir out/ && btfkit report out/",
                "one shard of sixteen written to out/core-check-3-of-16.json; report merges all shards into one matrix",
            ),
            (
                "btfkit core min --archive btfhub-archive/ --out-dir min/ --bundle min.tar.xz *.bpf.o",
                "minimal BTF for the objects on every kernel of a BTFHub tree, with a report and one bundle",
            ),
        ],
    ),
    (
        "btfkit",
        &[
            (
                "btfkit encode vmlinux -o vmlinux.btf",
                "encode a kernel's DWARF as pahole -J does",
            ),
            (
                "btfkit dump vmlinux.btf --format c > vmlinux.h",
                "a C header for BPF programs",
            ),
            (
                "btfkit man --dir /usr/local/share/man/man1",
                "install every manual page",
            ),
        ],
    ),
    (
        "encode",
        &[
            ("btfkit encode vmlinux -o vmlinux.btf", "standalone BTF, deduplicated"),
            (
                "btfkit encode fou.ko --base vmlinux.btf -o fou.btf",
                "a module's split BTF over its kernel's",
            ),
            (
                "btfkit encode --base vmlinux.btf --out-dir btf/ /lib/modules/$(uname -r)/kernel",
                "every module under a directory, N at a time",
            ),
            (
                "btfkit encode - -o out.btf < prog.o",
                "an object read from standard input",
            ),
        ],
    ),
    (
        "pahole",
        &[
            (
                "btfkit pahole -J --btf_encode_detached=vmlinux.btf vmlinux",
                "the reference's command line",
            ),
            (
                "btfkit pahole -J --btf_base vmlinux fou.ko",
                "write .BTF into the module, as the kernel build does",
            ),
        ],
    ),
    (
        "kernel",
        &[
            (
                "btfkit kernel linux-image-6.12-amd64-dbg.deb --out-dir out/",
                "a whole distribution kernel from its debug package",
            ),
            (
                "btfkit kernel --list kernels.txt --out-dir out/ --shard 3/16",
                "one shard of an archive",
            ),
        ],
    ),
    (
        "report",
        &[
            ("btfkit report out/", "merge and check the shards' reports"),
            (
                "btfkit report core-out/ --json",
                "the shards of a `core check --out-dir` run as one CO-RE matrix, in JSON",
            ),
        ],
    ),
    (
        "dump",
        &[
            (
                "btfkit dump /sys/kernel/btf/vmlinux --format c",
                "the running kernel's vmlinux.h",
            ),
            (
                "btfkit dump fou.btf -B vmlinux.btf --filter fou_cfg",
                "one type of a module and what it needs",
            ),
        ],
    ),
    (
        "stats",
        &[(
            "btfkit stats vmlinux.btf --warnings",
            "counts, and what the kernel would refuse",
        )],
    ),
    (
        "verify",
        &[("btfkit verify fou.btf -B vmlinux.btf", "ask the running kernel")],
    ),
    (
        "diff",
        &[(
            "btfkit diff old.btf new.btf --json",
            "what changed, ids and order ignored",
        )],
    ),
    ("dedup", &[("btfkit dedup in.btf -o out.btf", "libbpf's btf__dedup")]),
    (
        "conformance",
        &[(
            "btfkit conformance --check-floor tests/conformance-floor.tsv",
            "replay the corpus; exit 1 on a regression",
        )],
    ),
    (
        "completions",
        &[("btfkit completions bash > /etc/bash_completion.d/btfkit", "")],
    ),
    ("man", &[("btfkit man encode | man -l -", "read one page")]),
];

/// The exit codes every subcommand uses (README.md, "Exit codes").
const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "success"),
    (
        "1",
        "a negative answer: diff found differences, verify was refused by the kernel, conformance \
         --check-floor found a regression, report found something missing or failed",
    ),
    (
        "2",
        "an error: bad or damaged input, an unsupported construct, a usage error, an I/O error",
    ),
];

/// Text escaped for roff: backslashes, and a leading dot or quote.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The page of `cmd`, named `name`: clap_mangen's sections, then the exit
/// codes and the examples.
fn page(cmd: clap::Command, name: &str, examples: &[(&str, &str)]) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let cmd = cmd.name(name.to_string()).bin_name(name.replace('-', " "));
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let mut extra = String::from(".SH \"EXIT STATUS\"\n");
    for (code, what) in EXIT_STATUS {
        extra.push_str(&format!(".TP\n{code}\n{}\n", roff_text(what)));
    }
    if name == "btfkit-pahole" {
        // Its options are the reference's, parsed by hand, not clap's.
        extra.push_str(".SH \"PAHOLE OPTIONS\"\n.nf\n");
        for line in super::pahole::HELP.lines() {
            extra.push_str(&roff_text(line));
            extra.push('\n');
        }
        extra.push_str(".fi\n");
    }
    if !examples.is_empty() {
        extra.push_str(".SH EXAMPLES\n");
        for (line, what) in examples {
            extra.push_str(&format!(".TP\n.B {}\n{}\n", roff_text(line), roff_text(what)));
        }
    }
    if name != "btfkit" {
        extra.push_str(".SH \"SEE ALSO\"\n.BR btfkit (1)\n");
    }
    buf.extend_from_slice(extra.as_bytes());
    Ok(buf)
}

/// Every page: (file name, roff), btfkit.1 first.
pub fn pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let root = Cli::command();
    let examples = |n: &str| EXAMPLES.iter().find(|(c, _)| *c == n).map_or(&[][..], |(_, e)| *e);
    let mut v = vec![(
        "btfkit.1".to_string(),
        page(root.clone(), "btfkit", examples("btfkit"))?,
    )];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let n = sub.get_name();
        v.push((
            format!("btfkit-{n}.1"),
            page(sub.clone(), &format!("btfkit-{n}"), examples(n))?,
        ));
    }
    Ok(v)
}

fn write_all(dir: &Path) -> anyhow::Result<i32> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    for (name, roff) in pages()? {
        btfkit::output::write_atomic(&dir.join(&name), &roff)?;
    }
    Ok(super::EXIT_OK)
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    if let Some(dir) = &a.dir {
        return write_all(dir);
    }
    let want = match &a.command {
        Some(c) => format!("btfkit-{c}.1"),
        None => "btfkit.1".into(),
    };
    let pages = pages()?;
    match pages.iter().find(|(n, _)| *n == want) {
        Some((_, roff)) => write_stdout(roff),
        None => {
            let names: Vec<&str> = pages
                .iter()
                .filter_map(|(n, _)| n.strip_prefix("btfkit-")?.strip_suffix(".1"))
                .collect();
            anyhow::bail!(
                "no subcommand `{}` (there are {})",
                a.command.as_deref().unwrap_or_default(),
                names.join(", ")
            )
        }
    }
}
