//! The `btfkit` command line. Exit codes: 0 success, 1 a negative answer
//! (`diff` found differences, `verify` refused), 2 an error.

mod cli;

#[global_allocator]
static ALLOC: btfkit::metrics::CountingAlloc = btfkit::metrics::CountingAlloc;

fn main() {
    // SIGPIPE stays ignored (Rust's default): a closed pipe comes back as
    // EPIPE from the write, and the CLI ends quietly with 0 (`cli::finish`).
    btfkit::heap::return_freed_memory_promptly();
    std::process::exit(cli::run());
}
