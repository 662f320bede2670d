//! `agentic serve --specs DIR` as an MCP server: each spec a tool at `/mcp` (streamable HTTP), with the
//! official Python SDK's client as the peer (`tests/peers/mcp_client.py`, `mcp` from PyPI, installed by
//! `scripts/setup-peers.sh`; skipped without it unless `AGENTIC_REQUIRE_PEERS` is set).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::binary::{Serve, Served};
use common::{peer_script, peers_python};
use serde_json::{Value, json};

/// The specs offered: no `params` (inputs inferred), typed `params`, a human step, a long loop, and one that
/// does not parse (not offered).
const SPECS: &[(&str, &str)] = &[
    (
        "hello.yaml",
        r#"
version: 1
name: hello
root: greet
agents:
  greet: { kind: sequence, description: "Builds a greeting, then shouts it.", agents: [compose, shout],
           output: "{ 'greeting': greeting, 'loud': loud }" }
  compose: { kind: compute, inputs: [name], template: "Hello, {{ name }}!", output_key: greeting }
  shout: { kind: compute, value: "greeting | upper", output_key: loud }
"#,
    ),
    (
        "divide.yaml",
        r#"
version: 1
name: division
root: main
params:
  n: integer
  d: { type: integer, default: 1, description: The divisor }
agents:
  main: { kind: compute, description: Divides n by d, value: "n // d" }
"#,
    ),
    (
        "approval.yaml",
        r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, description: Ships an item once a manager approves, agents: [offer, approve, decide],
          output_key: decision }
  offer: { kind: compute, inputs: [item], template: "ship {{ item }}", output_key: offer }
  approve: { kind: human, prompt: "Approve: {{ offer }}?", response_id: manager, output_key: answer }
  decide: { kind: compute, template: "{{ offer }}: {{ answer }}", output_key: decision }
"#,
    ),
    (
        "spin.yaml",
        r#"
version: 1
root: spin
agents:
  spin: { kind: loop, description: Counts for a long time, agents: [tick], max_iterations: 1000000, output: n }
  tick: { kind: compute, value: "(n if n is defined else 0) + 1", inputs: [], output_key: n }
"#,
    ),
    ("broken.yaml", "version: 1\nroot: [\n"),
];

/// `agentic serve` on a fresh store with [`SPECS`], listening on `host` (a free port); killed on drop.
impl Served {
    fn for_mcp(host: &str, token: Option<&str>) -> Served {
        Serve::fresh().specs(SPECS).host(host).token(token).start()
    }

    fn mcp(&self) -> String {
        format!("{}/mcp", self.url)
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(format!("{}{path}", self.url)).await.unwrap().json().await.unwrap()
    }
}

/// What `mcp_client.py URL ARGS..` prints (with `AGENTIC_TOKEN` = `token` when given).
fn client(python: &Path, url: &str, args: &[&str], token: Option<&str>) -> Value {
    let mut command = Command::new(python);
    command.arg(peer_script("mcp_client.py")).arg(url).args(args).env_remove("AGENTIC_TOKEN");
    if let Some(token) = token {
        command.env("AGENTIC_TOKEN", token);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "mcp_client.py {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn call(python: &Path, served: &Served, tool: &str, arguments: Value) -> Value {
    client(python, &served.mcp(), &["call", tool, &arguments.to_string()], None)
}

/// The run id of a call's structured content.
fn run_id(result: &Value) -> String {
    result["structuredContent"]["run_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_mcp_client_lists_the_specs_as_tools_and_gets_a_workflows_exact_output() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_mcp("127.0.0.1", None);
    let listed = client(&python, &served.mcp(), &["list"], None);
    assert_eq!(listed["server"], json!({"name": "agentic", "title": "agentic serve"}));
    assert!(listed["instructions"].as_str().unwrap().contains("POST /api/v1/runs/{run_id}/responses/{response_id}"));
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    // The API's spec listing, less the spec that does not parse.
    assert_eq!(names, ["approval", "divide", "hello", "spin"]);
    assert_eq!(served.get("/api/v1/specs").await, json!({"specs": ["approval", "broken", "divide", "hello", "spin"]}));
    assert_eq!(
        tools[2],
        json!({
            "name": "hello",
            "title": null,
            "description": "Builds a greeting, then shouts it.",
            "inputSchema": {"type": "object", "properties": {"name": {"description": "read by agent `compose`"}},
                            "required": ["name"]},
        })
    );
    // Declared params: typed, with their defaults and descriptions; the spec's own name as the title.
    assert_eq!(
        tools[1],
        json!({
            "name": "divide",
            "title": "division",
            "description": "Divides n by d",
            "inputSchema": {"type": "object",
                            "properties": {"n": {"type": "integer"},
                                           "d": {"type": "integer", "description": "The divisor", "default": 1}},
                            "required": ["n"], "additionalProperties": false},
        })
    );
    assert_eq!(
        tools[0]["description"],
        "Ships an item once a manager approves. It may stop to wait for a person's answer: the result then has \
         status `suspended`, the run id and how to answer."
    );

    let result = call(&python, &served, "hello", json!({"name": "Ada"}));
    let output = json!({"greeting": "Hello, Ada!", "loud": "HELLO, ADA!"});
    let id = run_id(&result);
    assert_eq!(
        result,
        json!({"isError": false, "text": [output.to_string()],
               "structuredContent": {"run_id": id, "status": "completed", "output": output}})
    );
    // The same run as the API shows it: the call went through the server's run path.
    let run = served.get(&format!("/api/v1/runs/{id}")).await;
    assert_eq!((&run["name"], &run["status"], &run["output"]), (&json!("hello"), &json!("completed"), &output));

    let result = call(&python, &served, "divide", json!({"n": 7, "d": 2}));
    assert_eq!((&result["isError"], &result["text"]), (&json!(false), &json!(["3"])));
    // The default of a declared param.
    let result = call(&python, &served, "divide", json!({"n": 7}));
    assert_eq!(result["structuredContent"]["output"], json!(7));
}

#[tokio::test]
async fn a_failed_run_and_bad_arguments_are_tool_errors_naming_the_run_and_the_field() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_mcp("127.0.0.1", None);
    let failed = call(&python, &served, "divide", json!({"n": 7, "d": 0}));
    let id = run_id(&failed);
    let error = "agent `main` (root): `n // d` failed: invalid operation: unable to calculate 7 // 0 (in \
                 <expression>:1)";
    assert_eq!(
        failed,
        json!({"isError": true, "text": [format!("run `{id}` of `division` failed: {error}")],
               "structuredContent": {"run_id": id, "status": "failed", "error": error}})
    );
    assert_eq!(served.get(&format!("/api/v1/runs/{id}")).await["status"], "failed");

    // Against declared params: each field named, no run started.
    let bad = call(&python, &served, "divide", json!({"n": "seven", "dd": 2}));
    assert_eq!(
        bad,
        json!({"isError": true, "structuredContent": null, "text": [
            "invalid arguments for tool `divide`: input `n`: expected an integer, got \"seven\"; input `dd`: not a \
             parameter of this spec (did you mean `d`?); its params are `n`, `d`"]})
    );
    let missing = call(&python, &served, "divide", json!({}));
    assert_eq!(
        missing["text"],
        json!(["invalid arguments for tool `divide`: input `n`: missing (an integer, declared in `params` without a \
                default)"])
    );
    // Against the inputs the agents read.
    let missing = call(&python, &served, "hello", json!({"nme": "Ada"}));
    assert_eq!(
        missing,
        json!({"isError": true, "structuredContent": null,
               "text": ["invalid arguments for tool `hello`: input `name`: missing (read by agent `compose`)"]})
    );
    // A spec of the directory that does not parse: a tool error with its located error.
    let broken = call(&python, &served, "broken", json!({}));
    assert_eq!(broken["isError"], json!(true));
    let text = broken["text"][0].as_str().unwrap();
    assert!(text.starts_with("tool `broken`: the spec is invalid: "), "{text}");
    assert!(text.ends_with("broken.yaml:2:7: unclosed bracket '['"), "{text}");
    // An unknown tool is a protocol error.
    let unknown = call(&python, &served, "nope", json!({}));
    assert_eq!(
        unknown,
        json!({"error": {"code": -32602, "message": "unknown tool `nope`; the tools are: `approval`, `divide`, \
                                                     `hello`, `spin`"}})
    );
    let runs = served.get("/api/v1/runs").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "only the failed run was started: {runs}");
}

#[tokio::test]
async fn a_human_step_returns_the_suspended_run_and_answering_through_the_api_completes_it() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_mcp("127.0.0.1", None);
    let result = call(&python, &served, "approval", json!({"item": "3 widgets"}));
    let id = run_id(&result);
    assert_eq!(result["isError"], json!(false));
    assert_eq!(
        result["structuredContent"],
        json!({"run_id": id, "status": "suspended",
               "pending": [{"id": "manager", "prompt": "Approve: ship 3 widgets?", "agent": "approve"}]})
    );
    assert_eq!(
        result["text"],
        json!([format!(
            "Run `{id}` of `approval` is waiting for a person (status `suspended`).\n- response `manager` (agent \
             `approve`): Approve: ship 3 widgets?\nA person answers in this server's web inbox (/inbox), or with \
             POST /api/v1/runs/{id}/responses/manager and the body {{\"value\": <the answer>}}. The run then \
             continues by itself; GET /api/v1/runs/{id} shows its status and output."
        )])
    );
    let answered = reqwest::Client::new()
        .post(format!("{}/api/v1/runs/{id}/responses/manager", served.url))
        .json(&json!({"value": "approved"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 202);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let run = served.get(&format!("/api/v1/runs/{id}")).await;
        if run["status"] == "completed" {
            assert_eq!(run["output"], "ship 3 widgets: approved");
            break;
        }
        assert!(Instant::now() < deadline, "the answered run did not complete: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_client_that_gives_up_on_a_call_cancels_its_run() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_mcp("127.0.0.1", None);
    let gave_up = client(&python, &served.mcp(), &["cancel", "spin", "{}", "1.5"], None);
    assert_eq!(gave_up, json!({"gave_up": "Request 'tools/call' timed out"}));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let runs = served.get("/api/v1/runs").await;
        let spin = &runs["runs"][0];
        assert_eq!(spin["name"], "spin");
        if spin["status"] == "cancelled" {
            break;
        }
        assert!(Instant::now() < deadline, "the run of the abandoned call was not cancelled: {runs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn on_a_non_loopback_address_mcp_needs_the_token_as_the_api_does() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_mcp("0.0.0.0", Some("s3cret"));
    let refused = reqwest::Client::new()
        .post(served.mcp())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(refused.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"error": "missing or wrong credential: send the header `Authorization: Bearer <API key or token>`"})
    );
    // The SDK's client without the token fails; with it, it lists and calls (any Host name is accepted, as
    // the token guards the server).
    let out = Command::new(&python)
        .args([peer_script("mcp_client.py"), served.mcp(), "list".into()])
        .env_remove("AGENTIC_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success(), "listed without the token: {}", String::from_utf8_lossy(&out.stdout));
    let listed = client(&python, &served.mcp(), &["list"], Some("s3cret"));
    assert_eq!(listed["tools"].as_array().unwrap().len(), 4);
    let result = client(&python, &served.mcp(), &["call", "divide", r#"{"n": 9, "d": 3}"#], Some("s3cret"));
    assert_eq!(result["text"], json!(["3"]));
}
