//! The supervisor: one [`PlannerActor`] per composite invocation. It drives the planner, runs the agents of
//! each action concurrently as tasks it owns, reports every completion to the planner one at a time (the
//! mailbox serialises them), applies the error handler, journals each step before dispatching the next, and
//! never busy-waits: "nothing to do" with nothing in flight is [`AgentError::PlannerStalled`].
//!
//! Children are tokio tasks rather than actors: a leaf invocation needs no mailbox, and a task is an order of
//! magnitude cheaper to start. Aborting a child task drops its future, which stops a nested composite's actor
//! (see `StopOnDrop` in `composite.rs`), so cancellation cascades down the tree.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tracing::Instrument;

use super::RunContext;
use super::composite::CompositeInner;
use super::invoke::{ChildOutcome, FailedSlot, InvokeOptions, invoke_agent};
use crate::error::AgentError;
use crate::error_handler::{ErrorContext, ErrorHandler, Recovery};
use crate::listener::{ListenerRef, RunEvent};
use crate::planner::{Action, AgentCall, Completion, Planner, PlanningContext};
use crate::run::PendingResponse;
use crate::scope::{InvocationRecord, ScopeView, merge_delta};
use crate::store::{CallRecord, Finish, PlannerState, StepRecord};

pub(crate) struct PlannerActor;

pub(crate) struct SupervisorArgs {
    pub(crate) inner: Arc<CompositeInner>,
    pub(crate) run: Arc<RunContext>,
    pub(crate) path: Arc<str>,
    pub(crate) handler: Option<Arc<dyn ErrorHandler>>,
    /// Call bindings of the composite's own invocation, inherited by its sub-agents.
    pub(crate) bindings: Option<Arc<Map<String, Value>>>,
    /// Listeners of the composite's own invocation (they see its planner decisions).
    pub(crate) listeners: Arc<[ListenerRef]>,
    /// Listeners its sub-agents inherit.
    pub(crate) child_listeners: Arc<[ListenerRef]>,
    /// The composite's invocation span: its children's spans nest under it.
    pub(crate) span: tracing::Span,
    pub(crate) reply: oneshot::Sender<Result<(Value, bool), AgentError>>,
}

pub(crate) enum SupervisorMsg {
    /// A child finished; `failed` is the record of a failed invocation when the run is journaled.
    ChildDone { id: u64, result: Result<ChildOutcome, AgentError>, failed: Option<InvocationRecord> },
}

struct InFlight {
    call: AgentCall,
    attempt: u32,
    abort: AbortHandle,
}

pub(crate) struct SupervisorState {
    inner: Arc<CompositeInner>,
    run: Arc<RunContext>,
    path: Arc<str>,
    child_paths: Vec<Arc<str>>,
    handler: Option<Arc<dyn ErrorHandler>>,
    bindings: Option<Arc<Map<String, Value>>>,
    listeners: Arc<[ListenerRef]>,
    child_listeners: Arc<[ListenerRef]>,
    span: tracing::Span,
    planner: Box<dyn Planner>,
    inflight: HashMap<u64, InFlight>,
    /// Calls waiting for a human, with what they wait for.
    suspended: Vec<(AgentCall, u32)>,
    pending: Vec<PendingResponse>,
    next_id: u64,
    reply: Option<oneshot::Sender<Result<(Value, bool), AgentError>>>,
}

impl Actor for PlannerActor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let child_paths =
            (0..args.inner.sub_agents.len()).map(|i| Arc::from(format!("{}/{i}", args.path).as_str())).collect();
        Ok(SupervisorState {
            planner: (args.inner.factory)(),
            inner: args.inner,
            run: args.run,
            path: args.path,
            child_paths,
            handler: args.handler,
            bindings: args.bindings,
            listeners: args.listeners,
            child_listeners: args.child_listeners,
            span: args.span,
            inflight: HashMap::new(),
            suspended: Vec::new(),
            pending: Vec::new(),
            next_id: 0,
            reply: Some(args.reply),
        })
    }

    async fn post_start(&self, myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        if let Some(saved) = state.run.take_restore(&state.path) {
            state.resume(&myself, saved).await;
            return Ok(());
        }
        let first = match decision_view(&state.run, state.planner.reads_state()).await {
            Ok(view) => {
                let ctx = context(&state.inner, view, &state.path);
                let planner = &mut state.planner;
                planner.init(&ctx).and_then(|()| planner.first_action(&ctx))
            }
            Err(e) => Err(e),
        };
        match first {
            Ok(action) => state.dispatch(&myself, action).await,
            Err(e) => state.fail(&myself, e),
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let SupervisorMsg::ChildDone { id, result, failed } = msg;
        let Some(done) = state.inflight.remove(&id) else { return Ok(()) };
        if state.reply.is_none() {
            return Ok(());
        }
        match result {
            Ok(outcome) => state.complete(&myself, done.call, outcome, false).await,
            Err(AgentError::Suspended { pending }) => {
                state.suspended.push((done.call, done.attempt));
                state.pending.extend(pending);
                state.suspend_if_idle(&myself);
            }
            Err(e) => {
                if let Some(record) = failed
                    && !matches!(e, AgentError::Cancelled)
                    && let Err(journal_error) = state.journal_failed_attempt(done.call.agent, record).await
                {
                    state.fail(&myself, journal_error);
                    return Ok(());
                }
                state.recover(&myself, done, e).await
            }
        }
        Ok(())
    }

    async fn post_stop(&self, _myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        state.abort_all();
        if let Some(reply) = state.reply.take() {
            // Stopped from outside: the run was cancelled (or a sibling failed).
            if state.inner.compensate_on_error {
                let (run, path) = (state.run.clone(), state.path.clone());
                tokio::spawn(async move { run.compensate(run.take_compensations(&path)).await });
            }
            let _ = reply.send(Err(AgentError::Cancelled));
        }
        Ok(())
    }
}

fn context<'a>(inner: &'a CompositeInner, view: ScopeView, path: &'a str) -> PlanningContext<'a> {
    PlanningContext::new(view, &inner.sub_agents, &inner.spec, path)
}

/// The snapshot a planner decides on: settled (no async production pending) when it reads the state.
async fn decision_view(run: &RunContext, reads_state: bool) -> Result<ScopeView, AgentError> {
    let view = run.scope.view();
    if reads_state && view.has_pending() { run.scope.settled().await } else { Ok(view) }
}

impl SupervisorState {
    fn planning_context(&self) -> PlanningContext<'_> {
        context(&self.inner, self.run.scope.view(), &self.path)
    }

    fn abort_all(&mut self) {
        for (_, f) in self.inflight.drain() {
            f.abort.abort();
        }
    }

    fn fail(&mut self, myself: &ActorRef<SupervisorMsg>, error: AgentError) {
        self.abort_all();
        let compensate = self.inner.compensate_on_error && !matches!(error, AgentError::Suspended { .. });
        if let Some(reply) = self.reply.take() {
            if compensate {
                // Undo what completed below, then report the failure (the parent waits for the reply).
                let (run, path) = (self.run.clone(), self.path.clone());
                tokio::spawn(async move {
                    run.compensate(run.take_compensations(&path)).await;
                    let _ = reply.send(Err(error));
                });
            } else {
                let _ = reply.send(Err(error));
            }
        }
        myself.stop(None);
    }

    async fn finish(&mut self, myself: &ActorRef<SupervisorMsg>, with: Option<Value>) {
        self.abort_all();
        // The result reads the state: wait for async agents still producing keys.
        let view = match self.run.scope.settled().await {
            Ok(v) => v,
            Err(e) => return self.fail(myself, e),
        };
        let result = match (&self.inner.output, with) {
            (Some(f), _) => f(&view).map(|v| (v, true)).map_err(|message| AgentError::Expression {
                agent: self.inner.spec.name.clone(),
                path: self.path.to_string(),
                what: "output".to_string(),
                message,
            }),
            (None, Some(v)) => Ok((v, true)),
            (None, None) => Ok((
                self.inner.spec.output_key.as_ref().and_then(|k| view.get(k)).cloned().unwrap_or(Value::Null),
                false,
            )),
        };
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(result);
        }
        myself.stop(None);
    }

    /// Reports a decision to the listeners.
    fn report_decision(&self, action: &Action) {
        if self.listeners.is_empty() {
            return;
        }
        let (decision, calls) = match action {
            Action::Call(calls) => {
                ("call", calls.iter().filter_map(|c| self.child_paths.get(c.agent)).map(|p| p.to_string()).collect())
            }
            Action::Done | Action::DoneWith(_) => ("done", Vec::new()),
            _ => ("wait", Vec::new()),
        };
        crate::listener::emit(
            &self.listeners,
            &RunEvent::PlannerDecision {
                run_id: self.run.run_id.to_string(),
                path: self.path.to_string(),
                calls,
                decision: decision.to_string(),
                rationale: self.planner.rationale(),
            },
        );
    }

    /// Applies an action: start calls, finish, or wait.
    async fn dispatch(&mut self, myself: &ActorRef<SupervisorMsg>, action: Action) {
        self.report_decision(&action);
        match action {
            Action::Call(calls) => {
                for call in calls {
                    if call.agent >= self.inner.sub_agents.len() {
                        let e = self.planning_context().error(format!(
                            "called sub-agent index {} but there are {}",
                            call.agent,
                            self.inner.sub_agents.len()
                        ));
                        return self.fail(myself, e);
                    }
                    self.spawn_child(myself, call, 1, Duration::ZERO);
                }
                if self.inflight.is_empty() {
                    // An empty call list is "nothing to do".
                    self.stalled(myself);
                }
            }
            Action::Done => self.finish(myself, None).await,
            Action::DoneWith(v) => self.finish(myself, Some(v)).await,
            Action::Nothing => {
                if self.inflight.is_empty() {
                    self.stalled(myself);
                }
            }
        }
    }

    /// Continues from a checkpoint: restore the planner, then finish or dispatch the calls that were in flight.
    async fn resume(&mut self, myself: &ActorRef<SupervisorMsg>, saved: PlannerState) {
        if let Err(message) = self.planner.restore(saved.state) {
            let e = AgentError::Run {
                run_id: self.run.run_id.to_string(),
                message: format!("cannot restore the planner of `{}` ({}): {message}", self.inner.spec.name, self.path),
            };
            return self.fail(myself, e);
        }
        match saved.finished {
            Some(Finish::Done) => return self.finish(myself, None).await,
            Some(Finish::DoneWith(v)) => return self.finish(myself, Some(v)).await,
            None => {}
        }
        for c in saved.inflight {
            if c.agent >= self.inner.sub_agents.len() {
                let e = self.planning_context().error(format!("checkpoint calls unknown sub-agent index {}", c.agent));
                return self.fail(myself, e);
            }
            let call = AgentCall { agent: c.agent, tag: c.tag, bindings: c.bindings, write_output: c.write_output };
            self.spawn_child(myself, call, c.attempt, Duration::ZERO);
        }
        if self.inflight.is_empty() {
            self.stalled(myself);
        }
    }

    /// When only calls waiting for a human remain, the composite suspends (its siblings have finished).
    fn suspend_if_idle(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if self.inflight.is_empty() && !self.suspended.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.fail(myself, AgentError::Suspended { pending });
        }
    }

    /// The calls in flight (including those waiting for a human), plus `new` ones about to start.
    fn inflight_records(&self, new: Option<&[AgentCall]>) -> Vec<CallRecord> {
        let rec = |c: &AgentCall, attempt: u32| CallRecord {
            agent: c.agent,
            tag: c.tag,
            bindings: c.bindings.clone(),
            write_output: c.write_output,
            attempt,
        };
        let mut running: Vec<(&u64, &InFlight)> = self.inflight.iter().collect();
        running.sort_by_key(|(id, _)| **id);
        running
            .into_iter()
            .map(|(_, f)| rec(&f.call, f.attempt))
            .chain(self.suspended.iter().map(|(c, a)| rec(c, *a)))
            .chain(new.unwrap_or_default().iter().map(|c| rec(c, 1)))
            .collect()
    }

    fn stalled(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if !self.suspended.is_empty() {
            return self.suspend_if_idle(myself);
        }
        let e = AgentError::PlannerStalled { agent: self.inner.spec.name.clone(), path: self.path.to_string() };
        self.fail(myself, e);
    }

    fn spawn_child(&mut self, myself: &ActorRef<SupervisorMsg>, call: AgentCall, attempt: u32, delay: Duration) {
        let id = self.next_id;
        self.next_id += 1;
        let agent = self.inner.sub_agents[call.agent].clone();
        let path = self.child_paths[call.agent].clone();
        let run = self.run.clone();
        let handler = self.handler.clone();
        let listeners = self.child_listeners.clone();
        let me = myself.clone();
        let bindings = match (&self.bindings, &call.bindings) {
            (None, None) => None,
            (Some(inherited), None) => Some(inherited.clone()),
            (None, Some(own)) => Some(Arc::new(own.clone())),
            (Some(inherited), Some(own)) => {
                let mut merged = (**inherited).clone();
                merged.extend(own.clone());
                Some(Arc::new(merged))
            }
        };
        let write_output = call.write_output;
        let span = self.span.clone();
        let journaling = self.run.journaling();
        // Boxed: the invocation future is large, and tokio moves a spawned future several times.
        let task = tokio::spawn(Box::pin(
            async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                // Lives in this task's future (already boxed): no allocation of its own.
                let slot = FailedSlot::default();
                let opts = InvokeOptions {
                    bindings: bindings.as_ref(),
                    allow_async: true,
                    write_output,
                    attempt,
                    handler,
                    listeners,
                    failed_record: journaling.then_some(&slot),
                };
                let result = invoke_agent(&agent, &run, path, opts).await;
                let failed = slot.lock().ok().and_then(|mut r| r.take());
                let _ = me.cast(SupervisorMsg::ChildDone { id, result, failed });
            }
            .instrument(span),
        ));
        self.inflight.insert(id, InFlight { call, attempt, abort: task.abort_handle() });
    }

    /// Journals a failed attempt of sub-agent `agent` (a step that completes nothing: the planner does not
    /// advance; the report shows the attempt and its error).
    async fn journal_failed_attempt(&mut self, agent: usize, record: InvocationRecord) -> Result<(), AgentError> {
        let step = StepRecord {
            run_id: self.run.run_id.to_string(),
            seq: self.run.next_seq(),
            agent_path: self.child_paths[agent].to_string(),
            delta: Vec::new(),
            planner_states: Vec::new(),
            invocation: Some(record),
            async_started: false,
            failed: true,
        };
        self.run.journal_step(step).await
    }

    /// A child failed: ask the error handler (retry, substitute, or fail).
    async fn recover(&mut self, myself: &ActorRef<SupervisorMsg>, done: InFlight, error: AgentError) {
        let agent = &self.inner.sub_agents[done.call.agent];
        let Some(handler) = self.handler.clone() else { return self.fail(myself, error) };
        if agent.0.inherits_error_handler() || matches!(error, AgentError::Cancelled) {
            return self.fail(myself, error);
        }
        let view = self.run.scope.view();
        let path = self.child_paths[done.call.agent].clone();
        let decision = handler.handle(&ErrorContext {
            error: &error,
            agent: agent.name(),
            path: &path,
            attempt: done.attempt,
            view: &view,
        });
        match decision {
            Recovery::Retry { after } if done.attempt <= handler.max_retries() => {
                tracing::debug!(path = %path, attempt = done.attempt, "retrying after error: {error}");
                self.spawn_child(myself, done.call, done.attempt + 1, after);
            }
            Recovery::Substitute(value) => {
                let mut delta = Vec::new();
                let key = agent.spec().output_key.clone().filter(|_| done.call.write_output);
                if let Some(key) = key {
                    if let Err(e) = self.run.scope.write(vec![(key.clone(), value.clone())]).await {
                        return self.fail(myself, e);
                    }
                    merge_delta(&mut delta, key, value.clone());
                }
                let outcome = ChildOutcome { output: value, delta, ..Default::default() };
                self.complete(myself, done.call, outcome, true).await;
            }
            Recovery::Retry { .. } | Recovery::Fail => self.fail(myself, error),
        }
    }

    /// A child completed: ask the planner, journal the step, dispatch the next action.
    async fn complete(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        call: AgentCall,
        outcome: ChildOutcome,
        substituted: bool,
    ) {
        let agent_index = call.agent;
        let completion = Completion { call, output: outcome.output, skipped: outcome.skipped, substituted };
        let action = match decision_view(&self.run, self.planner.reads_state()).await {
            Ok(view) => {
                let ctx = context(&self.inner, view, &self.path);
                self.planner.next_action(&ctx, &completion)
            }
            Err(e) => Err(e),
        };
        if self.run.journaling() {
            let (new_calls, finished) = match &action {
                Ok(Action::Call(calls)) => (Some(calls.as_slice()), None),
                Ok(Action::Done) => (None, Some(Finish::Done)),
                Ok(Action::DoneWith(v)) => (None, Some(Finish::DoneWith(v.clone()))),
                _ => (None, None),
            };
            let record = StepRecord {
                run_id: self.run.run_id.to_string(),
                seq: self.run.next_seq(),
                agent_path: self.child_paths[agent_index].to_string(),
                delta: outcome.delta,
                planner_states: vec![PlannerState {
                    path: self.path.to_string(),
                    state: self.planner.execution_state(),
                    inflight: self.inflight_records(new_calls),
                    finished,
                    rationale: self.planner.rationale(),
                }],
                invocation: outcome.record,
                async_started: outcome.async_started,
                failed: false,
            };
            if let Err(e) = self.run.journal_step(record).await {
                return self.fail(myself, e);
            }
        }
        match action {
            Ok(action) => self.dispatch(myself, action).await,
            Err(e) => self.fail(myself, e),
        }
    }
}
