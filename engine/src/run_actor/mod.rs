//! The run's actor and what it owns: one [`ScopeActor`](scope_actor::ScopeActor) per run holds the scope
//! (state, history, pending async keys) and the rest of the run's state (human answers, compensations, async
//! agents, the budget ledger, the composites a resume restores), changed only by its messages ([`ScopeMsg`]);
//! every invocation holds the run's [`RunHandle`] (its id, the actor's handle, cancel and drain signals, the
//! journal's writer, the event subscribers). Below the agents and the runtime that drives them (`run`): an
//! invocation's context is built from these parts, so nothing here names an agent.

mod answers;
mod async_agents;
mod compensations;
mod frame;
mod handle;
mod message;
mod scope_actor;
mod step_journal;
mod subscribers;
mod util;

pub(crate) use answers::Answers;
pub(crate) use compensations::Compensation;
pub use compensations::CompensationFn;
pub(crate) use frame::{Frame, bindings_of, layer_of};
pub(crate) use handle::{HandleArgs, RunHandle};
pub(crate) use message::{
    ChildDone, ChildOutcome, Delivery, InvocationDone, Leftovers, Report, RootRun, RootStart, ScopeMsg, SupervisorMsg,
};
pub(crate) use scope_actor::RunParts;
pub use scope_actor::{MAX_RESTARTS, ScopeHandle};
pub(crate) use subscribers::EventSubscriber;
pub use subscribers::RunEvents;
pub(crate) use util::now_us;
