//! The actor runtime's floor for one engine step: three ractor actors pass one message around a ring, as a
//! step passes supervisor → agent actor → scope actor → supervisor. Prints the mean time of one lap (three
//! `cast`s, three task wake-ups) in µs.
//!
//! `cargo run --release -p agentic-bench --example actor_ring -- [laps] [rounds]` (defaults 100 and 3 000:
//! `rounds` rings of `laps` laps each, one `block_on` per ring as the `seq` scenario runs one per chain).

use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

/// One actor of the ring: forwards each token to the next actor, or ends the ring when no hops are left.
struct Hop;

/// The messages of a [`Hop`].
enum HopMsg {
    /// Where to forward tokens.
    Next(ActorRef<HopMsg>),
    /// Hops left, and where to report the end.
    Token { hops_left: u64, done: Option<oneshot::Sender<()>> },
}

impl Actor for Hop {
    type Msg = HopMsg;
    type State = Option<ActorRef<HopMsg>>;
    type Arguments = ();

    async fn pre_start(&self, _me: ActorRef<HopMsg>, _: ()) -> Result<Self::State, ActorProcessingErr> {
        Ok(None)
    }

    async fn handle(
        &self,
        _me: ActorRef<HopMsg>,
        msg: HopMsg,
        next: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            HopMsg::Next(n) => *next = Some(n),
            HopMsg::Token { hops_left: 0, done } => {
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            HopMsg::Token { hops_left, done } => {
                if let Some(next) = next {
                    next.cast(HopMsg::Token { hops_left: hops_left - 1, done })?;
                }
            }
        }
        Ok(())
    }
}

/// Starts a ring of three, passes a token `laps` times around it, stops it.
async fn ring(laps: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut actors = Vec::new();
    for _ in 0..3 {
        actors.push(Actor::spawn(None, Hop, ()).await?);
    }
    for i in 0..3 {
        actors[i].0.cast(HopMsg::Next(actors[(i + 1) % 3].0.clone()))?;
    }
    let (done, ended) = oneshot::channel();
    actors[0].0.cast(HopMsg::Token { hops_left: 3 * laps, done: Some(done) })?;
    ended.await?;
    for (actor, handle) in actors {
        actor.stop(None);
        handle.await?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let laps: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let rounds: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
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
