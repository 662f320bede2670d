//! Faults under `agentic serve` processes on one PostgreSQL database (SERVER.md §4, its last bullet: "a database
//! restart, a server paused (SIGSTOP) past its lease, a server killed: no completed step runs twice, no answer
//! and no cancel is lost, every run ends as it would have without the fault").
//!
//! - `a_database_restart_mid_run_loses_nothing`: two servers execute 6 runs of a 10-step model chain; the
//!   PostgreSQL server is restarted (`pg_ctl restart -m fast`) mid-way. Every run completes with the exact
//!   output of an uncrashed run, its journal holds each step once, and a step journaled before the restart
//!   never ran again (the model counts its calls by prompt; a step in flight at the restart may run twice, at
//!   most one per run). And a cancel posted to B after the restart stops a run started on A after it within a
//!   second (the servers listen again: the cancel travels by NOTIFY).
//! - `a_server_paused_past_its_lease_loses_its_runs_and_writes_nothing`: a 40-step run on A; A is stopped
//!   (SIGSTOP) for 4 s (the lease is 1.5 s): B takes the run over; A is continued (SIGCONT) while B still
//!   executes it. The run completes with the exact output, never shows another status meanwhile, its journal
//!   holds each step once, and only the step in flight at the pause ran twice (at most one); A then still
//!   serves: a run posted to it completes there.
//! - `a_server_killed_with_cancels_and_answers_in_flight`: on A, 6 runs suspended at a human step and 4
//!   long-running chains; answers (4) are posted to A (the model step they resume takes 2 s: it is in flight
//!   at the kill), then cancels of a suspended and a running run, then of two more, and A is killed (SIGKILL)
//!   as soon as those got their `202` (before A acted on them). On B: every answered run completes with the
//!   exact output (its model step after the answer ran once, or twice when in flight at the kill), every
//!   cancelled run ends `cancelled` without running a step again, and the 2 uncancelled chains complete (from
//!   their last checkpoint: no step journaled before the kill ran again).
//!
//! - `a_store_outage_is_answered_503_and_nothing_is_lost`: a run suspended at a human step; the PostgreSQL
//!   server is stopped: reading the run and answering it are answered `503` (the store is unreachable: try
//!   again), not `409` or `500`; once the database is back the same answer is accepted and the run completes.
//!
//! - `every_write_is_answered_503_with_retry_after_while_the_store_is_down`: a run suspended at a human step;
//!   the PostgreSQL server is stopped: starting a run, answering, cancelling, forking and resuming are each
//!   answered `503` with `Retry-After: 1`, and the CLI on the database exits 75 saying the store is
//!   unreachable; once the database is back the answer is accepted and the run completes.
//!
//! The tests run one at a time (a lock): three of them stop the PostgreSQL server they all use.
//!
//! Run with a throwaway PostgreSQL server (the restart needs its data directory, `AGENTIC_TEST_PG_DIR`):
//!
//! ```text
//! eval "$(scripts/pg-test-server.sh start)"
//! cargo test --test server_faults -- --nocapture      # CLUSTER_DEBUG=warn shows the servers' logs
//! scripts/pg-test-server.sh stop "$AGENTIC_TEST_PG_DIR"
//! ```
//!
//! Skipped (saying so on stderr) when `AGENTIC_TEST_PG_URL` is unset, unless `AGENTIC_REQUIRE_PG=1`.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

#[path = "support/binary.rs"]
mod binary;
#[path = "support/echo_model.rs"]
mod echo_model;
#[path = "../store/tests/support/pg.rs"]
mod pg;
use binary::{Cli, Serve, Served};
use echo_model::{Calls, Echo, model, models};

/// One test at a time (see the top of the file).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------------------
// The model

/// The calls counted by (run, step): every prompt names its run (`job-…`) and starts with its step's name.
fn calls_by_step(calls: &Calls) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for (prompt, _) in calls.lock().unwrap().iter() {
        *counts.entry(step_of(prompt)).or_default() += 1;
    }
    counts
}

/// (run, step) of a prompt: `s2 after done(s1 of job-3)` → (job-3, s2).
fn step_of(prompt: &str) -> (String, String) {
    let step = prompt.split(' ').next().unwrap().to_string();
    let job = prompt
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .find(|w| w.starts_with("job-"))
        .unwrap_or_else(|| panic!("a prompt without its run: {prompt}"));
    (job.to_string(), step)
}

/// A sequence of `n` model steps `s1`..`sn`, each given the previous one's output; its output is `sn`'s.
fn chain_spec(model: &MockServer, n: usize) -> String {
    let names: Vec<String> = (1..=n).map(|k| format!("s{k}")).collect();
    let mut spec = format!(
        "version: 1\nname: chain{n}\nroot: main\n{}agents:\n\
         \x20 main: {{ kind: sequence, agents: [{}], output_key: s{n} }}\n",
        models(model),
        names.join(", ")
    );
    spec.push_str("  s1: { kind: llm, user: \"s1 of {{ job }}\", output_key: s1 }\n");
    for k in 2..=n {
        spec.push_str(&format!(
            "  s{k}: {{ kind: llm, user: \"s{k} after {{{{ s{} }}}}\", output_key: s{k} }}\n",
            k - 1
        ));
    }
    spec
}

/// The output of `chain_spec(_, n)` for `job`, as an uncrashed run computes it.
fn chain_output(job: &str, n: usize) -> String {
    let mut out = format!("done(s1 of {job})");
    for k in 2..=n {
        out = format!("done(s{k} after {out})");
    }
    out
}

/// The agents `s1`..`sn`.
fn chain_agents(n: usize) -> Vec<String> {
    (1..=n).map(|k| format!("s{k}")).collect()
}

/// A human step `gate` (response `go`), then a model step `next`.
fn gate_spec(model: &MockServer) -> String {
    format!(
        "version: 1\nname: gate\nroot: main\n{}agents:\n\
         \x20 main: {{ kind: sequence, agents: [gate, next], output_key: next }}\n\
         \x20 gate: {{ kind: human, prompt: \"go {{{{ job }}}}?\", response_id: go, output_key: go }}\n\
         \x20 next: {{ kind: llm, user: \"next {{{{ job }}}} after {{{{ go }}}}\", output_key: next }}\n",
        models(model)
    )
}

// ---------------------------------------------------------------------------------------------------------
// The servers

/// `agentic serve` on the database `db` (no `--specs`: every run is posted as text) with 1.5-s leases, called
/// `name` in the logs; killed on drop. `CLUSTER_DEBUG=<filter>` shows the servers' logs (e.g. `warn`).
fn serve(db: &str, name: &str) -> Served {
    let serve = Serve::on(db).arg("--lease-ms").arg("1500").env("OPENAI_API_KEY", "sk-test");
    match std::env::var("CLUSTER_DEBUG") {
        Ok(filter) => serve.env("AGENTIC_LOG", filter).echo_stderr(name),
        Err(_) => serve,
    }
    .start()
}

/// Two servers on a fresh database, or `None` when the PostgreSQL tests are skipped.
async fn cluster(test: &str) -> Option<(Served, Served)> {
    let db = pg::fresh_database(test).await?;
    Some((serve(&db, "A"), serve(&db, "B")))
}

// ---------------------------------------------------------------------------------------------------------
// The PostgreSQL server

/// The directory of `pg_ctl`, found as `scripts/pg-test-server.sh` finds it: `$PG_BIN`, else `PATH`, else the
/// newest `/usr/lib/postgresql/*/bin`.
fn pg_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("PG_BIN")
        && !bin.is_empty()
    {
        return PathBuf::from(bin);
    }
    let on_path = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    };
    if let (Some(initdb), Some(_)) = (on_path("initdb"), on_path("pg_ctl")) {
        return initdb.parent().unwrap().to_path_buf();
    }
    let mut dirs: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("no pg_ctl: set PG_BIN")
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|p| p.is_dir())
        .map(|p| {
            let version = p.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
            (version.split('.').map(|v| v.parse().unwrap_or(0)).collect(), p)
        })
        .collect();
    dirs.sort();
    dirs.pop().expect("no /usr/lib/postgresql/*/bin: set PG_BIN").1
}

/// Restarts the PostgreSQL server of `AGENTIC_TEST_PG_DIR` (`pg_ctl restart -m fast`: every connection is cut);
/// `restart` reuses the options it was started with. Returns how long it took.
fn restart_postgres() -> Duration {
    pg_ctl(&["-m", "fast", "restart"])
}

/// Stops the PostgreSQL server of `AGENTIC_TEST_PG_DIR` (`-m fast`: every connection is cut).
fn stop_postgres() -> Duration {
    pg_ctl(&["-m", "fast", "stop"])
}

/// Starts the stopped PostgreSQL server of `AGENTIC_TEST_PG_DIR` again with the options it last ran with (the
/// arguments `postmaster.opts` recorded after the binary, as `pg_ctl restart` reuses them).
fn start_postgres() -> Duration {
    let data = pg_dir().join("data");
    let opts = std::fs::read_to_string(data.join("postmaster.opts")).unwrap();
    let args = opts.trim().split_once(' ').map(|(_, rest)| rest.to_string()).unwrap_or_default();
    pg_ctl(&["-o", &args, "start"])
}

/// `AGENTIC_TEST_PG_DIR`: the throwaway server's directory (data, log, socket).
fn pg_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("AGENTIC_TEST_PG_DIR")
            .expect("stopping PostgreSQL needs AGENTIC_TEST_PG_DIR (scripts/pg-test-server.sh start)"),
    )
}

/// Runs `pg_ctl -D DATA -l LOG -w -t 30 ACTION...` on the server of `AGENTIC_TEST_PG_DIR` as its owner, as
/// `scripts/pg-test-server.sh` runs it (through `runuser -u OWNER --` when root). Returns how long it took.
fn pg_ctl(action: &[&str]) -> Duration {
    let dir = pg_dir();
    let data = dir.join("data");
    let ctl = pg_bin().join("pg_ctl");
    let mut args: Vec<String> = vec![
        ctl.to_string_lossy().into_owned(),
        "-D".into(),
        data.to_string_lossy().into_owned(),
        // A log file, as at the start: else the new server writes to pg_ctl's stdout.
        "-l".into(),
        dir.join("server.log").to_string_lossy().into_owned(),
        "-w".into(),
        "-t".into(),
        "30".into(),
    ];
    args.extend(action.iter().map(|a| a.to_string()));
    let root = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap().trim() == "0";
    let mut command = if root {
        let owner = Command::new("stat").args(["-c", "%U"]).arg(&data).output().unwrap();
        let owner = String::from_utf8(owner.stdout).unwrap().trim().to_string();
        let mut c = Command::new("runuser");
        c.args(["-u", &owner, "--"]).args(&args);
        c
    } else {
        let mut c = Command::new(&args[0]);
        c.args(&args[1..]);
        c
    };
    let start = Instant::now();
    let out = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "pg_ctl {action:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed()
}

// ---------------------------------------------------------------------------------------------------------
// The API

/// `POST /api/v1/runs` with the spec's text; `201` expected.
async fn create(http: &reqwest::Client, url: &str, spec: &str, inputs: Value, run_id: &str) {
    let body = json!({"spec": spec, "inputs": inputs, "run_id": run_id});
    let response = http.post(format!("{url}/api/v1/runs")).json(&body).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, 201, "POST {url}/api/v1/runs ({run_id}): {text}");
}

/// `GET /api/v1/runs/{id}`: the run, or the status and body of an answer other than `200` (or the error).
async fn try_get(http: &reqwest::Client, url: &str, id: &str) -> Result<Value, String> {
    let response = http.get(format!("{url}/api/v1/runs/{id}")).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{status}: {text}"));
    }
    Ok(serde_json::from_str(&text).unwrap())
}

/// `GET /api/v1/runs/{id}`; `200` expected.
async fn get(http: &reqwest::Client, url: &str, id: &str) -> Value {
    try_get(http, url, id).await.unwrap_or_else(|e| panic!("GET {url}/api/v1/runs/{id}: {e}"))
}

/// Posts `path` (under `/api/v1/runs/`) with `body`; the status and the body's text.
async fn post(http: &reqwest::Client, url: &str, path: &str, body: Value) -> (u16, String) {
    let response = http.post(format!("{url}/api/v1/runs/{path}")).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Posts every `(run, path, body)` of `requests` to `url` at once; each must be accepted (`202`).
async fn post_all(http: &reqwest::Client, url: &str, requests: &[(String, String, Value)]) {
    futures::future::join_all(requests.iter().map(|(run, path, body)| async move {
        let (status, text) = post(http, url, path, body.clone()).await;
        assert_eq!(status, 202, "{run}: POST {path} to {url}: {text}");
    }))
    .await;
}

/// Polls `GET /api/v1/runs/{id}` on `url` every 20 ms until its status is `status`; fails on another final
/// status or at `deadline` (answers other than `200`, e.g. while the database restarts, are tolerated until
/// then).
async fn wait_status(http: &reqwest::Client, url: &str, id: &str, status: &str, deadline: Instant) -> Value {
    loop {
        let last = match try_get(http, url, id).await {
            Ok(run) => {
                let now = run["status"].as_str().unwrap().to_string();
                if now == status {
                    return run;
                }
                assert!(
                    !matches!(now.as_str(), "completed" | "failed" | "cancelled"),
                    "run {id} ended `{now}` while `{status}` was expected: {run}"
                );
                run.to_string()
            }
            Err(e) => e,
        };
        assert!(Instant::now() < deadline, "run {id} not `{status}` in time on {url}; last seen: {last}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `run` (a `GET`) has ended.
fn ended(run: &Value) -> bool {
    matches!(run["status"].as_str(), Some("completed" | "failed" | "cancelled"))
}

/// Polls `runs` on `url` every 20 ms until each one has ended or `deadline` passes; the last `GET` of each
/// (`{"status": "unknown", "error": …}` when it was answered with an error).
async fn wait_ended(http: &reqwest::Client, url: &str, runs: &[String], deadline: Instant) -> BTreeMap<String, Value> {
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    loop {
        for run in runs {
            if last.get(run).is_some_and(ended) {
                continue;
            }
            let now = try_get(http, url, run).await.unwrap_or_else(|e| json!({"status": "unknown", "error": e}));
            last.insert(run.clone(), now);
        }
        if last.values().all(ended) || Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts that every run of `got` ended as `expected` says: `(status, output)` (the output of a run expected
/// `cancelled` is not compared); the message shows every run's status, output and error.
fn assert_outcomes(got: &BTreeMap<String, Value>, expected: &BTreeMap<String, (&str, Value)>, when: &str) {
    let seen: BTreeMap<String, (String, Value)> = got
        .iter()
        .map(|(run, r)| {
            let status = r["status"].as_str().unwrap_or("?").to_string();
            let output =
                if expected.get(run).is_some_and(|e| e.0 == "cancelled") { Value::Null } else { r["output"].clone() };
            (run.clone(), (status, output))
        })
        .collect();
    let wanted: BTreeMap<String, (String, Value)> =
        expected.iter().map(|(run, (s, o))| (run.clone(), (s.to_string(), o.clone()))).collect();
    if seen != wanted {
        let mut report = String::new();
        for (run, r) in got {
            let want = expected.get(run).map_or("?", |e| e.0);
            report.push_str(&format!(
                "\n  {run}: {} (expected {want}), steps {}, executing {}, output {}, error {}",
                r["status"], r["steps"], r["executing"], r["output"], r["error"]
            ));
        }
        panic!("{when}: the runs did not end as without the fault:{report}");
    }
}

/// One journaled step: its agent, whether it records a failed attempt.
#[derive(Debug, Clone)]
struct Step {
    agent: String,
    failed: bool,
}

/// The steps with an invocation (not an async agent's start) of `run`'s journal, from
/// `GET {url}/api/v1/store/runs/{run}/records`.
async fn journal(http: &reqwest::Client, url: &str, run: &str) -> Vec<Step> {
    let response = http.get(format!("{url}/api/v1/store/runs/{run}/records")).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "GET {url}/api/v1/store/runs/{run}/records: {text}");
    let records: Vec<Value> = serde_json::from_str(&text).unwrap();
    // Gap-free seqs from 1: a fenced-off server did not write a step of its own in between.
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.iter().copied().eq(1..=seqs.len() as u64), "run {run}: the journal's seqs are {seqs:?}");
    records
        .iter()
        .filter(|r| !r["invocation"].is_null() && r["async_started"] != json!(true))
        .map(|r| Step {
            agent: r["invocation"]["agent"].as_str().unwrap().to_string(),
            failed: r["failed"] == json!(true),
        })
        .collect()
}

/// The model steps of `steps` (the agents named in `agents`), counted.
fn model_steps(steps: &[Step], agents: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for step in steps.iter().filter(|s| agents.contains(&s.agent)) {
        *counts.entry(step.agent.clone()).or_default() += 1;
    }
    counts
}

/// Asserts that `run`'s journal holds each of `agents` once, completed, in order, and no failed attempt.
async fn assert_journal_once(http: &reqwest::Client, url: &str, run: &str, agents: &[String]) {
    let steps = journal(http, url, run).await;
    let failed: Vec<&Step> = steps.iter().filter(|s| s.failed).collect();
    assert!(failed.is_empty(), "run {run}: failed attempts journaled: {failed:?}");
    let ordered: Vec<&str> = steps.iter().filter(|s| agents.contains(&s.agent)).map(|s| s.agent.as_str()).collect();
    let expected: Vec<&str> = agents.iter().map(String::as_str).collect();
    assert_eq!(ordered, expected, "run {run}: the journaled model steps (each once, in order); all: {steps:?}");
}

/// Model calls by step of the runs in `runs`, every step at most `twice` times, the steps of `before`
/// (journaled before the fault) once; returns the steps that ran twice.
fn check_calls(
    calls: &BTreeMap<(String, String), usize>,
    before: &BTreeMap<(String, String), usize>,
    runs: &[String],
) -> Vec<(String, String)> {
    for (step, n) in before {
        assert_eq!(*n, 1, "{step:?} is journaled {n} times");
        assert_eq!(calls.get(step), Some(&1), "{step:?} was journaled before the fault and ran again (or never)");
    }
    let mut twice = Vec::new();
    for (step, n) in calls.iter().filter(|((run, _), _)| runs.contains(run)) {
        assert!(*n <= 2, "{step:?} ran {n} times");
        if *n == 2 {
            twice.push(step.clone());
        }
    }
    // At most one step in flight per run at the fault.
    for run in runs {
        let again: Vec<_> = twice.iter().filter(|(r, _)| r == run).collect();
        assert!(again.len() <= 1, "run {run}: more than one step ran twice: {again:?}");
    }
    twice
}

/// The journaled model steps of every run of `runs` (the agents named in `agents`), by (run, agent).
async fn journaled(
    http: &reqwest::Client,
    url: &str,
    runs: &[String],
    agents: &[String],
) -> BTreeMap<(String, String), usize> {
    let mut all = BTreeMap::new();
    for run in runs {
        for (agent, n) in model_steps(&journal(http, url, run).await, agents) {
            all.insert((run.clone(), agent), n);
        }
    }
    all
}

// ---------------------------------------------------------------------------------------------------------
// 1. A database restart

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_run_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let Some((a, b)) = cluster("a_database_restart_mid_run_loses_nothing").await else { return };
    let begin = Instant::now();
    let (model, calls) = model(Duration::from_millis(100)).await;
    const N: usize = 10;
    let spec = chain_spec(&model, N);
    let agents = chain_agents(N);
    let http = reqwest::Client::new();
    let runs: Vec<String> = (0..6).map(|i| format!("job-r{i}")).collect();
    for (i, run) in runs.iter().enumerate() {
        let url = if i % 2 == 0 { &a.url } else { &b.url };
        create(&http, url, &spec, json!({"job": run}), run).await;
    }
    // Early on: a fifth of the runs' model steps started (the restart comes a few hundred ms later).
    let deadline = Instant::now() + Duration::from_secs(20);
    while calls.lock().unwrap().len() < runs.len() * N / 5 {
        assert!(Instant::now() < deadline, "the runs never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = journaled(&http, &b.url, &runs, &agents).await;
    let completed_before =
        runs.iter().filter(|run| agents.iter().all(|s| before.contains_key(&((*run).clone(), s.clone())))).count();
    let calls_before = calls.lock().unwrap().len();
    let took = tokio::task::spawn_blocking(restart_postgres).await.unwrap();
    let restarted = Instant::now();
    let calls_during = calls.lock().unwrap().len() - calls_before;
    eprintln!(
        "PostgreSQL restarted in {} ms at {} ms, {} model steps journaled before, {completed_before} runs completed \
         before, {calls_during} model calls during the restart",
        took.as_millis(),
        (restarted - took - begin).as_millis(),
        before.values().sum::<usize>()
    );
    assert_eq!(completed_before, 0, "the restart came too late to matter");

    // The servers listen again: a cancel posted to B stops a run executing on A (a run started after the
    // restart) within a second (the cancel travels by NOTIFY).
    let long_spec = chain_spec(&model, 200);
    create(&http, &a.url, &long_spec, json!({"job": "job-long"}), "job-long").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let long = loop {
        let r = get(&http, &a.url, "job-long").await;
        assert_eq!(r["status"], "running", "{r}");
        if r["steps"].as_u64().unwrap_or(0) >= 2 {
            break r;
        }
        assert!(Instant::now() < deadline, "job-long: fewer than 2 steps after 20 s: {r}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(long["executing"], json!(true), "job-long does not execute on A: {long}");
    let (status, text) = post(&http, &b.url, "job-long/cancel", json!({})).await;
    assert_eq!(status, 202, "{text}");
    let accepted = Instant::now();
    wait_status(&http, &b.url, "job-long", "cancelled", accepted + Duration::from_secs(5)).await;
    let took = accepted.elapsed();
    eprintln!(
        "job-long (started on A {} ms after the restart) cancelled through B {} ms after the 202",
        (accepted - restarted).as_millis(),
        took.as_millis()
    );
    assert!(took < Duration::from_secs(1), "the status became `cancelled` {took:?} after the cancel's 202");

    // Every run completes with the output of an uncrashed run, as seen on B and on A.
    let deadline = restarted + Duration::from_secs(30);
    let expected: BTreeMap<String, (&str, Value)> =
        runs.iter().map(|run| (run.clone(), ("completed", json!(chain_output(run, N))))).collect();
    assert_outcomes(&wait_ended(&http, &b.url, &runs, deadline).await, &expected, "after the restart (on B)");
    let finished = begin.elapsed();
    assert_outcomes(&wait_ended(&http, &a.url, &runs, deadline).await, &expected, "after the restart (on A)");
    // Each step journaled once; a step journaled before the restart never ran again, one in flight at most
    // twice.
    for run in &runs {
        assert_journal_once(&http, &b.url, run, &agents).await;
    }
    let by_step = calls_by_step(&calls);
    let twice = check_calls(&by_step, &before, &runs);
    for run in &runs {
        for agent in &agents {
            assert!(by_step.contains_key(&(run.clone(), agent.clone())), "{run}/{agent} never ran");
        }
    }
    eprintln!(
        "all {} runs completed {} ms after the start; steps run twice (in flight at the restart): {twice:?}",
        runs.len(),
        finished.as_millis()
    );
    drop((a, b));
}

// ---------------------------------------------------------------------------------------------------------
// 2. A server paused past its lease

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_paused_past_its_lease_loses_its_runs_and_writes_nothing() {
    let _serial = SERIAL.lock().await;
    let Some((a, b)) = cluster("a_server_paused_past_its_lease_loses_its_runs_and_writes_nothing").await else {
        return;
    };
    let begin = Instant::now();
    let (model, calls) = model(Duration::from_millis(100)).await;
    const N: usize = 40;
    let spec = chain_spec(&model, N);
    let agents = chain_agents(N);
    let http = reqwest::Client::new();
    let run = "job-long".to_string();
    create(&http, &a.url, &spec, json!({"job": run}), &run).await;

    // Some steps journaled on A.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(&http, &b.url, &run).await;
        assert_eq!(r["status"], "running", "{r}");
        if r["steps"].as_u64().unwrap_or(0) >= 5 {
            break;
        }
        assert!(Instant::now() < deadline, "fewer than 5 steps after 20 s: {r}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(get(&http, &a.url, &run).await["executing"] == json!(true), "the run does not execute on A");

    // A paused for 4 s (the lease: 1.5 s): B takes the run over meanwhile.
    a.signal("STOP");
    let paused = Instant::now();
    let before = journaled(&http, &b.url, std::slice::from_ref(&run), &agents).await;
    let calls_at_pause = calls.lock().unwrap().len();
    let mut taken_over = None;
    while paused.elapsed() < Duration::from_secs(4) {
        let r = get(&http, &b.url, &run).await;
        assert_eq!(r["status"], "running", "while A is paused: {r}");
        if taken_over.is_none() && r["executing"] == json!(true) {
            taken_over = Some(paused.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let steps_at_cont = get(&http, &b.url, &run).await["steps"].clone();
    a.signal("CONT");
    let continued = Instant::now();
    eprintln!(
        "A paused at step {} for 4 s; B executes the run {} ms after the pause; step {steps_at_cont} at SIGCONT",
        before.len(),
        taken_over.map_or(-1, |t| t.as_millis() as i64)
    );
    let took_over = taken_over.expect("B did not take the run over while A was paused for 4 s");
    assert!(steps_at_cont.as_u64().unwrap() < N as u64, "B ended the run before SIGCONT: the test proves less");
    assert!(took_over < Duration::from_millis(3000), "B took the run over {took_over:?} after the pause");

    // The run completes with the exact output, never showing another status on A or B meanwhile.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (on_a, on_b) = (get(&http, &a.url, &run).await, get(&http, &b.url, &run).await);
        for (name, r) in [("A", &on_a), ("B", &on_b)] {
            assert!(matches!(r["status"].as_str(), Some("running" | "completed")), "on {name} after SIGCONT: {r}");
        }
        if on_b["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "not completed 20 s after SIGCONT: {on_b}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let completed_after = continued.elapsed();
    // And stays so (A's late writes are fenced off).
    tokio::time::sleep(Duration::from_millis(1000)).await;
    for url in [&a.url, &b.url] {
        let r = get(&http, url, &run).await;
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["output"], json!(chain_output(&run, N)), "{r}");
        assert_eq!(r["executing"], json!(false), "{url}: {r}");
    }
    eprintln!("completed {} ms after SIGCONT", completed_after.as_millis());

    assert_journal_once(&http, &b.url, &run, &agents).await;
    let by_step = calls_by_step(&calls);
    let twice = check_calls(&by_step, &before, std::slice::from_ref(&run));
    assert_eq!(by_step.len(), N, "model steps run: {by_step:?}");
    eprintln!("{} model calls at the pause; steps run twice (in flight at the pause): {twice:?}", calls_at_pause);

    // A still serves: a run posted to it executes and completes there.
    let next = "job-after".to_string();
    let short = chain_spec(&model, 3);
    create(&http, &a.url, &short, json!({"job": next}), &next).await;
    let done = wait_status(&http, &a.url, &next, "completed", Instant::now() + Duration::from_secs(20)).await;
    assert_eq!(done["output"], json!(chain_output(&next, 3)), "{done}");
    assert_journal_once(&http, &a.url, &next, &chain_agents(3)).await;
    let by_step = calls_by_step(&calls);
    for agent in chain_agents(3) {
        assert_eq!(by_step.get(&(next.clone(), agent.clone())), Some(&1), "{next}/{agent}");
    }
    eprintln!("test took {} ms", begin.elapsed().as_millis());
    drop((a, b));
}

// ---------------------------------------------------------------------------------------------------------
// 3. A server killed with answers and cancels in flight

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_with_cancels_and_answers_in_flight() {
    let _serial = SERIAL.lock().await;
    let Some((a, b)) = cluster("a_server_killed_with_cancels_and_answers_in_flight").await else { return };
    let begin = Instant::now();
    let (model, calls) = model(Duration::from_millis(300)).await;
    // The model step after the human one: slow, so that it is in flight when A is killed.
    let slow = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Echo(calls.clone(), Duration::from_secs(2)))
        .mount(&slow)
        .await;
    const N: usize = 12;
    let (gate, chain) = (gate_spec(&slow), chain_spec(&model, N));
    let agents = chain_agents(N);
    let http = reqwest::Client::new();
    let gates: Vec<String> = (0..6).map(|i| format!("job-g{i}")).collect();
    let longs: Vec<String> = (0..4).map(|i| format!("job-l{i}")).collect();
    for run in &gates {
        create(&http, &a.url, &gate, json!({"job": run}), run).await;
    }
    for run in &longs {
        create(&http, &a.url, &chain, json!({"job": run}), run).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for run in &gates {
        wait_status(&http, &a.url, run, "suspended", deadline).await;
    }
    for run in &longs {
        loop {
            let r = get(&http, &a.url, run).await;
            assert_eq!(r["status"], "running", "{r}");
            if r["steps"].as_u64().unwrap_or(0) >= 2 {
                break;
            }
            assert!(Instant::now() < deadline, "{run}: fewer than 2 steps: {r}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    // On A: answers to g0..g3 (their model step, 2 s, is still in flight at the kill); then cancels of g5
    // (suspended) and l1 (running); then cancels of g4 (suspended) and l0 (running), and A killed as soon as
    // those two are accepted (A has not acted on them yet: it may not have recorded them `cancelled`). l2 and
    // l3 are left running.
    let (answered, cancelled_gates) = (&gates[..4], &gates[4..]);
    let (cancelled_longs, running_longs) = (&longs[..2], &longs[2..]);
    let answers: Vec<(String, String, Value)> =
        answered.iter().map(|run| (run.clone(), format!("{run}/responses/go"), json!({"value": "yes"}))).collect();
    let cancel = |runs: [&String; 2]| -> Vec<(String, String, Value)> {
        runs.iter().map(|run| ((*run).clone(), format!("{run}/cancel"), json!({}))).collect()
    };
    let (early, last) = (cancel([&gates[5], &longs[1]]), cancel([&gates[4], &longs[0]]));
    let posted = Instant::now();
    post_all(&http, &a.url, &answers).await;
    let answers_took = posted.elapsed();
    post_all(&http, &a.url, &early).await;
    post_all(&http, &a.url, &last).await;
    a.kill9();
    let killed = Instant::now();
    let accepted = killed - posted;
    // Where each run was when A died (no server writes anything of A's runs now but B, after a take-over).
    let all: Vec<String> = gates.iter().chain(&longs).cloned().collect();
    let mut at_kill = BTreeMap::new();
    for run in &all {
        let r = get(&http, &b.url, run).await;
        at_kill.insert(run.clone(), (r["status"].as_str().unwrap().to_string(), r["steps"].clone()));
    }
    let before =
        journaled(&http, &b.url, &all, &agents.iter().cloned().chain(["next".to_string()]).collect::<Vec<_>>()).await;
    let calls_at_kill = calls_by_step(&calls);
    eprintln!(
        "{} answers accepted by A in {} ms, then 2 + 2 cancels, {} ms in all; A killed; at the kill: {at_kill:?}",
        answers.len(),
        answers_took.as_millis(),
        accepted.as_millis()
    );
    for run in answered {
        assert_eq!(at_kill[run].0, "running", "{run}: the kill came too late to matter");
    }

    // On B: answered runs complete, cancelled ones end `cancelled`, the others complete.
    let mut expected: BTreeMap<String, (&str, Value)> = BTreeMap::new();
    for run in answered {
        expected.insert(run.clone(), ("completed", json!(format!("done(next {run} after yes)"))));
    }
    for run in cancelled_gates.iter().chain(cancelled_longs) {
        expected.insert(run.clone(), ("cancelled", Value::Null));
    }
    for run in running_longs {
        expected.insert(run.clone(), ("completed", json!(chain_output(run, N))));
    }
    let got = wait_ended(&http, &b.url, &all, killed + Duration::from_secs(15)).await;
    eprintln!("every run ended (or the wait gave up) {} ms after the kill", killed.elapsed().as_millis());
    assert_outcomes(&got, &expected, "on B after A was killed");
    // Nothing moves after (a second more).
    let calls_at_end = calls.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(calls.lock().unwrap().len(), calls_at_end, "model calls after every run ended");

    // Journals and model calls.
    let next = vec!["next".to_string()];
    let by_step = calls_by_step(&calls);
    for run in answered {
        assert_journal_once(&http, &b.url, run, &next).await;
        let n = by_step.get(&(run.clone(), "next".to_string())).copied().unwrap_or(0);
        assert!(n == 1 || n == 2, "{run}: its model step ran {n} times (once, or twice if in flight at the kill)");
    }
    for run in cancelled_gates {
        let steps = journal(&http, &b.url, run).await;
        assert!(model_steps(&steps, &next).is_empty(), "{run} was cancelled and its model step journaled: {steps:?}");
        assert!(
            !by_step.contains_key(&(run.clone(), "next".to_string())),
            "{run} was cancelled and its model step ran"
        );
    }
    for run in cancelled_longs {
        // A prefix of the chain, each step once; no step ran again after the cancel (B cancels, not continues).
        let steps = journal(&http, &b.url, run).await;
        let counts = model_steps(&steps, &agents);
        let k = counts.len();
        assert!(counts.values().all(|n| *n == 1), "{run}: {counts:?}");
        assert_eq!(
            counts.keys().cloned().collect::<std::collections::BTreeSet<_>>(),
            agents[..k].iter().cloned().collect(),
            "{run}: not a prefix of the chain: {counts:?}"
        );
        let ran: BTreeMap<_, _> = by_step.iter().filter(|((r, _), _)| r == run).collect();
        assert!(ran.values().all(|n| **n == 1), "{run} was cancelled and a step ran twice: {ran:?}");
        let at_kill: usize = calls_at_kill.iter().filter(|((r, _), _)| r == run).map(|(_, n)| n).sum();
        let now: usize = ran.values().copied().sum();
        assert_eq!(now, at_kill, "{run} was cancelled and model calls started after the kill: {ran:?}");
        eprintln!("{run}: cancelled after {k} journaled steps, {} model calls", ran.len());
    }
    for run in running_longs {
        assert_journal_once(&http, &b.url, run, &agents).await;
    }
    let twice = check_calls(&by_step, &before, &all);
    eprintln!("steps run twice (in flight at the kill): {twice:?}; test took {} ms", begin.elapsed().as_millis());
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_is_answered_503_and_nothing_is_lost() {
    let _serial = SERIAL.lock().await;
    let Some(db) = pg::fresh_database("a_store_outage_is_answered_503_and_nothing_is_lost").await else { return };
    let a = serve(&db, "A");
    let (model, _calls) = model(Duration::ZERO).await;
    let http = reqwest::Client::new();
    create(&http, &a.url, &gate_spec(&model), json!({"job": "job-o"}), "job-o").await;
    wait_status(&http, &a.url, "job-o", "suspended", Instant::now() + Duration::from_secs(20)).await;

    tokio::task::spawn_blocking(stop_postgres).await.unwrap();
    let down = try_get(&http, &a.url, "job-o").await.expect_err("the store is down");
    assert!(down.starts_with("503 Service Unavailable: {\"error\":\"store: store unavailable: "), "{down}");
    let (status, text) = post(&http, &a.url, "job-o/responses/go", json!({"value": "yes"})).await;
    assert_eq!(status, 503, "an answer while the store is down: {text}");
    tokio::task::spawn_blocking(start_postgres).await.unwrap();

    // The store's pool reconnects: the same answer is taken and the run completes.
    answer_once_the_store_is_back(&http, &a.url, "job-o").await;
    let run = wait_status(&http, &a.url, "job-o", "completed", Instant::now() + Duration::from_secs(20)).await;
    assert_eq!(run["output"], json!("done(next job-o after yes)"));
}

/// Answers `go` of `run_id` through the server at `url` until it is taken (202): `503` while the server's
/// store reconnects, nothing else; within 20 s.
async fn answer_once_the_store_is_back(http: &reqwest::Client, url: &str, run_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, text) = post(http, url, &format!("{run_id}/responses/go"), json!({"value": "yes"})).await;
        if status == 202 {
            return;
        }
        assert_eq!(status, 503, "{text}");
        assert!(Instant::now() < deadline, "the server never got its store back: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_is_answered_503_with_retry_after_while_the_store_is_down() {
    let _serial = SERIAL.lock().await;
    let test = "every_write_is_answered_503_with_retry_after_while_the_store_is_down";
    let Some(db) = pg::fresh_database(test).await else { return };
    let a = serve(&db, "A");
    let (model, _calls) = model(Duration::ZERO).await;
    let http = reqwest::Client::new();
    let spec = gate_spec(&model);
    create(&http, &a.url, &spec, json!({"job": "job-w"}), "job-w").await;
    wait_status(&http, &a.url, "job-w", "suspended", Instant::now() + Duration::from_secs(20)).await;

    tokio::task::spawn_blocking(stop_postgres).await.unwrap();
    let writes = [
        ("runs", json!({"spec": spec, "inputs": {"job": "job-x"}, "run_id": "job-x"})),
        ("runs/job-w/responses/go", json!({"value": "yes"})),
        ("runs/job-w/cancel", json!({})),
        ("runs/job-w/fork", json!({"at_seq": 1, "run_id": "job-f"})),
        ("runs/job-w/resume", json!({})),
    ];
    for (path, body) in &writes {
        let response = http.post(format!("{}/api/v1/{path}", a.url)).json(body).send().await.unwrap();
        let status = response.status().as_u16();
        let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
        let text = response.text().await.unwrap();
        assert_eq!((status, retry_after.as_deref()), (503, Some("1")), "POST {path} while the store is down: {text}");
        assert!(text.starts_with("{\"error\":\"store: store unavailable: "), "POST {path}: {text}");
    }

    // The CLI on the stopped database: the store is unreachable, exit 75 (SPEC.md §2), for a read and a write.
    for args in [vec!["runs"], vec!["respond", "job-w", "go", "yes"]] {
        let out = Cli::new(args.iter().copied().chain(["--store", db.as_str()])).output();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(75), "agentic {args:?} on a stopped store: {stderr}");
        let label = agentic_store::redact_url(&db);
        assert!(stderr.starts_with(&format!("error: store {label} is unreachable: ")), "{stderr}");
        assert!(stderr.ends_with("; try again once it is back\n"), "{stderr}");
        assert!(!stderr.contains("store backend"), "{stderr}");
    }
    tokio::task::spawn_blocking(start_postgres).await.unwrap();

    // Once the database is back, the answer is taken and the run completes; nothing of the refused writes
    // was done (no run `job-x`, no fork `job-f`).
    answer_once_the_store_is_back(&http, &a.url, "job-w").await;
    let run = wait_status(&http, &a.url, "job-w", "completed", Instant::now() + Duration::from_secs(20)).await;
    assert_eq!(run["output"], json!("done(next job-w after yes)"));
    for refused in ["job-x", "job-f"] {
        let missing = try_get(&http, &a.url, refused).await.expect_err("never created");
        assert!(missing.starts_with("404 Not Found"), "{refused}: {missing}");
    }
}
