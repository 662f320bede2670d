//! The CLI on a store that `agentic serve` holds: the server advertises itself in the store directory
//! (`server.json`), and the commands go through its HTTP API instead of failing with "store in use".
//!
//! `runs`, `show` and `report` read the store through the server ([`RemoteStore`], read-only) and print what
//! they print without one; `respond`, `resume`, `run` and `fork` ask the server to act and wait for the run to
//! stop (completed, suspended, failed or cancelled), then print its outcome as they do locally.

use std::path::Path;
use std::time::Duration;

use agentic_engine::{CheckpointStore, RunImage, RunRecord, RunStatus, StepRecord, StoreError};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// How long the CLI waits for one answer of the server before it says the server does not answer (exit 75),
/// unless `$AGENTIC_SERVER_TIMEOUT` gives other seconds.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// [`REQUEST_TIMEOUT`], or the seconds in `$AGENTIC_SERVER_TIMEOUT`.
fn request_timeout() -> Duration {
    std::env::var("AGENTIC_SERVER_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map_or(REQUEST_TIMEOUT, Duration::from_secs)
}

/// The variable the CLI reads an API key from (SERVER.md §8): sent to the server instead of its token.
pub(crate) const KEY_ENV: &str = "AGENTIC_KEY";

/// A server holding a store, as its `server.json` advertises it.
#[derive(Clone)]
pub(crate) struct Remote {
    url: String,
    token: Option<String>,
    token_env: Option<String>,
    http: reqwest::Client,
}

impl Remote {
    /// The server advertised in `dir`, if any.
    pub(crate) fn find(dir: &Path) -> Option<Remote> {
        let text = std::fs::read_to_string(dir.join(agentic_server::SERVER_FILE)).ok()?;
        let advert: Value = serde_json::from_str(&text).ok()?;
        let url = advert.get("url")?.as_str()?.trim_end_matches('/').to_string();
        let token_env = advert.get("token_env").and_then(Value::as_str).map(str::to_string);
        // An API key in $AGENTIC_KEY, else the server's token from the variable it names.
        let token = std::env::var(KEY_ENV)
            .ok()
            .filter(|k| !k.is_empty())
            .or_else(|| token_env.as_deref().and_then(|name| std::env::var(name).ok()).filter(|t| !t.is_empty()));
        // A server that accepts connections but does not answer (paused, overloaded) is "unavailable" after
        // a while, not a command that hangs: every call is a short API request (the CLI polls for outcomes).
        let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(5)).timeout(request_timeout());
        // A server on HTTPS advertises its certificate's file: trusted here, as the server's own (a self-signed
        // certificate works on the machine that holds the store).
        if let Some(cert) = advert.get("tls_cert").and_then(Value::as_str)
            && let Ok(pem) = std::fs::read(cert)
            && let Ok(certs) = reqwest::Certificate::from_pem_bundle(&pem)
        {
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().unwrap_or_else(|_| reqwest::Client::new());
        Some(Remote { url, token, token_env, http })
    }

    /// The server's base URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `request`; returns the status and the JSON body (`null` when there is none). Errors:
    /// [`RemoteError::Unreachable`] when the server does not answer, [`RemoteError::Refused`] for `401`.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<(u16, Value), RemoteError> {
        let response = request.send().await.map_err(|e| {
            if certificate_refused(&e) {
                return RemoteError::Failed(format!(
                    "the server at {} presents a certificate this command does not trust: {}; a self-signed \
                     certificate must not be a CA's (openssl: -addext basicConstraints=critical,CA:FALSE) and the \
                     server advertises its file in server.json",
                    self.url,
                    super::error_chain(&e)
                ));
            }
            let e = if e.is_timeout() {
                format!("no answer within {} s ($AGENTIC_SERVER_TIMEOUT)", request_timeout().as_secs())
            } else {
                e.to_string()
            };
            RemoteError::Unreachable(format!("the server at {} does not answer: {e}", self.url))
        })?;
        let status = response.status().as_u16();
        let key_set = std::env::var(KEY_ENV).is_ok_and(|k| !k.is_empty());
        if status == 401 {
            let how = match (&self.token_env, &self.token) {
                _ if key_set => format!("it refuses the key in ${KEY_ENV} (unknown or revoked)"),
                (Some(name), Some(_)) => format!("it refuses the token in ${name}; set ${name} to the server's token"),
                (Some(name), None) => {
                    format!("it needs a key or a token; set ${KEY_ENV} to an API key, or ${name} to the server's token")
                }
                (None, _) => format!("it needs an API key; set ${KEY_ENV} to one"),
            };
            return Err(RemoteError::Refused(format!("the server at {} refused the request: {how}", self.url)));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| RemoteError::Unreachable(format!("reading the answer of {}: {e}", self.url)))?;
        if status == 403 {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            return Err(RemoteError::Refused(format!(
                "the server at {} refused the request: {}",
                self.url,
                error_of(&body, status)
            )));
        }
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    /// `GET path` as `T`; `None` for 404.
    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, RemoteError> {
        let (status, body) = self.send(self.request(reqwest::Method::GET, path)).await?;
        match status {
            200 => serde_json::from_value(body)
                .map(Some)
                .map_err(|e| RemoteError::Failed(format!("unexpected answer to {path}: {e}"))),
            404 => Ok(None),
            _ => Err(RemoteError::Failed(error_of(&body, status))),
        }
    }

    /// `DELETE path`: the status and the JSON answer.
    pub(crate) async fn delete(&self, path: &str) -> Result<(u16, Value), RemoteError> {
        self.send(self.request(reqwest::Method::DELETE, path)).await
    }

    /// `POST path` with `body`: the status and the JSON answer.
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), RemoteError> {
        self.send(self.request(reqwest::Method::POST, path).json(body)).await
    }

    /// [`Remote::wait_stopped`], with Ctrl-C as without a server: the first one cancels the run on the server
    /// (it stops at its next step boundary and is recorded `cancelled`; `agentic resume` continues it), a
    /// second one exits at once with status 130.
    pub(crate) async fn wait_stopped_or_cancel(&self, run_id: &str) -> Result<RunRecord, RemoteError> {
        let remote = self.clone();
        let id = run_id.to_string();
        let watcher = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            eprintln!(
                "interrupted: cancelling run `{id}` (Ctrl-C again to exit at once); `agentic resume {id}` continues it"
            );
            if let Err(e) = remote.post(&format!("/api/v1/runs/{}/cancel", segment(&id)), &Value::Null).await {
                eprintln!("error: cannot cancel run `{id}`: {e}");
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        });
        let stopped = self.wait_stopped(run_id).await;
        watcher.abort();
        stopped
    }

    /// Waits until the server no longer executes `run_id` and its record says it stopped; returns the record.
    pub(crate) async fn wait_stopped(&self, run_id: &str) -> Result<RunRecord, RemoteError> {
        let path = format!("/api/v1/runs/{}", segment(run_id));
        let record_path = format!("/api/v1/store/runs/{}", segment(run_id));
        // A run the server neither executes nor has ended (twice in a row, apart): it stopped without an
        // outcome (its spec could not be rebuilt, or the server is shutting down).
        let mut idle_running = 0;
        loop {
            let run: Option<Value> = self.get(&path).await?;
            let executing = run.as_ref().and_then(|r| r.get("executing")).and_then(Value::as_bool).unwrap_or(true);
            if !executing && let Some(record) = self.get::<RunRecord>(&record_path).await? {
                // Suspended on waits only: the server continues it once they are due (SPEC.md §3: the CLI
                // waits through a wait, with or without a server).
                let waiting = record.status == RunStatus::Suspended
                    && !record.pending.is_empty()
                    && record.pending.iter().all(|p| p.kind == agentic_engine::PendingKind::Wait);
                if waiting {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
                if record.status != RunStatus::Running {
                    return Ok(record);
                }
                idle_running += 1;
                if idle_running >= 2 {
                    return Err(RemoteError::Failed(format!(
                        "run `{run_id}` stopped without an outcome (status running); the server's log says why"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            idle_running = 0;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Why a request to the server holding the store failed; each kind has its exit code (SPEC.md §2).
#[derive(Debug)]
pub(crate) enum RemoteError {
    /// The server does not answer (exit 75: try again).
    Unreachable(String),
    /// The server refused the credentials, `401` (exit 77).
    Refused(String),
    /// The server answered, but not as asked (exit 1).
    Failed(String),
}

impl RemoteError {
    /// The exit code of SPEC.md §2 for this failure: 75, 77 or 1.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            RemoteError::Unreachable(_) => super::EXIT_UNAVAILABLE,
            RemoteError::Refused(_) => super::EXIT_REFUSED,
            RemoteError::Failed(_) => super::EXIT_FAILED,
        }
    }

    /// Prints `error: MESSAGE` and returns [`RemoteError::exit_code`].
    pub(crate) fn report(&self) -> u8 {
        eprintln!("error: {self}");
        self.exit_code()
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Unreachable(m) | RemoteError::Refused(m) | RemoteError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RemoteError {}

/// A run id as one URL path segment.
pub(crate) fn segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `error` of an API answer, or the status.
pub(crate) fn error_of(body: &Value, status: u16) -> String {
    body.get("error").and_then(Value::as_str).map_or_else(|| format!("the server answered {status}"), str::to_string)
}

/// The store a server holds, read through it. Writes are refused: they go through the server's API.
pub(crate) struct RemoteStore(pub(crate) Remote);

impl RemoteStore {
    fn refused(&self) -> StoreError {
        StoreError::backend(format!("the store is held by the server at {}; writes go through it", self.0.url))
    }
}

/// `e` as the store error the commands report: unreachable is [`StoreError::Unavailable`] of backend `server`
/// (exit 75), a refused token keeps the [`RemoteError`] as its source (exit 77, [`super::store_failed`]).
fn backend(e: RemoteError) -> StoreError {
    match e {
        RemoteError::Unreachable(message) => StoreError::unavailable("server", message, None),
        RemoteError::Refused(ref message) => StoreError::backend_caused(message.clone(), e),
        RemoteError::Failed(message) => StoreError::backend(message),
    }
}

impl CheckpointStore for RemoteStore {
    async fn append(&self, _record: StepRecord) -> Result<(), StoreError> {
        Err(self.refused())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn put_run(&self, _run: RunRecord) -> Result<(), StoreError> {
        Err(self.refused())
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.0.get(&format!("/api/v1/store/runs/{}", segment(run_id))).await.map_err(backend)
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self.0.get("/api/v1/store/runs").await.map_err(backend)?.unwrap_or_default())
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        let path = format!("/api/v1/store/runs/{}/records", segment(run_id));
        Ok(self.0.get(&path).await.map_err(backend)?.unwrap_or_default())
    }

    async fn load(&self, run_id: &str) -> Result<RunImage, StoreError> {
        let path = format!("/api/v1/store/runs/{}/image", segment(run_id));
        Ok(self.0.get(&path).await.map_err(backend)?.unwrap_or_else(|| RunImage::new(run_id)))
    }

    async fn spec(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let path = format!("/api/v1/store/specs/{}", segment(hash));
        let found: Option<serde_json::Value> = self.0.get(&path).await.map_err(backend)?;
        Ok(found.and_then(|v| v["text"].as_str().map(str::to_string)))
    }
}

/// Whether `e` is a TLS handshake refused on the server's certificate: rustls says `invalid peer
/// certificate` somewhere in the chain of sources (an I/O error's text shows the error it wraps).
fn certificate_refused(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.to_string().contains("invalid peer certificate") {
            return true;
        }
        source = s.source();
    }
    false
}
