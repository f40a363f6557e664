//! btfkit on a real (single-node) Slurm cluster, started for the test by
//! tests/slurm/cluster.sh with its own munged, ports and state directory.
//!
//! - `cluster_array_cancel_stop`: the cluster itself: a 2-task array whose
//!   tasks see each other running (so they run side by side, each with its
//!   array index), a task cancelled mid-run, and a stop with a task still
//!   running that leaves no process and no port behind.
//! - `kernel_list_array_matches_one_process_and_resumes`: the shipped sbatch
//!   script (deploy/slurm/btfkit-array.sbatch) runs `btfkit kernel --list`
//!   as a 2-task array over four small debug packages made with `dpkg-deb
//!   --build` and read as streams; the merged outputs equal a
//!   single-process run byte for byte and
//!   `btfkit report` (as the dependent job the script's notes describe) says
//!   complete. A second array is cancelled in one task mid-run, `btfkit
//!   report` then says incomplete, and the resubmitted array finishes the
//!   work reusing every input done before the cancel.
//!
//! Skipped, with the reason printed, where Slurm or munge is not installed,
//! the test does not run as root, or the cluster cannot start; with
//! BTFKIT_REQUIRE_SLURM=1 (set by .ci/run, which installs Slurm) a cluster
//! that cannot start fails the test instead.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;

/// One cluster at a time: cluster.sh picks free ports, and two starting
/// at once could pick the same ones.
static CLUSTER_LOCK: Mutex<()> = Mutex::new(());

fn on_path(prog: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .any(|d| d.join(prog).is_file())
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

struct Cluster {
    dir: PathBuf,
    stopped: bool,
    /// Whether the last stop succeeded: the directory (logs) then goes;
    /// after a failure it stays for a look.
    stopped_clean: bool,
}

impl Cluster {
    /// Starts a cluster in a new directory; `None` after printing why when
    /// Slurm cannot be installed or started here.
    fn start(name: &str) -> Option<Cluster> {
        let skip = |why: String| {
            eprintln!("SKIPPED {name}: {why}");
            None
        };
        for prog in ["slurmctld", "slurmd", "sbatch", "munged", "dpkg-deb"] {
            if !on_path(prog) {
                return skip(format!(
                    "{prog} is not installed (apt-get install --no-install-recommends \
                     slurmctld slurmd slurm-client munge)"
                ));
            }
        }
        if !common::is_root() {
            return skip("the cluster's slurmd and munged need root".into());
        }
        let dir = std::env::temp_dir().join(format!("btfkit-slurm-{name}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new("bash")
            .arg(crate_dir().join("tests/slurm/cluster.sh"))
            .arg("start")
            .arg(&dir)
            .env_remove("SLURM_CONF")
            .output()
            .expect("run cluster.sh");
        if !out.status.success() {
            let why = format!("tests/slurm/cluster.sh start failed: {}", text(&out));
            if std::env::var_os("BTFKIT_REQUIRE_SLURM").is_some_and(|v| v == "1") {
                panic!("BTFKIT_REQUIRE_SLURM=1 and {why}");
            }
            return skip(why);
        }
        Some(Cluster {
            dir,
            stopped: false,
            stopped_clean: false,
        })
    }

    /// A Slurm client command talking to this cluster.
    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("SLURM_CONF", self.dir.join("slurm.conf"));
        c
    }

    fn run(&self, prog: &str, args: &[&str]) -> String {
        let out = self
            .cmd(prog)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{prog}: {e}"));
        assert!(out.status.success(), "{prog} {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Submits with `sbatch --parsable ARGS`; the job id.
    fn sbatch(&self, args: &[&str]) -> String {
        let id = self.run("sbatch", &[&["--parsable"], args].concat());
        id.trim().split(';').next().unwrap().to_string()
    }

    /// The queued or running array tasks of `job` ("ID_K" -> state).
    fn queue(&self, job: &str) -> BTreeMap<String, String> {
        let out = self
            .cmd("squeue")
            .args(["-h", "-r", "-o", "%i %T", "-j", job])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(i, s)| (i.to_string(), s.to_string()))
            .collect()
    }

    /// Waits until `job` has left the queue; panics naming the job and its
    /// tasks' states after `limit`.
    fn wait_done(&self, job: &str, limit: Duration) {
        let t0 = Instant::now();
        loop {
            let q = self.queue(job);
            if q.is_empty() {
                return;
            }
            assert!(t0.elapsed() < limit, "job {job} still queued after {limit:?}: {q:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The final state and exit code of each task of array `job`, from
    /// `scontrol show job` (no slurmdbd here, so no sacct): task -> "STATE rc:sig".
    fn task_states(&self, job: &str) -> BTreeMap<u32, String> {
        let out = self.run("scontrol", &["-o", "show", "job", job]);
        out.lines()
            .map(|l| {
                let field = |k: &str| {
                    l.split(' ')
                        .find_map(|f| f.strip_prefix(k))
                        .unwrap_or_else(|| panic!("no {k} in {l}"))
                        .to_string()
                };
                let task = field("ArrayTaskId=").parse().unwrap();
                (task, format!("{} {}", field("JobState="), field("ExitCode=")))
            })
            .collect()
    }

    fn stop(&mut self) -> Output {
        self.stopped = true;
        let out = Command::new("bash")
            .arg(crate_dir().join("tests/slurm/cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .env_remove("SLURM_CONF")
            .output()
            .expect("run cluster.sh stop");
        self.stopped_clean = out.status.success();
        out
    }

    /// The cluster's two ports (SlurmctldPort, SlurmdPort).
    fn ports(&self) -> [u16; 2] {
        let conf = std::fs::read_to_string(self.dir.join("slurm.conf")).unwrap();
        let port = |k: &str| {
            conf.lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or_else(|| panic!("no {k} in slurm.conf"))
                .parse()
                .unwrap()
        };
        [port("SlurmctldPort="), port("SlurmdPort=")]
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.stopped {
            let out = self.stop();
            if !out.status.success() {
                eprintln!("cluster.sh stop {}: {}", self.dir.display(), text(&out));
            }
        }
        if self.stopped_clean && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ready() {
        assert!(t0.elapsed() < limit, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pid_alive(pid: u32) -> bool {
    // A zombie still has /proc/PID but has ended.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn cluster_array_cancel_stop() {
    let _one = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut cluster) = Cluster::start("trivial") else {
        return;
    };
    let work = scratch("slurm-trivial");
    let w = s(&work);

    // Each task marks that it started and waits (at most 30 s) for the other's
    // mark: both finish only if the two ran at the same time.
    let side_by_side = format!(
        "cd {w}; k=$SLURM_ARRAY_TASK_ID; \
         echo \"$SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_COUNT\" > started-$k; \
         for i in $(seq 300); do [ -e started-$((1 - k)) ] && {{ echo ok > met-$k; exit 0; }}; sleep 0.1; done; exit 1"
    );
    let t0 = Instant::now();
    let job = cluster.sbatch(&[
        "--array=0-1",
        "--cpus-per-task=1",
        "-o",
        &format!("{w}/a-%a.out"),
        "--wrap",
        &side_by_side,
    ]);
    cluster.wait_done(&job, Duration::from_secs(60));
    let took = t0.elapsed();
    let states = cluster.task_states(&job);
    assert_eq!(
        states.values().collect::<Vec<_>>(),
        ["COMPLETED 0:0", "COMPLETED 0:0"],
        "array {job}: {states:?}"
    );
    // Job states are not enough (deploy/slurm/README.md: a broken proctrack reports
    // COMPLETED without running anything): check what the tasks wrote.
    for k in 0..2 {
        assert_eq!(
            std::fs::read_to_string(work.join(format!("started-{k}"))).unwrap(),
            "0 2\n",
            "task {k}'s environment"
        );
        assert!(
            work.join(format!("met-{k}")).exists(),
            "task {k} never saw the other task running"
        );
    }
    eprintln!("2-task array ran side by side in {took:.1?}");

    // Cancel task 1 mid-run; task 0 goes on.
    let sleeper = format!("cd {w}; echo $$ > pid-$SLURM_ARRAY_TASK_ID; exec sleep 300");
    let job = cluster.sbatch(&[
        "--array=0-1",
        "--cpus-per-task=1",
        "-o",
        &format!("{w}/b-%a.out"),
        "--wrap",
        &sleeper,
    ]);
    let pid_file = |k: u32| work.join(format!("pid-{k}"));
    wait_for("both sleeping tasks started", Duration::from_secs(30), || {
        (0..2).all(|k| read_pid(&pid_file(k)).is_some_and(pid_alive))
    });
    let (p0, p1) = (read_pid(&pid_file(0)).unwrap(), read_pid(&pid_file(1)).unwrap());
    cluster.run("scancel", &[&format!("{job}_1")]);
    wait_for("the cancelled task's process ended", Duration::from_secs(30), || {
        !pid_alive(p1)
    });
    wait_for("the cancelled task left the queue", Duration::from_secs(30), || {
        !cluster.queue(&job).contains_key(&format!("{job}_1"))
    });
    assert!(
        cluster.task_states(&job)[&1].starts_with("CANCELLED"),
        "{:?}",
        cluster.task_states(&job)
    );
    assert!(pid_alive(p0), "task 0 ended with task 1's cancel");
    assert_eq!(
        cluster.queue(&job).get(&format!("{job}_0")).map(String::as_str),
        Some("RUNNING")
    );

    // Stop with task 0 still running: nothing may be left.
    let ports = cluster.ports();
    let daemons: Vec<(&str, u32)> = ["slurmctld.pid", "slurmd.pid", "munge/munged.pid"]
        .into_iter()
        .map(|f| (f, read_pid(&cluster.dir.join(f)).unwrap_or_else(|| panic!("no {f}"))))
        .collect();
    let out = cluster.stop();
    assert!(out.status.success(), "cluster.sh stop: {}", text(&out));
    assert!(!pid_alive(p0), "task 0 (pid {p0}) survived the stop");
    for port in ports {
        // slurmctld and slurmd listen on 0.0.0.0: a bind fails while they do.
        std::net::TcpListener::bind(("0.0.0.0", port))
            .unwrap_or_else(|e| panic!("port {port} still taken after stop: {e}"));
    }
    for (pid_file, pid) in daemons {
        assert!(!pid_alive(pid), "{pid_file}: pid {pid} still running after stop");
    }
    std::fs::remove_dir_all(&work).unwrap();
}

// ---- btfkit kernel --list on the cluster ------------------------------------

/// Modules of the corpus (kernel/modules, 6.12 cloud-amd64) and where a
/// package puts them under lib/modules/<version>/.
const MODULES: [(&str, &str); 4] = [
    ("kernel/lib/crc7.ko", "crc7.ko"),
    ("kernel/mm/zsmalloc.ko", "zsmalloc.ko"),
    ("kernel/net/ipv4/tcp_bbr.ko", "tcp_bbr.ko"),
    ("kernel/net/netfilter/x_tables.ko", "x_tables.ko"),
];

/// The stand-in for vmlinux: a small fixture ELF with DWARF, so the test
/// does not encode the corpus's 340 MB vmlinux several times over.
const VMLINUX: &str = "fixtures/bin/prog.gcc-O2.exe";

/// Copies of MODULES in the last package, which task 1 works on last (64
/// modules, most of a second's work: the test sees a few done and cancels
/// the task long before the rest are; it fails, naming this constant, if
/// the task ends first).
const SLOW_COPIES: usize = 16;

/// An unpacked debug package like linux-image-*-dbg, in `work/<name>`:
/// vmlinux under usr/lib/debug/boot/, modules under
/// usr/lib/debug/lib/modules/<version>/; and the same files as a .deb made
/// with `dpkg-deb --build`, `work/<name>.deb`. Returns the tree, the .deb
/// and the paths of the inputs in them.
fn make_kernel(work: &Path, version: &str, copies: usize) -> (PathBuf, PathBuf, Vec<String>) {
    let package = format!("linux-image-{version}-dbg");
    let name = format!("{package}_{version}_amd64");
    let root = work.join(&name);
    let debug = root.join("usr/lib/debug");
    let mut inputs = vec![format!("usr/lib/debug/boot/vmlinux-{version}")];
    std::fs::create_dir_all(debug.join("boot")).unwrap();
    std::fs::copy(corpus_file(VMLINUX), debug.join(format!("boot/vmlinux-{version}"))).unwrap();
    for copy in 0..copies {
        for (rel, corpus) in MODULES {
            let rel = if copy == 0 {
                rel.to_string()
            } else {
                rel.replace("kernel/", &format!("kernel/copy{copy}/"))
            };
            let path = format!("lib/modules/{version}/{rel}");
            let dst = debug.join(&path);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(corpus_file(&format!("kernel/modules/{corpus}")), &dst).unwrap();
            inputs.push(format!("usr/lib/debug/{path}"));
        }
    }
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {package}\nVersion: {version}\nArchitecture: amd64\n\
             Maintainer: btfkit tests <tests@btfkit.invalid>\n\
             Description: debug symbols for a test kernel\n"
        ),
    )
    .unwrap();
    let deb = work.join(format!("{name}.deb"));
    let out = Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zzstd", "--build"])
        .arg(&root)
        .arg(&deb)
        .output()
        .expect("run dpkg-deb");
    assert!(
        out.status.success(),
        "dpkg-deb --build {}: {}",
        root.display(),
        text(&out)
    );
    std::fs::remove_dir_all(root.join("DEBIAN")).unwrap();
    // The package holds the tree's files, as the package reader sees them.
    let members: Vec<(String, Vec<u8>)> = btfkit::package::open(&deb)
        .unwrap_or_else(|e| panic!("{e}"))
        .select(|p| p.starts_with("usr/lib/debug/"))
        .map(|e| {
            let e = e.unwrap_or_else(|e| panic!("{e}"));
            let data = e.data.in_memory().expect("no spill size was set").to_vec();
            (e.path, data)
        })
        .collect();
    assert_eq!(members.len(), inputs.len(), "members of {}", deb.display());
    for (path, data) in &members {
        assert!(inputs.contains(path), "{} has {path}, not an input", deb.display());
        assert!(
            std::fs::read(root.join(path)).unwrap() == *data,
            "{path} in {} differs from the tree",
            deb.display()
        );
    }
    (root, deb, inputs)
}

/// Every file under `dir` but the reports, relative path -> bytes.
fn outputs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, into: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, into);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                let name = p.file_name().unwrap().to_string_lossy();
                if !(name.starts_with("report") && name.ends_with(".jsonl")) {
                    into.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
    }
    let mut m = BTreeMap::new();
    walk(dir, dir, &mut m);
    m
}

fn assert_same_outputs(got: &Path, want: &Path) {
    let (g, w) = (outputs(got), outputs(want));
    let (gk, wk): (BTreeSet<_>, BTreeSet<_>) = (g.keys().collect(), w.keys().collect());
    assert_eq!(gk, wk, "files of {} vs {}", got.display(), want.display());
    for (k, v) in &w {
        assert!(
            g[k] == *v,
            "{k} differs between {} and {}",
            got.display(),
            want.display()
        );
    }
}

/// The JSON lines of a report (a torn last line, from a killed task, is left out).
fn report_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// (item, input) -> outcome of a shard report's input lines.
fn outcomes(lines: &[serde_json::Value]) -> BTreeMap<(String, String), String> {
    lines
        .iter()
        .filter(|l| l.get("input").is_some())
        .map(|l| {
            let f = |k: &str| l[k].as_str().unwrap_or_else(|| panic!("no {k} in {l}")).to_string();
            ((f("item"), f("input")), f("outcome"))
        })
        .collect()
}

fn has_summary(lines: &[serde_json::Value]) -> bool {
    lines.iter().any(|l| l.get("summary").is_some())
}

/// A btfkit run outside Slurm: no array or index variables from the caller.
fn btfkit_plain() -> Command {
    let mut c = btfkit();
    for v in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_COUNT",
        "JOB_COMPLETION_INDEX",
        "BTFKIT_SHARD_COUNT",
    ] {
        c.env_remove(v);
    }
    c
}

#[test]
fn kernel_list_array_matches_one_process_and_resumes() {
    crate::needs_corpus!();
    let _one = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start("kernel") else {
        return;
    };
    let t_all = Instant::now();
    let work = scratch("slurm-kernel");
    let w = s(&work);

    // Four kernels: task 0 of 2 takes list entries 0 and 2, task 1 entries
    // 1 and 3; entry 3 is the big one.
    let kernels: Vec<(PathBuf, PathBuf, Vec<String>)> = [
        ("6.12.1-test", 1),
        ("6.12.2-test", 1),
        ("6.12.3-test", 1),
        ("6.12.4-test", SLOW_COPIES),
    ]
    .into_iter()
    .map(|(v, copies)| make_kernel(&work, v, copies))
    .collect();
    let item = |k: usize| kernels[k].0.file_name().unwrap().to_string_lossy().into_owned();
    let pkgs: Vec<(PathBuf, Vec<String>)> = kernels
        .iter()
        .map(|(_, deb, inputs)| (deb.clone(), inputs.clone()))
        .collect();
    let list = work.join("kernels.list");
    let mut body = String::from("# test archive\n\n");
    for (_, deb, _) in &kernels {
        body += &format!("{}\n", deb.display());
    }
    std::fs::write(&list, body).unwrap();
    let l = s(&list);

    // The reference: one process over the whole list.
    let reference = work.join("reference");
    let t0 = Instant::now();
    let out = btfkit_plain()
        .args(["kernel", "--list", &l, "--out-dir", &s(&reference), "-j", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "btfkit kernel --list (one process): {}",
        text(&out)
    );
    eprintln!("one process: {:.1?}", t0.elapsed());
    let ref_lines = report_lines(&reference.join("report-0-of-1.jsonl"));
    let all = outcomes(&ref_lines);
    let inputs: usize = pkgs.iter().map(|p| p.1.len()).sum();
    assert_eq!(all.len(), inputs, "reference report: {ref_lines:?}");
    assert!(all.values().all(|o| o == "ok"), "reference report: {all:?}");
    for k in 0..pkgs.len() {
        assert!(
            reference.join(item(k)).join("vmlinux.btf").is_file(),
            "no vmlinux.btf for {}",
            item(k)
        );
    }

    let sbatch_script = s(&crate_dir().join("deploy/slurm/btfkit-array.sbatch"));
    let bin = env!("CARGO_BIN_EXE_btfkit");
    let submit = |out_dir: &Path, tag: &str| {
        cluster.sbatch(&[
            "--array=0-1",
            "--cpus-per-task=1",
            "--mem=2G",
            "-o",
            &format!("{w}/{tag}-%a.out"),
            &format!("--export=ALL,LIST={l},OUT={},BTFKIT={bin}", out_dir.display()),
            &sbatch_script,
        ])
    };
    let task_log = |tag: &str, k: u32| std::fs::read_to_string(work.join(format!("{tag}-{k}.out"))).unwrap_or_default();
    let report_of = |out_dir: &Path, k: u32| out_dir.join(format!("report-{k}-of-2.jsonl"));

    // Run A: the whole array, then `btfkit report` as a dependent job.
    let out_a = work.join("out-a");
    let t0 = Instant::now();
    let job = submit(&out_a, "a");
    let report_job = cluster.sbatch(&[
        &format!("--dependency=afterany:{job}"),
        "-o",
        &format!("{w}/report-a.out"),
        "--wrap",
        &format!("{bin} report {} --list {l}; echo \"exit $?\"", out_a.display()),
    ]);
    cluster.wait_done(&job, Duration::from_secs(300));
    eprintln!("2-task array: {:.1?}", t0.elapsed());
    let states = cluster.task_states(&job);
    assert_eq!(
        states.values().collect::<Vec<_>>(),
        ["COMPLETED 0:0", "COMPLETED 0:0"],
        "array {job}: {states:?}\ntask 0:\n{}\ntask 1:\n{}",
        task_log("a", 0),
        task_log("a", 1)
    );
    assert_same_outputs(&out_a, &reference);
    for k in 0..2u32 {
        let lines = report_lines(&report_of(&out_a, k));
        assert_eq!(
            lines[0]["shard"],
            serde_json::json!([k, 2]),
            "header of shard {k}: {}",
            lines[0]
        );
        let got: BTreeSet<String> = outcomes(&lines).keys().map(|(i, _)| i.clone()).collect();
        let want: BTreeSet<String> = (0..pkgs.len()).filter(|i| i % 2 == k as usize).map(item).collect();
        assert_eq!(got, want, "items of shard {k}");
        assert!(has_summary(&lines), "shard {k} report has no summary");
    }
    cluster.wait_done(&report_job, Duration::from_secs(60));
    let rep = std::fs::read_to_string(work.join("report-a.out")).unwrap();
    assert!(
        rep.trim_end().ends_with("exit 0"),
        "btfkit report after the array:\n{rep}"
    );

    // Run B: cancel task 1 in its last package, after some of its inputs
    // are done and before the rest are.
    let out_b = work.join("out-b");
    let job = submit(&out_b, "b");
    let slow = item(3);
    let t0 = Instant::now();
    let done_before = loop {
        let lines = report_lines(&report_of(&out_b, 1));
        let done = outcomes(&lines)
            .into_iter()
            .filter(|((i, _), o)| *i == slow && o == "ok")
            .count();
        if done >= 1 {
            cluster.run("scancel", &[&format!("{job}_1")]);
            break done;
        }
        assert!(
            !has_summary(&lines),
            "task 1 finished before the test could cancel it: give it more work (SLOW_COPIES)"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "task 1 never started its last package:\n{}",
            task_log("b", 1)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    cluster.wait_done(&job, Duration::from_secs(120));
    let states = cluster.task_states(&job);
    assert!(
        states[&0] == "COMPLETED 0:0" && states[&1].starts_with("CANCELLED"),
        "array {job}: {states:?}"
    );
    let cancelled = report_lines(&report_of(&out_b, 1));
    assert!(
        !has_summary(&cancelled),
        "task 1 completed despite the cancel: the test proves no resume"
    );
    let done: BTreeMap<_, _> = outcomes(&cancelled);
    let slow_done = done.keys().filter(|(i, _)| *i == slow).count();
    eprintln!(
        "task 1 cancelled with {slow_done} of {slow}'s {} inputs done (seen {done_before} done)",
        pkgs[3].1.len()
    );
    assert!(
        slow_done >= done_before && slow_done < pkgs[3].1.len(),
        "{slow_done} of {slow}'s inputs done at the cancel"
    );
    let out = btfkit_plain()
        .args(["report", &s(&out_b), "--list", &l])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "btfkit report with a cancelled task: {}",
        text(&out)
    );

    // Resubmit the same array: everything done before is reused, the rest made.
    let t0 = Instant::now();
    let job = submit(&out_b, "c");
    cluster.wait_done(&job, Duration::from_secs(300));
    eprintln!("resumed array: {:.1?}", t0.elapsed());
    let states = cluster.task_states(&job);
    assert_eq!(
        states.values().collect::<Vec<_>>(),
        ["COMPLETED 0:0", "COMPLETED 0:0"],
        "resubmitted array {job}: {states:?}\ntask 1:\n{}",
        task_log("c", 1)
    );
    assert_same_outputs(&out_b, &reference);
    let shard0 = outcomes(&report_lines(&report_of(&out_b, 0)));
    assert!(
        !shard0.is_empty() && shard0.values().all(|o| o == "reused"),
        "shard 0 after the resubmit: {shard0:?}"
    );
    let shard1 = outcomes(&report_lines(&report_of(&out_b, 1)));
    for (key, outcome) in &shard1 {
        let want = if done.get(key).is_some_and(|o| o == "ok") {
            "reused"
        } else {
            "ok"
        };
        assert_eq!(outcome, want, "{key:?} after the resubmit");
    }
    assert_eq!(shard1.len() + shard0.len(), inputs, "inputs in the resumed reports");
    let out = btfkit_plain()
        .args(["report", &s(&out_b), "--list", &l])
        .output()
        .unwrap();
    assert!(out.status.success(), "btfkit report after the resume: {}", text(&out));
    eprintln!("whole Slurm test: {:.1?}", t_all.elapsed());
    std::fs::remove_dir_all(&work).unwrap();
}
