//! [`RunHandle`]: what every invocation of one run holds — the run's id, its actor's handle, its cancellation
//! and drain signals, its journal's writer, its event subscribers — and the requests an invocation makes of
//! the run's actor (answers, compensations, async agents, budgets), which owns that state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ractor::ActorCell;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::async_agents::{AsyncEnd, wait_ends};
use super::compensations::{Compensation, run_compensations};
use super::message::{Leftovers, ScopeMsg};
use super::scope_actor::ScopeHandle;
use super::step_journal::StepJournal;
use super::subscribers::Subscribers;
use super::util::now_us;
use crate::budget::Ledger;
use crate::error::AgentError;
use crate::pending::PendingResponse;
use crate::store::{Durability, PlannerState, StoreRef};

/// How often a pending-mode human step reads its run's stored record for an answer ([`RunShared::ask_and_wait`]).
const ANSWER_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// What every invocation of one run holds: the run's id, its actor (the scope's handle: the run's answers,
/// compensations, async agents, budgets and the composites a resume restores are that actor's state, reached
/// through its messages), its cancellation and drain signals, its journal's writer, its event subscribers and
/// its trace context. Cheap to clone; nothing here changes the run but through the journal or the actor.
#[derive(Clone)]
pub(crate) struct RunHandle(Arc<RunShared>);

impl std::ops::Deref for RunHandle {
    type Target = RunShared;

    fn deref(&self) -> &RunShared {
        &self.0
    }
}

/// What the holders of a [`RunHandle`] share: read-only but for the journal's writer and the flags that
/// spare an invocation a message to the actor.
pub(crate) struct RunShared {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) cancel: CancellationToken,
    /// The drain handle's token, when the request has one: once cancelled, supervisors start no new call.
    drain: Option<CancellationToken>,
    /// The run's steps on their way to the store.
    pub(crate) journal: StepJournal,
    /// The run's event subscribers ([`super::Registry::subscribe`]).
    pub(crate) subscribers: Subscribers,
    /// The W3C `traceparent` the run was started under ([`super::InvokeRequest::traceparent`]).
    pub(crate) traceparent: Option<Arc<str>>,
    /// Whether an agent of the run has a budget: only then do model calls ask the actor's ledger.
    pub(crate) budgets: bool,
    /// What the run records its model and tool calls on and answers them from ([`crate::CallTape`]).
    pub(crate) tape: Option<Arc<crate::recording::CallTape>>,
    /// Whether an async agent was started (the run's last step then cannot ride on its final commit).
    async_started: AtomicBool,
    /// Whether the actor may hold the saved state of composites in progress (a resume, a restart of the
    /// tree): only then does a starting composite ask for it.
    may_restore: AtomicBool,
}

/// What a run's handle starts with.
pub(crate) struct HandleArgs {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) store: Option<StoreRef>,
    pub(crate) durability: Durability,
    pub(crate) cancel: CancellationToken,
    pub(crate) drain: Option<CancellationToken>,
    pub(crate) first_seq: u64,
    /// The run's process group of event subscribers.
    pub(crate) group: String,
    /// The W3C `traceparent` the run was started under.
    pub(crate) traceparent: Option<Arc<str>>,
    /// Whether an agent of the run has a budget (the actor holds the ledger).
    pub(crate) budgets: bool,
    /// The run's call tape.
    pub(crate) tape: Option<Arc<crate::recording::CallTape>>,
    /// Whether the actor was given composites or journaled calls to restore.
    pub(crate) restoring: bool,
}

impl RunHandle {
    /// The handle of a run starting with `setup`.
    pub(crate) fn new(setup: HandleArgs) -> Self {
        RunHandle(Arc::new(RunShared {
            journal: StepJournal::new(setup.run_id.clone(), setup.store, setup.durability, setup.first_seq),
            run_id: setup.run_id,
            scope: setup.scope,
            cancel: setup.cancel,
            drain: setup.drain,
            subscribers: Subscribers::new(setup.group),
            traceparent: setup.traceparent,
            budgets: setup.budgets,
            tape: setup.tape,
            async_started: AtomicBool::new(false),
            may_restore: AtomicBool::new(setup.restoring),
        }))
    }
}

impl RunShared {
    /// Sends `msg` to the run's actor (dropped once the run has ended).
    fn tell(&self, msg: ScopeMsg) {
        let _ = self.scope.tell(msg);
    }

    /// Uses the human answer to response `id`, if one was given.
    pub(crate) async fn take_answer(&self, id: &str) -> Option<Value> {
        let id = id.to_string();
        self.scope.ask(|reply| ScopeMsg::TakeAnswer { id, reply }).await.ok().flatten()
    }

    /// The human answer to response `id`, if one was given, without using it.
    pub(crate) async fn peek_answer(&self, id: &str) -> Option<Value> {
        let id = id.to_string();
        self.scope.ask(|reply| ScopeMsg::PeekAnswer { id, reply }).await.ok().flatten()
    }

    /// The question with agent data the run was suspended with under `id`, while its answer is unused.
    pub(crate) async fn suspension(&self, id: &str) -> Option<PendingResponse> {
        let id = id.to_string();
        self.scope.ask(|reply| ScopeMsg::Suspension { id, reply }).await.ok().flatten()
    }

    /// No answer is taken for `id` any more (used elsewhere, or its question dealt with unanswered).
    pub(crate) fn mark_used(&self, id: &str) {
        self.tell(ScopeMsg::MarkUsed(id.to_string()));
    }

    /// Question `pending` timed out and was acted on.
    pub(crate) fn time_out(&self, pending: PendingResponse) {
        self.tell(ScopeMsg::TimedOut(Box::new(pending)));
    }

    /// Returns once an answer to `id` has been given in-process (it may have been used since).
    async fn answer_given(&self, id: &str) {
        let id = id.to_string();
        if self.scope.ask(|reply| ScopeMsg::AwaitAnswer { id, reply }).await.is_err() {
            // The run has ended: nothing will arrive.
            std::future::pending::<()>().await;
        }
    }

    /// Waits in-process until response `id` is answered, then uses the answer.
    pub(crate) async fn wait_answer(&self, id: &str) -> Value {
        loop {
            if let Some(v) = self.take_answer(id).await {
                return v;
            }
            self.answer_given(id).await;
        }
    }

    /// Registers the compensation of an action just completed.
    pub(crate) fn add_compensation(&self, c: Compensation) {
        self.tell(ScopeMsg::AddCompensation(Box::new(c)));
    }

    /// Takes the compensations registered at or below `path`, most recent first.
    pub(crate) async fn take_compensations(&self, path: Arc<str>) -> Vec<Compensation> {
        self.scope.ask(|reply| ScopeMsg::TakeCompensations { path, reply }).await.unwrap_or_default()
    }

    /// Tracks an async agent that started: its end, and its actor.
    pub(crate) fn async_started(&self, end: AsyncEnd, actor: ActorCell) {
        self.async_started.store(true, Ordering::Release);
        self.tell(ScopeMsg::AsyncStarted { end, actor });
    }

    /// Whether no async agent was started in this run.
    pub(crate) fn no_async_started(&self) -> bool {
        !self.async_started.load(Ordering::Acquire)
    }

    /// Waits for every async agent started (those started while waiting too); the first failure is returned.
    pub(crate) async fn wait_async_agents(&self) -> Result<(), AgentError> {
        if self.no_async_started() {
            return Ok(());
        }
        let mut first_err = None;
        loop {
            let ends = self.scope.ask(ScopeMsg::TakeAsyncEnds).await.unwrap_or_default();
            if ends.is_empty() {
                break;
            }
            if let Err(e) = wait_ends(ends).await {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Stops every async agent still running.
    pub(crate) fn abort_async_agents(&self) {
        self.tell(ScopeMsg::AbortAsync);
    }

    /// `f` on the run's budget ledger, in the run's actor; `None` when the run has no budget (or has ended).
    pub(crate) async fn with_ledger<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Ledger) -> R + Send + 'static,
    ) -> Option<R> {
        if !self.budgets {
            return None;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.tell(ScopeMsg::Ledger(Box::new(move |ledger| {
            let _ = tx.send(f(ledger));
        })));
        rx.await.ok()
    }

    /// `f` on the run's budget ledger, in the run's actor, without waiting (a charge).
    pub(crate) fn charge(&self, f: impl FnOnce(&mut Ledger) + Send + 'static) {
        if self.budgets {
            self.tell(ScopeMsg::Ledger(Box::new(f)));
        }
    }

    /// The saved state of the composite at planner key `key`, if it was in progress (taken: used once).
    pub(crate) async fn take_restore(&self, key: String) -> Option<PlannerState> {
        if !self.may_restore.load(Ordering::Acquire) {
            return None;
        }
        self.scope.ask(|reply| ScopeMsg::TakeRestore { key, reply }).await.ok().flatten()
    }

    /// The calls journaled by the invocation in progress at planner key `key` before the run was restored
    /// (taken: used once); empty when there were none.
    pub(crate) async fn take_calls(&self, key: String) -> Vec<crate::tool_call::CallEntry> {
        if !self.may_restore.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.scope.ask(|reply| ScopeMsg::TakeCalls { key, reply }).await.unwrap_or_default()
    }

    /// The actor holds composites to restore again (a restart of the tree from the journal).
    pub(crate) fn restoring(&self) {
        self.may_restore.store(true, Ordering::Release);
    }

    /// What the run leaves for its record: unused answers, unresolved suspensions, questions timed out.
    pub(crate) async fn leftovers(&self) -> Leftovers {
        self.scope.ask(ScopeMsg::Leftovers).await.unwrap_or_default()
    }

    /// Whether the run is draining: supervisors hold the calls they decide on instead of starting them.
    pub(crate) fn draining(&self) -> bool {
        self.drain.as_ref().is_some_and(CancellationToken::is_cancelled)
    }

    /// Asks `pending`'s question and waits in-process for its answer, then uses it; `None` once its deadline
    /// passed unanswered. With a store the question
    /// is published in the run's record while the run keeps running, so that `respond` (the CLI, the server's
    /// API and web inbox, on any server of a shared store) answers it there; the record is read every
    /// [`ANSWER_POLL`] for it, and the question is withdrawn once answered. An in-process answer
    /// (`ScopeMsg::Answer`) is taken as well.
    pub(crate) async fn ask_and_wait(&self, pending: PendingResponse) -> Option<Value> {
        let id = pending.id.clone();
        let deadline_ms = pending.deadline_ms;
        let published = self.publish_pending(pending).await;
        loop {
            if let Some(v) = self.take_answer(&id).await {
                if published {
                    self.withdraw_pending(&id).await;
                }
                return Some(v);
            }
            if published && let Some(v) = self.stored_answer(&id).await {
                self.mark_used(&id);
                self.withdraw_pending(&id).await;
                return Some(v);
            }
            let now_ms = now_us() / 1000;
            if deadline_ms.is_some_and(|d| d <= now_ms) {
                // An answer recorded before the deadline was taken above; a later one is refused.
                if published {
                    self.withdraw_pending(&id).await;
                }
                return None;
            }
            let until_deadline = deadline_ms.map(|d| std::time::Duration::from_millis(d - now_ms));
            let poll = if published { Some(ANSWER_POLL) } else { None };
            let nap = match (until_deadline, poll) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match nap {
                Some(nap) => {
                    tokio::select! {
                        () = self.answer_given(&id) => {}
                        () = tokio::time::sleep(nap) => {}
                    }
                }
                None => self.answer_given(&id).await,
            }
        }
    }

    /// Adds `pending` to the run's stored record (the run stays `running`); whether it is there.
    async fn publish_pending(&self, pending: PendingResponse) -> bool {
        let Some(store) = &self.journal.store else { return false };
        let change: crate::RunUpdate = Box::new(move |rec| {
            if !rec.pending.iter().any(|p| p.id == pending.id) {
                rec.pending.push(pending);
            }
            rec.updated_at_ms = now_us() / 1000;
            Ok(())
        });
        match store.update_run_dyn(&self.run_id, change).await {
            Ok(Some(Ok(_))) => true,
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, "cannot publish a human step's question (it waits in-process only): {e}");
                false
            }
        }
    }

    /// The answer to `id` recorded in the run's stored record, if any.
    async fn stored_answer(&self, id: &str) -> Option<Value> {
        let store = self.journal.store.as_ref()?;
        match store.run_dyn(&self.run_id).await {
            Ok(Some(rec)) => rec.answers.get(id).cloned(),
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(run_id = %self.run_id, "reading the run's record for an answer failed: {e}");
                None
            }
        }
    }

    /// Removes question `id` and its answer from the run's stored record (the answer is used).
    async fn withdraw_pending(&self, id: &str) {
        let Some(store) = &self.journal.store else { return };
        let id = id.to_string();
        let change: crate::RunUpdate = Box::new(move |rec| {
            rec.pending.retain(|p| p.id != id);
            rec.answers.remove(&id);
            rec.updated_at_ms = now_us() / 1000;
            Ok(())
        });
        if let Err(e) = store.update_run_dyn(&self.run_id, change).await {
            tracing::warn!(run_id = %self.run_id, "cannot withdraw an answered human step's question: {e}");
        }
    }

    /// Runs compensations in the order given (best effort: a failing one is logged and recorded in the
    /// history, and the rest still run).
    pub(crate) async fn compensate(&self, compensations: Vec<Compensation>) {
        run_compensations(&self.run_id, compensations, |record| self.scope.record(record)).await;
    }
}
