//! Runs one N-step run against a `SledStore` with `sync` durability (append + flush per step, like the engine),
//! then closes the store and prints the time per step and the bytes left on disk. Made to be traced:
//!
//! ```text
//! cargo build --release -p agentic-store --example sync_steps
//! strace -f -c -e trace=fdatasync,fsync,sync_file_range target/release/examples/sync_steps /tmp/s 1000
//! ```
//!
//! With `--features postgres` and a `postgres://` URL instead of the directory, the same run against a
//! `PgStore` (one committed transaction per step); the run id then gets the process id, so that reruns on one
//! database do not collide.

use std::time::Instant;

use agentic_engine::{CheckpointStore, InvocationRecord, StepRecord};
use agentic_store::SledStore;
use serde_json::{Map, json};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: sync_steps DIR [STEPS]")?;
    let steps: u64 = args.next().map_or(Ok(1000), |n| n.parse())?;
    if agentic_store::is_postgres_url(&dir) {
        #[cfg(feature = "postgres")]
        {
            let store = agentic_store::PgStore::connect(&dir).await?;
            let run_id = format!("sync-steps-{}", std::process::id());
            let per_step = time_per_step(&store, &run_id, steps).await?;
            println!("{steps} synced steps on {}: {per_step:?} per step", store.url());
            return Ok(());
        }
        #[cfg(not(feature = "postgres"))]
        return Err("a PostgreSQL URL needs --features postgres".into());
    }
    let run_id = "0b9f3c2e-6a8d-4f1e-9c7a-2d5e8f1a3b4c";
    let store = SledStore::open(&dir)?;
    let per_step = time_per_step(&store, run_id, steps).await?;
    drop(store);
    let store = SledStore::open(&dir)?;
    println!("{steps} synced steps: {per_step:?} per step; {} bytes on disk after close", store.size_on_disk()?);
    Ok(())
}

/// Appends and flushes `steps` steps of run `run_id`; returns the time per step.
async fn time_per_step<S: CheckpointStore>(
    store: &S,
    run_id: &str,
    steps: u64,
) -> Result<std::time::Duration, Box<dyn std::error::Error>> {
    let started = Instant::now();
    for seq in 1..=steps {
        let record = StepRecord {
            run_id: run_id.into(),
            seq,
            agent_path: format!("root/{}", seq - 1),
            delta: vec![(format!("k{seq}"), json!(seq))],
            planner_states: vec![serde_json::from_value(json!({"path": "root", "state": {"next": seq}}))?],
            invocation: Some(InvocationRecord {
                agent: format!("a{seq}"),
                path: format!("root/{}", seq - 1),
                inputs: Map::new(),
                output: json!(seq),
                started_at_us: seq * 10,
                ended_at_us: seq * 10 + 5,
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
        };
        store.append(record).await?;
        store.flush().await?;
    }
    Ok(started.elapsed() / u32::try_from(steps.max(1))?)
}
