//! Listeners: callbacks on what a run does — invocations starting and finishing, errors, planner decisions,
//! scopes created and destroyed, suspensions and resumptions, tool calls — plus the [`AgentMonitor`] that
//! records invocation trees per memory id, and the event stream ([`RunEvent`]) a caller can consume while a
//! run goes on.
//!
//! Register a listener on any agent with [`AgentRef::with_listener`] (it sees that agent's invocations, and
//! every nested one when [`AgentListener::inherited`] is true) or on a whole run with
//! `InvokeRequest::listener`. Listeners are called in registration order (the run's first, then outer agents'
//! before inner ones'), synchronously on the run's tasks: keep them quick. A listener that panics is logged
//! and never breaks the run. Idea from LangChain4j agentic's `AgentListener` and `AgentMonitor`.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::journal::TokenUsage;
use crate::pending::PendingResponse;

mod monitor;

pub use monitor::{AgentMonitor, MonitoredInvocation, MonitoredSession, SessionStatus};

/// Something that happened in a run, as listeners and event streams see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunEvent {
    /// The run's scope was created (a run or a resumed run starts).
    ScopeCreated {
        /// Run id.
        run_id: String,
    },
    /// An invocation is about to run (inputs resolved).
    AgentStarted {
        /// Run id.
        run_id: String,
        /// Agent name.
        agent: String,
        /// Agent path.
        path: String,
        /// Attempt, 1-based.
        attempt: u32,
        /// Resolved inputs.
        inputs: Map<String, Value>,
    },
    /// An invocation completed.
    AgentFinished {
        /// Run id.
        run_id: String,
        /// Agent name.
        agent: String,
        /// Agent path.
        path: String,
        /// Attempt, 1-based.
        attempt: u32,
        /// Its result.
        output: Value,
        /// Duration in microseconds.
        duration_us: u64,
        /// Tokens used, when it called a model.
        tokens: Option<TokenUsage>,
    },
    /// An invocation failed.
    AgentFailed {
        /// Run id.
        run_id: String,
        /// Agent name.
        agent: String,
        /// Agent path.
        path: String,
        /// Attempt, 1-based.
        attempt: u32,
        /// The error message.
        error: String,
    },
    /// A planner decided what runs next.
    PlannerDecision {
        /// Run id.
        run_id: String,
        /// Path of the composite.
        path: String,
        /// Sub-agent paths it started (empty when it finished or waits).
        calls: Vec<String>,
        /// `call`, `done`, or `wait`.
        decision: String,
        /// Why, when the planner says ([`crate::Planner::rationale`]).
        rationale: Option<String>,
    },
    /// A model produced a token (streaming agents).
    Token {
        /// Run id.
        run_id: String,
        /// Agent path.
        path: String,
        /// The text delta.
        text: String,
    },
    /// A model call waits for capacity under its endpoint's rate limits (SPEC.md §3 `limits`); cancelling
    /// the run ends the wait.
    WaitingForCapacity {
        /// Run id.
        run_id: String,
        /// Agent path.
        path: String,
        /// The endpoint (`provider base_url model`).
        endpoint: String,
        /// What it waits for: `requests_per_minute`, `tokens_per_minute` (both as a start time) or
        /// `max_concurrency`.
        limit: String,
        /// How long it waits, in milliseconds (0 when unknown: a concurrency slot).
        wait_ms: u64,
    },
    /// A tool is about to run.
    ToolStarted {
        /// Run id.
        run_id: String,
        /// Agent path.
        path: String,
        /// Tool name.
        tool: String,
        /// Arguments.
        arguments: Value,
    },
    /// A tool finished.
    ToolFinished {
        /// Run id.
        run_id: String,
        /// Agent path.
        path: String,
        /// Tool name.
        tool: String,
        /// Result (or the error message as a string).
        result: Value,
    },
    /// The run suspended, waiting for humans.
    Suspended {
        /// Run id.
        run_id: String,
        /// What it waits for.
        pending: Vec<PendingResponse>,
    },
    /// A suspended or interrupted run resumed.
    Resumed {
        /// Run id.
        run_id: String,
        /// Answers given for this resumption, by response id.
        answers: BTreeMap<String, Value>,
    },
    /// The run completed.
    Completed {
        /// Run id.
        run_id: String,
        /// Its result.
        output: Value,
    },
    /// The run failed.
    Failed {
        /// Run id.
        run_id: String,
        /// The error message.
        error: String,
    },
    /// The run was drained (`DrainHandle`): it stopped at a step boundary with steps left, and continues when
    /// resumed. The last event before `ScopeDestroyed`, in place of `Completed`, `Suspended` or `Failed`.
    Drained {
        /// Run id.
        run_id: String,
    },
    /// The run's scope was released (the run ended or suspended).
    ScopeDestroyed {
        /// Run id.
        run_id: String,
    },
}

impl RunEvent {
    /// The run the event belongs to.
    pub fn run_id(&self) -> &str {
        match self {
            RunEvent::ScopeCreated { run_id }
            | RunEvent::AgentStarted { run_id, .. }
            | RunEvent::AgentFinished { run_id, .. }
            | RunEvent::AgentFailed { run_id, .. }
            | RunEvent::PlannerDecision { run_id, .. }
            | RunEvent::Token { run_id, .. }
            | RunEvent::WaitingForCapacity { run_id, .. }
            | RunEvent::ToolStarted { run_id, .. }
            | RunEvent::ToolFinished { run_id, .. }
            | RunEvent::Suspended { run_id, .. }
            | RunEvent::Resumed { run_id, .. }
            | RunEvent::Completed { run_id, .. }
            | RunEvent::Failed { run_id, .. }
            | RunEvent::Drained { run_id }
            | RunEvent::ScopeDestroyed { run_id } => run_id,
        }
    }
}

/// Receives run events. Every method has an empty default: implement the ones you need, or only
/// [`AgentListener::on_event`] to see everything.
pub trait AgentListener: Send + Sync + 'static {
    /// Whether sub-agents of the agent it is registered on also report to it (default false).
    fn inherited(&self) -> bool {
        false
    }

    /// Every event, before the specific method below is called.
    fn on_event(&self, _event: &RunEvent) {}

    /// An invocation starts.
    fn before_invocation(&self, _event: &RunEvent) {}

    /// An invocation completed.
    fn after_invocation(&self, _event: &RunEvent) {}

    /// An invocation failed.
    fn on_error(&self, _event: &RunEvent) {}

    /// A planner decided.
    fn on_planner_decision(&self, _event: &RunEvent) {}

    /// A tool is about to run.
    fn before_tool(&self, _event: &RunEvent) {}

    /// A tool finished.
    fn after_tool(&self, _event: &RunEvent) {}

    /// Run-level events: scope created/destroyed, suspended, resumed, completed, failed, drained, tokens.
    fn on_run_event(&self, _event: &RunEvent) {}
}

/// A shared listener.
pub type ListenerRef = Arc<dyn AgentListener>;

/// Calls `listeners` with `event` in order; a panicking listener is logged and skipped.
pub(crate) fn emit(listeners: &[ListenerRef], event: &RunEvent) {
    for l in listeners {
        let call = AssertUnwindSafe(|| {
            l.on_event(event);
            match event {
                RunEvent::AgentStarted { .. } => l.before_invocation(event),
                RunEvent::AgentFinished { .. } => l.after_invocation(event),
                RunEvent::AgentFailed { .. } => l.on_error(event),
                RunEvent::PlannerDecision { .. } => l.on_planner_decision(event),
                RunEvent::ToolStarted { .. } => l.before_tool(event),
                RunEvent::ToolFinished { .. } => l.after_tool(event),
                _ => l.on_run_event(event),
            }
        });
        if let Err(panic) = std::panic::catch_unwind(call) {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(run_id = event.run_id(), "a listener panicked (ignored): {msg}");
        }
    }
}

/// Forwards events to a channel (the event stream of `InvokeRequest::events`).
pub(crate) struct ChannelListener(pub(crate) tokio::sync::mpsc::UnboundedSender<RunEvent>);

impl AgentListener for ChannelListener {
    fn inherited(&self) -> bool {
        true
    }

    fn on_event(&self, event: &RunEvent) {
        let _ = self.0.send(event.clone());
    }
}
