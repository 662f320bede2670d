//! The `seq` scenario's in-memory row alone, for a profiler: a chain of `n` no-op agents run `rounds` times on
//! a fresh [`agentic::prelude::MemoryStore`] with `Durability::Sync`, one `block_on` per run as the scenario
//! does. Prints the mean time of one step in µs.
//!
//! `cargo run --release -p agentic-bench --example chain_memory -- [n] [rounds]` (defaults 100 and 3 000);
//! `CHAIN_BACKEND=none` runs without a store.

use std::time::Instant;

use agentic_bench::scenarios::{Backend, Keys, chain, run_chain};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rounds: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3000);
    let backend = match std::env::var("CHAIN_BACKEND").as_deref() {
        Ok("none") => Backend::None,
        _ => Backend::Memory,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let system = chain(n, Keys::Distinct)?;
    let start = Instant::now();
    for i in 0..rounds {
        rt.block_on(run_chain(&system, n, Keys::Distinct, backend, None, &format!("r{i}")))?;
    }
    let per_step = start.elapsed().as_secs_f64() * 1e6 / (f64::from(rounds) * n as f64);
    println!("{{\"n\":{n},\"rounds\":{rounds},\"backend\":\"{}\",\"per_step_us\":{per_step}}}", backend.name());
    Ok(())
}
