//! The sled store through its public API: a directory held by another process, and a process killed with
//! SIGKILL while it flushes steps (every step it reported durable is loaded back). Round trips across a
//! reopen and compaction are in the store suite both backends run (`store/tests/store_suite.rs`).

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use agentic_engine::{CheckpointStore, InvocationRecord, RunRecord, RunStatus, StepRecord};
use agentic_store::SledStore;
use serde_json::{Map, json};

const HOLD_ENV: &str = "AGENTIC_STORE_TEST_HOLD_DIR";
const SYNC_ENV: &str = "AGENTIC_STORE_TEST_SYNC_DIR";

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
            usage: None,
            error: None,
            item: None,
        }),
        async_started: false,
        failed: false,
        item: None,
        item_end: false,
        bindings: None,
        calls: Vec::new(),
    }
}

fn run_record(run_id: &str, status: RunStatus, updated_at_ms: u64) -> RunRecord {
    serde_json::from_value(json!({
        "run_id": run_id, "name": "demo", "fingerprint": "abc", "status": status,
        "created_at_ms": 1, "updated_at_ms": updated_at_ms,
    }))
    .unwrap()
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
    let mut child = spawn_child("child_holding_a_store", HOLD_ENV, &dir);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().contains("holding")), "the child did not open the store");
    let err = SledStore::open(tmp.path()).unwrap_err();
    assert!(err.to_string().contains(&format!("store {dir} is in use by another process")), "{err}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let store = SledStore::open(tmp.path()).unwrap();
    assert!(store.runs().await.unwrap().is_empty());
}

/// Runs the child processes of this file run: this test binary again, only `test`, with `env` set to `dir`.
fn spawn_child(test: &str, env: &str, dir: &str) -> std::process::Child {
    // The test's name in this binary: its module path less the crate's name (`store_sled::child_…`).
    let module = module_path!().split_once("::").map_or(String::new(), |(_, rest)| format!("{rest}::"));
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("{module}{test}"), "--nocapture", "--test-threads=1"])
        .env(env, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Concurrent runs in the child of `steps_reported_durable_survive_a_sigkill`.
const SYNC_RUNS: usize = 4;

/// Not a test on its own: the child process of `steps_reported_durable_survive_a_sigkill`. Runs
/// [`SYNC_RUNS`] runs at once, each appending steps with a flush after each (`sync` durability), and every
/// 10th step a ~64 KiB run record, flushed too (so the write-ahead log crosses its 8 MiB checkpoint
/// threshold during the test); prints `durable RUN SEQ` after each flush, until it is killed.
#[test]
fn child_flushing_steps_until_killed() {
    let Ok(dir) = std::env::var(SYNC_ENV) else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let store = SledStore::open(&dir).unwrap();
        let runs: Vec<_> = (0..SYNC_RUNS)
            .map(|j| {
                let store = store.clone();
                tokio::spawn(async move {
                    let run_id = format!("run-{j}");
                    for seq in 1.. {
                        store.append(step(&run_id, seq)).await.unwrap();
                        store.flush().await.unwrap();
                        if seq % 10 == 0 {
                            store.put_run(big_run_record(&run_id, seq)).await.unwrap();
                            store.flush().await.unwrap();
                        }
                        println!("durable {run_id} {seq}");
                    }
                })
            })
            .collect();
        for run in runs {
            run.await.unwrap();
        }
    });
}

fn big_run_record(run_id: &str, seq: u64) -> RunRecord {
    let mut run = run_record(run_id, RunStatus::Running, seq);
    run.detail = json!("x".repeat(64 * 1024));
    run
}

#[test]
fn steps_reported_durable_survive_a_sigkill() {
    // Killed early, mid-way, and after the log has been checkpointed at least once (~8 MiB of run records).
    for kill_after in [25, 400, 1600] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().display().to_string();
        let mut child = spawn_child("child_flushing_steps_until_killed", SYNC_ENV, &dir);
        let mut durable = [0u64; SYNC_RUNS];
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        for line in lines {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix("durable run-") else { continue };
            let (j, seq) = rest.split_once(' ').unwrap();
            durable[j.parse::<usize>().unwrap()] = seq.parse().unwrap();
            seen += 1;
            if seen == kill_after {
                child.kill().unwrap(); // SIGKILL
                // The lines it printed before dying are reported steps too: read them to the end.
            }
        }
        let status = child.wait().unwrap();
        assert_eq!(status.code(), None, "kill after {kill_after}: the child was killed by a signal ({status})");
        assert!(seen >= kill_after, "kill after {kill_after}: the child stopped at {seen} lines");

        let store = tokio::runtime::Runtime::new().unwrap().block_on(async {
            let store = SledStore::open(tmp.path()).unwrap();
            for (j, &last) in durable.iter().enumerate() {
                let run_id = format!("run-{j}");
                let records = store.records(&run_id).await.unwrap();
                assert!(
                    records.len() as u64 >= last,
                    "kill after {kill_after}: {run_id} reported step {last} durable, {} loaded",
                    records.len()
                );
                let expected: Vec<_> = (1..=records.len() as u64).map(|seq| step(&run_id, seq)).collect();
                assert_eq!(records, expected, "kill after {kill_after}: {run_id}");
                assert_eq!(store.load(&run_id).await.unwrap().seq, records.len() as u64);
                let run = store.run(&run_id).await.unwrap();
                let updated = run.map_or(0, |r| r.updated_at_ms);
                assert!(updated >= last / 10 * 10, "kill after {kill_after}: {run_id} run record at {updated}");
            }
            store
        });
        drop(store);
    }
}
