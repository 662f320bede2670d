//! The [`AgentActor`]: runs leaf invocations for the supervisor of the composite that called them, linked to
//! it. For each invocation it resolves the agent's inputs, invokes it (with its timeout), and hands its
//! writes, history record and result to the scope actor, which passes the result on to the supervisor. A
//! supervisor keeps its agent actors idle between invocations and hands them the next one
//! ([`AgentMsg::Invoke`]): a sequence's steps run one after another in one actor, a fan-out of K calls in K
//! actors, and no step pays an actor's spawn and supervision events (measured: docs/performance.md). An
//! agent actor that does not serve a supervisor (the root leaf, a restarted async agent) stops after its
//! invocation.
//!
//! A panic in the agent's code is caught so that the invocation's record and events are complete, then
//! raised as the actor's failure ([`AgentPanicked`]): the supervisor receives it as a supervision event and
//! offers it to the composite's error handler.
//!
//! An async agent reports that it started as soon as its inputs are resolved, moves under the run's scope
//! actor (it outlives the composite that started it), and hands its output to the scope when it ends.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::invoke::{Closed, Invocation};
use crate::agent::AgentRef;
use crate::error::AgentError;
use crate::journal::InvocationRecord;
use crate::run_actor::RunHandle;
use crate::run_actor::{ChildOutcome, Delivery, Frame, InvocationDone, Report, ScopeMsg};
use crate::scope::merge_delta;
use crate::stop::Stop;

/// The messages of an [`AgentActor`](super::agent_actor::AgentActor).
pub(crate) enum AgentMsg {
    /// Runs one more invocation.
    Invoke(Box<LeafCall>),
}

/// One leaf invocation for an agent actor: the agent, the frame it runs in, where its result goes.
pub(crate) struct LeafCall {
    pub(crate) agent: AgentRef,
    pub(crate) frame: Frame,
    pub(crate) report: Report,
    /// Wait this long first (an error handler's retry backoff).
    pub(crate) delay: Duration,
}

/// The actor of leaf invocations. See the module documentation.
pub(crate) struct AgentActor;

/// What an [`AgentActor`] starts with: its run (every invocation it serves is of that run) and its first
/// invocation.
pub(crate) struct AgentArgs {
    pub(crate) run: RunHandle,
    pub(crate) first: LeafCall,
}

/// What an [`AgentActor`] owns: its run, and its first invocation until it runs.
pub(crate) struct AgentState {
    run: RunHandle,
    first: Option<LeafCall>,
}

/// A leaf agent panicked: the actor's failure, carrying the error its supervisor handles and the record of
/// the failed attempt.
#[derive(Debug)]
pub(crate) struct AgentPanicked {
    pub(crate) error: AgentError,
    pub(crate) failed: Option<InvocationRecord>,
}

impl std::fmt::Display for AgentPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for AgentPanicked {}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = Box<AgentArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        args: Box<AgentArgs>,
    ) -> Result<Self::State, ActorProcessingErr> {
        let AgentArgs { run, first } = *args;
        Ok(AgentState { run, first: Some(first) })
    }

    async fn post_start(&self, myself: ActorRef<AgentMsg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        match state.first.take() {
            Some(call) => run_one(&state.run, call, &myself).await,
            None => Ok(()),
        }
    }

    async fn handle(
        &self,
        myself: ActorRef<AgentMsg>,
        msg: AgentMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let AgentMsg::Invoke(call) = msg;
        run_one(&state.run, *call, &myself).await
    }
}

/// Runs one invocation; an actor that serves no supervisor, or now runs an async agent, stops after it.
async fn run_one(run: &RunHandle, call: LeafCall, myself: &ActorRef<AgentMsg>) -> Result<(), ActorProcessingErr> {
    let pooled = matches!(call.report, Report::Parent { .. });
    let result = Box::pin(run_leaf(run, call, myself)).await;
    if !matches!(result, Ok(true)) || !pooled {
        myself.stop(None);
    }
    result.map(|_| ())
}

/// Runs one leaf invocation to its end (see the module documentation). `Ok(true)`: the actor is free for
/// another invocation (not an async agent, which now belongs to the run).
async fn run_leaf(run: &RunHandle, call: LeafCall, myself: &ActorRef<AgentMsg>) -> Result<bool, ActorProcessingErr> {
    let LeafCall { agent, frame, report, delay } = call;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let is_async = agent.spec().is_async && frame.allow_async;
    let invocation = match Invocation::open(&agent, run, frame, Some(myself.get_cell())).await {
        Ok(Some(invocation)) => invocation,
        Ok(None) => {
            let skipped = ChildOutcome { skipped: true, ..Default::default() };
            Delivery { report, result: Ok(skipped), failed: None }.deliver(run.scope.actor());
            return Ok(true);
        }
        Err(e) => {
            Delivery { report, result: Err(e.into()), failed: None }.deliver(run.scope.actor());
            return Ok(true);
        }
    };
    if is_async {
        return run_async(agent, run.clone(), invocation, report, myself).await.map(|()| false);
    }
    let (result, panicked) = invoke_body(&agent, &invocation).await;
    let closed = invocation.close(&agent, result);
    if panicked && matches!(report, Report::Parent { .. }) {
        let Closed { result, record, failed, .. } = closed;
        if let Some(record) = record {
            run.scope.record(record);
        }
        let error = result
            .err()
            .map_or_else(|| AgentError::internal("a panicked invocation without its error"), Stop::into_failure);
        return Err(Box::new(AgentPanicked { error, failed }));
    }
    closed.send(run, report);
    Ok(true)
}

/// Invokes the agent with its timeout, catching a panic: the result, and whether it panicked.
async fn invoke_body(agent: &AgentRef, invocation: &Invocation) -> (Result<Value, Stop>, bool) {
    let spec = agent.spec();
    let ctx = &invocation.ctx;
    let fut = AssertUnwindSafe(agent.0.invoke_dyn(ctx).instrument(invocation.span.clone())).catch_unwind();
    let caught = match spec.timeout {
        // Boxed: a timer is large and most agents have none.
        Some(t) => match Box::pin(tokio::time::timeout(t, fut)).await {
            Ok(r) => r,
            Err(_) => Ok(Err(Stop::Failed(AgentError::Timeout {
                agent: spec.name.clone(),
                path: ctx.path().to_string(),
                timeout_ms: t.as_millis() as u64,
            }))),
        },
        None => fut.await,
    };
    match caught {
        Ok(result) => (result, false),
        Err(panic) => (Err(ctx.fail(format!("panicked: {}", panic_message(panic.as_ref()))).into()), true),
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// An async agent: reports its start at once, then runs under the run's scope actor and hands its output to
/// the scope (readers of its output key wait for it) and its step to the journal.
async fn run_async(
    agent: AgentRef,
    run: RunHandle,
    mut invocation: Invocation,
    report: Report,
    myself: &ActorRef<AgentMsg>,
) -> Result<(), ActorProcessingErr> {
    let write_key = invocation.write_key.take();
    let layer = invocation.ctx.frame.layer.clone();
    if let Some(key) = &write_key
        && let Err(e) = run.scope.mark_pending(layer.as_ref(), key).await
    {
        Delivery { report, result: Err(e.into()), failed: None }.deliver(run.scope.actor());
        return Ok(());
    }
    let (done, ended) = oneshot::channel();
    run.async_started(ended, myself.get_cell());
    myself.get_cell().link(run.scope.actor().get_cell());
    let (start_journaled, start_in_journal) = oneshot::channel();
    let started = ChildOutcome { async_started: true, start_journaled: Some(start_journaled), ..Default::default() };
    Delivery { report, result: Ok(started), failed: None }.deliver(run.scope.actor());

    let path = invocation.ctx.path().to_string();
    let (result, _) = invoke_body(&agent, &invocation).await;
    // An async agent cannot suspend the run: what it waits for fails it, saying so.
    let result = match result {
        Err(Stop::Suspended(pending)) => {
            let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
            Err(Stop::Failed(invocation.ctx.fail(format!(
                "an async agent cannot suspend the run, and it waits for {}; make it synchronous (async: false) \
                 or let it not wait",
                ids.join(", ")
            ))))
        }
        other => other,
    };
    let Closed { item, result, scope_writes, record, .. } = invocation.close(&agent, result);
    // The writes staged for completion and the history record; the output follows with the async end.
    let then = Delivery { report: Report::Nobody, result: Ok(ChildOutcome::default()), failed: None };
    let _ = run.scope.tell(ScopeMsg::Complete(Box::new(InvocationDone { item, delta: scope_writes, record, then })));
    // An async agent cannot suspend or drain the run: its readers see that as its failure.
    let result = result.map_err(Stop::into_failure).map(|mut o| {
        if let Some(k) = &write_key {
            merge_delta(&mut o.delta, k.clone(), o.output.clone());
        }
        o
    });
    let end = async {
        match &write_key {
            Some(key) => {
                let delta = result.as_ref().map(|o| o.delta.clone()).map_err(Clone::clone);
                run.scope.finish_async(layer.as_ref(), key, delta).await?;
            }
            None => {
                if let Ok(o) = &result
                    && !o.delta.is_empty()
                {
                    run.scope.write_in(layer.as_ref(), o.delta.clone()).await?;
                }
            }
        }
        let outcome = result?;
        // The start's step first (its supervisor journals it): a resume must not find the end before the
        // start, or it would run the agent again.
        let _ = start_in_journal.await;
        run.journal.completion(&path, layer.as_ref(), outcome.delta, outcome.record, outcome.calls).await
    };
    let _ = done.send(end.await);
    Ok(())
}
