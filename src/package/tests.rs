//! Packages assembled in memory (ar + tar for Debian, lead + headers + cpio
//! for RPM), read back whole, filtered, cut short at every length and
//! garbled. The packages built by dpkg-deb and rpmbuild are in
//! tests/package.rs.

use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{Contents, Entry, PackageError, PackageKind, open};

/// A file under the temp dir, removed when dropped.
pub(super) struct Temp(pub(super) PathBuf);

impl Temp {
    pub(super) fn new(bytes: &[u8]) -> Temp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "btfkit-package-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, bytes).unwrap();
        Temp(path)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What a test archive holds, in order.
enum Item {
    Dir(&'static str),
    File(String, Vec<u8>, u64),
    Symlink(&'static str, &'static str),
    /// A hardlink to the file named second.
    Hardlink(&'static str, &'static str),
}

fn items() -> Vec<Item> {
    let long = format!("./usr/lib/debug/{}/long.ko", "d".repeat(120));
    vec![
        Item::Dir("./"),
        Item::Dir("./usr/"),
        Item::File(
            "./usr/lib/debug/boot/vmlinux-6.1".into(),
            b"\x7fELF vmlinux".repeat(300),
            1_700_000_000,
        ),
        Item::Symlink("./usr/lib/debug/vmlinux", "boot/vmlinux-6.1"),
        Item::File("./empty".into(), Vec::new(), 5),
        Item::File(long, (0..=255u8).cycle().take(5001).collect(), 42),
        Item::Hardlink("./usr/lib/debug/boot/again", "./usr/lib/debug/boot/vmlinux-6.1"),
        Item::File(
            "./usr/lib/debug/lib/modules/6.1/kernel/a.ko".into(),
            b"module a".to_vec(),
            7,
        ),
    ]
}

/// The entries `items()` should give, in order.
fn expected() -> Vec<Entry> {
    items()
        .into_iter()
        .filter_map(|i| match i {
            Item::File(p, d, t) => Some(Entry {
                path: p.trim_start_matches("./").to_string(),
                size: d.len() as u64,
                mtime: t,
                data: Contents::Memory(d),
            }),
            _ => None,
        })
        .collect()
}

fn tar_bytes() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for item in items() {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(0);
        match item {
            Item::Dir(p) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, p, &[][..]).unwrap();
            }
            Item::File(p, d, t) => {
                h.set_size(d.len() as u64);
                h.set_mtime(t);
                b.append_data(&mut h, p, &d[..]).unwrap();
            }
            Item::Symlink(p, to) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, p, to).unwrap();
            }
            Item::Hardlink(p, to) => {
                h.set_entry_type(tar::EntryType::Link);
                h.set_size(0);
                b.append_link(&mut h, p, to).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

fn compress(name: &str, data: &[u8]) -> Vec<u8> {
    match name {
        "none" => data.to_vec(),
        "xz" => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "lzma" => {
            let opts = liblzma::stream::LzmaOptions::new_preset(6).unwrap();
            let s = liblzma::stream::Stream::new_lzma_encoder(&opts).unwrap();
            let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), s);
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "zstd" => zstd::encode_all(data, 3).unwrap(),
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "bzip2" => b"BZh9 not really".to_vec(),
        _ => unreachable!("{name}"),
    }
}

fn deb(data_member: &str, data: &[u8]) -> Vec<u8> {
    let mut ar = ar::Builder::new(Vec::new());
    let mut add = |name: &str, body: &[u8]| {
        let h = ar::Header::new(name.as_bytes().to_vec(), body.len() as u64);
        ar.append(&h, body).unwrap();
    };
    add("debian-binary", b"2.0\n");
    add("control.tar.gz", &compress("gzip", &[0u8; 1024]));
    add(data_member, data);
    ar.into_inner().unwrap()
}

fn deb_with(compressor: &str) -> Vec<u8> {
    let suffix = match compressor {
        "none" => "",
        "xz" => ".xz",
        "lzma" => ".lzma",
        "zstd" => ".zst",
        "gzip" => ".gz",
        "bzip2" => ".bz2",
        _ => unreachable!(),
    };
    deb(&format!("data.tar{suffix}"), &compress(compressor, &tar_bytes()))
}

fn cpio_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 0;
    let mut entry = |out: &mut Vec<u8>, name: &str, mode: u32, nlink: u32, mtime: u64, data: &[u8]| {
        ino += 1;
        let fields = [
            ino,
            mode,
            0,
            0,
            nlink,
            mtime as u32,
            data.len() as u32,
            8,
            1,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        out.extend_from_slice(b"070701");
        for f in fields {
            out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out.extend_from_slice(data);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    };
    for item in items() {
        match item {
            Item::Dir(p) => entry(&mut out, p.trim_end_matches('/'), 0o40755, 2, 0, b""),
            Item::File(p, d, t) => entry(&mut out, &p, 0o100644, 1, t, &d),
            Item::Symlink(p, to) => entry(&mut out, p, 0o120777, 1, 0, to.as_bytes()),
            // newc: the first link of a pair has no data, the last has it
            Item::Hardlink(p, _) => entry(&mut out, p, 0o100644, 2, 0, b""),
        }
    }
    entry(&mut out, "TRAILER!!!", 0, 1, 0, b"");
    out
}

/// An RPM header with the given (tag, type, value bytes) entries.
fn rpm_header(tags: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut index = Vec::new();
    let mut store = Vec::new();
    for &(tag, ty, value) in tags {
        for w in [tag, ty, store.len() as u32, 1] {
            index.extend_from_slice(&w.to_be_bytes());
        }
        store.extend_from_slice(value);
    }
    let mut h = vec![0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0];
    h.extend_from_slice(&(tags.len() as u32).to_be_bytes());
    h.extend_from_slice(&(store.len() as u32).to_be_bytes());
    h.extend(index);
    h.extend(store);
    h
}

fn rpm_with(compressor: Option<&str>) -> Vec<u8> {
    rpm_around(compressor, &cpio_bytes())
}

pub(super) fn rpm_around(compressor: Option<&str>, cpio: &[u8]) -> Vec<u8> {
    let mut lead = vec![0u8; 96];
    lead[..4].copy_from_slice(&[0xed, 0xab, 0xee, 0xdb]);
    lead[4] = 3;
    lead[10..14].copy_from_slice(b"test");
    lead[79] = 5;
    // a 5-byte store: the signature header needs 3 bytes of padding
    let sig = rpm_header(&[(1000, 6, b"sig!\0")]);
    let mut main_tags: Vec<(u32, u32, &[u8])> = vec![(1000, 6, b"test\0"), (1124, 6, b"cpio\0")];
    let name = compressor.map(|c| format!("{c}\0"));
    if let Some(n) = &name {
        main_tags.push((1125, 6, n.as_bytes()));
    }
    let main = rpm_header(&main_tags);
    let mut out = lead;
    out.extend(&sig);
    out.resize(out.len() + (8 - sig.len() % 8) % 8, 0);
    out.extend(main);
    out.extend(compress(compressor.unwrap_or("gzip"), cpio));
    out
}

fn read_all(bytes: &[u8]) -> Result<Vec<Entry>, PackageError> {
    let t = Temp::new(bytes);
    open(&t.0)?.collect()
}

#[test]
fn deb_every_compressor_gives_the_regular_files_in_order() {
    for c in ["none", "xz", "lzma", "zstd", "gzip"] {
        let got = read_all(&deb_with(c)).unwrap_or_else(|e| panic!("{c}: {e}"));
        assert_eq!(got, expected(), "{c}");
    }
}

#[test]
fn rpm_every_compressor_gives_the_regular_files_in_order() {
    for c in [Some("xz"), Some("lzma"), Some("zstd"), Some("gzip"), None] {
        let got = read_all(&rpm_with(c)).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert_eq!(got, expected(), "{c:?}");
    }
}

#[test]
fn kind_is_found_by_magic() {
    let d = Temp::new(&deb_with("none"));
    let r = Temp::new(&rpm_with(Some("xz")));
    assert_eq!(open(&d.0).unwrap().kind(), PackageKind::Deb);
    assert_eq!(open(&r.0).unwrap().kind(), PackageKind::Rpm);
    for junk in [&b""[..], b"!<arch>", b"\x7fELF\x02\x01\x01\0\0\0", b"\xed\xab\xee"] {
        let t = Temp::new(junk);
        assert!(
            matches!(open(&t.0), Err(PackageError::NotAPackage { path }) if path == t.0),
            "{junk:?}"
        );
    }
    let missing = Path::new("/nonexistent/btfkit/x.deb");
    assert!(matches!(open(missing), Err(PackageError::Open { .. })));
}

#[test]
fn select_keeps_only_the_chosen_files() {
    for bytes in [deb_with("zstd"), rpm_with(Some("zstd"))] {
        let t = Temp::new(&bytes);
        let got: Vec<String> = open(&t.0)
            .unwrap()
            .select(|p| p.ends_with(".ko") || p.starts_with("usr/lib/debug/boot/"))
            .map(|e| e.unwrap().path)
            .collect();
        let want: Vec<String> = expected()
            .into_iter()
            .map(|e| e.path)
            .filter(|p| p.ends_with(".ko") || p.starts_with("usr/lib/debug/boot/"))
            .collect();
        assert_eq!(got, want);
        assert_eq!(want.len(), 3);
    }
}

/// xz as `xz -T` and `dpkg-deb` write it: independent blocks of
/// `block` bytes (here small, so that the test payload has many).
fn xz_in_blocks(data: &[u8], block: u64) -> Vec<u8> {
    let mut mt = liblzma::stream::MtStreamBuilder::new();
    mt.threads(2).block_size(block).preset(6);
    let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), mt.encoder().unwrap());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn read_all_on(threads: usize, bytes: &[u8]) -> Result<Vec<Entry>, PackageError> {
    let t = Temp::new(bytes);
    open(&t.0)?.threads(threads).collect()
}

/// The multi-threaded decoder gives the one-threaded decoder's files: a
/// payload of one block, of many, and of several streams concatenated
/// with stream padding between them (as `xz -d` reads them).
#[test]
fn xz_on_several_threads_gives_the_same_files() {
    let tar = tar_bytes();
    // not at a 512-byte boundary: a cut after the first stream must not
    // look like a whole tar
    let (head, tail) = tar.split_at((tar.len() / 2) | 1);
    let mut two_streams = xz_in_blocks(head, 1 << 10);
    two_streams.extend([0u8; 8]);
    two_streams.extend(compress("xz", tail));
    let payloads = [
        ("one block", compress("xz", &tar)),
        ("blocks", xz_in_blocks(&tar, 1 << 10)),
        ("two streams", two_streams.clone()),
    ];
    for (what, xz) in payloads {
        let deb = deb("data.tar.xz", &xz);
        for threads in [1, 2, 3] {
            let got = read_all_on(threads, &deb).unwrap_or_else(|e| panic!("{what}, {threads} threads: {e}"));
            assert_eq!(got, expected(), "{what}, {threads} threads");
        }
    }
    // padding that is not a multiple of four is an error, as for xz -d
    let mut bad = xz_in_blocks(head, 1 << 10);
    bad.extend([0u8; 3]);
    bad.extend(compress("xz", tail));
    for threads in [1, 2] {
        assert!(
            read_all_on(threads, &deb("data.tar.xz", &bad)).is_err(),
            "{threads} threads"
        );
    }
    // every cut of a payload of many blocks is an error, on any thread count
    let whole = deb("data.tar.xz", &two_streams);
    let step = (whole.len() / 300).max(1);
    for len in (0..whole.len() - 1).step_by(step).chain([whole.len() - 1]) {
        let padded = whole.len().is_multiple_of(2) && whole[len..] == *b"\n";
        if let Ok(v) = read_all_on(2, &whole[..len])
            && !padded
        {
            panic!("cut at {len} of {}: read {} entries, no error", whole.len(), v.len());
        }
    }
}

/// Over the spill size, a file comes in a temporary file of the same bytes
/// (deleted with its last clone); the others in memory, as without it.
#[test]
fn files_over_the_spill_size_come_in_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    for bytes in [deb_with("zstd"), rpm_with(Some("zstd"))] {
        let t = Temp::new(&bytes);
        let want = expected();
        let over = 10;
        let got: Vec<Entry> = open(&t.0)
            .unwrap()
            .spill_over(over, dir.path().to_path_buf())
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(got.len(), want.len());
        let mut spilled = Vec::new();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((&g.path, g.size, g.mtime), (&w.path, w.size, w.mtime));
            let Contents::Memory(w_data) = &w.data else {
                unreachable!("expected() is in memory")
            };
            match &g.data {
                Contents::Spilled(p) => {
                    assert!(g.size > over, "{} spilled at {} bytes", g.path, g.size);
                    assert_eq!(&std::fs::read(&**p).unwrap(), w_data, "{}", g.path);
                    spilled.push(p.to_path_buf());
                }
                Contents::Memory(d) => {
                    assert!(g.size <= over, "{} held at {} bytes", g.path, g.size);
                    assert_eq!(d, w_data, "{}", g.path);
                }
            }
        }
        assert!(!spilled.is_empty(), "no file of the test package is over {over} bytes");
        drop(got);
        assert!(spilled.iter().all(|p| !p.exists()), "a spilled file outlived its entry");
    }
}

#[test]
fn unknown_compressors_are_named() {
    let e = read_all(&deb_with("bzip2")).unwrap_err();
    assert!(
        matches!(&e, PackageError::UnknownCompressor { name, place, .. } if name == "bz2" && place == "data.tar.bz2"),
        "{e}"
    );
    let mut rpm = rpm_with(Some("zstd"));
    let at = rpm.windows(5).position(|w| w == b"zstd\0").unwrap();
    rpm[at..at + 4].copy_from_slice(b"zzzz");
    let e = read_all(&rpm).unwrap_err();
    assert!(
        matches!(&e, PackageError::UnknownCompressor { name, .. } if name == "zzzz"),
        "{e}"
    );
    assert!(e.to_string().contains("tag 1125"), "{e}");
}

#[test]
fn a_deb_without_data_or_debian_binary_is_refused() {
    let mut ar = ar::Builder::new(Vec::new());
    ar.append(&ar::Header::new(b"debian-binary".to_vec(), 4), &b"2.0\n"[..])
        .unwrap();
    let e = read_all(&ar.into_inner().unwrap()).unwrap_err();
    assert!(e.to_string().contains("no data.tar member"), "{e}");

    let mut ar = ar::Builder::new(Vec::new());
    ar.append(&ar::Header::new(b"data.tar".to_vec(), 4), &b"abcd"[..])
        .unwrap();
    let e = read_all(&ar.into_inner().unwrap()).unwrap_err();
    assert!(e.to_string().contains("not debian-binary"), "{e}");
}

/// An ar header in the GNU or BSD long-name form, with no name table or a
/// claimed name of gigabytes: refused, never a panic or an allocation of
/// what the header claims (the `ar` crate panicked on `/5` and allocated
/// `#1/9999999999`).
#[test]
fn ar_long_name_forms_are_refused() {
    let member = |name: &str, size: &str| {
        let mut h = format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644).into_bytes();
        assert_eq!(h.len(), 60);
        h.extend(b"2.0\n");
        h
    };
    for (name, size) in [("/5", "4"), ("//", "4"), ("#1/9999999999", "4"), ("/", "4")] {
        let mut deb = b"!<arch>\n".to_vec();
        deb.extend(member(name, size));
        let e = read_all(&deb).unwrap_err();
        assert!(e.to_string().contains("long-name form"), "{name}: {e}");
    }
    let mut deb = b"!<arch>\n".to_vec();
    deb.extend(member("debian-binary", "4x"));
    let e = read_all(&deb).unwrap_err();
    assert!(e.to_string().contains("not a decimal number"), "{e}");
}

#[test]
fn stripped_cpio_is_refused_by_name() {
    let mut rpm = rpm_with(Some("xz"));
    let main_end = rpm.len() - compress("xz", &cpio_bytes()).len();
    rpm.truncate(main_end);
    let mut cpio = cpio_bytes();
    cpio[..6].copy_from_slice(b"07070X");
    rpm.extend(compress("xz", &cpio));
    let e = read_all(&rpm).unwrap_err();
    assert!(e.to_string().contains("07070X"), "{e}");
}

/// Every proper prefix of a package is an error (the one exception: a deb
/// whose last member lacks only its ar padding byte is complete).
#[test]
fn every_truncation_is_one_error() {
    let mut cases: Vec<(String, Vec<u8>)> = ["none", "xz", "zstd", "gzip", "lzma"]
        .iter()
        .map(|c| (format!("deb {c}"), deb_with(c)))
        .collect();
    cases.extend(
        ["xz", "zstd", "gzip", "lzma"]
            .iter()
            .map(|c| (format!("rpm {c}"), rpm_with(Some(c)))),
    );
    for (what, bytes) in cases {
        let step = (bytes.len() / 700).max(1);
        for len in (0..bytes.len()).step_by(step).chain([bytes.len() - 1]) {
            let cut = &bytes[..len];
            let padded_deb = what.starts_with("deb") && bytes.len() % 2 == 0 && bytes[len..] == *b"\n";
            match read_all(cut) {
                Err(_) => {}
                Ok(_) if padded_deb => {}
                Ok(v) => panic!(
                    "{what}: cut at {len} of {}: read {} entries, no error",
                    bytes.len(),
                    v.len()
                ),
            }
        }
    }
}

/// Garbled bytes give entries or one error, never a panic or a hang; an
/// error ends the iteration.
#[test]
fn garbled_bytes_never_panic() {
    let mut cases = vec![
        deb_with("none"),
        deb_with("gzip"),
        rpm_with(Some("zstd")),
        rpm_with(Some("xz")),
        // the multi-threaded decoder's path: many blocks
        deb("data.tar.xz", &xz_in_blocks(&tar_bytes(), 1 << 10)),
    ];
    // an uncompressed payload exposes the cpio and tar parsers themselves
    let mut rpm_plain = rpm_with(Some("gzip"));
    let gz = compress("gzip", &cpio_bytes()).len();
    rpm_plain.truncate(rpm_plain.len() - gz);
    let main_at = rpm_plain.windows(5).position(|w| w == b"gzip\0").unwrap();
    rpm_plain[main_at..main_at + 5].copy_from_slice(b"none\0");
    rpm_plain.extend(cpio_bytes());
    assert_eq!(read_all(&rpm_plain).unwrap(), expected());
    cases.push(rpm_plain);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for bytes in cases {
        for round in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..1 + round % 4 {
                let at = (rand() % b.len() as u64) as usize;
                b[at] = rand() as u8;
            }
            let t = Temp::new(&b);
            let Ok(pkg) = open(&t.0) else { continue };
            let pkg = pkg.threads(1 + round % 2);
            let mut errors = 0;
            let mut n = 0;
            for item in pkg {
                n += 1;
                assert!(n < 100, "runaway iteration");
                if item.is_err() {
                    errors += 1;
                }
            }
            assert!(errors <= 1);
        }
    }
}

/// The reader runs at most a couple of entries ahead of the caller.
#[test]
fn the_reader_thread_stays_bounded_ahead() {
    let mut tar = tar::Builder::new(Vec::new());
    for i in 0..20 {
        let mut h = tar::Header::new_gnu();
        h.set_size(1000);
        h.set_mode(0o644);
        tar.append_data(&mut h, format!("f{i}"), &[i as u8; 1000][..]).unwrap();
    }
    let t = Temp::new(&deb("data.tar", &tar.into_inner().unwrap()));
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let mut pkg = open(&t.0).unwrap().select(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
        true
    });
    assert_eq!(pkg.next().unwrap().unwrap().path, "f0");
    std::thread::sleep(Duration::from_millis(200));
    // f0 taken, f1 and f2 queued, f3 read and waiting to be queued
    assert!(asked.load(Ordering::Relaxed) <= 4, "{}", asked.load(Ordering::Relaxed));
    let rest: Vec<_> = pkg.map(|e| e.unwrap().data.in_memory().unwrap()[0]).collect();
    assert_eq!(rest, (1..20).collect::<Vec<u8>>());
}

/// Dropping the package mid-way stops its thread, also while the thread is
/// skipping through a large unselected file that compresses to almost
/// nothing (so the file itself is not read again while it skips). The filter
/// runs on the reader thread: at `big` it waits until the drop has begun,
/// then lets the thread skip. A thread that stopped is never asked about the
/// file after `big`.
#[test]
fn dropping_early_stops_the_reader() {
    let big = 64 << 20;
    let mut tar = tar::Builder::new(Vec::new());
    for (name, size) in [("small", 3), ("big", big), ("after", 3)] {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        tar.append_data(&mut h, name, std::io::repeat(b'x').take(size)).unwrap();
    }
    let tar = tar.into_inner().unwrap();
    let t = Temp::new(&deb("data.tar.zst", &zstd::encode_all(&tar[..], 1).unwrap()));
    drop(tar);
    assert!(
        std::fs::metadata(&t.0).unwrap().len() < 1 << 16,
        "the skip must not need file reads"
    );

    let stop: Arc<std::sync::OnceLock<Arc<AtomicBool>>> = Arc::default();
    let asked: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let (at_big, reached_big) = std::sync::mpsc::channel();
    let (stop_seen, asked_by) = (Arc::clone(&stop), Arc::clone(&asked));
    let mut pkg = open(&t.0).unwrap().select(move |p| {
        asked_by.lock().unwrap().push(p.to_string());
        if p == "big" {
            let _ = at_big.send(());
            let stop = stop_seen.wait();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        p == "small"
    });
    let first = pkg.next();
    // The drop begins only once the thread is at `big` (a drop before it
    // stops the thread earlier, which is not what this test is about).
    // Nothing may panic before the filter is released: the drop joins it.
    let reached = reached_big.recv_timeout(Duration::from_secs(60)).is_ok();
    if let super::State::Running(running) = &pkg.state {
        let _ = stop.set(Arc::clone(&running.stop));
    }
    drop(pkg);
    assert_eq!(first.unwrap().unwrap().data, Contents::Memory(b"xxx".to_vec()));
    assert!(reached, "the reader thread never asked about big");
    assert_eq!(*asked.lock().unwrap(), ["small", "big"]);
}

/// Wall and CPU time of reading every entry of `$BTFKIT_PKG_MEASURE` (a real
/// package), for the figures in the report; run by hand with `--ignored`.
#[test]
#[ignore = "needs a package named by BTFKIT_PKG_MEASURE"]
fn measure_reading_a_real_package() {
    let Some(path) = std::env::var_os("BTFKIT_PKG_MEASURE") else {
        panic!("set BTFKIT_PKG_MEASURE to a .deb or .rpm");
    };
    let usage = || crate::metrics::usage().expect("getrusage");
    let cpu0 = usage().cpu;
    let wall = Instant::now();
    let (mut n, mut bytes, mut largest) = (0u64, 0u64, 0u64);
    for e in open(Path::new(&path)).unwrap() {
        let e = e.unwrap();
        n += 1;
        bytes += e.size;
        largest = largest.max(e.size);
    }
    let wall = wall.elapsed().as_secs_f64();
    let end = usage();
    eprintln!(
        "{n} entries, {bytes} bytes (largest {largest}); wall {wall:.2} s, cpu {:.2} s, peak rss {} MiB",
        (end.cpu - cpu0).as_secs_f64(),
        end.peak_rss_bytes >> 20
    );
}
