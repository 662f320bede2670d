//! # agentic-engine
//!
//! The runtime of `agentic`: the [`scope`] actor that owns a run's state, the [`Agent`] trait, the
//! [`Planner`] trait, the supervisor that drives planners ([`run`]), error handlers and the step journal
//! interface ([`store`]). Planners, agents and stores live in sibling crates; the `agentic` crate re-exports
//! everything a user needs.
//!
//! ```text
//! InvokeRequest ──► root agent ──► Composite ──► supervisor loop (the planner actor, hosted in the
//!                                                   │  composite's invocation future; one per invocation)
//!                                                   │  first_action / next_action (one completion at a time)
//!                                                   ├─► child task: leaf agent (inputs ← ScopeView, output → ScopeActor)
//!                                                   └─► child task: nested Composite ──► supervisor loop ...
//! ```

pub mod agent;
pub mod error;
pub mod error_handler;
pub mod listener;
pub mod planner;
pub mod run;
pub mod scope;
pub mod store;
pub mod value;

pub use agent::{Agent, AgentRef, AgentSpec, DynAgent, InputSpec, InvocationContext, SpecBuilder, TopologyNode};
pub use error::{AgentError, BuildError, StoreError};
pub use error_handler::{ErrorContext, ErrorHandler, Recovery, RetryPolicy};
pub use listener::{
    AgentListener, AgentMonitor, ListenerRef, MonitoredInvocation, MonitoredSession, RunEvent, SessionStatus,
};
pub use planner::{Action, AgentCall, Completion, Planner, PlanningContext};
pub use run::{
    CancelHandle, Composite, CompositeBuilder, InvokeRequest, OutputFn, PendingResponse, Registry, RunEvents,
    RunOutcome, RunResult, respond,
};
pub use scope::{CONTEXT_PREFIX, ContextEntry, InvocationRecord, ScopeHandle, ScopeView, TokenUsage, TypedKey};
pub use store::{
    CallRecord, CheckpointStore, CompletionRecord, Durability, DynCheckpointStore, Finish, InflightChange, Milestone,
    PlannerState, RunImage, RunRecord, RunStatus, StepRecord, StoreRef,
};
pub use value::ValueType;
