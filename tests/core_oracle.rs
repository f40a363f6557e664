//! The CO-RE check against libbpf itself: every relocation of every
//! libbpf-tools object (tests/core/objects) on five real kernels, compared
//! line by line with what libbpf 1.1 logs while relocating the same object
//! against the same BTF (tests/core/oracle/libbpf_core.c, built here against
//! Debian's libbpf-dev). The log holds each candidate, each spec, each
//! patched value and each poisoned instruction, so equal logs mean equal
//! results.
//!
//! Kernels: this machine's (/sys/kernel/btf/vmlinux), the corpus's Debian
//! 6.12 cloud amd64 and its clang ThinLTO kernel, and the BTF Debian
//! shipped in bookworm's 6.1.0-57 amd64 and 6.12.118 cloud arm64 kernels
//! (tests/core/kernels, xz).
//!
//! Without libbpf-dev, a C compiler or the bpf() syscall the libbpf half is
//! skipped with a note, unless BTFKIT_REQUIRE_LIBBPF is set (CI sets it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use btfkit::core::{BpfObject, Log, Target, check, kernels};

fn objects_dir() -> PathBuf {
    common::crate_dir().join("tests/core/objects")
}

fn objects() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(objects_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".bpf.o"))
        .collect();
    v.sort();
    assert!(v.len() >= 58, "the libbpf-tools objects are in tests/core/objects");
    v
}

fn require_libbpf() -> bool {
    std::env::var_os("BTFKIT_REQUIRE_LIBBPF").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Builds the oracle harness; `None` (after a note) when it cannot run here.
fn harness(dir: &Path) -> Option<PathBuf> {
    let exe = dir.join("libbpf_core");
    let src = common::crate_dir().join("tests/core/oracle/libbpf_core.c");
    let built = Command::new("cc")
        .args(["-O1", "-Wall", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lbpf")
        .output();
    let why = match built {
        Ok(o) if o.status.success() => {
            // libbpf probes the bpf() syscall before relocating
            let probe = Command::new(&exe)
                .arg(objects_dir().join("biosnoop.bpf.o"))
                .arg(common::crate_dir().join("data/sample.btf"))
                .output();
            match probe {
                Ok(p) if String::from_utf8_lossy(&p.stdout).contains("CO-RE relocations") => return Some(exe),
                Ok(p) => format!(
                    "the harness ran but libbpf did not relocate: {}",
                    String::from_utf8_lossy(&p.stdout).lines().last().unwrap_or_default()
                ),
                Err(e) => format!("the harness did not run: {e}"),
            }
        }
        Ok(o) => format!(
            "cc -lbpf failed (install libbpf-dev): {}",
            String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or_default()
        ),
        Err(e) => format!("no C compiler: {e}"),
    };
    assert!(
        !require_libbpf(),
        "BTFKIT_REQUIRE_LIBBPF is set but libbpf cannot be run: {why}"
    );
    eprintln!("SKIPPED the libbpf comparison: {why}");
    None
}

/// The kernels, as raw BTF files (xz ones unpacked into `dir`).
fn kernel_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v = Vec::new();
    let sysfs = PathBuf::from("/sys/kernel/btf/vmlinux");
    if sysfs.is_file() {
        v.push(("this machine".to_string(), sysfs));
    }
    for name in ["debian-6.1.0-57-amd64", "debian-6.12.118-cloud-arm64"] {
        let xz = common::crate_dir().join(format!("tests/core/kernels/{name}.btf.xz"));
        let out = dir.join(format!("{name}.btf"));
        let mut r = liblzma::read::XzDecoder::new(std::fs::File::open(&xz).unwrap());
        let mut w = std::fs::File::create(&out).unwrap();
        std::io::copy(&mut r, &mut w).unwrap();
        v.push((name.to_string(), out));
    }
    if common::have_corpus() {
        v.push((
            "corpus 6.12 cloud amd64".into(),
            common::corpus_file("expected/kernel/vmlinux.kernel.btf"),
        ));
        v.push((
            "corpus ThinLTO".into(),
            common::corpus_file("expected/kernel/lto/vmlinux-thinlto.kernel.btf"),
        ));
    }
    v
}

/// The CO-RE part of a libbpf log: from the first "found N CO-RE
/// relocations" to the end of the relocation lines (map poisoning of the
/// harness's uncreated maps left out).
fn core_lines(log: &str) -> Vec<String> {
    let core = |l: &str| {
        l.starts_with("libbpf: CO-RE relocating ")
            || l.starts_with("libbpf: unexpected kind ")
            || l == " "
            || (l.starts_with("libbpf: sec '")
                && (l.contains("CO-RE relocations") || l.contains("skipping CO-RE relocation")))
            || (l.starts_with("libbpf: prog '") && (l.contains("': relo #") || l.contains("': relo ")))
    };
    let mut out = Vec::new();
    let mut on = false;
    for l in log.lines() {
        if !on && l.starts_with("libbpf: sec '") && l.ends_with(" CO-RE relocations") {
            on = true;
        }
        if !on || l.contains("that loads map") || l.starts_with("libbpf: sec '.rel") {
            continue;
        }
        if !core(l) {
            break;
        }
        out.push(l.to_string());
    }
    out
}

fn ours(obj: &BpfObject, target: &Target) -> Vec<String> {
    let mut log = Log::on();
    check(obj, target, &mut log);
    log.into_lines()
        .iter()
        .flat_map(|l| l.split('\n').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

#[test]
fn every_relocation_agrees_with_libbpf() {
    let dir = common::scratch("core_oracle");
    let harness = harness(&dir);
    // The libbpf-tools objects, and TYPE_MATCHES relocations on real
    // kernel types (clang 14 emits none).
    let mut paths: Vec<PathBuf> = objects().iter().map(|n| objects_dir().join(n)).collect();
    paths.push(common::crate_dir().join("tests/core/variants/matches.bpf.o"));
    let objs: Vec<(PathBuf, BpfObject)> = paths
        .into_iter()
        .map(|p| {
            let o = BpfObject::open(&p).unwrap_or_else(|e| panic!("{e}"));
            (p, o)
        })
        .collect();
    let mut compared = 0;
    let mut relocations = 0;
    let mut bad = Vec::new();
    for (kname, file) in kernel_files(&dir) {
        let target = kernels::load(&kernels::Source::File(file.clone())).unwrap();
        for (n, obj) in &objs {
            let mine = ours(obj, &target);
            relocations += obj.ext.relo_count();
            let Some(h) = &harness else { continue };
            let out = Command::new(h).arg(n).arg(&file).output().unwrap();
            let theirs = core_lines(&String::from_utf8_lossy(&out.stdout));
            compared += 1;
            if theirs != mine {
                let first = theirs
                    .iter()
                    .zip(&mine)
                    .position(|(a, b)| a != b)
                    .unwrap_or(theirs.len().min(mine.len()));
                bad.push(format!(
                    "{} on {kname}: line {first}: libbpf {:?}, btfkit {:?}",
                    n.display(),
                    theirs.get(first),
                    mine.get(first)
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {compared} logs differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(relocations > 3000, "{relocations} relocations checked");
    eprintln!("{compared} object x kernel logs equal to libbpf's; {relocations} relocations");
}

/// A big-endian build of the same source gives the same verdicts (libbpf
/// 1.1 cannot open it on this host, so there is no oracle line to compare).
#[test]
fn big_endian_objects_check_like_their_little_endian_builds() {
    let dir = common::scratch("core_bpfeb");
    let (kname, file) = kernel_files(&dir).remove(0);
    let target = kernels::load(&kernels::Source::File(file)).unwrap();
    let be_dir = objects_dir().join("bpfeb");
    let mut n = 0;
    for e in std::fs::read_dir(&be_dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let be = BpfObject::open(&be_dir.join(&name)).unwrap();
        let le = BpfObject::open(&objects_dir().join(&name)).unwrap();
        assert_eq!(be.endian, btfkit::btf::Endian::Big);
        let (vb, vl) = (
            check(&be, &target, &mut Log::off()),
            check(&le, &target, &mut Log::off()),
        );
        let summary = |v: &btfkit::core::ObjectVerdict| {
            v.programs
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        p.verdict,
                        p.poisons.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(summary(&vb), summary(&vl), "{name} on {kname}");
        // Offsets do not depend on the byte order: every byte_off agrees.
        let offs = |v: &btfkit::core::ObjectVerdict| {
            let mut o: Vec<(String, u64)> = v
                .relocated
                .relocations
                .iter()
                .filter(|r| r.kind == Some(btfkit::core::ReloKind::FieldByteOffset))
                .filter_map(|r| match r.outcome {
                    btfkit::core::Outcome::Patched { new, .. } => Some((r.path.clone(), new)),
                    _ => None,
                })
                .collect();
            o.sort();
            o.dedup();
            o
        };
        assert_eq!(offs(&vb), offs(&vl), "{name}");
        n += 1;
    }
    assert!(n >= 5);
}

/// `struct thing` as the variants object (tests/core/variants) sees it,
/// named `tname`, changed the way variant `name` says, with the scalars
/// it needs added first.
fn add_thing(b: &mut btfkit::btf::Btf, tname: &[u8], name: &str) {
    use btfkit::btf::Kind;
    let int = b.add_int(b"int", 4, btfkit::btf::INT_SIGNED);
    let uint = b.add_int(b"unsigned int", 4, 0);
    let long = b.add_int(b"long", 8, btfkit::btf::INT_SIGNED);
    let ch = b.add_int(b"char", 1, btfkit::btf::INT_CHAR);
    let name_len = if name == "name_shorter" { 2 } else { 16 };
    let arr = b.add_array(ch, int, name_len);
    let b_off = if name == "b_moved" { 320 } else { 32 };
    b.begin(Kind::Struct, tname, 48, false);
    b.push_member(b"a", int, 0, 0);
    match name {
        "b_renamed" => b.push_member(b"bb", int, b_off, 0),
        "b_resized" => b.push_member(b"b", long, b_off, 0),
        "b_bitfield" => b.push_member(b"b", uint, b_off, 7),
        _ => b.push_member(b"b", int, b_off, 0),
    }
    b.push_member(b"flags", uint, 64, 3);
    b.push_member(b"mode", uint, 67, if name == "mode_wider" { 13 } else { 5 });
    b.push_member(b"ptr", if name == "ptr_int" { int } else { long }, 128, 0);
    b.push_member(b"name", arr, 192, 0);
}

/// The hand-made kernels: `struct thing` and friends as the variants
/// object sees them, then changed one way each.
fn variant(name: &str) -> btfkit::btf::Btf {
    use btfkit::btf::{Btf, Endian, Kind};
    let mut b = Btf::new(Endian::native());
    let int = b.add_int(b"int", 4, btfkit::btf::INT_SIGNED);
    match name {
        "thing_removed" => {}
        "flavor" => add_thing(&mut b, b"thing___v9", name),
        "ambiguous" => {
            add_thing(&mut b, b"thing", "same");
            add_thing(&mut b, b"thing___x", "b_moved");
        }
        _ => add_thing(&mut b, b"thing", name),
    }
    if name != "green_removed" {
        b.begin(Kind::Enum, b"color", 4, false);
        b.push_enum_value(b"RED", 1);
        b.push_enum_value(b"GREEN", if name == "green_changed" { 7 } else { 2 });
    }
    b.begin(Kind::Struct, b"other", 8, false);
    b.push_member(b"x", int, 0, 0);
    if name == "other_with_y" {
        b.push_member(b"y", int, 32, 0);
    }
    b
}

#[test]
fn hand_made_variants_agree_with_libbpf() {
    let dir = common::scratch("core_variants");
    let harness = harness(&dir);
    let vdir = common::crate_dir().join("tests/core/variants");
    let obj = BpfObject::open(&vdir.join("variants.bpf.o")).unwrap();
    let matches = BpfObject::open(&vdir.join("matches.bpf.o")).unwrap();
    let mut verdicts = Vec::new();
    let mut matched = Vec::new();
    for name in [
        "same",
        "b_renamed",
        "b_moved",
        "b_resized",
        "b_bitfield",
        "thing_removed",
        "green_changed",
        "green_removed",
        "flavor",
        "ambiguous",
        "other_with_y",
        "mode_wider",
        "name_shorter",
        "ptr_int",
    ] {
        let file = dir.join(format!("{name}.btf"));
        std::fs::write(&file, btfkit::btf::write::to_bytes(&variant(name))).unwrap();
        let target = kernels::load(&kernels::Source::File(file.clone())).unwrap();
        verdicts.push((name, check(&obj, &target, &mut Log::off()).verdict));
        let r = btfkit::core::matrix::check_one(&matches, &target, true);
        let yes: Vec<String> = r
            .relocations
            .iter()
            .filter(|l| l.value == Some((1, 1)))
            .map(|l| l.path.clone())
            .collect();
        matched.push((name, yes));
        let Some(h) = &harness else { continue };
        for o in [&obj, &matches] {
            let out = Command::new(h).arg(&o.path).arg(&file).output().unwrap();
            let theirs = core_lines(&String::from_utf8_lossy(&out.stdout));
            assert_eq!(theirs, ours(o, &target), "{} on variant {name}", o.path.display());
        }
    }
    use btfkit::core::Verdict::*;
    let v = |n: &str| verdicts.iter().find(|(x, _)| *x == n).unwrap().1;
    assert_eq!(v("same"), Ok);
    // guarded by field_exists: the poisoned load of t->b is dead code, but
    // the unguarded offset and size relocations are reached
    assert_eq!(v("b_renamed"), Poisoned);
    assert_eq!(v("b_moved"), Ok);
    assert_eq!(v("thing_removed"), Poisoned);
    assert_eq!(v("ambiguous"), Error);
    assert_eq!(v("flavor"), Ok);
    assert_eq!(v("green_removed"), Poisoned);
    // TYPE_MATCHES: a subset of the members matches, a member the kernel's
    // type lacks or of another width does not. Nor does the whole `struct
    // thing`: clang's `char` is a signed int, the hand-made kernel's is
    // BTF_INT_CHAR, and integers match only with the same signedness.
    let m = |n: &str| matched.iter().find(|(x, _)| *x == n).unwrap().1.join(", ");
    assert_eq!(m("same"), "struct thing___lite, enum color, struct other");
    assert_eq!(m("b_resized"), "struct thing___lite, enum color, struct other");
    assert_eq!(m("thing_removed"), "enum color, struct other");
}

/// Module BTF is searched only when the vmlinux has no candidate, as in
/// libbpf. libbpf reads module BTF only from the running kernel (never with
/// a custom target), so it cannot be the oracle here: this checks the rule
/// on a kernel directory whose module holds what its vmlinux lacks.
#[test]
fn modules_are_searched_only_when_vmlinux_has_no_candidate() {
    use std::sync::Arc;
    let dir = common::scratch("core_modules");
    let obj = BpfObject::open(&common::crate_dir().join("tests/core/variants/variants.bpf.o")).unwrap();
    let targets_of = |vmlinux: &str| -> (btfkit::core::Verdict, Vec<String>) {
        let kdir = dir.join(vmlinux);
        std::fs::create_dir_all(kdir.join("modules/drivers/misc")).unwrap();
        let base = variant(vmlinux);
        std::fs::write(kdir.join("vmlinux.btf"), btfkit::btf::write::to_bytes(&base)).unwrap();
        let mut module = btfkit::btf::Btf::new_split(Arc::new(base));
        add_thing(&mut module, b"thing", "b_moved");
        let file = kdir.join("modules/drivers/misc/thing-mod.btf");
        std::fs::write(file, btfkit::btf::write::to_bytes(&module)).unwrap();
        let src = kernels::sources(&kdir).unwrap();
        assert_eq!(src.len(), 1);
        let target = kernels::load(&src[0]).unwrap();
        let r = btfkit::core::matrix::check_one(&obj, &target, true);
        let mut found: Vec<String> = r
            .relocations
            .iter()
            .filter(|l| l.path.contains("thing"))
            .filter_map(|l| l.target.as_ref().map(|t| t.0.clone()))
            .collect();
        found.sort();
        found.dedup();
        (r.verdict, found)
    };
    // No `struct thing` in the vmlinux: the module's (with b moved) is used.
    let (v, found) = targets_of("thing_removed");
    assert_eq!(v, btfkit::core::Verdict::Ok);
    assert_eq!(found, ["thing_mod"]);
    // The vmlinux has one: the module is not looked at.
    let (v, found) = targets_of("same");
    assert_eq!(v, btfkit::core::Verdict::Ok);
    assert_eq!(found, ["vmlinux"]);
}

/// bpftool, when it can run here (`None` after a note).
fn bpftool() -> Option<PathBuf> {
    for p in ["/usr/sbin/bpftool", "/usr/bin/bpftool"] {
        if Path::new(p).is_file() {
            return Some(PathBuf::from(p));
        }
    }
    assert!(
        !require_libbpf(),
        "BTFKIT_REQUIRE_LIBBPF is set but bpftool is not installed"
    );
    eprintln!("SKIPPED the bpftool comparison: no bpftool (apt install bpftool)");
    None
}

/// A minimal BTF's bytes, or why it was refused.
type MinBytes = Result<Vec<u8>, String>;

/// A relocation's access path, outcome and values.
type ReloValue = (String, &'static str, Option<(u64, u64)>);

/// Our minimal BTF of `objs` on `target`, as bytes (or the error's text).
fn our_min(target: &Target, objs: &[&BpfObject]) -> MinBytes {
    let owned: Vec<BpfObject> = objs.iter().map(|o| BpfObject::open(&o.path).unwrap()).collect();
    btfkit::core::min::minimize(target, &owned)
        .map(|(_, m)| btfkit::btf::write::to_bytes(&m.btf))
        .map_err(|e| e.to_string())
}

/// `btfkit core min` against `bpftool gen min_core_btf` (Debian's bpftool
/// 7.1.0, which embeds libbpf 1.1): the same bytes for every object alone
/// and for all of them together, on every kernel of the CO-RE oracle.
#[test]
fn minimal_btf_is_bpftools_byte_for_byte() {
    let dir = common::scratch("core_min_bpftool");
    let Some(bpftool) = bpftool() else { return };
    let mut paths: Vec<PathBuf> = objects().iter().map(|n| objects_dir().join(n)).collect();
    for extra in ["matches.bpf.o", "modules.bpf.o"] {
        paths.push(common::crate_dir().join("tests/core/variants").join(extra));
    }
    let objs: Vec<BpfObject> = paths.iter().map(|p| BpfObject::open(p).unwrap()).collect();
    // Each object alone, then all together.
    let mut sets: Vec<Vec<&BpfObject>> = objs.iter().map(|o| vec![o]).collect();
    sets.push(objs.iter().collect());
    let mut compared = 0;
    let mut bad = Vec::new();
    for (kname, file) in kernel_files(&dir) {
        let target = kernels::load(&kernels::Source::File(file.clone())).unwrap();
        let results: Vec<(String, MinBytes, MinBytes)> = std::thread::scope(|s| {
            let chunks: Vec<&[Vec<&BpfObject>]> = sets.chunks(sets.len().div_ceil(2)).collect();
            let handles: Vec<_> = chunks
                .into_iter()
                .enumerate()
                .map(|(t, chunk)| {
                    let (bpftool, dir, file) = (&bpftool, &dir, &file);
                    s.spawn(move || {
                        chunk
                            .iter()
                            .enumerate()
                            .map(|(i, set)| {
                                let out = dir.join(format!("bpftool-{t}-{i}.btf"));
                                let _ = std::fs::remove_file(&out);
                                let o = Command::new(bpftool)
                                    .args(["gen", "min_core_btf"])
                                    .arg(file)
                                    .arg(&out)
                                    .args(set.iter().map(|o| &o.path))
                                    .output()
                                    .unwrap();
                                let theirs = if o.status.success() {
                                    Ok(std::fs::read(&out).unwrap())
                                } else {
                                    Err(String::from_utf8_lossy(&o.stderr).into_owned())
                                };
                                let label = if set.len() == 1 {
                                    set[0].path.file_name().unwrap().to_string_lossy().into_owned()
                                } else {
                                    format!("all {} objects", set.len())
                                };
                                (label, theirs)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let theirs: Vec<(String, MinBytes)> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
            theirs
                .into_iter()
                .zip(&sets)
                .map(|((label, theirs), set)| (label, theirs, our_min(&target, set)))
                .collect()
        });
        for (label, theirs, ours) in results {
            compared += 1;
            match (&theirs, &ours) {
                (Ok(a), Ok(b)) if a == b => {}
                (Err(_), Err(_)) => {}
                (Ok(a), Ok(b)) => {
                    let at = a
                        .iter()
                        .zip(b)
                        .position(|(x, y)| x != y)
                        .unwrap_or(a.len().min(b.len()));
                    bad.push(format!(
                        "{label} on {kname}: {} vs {} bytes, first difference at byte {at}",
                        a.len(),
                        b.len()
                    ));
                }
                (Ok(_), Err(e)) => bad.push(format!("{label} on {kname}: bpftool wrote it, btfkit refused: {e}")),
                (Err(e), Ok(_)) => bad.push(format!("{label} on {kname}: bpftool refused ({e}), btfkit wrote it")),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {compared} differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(compared >= 4 * 61, "{compared} compared");
    eprintln!("{compared} minimal BTFs equal to bpftool's");
}

/// With module BTF, the minimal BTF keeps the module types the relocations
/// resolve to, in one standalone BTF: every relocation resolves against it
/// to the same value as against the vmlinux and its modules, for btfkit's
/// check and for libbpf given it as `btf_custom_path`.
#[test]
fn minimal_btf_with_modules_resolves_as_the_full_kernel() {
    if !common::have_corpus() {
        eprintln!("SKIPPED: no corpus");
        return;
    }
    let dir = common::scratch("core_min_modules");
    let kdir = dir.join("kernel");
    std::fs::create_dir_all(kdir.join("modules")).unwrap();
    std::fs::copy(
        common::corpus_file("expected/kernel/vmlinux.kernel.btf"),
        kdir.join("vmlinux.btf"),
    )
    .unwrap();
    for m in ["nf_conntrack", "kvm-amd", "btrfs"] {
        std::fs::copy(
            common::corpus_file(&format!("expected/modules/{m}.kernel.btf")),
            kdir.join(format!("modules/{m}.btf")),
        )
        .unwrap();
    }
    let src = kernels::sources(&kdir).unwrap();
    let full = kernels::load(&src[0]).unwrap();
    let mut paths: Vec<PathBuf> = vec![common::crate_dir().join("tests/core/variants/modules.bpf.o")];
    paths.extend(objects().iter().map(|n| objects_dir().join(n)));
    let objs: Vec<BpfObject> = paths.iter().map(|p| BpfObject::open(p).unwrap()).collect();
    let (_, min) = btfkit::core::min::minimize(&full, &objs).unwrap();
    let modules: Vec<&str> = min.from_modules.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(modules, ["btrfs", "kvm_amd", "nf_conntrack"]);
    let file = dir.join("min.btf");
    std::fs::write(&file, btfkit::btf::write::to_bytes(&min.btf)).unwrap();
    let small = kernels::load(&kernels::Source::File(file.clone())).unwrap();
    let values = |o: &BpfObject, t: &Target| -> Vec<ReloValue> {
        let r = btfkit::core::matrix::check_one(o, t, true);
        r.relocations
            .into_iter()
            .filter(|l| l.kind != "target_type_id")
            .map(|l| (l.path, l.outcome, l.value))
            .collect()
    };
    let harness = harness(&dir);
    for o in &objs {
        let want = values(o, &full);
        assert_eq!(values(o, &small), want, "{}", o.path.display());
        if let Some(h) = &harness {
            let out = Command::new(h).arg(&o.path).arg(&file).output().unwrap();
            let theirs = core_lines(&String::from_utf8_lossy(&out.stdout));
            assert_eq!(
                theirs,
                ours(o, &small),
                "libbpf on the minimal BTF: {}",
                o.path.display()
            );
        }
    }
    // modules.bpf.o reaches all three modules and the vmlinux.
    let m = btfkit::core::matrix::check_one(&objs[0], &full, true);
    let mut btfs: Vec<String> = m
        .relocations
        .iter()
        .filter_map(|l| l.target.as_ref().map(|t| t.0.clone()))
        .collect();
    btfs.sort();
    btfs.dedup();
    assert_eq!(btfs, ["btrfs", "kvm_amd", "nf_conntrack", "vmlinux"]);
}
