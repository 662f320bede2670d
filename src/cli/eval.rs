//! `agentic eval SPEC DATASET.jsonl` and `agentic eval export` (SPEC.md §6): the spec built once, its
//! evaluators and the dataset checked before anything runs (exit 64 naming the file, line and key), each
//! case run in the store through the engine (crate `agentic-eval`), the results printed as a table (or one
//! JSON document), written with `--out`, compared with `--baseline`, and gated (exit 0 or 1).

use std::path::Path;
use std::sync::Arc;

use agentic_eval::{Baseline, Dataset, EvalResults, Evaluator, Judges, Runner};
use serde_json::Value;

use super::args::{EvalArgs, EvalCommand, EvalExportArgs};
use super::run::out;
use super::{EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};

/// Runs `agentic eval`; returns the exit code.
pub(crate) fn eval(args: EvalArgs) -> u8 {
    if let Some(EvalCommand::Export(export_args)) = &args.command {
        return export(export_args);
    }
    let (Some(spec_path), Some(dataset_path)) = (&args.spec, &args.dataset) else {
        eprintln!("error: agentic eval needs SPEC and DATASET.jsonl (or `agentic eval export`)");
        return EXIT_USAGE;
    };
    // Everything that can be wrong with the input is found before the first run.
    let (text, spec) = match agentic_spec::read_spec_file(spec_path) {
        Ok(read) => read,
        Err(errors) => {
            eprintln!("{errors}");
            return EXIT_USAGE;
        }
    };
    // A replay answers every model call from its recording: a model this binary cannot build (`provider:
    // local` without the feature) stands in under the name it would report.
    let built = if args.replay.is_some() { spec.build_for_replay() } else { spec.build() };
    let built = match built {
        Ok(built) => built,
        Err(errors) => {
            eprintln!("{errors}");
            return EXIT_USAGE;
        }
    };
    if let Some(message) = super::run::pending_human(&spec) {
        eprintln!("{message}");
        return EXIT_USAGE;
    }
    let evaluators = match &args.evals {
        Some(path) => Evaluator::from_file(path, &spec),
        None => Evaluator::of_spec(&spec),
    };
    let evaluators = match evaluators {
        Ok(list) if list.is_empty() => {
            let from = args.evals.as_ref().map_or_else(|| spec.file().to_string(), |p| p.display().to_string());
            eprintln!(
                "error: {from}: no evaluator: give the spec a top-level `evals:` list (or --evals FILE.yaml), e.g. \
                 `evals: [{{kind: equals}}]` (docs/evaluation.md)"
            );
            return EXIT_USAGE;
        }
        Ok(list) => list,
        Err(errors) => {
            eprintln!("{errors}");
            return EXIT_USAGE;
        }
    };
    let judges = match Judges::for_spec(&spec, &evaluators) {
        Ok(judges) => judges,
        Err(message) => {
            eprintln!("error: {}: {message}", spec.file());
            return EXIT_USAGE;
        }
    };
    let dataset = match Dataset::read(dataset_path) {
        Ok(dataset) => dataset,
        Err(errors) => {
            eprintln!("{}", prefixed(&errors.to_string()));
            return EXIT_USAGE;
        }
    };
    let inputs = match agentic_eval::case_inputs(&spec, &built, &dataset) {
        Ok(inputs) => inputs,
        Err(errors) => {
            eprintln!("{}", prefixed(&errors.to_string()));
            return EXIT_USAGE;
        }
    };
    let calls = match (&args.replay, &args.record) {
        (Some(path), _) => {
            let read = std::fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|text| agentic_engine::RecordedCall::read_lines(&text).map_err(|e| e.to_string()));
            match read {
                Ok(recorded) => Some(Arc::new(agentic_eval::CaseCalls::replay(recorded, args.replay_mode.into()))),
                Err(message) => {
                    eprintln!("error: --replay {}: {message}", path.display());
                    return EXIT_USAGE;
                }
            }
        }
        (None, Some(_)) => Some(Arc::new(agentic_eval::CaseCalls::record())),
        (None, None) => None,
    };
    let baseline = match args.baseline.as_deref().map(Baseline::read).transpose() {
        Ok(baseline) => baseline,
        Err(message) => {
            eprintln!("error: --baseline {message}");
            return EXIT_USAGE;
        }
    };
    let runtime = match super::durable::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store = match super::open(&runtime, &args.store.store) {
        Ok(super::Opened::Local(store)) => store,
        Ok(super::Opened::Server(_)) => {
            eprintln!(
                "error: store {} is held by `agentic serve`: agentic eval runs its cases in this process; stop the \
                 server or evaluate into another --store",
                super::store_label(&args.store.store)
            );
            return EXIT_UNAVAILABLE;
        }
        Err(code) => return code,
    };
    let hash = match runtime.block_on(store.put_spec_dyn(&text)) {
        Ok(hash) => hash,
        Err(e) => return super::store_failed(&args.store.store, &e),
    };
    let source = std::fs::canonicalize(spec_path).unwrap_or_else(|_| spec_path.clone());
    let created_at = agentic_engine::rfc3339_ms(agentic_engine::now_ms());
    let names: Vec<String> = evaluators.iter().map(|e| e.name.clone()).collect();
    let runner = Runner {
        built,
        store,
        evaluators: Arc::new(evaluators),
        judges,
        eval_id: agentic_eval::new_eval_id(),
        repeat: args.repeat,
        concurrency: args.concurrency as usize,
        spec_hash: Some(hash),
        source: Some(source.to_string_lossy().into_owned()),
        calls: calls.clone(),
    };
    eprintln!(
        "eval: {} ({} case{} × {} on {}, {} at once)",
        runner.eval_id,
        dataset.cases.len(),
        if dataset.cases.len() == 1 { "" } else { "s" },
        args.repeat,
        spec.name(),
        args.concurrency
    );
    // The models are made ready first (a local model loads its file), so that no case's latency includes it;
    // a replay calls none.
    if !matches!(calls.as_deref(), Some(agentic_eval::CaseCalls::Replay { .. }))
        && let Err(why) = runtime.block_on(agentic_spec::prepare_models(&runner.built.models))
    {
        eprintln!("eval: warning: {why}");
    }
    let repeat = args.repeat;
    let case_runs = runtime.block_on(runner.run(&dataset.cases, &inputs, |p| {
        let label = if p.repeat > 1 { format!("{}#{}", p.case, p.repeat) } else { p.case.to_string() };
        eprintln!("[{}/{}] {label} {}", p.done, p.total, if p.passed { "PASS" } else { "FAIL" });
    }));
    let runs: Vec<(agentic_eval::RunUsage, u64)> =
        case_runs.iter().flat_map(|c| c.runs.iter().map(|(r, _, u)| (u.clone(), r.latency_ms))).collect();
    let cases: Vec<agentic_eval::CaseResult> = case_runs.into_iter().map(|c| c.into_result()).collect();
    let summary = agentic_eval::summarize(&cases, &runs, &names, args.min_pass);
    let mut results = EvalResults {
        eval_id: runner.eval_id.clone(),
        spec: spec.name().to_string(),
        spec_file: spec_path.display().to_string(),
        dataset: dataset_path.display().to_string(),
        created_at,
        repeat,
        cases,
        summary,
    };
    if let Some(baseline) = &baseline {
        results.compare(baseline);
    }
    let document = results.to_json();
    if args.json {
        out(&document.to_string());
    } else {
        print_table(&results, &args.store.store);
    }
    let mut code = if results.gate_passes() { EXIT_OK } else { EXIT_FAILED };
    say_gate(&results, baseline.as_ref());
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(&document).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: --out {}: {e}", path.display());
            code = code.max(EXIT_FAILED);
        }
    }
    if let (Some(path), Some(calls)) = (&args.record, &calls) {
        let recorded = calls.recorded();
        let text: String = recorded.iter().map(|c| c.to_line() + "\n").collect();
        match std::fs::write(path, text) {
            Ok(()) => eprintln!("recorded {} call(s) to {}", recorded.len(), path.display()),
            Err(e) => {
                eprintln!("error: --record {}: {e}", path.display());
                code = code.max(EXIT_FAILED);
            }
        }
    }
    if let Some(path) = &args.report {
        let topology = runner.built.root.topology();
        code = code.max(write_report(&runtime, &runner.store, &topology, path, &document));
    }
    code
}

/// `--report FILE.html`: the HTML page of the results, and beside it, in `<FILE's stem>-runs/`, the report of
/// each case's run (as `agentic report RUN_ID` writes it), which the page links to.
fn write_report(
    runtime: &tokio::runtime::Runtime,
    store: &agentic_engine::StoreRef,
    topology: &agentic_engine::TopologyNode,
    path: &Path,
    results: &Value,
) -> u8 {
    let stem = path.file_stem().map_or_else(|| "eval".to_string(), |s| s.to_string_lossy().into_owned());
    let dir_name = format!("{stem}-runs");
    let dir = path.parent().unwrap_or_else(|| Path::new("")).join(&dir_name);
    let mut run_ids = Vec::new();
    for case in results["cases"].as_array().into_iter().flatten() {
        run_ids.extend(case["run_id"].as_str().map(str::to_string));
        for repeat in case["repeats"].as_array().into_iter().flatten() {
            run_ids.extend(repeat["run_id"].as_str().map(str::to_string));
        }
    }
    run_ids.sort();
    run_ids.dedup();
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: --report {}: {e}", dir.display());
        return EXIT_FAILED;
    }
    for run_id in &run_ids {
        let html = match runtime.block_on(agentic_report::load_run(store, run_id)) {
            Ok((run, records)) => agentic_report::render_run(topology, &run, &records),
            Err(e) => {
                eprintln!("error: --report: the report of run {run_id}: {e}");
                return EXIT_FAILED;
            }
        };
        if let Err(e) = agentic_report::write_report(dir.join(agentic_report::run_report_file(run_id)), &html) {
            eprintln!("error: --report: {e}");
            return EXIT_FAILED;
        }
    }
    let page = match agentic_report::eval_report(results, Some(&agentic_report::RunLinks::Files { dir: dir_name })) {
        Ok(page) => page,
        Err(e) => {
            eprintln!("error: --report {}: {e}", path.display());
            return EXIT_FAILED;
        }
    };
    if let Err(e) = agentic_report::write_report(path, &page) {
        eprintln!("error: --report: {e}");
        return EXIT_FAILED;
    }
    eprintln!("report: {} (the runs' reports in {})", path.display(), dir.display());
    EXIT_OK
}

/// Each line of a dataset error with `error: ` in front.
fn prefixed(text: &str) -> String {
    text.lines().map(|l| format!("error: {l}")).collect::<Vec<_>>().join("\n")
}

/// The table: a block per case (its outcome and run id, then a line per evaluator: PASS/FAIL, score,
/// reason), then the summary.
fn print_table(results: &EvalResults, store: &Path) {
    let width =
        results.cases.iter().flat_map(|c| c.results.iter().map(|r| r.evaluator.chars().count())).max().unwrap_or(0);
    for case in &results.cases {
        let outcome = if case.passed { "PASS" } else { "FAIL" };
        let mut head = format!("{}  {outcome}", case.id);
        if !case.repeats.is_empty() {
            let passed = case.repeats.iter().filter(|r| r.passed).count();
            head.push_str(&format!("  {passed}/{} runs passed", case.repeats.len()));
            if case.flaky {
                head.push_str(" (flaky)");
            }
        }
        head.push_str(&format!("  run {}", case.run_id));
        out(&head);
        for r in &case.results {
            let mark = if r.passed { "PASS" } else { "FAIL" };
            let reason = r.reason.as_deref().map(|s| format!("  {s}")).unwrap_or_default();
            out(&format!("  {:<width$}  {mark}  {:.2}{reason}", r.evaluator, r.score));
        }
        if let Some(error) = &case.error
            && case.results.is_empty()
        {
            out(&format!("  {error}"));
        }
    }
    let s = &results.summary;
    out("");
    out(&format!(
        "cases: {}, passed: {}, failed: {}, pass rate: {:.1}%{}",
        s.cases,
        s.passed,
        s.failed,
        s.pass_rate * 100.0,
        s.min_pass.map(|m| format!(" (--min-pass {:.1}%)", m * 100.0)).unwrap_or_default()
    ));
    let means: Vec<String> =
        s.mean_scores.iter().map(|(name, score)| format!("{name} {:.2}", score.as_f64().unwrap_or_default())).collect();
    out(&format!("mean score: {}", means.join(", ")));
    let cost = s.cost_usd.map_or_else(|| "not counted (no prices)".to_string(), |c| format!("${c:.6}"));
    out(&format!("tokens: {} in, {} out; cost: {cost}", s.tokens.input, s.tokens.output));
    out(&format!("latency: p50 {} ms, p95 {} ms", s.latency_ms.p50, s.latency_ms.p95));
    if !s.flaky.is_empty() {
        out(&format!("flaky: {}", s.flaky.join(", ")));
    }
    if !s.regressions.is_empty() {
        out(&format!("regressions: {}", s.regressions.join(", ")));
    }
    out(&format!(
        "runs: named eval:{}:<case id>; `agentic show RUN_ID{}` shows one",
        results.eval_id,
        super::store_flag(store)
    ));
}

/// Says on stderr why the evaluation fails its gate, if it does: the failed share against `--min-pass`, and
/// each regression against the baseline, by case id.
fn say_gate(results: &EvalResults, baseline: Option<&Baseline>) {
    let s = &results.summary;
    for id in &s.regressions {
        let file = baseline.map_or("the baseline", |b| b.file.as_str());
        eprintln!("regression: case `{id}` passed in {file} and fails now");
    }
    if s.failed > 0 {
        match s.min_pass {
            Some(m) if s.pass_rate >= m => eprintln!(
                "{} of {} cases failed; the pass rate {:.4} reaches --min-pass {m}",
                s.failed, s.cases, s.pass_rate
            ),
            Some(m) => eprintln!(
                "FAIL: {} of {} cases failed; the pass rate {:.4} is below --min-pass {m}",
                s.failed, s.cases, s.pass_rate
            ),
            None => eprintln!("FAIL: {} of {} cases failed", s.failed, s.cases),
        }
    }
}

/// `agentic eval export`: the stored runs as dataset lines on stdout.
fn export(args: &EvalExportArgs) -> u8 {
    let runtime = match super::durable::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let store = match super::open_store(&runtime, &args.store.store) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let filter = agentic_eval::ExportFilter { spec: args.spec.clone(), status: Some(args.status), limit: args.limit };
    match runtime.block_on(agentic_eval::export(&store, &filter)) {
        Ok(lines) => {
            for line in &lines {
                out(&line.to_string());
            }
            EXIT_OK
        }
        Err(e) => super::store_failed(&args.store.store, &e),
    }
}
