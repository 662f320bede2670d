//! The bearer token (SERVER.md §1): with a token configured every request carries
//! `Authorization: Bearer <token>`, or, in a browser, the cookie the login form sets; else `401`. One
//! exception: `GET /healthz` without the token answers liveness only (`200 {"status": "ok"}`), so that a load
//! balancer's probe needs no secret; with the token it answers the whole body of SERVER.md §2.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// The liveness probe's path, answered without the token too.
pub(crate) const LIVENESS_PATH: &str = "/healthz";

/// The cookie the web UI's login form sets.
pub(crate) const COOKIE: &str = "agentic_token";

/// Refuses a request without the configured token (`401`); lets everything through when none is configured.
pub(crate) async fn require_token(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = app.token.as_deref() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    // The login form and the UI's static script and stylesheet (no run data) are open: the form needs them.
    let open = path == "/login" || path.starts_with("/assets/");
    if open || presented(request.headers()).is_some_and(|t| same(t, token)) {
        return next.run(request).await;
    }
    // Liveness for probes without the token: that the process answers, and nothing about its store or runs.
    if path == LIVENESS_PATH {
        return axum::Json(serde_json::json!({"status": "ok"})).into_response();
    }
    // Programs (the API, MCP and A2A clients) get a JSON answer they can act on; browsers the login form.
    let program = path.starts_with("/api/")
        || path == crate::api::READINESS_PATH
        || path == crate::mcp::PATH
        || path == "/a2a"
        || path.starts_with("/a2a/")
        || path.starts_with("/.well-known/");
    if program {
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send the header `Authorization: Bearer <token>`",
        )
        .into_response();
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return response;
    }
    (StatusCode::UNAUTHORIZED, Html(crate::ui::login_page(false))).into_response()
}

/// The token a request presents: its bearer token, else the login cookie.
fn presented(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return value.strip_prefix("Bearer ").map(str::trim);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Compares in time independent of where the two differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who a request that passed [`require_token`] is, as answers record it (`by`, SPEC.md §4): `token` when the
/// server has a `--token-env` token (the request presented it), `anonymous` when it has none.
pub(crate) fn principal(app: &AppState) -> &'static str {
    if app.token.is_some() { "token" } else { "anonymous" }
}
