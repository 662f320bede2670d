//! A2A: the specs of `--specs DIR` offered as A2A agents (protocol 1.0 as the official SDKs speak it, and
//! the 0.3 method names for older clients, as the Python SDK's server does), next to the HTTP API and behind
//! the same token. The wire types are the client's ([`agentic_agents::a2a`]).
//!
//! - Cards: `/.well-known/{spec}/agent-card.json` describes one spec (its root's description, one skill)
//!   with its JSON-RPC endpoint `/a2a/{spec}`; `/.well-known/agent-card.json` describes the server, every
//!   spec a skill, with the endpoint `/a2a` (a message there names its spec by `tenant`, by
//!   `metadata.spec`, or needs none when the directory holds one spec).
//! - A task is a run: the task id is the run id. `SendMessage` without a task id starts a run of the spec
//!   (the host's one start path, as `POST /api/v1/runs`); the message's data parts (objects) are its inputs,
//!   and its text is the value of the one input the spec takes that the data parts leave unset. The answer
//!   waits for the run to stop (unless `configuration.returnImmediately`): completed → `completed` with the
//!   output as the artifact `output`; failed → `failed`, the error as the status message; a human step →
//!   `input-required`, the pending prompts as the status message. A message with the task id of an
//!   `input-required` task answers its first unanswered prompt (the text, read as JSON when it parses; or
//!   the first data part) and the run continues.
//! - `SendStreamingMessage` answers with server-sent events: the task when it starts, then the output as
//!   an artifact update and the final status. `GetTask` reads the run; `CancelTask` cancels it.
//! - The context id of a task is the client's (kept in memory while the server runs; after a restart a
//!   task reports its run id as its context).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use agentic_agents::a2a::{
    AGENT_CARD_PATH, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, JSONRPC_BINDING, JsonRpcError,
    JsonRpcResponse, Message, Method, Part, ProtocolVersion, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskArtifactUpdateEvent, TaskRequest, TaskState, TaskStatus, TaskStatusUpdateEvent,
    error_code,
};
use agentic_engine::{Durability, RunRecord, RunStatus};
use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use futures::stream::{self, Stream};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::access::audit;
use crate::auth::{Principal, Right};
use crate::error::ApiError;
use crate::host::{NewRun, SpecSource, traceparent};
use crate::mcp::SpecTool;

/// The context ids clients gave their tasks, by task (run) id.
#[derive(Clone, Default)]
pub(crate) struct Contexts(Arc<Mutex<HashMap<String, String>>>);

impl Contexts {
    fn get(&self, task: &str) -> String {
        self.0.lock().ok().and_then(|m| m.get(task).cloned()).unwrap_or_else(|| task.to_string())
    }

    fn set(&self, task: &str, context: String) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(task.to_string(), context);
        }
    }
}

/// The A2A routes: the cards and the JSON-RPC endpoints.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(AGENT_CARD_PATH, get(server_card))
        .route("/.well-known/{spec}/agent-card.json", get(spec_card))
        .route("/a2a", post(rpc_any))
        .route("/a2a/{spec}", post(rpc_spec))
}

/// `http://host:port` of the request (its `Host` header), for the absolute URLs of a card.
fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// The JSON-RPC interfaces of an endpoint: 1.0 first, then 0.3.
fn interfaces(url: &str) -> Vec<AgentInterface> {
    [ProtocolVersion::V1_0, ProtocolVersion::V0_3]
        .into_iter()
        .map(|v| AgentInterface {
            url: url.to_string(),
            protocol_binding: JSONRPC_BINDING.to_string(),
            tenant: None,
            protocol_version: Some(v.as_str().to_string()),
        })
        .collect()
}

/// A card with the fields every card of this server shares.
fn card(name: String, description: String, url: &str, skills: Vec<AgentSkill>) -> AgentCard {
    let mut other = Map::new();
    other.insert("provider".into(), json!({"organization": "agentic", "url": "https://github.com/agentic-rs/agentic"}));
    AgentCard {
        name,
        description,
        supported_interfaces: interfaces(url),
        version: env!("CARGO_PKG_VERSION").to_string(),
        capabilities: AgentCapabilities { streaming: Some(true), ..AgentCapabilities::default() },
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills,
        // 0.3 clients read these.
        url: Some(url.to_string()),
        protocol_version: Some("0.3".into()),
        preferred_transport: Some(JSONRPC_BINDING.into()),
        other,
    }
}

/// Spec `name` as a skill, with what a message must carry.
fn skill(name: &str, tool: &SpecTool) -> AgentSkill {
    let inputs = tool.input_names();
    let how = match inputs.as_slice() {
        [] => "It takes no input.".to_string(),
        [one] => format!("Send `{one}` as the message's text (or a data part {{\"{one}\": ..}})."),
        many => format!(
            "Send its inputs as a data part {{{}}}.",
            many.iter().map(|i| format!("\"{i}\": ..")).collect::<Vec<_>>().join(", ")
        ),
    };
    AgentSkill {
        id: name.to_string(),
        name: name.to_string(),
        description: format!(
            "{} {how}{}",
            tool.summary(),
            if tool.asks_people() {
                " It may stop to ask a person: the task is then `input-required`, and the next message with its \
             task id is the answer."
            } else {
                ""
            }
        ),
        tags: vec!["workflow".into()],
        ..AgentSkill::default()
    }
}

/// The specs that load, with their tools.
fn specs(app: &AppState) -> Vec<(String, SpecTool)> {
    let catalog = app.host.specs();
    catalog
        .names()
        .into_iter()
        .filter_map(|name| {
            let path = catalog.path(&name).ok()?;
            SpecTool::load(&name, &path).ok().map(|t| (name, t))
        })
        .collect()
}

/// `GET /.well-known/agent-card.json`: the server, every spec a skill, at `/a2a`.
async fn server_card(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let base = base_url(&headers);
    let specs = specs(&app);
    let skills: Vec<AgentSkill> = specs.iter().map(|(n, t)| skill(n, t)).collect();
    let names: Vec<String> = specs.iter().map(|(n, _)| format!("`{n}`")).collect();
    let description = format!(
        "An agentic server running workflows: {}. A message names its workflow by `tenant` or `metadata.spec` \
         (or use the workflow's own card, /.well-known/<workflow>/agent-card.json).",
        if names.is_empty() { "none".to_string() } else { names.join(", ") }
    );
    axum::Json(card("agentic".into(), description, &format!("{base}/a2a"), skills)).into_response()
}

/// `GET /.well-known/{spec}/agent-card.json`: one spec, at `/a2a/{spec}`.
async fn spec_card(State(app): State<AppState>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let base = base_url(&headers);
    match load(&app, &name) {
        Ok(tool) => {
            let url = format!("{base}/a2a/{name}");
            let description = tool.summary().to_string();
            axum::Json(card(name.clone(), description, &url, vec![skill(&name, &tool)])).into_response()
        }
        Err(e) => ApiError::not_found(e.message).into_response(),
    }
}

fn load(app: &AppState, name: &str) -> Result<SpecTool, JsonRpcError> {
    let path = app.host.specs().path(name).map_err(|e| rpc_error(error_code::INVALID_PARAMS, e.message))?;
    SpecTool::load(name, &path).map_err(|e| rpc_error(error_code::INVALID_PARAMS, format!("workflow `{name}`: {e}")))
}

fn rpc_error(code: i64, message: impl Into<String>) -> JsonRpcError {
    JsonRpcError { code, message: message.into(), data: None }
}

/// `POST /a2a`: the spec comes from the request.
async fn rpc_any(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    rpc(app, principal, None, traceparent(&headers), body).await
}

/// `POST /a2a/{spec}`.
async fn rpc_spec(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    rpc(app, principal, Some(name), traceparent(&headers), body).await
}

/// One JSON-RPC request: parsed, dispatched, answered (errors as JSON-RPC errors with HTTP 200). A task it
/// starts continues the request's trace (`traceparent`) and belongs to the principal's tenant; another
/// tenant's task is not found.
async fn rpc(
    app: AppState,
    principal: Principal,
    spec: Option<String>,
    traceparent: Option<String>,
    body: axum::body::Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return reply(Value::Null, Err(rpc_error(error_code::PARSE_ERROR, format!("the body is not JSON: {e}"))));
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(name) = request.get("method").and_then(Value::as_str) else {
        return reply(id, Err(rpc_error(error_code::INVALID_REQUEST, "not a JSON-RPC request: `method` is missing")));
    };
    let Some((method, version)) = Method::from_name(name) else {
        return reply(
            id,
            Err(rpc_error(
                error_code::METHOD_NOT_FOUND,
                format!(
                    "unknown method `{name}`; this agent serves SendMessage, SendStreamingMessage, GetTask, \
                         CancelTask (and their 0.3 names message/send, message/stream, tasks/get, tasks/cancel)"
                ),
            )),
        );
    };
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let a2a = A2a { app, principal, version, traceparent };
    match method {
        Method::SendMessage => {
            let result = match parse::<SendMessageRequest>(params) {
                Ok(req) => a2a.send(spec, req).await.map(|t| SendMessageResponse::Task(t).to_wire(version)),
                Err(e) => Err(e),
            };
            reply(id, result)
        }
        Method::SendStreamingMessage => match parse::<SendMessageRequest>(params) {
            Ok(req) => a2a.stream(id, spec, req).await,
            Err(e) => reply(id, Err(e)),
        },
        Method::GetTask => {
            let result = match parse::<TaskRequest>(params) {
                Ok(req) => a2a.get(&req.id).await.map(|t| task_wire(&t, version)),
                Err(e) => Err(e),
            };
            reply(id, result)
        }
        Method::CancelTask => {
            let result = match parse::<TaskRequest>(params) {
                Ok(req) => a2a.cancel(&req.id).await.map(|t| task_wire(&t, version)),
                Err(e) => Err(e),
            };
            reply(id, result)
        }
        _ => reply(id, Err(rpc_error(error_code::UNSUPPORTED_OPERATION, format!("`{name}` is not supported")))),
    }
}

/// The parameters as `T`; an error names the field.
fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, JsonRpcError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let at = e.path().to_string();
        let message = if at == "." { format!("params: {}", e.inner()) } else { format!("params.{at}: {}", e.inner()) };
        rpc_error(error_code::INVALID_PARAMS, message)
    })
}

fn task_wire(task: &Task, version: ProtocolVersion) -> Value {
    match version {
        ProtocolVersion::V0_3 => task.to_v0_3(),
        _ => serde_json::to_value(task).unwrap_or(Value::Null),
    }
}

fn reply(id: Value, result: Result<Value, JsonRpcError>) -> Response {
    let response = match result {
        Ok(v) => JsonRpcResponse::success(id, v),
        Err(e) => JsonRpcResponse::failure(id, e),
    };
    axum::Json(response).into_response()
}

/// One request's handler state.
struct A2a {
    app: AppState,
    /// Who sent the request: the tasks it reaches and what it may do to them.
    principal: Principal,
    version: ProtocolVersion,
    /// The request's W3C `traceparent`: the remote parent of a run it starts.
    traceparent: Option<String>,
}

impl A2a {
    /// `SendMessage`: a new task (run) or the answer to an `input-required` one; the task once it stopped
    /// (or at once with `returnImmediately`).
    async fn send(&self, spec: Option<String>, req: SendMessageRequest) -> Result<Task, JsonRpcError> {
        let immediately = req.configuration.as_ref().and_then(|c| c.return_immediately).unwrap_or(false);
        let run_id = self.begin(spec, req).await?;
        if immediately {
            return self.get(&run_id).await;
        }
        let record = self.app.host.wait_stopped(&run_id).await.map_err(internal)?;
        match record {
            Some(r) => Ok(self.task(&r)),
            None => Err(rpc_error(error_code::INTERNAL_ERROR, format!("run `{run_id}` stopped before it started"))),
        }
    }

    /// Starts the run of a new task, or answers the open task the message continues; the task (run) id.
    async fn begin(&self, spec: Option<String>, req: SendMessageRequest) -> Result<String, JsonRpcError> {
        let message = req.message;
        if let Some(task) = message.task_id.clone().filter(|t| !t.is_empty()) {
            self.answer(&task, &message).await?;
            return Ok(task);
        }
        self.principal.require(Right::Operate).map_err(forbidden)?;
        let name = self.spec_of(spec, req.tenant, req.metadata.as_ref(), message.metadata.as_ref())?;
        let tool = load(&self.app, &name)?;
        let inputs = inputs_of(&tool, &message)?;
        let new = NewRun {
            spec: SpecSource::Named(name.clone()),
            inputs,
            run_id: None,
            durability: Durability::Sync,
            new_turn: false,
            traceparent: self.traceparent.clone(),
            tenant: self.principal.tenant.clone(),
        };
        let run_id = self.app.host.start(new).await.map_err(refused)?;
        let context = message.context_id.filter(|c| !c.is_empty()).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        self.app.a2a_contexts.set(&run_id, context);
        Ok(run_id)
    }

    /// The spec a message to `/a2a` is for.
    fn spec_of(
        &self,
        path: Option<String>,
        tenant: Option<String>,
        request_meta: Option<&Map<String, Value>>,
        message_meta: Option<&Map<String, Value>>,
    ) -> Result<String, JsonRpcError> {
        if let Some(p) = path {
            return Ok(p);
        }
        let named = tenant.filter(|t| !t.is_empty()).or_else(|| {
            [request_meta, message_meta]
                .into_iter()
                .flatten()
                .find_map(|m| m.get("spec").and_then(Value::as_str).map(str::to_string))
        });
        if let Some(n) = named {
            return Ok(n);
        }
        let names = self.app.host.specs().names();
        match names.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(rpc_error(
                error_code::INVALID_PARAMS,
                format!(
                    "name the workflow: `tenant` (1.0), `metadata.spec`, or post to /a2a/<workflow>; the workflows \
                     are: {}",
                    names.join(", ")
                ),
            )),
        }
    }

    /// Answers the first unanswered prompt of task `task_id` with the message (the run continues).
    async fn answer(&self, task_id: &str, message: &Message) -> Result<(), JsonRpcError> {
        let record = self.record(task_id).await?;
        let open = record.pending.iter().find(|p| !record.answers.contains_key(&p.id));
        let (RunStatus::Suspended, Some(pending)) = (record.status, open) else {
            let state = state_of(&record);
            return Err(rpc_error(
                error_code::UNSUPPORTED_OPERATION,
                format!("task `{task_id}` is {state}: it takes no more messages (send one without `taskId`)"),
            ));
        };
        let value = message.parts.iter().find_map(|p| p.data.clone()).unwrap_or_else(|| {
            let text = message.text();
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        });
        self.principal.may_answer(pending).map_err(forbidden)?;
        self.app.host.respond(task_id, &pending.id, value, &self.principal.name).await.map_err(refused)?;
        audit(&self.app, &self.principal, "answer", task_id, json!({"response_id": pending.id})).await;
        Ok(())
    }

    /// The record of task `task_id`, when the principal sees it (another tenant's is not found).
    async fn record(&self, task_id: &str) -> Result<RunRecord, JsonRpcError> {
        match self.app.host.store().run_dyn(task_id).await {
            Ok(Some(r)) if self.principal.sees(&r) => Ok(r),
            Ok(_) => Err(rpc_error(error_code::TASK_NOT_FOUND, format!("no task `{task_id}`"))),
            Err(e) => Err(rpc_error(error_code::INTERNAL_ERROR, e.to_string())),
        }
    }

    /// `GetTask`.
    async fn get(&self, task_id: &str) -> Result<Task, JsonRpcError> {
        if let Some(tenant) = self.app.host.executing_tenant(task_id)
            && self.principal.sees_tenant(tenant.as_deref())
            && let Ok(None) = self.app.host.store().run_dyn(task_id).await
        {
            return Ok(Task {
                id: task_id.to_string(),
                context_id: self.app.a2a_contexts.get(task_id),
                status: TaskStatus { state: TaskState::Working, ..TaskStatus::default() },
                ..Task::default()
            });
        }
        let record = self.record(task_id).await?;
        Ok(self.task(&record))
    }

    /// `CancelTask`: the run stops at its next step boundary; the task once it stopped.
    async fn cancel(&self, task_id: &str) -> Result<Task, JsonRpcError> {
        let record = self.record(task_id).await?;
        self.principal.require(Right::Operate).map_err(forbidden)?;
        if matches!(record.status, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled) {
            return Err(rpc_error(
                error_code::TASK_NOT_CANCELABLE,
                format!("task `{task_id}` has already ended ({})", state_of(&record)),
            ));
        }
        self.app.host.cancel(task_id).await.map_err(|e| rpc_error(error_code::TASK_NOT_CANCELABLE, e.message))?;
        audit(&self.app, &self.principal, "cancel", task_id, Value::Null).await;
        match self.app.host.wait_stopped(task_id).await.map_err(internal)? {
            Some(r) => Ok(self.task(&r)),
            None => Err(rpc_error(error_code::TASK_NOT_FOUND, format!("no task `{task_id}`"))),
        }
    }

    /// `SendStreamingMessage`: the task when it starts, then (once the run stopped) the output as an artifact
    /// and the final status, as server-sent events each holding a JSON-RPC response.
    async fn stream(&self, id: Value, spec: Option<String>, req: SendMessageRequest) -> Response {
        let run_id = match self.begin(spec, req).await {
            Ok(r) => r,
            Err(e) => return reply(id, Err(e)),
        };
        let first = match self.get(&run_id).await {
            Ok(mut t) => {
                if t.status.state.is_terminal() || t.status.state.is_interrupted() {
                    // Already stopped: the first event shows it started; the updates below end it.
                    t.status = TaskStatus { state: TaskState::Working, ..TaskStatus::default() };
                    t.artifacts.clear();
                }
                t
            }
            Err(e) => return reply(id, Err(e)),
        };
        let app = self.app.clone();
        let principal = self.principal.clone();
        let version = self.version;
        let events = stream::once(async move { StreamResponse::Task(first) }).chain(
            stream::once(async move {
                let record = app.host.wait_stopped(&run_id).await.ok().flatten();
                let task = match record {
                    Some(r) => A2a { app: app.clone(), principal, version, traceparent: None }.task(&r),
                    None => Task { id: run_id.clone(), ..Task::default() },
                };
                let mut updates = Vec::new();
                for artifact in &task.artifacts {
                    updates.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: task.id.clone(),
                        context_id: task.context_id.clone(),
                        artifact: artifact.clone(),
                        append: false,
                        last_chunk: true,
                        metadata: None,
                    }));
                }
                updates.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    status: task.status.clone(),
                    metadata: None,
                }));
                stream::iter(updates)
            })
            .flatten(),
        );
        sse(id, version, events)
    }

    /// The task of a run's record.
    fn task(&self, record: &RunRecord) -> Task {
        let run_id = &record.run_id;
        let context_id = self.app.a2a_contexts.get(run_id);
        let agent_message = |text: String, metadata: Option<Map<String, Value>>| Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            context_id: Some(context_id.clone()),
            task_id: Some(run_id.clone()),
            role: Role::Agent,
            parts: vec![Part::text(text)],
            metadata,
            ..Message::default()
        };
        let state = state_of(record);
        let (message, artifacts) = match record.status {
            RunStatus::Completed => {
                let part = match &record.detail {
                    Value::String(s) => Part::text(s.clone()),
                    other => Part::data(other.clone()),
                };
                let artifact = Artifact {
                    artifact_id: "output".into(),
                    name: Some("output".into()),
                    description: Some(format!("The output of workflow `{}`", record.name)),
                    parts: vec![part],
                    ..Artifact::default()
                };
                (None, vec![artifact])
            }
            RunStatus::Failed => {
                let error = match &record.detail {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (Some(agent_message(error, None)), Vec::new())
            }
            RunStatus::Suspended => {
                let pending: Vec<_> = record.pending.iter().filter(|p| !record.answers.contains_key(&p.id)).collect();
                let text = pending.iter().map(|p| p.prompt.as_str()).collect::<Vec<_>>().join("\n");
                let list: Vec<Value> =
                    pending.iter().map(|p| json!({"id": p.id, "prompt": p.prompt, "agent": p.agent})).collect();
                let mut meta = Map::new();
                meta.insert("pending".into(), Value::Array(list));
                (Some(agent_message(text, Some(meta))), Vec::new())
            }
            _ => (None, Vec::new()),
        };
        let mut metadata = Map::new();
        metadata.insert("workflow".into(), json!(record.name));
        Task {
            id: run_id.clone(),
            context_id,
            status: TaskStatus { state, message, timestamp: Some(crate::api::timestamp(record.updated_at_ms)) },
            artifacts,
            history: Vec::new(),
            metadata: Some(metadata),
        }
    }
}

/// The task state of a run.
fn state_of(record: &RunRecord) -> TaskState {
    match record.status {
        RunStatus::Completed => TaskState::Completed,
        RunStatus::Failed => TaskState::Failed,
        RunStatus::Cancelled => TaskState::Canceled,
        RunStatus::Suspended => TaskState::InputRequired,
        _ => TaskState::Working,
    }
}

fn internal(e: ApiError) -> JsonRpcError {
    rpc_error(error_code::INTERNAL_ERROR, e.message)
}

/// A right the request's key does not give (an HTTP `403`): an invalid request, with the reason.
fn forbidden(e: ApiError) -> JsonRpcError {
    rpc_error(error_code::INVALID_REQUEST, e.message)
}

/// A refused start or answer by its kind: what the client sent does not fit (a 4xx: invalid params), or the
/// server could not do it (a 5xx: a store outage, shutting down: internal error).
fn refused(e: ApiError) -> JsonRpcError {
    if e.status.is_server_error() { internal(e) } else { rpc_error(error_code::INVALID_PARAMS, e.message) }
}

/// The inputs of a new run from its first message: its data parts (objects, merged), and its text (its text
/// parts) as the value of the one required input the data leaves unset — or, when the data sets every
/// required input, of the one optional input it leaves unset; inputs with defaults take them.
fn inputs_of(tool: &SpecTool, message: &Message) -> Result<Map<String, Value>, JsonRpcError> {
    let mut inputs = Map::new();
    for part in &message.parts {
        match &part.data {
            Some(Value::Object(m)) => inputs.extend(m.clone()),
            Some(other) => {
                return Err(rpc_error(
                    error_code::INVALID_PARAMS,
                    format!("params.message.parts: a data part must be an object of inputs, found {other}"),
                ));
            }
            None => {}
        }
    }
    let text: String = message.parts.iter().filter_map(|p| p.text.as_deref()).collect();
    if !text.trim().is_empty() {
        let unset =
            |names: Vec<String>| -> Vec<String> { names.into_iter().filter(|n| !inputs.contains_key(n)).collect() };
        let mut open = unset(tool.required_inputs());
        if open.is_empty() {
            open = unset(tool.input_names());
            if open.len() > 1 {
                open.clear();
            }
        }
        match open.as_slice() {
            [one] => {
                let value = match tool.input_type(one) {
                    Some("string") | None => Value::String(text),
                    Some(_) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                };
                inputs.insert(one.clone(), value);
            }
            [] => {}
            many => {
                return Err(rpc_error(
                    error_code::INVALID_PARAMS,
                    format!(
                        "params.message: the workflow needs the inputs {}: send them as a data part (an object), \
                         the text can only stand for one",
                        many.join(", ")
                    ),
                ));
            }
        }
    }
    if let Err(errors) = tool.check(&inputs) {
        return Err(rpc_error(error_code::INVALID_PARAMS, format!("params.message: {}", errors.join("; "))));
    }
    Ok(inputs)
}

/// Server-sent events, each a JSON-RPC response to request `id` holding one stream event in `version`.
fn sse(id: Value, version: ProtocolVersion, events: impl Stream<Item = StreamResponse> + Send + 'static) -> Response {
    let events = events.map(move |e| {
        let body = JsonRpcResponse::success(id.clone(), e.to_wire(version));
        Ok::<Event, Infallible>(Event::default().data(serde_json::to_string(&body).unwrap_or_default()))
    });
    Sse::new(events).into_response()
}
