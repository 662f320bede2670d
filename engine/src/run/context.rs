//! [`RunContext`]: what every invocation of one run shares — the run's id, its scope, its cancellation and
//! drain signals, and the small types that own the rest of the run's state (its journal, human answers, async
//! agents, compensations, event subscribers), each in its own module with its own tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::answers::Answers;
use super::async_agents::AsyncAgents;
use super::compensations::{Compensation, Compensations};
use super::scope_actor::ScopeHandle;
use super::step_journal::{StepJournal, WriterMsg};
use super::subscribers::Subscribers;
use super::util::now_us;
use crate::pending::PendingResponse;
use crate::store::{Durability, PlannerState, StoreRef};

/// How often a pending-mode human step reads its run's stored record for an answer ([`RunContext::ask_and_wait`]).
const ANSWER_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Shared by every invocation of one run.
pub(crate) struct RunContext {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) cancel: CancellationToken,
    /// The drain handle's token, when the request has one: once cancelled, supervisors start no new call.
    drain: Option<CancellationToken>,
    /// The async agents started (stopped when the run fails, waited for before it completes).
    pub(crate) async_agents: AsyncAgents,
    /// The run's steps on their way to the store.
    pub(crate) journal: StepJournal,
    /// Human answers by response id (from `respond` or in-process answers), each used once, and the questions
    /// the run was suspended with.
    pub(crate) answers: Answers,
    /// Compensations of completed actions, in completion order.
    pub(crate) compensations: Compensations,
    /// The run's event subscribers ([`super::Registry::subscribe`]).
    pub(crate) subscribers: Subscribers,
    /// The W3C `traceparent` the run was started under ([`super::InvokeRequest::traceparent`]).
    pub(crate) traceparent: Option<Arc<str>>,
    /// The run's budgets and what was spent under them (SPEC.md §3), when an agent has one.
    pub(crate) ledger: Option<std::sync::Mutex<crate::budget::Ledger>>,
}

/// How a run context starts.
pub(crate) struct RunSetup {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) store: Option<StoreRef>,
    pub(crate) durability: Durability,
    pub(crate) cancel: CancellationToken,
    pub(crate) drain: Option<CancellationToken>,
    pub(crate) async_writer: Option<futures::channel::mpsc::UnboundedSender<WriterMsg>>,
    pub(crate) first_seq: u64,
    pub(crate) restore: HashMap<String, PlannerState>,
    pub(crate) answers: BTreeMap<String, Value>,
    /// The pending responses with agent data the run was suspended with.
    pub(crate) suspensions: Vec<PendingResponse>,
    /// The run's process group of event subscribers.
    pub(crate) group: String,
    /// The W3C `traceparent` the run was started under.
    pub(crate) traceparent: Option<Arc<str>>,
    /// The run's budgets, when an agent has one.
    pub(crate) ledger: Option<crate::budget::Ledger>,
}

impl RunContext {
    pub(crate) fn new(setup: RunSetup) -> Self {
        RunContext {
            journal: StepJournal::new(
                setup.run_id.clone(),
                setup.store,
                setup.durability,
                setup.first_seq,
                setup.async_writer,
                setup.restore,
            ),
            run_id: setup.run_id,
            scope: setup.scope,
            cancel: setup.cancel,
            drain: setup.drain,
            async_agents: AsyncAgents::default(),
            answers: Answers::new(setup.answers, setup.suspensions),
            compensations: Compensations::default(),
            subscribers: Subscribers::new(setup.group),
            traceparent: setup.traceparent,
            ledger: setup.ledger.map(std::sync::Mutex::new),
        }
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
    /// ([`Answers::give`]) is taken as well.
    pub(crate) async fn ask_and_wait(&self, pending: PendingResponse) -> Option<Value> {
        let id = pending.id.clone();
        let deadline_ms = pending.deadline_ms;
        let published = self.publish_pending(pending).await;
        loop {
            let notified = self.answers.arrival();
            if let Some(v) = self.answers.take(&id) {
                if published {
                    self.withdraw_pending(&id).await;
                }
                return Some(v);
            }
            if published && let Some(v) = self.stored_answer(&id).await {
                self.answers.mark_used(&id);
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
                        () = notified => {}
                        () = tokio::time::sleep(nap) => {}
                    }
                }
                None => notified.await,
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
        for c in compensations {
            let started = now_us();
            let result = match std::panic::AssertUnwindSafe((c.action)()).catch_unwind().await {
                Ok(r) => r,
                Err(_) => Err("compensation panicked".to_string()),
            };
            if let Err(e) = &result {
                tracing::warn!(run_id = %self.run_id, path = %c.path, compensation = %c.name, "compensation failed: {e}");
            }
            self.scope.record(crate::scope::InvocationRecord {
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
}
