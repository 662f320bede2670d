//! Recordings (SPEC.md §5) with real processes: `agentic run --record` on a loopback OpenAI-compatible model,
//! then `--replay` with that model server stopped (same output, nothing sent), a changed prompt failing the
//! strict replay naming the agent and the field, a lenient replay calling only what changed, `agentic calls`
//! printing the same calls from the store, `--replay-run`, and `fork --reuse-calls` making no model request
//! for the steps whose request did not change.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::binary::{Cli, stderr, stdout};
use crate::mcp_peer::{calls, completion};

/// A model that calls `lookup {"order": "A1"}` when offered tools and not yet given a result, answers `found:
/// <result>` once given one, and `done(<last message>)` otherwise. Keeps every request's body.
struct Clerk(Arc<Mutex<Vec<Value>>>);

impl Respond for Clerk {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        self.0.lock().unwrap().push(body.clone());
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        if last["role"] == "tool" {
            return completion(
                json!({"role": "assistant", "content": format!("found: {}", last["content"].as_str().unwrap())}),
            );
        }
        if body.get("tools").is_some() {
            return completion(calls(&[("c1", "lookup", json!({"order": "A1"}))]));
        }
        completion(json!({"role": "assistant", "content": format!("done({})", last["content"].as_str().unwrap())}))
    }
}

async fn model() -> (MockServer, Arc<Mutex<Vec<Value>>>) {
    let server = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Clerk(seen.clone()))
        .mount(&server)
        .await;
    (server, seen)
}

/// A sequence of `clerk` (an llm agent with the tool `lookup`) and `writer` (an llm agent without tools) on the
/// model at `uri`; `writer`'s prompt is `Write about {{ found }}` prefixed by `prefix`.
fn spec(dir: &Path, uri: &str, prefix: &str) -> PathBuf {
    let text = format!(
        "version: 1\nroot: main\nmodels:\n  m: {{provider: openai, base_url: \"{uri}/v1\", model: gpt-test}}\n\
         agents:\n  clerk:\n    kind: llm\n    model: m\n    user: \"{{{{ request }}}}\"\n    tools:\n      \
         - name: lookup\n        description: Finds an order\n        parameters: {{ order: string }}\n        \
         value: '{{\"order\": order, \"paid\": 150}}'\n    output_key: found\n  writer:\n    kind: llm\n    \
         model: m\n    user: \"{prefix}Write about {{{{ found }}}}\"\n    output_key: reply\n  main: {{kind: sequence, \
         agents: [clerk, writer], output_key: reply}}\n"
    );
    let file = dir.join("desk.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn run(store: &Path, args: &[&str]) -> std::process::Output {
    Cli::new(args).store(store).output()
}

fn json_out(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(o), stderr(o)))
}

/// The recording's lines, parsed, ordered by path, kind and number.
fn lines(text: &str) -> Vec<Value> {
    let mut calls: Vec<Value> =
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    calls.sort_by_key(|c| {
        (c["path"].as_str().unwrap().to_string(), c["kind"].as_str().unwrap().to_string(), c["n"].as_u64())
    });
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_replays_without_the_model_and_a_changed_prompt_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, seen) = model().await;
    let file = spec(dir.path(), &server.uri(), "");
    let spec_arg = file.to_str().unwrap();
    let rec = dir.path().join("rec.jsonl");
    let rec_arg = rec.to_str().unwrap();

    let o = run(&store, &["run", spec_arg, "--input", "request=where is A1", "--record", rec_arg, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let first = json_out(&o);
    assert_eq!(first["output"], json!("done(Write about found: {\"order\":\"A1\",\"paid\":150})"));
    assert!(stderr(&o).contains(&format!("recorded 4 call(s) to {rec_arg}")), "{}", stderr(&o));
    assert_eq!(seen.lock().unwrap().len(), 3, "two turns of the clerk, one of the writer");

    let recorded = lines(&std::fs::read_to_string(&rec).unwrap());
    let summary: Vec<(String, String, u64, String)> = recorded
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().into(),
                c["kind"].as_str().unwrap().into(),
                c["n"].as_u64().unwrap(),
                c["agent"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("root/0".into(), "model".into(), 0, "clerk".into()),
            ("root/0".into(), "model".into(), 1, "clerk".into()),
            ("root/0".into(), "tool".into(), 0, "clerk".into()),
            ("root/1".into(), "model".into(), 0, "writer".into()),
        ]
    );
    let tool = &recorded[2];
    assert_eq!(tool["request"], json!({"tool": "lookup", "args": {"order": "A1"}}));
    assert_eq!(tool["response"], json!({"result": {"order": "A1", "paid": 150}}));
    let writer = &recorded[3];
    assert_eq!(
        writer["request"],
        json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Write about found: {\"order\":\"A1\",\"paid\":150}"}]})
    );
    assert_eq!(writer["request_hash"].as_str().unwrap().len(), 64);
    assert_eq!(recorded[1]["request"]["messages"].as_array().unwrap().len(), 3, "the user, the call, its result");

    // `agentic calls` prints the same calls from the store.
    let run_id = first["run_id"].as_str().unwrap().to_string();
    let o = run(&store, &["calls", &run_id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(lines(&stdout(&o)), recorded);

    // The model server stops: the replay sends nothing and prints the same output.
    drop(server);
    let o = run(&store, &["run", spec_arg, "--input", "request=where is A1", "--replay", rec_arg, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], first["output"]);
    assert!(stderr(&o).contains("replay: 4 call(s) answered from the recording, 0 made"), "{}", stderr(&o));
    let o = run(&store, &["run", spec_arg, "--input", "request=where is A1", "--replay-run", &run_id, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], first["output"]);

    // A changed prompt fails the strict replay, naming the agent, the call and the field.
    let (server, seen) = model().await;
    let file = spec(dir.path(), &server.uri(), "Briefly: ");
    let spec_arg = file.to_str().unwrap();
    let o = run(&store, &["run", spec_arg, "--input", "request=where is A1", "--replay", rec_arg]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "replay: model call 0 of `writer` at root/1 differs from the recording at `messages[0].content`: recorded \
             \"Write about found: {\\\"order\\\":\\\"A1\\\",\\\"paid\\\":150}\", now \"Briefly: Write about found:"
        ),
        "{}",
        stderr(&o)
    );
    assert_eq!(seen.lock().unwrap().len(), 0, "nothing was sent");

    // Lenient: only the changed call is made.
    let o = run(
        &store,
        &["run", spec_arg, "--input", "request=where is A1", "--replay", rec_arg, "--replay-mode", "lenient", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], json!("done(Briefly: Write about found: {\"order\":\"A1\",\"paid\":150})"));
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["messages"][0]["content"], json!("Briefly: Write about found: {\"order\":\"A1\",\"paid\":150}"));
    assert!(stderr(&o).contains("replay: 3 call(s) answered from the recording, 1 made"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_reusing_calls_asks_the_model_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, seen) = model().await;
    let file = spec(dir.path(), &server.uri(), "");
    let o = run(&store, &["run", file.to_str().unwrap(), "--input", "request=where is A1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let original = json_out(&o);
    let run_id = original["run_id"].as_str().unwrap().to_string();
    assert_eq!(seen.lock().unwrap().len(), 3);

    // From the start: every request equals the original's.
    let o = run(&store, &["fork", &run_id, "--at", "1", "--reuse-calls", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)["output"], original["output"]);
    assert_eq!(seen.lock().unwrap().len(), 3, "no model request");
    assert!(stderr(&o).contains(&format!("reused 3 model call(s) of {run_id}, made 0")), "{}", stderr(&o));

    // Without --reuse-calls the fork asks the model again.
    let o = run(&store, &["fork", &run_id, "--at", "1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(seen.lock().unwrap().len(), 6);

    // Over HTTP: `"reuse_calls": true` on the fork.
    let served = crate::binary::Serve::on(&store).start();
    let http = reqwest::Client::new();
    for (reuse, requests) in [(true, 6), (false, 9)] {
        let url = format!("{}/api/v1/runs/{run_id}/fork", served.url);
        let response = http.post(url).json(&json!({"at_seq": 1, "reuse_calls": reuse})).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 201);
        let fork = response.json::<Value>().await.unwrap()["run_id"].as_str().unwrap().to_string();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let run = loop {
            let run: Value =
                http.get(format!("{}/api/v1/runs/{fork}", served.url)).send().await.unwrap().json().await.unwrap();
            if run["status"] == "completed" {
                break run;
            }
            assert!(std::time::Instant::now() < deadline, "{run}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(run["output"], original["output"]);
        assert_eq!(seen.lock().unwrap().len(), requests, "reuse_calls: {reuse}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_records_its_cases_calls_and_replays_them_without_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, seen) = model().await;
    let with_evals = |prefix: &str, uri: &str| {
        let file = spec(dir.path(), uri, prefix);
        let text = std::fs::read_to_string(&file).unwrap()
            + "evals:\n  - {name: paid, kind: expression, check: \"'150' in output\"}\n";
        std::fs::write(&file, text).unwrap();
        file
    };
    let file = with_evals("", &server.uri());
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(&cases, "{\"id\": \"a\", \"inputs\": {\"request\": \"where is A1\"}}\n{\"id\": \"b\", \"inputs\": {\"request\": \"and A1?\"}}\n").unwrap();
    let rec = dir.path().join("cases-calls.jsonl");
    let page = dir.path().join("eval.html");
    let (spec_arg, cases_arg, rec_arg) = (file.to_str().unwrap(), cases.to_str().unwrap(), rec.to_str().unwrap());

    let o =
        run(&store, &["eval", spec_arg, cases_arg, "--record", rec_arg, "--json", "--report", page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let first = json_out(&o);
    assert_eq!(seen.lock().unwrap().len(), 6, "3 model calls a case");
    let recorded = lines(&std::fs::read_to_string(&rec).unwrap());
    let mut by_case: Vec<&str> = recorded.iter().map(|c| c["case"].as_str().unwrap()).collect();
    by_case.sort();
    assert_eq!(by_case, ["a", "a", "a", "a", "b", "b", "b", "b"]);
    assert!(stderr(&o).contains(&format!("recorded 8 call(s) to {rec_arg}")), "{}", stderr(&o));
    // The page links each case's run report, written beside it.
    let html = std::fs::read_to_string(&page).unwrap();
    for case in first["cases"].as_array().unwrap() {
        let file = agentic::report::run_report_file(case["run_id"].as_str().unwrap());
        assert!(dir.path().join("eval-runs").join(&file).is_file(), "{file}");
        assert!(html.contains("eval-runs/"), "the page links the runs' reports");
    }

    // The model server stops: the replayed evaluation sends nothing and gives the same outputs.
    drop(server);
    let o = run(&store, &["eval", spec_arg, cases_arg, "--replay", rec_arg, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let again = json_out(&o);
    let outputs =
        |doc: &Value| doc["cases"].as_array().unwrap().iter().map(|c| c["output"].clone()).collect::<Vec<_>>();
    assert_eq!(outputs(&again), outputs(&first));

    // A changed prompt fails both cases, naming the agent and the field.
    let (server, seen) = model().await;
    let file = with_evals("Briefly: ", &server.uri());
    let o = run(&store, &["eval", file.to_str().unwrap(), cases_arg, "--replay", rec_arg, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let failed = json_out(&o);
    let reason = failed["cases"][0]["results"][0]["reason"].as_str().unwrap();
    assert!(
        reason
            .contains("replay: model call 0 of `writer` at root/1 differs from the recording at `messages[0].content`"),
        "{reason}"
    );
    assert_eq!(seen.lock().unwrap().len(), 0);
}
