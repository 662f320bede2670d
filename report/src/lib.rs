//! # agentic-report
//!
//! Self-contained HTML reports of `agentic` runs and workflow topologies: one file, no network access, inline
//! CSS, SVG and JavaScript, readable offline.
//!
//! A run report shows the topology (the agent tree with kinds, input and output keys, and the data flow
//! between keys), the run's status and duration, a timeline in which parallel branches overlap and waiting
//! periods (suspensions) are collapsed, the milestones (starts, suspensions with what was pending,
//! resumptions with the human answers, forks, endings), a forked run's lineage (the run and step it was
//! forked from), tokens per agent and per run, errors with the failing agent's path, and every step with its
//! inputs, output, state diff (replayed from the journal's deltas) and the planner's decision. The page is rendered deterministically from the stored data: rendering the same
//! run twice, in any process, gives the same bytes.
//!
//! ```no_run
//! # async fn demo(store: agentic_engine::StoreRef, system: agentic_engine::AgentRef) -> Result<(), agentic_report::ReportError> {
//! let html = agentic_report::report_from_store(&store, "order-1", Some(&system.topology())).await?;
//! agentic_report::write_report("order-1.html", &html)?;
//! # Ok(()) }
//! ```
//!
//! Without a store, the same page comes from the in-process [`AgentMonitor`]
//! ([`report_from_monitor`]): every invocation with its inputs, output, error, attempt, timing and tokens,
//! failed attempts, the milestones and the result; not the state diffs nor the planners' decisions, which
//! only the journal holds.
//!
//! ```no_run
//! # async fn demo(system: agentic_engine::AgentRef) -> Result<(), Box<dyn std::error::Error>> {
//! use agentic_engine::AgentMonitor;
//! let monitor = AgentMonitor::new();
//! system.invoke().memory_id("order-1").listener(monitor.clone()).await?;
//! let html = agentic_report::report_from_monitor(&monitor, "order-1", Some(&system.topology()))?;
//! agentic_report::write_report("order-1.html", &html)?;
//! # Ok(()) }
//! ```
//!
//! The page of an evaluation (`agentic eval --report`) comes from its results document, what
//! `agentic eval --out` writes ([`eval_report`]): the pass rate, the regressions and flaky cases, a table of
//! cases × evaluators with a filter, and per case its inputs, its output as a line diff against the expected
//! value, its repeats and a link to its run's report ([`RunLinks`]).
//!
//! ```no_run
//! # fn demo(results: serde_json::Value) -> Result<(), agentic_report::ReportError> {
//! use agentic_report::{RunLinks, eval_report, write_report};
//! let html = eval_report(&results, Some(&RunLinks::Files { dir: "runs".into() }))?;
//! write_report("eval.html", &html)?;
//! # Ok(()) }
//! ```
//!
//! Every string that comes from a model, a human, a dataset or the state is escaped: the page template is rendered by
//! minijinja with HTML auto-escaping, the SVG is built with explicit escaping, and the data the page's script
//! reads is JSON inside `<script type="application/json">` with `<`, `>` and `&` escaped, displayed with
//! `textContent` only.
//!
//! Public surface: the modules are private and every public item is defined or re-exported here, at one
//! path.

mod escape;
mod eval;
mod model;
mod monitor;
mod page;
mod topology;

use std::path::{Path, PathBuf};

pub use eval::{RunLinks, eval_report, run_report_file, url_segment};

use agentic_engine::{AgentMonitor, MonitoredSession, RunRecord, StepRecord, StoreError, StoreRef, TopologyNode};

/// Why a report could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The store has no run with this id.
    #[error("no run `{0}` in the store")]
    NoRun(String),
    /// The monitor keeps no session with this id (never seen, or dropped by its retention).
    #[error(
        "the monitor keeps no session `{run_id}` ({}; ended sessions beyond its retention are dropped)",
        kept_list(.kept)
    )]
    NotMonitored {
        /// The memory id asked for.
        run_id: String,
        /// The ids of the sessions it keeps, sorted.
        kept: Vec<String>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An evaluation's results document (`agentic eval --out`) lacks a field the page needs, or has it with
    /// another type.
    #[error(
        "the evaluation results {}",
        match .found {
            Some(found) => format!("have `{field}` as {found}, not {expected}"),
            None => format!("have no `{field}` ({expected})"),
        }
    )]
    BadResults {
        /// The field's path in the document, e.g. `cases[1].id` or `summary.pass_rate`.
        field: String,
        /// What it should be: `a string`, `a boolean`, `a number`, `an array`, `an object`.
        expected: &'static str,
        /// What it is instead, when it is there (`null` counts as absent).
        found: Option<&'static str>,
    },
    /// The report file could not be written.
    #[error("cannot write the report to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// ``it keeps `a`, `b` `` or `it keeps none`, for [`ReportError::NotMonitored`].
fn kept_list(ids: &[String]) -> String {
    if ids.is_empty() {
        return "it keeps none".to_string();
    }
    let list: Vec<String> = ids.iter().map(|i| format!("`{i}`")).collect();
    format!("it keeps {}", list.join(", "))
}

/// What the header of a report rendered from the monitor says of its origin.
const MONITOR_ORIGIN: &str = "from the in-process monitor: invocations, no state diffs";

/// Renders the report of a run: `topology` is the system that ran it (`AgentRef::topology()`), `run` its
/// record and `records` its journal in sequence order (`CheckpointStore::records`).
pub fn render_run(topology: &TopologyNode, run: &RunRecord, records: &[StepRecord]) -> String {
    page::run_page(Some(topology), None, run, records)
}

/// Renders the report of a run whose topology is unknown (e.g. the spec file is gone); `reason` is shown in
/// the report where the topology diagram would be.
pub fn render_run_without_topology(run: &RunRecord, records: &[StepRecord], reason: &str) -> String {
    page::run_page(None, Some(reason), run, records)
}

/// Renders the report of a session recorded by the in-process monitor ([`AgentMonitor::session`]) with the
/// renderer of [`render_run`]: one step per invocation that ended, in the order they ended, failed attempts
/// marked and listed with their errors, retries counted, suspensions and resumptions on the timeline, the
/// status with the result or the error. `topology` is the system that ran it (`AgentRef::topology()`); without
/// it the report says the topology is missing. The monitor sees no state writes: the steps show inputs and
/// outputs, no state diff and no planner decision (a store's report has them).
pub fn render_monitored(session: &MonitoredSession, topology: Option<&TopologyNode>) -> String {
    let (run, records, iterations) = monitor::run_of(session, topology);
    let reason = "the system's topology was not given to the report";
    let reason = topology.is_none().then_some(reason);
    page::monitor_page(topology, reason, &run, &records, &iterations, MONITOR_ORIGIN)
}

/// Renders the report of run `run_id` (its memory id) straight from the in-process monitor, without a store:
/// [`render_monitored`] of the session it keeps.
///
/// # Errors
/// [`ReportError::NotMonitored`] when the monitor keeps no session `run_id`, listing the ones it keeps.
pub fn report_from_monitor(
    monitor: &AgentMonitor,
    run_id: &str,
    topology: Option<&TopologyNode>,
) -> Result<String, ReportError> {
    let session = monitor
        .session(run_id)
        .ok_or_else(|| ReportError::NotMonitored { run_id: run_id.to_string(), kept: monitor.run_ids() })?;
    Ok(render_monitored(&session, topology))
}

/// Renders a topology report: the agent tree and the data flow between keys, for a workflow named `name`.
pub fn render_topology(topology: &TopologyNode, name: &str) -> String {
    page::topology_page(topology, name)
}

/// Loads a run's record and journal from a store.
///
/// # Errors
/// [`ReportError::NoRun`] when the run does not exist, [`ReportError::Store`] when the store fails.
pub async fn load_run(store: &StoreRef, run_id: &str) -> Result<(RunRecord, Vec<StepRecord>), ReportError> {
    let run = store.run_dyn(run_id).await?.ok_or_else(|| ReportError::NoRun(run_id.to_string()))?;
    let records = store.records_dyn(run_id).await?;
    Ok((run, records))
}

/// Loads a run from a store and renders its report; without a topology the report says it is missing.
///
/// # Errors
/// As [`load_run`].
pub async fn report_from_store(
    store: &StoreRef,
    run_id: &str,
    topology: Option<&TopologyNode>,
) -> Result<String, ReportError> {
    let (run, records) = load_run(store, run_id).await?;
    Ok(match topology {
        Some(t) => render_run(t, &run, &records),
        None => render_run_without_topology(&run, &records, "the system's topology was not given to the report"),
    })
}

/// Writes a rendered report to `path` (creating or replacing the file).
///
/// # Errors
/// [`ReportError::Write`] when the file cannot be written.
pub fn write_report(path: impl AsRef<Path>, html: &str) -> Result<(), ReportError> {
    let path = path.as_ref();
    std::fs::write(path, html).map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

/// Escapes text for HTML element content and attribute values (`&`, `<`, `>`, `"`, `'`).
pub fn escape_html(text: &str) -> String {
    escape::html(text)
}
