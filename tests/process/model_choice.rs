//! The model chosen per invocation with two loopback OpenAI-compatible servers (SPEC.md §7): the worked
//! example of docs/spec.md §8, run as written through the CLI — the strong model for long requests until the
//! run's cost passes $0.002, the small one after — with what each server saw, `show` (the models per agent and
//! the usage per model), `show --json`, the report's models table, and a recording replayed offline: each call
//! answered by the model the choice picked, nothing sent to either server.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::binary::{agentic, stderr, stdout};

/// The worked example's YAML, read from docs/spec.md §8 (the block after "A worked example").
fn worked_example() -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/spec.md")).unwrap();
    let section = &doc[doc.find("## 8. The model chosen per invocation").unwrap()..];
    let from = section.find("**A worked example**").unwrap();
    let block = &section[from..];
    let start = block.find("```yaml\n").unwrap() + "```yaml\n".len();
    let end = start + block[start..].find("```").unwrap();
    block[start..end].to_string()
}

/// An OpenAI-compatible server answering `<name>: <the request>` and reporting 200 input and 100 output tokens.
async fn server(name: &'static str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(move |request: &Request| {
            let prompt = crate::echo_model::prompt_of(request);
            ResponseTemplate::new(200).set_body_json(json!({
                "id": "c", "object": "chat.completion", "created": 0, "model": name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("{name}: {prompt}")},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 200, "completion_tokens": 100, "total_tokens": 300}
            }))
        })
        .mount(&server)
        .await;
    server
}

/// The `model` each request a server received named, in order.
async fn models_asked(server: &MockServer) -> Vec<String> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["model"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worked_example_routes_by_length_and_falls_back_to_the_small_model_once_the_cost_passes_its_threshold() {
    let (small, strong) = (server("small").await, server("strong").await);
    let yaml =
        worked_example().replace("http://127.0.0.1:8081", &small.uri()).replace("http://127.0.0.1:8082", &strong.uri());
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("routed.yaml");
    std::fs::write(&file, &yaml).unwrap();

    let long = |what: &str| format!("{what} {}", "x".repeat(100));
    let questions = json!([long("first"), long("second"), long("third"), "Thanks!"]);
    let record = dir.path().join("calls.jsonl");
    let input = format!("questions={questions}");
    let args =
        ["run", file.to_str().unwrap(), "--input", &input, "--memory-id", "q1", "--record", record.to_str().unwrap()];
    let run = agentic(&store, &args);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    let answered: Value = serde_json::from_str(&stdout(&run)).unwrap();
    assert_eq!(
        answered,
        json!([
            format!("strong: {}", long("first")),
            format!("strong: {}", long("second")),
            format!("small: {}", long("third")),
            "small: Thanks!"
        ])
    );
    // Each server saw the calls the choice gave it, under its own model name.
    assert_eq!(models_asked(&strong).await, ["large-1", "large-1"]);
    assert_eq!(models_asked(&small).await, ["small-1", "small-1"]);

    let shown = agentic(&store, &["show", "q1"]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let text = stdout(&shown);
    let usage = "usage:\n  answer (root/1): 1200 tokens (800 in, 400 out), 4 model calls, $0.003180 [strong, small]\n  \
                 total: 1200 tokens (800 in, 400 out), 4 model calls, $0.003180\nusage by model:\n  \
                 strong: 600 tokens (400 in, 200 out), 2 model calls, $0.003000\n  \
                 small: 600 tokens (400 in, 200 out), 2 model calls, $0.000180\n";
    assert!(text.contains(usage), "{text}");

    let json_shown = agentic(&store, &["show", "q1", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&json_shown)).unwrap();
    assert_eq!(v["usage"]["total"]["models"], json!(["strong", "small"]));
    assert_eq!(
        v["usage"]["by_model"],
        json!([
            {"model": "strong", "input_tokens": 400, "output_tokens": 200, "tokens": 600, "model_calls": 2, "cost_usd": 0.003},
            {"model": "small", "input_tokens": 400, "output_tokens": 200, "tokens": 600, "model_calls": 2, "cost_usd": 0.00018}
        ])
    );

    let report = dir.path().join("q1.html");
    let made = agentic(&store, &["report", "q1", "-o", report.to_str().unwrap()]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains(r#"<td class="models">strong, small</td>"#), "the agents table names the models");
    let rows: Vec<&str> = html
        .split(r#"<table class="grid" id="models">"#)
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap()
        .matches("<tr><td>")
        .collect();
    assert_eq!(rows.len(), 2, "a row per model");
    assert!(html.contains(r#"<tr><td>strong</td><td class="num">400</td><td class="num">200</td><td class="num">2</td><td class="num">$0.003000</td></tr>"#));

    // The recording answers a replay with the same choices, offline: neither server is asked again.
    let lines: Vec<Value> =
        std::fs::read_to_string(&record).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let recorded: Vec<&str> = lines.iter().map(|l| l["request"]["model"].as_str().unwrap()).collect();
    assert_eq!(recorded, ["large-1", "large-1", "small-1", "small-1"]);
    let replay = agentic(
        &store,
        &["run", file.to_str().unwrap(), "--input", &input, "--memory-id", "q2", "--replay", record.to_str().unwrap()],
    );
    assert_eq!(replay.status.code(), Some(0), "{}{}", stdout(&replay), stderr(&replay));
    assert_eq!(serde_json::from_str::<Value>(&stdout(&replay)).unwrap(), answered);
    assert_eq!((models_asked(&strong).await.len(), models_asked(&small).await.len()), (2, 2));

    // A replay whose choice differs (all questions short: the small model first) fails naming `model`.
    let short = format!("questions={}", json!(["a", "b", "c", "d"]));
    let differs = agentic(
        &store,
        &["run", file.to_str().unwrap(), "--input", &short, "--memory-id", "q3", "--replay", record.to_str().unwrap()],
    );
    assert_eq!(differs.status.code(), Some(1), "{}{}", stdout(&differs), stderr(&differs));
    assert!(stderr(&differs).contains("`model`"), "{}", stderr(&differs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_router_on_a_chat_model_chooses_per_invocation_and_its_report_draws_the_diagram() {
    // An OpenAI-compatible server deciding `legal`, reporting 40 input and 5 output tokens, priced.
    let chat = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c", "object": "chat.completion", "created": 0, "model": "router-chat",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"agent\": \"legal\"}"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}
        })))
        .mount(&chat)
        .await;
    let yaml = format!(
        r#"version: 1
name: desk
root: router
models:
  quick: {{ provider: scripted, decisions: [medical] }}
  chat: {{ provider: openai, base_url: "{}/v1", model: router-chat, prices: {{ input_per_mtok: 100, output_per_mtok: 200 }} }}
agents:
  router:
    kind: decision_router
    agents: [medical, legal]
    model: {{ choose: "'chat' if request | length > 10 else 'quick'", default: quick }}
  medical: {{ kind: compute, description: Medical., template: "medical: {{{{ request }}}}", output_key: answer }}
  legal: {{ kind: compute, description: Legal., template: "legal: {{{{ request }}}}", output_key: answer }}
"#,
        chat.uri()
    );
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("desk.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let run =
        agentic(&store, &["run", file.to_str().unwrap(), "--input", "request=a lease contract", "--memory-id", "d1"]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    assert_eq!(stdout(&run), "legal: a lease contract\n");
    let short = agentic(&store, &["run", file.to_str().unwrap(), "--input", "request=a fall", "--memory-id", "d2"]);
    assert_eq!(stdout(&short), "medical: a fall\n", "{}", stderr(&short));
    assert_eq!(chat.received_requests().await.unwrap_or_default().len(), 1, "the short request asked no server");

    let shown = stdout(&agentic(&store, &["show", "d1"]));
    // 40 × $100 + 5 × $200 per million tokens.
    assert!(shown.contains("  router (root/2): 45 tokens (40 in, 5 out), 1 model call, $0.005000 [chat]\n"), "{shown}");

    let report = dir.path().join("d1.html");
    let made = agentic(&store, &["report", "d1", "-o", report.to_str().unwrap()]);
    assert_eq!(stderr(&made), format!("report: {}\n", report.display()), "no warning: the diagram is there");
    assert!(std::fs::read_to_string(&report).unwrap().contains("id=\"topology-svg\""));
}
