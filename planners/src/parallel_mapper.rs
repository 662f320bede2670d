//! The [`ParallelMapper`] composite and its planner; the behaviour is documented on [`ParallelMapper`].

use agentic_engine::{
    Action, AgentCall, AgentError, AgentRef, BuildError, Completion, InputSpec, Planner, PlanningContext, ValueType,
    json_type_name,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{Calls, FieldError, FieldType, KindArgs, KindField, PlannerKind};

/// The mapper planner. Execution state: `{"items": [...], "results": [...|null], "started": s,
/// "completed": c}`; each completion changes one result and the counters, which it reports as a patch
/// ([`Planner::execution_state_patch`]), so that K items cost O(K) in the journal, not O(K²).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MapperPlanner {
    items: Vec<Value>,
    results: Vec<Value>,
    started: usize,
    completed: usize,
    #[serde(skip)]
    items_key: String,
    #[serde(skip)]
    item_key: String,
    #[serde(skip)]
    max_concurrency: Option<usize>,
    /// What the last completion changed in the execution state (JSON Patch operations).
    #[serde(skip)]
    patch: Vec<Value>,
}

impl MapperPlanner {
    fn call(&self, i: usize) -> AgentCall {
        let mut b = Map::new();
        b.insert(self.item_key.clone(), self.items[i].clone());
        AgentCall::new(0).item(i as u64).bindings(b).write_output(false)
    }
}

impl Planner for MapperPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let items = match ctx.view().get(&self.items_key) {
            None => return Ok(Action::Done),
            Some(Value::Array(items)) => items.clone(),
            Some(other) => {
                return Err(AgentError::WrongType {
                    agent: ctx.composite().name.clone(),
                    path: ctx.path().to_string(),
                    key: self.items_key.clone(),
                    expected: "a list".to_string(),
                    found: json_type_name(other).to_string(),
                });
            }
        };
        if items.is_empty() {
            return Ok(Action::DoneWith(Value::Array(Vec::new())));
        }
        let n = items.len();
        self.items = items;
        self.results = vec![Value::Null; n];
        let first = self.max_concurrency.map_or(n, |m| m.clamp(1, n));
        self.started = first;
        Ok(Action::Call((0..first).map(|i| self.call(i)).collect()))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let i = done.call.tag as usize;
        self.patch.clear();
        let slot = self.results.get_mut(i).ok_or_else(|| ctx.error(format!("completion for unknown item {i}")))?;
        *slot = done.output.clone();
        self.completed += 1;
        self.patch.push(json!({"op": "replace", "path": format!("/results/{i}"), "value": done.output}));
        self.patch.push(json!({"op": "replace", "path": "/completed", "value": self.completed}));
        if self.completed >= self.items.len() {
            self.patch.push(json!({"op": "replace", "path": "/results", "value": []}));
            return Ok(Action::DoneWith(Value::Array(std::mem::take(&mut self.results))));
        }
        if self.started < self.items.len() {
            self.started += 1;
            self.patch.push(json!({"op": "replace", "path": "/started", "value": self.started}));
            return Ok(Action::Call(vec![self.call(self.started - 1)]));
        }
        Ok(Action::Nothing)
    }

    fn execution_state(&self) -> Value {
        state_of("parallel_mapper", self)
    }

    fn execution_state_patch(&self) -> Option<Value> {
        Some(Value::Array(self.patch.clone()))
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: MapperPlanner = restore_as("parallel_mapper", state)?;
        self.items = restored.items;
        self.results = restored.results;
        self.started = restored.started;
        self.completed = restored.completed;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "parallel_mapper"
    }
}

/// Maps one agent over a list.
///
/// Parallel mapper: runs one sub-agent once per item of the list at `items_key`, concurrently (at most
/// `max_concurrency`), binding each item to the agent's `item_key` input; the result is the list of outputs
/// in item order. Empty list → `[]`; not a list → an error naming the key and the type found; missing key →
/// no result. Follows LangChain4j agentic's parallel mapper; its state is fully serialisable (the original
/// lost it on resume).
pub struct ParallelMapper;

impl ParallelMapper {
    /// Starts a builder. Defaults: name `parallel_mapper`, `item_key` = the agent's first input, unbounded
    /// concurrency. `sub_agent` and `items_key` are required.
    pub fn builder() -> ParallelMapperBuilder {
        ParallelMapperBuilder {
            parts: CompositeParts::new("parallel_mapper"),
            items_key: None,
            item_key: None,
            max_concurrency: None,
        }
    }
}

/// Builder of a [`ParallelMapper`].
pub struct ParallelMapperBuilder {
    parts: CompositeParts,
    items_key: Option<String>,
    item_key: Option<String>,
    max_concurrency: Option<usize>,
}

composite_builder!(ParallelMapperBuilder);

impl ParallelMapperBuilder {
    /// The agent applied to each item (replaces any sub-agents set).
    pub fn sub_agent(mut self, agent: AgentRef) -> Self {
        self.parts.agents = vec![agent];
        self
    }

    /// The state key holding the list.
    pub fn items_key(mut self, key: impl Into<String>) -> Self {
        self.items_key = Some(key.into());
        self
    }

    /// The agent input that receives each item (default: the agent's first input).
    pub fn item_key(mut self, key: impl Into<String>) -> Self {
        self.item_key = Some(key.into());
        self
    }

    /// At most `n` items in flight at once (default: all).
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n);
        self
    }

    /// Builds the mapper. The item key is bound for each call of the agent ([`CompositeParts::set_binds`]).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] without exactly one sub-agent, without `items_key`, or when the item key
    /// cannot be determined; [`BuildError::ConflictingTypes`] as for every composite.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let name = self.parts.spec.name.clone();
        let invalid = |message: &str| BuildError::Invalid { agent: name.clone(), message: message.to_string() };
        if self.parts.agents.len() != 1 {
            return Err(invalid("a parallel mapper needs exactly one sub-agent"));
        }
        let items_key = self.items_key.ok_or_else(|| invalid("a parallel mapper needs `items` (the list key)"))?;
        let item_key = match self.item_key {
            Some(k) => k,
            None => self.parts.agents[0]
                .spec()
                .inputs
                .first()
                .map(|i| i.key.clone())
                .ok_or_else(|| invalid("the mapped agent has no inputs: set `item_key`"))?,
        };
        if self.parts.agents[0].0.has_chat_memory() {
            return Err(invalid(&format!(
                "the mapped agent `{}` keeps a chat memory and cannot be mapped (its items would share one \
                 conversation)",
                self.parts.agents[0].name()
            )));
        }
        let mapped = self.parts.agents[0].spec();
        if !mapped.inputs.is_empty() && mapped.input(&item_key).is_none() {
            let inputs: Vec<&str> = mapped.inputs.iter().map(|i| i.key.as_str()).collect();
            return Err(invalid(&format!(
                "item_key `{item_key}` is not an input of the mapped agent `{}` (its inputs: {})",
                mapped.name,
                inputs.join(", ")
            )));
        }
        // The items key is read by the planner, not resolved as an input: a missing list means no result.
        let mut parts = self.parts;
        parts.binds = vec![item_key.clone()];
        let max = self.max_concurrency;
        let details = json!({ "items": items_key, "item_key": item_key, "max_concurrency": max });
        parts.build(
            move || MapperPlanner {
                items_key: items_key.clone(),
                item_key: item_key.clone(),
                max_concurrency: max,
                ..Default::default()
            },
            details,
        )
    }
}

/// The `parallel_mapper` kind of specs: `agent` (mapped over the list), `items` (the state key holding the
/// list), `item_key` (the input of `agent` receiving each item; default its first input), `max_concurrency`
/// (default unbounded), built with [`ParallelMapperBuilder`]. An `item_key` that a mapped composite's agents,
/// as the spec writes them, never mention is refused ([`PlannerKind::check`]): every item would run on the same
/// state.
pub struct ParallelMapperKind;

impl PlannerKind for ParallelMapperKind {
    fn name(&self) -> &str {
        "parallel_mapper"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agent", FieldType::Agent),
            KindField::required("items", FieldType::Key),
            KindField::optional("item_key", FieldType::Key),
            KindField::optional("max_concurrency", FieldType::Integer { min: 1, max: i64::MAX }),
        ];
        FIELDS
    }

    fn calls(&self) -> Calls {
        Calls::SomeInOrder
    }

    fn reads(&self, details: &Value) -> Vec<InputSpec> {
        let items = details.get("items").and_then(Value::as_str);
        items.map(|key| InputSpec::new(key).typed(ValueType::List)).into_iter().collect()
    }

    fn check(&self, args: &KindArgs, agents: &[AgentRef]) -> Result<(), FieldError> {
        // A leaf's inputs are checked by the builder; a composite declares none of its own, so its item key
        // must be read somewhere under it.
        let (Some(key), Some(index)) = (args.get_str("item_key"), args.agent("agent")) else { return Ok(()) };
        let Some(mapped) = agents.get(index) else { return Ok(()) };
        if mapped.spec().inputs.is_empty() && args.mentions(index, key) == Some(false) {
            return Err(FieldError::new(
                "item_key",
                format!(
                    "item_key `{key}` is read by no agent of the mapped composite `{}`: each item would run on the \
                     same state",
                    mapped.name()
                ),
            ));
        }
        Ok(())
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let max_concurrency = args.get_i64("max_concurrency").map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        ParallelMapperBuilder {
            parts,
            items_key: args.get_str("items").map(str::to_string),
            item_key: args.get_str("item_key").map(str::to_string),
            max_concurrency,
        }
        .build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, PlanningContext};
    use serde_json::json;

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    fn planner() -> MapperPlanner {
        MapperPlanner {
            items_key: "xs".to_string(),
            item_key: "x".to_string(),
            max_concurrency: Some(2),
            ..Default::default()
        }
    }

    /// Applies the `replace` operations of a JSON Patch (the only ones the mapper reports).
    fn apply(state: &mut Value, patch: &Value) {
        for op in patch.as_array().expect("a patch is a list") {
            assert_eq!(op["op"], "replace");
            let path = op["path"].as_str().expect("path");
            *state.pointer_mut(path).unwrap_or_else(|| panic!("{path} is not in the state")) = op["value"].clone();
        }
    }

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [agent("upper", "x | upper", None)];
        let spec = AgentSpec::new("parallel_mapper", "parallel_mapper");
        let ctx = PlanningContext::new(view(json!({"xs": ["a", "b", "c"]})), &agents, &spec, "root");
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap());
        assert_eq!(first.len(), 2);
        let mut before = p.execution_state();
        p.next_action(&ctx, &done(first[1].clone(), json!("B"))).unwrap();
        let expected = r#"{"items":["a","b","c"],"results":[null,"B",null],"started":3,"completed":1}"#;
        let mut restored = planner();
        assert_state(&p, &mut restored, expected);
        // The patch of the step turns the state before it into the state after it.
        apply(&mut before, &p.execution_state_patch().expect("a patch"));
        assert_eq!(before.to_string(), expected);
        // So does the last step's, which empties the results.
        let mut before = p.execution_state();
        let next = done(first[0].clone(), json!("A"));
        assert_eq!(restored.next_action(&ctx, &next).unwrap(), p.next_action(&ctx, &next).unwrap());
        apply(&mut before, &p.execution_state_patch().expect("a patch"));
        assert_eq!(before, p.execution_state());
        let last = done(AgentCall::new(0).item(2), json!("C"));
        assert_eq!(p.next_action(&ctx, &last).unwrap(), Action::DoneWith(json!(["A", "B", "C"])));
        let mut before = restored.execution_state();
        restored.next_action(&ctx, &last).unwrap();
        apply(&mut before, &restored.execution_state_patch().expect("a patch"));
        assert_eq!(before.to_string(), r#"{"items":["a","b","c"],"results":[],"started":3,"completed":3}"#);
        assert_eq!(before, restored.execution_state());
    }
}
