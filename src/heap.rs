//! Giving freed heap memory back to the system between phases.
//!
//! glibc keeps what a phase freed in its arenas (the decode workers' arenas
//! and holes in the main heap are not at the top, so they are never trimmed
//! on their own). On a vmlinux that was about 20 MiB of resident memory
//! that the next phase, whose own allocations are fewer but larger, did
//! not reuse. `malloc_trim(0)` releases the free pages of every arena; it
//! costs a few milliseconds, so it runs only at phase boundaries.

/// Below this much work a phase's freed memory is not worth a trim: each
/// call walks every arena (a few milliseconds and page faults afterwards),
/// which in a batch of 1,138 modules cost 5 s of system time for nothing.
const WORTH_TRIMMING: usize = 64 << 20;

/// Returns the allocator's free pages to the system (glibc only; elsewhere
/// nothing) after a phase that handled `bytes` of input, if that is enough
/// for the phase to have left much behind.
pub fn release_free_after(bytes: usize) {
    if bytes < WORTH_TRIMMING {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
