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

use crate::error::{AgentError, Transience};
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

type Repair = Arc<dyn Fn(&ErrorContext<'_>) -> Result<Vec<(String, Value)>, String> + Send + Sync>;

type Condition = Arc<dyn Fn(&ErrorContext<'_>) -> Result<bool, String> + Send + Sync>;

/// The common handler: retry up to `retries` times with exponential backoff (repairing the state before each
/// retry when a [`RetryPolicy::repair`] step is set), then substitute a fallback value when one is set, else
/// fail. This is what the spec's `error_handler: {set, retry, backoff_ms, fallback}` builds.
///
/// It decides by the error's kind: a permanent failure ([`AgentError::transience`]: a model's 400, 401, 403
/// or 404) is not retried (it goes straight to the fallback) unless [`RetryPolicy::retry_permanent`] says so;
/// a transient one whose server asked to wait (`Retry-After`) waits at least that long, up to [`MAX_BACKOFF`].
#[derive(Clone)]
pub struct RetryPolicy {
    retries: u32,
    backoff: Duration,
    retry_permanent: bool,
    when: Option<Condition>,
    fallback: Option<Fallback>,
    repair: Option<Repair>,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .field("retry_permanent", &self.retry_permanent)
            .field("when", &self.when.is_some())
            .field("fallback", &self.fallback.is_some())
            .field("repair", &self.repair.is_some())
            .finish()
    }
}

impl RetryPolicy {
    /// Retry `retries` times; first delay `backoff`, doubling each retry up to [`MAX_BACKOFF`]. No fallback.
    pub fn new(retries: u32, backoff: Duration) -> Self {
        RetryPolicy { retries, backoff, retry_permanent: false, when: None, fallback: None, repair: None }
    }

    /// Retries permanent failures too (by default a model's 400/401/403/404 is not retried: the same call
    /// fails the same way).
    pub fn retry_permanent(mut self, yes: bool) -> Self {
        self.retry_permanent = yes;
        self
    }

    /// Handles only the failures `f` accepts (e.g. by [`AgentError::kind`], [`AgentError::cause`] or the
    /// HTTP status): any other failure fails the composite at once, neither retried nor substituted.
    ///
    /// # Errors
    /// When `f` returns `Err`, the handler logs a warning with its message and answers [`Recovery::Fail`].
    pub fn when(mut self, f: impl Fn(&ErrorContext<'_>) -> Result<bool, String> + Send + Sync + 'static) -> Self {
        self.when = Some(Arc::new(f));
        self
    }

    /// Repairs the state before each retry: while retries remain, the handler asks `f` for the keys to write
    /// and answers [`Recovery::RetryWith`] with them (same backoff as a plain retry), so the failed agent runs
    /// again on the repaired state. This is the original's canonical recovery: on a missing argument, write
    /// it, then retry. `f` sees the whole [`ErrorContext`] (the error, so it can decide by
    /// [`AgentError::kind`]; the agent, path, attempt and state) and may return no writes (a plain retry).
    ///
    /// # Errors
    /// When `f` returns `Err`, the handler logs a warning with its message and answers [`Recovery::Fail`]: the
    /// composite fails with the original error (a repair that cannot be computed is not retried blindly, and
    /// the fallback is not used).
    pub fn repair(
        mut self,
        f: impl Fn(&ErrorContext<'_>) -> Result<Vec<(String, Value)>, String> + Send + Sync + 'static,
    ) -> Self {
        self.repair = Some(Arc::new(f));
        self
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
        match self.when.as_ref().map(|f| f(ctx)) {
            None | Some(Ok(true)) => {}
            Some(Ok(false)) => return Recovery::Fail,
            Some(Err(e)) => {
                tracing::warn!(agent = ctx.agent, path = ctx.path, error = %e, "error handler condition failed");
                return Recovery::Fail;
            }
        }
        let transience = ctx.error.transience();
        let retry = self.retry_permanent || transience != Transience::Permanent;
        if retry && ctx.attempt <= self.retries {
            let factor = 1u32 << ctx.attempt.saturating_sub(1).min(16);
            let mut after = self.backoff.saturating_mul(factor);
            if let Transience::Transient { retry_after: Some(asked) } = transience {
                after = after.max(asked);
            }
            let after = after.min(MAX_BACKOFF);
            return match &self.repair {
                None => Recovery::Retry { after },
                Some(f) => match f(ctx) {
                    Ok(writes) => Recovery::RetryWith { writes, after },
                    Err(e) => {
                        tracing::warn!(agent = ctx.agent, path = ctx.path, error = %e, "error handler repair failed");
                        Recovery::Fail
                    }
                },
            };
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn missing(view: &ScopeView, attempt: u32, policy: &RetryPolicy) -> Recovery {
        let error = AgentError::MissingArgument { agent: "double".into(), path: "root/1".into(), key: "x".into() };
        policy.handle(&ErrorContext { error: &error, agent: "double", path: "root/1", attempt, view })
    }

    #[test]
    fn repair_writes_before_each_retry_then_falls_back() {
        let view = ScopeView::from_map(serde_json::Map::from_iter([("base".to_string(), json!(2))]));
        let policy = RetryPolicy::new(2, Duration::from_millis(10))
            .repair(|ctx| {
                let base = ctx.view.get("base").cloned().unwrap_or(Value::Null);
                Ok(vec![(format!("{}:{}", ctx.error.kind(), ctx.agent), json!([base, ctx.attempt]))])
            })
            .fallback(|_| Ok(json!("gave up")));
        assert_eq!(
            format!("{policy:?}"),
            "RetryPolicy { retries: 2, backoff: 10ms, retry_permanent: false, when: false, fallback: true, repair: true }"
        );
        assert_eq!(
            missing(&view, 1, &policy),
            Recovery::RetryWith {
                writes: vec![("missing_argument:double".into(), json!([2, 1]))],
                after: Duration::from_millis(10)
            }
        );
        assert_eq!(
            missing(&view, 2, &policy),
            Recovery::RetryWith {
                writes: vec![("missing_argument:double".into(), json!([2, 2]))],
                after: Duration::from_millis(20)
            }
        );
        assert_eq!(missing(&view, 3, &policy), Recovery::Substitute(json!("gave up")));
    }

    #[test]
    fn a_failing_repair_fails_and_cancellation_is_never_repaired() {
        let view = ScopeView::from_map(serde_json::Map::new());
        let policy = RetryPolicy::new(3, Duration::ZERO).repair(|_| Err("no repair".into()));
        assert_eq!(missing(&view, 1, &policy), Recovery::Fail);
        let repaired = RetryPolicy::new(3, Duration::ZERO).repair(|_| Ok(vec![("x".into(), json!(1))]));
        let ctx = ErrorContext { error: &AgentError::Cancelled, agent: "a", path: "root/0", attempt: 1, view: &view };
        assert_eq!(repaired.handle(&ctx), Recovery::Fail);
        assert_eq!(
            format!("{:?}", RetryPolicy::new(1, Duration::ZERO)),
            "RetryPolicy { retries: 1, backoff: 0ns, retry_permanent: false, when: false, fallback: false, repair: false }"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("HTTP {0}")]
    struct Http(u16);

    fn failed_with(transience: Transience, status: u16) -> AgentError {
        let cause = crate::error::Cause::new(crate::error::CauseOrigin::Model, transience, Http(status));
        AgentError::caused("ask", "root/0", cause.with_status(status))
    }

    #[test]
    fn a_permanent_failure_goes_to_the_fallback_at_once_unless_told_to_retry() {
        let view = ScopeView::from_map(serde_json::Map::new());
        let error = failed_with(Transience::Permanent, 401);
        let ctx = |attempt| ErrorContext { error: &error, agent: "ask", path: "root/0", attempt, view: &view };
        let policy = RetryPolicy::new(3, Duration::from_millis(10)).fallback(|_| Ok(json!("no key")));
        assert_eq!(policy.handle(&ctx(1)), Recovery::Substitute(json!("no key")));
        assert_eq!(RetryPolicy::new(3, Duration::ZERO).handle(&ctx(1)), Recovery::Fail);
        let stubborn = RetryPolicy::new(3, Duration::from_millis(10)).retry_permanent(true);
        assert_eq!(stubborn.handle(&ctx(1)), Recovery::Retry { after: Duration::from_millis(10) });
        assert_eq!(error.cause().map(|c| (c.origin().as_str(), c.status())), Some(("model", Some(401))));
        let only_429 = RetryPolicy::new(3, Duration::ZERO)
            .when(|ctx| Ok(ctx.error.cause().and_then(|c| c.status()) == Some(429)))
            .fallback(|_| Ok(json!("busy")));
        assert_eq!(only_429.handle(&ctx(1)), Recovery::Fail);
        let busy = failed_with(Transience::Transient { retry_after: None }, 429);
        let busy_ctx = ErrorContext { error: &busy, agent: "ask", path: "root/0", attempt: 4, view: &view };
        assert_eq!(only_429.handle(&busy_ctx), Recovery::Substitute(json!("busy")));
        assert_eq!(error.to_string(), "agent `ask` (root/0) failed: HTTP 401");
    }

    #[test]
    fn a_transient_failure_waits_at_least_what_the_server_asked_up_to_the_cap() {
        let view = ScopeView::from_map(serde_json::Map::new());
        let policy = RetryPolicy::new(3, Duration::from_millis(100));
        let after = |asked: Option<Duration>, attempt| {
            let error = failed_with(Transience::Transient { retry_after: asked }, 503);
            policy.handle(&ErrorContext { error: &error, agent: "ask", path: "root/0", attempt, view: &view })
        };
        assert_eq!(after(None, 2), Recovery::Retry { after: Duration::from_millis(200) });
        assert_eq!(after(Some(Duration::from_secs(2)), 1), Recovery::Retry { after: Duration::from_secs(2) });
        assert_eq!(after(Some(Duration::from_millis(50)), 1), Recovery::Retry { after: Duration::from_millis(100) });
        assert_eq!(after(Some(Duration::from_secs(600)), 1), Recovery::Retry { after: MAX_BACKOFF });
        assert_eq!(after(None, 4), Recovery::Fail);
    }
}
