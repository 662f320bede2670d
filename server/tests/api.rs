//! The HTTP API of SERVER.md §2 against a real server on loopback, over a sled store on disk.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A sequence of two computations.
const SHOUT: &str = r#"
version: 1
name: shout
root: main
params: { topic: string }
agents:
  main: { kind: sequence, agents: [draft, loud], output_key: loud }
  draft: { kind: compute, inputs: [topic], template: "a story about {{ topic }}", output_key: story }
  loud: { kind: compute, inputs: [story], value: "story | upper", output_key: loud }
"#;

/// A computation, a human approval, a computation.
const APPROVAL: &str = r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, agents: [offer, approve, decide], output_key: decision }
  offer: { kind: compute, inputs: [item], template: "ship {{ item }}", output_key: offer }
  approve: { kind: human, prompt: "Approve: {{ offer }}?", response_id: manager, output_key: answer }
  decide: { kind: compute, template: "{{ offer }}: {{ answer }}", output_key: decision }
"#;

struct Harness {
    server: Option<Server>,
    base: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Harness {
    async fn start() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, None).await
    }

    async fn start_in(dir: tempfile::TempDir, token: Option<&str>) -> Harness {
        let store = agentic_store::SledStore::open(dir.path().join("store")).unwrap().store_ref();
        let config = ServerConfig::new(store)
            .state_dir(dir.path().join("store"))
            .store_label("test")
            .listen("127.0.0.1:0".parse().unwrap())
            .token(token.map(str::to_string), "TEST_TOKEN");
        let server = Server::start(config).await.unwrap();
        let base = server.url();
        Harness { server: Some(server), base, http: reqwest::Client::new(), dir }
    }

    async fn stop(mut self) -> tempfile::TempDir {
        self.server.take().unwrap().shutdown().await.unwrap();
        self.dir
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Posts `body` as it is, on a connection of its own: a server refusing a body (too large) closes the
    /// connection without reading it, which must not be the one the next request reuses.
    async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
        let request = self.http.post(format!("{}{path}", self.base)).header(reqwest::header::CONNECTION, "close");
        let response = request.body(body).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Polls the run until its status is `status` (20 s at most).
    async fn wait_for(&self, run_id: &str, status: &str) -> Value {
        let mut last = Value::Null;
        for _ in 0..400 {
            let (code, run) = self.get(&format!("/api/v1/runs/{run_id}")).await;
            if code == StatusCode::OK && run["status"] == status && run["executing"] == false {
                return run;
            }
            last = run;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("run {run_id} never reached {status}: {last}");
    }

    /// The whole event stream of a run, as (event, data) pairs, until the server ends it.
    async fn events(&self, run_id: &str) -> Vec<(String, Value)> {
        let text = tokio::time::timeout(Duration::from_secs(20), async {
            let response = self.http.get(format!("{}/api/v1/runs/{run_id}/events", self.base)).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()["content-type"], "text/event-stream");
            response.text().await.unwrap()
        })
        .await
        .expect("the stream ends after the final event");
        parse_sse(&text)
    }
}

fn parse_sse(text: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            }
        }
        if let Some(name) = name {
            events.push((name, serde_json::from_str(&data).unwrap()));
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_spec_runs_to_completion_and_its_events_replay() {
    let h = Harness::start().await;
    let (code, body) =
        h.post("/api/v1/runs", json!({"spec": SHOUT, "inputs": {"topic": "dragons"}, "run_id": "r1"})).await;
    assert_eq!((code, body), (StatusCode::CREATED, json!({"run_id": "r1", "status": "running"})));
    let run = h.wait_for("r1", "completed").await;
    assert_eq!(run["output"], "A STORY ABOUT DRAGONS");
    assert_eq!(run["name"], "shout");
    assert_eq!(run["state"]["story"], "a story about dragons");
    assert_eq!(run["pending"], json!([]));
    assert_eq!(run["error"], Value::Null);
    let agents: Vec<&str> = run["history"].as_array().unwrap().iter().map(|h| h["agent"].as_str().unwrap()).collect();
    assert_eq!(agents, ["draft", "loud", "main"]);

    // A client connecting after the end gets the journaled sequence, then the final event, and the stream ends.
    let events = h.events("r1").await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["agent_completed", "agent_completed", "agent_completed", "completed"]);
    let seqs: Vec<u64> = events[..3].iter().map(|(_, d)| d["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [2, 3, 4], "step 1 records the inputs");
    assert_eq!(events[0].1["agent"], "draft");
    assert_eq!(events[0].1["path"], "root/0");
    assert_eq!(events[0].1["output"], "a story about dragons");
    assert_eq!(events[3].1["output"], "A STORY ABOUT DRAGONS");

    let (code, list) = h.get("/api/v1/runs").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(list["runs"][0]["run_id"], "r1");
    assert_eq!(list["runs"][0]["status"], "completed");
    assert_eq!(list["next_cursor"], Value::Null);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_step_is_answered_over_http_and_the_run_continues_by_itself() {
    let h = Harness::start().await;
    let (code, _) = h
        .post("/api/v1/runs", json!({"spec": APPROVAL, "inputs": {"item": "<b>10 widgets</b>"}, "run_id": "o1"}))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let run = h.wait_for("o1", "suspended").await;
    assert_eq!(
        run["pending"],
        json!([{"id": "manager", "prompt": "Approve: ship <b>10 widgets</b>?", "agent": "approve"}])
    );
    let (code, list) = h.get("/api/v1/runs?status=suspended").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(list["runs"][0]["pending"], json!(["manager"]));

    // Live: a client watching while the answer arrives sees the resumption and the end.
    let watcher = {
        let (http, base) = (h.http.clone(), h.base.clone());
        tokio::spawn(async move {
            let response = http.get(format!("{base}/api/v1/runs/o1/events")).send().await.unwrap();
            parse_sse(&response.text().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, body) = h.post("/api/v1/runs/o1/responses/manager", json!({"value": "approved"})).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    let run = h.wait_for("o1", "completed").await;
    assert_eq!(run["output"], "ship <b>10 widgets</b>: approved");
    let events = tokio::time::timeout(Duration::from_secs(20), watcher).await.unwrap().unwrap();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"agent_completed"), "{names:?}");
    assert_eq!(&names[names.len() - 1], &"completed", "{names:?}");
    assert!(names.contains(&"suspended") && names.contains(&"resumed"), "{names:?}");
    let completed: Vec<(&str, u64)> = events
        .iter()
        .filter(|(n, _)| n == "agent_completed")
        .map(|(_, d)| (d["agent"].as_str().unwrap(), d["seq"].as_u64().unwrap()))
        .collect();
    assert_eq!(completed, [("offer", 2), ("approve", 3), ("decide", 4), ("main", 5)]);

    // Answering again: 409; an unknown response: 404; an unknown run: 404.
    let (code, body) = h.post("/api/v1/runs/o1/responses/manager", json!({"value": "again"})).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(body["error"], "response `manager` of run `o1` is already answered");
    let (code, body) = h.post("/api/v1/runs/o1/responses/boss", json!({"value": 1})).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "run `o1` has no pending response `boss`; it waits for no response (completed)");
    let (code, body) = h.post("/api/v1/runs/nope/responses/manager", json!({"value": 1})).await;
    assert_eq!((code, body), (StatusCode::NOT_FOUND, json!({"error": "no run `nope`"})));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_status_and_message_of_the_contract() {
    let h = Harness::start().await;
    let (code, body) = h.post_raw("/api/v1/runs", "{\"spec\": ").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().starts_with("invalid JSON: EOF while parsing"), "{body}");

    let (code, body) = h.post("/api/v1/runs", json!({"spec": SHOUT, "input": {"topic": "x"}})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().starts_with("unknown field `input`, expected one of"), "{body}");

    let (code, body) = h.post("/api/v1/runs", json!({"inputs": {}})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().starts_with("missing field `spec`"), "{body}");

    let broken = "version: 1\nname: b\nroot: main\nagents:\n  main: { kind: sequence, agents: [ghost] }\n";
    let (code, body) = h.post("/api/v1/runs", json!({"spec": broken})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["line"], 5);
    assert_eq!(errors[0]["agent"], "main");
    assert!(errors[0]["message"].as_str().unwrap().contains("ghost"), "{body}");

    let (code, body) = h.post("/api/v1/runs", json!({"spec": SHOUT, "inputs": {"topic": 7}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["error"].as_str().unwrap().contains("topic"), "{body}");

    let (code, _) = h.post("/api/v1/runs", json!({"spec": SHOUT, "inputs": {"topic": "a"}, "run_id": "dup"})).await;
    assert_eq!(code, StatusCode::CREATED);
    h.wait_for("dup", "completed").await;
    let (code, body) = h.post("/api/v1/runs", json!({"spec": SHOUT, "inputs": {"topic": "a"}, "run_id": "dup"})).await;
    assert_eq!((code, body), (StatusCode::CONFLICT, json!({"error": "run_id: run `dup` already exists (completed)"})));
    let (code, body) = h.post("/api/v1/runs", json!({"spec": SHOUT, "inputs": {"topic": "a"}, "run_id": ".."})).await;
    assert_eq!(
        (code, body),
        (
            StatusCode::BAD_REQUEST,
            json!({"error": "run_id: `..` is a path step (a run id is 1 to 200 bytes, not blank, without control \
                             characters, and not `.` or `..`)"})
        )
    );

    let (code, body) = h.post("/api/v1/runs", json!({"spec": SHOUT, "durability": "never"})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "durability: `never` is not one of `sync`, `async`, `exit`");

    let big = format!("{{\"spec\": \"{}\"}}", "x".repeat(11 * 1024 * 1024));
    let (code, body) = h.post_raw("/api/v1/runs", big).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"], "the body is larger than 10485760 bytes");

    let (code, body) = h.get("/api/v1/runs/ghost").await;
    assert_eq!((code, body), (StatusCode::NOT_FOUND, json!({"error": "no run `ghost`"})));
    let (code, _) = h.get("/api/v1/runs/ghost/events").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, body) = h.get("/api/v1/runs?status=done").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "status: `done` is not one of `running`, `suspended`, `completed`, `failed`, `cancelled`"
    );

    // Type errors name the field; a body that is not an object says so; a wrong method is JSON too.
    let (code, body) = h.post("/api/v1/runs", json!({"spec_name": 5})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().starts_with("spec_name: invalid type: integer `5`"), "{body}");
    let (code, body) = h.post("/api/v1/runs/dup/fork", json!({"at_seq": -1})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().starts_with("at_seq: invalid value: integer `-1`"), "{body}");
    let (code, body) = h.post_raw("/api/v1/runs", "[]").await;
    assert_eq!((code, body), (StatusCode::BAD_REQUEST, json!({"error": "the body must be a JSON object (`{..}`)"})));
    let response = h.http.delete(format!("{}/api/v1/runs/dup", h.base)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"error": "method DELETE is not allowed on /api/v1/runs/dup"}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_runs_follow_the_cursor() {
    let h = Harness::start().await;
    for i in 0..5 {
        let (code, _) =
            h.post("/api/v1/runs", json!({"spec": SHOUT, "inputs": {"topic": "t"}, "run_id": format!("p{i}")})).await;
        assert_eq!(code, StatusCode::CREATED);
    }
    for i in 0..5 {
        h.wait_for(&format!("p{i}"), "completed").await;
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..3 {
        let (code, page) = h.get(&format!("/api/v1/runs?limit=2&cursor={cursor}")).await;
        assert_eq!(code, StatusCode::OK);
        seen.extend(page["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
    h.stop().await;
}

/// Runs answered while a client pages through the list move in `updated_at`, not in the page order: each run
/// is listed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_lists_every_run_once_while_runs_are_updated() {
    let h = Harness::start().await;
    for i in 0..6 {
        let run_id = format!("q{i}");
        let (code, _) =
            h.post("/api/v1/runs", json!({"spec": APPROVAL, "inputs": {"item": "x"}, "run_id": run_id})).await;
        assert_eq!(code, StatusCode::CREATED);
        h.wait_for(&run_id, "suspended").await;
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for page_number in 0..6 {
        let (code, page) = h.get(&format!("/api/v1/runs?limit=2&cursor={cursor}")).await;
        assert_eq!(code, StatusCode::OK);
        seen.extend(page["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()));
        // After each page, a run not listed yet, and one listed already, are answered and complete.
        if page_number < 2 {
            for run_id in [format!("q{page_number}"), format!("q{}", 5 - page_number)] {
                let (code, body) =
                    h.post(&format!("/api/v1/runs/{run_id}/responses/manager"), json!({"value": "ok"})).await;
                assert_eq!(code, StatusCode::ACCEPTED, "{body}");
                h.wait_for(&run_id, "completed").await;
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ["q5", "q4", "q3", "q2", "q1", "q0"], "newest first, each once");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_is_cancelled() {
    let h = Harness::start().await;
    h.post("/api/v1/runs", json!({"spec": APPROVAL, "inputs": {"item": "x"}, "run_id": "c1"})).await;
    h.wait_for("c1", "suspended").await;
    let (code, _) = h.post("/api/v1/runs/c1/cancel", json!({})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let run = h.wait_for("c1", "cancelled").await;
    assert_eq!(run["state"]["offer"], "ship x");
    assert!(run["state"].get("decision").is_none());
    let (code, body) = h.post("/api/v1/runs/c1/cancel", json!({})).await;
    assert_eq!((code, body), (StatusCode::CONFLICT, json!({"error": "run `c1` has already ended (cancelled)"})));
    // Its question takes no answer: none is offered, and an answer is refused saying what continues it.
    assert_eq!(run["pending"], json!([]));
    let (code, body) = h.post("/api/v1/runs/c1/responses/manager", json!({"value": "yes"})).await;
    assert_eq!(
        (code, body),
        (
            StatusCode::CONFLICT,
            json!({"error": "run `c1`: is cancelled: it has no pending response to answer; resuming it continues \
                             the run (POST /api/v1/runs/c1/resume, or `agentic resume c1`)"})
        )
    );
    let events = h.events("c1").await;
    assert_eq!(events.last().unwrap().0, "cancelled");
    // As `agentic resume` without a server: a cancelled run continues from its last checkpoint.
    let (code, _) = h.post("/api/v1/runs/c1/resume", json!({})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let run = h.wait_for("c1", "suspended").await;
    assert_eq!(run["pending"][0]["prompt"], "Approve: ship x?");
    let (code, _) = h.post("/api/v1/runs/c1/responses/manager", json!({"value": "yes"})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    assert_eq!(h.wait_for("c1", "completed").await["output"], "ship x: yes");
    h.stop().await;
}

/// A question with a deadline stays in the record of a run cancelled while it waited (its asker reads it back on
/// resume), but takes no answer: the API lists no pending response for the cancelled run, an answer gets `409`
/// saying that resuming asks the question again, and after the resume it is answered as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_runs_question_takes_no_answer_until_it_is_resumed() {
    const TIMED: &str = r#"
version: 1
name: timed
root: main
agents:
  main: { kind: sequence, agents: [ask, done], output_key: result }
  ask: { kind: human, prompt: "Approve {{ doc }}?", response_id: approve, deadline: 1h, output_key: ok }
  done: { kind: compute, template: "{{ doc }}: {{ ok }}", output_key: result }
"#;
    let h = Harness::start().await;
    h.post("/api/v1/runs", json!({"spec": TIMED, "inputs": {"doc": "D"}, "run_id": "t1"})).await;
    h.wait_for("t1", "suspended").await;
    assert_eq!(h.post("/api/v1/runs/t1/cancel", json!({})).await.0, StatusCode::ACCEPTED);
    let run = h.wait_for("t1", "cancelled").await;
    let (_, record) = h.get("/api/v1/store/runs/t1").await;
    assert_eq!(record["pending"][0]["id"], "approve", "the record keeps the question: {record}");
    assert_eq!(run["pending"], json!([]));
    let (_, list) = h.get("/api/v1/runs").await;
    assert_eq!((&list["runs"][0]["status"], &list["runs"][0]["pending"]), (&json!("cancelled"), &json!([])));
    let (code, body) = h.post("/api/v1/runs/t1/responses/approve", json!({"value": "yes"})).await;
    assert_eq!(
        (code, body),
        (
            StatusCode::CONFLICT,
            json!({"error": "run `t1`: is cancelled: it has no pending response to answer; resuming it continues \
                             the run and asks its questions again (POST /api/v1/runs/t1/resume, or `agentic resume \
                             t1`)"})
        )
    );
    assert_eq!(h.post("/api/v1/runs/t1/resume", json!({})).await.0, StatusCode::ACCEPTED);
    let run = h.wait_for("t1", "suspended").await;
    assert_eq!(run["pending"][0]["id"], "approve");
    assert_eq!(h.post("/api/v1/runs/t1/responses/approve", json!({"value": "yes"})).await.0, StatusCode::ACCEPTED);
    assert_eq!(h.wait_for("t1", "completed").await["output"], "D: yes");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_is_answered_after_a_restart() {
    let h = Harness::start().await;
    h.post("/api/v1/runs", json!({"spec": APPROVAL, "inputs": {"item": "y"}, "run_id": "s1"})).await;
    h.wait_for("s1", "suspended").await;
    assert!(h.dir.path().join("store").join(agentic_server::SERVER_FILE).is_file());
    let dir = h.stop().await;
    assert!(!dir.path().join("store").join(agentic_server::SERVER_FILE).exists());

    let h = Harness::start_in(dir, None).await;
    let (code, _) = h.post("/api/v1/runs/s1/responses/manager", json!({"value": "no"})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let run = h.wait_for("s1", "completed").await;
    assert_eq!(run["output"], "ship y: no");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start_in(dir, Some("s3cret")).await;
    let (code, body) = h.get("/api/v1/runs").await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body["error"],
        "missing or wrong credential: send the header `Authorization: Bearer <API key or token>`"
    );
    // The liveness probe answers without the token, and says nothing else; with it, the whole body.
    let wrong = h.http.get(format!("{}/healthz", h.base)).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::OK);
    assert_eq!(wrong.json::<Value>().await.unwrap(), json!({"status": "ok"}));
    let right = h.http.get(format!("{}/healthz", h.base)).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(right.status(), StatusCode::OK);
    assert_eq!(right.json::<Value>().await.unwrap(), json!({"status": "ok", "store": "test", "runs_in_flight": 0}));
    // Readiness needs the token.
    let (code, body) = h.get("/readyz").await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body["error"],
        "missing or wrong credential: send the header `Authorization: Bearer <API key or token>`"
    );
    // A2A clients, as API clients, get the JSON answer and the challenge, not the browser's login form.
    for (post, path) in [(true, "/a2a"), (true, "/a2a/hello"), (false, "/.well-known/agent-card.json")] {
        let url = format!("{}{path}", h.base);
        let request = if post { h.http.post(url).json(&json!({"jsonrpc": "2.0"})) } else { h.http.get(url) };
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer", "{path}");
        let body = response.json::<Value>().await.unwrap();
        assert_eq!(
            body["error"],
            "missing or wrong credential: send the header `Authorization: Bearer <API key or token>`"
        );
    }
    h.stop().await;

    // Not loopback with a token: a request without it gets 401.
    let store = agentic_store::MemoryStore::new().store_ref();
    let config = ServerConfig::new(store).listen("0.0.0.0:0".parse().unwrap()).token(Some("t0k".into()), "TEST_TOKEN");
    let server = Server::start(config).await.unwrap();
    let url = format!("http://127.0.0.1:{}/api/v1/runs", server.local_addr().port());
    let response = reqwest::Client::new().get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = reqwest::Client::new().get(&url).bearer_auth("t0k").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    server.shutdown().await.unwrap();

    // Not loopback and no token: refused before listening.
    let store = agentic_store::MemoryStore::new().store_ref();
    let config = ServerConfig::new(store).listen("0.0.0.0:0".parse().unwrap());
    let err = Server::start(config).await.err().unwrap();
    assert_eq!(
        err.to_string(),
        "refusing to listen on 0.0.0.0:0 without a token: a non-loopback address needs one (set $AGENTIC_TOKEN, \
         or name the variable with --token-env), or an API key in the store (agentic keys create)"
    );
    // An API key in the store guards it as a token does.
    let store = agentic_store::MemoryStore::new().store_ref();
    let admin = agentic_server::NewKey {
        name: "root".into(),
        tenant: "main".into(),
        roles: vec![agentic_engine::Role::Admin],
        ..agentic_server::NewKey::default()
    };
    let (key, _) = agentic_server::create_key(store.as_ref(), admin, "test").await.unwrap();
    let server = Server::start(ServerConfig::new(store).listen("0.0.0.0:0".parse().unwrap())).await.unwrap();
    let url = format!("http://127.0.0.1:{}/api/v1/runs", server.local_addr().port());
    let client = reqwest::Client::new();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(client.get(&url).bearer_auth(&key).send().await.unwrap().status(), 200);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_re_executes_only_the_steps_after_its_point_and_leaves_the_original_alone() {
    let steps: String =
        (1..=10).map(|i| format!("  c{i}: {{ kind: compute, value: \"acc ~ '{i}'\", output_key: acc }}\n")).collect();
    let names: Vec<String> = (1..=10).map(|i| format!("c{i}")).collect();
    let spec = format!(
        "version: 1\nname: ten\nroot: main\nagents:\n  main: {{ kind: sequence, agents: [{}], output_key: acc }}\n{steps}",
        names.join(", ")
    );
    let h = Harness::start().await;
    let (code, _) = h.post("/api/v1/runs", json!({"spec": spec, "inputs": {"acc": ">"}, "run_id": "ten"})).await;
    assert_eq!(code, StatusCode::CREATED);
    let original = h.wait_for("ten", "completed").await;
    assert_eq!(original["output"], ">12345678910");
    let (_, journal_before) = h.get("/api/v1/store/runs/ten/records").await;
    let (_, record_before) = h.get("/api/v1/store/runs/ten").await;

    // Step 1 holds the inputs, steps 2..=5 are c1..c4: the fork continues with c5.
    let (code, body) = h.post("/api/v1/runs/ten/fork", json!({"at_seq": 5, "run_id": "ten-b"})).await;
    assert_eq!((code, body), (StatusCode::CREATED, json!({"run_id": "ten-b"})));
    let fork = h.wait_for("ten-b", "completed").await;
    assert_eq!(fork["output"], original["output"]);
    let (_, journal) = h.get("/api/v1/store/runs/ten-b/records").await;
    let rerun: Vec<&str> = journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["seq"].as_u64().unwrap() > 5)
        .map(|r| r["invocation"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(rerun, ["c5", "c6", "c7", "c8", "c9", "c10", "main"]);
    assert_eq!(h.get("/api/v1/store/runs/ten/records").await.1, journal_before, "the original's journal");
    assert_eq!(h.get("/api/v1/store/runs/ten").await.1, record_before, "the original's record");

    let (code, body) = h.post("/api/v1/runs/ten/fork", json!({"at_seq": 40})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"], "at_seq: cannot fork run `ten` at step 40: it has 12 steps (fork at 0 to 12)");
    let (code, _) = h.post("/api/v1/runs/ten/fork", json!({"at_seq": 3, "run_id": "ten-b"})).await;
    assert_eq!(code, StatusCode::CONFLICT);
    let (code, body) = h.post("/api/v1/runs/ten/fork", json!({"at": 3})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().starts_with("unknown field `at`"), "{body}");
    let (code, _) = h.post("/api/v1/runs/none/fork", json!({"at_seq": 1})).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_with_a_spec_moves_a_run_only_when_its_structure_is_unchanged() {
    let h = Harness::start().await;
    let (code, _) = h.post("/api/v1/runs", json!({"spec": APPROVAL, "inputs": {"item": "nuts"}, "run_id": "u1"})).await;
    assert_eq!(code, StatusCode::CREATED);
    let run = h.wait_for("u1", "suspended").await;
    let hash = run["spec"]["hash"].as_str().unwrap().to_string();
    assert_eq!((run["spec"]["name"].as_str(), hash.len()), (Some("approval"), 64));

    // Another structure (a step added): refused, naming the change; the run is left as it was.
    let grown = APPROVAL
        .replace("agents: [offer, approve, decide]", "agents: [offer, approve, decide, log]")
        .replace("agents:\n", "agents:\n  log: { kind: compute, template: \"logged\", output_key: logged }\n");
    let (code, body) = h.post("/api/v1/runs/u1/resume", json!({"spec": grown})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["error"],
        "run `u1` cannot move to the posted spec: its structure changed: agent `main` at `root`: its sub-agents \
         changed from [`offer`, `approve`, `decide`] to [`offer`, `approve`, `decide`, `log`]"
    );
    let (_, run) = h.get("/api/v1/runs/u1").await;
    assert_eq!((run["status"].as_str(), run["spec"]["hash"].as_str()), (Some("suspended"), Some(hash.as_str())));
    // Both fields, or an unknown one: 400.
    let (code, body) = h.post("/api/v1/runs/u1/resume", json!({"spec": APPROVAL, "spec_name": "x"})).await;
    assert_eq!(
        (code, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("give either `spec` or `spec_name`, not both"))
    );

    // The same structure with another template: moved, and what is left runs on the new text.
    let (code, _) = h.post("/api/v1/runs/u1/responses/manager", json!({"value": "go"})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    h.wait_for("u1", "completed").await;
    let (code, _) =
        h.post("/api/v1/runs", json!({"spec": APPROVAL, "inputs": {"item": "bolts"}, "run_id": "u2"})).await;
    assert_eq!(code, StatusCode::CREATED);
    h.wait_for("u2", "suspended").await;
    let renamed = APPROVAL.replace("\"{{ offer }}: {{ answer }}\"", "\"v2 {{ offer }} -> {{ answer }}\"");
    let (code, body) = h.post("/api/v1/runs/u2/resume", json!({"spec": renamed})).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    let run = h.wait_for("u2", "suspended").await;
    assert_ne!(run["spec"]["hash"], json!(hash), "the run names the new text");
    let (code, _) = h.post("/api/v1/runs/u2/responses/manager", json!({"value": "ok"})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let run = h.wait_for("u2", "completed").await;
    assert_eq!(run["output"], "v2 ship bolts -> ok");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_spec_is_named_after_its_file_name_when_it_has_no_name() {
    let h = Harness::start().await;
    let text = "version: 1\nroot: hi\nagents:\n  hi: { kind: compute, template: \"hi\", output_key: r }\n";
    let (code, _) = h.post("/api/v1/runs", json!({"spec": text, "file_name": "greet.yaml", "run_id": "f1"})).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(h.wait_for("f1", "completed").await["name"], "greet");
    let (code, _) = h.post("/api/v1/runs", json!({"spec": text, "run_id": "f2"})).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(h.wait_for("f2", "completed").await["name"], "spec");
    // A spec's `name:` wins over its file's.
    let (code, _) = h
        .post(
            "/api/v1/runs",
            json!({"spec": APPROVAL, "file_name": "x.yaml", "run_id": "f3", "inputs": {"item": "tea"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(h.wait_for("f3", "suspended").await["name"], "approval");

    let (code, body) = h.post("/api/v1/runs", json!({"spec": text, "file_name": "../greet.yaml"})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "file_name: `../greet.yaml` is not a file name (such as `hello.yaml`: no directory, not starting with `.`)"
    );
    let (code, body) = h.post("/api/v1/runs", json!({"spec_name": "hello", "file_name": "greet.yaml"})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "file_name `greet.yaml` is for a posted `spec`; give `spec` too");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_ready_and_why_not() {
    let h = Harness::start().await;
    let (code, body) = h.get("/readyz").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        body,
        json!({
            "status": "ready", "store": "test", "store_reachable": true, "accepting_runs": true,
            "runs_in_flight": 0, "specs": [], "shared_store": false
        })
    );
    h.stop().await;
}
