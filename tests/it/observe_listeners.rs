//! Listeners, the monitor (successes and failures kept apart, retention changed while in use) and the event
//! stream.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentic::agents::Human;
use agentic::engine::{AgentListener, AgentMonitor, RunEvent, SessionStatus};
use agentic::prelude::*;
use serde_json::json;

/// Counts invocations it sees; optionally inherited.
#[derive(Clone)]
struct Counter {
    started: Arc<AtomicUsize>,
    inherited: bool,
    log: Arc<Mutex<Vec<String>>>,
    tag: &'static str,
}

impl Counter {
    fn new(inherited: bool, tag: &'static str, log: Arc<Mutex<Vec<String>>>) -> Self {
        Counter { started: Arc::new(AtomicUsize::new(0)), inherited, log, tag }
    }
}

impl AgentListener for Counter {
    fn inherited(&self) -> bool {
        self.inherited
    }

    fn before_invocation(&self, event: &RunEvent) {
        self.started.fetch_add(1, Ordering::SeqCst);
        if let RunEvent::AgentStarted { path, .. } = event {
            self.log.lock().unwrap().push(format!("{}:{path}", self.tag));
        }
    }
}

fn expr(name: &str, src: &str, out: &str) -> AgentRef {
    Compute::expression(name, src).unwrap().output_key(out).build()
}

fn system() -> AgentRef {
    let lp = Loop::builder()
        .name("lp")
        .sub_agents([expr("b", "1", "b"), expr("c", "2", "c")])
        .max_iterations(3)
        .build()
        .unwrap();
    Sequence::builder().name("main").sub_agents([expr("a", "0", "a"), lp]).build().unwrap()
}

#[tokio::test]
async fn inherited_listeners_see_every_nested_invocation_others_only_their_agent() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let own = Counter::new(false, "own", log.clone());
    let all = Counter::new(true, "all", log.clone());
    let root = system().with_listener(own.clone()).with_listener(all.clone());
    root.invoke().await.unwrap();
    assert_eq!(own.started.load(Ordering::SeqCst), 1, "the sequence itself");
    // main, a, lp, and 3 iterations × (b, c)
    assert_eq!(all.started.load(Ordering::SeqCst), 9);
    let log = log.lock().unwrap();
    // Registration order: `own` before `all` on the same event.
    assert_eq!(log[0], "own:root");
    assert_eq!(log[1], "all:root");
    assert_eq!(log[2], "all:root/0");
    assert_eq!(log.iter().filter(|l| *l == "all:root/1/1").count(), 3);
}

#[tokio::test]
async fn a_panicking_listener_is_logged_and_the_run_goes_on() {
    struct Bad;
    impl AgentListener for Bad {
        fn inherited(&self) -> bool {
            true
        }
        fn after_invocation(&self, _event: &RunEvent) {
            panic!("listener bug");
        }
    }
    let out = system().invoke().listener(Bad).await.unwrap();
    assert_eq!(out.state().get("c"), Some(&json!(2)));
}

#[tokio::test]
async fn the_monitor_keeps_the_last_sessions_and_shows_suspensions() {
    let monitor = AgentMonitor::with_retention(2);
    let root = system().with_listener(monitor.clone());
    for id in ["monitor-1", "monitor-2", "monitor-3"] {
        root.invoke().memory_id(id).await.unwrap();
    }
    assert_eq!(monitor.run_ids(), ["monitor-2", "monitor-3"]);
    let s3 = monitor.session("monitor-3").unwrap();
    assert_eq!(s3.status, SessionStatus::Completed);
    assert_eq!(s3.invocations.len(), 9);
    assert_eq!(s3.invocations[1].agent, "a");
    assert_eq!(s3.invocations[1].output, Some(json!(0)));

    let none = AgentMonitor::with_retention(0);
    system().invoke().listener(none.clone()).await.unwrap();
    assert!(none.run_ids().is_empty());
    monitor.clear();
    assert!(monitor.run_ids().is_empty());

    // A suspended run is shown as suspended; resuming continues the same session.
    let monitor = AgentMonitor::new();
    let gate = Human::builder("gate", "ok?").unwrap().response_id("gate").output_key("ok").build();
    let flow = Sequence::builder().sub_agents([expr("a", "1", "a"), gate, expr("b", "2", "b")]).build().unwrap();
    let o = flow.invoke().memory_id("h1").listener(monitor.clone()).await.unwrap();
    assert_eq!(monitor.session("h1").unwrap().status, SessionStatus::Suspended);
    o.resume().answer("gate", "yes").listener(monitor.clone()).await.unwrap();
    let session = monitor.session("h1").unwrap();
    assert_eq!(session.status, SessionStatus::Completed);
    let finished: Vec<&str> =
        session.invocations.iter().filter(|i| i.output.is_some()).map(|i| i.agent.as_str()).collect();
    // in start order: turn 1 ran `a` and suspended at `gate`; turn 2 re-entered the sequence, then `gate`, `b`
    assert_eq!(finished, ["a", "sequence", "gate", "b"]);
}

#[tokio::test]
async fn the_monitor_keeps_successes_and_failures_apart_and_its_retention_changes_while_in_use() {
    // `check` fails when the order's quantity is 0.
    let check = Compute::expression("check", "quantity * 10").unwrap().output_key("price").build();
    let guard = FnAgent::from_async("guard", |inputs| async move {
        match inputs.get("price").and_then(|v| v.as_u64()) {
            Some(0) => Err("nothing to sell".to_string()),
            Some(p) => Ok(json!(p)),
            None => Err("no price".to_string()),
        }
    })
    .inputs(["price"])
    .output_key("total")
    .build();
    let monitor = AgentMonitor::with_retention(3);
    let shop = Sequence::builder()
        .name("shop")
        .sub_agents([check, guard])
        .output_key("total")
        .build()
        .unwrap()
        .with_listener(monitor.clone());
    for (id, quantity) in [("o1", 1), ("o2", 0), ("o3", 2), ("o4", 3), ("o5", 0), ("o6", 4)] {
        let _ = shop.invoke().memory_id(id).input("quantity", quantity).await;
    }
    let ids = |sessions: Vec<agentic::engine::MonitoredSession>| -> Vec<String> {
        sessions.into_iter().map(|s| s.run_id).collect()
    };
    assert_eq!(ids(monitor.successful_executions()), ["o3", "o4", "o6"], "o1 went: 3 successes are kept");
    assert_eq!(ids(monitor.failed_executions()), ["o2", "o5"], "failures have their own retention");
    let o5 = &monitor.failed_executions()[1];
    assert_eq!(o5.error.as_deref(), Some("agent `guard` (root/1) failed: nothing to sell"));
    let failed: Vec<&str> = o5.failures().iter().map(|i| i.path.as_str()).collect();
    assert_eq!(failed, ["root", "root/1"]);
    assert_eq!(monitor.successful_executions()[2].output, Some(json!(40)));

    // Another handle on the same monitor lowers the retention: the oldest go at once, and it holds for what
    // ends next.
    let handle = monitor.clone();
    handle.set_retention(1);
    assert_eq!(ids(monitor.successful_executions()), ["o6"]);
    assert_eq!(ids(monitor.failed_executions()), ["o5"]);
    shop.invoke().memory_id("o7").input("quantity", 5).await.unwrap();
    assert_eq!(ids(monitor.successful_executions()), ["o7"]);
    assert_eq!(monitor.run_ids(), ["o5", "o7"]);
    handle.set_retention(10);
    shop.invoke().memory_id("o8").input("quantity", 6).await.unwrap();
    assert_eq!(ids(monitor.successful_executions()), ["o7", "o8"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_reports_the_run_as_it_goes() {
    let (mut events, handle) = system().invoke().memory_id("ev").events();
    let mut kinds = Vec::new();
    while let Some(e) = events.recv().await {
        let k = serde_json::to_value(&e).unwrap()["event"].as_str().unwrap().to_string();
        kinds.push(k);
    }
    let out = handle.await.unwrap().unwrap();
    assert_eq!(out.state().get("c"), Some(&json!(2)));
    assert_eq!(kinds.first().map(String::as_str), Some("scope_created"));
    assert_eq!(kinds.iter().filter(|k| *k == "agent_started").count(), 9);
    assert_eq!(kinds.iter().filter(|k| *k == "agent_finished").count(), 9);
    // sequence: 2 call decisions + done; loop: 6 calls + done
    assert_eq!(kinds.iter().filter(|k| *k == "planner_decision").count(), 3 + 7);
    assert_eq!(&kinds[kinds.len() - 2..], ["completed", "scope_destroyed"]);

    // Dropping the stream does not cancel the run.
    let (events, handle) = system().invoke().events();
    drop(events);
    assert!(handle.await.unwrap().is_ok());
}
