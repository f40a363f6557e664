//! Minimal BTF for every kernel of an archive, in one run: each kernel read
//! once for all objects, kernels in parallel, one output per kernel in the
//! archive's layout, a report line per kernel, resumable and sharded as
//! `btfkit kernel` is, and optionally one bundle of all outputs.
//!
//! **Report.** `OUT/core-min-K-of-N.jsonl` (N = 1 without shards) only
//! grows: each run appends a header line, then a line per kernel as it
//! finishes, then a summary line. A kernel's line says where its output
//! went, its SHA-256 and size, the relocations resolved, and what matched
//! nothing (left out of the output, which is still written) — or why the
//! kernel failed. A run reuses an output when the report's last line for
//! that kernel is a success with the same objects, btfkit version and input
//! (size and modification time), and the file still has the recorded hash.
//!
//! **Layout.** Each kernel's output is its path below the archive (the
//! archive directory, or a list file's directory) with `.btf`: a kernel
//! directory `a/b/` gives `OUT/a/b.btf`, a BTFHub `d/v/arch/k.btf.tar.xz`
//! gives `OUT/d/v/arch/k.btf`, BTFHub's own layout for minimal BTF.
//!
//! **Bundle.** A tar.xz of every output of the run, by path; an output
//! identical to an earlier one is stored as a hard link to it, so the
//! bundle holds each distinct minimal BTF once.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use thiserror::Error;

use super::kernels::{self, Source};
use super::object::BpfObject;
use crate::error::Error;

/// How to run over an archive.
#[derive(Clone, Debug)]
pub struct Run {
    pub archive: PathBuf,
    pub out_dir: PathBuf,
    pub bundle: Option<PathBuf>,
    /// Shard K of N (0-based).
    pub shard: (usize, usize),
    pub jobs: Option<usize>,
    pub progress: bool,
}

#[derive(Debug, Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Input(#[from] Error),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: the output directory is the archive itself: its files would be replaced", path.display())]
    OutIsArchive { path: PathBuf },
}

/// What became of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelOutcome {
    Ok,
    Reused,
    Failed(String),
}

/// One kernel's result, as its report line says.
#[derive(Clone, Debug)]
pub struct KernelDone {
    pub kernel: String,
    /// The output, relative to the output directory.
    pub out: PathBuf,
    pub outcome: KernelOutcome,
    pub sha256: Option<String>,
    pub bytes: usize,
    pub left_out: Vec<String>,
}

/// The run's result.
#[derive(Debug)]
pub struct Done {
    pub kernels: Vec<KernelDone>,
    /// One line per failed kernel: the kernel and why.
    pub failed: Vec<String>,
    /// The bundle's distinct outputs and all outputs, when one was written.
    pub bundle: Option<(usize, usize)>,
    pub report: PathBuf,
}

impl Done {
    pub fn summary(&self) -> String {
        let count = |f: fn(&KernelOutcome) -> bool| self.kernels.iter().filter(|k| f(&k.outcome)).count();
        let partial = self
            .kernels
            .iter()
            .filter(|k| !matches!(k.outcome, KernelOutcome::Failed(_)) && !k.left_out.is_empty())
            .count();
        let bytes: usize = self.kernels.iter().map(|k| k.bytes).sum();
        let bundle = self
            .bundle
            .map_or(String::new(), |(d, n)| format!("; bundle: {n} outputs, {d} distinct"));
        format!(
            "{} kernels: {} written, {} reused, {} failed, {partial} with relocations that matched nothing; {bytes} bytes{bundle}; report {}",
            self.kernels.len(),
            count(|o| *o == KernelOutcome::Ok),
            count(|o| *o == KernelOutcome::Reused),
            count(|o| matches!(o, KernelOutcome::Failed(_))),
            self.report.display()
        )
    }
}

/// The report file of shard `k` of `n`.
pub fn report_name(k: usize, n: usize) -> String {
    format!("core-min-{k}-of-{n}.jsonl")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.into(),
        source,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a reused output must have been made from: the objects and this
/// btfkit.
fn run_key(objects: &[BpfObject]) -> String {
    let mut h = Sha256::new();
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for o in objects {
        h.update(o.sha256.as_bytes());
    }
    hex(&h.finalize())
}

/// The input files of a kernel, as `size:mtime` stamps (vmlinux first).
fn input_stamp(src: &Source) -> String {
    let path = match src {
        Source::File(p) | Source::TarXz(p) => p.clone(),
        Source::Dir { vmlinux, .. } => vmlinux.clone(),
    };
    match fs::metadata(&path) {
        Ok(m) => {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}:{mtime}", m.len())
        }
        Err(_) => String::new(),
    }
}

/// Where a kernel's output goes below the output directory.
fn out_path(src: &Source, base: &Path) -> PathBuf {
    let p = match src {
        Source::File(p) | Source::TarXz(p) => p,
        Source::Dir { root, .. } => root,
    };
    let rel = p.strip_prefix(base).ok().filter(|r| !r.as_os_str().is_empty());
    // Outside the archive (a list's absolute entry): its last two parts.
    let rel: PathBuf = match rel {
        Some(r) => r.components().filter(|c| matches!(c, Component::Normal(_))).collect(),
        None => {
            let parts: Vec<_> = p.components().filter(|c| matches!(c, Component::Normal(_))).collect();
            parts[parts.len().saturating_sub(2)..].iter().collect()
        }
    };
    let s = rel.to_string_lossy().into_owned();
    let stem = s
        .strip_suffix(".btf.tar.xz")
        .or_else(|| s.strip_suffix(".tar.xz"))
        .or_else(|| s.strip_suffix(".btf"))
        .unwrap_or(s.trim_end_matches('/'));
    PathBuf::from(format!("{stem}.btf"))
}

/// The last line of an earlier run for each kernel.
fn earlier(report: &Path) -> BTreeMap<String, Value> {
    let mut last = BTreeMap::new();
    let Ok(text) = fs::read_to_string(report) else {
        return last;
    };
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line)
            && let Some(k) = v.get("kernel").and_then(Value::as_str)
        {
            last.insert(k.to_string(), v);
        }
    }
    last
}

fn file_sha256(path: &Path) -> Option<String> {
    fs::read(path).ok().map(|b| hex(&Sha256::digest(&b)))
}

/// Runs the archive: every kernel of shard K of N.
pub fn run(objects: &[BpfObject], run: &Run) -> Result<Done, ArchiveError> {
    let all = kernels::sources(&run.archive)?;
    let base = if run.archive.is_dir() {
        run.archive.clone()
    } else {
        run.archive.parent().unwrap_or(Path::new(".")).to_path_buf()
    };
    fs::create_dir_all(&run.out_dir).map_err(io(&run.out_dir))?;
    let out_canon = fs::canonicalize(&run.out_dir).map_err(io(&run.out_dir))?;
    if fs::canonicalize(&base).is_ok_and(|b| b == out_canon) {
        return Err(ArchiveError::OutIsArchive {
            path: run.out_dir.clone(),
        });
    }
    let (k, n) = run.shard;
    let total = all.len();
    let sources: Vec<Source> = super::matrix::shard(all, k, n);
    let key = run_key(objects);
    let report = run.out_dir.join(report_name(k, n));
    let before = earlier(&report);
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&report)
        .map_err(io(&report))?;
    let header = json!({
        "schema": "btfkit-core-min/1",
        "version": env!("CARGO_PKG_VERSION"),
        "objects": objects.iter().map(|o| json!({"path": o.path.display().to_string(), "sha256": o.sha256})).collect::<Vec<_>>(),
        "archive": run.archive.display().to_string(),
        "shard": [k, n],
        "kernels": sources.len(),
        "kernels_in_archive": total,
    });
    writeln!(file, "{header}").map_err(io(&report))?;
    let file = Mutex::new(file);
    let bar = run.progress.then(|| {
        let b = indicatif::ProgressBar::new(sources.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} kernels {elapsed_precise}")
                .expect("a valid template"),
        );
        b
    });
    let one = |src: &Source| -> Result<KernelDone, ArchiveError> {
        let t0 = Instant::now();
        let name = src.name();
        let rel = out_path(src, &base);
        let dest = run.out_dir.join(&rel);
        let stamp = input_stamp(src);
        let reusable = before.get(&name).and_then(|v| {
            let ok = matches!(v["outcome"].as_str(), Some("ok" | "reused"))
                && v["key"].as_str() == Some(key.as_str())
                && v["input"].as_str() == Some(stamp.as_str())
                && v["out"].as_str() == Some(rel.to_string_lossy().as_ref());
            let sha = v["sha256"].as_str()?;
            (ok && file_sha256(&dest).as_deref() == Some(sha)).then_some(v)
        });
        let mut line = json!({"kernel": name, "out": rel.to_string_lossy(), "key": key, "input": stamp});
        let done = if let Some(v) = reusable {
            line["outcome"] = "reused".into();
            for f in [
                "sha256",
                "bytes",
                "types",
                "relocations",
                "resolved",
                "left_out",
                "modules",
            ] {
                line[f] = v[f].clone();
            }
            KernelDone {
                kernel: name,
                out: rel,
                outcome: KernelOutcome::Reused,
                sha256: v["sha256"].as_str().map(str::to_string),
                bytes: v["bytes"].as_u64().unwrap_or(0) as usize,
                left_out: left_out_of(v),
            }
        } else {
            match make(src, objects, &dest) {
                Ok(m) => {
                    line["outcome"] = "ok".into();
                    line["sha256"] = m.sha256.clone().into();
                    line["bytes"] = m.bytes.into();
                    line["types"] = m.types.into();
                    line["relocations"] = m.relocations.into();
                    line["resolved"] = m.resolved.into();
                    line["left_out"] = m.left_out.clone().into();
                    line["modules"] = json!(m.modules);
                    KernelDone {
                        kernel: name,
                        out: rel,
                        outcome: KernelOutcome::Ok,
                        sha256: Some(m.sha256),
                        bytes: m.bytes,
                        left_out: m.left_out,
                    }
                }
                Err(e) => {
                    line["outcome"] = "failed".into();
                    line["error"] = e.clone().into();
                    KernelDone {
                        kernel: name,
                        out: rel,
                        outcome: KernelOutcome::Failed(e),
                        sha256: None,
                        bytes: 0,
                        left_out: Vec::new(),
                    }
                }
            }
        };
        line["seconds"] = t0.elapsed().as_secs_f64().into();
        {
            let mut f = file.lock().expect("no writer panics");
            writeln!(f, "{line}").map_err(io(&report))?;
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
        Ok(done)
    };
    let results: Vec<Result<KernelDone, ArchiveError>> = super::matrix::per_kernel(&sources, run.jobs, one);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let kernels = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let failed: Vec<String> = kernels
        .iter()
        .filter_map(|k| match &k.outcome {
            KernelOutcome::Failed(e) => Some(format!("{}: {e}", k.kernel)),
            _ => None,
        })
        .collect();
    let bundle = match &run.bundle {
        Some(path) => Some(write_bundle(path, &run.out_dir, &kernels)?),
        None => None,
    };
    let count = |o: &str| {
        kernels
            .iter()
            .filter(|k| match &k.outcome {
                KernelOutcome::Ok => o == "ok",
                KernelOutcome::Reused => o == "reused",
                KernelOutcome::Failed(_) => o == "failed",
            })
            .count()
    };
    let summary = json!({"summary": {"ok": count("ok"), "reused": count("reused"), "failed": count("failed"),
        "bundle": bundle.map(|(d, n)| json!({"outputs": n, "distinct": d}))}});
    let mut f = file.into_inner().expect("no writer panics");
    writeln!(f, "{summary}").map_err(io(&report))?;
    f.sync_all().map_err(io(&report))?;
    Ok(Done {
        kernels,
        failed,
        bundle,
        report,
    })
}

fn left_out_of(v: &Value) -> Vec<String> {
    v["left_out"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

struct Made {
    sha256: String,
    bytes: usize,
    types: u32,
    relocations: usize,
    resolved: usize,
    left_out: Vec<String>,
    modules: Vec<(String, usize)>,
}

/// One kernel: read, minimized, written. Errors as one line of text.
fn make(src: &Source, objects: &[BpfObject], dest: &Path) -> Result<Made, String> {
    let target = kernels::load(src).map_err(|e| e.to_string())?;
    let (marks, min) = super::min::minimize(&target, objects).map_err(|e| e.to_string())?;
    let bytes = crate::btf::write::to_bytes(&min.btf);
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    crate::output::write_atomic(dest, &bytes).map_err(|e| e.to_string())?;
    Ok(Made {
        sha256: hex(&Sha256::digest(&bytes)),
        bytes: bytes.len(),
        types: min.btf.type_count(),
        relocations: marks.relocations,
        resolved: marks.resolved,
        left_out: marks.unresolved.clone(),
        modules: min.from_modules,
    })
}

/// The bundle: every output by path, identical ones as hard links to the
/// first. Returns (distinct, all).
fn write_bundle(path: &Path, out_dir: &Path, kernels: &[KernelDone]) -> Result<(usize, usize), ArchiveError> {
    let mut outs: Vec<(&Path, &str)> = kernels
        .iter()
        .filter_map(|k| Some((k.out.as_path(), k.sha256.as_deref()?)))
        .collect();
    outs.sort();
    let mut first: BTreeMap<&str, &Path> = BTreeMap::new();
    crate::output::write_atomic_with(path, |w| {
        let xz = liblzma::write::XzEncoder::new(w, 9);
        let mut tar = tar::Builder::new(xz);
        tar.mode(tar::HeaderMode::Deterministic);
        for (rel, sha) in &outs {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_mtime(0);
            if let Some(target) = first.get(sha) {
                h.set_entry_type(tar::EntryType::Link);
                h.set_size(0);
                tar.append_link(&mut h, rel, target)?;
            } else {
                let bytes = fs::read(out_dir.join(rel))?;
                if hex(&Sha256::digest(&bytes)) != *sha {
                    return Err(std::io::Error::other(format!(
                        "{} changed since it was written",
                        out_dir.join(rel).display()
                    )));
                }
                h.set_size(bytes.len() as u64);
                tar.append_data(&mut h, rel, bytes.as_slice())?;
                first.insert(sha, rel);
            }
        }
        tar.into_inner()?.finish()?;
        Ok(())
    })
    .map_err(|e| ArchiveError::Io {
        path: path.into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok((first.len(), outs.len()))
}
