//! # agentic-eval
//!
//! Evaluation of a workflow spec over a dataset (SPEC.md §6; `agentic eval`): the dataset ([`Dataset`], JSON
//! lines `{"id", "inputs", "expected", "metadata"}`), the evaluators ([`Evaluator`]: `equals`, `contains`,
//! `regex`, `schema`, `expression`, `trajectory`, `judge`, `cost`, from the spec's `evals:` list or a file of
//! their own), the runs (each case an ordinary run in the store, [`Runner`]) and the results document
//! ([`EvalResults`]) with its summary, its comparison with a baseline and its gate.
//!
//! ```
//! use agentic_eval::{Dataset, Evaluator, Judges, Observation};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = agentic_spec::Spec::parse(
//!     r#"
//! version: 1
//! root: classify
//! agents:
//!   classify: { kind: compute, value: "'refund' if 'money' in ticket else 'billing'" }
//! evals:
//!   - { kind: equals, name: category }
//! "#,
//!     "tickets.yaml",
//! )?;
//! let evaluators = Evaluator::of_spec(&spec)?;
//! let dataset = Dataset::parse(r#"{"id": "t1", "inputs": {"ticket": "my money back"}, "expected": "refund"}"#, "t.jsonl")?;
//! let seen = Observation { output: "billing".into(), expected: dataset.cases[0].expected.clone(), ..Observation::default() };
//! let result = evaluators[0].evaluate(&seen, &Judges::default()).await;
//! assert_eq!(result.reason.as_deref(), Some(r#"output "billing" != expected "refund""#));
//! # Ok(()) }
//! ```
//!
//! Public surface: the modules are private and every public item is re-exported here.

mod dataset;
mod evaluator;
mod results;
mod runner;

pub use dataset::{Case, Dataset, DatasetError, DatasetErrors};
pub use evaluator::{Check, DEFAULT_THRESHOLD, Evaluator, Judges, KINDS, Observation, VARIABLES};
pub use results::{
    Baseline, CaseResult, CaseRuns, EvalResult, EvalResults, Latency, RepeatResult, RunUsage, Summary, Tokens,
    summarize,
};
pub use runner::{
    CaseCalls, ExportFilter, Progress, Runner, case_inputs, export, new_eval_id, observed, read_back, run_name,
};
