//! Durable runs through the real binary, every command a new process: run → suspended → respond → resume,
//! `runs`, `show`, and the errors users hit (SPEC.md §2).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::binary::{Cli, agentic, stderr, stdout};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn json_out(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

#[test]
fn suspend_respond_resume_across_processes() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let o =
        agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=data", "--memory-id", "order-1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("run: order-1\n"));
    assert_eq!(
        json_out(&o),
        json!({"run_id": "order-1", "status": "suspended", "output": null,
               "pending": [{"id": "human-review", "prompt": "Approve PROCESSED: data?", "agent": "review"}]})
    );

    // Resuming without an answer suspends again with the same pending ids.
    let o = agentic(s, &["resume", "order-1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(json_out(&o)["pending"][0]["id"], json!("human-review"));

    let o = agentic(s, &["runs", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let runs = json_out(&o);
    assert_eq!(runs[0]["run_id"], json!("order-1"));
    assert_eq!(runs[0]["status"], json!("suspended"));
    assert_eq!(runs[0]["name"], json!("approval"));

    let o = agentic(s, &["respond", "order-1", "APPROVED"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "respond runs nothing and prints nothing on stdout");

    let o = agentic(s, &["resume", "order-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: data | APPROVED\n");
    assert!(stderr(&o).starts_with("run: order-1\n"));

    let o = agentic(s, &["show", "order-1", "--json"]);
    let shown = json_out(&o);
    assert_eq!(shown["status"], json!("completed"));
    assert_eq!(shown["output"], json!("Final: PROCESSED: data | APPROVED"));
    assert_eq!(shown["state"]["approval"], json!("APPROVED"));
    assert_eq!(shown["pending"], json!([]));
    // processor, review, finalizer, root: each completed once
    let paths: Vec<&str> = shown["history"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["root/0", "root/1", "root/2", "root"]);

    let o = agentic(s, &["show", "order-1"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("status:  completed\n"), "{}", stdout(&o));
    assert!(stdout(&o).contains("  final = \"Final: PROCESSED: data | APPROVED\"\n"), "{}", stdout(&o));
}

#[test]
fn a_parallel_sibling_finishes_before_suspending_and_resume_completes_it() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let o = agentic(s, &["run", &fixture("nested_human.yaml"), "--memory-id", "n1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(json_out(&o)["pending"][0]["id"], json!("root/0/0/1"), "the default response id is the agent path");
    let shown = json_out(&agentic(s, &["show", "n1", "--json"]));
    assert_eq!(shown["state"]["c"], json!("C_DONE"));
    assert_eq!(shown["status"], json!("suspended"));

    assert_eq!(agentic(s, &["respond", "n1", "root/0/0/1", "APPROVED"]).status.code(), Some(0));
    let o = agentic(s, &["resume", "n1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "B_DONE:APPROVED|C_DONE\n");
    let shown = json_out(&agentic(s, &["show", "n1", "--json"]));
    let mut paths: Vec<&str> =
        shown["history"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        ["root", "root/0", "root/0/0", "root/0/0/0", "root/0/0/1", "root/0/0/2", "root/0/1", "root/1"],
        "every agent completed exactly once"
    );
}

#[test]
fn every_item_of_a_mapper_asks_its_own_human_question() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let args = ["run", &fixture("mapped_approval.yaml"), "--input", r#"orders=["A7","B2","C9"]"#, "--memory-id", "m1"];
    let o = agentic(s, &[&args[..], &["--json"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        json_out(&o)["pending"],
        json!([
            {"id": "root/0#0", "prompt": "Ship order A7?", "agent": "approve"},
            {"id": "root/0#1", "prompt": "Ship order B2?", "agent": "approve"},
            {"id": "root/0#2", "prompt": "Ship order C9?", "agent": "approve"}
        ])
    );
    // Several are pending: the id is required.
    let o = agentic(s, &["respond", "m1", "no id"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "error: run `m1`: 3 responses are pending (root/0#0, root/0#1, root/0#2): name the one to answer\n"
    );
    assert_eq!(agentic(s, &["respond", "m1", "root/0#1", "no"]).status.code(), Some(0));
    // One answered: the others still wait, with their own prompts.
    let o = agentic(s, &["resume", "m1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let ids: Vec<Value> = json_out(&o)["pending"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect();
    assert_eq!(ids, [json!("root/0#0"), json!("root/0#2")]);
    assert_eq!(agentic(s, &["respond", "m1", "root/0#0", "yes"]).status.code(), Some(0));
    assert_eq!(agentic(s, &["respond", "m1", "root/0#2", "later"]).status.code(), Some(0));
    let o = agentic(s, &["resume", "m1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], json!(["yes", "no", "later"]), "answers in item order");
}

/// A mapper over a sequence with a human step, across processes: each item prices its order in its own scope,
/// asks its own question, and labels the order with its own answer and price.
#[test]
fn every_item_of_a_mapped_sequence_keeps_its_own_keys_and_answer_across_processes() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let orders = r#"orders=[{"id":"A7","qty":1},{"id":"B2","qty":2},{"id":"C9","qty":3}]"#;
    let o = agentic(s, &["run", &fixture("mapped_review.yaml"), "--input", orders, "--memory-id", "mr1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Two items at a time: the third waits for a free slot.
    assert_eq!(
        json_out(&o)["pending"],
        json!([
            {"id": "root/0/1#0", "prompt": "Ship A7 at 10?", "agent": "approve"},
            {"id": "root/0/1#1", "prompt": "Ship B2 at 20?", "agent": "approve"}
        ])
    );
    assert_eq!(agentic(s, &["respond", "mr1", "root/0/1#1", "no"]).status.code(), Some(0));
    assert_eq!(agentic(s, &["respond", "mr1", "root/0/1#0", "yes"]).status.code(), Some(0));
    let o = agentic(s, &["resume", "mr1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(json_out(&o)["pending"], json!([{"id": "root/0/1#2", "prompt": "Ship C9 at 30?", "agent": "approve"}]));
    assert_eq!(agentic(s, &["respond", "mr1", "root/0/1#2", "later"]).status.code(), Some(0));
    let o = agentic(s, &["resume", "mr1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], json!(["A7:10:yes", "B2:20:no", "C9:30:later"]));
    // The items' keys never reached the shared state.
    let shown = json_out(&agentic(s, &["show", "mr1", "--json"]));
    let keys: Vec<&String> = shown["state"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["labels", "orders"]);
}

/// An answer starting with `-` is the answer, not an option: `respond RUN -5` and `respond RUN ID -5`, with
/// `--store` before or after; an unknown option before the run id is still a usage error.
#[test]
fn an_answer_starting_with_a_hyphen_is_taken_as_the_answer() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=data", "--memory-id", "neg-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = agentic(s, &["respond", "neg-1", "-5"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    let o = agentic(s, &["resume", "neg-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: data | -5\n");
    let shown = json_out(&agentic(s, &["show", "neg-1", "--json"]));
    assert_eq!(shown["state"]["approval"], json!(-5), "stored as the JSON number -5");
    assert_eq!(shown["output"], json!("Final: PROCESSED: data | -5"));

    // With the response id, and `--store` naming the store after the answer (AGENTIC_STORE points elsewhere).
    let elsewhere = tempfile::tempdir().unwrap();
    let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=data", "--memory-id", "neg-2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = agentic(elsewhere.path(), &["respond", "neg-2", "human-review", "-5", "--store", s.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = agentic(s, &["resume", "neg-2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: data | -5\n");

    // Not only numbers: `--store` before the run id this time.
    for (id, answer) in [("neg-3", "-x"), ("neg-4", "--weird")] {
        let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=data", "--memory-id", id]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let o = agentic(elsewhere.path(), &["respond", "--store", s.to_str().unwrap(), id, answer]);
        assert_eq!(o.status.code(), Some(0), "{answer}: {}", stderr(&o));
        let o = agentic(s, &["resume", id]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stdout(&o), format!("Final: PROCESSED: data | {answer}\n"));
    }

    // An unknown option before the run id is still a usage error, and records nothing.
    let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=data", "--memory-id", "neg-5"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = agentic(s, &["respond", "--bogus", "neg-5", "yes"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: unexpected argument '--bogus' found"), "{}", stderr(&o));
    let o = agentic(s, &["resume", "neg-5", "--json"]);
    assert_eq!(o.status.code(), Some(2), "still waiting: {}", stderr(&o));
}

#[test]
fn respond_reports_what_is_wrong() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=x", "--memory-id", "r"]);
    let o = agentic(s, &["respond", "nope", "yes"]);
    assert_eq!(o.status.code(), Some(1));
    let s_shown = s.display();
    assert_eq!(
        stderr(&o),
        format!("error: no run `nope` in store {s_shown}; list its runs with `agentic runs --store {s_shown}`\n")
    );

    let o = agentic(s, &["respond", "r", "other-id", "yes"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "error: run `r`: no pending response `other-id` (pending: human-review)\n");

    // A JSON answer is stored as JSON.
    assert_eq!(agentic(s, &["respond", "r", "human-review", "{\"ok\": true}"]).status.code(), Some(0));
    let o = agentic(s, &["resume", "r"]);
    assert_eq!(stdout(&o), "Final: PROCESSED: x | {\"ok\":true}\n");
    let o = agentic(s, &["respond", "r", "again"]);
    assert_eq!(stderr(&o), "error: run `r`: is completed, not suspended: nothing to respond to\n");

    let o = agentic(s, &["resume", "missing"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: no run `missing` in store"), "{}", stderr(&o));
}

#[test]
fn editing_the_spec_file_does_not_change_a_run_started_from_it() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("flow.yaml");
    std::fs::copy(fixture("approval.yaml"), &spec).unwrap();
    let o = agentic(s, &["run", spec.to_str().unwrap(), "--input", "input=x", "--memory-id", "f"]);
    assert_eq!(o.status.code(), Some(2));
    agentic(s, &["respond", "f", "ok"]);
    // The file changes between suspend and resume (a template, and the structure: the finalizer dropped) ...
    let text = std::fs::read_to_string(&spec).unwrap();
    let edited = text
        .replace("Final: ", "Done: ")
        .replace("agents: [processor, review, finalizer]", "agents: [processor, review]");
    std::fs::write(&spec, edited).unwrap();
    // ... the run continues on the text it started with (SERVER.md §5); `resume --spec` would move it.
    let o = agentic(s, &["resume", "f"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: x | ok\n");
}

#[test]
fn a_completed_memory_id_starts_a_new_turn_on_the_same_scope() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("counter.yaml");
    std::fs::write(
        &spec,
        "version: 1\nroot: count\nagents:\n  count: { kind: compute, value: \"(n | default(0)) + 1\", inputs: [], output_key: n }\n",
    )
    .unwrap();
    for expected in ["1\n", "2\n", "3\n"] {
        let o = agentic(s, &["run", spec.to_str().unwrap(), "--memory-id", "c"]);
        assert_eq!(stdout(&o), expected, "{}", stderr(&o));
    }
}

#[test]
fn a_completed_run_is_not_run_again_and_a_suspended_one_is_not_restarted_with_new_inputs() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=data", "--memory-id", "order-9"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // `run` with the id of the suspended run refuses: new inputs over a half-done state would not add up.
    let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=other", "--memory-id", "order-9"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        "run: order-9\nerror: run `order-9` already exists and is suspended; it waits for human-review: answer with \
         `agentic respond order-9 ..`, then `agentic resume order-9` (or choose another --memory-id)\n"
    );

    agentic(s, &["respond", "order-9", "APPROVED"]);
    // Answered: it waits only for the resume.
    let o = agentic(s, &["run", &fixture("approval.yaml"), "--input", "input=other", "--memory-id", "order-9"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        "run: order-9\nerror: run `order-9` already exists and is suspended; continue it with `agentic resume \
         order-9` (or choose another --memory-id)\n"
    );
    let o = agentic(s, &["resume", "order-9"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: data | APPROVED\n");
    let steps = |s: &Path| json_out(&agentic(s, &["show", "order-9", "--json"]))["history"].as_array().unwrap().len();
    let before = steps(s);

    // Resuming a completed run prints its result and runs nothing.
    let o = agentic(s, &["resume", "order-9", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        json_out(&o),
        json!({"run_id": "order-9", "status": "completed", "output": "Final: PROCESSED: data | APPROVED", "pending": []})
    );
    assert_eq!(stderr(&o), "run: order-9\nrun `order-9` completed earlier; nothing to resume\n");
    assert_eq!(steps(s), before, "nothing ran again");
    let o = agentic(s, &["show", "order-9", "--json"]);
    assert_eq!(json_out(&o)["status"], json!("completed"));
}

#[test]
fn a_run_whose_spec_moved_resumes_on_its_text() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("approval.yaml");
    std::fs::copy(fixture("approval.yaml"), &first).unwrap();
    let o = agentic(s, &["run", first.to_str().unwrap(), "--input", "input=x", "--memory-id", "moved-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let moved = dir.path().join("renamed.yaml");
    std::fs::rename(&first, &moved).unwrap();
    agentic(s, &["respond", "moved-1", "OK"]);

    let o = agentic(s, &["resume", "moved-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: x | OK\n");
}

#[test]
fn runs_lists_the_spec_name() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("flow.yaml");
    let text = std::fs::read_to_string(fixture("approval.yaml"))
        .unwrap()
        .replace("version: 1\n", "version: 1\nname: order-flow\n");
    std::fs::write(&spec, text).unwrap();
    let o = agentic(s, &["run", spec.to_str().unwrap(), "--input", "input=x", "--memory-id", "named-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let runs = json_out(&agentic(s, &["runs", "--json"]));
    assert_eq!(runs[0]["name"], json!("order-flow"), "the spec's name, not the root agent's (`approval`)");
}

/// Ctrl-C (SIGINT) cancels the run: it stops at a step boundary once the steps in flight finished, exits 1
/// saying how to continue, and is recorded `cancelled` with the steps it made (not left `running`, to be
/// mistaken for a crashed run).
#[test]
fn ctrl_c_cancels_the_run_and_records_it_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("count.yaml");
    std::fs::write(
        &spec,
        "version: 1\nroot: main\nagents:\n  main: { kind: loop, agents: [a], max_iterations: 3000000, output_key: n }\n  \
         a: { kind: compute, value: \"(n | default(0)) + 1\", inputs: [], output_key: n }\n",
    )
    .unwrap();
    let child = Cli::new(["run", spec.to_str().unwrap(), "--memory-id", "count", "--durability", "exit", "--json"])
        .store(&store)
        .spawn();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let killed = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted: cancelling run `count`"), "{}", stderr(&o));
    let printed: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(printed["status"], json!("cancelled"));

    let o = agentic(&store, &["show", "count", "--json"]);
    let shown: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(shown["status"], json!("cancelled"), "{shown}");
    let done = shown["state"]["n"].as_u64().unwrap();
    assert!(done > 0 && done < 3_000_000, "stopped after {done} iterations");
}

/// The first Ctrl-C lets a model call under way finish: its answer is paid for, so it is counted and kept
/// (the step completes), no later step starts, and the run is recorded `cancelled`; resuming it does not ask
/// the model again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_keeps_the_model_call_under_way_and_resume_does_not_ask_it_again() {
    let (model, calls) = crate::echo_model::model(std::time::Duration::from_millis(1500)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("ask.yaml");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nroot: main\n{}agents:\n  main: {{ kind: sequence, agents: [ask, after], output_key: out }}\n  \
             ask: {{ kind: llm, user: \"hello\", output_key: said }}\n  \
             after: {{ kind: compute, template: \"{{{{ said }}}}!\", output_key: out }}\n",
            crate::echo_model::models(&model)
        ),
    )
    .unwrap();
    let child = Cli::new(["run", spec.to_str().unwrap(), "--memory-id", "paid"]).store(&store).spawn();
    // Once the call is under way, Ctrl-C.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while calls.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the model was never called");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "run: paid\ninterrupted: cancelling run `paid` once the steps in flight finish (Ctrl-C again to stop \
             them now); `agentic resume paid --store {}` continues it\nerror: run cancelled\n",
            store.display()
        )
    );
    let shown = agentic(&store, &["show", "paid", "--json"]);
    let shown: Value = serde_json::from_str(stdout(&shown).trim()).unwrap();
    assert_eq!(shown["status"], json!("cancelled"));
    assert_eq!(shown["state"]["said"], json!("done(hello)"), "the answer is kept");
    assert_eq!(shown["state"].get("out"), None, "no step started after the Ctrl-C");
    assert_eq!(shown["usage"]["total"]["model_calls"], json!(1), "the paid call is counted");

    let o = Cli::new(["resume", "paid"]).store(&store).output_async().await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "done(hello)!\n");
    assert_eq!(calls.lock().unwrap().len(), 1, "the model was not asked again");
}

/// SPEC.md §4 through the CLI: a spec tool call over the `approve` threshold suspends the run with a `tool_call`
/// pending response; `respond` takes the bare string `approve`, records who answered (`cli:$USER`), and refuses
/// a stale `args_hash` and a second answer with exit 1; `resume` runs the call.
#[test]
fn respond_approves_a_tool_call_and_records_the_cli_user() {
    use agentic::engine::{CallEntry, ToolCallStatus};
    use agentic::store::SledStore;
    let dir = tempfile::tempdir().unwrap();
    let s = &dir.path().join("store");
    let spec = dir.path().join("desk.yaml");
    std::fs::write(
        &spec,
        r#"version: 1
root: desk
models:
  default:
    provider: scripted
    replies:
      - '{"tool_calls": [{"name": "refund", "arguments": {"amount": 150}}]}'
      - "Refunded."
agents:
  desk:
    kind: llm
    user: "Handle: {{ request }}"
    tools:
      - name: refund
        parameters: { amount: integer }
        template: "refunded {{ amount }}"
        effect: once
        approve: "args.amount > 100"
"#,
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let o = agentic(s, &["run", spec, "--input", "request=refund", "--memory-id", "desk-1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let pending = &json_out(&o)["pending"];
    assert_eq!(pending[0]["id"], json!("tool:root:0"), "{pending}");

    let stale = Cli::new(["respond", "desk-1", "tool:root:0", r#"{"decision": "approve", "args_hash": "00"}"#])
        .store(s)
        .output();
    assert_eq!(stale.status.code(), Some(1), "{}", stderr(&stale));
    let refused = "error: run `desk-1`: the answer to `tool:root:0` was given for another call (args_hash 00)";
    assert!(stderr(&stale).starts_with(refused), "{}", stderr(&stale));

    // An edit with a field the parameters do not name is refused (it would shadow a state key).
    let hash = agentic::engine::tool_args_hash("refund", &json!({"amount": 150}));
    let edit = format!(r#"{{"decision": "edit", "args": {{"amount": 90, "account": "x"}}, "args_hash": "{hash}"}}"#);
    let extra = Cli::new(["respond", "desk-1", "tool:root:0", &edit]).store(s).output();
    assert_eq!(extra.status.code(), Some(1), "{}", stderr(&extra));
    assert_eq!(
        stderr(&extra),
        "error: run `desk-1`: response `tool:root:0`: the edit has an unknown field `account` (the fields are: \
         amount)\n"
    );

    let o = Cli::new(["respond", "desk-1", "tool:root:0", "approve"]).store(s).env("USER", "ana").output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let again = Cli::new(["respond", "desk-1", "tool:root:0", "approve"]).store(s).env("USER", "bo").output();
    assert_eq!(again.status.code(), Some(1), "a second answer is refused: {}", stderr(&again));
    assert!(stderr(&again).starts_with("error: "), "{}", stderr(&again));

    // The answer holds who gave it.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answer = {
        let store = SledStore::open(s).unwrap().store_ref();
        rt.block_on(store.run_dyn("desk-1")).unwrap().unwrap().answers["tool:root:0"].clone()
    };
    assert_eq!(answer["by"], json!("cli:ana"), "{answer}");

    // The approved call runs on resume, and the scripted model, whose first reply answered the journaled
    // turn in the first process, gives its second.
    let o = agentic(s, &["resume", "desk-1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], json!("Refunded."));

    let store = SledStore::open(s).unwrap().store_ref();
    let records = rt.block_on(store.records_dyn("desk-1")).unwrap();
    let calls: Vec<(ToolCallStatus, Option<String>)> = records
        .into_iter()
        .flat_map(|r| r.calls)
        .filter_map(|c| match c {
            CallEntry::Tool(t) => Some((t.status, t.by)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            (ToolCallStatus::AwaitingApproval, None),
            (ToolCallStatus::Approved, Some("cli:ana".to_string())),
            (ToolCallStatus::Started, None),
            (ToolCallStatus::Finished, None),
        ]
    );
}
