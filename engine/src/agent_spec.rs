//! An agent's metadata: [`AgentSpec`] (name, inputs, output key, options) with its builders' common
//! methods ([`SpecBuilder`]), the declarations of inputs and keys ([`InputSpec`], [`KeyDecl`]), and the agent
//! tree of a system ([`TopologyNode`]), with its fingerprint and structure check.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scope::TypedKey;
use crate::value::{StateType, ValueType};

/// One input an agent reads from the scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSpec {
    /// State key.
    pub key: String,
    /// Declared type: the value is coerced to it when read.
    #[serde(default)]
    pub value_type: ValueType,
    /// Value used when the key is absent (then the input is never "missing").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The Rust type declared for the key (`std::any::type_name`), when declared from one ([`StateType`]):
    /// two agents declaring one key with two Rust types conflict even when both are, say, objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rust_type: Option<String>,
    /// An optional input: when the key is absent the agent still runs and reads `null` (an `Option<T>`
    /// parameter of a declarative agent). Default false: an absent key is a missing argument.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl InputSpec {
    /// An untyped input with no default.
    pub fn new(key: impl Into<String>) -> Self {
        InputSpec { key: key.into(), value_type: ValueType::Any, default: None, rust_type: None, optional: false }
    }

    /// An input of Rust type `T`: its value type and Rust name declared ([`StateType`]).
    pub fn of<T: StateType + ?Sized>(key: impl Into<String>) -> Self {
        InputSpec::new(key).typed(T::value_type()).rust_type(T::rust_type())
    }

    /// Declares the type.
    pub fn typed(mut self, value_type: ValueType) -> Self {
        self.value_type = value_type;
        self
    }

    /// Declares the Rust type's name (see [`InputSpec::rust_type`]).
    pub fn rust_type(mut self, name: impl Into<String>) -> Self {
        self.rust_type = Some(name.into());
        self
    }

    /// Marks the input optional (see [`InputSpec::optional`]).
    pub fn optional(mut self, optional: bool) -> Self {
        self.optional = optional;
        self
    }

    /// Sets the default.
    pub fn default_value(mut self, default: Value) -> Self {
        self.default = Some(default);
        self
    }
}

impl From<&str> for InputSpec {
    fn from(key: &str) -> Self {
        InputSpec::new(key)
    }
}

impl From<String> for InputSpec {
    fn from(key: String) -> Self {
        InputSpec::new(key)
    }
}

impl From<&String> for InputSpec {
    fn from(key: &String) -> Self {
        InputSpec::new(key.clone())
    }
}

/// A typed key as an input: its name, its declared types ([`StateType`]) and its default, if it has one.
impl<T: StateType + Serialize> From<&TypedKey<T>> for InputSpec {
    fn from(key: &TypedKey<T>) -> Self {
        let input = InputSpec::of::<T>(key.name());
        match key.default().map(serde_json::to_value) {
            Some(Ok(default)) => input.default_value(default),
            _ => input,
        }
    }
}

/// A state key to write an output to, with the types it declares: what [`SpecBuilder::output_key`] takes.
///
/// From a plain name (`"story"`, a `String`) it declares nothing (an explicit
/// [`SpecBuilder::output_type`] stays); from a [`TypedKey<T>`] it declares `T`'s value type and Rust type.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyDecl {
    /// The state key.
    pub key: String,
    /// The declared value type, if any.
    pub value_type: Option<ValueType>,
    /// The declared Rust type's name, if any.
    pub rust_type: Option<String>,
}

impl KeyDecl {
    /// Key `key` declared as Rust type `T` ([`StateType`]).
    pub fn of<T: StateType + ?Sized>(key: impl Into<String>) -> Self {
        KeyDecl { key: key.into(), value_type: Some(T::value_type()), rust_type: Some(T::rust_type().to_string()) }
    }
}

impl From<&str> for KeyDecl {
    fn from(key: &str) -> Self {
        KeyDecl { key: key.to_string(), value_type: None, rust_type: None }
    }
}

impl From<String> for KeyDecl {
    fn from(key: String) -> Self {
        KeyDecl { key, value_type: None, rust_type: None }
    }
}

impl From<&String> for KeyDecl {
    fn from(key: &String) -> Self {
        KeyDecl::from(key.clone())
    }
}

impl From<std::borrow::Cow<'_, str>> for KeyDecl {
    fn from(key: std::borrow::Cow<'_, str>) -> Self {
        KeyDecl::from(key.into_owned())
    }
}

impl<T: StateType> From<&TypedKey<T>> for KeyDecl {
    fn from(key: &TypedKey<T>) -> Self {
        KeyDecl::of::<T>(key.name())
    }
}

/// One key's declaration by an agent: what the build-time type check compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Declaration<'a> {
    /// The state key.
    pub key: &'a str,
    /// Its declared value type ([`ValueType::Any`]: none).
    pub value_type: ValueType,
    /// Its declared Rust type, if declared from one.
    pub rust_type: Option<&'a str>,
}

/// Metadata of an agent: what planners, supervisors and reports know about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// Human name (unique within a spec; not necessarily within a Rust-built system).
    pub name: String,
    /// What it does (read by supervisors and routers). Default `""`.
    pub description: String,
    /// Kind for topology and reports (`compute`, `closure`, `sequence`, ...).
    pub kind: String,
    /// State keys read. Default none.
    pub inputs: Vec<InputSpec>,
    /// State key the result is written to. Default none (the result is only recorded in the history).
    pub output_key: Option<String>,
    /// Declared type of the output key, checked for conflicts when the system is built.
    pub output_type: ValueType,
    /// Declared Rust type of the output key (`std::any::type_name`), when declared from one ([`StateType`]).
    /// Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_rust_type: Option<String>,
    /// Skip silently (no invocation, no write) when an input is missing. Default false.
    pub optional: bool,
    /// Run without blocking the planner; readers of the output wait for it. Default false.
    pub is_async: bool,
    /// Fail the invocation with [`crate::AgentError::Timeout`] after this long. Default none.
    #[serde(with = "opt_millis")]
    pub timeout: Option<Duration>,
    /// What this agent and the agents it contains may spend on models (SPEC.md §3 `budget`). Default none.
    /// Not part of the topology's fingerprint: raising a budget is not a change of structure.
    #[serde(skip)]
    pub budget: Option<crate::budget::Budget>,
}

mod opt_millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

impl AgentSpec {
    /// Metadata for an agent named `name` of kind `kind`, with every other field at its default.
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> Self {
        AgentSpec {
            name: name.into(),
            description: String::new(),
            kind: kind.into(),
            inputs: Vec::new(),
            output_key: None,
            output_type: ValueType::Any,
            output_rust_type: None,
            optional: false,
            is_async: false,
            timeout: None,
            budget: None,
        }
    }

    /// The input spec for `key`, if declared.
    pub fn input(&self, key: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.key == key)
    }

    /// Every key this agent declares a type for: its inputs, then its output key.
    pub fn declared_types(&self) -> impl Iterator<Item = Declaration<'_>> {
        let inputs = self.inputs.iter().map(|i| Declaration {
            key: &i.key,
            value_type: i.value_type,
            rust_type: i.rust_type.as_deref(),
        });
        let output = self.output_key.iter().map(|k| Declaration {
            key: k,
            value_type: self.output_type,
            rust_type: self.output_rust_type.as_deref(),
        });
        inputs.chain(output)
    }
}

/// Builder methods shared by every agent builder for the common metadata fields.
///
/// Implemented by leaf and composite builders; each method documents its default on [`AgentSpec`].
pub trait SpecBuilder: Sized {
    /// Mutable access to the metadata being built.
    fn spec_mut(&mut self) -> &mut AgentSpec;

    /// Sets the description (default `""`).
    fn description(mut self, description: impl Into<String>) -> Self {
        self.spec_mut().description = description.into();
        self
    }

    /// Sets the output key (default none): a name, or a [`TypedKey<T>`] (`output_key(&STORY)`), which also
    /// declares the key's type as `T`'s ([`StateType`]: its value type and Rust type).
    fn output_key(mut self, key: impl Into<KeyDecl>) -> Self {
        let key = key.into();
        let spec = self.spec_mut();
        spec.output_key = Some(key.key);
        if let Some(value_type) = key.value_type {
            spec.output_type = value_type;
            spec.output_rust_type = key.rust_type;
        }
        self
    }

    /// Declares the output key's type (default any).
    fn output_type(mut self, value_type: ValueType) -> Self {
        self.spec_mut().output_type = value_type;
        self
    }

    /// Adds an input: a key name, a [`TypedKey<T>`] (`input(&TOPIC)`: declared as `T`, with the key's default),
    /// or an [`InputSpec`] with type/default. An input of the same key given before is replaced.
    fn input(mut self, input: impl Into<InputSpec>) -> Self {
        let input = input.into();
        let inputs = &mut self.spec_mut().inputs;
        if let Some(existing) = inputs.iter_mut().find(|i| i.key == input.key) {
            *existing = input;
        } else {
            inputs.push(input);
        }
        self
    }

    /// Replaces the inputs.
    fn inputs<I: Into<InputSpec>>(mut self, inputs: impl IntoIterator<Item = I>) -> Self {
        self.spec_mut().inputs = inputs.into_iter().map(Into::into).collect();
        self
    }

    /// Marks the agent optional (default false): skipped when an input is missing.
    fn optional(mut self, optional: bool) -> Self {
        self.spec_mut().optional = optional;
        self
    }

    /// Marks the agent async (default false): the planner does not wait for it; readers of its output do.
    fn asynchronous(mut self, is_async: bool) -> Self {
        self.spec_mut().is_async = is_async;
        self
    }

    /// Sets a timeout (default none).
    fn timeout(mut self, timeout: Duration) -> Self {
        self.spec_mut().timeout = Some(timeout);
        self
    }

    /// Sets what this agent and the agents it contains may spend on models (default none; SPEC.md §3): on
    /// the root agent, the run's budget.
    fn budget(mut self, budget: crate::budget::Budget) -> Self {
        self.spec_mut().budget = Some(budget);
        self
    }
}

/// An agent: reads its inputs, does its work, returns its result.
///
/// The engine resolves inputs before calling [`crate::Agent::invoke`] (so `ctx.input(key)` is always present for
/// declared non-optional inputs) and writes the returned value to `output_key` afterwards (a `null` result
/// removes the key).
///
/// One node of a system's agent tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopologyNode {
    /// Stable path id.
    pub path: String,
    /// Metadata.
    pub spec: AgentSpec,
    /// Planner settings or expressions, when the agent reports them.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
    /// Sub-agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<TopologyNode>,
    /// State keys the composite writes for its sub-agents before calling them (a debate's transcript): inputs
    /// of the sub-agents that a caller need not supply. Not serialized, so not part of the fingerprint.
    #[serde(skip)]
    pub binds: Vec<String>,
}

impl TopologyNode {
    /// A stable 64-bit fingerprint (FNV-1a over the canonical JSON of the tree), as 16 hex digits.
    ///
    /// Two builds of the same workflow have the same fingerprint; any change of structure, keys or settings
    /// changes it. Used to refuse resuming a run with a changed workflow.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    /// The first difference of *structure* between this tree and `newer` — an agent's name, kind or output key,
    /// or the sub-agents of a composite (SERVER.md §5: what a run may not change when it moves to a newer spec
    /// text; prompts, templates, models, descriptions and settings may differ) — as a sentence naming the agent
    /// and its path; `None` when the structure is the same. An output key counts: what the run wrote under the
    /// old one would be missing for the agents reading the new one.
    pub fn structure_change(&self, newer: &TopologyNode) -> Option<String> {
        let (a, b) = (&self.spec, &newer.spec);
        let at = format!("agent `{}` at `{}`", a.name, self.path);
        if a.name != b.name {
            return Some(format!("{at} is now named `{}`", b.name));
        }
        if a.kind != b.kind {
            return Some(format!("{at}: its kind changed from `{}` to `{}`", a.kind, b.kind));
        }
        if a.output_key != b.output_key {
            // What the run wrote stays under the old key: readers of the new one would miss it.
            let key = |k: &Option<String>| k.as_deref().map_or_else(|| "none".to_string(), |k| format!("`{k}`"));
            return Some(format!("{at}: its output key changed from {} to {}", key(&a.output_key), key(&b.output_key)));
        }
        let names = |n: &TopologyNode| n.children.iter().map(|c| format!("`{}`", c.spec.name)).collect::<Vec<_>>();
        if self.children.len() != newer.children.len() {
            return Some(format!(
                "{at}: its sub-agents changed from [{}] to [{}]",
                names(self).join(", "),
                names(newer).join(", ")
            ));
        }
        self.children.iter().zip(&newer.children).find_map(|(old, new)| old.structure_change(new))
    }

    /// Depth-first iterator over the tree.
    pub fn walk(&self) -> Vec<&TopologyNode> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.walk());
        }
        out
    }
}
