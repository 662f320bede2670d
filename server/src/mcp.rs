//! `/mcp`: the specs of `--specs DIR` offered as MCP tools over streamable HTTP (the server side of the
//! official Rust SDK, rmcp), next to the HTTP API and behind the same token.
//!
//! - `tools/list`: one tool per spec the API's `GET /api/v1/specs` names (read from the directory at each
//!   request), named by its file stem, described by its root agent's description; the input schema is the
//!   spec's `params` when it declares them, else the inputs its agents read that no earlier agent writes.
//! - `tools/call`: starts a run exactly as `POST /api/v1/runs {"spec_name", "inputs"}` does (the host's one
//!   path: same checks, same journal, same events), waits until it stops and answers with its outcome:
//!   completed → the output (as text, and `{run_id, status, output}` as structured content); failed or
//!   cancelled → a tool error naming the run; suspended for a person → the run id, the pending prompts and
//!   how to answer them (`{run_id, status: "suspended", pending}`). Arguments that break the schema are a tool
//!   error naming the field; a client that cancels the call cancels the run.
//!
//! LangGraph's agent server offers its graphs over MCP the same way (one tool per assistant).

use std::path::Path;
use std::sync::Arc;

use agentic_engine::{Durability, RunRecord, RunStatus};
use agentic_spec::{AgentKind, ParamDef, RootInput, Spec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::auth::{Principal, Right};
use crate::error::{ApiError, Refused};
use crate::host::{NewRun, SpecSource, traceparent};

/// Where the MCP endpoint is mounted.
pub(crate) const PATH: &str = "/mcp";

/// What the server tells MCP clients at initialisation (`instructions`).
const INSTRUCTIONS: &str = "Each tool runs one workflow of this agentic server to its end and returns its output \
     (structured content: {run_id, status, output}). A workflow that waits for a person returns status \
     `suspended` with its run id and the pending prompts instead: a person answers in the server's web inbox \
     (/inbox) or with POST /api/v1/runs/{run_id}/responses/{response_id} {\"value\": ..}; the run then continues \
     by itself, and GET /api/v1/runs/{run_id} shows its status and output.";

/// The MCP endpoint as a tower service, for `Router::route_service(PATH, ..)`.
pub(crate) type McpService = StreamableHttpService<SpecTools, LocalSessionManager>;

/// The MCP endpoint over `app`'s specs and runs. `stop` ends its sessions and streams (at shutdown). `public`
/// (a non-loopback listen address, so a token is required) turns off rmcp's `Host` allow-list, which only
/// admits loopback names (a guard against DNS rebinding for servers without a token).
pub(crate) fn service(app: AppState, stop: CancellationToken, public: bool) -> McpService {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        .with_max_request_body_bytes(crate::api::BODY_LIMIT);
    if public {
        config = config.disable_allowed_hosts();
    }
    let tools = SpecTools { app };
    StreamableHttpService::new(move || Ok(tools.clone()), Arc::new(LocalSessionManager::default()), config)
}

/// The header naming an MCP session (streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";

/// Who opened each MCP session of this server, by session id: a session is its opener's alone (SERVER.md
/// §8). Sessions live in this process (the SDK's local session manager); their owners with them.
#[derive(Clone, Default)]
pub(crate) struct SessionOwners(Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>);

impl SessionOwners {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Who a principal is for a session: its name and tenant (two tenants may each have a key `ann`).
fn owner_of(principal: Option<&Principal>) -> String {
    principal.map_or_else(String::new, |p| format!("{}@{}", p.name, p.tenant.as_deref().unwrap_or("")))
}

/// Binds each MCP session to the principal that opened it: a request naming a session another principal
/// opened is answered as one naming no session (`404`), so a session id seen elsewhere gives nothing. A
/// session the server opens (its answer names it) is recorded; one deleted is forgotten.
pub(crate) async fn bind_sessions(
    axum::extract::State(app): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let who = owner_of(request.extensions().get::<Principal>());
    let named = request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(id) = &named
        && app.mcp_sessions.lock().get(id).is_some_and(|owner| *owner != who)
    {
        return (axum::http::StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    }
    let deleting = request.method() == axum::http::Method::DELETE;
    let response = next.run(request).await;
    match (&named, response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())) {
        (None, Some(opened)) => {
            app.mcp_sessions.lock().insert(opened.to_string(), who);
        }
        (Some(id), _) if deleting && response.status().is_success() => {
            app.mcp_sessions.lock().remove(id);
        }
        _ => {}
    }
    response
}

/// The MCP server handler: the specs as tools.
#[derive(Clone)]
pub(crate) struct SpecTools {
    app: AppState,
}

impl SpecTools {
    /// The tools offered now: the specs of the directory that parse, in name order (a spec that does not
    /// parse is left out, as the new-run form shows it with its error).
    fn tools(&self) -> Vec<Tool> {
        let catalog = self.app.host.specs();
        catalog
            .names()
            .into_iter()
            .filter_map(|name| {
                let path = catalog.path(&name).ok()?;
                match SpecTool::load(&name, &path) {
                    Ok(tool) => Some(tool.tool),
                    Err(e) => {
                        tracing::debug!("spec `{name}` is not offered as an MCP tool: {e}");
                        None
                    }
                }
            })
            .collect()
    }

    /// The tool `name`. Errors: `Err` no such spec (a protocol error, as MCP wants for unknown tools);
    /// `Ok(Err)` the spec does not parse (a tool error saying why).
    fn find(&self, name: &str) -> Result<Result<SpecTool, CallToolResult>, ErrorData> {
        let catalog = self.app.host.specs();
        let path = catalog.path(name).map_err(|_| {
            let names = self.tools().iter().map(|t| format!("`{}`", t.name)).collect::<Vec<_>>().join(", ");
            let offered = if names.is_empty() {
                "this server offers none (`agentic serve --specs DIR` offers the specs of DIR)".to_string()
            } else {
                format!("the tools are: {names}")
            };
            ErrorData::invalid_params(format!("unknown tool `{name}`; {offered}"), None)
        })?;
        Ok(SpecTool::load(name, &path).map_err(|e| tool_error(format!("tool `{name}`: {e}"), None)))
    }

    /// Runs spec `name` with `inputs` until it stops, under the caller's trace (`traceparent`); a cancelled
    /// `ct` cancels the run.
    async fn run(
        &self,
        name: &str,
        inputs: Map<String, Value>,
        traceparent: Option<String>,
        principal: &Principal,
        ct: CancellationToken,
    ) -> CallToolResult {
        let host = &self.app.host;
        let new = NewRun {
            spec: SpecSource::Named(name.to_string()),
            inputs,
            run_id: None,
            durability: Durability::Sync,
            new_turn: false,
            traceparent,
            tenant: principal.tenant.clone(),
        };
        let run_id = match host.start(new).await {
            Ok(id) => id,
            Err(e) => return start_error(name, e),
        };
        let stopped = tokio::select! {
            stopped = host.wait_stopped(&run_id) => stopped,
            () = ct.cancelled() => {
                // The client gave up on the call: the run stops at its next step boundary, recorded `cancelled`.
                if let Err(e) = host.cancel(&run_id).await {
                    tracing::debug!(run_id, "cancelling the run of a cancelled MCP call: {}", e.message);
                }
                return tool_error(
                    format!("the call was cancelled, and so is run `{run_id}`"),
                    Some(json!({"run_id": run_id, "status": "cancelled"})),
                );
            }
        };
        match stopped {
            Ok(Some(record)) => outcome(&record),
            Ok(None) => tool_error(format!("run `{run_id}` stopped before it started"), None),
            Err(e) => tool_error(format!("run `{run_id}`: {}", e.message), None),
        }
    }
}

impl ServerHandler for SpecTools {
    fn get_info(&self) -> ServerConfig {
        let implementation = Implementation::new("agentic", env!("CARGO_PKG_VERSION"))
            .with_title("agentic serve")
            .with_description("Workflows (agentic specs) offered as tools: each call runs one to its end.");
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The directory is read at each request: the list is never fresh for longer.
        Ok(ListToolsResult::with_all_items(self.tools()).with_ttl_ms(0))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let path = self.app.host.specs().path(name).ok()?;
        SpecTool::load(name, &path).ok().map(|t| t.tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // The principal the HTTP layer identified (crate::auth): each call starts a run, an operator's right.
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let Some(principal) = parts.and_then(|p| p.extensions.get::<Principal>()).cloned() else {
            return Err(ErrorData::internal_error("the request carries no principal", None));
        };
        if let Err(refused) = principal.require(Right::Operate) {
            return Ok(tool_error(format!("tool `{name}`: {}", refused.message), None).into());
        }
        let tool = match self.find(&name)? {
            Ok(tool) => tool,
            Err(error) => return Ok(error.into()),
        };
        let inputs = request.arguments.unwrap_or_default();
        if let Err(errors) = tool.check(&inputs) {
            return Ok(invalid_arguments(&name, &errors).into());
        }
        // The caller's trace: the call's `_meta` (SEP-414), else the HTTP request's header.
        let traceparent = request
            .meta
            .as_ref()
            .and_then(|m| m.get_traceparent())
            .or_else(|| context.meta.get_traceparent())
            .map(str::to_string)
            .or_else(|| context.extensions.get::<axum::http::request::Parts>().and_then(|p| traceparent(&p.headers)));
        Ok(self.run(&name, inputs, traceparent, &principal, context.ct).await.into())
    }
}

/// One spec as a tool (and, for A2A, as a skill).
pub(crate) struct SpecTool {
    tool: Tool,
    /// The root agent's description (default "Runs the workflow `name`."), ending with a full stop.
    summary: String,
    /// Whether a run may stop for a person (the spec has a `human` agent).
    asks_people: bool,
    /// Without `params`: the inputs its agents read; the required ones are checked before a run starts
    /// (with `params`, the host checks the inputs against them).
    inferred: Vec<RootInput>,
}

impl SpecTool {
    /// The spec's description (its root's, else "Runs the workflow `name`."), ending with a full stop.
    pub(crate) fn summary(&self) -> &str {
        &self.summary
    }

    /// Whether a run may stop for a person's answer.
    pub(crate) fn asks_people(&self) -> bool {
        self.asks_people
    }

    /// The inputs a run needs: those its schema requires.
    pub(crate) fn required_inputs(&self) -> Vec<String> {
        self.tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// The names of the inputs its schema lists: the required ones first, in schema order.
    pub(crate) fn input_names(&self) -> Vec<String> {
        let required: Vec<String> = self
            .tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let mut names = required.clone();
        if let Some(props) = self.tool.input_schema.get("properties").and_then(Value::as_object) {
            names.extend(props.keys().filter(|k| !required.contains(k)).cloned());
        }
        names
    }

    /// The JSON-schema type its schema gives input `name`, if any.
    pub(crate) fn input_type(&self, name: &str) -> Option<&str> {
        self.tool.input_schema.get("properties")?.get(name)?.get("type")?.as_str()
    }

    /// The tool of spec file `path`, named `name`. Errors: the spec's errors, as text.
    pub(crate) fn load(name: &str, path: &Path) -> Result<SpecTool, String> {
        let spec = Spec::from_path(path).map_err(|e| format!("the spec is invalid: {e}"))?;
        let root = spec.agent(spec.root());
        let mut description = root
            .map(|a| a.description.trim())
            .filter(|d| !d.is_empty())
            .map_or_else(|| format!("Runs the workflow `{}`.", spec.name()), str::to_string);
        let mut summary = description.clone();
        if !summary.ends_with(['.', '!', '?']) {
            summary.push('.');
        }
        let asks_people = spec.agents().iter().any(|a| matches!(a.kind, AgentKind::Human { .. }));
        if asks_people {
            description.clone_from(&summary);
            description.push_str(
                " It may stop to wait for a person's answer: the result then has status `suspended`, the run id \
                 and how to answer.",
            );
        }
        let (schema, inferred) = if spec.params().is_empty() {
            // A spec whose models cannot be built here (a `local` model in a binary without it) is offered
            // with an open schema; calling it says why it cannot run.
            let inferred = spec.build().map(|b| b.inputs).unwrap_or_default();
            (inferred_schema(&inferred), inferred)
        } else {
            (params_schema(spec.params()), Vec::new())
        };
        let mut tool = Tool::new(name.to_string(), description, schema);
        if spec.name() != name {
            tool = tool.with_title(spec.name());
        }
        Ok(SpecTool { tool, summary, asks_people, inferred })
    }

    /// Checks `inputs` against the inferred required inputs (a spec without `params`). Errors: one line per
    /// missing input, naming it and the agent that reads it.
    pub(crate) fn check(&self, inputs: &Map<String, Value>) -> Result<(), Vec<String>> {
        let errors: Vec<String> = self
            .inferred
            .iter()
            .filter(|i| i.required && !inputs.contains_key(&i.name))
            .map(|i| format!("input `{}`: missing ({})", i.name, i.why()))
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// The input schema of declared `params`: their types, descriptions and defaults; required when without a
/// default; nothing else accepted.
fn params_schema(params: &[ParamDef]) -> JsonObject {
    let properties: Map<String, Value> = params
        .iter()
        .map(|p| {
            let mut property = json!({"type": p.ty.name()});
            if let Some(description) = &p.description {
                property["description"] = json!(description);
            }
            if let Some(default) = &p.default {
                property["default"] = default.clone();
            }
            (p.name.clone(), property)
        })
        .collect();
    let required: Vec<&str> = params.iter().filter(|p| p.default.is_none()).map(|p| p.name.as_str()).collect();
    object_schema(properties, required, false)
}

/// The input schema of inferred inputs: typed when an agent declares a type, else any JSON value; other
/// inputs are accepted too (a spec without `params` takes any input).
fn inferred_schema(inferred: &[RootInput]) -> JsonObject {
    let properties: Map<String, Value> = inferred
        .iter()
        .map(|i| {
            let mut property = json!({"description": i.why()});
            if let Some(ty) = i.value_type {
                property["type"] = json!(ty);
            }
            (i.name.clone(), property)
        })
        .collect();
    let required: Vec<&str> = inferred.iter().filter(|i| i.required).map(|i| i.name.as_str()).collect();
    object_schema(properties, required, true)
}

fn object_schema(properties: Map<String, Value>, required: Vec<&str>, open: bool) -> JsonObject {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    if !open {
        schema.insert("additionalProperties".into(), json!(false));
    }
    schema
}

/// A tool error: `text` as its content, `structured` (if any) as its structured content.
fn tool_error(text: impl Into<String>, structured: Option<Value>) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text.into())]);
    result.structured_content = structured;
    result
}

/// The tool error of arguments that break the schema, one error per line after the first.
fn invalid_arguments(tool: &str, errors: &[String]) -> CallToolResult {
    tool_error(format!("invalid arguments for tool `{tool}`: {}", errors.join("; ")), None)
}

/// The tool error of a run that could not start: its inputs do not fit (naming the field), its spec does
/// not build, the server is stopping.
fn start_error(tool: &str, error: ApiError) -> CallToolResult {
    // Arguments that do not fit are a tool execution error the model can correct (MCP 2025-11-25, "Error
    // Handling": input validation errors are tool results with `isError`, not protocol errors).
    if let Refused::Inputs(errors) = &error.kind {
        return invalid_arguments(tool, errors);
    }
    tool_error(format!("tool `{tool}`: {}", error.message), None)
}

/// The result of a run that stopped in the state `record` holds.
fn outcome(record: &RunRecord) -> CallToolResult {
    let run_id = &record.run_id;
    match record.status {
        RunStatus::Completed => {
            let output = record.detail.clone();
            let text = match &output {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(json!({"run_id": run_id, "status": "completed", "output": output}));
            result
        }
        RunStatus::Failed => {
            let error = match &record.detail {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            tool_error(
                format!("run `{run_id}` of `{}` failed: {error}", record.name),
                Some(json!({"run_id": run_id, "status": "failed", "error": error})),
            )
        }
        RunStatus::Cancelled => tool_error(
            format!("run `{run_id}` of `{}` was cancelled", record.name),
            Some(json!({"run_id": run_id, "status": "cancelled"})),
        ),
        RunStatus::Suspended => suspended(record),
        // Drained at shutdown: it stopped at a step boundary and continues at the next start.
        RunStatus::Running => tool_error(
            format!(
                "the server is stopping: run `{run_id}` of `{}` stopped at a step boundary and continues when the \
                 server starts again (GET /api/v1/runs/{run_id} then shows its outcome)",
                record.name
            ),
            Some(json!({"run_id": run_id, "status": "running"})),
        ),
    }
}

/// The (non-error) result of a run waiting for a person: its id, the unanswered prompts and how to answer.
fn suspended(record: &RunRecord) -> CallToolResult {
    let run_id = &record.run_id;
    let pending: Vec<_> = record.pending.iter().filter(|p| !record.answers.contains_key(&p.id)).collect();
    let mut text = format!("Run `{run_id}` of `{}` is waiting for a person (status `suspended`).\n", record.name);
    for p in &pending {
        text.push_str(&format!("- response `{}` (agent `{}`): {}\n", p.id, p.agent, p.prompt));
    }
    // Ids are path segments, percent-encoded (a response id is an agent path: `root/0` → `root%2F0`).
    let example = pending.first().map_or("{response_id}".to_string(), |p| crate::ui::path_segment(&p.id));
    let run = crate::ui::path_segment(run_id);
    text.push_str(&format!(
        "A person answers in this server's web inbox (/inbox), or with POST \
         /api/v1/runs/{run}/responses/{example} and the body {{\"value\": <the answer>}}. The run then continues \
         by itself; GET /api/v1/runs/{run} shows its status and output."
    ));
    let pending_json: Vec<Value> =
        pending.iter().map(|p| json!({"id": p.id, "prompt": p.prompt, "agent": p.agent})).collect();
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({"run_id": run_id, "status": "suspended", "pending": pending_json}));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_params_make_a_closed_schema() {
        let spec = Spec::parse(
            "version: 1\nroot: a\nparams:\n  city: string\n  days: {type: integer, default: 3, description: How \
             many}\nagents:\n  a: {kind: compute, value: \"city ~ days\"}\n",
            "weather.yaml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Value::Object(params_schema(spec.params())),
            json!({"type": "object", "properties": {"city": {"type": "string"},
                   "days": {"type": "integer", "description": "How many", "default": 3}},
                   "required": ["city"], "additionalProperties": false})
        );
    }
}
