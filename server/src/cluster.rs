//! Several servers on one database as one logical server (SERVER.md §4): what they tell each other.
//!
//! Messages go through the store ([`CheckpointStore::notify`]/[`CheckpointStore::listen`]: PostgreSQL
//! `NOTIFY`/`LISTEN` on a connection of its own), on three channels:
//! - `agentic_cancel` (payload: a run id) — sent by the store in the transaction that records a cancel
//!   ([`CheckpointStore::request_cancel`]); the server executing the run cancels it at once.
//! - `agentic_watch` (payload: a run id) — a server streaming a run's events (`GET /events`) says so every
//!   [`WATCH_EVERY`]; the server executing that run then publishes its live events for [`WATCH_TTL`], and
//!   answers each watch message with `{"o", "r", "p": 1}` (it executes the run and publishes).
//! - `agentic_events` (payload: JSON `{"o": owner, "i": number, "r": run id, "n": name, "d": data, "a": seq}`
//!   for a live event (`i` counts the sender's messages: PostgreSQL delivers identical payloads of one
//!   transaction once; `a` is the last step of the run appended by the sender before the event, absent when
//!   none), `{"o", "r", "j": seq}` once the run's steps up to `seq` are committed (`"s": true` added when its
//!   execution there ended: read its record too) — read by the followers of that run on the other servers.
//!
//! A follower ([`Cluster::follow`]) feeds a run's local event channel from the store: the journaled events
//! from the database (read up to the step a commit announcement names), the live ones from `agentic_events`,
//! and the final event from the run's record. The order is the executing server's: one task sends its
//! messages in the order they happen, a live event comes after the steps up to its `a` (read first when not
//! passed on yet) and before the later ones, and a step is passed on only once an announcement covers it, so
//! no step overtakes a live event that precedes it. A live event that arrives after a later step was passed on
//! (the stream began, or the store was read without an announcement) is dropped, never delivered out of
//! order. The store is read without an announcement every [`POLL_EVERY`] only while no server says it
//! publishes the run ([`PUBLISHER_TTL`] after the last message about it): when no one executes it, or its
//! executor does not know of the watch yet, or died. While the run executes on the follower's own server, the
//! follower stands by: that server's journal tap passes the steps on as they are appended, and the follower
//! counts them as passed, so no step comes twice when a run moves here. One store holds the whole truth; messages only make
//! things fast, so a message lost (a connection cut) delays, never loses.
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
/// How long an executing server publishes a run's events after the last watch message: long enough that a
/// busy server, whose watch messages queue up behind event messages, does not stop publishing meanwhile.
const WATCH_TTL: Duration = Duration::from_secs(15);
/// How often a follower reads the store without being told to (the safety net), while no server publishes
/// its run.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// How long after the last message about its run from the server executing it a follower counts on that
/// server's announcements instead of reading the store by itself: that server answers every watch message
/// (one each [`WATCH_EVERY`]), so only a server that stopped executing the run, died, or lags by this much
/// falls silent for so long.
const PUBLISHER_TTL: Duration = Duration::from_secs(5);
/// PostgreSQL refuses a `NOTIFY` payload of 8000 bytes or more; a live event larger than this is not sent
/// (its journaled step still is, from the database).
const MAX_PAYLOAD: usize = 7900;

/// What a follower is told.
enum ToFollower {
    /// A live event of its run from the server executing it, with the last step that server had appended
    /// before it.
    Live(SseEvent, Option<u64>),
    /// Something of its run was committed: read the store.
    Read(Read),
    /// The server executing its run publishes its events.
    Publishing,
    /// This server listens again after its connection was lost: messages may be lost, read everything.
    Reconnected,
    /// Its run's execution here ended, its record written, after this server appended the steps up to this
    /// one (passed on by its journal tap): read the rest and how it ended.
    EndedHere(Option<u64>),
}

/// What to read of a followed run.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Read {
    /// Its steps up to this one (`None`: all of them).
    to: Option<u64>,
    /// Its record too (its execution somewhere ended: it may have ended, or suspended).
    status: bool,
}

impl Read {
    /// Everything: the steps and the record.
    const ALL: Read = Read { to: None, status: true };

    /// One read serving both.
    fn and(self, other: Read) -> Read {
        let to = match (self.to, other.to) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        Read { to, status: self.status || other.status }
    }
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
    /// Live events published so far (their number in their message).
    sent: std::sync::atomic::AtomicU64,
    /// Runs some server streams, until when.
    watched: Mutex<HashMap<String, Instant>>,
    /// Payloads for `agentic_events`, sent in order by one task.
    outbox: mpsc::UnboundedSender<String>,
    outbox_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// The runs executing here ([`Cluster::began`] to [`Cluster::ended`]), with the last step each appended
    /// here (what a commit announcement names, and the `a` of its live events; `None` before its first).
    appended: Mutex<HashMap<String, Option<u64>>>,
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
                sent: std::sync::atomic::AtomicU64::new(0),
                watched: Mutex::default(),
                outbox,
                outbox_rx: Mutex::new(Some(rx)),
                appended: Mutex::default(),
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
        // `i` numbers the messages: PostgreSQL delivers identical payloads sent in one transaction once, and two
        // live events can be identical (a loop's `agent_started`, iteration after iteration).
        let i = self.inner.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut payload = json!({"o": self.inner.owner, "i": i, "r": run_id, "n": event.name, "d": event.data});
        if let Some(Some(seq)) = locked(&self.inner.appended).get(run_id) {
            payload["a"] = Value::from(*seq);
        }
        let payload = payload.to_string();
        if payload.len() > MAX_PAYLOAD {
            tracing::debug!(run_id, "a live `{}` event is too large to publish ({} bytes)", event.name, payload.len());
            return;
        }
        let _ = self.inner.outbox.send(payload);
    }

    /// `run_id` begins executing here: its steps are appended here until [`Cluster::ended`].
    pub(crate) fn began(&self, run_id: &str) {
        if self.inner.shared {
            locked(&self.inner.appended).entry(run_id.to_string()).or_insert(None);
        }
    }

    /// Step `seq` of `run_id` (executing here) was appended: a later commit announcement names it, so that
    /// the followers read up to it and no further — steps committed after the live events not sent yet would
    /// otherwise come before them; the live events published from now on say they follow it. (A step appended
    /// for a run that does not execute here, a fork's copied steps, is not tracked.)
    pub(crate) fn appended(&self, run_id: &str, seq: u64) {
        if self.inner.shared
            && let Some(last) = locked(&self.inner.appended).get_mut(run_id)
        {
            *last = Some(last.map_or(seq, |l| l.max(seq)));
        }
    }

    /// Announces that `run_id`'s steps appended so far are committed, if some server streams it (nothing
    /// when none was appended here).
    pub(crate) fn committed(&self, run_id: &str) {
        if self.watched(run_id)
            && let Some(Some(seq)) = locked(&self.inner.appended).get(run_id).copied()
        {
            let message = json!({"o": self.inner.owner, "r": run_id, "j": seq});
            let _ = self.inner.outbox.send(message.to_string());
        }
    }

    /// [`Cluster::committed`] for every run appended to here (a flush of the whole store).
    pub(crate) fn committed_all(&self) {
        if !self.inner.shared {
            return;
        }
        let runs: Vec<String> =
            locked(&self.inner.appended).iter().filter(|(_, seq)| seq.is_some()).map(|(r, _)| r.clone()).collect();
        for run_id in runs {
            self.committed(&run_id);
        }
    }

    /// `run_id`'s execution here ended, its record written: the servers streaming it read its steps and its
    /// record (ended, or suspended).
    pub(crate) fn ended(&self, run_id: &str) {
        if !self.inner.shared {
            return;
        }
        let seq = locked(&self.inner.appended).remove(run_id).flatten();
        if let Some(tx) = locked(&self.inner.followers).get(run_id) {
            let _ = tx.send(ToFollower::EndedHere(seq));
        }
        if self.watched(run_id) {
            let j = seq.map_or(json!(true), Value::from);
            let _ = self.inner.outbox.send(json!({"o": self.inner.owner, "r": run_id, "j": j, "s": true}).to_string());
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
                        tracing::warn!("cannot publish run events: {e}");
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
                        WATCH_CHANNEL => cluster.watch(payload),
                        EVENTS_CHANNEL => cluster.received(&payload),
                        _ => {}
                    },
                    Notice::Reconnected => {
                        reconnected();
                        for tx in locked(&cluster.inner.followers).values() {
                            let _ = tx.send(ToFollower::Reconnected);
                        }
                    }
                    _ => {}
                }
            }
        });
        Ok(())
    }

    /// Whether `run_id` executes here, and the last step it appended here.
    fn appended_here(&self, run_id: &str) -> Option<Option<u64>> {
        locked(&self.inner.appended).get(run_id).copied()
    }

    /// A watch message for `run_id`: its live events are published from now on; when it executes here, the
    /// followers hear that it does ([`PUBLISHER_TTL`]).
    fn watch(&self, run_id: String) {
        if locked(&self.inner.appended).contains_key(&run_id) {
            let _ = self.inner.outbox.send(json!({"o": self.inner.owner, "r": run_id, "p": 1}).to_string());
        }
        locked(&self.inner.watched).insert(run_id, Instant::now() + WATCH_TTL);
    }

    /// An `agentic_events` message: to the follower of its run, if one runs here.
    fn received(&self, payload: &str) {
        // This server's own messages (`{"o":"<owner>",…`, as `json!` writes them) are skipped unparsed.
        if payload.get(6..6 + self.inner.owner.len()) == Some(self.inner.owner.as_str()) {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(payload) else { return };
        let Some(run_id) = message["r"].as_str() else { return };
        let followers = locked(&self.inner.followers);
        let Some(tx) = followers.get(run_id) else { return };
        if let Some(j) = message.get("j") {
            let status = message.get("s").is_some();
            let _ = tx.send(ToFollower::Read(Read { to: j.as_u64(), status }));
        } else if message.get("p").is_some() {
            let _ = tx.send(ToFollower::Publishing);
        } else if let (Some(name), Some(data)) = (message["n"].as_str().and_then(live_event_name), message.get("d")) {
            let _ = tx.send(ToFollower::Live(SseEvent { name, data: data.clone() }, message["a"].as_u64()));
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
            let ahead = std::collections::VecDeque::new();
            let names = crate::events::AgentNames::default();
            let mut follower = Follower {
                store,
                hub,
                cluster: cluster.clone(),
                run_id,
                last,
                asked: last,
                ahead,
                status,
                names,
                heard: None,
            };
            let mut watch_at = Instant::now();
            'follow: loop {
                if watch_at <= Instant::now() {
                    // Also a heartbeat: the executing server publishes while it hears it.
                    let _ = follower.store.notify_dyn(WATCH_CHANNEL, vec![follower.run_id.clone()]).await;
                    watch_at = Instant::now() + WATCH_EVERY;
                }
                // The messages queued now (not those arriving meanwhile: the heartbeat must not wait for a
                // quiet moment), or, after a quiet poll interval, a read of everything when no server says it
                // publishes the run (its announcements would cover what is committed, in order).
                let mut batch = Vec::new();
                tokio::select! {
                    message = rx.recv() => match message {
                        Some(message) => batch.push(message),
                        None => break,
                    },
                    () = tokio::time::sleep(POLL_EVERY) => {
                        if follower.heard.is_none_or(|at| at.elapsed() >= PUBLISHER_TTL) && !follower.local() {
                            batch.push(ToFollower::Read(Read::ALL));
                        }
                    }
                };
                for _ in 0..rx.len().min(4096) {
                    match rx.try_recv() {
                        Ok(message) => batch.push(message),
                        Err(_) => break,
                    }
                }
                // Consecutive announcements are served by one read, in order with the live events.
                let mut read: Option<Read> = None;
                for message in batch {
                    match message {
                        ToFollower::Read(more) => {
                            follower.heard = Some(Instant::now());
                            read = Some(read.map_or(more, |r| r.and(more)));
                        }
                        ToFollower::Publishing => follower.heard = Some(Instant::now()),
                        ToFollower::Reconnected => {
                            follower.heard = None;
                            read = Some(Read::ALL);
                        }
                        ToFollower::EndedHere(seq) => {
                            // Its steps appended here were passed on; the others (another server's, when the run
                            // lost its lease here) and its end are read now.
                            follower.passed_up_to(seq.unwrap_or(0));
                            read = Some(read.map_or(Read::ALL, |r| r.and(Read::ALL)));
                        }
                        ToFollower::Live(event, after) => {
                            follower.heard = Some(Instant::now());
                            if let Some(bound) = read.take()
                                && follower.read(bound).await
                            {
                                break 'follow;
                            }
                            if follower.live(event, after).await {
                                break 'follow;
                            }
                        }
                    }
                }
                if let Some(bound) = read
                    && follower.read(bound).await
                {
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

/// The live events a follower passes on (the journaled ones — `agent_completed`, `agent_failed`, `tool_call`,
/// `model_turn` —, `suspended` and the final one it reads from the store).
fn live_event_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "agent_started" => "agent_started",
        "token" => "token",
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
    /// This server's side (whether the run executes here now).
    cluster: Cluster,
    run_id: String,
    /// The last journaled step passed on.
    last: u64,
    /// The last step asked of the store so far (reads for live events do not ask twice).
    asked: u64,
    /// When the server executing the run last said something about it (`None`: not since the follower
    /// began, or since messages may have been lost).
    heard: Option<Instant>,
    /// Steps read from the store and not passed on yet (announced later, after live events that precede them):
    /// one query serves many announcements.
    ahead: std::collections::VecDeque<agentic_engine::StepRecord>,
    /// The run's status as last read.
    status: Option<RunStatus>,
    /// The names of the run's agents, for the events of its call records: from the records read, the
    /// `agent_started` events of the server executing it, and the run's topology.
    names: crate::events::AgentNames,
}

impl Follower {
    /// Whether the run executes here now: its journal tap passes its steps on as they are appended, and the
    /// follower stands by, counting them as passed (steps this server appended are never passed on twice).
    fn local(&mut self) -> bool {
        let Some(appended) = self.cluster.appended_here(&self.run_id) else { return false };
        self.passed_up_to(appended.unwrap_or(0));
        true
    }

    /// The steps up to `seq` were passed on by this server's journal tap.
    fn passed_up_to(&mut self, seq: u64) {
        self.last = self.last.max(seq);
        self.asked = self.asked.max(seq);
        while self.ahead.front().is_some_and(|r| r.seq <= self.last) {
            self.ahead.pop_front();
        }
    }

    /// Passes on a live event that came after step `after` (of the server executing the run): first the steps
    /// up to `after` not passed on yet, when committed; dropped when a later step was passed on already (it
    /// would come out of order). Returns whether the run ended.
    async fn live(&mut self, event: SseEvent, after: Option<u64>) -> bool {
        if self.local() {
            // A server that executed the run before this one took it over.
            return false;
        }
        if let Some(after) = after {
            if after < self.last {
                tracing::trace!(run_id = self.run_id, after, last = self.last, "a late live `{}` dropped", event.name);
                return false;
            }
            if after > self.asked && self.read(Read { to: Some(after), status: false }).await {
                return true;
            }
        }
        if event.name == "agent_started"
            && let (Some(path), Some(agent)) = (event.data["path"].as_str(), event.data["agent"].as_str())
        {
            self.names.insert(path, agent);
        }
        self.hub.publish(&self.run_id, event);
        false
    }

    /// Passes on the steps committed after `last` that `read` asks for (from the store only when those read
    /// ahead do not reach that far), then, when asked and no step read is left, the final event if the run
    /// ended (or `suspended`); returns whether it ended.
    async fn read(&mut self, read: Read) -> bool {
        if self.local() {
            return false;
        }
        let have = self.ahead.back().map_or(self.last, |r| r.seq);
        if read.to.is_none_or(|to| to > have) {
            match self.store.records_from_dyn(&self.run_id, have + 1).await {
                Ok(records) => {
                    self.names.learn(&records, &[]);
                    self.names.complete(&self.store, &self.run_id, &records).await;
                    self.ahead.extend(records);
                    let read_to = self.ahead.back().map_or(have, |r| r.seq);
                    self.asked = self.asked.max(read.to.unwrap_or(read_to));
                }
                Err(e) => {
                    tracing::debug!(run_id = self.run_id, "cannot read the run's journal: {e}");
                    return false;
                }
            }
            // The run began executing here during the read: the steps appended here are passed on already.
            if self.local() {
                return false;
            }
        }
        while let Some(record) = self.ahead.front() {
            if read.to.is_some_and(|to| record.seq > to) {
                // Announced later, after the live events that precede it.
                return false;
            }
            for event in SseEvent::of_step(record, &|path| self.names.get(path)) {
                self.hub.publish(&self.run_id, event);
            }
            self.last = self.last.max(record.seq);
            self.ahead.pop_front();
        }
        if !read.status {
            return false;
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
                    self.names.learn(&rest, &record.pending);
                    self.names.complete(&self.store, &self.run_id, &rest).await;
                    for step in &rest {
                        for event in SseEvent::of_step(step, &|path| self.names.get(path)) {
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
