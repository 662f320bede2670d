//! The `eval` scenario (issue #44): what `agentic eval`'s machinery costs on top of the runs themselves.
//!
//! A 3-agent spec (a sequence of three `llm` agents, classify → draft → polish, each prompt templated on the
//! inputs and the agent before) with six cheap evaluators (equals on a state key, contains, regex, expression,
//! trajectory, cost) is evaluated over a dataset of N generated cases whose model calls were recorded once
//! ([`EvalBench::prepare`]: `CaseCalls::record()` on a `Runner` whose `scripted` model answers each case in
//! turn) and are then replayed strictly, so no model is called. Measured in one process on one sled store
//! (async durability, as the `Runner` runs): (a) [`EvalBench::eval`], `Runner::run` with `--concurrency` C
//! plus `summarize`; (b) [`EvalBench::runs_alone`], the same invocations (same tape per case, store, run names,
//! C at once via `buffer_unordered`) without read-back, evaluators or summary. [`EvalBench::parts`] times the
//! pieces (a) adds, one after the other, to say where the overhead goes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentic::agents::model::{ChatModelRef, ScriptedModel};
use agentic::engine::{CallTape, RecordedCall, ReplayMode, RunOutcome, RunResult, StoreRef};
use agentic::eval::{
    CaseCalls, CaseResult, Dataset, EvalResult, Evaluator, Judges, Observation, RunUsage, Runner, Summary, case_inputs,
    observed, read_back, summarize,
};
use agentic::spec::{BuiltSpec, Spec};
use agentic::store::SledStore;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::error::{Context, Result, ensure};

/// The spec: three `llm` agents in a sequence, a `scripted` model (substituted by one holding every case's
/// replies when recording), six evaluators that read the output, the state, the trajectory and the usage.
pub const SPEC: &str = r#"version: 1
name: eval_bench
root: desk
params:
  ticket: string
models:
  default: { provider: scripted }
agents:
  desk: { kind: sequence, agents: [classify, draft, polish], output_key: reply }
  classify:
    kind: llm
    system: You sort support tickets into refund, billing or technical.
    user: "Category of this ticket (one word): {{ ticket }}"
    output_key: category
  draft:
    kind: llm
    system: You answer support tickets.
    user: "Draft a reply to this {{ category }} ticket: {{ ticket }}"
    output_key: draft
  polish:
    kind: llm
    system: You are an editor.
    user: "Polish this draft, keeping the ticket number: {{ draft }}"
    output_key: reply
evals:
  - { kind: equals, name: category, value: "state.category" }
  - { kind: contains, name: acknowledged, text: "We are on it" }
  - { kind: regex, name: names-the-ticket, pattern: "ticket [0-9]+" }
  - { kind: expression, name: three-calls, check: "usage.model_calls == 3 and state.draft | length > 0" }
  - { kind: trajectory, order: [classify, draft, polish], max_steps: 4 }
  - { kind: cost, max_tokens: 2000, max_model_calls: 3 }
"#;

const CATEGORIES: [&str; 3] = ["refund", "billing", "technical"];

/// The spec's file name (the runs' `source`).
const FILE: &str = "eval_bench.yaml";

/// Case `i`'s category, ticket and the three replies its model calls get.
fn case(i: usize) -> (&'static str, String, [String; 3]) {
    let category = CATEGORIES[i % CATEGORIES.len()];
    let ticket = format!("Ticket {i}: my {category} problem number {} still stands.", i * 7 % 1013);
    let draft = format!("Dear customer, about your {category} request (ticket {i}): we are looking into it.");
    let polished = format!("We are on it: your {category} request (ticket {i}) has an owner and an answer today.");
    (category, ticket, [category.to_string(), draft, polished])
}

/// One measurement: wall time and the process's CPU time over it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timed {
    /// Wall-clock time.
    pub wall: Duration,
    /// User + system CPU time of the whole process.
    pub cpu: Duration,
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Timed) {
    let c0 = crate::proc::cpu_time().unwrap_or_default();
    let t0 = Instant::now();
    let out = f();
    let wall = t0.elapsed();
    (out, Timed { wall, cpu: crate::proc::cpu_time().unwrap_or_default().saturating_sub(c0) })
}

/// What the pieces (a) adds cost per case, each timed on its own over every case ([`EvalBench::parts`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Parts {
    /// Observing each completed run from its scope (state, trajectory, usage: `agentic::eval::observed`), as
    /// the `Runner` does: per case.
    pub observe: Duration,
    /// Reading each run back from the store instead (`agentic::eval::read_back`: what the `Runner` does for a run
    /// that did not complete), C at once: wall per case.
    pub read_back: Duration,
    /// The six evaluators on each case's observation, one case after the other: per case.
    pub evaluators: Duration,
    /// The cases' results and `summarize`: per case.
    pub summary: Duration,
}

/// The scenario's fixture: the spec built once, the dataset, the recording, the store.
pub struct EvalBench {
    spec: Spec,
    built: BuiltSpec,
    model: ScriptedModel,
    dataset: Dataset,
    inputs: Vec<Map<String, Value>>,
    evaluators: Arc<Vec<Evaluator>>,
    names: Vec<String>,
    judges: Judges,
    store: StoreRef,
    // Kept open for `store` (a `StoreRef` of it).
    _sled: SledStore,
    spec_hash: String,
    recording: Vec<RecordedCall>,
    by_case: HashMap<String, Vec<RecordedCall>>,
    concurrency: usize,
    evals: usize,
}

impl std::fmt::Debug for EvalBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalBench")
            .field("cases", &self.dataset.cases.len())
            .field("calls", &self.recording.len())
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl EvalBench {
    /// Builds the spec and a dataset of `cases` cases, opens a sled store under `dir` and records every case's
    /// calls once (one case after the other, so that the scripted model's replies go to their cases). Checks
    /// that every case passed and that the recording holds 3 calls a case.
    ///
    /// # Errors
    /// A spec, dataset or store error, or a recording run that did not pass.
    pub async fn prepare(cases: usize, concurrency: usize, dir: &Path) -> Result<EvalBench> {
        let spec = Spec::parse(SPEC, FILE).ctx("the eval scenario's spec")?;
        let mut lines = String::new();
        let mut replies = Vec::with_capacity(cases * 3);
        for i in 0..cases {
            let (category, ticket, answers) = case(i);
            lines.push_str(
                &json!({"id": format!("c{i}"), "inputs": {"ticket": ticket}, "expected": category}).to_string(),
            );
            lines.push('\n');
            replies.extend(answers);
        }
        let dataset = Dataset::parse(&lines, "eval_bench.jsonl").ctx("the eval scenario's dataset")?;
        let model = ScriptedModel::new(replies).named("default");
        let built = spec
            .build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))])
            .ctx("building the eval scenario's spec")?;
        let evaluators = Evaluator::of_spec(&spec).ctx("the eval scenario's evaluators")?;
        let names = evaluators.iter().map(|e| e.name.clone()).collect();
        let judges = Judges::for_spec(&spec, &evaluators).ctx("the eval scenario's judges")?;
        let inputs = case_inputs(&spec, &built, &dataset).ctx("the eval scenario's inputs")?;
        let sled = SledStore::open(dir.join("store")).ctx("opening the sled store")?;
        let store = sled.store_ref();
        let spec_hash = store.put_spec_dyn(SPEC).await.ctx("archiving the spec")?;
        let mut bench = EvalBench {
            spec,
            built,
            model,
            dataset,
            inputs,
            evaluators: Arc::new(evaluators),
            names,
            judges,
            store,
            _sled: sled,
            spec_hash,
            recording: Vec::new(),
            by_case: HashMap::new(),
            concurrency: concurrency.max(1),
            evals: 0,
        };
        let calls = Arc::new(CaseCalls::record());
        let mut recorder = bench.runner("record", Some(calls.clone()));
        recorder.concurrency = 1;
        let runs = recorder.run(&bench.dataset.cases, &bench.inputs, |_| {}).await;
        let failed: Vec<String> = runs
            .iter()
            .filter_map(|c| {
                let (r, _, _) = c.runs.first()?;
                (!r.passed).then(|| format!("{}: {:?} {:?}", c.id, r.error, r.results.iter().find(|e| !e.passed)))
            })
            .collect();
        ensure(failed.is_empty(), || {
            format!("recording: {} case(s) failed, first {:?}", failed.len(), failed.first())
        })?;
        bench.recording = calls.recorded();
        ensure(bench.recording.len() == 3 * cases && bench.model.used() == 3 * cases, || {
            format!(
                "recording: {} calls recorded and {} model replies used, expected {}",
                bench.recording.len(),
                bench.model.used(),
                3 * cases
            )
        })?;
        for call in &bench.recording {
            bench.by_case.entry(call.case.clone().unwrap_or_default()).or_default().push(call.clone());
        }
        Ok(bench)
    }

    /// Model calls made so far (all of them by the recording; a replay makes none).
    pub fn model_calls(&self) -> usize {
        self.model.used()
    }

    /// The cases.
    pub fn cases(&self) -> usize {
        self.dataset.cases.len()
    }

    /// The spec's name.
    pub fn spec_name(&self) -> &str {
        self.spec.name()
    }

    fn runner(&self, eval_id: &str, calls: Option<Arc<CaseCalls>>) -> Runner {
        Runner {
            built: self.built.clone(),
            store: self.store.clone(),
            evaluators: self.evaluators.clone(),
            judges: self.judges.clone(),
            eval_id: eval_id.to_string(),
            repeat: 1,
            concurrency: self.concurrency,
            spec_hash: Some(self.spec_hash.clone()),
            source: Some(FILE.to_string()),
            calls,
        }
    }

    /// Makes the store durable and lets its background work end, so that the next measurement does not pay
    /// for the writes of the one before (sled flushes them in the background).
    ///
    /// # Errors
    /// The store cannot be flushed.
    pub fn settle(&self, rt: &tokio::runtime::Runtime) -> Result<()> {
        rt.block_on(self.store.flush_dyn()).ctx("flushing the store")?;
        std::thread::sleep(Duration::from_millis(200));
        Ok(())
    }

    fn next_eval_id(&mut self, what: &str) -> String {
        self.evals += 1;
        format!("bench{what}{:04}", self.evals)
    }

    /// (a) The evaluation: `Runner::run` over every case, replayed strictly, C at once, then the cases' results
    /// and `summarize`, as `agentic eval --replay` does. Checks that every case passed.
    ///
    /// # Errors
    /// A case that did not pass.
    pub fn eval(&mut self, rt: &tokio::runtime::Runtime) -> Result<(Summary, Timed)> {
        let eval_id = self.next_eval_id("a");
        let calls = Arc::new(CaseCalls::replay(self.recording.clone(), ReplayMode::Strict));
        let runner = self.runner(&eval_id, Some(calls));
        let (summary, t) = timed(|| {
            rt.block_on(async {
                let case_runs = runner.run(&self.dataset.cases, &self.inputs, |_| {}).await;
                let runs: Vec<(RunUsage, u64)> =
                    case_runs.iter().flat_map(|c| c.runs.iter().map(|(r, _, u)| (u.clone(), r.latency_ms))).collect();
                let cases: Vec<CaseResult> = case_runs.into_iter().map(|c| c.into_result()).collect();
                (summarize(&cases, &runs, &self.names, None), cases)
            })
        });
        let (summary, cases) = summary;
        let first_failed = cases.iter().find(|c| !c.passed);
        ensure(summary.passed == self.cases(), || {
            format!("eval: {} of {} cases passed; first failure {first_failed:?}", summary.passed, self.cases())
        })?;
        Ok((summary, t))
    }

    /// (b) The same runs without evaluation: the same invocations as the `Runner` makes (inputs, a fresh run id,
    /// async durability, the store, the run name, the spec's hash and source, a strict tape of the case's
    /// calls), C at once; nothing observed, evaluated or summarised. Returns the runs, in case order. Checks
    /// that each run completed with the recorded output and that its tape answered its 3 calls and made none.
    ///
    /// # Errors
    /// A run that failed or gave another output.
    pub fn runs_alone(&mut self, rt: &tokio::runtime::Runtime) -> Result<(Vec<RunOutcome>, Timed)> {
        let eval_id = self.next_eval_id("b");
        let runner = self.runner(&eval_id, None);
        let this = &*self;
        let (results, t) = timed(|| {
            rt.block_on(
                futures::stream::iter(this.dataset.cases.iter().zip(&this.inputs))
                    .map(|(case, inputs)| {
                        let runner = &runner;
                        async move {
                            let tape = Arc::new(CallTape::replaying(
                                this.by_case.get(&case.id).cloned().unwrap_or_default(),
                                ReplayMode::Strict,
                            ));
                            let run_id = new_run_id();
                            let outcome = runner.request(case, inputs, 1, &run_id).call_tape(tape.clone()).await;
                            (case, run_id, outcome, tape.stats())
                        }
                    })
                    .buffer_unordered(this.concurrency)
                    .collect::<Vec<_>>(),
            )
        });
        let mut runs: Vec<Option<RunOutcome>> = results.iter().map(|_| None).collect();
        for (case, run_id, outcome, stats) in results {
            let i: usize = case.id[1..].parse().ctx("case id")?;
            let want = Value::String(case_reply(i));
            let outcome = match outcome {
                Ok(o) if matches!(&o.result, RunResult::Completed(v) if *v == want) && o.run_id == run_id => o,
                Ok(o) => return Err(crate::error::Error(format!("runs alone: case {}: {:?}", case.id, o.result))),
                Err(e) => return Err(crate::error::Error(format!("runs alone: case {}: {e}", case.id))),
            };
            ensure(stats.answered == 3 && stats.made == 0, || format!("runs alone: case {}: tape {stats:?}", case.id))?;
            *runs.get_mut(i).ctx("case index")? = Some(outcome);
        }
        Ok((runs.into_iter().flatten().collect(), t))
    }

    /// The pieces (a) adds to (b), each timed over the runs `runs` (from [`EvalBench::runs_alone`]):
    /// observing each run as the `Runner` does, the evaluators on each observation, the cases' results and the
    /// summary; and, for comparison, reading each run back from the store (C at once). Checks that both give
    /// the same state, trajectory and usage.
    ///
    /// # Errors
    /// A run whose observation differs from what the store holds, or an evaluator that fails.
    pub fn parts(&self, rt: &tokio::runtime::Runtime, runs: &[RunOutcome]) -> Result<Parts> {
        let n = runs.len().max(1) as u32;
        let t0 = Instant::now();
        let seen: Vec<ReadBack> = rt.block_on(async {
            let mut seen = Vec::with_capacity(runs.len());
            for run in runs {
                seen.push(observed(run).await);
            }
            seen
        });
        let observe = t0.elapsed() / n;
        let t0 = Instant::now();
        let stored: Vec<ReadBack> = rt.block_on(
            futures::stream::iter(runs)
                .map(|run| read_back(&self.store, &run.run_id))
                .buffered(self.concurrency)
                .collect::<Vec<_>>(),
        );
        let read_back = t0.elapsed() / n;
        let mut observations = Vec::with_capacity(seen.len());
        for (i, (s, from_store)) in seen.into_iter().zip(stored).enumerate() {
            ensure(s == from_store, || {
                format!("parts: run {} observed {s:?}, the store holds {from_store:?}", runs[i].run_id)
            })?;
            let (state, trajectory, usage) = s;
            let case = self.dataset.cases.get(i).ctx("case")?;
            observations.push(Observation {
                output: state.get("reply").cloned().unwrap_or_default(),
                expected: case.expected.clone(),
                inputs: self.inputs[i].clone(),
                state,
                trajectory,
                usage,
                latency_ms: 1,
            });
        }
        let t0 = Instant::now();
        let results: Vec<Vec<EvalResult>> = rt.block_on(async {
            let mut all = Vec::with_capacity(observations.len());
            for seen in &observations {
                all.push(Evaluator::evaluate_all(&self.evaluators, seen, &self.judges).await);
            }
            all
        });
        let evaluators = t0.elapsed() / n;
        let failed = results.iter().flatten().filter(|r| !r.passed).count();
        ensure(failed == 0, || format!("parts: {failed} evaluations failed, e.g. {:?}", results.first()))?;
        let t0 = Instant::now();
        let case_results: Vec<CaseResult> = results
            .into_iter()
            .zip(&observations)
            .zip(&self.dataset.cases)
            .zip(runs)
            .map(|(((results, seen), case), run)| {
                agentic::eval::CaseRuns {
                    id: case.id.clone(),
                    inputs: case.inputs.clone(),
                    expected: case.expected.clone(),
                    runs: vec![(
                        agentic::eval::RepeatResult {
                            run_id: run.run_id.clone(),
                            passed: true,
                            results,
                            output: seen.output.clone(),
                            error: None,
                            latency_ms: 1,
                        },
                        "completed".to_string(),
                        seen.usage.clone(),
                    )],
                }
                .into_result()
            })
            .collect();
        let runs: Vec<(RunUsage, u64)> = observations.iter().map(|o| (o.usage.clone(), 1)).collect();
        let summary = summarize(&case_results, &runs, &self.names, None);
        let summary_t = t0.elapsed() / n;
        ensure(summary.passed == runs.len(), || format!("parts: {} cases passed", summary.passed))?;
        Ok(Parts { observe, read_back, evaluators, summary: summary_t })
    }
}

/// Case `i`'s output (the polished reply).
fn case_reply(i: usize) -> String {
    let (_, _, [_, _, polished]) = case(i);
    polished
}

/// A run id as the `Runner` makes them (a random UUID, hyphenated).
fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// What a run gave: its final state, its trajectory, its usage.
type ReadBack = (Map<String, Value>, Vec<String>, RunUsage);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_differ_and_replies_carry_the_ticket() {
        let (c0, t0, r0) = case(0);
        let (c1, t1, _) = case(1);
        assert_ne!(t0, t1);
        assert_ne!(c0, c1);
        assert!(r0[2].contains("We are on it") && r0[2].contains("ticket 0"));
    }
}
