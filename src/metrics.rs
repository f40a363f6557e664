//! What this process measures of itself: CPU time (of a thread or of the
//! process), peak RSS, wall-and-CPU laps between phases, and the heap a
//! run's work allocates. Every report (`encode --stats`, `--timings`, the
//! kernel report's lines and summary) reads its figures here, so that each
//! clock is read one way and a failed read is `None`, not a zero that looks
//! like a measurement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn clock(id: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec it is given.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
}

/// The calling thread's CPU time so far.
#[inline]
pub fn thread_cpu() -> Option<Duration> {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The process's CPU time so far, every thread's (finished ones included).
#[inline]
pub fn process_cpu() -> Option<Duration> {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The process's resource use so far, as `getrusage(RUSAGE_SELF)` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// User plus system time.
    pub cpu: Duration,
    /// The largest resident set so far, in bytes.
    pub peak_rss_bytes: u64,
}

/// [`Usage`] now.
pub fn usage() -> Option<Usage> {
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| {
        Some(Duration::new(
            u64::try_from(t.tv_sec).ok()?,
            u32::try_from(t.tv_usec).ok()? * 1000,
        ))
    };
    Some(Usage {
        cpu: tv(ru.ru_utime)? + tv(ru.ru_stime)?,
        // Linux counts ru_maxrss in KiB.
        peak_rss_bytes: u64::try_from(ru.ru_maxrss).ok()? * 1024,
    })
}

/// The time since the previous lap and since the start, wall and process
/// CPU (the machine is shared, so CPU time is the steadier figure).
#[derive(Clone, Copy, Debug)]
pub struct Lap {
    pub wall: Duration,
    pub cpu: Duration,
    pub total_wall: Duration,
    pub total_cpu: Duration,
}

/// A stopwatch of consecutive phases (see [`Lap`]).
pub struct Laps {
    start: (Instant, Duration),
    last: Cell<(Instant, Duration)>,
}

impl Laps {
    pub fn start() -> Laps {
        let now = (Instant::now(), process_cpu().unwrap_or_default());
        Laps {
            start: now,
            last: Cell::new(now),
        }
    }

    /// Ends the lap running since the previous call (or the start).
    pub fn lap(&self) -> Lap {
        let now = (Instant::now(), process_cpu().unwrap_or(self.last.get().1));
        let last = self.last.replace(now);
        Lap {
            wall: now.0 - last.0,
            cpu: now.1.saturating_sub(last.1),
            total_wall: now.0 - self.start.0,
            total_cpu: now.1.saturating_sub(self.start.1),
        }
    }
}

/// A global allocator that counts the bytes a run's work holds, once
/// [`enable_heap_counting`] switched it on: ordinary runs pay one relaxed
/// load per allocation and nothing else. Install it in the binary with
/// `#[global_allocator]`.
pub struct CountingAlloc;

static ENABLED: AtomicBool = AtomicBool::new(false);
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters are only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if ENABLED.load(Ordering::Relaxed) && !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ENABLED.load(Ordering::Relaxed) {
            CURRENT.fetch_sub(layout.size().min(CURRENT.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if ENABLED.load(Ordering::Relaxed) && !p.is_null() {
            if new_size >= layout.size() {
                let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                let d = (layout.size() - new_size).min(CURRENT.load(Ordering::Relaxed));
                CURRENT.fetch_sub(d, Ordering::Relaxed);
            }
        }
        p
    }
}

/// Starts counting heap bytes (allocations made before are not counted, so
/// the figure is the heap this run's work needed).
pub fn enable_heap_counting() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// The peak since the previous call (or since counting started), and a new
/// period starting at the current level: per-phase peaks.
pub fn take_peak_heap() -> usize {
    let peak = PEAK.load(Ordering::Relaxed);
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
    peak
}

/// One finished phase of [`Phases`].
#[derive(Clone, Copy, Debug)]
pub struct Phase {
    pub name: &'static str,
    pub wall: Duration,
    pub cpu: Duration,
    /// The heap's peak during the phase (0 unless counting is on).
    pub peak_heap: usize,
}

/// Wall and CPU time and peak heap of consecutive phases.
pub struct Phases {
    laps: Laps,
    pub done: Vec<Phase>,
}

impl Phases {
    pub fn start() -> Phases {
        Phases {
            laps: Laps::start(),
            done: Vec::new(),
        }
    }

    /// Ends the phase running since the previous mark.
    pub fn mark(&mut self, name: &'static str) {
        let lap = self.laps.lap();
        self.done.push(Phase {
            name,
            wall: lap.wall,
            cpu: lap.cpu,
            peak_heap: take_peak_heap(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_read_and_move_forward() {
        let t0 = thread_cpu().expect("the thread's CPU clock");
        let p0 = process_cpu().expect("the process's CPU clock");
        // spin until the thread clock moves (its resolution is at most a tick)
        let mut x = 0u64;
        while thread_cpu().unwrap() == t0 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(process_cpu().unwrap() >= p0);
        let u = usage().expect("getrusage");
        assert!(u.peak_rss_bytes > 0);
    }

    #[test]
    fn laps_add_up_to_the_total() {
        let laps = Laps::start();
        let a = laps.lap();
        let b = laps.lap();
        assert!(b.total_wall >= a.wall + b.wall);
        assert!(b.total_cpu >= a.cpu + b.cpu);
    }
}
