//! The web UI (SERVER.md §3): server-rendered pages (minijinja, HTML auto-escaped) over the same data as the
//! API, plus one small script and one stylesheet served by the binary under `/assets/` (no external asset).
//!
//! Everything a page shows that comes from a run (prompts, answers, output, state) goes through the
//! templates' auto-escaping, and the script only ever puts run data into the page as text
//! (`textContent`). The pages also carry a strict Content-Security-Policy (scripts and styles from this
//! server only, no inline script): a second line of defence.

use std::sync::LazyLock;

use agentic_engine::{PendingKind, RunStatus, now_ms};
use axum::extract::{Extension, Form, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use minijinja::Environment;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::api::{list_json, run_json, timestamp};
use crate::auth::{Principal, Right};
use crate::error::ApiError;

/// The script of every page.
const APP_JS: &str = include_str!("../ui/assets/app.js");
/// The stylesheet of every page.
const STYLE_CSS: &str = include_str!("../ui/assets/style.css");

/// The assets' URLs carry a hash of their content, so they can be cached for good.
static ASSETS: LazyLock<Assets> = LazyLock::new(|| Assets {
    js: format!("app-{:016x}.js", fnv1a(APP_JS.as_bytes())),
    css: format!("style-{:016x}.css", fnv1a(STYLE_CSS.as_bytes())),
});

struct Assets {
    js: String,
    css: String,
}

/// FNV-1a, 64 bits: a content hash for the assets' URLs (not a security measure).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The page templates; their names end in `.html`, so minijinja escapes every value as HTML.
static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    let templates = [
        ("base.html", include_str!("../ui/templates/base.html")),
        ("macros.html", include_str!("../ui/templates/macros.html")),
        ("runs.html", include_str!("../ui/templates/runs.html")),
        ("run.html", include_str!("../ui/templates/run.html")),
        ("inbox.html", include_str!("../ui/templates/inbox.html")),
        ("new.html", include_str!("../ui/templates/new.html")),
        ("schedules.html", include_str!("../ui/templates/schedules.html")),
        ("login.html", include_str!("../ui/templates/login.html")),
        ("error.html", include_str!("../ui/templates/error.html")),
    ];
    for (name, source) in templates {
        if let Err(e) = env.add_template(name, source) {
            // A broken built-in template is a bug; the tests render every page.
            tracing::error!("web UI template {name}: {e:#}");
        }
    }
    env.add_filter("seg", |s: String| path_segment(&s));
    env.add_filter("short_time", |s: String| short_time(&s));
    env.add_filter("code_spans", |s: String| code_spans(&s));
    // Our own URLs (hex and dots): marked safe so that their slashes are not escaped.
    env.add_global("js", minijinja::Value::from_safe_string(format!("/assets/{}", ASSETS.js)));
    env.add_global("css", minijinja::Value::from_safe_string(format!("/assets/{}", ASSETS.css)));
    env
});

/// The UI's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(runs_page))
        .route("/runs/{id}", get(run_page))
        .route("/inbox", get(inbox_page))
        .route("/inbox.json", get(inbox_json))
        .route("/new", get(new_page))
        .route("/schedules", get(schedules_page))
        .route("/login", get(login_form).post(login_submit))
        .route("/assets/{file}", get(asset))
}

/// An HTML page with the UI's security headers.
struct Page {
    status: StatusCode,
    html: String,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::response::Html(self.html)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                 form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
            ),
        );
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// Renders template `name` for `who` (what its roles allow is shown: `can.answer`, `can.operate`,
/// `can.admin`; its CSRF token `csrf`, which the page's script sends with every change; its name `who`).
fn render_for(who: &Principal, status: StatusCode, name: &str, page: &str, mut context: Value) -> Page {
    context["can"] = json!({"answer": who.can(Right::Answer), "operate": who.can(Right::Operate),
                            "admin": who.can(Right::Admin)});
    context["csrf"] = json!(who.csrf);
    if who.name != "anonymous" {
        let tenant = who.tenant.as_deref().map(|t| format!(" · {t}")).unwrap_or_default();
        context["who"] = json!(format!("{}{tenant}", who.name));
    }
    render(status, name, page, context)
}

/// Renders template `name` with `context` (plus `page`, the nav's current item); a page rendered without a
/// principal (sign-in, errors) offers no action.
fn render(status: StatusCode, name: &str, page: &str, mut context: Value) -> Page {
    context["page"] = json!(page);
    if context.get("can").is_none() {
        context["can"] = json!({"answer": false, "operate": false, "admin": false});
    }
    let rendered = TEMPLATES.get_template(name).and_then(|t| t.render(minijinja::value::Serde(&context)));
    match rendered {
        Ok(html) => Page { status, html },
        Err(e) => {
            tracing::error!("rendering the web UI page {name}: {e:#}");
            Page {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                html: "<!doctype html><title>agentic: error</title><p>This page could not be rendered; see the \
                       server's log.</p>"
                    .to_string(),
            }
        }
    }
}

/// The error page as a response (the auth layer's refusals of pages).
pub(crate) fn error_response(error: &ApiError) -> Response {
    error_page(error).into_response()
}

/// The error page (`404` for an unknown run, else what the API would answer).
fn error_page(error: &ApiError) -> Page {
    let heading = match error.status {
        StatusCode::NOT_FOUND => "Not found",
        s if s.is_server_error() => "Server error",
        _ => "Error",
    };
    render(error.status, "error.html", "", json!({"heading": heading, "message": error.message}))
}

/// The answer to a path no route serves: `404`, as JSON under `/api/`, else as a page.
pub(crate) async fn not_found(uri: Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/") {
        return ApiError::not_found(format!("no such endpoint: {path}")).into_response();
    }
    error_page(&ApiError::not_found(format!("There is no page at {path}."))).into_response()
}

/// Shows a value from a run: a string as its text, anything else as indented JSON.
fn display(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// How many characters of a state value the run page shows.
const SHOWN_CHARS: usize = 2000;

/// `text` cut after [`SHOWN_CHARS`] characters, saying how much is left out and where the whole value is: a
/// state value of megabytes would make the run page as large.
fn shortened(text: String, run_id: &str) -> String {
    let Some((cut, _)) = text.char_indices().nth(SHOWN_CHARS) else { return text };
    let more = text[cut..].chars().count();
    format!(
        "{}… ({more} more characters; the whole value is in GET /api/v1/runs/{} and the report)",
        &text[..cut],
        path_segment(run_id)
    )
}

/// A prompt's text cut at its Markdown code spans: `(text, is_code)` pieces in order, so that a template shows
/// `` `book` `` as code (escaped like any text) rather than with its backticks. A backtick without a closing
/// one stays text.
pub(crate) fn code_spans(s: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else { break };
        if open > 0 {
            out.push((rest[..open].to_string(), false));
        }
        out.push((rest[open + 1..open + 1 + len].to_string(), true));
        rest = &rest[open + len + 2..];
    }
    if !rest.is_empty() {
        out.push((rest.to_string(), false));
    }
    out
}

/// Percent-encodes `s` as one URL path segment (or query value): everything but the unreserved characters.
pub(crate) fn path_segment(s: &str) -> String {
    agentic_report::url_segment(s)
}

/// `2025-01-02T03:04:05.678Z` → `2025-01-02 03:04:05Z`, as the script shows it too.
fn short_time(rfc3339: &str) -> String {
    match (rfc3339.get(..10), rfc3339.get(11..19)) {
        (Some(date), Some(time)) => format!("{date} {time}Z"),
        _ => rfc3339.to_string(),
    }
}

/// The status filters of the runs list (`""`: all).
const FILTERS: [&str; 6] = ["", "running", "suspended", "completed", "failed", "cancelled"];

#[derive(Deserialize)]
struct RunsQuery {
    status: Option<String>,
    cursor: Option<String>,
}

/// `/`: the runs, newest first, with status filters; the script refreshes the first page every 2 s.
async fn runs_page(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<RunsQuery>,
) -> Page {
    let status = query.status.unwrap_or_default();
    let cursor = query.cursor.as_deref().filter(|c| !c.is_empty());
    let (runs, next_cursor, error) = match list_json(&app, &principal, Some(&status), None, cursor).await {
        Ok(page) => (page["runs"].clone(), page["next_cursor"].clone(), None),
        Err(e) => (json!([]), Value::Null, Some(e.message)),
    };
    let live = query.cursor.is_none_or(|c| c.is_empty()) && error.is_none();
    let status = if error.is_some() { String::new() } else { status };
    render_for(
        &principal,
        StatusCode::OK,
        "runs.html",
        "runs",
        json!({"runs": runs, "next_cursor": next_cursor, "status": status, "filters": FILTERS,
               "error": error, "live": live}),
    )
}

/// `/runs/{id}`: status, output, error, pending steps with answer forms (a tool call's decision card, a call in
/// doubt's card: drawn by the script from the `data-call` the page carries), state; the script adds the live
/// timeline and the tool calls' statuses from the run's events. A failed or cancelled run gets no answer form:
/// the page lists the questions it had asked and says that resuming it asks them again.
async fn run_page(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Page {
    let run = match run_json(&app, &principal, &id).await {
        Ok(run) => run,
        Err(e) => return error_page(&e),
    };
    // The answers already in (the run waits for the others; the API's `pending` does not say), and the
    // questions a failed or cancelled run had asked (the API offers none: they take no answer).
    let record = app.store_for(&principal).run_dyn(&id).await.ok().flatten();
    let answered_by: Vec<Value> = record
        .as_ref()
        .map(|r| r.answered_by.iter().map(|(id, by)| json!({"id": id, "by": by})).collect())
        .unwrap_or_default();
    let (answered, withdrawn): (Vec<String>, Vec<Value>) = match &record {
        Some(record) => (
            record.answers.keys().cloned().collect(),
            record.withdrawn_questions().iter().map(|p| json!({"id": p.id, "prompt": p.prompt})).collect(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    // What the principal may answer (an approver narrowed by kinds or agents sees the others without a form).
    let answerable = |id: &str| {
        record.as_ref().and_then(|r| r.pending.iter().find(|p| p.id == id)).is_some_and(|p| principal.answers(p))
    };
    let pending: Vec<Value> = run["pending"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|p| {
                    let done = p["id"].as_str().is_some_and(|id| answered.iter().any(|a| a == id));
                    let may = p["id"].as_str().is_some_and(answerable);
                    json!({"id": p["id"], "prompt": p["prompt"], "agent": p["agent"], "answered": done,
                           "answerable": may,
                           "kind": p["kind"].as_str().unwrap_or("human"), "data": p["data"]})
                })
                .collect()
        })
        .unwrap_or_default();
    let mut state = Vec::new();
    let mut hidden_keys = 0;
    if let Some(map) = run["state"].as_object() {
        for (key, value) in map {
            if key.starts_with('_') {
                hidden_keys += 1;
            } else {
                state.push(json!({"key": key, "value": shortened(display(value), &id)}));
            }
        }
    }
    let optional = |v: &Value| if v.is_null() { Value::Null } else { json!(display(v)) };
    let active = matches!(run["status"].as_str(), Some("running" | "suspended"));
    render_for(
        &principal,
        StatusCode::OK,
        "run.html",
        "run",
        json!({"run": run, "output": optional(&run["output"]), "error": optional(&run["error"]),
               "pending": pending, "withdrawn": withdrawn, "answered_by": answered_by, "state": state, "hidden_keys": hidden_keys,
               "active": active}),
    )
}

/// Every unanswered human step of every suspended run (and of every running run waiting in a `mode: pending`
/// human step), every spent budget waiting for a new limit, and every tool call waiting for approval or left
/// in doubt (SPEC.md §4), the longest waiting first: of the runs `principal` sees, those it may answer.
async fn inbox_items(app: &AppState, principal: &Principal) -> Result<Vec<Value>, ApiError> {
    let runs = app.store_for(principal).runs_dyn().await?;
    // Suspended runs, and running ones whose `mode: pending` human steps wait for an answer.
    let mut waiting: Vec<_> = runs
        .into_iter()
        .filter(|r| principal.sees(r))
        .filter(|r| r.status == RunStatus::Suspended || (r.status == RunStatus::Running && !r.pending.is_empty()))
        .collect();
    waiting.sort_by(|a, b| a.updated_at_ms.cmp(&b.updated_at_ms).then_with(|| a.run_id.cmp(&b.run_id)));
    let now = now_ms();
    Ok(waiting
        .iter()
        .flat_map(|r| {
            // A wait is nobody's to answer; a step past its deadline no longer takes an answer; a budget takes
            // a new limit or `stop`; a tool call a decision, a call in doubt what happened.
            let open = |p: &&agentic_engine::PendingResponse| {
                matches!(
                    p.kind,
                    PendingKind::Human | PendingKind::Budget | PendingKind::ToolCall | PendingKind::InDoubt
                ) && !r.answers.contains_key(&p.id)
                    && !p.timed_out(now)
                    && principal.answers(p)
            };
            r.pending.iter().filter(open).map(|p| {
                let shown = p.to_json();
                json!({"run_id": r.run_id, "name": r.name, "id": p.id, "prompt": p.prompt, "agent": p.agent,
                       "since": timestamp(r.updated_at_ms), "deadline": p.deadline_ms.map(agentic_engine::rfc3339_ms),
                       "time_left": p.deadline_ms.map(|d| time_left(d.saturating_sub(now))),
                       "on_timeout": p.on_timeout, "kind": shown["kind"].as_str().unwrap_or("human"),
                       "data": shown["data"]})
            })
        })
        .collect())
}

/// The time left before a deadline, `ms` milliseconds away, as the inbox shows it (`2h 05m`, `4m 10s`,
/// `42s`); the page's script counts it down with the same words.
fn time_left(ms: u64) -> String {
    let s = ms / 1000;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m {sec:02}s"),
        (h, min, _) => format!("{h}h {min:02}m"),
    }
}

/// `/inbox`: the human steps waiting for an answer, each with its form; the script keeps the list current.
async fn inbox_page(State(app): State<AppState>, Extension(principal): Extension<Principal>) -> Page {
    match inbox_items(&app, &principal).await {
        Ok(items) => render_for(&principal, StatusCode::OK, "inbox.html", "inbox", json!({"items": items})),
        Err(e) => error_page(&e),
    }
}

/// `/inbox.json`: the inbox's items, for its script (`{"items": [{"run_id", "name", "id", "prompt", "agent",
/// "since", "deadline", "time_left", "on_timeout", "kind", "data"}]}`; `deadline`, `time_left` and `on_timeout`
/// null without a deadline; `kind` `human`, `budget`, `tool_call` or `in_doubt`; `data` the pending response's
/// data as the API shows it, null when it has none); unlike the API's `pending`, answered steps of a run still
/// waiting for others are left out.
async fn inbox_json(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"items": inbox_items(&app, &principal).await?})))
}

/// `/schedules`: the store's schedules (as `GET /api/v1/schedules` gives them), their inputs shown as JSON.
async fn schedules_page(State(app): State<AppState>, Extension(principal): Extension<Principal>) -> Page {
    let now = crate::schedule::now_ms();
    let (schedules, error) = match app.store_for(&principal).schedules_dyn().await {
        Ok(list) => {
            let rows: Vec<Value> = list
                .iter()
                .filter(|s| principal.sees_tenant(s.tenant.as_deref()))
                .map(|s| {
                    let mut row = crate::schedule::schedule_json(s, now);
                    row["inputs_text"] = json!(display(&row["inputs"]));
                    row
                })
                .collect();
            (rows, None)
        }
        Err(e) => (Vec::new(), Some(ApiError::from(e).message)),
    };
    render_for(
        &principal,
        StatusCode::OK,
        "schedules.html",
        "schedules",
        json!({"schedules": schedules, "error": error}),
    )
}

/// `/new`: the new-run form for the specs of `--specs`, with each spec's inputs: its `params`, else those
/// inferred from what its agents read (a spec that does not build shows why instead), the required ones
/// marked.
async fn new_page(State(app): State<AppState>, Extension(principal): Extension<Principal>) -> Page {
    let specs: Vec<Value> = app
        .host
        .specs()
        .names()
        .into_iter()
        .map(|name| {
            let parsed = app.host.specs().path(&name).map_err(|e| e.message).and_then(|path| {
                agentic_spec::Spec::from_path(&path).map_err(|e| format!("this spec does not parse: {e}"))
            });
            match parsed {
                Ok(spec) => {
                    let declared = !spec.params().is_empty();
                    // Declared inputs need no build (a spec whose model is not built in still lists them).
                    let inputs = if declared {
                        Ok(agentic_spec::RootInput::of_params(spec.params()))
                    } else {
                        spec.build().map(|b| b.inputs).map_err(|e| format!("its inputs cannot be listed: {e}"))
                    };
                    match inputs {
                        Ok(inputs) => {
                            let inputs: Vec<Value> = inputs
                                .iter()
                                .map(|i| {
                                    json!({"name": i.name, "required": i.required,
                                    "type": i.value_type.unwrap_or("any"),
                                    "default": i.default.as_ref().map(Value::to_string),
                                    "description": match (&i.description, &i.origin) {
                                        (Some(d), _) => d.clone(),
                                        (None, agentic_spec::InputOrigin::ReadBy(_)) => i.why(),
                                        (None, agentic_spec::InputOrigin::Declared) => String::new(),
                                    }})
                                })
                                .collect();
                            json!({"name": name, "declared": declared, "inputs": inputs, "error": null})
                        }
                        Err(error) => json!({"name": name, "declared": false, "inputs": [], "error": error}),
                    }
                }
                Err(error) => json!({"name": name, "declared": false, "inputs": [], "error": error}),
            }
        })
        .collect();
    render_for(&principal, StatusCode::OK, "new.html", "new", json!({"specs": specs}))
}

/// The login page shown to a browser without a credential.
pub(crate) fn login_page(wrong: bool) -> String {
    login(wrong.then_some("That key or token is wrong.")).html
}

fn login(message: Option<&str>) -> Page {
    render(StatusCode::OK, "login.html", "login", json!({"message": message}))
}

/// `GET /login`: the form (the front page when the server has neither a token nor a key).
async fn login_form(State(app): State<AppState>) -> Response {
    if crate::auth::open(&app).await {
        return Redirect::to("/").into_response();
    }
    login(None).into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /login`: an API key or the token sets the `agentic_token` cookie (HttpOnly, SameSite=Strict, and
/// Secure over HTTPS) and goes to the runs; a wrong one shows the form again (`401`).
async fn login_submit(State(app): State<AppState>, Form(form): Form<LoginForm>) -> Response {
    if crate::auth::open(&app).await {
        // Nothing to sign in to: a cookie of an earlier sign-in is dropped, or the browser would keep sending it.
        let mut response = Redirect::to("/").into_response();
        let cleared = format!("{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict", crate::auth::COOKIE);
        if let Ok(cleared) = HeaderValue::from_str(&cleared) {
            response.headers_mut().insert(header::SET_COOKIE, cleared);
        }
        return response;
    }
    let token = form.token.trim();
    match crate::auth::valid(&app, token).await {
        Ok(true) => {}
        Ok(false) => {
            let mut page = login(Some("That key or token is wrong."));
            page.status = StatusCode::UNAUTHORIZED;
            return page.into_response();
        }
        Err(e) => return error_page(&e).into_response(),
    }
    let secure = if app.tls { "; Secure" } else { "" };
    let cookie = format!("{}={token}; Path=/; HttpOnly; SameSite=Strict{secure}", crate::auth::COOKIE);
    let cookie = token.bytes().all(cookie_octet).then(|| HeaderValue::from_str(&cookie).ok()).flatten();
    let Some(cookie) = cookie else {
        let mut page = login(Some(
            "The token is right, but it holds characters a cookie cannot carry (spaces, quotes, commas, \
             semicolons or backslashes): the browser cannot keep it. Use the API with an Authorization header.",
        ));
        page.status = StatusCode::UNPROCESSABLE_ENTITY;
        return page.into_response();
    };
    let mut response = Redirect::to("/").into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

/// Whether a byte may appear in a cookie value unquoted (RFC 6265 `cookie-octet`).
fn cookie_octet(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E)
}

/// `/assets/{file}`: the script and the stylesheet, cached for a year (their names change with them).
async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = if file == ASSETS.js {
        (APP_JS, "text/javascript; charset=utf-8")
    } else if file == ASSETS.css {
        (STYLE_CSS, "text/css; charset=utf-8")
    } else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(path_segment("a b/c?d&é"), "a%20b%2Fc%3Fd%26%C3%A9");
        assert_eq!(short_time("2025-01-02T03:04:05.678Z"), "2025-01-02 03:04:05Z");
        assert_eq!(display(&json!("text")), "text");
        assert_eq!(display(&json!({"a": 1})), "{\n  \"a\": 1\n}");
        assert!(cookie_octet(b'a') && !cookie_octet(b';') && !cookie_octet(b' '));
        let piece = |t: &str, code: bool| (t.to_string(), code);
        assert_eq!(
            code_spans("The budget of `book` is spent (`x`)"),
            [
                piece("The budget of ", false),
                piece("book", true),
                piece(" is spent (", false),
                piece("x", true),
                piece(")", false)
            ]
        );
        assert_eq!(code_spans("a ` lone tick"), [piece("a ` lone tick", false)]);
        assert_eq!(code_spans("`<b>`"), [piece("<b>", true)]);
    }

    #[test]
    fn every_template_parses() {
        for name in ["runs.html", "run.html", "inbox.html", "new.html", "login.html", "error.html"] {
            assert!(TEMPLATES.get_template(name).is_ok(), "{name}");
        }
    }
}
