//! The scheduler: fires the ticks of the store's schedules (SERVER.md §6). Every server with `--specs` runs
//! one; on a database several servers share, they fire each tick once between them.
//!
//! A pass reads every schedule and, for each one, does what is due, in this order:
//!
//! 1. **A start left behind.** A tick taken whose run was not created (its server died between taking the
//!    tick and writing the run's record; an entry of [`ScheduleRecord::starts`] with an owner, older than a
//!    lease) is taken over and its run started here.
//! 2. **The queue.** The oldest queued tick ([`Overlap::Enqueue`]) starts once the schedule's previous run
//!    ended.
//! 3. **The tick.** The latest tick at or before now, when it is later than the latest tick taken and than the
//!    schedule's definition: after downtime only that one runs (the ticks missed meanwhile are not run, and
//!    the log says so). Depending on the overlap and on whether the previous run is still active (`running`
//!    or `suspended`), the tick starts its run, is queued, or is skipped.
//!
//! Every change is a compare-and-set on the whole schedule (`CheckpointStore::change_schedule`): it is made
//! only when the schedule is still as this pass read it, so of several servers taking one tick exactly one
//! succeeds, and the others read the schedule again and find the tick taken. A run's id is
//! `<schedule id>-<tick>`: its start is refused by the store when the run exists (`409`), so a tick started
//! again after a take-over does not run twice.
//!
//! Passes run at each tick (the earliest next tick of all schedules), at least every second (ticks taken by
//! other servers, queued ticks whose previous run ended elsewhere), and at once when a run ends here while a
//! queued tick waits for it.

use std::collections::HashMap;
use std::time::Duration;

use agentic_engine::{Durability, Overlap, RunStatus, ScheduleChange, ScheduleRecord, TickStart, basic_utc};
use axum::http::StatusCode;
use tokio_util::sync::CancellationToken;

use crate::host::{NewRun, RunHost, SpecSource};
use crate::schedule::{Timing, now_ms};

/// The longest time between two passes.
const POLL: Duration = Duration::from_secs(1);

/// The most ticks a schedule queues ([`Overlap::Enqueue`]); a tick beyond is skipped (counted in
/// [`ScheduleRecord::skipped`]).
pub(crate) const MAX_QUEUED: usize = 100;

/// How many changes one pass makes to one schedule at most (a take-over, the queue's head, the tick, and
/// re-reads after another server's change).
const MAX_STEPS: usize = 8;

/// The scheduler of one server.
pub(crate) struct Scheduler {
    host: RunHost,
    /// This server's id in [`TickStart::owner`].
    owner: String,
    /// How long a start may take before another server takes it over (the lease time).
    lease_ms: u64,
    /// Whether other servers share the store (else a start of another owner was left by a dead process).
    shared: bool,
    /// Parsed cron expressions by `(cron, timezone)`; `None` for one that does not parse (reported once).
    timings: HashMap<(String, String), Option<Timing>>,
}

/// What a pass did to one schedule.
enum Step {
    /// Nothing is due.
    Idle,
    /// A change was made or refused: read the schedule again and go on.
    Again,
}

impl Scheduler {
    /// A scheduler for `host`'s store; `lease` is how long another server's start may take before it is taken
    /// over.
    pub(crate) fn new(host: RunHost, lease: Duration) -> Scheduler {
        let shared = host.store().shared_dyn();
        Scheduler {
            host,
            owner: format!("scheduler-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
            shared,
            timings: HashMap::new(),
        }
    }

    /// Fires ticks until `stop` (or until the host stops accepting runs).
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let mut ended = self.host.runs_ended();
        loop {
            if stop.is_cancelled() || !self.host.accepting() {
                return;
            }
            let (wake, awaited) = self.pass().await;
            let now = now_ms();
            let pause = wake.map_or(POLL, |at| Duration::from_millis(at.saturating_sub(now)).min(POLL));
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
                () = one_ends(&mut ended, &awaited) => {}
            }
        }
    }

    /// One pass over every schedule. Returns the earliest next tick, and the runs whose end a queued tick
    /// waits for.
    async fn pass(&mut self) -> (Option<u64>, Vec<String>) {
        let schedules = match self.host.store().schedules_dyn().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot read the schedules: {e}");
                return (None, Vec::new());
            }
        };
        let mut wake: Option<u64> = None;
        let mut awaited = Vec::new();
        // Only the expressions of the schedules that exist now stay parsed.
        let used: std::collections::HashSet<(String, String)> =
            schedules.iter().map(|s| (s.cron.clone(), s.timezone.clone())).collect();
        self.timings.retain(|key, _| used.contains(key));
        for schedule in schedules {
            let Some(schedule) = self.visit(schedule).await else { continue };
            let from = now_ms().max(schedule.defined_at_ms);
            if let Some(next) = self.timing(&schedule).and_then(|t| t.next_after(from)) {
                wake = Some(wake.map_or(next, |w| w.min(next)));
            }
            if schedule.starts.iter().any(|e| e.owner.is_none())
                && let Some(last) = schedule.last_run_id
            {
                awaited.push(last);
            }
        }
        (wake, awaited)
    }

    /// Does what is due for `schedule`; returns it as it is afterwards (`None`: deleted meanwhile).
    async fn visit(&mut self, mut schedule: ScheduleRecord) -> Option<ScheduleRecord> {
        for _ in 0..MAX_STEPS {
            if !self.host.accepting() {
                break;
            }
            match self.step(&schedule).await {
                Step::Idle => break,
                Step::Again => match self.host.store().schedule_dyn(&schedule.id).await {
                    Ok(Some(s)) => schedule = s,
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::warn!(schedule = schedule.id, "cannot read the schedule: {e}");
                        break;
                    }
                },
            }
        }
        Some(schedule)
    }

    /// The first thing due for `s`, done.
    async fn step(&mut self, s: &ScheduleRecord) -> Step {
        let now = now_ms();
        // 1. A start another server (or an earlier attempt here) left behind.
        if let Some(entry) = s.starts.iter().find(|e| self.left_behind(e, now)) {
            let run_id = entry.run_id.clone();
            let (owner, since) = (self.owner.clone(), now);
            let id = run_id.clone();
            let taken = self
                .compare_and_set(s, move |c| {
                    let e = c.starts.iter_mut().find(|e| e.run_id == id).ok_or("gone")?;
                    e.owner = Some(owner);
                    e.since_ms = since;
                    Ok(())
                })
                .await;
            if taken {
                tracing::info!(schedule = s.id, run_id, "taking over the start of a tick left behind");
                self.start(s, &run_id).await;
            }
            return Step::Again;
        }
        // 2. The oldest queued tick, once the previous run ended.
        if let Some(head) = s.starts.first().filter(|e| e.owner.is_none())
            && !self.previous_active(s).await
        {
            let run_id = head.run_id.clone();
            let (owner, id) = (self.owner.clone(), run_id.clone());
            let taken = self
                .compare_and_set(s, move |c| {
                    let e = c.starts.first_mut().filter(|e| e.run_id == id).ok_or("gone")?;
                    e.owner = Some(owner);
                    e.since_ms = now;
                    c.last_run_id = Some(id);
                    Ok(())
                })
                .await;
            if taken {
                tracing::info!(schedule = s.id, run_id, "a queued tick starts: the previous run ended");
                self.start(s, &run_id).await;
            }
            return Step::Again;
        }
        // 3. The latest tick, if it was not taken.
        let Some(timing) = self.timing(s) else { return Step::Idle };
        let after = s.defined_at_ms.max(s.last_tick_ms.unwrap_or(0));
        let Some(tick) = timing.latest_at_or_before(now).filter(|t| *t > after) else { return Step::Idle };
        let missed = timing.next_after(after).filter(|first| *first < tick);
        let active = match s.overlap {
            Overlap::Allow => false,
            Overlap::Skip | Overlap::Enqueue => self.previous_active(s).await,
        };
        let run_id = s.run_id_at(tick);
        let decision = match s.overlap {
            Overlap::Allow => Decision::Start,
            Overlap::Skip if active => Decision::Skip,
            Overlap::Enqueue if active || !s.starts.is_empty() => {
                if s.starts.len() >= MAX_QUEUED {
                    Decision::Skip
                } else {
                    Decision::Queue
                }
            }
            Overlap::Skip | Overlap::Enqueue => Decision::Start,
        };
        let (owner, id) = (self.owner.clone(), run_id.clone());
        let taken = self
            .compare_and_set(s, move |c| {
                c.last_tick_ms = Some(tick);
                let entry = |owner| TickStart { run_id: id.clone(), tick_ms: tick, owner, since_ms: now };
                match decision {
                    Decision::Start => {
                        c.starts.push(entry(Some(owner)));
                        c.last_run_id = Some(id.clone());
                    }
                    Decision::Queue => c.starts.push(entry(None)),
                    Decision::Skip => c.skipped += 1,
                }
                Ok(())
            })
            .await;
        if !taken {
            return Step::Again;
        }
        if let Some(first) = missed {
            tracing::info!(
                schedule = s.id,
                "catching up: only the latest missed tick ({}) runs; the ticks from {} on were missed",
                basic_utc(tick),
                basic_utc(first)
            );
        }
        match decision {
            Decision::Start => {
                tracing::info!(schedule = s.id, run_id, "tick {}: starting", basic_utc(tick));
                self.start(s, &run_id).await;
            }
            Decision::Queue => {
                tracing::info!(schedule = s.id, run_id, "tick {}: queued behind the previous run", basic_utc(tick));
            }
            Decision::Skip => tracing::info!(
                schedule = s.id,
                "tick {}: skipped, the previous run ({}) is still active{}",
                basic_utc(tick),
                s.last_run_id.as_deref().unwrap_or("starting"),
                if s.overlap == Overlap::Enqueue { " and the queue is full" } else { "" }
            ),
        }
        Step::Again
    }

    /// Applies `change` to the schedule when it is still exactly `read`; whether it was.
    async fn compare_and_set(
        &self,
        read: &ScheduleRecord,
        change: impl FnOnce(&mut ScheduleRecord) -> Result<(), &'static str> + Send + 'static,
    ) -> bool {
        let expected = read.clone();
        let change: ScheduleChange = Box::new(move |current: &mut Option<ScheduleRecord>| {
            let c = current.as_mut().ok_or("gone")?;
            if *c != expected {
                return Err("changed".to_string());
            }
            change(c).map_err(str::to_string)
        });
        match self.host.store().change_schedule_dyn(&read.id, change).await {
            Ok(result) => result.is_ok(),
            Err(e) => {
                tracing::warn!(schedule = read.id, "cannot change the schedule: {e}");
                false
            }
        }
    }

    /// Starts the run `run_id` of `s` (its entry in `starts` is this server's), then removes the entry: the
    /// run exists (started now, or before: `409`), or it cannot start (its spec or inputs refused: the reason
    /// is kept in [`ScheduleRecord::last_error`]). When the server is shutting down or the store is
    /// unreachable (`503`), the entry stays, to be taken over.
    async fn start(&self, s: &ScheduleRecord, run_id: &str) {
        let new = NewRun {
            spec: SpecSource::Named(s.spec_name.clone()),
            inputs: s.inputs.clone(),
            run_id: Some(run_id.to_string()),
            durability: Durability::Sync,
            new_turn: false,
            // A tick starts a trace of its own.
            traceparent: None,
            tenant: s.tenant.clone(),
        };
        let error = match self.host.start(new).await {
            Ok(_) => None,
            Err(e) if e.status == StatusCode::CONFLICT => {
                tracing::info!(schedule = s.id, run_id, "the run exists already (started before): {}", e.message);
                None
            }
            Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => {
                tracing::warn!(schedule = s.id, run_id, "the run cannot start now (tried again later): {}", e.message);
                return;
            }
            Err(e) => {
                tracing::warn!(schedule = s.id, run_id, "the run cannot start: {}", e.message);
                Some(format!("run `{run_id}` could not start: {}", e.message))
            }
        };
        let (owner, id) = (self.owner.clone(), run_id.to_string());
        let done: ScheduleChange = Box::new(move |current: &mut Option<ScheduleRecord>| {
            let c = current.as_mut().ok_or("gone")?;
            c.starts.retain(|e| !(e.run_id == id && e.owner.as_deref() == Some(owner.as_str())));
            c.last_error = error;
            Ok(())
        });
        if let Err(e) = self.host.store().change_schedule_dyn(&s.id, done).await {
            tracing::warn!(schedule = s.id, run_id, "cannot record the start (taken over later): {e}");
        }
    }

    /// Whether the start `e` was left behind: its owner took it more than a lease ago (on a store this server
    /// holds alone, any other owner's start: its process is gone).
    fn left_behind(&self, e: &TickStart, now: u64) -> bool {
        match &e.owner {
            None => false,
            Some(owner) => now >= e.since_ms.saturating_add(self.lease_ms) || (!self.shared && *owner != self.owner),
        }
    }

    /// Whether the previous run of `s` is still active: a start is under way, or the latest run started is
    /// `running` or `suspended` (when the store cannot say, it counts as active).
    async fn previous_active(&self, s: &ScheduleRecord) -> bool {
        if s.starts.iter().any(|e| e.owner.is_some()) {
            return true;
        }
        let Some(last) = &s.last_run_id else { return false };
        if self.host.is_executing(last) {
            return true;
        }
        match self.host.store().run_dyn(last).await {
            Ok(Some(run)) => matches!(run.status, RunStatus::Running | RunStatus::Suspended),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(schedule = s.id, "cannot read the previous run `{last}`: {e}");
                true
            }
        }
    }

    /// The parsed timing of `s`, reported once when its stored expression does not parse.
    fn timing(&mut self, s: &ScheduleRecord) -> Option<Timing> {
        let key = (s.cron.clone(), s.timezone.clone());
        self.timings
            .entry(key)
            .or_insert_with(|| match Timing::parse(&s.cron, &s.timezone) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::error!(schedule = s.id, "the schedule never ticks: {}", e.message);
                    None
                }
            })
            .clone()
    }
}

/// What a tick does.
#[derive(Clone, Copy)]
enum Decision {
    Start,
    Queue,
    Skip,
}

/// Completes when one of `runs` ends here (or when ends were missed: the receiver lagged); never when `runs`
/// is empty.
async fn one_ends(ended: &mut tokio::sync::broadcast::Receiver<String>, runs: &[String]) {
    use tokio::sync::broadcast::error::RecvError;
    if runs.is_empty() {
        return std::future::pending().await;
    }
    loop {
        match ended.recv().await {
            Ok(id) if runs.contains(&id) => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => return std::future::pending().await,
        }
    }
}
