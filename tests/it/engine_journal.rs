//! The step journal: one record per completed step at every nesting level, in every durability mode.

#![allow(clippy::unwrap_used)]

use agentic::engine::{CheckpointStore, RunStatus};
use agentic::prelude::*;
use serde_json::json;

fn expr(name: &str, src: &str, out: &str) -> AgentRef {
    Compute::expression(name, src).unwrap().output_key(out).build()
}

fn system() -> AgentRef {
    let par = Parallel::builder().name("par").sub_agents([expr("b", "1", "b"), expr("c", "2", "c")]).build().unwrap();
    let lp = Loop::builder()
        .name("lp")
        .sub_agents([Compute::expression("d", "(d | default(0)) + b + c")
            .unwrap()
            .inputs(["b", "c"])
            .output_key("d")
            .build()])
        .max_iterations(2)
        .output_key("d")
        .build()
        .unwrap();
    Sequence::builder().name("main").sub_agents([expr("a", "'x'", "a"), par, lp]).output_key("d").build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_completed_step_at_every_level_is_journaled_in_order() {
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        let store = MemoryStore::new();
        let out = system().invoke().memory_id("run-1").store(store.clone()).durability(durability).await.unwrap();
        assert_eq!(out.output(), Some(&json!(6)));
        let records = store.records("run-1").await.unwrap();
        let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=8).collect::<Vec<u64>>(), "{durability:?}: gap-free sequence numbers");
        let mut paths: Vec<&str> = records.iter().map(|r| r.agent_path.as_str()).collect();
        // b and c complete concurrently: their relative order is free
        paths[1..3].sort();
        assert_eq!(paths, ["root/0", "root/1/0", "root/1/1", "root/1", "root/2/0", "root/2/0", "root/2", "root"]);
        let a = &records[0];
        assert_eq!(a.delta, vec![("a".to_string(), json!("x"))]);
        assert_eq!(a.planner_states[0].path, "root");
        assert_eq!(a.planner_states[0].state, json!({"next": 2}), "the sequence has dispatched its 2nd agent");
        let d2 = &records[5];
        assert_eq!(d2.delta, vec![("d".to_string(), json!(6))]);
        assert_eq!(d2.planner_states[0].path, "root/2");
        assert_eq!(d2.invocation.as_ref().unwrap().inputs, json!({"b": 1, "c": 2}).as_object().unwrap().clone());
        let run = store.run("run-1").unwrap().record.unwrap();
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(run.detail, json!(6));
    }
}

#[tokio::test]
async fn a_failed_run_is_journaled_as_failed_with_the_error() {
    let store = MemoryStore::new();
    let seq = Sequence::builder().sub_agents([expr("needs", "missing_key", "x")]).build().unwrap();
    seq.invoke().memory_id("run-f").store(store.clone()).await.unwrap_err();
    let run = store.run("run-f").unwrap().record.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.detail, json!("agent `needs` (root/0): missing argument `missing_key`"));
}

#[test]
fn topology_has_stable_paths_and_fingerprint() {
    let t = system().topology();
    let paths: Vec<(&str, &str)> = t.walk().iter().map(|n| (n.path.as_str(), n.spec.name.as_str())).collect();
    assert_eq!(
        paths,
        [
            ("root", "main"),
            ("root/0", "a"),
            ("root/1", "par"),
            ("root/1/0", "b"),
            ("root/1/1", "c"),
            ("root/2", "lp"),
            ("root/2/0", "d")
        ]
    );
    assert_eq!(t.fingerprint(), system().topology().fingerprint());
    let changed = Sequence::builder().name("main").sub_agents([expr("a", "'x'", "a")]).build().unwrap();
    assert_ne!(t.fingerprint(), changed.topology().fingerprint());
}

#[tokio::test]
async fn failed_attempts_are_journaled_and_skipped_when_folding() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let flaky = FnAgent::from_async("flaky", move |_| {
        let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move { if n < 2 { Err(format!("outage {}", n + 1)) } else { Ok(json!("ok")) } }
    })
    .output_key("reply")
    .build();
    let system = Sequence::builder()
        .name("main")
        .sub_agents([flaky, expr("after", "reply ~ '!'", "out")])
        .error_handler(agentic::engine::RetryPolicy::new(3, std::time::Duration::from_millis(1)))
        .output_key("out")
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = agentic::store::SledStore::open(dir.path().join("db")).unwrap();
    let out = system.invoke().memory_id("flaky-1").store(store.clone()).await.unwrap();
    assert_eq!(out.output(), Some(&json!("ok!")));

    let records = store.records("flaky-1").await.unwrap();
    let steps: Vec<(String, bool, Option<u32>, Option<String>)> = records
        .iter()
        .filter(|r| r.agent_path != "inputs")
        .map(|r| {
            let inv = r.invocation.as_ref();
            (r.agent_path.clone(), r.failed, inv.map(|i| i.attempt), inv.and_then(|i| i.error.clone()))
        })
        .collect();
    let failure = |n: u32| Some(format!("agent `flaky` (root/0) failed: outage {n}"));
    assert_eq!(
        steps,
        [
            ("root/0".to_string(), true, Some(1), failure(1)),
            ("root/0".to_string(), true, Some(2), failure(2)),
            ("root/0".to_string(), false, Some(3), None),
            ("root/1".to_string(), false, Some(1), None),
            ("root".to_string(), false, Some(1), None),
        ]
    );
    // Folding skips the failed attempts: the history holds completions only, the run is done.
    let image = store.load("flaky-1").await.unwrap();
    let history: Vec<(&str, u32)> = image.history.iter().map(|i| (i.agent.as_str(), i.attempt)).collect();
    assert_eq!(history, [("flaky", 3), ("after", 1), ("main", 1)]);
    assert_eq!(image.root_done, Some(json!("ok!")));
}
