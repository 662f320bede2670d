//! The [`AgentMonitor`]: a listener that records every invocation of the runs it sees, per memory id, in
//! memory — inputs, output or error, attempt, start and end, tokens — and keeps the sessions that ended apart
//! by outcome (successful, failed, paused), each outcome with its own bounded retention, changeable while runs
//! go on. `agentic_report::report_from_monitor` renders a kept session with the same renderer as
//! `agentic report`, without a store.
//!
//! Idea from LangChain4j agentic's `AgentMonitor` (`successfulExecutions`, `failedExecutions`,
//! `setMaxRetainedSessions`, `clear`, a retention of 100 sessions per outcome by default); the paused outcome
//! (suspended or drained runs) and the milestones are ours.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{AgentListener, RunEvent};
use crate::journal::TokenUsage;
use crate::pending::PendingResponse;
use crate::store::{Milestone, MilestoneKind};

/// One invocation as the monitor records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitoredInvocation {
    /// Agent name.
    pub agent: String,
    /// Agent path.
    pub path: String,
    /// Attempt, 1-based.
    pub attempt: u32,
    /// Inputs.
    pub inputs: Map<String, Value>,
    /// Output, when finished.
    pub output: Option<Value>,
    /// Error message, when failed.
    pub error: Option<String>,
    /// Duration in microseconds, when ended.
    pub duration_us: Option<u64>,
    /// Tokens, when it called a model.
    pub tokens: Option<TokenUsage>,
    /// When it started: the monitor's clock when the start event arrived, microseconds since the Unix epoch.
    pub started_at_us: u64,
    /// When it finished or failed (the monitor's clock), microseconds since the Unix epoch; `None` while it
    /// runs, and for an invocation that suspended the run (a resumption starts it again).
    pub ended_at_us: Option<u64>,
    /// Its place among the session's ended invocations, 1-based, in the order they ended (a composite after
    /// the invocations below it): the step a store's journal would give it. `None` until it ends.
    pub step: Option<u64>,
}

impl MonitoredInvocation {
    /// Whether it ended with an error (a failed attempt, retried or not).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }
}

/// Status of a monitored session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Running.
    InProgress,
    /// Waiting for a human (not "in progress" forever).
    Suspended,
    /// Completed.
    Completed,
    /// Failed (or cancelled).
    Failed,
    /// Stopped by a drain; resuming the run continues the session.
    Drained,
}

/// What the monitor keeps about one memory id (a resumed run, or a new turn, continues the same session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitoredSession {
    /// Memory id.
    pub run_id: String,
    /// The name of the run's root agent (the system's), once it started.
    pub name: String,
    /// Status.
    pub status: SessionStatus,
    /// Invocations in start order.
    pub invocations: Vec<MonitoredInvocation>,
    /// How many invocations ended (finished or failed) so far.
    pub steps: u64,
    /// The run's result, when it completed.
    pub output: Option<Value>,
    /// The run's error message, when it failed.
    pub error: Option<String>,
    /// What the run waits for, while suspended.
    pub pending: Vec<PendingResponse>,
    /// Starts, resumptions, new turns, suspensions and endings, in order, as a store's run record keeps them
    /// (`started`, `resumed` with the answers, `new_turn`, `suspended` with the pending ids, `completed`,
    /// `failed` with the error, `interrupted` for a drain); `seq` is [`MonitoredSession::steps`] at the time.
    pub milestones: Vec<Milestone>,
    /// When the session started, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// When it last changed, milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
}

impl MonitoredSession {
    fn new(run_id: &str, now_ms: u64) -> Self {
        MonitoredSession {
            run_id: run_id.to_string(),
            name: String::new(),
            status: SessionStatus::InProgress,
            invocations: Vec::new(),
            steps: 0,
            output: None,
            error: None,
            pending: Vec::new(),
            milestones: Vec::new(),
            started_at_ms: now_ms,
            updated_at_ms: now_ms,
        }
    }

    /// The invocations that ended, in the order they ended (by [`MonitoredInvocation::step`]).
    pub fn ended_invocations(&self) -> Vec<&MonitoredInvocation> {
        let mut ended: Vec<&MonitoredInvocation> = self.invocations.iter().filter(|i| i.step.is_some()).collect();
        ended.sort_by_key(|i| i.step);
        ended
    }

    /// The invocations that failed (every failed attempt, also those retried successfully), in start order.
    pub fn failures(&self) -> Vec<&MonitoredInvocation> {
        self.invocations.iter().filter(|i| i.failed()).collect()
    }

    fn milestone(&mut self, kind: MilestoneKind, now_ms: u64) -> &mut Milestone {
        self.milestones.push(Milestone {
            at_ms: now_ms,
            kind,
            seq: self.steps,
            pending: Vec::new(),
            answers: BTreeMap::new(),
            error: None,
            path: None,
            forked_from: None,
        });
        let last = self.milestones.len() - 1;
        &mut self.milestones[last]
    }

    /// The last invocation of `path` at `attempt` that has not ended.
    fn open_invocation(&mut self, path: &str, attempt: u32) -> Option<&mut MonitoredInvocation> {
        self.invocations.iter_mut().rev().find(|i| i.path == path && i.attempt == attempt && i.ended_at_us.is_none())
    }
}

/// The outcomes a session ends with, each kept with its own retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Completed.
    Successful,
    /// Failed.
    Failed,
    /// Suspended or drained (it may be resumed).
    Paused,
}

impl Outcome {
    fn of(status: SessionStatus) -> Option<Outcome> {
        match status {
            SessionStatus::InProgress => None,
            SessionStatus::Completed => Some(Outcome::Successful),
            SessionStatus::Failed => Some(Outcome::Failed),
            SessionStatus::Suspended | SessionStatus::Drained => Some(Outcome::Paused),
        }
    }
}

/// Records every invocation of the runs it sees, per memory id, in memory: inputs, output or error, attempt,
/// start and end, tokens, and each session's milestones. Register it on the root (it is inherited) or on a run
/// (`InvokeRequest::listener`); clones share the record. `agentic_report::report_from_monitor` renders a kept
/// session as the HTML report `agentic report` draws, without a store. Idea from LangChain4j agentic's
/// `AgentMonitor` (`successfulExecutions`, `failedExecutions`, `setMaxRetainedSessions`); the paused outcome
/// and the milestones are ours.
///
/// Sessions that ended are kept apart by outcome: successful (completed), failed, and paused (suspended or
/// drained). Each outcome keeps at most [`AgentMonitor::retention`] sessions (default 100), dropping its
/// oldest when a newer one ends; sessions in progress are always kept. A session resumed or started again
/// (same memory id) is in progress again until it ends.
///
/// ```
/// # async fn demo(system: agentic_engine::AgentRef) -> Result<(), agentic_engine::AgentError> {
/// use agentic_engine::AgentMonitor;
/// let monitor = AgentMonitor::new();
/// let system = system.with_listener(monitor.clone());
/// system.invoke().memory_id("order-1").await?;
/// assert_eq!(monitor.successful_executions()[0].run_id, "order-1");
/// monitor.set_retention(20); // from now on, at most 20 sessions per outcome
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AgentMonitor {
    inner: Arc<Mutex<MonitorState>>,
}

impl std::fmt::Debug for AgentMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state();
        f.debug_struct("AgentMonitor")
            .field("retention", &s.retention)
            .field("successful", &s.successful.len())
            .field("failed", &s.failed.len())
            .field("paused", &s.paused.len())
            .field("in_progress", &s.sessions.values().filter(|x| x.status == SessionStatus::InProgress).count())
            .finish()
    }
}

struct MonitorState {
    retention: usize,
    sessions: BTreeMap<String, MonitoredSession>,
    /// Ended sessions by outcome, oldest first.
    successful: VecDeque<String>,
    failed: VecDeque<String>,
    paused: VecDeque<String>,
}

impl MonitorState {
    fn queue(&mut self, outcome: Outcome) -> &mut VecDeque<String> {
        match outcome {
            Outcome::Successful => &mut self.successful,
            Outcome::Failed => &mut self.failed,
            Outcome::Paused => &mut self.paused,
        }
    }

    /// Takes `run_id` out of the ended sessions (it runs again).
    fn reopen(&mut self, run_id: &str) {
        for q in [&mut self.successful, &mut self.failed, &mut self.paused] {
            q.retain(|id| id != run_id);
        }
    }

    /// Drops the oldest sessions of `outcome` beyond the retention.
    fn trim(&mut self, outcome: Outcome) {
        let retention = self.retention;
        while self.queue(outcome).len() > retention {
            if let Some(old) = self.queue(outcome).pop_front() {
                self.sessions.remove(&old);
            }
        }
    }

    fn session(&mut self, run_id: &str, now_ms: u64) -> &mut MonitoredSession {
        let session = self.sessions.entry(run_id.to_string()).or_insert_with(|| MonitoredSession::new(run_id, now_ms));
        session.updated_at_ms = now_ms;
        session
    }

    fn end(&mut self, run_id: &str, status: SessionStatus, now_ms: u64) {
        self.session(run_id, now_ms).status = status;
        self.reopen(run_id);
        if let Some(outcome) = Outcome::of(status) {
            self.queue(outcome).push_back(run_id.to_string());
            self.trim(outcome);
        }
    }

    fn ended(&self, queue: &VecDeque<String>) -> Vec<MonitoredSession> {
        queue.iter().filter_map(|id| self.sessions.get(id).cloned()).collect()
    }
}

impl Default for AgentMonitor {
    fn default() -> Self {
        Self::with_retention(100)
    }
}

impl AgentMonitor {
    /// A monitor keeping the last 100 sessions of each outcome.
    pub fn new() -> Self {
        Self::default()
    }

    /// A monitor keeping the last `retention` sessions of each outcome (successful, failed, paused); 0 keeps
    /// none once they end (the sessions in progress are still recorded).
    pub fn with_retention(retention: usize) -> Self {
        AgentMonitor {
            inner: Arc::new(Mutex::new(MonitorState {
                retention,
                sessions: BTreeMap::new(),
                successful: VecDeque::new(),
                failed: VecDeque::new(),
                paused: VecDeque::new(),
            })),
        }
    }

    /// How many sessions of each outcome it keeps.
    pub fn retention(&self) -> usize {
        self.state().retention
    }

    /// Changes how many sessions of each outcome it keeps, at once and for the sessions that end from now on:
    /// the oldest ended sessions beyond the new retention are dropped now. Sessions in progress are not
    /// affected. The original's `setMaxRetainedSessions`.
    pub fn set_retention(&self, retention: usize) {
        let mut s = self.state();
        s.retention = retention;
        for outcome in [Outcome::Successful, Outcome::Failed, Outcome::Paused] {
            s.trim(outcome);
        }
    }

    /// The session of `run_id`, if kept.
    pub fn session(&self, run_id: &str) -> Option<MonitoredSession> {
        self.state().sessions.get(run_id).cloned()
    }

    /// Ids of the sessions kept (in progress and ended), sorted.
    pub fn run_ids(&self) -> Vec<String> {
        self.state().sessions.keys().cloned().collect()
    }

    /// The sessions kept that completed, oldest first (in the order they ended).
    pub fn successful_executions(&self) -> Vec<MonitoredSession> {
        let s = self.state();
        s.ended(&s.successful)
    }

    /// The sessions kept that failed (or were cancelled), oldest first.
    pub fn failed_executions(&self) -> Vec<MonitoredSession> {
        let s = self.state();
        s.ended(&s.failed)
    }

    /// The sessions kept that wait to be resumed (suspended for a human, or drained), oldest first.
    pub fn paused_executions(&self) -> Vec<MonitoredSession> {
        let s = self.state();
        s.ended(&s.paused)
    }

    /// The sessions in progress, by memory id.
    pub fn ongoing_executions(&self) -> Vec<MonitoredSession> {
        self.state().sessions.values().filter(|s| s.status == SessionStatus::InProgress).cloned().collect()
    }

    /// Forgets every session that ended; sessions in progress are kept.
    pub fn clear(&self) {
        let mut guard = self.state();
        let s = &mut *guard;
        let ended: Vec<String> = s.successful.drain(..).chain(s.failed.drain(..)).chain(s.paused.drain(..)).collect();
        for id in ended {
            s.sessions.remove(&id);
        }
    }

    /// The state; a lock poisoned by a panicking reader still holds a consistent record (the listener's own
    /// panics are caught before they reach a lock holder), so it is used as is.
    fn state(&self) -> MutexGuard<'_, MonitorState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

use crate::time::now_us;

impl AgentListener for AgentMonitor {
    fn inherited(&self) -> bool {
        true
    }

    fn on_event(&self, event: &RunEvent) {
        let now = now_us();
        let now_ms = now / 1_000;
        let mut st = self.state();
        match event {
            RunEvent::ScopeCreated { run_id } => {
                st.reopen(run_id);
                let s = st.session(run_id, now_ms);
                let kind = if s.milestones.is_empty() { MilestoneKind::Started } else { MilestoneKind::NewTurn };
                s.status = SessionStatus::InProgress;
                s.output = None;
                s.error = None;
                s.pending.clear();
                s.milestone(kind, now_ms);
            }
            RunEvent::Resumed { run_id, answers } => {
                let s = st.session(run_id, now_ms);
                // A resumption is announced right after its scope was created (recorded as a new turn).
                if s.milestones.last().is_none_or(|m| m.kind != MilestoneKind::NewTurn) {
                    s.milestone(MilestoneKind::Resumed, now_ms);
                }
                if let Some(m) = s.milestones.last_mut() {
                    m.kind = MilestoneKind::Resumed;
                    m.answers = answers.clone();
                }
            }
            RunEvent::AgentStarted { run_id, agent, path, attempt, inputs } => {
                let s = st.session(run_id, now_ms);
                if s.name.is_empty() && path == "root" {
                    s.name = agent.clone();
                }
                s.invocations.push(MonitoredInvocation {
                    agent: agent.clone(),
                    path: path.clone(),
                    attempt: *attempt,
                    inputs: inputs.clone(),
                    output: None,
                    error: None,
                    duration_us: None,
                    tokens: None,
                    started_at_us: now,
                    ended_at_us: None,
                    step: None,
                });
            }
            RunEvent::AgentFinished { run_id, path, attempt, output, duration_us, tokens, .. } => {
                let s = st.session(run_id, now_ms);
                let step = s.steps + 1;
                if let Some(inv) = s.open_invocation(path, *attempt) {
                    inv.output = Some(output.clone());
                    inv.duration_us = Some(*duration_us);
                    inv.tokens = *tokens;
                    inv.ended_at_us = Some(now.max(inv.started_at_us));
                    inv.step = Some(step);
                    s.steps = step;
                }
            }
            RunEvent::AgentFailed { run_id, path, attempt, error, .. } => {
                let s = st.session(run_id, now_ms);
                let step = s.steps + 1;
                if let Some(inv) = s.open_invocation(path, *attempt) {
                    let ended = now.max(inv.started_at_us);
                    inv.error = Some(error.clone());
                    inv.duration_us = Some(ended - inv.started_at_us);
                    inv.ended_at_us = Some(ended);
                    inv.step = Some(step);
                    s.steps = step;
                }
            }
            RunEvent::Suspended { run_id, pending } => {
                let s = st.session(run_id, now_ms);
                s.pending = pending.clone();
                s.milestone(MilestoneKind::Suspended, now_ms).pending = pending.iter().map(|p| p.id.clone()).collect();
                st.end(run_id, SessionStatus::Suspended, now_ms);
            }
            RunEvent::Completed { run_id, output } => {
                let s = st.session(run_id, now_ms);
                s.output = Some(output.clone());
                s.milestone(MilestoneKind::Completed, now_ms);
                st.end(run_id, SessionStatus::Completed, now_ms);
            }
            RunEvent::Failed { run_id, error } => {
                let s = st.session(run_id, now_ms);
                s.error = Some(error.clone());
                s.milestone(MilestoneKind::Failed, now_ms).error = Some(error.clone());
                st.end(run_id, SessionStatus::Failed, now_ms);
            }
            RunEvent::Drained { run_id } => {
                st.session(run_id, now_ms).milestone(MilestoneKind::Interrupted, now_ms);
                st.end(run_id, SessionStatus::Drained, now_ms);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn started(run: &str, path: &str, agent: &str, attempt: u32) -> RunEvent {
        RunEvent::AgentStarted {
            run_id: run.into(),
            agent: agent.into(),
            path: path.into(),
            attempt,
            inputs: Map::new(),
        }
    }

    fn finished(run: &str, path: &str, agent: &str, attempt: u32, output: Value) -> RunEvent {
        RunEvent::AgentFinished {
            run_id: run.into(),
            agent: agent.into(),
            path: path.into(),
            attempt,
            output,
            duration_us: 7,
            tokens: None,
        }
    }

    fn failed(run: &str, path: &str, agent: &str, attempt: u32, error: &str) -> RunEvent {
        RunEvent::AgentFailed {
            run_id: run.into(),
            agent: agent.into(),
            path: path.into(),
            attempt,
            error: error.into(),
        }
    }

    /// A run `run` of a sequence `main` with one step `work`: completed with `out`, or failed with `err`.
    fn run(monitor: &AgentMonitor, run: &str, result: Result<&str, &str>) {
        let events = [
            RunEvent::ScopeCreated { run_id: run.into() },
            started(run, "root", "main", 1),
            started(run, "root/0", "work", 1),
        ];
        for e in &events {
            monitor.on_event(e);
        }
        let ends = match result {
            Ok(out) => vec![
                finished(run, "root/0", "work", 1, json!(out)),
                finished(run, "root", "main", 1, json!(out)),
                RunEvent::Completed { run_id: run.into(), output: json!(out) },
            ],
            Err(err) => vec![
                failed(run, "root/0", "work", 1, err),
                failed(run, "root", "main", 1, err),
                RunEvent::Failed { run_id: run.into(), error: err.into() },
            ],
        };
        for e in &ends {
            monitor.on_event(e);
        }
    }

    fn ids(sessions: &[MonitoredSession]) -> Vec<&str> {
        sessions.iter().map(|s| s.run_id.as_str()).collect()
    }

    #[test]
    fn successful_and_failed_executions_are_kept_apart_with_a_retention_each() {
        let monitor = AgentMonitor::with_retention(2);
        run(&monitor, "ok-1", Ok("a"));
        run(&monitor, "bad-1", Err("agent `work` (root/0) failed: boom"));
        run(&monitor, "ok-2", Ok("b"));
        run(&monitor, "ok-3", Ok("c"));
        run(&monitor, "bad-2", Err("agent `work` (root/0) failed: bang"));

        let ok = monitor.successful_executions();
        assert_eq!(ids(&ok), ["ok-2", "ok-3"], "the oldest success went; the failures are not counted against it");
        assert_eq!(ok[1].output, Some(json!("c")));
        assert_eq!(ok[1].status, SessionStatus::Completed);
        assert_eq!(ok[1].name, "main");
        let bad = monitor.failed_executions();
        assert_eq!(ids(&bad), ["bad-1", "bad-2"]);
        assert_eq!(bad[0].error.as_deref(), Some("agent `work` (root/0) failed: boom"));
        assert_eq!(bad[0].status, SessionStatus::Failed);
        let failures: Vec<(&str, &str)> =
            bad[1].failures().iter().map(|i| (i.path.as_str(), i.error.as_deref().unwrap_or(""))).collect();
        assert_eq!(
            failures,
            [("root", "agent `work` (root/0) failed: bang"), ("root/0", "agent `work` (root/0) failed: bang")]
        );
        let kinds: Vec<&str> = bad[1].milestones.iter().map(|m| m.kind.as_str()).collect();
        assert_eq!(kinds, ["started", "failed"]);
        assert_eq!(bad[1].milestones[1].seq, 2);
        assert_eq!(monitor.run_ids(), ["bad-1", "bad-2", "ok-2", "ok-3"]);
        assert!(monitor.ongoing_executions().is_empty());
    }

    #[test]
    fn the_retention_changes_at_run_time_dropping_the_oldest_at_once() {
        let monitor = AgentMonitor::new();
        assert_eq!(monitor.retention(), 100);
        for i in 1..=5 {
            run(&monitor, &format!("ok-{i}"), Ok("x"));
        }
        run(&monitor, "bad-1", Err("boom"));
        run(&monitor, "bad-2", Err("boom"));
        // A run in progress while the retention changes.
        monitor.on_event(&RunEvent::ScopeCreated { run_id: "live".into() });
        monitor.on_event(&started("live", "root", "main", 1));

        let shared = monitor.clone();
        shared.set_retention(3);
        assert_eq!(monitor.retention(), 3);
        assert_eq!(ids(&monitor.successful_executions()), ["ok-3", "ok-4", "ok-5"]);
        assert_eq!(ids(&monitor.failed_executions()), ["bad-1", "bad-2"]);
        assert_eq!(ids(&monitor.ongoing_executions()), ["live"], "a session in progress is not affected");

        // Effective for what ends next: the oldest success goes.
        run(&monitor, "ok-6", Ok("y"));
        assert_eq!(ids(&monitor.successful_executions()), ["ok-4", "ok-5", "ok-6"]);

        shared.set_retention(1);
        assert_eq!(ids(&monitor.successful_executions()), ["ok-6"]);
        assert_eq!(ids(&monitor.failed_executions()), ["bad-2"]);

        shared.set_retention(0);
        assert!(monitor.successful_executions().is_empty() && monitor.failed_executions().is_empty());
        assert_eq!(monitor.run_ids(), ["live"]);
        monitor.on_event(&finished("live", "root", "main", 1, json!(1)));
        monitor.on_event(&RunEvent::Completed { run_id: "live".into(), output: json!(1) });
        assert!(monitor.run_ids().is_empty(), "retention 0 keeps nothing once it ends");
    }

    #[test]
    fn clear_keeps_the_sessions_in_progress() {
        let monitor = AgentMonitor::new();
        run(&monitor, "done", Ok("x"));
        monitor.on_event(&RunEvent::ScopeCreated { run_id: "live".into() });
        monitor.clear();
        assert_eq!(monitor.run_ids(), ["live"]);
    }

    #[test]
    fn a_retried_attempt_a_suspension_and_a_resumption_are_recorded_in_order() {
        let monitor = AgentMonitor::new();
        let r = "r";
        for e in [
            RunEvent::ScopeCreated { run_id: r.into() },
            started(r, "root", "main", 1),
            started(r, "root/0", "flaky", 1),
            failed(r, "root/0", "flaky", 1, "HTTP 503"),
            started(r, "root/0", "flaky", 2),
            finished(r, "root/0", "flaky", 2, json!("ok")),
            started(r, "root/1", "gate", 1),
            RunEvent::Suspended { run_id: r.into(), pending: vec![PendingResponse::new("gate", "ok?", "gate")] },
        ] {
            monitor.on_event(&e);
        }
        let s = monitor.session(r).unwrap();
        assert_eq!(s.status, SessionStatus::Suspended);
        assert_eq!(ids(&monitor.paused_executions()), ["r"]);
        assert_eq!(s.pending[0].id, "gate");
        let rows: Vec<(&str, u32, Option<u64>, bool)> =
            s.invocations.iter().map(|i| (i.path.as_str(), i.attempt, i.step, i.failed())).collect();
        assert_eq!(
            rows,
            [
                ("root", 1, None, false),
                ("root/0", 1, Some(1), true),
                ("root/0", 2, Some(2), false),
                ("root/1", 1, None, false)
            ]
        );

        let mut answers = BTreeMap::new();
        answers.insert("gate".to_string(), json!("yes"));
        for e in [
            RunEvent::ScopeCreated { run_id: r.into() },
            RunEvent::Resumed { run_id: r.into(), answers: answers.clone() },
            started(r, "root", "main", 1),
            started(r, "root/1", "gate", 1),
            finished(r, "root/1", "gate", 1, json!("yes")),
            finished(r, "root", "main", 1, json!("yes")),
            RunEvent::Completed { run_id: r.into(), output: json!("yes") },
        ] {
            monitor.on_event(&e);
        }
        let s = monitor.session(r).unwrap();
        assert!(monitor.paused_executions().is_empty());
        assert_eq!(ids(&monitor.successful_executions()), ["r"]);
        let ended: Vec<(&str, Option<u64>)> = s.ended_invocations().iter().map(|i| (i.path.as_str(), i.step)).collect();
        assert_eq!(ended, [("root/0", Some(1)), ("root/0", Some(2)), ("root/1", Some(3)), ("root", Some(4))]);
        let milestones: Vec<(&str, u64)> = s.milestones.iter().map(|m| (m.kind.as_str(), m.seq)).collect();
        assert_eq!(milestones, [("started", 0), ("suspended", 2), ("resumed", 2), ("completed", 4)]);
        assert_eq!(s.milestones[1].pending, ["gate"]);
        assert_eq!(s.milestones[2].answers, answers);
        assert!(s.pending.is_empty());
    }
}
