//! # agentic
//!
//! An actor-based agentic orchestration engine. Compose agents into systems with planners (sequence, loop,
//! parallel, parallel mapper, conditional, GOAP, P2P, blackboard, voting, debate, BDI, supervisor, decision
//! router, or your own), run them in Rust or from YAML/JSON specs with the
//! `agentic` CLI (the crate agentic-cli), and journal every step.
//!
//! Public surface: each workspace crate is one module here ([`engine`], [`planners`], [`agents`](mod@agents), [`store`],
//! [`spec`], [`report`]) and each type has the one path its crate gives it under that module
//! (`agentic::planners::Sequence`, `agentic::agents::model::ChatModelRef`); the root adds only what no crate
//! holds (the declarative macros, [`default_model`], `telemetry`), and [`prelude`] repeats the common names
//! for a glob import by design.
//!
//! ```
//! use agentic::prelude::*;
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let draft = Compute::template("draft", "Once upon a time, {{ topic }}.")?.output_key("story").build();
//! let shout = Compute::expression("shout", "story | upper")?.output_key("loud").build();
//! let system = Sequence::builder().name("story").sub_agents([draft, shout]).output_key("loud").build()?;
//! let outcome = system.invoke().input("topic", "a dragon").await?;
//! assert_eq!(outcome.output(), Some(&serde_json::json!("ONCE UPON A TIME, A DRAGON.")));
//! # Ok(()) }
//! ```
//!
//! Agents can also be declared, with their types (`docs/declarative.md`): an async function as a non-AI agent,
//! a trait of LLM agents and composites whose methods are typed calls.
//!
//! ```
//! use agentic::engine::ValueType;
//! use agentic::prelude::*;
//!
//! /// Counts the words of a story.
//! #[agent(output_key = "words")]
//! async fn word_count(story: String) -> usize {
//!     story.split_whitespace().count()
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let outcome = word_count_agent().invoke().input("story", "a tale of two owls").await?;
//! assert_eq!(outcome.output(), Some(&serde_json::json!(5)));
//! assert_eq!(word_count_agent().spec().output_type, ValueType::Integer);
//! # Ok(()) }
//! ```

pub use agentic_agents as agents;
pub use agentic_engine as engine;
/// Evaluation of a spec over a dataset (`agentic eval`, docs/evaluation.md): datasets, evaluators, runs,
/// results and baselines.
pub use agentic_eval as eval;
/// Declarative agents (docs/declarative.md): `#[agent]` on an async fn, `#[agents]` on a trait of LLM agents,
/// human steps and composites (`#[human]`, `#[sequence]`, `#[looping]`, `#[parallel]`, `#[conditional]`,
/// `#[supervisor]`, `#[decision_router]`, `#[bdi]` and the pattern planners' attributes on its methods).
pub use agentic_macros::{
    agent, agents, bdi, blackboard, conditional, debate, decision_router, goap, human, looping, p2p, parallel,
    parallel_mapper, sequence, supervisor, voting,
};
pub use agentic_planners as planners;
/// The HTML execution report (`agentic report`): from a store, or from an in-process monitor
/// (`report::report_from_monitor`).
pub use agentic_report as report;
pub use agentic_spec as spec;
pub use agentic_store as store;

#[cfg(feature = "otel")]
pub mod telemetry;

/// What the declarative agents' expansions name: the builders and the typed-call helpers.
#[doc(hidden)]
pub mod __private {
    pub use agentic_planners::__private::*;
}

/// The chat model a program uses when it does not name one: the same choice a spec's `provider: local` makes.
///
/// - When `OPENAI_BASE_URL` is set (and not blank): an [`OpenAiModel`](agents::model::OpenAiModel) on that
///   OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp's `llama-server`, ...), model `OPENAI_MODEL`
///   (default [`DEFAULT_OPENAI_MODEL`](agents::model::DEFAULT_OPENAI_MODEL)), API key from `OPENAI_API_KEY`.
/// - Otherwise: the in-process local model (Qwen2.5 Coder 1.5B Instruct, or `AGENTIC_LOCAL_MODEL`; installed by
///   `scripts/setup-local-model.sh`), which
///   needs the cargo feature `local` (`cargo run --features local ...`).
///
/// Nothing is loaded or contacted yet: the first request does that.
///
/// ```
/// // Without the `local` feature and without OPENAI_BASE_URL, the error names both ways out.
/// # if std::env::var_os("OPENAI_BASE_URL").is_none() && !cfg!(feature = "local") {
/// let err = agentic::default_model().unwrap_err();
/// assert!(err.to_string().contains("build with `--features local`, or set OPENAI_BASE_URL"), "{err}");
/// # }
/// ```
///
/// # Errors
/// [`ModelError::Unavailable`](agents::model::ModelError::Unavailable) when the local model is needed but this
/// build lacks the cargo feature `local`; [`ModelError::InvalidRequest`](agents::model::ModelError::InvalidRequest)
/// when the OpenAI client cannot be created.
pub fn default_model() -> Result<agents::model::ChatModelRef, agents::model::ModelError> {
    let local = spec::ModelDef {
        name: "default".to_string(),
        pos: spec::Pos::default(),
        provider: spec::ModelProvider::Local { model_path: None },
        prices: None,
        limits: Default::default(),
    };
    spec::model_from_def(&local)
}

/// What an application needs on the common path (30 names): the agent builders and the workflow composites, the
/// two builder traits their methods come from, chat models, outcomes, durability and retries, the stores, and
/// the declarative `#[agent]` and `#[agents]`. Everything else is one import away: the agentic patterns
/// (`agentic::planners::{Debate, Goap, ...}`), custom planners and listeners (`agentic::engine::{Planner,
/// Action, AgentListener, ...}`), the model vocabulary (`agentic::agents::model`).
pub mod prelude {
    pub use agentic_agents::model::{ChatModelRef, OpenAiModel, ScriptedModel};
    pub use agentic_agents::{Compute, FnAgent, Human, LlmAgent, Tool};
    pub use agentic_engine::{
        AgentError, AgentRef, Durability, InputSpec, RetryPolicy, RunOutcome, RunResult, ScopeView, SpecBuilder, Stop,
        TypedKey,
    };
    pub use agentic_macros::{agent, agents};
    pub use agentic_planners::{
        CompositeBuilderExt, Conditional, Loop, Parallel, ParallelMapper, Sequence, Supervisor,
    };
    pub use agentic_store::{MemoryStore, SledStore};
}
