//! A small typed JSON-RPC client of one remote A2A agent, over reqwest: the card, `SendMessage`,
//! `SendStreamingMessage` (server-sent events), `GetTask` and `CancelTask`, in protocol 1.0 or 0.3 as the
//! card says.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Mutex;

use super::types::{
    AGENT_CARD_PATH, AgentCard, Endpoint, JsonRpcRequest, JsonRpcResponse, Message, Method, ProtocolVersion,
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskRequest, TaskState, VERSION_HEADER,
};

/// What an A2A call failed on. Every variant names the remote agent (the client's name) and its URL.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum A2aError {
    /// The card could not be fetched, is not a card, or offers no JSON-RPC interface spoken here.
    #[error("A2A agent `{agent}`: bad agent card at {url}: {message}")]
    Card {
        /// The client's name.
        agent: String,
        /// The card's URL.
        url: String,
        /// Why.
        message: String,
    },
    /// A request could not be sent or its answer read (unreachable, HTTP error, not JSON-RPC).
    #[error("A2A agent `{agent}` ({url}): {method} failed: {message}")]
    Request {
        /// The client's name.
        agent: String,
        /// The endpoint.
        url: String,
        /// The method (`SendMessage`, `message/send`).
        method: String,
        /// Why.
        message: String,
    },
    /// The remote agent answered with a JSON-RPC error.
    #[error("A2A agent `{agent}` ({url}): {method} failed: error {code}: {message}")]
    Rpc {
        /// The client's name.
        agent: String,
        /// The endpoint.
        url: String,
        /// The method.
        method: String,
        /// The JSON-RPC error code ([`super::types::error_code`]).
        code: i64,
        /// The error's message.
        message: String,
    },
    /// The remote task ended failed, cancelled or rejected.
    #[error("A2A agent `{agent}` ({url}): remote task `{task_id}` is {state}{}", detail(.message))]
    Task {
        /// The client's name.
        agent: String,
        /// The endpoint.
        url: String,
        /// The task.
        task_id: String,
        /// Its state.
        state: TaskState,
        /// What the remote agent said (empty when nothing).
        message: String,
    },
}

/// An A2A failure as the typed cause of a failed invocation: origin `remote`. A request that could not be
/// sent or read is transient; a bad card, a JSON-RPC error or a remote task that ended badly is permanent for
/// the same message (the remote agent answered).
impl From<A2aError> for agentic_engine::Cause {
    fn from(e: A2aError) -> Self {
        use agentic_engine::{CauseOrigin, Transience};
        let transience = match &e {
            A2aError::Request { .. } => Transience::Transient { retry_after: None },
            _ => Transience::Permanent,
        };
        agentic_engine::Cause::new(CauseOrigin::Remote, transience, e)
    }
}

fn detail(message: &str) -> String {
    if message.is_empty() { String::new() } else { format!(": {message}") }
}

/// The card URL for `url`: `url` itself when it names a card (`…/.well-known/…` or `….json`), else the well-known
/// card path under it (`http://host/agent` → `http://host/agent/.well-known/agent-card.json`).
pub fn card_url(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    if path.contains("/.well-known/") || path.ends_with(".json") {
        url.to_string()
    } else {
        format!("{}{AGENT_CARD_PATH}", url.trim_end_matches('/'))
    }
}

/// The tenant a card URL names by the multi-tenant convention `/.well-known/{tenant}/agent-card.json`.
pub fn tenant_of_card_url(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let rest = path.rsplit_once("/.well-known/")?.1;
    let (tenant, file) = rest.split_once('/')?;
    (file == "agent-card.json" && !tenant.is_empty()).then(|| tenant.to_string())
}

/// A client of one remote A2A agent, shared by the agents that call it (`Arc<A2aClient>`). The card is
/// fetched on first use and kept (a card that could not be read is asked for again next time).
pub struct A2aClient {
    name: String,
    url: String,
    card_url: String,
    http: reqwest::Client,
    card: Mutex<Option<Arc<AgentCard>>>,
    /// The secrets among the headers, as errors show them instead (a remote agent may repeat a header).
    redactions: crate::Redactions,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient").field("name", &self.name).field("url", &self.url).finish_non_exhaustive()
    }
}

impl A2aClient {
    /// A client of the agent at `url` — its card's URL or its base URL ([`card_url`]) — called `name` in
    /// errors.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Arc<A2aClient> {
        let url = url.into();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Arc::new(A2aClient {
            name: name.into(),
            card_url: card_url(&url),
            url,
            http,
            card: Mutex::new(None),
            redactions: crate::Redactions::default(),
        })
    }

    /// A client like [`A2aClient::new`] whose every request (the card's and the calls') carries `headers`,
    /// `(name, value)` — credentials, usually (`Authorization: Bearer ..`); they are marked sensitive, so
    /// that no log of the HTTP client shows them, and the secrets among them are shown as `redactions` says
    /// in every error (a remote agent may repeat a header in its answer).
    ///
    /// # Errors
    /// The first header whose name or value HTTP cannot carry, named (never its value), or an HTTP client that
    /// cannot be created.
    pub fn with_headers(
        name: impl Into<String>,
        url: impl Into<String>,
        headers: &[(String, String)],
        redactions: crate::Redactions,
    ) -> Result<Arc<A2aClient>, String> {
        let map: reqwest::header::HeaderMap = crate::redact::sensitive_headers(headers)?.into_iter().collect();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .default_headers(map)
            .build()
            .map_err(|e| format!("cannot create the HTTP client: {e}"))?;
        let url = url.into();
        Ok(Arc::new(A2aClient {
            name: name.into(),
            card_url: card_url(&url),
            url,
            http,
            card: Mutex::new(None),
            redactions,
        }))
    }

    /// The client's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL it was made with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the card is read.
    pub fn card_url(&self) -> &str {
        &self.card_url
    }

    fn card_error(&self, message: impl std::fmt::Display) -> A2aError {
        let message = self.redactions.apply(&message.to_string());
        A2aError::Card { agent: self.name.clone(), url: self.card_url.clone(), message }
    }

    fn request_error(&self, url: &str, method: &str, message: impl std::fmt::Display) -> A2aError {
        A2aError::Request {
            agent: self.name.clone(),
            url: self.redactions.apply(url),
            method: method.to_string(),
            message: self.redactions.apply(&message.to_string()),
        }
    }

    /// The remote agent's card, fetched once and kept.
    ///
    /// # Errors
    /// [`A2aError::Card`]: unreachable, an HTTP error, or a body that is not a card.
    pub async fn card(&self) -> Result<Arc<AgentCard>, A2aError> {
        let mut kept = self.card.lock().await;
        if let Some(c) = kept.as_ref() {
            return Ok(c.clone());
        }
        let response = self.http.get(&self.card_url).send().await.map_err(|e| self.card_error(error_chain(&e)))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| self.card_error(error_chain(&e)))?;
        if !status.is_success() {
            return Err(self.card_error(format!("HTTP {status}: {}", snippet(&self.redactions.apply(&body)))));
        }
        let card: AgentCard = serde_json::from_str(&body).map_err(|e| self.card_error(format!("not a card: {e}")))?;
        let card = Arc::new(card);
        *kept = Some(card.clone());
        Ok(card)
    }

    /// The JSON-RPC endpoint of the card ([`AgentCard::jsonrpc_endpoint`]).
    ///
    /// # Errors
    /// [`A2aError::Card`]: the card cannot be read or offers no JSON-RPC interface in 1.0 or 0.3.
    pub async fn endpoint(&self) -> Result<Endpoint, A2aError> {
        let card = self.card().await?;
        card.jsonrpc_endpoint()
            .ok_or_else(|| self.card_error("the card offers no JSON-RPC interface in protocol 1.0 or 0.3"))
    }

    /// The tenant of a request: the request's own, else the endpoint's interface's, else the one the card URL
    /// names ([`tenant_of_card_url`]).
    fn tenant(&self, own: Option<String>, endpoint: &Endpoint) -> Option<String> {
        own.filter(|t| !t.is_empty()).or_else(|| endpoint.tenant.clone()).or_else(|| tenant_of_card_url(&self.card_url))
    }

    async fn post(
        &self,
        endpoint: &Endpoint,
        method: Method,
        params: Value,
        stream: bool,
    ) -> Result<reqwest::Response, A2aError> {
        let name = method.name(endpoint.version);
        let request = JsonRpcRequest::new(name, params);
        let mut http = self
            .http
            .post(&endpoint.url)
            .header(VERSION_HEADER, endpoint.version.as_str())
            .header(reqwest::header::ACCEPT, if stream { "text/event-stream" } else { "application/json" });
        // The calling agent's trace continues at the remote agent (W3C Trace Context).
        if let Some(traceparent) = crate::trace_context::outgoing() {
            http = http.header("traceparent", traceparent);
        }
        let response =
            http.json(&request).send().await.map_err(|e| self.request_error(&endpoint.url, name, error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(self.request_error(
                &endpoint.url,
                name,
                format!("HTTP {status}: {}", snippet(&self.redactions.apply(&body))),
            ));
        }
        Ok(response)
    }

    /// The result of one JSON-RPC response body.
    fn result(&self, endpoint: &Endpoint, method: Method, body: &str) -> Result<Value, A2aError> {
        let name = method.name(endpoint.version);
        let response: JsonRpcResponse = serde_json::from_str(body).map_err(|e| {
            self.request_error(
                &endpoint.url,
                name,
                format!("not a JSON-RPC response ({e}): {}", snippet(&self.redactions.apply(body))),
            )
        })?;
        if let Some(e) = response.error {
            return Err(A2aError::Rpc {
                agent: self.name.clone(),
                url: self.redactions.apply(&endpoint.url),
                method: name.to_string(),
                code: e.code,
                message: self.redactions.apply(&e.message),
            });
        }
        response
            .result
            .ok_or_else(|| self.request_error(&endpoint.url, name, "the response has neither a result nor an error"))
    }

    async fn call<T: DeserializeOwned>(
        &self,
        endpoint: &Endpoint,
        method: Method,
        params: Value,
        read: impl FnOnce(Value, ProtocolVersion) -> Result<T, serde_json::Error>,
    ) -> Result<T, A2aError> {
        let name = method.name(endpoint.version);
        let response = self.post(endpoint, method, params, false).await?;
        let body = response.text().await.map_err(|e| self.request_error(&endpoint.url, name, error_chain(&e)))?;
        let result = self.result(endpoint, method, &body)?;
        read(result, endpoint.version)
            .map_err(|e| self.request_error(&endpoint.url, name, format!("unexpected result: {e}")))
    }

    /// Sends a message (`SendMessage`; 0.3 `message/send`) and returns the task it started or continued (the
    /// server answers once the task ended or was interrupted, unless asked to return at once) or the agent's
    /// direct message. Without a tenant in `request`, the card's is used.
    ///
    /// # Errors
    /// [`A2aError::Card`], [`A2aError::Request`] or [`A2aError::Rpc`].
    pub async fn send_message(&self, mut request: SendMessageRequest) -> Result<SendMessageResponse, A2aError> {
        let endpoint = self.endpoint().await?;
        request.tenant = self.tenant(request.tenant.take(), &endpoint);
        let params = request.to_wire(endpoint.version);
        self.call(&endpoint, Method::SendMessage, params, SendMessageResponse::from_wire).await
    }

    /// Sends a message and reads the stream of its events (`SendStreamingMessage`; 0.3 `message/stream`),
    /// handing each to `on_event`, until the task ends or is interrupted. Returns the task as the events built
    /// it (artifact chunks appended), or the direct message.
    ///
    /// # Errors
    /// [`A2aError::Card`], [`A2aError::Request`] (also: the stream ended without a task or a message) or
    /// [`A2aError::Rpc`].
    pub async fn send_streaming_message(
        &self,
        mut request: SendMessageRequest,
        on_event: &mut (dyn FnMut(&StreamResponse) + Send),
    ) -> Result<SendMessageResponse, A2aError> {
        let endpoint = self.endpoint().await?;
        request.tenant = self.tenant(request.tenant.take(), &endpoint);
        let method = Method::SendStreamingMessage;
        let name = method.name(endpoint.version);
        let response = self.post(&endpoint, method, request.to_wire(endpoint.version), true).await?;
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_stream {
            // An error (or a server that does not stream) answers with one JSON body.
            let body = response.text().await.map_err(|e| self.request_error(&endpoint.url, name, error_chain(&e)))?;
            let result = self.result(&endpoint, method, &body)?;
            return SendMessageResponse::from_wire(result, endpoint.version)
                .map_err(|e| self.request_error(&endpoint.url, name, format!("unexpected result: {e}")));
        }
        let mut bytes = response.bytes_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut data = String::new();
        let mut task: Option<Task> = None;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|e| self.request_error(&endpoint.url, name, error_chain(&e)))?;
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\r', '\n']);
                if let Some(rest) = line.strip_prefix("data:") {
                    data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                    continue;
                }
                if !line.is_empty() || data.is_empty() {
                    continue;
                }
                let result = self.result(&endpoint, method, &std::mem::take(&mut data))?;
                let event = StreamResponse::from_wire(result, endpoint.version)
                    .map_err(|e| self.request_error(&endpoint.url, name, format!("unexpected event: {e}")))?;
                on_event(&event);
                if let Some(done) = apply_event(&mut task, event) {
                    return Ok(done);
                }
            }
        }
        task.map(SendMessageResponse::Task)
            .ok_or_else(|| self.request_error(&endpoint.url, name, "the stream ended without a task or a message"))
    }

    /// The task `request.id` as the remote agent has it (`GetTask`; 0.3 `tasks/get`).
    ///
    /// # Errors
    /// [`A2aError::Card`], [`A2aError::Request`] or [`A2aError::Rpc`] (no such task: code -32001).
    pub async fn get_task(&self, mut request: TaskRequest) -> Result<Task, A2aError> {
        let endpoint = self.endpoint().await?;
        request.tenant = self.tenant(request.tenant.take(), &endpoint);
        let params = request.to_wire(endpoint.version);
        self.call(&endpoint, Method::GetTask, params, |v, _| serde_json::from_value(v)).await
    }

    /// Cancels the task `request.id` (`CancelTask`; 0.3 `tasks/cancel`) and returns it.
    ///
    /// # Errors
    /// [`A2aError::Card`], [`A2aError::Request`] or [`A2aError::Rpc`] (ended: code -32002).
    pub async fn cancel_task(&self, mut request: TaskRequest) -> Result<Task, A2aError> {
        let endpoint = self.endpoint().await?;
        request.tenant = self.tenant(request.tenant.take(), &endpoint);
        request.history_length = None;
        let params = request.to_wire(endpoint.version);
        self.call(&endpoint, Method::CancelTask, params, |v, _| serde_json::from_value(v)).await
    }

    /// A [`A2aError::Task`] for a task that ended failed, cancelled or rejected.
    pub(crate) async fn task_error(&self, task: &Task) -> A2aError {
        let url = match self.endpoint().await {
            Ok(e) => e.url,
            Err(_) => self.url.clone(),
        };
        A2aError::Task {
            agent: self.name.clone(),
            url: self.redactions.apply(&url),
            task_id: self.redactions.apply(&task.id),
            state: task.status.state,
            message: self.redactions.apply(&task.status.message.as_ref().map(Message::text).unwrap_or_default()),
        }
    }
}

/// Folds one streamed event into the task being built; returns the result once the stream has said all
/// (a direct message, or a task that ended or was interrupted).
fn apply_event(task: &mut Option<Task>, event: StreamResponse) -> Option<SendMessageResponse> {
    let fresh = |task_id: &str, context_id: &str| Task {
        id: task_id.to_string(),
        context_id: context_id.to_string(),
        ..Task::default()
    };
    match event {
        StreamResponse::Message(m) => return Some(SendMessageResponse::Message(m)),
        StreamResponse::Task(t) => *task = Some(t),
        StreamResponse::StatusUpdate(e) => {
            let t = task.get_or_insert_with(|| fresh(&e.task_id, &e.context_id));
            t.status = e.status;
        }
        StreamResponse::ArtifactUpdate(e) => {
            let t = task.get_or_insert_with(|| fresh(&e.task_id, &e.context_id));
            match t.artifacts.iter_mut().find(|a| a.artifact_id == e.artifact.artifact_id) {
                Some(a) if e.append => a.parts.extend(e.artifact.parts),
                Some(a) => *a = e.artifact,
                None => t.artifacts.push(e.artifact),
            }
        }
    }
    let state = task.as_ref().map(|t| t.status.state)?;
    if state.is_terminal() || state.is_interrupted() { task.take().map(SendMessageResponse::Task) } else { None }
}

/// An error with its sources (`error sending request: connection refused`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The start of a body, for an error message.
fn snippet(body: &str) -> String {
    let body = body.trim();
    match body.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &body[..i]),
        None => body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_urls_and_their_tenants() {
        assert_eq!(card_url("http://h:1/chat"), "http://h:1/chat/.well-known/agent-card.json");
        assert_eq!(card_url("http://h:1/"), "http://h:1/.well-known/agent-card.json");
        assert_eq!(card_url("http://h/.well-known/acme/agent-card.json"), "http://h/.well-known/acme/agent-card.json");
        assert_eq!(tenant_of_card_url("http://h/.well-known/acme/agent-card.json").as_deref(), Some("acme"));
        assert_eq!(tenant_of_card_url("http://h/.well-known/agent-card.json"), None);
        assert_eq!(tenant_of_card_url("http://h/x/.well-known/t/agent-card.json?v=1").as_deref(), Some("t"));
    }
}
