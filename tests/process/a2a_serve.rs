//! `agentic serve --specs DIR` as an A2A agent: the cards and the JSON-RPC endpoints (`/a2a`, `/a2a/{spec}`),
//! with the official Python SDK's client as the peer (`tests/peers/a2a_client.py`, `a2a-sdk` from PyPI,
//! installed by `scripts/setup-peers.sh`; skipped without it unless `AGENTIC_REQUIRE_PEERS` is set), and the
//! 0.3 method names and errors over plain HTTP.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

use crate::binary::{Serve, Served};
use common::{peer_script, peers_python};
use serde_json::{Value, json};

const HELLO: &str = r#"
version: 1
name: hello
root: greet
agents:
  greet: { kind: sequence, description: "Builds a greeting, then shouts it.", agents: [compose, shout],
           output: "{ 'greeting': greeting, 'loud': loud }" }
  compose: { kind: compute, inputs: [name], template: "Hello, {{ name }}!", output_key: greeting }
  shout: { kind: compute, value: "greeting | upper", output_key: loud }
"#;

const APPROVAL: &str = r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, description: Ships an item once a manager approves, agents: [offer, approve, decide],
          output_key: decision }
  offer: { kind: compute, inputs: [item], template: "ship {{ item }}", output_key: offer }
  approve: { kind: human, prompt: "Approve: {{ offer }}?", response_id: manager, output_key: answer }
  decide: { kind: compute, template: "{{ offer }}: {{ answer }}", output_key: decision }
"#;

const SUM: &str = r#"
version: 1
root: s
params:
  a: integer
  b: { type: integer, default: 2 }
agents:
  s: { kind: compute, description: Adds a and b, value: "a + b" }
"#;

/// `agentic serve` on a fresh store with the specs `hello`, `approval` and `sum`; killed on drop.
impl Served {
    fn for_a2a() -> Served {
        Serve::fresh().specs(&[("hello.yaml", HELLO), ("approval.yaml", APPROVAL), ("sum.yaml", SUM)]).start()
    }

    /// A JSON-RPC request posted to `path`, and the response's body.
    async fn rpc(&self, path: &str, body: impl Into<reqwest::Body>) -> Value {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "JSON-RPC answers 200, errors included");
        response.json().await.unwrap()
    }
}

/// What `a2a_client.py URL ARGS..` prints.
fn client(python: &Path, url: &str, args: &[&str]) -> Value {
    let out = Command::new(python).arg(peer_script("a2a_client.py")).arg(url).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// The only event of a non-streaming send: the task.
fn task_of(v: &Value) -> &Value {
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["events"].as_array().map(Vec::len), Some(1), "{v}");
    &v["events"][0]["task"]
}

#[test]
fn the_cards_list_the_specs_as_skills_and_their_endpoints() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_a2a();
    let card = client(&python, &served.url, &["card"]);
    assert_eq!(card["name"], "agentic");
    let skills: Vec<&str> = card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(skills, ["approval", "hello", "sum"]);
    assert_eq!(
        card["skills"][0]["description"],
        "Ships an item once a manager approves. Send `item` as the message's text (or a data part {\"item\": ..}). \
         It may stop to ask a person: the task is then `input-required`, and the next message with its task id is \
         the answer."
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    let interfaces = &card["supportedInterfaces"];
    assert_eq!(interfaces[0]["url"], format!("{}/a2a", served.url));
    assert_eq!(interfaces[0]["protocolVersion"], "1.0");
    assert_eq!(interfaces[1]["protocolVersion"], "0.3");

    let hello = client(&python, &served.url, &["card", "--card-path", "/.well-known/hello/agent-card.json"]);
    assert_eq!(hello["name"], "hello");
    assert_eq!(hello["description"], "Builds a greeting, then shouts it.");
    assert_eq!(hello["supportedInterfaces"][0]["url"], format!("{}/a2a/hello", served.url));
    assert_eq!(
        hello["skills"][0]["description"],
        "Builds a greeting, then shouts it. Send `name` as the message's text (or a data part {\"name\": ..})."
    );
}

#[tokio::test]
async fn a_message_runs_the_workflow_and_the_task_holds_its_output() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_a2a();
    let hello = ["--card-path", "/.well-known/hello/agent-card.json"];
    let sent = client(&python, &served.url, &[&["send", "Ada", "--context", "ctx-1"][..], &hello].concat());
    let task = task_of(&sent);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["contextId"], "ctx-1");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"], json!({"greeting": "Hello, Ada!", "loud": "HELLO, ADA!"}));
    // The task is the run: the HTTP API shows it.
    let url = format!("{}/api/v1/runs/{}", served.url, task["id"].as_str().unwrap());
    let run: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(run["status"], "completed");
    assert_eq!(run["output"]["loud"], "HELLO, ADA!");

    // Streamed: the task when it starts, then the output and the final status.
    let streamed = client(&python, &served.url, &[&["send", "Bo", "--stream"][..], &hello].concat());
    let events = streamed["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.as_object().unwrap().keys().next().unwrap().as_str()).collect();
    assert_eq!(kinds, ["task", "artifactUpdate", "statusUpdate"], "{streamed}");
    assert_eq!(events[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(events[1]["artifactUpdate"]["artifact"]["parts"][0]["data"]["loud"], "HELLO, BO!");
    assert_eq!(events[2]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[test]
fn a_human_step_is_input_required_and_the_follow_up_message_completes_the_task() {
    let Some(python) = peers_python() else { return };
    let served = Served::for_a2a();
    let approval = ["--card-path", "/.well-known/approval/agent-card.json"];
    let first = client(&python, &served.url, &[&["send", "cake"][..], &approval].concat());
    let task = task_of(&first);
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "Approve: ship cake?");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    let id = task["id"].as_str().unwrap().to_string();
    let context = task["contextId"].as_str().unwrap().to_string();

    let second =
        client(&python, &served.url, &[&["send", "yes", "--task", &id, "--context", &context][..], &approval].concat());
    let done = task_of(&second);
    assert_eq!(done["id"], id.as_str());
    assert_eq!(done["contextId"], context.as_str());
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "ship cake: yes");

    // The task has ended: another message to it is refused.
    let third = client(&python, &served.url, &[&["send", "again", "--task", &id][..], &approval].concat());
    assert!(third["error"].as_str().unwrap().contains("takes no more messages"), "{third}");
}

#[tokio::test]
async fn the_0_3_method_names_and_the_protocol_errors() {
    let served = tokio::task::spawn_blocking(Served::for_a2a).await.unwrap();
    let send = json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "Dee"}]}}});
    let answer = served.rpc("/a2a/hello", send.to_string()).await;
    assert_eq!(answer["id"], 7);
    let task = &answer["result"];
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"kind": "data", "data": {"greeting": "Hello, Dee!", "loud": "HELLO, DEE!"}})
    );
    let get = json!({"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {"id": task["id"]}});
    assert_eq!(served.rpc("/a2a", get.to_string()).await["result"]["status"]["state"], "completed");
    let cancel = json!({"jsonrpc": "2.0", "id": 9, "method": "CancelTask", "params": {"id": task["id"]}});
    let refused = served.rpc("/a2a", cancel.to_string()).await;
    assert_eq!(refused["error"]["code"], -32002);

    let error = |v: &Value| (v["error"]["code"].as_i64().unwrap(), v["error"]["message"].as_str().unwrap().to_string());
    assert_eq!(error(&served.rpc("/a2a", "{not json").await).0, -32700);
    let unknown = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {}});
    assert_eq!(error(&served.rpc("/a2a", unknown.to_string()).await).0, -32601);
    let no_task = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}});
    assert_eq!(error(&served.rpc("/a2a", no_task.to_string()).await), (-32001, "no task `nope`".to_string()));
    let unnamed = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "x"}]}}});
    assert_eq!(
        error(&served.rpc("/a2a", unnamed.to_string()).await),
        (
            -32602,
            "name the workflow: `tenant` (1.0), `metadata.spec`, or post to /a2a/<workflow>; the workflows are: \
             approval, hello, sum"
                .to_string()
        )
    );
    let bad_params = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": 3}}});
    let (code, message) = error(&served.rpc("/a2a/hello", bad_params.to_string()).await);
    assert_eq!(code, -32602);
    assert!(message.starts_with("params.message"), "{message}");
    let two = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"tenant": "approval", "message": {
        "messageId": "m3", "role": "ROLE_USER", "parts": [{"data": {"item": 3, "extra": 1}}, {"text": "x"}]}}});
    let started = served.rpc("/a2a", two.to_string()).await;
    assert_eq!(started["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{started}");

    // Typed params: a data part may leave out an input with a default; the text stands for the one required
    // input left (read as JSON for a typed one); a required input left out is named.
    let sum = |parts: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m4", "role": "ROLE_USER", "parts": parts}}})
        .to_string()
    };
    let output = |v: &Value| v["result"]["task"]["artifacts"][0]["parts"][0]["data"].clone();
    assert_eq!(output(&served.rpc("/a2a/sum", sum(json!([{"data": {"a": 40}}]))).await), json!(42));
    assert_eq!(output(&served.rpc("/a2a/sum", sum(json!([{"text": "5"}, {"data": {"b": 5}}]))).await), json!(10));
    let missing = served.rpc("/a2a/sum", sum(json!([{"data": {"b": 1}}]))).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert_eq!(
        missing["error"]["message"], "inputs.a: missing (an integer, declared in `params` without a default)",
        "{missing}"
    );
}
