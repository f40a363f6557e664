//! `btfkit encode` over many modules in one process: the base is loaded and
//! indexed once and shared (`Arc<Btf>`), modules are spread over threads (one
//! module per task, each encoded single-threaded so the pools do not nest),
//! and a failing module is reported without stopping the others.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};

use btfkit::btf::{self, Btf};
use btfkit::encode::Options;

use super::encode::{encode_btf, write_in_place};
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
/// `*.ko` under them (recursively), each directory's list sorted.
pub fn collect_inputs(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
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

/// `<module>.btf` for `dir/<module>.ko`.
fn out_name(input: &Path) -> PathBuf {
    let stem = input.file_stem().unwrap_or(input.as_os_str());
    let mut n = stem.to_os_string();
    n.push(".btf");
    PathBuf::from(n)
}

/// What one module produced: its own types and BTF bytes.
struct Done {
    types: u64,
    bytes: u64,
    /// Wall time of this module's encode, dedup and write.
    wall: std::time::Duration,
    /// CPU time of its decode and per-CU encode (summed over its threads).
    cpu: std::time::Duration,
}

pub fn run(b: Batch) -> anyhow::Result<i32> {
    super::encode::size_global_pool(b.opts.jobs);
    let t0 = Instant::now();
    let files = collect_inputs(&b.inputs)?;
    if b.base.is_none() && !b.quiet {
        // Right for ordinary objects; for kernel modules, a forgotten --base
        // makes each output hold every type it uses (100 times larger).
        eprintln!(
            "btfkit: note: no --base given: each output is standalone BTF; for kernel modules, pass \
             --base with the vmlinux BTF to get split BTF"
        );
    }
    if files.is_empty() {
        bail!("no input modules (no files given, or no *.ko under the directories given)");
    }
    if let Some(dir) = &b.out_dir {
        // Two inputs with one file name would overwrite each other's output.
        let mut seen = std::collections::HashMap::new();
        for f in &files {
            if let Some(prev) = seen.insert(out_name(f), f) {
                bail!(
                    "{} and {} would both be written to {}",
                    prev.display(),
                    f.display(),
                    dir.join(out_name(f)).display()
                );
            }
        }
        std::fs::create_dir_all(dir).with_context(|| format!("output directory {}", dir.display()))?;
    }
    let base: Option<Arc<Btf>> = match &b.base {
        Some(p) => {
            let base = btfkit::elf::load_btf(p, None).with_context(|| format!("base BTF {}", p.display()))?;
            // Build the base's string index now, once, rather than under the
            // first modules' lookups.
            base.strtab().find_own(b"");
            Some(Arc::new(base))
        }
        None => None,
    };
    // Likewise dedup's view of the base (its records laid out, the candidate
    // table after the prep pass): once, not once per module.
    let base_index = match (&base, b.dedup) {
        (Some(bb), true) => {
            Some(Arc::new(btfkit::dedup::BaseIndex::new(bb).with_context(|| {
                format!("base BTF {}", b.base.as_ref().expect("base given").display())
            })?))
        }
        _ => None,
    };
    let threads = btfkit::encode::effective_jobs(b.opts.jobs, files.len());
    let one = Options {
        jobs: 1,
        // a pool per module encode (of one thread): the modules run side by side
        global_pool: false,
        ..b.opts.clone()
    };
    let progress = std::io::stderr().is_terminal();
    let next = AtomicUsize::new(0);
    let done_count = AtomicUsize::new(0);
    let total = files.len();
    // Plain threads pulling the next module: a rayon worker that waits for
    // the encoder's own pool would steal further modules onto its stack
    // meanwhile, holding every one of them in memory at once.
    let per_thread: Vec<Vec<(usize, anyhow::Result<Done>)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads.min(total))
            .map(|_| {
                std::thread::Builder::new()
                    // Dedup and the DWARF walk recurse as deep as the types
                    // nest; the single-module path runs them on the 8 MiB main
                    // thread. Only touched pages cost memory.
                    .stack_size(64 << 20)
                    .spawn_scoped(sc, || {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(f) = files.get(i) else { break };
                            mine.push((i, encode_one(f, &b, base.clone(), base_index.as_ref(), &one)));
                            let n = done_count.fetch_add(1, Ordering::Relaxed) + 1;
                            if progress {
                                eprint!("\r\x1b[K[{n}/{total}] {}", f.display());
                            }
                        }
                        mine
                    })
                    .expect("cannot start a batch thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a batch thread panicked"))
            .collect()
    });
    let mut results: Vec<Option<anyhow::Result<Done>>> = (0..total).map(|_| None).collect();
    for (i, r) in per_thread.into_iter().flatten() {
        results[i] = Some(r);
    }
    let results: Vec<anyhow::Result<Done>> = results.into_iter().map(|r| r.expect("every module ran")).collect();
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
    results: &[anyhow::Result<Done>],
    threads: usize,
    wall: std::time::Duration,
    json: bool,
) {
    let (cpu, rss) = super::stats::process_cpu_and_peak_rss();
    let ok: Vec<&Done> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
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

fn encode_one(
    f: &Path,
    b: &Batch,
    base: Option<Arc<Btf>>,
    base_index: Option<&Arc<btfkit::dedup::BaseIndex>>,
    opts: &Options,
) -> anyhow::Result<Done> {
    let t0 = Instant::now();
    let opts = Options {
        timings: b.stats.is_some(),
        ..opts.clone()
    };
    let (out, summary, _) = encode_btf(f, base, base_index, &opts, b.dedup)?;
    let cpu = summary
        .loop_cpu
        .map(|c| c.decode + c.cu_encode + c.merge)
        .unwrap_or_default();
    if let Some(dir) = &b.out_dir {
        btfkit::output::write_atomic_with(&dir.join(out_name(f)), |w| btf::write::write_to(&out, w))?;
    }
    if b.in_place {
        write_in_place(f, &out, opts.features.distilled_base)?;
    }
    Ok(Done {
        types: out.own_type_count() as u64,
        bytes: btf::write::raw_len(&out) as u64,
        wall: t0.elapsed(),
        cpu,
    })
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
    fn output_name_is_module_stem_dot_btf() {
        assert_eq!(out_name(Path::new("/x/kernel/net/fou.ko")), PathBuf::from("fou.btf"));
    }
}
