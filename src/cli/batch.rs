//! `btfkit encode` over many modules in one process: the inputs expanded
//! (directories to their `*.ko`) and checked into a
//! [`BatchPlan`](btfkit::pipeline::batch::BatchPlan), which the pipeline
//! runs; then each module's outcome and the totals are reported (a failing
//! module does not stop the others).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use btfkit::encode::Options;
use btfkit::pipeline::batch::{self, BatchOutcome, BatchPlan, Module, output_name};

use super::{EXIT_ERR, EXIT_OK};

pub struct Batch {
    pub inputs: Vec<PathBuf>,
    pub out_dir: Option<PathBuf>,
    pub in_place: bool,
    pub base: Option<PathBuf>,
    pub dedup: bool,
    /// `jobs` is the number of modules encoded at once.
    pub opts: Options,
    /// No note and no summary line.
    pub quiet: bool,
    /// `--stats`: None, or Some(json): totals and per-module figures on stderr.
    pub stats: Option<bool>,
}

/// The files to encode: plain paths as given, directories expanded to every
/// `*.ko` under them (recursively), each directory's list sorted. A file
/// met again (a symbolic link to it, a path given twice) is encoded once,
/// under the first of its names: in place, two writers would race on it.
pub fn collect_inputs(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found = Vec::new();
            walk_ko(p, &mut found)?;
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    // A path that cannot be read stays, for the encoder to report.
    out.retain(|p| std::fs::metadata(p).map_or(true, |m| seen.insert((m.dev(), m.ino()))));
    Ok(out)
}

fn walk_ko(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let e = e.with_context(|| format!("{}", dir.display()))?;
        let p = e.path();
        let ft = e.file_type().with_context(|| format!("{}", p.display()))?;
        if ft.is_dir() {
            walk_ko(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "ko") {
            out.push(p);
        }
    }
    Ok(())
}

pub fn run(b: Batch) -> anyhow::Result<i32> {
    let t0 = Instant::now();
    let files = collect_inputs(&b.inputs)?;
    if files.is_empty() {
        bail!("no input modules (no files given, or no *.ko under the directories given)");
    }
    if b.base.is_none() && !b.quiet {
        // Right for ordinary objects; for kernel modules, a forgotten --base
        // makes each output hold every type it uses (100 times larger).
        eprintln!(
            "btfkit: note: no --base given: each output is standalone BTF; for kernel modules, pass \
             --base with the vmlinux BTF to get split BTF"
        );
    }
    if let Some(dir) = &b.out_dir {
        // Two inputs with one file name would overwrite each other's output.
        let mut seen = std::collections::HashMap::new();
        for f in &files {
            if let Some(prev) = seen.insert(output_name(f), f) {
                bail!(
                    "{} and {} would both be written to {}",
                    prev.display(),
                    f.display(),
                    dir.join(output_name(f)).display()
                );
            }
        }
        std::fs::create_dir_all(dir).with_context(|| format!("output directory {}", dir.display()))?;
    }
    let plan = BatchPlan {
        files,
        out_dir: b.out_dir.clone(),
        in_place: b.in_place,
        base: b.base.clone(),
        dedup: b.dedup,
        opts: b.opts.clone(),
    };
    let progress = std::io::stderr().is_terminal();
    let total = plan.files.len();
    let BatchOutcome {
        modules: results,
        threads,
    } = batch::run(&plan, &|n, f| {
        if progress {
            eprint!("\r\x1b[K[{n}/{total}] {}", f.display());
        }
    })?;
    let files = plan.files;
    let results: Vec<anyhow::Result<Module>> = results.into_iter().map(|r| r.map_err(anyhow::Error::from)).collect();
    if progress {
        eprint!("\r\x1b[K");
    }
    let (mut ok, mut failed, mut types, mut bytes) = (0usize, 0usize, 0u64, 0u64);
    for (f, r) in files.iter().zip(&results) {
        match r {
            Ok(d) => {
                ok += 1;
                types += d.types;
                bytes += d.bytes;
            }
            Err(e) => {
                failed += 1;
                let msg = super::one_line(e);
                let name = f.display().to_string();
                if msg.contains(&name) {
                    eprintln!("btfkit: error: {msg}");
                } else {
                    eprintln!("btfkit: error: {name}: {msg}");
                }
            }
        }
    }
    if let Some(json) = b.stats {
        report_stats(&files, &results, threads, t0.elapsed(), json);
    }
    if !b.quiet {
        out!(
            "{ok} modules encoded, {failed} failed, {types} types, {bytes} bytes of BTF{}, {threads} threads, {:.3}s",
            match (&b.out_dir, b.in_place) {
                (Some(d), _) => format!(" written to {}", d.display()),
                (None, true) => " written into the modules".to_string(),
                (None, false) => " (not written)".to_string(),
            },
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(if failed > 0 { EXIT_ERR } else { EXIT_OK })
}

/// `--stats` of a batch, on stderr: per module (path, outcome, types, bytes,
/// wall and decode+encode CPU seconds), then the totals with the process's
/// CPU time and peak RSS; a table, or one JSON object.
fn report_stats(
    files: &[PathBuf],
    results: &[anyhow::Result<Module>],
    threads: usize,
    wall: std::time::Duration,
    json: bool,
) {
    let usage = btfkit::metrics::usage();
    let (cpu, rss) = (
        usage.map(|u| u.cpu).unwrap_or_default(),
        usage.map_or(0, |u| u.peak_rss_bytes),
    );
    let ok: Vec<&Module> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let (types, bytes): (u64, u64) = (ok.iter().map(|d| d.types).sum(), ok.iter().map(|d| d.bytes).sum());
    if json {
        let modules: Vec<serde_json::Value> = files
            .iter()
            .zip(results)
            .map(|(f, r)| match r {
                Ok(d) => serde_json::json!({
                    "path": f.display().to_string(), "ok": true, "types": d.types, "bytes": d.bytes,
                    "wall_s": d.wall.as_secs_f64(), "cpu_s": d.cpu.as_secs_f64(),
                }),
                Err(e) => {
                    serde_json::json!({"path": f.display().to_string(), "ok": false, "error": super::one_line(e)})
                }
            })
            .collect();
        let v = serde_json::json!({
            "modules": modules,
            "totals": {
                "modules": files.len(), "encoded": ok.len(), "failed": files.len() - ok.len(),
                "types": types, "bytes": bytes, "threads": threads,
                "wall_s": wall.as_secs_f64(), "cpu_s": cpu.as_secs_f64(), "peak_rss_bytes": rss,
            },
        });
        eprintln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return;
    }
    eprintln!("{:>9} {:>9} {:>8} {:>10}  module", "wall s", "cpu s", "types", "bytes");
    for (f, r) in files.iter().zip(results) {
        match r {
            Ok(d) => eprintln!(
                "{:>9.3} {:>9.3} {:>8} {:>10}  {}",
                d.wall.as_secs_f64(),
                d.cpu.as_secs_f64(),
                d.types,
                d.bytes,
                f.display()
            ),
            Err(_) => eprintln!("{:>9} {:>9} {:>8} {:>10}  {} (failed)", "-", "-", "-", "-", f.display()),
        }
    }
    eprintln!(
        "total: {} modules ({} failed), {types} types, {bytes} bytes, {threads} threads, {:.3} s wall, {:.3} s CPU, peak RSS {:.1} MiB",
        files.len(),
        files.len() - ok.len(),
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        rss as f64 / (1 << 20) as f64
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_expand_to_sorted_ko_files() {
        let d = std::env::temp_dir().join(format!("btfkit-batch-collect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        for f in ["b.ko", "a.ko", "sub/c.ko", "notes.txt", "sub/x.o"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        let got = collect_inputs(&[d.clone(), PathBuf::from("z.ko")]).unwrap();
        let want: Vec<PathBuf> = vec![d.join("a.ko"), d.join("b.ko"), d.join("sub/c.ko"), "z.ko".into()];
        assert_eq!(got, want);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_met_twice_is_encoded_once() {
        let d = std::env::temp_dir().join(format!("btfkit-batch-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("b.ko"), b"").unwrap();
        std::os::unix::fs::symlink("b.ko", d.join("a.ko")).unwrap();
        std::os::unix::fs::symlink("b.ko", d.join("c.ko")).unwrap();
        let got = collect_inputs(&[d.clone(), d.join("b.ko"), d.join("missing.ko")]).unwrap();
        assert_eq!(got, vec![d.join("a.ko"), d.join("missing.ko")]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
