//! Streamed results (`InvokeRequest::stream`) against a loopback OpenAI-compatible server: a sequence whose
//! last agent streams hands its tokens to the caller in order, then the run's end; the final state holds the
//! whole answer; a suspended run and a failed run end the stream with the reason; a retried final agent says
//! so; a system without a fixed final agent yields only its end. With a model held mid-answer: a token reaches
//! the caller before the model finishes, and dropping the stream stops the run.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use agentic::agents::{Compute, Human, LlmAgent};
use agentic::engine::{AgentError, PendingResponse, ResultStream, RetryPolicy, RunResult, StreamItem, StreamSource};
use agentic::planners::{Loop, Sequence};
use agentic::prelude::{CompositeBuilderExt, SpecBuilder};
use common::{bodies, openai, sse};
use futures::StreamExt;
use serde_json::json;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer};

/// A streamed answer of `pieces`, one content delta each, then the usage.
fn answer(pieces: &[&str]) -> wiremock::ResponseTemplate {
    let mut chunks: Vec<String> =
        pieces.iter().map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}}]}).to_string()).collect();
    chunks.push(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}"#.to_string());
    sse(&chunks.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Answers requests whose body contains `marker` with `response`.
async fn mount(server: &MockServer, marker: &str, response: wiremock::ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains(marker))
        .respond_with(response)
        .mount(server)
        .await;
}

/// A streaming LLM agent on `server`.
fn llm(server: &MockServer, name: &str, user: &str, key: &str) -> agentic::engine::AgentRef {
    LlmAgent::builder(openai(server)).name(name).user(user).streaming(true).output_key(key).build().unwrap()
}

/// The stream's items up to its end, as text (`token:…`, `retry:N`), and its terminal item.
async fn drain(mut stream: ResultStream) -> (Vec<String>, Result<agentic::engine::RunOutcome, AgentError>) {
    let mut items = Vec::new();
    let end = loop {
        match stream.next().await.expect("the stream ends with a terminal item") {
            Ok(StreamItem::Token(text)) => items.push(format!("token:{text}")),
            Ok(StreamItem::Retry { attempt }) => items.push(format!("retry:{attempt}")),
            Ok(StreamItem::End(outcome)) => break Ok(outcome),
            Ok(other) => panic!("unexpected item {other:?}"),
            Err(e) => break Err(e),
        }
    };
    assert!(stream.next().await.is_none(), "nothing after the terminal item");
    (items, end)
}

#[tokio::test]
async fn a_sequence_streams_the_tokens_of_its_last_agent_in_order() {
    let server = MockServer::start().await;
    mount(&server, "Write about", answer(&["A ", "draft."])).await;
    mount(&server, "Edit:", answer(&["Once ", "upon ", "a time."])).await;
    let writer = llm(&server, "writer", "Write about {{ topic }}.", "draft");
    let editor = llm(&server, "editor", "Edit: {{ draft }}", "story");
    let system = Sequence::builder().name("story").sub_agents([writer, editor]).output_key("story").build().unwrap();
    assert_eq!(system.stream_source(), Some(StreamSource { path: "root/1".into(), agent: "editor".into() }));

    let stream = system.invoke().input("topic", "dragons").memory_id("s-1").stream();
    assert_eq!(stream.source(), Some(&StreamSource { path: "root/1".into(), agent: "editor".into() }));
    let (items, end) = drain(stream).await;
    // Only the last agent's tokens: the writer streamed too, internally.
    assert_eq!(items, ["token:Once ", "token:upon ", "token:a time."]);
    let outcome = end.unwrap();
    assert_eq!(outcome.run_id, "s-1");
    assert_eq!(outcome.result, RunResult::Completed(json!("Once upon a time.")));
    assert_eq!(outcome.state().get("story"), Some(&json!("Once upon a time.")));
    assert_eq!(outcome.state().get("draft"), Some(&json!("A draft.")));
    let user: Vec<String> =
        bodies(&server).await.iter().map(|b| b["messages"][0]["content"].as_str().unwrap().to_string()).collect();
    assert_eq!(user, ["Write about dragons.", "Edit: A draft."]);
}

#[tokio::test]
async fn a_suspended_run_ends_the_stream_with_its_pending_responses_and_resumes_streaming() {
    let server = MockServer::start().await;
    mount(&server, "Tell a story", answer(&["Once ", "upon ", "a time."])).await;
    let gate = Human::builder("gate", "Go?").unwrap().response_id("go").output_key("go").build();
    let tell = llm(&server, "tell", "Tell a story ({{ go }})", "story");
    let system = Sequence::builder().name("tale").sub_agents([gate, tell]).output_key("story").build().unwrap();

    let (items, end) = drain(system.invoke().memory_id("s-2").stream()).await;
    assert_eq!(items, Vec::<String>::new());
    let outcome = end.unwrap();
    assert_eq!(outcome.result, RunResult::Suspended { pending: vec![PendingResponse::new("go", "Go?", "gate")] });
    assert!(bodies(&server).await.is_empty(), "the model is not asked before the answer");

    // Answered and resumed as a stream: the rest of the run streams.
    let (items, end) = drain(outcome.resume().answer("go", "yes").stream()).await;
    assert_eq!(items, ["token:Once ", "token:upon ", "token:a time."]);
    let done = end.unwrap();
    assert_eq!(done.output(), Some(&json!("Once upon a time.")));
    assert_eq!(done.state().get("story"), Some(&json!("Once upon a time.")));
    assert_eq!(done.state().get("go"), Some(&json!("yes")));
}

#[tokio::test]
async fn a_failed_run_ends_the_stream_with_the_error_naming_the_agent_and_its_path() {
    let server = MockServer::start().await;
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"content":"Once "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"upon "}}]}"#,
        r#"{"choices":5}"#,
    ];
    mount(&server, "Tell a story", sse(&chunks)).await;
    let topic = Compute::template("topic", "about {{ subject }}").unwrap().output_key("topic").build();
    let tell = llm(&server, "tell", "Tell a story {{ topic }}", "story");
    let system = Sequence::builder().name("tale").sub_agents([topic, tell]).output_key("story").build().unwrap();

    let (items, end) = drain(system.invoke().input("subject", "owls").stream()).await;
    assert_eq!(items, ["token:Once ", "token:upon "]);
    let error = end.unwrap_err();
    let uri = server.uri();
    assert_eq!(
        error.to_string(),
        format!(
            "agent `tell` (root/1) failed: model `gpt-test` at {uri}/v1: stream failed: unexpected event: \
             {{\"choices\":5}}"
        )
    );
    assert!(matches!(&error, AgentError::Failed { agent, path, .. } if agent == "tell" && path == "root/1"));
}

#[tokio::test]
async fn a_retried_final_agent_says_so_before_its_new_tokens() {
    let server = MockServer::start().await;
    let broken = [r#"{"choices":[{"index":0,"delta":{"content":"Onc"}}]}"#, r#"{"choices":5}"#];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(&broken))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, "Tell a story", answer(&["Once ", "upon ", "a time."])).await;
    let tell = llm(&server, "tell", "Tell a story", "story");
    let system = Sequence::builder()
        .name("tale")
        .sub_agents([tell])
        .output_key("story")
        .error_handler(RetryPolicy::new(1, Duration::ZERO))
        .build()
        .unwrap();
    let (items, end) = drain(system.invoke().stream()).await;
    assert_eq!(items, ["token:Onc", "retry:2", "token:Once ", "token:upon ", "token:a time."]);
    assert_eq!(end.unwrap().state().get("story"), Some(&json!("Once upon a time.")));
}

#[tokio::test]
async fn a_system_without_a_fixed_final_agent_yields_only_its_end() {
    let server = MockServer::start().await;
    mount(&server, "Tell a story", answer(&["Once ", "upon ", "a time."])).await;
    let tell = llm(&server, "tell", "Tell a story", "story");
    let looped = Loop::builder().name("again").sub_agents([tell.clone()]).max_iterations(2).output_key("story");
    let looped = looped.build().unwrap();
    assert_eq!(looped.stream_source(), None);
    let stream = looped.invoke().stream();
    assert_eq!(stream.source(), None);
    let (items, end) = drain(stream).await;
    assert_eq!(items, Vec::<String>::new());
    assert_eq!(end.unwrap().output(), Some(&json!("Once upon a time.")));

    // A sequence ending with an agent that does not stream: no tokens either.
    let plain = Compute::expression("shout", "story | upper").unwrap().output_key("loud").build();
    let system = Sequence::builder().name("tale").sub_agents([tell, plain]).output_key("loud").build().unwrap();
    assert_eq!(system.stream_source(), None);
    let (items, end) = drain(system.invoke().stream()).await;
    assert_eq!(items, Vec::<String>::new());
    assert_eq!(end.unwrap().output(), Some(&json!("ONCE UPON A TIME.")));

    // A streaming leaf as the root streams itself.
    let alone = llm(&server, "tell", "Tell a story", "story");
    let stream = alone.invoke().stream();
    assert_eq!(stream.source(), Some(&StreamSource { path: "root".into(), agent: "tell".into() }));
    let (items, end) = drain(stream).await;
    assert_eq!(items, ["token:Once ", "token:upon ", "token:a time."]);
    assert_eq!(end.unwrap().output(), Some(&json!("Once upon a time.")));
}

#[tokio::test]
async fn outcome_skips_the_tokens() {
    let server = MockServer::start().await;
    mount(&server, "Tell a story", answer(&["Once ", "upon ", "a time."])).await;
    let tell = llm(&server, "tell", "Tell a story", "story");
    let outcome = tell.invoke().stream().outcome().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("Once upon a time.")));
}

/// A model that streams `Once `, then waits until `release` is notified before it streams the rest; `dropped`
/// turns true when its answer is dropped unfinished (the run was stopped).
struct Held {
    info: agentic::agents::model::ModelInfo,
    release: std::sync::Arc<tokio::sync::Notify>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Sets its flag when dropped, unless disarmed.
struct DropFlag(Option<std::sync::Arc<std::sync::atomic::AtomicBool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

fn held() -> (Held, std::sync::Arc<tokio::sync::Notify>, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let info = agentic::agents::model::ModelInfo {
        provider: "held".into(),
        server: "held".into(),
        model: "held".into(),
        json_schema: false,
        tools: false,
        prices: None,
        limits: Default::default(),
        name: None,
    };
    (Held { info, release: release.clone(), dropped: dropped.clone() }, release, dropped)
}

impl agentic::agents::model::ChatModel for Held {
    fn info(&self) -> &agentic::agents::model::ModelInfo {
        &self.info
    }

    async fn chat(
        &self,
        _request: agentic::agents::model::ChatRequest,
    ) -> Result<agentic::agents::model::ChatResponse, agentic::agents::model::ModelError> {
        let usage = agentic::engine::TokenUsage { input: 1, output: 2 };
        Ok(agentic::agents::model::ChatResponse::text_reply("Once upon a time.", usage))
    }

    async fn chat_stream(
        &self,
        request: agentic::agents::model::ChatRequest,
    ) -> Result<agentic::agents::model::ChatStream, agentic::agents::model::ModelError> {
        use agentic::agents::model::StreamEvent;
        let done = self.chat(request).await?;
        let release = self.release.clone();
        let dropped = self.dropped.clone();
        let first = futures::stream::iter([Ok(StreamEvent::Token("Once ".into()))]);
        let rest = futures::stream::once(async move {
            let mut flag = DropFlag(Some(dropped));
            release.notified().await;
            flag.0 = None;
            futures::stream::iter([Ok(StreamEvent::Token("upon a time.".into())), Ok(StreamEvent::Done(done))])
        })
        .flatten();
        Ok(Box::pin(first.chain(rest)))
    }
}

#[tokio::test]
async fn a_token_reaches_the_caller_while_the_model_is_still_answering() {
    let (model, release, _) = held();
    let tell = LlmAgent::builder(model).name("tell").user("Tell a story").streaming(true).output_key("story").build();
    let system = Sequence::builder().sub_agents([tell.unwrap()]).output_key("story").build().unwrap();
    let mut stream = system.invoke().stream();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("the first token comes");
    assert!(matches!(first, Some(Ok(StreamItem::Token(ref t))) if t == "Once "), "{first:?}");
    release.notify_one();
    let (items, end) = drain(stream).await;
    assert_eq!(items, ["token:upon a time."]);
    assert_eq!(end.unwrap().state().get("story"), Some(&json!("Once upon a time.")));
}

#[tokio::test]
async fn dropping_the_stream_stops_the_run() {
    let (model, _release, dropped) = held();
    let tell = LlmAgent::builder(model).name("tell").user("Tell a story").streaming(true).output_key("story").build();
    let system = Sequence::builder().sub_agents([tell.unwrap()]).output_key("story").build().unwrap();
    let mut stream = system.invoke().stream();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("the first token comes");
    assert!(matches!(first, Some(Ok(StreamItem::Token(ref t))) if t == "Once "), "{first:?}");
    assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
    drop(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !dropped.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(std::time::Instant::now() < deadline, "the model's answer is still awaited 10 s after the drop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
