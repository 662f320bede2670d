//! Checkpoint store costs per step: the sled store with a flush (fsync) per step (`sync` durability), the
//! sled store appending with one flush at the end (`exit`), the memory store, and `load` of a 1000-step run
//! with and without snapshots; against this disk's raw `write` + `fdatasync` of a 100-byte record. Prints
//! the bytes on disk of a 1000-step run.
//!
//! Run: `cargo bench --bench store_sled`. Every step record is a one-key delta with the parent's planner
//! state and the invocation (about 120 bytes encoded).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentic_engine::{CheckpointStore, InvocationRecord, StepRecord};
use agentic_store::{MemoryStore, SledStore};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Map, json};

const RUN: &str = "0b9f3c2e-6a8d-4f1e-9c7a-2d5e8f1a3b4c";

fn step(seq: u64) -> StepRecord {
    let path = format!("root/{}", seq % 8);
    StepRecord {
        run_id: RUN.into(),
        seq,
        agent_path: path.clone(),
        delta: vec![(format!("k{}", seq % 8), json!(seq))],
        planner_states: vec![
            serde_json::from_value(json!({"path": "root", "state": {"next": seq % 8}})).expect("planner state"),
        ],
        invocation: Some(InvocationRecord {
            agent: format!("n{}", seq % 8),
            path,
            inputs: Map::new(),
            output: json!(seq),
            started_at_us: 1_700_000_000_000_000 + seq * 10,
            ended_at_us: 1_700_000_000_000_004 + seq * 10,
            attempt: 1,
            tokens: None,
            usage: None,
            error: None,
            item: None,
        }),
        async_started: false,
        failed: false,
        item: None,
        item_end: false,
        bindings: None,
        calls: Vec::new(),
    }
}

/// A sled store in a fresh temporary directory holding a `steps`-step run, flushed.
fn filled(rt: &tokio::runtime::Runtime, steps: u64, snapshot_interval: u64) -> (tempfile::TempDir, SledStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path()).expect("open").with_snapshot_interval(snapshot_interval);
    rt.block_on(async {
        for seq in 1..=steps {
            store.append(step(seq)).await.expect("append");
        }
        store.flush().await.expect("flush");
    });
    (dir, store)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");

    // Bytes on disk of a 1000-step run, flushed after every step (sync) and once (exit).
    for (mode, flush_each) in [("sync", true), ("exit", false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path()).expect("open");
        rt.block_on(async {
            for seq in 1..=1000 {
                store.append(step(seq)).await.expect("append");
                if flush_each {
                    store.flush().await.expect("flush");
                }
            }
            store.flush().await.expect("flush");
        });
        let bytes = store.size_on_disk().expect("size");
        eprintln!("store_sled: 1000-step run ({mode}): {bytes} bytes on disk ({} bytes per step)", bytes / 1000);
    }

    let mut g = c.benchmark_group("store_step");
    g.sample_size(20).measurement_time(Duration::from_secs(5));

    g.bench_function("raw_write_fdatasync_100B", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = std::fs::File::create(dir.path().join("raw")).expect("file");
        let record = [b'x'; 100];
        b.iter(|| {
            file.write_all(&record).expect("write");
            file.sync_data().expect("sync");
        });
    });

    g.bench_function("memory_append", |b| {
        let store = MemoryStore::new();
        let seq = AtomicU64::new(0);
        b.to_async(&rt).iter(|| async {
            store.append(step(seq.fetch_add(1, Ordering::Relaxed) + 1)).await.expect("append");
        });
    });

    g.bench_function("sled_append_flush_sync", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path()).expect("open");
        let seq = AtomicU64::new(0);
        b.to_async(&rt).iter(|| async {
            store.append(step(seq.fetch_add(1, Ordering::Relaxed) + 1)).await.expect("append");
            store.flush().await.expect("flush");
        });
    });

    g.bench_function("sled_append_flush_at_end_exit", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SledStore::open(dir.path()).expect("open");
        let seq = AtomicU64::new(0);
        b.to_async(&rt).iter_custom(|iters| {
            let (store, seq) = (&store, &seq);
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    store.append(step(seq.fetch_add(1, Ordering::Relaxed) + 1)).await.expect("append");
                }
                store.flush().await.expect("flush");
                start.elapsed()
            }
        });
    });
    g.finish();

    let mut g = c.benchmark_group("store_load_1000_steps");
    g.sample_size(20);
    for (name, interval) in [("snapshot_every_256", 256), ("no_snapshot", 0)] {
        let (_dir, store) = filled(&rt, 1000, interval);
        g.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async { store.load(RUN).await.expect("load") });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
