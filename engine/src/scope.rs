//! The AgenticScope: one per run, owning the state map, the invocation history and the conversation context,
//! plus the cheap read-only [`ScopeView`] snapshots that predicates and planners read.
//!
//! Every request (a write, a history record, a pending mark) is applied one at a time, in order, so concurrent
//! agents never race; each accepted write gets the run's next sequence number. After each write the scope
//! publishes a new snapshot (a persistent map, so publishing is O(keys written), and a snapshot clone is O(1)).
//! The requests are handled by the task that makes them, under the scope's lock (an actor's protocol without
//! a task of its own: see [`ScopeHandle::spawn_with_history`]).
//!
//! Idea from LangChain4j's `AgenticScope` (the shared state of an agentic system); the serialised requests and
//! snapshot split is ours.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::error::AgentError;

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
    /// The error message when the invocation failed.
    pub error: Option<String>,
}

/// The hasher of the snapshot's maps: foldhash, seeded per process, instead of the standard library's
/// SipHash, which costs several times as much on the short string keys of a state.
type FastHash = foldhash::fast::RandomState;

/// A persistent map of a snapshot.
type SnapshotMap<K, V> = imbl::GenericHashMap<K, V, FastHash, imbl::shared_ptr::DefaultSharedPtr>;

/// An immutable snapshot of a run's state: what predicates, exit conditions and output functions read.
///
/// Cloning is O(1) (structural sharing). Absent keys and keys holding `null` read as absent.
#[derive(Debug, Clone, Default)]
pub struct ScopeView {
    // Keys and values behind `Arc`s: publishing a snapshot shares the map, so the next write copies the path
    // to its key — with `Arc`s that copy is reference-count bumps, not deep clones of neighbouring values.
    state: SnapshotMap<Arc<str>, Arc<Value>>,
    pending: imbl::GenericHashSet<String, FastHash, imbl::shared_ptr::DefaultSharedPtr>,
    async_errors: SnapshotMap<String, AgentError>,
    seq: u64,
}

impl ScopeView {
    /// Builds a view over a plain map (used by tests and by evaluation of expressions outside a run).
    pub fn from_map(map: Map<String, Value>) -> Self {
        let state = map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (Arc::from(k), Arc::new(v))).collect();
        ScopeView { state, ..Default::default() }
    }

    /// The value at `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.state.get(key).map(|v| &**v)
    }

    /// Whether `key` holds a value.
    pub fn contains(&self, key: &str) -> bool {
        self.state.contains_key(key)
    }

    /// The value at `key` deserialised to `T`.
    ///
    /// # Errors
    /// The value does not deserialise into `T` (the message names the key).
    pub fn get_as<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, String> {
        match self.state.get(key) {
            None => Ok(None),
            Some(v) => T::deserialize(&**v).map(Some).map_err(|e| format!("key `{key}`: {e}")),
        }
    }

    /// The value of a typed key (its default when absent).
    ///
    /// # Errors
    /// The stored value does not deserialise into `T`.
    pub fn get_typed<T: DeserializeOwned + Clone>(&self, key: &TypedKey<T>) -> Result<Option<T>, String> {
        match self.get_as::<T>(key.name())? {
            Some(v) => Ok(Some(v)),
            None => Ok(key.default.clone()),
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.state.len()
    }

    /// Whether the state is empty.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }

    /// Iterates over `(key, value)` pairs in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.state.iter().map(|(k, v)| (&**k, &**v))
    }

    /// The state as a JSON object with keys sorted (deterministic output).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut entries: Vec<(&Arc<str>, &Arc<Value>)> = self.state.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries.into_iter().map(|(k, v)| (k.to_string(), (**v).clone())).collect()
    }

    /// The sequence number of the last accepted write (0 before any write).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The conversation context held in this snapshot (see [`ScopeHandle::context`]), most recent last.
    pub fn context(&self) -> Vec<ContextEntry> {
        let mut entries: Vec<(u64, ContextEntry)> = self
            .state
            .iter()
            .filter_map(|(k, v)| {
                let agent = k.strip_prefix(CONTEXT_PREFIX)?;
                let text = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
                let at = v.get("at_us").and_then(Value::as_u64).unwrap_or(0);
                Some((at, ContextEntry { agent: agent.to_string(), user: text("user"), answer: text("answer") }))
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.agent.cmp(&b.1.agent)));
        entries.into_iter().map(|(_, e)| e).collect()
    }

    /// Whether the async agent that was producing `key` failed (readers get its error).
    pub fn has_async_error(&self, key: &str) -> bool {
        self.async_errors.contains_key(key)
    }

    /// Whether async agents are still producing any key.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether an async agent is still producing `key`.
    pub fn is_pending(&self, key: &str) -> bool {
        self.pending.contains(key)
    }
}

/// A state key with its value type and an optional default: typed access to the scope.
///
/// `TypedKey::<f64>::new("score")` reads and writes `score` as an `f64`; reading deserialises, so typed reads
/// are the allowlist of types the scope ever builds.
#[derive(Debug, Clone)]
pub struct TypedKey<T> {
    name: std::borrow::Cow<'static, str>,
    default: Option<T>,
    _t: PhantomData<fn() -> T>,
}

impl<T> TypedKey<T> {
    /// A key named `name` with no default.
    pub const fn new(name: &'static str) -> Self {
        TypedKey { name: std::borrow::Cow::Borrowed(name), default: None, _t: PhantomData }
    }

    /// A key named `name` (owned) with no default.
    pub fn named(name: impl Into<String>) -> Self {
        TypedKey { name: std::borrow::Cow::Owned(name.into()), default: None, _t: PhantomData }
    }

    /// Sets the value read when the key is absent.
    pub fn with_default(mut self, default: T) -> Self {
        self.default = Some(default);
        self
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Prefix of the state keys holding the conversation context (`_context.<agent>`).
pub const CONTEXT_PREFIX: &str = "_context.";

/// One entry of the conversation context: the last user message an LLM agent sent and the answer it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextEntry {
    /// The agent's name.
    pub agent: String,
    /// The last user message.
    pub user: String,
    /// The model's answer.
    pub answer: String,
}

/// The state of a run's scope, behind its handles' lock.
struct ScopeState {
    /// The current snapshot lives only in the watch channel: writes modify it in place, so while no reader
    /// holds an older snapshot the persistent map is unshared and updated without copying its nodes.
    tx: watch::Sender<ScopeView>,
    history: Vec<InvocationRecord>,
}

impl ScopeState {
    fn apply(&mut self, delta: Vec<(String, Value)>) -> u64 {
        let mut seq = 0;
        self.tx.send_modify(|view| {
            for (k, v) in delta {
                if v.is_null() {
                    view.state.remove(k.as_str());
                } else {
                    view.state.insert(Arc::from(k), Arc::new(v));
                }
            }
            view.seq += 1;
            seq = view.seq;
        });
        seq
    }

    /// Changes the snapshot without a state write (pending keys, async errors).
    fn modify(&mut self, f: impl FnOnce(&mut ScopeView)) -> u64 {
        let mut seq = 0;
        self.tx.send_modify(|view| {
            f(view);
            seq = view.seq;
        });
        seq
    }
}

struct ScopeInner {
    /// The scope's state: every write, history record and pending mark is applied under this lock, by the
    /// task that sends it, one at a time (see [`ScopeHandle::spawn_with_history`]).
    state: Mutex<ScopeState>,
    memory_id: Arc<str>,
}

impl ScopeInner {
    /// Handles one request with the state locked. Never held across an `await`: the requests are plain
    /// updates, so the lock is held for the update alone.
    fn with<T>(&self, f: impl FnOnce(&mut ScopeState) -> T) -> T {
        // A panic can only come from a serialiser inside `f`; the state is consistent between requests.
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut state)
    }
}

/// A handle on a run's scope. Cheap to clone; the scope is dropped with the last handle.
#[derive(Clone)]
pub struct ScopeHandle {
    inner: Arc<ScopeInner>,
    rx: watch::Receiver<ScopeView>,
}

impl std::fmt::Debug for ScopeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeHandle").field("memory_id", &self.inner.memory_id).finish()
    }
}

fn scope_gone(e: impl std::fmt::Display) -> AgentError {
    AgentError::internal(format!("scope unavailable: {e}"))
}

impl ScopeHandle {
    /// Starts the scope of `memory_id` holding `initial` state.
    ///
    /// # Errors
    /// None today (kept fallible for scopes kept elsewhere).
    pub async fn spawn(memory_id: &str, initial: Map<String, Value>) -> Result<Self, AgentError> {
        Self::spawn_with_history(memory_id, initial, Vec::new()).await
    }

    /// Starts the scope continuing an earlier run: its state and its invocation history.
    ///
    /// The scope keeps the AgenticScope actor's protocol — requests (writes, history records, pending marks)
    /// are applied one at a time, in the order they are made, and readers see published snapshots — but its
    /// requests are handled by the task that makes them, under a lock, instead of by a task of its own: every
    /// handler is a plain update that never waits, so the lock serialises them exactly as a mailbox would,
    /// without the two task wake-ups (there and back) per write that made a sequence's step ping-pong between
    /// the runtime's workers (docs/architecture.md §2). It was a ractor actor, then a Tokio task.
    ///
    /// # Errors
    /// None today (kept fallible for scopes kept elsewhere).
    pub async fn spawn_with_history(
        memory_id: &str,
        initial: Map<String, Value>,
        history: Vec<InvocationRecord>,
    ) -> Result<Self, AgentError> {
        let view = ScopeView::from_map(initial);
        let (tx, rx) = watch::channel(view);
        let state = Mutex::new(ScopeState { tx, history });
        Ok(ScopeHandle { inner: Arc::new(ScopeInner { state, memory_id: Arc::from(memory_id) }), rx })
    }

    /// The memory id (run id) this scope belongs to.
    pub fn memory_id(&self) -> &str {
        &self.inner.memory_id
    }

    /// The latest published snapshot (O(1)).
    pub fn view(&self) -> ScopeView {
        self.rx.borrow().clone()
    }

    /// Writes `delta` (a `null` value removes the key) and returns the write's sequence number; the new
    /// snapshot is published when it returns.
    ///
    /// # Errors
    /// None today (kept fallible for scopes kept elsewhere).
    pub async fn write(&self, delta: Vec<(String, Value)>) -> Result<u64, AgentError> {
        Ok(self.inner.with(|state| state.apply(delta)))
    }

    /// Writes `delta` and appends `record` to the history in one request (the hot path of a step). Not
    /// `async`: it never waits, and a future would hold the record in every invocation's future.
    pub(crate) fn write_and_record(&self, delta: Vec<(String, Value)>, record: InvocationRecord) -> u64 {
        self.inner.with(|state| {
            let seq = state.apply(delta);
            state.history.push(record);
            seq
        })
    }

    /// Writes one typed value.
    ///
    /// # Errors
    /// The value does not serialise.
    pub async fn write_typed<T: Serialize>(&self, key: &TypedKey<T>, value: &T) -> Result<u64, AgentError> {
        let v = serde_json::to_value(value).map_err(|e| AgentError::internal(format!("key `{}`: {e}", key.name())))?;
        self.write(vec![(key.name().to_string(), v)]).await
    }

    /// Marks `key` as being produced by an async agent: readers wait until [`ScopeHandle::finish_async`].
    pub(crate) async fn mark_pending(&self, key: &str) -> Result<(), AgentError> {
        self.inner.with(|state| {
            state.modify(|view| {
                view.pending.insert(key.to_string());
                view.async_errors.remove(key);
            })
        });
        Ok(())
    }

    /// Ends an async production of `key`: writes its delta, or records its error for readers.
    pub(crate) async fn finish_async(
        &self,
        key: &str,
        result: Result<Vec<(String, Value)>, AgentError>,
    ) -> Result<u64, AgentError> {
        Ok(self.inner.with(|state| {
            state.modify(|view| {
                view.pending.remove(key);
            });
            match result {
                Ok(delta) => state.apply(delta),
                Err(e) => state.modify(|view| {
                    view.async_errors.insert(key.to_string(), e);
                }),
            }
        }))
    }

    /// Reads `key`, waiting while an async agent is still producing it.
    ///
    /// # Errors
    /// The error of the async agent that was producing `key`, with its original variant.
    pub async fn read_waiting(&self, key: &str) -> Result<Option<Value>, AgentError> {
        let mut rx = self.rx.clone();
        let view = rx.wait_for(|v| !v.pending.contains(key)).await.map_err(scope_gone)?;
        if let Some(e) = view.async_errors.get(key) {
            return Err(e.clone());
        }
        Ok(view.state.get(key).map(|v| (**v).clone()))
    }

    /// A snapshot taken once no async agent is producing any key (at once when none is).
    ///
    /// # Errors
    /// [`AgentError::Internal`] when the scope is gone.
    pub async fn settled(&self) -> Result<ScopeView, AgentError> {
        let mut rx = self.rx.clone();
        let view = rx.wait_for(|v| v.pending.is_empty()).await.map_err(scope_gone)?;
        Ok(view.clone())
    }

    /// Appends an invocation to the history (ordered with the writes).
    pub fn record(&self, rec: InvocationRecord) {
        self.inner.with(|state| state.history.push(rec));
    }

    /// The invocation history, in completion order.
    ///
    /// # Errors
    /// None today (kept fallible for scopes kept elsewhere).
    pub async fn history(&self) -> Result<Vec<InvocationRecord>, AgentError> {
        Ok(self.inner.with(|state| state.history.clone()))
    }

    /// The conversation context: the last exchange of each LLM agent, most recent last. It lives in the state
    /// under `_context.<agent>` keys, so it is journaled and survives a resume.
    pub fn context(&self) -> Vec<ContextEntry> {
        self.view().context()
    }
}

/// Collects `(key, value)` writes into a delta, preserving order; later writes of a key win.
pub(crate) fn merge_delta(delta: &mut Vec<(String, Value)>, key: String, value: Value) {
    if let Some(slot) = delta.iter_mut().find(|(k, _)| *k == key) {
        slot.1 = value;
    } else {
        delta.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn writes_publish_snapshots_and_null_removes() {
        let scope = ScopeHandle::spawn("t", Map::new()).await.expect("spawn");
        let before = scope.view();
        let seq = scope.write(vec![("a".into(), json!(1)), ("b".into(), json!("x"))]).await.expect("write");
        assert_eq!(seq, 1);
        assert_eq!(scope.view().get("a"), Some(&json!(1)));
        assert!(before.get("a").is_none(), "old snapshots are immutable");
        scope.write(vec![("a".into(), Value::Null)]).await.expect("write");
        assert!(!scope.view().contains("a"));
        assert_eq!(scope.view().seq(), 2);
        let key = TypedKey::<f64>::new("score").with_default(0.5);
        assert_eq!(scope.view().get_typed(&key), Ok(Some(0.5)));
    }
}
