//! [`CallsView`]: the calls inside one invocation as its run journals them (SPEC.md §4) — what an agent
//! looping over a model and tools records as it goes, and gets back when it runs again after a crash, a
//! suspension or a fork, so that it continues where it stopped.

use super::InvocationContext;
use crate::error::AgentError;
use crate::lock::lock;
use crate::tool_call::CallEntry;

/// The journaled calls of one invocation (`ctx.calls()`).
#[derive(Clone, Copy)]
pub struct CallsView<'a> {
    pub(super) ctx: &'a InvocationContext,
}

impl CallsView<'_> {
    /// Whether the run is journaled (it has a store): without a journal nothing is recorded and nothing
    /// comes back.
    pub fn journaled(&self) -> bool {
        self.ctx.handle.journal.enabled()
    }

    /// The calls this invocation journaled before the run stopped (a crash, a suspension, a fork at one of
    /// them), in order; empty on a first run. Taken once: ask at the invocation's start.
    pub async fn resumed(&self) -> Vec<CallEntry> {
        let key = crate::journal::planner_key(&self.ctx.frame.path, self.ctx.frame.layer.as_deref());
        self.ctx.handle.take_calls(key).await
    }

    /// Journals `entries` (a model turn, tool calls' changes) as one record of this invocation. With
    /// `commit`, under `sync` durability, they are committed before this returns (a call with an effect is
    /// committed as started before it is sent; results before the next model call); without, they are
    /// appended and committed with the run's next commit. Nothing happens when the run has no journal.
    ///
    /// # Errors
    /// [`AgentError::Store`] when the journal write fails.
    pub async fn record(&self, entries: Vec<CallEntry>, commit: bool) -> Result<(), AgentError> {
        let mut held = std::mem::take(&mut *lock(&self.ctx.step_calls));
        held.extend(entries);
        self.ctx.handle.journal.calls(&self.ctx.frame.path, self.ctx.frame.layer.as_ref(), held, commit).await
    }

    /// Journals `entries` in the record of the step that completes this invocation (no record of their own):
    /// for the calls after which the invocation only returns its result (its last model turn). Entries held
    /// here go before those of a later [`CallsView::record`]; when the invocation fails or suspends instead,
    /// they are not journaled (journal them with [`CallsView::record`] on those paths).
    pub fn with_step(&self, entries: Vec<CallEntry>) {
        if self.journaled() {
            lock(&self.ctx.step_calls).extend(entries);
        }
    }
}
