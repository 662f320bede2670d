//! The registry of runs in this process: which memory ids are running (two invocations with one memory id
//! never run at once), the address of each running run (its scope actor, registered in ractor's registry
//! under a name made of this registry's id and the run id: answers and cancellations go to it as messages),
//! and the in-process stores of runs invoked without a store (multi-turn memory, in-process resume), evicted
//! least-recently-used first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use dashmap::DashMap;
use ractor::ActorRef;
use serde_json::Value;

use crate::ephemeral::EphemeralStore;
use crate::error::AgentError;
use crate::lock::lock;
use crate::run_actor::RunEvents;
use crate::run_actor::ScopeMsg;
use crate::store::StoreRef;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Default number of in-process stores kept for memory ids invoked without a store.
pub const REGISTRY_CAPACITY: usize = 1024;

struct Inner {
    /// Distinguishes this registry's runs in ractor's (process-wide) registry of names.
    id: u64,
    active: DashMap<String, ()>,
    kept: Mutex<KeptStores>,
}

struct KeptStores {
    capacity: usize,
    order: VecDeque<String>,
    stores: std::collections::HashMap<String, EphemeralStore>,
}

/// Runs known to this process. Cheap to clone; [`Registry::global`] is what invocations use by default.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("active", &self.inner.active.len()).finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::with_capacity(REGISTRY_CAPACITY)
    }
}

/// Marks a memory id active for the lifetime of a run.
pub(crate) struct ActiveGuard {
    registry: Registry,
    run_id: String,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.registry.inner.active.remove(&self.run_id);
    }
}

impl Registry {
    /// The process-wide registry.
    pub fn global() -> Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::default).clone()
    }

    /// A registry keeping at most `capacity` in-process stores (0 keeps none: memory ids without a store
    /// then start fresh every time).
    pub fn with_capacity(capacity: usize) -> Registry {
        Registry {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                active: DashMap::new(),
                kept: Mutex::new(KeptStores {
                    capacity,
                    order: VecDeque::new(),
                    stores: std::collections::HashMap::new(),
                }),
            }),
        }
    }

    /// Marks `run_id` active.
    ///
    /// # Errors
    /// [`AgentError::Run`] "run is active" when another invocation of the same memory id is running.
    pub(crate) fn activate(&self, run_id: &str) -> Result<ActiveGuard, AgentError> {
        use dashmap::mapref::entry::Entry;
        match self.inner.active.entry(run_id.to_string()) {
            Entry::Occupied(_) => Err(AgentError::Run {
                run_id: run_id.to_string(),
                message: "run is active: another invocation with this memory id is still running".to_string(),
            }),
            Entry::Vacant(v) => {
                v.insert(());
                Ok(ActiveGuard { registry: self.clone(), run_id: run_id.to_string() })
            }
        }
    }

    /// The name of run `run_id`'s scope actor in ractor's registry.
    pub(crate) fn actor_name(&self, run_id: &str) -> String {
        format!("agentic/{}/{run_id}", self.inner.id)
    }

    /// The address of run `run_id` running in this process.
    fn address(&self, run_id: &str) -> Result<ActorRef<ScopeMsg>, AgentError> {
        ractor::registry::where_is(self.actor_name(run_id)).map(ActorRef::from).ok_or_else(|| AgentError::Run {
            run_id: run_id.to_string(),
            message: "not running in this process".to_string(),
        })
    }

    /// Whether a run with this memory id is running in this process.
    pub fn is_active(&self, run_id: &str) -> bool {
        self.inner.active.contains_key(run_id)
    }

    /// Delivers an answer to a running run's pending-mode human agent (`mode: pending`), as a message to
    /// the run's actor.
    ///
    /// # Errors
    /// [`AgentError::Run`] when no run with this id is running in this process (answer a suspended run by
    /// resuming it with the answer instead).
    pub fn answer(&self, run_id: &str, response_id: &str, value: Value) -> Result<(), AgentError> {
        let not_running = || AgentError::Run {
            run_id: run_id.to_string(),
            message: "not running in this process; resume it with the answer instead".to_string(),
        };
        let run = self.address(run_id).map_err(|_| not_running())?;
        run.cast(ScopeMsg::Answer { id: response_id.to_string(), value }).map_err(|_| not_running())
    }

    /// Cancels the run with this id running in this process (as its `CancelHandle` would), as a message to
    /// the run's actor: its agents in flight are stopped, it is journaled `cancelled`, and its invocation
    /// returns `AgentError::Cancelled`.
    ///
    /// # Errors
    /// [`AgentError::Run`] when no run with this id is running in this process.
    pub fn cancel(&self, run_id: &str) -> Result<(), AgentError> {
        let run = self.address(run_id)?;
        run.cast(ScopeMsg::Cancel).map_err(|_| AgentError::Run {
            run_id: run_id.to_string(),
            message: "not running in this process".to_string(),
        })
    }

    /// The events of the run with this id running in this process, from when this returns, as a stream that ends
    /// with the run (after its `Completed`, `Suspended`, `Failed` or `Drained` event and `ScopeDestroyed`). The
    /// subscriber is an actor in the run's process group: the run's actor adds it, and every event of the run
    /// (at every level, with or without listeners) is sent to the group's members.
    ///
    /// # Errors
    /// [`AgentError::Run`] when no run with this id is running in this process.
    pub async fn subscribe(&self, run_id: &str) -> Result<RunEvents, AgentError> {
        let run = self.address(run_id)?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (subscriber, _) = ractor::Actor::spawn(None, crate::run_actor::EventSubscriber, tx)
            .await
            .map_err(|e| AgentError::internal(format!("cannot start an event subscriber: {e}")))?;
        let not_running =
            || AgentError::Run { run_id: run_id.to_string(), message: "not running in this process".to_string() };
        let (ack, joined) = tokio::sync::oneshot::channel();
        if run.cast(ScopeMsg::Subscribe(subscriber.get_cell(), ack.into())).is_err() || joined.await.is_err() {
            subscriber.stop(None);
            return Err(not_running());
        }
        Ok(RunEvents::new(rx))
    }

    /// The in-process store of `run_id` (created if absent; marked most recently used). Beyond the capacity,
    /// the least recently used stores of runs not running are evicted.
    pub(crate) fn kept_store(&self, run_id: &str) -> StoreRef {
        let mut kept = lock(&self.inner.kept);
        let store = kept.stores.entry(run_id.to_string()).or_default().clone();
        kept.order.retain(|id| id != run_id);
        kept.order.push_back(run_id.to_string());
        while kept.order.len() > kept.capacity {
            let victim = kept.order.iter().position(|id| {
                (id != run_id || kept.capacity == 0) && (id == run_id || !self.inner.active.contains_key(id))
            });
            let Some(id) = victim.and_then(|pos| kept.order.remove(pos)) else { break };
            kept.stores.remove(&id);
        }
        Arc::new(store)
    }

    /// Forgets the in-process store of `run_id` (its memory starts fresh next time).
    pub fn evict(&self, run_id: &str) {
        let mut kept = lock(&self.inner.kept);
        kept.order.retain(|id| id != run_id);
        kept.stores.remove(run_id);
    }

    /// Number of in-process stores kept.
    pub fn kept_len(&self) -> usize {
        lock(&self.inner.kept).stores.len()
    }
}
