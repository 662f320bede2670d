//! Error handlers: what a composite does when one of its sub-agents fails.
//!
//! A handler is set per composite and inherited by nested composites that do not set their own (the original
//! only had one at the root). It maps a failure to a [`Recovery`]: retry after a delay (bounded by
//! [`ErrorHandler::max_retries`], so a handler that always says retry still ends), repair the state and retry
//! ([`Recovery::RetryWith`]), substitute a result (written
//! as the failed agent's output; the planner advances normally), or fail.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::AgentError;
use crate::scope::ScopeView;

/// The failure a handler decides about.
pub struct ErrorContext<'a> {
    /// The error.
    pub error: &'a AgentError,
    /// Name of the agent that failed.
    pub agent: &'a str,
    /// Its path id.
    pub path: &'a str,
    /// The attempt that failed, 1-based.
    pub attempt: u32,
    /// The state when it failed.
    pub view: &'a ScopeView,
}

/// A handler's decision.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Recovery {
    /// Run the agent again after this delay.
    Retry {
        /// Delay before the retry.
        after: Duration,
    },
    /// Repair, then retry: write these keys to the scope (journaled like a step's writes), then run the agent
    /// again after `after`. The original's canonical recovery: on a missing argument, write it and retry.
    RetryWith {
        /// The keys to write before the retry (`null` removes a key).
        writes: Vec<(String, Value)>,
        /// Delay before the retry.
        after: Duration,
    },
    /// Use this value as the agent's result.
    Substitute(Value),
    /// Fail the composite with the error.
    Fail,
}

/// Decides how to recover from a sub-agent failure.
pub trait ErrorHandler: Send + Sync + 'static {
    /// The decision for this failure.
    fn handle(&self, ctx: &ErrorContext<'_>) -> Recovery;

    /// Upper bound on retries of one call (default 3): past it the composite fails with the last error.
    fn max_retries(&self) -> u32 {
        3
    }
}

impl<F> ErrorHandler for F
where
    F: Fn(&ErrorContext<'_>) -> Recovery + Send + Sync + 'static,
{
    fn handle(&self, ctx: &ErrorContext<'_>) -> Recovery {
        self(ctx)
    }
}

/// The longest delay [`RetryPolicy`] waits before one retry (the doubling stops there): 30 s.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

type Fallback = Arc<dyn Fn(&ScopeView) -> Result<Value, String> + Send + Sync>;

/// The common handler: retry up to `retries` times with exponential backoff, then substitute a fallback
/// value when one is set, else fail. This is what the spec's `error_handler: {retry, backoff_ms, fallback}`
/// builds.
#[derive(Clone)]
pub struct RetryPolicy {
    retries: u32,
    backoff: Duration,
    fallback: Option<Fallback>,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl RetryPolicy {
    /// Retry `retries` times; first delay `backoff`, doubling each retry up to [`MAX_BACKOFF`]. No fallback.
    pub fn new(retries: u32, backoff: Duration) -> Self {
        RetryPolicy { retries, backoff, fallback: None }
    }

    /// After the retries, substitute the value computed from the state instead of failing. A fallback that
    /// itself fails makes the composite fail with the original error.
    pub fn fallback(mut self, f: impl Fn(&ScopeView) -> Result<Value, String> + Send + Sync + 'static) -> Self {
        self.fallback = Some(Arc::new(f));
        self
    }
}

impl ErrorHandler for RetryPolicy {
    fn handle(&self, ctx: &ErrorContext<'_>) -> Recovery {
        if matches!(ctx.error, AgentError::Cancelled) {
            return Recovery::Fail;
        }
        if ctx.attempt <= self.retries {
            let factor = 1u32 << (ctx.attempt - 1).min(16);
            return Recovery::Retry { after: self.backoff.saturating_mul(factor).min(MAX_BACKOFF) };
        }
        match &self.fallback {
            Some(f) => match f(ctx.view) {
                Ok(v) => Recovery::Substitute(v),
                Err(e) => {
                    tracing::warn!(agent = ctx.agent, path = ctx.path, error = %e, "error handler fallback failed");
                    Recovery::Fail
                }
            },
            None => Recovery::Fail,
        }
    }

    fn max_retries(&self) -> u32 {
        self.retries
    }
}
