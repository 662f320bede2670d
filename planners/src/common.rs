//! What every built-in composite builder shares: metadata, sub-agents, output function, error handler.

use std::sync::Arc;

use agentic_engine::{
    AgentRef, AgentSpec, BuildError, Composite, ErrorHandler, OutputFn, Planner, PlannerFactory, ScopeView, SpecBuilder,
};
use serde_json::Value;

/// The parts common to every composite builder.
pub struct CompositeParts {
    pub(crate) spec: AgentSpec,
    pub(crate) agents: Vec<AgentRef>,
    pub(crate) output: Option<OutputFn>,
    pub(crate) handler: Option<Arc<dyn ErrorHandler>>,
    pub(crate) compensate_on_error: bool,
    /// Keys the planner writes for its sub-agents ([`agentic_engine::CompositeBuilder::binds`]).
    pub(crate) binds: Vec<String>,
}

impl CompositeParts {
    /// The parts of a composite of kind `kind` (also its default name), to be set with the builder methods
    /// ([`SpecBuilder`], [`CompositeBuilderExt`]) and handed to a [`crate::PlannerKind`].
    pub fn new(kind: &str) -> Self {
        CompositeParts {
            spec: AgentSpec::new(kind, kind),
            agents: Vec::new(),
            output: None,
            handler: None,
            compensate_on_error: false,
            binds: Vec::new(),
        }
    }

    /// Builds the engine composite with a planner factory and topology details.
    pub(crate) fn build<P, F>(self, planner: F, details: Value) -> Result<AgentRef, BuildError>
    where
        P: Planner,
        F: Fn() -> P + Send + Sync + 'static,
    {
        let factory: PlannerFactory = Arc::new(move || Box::new(planner()) as Box<dyn Planner>);
        self.build_with(factory, details)
    }

    /// The keys the planner writes for its sub-agents before calling them
    /// ([`agentic_engine::CompositeBuilder::binds`]).
    pub fn set_binds(&mut self, keys: Vec<String>) {
        self.binds = keys;
    }

    /// Builds the composite: its planner made by `factory` (once per invocation), `details` its settings in
    /// the topology and reports (part of the workflow's fingerprint).
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build_with(self, factory: PlannerFactory, details: Value) -> Result<AgentRef, BuildError> {
        let mut b = Composite::with_factory(self.spec.name.clone(), self.spec.kind.clone(), factory)
            .sub_agents(self.agents)
            .details(details)
            .binds(self.binds);
        *b.spec_mut() = self.spec;
        if let Some(f) = self.output {
            b = b.output_fn(f);
        }
        if let Some(h) = self.handler {
            b = b.error_handler_arc(h);
        }
        b.compensate_on_error(self.compensate_on_error).build()
    }
}

/// Builder methods shared by the built-in composites (`Sequence`, `Loop`, `Parallel`, ...), on top of the
/// metadata methods of [`SpecBuilder`].
pub trait CompositeBuilderExt: Sized {
    /// Mutable access to the shared parts.
    fn parts_mut(&mut self) -> &mut CompositeParts;

    /// Sets the name (default: the kind, e.g. `sequence`).
    fn name(mut self, name: impl Into<String>) -> Self {
        self.parts_mut().spec.name = name.into();
        self
    }

    /// Sets the sub-agents, in order.
    fn sub_agents(mut self, agents: impl IntoIterator<Item = AgentRef>) -> Self {
        self.parts_mut().agents = agents.into_iter().collect();
        self
    }

    /// Sets the output function: the result is computed from the final state and written to `output_key`.
    /// Default: the result is the value at `output_key`, else null.
    fn output(mut self, f: impl Fn(&ScopeView) -> Result<Value, String> + Send + Sync + 'static) -> Self {
        self.parts_mut().output = Some(Arc::new(f));
        self
    }

    /// Sets the error handler for sub-agent failures (default: inherited from the enclosing composite; at
    /// the root, failures fail the run).
    fn error_handler(mut self, handler: impl ErrorHandler) -> Self {
        self.parts_mut().handler = Some(Arc::new(handler));
        self
    }

    /// Sets an already shared error handler.
    fn error_handler_arc(mut self, handler: Arc<dyn ErrorHandler>) -> Self {
        self.parts_mut().handler = Some(handler);
        self
    }

    /// When an agent below fails (after error handling) or the run is cancelled, undo every completed action
    /// below this composite that declared a compensation, in reverse order, best effort (default false).
    fn compensate_on_error(mut self, on: bool) -> Self {
        self.parts_mut().compensate_on_error = on;
        self
    }
}

impl SpecBuilder for CompositeParts {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl CompositeBuilderExt for CompositeParts {
    fn parts_mut(&mut self) -> &mut CompositeParts {
        self
    }
}

/// Implements [`SpecBuilder`] and [`CompositeBuilderExt`] for a builder with a `parts` field.
macro_rules! composite_builder {
    ($t:ty) => {
        impl agentic_engine::SpecBuilder for $t {
            fn spec_mut(&mut self) -> &mut agentic_engine::AgentSpec {
                &mut self.parts.spec
            }
        }

        impl $crate::common::CompositeBuilderExt for $t {
            fn parts_mut(&mut self) -> &mut $crate::common::CompositeParts {
                &mut self.parts
            }
        }
    };
}
pub(crate) use composite_builder;

/// A condition over the state (`Err` = evaluation failed, reported as an expression error).
pub type Condition = Arc<dyn Fn(&ScopeView) -> Result<bool, String> + Send + Sync>;

/// Serialises a planner's execution state (its derived `Serialize`, configuration fields skipped). A value
/// that cannot be serialised — which the planners' states (numbers, strings, lists, JSON values) never are —
/// gives `null`, with a warning naming the planner.
pub(crate) fn state_of<T: serde::Serialize>(kind: &str, state: &T) -> Value {
    serde_json::to_value(state).unwrap_or_else(|e| {
        tracing::warn!(planner = kind, error = %e, "planner execution state not serialisable");
        Value::Null
    })
}

/// Deserialises a planner's execution state, naming the planner on failure.
pub(crate) fn restore_as<T: serde::de::DeserializeOwned>(kind: &str, state: Value) -> Result<T, String> {
    serde_json::from_value(state).map_err(|e| format!("{kind} planner state: {e}"))
}

/// Helpers for the planners' unit tests: agents, snapshots, completions and the execution-state check.
#[cfg(test)]
pub(crate) mod testing {
    use agentic_agents::Compute;
    use agentic_engine::{Action, AgentCall, AgentRef, Completion, Planner, SpecBuilder};
    use serde_json::Value;

    /// A compute agent named `name` evaluating `expr` (its variables are its inputs), writing `output`.
    pub(crate) fn agent(name: &str, expr: &str, output: Option<&str>) -> AgentRef {
        let b = Compute::expression(name, expr).expect("expression");
        match output {
            Some(k) => b.output_key(k).build(),
            None => b.build(),
        }
    }

    /// A state snapshot holding the entries of the object `state`.
    pub(crate) fn view(state: Value) -> agentic_engine::ScopeView {
        match state {
            Value::Object(m) => agentic_engine::ScopeView::from_map(m),
            other => panic!("a state is an object, not {other}"),
        }
    }

    /// The calls of `action`.
    pub(crate) fn calls(action: Action) -> Vec<AgentCall> {
        match action {
            Action::Call(calls) => calls,
            other => panic!("expected calls, got {other:?}"),
        }
    }

    /// A completion of `call` with `output`.
    pub(crate) fn done(call: AgentCall, output: Value) -> Completion {
        Completion { call, output, skipped: false, substituted: false }
    }

    /// Asserts that `planner`'s execution state is exactly `expected` (compact JSON, keys in order, as
    /// journaled), and that restoring it into `fresh` gives back the same state.
    pub(crate) fn assert_state<P: Planner>(planner: &P, fresh: &mut P, expected: &str) {
        let state = planner.execution_state();
        assert_eq!(state.to_string(), expected);
        fresh.restore(state).expect("restore");
        assert_eq!(fresh.execution_state().to_string(), expected);
    }
}
