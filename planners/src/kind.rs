//! The descriptor of a planner kind that specs can name: [`PlannerKind`] — its `kind` name, its fields with
//! their types ([`KindField`], [`FieldType`]), how its composite is built from their values ([`KindArgs`]).
//! A program's own kinds implement it (`agentic_spec::register_kind` makes specs accept them; see
//! `examples/round_robin.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use agentic_agents::expr::Expression;
use agentic_engine::{AgentRef, BuildError, PlannerFactory};
use serde_json::{Map, Value};

use crate::common::CompositeParts;

/// A planner kind that specs can name (`kind: <name>`): its fields and how its planner is made. See the
/// module documentation; register one with [`register_kind`].
pub trait PlannerKind: Send + Sync + 'static {
    /// The `kind` a spec writes: lowercase letters, digits and `_`, starting with a letter, and not a
    /// built-in kind.
    fn name(&self) -> &str;

    /// The kind's own fields, in order, besides the fields every agent and every composite takes
    /// (`description`, `output_key`, `output`, `error_handler`, ...). Sub-agents are fields of type
    /// [`FieldType::Agents`] or [`FieldType::Agent`]: they are numbered in the order of these fields.
    fn fields(&self) -> &[KindField] {
        &[]
    }

    /// Makes the planner factory of one composite from its fields' values (called when the spec is built;
    /// the factory is called once per invocation). A kind implements this (most kinds) or
    /// [`PlannerKind::build`] (a kind with a builder of its own, as the built-in kinds).
    ///
    /// # Errors
    /// A sentence saying which value does not fit: the spec's build fails with it, located at the agent.
    /// Default: that the kind makes no planner this way.
    fn planner(&self, _args: &KindArgs) -> Result<PlannerFactory, String> {
        Err("implements neither `PlannerKind::planner` nor `PlannerKind::build`".to_string())
    }

    /// State keys the planner writes for its sub-agents before calling them (inputs a caller of the workflow
    /// need not supply; the MCP and A2A servers leave them out of a spec's inputs). Default: none.
    fn binds(&self, _args: &KindArgs) -> Vec<String> {
        Vec::new()
    }

    /// The settings shown in the topology and the reports (part of the workflow's fingerprint: a run
    /// resumes only on the same settings). Default: the non-agent fields' values.
    fn details(&self, args: &KindArgs) -> Value {
        Value::Object(args.values.clone())
    }

    /// Builds the composite: `parts` holds what every composite has, already set from the spec (name,
    /// description, output key and function, error handler, compensation, the sub-agents in field order).
    /// Default: a composite whose planner [`PlannerKind::planner`] makes, with [`PlannerKind::details`] and
    /// [`PlannerKind::binds`]; the built-in kinds build theirs with their own builders.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] when a value does not fit (the planner's refusal), or a conflict of declared
    /// types in the tree.
    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let factory = self.planner(args).map_err(|message| BuildError::Invalid {
            agent: parts.spec.name.clone(),
            message: format!("kind `{}`: {message}", self.name()),
        })?;
        let mut parts = parts;
        parts.binds = self.binds(args);
        parts.build_with(factory, self.details(args))
    }
}

/// One field of a [`PlannerKind`]: its name, type and whether a spec must give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindField {
    /// The field's name in a spec.
    pub name: &'static str,
    /// What the field holds.
    pub ty: FieldType,
    /// Whether a spec must give it.
    pub required: bool,
    /// For a [`FieldType::Agents`] field: how many agents it must name at least.
    pub min_items: usize,
}

impl KindField {
    /// A field every agent of the kind must give.
    pub const fn required(name: &'static str, ty: FieldType) -> Self {
        KindField { name, ty, required: true, min_items: 0 }
    }

    /// A field an agent of the kind may give.
    pub const fn optional(name: &'static str, ty: FieldType) -> Self {
        KindField { name, ty, required: false, min_items: 0 }
    }

    /// For a [`FieldType::Agents`] field: the list must name at least `n` agents (a debate's two debaters).
    /// `register_kind` refuses it on a field of another type.
    pub const fn at_least(mut self, n: usize) -> Self {
        self.min_items = n;
        self
    }
}

/// What a [`KindField`] holds, checked when a spec is parsed.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FieldType {
    /// A list of sub-agents by name: [`KindArgs::agents`] gives their indices.
    Agents,
    /// One sub-agent by name: [`KindArgs::agent`] gives its index.
    Agent,
    /// A string.
    String,
    /// An integer from `min` to `max` (inclusive).
    Integer {
        /// The least value allowed.
        min: i64,
        /// The greatest value allowed.
        max: i64,
    },
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// An expression over the state, compiled when the spec is built ([`KindArgs::expression`]).
    Expression,
    /// Any value (a list, a mapping, ...), as JSON.
    Any,
}

impl FieldType {
    /// How the type is named in error messages (`an integer from 1 to 10`).
    pub fn described(&self) -> String {
        match self {
            FieldType::Agents => "a list of agent names".to_string(),
            FieldType::Agent => "an agent name".to_string(),
            FieldType::String => "a string".to_string(),
            FieldType::Integer { min, max } => format!("an integer from {min} to {max}"),
            FieldType::Number => "a number".to_string(),
            FieldType::Bool => "true or false".to_string(),
            FieldType::Choice(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
                format!("one of {}", quoted.join(", "))
            }
            FieldType::Expression => "an expression".to_string(),
            FieldType::Any => "any value".to_string(),
        }
    }
}

/// The values of one agent's fields, handed to [`PlannerKind::planner`]: the non-agent fields as JSON (absent
/// when the spec leaves an optional field out), the sub-agents' indices, the compiled expressions.
#[derive(Clone, Default)]
pub struct KindArgs {
    pub(crate) values: Map<String, Value>,
    pub(crate) agents: HashMap<String, Vec<usize>>,
    pub(crate) expressions: HashMap<String, Arc<Expression>>,
    pub(crate) sub_agents: usize,
}

impl std::fmt::Debug for KindArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindArgs")
            .field("values", &self.values)
            .field("agents", &self.agents)
            .field("expressions", &self.expressions.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl KindArgs {
    /// Empty arguments (what a spec's builder fills in).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the value of a non-agent field.
    pub fn set_value(&mut self, field: impl Into<String>, value: Value) {
        self.values.insert(field.into(), value);
    }

    /// Sets the sub-agents an agent field names, as indices among all the sub-agents.
    pub fn set_agents(&mut self, field: impl Into<String>, indices: Vec<usize>) {
        self.agents.insert(field.into(), indices);
    }

    /// Sets the compiled expression of an expression field.
    pub fn set_expression(&mut self, field: impl Into<String>, expression: Arc<Expression>) {
        self.expressions.insert(field.into(), expression);
    }

    /// Sets how many sub-agents the composite has.
    pub fn set_sub_agents(&mut self, count: usize) {
        self.sub_agents = count;
    }

    /// The value of a non-agent field (an expression field gives its source text).
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.values.get(field)
    }

    /// The value of a string or choice field.
    pub fn get_str(&self, field: &str) -> Option<&str> {
        self.values.get(field).and_then(Value::as_str)
    }

    /// The value of an integer field that fits a `u32`.
    pub fn get_u32(&self, field: &str) -> Option<u32> {
        self.values.get(field).and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok())
    }

    /// The value of an integer field.
    pub fn get_i64(&self, field: &str) -> Option<i64> {
        self.values.get(field).and_then(Value::as_i64)
    }

    /// The value of a number field (an integer too).
    pub fn get_f64(&self, field: &str) -> Option<f64> {
        self.values.get(field).and_then(Value::as_f64)
    }

    /// The value of a boolean field.
    pub fn get_bool(&self, field: &str) -> Option<bool> {
        self.values.get(field).and_then(Value::as_bool)
    }

    /// The indices of the sub-agents an [`FieldType::Agents`] field names, in its order (empty when absent).
    pub fn agents(&self, field: &str) -> &[usize] {
        self.agents.get(field).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The index of the sub-agent an [`FieldType::Agent`] field names.
    pub fn agent(&self, field: &str) -> Option<usize> {
        self.agents.get(field).and_then(|v| v.first().copied())
    }

    /// The compiled expression of an [`FieldType::Expression`] field.
    pub fn expression(&self, field: &str) -> Option<Arc<Expression>> {
        self.expressions.get(field).cloned()
    }

    /// How many sub-agents the composite has (all agent fields together).
    pub fn sub_agents(&self) -> usize {
        self.sub_agents
    }
}

/// The built-in kinds that specs build through their descriptors, one line each.
pub fn builtin() -> Vec<Arc<dyn PlannerKind>> {
    vec![
        Arc::new(crate::sequential::SequenceKind),
        Arc::new(crate::looping::LoopKind),
        Arc::new(crate::parallel::ParallelKind),
        Arc::new(crate::goap::GoapKind),
        Arc::new(crate::p2p::P2pKind),
        Arc::new(crate::voting::VotingKind),
        Arc::new(crate::debate::DebateKind),
    ]
}
