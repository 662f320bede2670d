//! The [`SupervisorActor`]: one per composite invocation. It owns the composite's [`Planner`], spawns the
//! agents of each action as actors linked to it (an `AgentActor` per leaf call, a `SupervisorActor` per
//! composite call), handles their completions one at a time (its mailbox serialises them), applies the error
//! handler, journals each step before dispatching the next, and never busy-waits: "nothing to do" with
//! nothing in flight is [`AgentError::PlannerStalled`].
//!
//! Supervision: a leaf's panic reaches it as a supervision event and goes to the error handler like any
//! failure (a retry is a fresh actor, its attempt counted in the history). A composite child that dies —
//! its planner panicked — means the run's tree is broken: this supervisor dies with it, up to the run's
//! scope actor, which restarts the root from the journal. A planner that panics journals first the
//! completion it was handed, so the restart hands it over again and no completed step runs twice.
//!
//! Draining (the run's `DrainHandle`): a call the supervisor would start is held instead — journaled in flight
//! as usual, not started — and once nothing runs the supervisor reports [`Stop::Drained`](crate::Stop::Drained), which its
//! parent holds as a call in flight in turn. A resume starts the held calls; nothing completed runs again.
//!
//! When the composite's result is decided, the supervisor closes its invocation (record, output write)
//! through the scope actor, which hands the result to the parent, and stops; stopping kills any children
//! still running (ractor terminates an actor's children with it), and a failure undoes what completed below
//! when the composite compensates.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::Value;

use super::agent_actor::{AgentMsg, LeafCall};
use super::agent_actor::{AgentPanicked, panic_message};
use super::composite::{CompositeInner, composite_of};
use super::invoke::Invocation;
use super::spawn::{Spawned, SupervisorActor, SupervisorArgs, TreeFailed, spawn_invocation, tree_error};
use crate::agent::AgentRef;
use crate::call::AgentCall;
use crate::error::AgentError;
use crate::error_handler::{ErrorContext, Recovery};
use crate::journal::InvocationRecord;
use crate::listener::{ListenerRef, RunEvent};
use crate::pending::PendingResponse;
use crate::planner::{Action, Completion, Planner, PlanningContext};
use crate::run_actor::Frame;
use crate::run_actor::RunHandle;
use crate::run_actor::{ChildDone, ChildOutcome, Delivery, Report, ScopeMsg, SupervisorMsg};
use crate::scope::{ScopeView, merge_delta};
use crate::stop::Stop;
use crate::store::{CallRecord, CompletionRecord, Finish, InflightChange, PlannerState, StepRecord, planner_key};

impl Actor for SupervisorActor {
    type Msg = SupervisorMsg;
    /// Boxed: ractor moves the state and arguments through several futures while the actor starts.
    type State = Box<SupervisorState>;
    type Arguments = Box<SupervisorArgs>;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        args: Box<SupervisorArgs>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(Box::new(SupervisorState::new(*args, myself)))
    }

    async fn post_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        state: &mut Box<SupervisorState>,
    ) -> Result<(), ActorProcessingErr> {
        Box::pin(state.open()).await;
        state.after(&myself)
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut Box<SupervisorState>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::ChildDone(done) => {
                let ChildDone { id, result, failed } = *done;
                Box::pin(state.handle(id, result, failed)).await
            }
            SupervisorMsg::Timeout => {
                let spec = &state.inner.spec;
                let timeout_ms = spec.timeout.map_or(0, |t| t.as_millis() as u64);
                let e = AgentError::Timeout { agent: spec.name.clone(), path: state.path().to_string(), timeout_ms };
                state.fail(e);
            }
        }
        state.after(&myself)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        evt: SupervisionEvent,
        state: &mut Box<SupervisorState>,
    ) -> Result<(), ActorProcessingErr> {
        match evt {
            SupervisionEvent::ActorFailed(cell, err) => {
                state.idle.retain(|a| a.get_id() != cell.get_id());
                let Some(id) = state.children.remove(&cell.get_id()) else { return Ok(()) };
                // The actor is gone: it is not reused.
                let Some(index) = state.calls.get_mut(&id).and_then(|c| match &mut c.state {
                    CallState::Running(actor) => {
                        *actor = None;
                        Some(c.call.agent)
                    }
                    _ => None,
                }) else {
                    return Ok(());
                };
                let agent = state.inner.sub_agents[index].clone();
                let path = state.child_paths[index].clone();
                if composite_of(&agent).is_some() && err.downcast_ref::<AgentPanicked>().is_none() {
                    // A composite below died: the tree is broken; die with it (the run restarts it).
                    state.phase = Phase::Concluded;
                    return Err(Box::new(TreeFailed(tree_error(&err, &agent, &path))));
                }
                let (error, failed) = match err.downcast::<AgentPanicked>() {
                    Ok(p) => (p.error, p.failed),
                    Err(err) => (AgentError::failed(agent.name(), path.to_string(), format!("panicked: {err}")), None),
                };
                Box::pin(state.handle(id, Err(error.into()), failed)).await;
                state.after(&myself)
            }
            SupervisionEvent::ActorTerminated(cell, ..) => {
                state.children.remove(&cell.get_id());
                state.idle.retain(|a| a.get_id() != cell.get_id());
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

struct InFlight {
    call: AgentCall,
    attempt: u32,
    state: CallState,
}

/// Where a call in flight stands.
enum CallState {
    /// Its child runs (the child's actor, once spawned).
    Running(Option<Spawned>),
    /// Its child waits for these responses; `since` orders the calls that stopped (the journal lists them in
    /// that order).
    Suspended { pending: Vec<PendingResponse>, since: u64 },
    /// Not started, or stopped at a step boundary, because the run is draining: started by a resume.
    Held { since: u64 },
}

/// The calls in flight as the journal knows them, for journaling changes instead of whole lists.
#[derive(Default)]
struct JournaledCalls {
    /// Calls numbered from here on were not journaled as started yet.
    announced: u64,
    /// Calls started since the last record.
    started: Vec<CallRecord>,
    /// Calls ended since the last record (completed or failed; a call waiting for a human stays in flight).
    ended: Vec<u64>,
}

/// What a [`SupervisorActor`] owns: the planner, the calls in flight and what the journal knows of them.
pub(crate) struct SupervisorState {
    myself: ActorRef<SupervisorMsg>,
    inner: Arc<CompositeInner>,
    agent: AgentRef,
    run: RunHandle,
    frame: Frame,
    report: Option<Report>,
    delay: Duration,
    bare: bool,
    /// The composite's own invocation (absent when bare, or before it opened).
    invocation: Option<Invocation>,
    child_paths: Vec<Arc<str>>,
    /// What the children inherit: listeners and the span they nest under.
    child_listeners: Arc<[ListenerRef]>,
    child_span: tracing::Span,
    planner: Box<dyn Planner>,
    /// The calls in flight — running, waiting for a human, or held by a drain — keyed by call number;
    /// foldhash, as SipHash of a call number cost more than the lookup. Boxed: a map holds at least four
    /// slots, and most composites have one call in flight (heaptrack: 546 bytes for a sequence's map, about
    /// 200 boxed).
    calls: HashMap<u64, Box<InFlight>, foldhash::fast::RandomState>,
    /// How many of `calls` are running.
    running: usize,
    /// Numbers the calls that stop running without ending (suspended or held), in order.
    stops: u64,
    /// The call number of each child actor running a call, for its supervision events.
    children: HashMap<ActorId, u64, foldhash::fast::RandomState>,
    /// Agent actors free for the next leaf call.
    idle: Vec<ActorRef<AgentMsg>>,
    next_id: u64,
    /// What the journal knows of the calls in flight: `None` until this invocation journaled a whole record.
    journaled: Option<JournaledCalls>,
    /// Completions handed to the planner and not yet consumed by a decision (a planner that panicked).
    unconsumed: Vec<CompletionRecord>,
    /// Where the invocation is in its life.
    phase: Phase,
}

/// The life of a composite's invocation, one state at a time. The rare states are boxed: the phase lives in
/// every supervisor for the whole invocation (8 bytes instead of 136).
enum Phase {
    /// Calls run and the planner decides.
    Running,
    /// The result is decided (the first decision wins; later completions are ignored); it is handed on after
    /// the current message.
    Decided(Box<Decided>),
    /// The planner panicked: the actor fails after the current message and the run restarts the tree.
    Broken(Box<AgentError>),
    /// The result was handed on, the invocation was skipped, or the tree failed: dropping the state undoes
    /// nothing.
    Concluded,
}

impl Phase {
    fn is_running(&self) -> bool {
        matches!(self, Phase::Running)
    }

    fn is_decided(&self) -> bool {
        matches!(self, Phase::Decided(_))
    }

    fn decided(outcome: Result<(Value, bool), Stop>, compensate: bool) -> Phase {
        Phase::Decided(Box::new(Decided { outcome, compensate }))
    }
}

/// A decided result: the output and whether it is written to the output key, or the error; `compensate`: the
/// failure undoes what completed below first.
struct Decided {
    outcome: Result<(Value, bool), Stop>,
    compensate: bool,
}

impl SupervisorState {
    fn new(args: SupervisorArgs, myself: ActorRef<SupervisorMsg>) -> Self {
        let mut index = itoa::Buffer::new();
        let path = &args.frame.path;
        let child_paths = (0..args.inner.sub_agents.len())
            .map(|i| Arc::from([&**path, "/", index.format(i)].concat().as_str()))
            .collect();
        SupervisorState {
            myself,
            planner: (args.inner.factory)(),
            child_listeners: args.frame.listeners.clone(),
            child_span: args.frame.span.clone(),
            inner: args.inner,
            agent: args.agent,
            run: args.run,
            frame: args.frame,
            report: Some(args.report),
            delay: args.delay,
            bare: args.bare,
            invocation: None,
            child_paths,
            calls: HashMap::default(),
            running: 0,
            stops: 0,
            children: HashMap::default(),
            idle: Vec::new(),
            next_id: 0,
            journaled: None,
            unconsumed: Vec::new(),
            phase: Phase::Running,
        }
    }

    fn path(&self) -> &Arc<str> {
        &self.frame.path
    }

    /// Opens the composite's invocation (inputs, span, events, timeout), then restores the planner from a
    /// checkpoint or asks it for its first action.
    async fn open(&mut self) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if !self.bare {
            let cell = Some(self.myself.get_cell());
            match Invocation::open(&self.agent, &self.run, self.frame.clone(), cell).await {
                Ok(Some(invocation)) => {
                    self.child_listeners = invocation.ctx.child_listeners.clone();
                    self.child_span = invocation.span.clone();
                    self.invocation = Some(invocation);
                }
                Ok(None) => {
                    self.phase = Phase::Concluded;
                    let skipped = ChildOutcome { skipped: true, ..Default::default() };
                    if let Some(report) = self.report.take() {
                        Delivery { report, result: Ok(skipped), failed: None }.deliver(self.run.scope.actor());
                    }
                    return;
                }
                Err(e) => return self.fail(e),
            }
            if let Some(t) = self.inner.spec.timeout {
                self.myself.send_after(t, || SupervisorMsg::Timeout);
            }
        }
        if let Some(saved) = self.run.take_restore(planner_key(self.path(), self.frame.layer.as_deref())).await {
            return Box::pin(self.resume(saved)).await;
        }
        let first = match decision_view(&self.run, &self.frame, self.planner.reads_state()).await {
            Ok(view) => {
                let ctx = context(&self.inner, view, &self.frame.path);
                let planner = &mut self.planner;
                match std::panic::catch_unwind(AssertUnwindSafe(|| {
                    planner.init(&ctx).and_then(|()| planner.first_action(&ctx))
                })) {
                    Ok(first) => first,
                    Err(panic) => return self.planner_panicked(panic_message(panic.as_ref())),
                }
            }
            Err(e) => Err(e),
        };
        match first {
            Ok(action) => self.dispatch(action).await,
            Err(e) => self.fail(e),
        }
    }

    /// Processes one completion.
    async fn handle(&mut self, id: u64, result: Result<ChildOutcome, Stop>, failed: Option<InvocationRecord>) {
        if !self.calls.get(&id).is_some_and(|c| matches!(c.state, CallState::Running(_))) {
            return;
        }
        let Some(done) = self.calls.remove(&id) else { return };
        self.running -= 1;
        let mut done = *done;
        let actor = match &mut done.state {
            CallState::Running(actor) => actor.take(),
            _ => None,
        };
        match actor {
            // Free for the next leaf call, unless it now runs an async agent (which belongs to the run).
            Some(Spawned::Leaf(actor)) => {
                self.children.remove(&actor.get_id());
                if !matches!(result, Ok(ChildOutcome { async_started: true, .. })) {
                    self.idle.push(actor);
                }
            }
            Some(Spawned::Composite(cell)) => {
                self.children.remove(&cell.get_id());
            }
            None => {}
        }
        if self.phase.is_decided() {
            return;
        }
        // A call waiting for a human or drained stays in flight.
        let stays = result.as_ref().is_err_and(Stop::stays);
        if let (Some(j), false) = (&mut self.journaled, stays) {
            j.ended.push(id);
        }
        match result {
            Ok(outcome) => self.complete(id, done.call, done.attempt, outcome, false).await,
            Err(Stop::Suspended(pending)) => {
                done.state = CallState::Suspended { pending, since: self.next_stop() };
                self.calls.insert(id, Box::new(done));
                self.settle_if_idle();
            }
            Err(Stop::Drained) => {
                done.state = CallState::Held { since: self.next_stop() };
                self.calls.insert(id, Box::new(done));
                self.settle_if_idle();
            }
            Err(Stop::Failed(e)) => {
                if let Some(record) = failed
                    && !matches!(e, AgentError::Cancelled)
                    && let Err(journal_error) = Box::pin(self.journal_failed_attempt(&done.call, record)).await
                {
                    return self.fail(journal_error);
                }
                Box::pin(self.recover(id, done, e)).await
            }
        }
    }

    /// After each message: a broken tree fails the actor; a decided result is handed on and the actor stops.
    fn after(&mut self, myself: &ActorRef<SupervisorMsg>) -> Result<(), ActorProcessingErr> {
        match std::mem::replace(&mut self.phase, Phase::Concluded) {
            Phase::Broken(e) => return Err(Box::new(TreeFailed(*e))),
            other => self.phase = other,
        }
        if self.phase.is_running() && self.running == 0 && self.any_held() {
            // Drained with nothing running (e.g. a retry held): nothing else will wake this supervisor.
            self.fail(Stop::Drained);
        }
        match self.phase {
            Phase::Decided(_) => {
                self.conclude();
                myself.stop(None);
            }
            Phase::Concluded if self.running == 0 => myself.stop(None),
            _ => {}
        }
        Ok(())
    }

    /// Hands the decided result on: compensations of a failure first (on a task of their own), then the
    /// invocation's close through the scope actor, which delivers it to the parent.
    fn conclude(&mut self) {
        let (outcome, compensate) = match std::mem::replace(&mut self.phase, Phase::Concluded) {
            Phase::Decided(d) => (d.outcome, d.compensate),
            _ => {
                let e = AgentError::internal(format!("supervisor of `{}` stopped without a result", self.path()));
                (Err(e.into()), false)
            }
        };
        self.abort_all();
        let Some(report) = self.report.take() else { return };
        let run = self.run.clone();
        let deliver: Box<dyn FnOnce() + Send> = match self.invocation.take() {
            Some(invocation) => {
                let result = outcome.map(|(value, write)| {
                    if let (true, true, Some(key)) = (write, self.frame.write_output, &self.inner.spec.output_key) {
                        invocation.ctx.write_on_completion(key.clone(), value.clone());
                    }
                    value
                });
                let closed = invocation.close(&self.agent, result);
                Box::new(move || closed.send(&run, report))
            }
            None => Box::new(move || match report {
                Report::Bare(tx) => {
                    let _ = tx.send(outcome);
                }
                other => {
                    let result = outcome.map(|(output, _)| ChildOutcome { output, ..Default::default() });
                    Delivery { report: other, result, failed: None }.deliver(run.scope.actor());
                }
            }),
        };
        if !compensate {
            return deliver();
        }
        // The compensations are the run actor's: taken, run, then the result handed on, on a task of its own.
        let (run, path) = (self.run.clone(), self.frame.path.clone());
        tokio::spawn(async move {
            let compensations = run.take_compensations(path).await;
            run.compensate(compensations).await;
            deliver();
        });
    }
}

impl Drop for SupervisorState {
    /// Stopped before deciding (the run was cancelled, or a sibling failed): stop the children and undo what
    /// completed below when the composite compensates on errors.
    fn drop(&mut self) {
        self.abort_all();
        if matches!(self.phase, Phase::Concluded | Phase::Decided(_)) || !self.inner.compensate_on_error {
            return;
        }
        // Told to the run's actor before the run closes it: the session waits for the tree to stop first.
        let _ = self.run.scope.tell(ScopeMsg::Compensate(self.path().clone()));
    }
}

/// A call in flight as journaled.
fn call_record(id: u64, c: &AgentCall, attempt: u32) -> CallRecord {
    CallRecord {
        agent: c.agent,
        tag: c.tag,
        bindings: c.bindings.clone(),
        write_output: c.write_output,
        item: c.item,
        attempt,
        id,
    }
}

fn call_of(c: CallRecord) -> AgentCall {
    AgentCall { agent: c.agent, tag: c.tag, bindings: c.bindings, write_output: c.write_output, item: c.item }
}

fn context<'a>(inner: &'a CompositeInner, view: ScopeView, path: &'a str) -> PlanningContext<'a> {
    PlanningContext::new(view, &inner.sub_agents, &inner.spec, path)
}

/// The snapshot a planner decides on: settled (no async production pending) when it reads the state.
/// The view is seen from the composite's invocation: its mapper item's layer and its bound values first.
async fn decision_view(run: &RunHandle, frame: &Frame, reads_state: bool) -> Result<ScopeView, AgentError> {
    let view = run.scope.view_at(frame.layer.as_ref());
    let view =
        if reads_state && view.has_pending() { run.scope.settled().await?.at_item(frame.layer.as_ref()) } else { view };
    Ok(view.with_bindings(frame.bindings.as_ref()))
}

impl SupervisorState {
    fn planning_context(&self) -> PlanningContext<'_> {
        let view = self.run.scope.view_at(self.frame.layer.as_ref()).with_bindings(self.frame.bindings.as_ref());
        context(&self.inner, view, &self.frame.path)
    }

    /// Stops every running call's child (the calls waiting for a human or held stay in flight).
    fn abort_all(&mut self) {
        self.calls.retain(|_, f| match &mut f.state {
            CallState::Running(actor) => {
                if let Some(actor) = actor.take() {
                    actor.cell().kill();
                }
                false
            }
            CallState::Suspended { .. } | CallState::Held { .. } => true,
        });
        self.running = 0;
        self.children.clear();
    }

    /// The next number of a call that stops running without ending.
    fn next_stop(&mut self) -> u64 {
        self.stops += 1;
        self.stops
    }

    /// Whether a call is held by a drain.
    fn any_held(&self) -> bool {
        self.calls.values().any(|c| matches!(c.state, CallState::Held { .. }))
    }

    /// Whether a call waits for a human.
    fn any_suspended(&self) -> bool {
        self.calls.values().any(|c| matches!(c.state, CallState::Suspended { .. }))
    }

    /// Decides the composite's end without a value: `stop` (a failure, or a suspension or drain of its calls).
    fn fail(&mut self, stop: impl Into<Stop>) {
        let stop = stop.into();
        self.abort_all();
        if self.phase.is_running() {
            // Undo what completed below before reporting a failure (not for a suspension or a drain).
            let compensate = self.inner.compensate_on_error && !stop.stays();
            self.phase = Phase::decided(Err(stop), compensate);
        }
    }

    /// The planner panicked: the tree is broken. The actor fails after this message (see the module doc).
    fn planner_panicked(&mut self, message: String) {
        let e = AgentError::Planner {
            agent: self.inner.spec.name.clone(),
            path: self.path().to_string(),
            message: format!("panicked: {message}"),
        };
        tracing::error!(path = %self.path(), "planner panicked: {message}");
        self.abort_all();
        self.phase = Phase::Broken(Box::new(e));
    }

    async fn finish(&mut self, with: Option<Value>) {
        self.abort_all();
        // The result reads the state: wait for async agents still producing keys.
        let view = match self.run.scope.settled().await {
            Ok(v) => v.at_item(self.frame.layer.as_ref()).with_bindings(self.frame.bindings.as_ref()),
            Err(e) => return self.fail(e),
        };
        let result = match (&self.inner.output, with) {
            (Some(f), _) => f(&view).map(|v| (v, true)).map_err(|message| AgentError::Expression {
                agent: self.inner.spec.name.clone(),
                path: self.path().to_string(),
                what: "output".to_string(),
                message,
            }),
            (None, Some(v)) => Ok((v, true)),
            (None, None) => Ok((
                self.inner.spec.output_key.as_ref().and_then(|k| view.get(k)).cloned().unwrap_or(Value::Null),
                false,
            )),
        };
        if self.phase.is_running() {
            self.phase = Phase::decided(result.map_err(Stop::Failed), false);
        }
    }

    /// Reports a decision to the listeners.
    fn report_decision(&self, action: &Action) {
        let listeners = match &self.invocation {
            Some(inv) => inv.ctx.listeners.clone(),
            None => self.frame.listeners.clone(),
        };
        if !self.run.subscribers.observed(&listeners) {
            return;
        }
        let (decision, calls) = match action {
            Action::Call(calls) => {
                ("call", calls.iter().filter_map(|c| self.child_paths.get(c.agent)).map(|p| p.to_string()).collect())
            }
            Action::Done | Action::DoneWith(_) => ("done", Vec::new()),
            _ => ("wait", Vec::new()),
        };
        self.run.subscribers.emit(
            &listeners,
            &RunEvent::PlannerDecision {
                run_id: self.run.run_id.to_string(),
                path: self.path().to_string(),
                calls,
                decision: decision.to_string(),
                rationale: self.planner.rationale(),
            },
        );
    }

    /// Records a decision as an event on the composite's span (`agentic.planner.decision`); its fields are
    /// evaluated only when a subscriber wants the event.
    fn trace_decision(&self, action: &Action) {
        let decision = match action {
            Action::Call(_) => "call",
            Action::Done | Action::DoneWith(_) => "done",
            Action::Nothing => "wait",
        };
        tracing::info!(
            parent: &self.child_span,
            agentic.planner.action = decision,
            agentic.planner.calls = matches!(action, Action::Call(_))
                .then(|| tracing::field::display(CalledPaths(action, &self.child_paths))),
            agentic.planner.rationale = self.planner.rationale().as_deref(),
            "agentic.planner.decision"
        );
    }

    /// Applies an action: start calls, finish, or wait.
    async fn dispatch(&mut self, action: Action) {
        self.trace_decision(&action);
        self.report_decision(&action);
        match action {
            Action::Call(calls) => {
                let mut calls = calls.into_iter();
                loop {
                    // `let … else`, not `for`: its matched temporary would live across the await.
                    let Some(call) = calls.next() else { break };
                    if call.agent >= self.inner.sub_agents.len() {
                        let e = self.planning_context().error(format!(
                            "called sub-agent index {} but there are {}",
                            call.agent,
                            self.inner.sub_agents.len()
                        ));
                        return self.fail(e);
                    }
                    self.spawn_child(call, 1, Duration::ZERO).await;
                }
                if self.running == 0 && self.phase.is_running() {
                    // An empty call list is "nothing to do".
                    self.stalled();
                }
            }
            Action::Done => self.finish(None).await,
            Action::DoneWith(v) => self.finish(Some(v)).await,
            Action::Nothing => {
                if self.running == 0 {
                    self.stalled();
                }
            }
        }
    }

    /// Continues from a checkpoint: restore the planner, then finish, or dispatch the calls that were in flight
    /// and hand the planner the completions it had not consumed.
    async fn resume(&mut self, saved: PlannerState) {
        if let Err(message) = self.planner.restore(saved.state) {
            let e = AgentError::Run {
                run_id: self.run.run_id.to_string(),
                message: format!(
                    "cannot restore the planner of `{}` ({}): {message}",
                    self.inner.spec.name,
                    self.path()
                ),
            };
            return self.fail(e);
        }
        match saved.finished {
            Some(Finish::Done) => return self.finish(None).await,
            Some(Finish::DoneWith(v)) => return self.finish(Some(v)).await,
            None => {}
        }
        for c in saved.inflight {
            if c.agent >= self.inner.sub_agents.len() {
                let e = self.planning_context().error(format!("checkpoint calls unknown sub-agent index {}", c.agent));
                return self.fail(e);
            }
            let attempt = c.attempt;
            self.spawn_child(call_of(c), attempt, Duration::ZERO).await;
        }
        for c in saved.unconsumed {
            if !self.phase.is_running() {
                return;
            }
            let outcome = ChildOutcome { output: c.output, skipped: c.skipped, ..Default::default() };
            let (id, attempt) = (c.call.id, c.call.attempt);
            self.complete(id, call_of(c.call), attempt, outcome, c.substituted).await;
        }
        if self.running == 0 && self.phase.is_running() {
            self.stalled();
        }
    }

    /// When nothing runs any more: with calls held by a drain the composite reports drained (work is left that
    /// needs no human: it wins over a suspension, whose human agents ask again on resume); with only calls
    /// waiting for a human it suspends (its siblings have finished).
    fn settle_if_idle(&mut self) {
        if self.running != 0 {
            return;
        }
        if self.any_held() {
            return self.fail(Stop::Drained);
        }
        if self.any_suspended() {
            // The questions in call order.
            let mut waiting: Vec<(u64, &[PendingResponse])> = self
                .calls
                .iter()
                .filter_map(|(id, c)| match &c.state {
                    CallState::Suspended { pending, .. } => Some((*id, pending.as_slice())),
                    _ => None,
                })
                .collect();
            waiting.sort_by_key(|(id, _)| *id);
            let pending = waiting.into_iter().flat_map(|(_, p)| p.iter().cloned()).collect();
            self.fail(Stop::Suspended(pending));
        }
    }

    /// The calls in flight (including those waiting for a human or held by a drain), plus `new` ones about to
    /// start at `attempt` (numbered as [`SupervisorState::spawn_child`] will number them).
    fn inflight_records(&self, new: &[AgentCall], attempt: u32) -> Vec<CallRecord> {
        // Running calls by number, then those waiting for a human, then those held, each in the order they
        // stopped.
        let mut listed: Vec<((u8, u64), u64, &InFlight)> = self
            .calls
            .iter()
            .map(|(id, f)| {
                let order = match f.state {
                    CallState::Running(_) => (0, *id),
                    CallState::Suspended { since, .. } => (1, since),
                    CallState::Held { since } => (2, since),
                };
                (order, *id, &**f)
            })
            .collect();
        listed.sort_by_key(|(order, _, _)| *order);
        listed
            .into_iter()
            .map(|(_, id, f)| call_record(id, &f.call, f.attempt))
            .chain(new.iter().zip(self.next_id..).map(|(c, id)| call_record(id, c, attempt)))
            .collect()
    }

    /// The calls in flight for this step's record: the whole list at the invocation's first record (or when
    /// it is no longer than the change), else the change since the previous record.
    fn journal_calls(
        &mut self,
        new: &[AgentCall],
        attempt: u32,
        whole: bool,
    ) -> (Vec<CallRecord>, Option<InflightChange>) {
        let announced = self.next_id + new.len() as u64;
        let in_flight = self.calls.len() + new.len();
        let change = match self.journaled.take() {
            Some(j) if !whole && j.started.len() + new.len() + j.ended.len() < in_flight => {
                let mut started = j.started;
                started.extend(new.iter().zip(self.next_id..).map(|(c, id)| call_record(id, c, attempt)));
                Some(InflightChange { started, ended: j.ended })
            }
            _ => None,
        };
        self.journaled = Some(JournaledCalls { announced, ..JournaledCalls::default() });
        match change {
            Some(change) => (Vec::new(), Some(change)),
            None => (self.inflight_records(new, attempt), None),
        }
    }

    fn stalled(&mut self) {
        if self.any_suspended() || self.any_held() {
            return self.settle_if_idle();
        }
        let e = AgentError::PlannerStalled { agent: self.inner.spec.name.clone(), path: self.path().to_string() };
        self.fail(e);
    }

    /// Starts a child: an actor linked to this supervisor. While the run drains, the call is held instead: in
    /// flight for the journal, not started.
    async fn spawn_child(&mut self, call: AgentCall, attempt: u32, delay: Duration) {
        let id = self.next_id;
        self.next_id += 1;
        if let Some(j) = &mut self.journaled
            && id >= j.announced
        {
            j.started.push(call_record(id, &call, attempt));
        }
        if self.run.draining() {
            let since = self.next_stop();
            self.calls.insert(id, Box::new(InFlight { call, attempt, state: CallState::Held { since } }));
            return;
        }
        let agent = self.inner.sub_agents[call.agent].clone();
        let path = self.child_paths[call.agent].clone();
        let frame = self.frame.child(
            path,
            &call,
            attempt,
            self.handler(),
            self.child_listeners.clone(),
            self.child_span.clone(),
        );
        self.calls.insert(id, Box::new(InFlight { call, attempt, state: CallState::Running(None) }));
        self.running += 1;
        let report = Report::Parent { to: self.myself.clone(), id };
        let spawned = if composite_of(&agent).is_none()
            && let Some(actor) = self.idle.pop()
        {
            let call = LeafCall { agent, frame, report, delay };
            match actor.cast(AgentMsg::Invoke(Box::new(call))) {
                Ok(()) => Ok(Spawned::Leaf(actor)),
                Err(_) => Err(AgentError::internal(format!("the agent actor of `{}` stopped", self.path()))),
            }
        } else {
            // Boxed: a spawn waits for the new actor to start, and the state machines above this one keep the
            // size of their largest state for as long as they live.
            Box::pin(spawn_invocation(&agent, &self.run, frame, report, delay, self.myself.get_cell())).await
        };
        match spawned {
            Ok(actor) => {
                self.children.insert(actor.cell().get_id(), id);
                if let Some(f) = self.calls.get_mut(&id) {
                    f.state = CallState::Running(Some(actor));
                }
            }
            Err(e) => self.fail(e),
        }
    }

    /// The scope layer of the invocation of `call` (its mapper item's).
    fn child_item(&self, call: &AgentCall) -> Option<Arc<str>> {
        crate::run_actor::layer_of(self.frame.layer.as_ref(), &self.child_paths[call.agent], call)
    }

    /// The error handler in effect: the composite's own, else the inherited one.
    fn handler(&self) -> Option<Arc<dyn crate::error_handler::ErrorHandler>> {
        self.inner.handler.clone().or_else(|| self.frame.handler.clone())
    }

    /// Journals a failed attempt of sub-agent `agent` (a step that completes nothing: the planner does not
    /// advance; the report shows the attempt and its error).
    async fn journal_failed_attempt(&mut self, call: &AgentCall, record: InvocationRecord) -> Result<(), AgentError> {
        let step = StepRecord {
            invocation: Some(record),
            failed: true,
            item: self.child_item(call).as_deref().map(str::to_string),
            ..StepRecord::new(&*self.run.run_id, 0, &*self.child_paths[call.agent])
        };
        self.run.journal.step(step).await
    }

    /// A child failed: ask the error handler (retry, repair and retry, substitute, or fail).
    async fn recover(&mut self, id: u64, done: InFlight, error: AgentError) {
        let agent = &self.inner.sub_agents[done.call.agent];
        let Some(handler) = self.handler() else { return self.fail(error) };
        let path = self.child_paths[done.call.agent].clone();
        // A composite sharing this handler has offered its sub-agents' failures to it already; a failure of
        // its own (its timeout, its planner, its exit condition), at its own path, has not been offered yet.
        let handled_below = agent.0.inherits_error_handler() && error.agent_path() != Some(&*path);
        if handled_below || matches!(error, AgentError::Cancelled) {
            return self.fail(error);
        }
        let item = self.child_item(&done.call);
        let bindings = crate::run_actor::bindings_of(self.frame.bindings.as_ref(), &done.call);
        let view = self.run.scope.view_at(item.as_ref()).with_bindings(bindings.as_ref());
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
                self.spawn_child(done.call, done.attempt + 1, after).await;
            }
            Recovery::RetryWith { writes, after } if done.attempt <= handler.max_retries() => {
                tracing::debug!(path = %path, attempt = done.attempt, "repairing and retrying after error: {error}");
                if let Err(e) = self.journal_repair(&done, writes).await {
                    return self.fail(e);
                }
                self.spawn_child(done.call, done.attempt + 1, after).await;
            }
            Recovery::Substitute(value) => {
                let mut delta = Vec::new();
                let key = agent.spec().output_key.clone().filter(|_| done.call.write_output);
                if let Some(key) = key {
                    if let Err(e) = self.run.scope.write_in(item.as_ref(), vec![(key.clone(), value.clone())]).await {
                        return self.fail(e);
                    }
                    merge_delta(&mut delta, key, value.clone());
                }
                let outcome = ChildOutcome { output: value, delta, ..Default::default() };
                self.complete(id, done.call, done.attempt, outcome, true).await;
            }
            Recovery::Retry { .. } | Recovery::RetryWith { .. } | Recovery::Fail => self.fail(error),
        }
    }

    /// Writes a handler's repair to the scope and journals it with the retried call in flight (a step of the
    /// failed agent's path whose delta is the repair), so a resumed run retries without asking the handler
    /// again.
    async fn journal_repair(&mut self, done: &InFlight, writes: Vec<(String, Value)>) -> Result<(), AgentError> {
        let item = self.child_item(&done.call);
        if !writes.is_empty() {
            self.run.scope.write_in(item.as_ref(), writes.clone()).await?;
        }
        if !self.run.journal.enabled() {
            return Ok(());
        }
        let whole = self.journaled.is_none();
        let state_patch = if whole { None } else { Some(Value::Array(Vec::new())) };
        let state = if whole { self.planner.execution_state() } else { Value::Null };
        let (inflight, inflight_change) = self.journal_calls(std::slice::from_ref(&done.call), done.attempt + 1, whole);
        let record = StepRecord {
            run_id: self.run.run_id.to_string(),
            // Numbered by `journal_step`.
            seq: 0,
            agent_path: self.child_paths[done.call.agent].to_string(),
            delta: writes,
            planner_states: vec![PlannerState {
                path: self.path().to_string(),
                item: self.frame.layer.as_deref().map(str::to_string),
                state,
                inflight,
                state_patch,
                inflight_change,
                finished: None,
                rationale: None,
                unconsumed: Vec::new(),
            }],
            invocation: None,
            async_started: false,
            failed: false,
            item: item.as_deref().map(str::to_string),
            item_end: false,
            bindings: None,
            calls: Vec::new(),
        };
        self.run.journal.step(record).await
    }

    /// A child completed: ask the planner, journal the step, dispatch the next action.
    async fn complete(&mut self, id: u64, call: AgentCall, attempt: u32, mut outcome: ChildOutcome, substituted: bool) {
        // Dropped (the completion goes on) unless the start's step is journaled below.
        let start_journaled = outcome.start_journaled.take();
        let agent_index = call.agent;
        let journaling = self.run.journal.enabled();
        // A mapped call serves one item: its completion ends the item's layer.
        let (child_item, item_end) = (self.child_item(&call), call.item);
        if let (true, Some(item)) = (item_end, &child_item) {
            let _ = self.run.scope.tell(ScopeMsg::DropLayers(item.clone()));
        }
        // The planner's state before this completion, when no record of this invocation holds it yet: what a
        // panicking planner's journal record needs.
        let before = (journaling && self.journaled.is_none()).then(|| self.planner.execution_state());
        if journaling {
            self.unconsumed.push(CompletionRecord {
                call: call_record(id, &call, attempt),
                output: outcome.output.clone(),
                skipped: outcome.skipped,
                substituted,
            });
        }
        // An async agent's start journals the values bound to it: a resume restarts it in its item.
        let bindings = if journaling && outcome.async_started {
            crate::run_actor::bindings_of(self.frame.bindings.as_ref(), &call).map(|b| (*b).clone())
        } else {
            None
        };
        let completion = Completion { call, output: outcome.output, skipped: outcome.skipped, substituted };
        let action = match decision_view(&self.run, &self.frame, self.planner.reads_state()).await {
            Ok(view) => {
                let ctx = context(&self.inner, view, &self.frame.path);
                let planner = &mut self.planner;
                match std::panic::catch_unwind(AssertUnwindSafe(|| planner.next_action(&ctx, &completion))) {
                    Ok(action) => action,
                    Err(panic) => {
                        let message = panic_message(panic.as_ref());
                        if journaling {
                            let ends = (child_item.clone(), item_end);
                            let kept = (outcome.delta, outcome.record, outcome.calls);
                            let record = self.unconsumed_record(agent_index, kept, before, ends);
                            if let Err(e) = Box::pin(self.run.journal.step(record)).await {
                                tracing::error!(path = %self.path(), "journal write failed: {e}");
                            }
                        }
                        return self.planner_panicked(message);
                    }
                }
            }
            Err(e) => Err(e),
        };
        self.unconsumed.clear();
        if journaling {
            let (new_calls, finished) = match &action {
                Ok(Action::Call(calls)) => (calls.as_slice(), None),
                Ok(Action::Done) => (&[][..], Some(Finish::Done)),
                Ok(Action::DoneWith(v)) => (&[][..], Some(Finish::DoneWith(v.clone()))),
                _ => (&[][..], None),
            };
            // After a failed decision the planner's own account of its change may not hold: journal it whole.
            let whole = action.is_err();
            let state_patch =
                if self.journaled.is_some() && !whole { self.planner.execution_state_patch() } else { None };
            let state = if state_patch.is_some() { Value::Null } else { self.planner.execution_state() };
            let (inflight, inflight_change) = self.journal_calls(new_calls, 1, whole);
            // The root's last step, with nothing running after it (an async agent's start, this one's too, is
            // tracked before it is reported): the run's final flush commits it.
            let before_end =
                finished.is_some() && self.frame.is_root() && self.running == 0 && self.run.no_async_started();
            let record = StepRecord {
                run_id: self.run.run_id.to_string(),
                // Numbered by `journal_step`.
                seq: 0,
                agent_path: self.child_paths[agent_index].to_string(),
                delta: outcome.delta,
                planner_states: vec![PlannerState {
                    path: self.path().to_string(),
                    item: self.frame.layer.as_deref().map(str::to_string),
                    state,
                    inflight,
                    state_patch,
                    inflight_change,
                    finished,
                    rationale: self.planner.rationale(),
                    unconsumed: Vec::new(),
                }],
                invocation: outcome.record,
                async_started: outcome.async_started,
                failed: false,
                item: child_item.as_deref().map(str::to_string),
                item_end,
                bindings,
                calls: outcome.calls,
            };
            let journaled = if before_end {
                self.run.journal.step_before_end(record).await
            } else {
                self.run.journal.step(record).await
            };
            if let Err(e) = journaled {
                return self.fail(e);
            }
            if let Some(tell) = start_journaled {
                let _ = tell.send(());
            }
        }
        match action {
            Ok(action) => self.dispatch(action).await,
            Err(e) => self.fail(e),
        }
    }

    /// The record of a completion the planner panicked on: the child's step (its writes, its invocation) with
    /// the planner's state unchanged and the completion kept as not consumed, for the restart to hand over.
    fn unconsumed_record(
        &mut self,
        agent_index: usize,
        (delta, invocation, calls): (Vec<(String, Value)>, Option<InvocationRecord>, Vec<crate::tool_call::CallEntry>),
        before: Option<Value>,
        (item, item_end): (Option<Arc<str>>, bool),
    ) -> StepRecord {
        let whole = before.is_some();
        let (inflight, inflight_change) = self.journal_calls(&[], 1, whole);
        StepRecord {
            run_id: self.run.run_id.to_string(),
            // Numbered by `journal_step`.
            seq: 0,
            agent_path: self.child_paths[agent_index].to_string(),
            delta,
            planner_states: vec![PlannerState {
                path: self.path().to_string(),
                item: self.frame.layer.as_deref().map(str::to_string),
                state_patch: if whole { None } else { Some(Value::Array(Vec::new())) },
                state: before.unwrap_or(Value::Null),
                inflight,
                inflight_change,
                finished: None,
                rationale: None,
                unconsumed: self.unconsumed.clone(),
            }],
            invocation,
            async_started: false,
            failed: false,
            item: item.as_deref().map(str::to_string),
            item_end,
            bindings: None,
            calls,
        }
    }
}

/// The paths of the sub-agents a call action calls, comma-separated, for the decision event.
struct CalledPaths<'a>(&'a Action, &'a [Arc<str>]);

impl std::fmt::Display for CalledPaths<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Action::Call(calls) = self.0 else { return Ok(()) };
        for (i, path) in calls.iter().filter_map(|c| self.1.get(c.agent)).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(path)?;
        }
        Ok(())
    }
}
