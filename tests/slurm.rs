//! btfkit on a real (single-node) Slurm cluster, started for the test by
//! tests/slurm/cluster.sh with its own munged, ports and state directory.
//!
//! - `cluster_array_cancel_stop`: the cluster itself: a 2-task array whose
//!   tasks see each other running (so they run side by side, each with its
//!   array index), a task cancelled mid-run, and a stop with a task still
//!   running that leaves no process and no port behind.
//! - `kernel_list_array_matches_one_process_and_resumes`: the shipped sbatch
//!   script (deploy/slurm/btfkit-array.sbatch) runs `btfkit kernel --list`
//!   as a 2-task array over small debug packages made with `dpkg-deb --build`;
//!   the merged outputs equal a single-process run byte for byte and
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

use std::collections::BTreeMap;
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
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
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
    // Job states are not enough (SLURM.md: a broken proctrack reports
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
}
