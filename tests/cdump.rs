//! `dump --format c` against the reference (Debian bookworm's bpftool 7.1.0)
//! on the corpus, and the generated vmlinux.h against real compilers.
//! Each check that needs an external tool says SKIPPED on stderr when the
//! tool is missing (.ci/run installs bpftool, clang and gcc).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use btfkit::btf::{Btf, cdump};
use common::{corpus_file, corpus_list, have_tool};

const VMLINUX: &str = "expected/kernel/vmlinux.kernel.btf";

fn load(rel: &str, base: Option<&str>) -> Btf {
    let base = base.map(|b| Arc::new(btfkit::elf::load_btf(&corpus_file(b), None).unwrap()));
    btfkit::elf::load_btf(&corpus_file(rel), base).unwrap()
}

fn have_bpftool() -> bool {
    if common::bpftool().is_some() {
        return true;
    }
    eprintln!("SKIPPED: bpftool is not installed (apt-get install bpftool); no comparison with the reference");
    false
}

/// The reference's rendering of corpus file `rel` (over `base`).
fn bpftool_c(rel: &str, base: Option<&str>) -> Vec<u8> {
    let mut cmd = Command::new(common::bpftool().expect("bpftool"));
    cmd.args(["btf", "dump", "file"]).arg(corpus_file(rel));
    if let Some(b) = base {
        cmd.arg("-B").arg(corpus_file(b));
    }
    let out = cmd.args(["format", "c"]).output().unwrap();
    assert!(
        out.status.success(),
        "bpftool on {rel}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Byte equality, reported as the first differing line.
fn assert_same(what: &str, ours: &[u8], reference: &[u8]) {
    if ours == reference {
        return;
    }
    let (a, b) = (String::from_utf8_lossy(ours), String::from_utf8_lossy(reference));
    let line = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or(a.lines().count().min(b.lines().count()));
    panic!(
        "{what}: differs from bpftool at line {}:\n  ours:    {:?}\n  bpftool: {:?}\n({} vs {} bytes)",
        line + 1,
        a.lines().nth(line),
        b.lines().nth(line),
        ours.len(),
        reference.len()
    );
}

fn check_against_bpftool(rel: &str, base: Option<&str>) {
    let ours = cdump::to_c(&load(rel, base)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_same(rel, &ours, &bpftool_c(rel, base));
}

#[test]
fn vmlinux_header_matches_bpftool() {
    crate::needs_corpus!();
    if have_bpftool() {
        check_against_bpftool(VMLINUX, None);
    }
}

#[test]
fn module_headers_match_bpftool() {
    crate::needs_corpus!();
    if have_bpftool() {
        // The header of split BTF holds the base types too, as bpftool's.
        check_against_bpftool("expected/modules/fou.kernel.btf", Some(VMLINUX));
        check_against_bpftool("expected/modules/btrfs.kernel.btf", Some(VMLINUX));
    }
}

#[test]
fn fixture_headers_match_bpftool() {
    crate::needs_corpus!();
    if !have_bpftool() {
        return;
    }
    let files = corpus_list("expected/fixtures", ".btf");
    assert!(files.len() > 100, "only {} fixture BTFs found", files.len());
    for f in files {
        let rel = format!("expected/fixtures/{f}");
        let t = load(&rel, None);
        if t.own_ids().any(|id| {
            let ty = t.ty(id);
            ty.kind() == btfkit::btf::Kind::Array && ty.array().0.get() == 0
        }) {
            // bpftool crashes on an array of void (SIGFPE): btfkit refuses it.
            let e = cdump::to_c(&t).unwrap_err().to_string();
            assert!(e.contains("array of void elements"), "{rel}: {e}");
            continue;
        }
        check_against_bpftool(&rel, None);
    }
}

/// Where compile tests put their files.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cdump").join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A BPF-style program: CO-RE reads of task_struct and sk_buff fields plus
/// kernel typedefs, all from the generated header.
const PROG: &str = r#"#include "vmlinux.h"

#define SEC(name) __attribute__((section(name), used))

struct event {
	pid_t pid;
	u64 start;
	__u32 len;
	char comm[16];
};

SEC("tp_btf/sched_switch")
int on_switch(struct task_struct *prev, struct sk_buff *skb)
{
	struct event e = {};
	atomic_t refs = { .counter = 1 };
	bool has_data = skb->data != 0;
	size_t sz = sizeof(struct task_struct);

	e.pid = prev->pid;
	e.start = prev->start_time;
	e.len = skb->len;
	__builtin_memcpy(e.comm, prev->comm, sizeof(e.comm));
	return e.pid + (int)e.start + (int)e.len + refs.counter + has_data + (int)(sz > 0) + e.comm[0];
}

char LICENSE[] SEC("license") = "GPL";
"#;

fn compile(dir: &Path, header: &[u8], compiler: &str, args: &[&str]) {
    std::fs::write(dir.join("vmlinux.h"), header).unwrap();
    std::fs::write(dir.join("prog.c"), PROG).unwrap();
    let out = Command::new(compiler)
        .current_dir(dir)
        .args(args)
        .args(["-Werror", "-c", "prog.c", "-o", "prog.o"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed on the generated header in {}:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn vmlinux_header_compiles_with_clang_for_bpf() {
    crate::needs_corpus!();
    if !have_tool("clang", "--version") {
        eprintln!("SKIPPED: clang is not installed (apt-get install clang); header not compiled for BPF");
        return;
    }
    let btf = load(VMLINUX, None);
    let header = cdump::to_c(&btf).unwrap();
    compile(&scratch("clang"), &header, "clang", &["-target", "bpf", "-O2", "-g"]);
    let header = cdump::render(
        &btf,
        None,
        cdump::Options {
            enum_sizes: true,
            ..Default::default()
        },
    )
    .unwrap();
    compile(
        &scratch("clang-enum-sizes"),
        &header,
        "clang",
        &["-target", "bpf", "-O2", "-g"],
    );
}

#[test]
fn vmlinux_header_compiles_with_gcc() {
    crate::needs_corpus!();
    if !have_tool("gcc", "--version") {
        eprintln!("SKIPPED: gcc is not installed (apt-get install gcc); header not compiled with gcc");
        return;
    }
    let header = cdump::to_c(&load(VMLINUX, None)).unwrap();
    compile(&scratch("gcc"), &header, "gcc", &["-O2"]);
}

use common::run as btfkit;

#[test]
fn filtered_header_holds_what_the_program_needs() {
    crate::needs_corpus!();
    let vmlinux = corpus_file(VMLINUX);
    let out = btfkit(&[
        "dump",
        vmlinux.to_str().unwrap(),
        "--format",
        "c",
        "--filter",
        "struct task_struct,sk_buff",
        "--filter=pid_t,u64,__u32,atomic_t,bool,size_t",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let h = String::from_utf8(out.stdout).unwrap();
    let full = cdump::to_c(&load(VMLINUX, None)).unwrap();
    assert!(
        h.len() * 3 < full.len(),
        "filtered header is {} bytes of {}",
        h.len(),
        full.len()
    );
    for needle in [
        "\nstruct task_struct {\n",
        "\nstruct sk_buff {\n",
        "\ntypedef __kernel_pid_t pid_t;\n",
        "\nstruct mm_struct;\n",
    ] {
        assert!(h.contains(needle), "no {needle:?} in the filtered header");
    }
    // Only the definitions it needs: mm_struct is reached through pointers only.
    assert!(!h.contains("\nstruct mm_struct {\n"));
    if have_tool("clang", "--version") {
        compile(
            &scratch("filtered-clang"),
            h.as_bytes(),
            "clang",
            &["-target", "bpf", "-O2", "-g"],
        );
    } else {
        eprintln!("SKIPPED: clang is not installed; filtered header not compiled");
    }
    if have_tool("gcc", "--version") {
        compile(&scratch("filtered-gcc"), h.as_bytes(), "gcc", &["-O2"]);
    } else {
        eprintln!("SKIPPED: gcc is not installed; filtered header not compiled");
    }
}

#[test]
fn filter_on_a_missing_name_is_an_error() {
    crate::needs_corpus!();
    let vmlinux = corpus_file(VMLINUX);
    let out = btfkit(&[
        "dump",
        vmlinux.to_str().unwrap(),
        "--format",
        "c",
        "--filter",
        "task_struct,no_such_type",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no struct, union, enum, typedef or base type named 'no_such_type'"),
        "{err}"
    );
    // --filter works in every format, and suggests the closest names
    let out = btfkit(&["dump", vmlinux.to_str().unwrap(), "--filter", "task_struc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean task_struct"));
}

/// `_Static_assert`s that every uniquely named struct/union of `btf` has its
/// BTF size and, with `members`, every named byte-aligned non-bitfield member
/// its BTF offset. Each message is the struct's C name.
fn layout_asserts(btf: &Btf, members: bool) -> String {
    use btfkit::btf::{Kind, TypeId};
    let mut uses: std::collections::HashMap<Vec<u8>, u32> = Default::default();
    for id in 1..=btf.type_count() {
        let t = btf.ty(TypeId::new(id));
        let tag =
            matches!(t.kind(), Kind::Struct | Kind::Union | Kind::Enum64) || (t.kind() == Kind::Enum && t.vlen() > 0);
        if tag && t.name_off().get() != 0 {
            *uses.entry(btf.str_at(t.name_off()).unwrap().to_vec()).or_default() += 1;
        }
    }
    let mut s = String::from("#include \"vmlinux.h\"\n");
    for id in 1..=btf.type_count() {
        let t = btf.ty(TypeId::new(id));
        let kw = match t.kind() {
            Kind::Struct => "struct",
            Kind::Union => "union",
            _ => continue,
        };
        let name = btf.name(t.name_off());
        if name.is_empty() || uses[name.as_bytes()] != 1 {
            continue;
        }
        s += &format!(
            "_Static_assert(sizeof({kw} {name}) == {}, \"{kw} {name}\");\n",
            t.size()
        );
        if !members {
            continue;
        }
        for [m, _, off] in t.triples() {
            let (bit_off, bits) = if t.kflag() {
                (off & 0xff_ffff, off >> 24)
            } else {
                (off, 0)
            };
            let m = btf.name(btfkit::btf::StrOff::new(m));
            if !m.is_empty() && bits == 0 && bit_off % 8 == 0 {
                s += &format!(
                    "_Static_assert(__builtin_offsetof({kw} {name}, {m}) == {}, \"{kw} {name}\");\n",
                    bit_off / 8
                );
            }
        }
    }
    s
}

/// Compiles `asserts` against `header` with gcc; the messages of the failed
/// assertions, deduplicated.
fn failed_asserts(dir: &Path, header: &[u8], asserts: &str) -> std::collections::BTreeSet<String> {
    std::fs::write(dir.join("vmlinux.h"), header).unwrap();
    std::fs::write(dir.join("layout.c"), asserts).unwrap();
    let out = Command::new("gcc")
        .current_dir(dir)
        .args(["-fmax-errors=0", "-c", "layout.c", "-o", "layout.o"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let failed: std::collections::BTreeSet<String> = err
        .lines()
        .filter_map(|l| {
            l.split_once("static assertion failed: \"")?
                .1
                .strip_suffix('"')
                .map(str::to_string)
        })
        .collect();
    assert_eq!(out.status.success(), failed.is_empty(), "gcc failed otherwise:\n{err}");
    failed
}

/// The header must give the compiler the BTF's layout. bpftool 7.1.0 does not
/// for structs holding a 1-byte enum (`enum rw_hint`,
/// `enum blk_integrity_checksum` here): C makes those enums 4 bytes. That is
/// exactly the set of structs below; `--enum-sizes` (Options::enum_sizes)
/// fixes all of them.
#[test]
fn header_layout_matches_btf() {
    crate::needs_corpus!();
    if !cfg!(target_arch = "x86_64") || !have_tool("gcc", "--version") {
        eprintln!("SKIPPED: needs gcc on x86-64 (the corpus vmlinux's ABI); layouts not checked");
        return;
    }
    let btf = load(VMLINUX, None);
    let default = cdump::to_c(&btf).unwrap();
    let failed = failed_asserts(&scratch("layout-default"), &default, &layout_asserts(&btf, false));
    let expected: std::collections::BTreeSet<String> = [
        "bdev_inode",
        "bio",
        "blk_integrity",
        "blkdev_dio",
        "dax_device",
        "ext4_inode_info",
        "fuse_inode",
        "hugetlbfs_inode_info",
        "inode",
        "iomap_ioend",
        "mqueue_inode_info",
        "proc_inode",
        "queue_limits",
        "request_queue",
        "shmem_inode_info",
        "socket_alloc",
        "tracefs_inode",
    ]
    .iter()
    .map(|n| format!("struct {n}"))
    .collect();
    assert_eq!(
        failed, expected,
        "structs whose size the bpftool-identical header gets wrong"
    );

    let fixed = cdump::render(
        &btf,
        None,
        cdump::Options {
            enum_sizes: true,
            ..Default::default()
        },
    )
    .unwrap();
    let failed = failed_asserts(&scratch("layout-enum-sizes"), &fixed, &layout_asserts(&btf, true));
    assert!(
        failed.is_empty(),
        "with enum_sizes, wrong size or member offsets in: {failed:?}"
    );
}
