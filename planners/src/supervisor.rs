//! Supervisor: an LLM decides, step by step, which sub-agent to invoke next and with which arguments, until
//! it answers `done`.
//!
//! Planners are synchronous, so the LLM step is a hidden sub-agent: the composite's sub-agents are the
//! user's agents followed by a `planner` agent (kind `supervisor_planner`, see [`SupervisorPlannerAgent`]).
//! The [`SupervisorPlanner`] alternates: call the planner agent → read its decision
//! `{"agentName": .., "arguments": {..}}` → call the chosen agent with the arguments as call bindings →
//! call the planner agent again, and so on. The planner agent writes the arguments to the state before
//! returning (skipping a key that already holds a value of an incompatible type), so the chosen agent and
//! later ones see them.
//!
//! The planner agent's prompt lists every agent's name, description and typed arguments (its inputs), the
//! `done` pseudo-agent, the optional [`SUPERVISOR_CONTEXT_KEY`] (build time, overridable per invocation under
//! that key), the request (the state key `request`, configurable) and the invocations so far. A malformed
//! answer, an unknown agent name or an argument whose type does not fit is fed back to the model, at most
//! `max_retries` times (default 2); then the planner agent fails with an error quoting the model's reply.
//!
//! `done` finishes: with [`ResponseStrategy::Last`] (default) the result is the last agent's output; with
//! [`ResponseStrategy::Summary`] it is the `response` argument of `done` (the last output when absent).
//! After `max_invocations` agent invocations (default 10) the composite finishes with the last output.
//!
//! Follows LangChain4j agentic's supervisor (`supervisorBuilder`, `AgentInvocation` with `agentName` and
//! `arguments`, `maxAgentsInvocations`, `supervisorContext`, `SupervisorResponseStrategy`); the bounded
//! feedback on invalid decisions and the serialisable history (a resumed run never asks the model again for
//! a decision already taken) are ours.

use std::sync::Arc;

use agentic_agents::ChatModelRef;
use agentic_agents::extract_json;
use agentic_agents::model::{ChatMessage, ChatRequest};
use agentic_engine::{
    Action, Agent, AgentCall, AgentError, AgentRef, AgentSpec, BuildError, Completion, InputSpec, InvocationContext,
    Planner, PlanningContext, ValueType,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as};

/// The state key (and planner-agent input) holding the supervisor context added to the prompt.
pub const SUPERVISOR_CONTEXT_KEY: &str = "supervisor_context";
/// The call binding carrying the invocations so far to the planner agent.
pub const SUPERVISOR_HISTORY_KEY: &str = "supervisorHistory";
/// The pseudo-agent name that finishes the supervisor.
pub const DONE_AGENT: &str = "done";
/// The name of the hidden planner agent.
pub const PLANNER_AGENT_NAME: &str = "planner";

/// How the supervisor's result is chosen when the planner answers `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseStrategy {
    /// The last invoked agent's output (default).
    #[default]
    Last,
    /// The `response` argument of `done` (the last output when absent).
    Summary,
}

impl ResponseStrategy {
    /// The strategy's name (`last`, `summary`).
    pub fn name(self) -> &'static str {
        match self {
            ResponseStrategy::Last => "last",
            ResponseStrategy::Summary => "summary",
        }
    }

    /// Parses a name: `last` or `summary`.
    ///
    /// # Errors
    /// Any other name, with the valid ones.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "last" => Ok(ResponseStrategy::Last),
            "summary" => Ok(ResponseStrategy::Summary),
            other => Err(format!("unknown response strategy `{other}`, expected `last` or `summary`")),
        }
    }
}

/// One agent invocation decided by the supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupervisorStep {
    /// The agent's name.
    pub agent: String,
    /// The arguments the planner gave.
    pub arguments: Map<String, Value>,
    /// The agent's output (`null` while it runs).
    pub output: Value,
}

/// What the planner agent knows about one selectable agent.
#[derive(Debug, Clone)]
struct AgentInfo {
    name: String,
    description: String,
    inputs: Vec<(String, ValueType)>,
}

/// The hidden planner agent of a supervisor: asks the model for the next decision, validates it (with
/// bounded feedback), writes the arguments to the state and returns `{"agentName": .., "arguments": {..}}`.
pub struct SupervisorPlannerAgent {
    spec: AgentSpec,
    model: ChatModelRef,
    agents: Vec<AgentInfo>,
    max_retries: u32,
    request_key: String,
}

impl SupervisorPlannerAgent {
    fn system_prompt(&self, context: &str) -> String {
        let mut s = String::from(
            "You are a supervisor coordinating agents. Decide which agent to invoke next to fulfil the user's \
             request, or finish with `done`.\nAvailable agents:\n",
        );
        for a in &self.agents {
            let args: Map<String, Value> =
                a.inputs.iter().map(|(k, t)| (k.clone(), Value::String(t.to_string()))).collect();
            s.push_str(&format!("- {}: {} Arguments: {}\n", a.name, a.description, Value::Object(args)));
        }
        s.push_str(&format!(
            "- {DONE_AGENT}: Finish with the final response. Arguments: {{\"response\":\"string\"}}\n\
             Answer with a JSON object only: {{\"agentName\": \"<agent name>\", \"arguments\": {{\"<argument>\": <value>}}}}"
        ));
        if !context.is_empty() {
            s.push_str(&format!("\nContext: {context}"));
        }
        s
    }

    fn user_prompt(request: &str, history: &[SupervisorStep]) -> String {
        let mut s = format!("Request: {request}\nInvocations so far:");
        if history.is_empty() {
            s.push_str(" none");
        }
        for (i, step) in history.iter().enumerate() {
            s.push_str(&format!(
                "\n{}. {}({}) -> {}",
                i + 1,
                step.agent,
                Value::Object(step.arguments.clone()),
                step.output
            ));
        }
        s
    }

    /// Validates a reply: `Ok((name, arguments))` with the arguments coerced to the declared input types.
    fn validate(&self, reply: &str) -> Result<(String, Map<String, Value>), String> {
        let value = extract_json(reply).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
        let Value::Object(obj) = value else {
            return Err("the answer must be a JSON object".to_string());
        };
        let Some(name) = obj.get("agentName").and_then(Value::as_str) else {
            return Err("the answer has no string `agentName`".to_string());
        };
        let arguments = match obj.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err("`arguments` must be a JSON object".to_string()),
        };
        if name == DONE_AGENT {
            return Ok((name.to_string(), arguments));
        }
        let Some(info) = self.agents.iter().find(|a| a.name == name) else {
            let names: Vec<&str> =
                self.agents.iter().map(|a| a.name.as_str()).chain(std::iter::once(DONE_AGENT)).collect();
            return Err(format!("unknown agent `{name}`; choose one of: {}", names.join(", ")));
        };
        let mut coerced = Map::new();
        for (k, v) in arguments {
            let v = match info.inputs.iter().find(|(key, _)| *key == k) {
                Some((_, t)) => {
                    t.coerce(&v).ok_or_else(|| format!("argument `{k}` of `{name}` must be {t}, got {v}"))?
                }
                None => v,
            };
            coerced.insert(k, v);
        }
        Ok((name.to_string(), coerced))
    }
}

/// The declared type matching a stored value's JSON type (`None` for null).
fn stored_type(v: &Value) -> Option<ValueType> {
    match v {
        Value::Null => None,
        Value::Bool(_) => Some(ValueType::Boolean),
        Value::Number(_) => Some(ValueType::Number),
        Value::String(_) => Some(ValueType::String),
        Value::Array(_) => Some(ValueType::List),
        Value::Object(_) => Some(ValueType::Object),
    }
}

impl Agent for SupervisorPlannerAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, AgentError> {
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        let request = text(ctx.input(&self.request_key));
        let context = text(ctx.input(SUPERVISOR_CONTEXT_KEY));
        let history: Vec<SupervisorStep> = match ctx.input(SUPERVISOR_HISTORY_KEY) {
            Some(v) if !v.is_null() => {
                serde_json::from_value(v.clone()).map_err(|e| ctx.fail(format!("invalid supervisor history: {e}")))?
            }
            _ => Vec::new(),
        };
        let mut messages = vec![
            ChatMessage::system(self.system_prompt(&context)),
            ChatMessage::user(Self::user_prompt(&request, &history)),
        ];
        let mut attempt = 0;
        let (name, arguments) = loop {
            let response = self
                .model
                .chat(ChatRequest::new(messages.clone()))
                .await
                .map_err(|e| ctx.fail(format!("supervisor model: {e}")))?;
            ctx.add_tokens(response.usage);
            let reply = response.text().to_string();
            match self.validate(&reply) {
                Ok(decision) => break decision,
                Err(reason) => {
                    if attempt >= self.max_retries {
                        return Err(ctx.fail(format!(
                            "invalid supervisor decision after {} attempts: {reason}; the model replied: {reply}",
                            attempt + 1
                        )));
                    }
                    attempt += 1;
                    messages.push(ChatMessage::assistant(reply));
                    messages.push(ChatMessage::user(format!(
                        "Invalid answer: {reason}. Answer again with a JSON object only: \
                         {{\"agentName\": \"<agent name>\", \"arguments\": {{\"<argument>\": <value>}}}}"
                    )));
                }
            }
        };
        if name != DONE_AGENT {
            let view = ctx.view();
            for (k, v) in &arguments {
                let fits = match view.get(k).and_then(stored_type) {
                    Some(t) => t.coerce(v).is_some(),
                    None => true,
                };
                if fits {
                    ctx.write(k.clone(), v.clone()).await?;
                }
            }
        }
        Ok(json!({ "agentName": name, "arguments": arguments }))
    }
}

struct SupervisorConfig {
    /// Number of selectable agents; the planner agent is sub-agent `agents`.
    agents: usize,
    max_invocations: u32,
    strategy: ResponseStrategy,
}

/// The supervisor planner. Execution state: `{"invocations": n, "history": [{"agent", "arguments",
/// "output"}], "current": {"agent", "arguments", "output"} | null}` — agent invocations so far, their
/// decisions and outputs, and the decision being executed.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct SupervisorPlanner {
    invocations: u32,
    history: Vec<SupervisorStep>,
    current: Option<SupervisorStep>,
    #[serde(skip)]
    config: Option<Arc<SupervisorConfig>>,
}

impl SupervisorPlanner {
    fn config(&self, ctx: &PlanningContext<'_>) -> Result<Arc<SupervisorConfig>, AgentError> {
        self.config.clone().ok_or_else(|| ctx.error("supervisor planner has no configuration"))
    }

    fn ask(&self, cfg: &SupervisorConfig) -> Action {
        let mut b = Map::new();
        b.insert(SUPERVISOR_HISTORY_KEY.to_string(), json!(self.history));
        Action::Call(vec![AgentCall::new(cfg.agents).bindings(b).write_output(false)])
    }

    fn last_output(&self) -> Value {
        self.history.last().map(|s| s.output.clone()).unwrap_or(Value::Null)
    }

    /// The invocations so far.
    pub fn history(&self) -> &[SupervisorStep] {
        &self.history
    }
}

impl Planner for SupervisorPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        self.invocations = 0;
        self.history.clear();
        self.current = None;
        if cfg.max_invocations == 0 {
            return Ok(Action::DoneWith(Value::Null));
        }
        Ok(self.ask(&cfg))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        if done.call.agent == cfg.agents {
            let name = done.output.get("agentName").and_then(Value::as_str).unwrap_or_default().to_string();
            let arguments = done.output.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default();
            if name == DONE_AGENT {
                let result = match (cfg.strategy, arguments.get("response")) {
                    (ResponseStrategy::Summary, Some(r)) if !r.is_null() => r.clone(),
                    _ => self.last_output(),
                };
                return Ok(Action::DoneWith(result));
            }
            let index = (0..cfg.agents)
                .find(|&i| ctx.agent_spec(i).is_some_and(|s| s.name == name))
                .ok_or_else(|| ctx.error(format!("the planner chose an unknown agent `{name}`")))?;
            self.current = Some(SupervisorStep { agent: name, arguments: arguments.clone(), output: Value::Null });
            return Ok(Action::Call(vec![AgentCall::new(index).bindings(arguments)]));
        }
        let mut step = self.current.take().ok_or_else(|| ctx.error("agent completion without a decision"))?;
        step.output = done.output.clone();
        self.history.push(step);
        self.invocations += 1;
        if self.invocations >= cfg.max_invocations {
            return Ok(Action::DoneWith(self.last_output()));
        }
        Ok(self.ask(&cfg))
    }

    fn execution_state(&self) -> Value {
        json!({ "invocations": self.invocations, "history": self.history, "current": self.current })
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: SupervisorPlanner = restore_as("supervisor", state)?;
        self.invocations = restored.invocations;
        self.history = restored.history;
        self.current = restored.current;
        Ok(())
    }

    fn rationale(&self) -> Option<String> {
        self.current
            .as_ref()
            .map(|s| format!("the supervisor chose `{}` with {}", s.agent, Value::Object(s.arguments.clone())))
    }

    fn kind(&self) -> &'static str {
        "supervisor"
    }
}

/// A supervisor composite (see the [module](self) docs).
pub struct Supervisor;

impl Supervisor {
    /// Starts a builder. Defaults: name `supervisor`, `max_invocations` 10, `max_retries` 2, response
    /// strategy `last`, no supervisor context, request key `request`. A chat model and at least one sub-agent
    /// are required.
    pub fn builder() -> SupervisorBuilder {
        SupervisorBuilder {
            parts: CompositeParts::new("supervisor"),
            model: None,
            max_invocations: 10,
            max_retries: 2,
            strategy: ResponseStrategy::Last,
            context: String::new(),
            request_key: "request".to_string(),
        }
    }
}

/// Builder of a [`Supervisor`] composite.
pub struct SupervisorBuilder {
    parts: CompositeParts,
    model: Option<ChatModelRef>,
    max_invocations: u32,
    max_retries: u32,
    strategy: ResponseStrategy,
    context: String,
    request_key: String,
}

composite_builder!(SupervisorBuilder);

impl SupervisorBuilder {
    /// The model that plans (required).
    pub fn chat_model(mut self, model: impl Into<ChatModelRef>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// At most `n` agent invocations (default 10); then the result is the last output.
    pub fn max_invocations(mut self, n: u32) -> Self {
        self.max_invocations = n;
        self
    }

    /// How many times an invalid decision is fed back to the model before failing (default 2).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// How the result is chosen on `done` (default [`ResponseStrategy::Last`]).
    pub fn response_strategy(mut self, strategy: ResponseStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Text added to the planner's prompt (default none); overridable per invocation under
    /// [`SUPERVISOR_CONTEXT_KEY`].
    pub fn supervisor_context(mut self, context: impl Into<String>) -> Self {
        self.context = context.into();
        self
    }

    /// The state key holding the user's request (default `request`; absent → empty).
    pub fn request_key(mut self, key: impl Into<String>) -> Self {
        self.request_key = key.into();
        self
    }

    /// Builds the composite. Its sub-agents are the given agents followed by the hidden `planner` agent.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] without a model, without sub-agents, with an agent named `done` or
    /// `planner`, or with two agents of the same name; [`BuildError::ConflictingTypes`] when the tree
    /// declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let name = self.parts.spec.name.clone();
        let invalid = |message: String| BuildError::Invalid { agent: name.clone(), message };
        let Some(model) = self.model else { return Err(invalid("a supervisor needs a chat model".to_string())) };
        if self.parts.agents.is_empty() {
            return Err(invalid("a supervisor needs at least one sub-agent".to_string()));
        }
        let mut infos: Vec<AgentInfo> = Vec::new();
        for a in &self.parts.agents {
            let spec = a.spec();
            if spec.name == DONE_AGENT || spec.name == PLANNER_AGENT_NAME {
                return Err(invalid(format!("a supervisor's sub-agent cannot be named `{}`", spec.name)));
            }
            if infos.iter().any(|i| i.name == spec.name) {
                return Err(invalid(format!("two sub-agents are named `{}`", spec.name)));
            }
            infos.push(AgentInfo {
                name: spec.name.clone(),
                description: spec.description.clone(),
                inputs: spec.inputs.iter().map(|i| (i.key.clone(), i.value_type)).collect(),
            });
        }
        let mut spec = AgentSpec::new(PLANNER_AGENT_NAME, "supervisor_planner");
        spec.description = "Chooses the next agent of the supervisor".to_string();
        spec.inputs = vec![
            InputSpec::new(self.request_key.clone()).default_value(Value::String(String::new())),
            InputSpec::new(SUPERVISOR_CONTEXT_KEY).default_value(Value::String(self.context.clone())),
            InputSpec::new(SUPERVISOR_HISTORY_KEY).default_value(json!([])),
        ];
        let planner = SupervisorPlannerAgent {
            spec,
            model,
            agents: infos,
            max_retries: self.max_retries,
            request_key: self.request_key.clone(),
        };
        let mut parts = self.parts;
        let agents = parts.agents.len();
        parts.agents.push(AgentRef::new(planner));
        let details = json!({
            "max_invocations": self.max_invocations,
            "max_retries": self.max_retries,
            "response_strategy": self.strategy.name(),
            "supervisor_context": self.context,
            "request_key": self.request_key,
        });
        let config =
            Arc::new(SupervisorConfig { agents, max_invocations: self.max_invocations, strategy: self.strategy });
        parts.build(move || SupervisorPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}
