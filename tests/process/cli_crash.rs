//! Crash tests with real processes: a run of a nested workflow is killed with SIGKILL right after step k is
//! journaled, for every k; a new process resumes it. The result and state equal an uncrashed run's and no
//! completed step runs twice. (A larger randomized version: `scripts/crash_soak.py`.)

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use crate::binary::Cli;

use serde_json::Value;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crash.yaml");
const MAPPER_SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crash_mapper.yaml");
const ASYNC_MAPPER_SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crash_async_mapper.yaml");

fn agentic(store: &Path, kill_after: Option<u64>, args: &[&str]) -> Output {
    Cli::new(args).store(store).kill_after(kill_after).output()
}

fn show(store: &Path, id: &str) -> Value {
    let o = agentic(store, None, &["show", id, "--json"]);
    serde_json::from_slice(&o.stdout).unwrap()
}

/// How many times each agent path completed.
fn completions(shown: &Value) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for h in shown["history"].as_array().unwrap() {
        *counts.entry(h["path"].as_str().unwrap().to_string()).or_default() += 1;
    }
    counts
}

#[test]
fn a_run_killed_after_any_step_resumes_to_the_uncrashed_result() {
    crash_at_every_step(SPEC, "B(A(x))+C(A(x))+3\n", 11);
}

#[test]
fn mappers_and_conditionals_resume_after_a_crash_at_any_step() {
    // inputs, prep, 4 mapped items, mapper, big, four, conditional, inner sequence, total, root
    crash_at_every_step(MAPPER_SPEC, "30 big four\n", 13);
}

#[test]
fn async_agents_in_mapper_items_restart_in_their_item_after_a_crash_at_any_step() {
    // inputs, prep, 3 async starts and their 3 completions, 3 shows, 3 items, mapper, total, root
    crash_at_every_step(ASYNC_MAPPER_SPEC, "2/2=1.0 4/2=2.0 6/2=3.0\n", 17);
}

/// Whether the steps journaled before the kill are exactly the first `k`. With branches journaling at once
/// (the async agents of several items) the kill may come while another branch's step waits for its flush, so
/// fewer or more may be durable; the resume below must still reach the uncrashed result.
fn durable_through(shown: &Value, k: u64, concurrent: bool) -> bool {
    concurrent || shown["steps"].as_u64() == Some(k)
}

fn crash_at_every_step(spec: &str, expected: &str, expected_steps: u64) {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let o = agentic(s, None, &["run", spec, "--input", "input=x", "--memory-id", "clean"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let expected_output = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(expected_output, expected);
    let clean = show(s, "clean");
    let steps = clean["steps"].as_u64().unwrap();
    assert_eq!(steps, expected_steps);

    // The root's completion, and its last step when no async agent runs, are written in one transaction with
    // the final record: a crash right after either finds the run completed.
    let concurrent = spec == ASYNC_MAPPER_SPEC;
    let alone = if concurrent { steps } else { steps - 1 };
    for k in alone..=steps {
        let id = format!("crash-{k}");
        let o = agentic(s, Some(k), &["run", spec, "--input", "input=x", "--memory-id", &id]);
        assert_eq!(o.status.code(), None, "k={k}: the process was killed by a signal");
        let crashed = show(s, &id);
        assert_eq!((&crashed["status"], &crashed["steps"]), (&Value::from("completed"), &clean["steps"]), "k={k}");
        assert_eq!(crashed["state"], clean["state"]);
    }

    for k in 1..alone {
        let id = format!("crash-{k}");
        let o = agentic(s, Some(k), &["run", spec, "--input", "input=x", "--memory-id", &id]);
        assert_eq!(o.status.code(), None, "k={k}: the process was killed by a signal");
        let crashed = show(s, &id);
        assert_eq!(crashed["status"], "running", "k={k}");
        assert!(durable_through(&crashed, k, concurrent), "k={k}: steps 1..=k are durable: {}", crashed["steps"]);

        let o = agentic(s, None, &["resume", &id]);
        assert_eq!(o.status.code(), Some(0), "k={k}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout), expected_output, "k={k}");
        let resumed = show(s, &id);
        assert_eq!(resumed["state"], clean["state"], "k={k}");
        assert_eq!(resumed["state"]["input"], "x", "k={k}: the inputs are part of the journaled state");
        assert_eq!(resumed["steps"], clean["steps"], "k={k}: no step journaled twice");
        assert_eq!(completions(&resumed), completions(&clean), "k={k}: no completed agent ran twice");
    }
}

#[test]
fn a_crash_after_a_resume_is_resumed_again() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let o = agentic(s, Some(3), &["run", SPEC, "--input", "input=y", "--memory-id", "twice"]);
    assert_eq!(o.status.code(), None);
    let o = agentic(s, Some(7), &["resume", "twice"]);
    assert_eq!(o.status.code(), None);
    assert_eq!(show(s, "twice")["steps"].as_u64(), Some(7));
    let o = agentic(s, None, &["resume", "twice"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "B(A(y))+C(A(y))+3\n");
    assert_eq!(show(s, "twice")["steps"].as_u64(), Some(11));
}

#[test]
fn a_respond_to_a_run_left_running_by_a_killed_cli_names_the_one_command_that_continues_it() {
    const APPROVAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/approval.yaml");
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let flag = format!("--store {}", s.display());
    // Killed after the inputs and the processor: before the human step asked anything.
    let o = agentic(s, Some(2), &["run", APPROVAL, "--input", "input=order 7", "--memory-id", "orphan"]);
    assert_eq!(o.status.code(), None, "killed by a signal");
    let shown = show(s, "orphan");
    assert_eq!((&shown["status"], &shown["interrupted"]), (&Value::from("running"), &Value::from(true)));
    let o = agentic(s, None, &["show", "orphan"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!(
            "status:  running, interrupted (no process runs it; continue it with `agentic resume orphan {flag}`)"
        )),
        "{text}"
    );

    let o = agentic(s, None, &["respond", "orphan", "human-review", "yes"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: run `orphan` was interrupted before it asked for an answer (the process running it stopped: \
             killed or crashed); continue it with `agentic resume orphan {flag}`, then answer what it asks\n"
        )
    );

    // The command it names continues the run to its human step; the answer is then taken.
    let o = agentic(s, None, &["resume", "orphan"]);
    assert_eq!(o.status.code(), Some(2), "suspended: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(show(s, "orphan")["interrupted"], false);
    let o = agentic(s, None, &["respond", "orphan", "human-review", "yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = agentic(s, None, &["resume", "orphan"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Final: PROCESSED: order 7 | yes\n");
}
