//! Lists of kernels and their shards.

use super::*;

/// One entry of a list: a tree or a package, and its name.
#[derive(Clone, Debug, PartialEq)]
pub struct ListEntry {
    pub path: PathBuf,
    pub name: String,
}

/// A list file: one tree or package per line (relative paths from the
/// list's directory), blank lines and `#` comments ignored. Names are the
/// file name without its package extension, or the directory's name; two
/// entries of one name are an error.
pub fn read_list(list: &Path) -> Result<(Vec<ListEntry>, String), KernelError> {
    let bytes = std::fs::read(list).map_err(io(list))?;
    let sha = sha256_hex(&bytes);
    let text = String::from_utf8_lossy(&bytes);
    let dir = list.parent().unwrap_or(Path::new("."));
    let mut out: Vec<ListEntry> = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for l in text.lines() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let path = dir.join(l);
        let name = entry_name(&path).ok_or_else(|| KernelError::Unnamed {
            list: list.to_path_buf(),
            entry: path.clone(),
        })?;
        if let Some(prev) = seen.insert(name.clone(), path.clone()) {
            return Err(KernelError::DuplicateName {
                list: list.to_path_buf(),
                name,
                a: prev,
                b: path,
            });
        }
        out.push(ListEntry { path, name });
    }
    Ok((out, sha))
}

fn entry_name(path: &Path) -> Option<String> {
    let n = path.file_name()?.to_string_lossy().into_owned();
    let n = if is_package_name(path) {
        path.file_stem()?.to_string_lossy().into_owned()
    } else {
        n
    };
    (!n.is_empty() && n != "." && n != "..").then_some(n)
}

/// Shard `k` of `n`: list entries whose index i has i % n == k.
pub fn shard_entries(entries: &[ListEntry], k: usize, n: usize) -> Vec<ListEntry> {
    entries
        .iter()
        .enumerate()
        .filter(|(i, _)| i % n == k)
        .map(|(_, e)| e.clone())
        .collect()
}

/// Which shard this process is: `--shard K/N`; else Slurm's array
/// (`SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN` over
/// `SLURM_ARRAY_TASK_COUNT`); else a Kubernetes Indexed Job's
/// `JOB_COMPLETION_INDEX` over `shard_count` (`--shard-count`) or
/// `BTFKIT_SHARD_COUNT`; else 0 of 1. `env` reads the environment.
pub fn resolve_shard(
    flag: Option<&str>,
    shard_count: Option<usize>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(usize, usize), KernelError> {
    let bad = |spec: &str, why: &str| KernelError::Shard {
        spec: spec.to_string(),
        why: why.to_string(),
    };
    let num = |name: &str, v: &str| -> Result<usize, KernelError> {
        v.trim()
            .parse::<usize>()
            .map_err(|_| bad(&format!("{name}={v}"), "not a whole number"))
    };
    let check = |k: usize, n: usize, spec: &str| {
        if n == 0 {
            Err(bad(spec, "the shard count must be at least 1"))
        } else if k >= n {
            Err(bad(
                spec,
                &format!("shard index {k} is not below the count {n} (indices are 0..{n})"),
            ))
        } else {
            Ok((k, n))
        }
    };
    if let Some(spec) = flag {
        let (k, n) = spec.split_once('/').ok_or_else(|| bad(spec, "give K/N, e.g. 0/4"))?;
        let (k, n) = (
            k.parse().map_err(|_| bad(spec, "K is not a whole number"))?,
            n.parse().map_err(|_| bad(spec, "N is not a whole number"))?,
        );
        return check(k, n, spec);
    }
    if let Some(id) = env("SLURM_ARRAY_TASK_ID") {
        let id = num("SLURM_ARRAY_TASK_ID", &id)?;
        let min = match env("SLURM_ARRAY_TASK_MIN") {
            Some(m) => num("SLURM_ARRAY_TASK_MIN", &m)?,
            None => 0,
        };
        let count = env("SLURM_ARRAY_TASK_COUNT")
            .ok_or_else(|| bad("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT is not set"))?;
        let n = num("SLURM_ARRAY_TASK_COUNT", &count)?;
        let k = id
            .checked_sub(min)
            .ok_or_else(|| bad("SLURM_ARRAY_TASK_ID", "below SLURM_ARRAY_TASK_MIN"))?;
        return check(k, n, "SLURM_ARRAY_TASK_ID");
    }
    if let Some(idx) = env("JOB_COMPLETION_INDEX") {
        let k = num("JOB_COMPLETION_INDEX", &idx)?;
        let n = match shard_count {
            Some(n) => n,
            None => match env("BTFKIT_SHARD_COUNT") {
                Some(c) => num("BTFKIT_SHARD_COUNT", &c)?,
                None => {
                    return Err(bad(
                        "JOB_COMPLETION_INDEX",
                        "the shard count is unknown: give --shard-count N or set BTFKIT_SHARD_COUNT",
                    ));
                }
            },
        };
        return check(k, n, "JOB_COMPLETION_INDEX");
    }
    Ok((0, 1))
}

/// The report file of shard `k` of `n`.
pub fn shard_report_name(k: usize, n: usize) -> String {
    format!("report-{k}-of-{n}.jsonl")
}
