//! [`Composite`]: an agent whose work is to run sub-agents under a planner, and its builder. Every workflow is
//! one, so nesting is recursion: a composite invocation starts a supervisor actor for its planner and waits
//! for it (`spawn.rs` starts it; `supervisor.rs` is its behaviour).

use std::sync::Arc;

use serde_json::Value;

use crate::agent::AgentRef;
use crate::agent_spec::{AgentSpec, SpecBuilder};
use crate::error::BuildError;
use crate::error_handler::ErrorHandler;
use crate::planner::Planner;
use crate::scope::ScopeView;
use crate::value::ValueType;

/// Computes a composite's result from the final state (the spec's `output` expression, or a Rust closure).
pub type OutputFn = Arc<dyn Fn(&ScopeView) -> Result<Value, String> + Send + Sync>;

/// Makes a composite's planner, once per invocation (each invocation starts with fresh planner state).
pub type PlannerFactory = Arc<dyn Fn() -> Box<dyn Planner> + Send + Sync>;

pub(crate) struct CompositeInner {
    pub(crate) spec: AgentSpec,
    pub(crate) sub_agents: Vec<AgentRef>,
    pub(crate) factory: PlannerFactory,
    pub(crate) output: Option<OutputFn>,
    pub(crate) handler: Option<Arc<dyn ErrorHandler>>,
    pub(crate) details: Value,
    pub(crate) binds: Vec<String>,
    pub(crate) may_suspend: bool,
    pub(crate) compensate_on_error: bool,
}

/// A composite agent: sub-agents driven by a planner. Build one with [`Composite::builder`]; the built-in
/// planners' builders (`Sequence::builder()`, ...) in `agentic-planners` build these.
pub struct Composite {
    pub(crate) inner: Arc<CompositeInner>,
}

impl Composite {
    /// Starts a builder for a composite named `name` of kind `kind` whose planner is made by `planner` (called
    /// once per invocation, so each invocation has fresh planner state).
    pub fn builder<P, F>(name: impl Into<String>, kind: impl Into<String>, planner: F) -> CompositeBuilder
    where
        P: Planner,
        F: Fn() -> P + Send + Sync + 'static,
    {
        CompositeBuilder {
            spec: AgentSpec::new(name, kind),
            sub_agents: Vec::new(),
            factory: Arc::new(move || Box::new(planner()) as Box<dyn Planner>),
            output: None,
            handler: None,
            details: Value::Null,
            binds: Vec::new(),
            compensate_on_error: false,
        }
    }

    /// Starts a builder like [`Composite::builder`] with an already boxed planner factory (what a spec's
    /// planner kind supplies).
    pub fn with_factory(name: impl Into<String>, kind: impl Into<String>, factory: PlannerFactory) -> CompositeBuilder {
        CompositeBuilder {
            spec: AgentSpec::new(name, kind),
            sub_agents: Vec::new(),
            factory,
            output: None,
            handler: None,
            details: Value::Null,
            binds: Vec::new(),
            compensate_on_error: false,
        }
    }
}

impl Composite {
    /// The sub-agent its planner always calls last ([`Planner::last_agent`]), asked of a fresh planner.
    pub(crate) fn last_agent(&self) -> Option<usize> {
        let n = self.inner.sub_agents.len();
        (self.inner.factory)().last_agent(n).filter(|i| *i < n)
    }
}

/// Builder of a [`Composite`]. Defaults: no sub-agents, no output key, no output function (the result is the
/// value at `output_key`, else null), error handler inherited from the enclosing composite.
pub struct CompositeBuilder {
    spec: AgentSpec,
    sub_agents: Vec<AgentRef>,
    factory: PlannerFactory,
    output: Option<OutputFn>,
    handler: Option<Arc<dyn ErrorHandler>>,
    details: Value,
    binds: Vec<String>,
    compensate_on_error: bool,
}

impl SpecBuilder for CompositeBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl CompositeBuilder {
    /// Sets the sub-agents, in declaration order (the planner refers to them by index).
    pub fn sub_agents(mut self, agents: impl IntoIterator<Item = AgentRef>) -> Self {
        self.sub_agents = agents.into_iter().collect();
        self
    }

    /// Sets the output function: the composite's result is computed from the final state and also written
    /// to `output_key`.
    pub fn output(mut self, f: impl Fn(&ScopeView) -> Result<Value, String> + Send + Sync + 'static) -> Self {
        self.output = Some(Arc::new(f));
        self
    }

    /// Sets an already shared output function.
    pub fn output_fn(mut self, f: OutputFn) -> Self {
        self.output = Some(f);
        self
    }

    /// Sets the error handler for failures of the sub-agents (inherited by nested composites without one).
    pub fn error_handler(mut self, handler: impl ErrorHandler) -> Self {
        self.handler = Some(Arc::new(handler));
        self
    }

    /// Sets an already shared error handler.
    pub fn error_handler_arc(mut self, handler: Arc<dyn ErrorHandler>) -> Self {
        self.handler = Some(handler);
        self
    }

    /// When any agent below fails (after its error handler) or the run is cancelled, run the compensations of
    /// every completed action below this composite in reverse chronological order (default false).
    pub fn compensate_on_error(mut self, on: bool) -> Self {
        self.compensate_on_error = on;
        self
    }

    /// Planner settings shown in the topology and reports.
    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// State keys the planner writes for its sub-agents before calling them (a debate's transcript, a
    /// supervisor's request): inputs a caller of the composite need not supply. Read by the MCP and A2A
    /// servers when they describe a spec's inputs ([`crate::TopologyNode::binds`]).
    pub fn binds(mut self, keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.binds = keys.into_iter().map(Into::into).collect();
        self
    }

    /// Builds the composite.
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when two agents in the tree declare different types for one key.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let agent = AgentRef::new(Composite {
            inner: Arc::new(CompositeInner {
                spec: self.spec,
                may_suspend: self.sub_agents.iter().any(|a| a.0.may_suspend()),
                sub_agents: self.sub_agents,
                factory: self.factory,
                output: self.output,
                handler: self.handler,
                details: self.details,
                binds: self.binds,
                compensate_on_error: self.compensate_on_error,
            }),
        });
        check_types(&agent)?;
        Ok(agent)
    }
}

/// Rejects a tree in which two agents declare different (non-`any`) value types for the same key, or two
/// different Rust types (both declared from Rust types, [`crate::value::StateType`]).
pub(crate) fn check_types(root: &AgentRef) -> Result<(), BuildError> {
    use std::collections::HashMap;
    /// The first declaration of a key seen: its type, and the agent and path that declared it.
    struct First {
        value_type: ValueType,
        rust_type: Option<String>,
        agent: String,
        path: String,
    }
    let described = |value_type: ValueType, rust_type: Option<&str>| match rust_type {
        Some(rust) => format!("{value_type} `{rust}`"),
        None => value_type.to_string(),
    };
    // Per key: the first value type declared, and the first Rust type declared (which may come later).
    let mut by_type: HashMap<String, First> = HashMap::new();
    let mut by_rust: HashMap<String, First> = HashMap::new();
    let topology = root.topology();
    for node in topology.walk() {
        let spec = &node.spec;
        for d in spec.declared_types() {
            if d.value_type == ValueType::Any {
                continue;
            }
            let conflict = |first: &First| BuildError::ConflictingTypes {
                key: d.key.to_string(),
                first: described(first.value_type, first.rust_type.as_deref()),
                first_agent: first.agent.clone(),
                first_path: first.path.clone(),
                second: described(d.value_type, d.rust_type),
                second_agent: spec.name.clone(),
                second_path: node.path.clone(),
            };
            let this = || First {
                value_type: d.value_type,
                rust_type: d.rust_type.map(str::to_string),
                agent: spec.name.clone(),
                path: node.path.clone(),
            };
            match by_type.get(d.key) {
                Some(first) if first.value_type != d.value_type => return Err(conflict(first)),
                Some(_) => {}
                None => {
                    by_type.insert(d.key.to_string(), this());
                }
            }
            let Some(rust) = d.rust_type else { continue };
            match by_rust.get(d.key) {
                Some(first) if first.rust_type.as_deref() != Some(rust) => return Err(conflict(first)),
                Some(_) => {}
                None => {
                    by_rust.insert(d.key.to_string(), this());
                }
            }
        }
    }
    Ok(())
}
/// The composite `agent` is (or wraps), if it is one: what the engine runs as a supervisor actor of its own.
pub(crate) fn composite_of(agent: &AgentRef) -> Option<&Composite> {
    agent.0.engine_agent()?.downcast_ref::<Composite>()
}
