//! The `openai` provider: any server speaking the OpenAI chat-completions protocol (OpenAI, Ollama, vLLM,
//! llama.cpp's server, LM Studio).
//!
//! Transport: one pooled `reqwest` client per model (HTTP/1.1 keep-alive, `TCP_NODELAY`, rustls for `https`;
//! connections are reused), with our own retry layer: 429 and 5xx answers and connection failures are retried
//! with exponential backoff, honouring `Retry-After` (in seconds, capped at [`OpenAiBuilder::max_backoff`]);
//! other 4xx answers fail at once with an error naming the server and the model. A plain chat call is sent
//! directly (the endpoint URL and the `Authorization` header are built once per model, the body is serialised
//! straight from the request, the answer parsed straight into its wire type); a streamed one goes through the
//! `async-openai` client (SSE parsing) over the same HTTP client and retry layer. The request and response
//! JSON are ours (lenient about fields local servers omit).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agentic_engine::TokenUsage;
use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::{ApiError, ApiErrorResponse, OpenAIError, WrappedError};
use async_openai::middleware::HttpRequestFactory;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::shorten;
use super::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, FinishReason, ModelError, ModelInfo, ResponseFormat,
    StreamEvent, TokenLogprob, ToolCall, ToolChoice, ToolSpec, TopLogprob,
};

/// The official API's base URL, used when neither the configuration nor `OPENAI_BASE_URL` sets one.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model used when none is configured.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// Builder of an [`OpenAiModel`].
///
/// Defaults: base URL from `OPENAI_BASE_URL`, else [`DEFAULT_BASE_URL`]; API key from the environment
/// variable `OPENAI_API_KEY` (read when the model is built; a missing variable sends an empty key, which local
/// servers accept); timeout 300 s per attempt (a streamed answer included); 3 retries; first backoff 500 ms,
/// doubled per retry, each wait capped at 30 s (also the cap on `Retry-After`); no default temperature or
/// token limit; JSON-schema response format supported.
#[derive(Debug, Clone)]
pub struct OpenAiBuilder {
    model: String,
    base_url: Option<String>,
    api_key_env: String,
    api_key: Option<String>,
    /// The secret the key is, when it is one (`api_key_secret`): its name.
    key_secret: Option<String>,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    json_schema: bool,
}

impl OpenAiBuilder {
    /// Sets the base URL (e.g. `http://127.0.0.1:11434/v1` for Ollama). A trailing `/` is ignored.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the environment variable the API key is read from (default `OPENAI_API_KEY`).
    pub fn api_key_env(mut self, var: impl Into<String>) -> Self {
        self.api_key_env = var.into();
        self
    }

    /// Sets the API key directly instead of reading it from the environment.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self.key_secret = None;
        self
    }

    /// Sets the API key to the value of the secret `name` (SERVER.md §8): errors name the secret (``check the
    /// API key in the secret `ACME_KEY` ``), and a server that repeats the key in an error has it shown as
    /// `[secret:ACME_KEY]`.
    pub fn api_key_secret(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.api_key = Some(value.into());
        self.key_secret = Some(name.into());
        self
    }

    /// Sets the timeout of each attempt, including reading a streamed answer (default 300 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how often a 429, a 5xx or a connection failure is retried (default 3).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Sets the first backoff delay, doubled per retry (default 500 ms).
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets the longest wait between attempts, which also caps `Retry-After` (default 30 s).
    pub fn max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = max;
        self
    }

    /// Sets the default temperature (a request's own wins).
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the default token limit (a request's own wins).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Declares whether the server honours `response_format: json_schema` (default true). With false, callers
    /// parse free text leniently instead.
    pub fn json_schema(mut self, supported: bool) -> Self {
        self.json_schema = supported;
        self
    }

    /// Builds the model.
    ///
    /// # Errors
    /// [`ModelError::InvalidRequest`] when the API key holds characters an HTTP header cannot carry, or the
    /// HTTP client cannot be created.
    pub fn build(self) -> Result<OpenAiModel, ModelError> {
        let base = self
            .base_url
            .or_else(|| std::env::var("OPENAI_BASE_URL").ok().filter(|s| !s.trim().is_empty()))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let base = base.trim_end_matches('/').to_string();
        let invalid =
            |message: String| ModelError::InvalidRequest { server: base.clone(), model: self.model.clone(), message };
        let given = self.api_key.is_some();
        let key = match self.api_key {
            Some(k) => k,
            None => std::env::var(&self.api_key_env).unwrap_or_default(),
        };
        // Where the key comes from, as messages name it, and what an error shows instead of the key.
        let (key_source, shown) = match (&self.key_secret, given) {
            (Some(name), _) => (format!("the secret `{name}`"), format!("[secret:{name}]")),
            (None, true) => ("the key given to the model's builder".to_string(), "[api key]".to_string()),
            (None, false) => {
                (format!("the environment variable `{}`", self.api_key_env), format!("[${}]", self.api_key_env))
            }
        };
        if key.chars().any(|c| !(' '..='~').contains(&c)) {
            return Err(invalid(format!("the API key in {key_source} holds characters an HTTP header cannot carry")));
        }
        let redactions = crate::Redactions::new([(key.clone(), shown)]);
        let http = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout.min(Duration::from_secs(30)))
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            // Our retry layer (below) retries what is worth retrying; reqwest's own policy only ever retries
            // HTTP/2 and HTTP/3 refusals (not compiled in) but would still clone every request to be ready to.
            .retry(reqwest::retry::never().max_retries_per_request(0))
            .build()
            .map_err(|e| invalid(format!("cannot create the HTTP client: {e}")))?;
        let policy = Arc::new(RetrySettings {
            max_retries: self.max_retries,
            backoff: self.backoff,
            max_backoff: self.max_backoff,
        });
        let mut authorization = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|e| invalid(format!("the API key cannot be sent in a header: {e}")))?;
        authorization.set_sensitive(true);
        // Parsed once; an unparseable base URL fails at the call, as reqwest reports it.
        let chat_url = reqwest::Url::parse(&format!("{base}/chat/completions")).ok();
        let transport = RetryTransport { http: http.clone(), policy: policy.clone() };
        let config = OpenAIConfig::new().with_api_base(base.clone()).with_api_key(key);
        let client = Client::with_config(config).with_http_service(transport);
        Ok(OpenAiModel {
            client,
            http,
            policy,
            chat_url,
            authorization,
            info: ModelInfo {
                provider: "openai".to_string(),
                server: base,
                model: self.model,
                json_schema: self.json_schema,
                tools: true,
                prices: None,
                limits: Default::default(),
                name: None,
            },
            api_key_env: self.api_key_env,
            key_source,
            redactions,
            timeout: self.timeout,
            max_retries: self.max_retries,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
        })
    }
}

/// A chat model on an OpenAI-compatible server. Build with [`OpenAiModel::builder`].
///
/// The API key is never logged nor shown by `Debug`.
pub struct OpenAiModel {
    /// `async-openai`'s client (streamed answers), over `http` and the retry layer.
    client: Client<OpenAIConfig>,
    /// The pooled HTTP client (plain answers are sent with it directly).
    http: reqwest::Client,
    policy: Arc<RetrySettings>,
    /// `{base}/chat/completions`, parsed once (`None` when the base URL does not parse).
    chat_url: Option<reqwest::Url>,
    /// `Bearer <key>`, marked sensitive.
    authorization: reqwest::header::HeaderValue,
    info: ModelInfo,
    api_key_env: String,
    /// Where the key comes from, as errors name it.
    key_source: String,
    /// The key, as errors show it instead (a server may repeat it in an error).
    redactions: crate::Redactions,
    timeout: Duration,
    max_retries: u32,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("server", &self.info.server)
            .field("model", &self.info.model)
            .field("api_key_env", &self.api_key_env)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// A builder for model `model` (e.g. `gpt-4o-mini`, `llama3.2`); see [`OpenAiBuilder`] for the defaults.
    pub fn builder(model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            model: model.into(),
            base_url: None,
            api_key_env: "OPENAI_API_KEY".to_string(),
            api_key: None,
            key_secret: None,
            timeout: Duration::from_secs(300),
            max_retries: 3,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            temperature: None,
            max_tokens: None,
            json_schema: true,
        }
    }

    /// The JSON body sent for `request` (`stream` set as given). Public so that tests and tools can show it.
    pub fn request_body(&self, request: &ChatRequest, stream: bool) -> Value {
        // Cannot fail: every map key is a string.
        serde_json::to_value(self.wire_request(request, stream)).unwrap_or(Value::Null)
    }

    /// The request body as serialised (borrowing `request`: nothing is copied into an intermediate tree).
    fn wire_request<'a>(&'a self, request: &'a ChatRequest, stream: bool) -> WireRequest<'a> {
        WireRequest {
            model: &self.info.model,
            messages: WireMessages(&request.messages),
            temperature: request.temperature.or(self.temperature),
            max_tokens: request.max_tokens.or(self.max_tokens),
            stop: &request.stop,
            tools: WireTools(&request.tools),
            tool_choice: request.tool_choice.as_ref().map(WireToolChoice),
            response_format: request.response_format.as_ref().and_then(WireResponseFormat::new),
            logprobs: request.logprobs.map(|_| true),
            top_logprobs: request.logprobs.map(|top| top.min(20)),
            stream,
            stream_options: stream.then_some(WireStreamOptions { include_usage: true }),
        }
    }

    /// Sends one plain (not streamed) chat request: the body serialised once, one attempt per retry.
    async fn send_chat(&self, body: Vec<u8>) -> Result<reqwest::Response, SendFailure> {
        // Every attempt shares the bytes.
        let body = bytes::Bytes::from(body);
        send_with_retries(&self.http, &self.policy, || {
            let body = reqwest::Body::from(body.clone());
            async move {
                let mut request = match &self.chat_url {
                    Some(url) => reqwest::Request::new(reqwest::Method::POST, url.clone()),
                    // Unparseable base URL: let reqwest report it as it would.
                    None => self.http.post(format!("{}/chat/completions", self.info.server)).build()?,
                };
                let headers = request.headers_mut();
                headers.insert(reqwest::header::AUTHORIZATION, self.authorization.clone());
                headers.insert(
                    reqwest::header::CONTENT_TYPE,
                    reqwest::header::HeaderValue::from_static("application/json"),
                );
                *request.body_mut() = Some(body);
                Ok(request)
            }
        })
        .await
    }

    fn map_error(&self, e: OpenAIError) -> ModelError {
        let server = self.info.server.clone();
        let model = self.info.model.clone();
        match e {
            OpenAIError::ApiError(ApiErrorResponse { status_code, api_error }) => {
                let status = status_code.as_u16();
                let message = shorten(&self.redactions.apply(&api_error.message), 500);
                match status {
                    401 | 403 => {
                        ModelError::Unauthorized { server, model, status, message, key_source: self.key_source.clone() }
                    }
                    404 => ModelError::NotFound { server, model, message },
                    _ => {
                        let retried = status == 429 || status >= 500;
                        let attempts = if retried { self.max_retries + 1 } else { 1 };
                        ModelError::Http { server, model, status, attempts, message, retry_after: None }
                    }
                }
            }
            OpenAIError::Reqwest(e) if e.is_timeout() => ModelError::Timeout { server, model, timeout: self.timeout },
            OpenAIError::Reqwest(e) if e.is_connect() => {
                ModelError::Connection { server, model, message: error_chain(&e) }
            }
            OpenAIError::Reqwest(e) => ModelError::Connection { server, model, message: error_chain(&e) },
            OpenAIError::JSONDeserialize(e, body) => ModelError::InvalidResponse {
                server,
                model,
                message: e.to_string(),
                body: shorten(&self.redactions.apply(&body), 500),
            },
            OpenAIError::StreamError(e) => ModelError::Stream { server, model, message: e.to_string() },
            other => ModelError::InvalidRequest { server, model, message: other.to_string() },
        }
    }

    fn invalid_response(&self, message: impl Into<String>, body: &Value) -> ModelError {
        ModelError::InvalidResponse {
            server: self.info.server.clone(),
            model: self.info.model.clone(),
            message: message.into(),
            body: shorten(&self.redactions.apply(&body.to_string()), 500),
        }
    }

    /// Reads a non-streamed completion straight from the body's bytes (the error paths re-read it as a JSON
    /// tree to quote it).
    fn read_completion(&self, bytes: &[u8]) -> Result<ChatResponse, ModelError> {
        let wire: WireResponse = match serde_json::from_slice(bytes) {
            Ok(wire) => wire,
            Err(e) => {
                return Err(match serde_json::from_slice::<Value>(bytes) {
                    Ok(body) => {
                        // The message without the position, as when reading the tree.
                        let reason = serde_json::from_value::<WireResponse>(body.clone()).err().unwrap_or(e);
                        self.invalid_response(format!("not a chat completion: {reason}"), &body)
                    }
                    Err(_) => ModelError::InvalidResponse {
                        server: self.info.server.clone(),
                        model: self.info.model.clone(),
                        message: e.to_string(),
                        body: shorten(&self.redactions.apply(&String::from_utf8_lossy(bytes)), 500),
                    },
                });
            }
        };
        let Some(choice) = wire.choices.into_iter().next() else {
            let body = serde_json::from_slice::<Value>(bytes).unwrap_or(Value::Null);
            return Err(self.invalid_response("the answer has no choices", &body));
        };
        let mut tool_calls = Vec::new();
        for (i, c) in choice.message.tool_calls.unwrap_or_default().into_iter().enumerate() {
            tool_calls.push(ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{}", i + 1)),
                name: c.function.name,
                arguments: parse_arguments(c.function.arguments),
            });
        }
        Ok(ChatResponse {
            message: ChatMessage::Assistant { content: choice.message.content.unwrap_or_default(), tool_calls },
            usage: wire.usage.map(WireUsage::tokens).unwrap_or_default(),
            finish_reason: FinishReason::from_openai(choice.finish_reason.as_deref()),
            logprobs: choice.logprobs.as_ref().and_then(read_logprobs),
        })
    }
}

impl ChatModel for OpenAiModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        self.chat_once(request).await.map_err(|e| e.redacted(&self.redactions))
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let body = self.request_body(&request, true);
        let stream = self
            .client
            .chat()
            .create_stream_byot::<Value, Value>(body)
            .await
            .map_err(|e| self.map_error(e).redacted(&self.redactions))?;
        let errors = ErrorContext {
            server: self.info.server.clone(),
            model: self.info.model.clone(),
            key_source: self.key_source.clone(),
            redactions: self.redactions.clone(),
            timeout: self.timeout,
            max_retries: self.max_retries,
        };
        Ok(assemble_stream(stream, errors))
    }
}

impl OpenAiModel {
    /// One chat completion, its errors as the server and the transport gave them ([`ChatModel::chat`]
    /// redacts them).
    async fn chat_once(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = serde_json::to_vec(&self.wire_request(&request, false))
            .map_err(|e| self.map_error(OpenAIError::InvalidArgument(format!("failed to serialize request: {e}"))))?;
        drop(request);
        tracing::debug!(server = %self.info.server, model = %self.info.model, "chat request");
        let response =
            self.send_chat(body).await.map_err(|f| with_retry_after(self.map_error(f.error), f.retry_after))?;
        let bytes = response.bytes().await.map_err(|e| self.map_error(OpenAIError::Reqwest(e)))?;
        self.read_completion(&bytes)
    }
}

/// What the stream task needs to map errors without borrowing the model.
#[derive(Clone)]
struct ErrorContext {
    server: String,
    model: String,
    key_source: String,
    redactions: crate::Redactions,
    timeout: Duration,
    max_retries: u32,
}

impl ErrorContext {
    /// A stream's error, redacted.
    fn map(&self, e: OpenAIError) -> ModelError {
        self.map_raw(e).redacted(&self.redactions)
    }

    fn map_raw(&self, e: OpenAIError) -> ModelError {
        let server = self.server.clone();
        let model = self.model.clone();
        match e {
            OpenAIError::Reqwest(e) if e.is_timeout() => ModelError::Timeout { server, model, timeout: self.timeout },
            OpenAIError::JSONDeserialize(e, body) => ModelError::Stream {
                server,
                model,
                message: format!(
                    "unreadable event: {e}; the event was: {}",
                    shorten(&self.redactions.apply(&body), 500)
                ),
            },
            OpenAIError::ApiError(ApiErrorResponse { status_code, api_error }) => {
                let status = status_code.as_u16();
                let message = shorten(&self.redactions.apply(&api_error.message), 500);
                match status {
                    401 | 403 => {
                        ModelError::Unauthorized { server, model, status, message, key_source: self.key_source.clone() }
                    }
                    404 => ModelError::NotFound { server, model, message },
                    _ => ModelError::Http {
                        server,
                        model,
                        status,
                        attempts: self.max_retries + 1,
                        message,
                        retry_after: None,
                    },
                }
            }
            other => ModelError::Stream { server, model, message: other.to_string() },
        }
    }
}

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Turns SSE chunks into [`StreamEvent`]s and assembles the final answer.
fn assemble_stream(
    stream: Pin<Box<dyn futures::Stream<Item = Result<Value, OpenAIError>> + Send>>,
    errors: ErrorContext,
) -> ChatStream {
    struct State {
        stream: Pin<Box<dyn futures::Stream<Item = Result<Value, OpenAIError>> + Send>>,
        errors: ErrorContext,
        text: String,
        calls: Vec<PartialCall>,
        usage: TokenUsage,
        finish: Option<String>,
        logprobs: Option<Vec<TokenLogprob>>,
        pending: std::collections::VecDeque<StreamEvent>,
        done: bool,
    }
    let state = State {
        stream,
        errors,
        text: String::new(),
        calls: Vec::new(),
        usage: TokenUsage::default(),
        finish: None,
        logprobs: None,
        pending: Default::default(),
        done: false,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.pending.pop_front() {
                return Some((Ok(ev), st));
            }
            if st.done {
                return None;
            }
            match st.stream.next().await {
                Some(Err(e)) => {
                    st.done = true;
                    let err = st.errors.map(e);
                    return Some((Err(err), st));
                }
                Some(Ok(chunk)) => {
                    let Ok(chunk) = serde_json::from_value::<WireChunk>(chunk.clone()) else {
                        st.done = true;
                        let err = ModelError::Stream {
                            server: st.errors.server.clone(),
                            model: st.errors.model.clone(),
                            message: format!(
                                "unexpected event: {}",
                                shorten(&st.errors.redactions.apply(&chunk.to_string()), 500)
                            ),
                        };
                        return Some((Err(err), st));
                    };
                    if let Some(u) = chunk.usage {
                        st.usage = u.tokens();
                    }
                    for choice in chunk.choices {
                        if let Some(reason) = choice.finish_reason {
                            st.finish = Some(reason);
                        }
                        if let Some(tokens) = choice.logprobs.as_ref().and_then(read_logprobs) {
                            st.logprobs.get_or_insert_with(Vec::new).extend(tokens);
                        }
                        if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                            st.text.push_str(&text);
                            st.pending.push_back(StreamEvent::Token(text));
                        }
                        for (n, d) in choice.delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                            let index = d.index.unwrap_or(n);
                            while st.calls.len() <= index {
                                st.calls.push(PartialCall::default());
                            }
                            let call = &mut st.calls[index];
                            let name = d.function.as_ref().and_then(|f| f.name.clone());
                            let args = d.function.and_then(|f| f.arguments).unwrap_or_default();
                            if d.id.is_some() {
                                call.id.clone_from(&d.id);
                            }
                            if let Some(n) = &name {
                                call.name.push_str(n);
                            }
                            call.arguments.push_str(&args);
                            st.pending.push_back(StreamEvent::ToolCallDelta { index, id: d.id, name, arguments: args });
                        }
                    }
                }
                None => {
                    st.done = true;
                    let tool_calls = std::mem::take(&mut st.calls)
                        .into_iter()
                        .enumerate()
                        .map(|(i, c)| ToolCall {
                            id: c.id.unwrap_or_else(|| format!("call_{}", i + 1)),
                            name: c.name,
                            arguments: parse_arguments(Value::String(c.arguments)),
                        })
                        .collect();
                    let response = ChatResponse {
                        message: ChatMessage::Assistant { content: std::mem::take(&mut st.text), tool_calls },
                        usage: st.usage,
                        finish_reason: FinishReason::from_openai(st.finish.as_deref()),
                        logprobs: st.logprobs.take(),
                    };
                    return Some((Ok(StreamEvent::Done(response)), st));
                }
            }
        }
    }))
}

/// The token log-probabilities of a choice (`{"content": [{"token", "logprob", "top_logprobs": [{"token",
/// "logprob"}]}]}`); `None` when absent or of another shape (servers differ; an unreadable block is ignored,
/// never an error). Entries without a token or a numeric log-probability are skipped.
fn read_logprobs(block: &Value) -> Option<Vec<TokenLogprob>> {
    let content = block.get("content")?.as_array()?;
    let pair = |v: &Value| Some((v.get("token")?.as_str()?.to_string(), v.get("logprob")?.as_f64()?));
    let tokens = content
        .iter()
        .filter_map(|t| {
            let (token, logprob) = pair(t)?;
            let top = t
                .get("top_logprobs")
                .and_then(Value::as_array)
                .map(|alts| {
                    alts.iter().filter_map(pair).map(|(token, logprob)| TopLogprob { token, logprob }).collect()
                })
                .unwrap_or_default();
            Some(TokenLogprob { token, logprob, top })
        })
        .collect();
    Some(tokens)
}

/// Tool-call arguments arrive as JSON text; keep them as JSON (the raw text as a string when unparseable).
fn parse_arguments(arguments: Value) -> Value {
    match arguments {
        Value::String(s) if s.trim().is_empty() => Value::Object(Map::new()),
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        other => other,
    }
}

/// The request body (field order = the JSON's key order).
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: WireMessages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "WireTools::is_empty")]
    tools: WireTools<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_logprobs: Option<u8>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<WireStreamOptions>,
}

#[derive(Serialize)]
struct WireStreamOptions {
    include_usage: bool,
}

struct WireMessages<'a>(&'a [ChatMessage]);

impl Serialize for WireMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(WireOutMessage))
    }
}

/// One message as the protocol wants it: an assistant's tool calls with their arguments as JSON text (and
/// `content: null` when there is no text), a tool result with its call id, else role and text.
struct WireOutMessage<'a>(&'a ChatMessage);

impl Serialize for WireOutMessage<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            ChatMessage::Assistant { content, tool_calls } if !tool_calls.is_empty() => {
                map.serialize_entry("role", "assistant")?;
                map.serialize_entry("content", &(!content.is_empty()).then_some(content))?;
                map.serialize_entry("tool_calls", &WireToolCalls(tool_calls))?;
            }
            ChatMessage::Tool { tool_call_id, content } => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", tool_call_id)?;
                map.serialize_entry("content", content)?;
            }
            other => {
                map.serialize_entry("role", other.role())?;
                map.serialize_entry("content", other.text())?;
            }
        }
        map.end()
    }
}

struct WireToolCalls<'a>(&'a [ToolCall]);

impl Serialize for WireToolCalls<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Call<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: String,
        }
        serializer.collect_seq(self.0.iter().map(|c| Call {
            id: &c.id,
            kind: "function",
            function: Function { name: &c.name, arguments: c.arguments.to_string() },
        }))
    }
}

struct WireTools<'a>(&'a [ToolSpec]);

impl WireTools<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for WireTools<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
        }
        serializer.collect_seq(self.0.iter().map(|t| Tool {
            kind: "function",
            function: Function { name: &t.name, description: &t.description, parameters: &t.parameters },
        }))
    }
}

struct WireToolChoice<'a>(&'a ToolChoice);

impl Serialize for WireToolChoice<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Named<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Name<'a>,
        }
        #[derive(Serialize)]
        struct Name<'a> {
            name: &'a str,
        }
        match self.0 {
            ToolChoice::Auto => serializer.serialize_str("auto"),
            ToolChoice::None => serializer.serialize_str("none"),
            ToolChoice::Required => serializer.serialize_str("required"),
            ToolChoice::Tool(name) => Named { kind: "function", function: Name { name } }.serialize(serializer),
        }
    }
}

/// `response_format`: absent for free text.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireResponseFormat<'a> {
    JsonObject,
    JsonSchema { json_schema: WireJsonSchema<'a> },
}

#[derive(Serialize)]
struct WireJsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

impl<'a> WireResponseFormat<'a> {
    fn new(format: &'a ResponseFormat) -> Option<Self> {
        match format {
            ResponseFormat::Text => None,
            ResponseFormat::JsonObject => Some(WireResponseFormat::JsonObject),
            ResponseFormat::JsonSchema { name, schema, strict } => {
                Some(WireResponseFormat::JsonSchema { json_schema: WireJsonSchema { name, schema, strict: *strict } })
            }
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<Value>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireUsage {
    fn tokens(self) -> TokenUsage {
        TokenUsage { input: self.prompt_tokens.unwrap_or(0), output: self.completion_tokens.unwrap_or(0) }
    }
}

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    delta: WireDelta,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<Value>,
}

#[derive(Deserialize, Default)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallDelta>>,
}

#[derive(Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Deserialize)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Retry settings of the transport.
#[derive(Debug)]
struct RetrySettings {
    max_retries: u32,
    backoff: Duration,
    max_backoff: Duration,
}

impl RetrySettings {
    /// The wait before retry `retry` (0-based): `Retry-After` when given, else exponential; capped.
    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exponential = self.backoff.saturating_mul(2u32.saturating_pow(retry));
        retry_after.unwrap_or(exponential).min(self.max_backoff)
    }
}

/// The HTTP layer under `async-openai`: sends each attempt with the pooled client, retries 429/5xx and
/// connection failures, and turns a final unsuccessful answer into an API error carrying its status (with
/// the body as the message when it is not an OpenAI error object).
#[derive(Clone)]
struct RetryTransport {
    http: reqwest::Client,
    policy: Arc<RetrySettings>,
}

impl tower::Service<HttpRequestFactory> for RetryTransport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        let policy = self.policy.clone();
        Box::pin(async move { send_with_retries(&http, &policy, || factory.build()).await.map_err(|f| f.error) })
    }
}

/// Sends the request `build` makes (once per attempt) with `http`, retrying 429/5xx answers and connection
/// failures as `policy` says; a final unsuccessful answer becomes an API error carrying its status (with the
/// body as the message when it is not an OpenAI error object).
async fn send_with_retries<F, Fut>(
    http: &reqwest::Client,
    policy: &RetrySettings,
    mut build: F,
) -> Result<reqwest::Response, SendFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<reqwest::Request, OpenAIError>>,
{
    let mut retry = 0u32;
    loop {
        let request = build().await.map_err(SendFailure::of)?;
        match http.execute(request).await {
            Ok(response) if response.status().is_success() => return Ok(response),
            Ok(response) => {
                let status = response.status();
                let retryable = status.as_u16() == 429 || status.is_server_error();
                if status.as_u16() == 429 {
                    // The endpoint's limiter backs off for every caller, not only this retry.
                    super::report_rate_limited(retry_after(response.headers()));
                }
                if retryable && retry < policy.max_retries {
                    let wait = policy.delay(retry, retry_after(response.headers()));
                    tracing::warn!(%status, retry = retry + 1, wait_ms = wait.as_millis() as u64, "model server busy or failing; retrying");
                    drop(response);
                    tokio::time::sleep(wait).await;
                    retry += 1;
                    continue;
                }
                let retry_after = retry_after(response.headers());
                return Err(SendFailure { error: api_error(response).await, retry_after });
            }
            Err(e) if e.is_connect() && retry < policy.max_retries => {
                let wait = policy.delay(retry, None);
                tracing::warn!(retry = retry + 1, "cannot connect to the model server; retrying");
                tokio::time::sleep(wait).await;
                retry += 1;
            }
            Err(e) => return Err(SendFailure::of(OpenAIError::Reqwest(e))),
        }
    }
}

/// Why [`send_with_retries`] gave up: the error, and the `Retry-After` of the last answer when it had one.
struct SendFailure {
    error: OpenAIError,
    retry_after: Option<Duration>,
}

impl SendFailure {
    /// A failure without an answer (nothing said when to try again).
    fn of(error: OpenAIError) -> Self {
        SendFailure { error, retry_after: None }
    }
}

/// `error` with the server's `Retry-After` when it is an unsuccessful HTTP answer.
fn with_retry_after(mut error: ModelError, asked: Option<Duration>) -> ModelError {
    if let ModelError::Http { retry_after, .. } = &mut error {
        *retry_after = asked;
    }
    error
}

/// `Retry-After` in seconds (fractions allowed); HTTP dates are ignored (exponential backoff applies).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = text.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

async fn api_error(response: reqwest::Response) -> OpenAIError {
    let status_code = response.status();
    let body = match response.bytes().await {
        Ok(b) => b,
        Err(e) => return OpenAIError::Reqwest(e),
    };
    let api_error = match serde_json::from_slice::<WrappedError>(&body) {
        Ok(w) => w.error,
        Err(_) => {
            let text = String::from_utf8_lossy(&body).trim().to_string();
            let message =
                if text.is_empty() { status_code.canonical_reason().unwrap_or("no message").to_string() } else { text };
            ApiError { message, ..ApiError::default() }
        }
    };
    OpenAIError::ApiError(ApiErrorResponse { status_code, api_error })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn backoff_doubles_and_caps_retry_after() {
        let p =
            RetrySettings { max_retries: 3, backoff: Duration::from_millis(100), max_backoff: Duration::from_secs(2) };
        assert_eq!(p.delay(0, None), Duration::from_millis(100));
        assert_eq!(p.delay(2, None), Duration::from_millis(400));
        assert_eq!(p.delay(10, None), Duration::from_secs(2));
        assert_eq!(p.delay(0, Some(Duration::from_secs(3600))), Duration::from_secs(2));
        assert_eq!(p.delay(0, Some(Duration::from_millis(50))), Duration::from_millis(50));
    }

    #[test]
    fn the_body_is_serialised_in_the_protocol_shape() {
        let m = OpenAiModel::builder("m").base_url("http://127.0.0.1:1/v1").api_key("k").temperature(0.5);
        let m = m.build().expect("model");
        let mut request = ChatRequest::new(vec![
            ChatMessage::user("hi"),
            ChatMessage::assistant("hello"),
            ChatMessage::assistant_tool_calls(vec![ToolCall::new("c1", "f", json!({"x": [1, 2]}))]),
            ChatMessage::tool_result("c1", "3"),
        ])
        .tool_choice(ToolChoice::Required);
        request.response_format = Some(ResponseFormat::JsonObject);
        request.logprobs = Some(40);
        let expected = json!({
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":[1,2]}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "3"}
            ],
            "temperature": 0.5,
            "tool_choice": "required",
            "response_format": {"type": "json_object"},
            "logprobs": true,
            "top_logprobs": 20,
            "stream": true,
            "stream_options": {"include_usage": true}
        });
        let bytes = serde_json::to_vec(&m.wire_request(&request, true)).expect("serialise");
        assert_eq!(String::from_utf8(bytes).expect("utf-8"), expected.to_string(), "same keys, same order");
        assert_eq!(m.request_body(&request, true), expected);
        let plain = m.request_body(&ChatRequest::new(vec![ChatMessage::system("s")]), false);
        assert_eq!(
            plain.to_string(),
            r#"{"model":"m","messages":[{"role":"system","content":"s"}],"temperature":0.5,"stream":false}"#
        );
    }

    #[test]
    fn arguments_are_json() {
        assert_eq!(parse_arguments(json!("{\"a\": 1}")), json!({"a": 1}));
        assert_eq!(parse_arguments(json!("")), json!({}));
        assert_eq!(parse_arguments(json!("{oops")), json!("{oops"));
    }
}
