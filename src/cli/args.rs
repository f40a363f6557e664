//! Flag values shared by several subcommands, each turned into what the
//! library takes in one place: thread counts, the reference, feature
//! lists, base BTF.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;

use btfkit::btf::Btf;
use btfkit::encode::{self, Features};

pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// `-j N` as given (0 refused), or every core.
pub fn jobs_arg(jobs: Option<usize>) -> anyhow::Result<usize> {
    match jobs {
        Some(0) => bail!("bad thread count 0 for -j (give 1 or more)"),
        Some(n) => Ok(n),
        None => Ok(default_jobs()),
    }
}

/// `--reference`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ReferenceArg {
    #[value(name = "v1.31")]
    V131,
    Next,
}

/// The reference a run follows: the one named, else `next` when a feature
/// only it has is asked for (as a build script written for the newer
/// pahole asks), else v1.31.
pub fn reference_arg(named: Option<ReferenceArg>, features: &Features) -> anyhow::Result<encode::Reference> {
    match named {
        Some(ReferenceArg::Next) => Ok(encode::Reference::Next),
        Some(ReferenceArg::V131) if features.names_next_only() => bail!(
            "the features layout and true_signature are the next reference's (pahole after v1.31): \
             drop them or use --reference next"
        ),
        Some(ReferenceArg::V131) => Ok(encode::Reference::V1_31),
        None if features.names_next_only() => Ok(encode::Reference::Next),
        None => Ok(encode::Reference::V1_31),
    }
}

/// The features of `--btf-features` lists, applied in order over the bare set.
pub fn features_arg<'s>(lists: impl IntoIterator<Item = &'s str>) -> anyhow::Result<Features> {
    let mut features = Features::default();
    for f in lists {
        // Lists pasted from help text wrapped at a comma carry spaces.
        let f: Vec<&str> = f.split(',').map(str::trim).collect();
        let unknown = features.apply_list(&f.join(","));
        if !unknown.is_empty() {
            bail!(
                "unknown BTF feature(s): {} (known: default, {})",
                unknown.join(", "),
                encode::features::FEATURE_NAMES_NEXT.join(", ")
            );
        }
    }
    Ok(features)
}

/// The base for `file`: `--base` if given; for a module's BTF in sysfs
/// (`/sys/kernel/btf/<module>`), the kernel's own `/sys/kernel/btf/vmlinux`,
/// as bpftool does.
pub fn base_for(file: &Path, base: &Option<PathBuf>) -> Option<PathBuf> {
    if base.is_some() {
        return base.clone();
    }
    let sysfs = Path::new("/sys/kernel/btf");
    (file.parent() == Some(sysfs) && file.file_name().is_some_and(|n| n != "vmlinux")).then(|| sysfs.join("vmlinux"))
}

/// Loads the base BTF named by `--base`, if any.
pub fn load_base(base: &Option<PathBuf>) -> anyhow::Result<Option<Arc<Btf>>> {
    Ok(match base {
        Some(p) => Some(Arc::new(btfkit::elf::load_btf(p, None)?)),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::base_for;
    use std::path::{Path, PathBuf};

    #[test]
    fn sysfs_module_btf_takes_the_kernels_vmlinux_as_base() {
        let vmlinux = Some(PathBuf::from("/sys/kernel/btf/vmlinux"));
        assert_eq!(base_for(Path::new("/sys/kernel/btf/nf_conntrack"), &None), vmlinux);
        assert_eq!(base_for(Path::new("/sys/kernel/btf/vmlinux"), &None), None);
        assert_eq!(base_for(Path::new("/tmp/nf_conntrack.btf"), &None), None);
        let given = Some(PathBuf::from("/x/vmlinux.btf"));
        assert_eq!(base_for(Path::new("/sys/kernel/btf/fou"), &given), given);
    }
}
