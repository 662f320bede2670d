//! The `agentic` command-line interface (SPEC.md §2): run and validate workflow specs.
//!
//! Exit codes: `0` completed, `2` suspended, `1` run failed (or command not available yet), `64` usage error
//! or invalid spec.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
