//! Forking a run (`agentic::engine::fork`, time travel) on a sled store on disk: the fork holds the first N
//! steps, a resume of it runs what came after only (the agents that completed by step N never run again) and
//! ends as the original did, and the original is only read. A sequence, a loop, a parallel block, mappers
//! (items in progress at the fork point), an async agent and a human step, forked at every step.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::engine::{ForkError, ForkOrigin, InputSpec, RunRecord, RunStatus, StepRecord, StoreRef};
use agentic::prelude::*;
use serde_json::{Map, Value, json};

// completions: the completions of an agent a journal holds.
use crate::common;

/// Counts executions per agent name.
#[derive(Clone, Default)]
struct Counters(Arc<Mutex<BTreeMap<String, usize>>>);

impl Counters {
    fn get(&self, name: &str) -> usize {
        *self.0.lock().unwrap().get(name).unwrap_or(&0)
    }

    fn all(&self) -> BTreeMap<String, usize> {
        self.0.lock().unwrap().clone()
    }

    /// The names that ran, sorted.
    fn ran(&self) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }

    /// An agent reading `inputs` (an input `k=v` has the default `v`), writing `f(inputs)` to `out` after
    /// sleeping `ms`, counting its executions.
    fn agent(
        &self,
        name: &str,
        inputs: &[&str],
        out: &str,
        ms: u64,
        f: impl Fn(&Map<String, Value>) -> Value + Send + Sync + 'static,
    ) -> AgentRef {
        let counts = self.0.clone();
        let n = name.to_string();
        let f = Arc::new(f);
        let specs: Vec<InputSpec> = inputs
            .iter()
            .map(|i| match i.split_once('=') {
                Some((k, v)) => InputSpec::new(k).default_value(serde_json::from_str(v).unwrap()),
                None => InputSpec::new(*i),
            })
            .collect();
        FnAgent::builder(name, move |ctx| {
            let (counts, n, f) = (counts.clone(), n.clone(), f.clone());
            Box::pin(async move {
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                *counts.lock().unwrap().entry(n).or_default() += 1;
                Ok(f(ctx.inputs()))
            })
        })
        .inputs(specs)
        .output_key(out)
        .build()
    }
}

fn int(m: &Map<String, Value>, k: &str) -> i64 {
    m.get(k).and_then(Value::as_i64).unwrap_or_else(|| panic!("input `{k}` in {m:?}"))
}

/// A sled store in a new directory (kept alive by the returned guard).
fn sled() -> (tempfile::TempDir, StoreRef) {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap().store_ref();
    (dir, store)
}

/// The record and the journal of a run.
async fn snapshot(store: &StoreRef, id: &str) -> (Option<RunRecord>, Vec<StepRecord>) {
    (store.run_dyn(id).await.unwrap(), store.records_dyn(id).await.unwrap())
}

/// a1 writes v1 = 1; a_i writes v_i = 2 * v_(i-1) + i; the result is v10.
fn ten_steps(c: &Counters) -> AgentRef {
    let agents: Vec<AgentRef> = (1..=10)
        .map(|i| {
            let prev = format!("v{}", i - 1);
            let input = prev.clone();
            if i == 1 {
                c.agent("a1", &[], "v1", 0, |_| json!(1))
            } else {
                c.agent(&format!("a{i}"), &[input.as_str()], &format!("v{i}"), 0, move |m| json!(2 * int(m, &prev) + i))
            }
        })
        .collect();
    Sequence::builder().name("ten").sub_agents(agents).output_key("v10").build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_forked_at_step_4_runs_steps_5_to_10_only_and_the_original_is_untouched() {
    let (_dir, store) = sled();
    let c = Counters::default();
    let out = ten_steps(&c).invoke().memory_id("orig").store_ref(store.clone()).await.unwrap();
    let expected = out.output().cloned().unwrap();
    assert_eq!(c.all().values().copied().collect::<Vec<_>>(), [1; 10], "each agent ran once");
    let before = snapshot(&store, "orig").await;
    // Steps 1 to 10 are a1 to a10, step 11 the sequence's completion.
    let agents: Vec<&str> = before.1.iter().filter_map(|r| r.invocation.as_ref()).map(|i| i.agent.as_str()).collect();
    assert_eq!(agents, ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "ten"]);

    let rec = agentic::engine::fork(&store, "orig", 4, Some("fork".into())).await.unwrap();
    assert_eq!(rec.forked_from, Some(ForkOrigin { run_id: "orig".into(), at_seq: 4 }));
    assert_eq!(rec.status, RunStatus::Running);
    assert_eq!(snapshot(&store, "orig").await, before, "forking only reads the original");

    let c2 = Counters::default();
    let out = ten_steps(&c2).resume("fork").store_ref(store.clone()).await.unwrap();
    assert_eq!(out.output(), Some(&expected));
    let mut ran = c2.ran();
    ran.sort_by_key(|n| n[1..].parse::<u32>().unwrap());
    assert_eq!(ran, ["a5", "a6", "a7", "a8", "a9", "a10"], "only the steps after the fork point run");
    assert!(c2.all().values().all(|&n| n == 1));
    assert_eq!(snapshot(&store, "orig").await, before, "running the fork leaves the original as it was");

    // The fork's journal: the original's first four steps under its own id, then its own.
    let (run, records) = snapshot(&store, "fork").await;
    let run = run.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.detail, expected);
    assert_eq!(records.len(), before.1.len());
    for (f, o) in records.iter().zip(&before.1).take(4) {
        assert_eq!(StepRecord { run_id: "orig".into(), ..f.clone() }, *o);
    }
    assert!(records[4..].iter().all(|r| r.run_id == "fork"));
    let ms: Vec<(&str, u64)> = run.milestones.iter().map(|m| (m.kind.as_str(), m.seq)).collect();
    assert_eq!(ms, [("started", 0), ("forked", 4), ("resumed", 4), ("completed", 11)]);
    assert_eq!(run.milestones[1].forked_from.as_deref(), Some("orig"));
    assert_eq!(run.forked_from, Some(ForkOrigin { run_id: "orig".into(), at_seq: 4 }));
}

/// Runs `build`'s system on a sled store, then forks it after every step k (0 to the last) and resumes each
/// fork with a fresh copy of the system: the same result, the original untouched, and every agent runs as
/// often as in the original minus its completions in the first k steps. A fork at 0 has no inputs: its resume
/// is given them again.
async fn fork_at_every_step(name: &str, build: impl Fn(&Counters) -> AgentRef, inputs: Value, expected: Value) {
    let Value::Object(inputs) = inputs else { panic!("inputs must be an object") };
    let (_dir, store) = sled();
    let c = Counters::default();
    let out = build(&c).invoke().memory_id(name).inputs(inputs.clone()).store_ref(store.clone()).await.unwrap();
    assert_eq!(out.output(), Some(&expected), "{name}: original run");
    let full = c.all();
    let before = snapshot(&store, name).await;
    let records = &before.1;
    assert!(records.len() > 3, "{name}: journaled {} steps", records.len());
    for k in 0..=records.len() {
        let id = format!("{name}@{k}");
        agentic::engine::fork(&store, name, k as u64, Some(id.clone())).await.unwrap();
        let c2 = Counters::default();
        let req = build(&c2).resume(id.clone()).store_ref(store.clone());
        let req = if k == 0 { req.inputs(inputs.clone()) } else { req };
        let out = req.await.unwrap_or_else(|e| panic!("{name}: fork at step {k}: {e}"));
        assert_eq!(out.output(), Some(&expected), "{name}: fork at step {k}");
        for (agent, total) in &full {
            let journaled = common::completions(&records[..k], agent);
            assert_eq!(c2.get(agent) + journaled, *total, "{name}: `{agent}` in the fork at step {k}");
        }
    }
    assert_eq!(snapshot(&store, name).await, before, "{name}: the original is unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_forks_at_every_step() {
    let build = |c: &Counters| {
        let first = c.agent("first", &["x"], "y", 0, |m| json!(int(m, "x") + 1));
        Sequence::builder().name("seq").sub_agents([first, ten_steps(c)]).output_key("v10").build().unwrap()
    };
    fork_at_every_step("seq", build, json!({"x": 1}), json!(2036)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_forks_at_every_step() {
    let build = |c: &Counters| {
        let tick = c.agent("tick", &["n=0"], "n", 0, |m| json!(int(m, "n") + 1));
        let log = c.agent("log", &["n", "log=[]"], "log", 0, |m| {
            let mut log = m["log"].as_array().cloned().unwrap_or_default();
            log.push(m["n"].clone());
            json!(log)
        });
        Loop::builder()
            .name("lp")
            .sub_agents([tick, log])
            .max_iterations(10)
            .exit_when(|v, _| v.get("n").and_then(Value::as_i64) >= Some(4))
            .output_key("log")
            .build()
            .unwrap()
    };
    fork_at_every_step("loop", build, json!({"start": true}), json!([1, 2, 3])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_block_forks_at_every_step_even_mid_batch() {
    // The branches finish in the reverse order of their dispatch: a fork point between two of them leaves
    // the others in flight, and they run again.
    let build = |c: &Counters| {
        let agents: Vec<AgentRef> = (0..5)
            .map(|i| c.agent(&format!("w{i}"), &[], &format!("k{i}"), 5 * (5 - i as u64), move |_| json!(i)))
            .collect();
        let sum = |v: &ScopeView| Ok(json!((0..5).filter_map(|i| v.get(&format!("k{i}"))?.as_i64()).sum::<i64>()));
        let block = Parallel::builder().name("block").sub_agents(agents).output(sum).output_key("sum").build().unwrap();
        let after = c.agent("after", &["sum"], "out", 0, |m| json!(int(m, "sum") * 10));
        Sequence::builder().name("par").sub_agents([block, after]).output_key("out").build().unwrap()
    };
    fork_at_every_step("parallel", build, json!({"go": 1}), json!(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapper_forks_at_every_step_with_items_in_progress() {
    // Each item runs a sequence of two agents in its own layer; two items at a time.
    let build = |c: &Counters| {
        let upper = c.agent("upper", &["name"], "up", 0, |m| json!(m["name"].as_str().unwrap().to_uppercase()));
        let greet = c.agent("greet", &["up"], "greeting", 0, |m| json!(format!("hi {}", m["up"].as_str().unwrap())));
        let per_item =
            Sequence::builder().name("per_item").sub_agents([upper, greet]).output_key("greeting").build().unwrap();
        let mapper = ParallelMapper::builder()
            .name("map")
            .sub_agent(per_item)
            .items_key("names")
            .item_key("name")
            .max_concurrency(2)
            .output_key("greetings")
            .build()
            .unwrap();
        let count = c.agent("count", &["greetings"], "out", 0, |m| json!(m["greetings"].as_array().unwrap().len()));
        Sequence::builder().name("mapped").sub_agents([mapper, count]).output_key("greetings").build().unwrap()
    };
    fork_at_every_step(
        "mapper",
        build,
        json!({"names": ["ann", "bo", "cy", "di"]}),
        json!(["hi ANN", "hi BO", "hi CY", "hi DI"]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_agent_started_before_the_fork_point_and_finished_after_it_runs_again() {
    let build = |c: &Counters| {
        let side = FnAgent::builder("side", {
            let c = c.clone();
            move |_ctx| {
                let c = c.clone();
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    *c.0.lock().unwrap().entry("side".into()).or_default() += 1;
                    Ok(json!("S"))
                })
            }
        })
        .output_key("side")
        .asynchronous(true)
        .build();
        let mid = c.agent("mid", &[], "mid", 0, |_| json!("M"));
        let mid2 = c.agent("mid2", &["mid"], "mid2", 0, |m| json!(format!("{}2", m["mid"].as_str().unwrap())));
        let end = c.agent("end", &["side", "mid2"], "out", 0, |m| {
            json!(format!("{}+{}", m["side"].as_str().unwrap(), m["mid2"].as_str().unwrap()))
        });
        Sequence::builder().name("with_async").sub_agents([side, mid, mid2, end]).output_key("out").build().unwrap()
    };
    fork_at_every_step("async", build, json!({"go": 1}), json!("S+M2")).await;
}

/// prep → a human step (`ask`) → finish.
fn with_human(c: &Counters) -> AgentRef {
    let prep = c.agent("prep", &["input"], "prepared", 0, |m| json!(format!("P({})", m["input"].as_str().unwrap())));
    let ask = Human::builder("ask", "Approve {{ prepared }}?").unwrap().response_id("ask").output_key("answer").build();
    let finish = c.agent("finish", &["prepared", "answer"], "out", 0, |m| {
        json!(format!("{} {}", m["prepared"].as_str().unwrap(), m["answer"].as_str().unwrap()))
    });
    Sequence::builder().name("approve").sub_agents([prep, ask, finish]).output_key("out").build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_before_the_human_step_asks_again_and_after_it_keeps_the_answer() {
    let (_dir, store) = sled();
    let c = Counters::default();
    let out = with_human(&c).invoke().memory_id("h").input("input", "x").store_ref(store.clone()).await.unwrap();
    assert_eq!(out.pending()[0].id, "ask");
    // A fork of the suspended run, before its human step (after the inputs, step 1): it asks again.
    agentic::engine::fork(&store, "h", 1, Some("h-early".into())).await.unwrap();
    let out = out.resume().answer("ask", "yes").await.unwrap();
    assert_eq!(out.output(), Some(&json!("P(x) yes")));
    let before = snapshot(&store, "h").await;
    let answered_at = before.1.iter().find(|r| r.agent_path == "root/1").map(|r| r.seq).unwrap();

    let c2 = Counters::default();
    let o = with_human(&c2).resume("h-early").store_ref(store.clone()).await.unwrap();
    assert_eq!(o.pending().iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["ask"], "asked again");
    assert_eq!(c2.get("prep"), 1, "prep came after the fork point");
    let o = o.resume().answer("ask", "no").await.unwrap();
    assert_eq!(o.output(), Some(&json!("P(x) no")), "the fork's answer, not the original's");
    assert_eq!((c2.get("prep"), c2.get("finish")), (1, 1));

    // After the human step: its answer is in the copied journal, nothing is asked.
    agentic::engine::fork(&store, "h", answered_at, Some("h-late".into())).await.unwrap();
    let c3 = Counters::default();
    let o = with_human(&c3).resume("h-late").store_ref(store.clone()).await.unwrap();
    assert_eq!(o.output(), Some(&json!("P(x) yes")));
    assert_eq!(c3.ran(), ["finish"]);
    // Just before it: the run is where it was when it suspended, and asks again.
    agentic::engine::fork(&store, "h", answered_at - 1, Some("h-before".into())).await.unwrap();
    let o = with_human(&Counters::default()).resume("h-before").store_ref(store.clone()).await.unwrap();
    assert_eq!(o.pending()[0].id, "ask");
    assert_eq!(snapshot(&store, "h").await, before, "the original is unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_are_refused_with_what_is_wrong() {
    let (_dir, store) = sled();
    ten_steps(&Counters::default()).invoke().memory_id("orig").store_ref(store.clone()).await.unwrap();
    let before = snapshot(&store, "orig").await;
    let err = agentic::engine::fork(&store, "orig", 12, Some("f".into())).await.unwrap_err();
    assert!(matches!(err, ForkError::BeyondEnd { at_seq: 12, last_seq: 11, .. }), "{err:?}");
    assert_eq!(err.to_string(), "cannot fork run `orig` at step 12: it has 11 steps (fork at 0 to 11)");
    let err = agentic::engine::fork(&store, "nope", 1, Some("f".into())).await.unwrap_err();
    assert_eq!(err.to_string(), "no run `nope` in the store");
    agentic::engine::fork(&store, "orig", 3, Some("f".into())).await.unwrap();
    let err = agentic::engine::fork(&store, "orig", 2, Some("f".into())).await.unwrap_err();
    assert_eq!(err.to_string(), "run id `f` is already used in the store");
    assert_eq!(store.records_dyn("f").await.unwrap().len(), 3, "the refused fork wrote nothing");
    let err = agentic::engine::fork(&store, "orig", 2, Some("orig".into())).await.unwrap_err();
    assert!(matches!(err, ForkError::IdTaken(_)), "{err:?}");
    assert_eq!(snapshot(&store, "orig").await, before);
    // A fork of a fork names its own origin.
    let rec = agentic::engine::fork(&store, "f", 2, Some("ff".into())).await.unwrap();
    assert_eq!(rec.forked_from, Some(ForkOrigin { run_id: "f".into(), at_seq: 2 }));
}
