//! The `btfkit` command line. Exit codes: 0 success, 1 a negative answer
//! (`diff` found differences, `verify` refused), 2 an error.

mod cli;

#[global_allocator]
static ALLOC: cli::stats::CountingAlloc = cli::stats::CountingAlloc;

fn main() {
    // Output cut short by a closed pipe (`btfkit dump X | head`) ends the
    // process quietly, as for any Unix filter; Rust's default (SIGPIPE
    // ignored) turned it into a panic in println!.
    // SAFETY: called before any thread starts; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    btfkit::heap::return_freed_memory_promptly();
    std::process::exit(cli::run());
}
