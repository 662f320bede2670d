//! The [`DecisionRouter`] composite and its planner; the behaviour is documented on [`DecisionRouter`].

use std::sync::Arc;

use agentic_agents::decision::{ChatDecisionModel, DecisionModelRef, DecisionRequest, Question};
use agentic_agents::model::ChatModelRef;
use agentic_engine::{
    Action, Agent, AgentCall, AgentError, AgentRef, AgentSpec, BuildError, Completion, InputSpec, InvocationContext,
    Planner, PlanningContext, Stop,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, ModelUse, PlannerKind};

/// The name of the hidden decider agent.
pub const ROUTER_AGENT_NAME: &str = "router";
/// The name of the choice question asked without a threshold.
pub const CHOICE_QUESTION_NAME: &str = "agent";
/// The text of the choice question asked without a threshold.
pub const CHOICE_QUESTION: &str = "Which agent is the best fit to handle this request?";

/// The hidden decider of a decision router: asks the decision model and returns `{"selected": [names],
/// "probabilities": {name: probability}}` (probabilities as the model reported them: per option for the
/// choice — empty when not reported — or the probability of yes per agent with a threshold).
pub struct RouterDeciderAgent {
    spec: AgentSpec,
    model: DecisionModelRef,
    agents: Vec<(String, String)>,
    threshold: Option<f64>,
    request_key: String,
}

impl RouterDeciderAgent {
    /// The decision request for `request` (the value at the request key).
    fn decision_request(&self, request: Value) -> DecisionRequest {
        let mut input = Map::new();
        input.insert(self.request_key.clone(), request);
        let r = DecisionRequest::new(Value::Object(input));
        match self.threshold {
            None => r.question(
                CHOICE_QUESTION_NAME,
                Question::choice(CHOICE_QUESTION, self.agents.iter().map(|(n, d)| (n.clone(), d.clone()))),
            ),
            Some(_) => self.agents.iter().fold(r, |r, (name, description)| {
                let text = if description.is_empty() {
                    format!("Should the agent `{name}` handle this request?")
                } else {
                    format!("Should the agent `{name}` ({description}) handle this request?")
                };
                r.question(name.clone(), Question::yes_no(text))
            }),
        }
    }
}

impl Agent for RouterDeciderAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let request = ctx.input(&self.request_key).cloned().unwrap_or(Value::String(String::new()));
        let response = self
            .model
            .decide_in(ctx, self.decision_request(request), |e| ctx.fail(format!("routing decision: {e}")))
            .await?;
        let model = if response.model.is_empty() { self.model.name() } else { response.model.as_str() };
        ctx.usage().add_model_call(model, response.usage, response.cost_usd);
        let Some(threshold) = self.threshold else {
            let name = response.choice(CHOICE_QUESTION_NAME).map_err(|e| ctx.fail(e.to_string()))?.to_string();
            let probabilities = response.choice_probabilities(CHOICE_QUESTION_NAME).cloned().unwrap_or_default();
            return Ok(json!({ "selected": [name], "probabilities": probabilities }));
        };
        let mut selected = Vec::new();
        let mut probabilities = Map::new();
        for (name, _) in &self.agents {
            let p = response.yes_no(name).map_err(|e| ctx.fail(e.to_string()))?;
            if p >= threshold {
                selected.push(Value::String(name.clone()));
            }
            probabilities.insert(name.clone(), json!(p));
        }
        Ok(json!({ "selected": selected, "probabilities": probabilities }))
    }
}

struct RouterConfig {
    /// Number of selectable agents; the decider is sub-agent `agents`.
    agents: usize,
    /// With a threshold the result is a map name → output.
    multi: bool,
}

/// The decision router planner. Execution state: `{"decision": [agent index] | null, "outputs": {name:
/// output}}` — the agents chosen (null until the decider answered) and the outputs received so far.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct RouterPlanner {
    decision: Option<Vec<usize>>,
    outputs: Map<String, Value>,
    #[serde(skip)]
    config: Option<Arc<RouterConfig>>,
}

impl RouterPlanner {
    fn config(&self, ctx: &PlanningContext<'_>) -> Result<Arc<RouterConfig>, AgentError> {
        self.config.clone().ok_or_else(|| ctx.error("decision router planner has no configuration"))
    }
}

impl Planner for RouterPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        self.decision = None;
        self.outputs.clear();
        Ok(Action::Call(vec![AgentCall::new(cfg.agents).write_output(false)]))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        let name_of = |i: usize| ctx.agent_spec(i).map(|s| s.name.clone()).unwrap_or_default();
        if done.call.agent == cfg.agents {
            let names = done.output.get("selected").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut indices = Vec::new();
            for n in &names {
                let n = n.as_str().unwrap_or_default();
                let i = (0..cfg.agents)
                    .find(|&i| ctx.agent_spec(i).is_some_and(|s| s.name == n))
                    .ok_or_else(|| ctx.error(format!("the router chose an unknown agent `{n}`")))?;
                indices.push(i);
            }
            if indices.is_empty() {
                self.decision = Some(indices);
                return Ok(Action::DoneWith(if cfg.multi { json!({}) } else { Value::Null }));
            }
            self.decision = Some(indices.clone());
            return Ok(Action::call_all(indices));
        }
        let decision = self.decision.clone().ok_or_else(|| ctx.error("agent completion before the decision"))?;
        self.outputs.insert(name_of(done.call.agent), done.output.clone());
        if self.outputs.len() < decision.len() {
            return Ok(Action::Nothing);
        }
        if cfg.multi {
            let map: Map<String, Value> = decision
                .iter()
                .map(|&i| (name_of(i), self.outputs.get(&name_of(i)).cloned().unwrap_or_default()))
                .collect();
            Ok(Action::DoneWith(Value::Object(map)))
        } else {
            Ok(Action::DoneWith(done.output.clone()))
        }
    }

    fn execution_state(&self) -> Value {
        state_of("decision router", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: RouterPlanner = restore_as("decision router", state)?;
        self.decision = restored.decision;
        self.outputs = restored.outputs;
        Ok(())
    }

    fn rationale(&self) -> Option<String> {
        self.decision.as_ref().map(|d| format!("the router chose agents {d:?}"))
    }

    fn kind(&self) -> &'static str {
        "decision_router"
    }
}

/// A decision router composite.
///
/// Decision router: a decision model chooses which sub-agent handles the request, and that agent runs.
///
/// As for the supervisor, the model call happens in a hidden sub-agent: the composite's sub-agents are the
/// user's agents followed by a `router` agent (kind `decision_router_decider`, see [`RouterDeciderAgent`]), so
/// the decision is journaled like any step and a resumed run never asks again.
///
/// The decider asks a [`DecisionModelRef`] about the input `{"<request key>": <request>}` (the state key
/// `request` by default, configurable). Without a threshold it asks one choice question, [`CHOICE_QUESTION`]
/// named `agent`, whose options are the agents' names with their descriptions; the chosen agent runs and its
/// output is the result. With a threshold (strictly between 0 and 1) it asks, in the same request, one yes/no
/// question per agent (named after the agent: "Should the agent `medical` (Answers medical questions.)
/// handle this request?"); every agent whose probability of yes is at or above the threshold runs, in
/// parallel, and the result is a map name → output (empty when none was selected).
///
/// A chat model can stand in for the decision model ([`DecisionRouterBuilder::chat_model`] wraps it in a
/// [`ChatDecisionModel`], which feeds unreadable answers back at most `max_retries` times).
///
/// Follows LangChain4j agentic's `DecisionRouterPlanner` (choice question from names and descriptions, an
/// activation threshold with per-agent yes/no questions asked in one request, the decision in the execution
/// state).
pub struct DecisionRouter;

impl DecisionRouter {
    /// Starts a builder. Defaults: name `decision_router`, no threshold (one choice), `max_retries` 2 (for a
    /// chat model), request key `request`. A decision (or chat) model and at least one sub-agent are required.
    pub fn builder() -> DecisionRouterBuilder {
        DecisionRouterBuilder {
            parts: CompositeParts::new("decision_router"),
            model: None,
            threshold: None,
            max_retries: 2,
            request_key: "request".to_string(),
        }
    }
}

/// The model a router was given.
enum RouterModel {
    Decision(DecisionModelRef),
    Chat(ChatModelRef),
}

/// Builder of a [`DecisionRouter`] composite.
pub struct DecisionRouterBuilder {
    parts: CompositeParts,
    model: Option<RouterModel>,
    threshold: Option<f64>,
    max_retries: u32,
    request_key: String,
}

composite_builder!(DecisionRouterBuilder);

impl DecisionRouterBuilder {
    /// The decision model (this or [`DecisionRouterBuilder::chat_model`] is required; the last one set wins).
    pub fn decision_model(mut self, model: impl Into<DecisionModelRef>) -> Self {
        self.model = Some(RouterModel::Decision(model.into()));
        self
    }

    /// A chat model used as the decision model through a [`ChatDecisionModel`] (with `max_retries`).
    pub fn chat_model(mut self, model: impl Into<ChatModelRef>) -> Self {
        self.model = Some(RouterModel::Chat(model.into()));
        self
    }

    /// Ask one yes/no question per agent and run every agent whose probability of yes is at or above
    /// `threshold` (strictly between 0 and 1); the result becomes a map name → output.
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = Some(threshold);
        self
    }

    /// With a chat model: how many times an unreadable answer is fed back before failing (default 2).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The state key holding the request (default `request`; absent → empty).
    pub fn request_key(mut self, key: impl Into<String>) -> Self {
        self.request_key = key.into();
        self
    }

    /// Builds the composite. Its sub-agents are the given agents followed by the hidden `router` agent.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] without a model, without sub-agents, with an agent named `router`, with two
    /// agents of the same name, or with a threshold not strictly between 0 and 1;
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let name = self.parts.spec.name.clone();
        let invalid = |message: String| BuildError::Invalid { agent: name.clone(), message };
        let model = match self.model {
            Some(RouterModel::Decision(m)) => m,
            Some(RouterModel::Chat(m)) => {
                DecisionModelRef::new(ChatDecisionModel::new(m).max_retries(self.max_retries))
            }
            None => return Err(invalid("a decision router needs a decision model (or a chat model)".to_string())),
        };
        if self.parts.agents.is_empty() {
            return Err(invalid("a decision router needs at least one sub-agent".to_string()));
        }
        if let Some(t) = self.threshold
            && !(t > 0.0 && t < 1.0)
        {
            return Err(invalid(format!("`threshold` must be strictly between 0 and 1, found {t}")));
        }
        let mut agents: Vec<(String, String)> = Vec::new();
        for a in &self.parts.agents {
            let spec = a.spec();
            if spec.name == ROUTER_AGENT_NAME {
                return Err(invalid(format!("a decision router's sub-agent cannot be named `{ROUTER_AGENT_NAME}`")));
            }
            if agents.iter().any(|(n, _)| *n == spec.name) {
                return Err(invalid(format!("two sub-agents are named `{}`", spec.name)));
            }
            agents.push((spec.name.clone(), spec.description.clone()));
        }
        let mut spec = AgentSpec::new(ROUTER_AGENT_NAME, "decision_router_decider");
        spec.description = "Chooses the agents of the decision router".to_string();
        spec.inputs = vec![InputSpec::new(self.request_key.clone()).default_value(Value::String(String::new()))];
        let details = json!({
            "threshold": self.threshold,
            "decision_model": model.name(),
            "max_retries": self.max_retries,
            "request_key": self.request_key,
        });
        let decider = RouterDeciderAgent {
            spec,
            model,
            agents,
            threshold: self.threshold,
            request_key: self.request_key.clone(),
        };
        let mut parts = self.parts;
        let n = parts.agents.len();
        parts.agents.push(AgentRef::new(decider));
        let config = Arc::new(RouterConfig { agents: n, multi: self.threshold.is_some() });
        parts.build(move || RouterPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `decision_router` kind of specs: `agents` (chosen by name), `model` (a decision model, or a chat model
/// used as one; default `default`), `threshold` (strictly between 0 and 1; default: one choice), built with
/// [`DecisionRouterBuilder`].
pub struct DecisionRouterKind;

impl PlannerKind for DecisionRouterKind {
    fn name(&self) -> &str {
        "decision_router"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents).at_least(1).by_name(),
            KindField::optional("model", FieldType::Model(ModelUse::Decision)),
            KindField::optional("threshold", FieldType::NumberIn { min: 0.0, max: 1.0, exclusive: true }),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let mut b = DecisionRouter::builder();
        b.parts = parts;
        b.model = match (args.decision_model("model"), args.chat_model("model")) {
            (Some(m), _) => Some(RouterModel::Decision(m)),
            (None, Some(m)) => Some(RouterModel::Chat(m)),
            (None, None) => None,
        };
        if let Some(t) = args.get_f64("threshold") {
            b = b.threshold(t);
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn execution_state_is_exact_and_restores() {
        let config = Arc::new(RouterConfig { agents: 2, multi: true });
        let planner = || RouterPlanner { config: Some(config.clone()), ..Default::default() };
        assert_state(&planner(), &mut planner(), r#"{"decision":null,"outputs":{}}"#);
        let agents = [
            agent("medical", "request", Some("m")),
            agent("legal", "request", Some("l")),
            agent(ROUTER_AGENT_NAME, "request", None),
        ];
        let spec = AgentSpec::new("decision_router", "decision_router");
        let ctx = PlanningContext::new(view(json!({"request": "help"})), &agents, &spec, "root");
        let mut p = planner();
        let decide = calls(p.first_action(&ctx).unwrap()).remove(0);
        let decision = json!({"selected": ["legal", "medical"], "probabilities": {}});
        let chosen = calls(p.next_action(&ctx, &done(decide, decision)).unwrap());
        p.next_action(&ctx, &done(chosen[1].clone(), json!("take rest"))).unwrap();
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"decision":[1,0],"outputs":{"medical":"take rest"}}"#);
        let completed = done(chosen[0].clone(), json!("sue"));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
