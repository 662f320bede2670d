//! The in-process integration tests in one binary (one module per area: engine, planners, spec, LLM agents,
//! declarative agents, listeners, stores, model protocol, reports, durable suspension): one link of the facade
//! instead of one per file. The tests that drive real processes (the CLI, servers, peers, a browser) are the
//! `process` binary (tests/process/); tests of process-wide state (the global run registry, a PostgreSQL
//! server they restart, tracing exporters) keep their own binaries.
//!
//! Run one area with a filter: `cargo test --test it engine_errors::`. The modules run in one process, so a
//! run id (`memory_id`) a test gives must not be used by another module's tests: the engine's registry of
//! active runs is process-wide.

#[path = "../support/binary.rs"]
mod binary;
#[path = "../common/mod.rs"]
mod common;

mod declarative_agents;
mod declarative_kinds;
mod declarative_patterns;
mod durable_suspend;
mod engine_compensation;
mod engine_custom_planner;
mod engine_drain;
mod engine_errors;
mod engine_fork;
mod engine_journal;
mod engine_typed_keys;
mod eval_observe;
mod idempotency;
mod llm_agent;
mod llm_specs;
mod llm_stream;
mod llm_tools;
mod model_choice;
mod model_openai;
mod observe_listeners;
mod observe_trace_context;
mod planners_mapper_items;
mod planners_patterns;
mod planners_supervisor;
mod planners_workflow;
mod public_surface;
mod rate_limits;
mod recordings;
mod report_run;
mod spec_custom_kind;
mod spec_error_handler;
mod spec_errors;
mod spec_kinds;
mod spec_model_patterns;
mod spec_patterns;
mod spec_registry;
mod store_sled;
mod time_deadlines;
mod tool_calls;
