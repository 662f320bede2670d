//! CI-cheap smoke test: every scenario of the side-by-side bench at a tiny size, checking exact counts (keys
//! written, outputs produced, runs completed, requests served) — never timings.

use std::path::PathBuf;

use agentic::prelude::Durability;
use agentic_bench::runner::{self, Lg, Plan, Setup};
use agentic_bench::scenarios::{self, Backend, ConcurrentMode, Keys, Shape};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

#[test]
fn a_ten_step_chain_writes_ten_keys_with_every_backend() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let sled = agentic::store::SledStore::open(dir.path().join("store")).expect("store");
    for keys in [Keys::Distinct, Keys::Single] {
        let system = scenarios::chain(10, keys).expect("chain");
        for backend in
            [Backend::None, Backend::Memory, Backend::Sled(Durability::Sync), Backend::Sled(Durability::Async)]
        {
            let id = format!("{}-{}", keys.name(), backend.name());
            // run_chain checks `k9` = 9 (or `v` = 9) and the key count (11, or 2).
            rt.block_on(scenarios::run_chain(&system, 10, keys, backend, Some(&sled), &id)).expect("run");
        }
    }
}

#[test]
fn fan_out_produces_k_outputs_and_the_join_total() {
    let rt = rt();
    for shape in [Shape::Static, Shape::Send] {
        let system = scenarios::fan_out(10, shape).expect("fan-out");
        let (_, outputs) =
            rt.block_on(scenarios::run_fan_out(&system, 10, shape, Backend::Memory, None, "f")).expect("run");
        assert_eq!(outputs, 10, "{}", shape.name());
    }
}

#[test]
fn concurrent_runs_all_complete_with_their_records() {
    let rt = rt();
    for mode in [ConcurrentMode::Gather, ConcurrentMode::Sequential, ConcurrentMode::NoCheckpoint] {
        let r = rt.block_on(scenarios::concurrent_child(25, mode)).expect("runs");
        assert_eq!(r.completed, 25);
        assert_eq!(r.records_per_run.is_some(), mode != ConcurrentMode::NoCheckpoint);
        // The test process runs other tests at once and the kernel's RSS counters are approximate per CPU,
        // so peak ≥ base is not guaranteed here; that both were read is.
        assert!(r.rss_base_kib > 0 && r.rss_peak_kib > 0, "{r:?}");
    }
}

#[test]
fn resume_finishes_in_a_second_store_handle() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    rt.block_on(scenarios::resume_start(&store, "hitl")).expect("process A");
    // resume_finish checks the pending prompt, c == "42:yes" and that nothing is pending.
    rt.block_on(scenarios::resume_finish(&store, "hitl")).expect("process B");
}

/// The whole driver at the tiny plan, child processes included (the bench binary built by cargo for tests).
#[test]
fn every_scenario_runs_at_a_tiny_size() {
    let rt = rt();
    let work = tempfile::tempdir().expect("tempdir");
    let setup = Setup {
        plan: Plan::tiny(),
        scenarios: Vec::new(),
        work: work.path().join("work"),
        exe: PathBuf::from(env!("CARGO_BIN_EXE_agentic-bench")),
        serve_cmd: vec![env!("CARGO_BIN_EXE_agentic-bench").into(), "child".into(), "serve".into()],
        langgraph_serve: None,
        pg: None,
    };
    let report = runner::run(&setup, &Lg::default(), &rt).expect("bench");
    let count = |what: &str| {
        report.counts.iter().find(|(w, _)| w == what).map(|(_, c)| *c).unwrap_or_else(|| panic!("no count `{what}`"))
    };
    assert_eq!(count("seq distinct 10 memory keys"), 10);
    assert_eq!(count("fanout static 10 none outputs"), 10);
    assert_eq!(count("fanout send 10 memory outputs"), 10);
    assert_eq!(count("resumed runs"), 1);
    assert_eq!(count("concurrent 20 gather completed"), 20);
    assert_eq!(count("disk bytes > 0"), 1);
    // 1 + 1 single calls, 2 × 5 parallel, 2 × 2 sequence steps, 2 × 5 runs × 2 steps; the HTTP client alone:
    // 5 warm-up calls and 5 chains × 2 calls.
    assert_eq!(count("llm requests"), 2 + 10 + 4 + 20 + 5 + 10);
    // How many calls overlap depends on the machine's speed; only the bounds are exact.
    assert!((1..=5).contains(&count("llm parallel peak in flight")));
    assert!((1..=5).contains(&count("llm concurrent peak in flight")));
    // Every run checked its output ([input, 0, 1, 2, 3, 4]) through the completed event of its SSE stream.
    // Tool rounds (SPEC.md §4): under sync a call with an effect is committed as started and its result before
    // the next model call (2 commits a round), a call without one only its result (1); under exit none.
    assert_eq!(count("tools effect once sync commits per round"), 2);
    assert_eq!(count("tools no effect sync commits per round"), 1);
    assert_eq!(count("tools effect once exit commits per round"), 0);
    assert_eq!(count("tools no effect exit commits per round"), 0);
    // 2 effects × 2 durabilities × 2 repetitions (a warm-up and one measured) × (1 request + 4 requests).
    assert_eq!(count("tools requests"), 2 * 2 * 2 * (1 + 4));
    // The eval scenario: 20 replayed cases, every one passed, the model never called in a replay.
    assert_eq!(count("eval cases passed"), 20);
    assert_eq!(count("eval model calls in the replays"), 0);
    assert_eq!(count("serve runs completed (ours, sync)"), 20);
    // Group commit: 20 concurrent 3-step sync runs on sled, each checked; the actor floor beside the memory row.
    assert_eq!(count("group runs completed (sled)"), 20);
    assert_eq!(count("actor floor rings at N=10"), 2000);
    assert!(report.rows.iter().any(|r| r.scenario.contains("per step ÷ the actor floor")));
    assert!(report.rows.iter().any(|r| r.scenario.contains("submit latency p99")));
    assert!(report.rows.len() >= 10);
}

/// The eval scenario at 20 cases (issue #44): recorded once, then evaluated and run alone from the recording;
/// every case passes, every evaluator too, and no replay calls the model.
#[test]
fn the_eval_scenario_replays_twenty_cases_that_all_pass_without_a_model_call() {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bench = rt.block_on(agentic_bench::eval::EvalBench::prepare(20, 8, dir.path())).expect("record");
    assert_eq!((bench.cases(), bench.model_calls(), bench.spec_name()), (20, 60, "eval_bench"));
    for _ in 0..2 {
        let (summary, _) = bench.eval(&rt).expect("eval");
        assert_eq!((summary.cases, summary.passed, summary.failed), (20, 20, 0));
        assert_eq!(summary.mean_scores.len(), 6);
        assert!(summary.mean_scores.values().all(|s| s.as_f64() == Some(1.0)), "{:?}", summary.mean_scores);
        // Three calls a case, each answered by the tape (runs_alone checks each tape: 3 answered, 0 made).
        assert!(summary.tokens.output > 0 && summary.tokens.input > 0, "{:?}", summary.tokens);
        let (runs, _) = bench.runs_alone(&rt).expect("runs alone");
        assert_eq!(runs.len(), 20);
        // Every run, observed from itself as the read back from the store, passes every evaluator.
        bench.parts(&rt, &runs).expect("parts");
    }
    assert_eq!(bench.model_calls(), 60, "a replay called the model");
}

#[test]
fn unknown_scenarios_are_refused() {
    assert!(runner::check_scenarios(&["seq".into(), "llm".into(), "tools".into(), "eval".into()]).is_ok());
    assert!(runner::check_scenarios(&["nope".into()]).is_err());
}

#[path = "../../store/tests/support/pg.rs"]
mod pg_support;

#[test]
fn the_pg_scenario_runs_the_chain_on_postgresql_with_every_durability() {
    let rt = rt();
    let Some(url) = rt.block_on(pg_support::fresh_database("bench pg smoke")) else { return };
    let store = rt.block_on(agentic::store::PgStore::connect(&url)).expect("store");
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        // ours_per_step checks `k4` = 4 and 6 keys in every run's final state.
        let per_step = rt
            .block_on(agentic_bench::pg::ours_per_step(&store, 5, durability, 2, &format!("smoke-{durability:?}")))
            .expect("run");
        assert!(per_step > 0.0);
    }
    // A warm-up and two measured runs per durability, each recorded completed under its own id.
    let runs = rt.block_on(agentic::engine::CheckpointStore::runs(&store)).expect("runs");
    assert_eq!(runs.len(), 9);
    assert!(runs.iter().all(|r| r.status == agentic::engine::RunStatus::Completed), "{runs:?}");
}

/// Group commit on PostgreSQL: 20 concurrent 3-step sync runs, every final state checked; the server saw at
/// least one write transaction and fewer than one per step.
#[test]
fn the_group_scenario_commits_concurrent_steps_together_on_postgresql() {
    let rt = rt();
    let Some(url) = rt.block_on(pg_support::fresh_database("bench group smoke")) else { return };
    let store = rt.block_on(agentic::store::PgStore::connect(&url)).expect("store");
    rt.block_on(agentic_bench::group::warm_up(&store, 3, "smoke")).expect("warm-up");
    let before = rt.block_on(agentic_bench::group::PgCounters::read(&url)).expect("counters");
    let r = rt.block_on(agentic_bench::group::run(&store, 20, 3, "smoke")).expect("runs");
    let after = rt.block_on(agentic_bench::group::PgCounters::read(&url)).expect("counters");
    assert_eq!((r.runs, r.total_steps()), (20, 60));
    let (xacts, _) = before.since(after);
    assert!((1..60).contains(&xacts), "{xacts} write transactions for 60 steps of 20 concurrent runs");
}

/// The profiling child: R runs of an N-step chain, each checked, with the per-step time as JSON; an unknown
/// backend is refused by name.
#[test]
fn the_chain_child_runs_and_reports_its_step_time() {
    let exe = env!("CARGO_BIN_EXE_agentic-bench");
    for backend in ["memory", "none"] {
        let out = std::process::Command::new(exe).args(["child", "chain", "4", "3", backend]).output().expect("spawn");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!((v["n"].as_u64(), v["runs"].as_u64()), (Some(4), Some(3)), "{v}");
        assert!(v["per_step_us"].as_f64().is_some_and(|us| us > 0.0), "{v}");
    }
    let out = std::process::Command::new(exe).args(["child", "chain", "4", "3", "sled"]).output().expect("spawn");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("backend \"sled\": expected memory or none"));
}
