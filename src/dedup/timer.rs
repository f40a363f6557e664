//! Phase timings for `--timings` and the benchmark: one line on stderr per
//! pass, read off [`crate::metrics::Laps`].

use crate::metrics::Laps;

pub(super) struct Timer(Option<Laps>);

impl Timer {
    pub(super) fn new(on: bool) -> Timer {
        Timer(on.then(Laps::start))
    }
    pub(super) fn lap(&self, what: &str) {
        if let Some(laps) = &self.0 {
            let l = laps.lap();
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            eprintln!(
                "dedup: {what:<14} wall {:7.1} ms  cpu {:7.1} ms   (total wall {:7.1} ms, cpu {:7.1} ms)",
                ms(l.wall),
                ms(l.cpu),
                ms(l.total_wall),
                ms(l.total_cpu),
            );
        }
    }
}
