//! What `agentic eval` observes of a case's run: from the finished run itself (`agentic::eval::observed`), the
//! same final state, trajectory and usage as the store holds (`agentic::eval::read_back`), failed attempts'
//! model calls included.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic::agents::model::ScriptedReply;
use agentic::eval::{RunUsage, observed, read_back};
use agentic::prelude::*;
use serde_json::json;

fn weather() -> Tool {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct CityArgs {
        /// The city.
        city: String,
    }
    Tool::new("weather", "Current weather in a city", |a: CityArgs| async move {
        Ok(json!({"city": a.city, "sky": "sunny"}))
    })
}

#[tokio::test]
async fn a_completed_run_is_observed_as_the_store_holds_it_with_its_failed_attempts_usage() {
    let call = json!({"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}).to_string();
    // Attempt 1: a tool round, then the provider fails (two turns asked, one paid for); attempt 2 completes.
    let model = ScriptedModel::new([
        ScriptedReply::parse(&call),
        ScriptedReply::Error("overloaded".into()),
        ScriptedReply::parse(&call),
        ScriptedReply::Text("Sunny in Oslo.".into()),
    ]);
    let forecaster = LlmAgent::builder(model.clone())
        .name("forecaster")
        .user("Weather in {{ city }}?")
        .tools([weather()])
        .output_key("forecast")
        .build()
        .unwrap();
    let polish = Compute::expression("polish", "forecast ~ ' Take sunglasses.'")
        .unwrap()
        .inputs(["forecast"])
        .output_key("reply")
        .build();
    let desk = Sequence::builder()
        .name("desk")
        .sub_agents([forecaster, polish])
        .output_key("reply")
        .error_handler(RetryPolicy::new(1, Duration::ZERO).retry_permanent(true))
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path().join("runs.sled")).unwrap().store_ref();
    let outcome = desk
        .invoke()
        .memory_id("eval-observe-1")
        .input("city", "Oslo")
        .durability(Durability::Async)
        .store_ref(store.clone())
        .await
        .unwrap();
    assert_eq!(outcome.output(), Some(&json!("Sunny in Oslo. Take sunglasses.")));
    assert_eq!(model.used(), 4);

    let (state, trajectory, usage) = observed(&outcome).await;
    assert_eq!(state["reply"], json!("Sunny in Oslo. Take sunglasses."));
    assert_eq!(state["city"], json!("Oslo"));
    assert_eq!(trajectory, ["desk", "forecaster", "polish"], "the failed attempt is not an invocation");
    assert_eq!(
        (usage.model_calls, usage.input_tokens, usage.output_tokens),
        (3, 10, 7),
        "the failed attempt's paid turn counts (1 call), then the retry's 2"
    );
    assert_eq!(read_back(&store, "eval-observe-1").await, (state, trajectory, usage.clone()));
    assert_ne!(usage, RunUsage::default());
}
