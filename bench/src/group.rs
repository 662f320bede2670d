//! The `group` scenario: group commit under load. M concurrent runs of an N-step chain (agent i writes `k{i}`
//! = i), all started at once on one store under `sync` durability, so that every step is durable before the
//! next one starts; the steps of different runs that are ready together should share a commit.
//!
//! - **sled**: one [`SledStore`]; commits = the `fdatasync`s of its write-ahead log
//!   ([`SledStore::log_syncs`]).
//! - **PostgreSQL**: one [`agentic::store::PgStore`] (its pool of 8 connections); commits = the write
//!   transactions the server saw (the transaction-id counter's advance, `txid_current()` before and after,
//!   minus the probe's own) and the WAL flushes (`pg_stat_wal.wal_sync`, read after the statistics settle).
//!   LangGraph's `AsyncPostgresSaver` runs the same shape with the same M in flight (`bench_pg.py group`, a
//!   pool of 20 connections) and is counted the same way.
//!
//! Per run the agents note when they start: a step's latency is the time from one agent's start to the
//! next one's in the same run (the step's work, its commit, and the wait for the engine to start the next).
//! Every run's final state is checked.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic::engine::CheckpointStore;
use agentic::prelude::*;
use serde_json::json;

use crate::error::{Context, Result, ensure};
use crate::serve::quantile;

/// What one measurement saw.
#[derive(Debug, Clone)]
pub struct GroupResult {
    /// Runs completed (and checked).
    pub runs: usize,
    /// Steps per run.
    pub steps: usize,
    /// From the first run's start to the last one's end.
    pub wall: Duration,
    /// Step latencies: median and 99th percentile over every run's steps after its first.
    pub step_p50: Duration,
    /// See [`GroupResult::step_p50`].
    pub step_p99: Duration,
}

impl GroupResult {
    /// Runs per second.
    pub fn runs_per_s(&self) -> f64 {
        self.runs as f64 / self.wall.as_secs_f64()
    }

    /// All steps of all runs.
    pub fn total_steps(&self) -> usize {
        self.runs * self.steps
    }
}

/// When each run's agents started: `marks[run][step]`.
type Marks = Arc<Vec<Mutex<Vec<Instant>>>>;

/// The chain of `n` agents whose agent i writes `k{i}` = i and notes its start in `marks[input]`.
fn marked_chain(n: usize, marks: &Marks) -> Result<AgentRef> {
    let agents = (0..n).map(|i| {
        let marks = marks.clone();
        FnAgent::builder(format!("a{i}"), move |ctx| {
            let marks = marks.clone();
            Box::pin(async move {
                let run = ctx.inputs().get("input").and_then(serde_json::Value::as_u64).unwrap_or(u64::MAX);
                if let Some(slot) = usize::try_from(run).ok().and_then(|r| marks.get(r)) {
                    slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Instant::now());
                }
                Ok(json!(i))
            })
        })
        .input("input")
        .output_key(format!("k{i}"))
        .build()
    });
    Sequence::builder().name("chain").sub_agents(agents).build().ctx("building the chain")
}

/// Runs `m` runs of an `n`-step chain at once on `store` under `sync` durability (ids `{tag}-{j}`, input j);
/// checks every final state. Run [`warm_up`] first on a fresh store.
///
/// # Errors
/// When a run fails or ends with a wrong state.
pub async fn run<S: CheckpointStore + Clone>(store: &S, m: usize, n: usize, tag: &str) -> Result<GroupResult> {
    ensure(n >= 2, || "the group scenario needs at least 2 steps per run".to_string())?;
    let marks: Marks = Arc::new((0..m).map(|_| Mutex::new(Vec::with_capacity(n))).collect());
    let system = marked_chain(n, &marks)?;
    let request = |j: usize, id: String| {
        system.invoke().input("input", j).store(store.clone()).memory_id(id).durability(Durability::Sync)
    };
    let t0 = Instant::now();
    let handles: Vec<_> = (0..m)
        .map(|j| {
            let run = std::future::IntoFuture::into_future(request(j, format!("{tag}-{j}")));
            tokio::spawn(async move { run.await.map(|o| o.state().to_map()) })
        })
        .collect();
    let mut states = Vec::with_capacity(m);
    for (j, h) in handles.into_iter().enumerate() {
        states.push(h.await.ctx(format!("run {j} panicked"))?.ctx(format!("run {j}"))?);
    }
    let wall = t0.elapsed();
    let last = format!("k{}", n - 1);
    for (j, s) in states.iter().enumerate() {
        ensure(s.get("input") == Some(&json!(j)) && s.get(&last) == Some(&json!(n - 1)) && s.len() == n + 1, || {
            format!("group run {j}: wrong final state")
        })?;
    }
    let mut steps = Vec::with_capacity(m * n);
    for (j, slot) in marks.iter().enumerate() {
        let times = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ensure(times.len() == n, || format!("group run {j}: {} agents started, expected {n}", times.len()))?;
        steps.extend(times.windows(2).map(|w| w[1].saturating_duration_since(w[0])));
    }
    steps.sort();
    Ok(GroupResult { runs: m, steps: n, wall, step_p50: quantile(&steps, 0.5), step_p99: quantile(&steps, 0.99) })
}

/// Three runs of an `n`-step chain one after the other on `store` (ids `{tag}-warm-{i}`): the store's first
/// statements prepared, its files grown.
///
/// # Errors
/// When a run fails.
pub async fn warm_up<S: CheckpointStore + Clone>(store: &S, n: usize, tag: &str) -> Result<()> {
    for w in 0..3 {
        run(store, 1, n, &format!("{tag}-warm-{w}")).await?;
    }
    Ok(())
}

/// PostgreSQL's counters around a measurement: the next transaction id and the WAL flushes so far.
#[derive(Debug, Clone, Copy)]
pub struct PgCounters {
    /// `txid_current()` (the probe itself takes one).
    pub xid: i64,
    /// `pg_stat_wal.wal_sync`.
    pub wal_syncs: i64,
}

impl PgCounters {
    /// Reads them on `url` (waiting 1.1 s first, so that the backends' statistics of what just ran are
    /// reported: PostgreSQL flushes them at most once a second).
    ///
    /// # Errors
    /// When the server refuses.
    pub async fn read(url: &str) -> Result<PgCounters> {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (client, conn) =
            tokio_postgres::connect(url, tokio_postgres::NoTls).await.ctx("connecting to PostgreSQL")?;
        let conn = tokio::spawn(conn);
        let row = client
            .query_one("SELECT txid_current()::bigint, (SELECT wal_sync FROM pg_stat_wal)::bigint", &[])
            .await
            .ctx("reading txid_current() and pg_stat_wal")?;
        let counters = PgCounters { xid: row.get(0), wal_syncs: row.get(1) };
        drop(client);
        let _ = conn.await;
        Ok(counters)
    }

    /// (write transactions, WAL flushes) from `self` to `after`, the probes' own transactions left out.
    pub fn since(self, after: PgCounters) -> (i64, i64) {
        (after.xid - self.xid - 1, after.wal_syncs - self.wal_syncs)
    }
}
