//! # agentic-spec
//!
//! The YAML/JSON workflow spec of `agentic` (SPEC.md §1): parse → validate → build with the same builders
//! Rust users call. One engine, two front doors.
//!
//! ```
//! use agentic_spec::Spec;
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = Spec::parse(
//!     r#"
//! version: 1
//! root: greet
//! agents:
//!   greet: { kind: compute, template: "Hello, {{ who }}!", output_key: greeting }
//! "#,
//!     "hello.yaml",
//! )?;
//! assert_eq!(spec.name(), "hello");
//! let built = spec.build()?;
//! let outcome = built.root.invoke().input("who", "world").await?;
//! assert_eq!(outcome.output(), Some(&serde_json::json!("Hello, world!")));
//! # Ok(()) }
//! ```
//!
//! Every problem is reported with the file, line and column (and the agent and field where it applies), and
//! all problems are collected, not just the first: see [`SpecErrors`].
//!
//! Kinds supported by this build: `compute`, `human`, `llm`, `sequence`, `loop`, `parallel`, `parallel_mapper`,
//! `conditional`, `goap`, `p2p`, `blackboard`, `voting`, `debate`, `bdi`, `supervisor`, `decision_router`, `mcp`
//! (one tool of an MCP server; the server is started or reached at the agent's first call, not when the spec
//! is built), `a2a` (a remote A2A agent; its card is read at the agent's first call), `registry` (an agent the
//! Rust program registered by name in an [`agentic_engine::AgentRegistry`], given to [`Spec::build_with`]
//! through [`BuildContext::registry`]: a local agent, a whole workflow, or a remote A2A or MCP agent). The
//! `models` section builds chat models ([`model_from_def`]: `openai`, `scripted`; `local` is reported as not
//! built in) when an `llm` agent uses them; [`Spec::build_with_models`] substitutes models (tests, servers
//! chosen at run time). `llm` agents' `tools` are expressions or templates over the state and the model's
//! arguments (pure, so they declare no compensation; `compensate_on_error` undoes the compensated tool calls of
//! agents built in Rust).
//!
//! ## Rules checked
//!
//! - YAML syntax, located; a tab in the indentation, a line indented out of line with its mapping or list and a
//!   key without `: ` also get a [`SpecError::hint`].
//! - The top-level `evals:` list (SPEC.md §6) is a list of mappings, kept as written ([`Spec::evals`]); the
//!   crate `agentic-eval` checks what its entries say.
//! - Unknown fields (top level, agents per kind, `error_handler`, branches, models per provider), with a
//!   "did you mean" suggestion; a misspelt required field is reported once (not also as missing).
//! - Unknown kinds (listing the valid kinds); known kinds this build does not support.
//! - Duplicate mapping keys anywhere (agent names, fields, model names), naming the first occurrence.
//! - `params` (the root's inputs): each a JSON-schema type name (`string`, `number`, `integer`, `boolean`,
//!   `array`, `object`) or `{type, default, description}` with a `default` of that type. A run's inputs are
//!   checked against them with [`Spec::check_inputs`] and [`Spec::complete_inputs`] (`agentic run` does).
//! - `version` is the integer 1; `root` and `agents` are present; `root` and every reference name a
//!   defined agent.
//! - The agents form a tree: an agent has at most one parent, never contains itself or an ancestor (a
//!   cycle), and the root is nobody's sub-agent. Agents unreachable from the root are valid (see
//!   [`Spec::unreachable_agents`]) and never built.
//! - Every expression (`value`, `exit_when`, `output`, branch `when`, `error_handler.when`,
//!   `error_handler.set.KEY`, `error_handler.fallback`) and template (`template`) compiles (minijinja).
//! - `error_handler.set` is a mapping of state keys to expressions (strings), and needs `retry` ≥ 1 (its writes
//!   are made before a retry, so without retries they could never be made).
//! - A `registry` agent takes only `name` (the registered agent has its own fields); the name is looked up when
//!   the spec is built ([`Spec::build_with`]), and an unknown one is reported with the agent's path and the
//!   registered names.
//! - Field types: strings, booleans (`true`/`false` only: YAML 1.2 core, so `yes`, `on`, `y` are strings),
//!   integers in range (`max_iterations`, `max_concurrency`, `timeout_ms` ≥ 1; `retry`, `backoff_ms` ≥ 0).
//!
//! ## Defaults
//!
//! `name`: the file stem. `inputs`: the variables the agent's expressions and templates use. `loop`:
//! `max_iterations` 10, `test_exit_at_loop_end` false, no `exit_when` = run every iteration.
//! `parallel`/`parallel_mapper`: unbounded concurrency. `parallel_mapper.item_key`: the mapped agent's first
//! input. `error_handler`: `retry` 0, `backoff_ms` 100 (doubling per retry), no `set` (retry on the state as it
//! is), no `fallback` (fail after the retries).
//!
//! ## Error handlers that repair
//!
//! `error_handler: {when: EXPR, set: {KEY: EXPRESSION, ...}, retry: N, backoff_ms: M, fallback: EXPR}` builds
//! [`agentic_engine::RetryPolicy`] with a [`repair`](agentic_engine::RetryPolicy::repair) step: when a
//! sub-agent fails and retries remain, every `set` expression is evaluated over the state at the failure plus
//! the variable `error` = `{kind, agent, path, message, cause, status, transient}` (`kind` is
//! [`agentic_engine::AgentError::kind`], e.g. `missing_argument`; `message` the error's text; `cause`, `status`
//! and `transient` come from [`agentic_engine::AgentError::cause`] and its transience), the keys are written (a `null` value removes its key), and
//! the failed agent runs again. The expressions see the state before the writes, not each other's values. An
//! expression that fails to evaluate fails the composite with the original error (the `fallback` is not used).
//! A permanent failure (a model's 401) is not retried; `when` (same variables) limits the handler to the
//! failures it holds for, any other fails the composite at once ([`agentic_engine::RetryPolicy::when`]).
//! The original's canonical recovery, a missing argument written and the agent retried:
//!
//! ```
//! use agentic_spec::Spec;
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = Spec::parse(
//!     r#"
//! version: 1
//! root: main
//! agents:
//!   main:
//!     kind: sequence
//!     agents: [double]
//!     error_handler: { set: { x: "5" }, retry: 1, backoff_ms: 0 }
//!     output_key: y
//!   double: { kind: compute, value: "x * 2", output_key: y }
//! "#,
//!     "repair.yaml",
//! )?;
//! let outcome = spec.build()?.root.invoke().await?;
//! assert_eq!(outcome.output(), Some(&serde_json::json!(10)));
//! # Ok(()) }
//! ```
//!
//! Pattern kinds (see `agentic_planners`): `p2p.max_invocations` 10, no `exit_when` (runs to quiescence; the
//! condition also sees `invocations`); `blackboard.goal` = the `output_key` is defined, no `prefer` rules
//! (declaration order), `max_invocations` 50; `voting.strategy` `majority`; `debate.max_rounds` 3,
//! `convergence` `unanimous` (debaters and judge read `debateContext`); `bdi` desires: `priority` 0,
//! `achievable` always, `satisfied` required, `max_invocations` 50. `prefer[].agent` must be one of the
//! blackboard's `agents`; `debaters`, `judge` and desires' `agents` are sub-agent references.
//! `supervisor`: `model` `default`, `response_strategy` `last`, `context_strategy` `chat_memory`, no
//! `supervisor_context`, `max_invocations` 10; the request is the state key `request`.
//! `decision_router`: `model` `default` (a `scripted` entry with `decisions` is a decision model; any other
//! entry's chat model is used as one), no `threshold` (one choice); `threshold` must be strictly between 0
//! and 1; the request is the state key `request`.
//!
//! Public surface: the modules are private and every public item is re-exported here, at one path
//! (`agentic_spec::SpecError`, `agentic_spec::ModelDef`, ...).

mod build;
pub use build::CHOICE_USAGE;
mod error;
mod evals;
mod inputs;
mod kind;
mod model;
mod models;
mod node;
mod params;
mod parse;
mod pinned;
mod secrets;
mod validate;

use std::path::Path;

use agentic_engine::AgentRef;

pub use error::{SpecError, SpecErrors};
pub use evals::{EvalEntry, EvalField, read_evals};
pub use inputs::{InputOrigin, RootInput};
pub use kind::{
    Calls, CompositeParts, FieldError, FieldType, KindArgs, KindError, KindField, KindRef, ModelUse, PlannerKind,
    register_kind, registered_kind, registered_kinds,
};
pub use model::{
    A2aDef, AgentDef, AgentKind, ApproveDef, CompositeCommon, ComputeBody, EntryDef, ErrorHandlerDef, FieldValue,
    LlmDef, Located, McpDef, McpServerDef, McpServerEntry, McpToolsDef, ModelDef, ModelField, ModelProvider,
    PlannerDef, SUPPORTED_KINDS, UNSUPPORTED_KINDS,
};
pub use model::{DeadlineDef, OnTimeoutDef, WaitDef};
pub use models::{LOCAL_NOT_BUILT, decision_model_from_def, model_from_def, prepare_models, replay_stand_in};
pub use node::Pos;
pub use params::{InputError, ParamDef, ParamType};
pub use pinned::{RunSpec, RunSpecError, check_structure, read_spec_file, run_spec, upgrade_run};
pub use secrets::{
    MissingSecret, SECRET_ENV_PREFIX, Secrets, SecretsFileError, malformed_secret_reference, secret_references,
};

use error::Sink;

/// A parsed and validated spec. Build it with [`Spec::build`].
#[derive(Debug, Clone)]
pub struct Spec {
    file: String,
    name: String,
    root: Located<String>,
    params: Vec<ParamDef>,
    models: Vec<ModelDef>,
    mcp_servers: Vec<McpServerEntry>,
    agents: Vec<AgentDef>,
    evals: Vec<EvalEntry>,
}

impl Spec {
    /// Reads, parses and validates the spec file at `path` (YAML or JSON; `-` is standard input, named
    /// `stdin`). Errors name the path as given.
    ///
    /// # Errors
    /// The file cannot be read, or every problem found in it.
    pub fn from_path(path: &Path) -> Result<Spec, SpecErrors> {
        pinned::read_spec_file(path).map(|(_, spec)| spec)
    }

    /// Parses and validates `text` (YAML or JSON). `file_name` is used in error messages, and its stem is
    /// the spec's default `name`.
    ///
    /// # Errors
    /// Every problem found: syntax, unknown fields and kinds, wrong types, duplicate names, unknown
    /// references, agents with two parents, cycles, invalid expressions and templates.
    pub fn parse(text: &str, file_name: &str) -> Result<Spec, SpecErrors> {
        let mut sink = Sink::new(file_name);
        if file_name.ends_with(".json") {
            // JSON specs are read by the YAML parser (JSON is YAML flow syntax), which also accepts what JSON
            // forbids (trailing commas, comments, unquoted keys): check strict JSON first.
            if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                let pos = node::Pos { line: e.line() as u64, column: e.column() as u64 };
                let message = e.to_string();
                let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m).to_string();
                sink.push(pos, None, None, format!("invalid JSON: {message}"));
                return Err(sink.into_errors());
            }
        }
        let tree = match node::read_tree(text) {
            Ok(t) => t,
            Err((pos, message)) => {
                let hint = node::syntax_hint(&message, pos);
                sink.push_with_hint(pos, message, hint);
                return Err(sink.into_errors());
            }
        };
        let parsed = parse::parse_tree(&tree, &mut sink);
        validate::check_graph(&parsed.agents, &parsed.names, parsed.root.as_ref(), &mut sink);
        validate::check_agent_of(&parsed.agents, &parsed.names, &mut sink);
        validate::check_llm(&parsed.agents, &parsed.models, &parsed.names, &mut sink);
        validate::check_kind_models(&parsed.agents, &parsed.models, &mut sink);
        validate::check_mcp_servers(&parsed.agents, &parsed.mcp_server_names, &mut sink);
        for agent in &parsed.agents {
            validate::check_expressions(agent, &mut sink);
        }
        match (parsed.root, parsed.version) {
            (Some(root), Some(_)) if sink.is_empty() => Ok(Spec {
                name: parsed.name.unwrap_or_else(|| file_stem(sink.file())),
                file: sink.file().to_string(),
                root,
                params: parsed.params,
                models: parsed.models,
                mcp_servers: parsed.mcp_servers,
                agents: parsed.agents,
                evals: parsed.evals,
            }),
            _ => {
                if sink.is_empty() {
                    // Unreachable in practice: a missing root or version is always reported.
                    sink.push(parsed.pos, None, None, "invalid spec");
                }
                Err(sink.into_errors())
            }
        }
    }

    /// The spec's name (`name`, default the file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file name given to [`Spec::parse`] (or the path given to [`Spec::from_path`]).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The name of the root agent.
    pub fn root(&self) -> &str {
        &self.root.value
    }

    /// The root's declared inputs (`params`), in file order; empty when the spec declares none.
    pub fn params(&self) -> &[ParamDef] {
        &self.params
    }

    /// Checks a run's inputs against `params`: each declared input is of its type, and no input is undeclared
    /// (when `params` is declared; without it, any input goes). Inputs the run lacks are not errors here: see
    /// [`Spec::complete_inputs`].
    ///
    /// # Errors
    /// Every input that does not fit, in the order of `inputs`: `input `temperature`: expected a number, got
    /// "hot"`, `input `citty`: not a parameter of this spec (did you mean `city`?); its params are ..`.
    pub fn check_inputs(&self, inputs: &serde_json::Map<String, serde_json::Value>) -> Result<(), Vec<InputError>> {
        let errors = params::check(&self.params, inputs);
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// Adds to `inputs` the defaults of the declared inputs it lacks.
    ///
    /// # Errors
    /// Every declared input without a default that `inputs` lacks, in declaration order: `input `city`:
    /// missing (a string, declared in `params` without a default)` (the defaults are added all the same).
    pub fn complete_inputs(
        &self,
        inputs: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), Vec<InputError>> {
        let errors = params::complete(&self.params, inputs);
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// Every agent definition, in file order.
    pub fn agents(&self) -> &[AgentDef] {
        &self.agents
    }

    /// The agent definition named `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Every model definition, in file order.
    pub fn models(&self) -> &[ModelDef] {
        &self.models
    }

    /// The top-level `evals:` list (SPEC.md §6: the evaluators `agentic eval` applies), each entry as
    /// written; empty without it. The crate `agentic-eval` reads them into evaluators and checks them.
    pub fn evals(&self) -> &[EvalEntry] {
        &self.evals
    }

    /// Every MCP server declared in `mcp_servers`, in file order.
    pub fn mcp_servers(&self) -> &[McpServerEntry] {
        &self.mcp_servers
    }

    /// Names of the agents defined but not reachable from the root (they are validated, never built).
    pub fn unreachable_agents(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = vec![self.root.value.as_str()];
        let mut stack = vec![self.root.value.as_str()];
        while let Some(name) = stack.pop() {
            if let Some(def) = self.agent(name) {
                // A human step's escalation target is reached through its timeout.
                let escalation = match &def.kind {
                    AgentKind::Human { on_timeout: Some(t), .. } => match &t.value {
                        OnTimeoutDef::Escalate(name) => Some(name),
                        _ => None,
                    },
                    _ => None,
                };
                for r in def.kind.references().into_iter().chain(escalation) {
                    if !seen.contains(&r.value.as_str()) {
                        seen.push(&r.value);
                        stack.push(&r.value);
                    }
                }
            }
        }
        self.agents.iter().map(|a| a.name.as_str()).filter(|n| !seen.contains(n)).collect()
    }

    /// Builds the agent tree under the root with the Rust builders.
    ///
    /// # Errors
    /// Problems only the builders detect (e.g. conflicting declared types, a mapped agent without inputs and
    /// no `item_key`), located at the agent.
    pub fn build(&self) -> Result<BuiltSpec, SpecErrors> {
        self.build_with(&BuildContext::new())
    }

    /// Builds like [`Spec::build`], using `models` instead of the spec's entries of the same names (the
    /// other entries are built with [`model_from_def`]). A substituted name must still be defined in the
    /// spec's `models` section (that is what `llm` agents are checked against). A decision router whose model
    /// is substituted uses the substitute as a chat model ([`agentic_agents::decision::ChatDecisionModel`]); one whose
    /// model is a `scripted` entry with `decisions` (not substituted) uses those decisions.
    ///
    /// # Errors
    /// As [`Spec::build`]; also a model an `llm` agent uses that cannot be built (e.g. `provider: local` in
    /// a binary without it), located at the agent's `model` field.
    pub fn build_with_models(
        &self,
        models: impl IntoIterator<Item = (String, agentic_agents::model::ChatModelRef)>,
    ) -> Result<BuiltSpec, SpecErrors> {
        self.build_with(&BuildContext::new().models(models))
    }

    /// Builds like [`Spec::build`], with what the Rust program supplies: chat models substituted for the
    /// spec's entries of the same names (as [`Spec::build_with_models`]) and the agents registry that
    /// `kind: registry` agents are looked up in.
    ///
    /// ```
    /// use agentic_engine::{AgentRegistry, SpecBuilder};
    /// use agentic_spec::{BuildContext, Spec};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let registry = AgentRegistry::new();
    /// registry.register(agentic_agents::Compute::template("shout", "{{ text | upper }}")?.output_key("loud").build())?;
    /// let spec = Spec::parse(
    ///     r#"
    /// version: 1
    /// root: main
    /// agents:
    ///   main: { kind: sequence, agents: [greet, loud] }
    ///   greet: { kind: compute, template: "hello {{ who }}", output_key: text }
    ///   loud: { kind: registry, name: shout }
    /// "#,
    ///     "greet.yaml",
    /// )?;
    /// let built = spec.build_with(&BuildContext::new().registry(registry))?;
    /// let outcome = built.root.invoke().input("who", "Ada").await?;
    /// assert_eq!(outcome.state().get("loud"), Some(&serde_json::json!("HELLO ADA")));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Spec::build_with_models`]; also a `registry` agent whose `name` is not registered (naming the
    /// spec agent, its path in the tree and the registered names), or any `registry` agent when the context
    /// has no registry, located at its `name` field.
    pub fn build_with(&self, context: &BuildContext) -> Result<BuiltSpec, SpecErrors> {
        let mut sink = Sink::new(self.file.clone());
        let models: Vec<(String, agentic_agents::model::ChatModelRef)> = context.models.clone();
        let substituted: Vec<String> = models.iter().map(|(n, _)| n.clone()).collect();
        let mut chat_models: std::collections::HashMap<String, Result<agentic_agents::model::ChatModelRef, String>> =
            self.models.iter().map(|d| (d.name.clone(), model_from_def(d).map_err(|e| e.to_string()))).collect();
        chat_models.extend(models.into_iter().map(|(name, m)| (name, Ok(m))));
        // Usage, step records, reports and spans call each model by its entry's name.
        for (name, model) in chat_models.iter_mut() {
            if let Ok(m) = model
                && m.info().name.as_deref() != Some(name.as_str())
            {
                *m = m.clone().named(name.clone());
            }
        }
        // A substituted model replaces the entry for decisions too (it is then a chat model used as one).
        let decision_models = self
            .models
            .iter()
            .filter(|d| !substituted.contains(&d.name))
            .filter_map(|d| decision_model_from_def(d).map(|m| (d.name.clone(), m)))
            .collect();
        let root = build::Builder::new(&self.agents, &mut sink)
            .with_models(chat_models)
            .with_decision_models(decision_models)
            .with_mcp_servers(&self.mcp_servers)
            .with_registry(context.registry.clone(), self.agent_paths())
            .without_secrets(context.stand_ins)
            .build(&self.root, None);
        match root {
            Ok(root) if sink.is_empty() => {
                let inputs = if self.params.is_empty() {
                    inputs::infer(&root.topology())
                } else {
                    RootInput::of_params(&self.params)
                };
                Ok(BuiltSpec { name: self.name.clone(), root, models: self.models.clone(), inputs })
            }
            _ => {
                if sink.is_empty() {
                    sink.push(self.root.pos, None, Some("root"), "the root agent could not be built");
                }
                Err(sink.into_errors())
            }
        }
    }
}

impl Spec {
    /// The topology of the system the spec describes (what reports draw and runs are fingerprinted by), built
    /// without any model provider: each `models` entry is replaced by a stand-in that is never called, so a
    /// `provider: local` spec has its topology in a build without the cargo feature `local`, and an `openai`
    /// one without its server or key. A model is not part of a topology: the result, and its fingerprint, are
    /// those of [`Spec::build`] whenever that succeeds.
    ///
    /// # Errors
    /// Every located error [`Spec::build`] reports, but those of the models' providers.
    pub fn topology(&self) -> Result<agentic_engine::TopologyNode, SpecErrors> {
        self.build_with_stand_ins().map(|built| built.root.topology())
    }

    /// The spec built with a stand-in, never called, for every `models` entry, and its secrets' references
    /// left unresolved: its structure and inputs without the models' providers or the secrets (a client that
    /// hands the spec to a server, which builds it with its own models and secrets). Not for running: a model
    /// call of the stand-ins fails.
    ///
    /// # Errors
    /// Every located error [`Spec::build`] reports, but those of the models' providers.
    pub fn build_with_stand_ins(&self) -> Result<BuiltSpec, SpecErrors> {
        // Each stand-in reports the model name its provider's model would ([`replay_stand_in`]): a decision
        // router's topology names its chat model by it.
        let stand_ins = self.models.iter().map(|d| (d.name.clone(), replay_stand_in(d)));
        let mut context = BuildContext::new().models(stand_ins);
        context.stand_ins = true;
        self.build_with(&context)
    }

    /// Builds the spec for a replay (SPEC.md §5): as [`Spec::build`], but a model this process cannot build (a
    /// `provider: local` entry in a build without the provider) is a [`replay_stand_in`] reporting the name
    /// the provider's model would, so a recording made with the real model answers the run.
    ///
    /// # Errors
    /// As [`Spec::build`], but for the models' providers.
    pub fn build_for_replay(&self) -> Result<BuiltSpec, SpecErrors> {
        if let Ok(built) = self.build() {
            return Ok(built);
        }
        let models = self.models.iter().map(|d| {
            let model = model_from_def(d).unwrap_or_else(|_| replay_stand_in(d));
            (d.name.clone(), model)
        });
        self.build_with(&BuildContext::new().models(models))
    }

    /// The path each agent reachable from the root will have in the built tree (`root`, `root/1/0`): a
    /// composite's sub-agents are numbered in declaration order ([`AgentKind::references`]).
    fn agent_paths(&self) -> std::collections::HashMap<String, String> {
        let mut paths = std::collections::HashMap::new();
        let mut stack = vec![(self.root.value.as_str(), "root".to_string())];
        while let Some((name, path)) = stack.pop() {
            if paths.contains_key(name) {
                continue;
            }
            if let Some(def) = self.agent(name) {
                for (i, r) in def.kind.references().into_iter().enumerate() {
                    stack.push((r.value.as_str(), format!("{path}/{i}")));
                }
            }
            paths.insert(name.to_string(), path);
        }
        paths
    }
}

/// What a Rust program supplies when it builds a spec ([`Spec::build_with`]) besides the spec's text: chat
/// models standing in for the spec's `models` entries of the same names, and the agents registry that
/// `kind: registry` agents are looked up in. Defaults: no substituted model, no registry (a `registry`
/// agent is then a build error).
#[derive(Clone, Default)]
pub struct BuildContext {
    models: Vec<(String, agentic_agents::model::ChatModelRef)>,
    registry: Option<agentic_engine::AgentRegistry>,
    /// A build that runs nothing ([`Spec::build_with_stand_ins`]): secrets' references stay unresolved.
    stand_ins: bool,
}

impl std::fmt::Debug for BuildContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let models: Vec<&str> = self.models.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("BuildContext").field("models", &models).field("registry", &self.registry).finish()
    }
}

impl BuildContext {
    /// An empty context: the spec is built from its own text only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `model` for the spec's model entry `name` (which the spec must still define; see
    /// [`Spec::build_with_models`]).
    pub fn model(mut self, name: impl Into<String>, model: impl Into<agentic_agents::model::ChatModelRef>) -> Self {
        self.models.push((name.into(), model.into()));
        self
    }

    /// Uses each `(name, model)` for the spec's model entry `name`.
    pub fn models(mut self, models: impl IntoIterator<Item = (String, agentic_agents::model::ChatModelRef)>) -> Self {
        self.models.extend(models);
        self
    }

    /// Looks `kind: registry` agents up in `registry` (shared: agents registered later, before the build, are
    /// seen too).
    pub fn registry(mut self, registry: agentic_engine::AgentRegistry) -> Self {
        self.registry = Some(registry);
        self
    }
}

/// The topology of the system a stored run was made by, rebuilt from the spec it executes ([`run_spec`]: its
/// archived text, else its file) without any model provider ([`Spec::topology`]): what `agentic report` and
/// the server's report draw, in any binary, whether or not it could run the spec.
///
/// # Errors
/// A sentence saying why there is no topology: the run records no spec, the spec no longer builds, or it
/// changed structure since the run (its fingerprint differs).
pub async fn run_topology(
    store: &agentic_engine::StoreRef,
    run: &agentic_engine::RunRecord,
) -> Result<agentic_engine::TopologyNode, String> {
    let loaded = run_spec(store, run).await.map_err(|e| e.to_string())?;
    let topology = loaded.topology(&run.run_id).map_err(|e| e.to_string())?;
    if topology.fingerprint() != run.fingerprint {
        return Err(format!("the run's {} changed structure since the run", loaded.origin));
    }
    Ok(topology)
}

/// The model and tool calls of stored run `run` as a recording holds them (SPEC.md §5: `agentic calls`,
/// `--replay-run`, a fork's `reuse_calls`), rebuilt from its journal ([`agentic_engine::recorded_calls`]); an
/// agent the journal does not name (an invocation cut before it ended) is named from the run's spec.
///
/// # Errors
/// The store's, reading the run's records.
pub async fn run_calls(
    store: &agentic_engine::StoreRef,
    run: &agentic_engine::RunRecord,
) -> Result<Vec<agentic_engine::RecordedCall>, agentic_engine::StoreError> {
    let records = store.records_dyn(&run.run_id).await?;
    let mut names = agentic_engine::journal_agent_names(&records, &run.pending);
    if records.iter().any(|r| r.holds_calls() && !names.contains_key(&r.agent_path))
        && let Ok(root) = run_topology(store, run).await
    {
        let mut stack = vec![&root];
        while let Some(node) = stack.pop() {
            names.entry(node.path.clone()).or_insert_with(|| node.spec.name.clone());
            stack.extend(node.children.iter());
        }
    }
    Ok(agentic_engine::recorded_calls(&records, &names))
}

/// A built spec: the root agent to invoke, the spec's name and its models.
#[derive(Debug, Clone)]
pub struct BuiltSpec {
    /// The spec's name.
    pub name: String,
    /// The root agent, ready to `invoke()`.
    pub root: AgentRef,
    /// The `models` section as parsed.
    pub models: Vec<ModelDef>,
    /// The root's inputs: its `params` in declaration order, else those inferred from what its agents read
    /// that no agent before them writes, in the order first read ([`RootInput::required`] says which a run
    /// must be given).
    pub inputs: Vec<RootInput>,
}

impl BuiltSpec {
    /// The required [`BuiltSpec::inputs`] that `inputs` lacks: what a new run must not start without.
    ///
    /// # Errors
    /// One per missing input, in the order of [`BuiltSpec::inputs`]: `input `name`: missing (read by agent
    /// `compose`)`, `input `city`: missing (a string, declared in `params` without a default)`, with
    /// [`InputError::missing`] saying why the spec needs it.
    pub fn missing_inputs(&self, inputs: &serde_json::Map<String, serde_json::Value>) -> Vec<InputError> {
        inputs::missing(&self.inputs, inputs)
    }
}

fn file_stem(file: &str) -> String {
    Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| file.to_string())
}
