//! `agentic-bench`: the engine side by side with the LangGraph baseline harness (`../shared/bench/langgraph`),
//! the same scenarios with the same shapes, state writes and durability, printed as ONE table (scenario,
//! LangGraph, ours, ratio, target) and written as markdown to `target/bench/side_by_side.md`.
//!
//! Run: `cargo run --release -p agentic-bench -- [--quick] [--scenario NAME] [--langgraph]`; see
//! `docs/performance.md`. The library holds the scenarios so that `cargo test -p agentic-bench` can run each at a
//! tiny size and check exact counts.
//!
//! Public surface (an unpublished harness): the modules are public namespaces of the harness's steps and
//! nothing is re-exported at the root, so every item has one path (`agentic_bench::runner::Plan`).

pub mod error;
pub mod eval;
pub mod floor;
pub mod group;
pub mod langgraph;
pub mod llm;
pub mod pg;
pub mod proc;
pub mod runner;
pub mod scenarios;
pub mod serve;
pub mod table;
pub mod tools;
