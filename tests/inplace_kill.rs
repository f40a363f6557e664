//! A kill (SIGKILL) at any moment of an in-place rewrite leaves the input
//! either byte-identical to before or equal to the complete new file, with
//! its mode kept; a temporary file the killed process leaves behind is
//! removed by the next run, which succeeds and writes the same bytes.
//!
//! The input is a fixture object with a 160 MB extra section, so the new
//! file takes long enough to write that the test can watch the temporary
//! file grow and kill the writer at chosen points of it.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::*;

const JUNK: usize = 160 << 20;
const MODE: u32 = 0o750;

/// The writer's temporary files in `dir` (name, size).
fn temps(dir: &Path) -> Vec<(String, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.contains(".btfkit-tmp.")
                .then(|| (n, e.metadata().map(|m| m.len()).unwrap_or(0)))
        })
        .collect()
}

fn put(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(MODE)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn spawn(input: &Path) -> Child {
    btfkit()
        .args(["encode", "--in-place", "-j1"])
        .arg(input)
        .spawn()
        .unwrap()
}

/// Where the kill happened.
#[derive(Debug, PartialEq)]
enum Hit {
    /// The temporary file held at least this many bytes.
    Writing(u64),
    /// The temporary file was complete (fsync or rename under way).
    Written,
    /// The process had already exited.
    Missed,
}

/// Runs the rewrite of `input` and kills it once its temporary file holds
/// `at` bytes (`at == full`: complete).
fn run_and_kill(input: &Path, dir: &Path, at: u64, full: u64) -> Hit {
    let mut child = spawn(input);
    let mark = format!(".btfkit-tmp.{}.", child.id());
    let t0 = Instant::now();
    let hit = loop {
        if child.try_wait().unwrap().is_some() {
            break Hit::Missed;
        }
        let size = temps(dir).into_iter().find(|(n, _)| n.contains(&mark)).map(|(_, s)| s);
        match size {
            Some(s) if s >= full => break Hit::Written,
            Some(s) if s >= at => break Hit::Writing(s),
            _ => {}
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "rewrite did not finish");
        std::thread::sleep(Duration::from_micros(200));
    };
    let _ = child.kill();
    child.wait().unwrap();
    hit
}

#[test]
fn killed_in_place_rewrite_leaves_old_or_new_file() {
    let dir = scratch("inplace-kill");
    let fixture = read_corpus("fixtures/bin/structs_unions.gcc-O2.o");
    // Not zeros, so no file system can store it sparsely.
    let junk: Vec<u8> = (0..JUNK).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let big = btfkit::elf::write::set_sections(&fixture, &[(".junk", &junk)]).unwrap();
    drop(junk);

    // The reference: the same rewrite, not killed.
    let reference = dir.join("ref.o");
    put(&reference, &big);
    let st = spawn(&reference).wait().unwrap();
    assert!(st.success(), "reference rewrite failed");
    let new = std::fs::read(&reference).unwrap();
    assert_ne!(new, big);
    assert_eq!(mode(&reference), MODE, "mode not kept");
    std::fs::remove_file(&reference).unwrap();
    let full = new.len() as u64;

    let input = dir.join("in.o");
    put(&input, &big);
    let mut during = 0;
    for frac in [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] {
        let at = ((full as f64 * frac) as u64).max(1);
        let hit = run_and_kill(&input, &dir, at, full);
        let now = std::fs::read(&input).unwrap();
        let state = if now == big {
            "old"
        } else if now == new {
            "new"
        } else {
            panic!(
                "killed at {hit:?} ({frac}): input is neither the old nor the new file ({} bytes)",
                now.len()
            );
        };
        assert_eq!(mode(&input), MODE, "killed at {hit:?}: mode changed");
        eprintln!(
            "kill at {:.0}% of {full} bytes: {hit:?}, input is the {state} file, temporaries {:?}",
            frac * 100.0,
            temps(&dir)
        );
        if let Hit::Writing(_) = hit {
            assert_eq!(
                state, "old",
                "killed before the new file was complete, yet the input changed"
            );
        }
        if hit != Hit::Missed {
            during += 1;
        }
        if state == "new" {
            put(&input, &big);
        }
    }
    assert!(
        during >= 4,
        "only {during} of 7 kills landed while the new file was written"
    );

    // The next run removes what the killed runs left and writes the same bytes.
    let st = spawn(&input).wait().unwrap();
    assert!(st.success(), "rewrite after the kills failed");
    assert!(
        std::fs::read(&input).unwrap() == new,
        "rewrite after the kills differs from the reference"
    );
    assert_eq!(mode(&input), MODE);
    assert_eq!(temps(&dir), vec![], "temporary files left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The file a symbolic link names is rewritten; the link stays a link.
#[test]
fn in_place_rewrite_follows_a_symlink() {
    let dir = scratch("inplace-symlink");
    let real = dir.join("real.o");
    put(&real, &read_corpus("fixtures/bin/structs_unions.gcc-O2.o"));
    let before = std::fs::read(&real).unwrap();
    let link = dir.join("link.o");
    std::os::unix::fs::symlink("real.o", &link).unwrap();
    let st = spawn(&link).wait().unwrap();
    assert!(st.success());
    assert!(
        std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(),
        "link replaced by a file"
    );
    assert!(std::fs::read(&real).unwrap() != before, "linked file not rewritten");
    assert_eq!(mode(&real), MODE);
    assert_eq!(temps(&dir), vec![]);
    let _ = std::fs::remove_dir_all(&dir);
}
