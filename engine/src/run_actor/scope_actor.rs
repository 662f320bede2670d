//! The [`ScopeActor`]: one per run, owning the run's AgenticScope (state, history, pending async keys), and
//! the run's address: registered in ractor's registry under the run id, it takes human answers and
//! cancellations from any task of the process, and it supervises the run's root invocation — when that tree
//! dies from a bug (a planner that panics), it restarts the root from the run's journal, up to
//! [`MAX_RESTARTS`] times.
//!
//! Every write, history record and pending mark is a message ([`ScopeMsg`], reply port last); readers never
//! ask the actor: they read the snapshot it publishes after each write (a `watch` channel of [`ScopeView`]s).
//! One actor plays both the scope's and the run's part: an actor costs a few KiB of mailbox, and the two roles
//! live and die together (docs/architecture.md §2 has the measurement).

use std::sync::{Arc, OnceLock};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{oneshot, watch};

use super::answers::Answers;
use super::async_agents::AsyncAgents;
use super::compensations::{Compensations, run_compensations};
use super::message::{ChildOutcome, FinishAsync, InvocationDone, Leftovers, Report, RootStart, ScopeMsg};
use crate::budget::{Ledger, total_usage};
use crate::error::AgentError;
use crate::journal::PlannerState;
use crate::journal::{FailedUsage, InvocationRecord};
use crate::pending::PendingResponse;
use crate::scope::{ContextEntry, ScopeState, ScopeView, TypedKey};
use crate::stop::Stop;

/// How many times a run whose actor tree died from a bug is restarted from its journal before it fails with
/// the panic's message.
pub const MAX_RESTARTS: u32 = 3;

/// The scope actor of one run. See the module documentation.
pub(crate) struct ScopeActor;

/// What a [`ScopeActor`] owns.
pub(crate) struct ScopeActorState {
    scope: ScopeState,
    /// The rest of the run's state: changed only by this actor's messages.
    run: RunParts,
    shared: Arc<ScopeShared>,
    root: Option<RootState>,
    /// Subscribers that arrived before the root started.
    early_subscribers: Vec<ActorCell>,
    /// The root has reported: the run is ending.
    ended: bool,
}

struct RootState {
    start: Box<RootStart>,
    /// The actor running the root invocation (absent once it reported).
    cell: Option<ActorCell>,
    restarts: u32,
}

impl Drop for ScopeActorState {
    /// However the actor ends, the handles still held read the history it had, and subscribers that joined
    /// before the root started (a run abandoned or killed before it began) see their streams end.
    fn drop(&mut self) {
        let ended = Ended {
            history: std::mem::take(&mut self.scope.history),
            failed_usage: std::mem::take(&mut self.run.failed_usage),
        };
        let _ = self.shared.ended.set(ended);
        for subscriber in self.early_subscribers.drain(..) {
            subscriber.stop(None);
        }
    }
}

/// The parts of a run's state its actor owns besides the scope: human answers, compensations, async agents,
/// the budget ledger, and the composites a resume restores. Every change is one of the actor's messages.
#[derive(Default)]
pub(crate) struct RunParts {
    /// Human answers by response id, each used once, and the questions the run was suspended with.
    pub(crate) answers: Answers,
    /// Compensations of completed actions, in completion order.
    pub(crate) compensations: Compensations,
    /// The async agents started.
    pub(crate) async_agents: AsyncAgents,
    /// The run's budgets and what was spent under them (SPEC.md §3), when an agent has one.
    pub(crate) ledger: Option<Ledger>,
    /// The composites in progress when the run was last checkpointed, by planner key; each taken once, when
    /// the composite starts again.
    pub(crate) restore: std::collections::HashMap<String, PlannerState>,
    /// The calls journaled by the invocations in progress when the run was last checkpointed, by planner key
    /// (path and item layer); each taken once, when the invocation starts again (SPEC.md §4).
    pub(crate) calls: std::collections::HashMap<String, Vec<crate::tool_call::CallEntry>>,
    /// What the failed attempts of the run's earlier turns spent on models (a resumed run's history holds
    /// completions only; this turn's failed attempts are in its history, with their error).
    pub(crate) failed_usage: Vec<FailedUsage>,
}

/// What the handles of a scope share with its actor.
struct ScopeShared {
    memory_id: Arc<str>,
    /// The history and what failed attempts spent, once the actor has stopped.
    ended: OnceLock<Ended>,
}

/// What the handles of a scope still read once its actor has stopped.
struct Ended {
    history: Vec<InvocationRecord>,
    failed_usage: Vec<FailedUsage>,
}

/// The arguments a scope actor starts with.
pub(crate) struct ScopeArgs {
    state: ScopeState,
    run: RunParts,
    shared: Arc<ScopeShared>,
}

impl Actor for ScopeActor {
    type Msg = ScopeMsg;
    type State = ScopeActorState;
    type Arguments = ScopeArgs;

    async fn pre_start(&self, _myself: ActorRef<ScopeMsg>, args: ScopeArgs) -> Result<Self::State, ActorProcessingErr> {
        Ok(ScopeActorState {
            scope: args.state,
            run: args.run,
            shared: args.shared,
            root: None,
            early_subscribers: Vec::new(),
            ended: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ScopeMsg>,
        msg: ScopeMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ScopeMsg::Complete(done) => {
                let InvocationDone { item, delta, record, then } = *done;
                if !delta.is_empty() {
                    state.scope.apply(item.as_ref(), delta);
                }
                if let Some(record) = record {
                    state.scope.history.push(record);
                }
                match then.report {
                    Report::Root => state.root_done(then.result),
                    _ => then.deliver(&myself),
                }
            }
            ScopeMsg::Write { item, delta, reply } => {
                let _ = reply.send(state.scope.apply(item.as_ref(), delta));
            }
            ScopeMsg::DropLayers(item) => state.scope.drop_layers(&item),
            ScopeMsg::Record(record) => state.scope.history.push(*record),
            ScopeMsg::MarkPending { item, key, reply } => {
                state.scope.mark_pending(item.as_ref(), &key);
                let _ = reply.send(());
            }
            ScopeMsg::FinishAsync(finish) => {
                let FinishAsync { item, key, result, reply } = *finish;
                let _ = reply.send(state.scope.finish_async(item.as_ref(), &key, result));
            }
            ScopeMsg::History(reply) => {
                let _ = reply.send(state.scope.history.clone());
            }
            ScopeMsg::Usage { pending, reply } => {
                let _ = reply.send(total_usage(&state.scope.history, &state.run.failed_usage, &pending));
            }
            ScopeMsg::Completed { agent, path, item, reply } => {
                let _ =
                    reply.send(InvocationRecord::completed_in(&state.scope.history, &agent, &path, item.as_deref()));
            }
            ScopeMsg::Answer { id, value } => state.run.answers.give(&id, value),
            ScopeMsg::TakeAnswer { id, reply } => {
                let _ = reply.send(state.run.answers.take(&id));
            }
            ScopeMsg::PeekAnswer { id, reply } => {
                let _ = reply.send(state.run.answers.peek(&id));
            }
            ScopeMsg::AwaitAnswer { id, reply } => state.run.answers.notify_on_answer(id, reply),
            ScopeMsg::Suspension { id, reply } => {
                let _ = reply.send(state.run.answers.suspension(&id));
            }
            ScopeMsg::MarkUsed(id) => state.run.answers.mark_used(&id),
            ScopeMsg::TimedOut(pending) => state.run.answers.time_out(*pending),
            ScopeMsg::AddCompensation(c) => state.run.compensations.add(*c),
            ScopeMsg::Compensate(path) => {
                let compensations = state.run.compensations.take_below(&path);
                if !compensations.is_empty() {
                    let (me, run_id) = (myself.clone(), state.shared.memory_id.clone());
                    tokio::spawn(async move {
                        let record = |r| drop(me.cast(ScopeMsg::Record(Box::new(r))));
                        run_compensations(&run_id, compensations, record).await;
                    });
                }
            }
            ScopeMsg::TakeCompensations { path, reply } => {
                let _ = reply.send(state.run.compensations.take_below(&path));
            }
            ScopeMsg::AsyncStarted { end, actor } => state.run.async_agents.track(end, actor),
            ScopeMsg::TakeAsyncEnds(reply) => {
                let _ = reply.send(state.run.async_agents.take_ends());
            }
            ScopeMsg::AbortAsync => state.run.async_agents.abort_all(),
            ScopeMsg::Ledger(f) => {
                if let Some(ledger) = &mut state.run.ledger {
                    f(ledger);
                }
            }
            ScopeMsg::TakeRestore { key, reply } => {
                let _ = reply.send(state.run.restore.remove(&key));
            }
            ScopeMsg::TakeCalls { key, reply } => {
                let _ = reply.send(state.run.calls.remove(&key).unwrap_or_default());
            }
            ScopeMsg::Leftovers(reply) => {
                let answers = &mut state.run.answers;
                let _ = reply.send(Leftovers {
                    unused_answers: answers.unused(),
                    unresolved: answers.unresolved_suspensions(),
                    timed_out: answers.take_timed_out(),
                });
            }
            ScopeMsg::Subscribe(subscriber, reply) => {
                match &state.root {
                    Some(root) => root.start.run.join_subscriber(subscriber),
                    // Nothing more will happen: the subscription ends at once.
                    None if state.ended => subscriber.stop(None),
                    None => state.early_subscribers.push(subscriber),
                }
                let _ = reply.send(());
            }
            ScopeMsg::Cancel => {
                if let Some(root) = &state.root {
                    root.start.run.cancel();
                }
            }
            ScopeMsg::StartRoot(start) => {
                for subscriber in state.early_subscribers.drain(..) {
                    start.run.join_subscriber(subscriber);
                }
                let mut root = RootState { start, cell: None, restarts: 0 };
                // Boxed here and below: the actor's task reserves the size of its largest future for its life.
                Box::pin(root.spawn(&myself)).await;
                state.root = Some(root);
            }
            ScopeMsg::RootDone(result) => state.root_done(*result),
        }
        Ok(())
    }

    /// The root invocation's actor failed: a bug killed the run's tree (agents' own panics are handled by
    /// their supervisors; this is a planner or the engine). Restart the root from the journal, or fail.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<ScopeMsg>,
        evt: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let SupervisionEvent::ActorFailed(cell, err) = evt else { return Ok(()) };
        // Boxed: the actor's task reserves the size of its largest future for its life.
        Box::pin(state.root_failed(&myself, cell, err)).await;
        Ok(())
    }
}

impl ScopeActorState {
    /// The root's actor (`cell`) failed with `err`.
    async fn root_failed(&mut self, myself: &ActorRef<ScopeMsg>, cell: ActorCell, err: ActorProcessingErr) {
        let Some(root) = &mut self.root else { return };
        if root.cell.as_ref().map(ActorCell::get_id) != Some(cell.get_id()) {
            // An async agent (linked here once started): its failure reached its readers already.
            return;
        }
        root.cell = None;
        let error = root.start.run.tree_error(&err);
        if root.restarts >= MAX_RESTARTS || !root.start.run.restartable() {
            self.root_done(Err(error.into()));
            return;
        }
        root.restarts += 1;
        tracing::warn!(run_id = %root.start.run.run_id(), restart = root.restarts, "run tree failed ({error}); restarting from the journal");
        match Box::pin(root.start.run.reload()).await {
            Ok(image) => {
                self.run.restore = image.planners.into_iter().collect();
                self.run.calls = image.calls.into_iter().collect();
                self.scope.reset(image.state, image.layers, image.history);
                Box::pin(root.spawn(myself)).await;
            }
            Err(e) => self.root_done(Err(e.into())),
        }
    }
}

impl RootState {
    async fn spawn(&mut self, myself: &ActorRef<ScopeMsg>) {
        match self.start.run.spawn_root(myself.get_cell()).await {
            Ok(cell) => self.cell = Some(cell),
            Err(e) => {
                self.cell = None;
                let _ = myself.cast(ScopeMsg::RootDone(Box::new(Err(e.into()))));
            }
        }
    }
}

impl ScopeActorState {
    fn root_done(&mut self, result: Result<ChildOutcome, Stop>) {
        self.ended = true;
        if let Some(root) = self.root.take() {
            let _ = root.start.done.send(result);
        }
    }
}

/// A handle on a run's scope: writes go to its actor as messages, reads come from its published snapshots.
/// Cheap to clone. Once the run has ended, the snapshot and the history stay readable and writes are refused.
#[derive(Clone)]
pub struct ScopeHandle {
    actor: ActorRef<ScopeMsg>,
    rx: watch::Receiver<ScopeView>,
    shared: Arc<ScopeShared>,
}

impl std::fmt::Debug for ScopeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeHandle").field("memory_id", &self.shared.memory_id).finish()
    }
}

impl ScopeHandle {
    /// Starts the scope actor of `memory_id` holding `initial` state (not registered; it lives until
    /// [`ScopeHandle::close`]).
    ///
    /// # Errors
    /// [`AgentError::Internal`] when the actor cannot start.
    #[cfg(test)]
    pub(crate) async fn spawn(memory_id: &str, initial: Map<String, Value>) -> Result<Self, AgentError> {
        Self::spawn_named(None, memory_id, initial, Default::default(), Vec::new(), RunParts::default()).await
    }

    /// Starts the scope actor continuing an earlier run (its state, the layers of its mapper items in
    /// progress, its history, the rest of the run's state `run`), registered under `name` in ractor's
    /// registry when given.
    pub(crate) async fn spawn_named(
        name: Option<String>,
        memory_id: &str,
        initial: Map<String, Value>,
        layers: std::collections::BTreeMap<String, Map<String, Value>>,
        history: Vec<InvocationRecord>,
        run: RunParts,
    ) -> Result<Self, AgentError> {
        let (state, rx) = ScopeState::new(initial, layers, history);
        let shared = Arc::new(ScopeShared { memory_id: Arc::from(memory_id), ended: OnceLock::new() });
        // The previous run of this memory id may have been killed a moment ago (its caller gave up): its
        // actor frees the name as it stops. The registry's active mark already says no run of it is live.
        if let Some(name) = &name {
            for _ in 0..200 {
                if ractor::registry::where_is(name.clone()).is_none() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
        let args = ScopeArgs { state, run, shared: shared.clone() };
        let (actor, _) = Actor::spawn(name, ScopeActor, args).await.map_err(|e| AgentError::Run {
            run_id: memory_id.to_string(),
            message: format!("cannot start the run's scope actor: {e}"),
        })?;
        Ok(ScopeHandle { actor, rx, shared })
    }

    pub(crate) fn actor(&self) -> &ActorRef<ScopeMsg> {
        &self.actor
    }

    fn closed(&self) -> AgentError {
        AgentError::internal(format!("the scope of run `{}` is closed: the run has ended", self.shared.memory_id))
    }

    /// Sends a message that replies, and waits for the reply.
    pub(crate) async fn ask<T>(&self, msg: impl FnOnce(RpcReplyPort<T>) -> ScopeMsg) -> Result<T, AgentError>
    where
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.actor.cast(msg(tx.into())).map_err(|_| self.closed())?;
        rx.await.map_err(|_| self.closed())
    }

    /// Hands `msg` to the actor without waiting.
    pub(crate) fn tell(&self, msg: ScopeMsg) -> Result<(), AgentError> {
        self.actor.cast(msg).map_err(|_| self.closed())
    }

    /// Ends the scope: the actor stops (its name is free again when this returns); the last snapshot and the
    /// history stay readable.
    pub(crate) async fn close(&self) {
        let _ = self.actor.stop_and_wait(None, None).await;
    }

    /// The memory id (run id) this scope belongs to.
    pub fn memory_id(&self) -> &str {
        &self.shared.memory_id
    }

    /// The latest published snapshot (O(1)).
    pub fn view(&self) -> ScopeView {
        self.rx.borrow().clone()
    }

    /// Writes `delta` (a `null` value removes the key) and returns the write's sequence number; the new
    /// snapshot is published when it returns.
    ///
    /// # Errors
    /// [`AgentError::Internal`] when the run has ended (its scope is closed).
    pub async fn write(&self, delta: Vec<(String, Value)>) -> Result<u64, AgentError> {
        self.write_in(None, delta).await
    }

    /// Writes `delta` to the layer of mapper item `item` (the shared state when `None`).
    pub(crate) async fn write_in(
        &self,
        item: Option<&Arc<str>>,
        delta: Vec<(String, Value)>,
    ) -> Result<u64, AgentError> {
        let item = item.cloned();
        self.ask(|reply| ScopeMsg::Write { item, delta, reply }).await
    }

    /// The latest snapshot seen from mapper item `item`.
    pub(crate) fn view_at(&self, item: Option<&Arc<str>>) -> ScopeView {
        match item {
            None => self.view(),
            Some(_) => self.view().at_item(item),
        }
    }

    /// Writes one typed value.
    ///
    /// # Errors
    /// The value does not serialise, or the scope is closed.
    pub async fn write_typed<T: Serialize>(&self, key: &TypedKey<T>, value: &T) -> Result<u64, AgentError> {
        let v = serde_json::to_value(value).map_err(|e| AgentError::internal(format!("key `{}`: {e}", key.name())))?;
        self.write(vec![(key.name().to_string(), v)]).await
    }

    /// Marks `key` as being produced by an async agent (serving mapper item layer `item`): readers wait until
    /// it finishes.
    pub(crate) async fn mark_pending(&self, item: Option<&Arc<str>>, key: &str) -> Result<(), AgentError> {
        let item = item.cloned();
        self.ask(|reply| ScopeMsg::MarkPending { item, key: key.to_string(), reply }).await
    }

    /// Ends an async production of `key`: writes its delta (in the item's layer), or records its error for
    /// readers.
    pub(crate) async fn finish_async(
        &self,
        item: Option<&Arc<str>>,
        key: &str,
        result: Result<Vec<(String, Value)>, AgentError>,
    ) -> Result<u64, AgentError> {
        let item = item.cloned();
        self.ask(|reply| ScopeMsg::FinishAsync(Box::new(FinishAsync { item, key: key.to_string(), result, reply })))
            .await
    }

    /// Reads `key`, waiting while an async agent is still producing it.
    ///
    /// # Errors
    /// The error of the async agent that was producing `key`, with its original variant.
    pub async fn read_waiting(&self, key: &str) -> Result<Option<Value>, AgentError> {
        self.read_waiting_at(None, key).await
    }

    /// Reads `key` as seen from mapper item layer `item`, waiting while an async agent is producing it.
    pub(crate) async fn read_waiting_at(
        &self,
        item: Option<&Arc<str>>,
        key: &str,
    ) -> Result<Option<Value>, AgentError> {
        let mut rx = self.rx.clone();
        let view = rx.wait_for(|v| !v.at_item(item).is_pending(key)).await.map_err(|_| self.closed())?;
        let view = view.at_item(item);
        if let Some(e) = view.async_error(key) {
            return Err(e.clone());
        }
        Ok(view.get(key).cloned())
    }

    /// A snapshot taken once no async agent is producing any key (at once when none is).
    ///
    /// # Errors
    /// [`AgentError::Internal`] when the scope closed first.
    pub async fn settled(&self) -> Result<ScopeView, AgentError> {
        let mut rx = self.rx.clone();
        let view = rx.wait_for(|v| !v.has_pending()).await.map_err(|_| self.closed())?;
        Ok(view.clone())
    }

    /// Appends an invocation to the history (ordered with the writes).
    pub fn record(&self, rec: InvocationRecord) {
        let _ = self.tell(ScopeMsg::Record(Box::new(rec)));
    }

    /// The invocation history, in completion order.
    ///
    /// # Errors
    /// None once the run has ended (the history is kept); [`AgentError::Internal`] if the actor died.
    pub async fn history(&self) -> Result<Vec<InvocationRecord>, AgentError> {
        if let Some(ended) = self.shared.ended.get() {
            return Ok(ended.history.clone());
        }
        match self.ask(ScopeMsg::History).await {
            Ok(h) => Ok(h),
            Err(e) => self.shared.ended.get().map(|ended| ended.history.clone()).ok_or(e),
        }
    }

    /// What the run spent on models so far in all — the `total` of [`crate::budget::usage_by_agent`] over the
    /// stored image, with the models called — from the invocations that ended (failed attempts included) and
    /// those suspended at a budget among `pending` (the run's questions), without reading the store.
    ///
    /// # Errors
    /// None once the run has ended; [`AgentError::Internal`] if the actor died.
    pub async fn usage(&self, pending: &[PendingResponse]) -> Result<crate::usage::Usage, AgentError> {
        let from_ended = |ended: &Ended| total_usage(&ended.history, &ended.failed_usage, pending);
        if let Some(ended) = self.shared.ended.get() {
            return Ok(from_ended(ended));
        }
        let asked = pending.to_vec();
        match self.ask(|reply| ScopeMsg::Usage { pending: asked, reply }).await {
            Ok(usage) => Ok(usage),
            Err(e) => self.shared.ended.get().map(from_ended).ok_or(e),
        }
    }

    /// The run's trajectory ([`InvocationRecord::trajectory`]), without copying the history once the run has
    /// ended.
    ///
    /// # Errors
    /// None once the run has ended; [`AgentError::Internal`] if the actor died.
    pub async fn trajectory(&self) -> Result<Vec<String>, AgentError> {
        if let Some(ended) = self.shared.ended.get() {
            return Ok(InvocationRecord::trajectory(&ended.history));
        }
        Ok(InvocationRecord::trajectory(&self.history().await?))
    }

    /// How many invocations of `agent` at `path` for mapper item `item` completed without error so far
    /// ([`InvocationRecord::completed_in`]): O(history), asked only for an idempotency key.
    ///
    /// # Errors
    /// [`AgentError::Internal`] if the actor died.
    pub(crate) async fn completed(
        &self,
        agent: Arc<str>,
        path: Arc<str>,
        item: Option<Arc<str>>,
    ) -> Result<u32, AgentError> {
        if let Some(ended) = self.shared.ended.get() {
            return Ok(InvocationRecord::completed_in(&ended.history, &agent, &path, item.as_deref()));
        }
        let (a, p, i) = (agent.clone(), path.clone(), item.clone());
        match self.ask(|reply| ScopeMsg::Completed { agent: a, path: p, item: i, reply }).await {
            Ok(n) => Ok(n),
            Err(e) => {
                let ended = self.shared.ended.get().ok_or(e)?;
                Ok(InvocationRecord::completed_in(&ended.history, &agent, &path, item.as_deref()))
            }
        }
    }

    /// The conversation context: the last exchange of each LLM agent, most recent last. It lives in the state
    /// under `_context.<agent>` keys, so it is journaled and survives a resume.
    pub fn context(&self) -> Vec<ContextEntry> {
        self.view().context()
    }
}
