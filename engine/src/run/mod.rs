//! The runtime: an actor system on ractor. Per run:
//!
//! ```text
//! ScopeActor (one per run; registered under the run id: answers, cancellation; the root's supervisor)
//!   │  owns the state, history and pending keys; every write is a message; readers use its snapshots
//!   └─ SupervisorActor (root composite)          or AgentActor (root leaf)
//!        ├─ AgentActor (one per leaf invocation, linked) ── writes + result ──► ScopeActor ──► supervisor
//!        └─ SupervisorActor (nested composite, linked) ── its own children ...
//! ```
//!
//! A supervisor handles one message at a time: a child's completion (through the scope actor, so its writes
//! are published first), a child's failure (a supervision event: a leaf's panic goes to the error handler, a
//! composite's death breaks the tree and the scope actor restarts the run from its journal), its own timeout.
//! The request that starts or resumes a run is a session: open (load the journal, start the scope actor),
//! execute (start the root and wait), close (flush, record the status, stop the scope actor).

mod agent_actor;
mod answers;
mod async_agents;
mod compensations;
mod composite;
mod ephemeral;
mod fork;
mod frame;
mod invoke;
mod registry;
mod request;
mod scope_actor;
mod session;
mod step_journal;
mod stream;
mod subscribers;
mod supervisor;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use answers::Answers;
use async_agents::AsyncAgents;
pub(crate) use compensations::Compensation;
pub use compensations::CompensationFn;
use compensations::Compensations;
pub use composite::{Composite, CompositeBuilder, OutputFn, PlannerFactory};
pub use fork::fork;
pub(crate) use frame::Frame;
pub use registry::{REGISTRY_CAPACITY, Registry};
pub use request::{
    CancelHandle, DrainHandle, INPUTS_PATH, InvokeRequest, PendingResponse, RunEvents, RunOutcome, RunResult,
    answerable, respond,
};
pub use scope_actor::{MAX_RESTARTS, ScopeHandle};
pub(crate) use step_journal::{StepJournal, WriterMsg};
pub use stream::{ResultStream, StreamItem, StreamSource};
use subscribers::Subscribers;

use crate::store::{Durability, PlannerState, StoreRef};

/// Locks `m`, recovering from poisoning: the engine's critical sections are single updates that leave the
/// data consistent, so a panic elsewhere while one was held loses nothing (the one poisoning policy of the
/// engine).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
        }
    }

    /// Whether the run is draining: supervisors hold the calls they decide on instead of starting them.
    pub(crate) fn draining(&self) -> bool {
        self.drain.as_ref().is_some_and(CancellationToken::is_cancelled)
    }

    /// Asks `pending`'s question and waits in-process for its answer, then uses it. With a store the question
    /// is published in the run's record while the run keeps running, so that `respond` (the CLI, the server's
    /// API and web inbox, on any server of a shared store) answers it there; the record is read every
    /// [`ANSWER_POLL`] for it, and the question is withdrawn once answered. An in-process answer
    /// ([`Answers::give`]) is taken as well.
    pub(crate) async fn ask_and_wait(&self, pending: PendingResponse) -> Value {
        let id = pending.id.clone();
        let published = self.publish_pending(pending).await;
        loop {
            let notified = self.answers.arrival();
            if let Some(v) = self.answers.take(&id) {
                if published {
                    self.withdraw_pending(&id).await;
                }
                return v;
            }
            if !published {
                notified.await;
                continue;
            }
            if let Some(v) = self.stored_answer(&id).await {
                self.answers.mark_used(&id);
                self.withdraw_pending(&id).await;
                return v;
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(ANSWER_POLL) => {}
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
                error: result.err(),
                item: None,
            });
        }
    }
}

/// Microseconds since the Unix epoch.
/// How often a pending-mode human step reads its run's stored record for an answer ([`RunContext::ask_and_wait`]).
const ANSWER_POLL: std::time::Duration = std::time::Duration::from_millis(250);

pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// What [`check_run_id`] accepts, as its errors say it.
pub(crate) const RUN_ID_RULE: &str =
    "(a run id is 1 to 200 bytes, not blank, without control characters, and not `.` or `..`)";

/// The longest run id (memory id) accepted, in bytes.
pub const MAX_RUN_ID_LEN: usize = 200;

/// Checks a run id (memory id) chosen by a user: 1 to [`MAX_RUN_ID_LEN`] bytes, not blank, no control
/// character, and not `.` or `..` — so that, percent-encoded, it is one path segment of the server's URLs
/// (a `.` or `..` segment would be resolved away by clients).
///
/// # Errors
/// What is wrong, as a phrase after the id: `` `..` is a path step (a run id is ..) ``.
pub fn check_run_id(id: &str) -> Result<(), String> {
    let problem = if id.trim().is_empty() {
        "is blank"
    } else if id.len() > MAX_RUN_ID_LEN {
        "is too long"
    } else if id == "." || id == ".." {
        "is a path step"
    } else if id.chars().any(char::is_control) {
        "has a control character"
    } else {
        return Ok(());
    };
    let shown: String =
        if id.chars().count() > 40 { id.chars().take(40).chain("..".chars()).collect() } else { id.to_string() };
    Err(format!("`{}` {problem} {RUN_ID_RULE}", shown.escape_debug()))
}
