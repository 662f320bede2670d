//! Durable-run cost per step: the LangGraph harness's scenario 1 (`bench_seq.py`, variant `distinct`) in
//! Rust. A sequence of N = 100 and N = 1000 no-op agents, agent i writing key `k{i}` = i, initial state
//! `{"input": 1}`, run
//!
//! - `none`: no store (no journal records are built at all);
//! - `memory`: a fresh `MemoryStore` per run (every step record kept, `sync` durability);
//! - `sled_sync` / `sled_async` / `sled_exit`: a `SledStore` in a temporary directory on the same disk as
//!   `/tmp` (opened once per benchmark; every iteration is a new memory id), with that durability.
//!   `sync` = append + fsync before the next step (LangGraph `durability="sync"`), `async` = the fsync of
//!   step i overlaps step i+1, all flushed before the run returns, `exit` = one write + fsync at the end.
//!
//! Only the awaited `invoke` is timed (building the system and opening stores are not), as in
//! `bench_seq.py`. Every run is verified: `k{N-1}` = N-1 and N+1 keys in the final state.
//!
//! Run: `cargo bench --bench durable`. Criterion reports the time of one whole run; per step = time / N
//! (the `thrpt` line is steps per second). Once, before the benchmarks, it prints to stderr the raw
//! write + `fdatasync` floor of this disk (100-byte appends, median of 200) and the bytes on disk of a sled
//! store directory after exactly one 1000-step `sync` run. `docs/performance.md` has the latest figures and
//! the side-by-side comparison with LangGraph (`scripts/bench_side_by_side.sh`).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentic::engine::CheckpointStore;
use agentic::prelude::*;
use agentic::store::SledStore;
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// A no-op agent writing `i` to `k{i}` (LangGraph's node returning `{f"k{i}": i}`).
fn noop(i: usize) -> AgentRef {
    FnAgent::builder(format!("a{i}"), move |_ctx| Box::pin(async move { Ok(json!(i)) }))
        .output_key(format!("k{i}"))
        .build()
}

fn chain(n: usize) -> AgentRef {
    Sequence::builder().name("chain").sub_agents((0..n).map(noop)).build().expect("build")
}

/// Where a run is checkpointed.
#[derive(Clone, Copy)]
enum Backend {
    None,
    Memory,
    Sled(Durability),
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::None => "none",
            Backend::Memory => "memory",
            Backend::Sled(Durability::Sync) => "sled_sync",
            Backend::Sled(Durability::Async) => "sled_async",
            Backend::Sled(_) => "sled_exit",
        }
    }
}

static RUN_IDS: AtomicU64 = AtomicU64::new(0);

/// One verified run of `system` (N = `n` steps); returns the time of the awaited `invoke` only.
async fn run_once(system: &AgentRef, n: usize, backend: Backend, sled: Option<&SledStore>) -> Duration {
    let id = format!("{}-{n}-{}", backend.name(), RUN_IDS.fetch_add(1, Ordering::Relaxed));
    let req = system.invoke().input("input", 1);
    let req = match (backend, sled) {
        (Backend::None, _) => req,
        (Backend::Memory, _) => req.store(MemoryStore::new()).memory_id(id),
        (Backend::Sled(d), Some(s)) => req.store(s.clone()).memory_id(id).durability(d),
        (Backend::Sled(_), None) => unreachable!("sled backend without a store"),
    };
    let t0 = Instant::now();
    let outcome = req.await.expect("run");
    let elapsed = t0.elapsed();
    let state = outcome.state();
    assert_eq!(state.get(&format!("k{}", n - 1)), Some(&json!(n - 1)), "last write");
    assert_eq!(state.len(), n + 1, "key count");
    elapsed
}

/// Apparent bytes and allocated bytes (what `du` counts) of the files under `dir`.
fn dir_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let meta = entry.metadata().expect("metadata");
        if meta.is_dir() {
            let (a, b) = dir_bytes(&entry.path());
            total = (total.0 + a, total.1 + b);
        } else {
            total = (total.0 + meta.len(), total.1 + meta.blocks() * 512);
        }
    }
    total
}

/// Raw storage floor: append 100 bytes + `fdatasync`, 200 times, in a file under `dir`; (median, p90).
fn fsync_floor(dir: &Path) -> (Duration, Duration) {
    let path = dir.join("fsync-probe.bin");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("probe file");
    let mut lat: Vec<Duration> = (0..200)
        .map(|_| {
            let t0 = Instant::now();
            f.write_all(&[b'x'; 100]).expect("write");
            f.sync_data().expect("sync_data");
            t0.elapsed()
        })
        .collect();
    drop(f);
    std::fs::remove_file(&path).expect("remove probe file");
    lat.sort();
    (lat[lat.len() / 2], lat[lat.len() * 9 / 10])
}

/// Prints the fsync floor of the disk under `/tmp` (`when`: before or after the benchmarks; it drifts).
fn report_floor(when: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (median, p90) = fsync_floor(dir.path());
    eprintln!(
        "durable: fsync floor {when} (append 100 B + fdatasync, 200 samples): median {:.1} us, p90 {:.1} us",
        median.as_secs_f64() * 1e6,
        p90.as_secs_f64() * 1e6
    );
}

/// The one-off figures: the fsync floor, and the size of a store after exactly one 1000-step sync run.
fn report_disk(rt: &tokio::runtime::Runtime) {
    report_floor("before");
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("store");
    let system = chain(1000);
    let sled_bytes = rt.block_on(async {
        let store = SledStore::open(&store_dir).expect("open store");
        run_once(&system, 1000, Backend::Sled(Durability::Sync), Some(&store)).await;
        store.flush().await.expect("flush");
        store.size_on_disk().expect("size_on_disk")
    });
    // The store is dropped (sled flushes and closes it); the directory is final now.
    let (apparent, allocated) = dir_bytes(&store_dir);
    eprintln!(
        "durable: sled store after one 1000-step sync run: {apparent} bytes apparent ({:.2} MiB), \
         {allocated} bytes allocated (du), sled size_on_disk {sled_bytes}",
        apparent as f64 / (1024.0 * 1024.0)
    );
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    report_disk(&rt);
    let backends = [
        Backend::None,
        Backend::Memory,
        Backend::Sled(Durability::Sync),
        Backend::Sled(Durability::Async),
        Backend::Sled(Durability::Exit),
    ];
    for n in [100usize, 1000] {
        let system = chain(n);
        let mut g = c.benchmark_group(format!("durable_seq_{n}"));
        g.sampling_mode(SamplingMode::Flat).sample_size(10).warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(if n >= 1000 { 4 } else { 2 }));
        g.throughput(Throughput::Elements(n as u64));
        for backend in backends {
            // One store directory per benchmark (its creation is not measured); a new memory id per run.
            let dir = tempfile::tempdir().expect("tempdir");
            let sled = matches!(backend, Backend::Sled(_))
                .then(|| SledStore::open(dir.path().join("store")).expect("open store"));
            g.bench_function(BenchmarkId::new(backend.name(), n), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += run_once(&system, n, backend, sled.as_ref()).await;
                        }
                        total
                    })
                });
            });
        }
        g.finish();
    }
    report_floor("after");
}

criterion_group!(benches, bench);
criterion_main!(benches);
