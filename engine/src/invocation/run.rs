//! [`RunView`]: what an invocation asks of the run beyond itself — the run's scope, the conversation
//! context, compensations, events for listeners, the trace context, how far the journal got, an idempotency
//! key, whether the run was cancelled.

use super::InvocationContext;
use crate::error::AgentError;
use crate::run_actor::ScopeHandle;

/// The run as one invocation sees it (`ctx.run()`).
#[derive(Clone, Copy)]
pub struct RunView<'a> {
    pub(super) ctx: &'a InvocationContext,
}

impl RunView<'_> {
    /// The run's scope. Its writes go to the shared state, even inside a mapper item: write through
    /// [`InvocationContext::write`] to keep them in the item.
    pub fn scope(&self) -> &ScopeHandle {
        &self.ctx.handle.scope
    }

    /// Records this agent's last exchange (user message and answer) in the conversation context, as the
    /// state key `_context.<agent>`, written with the invocation's output when it ends
    /// ([`InvocationContext::write_on_completion`]) and journaled with this step.
    ///
    /// # Errors
    /// None today; kept fallible so that a context store of another kind can report one.
    pub async fn set_context(&self, user: &str, answer: &str) -> Result<(), AgentError> {
        let key = [crate::scope::CONTEXT_PREFIX, &self.ctx.name].concat();
        let at_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        self.ctx.write_on_completion(key, serde_json::json!({ "user": user, "answer": answer, "at_us": at_us }));
        Ok(())
    }

    /// Declares how to undo an action this invocation completed (e.g. a tool call with side effects). When
    /// a composite with `compensate_on_error` above this agent fails or is cancelled, the compensations of
    /// every completed action below it run in reverse order, best effort.
    pub fn add_compensation(
        &self,
        name: impl Into<String>,
        undo: impl FnOnce() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + 'static,
    ) {
        self.ctx.handle.add_compensation(crate::run_actor::Compensation {
            path: self.ctx.frame.path.clone(),
            agent: self.ctx.name.to_string(),
            name: name.into(),
            action: Box::new(undo),
        });
    }

    /// The W3C `traceparent` the run was started under ([`crate::InvokeRequest::traceparent`]), if any: what an
    /// agent's outgoing request carries when there is no OpenTelemetry context of its own
    /// ([`crate::current_traceparent`] is `None`).
    pub fn traceparent(&self) -> Option<&str> {
        self.ctx.handle.traceparent.as_deref()
    }

    /// How many steps of the run are journaled so far: forking the run at this number (`agentic fork RUN --at
    /// N`) gives a copy that runs this invocation again, afresh.
    pub fn journaled_steps(&self) -> u64 {
        self.ctx.handle.journal.last_seq()
    }

    /// How many invocations of this agent at this path (and mapper item) completed before this one
    /// ([`crate::InvocationRecord::completed_in`]), asked of the scope once per invocation: the same before and
    /// after a resume, as this invocation had not completed.
    ///
    /// # Errors
    /// [`AgentError::Internal`] if the run's scope actor died.
    pub(crate) async fn occurrence(&self) -> Result<u32, AgentError> {
        if let Some(n) = self.ctx.occurrence.get() {
            return Ok(*n);
        }
        let n = self
            .ctx
            .handle
            .scope
            .completed(self.ctx.name.clone(), self.ctx.frame.path.clone(), self.ctx.frame.item.clone())
            .await?;
        Ok(*self.ctx.occurrence.get_or_init(|| n))
    }

    /// `run id/agent path[item][@occurrence]/attempt`: a key for side-effecting tools to deduplicate
    /// at-least-once execution. `r1/root/0/1` the first time the agent at `root/0` runs, `r1/root/0@2/1` the
    /// second time (a loop's next iteration, a supervisor choosing it again), `r1/root/0#3/1` for the fourth item
    /// of a mapper. Two iterations or two items never share a key; an invocation run again after a crash or on
    /// resume (it had not completed) gets the same key, as the occurrence counts the completed invocations of
    /// this agent at this path and item, which the journal keeps. Idea: Temporal's activity id, Stripe's
    /// `Idempotency-Key`.
    ///
    /// # Errors
    /// [`AgentError::Internal`] if the run's scope actor died.
    pub async fn idempotency_key(&self) -> Result<String, AgentError> {
        let n = self.occurrence().await?;
        let item = self.ctx.frame.item.as_deref().unwrap_or("");
        let (run, path, attempt) = (&self.ctx.handle.run_id, &self.ctx.frame.path, self.ctx.frame.attempt);
        Ok(match n {
            0 => format!("{run}/{path}{item}/{attempt}"),
            n => format!("{run}/{path}{item}@{}/{attempt}", u64::from(n) + 1),
        })
    }

    /// Whether the run has been cancelled (long agents may poll it; they are also aborted).
    pub fn is_cancelled(&self) -> bool {
        self.ctx.handle.cancel.is_cancelled()
    }

    /// Reports an event (tokens of a streaming model, tool calls) to the listeners of this invocation.
    pub fn emit(&self, event: &crate::listener::RunEvent) {
        self.ctx.handle.subscribers.emit(&self.ctx.listeners, event);
    }

    /// Whether any listener or run subscriber would receive [`RunView::emit`] events (skip building
    /// them otherwise).
    pub fn has_listeners(&self) -> bool {
        self.ctx.handle.subscribers.observed(&self.ctx.listeners)
    }
}
