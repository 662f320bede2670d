//! Idempotency keys: one per loop iteration and per mapper item, the same for an invocation run again after a
//! suspension and a restart from the journal (sled on disk).

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use agentic::engine::CheckpointStore;
use agentic::prelude::*;
use serde_json::json;

type Keys = Arc<Mutex<Vec<String>>>;

/// An agent that records its idempotency key and returns it.
fn charge(keys: &Keys) -> AgentRef {
    let keys = keys.clone();
    FnAgent::builder("charge", move |ctx| {
        let keys = keys.clone();
        Box::pin(async move {
            let key = ctx.run().idempotency_key().await?;
            keys.lock().unwrap().push(key.clone());
            Ok(json!(key))
        })
    })
    .output_key("key")
    .build()
}

#[tokio::test]
async fn each_loop_iteration_gets_its_own_key() {
    let keys = Keys::default();
    let lp = Loop::builder().sub_agents([charge(&keys)]).max_iterations(3).output_key("key").build().unwrap();
    let out = lp.invoke().memory_id("idem-loop").await.unwrap();
    assert_eq!(out.output(), Some(&json!("idem-loop/root/0@3/1")));
    assert_eq!(*keys.lock().unwrap(), ["idem-loop/root/0/1", "idem-loop/root/0@2/1", "idem-loop/root/0@3/1"]);
}

#[tokio::test]
async fn each_mapper_item_and_each_iteration_around_the_mapper_gets_its_own_key() {
    let keys = Keys::default();
    let map = ParallelMapper::builder()
        .name("map")
        .sub_agent(charge(&keys))
        .items_key("xs")
        .item_key("x")
        .output_key("keys")
        .build()
        .unwrap();
    let lp = Loop::builder().sub_agents([map]).max_iterations(2).build().unwrap();
    lp.invoke().memory_id("idem-map").input("xs", json!([1, 2, 3])).await.unwrap();
    let mut got = keys.lock().unwrap().clone();
    got.sort();
    assert_eq!(
        got,
        [
            "idem-map/root/0/0#0/1",
            "idem-map/root/0/0#0@2/1",
            "idem-map/root/0/0#1/1",
            "idem-map/root/0/0#1@2/1",
            "idem-map/root/0/0#2/1",
            "idem-map/root/0/0#2@2/1",
        ]
    );
}

/// `charge` that, the second time it runs, records its key and asks a human before it completes.
fn charge_then_confirm(keys: &Keys) -> AgentRef {
    let keys = keys.clone();
    FnAgent::builder("charge", move |ctx| {
        let keys = keys.clone();
        Box::pin(async move {
            let key = ctx.run().idempotency_key().await?;
            keys.lock().unwrap().push(key.clone());
            if key.contains("@2") && ctx.human().take("confirm").await.is_none() {
                return Err(ctx.human().suspend("confirm", "Charge again?"));
            }
            Ok(json!(key))
        })
    })
    .output_key("key")
    .build()
}

#[tokio::test]
async fn an_invocation_run_again_after_a_restart_keeps_its_key_and_the_next_iteration_gets_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::default();
    let run = "idem-resume";
    {
        let store = agentic::store::SledStore::open(dir.path().join("db")).unwrap();
        let lp = Loop::builder().sub_agents([charge_then_confirm(&keys)]).max_iterations(3).build().unwrap();
        let out = lp.invoke().memory_id(run).store(store).await.unwrap();
        assert!(out.is_suspended());
    }
    // A new store handle and a new system, as after a restart: the occurrence comes from the journal.
    let store = agentic::store::SledStore::open(dir.path().join("db")).unwrap();
    let lp = Loop::builder().sub_agents([charge_then_confirm(&keys)]).max_iterations(3).build().unwrap();
    let out = lp.resume(run).store(store.clone()).answer("confirm", "yes").await.unwrap();
    assert!(!out.is_suspended());
    assert_eq!(
        *keys.lock().unwrap(),
        ["idem-resume/root/0/1", "idem-resume/root/0@2/1", "idem-resume/root/0@2/1", "idem-resume/root/0@3/1"]
    );
    // The journal names no mapper item outside mappers.
    let records = store.records(run).await.unwrap();
    assert!(records.iter().filter_map(|r| r.invocation.as_ref()).all(|i| i.item.is_none()));
}

#[tokio::test]
async fn a_retried_attempt_keeps_the_occurrence_and_counts_its_attempt() {
    let keys = Keys::default();
    let k = keys.clone();
    let flaky = FnAgent::builder("flaky", move |ctx| {
        let k = k.clone();
        Box::pin(async move {
            let key = ctx.run().idempotency_key().await?;
            k.lock().unwrap().push(key);
            if ctx.attempt() < 2 { Err(ctx.fail("not yet").into()) } else { Ok(json!("ok")) }
        })
    })
    .output_key("out")
    .build();
    let lp = Loop::builder()
        .sub_agents([flaky])
        .max_iterations(2)
        .error_handler(RetryPolicy::new(3, std::time::Duration::ZERO))
        .build()
        .unwrap();
    lp.invoke().memory_id("idem-retry").await.unwrap();
    assert_eq!(
        *keys.lock().unwrap(),
        ["idem-retry/root/0/1", "idem-retry/root/0/2", "idem-retry/root/0@2/1", "idem-retry/root/0@2/2"]
    );
}
