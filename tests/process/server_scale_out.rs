//! Three `agentic serve` processes on one PostgreSQL database (SERVER.md §4): runs of a 5-step chain are
//! submitted across all three, a third of them with a human step answered through another server than the
//! one they were submitted to; two servers are killed with SIGKILL mid-way. Every run completes on the
//! survivor (it takes the dead servers' runs over once their leases expire), with the output and state of an
//! uncrashed server's run, and the journal holds every completed step of every run once; a step journaled
//! before the kill never ran again (the model server counts its calls by prompt; only steps in flight at the
//! kill may run twice).
//!
//! `AGENTIC_SCALE_RUNS` sets the number of runs (default 30); the full check of issue 19 is
//! `AGENTIC_SCALE_RUNS=300 cargo test --test process server_scale_out:: -- --nocapture` with `AGENTIC_TEST_PG_URL` set
//! (`eval "$(scripts/pg-test-server.sh start)"`). Skipped without it unless `AGENTIC_REQUIRE_PG=1`.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic::engine::CheckpointStore;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::binary::{Serve, Served};
use crate::pg;

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
        "version: 1\nname: approval\nroot: main\n{models}agents:\n  main: {{ kind: sequence, agents: [s1, s2, ok, s3, s4, s5], output_key: s5 }}\n  s1: {{ kind: llm, user: \"s1 of {{{{ job }}}}\", output_key: s1 }}\n  s2: {{ kind: llm, user: \"s2 after {{{{ s1 }}}}\", output_key: s2 }}\n  ok: {{ kind: human, prompt: \"ok {{{{ job }}}}?\", response_id: ok, output_key: answer }}\n  s3: {{ kind: llm, user: \"s3 after {{{{ s2 }}}} with {{{{ answer }}}}\", output_key: s3 }}\n  s4: {{ kind: llm, user: \"s4 after {{{{ s3 }}}}\", output_key: s4 }}\n  s5: {{ kind: llm, user: \"s5 after {{{{ s4 }}}}\", output_key: s5 }}\n"
    );
    std::fs::write(specs.join("chain.yaml"), chain).unwrap();
    std::fs::write(specs.join("approval.yaml"), approval).unwrap();
    specs
}

/// `agentic serve` on the database `db` with the specs of `specs` and 1.5-s leases; killed on drop.
fn serve(db: &str, specs: &Path) -> Served {
    Serve::on(db).specs_dir(specs).arg("--lease-ms").arg("1500").env("OPENAI_API_KEY", "sk-test").start()
}

fn run_count() -> usize {
    std::env::var("AGENTIC_SCALE_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(30)
}

/// The runs: every third one has a human step after two steps.
fn runs() -> Vec<(String, &'static str)> {
    (0..run_count()).map(|i| (format!("job-{i}"), if i % 3 == 0 { "approval" } else { "chain" })).collect()
}

/// Submits run i to server i mod n.
async fn submit_all(http: &reqwest::Client, urls: &[String]) {
    for (i, (job, spec)) in runs().into_iter().enumerate() {
        let body = json!({"spec_name": spec, "inputs": {"job": job}, "run_id": job});
        let response = http.post(format!("{}/api/v1/runs", urls[i % urls.len()])).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    }
}

async fn run(http: &reqwest::Client, url: &str, id: &str) -> Value {
    http.get(format!("{url}/api/v1/runs/{id}")).send().await.unwrap().json().await.unwrap()
}

/// One pass over the unfinished runs: records the completed ones, answers the waiting ones through the
/// server after the one the run was submitted to (among `urls`).
async fn pass(http: &reqwest::Client, urls: &[String], done: &mut BTreeMap<String, (Value, Value)>) {
    for (i, (job, _)) in runs().into_iter().enumerate() {
        if done.contains_key(&job) {
            continue;
        }
        let r = run(http, &urls[i % urls.len()], &job).await;
        match r["status"].as_str().unwrap() {
            "completed" => {
                done.insert(job, (r["output"].clone(), timeless(&r["state"])));
            }
            "suspended" => {
                let other = &urls[(i + 1) % urls.len()];
                let answer = http
                    .post(format!("{other}/api/v1/runs/{job}/responses/ok"))
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
}

async fn finish_all(http: &reqwest::Client, urls: &[String], limit: Duration) -> BTreeMap<String, (Value, Value)> {
    let deadline = Instant::now() + limit;
    let mut done = BTreeMap::new();
    while done.len() < run_count() {
        assert!(Instant::now() < deadline, "not all runs completed: {} of {}", done.len(), run_count());
        pass(http, urls, &mut done).await;
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

/// The completed model steps of every run's journal, counted by (run, agent).
async fn journaled(db: &str) -> HashMap<(String, String), usize> {
    let store = agentic::store::PgStore::connect(db).await.unwrap();
    let mut steps = HashMap::new();
    for (job, _) in runs() {
        for r in store.records(&job).await.unwrap() {
            if let Some(inv) = &r.invocation
                && inv.agent.starts_with('s')
                && !r.failed
            {
                *steps.entry((job.clone(), inv.agent.clone())).or_default() += 1;
            }
        }
    }
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_share_one_database_and_the_survivor_of_two_kills_completes_every_run() {
    let Some(reference_db) = pg::fresh_database("server_scale_out").await else { return };
    let db = pg::fresh_database("server_scale_out").await.unwrap();
    let n = run_count();
    let model = MockServer::start().await;
    let calls: Calls = Arc::default();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Echo(calls.clone(), Duration::from_millis(300)))
        .mount(&model)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(dir.path(), &model.uri());
    let http = reqwest::Client::new();
    let limit = Duration::from_secs(60 + n as u64);

    // One uncrashed server: the reference outputs and states.
    let served = serve(&reference_db, &specs);
    let urls = vec![served.url.clone()];
    submit_all(&http, &urls).await;
    let reference = finish_all(&http, &urls, limit).await;
    served.kill9();
    calls.lock().unwrap().clear();

    // Three servers on one database, the runs spread over them.
    let servers: Vec<Served> = (0..3).map(|_| serve(&db, &specs)).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url.clone()).collect();
    submit_all(&http, &urls).await;
    let deadline = Instant::now() + limit;
    let mut done = BTreeMap::new();
    loop {
        // Kill once about a third of the second steps ran (answering the human steps meanwhile).
        let s2 = calls.lock().unwrap().keys().filter(|p| p.starts_with("s2 ")).count();
        if s2 >= n / 3 {
            break;
        }
        pass(&http, &urls, &mut done).await;
        assert!(Instant::now() < deadline, "the runs never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut servers = servers.into_iter();
    servers.next().unwrap().kill9();
    servers.next().unwrap().kill9();
    let survivor = servers.next().unwrap();
    let at_kill = journaled(&db).await;
    assert!(done.len() < n / 2, "the kill came too late to matter: {} runs done", done.len());

    // The survivor takes the dead servers' runs over once their leases expire; answers go to it.
    let after = finish_all(&http, std::slice::from_ref(&survivor.url), limit).await;
    assert_eq!(after.len(), reference.len());
    for (job, expected) in &reference {
        assert_eq!(after.get(job), Some(expected), "{job}: output and state differ from an uncrashed server's");
    }

    // Per-agent counters: the journal holds each completed step of each run once.
    let steps = journaled(&db).await;
    let expected_steps = n * 5;
    assert_eq!(steps.len(), expected_steps, "completed steps by (run, agent)");
    assert!(steps.values().all(|c| *c == 1), "a step journaled twice: {steps:?}");
    // The model's counters: a step journaled before the kill never ran again; every step ran at most twice.
    let calls = calls.lock().unwrap();
    let mut by_step: HashMap<(String, String), usize> = HashMap::new();
    for (prompt, c) in calls.iter() {
        *by_step.entry(step_of(prompt)).or_default() += c;
    }
    for step in at_kill.keys() {
        assert_eq!(by_step.get(step), Some(&1), "{step:?} completed before the kill and ran again");
    }
    assert_eq!(by_step.len(), expected_steps);
    let again = by_step.values().filter(|c| **c == 2).count();
    assert!(by_step.values().all(|c| *c == 1 || *c == 2), "{by_step:?}");
    eprintln!("{n} runs, {} steps journaled at the kill, {again} steps in flight at the kill ran again", at_kill.len());
}
