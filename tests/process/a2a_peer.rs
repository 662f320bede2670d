//! A2A against a real peer: the official Python SDK (`a2a-sdk` from PyPI) serving the agents of
//! `tests/peers/a2a_server.py`. The peer comes from `scripts/setup-peers.sh` (CI runs it).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::{Arc, Mutex};

use crate::binary::{agentic, stderr, stdout};
use agentic::agents::Compute;
use agentic::agents::a2a::{A2aAgent, A2aClient, A2aError, A2aTenant};
use agentic::engine::CancelHandle;
use agentic::engine::{AgentListener, RunEvent, TypedKey, ValueType};
use agentic::prelude::*;
use common::{KillOnDrop, free_port, peer_script, peers_python, wait_port};
use serde_json::{Value, json};

/// The peer on `port`; its base URL.
fn peer_on(python: &std::path::Path, port: u16) -> (KillOnDrop, String) {
    peer_recording(python, port, None)
}

/// The peer on `port`, appending the ids of the tasks it is asked to cancel to `cancelled`; its base URL.
fn peer_recording(python: &std::path::Path, port: u16, cancelled: Option<&std::path::Path>) -> (KillOnDrop, String) {
    let mut args = vec![peer_script("a2a_server.py"), port.to_string()];
    args.extend(cancelled.map(|f| f.display().to_string()));
    let child = std::process::Command::new(python)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child);
    wait_port(port);
    (guard, format!("http://127.0.0.1:{port}"))
}

fn peer(python: &std::path::Path) -> (KillOnDrop, String) {
    peer_on(python, free_port())
}

fn json_out(o: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

#[tokio::test]
async fn a_two_turn_conversation_keeps_its_context_id() {
    let Some(python) = peers_python() else { return };
    let (_peer, base) = peer(&python);
    let chat = A2aClient::new("chat", format!("{base}/chat"));
    // Typed use: built from the card (name and description), its output declared a string.
    let first = A2aAgent::builder(chat.clone())
        .name("first")
        .inputs(["opening"])
        .context_key("conversation")
        .output_type(ValueType::String)
        .output_key("one")
        .build()
        .await
        .unwrap();
    assert_eq!(first.spec().description, "Repeats what it is told in capitals, remembering the conversation.");
    let second = A2aAgent::builder(chat.clone())
        .name("second")
        .message("{{ follow_up }}!")
        .unwrap()
        .inputs(["follow_up"])
        .context_key("conversation")
        .task_key("task")
        .output_key("two")
        .build_lazy();
    let seq = Sequence::builder()
        .sub_agents([
            first,
            Compute::expression("remember", "conversation").unwrap().output_key("after_one").build(),
            second,
        ])
        .output_key("two")
        .build()
        .unwrap();
    let out = seq.invoke().input("opening", "hello").input("follow_up", "again").await.unwrap();
    let state = out.state();
    assert_eq!(
        state.get_typed(&TypedKey::<String>::new("one")).unwrap().as_deref(),
        Some("HELLO (turn 1; earlier: nothing)")
    );
    assert_eq!(out.output(), Some(&json!("AGAIN! (turn 2; earlier: hello)")), "the remote remembered turn one");
    let context = state.get("conversation").and_then(Value::as_str).unwrap().to_string();
    assert!(!context.is_empty());
    assert_eq!(state.get("after_one"), Some(&json!(context)), "the same context id after both turns");
    assert_eq!(state.get("task"), None, "the task ended: no open task id");

    // Untyped use, alone: without a context key every call is a new conversation.
    let alone = A2aAgent::builder(chat).inputs(["text"]).build().await.unwrap();
    assert_eq!(alone.spec().name, "chat");
    let out = alone.invoke().input("text", "hi").await.unwrap();
    assert_eq!(out.output(), Some(&json!("HI (turn 1; earlier: nothing)")));
}

#[tokio::test]
async fn the_tenant_comes_from_the_card_url_is_fixed_or_read_from_a_key() {
    let Some(python) = peers_python() else { return };
    let (_peer, base) = peer(&python);
    let ask = |client: Arc<A2aClient>, tenant: A2aTenant| {
        A2aAgent::builder(client).inputs(["text"]).tenant(tenant).build_lazy()
    };
    let by_card = ask(A2aClient::new("acme", format!("{base}/.well-known/acme/agent-card.json")), A2aTenant::FromCard);
    let out = by_card.invoke().input("text", "hi").await.unwrap();
    assert_eq!(out.output(), Some(&json!("HI (turn 1; earlier: nothing) [tenant acme]")));
    let fixed = ask(A2aClient::new("chat", format!("{base}/chat")), A2aTenant::Fixed("beta".into()));
    let out = fixed.invoke().input("text", "hi").await.unwrap();
    assert_eq!(out.output(), Some(&json!("HI (turn 1; earlier: nothing) [tenant beta]")));
    let keyed = ask(A2aClient::new("chat", format!("{base}/chat")), A2aTenant::FromKey("customer".into()));
    let out = keyed.invoke().input("text", "hi").input("customer", "gamma").await.unwrap();
    assert_eq!(out.output(), Some(&json!("HI (turn 1; earlier: nothing) [tenant gamma]")));
}

#[tokio::test]
async fn a_card_offering_only_protocol_0_3_is_spoken_to_in_0_3() {
    let Some(python) = peers_python() else { return };
    let (_peer, base) = peer(&python);
    let legacy = A2aClient::new("legacy", format!("{base}/legacy"));
    let endpoint = legacy.endpoint().await.unwrap();
    assert_eq!(endpoint.version, agentic::agents::a2a::ProtocolVersion::V0_3);
    let turn = |name: &str| {
        A2aAgent::builder(legacy.clone()).name(name).inputs(["text"]).context_key("c").output_key(name).build_lazy()
    };
    let seq = Sequence::builder().sub_agents([turn("t1"), turn("t2")]).output_key("t2").build().unwrap();
    let out = seq.invoke().input("text", "old").await.unwrap();
    assert_eq!(out.output(), Some(&json!("OLD (turn 2; earlier: old)")));
}

#[derive(Default, Clone)]
struct Tokens(Arc<Mutex<Vec<String>>>);

impl AgentListener for Tokens {
    fn on_run_event(&self, event: &RunEvent) {
        if let RunEvent::Token { text, .. } = event {
            self.0.lock().unwrap().push(text.clone());
        }
    }
}

#[tokio::test]
async fn streamed_artifact_chunks_become_token_events() {
    let Some(python) = peers_python() else { return };
    let (_peer, base) = peer(&python);
    let chat = A2aAgent::builder(A2aClient::new("chat", format!("{base}/chat"))).inputs(["text"]).build_lazy();
    let tokens = Tokens::default();
    let out = chat.invoke().input("text", "hello").listener(tokens.clone()).await.unwrap();
    assert_eq!(out.output(), Some(&json!("HELLO (turn 1; earlier: nothing)")));
    assert_eq!(*tokens.0.lock().unwrap(), ["HELLO (turn 1; e", "arlier: nothing)"]);
}

/// intro (compute) → book (a2a, the travel agent asks where) → done (compute).
fn travel_spec(dir: &std::path::Path, url: &str) -> String {
    let spec = dir.join("trip.yaml");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nroot: main\nagents:\n  \
             main: {{ kind: sequence, agents: [intro, book, done], output_key: done }}\n  \
             intro: {{ kind: compute, value: \"'a hotel'\", output_key: trip }}\n  \
             book: {{ kind: a2a, url: '{url}', inputs: [trip], context_key: ctx, task_key: task, output_key: booking }}\n  \
             done: {{ kind: compute, template: 'Done: {{{{ booking }}}}', output_key: done }}\n"
        ),
    )
    .unwrap();
    spec.display().to_string()
}

#[test]
fn a_remote_question_suspends_the_run_and_the_answer_completes_the_remote_task_in_new_processes() {
    let Some(python) = peers_python() else { return };
    let (_peer, base) = peer(&python);
    let dir = tempfile::tempdir().unwrap();
    let spec = travel_spec(dir.path(), &format!("{base}/travel"));
    let store = dir.path().join("store");
    let o = agentic(&store, &["run", &spec, "--memory-id", "trip-1", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let out = json_out(&o);
    assert_eq!(out["status"], json!("suspended"));
    let pending = &out["pending"][0];
    assert_eq!(
        (&pending["id"], &pending["prompt"], &pending["agent"]),
        (&json!("root/1"), &json!("Which city should I book a hotel in?"), &json!("book"))
    );
    let context = pending["data"]["context_id"].as_str().unwrap().to_string();
    assert_eq!(pending["data"]["state"], json!("input-required"));

    let o = agentic(&store, &["respond", "trip-1", "Paris"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = agentic(&store, &["resume", "trip-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Done: Booked a hotel in Paris.\n");

    let shown = json_out(&agentic(&store, &["show", "trip-1", "--json"]));
    assert_eq!(shown["state"]["ctx"], json!(context), "the remote context of the suspended task");
    assert_eq!(shown["state"].get("task"), None, "the remote task completed: no open task id");
    let paths: Vec<&str> = shown["history"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["root/0", "root/1", "root/2", "root"], "each step completed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_run_cancels_the_remote_task() {
    let Some(python) = peers_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cancelled = dir.path().join("cancelled.txt");
    let (_peer, base) = peer_recording(&python, free_port(), Some(&cancelled));
    let client = A2aClient::new("slow", format!("{base}/slow"));
    let slow = A2aAgent::builder(client.clone()).name("slow").message("work").unwrap().output_key("done").build_lazy();
    let cancel = CancelHandle::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        c2.cancel();
    });
    let err = slow.invoke().memory_id("slow-1").cancel_handle(cancel).await.unwrap_err();
    assert!(matches!(err, AgentError::Cancelled), "{err}");

    // The remote agent was asked to cancel its task, and says it is cancelled.
    let tasks = cancelled_tasks(&cancelled).await;
    let [task_id] = &tasks[..] else { panic!("the remote agent was asked to cancel {tasks:?}") };
    let task_id = task_id.clone();
    // The peer notes the request before its task store records the new state: read until it does (5 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let request = agentic::agents::a2a::TaskRequest { tenant: None, id: task_id.clone(), history_length: None };
        let task = client.get_task(request).await.unwrap();
        if task.status.state == agentic::agents::a2a::TaskState::Canceled || std::time::Instant::now() > deadline {
            assert_eq!(task.status.state, agentic::agents::a2a::TaskState::Canceled);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The ids in the peer's CANCELLED_FILE, once one is there (waits up to 5 s).
async fn cancelled_tasks(file: &std::path::Path) -> Vec<String> {
    for _ in 0..100 {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if !text.trim().is_empty() {
            return text.lines().map(str::to_string).collect();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Vec::new()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_suspended_on_a_remote_question_cancels_the_remote_task() {
    let Some(python) = peers_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cancelled = dir.path().join("cancelled.txt");
    let (_peer, base) = peer_recording(&python, free_port(), Some(&cancelled));
    let spec = travel_spec(dir.path(), &format!("{base}/travel"));
    let store_dir = dir.path().join("store");

    // Suspended by the remote question, in a process that then ends.
    let o = agentic(&store_dir, &["run", &spec, "--memory-id", "trip-9", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let task_id = json_out(&o)["pending"][0]["data"]["task_id"].as_str().unwrap().to_string();

    // Cancelled while suspended (what the server's cancel does: resume with the cancel already given).
    let system = agentic::spec::Spec::from_path(std::path::Path::new(&spec)).unwrap().build().unwrap();
    let store = agentic::store::SledStore::open(&store_dir).unwrap().store_ref();
    let cancel = CancelHandle::new();
    cancel.cancel();
    let err = system.root.resume("trip-9").store_ref(store.clone()).cancel_handle(cancel).await.unwrap_err();
    assert!(matches!(err, AgentError::Cancelled), "{err}");
    assert_eq!(store.run_dyn("trip-9").await.unwrap().unwrap().status, agentic::engine::RunStatus::Cancelled);

    // The remote agent was asked to cancel exactly that task, and says it is cancelled.
    assert_eq!(cancelled_tasks(&cancelled).await, std::slice::from_ref(&task_id));
    let client = A2aClient::new("travel", format!("{base}/travel"));
    let request = agentic::agents::a2a::TaskRequest { tenant: None, id: task_id, history_length: None };
    assert_eq!(client.get_task(request).await.unwrap().status.state, agentic::agents::a2a::TaskState::Canceled);
}

#[test]
fn a_remote_task_lost_by_a_restart_fails_naming_the_fork_that_goes_on() {
    let Some(python) = peers_python() else { return };
    let port = free_port();
    let (peer, base) = peer_on(&python, port);
    let dir = tempfile::tempdir().unwrap();
    let spec = travel_spec(dir.path(), &format!("{base}/travel"));
    let store = dir.path().join("store");
    let o = agentic(&store, &["run", &spec, "--memory-id", "trip-3", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let task = json_out(&o)["pending"][0]["data"]["task_id"].as_str().unwrap().to_string();

    // The remote server restarts: its tasks are gone.
    drop(peer);
    let (_peer, _) = peer_on(&python, port);
    assert_eq!(agentic(&store, &["respond", "trip-3", "Paris"]).status.code(), Some(0));
    let o = agentic(&store, &["resume", "trip-3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let way_out = format!(
        "agent `book` (root/1) failed: the remote agent no longer knows task `{task}` (a restart of it lost the \
         task): a resume cannot continue it; `agentic fork trip-3 --at 1` starts a copy of this run that sends the \
         message as a new task: A2A agent `book`"
    );
    assert!(stderr(&o).contains(&way_out), "{}", stderr(&o));

    // The way out: the copy asks again, as a new remote task, and completes; the step before it is not run again.
    let o = agentic(&store, &["fork", "trip-3", "--at", "1", "--memory-id", "trip-3b", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let asked = json_out(&o);
    assert_eq!(asked["pending"][0]["prompt"], json!("Which city should I book a hotel in?"));
    assert_ne!(asked["pending"][0]["data"]["task_id"], json!(task), "a new remote task");
    assert_eq!(agentic(&store, &["respond", "trip-3b", "Paris"]).status.code(), Some(0));
    let o = agentic(&store, &["resume", "trip-3b"]);
    assert_eq!(stdout(&o), "Done: Booked a hotel in Paris.\n", "{}", stderr(&o));
    let shown = json_out(&agentic(&store, &["show", "trip-3b", "--json"]));
    let intro = shown["history"].as_array().unwrap().iter().filter(|h| h["path"] == json!("root/0")).count();
    assert_eq!(intro, 1, "the step before the A2A agent is the original's");
}

#[test]
fn an_unreachable_server_is_a_located_error_and_resume_after_fixing_continues() {
    let Some(python) = peers_python() else { return };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/travel");
    let spec = travel_spec(dir.path(), &url);
    let store = dir.path().join("store");
    let o = agentic(&store, &["run", &spec, "--memory-id", "trip-2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let expected = format!(
        "agent `book` (root/1) failed: A2A agent `book`: bad agent card at {url}/.well-known/agent-card.json: "
    );
    assert!(stderr(&o).contains(&expected), "{}", stderr(&o));

    // The server comes up: resuming continues at the A2A agent, the step before it is not run again.
    let (_peer, _) = peer_on(&python, port);
    let o = agentic(&store, &["resume", "trip-2", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(json_out(&o)["pending"][0]["prompt"], json!("Which city should I book a hotel in?"));
    assert_eq!(agentic(&store, &["respond", "trip-2", "Rome"]).status.code(), Some(0));
    let o = agentic(&store, &["resume", "trip-2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Done: Booked a hotel in Rome.\n");
    let shown = json_out(&agentic(&store, &["show", "trip-2", "--json"]));
    let intro = shown["history"].as_array().unwrap().iter().filter(|h| h["path"] == json!("root/0")).count();
    assert_eq!(intro, 1, "the step before the A2A agent completed once");
}

#[tokio::test]
async fn a_card_that_does_not_parse_is_an_error_naming_the_agent_and_the_url() {
    let Some(python) = peers_python() else { return };
    let (_peer, base) = peer(&python);
    let broken = A2aClient::new("broken", format!("{base}/broken"));
    let err = A2aAgent::builder(broken.clone()).build().await.unwrap_err();
    let card = format!("{base}/broken/.well-known/agent-card.json");
    assert!(matches!(&err, A2aError::Card { agent, url, .. } if agent == "broken" && *url == card), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!("A2A agent `broken`: bad agent card at {card}: not a card: ")),
        "{err}"
    );

    let seq = Sequence::builder()
        .sub_agents([
            Compute::expression("before", "'kept'").unwrap().output_key("before").build(),
            A2aAgent::builder(broken).name("remote").inputs(["before"]).build_lazy(),
        ])
        .build()
        .unwrap();
    let err = seq.invoke().await.unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("agent `remote` (root/1) failed: A2A agent `broken`: bad agent card at {card}")),
        "{err}"
    );
}

#[test]
fn a2a_spec_errors_are_located() {
    let errors = |agent: &str| {
        let text = format!("version: 1\nroot: a\nagents:\n  a: {agent}\n");
        agentic::spec::Spec::parse(&text, "spec.yaml").unwrap_err().iter().map(|e| e.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(errors("{ kind: a2a, inputs: [x] }"), ["spec.yaml:4:6: agent `a`: missing field `url`"]);
    assert_eq!(
        errors("{ kind: a2a, url: 'ftp://x', inputs: [x] }"),
        ["spec.yaml:4:24: agent `a`: field `url`: expected an http:// or https:// URL, found `ftp://x`"]
    );
    assert_eq!(
        errors("{ kind: a2a, url: 'http://x', tenant: t, tenant_key: k, inputs: [x] }"),
        [
            "spec.yaml:4:59: agent `a`: field `tenant_key`: give either `tenant` (fixed) or `tenant_key` (per call), not both"
        ]
    );
    assert_eq!(
        errors("{ kind: a2a, url: 'http://x', mesage: hi, inputs: [x] }"),
        [
            "spec.yaml:4:36: agent `a`: unknown field `mesage` (did you mean `message`?), expected one of `kind`, `description`, `inputs`, `output_key`, `optional`, `async`, `timeout_ms`, `budget`, `url`, `tenant`, `tenant_key`, `message`, `context_key`, `task_key`, `stream`, `headers`"
        ]
    );
    assert_eq!(
        errors("{ kind: a2a, url: 'http://x', message: '{{ x' }"),
        [
            "spec.yaml:4:45: agent `a`: field `message`: invalid template: syntax error: unexpected end of input, expected end of variable block"
        ]
    );
    // Without a message, the inputs' values are sent: with neither, the remote agent would get nothing.
    assert_eq!(
        errors("{ kind: a2a, url: 'http://x' }"),
        [
            "spec.yaml:4:14: agent `a`: an a2a agent sends `message` (a template) or, without it, the values of its `inputs`: give one of them"
        ]
    );
}
