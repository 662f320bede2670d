//! Live events of `agentic serve` (real process): a streaming `llm` agent on a loopback OpenAI-compatible
//! server — its tokens arrive over SSE in order before `completed`, and a client connecting after the end gets
//! the whole journaled sequence.

#![allow(clippy::unwrap_used)]

use crate::binary::Serve;
use crate::common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            Some((name.to_string(), serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_stream_live_in_order_and_late_clients_get_the_journal() {
    let model = MockServer::start().await;
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Once "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"upon "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"a time."},"finish_reason":"stop"}]}"#,
    ];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(common::sse(&chunks))
        .mount(&model)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "version: 1\nname: tale\nroot: main\nmodels:\n  default: {{ provider: openai, base_url: \"{}/v1\", model: m }}\n\
         agents:\n  main: {{ kind: sequence, agents: [gate, tell], output_key: story }}\n\
         \x20 gate: {{ kind: human, prompt: \"Go?\", response_id: go, output_key: go }}\n\
         \x20 tell: {{ kind: llm, user: \"Tell a story ({{{{ go }}}})\", stream: true, output_key: story }}\n",
        model.uri()
    );
    let store = dir.path().join("store");
    let served = Serve::on(&store).env("OPENAI_API_KEY", "sk-test").start();
    let url = served.url.clone();
    let http = reqwest::Client::new();
    let created =
        http.post(format!("{url}/api/v1/runs")).json(&json!({"spec": spec, "run_id": "t"})).send().await.unwrap();
    assert_eq!(created.status(), 201);

    // Watch live from the suspension on, then answer: the stream carries the tokens, then the end.
    let mut live = http.get(format!("{url}/api/v1/runs/t/events")).send().await.unwrap();
    let mut text = String::new();
    let overall = Instant::now() + Duration::from_secs(60);
    common::read_until(&mut live, &mut text, "event: suspended", overall, Duration::from_secs(20)).await;
    let answered =
        http.post(format!("{url}/api/v1/runs/t/responses/go")).json(&json!({"value": "yes"})).send().await.unwrap();
    assert_eq!(answered.status(), 202);
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), live.chunk()).await.unwrap().unwrap() {
        assert!(Instant::now() < overall, "the stream did not end within 60 s: {text}");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let seen = events(&text);
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    let tokens: Vec<&str> =
        seen.iter().filter(|(n, _)| n == "token").map(|(_, d)| d["text"].as_str().unwrap()).collect();
    assert_eq!(tokens, ["Once ", "upon ", "a time."], "{names:?}");
    let first_token = names.iter().position(|n| *n == "token").unwrap();
    let tell_done = seen.iter().position(|(n, d)| n == "agent_completed" && d["agent"] == "tell").unwrap();
    assert!(first_token < tell_done, "tokens before the step's completion: {names:?}");
    assert_eq!(names.last(), Some(&"completed"));
    assert_eq!(seen.last().unwrap().1["output"], "Once upon a time.");
    assert!(names.contains(&"resumed") && names.contains(&"agent_started"), "{names:?}");
    let token = &seen[first_token].1;
    assert_eq!((token["agent"].as_str(), token["path"].as_str()), (Some("tell"), Some("root/1")));

    // Late: the journaled sequence, then the end.
    let late = http.get(format!("{url}/api/v1/runs/t/events")).send().await.unwrap().text().await.unwrap();
    let late = events(&late);
    let journaled: Vec<(String, Option<&str>, Option<u64>)> =
        late.iter().map(|(n, d)| (n.clone(), d["agent"].as_str(), d["seq"].as_u64())).collect();
    assert_eq!(
        journaled,
        [
            ("agent_completed".to_string(), Some("gate"), Some(1)),
            // The model's answer, journaled with the step (SPEC.md §4).
            ("model_turn".to_string(), Some("tell"), Some(2)),
            ("agent_completed".to_string(), Some("tell"), Some(2)),
            ("agent_completed".to_string(), Some("main"), Some(3)),
            ("completed".to_string(), Some("tale"), Some(3)),
        ]
    );
}
