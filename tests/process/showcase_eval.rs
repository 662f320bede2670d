//! The showcase's spec regression-tested on every commit without a model (issue #44): its labelled set
//! (`tests/fixtures/tickets.jsonl`, 30 tickets) was evaluated once on the local model with `agentic eval
//! --record` (the calls in `tests/fixtures/tickets_calls.jsonl`, the results in
//! `tests/fixtures/tickets_results.json`), and here `agentic eval --replay` answers every model call from
//! that recording — a binary without the `local` provider, no model, nothing sent — and compares with the
//! recorded results: a change of the spec that changes a prompt fails the replay naming the agent, and one
//! that changes an outcome is a regression named by case.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use crate::binary::{Cli, stderr, stdout};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name).to_string_lossy().into_owned()
}

#[test]
fn the_showcase_replays_its_labelled_set_with_the_recorded_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let o = Cli::new([
        "eval",
        &fixture("examples/specs/ticket_triage.yaml"),
        &fixture("tests/fixtures/tickets.jsonl"),
        "--replay",
        &fixture("tests/fixtures/tickets_calls.jsonl"),
        "--baseline",
        &fixture("tests/fixtures/tickets_results.json"),
        "--min-pass",
        "0",
        "--json",
    ])
    .store(dir.path().join("store"))
    .env_remove("OPENAI_BASE_URL")
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let now: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tests/fixtures/tickets_results.json")).unwrap())
            .unwrap();
    assert_eq!(now["summary"]["regressions"], serde_json::json!([]));
    // Every evaluator's verdict on every ticket is the recorded one (but `seconds`: a replay takes none).
    let verdicts = |doc: &Value| -> Vec<(String, String, bool, f64)> {
        doc["cases"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| {
                c["results"].as_array().unwrap().iter().filter(|r| r["evaluator"] != "seconds").map(move |r| {
                    (
                        c["id"].as_str().unwrap().to_string(),
                        r["evaluator"].as_str().unwrap().to_string(),
                        r["passed"].as_bool().unwrap(),
                        r["score"].as_f64().unwrap(),
                    )
                })
            })
            .collect()
    };
    assert_eq!(verdicts(&now), verdicts(&recorded));
    assert_eq!(now["cases"].as_array().unwrap().len(), 30);
    let outputs =
        |doc: &Value| doc["cases"].as_array().unwrap().iter().map(|c| c["output"].clone()).collect::<Vec<_>>();
    assert_eq!(outputs(&now), outputs(&recorded), "the final answers, word for word");
}
