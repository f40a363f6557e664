//! Access to the conformance corpus (`../shared/corpus`): its manifests and
//! its files, with `.zst` files decompressed once into a cache outside the
//! read-only corpus folder. Used by `btfkit conformance` and the test suite.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One manifest row.
#[derive(Clone, Debug)]
pub struct Row {
    /// `final` (manifest.tsv) or the pre-dedup variant (`full`, `nofuncs`).
    pub variant: String,
    pub case_id: String,
    pub input: String,
    pub profile: String,
    /// `detached` or `inplace:<section>`.
    pub mode: String,
    pub base: String,
    pub args: String,
    pub expected: String,
    pub sha: String,
    pub stderr: String,
}

impl Row {
    /// The key used in floor files: `variant<TAB>case_id`.
    pub fn key(&self) -> String {
        format!("{}\t{}", self.variant, self.case_id)
    }
}

/// The corpus folder: `$BTFKIT_CORPUS`, else `../shared/corpus` from the
/// current directory (a project checkout's place for it; nothing here
/// depends on where btfkit was built).
pub fn corpus_dir() -> PathBuf {
    corpus_dir_and_source().0
}

/// [`corpus_dir`] and where it came from, for saying so.
pub fn corpus_dir_and_source() -> (PathBuf, &'static str) {
    match std::env::var_os("BTFKIT_CORPUS") {
        Some(d) => (PathBuf::from(d), "$BTFKIT_CORPUS"),
        None => (
            PathBuf::from("../shared/corpus"),
            "../shared/corpus from the current directory",
        ),
    }
}

/// The cache folder (decompressed corpus files, replay outputs, the tests'
/// scratch): `$BTFKIT_CACHE`, else `$XDG_CACHE_HOME/btfkit`, else
/// `~/.cache/btfkit`, else `btfkit-cache` in the temporary directory.
pub fn cache_dir() -> PathBuf {
    let nonempty = |v: &str| std::env::var_os(v).filter(|d| !d.is_empty()).map(PathBuf::from);
    nonempty("BTFKIT_CACHE")
        .or_else(|| nonempty("XDG_CACHE_HOME").map(|d| d.join("btfkit")))
        .or_else(|| nonempty("HOME").map(|h| h.join(".cache/btfkit")))
        .unwrap_or_else(|| std::env::temp_dir().join("btfkit-cache"))
}

fn bad(path: &Path, msg: String) -> Error {
    Error::Input {
        path: path.to_path_buf(),
        msg,
    }
}

/// Reads `manifest.tsv` (`prededup == false`) or `expected-prededup/manifest.tsv`.
pub fn read_manifest(path: &Path, prededup: bool) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| bad(path, "empty manifest".into()))?
        .split('\t')
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != header.len() {
            return Err(bad(
                path,
                format!("line {}: {} columns, header has {}", n + 2, f.len(), header.len()),
            ));
        }
        let get = |name: &str| {
            col(name)
                .and_then(|i| f.get(i))
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into())
        };
        rows.push(Row {
            variant: if prededup { get("variant") } else { "final".into() },
            case_id: get("case_id"),
            input: get("input"),
            profile: get("profile"),
            mode: if prededup { "detached".into() } else { get("mode") },
            base: get("base"),
            args: get("args"),
            expected: get("expected"),
            sha: get("expected_sha256"),
            stderr: get("stderr"),
        });
    }
    Ok(rows)
}

/// Corpus files by their decompressed names.
pub struct Corpus {
    pub dir: PathBuf,
    pub cache: PathBuf,
}

impl Corpus {
    /// The default corpus and cache (see [`corpus_dir`], [`cache_dir`]).
    pub fn open_default() -> Corpus {
        Corpus {
            dir: corpus_dir(),
            cache: cache_dir(),
        }
    }

    pub fn exists(&self) -> bool {
        self.dir.join("manifest.tsv").exists()
    }

    /// Both manifests: final rows, then the pre-dedup ones.
    pub fn all_rows(&self) -> Result<Vec<Row>> {
        let mut rows = read_manifest(&self.dir.join("manifest.tsv"), false)?;
        rows.extend(read_manifest(&self.dir.join("expected-prededup/manifest.tsv"), true)?);
        Ok(rows)
    }

    /// A readable path for corpus file `rel` (its decompressed name).
    pub fn file(&self, rel: &str) -> Result<PathBuf> {
        let plain = self.dir.join(rel);
        if plain.exists() {
            return Ok(plain);
        }
        let out = self.cache.join("files").join(rel);
        if out.exists() {
            return Ok(out);
        }
        let zst = self.dir.join(format!("{rel}.zst"));
        let data = std::fs::read(&zst).map_err(|e| Error::io(&zst, e))?;
        let mut dec = zstd::stream::read::Decoder::new(&data[..]).map_err(|e| Error::io(&zst, e))?;
        // The vmlinux was compressed with --long=27.
        dec.window_log_max(31).map_err(|e| Error::io(&zst, e))?;
        let mut bytes = Vec::new();
        dec.read_to_end(&mut bytes).map_err(|e| Error::io(&zst, e))?;
        let parent = out.parent().expect("cache path has a parent");
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        crate::output::write_atomic(&out, &bytes)?;
        Ok(out)
    }

    /// Every file under `expected/` and `expected-prededup/` whose
    /// decompressed name ends with `suffix`, as corpus-relative names.
    pub fn expected_files(&self, suffix: &str) -> Vec<String> {
        let mut out = Vec::new();
        for top in ["expected", "expected-prededup"] {
            walk(&self.dir.join(top), &mut |p| {
                let rel = p
                    .strip_prefix(&self.dir)
                    .expect("under corpus")
                    .to_string_lossy()
                    .into_owned();
                let rel = rel.strip_suffix(".zst").map(str::to_string).unwrap_or(rel);
                if rel.ends_with(suffix) {
                    out.push(rel);
                }
            });
        }
        out.sort();
        out.dedup();
        out
    }
}

fn walk(dir: &Path, f: &mut impl FnMut(&Path)) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}
