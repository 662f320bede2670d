//! How an invocation gets its actor: [`spawn_invocation`] starts a [`SupervisorActor`] for a composite or an
//! [`AgentActor`] for a leaf, linked to its parent; a composite invoked as a plain agent (by a wrapper, not by
//! the engine's dispatch) runs a bare supervisor ([`Composite`]'s [`DynAgent`] implementation). The
//! supervisor's type is declared here and its behaviour lives in `supervisor.rs`: supervisors start
//! supervisors, and this split keeps the runtime's modules in layers without a cycle.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use serde_json::Value;

use super::agent_actor::{AgentActor, AgentArgs, AgentPanicked};
use super::agent_actor::{AgentMsg, LeafCall};
use super::composite::{Composite, CompositeInner, composite_of};
use crate::agent::{AgentRef, DynAgent};
use crate::agent_spec::AgentSpec;
use crate::error::AgentError;
use crate::invocation::InvocationContext;
use crate::run_actor::Frame;
use crate::run_actor::Report;
use crate::run_actor::RunHandle;
use crate::stop::Stop;

/// The supervisor of one composite invocation: its behaviour (`impl Actor`) is in `supervisor.rs`, which
/// spawns its children through this module.
pub(crate) struct SupervisorActor;

/// What a [`SupervisorActor`] starts with.
pub(crate) struct SupervisorArgs {
    pub(crate) inner: Arc<CompositeInner>,
    pub(crate) agent: AgentRef,
    pub(crate) run: RunHandle,
    pub(crate) frame: Frame,
    pub(crate) report: Report,
    /// Wait this long first (an error handler's retry backoff).
    pub(crate) delay: Duration,
    /// Invoked as a plain agent (`Composite::invoke_dyn`): the caller opened the invocation and writes the
    /// output; the supervisor only runs the planner.
    pub(crate) bare: bool,
}

/// A broken actor tree: a composite below died (its planner panicked, or an engine bug). Carried up the
/// supervisors to the run's scope actor, which restarts the run from its journal.
#[derive(Debug)]
pub(crate) struct TreeFailed(pub(crate) AgentError);

impl std::fmt::Display for TreeFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TreeFailed {}

/// The error an actor's failure stands for: a caught panic's, a broken tree's, or (an uncaught panic or an
/// engine bug) a planner error naming `agent` at `path` with the failure's text.
pub(crate) fn tree_error(err: &ActorProcessingErr, agent: &AgentRef, path: &str) -> AgentError {
    if let Some(TreeFailed(e)) = err.downcast_ref::<TreeFailed>() {
        return e.clone();
    }
    if let Some(p) = err.downcast_ref::<AgentPanicked>() {
        return p.error.clone();
    }
    AgentError::Planner { agent: agent.name().to_string(), path: path.to_string(), message: format!("failed: {err}") }
}

/// An invocation's actor: a leaf's agent actor (which can run more of them) or a composite's supervisor.
pub(crate) enum Spawned {
    Leaf(ActorRef<AgentMsg>),
    Composite(ActorCell),
}

impl Spawned {
    pub(crate) fn cell(&self) -> ActorCell {
        match self {
            Spawned::Leaf(a) => a.get_cell(),
            Spawned::Composite(c) => c.clone(),
        }
    }
}

/// Spawns the actor of one invocation of `agent`, linked to `parent`: a supervisor for a composite, an agent
/// actor for a leaf.
///
/// # Errors
/// [`AgentError::Internal`] when the actor cannot start (its parent is stopping).
pub(crate) async fn spawn_invocation(
    agent: &AgentRef,
    run: &RunHandle,
    frame: Frame,
    report: Report,
    delay: Duration,
    parent: ActorCell,
) -> Result<Spawned, AgentError> {
    let failed =
        |e: ractor::SpawnErr| AgentError::internal(format!("cannot start the actor of `{}`: {e}", agent.name()));
    match composite_of(agent).map(|c| &c.inner) {
        Some(inner) => {
            let args = SupervisorArgs {
                inner: inner.clone(),
                agent: agent.clone(),
                run: run.clone(),
                frame,
                report,
                delay,
                bare: false,
            };
            let spawned = Actor::spawn_linked(None, SupervisorActor, Box::new(args), parent).await;
            spawned.map(|(a, _)| Spawned::Composite(a.get_cell())).map_err(failed)
        }
        None => {
            let first = LeafCall { agent: agent.clone(), frame, report, delay };
            let args = Box::new(AgentArgs { run: run.clone(), first });
            Actor::spawn_linked(None, AgentActor, args, parent).await.map(|(a, _)| Spawned::Leaf(a)).map_err(failed)
        }
    }
}

/// A composite is an agent: invoked by the engine it gets a supervisor (`spawn_invocation`); invoked as a
/// plain agent it runs a bare one.
impl DynAgent for Composite {
    fn spec(&self) -> &AgentSpec {
        &self.inner.spec
    }

    /// Invoked as a plain agent (by a wrapper, not by the engine's own dispatch): runs the planner in a
    /// supervisor actor linked to the invoking actor, and waits for it. Dropping the future stops it.
    fn invoke_dyn<'a>(&'a self, ctx: &'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> {
        Box::pin(async move {
            let handler = self.inner.handler.clone().or_else(|| ctx.frame.handler.clone());
            let frame = Frame {
                handler,
                listeners: ctx.child_listeners.clone(),
                span: tracing::Span::current(),
                ..ctx.frame.clone()
            };
            let (tx, rx) = tokio::sync::oneshot::channel();
            let args = SupervisorArgs {
                inner: self.inner.clone(),
                agent: AgentRef(Arc::new(Composite { inner: self.inner.clone() })),
                run: ctx.handle.clone(),
                frame,
                report: Report::Bare(tx),
                delay: std::time::Duration::ZERO,
                bare: true,
            };
            let spawned = match &ctx.actor {
                Some(parent) => {
                    ractor::Actor::spawn_linked(None, SupervisorActor, Box::new(args), parent.clone()).await
                }
                None => ractor::Actor::spawn(None, SupervisorActor, Box::new(args)).await,
            };
            let (actor, _) = spawned.map_err(|e| AgentError::internal(format!("cannot start a supervisor: {e}")))?;
            // Stops the supervisor (and its children) if this invocation is dropped before it reports.
            let mut guard = KillOnDrop(Some(actor.get_cell()));
            let result = rx.await.map_err(|_| AgentError::internal("the composite's supervisor stopped"));
            guard.0 = None;
            let (value, write) = result??;
            if let (true, true, Some(key)) = (write, ctx.frame.write_output, &self.inner.spec.output_key) {
                ctx.write(key.clone(), value.clone()).await?;
            }
            Ok(value)
        })
    }

    fn engine_agent(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn sub_agents(&self) -> &[AgentRef] {
        &self.inner.sub_agents
    }

    fn engine_writes_output(&self) -> bool {
        false
    }

    fn may_suspend(&self) -> bool {
        self.inner.may_suspend
    }

    fn has_chat_memory(&self) -> bool {
        self.inner.sub_agents.iter().any(|a| a.0.has_chat_memory())
    }

    fn inherits_error_handler(&self) -> bool {
        self.inner.handler.is_none()
    }

    fn topology_details(&self) -> Value {
        self.inner.details.clone()
    }

    fn bound_keys(&self) -> &[String] {
        &self.inner.binds
    }
}

/// Kills an actor when dropped (unless disarmed by taking it out).
struct KillOnDrop(Option<ractor::ActorCell>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(cell) = self.0.take() {
            cell.kill();
        }
    }
}
