//! The runtime: per-run context, leaf invocation, the supervisor actor that drives planners, composites, and
//! the request that starts a run.

mod composite;
mod invoke;
mod request;
mod supervisor;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use composite::{Composite, CompositeBuilder, OutputFn};
pub use request::{CancelHandle, InvokeRequest, PendingResponse, RunOutcome, RunResult};

use crate::error::AgentError;
use crate::scope::ScopeHandle;
use crate::store::{Durability, JournalRef, StepRecord};

/// Shared by every invocation of one run.
pub(crate) struct RunContext {
    pub(crate) run_id: Arc<str>,
    pub(crate) scope: ScopeHandle,
    pub(crate) journal: Option<JournalRef>,
    pub(crate) durability: Durability,
    pub(crate) cancel: CancellationToken,
    pub(crate) async_tasks: Mutex<Vec<JoinHandle<Result<(), AgentError>>>>,
    step_seq: AtomicU64,
    /// Async durability: records go to a writer task in order.
    async_writer: Option<mpsc::UnboundedSender<StepRecord>>,
    /// Exit durability: records wait here until the run ends.
    exit_buffer: Mutex<Vec<StepRecord>>,
}

impl RunContext {
    pub(crate) fn new(
        run_id: Arc<str>,
        scope: ScopeHandle,
        journal: Option<JournalRef>,
        durability: Durability,
        cancel: CancellationToken,
        async_writer: Option<mpsc::UnboundedSender<StepRecord>>,
    ) -> Self {
        RunContext {
            run_id,
            scope,
            journal,
            durability,
            cancel,
            async_tasks: Mutex::new(Vec::new()),
            step_seq: AtomicU64::new(0),
            async_writer,
            exit_buffer: Mutex::new(Vec::new()),
        }
    }

    /// Whether step records are wanted at all (skip building them otherwise).
    pub(crate) fn journaling(&self) -> bool {
        self.journal.is_some()
    }

    /// The next gap-free step number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.step_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Journals one step according to the durability mode.
    pub(crate) async fn journal_step(&self, record: StepRecord) -> Result<(), AgentError> {
        let Some(journal) = &self.journal else { return Ok(()) };
        match self.durability {
            Durability::Sync => {
                journal.append_dyn(record).await.map_err(|e| AgentError::internal(format!("journal write failed: {e}")))
            }
            Durability::Async => match &self.async_writer {
                Some(tx) => tx.send(record).map_err(|_| AgentError::internal("journal writer stopped")),
                None => journal
                    .append_dyn(record)
                    .await
                    .map_err(|e| AgentError::internal(format!("journal write failed: {e}"))),
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

    /// Aborts every async agent still running.
    pub(crate) fn abort_async(&self) {
        if let Ok(mut t) = self.async_tasks.lock() {
            for h in t.drain(..) {
                h.abort();
            }
        }
    }
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}
