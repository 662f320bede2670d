//! # agentic-store
//!
//! Checkpoint stores for `agentic`. This release has the [`MemoryStore`]: the step journal and run statuses
//! kept in process memory (tests, demos, runs that need no restart). The sled store comes next.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentic_engine::{JournalRef, RunStatus, StepJournal, StepRecord, StoreError};
use serde_json::Value;

/// One run as the memory store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRun {
    /// Current status.
    pub status: RunStatus,
    /// Result (completed) or error message (failed).
    pub detail: Value,
    /// The journal, in sequence order.
    pub records: Vec<StepRecord>,
}

/// An in-memory journal. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    runs: Arc<Mutex<HashMap<String, MemoryRun>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store as a journal for `InvokeRequest::journal`.
    pub fn journal(&self) -> JournalRef {
        Arc::new(self.clone())
    }

    /// A copy of a run, if known.
    pub fn run(&self, run_id: &str) -> Option<MemoryRun> {
        self.runs.lock().ok().and_then(|r| r.get(run_id).cloned())
    }

    /// Ids of all runs, sorted.
    pub fn run_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.runs.lock().map(|r| r.keys().cloned().collect()).unwrap_or_default();
        ids.sort();
        ids
    }

    fn with_run<T>(&self, run_id: &str, f: impl FnOnce(&mut MemoryRun) -> T) -> Result<T, StoreError> {
        let mut runs = self.runs.lock().map_err(|_| StoreError::Backend(Arc::from("memory store lock poisoned")))?;
        let run = runs.entry(run_id.to_string()).or_insert_with(|| MemoryRun {
            status: RunStatus::Running,
            detail: Value::Null,
            records: Vec::new(),
        });
        Ok(f(run))
    }
}

impl StepJournal for MemoryStore {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        let run_id = record.run_id.clone();
        self.with_run(&run_id, |run| run.records.push(record))
    }

    async fn set_status(&self, run_id: &str, status: RunStatus, detail: Value) -> Result<(), StoreError> {
        self.with_run(run_id, |run| {
            run.status = status;
            run.detail = detail;
        })
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        let runs = self.runs.lock().map_err(|_| StoreError::Backend(Arc::from("memory store lock poisoned")))?;
        runs.get(run_id).map(|r| r.records.clone()).ok_or_else(|| StoreError::UnknownRun(run_id.to_string()))
    }
}
