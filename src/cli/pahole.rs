//! `btfkit pahole ARGS`: the reference's command line for BTF encoding,
//! parsed strictly left to right like its argp parser (the first
//! `--btf_features` resets the feature switches; legacy flags write the same
//! switches in order).

use std::path::PathBuf;

use anyhow::bail;

use btfkit::encode::{self, Features, LangFilter, Options, Reference};
use btfkit::pipeline::Plan;

use super::args::default_jobs;
use super::encode::{Report, execute};
use super::{EXIT_ERR, EXIT_OK};

#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// pahole arguments (-J, -j[N], --btf_features=…, --btf_encode_detached=FILE, --btf_base=FILE,
    /// --lang_exclude=…, --lang=…, legacy feature flags) plus btfkit's --no-dedup / --no-funcs.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// Options that take a value (`--opt=V` or `--opt V`).
const WITH_VALUE: &[&str] = &[
    "--btf_features",
    "--btf_features_strict",
    "--btf_encode_detached",
    "--btf_base",
    "--lang",
    "--lang_exclude",
    "--kabi_prefix",
];

/// `BTFKIT_PAHOLE_REFERENCE=next` makes `btfkit pahole` the next reference
/// for every run (its feature list too); `v1.31`, or unset, is v1.31 unless
/// the command line names a feature only the next one has.
const REFERENCE_ENV: &str = "BTFKIT_PAHOLE_REFERENCE";

fn pinned_reference() -> anyhow::Result<Option<Reference>> {
    match std::env::var(REFERENCE_ENV).ok().as_deref() {
        None | Some("") => Ok(None),
        Some("next") => Ok(Some(Reference::Next)),
        Some("v1.31" | "1.31") => Ok(Some(Reference::V1_31)),
        Some(v) => bail!("{REFERENCE_ENV}={v}: expected next or v1.31"),
    }
}

/// The pinned reference, else next when a feature only it has is named.
fn reference_of(pinned: Option<Reference>, f: &Features) -> Reference {
    pinned.unwrap_or(if f.names_next_only() {
        Reference::Next
    } else {
        Reference::V1_31
    })
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let pinned = pinned_reference()?;
    let mut features = Features::default();
    let mut jobs = 1usize;
    let mut verbose = false;
    let mut encode_btf = false;
    let mut detached: Option<PathBuf> = None;
    let mut base: Option<PathBuf> = None;
    let mut lang_only: Option<Vec<u16>> = None;
    let mut lang_exclude: Option<Vec<u16>> = None;
    let mut cu_exclude: Option<Vec<u8>> = None;
    let mut no_dedup = false;
    let mut no_funcs = false;
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut it = a.args.into_iter();
    while let Some(arg) = it.next() {
        if !arg.starts_with('-') || arg == "-" {
            inputs.push(arg.into());
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> anyhow::Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("pahole option {name} needs a value")),
            }
        };
        match name.as_str() {
            "-J" | "--btf_encode" => encode_btf = true,
            "--btf_encode_detached" => {
                encode_btf = true;
                detached = Some(value()?.into());
            }
            "--btf_base" => base = Some(value()?.into()),
            "--btf_features" => {
                let v = value()?;
                features.apply_list(&v);
            }
            "--btf_features_strict" => {
                let v = value()?;
                let mut unknown = features.apply_list(&v);
                if pinned == Some(Reference::V1_31) {
                    let next_only = ["true_signature", "layout"];
                    unknown.extend(v.split(',').filter(|x| next_only.contains(x)).map(str::to_string));
                }
                if !unknown.is_empty() {
                    eprintln!("{}", reference_of(pinned, &features).feature_names().join(","));
                    bail!(
                        "unknown BTF feature(s) with --btf_features_strict: {}",
                        unknown.join(", ")
                    );
                }
            }
            "--supported_btf_features" => {
                out!("{}", pinned.unwrap_or_default().feature_names().join(","));
                return Ok(EXIT_OK);
            }
            "--version" => {
                out!("v1.31");
                return Ok(EXIT_OK);
            }
            "--numeric_version" => {
                out!("131");
                return Ok(EXIT_OK);
            }
            "--lang" => lang_only = Some(encode::lang::parse_list(&value()?).map_err(anyhow::Error::msg)?),
            "--lang_exclude" => lang_exclude = Some(encode::lang::parse_list(&value()?).map_err(anyhow::Error::msg)?),
            "-X" | "--cu_exclude" => cu_exclude = Some(value()?.into_bytes()),
            "--skip_encoding_btf_vars" => features.var = false,
            "--skip_encoding_btf_decl_tag" => features.decl_tag = false,
            "--skip_encoding_btf_type_tag" => features.type_tag = false,
            "--skip_encoding_btf_enum64" => features.enum64 = false,
            "--btf_gen_floats" => features.float = true,
            "--btf_gen_optimized" => features.optimized_func = true,
            "--skip_encoding_btf_inconsistent_proto" => features.consistent_func = true,
            "--btf_encode_force" => features.encode_force = true,
            "--reproducible_build" => features.reproducible_build = true,
            "--btf_attributes" => features.attributes = true,
            "--btf_gen_all" => features.gen_all(),
            "-V" | "--verbose" => verbose = true,
            "-h" | "--help" => {
                out!("{HELP}");
                return Ok(EXIT_OK);
            }
            "--no-dedup" => no_dedup = true,
            "--no-funcs" => no_funcs = true,
            "--jobs" => {
                jobs = match inline {
                    Some(v) => parse_jobs(&v)?,
                    None => default_jobs(),
                }
            }
            n if n.starts_with("-j") => {
                let rest = &n[2..];
                jobs = if rest.is_empty() {
                    default_jobs()
                } else {
                    parse_jobs(rest)?
                };
            }
            n if WITH_VALUE.contains(&n) => bail!("pahole option {n} is not supported by btfkit yet"),
            n => {
                eprintln!("btfkit: error: unknown pahole option {n}");
                return Ok(EXIT_ERR);
            }
        }
    }
    if !encode_btf {
        bail!("only BTF encoding is supported: pass -J or --btf_encode_detached=FILE");
    }
    let input = match inputs.as_slice() {
        [one] => one.clone(),
        [] => bail!("no input file"),
        _ => bail!("several input files are not supported (the reference's multi-file mode is not implemented)"),
    };
    let lang = lang_filter(lang_only, lang_exclude)?;
    let reference = reference_of(pinned, &features);
    if reference == Reference::V1_31 {
        // v1.31 does not know them: ignored, as any unknown name.
        features.true_signature = false;
        features.layout = false;
    }
    execute(
        Plan {
            input,
            input_bytes: None,
            in_place: detached.is_none(),
            output: detached,
            base,
            dedup: !no_dedup,
            early_dedup: None,
            opts: Options {
                features,
                reference,
                lang,
                cu_exclude,
                jobs,
                no_funcs,
                keep_offsets_deferred: false,
                timings: false,
                on_phase: None,
                type_units: encode::TypeUnitMode::Reference,
                verbose,
                global_pool: true,
                collapse: encode::CollapseMode::default(),
                alt: Default::default(),
            },
        },
        Report::NONE,
    )
}

/// `--lang` over `--lang_exclude` over `$PAHOLE_LANG_EXCLUDE`, as the reference reads them.
fn lang_filter(only: Option<Vec<u16>>, exclude: Option<Vec<u16>>) -> anyhow::Result<LangFilter> {
    Ok(match (only, exclude) {
        (Some(l), _) => LangFilter::Only(l),
        (None, Some(l)) => LangFilter::Exclude(l),
        (None, None) => match std::env::var("PAHOLE_LANG_EXCLUDE") {
            Ok(v) if !v.is_empty() => LangFilter::Exclude(encode::lang::parse_list(&v).map_err(anyhow::Error::msg)?),
            _ => LangFilter::All,
        },
    })
}

/// What `pahole --help` prints: the subset of pahole's options btfkit takes.
pub(super) const HELP: &str = "\
Usage: pahole [OPTIONS] FILE   (btfkit's pahole-compatible front end: BTF encoding only)

  -J, --btf_encode               encode BTF into FILE's .BTF section (with --btf_base and the
                                 distilled_base feature, also .BTF.base)
      --btf_encode_detached=OUT  write raw BTF to OUT instead (implies -J)
      --btf_base=BASE            encode split BTF over BASE (raw BTF or an ELF with .BTF)
      --btf_features=LIST        features to encode (`default`, `all`, `+x` adds to the default set)
      --btf_features_strict=LIST the same, an unknown feature is an error
      --supported_btf_features   list the features
      --lang=LIST, --lang_exclude=LIST
                                 keep only / skip CUs of these languages
  -X, --cu_exclude=PREFIX        skip CUs whose name starts with PREFIX
  -j[N], --jobs[=N]              threads (without N: one per core)
      --skip_encoding_btf_vars, --skip_encoding_btf_decl_tag, --skip_encoding_btf_type_tag,
      --skip_encoding_btf_enum64, --skip_encoding_btf_inconsistent_proto, --btf_gen_floats,
      --btf_gen_optimized, --btf_gen_all, --btf_encode_force, --reproducible_build,
      --btf_attributes           the older spellings of the features
  -V, --verbose                  say which functions are left out of BTF and why (stdout)
      --version, --numeric_version
                                 print v1.31 / 131 (the version btfkit reproduces)
  -h, --help                     this text

Other pahole options (its type pretty-printer, other formats) are not supported.";

fn parse_jobs(s: &str) -> anyhow::Result<usize> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("bad thread count `{s}` for -j"),
    }
}
