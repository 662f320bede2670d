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

/// A store that records what each flush commits: the paths of the records appended since the last flush,
/// and `run` when the run record was written in between.
#[derive(Clone, Default)]
struct CommitLog {
    inner: MemoryStore,
    pending: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    commits: std::sync::Arc<std::sync::Mutex<Vec<Vec<String>>>>,
}

impl CheckpointStore for CommitLog {
    async fn append(&self, record: agentic::engine::StepRecord) -> Result<(), agentic::engine::StoreError> {
        self.pending.lock().unwrap().push(record.agent_path.clone());
        self.inner.append(record).await
    }
    async fn flush(&self) -> Result<(), agentic::engine::StoreError> {
        let batch = std::mem::take(&mut *self.pending.lock().unwrap());
        self.commits.lock().unwrap().push(batch);
        Ok(())
    }
    async fn put_run(&self, run: agentic::engine::RunRecord) -> Result<(), agentic::engine::StoreError> {
        self.pending.lock().unwrap().push("run".to_string());
        self.inner.put_run(run).await
    }
    async fn run(&self, run_id: &str) -> Result<Option<agentic::engine::RunRecord>, agentic::engine::StoreError> {
        CheckpointStore::run(&self.inner, run_id).await
    }
    async fn runs(&self) -> Result<Vec<agentic::engine::RunRecord>, agentic::engine::StoreError> {
        self.inner.runs().await
    }
    async fn records(&self, run_id: &str) -> Result<Vec<agentic::engine::StepRecord>, agentic::engine::StoreError> {
        self.inner.records(run_id).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_run_commits_its_start_each_step_and_its_last_step_with_its_end() {
    let chain = Sequence::builder()
        .name("chain")
        .sub_agents([expr("a", "1", "a"), expr("b", "2", "b"), expr("c", "3", "c")])
        .output_key("c")
        .build()
        .unwrap();
    let store = CommitLog::default();
    let out = chain.invoke().input("x", 0).memory_id("c-1").store(store.clone()).durability(Durability::Sync);
    assert_eq!(out.await.unwrap().output(), Some(&json!(3)));
    let commits = store.commits.lock().unwrap().clone();
    // The start (inputs with the run record), each step but the last on its own, and the root's last step
    // with the root's completion and the final record: one commit fewer than steps + 2.
    assert_eq!(commits, [vec!["inputs", "run"], vec!["root/0"], vec!["root/1"], vec!["root/2", "root", "run"],]);
    let record = CheckpointStore::run(&store.inner, "c-1").await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    let seqs: Vec<u64> = store.inner.records("c-1").await.unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_with_async_agents_commits_its_last_step_at_once() {
    // `slow` runs async: the root's last step is not the run's last work, so it is committed on its own
    // (the async agent's completion and the end follow).
    let slow = Compute::expression("slow", "7").unwrap().output_key("s").asynchronous(true).build();
    let chain =
        Sequence::builder().name("chain").sub_agents([slow, expr("b", "2", "b")]).output_key("b").build().unwrap();
    let store = CommitLog::default();
    chain.invoke().memory_id("a-1").store(store.clone()).durability(Durability::Sync).await.unwrap();
    let commits = store.commits.lock().unwrap().clone();
    assert!(commits.iter().all(|c| !c.contains(&"root/1".to_string()) || c == &["root/1"]), "{commits:?}");
    assert_eq!(commits.last().unwrap(), &["root", "run"], "{commits:?}");

    // Without one, the last completion of a parallel is its last step: committed with the end.
    let par = Parallel::builder().name("par").sub_agents([expr("a", "1", "a"), expr("b", "2", "b")]).build().unwrap();
    let store = CommitLog::default();
    par.invoke().memory_id("p-1").store(store.clone()).durability(Durability::Sync).await.unwrap();
    let commits = store.commits.lock().unwrap().clone();
    assert_eq!(commits.len(), 3, "{commits:?}");
    assert_eq!(commits[0], ["run"]);
    assert_eq!(commits[1].len(), 1, "{commits:?}");
    assert_eq!(commits[2][1..], ["root", "run"], "{commits:?}");
}
