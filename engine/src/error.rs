//! Error types of the engine, split by operation.
//!
//! [`AgentError`] is the one error type every invocation returns, at every nesting level: a failure inside a
//! parallel branch surfaces with the same variant as the same failure in a sequence.

use std::sync::Arc;
use std::time::Duration;

/// Why an agent invocation (leaf or composite) failed.
///
/// Cloneable so that the error of an async agent can be handed to every reader that waited for its output.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A required input key was absent from the scope (and the agent is not optional).
    #[error("agent `{agent}` ({path}): missing argument `{key}`")]
    MissingArgument {
        /// Agent name.
        agent: String,
        /// Agent path id (`root/1/0`).
        path: String,
        /// The missing state key.
        key: String,
    },
    /// An input value could not be coerced to the declared type.
    #[error("agent `{agent}` ({path}): input `{key}` = {value} cannot be coerced to {expected}")]
    Coercion {
        /// Agent name.
        agent: String,
        /// Agent path id.
        path: String,
        /// The state key.
        key: String,
        /// The offending value, as JSON text.
        value: String,
        /// The declared type.
        expected: String,
    },
    /// The agent's own code reported a failure, or a call it made (a model, a tool, a remote agent) failed.
    #[error("agent `{agent}` ({path}) failed: {message}")]
    Failed {
        /// Agent name.
        agent: String,
        /// Agent path id.
        path: String,
        /// What went wrong, as the agent said it.
        message: String,
        /// The typed failure behind it, when a call failed: where it came from and whether trying again can
        /// help ([`AgentError::transience`]). `None` for a failure the agent's code reported as text.
        #[source]
        cause: Option<Cause>,
    },
    /// The invocation exceeded its `timeout_ms`.
    #[error("agent `{agent}` ({path}) timed out after {timeout_ms} ms")]
    Timeout {
        /// Agent name.
        agent: String,
        /// Agent path id.
        path: String,
        /// The configured timeout in milliseconds.
        timeout_ms: u64,
    },
    /// Evaluating an expression or an output function failed.
    #[error("agent `{agent}` ({path}): {what} failed: {message}")]
    Expression {
        /// Agent name.
        agent: String,
        /// Agent path id.
        path: String,
        /// Which expression (`exit condition`, `output`, `branch 2 condition`, ...).
        what: String,
        /// The evaluator's message.
        message: String,
    },
    /// A value in the scope had the wrong shape for what a planner needed (e.g. mapper items not a list).
    #[error("agent `{agent}` ({path}): key `{key}` must be {expected}, found {found}")]
    WrongType {
        /// Agent name.
        agent: String,
        /// Agent path id.
        path: String,
        /// The state key.
        key: String,
        /// What was expected (`a list`).
        expected: String,
        /// The JSON type found (`string`).
        found: String,
    },
    /// A planner returned "nothing to do" while nothing was in flight: it would wait forever.
    #[error("planner of `{agent}` ({path}) stalled: nothing to do and no agent in flight")]
    PlannerStalled {
        /// Composite agent name.
        agent: String,
        /// Composite agent path id.
        path: String,
    },
    /// A planner reported an error of its own (bad agent index, invalid state, ...).
    #[error("planner of `{agent}` ({path}): {message}")]
    Planner {
        /// Composite agent name.
        agent: String,
        /// Composite agent path id.
        path: String,
        /// The planner's message.
        message: String,
    },
    /// A run could not start or resume (changed workflow, state that no longer fits a type, run already
    /// active, store failure).
    #[error("run `{run_id}`: {message}")]
    Run {
        /// The run id.
        run_id: String,
        /// What is wrong.
        message: String,
    },
    /// A run could not start, resume or go on because its store failed: the cause's origin is
    /// [`CauseOrigin::Store`] and it wraps the [`StoreError`] ([`Cause::downcast_ref`]); its transience says
    /// whether trying again can help (an unreachable store is transient).
    #[error("run `{run_id}`: {cause}")]
    Store {
        /// The run id.
        run_id: String,
        /// The store's failure.
        #[source]
        cause: Cause,
    },
    /// The run was cancelled before this invocation finished.
    #[error("run cancelled")]
    Cancelled,
    /// An engine-internal failure (actor could not start, journal write failed, ...).
    #[error("engine: {0}")]
    Internal(Arc<str>),
}

impl AgentError {
    /// Builds an [`AgentError::Failed`] for the agent at `path` named `agent`, without a typed cause.
    pub fn failed(agent: impl Into<String>, path: impl Into<String>, message: impl Into<String>) -> Self {
        AgentError::Failed { agent: agent.into(), path: path.into(), message: message.into(), cause: None }
    }

    /// Builds an [`AgentError::Failed`] for the agent at `path` named `agent` whose call failed with `cause`;
    /// the message is the cause's.
    pub fn caused(agent: impl Into<String>, path: impl Into<String>, cause: Cause) -> Self {
        AgentError::Failed { agent: agent.into(), path: path.into(), message: cause.to_string(), cause: Some(cause) }
    }

    /// The typed cause of an [`AgentError::Failed`] when it has one, or of an [`AgentError::Store`].
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            AgentError::Failed { cause, .. } => cause.as_ref(),
            AgentError::Store { cause, .. } => Some(cause),
            _ => None,
        }
    }

    /// Whether running the failed invocation again can succeed: [`Transience::Permanent`] for a failure the
    /// same call repeats (a model's 401, an unknown model, a request the provider refuses), transient for a
    /// timeout or a cause that says so (a 429 or 5xx, with the server's `Retry-After`), otherwise unknown (a
    /// missing argument may be repaired; an agent's own failure may not recur). [`crate::RetryPolicy`] does
    /// not retry a permanent failure unless told to.
    pub fn transience(&self) -> Transience {
        match self {
            AgentError::Failed { cause: Some(c), .. } | AgentError::Store { cause: c, .. } => c.transience(),
            AgentError::Timeout { .. } => Transience::Transient { retry_after: None },
            AgentError::Cancelled => Transience::Permanent,
            _ => Transience::Unknown,
        }
    }

    /// Whether the invocation failed because its store could not be reached ([`StoreError::Unavailable`] as
    /// the cause): nothing is wrong with the run, trying again later can succeed.
    pub fn is_store_unavailable(&self) -> bool {
        self.cause().and_then(|c| c.downcast_ref::<StoreError>()).is_some_and(StoreError::is_unavailable)
    }

    /// Builds an [`AgentError::Internal`].
    pub fn internal(message: impl std::fmt::Display) -> Self {
        AgentError::Internal(Arc::from(message.to_string()))
    }

    /// The variant as a stable snake_case word (`missing_argument`, `timeout`, `failed`, ...): what error handler
    /// expressions see as `error.kind` and spans record as `error.type`.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::MissingArgument { .. } => "missing_argument",
            AgentError::Coercion { .. } => "coercion",
            AgentError::Failed { .. } => "failed",
            AgentError::Timeout { .. } => "timeout",
            AgentError::Expression { .. } => "expression",
            AgentError::WrongType { .. } => "wrong_type",
            AgentError::PlannerStalled { .. } => "planner_stalled",
            AgentError::Planner { .. } => "planner",
            AgentError::Run { .. } => "run",
            AgentError::Store { .. } => "store",
            AgentError::Cancelled => "cancelled",
            AgentError::Internal(_) => "internal",
        }
    }

    /// The path id of the agent that failed, when the error names one.
    pub fn agent_path(&self) -> Option<&str> {
        match self {
            AgentError::MissingArgument { path, .. }
            | AgentError::Coercion { path, .. }
            | AgentError::Failed { path, .. }
            | AgentError::Timeout { path, .. }
            | AgentError::Expression { path, .. }
            | AgentError::WrongType { path, .. }
            | AgentError::PlannerStalled { path, .. }
            | AgentError::Planner { path, .. } => Some(path),
            AgentError::Cancelled | AgentError::Internal(_) | AgentError::Run { .. } | AgentError::Store { .. } => None,
        }
    }
}

/// Where the typed cause of a failed invocation came from ([`Cause::origin`]); what error handler
/// expressions see as `error.cause` (`model`, `tool`, `store`, `remote`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CauseOrigin {
    /// A chat model call (`agentic_agents::model::ModelError`).
    Model,
    /// A tool call (a Rust tool or an MCP server's tool).
    Tool,
    /// The checkpoint store.
    Store,
    /// A remote agent (A2A).
    Remote,
}

impl CauseOrigin {
    /// The origin as a stable lowercase word (`model`, `tool`, `store`, `remote`).
    pub fn as_str(self) -> &'static str {
        match self {
            CauseOrigin::Model => "model",
            CauseOrigin::Tool => "tool",
            CauseOrigin::Store => "store",
            CauseOrigin::Remote => "remote",
        }
    }
}

/// Whether a failed call can succeed when made again ([`AgentError::transience`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transience {
    /// The same call fails the same way (an HTTP 400, 401, 403 or 404; a request the provider refuses).
    Permanent,
    /// Trying again later can succeed (a timeout, a lost connection, an HTTP 429 or 5xx).
    Transient {
        /// How long the server asked to wait (`Retry-After`), when it said.
        retry_after: Option<Duration>,
    },
    /// Nothing says either way.
    Unknown,
}

/// The typed cause of an [`AgentError::Failed`]: the failed call's own error (downcast it with
/// [`Cause::downcast_ref`], e.g. to a `ModelError`), where it came from, whether trying again can help, and
/// the HTTP status when there was one. Cheap to clone.
#[derive(Clone)]
pub struct Cause {
    origin: CauseOrigin,
    transience: Transience,
    status: Option<u16>,
    context: Option<Arc<str>>,
    error: Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl Cause {
    /// A cause from `origin` wrapping `error`, with the given transience and no HTTP status.
    pub fn new(
        origin: CauseOrigin,
        transience: Transience,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Cause { origin, transience, status: None, context: None, error: Arc::new(error) }
    }

    /// The same cause said with what was being done (`supervisor model`): shown as `CONTEXT: ERROR`.
    pub fn context(mut self, context: impl Into<Arc<str>>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// The same cause with the HTTP status the call was answered with.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Where the cause came from.
    pub fn origin(&self) -> CauseOrigin {
        self.origin
    }

    /// Whether trying again can help.
    pub fn transience(&self) -> Transience {
        self.transience
    }

    /// The HTTP status the failed call was answered with, when there was one.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The wrapped error as `T`, when it is one.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.error.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cause")
            .field("origin", &self.origin)
            .field("transience", &self.transience)
            .field("status", &self.status)
            .field("context", &self.context)
            .field("error", &self.error)
            .finish()
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.context {
            Some(context) => write!(f, "{context}: {}", self.error),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Display is the wrapped error's own, so the chain goes on with what it wraps.
        self.error.source()
    }
}

/// Why a system could not be built (caught before anything runs).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// Two agents declare different types for the same state key: two value types, or two Rust types.
    #[error(
        "key `{key}` is declared as {first} by `{first_agent}` ({first_path}) and as {second} by `{second_agent}` \
         ({second_path})"
    )]
    ConflictingTypes {
        /// The state key.
        key: String,
        /// First declared type (`object`, or with its Rust type: ``object `app::Story` ``).
        first: String,
        /// Agent that declared it first.
        first_agent: String,
        /// That agent's path in the system being built (`root/0`).
        first_path: String,
        /// Conflicting type.
        second: String,
        /// Agent that declared the conflicting type.
        second_agent: String,
        /// That agent's path in the system being built.
        second_path: String,
    },
    /// A builder was missing a required part or had an invalid one.
    #[error("`{agent}`: {message}")]
    Invalid {
        /// The agent being built.
        agent: String,
        /// What is wrong.
        message: String,
    },
}

/// The error a store backend reported, kept as it was typed (`tokio_postgres::Error`, deadpool's `PoolError`,
/// `sled::Error`, `std::io::Error`, ...): downcast it with [`std::error::Error::downcast_ref`]. Shared, so a
/// [`StoreError`] stays cheap to clone.
pub type StoreSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why a journal or checkpoint store operation failed.
///
/// A backend failure is one of two kinds: [`StoreError::Unavailable`] when the store cannot be reached right
/// now (connection refused or lost, the pool timed out waiting for a connection, the database restarting or
/// shutting down: trying again later can succeed) and [`StoreError::Backend`] for any other failure of the
/// backend. Both keep the backend's own error as their [`std::error::Error::source`]. [`StoreError::transience`]
/// says whether trying again can help; `Cause::from(StoreError)` makes it the typed cause of an agent error
/// (origin [`CauseOrigin::Store`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached right now: the connection was refused or lost, no pooled connection came in
    /// time, the database is restarting or shutting down. Nothing of the operation is known to be written;
    /// trying again later can succeed. Displayed as `store unavailable: MESSAGE`.
    Unavailable {
        /// The backend (`postgres`, `sled`, `server`).
        backend: &'static str,
        /// What was being done and where (`flush in store postgres://u@h/db: connection refused`).
        message: Arc<str>,
        /// The backend's own error, when there is one.
        source: Option<StoreSource>,
    },
    /// The store backend failed for another reason than being unreachable (a statement refused, a disk error,
    /// a value it cannot hold, an operation the store does not offer). Displayed as `store backend: MESSAGE`.
    Backend {
        /// What was being done and what failed (`put_spec in store postgres://u@h/db: permission denied`).
        message: Arc<str>,
        /// The backend's own error, when there is one.
        source: Option<StoreSource>,
    },
    /// Stored data could not be decoded.
    Corrupt {
        /// The run the record belongs to.
        run_id: String,
        /// Which record (`step 12`, `run record`).
        record: String,
        /// The decoder's message.
        message: String,
    },
    /// No run with that id.
    UnknownRun(String),
    /// A stored schedule could not be decoded ([`crate::CheckpointStore::schedules`]).
    CorruptSchedule {
        /// The schedule's id.
        id: String,
        /// The decoder's message.
        message: String,
    },
    /// This process no longer holds the run's lease: another process took the run over (its lease had
    /// expired), so this one may not write the run any more; nothing of the refused write was stored
    /// ([`crate::CheckpointStore::acquire_lease`], fencing: `docs/store-format.md`).
    LeaseLost {
        /// The run.
        run_id: String,
        /// The owner id of the process that holds the lease now (empty when nobody does).
        holder: String,
        /// The run's fencing token now.
        token: u64,
        /// The token this process held.
        held: u64,
    },
}

impl StoreError {
    /// A [`StoreError::Backend`] with only a message (no backend error behind it: a value the store cannot hold,
    /// an operation it does not offer).
    pub fn backend(message: impl Into<Arc<str>>) -> Self {
        StoreError::Backend { message: message.into(), source: None }
    }

    /// A [`StoreError::Backend`] saying `message` about the backend's error `source`.
    pub fn backend_caused(
        message: impl Into<Arc<str>>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend { message: message.into(), source: Some(Arc::new(source)) }
    }

    /// A [`StoreError::Unavailable`] of `backend` (`postgres`, `sled`, `server`) saying `message` about its
    /// error `source`.
    pub fn unavailable(backend: &'static str, message: impl Into<Arc<str>>, source: Option<StoreSource>) -> Self {
        StoreError::Unavailable { backend, message: message.into(), source }
    }

    /// Whether the store could not be reached ([`StoreError::Unavailable`]): the failure says nothing about the
    /// operation, and trying again later can succeed (the CLI exits 75, the server answers `503` with
    /// `Retry-After`).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// Whether trying the operation again can succeed: transient for an unreachable store (no `retry_after`:
    /// the store does not say when it is back), unknown for another backend failure, permanent for a corrupt
    /// record, an unknown run and a lost lease (the same operation fails the same way).
    pub fn transience(&self) -> Transience {
        match self {
            StoreError::Unavailable { .. } => Transience::Transient { retry_after: None },
            StoreError::Backend { .. } => Transience::Unknown,
            StoreError::Corrupt { .. }
            | StoreError::UnknownRun(_)
            | StoreError::CorruptSchedule { .. }
            | StoreError::LeaseLost { .. } => Transience::Permanent,
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Unavailable { message, .. } => write!(f, "store unavailable: {message}"),
            StoreError::Backend { message, .. } => write!(f, "store backend: {message}"),
            StoreError::Corrupt { run_id, record, message } => {
                write!(f, "run `{run_id}`: record {record} is corrupt: {message}")
            }
            StoreError::UnknownRun(run_id) => write!(f, "no run `{run_id}` in the store"),
            StoreError::CorruptSchedule { id, message } => {
                write!(f, "schedule `{id}`: its stored record is corrupt: {message}")
            }
            StoreError::LeaseLost { run_id, holder, token, held } => write!(
                f,
                "run `{run_id}`: the lease was lost to another process (now held by `{holder}`, fencing token \
                 {token}; this process held token {held}): it stops writing the run, nothing was written"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Unavailable { source, .. } | StoreError::Backend { source, .. } => {
                source.as_deref().map(|s| s as &(dyn std::error::Error + 'static))
            }
            _ => None,
        }
    }
}

/// A store failure as the typed cause of an agent error: origin [`CauseOrigin::Store`], its
/// [`StoreError::transience`]; the [`StoreError`] itself is what [`Cause::downcast_ref`] finds.
impl From<StoreError> for Cause {
    fn from(e: StoreError) -> Self {
        Cause::new(CauseOrigin::Store, e.transience(), e)
    }
}

/// Why an answer to a suspended run could not be recorded ([`crate::respond`], [`crate::answerable`]). Nothing
/// was recorded. Displayed as `run `ID`: WHAT`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RespondError {
    /// The store holds no run with that id.
    UnknownRun {
        /// The run id asked for.
        run_id: String,
    },
    /// The run is not suspended (it runs, ended, or failed): it waits for no answer. For a failed or
    /// cancelled run the message says that resuming it asks its questions again.
    NotSuspended {
        /// The run.
        run_id: String,
        /// Its status.
        status: crate::status::RunStatus,
        /// Whether a failed or cancelled run had asked questions when it stopped (they take no answer;
        /// resuming it asks them again).
        asked: bool,
    },
    /// The run waits, but not for this response id.
    NotPending {
        /// The run.
        run_id: String,
        /// The response id given.
        response_id: String,
        /// The ids it waits for.
        pending: Vec<String>,
    },
    /// No response id was given and several responses are pending.
    Ambiguous {
        /// The run.
        run_id: String,
        /// The ids it waits for.
        pending: Vec<String>,
    },
    /// The step's deadline has passed (SPEC.md §3): the answer is refused, also when no process has acted
    /// on the timeout yet.
    TimedOut {
        /// The run.
        run_id: String,
        /// The response id.
        response_id: String,
        /// The deadline, RFC 3339 (UTC).
        deadline: String,
        /// What is done instead ("the default value is used", ...).
        instead: String,
    },
    /// The answer is not one the question takes (a `budget` pending response takes a new limit or
    /// `"stop"`, SPEC.md §3); nothing was recorded.
    InvalidAnswer {
        /// The run.
        run_id: String,
        /// The response id.
        response_id: String,
        /// What is wrong.
        message: String,
    },
    /// The answer approves another call than the one pending: its `args_hash` is not the pending tool call's
    /// (SPEC.md §4); nothing was recorded.
    StaleAnswer {
        /// The run.
        run_id: String,
        /// The response id.
        response_id: String,
        /// The pending call's `args_hash`.
        expected: String,
        /// The answer's.
        given: String,
    },
    /// The response has an answer already, not yet used by the run (an answer is given once; a second would
    /// silently replace the first).
    AlreadyAnswered {
        /// The run.
        run_id: String,
        /// The response id.
        response_id: String,
    },
    /// The response is a `wait` step's timer: nobody answers it; it fires at its deadline.
    NotAnswerable {
        /// The run.
        run_id: String,
        /// The response id.
        response_id: String,
        /// When it fires, RFC 3339 (UTC).
        fires_at: String,
    },
    /// The store failed (unreachable, corrupt record, lease lost).
    Store {
        /// The run.
        run_id: String,
        /// The store's error.
        source: StoreError,
    },
}

impl RespondError {
    /// Whether the answer was refused because the run failed or was cancelled: it takes no answer until it is
    /// resumed (callers add how to resume it: `agentic resume ID`, `POST /api/v1/runs/ID/resume`).
    pub fn run_ended_unfinished(&self) -> bool {
        matches!(
            self,
            RespondError::NotSuspended {
                status: crate::status::RunStatus::Failed | crate::status::RunStatus::Cancelled,
                ..
            }
        )
    }

    /// The run the answer was for.
    pub fn run_id(&self) -> &str {
        match self {
            RespondError::UnknownRun { run_id }
            | RespondError::NotSuspended { run_id, .. }
            | RespondError::NotPending { run_id, .. }
            | RespondError::Ambiguous { run_id, .. }
            | RespondError::TimedOut { run_id, .. }
            | RespondError::NotAnswerable { run_id, .. }
            | RespondError::AlreadyAnswered { run_id, .. }
            | RespondError::InvalidAnswer { run_id, .. }
            | RespondError::StaleAnswer { run_id, .. }
            | RespondError::Store { run_id, .. } => run_id,
        }
    }

    /// What is wrong, without the run id.
    fn detail(&self) -> String {
        match self {
            RespondError::UnknownRun { .. } => "no such run in the store".to_string(),
            RespondError::NotSuspended {
                status: status @ (crate::status::RunStatus::Cancelled | crate::status::RunStatus::Failed),
                asked,
                ..
            } => {
                let what = if *status == crate::status::RunStatus::Failed { "has failed" } else { "is cancelled" };
                let again = if *asked { " and asks its questions again" } else { "" };
                format!("{what}: it has no pending response to answer; resuming it continues the run{again}")
            }
            RespondError::NotSuspended { status, .. } => {
                format!("is {status}, not suspended: nothing to respond to")
            }
            RespondError::NotPending { response_id, pending, .. } => {
                format!("no pending response `{response_id}` (pending: {})", pending.join(", "))
            }
            RespondError::Ambiguous { pending, .. } => {
                format!("{} responses are pending ({}): name the one to answer", pending.len(), pending.join(", "))
            }
            RespondError::TimedOut { response_id, deadline, instead, .. } => {
                format!("response `{response_id}` timed out at {deadline}: the answer is refused; {instead}")
            }
            RespondError::InvalidAnswer { response_id, message, .. } => {
                format!("response `{response_id}`: {message}")
            }
            RespondError::StaleAnswer { response_id, expected, given, .. } => format!(
                "the answer to `{response_id}` was given for another call (args_hash {given}); the pending call's \
                 args_hash is {expected}: look at the call again and answer it"
            ),
            RespondError::AlreadyAnswered { response_id, .. } => {
                format!("response `{response_id}` is already answered (resume the run to use the answer)")
            }
            RespondError::NotAnswerable { response_id, fires_at, .. } => {
                format!("`{response_id}` is a wait, not a question: nobody answers it; it fires at {fires_at}")
            }
            RespondError::Store { source, .. } => source.to_string(),
        }
    }
}

impl std::fmt::Display for RespondError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run `{}`: {}", self.run_id(), self.detail())
    }
}

impl std::error::Error for RespondError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RespondError::Store { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An answer refused while a run starts or resumes with it: [`AgentError::Run`] with the same text, or
/// [`AgentError::Store`] with the store's error when the store failed.
impl From<RespondError> for AgentError {
    fn from(e: RespondError) -> Self {
        match e {
            RespondError::Store { run_id, source } => AgentError::Store { run_id, cause: Cause::from(source) },
            e => AgentError::Run { run_id: e.run_id().to_string(), message: e.detail() },
        }
    }
}

/// Why a run could not be forked ([`crate::fork()`]). Nothing was written when the fork is refused; a store
/// failure while writing may leave part of the new run's journal (without a run record, so its id stays
/// refused as taken).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The store holds no run with this id.
    #[error("no run `{0}` in the store")]
    UnknownRun(String),
    /// The fork point is past the run's last journaled step.
    #[error("cannot fork run `{run_id}` at step {at_seq}: it has {last_seq} steps (fork at 0 to {last_seq})")]
    BeyondEnd {
        /// The run to fork.
        run_id: String,
        /// The step asked for.
        at_seq: u64,
        /// The run's last journaled step (its number of steps).
        last_seq: u64,
    },
    /// The id asked for the new run is already used in the store (by a run record or by journal records).
    #[error("run id `{0}` is already used in the store")]
    IdTaken(String),
    /// The id asked for the new run is not a valid run id (see [`crate::check_run_id`]).
    #[error("the new run's id {0}")]
    InvalidId(String),
    /// The store failed, or the run's journal does not decode or fold.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why an agents registry operation failed ([`crate::AgentRegistry`]).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// No agent is registered under this name.
    #[error("no agent registered as `{name}` ({})", registered_list(.registered))]
    Unknown {
        /// The name looked up.
        name: String,
        /// The names registered, sorted.
        registered: Vec<String>,
    },
    /// An agent is already registered under this name (names are unique; remove the old one first).
    #[error("an agent is already registered as `{0}`")]
    Duplicate(String),
    /// Registered names must not be empty or blank.
    #[error("an agent cannot be registered under an empty name")]
    EmptyName,
}

/// ``registered: `a`, `b` `` or `the registry is empty`: what [`RegistryError::Unknown`] says of the names
/// registered (`names`, sorted); a spec naming an unregistered agent says the same.
pub fn registered_list(names: &[String]) -> String {
    if names.is_empty() {
        return "the registry is empty".to_string();
    }
    let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    format!("registered: {}", list.join(", "))
}
