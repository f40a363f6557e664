//! Many objects against many kernels: each kernel read once and checked
//! against every object, kernels in parallel, and the results kept in
//! kernel order so the report never depends on scheduling. Renders the
//! summary matrix (objects × kernels, grouped by what breaks) as text or
//! JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use serde_json::{Value, json};

use super::check::{self, ObjectError, ProgramVerdict, Verdict};
use super::kernels::{self, Source};
use super::log::Log;
use super::object::BpfObject;
use super::relocate::{Outcome, PoisonCause, SkipCause};

/// How to run a check.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// Keep every relocation's result (for `--verbose` and JSON).
    pub verbose: bool,
    /// Kernels checked at once (`None`: rayon's pool).
    pub jobs: Option<usize>,
}

/// Every [`ReloLine::outcome`] a report can hold.
pub const RELO_OUTCOMES: [&str; 7] = [
    "patched",
    "poisoned",
    "poisoned (load width)",
    "skipped",
    "skipped (not loaded)",
    "skipped (no program)",
    "failed",
];

/// One relocation's result, for reports.
#[derive(Clone, Debug)]
pub struct ReloLine {
    pub section: String,
    pub relo: usize,
    pub program: Option<String>,
    pub insn: u32,
    pub kind: &'static str,
    pub path: String,
    /// `vmlinux` or a module, and the target type id.
    pub target: Option<(String, u32)>,
    /// `patched`, `poisoned`, `skipped` or `failed`.
    pub outcome: &'static str,
    pub value: Option<(u64, u64)>,
}

#[derive(Clone, Debug)]
pub struct ObjectResult {
    pub verdict: Verdict,
    pub programs: Vec<ProgramVerdict>,
    pub error: Option<ObjectError>,
    pub relocations: Vec<ReloLine>,
    pub patched: usize,
    pub poisoned: usize,
}

#[derive(Clone, Debug)]
pub struct KernelResult {
    pub kernel: String,
    /// The kernel's BTF could not be read: no object was checked.
    pub load_error: Option<String>,
    /// One per object, in the objects' order.
    pub objects: Vec<ObjectResult>,
    pub load_seconds: f64,
    pub check_seconds: f64,
}

#[derive(Clone, Debug)]
pub struct CheckResult {
    pub objects: Vec<String>,
    /// Each object's SHA-256 (hex), in the objects' order.
    pub object_sha256: Vec<String>,
    pub kernels: Vec<KernelResult>,
    /// Which part of the kernels this run checked, when it is one shard of
    /// many (see [`super::shards`]).
    pub shard: Option<Shard>,
}

/// Shard `index` of `count`, and every kernel of the whole run, in order:
/// what `btfkit report` needs to merge shards and find missing ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
    pub targets: Vec<String>,
}

/// Shard `k` of `n` (0-based): the kernels whose index i has i % n == k.
pub fn shard(sources: Vec<Source>, k: usize, n: usize) -> Vec<Source> {
    sources
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % n == k)
        .map(|(_, s)| s)
        .collect()
}

/// Checks one object against one loaded kernel.
pub fn check_one(obj: &BpfObject, target: &super::Target, verbose: bool) -> ObjectResult {
    let v = check::check(obj, target, &mut Log::off());
    let mut patched = 0;
    let mut poisoned = 0;
    let mut relocations = Vec::new();
    for r in &v.relocated.relocations {
        let (outcome, value) = match &r.outcome {
            Outcome::Patched { orig, new, .. } => {
                patched += 1;
                ("patched", Some((*orig, *new)))
            }
            Outcome::Poisoned(_) => {
                poisoned += 1;
                ("poisoned", None)
            }
            Outcome::Skipped(_) => ("skipped", None),
            Outcome::Failed(_) => ("failed", None),
        };
        if verbose {
            let off = obj.ext.blocks[r.block].sec_name;
            relocations.push(ReloLine {
                section: String::from_utf8_lossy(obj.btf.str_at(off).unwrap_or(b"")).into_owned(),
                relo: r.index,
                program: r.program.map(|p| obj.programs[p].name.clone()),
                insn: r.insn,
                kind: r.kind.map_or("unknown", |k| k.log_name()),
                path: r.path.clone(),
                target: r.target.as_ref().map(|(n, id)| (n.clone(), id.get())),
                outcome: match &r.outcome {
                    Outcome::Poisoned(PoisonCause::MemSize) => "poisoned (load width)",
                    Outcome::Skipped(SkipCause::NotLoaded) => "skipped (not loaded)",
                    Outcome::Skipped(SkipCause::NoProgram) => "skipped (no program)",
                    _ => outcome,
                },
                value,
            });
        }
    }
    ObjectResult {
        verdict: v.verdict,
        programs: v.programs,
        error: v.error,
        relocations,
        patched,
        poisoned,
    }
}

/// `one` over every kernel of an archive, in the kernels' order: on
/// `jobs` threads (all cores when `None`; one runs in the calling thread).
/// A pool that cannot be made runs them one after another.
pub fn per_kernel<T: Send>(sources: &[Source], jobs: Option<usize>, one: impl Fn(&Source) -> T + Sync) -> Vec<T> {
    use rayon::prelude::*;
    match jobs {
        Some(1) => sources.iter().map(one).collect(),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map(|p| p.install(|| sources.par_iter().map(&one).collect()))
            .unwrap_or_else(|_| sources.iter().map(&one).collect()),
        None => sources.par_iter().map(&one).collect(),
    }
}

/// Checks every object against every kernel. `progress` draws a bar on
/// standard error.
pub fn check_all(objects: &[BpfObject], sources: &[Source], run: &Run, progress: bool) -> CheckResult {
    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::new(sources.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} kernels {elapsed_precise} {msg}")
                .expect("a valid template"),
        );
        b
    });
    let one = |src: &Source| -> KernelResult {
        let t0 = Instant::now();
        let loaded = kernels::load(src);
        let load_seconds = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let r = match loaded {
            Err(e) => KernelResult {
                kernel: src.name(),
                load_error: Some(e.to_string()),
                objects: Vec::new(),
                load_seconds,
                check_seconds: 0.0,
            },
            Ok(target) => {
                let objects = objects.iter().map(|o| check_one(o, &target, run.verbose)).collect();
                KernelResult {
                    kernel: src.name(),
                    load_error: None,
                    objects,
                    load_seconds,
                    check_seconds: t1.elapsed().as_secs_f64(),
                }
            }
        };
        if let Some(b) = &bar {
            b.inc(1);
        }
        r
    };
    let kernels: Vec<KernelResult> = per_kernel(sources, run.jobs, one);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    CheckResult {
        objects: objects.iter().map(|o| o.path.display().to_string()).collect(),
        object_sha256: objects.iter().map(|o| o.sha256.clone()).collect(),
        kernels,
        shard: None,
    }
}

/// What broke an object on a kernel, as a group key: the failure, or the
/// set of reachable poisoned paths.
fn breakage(o: &ObjectResult) -> String {
    if let Some(e) = &o.error {
        return match &e.program {
            Some(p) => format!("error in {p}: {}", e.failure.reason),
            None => format!("error in section {}: {}", e.section, e.failure.reason),
        };
    }
    let mut paths: Vec<String> = o
        .programs
        .iter()
        .flat_map(|p| p.poisons.iter().map(move |s| format!("{} ({})", s.path, p.name)))
        .collect();
    paths.sort();
    paths.dedup();
    let more = paths.len().saturating_sub(3);
    paths.truncate(3);
    if more > 0 {
        format!("poisoned at {} and {more} more", paths.join(", "))
    } else {
        format!("poisoned at {}", paths.join(", "))
    }
}

impl CheckResult {
    pub fn worst(&self) -> Verdict {
        self.kernels
            .iter()
            .flat_map(|k| k.objects.iter().map(|o| o.verdict))
            .max()
            .unwrap_or(Verdict::Ok)
    }

    pub fn kernel_errors(&self) -> usize {
        self.kernels.iter().filter(|k| k.load_error.is_some()).count()
    }

    /// The text report: per object, its kernels by verdict and what broke;
    /// with `verbose`, every program and relocation per kernel.
    pub fn render(&self, s: &mut String, verbose: bool) {
        for k in &self.kernels {
            if k.load_error.is_some() {
                let _ = writeln!(s, "kernel {}: unreadable (see the error)", k.kernel);
            }
        }
        let checked: Vec<&KernelResult> = self.kernels.iter().filter(|k| k.load_error.is_none()).collect();
        for (oi, name) in self.objects.iter().enumerate() {
            let short = name.rsplit('/').next().unwrap_or(name);
            if checked.len() == 1 || verbose {
                for k in &checked {
                    let o = &k.objects[oi];
                    let _ = writeln!(
                        s,
                        "{short} on {}: {} ({} relocations patched, {} poisoned)",
                        k.kernel,
                        o.verdict.as_str(),
                        o.patched,
                        o.poisoned
                    );
                    render_object(s, o, verbose);
                }
                continue;
            }
            let mut by: BTreeMap<(Verdict, String), Vec<&str>> = BTreeMap::new();
            for k in &checked {
                let o = &k.objects[oi];
                let key = match o.verdict {
                    Verdict::Ok => (Verdict::Ok, String::new()),
                    v => (v, breakage(o)),
                };
                by.entry(key).or_default().push(&k.kernel);
            }
            let count = |v: Verdict| {
                by.iter()
                    .filter(|((x, _), _)| *x == v)
                    .map(|(_, ks)| ks.len())
                    .sum::<usize>()
            };
            let _ = writeln!(
                s,
                "{short}: {} kernels ok, {} poisoned, {} error",
                count(Verdict::Ok),
                count(Verdict::Poisoned),
                count(Verdict::Error)
            );
            for ((v, why), ks) in &by {
                if *v == Verdict::Ok {
                    continue;
                }
                let shown: Vec<&str> = ks.iter().take(4).copied().collect();
                let more = if ks.len() > 4 {
                    format!(" and {} more", ks.len() - 4)
                } else {
                    String::new()
                };
                let _ = writeln!(s, "  {} kernels {why}: {}{more}", ks.len(), shown.join(", "));
            }
        }
        let n = checked.len();
        let ok = self.objects.len() * n
            - checked
                .iter()
                .flat_map(|k| k.objects.iter())
                .filter(|o| o.verdict != Verdict::Ok)
                .count();
        let _ = writeln!(
            s,
            "{} objects x {} kernels: {ok} ok, {} not{}",
            self.objects.len(),
            n,
            self.objects.len() * n - ok,
            if self.kernel_errors() > 0 {
                format!(", {} kernels unreadable", self.kernel_errors())
            } else {
                String::new()
            }
        );
    }

    pub fn to_json(&self, verbose: bool) -> Value {
        let kernels: Vec<Value> = self
            .kernels
            .iter()
            .map(|k| {
                let objects: Vec<Value> = k
                    .objects
                    .iter()
                    .zip(&self.objects)
                    .map(|(o, name)| object_json(name, o, verbose))
                    .collect();
                json!({
                    "kernel": k.kernel,
                    "error": k.load_error,
                    "objects": objects,
                    "load_seconds": k.load_seconds,
                    "check_seconds": k.check_seconds,
                })
            })
            .collect();
        let mut summary = Vec::new();
        for (oi, name) in self.objects.iter().enumerate() {
            let mut counts = BTreeMap::new();
            for k in self.kernels.iter().filter(|k| k.load_error.is_none()) {
                *counts.entry(k.objects[oi].verdict.as_str()).or_insert(0usize) += 1;
            }
            summary.push(json!({"object": name, "kernels": counts}));
        }
        let mut v = json!({
            "schema": "btfkit-core-check/1",
            "worst": self.worst().as_str(),
            "objects": self.objects.iter().zip(&self.object_sha256)
                .map(|(o, h)| json!({"path": o, "sha256": h})).collect::<Vec<_>>(),
            "summary": summary,
            "kernels": kernels,
        });
        if let Some(sh) = &self.shard {
            v["shard"] = json!({"index": sh.index, "count": sh.count, "targets": sh.targets});
        }
        v
    }
}

fn render_object(s: &mut String, o: &ObjectResult, verbose: bool) {
    if let Some(e) = &o.error {
        let _ = writeln!(
            s,
            "  libbpf refuses the object: section {} relo #{}{}: {}",
            e.section,
            e.relo,
            e.program
                .as_ref()
                .map_or(String::new(), |p| format!(" (prog {p}, insn {})", e.insn)),
            e.failure.reason
        );
    }
    for p in &o.programs {
        if p.verdict == Verdict::Ok && !verbose {
            continue;
        }
        let guarded = if p.guarded > 0 {
            format!(
                ", {} guarded poison{}",
                p.guarded,
                if p.guarded == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        };
        let _ = writeln!(s, "  prog {} ({}): {}{guarded}", p.name, p.section, p.verdict.as_str());
        for site in &p.poisons {
            let why = match site.cause {
                PoisonCause::NoMatch => "not found",
                PoisonCause::MemSize => "load width cannot follow the field's new size",
            };
            let _ = writeln!(
                s,
                "    insn {} of {}: {} {why} ({})",
                site.insn,
                site.function,
                site.path,
                site.kind.log_name()
            );
        }
        if !p.exact {
            let _ = writeln!(s, "    (path analysis gave up: every poison counted as reachable)");
        }
    }
    if verbose {
        for r in &o.relocations {
            let target = r
                .target
                .as_ref()
                .map_or(String::new(), |(b, id)| format!(" -> [{id}] in {b}"));
            let value = r.value.map_or(String::new(), |(a, b)| format!(" {a} -> {b}"));
            let _ = writeln!(
                s,
                "    {} relo #{} {} insn {}: <{}> {}{target}: {}{value}",
                r.section,
                r.relo,
                r.program.as_deref().unwrap_or("-"),
                r.insn,
                r.kind,
                r.path,
                r.outcome
            );
        }
    }
}

fn object_json(name: &str, o: &ObjectResult, verbose: bool) -> Value {
    let programs: Vec<Value> = o
        .programs
        .iter()
        .map(|p| {
            let poisons: Vec<Value> = p
                .poisons
                .iter()
                .map(|s| {
                    json!({"function": s.function, "insn": s.insn, "kind": s.kind.log_name(), "path": s.path,
                           "cause": match s.cause { PoisonCause::NoMatch => "no_match", PoisonCause::MemSize => "mem_size" }})
                })
                .collect();
            json!({"name": p.name, "section": p.section, "verdict": p.verdict.as_str(), "poisons": poisons,
                   "guarded": p.guarded, "exact": p.exact})
        })
        .collect();
    let mut v = json!({
        "object": name,
        "verdict": o.verdict.as_str(),
        "patched": o.patched,
        "poisoned": o.poisoned,
        "programs": programs,
        "error": o.error.as_ref().map(|e| json!({"section": e.section, "relo": e.relo, "program": e.program,
            "insn": e.insn, "path": e.path, "errno": e.failure.errno, "reason": e.failure.reason})),
    });
    if verbose {
        v["relocations"] = o
            .relocations
            .iter()
            .map(|r| {
                json!({"section": r.section, "relo": r.relo, "program": r.program, "insn": r.insn, "kind": r.kind,
                       "path": r.path, "target": r.target.as_ref().map(|(b, id)| json!({"btf": b, "id": id})),
                       "outcome": r.outcome, "orig": r.value.map(|v| v.0), "new": r.value.map(|v| v.1)})
            })
            .collect();
    }
    v
}
