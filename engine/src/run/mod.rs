//! The runtime: per-run context, leaf invocation, the supervisor actor that drives planners, composites, the
//! request that starts or resumes a run, and the registry of live runs.

mod composite;
mod ephemeral;
mod invoke;
mod registry;
mod request;
mod supervisor;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

pub use composite::{Composite, CompositeBuilder, OutputFn};
pub use registry::Registry;
pub use request::{
    CancelHandle, INPUTS_PATH, InvokeRequest, PendingResponse, RunEvents, RunOutcome, RunResult, respond,
};

use crate::error::AgentError;
use crate::scope::ScopeHandle;
use crate::store::{Durability, PlannerState, StepRecord, StoreRef};

/// Shared by every invocation of one run.
pub(crate) struct RunContext {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) store: Option<StoreRef>,
    pub(crate) durability: Durability,
    pub(crate) cancel: CancellationToken,
    pub(crate) async_tasks: Mutex<Vec<JoinHandle<Result<(), AgentError>>>>,
    /// Abort handles of every async agent started (kept while `wait_async` awaits their join handles).
    pub(crate) async_aborts: Mutex<Vec<AbortHandle>>,
    step_seq: AtomicU64,
    /// Async durability: records go to a writer task in order. A linked-list channel (futures'), not tokio's:
    /// tokio's preallocates a block of 32 records per channel (12 KiB per run), which dominated the memory
    /// of many concurrent runs.
    async_writer: Option<futures::channel::mpsc::UnboundedSender<StepRecord>>,
    /// Exit durability: records wait here until the run ends.
    exit_buffer: Mutex<Vec<StepRecord>>,
    /// Composites in progress when the run was last checkpointed, by path; taken when the composite restarts.
    restore: Mutex<HashMap<String, PlannerState>>,
    /// Human answers by response id (from `respond` or in-process answers), each used once.
    answers: Mutex<BTreeMap<String, Value>>,
    /// Response ids whose answers were used in this run.
    consumed: Mutex<BTreeSet<String>>,
    /// Woken when an answer arrives in-process (pending-mode human agents wait on it).
    answer_arrived: Notify,
    /// Compensations of completed actions, in completion order.
    compensations: Mutex<Vec<Compensation>>,
}

/// Undoes one completed action (a tool call with a declared compensation).
pub type CompensationFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), String>> + Send>;

/// A registered compensation.
pub(crate) struct Compensation {
    pub(crate) path: Arc<str>,
    pub(crate) agent: String,
    pub(crate) name: String,
    pub(crate) action: CompensationFn,
}

/// How a run context starts.
pub(crate) struct RunSetup {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) store: Option<StoreRef>,
    pub(crate) durability: Durability,
    pub(crate) cancel: CancellationToken,
    pub(crate) async_writer: Option<futures::channel::mpsc::UnboundedSender<StepRecord>>,
    pub(crate) first_seq: u64,
    pub(crate) restore: HashMap<String, PlannerState>,
    pub(crate) answers: BTreeMap<String, Value>,
}

impl RunContext {
    pub(crate) fn new(setup: RunSetup) -> Self {
        RunContext {
            run_id: setup.run_id,
            scope: setup.scope,
            store: setup.store,
            durability: setup.durability,
            cancel: setup.cancel,
            async_tasks: Mutex::new(Vec::new()),
            async_aborts: Mutex::new(Vec::new()),
            step_seq: AtomicU64::new(setup.first_seq),
            async_writer: setup.async_writer,
            exit_buffer: Mutex::new(Vec::new()),
            restore: Mutex::new(setup.restore),
            answers: Mutex::new(setup.answers),
            consumed: Mutex::new(BTreeSet::new()),
            answer_arrived: Notify::new(),
            compensations: Mutex::new(Vec::new()),
        }
    }

    /// Whether step records are wanted at all (skip building them otherwise).
    pub(crate) fn journaling(&self) -> bool {
        self.store.is_some()
    }

    /// The next gap-free step number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.step_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last step number handed out.
    pub(crate) fn last_seq(&self) -> u64 {
        self.step_seq.load(Ordering::Relaxed)
    }

    /// Journals one step according to the durability mode.
    pub(crate) async fn journal_step(&self, record: StepRecord) -> Result<(), AgentError> {
        let Some(store) = &self.store else { return Ok(()) };
        let failed = |e: crate::StoreError| AgentError::internal(format!("journal write failed: {e}"));
        match self.durability {
            Durability::Sync => {
                store.append_dyn(record).await.map_err(failed)?;
                store.flush_dyn().await.map_err(failed)
            }
            Durability::Async => match &self.async_writer {
                Some(tx) => tx.unbounded_send(record).map_err(|_| AgentError::internal("journal writer stopped")),
                None => store.append_dyn(record).await.map_err(failed),
            },
            Durability::Exit => {
                if let Ok(mut b) = self.exit_buffer.lock() {
                    b.push(record);
                }
                Ok(())
            }
        }
    }

    /// Takes the records buffered by exit durability.
    pub(crate) fn take_exit_buffer(&self) -> Vec<StepRecord> {
        self.exit_buffer.lock().map(|mut b| std::mem::take(&mut *b)).unwrap_or_default()
    }

    /// The checkpointed state of the composite at `path`, if it was in progress (taken: used once).
    pub(crate) fn take_restore(&self, path: &str) -> Option<PlannerState> {
        self.restore.lock().ok().and_then(|mut r| r.remove(path))
    }

    /// Uses the answer to response `id`, if one was given.
    pub(crate) fn take_answer(&self, id: &str) -> Option<Value> {
        let answer = self.answers.lock().ok().and_then(|mut a| a.remove(id));
        if answer.is_some()
            && let Ok(mut c) = self.consumed.lock()
        {
            c.insert(id.to_string());
        }
        answer
    }

    /// Records an answer delivered in-process and wakes pending-mode waiters.
    pub(crate) fn give_answer(&self, id: &str, value: Value) {
        if let Ok(mut a) = self.answers.lock() {
            a.insert(id.to_string(), value);
        }
        self.answer_arrived.notify_waiters();
    }

    /// Waits until the answer to `id` arrives, then uses it.
    pub(crate) async fn wait_answer(&self, id: &str) -> Value {
        loop {
            let notified = self.answer_arrived.notified();
            if let Some(v) = self.take_answer(id) {
                return v;
            }
            notified.await;
        }
    }

    /// Registers the compensation of an action completed by the invocation at `path`.
    pub(crate) fn add_compensation(&self, c: Compensation) {
        if let Ok(mut all) = self.compensations.lock() {
            all.push(c);
        }
    }

    /// Takes the compensations registered by invocations at or below `path`, most recent first.
    pub(crate) fn take_compensations(&self, path: &str) -> Vec<Compensation> {
        let prefix = format!("{path}/");
        let Ok(mut all) = self.compensations.lock() else { return Vec::new() };
        let (mine, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut *all).into_iter().partition(|c| &*c.path == path || c.path.starts_with(&prefix));
        *all = rest;
        mine.into_iter().rev().collect()
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
            });
        }
    }

    /// Answers not used by this run (they stay recorded for a later resume).
    pub(crate) fn unused_answers(&self) -> BTreeMap<String, Value> {
        self.answers.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// Waits for every async agent started in this run; the first failure is returned.
    pub(crate) async fn wait_async(&self) -> Result<(), AgentError> {
        let mut first_err = None;
        loop {
            let batch: Vec<_> = match self.async_tasks.lock() {
                Ok(mut t) => std::mem::take(&mut *t),
                Err(_) => Vec::new(),
            };
            if batch.is_empty() {
                break;
            }
            for h in batch {
                let r = match h.await {
                    Ok(r) => r,
                    Err(e) => Err(AgentError::internal(format!("async agent task: {e}"))),
                };
                if let Err(e) = r {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Tracks an async agent's task.
    pub(crate) fn track_async(&self, task: JoinHandle<Result<(), AgentError>>) {
        if let Ok(mut a) = self.async_aborts.lock() {
            a.push(task.abort_handle());
        }
        if let Ok(mut t) = self.async_tasks.lock() {
            t.push(task);
        }
    }

    /// Aborts every async agent still running (including those `wait_async` is waiting for).
    pub(crate) fn abort_async(&self) {
        if let Ok(mut a) = self.async_aborts.lock() {
            for h in a.drain(..) {
                h.abort();
            }
        }
    }
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}
