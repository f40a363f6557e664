//! Many modules in one process: the base is loaded and indexed once and
//! shared (`Arc<Btf>`), modules are spread over threads (one module per
//! task, each encoded single-threaded so the pools do not nest), and a
//! failing module is reported without stopping the others.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{Error, encode_btf, size_global_pool, write_in_place};
use crate::btf::{self, Btf};
use crate::dedup::BaseIndex;
use crate::encode::{self, Options};

/// A batch: the module files, their base and where each one's BTF goes.
pub struct BatchPlan {
    pub files: Vec<PathBuf>,
    /// Write [`output_name`] of each module into this directory.
    pub out_dir: Option<PathBuf>,
    /// Write `.BTF` (and `.BTF.base` with the `distilled_base` feature) into each module.
    pub in_place: bool,
    pub base: Option<PathBuf>,
    pub dedup: bool,
    /// `jobs` is the number of modules encoded at once.
    pub opts: Options,
}

/// What one module produced: its own types and BTF bytes.
pub struct Module {
    pub types: u64,
    pub bytes: u64,
    /// Wall time from the start of this module's encode to its outputs
    /// written (a wait for the writer thread included).
    pub wall: Duration,
    /// CPU time of its decode and per-CU encode (summed over its threads),
    /// with [`Options::timings`].
    pub cpu: Duration,
}

/// Each module's outcome, in the order of [`BatchPlan::files`].
pub struct BatchOutcome {
    pub modules: Vec<Result<Module, Error>>,
    /// Modules encoded at once.
    pub threads: usize,
}

/// `<module>.btf` for `dir/<module>.ko`.
pub fn output_name(input: &Path) -> PathBuf {
    let stem = input.file_stem().unwrap_or(input.as_os_str());
    let mut n = stem.to_os_string();
    n.push(".btf");
    PathBuf::from(n)
}

/// Loads a base shared by many modules: the BTF with its string index built
/// now, once, rather than under the first modules' lookups, and (when they
/// are deduplicated) dedup's view of it (its records laid out, the candidate
/// table after the prep pass), once, not once per module.
pub fn load_shared_base(path: &Path, dedup: bool) -> Result<(Arc<Btf>, Option<Arc<BaseIndex>>), Error> {
    let base = crate::elf::load_btf(path, None).map_err(|source| Error::Base {
        path: path.to_path_buf(),
        source,
    })?;
    base.strtab().find_own(b"");
    let base = Arc::new(base);
    let index = if dedup {
        Some(Arc::new(BaseIndex::new(&base).map_err(|source| Error::BaseIndex {
            path: path.to_path_buf(),
            source,
        })?))
    } else {
        None
    };
    Ok((base, index))
}

/// Runs the batch; `done(n, module)` is called as the `n`th module
/// finishes (from the thread that writes the outputs). Fails only if the
/// base cannot be used; a module's failure is its entry in the outcome.
pub fn run(plan: &BatchPlan, done: &(dyn Fn(usize, &Path) + Sync)) -> Result<BatchOutcome, Error> {
    size_global_pool(plan.opts.jobs);
    let files = &plan.files;
    let (base, base_index) = match &plan.base {
        Some(p) => {
            let (b, i) = load_shared_base(p, plan.dedup)?;
            (Some(b), i)
        }
        None => (None, None),
    };
    let threads = encode::effective_jobs(plan.opts.jobs, files.len());
    let _batch_heap = crate::heap::keep_freed_memory_for_reuse();
    let next = AtomicUsize::new(0);
    let total = files.len();
    // Outputs are written (and synced) by one writer thread, so that a
    // module thread's core does not sit idle while the disk syncs; as
    // `btfkit kernel` does.
    let (to_writer, encoded) = std::sync::mpsc::sync_channel::<(usize, Result<Encoded, Error>)>(2 * threads);
    let outcomes: Vec<(usize, Result<Module, Error>)> = std::thread::scope(|sc| {
        let writer = std::thread::Builder::new()
            .spawn_scoped(sc, || {
                let mut all = Vec::with_capacity(total);
                for (i, r) in encoded {
                    all.push((i, r.and_then(|e| write_outputs(&files[i], plan, e))));
                    done(all.len(), &files[i]);
                }
                all
            })
            .expect("cannot start the output thread");
        // Plain threads pulling the next module: a rayon worker that waits for
        // the encoder's own pool would steal further modules onto its stack
        // meanwhile, holding every one of them in memory at once.
        for _ in 0..threads.min(total) {
            // the thread owns its sender: the writer ends when all are gone
            let to_writer = to_writer.clone();
            let (next, base, base_index) = (&next, &base, &base_index);
            std::thread::Builder::new()
                // Dedup and the DWARF walk recurse as deep as the types
                // nest; the single-module path runs them on the 8 MiB main
                // thread. Only touched pages cost memory.
                .stack_size(64 << 20)
                .spawn_scoped(sc, move || {
                    let pool = super::own_pool();
                    let one = super::module_options(&plan.opts, pool.is_some());
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        let r = encode_one(f, plan, base.clone(), base_index.as_ref(), &one);
                        if to_writer.send((i, r)).is_err() {
                            break;
                        }
                    }
                })
                .expect("cannot start a batch thread");
        }
        drop(to_writer);
        writer.join().expect("the output thread panicked")
    });
    let mut modules: Vec<Option<Result<Module, Error>>> = (0..total).map(|_| None).collect();
    for (i, r) in outcomes {
        modules[i] = Some(r);
    }
    let modules = modules.into_iter().map(|r| r.expect("every module ran")).collect();
    Ok(BatchOutcome { modules, threads })
}

/// A module encoded, its outputs not written yet.
struct Encoded {
    out: Btf,
    started: Instant,
    cpu: Duration,
}

fn encode_one(
    f: &Path,
    plan: &BatchPlan,
    base: Option<Arc<Btf>>,
    base_index: Option<&Arc<BaseIndex>>,
    opts: &Options,
) -> Result<Encoded, Error> {
    let started = Instant::now();
    let (out, summary, _) = encode_btf(f, None, base, base_index, opts, plan.dedup)?;
    let cpu = summary
        .loop_cpu
        .map(|c| c.decode + c.cu_encode + c.merge)
        .unwrap_or_default();
    Ok(Encoded { out, started, cpu })
}

fn write_outputs(f: &Path, plan: &BatchPlan, e: Encoded) -> Result<Module, Error> {
    let out = &e.out;
    if let Some(dir) = &plan.out_dir {
        crate::output::write_atomic_with(&dir.join(output_name(f)), |w| btf::write::write_to(out, w))
            .map_err(Error::Output)?;
    }
    if plan.in_place {
        write_in_place(f, out, plan.opts.features.distilled_base)?;
    }
    Ok(Module {
        types: out.own_type_count() as u64,
        bytes: btf::write::raw_len(out) as u64,
        wall: e.started.elapsed(),
        cpu: e.cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_name_is_module_stem_dot_btf() {
        assert_eq!(output_name(Path::new("/x/kernel/net/fou.ko")), PathBuf::from("fou.btf"));
    }
}
