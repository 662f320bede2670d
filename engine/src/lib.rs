//! # agentic-engine
//!
//! The runtime of `agentic`: the run's shared state and its snapshots ([`ScopeView`]), the [`Agent`] trait,
//! the [`Planner`] trait, the ractor actors that run a system ([`InvokeRequest`]), error handlers
//! ([`ErrorHandler`]) and the step journal interface ([`CheckpointStore`]). Public surface: the modules are
//! private and every public item is re-exported here, at one path, except the two facets [`budget`] (run budgets,
//! prices and usage) and [`limits`] (model capacity limits), public modules whose items are not repeated here.
//! Planners, agents and stores live in sibling crates; the `agentic` crate re-exports
//! everything a user needs.
//!
//! A run is a tree of actors:
//!
//! ```text
//! InvokeRequest (the session: open, execute, close)
//!  └─ ScopeActor: one per run. Owns the state, history, pending keys and mapper items' layers (every write
//!     │           is a message; readers use its snapshots); the run's address (answers, cancellation, event
//!     │           subscriptions); the root's supervisor (restarts a broken tree from the journal)
//!     ├─ SupervisorActor: one per composite invocation. Owns the planner; one completion at a time:
//!     │   │               next_action → journal the step → dispatch
//!     │   ├─ AgentActor: runs the supervisor's leaf calls, linked, kept idle between them. Inputs ← snapshot,
//!     │   │              invoke, writes + result → ScopeActor → ChildDone → supervisor; a panic → its
//!     │   │              supervisor's error handler
//!     │   └─ SupervisorActor: a nested composite, linked ── its own children ...
//!     └─ AgentActor: an async agent, re-linked under the ScopeActor once started
//! ```

#![deny(unreachable_pub)]

mod access;
mod agent;
mod agent_registry;
mod agent_spec;
pub mod budget;
mod call;
mod capacity;
mod declare;
mod ephemeral;
mod error;
mod error_handler;
mod invocation;
mod journal;
pub mod limits;
mod listener;
mod lock;
mod pending;
mod planner;
mod recording;
mod run;
mod run_actor;
mod schedule;
mod scope;
mod status;
mod stop;
mod store;
mod time;
mod tool_call;
mod trace_context;
mod usage;
mod value;

pub use access::{AuditEntry, KeyRecord, Role};
pub use agent::{Agent, AgentRef, DynAgent, WITHDRAW_TIMEOUT};
pub use agent_registry::AgentRegistry;
pub use agent_spec::{AgentSpec, Declaration, InputSpec, KeyDecl, SpecBuilder, TopologyNode};
pub use call::AgentCall;
pub use error::{
    AgentError, BuildError, Cause, CauseOrigin, ForkError, RegistryError, RespondError, StoreError, StoreSource,
    Transience, registered_list,
};
pub use error_handler::{ErrorContext, ErrorHandler, MAX_BACKOFF, Recovery, RetryPolicy};
pub use invocation::{CallsView, HumanView, InvocationContext, RunView, TapedCall, UsageView};
pub use journal::{DecisionRecord, InvocationRecord, TokenUsage, calls_json, item_of_layer, journal_agent_names};
pub use listener::{
    AgentListener, AgentMonitor, ListenerRef, MonitoredInvocation, MonitoredSession, RunEvent, SessionStatus,
};
pub use pending::{PendingKind, PendingResponse};
pub use planner::{Action, Completion, Planner, PlanningContext};
pub use recording::{
    CallKind, CallTape, RecordedCall, RecordingError, ReplayMismatch, ReplayMode, TapeStats, first_difference,
    model_request, recorded_calls, request_hash,
};
pub use run::{
    CancelHandle, Composite, CompositeBuilder, DrainHandle, INPUTS_PATH, InvokeRequest, MAX_RUN_ID_LEN, OutputFn,
    PlannerFactory, REGISTRY_CAPACITY, Registry, ResultStream, RunOutcome, RunResult, StreamItem, StreamSource,
    answerable, check_run_id, fork, respond, respond_as, timed_out,
};
pub use run_actor::{CompensationFn, MAX_RESTARTS, RunEvents, ScopeHandle};
pub use schedule::{Overlap, ScheduleChange, ScheduleRecord, ScheduleSource, TickStart, basic_utc};
pub use scope::{CONTEXT_PREFIX, ContextEntry, ScopeView, TypedKey};
pub use status::RunStatus;
pub use stop::Stop;
pub use store::{
    CallRecord, CheckpointStore, CompletionRecord, Durability, DynCheckpointStore, Finish, ForkOrigin, InflightChange,
    Lease, Milestone, MilestoneKind, Notice, NoticeReceiver, PlannerState, RunImage, RunRecord, RunUpdate, StepRecord,
    StoreLayer, StoreRef, planner_key, spec_hash,
};
pub use time::{now_ms, parse_rfc3339_ms, rfc3339_ms};
pub use tool_call::{
    BudgetEntry, CallEntry, DoubtAnswer, Effect, ModelTurnEntry, ToolAnswerRefusal, ToolCallEntry, ToolCallStatus,
    ToolDecision, answered_by, approval_data, approval_id, check_schema, check_tool_answer, doubt_answer, doubt_id,
    tool_args_hash,
};
pub use trace_context::current_traceparent;
pub use value::{StateType, ValueType, json_type_name, json_type_phrase};

/// What the declarative agents' expansions name (`agentic-macros`): the typed-call helpers and the types they use.
#[doc(hidden)]
pub mod __private {
    pub use crate::agent::AgentRef;
    pub use crate::agent_spec::{AgentSpec, InputSpec, KeyDecl, SpecBuilder};
    pub use crate::declare::*;
    pub use crate::error::{AgentError, BuildError};
    pub use crate::scope::ScopeView;
    pub use crate::stop::Stop;
    pub use crate::store::CheckpointStore;
    pub use futures::future::BoxFuture;
    pub use serde_json::Value;
}
