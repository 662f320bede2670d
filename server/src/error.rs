//! The errors of the server: [`ServeError`] for starting and stopping it, [`ApiError`] for one request.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The listen address is not a loopback address and no token is configured (SERVER.md §1).
    #[error(
        "refusing to listen on {addr} without a token: a non-loopback address needs one (set ${token_env}, or \
         name the variable with --token-env), or an API key in the store (agentic keys create)"
    )]
    TokenRequired {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The variable the token is read from.
        token_env: String,
    },
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// `--specs DIR` cannot be read.
    #[error("cannot read the specs directory {dir}: {source}")]
    Specs {
        /// The directory.
        dir: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The specs directory's `schedules.yaml` cannot be read, or a schedule it lists is invalid (the message
    /// names the line, the schedule and the field).
    #[error("{}: {message}", file.display())]
    Schedules {
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong, and where.
        message: String,
    },
    /// The store failed while the server started (listing the runs to resume).
    #[error("store: {0}")]
    Store(#[from] agentic_engine::StoreError),
    /// The HTTP server failed.
    #[error("http server: {0}")]
    Http(std::io::Error),
    /// `--tls-cert`/`--tls-key` cannot be used (the message names the file and why).
    #[error("tls: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

/// An error answered to one request: a status code and `{"error": "<what was wrong>"}` (SERVER.md §2), with
/// extra fields when there is more to say (`errors` for an invalid spec).
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) extra: Option<(&'static str, Value)>,
    /// What was refused, for the protocols that map it (MCP, A2A) without reading the message.
    pub(crate) kind: Refused,
}

/// The kind of an [`ApiError`] the MCP and A2A endpoints map to their own errors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Refused {
    /// The run's inputs do not fit its spec: each error's text (`input `n`: missing ...`).
    Inputs(Vec<String>),
    /// Anything else.
    #[default]
    Other,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), extra: None, kind: Refused::Other }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// The one answer for a run id the store does not hold.
    pub(crate) fn no_run(run_id: &str) -> Self {
        Self::not_found(format!("no run `{run_id}`"))
    }

    pub(crate) fn with(mut self, key: &'static str, value: Value) -> Self {
        self.extra = Some((key, value));
        self
    }
}

/// A store failure by its kind: the store unreachable `503` (with `Retry-After`: try again), a lease lost to
/// another server `409`, an unknown run `404`, another backend failure or a corrupt record `500`.
impl From<agentic_engine::StoreError> for ApiError {
    fn from(e: agentic_engine::StoreError) -> Self {
        use agentic_engine::StoreError;
        let message = format!("store: {e}");
        match e {
            StoreError::Unavailable { .. } => ApiError::unavailable(message),
            StoreError::LeaseLost { .. } => ApiError::conflict(message),
            StoreError::UnknownRun(_) => ApiError::not_found(message),
            _ => ApiError::internal(message),
        }
    }
}

/// A run that could not start or go on: `503` (with `Retry-After`) when its store could not be reached
/// ([`agentic_engine::AgentError::is_store_unavailable`]), else `500`; `message` says what was being done.
pub(crate) fn run_failure(message: String, error: &agentic_engine::AgentError) -> ApiError {
    if error.is_store_unavailable() { ApiError::unavailable(message) } else { ApiError::internal(message) }
}

/// A fork refused by its kind: an unknown run `404`, a step beyond the journal `422`, a taken id `409`, an
/// invalid id `400`, the store failing as [`From<StoreError>`] says.
impl ApiError {
    pub(crate) fn of_fork(run_id: &str, e: agentic_engine::ForkError) -> Self {
        use agentic_engine::ForkError;
        match e {
            ForkError::UnknownRun(_) => ApiError::no_run(run_id),
            e @ ForkError::BeyondEnd { .. } => ApiError::unprocessable(format!("at_seq: {e}")),
            e @ ForkError::IdTaken(_) => ApiError::conflict(format!("run_id: {e}")),
            e @ ForkError::InvalidId(_) => ApiError::bad_request(format!("run_id: {e}")),
            ForkError::Store(e) => ApiError::from(e),
            e => ApiError::internal(e.to_string()),
        }
    }
}

/// A run's spec that could not be read back or moved: the store failing as [`From<StoreError>`] says, anything
/// else (missing, invalid, a changed structure) `422`.
impl From<agentic_spec::RunSpecError> for ApiError {
    fn from(e: agentic_spec::RunSpecError) -> Self {
        match e {
            agentic_spec::RunSpecError::Store { source, .. } => ApiError::from(source),
            e => ApiError::unprocessable(e.to_string()),
        }
    }
}

/// An answer refused by its kind: an unknown run or response `404`, a run that waits for no answer, a step
/// past its deadline, a wait or a response answered already `409`, no response named while several wait
/// `400`, the store failing as [`From<StoreError>`] says.
impl From<agentic_engine::RespondError> for ApiError {
    fn from(e: agentic_engine::RespondError) -> Self {
        use agentic_engine::RespondError;
        let message = e.to_string();
        match e {
            RespondError::UnknownRun { .. } | RespondError::NotPending { .. } => ApiError::not_found(message),
            RespondError::NotSuspended { .. }
            | RespondError::TimedOut { .. }
            | RespondError::NotAnswerable { .. }
            | RespondError::AlreadyAnswered { .. }
            | RespondError::StaleAnswer { .. } => ApiError::conflict(message),
            RespondError::Ambiguous { .. } | RespondError::InvalidAnswer { .. } => ApiError::bad_request(message),
            RespondError::Store { source, .. } => ApiError { message, ..ApiError::from(source) },
            _ => ApiError::internal(message),
        }
    }
}

/// What every `503` answers in `Retry-After`, in seconds: the server is shutting down or its store cannot be
/// reached, and a database restart takes about this long.
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

impl IntoResponse for ApiError {
    /// `{"error": ..}` (plus the extra field) with the status; a `503` also says `Retry-After:
    /// RETRY_AFTER_SECS`.
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.message});
        if let Some((key, value)) = self.extra {
            body[key] = value;
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            let retry = [(axum::http::header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())];
            return (self.status, retry, axum::Json(body)).into_response();
        }
        (self.status, axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agentic_engine::{ForkError, StoreError};

    fn unreachable() -> StoreError {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        StoreError::unavailable("postgres", "run in store postgres://h/db: refused", Some(std::sync::Arc::new(refused)))
    }

    /// The status, the `Retry-After` header and the body of `e` as answered.
    async fn answered(e: ApiError) -> (u16, Option<String>, String) {
        let response = e.into_response();
        let status = response.status().as_u16();
        let retry = response.headers().get(axum::http::header::RETRY_AFTER).map(|v| v.to_str().unwrap().to_string());
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, retry, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn an_unreachable_store_is_503_with_retry_after_another_failure_500_without() {
        assert_eq!(
            answered(ApiError::from(unreachable())).await,
            (
                503,
                Some("1".to_string()),
                r#"{"error":"store: store unavailable: run in store postgres://h/db: refused"}"#.to_string()
            )
        );
        let fork = ApiError::of_fork("r1", ForkError::Store(unreachable()));
        assert_eq!(answered(fork).await.0, 503);
        assert_eq!(
            answered(ApiError::from(StoreError::backend("put_spec in store postgres://h/db: permission denied"))).await,
            (
                500,
                None,
                r#"{"error":"store: store backend: put_spec in store postgres://h/db: permission denied"}"#.to_string()
            )
        );
        // A run that could not start because its store went away is the same 503.
        let error = agentic_engine::AgentError::Store { run_id: "r1".into(), cause: unreachable().into() };
        let refused = run_failure(format!("run `r1` could not start: {error}"), &error);
        assert_eq!(answered(refused).await.0, 503);
    }
}
