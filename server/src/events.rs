//! Run events as the server streams them (SERVER.md §2, `GET /api/v1/runs/{id}/events`).
//!
//! Two sources feed one channel per run ([`EventHub`]):
//! - the journal: [`JournalTap`] wraps the store, so every appended step becomes an `agent_completed` (or
//!   `agent_failed`) event carrying its `seq`, and every record of an invocation's calls (SPEC.md §4) one
//!   `tool_call` event per tool call change (with its `status`) and one `model_turn` per model turn — the
//!   same conversion replays a run's journal to a client that connects late, so live and replayed events are
//!   alike;
//! - the run's listener ([`HubListener`]): what is not journaled (`agent_started`, `token`, `tool_result`,
//!   `planner_decision`, `suspended`);
//! - the host: `resumed` when it continues a run, and the final event (`completed`, `failed`, `cancelled`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use agentic_engine::{
    AgentListener, CallEntry, DynCheckpointStore, PendingResponse, RunEvent, RunRecord, StepRecord, StoreError,
    StoreLayer, StoreRef,
};
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};

use crate::cluster::Cluster;

/// Events kept per run for slow readers before they lag (a lagging reader re-reads the journal's steps; it
/// misses the tokens it fell behind on). Tokio allocates and initializes every slot when a run's channel is
/// created (about 72 bytes each): 8 192 slots cost 590 KiB per streamed run and 2.5 % of the machine's CPU in
/// the PostgreSQL workers bench (`perf record -a`, docs/performance.md).
const CHANNEL_CAPACITY: usize = 512;

/// One server-sent event: its name (`agent_completed`, `token`, ...) and its JSON data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    pub(crate) name: &'static str,
    pub(crate) data: Value,
}

impl SseEvent {
    /// The journal sequence number of a journaled event.
    pub(crate) fn seq(&self) -> Option<u64> {
        self.data.get("seq").and_then(Value::as_u64)
    }

    /// Whether the stream ends after this event.
    pub(crate) fn is_final(&self) -> bool {
        matches!(self.name, "completed" | "failed" | "cancelled")
    }

    /// Whether the event comes from a journaled step ([`SseEvent::of_step`]): its `seq` is that step's, the
    /// stream's event id, and what `Last-Event-ID` resumes after.
    pub(crate) fn is_journaled(&self) -> bool {
        matches!(self.name, "agent_completed" | "agent_failed" | "tool_call" | "model_turn")
    }

    /// The events of one journaled step: `agent_completed` or `agent_failed`; for a record of calls of an
    /// invocation still running (SPEC.md §4), one `tool_call` per tool call entry (`{seq, path, agent, item?,
    /// n, call_id, tool, status, args, result?, error?, message?, by?}`) and one `model_turn` per model turn
    /// (`{seq, path, agent, item?, turn, model}`), `agent` named by `agent_of` (call records name none; `null`
    /// when unknown); none for a step that records no invocation (an async agent's start, a skipped optional
    /// agent).
    pub(crate) fn of_step(record: &StepRecord, agent_of: &dyn Fn(&str) -> Option<String>) -> Vec<SseEvent> {
        if record.holds_calls() {
            return call_events(record, agent_of);
        }
        let Some(inv) = record.invocation.as_ref() else { return Vec::new() };
        if record.async_started {
            return Vec::new();
        }
        let mut data = json!({
            "seq": record.seq,
            "path": inv.path,
            "agent": inv.agent,
            "attempt": inv.attempt,
            "duration_ms": inv.ended_at_us.saturating_sub(inv.started_at_us) as f64 / 1000.0,
        });
        if let Some(item) = &record.item {
            data["item"] = json!(item);
        }
        if record.failed {
            data["error"] = json!(inv.error);
            vec![SseEvent { name: "agent_failed", data }]
        } else {
            data["output"] = inv.output.clone();
            vec![SseEvent { name: "agent_completed", data }]
        }
    }

    /// A run-level event (`path` `root`, `agent` the run's name).
    pub(crate) fn run_level(name: &'static str, run_name: &str, mut fields: Value) -> SseEvent {
        let mut data = json!({"path": "root", "agent": run_name});
        if let (Value::Object(data), Value::Object(fields)) = (&mut data, &mut fields) {
            data.append(fields);
        }
        SseEvent { name, data }
    }

    /// The event that ends (or, for `suspended`, pauses) a run in the state `record` holds; `None` while
    /// it runs.
    pub(crate) fn of_status(record: &RunRecord, seq: u64) -> Option<SseEvent> {
        use agentic_engine::RunStatus;
        let name = &record.name;
        Some(match record.status {
            RunStatus::Running => return None,
            RunStatus::Suspended => {
                SseEvent::run_level("suspended", name, json!({"seq": seq, "pending": pending_json(&record.pending)}))
            }
            RunStatus::Completed => {
                SseEvent::run_level("completed", name, json!({"seq": seq, "output": record.detail}))
            }
            RunStatus::Failed => SseEvent::run_level("failed", name, json!({"seq": seq, "error": record.detail})),
            RunStatus::Cancelled => SseEvent::run_level("cancelled", name, json!({"seq": seq})),
        })
    }
}

/// The `tool_call` and `model_turn` events of a call record ([`SseEvent::of_step`]).
fn call_events(record: &StepRecord, agent_of: &dyn Fn(&str) -> Option<String>) -> Vec<SseEvent> {
    let agent = agent_of(&record.agent_path).map_or(Value::Null, Value::String);
    let head = |data: &mut serde_json::Map<String, Value>| {
        data.insert("seq".into(), json!(record.seq));
        data.insert("path".into(), json!(record.agent_path));
        data.insert("agent".into(), agent.clone());
        if let Some(item) = &record.item {
            data.insert("item".into(), json!(item));
        }
    };
    let mut events = Vec::with_capacity(record.calls.len());
    for entry in &record.calls {
        let mut data = serde_json::Map::new();
        head(&mut data);
        let name = match entry {
            CallEntry::Tool(t) => {
                data.insert("n".into(), json!(t.n));
                data.insert("call_id".into(), json!(t.call_id));
                data.insert("tool".into(), json!(t.tool));
                data.insert("status".into(), json!(t.status.as_str()));
                data.insert("args".into(), t.args.clone());
                let optional = [
                    ("result", t.result.clone()),
                    ("error", t.error.clone().map(Value::String)),
                    ("message", t.message.clone().map(Value::String)),
                    ("by", t.by.clone().map(Value::String)),
                ];
                for (key, value) in optional {
                    if let Some(value) = value {
                        data.insert(key.into(), value);
                    }
                }
                "tool_call"
            }
            CallEntry::Model(m) => {
                data.insert("turn".into(), json!(m.turn));
                data.insert("model".into(), json!(m.model));
                "model_turn"
            }
            // A kind of entry this server does not know: no event.
            _ => continue,
        };
        events.push(SseEvent { name, data: Value::Object(data) });
    }
    events
}

/// The names of one run's agents by path, for the events of its call records, which name no agent: from the
/// journal's invocations, the run's pending responses, and, for a path still unnamed, the run's topology
/// (read once).
#[derive(Default)]
pub(crate) struct AgentNames {
    names: std::collections::BTreeMap<String, String>,
    topology_read: bool,
}

impl AgentNames {
    /// Learns the names `records` and `pending` give ([`agentic_engine::journal_agent_names`]).
    pub(crate) fn learn(&mut self, records: &[StepRecord], pending: &[PendingResponse]) {
        self.names.extend(agentic_engine::journal_agent_names(records, pending));
    }

    /// Learns that the agent at `path` is `name` (an `agent_started` event).
    pub(crate) fn insert(&mut self, path: &str, name: &str) {
        self.names.insert(path.to_string(), name.to_string());
    }

    /// The name of the agent at `path`, if known.
    pub(crate) fn get(&self, path: &str) -> Option<String> {
        self.names.get(path).cloned()
    }

    /// When a call record of `records` is at a path not named yet, reads the names of `run_id`'s topology
    /// from its spec (once; a spec that cannot be built names nothing).
    pub(crate) async fn complete(&mut self, store: &StoreRef, run_id: &str, records: &[StepRecord]) {
        if self.topology_read || records.iter().all(|r| !r.holds_calls() || self.names.contains_key(&r.agent_path)) {
            return;
        }
        self.topology_read = true;
        let Ok(Some(run)) = store.run_dyn(run_id).await else { return };
        match agentic_spec::run_topology(store, &run).await {
            Ok(root) => {
                let mut stack = vec![&root];
                while let Some(node) = stack.pop() {
                    self.names.entry(node.path.clone()).or_insert_with(|| node.spec.name.clone());
                    stack.extend(node.children.iter());
                }
            }
            Err(reason) => tracing::debug!(run_id, "no agent names from the run's topology: {reason}"),
        }
    }
}

/// Pending responses as the API shows them ([`PendingResponse::to_json`]).
pub(crate) fn pending_json(pending: &[PendingResponse]) -> Value {
    Value::Array(pending.iter().map(PendingResponse::to_json).collect())
}

/// The per-run event channels of this process, and the runs being started (waiting for their record).
#[derive(Clone, Default)]
pub(crate) struct EventHub {
    channels: Arc<Mutex<HashMap<String, broadcast::Sender<SseEvent>>>>,
    /// The other servers of a shared store, told the live events of the runs they stream.
    cluster: Option<Cluster>,
    starting: Arc<Mutex<HashMap<String, StartSignal>>>,
    /// Runs being started whose record is written but not flushed yet: they start at the next flush.
    unflushed: Arc<Mutex<Vec<String>>>,
    /// The model calls of runs executing here that wait for capacity now, by run and path: their
    /// `waiting_for_capacity` event and when the wait ends (milliseconds since the Unix epoch; `None`: until
    /// a concurrency slot frees), for a client that connects during the wait.
    waits: Arc<Mutex<HashMap<String, Waits>>>,
    /// The agents of the runs executing here, by run and path (from their `agent_started` events): the names
    /// of their journaled calls' events.
    agents: Arc<Mutex<HashMap<String, HashMap<String, String>>>>,
}

/// The calls of one run waiting for capacity: by path, the event and when the wait ends.
type Waits = HashMap<String, (SseEvent, Option<u64>)>;

/// Says whether a run started (its record is written) or why it could not.
type StartSignal = oneshot::Sender<Result<(), crate::error::ApiError>>;

impl EventHub {
    fn channels(&self) -> MutexGuard<'_, HashMap<String, broadcast::Sender<SseEvent>>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts and removes).
        self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A hub that also publishes live events to the servers of `cluster` that stream them.
    pub(crate) fn new(cluster: Cluster) -> Self {
        EventHub { cluster: Some(cluster), ..EventHub::default() }
    }

    /// The other servers of the store.
    pub(crate) fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_ref()
    }

    /// Whether someone here subscribes to `run_id`'s events.
    pub(crate) fn has_subscribers(&self, run_id: &str) -> bool {
        self.channels().get(run_id).is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// [`EventHub::publish`] of a live event of a run executing here, also to the other servers streaming it.
    pub(crate) fn publish_live(&self, run_id: &str, event: SseEvent) {
        if let Some(cluster) = &self.cluster {
            cluster.publish(run_id, &event);
        }
        self.publish(run_id, event);
    }

    /// Announces to the other servers streaming `run_id` that something of it was committed.
    pub(crate) fn committed(&self, run_id: &str) {
        if let Some(cluster) = &self.cluster {
            cluster.committed(run_id);
        }
    }

    /// Subscribes to `run_id`'s events from now on. The run's channel goes when its last subscription is
    /// dropped (or with the run's final event), so a finished run keeps nothing in memory.
    pub(crate) fn subscribe(&self, run_id: &str) -> Subscription {
        let rx = self
            .channels()
            .entry(run_id.to_string())
            .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
            .subscribe();
        Subscription { rx: Some(rx), hub: self.clone(), run_id: run_id.to_string() }
    }

    /// Says when `run_id`'s record is first written and flushed (its inputs are journaled by then), or why
    /// the run ended before.
    pub(crate) fn expect_start(&self, run_id: &str) -> oneshot::Receiver<Result<(), crate::error::ApiError>> {
        let (tx, rx) = oneshot::channel();
        self.starting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(run_id.to_string(), tx);
        rx
    }

    /// `run_id`'s record is written: if someone waits for its start, it starts once the store is flushed.
    fn written(&self, run_id: &str) {
        let waited = self.starting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(run_id);
        if waited {
            self.unflushed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(run_id.to_string());
        }
    }

    /// The runs written and not flushed so far (a flush about to begin covers them).
    fn take_unflushed(&self) -> Vec<String> {
        std::mem::take(&mut *self.unflushed.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Whether `run_id` was written and not flushed so far; forgets it (a flush of that run about to begin
    /// covers it).
    fn take_unflushed_run(&self, run_id: &str) -> bool {
        let mut unflushed = self.unflushed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = unflushed.len();
        unflushed.retain(|r| r != run_id);
        unflushed.len() != before
    }

    /// `run_id` started (`Ok`) or could not (`Err`); nothing when no one waits.
    pub(crate) fn started(&self, run_id: &str, result: Result<(), crate::error::ApiError>) {
        let waiting = self.starting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(run_id);
        if let Some(tx) = waiting {
            let _ = tx.send(result);
        }
    }

    /// A model call of `run_id` at `path` waits for capacity (`event`) until `until_ms` (`None`: unknown).
    fn note_wait(&self, run_id: &str, path: &str, event: SseEvent, until_ms: Option<u64>) {
        let mut waits = self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        waits.entry(run_id.to_string()).or_default().insert(path.to_string(), (event, until_ms));
    }

    /// The invocation at `path` of `run_id` ended (`None`: the run stopped): its waits are over.
    fn end_waits(&self, run_id: &str, path: Option<&str>) {
        let mut waits = self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (waits.get_mut(run_id), path) {
            (Some(paths), Some(path)) => {
                paths.remove(path);
                if paths.is_empty() {
                    waits.remove(run_id);
                }
            }
            (Some(_), None) => {
                waits.remove(run_id);
            }
            (None, _) => {}
        }
    }

    /// The `waiting_for_capacity` events of `run_id`'s calls that wait now, by path.
    pub(crate) fn current_waits(&self, run_id: &str) -> Vec<SseEvent> {
        let now = agentic_engine::now_ms();
        let waits = self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: Vec<(&String, &SseEvent)> = waits
            .get(run_id)
            .map(|paths| {
                paths.iter().filter(|(_, (_, until))| until.is_none_or(|u| u > now)).map(|(p, (e, _))| (p, e)).collect()
            })
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out.into_iter().map(|(_, e)| e.clone()).collect()
    }

    /// The agent at `path` of `run_id` (executing here) is `name`.
    fn learn_agent(&self, run_id: &str, path: &str, name: &str) {
        let mut agents = self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        agents.entry(run_id.to_string()).or_default().insert(path.to_string(), name.to_string());
    }

    /// The name of the agent at `path` of `run_id`, when it started here.
    pub(crate) fn agent_name(&self, run_id: &str, path: &str) -> Option<String> {
        let agents = self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        agents.get(run_id).and_then(|paths| paths.get(path)).cloned()
    }

    /// `run_id` stopped executing here: its agents' names go.
    pub(crate) fn forget_agents(&self, run_id: &str) {
        self.agents.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(run_id);
    }

    /// Ends every event stream (shutdown): their channels close.
    pub(crate) fn close_all(&self) {
        self.channels().clear();
    }

    /// Sends `event` to `run_id`'s subscribers (none: nothing to do). A final event closes the channel.
    pub(crate) fn publish(&self, run_id: &str, event: SseEvent) {
        let mut channels = self.channels();
        let Some(tx) = channels.get(run_id) else { return };
        let last = event.is_final();
        let _ = tx.send(event);
        if last || tx.receiver_count() == 0 {
            channels.remove(run_id);
        }
    }
}

/// A subscription to one run's live events ([`EventHub::subscribe`]); dropping the last one of a run removes
/// the run's channel.
pub(crate) struct Subscription {
    rx: Option<broadcast::Receiver<SseEvent>>,
    hub: EventHub,
    run_id: String,
}

impl Subscription {
    /// The next event; `Err` when the channel closed or this subscriber lagged behind by more than the
    /// channel's capacity.
    pub(crate) async fn recv(&mut self) -> Result<SseEvent, broadcast::error::RecvError> {
        match self.rx.as_mut() {
            Some(rx) => rx.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut channels = self.hub.channels();
        if channels.get(&self.run_id).is_some_and(|tx| tx.receiver_count() == 0) {
            channels.remove(&self.run_id);
        }
    }
}

/// The store as the server uses it: every append also becomes an event of the run, and a flush tells who waits
/// for a run to start or for its steps to be committed; every other method is the wrapped store's.
pub(crate) struct JournalTap {
    pub(crate) inner: StoreRef,
    pub(crate) hub: EventHub,
}

impl StoreLayer for JournalTap {
    fn inner(&self) -> &dyn DynCheckpointStore {
        &*self.inner
    }

    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        let events = SseEvent::of_step(&record, &|path| self.hub.agent_name(&record.run_id, path));
        let (run_id, seq) = (record.run_id.clone(), record.seq);
        self.inner.append_dyn(record).await?;
        if let Some(cluster) = &self.hub.cluster {
            cluster.appended(&run_id, seq);
        }
        for event in events {
            self.hub.publish(&run_id, event);
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        // The runs whose record was written before this flush exist on disk once it returns.
        let written = self.hub.take_unflushed();
        self.inner.flush_dyn().await?;
        for run_id in written {
            self.hub.started(&run_id, Ok(()));
        }
        if let Some(cluster) = &self.hub.cluster {
            cluster.committed_all();
        }
        Ok(())
    }

    /// A new run's start is answered (`201`) only once its record is on disk: the engine flushes the store
    /// right after writing it, in every durability mode, and the flush signals it.
    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        let run_id = run.run_id.clone();
        self.inner.put_run_dyn(run).await?;
        self.hub.written(&run_id);
        Ok(())
    }

    /// As [`JournalTap::flush`], for one run (the engine's flushes of a run's steps).
    async fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
        let written = self.hub.take_unflushed_run(run_id);
        self.inner.flush_run_dyn(run_id).await?;
        if written {
            self.hub.started(run_id, Ok(()));
        }
        self.hub.committed(run_id);
        Ok(())
    }
}

/// The listener the host puts on every run it executes: the events the journal does not carry.
pub(crate) struct HubListener {
    hub: EventHub,
    run_name: String,
}

impl HubListener {
    pub(crate) fn new(hub: EventHub, run_name: String) -> Self {
        HubListener { hub, run_name }
    }

    /// The agent at `path` of `run_id` (tokens and tool results name only the path), as its `agent_started`
    /// said.
    fn agent_of(&self, run_id: &str, path: &str) -> String {
        self.hub.agent_name(run_id, path).unwrap_or_default()
    }
}

impl AgentListener for HubListener {
    fn inherited(&self) -> bool {
        true
    }

    fn on_event(&self, event: &RunEvent) {
        let run = event.run_id();
        let (name, data) = match event {
            RunEvent::AgentStarted { agent, path, attempt, .. } => {
                self.hub.learn_agent(run, path, agent);
                ("agent_started", json!({"path": path, "agent": agent, "attempt": attempt}))
            }
            RunEvent::Token { path, text, .. } => {
                ("token", json!({"path": path, "agent": self.agent_of(run, path), "text": text}))
            }
            RunEvent::WaitingForCapacity { run_id, path, endpoint, limit, wait_ms } => {
                let data = json!({"path": path, "agent": self.agent_of(run, path), "endpoint": endpoint, "limit": limit,
                                  "wait_ms": wait_ms});
                let until = (*wait_ms > 0).then(|| agentic_engine::now_ms() + wait_ms);
                let event = SseEvent { name: "waiting_for_capacity", data: data.clone() };
                self.hub.note_wait(run_id, path, event, until);
                ("waiting_for_capacity", data)
            }
            RunEvent::AgentFinished { run_id, path, .. } | RunEvent::AgentFailed { run_id, path, .. } => {
                self.hub.end_waits(run_id, Some(path));
                return;
            }
            RunEvent::Completed { run_id, .. }
            | RunEvent::Failed { run_id, .. }
            | RunEvent::ScopeDestroyed { run_id } => {
                self.hub.end_waits(run_id, None);
                if matches!(event, RunEvent::ScopeDestroyed { .. }) {
                    // The run ended or suspended: its calls are journaled by now.
                    self.hub.forget_agents(run_id);
                }
                return;
            }
            // A tool call's `tool_call` events come from the journal (with its status and seq), one per change.
            RunEvent::ToolStarted { .. } => return,
            // Kept for the clients that read it before tool calls were journaled.
            RunEvent::ToolFinished { path, tool, result, .. } => {
                ("tool_result", json!({"path": path, "agent": self.agent_of(run, path), "tool": tool, "result": result}))
            }
            RunEvent::PlannerDecision { path, calls, decision, rationale, .. } => (
                "planner_decision",
                json!({"path": path, "agent": self.agent_of(run, path), "calls": calls, "decision": decision,
                       "rationale": rationale}),
            ),
            RunEvent::Suspended { pending, .. } => {
                let e = SseEvent::run_level("suspended", &self.run_name, json!({"pending": pending_json(pending)}));
                (e.name, e.data)
            }
            // Completions come from the journal (with their seq), the run's end from the host.
            _ => return,
        };
        self.hub.publish_live(run, SseEvent { name, data });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &'static str) -> SseEvent {
        SseEvent { name, data: json!({}) }
    }

    #[tokio::test]
    async fn a_run_keeps_a_channel_only_while_someone_listens() {
        let hub = EventHub::default();
        // A late client of a finished run subscribes, reads the journal, and goes: nothing stays behind.
        drop(hub.subscribe("done"));
        assert_eq!(hub.channels().len(), 0);

        let mut a = hub.subscribe("live");
        let b = hub.subscribe("live");
        drop(b);
        assert_eq!(hub.channels().len(), 1, "one subscriber is still there");
        hub.publish("live", event("agent_started"));
        assert_eq!(a.recv().await.map(|e| e.name), Ok("agent_started"));
        hub.publish("live", event("completed"));
        assert_eq!(hub.channels().len(), 0, "the final event closes the channel");
        assert_eq!(a.recv().await.map(|e| e.name), Ok("completed"));
        drop(a);
        assert_eq!(hub.channels().len(), 0);
    }
}
