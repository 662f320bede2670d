//! [`AsyncAgents`]: the async agents a run started — their actors (stopped when the run fails) and their ends
//! (the run waits for every one before it completes).

use std::sync::Mutex;

use ractor::ActorCell;
use tokio::sync::oneshot;

use super::util::lock;
use crate::error::AgentError;

/// The async agents of one run. See the module documentation.
#[derive(Default)]
pub(crate) struct AsyncAgents {
    /// The ends of the async agents started (each answers once its agent has finished).
    ends: Mutex<Vec<oneshot::Receiver<Result<(), AgentError>>>>,
    /// Their actors.
    actors: Mutex<Vec<ActorCell>>,
}

impl AsyncAgents {
    /// Tracks an async agent: its end, and its actor.
    pub(crate) fn track(&self, end: oneshot::Receiver<Result<(), AgentError>>, actor: ActorCell) {
        lock(&self.actors).push(actor);
        lock(&self.ends).push(end);
    }

    /// Whether no async agent was started (or every one was waited for).
    pub(crate) fn none_started(&self) -> bool {
        lock(&self.ends).is_empty()
    }

    /// Waits for every async agent started (those started while waiting too); the first failure is returned.
    pub(crate) async fn wait_all(&self) -> Result<(), AgentError> {
        let mut first_err = None;
        loop {
            let batch = std::mem::take(&mut *lock(&self.ends));
            if batch.is_empty() {
                break;
            }
            for end in batch {
                let r = end.await.unwrap_or_else(|_| Err(AgentError::internal("an async agent's actor stopped")));
                if let Err(e) = r {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Stops every async agent still running (including those [`AsyncAgents::wait_all`] waits for).
    pub(crate) fn abort_all(&self) {
        for actor in lock(&self.actors).drain(..) {
            actor.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use ractor::{Actor, ActorProcessingErr, ActorRef};

    use super::*;

    /// An actor that does nothing: the agent actors' stand-in.
    struct Idle;

    impl Actor for Idle {
        type Msg = ();
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn waiting_sees_every_end_and_returns_the_first_failure() {
        let agents = AsyncAgents::default();
        let (actor, handle) = Actor::spawn(None, Idle, ()).await.unwrap();
        let (first, first_end) = oneshot::channel();
        let (second, second_end) = oneshot::channel();
        agents.track(first_end, actor.get_cell());
        agents.track(second_end, actor.get_cell());
        second.send(Err(AgentError::internal("second"))).unwrap();
        first.send(Err(AgentError::internal("first"))).unwrap();
        assert_eq!(agents.wait_all().await.unwrap_err().to_string(), "engine: first");
        assert!(agents.wait_all().await.is_ok(), "nothing left to wait for");
        agents.abort_all();
        handle.await.unwrap();
    }
}
