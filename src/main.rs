//! The `agentic` command-line interface (SPEC.md §2): run and validate workflow specs.
//!
//! Exit codes: `0` completed, `2` suspended, `1` run failed (or command not available yet), `64` usage error
//! or invalid spec.

/// mimalloc: per-thread caches instead of glibc's arena lock, which serialised concurrent runs (measured in
/// docs/performance.md). The library crates do not depend on the allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agentic_cli::main()
}
