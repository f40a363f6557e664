//! `cargo bench --bench dedup`: times dedup of the vmlinux pre-dedup file
//! (4,350,512 types) and checks the bytes against the reference. Prints wall
//! and process CPU time per run (the machine is shared: CPU time is steadier).
//! Runs: $DEDUP_BENCH_RUNS (default 5).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use btfkit::btf::{read, write};
use btfkit::dedup::{Options, dedup};

fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let runs: usize = std::env::var("DEDUP_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let input = common::read_corpus("expected-prededup/kernel/vmlinux.kernel.btf");
    let want = common::read_corpus("expected/kernel/vmlinux.kernel.btf");
    let btf = read::parse(&input).expect("pre-dedup vmlinux parses");
    println!(
        "dedup of {} types, {} runs (rayon threads: {})",
        btf.own_type_count(),
        runs,
        rayon::current_num_threads()
    );
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (w0, c0) = (Instant::now(), cpu_seconds());
        let out = dedup(
            &btf,
            &Options {
                ids_checked: true,
                ..Default::default()
            },
        )
        .expect("dedup");
        let (wall, cpu) = (w0.elapsed().as_secs_f64(), cpu_seconds() - c0);
        assert!(
            write::to_bytes(&out) == want,
            "output differs from expected/kernel/vmlinux.kernel.btf"
        );
        println!(
            "run {i}: wall {:.3} s  cpu {:.3} s  ({} types out)",
            wall,
            cpu,
            out.own_type_count()
        );
        walls.push(wall);
        cpus.push(cpu);
    }
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    println!(
        "dedup vmlinux: wall min {:.3} s median {:.3} s; cpu min {:.3} s median {:.3} s; output byte-identical",
        walls[0],
        walls[runs / 2],
        cpus[0],
        cpus[runs / 2]
    );
}
