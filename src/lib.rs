//! # agentic-cli
//!
//! The `agentic` command line (SPEC.md §2): run, validate, answer, resume, fork, list, show and report
//! workflow runs, and `agentic serve`. The library is the engine's facade, the crate `agentic`; this crate is
//! the program, and [`main`] is its entry point for a program that registers planner kinds of its own.

mod cli;

/// The facade's OTLP export, which the CLI starts when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
#[cfg(feature = "otel")]
use agentic::telemetry;

/// Runs the `agentic` command line (SPEC.md §2) on this process's arguments and returns its exit code: what
/// the `agentic` binary does. A program that adds planner kinds ([`agentic::spec::register_kind`]) registers
/// them and then calls this, so that `agentic run`, `validate` and `serve` accept specs that use them
/// (`examples/round_robin.rs`). Exit codes: `0` completed, `2` suspended, `1` run failed, `64` usage error or
/// invalid spec.
pub fn main() -> std::process::ExitCode {
    cli::main()
}
