//! Budgets and rate limits through `agentic serve` (real process, loopback model reporting 300 tokens a call):
//! a run that crosses its budget is `suspended` with a `budget` pending response and its usage in
//! `GET /api/v1/runs/{id}`; an answer that is no limit is `400`, a new limit `202` and the run completes by
//! itself without calling the model again for the crossing call. A model call waiting for its endpoint's rate
//! limit is a `waiting_for_capacity` event, also for a client that connects to `/events` during the wait, and
//! a cancel ends the wait.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::common;

use serde_json::{Value, json};
use wiremock::MockServer;

use crate::binary::{Serve, Served};

async fn model() -> MockServer {
    crate::echo_model::metered("done").await
}

fn spec(server: &MockServer, budget: &str, limits: &str) -> String {
    format!(
        r#"version: 1
name: steps
root: main
budget: {budget}
models:
  default: {{ provider: openai, base_url: "{}/v1", model: gpt-test, limits: {limits} }}
agents:
  main: {{ kind: sequence, agents: [one, two, three], output_key: c3 }}
  one: {{ kind: llm, user: "one", output_key: c1 }}
  two: {{ kind: llm, user: "two", output_key: c2 }}
  three: {{ kind: llm, user: "three", output_key: c3 }}
"#,
        server.uri()
    )
}

/// `agentic serve` on a fresh store (no specs: runs are posted as spec text), its URL and a client.
fn served() -> (tempfile::TempDir, Served, String, reqwest::Client) {
    let dir = tempfile::tempdir().unwrap();
    let (specs, store) = (dir.path().join("specs"), dir.path().join("store"));
    std::fs::create_dir(&specs).unwrap();
    let served = Serve::on(&store).specs_dir(&specs).start();
    let base = served.url.clone();
    (dir, served, base, reqwest::Client::new())
}

async fn run(http: &reqwest::Client, base: &str, id: &str) -> Value {
    http.get(format!("{base}/api/v1/runs/{id}")).send().await.unwrap().json().await.unwrap()
}

async fn wait_for(http: &reqwest::Client, base: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = run(http, base, id).await;
        if done(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "run {id}: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_suspends_a_served_run_and_an_answer_through_the_api_completes_it() {
    let model = model().await;
    let (_dir, _served, base, http) = served();
    let body = json!({"spec": spec(&model, "{ tokens: 500 }", "{ max_concurrency: 4 }"), "run_id": "b1"});
    let created = http.post(format!("{base}/api/v1/runs")).json(&body).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let r = wait_for(&http, &base, "b1", |r| r["status"] == "suspended").await;
    assert_eq!(r["pending"][0]["id"], "budget:root/1");
    assert_eq!(r["pending"][0]["kind"], "budget");
    assert_eq!(r["pending"][0]["budget"]["limits"]["tokens"], 500);
    assert_eq!(r["pending"][0]["budget"]["used"]["input_tokens"], 400);
    assert_eq!(r["usage"]["total"]["tokens"], 600);
    assert_eq!(model.received_requests().await.unwrap().len(), 2);

    // The inbox lists it with the other questions.
    let inbox: Value = http.get(format!("{base}/inbox.json")).send().await.unwrap().json().await.unwrap();
    let asked: Vec<&str> = inbox["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(asked, ["budget:root/1"], "{inbox}");

    let answer = |value: Value| {
        http.post(format!("{base}/api/v1/runs/b1/responses/budget%3Aroot%2F1")).json(&json!({"value": value})).send()
    };
    let bad = answer(json!("more")).await.unwrap();
    assert_eq!(bad.status(), 400);
    let message = bad.text().await.unwrap();
    assert!(message.contains("a budget is answered with a new limit"), "{message}");
    assert_eq!(answer(json!(2000)).await.unwrap().status(), 202);
    let r = wait_for(&http, &base, "b1", |r| r["status"] == "completed").await;
    assert_eq!(r["output"], "done");
    assert_eq!(r["usage"]["total"]["tokens"], 900);
    assert_eq!(r["usage"]["total"]["model_calls"], 3);
    // The crossing call (the second) was not sent again.
    assert_eq!(model.received_requests().await.unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connecting_during_a_wait_for_capacity_sees_it_and_a_cancel_ends_it() {
    let model = model().await;
    let (_dir, _served, base, http) = served();
    // One call a minute: the second waits about a minute.
    let body = json!({"spec": spec(&model, "{ tokens: 100000 }", "{ requests_per_minute: 1 }"), "run_id": "w1"});
    assert_eq!(http.post(format!("{base}/api/v1/runs")).json(&body).send().await.unwrap().status(), 201);
    wait_for(&http, &base, "w1", |r| r["history"].as_array().is_some_and(|h| !h.is_empty())).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut live = http.get(format!("{base}/api/v1/runs/w1/events")).send().await.unwrap();
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    common::read_until(&mut live, &mut text, "event: waiting_for_capacity", deadline, Duration::from_secs(10)).await;
    let data: Value = text
        .lines()
        .skip_while(|l| *l != "event: waiting_for_capacity")
        .find_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .unwrap();
    assert_eq!(data["path"], "root/1");
    assert_eq!(data["agent"], "two");
    assert_eq!(data["limit"], "requests_per_minute");
    assert!(data["wait_ms"].as_u64().unwrap() > 50_000, "{data}");

    let cancelled = Instant::now();
    let answer = http.post(format!("{base}/api/v1/runs/w1/cancel")).send().await.unwrap();
    assert_eq!(answer.status(), 202);
    wait_for(&http, &base, "w1", |r| r["status"] == "cancelled").await;
    assert!(cancelled.elapsed() < Duration::from_secs(3));
    assert_eq!(model.received_requests().await.unwrap().len(), 1);
}
