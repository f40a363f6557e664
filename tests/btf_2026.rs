//! BTF 2026 through the command line: the `next` reference's outputs (a
//! 32-byte header, the layout section with `layout`) written by `encode`,
//! read back by `dump`, `stats`, `diff` and `dedup` (which keeps the format),
//! and a blob with a kind btfkit does not know, stepped over by its layout.

mod common;

use common::*;

const KERNEL: &str =
    "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// The `total` line of `btfkit stats`.
fn total_of(text: &str) -> usize {
    let line = text.lines().find(|l| l.starts_with("total")).expect("a total line");
    line.split_whitespace().last().unwrap().parse().unwrap()
}

fn ok(what: &str, o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn next_outputs_read_back_in_every_command() {
    let dir = scratch("btf-2026");
    let input = s(&repo_fixture("structs_unions.gcc-O2.o"));
    for (flags, layout_len) in [(KERNEL.to_string(), 0), (format!("{KERNEL},layout"), 80)] {
        let out = dir.join("next.btf");
        let o = run(&[
            "encode",
            "--reference",
            "next",
            "--btf-features",
            &flags,
            &input,
            "-o",
            &s(&out),
        ]);
        ok("encode", &o);
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(u32_at(&bytes, 4), 32, "hdr_len");
        assert_eq!(u32_at(&bytes, 28), layout_len, "layout_len");
        // The same types as the v1.31 reference's output.
        let old = dir.join("old.btf");
        ok(
            "encode v1.31",
            &run(&["encode", "--btf-features", KERNEL, &input, "-o", &s(&old)]),
        );
        assert_eq!(u32_at(&std::fs::read(&old).unwrap(), 4), 24);
        let d = run(&["diff", &s(&old), &s(&out)]);
        assert!(
            String::from_utf8_lossy(&d.stdout).starts_with("equivalent"),
            "{}",
            String::from_utf8_lossy(&d.stdout)
        );
        assert_eq!(run(&["dump", &s(&old)]).stdout, run(&["dump", &s(&out)]).stdout);
        let st = run(&["stats", &s(&out)]);
        ok("stats", &st);
        let text = String::from_utf8_lossy(&st.stdout);
        assert_eq!(total_of(&text), bytes.len(), "{text}");
        // dedup keeps the format it read
        let again = dir.join("again.btf");
        ok("dedup", &run(&["dedup", &s(&out), "-o", &s(&again)]));
        assert_eq!(std::fs::read(&again).unwrap(), bytes);
    }
    // naming a next-only feature implies next; contradicting it is refused
    let out = dir.join("implied.btf");
    ok(
        "implied",
        &run(&["encode", "--btf-features", "layout", &input, "-o", &s(&out)]),
    );
    assert_eq!(u32_at(&std::fs::read(&out).unwrap(), 4), 32);
    let o = run(&[
        "encode",
        "--reference",
        "v1.31",
        "--btf-features",
        "layout",
        &input,
        "-o",
        &s(&dir.join("no.btf")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--reference next"));
}

/// A little-endian blob with a header of 32 bytes, `types`, the layout of
/// the 20 known kinds plus kind 20 (8 bytes of info, 4 per entry), strings.
fn unknown_kind_blob() -> Vec<u8> {
    let known: [(u8, u8); 20] = [
        (0, 0),
        (4, 0),
        (0, 0),
        (12, 0),
        (0, 12),
        (0, 12),
        (0, 8),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 0),
        (0, 8),
        (4, 0),
        (0, 12),
        (0, 0),
        (4, 0),
        (0, 0),
        (0, 12),
    ];
    let mut layout: Vec<[u8; 4]> = known.iter().map(|&(i, e)| [i, e, 0, 0]).collect();
    layout.push([8, 4, 0, 0]);
    let types: [u32; 14] = [
        1,
        1 << 24,
        4,
        0x0100_0020, // int
        5,
        (20 << 24) | 2,
        1,
        0xa,
        0xb,
        0xc,
        0xd, // kind 20, vlen 2
        0,
        2 << 24,
        1, // pointer to int
    ];
    let strs = b"\0int\0new\0";
    let (tl, ll) = (types.len() as u32 * 4, layout.len() as u32 * 4);
    let mut b = vec![0x9f, 0xeb, 1, 0];
    for v in [32, 0, tl, tl + ll, strs.len() as u32, tl, ll] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    types.iter().for_each(|w| b.extend_from_slice(&w.to_le_bytes()));
    layout.iter().for_each(|e| b.extend_from_slice(e));
    b.extend_from_slice(strs);
    b
}

#[test]
fn a_kind_we_do_not_know_is_stepped_over_and_reported() {
    let dir = scratch("btf-2026-unknown");
    let f = dir.join("unknown.btf");
    let blob = unknown_kind_blob();
    std::fs::write(&f, &blob).unwrap();
    let d = run(&["dump", &s(&f)]);
    ok("dump", &d);
    assert_eq!(
        String::from_utf8_lossy(&d.stdout),
        "[1] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED\n[2] UNKNOWN 'new'\n[3] PTR '(anon)' type_id=1\n"
    );
    let st = run(&["stats", &s(&f)]);
    ok("stats", &st);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(text.contains("KIND_20"), "{text}");
    assert_eq!(total_of(&text), blob.len(), "{text}");
    // what cannot be done without knowing the kind is refused
    for args in [
        vec!["dedup", &s(&f), "-o", &s(&dir.join("d.btf"))],
        vec!["dump", "--format", "c", &s(&f)],
    ] {
        let args: Vec<&str> = args.iter().map(|a| a.as_ref()).collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&o.stderr).is_empty());
    }
    assert!(!dir.join("d.btf").exists());
    // without the layout entry it cannot be read past: an error naming it
    let mut short = blob.clone();
    short[28..32].copy_from_slice(&80u32.to_le_bytes());
    std::fs::write(&f, &short).unwrap();
    let o = run(&["dump", &s(&f)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown kind 20"));
}

/// `btfkit pahole` follows the next reference when the command line names a
/// feature only it has (as kernel 7.1's build does), or when
/// `BTFKIT_PAHOLE_REFERENCE` pins it; pinned to v1.31 the name is ignored,
/// as v1.31 ignores unknown features.
#[test]
fn pahole_follows_next_when_asked() {
    let dir = scratch("btf-2026-pahole");
    let input = s(&repo_fixture("structs_unions.gcc-O2.o"));
    let out = dir.join("o.btf");
    let pahole = |env: Option<&str>, features: &str| {
        let _ = std::fs::remove_file(&out);
        let mut c = btfkit();
        c.args(["pahole", "-J", &format!("--btf_features={features}")])
            .arg(format!("--btf_encode_detached={}", s(&out)))
            .arg(&input)
            .env_remove("BTFKIT_PAHOLE_REFERENCE");
        if let Some(v) = env {
            c.env("BTFKIT_PAHOLE_REFERENCE", v);
        }
        let o = c.output().unwrap();
        ok("pahole", &o);
        let b = std::fs::read(&out).unwrap();
        let hdr = u32_at(&b, 4);
        (hdr, if hdr >= 32 { u32_at(&b, 28) } else { 0 })
    };
    assert_eq!(pahole(None, KERNEL), (24, 0));
    assert_eq!(pahole(None, &format!("{KERNEL},layout")), (32, 80));
    assert_eq!(pahole(Some("next"), KERNEL), (32, 0));
    assert_eq!(pahole(Some("v1.31"), &format!("{KERNEL},layout")), (24, 0));
    let list = |env: &str| {
        let o = btfkit()
            .args(["pahole", "--supported_btf_features"])
            .env("BTFKIT_PAHOLE_REFERENCE", env)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert!(list("next").ends_with(",true_signature,layout"));
    assert!(list("v1.31").ends_with(",global_var,attributes"));
    let o = btfkit()
        .args(["pahole", "--version"])
        .env("BTFKIT_PAHOLE_REFERENCE", "bogus")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
