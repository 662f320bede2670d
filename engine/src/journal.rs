//! The journal's records: what a run's steps leave behind ([`StepRecord`], with the [`InvocationRecord`] of
//! the agent that ran and the [`PlannerState`] of the composite that advanced), what a suspended run waits for
//! ([`PendingResponse`]), and the [`RunImage`] a run resumes from, folded from its records. Every completed
//! step at every nesting level produces one record: the state delta (only the keys written, in the shared
//! state or a mapper item's layer), the execution state of the planner that advanced together with the calls
//! it has in flight, and the invocation record. Folding the records in sequence order ([`RunImage::apply`])
//! rebuilds the state, the history, and the exact position of every composite that was still running.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::StoreError;

/// Token usage of one model call or one invocation (sum of its calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt (input) tokens.
    pub input: u64,
    /// Completion (output) tokens.
    pub output: u64,
}

/// One completed (or failed) invocation, as kept in the scope's history and in the step journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationRecord {
    /// Agent name.
    pub agent: String,
    /// Stable path id of the agent in the system tree (`root/1/0`).
    pub path: String,
    /// The inputs the agent read, after coercion.
    pub inputs: Map<String, Value>,
    /// The agent's result (`null` when it failed or returned nothing).
    pub output: Value,
    /// Start time, microseconds since the Unix epoch.
    pub started_at_us: u64,
    /// End time, microseconds since the Unix epoch.
    pub ended_at_us: u64,
    /// Attempt number, 1-based (retries by an error handler increase it).
    pub attempt: u32,
    /// Tokens the invocation used, when it called a model.
    pub tokens: Option<TokenUsage>,
    /// What its model calls used (tokens, calls, cost, models; SPEC.md §3), when it called a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<crate::usage::Usage>>,
    /// The error message when the invocation failed.
    pub error: Option<String>,
    /// The parallel mapper item the invocation served (`#3`, `#3#0` nested; [`crate::InvocationContext::item`]),
    /// absent outside mappers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
}

impl InvocationRecord {
    /// How many invocations of `agent` at `path` for mapper item `item` completed without error in `history`:
    /// the occurrence an idempotency key counts, the same before and after a resume (the journal keeps
    /// exactly the completed ones; failed attempts and compensations are not counted).
    pub fn completed_in(history: &[InvocationRecord], agent: &str, path: &str, item: Option<&str>) -> u32 {
        let n = history
            .iter()
            .filter(|r| r.error.is_none() && r.path == path && r.agent == agent && r.item.as_deref() == item)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The trajectory of a run (SPEC.md §6): the names of the agents whose invocations in `history` completed
    /// without error (composites included), in the order they started. The same for a run's history in memory
    /// (which holds its failed attempts too) and as the journal rebuilds it.
    pub fn trajectory(history: &[InvocationRecord]) -> Vec<String> {
        let mut started: Vec<&InvocationRecord> = history.iter().filter(|r| r.error.is_none()).collect();
        started.sort_by_key(|r| r.started_at_us);
        started.iter().map(|r| r.agent.clone()).collect()
    }
}

/// A sub-agent call in flight, as journaled with its planner's state so a resume can dispatch it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Sub-agent index.
    pub agent: usize,
    /// Planner tag.
    pub tag: u64,
    /// Call bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bindings: Option<Map<String, Value>>,
    /// Whether the output is written to the agent's output key.
    pub write_output: bool,
    /// Whether the tag numbers a mapped item ([`AgentCall::item`](crate::AgentCall::item); absent: no).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub item: bool,
    /// Attempt number of the call in flight, 1-based.
    pub attempt: u32,
    /// The call's number within its composite's invocation, which [`InflightChange::ended`] refers to
    /// (0 in records written before calls were numbered).
    #[serde(default)]
    pub id: u64,
}

/// The calls in flight of a composite as a change to its previous record: what a fan-out journals at each
/// completion instead of the whole list (O(1) per step instead of O(calls in flight)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InflightChange {
    /// Calls started (or restarted for another attempt) since the previous record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub started: Vec<CallRecord>,
    /// [`CallRecord::id`]s of the calls no longer in flight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ended: Vec<u64>,
}

/// The execution state of one composite at the time of a step: its planner's state and its calls in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannerState {
    /// Path id of the composite that owns the planner.
    pub path: String,
    /// The scope layer of the mapper item the composite's invocation serves (`|root/0#3`), when it runs once
    /// per item: each item's
    /// invocation has its own state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// [`crate::planner::Planner::execution_state`].
    pub state: Value,
    /// Calls started and not yet completed (including the ones the planner just decided and calls waiting
    /// for a human).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inflight: Vec<CallRecord>,
    /// When set, `state` is not journaled: these JSON Patch operations (RFC 6902) turn the previous record's
    /// state into this one ([`crate::Planner::execution_state_patch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_patch: Option<Value>,
    /// When set, `inflight` is not journaled: the calls in flight are the previous record's with this change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight_change: Option<InflightChange>,
    /// Set when the planner decided to finish: a resume finishes the composite at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Finish>,
    /// Why the planner decided, when it says ([`crate::Planner::rationale`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Completions handed to the planner that it did not consume (it panicked deciding): a restart hands
    /// them over again, so the agents that completed do not run again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconsumed: Vec<CompletionRecord>,
}

/// A sub-agent's completion as journaled while its planner has not consumed it ([`PlannerState::unconsumed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRecord {
    /// The call that completed.
    pub call: CallRecord,
    /// Its result.
    pub output: Value,
    /// True when an optional agent was skipped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// True when the result is an error handler's substitute.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub substituted: bool,
}

/// A planner's decision to finish, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// [`crate::Action::Done`].
    Done,
    /// [`crate::Action::DoneWith`].
    DoneWith(Value),
}

/// One journal record: a completed step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Run id (memory id).
    pub run_id: String,
    /// Step sequence number within the run, from 1, gap-free.
    pub seq: u64,
    /// Path id of the agent whose completion this step records.
    pub agent_path: String,
    /// The keys it wrote, in write order (`null` = removed).
    pub delta: Vec<(String, Value)>,
    /// Execution states of the planners that changed with this step (the parent's, after deciding).
    pub planner_states: Vec<PlannerState>,
    /// The invocation (absent for skipped optional agents and async starts).
    pub invocation: Option<InvocationRecord>,
    /// True when this step records the start of an async agent (its completion is a later record).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub async_started: bool,
    /// True when this step records a failed attempt (`invocation` holds its error): nothing completed, no
    /// planner advanced; what follows is a retry, a substitution, or the failure of the composite.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// The layer of the mapper item the delta was written to (`|root/0#3`: the item qualified by the mapped
    /// call's path; absent: the shared state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// True when this step completes the mapped call serving `item`: the item's layer (and the layers nested
    /// in it) end here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub item_end: bool,
    /// The values bound to the async agent whose start this step records (a mapper item's), so that a resume
    /// restarts it in its item; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bindings: Option<Map<String, Value>>,
    /// Calls inside the invocation at `agent_path` (in `item`'s layer) that is still running: its model turns
    /// and tool calls so far (SPEC.md §4). Such a record has no invocation and no delta; the invocation's
    /// completion or failed attempt ends them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<crate::tool_call::CallEntry>,
}

impl StepRecord {
    /// A record of `run_id`'s step `seq` at `agent_path` with nothing in it yet.
    pub fn new(run_id: impl Into<String>, seq: u64, agent_path: impl Into<String>) -> Self {
        StepRecord {
            run_id: run_id.into(),
            seq,
            agent_path: agent_path.into(),
            delta: Vec::new(),
            planner_states: Vec::new(),
            invocation: None,
            async_started: false,
            failed: false,
            item: None,
            item_end: false,
            bindings: None,
            calls: Vec::new(),
        }
    }

    /// Whether this record only journals calls of an invocation still running (SPEC.md §4): it has calls and
    /// no invocation. It is not a step of the run's timeline (no agent completed, was skipped or substituted).
    pub fn holds_calls(&self) -> bool {
        self.invocation.is_none() && !self.calls.is_empty()
    }
}

/// The mapper item of scope layer `layer` (a journaled record's `item`): the `#<tag>` of each of its levels
/// (`|root/0#3|root/0/1/0#0` is `#3#0`), what follows an agent's path in its pending ids and in `show --calls`
/// (`root/0#3`).
pub fn item_of_layer(layer: &str) -> String {
    layer.split('|').filter_map(|level| level.rfind('#').map(|i| &level[i..])).collect()
}

/// The key of a composite's state in [`RunImage::planners`]: its path, followed by its mapper item if any
/// layer (`root/0/1|root/0#3`).
pub fn planner_key(path: &str, item: Option<&str>) -> String {
    match item {
        Some(item) => [path, item].concat(),
        None => path.to_string(),
    }
}

/// An async agent started inside a mapper item and not finished ([`RunImage::async_in_items`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AsyncInItem {
    /// The agent's path.
    pub path: String,
    /// The item's scope layer (`|root/0#3`), where it reads and writes.
    pub layer: String,
    /// The values bound to its invocation (the item's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bindings: Option<Map<String, Value>>,
    /// How many are running (each iteration of a loop in the item starts one).
    #[serde(default = "one")]
    pub running: u32,
}

fn one() -> u32 {
    1
}

/// [`RunImage::async_running`] as counts by path, or as the list of paths images held before the counts.
fn running_counts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Running {
        Counts(BTreeMap<String, u32>),
        Paths(Vec<String>),
    }
    Ok(match Running::deserialize(d)? {
        Running::Counts(counts) => counts,
        Running::Paths(paths) => paths.into_iter().map(|p| (p, 1)).collect(),
    })
}

/// A run rebuilt from its journal: state, history, and the composites still in progress.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunImage {
    /// Run id.
    pub run_id: String,
    /// Sequence number of the last record applied.
    pub seq: u64,
    /// The state.
    pub state: Map<String, Value>,
    /// Latest execution state of every composite still in progress, by [`planner_key`] (path and item).
    pub planners: BTreeMap<String, PlannerState>,
    /// The layers of the mapper items in progress, by layer (`|root/0#3`): what their invocations wrote (`null`: the
    /// item removed the key).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub layers: BTreeMap<String, Map<String, Value>>,
    /// Invocation history.
    pub history: Vec<InvocationRecord>,
    /// Async agents started (outside mapper items) and not finished: how many at each path (each iteration of
    /// a loop starts one). Images saved before the counts hold a list of paths, read as one each.
    #[serde(default, deserialize_with = "running_counts")]
    pub async_running: BTreeMap<String, u32>,
    /// Async agents started inside a mapper item and not finished, by [`planner_key`] (path and item layer):
    /// what their restart on resume needs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub async_in_items: BTreeMap<String, AsyncInItem>,
    /// The root's result when the last record is the root's completion (the run finished; a crash before
    /// its status was saved loses nothing).
    #[serde(default)]
    pub root_done: Option<Value>,
    /// What the failed attempts spent on models (they are not in the history; their calls were paid for):
    /// one entry per failed attempt that called a model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_usage: Vec<FailedUsage>,
    /// The calls journaled by invocations still running, by [`planner_key`] (path and item layer): what
    /// they continue from ([`crate::CallsView::resumed`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calls: BTreeMap<String, Vec<crate::tool_call::CallEntry>>,
    /// What people decided about tool calls (approved, edited, rejected, responded; an in-doubt call's
    /// answer), in journal order, with who decided: what `show` and `GET /runs/{id}` list (SPEC.md §4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<DecisionRecord>,
}

/// A person's decision about a tool call, as the run image keeps it ([`RunImage::decisions`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The step that journaled it.
    pub seq: u64,
    /// The calling agent's path.
    pub path: String,
    /// The mapper item layer, when the agent serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// The call's entry: its tool, arguments (as they ran, after an edit), status (the decision), `by`.
    pub call: crate::tool_call::ToolCallEntry,
}

impl DecisionRecord {
    /// The decision as `show --json` and `GET /runs/{id}` give it: `{seq, path, item?, n, tool, decision,
    /// args, by, message?, result?}` (`decision`: `approved`, `edited`, `rejected`, `responded`, or
    /// for a call in doubt, `answered` (its result given), `retried` or `failed`).
    pub fn to_json(&self) -> Value {
        use crate::tool_call::ToolCallStatus;
        let c = &self.call;
        let decision = match c.status {
            ToolCallStatus::Finished if c.error.is_some() => "failed",
            ToolCallStatus::Finished => "answered",
            ToolCallStatus::Started => "retried",
            other => other.as_str(),
        };
        let mut v = json!({"seq": self.seq, "path": self.path, "n": c.n, "tool": c.tool, "decision": decision,
                           "args": c.args, "by": c.by});
        if let Some(item) = &self.item {
            v["item"] = json!(item);
        }
        if let Some(m) = &c.message {
            v["message"] = json!(m);
        }
        if let Some(r) = &c.result {
            v["result"] = r.clone();
        }
        v
    }
}

/// The model usage of one failed attempt ([`RunImage::failed_usage`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedUsage {
    /// Agent name.
    pub agent: String,
    /// Agent path.
    pub path: String,
    /// What its calls used.
    pub usage: crate::usage::Usage,
}

impl RunImage {
    /// An empty image for `run_id`.
    pub fn new(run_id: impl Into<String>) -> Self {
        RunImage { run_id: run_id.into(), ..Default::default() }
    }

    /// Applies the next record.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when the record belongs to another run or its sequence number is not the next.
    pub fn apply(&mut self, record: &StepRecord) -> Result<(), StoreError> {
        let corrupt = |message: String| StoreError::Corrupt {
            run_id: self.run_id.clone(),
            record: format!("step {}", record.seq),
            message,
        };
        if record.run_id != self.run_id {
            return Err(corrupt(format!("belongs to run `{}`", record.run_id)));
        }
        if record.seq != self.seq + 1 {
            return Err(corrupt(format!("expected step {} next", self.seq + 1)));
        }
        self.seq = record.seq;
        for entry in &record.calls {
            use crate::tool_call::{CallEntry, ToolCallStatus as S};
            if let CallEntry::Tool(call) = entry {
                // A decision, or an answer about a call in doubt (its result, `retry`: the new start, `fail`).
                let decided = matches!(call.status, S::Approved | S::Edited | S::Rejected | S::Responded)
                    || (matches!(call.status, S::Finished | S::Started) && call.by.is_some());
                if decided {
                    let (path, item) = (record.agent_path.clone(), record.item.clone());
                    self.decisions.push(DecisionRecord { seq: record.seq, path, item, call: call.clone() });
                }
            }
        }
        if !record.calls.is_empty() && record.invocation.is_none() {
            let key = planner_key(&record.agent_path, record.item.as_deref());
            self.calls.entry(key).or_default().extend(record.calls.iter().cloned());
            return Ok(());
        }
        if record.invocation.is_some() && !self.calls.is_empty() {
            // The invocation ended (completed or failed): its calls are not continued.
            self.calls.remove(&planner_key(&record.agent_path, record.item.as_deref()));
        }
        if record.failed {
            // A failed attempt changes nothing a resume needs but what it spent; the journal and reports keep it.
            if let Some(inv) = &record.invocation
                && let Some(usage) = &inv.usage
            {
                let spent = FailedUsage { agent: inv.agent.clone(), path: inv.path.clone(), usage: (**usage).clone() };
                self.failed_usage.push(spent);
            }
            return Ok(());
        }
        match &record.item {
            None => {
                for (k, v) in &record.delta {
                    if v.is_null() {
                        self.state.remove(k);
                    } else {
                        self.state.insert(k.clone(), v.clone());
                    }
                }
            }
            Some(item) if !record.delta.is_empty() => {
                let layer = self.layers.entry(item.clone()).or_default();
                for (k, v) in &record.delta {
                    layer.insert(k.clone(), v.clone());
                }
            }
            Some(_) => {}
        }
        let path = &record.agent_path;
        match (record.async_started, &record.item) {
            (true, None) => *self.async_running.entry(path.clone()).or_default() += 1,
            (true, Some(layer)) => {
                let started = AsyncInItem {
                    path: path.clone(),
                    layer: layer.clone(),
                    bindings: record.bindings.clone(),
                    running: 0,
                };
                self.async_in_items.entry(planner_key(path, Some(layer))).or_insert(started).running += 1;
            }
            (false, None) => {
                if let Some(n) = self.async_running.get_mut(path) {
                    *n -= 1;
                    if *n == 0 {
                        self.async_running.remove(path);
                    }
                }
            }
            (false, Some(layer)) => {
                let key = planner_key(path, Some(layer));
                if let Some(started) = self.async_in_items.get_mut(&key) {
                    started.running -= 1;
                    if started.running == 0 {
                        self.async_in_items.remove(&key);
                    }
                }
            }
        }
        if !record.async_started {
            // The agent at `path` completed (in its item): it and everything below it are no longer in
            // progress.
            let prefix = format!("{path}/");
            let item = record.item.as_deref();
            self.planners.retain(|_, p| {
                let below = p.path == *path || p.path.starts_with(&prefix);
                !(below && in_item(p.item.as_deref(), item))
            });
        }
        if let (true, Some(item)) = (record.item_end, &record.item) {
            let nested = format!("{item}|");
            self.layers.retain(|k, _| k != item && !k.starts_with(&nested));
        }
        for ps in &record.planner_states {
            let key = planner_key(&ps.path, ps.item.as_deref());
            if ps.state_patch.is_none() && ps.inflight_change.is_none() {
                self.planners.insert(key, ps.clone());
                continue;
            }
            // A change to the composite's previous record; without one it cannot be folded, and the composite
            // starts afresh on resume rather than from a partial state.
            let folded = self.planners.get_mut(&key).is_some_and(|prev| fold_change(prev, ps));
            if !folded {
                tracing::warn!(run_id = %self.run_id, path = %key, seq = record.seq,
                    "a planner state change does not fit the composite's previous record; it restarts on resume");
                self.planners.remove(&key);
            }
        }
        if let Some(inv) = &record.invocation {
            self.history.push(inv.clone());
        }
        self.root_done = (path == "root" && !record.async_started)
            .then(|| record.invocation.as_ref().map(|i| i.output.clone()).unwrap_or(Value::Null));
        Ok(())
    }

    /// Folds a journal from the start.
    ///
    /// # Errors
    /// As [`RunImage::apply`].
    pub fn fold<'a>(run_id: &str, records: impl IntoIterator<Item = &'a StepRecord>) -> Result<Self, StoreError> {
        let mut image = RunImage::new(run_id);
        for r in records {
            image.apply(r)?;
        }
        Ok(image)
    }
}

/// Whether a composite running in mapper item `state_item` is inside `item` (every one is inside `None`).
fn in_item(state_item: Option<&str>, item: Option<&str>) -> bool {
    match item {
        None => true,
        Some(item) => {
            state_item.is_some_and(|s| s == item || (s.starts_with(item) && s[item.len()..].starts_with('|')))
        }
    }
}

/// Folds the change `ps` journals into `prev` in place (its state patched, its calls in flight changed):
/// O(change), not O(state), so that folding a fan-out's K records stays O(K). Returns false when the patch
/// does not apply to `prev`'s state (which is then not to be used).
fn fold_change(prev: &mut PlannerState, ps: &PlannerState) -> bool {
    match &ps.state_patch {
        Some(ops) => {
            let Ok(patch) = json_patch::Patch::deserialize(ops) else { return false };
            if json_patch::patch(&mut prev.state, &patch).is_err() {
                return false;
            }
        }
        None => prev.state.clone_from(&ps.state),
    }
    match &ps.inflight_change {
        Some(change) => {
            let ended: std::collections::HashSet<u64> = change.ended.iter().copied().collect();
            prev.inflight.retain(|c| !ended.contains(&c.id));
            prev.inflight.extend(change.started.iter().cloned());
        }
        None => prev.inflight.clone_from(&ps.inflight),
    }
    prev.finished.clone_from(&ps.finished);
    prev.rationale.clone_from(&ps.rationale);
    prev.unconsumed.clone_from(&ps.unconsumed);
    true
}

/// Agent names by path as a run's journal and its pending responses give them: each invocation record names
/// its agent, and a pending `tool_call` or `in_doubt` response names the agent at its data's `agent_path` (an
/// invocation still waiting has no record yet). Call records (no invocation) name no agent on their own.
pub fn journal_agent_names(
    records: &[StepRecord],
    pending: &[crate::pending::PendingResponse],
) -> std::collections::BTreeMap<String, String> {
    let mut names = std::collections::BTreeMap::new();
    for p in pending {
        if let Some(path) = p.data.get("agent_path").and_then(Value::as_str) {
            names.insert(path.to_string(), p.agent.clone());
        }
    }
    for r in records {
        if let Some(inv) = &r.invocation {
            names.insert(r.agent_path.clone(), inv.agent.clone());
        }
    }
    names
}

/// The journaled calls of a run in journal order, as `GET /api/v1/runs/{id}/calls` and `agentic show --calls
/// --json` give them (SPEC.md §4): one object per [`crate::tool_call::CallEntry`] of every call record, `{seq, path, agent,
/// item?}` followed by the entry's own fields (`type`: `model` or `tool`, ...). `agent` is the name `names`
/// gives the path ([`journal_agent_names`]), `null` when it has none.
pub fn calls_json(records: &[StepRecord], names: &std::collections::BTreeMap<String, String>) -> Vec<Value> {
    let mut out = Vec::new();
    for r in records.iter().filter(|r| !r.calls.is_empty()) {
        for entry in &r.calls {
            let mut row = Map::new();
            row.insert("seq".to_string(), json!(r.seq));
            row.insert("path".to_string(), json!(r.agent_path));
            row.insert("agent".to_string(), names.get(&r.agent_path).map_or(Value::Null, |n| json!(n)));
            if let Some(item) = &r.item {
                row.insert("item".to_string(), json!(item));
            }
            // An entry always serializes as an object (a tagged enum of structs).
            if let Ok(Value::Object(fields)) = serde_json::to_value(entry) {
                row.extend(fields);
            }
            out.push(Value::Object(row));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(seq: u64, path: &str, delta: Vec<(&str, Value)>, planners: Vec<(&str, Value)>) -> StepRecord {
        StepRecord {
            run_id: "r".into(),
            seq,
            agent_path: path.into(),
            delta: delta.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            planner_states: planners
                .into_iter()
                .map(|(p, s)| PlannerState {
                    path: p.into(),
                    item: None,
                    state: s,
                    inflight: vec![],
                    state_patch: None,
                    inflight_change: None,
                    finished: None,
                    rationale: None,
                    unconsumed: Vec::new(),
                })
                .collect(),
            invocation: None,
            async_started: false,
            failed: false,
            item: None,
            item_end: false,
            bindings: None,
            calls: Vec::new(),
        }
    }

    #[test]
    fn folding_tracks_state_and_composites_in_progress() {
        let records = vec![
            rec(1, "root/0", vec![("a", json!(1))], vec![("root", json!({"next": 2}))]),
            rec(2, "root/1/0", vec![("b", json!(2))], vec![("root/1", json!({"next": 1}))]),
            rec(3, "root/1/1", vec![("a", Value::Null)], vec![("root/1", json!({"next": 2}))]),
        ];
        let image = RunImage::fold("r", &records).unwrap();
        assert_eq!(image.seq, 3);
        assert_eq!(Value::Object(image.state.clone()), json!({"b": 2}));
        assert_eq!(image.planners.keys().collect::<Vec<_>>(), ["root", "root/1"]);
        let mut image2 = image.clone();
        image2.apply(&rec(4, "root/1", vec![], vec![("root", json!({"next": 3}))])).unwrap();
        assert_eq!(image2.planners.keys().collect::<Vec<_>>(), ["root"], "a completed composite is done");
        let err = image2.apply(&rec(6, "root/2", vec![], vec![])).unwrap_err();
        assert_eq!(err.to_string(), "run `r`: record step 6 is corrupt: expected step 5 next");
    }

    #[test]
    fn async_agents_in_two_items_of_one_path_are_running_until_each_ends() {
        let mut image = RunImage::new("r");
        let start = |seq: u64, layer: &str, x: i64| StepRecord {
            async_started: true,
            item: Some(layer.to_string()),
            bindings: Some([("x".to_string(), json!(x))].into_iter().collect()),
            ..StepRecord::new("r", seq, "root/0/0")
        };
        image.apply(&start(1, "|root/0#0", 2)).unwrap();
        image.apply(&start(2, "|root/0#1", 4)).unwrap();
        let end = StepRecord { item: Some("|root/0#0".into()), ..StepRecord::new("r", 3, "root/0/0") };
        image.apply(&end).unwrap();
        assert!(image.async_running.is_empty());
        let running: Vec<&AsyncInItem> = image.async_in_items.values().collect();
        assert_eq!(
            running,
            [&AsyncInItem {
                path: "root/0/0".into(),
                layer: "|root/0#1".into(),
                bindings: Some([("x".to_string(), json!(4))].into_iter().collect()),
                running: 1,
            }]
        );
    }

    #[test]
    fn two_async_starts_at_one_path_are_two_running_until_both_end() {
        let mut image = RunImage::new("r");
        let start = |seq| StepRecord { async_started: true, ..StepRecord::new("r", seq, "root/0") };
        image.apply(&start(1)).unwrap();
        image.apply(&start(2)).unwrap();
        assert_eq!(image.async_running, BTreeMap::from([("root/0".to_string(), 2)]), "a loop's two iterations");
        image.apply(&StepRecord::new("r", 3, "root/0")).unwrap();
        assert_eq!(image.async_running, BTreeMap::from([("root/0".to_string(), 1)]), "one still runs");
        image.apply(&StepRecord::new("r", 4, "root/0")).unwrap();
        assert!(image.async_running.is_empty());
        // An image saved before the counts: a list of paths, one running each.
        let old: RunImage =
            serde_json::from_value(json!({"run_id": "r", "seq": 2, "state": {}, "planners": {}, "history": [],
                                          "async_running": ["root/0"]}))
            .unwrap();
        assert_eq!(old.async_running, BTreeMap::from([("root/0".to_string(), 1)]));
    }
}
