//! W3C trace context without OpenTelemetry (this binary is built without the `otel` feature): the
//! `traceparent` a run is started with is passed on unchanged to what its agents call — a Rust tool reads it in
//! its `ToolCallInfo`, MCP and A2A requests carry it — and an invalid one is ignored. (With the feature, the
//! spans' own context is sent instead: tests/otel_export.rs.)

#![allow(clippy::unwrap_used)]

use agentic::prelude::*;
use serde_json::{Value, json};

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// An LLM agent whose model calls the tool `probe` once (which answers the `traceparent` it was given), then
/// answers.
fn prober() -> AgentRef {
    let probe = Tool::with_call("probe", "Reports the trace context", |call, _: NoArgs| async move {
        Ok(call.traceparent.map_or(Value::Null, Value::String))
    });
    let call = json!({"tool_calls": [{"name": "probe", "arguments": {}}]}).to_string();
    let model = ScriptedModel::new([call, "Done.".to_string()]);
    LlmAgent::builder(model).name("prober").user("Which trace?").tools([probe]).build().unwrap()
}

/// What the tool answered in the run of `request` (its `ToolFinished` event).
async fn seen(request: agentic::engine::InvokeRequest) -> String {
    let (mut events, handle) = request.events();
    let mut result = None;
    while let Some(e) = events.recv().await {
        if let agentic::engine::RunEvent::ToolFinished { result: r, .. } = e {
            result = Some(r);
        }
    }
    assert_eq!(handle.await.unwrap().unwrap().output(), Some(&json!("Done.")));
    match result.unwrap() {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

#[tokio::test]
async fn a_runs_traceparent_is_passed_on_to_its_tools_and_an_invalid_one_is_ignored() {
    assert_eq!(seen(prober().invoke().memory_id("trace-pass").traceparent(CALLER)).await, CALLER);
    assert_eq!(seen(prober().invoke().memory_id("trace-none")).await, "null");
    assert_eq!(seen(prober().invoke().memory_id("trace-bad").traceparent("00-not-a-trace")).await, "null");
}
