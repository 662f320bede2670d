//! `agentic serve` killed with SIGKILL while 20 runs are in flight (some waiting for a human, some mid-step),
//! then restarted on the same store: every run completes with the output and state of an uncrashed server's
//! run, and a per-agent counter on the model server shows that no step completed before the kill ran again.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::binary::{Serve, Served};
use crate::echo_model;

/// Model calls by prompt.
type Calls = Arc<Mutex<HashMap<String, usize>>>;

/// An OpenAI-compatible model that answers `done(<prompt>)` after a delay and counts its calls by prompt.
struct Echo(Calls, Duration);

impl Respond for Echo {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let prompt = echo_model::prompt_of(request);
        *self.0.lock().unwrap().entry(prompt.clone()).or_default() += 1;
        echo_model::done(&prompt, self.1)
    }
}

fn specs(dir: &Path, model_url: &str) -> PathBuf {
    let specs = dir.join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    let models = format!("models:\n  default: {{ provider: openai, base_url: \"{model_url}/v1\", model: gpt-test }}\n");
    let chain = format!(
        "version: 1\nname: chain\nroot: main\n{models}agents:\n  main: {{ kind: sequence, agents: [s1, s2, s3, s4, s5], output_key: s5 }}\n  s1: {{ kind: llm, user: \"s1 of {{{{ job }}}}\", output_key: s1 }}\n  s2: {{ kind: llm, user: \"s2 after {{{{ s1 }}}}\", output_key: s2 }}\n  s3: {{ kind: llm, user: \"s3 after {{{{ s2 }}}}\", output_key: s3 }}\n  s4: {{ kind: llm, user: \"s4 after {{{{ s3 }}}}\", output_key: s4 }}\n  s5: {{ kind: llm, user: \"s5 after {{{{ s4 }}}}\", output_key: s5 }}\n"
    );
    let approval = format!(
        "version: 1\nname: approval\nroot: main\n{models}agents:\n  main: {{ kind: sequence, agents: [s1, s2, ok, s3], output_key: s3 }}\n  s1: {{ kind: llm, user: \"s1 of {{{{ job }}}}\", output_key: s1 }}\n  s2: {{ kind: llm, user: \"s2 after {{{{ s1 }}}}\", output_key: s2 }}\n  ok: {{ kind: human, prompt: \"ok {{{{ job }}}}?\", response_id: ok, output_key: answer }}\n  s3: {{ kind: llm, user: \"s3 after {{{{ s2 }}}} with {{{{ answer }}}}\", output_key: s3 }}\n"
    );
    std::fs::write(specs.join("chain.yaml"), chain).unwrap();
    std::fs::write(specs.join("approval.yaml"), approval).unwrap();
    specs
}

/// `agentic serve` on `store` with the specs of `specs`; killed on drop.
fn serve(store: &Path, specs: &Path) -> Served {
    Serve::on(store).specs_dir(specs).env("OPENAI_API_KEY", "sk-test").start()
}

/// The 20 runs: 14 five-step chains and 6 with a human step after two steps.
fn runs() -> Vec<(String, &'static str)> {
    (0..20).map(|i| (format!("job-{i}"), if i % 10 < 3 { "approval" } else { "chain" })).collect()
}

async fn submit_all(http: &reqwest::Client, url: &str) {
    for (job, spec) in runs() {
        let body = json!({"spec_name": spec, "inputs": {"job": job}, "run_id": job});
        let response = http.post(format!("{url}/api/v1/runs")).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    }
}

async fn run(http: &reqwest::Client, url: &str, id: &str) -> Value {
    http.get(format!("{url}/api/v1/runs/{id}")).send().await.unwrap().json().await.unwrap()
}

/// Answers every human step as it comes and waits until all 20 runs completed; returns (output, state) by run.
async fn finish_all(http: &reqwest::Client, url: &str) -> BTreeMap<String, (Value, Value)> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut done = BTreeMap::new();
    while done.len() < 20 {
        assert!(Instant::now() < deadline, "not all runs completed: {done:?}");
        for (job, _) in runs() {
            if done.contains_key(&job) {
                continue;
            }
            let r = run(http, url, &job).await;
            match r["status"].as_str().unwrap() {
                "completed" => {
                    done.insert(job, (r["output"].clone(), timeless(&r["state"])));
                }
                "suspended" if r["executing"] == false => {
                    let answer = http
                        .post(format!("{url}/api/v1/runs/{job}/responses/ok"))
                        .json(&json!({"value": "yes"}))
                        .send()
                        .await
                        .unwrap();
                    assert!(matches!(answer.status().as_u16(), 202 | 409), "{}", answer.text().await.unwrap());
                }
                "failed" | "cancelled" => panic!("run {job} ended {r}"),
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done
}

/// `state` without the times its conversation contexts record (`_context.*.at_us`): when a step ran.
fn timeless(state: &Value) -> Value {
    let mut state = state.clone();
    for (key, value) in state.as_object_mut().unwrap() {
        if key.starts_with("_context.")
            && let Some(entry) = value.as_object_mut()
        {
            entry.remove("at_us");
        }
    }
    state
}

/// (job, step) of a prompt: `s2 after done(s1 of job-3)` → (job-3, s2).
fn step_of(prompt: &str) -> (String, String) {
    let step = prompt.split(' ').next().unwrap().to_string();
    let job = prompt.split(|c: char| !(c.is_alphanumeric() || c == '-')).find(|w| w.starts_with("job-")).unwrap();
    (job.to_string(), step)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_flight_survive_a_kill_of_the_server_and_no_completed_step_runs_twice() {
    let model = MockServer::start().await;
    let calls: Calls = Arc::default();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Echo(calls.clone(), Duration::from_millis(250)))
        .mount(&model)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(dir.path(), &model.uri());
    let http = reqwest::Client::new();

    // An uncrashed server: the reference outputs and states.
    let reference_store = dir.path().join("reference");
    let served = serve(&reference_store, &specs);
    submit_all(&http, &served.url).await;
    let reference = finish_all(&http, &served.url).await;
    served.kill9();
    calls.lock().unwrap().clear();

    // The same runs, and SIGKILL while they are in flight.
    let store = dir.path().join("crashed");
    let served = serve(&store, &specs);
    submit_all(&http, &served.url).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Kill once some run waits for its human and the chains are mid-way.
        let waiting = run(&http, &served.url, "job-0").await["status"] == "suspended";
        let s2_done = calls.lock().unwrap().keys().filter(|p| p.starts_with("s3 ")).count();
        if waiting && s2_done >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the runs never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    served.kill9();

    // What the journal holds at the kill: those steps must not run again.
    let journaled: Vec<(String, String)> = {
        use agentic::engine::CheckpointStore;
        let sled = agentic::store::SledStore::open(&store).unwrap();
        let mut steps = Vec::new();
        let mut unfinished = 0;
        for (job, _) in runs() {
            let record = sled.run(&job).await.unwrap().unwrap();
            if record.status.to_string() != "completed" {
                unfinished += 1;
            }
            for r in sled.records(&job).await.unwrap() {
                if let Some(inv) = &r.invocation
                    && inv.agent.starts_with('s')
                    && !r.failed
                {
                    steps.push((job.clone(), inv.agent.clone()));
                }
            }
        }
        assert!(unfinished >= 10, "the kill came too late to matter: {unfinished} runs unfinished");
        steps
    };
    assert!(journaled.len() >= 10, "{journaled:?}");

    // Restart: the interrupted runs resume by themselves, the waiting ones get their answers.
    let served = serve(&store, &specs);
    let after = finish_all(&http, &served.url).await;
    assert_eq!(after.len(), reference.len());
    for (job, expected) in &reference {
        assert_eq!(after.get(job), Some(expected), "{job}: output and state differ from an uncrashed server's");
    }

    let calls = calls.lock().unwrap();
    let mut by_step: HashMap<(String, String), usize> = HashMap::new();
    for (prompt, n) in calls.iter() {
        *by_step.entry(step_of(prompt)).or_default() += n;
    }
    for step in &journaled {
        assert_eq!(by_step.get(step), Some(&1), "{step:?} completed before the kill and ran again");
    }
    // Every step ran at least once, and only a step in flight at the kill ran twice.
    assert_eq!(by_step.len(), 14 * 5 + 6 * 3);
    assert!(by_step.values().all(|n| *n == 1 || *n == 2), "{by_step:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_steps_in_flight_finish_and_the_runs_continue_at_the_next_start() {
    let model = MockServer::start().await;
    let calls: Calls = Arc::default();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Echo(calls.clone(), Duration::from_millis(1500)))
        .mount(&model)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(dir.path(), &model.uri());
    let store = dir.path().join("store");
    let http = reqwest::Client::new();
    let served = serve(&store, &specs);
    for job in ["t-1", "t-2"] {
        let body = json!({"spec_name": "chain", "inputs": {"job": job}, "run_id": job});
        let response = http.post(format!("{}/api/v1/runs", served.url)).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 201);
    }
    // Both first steps are with the model: stop the server now.
    let deadline = Instant::now() + Duration::from_secs(20);
    while calls.lock().unwrap().len() < 2 {
        assert!(Instant::now() < deadline, "the runs never called the model");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    assert_eq!(served.term(), Some(0), "a clean stop");
    assert!(started.elapsed() >= Duration::from_millis(1000), "it waited for the steps in flight");

    {
        use agentic::engine::CheckpointStore;
        let sled = agentic::store::SledStore::open(&store).unwrap();
        for job in ["t-1", "t-2"] {
            let record = sled.run(job).await.unwrap().unwrap();
            assert_eq!(record.status.to_string(), "running", "{job} continues at the next start");
            assert_eq!(record.milestones.last().unwrap().kind, agentic::engine::MilestoneKind::Interrupted);
            let agents: Vec<String> = sled
                .records(job)
                .await
                .unwrap()
                .iter()
                .filter_map(|r| r.invocation.as_ref().map(|i| i.agent.clone()))
                .collect();
            assert_eq!(
                agents,
                ["s1"],
                "{job}: the step in flight finished and was journaled; nothing after it started"
            );
        }
    }
    assert_eq!(calls.lock().unwrap().len(), 2, "no second step started");

    // The next start continues both runs: s1 is not asked again.
    let served = serve(&store, &specs);
    let deadline = Instant::now() + Duration::from_secs(60);
    for job in ["t-1", "t-2"] {
        loop {
            let r = run(&http, &served.url, job).await;
            if r["status"] == "completed" {
                assert_eq!(
                    r["output"],
                    format!("done(s5 after done(s4 after done(s3 after done(s2 after done(s1 of {job})))))")
                );
                break;
            }
            assert!(Instant::now() < deadline, "{job} never completed: {r}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let calls = calls.lock().unwrap();
    assert!(calls.values().all(|n| *n == 1), "every step called the model once: {calls:?}");
    assert_eq!(calls.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_answered_201_exists_after_a_kill_whatever_its_durability() {
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Echo(Calls::default(), Duration::from_millis(300)))
        .mount(&model)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(dir.path(), &model.uri());
    let store = dir.path().join("store");
    let http = reqwest::Client::new();
    let served = serve(&store, &specs);
    let jobs = ["sync", "async", "exit"];
    for durability in jobs {
        let body = json!({"spec_name": "chain", "inputs": {"job": durability}, "run_id": durability, "durability": durability});
        let response = http.post(format!("{}/api/v1/runs", served.url)).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    }
    // Their first steps are still waiting for the model.
    served.kill9();

    let served = serve(&store, &specs);
    let deadline = Instant::now() + Duration::from_secs(60);
    for job in jobs {
        let expected = format!("done(s5 after done(s4 after done(s3 after done(s2 after done(s1 of {job})))))");
        loop {
            let r = run(&http, &served.url, job).await;
            assert_ne!(r["status"], "failed", "{job}: {r}");
            if r["status"] == "completed" {
                assert_eq!(r["output"], json!(expected), "{job}");
                break;
            }
            assert!(Instant::now() < deadline, "{job} never completed: {r}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
