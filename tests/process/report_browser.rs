//! The HTML report in a real browser (headless Chromium): the page's script runs without console errors,
//! draws the topology and the timeline, renders the step list, and no string from a model, a human or the
//! state runs as markup (an XSS probe stays text); the report of the same run straight from the in-process
//! `AgentMonitor` (no store) renders too, with its failed and retried step visible. Screenshots are kept in
//! `target/tmp/report/` for review.
//!
//! Skipped with a message when Chromium is not installed, unless `AGENTIC_REQUIRE_BROWSER` is set (CI sets it).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentic::agents::model::ScriptedModel;
use agentic::agents::{Human, LlmAgent};
use agentic::engine::AgentMonitor;
use agentic::prelude::*;
use serde_json::json;

const PROBE: &str = r#"<img src=x onerror="document.body.dataset.xss=1">"#;

pub(crate) fn chromium() -> Option<PathBuf> {
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

/// Runs headless Chromium on `page` with `extra` arguments; returns (stdout, stderr).
pub(crate) fn run_chromium(browser: &Path, page: &Path, extra: &[&str]) -> (String, String) {
    run_chromium_url(browser, &format!("file://{}", page.display()), extra)
}

/// Runs headless Chromium on the address `url` (e.g. a page's `file://` address with a `#fragment`) with
/// `extra` arguments; returns (stdout, stderr).
pub(crate) fn run_chromium_url(browser: &Path, url: &str, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (out.join().unwrap(), err.join().unwrap())
}

/// Console errors Chromium logged (uncaught exceptions and `console.error`).
pub(crate) fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("Uncaught") || (l.contains("CONSOLE") && (l.contains("Error") || l.contains("error"))))
        .collect()
}

pub(crate) fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn worker(name: &str, sleep_ms: u64, input: &str, out: &str) -> AgentRef {
    let input_key = input.to_string();
    FnAgent::from_async(name, move |inputs| {
        let key = input_key.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
            Ok(json!(format!("checked {} chars", inputs.get(&key).map(|v| v.to_string().len()).unwrap_or(0))))
        }
    })
    .inputs([input])
    .output_key(out)
    .build()
}

/// A review workflow: a model drafts (its reply is an XSS probe), a loop revises, three checks run in
/// parallel (one fails once and is retried), an editor answers, a compute step publishes.
fn review_system() -> AgentRef {
    let model = ScriptedModel::new([format!("{PROBE} Dragons are misunderstood.")]);
    // Known by a hostile name: the agents table's models column and the models table show it as text.
    let model = agentic::agents::model::ChatModelRef::new(model).named(format!("writer{PROBE}"));
    let draft = LlmAgent::builder(model)
        .name("draft")
        .description("Drafts the article")
        .system("You write short articles.")
        .user("Write about {{ topic }}")
        .output_key("draft")
        .build()
        .unwrap();
    let revise = FnAgent::builder("revise", |ctx| {
        let n = ctx.view().get("revisions").and_then(|v| v.as_u64()).unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(12)).await;
            Ok(json!(n + 1))
        })
    })
    .inputs(["draft"])
    .output_key("revisions")
    .build();
    let polish = Loop::builder()
        .name("polish")
        .sub_agents([revise])
        .max_iterations(3)
        .exit_condition(|view, _| Ok(view.get("revisions").and_then(|v| v.as_u64()).unwrap_or(0) >= 3))
        .build()
        .unwrap();
    let attempts = Arc::new(AtomicUsize::new(0));
    let flaky = FnAgent::from_async("link_check", move |_| {
        let n = attempts.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if n == 0 { Err("HTTP 503 from <link checker>".to_string()) } else { Ok(json!("links ok")) }
        }
    })
    .inputs(["draft"])
    .output_key("links")
    .build();
    let checks = Parallel::builder()
        .name("checks")
        .sub_agents([worker("fact_check", 60, "draft", "facts"), worker("style_check", 45, "draft", "style"), flaky])
        .error_handler(RetryPolicy::new(2, Duration::from_millis(5)))
        .build()
        .unwrap();
    let review = Human::builder("editor", "Publish this? {{ draft }}")
        .unwrap()
        .response_id("editor-approval")
        .inputs(["draft"])
        .output_key("approval")
        .build();
    let publish = Compute::template("publish", "{{ approval }} ({{ revisions }} revisions; {{ facts }})")
        .unwrap()
        .output_key("article")
        .build();
    Sequence::builder()
        .name("article-review")
        .description("Drafts, revises, checks and publishes an article")
        .sub_agents([draft, polish, checks, review, publish])
        .output_key("article")
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_report_renders_in_chromium_without_errors_and_escapes_everything() {
    // A suspended-then-resumed run with a retry, a loop, parallel branches and hostile strings.
    // The in-process monitor watches the same run: its report (no store) goes to the browser too.
    let system = review_system();
    let store = MemoryStore::new();
    let monitor = AgentMonitor::new();
    let outcome = system
        .invoke()
        .input("topic", "dragons")
        .memory_id("article-1")
        .store_ref(store.store_ref())
        .listener(monitor.clone())
        .await
        .unwrap();
    assert!(outcome.is_suspended());
    tokio::time::sleep(Duration::from_millis(150)).await;
    let done = system
        .resume("article-1")
        .store_ref(store.store_ref())
        .answer("editor-approval", format!("Approved {PROBE}"))
        .listener(monitor.clone())
        .await
        .unwrap();
    assert!(!done.is_suspended());
    let html =
        agentic_report::report_from_store(&store.store_ref(), "article-1", Some(&system.topology())).await.unwrap();
    assert!(!html.contains(PROBE), "no probe survives unescaped in the page source");
    let monitored = agentic::report::report_from_monitor(&monitor, "article-1", Some(&system.topology())).unwrap();
    assert!(!monitored.contains(PROBE), "no probe survives unescaped in the monitor's page source");
    let session = monitor.session("article-1").unwrap();
    let failures: Vec<(&str, u32, Option<&str>)> =
        session.failures().iter().map(|i| (i.path.as_str(), i.attempt, i.error.as_deref())).collect();
    assert_eq!(
        failures,
        [("root/2/2", 1, Some("agent `link_check` (root/2/2) failed: HTTP 503 from <link checker>"))],
        "the monitor keeps the failed attempt apart"
    );
    assert_eq!(monitor.successful_executions().len(), 1);
    assert!(monitor.failed_executions().is_empty(), "the run succeeded: its failed attempt was retried");

    // The topology of the same system, and a large run, for the browser too.
    let topology_html = agentic_report::render_topology(&system.topology(), "article-review");

    let dir = out_dir();
    let pages = [("run", html), ("topology", topology_html), ("monitor", monitored)];
    for (name, page) in &pages {
        agentic_report::write_report(dir.join(format!("{name}.html")), page).unwrap();
    }

    let Some(browser) = chromium() else {
        if std::env::var_os("AGENTIC_REQUIRE_BROWSER").is_some() {
            panic!("AGENTIC_REQUIRE_BROWSER is set but Chromium was not found (install Debian's `chromium`)");
        }
        eprintln!("SKIPPED: Chromium not found (apt-get install -y chromium); the browser checks did not run");
        return;
    };

    for (name, _) in &pages {
        let page = dir.join(format!("{name}.html"));
        let shot = dir.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&shot);
        let (_, log) = run_chromium(&browser, &page, &[&format!("--screenshot={}", shot.display())]);
        assert!(shot.is_file(), "no screenshot of {name}: {log}");
        assert!(console_errors(&log).is_empty(), "console errors in {name}: {:?}", console_errors(&log));
        let (dom, log) = run_chromium(&browser, &page, &["--dump-dom"]);
        assert!(console_errors(&log).is_empty(), "console errors in {name}: {:?}", console_errors(&log));
        std::fs::write(dir.join(format!("{name}.dom.html")), &dom).unwrap();
        assert!(dom.contains(r#"data-ready="1""#), "the page's script finished on {name}");
        assert!(!dom.contains(r#"data-js-error=""#), "the page's script failed on {name}");
        assert!(!dom.contains("data-xss"), "the XSS probe ran on {name}");
        assert!(dom.contains(r#"id="topology-svg""#), "topology drawn on {name}");
        if *name == "run" {
            assert!(dom.contains(r#"id="timeline-svg""#), "timeline drawn");
            assert_eq!(
                dom.matches(r#"<rect class="bar "#).count(),
                13,
                "one bar per invocation, and one for the failed attempt that was retried"
            );
            assert!(dom.contains("failed attempt"), "the failed attempt is labelled");
            assert!(dom.contains(r#"<rect class="bar k-code retry""#), "the retried check is marked");
            assert!(dom.contains(r#"<rect class="brk""#), "the suspension is a collapsed break");
            assert_eq!(
                dom.matches(r#"<details class="step""#).count(),
                14,
                "every step listed: the inputs, 12 invocations and the failed attempt"
            );
            assert!(
                dom.contains(r#"<span class="preview">&lt;img src=x onerror="document.body.dataset.xss=1"&gt; Dragons are misunderstood.</span>"#),
                "the model's reply is text"
            );
            assert!(dom.contains(r#"<span class="chip retry">attempt 2</span>"#));
            assert!(dom.contains(r#"<span class="chip iter">iteration 3</span>"#));
            assert!(dom.contains("waiting for <code>editor-approval</code>"));
            let named = r#"writer&lt;img src=x onerror="document.body.dataset.xss=1"&gt;"#;
            assert!(dom.contains(&format!(r#"<td class="models">{named}</td>"#)), "the model used, as text");
            assert!(
                dom.contains(&format!(r#"<tr><td>{named}</td><td class="num">"#)),
                "the models table has the model's row"
            );
            assert!(!dom.contains("<img"), "no image element was created from data");
        }
        if *name == "monitor" {
            // The same renderer on the monitor's record: the run's invocations (not its inputs step: the
            // monitor sees invocations only), the failed attempt and its retry, the suspension.
            assert!(dom.contains(r#"id="timeline-svg""#), "timeline drawn");
            assert!(
                dom.contains(
                    r#"<span id="run-origin">from the in-process monitor: invocations, no state diffs</span>"#
                )
            );
            assert!(dom.contains(r#"<span class="status st-completed" id="run-status">completed</span>"#));
            assert_eq!(
                dom.matches(r#"<rect class="bar "#).count(),
                13,
                "one bar per invocation, and one for the failed attempt that was retried"
            );
            assert_eq!(dom.matches(r#"<details class="step""#).count(), 13, "12 invocations and the failed attempt");
            assert!(dom.contains("failed attempt"), "the failed attempt is labelled");
            assert!(dom.contains(r#"<rect class="bar k-code retry""#), "the retried check is marked");
            assert!(dom.contains(r#"<span class="chip retry">attempt 2</span>"#));
            assert!(dom.contains(r#"<span class="chip iter">iteration 3</span>"#));
            assert!(
                dom.contains("<pre>agent `link_check` (root/2/2) failed: HTTP 503 from &lt;link checker&gt;</pre>"),
                "the failure is listed with its message"
            );
            assert!(dom.contains(r#"<rect class="brk""#), "the suspension is a collapsed break");
            assert!(
                dom.contains(r#"<span class="preview">&lt;img src=x onerror="document.body.dataset.xss=1"&gt; Dragons are misunderstood.</span>"#),
                "the model's reply is text"
            );
            assert!(!dom.contains("<img"), "no image element was created from data");
        }
    }
}

#[test]
fn a_ten_thousand_step_report_stays_light_in_the_browser() {
    use agentic::engine::{InvocationRecord, Milestone, RunRecord, RunStatus, StepRecord};
    let t0 = 1_700_000_000_000_000u64;
    let mut records = Vec::new();
    for i in 0..10_000u64 {
        let start = t0 + (i / 10) * 1_000 + (i % 10) * 50;
        records.push(StepRecord {
            run_id: "big".into(),
            seq: i + 1,
            agent_path: "root/0".into(),
            delta: vec![(format!("k{}", i % 20), json!(i))],
            planner_states: vec![],
            invocation: Some(InvocationRecord {
                agent: "mapper_item".into(),
                path: "root/0".into(),
                inputs: Default::default(),
                output: json!(format!("item {i} {PROBE}")),
                started_at_us: start,
                ended_at_us: start + 800,
                attempt: 1,
                tokens: None,
                usage: None,
                error: None,
                item: None,
            }),
            async_started: false,
            failed: false,
            item: None,
            item_end: false,
            bindings: None,
            calls: Vec::new(),
        });
    }
    let run = RunRecord {
        run_id: "big".into(),
        name: "big-mapper".into(),
        fingerprint: String::new(),
        status: RunStatus::Completed,
        pending: vec![],
        answers: Default::default(),
        detail: json!(null),
        source: None,
        spec_hash: None,
        cancel_requested: false,
        created_at_ms: t0 / 1_000,
        updated_at_ms: t0 / 1_000 + 1_000,
        milestones: vec![Milestone {
            at_ms: t0 / 1_000,
            kind: agentic::engine::MilestoneKind::Started,
            seq: 0,
            pending: vec![],
            answers: Default::default(),
            error: None,
            path: None,
            forked_from: None,
        }],
        forked_from: None,
        timed_out: Vec::new(),
        tenant: None,
        answered_by: std::collections::BTreeMap::new(),
    };
    let html = agentic_report::render_run_without_topology(&run, &records, "synthetic run");
    let page = out_dir().join("big.html");
    agentic_report::write_report(&page, &html).unwrap();
    let Some(browser) = chromium() else {
        if std::env::var_os("AGENTIC_REQUIRE_BROWSER").is_some() {
            panic!("AGENTIC_REQUIRE_BROWSER is set but Chromium was not found");
        }
        eprintln!("SKIPPED: Chromium not found; the browser checks did not run");
        return;
    };
    let started = Instant::now();
    let (dom, log) = run_chromium(&browser, &page, &["--dump-dom"]);
    let took = started.elapsed();
    assert!(console_errors(&log).is_empty(), "{:?}", console_errors(&log));
    assert!(dom.contains(r#"data-ready="1""#));
    assert_eq!(dom.matches(r#"<details class="step""#).count(), 200, "the first page of steps only");
    assert!(dom.contains("Show 200 more (9800 remaining)"));
    assert!(!dom.contains("data-xss"));
    assert!(took < Duration::from_secs(60), "the browser took {took:?}");
    let shot = out_dir().join("big.png");
    run_chromium(&browser, &page, &[&format!("--screenshot={}", shot.display())]);
    assert!(shot.is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_runs_report_shows_where_it_comes_from() {
    // The original's id is hostile: it is shown in the fork's header, milestone and timeline, as text.
    let original = format!("run-{PROBE}");
    let steps: Vec<AgentRef> = (0..4).map(|i| worker(&format!("w{i}"), 15, "topic", &format!("k{i}"))).collect();
    let system = Sequence::builder().name("four").sub_agents(steps).build().unwrap();
    let store = MemoryStore::new().store_ref();
    system.invoke().input("topic", "forks").memory_id(original.clone()).store_ref(store.clone()).await.unwrap();
    agentic::engine::fork(&store, &original, 3, Some("fork-1".into())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    system.resume("fork-1").store_ref(store.clone()).await.unwrap();
    let html = agentic_report::report_from_store(&store, "fork-1", Some(&system.topology())).await.unwrap();
    assert!(!html.contains(PROBE), "no probe survives unescaped in the page source");
    let escaped = "run-&lt;img src=x onerror=&quot;document.body.dataset.xss=1&quot;&gt;";
    assert!(html.contains(&format!("forked from <code>{escaped}</code> at step 3</span>")), "the header");
    assert!(html.contains(&format!("<div class=\"ms-detail\">from run <code>{escaped}</code></div>")), "the milestone");

    let dir = out_dir();
    let page = dir.join("fork.html");
    agentic_report::write_report(&page, &html).unwrap();
    let Some(browser) = chromium() else {
        if std::env::var_os("AGENTIC_REQUIRE_BROWSER").is_some() {
            panic!("AGENTIC_REQUIRE_BROWSER is set but Chromium was not found (install Debian's `chromium`)");
        }
        eprintln!("SKIPPED: Chromium not found (apt-get install -y chromium); the browser checks did not run");
        return;
    };
    let shot = dir.join("fork.png");
    let _ = std::fs::remove_file(&shot);
    let (_, log) = run_chromium(&browser, &page, &[&format!("--screenshot={}", shot.display())]);
    assert!(shot.is_file(), "no screenshot: {log}");
    let (dom, log) = run_chromium(&browser, &page, &["--dump-dom"]);
    assert!(console_errors(&log).is_empty(), "console errors: {:?}", console_errors(&log));
    std::fs::write(dir.join("fork.dom.html"), &dom).unwrap();
    assert!(dom.contains(r#"data-ready="1""#) && !dom.contains("data-xss") && !dom.contains("<img"));
    // In the step list, between step 3 and step 4; on the timeline, the break between the two runs.
    assert!(dom.contains(r#"<div class="ms-row forked"><strong>forked</strong>"#), "the fork in the step list");
    assert!(
        dom.contains(&format!(" · after step 3 · from run <code>{}</code></div>", escaped.replace("&quot;", "\"")))
    );
    assert!(dom.contains("fork +"), "the break between the original's steps and the fork's is labelled");
}
