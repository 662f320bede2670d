//! The AgenticScope: one per run, owning the state map, the invocation history and the conversation context,
//! plus the cheap read-only [`ScopeView`] snapshots that predicates and planners read.
//!
//! Every request (a write, a history record, a pending mark) is applied one at a time, in order, so concurrent
//! agents never race; each accepted write gets the run's next sequence number. After each write the scope
//! publishes a new snapshot (a persistent map, so publishing is O(keys written), and a snapshot clone is O(1)).
//! The requests are messages to the run's scope actor (`run::ScopeActor`, reached through a [`ScopeHandle`]).
//!
//! Idea from LangChain4j's `AgenticScope` (the shared state of an agentic system); the serialised requests and
//! snapshot split is ours.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::error::AgentError;
use crate::journal::InvocationRecord;

/// The hasher of the snapshot's maps: foldhash, seeded per process, instead of the standard library's
/// SipHash, which costs several times as much on the short string keys of a state.
type FastHash = foldhash::fast::RandomState;

/// A persistent map of a snapshot.
type SnapshotMap<K, V> = imbl::GenericHashMap<K, V, FastHash, imbl::shared_ptr::DefaultSharedPtr>;

/// An immutable snapshot of a run's state: what predicates, exit conditions and output functions read.
///
/// Cloning is O(1) (structural sharing). Absent keys and keys holding `null` read as absent.
///
/// Inside a parallel mapper's item the view is seen from that item ([`ScopeView::item`]): the keys written
/// by the item's invocations (its *layer*) come first, then those of the enclosing items, then the run's
/// shared state. Items never see each other's writes.
#[derive(Debug, Clone, Default)]
pub struct ScopeView {
    // Keys and values behind `Arc`s: publishing a snapshot shares the map, so the next write copies the path
    // to its key — with `Arc`s that copy is reference-count bumps, not deep clones of neighbouring values.
    state: SnapshotMap<Arc<str>, Arc<Value>>,
    /// The layers of the mapper items in progress (`|root/0#3`, `|root/0#3|root/0/1/0#0` nested); a `null`
    /// value hides the key.
    layers: SnapshotMap<Arc<str>, SnapshotMap<Arc<str>, Arc<Value>>>,
    /// The item this view is seen from (none: the shared state only).
    at: Option<Arc<str>>,
    /// Values bound to the invocation this view is seen from (a mapper's item), read before everything else.
    bound: Option<Arc<Map<String, Value>>>,
    pending: imbl::GenericHashSet<String, FastHash, imbl::shared_ptr::DefaultSharedPtr>,
    async_errors: SnapshotMap<String, AgentError>,
    seq: u64,
}

/// The layer `layer` and the layers enclosing it, innermost first: `|a#3|b#0`, then `|a#3`.
fn item_chain(layer: &str) -> impl Iterator<Item = &str> {
    let mut end = Some(layer.len());
    std::iter::from_fn(move || {
        let e = end?;
        let here = &layer[..e];
        end = here.rfind('|').filter(|&i| i > 0);
        Some(here)
    })
}

impl ScopeView {
    /// Builds a view over a plain map (used by tests and by evaluation of expressions outside a run).
    pub fn from_map(map: Map<String, Value>) -> Self {
        let state = map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (Arc::from(k), Arc::new(v))).collect();
        ScopeView { state, ..Default::default() }
    }

    /// This snapshot seen from mapper item `item` (`None`: the shared state). O(1).
    pub fn at_item(&self, item: Option<&Arc<str>>) -> ScopeView {
        ScopeView { at: item.cloned(), ..self.clone() }
    }

    /// This snapshot with `bindings` (the values bound to a mapper's call) read before the state: what the
    /// planners and expressions of a composite invoked for one item see. O(1).
    pub fn with_bindings(mut self, bindings: Option<&Arc<Map<String, Value>>>) -> ScopeView {
        self.bound = bindings.cloned();
        self
    }

    /// The mapper item layer this view is seen from (`|root/0#3`), if any.
    pub fn item(&self) -> Option<&str> {
        self.at.as_deref()
    }

    /// The layers this view reads before the shared state, innermost first (none outside items).
    fn visible_layers(&self) -> impl Iterator<Item = &SnapshotMap<Arc<str>, Arc<Value>>> {
        let chain = self.at.as_deref().filter(|_| !self.layers.is_empty()).into_iter().flat_map(item_chain);
        chain.filter_map(|item| self.layers.get(item))
    }

    /// The value at `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        if let Some(v) = self.bound.as_ref().and_then(|b| b.get(key)) {
            return (!v.is_null()).then_some(v);
        }
        if self.at.is_some() && !self.layers.is_empty() {
            for layer in self.visible_layers() {
                if let Some(v) = layer.get(key) {
                    return (!v.is_null()).then_some(&**v);
                }
            }
        }
        self.state.get(key).map(|v| &**v)
    }

    /// Whether `key` holds a value.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The value at `key` deserialised to `T`.
    ///
    /// # Errors
    /// The value does not deserialise into `T` (the message names the key).
    pub fn get_as<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => T::deserialize(v).map(Some).map_err(|e| format!("key `{key}`: {e}")),
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
        if self.bound.is_none() && self.visible_layers().next().is_none() {
            return self.state.len();
        }
        self.entries().len()
    }

    /// Whether the state is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The visible entries, each key once (its innermost value), `null`s left out.
    fn entries(&self) -> Vec<(&str, &Value)> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (k, v) in self.bound.iter().flat_map(|b| b.iter()) {
            if seen.insert(k.as_str()) && !v.is_null() {
                out.push((k.as_str(), v));
            }
        }
        for layer in self.visible_layers() {
            for (k, v) in layer.iter() {
                if seen.insert(&**k) && !v.is_null() {
                    out.push((&**k, &**v));
                }
            }
        }
        for (k, v) in self.state.iter() {
            if !seen.contains(&**k) {
                out.push((&**k, &**v));
            }
        }
        out
    }

    /// Iterates over `(key, value)` pairs in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries().into_iter()
    }

    /// The state as a JSON object with keys sorted (deterministic output).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut entries = self.entries();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries.into_iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    /// The layers of the mapper items in progress, by item, keys sorted (`null` = the item removed the key).
    pub fn layers(&self) -> std::collections::BTreeMap<String, Map<String, Value>> {
        self.layers
            .iter()
            .map(|(item, layer)| {
                let mut keys: Vec<_> = layer.iter().map(|(k, v)| (k.to_string(), (**v).clone())).collect();
                keys.sort_by(|a, b| a.0.cmp(&b.0));
                (item.to_string(), keys.into_iter().collect())
            })
            .collect()
    }

    /// The sequence number of the last accepted write (0 before any write).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The conversation context held in this snapshot (see `ScopeHandle::context`), most recent last.
    pub fn context(&self) -> Vec<ContextEntry> {
        let mut entries: Vec<(u64, ContextEntry)> = self
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

    /// Looks `key`'s async markers up as this view sees them: in the layers of its item first (an async agent
    /// serving an item marks the key in the item's layer), then in the shared state.
    fn marker<'a, T>(&'a self, key: &str, find: impl Fn(&str) -> Option<T> + 'a) -> Option<T> {
        if let Some(at) = self.at.as_deref().filter(|_| !self.pending.is_empty() || !self.async_errors.is_empty()) {
            for layer in item_chain(at) {
                if let Some(t) = find(&marker_key(Some(layer), key)) {
                    return Some(t);
                }
            }
        }
        find(key)
    }

    /// Whether the async agent that was producing `key` failed (readers get its error).
    pub fn has_async_error(&self, key: &str) -> bool {
        self.async_error(key).is_some()
    }

    /// The error of the async agent that was producing `key`, when it failed.
    pub(crate) fn async_error(&self, key: &str) -> Option<&AgentError> {
        self.marker(key, |k| self.async_errors.get(k))
    }

    /// Whether async agents are still producing any key.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether an async agent is still producing `key`.
    pub fn is_pending(&self, key: &str) -> bool {
        self.marker(key, |k| self.pending.contains(k).then_some(())).is_some()
    }
}

/// The name of an async marker (pending key, async error): the key, qualified by the item layer it is in.
fn marker_key(layer: Option<&str>, key: &str) -> String {
    match layer {
        Some(layer) => [layer, "\u{1f}", key].concat(),
        None => key.to_string(),
    }
}

/// A state key with its value type and an optional default: typed access to the scope.
///
/// `TypedKey::<f64>::new("score")` reads and writes `score` as an `f64`; reading deserialises, so typed reads
/// are the allowlist of types the scope ever builds. Builders take typed keys for inputs and output keys
/// (`.input(&SCORE)`, `.output_key(&SCORE)`): the key's type is then declared as `T`'s
/// ([`crate::value::StateType`]) and checked against every other agent's declaration when the system is built.
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

    /// The value read when the key is absent, if set.
    pub fn default(&self) -> Option<&T> {
        self.default.as_ref()
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

/// The state a run's scope actor owns ([`crate::run`]'s `ScopeActor`): the published snapshot and the history.
pub(crate) struct ScopeState {
    /// The current snapshot lives only in the watch channel: writes modify it in place, so while no reader
    /// holds an older snapshot the persistent map is unshared and updated without copying its nodes.
    pub(crate) tx: watch::Sender<ScopeView>,
    pub(crate) history: Vec<InvocationRecord>,
}

impl ScopeState {
    /// A scope holding `initial` state, the layers of mapper items in progress and `history`, and the
    /// receiving side of its snapshots.
    pub(crate) fn new(
        initial: Map<String, Value>,
        layers: std::collections::BTreeMap<String, Map<String, Value>>,
        history: Vec<InvocationRecord>,
    ) -> (Self, watch::Receiver<ScopeView>) {
        let mut view = ScopeView::from_map(initial);
        view.layers = layers_of(layers);
        let (tx, rx) = watch::channel(view);
        (ScopeState { tx, history }, rx)
    }

    /// Applies a delta (`null` removes a key) to the shared state, or to the layer of mapper item `item`
    /// (where `null` hides the key), and returns its sequence number.
    pub(crate) fn apply(&mut self, item: Option<&Arc<str>>, delta: Vec<(String, Value)>) -> u64 {
        let mut seq = 0;
        self.tx.send_modify(|view| seq = apply_to(view, item, delta));
        seq
    }

    /// Drops the layer of mapper item `item` and of the items nested in it (the item has completed).
    pub(crate) fn drop_layers(&mut self, item: &str) {
        let nested = [item, "|"].concat();
        self.tx.send_if_modified(|view| {
            let before = view.layers.len();
            view.layers.retain(|k, _| &**k != item && !k.starts_with(&nested));
            view.layers.len() != before
        });
    }

    /// Marks `key` as being produced by an async agent (in mapper item layer `layer`, if any).
    pub(crate) fn mark_pending(&mut self, layer: Option<&Arc<str>>, key: &str) {
        let marker = marker_key(layer.map(|l| &**l), key);
        self.tx.send_modify(|view| {
            view.async_errors.remove(marker.as_str());
            view.pending.insert(marker);
        });
    }

    /// Ends an async production of `key` (in layer `layer`): applies its delta there, or records its error for
    /// readers.
    pub(crate) fn finish_async(
        &mut self,
        layer: Option<&Arc<str>>,
        key: &str,
        result: Result<Vec<(String, Value)>, AgentError>,
    ) -> u64 {
        let marker = marker_key(layer.map(|l| &**l), key);
        let mut seq = 0;
        // One published change: a reader never sees the key no longer pending and not yet written.
        self.tx.send_modify(|view| {
            view.pending.remove(marker.as_str());
            seq = match result {
                Ok(delta) => apply_to(view, layer, delta),
                Err(e) => {
                    view.async_errors.insert(marker, e);
                    view.seq
                }
            };
        });
        seq
    }

    /// Replaces the state and history (a run restarted from its journal), keeping the sequence number and the
    /// keys async agents are still producing.
    pub(crate) fn reset(
        &mut self,
        state: Map<String, Value>,
        layers: std::collections::BTreeMap<String, Map<String, Value>>,
        history: Vec<InvocationRecord>,
    ) {
        let fresh = ScopeView::from_map(state);
        self.tx.send_modify(|view| {
            view.state = fresh.state;
            view.layers = layers_of(layers);
        });
        self.history = history;
    }
}

/// Applies `delta` to `view` (its shared state, or the layer `item`) and returns the new sequence number.
fn apply_to(view: &mut ScopeView, item: Option<&Arc<str>>, delta: Vec<(String, Value)>) -> u64 {
    match item {
        None => {
            for (k, v) in delta {
                if v.is_null() {
                    view.state.remove(k.as_str());
                } else {
                    view.state.insert(Arc::from(k), Arc::new(v));
                }
            }
        }
        Some(item) => {
            let layer = view.layers.entry(item.clone()).or_default();
            for (k, v) in delta {
                layer.insert(Arc::from(k), Arc::new(v));
            }
        }
    }
    view.seq += 1;
    view.seq
}

/// The snapshot form of item layers as a run image keeps them.
fn layers_of(
    layers: std::collections::BTreeMap<String, Map<String, Value>>,
) -> SnapshotMap<Arc<str>, SnapshotMap<Arc<str>, Arc<Value>>> {
    layers
        .into_iter()
        .map(|(item, layer)| (Arc::from(item), layer.into_iter().map(|(k, v)| (Arc::from(k), Arc::new(v))).collect()))
        .collect()
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
        let scope = crate::run_actor::ScopeHandle::spawn("t", Map::new()).await.expect("spawn");
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
        assert_eq!(item_chain("|root/0#3|root/0/1/0#0").collect::<Vec<_>>(), ["|root/0#3|root/0/1/0#0", "|root/0#3"]);
        assert_eq!(item_chain("|root/0#12").collect::<Vec<_>>(), ["|root/0#12"]);
        scope.close().await;
        assert!(scope.write(vec![("a".into(), json!(1))]).await.is_err(), "a closed scope refuses writes");
    }
}
