//! MCP (Model Context Protocol) on the official Rust SDK, `rmcp`: a client of one MCP server over stdio (a
//! child process) or streamable HTTP ([`McpClient`]), and [`McpAgent`], one of the server's tools as a
//! non-AI agent (the original's `McpAgent` of `langchain4j-agentic-mcp`).
//!
//! The agent's inputs are the tool's arguments, named as in its input schema: the required properties are
//! required inputs, a property with a schema `default` is an input with that default, and the other optional
//! properties are passed when the state holds them. The arguments are checked against the schema before the
//! call (a mismatch fails the agent, naming it). The result is the tool's structured content when the tool
//! declares an output schema — unwrapped when the server wrapped a plain value as `{"result": value}` (MCP
//! requires an object, so the SDKs wrap) — else its text content. A tool error (`isError`) fails the agent
//! with the tool's message; a server that cannot be reached or dies fails it naming the server.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use agentic_engine::{
    Agent, AgentError, AgentRef, AgentSpec, CallEntry, Cause, CauseOrigin, Effect, InputSpec, InvocationContext,
    SpecBuilder, Stop, ToolCallEntry, ToolCallStatus, Transience,
};
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestParamsMeta};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Map, Value};
use tokio::sync::{Mutex, OnceCell};

use crate::mcp_trace::TracingHttpClient;

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpServer {
    /// A child process speaking MCP on its stdin/stdout: the program and its arguments. It is started on the
    /// first use and stopped when the last [`McpClient`] holding it is dropped.
    Stdio {
        /// Program and arguments (`["python", "server.py"]`).
        command: Vec<String>,
    },
    /// A server speaking streamable HTTP at this URL (`http://127.0.0.1:8000/mcp`).
    Http {
        /// The endpoint's URL.
        url: String,
    },
}

/// What a connection to an MCP server carries besides its address: environment variables for a stdio
/// server's process and HTTP headers for every request to a streamable HTTP server — credentials, usually
/// (SERVER.md §8: a spec gives them as secrets' references, resolved before they get here). `Debug` shows
/// the names, never a value.
#[derive(Clone, Default)]
pub struct McpCredentials {
    /// `(name, value)` set in a stdio server's environment (on top of this process's).
    pub env: Vec<(String, String)>,
    /// `(name, value)` sent as HTTP headers (`Authorization`, `X-Api-Key`, ...).
    pub headers: Vec<(String, String)>,
    /// The secrets among the values, as the client's errors show them instead (a server may repeat a header
    /// in its error).
    pub redactions: crate::Redactions,
}

impl std::fmt::Debug for McpCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| pairs.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        f.debug_struct("McpCredentials")
            .field("env", &names(&self.env))
            .field("headers", &names(&self.headers))
            .finish()
    }
}

impl McpCredentials {
    /// The headers as the HTTP transport sends them.
    ///
    /// # Errors
    /// The first header whose name or value HTTP cannot carry, named (never its value).
    fn header_map(&self) -> Result<HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, String> {
        Ok(crate::redact::sensitive_headers(&self.headers)?.into_iter().collect())
    }
}

impl std::fmt::Display for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpServer::Stdio { command } => write!(f, "`{}`", command.join(" ")),
            McpServer::Http { url } => f.write_str(url),
        }
    }
}

/// What an MCP operation failed on. Every variant names the server (its name and how it is reached).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpError {
    /// The server could not be started or reached, or its initialisation failed.
    #[error("MCP server `{server}` ({at}): cannot connect: {message}")]
    Connect {
        /// The server's name.
        server: String,
        /// Its command or URL.
        at: String,
        /// Why.
        message: String,
    },
    /// A request failed after the connection was made: the server died, closed the connection, or answered
    /// with a protocol error.
    #[error("MCP server `{server}` ({at}): {what} failed: {message}")]
    Request {
        /// The server's name.
        server: String,
        /// Its command or URL.
        at: String,
        /// The request (`tools/list`, `tools/call generate_story`).
        what: String,
        /// Why.
        message: String,
    },
    /// The server offers no tool of that name.
    #[error("MCP server `{server}` has no tool `{tool}`; its tools are: {available}")]
    UnknownTool {
        /// The server's name.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The tools it offers, comma-separated.
        available: String,
    },
    /// No tool name was given and the server offers more than one (or none).
    #[error("MCP server `{server}` offers {count} tools ({available}): name the tool to use")]
    ToolNotNamed {
        /// The server's name.
        server: String,
        /// How many tools it offers.
        count: usize,
        /// The tools it offers, comma-separated.
        available: String,
    },
    /// The tool ran and reported an error (`isError`).
    #[error("MCP tool `{tool}` of server `{server}` failed: {message}")]
    Tool {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// The tool's error text.
        message: String,
    },
}

/// An MCP failure as the typed cause of a failed invocation: origin `tool`. A server that cannot be reached
/// or a request that broke off is transient; an unknown or unnamed tool is permanent (the same call fails the
/// same way); a tool that reported an error is unknown (only the tool knows).
impl From<McpError> for Cause {
    fn from(e: McpError) -> Self {
        let transience = match &e {
            McpError::Connect { .. } | McpError::Request { .. } => Transience::Transient { retry_after: None },
            McpError::UnknownTool { .. } | McpError::ToolNotNamed { .. } => Transience::Permanent,
            _ => Transience::Unknown,
        };
        Cause::new(CauseOrigin::Tool, transience, e)
    }
}

/// One tool of an MCP server, as `tools/list` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The tool's name.
    pub name: String,
    /// What it does (empty when the server gives no description).
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub input_schema: Value,
    /// The JSON schema of its structured result, when it declares one.
    pub output_schema: Option<Value>,
}

impl McpTool {
    /// The argument names: required ones first, in the schema's order.
    pub fn argument_names(&self) -> Vec<String> {
        let required = self.required();
        let mut names: Vec<String> = required.clone();
        if let Some(props) = self.input_schema.get("properties").and_then(Value::as_object) {
            names.extend(props.keys().filter(|k| !required.contains(k)).cloned());
        }
        names
    }

    fn required(&self) -> Vec<String> {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default()
    }

    /// The agent inputs of the arguments: required properties, and optional ones with a schema default.
    fn agent_inputs(&self) -> Vec<InputSpec> {
        let required = self.required();
        let props = self.input_schema.get("properties").and_then(Value::as_object);
        let mut inputs: Vec<InputSpec> = required.iter().map(InputSpec::new).collect();
        if let Some(props) = props {
            for (k, p) in props {
                if let (false, Some(d)) = (required.contains(k), p.get("default")) {
                    inputs.push(InputSpec::new(k).default_value(d.clone()));
                }
            }
        }
        inputs
    }
}

type Connection = Arc<RunningService<RoleClient, ()>>;

/// A client of one MCP server, shared by the agents and tools that use it (`Arc<McpClient>`). It connects on
/// first use and keeps the connection; after the server died, the next request connects again (a stdio
/// server is restarted).
pub struct McpClient {
    name: String,
    server: McpServer,
    credentials: McpCredentials,
    conn: Mutex<Option<Connection>>,
    tools: Mutex<Option<Arc<[McpTool]>>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient").field("name", &self.name).field("server", &self.server).finish_non_exhaustive()
    }
}

impl McpClient {
    /// A client of `server`, called `name` in errors and reports.
    pub fn new(name: impl Into<String>, server: McpServer) -> Arc<McpClient> {
        McpClient::with_credentials(name, server, McpCredentials::default())
    }

    /// A client of `server`, called `name`, whose connections carry `credentials` (a stdio server's
    /// environment, an HTTP server's headers).
    pub fn with_credentials(name: impl Into<String>, server: McpServer, credentials: McpCredentials) -> Arc<McpClient> {
        Arc::new(McpClient { name: name.into(), server, credentials, conn: Mutex::new(None), tools: Mutex::new(None) })
    }

    /// A client of the stdio server started as `command` (program, then arguments).
    pub fn stdio<S: Into<String>>(name: impl Into<String>, command: impl IntoIterator<Item = S>) -> Arc<McpClient> {
        McpClient::new(name, McpServer::Stdio { command: command.into_iter().map(Into::into).collect() })
    }

    /// A client of the streamable HTTP server at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Arc<McpClient> {
        McpClient::new(name, McpServer::Http { url: url.into() })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the server is reached.
    pub fn server(&self) -> &McpServer {
        &self.server
    }

    fn connect_error(&self, message: impl std::fmt::Display) -> McpError {
        McpError::Connect {
            server: self.name.clone(),
            at: self.server.to_string(),
            message: self.credentials.redactions.apply(&tidy(&message.to_string())),
        }
    }

    fn request_error(&self, what: &str, message: impl std::fmt::Display) -> McpError {
        McpError::Request {
            server: self.name.clone(),
            at: self.server.to_string(),
            what: what.to_string(),
            message: self.credentials.redactions.apply(&tidy(&message.to_string())),
        }
    }

    async fn connection(&self) -> Result<Connection, McpError> {
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        // Connected in a task of its own: rmcp's service task keeps the span current when it starts, and the
        // connection outlives the invocation that opened it (its span would never end).
        let (server, credentials) = (self.server.clone(), self.credentials.clone());
        let connect = tokio::spawn(async move { Self::connect(&server, &credentials).await });
        let c = Arc::new(connect.await.map_err(|e| self.connect_error(e))?.map_err(|e| self.connect_error(e))?);
        *conn = Some(c.clone());
        Ok(c)
    }

    /// A new connection to `server`; the error says why not.
    async fn connect(
        server: &McpServer,
        credentials: &McpCredentials,
    ) -> Result<RunningService<RoleClient, ()>, String> {
        let service = match server {
            McpServer::Stdio { command } => {
                let (program, args) = command.split_first().ok_or_else(|| "empty command".to_string())?;
                let cmd = tokio::process::Command::new(program).configure(|c| {
                    c.args(args);
                    c.envs(credentials.env.iter().map(|(n, v)| (n, v)));
                });
                let transport = TokioChildProcess::new(cmd).map_err(|e| e.to_string())?;
                ().serve(transport).await.map_err(|e| e.to_string())?
            }
            McpServer::Http { url } => {
                // rmcp's reqwest client, adding each call's `traceparent` as an HTTP header too.
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(credentials.header_map()?);
                let transport = StreamableHttpClientTransport::with_client(TracingHttpClient::new(), config);
                ().serve(transport).await.map_err(|e| e.to_string())?
            }
        };
        Ok(service)
    }

    /// Forgets a connection that failed, so that the next request connects again.
    async fn drop_connection(&self, failed: &Connection) {
        let mut conn = self.conn.lock().await;
        if conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, failed)) {
            *conn = None;
        }
    }

    /// The server's tools (`tools/list`, every page), listed once and kept.
    ///
    /// # Errors
    /// [`McpError::Connect`] or [`McpError::Request`].
    pub async fn tools(&self) -> Result<Arc<[McpTool]>, McpError> {
        let mut cached = self.tools.lock().await;
        if let Some(t) = cached.as_ref() {
            return Ok(t.clone());
        }
        let conn = self.connection().await?;
        let listed = match conn.list_all_tools().await {
            Ok(l) => l,
            Err(e) => {
                self.drop_connection(&conn).await;
                return Err(self.request_error("tools/list", e));
            }
        };
        let tools: Arc<[McpTool]> = listed
            .into_iter()
            .map(|t| McpTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
                output_schema: t.output_schema.map(|s| Value::Object((*s).clone())),
            })
            .collect();
        *cached = Some(tools.clone());
        Ok(tools)
    }

    /// The tool called `name`, or the server's only tool when `name` is `None`.
    ///
    /// # Errors
    /// [`McpError::UnknownTool`], [`McpError::ToolNotNamed`], or the errors of [`McpClient::tools`].
    pub async fn tool(&self, name: Option<&str>) -> Result<McpTool, McpError> {
        let tools = self.tools().await?;
        // The names come from the server: a hostile one could name a tool after a credential it was sent.
        let available = || {
            let names = tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
            self.credentials.redactions.apply(&names)
        };
        match name {
            Some(n) => tools.iter().find(|t| t.name == n).cloned().ok_or_else(|| McpError::UnknownTool {
                server: self.name.clone(),
                tool: n.to_string(),
                available: available(),
            }),
            None if tools.len() == 1 => Ok(tools[0].clone()),
            None => {
                Err(McpError::ToolNotNamed { server: self.name.clone(), count: tools.len(), available: available() })
            }
        }
    }

    /// Calls `tool` with `arguments` and returns its raw result. The request carries the W3C `traceparent` of
    /// the calling agent's trace in its `params._meta` (SEP-414; over streamable HTTP also as a header): the
    /// current span's context with the cargo feature `otel`, else the one its run was started under.
    ///
    /// # Errors
    /// [`McpError::Connect`] or [`McpError::Request`] (the server died, a protocol error).
    pub async fn call_raw(&self, tool: &str, arguments: Map<String, Value>) -> Result<CallToolResult, McpError> {
        self.call_raw_keyed(tool, arguments, None).await
    }

    /// As [`McpClient::call_raw`], the request's `params._meta.idempotency_key` set to `idempotency_key`
    /// when given: the same key for every send of one call, so a server can tell a repeat (SPEC.md §4,
    /// effect `retry`).
    ///
    /// # Errors
    /// As [`McpClient::call_raw`].
    pub async fn call_raw_keyed(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        idempotency_key: Option<&str>,
    ) -> Result<CallToolResult, McpError> {
        let conn = self.connection().await?;
        let mut params = CallToolRequestParams::new(Cow::Owned(tool.to_string()));
        params.arguments = Some(arguments);
        if let Some(traceparent) = crate::trace_context::outgoing() {
            params.set_traceparent(&traceparent);
        }
        if let Some(key) = idempotency_key {
            params
                .meta_mut()
                .get_or_insert_with(rmcp::model::RequestMetaObject::new)
                .insert("idempotency_key".to_string(), Value::String(key.to_string()));
        }
        match conn.call_tool(params).await {
            Ok(r) => Ok(r),
            Err(e) => {
                self.drop_connection(&conn).await;
                Err(self.request_error(&format!("tools/call {tool}"), e))
            }
        }
    }

    /// Calls `tool` with `arguments`: its structured content when it declares an output schema (a plain value
    /// the server wrapped as `{"result": value}` unwrapped), else its text content (text blocks joined by
    /// newlines).
    ///
    /// # Errors
    /// [`McpError::Tool`] when the tool reports an error; the errors of [`McpClient::call_raw`].
    pub async fn call(&self, tool: &McpTool, arguments: Map<String, Value>) -> Result<Value, McpError> {
        self.call_keyed(tool, arguments, None).await
    }

    /// As [`McpClient::call`], with `params._meta.idempotency_key` ([`McpClient::call_raw_keyed`]).
    ///
    /// # Errors
    /// As [`McpClient::call`].
    pub async fn call_keyed(
        &self,
        tool: &McpTool,
        arguments: Map<String, Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Value, McpError> {
        let result = self.call_raw_keyed(&tool.name, arguments, idempotency_key).await?;
        let text = || {
            result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect::<Vec<_>>().join("\n")
        };
        if result.is_error == Some(true) {
            let message = self.credentials.redactions.apply(&text());
            return Err(McpError::Tool { server: self.name.clone(), tool: tool.name.clone(), message });
        }
        match (&tool.output_schema, &result.structured_content) {
            (Some(schema), Some(structured)) => Ok(unwrap_result(schema, structured)),
            _ => Ok(Value::String(text())),
        }
    }
}

/// An SDK error's text without the Rust type names it quotes (`Transport [rmcp::transport::..<..>] error:`).
fn tidy(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find('[') {
        let Some(len) = rest[start..].find(']') else { break };
        let inside = &rest[start + 1..start + len];
        out.push_str(&rest[..start]);
        if !inside.contains("::") {
            out.push_str(&rest[start..=start + len]);
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `{"result": v}` → `v` when the output schema has the single property `result` (how the SDKs wrap a tool
/// returning a plain value); anything else as it is.
fn unwrap_result(schema: &Value, structured: &Value) -> Value {
    let single =
        schema.get("properties").and_then(Value::as_object).is_some_and(|p| p.len() == 1 && p.contains_key("result"));
    match structured.as_object() {
        Some(o) if single && o.len() == 1 => o.get("result").cloned().unwrap_or(Value::Null),
        _ => structured.clone(),
    }
}

/// One MCP tool as a non-AI agent: its inputs are the tool's arguments, its result the tool's.
///
/// ```no_run
/// # async fn f() -> Result<(), agentic_agents::McpError> {
/// use agentic_agents::{McpAgent, McpClient};
/// use agentic_engine::SpecBuilder;
/// let stories = McpClient::http("stories", "http://127.0.0.1:8081/mcp");
/// let writer = McpAgent::builder(stories).tool_name("generate_story").output_key("story").build().await?;
/// # Ok(()) }
/// ```
pub struct McpAgent {
    spec: AgentSpec,
    client: Arc<McpClient>,
    tool_name: Option<String>,
    tool: OnceCell<McpTool>,
    effect: Effect,
}

/// Builder of an [`McpAgent`]. Defaults: the agent is named after the tool, its description is the tool's,
/// its inputs are the tool's arguments (see the module docs); `tool_name` may be omitted when the server
/// offers one tool.
pub struct McpAgentBuilder {
    spec: AgentSpec,
    client: Arc<McpClient>,
    tool_name: Option<String>,
    effect: Effect,
}

impl SpecBuilder for McpAgentBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl McpAgent {
    /// A builder over the server of `client`.
    pub fn builder(client: Arc<McpClient>) -> McpAgentBuilder {
        McpAgentBuilder { spec: AgentSpec::new("", "mcp"), client, tool_name: None, effect: Effect::Once }
    }
}

impl McpAgentBuilder {
    /// The tool to wrap (needed when the server offers more than one).
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = Some(name.into());
        self
    }

    /// What calling the tool does to the world (SPEC.md §4; default [`Effect::Once`]): with an effect, the
    /// call is committed as started before it is sent; after a crash cut it, `retry` sends it again with
    /// the same idempotency key (`params._meta.idempotency_key`) and `once` suspends the run with an
    /// `in_doubt` pending response instead.
    pub fn effect(mut self, effect: Effect) -> Self {
        self.effect = effect;
        self
    }

    /// The agent's name (default: the tool's name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.spec.name = name.into();
        self
    }

    /// Asks the server for the tool (connecting to it) and builds the agent with the tool's name, description
    /// and arguments as inputs, where not set on the builder.
    ///
    /// # Errors
    /// The server cannot be reached, or has no such tool (or several and no name was given).
    pub async fn build(self) -> Result<AgentRef, McpError> {
        let tool = self.client.tool(self.tool_name.as_deref()).await?;
        let mut spec = self.spec;
        apply_tool(&mut spec, &tool);
        let cell = OnceCell::new_with(Some(tool));
        let (client, tool_name, effect) = (self.client, self.tool_name, self.effect);
        Ok(AgentRef::new(McpAgent { spec, client, tool_name, tool: cell, effect }))
    }

    /// Builds the agent without asking the server: the tool is looked up at the first invocation, and the
    /// agent's declared inputs are those set on the builder (the arguments are still read from the state by
    /// their schema names at the call). This is how specs build `kind: mcp` agents, so that building a
    /// workflow starts no server.
    pub fn build_lazy(self) -> AgentRef {
        let mut spec = self.spec;
        if spec.name.is_empty() {
            spec.name = self.tool_name.clone().unwrap_or_else(|| self.client.name.clone());
        }
        let (client, tool_name, effect) = (self.client, self.tool_name, self.effect);
        AgentRef::new(McpAgent { spec, client, tool_name, tool: OnceCell::new(), effect })
    }
}

fn apply_tool(spec: &mut AgentSpec, tool: &McpTool) {
    if spec.name.is_empty() {
        spec.name = tool.name.clone();
    }
    if spec.description.is_empty() {
        spec.description = tool.description.clone();
    }
    if spec.inputs.is_empty() {
        spec.inputs = tool.agent_inputs();
    }
}

impl McpAgent {
    /// The arguments of the call: every schema property the invocation's inputs or the state hold.
    fn arguments(&self, tool: &McpTool, ctx: &InvocationContext) -> Result<Map<String, Value>, AgentError> {
        let view = ctx.view();
        let mut args = Map::new();
        for name in tool.argument_names() {
            if let Some(v) = ctx.input(&name).or_else(|| view.get(&name)) {
                args.insert(name, v.clone());
            }
        }
        for name in tool.required() {
            if !args.contains_key(&name) {
                return Err(AgentError::MissingArgument {
                    agent: ctx.agent_name().to_string(),
                    path: ctx.path().to_string(),
                    key: name,
                });
            }
        }
        let value = Value::Object(args);
        crate::llm::check_schema(&tool.input_schema, &value, "the arguments")
            .map_err(|e| ctx.fail(format!("MCP tool `{}` of server `{}`: {e}", tool.name, self.client.name)))?;
        match value {
            Value::Object(args) => Ok(args),
            _ => Ok(Map::new()),
        }
    }
}

impl Agent for McpAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let tool = self
            .tool
            .get_or_try_init(|| self.client.tool(self.tool_name.as_deref()))
            .await
            .map_err(|e| ctx.fail_with(e.into()))?;
        let args = self.arguments(tool, ctx)?;
        let key = ctx.run().idempotency_key().await?;
        if self.effect.has_effect() && ctx.calls().journaled() {
            // One call, number 0: journaled as started (committed) before it is sent; its result is the
            // step's output, committed with the step.
            let mut journal = crate::tool_loop::LoopJournal::resume(ctx).await;
            let state = journal.take_call(0);
            let mut retried_by = None;
            if let Some(started) = &state.started {
                match crate::tool_loop::resolve_in_doubt(ctx, started, state.in_doubt).await? {
                    crate::tool_loop::Doubt::Resend(by) => retried_by = by,
                    crate::tool_loop::Doubt::Failed(entry, failure) => {
                        ctx.calls().record(vec![CallEntry::Tool(entry)], false).await?;
                        return Err(failure.into());
                    }
                    crate::tool_loop::Doubt::Answered(entry) => {
                        let result = entry.result.clone().unwrap_or(Value::Null);
                        ctx.calls().record(vec![CallEntry::Tool(entry)], false).await?;
                        return Ok(result);
                    }
                    crate::tool_loop::Doubt::Pending(pending, entry) => {
                        ctx.calls().record(entry.into_iter().map(CallEntry::Tool).collect(), true).await?;
                        return Err(Stop::Suspended(vec![pending]));
                    }
                }
            }
            let args = Value::Object(args.clone());
            let mut entry = ToolCallEntry::new(0, 0, key.clone(), tool.name.clone(), args, ToolCallStatus::Started);
            entry.effect = self.effect;
            entry.by = retried_by;
            ctx.calls().record(vec![CallEntry::Tool(entry)], true).await?;
        }
        // The call on the run's call tape (SPEC.md §5): a replay answers it from the recording.
        let request = serde_json::json!({"tool": tool.name, "args": Value::Object(args.clone())});
        let taped = ctx.calls().taped(agentic_engine::CallKind::Tool, request);
        let recorded = match &taped {
            Some(call) => call.answer()?,
            None => None,
        };
        let result = match recorded {
            Some(Value::Object(mut answer)) if answer.contains_key("error") => {
                let error = answer.remove("error").unwrap_or(Value::Null);
                let error = error.as_str().map_or_else(|| error.to_string(), str::to_string);
                return Err(ctx.fail(format!("tool `{}` (recorded): {error}", tool.name)).into());
            }
            Some(Value::Object(mut answer)) => answer.remove("result").unwrap_or(Value::Null),
            Some(other) => other,
            None => {
                let called =
                    crate::trace_context::scoped(ctx, self.client.call_keyed(tool, args.clone(), Some(&key))).await;
                match called {
                    Ok(result) => result,
                    Err(e) => {
                        let failure = ctx.fail_with(e.into());
                        if let Some(call) = taped {
                            call.record(serde_json::json!({"error": failure.to_string()}));
                        }
                        return Err(failure.into());
                    }
                }
            }
        };
        if let Some(call) = taped {
            call.record(serde_json::json!({"result": result}));
        }
        // Journaled with the step: what `agentic calls` and a replay of this run read.
        let mut finished =
            ToolCallEntry::new(0, 0, key, tool.name.clone(), Value::Object(args), ToolCallStatus::Finished);
        finished.effect = self.effect;
        finished.result = Some(result.clone());
        ctx.calls().with_step(vec![CallEntry::Tool(finished)]);
        Ok(result)
    }
}

type ToolFilter = Arc<dyn Fn(&McpClient, &McpTool) -> bool + Send + Sync>;
type ToolNameMapper = Arc<dyn Fn(&McpClient, &McpTool) -> String + Send + Sync>;

/// The tools of one or more MCP servers offered to an LLM agent
/// ([`crate::LlmAgentBuilder::tool_provider`]); the original's `McpToolProvider`.
///
/// The servers are asked for their tools at the agent's first invocation (and each server's list is kept by
/// its [`McpClient`]). A call's arguments are checked against the tool's input schema first; a schema
/// mismatch and the tool's own error (`isError`) are reported to the model (`error: ..`), which may call
/// again; a server that cannot be reached or dies fails the agent, naming the server.
///
/// ```no_run
/// use agentic_agents::{McpClient, McpToolProvider};
/// let calc = McpClient::http("calc", "http://127.0.0.1:8081/mcp");
/// let files = McpClient::stdio("files", ["python", "files_server.py"]);
/// let provider = McpToolProvider::builder()
///     .client(calc)
///     .client(files)
///     .filter_tool_names(["add", "read_file"])
///     .tool_name_mapper(|server, tool| format!("{}_{}", server.name(), tool.name))
///     .build();
/// ```
#[derive(Clone)]
pub struct McpToolProvider {
    clients: Vec<Arc<McpClient>>,
    filter: Option<ToolFilter>,
    mapper: Option<ToolNameMapper>,
    /// Tool names the filter or the renames name: each must be offered by a server.
    named: Vec<(String, &'static str)>,
    renames: Vec<(String, String)>,
    effect: Effect,
    approve: Option<ToolApproval>,
}

/// An approval rule given to every tool of a provider ([`McpToolProviderBuilder::approve_checked`]).
type ToolApproval = Arc<dyn Fn(&crate::ApprovalRequest<'_>) -> Result<bool, String> + Send + Sync>;

impl std::fmt::Debug for McpToolProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolProvider").field("clients", &self.clients).finish_non_exhaustive()
    }
}

/// Builder of an [`McpToolProvider`]. Defaults: no server, every tool of each server, named as the server
/// names it.
pub struct McpToolProviderBuilder {
    clients: Vec<Arc<McpClient>>,
    filters: Vec<ToolFilter>,
    mapper: Option<ToolNameMapper>,
    named: Vec<(String, &'static str)>,
    renames: Vec<(String, String)>,
    effect: Effect,
    approve: Option<ToolApproval>,
}

impl Default for McpToolProviderBuilder {
    fn default() -> Self {
        McpToolProviderBuilder {
            clients: Vec::new(),
            filters: Vec::new(),
            mapper: None,
            named: Vec::new(),
            renames: Vec::new(),
            effect: Effect::Once,
            approve: None,
        }
    }
}

impl McpToolProvider {
    /// A builder with no server yet.
    pub fn builder() -> McpToolProviderBuilder {
        McpToolProviderBuilder::default()
    }
}

impl McpToolProviderBuilder {
    /// Offers the tools of this server too.
    pub fn client(mut self, client: Arc<McpClient>) -> Self {
        self.clients.push(client);
        self
    }

    /// Offers only the tools for which `keep(server, tool)` holds (all filters must hold).
    pub fn filter(mut self, keep: impl Fn(&McpClient, &McpTool) -> bool + Send + Sync + 'static) -> Self {
        self.filters.push(Arc::new(keep));
        self
    }

    /// Offers only the tools with these names (as the servers name them). A name no server offers fails the
    /// agent's invocation, listing the tools offered (a misspelt name is not silently ignored).
    pub fn filter_tool_names<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        self.named.extend(names.iter().map(|n| (n.clone(), "filter")));
        self.filter(move |_, tool| names.contains(&tool.name))
    }

    /// Shows the servers' tool `from` to the model as `to` (applied before [`Self::tool_name_mapper`], which
    /// then sees the other tools only). A `from` no server offers fails the agent's invocation.
    pub fn rename(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        let from = from.into();
        self.named.push((from.clone(), "rename"));
        self.renames.push((from, to.into()));
        self
    }

    /// Names each tool for the model as `name(server, tool)` returns (to tell apart tools of the same name
    /// on two servers); the server is still called with the tool's own name.
    pub fn tool_name_mapper(mut self, name: impl Fn(&McpClient, &McpTool) -> String + Send + Sync + 'static) -> Self {
        self.mapper = Some(Arc::new(name));
        self
    }

    /// What calling its tools does to the world (SPEC.md §4; default [`Effect::Once`]: a call a crash cut is
    /// in doubt and waits for a person). See [`crate::Tool::effect`].
    pub fn effect(mut self, effect: Effect) -> Self {
        self.effect = effect;
        self
    }

    /// The calls of its tools for which `needs(call)` holds (or fails: the invocation fails) wait for a
    /// person's approval. See [`crate::Tool::approve`].
    pub fn approve_checked(
        mut self,
        needs: impl Fn(&crate::ApprovalRequest<'_>) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.approve = Some(Arc::new(needs));
        self
    }

    /// The provider.
    pub fn build(self) -> McpToolProvider {
        let filters = self.filters;
        let filter: Option<ToolFilter> = match filters.len() {
            0 => None,
            _ => Some(Arc::new(move |c: &McpClient, t: &McpTool| filters.iter().all(|f| f(c, t)))),
        };
        McpToolProvider {
            clients: self.clients,
            filter,
            mapper: self.mapper,
            named: self.named,
            renames: self.renames,
            effect: self.effect,
            approve: self.approve,
        }
    }
}

/// One MCP tool as a tool of an LLM agent, named `name` for the model.
fn llm_tool(client: Arc<McpClient>, tool: McpTool, name: String) -> crate::Tool {
    let spec = crate::model::ToolSpec::new(name, tool.description.clone(), tool.input_schema.clone());
    let tool = Arc::new(tool);
    crate::Tool::checked(spec, move |call, args| {
        let (client, tool) = (client.clone(), tool.clone());
        Box::pin(async move {
            let args = match args {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            client.call_keyed(&tool, args, Some(&call.idempotency_key)).await.map_err(|e| match e {
                McpError::Tool { message, .. } => crate::tools::ToolFailure::Model(message),
                other => crate::tools::ToolFailure::Agent(other.into()),
            })
        })
    })
}

impl crate::ToolProvider for McpToolProvider {
    fn source(&self) -> String {
        let names: Vec<String> = self.clients.iter().map(|c| format!("`{}`", c.name)).collect();
        match names.len() {
            1 => format!("MCP server {}", names[0]),
            _ => format!("MCP servers {}", names.join(", ")),
        }
    }

    fn tools(&self) -> futures::future::BoxFuture<'_, Result<Vec<crate::Tool>, String>> {
        Box::pin(async move {
            let mut out: Vec<crate::Tool> = Vec::new();
            let mut servers: Vec<&str> = Vec::new();
            let mut listed_all = Vec::with_capacity(self.clients.len());
            for client in &self.clients {
                listed_all.push(client.tools().await.map_err(|e| e.to_string())?);
            }
            for (name, what) in &self.named {
                if !listed_all.iter().any(|l| l.iter().any(|t| &t.name == name)) {
                    let offered: Vec<&str> =
                        listed_all.iter().flat_map(|l| l.iter().map(|t| t.name.as_str())).collect();
                    return Err(format!(
                        "{} offers no tool `{name}` (named in `{what}`); the tools offered are: {}",
                        self.source(),
                        offered.join(", ")
                    ));
                }
            }
            for (client, listed) in self.clients.iter().zip(&listed_all) {
                for tool in listed.iter() {
                    if self.filter.as_ref().is_some_and(|keep| !keep(client, tool)) {
                        continue;
                    }
                    let renamed = self.renames.iter().find(|(from, _)| from == &tool.name).map(|(_, to)| to.clone());
                    let name = match (renamed, &self.mapper) {
                        (Some(to), _) => to,
                        (None, Some(m)) => m(client, tool),
                        (None, None) => tool.name.clone(),
                    };
                    if let Some(i) = out.iter().position(|t| t.name() == name) {
                        return Err(format!(
                            "two tools are named `{name}`: one of MCP server `{}` and one of MCP server `{}`; \
                             rename one (a name mapping of the provider, `rename` in a spec)",
                            servers[i], client.name
                        ));
                    }
                    let mut offered = llm_tool(client.clone(), tool.clone(), name).effect(self.effect);
                    if let Some(needs) = &self.approve {
                        let needs = needs.clone();
                        offered = offered.approve_checked(move |call| needs(call));
                    }
                    out.push(offered);
                    servers.push(&client.name);
                }
            }
            Ok(out)
        })
    }
}
