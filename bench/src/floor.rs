//! The actor runtime's floor for one engine step: three ractor actors pass one message around a ring, as a
//! step passes supervisor → agent actor → scope actor → supervisor, with nothing else done. The `seq`
//! scenario prints its in-memory step beside it (ours ÷ floor); `--example actor_ring` runs it alone.

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use crate::error::{Context, Result};
use crate::scenarios::median;

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

    async fn pre_start(&self, _me: ActorRef<HopMsg>, _: ()) -> std::result::Result<Self::State, ActorProcessingErr> {
        Ok(None)
    }

    async fn handle(
        &self,
        _me: ActorRef<HopMsg>,
        msg: HopMsg,
        next: &mut Self::State,
    ) -> std::result::Result<(), ActorProcessingErr> {
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

/// Starts a ring of three actors, passes a token `laps` times around it (3 × `laps` casts), stops it: what a
/// run of `laps` steps costs the actor runtime, its three actors' start and stop included.
///
/// # Errors
/// When an actor cannot be spawned or a message cannot be sent (the runtime is shutting down).
pub async fn ring(laps: u64) -> Result<()> {
    let mut actors = Vec::new();
    for _ in 0..3 {
        actors.push(Actor::spawn(None, Hop, ()).await.ctx("spawning a ring actor")?);
    }
    for i in 0..3 {
        actors[i].0.cast(HopMsg::Next(actors[(i + 1) % 3].0.clone())).ctx("linking the ring")?;
    }
    let (done, ended) = oneshot::channel();
    actors[0].0.cast(HopMsg::Token { hops_left: 3 * laps, done: Some(done) }).ctx("sending the token")?;
    ended.await.ctx("the ring's end")?;
    for (actor, handle) in actors {
        actor.stop(None);
        handle.await.ctx("stopping a ring actor")?;
    }
    Ok(())
}

/// The median time of one lap over `rings` rings of `laps` laps, each ring started from `rt.block_on` as the
/// `seq` scenario starts each chain (a warm-up ring first).
///
/// # Errors
/// As [`ring`].
pub fn per_lap(rt: &tokio::runtime::Runtime, laps: u64, rings: usize) -> Result<Duration> {
    let mut times = Vec::with_capacity(rings);
    for i in 0..=rings {
        let t0 = Instant::now();
        rt.block_on(ring(laps))?;
        if i > 0 {
            times.push(t0.elapsed());
        }
    }
    Ok(median(&mut times) / u32::try_from(laps.max(1)).unwrap_or(u32::MAX))
}
