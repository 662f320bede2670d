//! # agentic-engine
//!
//! The runtime of `agentic`: the run's shared state and its snapshots ([`ScopeView`]), the [`Agent`] trait,
//! the [`Planner`] trait, the ractor actors that run a system ([`InvokeRequest`]), error handlers
//! ([`ErrorHandler`]) and the step journal interface ([`CheckpointStore`]). Every public item is re-exported
//! here, at one path; the modules are private. Planners, agents and stores live in sibling crates; the `agentic` crate re-exports
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

mod agent;
mod agent_registry;
pub mod budget;
mod declare;
mod error;
mod error_handler;
mod journal;
pub mod limits;
mod listener;
mod planner;
mod run;
mod schedule;
mod scope;
mod store;
mod time;
mod trace_context;
mod value;

pub use agent::{
    Agent, AgentRef, AgentSpec, Declaration, DynAgent, InputSpec, InvocationContext, KeyDecl, SpecBuilder,
    TopologyNode, WITHDRAW_TIMEOUT,
};
pub use agent_registry::AgentRegistry;
pub use error::{
    AgentError, BuildError, Cause, CauseOrigin, ForkError, RegistryError, RespondError, StoreError, StoreSource,
    Transience, registered_list,
};
pub use error_handler::{ErrorContext, ErrorHandler, MAX_BACKOFF, Recovery, RetryPolicy};
pub use listener::{
    AgentListener, AgentMonitor, ListenerRef, MonitoredInvocation, MonitoredSession, RunEvent, SessionStatus,
};
pub use planner::{Action, AgentCall, Completion, Planner, PlanningContext};
pub use run::{
    CancelHandle, CompensationFn, Composite, CompositeBuilder, DrainHandle, INPUTS_PATH, InvokeRequest, MAX_RESTARTS,
    MAX_RUN_ID_LEN, OutputFn, PendingKind, PendingResponse, PlannerFactory, REGISTRY_CAPACITY, Registry, ResultStream,
    RunEvents, RunOutcome, RunResult, StreamItem, StreamSource, answerable, check_run_id, fork, respond, timed_out,
};
pub use schedule::{Overlap, ScheduleChange, ScheduleRecord, ScheduleSource, TickStart, basic_utc};
pub use scope::{CONTEXT_PREFIX, ContextEntry, InvocationRecord, ScopeHandle, ScopeView, TokenUsage, TypedKey};
pub use store::{
    CallRecord, CheckpointStore, CompletionRecord, Durability, DynCheckpointStore, Finish, ForkOrigin, InflightChange,
    Lease, Milestone, MilestoneKind, Notice, NoticeReceiver, PlannerState, RunImage, RunRecord, RunStatus, RunUpdate,
    StepRecord, StoreLayer, StoreRef, planner_key, spec_hash,
};
pub use time::{now_ms, parse_rfc3339_ms, rfc3339_ms};
pub use trace_context::current_traceparent;
pub use value::{StateType, ValueType, json_type_name};

/// What the declarative agents' expansions name (`agentic-macros`): the typed-call helpers and the types they use.
#[doc(hidden)]
pub mod __private {
    pub use crate::agent::{AgentRef, AgentSpec, InputSpec, KeyDecl, SpecBuilder};
    pub use crate::declare::*;
    pub use crate::error::{AgentError, BuildError};
    pub use crate::scope::ScopeView;
    pub use crate::store::CheckpointStore;
    pub use futures::future::BoxFuture;
    pub use serde_json::Value;
}
