//! The runtime's fault tolerance and its run-level control, through the public API only: a panicking agent
//! is a failure its composite's error handler can retry (and an unhandled one fails its run, not the process);
//! a panicking planner restarts from the run's journal without re-running completed steps; a hundred
//! concurrent writers get one gap-free sequence of scope writes; a running run is answered and cancelled by
//! its id from another task (`Registry`).

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::agents::HumanMode;
use agentic::engine::{Action, Completion, Composite, Planner, PlanningContext};
use agentic::engine::{Registry, RunEvent, RunStatus};
use agentic::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An agent that panics (`boom on first call`) on its first call and returns `"ok"` from then on, counting its
/// calls; its result goes to `r`.
fn panics_once(name: &str, calls: Arc<AtomicUsize>) -> AgentRef {
    FnAgent::builder(name, move |_ctx| {
        let calls = calls.clone();
        Box::pin(async move {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("boom on first call");
            }
            Ok(json!("ok"))
        })
    })
    .output_key("r")
    .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_agent_is_retried_by_the_error_handler_and_both_attempts_are_in_the_history() {
    let calls = Arc::new(AtomicUsize::new(0));
    let flow = Sequence::builder()
        .name("retrying")
        .sub_agents([panics_once("panicky", calls.clone())])
        .output_key("r")
        .error_handler(RetryPolicy::new(2, Duration::ZERO))
        .build()
        .unwrap();

    let outcome = flow.invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("ok")));
    assert_eq!(outcome.state().get("r"), Some(&json!("ok")));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one panic, one retry that succeeded");

    let history = outcome.history().await.unwrap();
    let attempts: Vec<_> = history.iter().filter(|r| r.agent == "panicky").collect();
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    let (first, second) = (attempts[0], attempts[1]);
    assert_eq!(first.attempt, 1);
    assert_eq!(first.path, "root/0");
    let error = first.error.as_deref().unwrap_or_else(|| panic!("attempt 1 has no error: {first:#?}"));
    assert!(error.contains("boom on first call"), "attempt 1's error: {error}");
    assert_eq!(first.output, Value::Null);
    assert_eq!(second.attempt, 2);
    assert_eq!(second.path, "root/0");
    assert_eq!(second.output, json!("ok"));
    assert_eq!(second.error, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhandled_panic_fails_its_run_only_and_names_the_agent_its_path_and_the_message() {
    let calls = Arc::new(AtomicUsize::new(0));
    let failing = Sequence::builder()
        .name("failing")
        .sub_agents([panics_once("panicky", calls.clone())])
        .output_key("r")
        .build()
        .unwrap();

    // An independent run in the same process, at the same time.
    let slow_step = FnAgent::builder("slow_step", |ctx| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(json!(format!("{}-slow", ctx.input_as::<String>("word")?)))
        })
    })
    .input("word")
    .output_key("slow")
    .build();
    let shout = Compute::expression("shout", "slow | upper").unwrap().output_key("loud").build();
    let healthy =
        Sequence::builder().name("healthy").sub_agents([slow_step, shout]).output_key("loud").build().unwrap();

    let bad_run = tokio::spawn(async move { failing.invoke().await });
    let good_run = tokio::spawn(async move { healthy.invoke().input("word", "calm").await });
    let (bad, good) = (bad_run.await, good_run.await);

    let err = bad.expect("the panic stays inside the run: its task did not panic").unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("`panicky`"), "names the agent: {shown}");
    assert!(shown.contains("(root/0)"), "names the path: {shown}");
    assert!(shown.contains("boom on first call"), "carries the panic message: {shown}");
    assert_eq!(err.agent_path(), Some("root/0"));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no handler: not retried");

    let good = good.unwrap().unwrap();
    assert_eq!(good.output(), Some(&json!("CALM-SLOW")));
    assert_eq!(good.state().get("slow"), Some(&json!("calm-slow")));
}

/// Set by the first `next_action` of [`OneByOne`], which panics then: the planner crashes once per process.
static PLANNER_PANICKED: AtomicBool = AtomicBool::new(false);

/// Calls its sub-agents one after the other and finishes with the list of their outputs. The first
/// `next_action` (after the first completion) panics once.
#[derive(Debug, Default, Serialize, Deserialize)]
struct OneByOne {
    next: usize,
    outputs: Vec<Value>,
}

impl Planner for OneByOne {
    fn first_action(&mut self, _ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        self.next = 1;
        Ok(Action::call(0))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        if !PLANNER_PANICKED.swap(true, Ordering::SeqCst) {
            panic!("planner crashed after the first completion");
        }
        self.outputs.push(done.output.clone());
        if self.next == ctx.agents().len() {
            return Ok(Action::DoneWith(Value::Array(self.outputs.clone())));
        }
        let i = self.next;
        self.next += 1;
        Ok(Action::call(i))
    }

    fn execution_state(&self) -> Value {
        serde_json::to_value(self).unwrap()
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        *self = serde_json::from_value(state).map_err(|e| e.to_string())?;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_planner_restarts_from_the_journal_without_re_running_completed_steps() {
    let counters: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let agents: Vec<AgentRef> = counters
        .iter()
        .enumerate()
        .map(|(i, counter)| {
            let counter = counter.clone();
            FnAgent::builder(format!("step{i}"), move |_ctx| {
                let counter = counter.clone();
                Box::pin(async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(json!(i))
                })
            })
            .output_key(format!("out{i}"))
            .build()
        })
        .collect();
    let system = Composite::builder("one_by_one", "custom", OneByOne::default).sub_agents(agents).build().unwrap();

    let store = MemoryStore::new();
    let outcome = system.invoke().memory_id("actors-planner-restart").store(store.clone()).await.unwrap();
    assert!(PLANNER_PANICKED.load(Ordering::SeqCst), "the planner did panic");
    assert_eq!(outcome.output(), Some(&json!([0, 1, 2])));
    for (i, counter) in counters.iter().enumerate() {
        assert_eq!(outcome.state().get(&format!("out{i}")), Some(&json!(i)));
        assert_eq!(counter.load(Ordering::SeqCst), 1, "step{i} ran exactly once");
    }
    let record = store.run("actors-planner-restart").unwrap().record.unwrap();
    assert_eq!(record.status, RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_parallel_writers_get_one_gap_free_sequence_of_writes() {
    let seqs = Arc::new(Mutex::new(Vec::<u64>::new()));
    let writers: Vec<AgentRef> = (0..100u64)
        .map(|i| {
            let seqs = seqs.clone();
            FnAgent::builder(format!("writer{i}"), move |ctx| {
                let seqs = seqs.clone();
                Box::pin(async move {
                    for j in 0..10u64 {
                        let seq = ctx.run().scope().write(vec![(format!("k{i}_{j}"), json!(i * 10 + j))]).await?;
                        seqs.lock().unwrap().push(seq);
                    }
                    Ok(Value::Null)
                })
            })
            .build()
        })
        .collect();
    let system = Parallel::builder().name("writers").sub_agents(writers).build().unwrap();

    let outcome = system.invoke().await.unwrap();
    let state = outcome.state();
    for i in 0..100u64 {
        for j in 0..10u64 {
            assert_eq!(state.get(&format!("k{i}_{j}")), Some(&json!(i * 10 + j)), "k{i}_{j}");
        }
    }
    assert_eq!(state.len(), 1000, "the writers' keys and nothing else");
    let mut seqs = seqs.lock().unwrap().clone();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=1000).collect::<Vec<u64>>(), "one write, one sequence number, no gaps, no repeats");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_is_answered_by_id_from_another_task() {
    const RUN_ID: &str = "actors-answered-by-id";
    let ask = Human::builder("approver", "Ship the order?")
        .unwrap()
        .response_id("ship-approval")
        .mode(HumanMode::Pending)
        .output_key("approval")
        .build();
    let ship = FnAgent::builder("ship", |ctx| {
        Box::pin(async move { Ok(json!({"shipped_with": ctx.input("approval").cloned()})) })
    })
    .input("approval")
    .output_key("shipment")
    .build();
    let flow = Sequence::builder().name("pending_flow").sub_agents([ask, ship]).output_key("shipment").build().unwrap();

    let run = tokio::spawn(async move { flow.invoke().memory_id(RUN_ID).await });
    let answer = json!({"approved": true, "by": "-5 Ada"});
    let answer2 = answer.clone();
    let answerer = tokio::spawn(async move {
        loop {
            // Until the run is registered and live; an answer given before the human step asks is kept.
            if Registry::global().is_active(RUN_ID)
                && Registry::global().answer(RUN_ID, "ship-approval", answer2.clone()).is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    tokio::time::timeout(Duration::from_secs(30), answerer).await.expect("the run became active").unwrap();
    let outcome =
        tokio::time::timeout(Duration::from_secs(30), run).await.expect("the answer resumed the run").unwrap().unwrap();
    assert!(!outcome.is_suspended());
    assert_eq!(outcome.output(), Some(&json!({"shipped_with": answer})));
    assert_eq!(outcome.state().get("approval"), Some(&answer));
    assert!(!Registry::global().is_active(RUN_ID), "a returned run is no longer active");
    let err = Registry::global().answer(RUN_ID, "ship-approval", json!("late")).unwrap_err();
    assert!(matches!(err, AgentError::Run { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_is_cancelled_by_id_from_another_task() {
    const RUN_ID: &str = "actors-cancelled-by-id";
    let woke = Arc::new(AtomicBool::new(false));
    let woke2 = woke.clone();
    let sleeper = FnAgent::builder("sleeper", move |_ctx| {
        let woke = woke2.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            woke.store(true, Ordering::SeqCst);
            Ok(json!("woke"))
        })
    })
    .output_key("woke")
    .build();
    let flow = Sequence::builder().name("sleepy").sub_agents([sleeper]).output_key("woke").build().unwrap();

    let run = tokio::spawn(async move { flow.invoke().memory_id(RUN_ID).await });
    let canceller = tokio::spawn(async move {
        loop {
            // Until the run is registered and live.
            if Registry::global().cancel(RUN_ID).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    tokio::time::timeout(Duration::from_secs(30), canceller).await.expect("the run became active").unwrap();
    let result = tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .expect("the cancelled run returned within 2 s")
        .expect("the run's task did not panic");
    match result {
        Err(AgentError::Cancelled) => {}
        Err(other) => panic!("expected AgentError::Cancelled, got {other:?}"),
        Ok(outcome) => panic!("expected AgentError::Cancelled, the run completed with {:?}", outcome.output()),
    }
    assert!(!woke.load(Ordering::SeqCst), "the sleeping agent was stopped, it never finished");
    assert!(!Registry::global().is_active(RUN_ID), "a cancelled run is no longer active");

    for id in ["actors-no-such-run", RUN_ID] {
        match Registry::global().cancel(id) {
            Err(AgentError::Run { run_id, message }) => {
                assert_eq!(run_id, id);
                assert!(message.contains("not running"), "{message}");
            }
            other => panic!("cancelling `{id}`: expected AgentError::Run, got {other:?}"),
        }
    }
}

/// A handler that writes the missing input and retries: the run completes with the written value, and a
/// resumed run does not ask the handler again (the repair and the retried call are journaled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_repairs_a_missing_input_and_a_resumed_run_does_not_ask_it_again() {
    // `gate` needs `x`, then waits for a human before it finishes: the run suspends with the retry in flight.
    let gate = || {
        FnAgent::builder("gate", |ctx| {
            Box::pin(async move {
                let x: i64 = ctx.input_as("x")?;
                match ctx.human().take("go").await {
                    Some(answer) => Ok(json!(format!("{x}:{}", answer.as_str().unwrap_or("?")))),
                    None => Err(ctx.human().suspend("go", "go on?")),
                }
            })
        })
        .input("x")
        .output_key("out")
        .build()
    };
    let asked = Arc::new(AtomicUsize::new(0));
    let system = |asked: Arc<AtomicUsize>| {
        Sequence::builder()
            .name("repairing")
            .sub_agents([gate()])
            .output_key("out")
            .error_handler(move |ctx: &agentic::engine::ErrorContext<'_>| {
                asked.fetch_add(1, Ordering::SeqCst);
                assert_eq!(ctx.error.kind(), "missing_argument");
                agentic::engine::Recovery::RetryWith { writes: vec![("x".into(), json!(5))], after: Duration::ZERO }
            })
            .build()
            .unwrap()
    };
    let store = MemoryStore::new();
    let first = system(asked.clone()).invoke().memory_id("repair-resume").store(store.clone()).await.unwrap();
    assert!(first.is_suspended(), "{:?}", first.result);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // The system built again, as another process would: the journal holds the repair and the retried call.
    let second = system(asked.clone()).resume("repair-resume").store(store.clone()).answer("go", "yes").await.unwrap();
    assert_eq!(second.output(), Some(&json!("5:yes")));
    assert_eq!(second.state().get("x"), Some(&json!(5)));
    assert_eq!(asked.load(Ordering::SeqCst), 1, "the handler was not asked again");
    let history = second.history().await.unwrap();
    let gates: Vec<u32> = history.iter().filter(|r| r.agent == "gate").map(|r| r.attempt).collect();
    assert_eq!(gates, [2], "the completed invocation is the retry");
}

/// A subscriber joins a running run's event group through the registry, from another task, and receives the
/// run's events from then on, ending with its completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_is_watched_by_id_from_another_task() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let step = |name: &str, gate: Option<Arc<tokio::sync::Notify>>| {
        let output = name.to_string();
        FnAgent::builder(name, move |_ctx| {
            let (gate, output) = (gate.clone(), output.clone());
            Box::pin(async move {
                if let Some(gate) = gate {
                    gate.notified().await;
                }
                Ok(json!(output))
            })
        })
        .output_key(format!("out_{name}"))
        .build()
    };
    let flow = Sequence::builder()
        .name("watched")
        .sub_agents([step("first", Some(gate.clone())), step("second", None)])
        .output_key("out_second")
        .build()
        .unwrap();
    let run = tokio::spawn(async move { flow.invoke().memory_id("watched-1").await });
    let registry = Registry::global();
    let mut events = loop {
        match registry.subscribe("watched-1").await {
            Ok(events) => break events,
            Err(_) => tokio::task::yield_now().await,
        }
    };
    gate.notify_one();
    let mut seen = Vec::new();
    while let Some(event) = events.recv().await {
        seen.push(match event {
            RunEvent::AgentFinished { path, output, .. } => format!("finished {path} {output}"),
            RunEvent::Completed { output, .. } => format!("completed {output}"),
            RunEvent::ScopeDestroyed { .. } => "destroyed".to_string(),
            _ => continue,
        });
    }
    assert_eq!(
        seen,
        [
            r#"finished root/0 "first""#,
            r#"finished root/1 "second""#,
            r#"finished root "second""#,
            r#"completed "second""#,
            "destroyed"
        ]
    );
    assert_eq!(run.await.unwrap().unwrap().output(), Some(&json!("second")));
    let err = registry.subscribe("watched-1").await.map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("not running"), "{err}");
}

/// A run whose caller gives up (its future dropped) ends its subscribers' streams, and its memory id can be
/// invoked again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_run_ends_its_subscriptions_and_frees_its_id() {
    let slow = FnAgent::builder("slow", |_ctx| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(json!("late"))
        })
    })
    .output_key("out")
    .build();
    let quick = FnAgent::builder("quick", |_ctx| Box::pin(async move { Ok(json!("now")) })).output_key("out").build();
    let registry = Registry::global();
    for round in 0..5 {
        let flow = Sequence::builder().name("abandoned").sub_agents([slow.clone()]).build().unwrap();
        let run = tokio::spawn(async move { flow.invoke().memory_id("abandoned-1").await });
        let mut events = loop {
            match registry.subscribe("abandoned-1").await {
                Ok(events) => break events,
                Err(_) => tokio::task::yield_now().await,
            }
        };
        run.abort();
        let ended =
            tokio::time::timeout(Duration::from_secs(5), async { while events.recv().await.is_some() {} }).await;
        assert!(ended.is_ok(), "round {round}: the subscription ended with the abandoned run");
        // Invoked again at once with another system: the id is free.
        let again = Sequence::builder().name("abandoned").sub_agents([quick.clone()]).output_key("out").build();
        let outcome = again.unwrap().invoke().memory_id(format!("abandoned-again-{round}")).await.unwrap();
        assert_eq!(outcome.output(), Some(&json!("now")));
        let same = Sequence::builder().name("abandoned").sub_agents([quick.clone()]).output_key("out").build();
        let outcome = same.unwrap().invoke().memory_id("abandoned-1").store(MemoryStore::new()).await;
        assert_eq!(outcome.unwrap().output(), Some(&json!("now")), "round {round}");
    }
}

/// A store whose run record takes 300 ms to write: the run's actor is up, its root not started yet.
#[derive(Clone, Default)]
struct SlowStart(MemoryStore);

impl agentic::engine::CheckpointStore for SlowStart {
    async fn append(&self, record: agentic::engine::StepRecord) -> Result<(), agentic::engine::StoreError> {
        agentic::engine::CheckpointStore::append(&self.0, record).await
    }

    async fn flush(&self) -> Result<(), agentic::engine::StoreError> {
        agentic::engine::CheckpointStore::flush(&self.0).await
    }

    async fn put_run(&self, run: agentic::engine::RunRecord) -> Result<(), agentic::engine::StoreError> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        agentic::engine::CheckpointStore::put_run(&self.0, run).await
    }

    async fn run(&self, run_id: &str) -> Result<Option<agentic::engine::RunRecord>, agentic::engine::StoreError> {
        agentic::engine::CheckpointStore::run(&self.0, run_id).await
    }

    async fn runs(&self) -> Result<Vec<agentic::engine::RunRecord>, agentic::engine::StoreError> {
        agentic::engine::CheckpointStore::runs(&self.0).await
    }

    async fn records(&self, run_id: &str) -> Result<Vec<agentic::engine::StepRecord>, agentic::engine::StoreError> {
        agentic::engine::CheckpointStore::records(&self.0, run_id).await
    }
}

/// A subscription made while the run is still opening (its root not started) ends when the run is abandoned
/// then; the id is free again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_abandoned_before_its_root_started_ends_its_subscriptions() {
    let quick = FnAgent::builder("quick", |_ctx| Box::pin(async move { Ok(json!("now")) })).output_key("out").build();
    let flow = Sequence::builder().name("early").sub_agents([quick.clone()]).build().unwrap();
    let run = tokio::spawn(async move { flow.invoke().memory_id("early-1").store(SlowStart::default()).await });
    let mut events = loop {
        match Registry::global().subscribe("early-1").await {
            Ok(events) => break events,
            Err(_) => tokio::task::yield_now().await,
        }
    };
    run.abort();
    let ended = tokio::time::timeout(Duration::from_secs(5), async { while events.recv().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the subscription ended with the run abandoned before its root started");
    let again = Sequence::builder().name("early").sub_agents([quick]).output_key("out").build().unwrap();
    let outcome = again.invoke().memory_id("early-1").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("now")));
}
