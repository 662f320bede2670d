//! Error handlers that repair and retry: the spec's `error_handler.set` (state keys written from expressions
//! that see the failure as `error`, then the failed agent is retried) and the Rust `RetryPolicy::repair` it
//! builds. Exact results, histories and located errors.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic_agents::FnAgent;
use agentic_engine::{AgentRef, CheckpointStore, RetryPolicy, RunOutcome, SpecBuilder};
use agentic_planners::{CompositeBuilderExt, Sequence};
use agentic_spec::Spec;
use agentic_store::MemoryStore;
use serde_json::{Value, json};

fn build(yaml: &str) -> AgentRef {
    let spec = Spec::parse(yaml, "spec.yaml").unwrap_or_else(|e| panic!("spec should parse:\n{e}"));
    spec.build().unwrap_or_else(|e| panic!("spec should build:\n{e}")).root
}

/// The errors of a spec that must not parse, as displayed lines.
fn errors(yaml: &str) -> Vec<String> {
    match Spec::parse(yaml, "spec.yaml") {
        Ok(_) => panic!("the spec should be invalid"),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

/// `(agent, attempt, inputs)` of every invocation in the run's history, in order.
async fn history(outcome: &RunOutcome) -> Vec<(String, u32, Value)> {
    let records = outcome.history().await.unwrap();
    records.into_iter().map(|r| (r.agent, r.attempt, Value::Object(r.inputs))).collect()
}

/// A sequence whose second agent needs `x`, which nothing writes; the handler's `set` line is `handler`.
fn repaired(handler: &str) -> String {
    format!(
        r#"
version: 1
root: main
agents:
  main:
    kind: sequence
    agents: [first, double]
    error_handler: {handler}
    output_key: y
  first: {{ kind: compute, value: "'ok'", inputs: [], output_key: a }}
  double: {{ kind: compute, value: "x * 2", output_key: y }}
"#
    )
}

#[tokio::test]
async fn a_missing_argument_is_written_by_set_then_the_agent_is_retried() {
    let outcome = build(&repaired(r#"{ set: { x: "5" }, retry: 1, backoff_ms: 0 }"#)).invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!(10)));
    assert_eq!(outcome.state().get("x"), Some(&json!(5)));
    // Attempt 1 of `double` failed before it ran (its input was missing): the history holds the completed
    // invocations, and `double` completed at attempt 2 on the repaired state.
    assert_eq!(
        history(&outcome).await,
        [
            ("first".to_string(), 1, json!({})),
            ("double".to_string(), 2, json!({"x": 5})),
            ("main".to_string(), 1, json!({})),
        ]
    );
}

#[tokio::test]
async fn set_expressions_see_the_error_and_the_state() {
    let handler = r#"
      set:
        note: "error.kind ~ ':' ~ error.agent"
        where: "error.path"
        why: "error.message"
        x: "a | length"
      retry: 1
      backoff_ms: 0"#;
    let outcome = build(&repaired(handler)).invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!(4)), "x = length of 'ok' = 2, doubled");
    let state = outcome.state();
    assert_eq!(state.get("note"), Some(&json!("missing_argument:double")));
    assert_eq!(state.get("where"), Some(&json!("root/1")));
    assert_eq!(state.get("why"), Some(&json!("agent `double` (root/1): missing argument `x`")));
    assert_eq!(
        history(&outcome).await,
        [
            ("first".to_string(), 1, json!({})),
            ("double".to_string(), 2, json!({"x": 2})),
            ("main".to_string(), 1, json!({})),
        ]
    );
}

#[tokio::test]
async fn a_repair_that_cannot_be_evaluated_fails_with_the_original_error() {
    let root = build(&repaired(r#"{ set: { x: "a.length()" }, retry: 2, backoff_ms: 0, fallback: "0" }"#));
    let err = root.invoke().await.expect_err("the repair fails, so the run fails");
    assert_eq!(err.to_string(), "agent `double` (root/1): missing argument `x`");
}

#[tokio::test]
async fn every_retry_is_repaired_until_the_retries_run_out_then_the_fallback_applies() {
    // `x` evaluates to null (an undefined variable), which removes the key: the retry fails again.
    let root = build(&repaired(r#"{ set: { x: "nothing" }, retry: 2, backoff_ms: 0, fallback: "'gave up'" }"#));
    let outcome = root.invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("gave up")));
    assert_eq!(outcome.state().get("x"), None);
}

#[tokio::test]
async fn the_repair_is_journaled() {
    let store = MemoryStore::new();
    let root = build(&repaired(r#"{ set: { x: "5" }, retry: 1, backoff_ms: 0 }"#));
    let outcome = root.invoke().memory_id("repair-1").store(store.clone()).await.unwrap();
    assert_eq!(outcome.output(), Some(&json!(10)));
    let image = store.load("repair-1").await.unwrap();
    assert_eq!(image.state.get("x"), Some(&json!(5)), "folding the journal restores the repaired key");
}

#[test]
fn an_invalid_set_expression_is_located_at_its_key() {
    let yaml = r#"version: 1
root: main
agents:
  main:
    kind: sequence
    agents: [a]
    error_handler:
      set: { x: "1 +", y: 5 }
      retry: 1
  a: { kind: compute, value: "x", output_key: y }
"#;
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:8:17: agent `main`: field `error_handler.set.x`: invalid expression: syntax error: \
             unexpected end of input, expected expression",
            "spec.yaml:8:27: agent `main`: field `error_handler.set.y`: expected an expression (a string, e.g. \
             \"5\" or \"'text'\"), found an integer",
        ]
    );
}

#[test]
fn set_without_retries_is_refused() {
    let yaml = |handler: &str| {
        format!("version: 1\nroot: s\nagents:\n  s: {{ kind: sequence, agents: [], error_handler: {handler} }}\n")
    };
    assert_eq!(
        errors(&yaml(r#"{ set: { x: "5" } }"#)),
        ["spec.yaml:4:58: agent `s`: field `error_handler.set`: `set` needs `retry` ≥ 1 (its writes are made \
             before a retry), but `retry` is not set (default 0)"]
    );
    assert_eq!(
        errors(&yaml(r#"{ set: { x: "5" }, retry: 0, backoff_ms: 10 }"#)),
        ["spec.yaml:4:58: agent `s`: field `error_handler.set`: `set` needs `retry` ≥ 1 (its writes are made \
             before a retry), but `retry` is 0"]
    );
}

#[test]
fn unknown_fields_of_the_error_handler_are_still_refused() {
    let yaml = "version: 1\nroot: s\nagents:\n  s: { kind: sequence, agents: [], error_handler: { set: { x: \"5\" }, \
                retry: 1, sett: {} } }\n";
    assert_eq!(
        errors(yaml),
        ["spec.yaml:4:80: agent `s`: field `error_handler`: unknown field `sett` (did you mean `set`?), expected \
             one of `when`, `set`, `retry`, `backoff_ms`, `fallback`"]
    );
    let yaml = "version: 1\nroot: s\nagents:\n  s: { kind: sequence, agents: [], error_handler: { set: [x] } }\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:4:58: agent `s`: field `error_handler.set`: expected a mapping, found a list",
            "spec.yaml:4:58: agent `s`: field `error_handler.set`: `set` needs `retry` ≥ 1 (its writes are made \
             before a retry), but `retry` is not set (default 0)",
        ]
    );
}

#[tokio::test]
async fn retry_policy_repair_writes_the_missing_input_then_retries() {
    let double = FnAgent::builder("double", |ctx| {
        Box::pin(async move {
            let x: i64 = ctx.input_as("x")?;
            Ok(json!(x * 2))
        })
    })
    .input("x")
    .output_key("y")
    .build();
    let system = Sequence::builder()
        .name("main")
        .sub_agents([double])
        .output_key("y")
        .error_handler(RetryPolicy::new(1, Duration::ZERO).repair(|ctx| {
            assert_eq!(
                (ctx.error.kind(), ctx.agent, ctx.path, ctx.attempt),
                ("missing_argument", "double", "root/0", 1)
            );
            Ok(vec![("x".into(), json!(7))])
        }))
        .build()
        .unwrap();
    let outcome = system.invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!(14)));
    assert_eq!(
        history(&outcome).await,
        [("double".to_string(), 2, json!({"x": 7})), ("main".to_string(), 1, json!({}))]
    );
}

/// A sequence of one LLM agent on a loopback server answering `status` to every call, under `handler`.
fn on_a_failing_model(uri: &str, handler: &str) -> String {
    format!(
        r#"
version: 1
root: main
models:
  default: {{ provider: openai, base_url: "{uri}/v1", model: gpt-test }}
agents:
  main:
    kind: sequence
    agents: [ask]
    error_handler: {handler}
    output_key: reply
  ask: {{ kind: llm, user: Hello, output_key: reply }}
"#
    )
}

#[tokio::test]
async fn the_handler_sees_the_cause_and_its_when_condition_matches_a_kind() {
    use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "bad key"}})))
        .mount(&server)
        .await;
    // The fallback reads the cause: a permanent failure is not retried even with `retry: 3`.
    let fallback = r#"{ retry: 3, backoff_ms: 0, fallback: "'no reply'" }"#;
    let outcome = build(&on_a_failing_model(&server.uri(), fallback)).invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("no reply")));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);

    // `when` handles only what it matches: a 401 under `when: error.status == 429` fails the run at once.
    let only_busy = r#"{ when: "error.cause == 'model' and error.status == 429", retry: 3, fallback: "'busy'" }"#;
    let err = build(&on_a_failing_model(&server.uri(), only_busy)).invoke().await.unwrap_err();
    assert_eq!(err.kind(), "failed");
    assert_eq!(err.cause().and_then(|c| c.status()), Some(401));
    assert_eq!(server.received_requests().await.unwrap().len(), 2);

    // The condition sees where the failure came from, its status and whether trying again can help.
    let typed = r#"{ when: "error.cause == 'model' and error.status == 401 and error.transient == false and error.kind == 'failed'", retry: 1, fallback: "'check the key'" }"#;
    let outcome = build(&on_a_failing_model(&server.uri(), typed)).invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("check the key")));
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

/// Answers the first chat call `503` with `Retry-After: 2`, every later one `hello back`; records when each
/// call arrived.
struct BusyOnce(std::sync::Arc<std::sync::Mutex<Vec<std::time::Instant>>>);

impl wiremock::Respond for BusyOnce {
    fn respond(&self, _: &wiremock::Request) -> wiremock::ResponseTemplate {
        let mut calls = self.0.lock().unwrap();
        calls.push(std::time::Instant::now());
        if calls.len() == 1 {
            return wiremock::ResponseTemplate::new(503)
                .insert_header("Retry-After", "2")
                .set_body_json(json!({"error": {"message": "overloaded"}}));
        }
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello back"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        }))
    }
}

#[tokio::test]
async fn a_busy_model_s_retry_after_is_waited_before_the_handler_s_retry() {
    use wiremock::{Mock, MockServer, matchers::method};
    let server = MockServer::start().await;
    let calls = std::sync::Arc::default();
    Mock::given(method("POST")).respond_with(BusyOnce(std::sync::Arc::clone(&calls))).mount(&server).await;
    // A plain `retry: 1` (first backoff 100 ms); the provider's own retries are off, so the retry is the
    // handler's, and it waits what the 503's `Retry-After` asked (carried in the failure's transience).
    let spec = Spec::parse(&on_a_failing_model(&server.uri(), "{ retry: 1 }"), "spec.yaml").unwrap();
    let model = agentic_agents::model::OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(0)
        .build()
        .unwrap();
    let context = agentic_spec::BuildContext::new().model("default", agentic_agents::model::ChatModelRef::new(model));
    let outcome = spec.build_with(&context).unwrap().root.invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("hello back")));
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "one refused call, one retry");
    let gap = calls[1] - calls[0];
    assert!(gap >= Duration::from_secs(2), "the retry came {gap:?} after the 503 asking for 2 s");
    assert!(gap < Duration::from_secs(4), "the retry came {gap:?} after the 503 asking for 2 s");
}
