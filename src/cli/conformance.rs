//! `btfkit conformance`: replays the corpus manifests through `btfkit pahole`
//! and reports, per manifest, variant and profile, how many cases are
//! byte-identical to the reference. For each failing case it names the first
//! type whose dump differs. A floor file lists the cases that must stay
//! identical; `--check-floor` fails when one of them regresses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use btfkit::btf::{self, dump};
use btfkit::testing::corpus::{Corpus, Row, read_manifest};

use super::{EXIT_NO, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    /// Corpus folder (default: $BTFKIT_CORPUS, else ../shared/corpus from the current directory).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Where decompressed corpus files and outputs go (default: $BTFKIT_CACHE, else
    /// $XDG_CACHE_HOME/btfkit, else ~/.cache/btfkit).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Which manifests/variants to replay: final, full, nofuncs (comma separated).
    #[arg(long, default_value = "final,full,nofuncs", value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Only rows whose case id contains one of these substrings.
    #[arg(long, value_delimiter = ',')]
    pub filter: Vec<String>,
    /// Skip rows whose case id contains one of these substrings.
    #[arg(long, value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// Leave out the vmlinux and module rows (the quick tier).
    #[arg(long)]
    pub fixtures_only: bool,
    /// Floor file: exit 1 if a case it lists is not byte-identical.
    #[arg(long)]
    pub check_floor: Option<PathBuf>,
    /// Add every passing case to this floor file (it only grows).
    #[arg(long)]
    pub update_floor: Option<PathBuf>,
    /// Rows replayed at once.
    #[arg(long, short = 'j', default_value_t = 2)]
    pub jobs: usize,
    /// Print every failing case with where it differs.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

enum Outcome {
    Pass,
    Fail(String),
}

fn sha256_hex(b: &[u8]) -> String {
    let d = Sha256::digest(b);
    d.iter().map(|x| format!("{x:02x}")).collect()
}

/// Where two BTF blobs first differ, by comparing their raw dumps.
pub fn first_difference(ours: &[u8], theirs: &[u8], base: Option<&Path>) -> String {
    let base = match base.map(|p| btfkit::elf::load_btf(p, None)) {
        Some(Ok(b)) => Some(std::sync::Arc::new(b)),
        Some(Err(e)) => return format!("cannot read base: {e}"),
        None => None,
    };
    let a = match btf::read::parse_split(ours, base.clone()) {
        Ok(b) => b,
        Err(e) => return format!("our output is not valid BTF: {e}"),
    };
    let b = match btf::read::parse_split(theirs, base) {
        Ok(b) => b,
        Err(e) => return format!("expected output is not valid BTF: {e}"),
    };
    let dumped = dump_difference(&a, &b);
    // The semantic comparison says where, by name, the two differ
    // (`-` only in ours, `+` only in the expected output).
    format!(
        "{dumped}\n    diff ours -> expected: {}",
        btfkit::diff::compare(&a, &b).first(5)
    )
}

/// Where two parsed BTFs first differ, by comparing their raw dumps.
fn dump_difference(a: &btf::Btf, b: &btf::Btf) -> String {
    let (da, db) = (dump::raw_string(a), dump::raw_string(b));
    let mut la = da.lines();
    let mut lb = db.lines();
    let mut last_type = String::new();
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => {
                if x.starts_with('[') {
                    last_type = x.to_string();
                }
            }
            (None, None) => {
                return if a.raw_strings() != b.raw_strings() {
                    let n = a
                        .raw_strings()
                        .iter()
                        .zip(b.raw_strings())
                        .take_while(|(p, q)| p == q)
                        .count();
                    format!(
                        "types identical ({}), string sections differ at byte {} (ours {} bytes, expected {})",
                        a.own_type_count(),
                        n,
                        a.raw_strings().len(),
                        b.raw_strings().len()
                    )
                } else {
                    "dumps identical, bytes differ (header or byte order)".into()
                };
            }
            (x, y) => {
                let ctx = if x.is_some_and(|x| x.starts_with('\t')) {
                    format!(" in {last_type}")
                } else {
                    String::new()
                };
                return format!(
                    "first difference{}: ours `{}` expected `{}` (ours {} types, expected {})",
                    ctx,
                    x.unwrap_or("<end>"),
                    y.unwrap_or("<end>"),
                    a.own_type_count(),
                    b.own_type_count()
                );
            }
        }
    }
}

fn replay_row(row: &Row, cache: &Corpus, scratch: &Path, exe: &Path) -> anyhow::Result<Outcome> {
    let input = cache.file(&row.input)?;
    let base = if row.base != "-" {
        Some(cache.file(&row.base)?)
    } else {
        None
    };
    let work = scratch.join(format!("{}.{}", row.case_id.replace('/', "__"), row.variant));
    std::fs::create_dir_all(&work)?;
    let output = work.join("out.btf");
    let _ = std::fs::remove_file(&output);
    let mut input_arg = input.clone();
    if row.mode.starts_with("inplace:") {
        let copy = work.join(input.file_name().unwrap());
        std::fs::copy(&input, &copy)?;
        input_arg = copy;
    }
    let mut cmd = Command::new(exe);
    cmd.arg("pahole");
    match row.variant.as_str() {
        "full" => {
            cmd.arg("--no-dedup");
        }
        "nofuncs" => {
            cmd.args(["--no-dedup", "--no-funcs"]);
        }
        _ => {}
    }
    for a in row.args.split(' ') {
        let a = a
            .replace("{input}", &input_arg.to_string_lossy())
            .replace("{output}", &output.to_string_lossy())
            .replace(
                "{base}",
                &base
                    .as_ref()
                    .map(|b| b.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        cmd.arg(a);
    }
    let res = cmd.output().with_context(|| format!("running {}", exe.display()))?;
    let stderr = String::from_utf8_lossy(&res.stderr).into_owned();
    let first_err = stderr.lines().next().unwrap_or("").to_string();
    if row.expected == "-" {
        // The reference wrote nothing: we must write nothing, exit 2, and name
        // the unsupported construct the way the reference does.
        if output.exists() {
            return Ok(Outcome::Fail(
                "wrote an output file where the reference wrote none".into(),
            ));
        }
        if res.status.code() != Some(2) {
            return Ok(Outcome::Fail(format!(
                "exit {:?}, expected 2 and no output; stderr: {first_err}",
                res.status.code()
            )));
        }
        if stderr.contains("not implemented") {
            return Ok(Outcome::Fail(format!("not implemented: {first_err}")));
        }
        if row.stderr != "-" {
            let theirs = std::fs::read_to_string(cache.file(&row.stderr)?)?;
            if let Some(tag) = theirs
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .find(|w| w.starts_with("DW_TAG_"))
                && !stderr.contains(tag)
            {
                return Ok(Outcome::Fail(format!("error does not name {tag}: {first_err}")));
            }
        }
        return Ok(Outcome::Pass);
    }
    if !res.status.success() {
        return Ok(Outcome::Fail(format!("exit {:?}: {}", res.status.code(), first_err)));
    }
    let ours = if let Some(sec) = row.mode.strip_prefix("inplace:") {
        let data = std::fs::read(&input_arg)?;
        let obj = object::File::parse(&*data).context("output ELF")?;
        match btfkit::elf::section_data(&input_arg, &obj, sec)? {
            Some(d) => d.into_owned(),
            None => return Ok(Outcome::Fail(format!("output ELF has no {sec} section"))),
        }
    } else {
        match std::fs::read(&output) {
            Ok(b) => b,
            Err(_) => return Ok(Outcome::Fail(format!("no output file written; stderr: {first_err}"))),
        }
    };
    let _ = std::fs::remove_dir_all(&work);
    if sha256_hex(&ours) == row.sha {
        return Ok(Outcome::Pass);
    }
    let theirs = std::fs::read(cache.file(&row.expected)?)?;
    // In-place .BTF is split over the .BTF.base the reference wrote beside it.
    let diff_base = if row.mode == "inplace:.BTF" {
        Some(cache.file(&row.expected.replace(".inplace.BTF", ".inplace.BTF.base"))?)
    } else {
        base
    };
    Ok(Outcome::Fail(first_difference(&ours, &theirs, diff_base.as_deref())))
}

/// The cases a floor file lists; a missing file is an empty floor only
/// where one is being grown (`--update-floor`).
fn read_floor(path: &Path, may_be_missing: bool) -> anyhow::Result<BTreeSet<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if may_be_missing && e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read the floor file", path.display())),
    };
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.to_string())
        .collect())
}

/// The manifests' variants `--variants` chooses from.
const VARIANTS: [&str; 3] = ["final", "full", "nofuncs"];

pub fn run(a: Args) -> anyhow::Result<i32> {
    let mut cache = Corpus::open_default();
    let from = match &a.corpus {
        Some(d) => {
            cache.dir = d.clone();
            "--corpus"
        }
        None => btfkit::testing::corpus::corpus_dir_and_source().1,
    };
    if !cache.exists() {
        anyhow::bail!(
            "{}: no manifest.tsv: not the conformance corpus (taken from {from}; give --corpus DIR or set BTFKIT_CORPUS)",
            cache.dir.display()
        );
    }
    eprintln!("btfkit: corpus {} (from {from})", cache.dir.display());
    if let Some(d) = &a.cache {
        cache.cache = d.clone();
    }
    std::fs::create_dir_all(&cache.cache).with_context(|| format!("{}", cache.cache.display()))?;
    let corpus = cache.dir.clone();
    if let Some(v) = a.variants.iter().find(|v| !VARIANTS.contains(&v.as_str())) {
        anyhow::bail!("--variants: no variant `{v}` (there are {})", VARIANTS.join(", "));
    }
    // A floor that cannot be read is an error before the replay, not after.
    let floor = match &a.check_floor {
        Some(f) => {
            let want = read_floor(f, false)?;
            if want.is_empty() {
                anyhow::bail!(
                    "{}: the floor file lists no case: a check of it would check nothing",
                    f.display()
                );
            }
            Some((f, want))
        }
        None => None,
    };
    let mut rows = Vec::new();
    if a.variants.iter().any(|v| v == "final") {
        rows.extend(read_manifest(&corpus.join("manifest.tsv"), false)?);
    }
    if a.variants.iter().any(|v| v == "full" || v == "nofuncs") {
        rows.extend(
            read_manifest(&corpus.join("expected-prededup/manifest.tsv"), true)?
                .into_iter()
                .filter(|r| a.variants.contains(&r.variant)),
        );
    }
    rows.retain(|r| {
        (a.filter.is_empty() || a.filter.iter().any(|f| r.case_id.contains(f.as_str())))
            && !a.exclude.iter().any(|f| r.case_id.contains(f.as_str()))
            && (!a.fixtures_only || r.case_id.starts_with("fixture/"))
    });
    if rows.is_empty() {
        anyhow::bail!(
            "no corpus case selected (--variants {}{}{}{}): a replay of nothing checks nothing",
            a.variants.join(","),
            if a.filter.is_empty() {
                String::new()
            } else {
                format!(", --filter {}", a.filter.join(","))
            },
            if a.exclude.is_empty() {
                String::new()
            } else {
                format!(", --exclude {}", a.exclude.join(","))
            },
            if a.fixtures_only { ", --fixtures-only" } else { "" },
        );
    }
    if let Some((f, want)) = &floor
        && !rows.iter().any(|r| want.contains(&r.key()))
    {
        anyhow::bail!(
            "{}: none of the {} cases it lists is among the {} selected: a check of it would check nothing",
            f.display(),
            want.len(),
            rows.len()
        );
    }
    // Modules need the vmlinux base decompressed; do that once, up front.
    for r in &rows {
        if r.base != "-" {
            cache.file(&r.base)?;
        }
    }
    let exe = std::env::current_exe()?;
    // One directory per run: two replays on one machine (two checkouts, two
    // CI jobs) share the decompressed corpus but must not share outputs.
    let scratch = cache.cache.join("out").join(format!("run-{}", std::process::id()));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(a.jobs.max(1)).build()?;
    let results: Vec<(usize, Outcome)> = pool.install(|| {
        rows.par_iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    i,
                    replay_row(r, &cache, &scratch, &exe).unwrap_or_else(|e| Outcome::Fail(format!("harness: {e:#}"))),
                )
            })
            .collect()
    });
    let mut per: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    let mut passing = BTreeSet::new();
    let mut failures = Vec::new();
    for (i, o) in &results {
        let r = &rows[*i];
        let e = per.entry((r.variant.clone(), r.profile.clone())).or_default();
        e.1 += 1;
        match o {
            Outcome::Pass => {
                e.0 += 1;
                passing.insert(r.key());
            }
            Outcome::Fail(why) => failures.push((r.key(), why.clone())),
        }
    }
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(&scratch);
    } else {
        eprintln!("btfkit: the outputs of this replay are kept in {}", scratch.display());
    }
    if a.verbose || failures.len() <= 40 {
        for (k, why) in &failures {
            out!("FAIL {k}: {why}");
        }
    } else {
        for (k, why) in failures.iter().take(40) {
            out!("FAIL {k}: {why}");
        }
        out!("... {} more failing cases (use -v)", failures.len() - 40);
    }
    out!("{:<8} {:<8} {:>10}", "variant", "profile", "identical");
    for ((v, p), (ok, n)) in &per {
        out!("{v:<8} {p:<8} {ok:>5} / {n}");
    }
    let total_ok = passing.len();
    let total = rows.len();
    let mut code = EXIT_OK;
    if let Some((floor, want)) = &floor {
        let selected: BTreeSet<String> = rows.iter().map(|r| r.key()).collect();
        let lost: Vec<&String> = want
            .iter()
            .filter(|k| selected.contains(*k) && !passing.contains(*k))
            .collect();
        for k in &lost {
            out!("REGRESSION {k}: listed in {} but not byte-identical", floor.display());
        }
        if !lost.is_empty() {
            code = EXIT_NO;
        }
        out!(
            "floor: {} listed cases replayed, {} regressed",
            want.iter().filter(|k| selected.contains(*k)).count(),
            lost.len()
        );
    }
    if let Some(floor) = &a.update_floor {
        let mut all = read_floor(floor, true)?;
        let before = all.len();
        all.extend(passing.iter().cloned());
        let mut text = String::from(
            "# Cases (variant<TAB>case id) that must stay byte-identical to the reference.\n# Grown by `btfkit conformance --update-floor`; never remove a line.\n",
        );
        for k in &all {
            text.push_str(k);
            text.push('\n');
        }
        btfkit::output::write_atomic(floor, text.as_bytes())?;
        out!("floor: {} -> {} cases", before, all.len());
    }
    out!("conformance: {} passed, {} failed", total_ok, total - total_ok);
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use btfkit::btf::{Btf, Endian, Kind, write::to_bytes};

    fn sample(member: &[u8], extra: bool) -> Vec<u8> {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        b.begin(Kind::Struct, b"s", 4, false);
        b.push_member(member, int, 0, 0);
        if extra {
            let p = b.begin(Kind::FuncProto, b"", 0, false);
            b.add_func(b"f", p, 1);
        }
        to_bytes(&b)
    }

    #[test]
    fn first_difference_adds_the_semantic_diff_after_the_dump_line() {
        let msg = first_difference(&sample(b"a", false), &sample(b"b", true), None);
        let lines: Vec<&str> = msg.lines().collect();
        assert_eq!(lines.len(), 2, "{msg}");
        assert!(
            lines[0].starts_with("first difference in [2] STRUCT 's' size=4 vlen=1: ours `\t'a' type_id=1"),
            "{msg}"
        );
        assert_eq!(
            lines[1],
            "    diff ours -> expected: 3 differences: 1 added, 2 member; first: + func f: global void (void); \
             - struct s.a: int @0; + struct s.b: int @0"
        );
    }

    #[test]
    fn first_difference_of_equivalent_outputs_says_so() {
        let mut b = Btf::new(Endian::Little);
        b.add_str(b"unused");
        let int = b.add_int(b"int", 4, 1);
        b.begin(Kind::Struct, b"s", 4, false);
        b.push_member(b"a", int, 0, 0);
        let msg = first_difference(&sample(b"a", false), &to_bytes(&b), None);
        assert!(msg.ends_with("\n    diff ours -> expected: equivalent"), "{msg}");
    }
}
