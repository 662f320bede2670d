//! [`Subscribers`]: the actors that subscribed to a run's events ([`crate::Registry::subscribe`]), as the
//! members of the run's process group, and whether any joined (events are built only when someone listens);
//! each is an [`EventSubscriber`] forwarding to a [`RunEvents`] stream.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use ractor::ActorCell;
use tokio::sync::mpsc;

use crate::listener::{ListenerRef, RunEvent};

/// The event subscribers of one run. See the module documentation.
pub(crate) struct Subscribers {
    /// The name of the run's process group.
    group: String,
    /// Whether a subscriber joined (and the group was not found empty since).
    joined: AtomicBool,
}

impl Subscribers {
    /// The subscribers of the process group `group` (none yet).
    pub(crate) fn new(group: String) -> Self {
        Subscribers { group, joined: AtomicBool::new(false) }
    }

    /// Whether events for `listeners` are wanted at all (skip building them otherwise): a listener, or a
    /// subscriber.
    pub(crate) fn observed(&self, listeners: &[ListenerRef]) -> bool {
        !listeners.is_empty() || self.joined.load(Ordering::Relaxed)
    }

    /// Reports `event` to `listeners` and to the subscribers.
    pub(crate) fn emit(&self, listeners: &[ListenerRef], event: &RunEvent) {
        crate::listener::emit(listeners, event);
        if self.joined.load(Ordering::Relaxed) {
            let members = ractor::pg::get_members(&self.group);
            if members.is_empty() {
                self.joined.store(false, Ordering::Relaxed);
            }
            for member in members {
                let _ = member.send_message(event.clone());
            }
        }
    }

    /// Adds a subscriber (an actor receiving `RunEvent` messages).
    pub(crate) fn join(&self, subscriber: ActorCell) {
        ractor::pg::join(self.group.clone(), vec![subscriber]);
        self.joined.store(true, Ordering::Relaxed);
    }

    /// Lets the subscribers receive the events sent so far, then stops them (the run has ended).
    pub(crate) fn end(&self) {
        for member in ractor::pg::get_members(&self.group) {
            let _ = member.drain();
        }
    }
}

/// The events of a run started with [`crate::InvokeRequest::events`], in order. Implements
/// `futures::Stream<Item = RunEvent>`; [`RunEvents::recv`] is the same without the trait.
pub struct RunEvents {
    rx: mpsc::UnboundedReceiver<RunEvent>,
}

impl RunEvents {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<RunEvent>) -> Self {
        RunEvents { rx }
    }

    /// The next event; `None` once the run has ended and every event was received.
    pub async fn recv(&mut self) -> Option<RunEvent> {
        self.rx.recv().await
    }
}

impl futures::Stream for RunEvents {
    type Item = RunEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<RunEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// An actor of a run's process group of event subscribers: forwards each event to a [`RunEvents`] stream, and
/// stops when the stream is dropped or the run ends (the run drains the group).
pub(crate) struct EventSubscriber;

impl ractor::Actor for EventSubscriber {
    type Msg = RunEvent;
    type State = mpsc::UnboundedSender<RunEvent>;
    type Arguments = mpsc::UnboundedSender<RunEvent>;

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<RunEvent>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle(
        &self,
        myself: ractor::ActorRef<RunEvent>,
        event: RunEvent,
        tx: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        if tx.send(event).is_err() {
            myself.stop(None);
        }
        Ok(())
    }
}
