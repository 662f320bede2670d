//! The journaled calls of an `llm` agent (SPEC.md §4) as `agentic show --calls`, `show`, `GET
//! /api/v1/runs/{id}/calls`, `GET /api/v1/runs/{id}`, the event stream and the report show them, through the
//! real binaries: call records are written into a sled store directly (no model needed), then read back.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use agentic::engine::{
    CallEntry, Effect, InvocationRecord, ModelTurnEntry, PendingKind, PendingResponse, RunRecord, StepRecord,
    ToolCallEntry, ToolCallStatus,
};
use agentic::store::SledStore;
use serde_json::{Value, json};

use crate::binary::{Serve, agentic, stderr, stdout};
use crate::common;

/// Tool call `n` of `tool` with `args`, changed to `status` at `at_us`.
fn tool(n: u32, name: &str, args: Value, status: ToolCallStatus, at_us: u64) -> ToolCallEntry {
    ToolCallEntry { at_us, ..ToolCallEntry::new(n, 0, format!("c{n}"), name, args, status) }
}

/// Model turn 0 of `gpt-x`, asking for `charge` and `refund`.
fn turn0() -> CallEntry {
    CallEntry::Model(ModelTurnEntry {
        turn: 0,
        model: "gpt-x".into(),
        request: vec![json!({"role": "user", "content": "charge 3, refund 5"})],
        options: None,
        purpose: None,
        response: json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c0", "name": "charge", "arguments": {"amount": 3}},
            {"id": "c1", "name": "refund", "arguments": {"amount": 5}}]},
            "usage": {"input": 10, "output": 4}, "finish_reason": "tool_calls"}),
        usage: Default::default(),
        at_us: 1_000,
    })
}

/// A record of calls of the invocation at `root/0` still running.
fn calls(run_id: &str, seq: u64, entries: Vec<CallEntry>) -> StepRecord {
    StepRecord { calls: entries, ..StepRecord::new(run_id, seq, "root/0") }
}

fn run(run_id: &str, status: &str, pending: Vec<PendingResponse>) -> RunRecord {
    let run: RunRecord = serde_json::from_value(json!({
        "run_id": run_id, "name": "shop", "fingerprint": "f", "status": status,
        "created_at_ms": 1, "updated_at_ms": 2,
    }))
    .unwrap();
    RunRecord { pending, ..run }
}

/// Writes run `c1` (suspended: `refund` #1 waits for approval after `charge` #0, approved by `token`, ran)
/// and run `c2` (failed: its invocation failed while `charge` #0 was started) into the sled store `store`.
async fn seed(store: &Path) {
    let s = SledStore::open(store).unwrap().store_ref();
    let approved = ToolCallEntry {
        by: Some("token".into()),
        ..tool(0, "charge", json!({"amount": 3}), ToolCallStatus::Approved, 2_000)
    };
    let started = ToolCallEntry {
        effect: Effect::Once,
        ..tool(0, "charge", json!({"amount": 3}), ToolCallStatus::Started, 3_000)
    };
    let finished = ToolCallEntry {
        result: Some(json!({"ok": true})),
        ..tool(0, "charge", json!({"amount": 3}), ToolCallStatus::Finished, 4_000)
    };
    let waiting = tool(1, "refund", json!({"amount": 5}), ToolCallStatus::AwaitingApproval, 5_000);
    let mut approval = PendingResponse::new("tool:root/0:1", "Run `refund`?", "clerk");
    approval.kind = PendingKind::ToolCall;
    approval.data = json!({"tool": "refund", "args": {"amount": 5}, "n": 1, "agent_path": "root/0",
                           "args_hash": agentic::engine::tool_args_hash("refund", &json!({"amount": 5}))});
    let c1 = [
        calls("c1", 1, vec![turn0(), CallEntry::Tool(approved), CallEntry::Tool(started.clone())]),
        calls("c1", 2, vec![CallEntry::Tool(finished), CallEntry::Tool(waiting)]),
    ];
    let failed = StepRecord {
        failed: true,
        invocation: Some(InvocationRecord {
            agent: "clerk".into(),
            path: "root/0".into(),
            inputs: serde_json::Map::new(),
            output: Value::Null,
            started_at_us: 500,
            ended_at_us: 6_000,
            attempt: 1,
            tokens: None,
            usage: None,
            error: Some("boom".into()),
            item: None,
        }),
        ..StepRecord::new("c2", 2, "root/0")
    };
    let c2 = [calls("c2", 1, vec![turn0(), CallEntry::Tool(started)]), failed];
    s.put_run_dyn(run("c1", "suspended", vec![approval])).await.unwrap();
    s.put_run_dyn(run("c2", "failed", Vec::new())).await.unwrap();
    for r in c1.into_iter().chain(c2) {
        s.append_dyn(r).await.unwrap();
    }
    s.flush_dyn().await.unwrap();
}

/// `show c1 --calls`, as printed.
const C1_CALLS: &str = r#"1  root/0  clerk  model gpt-x turn 0  calls charge, refund
1  root/0  clerk  tool charge #0  approved  {"amount":3}  by token
1  root/0  clerk  tool charge #0  started  {"amount":3}
2  root/0  clerk  tool charge #0  finished  {"amount":3}  -> {"ok":true}
2  root/0  clerk  tool refund #1  awaiting_approval  {"amount":5}
"#;

/// `show c1 --calls --json`, as `GET /api/v1/runs/c1/calls` answers it.
fn c1_json() -> Value {
    let head = json!({"seq": 1, "path": "root/0", "agent": "clerk"});
    let with = |head: &Value, fields: Value| {
        let mut v = head.clone();
        v.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        v
    };
    let head2 = json!({"seq": 2, "path": "root/0", "agent": "clerk"});
    json!([
        with(
            &head,
            json!({"type": "model", "turn": 0, "model": "gpt-x",
            "request": [{"role": "user", "content": "charge 3, refund 5"}],
            "response": {"message": {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c0", "name": "charge", "arguments": {"amount": 3}},
                {"id": "c1", "name": "refund", "arguments": {"amount": 5}}]},
                "usage": {"input": 10, "output": 4}, "finish_reason": "tool_calls"},
            "at_us": 1000})
        ),
        with(
            &head,
            json!({"type": "tool", "n": 0, "turn": 0, "call_id": "c0", "tool": "charge",
            "args": {"amount": 3}, "status": "approved", "by": "token", "at_us": 2000})
        ),
        with(
            &head,
            json!({"type": "tool", "n": 0, "turn": 0, "call_id": "c0", "tool": "charge",
            "args": {"amount": 3}, "status": "started", "effect": "once", "at_us": 3000})
        ),
        with(
            &head2,
            json!({"type": "tool", "n": 0, "turn": 0, "call_id": "c0", "tool": "charge",
            "args": {"amount": 3}, "status": "finished", "result": {"ok": true}, "at_us": 4000})
        ),
        with(
            &head2,
            json!({"type": "tool", "n": 1, "turn": 0, "call_id": "c1", "tool": "refund",
            "args": {"amount": 5}, "status": "awaiting_approval", "at_us": 5000})
        ),
    ])
}

fn ok_stdout(store: &Path, args: &[&str]) -> String {
    let o = agentic(store, args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o)
}

/// Server-sent events as `(name, data)`.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            Some((name.to_string(), serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journaled_calls_are_shown_by_show_the_api_the_events_and_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    seed(&store).await;

    // The CLI on the store.
    assert_eq!(ok_stdout(&store, &["show", "c1", "--calls"]), C1_CALLS);
    let printed: Value = serde_json::from_str(&ok_stdout(&store, &["show", "c1", "--calls", "--json"])).unwrap();
    assert_eq!(printed, c1_json());
    assert_eq!(
        ok_stdout(&store, &["show", "c2", "--calls"]),
        "1  root/0  clerk  model gpt-x turn 0  calls charge, refund\n1  root/0  clerk  tool charge #0  started  {\"amount\":3}\n"
    );
    let shown = ok_stdout(&store, &["show", "c1"]);
    assert!(shown.contains("steps:   2\n"), "{shown}");
    assert!(
        shown.contains("pending:\n  tool:root/0:1 (agent `clerk`): Run `refund`?\n    tool refund {\"amount\":5}\n"),
        "{shown}"
    );
    let shown: Value = serde_json::from_str(&ok_stdout(&store, &["show", "c1", "--json"])).unwrap();
    assert_eq!(shown["pending"][0]["kind"], "tool_call");
    assert_eq!(shown["pending"][0]["data"]["tool"], "refund");
    assert_eq!(shown["history"], json!([]), "call records are no invocations");
    let unknown = agentic(&store, &["show", "nope", "--calls"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", stderr(&unknown));

    // The server on the same store.
    let served = Serve::on(&store).start();
    let url = served.url.clone();
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        async move {
            let r = http.get(path).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, body) = get(format!("{url}/api/v1/runs/c1/calls")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), c1_json());
    let (status, body) = get(format!("{url}/api/v1/runs/c2/calls")).await;
    assert_eq!(status, 200, "{body}");
    let c2: Value = serde_json::from_str(&body).unwrap();
    let shape: Vec<(Value, Value, Value)> =
        c2.as_array().unwrap().iter().map(|c| (c["seq"].clone(), c["agent"].clone(), c["type"].clone())).collect();
    assert_eq!(shape, [(json!(1), json!("clerk"), json!("model")), (json!(1), json!("clerk"), json!("tool"))]);
    let (status, body) = get(format!("{url}/api/v1/runs/nope/calls")).await;
    assert_eq!(status, 404, "{body}");

    // The run's pending approval says what it is about.
    let (_, body) = get(format!("{url}/api/v1/runs/c1")).await;
    let c1: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(c1["pending"][0]["kind"], "tool_call", "{c1}");
    assert_eq!(c1["pending"][0]["data"]["args"], json!({"amount": 5}));
    assert_eq!(c1["history"], json!([]));

    // The CLI through the server holding the store: the same lines, from `/calls`.
    assert_eq!(ok_stdout(&store, &["show", "c1", "--calls"]), C1_CALLS);

    // The event stream of the failed run, replayed: one event per journaled call, then the failure.
    let (status, body) = get(format!("{url}/api/v1/runs/c2/events")).await;
    assert_eq!(status, 200, "{body}");
    let replayed = events(&body);
    let names: Vec<&str> = replayed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["model_turn", "tool_call", "agent_failed", "failed"], "{body}");
    assert_eq!(replayed[0].1, json!({"seq": 1, "path": "root/0", "agent": "clerk", "turn": 0, "model": "gpt-x"}));
    assert_eq!(
        replayed[1].1,
        json!({"seq": 1, "path": "root/0", "agent": "clerk", "n": 0, "call_id": "c0", "tool": "charge",
               "status": "started", "args": {"amount": 3}})
    );
    assert!(body.contains("id: 1\n"), "journaled call events carry their step as id: {body}");

    // The suspended run's stream: its calls, then `suspended`.
    let mut live = http.get(format!("{url}/api/v1/runs/c1/events")).send().await.unwrap();
    let mut text = String::new();
    let overall = Instant::now() + Duration::from_secs(30);
    common::read_until(&mut live, &mut text, "event: suspended", overall, Duration::from_secs(20)).await;
    let statuses: Vec<(String, Value, Value)> = events(&text)
        .into_iter()
        .filter(|(n, _)| n == "tool_call")
        .map(|(n, d)| (n, d["status"].clone(), d.get("by").cloned().unwrap_or(Value::Null)))
        .collect();
    assert_eq!(
        statuses,
        [
            ("tool_call".to_string(), json!("approved"), json!("token")),
            ("tool_call".to_string(), json!("started"), Value::Null),
            ("tool_call".to_string(), json!("finished"), Value::Null),
            ("tool_call".to_string(), json!("awaiting_approval"), Value::Null),
        ]
    );
    drop(live);

    // The report: a calls table under the agent, one row per call.
    let (status, html) = get(format!("{url}/api/v1/runs/c1/report")).await;
    assert_eq!(status, 200);
    let row = concat!(
        r#"<tr class="call-tool"><td class="num">1</td><td>1</td><td class="num">0</td>"#,
        r#"<td>tool <strong>charge #0</strong></td><td>finished</td><td><code>{&quot;amount&quot;:3}</code></td>"#,
        r#"<td>{&quot;ok&quot;:true}</td><td>approved</td><td>token</td></tr>"#
    );
    assert!(html.contains(row), "{html}");
    assert!(html.contains(r#"<td>tool <strong>refund #1</strong></td><td>awaiting_approval</td>"#), "{html}");

    // An approval through the API is recorded with who gave it (no token: `anonymous`).
    let answered = http
        .post(format!("{url}/api/v1/runs/c1/responses/tool%3Aroot%2F0%3A1"))
        .json(&json!({"value": "approve"}))
        .send()
        .await
        .unwrap();
    let status = answered.status().as_u16();
    let body = answered.text().await.unwrap();
    // The seeded run has no spec to continue on: the answer is recorded, the resumption refused.
    assert!(status == 202 || status == 422, "{status} {body}");
    let (_, body) = get(format!("{url}/api/v1/store/runs/c1")).await;
    let record: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(record["answers"]["tool:root/0:1"], json!({"decision": "approve", "by": "anonymous"}), "{record}");
}

/// Issue #42, `show` and `runs` cosmetics: a mapper item's calls print their path and item as the pending ids
/// do (`root/0#1`); a rejection without a message prints no `message:`; a pending response whose answer is
/// recorded but not yet used says so in `show` and `runs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_calls_empty_rejections_and_answered_responses_are_shown_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let s = SledStore::open(&store).unwrap().store_ref();
        let rejected = ToolCallEntry {
            message: Some(String::new()),
            by: Some("cli:ana".into()),
            ..tool(0, "pay", json!({}), ToolCallStatus::Rejected, 2_000)
        };
        let waiting = tool(0, "pay", json!({}), ToolCallStatus::AwaitingApproval, 3_000);
        let item = |seq: u64, tag: &str, entry: ToolCallEntry| StepRecord {
            item: Some(format!("|root/0#{tag}")),
            ..calls("c3", seq, vec![CallEntry::Tool(entry)])
        };
        let mut approval = PendingResponse::new("tool:root/0#1:0", "Run `pay`?", "clerk");
        approval.kind = PendingKind::ToolCall;
        approval.data = json!({"tool": "pay", "args": {}, "n": 0, "agent_path": "root/0"});
        let mut c3 = run("c3", "suspended", vec![approval]);
        c3.answers.insert("tool:root/0#1:0".into(), json!({"decision": "approve", "by": "cli:ana"}));
        s.put_run_dyn(c3).await.unwrap();
        s.append_dyn(item(1, "0", rejected)).await.unwrap();
        s.append_dyn(item(2, "1", waiting)).await.unwrap();
        s.flush_dyn().await.unwrap();
    }
    assert_eq!(
        ok_stdout(&store, &["show", "c3", "--calls"]),
        "1  root/0#0  clerk  tool pay #0  rejected  {}  by cli:ana\n2  root/0#1  clerk  tool pay #0  \
         awaiting_approval  {}\n"
    );
    let shown = ok_stdout(&store, &["show", "c3"]);
    assert!(
        shown.contains(
            "pending:\n  tool:root/0#1:0 (agent `clerk`): Run `pay`? (answered; resume to continue)\n    tool pay {}\n"
        ),
        "{shown}"
    );
    let runs = ok_stdout(&store, &["runs"]);
    let line = runs.lines().find(|l| l.starts_with("c3 ")).unwrap_or_default();
    assert!(line.ends_with("  tool:root/0#1:0 (answered; resume to continue)"), "{runs}");
}
