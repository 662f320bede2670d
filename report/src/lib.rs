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
//! Every string that comes from a model, a human or the state is escaped: the page template is rendered by
//! minijinja with HTML auto-escaping, the SVG is built with explicit escaping, and the data the page's script
//! reads is JSON inside `<script type="application/json">` with `<`, `>` and `&` escaped, displayed with
//! `textContent` only.

mod escape;
mod model;
mod page;
mod topology;

use std::path::{Path, PathBuf};

use agentic_engine::{RunRecord, StepRecord, StoreError, StoreRef, TopologyNode};

/// Why a report could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The store has no run with this id.
    #[error("no run `{0}` in the store")]
    NoRun(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The report file could not be written.
    #[error("cannot write the report to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

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
