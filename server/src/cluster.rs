//! Several servers on one database as one logical server (SERVER.md §4): what they tell each other.
//!
//! Messages go through the store ([`CheckpointStore::notify`]/[`CheckpointStore::listen`]: PostgreSQL
//! `NOTIFY`/`LISTEN` on a connection of its own), on three channels:
//! - `agentic_cancel` (payload: a run id) — sent by the store in the transaction that records a cancel
//!   ([`CheckpointStore::request_cancel`]); the server executing the run cancels it at once.
//! - `agentic_watch` (payload: a run id) — a server streaming a run's events (`GET /events`) says so every
//!   [`WATCH_EVERY`]; the server executing that run then publishes its live events for [`WATCH_TTL`].
//! - `agentic_events` (payload: JSON `{"o": owner, "r": run id, "n": name, "d": data}` for a live event,
//!   `{"o", "r", "j": true}` once a step or a record of the run is committed) — read by the followers of
//!   that run on the other servers.
//!
//! A follower ([`Cluster::follow`]) feeds a run's local event channel from the store: the journaled events
//! from the database (read when a commit is announced, and every [`POLL_EVERY`] as the safety net), the live
//! ones from `agentic_events`, and the final event from the run's record. One store holds the whole truth;
//! messages only make things fast, so a message lost (a connection cut) delays, never loses.
//!
//! [`CheckpointStore::notify`]: agentic_engine::CheckpointStore::notify
//! [`CheckpointStore::listen`]: agentic_engine::CheckpointStore::listen
//! [`CheckpointStore::request_cancel`]: agentic_engine::CheckpointStore::request_cancel

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentic_engine::{Notice, RunStatus, StoreRef};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::events::{EventHub, SseEvent};

/// The channel of recorded cancels.
pub(crate) const CANCEL_CHANNEL: &str = "agentic_cancel";
/// The channel of event-stream watchers.
const WATCH_CHANNEL: &str = "agentic_watch";
/// The channel of runs' live events and commit announcements.
const EVENTS_CHANNEL: &str = "agentic_events";

/// How often a follower says it watches its run.
const WATCH_EVERY: Duration = Duration::from_millis(1000);
/// How long an executing server publishes a run's events after the last watch message.
const WATCH_TTL: Duration = Duration::from_millis(3500);
/// How often a follower reads the store without being told to (the safety net).
const POLL_EVERY: Duration = Duration::from_millis(500);
/// PostgreSQL refuses a `NOTIFY` payload of 8000 bytes or more; a live event larger than this is not sent
/// (its journaled step still is, from the database).
const MAX_PAYLOAD: usize = 7900;

/// What a follower is told.
enum ToFollower {
    /// A live event of its run, from the server executing it.
    Live(SseEvent),
    /// Something of its run was committed: read the store.
    Read,
}

/// This server's side of the cluster: publishes the live events of watched runs, runs the followers of runs
/// streamed here. Inert on a store that one process holds (no messages).
#[derive(Clone)]
pub(crate) struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    /// Whether the store is shared (else everything here is a no-op).
    shared: bool,
    /// This server's id in messages (its own are ignored).
    owner: String,
    /// Runs some server streams, until when.
    watched: Mutex<HashMap<String, Instant>>,
    /// Payloads for `agentic_events`, sent in order by one task.
    outbox: mpsc::UnboundedSender<String>,
    outbox_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// The followers running here, by run.
    followers: Mutex<HashMap<String, mpsc::UnboundedSender<ToFollower>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Cluster {
    /// A cluster side for a store that is `shared` or not.
    pub(crate) fn new(shared: bool) -> Cluster {
        let (outbox, rx) = mpsc::unbounded_channel();
        Cluster {
            inner: Arc::new(Inner {
                shared,
                owner: uuid::Uuid::new_v4().simple().to_string(),
                watched: Mutex::default(),
                outbox,
                outbox_rx: Mutex::new(Some(rx)),
                followers: Mutex::default(),
            }),
        }
    }

    fn watched(&self, run_id: &str) -> bool {
        if !self.inner.shared {
            return false;
        }
        let mut watched = locked(&self.inner.watched);
        match watched.get(run_id) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                watched.remove(run_id);
                false
            }
            None => false,
        }
    }

    /// Publishes a live event of `run_id` (executing here) to the servers streaming it.
    pub(crate) fn publish(&self, run_id: &str, event: &SseEvent) {
        if !self.watched(run_id) || event.is_final() {
            return;
        }
        let payload = json!({"o": self.inner.owner, "r": run_id, "n": event.name, "d": event.data}).to_string();
        if payload.len() > MAX_PAYLOAD {
            tracing::debug!(run_id, "a live `{}` event is too large to publish ({} bytes)", event.name, payload.len());
            return;
        }
        let _ = self.inner.outbox.send(payload);
    }

    /// Announces that something of `run_id` was committed (a step, its record), if some server streams it.
    pub(crate) fn committed(&self, run_id: &str) {
        if self.watched(run_id) {
            let _ = self.inner.outbox.send(json!({"o": self.inner.owner, "r": run_id, "j": true}).to_string());
        }
    }

    /// [`Cluster::committed`] for every watched run (a flush of the whole store).
    pub(crate) fn committed_all(&self) {
        if !self.inner.shared {
            return;
        }
        let runs: Vec<String> = locked(&self.inner.watched).keys().cloned().collect();
        for run_id in runs {
            self.committed(&run_id);
        }
    }

    /// Starts listening and publishing (a shared store). `cancel` is called with the run id of every cancel
    /// recorded anywhere; `reconnected` after the listening connection was lost and re-established.
    pub(crate) async fn start(
        &self,
        store: StoreRef,
        cancel: impl Fn(String) + Send + 'static,
        reconnected: impl Fn() + Send + 'static,
    ) -> Result<(), agentic_engine::StoreError> {
        if !self.inner.shared {
            return Ok(());
        }
        let channels = [CANCEL_CHANNEL, WATCH_CHANNEL, EVENTS_CHANNEL].map(str::to_string).to_vec();
        let Some(mut notices) = store.listen_dyn(channels).await? else { return Ok(()) };
        if let Some(mut outbox) = locked(&self.inner.outbox_rx).take() {
            let store = store.clone();
            tokio::spawn(async move {
                while let Some(first) = outbox.recv().await {
                    let mut batch = vec![first];
                    while batch.len() < 256
                        && let Ok(next) = outbox.try_recv()
                    {
                        batch.push(next);
                    }
                    if let Err(e) = store.notify_dyn(EVENTS_CHANNEL, batch).await {
                        tracing::debug!("cannot publish run events: {e}");
                    }
                }
            });
        }
        let cluster = self.clone();
        tokio::spawn(async move {
            while let Some(notice) = notices.recv().await {
                match notice {
                    Notice::Message { channel, payload } => match channel.as_str() {
                        CANCEL_CHANNEL => cancel(payload),
                        WATCH_CHANNEL => {
                            locked(&cluster.inner.watched).insert(payload, Instant::now() + WATCH_TTL);
                        }
                        EVENTS_CHANNEL => cluster.received(&payload),
                        _ => {}
                    },
                    Notice::Reconnected => {
                        reconnected();
                        for tx in locked(&cluster.inner.followers).values() {
                            let _ = tx.send(ToFollower::Read);
                        }
                    }
                    _ => {}
                }
            }
        });
        Ok(())
    }

    /// An `agentic_events` message: to the follower of its run, if one runs here.
    fn received(&self, payload: &str) {
        let Ok(message) = serde_json::from_str::<Value>(payload) else { return };
        if message["o"].as_str() == Some(self.inner.owner.as_str()) {
            return;
        }
        let Some(run_id) = message["r"].as_str() else { return };
        let followers = locked(&self.inner.followers);
        let Some(tx) = followers.get(run_id) else { return };
        if message["j"].as_bool() == Some(true) {
            let _ = tx.send(ToFollower::Read);
        } else if let (Some(name), Some(data)) = (message["n"].as_str().and_then(live_event_name), message.get("d")) {
            let _ = tx.send(ToFollower::Live(SseEvent { name, data: data.clone() }));
        }
    }

    /// Feeds `run_id`'s local event channel from the store and the other servers while someone here
    /// subscribes to it: its journaled steps after `last`, the live events of the server executing it, and
    /// its final event. One follower per run and server.
    pub(crate) fn follow(&self, store: StoreRef, hub: EventHub, run_id: &str, last: u64) {
        if !self.inner.shared {
            return;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut followers = locked(&self.inner.followers);
            if followers.get(run_id).is_some_and(|f| !f.is_closed()) {
                return;
            }
            followers.insert(run_id.to_string(), tx);
        }
        let cluster = self.clone();
        let run_id = run_id.to_string();
        tokio::spawn(async move {
            let status = store.run_dyn(&run_id).await.ok().flatten().map(|r| r.status);
            let mut follower = Follower { store, hub, run_id, last, status };
            let mut watch_at = Instant::now();
            loop {
                if watch_at <= Instant::now() {
                    // Also a heartbeat: the executing server publishes while it hears it.
                    let _ = follower.store.notify_dyn(WATCH_CHANNEL, vec![follower.run_id.clone()]).await;
                    watch_at = Instant::now() + WATCH_EVERY;
                }
                let read = tokio::select! {
                    message = rx.recv() => match message {
                        Some(ToFollower::Live(event)) => {
                            follower.hub.publish(&follower.run_id, event);
                            false
                        }
                        Some(ToFollower::Read) => true,
                        None => break,
                    },
                    () = tokio::time::sleep(POLL_EVERY) => true,
                };
                // Announcements that queued up meanwhile are served by one read.
                let mut read = read;
                while let Ok(message) = rx.try_recv() {
                    match message {
                        ToFollower::Live(event) => {
                            if read {
                                follower.read().await;
                                read = false;
                            }
                            follower.hub.publish(&follower.run_id, event);
                        }
                        ToFollower::Read => read = true,
                    }
                }
                if read && follower.read().await {
                    break;
                }
                if !follower.hub.has_subscribers(&follower.run_id) {
                    break;
                }
            }
            locked(&cluster.inner.followers).remove(&follower.run_id);
        });
    }
}

/// The live events a follower passes on (the journaled ones, `suspended` and the final one it reads from the
/// store).
fn live_event_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "agent_started" => "agent_started",
        "token" => "token",
        "tool_call" => "tool_call",
        "tool_result" => "tool_result",
        "planner_decision" => "planner_decision",
        "resumed" => "resumed",
        _ => return None,
    })
}

/// A run followed from the store.
struct Follower {
    store: StoreRef,
    hub: EventHub,
    run_id: String,
    /// The last journaled step passed on.
    last: u64,
    /// The run's status as last read.
    status: Option<RunStatus>,
}

impl Follower {
    /// Passes on the steps committed after `last`, then the final event when the run ended; returns whether
    /// it ended.
    async fn read(&mut self) -> bool {
        let records = match self.store.records_from_dyn(&self.run_id, self.last + 1).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(run_id = self.run_id, "cannot read the run's journal: {e}");
                return false;
            }
        };
        for record in &records {
            if let Some(event) = SseEvent::of_step(record) {
                self.hub.publish(&self.run_id, event);
            }
            self.last = self.last.max(record.seq);
        }
        let record = match self.store.run_dyn(&self.run_id).await {
            Ok(Some(r)) => r,
            Ok(None) => return false,
            Err(e) => {
                tracing::debug!(run_id = self.run_id, "cannot read the run's record: {e}");
                return false;
            }
        };
        let changed = self.status != Some(record.status);
        self.status = Some(record.status);
        match record.status {
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled => {
                // Steps committed with the record (exit durability) come first.
                if let Ok(rest) = self.store.records_from_dyn(&self.run_id, self.last + 1).await {
                    for step in &rest {
                        if let Some(event) = SseEvent::of_step(step) {
                            self.hub.publish(&self.run_id, event);
                        }
                        self.last = self.last.max(step.seq);
                    }
                }
                if let Some(event) = SseEvent::of_status(&record, self.last) {
                    self.hub.publish(&self.run_id, event);
                }
                true
            }
            RunStatus::Suspended if changed => {
                if let Some(event) = SseEvent::of_status(&record, self.last) {
                    self.hub.publish(&self.run_id, event);
                }
                false
            }
            _ => false,
        }
    }
}
