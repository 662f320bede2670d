//! The results document of an evaluation (SPEC.md §6: what `--json` prints and `--out` writes), its summary,
//! the comparison with a baseline and the exit gate.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What one evaluator said of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    /// The evaluator's name.
    pub evaluator: String,
    /// Its kind (`equals`, `judge`, ...).
    pub kind: String,
    /// Whether it passed.
    pub passed: bool,
    /// The score: 1 or 0 for boolean evaluators, the score in 0–1 of `expression` and `judge`.
    pub score: f64,
    /// Why it failed (`output "billing" != expected "refund"`); a judge's reason also when it passed; `null`
    /// when there is nothing to say.
    pub reason: Option<String>,
}

/// What a run spent on models.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Model calls.
    pub model_calls: u64,
    /// Cost in USD; `null` when no model called has prices.
    pub cost_usd: Option<f64>,
}

impl From<&agentic_engine::budget::Usage> for RunUsage {
    /// The tokens, calls and cost of a run's model usage.
    fn from(u: &agentic_engine::budget::Usage) -> Self {
        RunUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            model_calls: u.model_calls,
            cost_usd: u.cost_usd,
        }
    }
}

impl RunUsage {
    /// The sum of `self` and `other`.
    pub fn plus(&self, other: &RunUsage) -> RunUsage {
        RunUsage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            model_calls: self.model_calls + other.model_calls,
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (None, None) => None,
                (a, b) => Some(round_cost(a.unwrap_or_default() + b.unwrap_or_default())),
            },
        }
    }
}

/// One run of a case (one repeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatResult {
    /// The run's id in the store.
    pub run_id: String,
    /// Whether every evaluator passed (and the run completed).
    pub passed: bool,
    /// What each evaluator said.
    pub results: Vec<EvalResult>,
    /// The run's output (`null` when it did not complete).
    pub output: Value,
    /// Why the run did not complete (`the run suspended: pending response approve_order`), else `null`.
    pub error: Option<String>,
    /// How long the run took, in milliseconds.
    pub latency_ms: u64,
}

/// One case of the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case's id.
    pub id: String,
    /// Whether the case passed: its run passed every evaluator (with `--repeat N`: at least one of its runs
    /// did, pass@N).
    pub passed: bool,
    /// What each evaluator said of the case's run (with `--repeat N`: of its first run that passed, else of
    /// its first run).
    pub results: Vec<EvalResult>,
    /// That run's id.
    pub run_id: String,
    /// The case's inputs.
    pub inputs: Map<String, Value>,
    /// The case's expected value (`null` when it has none).
    pub expected: Value,
    /// That run's output.
    pub output: Value,
    /// Why that run did not complete, else `null`.
    pub error: Option<String>,
    /// That run's status: `completed`, `suspended`, `failed`, `cancelled` (`running` when it was drained).
    pub status: String,
    /// That run's duration, in milliseconds.
    pub latency_ms: u64,
    /// What that run spent on models.
    pub usage: RunUsage,
    /// Every run of the case, in order (only with `--repeat` above 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<RepeatResult>,
    /// Whether at least one of the case's runs passed.
    pub pass_at_n: bool,
    /// The share of the case's runs that passed, 0–1.
    pub passed_share: f64,
    /// Whether some but not all of the case's runs passed.
    pub flaky: bool,
}

/// Input and output tokens of a whole evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens, every run.
    pub input: u64,
    /// Output tokens, every run.
    pub output: u64,
}

/// Latency percentiles over every run, in milliseconds (nearest rank).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// The median.
    pub p50: u64,
    /// The 95th percentile.
    pub p95: u64,
}

/// The summary of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Cases.
    pub cases: usize,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// `passed / cases`.
    pub pass_rate: f64,
    /// `--min-pass`, when given.
    pub min_pass: Option<f64>,
    /// The mean score of each evaluator over every run, by evaluator name, in evaluator order.
    pub mean_scores: Map<String, Value>,
    /// Tokens over every run.
    pub tokens: Tokens,
    /// Cost in USD over every run; `null` when no model called has prices.
    pub cost_usd: Option<f64>,
    /// Latency over every run.
    pub latency_ms: Latency,
    /// The cases that passed in `--baseline` and fail now, by id.
    pub regressions: Vec<String>,
    /// The cases some but not all of whose runs passed, by id.
    pub flaky: Vec<String>,
}

/// The results document (`--json`, `--out`; the HTML page reads it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResults {
    /// The evaluation's id: its runs are named `eval:<eval_id>:<case id>` (`#k` for the k-th repeat, k ≥ 2).
    pub eval_id: String,
    /// The spec's name.
    pub spec: String,
    /// The spec file as given.
    pub spec_file: String,
    /// The dataset file as given.
    pub dataset: String,
    /// When the evaluation started (RFC 3339).
    pub created_at: String,
    /// Runs per case (`--repeat`).
    pub repeat: u32,
    /// Every case, in dataset order.
    pub cases: Vec<CaseResult>,
    /// The summary.
    pub summary: Summary,
}

/// The runs of one case, as the runner made them, before they are summed up into a [`CaseResult`].
#[derive(Debug, Clone, PartialEq)]
pub struct CaseRuns {
    /// The case's id.
    pub id: String,
    /// The case's inputs.
    pub inputs: Map<String, Value>,
    /// The case's expected value.
    pub expected: Option<Value>,
    /// Each run, in repeat order, with its status and usage.
    pub runs: Vec<(RepeatResult, String, RunUsage)>,
}

impl CaseRuns {
    /// The case's result: passed when one of its runs passed; its fields from the first run that passed,
    /// else from the first run; `repeats` listed when there was more than one run.
    pub fn into_result(self) -> CaseResult {
        let n = self.runs.len();
        let passed_runs = self.runs.iter().filter(|(r, _, _)| r.passed).count();
        let chosen = self.runs.iter().position(|(r, _, _)| r.passed).unwrap_or(0);
        let repeats: Vec<RepeatResult> =
            if n > 1 { self.runs.iter().map(|(r, _, _)| r.clone()).collect() } else { Vec::new() };
        let (run, status, usage) = self.runs.into_iter().nth(chosen).unwrap_or_else(|| {
            let none = RepeatResult {
                run_id: String::new(),
                passed: false,
                results: Vec::new(),
                output: Value::Null,
                error: Some("the case did not run".to_string()),
                latency_ms: 0,
            };
            (none, "failed".to_string(), RunUsage::default())
        });
        CaseResult {
            id: self.id,
            passed: passed_runs > 0,
            results: run.results,
            run_id: run.run_id,
            inputs: self.inputs,
            expected: self.expected.unwrap_or(Value::Null),
            output: run.output,
            error: run.error,
            status,
            latency_ms: run.latency_ms,
            usage,
            repeats,
            pass_at_n: passed_runs > 0,
            passed_share: if n == 0 { 0.0 } else { passed_runs as f64 / n as f64 },
            flaky: passed_runs > 0 && passed_runs < n,
        }
    }
}

/// Sums up the cases: counts, pass rate, mean scores per evaluator (`evaluators`, in order) over every run,
/// tokens, cost and latency over every run, and the flaky cases. `regressions` is left empty
/// ([`EvalResults::compare`] fills it). `runs` holds every run's usage and latency.
pub fn summarize(
    cases: &[CaseResult],
    runs: &[(RunUsage, u64)],
    evaluators: &[String],
    min_pass: Option<f64>,
) -> Summary {
    let passed = cases.iter().filter(|c| c.passed).count();
    let mut mean_scores = Map::new();
    for name in evaluators {
        let scores: Vec<f64> = cases
            .iter()
            .flat_map(|c| {
                let all: Vec<&Vec<EvalResult>> = if c.repeats.is_empty() {
                    vec![&c.results]
                } else {
                    c.repeats.iter().map(|r| &r.results).collect()
                };
                all.into_iter()
                    .flat_map(|rs| rs.iter().filter(|r| r.evaluator == *name).map(|r| r.score))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mean = if scores.is_empty() { 0.0 } else { scores.iter().sum::<f64>() / scores.len() as f64 };
        mean_scores.insert(name.clone(), Value::from(round_score(mean)));
    }
    let usage = runs.iter().fold(RunUsage::default(), |sum, (u, _)| sum.plus(u));
    let mut latencies: Vec<u64> = runs.iter().map(|(_, l)| *l).collect();
    latencies.sort_unstable();
    Summary {
        cases: cases.len(),
        passed,
        failed: cases.len() - passed,
        pass_rate: if cases.is_empty() { 0.0 } else { round_score(passed as f64 / cases.len() as f64) },
        min_pass,
        mean_scores,
        tokens: Tokens { input: usage.input_tokens, output: usage.output_tokens },
        cost_usd: usage.cost_usd,
        latency_ms: Latency { p50: percentile(&latencies, 50), p95: percentile(&latencies, 95) },
        regressions: Vec::new(),
        flaky: cases.iter().filter(|c| c.flaky).map(|c| c.id.clone()).collect(),
    }
}

/// The `p`-th percentile of sorted `values` by nearest rank (0 for none).
fn percentile(sorted: &[u64], p: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p as usize * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

/// A score or rate rounded to 4 decimals (means of floats are not exact).
fn round_score(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// A cost rounded to a billionth of a dollar.
fn round_cost(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// The cases of a baseline results document: id and whether it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The file as given.
    pub file: String,
    /// `(case id, passed)`, in the baseline's order.
    pub cases: Vec<(String, bool)>,
}

impl Baseline {
    /// Reads a results document written by `agentic eval --out` (only `cases[].id` and `cases[].passed` are
    /// read).
    ///
    /// # Errors
    /// The file cannot be read, is not JSON, or lacks `cases` with an `id` and `passed` each; the message
    /// names the file and the field.
    pub fn read(path: &Path) -> Result<Baseline, String> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
        Baseline::parse(&text, &file)
    }

    /// [`Baseline::read`] on the text of the file `file`.
    ///
    /// # Errors
    /// As [`Baseline::read`].
    pub fn parse(text: &str, file: &str) -> Result<Baseline, String> {
        let doc: Value =
            serde_json::from_str(text).map_err(|e| format!("{file}: not a results document (invalid JSON: {e})"))?;
        let cases = doc
            .get("cases")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{file}: not a results document (no `cases` list)"))?;
        let mut out = Vec::with_capacity(cases.len());
        for (i, c) in cases.iter().enumerate() {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{file}: `cases[{i}].id` is not a string"))?;
            let passed = c
                .get("passed")
                .and_then(Value::as_bool)
                .ok_or_else(|| format!("{file}: `cases[{i}].passed` is not a boolean"))?;
            out.push((id.to_string(), passed));
        }
        Ok(Baseline { file: file.to_string(), cases: out })
    }
}

impl EvalResults {
    /// Fills `summary.regressions`: the cases that passed in `baseline` and fail now, in this document's
    /// order (a case the baseline lacks is no regression).
    pub fn compare(&mut self, baseline: &Baseline) {
        self.summary.regressions = self
            .cases
            .iter()
            .filter(|c| !c.passed && baseline.cases.iter().any(|(id, passed)| *id == c.id && *passed))
            .map(|c| c.id.clone())
            .collect();
    }

    /// Whether the evaluation passes its gate (SPEC.md §6): every case passed, or the pass rate is at least
    /// `min_pass`; and no regression against the baseline. The exit code is 0 when it does, else 1.
    pub fn gate_passes(&self) -> bool {
        let s = &self.summary;
        let rate_ok = s.failed == 0 || s.min_pass.is_some_and(|m| s.pass_rate >= m);
        rate_ok && s.regressions.is_empty()
    }

    /// The document as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(passed: bool, id: &str, score: f64, latency_ms: u64) -> (RepeatResult, String, RunUsage) {
        let result = EvalResult {
            evaluator: "category".to_string(),
            kind: "equals".to_string(),
            passed,
            score,
            reason: (!passed).then(|| "no".to_string()),
        };
        let repeat = RepeatResult {
            run_id: id.to_string(),
            passed,
            results: vec![result],
            output: json!(id),
            error: None,
            latency_ms,
        };
        (
            repeat,
            "completed".to_string(),
            RunUsage { input_tokens: 10, output_tokens: 5, model_calls: 1, cost_usd: None },
        )
    }

    fn case(id: &str, runs: Vec<(RepeatResult, String, RunUsage)>) -> CaseResult {
        CaseRuns { id: id.to_string(), inputs: Map::new(), expected: Some(json!("x")), runs }.into_result()
    }

    #[test]
    fn a_case_of_several_runs_is_pass_at_n_and_flaky_when_some_pass() {
        let c = case("a", vec![run(false, "r1", 0.0, 5), run(true, "r2", 1.0, 7), run(false, "r3", 0.0, 9)]);
        assert!(c.passed && c.pass_at_n && c.flaky);
        assert_eq!(c.run_id, "r2", "the first run that passed");
        assert_eq!(c.repeats.len(), 3);
        assert!((c.passed_share - 1.0 / 3.0).abs() < 1e-9);
        let one = case("b", vec![run(false, "r4", 0.0, 1)]);
        assert!(!one.passed && !one.flaky && one.repeats.is_empty());
        assert_eq!(one.passed_share, 0.0);
        let doc = serde_json::to_value(&one).unwrap();
        assert!(doc.get("repeats").is_none(), "no repeats with one run: {doc}");
    }

    #[test]
    fn the_summary_counts_every_run() {
        let cases = vec![
            case("a", vec![run(true, "r1", 1.0, 10)]),
            case("b", vec![run(false, "r2", 0.0, 30)]),
            case("c", vec![run(true, "r3", 1.0, 20)]),
        ];
        let runs: Vec<(RunUsage, u64)> = [10, 30, 20]
            .iter()
            .map(|l| (RunUsage { input_tokens: 10, output_tokens: 5, model_calls: 1, cost_usd: Some(0.001) }, *l))
            .collect();
        let s = summarize(&cases, &runs, &["category".to_string()], Some(0.5));
        assert_eq!((s.cases, s.passed, s.failed, s.pass_rate), (3, 2, 1, 0.6667));
        assert_eq!(s.mean_scores, json!({"category": 0.6667}).as_object().cloned().unwrap());
        assert_eq!(s.tokens, Tokens { input: 30, output: 15 });
        assert_eq!(s.cost_usd, Some(0.003));
        assert_eq!(s.latency_ms, Latency { p50: 20, p95: 30 });
        let mut results = EvalResults {
            eval_id: "e".to_string(),
            spec: "s".to_string(),
            spec_file: "s.yaml".to_string(),
            dataset: "d.jsonl".to_string(),
            created_at: "2026-12-06T00:00:00Z".to_string(),
            repeat: 1,
            cases,
            summary: s,
        };
        assert!(results.gate_passes(), "2/3 reaches --min-pass 0.5");
        results.summary.min_pass = Some(0.7);
        assert!(!results.gate_passes());
        results.summary.min_pass = Some(0.5);
        let baseline =
            Baseline::parse(r#"{"cases": [{"id": "b", "passed": true}, {"id": "a", "passed": true}]}"#, "b.json")
                .unwrap();
        results.compare(&baseline);
        assert_eq!(results.summary.regressions, ["b"]);
        assert!(!results.gate_passes(), "a regression fails the gate whatever the pass rate");
    }

    #[test]
    fn a_baseline_that_is_no_results_document_is_refused() {
        assert_eq!(Baseline::parse("{}", "b.json").unwrap_err(), "b.json: not a results document (no `cases` list)");
        assert_eq!(
            Baseline::parse(r#"{"cases": [{"id": "a", "passed": "yes"}]}"#, "b.json").unwrap_err(),
            "b.json: `cases[0].passed` is not a boolean"
        );
        assert!(
            Baseline::parse("nope", "b.json").unwrap_err().starts_with("b.json: not a results document (invalid JSON")
        );
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        assert_eq!(percentile(&[], 50), 0);
        assert_eq!(percentile(&[7], 95), 7);
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!((percentile(&v, 50), percentile(&v, 95)), (10, 19));
    }
}
