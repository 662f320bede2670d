//! Human-in-the-loop: suspend, answer, resume — in process (no store configured: the registry keeps an
//! in-process checkpoint) and with counters proving that no completed agent runs twice.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentic::agents::Human;
use agentic::engine::ValueType;
use agentic::prelude::*;
use serde_json::{Map, Value, json};

/// Counts executions per agent name.
#[derive(Clone, Default)]
struct Counters(Arc<Mutex<HashMap<String, usize>>>);

impl Counters {
    fn get(&self, name: &str) -> usize {
        *self.0.lock().unwrap().get(name).unwrap_or(&0)
    }

    /// An agent reading `inputs`, producing `f(inputs)` into `out`, counting its executions.
    fn agent(
        &self,
        name: &str,
        inputs: &[&str],
        out: &str,
        f: impl Fn(&Map<String, Value>) -> String + Send + Sync + 'static,
    ) -> AgentRef {
        let counts = self.0.clone();
        let n = name.to_string();
        let f = Arc::new(f);
        FnAgent::builder(name, move |ctx| {
            let (counts, n, f) = (counts.clone(), n.clone(), f.clone());
            Box::pin(async move {
                *counts.lock().unwrap().entry(n).or_default() += 1;
                Ok(json!(f(ctx.inputs())))
            })
        })
        .inputs(inputs.iter().copied())
        .output_key(out)
        .build()
    }
}

fn s(m: &Map<String, Value>, k: &str) -> String {
    match m.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn human(name: &str, id: &str, out: &str) -> AgentRef {
    Human::builder(name, "Please review: {{ processed_data | default('') }}")
        .unwrap()
        .response_id(id)
        .inputs(Vec::<String>::new())
        .output_key(out)
        .build()
}

fn approval_flow(c: &Counters) -> AgentRef {
    let processor = c.agent("processor", &["input"], "processed_data", |m| format!("PROCESSED: {}", s(m, "input")));
    let finalizer = c.agent("finalizer", &["processed_data", "approval"], "final", |m| {
        format!("Final: {} | {}", s(m, "processed_data"), s(m, "approval"))
    });
    Sequence::builder()
        .name("approval")
        .sub_agents([processor, human("approver", "human-review", "approval"), finalizer])
        .output_key("final")
        .build()
        .unwrap()
}

#[tokio::test]
async fn sequence_suspends_at_the_human_step_and_resumes_with_the_answer() {
    let c = Counters::default();
    let flow = approval_flow(&c);
    let first = flow.invoke().input("input", "data").await.unwrap();
    assert!(first.is_suspended());
    let ids: Vec<&str> = first.pending().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["human-review"]);
    assert_eq!(first.pending()[0].prompt, "Please review: PROCESSED: data");
    assert_eq!(first.pending()[0].agent, "approver");

    // Re-invoking without an answer suspends again with the same ids.
    let again = first.resume().await.unwrap();
    assert_eq!(again.pending().iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["human-review"]);

    let done = again.resume().answer("human-review", "APPROVED").await.unwrap();
    assert_eq!(done.output(), Some(&json!("Final: PROCESSED: data | APPROVED")));
    assert_eq!(c.get("processor"), 1, "completed steps never re-run");
    assert_eq!(c.get("finalizer"), 1);

    // By memory id, in a fresh request (same process).
    let c = Counters::default();
    let flow = approval_flow(&c);
    let id = "approval-by-id";
    let out = flow.invoke().memory_id(id).input("input", "data").await.unwrap();
    assert!(out.is_suspended());
    let out = flow.resume(id).answer("human-review", "APPROVED").await.unwrap();
    assert_eq!(out.output(), Some(&json!("Final: PROCESSED: data | APPROVED")));
    assert_eq!(c.get("processor"), 1);
}

#[tokio::test]
async fn two_human_gates_resume_one_after_the_other() {
    let c = Counters::default();
    let processor = c.agent("processor", &["request"], "processed", |m| format!("PROCESSED: {}", s(m, "request")));
    let result = c.agent("result", &["processed", "manager", "legal"], "result", |m| {
        format!("Result: {} | {} | {}", s(m, "processed"), s(m, "manager"), s(m, "legal"))
    });
    let flow = Sequence::builder()
        .sub_agents([processor, human("manager", "manager", "manager"), human("legal", "legal", "legal"), result])
        .output_key("result")
        .build()
        .unwrap();
    let o = flow.invoke().input("request", "request").await.unwrap();
    assert_eq!(o.pending()[0].id, "manager");
    let o = o.resume().answer("manager", "Manager OK").await.unwrap();
    assert_eq!(o.pending().iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["legal"]);
    let o = o.resume().answer("legal", "Legal OK").await.unwrap();
    assert_eq!(o.output(), Some(&json!("Result: PROCESSED: request | Manager OK | Legal OK")));
    assert_eq!(c.get("processor"), 1);
}

#[tokio::test]
async fn nested_sequences_resume_at_the_exact_step() {
    let c = Counters::default();
    let a = c.agent("A", &[], "a", |_| "A_DONE".into());
    let b = c.agent("B", &["a"], "b", |_| "B_DONE".into());
    let cc = c.agent("C", &["b", "approval"], "c", |m| format!("C_DONE:{}", s(m, "approval")));
    let d = c.agent("D", &["c"], "d", |m| format!("D_DONE:{}", s(m, "c")));
    let inner =
        Sequence::builder().name("inner").sub_agents([b, human("gate", "gate", "approval"), cc]).build().unwrap();
    let flow = Sequence::builder().sub_agents([a, inner, d]).output_key("d").build().unwrap();
    let o = flow.invoke().await.unwrap();
    assert_eq!(o.pending()[0].id, "gate");
    let o = o.resume().answer("gate", "APPROVED").await.unwrap();
    assert_eq!(o.output(), Some(&json!("D_DONE:C_DONE:APPROVED")));
    for n in ["A", "B", "C", "D"] {
        assert_eq!(c.get(n), 1, "{n} ran once");
    }
}

#[tokio::test]
async fn a_parallel_sibling_finishes_before_the_run_suspends() {
    let c = Counters::default();
    let a = c.agent("A", &[], "a", |_| "A_DONE".into());
    let b = c.agent("B", &["approval"], "b", |m| format!("B_DONE:{}", s(m, "approval")));
    let cc = c.agent("C", &[], "c", |_| "C_DONE".into());
    let d = c.agent("D", &["b", "c"], "d", |m| format!("{}|{}", s(m, "b"), s(m, "c")));
    let left = Sequence::builder().name("left").sub_agents([a, human("gate", "gate", "approval"), b]).build().unwrap();
    let par = Parallel::builder().sub_agents([left, cc]).build().unwrap();
    let flow = Sequence::builder().sub_agents([par, d]).output_key("d").build().unwrap();
    let o = flow.invoke().await.unwrap();
    assert!(o.is_suspended());
    assert_eq!(o.state().get("c"), Some(&json!("C_DONE")), "the sibling branch finished before suspending");
    assert_eq!(c.get("C"), 1);
    let o = o.resume().answer("gate", "APPROVED").await.unwrap();
    assert_eq!(o.output(), Some(&json!("B_DONE:APPROVED|C_DONE")));
    for n in ["A", "B", "C", "D"] {
        assert_eq!(c.get(n), 1, "{n} ran once");
    }
}

#[tokio::test]
async fn a_loop_with_a_human_step_suspends_in_every_iteration() {
    let c = Counters::default();
    let iter = Arc::new(AtomicUsize::new(0));
    let it = iter.clone();
    let work = FnAgent::builder("work", move |_ctx| {
        let it = it.clone();
        Box::pin(async move { Ok(json!(format!("iter{}", it.fetch_add(1, Ordering::SeqCst) + 1))) })
    })
    .output_key("work")
    .build();
    let record = c.agent("record", &["work", "ok"], "done", |m| format!("DONE:{}:{}", s(m, "work"), s(m, "ok")));
    let lp = Loop::builder()
        .sub_agents([work, human("check", "check", "ok"), record])
        .max_iterations(2)
        .output_key("done")
        .build()
        .unwrap();
    let o = lp.invoke().await.unwrap();
    assert_eq!(o.pending()[0].id, "check");
    let o = o.resume().answer("check", "OK1").await.unwrap();
    assert_eq!(o.pending()[0].id, "check", "suspends again in iteration 2");
    assert_eq!(o.state().get("done"), Some(&json!("DONE:iter1:OK1")));
    let o = o.resume().answer("check", "OK2").await.unwrap();
    assert_eq!(o.output(), Some(&json!("DONE:iter2:OK2")));
    assert_eq!(iter.load(Ordering::SeqCst), 2, "work ran once per iteration");
    assert_eq!(c.get("record"), 2);
}

#[tokio::test]
async fn answers_are_used_once_and_unknown_ids_are_kept_for_later() {
    let c = Counters::default();
    let flow = approval_flow(&c);
    // An answer given up front is used by the human step: no suspension at all.
    let o = flow.invoke().input("input", "x").answer("human-review", json!("{\"ok\": true}")).await.unwrap();
    assert_eq!(o.output(), Some(&json!("Final: PROCESSED: x | {\"ok\":true}")), "JSON answers are parsed");
}

#[tokio::test]
async fn two_invocations_with_one_memory_id_never_run_at_once() {
    let slow = FnAgent::builder("slow", |_ctx| {
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            Ok(json!(1))
        })
    })
    .build();
    let flow = Sequence::builder().sub_agents([slow]).build().unwrap();
    let f2 = flow.clone();
    let first = tokio::spawn(async move { f2.invoke().memory_id("busy").await });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let err = flow.invoke().memory_id("busy").await.unwrap_err();
    assert_eq!(err.to_string(), "run `busy`: run is active: another invocation with this memory id is still running");
    first.await.unwrap().unwrap();
    flow.invoke().memory_id("busy").await.unwrap();
}

#[tokio::test]
async fn multi_turn_use_of_one_memory_id_accumulates_state_and_history() {
    let count = Compute::expression("count", "(turns | default(0)) + 1")
        .unwrap()
        .inputs(Vec::<String>::new())
        .output_key("turns")
        .build();
    let flow = Sequence::builder().sub_agents([count]).output_key("turns").build().unwrap();
    let o1 = flow.invoke().memory_id("chat-1").input("msg", "hi").await.unwrap();
    assert_eq!(o1.output(), Some(&json!(1)));
    let o2 = flow.invoke().memory_id("chat-1").input("msg", "again").await.unwrap();
    assert_eq!(o2.output(), Some(&json!(2)));
    assert_eq!(o2.state().get("msg"), Some(&json!("again")));
    let history = o2.history().await.unwrap();
    assert_eq!(history.iter().filter(|r| r.agent == "count").count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_mode_human_waits_in_process_for_the_answer() {
    use agentic::agents::HumanMode;
    use agentic::engine::Registry;
    let registry = Registry::with_capacity(8);
    let ask = Human::builder("ask", "Your name?")
        .unwrap()
        .response_id("name")
        .mode(HumanMode::Pending)
        .output_key("who")
        .build();
    let greet = Compute::template("greet", "Hello {{ who }}").unwrap().output_key("greeting").build();
    let flow = Sequence::builder().sub_agents([ask, greet]).output_key("greeting").build().unwrap();
    let reg2 = registry.clone();
    let run = tokio::spawn(async move { flow.invoke().memory_id("p1").registry(reg2).await });
    // Answering an unknown run is an error; the live run gets the answer.
    while !registry.is_active("p1") {
        tokio::task::yield_now().await;
    }
    assert!(registry.answer("nope", "name", json!("x")).is_err());
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    registry.answer("p1", "name", json!("Ada")).unwrap();
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.output(), Some(&json!("Hello Ada")));
}

#[tokio::test]
async fn a_stored_value_that_no_longer_fits_its_type_fails_the_resume() {
    let store = MemoryStore::new();
    let approve = human("approve", "ok", "approval");
    let use_score = Compute::expression("use", "score * 2")
        .unwrap()
        .input(InputSpec::new("score").typed(ValueType::Number))
        .output_key("doubled")
        .build();
    let flow = Sequence::builder().sub_agents([approve, use_score]).build().unwrap();
    let o = flow.invoke().memory_id("typed").store(store.clone()).input("score", 0.5).await.unwrap();
    assert!(o.is_suspended());
    // Tamper with the stored state: the journal now holds a string where a number is declared.
    let mut run = store.run("typed").unwrap();
    let bad = agentic::engine::StepRecord {
        run_id: "typed".into(),
        seq: run.records.len() as u64 + 1,
        agent_path: "root/9".into(),
        delta: vec![("score".into(), json!("high"))],
        planner_states: vec![],
        invocation: None,
        async_started: false,
        failed: false,
        item: None,
        item_end: false,
        bindings: None,
        calls: Vec::new(),
    };
    run.records.push(bad.clone());
    agentic::engine::CheckpointStore::append(&store, bad).await.unwrap();
    let err = flow.resume("typed").store(store.clone()).answer("ok", "yes").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "run `typed`: stored value of `score` (\"high\") no longer fits its declared type number (agent `use`); \
         refusing to resume"
    );
}

#[tokio::test]
async fn the_registry_evicts_the_least_recently_used_in_process_memory() {
    use agentic::engine::Registry;
    let registry = Registry::with_capacity(2);
    let count = Compute::expression("count", "(turns | default(0)) + 1")
        .unwrap()
        .inputs(Vec::<String>::new())
        .output_key("turns")
        .build();
    let flow = Sequence::builder().sub_agents([count]).output_key("turns").build().unwrap();
    for id in ["a", "b", "a", "c"] {
        flow.invoke().memory_id(id).registry(registry.clone()).await.unwrap();
    }
    assert_eq!(registry.kept_len(), 2);
    // `b` was least recently used: evicted, it starts over; `a` kept its memory.
    let a = flow.invoke().memory_id("a").registry(registry.clone()).await.unwrap();
    assert_eq!(a.output(), Some(&json!(3)));
    let b = flow.invoke().memory_id("b").registry(registry.clone()).await.unwrap();
    assert_eq!(b.output(), Some(&json!(1)));
    registry.evict("a");
    let a = flow.invoke().memory_id("a").registry(registry.clone()).await.unwrap();
    assert_eq!(a.output(), Some(&json!(1)), "evicted explicitly");
}
