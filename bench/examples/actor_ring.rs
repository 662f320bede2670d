//! The actor runtime's floor for one engine step ([`agentic_bench::floor`]): three ractor actors pass one
//! message around a ring, as a step passes supervisor → agent actor → scope actor → supervisor. Prints the
//! mean time of one lap (three `cast`s, three task wake-ups) in µs.
//!
//! `cargo run --release -p agentic-bench --example actor_ring -- [laps] [rounds]` (defaults 100 and 3 000:
//! `rounds` rings of `laps` laps each, one `block_on` per ring as the `seq` scenario runs one per chain;
//! `RING_SPAWNED=1` spawns each ring onto a worker, as a run is).

use std::time::Instant;

use agentic_bench::floor::ring;

/// The bench binary's allocator, so that a profile of this example is a profile of the bench's row.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let laps: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rounds: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3000);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = std::env::var("RT_WORKERS").ok().and_then(|n| n.parse().ok()) {
        builder.worker_threads(n);
    }
    let rt = builder.enable_all().build()?;
    let start = Instant::now();
    let spawned = std::env::var_os("RING_SPAWNED").is_some();
    for _ in 0..rounds {
        if spawned {
            rt.block_on(async { tokio::spawn(async move { ring(laps).await.map_err(|e| e.to_string()) }).await })??;
        } else {
            rt.block_on(ring(laps))?;
        }
    }
    let per_lap = start.elapsed().as_secs_f64() * 1e6 / (f64::from(rounds) * laps as f64);
    println!("{{\"laps\":{laps},\"rounds\":{rounds},\"per_lap_us\":{per_lap}}}");
    Ok(())
}
