//! Phase timings for `--timings` and the benchmark.

use std::time::Instant;

/// Phase timings on stderr (wall clock and process CPU time: the machine is
/// shared, so CPU time is the steadier figure), for `--timings` and the benchmark.
pub(super) struct Timer {
    on: bool,
    t0: (Instant, f64),
    last: std::cell::Cell<(Instant, f64)>,
}

pub(super) fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

impl Timer {
    pub(super) fn new(on: bool) -> Timer {
        let now = (Instant::now(), if on { cpu_seconds() } else { 0.0 });
        Timer {
            on,
            t0: now,
            last: std::cell::Cell::new(now),
        }
    }
    pub(super) fn lap(&self, what: &str) {
        if self.on {
            let now = (Instant::now(), cpu_seconds());
            let last = self.last.get();
            eprintln!(
                "dedup: {what:<14} wall {:7.1} ms  cpu {:7.1} ms   (total wall {:7.1} ms, cpu {:7.1} ms)",
                (now.0 - last.0).as_secs_f64() * 1e3,
                (now.1 - last.1) * 1e3,
                (now.0 - self.t0.0).as_secs_f64() * 1e3,
                (now.1 - self.t0.1) * 1e3,
            );
            self.last.set(now);
        }
    }
}
