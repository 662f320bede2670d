//! The HTTP API of SERVER.md §2 (`/api/v1/...`, `/healthz`) and the readiness probe `/readyz`.

use std::convert::Infallible;
use std::time::{Duration, UNIX_EPOCH};

use agentic_engine::{Durability, RunRecord, RunStatus};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;
use crate::access::audit;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::events::{AgentNames, SseEvent, pending_json};
use crate::host::{NewRun, SpecSource, traceparent};

/// Request bodies larger than this are refused with `413` (SERVER.md §2).
pub(crate) const BODY_LIMIT: usize = 10 * 1024 * 1024;

/// The readiness probe's path (behind the token, unlike `/healthz`).
pub(crate) const READINESS_PATH: &str = "/readyz";

/// The API routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/runs", post(create_run).get(list_runs))
        .route("/api/v1/runs/{id}", get(get_run))
        .route("/api/v1/runs/{id}/responses/{response_id}", post(respond))
        .route("/api/v1/runs/{id}/cancel", post(cancel))
        .route("/api/v1/runs/{id}/events", get(events))
        .route("/api/v1/runs/{id}/calls", get(calls))
        .route("/api/v1/runs/{id}/report", get(report))
        .route("/api/v1/runs/{id}/resume", post(resume))
        .route("/api/v1/runs/{id}/fork", post(fork))
        .route("/api/v1/specs", get(specs))
        .route("/api/v1/store/runs", get(store_runs))
        .route("/api/v1/store/runs/{id}", get(store_run))
        .route("/api/v1/store/runs/{id}/records", get(store_records))
        .route("/api/v1/store/runs/{id}/image", get(store_image))
        .route("/api/v1/store/specs/{hash}", get(store_spec))
        .route(crate::auth::LIVENESS_PATH, get(healthz))
        .route(READINESS_PATH, get(readyz))
}

/// `405` for a known path with another method, as `{"error": ..}` naming the method and the path.
pub(crate) async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("method {method} is not allowed on {}", uri.path()))
}

/// A JSON body read strictly: malformed JSON and unknown fields are `400` naming what was wrong, a body over
/// [`BODY_LIMIT`] is `413`, all as `{"error": ..}`. The content type is not required.
pub(crate) struct StrictJson<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| match e {
            BytesRejection::FailedToBufferBody(inner) if inner.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than {BODY_LIMIT} bytes"))
            }
            other => ApiError::bad_request(format!("cannot read the body: {other}")),
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad_request("the body is empty: expected a JSON object"));
        }
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::bad_request("the body must be a JSON object (`{..}`)"));
        }
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = deserialize_named(&mut de)?;
        de.end().map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
        Ok(StrictJson(value))
    }
}

/// Deserialises with a message that names the field (`spec_name: invalid type: ...`, `unknown field `x``).
fn deserialize_named<'de, T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.to_string();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::bad_request(format!("invalid JSON: {message}"))
        } else if path.is_empty() || path == "." || message.starts_with("unknown field") {
            // An unknown field's message names it already.
            ApiError::bad_request(message)
        } else {
            ApiError::bad_request(format!("{path}: {message}"))
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRun {
    spec: Option<String>,
    /// **ext.** With `spec`: the name of the file the text came from (`hello.yaml`, no directory); its stem
    /// names the run when the spec has no `name:` (the CLI sends it).
    file_name: Option<String>,
    spec_name: Option<String>,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
    run_id: Option<String>,
    durability: Option<String>,
    #[serde(default)]
    new_turn: bool,
}

async fn create_run(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    StrictJson(body): StrictJson<CreateRun>,
) -> Result<Response, ApiError> {
    let file_name = match body.file_name {
        Some(name) if body.spec.is_none() => {
            return Err(ApiError::bad_request(format!("file_name `{name}` is for a posted `spec`; give `spec` too")));
        }
        Some(name) if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') => {
            return Err(ApiError::bad_request(format!(
                "file_name: `{name}` is not a file name (such as `hello.yaml`: no directory, not starting with `.`)"
            )));
        }
        other => other,
    };
    let spec = match (body.spec, body.spec_name) {
        (Some(text), None) => SpecSource::Text { text, file_name },
        (None, Some(name)) => SpecSource::Named(name),
        (Some(_), Some(_)) => return Err(ApiError::bad_request("give either `spec` or `spec_name`, not both")),
        (None, None) => {
            return Err(ApiError::bad_request(
                "missing field `spec` (the spec's YAML or JSON text) or `spec_name` (a spec of --specs)",
            ));
        }
    };
    let durability = match body.durability.as_deref() {
        None | Some("sync") => Durability::Sync,
        Some("async") => Durability::Async,
        Some("exit") => Durability::Exit,
        Some(other) => {
            return Err(ApiError::bad_request(format!("durability: `{other}` is not one of `sync`, `async`, `exit`")));
        }
    };
    let new = NewRun {
        spec,
        inputs: body.inputs.unwrap_or_default(),
        run_id: body.run_id,
        durability,
        new_turn: body.new_turn,
        traceparent: traceparent(&headers),
        tenant: principal.tenant.clone(),
    };
    let run_id = app.host.start(new).await?;
    Ok((StatusCode::CREATED, Json(json!({"run_id": run_id, "status": "running"}))).into_response())
}

#[derive(Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// Runs per page when `limit` is not given, and the most a page holds.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

async fn list_runs(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    list_json(&app, &principal, query.status.as_deref(), query.limit.as_deref(), query.cursor.as_deref())
        .await
        .map(Json)
}

/// One page of the runs `principal` sees as `GET /api/v1/runs` answers it (the query's `status`, `limit` and
/// `cursor` as given).
pub(crate) async fn list_json(
    app: &AppState,
    principal: &Principal,
    status: Option<&str>,
    limit: Option<&str>,
    cursor: Option<&str>,
) -> Result<Value, ApiError> {
    let status = match status {
        None | Some("") => None,
        Some(s) => Some(s.parse::<RunStatus>().map_err(|_| {
            ApiError::bad_request(format!(
                "status: `{s}` is not one of `running`, `suspended`, `completed`, `failed`, `cancelled`"
            ))
        })?),
    };
    let limit = match limit {
        None | Some("") => DEFAULT_LIMIT,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return Err(ApiError::bad_request(format!("limit: `{l}` is not a number from 1 to {MAX_LIMIT}"))),
        },
    };
    let mut runs = app.store_for(principal).runs_dyn().await?;
    runs.retain(|r| principal.sees(r) && status.is_none_or(|s| r.status == s));
    // Newest first by creation, which never changes: a run updated while a client pages through the list keeps
    // its place, so every run is listed once. The cursor is the position of the last run of the previous page.
    runs.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then_with(|| a.run_id.cmp(&b.run_id)));
    let start = match cursor {
        None | Some("") => 0,
        Some(cursor) => {
            let (at, id) = cursor
                .split_once(':')
                .and_then(|(at, id)| Some((at.parse::<u64>().ok()?, id)))
                .ok_or_else(|| ApiError::bad_request(format!("cursor: `{cursor}` is not a cursor of this API")))?;
            // The first run after (at, id) in the page order.
            runs.iter()
                .position(|r| r.created_at_ms < at || (r.created_at_ms == at && r.run_id.as_str() > id))
                .unwrap_or(runs.len())
        }
    };
    let page: Vec<&RunRecord> = runs.iter().skip(start).take(limit).collect();
    let next_cursor = match (page.last(), start + page.len() < runs.len()) {
        (Some(last), true) => json!(format!("{}:{}", last.created_at_ms, last.run_id)),
        _ => Value::Null,
    };
    let items: Vec<Value> = page
        .iter()
        .map(|r| {
            json!({
                "run_id": r.run_id,
                "name": r.name,
                "status": r.status.to_string(),
                "pending": r.open_pending().iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
                "updated_at": timestamp(r.updated_at_ms),
            })
        })
        .collect();
    Ok(json!({"runs": items, "next_cursor": next_cursor}))
}

/// RFC 3339 time of milliseconds since the Unix epoch.
pub(crate) fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The run as `GET /api/v1/runs/{id}` answers it, read as `principal` may see it.
pub(crate) async fn run_json(app: &AppState, principal: &Principal, run_id: &str) -> Result<Value, ApiError> {
    let store = app.store_for(principal);
    let Some(record) = store.run_dyn(run_id).await?.filter(|r| principal.sees(r)) else {
        if app.host.is_executing(run_id) {
            // Started a moment ago: the engine has not written its record yet.
            return Ok(json!({"run_id": run_id, "name": null, "status": "running", "output": null,
                             "state": {}, "pending": [], "history": [], "error": null, "steps": 0,
                             "executing": true}));
        }
        return Err(ApiError::no_run(run_id));
    };
    let image = store.load_dyn(run_id).await?;
    let (output, error) = match record.status {
        RunStatus::Completed => (record.detail.clone(), Value::Null),
        RunStatus::Failed => (Value::Null, record.detail.clone()),
        _ => (Value::Null, Value::Null),
    };
    let mut state: Vec<(&String, &Value)> = image.state.iter().collect();
    state.sort_by(|a, b| a.0.cmp(b.0));
    let history: Vec<Value> = image
        .history
        .iter()
        .map(|h| {
            json!({"agent": h.agent, "path": h.path, "inputs": h.inputs, "output": h.output, "attempt": h.attempt,
                   "error": h.error, "started_at_us": h.started_at_us, "ended_at_us": h.ended_at_us})
        })
        .collect();
    Ok(json!({
        "run_id": record.run_id,
        "name": record.name,
        "status": record.status.to_string(),
        "output": output,
        "state": Value::Object(state.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        // A failed or cancelled run's questions take no answer: none is offered (resuming asks them again).
        "pending": pending_json(record.open_pending()),
        "history": history,
        "error": error,
        "steps": image.seq,
        "usage": agentic_engine::budget::usage_by_agent(&image, &record.pending),
        "decisions": image.decisions.iter().map(agentic_engine::DecisionRecord::to_json).collect::<Vec<_>>(),
        "spec": {"name": record.name, "hash": record.spec_hash},
        // Who gave each answer (SERVER.md §8), by response id.
        "answered_by": record.answered_by,
        "created_at": timestamp(record.created_at_ms),
        "updated_at": timestamp(record.updated_at_ms),
        "executing": app.host.is_executing(run_id),
    }))
}

async fn get_run(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    run_json(&app, &principal, &id).await.map(Json)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    value: Value,
}

async fn respond(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((id, response_id)): Path<(String, String)>,
    StrictJson(body): StrictJson<Answer>,
) -> Result<Response, ApiError> {
    app.host.respond(&id, &response_id, body.value, &principal.name).await?;
    audit(&app, &principal, "answer", &id, json!({"response_id": response_id})).await;
    Ok((StatusCode::ACCEPTED, Json(json!({"run_id": id, "response_id": response_id}))).into_response())
}

/// `GET /api/v1/runs/{id}/calls`: the run's journaled model turns and tool calls in journal order (SPEC.md
/// §4), of a run in any status (failed and cancelled ones too), as [`calls_json`] gives them.
async fn calls(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    calls_json(&app, &principal, &id).await.map(Json)
}

/// The JSON array of `GET /api/v1/runs/{id}/calls`: one `{seq, path, agent, item?, type, ...}` per journaled
/// call entry ([`agentic_engine::calls_json`]); an unknown run is `404`.
pub(crate) async fn calls_json(app: &AppState, principal: &Principal, run_id: &str) -> Result<Value, ApiError> {
    let store = &app.store_for(principal);
    let Some(record) = store.run_dyn(run_id).await?.filter(|r| principal.sees(r)) else {
        if app.host.is_executing(run_id) {
            // Started a moment ago: nothing journaled yet.
            return Ok(json!([]));
        }
        return Err(ApiError::no_run(run_id));
    };
    let records = store.records_dyn(run_id).await?;
    let mut names = AgentNames::default();
    names.learn(&records, &record.pending);
    names.complete(store, run_id, &records).await;
    let hub = app.host.hub();
    let named: std::collections::BTreeMap<String, String> = records
        .iter()
        .filter(|r| !r.calls.is_empty())
        .filter_map(|r| {
            let name = names.get(&r.agent_path).or_else(|| hub.agent_name(run_id, &r.agent_path))?;
            Some((r.agent_path.clone(), name))
        })
        .collect();
    Ok(Value::Array(agentic_engine::calls_json(&records, &named)))
}

async fn cancel(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    app.host.cancel(&id).await?;
    audit(&app, &principal, "cancel", &id, Value::Null).await;
    Ok((StatusCode::ACCEPTED, Json(json!({"run_id": id}))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fork {
    at_seq: u64,
    run_id: Option<String>,
    /// Answer the fork's model calls whose request equals one of the original run's from it (SPEC.md §5).
    #[serde(default)]
    reuse_calls: bool,
}

async fn fork(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    StrictJson(body): StrictJson<Fork>,
) -> Result<Response, ApiError> {
    let run_id = app.host.fork(&id, body.at_seq, body.run_id, body.reuse_calls).await?;
    audit(&app, &principal, "fork", &id, json!({"run_id": run_id, "at_seq": body.at_seq})).await;
    Ok((StatusCode::CREATED, Json(json!({"run_id": run_id}))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Resume {
    spec: Option<String>,
    spec_name: Option<String>,
}

/// `POST /api/v1/runs/{id}/resume`, with no body or `{}`: continue the run on its spec; with `{"spec"}` or
/// `{"spec_name"}`: first move it to that spec when its structure is unchanged (SERVER.md §5), else `422`
/// naming the change.
async fn resume(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let upgrade = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let mut de = serde_json::Deserializer::from_slice(&body);
        let resume: Resume = deserialize_named(&mut de)?;
        de.end().map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
        match (resume.spec, resume.spec_name) {
            (Some(text), None) => Some(SpecSource::Text { text, file_name: None }),
            (None, Some(name)) => Some(SpecSource::Named(name)),
            (Some(_), Some(_)) => return Err(ApiError::bad_request("give either `spec` or `spec_name`, not both")),
            (None, None) => None,
        }
    };
    let upgrading = upgrade.is_some();
    if let Some(spec) = upgrade {
        app.host.upgrade(&id, spec).await?;
    }
    app.host.resume(&id).await?;
    audit(&app, &principal, "resume", &id, json!({"upgraded": upgrading})).await;
    Ok((StatusCode::ACCEPTED, Json(json!({"run_id": id}))).into_response())
}

// The store as it is, read-only, for the CLI on a store this server holds (`agentic runs`, `show`, `report`
// print exactly what they print without a server).

async fn store_runs(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Vec<RunRecord>>, ApiError> {
    let mut runs = app.store_for(&principal).runs_dyn().await?;
    runs.retain(|r| principal.sees(r));
    Ok(Json(runs))
}

async fn store_run(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<RunRecord>, ApiError> {
    let record = app.store_for(&principal).run_dyn(&id).await?.filter(|r| principal.sees(r));
    record.map(Json).ok_or_else(|| ApiError::no_run(&id))
}

/// A spec of the archive, to a principal that sees a run of it (a tenant's key reads its own tenant's specs
/// only; the archive is shared, the runs say whose a text is).
async fn store_spec(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(hash): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let store = app.store_for(&principal);
    if principal.tenant.is_some() {
        let runs = store.runs_dyn().await?;
        if !runs.iter().any(|r| principal.sees(r) && r.spec_hash.as_deref() == Some(hash.as_str())) {
            return Err(ApiError::not_found(format!("no spec {hash} in the store's spec archive")));
        }
    }
    match store.spec_dyn(&hash).await? {
        Some(text) => Ok(Json(json!({"hash": hash, "text": text}))),
        None => Err(ApiError::not_found(format!("no spec {hash} in the store's spec archive"))),
    }
}

async fn store_records(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Vec<agentic_engine::StepRecord>>, ApiError> {
    Ok(Json(app.store_for(&principal).records_dyn(&id).await?))
}

async fn store_image(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<agentic_engine::RunImage>, ApiError> {
    Ok(Json(app.store_for(&principal).load_dyn(&id).await?))
}

async fn report(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Html<String>, ApiError> {
    let store = app.store_for(&principal);
    let (run, records) = match agentic_report::load_run(&store, &id).await {
        Ok(loaded) => loaded,
        Err(agentic_report::ReportError::NoRun(_)) => return Err(ApiError::no_run(&id)),
        Err(e) => return Err(ApiError::internal(e.to_string())),
    };
    let html = match agentic_spec::run_topology(&store, &run).await {
        Ok(topology) => agentic_report::render_run(&topology, &run, &records),
        Err(reason) => agentic_report::render_run_without_topology(&run, &records, &reason),
    };
    Ok(Html(html))
}

async fn specs(State(app): State<AppState>) -> Json<Value> {
    Json(json!({"specs": app.host.specs().names()}))
}

/// `GET /healthz` with the token (or on a server without one): liveness, the store's name and the runs
/// executing here. Without the token [`crate::auth::require_token`] answers `{"status": "ok"}` alone.
async fn healthz(State(app): State<AppState>) -> Json<Value> {
    Json(json!({"status": "ok", "store": app.store_label, "runs_in_flight": app.host.in_flight()}))
}

/// `GET /readyz` (behind the token): whether this server should get traffic. `200 {"status": "ready", "store",
/// "store_reachable": true, "accepting_runs": true, "runs_in_flight", "specs": [names of --specs],
/// "shared_store"}`; `503` with `"status": "unavailable"` and an `error` saying why when the store does not
/// answer (a point read of one run record) or the server is shutting down (it accepts no new runs).
async fn readyz(State(app): State<AppState>) -> Response {
    let store = app.host.store();
    let reached = store.run_dyn("readyz-probe").await;
    let accepting = app.host.accepting();
    let error = match (&reached, accepting) {
        (Err(e), _) => Some(format!("the store does not answer: {e}")),
        (Ok(_), false) => Some("the server is shutting down: it accepts no new runs".to_string()),
        (Ok(_), true) => None,
    };
    let mut body = json!({
        "status": if error.is_none() { "ready" } else { "unavailable" },
        "store": app.store_label,
        "store_reachable": reached.is_ok(),
        "accepting_runs": accepting,
        "runs_in_flight": app.host.in_flight(),
        "specs": app.host.specs().names(),
        "shared_store": store.shared_dyn(),
    });
    match error {
        None => Json(body).into_response(),
        Some(error) => {
            body["error"] = Value::String(error);
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

/// The event stream of `GET /api/v1/runs/{id}/events`.
type EventStream = futures::stream::BoxStream<'static, Result<Event, Infallible>>;

/// `GET /api/v1/runs/{id}/events`: the journaled events first (after `Last-Event-ID`, when a client
/// reconnects), then the live ones; the stream ends after the final event (`completed`, `failed`,
/// `cancelled`). On a shared store the run may execute in another server: a follower feeds this server's
/// channel of the run from the store and the other servers (`crate::cluster`).
async fn events(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<KeepAliveStream<EventStream>>, ApiError> {
    let after = match headers.get("last-event-id").map(|v| v.to_str().map(str::trim)) {
        None | Some(Ok("")) => 0,
        Some(Ok(v)) => v.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("Last-Event-ID: `{v}` is not an event id of this stream (a step number)"))
        })?,
        Some(Err(_)) => return Err(ApiError::bad_request("Last-Event-ID: not text")),
    };
    // Subscribe before reading the journal, so that no event falls between the two.
    let live = app.host.hub().subscribe(&id);
    let store = app.host.store().clone();
    let record = store.run_dyn(&id).await?;
    let executing = app.host.is_executing(&id);
    if record.is_none() && !executing {
        return Err(ApiError::no_run(&id));
    }
    let records = match &record {
        Some(_) => store.records_from_dyn(&id, after + 1).await?,
        None => Vec::new(),
    };
    let last = records.last().map_or(after, |r| r.seq);
    let mut names = AgentNames::default();
    names.learn(&records, record.as_ref().map_or(&[][..], |r| &r.pending[..]));
    names.complete(&store, &id, &records).await;
    let hub = app.host.hub().clone();
    let name_of = |path: &str| names.get(path).or_else(|| hub.agent_name(&id, path));
    let mut replay: Vec<SseEvent> = records.iter().flat_map(|r| SseEvent::of_step(r, &name_of)).collect();
    let mut ended = false;
    // A run still closing its execution when it suspended already published `suspended`, maybe before this
    // subscription: its record says so (a duplicate live `suspended` is not passed on).
    if let Some(record) = record.as_ref().filter(|r| !executing || r.status == RunStatus::Suspended)
        && let Some(event) = SseEvent::of_status(record, last)
    {
        ended = event.is_final();
        replay.push(event);
    }
    let suspended = replay.last().is_some_and(|e| e.name == "suspended");
    if !ended {
        // A model call waiting for capacity now says so to a client that connects during the wait.
        replay.extend(app.host.hub().current_waits(&id));
    }
    let head = futures::stream::iter(replay.iter().map(event_of).collect::<Vec<_>>());
    if ended {
        return Ok(sse(head.boxed()));
    }
    if let Some(cluster) = app.host.hub().cluster() {
        cluster.follow(store.clone(), app.host.hub().clone(), &id, last);
    }
    let queue = std::collections::VecDeque::new();
    let tail = Tail { live, store, hub, names, run_id: id, last, live_seq: None, suspended, queue };
    let tail = futures::stream::unfold(Some(tail), |state| async move {
        let mut tail = state?;
        let event = tail.next().await?;
        let next = (!event.is_final()).then_some(tail);
        Some((event_of(&event), next))
    });
    Ok(sse(head.chain(tail).boxed()))
}

/// The live part of an event stream.
struct Tail {
    live: crate::events::Subscription,
    store: agentic_engine::StoreRef,
    /// The agents started here (names of the events of call records read to fill a gap).
    hub: crate::events::EventHub,
    /// The names of the run's agents known when the stream began.
    names: AgentNames,
    run_id: String,
    /// The last journaled step passed on.
    last: u64,
    /// The step of the last journaled event passed on from the live channel: the other events of that step
    /// (a record of several calls) follow it there and pass too; a step's events read from the store did
    /// all pass.
    live_seq: Option<u64>,
    /// Whether the last event passed on was `suspended` (a second one is not passed on).
    suspended: bool,
    /// Events read from the store to fill a gap (`false`), passed on before the live one that revealed it
    /// (`true`).
    queue: std::collections::VecDeque<(SseEvent, bool)>,
}

impl Tail {
    /// The next event not passed on yet: a journaled step at or before `last` was; a step after `last + 1`
    /// first brings the steps between from the store (a run that moved between servers mid-stream), so the
    /// steps arrive in order, each once.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some((event, live)) = self.queue.pop_front() {
                return Some(self.passed(event, live));
            }
            let event = match self.live.recv().await {
                Ok(event) => event,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("an event stream fell {n} events behind; its steps are read from the store");
                    continue;
                }
                Err(RecvError::Closed) => return None,
            };
            if event.name == "suspended" && self.suspended {
                continue;
            }
            match event.seq().filter(|_| event.is_journaled()) {
                Some(seq) if seq < self.last || (seq == self.last && self.live_seq != Some(seq)) => {}
                Some(seq) if seq > self.last + 1 => {
                    if let Ok(missed) = self.store.records_from_dyn(&self.run_id, self.last + 1).await {
                        let missed: Vec<_> = missed.into_iter().filter(|r| r.seq < seq).collect();
                        self.names.learn(&missed, &[]);
                        self.names.complete(&self.store, &self.run_id, &missed).await;
                        let (names, hub, run_id) = (&self.names, &self.hub, &self.run_id);
                        let name_of = |path: &str| names.get(path).or_else(|| hub.agent_name(run_id, path));
                        for record in &missed {
                            self.queue.extend(SseEvent::of_step(record, &name_of).into_iter().map(|e| (e, false)));
                        }
                    }
                    self.queue.push_back((event, true));
                }
                _ => return Some(self.passed(event, true)),
            }
        }
    }

    /// Notes `event` passed on (`live`: from the live channel).
    fn passed(&mut self, event: SseEvent, live: bool) -> SseEvent {
        if let Some(seq) = event.seq().filter(|_| event.is_journaled()) {
            self.last = self.last.max(seq);
            self.live_seq = live.then_some(seq);
        }
        self.suspended = event.name == "suspended";
        event
    }
}

/// The SSE event; a journaled step's id is its sequence number (what `Last-Event-ID` resumes after).
fn event_of(e: &SseEvent) -> Result<Event, Infallible> {
    let event = Event::default().event(e.name).data(e.data.to_string());
    Ok(match e.seq().filter(|_| e.is_journaled()) {
        Some(seq) => event.id(seq.to_string()),
        None => event,
    })
}

fn sse(stream: EventStream) -> Sse<KeepAliveStream<EventStream>> {
    Sse::new(stream).keep_alive(KeepAlive::default())
}
