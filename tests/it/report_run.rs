//! HTML reports (`agentic-report`): a suspended-then-resumed run through the real binary (`run --report`,
//! `report RUN_ID` in new processes, byte-identical to an in-process render), reports without topology,
//! topology reports, escaping of model/human/state strings, a 10 000-step run, and the report of a failed run
//! straight from the in-process monitor.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use agentic::engine::AgentMonitor;
use agentic::engine::INPUTS_PATH;
use agentic::engine::{InvocationRecord, Milestone, PlannerState, RunRecord, RunStatus, StepRecord, TokenUsage};
use agentic::prelude::*;
use agentic::spec::Spec;
use agentic::store::SledStore;
use serde_json::{Map, Value, json};

use crate::binary::{agentic, stderr};

const PROBE: &str = r#"<img src=x onerror="document.body.dataset.xss=1">"#;

/// The JSON the page's script reads.
fn page_data(html: &str) -> Value {
    let open = r#"<script type="application/json" id="report-data">"#;
    let start = html.find(open).expect("the report embeds its data") + open.len();
    let len = html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..start + len]).expect("the embedded data is JSON")
}

/// A spec with a scripted model whose reply is an XSS probe, a loop, a parallel block and a human review.
fn write_spec(dir: &Path) -> std::path::PathBuf {
    let spec = format!(
        r#"version: 1
name: review-flow
root: flow
models:
  canned: {{ provider: scripted, replies: [{probe}] }}
agents:
  flow:
    kind: sequence
    description: Drafts, polishes in a loop, checks in parallel, asks an editor
    agents: [draft, polish, checks, review, publish]
    output_key: final
  draft: {{ kind: llm, model: canned, user: "Write about {{{{ topic }}}}", output_key: draft }}
  polish:
    kind: loop
    agents: [revise]
    max_iterations: 5
    exit_when: "revisions >= 2"
  revise:
    kind: compute
    inputs: [draft]
    value: "(revisions if revisions is defined else 0) + 1"
    output_key: revisions
  checks: {{ kind: parallel, agents: [length, shout] }}
  length: {{ kind: compute, value: "draft | length", output_key: length }}
  shout: {{ kind: compute, value: "draft | upper", output_key: loud }}
  review:
    kind: human
    prompt: "Publish {{{{ draft }}}}?"
    response_id: editor
    output_key: approval
  publish: {{ kind: compute, template: "{{{{ approval }}}}: {{{{ length }}}} chars", output_key: final }}
"#,
        probe = serde_json::to_string(PROBE).unwrap()
    );
    let path = dir.join("review-flow.yaml");
    std::fs::write(&path, spec).unwrap();
    path
}

#[test]
fn a_suspended_then_resumed_run_is_reported_identically_by_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = write_spec(dir.path());
    let spec_s = spec.to_str().unwrap();
    let suspended_html = dir.path().join("suspended.html");

    // Process 1: run → suspended, with --report.
    let o = agentic(
        &store,
        &[
            "run",
            spec_s,
            "--input",
            "topic=dragons",
            "--memory-id",
            "rep-1",
            "--report",
            suspended_html.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("report: {}", suspended_html.display())), "{}", stderr(&o));
    let html = std::fs::read_to_string(&suspended_html).unwrap();
    assert!(html.contains(r#"<span class="status st-suspended" id="run-status">suspended</span>"#));
    assert!(html.contains(r#"<section class="banner b-suspended" id="run-pending">"#));
    assert!(html.contains("<tr><td><code>editor</code></td><td>review</td><td>Publish &lt;img src=x onerror=&quot;document.body.dataset.xss=1&quot;&gt;?</td></tr>"), "the pending prompt is escaped");
    assert!(!html.contains(PROBE));

    // Processes 2, 3: respond, resume.
    let answer = r#"Ship it <script>alert(1)</script>"#;
    let o = agentic(&store, &["respond", "rep-1", "editor", answer]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = agentic(&store, &["resume", "rep-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // Processes 4, 5: two reports from the store.
    let a = dir.path().join("a.html");
    let b = dir.path().join("b.html");
    for out in [&a, &b] {
        let o = agentic(&store, &["report", "rep-1", "-o", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stderr(&o), format!("report: {}\n", out.display()));
    }
    let html = std::fs::read_to_string(&a).unwrap();
    assert_eq!(html, std::fs::read_to_string(&b).unwrap(), "rendering is deterministic");

    // This process: the same bytes from the same store and the spec's topology.
    let rendered = {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let s = SledStore::open(&store).unwrap().store_ref();
        let topology = Spec::from_path(&spec).and_then(|s| s.build()).unwrap().root.topology();
        rt.block_on(agentic_report::report_from_store(&s, "rep-1", Some(&topology))).unwrap()
    };
    assert_eq!(rendered, html, "a report rendered in another process equals the one rendered here");

    // Status, the suspension and the answer that resumed it.
    assert!(html.contains(r#"<span class="status st-completed" id="run-status">completed</span>"#));
    assert!(html.contains(r#"<div class="ms-detail">waiting for <code>editor</code></div>"#));
    assert!(html.contains(
        r#"<div class="ms-detail answer"><code>editor</code> = <code class="answer-value">&quot;Ship it &lt;script&gt;alert(1)&lt;&#x2f;script&gt;&quot;</code></div>"#
    ), "the answer, escaped");
    assert!(!html.contains("<script>alert(1)"));
    assert!(!html.contains(PROBE));
    let data = page_data(&html);
    let kinds: Vec<&str> = data["milestones"].as_array().unwrap().iter().map(|m| m["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["started", "suspended", "resumed", "completed"]);
    assert_eq!(data["milestones"][1]["pending"], json!(["editor"]));
    assert_eq!(data["milestones"][2]["answers"], json!([["editor", "\"Ship it <script>alert(1)</script>\""]]));
    assert_eq!(data["timeline"]["breaks"].as_array().unwrap().len(), 1, "the wait is one collapsed break");
    assert_eq!(data["timeline"]["breaks"][0]["kind"], json!("suspended"));

    // Steps: the model's reply (with tokens), loop iterations, parallel branches, the state diff.
    let steps = data["steps"].as_array().unwrap();
    let by_name = |n: &str| steps.iter().filter(|s| s["name"] == json!(n)).collect::<Vec<_>>();
    assert_eq!(by_name("inputs")[0]["diff"], json!([{"key": "topic", "op": "added", "new": "dragons"}]));
    let draft = by_name("draft")[0];
    assert_eq!(draft["output"], json!(PROBE));
    assert_eq!(draft["kind"], json!("llm"));
    assert_eq!(draft["tokens"], json!([3, 3]), "scripted tokens: words in, words out");
    let revise: Vec<(Value, Value)> =
        by_name("revise").iter().map(|s| (s["iteration"].clone(), s["diff"][0].clone())).collect();
    assert_eq!(
        revise,
        [
            (json!(1), json!({"key": "revisions", "op": "added", "new": 1})),
            (json!(2), json!({"key": "revisions", "op": "changed", "old": 1, "new": 2})),
        ]
    );
    assert_eq!(by_name("length")[0]["path"], json!("root/2/0"));
    assert_eq!(by_name("shout")[0]["path"], json!("root/2/1"));
    let review = by_name("review");
    assert_eq!(review.len(), 1, "the suspended attempt is not a step");
    assert_eq!(review[0]["output"], json!(answer));
    assert_eq!(by_name("flow")[0]["output"], json!("Ship it <script>alert(1)</script>: 49 chars"));
    assert!(html.contains(r#"<dd id="run-tokens">6</dd>"#), "tokens of the run");

    // Topology: nodes, keys and data flow.
    assert!(html.contains(r#"<svg xmlns="http://www.w3.org/2000/svg" class="topology" id="topology-svg""#));
    for key in ["topic", "draft", "revisions", "length", "loud", "approval", "final"] {
        assert!(html.contains(&format!(">{key}</text></g>")), "key {key} drawn");
    }
    assert!(html.contains(r#"class="node k-llm st-ran" data-n="1" data-path="root/0""#));
}

#[test]
fn a_run_without_a_spec_is_reported_without_topology_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    {
        let s = SledStore::open(&store).unwrap().store_ref();
        let a = Compute::expression("double", "x * 2").unwrap().output_key("y").build();
        let system = Sequence::builder().name("calc").sub_agents([a]).output_key("y").build().unwrap();
        let outcome =
            rt.block_on(async { system.invoke().input("x", 21).memory_id("calc-1").store_ref(s).await }).unwrap();
        assert_eq!(outcome.output(), Some(&json!(42)));
    }
    let out = dir.path().join("calc.html");
    let o = agentic(&store, &["report", "calc-1", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: run `calc-1` was not started from a spec (no spec text or file recorded)"),
        "{}",
        stderr(&o)
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains(r#"<p class="banner b-info" id="no-topology">Topology not available: run `calc-1` was not started from a spec (no spec text or file recorded)."#));
    assert!(!html.contains(r#"id="topology-svg""#));
    assert_eq!(page_data(&html)["steps"][1]["name"], json!("double"), "names come from the invocations");

    let o = agentic(&store, &["report", "nope", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: no run `nope` in store"), "{}", stderr(&o));
}

#[test]
fn a_spec_topology_report_draws_agents_keys_and_flow() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    let out = dir.path().join("topology.html");
    let o = agentic(dir.path(), &["report", "--spec", spec.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("<h1>review-flow</h1>"));
    assert!(html.contains(r#"<div class="sub">9 agents · 3 composites · 7 state keys</div>"#));
    assert_eq!(html.matches(r#"<g class="node "#).count(), 9);
    assert_eq!(html.matches(r#"<path class="flow-out""#).count(), 7, "one edge per producer");
    assert!(html.contains(r#"<g class="key key-input" data-k="6"><title>key `topic`"#), "topic is a run input");
    assert!(html.contains(r#"<g class="key key-output" data-k="2"><title>key `final`"#), "final is the result");
    assert!(!html.contains(r#"id="report-data""#), "a topology page has no run data");

    std::fs::write(dir.path().join("bad.yaml"), "version: 1\nroot: x\nagents: {}\n").unwrap();
    let bad = dir.path().join("bad.yaml");
    let o = agentic(dir.path(), &["report", "--spec", bad.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    let o = agentic(dir.path(), &["report", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(64), "RUN_ID or --spec is required");
}

#[tokio::test]
async fn retries_loops_and_hostile_strings_are_rendered_safely() {
    let flaky_calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let calls = flaky_calls.clone();
    let flaky = FnAgent::from_async("flaky", move |_| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move { if n == 0 { Err("transient </script> failure".to_string()) } else { Ok(json!(PROBE)) } }
    })
    .output_key("reply")
    .description(PROBE)
    .build();
    let step = Compute::expression("step", "(n if n is defined else 0) + 1")
        .unwrap()
        .inputs(Vec::<String>::new())
        .output_key("n")
        .build();
    let counter = Loop::builder().name("count").sub_agents([step]).max_iterations(3).build().unwrap();
    let system = Sequence::builder()
        .name("hostile")
        .sub_agents([flaky, counter])
        .error_handler(RetryPolicy::new(2, Duration::from_millis(1)))
        .build()
        .unwrap();
    let store = MemoryStore::new();
    system.invoke().memory_id("h-1").store_ref(store.store_ref()).await.unwrap();
    let html = agentic_report::report_from_store(&store.store_ref(), "h-1", Some(&system.topology())).await.unwrap();
    assert_eq!(
        html,
        agentic_report::report_from_store(&store.store_ref(), "h-1", Some(&system.topology())).await.unwrap()
    );
    assert!(!html.contains(PROBE) && !html.contains("</script> failure"));
    assert!(
        html.contains("&lt;img src=x onerror=&quot;document.body.dataset.xss=1&quot;&gt;"),
        "the description, as text"
    );
    assert_eq!(html.matches("</script>").count(), 3, "only the page's own scripts close");
    let data = page_data(&html);
    let steps = data["steps"].as_array().unwrap();
    let flaky: Vec<&Value> = steps.iter().filter(|s| s["name"] == json!("flaky")).collect();
    assert_eq!(flaky.len(), 2, "the failed attempt is journaled, then the retry");
    assert_eq!(
        (flaky[0]["label"].clone(), flaky[0]["attempt"].clone(), flaky[0]["error"].clone()),
        (json!("failed attempt"), json!(1), json!("agent `flaky` (root/0) failed: transient </script> failure"))
    );
    assert_eq!((flaky[1]["attempt"].clone(), flaky[1]["output"].clone()), (json!(2), json!(PROBE)));
    let iterations: Vec<&Value> =
        steps.iter().filter(|s| s["name"] == json!("step")).map(|s| &s["iteration"]).collect();
    assert_eq!(iterations, [&json!(1), &json!(2), &json!(3)]);
    assert!(html.contains(r#"<td class="num">1</td><td class="num"></td><td class="num">"#), "one retry for flaky");
}

#[tokio::test]
async fn the_monitors_report_shows_every_invocation_the_failed_attempts_and_where_the_run_failed() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flaky = FnAgent::from_async("reserve", move |_| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move { if n == 0 { Err("warehouse busy".to_string()) } else { Ok(json!("reserved")) } }
    })
    .output_key("reservation")
    .build();
    let broken = FnAgent::from_async("charge", |_| async { Err::<Value, _>("card declined".to_string()) })
        .output_key("receipt")
        .build();
    let step = Compute::expression("count", "(n if n is defined else 0) + 1")
        .unwrap()
        .inputs(Vec::<String>::new())
        .output_key("n")
        .build();
    let counter = Loop::builder().name("tally").sub_agents([step]).max_iterations(2).build().unwrap();
    let system = Sequence::builder()
        .name("order")
        .sub_agents([counter, flaky, broken])
        .error_handler(RetryPolicy::new(1, Duration::from_millis(1)))
        .build()
        .unwrap();
    let monitor = AgentMonitor::new();
    let err = system.invoke().memory_id("m-1").listener(monitor.clone()).await.unwrap_err();
    assert_eq!(err.to_string(), "agent `charge` (root/2) failed: card declined");
    assert!(monitor.successful_executions().is_empty());
    assert_eq!(monitor.failed_executions().len(), 1);

    let topology = system.topology();
    let html = agentic_report::report_from_monitor(&monitor, "m-1", Some(&topology)).unwrap();
    assert_eq!(html, agentic_report::report_from_monitor(&monitor, "m-1", Some(&topology)).unwrap(), "deterministic");
    assert!(html.contains(r#"<span class="status st-failed" id="run-status">failed</span>"#));
    assert!(html.contains(r#"<span id="run-origin">from the in-process monitor: invocations, no state diffs</span>"#));
    // The banner names the failing agent (minijinja escapes `/` too).
    assert!(html.contains(
        "<strong>Run failed</strong> in agent <code>root&#x2f;2</code>\n    \
         <pre>agent `charge` (root&#x2f;2) failed: card declined</pre>"
    ));
    let data = page_data(&html);
    /// seq, name, label, attempt, iteration, error.
    type Row<'a> = (u64, &'a str, Option<&'a str>, u64, Option<u64>, Option<&'a str>);
    let steps: Vec<Row<'_>> = data["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["seq"].as_u64().unwrap(),
                s["name"].as_str().unwrap(),
                s["label"].as_str(),
                s["attempt"].as_u64().unwrap(),
                s["iteration"].as_u64(),
                s["error"].as_str(),
            )
        })
        .collect();
    let declined = Some("agent `charge` (root/2) failed: card declined");
    assert_eq!(
        steps,
        [
            (1, "count", None, 1, Some(1), None),
            (2, "count", None, 1, Some(2), None),
            (3, "tally", None, 1, None, None),
            (4, "reserve", Some("failed attempt"), 1, None, Some("agent `reserve` (root/1) failed: warehouse busy")),
            (5, "reserve", None, 2, None, None),
            (6, "charge", Some("failed attempt"), 1, None, declined),
            (7, "charge", Some("failed attempt"), 2, None, declined),
            (8, "order", Some("failed attempt"), 1, None, declined),
        ]
    );
    let milestones: Vec<(&str, u64)> = data["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["kind"].as_str().unwrap(), m["seq"].as_u64().unwrap()))
        .collect();
    assert_eq!(milestones, [("started", 0), ("failed", 8)]);

    // Without the topology the report says so; an id the monitor does not keep is a clear error.
    let session = monitor.session("m-1").unwrap();
    let bare = agentic_report::render_monitored(&session, None);
    assert!(bare.contains("the system&#x27;s topology was not given to the report"), "the reason is shown");
    let missing = agentic_report::report_from_monitor(&monitor, "m-2", None).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "the monitor keeps no session `m-2` (it keeps `m-1`; ended sessions beyond its retention are dropped)"
    );
}

fn synthetic_run(n: u64) -> (RunRecord, Vec<StepRecord>) {
    let mut records = vec![StepRecord {
        run_id: "big".into(),
        seq: 1,
        agent_path: INPUTS_PATH.into(),
        delta: vec![("items".into(), json!(n))],
        planner_states: vec![],
        invocation: None,
        async_started: false,
        failed: false,
        item: None,
        item_end: false,
        bindings: None,
        calls: Vec::new(),
    }];
    let t0 = 1_700_000_000_000_000u64;
    for i in 0..n {
        let seq = i + 2;
        let start = t0 + (i / 8) * 1_000 + (i % 8) * 37;
        records.push(StepRecord {
            run_id: "big".into(),
            seq,
            agent_path: "root/0".into(),
            delta: vec![(format!("item_{}", i % 50), json!(format!("value {i} {PROBE}")))],
            planner_states: vec![PlannerState {
                path: "root".into(),
                item: None,
                state: json!({"next": i + 1}),
                inflight: vec![],
                state_patch: None,
                inflight_change: None,
                finished: None,
                rationale: Some(format!("item {i} is next")),
                unconsumed: vec![],
            }],
            invocation: Some(InvocationRecord {
                agent: "worker".into(),
                path: "root/0".into(),
                inputs: Map::from_iter([("i".to_string(), json!(i))]),
                output: json!(format!("value {i} {PROBE}")),
                started_at_us: start,
                ended_at_us: start + 900,
                attempt: 1,
                tokens: Some(TokenUsage { input: 10, output: 5 }),
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
        name: "big".into(),
        fingerprint: String::new(),
        status: RunStatus::Completed,
        pending: vec![],
        answers: Default::default(),
        detail: json!("done"),
        source: None,
        spec_hash: None,
        cancel_requested: false,
        created_at_ms: t0 / 1_000,
        updated_at_ms: t0 / 1_000 + 2_000,
        milestones: vec![
            Milestone {
                at_ms: t0 / 1_000,
                kind: agentic::engine::MilestoneKind::Started,
                seq: 0,
                pending: vec![],
                answers: Default::default(),
                error: None,
                path: None,
                forked_from: None,
            },
            Milestone {
                at_ms: t0 / 1_000 + 2_000,
                kind: agentic::engine::MilestoneKind::Completed,
                seq: n + 1,
                pending: vec![],
                answers: Default::default(),
                error: None,
                path: None,
                forked_from: None,
            },
        ],
        forked_from: None,
        timed_out: Vec::new(),
        tenant: None,
        answered_by: std::collections::BTreeMap::new(),
    };
    (run, records)
}

#[test]
fn ten_thousand_steps_render_quickly_with_a_lazy_step_list() {
    let (run, records) = synthetic_run(10_000);
    let started = Instant::now();
    let html = agentic_report::render_run_without_topology(&run, &records, "synthetic run");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "rendering took {took:?}");
    assert!(html.len() < 20_000_000, "{} bytes", html.len());
    assert!(!html.contains("<details"), "steps are rendered by the page's script, a page at a time");
    let data = page_data(&html);
    assert_eq!(data["steps"].as_array().unwrap().len(), 10_001);
    assert_eq!(data["steps"][10_000]["diff"][0]["op"], json!("changed"));
    assert!(html.contains(r#"<dd id="run-tokens">150000</dd>"#));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&dir).unwrap();
    agentic_report::write_report(dir.join("big.html"), &html).unwrap();
}

#[test]
fn a_cancelled_runs_question_is_not_reported_as_waiting() {
    let (mut run, records) = synthetic_run(3);
    run.pending = vec![agentic::engine::PendingResponse::new("editor", "Publish it?", "review")];
    run.status = RunStatus::Suspended;
    let html = agentic_report::render_run_without_topology(&run, &records, "suspended run");
    assert!(html.contains(r#"<section class="banner b-suspended" id="run-pending">"#), "suspended: it waits");
    assert!(html.contains("<tr><td><code>editor</code></td><td>review</td><td>Publish it?</td></tr>"));
    run.status = RunStatus::Cancelled;
    let html = agentic_report::render_run_without_topology(&run, &records, "cancelled run");
    assert!(!html.contains(r#"id="run-pending""#), "cancelled: nothing waits");
    assert!(!html.contains("<code>editor</code>"), "the question is not listed");
}
