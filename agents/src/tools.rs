//! Tools an LLM agent lets its model call: Rust async functions with JSON-schema arguments, optionally with
//! a compensation that undoes them.
//!
//! - **Typed tools** ([`Tool::new`]): the arguments are a Rust type (`DeserializeOwned + JsonSchema`); its
//!   JSON schema is what the model sees, and the model's arguments are deserialised to it before the function
//!   runs.
//! - **Untyped tools** ([`Tool::from_json`]): a JSON schema and a function of the JSON arguments.
//! - **Tools needing the invocation** ([`Tool::with_call`]): the function also receives a [`ToolCallInfo`]
//!   (run id, agent path, attempt, call id and an idempotency key for deduplicating side effects).
//! - **Compensation** ([`Tool::compensate`]): when a call succeeds, the LLM agent registers the undo (named
//!   `un<tool>` unless [`Tool::compensation_name`] says otherwise) with the invocation, so a composite with
//!   `compensate_on_error` undoes it when something after it fails.
//!
//! A tool failing (its arguments do not deserialise, or the function returns `Err`) does not fail the agent:
//! the model gets `error: <message>` as the call's result and may try again.
//!
//! Tools known only when the agent runs — the tools of an MCP server — come from a [`ToolProvider`]
//! ([`crate::LlmAgentBuilder::tool_provider`]), asked at every invocation (the original's `ToolProvider`).
//!
//! ```
//! use agentic_agents::Tool;
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct CreditArgs {
//!     /// The amount to credit, in cents.
//!     amount: i64,
//! }
//!
//! let credit = Tool::new("credit", "Credit the account", |args: CreditArgs| async move {
//!     Ok(json!({ "credited": args.amount }))
//! })
//! .compensate(|args, _result| async move {
//!     println!("refunding {}", args["amount"]);
//!     Ok(())
//! });
//! assert_eq!(credit.name(), "credit");
//! assert_eq!(credit.spec().parameters["required"], json!(["amount"]));
//! ```

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use agentic_engine::{Effect, ScopeView};

use crate::model::ToolSpec;

type ToolFn = Arc<dyn Fn(ToolCallInfo, Value) -> BoxFuture<'static, Result<Value, ToolFailure>> + Send + Sync>;
type UndoFn = Arc<dyn Fn(Value, Value) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;
type ApproveFn = Arc<dyn Fn(&ApprovalRequest<'_>) -> Result<bool, String> + Send + Sync>;
/// The undo of one successful call, its arguments and result bound.
pub(crate) type BoundUndo = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), String>> + Send>;

/// Why a tool call failed: an error the model reads and may act on (bad arguments, the tool's own error),
/// or one that fails the calling agent (the server behind the tool is gone).
#[derive(Debug, Clone)]
pub(crate) enum ToolFailure {
    /// Sent to the model as the call's result (`error: ..`).
    Model(String),
    /// Fails the agent with this typed cause (only MCP tools do: their server is gone).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    Agent(agentic_engine::Cause),
}

impl ToolFailure {
    /// What went wrong, as the model or a log reads it.
    pub(crate) fn message(&self) -> String {
        match self {
            ToolFailure::Model(e) => e.clone(),
            ToolFailure::Agent(cause) => cause.to_string(),
        }
    }
}

/// A source of tools the LLM agent asks for at every invocation, for tools known only at run time (the
/// tools of an MCP server: [`crate::McpToolProvider`]); the original's `ToolProvider`. The tools of all
/// providers and the agent's own tools must have distinct names (a clash fails the invocation, naming both
/// sources).
pub trait ToolProvider: Send + Sync + 'static {
    /// Names the provider in errors (`MCP server \`calc\``).
    fn source(&self) -> String;

    /// The tools offered now.
    ///
    /// # Errors
    /// The message the agent fails with (the server cannot be reached, say).
    fn tools(&self) -> BoxFuture<'_, Result<Vec<Tool>, String>>;
}

/// What a tool function may want to know about the call it serves (see [`Tool::with_call`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolCallInfo {
    /// The run id (memory id).
    pub run_id: String,
    /// The calling agent's name.
    pub agent: String,
    /// The calling agent's path.
    pub path: String,
    /// The invocation's attempt, 1-based.
    pub attempt: u32,
    /// The id the model gave this call.
    pub call_id: String,
    /// `run id/agent path/attempt/call id`: a key to deduplicate the tool's side effects when the invocation
    /// is executed again (at-least-once execution).
    pub idempotency_key: String,
    /// The scope's state when the model's answer calling the tool arrived (what spec tools' expressions
    /// read besides the arguments).
    pub state: ScopeView,
    /// The calling invocation's inputs (a mapper item's bound value among them): what spec tools'
    /// expressions read before the state.
    pub inputs: serde_json::Map<String, Value>,
    /// The W3C `traceparent` for requests the tool makes: its `execute_tool` span's context (cargo feature
    /// `otel`), else the run's own ([`agentic_engine::RunView::traceparent`]), else `None`.
    pub traceparent: Option<String>,
}

/// A tool call the model made, as an approval rule sees it ([`Tool::approve`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ApprovalRequest<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The arguments the model wrote.
    pub args: &'a Value,
    /// The run's state when the model's answer arrived.
    pub state: &'a ScopeView,
    /// The calling invocation's inputs (a mapper item's bound value among them), which take precedence over
    /// the state of the same names.
    pub inputs: Option<&'a serde_json::Map<String, Value>>,
}

impl<'a> ApprovalRequest<'a> {
    /// The call of `tool` with `args`, made when the run's state was `state` (to ask a rule outside the
    /// agent's loop: a test, a tool provider of one's own).
    pub fn new(tool: &'a str, args: &'a Value, state: &'a ScopeView) -> Self {
        ApprovalRequest { tool, args, state, inputs: None }
    }

    /// With the calling invocation's inputs (what a rule sees before the state).
    pub fn with_inputs(mut self, inputs: &'a serde_json::Map<String, Value>) -> Self {
        self.inputs = Some(inputs);
        self
    }
}

/// A function the model may call. Build with [`Tool::new`], [`Tool::from_json`] or [`Tool::with_call`];
/// give it to [`crate::LlmAgentBuilder::tools`]. Cloning is cheap.
///
/// What calling it does to the world is its [`Effect`] ([`Tool::effect`]: `none` by default); which of its
/// calls wait for a person's approval, its rule ([`Tool::approve`]; none by default) — SPEC.md §4.
#[derive(Clone)]
pub struct Tool {
    spec: ToolSpec,
    run: ToolFn,
    undo: Option<UndoFn>,
    undo_name: Option<String>,
    effect: Effect,
    approve: Option<ApproveFn>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .field("description", &self.spec.description)
            .field("compensated", &self.undo.is_some())
            .finish_non_exhaustive()
    }
}

/// The JSON schema of `A` as a tool's parameters: without `$schema`, and an object schema even for types
/// without fields (providers require one).
fn parameters_of<A: schemars::JsonSchema>() -> Value {
    let mut schema: Value = schemars::schema_for!(A).into();
    if let Value::Object(m) = &mut schema {
        m.remove("$schema");
        if !m.contains_key("type") && !m.contains_key("properties") {
            m.insert("type".into(), Value::String("object".into()));
            m.insert("properties".into(), Value::Object(Default::default()));
        }
    }
    schema
}

fn to_result<R: Serialize>(r: Result<R, String>) -> Result<Value, ToolFailure> {
    r.and_then(|v| serde_json::to_value(v).map_err(|e| format!("the result is not JSON: {e}")))
        .map_err(ToolFailure::Model)
}

impl Tool {
    /// A tool named `name` (letters, digits, `_`, `-`) described to the model by `description`, taking
    /// arguments of type `A` (its JSON schema is the tool's parameter schema) and returning any serialisable
    /// value, or an error message the model will see.
    pub fn new<A, R, F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        R: Serialize + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, String>> + Send + 'static,
    {
        Tool::with_call(name, description, move |_call: ToolCallInfo, args: A| f(args))
    }

    /// Like [`Tool::new`], the function also receiving the [`ToolCallInfo`] of the call (for an idempotency
    /// key, or to log where it was called from).
    pub fn with_call<A, R, F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        R: Serialize + 'static,
        F: Fn(ToolCallInfo, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, String>> + Send + 'static,
    {
        let f = Arc::new(f);
        let run: ToolFn = Arc::new(move |call, args: Value| {
            let parsed = A::deserialize(&args).map_err(|e| format!("invalid arguments: {e}"));
            let f = f.clone();
            Box::pin(async move { to_result(f(call, parsed.map_err(ToolFailure::Model)?).await) })
        });
        Tool {
            spec: ToolSpec::new(name, description, parameters_of::<A>()),
            run,
            undo: None,
            undo_name: None,
            effect: Effect::None,
            approve: None,
        }
    }

    /// An untyped tool: `schema` is the JSON schema of its arguments (an object schema) and `f` receives the
    /// arguments as the model wrote them, once they pass the schema's `required`, `type`, `enum`,
    /// `properties` and `items` (a mismatch is the call's error, which the model reads).
    pub fn from_json<F, Fut>(name: impl Into<String>, description: impl Into<String>, schema: Value, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let f = Arc::new(f);
        Tool::from_json_with_call(name, description, schema, move |_call, args| {
            let f = f.clone();
            async move { f(args).await }
        })
    }

    /// Like [`Tool::from_json`] (the arguments checked against `schema` first), the function also receiving
    /// the [`ToolCallInfo`] of the call (its state snapshot, its idempotency key). This is how the spec's
    /// expression tools are built.
    pub fn from_json_with_call<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
        f: F,
    ) -> Self
    where
        F: Fn(ToolCallInfo, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let checked = schema.clone();
        let f = Arc::new(f);
        let run: ToolFn = Arc::new(move |call, args| match crate::llm::check_schema(&checked, &args, "the call") {
            Ok(()) => {
                let f = f.clone();
                Box::pin(async move { f(call, args).await.map_err(ToolFailure::Model) })
            }
            Err(e) => Box::pin(std::future::ready(Err(ToolFailure::Model(e)))),
        });
        Tool {
            spec: ToolSpec::new(name, description, schema),
            run,
            undo: None,
            undo_name: None,
            effect: Effect::None,
            approve: None,
        }
    }

    /// A tool whose function may also fail the calling agent ([`ToolFailure::Agent`]); the arguments are
    /// checked against `schema` first (a mismatch is the model's error).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn checked<F>(spec: ToolSpec, f: F) -> Self
    where
        F: Fn(ToolCallInfo, Value) -> BoxFuture<'static, Result<Value, ToolFailure>> + Send + Sync + 'static,
    {
        let checked = spec.parameters.clone();
        let run: ToolFn = Arc::new(move |call, args| match crate::llm::check_schema(&checked, &args, "the call") {
            Ok(()) => f(call, args),
            Err(e) => Box::pin(std::future::ready(Err(ToolFailure::Model(e)))),
        });
        Tool { spec, run, undo: None, undo_name: None, effect: Effect::None, approve: None }
    }

    /// Declares how to undo a successful call: `undo(arguments, result)` (the arguments as JSON, the result
    /// the function returned). The LLM agent registers it with the invocation after each successful call, so
    /// a composite with `compensate_on_error` above the agent runs it (in reverse order of the calls, best
    /// effort) when a later step fails or the run is cancelled. Default: no compensation.
    pub fn compensate<F, Fut>(mut self, undo: F) -> Self
    where
        F: Fn(Value, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.undo = Some(Arc::new(move |args, result| Box::pin(undo(args, result))));
        self
    }

    /// Declares what calling the tool does to the world (SPEC.md §4): [`Effect::None`] (the default for
    /// tools built here), [`Effect::Retry`] (the callee deduplicates by [`ToolCallInfo::idempotency_key`]) or
    /// [`Effect::Once`] (at most once: a call a crash cut is in doubt and waits for a person). A call with an
    /// effect is committed as started before it is sent.
    pub fn effect(mut self, effect: Effect) -> Self {
        self.effect = effect;
        self
    }

    /// Every call of the tool waits for a person's approval before it runs (`approve: true` in a spec).
    pub fn approve_always(self) -> Self {
        self.approve_checked(|_| Ok(true))
    }

    /// The calls for which `needs(call)` holds wait for a person's approval before they run: the run
    /// suspends with a pending response of kind `tool_call` (id `tool:<agent path>:<n>`), answered with a
    /// [`agentic_engine::ToolDecision`].
    pub fn approve(self, needs: impl Fn(&ApprovalRequest<'_>) -> bool + Send + Sync + 'static) -> Self {
        self.approve_checked(move |call| Ok(needs(call)))
    }

    /// As [`Tool::approve`] with a rule that may fail (an expression over the arguments and the state): its
    /// error fails the invocation, naming the tool.
    pub fn approve_checked(
        mut self,
        needs: impl Fn(&ApprovalRequest<'_>) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.approve = Some(Arc::new(needs));
        self
    }

    /// What calling the tool does to the world ([`Tool::effect`]).
    pub fn side_effect(&self) -> Effect {
        self.effect
    }

    /// Whether `call` of this tool waits for approval ([`Tool::approve`]).
    ///
    /// # Errors
    /// The approval rule's error (an expression that cannot be evaluated).
    pub fn needs_approval(&self, call: &ApprovalRequest<'_>) -> Result<bool, String> {
        match &self.approve {
            Some(needs) => needs(call),
            None => Ok(false),
        }
    }

    /// Whether the tool has an approval rule.
    pub fn has_approval_rule(&self) -> bool {
        self.approve.is_some()
    }

    /// Names the compensation (default `un<tool name>`), as reports and logs show it.
    pub fn compensation_name(mut self, name: impl Into<String>) -> Self {
        self.undo_name = Some(name.into());
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the model is told about the tool: name, description and the JSON schema of the arguments.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Whether the tool declares a compensation.
    pub fn is_compensated(&self) -> bool {
        self.undo.is_some()
    }

    /// Runs the tool with `arguments` (JSON as the model wrote it).
    ///
    /// # Errors
    /// The message the model gets: the arguments do not deserialise, or the function failed (or, for a tool
    /// of a [`ToolProvider`], the message the calling agent fails with).
    pub async fn call(&self, call: ToolCallInfo, arguments: Value) -> Result<Value, String> {
        self.call_checked(call, arguments).await.map_err(|e| e.message())
    }

    /// Runs the tool, telling the model's errors from the agent's.
    pub(crate) async fn call_checked(&self, call: ToolCallInfo, arguments: Value) -> Result<Value, ToolFailure> {
        (self.run)(call, arguments).await
    }

    /// The compensation's name and the undo of one successful call, ready for
    /// [`agentic_engine::RunView::add_compensation`]; `None` when the tool declares none.
    pub(crate) fn undo_for(&self, arguments: Value, result: Value) -> Option<(String, BoundUndo)> {
        let undo = self.undo.clone()?;
        let name = self.undo_name.clone().unwrap_or_else(|| format!("un{}", self.spec.name));
        Some((name, Box::new(move || undo(arguments, result))))
    }
}

/// The text sent to the model as a call's result: strings as they are, other JSON as its text, errors as
/// `error: <message>`.
pub(crate) fn result_text(result: &Result<Value, String>) -> String {
    match result {
        Ok(Value::String(s)) => s.clone(),
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info() -> ToolCallInfo {
        ToolCallInfo {
            run_id: "r".into(),
            agent: "a".into(),
            path: "root".into(),
            attempt: 1,
            call_id: "c1".into(),
            idempotency_key: "r/root/1/c1".into(),
            state: ScopeView::default(),
            inputs: serde_json::Map::new(),
            traceparent: None,
        }
    }

    #[tokio::test]
    async fn json_tools_check_the_arguments_against_their_schema_before_running() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let double = Tool::from_json("double", "Doubles n", schema, |args: Value| async move {
            Ok(json!(args["n"].as_i64().unwrap_or_default() * 2))
        });
        assert_eq!(double.call(info(), json!({"n": 21})).await, Ok(json!(42)));
        assert_eq!(double.call(info(), json!({})).await, Err("the call lacks the required field `n`".to_string()));
        assert_eq!(
            double.call(info(), json!({"n": "x"})).await,
            Err("field `n` must be of type integer, found \"x\"".to_string())
        );
    }
}
