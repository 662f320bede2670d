//! Starting and resuming runs: [`InvokeRequest`] (an `IntoFuture` with chained options), its [`RunOutcome`],
//! [`respond`] (recording a human answer for a suspended run), and the handles that cancel ([`CancelHandle`])
//! or drain ([`DrainHandle`]) runs from outside.
//!
//! One entry point covers every case, keyed by the memory id: a new id starts a run; the id of a suspended,
//! failed, cancelled, drained or crashed run resumes it from its last checkpoint (completed steps never re-run;
//! the steps in flight run again); the id of a completed run starts a new turn on the same scope (state and
//! history accumulate).

use std::collections::BTreeMap;
use std::future::IntoFuture;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::registry::Registry;
use crate::agent::AgentRef;
use crate::error::{AgentError, RespondError, StoreError};
use crate::journal::InvocationRecord;
use crate::listener::{AgentListener, ChannelListener, ListenerRef};
use crate::pending::{PendingKind, PendingResponse};
use crate::run_actor::RunEvents;
use crate::run_actor::ScopeHandle;
use crate::run_actor::now_us;
use crate::scope::ScopeView;
use crate::status::RunStatus;
use crate::store::{CheckpointStore, Durability, StoreRef};
use crate::time::rfc3339_ms;

/// The agent path of the journal record holding a turn's inputs (no agent has this path).
pub const INPUTS_PATH: &str = "inputs";

/// How a run ended, when it did not fail.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunResult {
    /// Finished with this result.
    Completed(Value),
    /// Waiting for these responses.
    Suspended {
        /// The pending responses.
        pending: Vec<PendingResponse>,
    },
    /// Stopped by a drain ([`DrainHandle`]) at a step boundary, with steps left: the run is recorded
    /// `running` and resuming it ([`RunOutcome::resume`], or a request with its memory id) continues with the
    /// steps it did not start.
    Drained,
}

/// The outcome of a run that did not fail: its id, its result and its scope. A suspended outcome can be
/// answered and resumed directly: `outcome.resume().answer("human-review", "APPROVED").await`; a drained one
/// continues with `outcome.resume().await`.
pub struct RunOutcome {
    /// The run id (memory id).
    pub run_id: String,
    /// Completed or suspended.
    pub result: RunResult,
    pub(super) scope: ScopeHandle,
    pub(super) agent: AgentRef,
    pub(super) store: Option<StoreRef>,
    pub(super) durability: Durability,
    pub(super) registry: Registry,
}

impl std::fmt::Debug for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOutcome").field("run_id", &self.run_id).field("result", &self.result).finish()
    }
}

impl RunOutcome {
    /// The result when completed (`None` when suspended or drained).
    pub fn output(&self) -> Option<&Value> {
        match &self.result {
            RunResult::Completed(v) => Some(v),
            RunResult::Suspended { .. } | RunResult::Drained => None,
        }
    }

    /// The responses the run waits for (empty when completed or drained).
    pub fn pending(&self) -> &[PendingResponse] {
        match &self.result {
            RunResult::Suspended { pending } => pending,
            RunResult::Completed(_) | RunResult::Drained => &[],
        }
    }

    /// Whether the run is waiting for a human.
    pub fn is_suspended(&self) -> bool {
        matches!(self.result, RunResult::Suspended { .. })
    }

    /// Whether the run was stopped by a drain (it continues when resumed).
    pub fn is_drained(&self) -> bool {
        matches!(self.result, RunResult::Drained)
    }

    /// The final state snapshot.
    pub fn state(&self) -> ScopeView {
        self.scope.view()
    }

    /// The run's scope (history, context).
    pub fn scope(&self) -> &ScopeHandle {
        &self.scope
    }

    /// The invocation history of the run (all turns), in completion order.
    ///
    /// # Errors
    /// None today (kept fallible for scopes kept elsewhere).
    pub async fn history(&self) -> Result<Vec<InvocationRecord>, AgentError> {
        self.scope.history().await
    }

    /// The run's trajectory: the names of the agents whose invocations completed, in the order they started
    /// ([`InvocationRecord::trajectory`]).
    ///
    /// # Errors
    /// None once the run has ended (kept fallible for scopes kept elsewhere).
    pub async fn trajectory(&self) -> Result<Vec<String>, AgentError> {
        self.scope.trajectory().await
    }

    /// What the run spent on models in all: tokens, calls, cost (rounded to a billionth of a dollar) and the
    /// models called — the `total` that `agentic show` and `GET /runs/{id}` give
    /// ([`crate::budget::usage_by_agent`]) — from the run's scope (the invocations that ended, failed attempts
    /// included, and those suspended at a budget), without reading the store.
    ///
    /// # Errors
    /// None once the run has ended (kept fallible for scopes kept elsewhere).
    pub async fn usage(&self) -> Result<crate::usage::Usage, AgentError> {
        self.scope.usage(self.pending()).await
    }

    /// A request that continues this run (same system, memory id, store and durability). Add answers with
    /// [`InvokeRequest::answer`] before awaiting it.
    pub fn resume(&self) -> InvokeRequest {
        let mut req = self.agent.invoke().memory_id(self.run_id.clone()).durability(self.durability);
        req.store = self.store.clone();
        req.registry = Some(self.registry.clone());
        req
    }
}

/// Cancels a run from outside: pass it with [`InvokeRequest::cancel_handle`] and call [`CancelHandle::cancel`].
///
/// Cancelling stops the run's actor tree (aborting every agent in flight), journals the run as cancelled and
/// makes the invocation return [`AgentError::Cancelled`], also when the run is draining ([`DrainHandle`]).
#[derive(Debug, Clone, Default)]
pub struct CancelHandle(pub(super) CancellationToken);

impl CancelHandle {
    /// A new, uncancelled handle.
    pub fn new() -> Self {
        CancelHandle(CancellationToken::new())
    }

    /// Cancels the run.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether [`CancelHandle::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// Drains runs from outside: pass it with [`InvokeRequest::drain_handle`] (one handle may serve any number of
/// runs, clones included) and call [`DrainHandle::drain`].
///
/// A drained run stops at its step boundaries without ending: its supervisors start no new invocation (the
/// calls their planners decide on are journaled in flight, not started), the invocations in flight finish
/// and their steps are journaled, async agents in flight finish too, the journal is flushed whatever the
/// durability mode, and the invocation returns `Ok` with [`RunResult::Drained`]. The run stays recorded
/// `running` (milestone `interrupted`): resuming it starts the calls it did not start, and nothing completed
/// runs again. A run that reaches its end or a suspension while draining completes or suspends as usual. A
/// step in flight is waited for however long it takes (a pending-mode human agent waits for its answer): to
/// bound the wait, cancel the run afterwards ([`CancelHandle`]), which wins as it always does. A run without a
/// journal (no store, no explicit memory id, no agent that can suspend) could not continue: a drain leaves it
/// running to its end.
///
/// A handle of its own rather than a mode of [`CancelHandle`]: a server drains all its runs at once with one
/// handle while it cancels them one at a time, and a drain followed by a cancel (a shutdown deadline) needs
/// both signals on one run.
#[derive(Debug, Clone, Default)]
pub struct DrainHandle(pub(super) CancellationToken);

impl DrainHandle {
    /// A new handle, not draining.
    pub fn new() -> Self {
        DrainHandle(CancellationToken::new())
    }

    /// Drains every run given this handle (those running, and those started with it later, which stop at
    /// their first step boundary). Idempotent.
    pub fn drain(&self) {
        self.0.cancel();
    }

    /// Whether [`DrainHandle::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// A request to run (or resume) an agent as a system. Chain options, then `.await` it.
///
/// Defaults: no inputs; a new UUID as memory id; no store (runs with an explicit memory id, and systems that
/// can suspend, are checkpointed in an in-process store kept by the [`Registry`]); [`Durability::Sync`]; no
/// cancel handle; no drain handle; the global registry.
#[must_use = "a request does nothing until awaited"]
pub struct InvokeRequest {
    pub(super) agent: AgentRef,
    pub(super) inputs: Map<String, Value>,
    pub(super) memory_id: Option<String>,
    pub(super) store: Option<StoreRef>,
    pub(super) durability: Durability,
    pub(super) cancel: CancelHandle,
    pub(super) drain: Option<DrainHandle>,
    pub(super) answers: BTreeMap<String, Value>,
    pub(super) source: Option<String>,
    pub(super) spec_hash: Option<String>,
    pub(super) tenant: Option<String>,
    pub(super) run_name: Option<String>,
    pub(super) registry: Option<Registry>,
    pub(super) listeners: Vec<ListenerRef>,
    /// The W3C `traceparent` the run continues (valid, or none).
    pub(super) traceparent: Option<Arc<str>>,
    /// What the run records its calls on and answers them from.
    pub(super) tape: Option<Arc<crate::recording::CallTape>>,
}

impl AgentRef {
    /// Starts a request to run this agent as the root of a system.
    pub fn invoke(&self) -> InvokeRequest {
        InvokeRequest {
            agent: self.clone(),
            inputs: Map::new(),
            memory_id: None,
            store: None,
            durability: Durability::Sync,
            cancel: CancelHandle::new(),
            drain: None,
            answers: BTreeMap::new(),
            source: None,
            spec_hash: None,
            tenant: None,
            run_name: None,
            registry: None,
            listeners: Vec::new(),
            traceparent: None,
            tape: None,
        }
    }

    /// Starts a request that resumes run `run_id` (same as `invoke().memory_id(run_id)`).
    pub fn resume(&self, run_id: impl Into<String>) -> InvokeRequest {
        self.invoke().memory_id(run_id)
    }
}

impl InvokeRequest {
    /// Adds one input (written to the scope before the root agent runs; it overrides a stored value).
    pub fn input(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.inputs.insert(key.into(), value.into());
        self
    }

    /// Adds several inputs.
    pub fn inputs(mut self, inputs: Map<String, Value>) -> Self {
        self.inputs.extend(inputs);
        self
    }

    /// Sets the memory id (the run id): an existing run with this id is resumed or continued.
    pub fn memory_id(mut self, id: impl Into<String>) -> Self {
        self.memory_id = Some(id.into());
        self
    }

    /// Checkpoints the run in `store` (a `MemoryStore`, a `SledStore`, or your own).
    pub fn store<S: CheckpointStore>(mut self, store: S) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// Checkpoints the run in an already shared store.
    pub fn store_ref(mut self, store: StoreRef) -> Self {
        self.store = Some(store);
        self
    }

    /// Sets the durability mode (default [`Durability::Sync`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Lets the caller cancel the run through `handle`.
    pub fn cancel_handle(mut self, handle: CancelHandle) -> Self {
        self.cancel = handle;
        self
    }

    /// Lets the caller drain the run through `handle` (see [`DrainHandle`]); one handle may be given to many
    /// requests.
    pub fn drain_handle(mut self, handle: DrainHandle) -> Self {
        self.drain = Some(handle);
        self
    }

    /// Answers pending response `id` (used once, by the human agent that asked).
    pub fn answer(mut self, id: impl Into<String>, value: impl Into<Value>) -> Self {
        self.answers.insert(id.into(), value.into());
        self
    }

    /// Records where the system came from (a spec path), for resuming from another process.
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Records the [`crate::spec_hash`] of the spec text the system was built from, archived in the run's
    /// store ([`CheckpointStore::put_spec`]): resumes in any process rebuild the run from that text.
    pub fn spec_hash(mut self, hash: impl Into<String>) -> Self {
        self.spec_hash = Some(hash.into());
        self
    }

    /// Records the tenant a new run belongs to ([`crate::RunRecord::tenant`], SERVER.md §8); a run that exists
    /// keeps its own.
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// Names the run in its record (what `agentic runs` lists; default: the root agent's name). The CLI
    /// passes the spec's name.
    pub fn run_name(mut self, name: impl Into<String>) -> Self {
        self.run_name = Some(name.into());
        self
    }

    /// Records the run's model and tool calls on `tape`, and answers them from it when it replays a recording
    /// or reuses an earlier run's calls (SPEC.md §5; [`crate::CallTape`]). Agents reach it through
    /// [`crate::CallsView::tape`].
    pub fn call_tape(mut self, tape: Arc<crate::recording::CallTape>) -> Self {
        self.tape = Some(tape);
        self
    }

    /// Continues the distributed trace of a W3C `traceparent` header value (a caller's request, say): with the
    /// cargo feature `otel` it is the parent of the run's `invoke_workflow` span; without it, it is passed on
    /// unchanged to the agents' outgoing requests (MCP, A2A; [`crate::RunView::traceparent`]). An
    /// invalid value is ignored, as W3C Trace Context asks.
    pub fn traceparent(mut self, traceparent: impl AsRef<str>) -> Self {
        let value = traceparent.as_ref().trim();
        self.traceparent = crate::trace_context::parse(value).map(|_| Arc::from(value));
        self
    }

    /// Registers a listener for the whole run: it sees every invocation at every level and the run events.
    pub fn listener(mut self, listener: impl AgentListener) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Registers an already shared listener for the whole run.
    pub fn listener_ref(mut self, listener: ListenerRef) -> Self {
        self.listeners.push(listener);
        self
    }

    /// Starts the run in the background and returns its events as a stream, plus a handle to await its
    /// outcome. Dropping the stream does not cancel the run (use [`InvokeRequest::cancel_handle`] for that).
    pub fn events(self) -> (RunEvents, tokio::task::JoinHandle<Result<RunOutcome, AgentError>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let request = self.listener(ChannelListener(tx));
        let handle = tokio::spawn(request.into_future());
        (RunEvents::new(rx), handle)
    }

    /// Uses `registry` instead of the global one.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }
}

/// Records a human answer for a suspended run in `store` (it does not run anything; resume the run after).
/// With `response_id` `None`, exactly one response must be pending. Returns the response id answered.
///
/// # Errors
/// [`RespondError`]: the run is unknown, not suspended, the id is not pending or already answered, the id is
/// omitted while several responses are pending (the message lists them), or the store failed.
pub async fn respond(
    store: &StoreRef,
    run_id: &str,
    response_id: Option<&str>,
    value: Value,
) -> Result<String, RespondError> {
    respond_as(store, run_id, response_id, value, None).await
}

/// [`respond`] by `by` (the server's principal, `cli:<user>`): who answered is recorded with the answer
/// of a tool call's approval or an in-doubt call (SPEC.md §4), whose shape, edited arguments and `args_hash`
/// are checked here first.
///
/// # Errors
/// As [`respond`]; also [`RespondError::InvalidAnswer`] (a tool answer of the wrong shape, edited
/// arguments that break the tool's parameters) and [`RespondError::StaleAnswer`] (an `args_hash` not the
/// pending call's).
pub async fn respond_as(
    store: &StoreRef,
    run_id: &str,
    response_id: Option<&str>,
    value: Value,
    by: Option<&str>,
) -> Result<String, RespondError> {
    let response_id = response_id.map(str::to_string);
    let by = by.map(str::to_string);
    // What the change decided, read once the store has dropped it: the response answered, or why not.
    let chosen = Arc::new(std::sync::OnceLock::new());
    let answered = chosen.clone();
    let refused = Arc::new(std::sync::OnceLock::new());
    let refusal = refused.clone();
    // One atomic change of the record (a database store locks its row): answers posted at once to two
    // servers for two responses of one run both stay.
    let change: crate::RunUpdate = Box::new(move |rec| {
        let refuse = |e: RespondError| {
            let text = e.to_string();
            let _ = refusal.set(e);
            text
        };
        let id = answerable(rec, response_id.as_deref()).map_err(refuse)?;
        // Checked in the same atomic change: of two answers posted at once, the second is refused.
        if rec.answers.contains_key(&id) {
            return Err(refuse(RespondError::AlreadyAnswered { run_id: rec.run_id.clone(), response_id: id }));
        }
        let mut value = value.clone();
        if let Some(asked) =
            rec.pending.iter().find(|p| p.id == id && matches!(p.kind, PendingKind::ToolCall | PendingKind::InDoubt))
        {
            let (run_id, response_id) = (rec.run_id.clone(), id.clone());
            value = crate::tool_call::check_tool_answer(asked.kind, &value, &asked.data, by.as_deref()).map_err(
                |refusal| {
                    refuse(match refusal {
                        crate::tool_call::ToolAnswerRefusal::Invalid(message) => {
                            RespondError::InvalidAnswer { run_id, response_id, message }
                        }
                        crate::tool_call::ToolAnswerRefusal::Stale { expected, given } => {
                            RespondError::StaleAnswer { run_id, response_id, expected, given }
                        }
                    })
                },
            )?;
        }
        // A budget's answer goes to every call suspended at that budget (a parallel's branches each stopped).
        let mut ids = vec![id.clone()];
        if let Some(asked) = rec.pending.iter().find(|p| p.id == id && p.kind == PendingKind::Budget) {
            let budget = asked.data.get("budget_path");
            let siblings = rec.pending.iter().filter(|p| {
                p.kind == PendingKind::Budget && p.data.get("budget_path") == budget && !rec.answers.contains_key(&p.id)
            });
            for p in siblings {
                if let Err(message) = crate::budget::check_budget_answer(&value, &p.data) {
                    let (run_id, response_id) = (rec.run_id.clone(), p.id.clone());
                    return Err(refuse(RespondError::InvalidAnswer { run_id, response_id, message }));
                }
                if p.id != id {
                    ids.push(p.id.clone());
                }
            }
        }
        for id in ids {
            if let Some(by) = &by {
                rec.answered_by.insert(id.clone(), by.clone());
            }
            rec.answers.insert(id, value.clone());
        }
        rec.updated_at_ms = now_us() / 1000;
        let _ = answered.set(id);
        Ok(())
    });
    let run_id = run_id.to_string();
    match store.update_run_dyn(&run_id, change).await {
        Err(source) => Err(RespondError::Store { run_id, source }),
        Ok(None) => Err(RespondError::UnknownRun { run_id }),
        Ok(Some(Err(message))) => {
            let typed = Arc::into_inner(refused).and_then(std::sync::OnceLock::into_inner);
            // The change only refuses through `answerable`; any other text is the store's own.
            Err(typed.unwrap_or(RespondError::Store { run_id, source: StoreError::backend(message) }))
        }
        Ok(Some(Ok(_))) => Ok(Arc::into_inner(chosen).and_then(std::sync::OnceLock::into_inner).unwrap_or_default()),
    }
}

/// Which pending response of a stored run an answer goes to: `response_id` when the run waits for it, else
/// (`None`) its only pending response. The check [`respond`] makes before recording an answer.
///
/// # Errors
/// [`RespondError::NotSuspended`], [`RespondError::NotPending`] (the message lists what is pending),
/// [`RespondError::Ambiguous`] (the id omitted while several responses are pending),
/// [`RespondError::TimedOut`] (its deadline has passed) or [`RespondError::NotAnswerable`] (a wait).
pub fn answerable(rec: &crate::RunRecord, response_id: Option<&str>) -> Result<String, RespondError> {
    let run_id = rec.run_id.clone();
    // A running run waits for the questions of its `mode: pending` human steps, which are in its record.
    let waiting = rec.status == RunStatus::Suspended || (rec.status == RunStatus::Running && !rec.pending.is_empty());
    if !waiting && let Some(refusal) = response_id.and_then(|id| timed_out(rec, id)) {
        return Err(refusal);
    }
    if !waiting {
        let asked = !rec.withdrawn_questions().is_empty();
        return Err(RespondError::NotSuspended { run_id, status: rec.status, asked });
    }
    let pending: Vec<String> = rec.pending.iter().map(|p| p.id.clone()).collect();
    if let Some(refusal) = response_id.filter(|id| !pending.iter().any(|p| p == id)).and_then(|id| timed_out(rec, id)) {
        return Err(refusal);
    }
    let id = match response_id {
        Some(id) if pending.iter().any(|p| p == id) => id.to_string(),
        Some(id) => return Err(RespondError::NotPending { run_id, response_id: id.to_string(), pending }),
        None if pending.len() == 1 => pending.into_iter().next().unwrap_or_default(),
        // Several calls suspended at one budget take one answer.
        None if one_budget(&rec.pending) => pending.into_iter().next().unwrap_or_default(),
        None => return Err(RespondError::Ambiguous { run_id, pending }),
    };
    let Some(asked) = rec.pending.iter().find(|p| p.id == id) else { return Ok(id) };
    if asked.kind == PendingKind::Wait {
        let fires_at = rfc3339_ms(asked.deadline_ms.unwrap_or_default());
        return Err(RespondError::NotAnswerable { run_id, response_id: id, fires_at });
    }
    if let Some(deadline) = asked.deadline_ms.filter(|_| asked.timed_out(now_us() / 1000)) {
        let instead = asked.on_timeout.clone().unwrap_or_else(|| "the step fails".to_string());
        return Err(RespondError::TimedOut { run_id, response_id: id, deadline: rfc3339_ms(deadline), instead });
    }
    Ok(id)
}

/// Whether every pending response is a suspension at one and the same budget.
fn one_budget(pending: &[crate::pending::PendingResponse]) -> bool {
    let budget = |p: &crate::pending::PendingResponse| p.data.get("budget_path").cloned();
    !pending.is_empty()
        && pending
            .iter()
            .all(|p| p.kind == PendingKind::Budget && budget(p).is_some() && budget(p) == budget(&pending[0]))
}

/// The refusal of an answer to `response_id` of `rec` because that question timed out and was acted on
/// ([`crate::RunRecord::timed_out`]), if it did.
pub fn timed_out(rec: &crate::RunRecord, response_id: &str) -> Option<RespondError> {
    let asked = rec.timed_out.iter().rev().find(|p| p.id == response_id)?;
    Some(RespondError::TimedOut {
        run_id: rec.run_id.clone(),
        response_id: response_id.to_string(),
        deadline: rfc3339_ms(asked.deadline_ms.unwrap_or_default()),
        instead: asked.on_timeout.clone().unwrap_or_else(|| "the step fails".to_string()),
    })
}
