//! The tool-round scenario (`--scenario tools`, SPEC.md §4): one [`LlmAgent`] whose model (a loopback
//! OpenAI-compatible server, [`start_server`]) calls a tool in each of `rounds` turns before it answers, run on
//! sled under `sync` and `exit` durability, with a tool that has an effect ([`Effect::Once`]) and one that has
//! none. The store is wrapped in [`CountingStore`], which counts its commits (`flush`, `flush_run`): the commits
//! a run makes beyond those of the same agent answering at once, divided by the rounds, are the commits per
//! round — at most 2 with an effect (the call committed as started before it is sent, its result before the
//! next model call), at most 1 without (the result), none under `exit`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentic::engine::{DynCheckpointStore, Effect, StoreError, StoreLayer, StoreRef};
use agentic::prelude::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::error::{Context, Result, ensure};

/// A store that counts its commits ([`CheckpointStore::flush`] and [`CheckpointStore::flush_run`]); every
/// other method is the wrapped store's.
pub struct CountingStore {
    inner: StoreRef,
    commits: AtomicUsize,
}

impl CountingStore {
    /// Wraps `inner`.
    pub fn new(inner: StoreRef) -> Arc<CountingStore> {
        Arc::new(CountingStore { inner, commits: AtomicUsize::new(0) })
    }

    /// The commits made so far.
    pub fn commits(&self) -> usize {
        self.commits.load(Ordering::SeqCst)
    }
}

impl StoreLayer for CountingStore {
    fn inner(&self) -> &dyn DynCheckpointStore {
        &*self.inner
    }

    async fn flush(&self) -> std::result::Result<(), StoreError> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.inner.flush_dyn().await
    }

    async fn flush_run(&self, run_id: &str) -> std::result::Result<(), StoreError> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.inner.flush_run_dyn(run_id).await
    }
}

/// A running loopback model for the scenario: it answers a request carrying `t` tool results with a call of
/// the tool `book` (`{"entry": t}`, call id `c<t>`) while `t` is below the rounds the request's user message
/// asks for (`rounds=<n>`), else with `ok`. It counts the requests.
#[derive(Debug, Clone)]
pub struct ToolModel {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Chat-completion requests answered.
    pub requests: Arc<AtomicUsize>,
}

impl ToolModel {
    /// The base URL to give [`OpenAiModel::builder`].
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

/// The answer to a chat-completion request `body` (see [`ToolModel`]).
fn reply(body: &Value) -> Value {
    let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let rounds = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str()?.split("rounds=").nth(1)?.trim().parse::<usize>().ok())
        .next()
        .unwrap_or(0);
    let message = if results < rounds {
        let call = json!({"id": format!("c{results}"), "type": "function",
                          "function": {"name": "book", "arguments": json!({"entry": results}).to_string()}});
        json!({"role": "assistant", "content": null, "tool_calls": [call]})
    } else {
        json!({"role": "assistant", "content": "ok"})
    };
    let finish = if results < rounds { "tool_calls" } else { "stop" };
    json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}
    })
}

async fn answer(
    req: Request<Incoming>,
    requests: Arc<AtomicUsize>,
) -> std::result::Result<Response<Full<Bytes>>, Infallible> {
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    requests.fetch_add(1, Ordering::SeqCst);
    let mut r = Response::new(Full::new(Bytes::from(reply(&body).to_string())));
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    Ok(r)
}

/// Starts the scenario's model on `127.0.0.1` (a free port) on the current Tokio runtime; it answers at once.
///
/// # Errors
/// When the socket cannot be bound.
pub async fn start_server() -> Result<ToolModel> {
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.ctx("binding 127.0.0.1")?;
    let addr = listener.local_addr().ctx("local address")?;
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let requests = counter.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| answer(req, requests.clone()));
                let _ = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(ToolModel { addr, requests })
}

/// The agent: asks for `rounds=<rounds>` (the model calls `book` that many times), its tool `book` of
/// `effect`, answering `booked <entry>`.
///
/// # Errors
/// When the model or the agent cannot be built.
pub fn agent(server: &ToolModel, effect: Effect) -> Result<AgentRef> {
    let model = OpenAiModel::builder("bench")
        .base_url(server.base_url())
        .api_key("sk-bench")
        .max_retries(0)
        .timeout(Duration::from_secs(60))
        .build()
        .ctx("building the openai model")?;
    let schema = json!({"type": "object", "properties": {"entry": {"type": "integer"}}, "required": ["entry"]});
    let book = Tool::from_json("book", "Books an entry", schema, |args: Value| async move {
        Ok(json!(format!("booked {}", args["entry"])))
    })
    .effect(effect);
    LlmAgent::builder(ChatModelRef::new(model))
        .name("clerk")
        .user("Book them: rounds={{ rounds }}")
        .tools([book])
        .output_key("out")
        .build()
        .ctx("building the LLM agent")
}

/// One run of `agent` with `rounds` tool rounds on `store` under `durability` as `id`, checked (`out` =
/// `ok`): its time and the commits it made.
///
/// # Errors
/// When the run fails or its output is not `ok`.
pub async fn run_counted(
    agent: &AgentRef,
    store: &Arc<CountingStore>,
    rounds: usize,
    durability: Durability,
    id: &str,
) -> Result<(Duration, usize)> {
    let before = store.commits();
    let store_ref: StoreRef = store.clone();
    let t0 = Instant::now();
    let outcome = agent
        .invoke()
        .input("rounds", rounds)
        .memory_id(id)
        .store_ref(store_ref)
        .durability(durability)
        .await
        .ctx(format!("tool run {id}"))?;
    let elapsed = t0.elapsed();
    ensure(outcome.output() == Some(&json!("ok")), || format!("tool run {id}: output {:?}", outcome.output()))?;
    Ok((elapsed, store.commits() - before))
}
