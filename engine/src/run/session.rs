//! A run session: what awaiting an [`InvokeRequest`](super::InvokeRequest) does, in three parts.
//!
//! - [`RunSession::open`]: load what the store knows of the memory id (a new run, a resume from the last
//!   checkpoint, or a new turn of a completed run), record the run as running, start the run's scope actor
//!   (registered under the run id) and journal the turn's inputs.
//! - [`RunSession::execute`]: start the root invocation under the scope actor and wait for its result, or
//!   for a cancellation; the run does not end before its async agents. A drain needs nothing here: the
//!   supervisors hold their next calls and the root reports [`Stop::Drained`](crate::Stop::Drained) once nothing runs.
//! - [`RunSession::close`]: stop what still runs after a failure, flush the journal, record the status, end
//!   the event subscriptions and stop the scope actor.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value};

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use futures::future::BoxFuture;
use ractor::{ActorCell, ActorProcessingErr};

use super::registry::{ActiveGuard, Registry};
use super::request::{CancelHandle, INPUTS_PATH, InvokeRequest, RunOutcome, RunResult};
use super::spawn::{spawn_invocation, tree_error};
use crate::agent::AgentRef;
use crate::agent_spec::TopologyNode;
use crate::error::AgentError;
use crate::journal::AsyncInItem;
use crate::listener::{ListenerRef, RunEvent};
use crate::pending::PendingResponse;
use crate::run_actor::Answers;
use crate::run_actor::Frame;
use crate::run_actor::now_us;
use crate::run_actor::{ChildOutcome, Leftovers, Report, RootRun, RootStart, ScopeMsg};
use crate::run_actor::{HandleArgs, RunHandle};
use crate::run_actor::{RunParts, ScopeHandle};
use crate::status::RunStatus;
use crate::stop::Stop;
use crate::store::{Durability, Milestone, MilestoneKind, RunImage, RunRecord, StepRecord, StoreRef};

/// One run between its request and its outcome. See the module documentation.
pub(crate) struct RunSession {
    agent: AgentRef,
    registry: Registry,
    store: Option<StoreRef>,
    durability: Durability,
    cancel: CancelHandle,
    run_id: Arc<str>,
    /// The run record (when the run is journaled); boxed, as it is read only at the start and the end.
    record: Option<Box<RunRecord>>,
    run: RunHandle,
    scope: ScopeHandle,
    /// Stops the run's actors if the session is dropped before it closes (the caller gave up).
    scope_guard: StopOnDrop,
    /// Run-level events go to the run's listeners and to the root agent's own.
    run_listeners: Arc<[ListenerRef]>,
    /// The listeners every invocation inherits.
    inherited: Arc<[ListenerRef]>,
    /// The root's result when the journal ends with it (the process stopped before saving the status).
    finished: Option<Value>,
    /// Async agents that were running when the run stopped (their path; their mapper item, when in one):
    /// started again.
    async_running: Vec<(String, Option<AsyncInItem>)>,
    _active: ActiveGuard,
}

impl RunSession {
    /// Opens the run of `req`. See the module documentation.
    ///
    /// # Errors
    /// [`AgentError::Run`] when the memory id is active, its workflow changed or a stored value no longer fits
    /// its type; [`AgentError::Store`] (a cause of origin `store`) when the store fails.
    pub(crate) async fn open(req: InvokeRequest) -> Result<RunSession, AgentError> {
        let registry = req.registry.clone().unwrap_or_else(Registry::global);
        let explicit_id = req.memory_id.is_some();
        let run_id: Arc<str> = Arc::from(req.memory_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()));
        let active = registry.activate(&run_id)?;
        let store =
            req.store.or_else(|| (explicit_id || req.agent.0.may_suspend()).then(|| registry.kept_store(&run_id)));
        let run_err = |message: String| AgentError::Run { run_id: run_id.to_string(), message };
        let store_err = |e: crate::StoreError| AgentError::Store { run_id: run_id.to_string(), cause: e.into() };

        // Load what the store knows about this memory id.
        let now_ms = now_us() / 1000;
        let mut image = RunImage::new(run_id.to_string());
        let mut record = None;
        if let Some(store) = &store {
            let (topology, fingerprint) = req.agent.topology_cached();
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
                        name: req.run_name.clone().unwrap_or_else(|| req.agent.name().to_string()),
                        fingerprint: fingerprint.to_string(),
                        status: RunStatus::Running,
                        pending: Vec::new(),
                        answers: BTreeMap::new(),
                        detail: Value::Null,
                        source: None,
                        spec_hash: None,
                        cancel_requested: false,
                        created_at_ms: now_ms,
                        updated_at_ms: now_ms,
                        milestones: Vec::new(),
                        forked_from: None,
                        timed_out: Vec::new(),
                        tenant: req.tenant.clone(),
                        answered_by: BTreeMap::new(),
                    })
                }
            }
        }
        // A completed run starts a new turn; anything else continues where it stopped.
        let resuming = record.as_ref().is_some_and(|r| r.status != RunStatus::Completed) && image.seq > 0;
        // The suspensions that carry agent data (a remote task's ids), a deadline or a timer stay in the record
        // until answered and used, whatever happens to this resumption (a failure, a crash): their askers read
        // them back.
        let suspensions: Vec<PendingResponse> = record
            .as_ref()
            .map(|r| r.pending.iter().filter(|p| p.kept_on_resume()).cloned().collect())
            .unwrap_or_default();
        // An answer to a suspended run must name one of its pending responses (a typo is an error, not an
        // answer silently kept for a question never asked).
        if let Some(rec) = record.as_ref().filter(|r| r.status == RunStatus::Suspended) {
            for id in req.answers.keys() {
                super::request::answerable(rec, Some(id))?;
            }
        }
        let mut answers = record.as_ref().map(|r| r.answers.clone()).unwrap_or_default();
        answers.extend(req.answers);
        let milestone_kind = match record.as_ref().map(|r| r.status) {
            None => None,
            Some(_) if image.seq == 0 => Some(MilestoneKind::Started),
            Some(RunStatus::Completed) => Some(MilestoneKind::NewTurn),
            Some(_) => Some(MilestoneKind::Resumed),
        };
        if let (Some(rec), Some(kind)) = (record.as_mut(), milestone_kind) {
            let given = if kind == MilestoneKind::Resumed { answers.clone() } else { BTreeMap::new() };
            rec.milestones.push(Milestone {
                at_ms: now_ms,
                kind,
                seq: image.seq,
                pending: Vec::new(),
                answers: given,
                error: None,
                path: None,
                forked_from: None,
            });
        }
        if let Some(rec) = record.as_mut() {
            rec.status = RunStatus::Running;
            rec.pending = suspensions.clone();
            rec.answers = answers.clone();
            rec.updated_at_ms = now_ms;
            if req.source.is_some() {
                rec.source = req.source.clone();
            }
            if req.spec_hash.is_some() {
                rec.spec_hash = req.spec_hash.clone();
            }
        }

        // Run-level events go to the run's listeners and to the root agent's own.
        let run_listeners: Arc<[ListenerRef]> = req.listeners.iter().chain(req.agent.0.listeners()).cloned().collect();
        let inherited: Arc<[ListenerRef]> = req.listeners.iter().cloned().collect();
        let emit_run = |event: RunEvent| crate::listener::emit(&run_listeners, &event);
        emit_run(RunEvent::ScopeCreated { run_id: run_id.to_string() });
        if resuming {
            emit_run(RunEvent::Resumed { run_id: run_id.to_string(), answers: answers.clone() });
        }
        let inputs = req.inputs;
        let mut state = std::mem::take(&mut image.state);
        state.extend(inputs.clone());
        let history = std::mem::take(&mut image.history);
        let budgets = budgets_of(&req.agent);
        let ledger =
            crate::budget::Ledger::for_run(budgets, &history, &image.failed_usage, &state, &suspensions, &image.calls);
        let layers = std::mem::take(&mut image.layers);
        let name = Some(registry.actor_name(&run_id));
        let restore: HashMap<_, _> =
            if resuming { std::mem::take(&mut image.planners).into_iter().collect() } else { HashMap::new() };
        let calls: HashMap<_, _> =
            if resuming { std::mem::take(&mut image.calls).into_iter().collect() } else { HashMap::new() };
        let (budgets, restoring) = (ledger.is_some(), !restore.is_empty() || !calls.is_empty());
        let failed_usage = std::mem::take(&mut image.failed_usage);
        let answers = Answers::new(answers, suspensions);
        let parts = RunParts { answers, ledger, restore, calls, failed_usage, ..RunParts::default() };
        let scope = ScopeHandle::spawn_named(name, &run_id, state, layers, history, parts).await?;
        // Stops the run's actors if this future is dropped before the run ends (the caller gave up).
        let scope_guard = StopOnDrop(Some((scope.actor().get_cell(), registry.actor_name(&run_id))));
        let run = RunHandle::new(HandleArgs {
            run_id: run_id.clone(),
            scope: scope.clone(),
            store: store.clone(),
            durability: req.durability,
            cancel: req.cancel.0.clone(),
            // Without a journal a drained run could not continue: it runs to its end.
            drain: req.drain.filter(|_| store.is_some()).map(|d| d.0),
            first_seq: image.seq,
            group: registry.actor_name(&run_id),
            traceparent: req.traceparent,
            tape: req.tape,
            budgets,
            restoring,
        });
        if run.journal.enabled() && !inputs.is_empty() {
            // The inputs are part of the state a resume rebuilds: journal them as the turn's first step.
            let record = StepRecord {
                delta: inputs.into_iter().collect(),
                ..StepRecord::new(&*run_id, run.journal.next_seq(), INPUTS_PATH)
            };
            match &store {
                // Appended with the run record and made durable by the same flush below, whatever the
                // durability: a crash never leaves one without the other.
                Some(store) => store.append_dyn(record).await.map_err(store_err)?,
                None => run.journal.step(record).await?,
            }
        }
        // The record says `running` only once the inputs are in the journal: a crash in between must not
        // leave a run that a restart would continue without them. One flush makes the run exist on disk
        // (what a server's `201` promises); the durability mode governs the steps after it.
        if let (Some(store), Some(rec)) = (&store, record.as_ref()) {
            store.put_run_dyn(rec.clone()).await.map_err(store_err)?;
            store.flush_run_dyn(&rec.run_id).await.map_err(store_err)?;
        }

        let finished = if resuming { image.root_done.take() } else { None };
        let async_running = if resuming {
            // As many restarts at a path (and item) as were running there.
            let top = std::mem::take(&mut image.async_running)
                .into_iter()
                .flat_map(|(path, n)| std::iter::repeat_n((path, None), n as usize));
            let in_items = std::mem::take(&mut image.async_in_items)
                .into_values()
                .flat_map(|a| std::iter::repeat_n((a.path.clone(), Some(a.clone())), a.running as usize));
            top.chain(in_items).collect()
        } else {
            Vec::new()
        };
        Ok(RunSession {
            agent: req.agent,
            registry,
            store,
            durability: req.durability,
            cancel: req.cancel,
            run_id,
            record: record.map(Box::new),
            run,
            scope,
            scope_guard,
            run_listeners,
            inherited,
            finished,
            async_running,
            _active: active,
        })
    }

    /// Executes the run to its result. See the module documentation.
    pub(crate) async fn execute(&mut self) -> Result<Value, Stop> {
        let run = &self.run;
        // `close` writes the final record and flushes: the root's completion can ride on that flush.
        let final_record = self.record.is_some() && self.store.is_some();
        let root = async {
            if let Some(output) = self.finished.take() {
                // The root completed before the process stopped; only its status was not saved.
                return Ok::<Value, Stop>(output);
            }
            // The rare and the final steps boxed: thousands of runs wait at `outcome` below, each future
            // reserving the size of its largest state for its whole life.
            for (path, in_item) in std::mem::take(&mut self.async_running) {
                let frame = Frame::restarted_async(&path, in_item.as_ref(), self.inherited.clone());
                Box::pin(restart_async(&self.agent, run, frame)).await?;
            }
            let (done, outcome) = tokio::sync::oneshot::channel();
            let root = Root { agent: self.agent.clone(), run: run.clone(), frame: Frame::root(self.inherited.clone()) };
            let start = RootStart { run: Arc::new(root), done };
            self.scope.tell(ScopeMsg::StartRoot(Box::new(start)))?;
            let outcome = outcome.await.map_err(|_| AgentError::internal("the run's scope actor stopped"))??;
            Ok(Box::pin(finish_root(run, outcome, final_record)).await?)
        };
        // Cancel first: a run resumed with an already cancelled handle starts no step.
        let mut result = tokio::select! {
            biased;
            () = self.cancel.0.cancelled() => Err(AgentError::Cancelled.into()),
            r = root => r,
        };
        if result.as_ref().is_err_and(Stop::stays) {
            // Siblings have finished; async agents finish before the run reports the suspension or the drain
            // (a cancel still stops them).
            let waited = tokio::select! {
                r = run.wait_async_agents() => r,
                () = self.cancel.0.cancelled() => Err(AgentError::Cancelled),
            };
            if let Err(e) = waited {
                result = Err(e.into());
            }
        }
        if result.is_err() {
            // Stop the tree (a cancellation, or a failure with agents still running) and the async agents.
            // Waited for: a compensating composite stopped before it decided tells the run's actor to undo
            // what completed below it, and the actor must hear it before the run closes.
            for child in self.scope.actor().get_children() {
                let _ = child.kill_and_wait(Some(std::time::Duration::from_secs(5))).await;
            }
            run.abort_async_agents();
        }
        result
    }

    /// Closes the run with `result` and makes its outcome. See the module documentation.
    ///
    /// # Errors
    /// The run's error; else a journal write that failed.
    pub(crate) async fn close(self, result: Result<Value, Stop>) -> Result<RunOutcome, AgentError> {
        let RunSession {
            agent,
            registry,
            store,
            durability,
            run_id,
            record,
            run,
            scope,
            mut scope_guard,
            run_listeners,
            ..
        } = self;
        // Flush what async/exit durability still holds, then record the final status.
        let buffered = run.journal.take_exit_buffer();
        let Leftovers { unused_answers, unresolved, timed_out } = run.leftovers().await;
        let last_seq = run.journal.last_seq();
        let mut flush_err = None;
        // No more steps: async durability's flusher ends, and leaves the last steps uncommitted when it saw the
        // run end: the final record's flush (or the one below, when there is no record) covers them.
        let mut unflushed = false;
        if let Some(task) = run.journal.close_flusher() {
            match task.await {
                Ok(Ok(left)) => unflushed = left,
                Ok(Err(e)) => flush_err = Some(AgentError::internal(format!("journal write failed: {e}"))),
                Err(e) => flush_err = Some(AgentError::internal(format!("journal writer: {e}"))),
            }
        }
        if let (true, Some(store), None) = (unflushed, &store, &record)
            && let Err(e) = store.flush_run_dyn(&run_id).await
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
                Ok(_) => (MilestoneKind::Completed, Vec::new(), None, None),
                Err(Stop::Suspended(pending)) => {
                    (MilestoneKind::Suspended, pending.iter().map(|p| p.id.clone()).collect(), None, None)
                }
                Err(Stop::Failed(AgentError::Cancelled)) => (MilestoneKind::Cancelled, Vec::new(), None, None),
                // Drained: still running as far as the store knows; the milestone marks where it stopped.
                Err(Stop::Drained) => (MilestoneKind::Interrupted, Vec::new(), None, None),
                Err(Stop::Failed(e)) => {
                    (MilestoneKind::Failed, Vec::new(), Some(e.to_string()), e.agent_path().map(str::to_string))
                }
            };
            rec.milestones.push(Milestone {
                at_ms: now_us() / 1000,
                kind,
                seq: last_seq,
                pending,
                answers: BTreeMap::new(),
                error,
                path,
                forked_from: None,
            });
            (rec.status, rec.detail, rec.pending) = match &result {
                Ok(v) => (RunStatus::Completed, v.clone(), Vec::new()),
                Err(Stop::Suspended(pending)) => (RunStatus::Suspended, Value::Null, pending.clone()),
                Err(Stop::Failed(AgentError::Cancelled)) => (RunStatus::Cancelled, Value::Null, unresolved.clone()),
                Err(Stop::Drained) => (RunStatus::Running, Value::Null, unresolved.clone()),
                Err(Stop::Failed(e)) => (RunStatus::Failed, Value::String(e.to_string()), unresolved.clone()),
            };
            rec.answers = unused_answers;
            rec.timed_out.extend(timed_out);
            rec.updated_at_ms = now_us() / 1000;
            let saved = async {
                let run_id = rec.run_id.clone();
                store.put_run_dyn(*rec).await?;
                store.flush_run_dyn(&run_id).await
            };
            if let Err(e) = saved.await {
                flush_err.get_or_insert(AgentError::internal(format!("journal: {e}")));
            }
        }
        if let Err(Stop::Failed(AgentError::Cancelled)) = &result {
            withdraw_questions(&agent, unresolved).await;
        }
        let rid = run_id.to_string();
        let emit_end = |event: RunEvent| run.subscribers.emit(&run_listeners, &event);
        emit_end(match &result {
            Ok(v) => RunEvent::Completed { run_id: rid.clone(), output: v.clone() },
            Err(Stop::Suspended(pending)) => RunEvent::Suspended { run_id: rid.clone(), pending: pending.clone() },
            Err(Stop::Drained) => RunEvent::Drained { run_id: rid.clone() },
            Err(Stop::Failed(e)) => RunEvent::Failed { run_id: rid.clone(), error: e.to_string() },
        });
        emit_end(RunEvent::ScopeDestroyed { run_id: rid });
        run.subscribers.end();
        drop(run);
        scope.close().await;
        scope_guard.0 = None;
        let result = match result {
            Ok(v) => RunResult::Completed(v),
            Err(Stop::Suspended(pending)) => RunResult::Suspended { pending },
            Err(Stop::Drained) => RunResult::Drained,
            Err(Stop::Failed(e)) => return Err(e),
        };
        if let Some(e) = flush_err {
            return Err(e);
        }
        Ok(RunOutcome { run_id: run_id.to_string(), result, scope, agent, store, durability, registry })
    }
}

/// The budgets of the agents in the tree rooted at `root` (SPEC.md §3), by path, nothing spent yet.
fn budgets_of(root: &AgentRef) -> Vec<crate::budget::Tracked> {
    fn collect(agent: &AgentRef, path: String, out: &mut Vec<crate::budget::Tracked>) {
        for (i, c) in agent.0.sub_agents().iter().enumerate() {
            collect(c, format!("{path}/{i}"), out);
        }
        if let Some(budget) = agent.spec().budget {
            let agent = agent.spec().name.clone();
            out.push(crate::budget::Tracked { path, agent, budget, used: Default::default() });
        }
    }
    let mut out = Vec::new();
    collect(root, "root".to_string(), &mut out);
    out
}

/// After the root's outcome: waits for the async agents, then journals the root's completion (with the final
/// record when `final_record`); returns the run's output.
async fn finish_root(run: &RunHandle, outcome: ChildOutcome, final_record: bool) -> Result<Value, AgentError> {
    run.wait_async_agents().await?;
    if final_record {
        run.journal.root_completion(outcome.delta, outcome.record, outcome.calls).await?;
    } else {
        run.journal.completion("root", None, outcome.delta, outcome.record, outcome.calls).await?;
    }
    Ok(outcome.output)
}

/// Starts again an async agent that was running when the run stopped (under the run's scope actor), and waits
/// until it has started: its output key is then pending, so the root started next waits for it instead of
/// missing it.
async fn restart_async(root: &AgentRef, run: &RunHandle, frame: Frame) -> Result<(), Stop> {
    let path = frame.path.clone();
    let mut agent = root.clone();
    for part in path.split('/').skip(1) {
        let child = part.parse::<usize>().ok().and_then(|i| agent.0.sub_agents().get(i).cloned());
        agent = child.ok_or_else(|| AgentError::Run {
            run_id: run.run_id.to_string(),
            message: format!("checkpoint names agent path `{path}` that the workflow does not have"),
        })?;
    }
    let parent = run.scope.actor().get_cell();
    let (started, start) = tokio::sync::oneshot::channel();
    spawn_invocation(&agent, run, frame, Report::Bare(started), std::time::Duration::ZERO, parent).await?;
    start
        .await
        .map_err(|_| AgentError::internal(format!("the async agent at `{path}` stopped before it started")))?
        .map(|_| ())
}

/// The run's root as its scope actor supervises it ([`RootRun`]): the agent, the run, the root's frame.
struct Root {
    agent: AgentRef,
    run: RunHandle,
    frame: Frame,
}

impl RootRun for Root {
    fn run_id(&self) -> &str {
        &self.run.run_id
    }

    fn join_subscriber(&self, subscriber: ActorCell) {
        self.run.subscribers.join(subscriber);
    }

    fn cancel(&self) {
        self.run.cancel.cancel();
    }

    fn spawn_root(&self, supervisor: ActorCell) -> BoxFuture<'_, Result<ActorCell, AgentError>> {
        Box::pin(async move {
            let (agent, frame) = (&self.agent, self.frame.clone());
            let spawned =
                spawn_invocation(agent, &self.run, frame, Report::Root, std::time::Duration::ZERO, supervisor);
            spawned.await.map(|s| s.cell())
        })
    }

    fn tree_error(&self, err: &ActorProcessingErr) -> AgentError {
        tree_error(err, &self.agent, &self.frame.path)
    }

    fn restartable(&self) -> bool {
        self.run.journal.enabled()
    }

    fn reload(&self) -> BoxFuture<'_, Result<RunImage, AgentError>> {
        Box::pin(async move {
            let image = self.run.journal.reload().await?;
            // The actor takes the image's planners: the composites that start again ask it for theirs.
            self.run.restoring();
            Ok(image)
        })
    }
}

/// Kills the run's scope actor (and its tree) when dropped, unless disarmed by taking it out, and ends the
/// run's event subscriptions (the members of its process group, named as the run's actor).
struct StopOnDrop(Option<(ractor::ActorCell, String)>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some((cell, group)) = self.0.take() {
            cell.kill();
            for member in ractor::pg::get_members(&group) {
                let _ = member.drain();
            }
        }
    }
}

/// Checks that every stored value still fits the type its agents declare.
fn check_state_types(topology: &TopologyNode, state: &Map<String, Value>) -> Result<(), String> {
    for node in topology.walk() {
        let spec = &node.spec;
        for d in spec.declared_types() {
            let (key, ty) = (d.key, d.value_type);
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

/// A cancelled run's open questions withdrawn by the agents that asked them ([`crate::Agent::withdraw`]), each
/// for at most [`crate::agent::WITHDRAW_TIMEOUT`].
async fn withdraw_questions(root: &AgentRef, open: Vec<PendingResponse>) {
    for pending in open {
        let Some(asker) = root.find(&pending.agent) else { continue };
        if tokio::time::timeout(crate::agent::WITHDRAW_TIMEOUT, asker.0.withdraw_dyn(&pending)).await.is_err() {
            tracing::warn!(agent = %pending.agent, response = %pending.id, "withdrawing the open question timed out");
        }
    }
}

impl InvokeRequest {
    /// Boxed `self`: a future keeps its arguments for its whole life.
    async fn run(self: Box<Self>) -> Result<RunOutcome, AgentError> {
        let span = self.workflow_span();
        let session = async {
            // Opening and closing boxed: a future reserves the size of its largest state for its whole life,
            // and thousands of runs wait in `execute`.
            let mut session = Box::pin(RunSession::open(*self)).await?;
            span.record("agentic.run_id", &*session.run_id);
            let result = session.execute().await;
            Box::pin(session.close(result)).await
        };
        let outcome = tracing::Instrument::instrument(session, span.clone()).await;
        if !span.is_disabled() {
            record_outcome(&span, &outcome);
        }
        outcome
    }

    /// The run's span (one per run or resumption, the parent of the root's `invoke_agent`), named and
    /// attributed as the OpenTelemetry GenAI conventions name a workflow invocation; under the request's
    /// remote parent, if it has one. Nothing is formatted when no subscriber wants the span.
    fn workflow_span(&self) -> tracing::Span {
        let name = self.run_name.as_deref().unwrap_or_else(|| self.agent.name());
        let span = tracing::info_span!(
            "invoke_workflow",
            "otel.name" = format_args!("invoke_workflow {name}"),
            "gen_ai.operation.name" = "invoke_workflow",
            "gen_ai.workflow.name" = name,
            "agentic.run_id" = tracing::field::Empty,
            "agentic.run.status" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        if let Some(traceparent) = &self.traceparent {
            crate::trace_context::set_remote_parent(&span, traceparent);
        }
        span
    }
}

/// How the run of `span` ended: `agentic.run.status`, and `error.type` with an error status on a failure.
fn record_outcome(span: &tracing::Span, outcome: &Result<RunOutcome, AgentError>) {
    let status = match outcome {
        Ok(o) => match o.result {
            RunResult::Completed(_) => "completed",
            RunResult::Suspended { .. } => "suspended",
            RunResult::Drained => "drained",
        },
        Err(AgentError::Cancelled) => "cancelled",
        Err(_) => "failed",
    };
    span.record("agentic.run.status", status);
    if let Err(e) = outcome {
        span.record("error.type", e.kind());
        span.record("otel.status_code", "error");
    }
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
        let this = Box::new(self);
        Box::pin(async move {
            let multi_thread = tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
            if !multi_thread || tokio::task::try_id().is_some() {
                return this.run().await;
            }
            let task = tokio::spawn(tracing::Instrument::in_current_span(this.run()));
            match tokio_util::task::AbortOnDropHandle::new(task).await {
                Ok(outcome) => outcome,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(AgentError::Cancelled),
            }
        })
    }
}
