//! A session of the in-process monitor ([`agentic_engine::AgentMonitor`]) as the run record and journal the
//! renderer reads: one step per invocation that ended, in the order they ended (failed attempts marked as
//! such), the session's milestones, status, result or error and pending responses, and the loop iteration of
//! each step (counted from the starts of the loop's first sub-agent). The monitor sees invocations, not state
//! writes, so the steps carry no state diff and no planner decision.

use std::collections::{BTreeMap, BTreeSet};

use agentic_engine::{
    InvocationRecord, MonitoredInvocation, MonitoredSession, RunRecord, RunStatus, SessionStatus, StepRecord,
    TopologyNode,
};
use serde_json::Value;

/// The run record and the steps of `session`, and the loop iteration of each step under a loop (by `seq`);
/// `topology` gives the record its fingerprint and says which composites are loops.
pub(crate) fn run_of(
    session: &MonitoredSession,
    topology: Option<&TopologyNode>,
) -> (RunRecord, Vec<StepRecord>, BTreeMap<u64, u64>) {
    let loops: BTreeSet<&str> = topology
        .map(|t| t.walk().into_iter().filter(|n| n.spec.kind == "loop").map(|n| n.path.as_str()).collect())
        .unwrap_or_default();
    let ended = session.ended_invocations();
    let iterations =
        ended.iter().zip(1u64..).filter_map(|(inv, seq)| iteration(session, &loops, inv).map(|n| (seq, n))).collect();
    let records = ended
        .into_iter()
        .zip(1u64..)
        .map(|(inv, seq)| {
            let mut step = StepRecord::new(session.run_id.clone(), seq, inv.path.clone());
            step.failed = inv.failed();
            step.invocation = Some(InvocationRecord {
                agent: inv.agent.clone(),
                path: inv.path.clone(),
                inputs: inv.inputs.clone(),
                output: inv.output.clone().unwrap_or(Value::Null),
                started_at_us: inv.started_at_us,
                ended_at_us: inv.ended_at_us.unwrap_or(inv.started_at_us),
                attempt: inv.attempt,
                tokens: inv.tokens,
                usage: None,
                error: inv.error.clone(),
                item: None,
            });
            step
        })
        .collect();
    let status = match session.status {
        SessionStatus::InProgress | SessionStatus::Drained => RunStatus::Running,
        SessionStatus::Suspended => RunStatus::Suspended,
        SessionStatus::Completed => RunStatus::Completed,
        SessionStatus::Failed => RunStatus::Failed,
    };
    let detail = match (&session.output, &session.error) {
        (Some(v), _) if session.status == SessionStatus::Completed => v.clone(),
        (_, Some(e)) if session.status == SessionStatus::Failed => Value::String(e.clone()),
        _ => Value::Null,
    };
    let name = if session.name.is_empty() {
        topology.map_or_else(|| session.run_id.clone(), |t| t.spec.name.clone())
    } else {
        session.name.clone()
    };
    let run = RunRecord {
        run_id: session.run_id.clone(),
        name,
        fingerprint: topology.map(TopologyNode::fingerprint).unwrap_or_default(),
        status,
        pending: if session.status == SessionStatus::Suspended { session.pending.clone() } else { Vec::new() },
        answers: Default::default(),
        detail,
        source: None,
        spec_hash: None,
        cancel_requested: false,
        created_at_ms: session.started_at_ms,
        updated_at_ms: session.updated_at_ms,
        milestones: session.milestones.clone(),
        forked_from: None,
        timed_out: Vec::new(),
        tenant: None,
        answered_by: BTreeMap::new(),
    };
    (run, records, iterations)
}

/// The 1-based iteration of the innermost loop around `inv`: how many times the loop's first sub-agent
/// started (first attempts) in the loop's invocation that encloses `inv`, up to `inv`'s start.
fn iteration(session: &MonitoredSession, loops: &BTreeSet<&str>, inv: &MonitoredInvocation) -> Option<u64> {
    let mut ancestor = inv.path.as_str();
    let lp = loop {
        ancestor = &ancestor[..ancestor.rfind('/')?];
        if loops.contains(ancestor) {
            break ancestor;
        }
    };
    let since = session
        .invocations
        .iter()
        .filter(|i| i.path == lp && i.started_at_us <= inv.started_at_us)
        .map(|i| i.started_at_us)
        .max()?;
    let first = format!("{lp}/0");
    let starts = session
        .invocations
        .iter()
        .filter(|i| i.path == first && i.attempt == 1 && (since..=inv.started_at_us).contains(&i.started_at_us))
        .count();
    Some((starts as u64).max(1))
}
