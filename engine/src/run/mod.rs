//! The runtime: an actor system on ractor. Per run:
//!
//! ```text
//! ScopeActor (one per run; registered under the run id: answers, cancellation; the root's supervisor)
//!   │  owns the state, history and pending keys; every write is a message; readers use its snapshots
//!   └─ SupervisorActor (root composite)          or AgentActor (root leaf)
//!        ├─ AgentActor (one per leaf invocation, linked) ── writes + result ──► ScopeActor ──► supervisor
//!        └─ SupervisorActor (nested composite, linked) ── its own children ...
//! ```
//!
//! A supervisor handles one message at a time: a child's completion (through the scope actor, so its writes
//! are published first), a child's failure (a supervision event: a leaf's panic goes to the error handler, a
//! composite's death breaks the tree and the scope actor restarts the run from its journal), its own timeout.
//! The request that starts or resumes a run is a session: open (load the journal, start the scope actor),
//! execute (start the root and wait), close (flush, record the status, stop the scope actor).
//!
//! The modules form layers without a cycle (`scripts/run-imports.sh` checks it): the pure parts (`frame`,
//! `composite`, `util`, `run_id`), the run's small state types, the messages (`message`), the scope actor,
//! the shared context (`context`), invocations (`invoke`), the actors (`agent_actor`, `spawn`, `supervisor`)
//! and the session on top.

mod agent_actor;
mod composite;
mod fork;
mod invoke;
mod registry;
mod request;
mod run_id;
mod session;
mod spawn;
mod stream;
mod supervisor;

pub use composite::{Composite, CompositeBuilder, OutputFn, PlannerFactory};
pub use fork::fork;
pub use registry::{REGISTRY_CAPACITY, Registry};
pub use request::{
    CancelHandle, DrainHandle, INPUTS_PATH, InvokeRequest, RunOutcome, RunResult, answerable, respond, respond_as,
    timed_out,
};
pub use run_id::{MAX_RUN_ID_LEN, check_run_id};
pub use stream::{ResultStream, StreamItem, StreamSource};
