//! Helpers shared by several integration tests (`mod common;` in each): the errors of invalid specs, a journal
//! cut short by a crash, an OpenAI-compatible loopback server (wiremock) and protocol peers. The `agentic`
//! binary itself is driven by tests/support/binary.rs. A test file uses only some of them, hence the
//! `dead_code` allowances.

use std::path::Path;
use std::time::Duration;

use agentic::agents::model::OpenAiModel;
use agentic::engine::{CheckpointStore, RunRecord, RunStatus, StepRecord};
use agentic::spec::{Spec, SpecError};
use agentic::store::MemoryStore;
use serde_json::Value;
use wiremock::{MockServer, ResponseTemplate};

// ---------------------------------------------------------------------------------------------------------
// Spec errors

/// The errors of a spec that must not parse.
#[allow(dead_code)]
pub fn errors(yaml: &str) -> Vec<SpecError> {
    match Spec::parse(yaml, "spec.yaml") {
        Ok(_) => panic!("the spec should be invalid"),
        Err(e) => e.errors,
    }
}

/// The single error of a spec that must not parse.
#[allow(dead_code)]
pub fn one(yaml: &str) -> SpecError {
    let errs = errors(yaml);
    assert_eq!(
        errs.len(),
        1,
        "expected one error, got:\n{}",
        errs.iter().map(|e| format!("{e}\n")).collect::<String>()
    );
    errs[0].clone()
}

/// Where an error is: line, column, agent and field.
#[allow(dead_code)]
pub fn at(e: &SpecError) -> (u64, u64, Option<&str>, Option<&str>) {
    (e.line, e.column, e.agent.as_deref(), e.field.as_deref())
}

// ---------------------------------------------------------------------------------------------------------
// Crashes

/// The run `run` as a crash after step `k` of its journal `records` leaves it: a fresh memory store holding
/// only the first `k` records and the run record left `Running`, under the id `<run id>-crash-<k>`. Returns
/// the id and the store, from which the run resumes.
#[allow(dead_code)]
pub async fn crashed_after(run: &RunRecord, records: &[StepRecord], k: usize) -> (String, MemoryStore) {
    let id = format!("{}-crash-{k}", run.run_id);
    let copy = MemoryStore::new();
    let mut rec = run.clone();
    rec.run_id = id.clone();
    rec.status = RunStatus::Running;
    rec.detail = Value::Null;
    copy.put_run(rec).await.expect("put the run");
    for r in &records[..k] {
        let mut r = r.clone();
        r.run_id = id.clone();
        copy.append(r).await.expect("append a record");
    }
    (id, copy)
}

/// How many of `records` are completions of `agent`.
#[allow(dead_code)]
pub fn completions(records: &[StepRecord], agent: &str) -> usize {
    records.iter().filter(|r| r.invocation.as_ref().is_some_and(|i| i.agent == agent)).count()
}

// ---------------------------------------------------------------------------------------------------------
// A loopback OpenAI-compatible server

/// The `openai` provider over `server`: model `gpt-test`, key `sk-test`, 10 ms backoff, 5 s timeout.
#[allow(dead_code)]
pub fn openai(server: &MockServer) -> OpenAiModel {
    OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .api_key("sk-test")
        .backoff(Duration::from_millis(10))
        .timeout(Duration::from_secs(5))
        .build()
        .expect("model")
}

/// A streamed answer: each chunk as a server-sent event, then `[DONE]`.
#[allow(dead_code)]
pub fn sse(chunks: &[&str]) -> ResponseTemplate {
    let body = chunks.iter().map(|d| format!("data: {d}\n\n")).collect::<String>() + "data: [DONE]\n\n";
    ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(body)
}

/// The JSON bodies of the requests `server` received, in order.
#[allow(dead_code)]
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request JSON"))
        .collect()
}

// ---------------------------------------------------------------------------------------------------------
// Protocol peers (the official MCP and A2A Python SDKs)

/// The Python of the peers' virtualenv (`scripts/setup-peers.sh`): `AGENTIC_PEERS_PYTHON`, else
/// `target/peers/bin/python`. `None` (the test is skipped, saying so) when it is missing, unless
/// `AGENTIC_REQUIRE_PEERS` is set (CI sets it): then the test fails.
#[allow(dead_code)]
pub fn peers_python() -> Option<std::path::PathBuf> {
    let python = std::env::var_os("AGENTIC_PEERS_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/bin/python"));
    if python.exists() {
        return Some(python);
    }
    if std::env::var_os("AGENTIC_REQUIRE_PEERS").is_some() {
        panic!("AGENTIC_REQUIRE_PEERS is set but {} is missing: run scripts/setup-peers.sh", python.display());
    }
    eprintln!("skipped: no protocol peers at {} (run scripts/setup-peers.sh)", python.display());
    None
}

/// A peer script of `tests/peers/`.
#[allow(dead_code)]
pub fn peer_script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers").join(name).display().to_string()
}

/// Reads the server-sent events stream `live` into `text` until it contains `marker` (`event: suspended`),
/// failing when that takes past `overall` or a chunk takes longer than `per_chunk` (keep-alive comments arrive
/// every 15 s: bound the whole wait, not only each chunk).
#[allow(dead_code)]
pub async fn read_until(
    live: &mut reqwest::Response,
    text: &mut String,
    marker: &str,
    overall: std::time::Instant,
    per_chunk: Duration,
) {
    while !text.contains(marker) {
        assert!(std::time::Instant::now() < overall, "no `{marker}` in time: {text}");
        let chunk = tokio::time::timeout(per_chunk, live.chunk())
            .await
            .unwrap_or_else(|_| panic!("no chunk within {per_chunk:?} while waiting for `{marker}`: {text}"))
            .expect("the event stream is readable")
            .unwrap_or_else(|| panic!("the event stream ended before `{marker}`: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// A free loopback port.
#[allow(dead_code)]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A child process killed when dropped (a peer server).
#[allow(dead_code)]
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until something accepts connections on `port` (30 s at most).
#[allow(dead_code)]
pub fn wait_port(port: u16) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "nothing listens on port {port} after 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}
