//! The sled store through its public API: round trips across reopen, compaction, and a directory held by
//! another process.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use agentic_engine::{CheckpointStore, InvocationRecord, RunImage, RunRecord, RunStatus, StepRecord};
use agentic_store::SledStore;
use serde_json::{Map, json};

const HOLD_ENV: &str = "AGENTIC_STORE_TEST_HOLD_DIR";

fn step(run_id: &str, seq: u64) -> StepRecord {
    StepRecord {
        run_id: run_id.into(),
        seq,
        agent_path: format!("root/{}", seq % 4),
        delta: vec![(format!("k{}", seq % 5), if seq.is_multiple_of(9) { json!(null) } else { json!({"n": seq}) })],
        planner_states: vec![serde_json::from_value(json!({"path": "root", "state": {"next": seq % 4}})).unwrap()],
        invocation: Some(InvocationRecord {
            agent: "worker".into(),
            path: format!("root/{}", seq % 4),
            inputs: Map::new(),
            output: json!(seq),
            started_at_us: seq * 100,
            ended_at_us: seq * 100 + 7,
            attempt: 1,
            tokens: None,
            error: None,
        }),
        async_started: false,
        failed: false,
    }
}

fn run_record(run_id: &str, status: RunStatus, updated_at_ms: u64) -> RunRecord {
    serde_json::from_value(json!({
        "run_id": run_id, "name": "demo", "fingerprint": "abc", "status": status,
        "created_at_ms": 1, "updated_at_ms": updated_at_ms,
    }))
    .unwrap()
}

#[tokio::test]
async fn what_was_flushed_is_seen_by_a_new_open_of_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    {
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(64);
        store.put_run(run_record("first", RunStatus::Completed, 100)).await.unwrap();
        store.put_run(run_record("second", RunStatus::Suspended, 200)).await.unwrap();
        for seq in 1..=300 {
            let record = step("second", seq);
            store.append(record.clone()).await.unwrap();
            records.push(record);
        }
        store.flush().await.unwrap();
    }
    let store = SledStore::open(tmp.path()).unwrap();
    let runs = store.runs().await.unwrap();
    assert_eq!(runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), ["second", "first"]);
    assert_eq!(runs[0].status, RunStatus::Suspended);
    assert_eq!(store.records("second").await.unwrap(), records);
    assert_eq!(store.load("second").await.unwrap(), RunImage::fold("second", &records).unwrap());
    assert!(store.records("first").await.unwrap().is_empty());
    assert_eq!(store.load("nobody").await.unwrap(), RunImage::new("nobody"));
    assert_eq!(store.run("nobody").await.unwrap(), None);
    // Through the engine's object-safe handle too.
    let shared = store.store_ref();
    assert_eq!(shared.load_dyn("second").await.unwrap().seq, 300);
}

#[tokio::test]
async fn compaction_at_any_interval_loads_what_a_plain_fold_gives() {
    for n in [1, 10, 256, 999] {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(n);
        let mut records = Vec::new();
        for seq in 1..=1000 {
            let record = step("r", seq);
            store.append(record.clone()).await.unwrap();
            records.push(record);
        }
        assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &records).unwrap(), "N = {n}");
        assert_eq!(store.records("r").await.unwrap().len(), 1000);
    }
}

/// Not a test on its own: the child process of `a_directory_held_by_another_process_is_in_use`.
#[test]
fn child_holding_a_store() {
    let Ok(dir) = std::env::var(HOLD_ENV) else { return };
    let _store = SledStore::open(&dir).unwrap();
    println!("holding {dir}");
    // Hold the store until the parent closes our stdin.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

#[tokio::test]
async fn a_directory_held_by_another_process_is_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().display().to_string();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holding_a_store", "--nocapture", "--test-threads=1"])
        .env(HOLD_ENV, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().contains("holding")), "the child did not open the store");
    let err = SledStore::open(tmp.path()).unwrap_err();
    assert!(err.to_string().contains(&format!("store {dir} is in use by another process")), "{err}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let store = SledStore::open(tmp.path()).unwrap();
    assert!(store.runs().await.unwrap().is_empty());
}
