//! The runtime's messages, in one place: what the [`ScopeMsg`] of a run's scope actor, the [`SupervisorMsg`]
//! of a composite's supervisor and the [`AgentMsg`] of a leaf's agent actor carry, and how a finished
//! invocation's result travels ([`Report`], [`Delivery`], [`ChildOutcome`]). Reply ports come last. The
//! messages carry values only (frames, agents, results), never the run's shared context: the actors get that
//! when they start, so this module sits below every actor in the runtime's layers.

use std::sync::Arc;

use futures::future::BoxFuture;
use ractor::{ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;
use tokio::sync::oneshot;

use super::async_agents::AsyncEnd;
use super::compensations::Compensation;
use crate::budget::Ledger;
use crate::error::AgentError;
use crate::journal::InvocationRecord;
use crate::journal::PlannerState;
use crate::pending::PendingResponse;
use crate::stop::Stop;
use crate::store::RunImage;

/// The messages of a [`ScopeActor`](super::scope_actor::ScopeActor).
// ractor boxes every message once when sent: the variants' sizes cost nothing more.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ScopeMsg {
    /// Applies a finished invocation's writes and its history record, then hands its result to whoever
    /// waits for it: the supervisor handles a completion only once its writes are in the published snapshot.
    /// The writes go to the layer of the mapper item the invocation served, if any.
    /// Boxed, as the other large payloads: every future that holds a message reserves its size.
    Complete(Box<InvocationDone>),
    /// Applies a delta (to the shared state, or to a mapper item's layer); replies with its sequence number.
    Write { item: Option<Arc<str>>, delta: Vec<(String, Value)>, reply: RpcReplyPort<u64> },
    /// Drops the layer of a mapper item that completed, and the layers nested in it.
    DropLayers(Arc<str>),
    /// Appends one record to the history.
    Record(Box<InvocationRecord>),
    /// Marks a key as being produced by an async agent.
    MarkPending { item: Option<Arc<str>>, key: String, reply: RpcReplyPort<()> },
    /// Ends an async production: its delta, or its error for the readers.
    FinishAsync(Box<FinishAsync>),
    /// The history so far.
    History(RpcReplyPort<Vec<InvocationRecord>>),
    /// What the run spent on models so far in all, with what the invocations suspended at a budget
    /// (`pending`) spent ([`crate::budget::total_usage`]).
    Usage { pending: Vec<PendingResponse>, reply: RpcReplyPort<crate::usage::Usage> },
    /// How many invocations of an agent at a path, for a mapper item, completed so far
    /// ([`InvocationRecord::completed_in`]).
    Completed { agent: Arc<str>, path: Arc<str>, item: Option<Arc<str>>, reply: RpcReplyPort<u32> },
    /// A human answer for a pending-mode human agent of this run, given in-process.
    Answer { id: String, value: Value },
    /// Uses the answer to response `id`, if one was given (each answer is used once).
    TakeAnswer { id: String, reply: RpcReplyPort<Option<Value>> },
    /// The answer to response `id`, if one was given, without using it.
    PeekAnswer { id: String, reply: RpcReplyPort<Option<Value>> },
    /// Replies once an answer to response `id` is given (at once when one is).
    AwaitAnswer { id: String, reply: RpcReplyPort<()> },
    /// The question with agent data the run was suspended with under `id`, while its answer is unused.
    Suspension { id: String, reply: RpcReplyPort<Option<PendingResponse>> },
    /// The answer to `id` was used elsewhere (read from the run's stored record), or its question was dealt
    /// with unanswered: no answer is taken for it any more.
    MarkUsed(String),
    /// A question timed out and its agent acted on it: used, and kept for the run's record.
    TimedOut(Box<PendingResponse>),
    /// Registers the compensation of an action just completed.
    AddCompensation(Box<Compensation>),
    /// Runs the compensations registered at or below a path, most recent first, on a task of their own: a
    /// compensating composite stopped before it decided (the run was cancelled).
    Compensate(Arc<str>),
    /// Takes the compensations registered at or below a path, most recent first.
    TakeCompensations { path: Arc<str>, reply: RpcReplyPort<Vec<Compensation>> },
    /// An async agent started: its end, and its actor (stopped when the run fails).
    AsyncStarted { end: AsyncEnd, actor: ActorCell },
    /// Takes the ends of the async agents not waited for yet.
    TakeAsyncEnds(RpcReplyPort<Vec<AsyncEnd>>),
    /// Stops every async agent still running.
    AbortAsync,
    /// Checks or charges the run's budgets: `f` runs on the ledger, one message at a time, so calls started
    /// together cannot all pass a limit. Sent only by runs with a budget.
    Ledger(Box<dyn FnOnce(&mut Ledger) + Send>),
    /// The saved state of the composite in progress at planner key `key`, taken once: it resumes from it.
    TakeRestore { key: String, reply: RpcReplyPort<Option<PlannerState>> },
    /// The calls journaled by the invocation in progress at planner key `key`, taken once: it continues
    /// from them.
    TakeCalls { key: String, reply: RpcReplyPort<Vec<crate::tool_call::CallEntry>> },
    /// What the run leaves for its record when it ends.
    Leftovers(RpcReplyPort<Leftovers>),
    /// Cancels the run.
    Cancel,
    /// Adds an event subscriber (an actor receiving the run's `RunEvent`s) to the run's process group.
    Subscribe(ActorCell, RpcReplyPort<()>),
    /// Starts the run's root invocation, supervised by this actor; its result goes to `done`.
    StartRoot(Box<RootStart>),
    /// The root invocation finished.
    RootDone(Box<Result<ChildOutcome, Stop>>),
}

/// A finished invocation's writes, history record and result ([`ScopeMsg::Complete`]).
pub(crate) struct InvocationDone {
    /// The layer of the mapper item the invocation served, if any.
    pub(crate) item: Option<Arc<str>>,
    pub(crate) delta: Vec<(String, Value)>,
    pub(crate) record: Option<InvocationRecord>,
    pub(crate) then: Delivery,
}

/// The end of an async production ([`ScopeMsg::FinishAsync`]).
pub(crate) struct FinishAsync {
    pub(crate) item: Option<Arc<str>>,
    pub(crate) key: String,
    pub(crate) result: Result<Vec<(String, Value)>, AgentError>,
    pub(crate) reply: RpcReplyPort<u64>,
}

/// What a run leaves for its record when it ends ([`ScopeMsg::Leftovers`]).
#[derive(Debug, Default)]
pub(crate) struct Leftovers {
    /// The answers not used (kept for a later resume).
    pub(crate) unused_answers: std::collections::BTreeMap<String, Value>,
    /// The questions with agent data the run was suspended with whose answers were not used.
    pub(crate) unresolved: Vec<PendingResponse>,
    /// The questions that timed out in this session.
    pub(crate) timed_out: Vec<PendingResponse>,
}

/// What the root of a run needs to start (and to start again after a crash of its tree).
pub(crate) struct RootStart {
    /// The run whose root the scope actor supervises.
    pub(crate) run: Arc<dyn RootRun>,
    pub(crate) done: oneshot::Sender<Result<ChildOutcome, Stop>>,
}

/// What a scope actor asks of the run whose root it supervises ([`ScopeMsg::StartRoot`]). The run's session
/// implements it: the scope actor sits below the run's context in the runtime's layers (the context holds
/// the scope's handle), so it reaches the run through this trait, and a test can give it a run of its own.
pub(crate) trait RootRun: Send + Sync + 'static {
    /// The run's id, for logs.
    fn run_id(&self) -> &str;
    /// Adds an event subscriber to the run's process group.
    fn join_subscriber(&self, subscriber: ActorCell);
    /// Cancels the run.
    fn cancel(&self);
    /// Starts the root invocation's actor, linked to `supervisor` (the scope actor); returns its cell.
    fn spawn_root(&self, supervisor: ActorCell) -> BoxFuture<'_, Result<ActorCell, AgentError>>;
    /// The error the root actor's failure `err` stands for.
    fn tree_error(&self, err: &ActorProcessingErr) -> AgentError;
    /// Whether the run has a journal to restart its root from.
    fn restartable(&self) -> bool;
    /// The run's image from its journal, to restart the root from (flushing what is on its way first).
    fn reload(&self) -> BoxFuture<'_, Result<RunImage, AgentError>>;
}

/// The messages of a [`SupervisorActor`](super::spawn::SupervisorActor).
// ractor boxes every message once when sent: the variants' sizes cost nothing more.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SupervisorMsg {
    /// A child finished; `failed` is the record of a failed invocation when the run is journaled.
    /// Boxed: every future that holds a message reserves its size.
    ChildDone(Box<ChildDone>),
    /// The composite's own timeout expired.
    Timeout,
}

/// A child's completion ([`SupervisorMsg::ChildDone`]).
pub(crate) struct ChildDone {
    pub(crate) id: u64,
    pub(crate) result: Result<ChildOutcome, Stop>,
    pub(crate) failed: Option<InvocationRecord>,
}

/// Where an invocation's result goes when it ends.
pub(crate) enum Report {
    /// To the supervisor that spawned it, as its call number `id`.
    Parent { to: ActorRef<SupervisorMsg>, id: u64 },
    /// To the run's scope actor: the root invocation.
    Root,
    /// To a future waiting for a composite invoked as a plain agent (its value, and whether to write it), or
    /// for the start of an async agent restarted on resume.
    Bare(oneshot::Sender<Result<(Value, bool), Stop>>),
    /// Nobody waits.
    Nobody,
}

/// A finished invocation's result on its way to its [`Report`].
pub(crate) struct Delivery {
    pub(crate) report: Report,
    pub(crate) result: Result<ChildOutcome, Stop>,
    /// The record of a failed attempt, for the supervisor's journal.
    pub(crate) failed: Option<InvocationRecord>,
}

impl Delivery {
    /// Hands the result over; `scope` receives the root's.
    pub(crate) fn deliver(self, scope: &ActorRef<ScopeMsg>) {
        let Delivery { report, result, failed } = self;
        match report {
            Report::Parent { to, id } => {
                let _ = to.cast(SupervisorMsg::ChildDone(Box::new(ChildDone { id, result, failed })));
            }
            Report::Root => {
                let _ = scope.cast(ScopeMsg::RootDone(Box::new(result)));
            }
            Report::Bare(tx) => {
                // A bare supervisor reports its own (value, write); an outcome here has nothing left to write.
                let _ = tx.send(result.map(|o| (o.output, false)));
            }
            Report::Nobody => {}
        }
    }
}

/// What a finished child invocation hands back to its supervisor.
#[derive(Debug, Default)]
pub(crate) struct ChildOutcome {
    /// The agent's result.
    pub(crate) output: Value,
    /// Keys written by this invocation itself; kept only when the run is journaled or the agent is async.
    pub(crate) delta: Vec<(String, Value)>,
    /// The invocation record (absent when skipped or started async).
    pub(crate) record: Option<InvocationRecord>,
    /// Calls the invocation journals with its completion (its last model turn, SPEC.md §4).
    pub(crate) calls: Vec<crate::tool_call::CallEntry>,
    /// True when an optional agent was skipped.
    pub(crate) skipped: bool,
    /// True when an async agent was started (its completion comes later, outside the planner).
    pub(crate) async_started: bool,
    /// For an async start: told once the start's step is journaled (or dropped), which the agent's completion
    /// waits for, so that the journal never holds an async agent's end before its start.
    pub(crate) start_journaled: Option<tokio::sync::oneshot::Sender<()>>,
}
