//! # agentic-agents
//!
//! Agents for the `agentic` engine. This release: non-AI agents — [`FnAgent`] (async closures),
//! [`ScopeAction`] (state-to-writes functions), [`Compute`] (minijinja expressions and templates) — and the
//! [`expr`] module the spec and planners use for conditions and output expressions.

mod closure;
mod compute;
pub mod error;
pub mod expr;

pub use closure::{FnAgent, FnAgentBuilder, ScopeAction};
pub use compute::{Compute, ComputeBuilder};
pub use error::ExprError;
