//! The OpenTelemetry export (feature `otel`), received by an OTLP/HTTP collector on loopback in this test
//! (JSON bodies, decoded here): runs under the OTLP layer send their spans — `invoke_workflow` →
//! `invoke_agent` → `chat` / `execute_tool`, with the GenAI attributes — and the GenAI client metrics; the W3C
//! `traceparent` reaches an MCP peer (the official Python SDK, over stdio and streamable HTTP) and comes into
//! `agentic serve` (its API and its A2A endpoint). Run with `cargo test --features otel --test otel_export`.
//!
//! One global subscriber and one collector serve every test of the binary: each test finds its own spans by
//! its run id and its own metrics by its model's name.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentic::agents::a2a::{A2aAgent, A2aClient};
use agentic::agents::model::OpenAiModel;
use agentic::agents::{McpAgent, McpClient, McpToolProvider};
use agentic::engine::StoreRef;
use agentic::prelude::*;
use agentic::store::MemoryStore;
use agentic::telemetry::{OtlpConfig, OtlpGuard, otlp_layer};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

// ---------------------------------------------------------------------------------------------------------
// The collector

/// An OTLP/HTTP collector on loopback: every POST's path and JSON body, answered `200 {}`.
struct Collector {
    url: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let into = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let into = into.clone();
                std::thread::spawn(move || serve(stream, &into));
            }
        });
        Collector { url, received }
    }

    /// The bodies received at `path` so far.
    fn bodies(&self, path: &str) -> Vec<Value> {
        self.received.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, b)| b.clone()).collect()
    }
}

/// One HTTP/1.1 connection: requests with a `Content-Length` body, one after another.
fn serve(stream: TcpStream, into: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let json: Value = serde_json::from_slice(&body).expect("an OTLP JSON body");
        into.lock().unwrap().push((path, json));
        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// The collector and the exporter every test of this binary shares (the global subscriber is set once).
struct Telemetry {
    collector: Collector,
    guard: OtlpGuard,
}

fn telemetry() -> &'static Telemetry {
    static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();
    TELEMETRY.get_or_init(|| {
        // On a plain thread: the exporters' blocking HTTP clients must not be built inside a runtime.
        std::thread::spawn(|| {
            let collector = Collector::start();
            let config = OtlpConfig::new(collector.url.clone()).json(true).service_name("otel-test");
            let (layer, guard) = otlp_layer(&config).expect("exporter");
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).expect("subscriber");
            Telemetry { collector, guard }
        })
        .join()
        .unwrap()
    })
}

/// Exports what is buffered (spans and metrics) to the collector.
async fn flush() {
    tokio::task::spawn_blocking(|| telemetry().guard.flush()).await.unwrap().expect("flush");
}

// ---------------------------------------------------------------------------------------------------------
// Reading OTLP JSON

/// Every span received so far.
fn spans() -> Vec<Value> {
    let mut spans = Vec::new();
    for body in telemetry().collector.bodies("/v1/traces") {
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = attr(&rs["resource"], "service.name");
            assert_eq!(service, Some(&json!({"stringValue": "otel-test"})));
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    spans
}

/// The OTLP value of attribute `key` of a span (or resource, event, data point).
fn attr<'a>(item: &'a Value, key: &str) -> Option<&'a Value> {
    item["attributes"].as_array()?.iter().find(|a| a["key"] == key).map(|a| &a["value"])
}

fn text<'a>(item: &'a Value, key: &str) -> Option<&'a str> {
    attr(item, key)?["stringValue"].as_str()
}

/// A number of OTLP JSON: 64-bit integers are strings.
fn number(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str()?.parse().ok())
}

fn int(item: &Value, key: &str) -> Option<i64> {
    number(&attr(item, key)?["intValue"]).map(|n| n as i64)
}

/// The string array attribute `key`.
fn strings(item: &Value, key: &str) -> Option<Vec<String>> {
    let values = attr(item, key)?["arrayValue"]["values"].as_array()?;
    Some(values.iter().filter_map(|v| v["stringValue"].as_str().map(str::to_string)).collect())
}

/// What `find` finds in what the collector received, flushing until it does (10 s at most): a span ends
/// once its children did, and the actors of a run may end a little after the run returned.
async fn eventually<T>(what: &str, find: impl Fn() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        flush().await;
        if let Some(found) = find() {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "not exported within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `invoke_workflow` span of run `run_id` and the spans of its trace.
async fn trace_of(run_id: &str) -> (Value, Vec<Value>) {
    let workflow = eventually(&format!("the invoke_workflow span of run {run_id}"), || {
        spans().into_iter().find(|s| {
            s["name"].as_str().is_some_and(|n| n.starts_with("invoke_workflow"))
                && text(s, "agentic.run_id") == Some(run_id)
        })
    })
    .await;
    let trace: Vec<Value> = spans().into_iter().filter(|s| s["traceId"] == workflow["traceId"]).collect();
    (workflow, trace)
}

/// The span named `name` among `spans`, exactly one.
fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "one span `{name}`: {found:#?}");
    found[0]
}

/// `00-<trace>-<span>-01`: the `traceparent` naming `span` (sampled).
fn traceparent_of(span: &Value) -> String {
    format!("00-{}-{}-01", span["traceId"].as_str().unwrap(), span["spanId"].as_str().unwrap())
}

/// The OTLP span kinds.
const INTERNAL: i64 = 1;
const CLIENT: i64 = 3;

/// The histogram data points of metric `name` in the latest metrics export holding points with
/// `gen_ai.request.model` = `model` (metrics are cumulative), and the metric's unit.
fn histogram(name: &str, model: &str) -> (String, Vec<Value>) {
    let mut found = None;
    for body in telemetry().collector.bodies("/v1/metrics") {
        for rm in body["resourceMetrics"].as_array().into_iter().flatten() {
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten().filter(|m| m["name"] == name) {
                    let points: Vec<Value> = m["histogram"]["dataPoints"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|p| text(p, "gen_ai.request.model") == Some(model))
                        .cloned()
                        .collect();
                    if !points.is_empty() {
                        found = Some((m["unit"].as_str().unwrap_or("").to_string(), points));
                    }
                }
            }
        }
    }
    found.unwrap_or_else(|| panic!("no `{name}` points for model {model}"))
}

// ---------------------------------------------------------------------------------------------------------
// A loopback model server

/// An OpenAI-compatible answer with the usage the server reports.
fn completion(model: &str, message: Value, finish: &str, usage: (u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-otel", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1}
    })
}

/// A model server that first calls `tool` (call id `call_id`, arguments `arguments`), then answers `answer`.
async fn tool_then_answer(model: &str, tool: &str, call_id: &str, arguments: Value, answer: &str) -> MockServer {
    let server = MockServer::start().await;
    let call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments.to_string()}}
    ]});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(model, call, "tool_calls", (11, 7))))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let message = json!({"role": "assistant", "content": answer});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(model, message, "stop", (23, 5))))
        .mount(&server)
        .await;
    server
}

/// The `openai` provider over `server` with model `model`.
fn model_at(server: &MockServer, model: &str) -> OpenAiModel {
    OpenAiModel::builder(model)
        .base_url(format!("{}/v1", server.uri()))
        .api_key("sk-test")
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------------------
// The tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invocation_spans_reach_the_collector_with_genai_attributes_and_nesting() {
    telemetry();
    let draft = Compute::template("draft", "Once upon a time, {{ topic }}.").unwrap().output_key("story").build();
    let shout = Compute::expression("shout", "story | upper").unwrap().output_key("loud").build();
    let system = Sequence::builder().name("story").sub_agents([draft, shout]).output_key("loud").build().unwrap();
    let outcome = system.invoke().memory_id("otel-run").input("topic", "a dragon").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("ONCE UPON A TIME, A DRAGON.")));
    flush().await;

    let (workflow, trace) = trace_of("otel-run").await;
    assert_eq!(workflow["name"], "invoke_workflow story");
    let root = one(&trace, "invoke_agent story");
    assert_eq!(root["parentSpanId"], workflow["spanId"], "the root agent runs in the workflow");
    assert_eq!(text(root, "agentic.agent.path"), Some("root"));
    for (child, path) in [("draft", "root/0"), ("shout", "root/1")] {
        let span = one(&trace, &format!("invoke_agent {child}"));
        assert_eq!(span["parentSpanId"], root["spanId"], "{child} is nested under the sequence");
        assert_eq!(text(span, "gen_ai.operation.name"), Some("invoke_agent"));
        assert_eq!(text(span, "gen_ai.agent.name"), Some(child));
        assert_eq!(text(span, "agentic.agent.path"), Some(path));
        assert_eq!(text(span, "agentic.run_id"), Some("otel-run"));
        assert_eq!(span["kind"], INTERNAL);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_a_model_and_a_tool_exports_workflow_agent_chat_and_tool_spans_and_the_genai_metrics() {
    telemetry();
    const MODEL: &str = "gpt-otel-tools";
    let server = tool_then_answer(MODEL, "add", "call_add_1", json!({"a": 2, "b": 40}), "The sum is 42.").await;
    let port = server.address().port();

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct AddArgs {
        a: i64,
        b: i64,
    }
    let add = Tool::new("add", "Adds two integers", |x: AddArgs| async move { Ok(json!(x.a + x.b)) });
    // Known by a name of the program's (a spec's `models` entry): the span says which.
    let calculator =
        LlmAgent::builder(agentic::agents::model::ChatModelRef::new(model_at(&server, MODEL)).named("adder"))
            .name("calculator")
            .user("What is {{ question }}?")
            .tools([add])
            .output_key("answer")
            .build()
            .unwrap();
    let shout = Compute::expression("shout", "answer | upper").unwrap().output_key("loud").build();
    let system = Sequence::builder().name("math").sub_agents([calculator, shout]).output_key("loud").build().unwrap();
    let outcome = system.invoke().memory_id("otel-tools").input("question", "2 + 40").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("THE SUM IS 42.")));
    flush().await;

    let (workflow, trace) = trace_of("otel-tools").await;
    // The run.
    assert_eq!(workflow["name"], "invoke_workflow math");
    assert_eq!(workflow["parentSpanId"].as_str().unwrap_or(""), "", "a run without a caller starts a trace");
    assert_eq!(text(&workflow, "gen_ai.operation.name"), Some("invoke_workflow"));
    assert_eq!(text(&workflow, "gen_ai.workflow.name"), Some("math"));
    assert_eq!(text(&workflow, "agentic.run.status"), Some("completed"));
    assert_eq!(attr(&workflow, "error.type"), None);

    // The agents: the sequence, the LLM agent under it with the tokens of both model calls.
    let root = one(&trace, "invoke_agent math");
    assert_eq!(root["parentSpanId"], workflow["spanId"]);
    let llm = one(&trace, "invoke_agent calculator");
    assert_eq!(llm["parentSpanId"], root["spanId"]);
    assert_eq!(text(llm, "gen_ai.agent.name"), Some("calculator"));
    assert_eq!((int(llm, "gen_ai.usage.input_tokens"), int(llm, "gen_ai.usage.output_tokens")), (Some(34), Some(12)));

    // The sequence's decisions, as events on its span.
    let decisions: Vec<(Option<&str>, Option<&str>)> = root["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "agentic.planner.decision")
        .map(|e| (text(e, "agentic.planner.action"), text(e, "agentic.planner.calls")))
        .collect();
    assert_eq!(decisions, [(Some("call"), Some("root/0")), (Some("call"), Some("root/1")), (Some("done"), None)]);

    // The model calls: a CLIENT span each, under the LLM agent, with what the server reported.
    let mut chats: Vec<&Value> = trace.iter().filter(|s| s["name"] == format!("chat {MODEL}")).collect();
    chats.sort_by_key(|s| number(&s["startTimeUnixNano"]).map(|n| n as u128));
    assert_eq!(chats.len(), 2);
    for (chat, tokens, finish) in [(chats[0], (11, 7), "tool_calls"), (chats[1], (23, 5), "stop")] {
        assert_eq!(chat["parentSpanId"], llm["spanId"]);
        assert_eq!(chat["kind"], CLIENT);
        assert_eq!(text(chat, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(text(chat, "gen_ai.provider.name"), Some("openai"));
        assert_eq!(text(chat, "gen_ai.request.model"), Some(MODEL));
        assert_eq!(text(chat, "agentic.model"), Some("adder"));
        assert_eq!(text(chat, "server.address"), Some("127.0.0.1"));
        assert_eq!(int(chat, "server.port"), Some(i64::from(port)));
        assert_eq!(int(chat, "gen_ai.usage.input_tokens"), Some(tokens.0));
        assert_eq!(int(chat, "gen_ai.usage.output_tokens"), Some(tokens.1));
        assert_eq!(strings(chat, "gen_ai.response.finish_reasons"), Some(vec![finish.to_string()]));
        assert_eq!(attr(chat, "error.type"), None);
    }

    // The tool call: between the two model calls, under the LLM agent.
    let tool = one(&trace, "execute_tool add");
    assert_eq!(tool["parentSpanId"], llm["spanId"]);
    assert_eq!(tool["kind"], INTERNAL);
    assert_eq!(text(tool, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(text(tool, "gen_ai.tool.name"), Some("add"));
    assert_eq!(text(tool, "gen_ai.tool.call.id"), Some("call_add_1"));
    assert_eq!(text(tool, "gen_ai.tool.description"), Some("Adds two integers"));
    let at = |s: &Value, k: &str| number(&s[k]).unwrap();
    assert!(at(chats[0], "endTimeUnixNano") <= at(tool, "startTimeUnixNano"));
    assert!(at(tool, "endTimeUnixNano") <= at(chats[1], "startTimeUnixNano"));

    // The metrics: the tokens of the two calls by type, and their durations.
    let (unit, points) = histogram("gen_ai.client.token.usage", MODEL);
    assert_eq!(unit, "{token}");
    for (kind, sum) in [("input", 34.0), ("output", 12.0)] {
        let point = points.iter().find(|p| text(p, "gen_ai.token.type") == Some(kind)).unwrap();
        assert_eq!((number(&point["count"]), number(&point["sum"])), (Some(2.0), Some(sum)), "{kind} tokens");
        assert_eq!(text(point, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(text(point, "gen_ai.provider.name"), Some("openai"));
        assert_eq!(text(point, "server.address"), Some("127.0.0.1"));
        assert_eq!(int(point, "server.port"), Some(i64::from(port)));
    }
    assert_eq!(points.len(), 2);
    let (unit, points) = histogram("gen_ai.client.operation.duration", MODEL);
    assert_eq!(unit, "s");
    assert_eq!(points.len(), 1);
    assert_eq!(number(&points[0]["count"]), Some(2.0));
    assert_eq!(text(&points[0], "gen_ai.operation.name"), Some("chat"));
    assert_eq!(points[0]["explicitBounds"][0], json!(0.01));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model_call_is_an_error_span_with_its_http_status() {
    telemetry();
    const MODEL: &str = "gpt-otel-refused";
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "bad request"}})))
        .mount(&server)
        .await;
    let agent = LlmAgent::builder(model_at(&server, MODEL)).name("refused").user("Hi").build().unwrap();
    let err = agent.invoke().memory_id("otel-refused").await.unwrap_err();
    assert_eq!(err.kind(), "failed");
    flush().await;

    let (workflow, trace) = trace_of("otel-refused").await;
    assert_eq!(text(&workflow, "agentic.run.status"), Some("failed"));
    assert_eq!(text(&workflow, "error.type"), Some("failed"));
    let chat = one(&trace, &format!("chat {MODEL}"));
    assert_eq!(text(chat, "error.type"), Some("400"));
    // A model the program gave no name: no `agentic.model`.
    assert_eq!(attr(chat, "agentic.model"), None);
    assert_eq!(chat["status"]["code"], 2, "an error status");
    let agent = one(&trace, "invoke_agent refused");
    assert_eq!(text(agent, "error.type"), Some("failed"));
    let (_, points) = histogram("gen_ai.client.operation.duration", MODEL);
    assert_eq!(text(&points[0], "error.type"), Some("400"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_peers_receive_the_traceparent_of_the_call_over_stdio_and_streamable_http() {
    telemetry();
    let Some(python) = common::peers_python() else { return };
    let script = common::peer_script("mcp_server.py");

    // Over stdio, as an LLM agent's tool: the peer receives the `execute_tool` span's context in `_meta`.
    const MODEL: &str = "gpt-otel-mcp";
    let server = tool_then_answer(MODEL, "trace_context", "call_trace_1", json!({}), "Traced.").await;
    let python_text = python.display().to_string();
    let stdio = McpClient::stdio("traced", [python_text.as_str(), script.as_str(), "stdio", "--only", "trace_context"]);
    let inspector = LlmAgent::builder(model_at(&server, MODEL))
        .name("inspector")
        .user("Which trace is this?")
        .tool_provider(McpToolProvider::builder().client(stdio).build())
        .build()
        .unwrap();
    let outcome = inspector.invoke().memory_id("otel-mcp-stdio").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("Traced.")));
    // What the peer returned is the tool result the model read next.
    let requests = common::bodies(&server).await;
    let result = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(result["role"], "tool");
    let seen: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();

    // Over streamable HTTP, as an MCP agent: in `_meta` and in the HTTP header.
    let port = common::free_port();
    let child = std::process::Command::new(&python)
        .args([script.as_str(), "http", &port.to_string(), "--only", "trace_context"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _peer = common::KillOnDrop(child);
    common::wait_port(port);
    let http = McpClient::http("traced", format!("http://127.0.0.1:{port}/mcp"));
    let agent = McpAgent::builder(http).tool_name("trace_context").output_key("seen").build().await.unwrap();
    let over_http = agent.invoke().memory_id("otel-mcp-http").await.unwrap().output().cloned().unwrap();
    flush().await;

    let (_, trace) = trace_of("otel-mcp-stdio").await;
    let tool = one(&trace, "execute_tool trace_context");
    assert_eq!(text(tool, "gen_ai.tool.call.id"), Some("call_trace_1"));
    assert_eq!(seen, json!({"meta": traceparent_of(tool), "header": null}), "stdio has no header");

    let (_, trace) = trace_of("otel-mcp-http").await;
    let agent = one(&trace, "invoke_agent trace_context");
    let expected = traceparent_of(agent);
    assert_eq!(over_http, json!({"meta": expected, "header": expected}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentic_serve_continues_the_trace_of_the_request_that_starts_a_run() {
    telemetry();
    let dir = tempfile::tempdir().unwrap();
    let hello = "version: 1\nname: hello\nroot: greet\nagents:\n  \
                 greet: { kind: compute, description: Greets someone., inputs: [name], template: \"Hello, {{ name }}!\", output_key: greeting }\n";
    std::fs::write(dir.path().join("hello.yaml"), hello).unwrap();
    let store: StoreRef = Arc::new(MemoryStore::new());
    let config = agentic_server::ServerConfig::new(store).listen("127.0.0.1:0".parse().unwrap()).specs_dir(dir.path());
    let server = agentic_server::Server::start(config).await.unwrap();
    let base = server.url();

    // The API: the header's context is the run's parent.
    const CALLER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let created: Value = reqwest::Client::new()
        .post(format!("{base}/api/v1/runs"))
        .header("traceparent", CALLER)
        .json(&json!({"spec_name": "hello", "inputs": {"name": "Ada"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = created["run_id"].as_str().unwrap().to_string();

    // A2A: our own client's request carries its agent's context to the server's run.
    let card = format!("{base}/.well-known/hello/agent-card.json");
    let remote = A2aAgent::builder(A2aClient::new("hello", card)).inputs(["name"]).output_key("reply").build_lazy();
    remote.invoke().memory_id("otel-a2a-client").input("name", "Grace").await.unwrap();
    server.wait_idle().await;
    flush().await;

    let (workflow, _) = trace_of(&run_id).await;
    assert_eq!(workflow["traceId"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(workflow["parentSpanId"], "b7ad6b7169203331");
    assert_eq!(text(&workflow, "gen_ai.workflow.name"), Some("hello"));

    let (_, client_trace) = trace_of("otel-a2a-client").await;
    let asking = one(&client_trace, "invoke_agent hello").clone();
    let served = eventually("the server's run under the A2A agent's span", || {
        spans().into_iter().find(|s| s["name"] == "invoke_workflow hello" && s["parentSpanId"] == asking["spanId"])
    })
    .await;
    assert_eq!(served["traceId"], asking["traceId"], "the server's run continues the A2A agent's trace");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_evaluation_result_is_a_genai_evaluation_event_on_the_case_span() {
    use agentic::eval::{Dataset, Evaluator, Judges, Runner, case_inputs};
    telemetry();
    let spec = agentic::spec::Spec::parse(
        "version: 1\nname: shouty\nroot: shout\nagents:\n  shout: {kind: compute, value: \"word | upper\", output_key: loud}\n\
         evals:\n  - {name: same, kind: equals}\n  - {name: short, kind: expression, check: \"output | length < 4\"}\n",
        "shouty.yaml",
    )
    .unwrap();
    let built = spec.build().unwrap();
    let dataset = Dataset::parse(
        "{\"id\": \"otel-case\", \"inputs\": {\"word\": \"hello\"}, \"expected\": \"HELLO\"}\n",
        "d.jsonl",
    )
    .unwrap();
    let inputs = case_inputs(&spec, &built, &dataset).unwrap();
    let evaluators = Evaluator::of_spec(&spec).unwrap();
    let store: StoreRef = std::sync::Arc::new(MemoryStore::new());
    let runner = Runner {
        built,
        store,
        judges: Judges::for_spec(&spec, &evaluators).unwrap(),
        evaluators: std::sync::Arc::new(evaluators),
        eval_id: "otel-eval".to_string(),
        repeat: 1,
        concurrency: 1,
        spec_hash: None,
        source: None,
        calls: None,
    };
    let runs = runner.run(&dataset.cases, &inputs, |_| {}).await;
    let run_id = runs[0].runs[0].0.run_id.clone();
    flush().await;

    let (workflow, _) = trace_of(&run_id).await;
    let case = eventually("the evaluate span", || {
        spans()
            .into_iter()
            .find(|s| s["name"] == "evaluate otel-case" && text(s, "agentic.eval.id") == Some("otel-eval"))
    })
    .await;
    assert_eq!(workflow["parentSpanId"], case["spanId"], "the case's run runs in its span");
    assert_eq!(text(&case, "agentic.run_id"), Some(run_id.as_str()));
    // (name, score, label, kind) of each evaluation event.
    type Verdict<'a> = (Option<&'a str>, Option<f64>, Option<&'a str>, Option<&'a str>);
    let results: Vec<Verdict<'_>> = case["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "gen_ai.evaluation.result")
        .map(|e| {
            (
                text(e, "gen_ai.evaluation.name"),
                attr(e, "gen_ai.evaluation.score.value").and_then(|v| number(&v["doubleValue"])),
                text(e, "gen_ai.evaluation.score.label"),
                text(e, "agentic.eval.kind"),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            (Some("same"), Some(1.0), Some("pass"), Some("equals")),
            (Some("short"), Some(0.0), Some("fail"), Some("expression")),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_secret_key_reaches_the_model_server_but_no_span_or_metric() {
    telemetry();
    const SECRET: &str = "sk-otel-secret-4f9a7c21d8e3";
    const MODEL: &str = "gpt-otel-secret";
    agentic::spec::Secrets::installed().with("OTEL_MODEL_KEY", SECRET).install();
    // The model server answers once, then refuses the key, repeating it in its error (as some servers do).
    let server = MockServer::start().await;
    let answer = json!({"role": "assistant", "content": "Paris"});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(MODEL, answer, "stop", (9, 1))))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let refusal = json!({"error": {"message": format!("Incorrect API key provided: Bearer {SECRET}")}});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_json(refusal))
        .mount(&server)
        .await;
    let yaml = format!(
        "version: 1\nname: capital\nroot: main\nmodels:\n  default:\n    provider: openai\n    base_url: \"{}/v1\"\n    \
         model: {MODEL}\n    api_key: ${{secret:OTEL_MODEL_KEY}}\nagents:\n  main: {{ kind: sequence, agents: [ask, again], output_key: again }}\n  \
         ask: {{ kind: llm, user: \"Capital of France?\", output_key: answer }}\n  \
         again: {{ kind: llm, user: \"Sure?\", output_key: again }}\n",
        server.uri()
    );
    let spec = agentic::spec::Spec::parse(&yaml, "capital.yaml").unwrap();
    let built = spec.build().unwrap();
    let err = built.root.invoke().memory_id("otel-secret").await.unwrap_err();
    assert_eq!(err.kind(), "failed");
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 2);
    for request in &received {
        assert_eq!(request.headers["authorization"], format!("Bearer {SECRET}").as_str());
    }
    // Every span of the run exported, its failed chat span too: nothing the collector received holds the key.
    let (_, trace) = trace_of("otel-secret").await;
    eventually("the failed chat span", || trace.iter().find(|s| text(s, "error.type") == Some("401")).cloned()).await;
    flush().await;
    let everything =
        telemetry().collector.received.lock().unwrap().iter().map(|(_, b)| b.to_string()).collect::<String>();
    assert!(everything.contains("otel-secret"), "the run's spans were exported");
    assert!(!everything.contains(SECRET), "the secret's value reached the OTLP export");
}
