//! `encode --stats`: the report of per-phase wall and CPU time, counts, peak
//! RSS and peak heap of one run, measured by [`btfkit::metrics`].

use std::time::Duration;

use btfkit::metrics::{Phase, Phases};

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
    let peak_rss = btfkit::metrics::usage().map(|u| u.peak_rss_bytes);
    let heap = phases.done.iter().map(|p| p.peak_heap).max().unwrap_or(0);
    let (wall, cpu) = phases
        .done
        .iter()
        .fold((Duration::ZERO, Duration::ZERO), |a, p| (a.0 + p.wall, a.1 + p.cpu));
    let mib = |b: usize| b as f64 / 1048576.0;
    if json {
        let ph: Vec<serde_json::Value> = phases
            .done
            .iter()
            .map(|&Phase { name: n, wall: w, cpu: c, peak_heap: h }| {
                let mut v = serde_json::json!({"phase": n, "wall_s": w.as_secs_f64(), "cpu_s": c.as_secs_f64(), "peak_heap_bytes": h});
                if let ("cu_loop", Some(l)) = (n, loop_cpu) {
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
        for &Phase {
            name: n,
            wall: w,
            cpu: c,
            peak_heap: h,
        } in &phases.done
        {
            eprintln!(
                "{:<10} {:>9.3} {:>9.3} {:>15.1}",
                n,
                w.as_secs_f64(),
                c.as_secs_f64(),
                mib(h)
            );
            if let ("cu_loop", Some(l)) = (n, loop_cpu) {
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
        let rss = peak_rss.map_or_else(|| "unknown".to_string(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
        eprintln!(
            "peak RSS: {rss}, peak heap allocated (capacity included, touched or not): {:.1} MiB",
            mib(heap)
        );
    }
}
