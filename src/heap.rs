//! Giving freed heap memory back to the system: as it is freed, by a fixed
//! trim limit set at start ([`return_freed_memory_promptly`]), and between
//! phases, by a trim of every arena ([`release_free_after`]); in a batch of
//! modules, kept for the next one ([`keep_freed_memory_for_reuse`]).
//!
//! glibc keeps what a phase freed in its arenas (the decode workers' arenas
//! and holes in the main heap are not at the top, so they are never trimmed
//! on their own). On a vmlinux that was tens of MiB of resident memory
//! that the next phase, whose own allocations are fewer but larger, did
//! not reuse. `malloc_trim(0)` releases the free pages of every arena; it
//! costs a few milliseconds, so it runs only at phase boundaries.

use std::sync::atomic::{AtomicBool, Ordering};

/// Returns freed memory to the system as it is freed, not only at phase
/// boundaries. glibc trims an arena once 128 KiB lie free at its top, but
/// raises that limit to twice the largest block it ever mapped by itself
/// and freed (up to 64 MiB), and maps blocks by themselves only from that
/// size on; so once a decode worker's first large scratch buffer has come
/// and gone, buffers of many MiB are carved from the arenas and kept there
/// when freed. A fixed limit turns that adjustment off. 2 MiB: on a vmlinux
/// at -j2 it lowered the peak RSS for a few more minor faults and a little
/// more system time (4 MiB saved less, 1 MiB no more, with more faults).
/// Call before any thread starts.
pub fn return_freed_memory_promptly() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's own parameters; called
    // before other threads exist.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, PROMPT_TRIM);
    }
}

/// For a run of many small inputs one after another (a kernel's modules):
/// keeps freed memory in the allocator for the next input instead of
/// giving it back, until the returned guard is dropped.
/// [`return_freed_memory_promptly`]'s fixed trim limit also fixes the size
/// from which glibc maps a block by itself at 128 KiB, so each module's
/// growing tables were mapped, faulted in page by page and unmapped again,
/// a third of a distribution kernel's batch in system time. Blocks up to
/// [`KEPT_FOR_REUSE`] now come from the arenas, which keep as much free at
/// their top. Call when no other thread is allocating (before the batch's
/// threads start, and drop the guard after they end).
#[must_use = "the batch policy ends when the guard is dropped"]
pub fn keep_freed_memory_for_reuse() -> KeptForReuse {
    set_thresholds(KEPT_FOR_REUSE, KEPT_FOR_REUSE);
    KEEPING.store(true, Ordering::Relaxed);
    KeptForReuse(())
}

/// While it lives, freed memory stays in the allocator
/// ([`keep_freed_memory_for_reuse`]); dropped, the single-input policy of
/// [`return_freed_memory_promptly`] is back (a list's next vmlinux).
pub struct KeptForReuse(());

impl Drop for KeptForReuse {
    fn drop(&mut self) {
        KEEPING.store(false, Ordering::Relaxed);
        set_thresholds(128 << 10, PROMPT_TRIM);
    }
}

fn set_thresholds(mmap: i32, trim: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's own parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, mmap);
        libc::mallopt(libc::M_TRIM_THRESHOLD, trim);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (mmap, trim);
}

/// glibc's largest mapping threshold, and what an arena keeps free at its
/// top in a batch: a lower trim limit gave the system time back, a higher
/// one only raised the peak RSS (docs/perf-notes.md).
const KEPT_FOR_REUSE: i32 = 32 << 20;

/// [`return_freed_memory_promptly`]'s trim limit.
const PROMPT_TRIM: i32 = 2 << 20;

/// Below this much work a phase's freed memory is not worth a trim: each
/// call walks every arena (a few milliseconds and page faults afterwards),
/// which in a batch of a kernel's modules cost seconds of system time for
/// nothing.
const WORTH_TRIMMING: usize = 64 << 20;

/// Whether a [`KeptForReuse`] guard lives.
static KEEPING: AtomicBool = AtomicBool::new(false);

/// Returns the allocator's free pages to the system (glibc only; elsewhere
/// nothing) after a phase that handled `bytes` of input, if that is enough
/// for the phase to have left much behind. Not in a batch: a trim covers
/// every arena, so one large module would hand back what the other module
/// threads keep for their next input.
pub fn release_free_after(bytes: usize) {
    if bytes < WORTH_TRIMMING || KEEPING.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
