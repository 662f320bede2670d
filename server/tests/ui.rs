//! The web UI of SERVER.md §3 against a real server on loopback: every page renders, everything that comes
//! from a run is escaped in the HTML, the assets are served by the server itself, and the login cookie works.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic_server::{Server, ServerConfig};
use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

const PROBE: &str = r#"<img src=x onerror="document.body.dataset.xss=1">"#;

/// A computation that copies its input into the state, then a human step whose prompt holds a probe itself
/// and shows the computed value.
const PROBE_SPEC: &str = r#"
version: 1
name: probe
root: main
agents:
  main: { kind: sequence, agents: [note, ask], output_key: answer }
  note: { kind: compute, inputs: [text], template: "{{ text }}", output_key: note }
  ask:
    kind: human
    prompt: 'Approve <img src=x onerror="document.body.dataset.xss=1"> {{ note }}?'
    response_id: check
    output_key: answer
"#;

struct Harness {
    server: Server,
    base: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Harness {
    async fn start(token: Option<&str>) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let specs = dir.path().join("specs");
        std::fs::create_dir_all(&specs).unwrap();
        std::fs::write(specs.join("probe.yaml"), PROBE_SPEC).unwrap();
        std::fs::write(specs.join("hello.yaml"), include_str!("../../examples/specs/hello.yaml")).unwrap();
        std::fs::write(specs.join("broken.yaml"), "version: 1\nname: broken\nroot: ghost\nagents: {}\n").unwrap();
        let store = agentic_store::SledStore::open(dir.path().join("store")).unwrap().store_ref();
        let config = ServerConfig::new(store)
            .state_dir(dir.path().join("store"))
            .specs_dir(&specs)
            .listen("127.0.0.1:0".parse().unwrap())
            .token(token.map(str::to_string), "TEST_TOKEN");
        let server = Server::start(config).await.unwrap();
        let base = server.url();
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Harness { server, base, http, _dir: dir }
    }

    async fn page(&self, path: &str) -> (StatusCode, String, reqwest::header::HeaderMap) {
        let response = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        (status, response.text().await.unwrap(), headers)
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn wait_for(&self, run_id: &str, status: &str) -> Value {
        let url = format!("{}/api/v1/runs/{run_id}", self.base);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let run: Value = self.http.get(&url).send().await.unwrap().json().await.unwrap();
            if run["status"] == status && run["executing"] == false {
                return run;
            }
            assert!(tokio::time::Instant::now() < deadline, "run {run_id} never reached {status}: {run}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The URL of the page's script and stylesheet.
fn assets(html: &str) -> (String, String) {
    let find = |prefix: &str, suffix: &str| {
        let start = html.find(prefix).unwrap() + prefix.len() - "/assets/".len();
        let end = start + html[start..].find(suffix).unwrap() + suffix.len();
        html[start..end].to_string()
    };
    (find("src=\"/assets/", ".js"), find("href=\"/assets/", ".css"))
}

#[tokio::test]
async fn every_page_renders_and_the_assets_come_from_the_server() {
    let h = Harness::start(None).await;
    let (code, html, headers) = h.page("/").await;
    assert_eq!(code, StatusCode::OK);
    assert!(html.contains("<h1>Runs</h1>"), "{html}");
    for link in [r#"href="/inbox""#, r#"href="/new""#, r#"href="/?status=suspended""#] {
        assert!(html.contains(link), "{link} in {html}");
    }
    assert!(html.contains("No runs"));
    assert!(html.contains(r#"data-live="true""#), "the first page refreshes itself: {html}");
    let csp = headers[CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"), "{csp}");
    assert!(!html.contains("http://") && !html.contains("https://"), "no external asset: {html}");

    let (js, css) = assets(&html);
    assert!(js.starts_with("/assets/app-") && css.starts_with("/assets/style-"), "{js} {css}");
    let (code, script, headers) = h.page(&js).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(headers[CONTENT_TYPE], "text/javascript; charset=utf-8");
    assert_eq!(headers[CACHE_CONTROL], "public, max-age=31536000, immutable");
    assert!(script.contains("EventSource"));
    assert!(!script.contains("innerHTML") && !script.contains("insertAdjacentHTML"), "the script writes text only");
    let (code, _, headers) = h.page(&css).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(headers[CONTENT_TYPE], "text/css; charset=utf-8");
    assert_eq!(h.page("/assets/app-0.js").await.0, StatusCode::NOT_FOUND);

    let (code, html, _) = h.page("/new").await;
    assert_eq!(code, StatusCode::OK);
    assert!(html.contains(r#"<option value="probe">probe</option>"#), "{html}");
    assert!(html.contains(r#"<option value="broken">broken</option>"#), "{html}");
    assert!(html.contains("this spec does not parse"), "a broken spec says why: {html}");
    assert!(html.contains(r#"<textarea name="inputs" id="inputs""#));

    let (code, html, _) = h.page("/inbox").await;
    assert_eq!(code, StatusCode::OK);
    assert!(html.contains("<h1>Inbox</h1>") && html.contains("Nothing is waiting for an answer."), "{html}");
    let (code, body, _) = h.page("/inbox.json").await;
    assert_eq!((code, serde_json::from_str::<Value>(&body).unwrap()), (StatusCode::OK, json!({"items": []})));

    let (code, html, _) = h.page("/runs/ghost").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(html.contains("<h1>Not found</h1>") && html.contains("no run `ghost`"), "{html}");
    let (code, html, _) = h.page("/nowhere").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(html.contains("There is no page at &#x2f;nowhere."), "{html}");
    let (code, body, _) = h.page("/api/v1/nowhere").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"error": "no such endpoint: /api/v1/nowhere"}));
    let (code, html, _) = h.page("/?status=done").await;
    assert_eq!(code, StatusCode::OK);
    assert!(html.contains("status: `done` is not one of"), "{html}");
    // Without a token there is nothing to sign in to.
    let (code, _, headers) = h.page("/login").await;
    assert_eq!(code, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION], "/");
    h.server.shutdown().await.unwrap();
}

/// A run without a required input is refused at the door (`422` naming each missing input's field, no run
/// recorded), and the new-run form lists each spec's inputs, the required ones marked.
#[tokio::test]
async fn a_missing_input_is_refused_with_422_and_the_new_run_form_lists_the_inputs() {
    let h = Harness::start(None).await;
    // Declared in `params`.
    let (code, body) = h.post("/api/v1/runs", json!({"spec_name": "hello"})).await;
    let why = "missing (a string, declared in `params` without a default)";
    assert_eq!(
        (code, body),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"error": format!("inputs.name: {why}"),
                   "errors": [{"field": "inputs.name", "key": "name", "message": why,
                               "text": format!("input `name`: {why}")}]})
        )
    );
    // Without `params`: read by an agent that always runs.
    let (code, body) = h.post("/api/v1/runs", json!({"spec_name": "probe", "inputs": {"other": 1}})).await;
    assert_eq!(
        (code, &body["error"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &json!("inputs.text: missing (read by agent `note`)"))
    );
    let (code, runs, _) = h.page("/api/v1/runs").await;
    assert_eq!(
        (code, serde_json::from_str::<Value>(&runs).unwrap()),
        (StatusCode::OK, json!({"runs": [], "next_cursor": null})),
        "no run was recorded"
    );

    let (code, html, _) = h.page("/new").await;
    assert_eq!(code, StatusCode::OK);
    for row in [
        "<tr><td><code>name</code></td><td>required</td><td>string</td><td></td><td>who to greet</td></tr>",
        "<tr><td><code>place</code></td><td>optional</td><td>string</td><td><code>&quot;agentic&quot;</code></td>\
         <td>where to welcome them</td></tr>",
        "<tr><td><code>text</code></td><td>required</td><td>any</td><td></td><td>read by agent `note`</td></tr>",
        "The inputs this spec declares (<code>params</code>); a run without a required one is refused.",
        "The inputs this spec's agents read (it declares no <code>params</code>); a run without a required one \
         is refused.",
    ] {
        assert!(html.contains(row), "{row} in {html}");
    }
}

#[tokio::test]
async fn run_data_is_escaped_on_the_run_page_the_list_and_the_inbox() {
    let h = Harness::start(None).await;
    let run_id = r#"probe-"<i>1</i>"#;
    let (code, body) =
        h.post("/api/v1/runs", json!({"spec_name": "probe", "inputs": {"text": PROBE}, "run_id": run_id})).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let run = h.wait_for("probe-%22%3Ci%3E1%3C%2Fi%3E", "suspended").await;
    assert_eq!(run["state"]["note"], PROBE);
    assert_eq!(run["pending"][0]["prompt"], format!("Approve {PROBE} {PROBE}?"));

    let escaped = "&lt;img src=x onerror=";
    let (code, html, _) = h.page("/runs/probe-%22%3Ci%3E1%3C%2Fi%3E").await;
    assert_eq!(code, StatusCode::OK);
    assert!(!html.contains("<img") && !html.contains("<i>"), "nothing from the run is markup: {html}");
    assert_eq!(html.matches(escaped).count(), 4, "the prompt's two probes and the state's two: {html}");
    assert!(html.contains(r#"<span class="badge status-suspended">suspended</span>"#), "{html}");
    assert!(html.contains(r#"data-run-id="probe-&quot;&lt;i&gt;1&lt;&#x2f;i&gt;""#), "{html}");
    assert!(html.contains(r#"href="/api/v1/runs/probe-%22%3Ci%3E1%3C%2Fi%3E/report""#), "{html}");
    assert!(html.contains(r#"data-response-id="check""#) && html.contains("<textarea name=\"value\""), "{html}");
    assert!(html.contains(r#"id="cancel" class="danger">"#), "the cancel button is shown: {html}");

    let (code, html, _) = h.page("/inbox").await;
    assert_eq!(code, StatusCode::OK);
    assert!(!html.contains("<img") && !html.contains("<i>"), "{html}");
    assert_eq!(html.matches(escaped).count(), 2, "{html}");
    assert!(html.contains(r#"href="/runs/probe-%22%3Ci%3E1%3C%2Fi%3E""#), "{html}");
    assert!(html.contains("Approve &lt;img"), "{html}");
    let (_, body, _) = h.page("/inbox.json").await;
    let items: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(items["items"][0]["prompt"], format!("Approve {PROBE} {PROBE}?"));
    assert_eq!(items["items"][0]["run_id"], run_id);

    let (code, html, _) = h.page("/").await;
    assert_eq!(code, StatusCode::OK);
    assert!(!html.contains("<i>") && html.contains("probe-&quot;&lt;i&gt;1&lt;&#x2f;i&gt;"), "{html}");

    // Answered: the inbox is empty again and the run page shows the output, escaped.
    let (code, _) = h.post("/api/v1/runs/probe-%22%3Ci%3E1%3C%2Fi%3E/responses/check", json!({"value": PROBE})).await;
    assert_eq!(code, StatusCode::ACCEPTED);
    h.wait_for("probe-%22%3Ci%3E1%3C%2Fi%3E", "completed").await;
    let (_, html, _) = h.page("/inbox").await;
    assert!(html.contains("Nothing is waiting for an answer."));
    let (_, html, _) = h.page("/runs/probe-%22%3Ci%3E1%3C%2Fi%3E").await;
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains(r#"<pre id="run-output" class="value">&lt;img src=x"#), "{html}");
    assert!(html.contains(r#"id="cancel" class="danger" hidden>"#), "no cancel for an ended run: {html}");
    h.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_schedules_page_lists_the_schedules_with_their_inputs_as_text() {
    let h = Harness::start(None).await;
    let (code, html, _) = h.page("/schedules").await;
    assert_eq!(code, StatusCode::OK);
    assert!(html.contains("<h1>Schedules</h1>") && html.contains("No schedules."), "{html}");
    assert!(html.contains(r#"<a href="/schedules" aria-current="page">Schedules</a>"#), "{html}");
    let schedule = json!({"id": "nightly", "spec_name": "probe", "cron": "0 2 * * *", "timezone": "Europe/Paris",
                          "inputs": {"text": PROBE}, "overlap": "enqueue"});
    let (code, body) = h.post("/api/v1/schedules", schedule).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, html, _) = h.page("/schedules").await;
    assert_eq!(code, StatusCode::OK);
    assert!(!html.contains("No schedules."), "{html}");
    assert!(html.contains(r#"<tr data-schedule-id="nightly">"#), "{html}");
    assert!(html.contains("<code>0 2 * * *</code> Europe&#x2f;Paris"), "{html}");
    assert!(html.contains("<td>enqueue</td>"), "{html}");
    assert!(!html.contains("<img"), "the inputs are text: {html}");
    assert_eq!(html.matches("&lt;img src=x onerror=").count(), 1, "{html}");
    h.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_huge_state_value_is_shortened_on_the_run_page() {
    let h = Harness::start(None).await;
    let spec = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [note, ask] }\n  note: { kind: \
                compute, inputs: [text], template: '{{ text }}', output_key: note }\n  ask: { kind: human, prompt: \
                'Approve?', response_id: check, output_key: answer }\n";
    let text = "é".repeat(100_000);
    let (code, body) = h.post("/api/v1/runs", json!({"spec": spec, "inputs": {"text": text}, "run_id": "big"})).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let run = h.wait_for("big", "suspended").await;
    assert_eq!(run["state"]["note"].as_str().map(str::len), Some(200_000), "the API has the whole value");
    let (code, html, _) = h.page("/runs/big").await;
    assert_eq!(code, StatusCode::OK);
    let shown = format!(
        "{}… (98000 more characters; the whole value is in GET &#x2f;api&#x2f;v1&#x2f;runs&#x2f;big and the report)",
        "é".repeat(2000)
    );
    let tail = html.split("é").find(|part| part.contains("more characters")).unwrap_or("");
    assert_eq!(
        html.matches(&shown).count(),
        2,
        "the input and the note cut after 2000 characters: {}",
        &tail[..tail.len().min(200)]
    );
    assert!(html.len() < 20_000, "the page stays small: {} bytes", html.len());
    h.server.shutdown().await.unwrap();
}

/// A cancelled run's question takes no answer: its page has no answer form but says that resuming asks again,
/// and the inbox does not list it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_offers_no_answer_form_and_leaves_the_inbox() {
    let h = Harness::start(None).await;
    // A deadline keeps the question in the cancelled run's record (its asker reads it back on resume).
    let spec = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [ask], output_key: ok }\n  \
                ask: { kind: human, prompt: 'Ship it?', response_id: check, deadline: 1h, output_key: ok }\n";
    let (code, body) = h.post("/api/v1/runs", json!({"spec": spec, "run_id": "c1"})).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    h.wait_for("c1", "suspended").await;
    let (_, html, _) = h.page("/runs/c1").await;
    assert!(html.contains("<textarea name=\"value\""), "a suspended run's page has the form: {html}");
    assert_eq!(h.post("/api/v1/runs/c1/cancel", json!({})).await.0, StatusCode::ACCEPTED);
    h.wait_for("c1", "cancelled").await;

    let (code, html, _) = h.page("/runs/c1").await;
    assert_eq!(code, StatusCode::OK);
    assert!(!html.contains("answer-form") && !html.contains("<textarea"), "no answer form: {html}");
    assert!(html.contains(r#"<section id="pending-box" hidden>"#), "{html}");
    assert!(html.contains("<h2>Asked before it was cancelled</h2>"), "{html}");
    assert!(html.contains("response <code>check</code>"), "{html}");
    assert!(
        html.contains(
            "The run is cancelled: these questions take no answer. Resuming it (<code>POST \
             /api/v1/runs/c1/resume</code>, or <code>agentic resume c1</code>) continues the run and asks them again."
        ),
        "{html}"
    );
    let (_, html, _) = h.page("/inbox").await;
    assert!(html.contains("Nothing is waiting for an answer."), "{html}");
    let (_, body, _) = h.page("/inbox.json").await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"items": []}));
    h.server.shutdown().await.unwrap();
}

/// A `mode: pending` human step holds its run (`running`), and its question is in the inbox and the API like a
/// suspended run's: the answer through the API reaches the waiting step.
#[tokio::test]
async fn a_pending_mode_human_step_waits_in_the_inbox_and_takes_the_answer() {
    let h = Harness::start(None).await;
    let spec = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [ask, done], output_key: out }\n  \
                ask: { kind: human, mode: pending, prompt: 'Ship `{{ item }}`?', response_id: ship, output_key: ok }\n  \
                done: { kind: compute, template: '{{ item }}: {{ ok }}', output_key: out }\n";
    let (code, body) =
        h.post("/api/v1/runs", json!({"spec": spec, "inputs": {"item": "crate 7"}, "run_id": "held"})).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let mut run = json!(null);
    for _ in 0..100 {
        let (_, text, _) = h.page("/api/v1/runs/held").await;
        run = serde_json::from_str(&text).unwrap();
        if run["pending"].as_array().is_some_and(|p| !p.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run["status"], "running", "the step holds the run: {run}");
    assert_eq!(run["pending"], json!([{"id": "ship", "prompt": "Ship `crate 7`?", "agent": "ask"}]));
    let (_, body, _) = h.page("/inbox.json").await;
    let items: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (&items["items"][0]["run_id"], &items["items"][0]["prompt"]),
        (&json!("held"), &json!("Ship `crate 7`?"))
    );
    // The prompt's Markdown code span is shown as code, not with its backticks.
    let (_, html, _) = h.page("/inbox").await;
    assert!(html.contains(r#"<p class="prompt">Ship <code>crate 7</code>?</p>"#), "{html}");
    let (_, html, _) = h.page("/runs/held").await;
    assert!(html.contains(r#"<p class="prompt">Ship <code>crate 7</code>?</p>"#), "{html}");
    let (code, body) = h.post("/api/v1/runs/held/responses/ship", json!({"value": "yes"})).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    let run = h.wait_for("held", "completed").await;
    assert_eq!(run["output"], "crate 7: yes");
    assert_eq!(run["pending"], json!([]));
    let (_, html, _) = h.page("/inbox").await;
    assert!(html.contains("Nothing is waiting for an answer."), "{html}");
    h.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_login_form_sets_an_http_only_strict_cookie() {
    let h = Harness::start(Some("s3cret")).await;
    let (code, html, _) = h.page("/").await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert!(html.contains(r#"<form method="post" action="/login""#), "{html}");
    // The form's script and stylesheet need no token (they hold no run data).
    let (js, css) = assets(&html);
    assert_eq!(h.page(&js).await.0, StatusCode::OK);
    assert_eq!(h.page(&css).await.0, StatusCode::OK);
    assert_eq!(h.page("/inbox.json").await.0, StatusCode::UNAUTHORIZED);
    let (code, _, _) = h.page("/login").await;
    assert_eq!(code, StatusCode::OK);

    let login = |token: &str| {
        h.http
            .post(format!("{}/login", h.base))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    let wrong = login("nope").await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.text().await.unwrap().contains("That key or token is wrong."));
    let right = login("s3cret").await.unwrap();
    assert_eq!(right.status(), StatusCode::SEE_OTHER);
    assert_eq!(right.headers()[LOCATION], "/");
    let cookie = right.headers()[SET_COOKIE].to_str().unwrap().to_string();
    assert_eq!(cookie, "agentic_token=s3cret; Path=/; HttpOnly; SameSite=Strict");

    let with_cookie =
        |path: &str| h.http.get(format!("{}{path}", h.base)).header(COOKIE, "agentic_token=s3cret").send();
    assert_eq!(with_cookie("/").await.unwrap().status(), StatusCode::OK);
    assert_eq!(with_cookie("/inbox.json").await.unwrap().status(), StatusCode::OK);
    assert_eq!(with_cookie("/api/v1/runs").await.unwrap().status(), StatusCode::OK);
    h.server.shutdown().await.unwrap();
}
