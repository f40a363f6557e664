//! The deployment files in deploy/: the Kubernetes Indexed Job is read with
//! a YAML parser, its fields that matter are checked, and its container's
//! command is run here once per completion index, with the environment
//! Kubernetes gives each pod and the volume's mount point moved to a scratch
//! folder: the pods' reports must cover every list entry exactly once.
//! (The sbatch script runs on a real cluster in tests/slurm.rs.)

mod common;

use std::collections::BTreeSet;

use std::path::Path;

use common::*;
use yaml_rust2::{Yaml, YamlLoader};

fn load(rel: &str) -> Yaml {
    let path = crate_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one document");
    docs.remove(0)
}

/// The value at a path of mapping keys; panics naming the path when missing.
fn at<'a>(y: &'a Yaml, path: &[&str]) -> &'a Yaml {
    path.iter().fold(y, |y, k| {
        let v = &y[*k];
        assert!(!v.is_badvalue(), "no {} in the manifest", path.join("."));
        v
    })
}

fn string(y: &Yaml) -> &str {
    y.as_str().unwrap_or_else(|| panic!("not a string: {y:?}"))
}

/// What the pods run, from a manifest whose fields were checked.
struct Pods {
    completions: i64,
    /// BTFKIT_SHARD_COUNT's value.
    count: String,
    command: Vec<String>,
    list: String,
    out_dir: String,
    /// The mount point the list and the outputs are under.
    mount: String,
}

/// deploy/k8s/btfkit-indexed-job.yaml, its fields checked.
fn indexed_job() -> Pods {
    let job = load("deploy/k8s/btfkit-indexed-job.yaml");
    assert_eq!(string(at(&job, &["apiVersion"])), "batch/v1");
    assert_eq!(string(at(&job, &["kind"])), "Job");
    let spec = at(&job, &["spec"]);
    assert_eq!(
        string(at(spec, &["completionMode"])),
        "Indexed",
        "JOB_COMPLETION_INDEX is only set for Indexed Jobs"
    );
    let completions = at(spec, &["completions"]).as_i64().expect("completions is a number");
    let parallelism = at(spec, &["parallelism"]).as_i64().expect("parallelism is a number");
    assert!(
        completions >= 1 && (1..=completions).contains(&parallelism),
        "completions {completions}, parallelism {parallelism}"
    );
    let pod = at(spec, &["template", "spec"]);
    let restart = string(at(pod, &["restartPolicy"]));
    // Kubernetes accepts backoffLimitPerIndex only with restartPolicy Never.
    if !spec["backoffLimitPerIndex"].is_badvalue() {
        assert_eq!(restart, "Never", "backoffLimitPerIndex needs restartPolicy Never");
    } else {
        assert!(
            ["Never", "OnFailure"].contains(&restart),
            "a Job's restartPolicy is Never or OnFailure, not {restart}"
        );
    }
    let containers = at(pod, &["containers"]).as_vec().expect("containers is a list");
    assert_eq!(containers.len(), 1, "one container");
    let c = &containers[0];

    // BTFKIT_SHARD_COUNT is the number of indexes.
    let env = at(c, &["env"]).as_vec().expect("env is a list");
    let count = env
        .iter()
        .find(|e| e["name"].as_str() == Some("BTFKIT_SHARD_COUNT"))
        .map(|e| string(&e["value"]).to_string())
        .expect("env BTFKIT_SHARD_COUNT");
    assert_eq!(
        count,
        completions.to_string(),
        "BTFKIT_SHARD_COUNT must equal completions"
    );

    // The command is `btfkit kernel --list L --out-dir D ...` with L and D
    // on a mounted volume that the pod declares.
    let command: Vec<String> = at(c, &["command"])
        .as_vec()
        .expect("command is a list")
        .iter()
        .map(|a| string(a).to_string())
        .collect();
    assert_eq!(command[..2], ["btfkit", "kernel"], "command {command:?}");
    let arg = |flag: &str| {
        let i = command
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("no {flag} in {command:?}"));
        command[i + 1].clone()
    };
    let (list, out_dir) = (arg("--list"), arg("--out-dir"));
    let volumes: BTreeSet<&str> = at(pod, &["volumes"])
        .as_vec()
        .unwrap()
        .iter()
        .map(|v| string(&v["name"]))
        .collect();
    let mounts: Vec<(String, String)> = at(c, &["volumeMounts"])
        .as_vec()
        .unwrap()
        .iter()
        .map(|m| {
            (
                string(&m["name"]).to_string(),
                string(&m["mountPath"]).trim_end_matches('/').to_string(),
            )
        })
        .collect();
    for (name, _) in &mounts {
        assert!(volumes.contains(name.as_str()), "volumeMount {name} has no volume");
    }
    let mount_of = |p: &str| {
        mounts
            .iter()
            .find(|(_, m)| p.starts_with(&format!("{m}/")))
            .map(|(_, m)| m.clone())
            .unwrap_or_else(|| panic!("{p} is on no mounted volume"))
    };
    let mount = mount_of(&list);
    assert_eq!(
        mount_of(&out_dir),
        mount,
        "the list and the outputs share the volume in this manifest"
    );
    Pods {
        completions,
        count,
        command,
        list,
        out_dir,
        mount,
    }
}

#[test]
fn k8s_indexed_job_fields() {
    let pods = indexed_job();
    assert!(
        pods.command.iter().any(|a| a == "-j"),
        "the pod sets -j to its CPU request: {:?}",
        pods.command
    );
    assert_eq!(pods.count, pods.completions.to_string());
    for p in [&pods.list, &pods.out_dir] {
        assert!(
            p.starts_with(&format!("{}/", pods.mount)),
            "{p} not under {}",
            pods.mount
        );
    }
}
/// A tiny unpacked kernel tree: a fixture ELF as vmlinux and one module.
fn tree(dir: &Path, version: &str) {
    let boot = dir.join("usr/lib/debug/boot");
    let kernel = dir.join(format!("usr/lib/debug/lib/modules/{version}/kernel/lib"));
    std::fs::create_dir_all(&boot).unwrap();
    std::fs::create_dir_all(&kernel).unwrap();
    std::fs::copy(
        corpus_file("fixtures/bin/prog.gcc-O2.exe"),
        boot.join(format!("vmlinux-{version}")),
    )
    .unwrap();
    std::fs::copy(corpus_file("kernel/modules/crc7.ko"), kernel.join("crc7.ko")).unwrap();
}

#[test]
fn k8s_indexed_job_pods_cover_the_list() {
    crate::needs_corpus!();
    let Pods {
        completions,
        count,
        command,
        list,
        out_dir,
        mount,
    } = indexed_job();
    // Run every pod's command here, the volume being a scratch folder.
    let data = scratch("k8s-indexed-job");
    let relocate = |p: &str| data.join(p.strip_prefix(&format!("{mount}/")).unwrap());
    let names = ["kernel-a", "kernel-b", "kernel-c"];
    let mut body = String::new();
    for n in names {
        let dir = data.join("in").join(n);
        tree(&dir, "6.12.0-test");
        body += &format!("{}\n", dir.display());
    }
    std::fs::create_dir_all(relocate(&list).parent().unwrap()).unwrap();
    std::fs::write(relocate(&list), body).unwrap();
    for index in 0..completions {
        let args: Vec<String> = command[1..]
            .iter()
            .map(|a| {
                if a.starts_with(&format!("{mount}/")) {
                    s(&relocate(a))
                } else {
                    a.clone()
                }
            })
            .collect();
        let out = btfkit()
            .args(&args)
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("SLURM_ARRAY_TASK_COUNT")
            .env_remove("SLURM_ARRAY_TASK_MIN")
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("BTFKIT_SHARD_COUNT", &count)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pod {index}: {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = relocate(&out_dir).join(format!("report-{index}-of-{completions}.jsonl"));
        assert!(report.is_file(), "pod {index} wrote no {}", report.display());
    }
    for n in names {
        assert!(
            relocate(&out_dir).join(n).join("vmlinux.btf").is_file(),
            "no output for {n}"
        );
    }
    let out = btfkit()
        .args(["report", &s(&relocate(&out_dir)), "--list", &s(&relocate(&list))])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "btfkit report over the pods' outputs: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    std::fs::remove_dir_all(&data).unwrap();
}
