//! Budgets with real processes (SPEC.md §3): a run with a 1 000-token budget over a loopback model server that
//! reports 300 tokens a call suspends at the call that crosses it (the fourth: 1 200 of 1 000), with the counts;
//! an answer that is no limit is refused; raising the budget and resuming completes it without calling the
//! model again for the crossing call; `show`, `show --json` and the report give tokens, calls and cost per agent
//! and in total. A budget with `on_exceed: fail` fails the run at the crossing call, and `stop` ends a
//! suspended one.

#![allow(clippy::unwrap_used)]

use serde_json::Value;
use wiremock::MockServer;

use crate::binary::{agentic, stderr, stdout};

async fn model() -> MockServer {
    crate::echo_model::metered("a paragraph").await
}

fn spec(server: &MockServer, budget: &str) -> String {
    format!(
        r#"version: 1
name: chapters
root: book
budget: {budget}
models:
  writer:
    provider: openai
    base_url: "{}/v1"
    model: gpt-test
    prices: {{ input_per_mtok: 2.5, output_per_mtok: 10 }}
agents:
  book: {{ kind: sequence, agents: [one, two, three, four, five], output_key: last }}
  one: {{ kind: llm, model: writer, user: "chapter 1", output_key: c1 }}
  two: {{ kind: llm, model: writer, user: "chapter 2", output_key: c2 }}
  three: {{ kind: llm, model: writer, user: "chapter 3", output_key: c3 }}
  four: {{ kind: llm, model: writer, user: "chapter 4", output_key: c4 }}
  five: {{ kind: llm, model: writer, user: "chapter 5", output_key: last }}
"#,
        server.uri()
    )
}

async fn calls(server: &MockServer) -> usize {
    server.received_requests().await.unwrap_or_default().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_suspends_at_the_call_that_crosses_its_budget_and_completes_once_raised() {
    let server = model().await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("chapters.yaml");
    std::fs::write(&file, spec(&server, "{ tokens: 1000 }")).unwrap();

    let run = agentic(&store, &["run", file.to_str().unwrap(), "--memory-id", "book-1"]);
    assert_eq!(run.status.code(), Some(2), "{}{}", stdout(&run), stderr(&run));
    let said = format!("{}{}", stdout(&run), stderr(&run));
    assert!(
        said.contains("budget:root/3 (agent `four`): The budget of `book` is spent (1200 tokens of 1000) at a model call of `four`"),
        "{said}"
    );
    // The fourth call crossed it; nothing after it ran.
    assert_eq!(calls(&server).await, 4);

    let shown = agentic(&store, &["show", "book-1", "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["status"], "suspended");
    assert_eq!(shown["usage"]["total"]["tokens"], 1200);
    assert_eq!(shown["usage"]["total"]["model_calls"], 4);
    assert_eq!(shown["usage"]["agents"][3]["agent"], "four");
    assert_eq!(shown["usage"]["agents"][3]["tokens"], 300);

    // An answer that is no limit, or does not raise the one reached above what is used, is refused, and
    // nothing is recorded.
    for (answer, says) in [
        ("more please", "a budget is answered with a new limit"),
        ("1100", "the new `tokens` limit, 1100, must be above what is used already, 1200"),
        ("{\"cost_usd\": 1}", "this budget has no `cost_usd` limit to raise (it limits `tokens`)"),
    ] {
        let bad = agentic(&store, &["respond", "book-1", answer]);
        assert_eq!(bad.status.code(), Some(1), "{answer}");
        assert!(stderr(&bad).contains(says), "{answer}: {}", stderr(&bad));
    }

    let raised = agentic(&store, &["respond", "book-1", "3000"]);
    assert_eq!(raised.status.code(), Some(0), "{}", stderr(&raised));
    let resumed = agentic(&store, &["resume", "book-1"]);
    assert_eq!(resumed.status.code(), Some(0), "{}{}", stdout(&resumed), stderr(&resumed));
    // The crossing call's answer was kept: only the fifth chapter called the model.
    assert_eq!(calls(&server).await, 5);

    let shown = agentic(&store, &["show", "book-1"]);
    let text = stdout(&shown);
    for (i, name) in ["one", "two", "three", "four", "five"].iter().enumerate() {
        let line = format!("  {name} (root/{i}): 300 tokens (200 in, 100 out), 1 model call, $0.001500 [writer]\n");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
    assert!(text.contains("  total: 1500 tokens (1000 in, 500 out), 5 model calls, $0.007500\n"), "{text}");

    let report = dir.path().join("report.html");
    let out = agentic(&store, &["report", "book-1", "--output", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = std::fs::read_to_string(&report).unwrap();
    let four = "\">four</td><td><code>root&#x2f;3</code></td><td>llm</td><td class=\"num\">1</td>";
    let row = html.split(four).nth(1).and_then(|rest| rest.split("</tr>").next()).unwrap_or_default();
    let tail = "<td class=\"num\">200</td><td class=\"num\">100</td><td class=\"num\">1</td><td class=\"num\">$0.001500</td>\
         <td class=\"models\">writer</td>";
    assert!(row.ends_with(tail), "row of `four`: {row}");
    assert!(html.contains("<dd id=\"run-tokens\">1500</dd>"), "the run's tokens");
    assert!(html.contains("<dd id=\"run-cost\">$0.007500</dd>"), "the run's cost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_exceed_fail_fails_at_the_crossing_call_and_stop_ends_a_suspended_run() {
    let server = model().await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("chapters.yaml");
    std::fs::write(&file, spec(&server, "{ model_calls: 2, on_exceed: fail }")).unwrap();
    let run = agentic(&store, &["run", file.to_str().unwrap(), "--memory-id", "strict"]);
    assert_eq!(run.status.code(), Some(1), "{}", stdout(&run));
    assert!(stderr(&run).contains("the budget of `book` is spent: 2 model calls of 2"), "{}", stderr(&run));
    // The third call was refused before it was sent; the two made are counted, though the run failed.
    assert_eq!(calls(&server).await, 2);
    let shown: Value = serde_json::from_slice(&agentic(&store, &["show", "strict", "--json"]).stdout).unwrap();
    assert_eq!(shown["usage"]["total"]["model_calls"], 2);
    assert_eq!(shown["usage"]["total"]["tokens"], 600);

    std::fs::write(&file, spec(&server, "{ cost_usd: 0.001 }")).unwrap();
    let run = agentic(&store, &["run", file.to_str().unwrap(), "--memory-id", "cheap"]);
    assert_eq!(run.status.code(), Some(2), "{}{}", stdout(&run), stderr(&run));
    let said = format!("{}{}", stdout(&run), stderr(&run));
    assert!(said.contains("($0.001500 of $0.001000)"), "{said}");
    let stop = agentic(&store, &["respond", "cheap", "\"stop\""]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
    let ended = agentic(&store, &["resume", "cheap"]);
    assert_eq!(ended.status.code(), Some(1));
    assert!(stderr(&ended).contains("stopped at its budget, as answered"), "{}", stderr(&ended));
    // The call that crossed it was paid for: still counted once the run failed.
    let shown: Value = serde_json::from_slice(&agentic(&store, &["show", "cheap", "--json"]).stdout).unwrap();
    assert_eq!(shown["usage"]["total"]["model_calls"], 1);
    assert_eq!(shown["usage"]["total"]["cost_usd"], 0.0015);
}

/// Four LLM agents in parallel under one budget.
fn fan_out(server: &MockServer, budget: &str) -> String {
    format!(
        r#"version: 1
name: fan
root: all
models:
  writer: {{ provider: openai, base_url: "{}/v1", model: gpt-test }}
agents:
  all: {{ kind: parallel, agents: [w1, w2, w3, w4], budget: {budget} }}
  w1: {{ kind: llm, model: writer, user: "one", output_key: o1 }}
  w2: {{ kind: llm, model: writer, user: "two", output_key: o2 }}
  w3: {{ kind: llm, model: writer, user: "three", output_key: o3 }}
  w4: {{ kind: llm, model: writer, user: "four", output_key: o4 }}
"#,
        server.uri()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_cannot_overrun_a_call_budget_and_one_answer_raises_a_budget_for_every_branch() {
    let server = model().await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("fan.yaml");
    // Four branches start together: one call is let through (the branches refused fail the run, which may
    // stop that call before it is sent).
    std::fs::write(&file, fan_out(&server, "{ model_calls: 1, on_exceed: fail }")).unwrap();
    for i in 0..3 {
        let run = agentic(&store, &["run", file.to_str().unwrap(), "--memory-id", &format!("calls-{i}")]);
        assert_eq!(run.status.code(), Some(1), "{}", stdout(&run));
        assert!(stderr(&run).contains("1 model call of 1"), "{}", stderr(&run));
        assert!(calls(&server).await <= i + 1, "{} calls after {} runs", calls(&server).await, i + 1);
    }

    // A token budget: each call under way before the first ended crossed it, each branch that had not sent
    // its call yet was refused before sending; every branch waits on the one budget.
    server.reset().await;
    let server_calls = model().await;
    std::fs::write(&file, fan_out(&server_calls, "{ tokens: 100 }")).unwrap();
    let run = agentic(&store, &["run", file.to_str().unwrap(), "--memory-id", "tokens"]);
    assert_eq!(run.status.code(), Some(2), "{}{}", stdout(&run), stderr(&run));
    let shown: Value = serde_json::from_slice(&agentic(&store, &["show", "tokens", "--json"]).stdout).unwrap();
    let pending: Vec<&str> = shown["pending"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(pending, ["budget:root/0", "budget:root/1", "budget:root/2", "budget:root/3"]);
    let sent = calls(&server_calls).await;
    assert!((1..=4).contains(&sent), "{sent} calls");
    assert_eq!(shown["usage"]["total"]["tokens"], 300 * sent as u64, "every call sent is counted");
    // One answer, without an id, for the one budget.
    let raised = agentic(&store, &["respond", "tokens", "5000"]);
    assert_eq!(raised.status.code(), Some(0), "{}", stderr(&raised));
    let resumed = agentic(&store, &["resume", "tokens"]);
    assert_eq!(resumed.status.code(), Some(0), "{}{}", stdout(&resumed), stderr(&resumed));
    // The calls made before the suspension are not sent again; the branches refused send theirs now.
    assert_eq!(calls(&server_calls).await, 4, "no call was sent again");
}
