//! Leases with fencing on the PostgreSQL store (`docs/store-format.md`, Leases): two handles with different
//! owner ids race for one run, as two processes would. Skipped without `AGENTIC_TEST_PG_URL` (unless
//! `AGENTIC_REQUIRE_PG=1`), as `store_suite.rs`.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic_engine::{CheckpointStore, RunRecord, RunStatus, StepRecord, StoreError};
use agentic_store::PgStore;
use serde_json::json;

#[path = "support/pg.rs"]
mod pg;

fn record(run_id: &str, status: RunStatus, name: &str) -> RunRecord {
    serde_json::from_value(json!({
        "run_id": run_id, "name": name, "fingerprint": "abc", "status": status,
        "created_at_ms": 1, "updated_at_ms": 2,
    }))
    .unwrap()
}

fn step(run_id: &str, seq: u64, by: &str) -> StepRecord {
    let mut record = StepRecord::new(run_id, seq, "root/0");
    record.delta.push(("by".to_string(), json!(by)));
    record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_past_expiry_loses_the_run_and_its_append_is_refused() {
    let Some(url) = pg::fresh_database("pg_lease").await else { return };
    let ttl = Duration::from_millis(300);
    let a = PgStore::connect(&url).await.unwrap().with_lease("server-a", ttl);
    let b = PgStore::connect(&url).await.unwrap().with_lease("server-b", ttl);
    assert!(CheckpointStore::shared(&a));

    // A claims the new run: its first record is written with A's lease (token 1).
    let lease = a.acquire_lease("r").await.unwrap().unwrap();
    assert_eq!((lease.owner.as_str(), lease.token), ("server-a", 1));
    a.append(step("r", 1, "a")).await.unwrap();
    a.put_run(record("r", RunStatus::Running, "by-a")).await.unwrap();
    a.flush_run("r").await.unwrap();
    // B cannot take a live lease; A's renewals keep it past its first expiry.
    assert_eq!(b.acquire_lease("r").await.unwrap(), None);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(a.renew_leases().await.unwrap().is_empty());
    }
    assert_eq!(b.acquire_lease("r").await.unwrap(), None);
    assert!(b.takeover_candidates().await.unwrap().is_empty(), "a live lease is no candidate");

    // A is paused (no renewal) past expiry: B takes the run over, with a new fencing token.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let candidates = b.takeover_candidates().await.unwrap();
    assert_eq!(candidates.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), ["r"]);
    let lease = b.acquire_lease("r").await.unwrap().unwrap();
    assert_eq!((lease.owner.as_str(), lease.token), ("server-b", 2));
    assert_eq!(b.load("r").await.unwrap().seq, 1, "B continues from the last checkpoint");
    b.append(step("r", 2, "b")).await.unwrap();
    b.put_run(record("r", RunStatus::Running, "by-b")).await.unwrap();
    b.flush_run("r").await.unwrap();

    // A wakes up and appends its own step 2 (and a step 3, and a record): refused, nothing written.
    a.append(step("r", 2, "a")).await.unwrap();
    a.append(step("r", 3, "a")).await.unwrap();
    a.put_run(record("r", RunStatus::Completed, "by-a")).await.unwrap();
    let err = a.flush_run("r").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseLost { run_id, holder, token: 2, held: 1 } if run_id == "r" && holder == "server-b"),
        "{err}"
    );
    assert!(err.to_string().contains("lease was lost to another process"), "{err}");
    // From then on A's writes of the run are refused at once; its renewals do not bring the lease back.
    assert!(matches!(a.append(step("r", 4, "a")).await, Err(StoreError::LeaseLost { .. })));
    assert!(matches!(a.put_run(record("r", RunStatus::Failed, "by-a")).await, Err(StoreError::LeaseLost { .. })));
    assert!(a.renew_leases().await.unwrap().is_empty());

    let fresh = PgStore::connect(&url).await.unwrap();
    let journal = fresh.records("r").await.unwrap();
    let by: Vec<(u64, serde_json::Value)> = journal.iter().map(|r| (r.seq, r.delta[0].1.clone())).collect();
    assert_eq!(by, [(1, json!("a")), (2, json!("b"))], "step 2 is B's, A's steps are not there");
    let run = fresh.run("r").await.unwrap().unwrap();
    assert_eq!((run.name.as_str(), run.status), ("by-b", RunStatus::Running), "A's record was refused too");

    // A process without a lease (`agentic run`) cannot write a run B holds either.
    fresh.append(step("r", 3, "fresh")).await.unwrap();
    assert!(matches!(fresh.flush_run("r").await, Err(StoreError::LeaseLost { .. })));

    // B's release ends its lease at once: A may take the run again (token 3), and then write.
    b.release_lease("r").await.unwrap();
    let lease = a.acquire_lease("r").await.unwrap().unwrap();
    assert_eq!(lease.token, 3);
    a.append(step("r", 3, "a")).await.unwrap();
    a.flush_run("r").await.unwrap();
    assert_eq!(fresh.records("r").await.unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_run_does_not_fail_the_other_runs_of_the_same_flush() {
    let Some(url) = pg::fresh_database("pg_lease_batch").await else { return };
    let ttl = Duration::from_millis(200);
    let a = PgStore::connect(&url).await.unwrap().with_lease("server-a", ttl);
    let b = a.with_lease("server-b", ttl);
    for run in ["lost", "kept"] {
        a.acquire_lease(run).await.unwrap().unwrap();
        a.append(step(run, 1, "a")).await.unwrap();
        a.put_run(record(run, RunStatus::Running, "a")).await.unwrap();
    }
    a.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.acquire_lease("lost").await.unwrap().unwrap();
    // "kept" expired too but nobody took it: A's renewal extends it; "lost" is reported lost.
    assert_eq!(a.renew_leases().await.unwrap(), ["lost"]);
    // Both runs' steps in one flush: the lost one is dropped, the kept one written.
    a.append(step("kept", 2, "a")).await.unwrap();
    assert!(matches!(a.append(step("lost", 2, "a")).await, Err(StoreError::LeaseLost { .. })));
    a.flush_run("kept").await.unwrap();
    assert_eq!(b.records("kept").await.unwrap().len(), 2);
    assert_eq!(b.records("lost").await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_from_two_handles_to_one_run_both_stay() {
    let Some(url) = pg::fresh_database("pg_lease_answers").await else { return };
    let a = PgStore::connect(&url).await.unwrap();
    let b = PgStore::connect(&url).await.unwrap();
    let mut rec = record("s", RunStatus::Suspended, "demo");
    rec.pending = serde_json::from_value(json!([
        {"id": "q1", "prompt": "?", "agent": "ask"}, {"id": "q2", "prompt": "?", "agent": "ask"}
    ]))
    .unwrap();
    a.put_run(rec).await.unwrap();
    a.flush().await.unwrap();
    let (sa, sb) = (a.store_ref(), b.store_ref());
    let ra = agentic_engine::respond(&sa, "s", Some("q1"), json!(1));
    let rb = agentic_engine::respond(&sb, "s", Some("q2"), json!(2));
    let (ra, rb) = tokio::join!(ra, rb);
    assert_eq!((ra.unwrap(), rb.unwrap()), ("q1".to_string(), "q2".to_string()));
    let answers = a.run("s").await.unwrap().unwrap().answers;
    assert_eq!(answers.len(), 2, "{answers:?}");
    let again = agentic_engine::respond(&b.store_ref(), "s", Some("q3"), json!(3)).await.unwrap_err();
    assert!(again.to_string().contains("no pending response `q3`"), "{again}");
}
