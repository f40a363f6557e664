//! Giving freed heap memory back to the system: as it is freed, by a fixed
//! trim limit set at start ([`return_freed_memory_promptly`]), and between
//! phases, by a trim of every arena ([`release_free_after`]).
//!
//! glibc keeps what a phase freed in its arenas (the decode workers' arenas
//! and holes in the main heap are not at the top, so they are never trimmed
//! on their own). On a vmlinux that was tens of MiB of resident memory
//! that the next phase, whose own allocations are fewer but larger, did
//! not reuse. `malloc_trim(0)` releases the free pages of every arena; it
//! costs a few milliseconds, so it runs only at phase boundaries.

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
        libc::mallopt(libc::M_TRIM_THRESHOLD, 2 << 20);
    }
}

/// Below this much work a phase's freed memory is not worth a trim: each
/// call walks every arena (a few milliseconds and page faults afterwards),
/// which in a batch of a kernel's modules cost seconds of system time for
/// nothing.
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
