//! Time with real processes (SPEC.md §3): a human step's deadline fires with its default value after
//! `agentic serve` was killed and restarted past it; a late answer is refused; a `wait` survives `kill -9` of
//! the CLI and `resume` waits only the time left.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::binary::{Serve, agentic, stderr, stdout};

const REVIEW: &str = r#"version: 1
name: review
root: main
agents:
  main: { kind: sequence, agents: [ask, done], output_key: result }
  ask:
    kind: human
    prompt: "Approve {{ doc }}?"
    response_id: approve
    deadline: 2s
    on_timeout: { default: "'auto-approved'" }
    output_key: approval
  done: { kind: compute, template: "{{ doc }}: {{ approval }}", output_key: result }
"#;

const PAUSE: &str = r#"version: 1
name: pause
root: main
agents:
  main: { kind: sequence, agents: [hold, done], output_key: result }
  hold: { kind: wait, for: 3s, output_key: fired }
  done: { kind: compute, template: "waited for {{ job }}", output_key: result }
"#;

async fn run_status(http: &reqwest::Client, base: &str, id: &str) -> Value {
    http.get(format!("{base}/api/v1/runs/{id}")).send().await.unwrap().json().await.unwrap()
}

async fn wait_for(http: &reqwest::Client, base: &str, id: &str, status: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let run = run_status(http, base, id).await;
        if run["status"] == status {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} is not {status} after {limit:?}: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_that_passed_while_the_server_was_down_answers_with_the_default_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (store, specs) = (dir.path().join("store"), dir.path().join("specs"));
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(specs.join("review.yaml"), REVIEW).unwrap();
    let http = reqwest::Client::new();

    let server = Serve::on(&store).specs_dir(&specs).start();
    let base = server.url.clone();
    let body = serde_json::json!({"spec_name": "review", "inputs": {"doc": "D1"}, "run_id": "r1"});
    let created = http.post(format!("{base}/api/v1/runs")).json(&body).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let suspended = wait_for(&http, &base, "r1", "suspended", Duration::from_secs(10)).await;
    let deadline = agentic::engine::parse_rfc3339_ms(suspended["pending"][0]["deadline"].as_str().unwrap()).unwrap();
    assert_eq!(suspended["pending"][0]["on_timeout"], "the default value `'auto-approved'` is used");
    let inbox: Value = http.get(format!("{base}/inbox.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(inbox["items"][0]["id"], "approve");
    assert_eq!(inbox["items"][0]["on_timeout"], "the default value `'auto-approved'` is used");
    server.kill9();

    // Past the deadline, with no server: the answer is refused, saying what is done instead.
    while agentic::engine::now_ms() <= deadline + 1100 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let late = agentic(&store, &["respond", "r1", "yes"]);
    assert_eq!(late.status.code(), Some(1), "{}", stderr(&late));
    assert!(
        stderr(&late).contains(
            "response `approve` timed out at 20" // the RFC 3339 deadline follows
        ) && stderr(&late).ends_with("the answer is refused; the default value `'auto-approved'` is used\n"),
        "{}",
        stderr(&late)
    );

    // Restarted: the timer fires, the run continues with the default value.
    let server = Serve::on(&store).specs_dir(&specs).start();
    let base = server.url.clone();
    let done = wait_for(&http, &base, "r1", "completed", Duration::from_secs(10)).await;
    assert_eq!(done["output"], "D1: auto-approved");
    let asked: Vec<&Value> = done["history"].as_array().unwrap().iter().filter(|h| h["agent"] == "ask").collect();
    assert_eq!(asked.len(), 1, "{done}");
    assert_eq!(asked[0]["output"], "auto-approved");

    // A deadline that passes while the server runs fires too.
    let body = serde_json::json!({"spec_name": "review", "inputs": {"doc": "D2"}, "run_id": "r2"});
    assert_eq!(http.post(format!("{base}/api/v1/runs")).json(&body).send().await.unwrap().status(), 201);
    wait_for(&http, &base, "r2", "suspended", Duration::from_secs(10)).await;
    let done = wait_for(&http, &base, "r2", "completed", Duration::from_secs(10)).await;
    assert_eq!(done["output"], "D2: auto-approved");
}

#[test]
fn a_wait_survives_kill_9_and_resume_waits_only_the_time_left() {
    let dir = tempfile::tempdir().unwrap();
    let (store, spec) = (dir.path().join("store"), dir.path().join("pause.yaml"));
    std::fs::write(&spec, PAUSE).unwrap();
    let started = Instant::now();
    let mut run = Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args(["run"])
        .arg(&spec)
        .args(["--input", "job=J", "--memory-id", "w1", "--store"])
        .arg(&store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed while it sleeps through the wait (the run is suspended on its timer in the store): it says
    // `waiting until <time>` first.
    let mut lines = BufReader::new(run.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the run ended before it waited").unwrap();
        if line.starts_with("waiting until ") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(800));
    run.kill().unwrap();
    run.wait().unwrap();
    let killed_at = started.elapsed();
    assert!(killed_at < Duration::from_millis(2500), "killed too late to prove anything: {killed_at:?}");

    let resumed = Instant::now();
    let out = agentic(&store, &["resume", "w1"]);
    let took = resumed.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "waited for J");
    assert!(stderr(&out).contains("waiting until "), "{}", stderr(&out));
    // The 3 s wait started before the kill: resume waits what is left of it, not 3 s again.
    let total = started.elapsed();
    assert!(total >= Duration::from_millis(2900), "fired early: {total:?}");
    assert!(
        took < Duration::from_millis(2900) - killed_at + Duration::from_millis(900),
        "waited {took:?} after a kill at {killed_at:?}"
    );
}

/// Ctrl-C while the CLI sleeps through a `wait` cancels the run; the wait is nobody's to answer and the
/// cancelled run offers nothing to answer: `respond` exits 1 saying that `resume` continues it, `show`/`runs`
/// list no pending response, and `run` with its id says `resume`, not `respond`.
#[test]
fn ctrl_c_during_a_wait_cancels_the_run_and_leaves_nothing_to_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (store, spec) = (dir.path().join("store"), dir.path().join("pause.yaml"));
    std::fs::write(&spec, PAUSE.replace("for: 3s", "for: 1h")).unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_agentic"))
        .args(["run"])
        .arg(&spec)
        .args(["--input", "job=J", "--memory-id", "w2", "--store"])
        .arg(&store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(run.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the run ended before it waited").unwrap();
        if line.starts_with("waiting until ") {
            break;
        }
    }
    let signalled = Command::new("kill").args(["-INT", &run.id().to_string()]).status().unwrap();
    assert!(signalled.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(run.wait().unwrap().code(), Some(1), "{rest:?}");
    assert_eq!(
        rest,
        [
            format!(
                "interrupted: cancelling run `w2` once the steps in flight finish (Ctrl-C again to stop them now); \
                 `agentic resume w2 --store {}` continues it",
                store.display()
            ),
            "error: run cancelled".to_string()
        ]
    );

    let s = store.display();
    let o = agentic(&store, &["respond", "w2", "yes"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "error: run `w2`: is cancelled: it has no pending response to answer; resuming it continues the run \
             (`agentic resume w2 --store {s}`)\n"
        )
    );
    let o = agentic(&store, &["show", "w2", "--json"]);
    let shown: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((&shown["status"], &shown["pending"]), (&Value::from("cancelled"), &serde_json::json!([])));
    let o = agentic(&store, &["runs"]);
    assert!(stdout(&o).lines().nth(1).unwrap().ends_with("  -"), "no pending id: {}", stdout(&o));
    let o = agentic(&store, &["run", spec.to_str().unwrap(), "--input", "job=J", "--memory-id", "w2"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "run: w2\nerror: run `w2` already exists and is cancelled; continue it with `agentic resume w2` (or choose \
         another --memory-id)\n"
    );
}
