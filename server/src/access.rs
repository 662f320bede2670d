//! The admin's endpoints of SERVER.md §8 — `POST/GET /api/v1/keys`, `DELETE /api/v1/keys/{id}`, `GET
//! /api/v1/audit` — and [`audit`], which the handlers that answer, cancel, fork and resume call once they did.

use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use agentic_engine::{AuditEntry, Role};

use crate::AppState;
use crate::api::StrictJson;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::keys::{KeyError, NewKey, create_key, key_json, list_keys, revoke_key};

/// Audit entries `GET /api/v1/audit` answers when `limit` is not given, and the most it answers.
const DEFAULT_AUDIT_LIMIT: usize = 100;
const MAX_AUDIT_LIMIT: usize = 10_000;

/// The routes (each needs the admin role: [`crate::auth::required_right`]).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/keys", post(create).get(list))
        .route("/api/v1/keys/{id}", delete(revoke))
        .route("/api/v1/audit", get(read_audit))
}

/// Appends to the audit that `principal` did `action` to `run_id` (the run's tenant is the entry's), with
/// `detail`. The action is done already: a store that cannot take the entry is logged, not answered.
pub(crate) async fn audit(app: &AppState, principal: &Principal, action: &str, run_id: &str, detail: Value) {
    let tenant = match &principal.tenant {
        Some(tenant) => Some(tenant.clone()),
        None => app.host.store().run_dyn(run_id).await.ok().flatten().and_then(|r| r.tenant),
    };
    let entry = AuditEntry {
        at_ms: agentic_engine::now_ms(),
        principal: principal.name.clone(),
        tenant,
        action: action.to_string(),
        run_id: Some(run_id.to_string()),
        detail,
    };
    if let Err(e) = app.host.store().append_audit_dyn(entry).await {
        tracing::error!(run_id, action, by = principal.name, "cannot append to the audit: {e}");
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    name: String,
    /// Required of a tenant-less admin; a tenant's admin creates keys of its own tenant only.
    tenant: Option<String>,
    roles: Vec<Role>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    agents: Vec<String>,
}

/// `POST /api/v1/keys`: `201 {"key", ..the key's fields}`, the key shown this once.
async fn create(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    StrictJson(body): StrictJson<CreateKey>,
) -> Result<Response, ApiError> {
    let tenant = match (&principal.tenant, body.tenant) {
        (Some(own), Some(asked)) if *own != asked => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("tenant: {} creates keys of tenant `{own}` only, not `{asked}`", principal.name),
            ));
        }
        (Some(own), _) => own.clone(),
        (None, Some(asked)) => asked,
        (None, None) => return Err(ApiError::bad_request("missing field `tenant`: the tenant the key belongs to")),
    };
    let new = NewKey { name: body.name, tenant, roles: body.roles, kinds: body.kinds, agents: body.agents };
    let (key, record) = create_key(app.host.store().as_ref(), new, &principal.name).await.map_err(key_error)?;
    app.keys.forget();
    let mut answer = key_json(&record);
    answer["key"] = Value::String(key);
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `GET /api/v1/keys`: `{"keys": [..]}`, the principal's tenant's (every key for a tenant-less admin).
async fn list(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    let keys = list_keys(app.store_for(&principal).as_ref(), principal.tenant.as_deref()).await.map_err(key_error)?;
    Ok(Json(json!({"keys": keys.iter().map(key_json).collect::<Vec<_>>()})))
}

/// `DELETE /api/v1/keys/{id}` (an id or a name): `200` with the key as revoked; another tenant's key is `404`.
async fn revoke(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let revoked = revoke_key(app.host.store().as_ref(), &id, principal.tenant.as_deref(), &principal.name)
        .await
        .map_err(key_error)?;
    app.keys.forget();
    Ok(Json(key_json(&revoked)))
}

#[derive(Deserialize)]
struct AuditQuery {
    limit: Option<String>,
}

/// `GET /api/v1/audit`: `{"entries": [{"at", "principal", "tenant", "action", "run_id", "detail"}]}`, newest
/// first, the principal's tenant's (every entry for a tenant-less admin).
async fn read_audit(
    State(app): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = match query.limit.as_deref() {
        None | Some("") => DEFAULT_AUDIT_LIMIT,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_AUDIT_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(format!("limit: `{l}` is not a number from 1 to {MAX_AUDIT_LIMIT}")));
            }
        },
    };
    // A tenant's entries are among the latest of all: read more than asked, keep the tenant's.
    let read = if principal.tenant.is_some() { MAX_AUDIT_LIMIT } else { limit };
    let entries = app.store_for(&principal).audit_dyn(read).await?;
    let entries: Vec<Value> = entries
        .into_iter()
        .filter(|e| principal.sees_tenant(e.tenant.as_deref()))
        .take(limit)
        .map(|e| {
            json!({
                "at": agentic_engine::rfc3339_ms(e.at_ms),
                "principal": e.principal,
                "tenant": e.tenant,
                "action": e.action,
                "run_id": e.run_id,
                "detail": e.detail,
            })
        })
        .collect();
    Ok(Json(json!({"entries": entries})))
}

fn key_error(error: KeyError) -> ApiError {
    match error {
        KeyError::Invalid { .. } => ApiError::bad_request(error.to_string()),
        KeyError::NotFound(_) => ApiError::not_found(error.to_string()),
        KeyError::Store(e) => e.into(),
    }
}
