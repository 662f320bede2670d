//! [`Compensations`]: the undo actions of a run's completed actions (tools with a declared compensation),
//! taken by the composite that compensates: its own and those below it, most recent first.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::util::now_us;
use crate::journal::InvocationRecord;

/// Undoes one completed action (a tool call with a declared compensation).
pub type CompensationFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), String>> + Send>;

/// A registered compensation.
pub(crate) struct Compensation {
    /// The path of the invocation that completed the action.
    pub(crate) path: Arc<str>,
    /// The agent that completed it.
    pub(crate) agent: String,
    /// The compensation's name (shown in the history as `compensate:<name>`).
    pub(crate) name: String,
    pub(crate) action: CompensationFn,
}

/// The compensations of one run, in completion order, owned by the run's actor.
#[derive(Default)]
pub(crate) struct Compensations(Vec<Compensation>);

impl Compensations {
    /// Registers the compensation of an action just completed.
    pub(crate) fn add(&mut self, c: Compensation) {
        self.0.push(c);
    }

    /// Takes the compensations registered by invocations at or below `path`, most recent first.
    pub(crate) fn take_below(&mut self, path: &str) -> Vec<Compensation> {
        let prefix = format!("{path}/");
        let (mine, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.0).into_iter().partition(|c| &*c.path == path || c.path.starts_with(&prefix));
        self.0 = rest;
        mine.into_iter().rev().collect()
    }
}

/// Runs `compensations` of run `run_id` in the order given, best effort: a failing one is logged, and each
/// leaves its record (`compensate:<name>`, with its error) to `record` for the run's history.
pub(crate) async fn run_compensations(
    run_id: &str,
    compensations: Vec<Compensation>,
    record: impl Fn(InvocationRecord),
) {
    for c in compensations {
        let started = now_us();
        let result = match std::panic::AssertUnwindSafe((c.action)()).catch_unwind().await {
            Ok(r) => r,
            Err(_) => Err("compensation panicked".to_string()),
        };
        if let Err(e) = &result {
            tracing::warn!(run_id, path = %c.path, compensation = %c.name, "compensation failed: {e}");
        }
        record(InvocationRecord {
            agent: format!("compensate:{}", c.name),
            path: c.path.to_string(),
            inputs: [("of".to_string(), Value::String(c.agent))].into_iter().collect(),
            output: Value::Null,
            started_at_us: started,
            ended_at_us: now_us(),
            attempt: 1,
            tokens: None,
            usage: None,
            error: result.err(),
            item: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, name: &str) -> Compensation {
        Compensation {
            path: Arc::from(path),
            agent: "tool".into(),
            name: name.into(),
            action: Box::new(|| Box::pin(async { Ok(()) })),
        }
    }

    #[test]
    fn a_composite_takes_its_own_and_those_below_it_most_recent_first() {
        let mut all = Compensations::default();
        for (path, name) in [("root/1", "a"), ("root/10", "b"), ("root/1/0", "c"), ("root/2", "d"), ("root/1", "e")] {
            all.add(at(path, name));
        }
        let taken: Vec<String> = all.take_below("root/1").into_iter().map(|c| c.name).collect();
        assert_eq!(taken, ["e", "c", "a"], "not `root/10`: a sibling whose path starts alike");
        let rest: Vec<String> = all.take_below("root").into_iter().map(|c| c.name).collect();
        assert_eq!(rest, ["d", "b"]);
        assert!(all.take_below("root").is_empty());
    }
}
