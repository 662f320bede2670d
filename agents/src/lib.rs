//! # agentic-agents
//!
//! Agents for the `agentic` engine: chat models and the LLM agent ([`model`], [`LlmAgent`]) with its
//! [`Tool`]s; non-AI agents — [`FnAgent`] (async closures),
//! [`ScopeAction`] (state-to-writes functions), [`Compute`] (minijinja expressions and templates) — the
//! human-in-the-loop agent [`Human`], [`decision`] models (typed questions answered with probabilities), and
//! the [`Expression`]s and [`Template`]s the spec and planners use for conditions and output expressions; MCP
//! on the official Rust SDK: [`McpClient`] and [`McpAgent`] (one MCP tool as an agent); A2A: [`a2a::A2aAgent`]
//! (a remote A2A agent as an agent) over the typed client and wire types of [`a2a`].
//!
//! Public surface: the modules are private and their public items are re-exported here, at one path, except
//! the three large facets [`model`] (chat models and their providers), [`decision`] (decision models and their
//! questions) and [`a2a`] (the A2A client and wire types), which are public modules whose items are not
//! repeated here (`agentic_agents::model::ChatModelRef`, `agentic_agents::a2a::A2aAgent`).

pub mod a2a;
mod closure;
mod compute;
pub mod decision;
mod error;
mod expr;
mod guarded;
mod human;
mod llm;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "mcp")]
mod mcp_trace;
pub mod model;
mod redact;
mod text_filters;
mod tool_loop;
mod tools;
mod trace_context;
mod wait;

pub use closure::{FnAgent, FnAgentBuilder, ScopeAction};
pub use compute::{Compute, ComputeBuilder};
pub use error::ExprError;
pub use expr::{Expression, Template};
pub use human::{Deadline, Human, HumanBuilder, HumanMode, OnTimeout};
pub use llm::{
    DEFAULT_MAX_TOOL_ITERATIONS, LlmAgent, LlmAgentBuilder, OutputType, SUMMARY_PROMPT, extract_json, memory_key,
    parse_answer,
};
#[cfg(feature = "mcp")]
pub use mcp::{
    McpAgent, McpAgentBuilder, McpClient, McpCredentials, McpError, McpServer, McpTool, McpToolProvider,
    McpToolProviderBuilder,
};
pub use redact::{MIN_REDACTED_LEN, Redactions, SDK_LOG_TARGETS, log_directives};
pub use tools::{ApprovalRequest, Tool, ToolCallInfo, ToolProvider};
pub use wait::{Wait, WaitBuilder, WaitUntil};

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, recovering from poisoning: the crate's critical sections are single updates that leave the data
/// consistent, so a panic elsewhere while one was held loses nothing, and no later update is dropped (the one
/// poisoning policy of the crate, as in the engine).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the declarative agents' expansions name (`agentic-macros`): the engine's, and the LLM agent's
/// builder with the bound of an `#[agents]` method's return type.
#[doc(hidden)]
pub mod __private {
    pub use agentic_engine::__private::*;

    pub use crate::llm::{LlmAgent, LlmAgentBuilder};
    pub use crate::model::ChatModelRef;

    /// `builder` answering `T` ([`LlmAgentBuilder::returns`]), with the bound of an `#[agents]` method's
    /// return type (one compile error naming the attribute when `T` does not fit).
    pub fn llm_returns<T: CallOutput>(builder: LlmAgentBuilder) -> LlmAgentBuilder {
        builder.returns::<T>()
    }

    /// The builder of a `#[human]` method's agent: `prompt` compiled, an error naming the agent when it does not.
    pub fn human_builder(name: &str, prompt: &str) -> Result<crate::human::HumanBuilder, BuildError> {
        crate::Human::builder(name, prompt)
            .map_err(|e| BuildError::Invalid { agent: name.to_string(), message: format!("the prompt: {e}") })
    }

    /// `builder` answering `T` ([`crate::HumanBuilder::returns`]), with the bound of an `#[agents]` method's
    /// return type.
    pub fn human_returns<T: CallOutput>(builder: crate::human::HumanBuilder) -> crate::human::HumanBuilder {
        builder.returns::<T>()
    }

    /// The model named `name` among the builder's `models` (`model = "name"` on `agent`'s method).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] naming the agent, the name and the models given, when no model has that name.
    pub fn named_model(models: &[(String, ChatModelRef)], name: &str, agent: &str) -> Result<ChatModelRef, BuildError> {
        match models.iter().find(|(n, _)| n == name) {
            Some((_, m)) => Ok(m.clone()),
            None => {
                let given: Vec<&str> = models.iter().map(|(n, _)| n.as_str()).collect();
                let given = if given.is_empty() { "none".to_string() } else { given.join(", ") };
                Err(BuildError::Invalid {
                    agent: agent.to_string(),
                    message: format!(
                        "`model = \"{name}\"`: no model of that name was given to the builder (`.model(\"{name}\", \
                         ..)`); given: {given}"
                    ),
                })
            }
        }
    }

    /// A model chosen per invocation by `choose` among the builder's `models` and its model (`default`, what
    /// `choose` giving `None` picks: `model = f` on a method).
    pub fn chosen_model(
        default: &ChatModelRef,
        models: &[(String, ChatModelRef)],
        choose: fn(&ScopeView) -> Option<String>,
    ) -> ChatModelRef {
        let default_name = default.info().name.clone().unwrap_or_else(|| "default".to_string());
        let mut choice = crate::model::ModelChoice::new(default_name.clone(), choose);
        for (name, model) in models {
            choice = choice.model(name.clone(), model.clone());
        }
        if choice.get(&default_name).is_none() {
            choice = choice.model(default_name, default.clone());
        }
        ChatModelRef::choosing(choice)
    }

    /// The agent of a `#[human]` method, built (the builder cannot fail once the prompt compiled).
    pub fn human_build(builder: crate::human::HumanBuilder) -> Result<AgentRef, BuildError> {
        Ok(builder.build())
    }
}
