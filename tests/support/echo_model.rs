//! The model of the server tests (tests/server_cluster.rs, server_faults.rs, server_crash.rs,
//! server_scale_out.rs): an OpenAI-compatible loopback server that answers `done(<prompt>)` after a delay and
//! records every call. Each test uses part of it.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Every model call: its prompt (the last message) and when it arrived.
pub type Calls = Arc<Mutex<Vec<(String, Instant)>>>;

/// An OpenAI-compatible model that answers `done(<prompt>)` after a delay and records its calls.
pub struct Echo(pub Calls, pub Duration);

impl Respond for Echo {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let at = Instant::now();
        let prompt = prompt_of(request);
        self.0.lock().unwrap().push((prompt.clone(), at));
        done(&prompt, self.1)
    }
}

/// The prompt of a chat-completion request: its last message's text.
pub fn prompt_of(request: &Request) -> String {
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    body["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string()
}

/// The chat completion `done(<prompt>)`, sent after `delay`.
pub fn done(prompt: &str, delay: Duration) -> ResponseTemplate {
    let completion = json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("done({prompt})")},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    });
    ResponseTemplate::new(200).set_delay(delay).set_body_json(completion)
}

/// A model server answering after `delay`, and its call log.
pub async fn model(delay: Duration) -> (MockServer, Calls) {
    let server = MockServer::start().await;
    let calls: Calls = Arc::default();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Echo(calls.clone(), delay))
        .mount(&server)
        .await;
    (server, calls)
}

/// The `models:` section of a spec whose `default` model is `model`.
pub fn models(model: &MockServer) -> String {
    format!("models:\n  default: {{ provider: openai, base_url: \"{}/v1\", model: gpt-test }}\n", model.uri())
}

/// A model server whose every answer is `text` and reports 200 input and 100 output tokens (the budget tests).
pub async fn metered(text: &str) -> MockServer {
    let server = MockServer::start().await;
    let completion = json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 200, "completion_tokens": 100, "total_tokens": 300}
    });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion))
        .mount(&server)
        .await;
    server
}
