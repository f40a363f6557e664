//! Packages built by the real tools: `dpkg-deb --build` with each `-Z`,
//! `rpmbuild -bb` with each payload compressor, and a GNU `cpio -H newc`
//! archive in hand-made RPM framing. Each test prints why and returns where
//! its tool is missing (.ci/run installs them).
//!
//! Kept as unit tests (not in tests/) so they need no second build of the
//! crate and its binary.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::tests::{Temp, rpm_around};
use super::{Entry, PackageKind, open};

fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("btfkit-pkgtool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A payload tree under `root/prefix`: a vmlinux-like file, modules, an
/// empty file, a symlink, a hardlink and a directory; returns it as
/// normalised path → (data, mtime, inode) for the regular files.
fn payload(root: &Path, prefix: &str) -> BTreeMap<String, (Vec<u8>, u64, u64)> {
    let files: Vec<(String, Vec<u8>)> = vec![
        (
            format!("{prefix}/boot/vmlinux-6.1.0-test"),
            (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect(),
        ),
        (
            format!("{prefix}/modules/6.1.0-test/kernel/a/a.ko"),
            b"\x7fELF module a".repeat(100),
        ),
        (
            format!("{prefix}/modules/6.1.0-test/kernel/b/b.ko"),
            b"\x7fELF module b".to_vec(),
        ),
        (format!("{prefix}/empty"), Vec::new()),
    ];
    for (rel, data) in &files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
    }
    std::fs::create_dir_all(root.join(prefix).join("emptydir")).unwrap();
    std::os::unix::fs::symlink("boot/vmlinux-6.1.0-test", root.join(prefix).join("vmlinux")).unwrap();
    std::fs::hard_link(
        root.join(prefix).join("modules/6.1.0-test/kernel/b/b.ko"),
        root.join(prefix).join("modules/6.1.0-test/kernel/b/b-again.ko"),
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for (rel, data) in files.into_iter().chain([(
        format!("{prefix}/modules/6.1.0-test/kernel/b/b-again.ko"),
        b"\x7fELF module b".to_vec(),
    )]) {
        let m = std::fs::metadata(root.join(&rel)).unwrap();
        out.insert(rel, (data, m.mtime() as u64, m.ino()));
    }
    out
}

/// Every entry is a file of the tree with its data and mtime; every file of
/// the tree is an entry or a hardlink of one (tar and cpio give a hardlinked
/// file's data once).
fn check(what: &str, got: &[Entry], tree: &BTreeMap<String, (Vec<u8>, u64, u64)>) {
    let mut inodes = std::collections::HashSet::new();
    for e in got {
        let Some((data, mtime, ino)) = tree.get(&e.path) else {
            panic!("{what}: {} is not a regular file of the tree", e.path);
        };
        assert!(
            e.data.in_memory() == Some(&data[..]),
            "{what}: {}: data differs",
            e.path
        );
        assert_eq!(e.size, data.len() as u64, "{what}: {}", e.path);
        assert_eq!(e.mtime, *mtime, "{what}: {}", e.path);
        inodes.insert(*ino);
    }
    for (path, (_, _, ino)) in tree {
        assert!(inodes.contains(ino), "{what}: {path} is missing");
    }
    assert!(got.len() >= tree.len() - 1, "{what}: {} entries", got.len());
}

#[test]
fn dpkg_deb_packages_in_every_compression() {
    if !have("dpkg-deb") {
        return;
    }
    let dir = scratch("deb");
    let root = dir.join("root");
    let tree = payload(&root, "usr/lib/debug");
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        "Package: btfkit-test-dbg\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: test\n",
    )
    .unwrap();
    for z in ["xz", "zstd", "gzip", "none"] {
        let deb = dir.join(format!("t-{z}.deb"));
        run(Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Z", z, "--build"])
            .arg(&root)
            .arg(&deb));
        let pkg = open(&deb).unwrap();
        assert_eq!(pkg.kind(), PackageKind::Deb);
        let got: Vec<Entry> = pkg.map(|e| e.unwrap()).collect();
        check(&format!("deb -Z{z}"), &got, &tree);
        // the same files, in the same order, as dpkg's own tar listing
        let listing = Command::new("sh")
            .arg("-c")
            .arg(format!("dpkg-deb --fsys-tarfile {} | tar -tv", deb.display()))
            .output()
            .unwrap();
        let regular: Vec<String> = String::from_utf8_lossy(&listing.stdout)
            .lines()
            .filter(|l| l.starts_with('-') && !l.contains(" link to "))
            .map(|l| super::normalise(l.rsplit(' ').next().unwrap()))
            .collect();
        let paths: Vec<String> = got.iter().map(|e| e.path.clone()).collect();
        assert_eq!(paths, regular, "deb -Z{z}");
        let some: Vec<String> = open(&deb)
            .unwrap()
            .select(|p| p.ends_with(".ko"))
            .map(|e| e.unwrap().path)
            .collect();
        assert_eq!(some.len(), 2, "{some:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rpmbuild_packages_in_every_compression() {
    if !have("rpmbuild") {
        return;
    }
    let dir = scratch("rpm");
    let src = dir.join("src");
    let tree = payload(&src, "opt/btfkit-test");
    let spec = dir.join("t.spec");
    std::fs::write(
        &spec,
        format!(
            "Name: btfkit-test\nVersion: 1.0\nRelease: 1\nSummary: test\nLicense: MIT\nBuildArch: noarch\n\
             %define debug_package %{{nil}}\n%define __os_install_post %{{nil}}\n\
             %description\ntest\n%install\nmkdir -p %{{buildroot}}\ncp -a {}/. %{{buildroot}}/\n\
             %files\n/opt/btfkit-test\n",
            src.display()
        ),
    )
    .unwrap();
    for (z, payload) in [("xz", "w6.xzdio"), ("zstd", "w19.zstdio"), ("gzip", "w9.gzdio")] {
        let top = dir.join(format!("top-{z}"));
        run(Command::new("rpmbuild")
            .arg("-bb")
            .arg("--define")
            .arg(format!("_topdir {}", top.display()))
            .arg("--define")
            .arg(format!("_binary_payload {payload}"))
            .arg(&spec));
        let rpm = top.join("RPMS/noarch/btfkit-test-1.0-1.noarch.rpm");
        let pkg = open(&rpm).unwrap();
        assert_eq!(pkg.kind(), PackageKind::Rpm);
        let got: Vec<Entry> = pkg.map(|e| e.unwrap_or_else(|e| panic!("{z}: {e}"))).collect();
        // rpmbuild copies with cp -a: the mtimes are the tree's
        check(&format!("rpm {z}"), &got, &tree);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gnu_cpio_newc_in_rpm_framing() {
    if !have("cpio") {
        return;
    }
    let dir = scratch("cpio");
    let root = dir.join("root");
    let tree = payload(&root, "usr/lib/debug");
    let out = Command::new("sh")
        .arg("-c")
        .arg("find . | LC_ALL=C sort | cpio -o -H newc --quiet")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success());
    for z in ["xz", "gzip"] {
        let t = Temp::new(&rpm_around(Some(z), &out.stdout));
        let got: Vec<Entry> = open(&t.0).unwrap().map(|e| e.unwrap()).collect();
        check(&format!("cpio {z}"), &got, &tree);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
