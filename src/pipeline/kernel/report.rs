//! The report: one JSON line per input, read back on resume.

use super::*;

/// The flags of a run that decide its outputs' bytes, spelled one way
/// (features in their canonical order, then the language filter), so two
/// runs compare them as strings.
pub fn flags_string(opts: &Options) -> String {
    let mut s = format!("btf_features={}", opts.features.enabled_names().join(","));
    let codes = |l: &[u16]| {
        let mut l = l.to_vec();
        l.sort_unstable();
        l.dedup();
        l.iter().map(|c| format!("{c:#x}")).collect::<Vec<_>>().join(",")
    };
    match &opts.lang {
        LangFilter::All => {}
        LangFilter::Only(l) => s += &format!(" lang={}", codes(l)),
        LangFilter::Exclude(l) => s += &format!(" lang_exclude={}", codes(l)),
    }
    if opts.no_funcs {
        s += " no_funcs";
    }
    s
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Failed,
    Reused,
}

/// One line of a report: what became of one input.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// The list entry it belongs to (list runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    pub input: String,
    pub kind: InputKind,
    pub size: u64,
    pub fingerprint: String,
    pub outcome: Outcome,
    pub error: Option<String>,
    /// Relative to the report's directory.
    pub output: Option<String>,
    pub sha256: Option<String>,
    pub types: Option<u64>,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub version: String,
    pub flags: String,
    /// A module's: the sha256 of the `vmlinux.btf` it was split over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_sha256: Option<String>,
}

/// A list run's first report line.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub list: String,
    pub list_sha256: String,
    pub shard: [usize; 2],
    pub items: Vec<String>,
}

/// The last line of a finished run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    pub inputs: usize,
    pub ok: usize,
    pub reused: usize,
    pub failed: usize,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_rss_bytes: u64,
}

/// A package whose modules were all reached (read through, or as far as a
/// previous count said): a rerun of the same bytes stops its stream once
/// the modules it must encode are read, or reads none of it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PackageRead {
    /// The list entry it is (list runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    pub path: String,
    /// The package file's sha256.
    pub sha256: String,
    /// How many modules it has.
    pub modules: usize,
}

/// Any line of a report.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    Header(Header),
    Summary { summary: Totals },
    Package { package: PackageRead },
    Record(Box<Record>),
}

/// A report's lines. A line that does not parse is dropped: the last one
/// may be torn by a kill; any other is returned in `bad` (its number).
pub fn read_report(path: &Path) -> Result<(Vec<Line>, Vec<usize>), KernelError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => {
            return Err(KernelError::Report {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.split('\n').collect();
    let (mut out, mut bad) = (Vec::new(), Vec::new());
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(l) {
            Ok(x) => out.push(x),
            // A kill tears only the last line, which has no newline after it.
            Err(_) if i + 1 == lines.len() => {}
            Err(_) => bad.push(i + 1),
        }
    }
    Ok((out, bad))
}

/// The report being written: the lines are appended, one write each.
pub struct ReportWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl ReportWriter {
    /// Replaces `path` atomically with `first` (a header, or nothing), then
    /// opens it for appending.
    pub fn create(path: &Path, first: &[Line]) -> Result<ReportWriter, KernelError> {
        let mut text = String::new();
        for l in first {
            text += &serde_json::to_string(l).expect("report lines serialize");
            text.push('\n');
        }
        let rep = |source| KernelError::Report {
            path: path.to_path_buf(),
            source,
        };
        crate::output::write_atomic(path, text.as_bytes()).map_err(|e| rep(std::io::Error::other(e.to_string())))?;
        let file = std::fs::OpenOptions::new().append(true).open(path).map_err(rep)?;
        Ok(ReportWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends one line (the whole line in one write).
    pub fn append(&self, l: &Line) -> Result<(), KernelError> {
        let mut s = serde_json::to_string(l).expect("report lines serialize");
        s.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(s.as_bytes()).map_err(|source| KernelError::Report {
            path: self.path.clone(),
            source,
        })
    }
}
