//! `encode --stats`: per-phase wall and CPU time, counts, peak RSS and peak
//! heap of one run. The heap figure comes from a counting allocator that
//! only counts once `--stats` switched it on, so ordinary runs pay one
//! relaxed load per allocation and nothing else.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct CountingAlloc;

static ENABLED: AtomicBool = AtomicBool::new(false);
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters are only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
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
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
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
fn take_peak_heap() -> usize {
    let peak = PEAK.load(Ordering::Relaxed);
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
    peak
}

/// The process's CPU time so far and its peak RSS in bytes.
pub fn process_cpu_and_peak_rss() -> (Duration, usize) {
    rusage()
}

fn rusage() -> (Duration, usize) {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_maxrss as usize * 1024)
}

/// Wall and CPU time and peak heap of consecutive phases.
pub struct Phases {
    last_wall: Instant,
    last_cpu: Duration,
    pub done: Vec<(&'static str, Duration, Duration, usize)>,
}

impl Phases {
    pub fn start() -> Phases {
        Phases {
            last_wall: Instant::now(),
            last_cpu: rusage().0,
            done: Vec::new(),
        }
    }
    /// Ends the phase running since the previous mark.
    pub fn mark(&mut self, name: &'static str) {
        let (cpu, _) = rusage();
        let now = Instant::now();
        self.done.push((
            name,
            now - self.last_wall,
            cpu.saturating_sub(self.last_cpu),
            take_peak_heap(),
        ));
        self.last_wall = now;
        self.last_cpu = cpu;
    }
}

/// [`Phases::mark`] on phases shared with the encoder's phase hook (a
/// poisoned lock still holds usable marks).
pub fn mark_shared(phases: &std::sync::Mutex<Phases>, name: &'static str) {
    phases.lock().unwrap_or_else(|e| e.into_inner()).mark(name)
}

/// The CU loop's CPU by kind of work, as the report names them.
fn loop_parts(l: &btfkit::encode::LoopCpu) -> [(&'static str, Duration); 4] {
    [
        ("decode", l.decode),
        ("encode", l.cu_encode),
        ("merge", l.merge),
        ("dedup", l.on_merged),
    ]
}

/// Prints the report, as a table or one JSON object. `loop_cpu` splits the
/// `cu_loop` phase's CPU time (its parts overlap in wall time).
pub fn report(phases: &Phases, loop_cpu: Option<&btfkit::encode::LoopCpu>, counts: &[(&str, u64)], json: bool) {
    let (_, peak_rss) = rusage();
    let heap = phases.done.iter().map(|p| p.3).max().unwrap_or(0);
    let (wall, cpu) = phases
        .done
        .iter()
        .fold((Duration::ZERO, Duration::ZERO), |a, p| (a.0 + p.1, a.1 + p.2));
    let mib = |b: usize| b as f64 / 1048576.0;
    if json {
        let ph: Vec<serde_json::Value> = phases
            .done
            .iter()
            .map(|(n, w, c, h)| {
                let mut v = serde_json::json!({"phase": n, "wall_s": w.as_secs_f64(), "cpu_s": c.as_secs_f64(), "peak_heap_bytes": h});
                if let (&"cu_loop", Some(l)) = (n, loop_cpu) {
                    let parts: serde_json::Map<String, serde_json::Value> =
                        loop_parts(l).iter().map(|(k, d)| (format!("{k}_cpu_s"), d.as_secs_f64().into())).collect();
                    v["cpu_parts"] = parts.into();
                }
                v
            })
            .collect();
        let cn: serde_json::Map<String, serde_json::Value> =
            counts.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
        let v = serde_json::json!({
            "phases": ph,
            "total": {"wall_s": wall.as_secs_f64(), "cpu_s": cpu.as_secs_f64()},
            "counts": cn,
            "peak_rss_bytes": peak_rss,
            "peak_heap_bytes": heap,
        });
        eprintln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        eprintln!("{:<10} {:>9} {:>9} {:>15}", "phase", "wall s", "cpu s", "peak heap MiB");
        for (n, w, c, h) in &phases.done {
            eprintln!(
                "{:<10} {:>9.3} {:>9.3} {:>15.1}",
                n,
                w.as_secs_f64(),
                c.as_secs_f64(),
                mib(*h)
            );
            if let (&"cu_loop", Some(l)) = (n, loop_cpu) {
                // summed over the threads that did it, beside each other
                for (k, d) in loop_parts(l) {
                    eprintln!("  {:<8} {:>9} {:>9.3}", k, "", d.as_secs_f64());
                }
            }
        }
        eprintln!("{:<10} {:>9.3} {:>9.3}", "total", wall.as_secs_f64(), cpu.as_secs_f64());
        for (k, v) in counts {
            eprintln!("{k}: {v}");
        }
        eprintln!(
            "peak RSS: {:.1} MiB, peak heap allocated (capacity included, touched or not): {:.1} MiB",
            mib(peak_rss),
            mib(heap)
        );
    }
}
