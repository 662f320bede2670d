//! `agentic eval` through the real binary (SPEC.md §6): the exit code of every gate (all pass, some fail,
//! `--min-pass`, a regression against `--baseline`, a bad dataset line, bad evaluators), the `--json`
//! document's values, a `judge` over a loopback OpenAI-compatible server, `--repeat` with a flaky case,
//! `eval export` lines fed back into `eval`, and `show` / `report` on a case's run.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::binary::{agentic, stderr, stdout};

/// A spec that sorts a ticket by keyword (no model): `refund` for money, `billing` for an invoice, else
/// `technical`; it answers `{category, reply}`.
const TICKETS: &str = r#"version: 1
name: tickets
root: triage
params:
  ticket: string
agents:
  triage: { kind: sequence, agents: [classify, reply], output_key: result }
  classify:
    kind: compute
    value: "'refund' if 'money' in ticket else ('billing' if 'invoice' in ticket else 'technical')"
    output_key: category
  reply:
    kind: compute
    value: "{'category': category, 'reply': 'We are on it: ' ~ category}"
    output_key: result
evals:
  - { kind: equals, name: category, value: "output.category" }
  - { kind: contains, text: "on it" }
  - { kind: trajectory, order: [classify, reply], max_steps: 3 }
"#;

/// Three cases; the second expects `refund` where the spec says `billing`.
const CASES: &str = r#"{"id": "c1", "inputs": {"ticket": "I want my money back"}, "expected": "refund"}
{"id": "c2", "inputs": {"ticket": "My invoice is wrong"}, "expected": "refund", "metadata": {"source": "mail"}}

{"id": "c3", "inputs": {"ticket": "The app crashes"}, "expected": "technical"}
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(o), stderr(o)))
}

#[test]
fn eval_exit_codes_follow_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write(dir.path(), "tickets.yaml", TICKETS);
    let all_pass = write(
        dir.path(),
        "pass.jsonl",
        &CASES.replace(r#""expected": "refund", "metadata""#, r#""expected": "billing", "metadata""#),
    );
    let two_of_three = write(dir.path(), "cases.jsonl", CASES);

    let o = agentic(&store, &["eval", &spec, &all_pass]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("cases: 3, passed: 3, failed: 0, pass rate: 100.0%"), "{}", stdout(&o));

    let o = agentic(&store, &["eval", &spec, &two_of_three]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("c2  FAIL  run "), "{table}");
    assert!(table.contains(r#"  category    FAIL  0.00  `output.category` "billing" != expected "refund""#), "{table}");
    assert!(table.contains("cases: 3, passed: 2, failed: 1, pass rate: 66.7%"), "{table}");
    assert!(table.contains("mean score: category 0.67, contains 1.00, trajectory 1.00"), "{table}");
    assert!(table.contains("tokens: 0 in, 0 out; cost: not counted (no prices)"), "{table}");
    assert!(stderr(&o).contains("FAIL: 1 of 3 cases failed"), "{}", stderr(&o));
    assert!(stderr(&o).contains("] c2 FAIL\n"), "progress on stderr: {}", stderr(&o));

    let o = agentic(&store, &["eval", &spec, &two_of_three, "--min-pass", "0.5"]);
    assert_eq!(o.status.code(), Some(0), "2/3 reaches --min-pass 0.5: {}", stderr(&o));
    let o = agentic(&store, &["eval", &spec, &two_of_three, "--min-pass", "0.9"]);
    assert_eq!(o.status.code(), Some(1), "2/3 is below --min-pass 0.9: {}", stderr(&o));
    assert!(
        stderr(&o).contains("FAIL: 1 of 3 cases failed; the pass rate 0.6667 is below --min-pass 0.9"),
        "{}",
        stderr(&o)
    );
    let o = agentic(&store, &["eval", &spec, &two_of_three, "--min-pass", "1.5"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
}

#[test]
fn eval_json_is_the_results_document() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write(dir.path(), "tickets.yaml", TICKETS);
    let cases = write(dir.path(), "cases.jsonl", CASES);
    let out = dir.path().join("results.json");
    let o = agentic(&store, &["eval", &spec, &cases, "--json", "--concurrency", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc = json_of(&o);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, doc, "--out writes what --json prints");

    assert_eq!(doc["spec"], "tickets");
    assert_eq!(doc["spec_file"], spec.as_str());
    assert_eq!(doc["dataset"], cases.as_str());
    assert_eq!(doc["repeat"], 1);
    assert_eq!(doc["eval_id"].as_str().unwrap().len(), 12);
    assert!(doc["created_at"].as_str().unwrap().ends_with('Z'), "{}", doc["created_at"]);
    let ids: Vec<&str> = doc["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"], "dataset order");
    let c2 = &doc["cases"][1];
    assert_eq!(c2["passed"], false);
    assert_eq!(
        c2["results"],
        json!([
            {"evaluator": "category", "kind": "equals", "passed": false, "score": 0.0,
             "reason": "`output.category` \"billing\" != expected \"refund\""},
            {"evaluator": "contains", "kind": "contains", "passed": true, "score": 1.0, "reason": null},
            {"evaluator": "trajectory", "kind": "trajectory", "passed": true, "score": 1.0, "reason": null},
        ])
    );
    assert_eq!(c2["inputs"], json!({"ticket": "My invoice is wrong"}));
    assert_eq!(c2["expected"], "refund");
    assert_eq!(c2["output"], json!({"category": "billing", "reply": "We are on it: billing"}));
    assert_eq!(c2["error"], Value::Null);
    assert_eq!(c2["status"], "completed");
    assert_eq!(c2["usage"], json!({"input_tokens": 0, "output_tokens": 0, "model_calls": 0, "cost_usd": null}));
    assert_eq!(
        (c2["pass_at_n"].clone(), c2["passed_share"].clone(), c2["flaky"].clone()),
        (json!(false), json!(0.0), json!(false))
    );
    assert!(c2.get("repeats").is_none(), "no repeats without --repeat: {c2}");
    assert!(c2["latency_ms"].is_u64());

    let s = &doc["summary"];
    assert_eq!((s["cases"].clone(), s["passed"].clone(), s["failed"].clone()), (json!(3), json!(2), json!(1)));
    assert_eq!(s["pass_rate"], 0.6667);
    assert_eq!(s["min_pass"], Value::Null);
    assert_eq!(s["mean_scores"], json!({"category": 0.6667, "contains": 1.0, "trajectory": 1.0}));
    assert_eq!(s["tokens"], json!({"input": 0, "output": 0}));
    assert_eq!(s["cost_usd"], Value::Null);
    assert!(s["latency_ms"]["p50"].is_u64() && s["latency_ms"]["p95"].is_u64(), "{s}");
    assert_eq!((s["regressions"].clone(), s["flaky"].clone()), (json!([]), json!([])));

    // Each case is a run of the store, named after the evaluation and the case.
    let runs = json_of(&agentic(&store, &["runs", "--json"]));
    let eval_id = doc["eval_id"].as_str().unwrap();
    let mut names: Vec<&str> = runs.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, [format!("eval:{eval_id}:c1"), format!("eval:{eval_id}:c2"), format!("eval:{eval_id}:c3")]);

    // `show` and `report` work on a case's run.
    let run_id = c2["run_id"].as_str().unwrap();
    let show = json_of(&agentic(&store, &["show", run_id, "--json"]));
    assert_eq!(show["status"], "completed");
    assert_eq!(show["output"], c2["output"]);
    assert_eq!(show["state"]["ticket"], "My invoice is wrong");
    let page = dir.path().join("c2.html");
    let o = agentic(&store, &["report", run_id, "-o", page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("classify") && html.contains("We are on it: billing"), "the report shows the run's steps");
}

#[test]
fn a_case_that_passed_in_the_baseline_and_fails_now_is_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write(dir.path(), "tickets.yaml", TICKETS);
    let cases = write(dir.path(), "cases.jsonl", CASES);
    let baseline = dir.path().join("baseline.json");
    let o = agentic(&store, &["eval", &spec, &cases, "--min-pass", "0.5", "--out", baseline.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The spec changes: an invoice is now `refund` (c2 passes), money is `billing` (c1 regresses).
    let changed = TICKETS.replace(
        "'refund' if 'money' in ticket else ('billing' if",
        "'billing' if 'money' in ticket else ('refund' if",
    );
    let spec = write(dir.path(), "tickets.yaml", &changed);
    let o = agentic(
        &store,
        &["eval", &spec, &cases, "--min-pass", "0.5", "--baseline", baseline.to_str().unwrap(), "--json"],
    );
    assert_eq!(o.status.code(), Some(1), "a regression fails whatever the pass rate: {}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("regression: case `c1` passed in {} and fails now", baseline.display())),
        "{}",
        stderr(&o)
    );
    let doc = json_of(&o);
    assert_eq!(doc["summary"]["regressions"], json!(["c1"]));
    assert_eq!(doc["summary"]["passed"], 2);

    let o = agentic(&store, &["eval", &spec, &cases, "--baseline", cases.as_str()]);
    assert_eq!(o.status.code(), Some(64), "a baseline that is no results document");
    assert!(stderr(&o).contains("error: --baseline "), "{}", stderr(&o));
}

#[test]
fn bad_input_is_a_usage_error_naming_the_line_or_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write(dir.path(), "tickets.yaml", TICKETS);
    let bad = write(dir.path(), "bad.jsonl", "{\"id\": \"a\", \"inputs\": {\"ticket\": \"x\"}}\n\n{\"id\": 3}\n");
    let o = agentic(&store, &["eval", &spec, &bad]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stderr(&o), format!("error: {bad}: line 3: `id` must be a non-empty string, found a number\n"));
    assert!(!store.exists(), "nothing ran");

    let missing = write(dir.path(), "missing.jsonl", "{\"id\": \"a\", \"inputs\": {\"tickt\": \"x\"}}\n");
    let o = agentic(&store, &["eval", &spec, &missing]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with(&format!("error: {missing}: line 1: case `a`: input `tickt`")), "{}", stderr(&o));

    // Bad evaluators: `agentic eval` and `agentic validate` name the file, line, column and field.
    let wrong = TICKETS.replace("{ kind: contains, text: \"on it\" }", "{ kind: regex, pattern: \"(on it\" }");
    let spec = write(dir.path(), "wrong.yaml", &wrong);
    let cases = write(dir.path(), "cases.jsonl", CASES);
    let located = format!("{spec}:18:29: field `evals[1].pattern`: invalid regular expression: ");
    let o = agentic(&store, &["eval", &spec, &cases]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with(&located), "{}", stderr(&o));
    let o = agentic(&store, &["validate", &spec]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with(&located), "{}", stderr(&o));
    let unknown = write(dir.path(), "unknown.yaml", &TICKETS.replace("kind: trajectory,", "kind: trajectry,"));
    let o = agentic(&store, &["validate", &unknown]);
    assert_eq!(o.status.code(), Some(64));
    assert!(
        stderr(&o)
            .contains(":19:13: field `evals[2].kind`: unknown evaluator kind `trajectry` (did you mean `trajectory`?)"),
        "{}",
        stderr(&o)
    );
    let o = agentic(&store, &["validate", &write(dir.path(), "ok.yaml", TICKETS)]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "ok: tickets (3 agents)\n".to_string()), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_scores_each_case_over_an_openai_compatible_server() {
    let server = crate::echo_model::metered(r#"{"score": 0.8, "reason": "polite"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = format!(
        r#"version: 1
name: greeter
root: greet
models:
  grader: {{ provider: openai, base_url: "{}/v1", model: gpt-test }}
agents:
  greet: {{ kind: compute, template: "Hello {{{{ name }}}}, thank you for writing." }}
evals:
  - {{ kind: judge, model: grader, rubric: "Is this reply polite? {{{{ output }}}}" }}
  - {{ kind: judge, name: strict, model: grader, rubric: "Is this reply perfect? {{{{ output }}}}", threshold: 0.9 }}
"#,
        server.uri()
    );
    let spec = write(dir.path(), "greeter.yaml", &spec);
    let cases = write(dir.path(), "cases.jsonl", "{\"id\": \"ada\", \"inputs\": {\"name\": \"Ada\"}}\n");
    let o = crate::binary::Cli::new(["eval", &spec, &cases, "--json"]).store(&store).output_async().await;
    assert_eq!(o.status.code(), Some(1), "the strict judge fails: {}", stderr(&o));
    let doc = json_of(&o);
    assert_eq!(
        doc["cases"][0]["results"],
        json!([
            {"evaluator": "judge", "kind": "judge", "passed": true, "score": 0.8, "reason": "polite"},
            {"evaluator": "strict", "kind": "judge", "passed": false, "score": 0.8,
             "reason": "score 0.8 is below the threshold 0.9: polite"},
        ])
    );
    assert_eq!(doc["summary"]["mean_scores"], json!({"judge": 0.8, "strict": 0.8}));
    let bodies = crate::common::bodies(&server).await;
    assert_eq!(bodies.len(), 2, "one call per judge");
    assert_eq!(bodies[0]["messages"][1]["content"], "Is this reply polite? Hello Ada, thank you for writing.");
    assert_eq!(bodies[0]["response_format"]["type"], "json_schema", "{}", bodies[0]);
}

#[test]
fn repeats_give_pass_at_n_and_name_a_flaky_case() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // One scripted model for every run, its replies in turn: the case's three runs answer refund, billing,
    // billing; only the first is right.
    let spec = write(
        dir.path(),
        "flaky.yaml",
        r#"version: 1
name: flaky
root: classify
models:
  canned: { provider: scripted, replies: ["refund", "billing", "billing", "technical", "technical", "technical"] }
agents:
  classify: { kind: llm, model: canned, user: "Classify: {{ ticket }}" }
evals:
  - { kind: equals }
"#,
    );
    let cases = write(
        dir.path(),
        "cases.jsonl",
        "{\"id\": \"t1\", \"inputs\": {\"ticket\": \"money back\"}, \"expected\": \"refund\"}\n{\"id\": \"t2\", \"inputs\": {\"ticket\": \"crash\"}, \"expected\": \"technical\"}\n",
    );
    let o = agentic(&store, &["eval", &spec, &cases, "--repeat", "3", "--concurrency", "1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "pass@3: both cases pass: {}", stderr(&o));
    let doc = json_of(&o);
    assert_eq!(doc["repeat"], 3);
    let t1 = &doc["cases"][0];
    assert_eq!(
        (t1["passed"].clone(), t1["pass_at_n"].clone(), t1["flaky"].clone()),
        (json!(true), json!(true), json!(true))
    );
    assert!((t1["passed_share"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9, "{}", t1["passed_share"]);
    let repeats = t1["repeats"].as_array().unwrap();
    let outputs: Vec<&Value> = repeats.iter().map(|r| &r["output"]).collect();
    assert_eq!(outputs, [&json!("refund"), &json!("billing"), &json!("billing")]);
    assert_eq!(repeats.iter().map(|r| r["passed"].as_bool().unwrap()).collect::<Vec<_>>(), [true, false, false]);
    assert_eq!(repeats[1]["results"][0]["reason"], "output \"billing\" != expected \"refund\"");
    assert_eq!(t1["run_id"], repeats[0]["run_id"], "the case shows its run that passed");
    let t2 = &doc["cases"][1];
    assert_eq!((t2["flaky"].clone(), t2["passed_share"].clone()), (json!(false), json!(1.0)));
    assert_eq!(doc["summary"]["flaky"], json!(["t1"]));
    assert_eq!(doc["summary"]["mean_scores"]["equals"], 0.6667, "4 of 6 runs");
    assert!(doc["summary"]["tokens"]["output"].is_u64(), "{}", doc["summary"]);

    let eval_id = doc["eval_id"].as_str().unwrap();
    let runs = json_of(&agentic(&store, &["runs", "--json"]));
    let mut names: Vec<String> =
        runs.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
    names.sort_unstable();
    let expected: Vec<String> =
        ["t1", "t1#2", "t1#3", "t2", "t2#2", "t2#3"].iter().map(|c| format!("eval:{eval_id}:{c}")).collect();
    assert_eq!(names, expected);
}

#[test]
fn a_run_that_suspends_fails_its_case_with_the_pending_response() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write(
        dir.path(),
        "orders.yaml",
        r#"version: 1
name: orders
root: process
agents:
  process: { kind: sequence, agents: [approve_order, done], output_key: result }
  approve_order: { kind: human, prompt: "Approve {{ order }}?", response_id: approve_order, output_key: approved }
  done: { kind: compute, value: "approved", output_key: result }
evals:
  - { kind: equals }
"#,
    );
    let cases =
        write(dir.path(), "cases.jsonl", "{\"id\": \"o1\", \"inputs\": {\"order\": \"A-1\"}, \"expected\": \"yes\"}\n");
    let o = agentic(&store, &["eval", &spec, &cases, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let case = &json_of(&o)["cases"][0];
    assert_eq!(case["status"], "suspended");
    assert_eq!(case["error"], "the run suspended: pending response approve_order");
    assert_eq!(case["results"][0]["reason"], "the run suspended: pending response approve_order");

    // With the person's answer in the case, the run goes to its end.
    let answered = write(
        dir.path(),
        "answered.jsonl",
        "{\"id\": \"o1\", \"inputs\": {\"order\": \"A-1\"}, \"expected\": \"yes\", \"answers\": {\"approve_order\": \"yes\"}}\n",
    );
    let o = agentic(&store, &["eval", &spec, &answered, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let case = &json_of(&o)["cases"][0];
    assert_eq!((&case["status"], &case["output"]), (&json!("completed"), &json!("yes")));
}

#[test]
fn exported_runs_round_trip_into_eval() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write(dir.path(), "tickets.yaml", TICKETS);
    for ticket in ["I want my money back", "My invoice is wrong"] {
        let o = agentic(&store, &["run", &spec, "--input", &format!("ticket={ticket}")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let o = agentic(&store, &["eval", "export", "--spec", "tickets", "--status", "completed", "--limit", "5"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["inputs"], json!({"ticket": "I want my money back"}), "oldest first");
    assert_eq!(lines[0]["expected"], json!({"category": "refund", "reply": "We are on it: refund"}));
    assert_eq!(lines[1]["metadata"]["name"], "tickets");
    let exported = write(dir.path(), "exported.jsonl", &stdout(&o));
    let evals = write(dir.path(), "evals.yaml", "- kind: equals\n");
    let o = agentic(&store, &["eval", &spec, &exported, "--evals", &evals, "--json"]);
    assert_eq!(o.status.code(), Some(0), "the same spec gives the same outputs: {}", stderr(&o));
    let doc = json_of(&o);
    assert_eq!(doc["summary"]["passed"], 2);
    assert_eq!(doc["cases"][0]["id"], lines[0]["id"]);

    let o = agentic(&store, &["eval", "export", "--limit", "1"]);
    assert_eq!(stdout(&o).lines().count(), 1, "--limit");
    let o = agentic(&store, &["eval", "export", "--spec", "nothing"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), String::new()));
}
