//! libbpf's log, reproduced: the engine writes the lines libbpf's debug
//! and warning output would have, in the same order, so a run can be
//! compared line by line with libbpf itself (tests/core_oracle.rs) and a
//! user can read what libbpf would have said.

/// Where the engine's log lines go: nowhere (the default, and nothing is
/// formatted), or kept in order.
#[derive(Debug, Default)]
pub struct Log {
    lines: Option<Vec<String>>,
}

impl Log {
    /// A log that formats nothing.
    pub fn off() -> Log {
        Log { lines: None }
    }

    /// A log that keeps every line.
    pub fn on() -> Log {
        Log {
            lines: Some(Vec::new()),
        }
    }

    pub fn is_on(&self) -> bool {
        self.lines.is_some()
    }

    /// Adds a line (without libbpf's `libbpf: ` prefix, which is added
    /// here), formatting it only when the log is kept.
    pub fn line(&mut self, f: impl FnOnce() -> String) {
        if let Some(v) = &mut self.lines {
            v.push(format!("libbpf: {}", f()));
        }
    }

    pub fn into_lines(self) -> Vec<String> {
        self.lines.unwrap_or_default()
    }
}
