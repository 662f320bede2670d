//! Durability: the durability modes, the run record, and the [`CheckpointStore`] trait that stores implement
//! (`agentic-store`: memory and sled). The journal's records and the folded [`RunImage`] are in
//! [`crate::journal`] (re-exported here).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::StoreError;
use crate::journal::PendingResponse;
pub use crate::journal::{
    CallRecord, CompletionRecord, Finish, InflightChange, PlannerState, RunImage, StepRecord, planner_key,
};

/// When journal records reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Each step is flushed before the next step starts (default).
    #[default]
    Sync,
    /// The flush of a step overlaps the next step; everything is flushed before the run returns or suspends.
    Async,
    /// Written only when the run ends or suspends (a crash loses the run's progress).
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

/// Status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Running (or interrupted by a crash or a drain: resume it).
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

impl std::str::FromStr for RunStatus {
    type Err = String;

    /// Parses the names [`RunStatus`]'s `Display` prints (`running`, `suspended`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "suspended" => RunStatus::Suspended,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            other => {
                return Err(format!(
                    "unknown status `{other}` (expected running, suspended, completed, failed or cancelled)"
                ));
            }
        })
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Suspended => "suspended",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        })
    }
}

/// What a store keeps about a run besides its journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Run id (memory id).
    pub run_id: String,
    /// Spec or system name (the root agent's name).
    pub name: String,
    /// Topology fingerprint of the system that ran it ([`crate::TopologyNode::fingerprint`]).
    pub fingerprint: String,
    /// Current status.
    pub status: RunStatus,
    /// Responses the run waits for (when suspended).
    #[serde(default)]
    pub pending: Vec<PendingResponse>,
    /// Answers recorded by `respond`, by response id, not yet consumed.
    #[serde(default)]
    pub answers: BTreeMap<String, Value>,
    /// The result (completed) or the error message (failed).
    #[serde(default)]
    pub detail: Value,
    /// Where the system came from (a spec file path), for `resume` in another process.
    #[serde(default)]
    pub source: Option<String>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Last update, milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
    /// Starts, suspensions (with what was pending), resumptions (with the answers), forks and endings, in
    /// order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub milestones: Vec<Milestone>,
    /// The run this one was forked from and the step it was forked at ([`crate::fork()`]); `None` for a run
    /// that was started, not forked (and in records written before forks existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
}

/// Where a forked run comes from: its journal is the first `at_seq` steps of run `run_id`'s
/// ([`RunRecord::forked_from`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The run it was forked from.
    pub run_id: String,
    /// The last step it shares with that run (0: none).
    pub at_seq: u64,
}

/// A change of a run's status, as kept in its [`RunRecord`] (reports show suspensions and the answers that
/// resumed them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Milestone {
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// `started`, `resumed`, `new_turn`, `forked`, `suspended`, `completed`, `failed`, `cancelled` or
    /// `interrupted` (drained: the run stays `running` and continues when resumed).
    pub kind: String,
    /// Step sequence number reached at that moment.
    pub seq: u64,
    /// Pending response ids (suspended).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Answers given for this resumption, by response id (resumed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub answers: BTreeMap<String, Value>,
    /// The error message (failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Path of the agent that failed, when the error names one (failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The run this one was forked from (forked; `seq` is the step it was forked at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

/// Where runs are kept: the journal, the run records, and the folded images runs resume from.
///
/// Native async; the engine holds stores as [`StoreRef`] through the object-safe [`DynCheckpointStore`].
pub trait CheckpointStore: Send + Sync + 'static {
    /// Appends one step record (it may stay buffered until [`CheckpointStore::flush`]).
    ///
    /// # Errors
    /// The backend failed.
    fn append(&self, record: StepRecord) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Makes everything appended so far durable (fsync for disk stores).
    ///
    /// # Errors
    /// The backend failed.
    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Creates or replaces a run record.
    ///
    /// # Errors
    /// The backend failed.
    fn put_run(&self, run: RunRecord) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// A run record, if the run exists.
    ///
    /// # Errors
    /// The backend failed or the record is corrupt.
    fn run(&self, run_id: &str) -> impl Future<Output = Result<Option<RunRecord>, StoreError>> + Send;

    /// All run records, most recently updated first.
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn runs(&self) -> impl Future<Output = Result<Vec<RunRecord>, StoreError>> + Send;

    /// All step records of a run, in sequence order (empty for a run without steps).
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn records(&self, run_id: &str) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send;

    /// The run folded from its journal (a store may start from a compacted snapshot).
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn load(&self, run_id: &str) -> impl Future<Output = Result<RunImage, StoreError>> + Send {
        async move {
            let records = self.records(run_id).await?;
            RunImage::fold(run_id, &records)
        }
    }
}

/// Object-safe companion of [`CheckpointStore`], implemented for every store.
#[allow(missing_docs)]
pub trait DynCheckpointStore: Send + Sync + 'static {
    fn append_dyn(&self, record: StepRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    fn flush_dyn(&self) -> BoxFuture<'_, Result<(), StoreError>>;
    fn put_run_dyn(&self, run: RunRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    fn run_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>>;
    fn runs_dyn(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>>;
    fn records_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>>;
    fn load_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<RunImage, StoreError>>;
}

impl<S: CheckpointStore> DynCheckpointStore for S {
    fn append_dyn(&self, record: StepRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.append(record))
    }
    fn flush_dyn(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.flush())
    }
    fn put_run_dyn(&self, run: RunRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.put_run(run))
    }
    fn run_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>> {
        Box::pin(self.run(run_id))
    }
    fn runs_dyn(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        Box::pin(self.runs())
    }
    fn records_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>> {
        Box::pin(self.records(run_id))
    }
    fn load_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<RunImage, StoreError>> {
        Box::pin(self.load(run_id))
    }
}

/// A shared store, as the engine holds it.
pub type StoreRef = Arc<dyn DynCheckpointStore>;
