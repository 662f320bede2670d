//! The `openai` provider against a real HTTP server on loopback speaking the OpenAI protocol (wiremock):
//! the exact request JSON, SSE streaming, retries, 4xx errors, timeouts and malformed answers.

use std::time::{Duration, Instant};

use agentic::agents::model::{
    ChatMessage, ChatModelRef, ChatRequest, FinishReason, ModelError, OpenAiModel, ResponseFormat, StreamEvent,
    ToolCall, ToolChoice, ToolSpec,
};
use agentic::engine::TokenUsage;
use futures::StreamExt;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

// openai, sse, bodies: the model over a loopback server, a streamed answer, the requests it received.
use crate::common;
use common::{bodies, openai};

fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    })
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(text)])
}

#[tokio::test]
async fn sends_the_exact_request_json_and_reads_the_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("{\"value\": 0.85}")))
        .mount(&server)
        .await;
    let m = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1/", server.uri()))
        .api_key("sk-test")
        .max_tokens(64)
        .build()
        .expect("model");
    let weather = ToolSpec::new(
        "weather",
        "Current weather in a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    );
    let request = ChatRequest::new(vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("Weather in Paris?"),
        ChatMessage::assistant_tool_calls(vec![ToolCall::new("call_1", "weather", json!({"city": "Paris"}))]),
        ChatMessage::tool_result("call_1", "sunny"),
        ChatMessage::user("Score it."),
    ])
    .temperature(0.25)
    .stop(["END"])
    .tools(vec![weather])
    .tool_choice(ToolChoice::Tool("weather".into()))
    .response_format(ResponseFormat::JsonSchema {
        name: "answer".into(),
        schema: json!({"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]}),
        strict: true,
    });
    let answer = m.chat_ref().chat(request).await.expect("answer");
    assert_eq!(answer.text(), "{\"value\": 0.85}");
    assert_eq!(answer.usage, TokenUsage { input: 12, output: 3 });
    assert_eq!(answer.finish_reason, FinishReason::Stop);

    let received = server.received_requests().await.expect("recording");
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].headers.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer sk-test"));
    let body: Value = serde_json::from_slice(&received[0].body).expect("JSON");
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "user", "content": "Score it."}
            ],
            "temperature": 0.25,
            "max_tokens": 64,
            "stop": ["END"],
            "tools": [{"type": "function", "function": {
                "name": "weather", "description": "Current weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
            }}],
            "tool_choice": {"type": "function", "function": {"name": "weather"}},
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "answer",
                "schema": {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
                "strict": true
            }},
            "stream": false
        })
    );
}

trait ChatRefExt {
    fn chat_ref(self) -> ChatModelRef;
}

impl ChatRefExt for OpenAiModel {
    fn chat_ref(self) -> ChatModelRef {
        ChatModelRef::new(self)
    }
}

#[tokio::test]
async fn reads_tool_calls() {
    let server = MockServer::start().await;
    let body = json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}},
            {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": ""}}
        ]}, "finish_reason": "tool_calls"}]
    });
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_json(body)).mount(&server).await;
    let answer = openai(&server).chat_ref().chat(ask("add")).await.expect("answer");
    assert_eq!(
        answer.tool_calls(),
        &[ToolCall::new("call_a", "add", json!({"a": 1, "b": 2})), ToolCall::new("call_b", "now", json!({}))]
    );
    assert_eq!(answer.finish_reason, FinishReason::ToolCalls);
    assert_eq!(answer.usage, TokenUsage::default(), "no usage reported: zero");
}

#[tokio::test]
async fn streams_tokens_and_assembles_the_answer() {
    let server = MockServer::start().await;
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Once "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"upon "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"a time."},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#,
    ];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(common::sse(&chunks))
        .mount(&server)
        .await;
    let mut stream = openai(&server).chat_ref().chat_stream(ask("Tell a story")).await.expect("stream");
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e.expect("event"));
    }
    let tokens: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Token(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tokens, ["Once ", "upon ", "a time."]);
    let Some(StreamEvent::Done(done)) = events.last() else { panic!("last event is not Done: {events:?}") };
    assert_eq!(done.text(), "Once upon a time.");
    assert_eq!(done.usage, TokenUsage { input: 9, output: 4 });
    assert_eq!(done.finish_reason, FinishReason::Stop);
    let body = &bodies(&server).await[0];
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streams_tool_call_deltas() {
    let server = MockServer::start().await;
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"add","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}"#,
    ];
    Mock::given(method("POST")).respond_with(common::sse(&chunks)).mount(&server).await;
    let stream = openai(&server).chat_ref().chat_stream(ask("add")).await.expect("stream");
    let events: Vec<StreamEvent> = stream.map(|e| e.expect("event")).collect().await;
    assert_eq!(
        events[0],
        StreamEvent::ToolCallDelta {
            index: 0,
            id: Some("call_1".into()),
            name: Some("add".into()),
            arguments: String::new()
        }
    );
    let Some(StreamEvent::Done(done)) = events.last() else { panic!("no Done") };
    assert_eq!(done.tool_calls(), &[ToolCall::new("call_1", "add", json!({"a": 1}))]);
    assert_eq!(done.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_500_is_retried_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&server)
        .await;
    let answer = openai(&server).chat_ref().chat(ask("hi")).await.expect("answer after a retry");
    assert_eq!(answer.text(), "ok");
    assert_eq!(bodies(&server).await.len(), 2, "one failure, one retry");
}

#[tokio::test]
async fn a_persistent_503_fails_after_the_retries_with_the_status() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&server)
        .await;
    let m = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(2)
        .backoff(Duration::from_millis(5))
        .build()
        .expect("model");
    let e = ChatModelRef::new(m).chat(ask("hi")).await.expect_err("fails");
    assert_eq!(
        e.to_string(),
        format!("model `gpt-test` at {}/v1: HTTP 503 after 3 attempt(s): overloaded", server.uri())
    );
    assert_eq!(bodies(&server).await.len(), 3);
}

#[tokio::test]
async fn retry_after_is_honoured_but_bounded() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3600")
                .set_body_json(json!({"error": {"message": "slow down", "type": "rate_limit_error"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&server)
        .await;
    let m = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_backoff(Duration::from_millis(150))
        .build()
        .expect("model");
    let start = Instant::now();
    let answer = ChatModelRef::new(m).chat(ask("hi")).await.expect("answer");
    let waited = start.elapsed();
    assert_eq!(answer.text(), "ok");
    assert!(waited >= Duration::from_millis(150), "waited {waited:?}: Retry-After honoured up to the cap");
    assert!(waited < Duration::from_secs(5), "waited {waited:?}: Retry-After capped");
}

#[tokio::test]
async fn a_401_fails_at_once_naming_the_server_and_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .mount(&server)
        .await;
    let e = openai(&server).chat_ref().chat(ask("hi")).await.expect_err("unauthorized");
    assert!(matches!(e, ModelError::Unauthorized { status: 401, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "model `gpt-test` at {}/v1: authentication failed (HTTP 401): Incorrect API key provided (check the API \
             key in the key given to the model's builder)",
            server.uri()
        )
    );
    assert!(!e.to_string().contains("sk-test"), "the key is never shown");
    assert_eq!(bodies(&server).await.len(), 1, "no retry on 401");
}

#[tokio::test]
async fn an_unknown_model_is_a_404_and_other_4xx_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404).set_body_string("404 page not found"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "bad stop sequence"}})))
        .mount(&server)
        .await;
    let m = ChatModelRef::new(openai(&server));
    let e = m.chat(ask("hi")).await.expect_err("not found");
    assert_eq!(
        e.to_string(),
        format!("model `gpt-test` at {}/v1: not found (HTTP 404): 404 page not found", server.uri())
    );
    let e = m.chat(ask("hi")).await.expect_err("bad request");
    assert_eq!(
        e.to_string(),
        format!("model `gpt-test` at {}/v1: HTTP 400 after 1 attempt(s): bad stop sequence", server.uri())
    );
    assert_eq!(bodies(&server).await.len(), 2, "neither was retried");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("late")).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let m = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .timeout(Duration::from_millis(200))
        .build()
        .expect("model");
    let start = Instant::now();
    let e = ChatModelRef::new(m).chat(ask("hi")).await.expect_err("timeout");
    assert!(start.elapsed() < Duration::from_secs(2), "gave up after the timeout");
    assert_eq!(e.to_string(), format!("model `gpt-test` at {}/v1: no answer within 200 ms", server.uri()));
}

#[tokio::test]
async fn malformed_json_is_a_clear_error_quoting_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{\"choices\": [oops"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"result": "not a completion"})))
        .mount(&server)
        .await;
    let m = ChatModelRef::new(openai(&server));
    let e = m.chat(ask("hi")).await.expect_err("malformed");
    let text = e.to_string();
    assert!(text.starts_with(&format!("model `gpt-test` at {}/v1: invalid response: ", server.uri())), "{text}");
    assert!(text.ends_with("; the body was: {\"choices\": [oops"), "{text}");
    let e = m.chat(ask("hi")).await.expect_err("no choices");
    assert_eq!(
        e.to_string(),
        format!(
            "model `gpt-test` at {}/v1: invalid response: the answer has no choices; the body was: \
             {{\"result\":\"not a completion\"}}",
            server.uri()
        )
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let m = OpenAiModel::builder("gpt-test")
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(1)
        .backoff(Duration::from_millis(5))
        .build()
        .expect("model");
    let e = ChatModelRef::new(m).chat(ask("hi")).await.expect_err("refused");
    assert!(
        e.to_string().starts_with(&format!("model `gpt-test` at http://127.0.0.1:{port}/v1: cannot connect: ")),
        "{e}"
    );
}

fn top(pairs: &[(&str, f64)]) -> Value {
    Value::Array(pairs.iter().map(|(t, p)| json!({"token": t, "logprob": p.ln(), "bytes": []})).collect())
}

#[tokio::test]
async fn asks_for_and_reads_token_logprobs() {
    let server = MockServer::start().await;
    let body = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"agent\":\"medical\"}"},
            "finish_reason": "stop",
            "logprobs": {"content": [
                {"token": "{\"agent\":\"", "logprob": -0.01, "top_logprobs": []},
                {"token": "med", "logprob": 0.75f64.ln(), "top_logprobs": top(&[("med", 0.75), ("legal", 0.2), ("tech", 0.05)])},
                {"token": "ical", "logprob": -0.001},
                {"token": "\"}", "logprob": -0.001}
            ]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 4}
    });
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_json(body)).mount(&server).await;
    let chat = openai(&server).chat_ref();
    let answer = chat.chat(ask("which?").logprobs(3)).await.expect("answer");
    let logprobs = answer.logprobs.as_ref().expect("logprobs");
    assert_eq!(logprobs.iter().map(|t| t.token.as_str()).collect::<String>(), "{\"agent\":\"medical\"}");
    assert_eq!(logprobs[1].top.iter().map(|t| t.token.as_str()).collect::<Vec<_>>(), ["med", "legal", "tech"]);
    assert_eq!(logprobs[2].top, []);
    let sent = &bodies(&server).await[0];
    assert_eq!((&sent["logprobs"], &sent["top_logprobs"]), (&json!(true), &json!(3)));

    // Not asked: no fields sent, none read.
    let plain = bodies(&server).await.len();
    let _ = chat.chat(ask("again")).await.expect("answer");
    let sent = &bodies(&server).await[plain];
    assert_eq!((sent.get("logprobs"), sent.get("top_logprobs")), (None, None));

    // A decision over the server: JSON schema constrained, probabilities from the alternatives.
    use agentic::agents::decision::{DecisionModelRef, DecisionRequest, Question};
    let decide = DecisionModelRef::from(chat.clone());
    let request = DecisionRequest::new("I broke my leg").question(
        "agent",
        Question::choice("Which agent?", [("legal", "Law"), ("medical", "Health"), ("technical", "Computers")]),
    );
    let response = decide.decide(request).await.expect("decision");
    assert_eq!(response.choice("agent").expect("choice"), "medical");
    let ps: Vec<(String, f64)> = response
        .choice_probabilities("agent")
        .expect("probabilities")
        .iter()
        .map(|(k, p)| (k.clone(), (p * 1e6).round() / 1e6))
        .collect();
    assert_eq!(ps, [("legal".to_string(), 0.2), ("medical".to_string(), 0.75), ("technical".to_string(), 0.05)]);
    assert_eq!(response.usage, TokenUsage { input: 40, output: 4 });
    let sent = bodies(&server).await.pop().expect("decision request");
    assert_eq!(
        sent["response_format"]["json_schema"]["schema"]["properties"]["agent"]["enum"],
        json!(["legal", "medical", "technical"])
    );
    assert_eq!(
        (&sent["logprobs"], &sent["top_logprobs"], &sent["temperature"]),
        (&json!(true), &json!(5), &json!(0.0))
    );
}

#[tokio::test]
async fn streamed_logprobs_are_collected() {
    let server = MockServer::start().await;
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"content":"ye"},"logprobs":{"content":[{"token":"ye","logprob":-0.5,"top_logprobs":[{"token":"ye","logprob":-0.5},{"token":"no","logprob":-1.0}]}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"s"},"logprobs":{"content":[{"token":"s","logprob":-0.1}]},"finish_reason":"stop"}]}"#,
    ];
    Mock::given(method("POST")).respond_with(common::sse(&chunks)).mount(&server).await;
    let mut stream = openai(&server).chat_ref().chat_stream(ask("ok?").logprobs(2)).await.expect("stream");
    let mut last = None;
    while let Some(e) = stream.next().await {
        last = Some(e.expect("event"));
    }
    let Some(StreamEvent::Done(done)) = last else { panic!("no Done event") };
    let logprobs = done.logprobs.expect("logprobs");
    assert_eq!(logprobs.iter().map(|t| (t.token.as_str(), t.logprob)).collect::<Vec<_>>(), [("ye", -0.5), ("s", -0.1)]);
    assert_eq!(logprobs[0].top.len(), 2);
}
