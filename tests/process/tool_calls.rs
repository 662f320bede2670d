//! Durable tool calls (SPEC.md §4) with real processes: an `agentic run` of an `llm` agent whose tools are those
//! of an MCP server with side effects (`tests/peers/mcp_ledger.py`: each call appends a line to a ledger file),
//! its model a loopback OpenAI-compatible server in the test process. The run is killed with SIGKILL at the
//! moments that matter — after a tool's result was journaled while the model's next turn is in flight, and while
//! a tool call is under way — and `agentic resume` continues it: a finished call is not run again, an answered
//! model turn is not asked again, a call of effect `once` cut under way comes back in doubt (answered with what
//! it did), one of effect `retry` is sent again with the same idempotency key. Approvals (`approve:`) suspend the
//! run with a `tool:<agent path>:<n>` pending response answered by `agentic respond`: approve, edit, reject,
//! respond; a stale `args_hash` and a second answer are refused.
//! The in-process versions of these are in tests/it/tool_calls.rs.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::binary::{Cli, stderr, stdout};
use crate::common::{peer_script, peers_python};
use crate::mcp_peer::{calls, completion};

/// How long the delayed answers and tool calls take: far longer than any test waits for them, as each is cut by
/// a kill.
const FOREVER_MS: u64 = 120_000;

// ---------------------------------------------------------------------------------------------------------
// The loopback model

/// A model that answers a request without tool results with `first` (an assistant message calling tools), and
/// one with tool results with `done: <the results, joined by " | ">`; the first `slow` of those are delayed by
/// [`FOREVER_MS`]. Every request's body is kept.
struct Script {
    first: Value,
    slow: AtomicUsize,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let results = tool_results(&body);
        self.seen.lock().unwrap().push(body);
        if results.is_empty() {
            return completion(self.first.clone());
        }
        let texts: Vec<&str> = results.iter().map(|(_, text)| text.as_str()).collect();
        let answer = completion(json!({"role": "assistant", "content": format!("done: {}", texts.join(" | "))}));
        let delay = self.slow.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if delay { answer.set_delay(Duration::from_millis(FOREVER_MS)) } else { answer }
    }
}

/// The loopback model server and the bodies of the requests it got, in order.
struct Model {
    server: MockServer,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Model {
    /// A model whose first turn is `first`, its first `slow` answers to tool results delayed.
    async fn start(first: Value, slow: usize) -> Model {
        let server = MockServer::start().await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Script { first, slow: AtomicUsize::new(slow), seen: seen.clone() };
        Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(script).mount(&server).await;
        Model { server, seen }
    }

    fn requests(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests asked the first turn (carried no tool result).
    fn first_turns(&self) -> usize {
        self.requests().iter().filter(|b| tool_results(b).is_empty()).count()
    }

    /// How many requests carried tool results.
    fn follow_ups(&self) -> usize {
        self.requests().iter().filter(|b| !tool_results(b).is_empty()).count()
    }

    /// The tool results of the last request, as (call id, content).
    fn last_results(&self) -> Vec<(String, String)> {
        self.requests().last().map(tool_results).unwrap_or_default()
    }
}

/// A request's tool-result messages as (call id, content).
fn tool_results(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| (m["tool_call_id"].as_str().unwrap_or("").into(), m["content"].as_str().unwrap_or("").into()))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------------------
// The spec, the ledger and the CLI

/// A temporary directory with the store, the spec and the ledger of one test.
struct Desk {
    dir: tempfile::TempDir,
    python: PathBuf,
}

impl Desk {
    fn new(python: PathBuf) -> Desk {
        Desk { dir: tempfile::tempdir().unwrap(), python }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn ledger_path(&self) -> PathBuf {
        self.dir.path().join("ledger.jsonl")
    }

    /// The ledger's lines, parsed.
    fn ledger(&self) -> Vec<Value> {
        std::fs::read_to_string(self.ledger_path())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Writes the spec of a root `llm` agent `desk` (inside a sequence when `nested`) whose tools are the
    /// entry `tools` (`{mcp: ledger, ..}`) on the model `model`; its path.
    fn spec(&self, model: &Model, tools: &str, nested: bool) -> PathBuf {
        let root = if nested { "main" } else { "desk" };
        let mut text = format!(
            "version: 1\nroot: {root}\nmodels:\n  m: {{provider: openai, base_url: \"{}/v1\", model: gpt-test}}\n\
             mcp_servers:\n  ledger: {{command: ['{}', '{}', stdio]}}\nagents:\n  \
             desk:\n    kind: llm\n    model: m\n    user: \"{{{{ request }}}}\"\n    tools:\n      - {tools}\n    \
             output_key: reply\n",
            model.server.uri(),
            self.python.display(),
            peer_script("mcp_ledger.py"),
        );
        if nested {
            text.push_str("  main: {kind: sequence, agents: [desk], output_key: reply}\n");
        }
        let file = self.dir.path().join("desk.yaml");
        std::fs::write(&file, text).unwrap();
        file
    }

    /// `agentic ARGS..` on the test's store, the ledger peer's tools taking `slow_ms` for `slow_charge`.
    fn cli(&self, args: &[&str], slow_ms: u64) -> Cli {
        Cli::new(args).store(self.store()).env("LEDGER", self.ledger_path()).env("SLOW_MS", slow_ms.to_string())
    }

    /// Runs `agentic ARGS..` to its end.
    async fn agentic(&self, args: &[&str]) -> std::process::Output {
        self.cli(args, 0).output_async().await
    }

    /// Starts `agentic run SPEC --memory-id RUN --input request=..`, then kills it with SIGKILL once `ready`
    /// holds (30 s at most).
    async fn run_killed_when(&self, spec: &Path, run: &str, slow_ms: u64, ready: impl Fn() -> bool) {
        let args = ["run", spec.to_str().unwrap(), "--memory-id", run, "--input", "request=charge 30"];
        let mut child = self.cli(&args, slow_ms).spawn();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready() {
            if let Some(status) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                panic!("the run ended ({status}) before the kill: {}{}", stdout(&out), stderr(&out));
            }
            assert!(Instant::now() < deadline, "the moment to kill the run did not come in 30 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), None, "killed by a signal");
    }
}

/// The JSON object `--json` printed.
fn json_out(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(o), stderr(o)))
}

// ---------------------------------------------------------------------------------------------------------
// Crashes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_while_the_model_reads_a_tool_result_resumes_without_charging_or_asking_again() {
    let Some(python) = peers_python() else { return };
    let desk = Desk::new(python);
    let model = Model::start(calls(&[("c1", "charge", json!({"amount": 30}))]), 1).await;
    let spec = desk.spec(&model, "{mcp: ledger, filter: [charge]}", false);
    // The result is committed before the model's next turn is asked: kill while that turn is in flight.
    desk.run_killed_when(&spec, "r1", 0, || model.follow_ups() == 1).await;
    assert_eq!(desk.ledger().len(), 1);

    let o = desk.agentic(&["resume", "r1"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "done: charged 30\n");
    assert_eq!(
        desk.ledger(),
        [json!({"tool": "charge", "args": {"amount": 30}, "idempotency_key": "r1/root/1/c1"})],
        "charged once"
    );
    assert_eq!(model.first_turns(), 1, "the answered first turn is not asked again");
    assert_eq!(model.follow_ups(), 2, "the turn cut by the kill is asked again");
    assert_eq!(model.last_results(), [("c1".to_string(), "charged 30".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_cut_under_way_is_in_doubt_and_the_answer_given_reaches_the_model() {
    let Some(python) = peers_python() else { return };
    let desk = Desk::new(python);
    let model = Model::start(calls(&[("c1", "slow_charge", json!({"amount": 30}))]), 0).await;
    // MCP tools are of effect `once` unless the spec says otherwise.
    let spec = desk.spec(&model, "{mcp: ledger, filter: [slow_charge]}", false);
    desk.run_killed_when(&spec, "r2", FOREVER_MS, || desk.ledger().len() == 1).await;

    let o = desk.agentic(&["resume", "r2", "--json"]).await;
    assert_eq!(o.status.code(), Some(2), "suspended: {}", stderr(&o));
    let out = json_out(&o);
    assert_eq!(out["status"], "suspended");
    let pending = out["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["id"], "doubt:root:0");
    assert_eq!(pending[0]["kind"], "in_doubt");
    assert_eq!(pending[0]["data"]["tool"], "slow_charge");
    assert_eq!(pending[0]["data"]["args"], json!({"amount": 30}));
    assert_eq!(desk.ledger().len(), 1, "not sent again by itself");
    assert_eq!(model.requests().len(), 1);

    let o = desk.agentic(&["respond", "r2", "doubt:root:0", r#"{"result": "ok"}"#]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = desk.agentic(&["resume", "r2"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "done: ok\n");
    assert_eq!(
        desk.ledger(),
        [json!({"tool": "slow_charge", "args": {"amount": 30}, "idempotency_key": "r2/root/1/c1"})],
        "charged once"
    );
    assert_eq!(model.first_turns(), 1);
    assert_eq!(model.last_results(), [("c1".to_string(), "ok".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_of_effect_retry_cut_under_way_is_sent_again_with_the_same_idempotency_key() {
    let Some(python) = peers_python() else { return };
    let desk = Desk::new(python);
    let model = Model::start(calls(&[("c1", "slow_charge", json!({"amount": 30}))]), 0).await;
    let spec = desk.spec(&model, "{mcp: ledger, filter: [slow_charge], effect: retry}", false);
    desk.run_killed_when(&spec, "r3", FOREVER_MS, || desk.ledger().len() == 1).await;

    let o = desk.agentic(&["resume", "r3"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "done: charged 30\n");
    let line = json!({"tool": "slow_charge", "args": {"amount": 30}, "idempotency_key": "r3/root/1/c1"});
    assert_eq!(desk.ledger(), [line.clone(), line], "sent twice, with the same key");
    assert_eq!(model.first_turns(), 1);
    assert_eq!(model.last_results(), [("c1".to_string(), "charged 30".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_mcp_agent_cut_under_way_is_in_doubt_and_never_called_twice() {
    let Some(python) = peers_python() else { return };
    let desk = Desk::new(python);
    let spec = charge_spec(&desk);
    let args = ["run", spec.to_str().unwrap(), "--memory-id", "m1", "--input", "amount=30"];
    killed_at_ledger(&desk, &args, FOREVER_MS, 1).await;

    let o = desk.agentic(&["resume", "m1", "--json"]).await;
    assert_eq!(o.status.code(), Some(2), "suspended: {}", stderr(&o));
    let out = json_out(&o);
    assert_eq!(out["pending"][0]["id"], "doubt:root:0");
    assert_eq!(out["pending"][0]["kind"], "in_doubt");
    assert_eq!(out["pending"][0]["data"]["args"], json!({"amount": 30}));
    assert_eq!(desk.ledger().len(), 1, "not sent again by itself");

    let o = desk.agentic(&["respond", "m1", "doubt:root:0", r#"{"result": "charged 30 (seen on the card)"}"#]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = desk.agentic(&["resume", "m1"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "charged 30 (seen on the card)\n");
    assert_eq!(
        desk.ledger(),
        [json!({"tool": "slow_charge", "args": {"amount": 30}, "idempotency_key": "m1/root/1"})],
        "called once"
    );
}

/// A `kind: mcp` agent charging through the ledger peer's `slow_charge` (its `amount` from the input), written
/// as `charge.yaml` in the desk's directory.
fn charge_spec(desk: &Desk) -> std::path::PathBuf {
    let spec = desk.dir.path().join("charge.yaml");
    let text = format!(
        "version: 1\nroot: charge\nmcp_servers:\n  ledger: {{command: ['{}', '{}', stdio]}}\nagents:\n  \
         charge: {{kind: mcp, server: ledger, tool: slow_charge, output_key: charged}}\n",
        desk.python.display(),
        peer_script("mcp_ledger.py"),
    );
    std::fs::write(&spec, text).unwrap();
    spec
}

/// Starts `agentic ARGS..` with tool calls taking `slow_ms`, and kills it with SIGKILL once the ledger has
/// `lines` lines (30 s at most).
async fn killed_at_ledger(desk: &Desk, args: &[&str], slow_ms: u64, lines: usize) {
    let mut child = desk.cli(args, slow_ms).spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while desk.ledger().len() < lines {
        assert!(child.try_wait().unwrap().is_none(), "`agentic {}` ended before the kill", args.join(" "));
        assert!(Instant::now() < deadline, "the call was not made in 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The record of a run killed while it executes keeps the answers its resume was given: the `retry` that
/// resent an in-doubt call must not send it again when the resend is cut too (the cluster soak found a
/// third call of an effect-once tool after a take-over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_resent_as_answered_and_cut_again_is_in_doubt_again_not_sent_a_third_time() {
    let Some(python) = peers_python() else { return };
    let desk = Desk::new(python);
    let spec = charge_spec(&desk);
    let run = ["run", spec.to_str().unwrap(), "--memory-id", "m2", "--input", "amount=30"];
    killed_at_ledger(&desk, &run, FOREVER_MS, 1).await;
    let o = desk.agentic(&["resume", "m2", "--json"]).await;
    assert_eq!(o.status.code(), Some(2), "suspended: {}", stderr(&o));
    assert_eq!(json_out(&o)["pending"][0]["id"], "doubt:root:0");
    let o = desk.agentic(&["respond", "m2", "doubt:root:0", r#""retry""#]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The resend is under way when this resume is killed too.
    killed_at_ledger(&desk, &["resume", "m2"], FOREVER_MS, 2).await;
    let o = desk.agentic(&["resume", "m2", "--json"]).await;
    assert_eq!(o.status.code(), Some(2), "in doubt again, not sent again: {}", stderr(&o));
    let out = json_out(&o);
    assert_eq!(out["pending"][0]["id"], "doubt:root:0");
    assert_eq!(out["pending"][0]["kind"], "in_doubt");
    assert_eq!(desk.ledger().len(), 2, "the first call and the resend a person asked for");

    let o = desk.agentic(&["respond", "m2", "doubt:root:0", r#"{"result": "charged 30"}"#]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = desk.agentic(&["resume", "m2"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "charged 30\n");
    let line = json!({"tool": "slow_charge", "args": {"amount": 30}, "idempotency_key": "m2/root/1"});
    assert_eq!(desk.ledger(), [line.clone(), line], "called twice: once, and once more as answered");
}

// ---------------------------------------------------------------------------------------------------------
// Approvals

/// Refunds over 100 wait for a person.
const APPROVED_REFUNDS: &str = "{mcp: ledger, filter: [refund], approve: \"args.amount > 100\"}";

/// `agentic run` of `spec` as `run` to its suspension; the pending responses it printed with `--json`.
async fn suspended(desk: &Desk, spec: &Path, run: &str) -> Vec<Value> {
    let args = ["run", spec.to_str().unwrap(), "--memory-id", run, "--input", "request=refund", "--json"];
    let o = desk.agentic(&args).await;
    assert_eq!(o.status.code(), Some(2), "suspended: {}", stderr(&o));
    json_out(&o)["pending"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_over_the_threshold_waits_and_runs_once_with_the_edited_amount() {
    let Some(python) = peers_python() else { return };
    let desk = Desk::new(python);
    let model = Model::start(calls(&[("c1", "refund", json!({"amount": 150}))]), 0).await;
    let spec = desk.spec(&model, APPROVED_REFUNDS, false);
    let pending = suspended(&desk, &spec, "r4").await;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["id"], "tool:root:0");
    assert_eq!(pending[0]["kind"], "tool_call");
    assert_eq!(pending[0]["data"]["tool"], "refund");
    assert_eq!(pending[0]["data"]["args"], json!({"amount": 150}));
    let hash = agentic::engine::tool_args_hash("refund", &json!({"amount": 150}));
    assert_eq!(pending[0]["data"]["args_hash"], json!(hash));
    assert!(desk.ledger().is_empty(), "nothing refunded before the approval");

    // An answer for another call (a stale hash) is refused, and nothing is recorded.
    let stale = desk.agentic(&["respond", "r4", "tool:root:0", r#"{"decision": "approve", "args_hash": "00"}"#]).await;
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        stderr(&stale),
        format!(
            "error: run `r4`: the answer to `tool:root:0` was given for another call (args_hash 00); the pending \
             call's args_hash is {hash}: look at the call again and answer it\n"
        )
    );
    let edit = format!(r#"{{"decision": "edit", "args": {{"amount": 120}}, "args_hash": "{hash}"}}"#);
    let o = desk.agentic(&["respond", "r4", "tool:root:0", &edit]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let twice = desk.agentic(&["respond", "r4", "tool:root:0", "approve"]).await;
    assert_eq!(twice.status.code(), Some(1));
    assert_eq!(
        stderr(&twice),
        "error: run `r4`: response `tool:root:0` is already answered (resume the run to use the answer)\n"
    );

    let o = desk.agentic(&["resume", "r4"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "done: refunded 120\n");
    assert_eq!(
        desk.ledger(),
        [json!({"tool": "refund", "args": {"amount": 120}, "idempotency_key": "r4/root/1/c1"})],
        "the edited amount, once"
    );
    assert_eq!(model.first_turns(), 1, "the answered turn is not asked again");
    assert_eq!(model.follow_ups(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_reaches_the_model_and_a_response_stands_in_for_the_tool_inside_a_sequence() {
    let Some(python) = peers_python() else { return };
    for (run, answer, result) in [
        ("r5", r#"{"decision": "reject", "message": "over the limit"}"#, "rejected: over the limit"),
        ("r6", r#"{"decision": "respond", "result": "refunded by hand"}"#, "refunded by hand"),
    ] {
        let desk = Desk::new(python.clone());
        let model = Model::start(calls(&[("c1", "refund", json!({"amount": 500}))]), 0).await;
        // The agent is the first of a sequence: its path is `root/0`.
        let spec = desk.spec(&model, APPROVED_REFUNDS, true);
        let pending = suspended(&desk, &spec, run).await;
        let ids: Vec<&str> = pending.iter().map(|p| p["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["tool:root/0:0"], "{run}");
        let o = desk.agentic(&["respond", run, "tool:root/0:0", answer]).await;
        assert_eq!(o.status.code(), Some(0), "{run}: {}", stderr(&o));
        let o = desk.agentic(&["resume", run]).await;
        assert_eq!(o.status.code(), Some(0), "{run}: {}", stderr(&o));
        assert_eq!(stdout(&o), format!("done: {result}\n"), "{run}");
        assert!(desk.ledger().is_empty(), "{run}: the tool was not called");
        assert_eq!(model.last_results(), [("c1".to_string(), result.to_string())], "{run}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_approvals_of_one_model_turn_wait_together_and_are_answered_in_either_order() {
    let Some(python) = peers_python() else { return };
    for (run, order) in [("r7", [0, 1]), ("r8", [1, 0])] {
        let desk = Desk::new(python.clone());
        let turn = calls(&[
            ("c1", "refund", json!({"amount": 500})),
            ("c2", "refund", json!({"amount": 900})),
            ("c3", "refund", json!({"amount": 40})),
        ]);
        let model = Model::start(turn, 0).await;
        let spec = desk.spec(&model, APPROVED_REFUNDS, false);
        let pending = suspended(&desk, &spec, run).await;
        let ids: Vec<&str> = pending.iter().map(|p| p["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["tool:root:0", "tool:root:1"], "{run}: both wait together");
        // The small refund needs no approval: it ran while the others wait.
        let small = json!({"tool": "refund", "args": {"amount": 40}, "idempotency_key": format!("{run}/root/1/c3")});
        assert_eq!(desk.ledger(), std::slice::from_ref(&small), "{run}");

        let answers = [("tool:root:0", "reject"), ("tool:root:1", "approve")];
        for i in order {
            let (id, answer) = answers[i];
            let o = desk.agentic(&["respond", run, id, answer]).await;
            assert_eq!(o.status.code(), Some(0), "{run} {id}: {}", stderr(&o));
        }
        let o = desk.agentic(&["resume", run]).await;
        assert_eq!(o.status.code(), Some(0), "{run}: {}", stderr(&o));
        assert_eq!(stdout(&o), "done: rejected | refunded 900 | refunded 40\n", "{run}");
        let big = json!({"tool": "refund", "args": {"amount": 900}, "idempotency_key": format!("{run}/root/1/c2")});
        assert_eq!(desk.ledger(), [small, big], "{run}: each approved call once");
        assert_eq!(model.first_turns(), 1, "{run}");
    }
}
