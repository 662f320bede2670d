//! [`Stop`]: how an invocation ends without a value — it failed, or it stopped for a reason that is not a
//! failure (it waits for responses, or the run was drained). [`crate::AgentError`] holds failures only: error
//! handlers see a [`Stop::Failed`]'s error and nothing else.

use crate::error::AgentError;
use crate::pending::PendingResponse;

/// Why an invocation ended without a value. What [`crate::Agent::invoke`] returns as its error: `?` on an
/// [`AgentError`] makes a [`Stop::Failed`], and [`crate::HumanView::suspend`] makes a
/// [`Stop::Suspended`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Stop {
    /// The invocation failed: its error handler, if any, decides what happens next.
    Failed(AgentError),
    /// Not a failure: the invocation waits for these responses (a person's answer, a timer, a spent budget).
    /// The run journals its progress, releases everything and reports them; sibling branches finish first.
    /// It continues here once they are answered.
    Suspended(Vec<PendingResponse>),
    /// Not a failure: the run was drained ([`crate::DrainHandle`]) and this invocation stopped at a step
    /// boundary with work left (calls its planner decided on, not started). It stays in flight in the journal,
    /// so resuming the run continues it.
    Drained,
}

impl Stop {
    /// The failure, when the invocation failed.
    pub fn failure(&self) -> Option<&AgentError> {
        match self {
            Stop::Failed(e) => Some(e),
            Stop::Suspended(_) | Stop::Drained => None,
        }
    }

    /// The failure; a suspension or a drain as an [`AgentError::Internal`] naming it, for callers that can
    /// only fail (a model's tool that cannot suspend).
    pub fn into_failure(self) -> AgentError {
        match self {
            Stop::Failed(e) => e,
            other => AgentError::internal(format!("cannot stop here: {other}")),
        }
    }

    /// Whether the invocation stopped without failing (suspended or drained): it stays in flight.
    pub fn stays(&self) -> bool {
        matches!(self, Stop::Suspended(_) | Stop::Drained)
    }
}

impl From<AgentError> for Stop {
    fn from(e: AgentError) -> Self {
        Stop::Failed(e)
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Failed(e) => e.fmt(f),
            Stop::Suspended(pending) => {
                let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
                write!(f, "suspended: waiting for {}", ids.join(", "))
            }
            Stop::Drained => f.write_str("run drained: stopped at a step boundary, to be resumed"),
        }
    }
}

impl std::error::Error for Stop {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Stop::Failed(e) => Some(e),
            Stop::Suspended(_) | Stop::Drained => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_converts_and_says_itself_and_a_suspension_names_what_it_waits_for() {
        let failed: Stop = AgentError::failed("a", "root/0", "boom").into();
        assert_eq!(failed.to_string(), "agent `a` (root/0) failed: boom");
        assert!(failed.failure().is_some() && !failed.stays());
        let waiting =
            Stop::Suspended(vec![PendingResponse::new("ok", "OK?", "ask"), PendingResponse::new("b", "?", "x")]);
        assert_eq!(waiting.to_string(), "suspended: waiting for ok, b");
        assert!(waiting.failure().is_none() && waiting.stays());
        assert_eq!(
            Stop::Drained.into_failure().to_string(),
            "engine: cannot stop here: run drained: stopped at a step boundary, to be resumed"
        );
    }
}
