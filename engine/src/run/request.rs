//! Starting and resuming runs: [`InvokeRequest`] (an `IntoFuture` with chained options), its [`RunOutcome`],
//! and [`respond`] (recording a human answer for a suspended run).
//!
//! One entry point covers every case, keyed by the memory id: a new id starts a run; the id of a suspended,
//! failed, cancelled or crashed run resumes it from its last checkpoint (completed steps never re-run; the
//! steps in flight run again); the id of a completed run starts a new turn on the same scope (state and
//! history accumulate).

use std::collections::{BTreeMap, HashMap};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::frame::{Frame, Report};
use super::registry::Registry;
use super::scope_actor::{RootStart, ScopeMsg};
use super::supervisor::spawn_invocation;
use super::{RunContext, RunSetup, WriterMsg, now_us};
use crate::agent::{AgentRef, TopologyNode};
use crate::error::AgentError;
use crate::listener::{AgentListener, ChannelListener, ListenerRef, RunEvent};
use crate::scope::{InvocationRecord, ScopeHandle, ScopeView};
use crate::store::{CheckpointStore, Durability, Milestone, RunImage, RunRecord, RunStatus, StepRecord, StoreRef};

/// The agent path of the journal record holding a turn's inputs (no agent has this path).
pub const INPUTS_PATH: &str = "inputs";

/// A response a suspended run waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingResponse {
    /// Response id (default: the asking agent's path).
    pub id: String,
    /// The prompt shown to the human.
    pub prompt: String,
    /// Name of the agent that asked.
    pub agent: String,
}

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
}

/// The outcome of a run that did not fail: its id, its result and its scope. A suspended outcome can be
/// answered and resumed directly: `outcome.resume().answer("human-review", "APPROVED").await`.
pub struct RunOutcome {
    /// The run id (memory id).
    pub run_id: String,
    /// Completed or suspended.
    pub result: RunResult,
    scope: ScopeHandle,
    agent: AgentRef,
    store: Option<StoreRef>,
    durability: Durability,
    registry: Registry,
}

impl std::fmt::Debug for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOutcome").field("run_id", &self.run_id).field("result", &self.result).finish()
    }
}

impl RunOutcome {
    /// The result when completed (`None` when suspended).
    pub fn output(&self) -> Option<&Value> {
        match &self.result {
            RunResult::Completed(v) => Some(v),
            RunResult::Suspended { .. } => None,
        }
    }

    /// The responses the run waits for (empty when completed).
    pub fn pending(&self) -> &[PendingResponse] {
        match &self.result {
            RunResult::Suspended { pending } => pending,
            RunResult::Completed(_) => &[],
        }
    }

    /// Whether the run is waiting for a human.
    pub fn is_suspended(&self) -> bool {
        matches!(self.result, RunResult::Suspended { .. })
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

    /// A request that continues this run (same system, memory id, store and durability). Add answers with
    /// [`InvokeRequest::answer`] before awaiting it.
    pub fn resume(&self) -> InvokeRequest {
        let mut req = self.agent.invoke().memory_id(self.run_id.clone()).durability(self.durability);
        req.store = self.store.clone();
        req.registry = Some(self.registry.clone());
        req
    }
}

/// The events of a run started with [`InvokeRequest::events`], in order. Implements
/// `futures::Stream<Item = RunEvent>`; [`RunEvents::recv`] is the same without the trait.
pub struct RunEvents {
    rx: mpsc::UnboundedReceiver<RunEvent>,
}

impl RunEvents {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<RunEvent>) -> Self {
        RunEvents { rx }
    }

    /// The next event; `None` once the run has ended and every event was received.
    pub async fn recv(&mut self) -> Option<RunEvent> {
        self.rx.recv().await
    }
}

impl futures::Stream for RunEvents {
    type Item = RunEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<RunEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// An actor of a run's process group of event subscribers: forwards each event to a [`RunEvents`] stream, and
/// stops when the stream is dropped or the run ends (the run drains the group).
pub(crate) struct EventSubscriber;

impl ractor::Actor for EventSubscriber {
    type Msg = RunEvent;
    type State = mpsc::UnboundedSender<RunEvent>;
    type Arguments = mpsc::UnboundedSender<RunEvent>;

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<RunEvent>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle(
        &self,
        myself: ractor::ActorRef<RunEvent>,
        event: RunEvent,
        tx: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        if tx.send(event).is_err() {
            myself.stop(None);
        }
        Ok(())
    }
}

/// Cancels a run from outside: pass it with [`InvokeRequest::cancel_handle`] and call [`CancelHandle::cancel`].
///
/// Cancelling stops the run's actor tree (aborting every agent in flight), journals the run as cancelled and
/// makes the invocation return [`AgentError::Cancelled`].
#[derive(Debug, Clone, Default)]
pub struct CancelHandle(CancellationToken);

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

/// A request to run (or resume) an agent as a system. Chain options, then `.await` it.
///
/// Defaults: no inputs; a new UUID as memory id; no store (runs with an explicit memory id, and systems that
/// can suspend, are checkpointed in an in-process store kept by the [`Registry`]); [`Durability::Sync`]; no
/// cancel handle; the global registry.
#[must_use = "a request does nothing until awaited"]
pub struct InvokeRequest {
    agent: AgentRef,
    inputs: Map<String, Value>,
    memory_id: Option<String>,
    store: Option<StoreRef>,
    durability: Durability,
    cancel: CancelHandle,
    answers: BTreeMap<String, Value>,
    source: Option<String>,
    run_name: Option<String>,
    registry: Option<Registry>,
    listeners: Vec<ListenerRef>,
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
            answers: BTreeMap::new(),
            source: None,
            run_name: None,
            registry: None,
            listeners: Vec::new(),
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

    /// Names the run in its record (what `agentic runs` lists; default: the root agent's name). The CLI
    /// passes the spec's name.
    pub fn run_name(mut self, name: impl Into<String>) -> Self {
        self.run_name = Some(name.into());
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
        (RunEvents { rx }, handle)
    }

    /// Uses `registry` instead of the global one.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    async fn run(self) -> Result<RunOutcome, AgentError> {
        let registry = self.registry.clone().unwrap_or_else(Registry::global);
        let explicit_id = self.memory_id.is_some();
        let run_id: Arc<str> = Arc::from(self.memory_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()));
        let _active = registry.activate(&run_id)?;
        let store =
            self.store.or_else(|| (explicit_id || self.agent.0.may_suspend()).then(|| registry.kept_store(&run_id)));
        let run_err = |message: String| AgentError::Run { run_id: run_id.to_string(), message };
        let store_err = |e: crate::StoreError| AgentError::Run { run_id: run_id.to_string(), message: e.to_string() };

        // Load what the store knows about this memory id.
        let now_ms = now_us() / 1000;
        let mut image = RunImage::new(run_id.to_string());
        let mut record = None;
        if let Some(store) = &store {
            let (topology, fingerprint) = self.agent.topology_cached();
            match store.run_dyn(&run_id).await.map_err(store_err)? {
                Some(existing) => {
                    if *existing.fingerprint != *fingerprint {
                        return Err(run_err(format!(
                            "was started by a different workflow (topology fingerprint {} in the store, {} now); \
                             refusing to resume",
                            existing.fingerprint, fingerprint
                        )));
                    }
                    image = store.load_dyn(&run_id).await.map_err(store_err)?;
                    check_state_types(&topology, &image.state).map_err(run_err)?;
                    record = Some(existing);
                }
                None => {
                    record = Some(RunRecord {
                        run_id: run_id.to_string(),
                        name: self.run_name.clone().unwrap_or_else(|| self.agent.name().to_string()),
                        fingerprint: fingerprint.to_string(),
                        status: RunStatus::Running,
                        pending: Vec::new(),
                        answers: BTreeMap::new(),
                        detail: Value::Null,
                        source: None,
                        created_at_ms: now_ms,
                        updated_at_ms: now_ms,
                        milestones: Vec::new(),
                    })
                }
            }
        }
        // A completed run starts a new turn; anything else continues where it stopped.
        let resuming = record.as_ref().is_some_and(|r| r.status != RunStatus::Completed) && image.seq > 0;
        let mut answers = record.as_ref().map(|r| r.answers.clone()).unwrap_or_default();
        answers.extend(self.answers);
        let milestone_kind = match record.as_ref().map(|r| r.status) {
            None => None,
            Some(_) if image.seq == 0 => Some("started"),
            Some(RunStatus::Completed) => Some("new_turn"),
            Some(_) => Some("resumed"),
        };
        if let (Some(rec), Some(kind)) = (record.as_mut(), milestone_kind) {
            let given = if kind == "resumed" { answers.clone() } else { BTreeMap::new() };
            rec.milestones.push(Milestone {
                at_ms: now_ms,
                kind: kind.to_string(),
                seq: image.seq,
                pending: Vec::new(),
                answers: given,
                error: None,
                path: None,
            });
        }
        if let (Some(store), Some(rec)) = (&store, record.as_mut()) {
            rec.status = RunStatus::Running;
            rec.pending.clear();
            rec.answers = answers.clone();
            rec.updated_at_ms = now_ms;
            if self.source.is_some() {
                rec.source = self.source.clone();
            }
            store.put_run_dyn(rec.clone()).await.map_err(store_err)?;
            if self.durability == Durability::Sync {
                // Async and exit durability make it durable with the first flush of a step (or the final
                // record's): a crash before then leaves the run as it was, to be continued again.
                store.flush_dyn().await.map_err(store_err)?;
            }
        }

        // Run-level events go to the run's listeners and to the root agent's own.
        let run_listeners: Arc<[ListenerRef]> =
            self.listeners.iter().chain(self.agent.0.listeners()).cloned().collect();
        let inherited: Arc<[ListenerRef]> = self.listeners.iter().cloned().collect();
        let emit_run = |event: RunEvent| crate::listener::emit(&run_listeners, &event);
        emit_run(RunEvent::ScopeCreated { run_id: run_id.to_string() });
        if resuming {
            emit_run(RunEvent::Resumed { run_id: run_id.to_string(), answers: answers.clone() });
        }
        let inputs = self.inputs;
        let mut state = std::mem::take(&mut image.state);
        state.extend(inputs.clone());
        let history = std::mem::take(&mut image.history);
        let layers = std::mem::take(&mut image.layers);
        let name = Some(registry.actor_name(&run_id));
        let scope = ScopeHandle::spawn_named(name, &run_id, state, layers, history).await?;
        // Stops the run's actors if this future is dropped before the run ends (the caller gave up).
        let mut scope_guard = StopOnDrop(Some(scope.actor().get_cell()));
        let (writer_tx, writer) = match (&store, self.durability) {
            (Some(s), Durability::Async) => {
                let (tx, rx) = futures::channel::mpsc::unbounded::<WriterMsg>();
                (Some(tx), Some(tokio::spawn(async_writer(s.clone(), rx))))
            }
            _ => (None, None),
        };
        let restore: HashMap<_, _> =
            if resuming { std::mem::take(&mut image.planners).into_iter().collect() } else { HashMap::new() };
        let run = Arc::new(RunContext::new(RunSetup {
            run_id: run_id.clone(),
            scope: scope.clone(),
            store: store.clone(),
            durability: self.durability,
            cancel: self.cancel.0.clone(),
            async_writer: writer_tx,
            first_seq: image.seq,
            restore,
            answers,
            group: registry.actor_name(&run_id),
        }));
        if run.journaling() && !inputs.is_empty() {
            // The inputs are part of the state a resume rebuilds: journal them as the turn's first step.
            let record = StepRecord {
                run_id: run_id.to_string(),
                seq: run.next_seq(),
                agent_path: INPUTS_PATH.to_string(),
                delta: inputs.into_iter().collect(),
                planner_states: Vec::new(),
                invocation: None,
                async_started: false,
                failed: false,
                item: None,
                item_end: false,
            };
            run.journal_step(record).await?;
        }

        let finished = if resuming { image.root_done.take() } else { None };
        let root = async {
            if let Some(output) = finished {
                // The root completed before the process stopped; only its status was not saved.
                return Ok(output);
            }
            if resuming {
                for path in &image.async_running {
                    restart_async(&self.agent, &run, path, inherited.clone()).await?;
                }
            }
            let (done, outcome) = tokio::sync::oneshot::channel();
            let start =
                RootStart { agent: self.agent.clone(), run: run.clone(), frame: Frame::root(inherited.clone()), done };
            scope.tell(ScopeMsg::StartRoot(Box::new(start)))?;
            let outcome = outcome.await.map_err(|_| AgentError::internal("the run's scope actor stopped"))??;
            run.wait_async().await?;
            if run.journaling() {
                let record = StepRecord {
                    run_id: run.run_id.to_string(),
                    seq: run.next_seq(),
                    agent_path: "root".to_string(),
                    delta: outcome.delta,
                    planner_states: Vec::new(),
                    invocation: outcome.record,
                    async_started: false,
                    failed: false,
                    item: None,
                    item_end: false,
                };
                run.journal_step(record).await?;
            }
            Ok::<Value, AgentError>(outcome.output)
        };
        let mut result = tokio::select! {
            r = root => r,
            () = self.cancel.0.cancelled() => Err(AgentError::Cancelled),
        };
        if let Err(AgentError::Suspended { .. }) = &result {
            // Siblings have finished; async agents finish before the run reports the suspension.
            if let Err(e) = run.wait_async().await {
                result = Err(e);
            }
        }
        if result.is_err() {
            // Stop the tree (a cancellation, or a failure with agents still running) and the async agents.
            for child in scope.actor().get_children() {
                child.kill();
            }
            run.abort_async();
        }

        // Flush what async/exit durability still holds, then record the final status.
        let buffered = run.take_exit_buffer();
        let unused_answers = run.unused_answers();
        let last_seq = run.last_seq();
        // No more steps: the async writer ends once it has appended what it holds.
        run.close_writer();
        let mut flush_err = None;
        // The writer leaves its last batch unflushed when it saw the run end: the final record's flush (or
        // the one below, when there is no record) covers it.
        let mut unflushed = false;
        if let Some(task) = writer {
            match task.await {
                Ok(Ok(left)) => unflushed = left,
                Ok(Err(e)) => flush_err = Some(AgentError::internal(format!("journal write failed: {e}"))),
                Err(e) => flush_err = Some(AgentError::internal(format!("journal writer: {e}"))),
            }
        }
        if let (true, Some(store), None) = (unflushed, &store, &record)
            && let Err(e) = store.flush_dyn().await
        {
            flush_err.get_or_insert(AgentError::internal(format!("journal write failed: {e}")));
        }
        if let (Some(store), Some(mut rec)) = (store.clone(), record) {
            for r in buffered {
                if let Err(e) = store.append_dyn(r).await {
                    flush_err.get_or_insert(AgentError::internal(format!("journal write failed: {e}")));
                }
            }
            let (kind, pending, error, path) = match &result {
                Ok(_) => ("completed", Vec::new(), None, None),
                Err(AgentError::Suspended { pending }) => {
                    ("suspended", pending.iter().map(|p| p.id.clone()).collect(), None, None)
                }
                Err(AgentError::Cancelled) => ("cancelled", Vec::new(), None, None),
                Err(e) => ("failed", Vec::new(), Some(e.to_string()), e.agent_path().map(str::to_string)),
            };
            rec.milestones.push(Milestone {
                at_ms: now_us() / 1000,
                kind: kind.to_string(),
                seq: last_seq,
                pending,
                answers: BTreeMap::new(),
                error,
                path,
            });
            (rec.status, rec.detail, rec.pending) = match &result {
                Ok(v) => (RunStatus::Completed, v.clone(), Vec::new()),
                Err(AgentError::Suspended { pending }) => (RunStatus::Suspended, Value::Null, pending.clone()),
                Err(AgentError::Cancelled) => (RunStatus::Cancelled, Value::Null, Vec::new()),
                Err(e) => (RunStatus::Failed, Value::String(e.to_string()), Vec::new()),
            };
            rec.answers = unused_answers;
            rec.updated_at_ms = now_us() / 1000;
            let saved = async {
                store.put_run_dyn(rec).await?;
                store.flush_dyn().await
            };
            if let Err(e) = saved.await {
                flush_err.get_or_insert(AgentError::internal(format!("journal: {e}")));
            }
        }
        let rid = run_id.to_string();
        let emit_end = |event: RunEvent| run.emit(&run_listeners, &event);
        emit_end(match &result {
            Ok(v) => RunEvent::Completed { run_id: rid.clone(), output: v.clone() },
            Err(AgentError::Suspended { pending }) => {
                RunEvent::Suspended { run_id: rid.clone(), pending: pending.clone() }
            }
            Err(e) => RunEvent::Failed { run_id: rid.clone(), error: e.to_string() },
        });
        emit_end(RunEvent::ScopeDestroyed { run_id: rid });
        run.end_subscriptions();
        drop(run);
        scope.close().await;
        scope_guard.0 = None;
        let result = match result {
            Ok(v) => RunResult::Completed(v),
            Err(AgentError::Suspended { pending }) => RunResult::Suspended { pending },
            Err(e) => return Err(e),
        };
        if let Some(e) = flush_err {
            return Err(e);
        }
        Ok(RunOutcome {
            run_id: run_id.to_string(),
            result,
            scope,
            agent: self.agent,
            store,
            durability: self.durability,
            registry,
        })
    }
}

/// The journal writer of async durability: appends the records as they come and flushes after each batch
/// (the records that arrived while the previous flush waited), so that the flush of step i overlaps step i+1.
/// A batch that ends with the run (the channel closed) is left for the caller's final flush, which the run
/// record needs anyway: returns whether it did so.
async fn async_writer(
    store: StoreRef,
    mut rx: futures::channel::mpsc::UnboundedReceiver<WriterMsg>,
) -> Result<bool, crate::error::StoreError> {
    use futures::StreamExt;
    let mut barriers = Vec::new();
    while let Some(msg) = rx.next().await {
        match msg {
            WriterMsg::Record(rec) => store.append_dyn(rec).await?,
            WriterMsg::Barrier(b) => barriers.push(b),
        }
        loop {
            match rx.try_recv() {
                Ok(WriterMsg::Record(more)) => store.append_dyn(more).await?,
                Ok(WriterMsg::Barrier(b)) => barriers.push(b),
                Err(futures::channel::mpsc::TryRecvError::Closed) => return Ok(true),
                Err(futures::channel::mpsc::TryRecvError::Empty) => break,
            }
        }
        for b in barriers.drain(..) {
            let _ = b.send(());
        }
        store.flush_dyn().await?;
    }
    Ok(false)
}

/// Starts again an async agent that was running when the run stopped (under the run's scope actor).
async fn restart_async(
    root: &AgentRef,
    run: &Arc<RunContext>,
    path: &str,
    listeners: Arc<[ListenerRef]>,
) -> Result<(), AgentError> {
    let mut agent = root.clone();
    for part in path.split('/').skip(1) {
        let child = part.parse::<usize>().ok().and_then(|i| agent.0.sub_agents().get(i).cloned());
        agent = child.ok_or_else(|| AgentError::Run {
            run_id: run.run_id.to_string(),
            message: format!("checkpoint names agent path `{path}` that the workflow does not have"),
        })?;
    }
    let frame = Frame::restarted_async(path, listeners);
    let parent = run.scope.actor().get_cell();
    spawn_invocation(&agent, run, frame, Report::Nobody, std::time::Duration::ZERO, parent).await.map(|_| ())
}

/// Kills an actor (and its tree) when dropped, unless disarmed by taking it out.
struct StopOnDrop(Option<ractor::ActorCell>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(cell) = self.0.take() {
            cell.kill();
        }
    }
}

/// Checks that every stored value still fits the type its agents declare.
fn check_state_types(topology: &TopologyNode, state: &Map<String, Value>) -> Result<(), String> {
    for node in topology.walk() {
        let spec = &node.spec;
        for (key, ty) in spec.declared_types() {
            if let Some(v) = state.get(key)
                && ty.coerce(v).is_none()
            {
                return Err(format!(
                    "stored value of `{key}` ({v}) no longer fits its declared type {ty} (agent `{}`); refusing to resume",
                    spec.name
                ));
            }
        }
    }
    Ok(())
}

/// Records a human answer for a suspended run in `store` (it does not run anything; resume the run after).
/// With `response_id` `None`, exactly one response must be pending. Returns the response id answered.
///
/// # Errors
/// [`AgentError::Run`] when the run is unknown, not suspended, the id is not pending, or the id is omitted
/// while several responses are pending (the message lists them).
pub async fn respond(
    store: &StoreRef,
    run_id: &str,
    response_id: Option<&str>,
    value: Value,
) -> Result<String, AgentError> {
    let err = |message: String| AgentError::Run { run_id: run_id.to_string(), message };
    let mut rec = store
        .run_dyn(run_id)
        .await
        .map_err(|e| err(e.to_string()))?
        .ok_or_else(|| err("no such run in the store".to_string()))?;
    if rec.status != RunStatus::Suspended {
        return Err(err(format!("is {}, not suspended: nothing to respond to", rec.status)));
    }
    let ids: Vec<&str> = rec.pending.iter().map(|p| p.id.as_str()).collect();
    let id = match response_id {
        Some(id) if ids.contains(&id) => id.to_string(),
        Some(id) => return Err(err(format!("no pending response `{id}` (pending: {})", ids.join(", ")))),
        None if ids.len() == 1 => ids[0].to_string(),
        None => {
            return Err(err(format!(
                "{} responses are pending ({}): name the one to answer",
                ids.len(),
                ids.join(", ")
            )));
        }
    };
    rec.answers.insert(id.clone(), value);
    rec.updated_at_ms = now_us() / 1000;
    store.put_run_dyn(rec).await.map_err(|e| err(e.to_string()))?;
    store.flush_dyn().await.map_err(|e| err(e.to_string()))?;
    Ok(id)
}

impl IntoFuture for InvokeRequest {
    type Output = Result<RunOutcome, AgentError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// Awaited inside a task, the run executes in that task. Awaited outside any task on a multi-thread
    /// runtime (`Runtime::block_on`, the body of `#[tokio::main]`), the run is spawned onto the runtime and
    /// awaited: its supervisors and their children then wake each other on the worker threads instead of
    /// crossing to the blocked caller's thread at every step (a futex wake and a context switch each way).
    /// Dropping the future aborts the spawned run as it would the inline one; a panic is resumed here.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let multi_thread = tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
            if !multi_thread || tokio::task::try_id().is_some() {
                return self.run().await;
            }
            let task = tokio::spawn(tracing::Instrument::in_current_span(self.run()));
            match tokio_util::task::AbortOnDropHandle::new(task).await {
                Ok(outcome) => outcome,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(AgentError::Cancelled),
            }
        })
    }
}
