//! The shards of one `core check` run, read back and merged.
//!
//! A check over a large archive runs as N tasks (`--shard K/N`, a Slurm
//! array, a Kubernetes Indexed Job). Each task writes its JSON report,
//! which names its shard and every kernel of the whole run in order
//! ([`Shard`]). Task K holds the kernels whose index i has i % N == K, so
//! its j-th kernel is the run's kernel K + j·N: the merge puts every kernel
//! back in the run's order and notices what is missing, doubled or from
//! another run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;

use super::ReloKind;
use super::check::{ObjectError, PoisonSite, ProgramVerdict, Verdict};
use super::matrix::{CheckResult, KernelResult, ObjectResult, RELO_OUTCOMES, ReloLine, Shard};
use super::relocate::{Failure, PoisonCause};

/// The file name a shard's report gets in an output directory.
pub fn file_name(index: usize, count: usize) -> String {
    format!("core-check-{index}-of-{count}.json")
}

/// Whether a file name is a shard report's.
pub fn is_shard_file(name: &str) -> bool {
    name.starts_with("core-check-") && name.ends_with(".json")
}

#[derive(Debug, Error)]
pub enum ShardError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not a `btfkit core check` JSON report: {what}", path.display())]
    Malformed { path: PathBuf, what: String },
}

/// Reads one shard's report.
pub fn read(path: &Path) -> Result<CheckResult, ShardError> {
    let bytes = std::fs::read(path).map_err(|source| ShardError::Io {
        path: path.into(),
        source,
    })?;
    let bad = |what: String| ShardError::Malformed {
        path: path.into(),
        what,
    };
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let r = from_json(&v).map_err(bad)?;
    if r.shard.is_none() {
        return Err(bad("no \"shard\" (write it with `core check --out-dir`)".into()));
    }
    Ok(r)
}

/// The merged run and everything that keeps it from being complete.
#[derive(Debug)]
pub struct Merged {
    /// Every kernel any shard checked, in the run's order.
    pub result: CheckResult,
    /// Shards (`K/N`) with no report.
    pub missing_shards: Vec<String>,
    /// Kernels of the run no report holds.
    pub missing_kernels: Vec<String>,
    /// One line each: a missing shard or kernel, a shard reported twice, a
    /// report of another run.
    pub problems: Vec<String>,
}

impl Merged {
    pub fn complete(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Merges shard reports (each with its file, for messages). The first
/// report sets the run (objects and kernels) the others must belong to.
pub fn merge(parts: Vec<(PathBuf, CheckResult)>) -> Merged {
    let mut problems = Vec::new();
    let Some((first_path, first)) = parts.first() else {
        return Merged {
            result: CheckResult {
                objects: Vec::new(),
                object_sha256: Vec::new(),
                kernels: Vec::new(),
                shard: None,
            },
            missing_shards: Vec::new(),
            missing_kernels: Vec::new(),
            problems: vec!["no shard reports".into()],
        };
    };
    let first_path = first_path.clone();
    let objects = first.objects.clone();
    let object_sha256 = first.object_sha256.clone();
    let targets = first.shard.as_ref().map_or_else(Vec::new, |s| s.targets.clone());
    let mut slots: Vec<Option<KernelResult>> = vec![None; targets.len()];
    let mut seen: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (path, r) in parts {
        let Some(sh) = r.shard.clone() else {
            problems.push(format!("{}: not a shard report", path.display()));
            continue;
        };
        if r.objects != objects || r.object_sha256 != object_sha256 {
            problems.push(format!(
                "{}: checked other objects (or other builds of them) than {}",
                path.display(),
                first_path.display()
            ));
            continue;
        }
        if sh.targets != targets {
            problems.push(format!(
                "{}: a run over other kernels than {}",
                path.display(),
                first_path.display()
            ));
            continue;
        }
        if !seen.entry(sh.count).or_default().insert(sh.index) {
            problems.push(format!("shard {}/{} has two reports", sh.index, sh.count));
            continue;
        }
        for (j, k) in r.kernels.into_iter().enumerate() {
            let i = sh.index + j * sh.count;
            match slots.get_mut(i) {
                Some(slot) if targets[i] == k.kernel => {
                    if slot.is_some() {
                        problems.push(format!("kernel {}: checked by two shards", k.kernel));
                    } else {
                        *slot = Some(k);
                    }
                }
                _ => problems.push(format!(
                    "{}: kernel {} is not the run's kernel #{i} of shard {}/{}",
                    path.display(),
                    k.kernel,
                    sh.index,
                    sh.count
                )),
            }
        }
    }
    if seen.len() > 1 {
        let counts: Vec<String> = seen.keys().map(|n| n.to_string()).collect();
        problems.push(format!(
            "shards of {} counts ({}): runs with different N mixed",
            counts.len(),
            counts.join(", ")
        ));
    }
    let mut missing_shards = Vec::new();
    for (n, ks) in &seen {
        for k in (0..*n).filter(|k| !ks.contains(k)) {
            problems.push(format!("the report of shard {k}/{n} is missing"));
            missing_shards.push(format!("{k}/{n}"));
        }
    }
    let mut missing_kernels = Vec::new();
    let mut kernels = Vec::new();
    for (name, slot) in targets.iter().zip(slots) {
        match slot {
            Some(k) => kernels.push(k),
            None => missing_kernels.push(name.clone()),
        }
    }
    if !missing_kernels.is_empty() && missing_shards.is_empty() {
        problems.push(format!("{} kernels of the run have no result", missing_kernels.len()));
    }
    Merged {
        result: CheckResult {
            objects,
            object_sha256,
            kernels,
            shard: None,
        },
        missing_shards,
        missing_kernels,
        problems,
    }
}

/// A report as [`CheckResult::to_json`] writes it, read back. Relocations
/// are kept when the report has them.
pub fn from_json(v: &Value) -> Result<CheckResult, String> {
    let schema = v.get("schema").and_then(Value::as_str);
    if schema != Some("btfkit-core-check/1") {
        return Err(format!("schema {schema:?}, expected \"btfkit-core-check/1\""));
    }
    let mut objects = Vec::new();
    let mut object_sha256 = Vec::new();
    for o in arr(v, "objects")? {
        objects.push(string(o, "path")?);
        object_sha256.push(string(o, "sha256")?);
    }
    let kernels = arr(v, "kernels")?
        .iter()
        .map(|k| kernel(k, objects.len()))
        .collect::<Result<Vec<_>, _>>()?;
    let shard = match v.get("shard") {
        None | Some(Value::Null) => None,
        Some(s) => Some(Shard {
            index: uint(s, "index")? as usize,
            count: uint(s, "count")? as usize,
            targets: arr(s, "targets")?
                .iter()
                .map(|t| t.as_str().map(str::to_owned).ok_or("a target that is not a string"))
                .collect::<Result<_, _>>()?,
        }),
    };
    if let Some(s) = &shard
        && (s.count == 0 || s.index >= s.count)
    {
        return Err(format!("shard {}/{}", s.index, s.count));
    }
    Ok(CheckResult {
        objects,
        object_sha256,
        kernels,
        shard,
    })
}

fn kernel(v: &Value, n_objects: usize) -> Result<KernelResult, String> {
    let name = string(v, "kernel")?;
    let load_error = opt_string(v, "error")?;
    let objects = arr(v, "objects")?
        .iter()
        .map(object)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("kernel {name}: {e}"))?;
    if load_error.is_none() && objects.len() != n_objects {
        return Err(format!(
            "kernel {name}: {} object results for {n_objects} objects",
            objects.len()
        ));
    }
    Ok(KernelResult {
        kernel: name,
        load_error,
        objects,
        load_seconds: float(v, "load_seconds")?,
        check_seconds: float(v, "check_seconds")?,
    })
}

fn object(v: &Value) -> Result<ObjectResult, String> {
    let error = match v.get("error") {
        None | Some(Value::Null) => None,
        Some(e) => Some(ObjectError {
            section: string(e, "section")?,
            relo: uint(e, "relo")? as usize,
            program: opt_string(e, "program")?,
            insn: uint(e, "insn")? as u32,
            path: string(e, "path")?,
            failure: Failure {
                errno: v_int(e, "errno")? as i32,
                reason: string(e, "reason")?,
            },
        }),
    };
    let relocations = match v.get("relocations") {
        None => Vec::new(),
        Some(_) => arr(v, "relocations")?
            .iter()
            .map(relocation)
            .collect::<Result<_, _>>()?,
    };
    Ok(ObjectResult {
        verdict: verdict(v)?,
        programs: arr(v, "programs")?.iter().map(program).collect::<Result<_, _>>()?,
        error,
        relocations,
        patched: uint(v, "patched")? as usize,
        poisoned: uint(v, "poisoned")? as usize,
    })
}

fn program(v: &Value) -> Result<ProgramVerdict, String> {
    let poisons = arr(v, "poisons")?
        .iter()
        .map(|p| {
            Ok(PoisonSite {
                function: string(p, "function")?,
                insn: uint(p, "insn")? as u32,
                kind: relo_kind(p)?,
                path: string(p, "path")?,
                cause: match string(p, "cause")?.as_str() {
                    "no_match" => PoisonCause::NoMatch,
                    "mem_size" => PoisonCause::MemSize,
                    c => return Err(format!("poison cause {c:?}")),
                },
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(ProgramVerdict {
        name: string(v, "name")?,
        section: string(v, "section")?,
        verdict: verdict(v)?,
        poisons,
        guarded: uint(v, "guarded")? as usize,
        exact: v.get("exact").and_then(Value::as_bool).ok_or("no \"exact\"")?,
    })
}

fn relocation(v: &Value) -> Result<ReloLine, String> {
    let outcome = string(v, "outcome")?;
    let target = match v.get("target") {
        None | Some(Value::Null) => None,
        Some(t) => Some((string(t, "btf")?, uint(t, "id")? as u32)),
    };
    let value = match (
        v.get("orig").and_then(Value::as_u64),
        v.get("new").and_then(Value::as_u64),
    ) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    Ok(ReloLine {
        section: string(v, "section")?,
        relo: uint(v, "relo")? as usize,
        program: opt_string(v, "program")?,
        insn: uint(v, "insn")? as u32,
        kind: match string(v, "kind")?.as_str() {
            "unknown" => "unknown",
            k => ReloKind::from_log_name(k)
                .ok_or(format!("relocation kind {k:?}"))?
                .log_name(),
        },
        path: string(v, "path")?,
        target,
        outcome: RELO_OUTCOMES
            .into_iter()
            .find(|o| *o == outcome)
            .ok_or(format!("relocation outcome {outcome:?}"))?,
        value,
    })
}

fn verdict(v: &Value) -> Result<Verdict, String> {
    let s = string(v, "verdict")?;
    Verdict::from_name(&s).ok_or(format!("verdict {s:?}"))
}

fn relo_kind(v: &Value) -> Result<ReloKind, String> {
    let s = string(v, "kind")?;
    ReloKind::from_log_name(&s).ok_or(format!("relocation kind {s:?}"))
}

fn arr<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, String> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or(format!("no array \"{key}\""))
}

fn string(v: &Value, key: &str) -> Result<String, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or(format!("no string \"{key}\""))
}

fn opt_string(v: &Value, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(s) => s
            .as_str()
            .map(|s| Some(s.to_owned()))
            .ok_or(format!("\"{key}\" is not a string")),
    }
}

fn uint(v: &Value, key: &str) -> Result<u64, String> {
    v.get(key).and_then(Value::as_u64).ok_or(format!("no count \"{key}\""))
}

fn v_int(v: &Value, key: &str) -> Result<i64, String> {
    v.get(key).and_then(Value::as_i64).ok_or(format!("no number \"{key}\""))
}

fn float(v: &Value, key: &str) -> Result<f64, String> {
    v.get(key).and_then(Value::as_f64).ok_or(format!("no number \"{key}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str) -> KernelResult {
        KernelResult {
            kernel: name.into(),
            load_error: None,
            objects: vec![ObjectResult {
                verdict: Verdict::Ok,
                programs: Vec::new(),
                error: None,
                relocations: Vec::new(),
                patched: 3,
                poisoned: 0,
            }],
            load_seconds: 0.5,
            check_seconds: 0.25,
        }
    }

    /// Shard `k` of `n` over kernels k0..k4, as JSON and back.
    fn shard(k: usize, n: usize) -> (PathBuf, CheckResult) {
        let targets: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
        let r = CheckResult {
            objects: vec!["a.bpf.o".into()],
            object_sha256: vec!["00".into()],
            kernels: (0..5).filter(|i| i % n == k).map(|i| kernel(&targets[i])).collect(),
            shard: Some(Shard {
                index: k,
                count: n,
                targets,
            }),
        };
        let back = from_json(&r.to_json(true)).expect("its own JSON reads back");
        (PathBuf::from(file_name(k, n)), back)
    }

    #[test]
    fn shards_merge_in_the_runs_order() {
        let m = merge(vec![shard(2, 3), shard(0, 3), shard(1, 3)]);
        assert!(m.complete(), "{:?}", m.problems);
        let names: Vec<&str> = m.result.kernels.iter().map(|k| k.kernel.as_str()).collect();
        assert_eq!(names, ["k0", "k1", "k2", "k3", "k4"]);
        assert_eq!(m.result.kernels[3].objects[0].patched, 3);
    }

    #[test]
    fn a_missing_or_doubled_shard_is_named() {
        let m = merge(vec![shard(0, 3), shard(2, 3), shard(2, 3)]);
        assert_eq!(m.missing_shards, ["1/3"]);
        assert_eq!(m.missing_kernels, ["k1", "k4"]);
        assert!(m.problems.iter().any(|p| p == "shard 2/3 has two reports"));
        let mut other = shard(1, 3);
        other.1.object_sha256 = vec!["ff".into()];
        let m = merge(vec![shard(0, 3), other]);
        assert!(
            m.problems.iter().any(|p| p.contains("other builds")),
            "{:?}",
            m.problems
        );
    }
}
