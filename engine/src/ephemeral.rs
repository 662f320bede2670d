//! The in-process store the engine uses when a run needs checkpoints (an explicit memory id, or a system that
//! can suspend) and the caller gave no store: it makes in-process suspend → answer → resume and multi-turn
//! memory work without configuring anything. Bounded by the run registry, which evicts it. It holds the
//! runs written to it (one, but for a fork's copy) and their journals.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::error::StoreError;
use crate::store::{CheckpointStore, RunRecord, StepRecord};

#[derive(Default)]
struct Inner {
    runs: BTreeMap<String, RunRecord>,
    records: Vec<StepRecord>,
}

/// Runs' journals and records, in memory.
#[derive(Clone, Default)]
pub(crate) struct EphemeralStore {
    inner: Arc<Mutex<Inner>>,
}

impl CheckpointStore for EphemeralStore {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        let mut inner = crate::lock::lock(&self.inner);
        // Kept in sequence order: two supervisors may append their steps in the other order than they
        // numbered them.
        let at = inner.records.partition_point(|r| (&r.run_id, r.seq) < (&record.run_id, record.seq));
        inner.records.insert(at, record);
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Everything is in this process's memory: a flush waits for nothing.
    fn in_memory(&self) -> bool {
        true
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        crate::lock::lock(&self.inner).runs.insert(run.run_id.clone(), run);
        Ok(())
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(crate::lock::lock(&self.inner).runs.get(run_id).cloned())
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(crate::lock::lock(&self.inner).runs.values().cloned().collect())
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        let inner = crate::lock::lock(&self.inner);
        Ok(inner.records.iter().filter(|r| r.run_id == run_id).cloned().collect())
    }
}
