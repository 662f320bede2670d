//! # agentic
//!
//! An actor-based agentic orchestration engine. Compose agents into systems with planners (sequence, loop,
//! parallel, parallel mapper, conditional, GOAP, P2P, blackboard, voting, debate, BDI, supervisor, decision
//! router, or your own), run them in Rust or from YAML/JSON specs with the
//! `agentic` CLI, and journal every step.
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

pub use agentic_agents as agents;
pub use agentic_engine as engine;
pub use agentic_planners as planners;
pub use agentic_spec as spec;
pub use agentic_store as store;

/// The common path: builders, the agent and planner traits, outcomes, the LLM agent with its tools and the
/// chat models (the rest of the model vocabulary is in [`crate::agents::model`]).
pub mod prelude {
    pub use agentic_agents::model::{ChatModelRef, OpenAiModel, ScriptedModel};
    pub use agentic_agents::{Compute, FnAgent, LlmAgent, OutputType, ScopeAction, Tool};
    pub use agentic_engine::{
        Action, Agent, AgentCall, AgentError, AgentRef, AgentSpec, CancelHandle, Completion, Composite, Durability,
        ErrorHandler, InputSpec, InvocationContext, Planner, PlanningContext, Recovery, RetryPolicy, RunOutcome,
        RunResult, ScopeView, SpecBuilder, TypedKey, ValueType,
    };
    pub use agentic_planners::{
        Bdi, Blackboard, CompositeBuilderExt, Conditional, Debate, DecisionRouter, Desire, Goap, Loop, P2p, Parallel,
        ParallelMapper, Sequence, Supervisor, Voting, VotingStrategy,
    };
    pub use agentic_store::MemoryStore;
}
