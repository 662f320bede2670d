//! Durability: the durability modes, the run record, and the [`CheckpointStore`] trait that stores implement
//! (`agentic-store`: memory and sled). The journal's records and the folded [`RunImage`] are in
//! [`crate::journal`] (re-exported here).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::{AuditEntry, KeyRecord};
use crate::error::StoreError;
pub use crate::journal::{
    CallRecord, CompletionRecord, Finish, InflightChange, PlannerState, RunImage, StepRecord, planner_key,
};
use crate::pending::PendingResponse;
use crate::schedule::{ScheduleChange, ScheduleRecord};
use crate::status::RunStatus;

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
    /// Responses the run waits for (when suspended, or running in a `mode: pending` human step). A failed or
    /// cancelled run keeps the questions it had asked, for the agents that read them back on resume; they take
    /// no answer ([`RunRecord::open_pending`] is what can be answered).
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
    /// The SHA-256 (64 lowercase hex digits, [`spec_hash`]) of the spec text the run executes, kept in the
    /// store's spec archive ([`CheckpointStore::spec`]): resumes and take-overs rebuild the run from that text,
    /// whatever became of the file (SERVER.md §5). `None` for runs built in Rust and runs recorded before the
    /// archive existed (they resume from [`RunRecord::source`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// A cancel was requested ([`CheckpointStore::request_cancel`]): the process executing the run stops it,
    /// and one that takes the run over cancels it instead of continuing (SERVER.md §4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
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
    /// The questions whose deadline passed and that were acted on (SPEC.md §3): an answer to one of them is
    /// refused, saying it timed out and what was done instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timed_out: Vec<PendingResponse>,
    /// The tenant the run belongs to (SERVER.md §8): the tenant of the API key that started it (a fork's, its
    /// source's). `None`: a run started without a key (the CLI on the store, the server's `--token-env`
    /// token), which only tenant-less principals see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Who gave each answer, by response id (`key:<name>`, `token`, `anonymous`, `cli:<user>`): set by
    /// [`crate::respond_as`] and kept after the answer is used, so the run page and the report say who
    /// answered. A response id asked again (a loop) shows its latest answerer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub answered_by: BTreeMap<String, String>,
}

impl RunRecord {
    /// The pending responses that can be answered: [`RunRecord::pending`] while the run is suspended or running,
    /// none once it completed, failed or was cancelled (resuming such a run asks its questions again). What the
    /// CLI's `--json`, `runs`, `show` and the server's `GET /api/v1/runs` list as `pending`.
    pub fn open_pending(&self) -> &[PendingResponse] {
        match self.status {
            RunStatus::Suspended | RunStatus::Running => &self.pending,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled => &[],
        }
    }

    /// The questions a failed or cancelled run had asked and that no longer take an answer (empty for a run in
    /// any other status): resuming the run asks them again. `wait` timers are not questions and are left out.
    pub fn withdrawn_questions(&self) -> Vec<&PendingResponse> {
        match self.status {
            RunStatus::Failed | RunStatus::Cancelled => {
                self.pending.iter().filter(|p| p.kind != crate::pending::PendingKind::Wait).collect()
            }
            RunStatus::Suspended | RunStatus::Running | RunStatus::Completed => Vec::new(),
        }
    }
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
    /// What happened.
    pub kind: MilestoneKind,
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

/// What a [`Milestone`] marks; stored and shown as its snake_case name (`new_turn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MilestoneKind {
    /// The run started.
    Started,
    /// A suspended or interrupted run continued (with the answers given).
    Resumed,
    /// A completed run was invoked again with the same id (a new turn of a conversation).
    NewTurn,
    /// The run was forked from another run at a step.
    Forked,
    /// The run's pinned spec was upgraded on purpose.
    Upgraded,
    /// The run waits for human answers.
    Suspended,
    /// The run completed.
    Completed,
    /// The run failed.
    Failed,
    /// The run was cancelled.
    Cancelled,
    /// The run was drained at a step boundary: it stays `running` and continues when resumed.
    Interrupted,
    /// A kind this version does not know (a record written by a later one).
    #[serde(other)]
    Unknown,
}

impl MilestoneKind {
    /// The snake_case name (`new_turn`), as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            MilestoneKind::Started => "started",
            MilestoneKind::Resumed => "resumed",
            MilestoneKind::NewTurn => "new_turn",
            MilestoneKind::Forked => "forked",
            MilestoneKind::Upgraded => "upgraded",
            MilestoneKind::Suspended => "suspended",
            MilestoneKind::Completed => "completed",
            MilestoneKind::Failed => "failed",
            MilestoneKind::Cancelled => "cancelled",
            MilestoneKind::Interrupted => "interrupted",
            MilestoneKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for MilestoneKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where runs are kept: the journal, the run records, and the folded images runs resume from.
///
/// Native async; the engine holds stores as [`StoreRef`] through the object-safe [`DynCheckpointStore`]. A
/// store that wraps another implements [`StoreLayer`] instead, overriding only what it changes.
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

    /// Makes everything appended so far durable, and fails when `run_id`'s records could not be written
    /// because this process lost the run's lease ([`StoreError::LeaseLost`]); a lost lease of another run
    /// written in the same batch does not fail this call. Default: [`CheckpointStore::flush`].
    ///
    /// # Errors
    /// The backend failed, or the run's lease was lost.
    fn flush_run(&self, run_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = run_id;
        self.flush()
    }

    /// Whether the store keeps everything in this process's memory, so that a flush has nothing to wait for
    /// (no device, no server): async durability then flushes each step at once instead of by a task that
    /// follows the run. Default: `false`.
    fn in_memory(&self) -> bool {
        false
    }

    /// Whether other processes may execute this store's runs at the same time (a database server): then a
    /// host takes a lease before it executes a run, renews its leases ([`CheckpointStore::renew_leases`])
    /// and looks for runs to take over ([`CheckpointStore::takeover_candidates`]). Default: `false` (one
    /// process holds the whole store).
    fn shared(&self) -> bool {
        false
    }

    /// Takes the lease on `run_id` for this handle's owner: `Some` when the run had no holder, its holder's
    /// lease expired (a take-over: the fencing token increases), or this owner held it; `None` when another
    /// owner holds an unexpired lease. A run the store does not hold yet is claimed: its first record is
    /// written with the lease. Default: always `Some` with token 0 (one process holds the whole store).
    ///
    /// # Errors
    /// The backend failed.
    fn acquire_lease(&self, run_id: &str) -> impl Future<Output = Result<Option<Lease>, StoreError>> + Send {
        let lease = Lease { run_id: run_id.to_string(), owner: "this process".to_string(), token: 0 };
        async move { Ok(Some(lease)) }
    }

    /// Extends every lease this handle holds by the store's lease time; returns the runs whose lease was
    /// lost (taken over by another process), which this handle may no longer write. Default: nothing lost.
    ///
    /// # Errors
    /// The backend failed (the leases run out unless a later renewal succeeds).
    fn renew_leases(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Gives up this handle's lease on `run_id` (its execution here ended): another process may take it at
    /// once. Nothing happens when the lease was lost. Default: nothing to do.
    ///
    /// # Errors
    /// The backend failed (the lease then runs out by itself).
    fn release_lease(&self, run_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = run_id;
        async { Ok(()) }
    }

    /// Runs a host may have to continue: `running` or `suspended` ones whose lease has expired or was
    /// released (the caller decides: interrupted, or every answer given). Default: every `running` and
    /// `suspended` run.
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn takeover_candidates(&self) -> impl Future<Output = Result<Vec<RunRecord>, StoreError>> + Send {
        async move {
            let runs = self.runs().await?;
            Ok(runs.into_iter().filter(|r| matches!(r.status, RunStatus::Running | RunStatus::Suspended)).collect())
        }
    }

    /// Applies `change` to `run_id`'s record and writes it durably, atomically with respect to other
    /// processes' updates (an answer posted to one server while another answers a second response of the
    /// same run). Returns `None` for an unknown run, `Some(Err(message))` when `change` refused (nothing
    /// written), else the record written. Default: read, change, [`CheckpointStore::put_run`],
    /// [`CheckpointStore::flush`] (atomic when one process holds the store and serialises its updates).
    ///
    /// # Errors
    /// The backend failed or the record is corrupt.
    fn update_run(
        &self,
        run_id: &str,
        change: RunUpdate,
    ) -> impl Future<Output = Result<Option<Result<RunRecord, String>>, StoreError>> + Send {
        async move {
            let Some(mut record) = self.run(run_id).await? else { return Ok(None) };
            if let Err(message) = change(&mut record) {
                return Ok(Some(Err(message)));
            }
            self.put_run(record.clone()).await?;
            self.flush().await?;
            Ok(Some(Ok(record)))
        }
    }

    /// Keeps `text` (a spec's YAML or JSON) durably in the store's spec archive and returns its
    /// [`spec_hash`]; the same text is kept once. Runs name it in [`RunRecord::spec_hash`]. Default: refused
    /// (a store without an archive; its runs resume from their source path).
    ///
    /// # Errors
    /// The backend failed, or the store keeps no spec texts.
    fn put_spec(&self, text: &str) -> impl Future<Output = Result<String, StoreError>> + Send {
        let _ = text;
        async { Err(StoreError::backend("this store keeps no spec texts")) }
    }

    /// The spec text archived under `hash` ([`CheckpointStore::put_spec`]), if the store holds it. Default:
    /// `None`.
    ///
    /// # Errors
    /// The backend failed or the text is corrupt.
    fn spec(&self, hash: &str) -> impl Future<Output = Result<Option<String>, StoreError>> + Send {
        let _ = hash;
        async { Ok(None) }
    }

    /// Records that `run_id` is to be cancelled ([`RunRecord::cancel_requested`]), durably, and tells the
    /// other processes of a shared store at once (PostgreSQL: `NOTIFY`). Returns the record as written, or
    /// `None` for an unknown run. Default: [`CheckpointStore::update_run`] setting the flag.
    ///
    /// # Errors
    /// The backend failed or the record is corrupt.
    fn request_cancel(&self, run_id: &str) -> impl Future<Output = Result<Option<RunRecord>, StoreError>> + Send {
        async move {
            let change: RunUpdate = Box::new(|r: &mut RunRecord| {
                r.cancel_requested = true;
                Ok(())
            });
            Ok(self.update_run(run_id, change).await?.and_then(Result::ok))
        }
    }

    /// The journal records of `run_id` from step `from` on, in sequence order (what a follower of a run
    /// executing elsewhere reads as it goes). Default: [`CheckpointStore::records`], filtered.
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn records_from(
        &self,
        run_id: &str,
        from: u64,
    ) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send {
        async move {
            let mut records = self.records(run_id).await?;
            records.retain(|r| r.seq >= from);
            Ok(records)
        }
    }

    /// Sends `payloads`, in order, on `channel` to every process listening to this store
    /// ([`CheckpointStore::listen`]), this one included; they are delivered after what this handle sent before
    /// them. Default: nothing to do (one process holds the store).
    ///
    /// # Errors
    /// The backend failed (the messages are lost; listeners fall back to reading the store).
    fn notify(&self, channel: &str, payloads: Vec<String>) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (channel, payloads);
        async { Ok(()) }
    }

    /// Listens to `channels` ([`CheckpointStore::notify`]): every message sent on them by any process sharing
    /// the store, in the order they were sent, for as long as the receiver is kept. The store re-establishes a
    /// lost connection by itself and then sends [`Notice::Reconnected`] (messages sent meanwhile are lost: read
    /// the store again). `None`: the store has no such messages (one process holds it). PostgreSQL:
    /// `LISTEN`/`NOTIFY` on a connection of its own.
    ///
    /// # Errors
    /// The backend failed.
    fn listen(
        &self,
        channels: Vec<String>,
    ) -> impl Future<Output = Result<Option<tokio::sync::mpsc::UnboundedReceiver<Notice>>, StoreError>> + Send {
        let _ = channels;
        async { Ok(None) }
    }

    /// Every schedule the store keeps (SERVER.md §6), sorted by id. Default: none (a store without
    /// schedules).
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn schedules(&self) -> impl Future<Output = Result<Vec<ScheduleRecord>, StoreError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// The schedule `id`, if the store keeps it. Default: looked up in [`CheckpointStore::schedules`].
    ///
    /// # Errors
    /// The backend failed or the record is corrupt.
    fn schedule(&self, id: &str) -> impl Future<Output = Result<Option<ScheduleRecord>, StoreError>> + Send {
        async move { Ok(self.schedules().await?.into_iter().find(|s| s.id == id)) }
    }

    /// Applies `change` to the schedule `id` and writes the result durably, atomically with respect to every
    /// other change of that schedule by any process sharing the store (two servers taking the same tick: one
    /// sees the other's). `change` gets `None` when no schedule has that id; it sets `Some` to create or
    /// replace it (its id must be `id`) and `None` to delete it. Returns the schedule as written (`None`:
    /// deleted, or still absent), or `Err(message)` when `change` refused (nothing written). Default: refused
    /// with a backend error (this store keeps no schedules).
    ///
    /// # Errors
    /// The backend failed, or the stored record is corrupt.
    fn change_schedule(
        &self,
        id: &str,
        change: ScheduleChange,
    ) -> impl Future<Output = Result<Result<Option<ScheduleRecord>, String>, StoreError>> + Send {
        let _ = (id, change);
        async { Err(StoreError::backend("this store keeps no schedules")) }
    }
    /// Writes `key` (SERVER.md §8): a new key, or a key changed (revoked), replacing the one with its id, durably.
    /// Default: refused with a backend error (this store keeps no keys).
    ///
    /// # Errors
    /// The backend failed.
    fn put_key(&self, key: KeyRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = key;
        async { Err(StoreError::backend("this store keeps no API keys")) }
    }

    /// Every API key the store keeps, revoked ones included, oldest first. Default: none.
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn keys(&self) -> impl Future<Output = Result<Vec<KeyRecord>, StoreError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Appends `entry` to the audit trail, durably. Default: refused with a backend error (this store keeps
    /// no audit).
    ///
    /// # Errors
    /// The backend failed.
    fn append_audit(&self, entry: AuditEntry) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = entry;
        async { Err(StoreError::backend("this store keeps no audit")) }
    }

    /// The latest `limit` entries of the audit trail, newest first. Default: none.
    ///
    /// # Errors
    /// The backend failed or a record is corrupt.
    fn audit(&self, limit: usize) -> impl Future<Output = Result<Vec<AuditEntry>, StoreError>> + Send {
        let _ = limit;
        async { Ok(Vec::new()) }
    }

    /// A store for reading what `tenant` may see (SERVER.md §8), when the backend itself enforces tenants
    /// (PostgreSQL's row-level security): reads through it return that tenant's runs, journals, specs,
    /// schedules, keys and audit entries only. `None` (the default) when the backend does not: the server then
    /// filters what it reads itself.
    fn tenant_view(&self, tenant: &str) -> Option<StoreRef> {
        let _ = tenant;
        None
    }

    /// Carries out one operation of the model-call limiter that every process sharing this store uses
    /// (SPEC.md §3 `limits`, [`crate::limits`]): `None` when the store shares no limiter (each process
    /// limits its own calls; the default). Each operation is atomic with respect to every process.
    ///
    /// # Errors
    /// The backend failed.
    fn capacity(
        &self,
        op: crate::capacity::CapacityOp,
    ) -> impl Future<Output = Result<Option<crate::capacity::CapacityAnswer>, StoreError>> + Send {
        let _ = op;
        async { Ok(None) }
    }
}

/// What [`CheckpointStore::listen`] receives: a message another process (or this one) sent with
/// [`CheckpointStore::notify`], or word that the connection was lost and re-established.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A message.
    Message {
        /// The channel it was sent on.
        channel: String,
        /// Its text.
        payload: String,
    },
    /// The listening connection was lost and is back: messages sent meanwhile were not received.
    Reconnected,
}

/// The name of a spec text in a store's spec archive: its SHA-256 as 64 lowercase hex digits (the same text,
/// byte for byte, always has the same hash, so it is stored once).
pub fn spec_hash(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest.iter() {
        hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
    }
    hex
}

/// A run's lease as its holder took it ([`CheckpointStore::acquire_lease`]): while a process holds it, the run
/// executes there and nowhere else; journal appends of the run check it (the fencing token) in their
/// transaction. The idea: leases with fencing tokens (Gray and Cheriton 1989; Kleppmann, "How to do
/// distributed locking", 2016).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// The holder's owner id (a store handle's, one per process).
    pub owner: String,
    /// Fencing token: increased at every take-over, so a former holder's writes are refused (0 for stores
    /// that one process holds whole).
    pub token: u64,
}

/// A change of a run record made atomically by [`CheckpointStore::update_run`]: `Err(message)` refuses it
/// (nothing is written).
pub type RunUpdate = Box<dyn FnOnce(&mut RunRecord) -> Result<(), String> + Send>;

/// Object-safe companion of [`CheckpointStore`], implemented for every store (and so for every
/// [`StoreLayer`]); each `NAME_dyn` is [`CheckpointStore`]'s `NAME`, boxed. A new method goes here too (see
/// [`StoreLayer`], "Where a new store method goes").
#[allow(missing_docs)]
pub trait DynCheckpointStore: Send + Sync + 'static {
    fn append_dyn(&self, record: StepRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    fn flush_dyn(&self) -> BoxFuture<'_, Result<(), StoreError>>;
    fn put_run_dyn(&self, run: RunRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    fn run_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>>;
    fn runs_dyn(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>>;
    fn records_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>>;
    fn load_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<RunImage, StoreError>>;
    fn flush_run_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    fn in_memory_dyn(&self) -> bool;
    fn shared_dyn(&self) -> bool;
    fn acquire_lease_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<Lease>, StoreError>>;
    fn renew_leases_dyn(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;
    fn release_lease_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    fn takeover_candidates_dyn(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>>;
    fn update_run_dyn<'a>(
        &'a self,
        run_id: &'a str,
        change: RunUpdate,
    ) -> BoxFuture<'a, Result<Option<Result<RunRecord, String>>, StoreError>>;
    fn put_spec_dyn<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Result<String, StoreError>>;
    fn spec_dyn<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
    fn request_cancel_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>>;
    fn records_from_dyn<'a>(&'a self, run_id: &'a str, from: u64)
    -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>>;
    fn notify_dyn<'a>(&'a self, channel: &'a str, payloads: Vec<String>) -> BoxFuture<'a, Result<(), StoreError>>;
    fn listen_dyn(&self, channels: Vec<String>) -> BoxFuture<'_, Result<Option<NoticeReceiver>, StoreError>>;
    fn schedules_dyn(&self) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, StoreError>>;
    fn schedule_dyn<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ScheduleRecord>, StoreError>>;
    fn change_schedule_dyn<'a>(
        &'a self,
        id: &'a str,
        change: ScheduleChange,
    ) -> BoxFuture<'a, Result<Result<Option<ScheduleRecord>, String>, StoreError>>;
    fn capacity_dyn(
        &self,
        op: crate::capacity::CapacityOp,
    ) -> BoxFuture<'_, Result<Option<crate::capacity::CapacityAnswer>, StoreError>>;
    fn put_key_dyn(&self, key: KeyRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    fn keys_dyn(&self) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>>;
    fn append_audit_dyn(&self, entry: AuditEntry) -> BoxFuture<'_, Result<(), StoreError>>;
    fn audit_dyn(&self, limit: usize) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>>;
    fn tenant_view_dyn(&self, tenant: &str) -> Option<StoreRef>;
}

/// A store that wraps another one and changes part of what it does (a decorator: an event tap, a test hook):
/// implement [`StoreLayer::inner`] and override only the methods whose behaviour changes. Every other method
/// forwards to the wrapped store by default, so a wrapper cannot miss a method, including one added later.
/// Every `StoreLayer` is a [`CheckpointStore`] (a blanket impl calls the layer's methods), hence a
/// [`DynCheckpointStore`]: `Arc::new(layer)` is a [`StoreRef`].
///
/// ```
/// use agentic_engine::{DynCheckpointStore, StepRecord, StoreError, StoreLayer, StoreRef};
///
/// /// Counts the appends; everything else is the wrapped store's.
/// struct Counting {
///     inner: StoreRef,
///     appends: std::sync::atomic::AtomicU64,
/// }
///
/// impl StoreLayer for Counting {
///     fn inner(&self) -> &dyn DynCheckpointStore {
///         &*self.inner
///     }
///
///     async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
///         self.appends.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///         self.inner.append_dyn(record).await
///     }
/// }
/// ```
///
/// # Where a new store method goes
/// All in this file: (1) [`CheckpointStore`], with a default body unless every store must implement it;
/// (2) [`DynCheckpointStore`] as `NAME_dyn`, and its blanket impl for every `CheckpointStore`; (3) here, with a
/// default body forwarding to `self.inner().NAME_dyn(..)`; (4) the blanket `impl<L: StoreLayer>
/// CheckpointStore for L` below, calling `StoreLayer::NAME`. Then the stores of `agentic-store` (memory, sled,
/// PostgreSQL: `store/src/`) implement it where the default of (1) does not fit, and a layer overrides it only
/// when it changes what the method does (`JournalTap` in `server/src/events.rs`, `KillAfter` in
/// `src/cli/crash.rs`).
pub trait StoreLayer: Send + Sync + 'static {
    /// The wrapped store, which every method not overridden is forwarded to.
    fn inner(&self) -> &dyn DynCheckpointStore;

    /// [`CheckpointStore::append`]; by default the wrapped store's.
    fn append(&self, record: StepRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().append_dyn(record).await }
    }

    /// [`CheckpointStore::flush`]; by default the wrapped store's.
    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().flush_dyn().await }
    }

    /// [`CheckpointStore::put_run`]; by default the wrapped store's.
    fn put_run(&self, run: RunRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().put_run_dyn(run).await }
    }

    /// [`CheckpointStore::run`]; by default the wrapped store's.
    fn run(&self, run_id: &str) -> impl Future<Output = Result<Option<RunRecord>, StoreError>> + Send {
        async move { self.inner().run_dyn(run_id).await }
    }

    /// [`CheckpointStore::runs`]; by default the wrapped store's.
    fn runs(&self) -> impl Future<Output = Result<Vec<RunRecord>, StoreError>> + Send {
        async move { self.inner().runs_dyn().await }
    }

    /// [`CheckpointStore::records`]; by default the wrapped store's.
    fn records(&self, run_id: &str) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send {
        async move { self.inner().records_dyn(run_id).await }
    }

    /// [`CheckpointStore::load`]; by default the wrapped store's.
    fn load(&self, run_id: &str) -> impl Future<Output = Result<RunImage, StoreError>> + Send {
        async move { self.inner().load_dyn(run_id).await }
    }

    /// [`CheckpointStore::flush_run`]; by default the wrapped store's.
    fn flush_run(&self, run_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().flush_run_dyn(run_id).await }
    }

    /// [`CheckpointStore::in_memory`]; by default the wrapped store's.
    fn in_memory(&self) -> bool {
        self.inner().in_memory_dyn()
    }

    /// [`CheckpointStore::shared`]; by default the wrapped store's.
    fn shared(&self) -> bool {
        self.inner().shared_dyn()
    }

    /// [`CheckpointStore::acquire_lease`]; by default the wrapped store's.
    fn acquire_lease(&self, run_id: &str) -> impl Future<Output = Result<Option<Lease>, StoreError>> + Send {
        async move { self.inner().acquire_lease_dyn(run_id).await }
    }

    /// [`CheckpointStore::renew_leases`]; by default the wrapped store's.
    fn renew_leases(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        async move { self.inner().renew_leases_dyn().await }
    }

    /// [`CheckpointStore::release_lease`]; by default the wrapped store's.
    fn release_lease(&self, run_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().release_lease_dyn(run_id).await }
    }

    /// [`CheckpointStore::takeover_candidates`]; by default the wrapped store's.
    fn takeover_candidates(&self) -> impl Future<Output = Result<Vec<RunRecord>, StoreError>> + Send {
        async move { self.inner().takeover_candidates_dyn().await }
    }

    /// [`CheckpointStore::update_run`]; by default the wrapped store's.
    fn update_run(
        &self,
        run_id: &str,
        change: RunUpdate,
    ) -> impl Future<Output = Result<Option<Result<RunRecord, String>>, StoreError>> + Send {
        async move { self.inner().update_run_dyn(run_id, change).await }
    }

    /// [`CheckpointStore::put_spec`]; by default the wrapped store's.
    fn put_spec(&self, text: &str) -> impl Future<Output = Result<String, StoreError>> + Send {
        async move { self.inner().put_spec_dyn(text).await }
    }

    /// [`CheckpointStore::spec`]; by default the wrapped store's.
    fn spec(&self, hash: &str) -> impl Future<Output = Result<Option<String>, StoreError>> + Send {
        async move { self.inner().spec_dyn(hash).await }
    }

    /// [`CheckpointStore::request_cancel`]; by default the wrapped store's.
    fn request_cancel(&self, run_id: &str) -> impl Future<Output = Result<Option<RunRecord>, StoreError>> + Send {
        async move { self.inner().request_cancel_dyn(run_id).await }
    }

    /// [`CheckpointStore::records_from`]; by default the wrapped store's.
    fn records_from(
        &self,
        run_id: &str,
        from: u64,
    ) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send {
        async move { self.inner().records_from_dyn(run_id, from).await }
    }

    /// [`CheckpointStore::notify`]; by default the wrapped store's.
    fn notify(&self, channel: &str, payloads: Vec<String>) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().notify_dyn(channel, payloads).await }
    }

    /// [`CheckpointStore::listen`]; by default the wrapped store's.
    fn listen(&self, channels: Vec<String>) -> impl Future<Output = Result<Option<NoticeReceiver>, StoreError>> + Send {
        async move { self.inner().listen_dyn(channels).await }
    }

    /// [`CheckpointStore::schedules`]; by default the wrapped store's.
    fn schedules(&self) -> impl Future<Output = Result<Vec<ScheduleRecord>, StoreError>> + Send {
        async move { self.inner().schedules_dyn().await }
    }

    /// [`CheckpointStore::schedule`]; by default the wrapped store's.
    fn schedule(&self, id: &str) -> impl Future<Output = Result<Option<ScheduleRecord>, StoreError>> + Send {
        async move { self.inner().schedule_dyn(id).await }
    }

    /// [`CheckpointStore::change_schedule`]; by default the wrapped store's.
    fn change_schedule(
        &self,
        id: &str,
        change: ScheduleChange,
    ) -> impl Future<Output = Result<Result<Option<ScheduleRecord>, String>, StoreError>> + Send {
        async move { self.inner().change_schedule_dyn(id, change).await }
    }

    /// [`CheckpointStore::put_key`]; by default the wrapped store's.
    fn put_key(&self, key: KeyRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().put_key_dyn(key).await }
    }

    /// [`CheckpointStore::keys`]; by default the wrapped store's.
    fn keys(&self) -> impl Future<Output = Result<Vec<KeyRecord>, StoreError>> + Send {
        async move { self.inner().keys_dyn().await }
    }

    /// [`CheckpointStore::append_audit`]; by default the wrapped store's.
    fn append_audit(&self, entry: AuditEntry) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move { self.inner().append_audit_dyn(entry).await }
    }

    /// [`CheckpointStore::tenant_view`]; by default the wrapped store's.
    fn tenant_view(&self, tenant: &str) -> Option<StoreRef> {
        self.inner().tenant_view_dyn(tenant)
    }

    /// [`CheckpointStore::audit`]; by default the wrapped store's.
    fn audit(&self, limit: usize) -> impl Future<Output = Result<Vec<AuditEntry>, StoreError>> + Send {
        async move { self.inner().audit_dyn(limit).await }
    }

    /// [`CheckpointStore::capacity`]; by default the wrapped store's.
    fn capacity(
        &self,
        op: crate::capacity::CapacityOp,
    ) -> impl Future<Output = Result<Option<crate::capacity::CapacityAnswer>, StoreError>> + Send {
        async move { self.inner().capacity_dyn(op).await }
    }
}

/// Every layer is a store: each method is the layer's (its override, or the forward to the wrapped store).
impl<L: StoreLayer> CheckpointStore for L {
    fn append(&self, record: StepRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::append(self, record)
    }

    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::flush(self)
    }

    fn put_run(&self, run: RunRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::put_run(self, run)
    }

    fn run(&self, run_id: &str) -> impl Future<Output = Result<Option<RunRecord>, StoreError>> + Send {
        StoreLayer::run(self, run_id)
    }

    fn runs(&self) -> impl Future<Output = Result<Vec<RunRecord>, StoreError>> + Send {
        StoreLayer::runs(self)
    }

    fn records(&self, run_id: &str) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send {
        StoreLayer::records(self, run_id)
    }

    fn load(&self, run_id: &str) -> impl Future<Output = Result<RunImage, StoreError>> + Send {
        StoreLayer::load(self, run_id)
    }

    fn flush_run(&self, run_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::flush_run(self, run_id)
    }

    fn in_memory(&self) -> bool {
        StoreLayer::in_memory(self)
    }

    fn shared(&self) -> bool {
        StoreLayer::shared(self)
    }

    fn acquire_lease(&self, run_id: &str) -> impl Future<Output = Result<Option<Lease>, StoreError>> + Send {
        StoreLayer::acquire_lease(self, run_id)
    }

    fn renew_leases(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        StoreLayer::renew_leases(self)
    }

    fn release_lease(&self, run_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::release_lease(self, run_id)
    }

    fn takeover_candidates(&self) -> impl Future<Output = Result<Vec<RunRecord>, StoreError>> + Send {
        StoreLayer::takeover_candidates(self)
    }

    fn update_run(
        &self,
        run_id: &str,
        change: RunUpdate,
    ) -> impl Future<Output = Result<Option<Result<RunRecord, String>>, StoreError>> + Send {
        StoreLayer::update_run(self, run_id, change)
    }

    fn put_spec(&self, text: &str) -> impl Future<Output = Result<String, StoreError>> + Send {
        StoreLayer::put_spec(self, text)
    }

    fn spec(&self, hash: &str) -> impl Future<Output = Result<Option<String>, StoreError>> + Send {
        StoreLayer::spec(self, hash)
    }

    fn request_cancel(&self, run_id: &str) -> impl Future<Output = Result<Option<RunRecord>, StoreError>> + Send {
        StoreLayer::request_cancel(self, run_id)
    }

    fn records_from(
        &self,
        run_id: &str,
        from: u64,
    ) -> impl Future<Output = Result<Vec<StepRecord>, StoreError>> + Send {
        StoreLayer::records_from(self, run_id, from)
    }

    fn notify(&self, channel: &str, payloads: Vec<String>) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::notify(self, channel, payloads)
    }

    fn listen(&self, channels: Vec<String>) -> impl Future<Output = Result<Option<NoticeReceiver>, StoreError>> + Send {
        StoreLayer::listen(self, channels)
    }

    fn schedules(&self) -> impl Future<Output = Result<Vec<ScheduleRecord>, StoreError>> + Send {
        StoreLayer::schedules(self)
    }

    fn schedule(&self, id: &str) -> impl Future<Output = Result<Option<ScheduleRecord>, StoreError>> + Send {
        StoreLayer::schedule(self, id)
    }

    fn change_schedule(
        &self,
        id: &str,
        change: ScheduleChange,
    ) -> impl Future<Output = Result<Result<Option<ScheduleRecord>, String>, StoreError>> + Send {
        StoreLayer::change_schedule(self, id, change)
    }

    fn put_key(&self, key: KeyRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::put_key(self, key)
    }

    fn keys(&self) -> impl Future<Output = Result<Vec<KeyRecord>, StoreError>> + Send {
        StoreLayer::keys(self)
    }

    fn append_audit(&self, entry: AuditEntry) -> impl Future<Output = Result<(), StoreError>> + Send {
        StoreLayer::append_audit(self, entry)
    }

    fn tenant_view(&self, tenant: &str) -> Option<StoreRef> {
        StoreLayer::tenant_view(self, tenant)
    }

    fn audit(&self, limit: usize) -> impl Future<Output = Result<Vec<AuditEntry>, StoreError>> + Send {
        StoreLayer::audit(self, limit)
    }

    fn capacity(
        &self,
        op: crate::capacity::CapacityOp,
    ) -> impl Future<Output = Result<Option<crate::capacity::CapacityAnswer>, StoreError>> + Send {
        StoreLayer::capacity(self, op)
    }
}

/// The receiving end of [`CheckpointStore::listen`].
pub type NoticeReceiver = tokio::sync::mpsc::UnboundedReceiver<Notice>;

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
    fn flush_run_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.flush_run(run_id))
    }
    fn in_memory_dyn(&self) -> bool {
        self.in_memory()
    }
    fn shared_dyn(&self) -> bool {
        self.shared()
    }
    fn acquire_lease_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<Lease>, StoreError>> {
        Box::pin(self.acquire_lease(run_id))
    }
    fn renew_leases_dyn(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(self.renew_leases())
    }
    fn release_lease_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.release_lease(run_id))
    }
    fn takeover_candidates_dyn(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        Box::pin(self.takeover_candidates())
    }
    fn update_run_dyn<'a>(
        &'a self,
        run_id: &'a str,
        change: RunUpdate,
    ) -> BoxFuture<'a, Result<Option<Result<RunRecord, String>>, StoreError>> {
        Box::pin(self.update_run(run_id, change))
    }
    fn put_spec_dyn<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(self.put_spec(text))
    }
    fn spec_dyn<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(self.spec(hash))
    }
    fn request_cancel_dyn<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>> {
        Box::pin(self.request_cancel(run_id))
    }
    fn records_from_dyn<'a>(
        &'a self,
        run_id: &'a str,
        from: u64,
    ) -> BoxFuture<'a, Result<Vec<StepRecord>, StoreError>> {
        Box::pin(self.records_from(run_id, from))
    }
    fn notify_dyn<'a>(&'a self, channel: &'a str, payloads: Vec<String>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.notify(channel, payloads))
    }
    fn listen_dyn(&self, channels: Vec<String>) -> BoxFuture<'_, Result<Option<NoticeReceiver>, StoreError>> {
        Box::pin(self.listen(channels))
    }
    fn schedules_dyn(&self) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, StoreError>> {
        Box::pin(self.schedules())
    }
    fn schedule_dyn<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ScheduleRecord>, StoreError>> {
        Box::pin(self.schedule(id))
    }
    fn change_schedule_dyn<'a>(
        &'a self,
        id: &'a str,
        change: ScheduleChange,
    ) -> BoxFuture<'a, Result<Result<Option<ScheduleRecord>, String>, StoreError>> {
        Box::pin(self.change_schedule(id, change))
    }
    fn put_key_dyn(&self, key: KeyRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.put_key(key))
    }
    fn keys_dyn(&self) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>> {
        Box::pin(self.keys())
    }
    fn append_audit_dyn(&self, entry: AuditEntry) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.append_audit(entry))
    }
    fn tenant_view_dyn(&self, tenant: &str) -> Option<StoreRef> {
        self.tenant_view(tenant)
    }
    fn audit_dyn(&self, limit: usize) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        Box::pin(self.audit(limit))
    }
    fn capacity_dyn(
        &self,
        op: crate::capacity::CapacityOp,
    ) -> BoxFuture<'_, Result<Option<crate::capacity::CapacityAnswer>, StoreError>> {
        Box::pin(self.capacity(op))
    }
}

/// A shared store, as the engine holds it.
pub type StoreRef = Arc<dyn DynCheckpointStore>;

#[cfg(test)]
mod milestone_tests {
    use serde_json::json;

    use super::MilestoneKind;

    #[test]
    fn milestone_kinds_keep_their_stored_names() {
        let all = [
            (MilestoneKind::Started, "started"),
            (MilestoneKind::Resumed, "resumed"),
            (MilestoneKind::NewTurn, "new_turn"),
            (MilestoneKind::Forked, "forked"),
            (MilestoneKind::Upgraded, "upgraded"),
            (MilestoneKind::Suspended, "suspended"),
            (MilestoneKind::Completed, "completed"),
            (MilestoneKind::Failed, "failed"),
            (MilestoneKind::Cancelled, "cancelled"),
            (MilestoneKind::Interrupted, "interrupted"),
        ];
        for (kind, name) in all {
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(name));
            assert_eq!(serde_json::from_value::<MilestoneKind>(json!(name)).unwrap(), kind);
            assert_eq!(kind.to_string(), name);
        }
        // A record written by a later version still reads.
        assert_eq!(serde_json::from_value::<MilestoneKind>(json!("teleported")).unwrap(), MilestoneKind::Unknown);
    }
}
