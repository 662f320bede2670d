//! The [`Supervisor`] composite and its planner; the behaviour is documented on [`Supervisor`].

use std::sync::Arc;

use agentic_agents::extract_json;
use agentic_agents::model::ChatModelRef;
use agentic_agents::model::{ChatMessage, ChatRequest, ResponseFormat, call_model};
use agentic_engine::{
    Action, Agent, AgentCall, AgentError, AgentRef, AgentSpec, BuildError, Cause, Completion, InputSpec,
    InvocationContext, Planner, PlanningContext, Stop, ValueType,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, ModelUse, PlannerKind};

/// The state key (and planner-agent input) holding the supervisor context added to the prompt.
pub const SUPERVISOR_CONTEXT_KEY: &str = "supervisor_context";
/// The call binding carrying the invocations so far to the planner agent.
pub const SUPERVISOR_HISTORY_KEY: &str = "supervisorHistory";
/// The call binding carrying the summary of the work so far to the planner agent (summarization context).
pub const SUPERVISOR_SUMMARY_KEY: &str = "supervisorSummary";
/// The call binding carrying the two candidate responses `{"last": .., "summary": ..}` to the scorer agent.
pub const SUPERVISOR_RESPONSES_KEY: &str = "supervisorResponses";
/// The pseudo-agent name that finishes the supervisor.
pub const DONE_AGENT: &str = "done";
/// The name of the hidden planner agent.
pub const PLANNER_AGENT_NAME: &str = "planner";
/// The name of the hidden summarizer agent (summarization context only).
pub const SUMMARIZER_AGENT_NAME: &str = "summarizer";
/// The name of the hidden scorer agent (scored response strategy only).
pub const SCORER_AGENT_NAME: &str = "scorer";

/// How the supervisor's result is chosen when the planner answers `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseStrategy {
    /// The last invoked agent's output (default).
    #[default]
    Last,
    /// The `response` argument of `done` (the last output when absent).
    Summary,
    /// The model scores the last output and the `done` response against the request; the higher wins (a tie
    /// goes to the response).
    Scored,
}

impl ResponseStrategy {
    /// The strategy's name (`last`, `summary`, `scored`).
    pub fn name(self) -> &'static str {
        match self {
            ResponseStrategy::Last => "last",
            ResponseStrategy::Summary => "summary",
            ResponseStrategy::Scored => "scored",
        }
    }

    /// Parses a name: `last`, `summary` or `scored`.
    ///
    /// # Errors
    /// Any other name, with the valid ones.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "last" => Ok(ResponseStrategy::Last),
            "summary" => Ok(ResponseStrategy::Summary),
            "scored" => Ok(ResponseStrategy::Scored),
            other => Err(format!("unknown response strategy `{other}`, expected `last`, `summary` or `scored`")),
        }
    }
}

/// What the planner sees of the work done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContextStrategy {
    /// Its own previous decisions and the outputs they produced (default).
    #[default]
    ChatMemory,
    /// A summary of what the sub-agents did, written by the model after each invocation.
    Summarization,
    /// Both.
    ChatMemoryAndSummarization,
}

impl ContextStrategy {
    /// The strategy's name (`chat_memory`, `summarization`, `chat_memory_and_summarization`).
    pub fn name(self) -> &'static str {
        match self {
            ContextStrategy::ChatMemory => "chat_memory",
            ContextStrategy::Summarization => "summarization",
            ContextStrategy::ChatMemoryAndSummarization => "chat_memory_and_summarization",
        }
    }

    /// Parses a name: `chat_memory`, `summarization` or `chat_memory_and_summarization`.
    ///
    /// # Errors
    /// Any other name, with the valid ones.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "chat_memory" => Ok(ContextStrategy::ChatMemory),
            "summarization" => Ok(ContextStrategy::Summarization),
            "chat_memory_and_summarization" => Ok(ContextStrategy::ChatMemoryAndSummarization),
            other => Err(format!(
                "unknown context strategy `{other}`, expected `chat_memory`, `summarization` or \
                 `chat_memory_and_summarization`"
            )),
        }
    }

    fn memory(self) -> bool {
        self != ContextStrategy::Summarization
    }

    fn summarization(self) -> bool {
        self != ContextStrategy::ChatMemory
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
    /// Inputs the agent cannot run without (no default, agent not optional).
    required: Vec<String>,
}

/// The hidden planner agent of a supervisor: asks the model for the next decision, validates it (with
/// bounded feedback), writes the arguments to the state and returns `{"agentName": .., "arguments": {..}}`.
pub struct SupervisorPlannerAgent {
    spec: AgentSpec,
    model: ChatModelRef,
    agents: Vec<AgentInfo>,
    max_retries: u32,
    request_key: String,
    context: ContextStrategy,
}

/// The text of an optional string input (`""` when absent or null; non-strings as JSON).
fn input_text(ctx: &InvocationContext, key: &str) -> String {
    match ctx.input(key) {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The invocations so far, read from the [`SUPERVISOR_HISTORY_KEY`] input.
fn history_input(ctx: &InvocationContext) -> Result<Vec<SupervisorStep>, AgentError> {
    match ctx.input(SUPERVISOR_HISTORY_KEY) {
        Some(v) if !v.is_null() => {
            serde_json::from_value(v.clone()).map_err(|e| ctx.fail(format!("invalid supervisor history: {e}")))
        }
        _ => Ok(Vec::new()),
    }
}

/// One line per invocation: `1. withdraw({"user":"Mario"}) -> "Mario withdrew 100"`.
fn history_lines(history: &[SupervisorStep]) -> String {
    let mut s = String::new();
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

    /// The user message: the request, then the summary (summarization) and the invocations so far (chat
    /// memory).
    fn user_prompt(&self, request: &str, summary: &str, history: &[SupervisorStep]) -> String {
        let mut s = format!("Request: {request}");
        if self.context.summarization() {
            let summary = if summary.trim().is_empty() { "nothing yet" } else { summary.trim() };
            s.push_str(&format!("\nSummary of the work so far: {summary}"));
        }
        if self.context.memory() {
            s.push_str("\nInvocations so far:");
            if history.is_empty() {
                s.push_str(" none");
            }
            s.push_str(&history_lines(history));
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

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let request = input_text(ctx, &self.request_key);
        let context = input_text(ctx, SUPERVISOR_CONTEXT_KEY);
        let summary = input_text(ctx, SUPERVISOR_SUMMARY_KEY);
        let history = history_input(ctx)?;
        let mut messages = vec![
            ChatMessage::system(self.system_prompt(&context)),
            ChatMessage::user(self.user_prompt(&request, &summary, &history)),
        ];
        // A model chosen per invocation (SPEC.md §7) is chosen once for every attempt.
        let model = self.model.for_invocation(ctx).await?;
        let mut attempt = 0;
        let (name, arguments) = loop {
            let response = call_model(ctx, &model, ChatRequest::new(messages.clone()), "choose", |e| {
                ctx.fail_with(Cause::from(e).context("supervisor model"))
            })
            .await?;
            let reply = response.text().to_string();
            let checked = self.validate(&reply).and_then(|(name, arguments)| {
                // An argument the chosen agent needs, given neither here nor in the state, would fail the run:
                // it goes back to the model like any other mistake.
                let view = ctx.view();
                let missing: Vec<&String> = self
                    .agents
                    .iter()
                    .find(|a| a.name == name)
                    .map(|a| {
                        a.required.iter().filter(|k| !arguments.contains_key(*k) && view.get(k).is_none()).collect()
                    })
                    .unwrap_or_default();
                if missing.is_empty() {
                    Ok((name, arguments))
                } else {
                    let list: Vec<String> = missing.iter().map(|k| format!("`{k}`")).collect();
                    Err(format!("agent `{name}` needs {} in `arguments` (not in the state yet)", list.join(", ")))
                }
            });
            match checked {
                Ok(decision) => break decision,
                Err(reason) => {
                    if attempt >= self.max_retries {
                        return Err(ctx
                            .fail(format!(
                                "invalid supervisor decision after {} attempts: {reason}; the model replied: {reply}",
                                attempt + 1
                            ))
                            .into());
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

/// The prompt of the summarizer agent, before the request and the invocations.
pub const SUMMARIZER_PROMPT: &str = "Summarize what the agents have done so far to fulfil the request, in a few \
     sentences, keeping every fact the next decision needs (names, amounts, results). Answer with the summary only.";

/// The hidden summarizer of a supervisor with a summarization context: asks the model to summarize the
/// invocations so far (and the conversations of the supervisor's LLM sub-agents, from the scope's
/// conversation context), and returns the summary (a string).
pub struct SupervisorSummarizerAgent {
    spec: AgentSpec,
    model: ChatModelRef,
    agents: Vec<String>,
    request_key: String,
}

impl Agent for SupervisorSummarizerAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let request = input_text(ctx, &self.request_key);
        let history = history_input(ctx)?;
        let mut prompt = format!("{SUMMARIZER_PROMPT}\n\nRequest: {request}\nInvocations:{}", history_lines(&history));
        let conversations: Vec<String> = ctx
            .view()
            .context()
            .into_iter()
            .filter(|e| self.agents.contains(&e.agent))
            .map(|e| format!("[{}] User: {}\n[{}] Answer: {}", e.agent, e.user, e.agent, e.answer))
            .collect();
        if !conversations.is_empty() {
            prompt.push_str(&format!("\nConversations:\n{}", conversations.join("\n")));
        }
        let response =
            call_model(ctx, &self.model, ChatRequest::new(vec![ChatMessage::user(prompt)]), "summary", |e| {
                ctx.fail_with(Cause::from(e).context("supervisor summary"))
            })
            .await?;
        Ok(Value::String(response.text().trim().to_string()))
    }
}

/// The hidden scorer of a supervisor with the scored response strategy: asks the model to score the last
/// agent's output and the `done` response against the request, with bounded feedback on unreadable
/// answers, and returns `{"last": score, "summary": score}` (each between 0 and 1).
pub struct SupervisorScorerAgent {
    spec: AgentSpec,
    model: ChatModelRef,
    max_retries: u32,
    request_key: String,
}

impl SupervisorScorerAgent {
    fn prompt(request: &str, last: &Value, summary: &Value) -> String {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        format!(
            "Score how well each response fulfils the user's request, from 0 (not at all) to 1 (completely).\n\
             Request: {request}\nResponse `last` (the last agent's output): {}\nResponse `summary` (the \
             supervisor's summary): {}\nAnswer with a JSON object only: {{\"last\": <score>, \"summary\": <score>}}",
            text(last),
            text(summary)
        )
    }

    fn validate(reply: &str) -> Result<(f64, f64), String> {
        let value = extract_json(reply).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
        let score = |k: &str| match value.get(k).and_then(Value::as_f64) {
            Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(format!("`{k}` must be a number between 0 and 1")),
        };
        Ok((score("last")?, score("summary")?))
    }
}

impl Agent for SupervisorScorerAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let request = input_text(ctx, &self.request_key);
        let responses = ctx.input(SUPERVISOR_RESPONSES_KEY).cloned().unwrap_or(Value::Null);
        let last = responses.get("last").cloned().unwrap_or(Value::Null);
        let summary = responses.get("summary").cloned().unwrap_or(Value::Null);
        let mut messages = vec![ChatMessage::user(Self::prompt(&request, &last, &summary))];
        let schema = json!({"type": "object", "properties": {"last": {"type": "number"}, "summary": {"type": "number"}},
                            "required": ["last", "summary"], "additionalProperties": false});
        let model = self.model.for_invocation(ctx).await?;
        let mut attempt = 0;
        loop {
            let mut request = ChatRequest::new(messages.clone());
            if model.info().json_schema {
                request = request.response_format(ResponseFormat::JsonSchema {
                    name: "scores".to_string(),
                    schema: schema.clone(),
                    strict: true,
                });
            }
            let response = call_model(ctx, &model, request, "score", |e| {
                ctx.fail_with(Cause::from(e).context("supervisor scorer model"))
            })
            .await?;
            let reply = response.text().to_string();
            match Self::validate(&reply) {
                Ok((l, s)) => return Ok(json!({ "last": l, "summary": s })),
                Err(reason) if attempt >= self.max_retries => {
                    return Err(ctx
                        .fail(format!(
                            "invalid response scores after {} attempts: {reason}; the model replied: {reply}",
                            attempt + 1
                        ))
                        .into());
                }
                Err(reason) => {
                    attempt += 1;
                    messages.push(ChatMessage::assistant(reply));
                    messages.push(ChatMessage::user(format!(
                        "Invalid answer: {reason}. Answer again with a JSON object only: {{\"last\": <score>, \
                         \"summary\": <score>}}"
                    )));
                }
            }
        }
    }
}

struct SupervisorConfig {
    /// Number of selectable agents; the planner agent is sub-agent `agents`.
    agents: usize,
    /// The summarizer's index (summarization context only).
    summarizer: Option<usize>,
    /// The scorer's index (scored strategy only).
    scorer: Option<usize>,
    max_invocations: u32,
    strategy: ResponseStrategy,
}

/// The supervisor planner. Execution state: `{"invocations": n, "history": [{"agent", "arguments",
/// "output"}], "current": {"agent", "arguments", "output"} | null, "summary": text | null, "response": value
/// | null}` — agent invocations so far, their decisions and outputs, the decision being executed, the
/// latest summary (summarization context) and the `done` response waiting for its score (scored strategy).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct SupervisorPlanner {
    invocations: u32,
    history: Vec<SupervisorStep>,
    current: Option<SupervisorStep>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    response: Option<Value>,
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
        if cfg.summarizer.is_some() {
            b.insert(SUPERVISOR_SUMMARY_KEY.to_string(), json!(self.summary.clone().unwrap_or_default()));
        }
        Action::Call(vec![AgentCall::new(cfg.agents).bindings(b).write_output(false)])
    }

    /// The result when the planner answers `done` with `arguments`, or the call of the scorer.
    fn finish(&mut self, cfg: &SupervisorConfig, arguments: &Map<String, Value>) -> Action {
        let response = arguments.get("response").filter(|r| !r.is_null()).cloned();
        let last = self.last_output();
        match (cfg.strategy, response) {
            (ResponseStrategy::Summary, Some(r)) => Action::DoneWith(r),
            (ResponseStrategy::Scored, Some(r)) if last.is_null() || last == r => Action::DoneWith(r),
            (ResponseStrategy::Scored, Some(r)) => match cfg.scorer {
                Some(scorer) => {
                    let mut b = Map::new();
                    b.insert(SUPERVISOR_RESPONSES_KEY.to_string(), json!({ "last": last, "summary": r }));
                    self.response = Some(r);
                    Action::Call(vec![AgentCall::new(scorer).bindings(b).write_output(false)])
                }
                None => Action::DoneWith(r),
            },
            // `last` with no agent output yet: the response is all there is.
            (ResponseStrategy::Last, Some(r)) if last.is_null() => Action::DoneWith(r),
            _ => Action::DoneWith(last),
        }
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
        self.summary = None;
        self.response = None;
        if cfg.max_invocations == 0 {
            return Ok(Action::DoneWith(Value::Null));
        }
        Ok(self.ask(&cfg))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        if Some(done.call.agent) == cfg.scorer {
            let response = self.response.take().unwrap_or(Value::Null);
            let score = |k: &str| done.output.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            return Ok(Action::DoneWith(if score("last") > score("summary") { self.last_output() } else { response }));
        }
        if Some(done.call.agent) == cfg.summarizer {
            self.summary = Some(match &done.output {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            return Ok(self.ask(&cfg));
        }
        if done.call.agent == cfg.agents {
            let name = done.output.get("agentName").and_then(Value::as_str).unwrap_or_default().to_string();
            let arguments = done.output.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default();
            if name == DONE_AGENT {
                return Ok(self.finish(&cfg, &arguments));
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
        if let Some(summarizer) = cfg.summarizer {
            let mut b = Map::new();
            b.insert(SUPERVISOR_HISTORY_KEY.to_string(), json!(self.history));
            return Ok(Action::Call(vec![AgentCall::new(summarizer).bindings(b).write_output(false)]));
        }
        Ok(self.ask(&cfg))
    }

    fn execution_state(&self) -> Value {
        state_of("supervisor", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: SupervisorPlanner = restore_as("supervisor", state)?;
        self.invocations = restored.invocations;
        self.history = restored.history;
        self.current = restored.current;
        self.summary = restored.summary;
        self.response = restored.response;
        Ok(())
    }

    fn rationale(&self) -> Option<String> {
        if self.response.is_some() {
            return Some("the supervisor asks for scores of the last output and its summary".to_string());
        }
        self.current
            .as_ref()
            .map(|s| format!("the supervisor chose `{}` with {}", s.agent, Value::Object(s.arguments.clone())))
    }

    fn kind(&self) -> &'static str {
        "supervisor"
    }
}

/// A supervisor composite.
///
/// Supervisor: an LLM decides, step by step, which sub-agent to invoke next and with which arguments, until
/// it answers `done`.
///
/// Planners are synchronous, so the LLM step is a hidden sub-agent: the composite's sub-agents are the
/// user's agents followed by a `planner` agent (kind `supervisor_planner`, see [`SupervisorPlannerAgent`]).
/// The [`SupervisorPlanner`] alternates: call the planner agent → read its decision
/// `{"agentName": .., "arguments": {..}}` → call the chosen agent with the arguments as call bindings →
/// call the planner agent again, and so on. The planner agent writes the arguments to the state before
/// returning (skipping a key that already holds a value of an incompatible type), so the chosen agent and
/// later ones see them.
///
/// The planner agent's prompt lists every agent's name, description and typed arguments (its inputs), the
/// `done` pseudo-agent, the optional [`SUPERVISOR_CONTEXT_KEY`] (build time, overridable per invocation under
/// that key), the request (the state key `request`, configurable) and the invocations so far. A malformed
/// answer, an unknown agent name or an argument whose type does not fit is fed back to the model, at most
/// `max_retries` times (default 2); then the planner agent fails with an error quoting the model's reply.
///
/// `done` finishes: with [`ResponseStrategy::Last`] (default) the result is the last agent's output (the
/// `response` argument of `done` when no agent has produced one); with
/// [`ResponseStrategy::Summary`] it is the `response` argument of `done` (the last output when absent); with
/// [`ResponseStrategy::Scored`] a hidden `scorer` agent (kind `supervisor_scorer`, [`SupervisorScorerAgent`])
/// asks the model to score both against the request (`{"last": 0..1, "summary": 0..1}`) and the higher wins
/// (a tie goes to the summary). The scorer is not asked when there is nothing to compare: no `response` (the
/// last output wins), no agent output (the summary wins) or both equal.
/// After `max_invocations` agent invocations (default 10) the composite finishes with the last output.
///
/// What the planner sees of the work so far is its [`ContextStrategy`]: `chat_memory` (default) — its own
/// previous decisions with the outputs they produced ("Invocations so far"); `summarization` — a summary of
/// what the sub-agents did, written by the model after each invocation by a hidden `summarizer` agent (kind
/// `supervisor_summarizer`, [`SupervisorSummarizerAgent`]) from the invocations and the sub-agents'
/// conversations (the scope's conversation context); `chat_memory_and_summarization` — both.
///
/// Every model call happens in a hidden sub-agent, so every decision, summary and score is journaled as a
/// step: a resumed run never asks the model again for one already given.
///
/// Follows LangChain4j agentic's supervisor (`supervisorBuilder`, `AgentInvocation` with `agentName` and
/// `arguments`, `maxAgentsInvocations`, `supervisorContext`, `SupervisorResponseStrategy` with its response
/// scorer, `SupervisorContextStrategy`); the bounded feedback on invalid decisions and the serialisable
/// history are ours.
pub struct Supervisor;

impl Supervisor {
    /// Starts a builder. Defaults: name `supervisor`, `max_invocations` 10, `max_retries` 2, response
    /// strategy `last`, context strategy `chat_memory`, no supervisor context, request key `request`. A chat
    /// model and at least one sub-agent are required.
    pub fn builder() -> SupervisorBuilder {
        SupervisorBuilder {
            parts: CompositeParts::new("supervisor"),
            model: None,
            max_invocations: 10,
            max_retries: 2,
            strategy: ResponseStrategy::Last,
            context_strategy: ContextStrategy::ChatMemory,
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
    context_strategy: ContextStrategy,
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

    /// What the planner sees of the work so far (default [`ContextStrategy::ChatMemory`]).
    pub fn context_strategy(mut self, strategy: ContextStrategy) -> Self {
        self.context_strategy = strategy;
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

    /// Builds the composite. Its sub-agents are the given agents followed by the hidden `planner` agent, then
    /// the `summarizer` (summarization context) and the `scorer` (scored strategy).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] without a model, without sub-agents, with an agent named `done`, `planner`,
    /// `summarizer` or `scorer`, or with two agents of the same name; [`BuildError::ConflictingTypes`] when the tree
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
            if [DONE_AGENT, PLANNER_AGENT_NAME, SUMMARIZER_AGENT_NAME, SCORER_AGENT_NAME].contains(&spec.name.as_str())
            {
                return Err(invalid(format!("a supervisor's sub-agent cannot be named `{}`", spec.name)));
            }
            if infos.iter().any(|i| i.name == spec.name) {
                return Err(invalid(format!("two sub-agents are named `{}`", spec.name)));
            }
            infos.push(AgentInfo {
                name: spec.name.clone(),
                description: spec.description.clone(),
                inputs: spec.inputs.iter().map(|i| (i.key.clone(), i.value_type)).collect(),
                required: if spec.optional {
                    Vec::new()
                } else {
                    spec.inputs.iter().filter(|i| i.default.is_none()).map(|i| i.key.clone()).collect()
                },
            });
        }
        let mut spec = AgentSpec::new(PLANNER_AGENT_NAME, "supervisor_planner");
        spec.description = "Chooses the next agent of the supervisor".to_string();
        spec.inputs = vec![
            InputSpec::new(self.request_key.clone()).default_value(Value::String(String::new())),
            InputSpec::new(SUPERVISOR_CONTEXT_KEY).default_value(Value::String(self.context.clone())),
            InputSpec::new(SUPERVISOR_HISTORY_KEY).default_value(json!([])),
        ];
        if self.context_strategy.summarization() {
            spec.inputs.push(InputSpec::new(SUPERVISOR_SUMMARY_KEY).default_value(Value::String(String::new())));
        }
        let names: Vec<String> = infos.iter().map(|i| i.name.clone()).collect();
        let planner = SupervisorPlannerAgent {
            spec,
            model: model.clone(),
            agents: infos,
            max_retries: self.max_retries,
            request_key: self.request_key.clone(),
            context: self.context_strategy,
        };
        let mut parts = self.parts;
        let agents = parts.agents.len();
        parts.agents.push(AgentRef::new(planner));
        let request_input = || InputSpec::new(self.request_key.clone()).default_value(Value::String(String::new()));
        let summarizer = self.context_strategy.summarization().then(|| {
            let mut spec = AgentSpec::new(SUMMARIZER_AGENT_NAME, "supervisor_summarizer");
            spec.description = "Summarizes what the supervisor's agents did".to_string();
            spec.inputs = vec![request_input(), InputSpec::new(SUPERVISOR_HISTORY_KEY).default_value(json!([]))];
            let agent = SupervisorSummarizerAgent {
                spec,
                model: model.clone(),
                agents: names,
                request_key: self.request_key.clone(),
            };
            parts.agents.push(AgentRef::new(agent));
            parts.agents.len() - 1
        });
        let scorer = (self.strategy == ResponseStrategy::Scored).then(|| {
            let mut spec = AgentSpec::new(SCORER_AGENT_NAME, "supervisor_scorer");
            spec.description = "Scores the last output and the summary against the request".to_string();
            spec.inputs = vec![request_input(), InputSpec::new(SUPERVISOR_RESPONSES_KEY).default_value(json!({}))];
            let agent = SupervisorScorerAgent {
                spec,
                model: model.clone(),
                max_retries: self.max_retries,
                request_key: self.request_key.clone(),
            };
            parts.agents.push(AgentRef::new(agent));
            parts.agents.len() - 1
        });
        let details = json!({
            "max_invocations": self.max_invocations,
            "max_retries": self.max_retries,
            "response_strategy": self.strategy.name(),
            "context_strategy": self.context_strategy.name(),
            "supervisor_context": self.context,
            "request_key": self.request_key,
        });
        let config = Arc::new(SupervisorConfig {
            agents,
            summarizer,
            scorer,
            max_invocations: self.max_invocations,
            strategy: self.strategy,
        });
        parts.binds =
            [SUPERVISOR_CONTEXT_KEY, SUPERVISOR_HISTORY_KEY, SUPERVISOR_SUMMARY_KEY, SUPERVISOR_RESPONSES_KEY]
                .map(str::to_string)
                .to_vec();
        parts.build(move || SupervisorPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `supervisor` kind of specs: `agents` (chosen by name), `model` (a chat model; default `default`),
/// `response_strategy` (`last`, `summary`, `scored`), `context_strategy` (`chat_memory`, `summarization`,
/// `chat_memory_and_summarization`), `supervisor_context`, `max_invocations` (default 10), built with
/// [`SupervisorBuilder`].
pub struct SupervisorKind;

impl PlannerKind for SupervisorKind {
    fn name(&self) -> &str {
        "supervisor"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents).at_least(1).by_name(),
            KindField::optional("model", FieldType::Model(ModelUse::Chat)),
            KindField::optional("response_strategy", FieldType::Choice(&["last", "summary", "scored"])),
            KindField::optional(
                "context_strategy",
                FieldType::Choice(&["chat_memory", "summarization", "chat_memory_and_summarization"]),
            ),
            KindField::optional("supervisor_context", FieldType::String),
            KindField::optional("max_invocations", FieldType::Integer { min: 1, max: u32::MAX as i64 }),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let invalid = |message: String| BuildError::Invalid { agent: parts.spec.name.clone(), message };
        let response = ResponseStrategy::from_name(args.get_str("response_strategy").unwrap_or("last"));
        let context = ContextStrategy::from_name(args.get_str("context_strategy").unwrap_or("chat_memory"));
        let (response, context) = (response.map_err(invalid)?, context.map_err(invalid)?);
        let mut b = Supervisor::builder();
        b.parts = parts;
        b.model = args.chat_model("model");
        b = b.response_strategy(response).context_strategy(context);
        if let Some(n) = args.get_u32("max_invocations") {
            b = b.max_invocations(n);
        }
        if let Some(text) = args.get_str("supervisor_context") {
            b = b.supervisor_context(text);
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::PlanningContext;

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    fn planner() -> SupervisorPlanner {
        let config = SupervisorConfig {
            agents: 2,
            summarizer: Some(3),
            scorer: None,
            max_invocations: 5,
            strategy: ResponseStrategy::Last,
        };
        SupervisorPlanner { config: Some(Arc::new(config)), ..Default::default() }
    }

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [
            agent("withdraw", "user", Some("withdrawn")),
            agent("credit", "user", Some("credited")),
            agent(PLANNER_AGENT_NAME, "1", None),
            agent(SUMMARIZER_AGENT_NAME, "1", None),
        ];
        let spec = AgentSpec::new("supervisor", "supervisor");
        let ctx = PlanningContext::new(view(json!({"request": "move 100"})), &agents, &spec, "root");
        let mut p = planner();
        assert_state(
            &p,
            &mut planner(),
            r#"{"invocations":0,"history":[],"current":null,"summary":null,"response":null}"#,
        );
        let ask = calls(p.first_action(&ctx).unwrap()).remove(0);
        let decision = json!({"agentName": "withdraw", "arguments": {"user": "Mario"}});
        let call = calls(p.next_action(&ctx, &done(ask.clone(), decision)).unwrap()).remove(0);
        let summarize = calls(p.next_action(&ctx, &done(call, json!("Mario withdrew 100"))).unwrap()).remove(0);
        p.next_action(&ctx, &done(summarize, json!("withdrawn"))).unwrap();
        let decision = json!({"agentName": "credit", "arguments": {"user": "Luigi", "amount": 100}});
        let call = calls(p.next_action(&ctx, &done(ask, decision)).unwrap()).remove(0);
        let mut restored = planner();
        assert_state(
            &p,
            &mut restored,
            r#"{"invocations":1,"history":[{"agent":"withdraw","arguments":{"user":"Mario"},"output":"Mario withdrew 100"}],"current":{"agent":"credit","arguments":{"user":"Luigi","amount":100},"output":null},"summary":"withdrawn","response":null}"#,
        );
        let completed = done(call, json!("Luigi got 100"));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
        // A `done` response waiting for its score.
        p.response = Some(json!("moved"));
        let mut restored = planner();
        assert_state(
            &p,
            &mut restored,
            r#"{"invocations":2,"history":[{"agent":"withdraw","arguments":{"user":"Mario"},"output":"Mario withdrew 100"},{"agent":"credit","arguments":{"user":"Luigi","amount":100},"output":"Luigi got 100"}],"current":null,"summary":"withdrawn","response":"moved"}"#,
        );
        // A state journaled before `summary` and `response` existed restores with both null.
        let mut old = planner();
        old.restore(json!({"invocations": 1, "history": [], "current": null})).unwrap();
        assert_eq!(
            old.execution_state().to_string(),
            r#"{"invocations":1,"history":[],"current":null,"summary":null,"response":null}"#
        );
    }
}
