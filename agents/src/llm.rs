//! The LLM agent: renders its system and user message templates over the state, asks a chat model, and
//! returns the answer parsed to its output type.
//!
//! - **Inputs** are inferred from the variables the templates use (an explicit input list replaces them).
//! - **Typed outputs** ([`OutputType`]): when the model supports the JSON-schema response format the answer is
//!   requested in that format (scalars and enums wrapped as `{"value": ..}`); otherwise the text is parsed
//!   leniently: the first number for numbers, `true`/`false`/`yes`/`no` for booleans, the variant name
//!   (case-insensitive) for enums, the JSON inside a code fence (or the first JSON value) for JSON. When the
//!   answer cannot be parsed, the model is asked once more with the parse error; a second failure fails the
//!   invocation with an error quoting the answer.
//! - **Tokens** of every call are added to the invocation record; the last user message and the answer are
//!   recorded in the conversation context.
//! - **Memory** (`memory_window(N)`): the last N messages of this agent's conversation are kept in the scope
//!   state under `_memory.<agent name>` (so they are journaled, survive resume and belong to the memory id)
//!   and sent before the new user message.
//! - **Context**: text put before the user message as `Considering this context: ..`. Three sources:
//!   [`LlmAgentBuilder::context`] (any function of the state), [`LlmAgentBuilder::conversation_context`]
//!   (the named agents' exchanges from the scope's conversation context, verbatim) and
//!   [`LlmAgentBuilder::summarized_context`] (the same exchanges summarized in at most two sentences by this
//!   agent's model, one extra call whose tokens count for the invocation).
//! - **Model selection**: a function of the state may pick the model per invocation.
//! - **Tools** (`tools([..])`, see [`Tool`]): the tools' specs are sent with the request; when the model
//!   answers with tool calls, the calls run (concurrently when there are several), the assistant message and
//!   one tool-result message per call (in call order) are appended, and the model is asked again, at most
//!   `max_tool_iterations` rounds (default 10). A failing call is reported to the model as `error: ..`; a
//!   successful call of a tool with a compensation registers it with the invocation. Listeners get
//!   `ToolStarted`/`ToolFinished` events.
//! - **Tool providers** (`tool_provider(..)`, see [`ToolProvider`]): tools known only at run time (an MCP
//!   server's, [`crate::McpToolProvider`]) are asked for at every invocation and offered with the agent's
//!   own tools; two tools of the same name fail the invocation, naming where each comes from. A provider
//!   tool may fail the agent (its MCP server died) instead of reporting an error to the model.
//! - **Streaming** (`streaming(true)`): the model's answer is streamed and every text delta is reported to
//!   the listeners as a `Token` event (e.g. through `InvokeRequest::events`); the result is the same. When
//!   the agent is a system's final agent (the root, or a sequence's last sub-agent), its tokens are the
//!   system's streamed answer (`InvokeRequest::stream`).
//!
//! Follows LangChain4j agentic's AI-service agents (`@UserMessage` templates, typed returns, chat memory,
//! summarized context, dynamic chat model); the lenient parsing and the single re-ask are ours.

use std::borrow::Cow;
use std::sync::Arc;

use agentic_engine::{
    Agent, AgentError, AgentRef, AgentSpec, BuildError, CallEntry, CallKind, Cause, Effect, InputSpec,
    InvocationContext, ModelTurnEntry, RunEvent, ScopeView, SpecBuilder, Stop, ToolCallEntry, ToolCallStatus as Status,
    ValueType,
};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::error::ExprError;
use crate::expr::Template;
use crate::model::{
    ChatMessage, ChatModelRef, ChatRequest, ChatResponse, ModelInfo, ResponseFormat, StreamEvent, TokenLogprob,
    ToolChoice,
};
use crate::tool_loop::{Doubt, LoopJournal};
use crate::tools::{ApprovalRequest, Tool, ToolCallInfo, ToolFailure, ToolProvider, result_text};

/// The default bound on tool rounds per model exchange ([`LlmAgentBuilder::max_tool_iterations`]).
pub const DEFAULT_MAX_TOOL_ITERATIONS: usize = 10;

/// The type an LLM agent's answer is parsed to (spec field `output`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OutputType {
    /// The answer's text, trimmed (the default).
    String,
    /// A number (JSON number; the first number in the text when parsed leniently).
    Number,
    /// An integer (a number without a fractional part).
    Integer,
    /// `true` or `false` (also `yes`/`no`, case-insensitive, when parsed leniently).
    Boolean,
    /// One of these names, matched case-insensitively; the result is the name as declared.
    Enum(Vec<String>),
    /// Any JSON value.
    Json,
    /// JSON matching this JSON schema (checked for `type`, `required`, `properties`, `items` and `enum`).
    Schema(Value),
}

impl OutputType {
    /// What the answer must be, for messages ("a number", "one of `A`, `B`").
    pub fn describe(&self) -> String {
        match self {
            OutputType::String => "text".to_string(),
            OutputType::Number => "a number".to_string(),
            OutputType::Integer => "an integer".to_string(),
            OutputType::Boolean => "true or false".to_string(),
            OutputType::Enum(names) => format!("one of {}", names.join(", ")),
            OutputType::Json => "JSON".to_string(),
            OutputType::Schema(_) => "JSON matching the schema".to_string(),
        }
    }

    fn value_type(&self) -> ValueType {
        match self {
            OutputType::String | OutputType::Enum(_) => ValueType::String,
            OutputType::Number => ValueType::Number,
            OutputType::Integer => ValueType::Integer,
            OutputType::Boolean => ValueType::Boolean,
            OutputType::Json | OutputType::Schema(_) => ValueType::Any,
        }
    }

    /// The response format requested from a model supporting JSON schemas, and whether the answer is wrapped
    /// as `{"value": ..}`.
    fn response_format(&self) -> Option<(ResponseFormat, bool)> {
        let wrapped = |inner: Value| {
            let schema = json!({
                "type": "object",
                "properties": {"value": inner},
                "required": ["value"],
                "additionalProperties": false
            });
            Some((ResponseFormat::JsonSchema { name: "answer".to_string(), schema, strict: true }, true))
        };
        match self {
            OutputType::String => None,
            OutputType::Number => wrapped(json!({"type": "number"})),
            OutputType::Integer => wrapped(json!({"type": "integer"})),
            OutputType::Boolean => wrapped(json!({"type": "boolean"})),
            OutputType::Enum(names) => wrapped(json!({"type": "string", "enum": names})),
            OutputType::Json => Some((ResponseFormat::JsonObject, false)),
            OutputType::Schema(schema) => {
                let mut schema = schema.clone();
                if let Value::Object(m) = &mut schema {
                    m.remove("$schema");
                }
                if schema.get("type").and_then(Value::as_str) == Some("object") {
                    Some((ResponseFormat::JsonSchema { name: "answer".to_string(), schema, strict: false }, false))
                } else {
                    let wrapped_schema =
                        json!({"type": "object", "properties": {"value": schema}, "required": ["value"]});
                    Some((
                        ResponseFormat::JsonSchema {
                            name: "answer".to_string(),
                            schema: wrapped_schema,
                            strict: false,
                        },
                        true,
                    ))
                }
            }
        }
    }

    /// The instruction appended to the user message when the answer is parsed leniently.
    fn hint(&self) -> Option<String> {
        match self {
            OutputType::Enum(names) => Some(format!("Answer with one of: {}.", names.join(", "))),
            OutputType::Json => Some("Answer with JSON only.".to_string()),
            OutputType::Schema(schema) => {
                Some(format!("Answer with JSON only, matching this JSON schema: {}", without_meta(schema)))
            }
            _ => None,
        }
    }
}

/// The names of an enum of unit variants from its JSON schema: its `enum`, or (variants with doc comments)
/// a `oneOf`/`anyOf` whose alternatives are each one string (`const`, or an `enum` of one). `None` for any
/// other schema.
fn enum_names(schema: &Value) -> Option<Vec<String>> {
    let strings = |values: &Value| -> Option<Vec<String>> {
        values.as_array()?.iter().map(|n| n.as_str().map(str::to_string)).collect()
    };
    if let Some(names) = schema.get("enum") {
        return strings(names);
    }
    let alternatives = schema.get("oneOf").or_else(|| schema.get("anyOf"))?.as_array()?;
    alternatives
        .iter()
        .map(|alt| match (alt.get("const"), alt.get("enum").and_then(&strings)) {
            (Some(Value::String(name)), _) => Some(name.clone()),
            (None, Some(names)) if names.len() == 1 => names.into_iter().next(),
            _ => None,
        })
        .collect()
}

fn without_meta(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Value::Object(m) = &mut s {
        m.remove("$schema");
    }
    s
}

type Checker = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;
/// Where the context put before the user message comes from (see the module docs).
#[derive(Clone, Default)]
enum ContextSource {
    #[default]
    None,
    Function(ContextFn),
    Conversation(Vec<String>),
    Summarized(Vec<String>),
}

type ContextFn = Arc<dyn Fn(&ScopeView) -> String + Send + Sync>;

/// The prompt asking the model to summarize the conversation context (`summarized_context`).
pub const SUMMARY_PROMPT: &str = "Summarize, in two sentences at most, this conversation between a user and AI \
     agents. Answer with the summary only.\n\nThe conversation:\n";

type Selector = Arc<dyn Fn(&ScopeView) -> Option<ChatModelRef> + Send + Sync>;

/// An agent that asks a chat model. Build with [`LlmAgent::builder`].
///
/// ```
/// use agentic_agents::model::ScriptedModel;
/// use agentic_agents::{LlmAgent, OutputType};
/// use agentic_engine::SpecBuilder;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let model = ScriptedModel::new(["Score: 0.85"]);
/// let scorer = LlmAgent::builder(model)
///     .name("scorer")
///     .user("Score this story between 0.0 and 1.0: {{ story }}")
///     .output(OutputType::Number)
///     .output_key("score")
///     .build()?;
/// let outcome = scorer.invoke().input("story", "Once upon a time").await?;
/// assert_eq!(outcome.output(), Some(&serde_json::json!(0.85)));
/// # Ok(()) }
/// ```
pub struct LlmAgent {
    spec: AgentSpec,
    model: ChatModelRef,
    selector: Option<Selector>,
    system: Option<Template>,
    user: Template,
    output: OutputType,
    checker: Option<Checker>,
    memory_window: Option<usize>,
    context: ContextSource,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    tools: Vec<Tool>,
    providers: Vec<Arc<dyn ToolProvider>>,
    tool_choice: Option<ToolChoice>,
    max_tool_iterations: usize,
    streaming: bool,
    confidence_key: Option<String>,
    scores_key: Option<String>,
}

impl std::fmt::Debug for LlmAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmAgent")
            .field("name", &self.spec.name)
            .field("model", &self.model)
            .field("output", &self.output)
            .field("tools", &self.tools.iter().map(Tool::name).collect::<Vec<_>>())
            .field("providers", &self.providers.iter().map(|p| p.source()).collect::<Vec<_>>())
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

/// Builder of an [`LlmAgent`].
///
/// Defaults: name `llm`; no system message; output [`OutputType::String`]; inputs = the variables of the
/// templates; no memory; no context; the model fixed (no per-invocation selection); temperature and token
/// limit the model's; no tools, at most [`DEFAULT_MAX_TOOL_ITERATIONS`] tool rounds; not streaming. A user
/// message is required.
pub struct LlmAgentBuilder {
    spec: AgentSpec,
    model: ChatModelRef,
    selector: Option<Selector>,
    system: Option<Template>,
    user: Option<Template>,
    output: OutputType,
    checker: Option<Checker>,
    memory_window: Option<usize>,
    context: ContextSource,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    tools: Vec<Tool>,
    providers: Vec<Arc<dyn ToolProvider>>,
    tool_choice: Option<ToolChoice>,
    max_tool_iterations: usize,
    streaming: bool,
    confidence_key: Option<String>,
    scores_key: Option<String>,
    errors: Vec<String>,
}

impl SpecBuilder for LlmAgentBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl LlmAgent {
    /// A builder for an agent asking `model` (any [`crate::model::ChatModel`] or a [`ChatModelRef`]).
    pub fn builder(model: impl Into<ChatModelRef>) -> LlmAgentBuilder {
        LlmAgentBuilder {
            spec: AgentSpec::new("llm", "llm"),
            model: model.into(),
            selector: None,
            system: None,
            user: None,
            output: OutputType::String,
            checker: None,
            memory_window: None,
            context: ContextSource::None,
            temperature: None,
            max_tokens: None,
            tools: Vec::new(),
            providers: Vec::new(),
            tool_choice: None,
            max_tool_iterations: DEFAULT_MAX_TOOL_ITERATIONS,
            streaming: false,
            confidence_key: None,
            scores_key: None,
            errors: Vec::new(),
        }
    }
}

impl LlmAgentBuilder {
    /// Sets the agent's name (default `llm`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.spec.name = name.into();
        self
    }

    fn template(&mut self, what: &str, source: &str) -> Option<Template> {
        match Template::compile(source) {
            Ok(t) => {
                // A variable read only through `default(..)` or under `is defined` is optional, unless
                // another template of the agent needs it.
                for v in t.variables() {
                    let optional = t.optional_variables().contains(&v);
                    match self.spec.inputs.iter_mut().find(|i| i.key == v) {
                        Some(input) => input.optional &= optional,
                        None => self.spec.inputs.push(InputSpec::new(v).optional(optional)),
                    }
                }
                Some(t)
            }
            Err(ExprError::Syntax { message, .. }) => {
                self.errors.push(format!("invalid {what} template: {message}"));
                None
            }
        }
    }

    /// Sets the system message template (minijinja over the state; default none).
    pub fn system(mut self, template: &str) -> Self {
        self.system = self.template("system", template);
        self
    }

    /// Sets the user message template (minijinja over the state; required).
    pub fn user(mut self, template: &str) -> Self {
        self.user = self.template("user", template);
        self
    }

    /// Sets the output type (default [`OutputType::String`]).
    pub fn output(mut self, output: OutputType) -> Self {
        self.output = output;
        self.checker = None;
        self
    }

    /// Parses the answer as `T`: the JSON schema of `T` is requested (or given to the model as an instruction)
    /// and the answer must deserialise as `T`. The result is the JSON value (deserialise it to `T` when
    /// reading the output).
    pub fn output_as<T: serde::de::DeserializeOwned + schemars::JsonSchema>(mut self) -> Self {
        let schema: Value = schemars::schema_for!(T).into();
        self.output = OutputType::Schema(schema);
        self.checker = Some(Arc::new(|v: &Value| T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())));
        self
    }

    /// Parses the answer as `T` and declares the output's type as `T`'s (value type and Rust type,
    /// [`agentic_engine::StateType`]): text for `String`, a number, an integer or a boolean for those scalars
    /// (parsed leniently, as [`OutputType::Number`] and the others), one of the names for an enum of unit
    /// variants ([`OutputType::Enum`], its schema's `enum`, or its `oneOf` of one string each when the variants
    /// have doc comments), otherwise JSON matching `T`'s schema
    /// ([`LlmAgentBuilder::output_as`]). What a method of an `#[agents]` trait returning `T` builds.
    pub fn returns<T: serde::de::DeserializeOwned + agentic_engine::StateType>(mut self) -> Self {
        let schema = T::schema();
        let names = enum_names(&schema);
        let scalar = match (T::value_type(), schema.get("enum").is_some() || names.is_some()) {
            (ValueType::String, true) => names.map(OutputType::Enum),
            (ValueType::String, false) => Some(OutputType::String),
            (ValueType::Number, false) => Some(OutputType::Number),
            (ValueType::Integer, false) => Some(OutputType::Integer),
            (ValueType::Boolean, false) => Some(OutputType::Boolean),
            _ => None,
        };
        self.output = scalar.unwrap_or(OutputType::Schema(schema));
        self.checker = Some(Arc::new(|v: &Value| T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())));
        self.spec.output_type = T::value_type();
        self.spec.output_rust_type = Some(T::rust_type().to_string());
        self
    }

    /// Keeps the last `messages` messages of this agent's conversation (per memory id) and sends them with
    /// each new question (default: no memory).
    pub fn memory_window(mut self, messages: usize) -> Self {
        self.memory_window = Some(messages);
        self
    }

    /// Puts the text `context(state)` before each user message, as `Considering this context: <text>`
    /// (an empty text adds nothing). Replaces any context set before. Follows the original's
    /// `context(agenticScope -> ..)`.
    pub fn context(mut self, context: impl Fn(&ScopeView) -> String + Send + Sync + 'static) -> Self {
        self.context = ContextSource::Function(Arc::new(context));
        self
    }

    /// Puts these agents' exchanges from the scope's conversation context (every agent's when the list is
    /// empty), verbatim, before each user message. Replaces any context set before. The original's
    /// `contextAsConversation(agents)`.
    pub fn conversation_context<S: Into<String>>(mut self, agents: impl IntoIterator<Item = S>) -> Self {
        self.context = ContextSource::Conversation(agents.into_iter().map(Into::into).collect());
        self
    }

    /// Like [`LlmAgentBuilder::conversation_context`], but the exchanges are first summarized in at most two
    /// sentences by this agent's model ([`SUMMARY_PROMPT`]; one extra model call per invocation when there is
    /// a conversation to summarize). Replaces any context set before. The original's `summarizedContext`.
    pub fn summarized_context<S: Into<String>>(mut self, agents: impl IntoIterator<Item = S>) -> Self {
        self.context = ContextSource::Summarized(agents.into_iter().map(Into::into).collect());
        self
    }

    /// Picks the model per invocation from the state; `None` uses the builder's model (default: always the
    /// builder's model).
    pub fn model_selector(
        mut self,
        select: impl Fn(&ScopeView) -> Option<ChatModelRef> + Send + Sync + 'static,
    ) -> Self {
        self.selector = Some(Arc::new(select));
        self
    }

    /// Sets the temperature of this agent's requests (default: the model's).
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the token limit of this agent's requests (default: the model's).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Lets the model call these tools (added to the ones given before; default none).
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Lets the model call this tool too.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Lets the model call the tools `provider` offers when the agent runs (an MCP server's, say), asked at
    /// every invocation; added to the providers given before (default none).
    pub fn tool_provider(mut self, provider: impl ToolProvider) -> Self {
        self.providers.push(Arc::new(provider));
        self
    }

    /// Whether the model must call a tool in its first answer: [`ToolChoice::Required`] (some tool),
    /// [`ToolChoice::Tool`] (that tool: a forced tool call, which small models follow reliably under
    /// constrained decoding), [`ToolChoice::None`] (no tool), [`ToolChoice::Auto`] (default: the model
    /// decides). The forcing applies to the first request only: after the tool results the model answers
    /// freely, so a forced call does not loop.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Bounds the tool rounds of one exchange (default [`DEFAULT_MAX_TOOL_ITERATIONS`]): when the model still
    /// calls tools after `rounds` rounds, the invocation fails.
    pub fn max_tool_iterations(mut self, rounds: usize) -> Self {
        self.max_tool_iterations = rounds;
        self
    }

    /// Streams the model's answers and reports each text delta to the listeners as a
    /// [`RunEvent::Token`] (default false). The result is the same as without streaming; as a system's final
    /// agent, its tokens are the system's streamed answer (`InvokeRequest::stream`).
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Writes the model's confidence in its enum answer under `key` (besides the answer under the output key):
    /// the probability of the chosen value, normalised over the enum's values (0..=1); when the provider
    /// reports no log-probabilities the key is cleared (unset: `key is not defined` in an expression). The request asks for them ([`ChatRequest::logprobs`]); the
    /// `local` provider scores every value whole, an OpenAI-compatible server gives the first token's
    /// alternatives. A spec can then trust the model only when it is sure, e.g. fall back to keyword rules
    /// below a threshold. Only for [`OutputType::Enum`] outputs (a build error otherwise).
    pub fn confidence_key(mut self, key: impl Into<String>) -> Self {
        self.confidence_key = Some(key.into());
        self
    }

    /// Writes the model's probability of every value of its enum output under `key`, as a map from value to
    /// probability (normalised over the values, summing to 1), read as [`confidence_key`](Self::confidence_key)
    /// reads the chosen one's; unset when the provider reports no log-probabilities. With it a spec can weigh
    /// the model's second choice (e.g. when an unsure answer is one the model over-uses). Only for
    /// [`OutputType::Enum`] outputs (a build error otherwise).
    pub fn scores_key(mut self, key: impl Into<String>) -> Self {
        self.scores_key = Some(key.into());
        self
    }

    /// Builds the agent.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] when a template does not compile, no user message was given, two tools have the
    /// same name, or the output key is typed (`output_key(&KEY)`) with a type the answer's text does not fit
    /// while the output is text (the default).
    pub fn build(mut self) -> Result<AgentRef, BuildError> {
        let invalid = |message: String, agent: &str| BuildError::Invalid { agent: agent.to_string(), message };
        if let Some(e) = self.errors.first() {
            return Err(invalid(e.clone(), &self.spec.name));
        }
        for (i, t) in self.tools.iter().enumerate() {
            if self.tools[..i].iter().any(|u| u.name() == t.name()) {
                return Err(invalid(format!("two tools are named `{}`", t.name()), &self.spec.name));
            }
        }
        // With providers, the tool may be theirs: checked at invocation.
        if let Some(ToolChoice::Tool(name)) = &self.tool_choice
            && self.providers.is_empty()
            && !self.tools.iter().any(|t| t.name() == name)
        {
            let known: Vec<&str> = self.tools.iter().map(Tool::name).collect();
            let message = format!("tool_choice names `{name}`, which is not among the tools ({})", known.join(", "));
            return Err(invalid(message, &self.spec.name));
        }
        let Some(user) = self.user else {
            return Err(invalid("an LLM agent needs a user message".to_string(), &self.spec.name));
        };
        for (field, key) in [("confidence_key", &self.confidence_key), ("scores_key", &self.scores_key)] {
            if let Some(key) = key
                && !matches!(self.output, OutputType::Enum(_))
            {
                let message =
                    format!("{field} `{key}` needs an enum output, but the output is {}", self.output.describe());
                return Err(invalid(message, &self.spec.name));
            }
        }
        if let (Some(rust), Some(key)) = (&self.spec.output_rust_type, &self.spec.output_key)
            && self.output == OutputType::String
            && !matches!(self.spec.output_type, ValueType::String | ValueType::Any)
        {
            // A typed output key (`output_key(&KEY)`) the answer's text would not fit.
            let message = format!(
                "output key `{key}` is declared as {} `{rust}`, but the agent answers text: parse the answer with \
                 `returns::<T>()` (or `output(..)`)",
                self.spec.output_type
            );
            return Err(invalid(message, &self.spec.name));
        }
        if self.spec.output_type == ValueType::Any {
            // Declared from `output` unless `output_type` was set explicitly.
            self.spec.output_type = self.output.value_type();
        }
        Ok(AgentRef::new(LlmAgent {
            spec: self.spec,
            model: self.model,
            selector: self.selector,
            system: self.system,
            user,
            output: self.output,
            checker: self.checker,
            memory_window: self.memory_window,
            context: self.context,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            tools: self.tools,
            providers: self.providers,
            tool_choice: self.tool_choice,
            max_tool_iterations: self.max_tool_iterations,
            streaming: self.streaming,
            confidence_key: self.confidence_key,
            scores_key: self.scores_key,
        }))
    }
}

/// The scope key holding `agent`'s memory window.
pub fn memory_key(agent: &str) -> String {
    format!("_memory.{agent}")
}

impl LlmAgent {
    fn render(&self, ctx: &InvocationContext, t: &Template, what: &str) -> Result<String, AgentError> {
        t.render_inputs(&ctx.view(), ctx.inputs()).map_err(|message| AgentError::Expression {
            agent: ctx.agent_name().to_string(),
            path: ctx.path().to_string(),
            what: format!("{what} message"),
            message,
        })
    }

    /// The context put before the user message (empty when there is none), asking `model` for a summary
    /// when the context is summarized.
    async fn context_prefix(&self, ctx: &InvocationContext, model: &ChatModelRef) -> Result<String, Stop> {
        match &self.context {
            ContextSource::None => Ok(String::new()),
            // Boxed: only these wait, and their future would enlarge every invocation's.
            _ => Box::pin(self.context_text(ctx, model)).await,
        }
    }

    /// [`LlmAgent::context_prefix`] for an agent that has a context source.
    async fn context_text(&self, ctx: &InvocationContext, model: &ChatModelRef) -> Result<String, Stop> {
        let (agents, summarize) = match &self.context {
            ContextSource::None => return Ok(String::new()),
            ContextSource::Function(f) => {
                let text = f(&ctx.view());
                return Ok(if text.trim().is_empty() {
                    String::new()
                } else {
                    format!("Considering this context: {text}\n\n")
                });
            }
            ContextSource::Conversation(agents) => (agents, false),
            ContextSource::Summarized(agents) => (agents, true),
        };
        let entries = ctx.view().context();
        let mut text = String::new();
        for e in entries.iter().filter(|e| agents.is_empty() || agents.contains(&e.agent)) {
            text.push_str(&format!("[{}] User: {}\n[{}] Answer: {}\n", e.agent, e.user, e.agent, e.answer));
        }
        if text.is_empty() {
            return Ok(text);
        }
        if !summarize {
            return Ok(format!("Considering this context:\n{text}\n"));
        }
        let mut request = ChatRequest::new(vec![ChatMessage::user(format!("{SUMMARY_PROMPT}{text}"))]);
        request.temperature = self.temperature;
        request.max_tokens = self.max_tokens;
        let summary = crate::model::call_model(ctx, model, request, "summary", |e| {
            ctx.fail_with(Cause::from(e).context("summarizing the context"))
        })
        .await?;
        Ok(format!("Considering this context: {}\n\n", summary.text().trim()))
    }

    /// One model turn of the loop: the journaled answer when the turn was answered before the run stopped
    /// (not asked again; its usage counts for this invocation, not against budgets again), else the model's
    /// answer and the entry that journals it (the caller journals it with the turn's tool calls).
    async fn turn(
        &self,
        ctx: &InvocationContext,
        model: &ChatModelRef,
        request: ChatRequest,
        journal: &mut LoopJournal,
    ) -> Result<(ChatResponse, Option<CallEntry>), Stop> {
        let turn = journal.next_turn;
        journal.next_turn += 1;
        let info = model.info();
        let options = if ctx.calls().journaled() { crate::model::request_options(&request) } else { Map::new() };
        if turn == 0 {
            journal.options.clear();
        }
        if let Some(kept) = journal.turn(turn) {
            let response: ChatResponse = serde_json::from_value(kept.response.clone())
                .map_err(|e| ctx.fail(format!("the journaled answer of model turn {turn} cannot be read: {e}")))?;
            let kept_model = kept.model.clone();
            // What the turn's usage called the model when it was answered (its label), else its request's name.
            let used = kept.usage.models.first().cloned().unwrap_or_else(|| kept_model.clone());
            // The call keeps its number on the run's call tape (and is recorded with the answer it had).
            if let Some(taped) =
                ctx.calls().taped(CallKind::Model, crate::model::recorded_request(&kept_model, &request))
            {
                taped.record(kept.response.clone());
            }
            journal.sent = request.messages.len();
            journal.options = options;
            model.turn_replayed(&request);
            let t = response.usage;
            let cost = info.prices.map(|p| p.cost(t.input, t.output));
            ctx.usage().after_model_call(&used, t, cost, true, || Value::Null).await?;
            return Ok((response, None));
        }
        let added: Vec<Value> = if ctx.calls().journaled() {
            request
                .messages
                .get(journal.sent..)
                .unwrap_or_default()
                .iter()
                .filter_map(|m| serde_json::to_value(m).ok())
                .collect()
        } else {
            Vec::new()
        };
        journal.sent = request.messages.len();
        let changed = (journal.options != options).then(|| options.clone());
        journal.options = options;
        let model_name = info.model.clone();
        let label = info.label().to_string();
        let prices = info.prices;
        let entry = |response: &ChatResponse| {
            ctx.calls().journaled().then(|| {
                let t = response.usage;
                let usage = agentic_engine::budget::Usage {
                    input_tokens: t.input,
                    output_tokens: t.output,
                    model_calls: 1,
                    cost_usd: prices.map(|p| p.cost(t.input, t.output)),
                    models: vec![label.clone()],
                    by_model: Vec::new(),
                };
                CallEntry::Model(ModelTurnEntry {
                    turn,
                    model: model_name.clone(),
                    request: added.clone(),
                    options: changed.clone(),
                    purpose: None,
                    response: serde_json::to_value(response).unwrap_or(Value::Null),
                    usage,
                    at_us: agentic_engine::now_ms() * 1000,
                })
            })
        };
        self.ask(ctx, model, request, entry).await
    }

    /// One model call: streamed (each text delta reported as a `Token` event) or not. Adds the tokens used.
    /// `entry` journals the answer: returned with it, or committed at once when a budget stops the
    /// invocation after the call (its resume continues from it).
    async fn ask(
        &self,
        ctx: &InvocationContext,
        model: &ChatModelRef,
        request: ChatRequest,
        entry: impl FnOnce(&ChatResponse) -> Option<CallEntry>,
    ) -> Result<(ChatResponse, Option<CallEntry>), Stop> {
        let fail_model = |e: crate::model::ModelError| ctx.fail_with(e.into());
        let journaled = ctx.calls().journaled();
        let mut call = crate::model::ModelCall::begin(ctx, model, &request).await?.journaled(journaled);
        if let Some(response) = call.replayed() {
            call.end(&response, true).await?;
            return Ok((response, None));
        }
        let response = if self.streaming {
            let mut stream = call.run(model.chat_stream(request)).await.map_err(fail_model)?;
            let mut done = None;
            while let Some(event) = stream.next().await {
                match event.map_err(fail_model)? {
                    StreamEvent::Token(text) if ctx.run().has_listeners() => {
                        ctx.run().emit(&RunEvent::Token {
                            run_id: ctx.run_id().to_string(),
                            path: ctx.path().to_string(),
                            text,
                        });
                    }
                    StreamEvent::Done(response) => {
                        done = Some(response);
                        break;
                    }
                    _ => {}
                }
            }
            let info = model.info();
            done.ok_or_else(|| {
                ctx.fail(format!("model `{}` at {}: the stream ended without an answer", info.model, info.server))
            })?
        } else {
            call.run(model.chat(request)).await.map_err(fail_model)?
        };
        let entry = entry(&response);
        if let Err(stop) = call.end(&response, false).await {
            if let (Some(entry), Stop::Suspended(_)) = (entry, &stop) {
                ctx.calls().record(vec![entry], true).await?;
            }
            return Err(stop);
        }
        Ok((response, entry))
    }

    /// Asks the model and runs the tools it calls until it answers without calling tools (at most
    /// `max_tool_iterations` rounds), journaling each turn and each tool call (SPEC.md §4): a call with an
    /// effect is committed as started before it is sent, the round's results before the next model call
    /// (two commits per round with effects, one without). A call that needs approval, or that a crash left
    /// in doubt, suspends the invocation once the round's other calls ran. The tool rounds are appended to
    /// `request.messages`. Without tools and without `keep` (nothing will ask again), the request is handed
    /// to the model and left empty.
    #[allow(clippy::too_many_arguments)]
    async fn converse(
        &self,
        ctx: &InvocationContext,
        model: &ChatModelRef,
        info: &ModelInfo,
        request: &mut ChatRequest,
        tools: &[Tool],
        keep: bool,
        journal: &mut LoopJournal,
    ) -> Result<ChatResponse, Stop> {
        let mut rounds = 0;
        loop {
            let sent = if keep || !tools.is_empty() { request.clone() } else { std::mem::take(request) };
            let (response, turn_entry) = self.turn(ctx, model, sent, journal).await?;
            if tools.is_empty() || response.tool_calls().is_empty() {
                // Journaled with the step that completes the invocation (or, if the answer is asked again or
                // the invocation fails, before what follows).
                ctx.calls().with_step(turn_entry.into_iter().collect());
                return Ok(response);
            }
            if rounds == self.max_tool_iterations {
                let called: Vec<&str> = response.tool_calls().iter().map(|c| c.name.as_str()).collect();
                return Err(Stop::Failed(ctx.fail(format!(
                    "model `{}` at {} still called tools ({}) after {rounds} tool round{}; the bound is \
                     max_tool_iterations = {}",
                    info.model,
                    info.server,
                    called.join(", "),
                    if rounds == 1 { "" } else { "s" },
                    self.max_tool_iterations
                ))));
            }
            rounds += 1;
            if matches!(request.tool_choice, Some(ToolChoice::Required | ToolChoice::Tool(_))) {
                // Forced once: with the results in hand the model may answer.
                request.tool_choice = Some(ToolChoice::Auto);
            }
            let calls = response.tool_calls().to_vec();
            let texts = self.round(ctx, tools, &calls, turn_entry, journal).await?;
            request.messages.push(response.message);
            for (call, text) in calls.iter().zip(texts) {
                request.messages.push(ChatMessage::tool_result(call.id.clone(), text));
            }
        }
    }

    /// The tool calls of one model turn: each one's result as the model reads it, from the journal when it
    /// finished before the run stopped, from a person's decision, or from running the tool (the calls that
    /// may run run together). See [`LlmAgent::converse`].
    async fn round(
        &self,
        ctx: &InvocationContext,
        tools: &[Tool],
        calls: &[crate::model::ToolCall],
        turn_entry: Option<CallEntry>,
        journal: &mut LoopJournal,
    ) -> Result<Vec<String>, Stop> {
        let turn = journal.next_turn.saturating_sub(1);
        let first = journal.next_call;
        journal.next_call += u32::try_from(calls.len()).unwrap_or(u32::MAX);
        let mut entries: Vec<CallEntry> = turn_entry.into_iter().collect();
        let mut pending = Vec::new();
        let mut texts: Vec<Option<String>> = vec![None; calls.len()];
        // (index in `calls`, the call as it runs: its arguments possibly edited)
        let mut to_run: Vec<(usize, crate::model::ToolCall)> = Vec::new();
        let view = ctx.view();
        // The calls' plans; a failure on the way (an approval rule that cannot be evaluated, an answer that
        // cannot be read, a person's `fail`) journals what was decided before it.
        let planned: Result<(), Stop> = async {
            for (i, call) in calls.iter().enumerate() {
                let n = first + u32::try_from(i).unwrap_or(u32::MAX);
                let state = journal.take_call(n);
                let tool = tools.iter().find(|t| t.name() == call.name);
                let mut base = ToolCallEntry::new(
                    n,
                    turn,
                    call.id.clone(),
                    call.name.clone(),
                    call.arguments.clone(),
                    Status::Started,
                );
                base.effect = tool.map_or(Effect::None, Tool::side_effect);
                if let Some(done) = &state.finished {
                    texts[i] = Some(match (&done.result, &done.error) {
                        (_, Some(e)) => result_text(&Err(e.clone())),
                        (result, None) => {
                            let value = result.clone().unwrap_or(Value::Null);
                            if let Some(tool) = tool {
                                self.compensate_later(ctx, tool, &done.args, &value);
                            }
                            result_text(&Ok(value))
                        }
                    });
                    continue;
                }
                let mut decision = state.decision.clone();
                // Arguments that break the tool's parameters are not a call to approve: the tool refuses them and
                // the model reads why.
                if let Some(tool) = tool
                    && decision.is_none()
                    && tool.has_approval_rule()
                    && agentic_engine::check_schema(&tool.spec().parameters, &call.arguments, "the call").is_ok()
                {
                    let asked = ApprovalRequest::new(&call.name, &call.arguments, &view).with_inputs(ctx.inputs());
                    let needs = tool
                        .needs_approval(&asked)
                        .map_err(|e| ctx.fail(format!("the approval rule of tool `{}`: {e}", call.name)))?;
                    if needs {
                        match crate::tool_loop::take_decision(ctx, n).await? {
                            Some((d, by)) => {
                                let entry = crate::tool_loop::decision_entry(&base, &d, by);
                                entries.push(CallEntry::Tool(entry.clone()));
                                decision = Some(entry);
                            }
                            None => {
                                let parameters = &tool.spec().parameters;
                                pending.push(crate::tool_loop::approval_pending(
                                    ctx,
                                    n,
                                    &call.name,
                                    &call.arguments,
                                    parameters,
                                ));
                                if !state.awaiting {
                                    let mut awaiting = base.clone();
                                    awaiting.status = Status::AwaitingApproval;
                                    entries.push(CallEntry::Tool(awaiting));
                                }
                                continue;
                            }
                        }
                    }
                }
                let mut runs = call.clone();
                if let Some(d) = &decision {
                    match d.status {
                        Status::Rejected => {
                            texts[i] = Some(match d.message.as_deref().filter(|m| !m.is_empty()) {
                                Some(message) => format!("rejected: {message}"),
                                None => "rejected".to_string(),
                            });
                            continue;
                        }
                        Status::Responded => {
                            texts[i] = Some(result_text(&Ok(d.result.clone().unwrap_or(Value::Null))));
                            continue;
                        }
                        Status::Edited => runs.arguments = d.args.clone(),
                        _ => {}
                    }
                }
                let mut retried_by = None;
                if let Some(started) = &state.started {
                    match crate::tool_loop::resolve_in_doubt(ctx, started, state.in_doubt).await? {
                        Doubt::Resend(by) => retried_by = by,
                        Doubt::Failed(entry, failure) => {
                            entries.push(CallEntry::Tool(entry));
                            return Err(failure.into());
                        }
                        Doubt::Answered(entry) => {
                            texts[i] = Some(result_text(&Ok(entry.result.clone().unwrap_or(Value::Null))));
                            entries.push(CallEntry::Tool(entry));
                            continue;
                        }
                        Doubt::Pending(asked, entry) => {
                            pending.push(asked);
                            entries.extend(entry.map(CallEntry::Tool));
                            continue;
                        }
                    }
                }
                let mut started = base;
                started.args = runs.arguments.clone();
                started.by = retried_by;
                started.at_us = agentic_engine::now_ms() * 1000;
                entries.push(CallEntry::Tool(started));
                to_run.push((i, runs));
            }
            Ok(())
        }
        .await;
        drop(view);
        if let Err(stop) = planned {
            ctx.calls().record(entries, false).await?;
            return Err(stop);
        }
        // A call with an effect is committed as started before it is sent.
        let effectful = to_run.iter().any(|(i, _)| {
            tools.iter().find(|t| t.name() == calls[*i].name).is_some_and(|t| t.side_effect().has_effect())
        });
        ctx.calls().record(entries, effectful).await?;
        // Each call on the run's call tape (SPEC.md §5), numbered by its place in the round: a replay answers
        // it from the recording instead of running the tool.
        let tape_base = ctx.calls().reserve(CallKind::Tool, u32::try_from(calls.len()).unwrap_or(u32::MAX));
        let mut taped = Vec::with_capacity(to_run.len());
        for (i, c) in &to_run {
            let n = tape_base.map(|base| base + u32::try_from(*i).unwrap_or(u32::MAX));
            let call =
                n.and_then(|n| ctx.calls().taped_at(CallKind::Tool, n, json!({"tool": c.name, "args": c.arguments})));
            let answer = match &call {
                Some(call) => call.answer()?,
                None => None,
            };
            taped.push((call, answer));
        }
        let results = futures::future::join_all(
            to_run.iter().zip(&taped).map(|((_, c), (_, answer))| self.call_tool(ctx, tools, c, answer.clone())),
        )
        .await;
        for ((call, _), (_, result)) in taped.into_iter().zip(&results) {
            if let Some(call) = call {
                call.record(match result {
                    Ok(v) => json!({"result": v}),
                    Err(e) => json!({"error": e.message()}),
                });
            }
        }
        if let Some((_, Err(ToolFailure::Agent(cause)))) =
            results.iter().find(|(_, r)| matches!(r, Err(ToolFailure::Agent(_))))
        {
            return Err(ctx.fail_with(cause.clone()).into());
        }
        let mut finished = Vec::with_capacity(to_run.len());
        for ((i, runs), (tool, result)) in to_run.iter().zip(results) {
            let result = result.map_err(|e| e.message());
            let n = first + u32::try_from(*i).unwrap_or(u32::MAX);
            let mut entry = ToolCallEntry::new(
                n,
                turn,
                runs.id.clone(),
                runs.name.clone(),
                runs.arguments.clone(),
                Status::Finished,
            );
            entry.effect = tool.map_or(Effect::None, Tool::side_effect);
            match &result {
                Ok(value) => {
                    entry.result = Some(value.clone());
                    if let Some(tool) = tool {
                        self.compensate_later(ctx, tool, &runs.arguments, value);
                    }
                }
                Err(e) => entry.error = Some(e.clone()),
            }
            finished.push(CallEntry::Tool(entry));
            texts[*i] = Some(result_text(&result));
        }
        // The round's results are committed before the next model call (or the suspension).
        ctx.calls().record(finished, true).await?;
        if !pending.is_empty() {
            return Err(Stop::Suspended(pending));
        }
        Ok(texts.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Registers the undo of `tool`'s successful call with `args` that gave `result`, if it declares one.
    fn compensate_later(&self, ctx: &InvocationContext, tool: &Tool, args: &Value, result: &Value) {
        if let Some((name, undo)) = tool.undo_for(args.clone(), result.clone()) {
            ctx.run().add_compensation(name, undo);
        }
    }

    /// Runs one tool call, reporting `ToolStarted`/`ToolFinished` to the listeners. Unknown tools and tool
    /// failures are results (`Err`) for the model, not failures of the agent. With `recorded` (a replay's
    /// `{"result": ..}` or `{"error": ".."}`), the tool is not run: that is its result.
    async fn call_tool<'t>(
        &self,
        ctx: &InvocationContext,
        tools: &'t [Tool],
        call: &crate::model::ToolCall,
        recorded: Option<Value>,
    ) -> (Option<&'t Tool>, Result<Value, ToolFailure>) {
        let tool = tools.iter().find(|t| t.name() == call.name);
        // The OpenTelemetry GenAI tool execution span (nothing is formatted unless a subscriber wants it).
        let span = tracing::info_span!(
            "execute_tool",
            "otel.name" = format_args!("execute_tool {}", call.name),
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = call.name.as_str(),
            "gen_ai.tool.call.id" = call.id.as_str(),
            "gen_ai.tool.description" = tool.map(|t| t.spec().description.as_str()),
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        if ctx.run().has_listeners() {
            ctx.run().emit(&RunEvent::ToolStarted {
                run_id: ctx.run_id().to_string(),
                path: ctx.path().to_string(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        let result = match (tool, recorded) {
            (_, Some(recorded)) => match recorded {
                Value::Object(mut answer) if answer.contains_key("error") => Err(ToolFailure::Model(
                    answer.remove("error").and_then(|e| e.as_str().map(str::to_string)).unwrap_or_default(),
                )),
                Value::Object(mut answer) => Ok(answer.remove("result").unwrap_or(Value::Null)),
                other => Ok(other),
            },
            (Some(tool), None) => 'call: {
                let key = match ctx.run().idempotency_key().await {
                    Ok(key) => key,
                    // The run's scope is gone (the run is ending): no side effect without its key.
                    Err(e) => break 'call Err(ToolFailure::Model(format!("not called: {e}"))),
                };
                let mut info = ToolCallInfo {
                    run_id: ctx.run_id().to_string(),
                    agent: ctx.agent_name().to_string(),
                    path: ctx.path().to_string(),
                    attempt: ctx.attempt(),
                    call_id: call.id.clone(),
                    idempotency_key: format!("{key}/{}", call.id),
                    state: ctx.view(),
                    inputs: ctx.inputs().clone(),
                    traceparent: None,
                };
                let run = async {
                    info.traceparent = crate::trace_context::outgoing();
                    tool.call_checked(info, call.arguments.clone()).await
                };
                tracing::Instrument::instrument(crate::trace_context::scoped(ctx, run), span.clone()).await
            }
            (None, None) => {
                let known: Vec<&str> = tools.iter().map(Tool::name).collect();
                Err(ToolFailure::Model(format!("unknown tool `{}` (the tools are: {})", call.name, known.join(", "))))
            }
        };
        match &result {
            Ok(_) => tracing::debug!(agent = %self.spec.name, tool = %call.name, "tool call succeeded"),
            Err(e) => {
                span.record(
                    "error.type",
                    match (tool, e) {
                        (None, _) => "unknown_tool",
                        (Some(_), ToolFailure::Model(_)) => "tool_error",
                        (Some(_), ToolFailure::Agent(_)) => "tool_unavailable",
                    },
                );
                span.record("otel.status_code", "error");
                tracing::info!(agent = %self.spec.name, tool = %call.name, "tool call failed: {}", e.message())
            }
        }
        if ctx.run().has_listeners() {
            ctx.run().emit(&RunEvent::ToolFinished {
                run_id: ctx.run_id().to_string(),
                path: ctx.path().to_string(),
                tool: call.name.clone(),
                result: match &result {
                    Ok(v) => v.clone(),
                    Err(e) => Value::String(format!("error: {}", e.message())),
                },
            });
        }
        (tool, result)
    }
}

impl LlmAgent {
    /// The tools of this invocation: the agent's own, then each provider's, all names distinct.
    async fn resolve_tools(&self, ctx: &InvocationContext) -> Result<Cow<'_, [Tool]>, AgentError> {
        if self.providers.is_empty() {
            return Ok(Cow::Borrowed(&self.tools));
        }
        let mut tools = self.tools.clone();
        let mut sources: Vec<String> = vec!["the agent's own tools".to_string(); tools.len()];
        for provider in &self.providers {
            for tool in provider.tools().await.map_err(|e| ctx.fail(e))? {
                if let Some(i) = tools.iter().position(|t| t.name() == tool.name()) {
                    return Err(ctx.fail(format!(
                        "two tools are named `{}`: one of {} and one of {}; rename one (a name mapping of the \
                         provider, `rename` in a spec)",
                        tool.name(),
                        sources[i],
                        provider.source()
                    )));
                }
                tools.push(tool);
                sources.push(provider.source());
            }
        }
        if let Some(ToolChoice::Tool(name)) = &self.tool_choice
            && !tools.iter().any(|t| t.name() == name)
        {
            let known: Vec<&str> = tools.iter().map(Tool::name).collect();
            return Err(
                ctx.fail(format!("tool_choice names `{name}`, which is not among the tools ({})", known.join(", ")))
            );
        }
        Ok(Cow::Owned(tools))
    }
}

impl Agent for LlmAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    fn has_chat_memory(&self) -> bool {
        self.memory_window.is_some()
    }

    fn streams(&self) -> bool {
        self.streaming
    }

    /// A tool call may wait for a person's approval (a tool with an approval rule, or tools of a provider,
    /// whose rules are known only when it is asked).
    fn may_suspend(&self) -> bool {
        self.tools.iter().any(Tool::has_approval_rule) || !self.providers.is_empty()
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let mut view = ctx.view();
        let model = match self.selector.as_ref().and_then(|s| s(&view)) {
            Some(selected) => selected,
            None => self.model.clone(),
        };
        // A model chosen per invocation (SPEC.md §7) is resolved here, once for the whole invocation; a resumed
        // invocation keeps the model that answered its journaled turns.
        let mut resumed = None;
        let model = if model.choice().is_some() {
            drop(view);
            let journal = LoopJournal::resume(ctx).await;
            let used = journal.turn(0).and_then(|t| t.usage.models.first());
            let kept = used.and_then(|name| model.choice().and_then(|c| c.get(name))).cloned();
            let chosen = match kept {
                Some(kept) => kept,
                None => model.for_invocation(ctx).await?,
            };
            resumed = Some(journal);
            view = ctx.view();
            chosen
        } else {
            model
        };
        let info = model.info();
        let user = self.render(ctx, &self.user, "user")?;
        let mut messages = Vec::new();
        if let Some(system) = &self.system {
            messages.push(ChatMessage::system(self.render(ctx, system, "system")?));
        }
        let key = self.memory_window.map(|_| memory_key(&self.spec.name));
        let mut memory: Vec<ChatMessage> = match key.as_ref().and_then(|k| view.get(k).map(|v| (k, v))) {
            Some((key, v)) => serde_json::from_value(v.clone()).unwrap_or_else(|e| {
                tracing::warn!(agent = %self.spec.name, "ignoring unreadable memory `{key}`: {e}");
                Vec::new()
            }),
            None => Vec::new(),
        };
        // Not held across the model call: while a reader holds a snapshot, the scope copies what it writes.
        drop(view);
        messages.extend(memory.iter().cloned());

        let structured = if info.json_schema { self.output.response_format() } else { None };
        let mut sent = self.context_prefix(ctx, &model).await?;
        sent.push_str(&user);
        if structured.is_none()
            && let Some(hint) = self.output.hint()
        {
            sent.push_str("\n\n");
            sent.push_str(&hint);
        }
        messages.push(ChatMessage::user(sent));

        let mut request = ChatRequest::new(messages);
        request.temperature = self.temperature;
        request.max_tokens = self.max_tokens;
        let tools = self.resolve_tools(ctx).await?;
        request.tools = tools.iter().map(|t| t.spec().clone()).collect();
        request.tool_choice = self.tool_choice.clone();
        let wrapped = structured.as_ref().is_some_and(|(_, w)| *w);
        request.response_format = structured.map(|(f, _)| f);
        if self.confidence_key.is_some() || self.scores_key.is_some() {
            request.logprobs = Some(5);
        }

        // A text answer always reads; any other type may be asked for again, which needs the request.
        let keep = !matches!(self.output, OutputType::String);
        let mut journal = match resumed {
            Some(journal) => journal,
            None => LoopJournal::resume(ctx).await,
        };
        if ctx.calls().journaled() {
            // Before any budget is looked at: a suspension keeps no answers, a raise is journaled.
            ctx.usage().journaling();
        }
        if let Some(limits) = journal.raised.take() {
            // Budgets raised earlier in this invocation, before another suspension.
            ctx.usage().restore_raised(limits).await;
        }
        if journal.is_resumed() {
            // What a budget suspension was answered with applies before the journal replays the loop.
            ctx.usage().resume().await?;
        }
        let response = self.converse(ctx, &model, info, &mut request, &tools, keep, &mut journal).await?;
        let mut answer = response.text().to_string();
        let mut logprobs = response.logprobs;
        let value = match parse(&self.output, &answer, wrapped, self.checker.as_ref()) {
            Ok(v) => v,
            Err(first) => {
                tracing::info!(agent = %self.spec.name, "answer not readable as {}: {first}; asking again", self.output.describe());
                request.messages.push(ChatMessage::assistant(answer.clone()));
                let mut again = format!(
                    "Your answer could not be read as {}: {first}. Answer again, with {} only.",
                    self.output.describe(),
                    self.output.describe()
                );
                if let Some(hint) = self.output.hint() {
                    again = format!("{again} {hint}");
                }
                request.messages.push(ChatMessage::user(again));
                // Boxed: the rare second question would enlarge every invocation's future.
                let response =
                    Box::pin(self.converse(ctx, &model, info, &mut request, &tools, true, &mut journal)).await?;
                answer = response.text().to_string();
                logprobs = response.logprobs;
                match parse(&self.output, &answer, wrapped, self.checker.as_ref()) {
                    Ok(value) => value,
                    Err(second) => {
                        // The failed attempt's record does not hold calls: the turns go in their own.
                        ctx.calls().record(Vec::new(), false).await?;
                        return Err(ctx
                            .fail(format!(
                                "model `{}` at {}: the answer could not be read as {} (asked twice): {second}; the \
                                 answer was: {:?}",
                                info.model,
                                info.server,
                                self.output.describe(),
                                crate::model::shorten_text(&answer, 500)
                            ))
                            .into());
                    }
                }
            }
        };

        if self.confidence_key.is_some() || self.scores_key.is_some() {
            let scores = enum_scores(&self.output, &answer, logprobs.as_deref());
            if let Some(key) = &self.confidence_key {
                let confidence = enum_confidence(&self.output, &value, scores.as_deref());
                ctx.write_on_completion(key.clone(), confidence.map_or(Value::Null, |p| json!(p)));
            }
            if let (Some(key), OutputType::Enum(names)) = (&self.scores_key, &self.output) {
                let map = scores.map_or(Value::Null, |ps| {
                    Value::Object(names.iter().zip(ps).map(|(n, p)| (n.clone(), json!(p))).collect())
                });
                ctx.write_on_completion(key.clone(), map);
            }
        }
        ctx.run().set_context(&user, &answer).await?;
        if let (Some(window), Some(key)) = (self.memory_window, key) {
            memory.push(ChatMessage::user(user));
            memory.push(ChatMessage::assistant(answer));
            let skip = memory.len().saturating_sub(window);
            let kept: Vec<ChatMessage> = memory.into_iter().skip(skip).collect();
            let v = serde_json::to_value(&kept).map_err(|e| ctx.fail(format!("memory: {e}")))?;
            ctx.write_on_completion(key, v);
        }
        Ok(value)
    }
}

/// The probability of each value of the enum `output` that `answer` gives, in the enum's order, read from
/// the answer's token log-probabilities at the value's first token (normalised over the enum's values);
/// `None` when the output is no enum or the log-probabilities do not tell.
fn enum_scores(output: &OutputType, answer: &str, logprobs: Option<&[TokenLogprob]>) -> Option<Vec<f64>> {
    let (OutputType::Enum(names), Some(tokens)) = (output, logprobs) else {
        return None;
    };
    // `{"value": "<v>"}`, a JSON string, or the bare word.
    let start = crate::decision::value_start(answer, "value")
        .or_else(|| answer.trim_start().starts_with('"').then(|| answer.len() - answer.trim_start().len() + 1))
        .unwrap_or(answer.len() - answer.trim_start().len());
    crate::decision::distribution(tokens, answer, start, names)
}

/// The chosen enum value's share of `scores` ([`enum_scores`]); `None` when there are none or `value` is not
/// one of the enum's values.
fn enum_confidence(output: &OutputType, value: &Value, scores: Option<&[f64]>) -> Option<f64> {
    let (OutputType::Enum(names), Value::String(chosen), Some(scores)) = (output, value, scores) else {
        return None;
    };
    let index = names.iter().position(|n| n == chosen)?;
    scores.get(index).copied()
}

/// Parses a free-text answer as `output`, leniently (see the module docs): what the LLM agent does when the
/// model does not support the JSON-schema response format.
///
/// # Errors
/// Why the text is not a value of the type.
pub fn parse_answer(output: &OutputType, text: &str) -> Result<Value, String> {
    parse(output, text, false, None)
}

/// Parses `text` as `output`. `wrapped`: the answer was requested as `{"value": ..}` (JSON-schema mode);
/// free text is still accepted (servers that ignore the format).
fn parse(output: &OutputType, text: &str, wrapped: bool, checker: Option<&Checker>) -> Result<Value, String> {
    if wrapped
        && let Ok(Value::Object(m)) = extract_json(text)
        && let Some(v) = m.get("value")
    {
        return parse_value(output, v.clone(), checker);
    }
    match output {
        OutputType::String => Ok(Value::String(text.trim().to_string())),
        OutputType::Number => {
            let n = first_number(text).ok_or_else(|| "no number found".to_string())?;
            serde_json::Number::from_f64(n).map(Value::Number).ok_or_else(|| format!("{n} is not a finite number"))
        }
        OutputType::Integer => {
            let n = first_number(text).ok_or_else(|| "no integer found".to_string())?;
            to_integer(n)
        }
        OutputType::Boolean => {
            let word = text
                .split(|c: char| !c.is_alphanumeric())
                .map(str::to_ascii_lowercase)
                .find(|w| matches!(w.as_str(), "true" | "false" | "yes" | "no"))
                .ok_or_else(|| "no true/false or yes/no found".to_string())?;
            Ok(Value::Bool(word == "true" || word == "yes"))
        }
        OutputType::Enum(names) => parse_enum(names, text),
        OutputType::Json | OutputType::Schema(_) => {
            let v = extract_json(text)?;
            parse_value(output, v, checker)
        }
    }
}

/// Checks a JSON value against `output` (JSON-schema mode, or after extracting JSON).
fn parse_value(output: &OutputType, v: Value, checker: Option<&Checker>) -> Result<Value, String> {
    match output {
        OutputType::String => Ok(match v {
            Value::String(s) => Value::String(s),
            other => Value::String(other.to_string()),
        }),
        OutputType::Number => match &v {
            Value::Number(_) => Ok(v),
            Value::String(s) => parse(output, s, false, None),
            _ => Err(format!("expected a number, found {v}")),
        },
        OutputType::Integer => match v.as_f64() {
            Some(n) => to_integer(n),
            None => match &v {
                Value::String(s) => parse(output, s, false, None),
                _ => Err(format!("expected an integer, found {v}")),
            },
        },
        OutputType::Boolean => match &v {
            Value::Bool(_) => Ok(v),
            Value::String(s) => parse(output, s, false, None),
            _ => Err(format!("expected true or false, found {v}")),
        },
        OutputType::Enum(names) => match &v {
            Value::String(s) => parse_enum(names, s),
            _ => Err(format!("expected one of {}, found {v}", names.join(", "))),
        },
        OutputType::Json => Ok(v),
        OutputType::Schema(schema) => {
            match checker {
                Some(check) => check(&v)?,
                None => check_schema(schema, &v, "the answer")?,
            }
            Ok(v)
        }
    }
}

fn to_integer(n: f64) -> Result<Value, String> {
    if n.fract() != 0.0 || !n.is_finite() || n.abs() > 9.0e15 {
        return Err(format!("{n} is not an integer"));
    }
    Ok(Value::from(n as i64))
}

fn parse_enum(names: &[String], text: &str) -> Result<Value, String> {
    let cleaned = text.trim().trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '-');
    if let Some(n) = names.iter().find(|n| n.eq_ignore_ascii_case(cleaned)) {
        return Ok(Value::String(n.clone()));
    }
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let found: Vec<&String> = names.iter().filter(|n| words.contains(&n.to_ascii_lowercase())).collect();
    match found.as_slice() {
        [one] => Ok(Value::String((*one).clone())),
        [] => Err(format!("expected one of {}", names.join(", "))),
        many => Err(format!(
            "expected one of {}, found several: {}",
            names.join(", "),
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The first number in `text` (`-1`, `0.85`, `.5`, `1e3`).
fn first_number(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
        if !starts {
            i += 1;
            continue;
        }
        let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j < b.len() && b[j] == b'.' && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
            j += 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        }
        if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
            let mut k = j + 1;
            if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
                k += 1;
            }
            if k < b.len() && b[k].is_ascii_digit() {
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                j = k;
            }
        }
        return text[start..j].parse().ok();
    }
    None
}

/// The JSON in `text`: inside the first ``` code fence if there is one, else the whole text, else the span
/// from the first `{`/`[` to the last `}`/`]`.
///
/// # Errors
/// No JSON found, with the parser's message.
pub fn extract_json(text: &str) -> Result<Value, String> {
    if let Some(start) = text.find("```") {
        let after = &text[start + 3..];
        let body_start = after.find('\n').map_or(0, |n| n + 1);
        let body = &after[body_start..];
        let body = body.find("```").map_or(body, |end| &body[..end]);
        return serde_json::from_str(body.trim()).map_err(|e| format!("invalid JSON in the code block: {e}"));
    }
    let trimmed = text.trim();
    match serde_json::from_str(trimmed) {
        Ok(v) => Ok(v),
        Err(whole) => {
            let open = trimmed.find(['{', '[']);
            let close = trimmed.rfind(['}', ']']);
            match (open, close) {
                (Some(o), Some(c)) if c > o => {
                    serde_json::from_str(&trimmed[o..=c]).map_err(|e| format!("invalid JSON: {e}"))
                }
                _ => Err(format!("no JSON found: {whole}")),
            }
        }
    }
}

/// Checks `v` against the subset of JSON schema tools and answers use ([`agentic_engine::check_schema`]).
pub(crate) use agentic_engine::check_schema;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_parsing() {
        assert_eq!(parse_answer(&OutputType::Number, "Score: 0.85"), Ok(json!(0.85)));
        assert_eq!(parse_answer(&OutputType::Number, "It is -3 degrees"), Ok(json!(-3.0)));
        assert_eq!(parse_answer(&OutputType::Integer, "I count 7."), Ok(json!(7)));
        assert!(parse_answer(&OutputType::Integer, "about 7.5").is_err());
        assert_eq!(parse_answer(&OutputType::Boolean, "Yes, it is."), Ok(json!(true)));
        let e = OutputType::Enum(vec!["MEDICAL".into(), "LEGAL".into(), "TECHNICAL".into()]);
        assert_eq!(parse_answer(&e, "medical"), Ok(json!("MEDICAL")));
        assert_eq!(parse_answer(&e, "The category is legal."), Ok(json!("LEGAL")));
        assert!(parse_answer(&e, "cooking").is_err());
        let fenced = "Here:\n```json\n{\"name\": \"Ada\", \"age\": 36}\n```\nDone.";
        assert_eq!(parse_answer(&OutputType::Json, fenced), Ok(json!({"name": "Ada", "age": 36})));
        let schema = OutputType::Schema(
            json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
        );
        assert!(parse_answer(&schema, "{\"age\": 3}").unwrap_err().contains("`name`"));
        assert_eq!(parse(&OutputType::Number, "{\"value\": 0.5}", true, None), Ok(json!(0.5)));
    }

    fn tok(token: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        let top = top.iter().map(|(t, l)| crate::model::TopLogprob { token: t.to_string(), logprob: *l }).collect();
        TokenLogprob { token: token.to_string(), logprob, top }
    }

    #[test]
    fn enum_scores_and_confidence_are_the_values_shares() {
        let conf = |e: &OutputType, answer: &str, value: &Value, lp: Option<&[TokenLogprob]>| {
            enum_confidence(e, value, enum_scores(e, answer, lp).as_deref())
        };
        let e = OutputType::Enum(vec!["billing".into(), "technical".into(), "account".into()]);
        let round = |p: Option<f64>| p.map(|p| (p * 1e9).round() / 1e9);
        // As the local provider reports a scored enum: the whole values as the alternatives of one piece.
        let wrapped = r#"{"value":"technical"}"#;
        let pieces = [
            tok(r#"{"value":""#, 0.0, &[]),
            tok(
                "technical\"",
                0.7f64.ln(),
                &[("technical\"", 0.7f64.ln()), ("billing\"", 0.2f64.ln()), ("account\"", 0.1f64.ln())],
            ),
            tok("}", 0.0, &[]),
        ];
        assert_eq!(round(conf(&e, wrapped, &json!("technical"), Some(&pieces))), Some(0.7));
        // Every value's share, in the enum's order.
        let scores = enum_scores(&e, wrapped, Some(&pieces)).expect("scores");
        assert_eq!(scores.iter().map(|p| round(Some(*p))).collect::<Vec<_>>(), [Some(0.2), Some(0.7), Some(0.1)]);
        // A bare answer with first-token alternatives (an OpenAI-compatible server); mass outside the enum
        // ("the") is left out.
        let bare = [
            tok("bill", 0.5f64.ln(), &[("bill", 0.5f64.ln()), ("tech", 0.25f64.ln()), ("the", 0.25f64.ln())]),
            tok("ing", 0.0, &[]),
        ];
        assert_eq!(round(conf(&e, "billing", &json!("billing"), Some(&bare))), round(Some(2.0 / 3.0)));
        // Nothing reported, tokens that do not spell the answer, or no enum: no confidence.
        assert_eq!(conf(&e, wrapped, &json!("technical"), None), None);
        assert_eq!(conf(&e, "billing", &json!("billing"), Some(&pieces)), None);
        assert_eq!(conf(&OutputType::String, "billing", &json!("billing"), Some(&bare)), None);
    }
}
