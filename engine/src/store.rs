//! The step journal interface and the checkpoint store trait; implementations live in `agentic-store`.
//!
//! Every completed step at every nesting level produces one [`StepRecord`]: the state delta (only the keys
//! written), the execution state of the planner that advanced, and the invocation record. Appending records
//! in sequence order to a journal is enough to rebuild a run's state and every planner's position.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::StoreError;
use crate::scope::InvocationRecord;

/// When journal records reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Each step is flushed before the next step starts (default).
    #[default]
    Sync,
    /// The flush of a step overlaps the next step; everything is flushed before the run returns or suspends.
    Async,
    /// Written only when the run ends or suspends.
    Exit,
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sync" => Ok(Durability::Sync),
            "async" => Ok(Durability::Async),
            "exit" => Ok(Durability::Exit),
            other => Err(format!("unknown durability `{other}` (expected sync, async or exit)")),
        }
    }
}

/// The execution state of one planner at the time of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannerState {
    /// Path id of the composite that owns the planner.
    pub path: String,
    /// [`crate::planner::Planner::execution_state`].
    pub state: Value,
}

/// One journal record: a completed step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Run id (memory id).
    pub run_id: String,
    /// Step sequence number within the run, from 1, gap-free.
    pub seq: u64,
    /// Path id of the agent whose completion this step records.
    pub agent_path: String,
    /// The keys it wrote, in write order (`null` = removed).
    pub delta: Vec<(String, Value)>,
    /// Execution states of the planners that changed with this step (the parent's, after deciding).
    pub planner_states: Vec<PlannerState>,
    /// The invocation (absent for skipped optional agents).
    pub invocation: Option<InvocationRecord>,
}

/// Final status of a run as recorded in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still running (or interrupted by a crash).
    Running,
    /// Finished with a result.
    Completed,
    /// Waiting for a human.
    Suspended,
    /// Failed with an error.
    Failed,
    /// Cancelled by the caller.
    Cancelled,
}

/// Where step records go. The engine calls it from the supervisors; stores implement it.
pub trait StepJournal: Send + Sync + 'static {
    /// Appends one step record. With [`Durability::Sync`] the engine awaits this before the next step.
    ///
    /// # Errors
    /// The backend failed; the run fails with [`crate::AgentError::Internal`] rather than continue unjournaled.
    fn append(&self, record: StepRecord) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Records a change of run status (and the result or error message).
    ///
    /// # Errors
    /// The backend failed.
    fn set_status(
        &self,
        run_id: &str,
        status: RunStatus,
        detail: Value,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// All records of a run, in sequence order.
    ///
    /// # Errors
    /// Unknown run or corrupt data.
    fn records(&self, run_id: &str) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send;
}

/// Object-safe companion of [`StepJournal`], implemented for every journal.
pub trait DynStepJournal: Send + Sync + 'static {
    /// See [`StepJournal::append`].
    fn append_dyn(&self, record: StepRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    /// See [`StepJournal::set_status`].
    fn set_status_dyn<'a>(
        &'a self,
        run_id: &'a str,
        status: RunStatus,
        detail: Value,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`StepJournal::records`].
    fn records_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>>;
}

impl<J: StepJournal> DynStepJournal for J {
    fn append_dyn(&self, record: StepRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.append(record))
    }

    fn set_status_dyn<'a>(
        &'a self,
        run_id: &'a str,
        status: RunStatus,
        detail: Value,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.set_status(run_id, status, detail))
    }

    fn records_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>> {
        Box::pin(self.records(run_id))
    }
}

/// A shared journal, as the engine holds it.
pub type JournalRef = Arc<dyn DynStepJournal>;
