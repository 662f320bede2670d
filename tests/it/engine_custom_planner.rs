//! Custom planners driven by the supervisor: batching, concurrent completions, stalls.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::engine::{Action, Completion, Composite, Planner, PlanningContext};
use agentic::prelude::*;
use serde_json::{Value, json};

fn setter(name: &str, key: &str, value: i64, sleep_ms: u64) -> AgentRef {
    let key2 = key.to_string();
    FnAgent::builder(name, move |_ctx| {
        let _ = &key2;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
            Ok(json!(value))
        })
    })
    .output_key(key)
    .build()
}

fn doubler(name: &str, key: &str) -> AgentRef {
    let k = key.to_string();
    FnAgent::builder(name, move |ctx| {
        let k = k.clone();
        Box::pin(async move { Ok(json!(ctx.input_as::<i64>(&k)? * 2)) })
    })
    .input(key)
    .output_key(key)
    .build()
}

/// Runs fixed batches of sub-agents; a batch starts when the previous one has fully completed.
struct BatchPlanner {
    batches: Vec<Vec<usize>>,
    batch: usize,
    remaining: usize,
    log: Arc<Mutex<Vec<usize>>>,
}

impl BatchPlanner {
    fn start(&mut self) -> Action {
        let b = self.batches[self.batch].clone();
        self.remaining = b.len();
        self.log.lock().unwrap().push(b.len());
        Action::call_all(b)
    }
}

impl Planner for BatchPlanner {
    fn first_action(&mut self, _ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        Ok(self.start())
    }

    fn next_action(&mut self, _ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        self.remaining -= 1;
        if self.remaining > 0 {
            return Ok(Action::Nothing);
        }
        self.batch += 1;
        if self.batch == self.batches.len() {
            return Ok(Action::Done);
        }
        Ok(self.start())
    }

    fn execution_state(&self) -> Value {
        json!({"batch": self.batch, "remaining": self.remaining})
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_planner_runs_five_agents_two_at_a_time() {
    let a = setter("A", "threadA", 5, 40);
    let b = setter("B", "threadB", 10, 0);
    let c = doubler("C", "threadA");
    let d = doubler("D", "threadB");
    let e = Compute::expression("E", "threadA + threadB").unwrap().output_key("result").build();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    let system = Composite::builder("batches", "custom", move || BatchPlanner {
        batches: vec![vec![0, 1], vec![2, 3], vec![4]],
        batch: 0,
        remaining: 0,
        log: log2.clone(),
    })
    .sub_agents([a, b, c, d, e])
    .output_key("result")
    .build()
    .unwrap();

    let outcome = system.invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!(30)));
    assert_eq!(*log.lock().unwrap(), vec![2, 2, 1]);
    let state = outcome.state();
    assert_eq!(state.get("threadA"), Some(&json!(10)));
    assert_eq!(state.get("threadB"), Some(&json!(20)));

    // The second batch started only after the whole first batch (including the slow A) had finished.
    let history = outcome.history().await.unwrap();
    let rec = |name: &str| history.iter().find(|r| r.agent == name).unwrap().clone();
    assert!(rec("C").started_at_us >= rec("A").ended_at_us);
    assert!(rec("D").started_at_us >= rec("A").ended_at_us);
    assert!(rec("E").started_at_us >= rec("C").ended_at_us.max(rec("D").ended_at_us));
    // A and B ran concurrently: B finished while A was still sleeping.
    assert!(rec("B").ended_at_us <= rec("A").ended_at_us);
    assert_eq!(rec("A").path, "root/0");
    assert_eq!(rec("E").path, "root/4");
}

/// Launches every agent; each schedules one follow-up of itself on its first completion.
struct FollowUpPlanner {
    seen: Vec<bool>,
    completed: usize,
}

impl Planner for FollowUpPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        self.seen = vec![false; ctx.agents().len()];
        Ok(Action::call_all(0..ctx.agents().len()))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        self.completed += 1;
        let i = done.call.agent;
        if !self.seen[i] {
            self.seen[i] = true;
            return Ok(Action::call(i));
        }
        if self.completed == 2 * ctx.agents().len() { Ok(Action::Done) } else { Ok(Action::Nothing) }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_parallel_agents_with_follow_ups_execute_exactly_sixteen_times() {
    for _ in 0..20 {
        let counter = Arc::new(AtomicUsize::new(0));
        let agents: Vec<AgentRef> = (0..8)
            .map(|i| {
                let c = counter.clone();
                FnAgent::builder(format!("agent{i}"), move |_ctx| {
                    let c = c.clone();
                    Box::pin(async move {
                        tokio::task::yield_now().await;
                        Ok(json!(c.fetch_add(1, Ordering::SeqCst) + 1))
                    })
                })
                .build()
            })
            .collect();
        let system = Composite::builder("followups", "custom", || FollowUpPlanner { seen: vec![], completed: 0 })
            .sub_agents(agents)
            .build()
            .unwrap();
        let outcome = system.invoke().await.unwrap();
        assert_eq!(counter.load(Ordering::SeqCst), 16);
        assert_eq!(outcome.history().await.unwrap().iter().filter(|r| r.path.starts_with("root/")).count(), 16);
    }
}

struct StallingPlanner;

impl Planner for StallingPlanner {
    fn first_action(&mut self, _ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        Ok(Action::call(0))
    }

    fn next_action(&mut self, _ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        Ok(Action::Nothing)
    }
}

#[tokio::test]
async fn nothing_to_do_with_nothing_in_flight_is_a_stall_error() {
    let a = Compute::expression("a", "1").unwrap().build();
    let system = Composite::builder("stuck", "custom", || StallingPlanner).sub_agents([a]).build().unwrap();
    let err = system.invoke().await.unwrap_err();
    match err {
        AgentError::PlannerStalled { agent, path } => {
            assert_eq!(agent, "stuck");
            assert_eq!(path, "root");
        }
        other => panic!("expected PlannerStalled, got {other:?}"),
    }
}

#[tokio::test]
async fn calling_an_unknown_sub_agent_index_is_a_planner_error() {
    struct Bad;
    impl Planner for Bad {
        fn first_action(&mut self, _ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
            Ok(Action::call(3))
        }
        fn next_action(&mut self, _c: &PlanningContext<'_>, _d: &Completion) -> Result<Action, AgentError> {
            Ok(Action::Done)
        }
    }
    let system = Composite::builder("bad", "custom", || Bad).build().unwrap();
    let err = system.invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "planner of `bad` (root): called sub-agent index 3 but there are 0");
}
