//! [`HumanView`]: what an invocation asks of its run about people — answers given to its questions (each
//! used once), questions asked while the run waits in-process, suspensions, and questions that timed out.

use serde_json::Value;

use super::InvocationContext;
use crate::stop::Stop;

/// The human answers and questions of one invocation (`ctx.human()`).
#[derive(Clone, Copy)]
pub struct HumanView<'a> {
    pub(super) ctx: &'a InvocationContext,
}

impl HumanView<'_> {
    /// Uses the human answer to response `id`, if one was given (each answer is used once).
    pub async fn take(&self, id: &str) -> Option<Value> {
        self.ctx.handle.take_answer(id).await
    }

    /// The answer to response `id`, if one was given, without using it (see
    /// [`HumanView::take`]): for an agent that uses it only once its work with it succeeded.
    pub async fn peek(&self, id: &str) -> Option<Value> {
        self.ctx.handle.peek_answer(id).await
    }

    /// Waits in-process until response `id` is answered (see `Registry::answer`), then uses the answer.
    pub async fn wait(&self, id: &str) -> Value {
        self.ctx.handle.wait_answer(id).await
    }

    /// Asks `prompt` as response `id` and waits, holding the run, until it is answered, then uses the answer
    /// (a `mode: pending` human step). With a store the question is in the run's record while the run keeps
    /// running, so `agentic respond`, the server's API and its web inbox see and answer it (on any server of a
    /// shared store); an in-process answer (`Registry::answer`) is taken as well.
    pub async fn ask(&self, id: impl Into<String>, prompt: impl Into<String>) -> Value {
        let pending = self.question(id, prompt);
        self.ctx.handle.ask_and_wait(pending).await.unwrap_or_default()
    }

    /// As [`HumanView::ask`] for a question built with [`HumanView::question`]
    /// (a deadline, what happens at it): `None` once its deadline passes unanswered (an answer arriving
    /// later is refused, SPEC.md §3).
    pub async fn ask_until(&self, pending: crate::pending::PendingResponse) -> Option<Value> {
        self.ctx.handle.ask_and_wait(pending).await
    }

    /// A question this agent asks as response `id` with `prompt` (no data, no deadline): set its other
    /// fields, then [`HumanView::suspend_pending`] or [`HumanView::ask_until`].
    pub fn question(&self, id: impl Into<String>, prompt: impl Into<String>) -> crate::pending::PendingResponse {
        crate::pending::PendingResponse::new(id, prompt, self.ctx.name.to_string())
    }

    /// An [`Stop::Suspended`] asking a human for response `id` with `prompt`: return it to suspend the
    /// run at this agent. The run resumes here once the response is answered.
    pub fn suspend(&self, id: impl Into<String>, prompt: impl Into<String>) -> Stop {
        self.suspend_with(id, prompt, Value::Null)
    }

    /// As [`HumanView::suspend`], keeping `data` with the pending response: what this agent needs to
    /// continue once answered (a remote task's ids). It is journaled with the suspension and, when the run
    /// resumes, [`HumanView::suspension`] hands it back, in this process or a later one.
    pub fn suspend_with(&self, id: impl Into<String>, prompt: impl Into<String>, data: Value) -> Stop {
        let mut pending = self.question(id, prompt);
        pending.data = data;
        self.suspend_pending(pending)
    }

    /// An [`Stop::Suspended`] with `pending` as it is (a deadline, a wait's timer): return it to
    /// suspend the run at this agent. Kept like [`HumanView::suspend_with`]'s when it carries data, a
    /// deadline or a timer.
    pub fn suspend_pending(&self, pending: crate::pending::PendingResponse) -> Stop {
        Stop::Suspended(vec![pending])
    }

    /// The pending response `id` this run was suspended with by [`HumanView::suspend_with`] (with its
    /// data), while its answer is not used: the run resumed from that suspension. Kept in the run's record
    /// until the answer is used, so that a resume after a failure or a crash still finds it.
    pub async fn suspension(&self, id: &str) -> Option<crate::pending::PendingResponse> {
        self.ctx.handle.suspension(id).await
    }

    /// Question `pending` (its id, deadline and `on_timeout`) timed out and this agent acts on it: no answer
    /// is taken for it any more, and the run's record keeps it, so that a later answer is refused saying so
    /// (SPEC.md §3).
    pub fn record_timeout(&self, pending: crate::pending::PendingResponse) {
        self.ctx.handle.time_out(pending);
    }

    /// Marks the suspension `id` as dealt with though nobody answered it (a wait that fired, a question that
    /// timed out): [`HumanView::suspension`] no longer hands it back, and it leaves the run's record.
    pub fn resolve(&self, id: &str) {
        self.ctx.handle.mark_used(id);
    }
}
