//! The `seq` scenario's in-memory row alone, for a profiler: a chain of `n` no-op agents run `rounds` times on
//! a fresh [`agentic::prelude::MemoryStore`] with `Durability::Sync`, one `block_on` per run as the scenario
//! does. Prints the mean time of one step in µs.
//!
//! `cargo run --release -p agentic-bench --example chain_memory -- [n] [rounds]` (defaults 100 and 3 000);
//! `CHAIN_BACKEND=none` runs without a store.

use std::time::Instant;

use agentic_bench::scenarios::{Backend, Keys, chain, run_chain};

/// The bench binary's allocator, so that a profile of this example is a profile of the bench's row.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rounds: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3000);
    let backend = match std::env::var("CHAIN_BACKEND").as_deref() {
        Ok("none") => Backend::None,
        _ => Backend::Memory,
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = std::env::var("RT_WORKERS").ok().and_then(|n| n.parse().ok()) {
        builder.worker_threads(n);
    }
    let rt = builder.enable_all().build()?;
    let system = chain(n, Keys::Distinct)?;
    let start = Instant::now();
    for i in 0..rounds {
        rt.block_on(run_chain(&system, n, Keys::Distinct, backend, None, &format!("r{i}")))?;
    }
    let per_step = start.elapsed().as_secs_f64() * 1e6 / (f64::from(rounds) * n as f64);
    println!("{{\"n\":{n},\"rounds\":{rounds},\"backend\":\"{}\",\"per_step_us\":{per_step}}}", backend.name());
    Ok(())
}
