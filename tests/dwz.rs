//! dwz-compressed DWARF: partial units imported within a file (`dwz`) and
//! from a supplementary file (`dwz -m`, GNU forms and DWARF 5's
//! `.debug_sup`). The oracle is the same build without dwz: btfkit's BTF of
//! the compressed file must be equivalent (`btfkit diff`) to the BTF of the
//! uncompressed one, which is pahole v1.31's own bytes where the corpus has
//! them. The inputs are made here with gcc and Debian's dwz (.ci/run
//! installs it and sets BTFKIT_REQUIRE_DWZ, which turns a missing dwz from
//! a skip into a failure).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// The corpus's `kernel` profile, as `btfkit pahole` flags, with every
/// variable (`global_var`: a shared object has no per-CPU section, and a
/// definition whose declaration dwz moved must still find it).
const KERNEL_FEATURES: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,\
                               consistent_func,decl_tag_kfuncs,reproducible_build,global_var";

/// Whether dwz can run; without it the test is skipped, unless required.
fn have_dwz(test: &str) -> bool {
    if have_tool("dwz", "--version") {
        return true;
    }
    if std::env::var_os("BTFKIT_REQUIRE_DWZ").is_some_and(|v| v == "1") {
        panic!("BTFKIT_REQUIRE_DWZ=1 but dwz cannot be run");
    }
    eprintln!("SKIPPED {test}: dwz is not installed");
    false
}

fn ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what}: exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn dwz(dir: &Path, args: &[&str]) {
    let o = Command::new("dwz").current_dir(dir).args(args).output().unwrap();
    ok(&format!("dwz {args:?}"), &o);
}

/// `btfkit pahole` with `flags`, writing `out` from `input` (run in `dir`).
fn encode(dir: &Path, input: &str, out: &str, flags: &[&str]) -> Output {
    btfkit()
        .current_dir(dir)
        .arg("pahole")
        .arg("-J")
        .args(flags)
        .arg(format!("--btf_encode_detached={out}"))
        .arg(input)
        .output()
        .unwrap()
}

/// A manifest row's pahole arguments as `btfkit encode` flags: the input,
/// `-J` and the detached-output option are the command line's own.
fn encode_flags(args: &str) -> Vec<&str> {
    args.split(' ')
        .filter(|a| *a != "{input}" && !a.starts_with("--btf_encode_detached") && *a != "-J")
        .collect()
}

fn assert_equivalent(what: &str, a: &Path, b: &Path) {
    let o = run(&["diff", &s(a), &s(b)]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && (text.starts_with("equivalent") || text.starts_with("identical")),
        "{what}: {} and {} differ:\n{text}{}",
        a.display(),
        b.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn verify(what: &str, f: &Path) {
    let o = run(&["verify", &s(f)]);
    ok(&format!("{what}: the kernel's verdict on {}", f.display()), &o);
}

/// Shared objects built from the fixtures' sources, in groups that share
/// types (so that `dwz -m` has something to share).
const GROUPS: &[(&str, &[&str])] = &[
    ("pair_ab", &["cu_pair_a.c", "cu_pair_b.c", "structs_unions.c"]),
    ("pair_at", &["cu_pair_a.c", "typedefs.c", "structs_unions.c"]),
    (
        "types",
        &["enums.c", "bitfields.c", "pointers.c", "arrays.c", "structs_unions.c"],
    ),
    ("funcs", &["func_protos.c", "qualifiers.c", "typedefs.c", "pointers.c"]),
    (
        "vars",
        &["variables.c", "misc_types.c", "structs_unions.c", "typedefs.c"],
    ),
];

/// Sources sharing a header of declarations: dwz moves the declarations
/// into a partial unit, and a definition's DW_AT_specification then points
/// into it (the definition's name and type are the declaration's).
const SHARED_VARS: usize = 9;

/// `shared.h` and three units including it; the first defines the
/// variables.
fn shared_sources(dir: &Path) -> [&'static str; 3] {
    let mut h = String::from("struct shared_s { int a; long b; };\nextern int shared_fn(struct shared_s *);\n");
    let mut def = String::from("#include \"shared.h\"\n");
    let mut sum = String::from("0");
    for i in 0..SHARED_VARS {
        h += &format!("extern struct shared_s shared_thing{i};\nextern long shared_counter{i};\n");
        def += &format!("struct shared_s shared_thing{i} = {{ {i}, 2 }};\nlong shared_counter{i} = {i};\n");
        sum += &format!(" + shared_thing{i}.a + shared_counter{i}");
    }
    // More definitions of the unit's own than declared ones: variables are
    // looked up by offset, and the imported declarations lie before them.
    for i in 0..3 * SHARED_VARS {
        def += &format!("long own_counter{i} = {i};\n");
    }
    def += "int shared_fn(struct shared_s *s) { return s->a; }\n";
    std::fs::write(dir.join("shared.h"), h).unwrap();
    std::fs::write(dir.join("def.c"), def).unwrap();
    for u in ["use1", "use2"] {
        let text = format!("#include \"shared.h\"\nlong {u}(void) {{ return shared_fn(&shared_thing0) + {sum}; }}\n");
        std::fs::write(dir.join(format!("{u}.c")), text).unwrap();
    }
    ["def.c", "use1.c", "use2.c"]
}

fn build_groups(dir: &Path) -> Vec<String> {
    let units = shared_sources(dir);
    let o = Command::new("gcc")
        .current_dir(dir)
        .args(["-g", "-O2", "-fPIC", "-shared", "-o", "header.so"])
        .args(units)
        .output()
        .unwrap();
    ok("gcc header.so", &o);
    let mut out = vec!["header.so".to_string()];
    out.extend(GROUPS.iter().map(|(name, srcs)| {
        let so = format!("{name}.so");
        let o = Command::new("gcc")
            .current_dir(dir)
            .args(["-g", "-O2", "-fPIC", "-shared", "-o", &so])
            .args(srcs.iter().map(|s| corpus_file(&format!("fixtures/src/{s}"))))
            .output()
            .unwrap();
        ok(&format!("gcc {so}"), &o);
        so
    }));
    out
}

fn copy_all(from: &Path, to: &Path, names: &[String]) {
    std::fs::create_dir_all(to).unwrap();
    for n in names {
        std::fs::copy(from.join(n), to.join(n)).unwrap();
    }
}

/// The corpus's linked program, compressed in place by dwz: each profile's
/// output is equivalent to pahole's own output for the uncompressed file
/// (which btfkit matches byte for byte), and so are the GCC LTO builds'.
#[test]
fn corpus_programs_compressed_match_the_reference() {
    needs_corpus!();
    if !have_dwz("corpus_programs_compressed_match_the_reference") {
        return;
    }
    let dir = scratch("dwz-corpus");
    let rows = read_manifest(&corpus_dir().join("manifest.tsv"));
    let prog = corpus_file("fixtures/bin/prog.gcc-O2.exe");
    std::fs::copy(&prog, dir.join("plain.exe")).unwrap();
    std::fs::copy(&prog, dir.join("dwz.exe")).unwrap();
    dwz(&dir, &["dwz.exe"]);
    let data = std::fs::read(dir.join("dwz.exe")).unwrap();
    assert!(
        data.windows(b".gnu_debugaltlink".len())
            .all(|w| w != b".gnu_debugaltlink"),
        "single-file dwz names no supplementary file"
    );
    let mut checked = 0;
    for row in rows.iter().filter(|r| r["input"] == "fixtures/bin/prog.gcc-O2.exe") {
        let profile = &row["profile"];
        let flags = encode_flags(&row["args"]);
        let expected = corpus_file(&row["expected"]);
        let plain = format!("plain.{profile}.btf");
        let compressed = format!("dwz.{profile}.btf");
        ok(profile, &encode(&dir, "plain.exe", &plain, &flags));
        assert_eq!(
            std::fs::read(dir.join(&plain)).unwrap(),
            std::fs::read(&expected).unwrap(),
            "{profile}: the uncompressed program is no longer the reference's bytes"
        );
        ok(profile, &encode(&dir, "dwz.exe", &compressed, &flags));
        assert_equivalent(profile, &expected, &dir.join(&compressed));
        verify(profile, &dir.join(&compressed));
        checked += 1;
    }
    assert_eq!(checked, 4, "the manifest's four profiles of prog.gcc-O2.exe");
    // GCC LTO builds: read as one merged unit, as the reference reads the
    // uncompressed file (its `<artificial>` units say so, since dwz's own
    // DW_FORM_ref_addr cannot).
    for lto in [
        "prog.gcc-O2-flto.exe",
        "prog.gcc-O2-dwarf4-flto.exe",
        "shlib.gcc-O2-flto.so",
    ] {
        let input = format!("fixtures/bin/{lto}");
        std::fs::copy(corpus_file(&input), dir.join(lto)).unwrap();
        dwz(&dir, &[lto]);
        let row = rows
            .iter()
            .find(|r| r["input"] == input && r["profile"] == "kernel")
            .expect("a kernel-profile row");
        let flags = encode_flags(&row["args"]);
        let out = format!("{lto}.btf");
        ok(lto, &encode(&dir, lto, &out, &flags));
        assert_equivalent(lto, &corpus_file(&row["expected"]), &dir.join(&out));
        verify(lto, &dir.join(&out));
    }
}

/// The fixtures' sources in groups of shared objects, compressed one by
/// one (`dwz`), together with a supplementary file (`dwz -m`, the GNU
/// forms) and as DWARF 5 (`--dwarf-5`: `.debug_sup`, DW_FORM_ref_sup4 and
/// DW_FORM_strp_sup): every output is equivalent to the uncompressed
/// build's, the kernel accepts it, and `-j` does not change its bytes.
#[test]
fn fixture_groups_compressed_every_way_are_equivalent() {
    needs_corpus!();
    if !have_dwz("fixture_groups_compressed_every_way_are_equivalent") || !have_tool("gcc", "--version") {
        return;
    }
    let dir = scratch("dwz-groups");
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let names = build_groups(&plain);
    for n in &names {
        ok(n, &encode(&plain, n, &format!("{n}.btf"), &[KERNEL_FEATURES]));
    }
    let ways: [(&str, Vec<&str>); 3] = [
        ("single", vec![]),
        ("multi", vec!["-m", "common.dwz"]),
        ("dwarf5", vec!["--dwarf-5", "-m", "common.sup"]),
    ];
    for (way, args) in &ways {
        let d = dir.join(way);
        copy_all(&plain, &d, &names);
        let mut all: Vec<&str> = args.clone();
        all.extend(names.iter().map(String::as_str));
        if *way == "single" {
            for n in &names {
                dwz(&d, &[n]);
            }
        } else {
            dwz(&d, &all);
        }
        for n in &names {
            let out = format!("{n}.btf");
            ok(&format!("{way} {n}"), &encode(&d, n, &out, &[KERNEL_FEATURES]));
            assert_equivalent(&format!("{way} {n}"), &plain.join(&out), &d.join(&out));
            verify(&format!("{way} {n}"), &d.join(&out));
            for j in ["-j1", "-j3"] {
                let again = format!("{n}{j}.btf");
                ok(&format!("{way} {n} {j}"), &encode(&d, n, &again, &[KERNEL_FEATURES, j]));
                assert_eq!(
                    std::fs::read(d.join(&again)).unwrap(),
                    std::fs::read(d.join(&out)).unwrap(),
                    "{way} {n}: {j} changes the bytes"
                );
            }
        }
    }
    // What `dwz -m` shares is really read from the supplementary file.
    let multi = std::fs::read(dir.join("multi").join(&names[0])).unwrap();
    assert!(multi.windows(17).any(|w| w == b".gnu_debugaltlink"));
}

/// Where the supplementary file is found: the recorded path relative to
/// the input's directory, `--alt-file`, the build-id path and the `.dwz/`
/// place under `--debug-root`; a missing or different file is exit 2 with
/// the path and the flag that supplies it, and no output.
#[test]
fn supplementary_file_lookup() {
    needs_corpus!();
    if !have_dwz("supplementary_file_lookup") || !have_tool("gcc", "--version") {
        return;
    }
    let dir = scratch("dwz-lookup");
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let names = build_groups(&plain);
    let (a, b) = (&names[0], &names[1]);
    ok(a, &encode(&plain, a, "a.btf", &[KERNEL_FEATURES]));
    let pkg = dir.join("pkg");
    copy_all(&plain, &pkg, &[a.clone(), b.clone()]);
    // recorded as a distribution records it
    let recorded = "/usr/lib/debug/.dwz/x86_64-linux-gnu/btfkit-test.debug";
    dwz(&pkg, &["-m", "common.dwz", "-M", recorded, a, b]);
    let common = pkg.join("common.dwz");
    // (`btfkit encode`: the lookup flags are btfkit's, not pahole's)
    let encode_a = |extra: &[&str], out: &str| -> Output {
        btfkit()
            .current_dir(&dir)
            .args([
                "encode",
                "-q",
                "--btf-features",
                &KERNEL_FEATURES["--btf_features=".len()..],
            ])
            .args(extra)
            .arg(pkg.join(a))
            .args(["-o", out])
            .output()
            .unwrap()
    };
    // Not where it is recorded: exit 2, the places named, no output.
    let o = encode_a(&[], "missing.btf");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(recorded) && err.contains("--alt-file") && err.contains("--debug-root"),
        "{err}"
    );
    assert!(!dir.join("missing.btf").exists());
    // --alt-file
    ok("--alt-file", &encode_a(&["--alt-file", &s(&common)], "alt.btf"));
    assert_equivalent("--alt-file", &plain.join("a.btf"), &dir.join("alt.btf"));
    // --debug-root: the .dwz/ place, then the build-id path
    let root = dir.join("root");
    let dwz_place = root.join(".dwz/x86_64-linux-gnu/btfkit-test.debug");
    std::fs::create_dir_all(dwz_place.parent().unwrap()).unwrap();
    std::fs::copy(&common, &dwz_place).unwrap();
    ok("--debug-root .dwz", &encode_a(&["--debug-root", &s(&root)], "root.btf"));
    assert_equivalent("--debug-root .dwz", &plain.join("a.btf"), &dir.join("root.btf"));
    std::fs::remove_file(&dwz_place).unwrap();
    let id = btfkit::elf::alt::build_id(&std::fs::read(&common).unwrap()).expect("dwz gives the file a build id");
    let hex = btfkit::elf::alt::hex(&id);
    let by_id = root
        .join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
    std::fs::copy(&common, &by_id).unwrap();
    ok(
        "--debug-root build id",
        &encode_a(&["--debug-root", &s(&root)], "byid.btf"),
    );
    assert_equivalent("--debug-root build id", &plain.join("a.btf"), &dir.join("byid.btf"));
    // A different file (another dwz -m run's) is refused by its build id.
    let other = dir.join("other");
    copy_all(&plain, &other, &[names[2].clone(), names[3].clone()]);
    dwz(&other, &["-m", "other.dwz", &names[2], &names[3]]);
    let o = encode_a(&["--alt-file", &s(&other.join("other.dwz"))], "wrong.btf");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("other.dwz") && err.contains("build id"), "{err}");
    assert!(!dir.join("wrong.btf").exists());
    // The recorded relative path is looked for beside the input, from any
    // working directory.
    let rel = dir.join("rel");
    copy_all(&plain, &rel, &[a.clone(), b.clone()]);
    dwz(&rel, &["-m", "shared.dwz", a, b]);
    ok(
        "relative",
        &encode(&dir, &s(&rel.join(a)), "rel.btf", &[KERNEL_FEATURES]),
    );
    assert_equivalent("relative", &plain.join("a.btf"), &dir.join("rel.btf"));
}

/// A unit's imports from a file without the supplementary file it names,
/// or DW_FORM_GNU_ref_alt without any link, never encode as void.
#[test]
fn supplementary_references_without_the_file_are_refused() {
    needs_corpus!();
    if !have_dwz("supplementary_references_without_the_file_are_refused") || !have_tool("gcc", "--version") {
        return;
    }
    let dir = scratch("dwz-nolink");
    let names = build_groups(&dir);
    dwz(&dir, &["-m", "c.dwz", &names[1], &names[2]]);
    // Drop the link: rename the section so that nothing names the file.
    let mut data = std::fs::read(dir.join(&names[1])).unwrap();
    let at = data
        .windows(17)
        .position(|w| w == b".gnu_debugaltlink")
        .expect("the section's name");
    data[at + 1] = b'X';
    let cut: PathBuf = dir.join("nolink.so");
    std::fs::write(&cut, &data).unwrap();
    let o = encode(&dir, "nolink.so", "nolink.btf", &[KERNEL_FEATURES]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("supplementary"), "{err}");
    assert!(!dir.join("nolink.btf").exists());
}

/// The corpus's whole 6.12 vmlinux compressed with dwz (partial units
/// imported by thousands of units; per-CPU variables whose definitions
/// point at declarations dwz moved): in the `kernel` and `all` profiles
/// the BTF is equivalent to pahole's own for the uncompressed vmlinux,
/// and the kernel judges it as it judges the reference's.
#[test]
fn corpus_vmlinux_compressed_matches_the_reference() {
    needs_corpus!();
    if !have_dwz("corpus_vmlinux_compressed_matches_the_reference") {
        return;
    }
    let dir = scratch("dwz-vmlinux");
    let rows = read_manifest(&corpus_dir().join("manifest.tsv"));
    let vmlinux = corpus_file("kernel/vmlinux-6.12.117+deb12-cloud-amd64");
    // -L/-l none: dwz's default limits skip a file this large uncompressed.
    let o = Command::new("dwz")
        .args(["-L", "none", "-l", "none", "-o"])
        .arg(dir.join("vmlinux"))
        .arg(&vmlinux)
        .output()
        .unwrap();
    ok("dwz vmlinux", &o);
    let mut checked = 0;
    for row in rows
        .iter()
        .filter(|r| ["vmlinux/kernel", "vmlinux/all"].contains(&r["case_id"].as_str()))
    {
        let profile = &row["profile"];
        let flags = encode_flags(&row["args"]);
        let out = format!("vmlinux.{profile}.btf");
        ok(profile, &encode(&dir, "vmlinux", &out, &flags));
        assert_equivalent(profile, &corpus_file(&row["expected"]), &dir.join(&out));
        // The kernel refuses the reference's own `all` output (global
        // variables whose DATASEC entries overlap): ours must be refused
        // for the same reason, and the others accepted.
        let rejects = std::fs::read_to_string(corpus_dir().join("kernel-rejects.tsv")).unwrap();
        match rejects
            .lines()
            .find(|l| l.split('\t').next() == Some(row["expected"].as_str()))
        {
            Some(line) => {
                let why = line.rsplit('\t').next().unwrap();
                let o = run(&["verify", &s(&dir.join(&out))]);
                let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
                assert!(
                    !o.status.success() && text.contains(why),
                    "{profile}: expected the refusal `{why}`: {text}"
                );
            }
            None => verify(profile, &dir.join(&out)),
        }
        checked += 1;
    }
    assert_eq!(checked, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
