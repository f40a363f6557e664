//! The `btfkit` command line. Exit codes: 0 success, 1 a negative answer
//! (`diff` found differences, `verify` refused), 2 an error.

mod cli;

#[global_allocator]
static ALLOC: cli::stats::CountingAlloc = cli::stats::CountingAlloc;

fn main() {
    std::process::exit(cli::run());
}
