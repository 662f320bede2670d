//! The tests that drive real processes, in one binary (one module per area): the `agentic` CLI (`cli_*`),
//! `agentic serve` killed, scaled out and streamed (`server_*`), the MCP and A2A peers of the official SDKs
//! (`mcp_*`, `a2a_*`), the browser tests of the report and the web UI, the showcase and the example specs. One
//! link of the facade instead of one per file; each test starts its own processes on free ports in its own
//! temporary directory, so the modules share nothing but the helpers below.
//!
//! Kept in binaries of their own: tests that restart the PostgreSQL server or time two servers against each
//! other (`server_faults`, `server_cluster`: nothing else may run beside them), tests of process-wide state
//! (`engine_actors`), the example files compiled as modules (`examples_rust`, `declarative_twins`), and the
//! feature-gated ones (`model_local`, `otel_export`).
//!
//! Run one area with a filter: `cargo test --test process cli_run::`.

#![allow(clippy::unwrap_used)]

#[path = "../support/binary.rs"]
mod binary;
#[path = "../common/mod.rs"]
mod common;
#[path = "../support/echo_model.rs"]
mod echo_model;
#[cfg(feature = "postgres")]
#[path = "../../store/tests/support/pg.rs"]
mod pg;

mod a2a_peer;
mod a2a_serve;
mod access;
mod budgets;
mod cli_crash;
mod cli_durable;
mod cli_fork;
mod cli_pinning;
mod cli_postgres;
mod cli_run;
mod cli_server;
mod cli_show;
mod cli_store;
mod cli_stream;
mod cli_unknown_run;
mod cli_validate;
mod eval;
mod eval_report_browser;
mod examples_gallery;
mod examples_no_model;
mod journaled_calls;
mod limits_serve;
mod mcp_peer;
mod mcp_serve;
mod model_choice;
mod operations;
mod recordings;
mod report_browser;
mod report_topology;
mod secrets;
mod server_browser;
mod server_crash;
mod server_scale_out;
mod server_stream;
mod showcase;
mod showcase_demo;
mod showcase_eval;
mod showcase_measure;
mod time_deadlines;
mod tls;
mod tool_calls;
