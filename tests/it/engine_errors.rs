//! Failures: missing arguments, optional agents, error handlers (retry, substitute, inheritance), parallel
//! failure with sibling cancellation, async agents, timeouts, cancellation, type checks.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentic::engine::{CancelHandle, Recovery, ValueType};
use agentic::prelude::*;
use serde_json::json;

fn expr(name: &str, src: &str, out: &str) -> AgentRef {
    Compute::expression(name, src).unwrap().output_key(out).build()
}

/// Fails on every call with `boom #<attempt>`, counting calls.
fn failing(name: &str, out: &str, calls: Arc<AtomicUsize>) -> AgentRef {
    FnAgent::builder(name, move |ctx| {
        let c = calls.clone();
        Box::pin(async move {
            c.fetch_add(1, Ordering::SeqCst);
            Err(ctx.fail(format!("boom #{}", ctx.attempt())).into())
        })
    })
    .output_key(out)
    .build()
}

#[tokio::test]
async fn substitute_result_feeds_the_next_agent_and_the_run_completes() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seq = Sequence::builder()
        .sub_agents([
            expr("first", "'a'", "a"),
            failing("middle", "b", calls.clone()),
            expr("last", "a ~ '+' ~ b", "c"),
        ])
        .output_key("c")
        .error_handler(
            |ctx: &agentic::engine::ErrorContext<'_>| {
                if ctx.agent == "middle" { Recovery::Substitute(json!("fallback")) } else { Recovery::Fail }
            },
        )
        .build()
        .unwrap();
    let out = seq.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("a+fallback")));
    assert_eq!(out.state().get("b"), Some(&json!("fallback")));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_handler_that_always_retries_stops_after_its_bound_with_the_last_error() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seq = Sequence::builder()
        .sub_agents([failing("flaky", "x", calls.clone())])
        .error_handler(|_: &agentic::engine::ErrorContext<'_>| Recovery::Retry { after: Duration::from_millis(1) })
        .build()
        .unwrap();
    let err = seq.invoke().await.unwrap_err();
    // default bound: 3 retries → 4 attempts; the error is the 4th attempt's
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(err.to_string(), "agent `flaky` (root/0) failed: boom #4");
}

#[tokio::test]
async fn retry_policy_retries_with_backoff_then_falls_back() {
    // succeeds on the third attempt
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let flaky = FnAgent::builder("flaky", move |ctx| {
        let c = c2.clone();
        Box::pin(async move {
            c.fetch_add(1, Ordering::SeqCst);
            if ctx.attempt() < 3 { Err(ctx.fail("not yet").into()) } else { Ok(json!("ok")) }
        })
    })
    .output_key("r")
    .build();
    let seq = Sequence::builder()
        .sub_agents([flaky])
        .output_key("r")
        .error_handler(RetryPolicy::new(2, Duration::from_millis(5)))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    assert_eq!(seq.invoke().await.unwrap().output(), Some(&json!("ok")));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(started.elapsed() >= Duration::from_millis(15), "backoff 5 ms then 10 ms");

    let calls = Arc::new(AtomicUsize::new(0));
    let seq = Sequence::builder()
        .sub_agents([failing("down", "r", calls.clone())])
        .output_key("r")
        .error_handler(RetryPolicy::new(1, Duration::ZERO).fallback(|_| Ok(json!("cached"))))
        .build()
        .unwrap();
    assert_eq!(seq.invoke().await.unwrap().output(), Some(&json!("cached")));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn nested_composites_inherit_the_error_handler_and_it_applies_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = Sequence::builder().name("inner").sub_agents([failing("deep", "d", calls.clone())]).build().unwrap();
    let outer = Sequence::builder()
        .name("outer")
        .sub_agents([inner, expr("after", "d ~ '!'", "e")])
        .output_key("e")
        .error_handler(RetryPolicy::new(1, Duration::ZERO).fallback(|_| Ok(json!("sub"))))
        .build()
        .unwrap();
    let out = outer.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("sub!")));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one retry at the inner level, not again at the outer level");
}

#[tokio::test]
async fn an_inheriting_composite_s_own_timeout_goes_to_the_parent_s_error_handler() {
    let done = Arc::new(AtomicUsize::new(0));
    let inner = Sequence::builder()
        .name("inner")
        .sub_agents([slow_counter("slow", 5_000, done.clone())])
        .output_key("slow")
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let outer = Sequence::builder()
        .name("outer")
        .sub_agents([inner, expr("after", "slow ~ '!'", "e")])
        .output_key("e")
        .error_handler(move |ctx: &agentic::engine::ErrorContext<'_>| {
            seen2.lock().unwrap().push((ctx.agent.to_string(), ctx.path.to_string(), ctx.error.to_string()));
            Recovery::Substitute(json!("late"))
        })
        .build()
        .unwrap();
    let out = outer.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("late!")));
    assert_eq!(out.state().get("slow"), Some(&json!("late")));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "offered once: {seen:?}");
    assert_eq!((seen[0].0.as_str(), seen[0].1.as_str()), ("inner", "root/0"));
    assert_eq!(seen[0].2, "agent `inner` (root/0) timed out after 50 ms");
    assert_eq!(done.load(Ordering::SeqCst), 0, "the slow agent was stopped by the timeout");
}

fn slow_counter(name: &str, ms: u64, done: Arc<AtomicUsize>) -> AgentRef {
    FnAgent::builder(name, move |_ctx| {
        let d = done.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            d.fetch_add(1, Ordering::SeqCst);
            Ok(json!("slow done"))
        })
    })
    .output_key("slow")
    .build()
}

fn fails_after(name: &str, ms: u64) -> AgentRef {
    FnAgent::builder(name, move |ctx| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Err(ctx.fail("disk full").into())
        })
    })
    .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_branch_failure_has_the_sequence_error_type_and_cancels_the_sibling() {
    let in_seq = Sequence::builder().sub_agents([fails_after("writer", 0)]).build().unwrap();
    let seq_err = in_seq.invoke().await.unwrap_err();

    let done = Arc::new(AtomicUsize::new(0));
    let par = Parallel::builder()
        .sub_agents([slow_counter("slow", 300, done.clone()), fails_after("writer", 20)])
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let par_err = par.invoke().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(250), "the failure returns without waiting for the sibling");
    assert!(matches!(seq_err, AgentError::Failed { .. }));
    assert!(matches!(par_err, AgentError::Failed { .. }));
    assert_eq!(seq_err.to_string(), "agent `writer` (root/0) failed: disk full");
    assert_eq!(par_err.to_string(), "agent `writer` (root/1) failed: disk full");
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(done.load(Ordering::SeqCst), 0, "the slower sibling was cancelled, it never finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_cascades_into_nested_composites() {
    let done = Arc::new(AtomicUsize::new(0));
    let inner = Parallel::builder().sub_agents([slow_counter("deep", 300, done.clone())]).build().unwrap();
    let mid = Sequence::builder().sub_agents([inner]).build().unwrap();
    let par = Parallel::builder().sub_agents([mid, fails_after("writer", 20)]).build().unwrap();
    par.invoke().await.unwrap_err();
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(done.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_stops_it() {
    let done = Arc::new(AtomicUsize::new(0));
    let seq = Sequence::builder().sub_agents([slow_counter("slow", 300, done.clone())]).build().unwrap();
    let cancel = CancelHandle::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        c2.cancel();
    });
    let store = MemoryStore::new();
    let err = seq.invoke().memory_id("run-c").store(store.clone()).cancel_handle(cancel).await.unwrap_err();
    assert!(matches!(err, AgentError::Cancelled));
    assert_eq!(store.run("run-c").unwrap().record.unwrap().status, agentic::engine::RunStatus::Cancelled);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(done.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn missing_argument_names_agent_and_key_and_optional_agents_are_skipped() {
    let needs = expr("needs", "topic ~ '!'", "out");
    let err = Sequence::builder().sub_agents([needs]).build().unwrap().invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `needs` (root/0): missing argument `topic`");
    assert!(matches!(err, AgentError::MissingArgument { ref key, .. } if key == "topic"));

    let optional = Compute::expression("opt", "topic ~ '!'").unwrap().optional(true).output_key("out").build();
    let seq = Sequence::builder().sub_agents([optional, expr("next", "'ran'", "next")]).build().unwrap();
    let out = seq.invoke().input("out", "previous").await.unwrap();
    assert_eq!(out.state().get("out"), Some(&json!("previous")), "a skipped agent writes nothing");
    assert_eq!(out.state().get("next"), Some(&json!("ran")));
    let history = out.history().await.unwrap();
    assert!(history.iter().all(|r| r.agent != "opt"), "a skipped agent is not invoked");
}

#[tokio::test]
async fn inputs_are_coerced_to_their_declared_type_without_rewriting_the_state() {
    let double = Compute::expression("double", "score * 2")
        .unwrap()
        .input(InputSpec::new("score").typed(ValueType::Number))
        .output_key("doubled")
        .build();
    let seq = Sequence::builder().sub_agents([double.clone()]).output_key("doubled").build().unwrap();
    let out = seq.invoke().input("score", "0.8").await.unwrap();
    assert_eq!(out.output(), Some(&json!(1.6)));
    assert_eq!(out.state().get("score"), Some(&json!("0.8")));

    let seq = Sequence::builder().sub_agents([double]).build().unwrap();
    let err = seq.invoke().input("score", "high").await.unwrap_err();
    assert_eq!(err.to_string(), "agent `double` (root/0): input `score` = \"high\" cannot be coerced to number");
}

#[tokio::test]
async fn conflicting_declared_types_are_rejected_at_build() {
    let a = Compute::expression("a", "1").unwrap().output_key("score").output_type(ValueType::Number).build();
    let b = Compute::expression("b", "score").unwrap().input(InputSpec::new("score").typed(ValueType::String)).build();
    let err = Sequence::builder().sub_agents([a, b]).build().unwrap_err();
    assert_eq!(err.to_string(), "key `score` is declared as number by `a` (root/0) and as string by `b` (root/1)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_agents_do_not_block_readers_wait_and_the_run_waits_for_stragglers() {
    let slow = FnAgent::builder("slow", |_ctx| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(60)).await;
            Ok(json!("research"))
        })
    })
    .output_key("notes")
    .asynchronous(true)
    .build();
    let quick = expr("quick", "'outline'", "outline");
    let reader = expr("reader", "outline ~ ' + ' ~ notes", "draft");
    let seq = Sequence::builder().sub_agents([slow, quick, reader]).output_key("draft").build().unwrap();
    let out = seq.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("outline + research")));
    let h = out.history().await.unwrap();
    let rec = |n: &str| h.iter().find(|r| r.agent == n).unwrap().clone();
    assert!(rec("quick").ended_at_us < rec("slow").ended_at_us, "the planner did not wait for the async agent");

    // a straggler nobody reads still finishes before the run returns
    let done = Arc::new(AtomicUsize::new(0));
    let d2 = done.clone();
    let straggler = FnAgent::builder("straggler", move |_ctx| {
        let d = d2.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(40)).await;
            d.fetch_add(1, Ordering::SeqCst);
            Ok(json!(1))
        })
    })
    .output_key("bg")
    .asynchronous(true)
    .build();
    let out = Sequence::builder().sub_agents([straggler]).build().unwrap().invoke().await.unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 1);
    assert_eq!(out.state().get("bg"), Some(&json!(1)));
}

#[tokio::test]
async fn an_async_failure_surfaces_with_the_same_error_type_as_a_sync_one() {
    let make = |is_async: bool| {
        FnAgent::builder("fetch", |ctx| Box::pin(async move { Err(ctx.fail("404").into()) }))
            .output_key("page")
            .asynchronous(is_async)
            .build()
    };
    let sync_err = Sequence::builder().sub_agents([make(false)]).build().unwrap().invoke().await.unwrap_err();
    let read = expr("read", "page", "text");
    let async_err = Sequence::builder().sub_agents([make(true), read]).build().unwrap().invoke().await.unwrap_err();
    assert_eq!(sync_err.to_string(), "agent `fetch` (root/0) failed: 404");
    assert_eq!(async_err.to_string(), sync_err.to_string());
    let unread = Sequence::builder().sub_agents([make(true)]).build().unwrap().invoke().await.unwrap_err();
    assert_eq!(unread.to_string(), sync_err.to_string());
}

#[tokio::test]
async fn timeouts_fail_the_invocation() {
    let slow = FnAgent::builder("slow", |_ctx| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(json!(1))
        })
    })
    .timeout(Duration::from_millis(20))
    .build();
    let err = Sequence::builder().sub_agents([slow]).build().unwrap().invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `slow` (root/0) timed out after 20 ms");
}

#[tokio::test]
async fn a_panicking_agent_is_a_failure_not_a_hang() {
    let bad = FnAgent::builder("bad", |_ctx| Box::pin(async { panic!("bug") })).build();
    let err = Sequence::builder().sub_agents([bad]).build().unwrap().invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `bad` (root/0) failed: panicked: bug");
}

fn slow_async(name: &str, key: &str, ms: u64, value: serde_json::Value) -> AgentRef {
    FnAgent::builder(name, move |_ctx| {
        let v = value.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(v)
        })
    })
    .output_key(key)
    .asynchronous(true)
    .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_results_and_conditions_wait_for_async_keys() {
    // The sequence's result is its output key, produced by an async agent.
    let seq =
        Sequence::builder().sub_agents([slow_async("slow", "sl", 40, json!("done"))]).output_key("sl").build().unwrap();
    assert_eq!(seq.invoke().await.unwrap().output(), Some(&json!("done")));

    // A conditional after an async agent decides on the settled value.
    let yes = expr("yes", "'took branch'", "branch");
    let cond = Conditional::builder().branch_when(|v| v.get("sl") == Some(&json!("done")), [yes]).build().unwrap();
    let seq = Sequence::builder()
        .sub_agents([slow_async("slow", "sl", 40, json!("done")), cond])
        .output_key("branch")
        .build()
        .unwrap();
    assert_eq!(seq.invoke().await.unwrap().output(), Some(&json!("took branch")));

    // `async` on the root has no effect: the run returns its result.
    let root = slow_async("root", "r", 10, json!(7));
    assert_eq!(root.invoke().await.unwrap().output(), Some(&json!(7)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_aborts_async_agents_the_run_is_waiting_for() {
    let done = Arc::new(AtomicUsize::new(0));
    let d2 = done.clone();
    let bg = FnAgent::builder("bg", move |_ctx| {
        let d = d2.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            d.fetch_add(1, Ordering::SeqCst);
            Ok(json!(1))
        })
    })
    .output_key("bg")
    .asynchronous(true)
    .build();
    let seq = Sequence::builder().sub_agents([bg]).build().unwrap();
    let cancel = CancelHandle::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        c2.cancel();
    });
    let err = seq.invoke().cancel_handle(cancel).await.unwrap_err();
    assert!(matches!(err, AgentError::Cancelled));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(done.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compute_agent_stuck_in_evaluation_times_out() {
    let busy =
        Compute::template("busy", "{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}done")
            .unwrap()
            .timeout(Duration::from_millis(50))
            .build();
    let started = std::time::Instant::now();
    let err = Sequence::builder().sub_agents([busy]).build().unwrap().invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `busy` (root/0) timed out after 50 ms");
    assert!(started.elapsed() < Duration::from_millis(1000));
}

#[tokio::test]
async fn retry_policy_backoff_is_capped() {
    use agentic::engine::MAX_BACKOFF;
    let policy = RetryPolicy::new(40, Duration::from_secs(1));
    let view = agentic::engine::ScopeView::default();
    let err = AgentError::failed("a", "root/0", "x");
    let ctx = agentic::engine::ErrorContext { error: &err, agent: "a", path: "root/0", attempt: 20, view: &view };
    assert_eq!(agentic::engine::ErrorHandler::handle(&policy, &ctx), Recovery::Retry { after: MAX_BACKOFF });
}

/// A loop of a million steps that never wait (no I/O, no timer) and counts them.
fn busy_loop(ticks: Arc<AtomicUsize>) -> agentic::planners::LoopBuilder {
    let tick = FnAgent::builder("tick", move |_ctx| {
        let ticks = ticks.clone();
        Box::pin(async move { Ok(json!(ticks.fetch_add(1, Ordering::SeqCst) + 1)) })
    })
    .output_key("n")
    .build();
    Loop::builder().name("busy").sub_agents([tick]).max_iterations(1_000_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_of_steps_that_never_wait_still_stops_for_its_timeout_a_failing_sibling_and_a_cancellation() {
    // Its own timeout.
    let ticks = Arc::new(AtomicUsize::new(0));
    let lp = busy_loop(ticks.clone()).timeout(Duration::from_millis(100)).build().unwrap();
    let err = lp.invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `busy` (root) timed out after 100 ms");
    let at_timeout = ticks.load(Ordering::SeqCst);
    assert!(at_timeout < 1_000_000, "stopped at {at_timeout} iterations");

    // A failing sibling aborts it.
    let ticks = Arc::new(AtomicUsize::new(0));
    let par = Parallel::builder()
        .sub_agents([busy_loop(ticks.clone()).build().unwrap(), fails_after("writer", 20)])
        .build()
        .unwrap();
    let err = par.invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `writer` (root/1) failed: disk full");
    let at_failure = ticks.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let later = ticks.load(Ordering::SeqCst);
    assert!(later < 1_000_000, "ran to {later} iterations");
    assert!(later - at_failure < 1_000, "still running after the failure: {at_failure} then {later}");

    // A cancellation stops it.
    let ticks = Arc::new(AtomicUsize::new(0));
    let cancel = CancelHandle::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        c2.cancel();
    });
    let err = busy_loop(ticks.clone()).build().unwrap().invoke().cancel_handle(cancel).await.unwrap_err();
    assert!(matches!(err, AgentError::Cancelled), "{err}");
    assert!(ticks.load(Ordering::SeqCst) < 1_000_000);
}

/// A store wrapper ([`agentic::engine::StoreLayer`]) whose appends fail as a database that went away does;
/// `appends` counts them. Every other method is the wrapped store's, without a line for it here.
struct AppendsRefused {
    inner: agentic::engine::StoreRef,
    appends: AtomicUsize,
}

impl agentic::engine::StoreLayer for AppendsRefused {
    fn inner(&self) -> &dyn agentic::engine::DynCheckpointStore {
        &*self.inner
    }

    async fn append(&self, _: agentic::engine::StepRecord) -> Result<(), agentic::engine::StoreError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        Err(agentic::engine::StoreError::unavailable(
            "postgres",
            "append in store postgres://h/db: connection refused",
            Some(Arc::new(refused)),
        ))
    }
}

#[tokio::test]
async fn an_unreachable_store_fails_the_run_with_a_typed_store_cause() {
    use agentic::engine::{CauseOrigin, CheckpointStore, StoreError, Transience};
    let memory = agentic::store::MemoryStore::new();
    let store = Arc::new(AppendsRefused { inner: Arc::new(memory.clone()), appends: AtomicUsize::new(0) });
    let err = expr("answer", "2 * 21", "out").invoke().memory_id("unreachable-1").store_ref(store.clone()).await;
    let err = err.unwrap_err();
    assert_eq!(err.kind(), "store");
    assert!(err.is_store_unavailable());
    assert_eq!(
        err.to_string(),
        "run `unreachable-1`: journal write: store unavailable: append in store postgres://h/db: connection refused"
    );
    let cause = err.cause().unwrap();
    assert_eq!(cause.origin(), CauseOrigin::Store);
    assert_eq!(cause.transience(), Transience::Transient { retry_after: None });
    assert!(matches!(cause.downcast_ref::<StoreError>(), Some(StoreError::Unavailable { backend: "postgres", .. })));
    assert_eq!(store.appends.load(Ordering::SeqCst), 1);
    // What the layer does not override reaches the wrapped store: a spec text and the run list.
    let hash = store.put_spec("version: 1").await.unwrap();
    assert_eq!(memory.spec(&hash).await.unwrap().as_deref(), Some("version: 1"));
    assert_eq!(store.runs().await.unwrap().len(), memory.runs().await.unwrap().len());
}
