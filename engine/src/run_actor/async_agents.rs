//! [`AsyncAgents`]: the async agents a run started — their actors (stopped when the run fails) and their ends
//! (the run waits for every one before it completes).

use ractor::ActorCell;
use tokio::sync::oneshot;

use crate::error::AgentError;

/// An async agent's end: answers once the agent has finished.
pub(crate) type AsyncEnd = oneshot::Receiver<Result<(), AgentError>>;

/// The async agents of one run, owned by the run's actor. See the module documentation.
#[derive(Default)]
pub(crate) struct AsyncAgents {
    /// The ends of the async agents started and not waited for yet.
    ends: Vec<AsyncEnd>,
    /// Their actors.
    actors: Vec<ActorCell>,
}

impl AsyncAgents {
    /// Tracks an async agent: its end, and its actor.
    pub(crate) fn track(&mut self, end: AsyncEnd, actor: ActorCell) {
        self.actors.push(actor);
        self.ends.push(end);
    }

    /// Takes the ends not waited for yet (the waiter asks again for those started while it waited).
    pub(crate) fn take_ends(&mut self) -> Vec<AsyncEnd> {
        std::mem::take(&mut self.ends)
    }

    /// Stops every async agent still running (including those whose ends were taken).
    pub(crate) fn abort_all(&mut self) {
        for actor in self.actors.drain(..) {
            actor.kill();
        }
    }
}

/// Waits for `ends`; the first failure is returned.
pub(crate) async fn wait_ends(ends: Vec<AsyncEnd>) -> Result<(), AgentError> {
    let mut first_err = None;
    for end in ends {
        let r = end.await.unwrap_or_else(|_| Err(AgentError::internal("an async agent's actor stopped")));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
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
        let mut agents = AsyncAgents::default();
        let (actor, handle) = Actor::spawn(None, Idle, ()).await.unwrap();
        let (first, first_end) = oneshot::channel();
        let (second, second_end) = oneshot::channel();
        agents.track(first_end, actor.get_cell());
        agents.track(second_end, actor.get_cell());
        second.send(Err(AgentError::internal("second"))).unwrap();
        first.send(Err(AgentError::internal("first"))).unwrap();
        assert_eq!(wait_ends(agents.take_ends()).await.unwrap_err().to_string(), "engine: first");
        assert!(agents.take_ends().is_empty(), "nothing left to wait for");
        agents.abort_all();
        handle.await.unwrap();
    }
}
