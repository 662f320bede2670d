//! The OTLP export of the engine's spans (feature `otel`): a two-agent sequence run under the OTLP layer
//! sends one `invoke_agent` span per invocation to a collector on loopback, with the GenAI attribute names,
//! nested under the sequence's span. Run with `cargo test --features otel --test otel_export`.
#![cfg(feature = "otel")]

use agentic::prelude::*;
use agentic::telemetry::{OtlpConfig, otlp_layer};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The string value of attribute `key` of an OTLP JSON span.
fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"].as_array()?.iter().find(|a| a["key"] == key).map(|a| &a["value"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invocation_spans_reach_the_collector_with_genai_attributes_and_nesting() {
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .mount(&collector)
        .await;
    let config = OtlpConfig::new(collector.uri()).json(true).service_name("otel-test");
    let (layer, guard) = otlp_layer(&config).expect("exporter");
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).expect("subscriber");

    let draft =
        Compute::template("draft", "Once upon a time, {{ topic }}.").expect("draft").output_key("story").build();
    let shout = Compute::expression("shout", "story | upper").expect("shout").output_key("loud").build();
    let system = Sequence::builder().name("story").sub_agents([draft, shout]).output_key("loud").build().expect("seq");
    let outcome = system.invoke().memory_id("otel-run").input("topic", "a dragon").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("ONCE UPON A TIME, A DRAGON.")));

    tokio::task::spawn_blocking(move || guard.flush()).await.expect("join").expect("flush");
    let requests = collector.received_requests().await.expect("recorded");
    let mut spans: Vec<Value> = Vec::new();
    for r in &requests {
        let body: Value = serde_json::from_slice(&r.body).expect("OTLP JSON");
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = rs["resource"]["attributes"]
                .as_array()
                .and_then(|a| a.iter().find(|a| a["key"] == "service.name"))
                .map(|a| a["value"]["stringValue"].clone());
            assert_eq!(service, Some(json!("otel-test")));
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    let agents: Vec<(String, String)> = spans
        .iter()
        .filter(|s| s["name"] == "invoke_agent")
        .map(|s| {
            let text = |k: &str| attribute(s, k).and_then(|v| v["stringValue"].as_str()).unwrap_or("?").to_string();
            (text("gen_ai.agent.name"), text("agentic.agent.path"))
        })
        .collect();
    let mut sorted = agents.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("draft".to_string(), "root/0".to_string()),
            ("shout".to_string(), "root/1".to_string()),
            ("story".to_string(), "root".to_string()),
        ]
    );
    let by_name = |name: &str| {
        spans.iter().find(|s| attribute(s, "gen_ai.agent.name").and_then(|v| v["stringValue"].as_str()) == Some(name))
    };
    let root = by_name("story").expect("root span");
    for child in ["draft", "shout"] {
        let span = by_name(child).expect("child span");
        assert_eq!(span["parentSpanId"], root["spanId"], "{child} is nested under the sequence");
        assert_eq!(span["traceId"], root["traceId"]);
        assert_eq!(attribute(span, "gen_ai.operation.name"), Some(&json!({"stringValue": "invoke_agent"})));
        assert_eq!(attribute(span, "agentic.run_id"), Some(&json!({"stringValue": "otel-run"})));
    }
}
