//! Decision router: a decision model chooses which sub-agent handles the request, and that agent runs.
//!
//! As for the supervisor, the model call happens in a hidden sub-agent: the composite's sub-agents are the
//! user's agents followed by a `router` agent (kind `decision_router_decider`, see [`RouterDeciderAgent`]).
//!
//! Without a threshold the decider asks one choice question built from the agents' names and descriptions
//! and the request (the state key `request`, configurable); the answer must name one agent (case-insensitive;
//! surrounding quotes and punctuation ignored). The chosen agent runs and its output is the result.
//!
//! With a threshold the decider asks one yes/no question per agent (the answer is `yes` = 1, `no` = 0, or a
//! confidence between 0 and 1); every agent whose score is at or above the threshold runs, in parallel, and
//! the result is a map name → output (empty when none was selected).
//!
//! An answer that cannot be read is fed back to the model at most `max_retries` times (default 2); then the
//! decider fails with an error quoting the reply. The decision is in the planner's execution state, so a
//! resumed run never asks again.

use std::sync::Arc;

use agentic_agents::ChatModelRef;
use agentic_agents::model::{ChatMessage, ChatRequest};
use agentic_engine::{
    Action, Agent, AgentCall, AgentError, AgentRef, AgentSpec, BuildError, Completion, InputSpec, InvocationContext,
    Planner, PlanningContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as};

/// The name of the hidden decider agent.
pub const ROUTER_AGENT_NAME: &str = "router";

/// The hidden decider of a decision router: asks the model and returns `{"selected": [names], "scores":
/// {name: score}}` (`scores` only with a threshold).
pub struct RouterDeciderAgent {
    spec: AgentSpec,
    model: ChatModelRef,
    agents: Vec<(String, String)>,
    threshold: Option<f64>,
    max_retries: u32,
    request_key: String,
}

/// Strips quotes, backticks, whitespace and trailing punctuation.
fn clean(answer: &str) -> String {
    answer.trim().trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '.' || c.is_whitespace()).to_string()
}

impl RouterDeciderAgent {
    fn choice_prompt(&self, request: &str) -> String {
        let mut s = String::from("Which agent should handle the request? Agents:\n");
        for (name, description) in &self.agents {
            s.push_str(&format!("- {name}: {description}\n"));
        }
        s.push_str(&format!("Request: {request}\nAnswer with the agent's name only."));
        s
    }

    fn fit_prompt(name: &str, description: &str, request: &str) -> String {
        format!(
            "Should the agent `{name}` ({description}) handle the request?\nRequest: {request}\nAnswer yes or no, or \
             with a confidence between 0 and 1."
        )
    }

    fn parse_choice(&self, reply: &str) -> Result<String, String> {
        let answer = clean(reply);
        if let Some((name, _)) = self.agents.iter().find(|(n, _)| n.eq_ignore_ascii_case(&answer)) {
            return Ok(name.clone());
        }
        let names: Vec<&str> = self.agents.iter().map(|(n, _)| n.as_str()).collect();
        Err(format!("`{answer}` is not one of: {}", names.join(", ")))
    }

    fn parse_score(reply: &str) -> Result<f64, String> {
        let answer = clean(reply).to_ascii_lowercase();
        match answer.as_str() {
            "yes" => return Ok(1.0),
            "no" => return Ok(0.0),
            _ => {}
        }
        match answer.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(format!("`{answer}` is neither yes, no nor a number between 0 and 1")),
        }
    }

    /// Asks `prompt`, parsing with `parse`, feeding back invalid answers.
    async fn ask<T>(
        &self,
        ctx: &InvocationContext,
        prompt: String,
        hint: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, AgentError> {
        let mut messages = vec![ChatMessage::user(prompt)];
        let mut attempt = 0;
        loop {
            let response = self
                .model
                .chat(ChatRequest::new(messages.clone()))
                .await
                .map_err(|e| ctx.fail(format!("router model: {e}")))?;
            ctx.add_tokens(response.usage);
            let reply = response.text().to_string();
            match parse(&reply) {
                Ok(v) => return Ok(v),
                Err(reason) if attempt >= self.max_retries => {
                    return Err(ctx.fail(format!(
                        "invalid routing decision after {} attempts: {reason}; the model replied: {reply}",
                        attempt + 1
                    )));
                }
                Err(reason) => {
                    attempt += 1;
                    messages.push(ChatMessage::assistant(reply));
                    messages.push(ChatMessage::user(format!("Invalid answer: {reason}. {hint}")));
                }
            }
        }
    }
}

impl Agent for RouterDeciderAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, AgentError> {
        let request = match ctx.input(&self.request_key) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        let Some(threshold) = self.threshold else {
            let name = self
                .ask(ctx, self.choice_prompt(&request), "Answer with the agent's name only.", |r| self.parse_choice(r))
                .await?;
            return Ok(json!({ "selected": [name] }));
        };
        let mut selected = Vec::new();
        let mut scores = Map::new();
        for (name, description) in &self.agents {
            let prompt = Self::fit_prompt(name, description, &request);
            let score = self
                .ask(ctx, prompt, "Answer yes or no, or with a confidence between 0 and 1.", Self::parse_score)
                .await?;
            if score >= threshold {
                selected.push(Value::String(name.clone()));
            }
            scores.insert(name.clone(), json!(score));
        }
        Ok(json!({ "selected": selected, "scores": scores }))
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
        json!({ "decision": self.decision, "outputs": self.outputs })
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

/// A decision router composite (see the [module](self) docs).
pub struct DecisionRouter;

impl DecisionRouter {
    /// Starts a builder. Defaults: name `decision_router`, no threshold (one choice), `max_retries` 2,
    /// request key `request`. A chat model and at least one sub-agent are required.
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

/// Builder of a [`DecisionRouter`] composite.
pub struct DecisionRouterBuilder {
    parts: CompositeParts,
    model: Option<ChatModelRef>,
    threshold: Option<f64>,
    max_retries: u32,
    request_key: String,
}

composite_builder!(DecisionRouterBuilder);

impl DecisionRouterBuilder {
    /// The decision model (required).
    pub fn chat_model(mut self, model: impl Into<ChatModelRef>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Ask one yes/no question per agent and run all scoring at or above `threshold` (between 0 and 1);
    /// the result becomes a map name → output.
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = Some(threshold);
        self
    }

    /// How many times an unreadable answer is fed back to the model before failing (default 2).
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
    /// agents of the same name, or with a threshold outside 0..=1; [`BuildError::ConflictingTypes`] when the
    /// tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let name = self.parts.spec.name.clone();
        let invalid = |message: String| BuildError::Invalid { agent: name.clone(), message };
        let Some(model) = self.model else { return Err(invalid("a decision router needs a chat model".to_string())) };
        if self.parts.agents.is_empty() {
            return Err(invalid("a decision router needs at least one sub-agent".to_string()));
        }
        if let Some(t) = self.threshold
            && !(0.0..=1.0).contains(&t)
        {
            return Err(invalid(format!("`threshold` must be between 0 and 1, found {t}")));
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
        let decider = RouterDeciderAgent {
            spec,
            model,
            agents,
            threshold: self.threshold,
            max_retries: self.max_retries,
            request_key: self.request_key.clone(),
        };
        let mut parts = self.parts;
        let n = parts.agents.len();
        parts.agents.push(AgentRef::new(decider));
        let details = json!({
            "threshold": self.threshold,
            "max_retries": self.max_retries,
            "request_key": self.request_key,
        });
        let config = Arc::new(RouterConfig { agents: n, multi: self.threshold.is_some() });
        parts.build(move || RouterPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}
