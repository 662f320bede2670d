//! The root's inputs ([`RootInput`], [`BuiltSpec::inputs`](crate::BuiltSpec)): the declared `params`, else
//! the inputs inferred from what the agents read, and which of them a run must be given.

use std::collections::HashSet;

use agentic_engine::{TopologyNode, ValueType};
use serde_json::{Map, Value};

use crate::kind::Calls;
use crate::params::{InputError, ParamDef};

/// One input of a spec's root: declared in `params`, or inferred (a spec without `params`) from what its
/// agents read that no agent before them writes.
#[derive(Debug, Clone, PartialEq)]
pub struct RootInput {
    /// The input's name: the state key it is written to.
    pub name: String,
    /// Whether a run must be given it: a param without a default; an inferred input read, without a
    /// default, by an agent that always runs (not optional, not chosen by a planner or a condition), and not
    /// only through `default(..)` or under `is defined`.
    pub required: bool,
    /// Its JSON-schema type name (`string`, `integer`, ..) when declared (in `params`, or by an agent's
    /// typed input); `None`: any JSON value.
    pub value_type: Option<&'static str>,
    /// Its `params` description.
    pub description: Option<String>,
    /// Its `params` default.
    pub default: Option<Value>,
    /// Where it comes from.
    pub origin: InputOrigin,
}

/// Where a [`RootInput`] comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputOrigin {
    /// Declared in the spec's `params`.
    Declared,
    /// Inferred: read by this agent (the first that reads it).
    ReadBy(String),
}

impl RootInput {
    /// The inputs of declared `params`, in declaration order (what [`crate::BuiltSpec::inputs`] holds for a spec
    /// that declares them; this needs no build).
    pub fn of_params(params: &[ParamDef]) -> Vec<RootInput> {
        params
            .iter()
            .map(|p| RootInput {
                name: p.name.clone(),
                required: p.default.is_none(),
                value_type: Some(p.ty.name()),
                description: p.description.clone(),
                default: p.default.clone(),
                origin: InputOrigin::Declared,
            })
            .collect()
    }

    /// Why the spec wants it, for messages: `a string, declared in `params`` or `read by agent `compose``.
    pub fn why(&self) -> String {
        match &self.origin {
            InputOrigin::Declared => {
                let ty = self.value_type.and_then(crate::ParamType::from_name).map_or("a value", |t| t.described());
                if self.default.is_some() {
                    format!("{ty}, declared in `params`")
                } else {
                    format!("{ty}, declared in `params` without a default")
                }
            }
            InputOrigin::ReadBy(agent) => format!("read by agent `{agent}`"),
        }
    }
}

/// The required `inputs` lacks, one error each in input order: `input `name`: missing (read by agent
/// `compose`)`, with [`InputError::missing`] set.
pub(crate) fn missing(inputs: &[RootInput], given: &Map<String, Value>) -> Vec<InputError> {
    inputs
        .iter()
        .filter(|i| i.required && !given.contains_key(&i.name))
        .map(|i| {
            let why = i.why();
            InputError { key: i.name.clone(), message: format!("missing ({why})"), missing: Some(why) }
        })
        .collect()
}

/// The inputs a run of `root` needs from its caller: what its agents read that no agent before them writes,
/// in the order first read. Planners that pick their sub-agents by what they need (GOAP, blackboard, ...)
/// have every key their sub-agents write counted as written; the keys planners bind for a call (a mapper's
/// item, a debate's context, a supervisor's) are not inputs.
pub(crate) fn infer(root: &TopologyNode) -> Vec<RootInput> {
    let mut walk = Walk::default();
    walk.node(root, true, &[]);
    walk.found
}

#[derive(Default)]
struct Walk {
    written: HashSet<String>,
    found: Vec<RootInput>,
}

impl Walk {
    fn node(&mut self, node: &TopologyNode, always_runs: bool, bound: &[String]) {
        let spec = &node.spec;
        let runs = always_runs && !spec.optional;
        for input in &spec.inputs {
            let required = runs && input.default.is_none() && !input.optional;
            self.read(&input.key, input.value_type, required, &spec.name, bound);
        }
        let mut bound = bound.to_vec();
        // What the planner writes for its sub-agents (a debate's transcript, a supervisor's request, a mapper's
        // item).
        bound.extend(node.binds.iter().cloned());
        // How the kind runs its sub-agents, and what its planner reads itself (a mapper's list), as its
        // descriptor says; a composite of a kind no descriptor describes picks its sub-agents.
        let kind = crate::registered_kind(&spec.kind);
        let calls = kind.as_ref().map_or(Calls::Chosen, |k| k.descriptor().calls());
        for input in kind.map(|k| k.descriptor().reads(&node.details)).unwrap_or_default() {
            if identifier(&input.key) {
                let required = runs && input.default.is_none() && !input.optional;
                self.read(&input.key, input.value_type, required, &spec.name, &bound);
            }
        }
        // Sub-agents run in their order (all of them, or some: a conditional's branches, a mapper's items) or
        // as the planner picks them; only the first kind's always run.
        let ordered = matches!(calls, Calls::AllInOrder | Calls::SomeInOrder);
        let children_run = runs && calls == Calls::AllInOrder;
        if !ordered {
            let mut outputs = Vec::new();
            collect_outputs(node, &mut outputs);
            self.written.extend(outputs);
        }
        for child in &node.children {
            self.node(child, children_run, &bound);
        }
        if let Some(key) = &spec.output_key {
            self.written.insert(key.clone());
        }
    }

    fn read(&mut self, key: &str, value_type: ValueType, required: bool, agent: &str, bound: &[String]) {
        if self.written.contains(key) || bound.iter().any(|b| b == key) {
            return;
        }
        match self.found.iter_mut().find(|f| f.name == key) {
            Some(found) => {
                found.required |= required;
                if found.value_type.is_none() {
                    found.value_type = schema_type(value_type);
                }
            }
            None => self.found.push(RootInput {
                name: key.to_string(),
                required,
                value_type: schema_type(value_type),
                description: None,
                default: None,
                origin: InputOrigin::ReadBy(agent.to_string()),
            }),
        }
    }
}

/// The JSON-schema type of a declared value type (`None` for any value).
fn schema_type(ty: ValueType) -> Option<&'static str> {
    Some(match ty {
        ValueType::String => "string",
        ValueType::Number => "number",
        ValueType::Integer => "integer",
        ValueType::Boolean => "boolean",
        ValueType::List => "array",
        ValueType::Object => "object",
        _ => return None,
    })
}

/// The output keys of `node`'s sub-agents, at every depth.
fn collect_outputs(node: &TopologyNode, into: &mut Vec<String>) {
    for child in &node.children {
        into.extend(child.spec.output_key.iter().cloned());
        collect_outputs(child, into);
    }
}

/// Whether `s` is a plain state key (`words`), not an expression (`order.items`).
fn identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use crate::Spec;

    fn inferred(yaml: &str) -> Vec<(String, bool)> {
        let spec = Spec::parse(yaml, "spec.yaml").unwrap_or_else(|e| panic!("{e}"));
        let built = spec.build().unwrap_or_else(|e| panic!("{e}"));
        super::infer(&built.root.topology()).into_iter().map(|i| (i.name, i.required)).collect()
    }

    fn owned(list: &[(&str, bool)]) -> Vec<(String, bool)> {
        list.iter().map(|(k, r)| (k.to_string(), *r)).collect()
    }

    /// The gallery spec `file` without its `params`, inferred.
    fn gallery(file: &str) -> Vec<(String, bool)> {
        let text = std::fs::read_to_string(format!("../examples/specs/{file}")).unwrap_or_else(|e| panic!("{e}"));
        let spec = Spec::parse(&text, file).unwrap_or_else(|e| panic!("{e}"));
        let built = spec.build().unwrap_or_else(|e| panic!("{e}"));
        super::infer(&built.root.topology()).into_iter().map(|i| (i.name, i.required)).collect()
    }

    #[test]
    fn inputs_are_what_agents_read_before_anyone_writes_it() {
        assert_eq!(gallery("hello.yaml"), owned(&[("name", true)]));
        assert_eq!(gallery("countdown.yaml"), owned(&[("budget", true)]));
        // A mapper's item is bound by the mapper; its items are an input.
        assert_eq!(gallery("shout_all.json"), owned(&[("words", true)]));
        // A planner that picks its agents by need: what they write is not an input, nothing is required.
        assert_eq!(gallery("goap.yaml"), owned(&[("prompt", false), ("city", false)]));
        // Branches of a condition may not run; an optional agent neither.
        assert_eq!(gallery("triage.yaml"), owned(&[("temperature", true)]));
    }

    #[test]
    fn a_variable_read_only_through_default_or_under_is_defined_is_not_required() {
        let spec = "version: 1\nroot: main\nagents:\n  main: {kind: sequence, agents: [count, greet, note]}\n  \
                    count: {kind: compute, value: \"n | default(0)\", output_key: count}\n  greet: {kind: compute, \
                    template: \"Hi {{ who }} from {{ place | default('agentic') }}\", output_key: greeting}\n  \
                    note: {kind: compute, inputs: [extra], template: \"{% if extra is defined %}{{ extra }}{% endif \
                    %}\", output_key: note}\n";
        assert_eq!(inferred(spec), owned(&[("n", false), ("place", false), ("who", true), ("extra", false)]));
        // Read plainly anywhere, it is required.
        let both = "version: 1\nroot: main\nagents:\n  main: {kind: sequence, agents: [a, b]}\n  a: {kind: compute, \
                    value: \"n | default(0)\", output_key: a}\n  b: {kind: compute, value: \"n + 1\", output_key: b}\n";
        assert_eq!(inferred(both), owned(&[("n", true)]));
    }

    /// A planner kind that binds `round` for its agents (and runs them in order).
    struct Rounds;

    impl crate::PlannerKind for Rounds {
        fn name(&self) -> &str {
            "spec_inputs_test_rounds"
        }

        fn fields(&self) -> &[crate::KindField] {
            const FIELDS: &[crate::KindField] = &[crate::KindField::required("agents", crate::FieldType::Agents)];
            FIELDS
        }

        fn planner(&self, _: &crate::KindArgs) -> Result<agentic_engine::PlannerFactory, String> {
            Ok(std::sync::Arc::new(|| Box::new(agentic_planners::SequentialPlanner::default())))
        }

        fn binds(&self, _: &crate::KindArgs) -> Vec<String> {
            vec!["round".to_string()]
        }
    }

    #[test]
    fn keys_a_planner_binds_for_its_agents_are_not_inputs() {
        // A debate binds its transcript for the debaters; the question is the caller's (not required: a
        // debate's agents run as its planner decides).
        let debate = "version: 1\nroot: d\nagents:\n  d: {kind: debate, debaters: [a, b], judge: j}\n  a: {kind: \
                      compute, inputs: [question, debateContext], value: \"'AGREE'\", output_key: a}\n  b: {kind: \
                      compute, inputs: [debateContext], value: \"'AGREE'\", output_key: b}\n  j: {kind: compute, \
                      value: \"a\", output_key: verdict}\n";
        assert_eq!(inferred(debate), owned(&[("question", false)]));
        // So does a kind a program registers, through its descriptor (its agents run as its planner decides).
        let _ = crate::register_kind(Rounds);
        let rounds = "version: 1\nroot: r\nagents:\n  r: {kind: spec_inputs_test_rounds, agents: [a]}\n  a: {kind: \
                      compute, inputs: [topic, round], value: \"topic ~ round\", output_key: out}\n";
        assert_eq!(inferred(rounds), owned(&[("topic", false)]));
    }

    #[test]
    fn declared_params_are_the_inputs_and_missing_ones_are_named() {
        let spec = Spec::parse(
            "version: 1\nroot: a\nparams:\n  city: string\n  days: {type: integer, default: 3}\nagents:\n  a: \
             {kind: compute, value: \"city ~ days ~ other\"}\n",
            "weather.yaml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let built = spec.build().unwrap_or_else(|e| panic!("{e}"));
        let listed: Vec<(String, bool, String)> =
            built.inputs.iter().map(|i| (i.name.clone(), i.required, i.why())).collect();
        assert_eq!(
            listed,
            [
                ("city".to_string(), true, "a string, declared in `params` without a default".to_string()),
                ("days".to_string(), false, "an integer, declared in `params`".to_string()),
            ]
        );
        let errors: Vec<String> =
            built.missing_inputs(&serde_json::Map::new()).iter().map(ToString::to_string).collect();
        assert_eq!(errors, ["input `city`: missing (a string, declared in `params` without a default)"]);
        let hello = std::fs::read_to_string("../examples/specs/hello.yaml").unwrap_or_else(|e| panic!("{e}"));
        let built = Spec::parse(&hello, "hello.yaml").and_then(|s| s.build()).unwrap_or_else(|e| panic!("{e}"));
        let missing = built.missing_inputs(&serde_json::Map::new());
        assert_eq!(missing[0].missing.as_deref(), Some("a string, declared in `params` without a default"));
    }
}
