//! The LLM-bound scenarios: a loopback OpenAI-compatible server answering `POST /v1/chat/completions` after a
//! fixed latency, and the real `openai` provider ([`OpenAiModel`]) behind [`LlmAgent`]s talking to it.
//!
//! The server (hyper, HTTP/1.1 with keep-alive, listen backlog 4096) counts requests, accepted connections and
//! the most requests in flight at once, so a limit on the client side (connection pool, engine) shows up as a
//! peak below the expected concurrency.
//!
//! The latency is kept by a clock thread of the server's ([`LatencyClock`]), not by Tokio's timer: Tokio's
//! timer wheel has a granularity of 1 ms and rounds deadlines up, so that a 50 ms sleep answers after 51 to
//! 52 ms (measured with curl against the server), 3% above the floor the scenarios are measured against. The
//! clock answers within about 0.1 ms of the deadline.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentic::prelude::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpSocket;

use crate::error::{Context, Result, ensure};

/// Counters of the loopback server.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Chat-completion requests answered.
    pub requests: AtomicUsize,
    /// TCP connections accepted.
    pub connections: AtomicUsize,
    /// Requests currently being answered.
    pub in_flight: AtomicUsize,
    /// The most requests in flight at once since the last [`ServerStats::reset_peak`].
    pub peak_in_flight: AtomicUsize,
}

impl ServerStats {
    /// Clears the in-flight peak (before a measured run).
    pub fn reset_peak(&self) {
        self.peak_in_flight.store(0, Ordering::SeqCst);
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The in-flight peak.
    pub fn peak(&self) -> usize {
        self.peak_in_flight.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A running loopback server; it stops when its runtime is dropped.
#[derive(Debug, Clone)]
pub struct MockLlm {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The fixed latency of every answer.
    pub latency: Duration,
    /// Its counters.
    pub stats: Arc<ServerStats>,
}

impl MockLlm {
    /// The base URL to give [`OpenAiModel::builder`] (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

fn completion() -> Bytes {
    Bytes::from(
        json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}
        })
        .to_string(),
    )
}

/// Wakes each waiting answer at its deadline, from a thread of its own sleeping with the operating system's
/// timer (precise to tens of microseconds). The answers share one latency, so their deadlines come in the
/// order the requests did: the thread serves them first in, first out.
#[derive(Debug, Clone)]
pub struct LatencyClock {
    tx: std::sync::mpsc::Sender<(Instant, tokio::sync::oneshot::Sender<()>)>,
}

impl LatencyClock {
    /// Starts the clock thread; it ends when the last clone of the clock is dropped.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn start() -> Result<LatencyClock> {
        let (tx, rx) = std::sync::mpsc::channel::<(Instant, tokio::sync::oneshot::Sender<()>)>();
        std::thread::Builder::new()
            .name("llm-clock".into())
            .spawn(move || {
                for (deadline, done) in rx {
                    let now = Instant::now();
                    if deadline > now {
                        std::thread::sleep(deadline - now);
                    }
                    let _ = done.send(());
                }
            })
            .ctx("starting the latency clock thread")?;
        Ok(LatencyClock { tx })
    }

    /// Waits until `deadline`.
    pub async fn wait_until(&self, deadline: Instant) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.tx.send((deadline, done)).is_ok() {
            let _ = wait.await;
        } else {
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

async fn answer(
    req: Request<Incoming>,
    latency: Duration,
    clock: LatencyClock,
    stats: Arc<ServerStats>,
    body: Bytes,
) -> std::result::Result<Response<Full<Bytes>>, Infallible> {
    let received = Instant::now();
    let ok = req.method() == hyper::Method::POST && req.uri().path() == "/v1/chat/completions";
    // Read the whole request body, as a real server does before answering.
    let _ = req.into_body().collect().await;
    if !ok {
        let mut r = Response::new(Full::new(Bytes::from_static(b"{\"error\":{\"message\":\"not found\"}}")));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return Ok(r);
    }
    let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stats.peak_in_flight.fetch_max(now, Ordering::SeqCst);
    clock.wait_until(received + latency).await;
    stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    stats.requests.fetch_add(1, Ordering::SeqCst);
    let mut r = Response::new(Full::new(body));
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    Ok(r)
}

/// Starts the server on `127.0.0.1` (a free port) on the current Tokio runtime, every answer after `latency`.
///
/// # Errors
/// When the socket cannot be bound.
pub async fn start_server(latency: Duration) -> Result<MockLlm> {
    let socket = TcpSocket::new_v4().ctx("server socket")?;
    socket.set_reuseaddr(true).ctx("SO_REUSEADDR")?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).ctx("binding 127.0.0.1")?;
    // A backlog above the largest burst of new connections (1000 runs at once); the kernel caps it at somaxconn.
    let listener = socket.listen(4096).ctx("listen")?;
    let addr = listener.local_addr().ctx("local address")?;
    let stats = Arc::new(ServerStats::default());
    let body = completion();
    let clock = LatencyClock::start()?;
    let server_stats = stats.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            server_stats.connections.fetch_add(1, Ordering::SeqCst);
            let stats = server_stats.clone();
            let body = body.clone();
            let clock = clock.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| answer(req, latency, clock.clone(), stats.clone(), body.clone()));
                let _ = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(MockLlm { addr, latency, stats })
}

/// The real `openai` provider pointed at the server (no retries: a failure must show).
///
/// # Errors
/// When the model cannot be built.
pub fn model(server: &MockLlm) -> Result<ChatModelRef> {
    let m = OpenAiModel::builder("bench")
        .base_url(server.base_url())
        .api_key("sk-bench")
        .max_retries(0)
        .timeout(Duration::from_secs(60))
        .build()
        .ctx("building the openai model")?;
    Ok(ChatModelRef::new(m))
}

fn llm_agent(model: &ChatModelRef, i: usize) -> Result<AgentRef> {
    LlmAgent::builder(model.clone())
        .name(format!("llm{i}"))
        .user("Say ok to {{ input }}")
        .output_key(format!("k{i}"))
        .build()
        .ctx("building an LLM agent")
}

/// One LLM agent (one call): the measured latency of a single call through the whole stack.
///
/// # Errors
/// When the agent cannot be built.
pub fn single(model: &ChatModelRef) -> Result<AgentRef> {
    llm_agent(model, 0)
}

/// `k` LLM agents in one [`Parallel`] block.
///
/// # Errors
/// When the system cannot be built.
pub fn parallel(model: &ChatModelRef, k: usize) -> Result<AgentRef> {
    let agents = (0..k).map(|i| llm_agent(model, i)).collect::<Result<Vec<_>>>()?;
    Parallel::builder().name("llm-parallel").sub_agents(agents).build().ctx("building the parallel block")
}

/// `n` LLM agents in a [`Sequence`].
///
/// # Errors
/// When the system cannot be built.
pub fn sequence(model: &ChatModelRef, n: usize) -> Result<AgentRef> {
    let agents = (0..n).map(|i| llm_agent(model, i)).collect::<Result<Vec<_>>>()?;
    Sequence::builder().name("llm-sequence").sub_agents(agents).build().ctx("building the sequence")
}

/// Runs `system` once (no store) and checks that its `keys` LLM agents all wrote `"ok"`; returns the time.
///
/// # Errors
/// When the run fails or an answer is missing.
pub async fn run_checked(system: &AgentRef, keys: usize) -> Result<Duration> {
    let t0 = Instant::now();
    let outcome = system.invoke().input("input", "bench").await.ctx("LLM run")?;
    let elapsed = t0.elapsed();
    let state = outcome.state();
    let answered = (0..keys).filter(|i| state.get(&format!("k{i}")) == Some(&Value::from("ok"))).count();
    ensure(answered == keys, || format!("{answered} of {keys} LLM agents answered"))?;
    Ok(elapsed)
}

/// The reference of the LLM scenarios: `m` concurrent chains of `steps` HTTP calls each to the server, made
/// with the HTTP client the `openai` provider sends plain chat calls with (reqwest, configured the same way:
/// timeout, `TCP_NODELAY`, keep-alive pool) and nothing else: no engine, no agent, no provider. Each call
/// sends the body the provider would, reads the whole answer and checks its content. Returns the wall time.
/// What the HTTP stack costs on this machine on its own: the engine's row divided by this one is the
/// engine's share.
///
/// # Errors
/// When a call fails or an answer is not the server's.
pub async fn http_client_only(server: &MockLlm, m: usize, steps: usize) -> Result<Duration> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .build()
        .ctx("building the HTTP client")?;
    let url = reqwest::Url::parse(&format!("{}/chat/completions", server.base_url())).ctx("the server's URL")?;
    let body = Bytes::from_static(br#"{"model":"bench","messages":[{"role":"user","content":"Say ok to bench"}]}"#);
    let call = |http: reqwest::Client, url: reqwest::Url, body: Bytes| async move {
        let response = http
            .post(url)
            .header(reqwest::header::AUTHORIZATION, "Bearer sk-bench")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .ctx("HTTP call")?;
        let bytes = response.bytes().await.ctx("reading the answer")?;
        let answer: Value = serde_json::from_slice(&bytes).ctx("parsing the answer")?;
        ensure(answer["choices"][0]["message"]["content"] == "ok", || format!("unexpected answer {answer}"))
    };
    // Warm the pool to `m` connections, as the engine's warm-up run does.
    let warm: Vec<_> = (0..m).map(|_| tokio::spawn(call(http.clone(), url.clone(), body.clone()))).collect();
    for h in warm {
        h.await.ctx("HTTP warm-up call panicked")??;
    }
    let t0 = Instant::now();
    let chains: Vec<_> = (0..m)
        .map(|_| {
            let (http, url, body) = (http.clone(), url.clone(), body.clone());
            tokio::spawn(async move {
                for _ in 0..steps {
                    call(http.clone(), url.clone(), body.clone()).await?;
                }
                Ok::<(), crate::error::Error>(())
            })
        })
        .collect();
    for (j, h) in chains.into_iter().enumerate() {
        h.await.ctx(format!("HTTP chain {j} panicked"))??;
    }
    Ok(t0.elapsed())
}

/// `m` concurrent runs of `system` (a [`sequence`] of `steps` agents), one Tokio task per run, each checked;
/// returns the wall time of all of them.
///
/// # Errors
/// When a run fails or an answer is missing.
pub async fn concurrent(system: &AgentRef, m: usize, steps: usize) -> Result<Duration> {
    let t0 = Instant::now();
    let handles: Vec<_> = (0..m)
        .map(|_| {
            let system = system.clone();
            tokio::spawn(async move { run_checked(&system, steps).await })
        })
        .collect();
    for (j, h) in handles.into_iter().enumerate() {
        h.await.ctx(format!("LLM run {j} panicked"))??;
    }
    Ok(t0.elapsed())
}
