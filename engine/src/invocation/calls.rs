//! [`CallsView`]: the calls inside one invocation as its run journals them (SPEC.md §4) — what an agent
//! looping over a model and tools records as it goes, and gets back when it runs again after a crash, a
//! suspension or a fork, so that it continues where it stopped.

use std::sync::Arc;

use serde_json::Value;

use super::InvocationContext;
use crate::error::AgentError;
use crate::lock::lock;
use crate::recording::{CallKind, CallTape};
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

    /// The key a call of this invocation is recorded under: its path with its mapper item (`root/1#2`).
    fn tape_key(&self) -> String {
        format!("{}{}", self.ctx.frame.path, self.ctx.frame.item.as_deref().unwrap_or(""))
    }

    /// Numbers `count` calls of `kind` this invocation is about to make on the run's call tape (SPEC.md §5):
    /// the first one's number, the others following; `None` when the run has no tape.
    pub fn reserve(&self, kind: CallKind, count: u32) -> Option<u32> {
        let tape = self.ctx.handle.tape.as_ref()?;
        Some(tape.reserve(&self.tape_key(), kind, count))
    }

    /// The next call of `kind` this invocation makes, with `request` (the JSON of what is sent, without
    /// transport details), on the run's call tape: numbered, answered from it when it replays, recorded when
    /// it records ([`TapedCall`]). `None` when the run has no tape.
    pub fn taped(&self, kind: CallKind, request: Value) -> Option<TapedCall> {
        let n = self.reserve(kind, 1)?;
        self.taped_at(kind, n, request)
    }

    /// As [`CallsView::taped`] for a call numbered before ([`CallsView::reserve`]).
    pub fn taped_at(&self, kind: CallKind, n: u32, request: Value) -> Option<TapedCall> {
        let tape = self.ctx.handle.tape.clone()?;
        let hash = crate::recording::request_hash(&request);
        Some(TapedCall { tape, agent: self.ctx.name.to_string(), path: self.tape_key(), kind, n, request, hash })
    }
}

/// One call of an invocation on the run's call tape ([`CallsView::taped`]): ask it for the recorded answer
/// first, record the answer after.
#[derive(Debug)]
pub struct TapedCall {
    tape: Arc<CallTape>,
    agent: String,
    path: String,
    kind: CallKind,
    n: u32,
    request: Value,
    hash: String,
}

impl TapedCall {
    /// The call's number among its kind's calls at its path.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The answer the tape holds for this call (replayed or reused), or `None`: make the call.
    ///
    /// # Errors
    /// [`AgentError::Failed`] naming the agent, the call and the first field that differs when a strict
    /// replay's recording has another call there or none.
    pub fn answer(&self) -> Result<Option<Value>, AgentError> {
        self.tape
            .answer(&self.agent, &self.path, self.kind, self.n, &self.request, &self.hash)
            .map_err(|m| AgentError::failed(self.agent.clone(), m.path.clone(), m.to_string()))
    }

    /// Records the call with its `response` (when the tape records).
    pub fn record(self, response: Value) {
        self.tape.record(&self.agent, &self.path, self.kind, self.n, self.request, self.hash, response);
    }
}
