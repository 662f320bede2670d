//! The web UI of `agentic serve` in a real browser (headless Chromium driven over the DevTools protocol with
//! chromiumoxide): the real binary serves `examples/specs` with a loopback OpenAI-compatible model; the
//! browser starts an `order_approval` run from the new-run form, answers its human step in the inbox and
//! watches the run page reach `completed` with the shipped order. An XSS probe in a human prompt, the state
//! and an answer stays text on the run page and in the inbox, and in a schedule's inputs on the schedules page.
//!
//! A second test takes a tool call through its inbox card (SPEC.md §4): a scripted `refund_desk` asks to refund
//! 150, which waits for approval; the card is refused for a stale `args_hash` (409) and a bad edit (400), each
//! message shown on it, then approved with the amount edited to 120; the run page, open during the answer,
//! lists the call's statuses live. A run whose CLI was killed after the call was sent is in doubt in the same
//! inbox, and its card's "It happened" answer gives the model the result.
//!
//! Screenshots land in `target/tmp/server-ui/`; with `AGENTIC_UPDATE_SCREENSHOTS=1` they also replace
//! those of `docs/img/` (`server-run.png`, `server-inbox.png`, `server-tool-approval.png`, ...).
//!
//! Skipped with a message when Chromium is not installed, unless `AGENTIC_REQUIRE_BROWSER` is set (CI sets it).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown};
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, BrowserConfig, Page};
use futures::StreamExt;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::binary::{Serve, Served};

const PROBE: &str = r#"<img src=x onerror="document.body.dataset.xss=1">"#;

/// What the `extract` agent's model answers (its output schema: customer, item, quantity).
const ORDER_FIELDS: &str = r#"{"customer":"ACME Corp","item":"widgets","quantity":1000}"#;

/// A run whose state, human prompt and output carry the probe (posted over the API as text).
/// A human step with a 30-minute deadline: the inbox shows the time left and counts it down.
const DEADLINE_SPEC: &str = r#"
version: 1
name: timed
root: ask
agents:
  ask: { kind: human, prompt: "Sign off?", deadline: 30m, on_timeout: fail }
"#;

const PROBE_SPEC: &str = r#"
version: 1
name: xss_probe
root: main
agents:
  main: { kind: sequence, agents: [note, ask, done], output_key: done }
  note: { kind: compute, inputs: [text], template: "{{ text }}", output_key: note }
  ask:
    kind: human
    prompt: 'Approve <img src=x onerror="document.body.dataset.xss=1"> {{ note }}?'
    response_id: check
    output_key: answer
  done: { kind: compute, template: "answered {{ answer }}", output_key: done }
"#;

/// Every wait's limit: each wait polls and returns as soon as its condition holds.
const WAIT: Duration = Duration::from_secs(20);

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AGENTIC_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let candidates = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for c in candidates {
            let p = dir.join(c);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// `agentic serve` on `store` with the example specs and the loopback model at `model_url`; killed on drop.
fn serve(store: &Path, model_url: &str) -> Served {
    Serve::on(store)
        .specs_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs"))
        .env("OPENAI_BASE_URL", model_url)
        .env("OPENAI_API_KEY", "sk-loopback")
        .env("OPENAI_MODEL", "gpt-test")
        .start()
}

/// Headless Chromium at `chromium` with its profile in `profile`, 1280×800, and the task that drives its
/// DevTools connection.
async fn launch(chromium: &Path, profile: &Path) -> (Browser, tokio::task::JoinHandle<()>) {
    let config = BrowserConfig::builder()
        .chrome_executable(chromium)
        .no_sandbox()
        .user_data_dir(profile)
        .window_size(1280, 800)
        .viewport(Viewport { width: 1280, height: 800, ..Viewport::default() })
        .args(["--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking"])
        .build()
        .unwrap();
    let (browser, mut handler) = Browser::launch(config).await.expect("chromium starts");
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    (browser, events)
}

/// Chromium, or `None` after saying the test is skipped; a panic when `AGENTIC_REQUIRE_BROWSER` is set.
fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        if std::env::var_os("AGENTIC_REQUIRE_BROWSER").is_some() {
            panic!("AGENTIC_REQUIRE_BROWSER is set but Chromium was not found (install Debian's `chromium`)");
        }
        eprintln!("SKIPPED: Chromium not found (apt-get install -y chromium); the browser checks did not run");
    }
    found
}

/// What the page did that it must not: dialogs opened, uncaught exceptions and `console.error` calls.
#[derive(Default)]
struct Watch {
    dialogs: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

impl Watch {
    async fn attach(page: &Page) -> Arc<Watch> {
        let watch = Arc::new(Watch::default());
        let mut dialogs = page.event_listener::<EventJavascriptDialogOpening>().await.unwrap();
        let (w, p) = (watch.clone(), page.clone());
        tokio::spawn(async move {
            while let Some(event) = dialogs.next().await {
                w.dialogs.fetch_add(1, Ordering::SeqCst);
                w.errors.lock().unwrap().push(format!("dialog: {}", event.message));
                let _ = p.execute(HandleJavaScriptDialogParams::new(false)).await;
            }
        });
        let mut exceptions = page.event_listener::<EventExceptionThrown>().await.unwrap();
        let w = watch.clone();
        tokio::spawn(async move {
            while let Some(event) = exceptions.next().await {
                w.errors.lock().unwrap().push(format!("exception: {:?}", event.exception_details));
            }
        });
        let mut console = page.event_listener::<EventConsoleApiCalled>().await.unwrap();
        let w = watch.clone();
        tokio::spawn(async move {
            while let Some(event) = console.next().await {
                if event.r#type == ConsoleApiCalledType::Error {
                    w.errors.lock().unwrap().push(format!("console.error: {:?}", event.args));
                }
            }
        });
        watch
    }

    fn assert_clean(&self, where_: &str) {
        assert_eq!(self.dialogs.load(Ordering::SeqCst), 0, "a dialog opened on {where_}");
        let errors = self.errors.lock().unwrap();
        assert!(errors.is_empty(), "errors on {where_}: {errors:?}");
    }
}

/// The value of a JavaScript expression (`null` when it has none or the page is between documents).
async fn eval(page: &Page, expression: &str) -> Value {
    match page.evaluate(expression).await {
        Ok(result) => result.value().cloned().unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// Polls `expression` until it is truthy (not null, false, 0 or ""); returns its value.
async fn wait_for(page: &Page, what: &str, expression: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = eval(page, expression).await;
        let truthy = match &value {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            _ => true,
        };
        if truthy {
            return value;
        }
        if Instant::now() > deadline {
            let body = eval(page, "document.body ? document.body.innerText : ''").await;
            panic!("timed out waiting for {what}; last value {value}; the page shows:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for a page of the UI at `path` whose script has run.
async fn wait_page(page: &Page, path: &str) {
    let check = format!("location.pathname === {} && document.body.dataset.ready === '1'", json!(path));
    wait_for(page, &format!("the page {path}"), &check).await;
}

async fn click(page: &Page, selector: &str) {
    page.find_element(selector).await.unwrap_or_else(|e| panic!("no {selector}: {e}")).click().await.unwrap();
}

async fn type_into(page: &Page, selector: &str, text: &str) {
    let element = page.find_element(selector).await.unwrap_or_else(|e| panic!("no {selector}: {e}"));
    element.click().await.unwrap();
    // Select what is there, so that typing replaces it.
    element.call_js_fn("function() { this.select(); }", false).await.unwrap();
    element.type_str(text).await.unwrap();
}

/// The checks of the probe: nothing ran, no element was made from it, and its text is on the page.
async fn assert_probe_is_text(page: &Page, watch: &Watch, where_: &str) {
    let state = eval(
        page,
        &format!(
            "({{xss: document.body.dataset.xss === undefined ? null : document.body.dataset.xss, \
               images: document.querySelectorAll('img').length, visible: document.body.innerText.includes({})}})",
            json!(PROBE)
        ),
    )
    .await;
    assert_eq!(state, json!({"xss": null, "images": 0, "visible": true}), "the probe on {where_}");
    watch.assert_clean(where_);
}

async fn screenshot(page: &Page, name: &str) {
    let png = page.screenshot(ScreenshotParams::builder().format(CaptureScreenshotFormat::Png).build()).await.unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("server-ui");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), &png).unwrap();
    if std::env::var_os("AGENTIC_UPDATE_SCREENSHOTS").is_some() {
        std::fs::write(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img").join(name), &png).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_ui_takes_an_order_through_the_inbox_in_chromium_and_shows_run_data_as_text() {
    let Some(chromium) = chromium_or_skip() else { return };
    let started = Instant::now();

    // The model: every chat completion answers the order's fields.
    let model = MockServer::start().await;
    let completion = json!({
        "id": "c", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ORDER_FIELDS}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4}
    });
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_json(completion)).mount(&model).await;

    let tmp = tempfile::tempdir().unwrap();
    let serve = serve(&tmp.path().join("store"), &format!("{}/v1", model.uri()));
    let http = reqwest::Client::new();
    let base = serve.url.clone();

    // The probe run, over the API: it waits in the inbox next to the order.
    let created = http
        .post(format!("{base}/api/v1/runs"))
        .json(&json!({"spec": PROBE_SPEC, "inputs": {"text": PROBE}, "run_id": "xss-probe"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    let timed = http
        .post(format!("{base}/api/v1/runs"))
        .json(&json!({"spec": DEADLINE_SPEC, "run_id": "timed-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(timed.status(), reqwest::StatusCode::CREATED);

    let profile = tempfile::tempdir().unwrap();
    let (mut browser, events) = launch(&chromium, profile.path()).await;
    let page = browser.new_page("about:blank").await.unwrap();
    let watch = Watch::attach(&page).await;

    // The runs list, then the new-run form through the nav.
    page.goto(format!("{base}/")).await.unwrap();
    wait_page(&page, "/").await;
    wait_for(&page, "the probe run listed", "document.querySelector('tr[data-run-id=\"xss-probe\"]') !== null").await;
    click(&page, r#"header nav a[href="/new"]"#).await;
    wait_page(&page, "/new").await;
    let picked = eval(
        &page,
        "(function () { const s = document.getElementById('spec_name'); s.value = 'order_approval'; \
         s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()",
    )
    .await;
    assert_eq!(picked, "order_approval", "order_approval is offered");
    type_into(&page, "#inputs", r#"{"order": "ACME Corp orders 1000 widgets"}"#).await;
    type_into(&page, "#run_id", "order-1").await;
    click(&page, "#new-run button[type=submit]").await;
    wait_page(&page, "/runs/order-1").await;

    // The inbox shows the order's approval (and the probe, as text).
    click(&page, r#"header nav a[href="/inbox"]"#).await;
    wait_page(&page, "/inbox").await;
    let order_item = r#"li.inbox-item[data-run-id="order-1"]"#;
    let prompt = wait_for(
        &page,
        "the order's approval in the inbox",
        &format!("(function () {{ const li = document.querySelector('{order_item}'); return li ? li.querySelector('.prompt').textContent : null; }})()"),
    )
    .await;
    assert_eq!(prompt, "Ship 1000 widgets to ACME Corp? Answer approved or rejected.");
    wait_for(
        &page,
        "the probe in the inbox",
        "document.querySelector('li.inbox-item[data-run-id=\"xss-probe\"]') !== null",
    )
    .await;
    assert_probe_is_text(&page, &watch, "the inbox").await;
    // The step with a deadline: its time left, counted down by the page, and what happens then.
    let left = r#"li.inbox-item[data-run-id="timed-1"] .time-left"#;
    let first =
        wait_for(&page, "the deadline's time left", &format!("document.querySelector('{left}')?.textContent ?? null"))
            .await;
    let first = first.as_str().unwrap().to_string();
    assert!(first.starts_with("29m ") && first.ends_with('s'), "time left: {first}");
    let deadline_line =
        eval(&page, r#"document.querySelector('li.inbox-item[data-run-id="timed-1"] .deadline').textContent"#).await;
    assert!(deadline_line.as_str().unwrap().ends_with(" left (the step fails then)"), "{deadline_line}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = eval(&page, &format!("document.querySelector('{left}').textContent")).await;
    assert_ne!(later.as_str().unwrap(), first, "the time left counts down");
    screenshot(&page, "server-inbox.png").await;

    type_into(&page, &format!("{order_item} textarea"), "approved").await;
    click(&page, &format!("{order_item} button")).await;
    let answered = r#"li.answered-note a[href="/runs/order-1"]"#;
    wait_for(&page, "the answered note", &format!("document.querySelector('{answered}') !== null")).await;
    assert_eq!(
        eval(&page, &format!("document.querySelector('{order_item}') === null")).await,
        true,
        "the answered item left the inbox"
    );

    // The run page, reached from the note, fills in and completes.
    click(&page, answered).await;
    wait_page(&page, "/runs/order-1").await;
    wait_for(
        &page,
        "the run completed with its output",
        "document.querySelector('#run-status .badge').textContent === 'completed' && \
         document.getElementById('run-output').textContent === 'SHIPPED 1000 widgets to ACME Corp'",
    )
    .await;
    let timeline = wait_for(
        &page,
        "the timeline's final event",
        "(function () { const rows = Array.from(document.querySelectorAll('#timeline tbody tr')); \
           if (!rows.some(r => r.dataset.event === 'completed')) return null; \
           return rows.filter(r => r.dataset.event === 'agent_completed').map(r => \
             [r.cells[0].textContent, r.cells[2].textContent, r.cells[3].textContent]); })()",
    )
    .await;
    assert_eq!(
        timeline,
        json!([
            ["2", "extract", "root/0"],
            ["3", "approval", "root/1"],
            ["4", "ship", "root/2"],
            ["5", "order_workflow", "root"]
        ]),
        "one row per journaled step, with its seq, agent and path"
    );
    let state = eval(&page, "document.getElementById('state').innerText").await;
    assert!(state.as_str().unwrap().contains("SHIPPED 1000 widgets to ACME Corp"), "{state}");
    assert_eq!(eval(&page, "document.getElementById('cancel').hidden").await, true, "no cancel once ended");
    let report = eval(&page, "document.querySelector('a[href=\"/api/v1/runs/order-1/report\"]') !== null").await;
    assert_eq!(report, true, "the report is linked");
    watch.assert_clean("the order's run page");
    screenshot(&page, "server-run.png").await;

    // The probe's run page: the state and prompt as text; answered with the probe, its output as text too.
    page.goto(format!("{base}/runs/xss-probe")).await.unwrap();
    wait_page(&page, "/runs/xss-probe").await;
    wait_for(
        &page,
        "the probe's timeline",
        "document.querySelector('#timeline tr[data-event=\"suspended\"]') !== null",
    )
    .await;
    assert_probe_is_text(&page, &watch, "the probe's run page").await;
    let shown = eval(&page, "document.querySelector('#pending .prompt').textContent").await;
    assert_eq!(shown, json!(format!("Approve {PROBE} {PROBE}?")));
    type_into(&page, "#pending textarea", PROBE).await;
    click(&page, "#pending button").await;
    let output = wait_for(
        &page,
        "the probe's output",
        "document.querySelector('#run-status .badge').textContent === 'completed' && \
         document.getElementById('run-output').textContent",
    )
    .await;
    assert_eq!(output, json!(format!("answered {PROBE}")));
    assert_probe_is_text(&page, &watch, "the probe's completed run page").await;

    // A state value of 50 000 characters: cut after 2000 on the page, also once the script has redrawn it.
    let created = http
        .post(format!("{base}/api/v1/runs"))
        .json(&json!({"spec": PROBE_SPEC, "inputs": {"text": "x".repeat(50_000)}, "run_id": "big-value"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    page.goto(format!("{base}/runs/big-value")).await.unwrap();
    wait_page(&page, "/runs/big-value").await;
    wait_for(&page, "the run's timeline", "document.querySelector('#timeline tr[data-event=\"suspended\"]') !== null")
        .await;
    // The state table is redrawn from the run fetched after the event: the input and the note once it is there.
    wait_for(&page, "the state's two values", "document.querySelectorAll('#state pre.value').length === 2").await;
    let cells = eval(
        &page,
        "Array.from(document.querySelectorAll('#state pre.value')).map(function (p) { \
         return p.textContent.length + ' ' + p.textContent.slice(2000); })",
    )
    .await;
    let tail = "… (48000 more characters; the whole value is in GET /api/v1/runs/big-value and the report)";
    let cut = format!("{} {tail}", 2000 + tail.chars().count());
    assert_eq!(cells, json!([cut, cut]), "the input and the note, cut");

    // The schedules page, through the nav: a nightly schedule whose inputs hold the probe, as text.
    let created = http
        .post(format!("{base}/api/v1/schedules"))
        .json(&json!({"id": "nightly", "spec_name": "hello", "cron": "0 2 * * *", "timezone": "Europe/Paris",
                      "inputs": {"name": PROBE}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    click(&page, r#"header nav a[href="/schedules"]"#).await;
    wait_page(&page, "/schedules").await;
    let row = wait_for(
        &page,
        "the schedule's row",
        "(document.querySelector('tr[data-schedule-id=\"nightly\"]') || {}).innerText",
    )
    .await;
    let row = row.as_str().unwrap();
    assert!(row.contains("hello") && row.contains("0 2 * * * Europe/Paris") && row.contains("skip"), "{row}");
    assert!(row.contains("<img src=x onerror="), "the probe in the inputs is shown as text: {row}");
    let state =
        eval(&page, "({xss: document.body.dataset.xss || null, images: document.querySelectorAll('img').length})")
            .await;
    assert_eq!(state, json!({"xss": null, "images": 0}), "the probe on the schedules page");
    watch.assert_clean("the schedules page");
    screenshot(&page, "server-schedules.png").await;

    browser.close().await.unwrap();
    let _ = browser.wait().await;
    events.await.unwrap();
    drop(serve);
    let took = started.elapsed();
    eprintln!("the browser test took {took:?}");
    assert!(took < Duration::from_secs(60), "the browser test took {took:?}");
}

/// A refund desk whose scripted model asks to refund `AMOUNT` on order A-7, then answers `Refunded.`; a
/// refund over 100 waits for a person's approval, and the refund is a side effect that happens at most once.
const REFUND_SPEC: &str = r#"
version: 1
name: refund_desk
root: desk
params: { request: string }
models:
  default:
    provider: scripted
    replies:
      - '{"tool_calls": [{"name": "refund", "arguments": {"order": "A-7", "amount": AMOUNT}}]}'
      - "Refunded."
agents:
  desk:
    kind: llm
    user: "{{ request }}"
    tools:
      - name: refund
        description: Refunds an amount on an order
        parameters: { order: string, amount: integer }
        value: '{"refunded": amount}'
        effect: once
        approve: "args.amount > 100"
    output_key: reply
"#;

/// The token of the server of the tool call test: the answers are recorded as given by `token`.
const TOKEN: &str = "tool-desk-token";

/// A run's tool call entries of `GET /api/v1/runs/{id}/calls` as `{seq, status, args, result, by}` (`null`
/// where an entry has none).
async fn tool_calls(http: &reqwest::Client, base: &str, run_id: &str) -> Value {
    let calls: Value = http
        .get(format!("{base}/api/v1/runs/{run_id}/calls"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tools = calls.as_array().unwrap().iter().filter(|c| c["type"] == "tool");
    Value::Array(
        tools
            .map(|c| json!({"seq": c["seq"], "status": c["status"], "args": c["args"], "result": c["result"], "by": c["by"]}))
            .collect(),
    )
}

/// The rows of the run page's tool calls table: `[seq, agent, call, status, detail]` each.
const CALL_ROWS: &str = "Array.from(document.querySelectorAll('#calls tbody tr')).map(r => \
                         Array.from(r.cells).map(c => c.textContent))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_is_approved_with_edits_on_its_inbox_card_in_chromium_and_its_statuses_fill_the_run_page() {
    let Some(chromium) = chromium_or_skip() else { return };
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");

    // A call in doubt: a small refund (no approval) whose process dies after the call was sent (step 2 holds
    // its start) and before its result was journaled; the server resumes the run, which asks what happened.
    let small = tmp.path().join("refund_small.yaml");
    std::fs::write(&small, REFUND_SPEC.replace("AMOUNT", "50")).unwrap();
    let args = ["run", small.to_str().unwrap(), "--input", "request=Refund A-7", "--memory-id", "doubt-1"];
    let crashed = crate::binary::Cli::new(args).store(&store).kill_after(Some(2)).output();
    assert_eq!(crashed.status.code(), None, "killed after step 2: {crashed:?}");

    let serve = Serve::on(&store)
        .specs(&[("refund_desk.yaml", &REFUND_SPEC.replace("AMOUNT", "150"))])
        .token(Some(TOKEN))
        .start();
    let base = serve.url.clone();
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{base}/api/v1/runs"))
        .bearer_auth(TOKEN)
        .json(&json!({"spec_name": "refund_desk", "inputs": {"request": "Refund order A-7"}, "run_id": "refund-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    // Both runs wait: the refund for its approval, the small one for what happened to its call.
    let deadline = Instant::now() + WAIT;
    let (refund, doubt) = loop {
        let get = |id: &'static str| {
            let request = http.get(format!("{base}/api/v1/runs/{id}")).bearer_auth(TOKEN);
            async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
        };
        let (refund, doubt) = (get("refund-1").await, get("doubt-1").await);
        if refund["status"] == "suspended" && doubt["status"] == "suspended" {
            break (refund, doubt);
        }
        assert!(Instant::now() < deadline, "the runs did not suspend: {refund} {doubt}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let pending = &refund["pending"][0];
    assert_eq!((&pending["id"], &pending["kind"]), (&json!("tool:root:0"), &json!("tool_call")));
    let hash = pending["data"]["args_hash"].as_str().unwrap().to_string();
    assert_eq!(
        (&doubt["pending"][0]["id"], &doubt["pending"][0]["kind"]),
        (&json!("doubt:root:0"), &json!("in_doubt"))
    );
    let started_at = doubt["pending"][0]["data"]["started_at"].as_str().unwrap().to_string();

    // An answer for another version of the call is refused over HTTP.
    let stale = "0".repeat(64);
    let refused = http
        .post(format!("{base}/api/v1/runs/refund-1/responses/tool%3Aroot%3A0"))
        .bearer_auth(TOKEN)
        .json(&json!({"value": {"decision": "approve", "args_hash": stale}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
    let stale_message = format!(
        "run `refund-1`: the answer to `tool:root:0` was given for another call (args_hash {stale}); the pending \
         call's args_hash is {hash}: look at the call again and answer it"
    );
    assert_eq!(refused.json::<Value>().await.unwrap(), json!({"error": stale_message}));

    let profile = tempfile::tempdir().unwrap();
    let (mut browser, events) = launch(&chromium, profile.path()).await;
    let page = browser.new_page("about:blank").await.unwrap();
    let watch = Watch::attach(&page).await;
    sign_in(&page, &base, TOKEN).await;

    // The run page, open before the answer: its card, and the call's first status.
    let run_tab = browser.new_page(format!("{base}/runs/refund-1")).await.unwrap();
    let run_watch = Watch::attach(&run_tab).await;
    wait_page(&run_tab, "/runs/refund-1").await;
    let rows = wait_for(
        &run_tab,
        "the call's first row",
        &format!("(function () {{ const r = {CALL_ROWS}; return r.length ? r : null; }})()"),
    )
    .await;
    assert_eq!(rows, json!([["2", "desk", "refund #0", "awaiting_approval", r#"{"order":"A-7","amount":150}"#]]));
    assert_eq!(
        eval(&run_tab, "document.querySelector('#pending form.tool-form .tool-name').textContent").await,
        "refund",
        "the run page's card"
    );

    // The inbox (in the first tab, brought to the front): the refund's card and the call in doubt's card.
    page.bring_to_front().await.unwrap();
    click(&page, r#"header nav a[href="/inbox"]"#).await;
    wait_page(&page, "/inbox").await;
    let card = r#"li.inbox-item[data-run-id="refund-1"] form.tool-form"#;
    wait_for(&page, "the refund's card", &format!("document.querySelector('{card}') !== null")).await;
    let shown = eval(
        &page,
        &format!(
            "(function () {{ const f = document.querySelector('{card}'); return {{ \
               label: f.getAttribute('aria-label'), tool: f.querySelector('.tool-name').textContent, \
               line: f.querySelector('.tool-line').textContent, hash: f.dataset.argsHash, \
               fields: Array.from(f.querySelectorAll('[data-arg]')).map(i => [i.dataset.arg, i.type, i.value, \
                 i.closest('label').textContent.trim()]), \
               buttons: Array.from(f.querySelectorAll('button')).map(b => b.textContent), \
               labels: Array.from(f.querySelectorAll('.decision-row label')).map(l => l.firstChild.textContent) }}; }})()"
        ),
    )
    .await;
    assert_eq!(
        shown,
        json!({
            "label": "Tool call: refund", "tool": "refund", "line": "Tool refund · call #0", "hash": hash,
            "fields": [["order", "text", "A-7", "order (string)"], ["amount", "number", "150", "amount (integer)"]],
            "buttons": ["Approve", "Approve with edits", "Reject", "Respond"],
            "labels": ["Message ", "Result "]
        })
    );
    let doubt_card = r#"li.inbox-item[data-run-id="doubt-1"] form.tool-form"#;
    let shown = eval(
        &page,
        &format!(
            "(function () {{ const f = document.querySelector('{doubt_card}'); return {{ \
               kind: f.dataset.kind, tool: f.querySelector('.tool-name').textContent, \
               started: f.querySelector('.tool-line time').dateTime, args: f.querySelector('pre[data-args]').textContent, \
               buttons: Array.from(f.querySelectorAll('button')).map(b => b.textContent) }}; }})()"
        ),
    )
    .await;
    assert_eq!(
        shown,
        json!({"kind": "in_doubt", "tool": "refund", "started": started_at,
               "args": "{\n  \"order\": \"A-7\",\n  \"amount\": 50\n}",
               "buttons": ["It happened (result)", "Retry", "Fail"]})
    );
    eval(&page, &format!("document.querySelector('{card}').closest('li').scrollIntoView()")).await;
    screenshot(&page, "server-tool-approval.png").await;

    // A card drawn for another version of the call (its args_hash differs) is refused, with the server's
    // message on the card; so is an edit that leaves out a required argument.
    let error = format!("document.querySelector('{card} .form-error')");
    eval(&page, &format!("document.querySelector('{card}').dataset.argsHash = '{stale}'")).await;
    click(&page, &format!("{card} button[data-decision=approve]")).await;
    let message =
        wait_for(&page, "the stale answer's message", &format!("{error}.hidden ? null : {error}.textContent")).await;
    assert_eq!(message, json!(stale_message));
    eval(&page, &format!("document.querySelector('{card}').dataset.argsHash = '{hash}'")).await;
    let amount = format!("{card} input[data-arg=amount]");
    eval(&page, &format!("document.querySelector('{amount}').value = ''")).await;
    click(&page, &format!("{card} button[data-decision=edit]")).await;
    let message = wait_for(
        &page,
        "the bad edit's message",
        &format!("{error}.hidden || {error}.textContent.includes('args_hash') ? null : {error}.textContent"),
    )
    .await;
    assert_eq!(message, "run `refund-1`: response `tool:root:0`: the edit lacks the required field `amount`");

    // 120 instead of 150, approved with the edit.
    type_into(&page, &amount, "120").await;
    click(&page, &format!("{card} button[data-decision=edit]")).await;
    let answered = r#"li.answered-note a[href="/runs/refund-1"]"#;
    wait_for(&page, "the answered note", &format!("document.querySelector('{answered}') !== null")).await;

    // The run page open since before the answer fills in by itself.
    wait_for(
        &run_tab,
        "the refund run completed",
        "document.querySelector('#run-status .badge').textContent === 'completed' && \
         document.getElementById('run-output').textContent === 'Refunded.' && \
         document.querySelectorAll('#calls tbody tr').length === 4",
    )
    .await;
    let expected_rows = json!([
        ["2", "desk", "refund #0", "awaiting_approval", r#"{"order":"A-7","amount":150}"#],
        ["3", "desk", "refund #0", "edited", r#"{"order":"A-7","amount":120} by token"#],
        ["3", "desk", "refund #0", "started", ""],
        ["4", "desk", "refund #0", "finished", r#"{"refunded":120}"#]
    ]);
    assert_eq!(eval(&run_tab, CALL_ROWS).await, expected_rows, "the statuses, live");
    assert_eq!(eval(&run_tab, "document.getElementById('pending-box').hidden").await, true, "nothing waits");
    run_watch.assert_clean("the refund's run page, open during the answer");

    // The calls as the API lists them.
    let args = json!({"order": "A-7", "amount": 120});
    assert_eq!(
        tool_calls(&http, &base, "refund-1").await,
        json!([
            {"seq": 2, "status": "awaiting_approval", "args": {"order": "A-7", "amount": 150}, "result": null, "by": null},
            {"seq": 3, "status": "edited", "args": args, "result": null, "by": "token"},
            {"seq": 3, "status": "started", "args": args, "result": null, "by": null},
            {"seq": 4, "status": "finished", "args": args, "result": {"refunded": 120}, "by": null}
        ])
    );

    // The run page opened after the end shows the same rows, replayed from the journal.
    click(&page, answered).await;
    wait_page(&page, "/runs/refund-1").await;
    wait_for(&page, "the replayed rows", "document.querySelectorAll('#calls tbody tr').length === 4").await;
    assert_eq!(eval(&page, CALL_ROWS).await, expected_rows, "the statuses, replayed");
    screenshot(&page, "server-tool-calls.png").await;

    // The call in doubt: it happened, with its result.
    click(&page, r#"header nav a[href="/inbox"]"#).await;
    wait_page(&page, "/inbox").await;
    wait_for(&page, "the call in doubt's card", &format!("document.querySelector('{doubt_card}') !== null")).await;
    type_into(&page, &format!("{doubt_card} textarea[name=result]"), r#"{"refunded": 50}"#).await;
    click(&page, &format!("{doubt_card} button[data-decision=result]")).await;
    let answered = r#"li.answered-note a[href="/runs/doubt-1"]"#;
    wait_for(&page, "the call in doubt answered", &format!("document.querySelector('{answered}') !== null")).await;
    click(&page, answered).await;
    wait_page(&page, "/runs/doubt-1").await;
    wait_for(
        &page,
        "the run in doubt completed",
        "document.querySelector('#run-status .badge').textContent === 'completed' && \
         document.getElementById('run-output').textContent === 'Refunded.'",
    )
    .await;
    let small = json!({"order": "A-7", "amount": 50});
    assert_eq!(
        tool_calls(&http, &base, "doubt-1").await,
        json!([
            {"seq": 2, "status": "started", "args": small, "result": null, "by": null},
            {"seq": 3, "status": "in_doubt", "args": small, "result": null, "by": null},
            {"seq": 4, "status": "finished", "args": small, "result": {"refunded": 50}, "by": "token"}
        ])
    );
    watch.assert_clean("the inbox and the run pages");

    browser.close().await.unwrap();
    let _ = browser.wait().await;
    events.await.unwrap();
    drop(serve);
    let took = started.elapsed();
    eprintln!("the tool call browser test took {took:?}");
    assert!(took < Duration::from_secs(60), "the tool call browser test took {took:?}");
}

/// A two-step approval (SERVER.md §8's browser checks): a human step between two computes.
const KEYED_SPEC: &str = include_str!("../fixtures/approval.yaml");

/// Signs the browser in at `/login` with `credential` and waits for the runs page.
async fn sign_in(page: &Page, base: &str, credential: &str) {
    page.goto(format!("{base}/login")).await.unwrap();
    wait_page(page, "/login").await;
    type_into(page, "input[name=token]", credential).await;
    click(page, "form button[type=submit]").await;
    wait_page(page, "/").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approvers_key_signs_in_answers_in_the_inbox_sees_no_cancel_button_and_a_forged_form_is_refused() {
    let Some(chromium) = chromium_or_skip() else { return };
    const ROOT: &str = "keyed-root-token";
    let serve = Serve::fresh().specs(&[("approval.yaml", KEYED_SPEC)]).token(Some(ROOT)).start();
    let base = serve.url.clone();
    let http = reqwest::Client::new();
    let key = |name: &'static str, tenant: &'static str, role: &'static str| {
        let request = http
            .post(format!("{base}/api/v1/keys"))
            .bearer_auth(ROOT)
            .json(&json!({"name": name, "tenant": tenant, "roles": [role]}));
        async move {
            let created = request.send().await.unwrap();
            assert_eq!(created.status(), reqwest::StatusCode::CREATED);
            created.json::<Value>().await.unwrap()["key"].as_str().unwrap().to_string()
        }
    };
    let (ann, olga, gus) = (
        key("ann", "acme", "approver").await,
        key("olga", "acme", "operator").await,
        key("gus", "globex", "viewer").await,
    );
    let created = http
        .post(format!("{base}/api/v1/runs"))
        .bearer_auth(&olga)
        .json(&json!({"spec_name": "approval", "run_id": "order-1", "inputs": {"input": "data"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), reqwest::StatusCode::CREATED);
    let deadline = Instant::now() + WAIT;
    while http
        .get(format!("{base}/api/v1/runs/order-1"))
        .bearer_auth(&olga)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["status"]
        != "suspended"
    {
        assert!(Instant::now() < deadline, "order-1 did not suspend");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let profile = tempfile::tempdir().unwrap();
    let (mut browser, events) = launch(&chromium, profile.path()).await;
    let page = browser.new_page("about:blank").await.unwrap();
    let watch = Watch::attach(&page).await;
    // A wrong key is refused by the form.
    page.goto(format!("{base}/login")).await.unwrap();
    wait_page(&page, "/login").await;
    let last = if ann.ends_with('0') { '1' } else { '0' };
    type_into(&page, "input[name=token]", &format!("{}{last}", &ann[..ann.len() - 1])).await;
    click(&page, "form button[type=submit]").await;
    wait_for(&page, "the refusal", "document.body.innerText.includes('That key or token is wrong.')").await;

    sign_in(&page, &base, &ann).await;
    assert_eq!(eval(&page, "document.querySelector('header .who').textContent").await, "key:ann · acme");
    // An approver's navigation has no new-run link; its inbox offers the step.
    assert_eq!(eval(&page, r#"document.querySelector('header nav a[href="/new"]') === null"#).await, true);
    click(&page, r#"header nav a[href="/inbox"]"#).await;
    wait_page(&page, "/inbox").await;
    wait_for(&page, "the inbox item", "document.querySelector('li.inbox-item form.answer-form') !== null").await;

    // The run page: the answer form, no cancel button.
    page.goto(format!("{base}/runs/order-1")).await.unwrap();
    wait_page(&page, "/runs/order-1").await;
    assert_eq!(
        eval(&page, "document.getElementById('cancel') === null").await,
        true,
        "a cancel button for an approver"
    );
    assert_eq!(eval(&page, "document.querySelector('#pending form.answer-form') !== null").await, true);

    // A form of another page's making (no CSRF token), posted with the sign-in cookie: refused, nothing done.
    let forged = eval(
        &page,
        "fetch('/api/v1/runs/order-1/responses/human-review', {method: 'POST', credentials: 'same-origin', \
           headers: {'Content-Type': 'application/json'}, body: JSON.stringify({value: 'FORGED'})}) \
           .then(r => r.json().then(b => [r.status, b.error]))",
    )
    .await;
    assert_eq!(
        forged,
        json!([403, "missing or wrong CSRF token (header `x-csrf-token`): send the request from this server's pages"])
    );
    let html_form = eval(
        &page,
        "(function () { const f = document.createElement('form'); f.method = 'post'; \
           f.action = '/api/v1/runs/order-1/cancel'; document.body.appendChild(f); f.submit(); return true; })()",
    )
    .await;
    assert_eq!(html_form, true);
    wait_for(
        &page,
        "the forged form's refusal",
        "document.body && document.body.innerText.includes('missing or wrong CSRF token')",
    )
    .await;
    let run: Value =
        http.get(format!("{base}/api/v1/runs/order-1")).bearer_auth(&olga).send().await.unwrap().json().await.unwrap();
    assert_eq!(run["status"], "suspended", "the forged requests changed the run");

    // The page's own form carries the token: the answer goes through and the run completes.
    page.goto(format!("{base}/runs/order-1")).await.unwrap();
    wait_page(&page, "/runs/order-1").await;
    type_into(&page, "#pending form.answer-form textarea", "APPROVED").await;
    click(&page, "#pending form.answer-form button[type=submit]").await;
    wait_for(&page, "the run to complete", "document.querySelector('#run-status').textContent.includes('completed')")
        .await;
    watch.assert_clean("the approver's pages");

    // Another tenant's viewer: the run page is 404 and the run is not listed.
    sign_in(&page, &base, &gus).await;
    assert_eq!(eval(&page, "document.querySelectorAll('a[href=\"/runs/order-1\"]').length").await, 0);
    page.goto(format!("{base}/runs/order-1")).await.unwrap();
    let status = wait_for(&page, "the run page's status", "fetch(location.href).then(r => r.status)").await;
    assert_eq!(status, 404);
    wait_for(&page, "the not-found page", "document.body && document.body.innerText.includes('Not found')").await;

    browser.close().await.unwrap();
    let _ = browser.wait().await;
    events.await.unwrap();
}
