//! Draining a run (`DrainHandle`): it stops at its step boundaries without ending. The steps in flight finish
//! and are journaled, no new step starts, the run stays `running` with an `interrupted` milestone, and a resume
//! continues with the steps it did not start, none twice. A cancel after a drain still cancels. On a sled store
//! on disk, in every durability mode.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentic::engine::{CancelHandle, DrainHandle};
use agentic::engine::{CheckpointStore, RunEvent, RunStatus};
use agentic::prelude::*;
use serde_json::{Value, json};

/// Call counters, one per agent.
fn counters(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

fn counts(c: &[AtomicUsize]) -> Vec<usize> {
    c.iter().map(|a| a.load(Ordering::SeqCst)).collect()
}

/// Waits (up to 10 s) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn sled(dir: &tempfile::TempDir) -> SledStore {
    SledStore::open(dir.path().join("db")).unwrap()
}

/// The journal's steps (agent path, output), inputs left out.
async fn steps(store: &SledStore, run_id: &str) -> Vec<(String, Value)> {
    let records = store.records(run_id).await.unwrap();
    records
        .iter()
        .filter(|r| r.agent_path != "inputs")
        .map(|r| (r.agent_path.clone(), r.invocation.as_ref().map_or(Value::Null, |i| i.output.clone())))
        .collect()
}

/// The run record's status and milestone kinds; the last milestone's seq must be the journal's last.
async fn status(store: &SledStore, run_id: &str) -> (String, Vec<String>) {
    let record = store.run(run_id).await.unwrap().unwrap();
    let last_seq = store.records(run_id).await.unwrap().last().map_or(0, |r| r.seq);
    assert_eq!(record.milestones.last().map(|m| m.seq), Some(last_seq), "{:?}", record.milestones);
    (record.status.to_string(), record.milestones.iter().map(|m| m.kind.to_string()).collect())
}

/// Ten steps `s1`..`s10`, each appending `-s<i>` to `acc` and counting its calls; `s3` first sleeps 300 ms.
fn ten_steps(calls: Arc<Vec<AtomicUsize>>) -> AgentRef {
    let steps: Vec<AgentRef> = (1..=10)
        .map(|i| {
            let calls = calls.clone();
            FnAgent::builder(format!("s{i}"), move |ctx| {
                let calls = calls.clone();
                Box::pin(async move {
                    calls[i - 1].fetch_add(1, Ordering::SeqCst);
                    if i == 3 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    Ok(json!(format!("{}-s{i}", ctx.input_as::<String>("acc")?)))
                })
            })
            .input("acc")
            .output_key("acc")
            .build()
        })
        .collect();
    Sequence::builder().name("ten").sub_agents(steps).output_key("acc").build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_sequence_finishes_its_step_stays_running_and_resumes_where_it_stopped() {
    let expected = json!("start-s1-s2-s3-s4-s5-s6-s7-s8-s9-s10");
    // The same system undrained, for its output.
    let undrained = ten_steps(counters(10)).invoke().input("acc", "start").await.unwrap();
    assert_eq!(undrained.output(), Some(&expected));

    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        let dir = tempfile::tempdir().unwrap();
        let store = sled(&dir);
        let run_id = format!("ten-{durability:?}");
        let calls = counters(10);
        let system = ten_steps(calls.clone());
        let drain = DrainHandle::new();
        let (mut events, run) = system
            .invoke()
            .input("acc", "start")
            .memory_id(run_id.clone())
            .store(store.clone())
            .durability(durability)
            .drain_handle(drain.clone())
            .events();
        until("s3 runs", || calls[2].load(Ordering::SeqCst) == 1).await;
        drain.drain();
        assert!(drain.is_draining());
        let outcome = run.await.unwrap().unwrap();

        assert_eq!(outcome.result, RunResult::Drained, "{durability:?}");
        assert!(outcome.is_drained() && !outcome.is_suspended());
        assert_eq!(outcome.output(), None);
        assert_eq!(counts(&calls), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], "{durability:?}: s3 finished, s4 never started");
        assert_eq!(outcome.state().get("acc"), Some(&json!("start-s1-s2-s3")));
        assert_eq!(
            steps(&store, &run_id).await,
            [
                ("root/0".to_string(), json!("start-s1")),
                ("root/1".to_string(), json!("start-s1-s2")),
                ("root/2".to_string(), json!("start-s1-s2-s3")),
            ],
            "{durability:?}: s3's step is journaled"
        );
        assert_eq!(
            status(&store, &run_id).await,
            ("running".to_string(), vec!["started".to_string(), "interrupted".to_string()]),
            "{durability:?}"
        );
        // Listeners see the drain as the run's end, and the stream ends.
        let mut seen = Vec::new();
        while let Some(event) = events.recv().await {
            seen.push(event);
        }
        assert!(!seen.iter().any(|e| matches!(e, RunEvent::AgentStarted { path, .. } if path == "root/3")));
        let ends: Vec<&RunEvent> = seen.iter().rev().take(2).collect();
        assert_eq!(
            ends,
            [&RunEvent::ScopeDestroyed { run_id: run_id.clone() }, &RunEvent::Drained { run_id: run_id.clone() }]
        );

        // A fresh request on the same store, as a restarted server would make.
        let resumed =
            ten_steps(calls.clone()).resume(run_id.clone()).store(store.clone()).durability(durability).await.unwrap();
        assert_eq!(resumed.output(), undrained.output(), "{durability:?}");
        assert_eq!(counts(&calls), [1; 10], "{durability:?}: s4..s10 once each, s3 not again");
        assert_eq!(
            status(&store, &run_id).await,
            ("completed".to_string(), ["started", "interrupted", "resumed", "completed"].map(String::from).to_vec()),
        );
        let history: Vec<String> = resumed.history().await.unwrap().iter().map(|r| r.agent.clone()).collect();
        let mut want: Vec<String> = (1..=10).map(|i| format!("s{i}")).collect();
        want.push("ten".to_string());
        assert_eq!(history, want, "{durability:?}: every step once in the history");
    }
}

/// An agent sleeping `ms` then returning its name, counting its starts in `calls[i]`.
fn sleeper(name: &str, i: usize, ms: u64, calls: Arc<Vec<AtomicUsize>>) -> AgentRef {
    let output = name.to_string();
    FnAgent::builder(name, move |_ctx| {
        let (calls, output) = (calls.clone(), output.clone());
        Box::pin(async move {
            calls[i].fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!(output))
        })
    })
    .output_key(name)
    .build()
}

/// A parallel of three slow agents, then `after`, which joins their outputs.
fn fan_out(calls: Arc<Vec<AtomicUsize>>) -> AgentRef {
    let branches = ["a", "b", "c"].iter().enumerate().map(|(i, n)| sleeper(n, i, 200, calls.clone()));
    let parallel = Parallel::builder().name("fan").sub_agents(branches).build().unwrap();
    let after_calls = calls.clone();
    let after = FnAgent::builder("after", move |ctx| {
        let calls = after_calls.clone();
        Box::pin(async move {
            calls[3].fetch_add(1, Ordering::SeqCst);
            let parts: Vec<String> =
                ["a", "b", "c"].iter().map(|k| ctx.input_as::<String>(k)).collect::<Result<_, _>>()?;
            Ok(json!(parts.join("+")))
        })
    })
    .input("a")
    .input("b")
    .input("c")
    .output_key("joined")
    .build();
    Sequence::builder().name("fan_then_join").sub_agents([parallel, after]).output_key("joined").build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_parallel_lets_its_branches_finish_and_starts_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sled(&dir);
    let calls = counters(4);
    let drain = DrainHandle::new();
    let run = tokio::spawn(
        fan_out(calls.clone())
            .invoke()
            .memory_id("fan-1")
            .store(store.clone())
            .drain_handle(drain.clone())
            .into_future(),
    );
    until("the three branches run", || counts(&calls)[..3] == [1, 1, 1]).await;
    drain.drain();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.result, RunResult::Drained);
    assert_eq!(counts(&calls), [1, 1, 1, 0], "the branches finished; `after` never started");
    let mut journaled = steps(&store, "fan-1").await;
    // The branches complete in any order; the parallel's own completion follows them.
    journaled[..3].sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        journaled,
        [
            ("root/0/0".to_string(), json!("a")),
            ("root/0/1".to_string(), json!("b")),
            ("root/0/2".to_string(), json!("c")),
            ("root/0".to_string(), Value::Null),
        ]
    );
    assert_eq!(status(&store, "fan-1").await, ("running".to_string(), vec!["started".into(), "interrupted".into()]));

    let resumed = outcome.resume().await.unwrap();
    assert_eq!(resumed.output(), Some(&json!("a+b+c")));
    assert_eq!(counts(&calls), [1, 1, 1, 1], "only `after` ran on resume");
    assert_eq!(status(&store, "fan-1").await.0, "completed");
}

/// A mapper over `xs` (max_concurrency 4) whose items are a sequence: `times_ten` (item 0 at once, the others
/// once `gate` opens) then `plus_one`; each stage counts its calls per item.
fn gated_mapper(
    stage1: Arc<Vec<AtomicUsize>>,
    stage2: Arc<Vec<AtomicUsize>>,
    gate: tokio::sync::watch::Receiver<bool>,
) -> AgentRef {
    let times_ten = FnAgent::builder("times_ten", move |ctx| {
        let (calls, mut gate) = (stage1.clone(), gate.clone());
        Box::pin(async move {
            let x: i64 = ctx.input_as("x")?;
            calls[x as usize].fetch_add(1, Ordering::SeqCst);
            if x != 0 {
                gate.wait_for(|open| *open).await.map_err(|e| ctx.fail(e.to_string()))?;
            }
            Ok(json!(x * 10))
        })
    })
    .input("x")
    .output_key("y")
    .build();
    let plus_one = FnAgent::builder("plus_one", move |ctx| {
        let calls = stage2.clone();
        Box::pin(async move {
            let (x, y): (i64, i64) = (ctx.input_as("x")?, ctx.input_as("y")?);
            calls[x as usize].fetch_add(1, Ordering::SeqCst);
            Ok(json!(y + 1))
        })
    })
    .input("x")
    .input("y")
    .output_key("z")
    .build();
    let per_item = Sequence::builder().name("per_item").sub_agents([times_ten, plus_one]).output_key("z").build();
    ParallelMapper::builder()
        .name("map")
        .sub_agent(per_item.unwrap())
        .items_key("xs")
        .item_key("x")
        .max_concurrency(4)
        .output_key("zs")
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_mapper_finishes_its_items_in_flight_starts_no_other_and_resumes_each_item_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = sled(&dir);
    let xs: Vec<i64> = (0..20).collect();
    let (stage1, stage2) = (counters(20), counters(20));
    let (open, gate) = tokio::sync::watch::channel(false);
    let system = gated_mapper(stage1.clone(), stage2.clone(), gate);
    let drain = DrainHandle::new();
    let request =
        system.invoke().input("xs", json!(xs)).memory_id("map-1").store(store.clone()).drain_handle(drain.clone());
    let run = tokio::spawn(request.into_future());
    // Items 0..3 start; item 0 completes, which starts item 4; the others wait at the gate.
    until("items 0..4 started", || counts(&stage1).iter().sum::<usize>() == 5).await;
    drain.drain();
    open.send(true).unwrap();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.result, RunResult::Drained);
    let mut first: Vec<usize> = vec![0; 20];
    first[..5].fill(1);
    assert_eq!(counts(&stage1), first, "items 0..4 ran their first stage; no other item started");
    let mut second: Vec<usize> = vec![0; 20];
    second[0] = 1;
    assert_eq!(counts(&stage2), second, "item 0 completed before the drain; items 1..4 hold their second stage");
    let stage1_steps = steps(&store, "map-1").await.into_iter().filter(|(p, _)| p == "root/0/0").count();
    assert_eq!(stage1_steps, 5, "the first stages in flight are journaled");
    assert_eq!(status(&store, "map-1").await.0, "running");

    let resumed = outcome.resume().await.unwrap();
    let expected: Vec<Value> = xs.iter().map(|x| json!(x * 10 + 1)).collect();
    assert_eq!(resumed.output(), Some(&Value::Array(expected)));
    assert_eq!(counts(&stage1), [1; 20], "every item's first stage ran once");
    assert_eq!(counts(&stage2), [1; 20], "every item's second stage ran once");
    assert!(resumed.state().layers().is_empty(), "{:?}", resumed.state().layers());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_after_a_drain_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = sled(&dir);
    let calls = counters(2);
    let finished = Arc::new(AtomicUsize::new(0));
    let (slow_calls, done) = (calls.clone(), finished.clone());
    let slow = FnAgent::builder("slow", move |_ctx| {
        let (calls, done) = (slow_calls.clone(), done.clone());
        Box::pin(async move {
            calls[0].fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(30)).await;
            done.fetch_add(1, Ordering::SeqCst);
            Ok(json!("late"))
        })
    })
    .output_key("out")
    .build();
    let next = sleeper("next", 1, 0, calls.clone());
    let system = Sequence::builder().name("cancelled").sub_agents([slow, next]).build().unwrap();
    let (drain, cancel) = (DrainHandle::new(), CancelHandle::new());
    let request = system
        .invoke()
        .memory_id("cancel-1")
        .store(store.clone())
        .drain_handle(drain.clone())
        .cancel_handle(cancel.clone());
    let run = tokio::spawn(request.into_future());
    until("`slow` runs", || calls[0].load(Ordering::SeqCst) == 1).await;
    drain.drain();
    // The drain waits for `slow`; the server's deadline then cancels.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!run.is_finished(), "the drain waits for the step in flight");
    let cancelled_at = Instant::now();
    cancel.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, AgentError::Cancelled), "{err:?}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(5), "the cancel did not wait for `slow`");
    assert_eq!(counts(&calls), [1, 0]);
    assert_eq!(finished.load(Ordering::SeqCst), 0, "`slow` was stopped");
    assert_eq!(
        status(&store, "cancel-1").await,
        ("cancelled".to_string(), vec!["started".to_string(), "cancelled".to_string()])
    );
    assert_eq!(store.run("cancel-1").await.unwrap().unwrap().status, RunStatus::Cancelled);
}

/// One handle drains every run it was given; a run given an already drained handle starts no step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_handle_drains_many_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = sled(&dir);
    let drain = DrainHandle::new();
    let calls: Vec<_> = (0..3).map(|_| counters(10)).collect();
    let runs: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let request = ten_steps(c.clone())
                .invoke()
                .input("acc", "start")
                .memory_id(format!("many-{i}"))
                .store(store.clone())
                .drain_handle(drain.clone());
            tokio::spawn(request.into_future())
        })
        .collect();
    until("every run is at s3", || calls.iter().all(|c| c[2].load(Ordering::SeqCst) == 1)).await;
    drain.drain();
    for (i, run) in runs.into_iter().enumerate() {
        assert_eq!(run.await.unwrap().unwrap().result, RunResult::Drained, "run {i}");
        assert_eq!(counts(&calls[i]), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], "run {i}");
        assert_eq!(status(&store, &format!("many-{i}")).await.0, "running");
    }
    // Started with a drained handle: it stops before its first step, and a resume runs it all.
    let late = counters(10);
    let outcome = ten_steps(late.clone())
        .invoke()
        .input("acc", "start")
        .memory_id("many-late")
        .store(store.clone())
        .drain_handle(drain.clone())
        .await
        .unwrap();
    assert_eq!(outcome.result, RunResult::Drained);
    assert_eq!(counts(&late), [0; 10]);
    let resumed = outcome.resume().await.unwrap();
    assert_eq!(resumed.output(), Some(&json!("start-s1-s2-s3-s4-s5-s6-s7-s8-s9-s10")));
    assert_eq!(counts(&late), [1; 10]);
}

/// A step that fails while the run drains: the error handler's retry is held like any new call, the run
/// drains, and the resume runs the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_decided_while_draining_waits_for_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = sled(&dir);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let flaky = FnAgent::builder("flaky", move |_ctx| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if n == 0 { Err(AgentError::failed("flaky", "root/0", "outage").into()) } else { Ok(json!("ok")) }
        })
    })
    .output_key("out")
    .build();
    let system = Sequence::builder()
        .name("retrying")
        .sub_agents([flaky])
        .output_key("out")
        .error_handler(RetryPolicy::new(3, Duration::ZERO))
        .build()
        .unwrap();
    let drain = DrainHandle::new();
    let run = tokio::spawn(
        system.invoke().memory_id("retry-1").store(store.clone()).drain_handle(drain.clone()).into_future(),
    );
    until("the first attempt runs", || calls.load(Ordering::SeqCst) == 1).await;
    drain.drain();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.result, RunResult::Drained);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the retry was not started");
    assert_eq!(status(&store, "retry-1").await.0, "running");
    let resumed = outcome.resume().await.unwrap();
    assert_eq!(resumed.output(), Some(&json!("ok")));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// Without a journal a drained run could not continue: the drain leaves it running to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_a_journal_is_not_drained() {
    let drain = DrainHandle::new();
    drain.drain();
    let calls = counters(10);
    let outcome = ten_steps(calls.clone()).invoke().input("acc", "start").drain_handle(drain).await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("start-s1-s2-s3-s4-s5-s6-s7-s8-s9-s10")));
    assert_eq!(counts(&calls), [1; 10]);
}
