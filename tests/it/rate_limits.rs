//! Rate limits of a model endpoint in one process (SPEC.md §3 `limits`), against a loopback OpenAI-compatible
//! server that records when each request arrives: `requests_per_minute` spaces the calls of two concurrent
//! runs; `max_concurrency: 1` keeps two parallel calls apart; a waiting call is a `waiting_for_capacity` event
//! and ends when its run is cancelled; a 429 from the server holds back another run's call for its
//! `Retry-After`. (Three servers sharing one limit on PostgreSQL: tests/server_cluster.rs.)

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic::agents::LlmAgent;
use agentic::agents::model::ChatModelRef;
use agentic::engine::limits::ModelLimits;
use agentic::engine::{AgentError, AgentListener, AgentRef, CancelHandle, RunEvent, SpecBuilder};
use agentic::planners::{Parallel, Sequence};
use agentic::prelude::CompositeBuilderExt;
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Arrival times of the requests; the first `refuse` get a 429 with `Retry-After: 1`.
#[derive(Clone, Default)]
struct Log {
    arrivals: Arc<Mutex<Vec<Instant>>>,
    refuse: usize,
    delay: Duration,
}

impl Respond for Log {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let mut a = self.arrivals.lock().unwrap();
        a.push(Instant::now());
        if a.len() <= self.refuse {
            return ResponseTemplate::new(429).insert_header("retry-after", "1").set_body_string("slow down");
        }
        ResponseTemplate::new(200).set_delay(self.delay).set_body_json(json!({
            "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        }))
    }
}

async fn server(log: &Log) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(log.clone()).mount(&server).await;
    server
}

/// The `waiting_for_capacity` events of a run: (limit, wait in ms).
#[derive(Clone, Default)]
struct Waits(Arc<Mutex<Vec<(String, u64)>>>);

impl AgentListener for Waits {
    fn inherited(&self) -> bool {
        true
    }

    fn on_event(&self, event: &RunEvent) {
        if let RunEvent::WaitingForCapacity { limit, wait_ms, .. } = event {
            self.0.lock().unwrap().push((limit.clone(), *wait_ms));
        }
    }
}

/// The `openai` model over `server`, named `model` (limits are per provider, server and model, in the whole
/// process: each test names its own, as a later test's server may get an earlier one's port).
fn endpoint(server: &MockServer, model: &str, limits: ModelLimits) -> ChatModelRef {
    let m = agentic::agents::model::OpenAiModel::builder(model)
        .base_url(format!("{}/v1", server.uri()))
        .api_key("sk-test")
        .backoff(Duration::from_millis(10))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    ChatModelRef::new(m).with_limits(limits)
}

fn llm(model: &ChatModelRef, name: &str) -> AgentRef {
    LlmAgent::builder(model.clone()).name(name).user(&format!("say {name}")).output_key(name).build().unwrap()
}

fn gaps(arrivals: &[Instant]) -> Vec<u128> {
    arrivals.windows(2).map(|w| w[1].duration_since(w[0]).as_millis()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_minute_spaces_the_calls_of_concurrent_runs() {
    let log = Log::default();
    let server = server(&log).await;
    // 600 a minute: one every 100 ms.
    let limits = ModelLimits { requests_per_minute: Some(600), ..ModelLimits::default() };
    let model = endpoint(&server, "spaced", limits);
    let flow = |tag: &str| {
        Sequence::builder()
            .name(tag)
            .sub_agents([llm(&model, "a"), llm(&model, "b"), llm(&model, "c")])
            .build()
            .unwrap()
    };
    let (w1, w2) = (Waits::default(), Waits::default());
    let (r1, r2) = tokio::join!(flow("one").invoke().listener(w1.clone()), flow("two").invoke().listener(w2.clone()));
    r1.unwrap();
    r2.unwrap();
    let arrivals = log.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 6);
    // Start times are 100 ms apart; an arrival comes a few ms after its start (more on a loaded machine, which
    // shortens the next gap as much as it lengthens this one): no two arrivals closer than 75 ms, and the six
    // spread over at least 475 ms.
    let g = gaps(&arrivals);
    assert!(g.iter().all(|g| *g >= 75) && g.iter().sum::<u128>() >= 475, "gaps {g:?} ms");
    let waits: Vec<(String, u64)> = w1.0.lock().unwrap().iter().chain(w2.0.lock().unwrap().iter()).cloned().collect();
    assert!(waits.len() >= 5, "every call but the first waited: {waits:?}");
    assert!(waits.iter().all(|(limit, ms)| limit == "requests_per_minute" && *ms <= 600), "{waits:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_one_keeps_parallel_calls_apart() {
    let log = Log { delay: Duration::from_millis(300), ..Log::default() };
    let server = server(&log).await;
    let limits = ModelLimits { max_concurrency: Some(1), ..ModelLimits::default() };
    let model = endpoint(&server, "apart", limits);
    let both = Parallel::builder().sub_agents([llm(&model, "left"), llm(&model, "right")]).build().unwrap();
    let waits = Waits::default();
    let started = Instant::now();
    both.invoke().listener(waits.clone()).await.unwrap();
    let arrivals = log.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 2);
    assert!(gaps(&arrivals)[0] >= 290, "the second call started {} ms after the first", gaps(&arrivals)[0]);
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert_eq!(waits.0.lock().unwrap().clone(), [("max_concurrency".to_string(), 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_capacity_ends_when_its_run_is_cancelled() {
    let log = Log::default();
    let server = server(&log).await;
    // One a minute: the second call would wait a minute.
    let limits = ModelLimits { requests_per_minute: Some(1), ..ModelLimits::default() };
    let model = endpoint(&server, "cancelled", limits);
    let flow = Sequence::builder().sub_agents([llm(&model, "first"), llm(&model, "second")]).build().unwrap();
    let (cancel, waits) = (CancelHandle::new(), Waits::default());
    let run = tokio::spawn(flow.invoke().cancel_handle(cancel.clone()).listener(waits.clone()).into_future());
    let deadline = Instant::now() + Duration::from_secs(5);
    while waits.0.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the second call never waited");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (limit, wait_ms) = waits.0.lock().unwrap()[0].clone();
    assert_eq!(limit, "requests_per_minute");
    assert!((59_000..=60_120).contains(&wait_ms), "waits {wait_ms} ms");
    let cancelled = Instant::now();
    cancel.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, AgentError::Cancelled), "{err}");
    assert!(cancelled.elapsed() < Duration::from_secs(1));
    assert_eq!(log.arrivals.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_holds_back_the_calls_of_other_runs_for_its_retry_after() {
    let log = Log { refuse: 1, ..Log::default() };
    let server = server(&log).await;
    let limits = ModelLimits { requests_per_minute: Some(6000), ..ModelLimits::default() };
    let model = endpoint(&server, "backoff", limits);
    let first = llm(&model, "first");
    let second = llm(&model, "second");
    let waits = Waits::default();
    let one = tokio::spawn(first.invoke().into_future());
    // The first call gets its 429 (Retry-After: 1 s) before the second run starts.
    tokio::time::sleep(Duration::from_millis(200)).await;
    second.invoke().listener(waits.clone()).await.unwrap();
    one.await.unwrap().unwrap();
    let arrivals = log.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 3, "the refused call, its retry and the second run's call");
    // Nothing reached the server during the second after the 429: then the retry and the second run's call.
    let after: Vec<u128> = arrivals[1..].iter().map(|a| a.duration_since(arrivals[0]).as_millis()).collect();
    assert!(after.iter().all(|ms| *ms >= 950), "{after:?} ms after the 429");
    let waited = waits.0.lock().unwrap().clone();
    assert_eq!(waited.len(), 1, "{waited:?}");
    assert!((700..=1000).contains(&waited[0].1), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_also_holds_back_the_calls_already_waiting_for_their_start() {
    let log = Log { refuse: 1, ..Log::default() };
    let server = server(&log).await;
    // 600 a minute: the three calls start 100 ms apart; the first is refused for a second.
    let limits = ModelLimits { requests_per_minute: Some(600), ..ModelLimits::default() };
    let model = endpoint(&server, "waiting", limits);
    let three = Parallel::builder().sub_agents([llm(&model, "a"), llm(&model, "b"), llm(&model, "c")]).build().unwrap();
    three.invoke().await.unwrap();
    let arrivals = log.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 4, "the refused call, its retry, and the two others");
    let after: Vec<u128> = arrivals[1..].iter().map(|a| a.duration_since(arrivals[0]).as_millis()).collect();
    assert!(after.iter().all(|ms| *ms >= 950), "{after:?} ms after the 429");
}
