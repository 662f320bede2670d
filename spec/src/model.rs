//! The typed, located model of a parsed spec (SPEC.md §1). Every item keeps the position it was read from,
//! so that validation and build errors point into the file.

use serde_json::Value;

use crate::kind::{FieldType, KindField};
use crate::node::Pos;

/// A string read from the spec, with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it was read.
    pub pos: Pos,
}

impl<T> Located<T> {
    /// Wraps `value` read at `pos`.
    pub fn new(value: T, pos: Pos) -> Self {
        Located { value, pos }
    }
}

/// One agent definition (`agents.<name>`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    /// The agent's name: its id in the spec.
    pub name: String,
    /// Position of the name (the mapping key under `agents`).
    pub pos: Pos,
    /// Position of the `kind` value.
    pub kind_pos: Pos,
    /// Common field `description` (default `""`).
    pub description: String,
    /// Common field `inputs`: explicit input keys; `None` = inferred from expressions/templates.
    pub inputs: Option<Vec<Located<String>>>,
    /// Common field `output_key`.
    pub output_key: Option<String>,
    /// Common field `optional` (default false).
    pub optional: bool,
    /// Common field `async` (default false).
    pub is_async: bool,
    /// Common field `timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// Common field `budget` (SPEC.md §3); the spec's top-level `budget` is the root agent's.
    pub budget: Option<Located<agentic_engine::budget::Budget>>,
    /// Fields only composites take (`output`, `error_handler`, `compensate_on_error`); `None` for leaves.
    pub composite: Option<CompositeCommon>,
    /// The kind and its specific fields.
    pub kind: AgentKind,
}

/// Fields every composite takes besides the common ones.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompositeCommon {
    /// `output`: expression computing the composite's result from the final state.
    pub output: Option<Located<String>>,
    /// `error_handler`.
    pub error_handler: Option<ErrorHandlerDef>,
    /// `compensate_on_error` (default false). Parsed and stored; it has no effect until tool actions with
    /// compensations exist.
    pub compensate_on_error: bool,
}

/// `error_handler: {when, set, retry, backoff_ms, fallback}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorHandlerDef {
    /// Position of the `error_handler` mapping.
    pub pos: Pos,
    /// `set`: the repair written to the state before each retry, as (state key, expression) in file order
    /// (empty when absent). Each expression sees the state and `error` (`{kind, agent, path, message, cause, status,
    /// transient}`).
    pub set: Vec<(String, Located<String>)>,
    /// Retries of a failed sub-agent call (default 0).
    pub retry: u32,
    /// First backoff delay in milliseconds, doubled at each retry (default 100).
    pub backoff_ms: u64,
    /// Expression whose value substitutes the failed agent's result once retries are exhausted.
    pub fallback: Option<Located<String>>,
    /// Condition (an expression over the state and `error`): the handler handles only the failures it holds
    /// for; any other fails the composite at once.
    pub when: Option<Located<String>>,
}

/// The body of a `compute` agent.
#[derive(Debug, Clone, PartialEq)]
pub enum ComputeBody {
    /// `value`: an expression; the result is its JSON value.
    Value(Located<String>),
    /// `template`: a template; the result is the rendered string.
    Template(Located<String>),
}

/// An agent's kind with its kind-specific fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentKind {
    /// `compute`: evaluates an expression or renders a template.
    Compute(ComputeBody),
    /// `human`: asks a person (`prompt`, a template) and returns the answer.
    Human {
        /// The prompt template.
        prompt: Located<String>,
        /// `pending` (wait in-process) instead of the default `suspend`.
        pending_mode: bool,
        /// `response_id` (default: the agent's path).
        response_id: Option<String>,
        /// `deadline` (SPEC.md §3): when the question times out.
        deadline: Option<Located<DeadlineDef>>,
        /// `on_timeout`: what happens at the deadline (default: the step fails).
        on_timeout: Option<Located<OnTimeoutDef>>,
    },
    /// `wait`: suspends without a human until a time (`for` a duration, or `until` an expression giving an
    /// RFC 3339 time); its result is the time it fired.
    Wait(WaitDef),
    /// `mcp`: one tool of an MCP server as an agent.
    Mcp(McpDef),
    /// `a2a`: a remote A2A agent as an agent.
    A2a(A2aDef),
    /// `llm`: asks a chat model (see [`LlmDef`]).
    Llm(Box<LlmDef>),
    /// `registry`: an agent the Rust program registered in its [`agentic_engine::AgentRegistry`] under
    /// `name`, looked up when the spec is built (`BuildContext::registry`). It keeps its own name and fields.
    Registry {
        /// `name`: the registered name.
        name: Located<String>,
    },
    /// A composite whose kind a planner descriptor defines ([`crate::PlannerKind`]): every built-in composite
    /// kind (`sequence`, `loop`, `parallel`, `parallel_mapper`, `conditional`, `goap`, `p2p`, `blackboard`,
    /// `voting`, `debate`, `bdi`, `supervisor`, `decision_router`) and the ones the program registered
    /// ([`crate::register_kind`]), with the values of the fields the spec gives.
    Planner(PlannerDef),
    /// A kind of SPEC.md this build does not support yet (`llm`, `supervisor`, ...). Never present in a
    /// spec that validated.
    Unsupported(String),
}

impl AgentKind {
    /// The kind's name as written in a spec.
    pub fn name(&self) -> &str {
        match self {
            AgentKind::Compute(_) => "compute",
            AgentKind::Human { .. } => "human",
            AgentKind::Wait(_) => "wait",
            AgentKind::Mcp(_) => "mcp",
            AgentKind::A2a(_) => "a2a",
            AgentKind::Llm(_) => "llm",
            AgentKind::Registry { .. } => "registry",
            AgentKind::Planner(c) => c.kind.name(),
            AgentKind::Unsupported(kind) => kind,
        }
    }

    /// The sub-agent references, in the order the sub-agents are numbered (a kind's agent fields in its field
    /// order, the entries of a list field in order: a conditional's branches flattened).
    pub fn references(&self) -> Vec<&Located<String>> {
        match self {
            AgentKind::Planner(c) => c.fields.iter().flat_map(|(_, v)| v.references()).collect(),
            AgentKind::Compute(_)
            | AgentKind::Human { .. }
            | AgentKind::Wait(_)
            | AgentKind::Mcp(_)
            | AgentKind::A2a(_)
            | AgentKind::Llm(_)
            | AgentKind::Registry { .. }
            | AgentKind::Unsupported(_) => Vec::new(),
        }
    }
}

/// An agent whose kind a planner descriptor defines: the kind and the values of the fields the spec gives,
/// in the order the kind declares them. A [`crate::FieldType::Model`] field the spec leaves out names the
/// model `default`, located at the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannerDef {
    /// The registered kind.
    pub kind: crate::KindRef,
    /// `(field, value)` for each field given, in the kind's field order.
    pub fields: Vec<(String, FieldValue)>,
}

impl PlannerDef {
    /// The value of the field `name`, when given.
    pub fn field(&self, name: &str) -> Option<&FieldValue> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Calls `f(path, field, value, entry)` for every value, those in the entries of list fields included
    /// (`path`: `branches[1].when`; `entry`: the position of the entry holding it, `None` for the kind's own
    /// fields), in field order.
    pub(crate) fn visit<'a>(&'a self, f: &mut Visitor<'_, 'a>) {
        visit_fields(self.kind.descriptor().fields(), &self.fields, "", None, f);
    }

    /// The position of the value at `path` (`item_key`, `desires[1].name`, `agents[2]`), when the spec gives
    /// it.
    pub(crate) fn locate(&self, path: &str) -> Option<Pos> {
        let mut fields = &self.fields;
        let mut segments = path.split('.').peekable();
        while let Some(segment) = segments.next() {
            let (name, index) = match segment.split_once('[') {
                Some((name, rest)) => (name, rest.strip_suffix(']').and_then(|i| i.parse::<usize>().ok())),
                None => (segment, None),
            };
            let value = fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)?;
            let last = segments.peek().is_none();
            match (value, index) {
                (FieldValue::List(entries), Some(i)) => {
                    let entry = entries.get(i)?;
                    if last {
                        return Some(entry.pos);
                    }
                    fields = &entry.fields;
                }
                (FieldValue::Agents(list), Some(i)) if last => return list.get(i).map(|n| n.pos),
                (value, None) if last => return value.pos(),
                _ => return None,
            }
        }
        None
    }
}

/// What [`PlannerDef::visit`] calls: `(path, field, value, entry)`.
pub(crate) type Visitor<'f, 'a> = dyn FnMut(&str, &KindField, &'a FieldValue, Option<Pos>) + 'f;

fn visit_fields<'a>(
    declared: &[KindField],
    fields: &'a [(String, FieldValue)],
    prefix: &str,
    entry: Option<Pos>,
    f: &mut Visitor<'_, 'a>,
) {
    for (name, value) in fields {
        let Some(field) = declared.iter().find(|d| d.name == name) else { continue };
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        f(&path, field, value, entry);
        if let (FieldValue::List(entries), FieldType::List(inner)) = (value, field.ty) {
            for (i, e) in entries.iter().enumerate() {
                visit_fields(inner, &e.fields, &format!("{path}[{i}]"), Some(e.pos), f);
            }
        }
    }
}

/// The value of one field of a kind a planner descriptor defines, as parsed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FieldValue {
    /// Sub-agents by name.
    Agents(Vec<Located<String>>),
    /// One sub-agent by name.
    Agent(Located<String>),
    /// A plain value (string, name, state key, number, boolean, choice, or any value).
    Value(Located<serde_json::Value>),
    /// An expression's source.
    Expression(Located<String>),
    /// The entries of a list field, in order.
    List(Vec<EntryDef>),
    /// The name of one of the agents of another field of the kind ([`crate::FieldType::AgentOf`]).
    AgentOf(Located<String>),
    /// A model's name in `models`, or a choice per invocation ([`crate::FieldType::Model`]).
    Model(ModelField),
}

/// A `model` field (SPEC.md §1, §7): a name in `models`, or `{choose: <expression>, default: <name>}` — the
/// expression gives the model's name at each invocation (`null` or nothing: the default).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelField {
    /// The model's name; for a choice, its `default`. Located where written (at the agent when left out).
    pub name: Located<String>,
    /// `choose`: the expression's source, for a choice.
    pub choose: Option<Located<String>>,
}

impl ModelField {
    /// A field naming model `name`.
    pub fn named(name: Located<String>) -> Self {
        ModelField { name, choose: None }
    }
}

impl FieldValue {
    /// The sub-agents it names, in order (a list's entries' too).
    pub fn references(&self) -> Vec<&Located<String>> {
        match self {
            FieldValue::Agents(list) => list.iter().collect(),
            FieldValue::Agent(one) => vec![one],
            FieldValue::List(entries) => {
                entries.iter().flat_map(|e| e.fields.iter().flat_map(|(_, v)| v.references())).collect()
            }
            FieldValue::Value(_) | FieldValue::Expression(_) | FieldValue::AgentOf(_) | FieldValue::Model(_) => {
                Vec::new()
            }
        }
    }

    /// Where the value was read (a list of agents: its first name; a list of entries: its first entry).
    pub fn pos(&self) -> Option<Pos> {
        match self {
            FieldValue::Agents(list) => list.first().map(|n| n.pos),
            FieldValue::List(entries) => entries.first().map(|e| e.pos),
            FieldValue::Agent(v) | FieldValue::Expression(v) | FieldValue::AgentOf(v) => Some(v.pos),
            FieldValue::Model(m) => Some(m.choose.as_ref().unwrap_or(&m.name).pos),
            FieldValue::Value(v) => Some(v.pos),
        }
    }
}

/// One entry of a list field ([`crate::FieldType::List`]): a mapping with the fields the kind declares for it.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryDef {
    /// Position of the entry's mapping.
    pub pos: Pos,
    /// `(field, value)` for each field given, in the declared order.
    pub fields: Vec<(String, FieldValue)>,
}

impl EntryDef {
    /// The value of the field `name`, when given.
    pub fn field(&self, name: &str) -> Option<&FieldValue> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// The fields of an `mcp` agent.
#[derive(Debug, Clone, PartialEq)]
pub struct McpDef {
    /// `server`: how to reach the MCP server, or the name of one in `mcp_servers`.
    pub server: Located<McpServerDef>,
    /// `tool`: the tool's name (none: the server's only tool).
    pub tool: Option<Located<String>>,
    /// `effect` (SPEC.md §4): what calling the tool does to the world (default `once`).
    pub effect: agentic_engine::Effect,
}

/// The fields of an `a2a` agent.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aDef {
    /// `url`: the remote agent's card URL or base URL (`http(s)://`).
    pub url: Located<String>,
    /// `tenant`: a fixed tenant (none: the card's, or the one its URL names).
    pub tenant: Option<Located<String>>,
    /// `tenant_key`: the state key holding the tenant of each call.
    pub tenant_key: Option<Located<String>>,
    /// `message`: the template of the message (none: the inputs' values, one per line).
    pub message: Option<Located<String>>,
    /// `context_key`: the state key of the remote context id (read, then written back).
    pub context_key: Option<Located<String>>,
    /// `task_key`: the state key of the remote task id (read, then written back while the task is open).
    pub task_key: Option<Located<String>>,
    /// `stream`: stream when the card allows it and the run is observed (default true).
    pub stream: bool,
    /// `headers`: HTTP headers every request to the agent carries, `(name, value)`; a value may hold secrets'
    /// references (`Bearer ${secret:PEER_TOKEN}`), resolved when the spec is built for a run.
    pub headers: Vec<(String, Located<String>)>,
}

/// An MCP server as a spec writes it: `{command: [program, args..]}` (stdio) or `{url: ..}` (streamable
/// HTTP).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpServerDef {
    /// `command`: a child process speaking MCP on stdin/stdout.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// `env`: variables set in the process's environment, `(name, value)`; a value may hold secrets'
        /// references, resolved when the spec is built for a run.
        env: Vec<(String, Located<String>)>,
    },
    /// `url`: a streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// `headers`: HTTP headers sent with every request, `(name, value)`; a value may hold secrets'
        /// references (`Bearer ${secret:MCP_TOKEN}`), resolved when the spec is built for a run.
        headers: Vec<(String, Located<String>)>,
    },
    /// A name in the spec's `mcp_servers` (an `mcp` agent's `server: calc`).
    Named {
        /// The server's name.
        name: String,
    },
}

/// One entry of the top-level `mcp_servers`: an MCP server declared once, used by `mcp` agents
/// (`server: <name>`) and by `llm` agents' `tools: [{mcp: <name>}]`; one connection (one child process for
/// stdio) per built spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerEntry {
    /// The server's name (its key under `mcp_servers`).
    pub name: String,
    /// How to reach it (never [`McpServerDef::Named`]), located at the entry.
    pub server: Located<McpServerDef>,
}

/// An `llm` agent's `tools` entry `{mcp: <server>, filter: [..], rename: {..}}`: the tools of an MCP server
/// the model may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpToolsDef {
    /// `mcp`: a name in `mcp_servers`.
    pub server: Located<String>,
    /// `filter`: only these tools (as the server names them); none = every tool of the server.
    pub filter: Option<Vec<Located<String>>>,
    /// `rename`: server tool name → the name the model sees (to tell apart tools of the same name).
    pub rename: Vec<(String, Located<String>)>,
    /// `effect` (SPEC.md §4): what calling these tools does to the world (default `once`).
    pub effect: agentic_engine::Effect,
    /// `approve` (SPEC.md §4): which calls of these tools wait for a person's approval (default none).
    pub approve: ApproveDef,
}

/// A tool entry's `approve` (SPEC.md §4): which of its calls wait for a person's approval before they run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApproveDef {
    /// `false`, or no `approve`: no call waits.
    #[default]
    Never,
    /// `true`: every call waits.
    Always,
    /// An expression whose variables are `args` (the call's arguments object), `tool` (the tool's name) and
    /// the state keys: the calls for which it is truthy wait.
    When(Located<String>),
}

/// The fields of an `llm` agent.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmDef {
    /// `model`: a name in `models` (default `default`, located at the agent when not written), or a choice
    /// per invocation.
    pub model: ModelField,
    /// `system`: the system message template.
    pub system: Option<Located<String>>,
    /// `user`: the user message template (required).
    pub user: Located<String>,
    /// `output`: the answer's type (default `string`).
    pub output: agentic_agents::OutputType,
    /// `memory.window`: messages of chat memory kept per memory id (default: no memory).
    pub memory_window: Option<usize>,
    /// `context.summarized` or `context.conversation`: agents whose exchanges are put before the user
    /// message (every agent's when the list is empty).
    pub context: Vec<Located<String>>,
    /// Whether the context is summarized by the model (`context.summarized`) rather than put verbatim
    /// (`context.conversation`).
    pub context_summarized: bool,
    /// Whether `context` was given at all (`context: {summarized: []}` means every agent's exchanges).
    pub has_context: bool,
    /// `tools`: the functions the model may call, in declaration order.
    pub tools: Vec<ToolDef>,
    /// `tools` entries naming an MCP server (`{mcp: ..}`), in declaration order; offered after `tools`.
    pub mcp_tools: Vec<McpToolsDef>,
    /// `max_tool_iterations`: the bound on tool rounds per answer (default: the agent's default, 10).
    pub max_tool_iterations: Option<usize>,
    /// `tool_choice`: `auto` (default), `none`, `required`, or a tool's name (that tool is called first).
    pub tool_choice: Option<agentic_agents::model::ToolChoice>,
    /// `temperature`: sampling temperature of this agent's requests (default: the model's).
    pub temperature: Option<f64>,
    /// `max_tokens`: token limit of this agent's answers (default: the model's).
    pub max_tokens: Option<u32>,
    /// `stream`: the answer is streamed, each text delta a `token` run event (default false).
    pub stream: bool,
    /// `confidence_key`: the state key that receives the model's probability of its enum answer (0..=1;
    /// unset when the provider reports none); enum outputs only.
    pub confidence_key: Option<Located<String>>,
    /// `scores_key`: the state key that receives the model's probability of every enum value (a map from value
    /// to probability, summing to 1; unset when the provider reports none); enum outputs only.
    pub scores_key: Option<Located<String>>,
}

/// One entry of an `llm` agent's `tools`: a function the model may call, computed by an expression or a
/// template over its arguments and the state.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// `name`: what the model calls (letters, digits, `_`, `-`).
    pub name: Located<String>,
    /// `description`: what the model is told the tool does (default "").
    pub description: String,
    /// `parameters`: argument name → JSON schema (a type name `string`, `number`, `integer`, `boolean`,
    /// `json` is shorthand for the schema of that type), in declaration order; all are required.
    pub parameters: Vec<(String, serde_json::Value)>,
    /// `value` (an expression; the result is its JSON value) or `template` (the rendered string); the
    /// arguments are variables besides the state keys, and shadow them.
    pub body: ComputeBody,
    /// `effect` (SPEC.md §4): what calling the tool does to the world (default `none`).
    pub effect: agentic_engine::Effect,
    /// `approve` (SPEC.md §4): which of its calls wait for a person's approval (default none).
    pub approve: ApproveDef,
}

/// A named model configuration (`models.<name>`); `llm` agents refer to it by name.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDef {
    /// The model's name.
    pub name: String,
    /// Position of the name.
    pub pos: Pos,
    /// The provider and its settings.
    pub provider: ModelProvider,
    /// `prices` (SPEC.md §3): what its tokens cost.
    pub prices: Option<agentic_engine::budget::Prices>,
    /// `limits` (SPEC.md §3): the rate limits of its endpoint.
    pub limits: agentic_engine::limits::ModelLimits,
}

/// A model provider with its fields (SPEC.md §1, "Model providers").
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelProvider {
    /// `openai`: any OpenAI-compatible server.
    OpenAi {
        /// `base_url` (default: the official API).
        base_url: Option<String>,
        /// `model`.
        model: Option<String>,
        /// `api_key_env`: environment variable holding the API key.
        api_key_env: Option<String>,
        /// `api_key`: the API key as a secret's reference, `${secret:NAME}` (SERVER.md §8), resolved when the
        /// model is built for a run ([`crate::Secrets`]); it takes precedence over `api_key_env`.
        api_key: Option<String>,
        /// `temperature`.
        temperature: Option<f64>,
        /// `max_tokens`.
        max_tokens: Option<u32>,
    },
    /// `local`: a small GGUF model served by llama.cpp.
    Local {
        /// `model_path`.
        model_path: Option<String>,
    },
    /// `scripted`: deterministic canned answers, in order.
    Scripted {
        /// `replies` (chat); non-string entries are kept as their JSON text.
        replies: Vec<String>,
        /// `decisions` (decision model).
        decisions: Vec<Value>,
    },
}

/// A human step's `deadline` (SPEC.md §3).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DeadlineDef {
    /// A duration (`"90s"`, `"2h"`) from the moment the question is first asked, in milliseconds.
    After(u64),
    /// An RFC 3339 time, or an expression over the state giving one (evaluated when first asked).
    At(String),
}

/// A human step's `on_timeout` (SPEC.md §3).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OnTimeoutDef {
    /// `fail` (the default): the step fails.
    Fail,
    /// `{default: <expression>}`: its value becomes the answer.
    Default(Located<String>),
    /// `{escalate: <name>}`: that human agent is asked next, with its own deadline.
    Escalate(Located<String>),
}

/// A `wait` agent's time (SPEC.md §3): exactly one of the two.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum WaitDef {
    /// `for`: a duration from the moment the agent is reached, in milliseconds.
    For(u64),
    /// `until`: an expression over the state giving an RFC 3339 time (or such a time).
    Until(Located<String>),
}

/// The kinds this build can run.
pub const SUPPORTED_KINDS: &[&str] = &[
    "compute",
    "human",
    "wait",
    "sequence",
    "loop",
    "parallel",
    "parallel_mapper",
    "conditional",
    "llm",
    "goap",
    "p2p",
    "blackboard",
    "voting",
    "debate",
    "bdi",
    "supervisor",
    "decision_router",
    "mcp",
    "a2a",
    "registry",
];

/// Kinds of SPEC.md that are recognised but not supported yet by this build.
pub const UNSUPPORTED_KINDS: &[&str] = &[];
