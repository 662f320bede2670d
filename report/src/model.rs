//! The report's view model, computed deterministically from a run record and its journal: steps with their
//! state diffs (replayed from the deltas), loop iterations, planner decisions, the timeline's time mapping
//! (waiting periods collapsed), milestones, and per-agent totals.

use std::collections::{BTreeMap, BTreeSet};

use agentic_engine::INPUTS_PATH;
use agentic_engine::{Milestone, MilestoneKind, PlannerState, RunRecord, RunStatus, StepRecord, TopologyNode};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::escape::{duration_us, timestamp_ms, truncate, value_json, value_line};

/// Everything the run page shows.
pub(crate) struct RunModel {
    /// Data for the page's script (timeline and step list).
    pub(crate) data: PageData,
    /// Per-agent totals, in topology order.
    pub(crate) agents: Vec<AgentRow>,
    /// Header facts.
    pub(crate) summary: Summary,
    /// Milestones, for the journey strip.
    pub(crate) milestones: Vec<MilestoneView>,
    /// Invocation errors (path, agent, message).
    pub(crate) errors: Vec<ErrorView>,
    /// Per-path annotations for the topology diagram.
    pub(crate) annotations: Annotations,
    /// The journaled model turns and tool calls, per agent (SPEC.md §4), in the order agents first called.
    pub(crate) calls: Vec<AgentCalls>,
}

/// The journaled calls of one agent (one path): its model turns and tool calls, one row each.
#[derive(Serialize)]
pub(crate) struct AgentCalls {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) rows: Vec<CallRow>,
}

/// One model turn, or one tool call with the changes journaled for it folded into its last status.
#[derive(Serialize)]
pub(crate) struct CallRow {
    /// The step of its first entry.
    pub(crate) seq: u64,
    /// The path and mapper item of the invocation (`root/0#3`, as in its pending ids), empty for the shared
    /// scope.
    pub(crate) item: String,
    /// Which invocation of the agent, from 1 (a retry or a later iteration is a new one).
    pub(crate) invocation: usize,
    /// The model turn, from 0.
    pub(crate) turn: u32,
    /// `model` or `tool`.
    pub(crate) what: &'static str,
    /// The model's name, or the tool's with the call's number (`charge #0`).
    pub(crate) name: String,
    /// The last status (`answered` for a model turn).
    pub(crate) status: String,
    /// The arguments that ran (edited ones when edited), as one line of JSON.
    pub(crate) args: String,
    /// The result, `error: ..`, or the model's answer (its text, or the tools it called).
    pub(crate) result: String,
    /// A person's decision: `approved`, `edited`, `rejected: <message>`, `responded`, or the answer to a call
    /// in doubt.
    pub(crate) decision: String,
    /// Who decided.
    pub(crate) by: String,
}

/// What the topology diagram marks on a run's agents.
#[derive(Default)]
pub(crate) struct Annotations {
    /// Invocations per path.
    pub(crate) counts: BTreeMap<String, usize>,
    /// Paths that failed (the run's failing agent and invocations with an error).
    pub(crate) failed: BTreeSet<String>,
    /// Paths waiting for a human.
    pub(crate) pending: BTreeSet<String>,
}

/// Header facts of a run.
#[derive(Serialize)]
pub(crate) struct Summary {
    pub(crate) run_id: String,
    pub(crate) name: String,
    pub(crate) status: String,
    pub(crate) created: String,
    pub(crate) updated: String,
    pub(crate) active: String,
    pub(crate) wall: String,
    pub(crate) steps: usize,
    pub(crate) invocations: usize,
    pub(crate) retries: u64,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    pub(crate) tokens_total: u64,
    /// Model calls of the run.
    pub(crate) model_calls: u64,
    /// What they cost (`$0.0123`), empty when no model has prices.
    pub(crate) cost: String,
    /// What each model spent, in the order first called.
    pub(crate) by_model: Vec<ModelRow>,
    /// The models called, in the order first called (`strong, small`).
    pub(crate) models: String,
    pub(crate) source: Option<String>,
    /// Where the data comes from when it is not a store (the in-process monitor).
    pub(crate) origin: Option<String>,
    /// The run it was forked from and at which step.
    pub(crate) forked_from: Option<ForkView>,
    /// The result (completed), as one line of JSON or text.
    pub(crate) output: Option<String>,
    /// The error message (failed or cancelled).
    pub(crate) error: Option<String>,
    /// The path of the agent the error names.
    pub(crate) error_path: Option<String>,
    pub(crate) pending: Vec<PendingView>,
    /// Answers recorded and not consumed yet.
    pub(crate) answers: Vec<(String, String)>,
}

/// The run a forked run comes from.
#[derive(Serialize)]
pub(crate) struct ForkView {
    pub(crate) run_id: String,
    pub(crate) at_seq: u64,
}

/// A response the run waits for.
#[derive(Serialize)]
pub(crate) struct PendingView {
    pub(crate) id: String,
    pub(crate) agent: String,
    pub(crate) prompt: String,
}

/// An invocation error.
#[derive(Serialize)]
pub(crate) struct ErrorView {
    pub(crate) seq: u64,
    pub(crate) path: String,
    pub(crate) agent: String,
    pub(crate) message: String,
}

/// One row of the agents table.
#[derive(Serialize)]
pub(crate) struct AgentRow {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) depth: usize,
    pub(crate) count: usize,
    pub(crate) retries: u64,
    pub(crate) errors: usize,
    pub(crate) time: String,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    /// Model calls.
    pub(crate) model_calls: u64,
    /// Their cost (`$0.0123`), empty when not priced.
    pub(crate) cost: String,
    /// The models called, by the names usage gives them (`small, strong`).
    pub(crate) models: String,
}

/// What one model spent in the run (the report's models table; SPEC.md §7).
#[derive(Serialize)]
pub(crate) struct ModelRow {
    pub(crate) model: String,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    pub(crate) model_calls: u64,
    /// Their cost (`$0.0123`), empty when not priced.
    pub(crate) cost: String,
}

/// A milestone as shown.
#[derive(Serialize, Clone)]
pub(crate) struct MilestoneView {
    pub(crate) kind: String,
    pub(crate) seq: u64,
    pub(crate) at: String,
    /// Position on the timeline (display microseconds).
    pub(crate) x: Option<u64>,
    pub(crate) pending: Vec<String>,
    /// `(response id, answer as JSON)`.
    pub(crate) answers: Vec<(String, String)>,
    pub(crate) error: Option<String>,
    /// The run this one was forked from (a `forked` milestone).
    pub(crate) forked_from: Option<String>,
    /// Time spent waiting before this resumption, when it follows a suspension.
    pub(crate) waited: Option<String>,
}

/// The data the page's script reads.
#[derive(Serialize)]
pub(crate) struct PageData {
    /// Agents in topology order: rows of the timeline.
    pub(crate) order: Vec<OrderEntry>,
    pub(crate) steps: Vec<StepView>,
    pub(crate) milestones: Vec<MilestoneView>,
    pub(crate) timeline: Timeline,
}

/// A timeline row.
#[derive(Serialize)]
pub(crate) struct OrderEntry {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) depth: usize,
    pub(crate) composite: bool,
}

/// The timeline's axis: display time is active time, with waiting periods replaced by fixed-width breaks.
#[derive(Serialize, Default)]
pub(crate) struct Timeline {
    /// Display span, microseconds.
    pub(crate) span: u64,
    pub(crate) breaks: Vec<Break>,
}

/// A collapsed waiting period.
#[derive(Serialize)]
pub(crate) struct Break {
    pub(crate) x: u64,
    pub(crate) w: u64,
    /// Real length, formatted.
    pub(crate) real: String,
    /// `suspended` (a wait for a human, a resumption, a new turn), `forked` (between a run's step and its
    /// fork's next one) or `idle`.
    pub(crate) kind: String,
    pub(crate) label: String,
}

/// One step as the page shows it.
#[derive(Serialize)]
pub(crate) struct StepView {
    pub(crate) seq: u64,
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) kind: String,
    /// The mapper item the step served (`#3`): its writes went to that item's own scope layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) item: Option<String>,
    /// `inputs`, `async start`, `skipped` or `substituted` for steps without an invocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) label: Option<&'static str>,
    /// Display start and end on the timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) x0: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) x1: Option<u64>,
    /// Real duration, formatted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dur: Option<String>,
    pub(crate) attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens: Option<[u64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) iteration: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) inputs: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) output: Option<Value>,
    /// One-line preview of the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) preview: Option<String>,
    pub(crate) diff: Vec<DiffEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) decisions: Vec<Decision>,
    /// Lower-case text the search box matches: agent name, path, kind and keys.
    pub(crate) search: String,
}

/// A key a step added, changed, removed or rewrote with the same value.
#[derive(Serialize)]
pub(crate) struct DiffEntry {
    pub(crate) key: String,
    /// `added`, `changed`, `removed` or `same`.
    pub(crate) op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) new: Option<Value>,
}

/// A planner's decision journaled with a step.
#[derive(Serialize)]
pub(crate) struct Decision {
    pub(crate) path: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rationale: Option<String>,
    /// Sub-agents in flight after the decision (names, with attempt when > 1).
    pub(crate) next: Vec<String>,
    /// `done` or `done with <value>` when the planner finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) finished: Option<String>,
    pub(crate) state: Value,
}

/// Path lookups into the topology.
pub(crate) struct Topo<'a> {
    nodes: BTreeMap<&'a str, (&'a TopologyNode, usize)>,
    order: Vec<(&'a TopologyNode, usize)>,
}

impl<'a> Topo<'a> {
    pub(crate) fn new(root: Option<&'a TopologyNode>) -> Self {
        let mut order = Vec::new();
        fn walk<'a>(n: &'a TopologyNode, depth: usize, out: &mut Vec<(&'a TopologyNode, usize)>) {
            out.push((n, depth));
            for c in &n.children {
                walk(c, depth + 1, out);
            }
        }
        if let Some(r) = root {
            walk(r, 0, &mut order);
        }
        let nodes = order.iter().map(|(n, d)| (n.path.as_str(), (*n, *d))).collect();
        Topo { nodes, order }
    }

    fn node(&self, path: &str) -> Option<&'a TopologyNode> {
        self.nodes.get(path).map(|(n, _)| *n)
    }

    fn name(&self, path: &str) -> Option<&'a str> {
        self.node(path).map(|n| n.spec.name.as_str())
    }

    fn kind(&self, path: &str) -> Option<&'a str> {
        self.node(path).map(|n| n.spec.kind.as_str())
    }
}

/// The depth of a path (`root` = 0, `root/1/0` = 2).
fn depth_of(path: &str) -> usize {
    path.matches('/').count()
}

/// The path of the agent an engine error names: `agent `x` (root/1/0) failed: ...` → `root/1/0`.
pub(crate) fn error_path(message: &str) -> Option<String> {
    let start = message.find("(root")? + 1;
    let len = message[start..].find(')')?;
    let path = &message[start..start + len];
    path.chars().all(|c| c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-').then(|| path.to_string())
}

/// Builds the model of a run.
pub(crate) fn build(topology: Option<&TopologyNode>, run: &RunRecord, records: &[StepRecord]) -> RunModel {
    build_with(topology, run, records, &BTreeMap::new())
}

/// Builds the model of a run whose loop iterations are known by step (`seq` → 1-based iteration of the
/// innermost loop) rather than from the planners' states (the monitor's records have none).
pub(crate) fn build_with(
    topology: Option<&TopologyNode>,
    run: &RunRecord,
    records: &[StepRecord],
    iterations: &BTreeMap<u64, u64>,
) -> RunModel {
    let topo = Topo::new(topology);
    let mapping = TimeMap::new(run, records);

    // Replay the deltas; track loop iterations from the planners' states at dispatch time.
    let mut state: Map<String, Value> = Map::new();
    // The layers of the mapper items in progress: an item's writes are diffed against its own layer.
    let mut layers: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut planner_states: BTreeMap<String, PlannerState> = BTreeMap::new();
    let mut steps = Vec::with_capacity(records.len());
    let mut errors = Vec::new();
    // Paths whose last step was a failed attempt (a step without an invocation after one is a substitution).
    let mut failed_last: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut annotations = Annotations::default();
    let mut per_agent: BTreeMap<String, AgentAcc> = BTreeMap::new();
    let mut calls = CallsAcc::default();
    for r in records {
        let path = r.agent_path.as_str();
        let inv = r.invocation.as_ref();
        if !r.calls.is_empty() {
            // Its agent's calls table lists them; a record of calls only (an invocation still running) is not a
            // step of the timeline (nothing completed, was skipped or substituted).
            calls.add(r);
        }
        if r.holds_calls() {
            continue;
        }
        if inv.is_some() {
            calls.ended(path, r.item.as_deref());
        }
        let name = topo
            .name(path)
            .map(str::to_string)
            .or_else(|| inv.map(|i| i.agent.clone()))
            .unwrap_or_else(|| if path == INPUTS_PATH { "inputs".to_string() } else { path.to_string() });
        let kind = topo.kind(path).unwrap_or(if path == INPUTS_PATH { "inputs" } else { "" }).to_string();
        let label = match (inv, path == INPUTS_PATH, r.async_started) {
            _ if r.failed => Some("failed attempt"),
            (_, true, _) => Some("inputs"),
            (_, _, true) => Some("async start"),
            (None, _, _) if failed_last.contains(path) => Some("substituted"),
            (None, _, _) if r.delta.is_empty() => Some("skipped"),
            (None, _, _) => Some("substituted"),
            _ => None,
        };
        if r.failed {
            failed_last.insert(path.to_string());
        } else {
            failed_last.remove(path);
        }

        let mut diff = Vec::with_capacity(r.delta.len());
        let target = match &r.item {
            Some(item) => layers.entry(item.clone()).or_default(),
            None => &mut state,
        };
        for (k, v) in &r.delta {
            let state = &mut *target;
            let old = state.get(k).cloned();
            let entry = match (old, v.is_null()) {
                (None, true) => continue,
                (Some(old), true) => {
                    state.remove(k);
                    DiffEntry { key: k.clone(), op: "removed", old: Some(old), new: None }
                }
                (None, false) => {
                    state.insert(k.clone(), v.clone());
                    DiffEntry { key: k.clone(), op: "added", old: None, new: Some(v.clone()) }
                }
                (Some(old), false) if &old == v => DiffEntry { key: k.clone(), op: "same", old: None, new: Some(old) },
                (Some(old), false) => {
                    state.insert(k.clone(), v.clone());
                    DiffEntry { key: k.clone(), op: "changed", old: Some(old), new: Some(v.clone()) }
                }
            };
            diff.push(entry);
        }

        if let (true, Some(item)) = (r.item_end, &r.item) {
            let nested = format!("{item}|");
            layers.retain(|k, _| k != item && !k.starts_with(&nested));
        }

        let iteration = iterations.get(&r.seq).copied().or_else(|| iteration_of(path, &topo, &planner_states));
        if !r.async_started && !r.failed {
            let prefix = format!("{path}/");
            planner_states.retain(|p, _| p != path && !p.starts_with(&prefix));
        }
        for ps in &r.planner_states {
            planner_states.insert(ps.path.clone(), ps.clone());
        }
        let decisions = r.planner_states.iter().map(|ps| decision(ps, &topo)).collect();

        let mut search = format!("{name} {path}{} {kind}", r.item.as_deref().unwrap_or(""));
        for (k, _) in &r.delta {
            search.push(' ');
            search.push_str(k);
        }
        if let Some(i) = inv {
            for k in i.inputs.keys() {
                search.push(' ');
                search.push_str(k);
            }
        }

        let mut view = StepView {
            seq: r.seq,
            path: path.to_string(),
            item: r.item.clone(),
            name,
            kind,
            label,
            x0: None,
            x1: None,
            dur: None,
            attempt: 1,
            tokens: None,
            error: None,
            iteration,
            inputs: None,
            output: None,
            preview: None,
            diff,
            decisions,
            search: search.to_lowercase(),
        };
        if path == INPUTS_PATH {
            view.inputs = Some(r.delta.iter().cloned().collect());
        }
        if let Some(i) = inv {
            let (s, e) = (i.started_at_us, i.ended_at_us.max(i.started_at_us));
            view.x0 = Some(mapping.map(s));
            view.x1 = Some(mapping.map(e));
            view.dur = Some(duration_us(e - s));
            view.attempt = i.attempt;
            view.tokens = i.tokens.as_ref().map(|t| [t.input, t.output]);
            view.error = i.error.clone();
            view.inputs = Some(i.inputs.clone());
            view.preview = (!i.output.is_null()).then(|| value_line(&i.output, 140));
            view.output = Some(i.output.clone());
            let acc = per_agent.entry(path.to_string()).or_default();
            if !r.failed {
                // Completions; a failed attempt counts as an error.
                *annotations.counts.entry(path.to_string()).or_default() += 1;
                acc.count += 1;
            }
            // Every attempt after the first is a retry (the journal keeps failed attempts too).
            acc.retries += u64::from(i.attempt > 1);
            acc.time_us += e - s;
            if let Some(t) = &i.tokens {
                acc.tokens_in += t.input;
                acc.tokens_out += t.output;
            }
            if let Some(u) = &i.usage {
                acc.model_calls += u.model_calls;
                if let Some(c) = u.cost_usd {
                    *acc.cost_usd.get_or_insert(0.0) += c;
                }
                for m in &u.models {
                    if !acc.models.contains(m) {
                        acc.models.push(m.clone());
                    }
                }
            }
            if acc.name.is_empty() {
                acc.name = i.agent.clone();
            }
            if let Some(err) = &i.error {
                acc.errors += 1;
                annotations.failed.insert(path.to_string());
                errors.push(ErrorView {
                    seq: r.seq,
                    path: path.to_string(),
                    agent: i.agent.clone(),
                    message: err.clone(),
                });
            }
        }
        steps.push(view);
    }

    // Per-agent rows in topology order, then paths the topology does not know.
    let mut agents = Vec::new();
    for (node, depth) in &topo.order {
        let acc = per_agent.remove(node.path.as_str()).unwrap_or_default();
        agents.push(acc.row(&node.path, &node.spec.name, &node.spec.kind, *depth));
    }
    for (path, acc) in std::mem::take(&mut per_agent) {
        let name = if acc.name.is_empty() { path.clone() } else { acc.name.clone() };
        agents.push(acc.row(&path, &name, "", depth_of(&path)));
    }

    let ends: Vec<u64> =
        records.iter().filter_map(|r| r.invocation.as_ref()).map(|i| i.ended_at_us.max(i.started_at_us)).collect();
    let milestones = milestone_views(&run.milestones, &mapping, &ends);
    let summary = summary(run, records, &agents, &mapping);
    let names = agentic_engine::journal_agent_names(records, &run.pending);
    let calls = calls.views(|path| {
        topo.name(path).map(str::to_string).or_else(|| names.get(path).cloned()).unwrap_or_else(|| path.to_string())
    });
    if let Some(p) = &summary.error_path {
        annotations.failed.insert(p.clone());
    }
    // A failed or cancelled run's questions take no answer: nothing is drawn as waiting.
    for p in run.open_pending() {
        if topo.node(&p.id).is_some() {
            annotations.pending.insert(p.id.clone());
        } else if let Some((n, _)) = topo.order.iter().find(|(n, _)| n.spec.name == p.agent) {
            annotations.pending.insert(n.path.clone());
        }
    }

    let mut order: Vec<OrderEntry> = topo
        .order
        .iter()
        .map(|(n, d)| OrderEntry {
            path: n.path.clone(),
            name: n.spec.name.clone(),
            kind: n.spec.kind.clone(),
            depth: *d,
            composite: !n.children.is_empty(),
        })
        .collect();
    let known: BTreeSet<String> = order.iter().map(|o| o.path.clone()).collect();
    let mut extra: Vec<&StepView> =
        steps.iter().filter(|s| s.x0.is_some() && !known.contains(&s.path)).collect::<Vec<_>>();
    extra.sort_by(|a, b| a.path.cmp(&b.path));
    extra.dedup_by(|a, b| a.path == b.path);
    for s in extra {
        order.push(OrderEntry {
            path: s.path.clone(),
            name: s.name.clone(),
            kind: s.kind.clone(),
            depth: depth_of(&s.path),
            composite: steps.iter().any(|o| o.path.starts_with(&format!("{}/", s.path))),
        });
    }

    RunModel {
        data: PageData { order, steps, milestones: milestones.clone(), timeline: mapping.timeline() },
        agents,
        summary,
        milestones,
        errors,
        annotations,
        calls,
    }
}

/// The journaled calls of a run as the report groups them: per path, one row per model turn and per tool call.
#[derive(Default)]
struct CallsAcc {
    /// Paths in the order they first journaled a call.
    order: Vec<String>,
    /// The rows of each path.
    rows: BTreeMap<String, Vec<CallRow>>,
    /// Per path and item (a [`agentic_engine::planner_key`]): the invocation counted so far (from 1) and
    /// whether its calls ended (its completion or failed attempt was journaled).
    invocations: BTreeMap<String, (usize, bool)>,
}

impl CallsAcc {
    /// The invocation at `path` (in `item`) ended: its next calls are another invocation's.
    fn ended(&mut self, path: &str, item: Option<&str>) {
        if let Some(inv) = self.invocations.get_mut(&agentic_engine::planner_key(path, item)) {
            inv.1 = true;
        }
    }

    /// Folds the entries of a call record.
    fn add(&mut self, r: &StepRecord) {
        use agentic_engine::{CallEntry, ToolCallStatus};
        let path = r.agent_path.as_str();
        let key = agentic_engine::planner_key(path, r.item.as_deref());
        let inv = self.invocations.entry(key).or_insert((1, false));
        if inv.1 {
            *inv = (inv.0 + 1, false);
        }
        let invocation = inv.0;
        if !self.rows.contains_key(path) {
            self.order.push(path.to_string());
        }
        let item = r.item.as_deref().map(|layer| format!("{path}{}", agentic_engine::item_of_layer(layer)));
        let item = item.unwrap_or_default();
        let rows = self.rows.entry(path.to_string()).or_default();
        for entry in &r.calls {
            match entry {
                CallEntry::Model(m) => rows.push(CallRow {
                    seq: r.seq,
                    item: item.clone(),
                    invocation,
                    turn: m.turn,
                    what: "model",
                    name: m.model.clone(),
                    status: "answered".to_string(),
                    args: String::new(),
                    result: model_answer(&m.response),
                    decision: String::new(),
                    by: String::new(),
                }),
                CallEntry::Tool(t) => {
                    let name = format!("{} #{}", t.tool, t.n);
                    let at = rows.iter().rposition(|row| {
                        row.what == "tool" && row.invocation == invocation && row.item == item && row.name == name
                    });
                    let row = match at {
                        Some(i) => &mut rows[i],
                        None => {
                            rows.push(CallRow {
                                seq: r.seq,
                                item: item.clone(),
                                invocation,
                                turn: t.turn,
                                what: "tool",
                                name,
                                status: String::new(),
                                args: String::new(),
                                result: String::new(),
                                decision: String::new(),
                                by: String::new(),
                            });
                            let last = rows.len() - 1;
                            &mut rows[last]
                        }
                    };
                    row.status = t.status.as_str().to_string();
                    row.args = value_json(&t.args, 400);
                    match t.status {
                        ToolCallStatus::Approved | ToolCallStatus::Edited | ToolCallStatus::Responded => {
                            row.decision = t.status.as_str().to_string();
                        }
                        ToolCallStatus::Rejected => {
                            row.decision = match t.message.as_deref() {
                                Some(m) if !m.is_empty() => format!("rejected: {m}"),
                                _ => "rejected".to_string(),
                            };
                        }
                        _ => {}
                    }
                    if let Some(result) = &t.result {
                        row.result = value_json(result, 400);
                    }
                    if let Some(error) = &t.error {
                        row.result = format!("error: {}", truncate(error, 400));
                    }
                    if let Some(by) = &t.by {
                        row.by = by.clone();
                    }
                }
                _ => {}
            }
        }
    }

    /// The tables, in the order agents first called, each named by `name_of` its path.
    fn views(mut self, name_of: impl Fn(&str) -> String) -> Vec<AgentCalls> {
        self.order
            .iter()
            .map(|path| AgentCalls {
                path: path.clone(),
                name: name_of(path),
                rows: self.rows.remove(path).unwrap_or_default(),
            })
            .collect()
    }
}

/// A model turn's answer in one line: its text, else the tools it called (`calls charge, refund`).
fn model_answer(response: &Value) -> String {
    let message = &response["message"];
    match message["content"].as_str() {
        Some(text) if !text.is_empty() => truncate(text, 400),
        _ => {
            let tools: Vec<&str> = message["tool_calls"]
                .as_array()
                .map(|calls| calls.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            if tools.is_empty() { String::new() } else { format!("calls {}", tools.join(", ")) }
        }
    }
}

#[derive(Default)]
struct AgentAcc {
    name: String,
    count: usize,
    retries: u64,
    errors: usize,
    time_us: u64,
    tokens_in: u64,
    tokens_out: u64,
    model_calls: u64,
    cost_usd: Option<f64>,
    models: Vec<String>,
}

impl AgentAcc {
    fn row(&self, path: &str, name: &str, kind: &str, depth: usize) -> AgentRow {
        AgentRow {
            path: path.to_string(),
            name: name.to_string(),
            kind: kind.to_string(),
            depth,
            count: self.count,
            retries: self.retries,
            errors: self.errors,
            time: if self.count == 0 { String::new() } else { duration_us(self.time_us) },
            tokens_in: self.tokens_in,
            tokens_out: self.tokens_out,
            model_calls: self.model_calls,
            cost: self.cost_usd.map(agentic_engine::budget::usd).unwrap_or_default(),
            models: self.models.join(", "),
        }
    }
}

/// The iteration of the innermost loop around `path`, from the loop's state when the step was dispatched.
fn iteration_of(path: &str, topo: &Topo<'_>, states: &BTreeMap<String, PlannerState>) -> Option<u64> {
    let mut ancestor = path;
    while let Some(i) = ancestor.rfind('/') {
        ancestor = &ancestor[..i];
        let is_loop = topo.kind(ancestor) == Some("loop");
        let from_state = states.get(ancestor).and_then(|s| s.state.get("iteration")).and_then(Value::as_u64);
        match (is_loop, from_state) {
            (_, Some(n)) if n > 0 => return Some(n),
            (true, _) => return Some(1),
            _ => {}
        }
    }
    None
}

fn decision(ps: &PlannerState, topo: &Topo<'_>) -> Decision {
    let node = topo.node(&ps.path);
    let next = ps
        .inflight
        .iter()
        .map(|c| {
            let child = node.and_then(|n| n.children.get(c.agent));
            let name = child.map(|n| n.spec.name.clone()).unwrap_or_else(|| format!("#{}", c.agent));
            if c.attempt > 1 { format!("{name} (attempt {})", c.attempt) } else { name }
        })
        .collect();
    let finished = ps.finished.as_ref().map(|f| match f {
        agentic_engine::Finish::Done => "done".to_string(),
        agentic_engine::Finish::DoneWith(v) => format!("done with {}", value_json(v, 200)),
    });
    Decision {
        path: ps.path.clone(),
        name: node.map(|n| n.spec.name.clone()).unwrap_or_else(|| ps.path.clone()),
        rationale: ps.rationale.clone(),
        next,
        finished,
        state: ps.state.clone(),
    }
}

/// The milestones as shown. A milestone's time has millisecond precision and the steps' microsecond: one that
/// ends a session (suspended, failed, completed, ...) is placed after the steps that ended within its
/// millisecond (`ends`: each step's end, µs), so it never shows before the step it follows.
fn milestone_views(milestones: &[Milestone], mapping: &TimeMap, ends: &[u64]) -> Vec<MilestoneView> {
    let mut out = Vec::with_capacity(milestones.len());
    let mut suspended_at: Option<u64> = None;
    for m in milestones {
        let waited = match m.kind {
            MilestoneKind::Resumed | MilestoneKind::NewTurn => {
                suspended_at.take().map(|s| duration_us(m.at_ms.saturating_sub(s) * 1_000))
            }
            _ => None,
        };
        if m.kind == MilestoneKind::Suspended {
            suspended_at = Some(m.at_ms);
        }
        out.push(MilestoneView {
            kind: m.kind.to_string(),
            seq: m.seq,
            at: timestamp_ms(m.at_ms),
            x: mapping.has_data().then(|| {
                let at = m.at_ms * 1_000;
                let ends_session = !matches!(
                    m.kind,
                    MilestoneKind::Started | MilestoneKind::Resumed | MilestoneKind::NewTurn | MilestoneKind::Forked
                );
                let after = ends.iter().filter(|&&e| e < at + 1_000).max().copied().filter(|_| ends_session);
                mapping.map(after.map_or(at, |e| e.max(at)))
            }),
            pending: m.pending.clone(),
            answers: m.answers.iter().map(|(k, v)| (k.clone(), value_json(v, 400))).collect(),
            error: m.error.clone(),
            forked_from: m.forked_from.clone(),
            waited,
        });
    }
    out
}

fn summary(run: &RunRecord, records: &[StepRecord], agents: &[AgentRow], mapping: &TimeMap) -> Summary {
    let detail_text = |v: &Value| match v {
        Value::Null => None,
        other => Some(value_line(other, 4_000)),
    };
    let (output, error) = match run.status {
        RunStatus::Completed => (detail_text(&run.detail), None),
        RunStatus::Failed | RunStatus::Cancelled => {
            let from_milestone = run.milestones.iter().rev().find_map(|m| m.error.clone());
            (None, detail_text(&run.detail).or(from_milestone))
        }
        _ => (None, None),
    };
    // The failed milestone names the failing agent's path; older runs only have it inside the message.
    let error_path = run
        .milestones
        .iter()
        .rev()
        .find(|m| m.kind == MilestoneKind::Failed)
        .and_then(|m| m.path.clone())
        .or_else(|| error.as_deref().and_then(error_path));
    let tokens_in: u64 = agents.iter().map(|a| a.tokens_in).sum();
    let tokens_out: u64 = agents.iter().map(|a| a.tokens_out).sum();
    let priced: Vec<f64> = records
        .iter()
        .filter_map(|r| r.invocation.as_ref().and_then(|i| i.usage.as_ref()).and_then(|u| u.cost_usd))
        .collect();
    let model_calls = records
        .iter()
        .filter_map(|r| r.invocation.as_ref().and_then(|i| i.usage.as_ref()))
        .map(|u| u.model_calls)
        .sum();
    let mut used = agentic_engine::budget::Usage::default();
    for u in records.iter().filter_map(|r| r.invocation.as_ref().and_then(|i| i.usage.as_ref())) {
        used.add(u);
    }
    let models = used.models.join(", ");
    let by_model = used
        .per_model()
        .into_iter()
        .map(|m| ModelRow {
            model: m.model,
            tokens_in: m.input_tokens,
            tokens_out: m.output_tokens,
            model_calls: m.model_calls,
            cost: m.cost_usd.map(agentic_engine::budget::usd).unwrap_or_default(),
        })
        .collect();
    Summary {
        by_model,
        models,
        model_calls,
        cost: if priced.is_empty() { String::new() } else { agentic_engine::budget::usd(priced.iter().sum()) },
        run_id: run.run_id.clone(),
        name: run.name.clone(),
        status: run.status.to_string(),
        created: timestamp_ms(run.created_at_ms),
        updated: timestamp_ms(run.updated_at_ms),
        active: duration_us(mapping.busy_us),
        wall: duration_us(mapping.wall_us(run)),
        steps: records.iter().filter(|r| !r.holds_calls()).count(),
        invocations: records.iter().filter(|r| r.invocation.is_some()).count(),
        retries: agents.iter().map(|a| a.retries).sum(),
        tokens_in,
        tokens_out,
        tokens_total: tokens_in + tokens_out,
        source: run.source.clone(),
        origin: None,
        forked_from: run.forked_from.as_ref().map(|f| ForkView { run_id: f.run_id.clone(), at_seq: f.at_seq }),
        output,
        error,
        error_path,
        pending: run
            .open_pending()
            .iter()
            .map(|p| PendingView { id: p.id.clone(), agent: p.agent.clone(), prompt: truncate(&p.prompt, 2_000) })
            .collect(),
        answers: run.answers.iter().map(|(k, v)| (k.clone(), value_json(v, 400))).collect(),
    }
}

/// Maps real time (µs since the epoch) to display time: time since the first invocation, with idle gaps that
/// contain a suspension or a resumption (or that are very long) replaced by a fixed-width break.
struct TimeMap {
    t0: u64,
    t_end: u64,
    busy_us: u64,
    break_w: u64,
    /// Collapsed gaps: (start, end, kind, label).
    gaps: Vec<(u64, u64, &'static str, String)>,
}

impl TimeMap {
    fn new(run: &RunRecord, records: &[StepRecord]) -> Self {
        let mut intervals: Vec<(u64, u64)> = records
            .iter()
            .filter_map(|r| r.invocation.as_ref())
            .map(|i| (i.started_at_us, i.ended_at_us.max(i.started_at_us)))
            .collect();
        intervals.sort_unstable();
        let Some(&(t0, _)) = intervals.first() else {
            return TimeMap { t0: 0, t_end: 0, busy_us: 0, break_w: 0, gaps: Vec::new() };
        };
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (s, e) in intervals {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let busy_us: u64 = merged.iter().map(|(s, e)| e - s).sum();
        let t_end = merged.last().map_or(t0, |m| m.1);
        let break_w = (busy_us / 25).max(1);
        let windows: Vec<(u64, u64)> = merged.windows(2).map(|w| (w[0].1, w[1].0)).collect();
        // Each suspension, resumption, fork or new turn marks one gap: the longest one its time falls in (milliseconds,
        // so within 1 ms of either end). A short gap between two steps next to it is not a wait.
        let near = |m: &Milestone, (g0, g1): (u64, u64)| {
            let t = m.at_ms.saturating_mul(1_000);
            t + 1_000 >= g0 && t <= g1 + 1_000
        };
        let marked: Vec<Option<usize>> = run
            .milestones
            .iter()
            .map(|m| {
                if !matches!(
                    m.kind,
                    MilestoneKind::Suspended | MilestoneKind::Resumed | MilestoneKind::NewTurn | MilestoneKind::Forked
                ) {
                    return None;
                }
                (0..windows.len()).filter(|&i| near(m, windows[i])).max_by_key(|&i| windows[i].1 - windows[i].0)
            })
            .collect();
        let mut gaps = Vec::new();
        for (i, &(g0, g1)) in windows.iter().enumerate() {
            let inside: Vec<&Milestone> =
                run.milestones.iter().zip(&marked).filter(|(_, mark)| **mark == Some(i)).map(|(m, _)| m).collect();
            let waiting = !inside.is_empty();
            let len = g1 - g0;
            if waiting {
                let mut parts = Vec::new();
                for m in &inside {
                    match m.kind {
                        MilestoneKind::Suspended if !m.pending.is_empty() => {
                            parts.push(format!("suspended, waiting for {}", m.pending.join(", ")))
                        }
                        MilestoneKind::Resumed if !m.answers.is_empty() => parts.push(format!(
                            "resumed with {}",
                            m.answers
                                .iter()
                                .map(|(k, v)| match run.answered_by.get(k) {
                                    Some(by) => format!("{k} = {} by {by}", value_json(v, 60)),
                                    None => format!("{k} = {}", value_json(v, 60)),
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        )),
                        MilestoneKind::Forked => parts.push(match &m.forked_from {
                            Some(from) => format!("forked from {from} at step {}", m.seq),
                            None => format!("forked at step {}", m.seq),
                        }),
                        MilestoneKind::Suspended | MilestoneKind::Resumed | MilestoneKind::NewTurn => {
                            parts.push(m.kind.as_str().replace('_', " "))
                        }
                        _ => {}
                    }
                }
                // A fork's gap is the time between the original run's step and the fork's next one.
                let kind = if inside.iter().any(|m| m.kind == MilestoneKind::Forked) { "forked" } else { "suspended" };
                gaps.push((g0, g1, kind, parts.join(" · ")));
            } else if len > 1_000_000 && len > busy_us / 4 && len > break_w {
                gaps.push((g0, g1, "idle", "idle".to_string()));
            }
        }
        TimeMap { t0, t_end, busy_us, break_w, gaps }
    }

    fn has_data(&self) -> bool {
        self.t_end > 0
    }

    /// Display time of real time `t` (clamped to the run's span).
    fn map(&self, t: u64) -> u64 {
        let t = t.clamp(self.t0, self.t_end);
        let mut shift: i128 = 0;
        for (g0, g1, _, _) in &self.gaps {
            if t >= *g1 {
                shift += i128::from(g1 - g0) - i128::from(self.break_w);
            } else if t > *g0 {
                // Inside a gap: proportionally inside its break.
                let frac = (t - g0) as f64 / (g1 - g0) as f64;
                let base = i128::from(*g0 - self.t0) - shift;
                return (base + (frac * self.break_w as f64) as i128).max(0) as u64;
            } else {
                break;
            }
        }
        (i128::from(t - self.t0) - shift).max(0) as u64
    }

    fn timeline(&self) -> Timeline {
        if !self.has_data() {
            return Timeline::default();
        }
        Timeline {
            span: self.map(self.t_end).max(1),
            breaks: self
                .gaps
                .iter()
                .map(|(g0, g1, kind, label)| Break {
                    x: self.map(*g0),
                    w: self.break_w,
                    real: duration_us(g1 - g0),
                    kind: kind.to_string(),
                    label: label.clone(),
                })
                .collect(),
        }
    }

    /// Wall-clock duration: first start (or milestone) to the last end (or milestone).
    fn wall_us(&self, run: &RunRecord) -> u64 {
        let ms = run.milestones.iter().map(|m| m.at_ms * 1_000);
        let first = ms.clone().min().into_iter().chain(self.has_data().then_some(self.t0)).min();
        let last = ms.max().into_iter().chain(self.has_data().then_some(self.t_end)).max();
        match (first, last) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step_at(seq: u64, start_us: u64, end_us: u64) -> StepRecord {
        StepRecord {
            run_id: "r".into(),
            seq,
            agent_path: format!("root/{seq}"),
            delta: Vec::new(),
            planner_states: Vec::new(),
            invocation: Some(agentic_engine::InvocationRecord {
                agent: format!("a{seq}"),
                path: format!("root/{seq}"),
                inputs: serde_json::Map::new(),
                output: serde_json::Value::Null,
                started_at_us: start_us,
                ended_at_us: end_us,
                attempt: 1,
                tokens: None,
                usage: None,
                error: None,
                item: None,
            }),
            async_started: false,
            failed: false,
            item: None,
            item_end: false,
            bindings: None,
            calls: Vec::new(),
        }
    }

    fn milestone(at_ms: u64, kind: &str) -> Milestone {
        Milestone {
            at_ms,
            kind: serde_json::from_value(serde_json::Value::String(kind.to_string())).unwrap(),
            seq: 0,
            pending: Vec::new(),
            answers: BTreeMap::new(),
            error: None,
            path: None,
            forked_from: None,
        }
    }

    #[test]
    fn a_wait_is_one_break_even_with_short_gaps_between_steps_next_to_it() {
        // Step 1 ends at 10.0 ms, the run suspends at 10 ms; it resumes at 5 010 ms, and the steps after it
        // have 0.3 ms gaps between them, all within a millisecond of the resumption.
        let records = [
            step_at(1, 9_000, 10_000),
            step_at(2, 5_010_100, 5_010_200),
            step_at(3, 5_010_500, 5_010_600),
            step_at(4, 5_010_900, 5_011_000),
        ];
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r", "name": "n", "fingerprint": "f", "status": "completed",
            "created_at_ms": 9, "updated_at_ms": 5_011,
            "milestones": [],
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let run = RunRecord {
            milestones: vec![milestone(9, "started"), milestone(10, "suspended"), milestone(5_010, "resumed")],
            ..run
        };
        let map = TimeMap::new(&run, &records);
        let gaps: Vec<(u64, u64, &str)> = map.gaps.iter().map(|(a, b, k, _)| (*a, *b, *k)).collect();
        assert_eq!(gaps, [(10_000, 5_010_100, "suspended")]);
        assert_eq!(map.gaps[0].3, "suspended · resumed");
    }

    #[test]
    fn a_fork_is_the_break_between_the_original_steps_and_its_own() {
        // Steps 1 and 2 are the original's (copied); the fork was made at 60 s and resumed at once.
        let records = [step_at(1, 9_000, 10_000), step_at(2, 10_100, 11_000), step_at(3, 60_000_100, 60_001_000)];
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "f", "name": "n", "fingerprint": "f", "status": "completed",
            "created_at_ms": 60_000, "updated_at_ms": 60_001,
            "forked_from": {"run_id": "orig", "at_seq": 2},
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let forked = Milestone { forked_from: Some("orig".into()), seq: 2, ..milestone(60_000, "forked") };
        let run = RunRecord {
            milestones: vec![milestone(9, "started"), forked, Milestone { seq: 2, ..milestone(60_000, "resumed") }],
            ..run
        };
        let map = TimeMap::new(&run, &records);
        let gaps: Vec<(u64, u64, &str)> = map.gaps.iter().map(|(a, b, k, _)| (*a, *b, *k)).collect();
        assert_eq!(gaps, [(11_000, 60_000_100, "forked")]);
        assert_eq!(map.gaps[0].3, "forked from orig at step 2 · resumed");
        let shown = milestone_views(&run.milestones, &map, &[]);
        assert_eq!(shown[1].forked_from.as_deref(), Some("orig"));
        assert_eq!(shown[2].waited, None, "a resumption after a fork waited for nobody");
        let model = build(None, &run, &records);
        let origin = model.summary.forked_from.map(|f| (f.run_id, f.at_seq));
        assert_eq!(origin, Some(("orig".to_string(), 2)));
    }

    #[test]
    fn a_milestone_ending_a_session_is_drawn_after_the_steps_of_its_millisecond() {
        // Two steps within the first millisecond; the run failed in that millisecond (its time: 0 ms).
        let records = [step_at(1, 60, 120), step_at(2, 150, 300)];
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "f", "name": "n", "fingerprint": "f", "status": "failed",
            "created_at_ms": 0, "updated_at_ms": 0,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let run = RunRecord { milestones: vec![milestone(0, "started"), milestone(0, "failed")], ..run };
        let map = TimeMap::new(&run, &records);
        let shown = milestone_views(&run.milestones, &map, &[120, 300]);
        assert_eq!(shown[0].x, Some(map.map(0)), "a start stays at its time");
        assert_eq!(shown[1].x, Some(map.map(300)), "the failure comes after the last step");
    }

    /// A call record of the invocation at `root/1` (seq `seq`) holding `entries`.
    fn calls_at(seq: u64, entries: Vec<agentic_engine::CallEntry>) -> StepRecord {
        StepRecord { calls: entries, ..StepRecord::new("r", seq, "root/1") }
    }

    /// The tool entry of call 0 (`charge {"amount": 3}`) with `status`.
    fn charge(status: agentic_engine::ToolCallStatus) -> agentic_engine::ToolCallEntry {
        agentic_engine::ToolCallEntry::new(0, 0, "c1", "charge", serde_json::json!({"amount": 3}), status)
    }

    #[test]
    fn journaled_calls_are_a_table_of_their_agent_not_steps() {
        use agentic_engine::{CallEntry, ModelTurnEntry, ToolCallStatus};
        let model = |turn: u32, response: Value| {
            CallEntry::Model(ModelTurnEntry {
                turn,
                model: "gpt-x".into(),
                request: Vec::new(),
                options: None,
                purpose: None,
                response,
                usage: Default::default(),
                at_us: 5,
            })
        };
        let approved = agentic_engine::ToolCallEntry { by: Some("token".into()), ..charge(ToolCallStatus::Approved) };
        let finished = agentic_engine::ToolCallEntry {
            result: Some(serde_json::json!({"ok": true})),
            ..charge(ToolCallStatus::Finished)
        };
        let rejected = agentic_engine::ToolCallEntry {
            n: 1,
            tool: "refund".into(),
            message: Some("too much".into()),
            by: Some("cli:ann".into()),
            ..charge(ToolCallStatus::Rejected)
        };
        let mut done = step_at(5, 1_000, 2_000);
        done.agent_path = "root/1".into();
        if let Some(inv) = done.invocation.as_mut() {
            inv.agent = "clerk".into();
            inv.path = "root/1".into();
        }
        let records = [
            calls_at(
                1,
                vec![
                    model(
                        0,
                        serde_json::json!({"message": {"role": "assistant", "content": "",
                    "tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 3}}]}}),
                    ),
                    CallEntry::Tool(charge(ToolCallStatus::AwaitingApproval)),
                ],
            ),
            calls_at(2, vec![CallEntry::Tool(approved), CallEntry::Tool(charge(ToolCallStatus::Started))]),
            calls_at(3, vec![CallEntry::Tool(finished), CallEntry::Tool(rejected)]),
            calls_at(4, vec![model(1, serde_json::json!({"message": {"role": "assistant", "content": "Charged 3."}}))]),
            done,
        ];
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r", "name": "n", "fingerprint": "f", "status": "completed",
            "created_at_ms": 0, "updated_at_ms": 2,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let m = build(None, &run, &records);
        let steps: Vec<(u64, Option<&str>)> = m.data.steps.iter().map(|s| (s.seq, s.label)).collect();
        assert_eq!(steps, [(5, None)], "call records are not steps (not `skipped`)");
        assert_eq!(m.summary.steps, 1);
        assert_eq!(m.calls.len(), 1);
        assert_eq!((m.calls[0].path.as_str(), m.calls[0].name.as_str()), ("root/1", "clerk"));
        let rows: Vec<String> = m.calls[0]
            .rows
            .iter()
            .map(|r| {
                [
                    r.seq.to_string(),
                    r.turn.to_string(),
                    r.what.to_string(),
                    r.name.clone(),
                    r.status.clone(),
                    r.args.clone(),
                    r.result.clone(),
                    r.decision.clone(),
                    r.by.clone(),
                ]
                .join(" | ")
            })
            .collect();
        assert_eq!(
            rows,
            [
                "1 | 0 | model | gpt-x | answered |  | calls charge |  | ",
                r#"1 | 0 | tool | charge #0 | finished | {"amount":3} | {"ok":true} | approved | token"#,
                r#"3 | 0 | tool | refund #1 | rejected | {"amount":3} |  | rejected: too much | cli:ann"#,
                "4 | 1 | model | gpt-x | answered |  | Charged 3. |  | ",
            ]
        );
        let html = crate::render_run_without_topology(&run, &records, "none");
        let row = concat!(
            r#"<tr class="call-tool"><td class="num">1</td><td>1</td><td class="num">0</td>"#,
            r#"<td>tool <strong>charge #0</strong></td><td>finished</td><td><code>{&quot;amount&quot;:3}</code></td>"#,
            r#"<td>{&quot;ok&quot;:true}</td><td>approved</td><td>token</td></tr>"#
        );
        assert!(html.contains(row), "{}", &html[html.find("id=\"calls\"").unwrap_or(0)..][..3000.min(html.len())]);
        let at = html.find("<h3").unwrap_or(0);
        assert!(
            html.contains(r#"<h3 class="calls-agent">clerk <code>root&#x2f;1</code></h3>"#),
            "{}",
            &html[at..at + 200]
        );
        assert!(html.contains("<td>rejected: too much</td><td>cli:ann</td>"));
    }

    /// A mapper item's call shows its path and item as its pending ids do (`root/1#0`), not the scope layer.
    #[test]
    fn a_mapper_items_calls_show_the_path_and_the_item() {
        use agentic_engine::{CallEntry, ToolCallStatus};
        let record = StepRecord {
            item: Some("|root/1#0".into()),
            ..calls_at(1, vec![CallEntry::Tool(charge(ToolCallStatus::Started))])
        };
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r", "name": "n", "fingerprint": "f", "status": "suspended",
            "created_at_ms": 0, "updated_at_ms": 2,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let records = [record];
        let m = build(None, &run, &records);
        let items: Vec<&str> = m.calls[0].rows.iter().map(|r| r.item.as_str()).collect();
        assert_eq!(items, ["root/1#0"]);
        let html = crate::render_run_without_topology(&run, &records, "none");
        assert!(
            html.contains("<td>1 <code>root&#x2f;1#0</code></td>"),
            "{}",
            &html[html.find("call-tool").unwrap_or(0)..]
        );
    }

    #[test]
    fn error_paths_are_found_in_engine_messages() {
        assert_eq!(error_path("agent `x` (root/1/0) failed: boom").as_deref(), Some("root/1/0"));
        assert_eq!(error_path("agent `x` (root) timed out after 5 ms").as_deref(), Some("root"));
        assert_eq!(error_path("run cancelled"), None);
    }
}
