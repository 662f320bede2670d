//! The [`Planner`] trait: the strategy that decides which sub-agents of a composite run next.
//!
//! A planner is created fresh for every invocation of its composite and driven by the supervisor
//! (`run::supervisor`): `init`, then `first_action`, then `next_action` once per completed sub-agent, one
//! completion at a time, until it returns [`Action::Done`] or [`Action::DoneWith`]. Its execution state is a
//! serde value so a run can be checkpointed and restored at any step.
//!
//! Follows the `Planner` / `Action` design of LangChain4j agentic (`firstAction`, `nextAction`, `call`,
//! `done`); serialisable execution state at every step is ours.

use serde_json::Value;

use crate::agent::AgentRef;
use crate::agent_spec::AgentSpec;
use crate::call::AgentCall;
use crate::error::AgentError;
use crate::scope::ScopeView;

/// What a planner wants to happen next.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Run these sub-agents (concurrently when more than one).
    Call(Vec<AgentCall>),
    /// The composite is finished; its result comes from its output function or `output_key`.
    Done,
    /// The composite is finished with this result (also written to its `output_key`).
    DoneWith(Value),
    /// Wait for another in-flight agent to complete. Returning this with nothing in flight is a
    /// [`AgentError::PlannerStalled`] error.
    Nothing,
}

impl Action {
    /// Calls a single sub-agent by index.
    pub fn call(agent: usize) -> Self {
        Action::Call(vec![AgentCall::new(agent)])
    }

    /// Calls several sub-agents by index, concurrently.
    pub fn call_all(agents: impl IntoIterator<Item = usize>) -> Self {
        Action::Call(agents.into_iter().map(AgentCall::new).collect())
    }
}

/// A completed sub-agent invocation, reported to [`Planner::next_action`].
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The call that completed.
    pub call: AgentCall,
    /// Its result (`null` when it returned nothing, was skipped, or is async and still running).
    pub output: Value,
    /// True when an optional agent was skipped because an input was missing.
    pub skipped: bool,
    /// True when the result is a substitute from an error handler.
    pub substituted: bool,
}

/// What a planner sees when deciding: the scope snapshot and the sub-agents' metadata.
pub struct PlanningContext<'a> {
    pub(crate) view: ScopeView,
    pub(crate) agents: &'a [AgentRef],
    pub(crate) composite: &'a AgentSpec,
    pub(crate) path: &'a str,
}

impl<'a> PlanningContext<'a> {
    /// Builds a context (used by planner unit tests and by the supervisor).
    pub fn new(view: ScopeView, agents: &'a [AgentRef], composite: &'a AgentSpec, path: &'a str) -> Self {
        PlanningContext { view, agents, composite, path }
    }

    /// The state snapshot taken just before this decision.
    pub fn view(&self) -> &ScopeView {
        &self.view
    }

    /// The sub-agents, in declaration order.
    pub fn agents(&self) -> &[AgentRef] {
        self.agents
    }

    /// Metadata of sub-agent `index`, if it exists.
    pub fn agent_spec(&self, index: usize) -> Option<&AgentSpec> {
        self.agents.get(index).map(AgentRef::spec)
    }

    /// Metadata of the composite that owns the planner.
    pub fn composite(&self) -> &AgentSpec {
        self.composite
    }

    /// Path id of the composite (`root/2`).
    pub fn path(&self) -> &str {
        self.path
    }

    /// An [`AgentError::Planner`] naming this composite.
    pub fn error(&self, message: impl Into<String>) -> AgentError {
        AgentError::Planner { agent: self.composite.name.clone(), path: self.path.to_string(), message: message.into() }
    }

    /// An [`AgentError::Expression`] naming this composite and the expression that failed.
    pub fn expression_error(&self, what: impl Into<String>, message: impl Into<String>) -> AgentError {
        AgentError::Expression {
            agent: self.composite.name.clone(),
            path: self.path.to_string(),
            what: what.into(),
            message: message.into(),
        }
    }
}

/// A planning strategy. Implement it to write a custom planner; see `agentic-planners` for the built-in ones.
///
/// All methods are synchronous and called one at a time by the composite's supervisor actor, so a planner
/// needs no locking. Errors fail the composite (its error handler does not apply to planner errors).
pub trait Planner: Send + 'static {
    /// Called once before the first action.
    ///
    /// # Errors
    /// An invalid configuration for this scope; the composite fails with it.
    fn init(&mut self, _ctx: &PlanningContext<'_>) -> Result<(), AgentError> {
        Ok(())
    }

    /// The first action of a fresh (not restored) invocation.
    ///
    /// # Errors
    /// As for [`Planner::init`].
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError>;

    /// The next action after `completed` finished. Called once per completion, in completion order.
    ///
    /// # Errors
    /// As for [`Planner::init`].
    fn next_action(&mut self, ctx: &PlanningContext<'_>, completed: &Completion) -> Result<Action, AgentError>;

    /// The planner's complete execution state, enough to continue after [`Planner::restore`].
    fn execution_state(&self) -> Value {
        Value::Null
    }

    /// What the last [`Planner::next_action`] changed in [`Planner::execution_state`], as a JSON array of
    /// JSON Patch operations (RFC 6902) over the state before it, when the planner can say so more cheaply than
    /// the whole state. A planner whose state grows with its work (a mapper's list of results) journals
    /// O(change) per step this way instead of O(state), which keeps a fan-out of K calls O(K) in all. The
    /// engine journals the whole state at a composite's first step and after a resume, and this patch at the
    /// steps after; folding the journal applies it to the previous state, so it must turn that state into
    /// exactly [`Planner::execution_state`]. Default `None`: the whole state at every step.
    fn execution_state_patch(&self) -> Option<Value> {
        None
    }

    /// Restores a state produced by [`Planner::execution_state`].
    ///
    /// # Errors
    /// The state does not fit this planner (message names what is wrong).
    fn restore(&mut self, _state: Value) -> Result<(), String> {
        Ok(())
    }

    /// Why the planner made its last decision, when it can say (shown in events and reports), e.g.
    /// "`reviewer` preferred: `draft is defined`". Default none.
    fn rationale(&self) -> Option<String> {
        None
    }

    /// Whether the planner's decisions read the state (conditions, exit checks). Such a planner decides on
    /// a settled snapshot: the supervisor first waits for async agents still producing keys. Default false.
    fn reads_state(&self) -> bool {
        false
    }

    /// The planner's kind for topology and reports (`sequence`, `loop`, ...).
    fn kind(&self) -> &'static str {
        "custom"
    }

    /// The sub-agent (index among `sub_agents`) that every invocation of this planner calls last, when the
    /// planner's structure fixes it before the run (a sequence: its last sub-agent); `None` (the default) when
    /// it depends on the run. A system's result stream (`InvokeRequest::stream`) follows these down from the
    /// root to find its final agent: only that agent's tokens are the system's streamed answer. Idea from
    /// LangChain4j agentic, where only the agent invoked last propagates its token stream to the system.
    fn last_agent(&self, _sub_agents: usize) -> Option<usize> {
        None
    }
}
