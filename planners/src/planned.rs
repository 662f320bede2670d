//! [`Planned`]: a composite whose planner a [`PlannerFactory`] makes, with the builder methods every built-in
//! composite has (name, sub-agents, output, error handler, compensation). What a planner kind registered for
//! specs builds (`agentic_spec::PlannerKind`); in Rust, `agentic_engine::Composite::builder` does the same
//! with a closure.

use agentic_engine::{AgentRef, BuildError, PlannerFactory};
use serde_json::Value;

use crate::common::{CompositeParts, composite_builder};

/// A composite of any kind whose planner comes from a factory. See the module documentation.
pub struct Planned;

impl Planned {
    /// A builder for a composite of kind `kind` (also its default name) whose planner `factory` makes, once per
    /// invocation.
    pub fn builder(kind: &str, factory: PlannerFactory) -> PlannedBuilder {
        PlannedBuilder { parts: CompositeParts::new(kind), factory, details: Value::Null }
    }
}

/// Builder of a [`Planned`] composite.
pub struct PlannedBuilder {
    parts: CompositeParts,
    factory: PlannerFactory,
    details: Value,
}

composite_builder!(PlannedBuilder);

impl PlannedBuilder {
    /// Planner settings shown in the topology and the reports (part of the workflow's fingerprint).
    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// State keys the planner writes for its sub-agents before calling them (see
    /// [`agentic_engine::CompositeBuilder::binds`]).
    pub fn binds(mut self, keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.parts.binds = keys.into_iter().map(Into::into).collect();
        self
    }

    /// Builds the composite.
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        self.parts.build_with(self.factory, self.details)
    }
}
