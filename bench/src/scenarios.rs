//! Our side of the LangGraph harness's scenarios (`../shared/bench/langgraph`), the same shapes, state writes
//! and durability, each run verified like the Python scripts verify theirs:
//!
//! - [`chain`]: `bench_seq.py`, a sequence of N no-op agents, agent i writing `k{i}` = i (variant distinct) or
//!   `v` = i (variant single), initial state `{"input": 1}`;
//! - [`fan_out`]: `bench_fanout.py`, `fan` → K parallel agents → `join` (shape static: agent i writes `k{i}` =
//!   i, the join writes `total` = Σi; shape send: one worker mapped over K items, the join writes `total` = K);
//! - [`resume_system`]: `bench_resume.py`, `n1` → `n2` (human) → `n3`, suspended in one process and resumed
//!   with the answer `"yes"` in a new one;
//! - [`concurrent_child`]: `bench_concurrent.py`, M concurrent 5-step runs sharing one in-memory store, in a
//!   process of its own so that its peak RSS is its own;
//! - [`fsync_probe`] and [`dir_bytes`]: the storage floor (`fsync_probe.py`) and the bytes on disk.

use std::future::IntoFuture;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use agentic::agents::Human;
use agentic::engine::{CheckpointStore, InvokeRequest};
use agentic::prelude::*;
use agentic::store::SledStore;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Context, Error, Result, ensure};
use crate::proc;

/// Which keys the chain's agents write (`bench_seq.py --variants`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Agent i writes `k{i}` = i; the final state has N+1 keys.
    Distinct,
    /// Every agent overwrites `v`; the final state has 2 keys.
    Single,
}

impl Keys {
    /// The harness's name of the variant.
    pub fn name(self) -> &'static str {
        match self {
            Keys::Distinct => "distinct",
            Keys::Single => "single",
        }
    }
}

/// Where a run is checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// No store: no journal records are built at all (LangGraph: no checkpointer).
    None,
    /// A [`MemoryStore`] (every step record kept; LangGraph: `InMemorySaver`).
    Memory,
    /// A [`SledStore`] on disk with this durability (LangGraph: `SqliteSaver`, `synchronous=FULL`).
    Sled(Durability),
}

impl Backend {
    /// Short name used in the table.
    pub fn name(self) -> &'static str {
        match self {
            Backend::None => "none",
            Backend::Memory => "memory",
            Backend::Sled(Durability::Sync) => "sled sync",
            Backend::Sled(Durability::Async) => "sled async",
            Backend::Sled(_) => "sled exit",
        }
    }

    /// The LangGraph checkpointer and durability this backend is compared with (`bench_seq.py` row keys).
    pub fn langgraph(self) -> (&'static str, &'static str) {
        match self {
            Backend::None => ("none", "-"),
            Backend::Memory => ("memory", "async (default)"),
            Backend::Sled(Durability::Sync) => ("sqlite", "sync"),
            Backend::Sled(Durability::Async) => ("sqlite", "async"),
            Backend::Sled(_) => ("sqlite", "exit"),
        }
    }
}

/// A no-op agent writing `i` to `key` (LangGraph's node returning `{key: i}`).
fn noop(i: usize, key: String) -> AgentRef {
    FnAgent::builder(format!("a{i}"), move |_ctx| Box::pin(async move { Ok(json!(i)) })).output_key(key).build()
}

/// The sequential chain of `n` no-op agents (scenario 1).
///
/// # Errors
/// When the engine refuses to build the sequence.
pub fn chain(n: usize, keys: Keys) -> Result<AgentRef> {
    let key = |i: usize| match keys {
        Keys::Distinct => format!("k{i}"),
        Keys::Single => "v".to_string(),
    };
    Sequence::builder().name("chain").sub_agents((0..n).map(|i| noop(i, key(i)))).build().ctx("building the chain")
}

/// Runs `system` (a [`chain`] of `n`) once with `backend` under memory id `id`; verifies the final state
/// (last write and key count, as `bench_seq.py` does) and returns the time of the awaited run only.
///
/// # Errors
/// When the run fails or its final state is not the expected one.
pub async fn run_chain(
    system: &AgentRef,
    n: usize,
    keys: Keys,
    backend: Backend,
    sled: Option<&SledStore>,
    id: &str,
) -> Result<Duration> {
    let req = system.invoke().input("input", 1);
    let req = match (backend, sled) {
        (Backend::None, _) => req,
        (Backend::Memory, _) => req.store(MemoryStore::new()).memory_id(id).durability(Durability::Sync),
        (Backend::Sled(d), Some(s)) => req.store(s.clone()).memory_id(id).durability(d),
        (Backend::Sled(_), None) => return Err(Error::msg("a sled backend needs an open store")),
    };
    finish_chain(req, n, keys, backend.name()).await
}

/// [`run_chain`] on any store (the `pg` scenario's [`agentic::store::PgStore`]) with `durability`.
///
/// # Errors
/// When the run fails or its final state is not the expected one.
pub async fn run_chain_on<S: CheckpointStore + Clone>(
    system: &AgentRef,
    n: usize,
    keys: Keys,
    store: &S,
    durability: Durability,
    id: &str,
) -> Result<Duration> {
    let req = system.invoke().input("input", 1).store(store.clone()).memory_id(id).durability(durability);
    finish_chain(req, n, keys, "store").await
}

/// Awaits `req` (a chain of `n`), times it and checks its final state.
async fn finish_chain(req: InvokeRequest, n: usize, keys: Keys, backend: &str) -> Result<Duration> {
    let t0 = Instant::now();
    let outcome = req.await.ctx(format!("chain of {n} ({}, {backend})", keys.name()))?;
    let elapsed = t0.elapsed();
    let state = outcome.state();
    let (last, count) = match keys {
        Keys::Distinct => (format!("k{}", n - 1), n + 1),
        Keys::Single => ("v".to_string(), 2),
    };
    ensure(state.get(&last) == Some(&json!(n - 1)), || format!("chain of {n}: `{last}` is not {}", n - 1))?;
    ensure(state.len() == count, || {
        format!("chain of {n}: {} keys in the final state, expected {count}", state.len())
    })?;
    Ok(elapsed)
}

/// The fan-out shape (`bench_fanout.py --shapes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// K distinct agents in a [`Parallel`] block, agent i writing `k{i}` = i; the join sums them.
    Static,
    /// One worker mapped over K items by a [`ParallelMapper`] (LangGraph's `Send`); the join counts them.
    Send,
}

impl Shape {
    /// The harness's name of the shape.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Static => "static",
            Shape::Send => "send",
        }
    }

    fn expected_total(self, k: usize) -> u64 {
        match self {
            Shape::Static => (k * k.saturating_sub(1) / 2) as u64,
            Shape::Send => k as u64,
        }
    }
}

/// `fan` → K parallel agents → `join` (scenario 2). `fan` writes nothing for the static shape and the K work
/// items (`items` = [0, K)) for the send shape; `join` reads all K results and writes `total`.
///
/// # Errors
/// When the engine refuses to build the system.
pub fn fan_out(k: usize, shape: Shape) -> Result<AgentRef> {
    let (fan, block, join) = match shape {
        Shape::Static => {
            let fan = FnAgent::builder("fan", |_ctx| Box::pin(async { Ok(Value::Null) })).build();
            let block = Parallel::builder()
                .name("workers")
                .sub_agents((0..k).map(|i| noop(i, format!("k{i}"))))
                .build()
                .ctx("building the parallel block")?;
            let join = FnAgent::builder("join", move |ctx| {
                Box::pin(async move {
                    let view = ctx.view();
                    let total: u64 = (0..k).filter_map(|i| view.get(&format!("k{i}")).and_then(Value::as_u64)).sum();
                    Ok(json!(total))
                })
            })
            .output_key("total")
            .build();
            (fan, block, join)
        }
        Shape::Send => {
            let fan =
                FnAgent::builder("fan", move |_ctx| Box::pin(async move { Ok(json!((0..k).collect::<Vec<_>>())) }))
                    .output_key("items")
                    .build();
            let worker = FnAgent::builder("worker", |ctx| {
                Box::pin(async move {
                    let i: u64 = ctx.input_as("i")?;
                    Ok(json!(i))
                })
            })
            .input("i")
            .build();
            let block = ParallelMapper::builder()
                .name("workers")
                .sub_agent(worker)
                .items_key("items")
                .item_key("i")
                .output_key("results")
                .build()
                .ctx("building the mapper")?;
            let join = FnAgent::builder("join", |ctx| {
                Box::pin(async move {
                    let n = ctx.view().get("results").and_then(Value::as_array).map_or(0, Vec::len);
                    Ok(json!(n))
                })
            })
            .output_key("total")
            .build();
            (fan, block, join)
        }
    };
    Sequence::builder().name("fanout").sub_agents([fan, block, join]).build().ctx("building the fan-out")
}

/// Runs a [`fan_out`] of `k` once and verifies `total` (Σi for static, K for send); returns the time of the
/// awaited run and the number of outputs the K agents produced (keys `k*`, or entries of `results`).
///
/// # Errors
/// When the run fails or the join's total is wrong.
pub async fn run_fan_out(
    system: &AgentRef,
    k: usize,
    shape: Shape,
    backend: Backend,
    sled: Option<&SledStore>,
    id: &str,
) -> Result<(Duration, usize)> {
    let req = system.invoke().input("input", 1);
    let req = match (backend, sled) {
        (Backend::None, _) => req,
        (Backend::Memory, _) => req.store(MemoryStore::new()).memory_id(id).durability(Durability::Async),
        (Backend::Sled(d), Some(s)) => req.store(s.clone()).memory_id(id).durability(d),
        (Backend::Sled(_), None) => return Err(Error::msg("a sled backend needs an open store")),
    };
    let t0 = Instant::now();
    let outcome = req.await.ctx(format!("fan-out of {k} ({}, {})", shape.name(), backend.name()))?;
    let elapsed = t0.elapsed();
    let state = outcome.state();
    let total = state.get("total").and_then(Value::as_u64);
    ensure(total == Some(shape.expected_total(k)), || {
        format!("fan-out of {k} ({}): total {total:?}, expected {}", shape.name(), shape.expected_total(k))
    })?;
    let outputs = match shape {
        Shape::Static => state.iter().filter(|(key, _)| key.starts_with('k')).count(),
        Shape::Send => state.get("results").and_then(Value::as_array).map_or(0, Vec::len),
    };
    Ok((elapsed, outputs))
}

/// The human-in-the-loop system of scenario 3: `n1` writes `a` = input + 1, `n2` asks a human (response id
/// `n2`, prompt `approve? a={{ a }}`) and writes the answer to `b`, `n3` writes `c` = `"{a}:{b}"`.
///
/// # Errors
/// When a template does not compile or the engine refuses the system.
pub fn resume_system() -> Result<AgentRef> {
    let n1 = FnAgent::builder("n1", |ctx| {
        Box::pin(async move {
            let input: i64 = ctx.input_as("input")?;
            Ok(json!(input + 1))
        })
    })
    .input("input")
    .output_key("a")
    .build();
    let n2 = Human::builder("n2", "approve? a={{ a }}").ctx("human prompt")?.response_id("n2").output_key("b").build();
    let n3 = Compute::template("n3", "{{ a }}:{{ b }}").ctx("n3 template")?.output_key("c").build();
    Sequence::builder().name("hitl").sub_agents([n1, n2, n3]).build().ctx("building the HITL system")
}

/// Process A of scenario 3: opens the store in `dir`, runs [`resume_system`] with input 41 (durability async,
/// LangGraph's default) until it suspends at `n2`. Returns the time of the run to the interrupt.
///
/// # Errors
/// When the store cannot be opened or the run does not suspend at `n2`.
pub async fn resume_start(dir: &Path, id: &str) -> Result<Duration> {
    let store = SledStore::open(dir).ctx(format!("opening the store in {}", dir.display()))?;
    let system = resume_system()?;
    let t0 = Instant::now();
    let outcome = system
        .invoke()
        .input("input", 41)
        .store(store.clone())
        .memory_id(id)
        .durability(Durability::Async)
        .await
        .ctx("process A: run to the interrupt")?;
    let elapsed = t0.elapsed();
    let pending: Vec<&str> = outcome.pending().iter().map(|p| p.id.as_str()).collect();
    ensure(pending == ["n2"], || format!("process A: expected to wait for n2, waits for {pending:?}"))?;
    store.flush().await.ctx("flushing the store")?;
    Ok(elapsed)
}

/// What process B of scenario 3 measured, in seconds (the names of `bench_resume.py`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ResumeTimes {
    /// Open the store and build the system.
    pub t_open: f64,
    /// Read the pending request (the run record: status suspended, waiting for `n2` with its prompt).
    pub t_state: f64,
    /// Resume with the answer `"yes"` and run to the final state.
    pub t_resume: f64,
}

/// Process B of scenario 3: opens the store in `dir`, reads the pending request (what a HITL UI shows), resumes
/// with the answer `"yes"` and checks `c == "42:yes"` and that nothing is pending.
///
/// # Errors
/// When the store cannot be opened, the run is not waiting for `n2`, or the final state is wrong.
pub async fn resume_finish(dir: &Path, id: &str) -> Result<ResumeTimes> {
    let t0 = Instant::now();
    let store = SledStore::open(dir).ctx(format!("opening the store in {}", dir.display()))?;
    let system = resume_system()?;
    let t1 = Instant::now();
    let record = CheckpointStore::run(&store, id).await.ctx("reading the run")?.ctx(format!("no run `{id}`"))?;
    let t2 = Instant::now();
    let waiting: Vec<&str> = record.pending.iter().map(|p| p.id.as_str()).collect();
    ensure(waiting == ["n2"], || format!("process B: expected a run waiting for n2, found {waiting:?}"))?;
    ensure(record.pending[0].prompt == "approve? a=42", || {
        format!("process B: prompt {:?}", record.pending[0].prompt)
    })?;
    let outcome = system
        .resume(id)
        .store(store.clone())
        .durability(Durability::Async)
        .answer("n2", "yes")
        .await
        .ctx("process B: resume")?;
    let t3 = Instant::now();
    ensure(outcome.state().get("c") == Some(&json!("42:yes")), || {
        format!("process B: c = {:?}", outcome.state().get("c"))
    })?;
    ensure(!outcome.is_suspended(), || "process B: still suspended after the answer".to_string())?;
    Ok(ResumeTimes {
        t_open: (t1 - t0).as_secs_f64(),
        t_state: (t2 - t1).as_secs_f64(),
        t_resume: (t3 - t2).as_secs_f64(),
    })
}

/// How the M runs of scenario 4 are started (`bench_concurrent.py --modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrentMode {
    /// All M runs at once (`asyncio.gather`; here one Tokio task per run), one shared [`MemoryStore`].
    Gather,
    /// The same runs awaited one after another.
    Sequential,
    /// All at once, no store.
    NoCheckpoint,
}

impl ConcurrentMode {
    /// The harness's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            ConcurrentMode::Gather => "gather",
            ConcurrentMode::Sequential => "sequential",
            ConcurrentMode::NoCheckpoint => "nockpt",
        }
    }

    /// Parses a harness mode name.
    ///
    /// # Errors
    /// On an unknown name.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "gather" => Ok(ConcurrentMode::Gather),
            "sequential" => Ok(ConcurrentMode::Sequential),
            "nockpt" => Ok(ConcurrentMode::NoCheckpoint),
            other => Err(Error(format!("unknown mode `{other}` (gather, sequential or nockpt)"))),
        }
    }
}

/// What one scenario-4 process measured (the fields of `bench_concurrent.py`'s child).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConcurrentResult {
    /// Runs.
    pub m: usize,
    /// Wall time of the M runs, seconds.
    pub wall_s: f64,
    /// CPU time of the process during the M runs, seconds (10 ms resolution).
    pub cpu_s: f64,
    /// RSS after the warm-up runs, KiB.
    pub rss_base_kib: u64,
    /// RSS after the M runs, KiB.
    pub rss_after_kib: u64,
    /// Peak RSS of the process (`VmHWM`), KiB.
    pub rss_peak_kib: u64,
    /// Journal records kept for run 0 (LangGraph counts 7 checkpoints per run); `None` without a store.
    pub records_per_run: Option<usize>,
    /// Runs completed and verified.
    pub completed: usize,
}

/// The 5-step chain of scenario 4 (agent i writes `k{i}` = i), one shared [`MemoryStore`], M runs with ids
/// `run-{j}` and inputs `{"input": j}`, after 10 warm-up runs. Every result is checked (`input` = j, `k4` = 4).
/// Meant to run in a process of its own (`agentic-bench child concurrent M MODE`) so the peak RSS is its own.
///
/// # Errors
/// When a run fails or a result is wrong.
pub async fn concurrent_child(m: usize, mode: ConcurrentMode) -> Result<ConcurrentResult> {
    let system = chain(5, Keys::Distinct)?;
    let store = MemoryStore::new();
    let request = |j: usize, prefix: &str| {
        let req = system.invoke().input("input", j);
        match mode {
            ConcurrentMode::NoCheckpoint => req,
            _ => req.store(store.clone()).memory_id(format!("{prefix}-{j}")).durability(Durability::Async),
        }
    };
    for w in 0..10 {
        request(w, "warm").await.ctx("warm-up run")?;
    }
    let base = proc::rss_kib().unwrap_or(0);
    let c0 = proc::cpu_time().unwrap_or_default();
    let t0 = Instant::now();
    // Like `asyncio.gather` over `ainvoke`, keep each run's final state (not its outcome, which holds the
    // run's scope with its history).
    let outcomes = match mode {
        ConcurrentMode::Sequential => {
            let mut outs = Vec::with_capacity(m);
            for j in 0..m {
                outs.push(request(j, "run").await.ctx(format!("run {j}"))?.state().to_map());
            }
            outs
        }
        _ => {
            let handles: Vec<_> = (0..m)
                .map(|j| {
                    let run = request(j, "run").into_future();
                    tokio::spawn(async move { run.await.map(|o| o.state().to_map()) })
                })
                .collect();
            let mut outs = Vec::with_capacity(m);
            for (j, h) in handles.into_iter().enumerate() {
                outs.push(h.await.ctx(format!("run {j} panicked"))?.ctx(format!("run {j}"))?);
            }
            outs
        }
    };
    let wall = t0.elapsed();
    let cpu = proc::cpu_time().unwrap_or_default().saturating_sub(c0);
    for (j, s) in outcomes.iter().enumerate() {
        ensure(s.get("input") == Some(&json!(j)) && s.get("k4") == Some(&json!(4)), || {
            format!("run {j}: wrong state")
        })?;
    }
    let records_per_run = match mode {
        ConcurrentMode::NoCheckpoint => None,
        _ => Some(store.run("run-0").ctx("run-0 is not in the store")?.records.len()),
    };
    Ok(ConcurrentResult {
        m,
        wall_s: wall.as_secs_f64(),
        cpu_s: cpu.as_secs_f64(),
        rss_base_kib: base,
        rss_after_kib: proc::rss_kib().unwrap_or(0),
        rss_peak_kib: proc::peak_rss_kib().unwrap_or(0),
        records_per_run,
        completed: outcomes.len(),
    })
}

/// Apparent bytes and allocated bytes (what `du` counts) of the files under `dir`.
///
/// # Errors
/// When the directory cannot be read.
pub fn dir_bytes(dir: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir).ctx(format!("reading {}", dir.display()))? {
        let entry = entry.ctx("reading a directory entry")?;
        let meta = entry.metadata().ctx("file metadata")?;
        if meta.is_dir() {
            let (a, b) = dir_bytes(&entry.path())?;
            total = (total.0 + a, total.1 + b);
        } else {
            total = (total.0 + meta.len(), total.1 + meta.blocks() * 512);
        }
    }
    Ok(total)
}

/// Bytes on disk (apparent, allocated) of a sled store directory after exactly one `steps`-step `sync` run
/// (distinct keys), the store closed.
///
/// # Errors
/// When the store or the run fails.
pub async fn store_bytes_after_one_run(work: &Path, steps: usize) -> Result<(u64, u64)> {
    let dir = tempfile::tempdir_in(work).ctx("temporary directory")?;
    let store_dir = dir.path().join("store");
    let system = chain(steps, Keys::Distinct)?;
    {
        let store = SledStore::open(&store_dir).ctx("opening the store")?;
        run_chain(&system, steps, Keys::Distinct, Backend::Sled(Durability::Sync), Some(&store), "bytes").await?;
        store.flush().await.ctx("flush")?;
    }
    dir_bytes(&store_dir)
}

/// The raw storage floor of the disk under `dir`: medians of `samples` appends of `size` bytes each followed
/// by `fdatasync` (`data_only`) or `fsync`, in a new file (`fsync_probe.py` does 300 × 4 KiB + `fsync`).
///
/// # Errors
/// When the probe file cannot be written.
pub fn fsync_probe(dir: &Path, size: usize, samples: usize, data_only: bool) -> Result<Duration> {
    let path = dir.join(format!("fsync-probe-{size}.bin"));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .ctx(format!("creating {}", path.display()))?;
    let buf = vec![b'x'; size];
    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        let t0 = Instant::now();
        f.write_all(&buf).ctx("probe write")?;
        if data_only { f.sync_data() } else { f.sync_all() }.ctx("probe sync")?;
        lat.push(t0.elapsed());
    }
    drop(f);
    std::fs::remove_file(&path).ctx("removing the probe file")?;
    Ok(median(&mut lat))
}

/// The floor of a write that changes no file metadata (what a store writing into preallocated segments pays):
/// the median of `samples` overwrites of `size` bytes at successive offsets of a file written and synced
/// beforehand, each followed by `fdatasync`.
///
/// # Errors
/// When the probe file cannot be written.
pub fn fdatasync_overwrite_probe(dir: &Path, size: usize, samples: usize) -> Result<Duration> {
    use std::os::unix::fs::FileExt;
    let path = dir.join(format!("fdatasync-overwrite-{size}.bin"));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .ctx(format!("creating {}", path.display()))?;
    let samples = samples.max(1);
    f.write_all(&vec![0u8; size * samples]).ctx("preallocating the probe file")?;
    f.sync_all().ctx("probe sync")?;
    let buf = vec![b'x'; size];
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples {
        let t0 = Instant::now();
        f.write_all_at(&buf, (i * size) as u64).ctx("probe write")?;
        f.sync_data().ctx("probe sync")?;
        lat.push(t0.elapsed());
    }
    drop(f);
    std::fs::remove_file(&path).ctx("removing the probe file")?;
    Ok(median(&mut lat))
}

/// The median of `xs` (sorted in place); zero for an empty slice.
pub fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    if xs.is_empty() { Duration::ZERO } else { xs[xs.len() / 2] }
}
