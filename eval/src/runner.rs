//! Running an evaluation's cases ([`Runner`]): each case is an ordinary run of the spec in the store, named
//! `eval:<eval id>:<case id>` (`#k` for the k-th repeat, k ≥ 2), `concurrency` at a time; what each run gave
//! is read back from the store and handed to the evaluators. Also the cases' inputs checked against the
//! spec ([`case_inputs`]) and stored runs written back as dataset lines ([`export`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentic_engine::{
    AgentError, CallTape, Durability, InvocationRecord, InvokeRequest, PendingResponse, RecordedCall, ReplayMode,
    RunOutcome, RunResult, RunStatus, StoreError, StoreRef,
};
use agentic_spec::{BuiltSpec, Spec};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::dataset::{Case, Dataset, DatasetError, DatasetErrors};
use crate::evaluator::{Evaluator, Judges, Observation};
use crate::results::{CaseRuns, EvalResult, RepeatResult, RunUsage};

/// A new evaluation id: 12 hexadecimal digits (of a random UUID).
pub fn new_eval_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

/// The run name of repeat `k` (1-based) of case `case_id` in evaluation `eval_id`:
/// `eval:<eval id>:<case id>`, with `#k` from the second repeat on.
pub fn run_name(eval_id: &str, case_id: &str, k: u32) -> String {
    if k <= 1 { format!("eval:{eval_id}:{case_id}") } else { format!("eval:{eval_id}:{case_id}#{k}") }
}

/// Each case's inputs as its run gets them: checked against the spec's `params` (types, undeclared keys),
/// completed with their defaults, and not lacking an input the spec requires, as `agentic run` checks them.
///
/// # Errors
/// Every case whose inputs do not fit, naming the dataset's line: `tickets.jsonl: line 3: case `c3`: input
/// `ticket`: missing (read by agent `classify`)`.
pub fn case_inputs(
    spec: &Spec,
    built: &BuiltSpec,
    dataset: &Dataset,
) -> Result<Vec<Map<String, Value>>, DatasetErrors> {
    let mut errors = Vec::new();
    let mut out = Vec::with_capacity(dataset.cases.len());
    for case in &dataset.cases {
        let mut inputs = case.inputs.clone();
        let mut wrong: Vec<agentic_spec::InputError> = spec.check_inputs(&inputs).err().unwrap_or_default();
        if wrong.is_empty() {
            wrong.extend(spec.complete_inputs(&mut inputs).err().unwrap_or_default());
            if wrong.is_empty() {
                wrong.extend(built.missing_inputs(&inputs));
            }
        }
        for e in wrong {
            errors.push(DatasetError {
                file: dataset.file.clone(),
                line: case.line,
                message: format!("case `{}`: {e}", case.id),
            });
        }
        out.push(inputs);
    }
    if errors.is_empty() { Ok(out) } else { Err(DatasetErrors { errors }) }
}

/// One run finished, for a progress line (`[12/40] case-7 PASS`).
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Runs finished so far, this one included.
    pub done: usize,
    /// Runs in all (cases × repeats).
    pub total: usize,
    /// The case's id.
    pub case: &'a str,
    /// The repeat, 1-based.
    pub repeat: u32,
    /// Whether the run passed.
    pub passed: bool,
}

/// What the cases' model and tool calls are recorded on or answered from (SPEC.md §5 for a dataset:
/// `agentic eval --record FILE` / `--replay FILE`). One recording holds every case's calls, each line naming
/// its case (`<case id>`, `<case id>#k` for repeat k ≥ 2).
#[derive(Debug)]
#[non_exhaustive]
pub enum CaseCalls {
    /// Each run records its calls ([`CaseCalls::recorded`]).
    Record(Mutex<Vec<RecordedCall>>),
    /// Each run is answered from the calls recorded for its case (repeat k from `<id>#k`, else from `<id>`); a
    /// case the recording does not hold fails at its first call (strict) or calls for real (lenient).
    Replay {
        /// The recorded calls by case.
        by_case: HashMap<String, Vec<RecordedCall>>,
        /// What a call that differs does.
        mode: ReplayMode,
    },
}

impl CaseCalls {
    /// Records every case's calls.
    pub fn record() -> Self {
        CaseCalls::Record(Mutex::new(Vec::new()))
    }

    /// Answers the cases from `calls` (a recording written by `--record`; a line without a case is no case's).
    pub fn replay(calls: Vec<RecordedCall>, mode: ReplayMode) -> Self {
        let mut by_case: HashMap<String, Vec<RecordedCall>> = HashMap::new();
        for call in calls {
            by_case.entry(call.case.clone().unwrap_or_default()).or_default().push(call);
        }
        CaseCalls::Replay { by_case, mode }
    }

    /// The tape of the run labelled `label` (`id` or `id#k`) of case `id`.
    fn tape(&self, label: &str, id: &str) -> Arc<CallTape> {
        match self {
            CaseCalls::Record(_) => Arc::new(CallTape::recording()),
            CaseCalls::Replay { by_case, mode } => {
                let calls = by_case.get(label).or_else(|| by_case.get(id)).cloned().unwrap_or_default();
                Arc::new(CallTape::replaying(calls, *mode))
            }
        }
    }

    /// Keeps what the run labelled `label` recorded on `tape`.
    fn keep(&self, label: &str, tape: &CallTape) {
        if let CaseCalls::Record(all) = self {
            let mut calls = tape.recorded();
            for call in &mut calls {
                call.case = Some(label.to_string());
            }
            lock(all).extend(calls);
        }
    }

    /// The calls recorded so far, each naming its case, in the order their runs ended.
    pub fn recorded(&self) -> Vec<RecordedCall> {
        match self {
            CaseCalls::Record(all) => lock(all).clone(),
            CaseCalls::Replay { .. } => Vec::new(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs an evaluation's cases on a built spec, in a store.
#[derive(Clone)]
pub struct Runner {
    /// The spec, built once: every run invokes its root (a `scripted` model's replies are shared by the runs,
    /// in the order they ask).
    pub built: BuiltSpec,
    /// The store the runs are kept in.
    pub store: StoreRef,
    /// The evaluators.
    pub evaluators: Arc<Vec<Evaluator>>,
    /// The models of the `judge` evaluators.
    pub judges: Judges,
    /// The evaluation's id (in the run names).
    pub eval_id: String,
    /// Runs per case (≥ 1).
    pub repeat: u32,
    /// Runs at once (≥ 1).
    pub concurrency: usize,
    /// The hash of the spec text archived in the store ([`agentic_engine::CheckpointStore::put_spec`]), so
    /// that `resume`, `fork` and `report` rebuild the runs from it.
    pub spec_hash: Option<String>,
    /// The spec file's path, recorded with each run.
    pub source: Option<String>,
    /// Where the runs' calls are recorded or answered from (`None`: every call is made).
    pub calls: Option<Arc<CaseCalls>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("spec", &self.built.name)
            .field("evaluators", &self.evaluators.len())
            .field("judges", &self.judges)
            .field("eval_id", &self.eval_id)
            .field("repeat", &self.repeat)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// Runs every case `repeat` times, `concurrency` runs at once, in dataset order (with `concurrency` 1,
    /// one after the other: case 1's repeats, then case 2's, ...); `inputs` are the cases' inputs
    /// ([`case_inputs`]). Calls `progress` as each run ends. Returns each case's runs, in dataset order.
    pub async fn run(
        &self,
        cases: &[Case],
        inputs: &[Map<String, Value>],
        progress: impl Fn(Progress<'_>),
    ) -> Vec<CaseRuns> {
        let repeat = self.repeat.max(1);
        let jobs: Vec<(usize, u32)> = (0..cases.len()).flat_map(|i| (1..=repeat).map(move |k| (i, k))).collect();
        let total = jobs.len();
        let mut runs: Vec<Vec<Option<(RepeatResult, String, RunUsage)>>> =
            cases.iter().map(|_| vec![None; repeat as usize]).collect();
        let mut stream = futures::stream::iter(jobs)
            .map(|(i, k)| async move {
                let empty = Map::new();
                let case_inputs = inputs.get(i).unwrap_or(&empty);
                (i, k, self.run_once(&cases[i], case_inputs, k).await)
            })
            .buffer_unordered(self.concurrency.max(1));
        let mut done = 0;
        while let Some((i, k, run)) = stream.next().await {
            done += 1;
            progress(Progress { done, total, case: &cases[i].id, repeat: k, passed: run.0.passed });
            if let Some(slot) = runs.get_mut(i).and_then(|r| r.get_mut(k as usize - 1)) {
                *slot = Some(run);
            }
        }
        cases
            .iter()
            .zip(runs)
            .map(|(case, runs)| CaseRuns {
                id: case.id.clone(),
                inputs: case.inputs.clone(),
                expected: case.expected.clone(),
                runs: runs.into_iter().flatten().collect(),
            })
            .collect()
    }

    /// The invocation of repeat `k` (1-based) of `case` with `inputs` ([`case_inputs`]) as run `run_id`: the
    /// spec's root in the store, async durability, named [`run_name`], with the spec's hash and source and the
    /// case's answers; its calls' tape is added by the caller.
    pub fn request(&self, case: &Case, inputs: &Map<String, Value>, k: u32, run_id: &str) -> InvokeRequest {
        let mut request = self
            .built
            .root
            .invoke()
            .inputs(inputs.clone())
            .memory_id(run_id)
            .durability(Durability::Async)
            .store_ref(self.store.clone())
            .run_name(run_name(&self.eval_id, &case.id, k));
        if let Some(hash) = &self.spec_hash {
            request = request.spec_hash(hash.clone());
        }
        if let Some(source) = &self.source {
            request = request.source(source.clone());
        }
        for (id, answer) in &case.answers {
            request = request.answer(id.clone(), answer.clone());
        }
        request
    }

    /// Repeat `k` of `case`: the run, what it gave, and what the evaluators say of it.
    async fn run_once(&self, case: &Case, inputs: &Map<String, Value>, k: u32) -> (RepeatResult, String, RunUsage) {
        let run_id = uuid::Uuid::new_v4().to_string();
        let mut request = self.request(case, inputs, k, &run_id);
        let label = if k > 1 { format!("{}#{k}", case.id) } else { case.id.clone() };
        let tape = self.calls.as_ref().map(|calls| calls.tape(&label, &case.id));
        if let Some(tape) = &tape {
            request = request.call_tape(tape.clone());
        }
        // The case's span: the parent of its run's `invoke_workflow` span, and where its evaluation results
        // are reported (`gen_ai.evaluation.result` events).
        let span = tracing::info_span!(
            "evaluate",
            "otel.name" = format_args!("evaluate {label}"),
            "gen_ai.operation.name" = "evaluate",
            "agentic.eval.id" = self.eval_id.as_str(),
            "agentic.eval.case" = label.as_str(),
            "agentic.run_id" = run_id.as_str(),
            "agentic.eval.passed" = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = tracing::Instrument::instrument(request.into_future(), span.clone()).await;
        if let (Some(calls), Some(tape)) = (&self.calls, &tape) {
            calls.keep(&label, tape);
        }
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (output, error, status) = match &result {
            Ok(outcome) => match &outcome.result {
                RunResult::Completed(output) => (output.clone(), None, RunStatus::Completed),
                RunResult::Suspended { pending } => (Value::Null, Some(suspended(pending)), RunStatus::Suspended),
                _ => (Value::Null, Some("the run was drained before it ended".to_string()), RunStatus::Running),
            },
            Err(AgentError::Cancelled) => {
                (Value::Null, Some("the run was cancelled".to_string()), RunStatus::Cancelled)
            }
            Err(e) => (Value::Null, Some(format!("the run failed: {e}")), RunStatus::Failed),
        };
        // A completed run is observed from its scope; one that did not complete (its usage counts the calls of
        // invocations it stopped in) from the store.
        let (state, trajectory, usage) = match &result {
            Ok(outcome) if error.is_none() => observed(outcome).await,
            _ => read_back(&self.store, &run_id).await,
        };
        let seen = Observation {
            output: output.clone(),
            expected: case.expected.clone(),
            inputs: inputs.clone(),
            state,
            trajectory,
            usage: usage.clone(),
            latency_ms,
        };
        let results = match &error {
            None => Evaluator::evaluate_all(&self.evaluators, &seen, &self.judges).await,
            // A run that did not complete fails every evaluator, with its reason.
            Some(why) => self
                .evaluators
                .iter()
                .map(|evaluator| EvalResult {
                    evaluator: evaluator.name.clone(),
                    kind: evaluator.check.kind().to_string(),
                    passed: false,
                    score: 0.0,
                    reason: Some(why.clone()),
                })
                .collect(),
        };
        let passed = error.is_none() && results.iter().all(|r| r.passed);
        if !span.is_disabled() {
            for r in &results {
                tracing::info!(
                    parent: &span,
                    gen_ai.evaluation.name = r.evaluator.as_str(),
                    gen_ai.evaluation.score.value = r.score,
                    gen_ai.evaluation.score.label = if r.passed { "pass" } else { "fail" },
                    gen_ai.evaluation.explanation = r.reason.as_deref(),
                    agentic.eval.kind = r.kind.as_str(),
                    "gen_ai.evaluation.result"
                );
            }
            span.record("agentic.eval.passed", passed);
        }
        let repeat = RepeatResult { run_id, passed, results, output, error, latency_ms };
        (repeat, status.to_string(), usage)
    }
}

/// The final state, the trajectory (agent names in the order their invocations started) and the usage of run
/// `run_id`, from the store (empty when it cannot be read): what a case's run gave when it did not complete
/// (its usage counts the calls of the invocations it stopped in).
pub async fn read_back(store: &StoreRef, run_id: &str) -> (Map<String, Value>, Vec<String>, RunUsage) {
    let Ok(image) = store.load_dyn(run_id).await else { return Default::default() };
    let pending = match store.run_dyn(run_id).await {
        Ok(Some(record)) => record.pending,
        _ => Vec::new(),
    };
    let usage = RunUsage::from(&agentic_engine::budget::usage_total(&image, &pending));
    (image.state, InvocationRecord::trajectory(&image.history), usage)
}

/// What a run gave, as [`read_back`] reads it from the store, from the run itself: its final state, trajectory
/// and usage (the same values for a run that completed), without reading the store.
pub async fn observed(outcome: &RunOutcome) -> (Map<String, Value>, Vec<String>, RunUsage) {
    let trajectory = outcome.trajectory().await.unwrap_or_default();
    let usage = RunUsage::from(&outcome.usage().await.unwrap_or_default());
    (outcome.state().to_map(), trajectory, usage)
}

/// Why a suspended run fails its case: `the run suspended: pending response approve_order`.
fn suspended(pending: &[PendingResponse]) -> String {
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    match ids.as_slice() {
        [] => "the run suspended".to_string(),
        [one] => format!("the run suspended: pending response {one}"),
        many => format!("the run suspended: pending responses {}", many.join(", ")),
    }
}

/// Which stored runs [`export`] writes.
#[derive(Debug, Clone, Default)]
pub struct ExportFilter {
    /// Only runs of the spec (the run's name) so named.
    pub spec: Option<String>,
    /// Only runs in this status (`None`: completed).
    pub status: Option<RunStatus>,
    /// At most this many, the most recent (`None`: all).
    pub limit: Option<usize>,
}

/// Stored runs as dataset lines (`agentic eval export`, SPEC.md §6): `{"id": <run id>, "inputs": <the run's
/// inputs>, "expected": <its output>, "metadata": {"name", "status", "created_at"}}`, oldest first. A run's
/// inputs are those of its first turn; a run that did not complete has no `expected`.
///
/// # Errors
/// The store cannot be read.
pub async fn export(store: &StoreRef, filter: &ExportFilter) -> Result<Vec<Value>, StoreError> {
    let status = filter.status.unwrap_or(RunStatus::Completed);
    let mut runs: Vec<agentic_engine::RunRecord> = store
        .runs_dyn()
        .await?
        .into_iter()
        .filter(|r| r.status == status && filter.spec.as_deref().is_none_or(|s| r.name == s))
        .collect();
    runs.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then_with(|| a.run_id.cmp(&b.run_id)));
    if let Some(limit) = filter.limit {
        runs.truncate(limit);
    }
    runs.reverse();
    let mut lines = Vec::with_capacity(runs.len());
    for run in runs {
        let records = store.records_dyn(&run.run_id).await?;
        let mut inputs = Map::new();
        if let Some(first) = records.iter().find(|r| r.agent_path == agentic_engine::INPUTS_PATH) {
            for (key, value) in &first.delta {
                if value.is_null() {
                    inputs.remove(key);
                } else {
                    inputs.insert(key.clone(), value.clone());
                }
            }
        }
        let metadata = json!({
            "name": run.name,
            "status": run.status.to_string(),
            "created_at": agentic_engine::rfc3339_ms(run.created_at_ms),
        });
        let mut line = json!({"id": run.run_id, "inputs": inputs});
        if run.status == RunStatus::Completed {
            line["expected"] = run.detail.clone();
        }
        line["metadata"] = metadata;
        lines.push(line);
    }
    Ok(lines)
}
