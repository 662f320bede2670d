//! [`Subscribers`]: the actors that subscribed to a run's events ([`crate::Registry::subscribe`]), as the
//! members of the run's process group, and whether any joined (events are built only when someone listens).

use std::sync::atomic::{AtomicBool, Ordering};

use ractor::ActorCell;

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
