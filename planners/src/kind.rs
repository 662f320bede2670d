//! [`PlannerKind`], the descriptor of a planner kind that specs can name, and what it is built from.

use std::collections::HashMap;
use std::sync::Arc;

use agentic_agents::Expression;
use agentic_agents::decision::DecisionModelRef;
use agentic_agents::model::ChatModelRef;
use agentic_engine::{AgentRef, BuildError, InputSpec, PlannerFactory};
use serde_json::{Map, Value};

use crate::common::CompositeParts;

/// A planner kind that specs can name (`kind: <name>`): its fields and how its planner is made; register one
/// with `agentic_spec::register_kind`.
///
/// The descriptor of a planner kind that specs can name: [`PlannerKind`] — its `kind` name, its fields with
/// their types ([`KindField`], [`FieldType`]: nested lists of entries, models and references to its own agents
/// included), how its composite is built from their values ([`KindArgs`]), what is checked once its agents are
/// built ([`FieldError`]) and how it runs its agents ([`Calls`]). Every built-in composite kind has one, in its
/// planner's file, registered by one line of [`builtin_kinds`]; a program's own kinds implement it
/// (`agentic_spec::register_kind` makes specs accept them; see `examples/round_robin.rs`).
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

    /// Which of its sub-agents the planner runs, and in what order ([`Calls`]): how the MCP and A2A servers
    /// tell the inputs a caller of a spec must give from the keys its agents write for each other. Default
    /// [`Calls::Chosen`].
    fn calls(&self) -> Calls {
        Calls::Chosen
    }

    /// State keys the planner reads itself, not through a sub-agent (a mapper's list), given the settings
    /// it showed in the topology ([`PlannerKind::details`]): inputs a caller of the workflow supplies. Default:
    /// none.
    fn reads(&self, _details: &Value) -> Vec<InputSpec> {
        Vec::new()
    }

    /// Checks the values beyond their types, once the sub-agents are built (`agents`, in field order), before
    /// [`PlannerKind::build`]: what only the spec shows ([`KindArgs::mentions`]) or what concerns one field.
    /// Default: nothing to check.
    ///
    /// # Errors
    /// A [`FieldError`] naming the field (a path such as `desires[1].name`): a spec reports it at that
    /// field's value.
    fn check(&self, _args: &KindArgs, _agents: &[AgentRef]) -> Result<(), FieldError> {
        Ok(())
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
    /// For a field of the entries of a [`FieldType::List`]: no two entries give it the same value (a
    /// desire's name).
    pub unique: bool,
    /// For a [`FieldType::Agents`] field: the planner tells its agents apart by name (a model picks one by
    /// its name), so two entries that are one agent (a registry alias of another entry) are refused.
    pub by_name: bool,
}

impl KindField {
    /// A field every agent of the kind must give.
    pub const fn required(name: &'static str, ty: FieldType) -> Self {
        KindField { name, ty, required: true, min_items: 0, unique: false, by_name: false }
    }

    /// A field an agent of the kind may give.
    pub const fn optional(name: &'static str, ty: FieldType) -> Self {
        KindField { name, ty, required: false, min_items: 0, unique: false, by_name: false }
    }

    /// For a [`FieldType::Agents`] field: the list must name at least `n` agents (a debate's two debaters).
    /// `register_kind` refuses it on a field of another type.
    pub const fn at_least(mut self, n: usize) -> Self {
        self.min_items = n;
        self
    }

    /// For a field of a [`FieldType::List`]'s entries: each entry's value differs from the others' (a spec
    /// giving one twice is refused where the second is written). `register_kind` refuses it elsewhere.
    pub const fn unique(mut self) -> Self {
        self.unique = true;
        self
    }

    /// For a [`FieldType::Agents`] field: the planner chooses among these agents by name (see
    /// [`KindField::by_name`]). `register_kind` refuses it on a field of another type.
    pub const fn by_name(mut self) -> Self {
        self.by_name = true;
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
    /// A name: a non-empty string (a desire's name).
    Name,
    /// A state key: a non-empty string.
    Key,
    /// An integer from `min` to `max` (inclusive).
    Integer {
        /// The least value allowed.
        min: i64,
        /// The greatest value allowed.
        max: i64,
    },
    /// A number.
    Number,
    /// A number from `min` to `max`, both included, or strictly between them when `exclusive`.
    NumberIn {
        /// The lower bound.
        min: f64,
        /// The upper bound.
        max: f64,
        /// Whether the bounds themselves are refused.
        exclusive: bool,
    },
    /// `true` or `false`.
    Bool,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// An expression over the state, compiled when the spec is built ([`KindArgs::expression`]).
    Expression,
    /// A list of mappings, each with these fields (a conditional's `branches: [{when, agents}]`), read and
    /// checked like the kind's own fields; an error inside names its entry (`branches[1].when`). Their
    /// sub-agents are numbered in the list's order, with the kind's other agent fields. [`KindArgs::entries`]
    /// gives one [`KindArgs`] per entry.
    List(&'static [KindField]),
    /// The name of one of the agents of the kind's agent field named here (a blackboard rule's `agent`, one
    /// of its `agents`), not a sub-agent of its own: [`KindArgs::agent`] gives its index and
    /// [`KindArgs::get_str`] its name.
    AgentOf(&'static str),
    /// A model of the spec's `models`, by name (default `default` when the field is optional and not
    /// given), resolved when the spec is built: [`KindArgs::chat_model`], [`KindArgs::decision_model`].
    Model(ModelUse),
    /// Any value (a list, a mapping, ...), as JSON.
    Any,
}

/// What a [`FieldType::Model`] field's model is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelUse {
    /// A chat model (a supervisor's planner): a `scripted` entry with only `decisions` is refused.
    Chat,
    /// A decision model: a `scripted` entry with `decisions` is one, any other model is a chat model used as
    /// one ([`KindArgs::decision_model`] or else [`KindArgs::chat_model`]).
    Decision,
}

impl FieldType {
    /// How the type is named in error messages (`an integer from 1 to 10`).
    pub fn described(&self) -> String {
        match self {
            FieldType::Agents => "a list of agent names".to_string(),
            FieldType::Agent => "an agent name".to_string(),
            FieldType::String => "a string".to_string(),
            FieldType::Name => "a name".to_string(),
            FieldType::Key => "a state key".to_string(),
            FieldType::Integer { min, max } => format!("an integer from {min} to {max}"),
            FieldType::Number => "a number".to_string(),
            FieldType::NumberIn { min, max, exclusive: true } => format!("a number strictly between {min} and {max}"),
            FieldType::NumberIn { min, max, exclusive: false } => format!("a number from {min} to {max}"),
            FieldType::Bool => "true or false".to_string(),
            FieldType::Choice(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
                format!("one of {}", quoted.join(", "))
            }
            FieldType::Expression => "an expression".to_string(),
            FieldType::List(fields) => {
                let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
                format!("a list of `{{{}}}`", names.join(", "))
            }
            FieldType::AgentOf(field) => format!("the name of one of its `{field}`"),
            FieldType::Model(_) => "a model name (in `models`)".to_string(),
            FieldType::Any => "any value".to_string(),
        }
    }
}

/// How the MCP and A2A servers infer a spec's inputs through a composite of a kind ([`PlannerKind::calls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Calls {
    /// Every sub-agent runs, in field order (a sequence, a loop, a parallel, a voting): what one reads that no
    /// agent before it writes is an input, required when the composite always runs.
    AllInOrder,
    /// Some sub-agents run (maybe none), in field order (a conditional's branches, a mapper's items): what
    /// they read that no agent before them writes is an input, never a required one.
    SomeInOrder,
    /// The planner chooses each next sub-agent (by what the state holds, or by a model's answer; the
    /// default): every key a sub-agent writes counts as written, and nothing is required.
    #[default]
    Chosen,
}

/// A value a [`PlannerKind::check`] refuses: the field it is about (a path: `item_key`, `desires[1].name`)
/// and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path among the kind's fields.
    pub field: String,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl FieldError {
    /// A refusal of the value at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Answers [`KindArgs::mentions`]: whether sub-agent `index`, or an agent under it, mentions `key`.
type Mentions = Arc<dyn Fn(usize, &str) -> Option<bool> + Send + Sync>;

/// The values of one agent's fields, handed to [`PlannerKind::planner`]: the non-agent fields as JSON (absent
/// when the spec leaves an optional field out), the sub-agents' indices, the compiled expressions, the
/// entries of list fields, the models.
#[derive(Clone, Default)]
pub struct KindArgs {
    pub(crate) values: Map<String, Value>,
    pub(crate) agents: HashMap<String, Vec<usize>>,
    pub(crate) expressions: HashMap<String, Arc<Expression>>,
    pub(crate) entries: HashMap<String, Vec<KindArgs>>,
    pub(crate) chat_models: HashMap<String, ChatModelRef>,
    pub(crate) decision_models: HashMap<String, DecisionModelRef>,
    pub(crate) mentions: Option<Mentions>,
    pub(crate) sub_agents: usize,
}

impl std::fmt::Debug for KindArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn keys<T>(m: &HashMap<String, T>) -> Vec<&str> {
            let mut keys: Vec<&str> = m.keys().map(String::as_str).collect();
            keys.sort_unstable();
            keys
        }
        let mut d = f.debug_struct("KindArgs");
        d.field("values", &self.values).field("agents", &self.agents).field("expressions", &keys(&self.expressions));
        if !self.entries.is_empty() {
            d.field("entries", &self.entries);
        }
        if !self.chat_models.is_empty() || !self.decision_models.is_empty() {
            d.field("chat_models", &keys(&self.chat_models)).field("decision_models", &keys(&self.decision_models));
        }
        d.finish()
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

    /// Sets the entries of a [`FieldType::List`] field, one [`KindArgs`] each (their agent indices among all
    /// the composite's sub-agents; their [`KindArgs::sub_agents`] is 0: the count is the kind's).
    pub fn set_entries(&mut self, field: impl Into<String>, entries: Vec<KindArgs>) {
        self.entries.insert(field.into(), entries);
    }

    /// Sets the chat model of a [`FieldType::Model`] field.
    pub fn set_chat_model(&mut self, field: impl Into<String>, model: ChatModelRef) {
        self.chat_models.insert(field.into(), model);
    }

    /// Sets the decision model of a [`FieldType::Model`] field.
    pub fn set_decision_model(&mut self, field: impl Into<String>, model: DecisionModelRef) {
        self.decision_models.insert(field.into(), model);
    }

    /// Sets how [`KindArgs::mentions`] is answered: `f(index, key)` (a spec's builder reads its text).
    pub fn set_mentions(&mut self, f: impl Fn(usize, &str) -> Option<bool> + Send + Sync + 'static) {
        self.mentions = Some(Arc::new(f));
    }

    /// Sets how many sub-agents the composite has.
    pub fn set_sub_agents(&mut self, count: usize) {
        self.sub_agents = count;
    }

    /// The value of a non-agent field (an expression field gives its source text, a model field the model's
    /// name, an [`FieldType::AgentOf`] field the agent's name).
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.values.get(field)
    }

    /// The value of a string, name, key or choice field.
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

    /// The index of the sub-agent an [`FieldType::Agent`] or [`FieldType::AgentOf`] field names.
    pub fn agent(&self, field: &str) -> Option<usize> {
        self.agents.get(field).and_then(|v| v.first().copied())
    }

    /// The compiled expression of an [`FieldType::Expression`] field.
    pub fn expression(&self, field: &str) -> Option<Arc<Expression>> {
        self.expressions.get(field).cloned()
    }

    /// The entries of a [`FieldType::List`] field, in order (empty when absent).
    pub fn entries(&self, field: &str) -> &[KindArgs] {
        self.entries.get(field).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The chat model of a [`FieldType::Model`] field (for a [`ModelUse::Decision`] field: when the model is
    /// not a decision model).
    pub fn chat_model(&self, field: &str) -> Option<ChatModelRef> {
        self.chat_models.get(field).cloned()
    }

    /// The decision model of a [`ModelUse::Decision`] field, when the spec's model is one (a `scripted`
    /// entry with `decisions`); otherwise see [`KindArgs::chat_model`].
    pub fn decision_model(&self, field: &str) -> Option<DecisionModelRef> {
        self.decision_models.get(field).cloned()
    }

    /// Whether the sub-agent `index`, or an agent under it, mentions `key` anywhere in its definition as the
    /// spec writes it (inputs, templates, expressions, prompts): `Some(false)` when none does; `None` when it
    /// cannot be told (arguments not built from a spec, or an agent below reads inputs the spec does not show:
    /// an MCP tool, a registered agent).
    pub fn mentions(&self, index: usize, key: &str) -> Option<bool> {
        self.mentions.as_ref().and_then(|f| f(index, key))
    }

    /// How many sub-agents the composite has (all agent fields together).
    pub fn sub_agents(&self) -> usize {
        self.sub_agents
    }

    /// The sub-agents an entry's (or the kind's) [`FieldType::Agents`] field names, taken from `agents` (all
    /// the composite's sub-agents, as [`CompositeParts`] holds them); an index out of range is skipped.
    pub fn agents_from(&self, field: &str, agents: &[AgentRef]) -> Vec<AgentRef> {
        self.agents(field).iter().filter_map(|i| agents.get(*i).cloned()).collect()
    }
}

/// The built-in kinds that specs build through their descriptors, one line each.
pub fn builtin_kinds() -> Vec<Arc<dyn PlannerKind>> {
    vec![
        Arc::new(crate::sequential::SequenceKind),
        Arc::new(crate::looping::LoopKind),
        Arc::new(crate::parallel::ParallelKind),
        Arc::new(crate::goap::GoapKind),
        Arc::new(crate::p2p::P2pKind),
        Arc::new(crate::voting::VotingKind),
        Arc::new(crate::debate::DebateKind),
        Arc::new(crate::parallel_mapper::ParallelMapperKind),
        Arc::new(crate::conditional::ConditionalKind),
        Arc::new(crate::blackboard::BlackboardKind),
        Arc::new(crate::bdi::BdiKind),
        Arc::new(crate::supervisor::SupervisorKind),
        Arc::new(crate::decision_router::DecisionRouterKind),
    ]
}
