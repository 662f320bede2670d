//! Who a request is and what it may do (SERVER.md §1, §8).
//!
//! A request presents a credential as `Authorization: Bearer <credential>` or, in a browser, the cookie the
//! login form sets: the server's `--token-env` token (a tenant-less admin) or an API key (`agk_..`, its
//! tenant and roles, [`crate::keys`]). A server with neither a token nor an active key lets everything through
//! as `anonymous`, a tenant-less admin (one user on loopback). Otherwise a request without a valid credential
//! gets `401` — except `GET /healthz`, which answers liveness only (`200 {"status": "ok"}`) so that a load
//! balancer's probe needs no secret.
//!
//! [`require_principal`] puts the request's [`Principal`] in its extensions and refuses, before any handler
//! runs: a right the principal's roles do not give (`403`, [`required_right`]), and a run of another tenant
//! named in the path (`404`, as if it did not exist). Handlers filter lists by [`Principal::sees`] and check
//! answers with [`Principal::may_answer`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic_engine::{KeyRecord, PendingResponse, Role, RunRecord};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// The liveness probe's path, answered without a credential too.
pub(crate) const LIVENESS_PATH: &str = "/healthz";

/// The cookie the web UI's login form sets (it holds the credential given to the form).
pub(crate) const COOKIE: &str = "agentic_token";

/// How long a server uses the keys it read from the store before reading them again: a key created or revoked
/// on another server of the cluster takes effect here within this time (at once on the server that changed it).
pub(crate) const KEYS_FRESH: Duration = Duration::from_secs(1);

/// What a request may need, from the least to the most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Right {
    /// Read runs, events, reports, schedules, specs.
    Read,
    /// Answer a pending response (further narrowed by [`Principal::may_answer`]).
    Answer,
    /// Start, cancel, fork and resume runs; change schedules.
    Operate,
    /// Create, list and revoke keys; read the audit.
    Admin,
}

impl Right {
    /// The least role that gives this right.
    fn role(self) -> Role {
        match self {
            Right::Read => Role::Viewer,
            Right::Answer => Role::Approver,
            Right::Operate => Role::Operator,
            Right::Admin => Role::Admin,
        }
    }
}

/// Who a request is: the token's or a key's holder, or `anonymous`.
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    /// As answers and the audit record it: `key:<name>`, `token`, `anonymous`.
    pub(crate) name: String,
    /// The tenant whose runs it reaches; `None`: every run (the token, anonymous).
    pub(crate) tenant: Option<String>,
    /// Its most allowed role (roles include the ones before them).
    pub(crate) role: Role,
    /// The key's narrowing of answers, for a key whose most allowed role is approver.
    kinds: Vec<String>,
    agents: Vec<String>,
    /// The CSRF token of the credential presented ([`csrf_token`]); empty for `anonymous`.
    pub(crate) csrf: String,
}

impl Principal {
    /// The tenant-less admin a server without credentials, or its token, is.
    fn tenantless(name: &str) -> Self {
        Principal {
            name: name.to_string(),
            tenant: None,
            role: Role::Admin,
            kinds: Vec::new(),
            agents: Vec::new(),
            csrf: String::new(),
        }
    }

    fn of_key(key: &KeyRecord) -> Self {
        let role = key.roles.iter().copied().max().unwrap_or(Role::Viewer);
        let narrowed = role == Role::Approver;
        Principal {
            name: format!("key:{}", key.name),
            tenant: Some(key.tenant.clone()),
            role,
            kinds: if narrowed { key.kinds.clone() } else { Vec::new() },
            agents: if narrowed { key.agents.clone() } else { Vec::new() },
            csrf: String::new(),
        }
    }

    /// Whether the principal's roles give `right`.
    pub(crate) fn can(&self, right: Right) -> bool {
        self.role >= right.role()
    }

    /// `403` naming the role needed, unless the principal's roles give `right`.
    pub(crate) fn require(&self, right: Right) -> Result<(), ApiError> {
        if self.can(right) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("{} (role {}) may not do this: it needs the role {}", self.name, self.role, right.role()),
        ))
    }

    /// Whether the principal reaches `run`: a tenant-less principal every run, a key the runs of its tenant.
    pub(crate) fn sees(&self, run: &RunRecord) -> bool {
        self.sees_tenant(run.tenant.as_deref())
    }

    /// Whether the principal reaches what belongs to `tenant` (a run, a schedule, an audit entry).
    pub(crate) fn sees_tenant(&self, tenant: Option<&str>) -> bool {
        self.tenant.is_none() || self.tenant.as_deref() == tenant
    }

    /// `403` unless the principal may answer `pending`: the answer right, and for an approver narrowed by
    /// kinds or agents, a pending response of one of them.
    pub(crate) fn may_answer(&self, pending: &PendingResponse) -> Result<(), ApiError> {
        self.require(Right::Answer)?;
        let kind = serde_json::to_value(pending.kind).ok();
        let kind = kind.as_ref().and_then(|k| k.as_str()).unwrap_or_default();
        if !self.kinds.is_empty() && !self.kinds.iter().any(|k| k == kind) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} may answer pending responses of kind {} only; `{}` is of kind {kind}",
                    self.name,
                    self.kinds.join(", "),
                    pending.id
                ),
            ));
        }
        if !self.agents.is_empty() && !self.agents.contains(&pending.agent) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} may answer the pending responses of agents {} only; `{}` is agent `{}`'s",
                    self.name,
                    self.agents.join(", "),
                    pending.id,
                    pending.agent
                ),
            ));
        }
        Ok(())
    }

    /// Whether the principal may answer `pending` (what the inbox offers it).
    pub(crate) fn answers(&self, pending: &PendingResponse) -> bool {
        self.may_answer(pending).is_ok()
    }
}

/// The keys read from the store, and when.
type KeysRead = Option<(Instant, Arc<[KeyRecord]>)>;

/// The keys a server read from its store, kept for [`KEYS_FRESH`].
#[derive(Clone, Default)]
pub(crate) struct KeyCache {
    kept: Arc<Mutex<KeysRead>>,
}

impl KeyCache {
    /// The store's keys, read again when older than [`KEYS_FRESH`].
    async fn keys(&self, app: &AppState) -> Result<Arc<[KeyRecord]>, ApiError> {
        if let Some((at, keys)) = self.lock().as_ref()
            && at.elapsed() < KEYS_FRESH
        {
            return Ok(keys.clone());
        }
        let keys: Arc<[KeyRecord]> = app.host.store().keys_dyn().await?.into();
        *self.lock() = Some((Instant::now(), keys.clone()));
        Ok(keys)
    }

    /// Forgets the keys read: the next request reads them again (after a key changed here).
    pub(crate) fn forget(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeysRead> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Who presents `credential`, if anyone: the token's holder, or an active key's.
async fn identify(app: &AppState, credential: Option<&str>) -> Result<Option<Principal>, ApiError> {
    let keys = app.keys.keys(app).await?;
    // Nothing to check against (no token, no active key): a server of one user, whatever is presented.
    let open = app.token.is_none() && keys.iter().all(|k| k.revoked_at_ms.is_some());
    let anonymous = || open.then(|| Principal::tenantless("anonymous"));
    let Some(credential) = credential else {
        return Ok(anonymous());
    };
    if let Some(token) = app.token.as_deref()
        && same(credential, token)
    {
        return Ok(Some(Principal { csrf: csrf_token(credential), ..Principal::tenantless("token") }));
    }
    if let Some(id) = crate::keys::key_id(credential) {
        let hash = crate::keys::hash(credential);
        let key = keys.iter().find(|k| k.id == id && k.revoked_at_ms.is_none() && same(&k.hash, &hash));
        if let Some(key) = key {
            return Ok(Some(Principal { csrf: csrf_token(credential), ..Principal::of_key(key) }));
        }
    }
    Ok(anonymous())
}

/// Whether a request that changes something comes from a page of another site: a browser says so in
/// `Sec-Fetch-Site`, or sends an `Origin` other than the host asked (`Host`, or `X-Forwarded-Host` behind a
/// proxy). Programs send neither. Such a request carries no credential of its own that a page could not
/// forge (the cookie; on a server without credentials, nothing at all), so it is refused.
fn cross_site(headers: &HeaderMap) -> bool {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(site) = value("sec-fetch-site") {
        return !matches!(site, "same-origin" | "none");
    }
    let Some(origin) = value("origin") else { return false };
    let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest).trim_end_matches('/');
    let asked = [value("x-forwarded-host"), value("host")];
    !asked.into_iter().flatten().any(|host| host.eq_ignore_ascii_case(authority))
}

/// Authenticates the request, checks the right its method and path need and that a run it names is the
/// principal's; puts the [`Principal`] in the request's extensions for the handlers.
pub(crate) async fn require_principal(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let safe = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    // Before anything, the sign-in form included (another site signing a browser in with its own key).
    if !safe && cross_site(request.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "a request from another site's page is refused: it may not change anything here (Origin or \
             Sec-Fetch-Site; behind a proxy, pass the Host header through)",
        )
        .into_response();
    }
    // The login form and the UI's static script and stylesheet (no run data) are open: the form needs them.
    if path == "/login" || path.starts_with("/assets/") {
        return next.run(request).await;
    }
    let credential = presented(request.headers());
    let principal = match identify(&app, credential.map(|(c, _)| c)).await {
        Ok(Some(principal)) => principal,
        Ok(None) => return unauthenticated(&path),
        Err(error) => return error.into_response(),
    };
    // The sign-in cookie goes with every request the browser makes to this server, whoever made the page that
    // sends it: a request that changes something must also carry the token only this server's pages hold (a
    // cookie that identifies nobody on an open server is as good as none).
    if let Some((_, true)) = credential
        && !principal.csrf.is_empty()
        && !safe
        && !request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| !principal.csrf.is_empty() && same(t, &principal.csrf))
    {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!("missing or wrong CSRF token (header `{CSRF_HEADER}`): send the request from this server's pages"),
        )
        .into_response();
    }
    if let Err(refused) = principal.require(required_right(request.method(), &path)) {
        return refused.into_response();
    }
    if let Some(run_id) = named_run(&path)
        && let Err(error) = check_run(&app, &principal, &run_id, request.method(), &path).await
    {
        // A page of the web UI gets the UI's error page; everything else the API's JSON.
        return if path.starts_with("/runs/") { crate::ui::error_response(&error) } else { error.into_response() };
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// `401`: for programs (the API, MCP and A2A clients) a JSON answer they can act on; for browsers the login
/// form; for `GET /healthz`, liveness alone.
fn unauthenticated(path: &str) -> Response {
    // Liveness for probes without the token: that the process answers, and nothing about its store or runs.
    if path == LIVENESS_PATH {
        return axum::Json(serde_json::json!({"status": "ok"})).into_response();
    }
    let program = path.starts_with("/api/")
        || path == crate::api::READINESS_PATH
        || path == crate::mcp::PATH
        || path == "/a2a"
        || path.starts_with("/a2a/")
        || path.starts_with("/.well-known/");
    if program {
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong credential: send the header `Authorization: Bearer <API key or token>`",
        )
        .into_response();
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return response;
    }
    (StatusCode::UNAUTHORIZED, Html(crate::ui::login_page(false))).into_response()
}

/// The right a request needs by its method and path (SERVER.md §8's table): reading is a viewer's; answering
/// an approver's; starting, cancelling, forking, resuming and schedule changes an operator's; keys and the
/// audit an admin's. MCP and A2A requests need reading here; what their calls do is checked where they act.
pub(crate) fn required_right(method: &Method, path: &str) -> Right {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", "v1", "keys", ..] | ["api", "v1", "audit", ..] => Right::Admin,
        _ if method == Method::GET || method == Method::HEAD || method == Method::OPTIONS => Right::Read,
        ["api", "v1", "runs", _, "responses", _] => Right::Answer,
        ["mcp"] | ["a2a", ..] => Right::Read,
        // Anything else that changes something: runs, cancels, forks, resumes, schedules, unknown paths.
        _ => Right::Operate,
    }
}

/// The run a path names: `/api/v1/runs/{id}/..`, `/api/v1/store/runs/{id}/..`, `/runs/{id}` (percent-decoded).
pub(crate) fn named_run(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let raw = match segments.as_slice() {
        ["api", "v1", "runs", id, ..] | ["api", "v1", "store", "runs", id, ..] | ["runs", id, ..] => *id,
        _ => return None,
    };
    let decoded = percent_decode(raw)?;
    (!decoded.is_empty()).then_some(decoded)
}

/// `404` when the run `run_id` exists and belongs to another tenant than the principal's (as when it does not
/// exist); for an answer, `403` when the principal may not answer that pending response.
async fn check_run(
    app: &AppState,
    principal: &Principal,
    run_id: &str,
    method: &Method,
    path: &str,
) -> Result<(), ApiError> {
    if principal.tenant.is_none() && principal.role == Role::Admin {
        return Ok(());
    }
    let Some(record) = app.host.store().run_dyn(run_id).await? else {
        // Unknown here, or started a moment ago and not recorded yet: only its starter's tenant is told so.
        return match app.host.executing_tenant(run_id) {
            Some(tenant) if !principal.sees_tenant(tenant.as_deref()) => Err(ApiError::no_run(run_id)),
            _ => Ok(()),
        };
    };
    if !principal.sees(&record) {
        return Err(ApiError::no_run(run_id));
    }
    if method == Method::POST
        && let ["api", "v1", "runs", _, "responses", response] =
            path.trim_start_matches('/').split('/').collect::<Vec<_>>().as_slice()
        && let Some(response) = percent_decode(response)
        && let Some(pending) = record.pending.iter().find(|p| p.id == response)
    {
        principal.may_answer(pending)?;
    }
    Ok(())
}

/// A path segment percent-decoded as axum's `Path` decodes it (`None`: not UTF-8 once decoded).
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s).decode_utf8().ok().map(std::borrow::Cow::into_owned)
}

/// The credential a request presents, and whether it came in the sign-in cookie: its bearer token, else the
/// cookie.
pub(crate) fn presented(headers: &HeaderMap) -> Option<(&str, bool)> {
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        // The scheme's name is case-insensitive (RFC 9110 §11.1).
        let (scheme, credential) = value.trim_start().split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| (credential.trim(), false));
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| (value, true))
}

/// The header a page's script sends its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// The CSRF token of `credential`: the SHA-256 of a fixed prefix and the credential, 64 hex digits. The same on
/// every server of a cluster (no session state), and it tells nothing of the credential.
pub(crate) fn csrf_token(credential: &str) -> String {
    crate::keys::hash(&format!("agentic-csrf\0{credential}"))
}

/// Compares in time independent of where the two differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the server lets everything through: neither a token nor an active key (or the keys cannot be read:
/// then it is not open).
pub(crate) async fn open(app: &AppState) -> bool {
    identify(app, None).await.is_ok_and(|p| p.is_some())
}

/// Whether `credential` is the token's or an active key's (the login form checks what it is given).
pub(crate) async fn valid(app: &AppState, credential: &str) -> Result<bool, ApiError> {
    Ok(identify(app, Some(credential)).await?.is_some_and(|p| p.name != "anonymous"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn rights_follow_the_method_and_path() {
        let cases = [
            (Method::GET, "/api/v1/runs", Right::Read),
            (Method::GET, "/api/v1/runs/r1/events", Right::Read),
            (Method::GET, "/inbox", Right::Read),
            (Method::POST, "/api/v1/runs/r1/responses/q1", Right::Answer),
            (Method::POST, "/api/v1/runs", Right::Operate),
            (Method::POST, "/api/v1/runs/r1/cancel", Right::Operate),
            (Method::POST, "/api/v1/runs/r1/fork", Right::Operate),
            (Method::POST, "/api/v1/runs/r1/resume", Right::Operate),
            (Method::POST, "/api/v1/schedules", Right::Operate),
            (Method::DELETE, "/api/v1/schedules/s1", Right::Operate),
            (Method::GET, "/api/v1/keys", Right::Admin),
            (Method::POST, "/api/v1/keys", Right::Admin),
            (Method::GET, "/api/v1/audit", Right::Admin),
            (Method::POST, "/mcp", Right::Read),
            (Method::POST, "/a2a/hello", Right::Read),
            (Method::POST, "/nowhere", Right::Operate),
            (Method::POST, "/api/v1/runs/r1/responses/q1/", Right::Answer),
        ];
        for (method, path, right) in cases {
            assert_eq!(required_right(&method, path), right, "{method} {path}");
        }
    }

    #[test]
    fn a_page_of_another_site_is_told_by_sec_fetch_site_or_its_origin() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        assert!(!cross_site(&headers(&[])), "a program");
        assert!(!cross_site(&headers(&[("sec-fetch-site", "same-origin"), ("origin", "http://x")])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(!cross_site(&headers(&[("origin", "http://127.0.0.1:7878"), ("host", "127.0.0.1:7878")])));
        assert!(cross_site(&headers(&[("origin", "https://evil.example"), ("host", "127.0.0.1:7878")])));
        assert!(cross_site(&headers(&[("origin", "null"), ("host", "127.0.0.1:7878")])));
        let proxied =
            [("origin", "https://agentic.example"), ("host", "10.0.0.5:7878"), ("x-forwarded-host", "agentic.example")];
        assert!(!cross_site(&headers(&proxied)));
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        let mut map = HeaderMap::new();
        map.insert(header::AUTHORIZATION, "bearer abc ".parse().unwrap());
        assert_eq!(presented(&map), Some(("abc", false)));
        map.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(presented(&map), None);
    }

    #[test]
    fn runs_are_named_by_the_api_the_store_api_and_the_run_page() {
        assert_eq!(named_run("/api/v1/runs/r%201/events").as_deref(), Some("r 1"));
        assert_eq!(named_run("/api/v1/store/runs/abc/records").as_deref(), Some("abc"));
        assert_eq!(named_run("/runs/abc").as_deref(), Some("abc"));
        assert_eq!(named_run("/api/v1/runs"), None);
        assert_eq!(named_run("/api/v1/runs/"), None);
        assert_eq!(named_run("/api/v1/runs/%zz").as_deref(), Some("%zz"));
        assert_eq!(named_run("/api/v1/runs/%ff"), None);
    }

    #[test]
    fn an_approver_narrowed_to_tool_calls_answers_nothing_else() {
        let key = KeyRecord {
            id: "k1".into(),
            name: "ann".into(),
            tenant: "acme".into(),
            roles: vec![Role::Approver],
            kinds: vec!["tool_call".into()],
            agents: Vec::new(),
            hash: String::new(),
            created_at_ms: 0,
            created_by: String::new(),
            revoked_at_ms: None,
        };
        let ann = Principal::of_key(&key);
        let human = PendingResponse::new("q1", "approve?", "approver");
        let mut call = PendingResponse::new("c1", "call refund", "desk");
        call.kind = agentic_engine::PendingKind::ToolCall;
        assert!(ann.may_answer(&call).is_ok());
        let refused = ann.may_answer(&human).unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(
            refused.message,
            "key:ann may answer pending responses of kind tool_call only; `q1` is of kind human"
        );
        assert!(ann.require(Right::Operate).is_err());
        // An operator answers anything, whatever its key's narrowing.
        let op = Principal::of_key(&KeyRecord { roles: vec![Role::Approver, Role::Operator], ..key });
        assert!(op.may_answer(&human).is_ok());
    }
}
