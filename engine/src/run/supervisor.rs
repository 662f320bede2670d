//! The supervisor: one planner actor per composite invocation ([`supervise`]). It drives the planner, runs the
//! agents of each action concurrently as tasks it owns, reports every completion to the planner one at a time
//! (its mailbox serialises them), applies the error handler, journals each step before dispatching the next,
//! and never busy-waits: "nothing to do" with nothing in flight is [`AgentError::PlannerStalled`].
//!
//! The actor is hosted by the composite's invocation future (its state and mailbox live there) instead of a
//! task of its own: the invoker waited for its result anyway, and a hosted actor costs no task, no mailbox
//! preallocation and no message boxing (docs/architecture.md §2). Children are tokio tasks: a leaf invocation
//! needs no mailbox. Aborting a child task drops its future, which drops a nested composite's supervisor and
//! aborts its children in turn, so cancellation cascades down the tree.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Map, Value};
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
use crate::store::{CallRecord, Finish, InflightChange, PlannerState, StepRecord};

pub(crate) struct SupervisorArgs {
    pub(crate) inner: Arc<CompositeInner>,
    pub(crate) run: Arc<RunContext>,
    pub(crate) path: Arc<str>,
    pub(crate) handler: Option<Arc<dyn ErrorHandler>>,
    /// Call bindings of the composite's own invocation, inherited by its sub-agents.
    pub(crate) bindings: Option<Arc<Map<String, Value>>>,
    /// The mapper item of the composite's own invocation, inherited by its sub-agents.
    pub(crate) item: Option<Arc<str>>,
    /// Listeners of the composite's own invocation (they see its planner decisions).
    pub(crate) listeners: Arc<[ListenerRef]>,
    /// Listeners its sub-agents inherit.
    pub(crate) child_listeners: Arc<[ListenerRef]>,
    /// The composite's invocation span: its children's spans nest under it.
    pub(crate) span: tracing::Span,
}

/// The sending side of a supervisor's mailbox (children's tasks report through it).
type Mailbox = futures::channel::mpsc::UnboundedSender<SupervisorMsg>;

pub(crate) enum SupervisorMsg {
    /// A child finished; `failed` is the record of a failed invocation when the run is journaled.
    ChildDone { id: u64, result: Result<ChildOutcome, AgentError>, failed: Option<InvocationRecord> },
}

struct InFlight {
    call: AgentCall,
    attempt: u32,
    /// The child's task; `None` for the child that runs inline, in the supervisor's own future.
    abort: Option<AbortHandle>,
}

/// A child invocation, ready to run: it ends with the message its completion sends the supervisor.
type ChildRun = Pin<Box<dyn Future<Output = SupervisorMsg> + Send>>;

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

pub(crate) struct SupervisorState {
    inner: Arc<CompositeInner>,
    run: Arc<RunContext>,
    path: Arc<str>,
    child_paths: Vec<Arc<str>>,
    handler: Option<Arc<dyn ErrorHandler>>,
    bindings: Option<Arc<Map<String, Value>>>,
    item: Option<Arc<str>>,
    listeners: Arc<[ListenerRef]>,
    child_listeners: Arc<[ListenerRef]>,
    span: tracing::Span,
    planner: Box<dyn Planner>,
    /// Keyed by call number; foldhash, as the hashing of a call number by SipHash cost more than the lookup.
    inflight: HashMap<u64, InFlight, foldhash::fast::RandomState>,
    /// Calls waiting for a human (their number, the call, the attempt).
    suspended: Vec<(u64, AgentCall, u32)>,
    /// The questions of the calls waiting for a human, with the call's number: reported in call order (a
    /// mapper's items in item order), not in the order the calls happened to finish.
    pending: Vec<(u64, PendingResponse)>,
    next_id: u64,
    /// The one child to run inline next (see [`SupervisorState::spawn_child`]).
    inline: Option<ChildRun>,
    /// What the journal knows of the calls in flight: `None` until this invocation journaled a whole record
    /// (then the steps after journal changes to it), and the changes since the last record.
    journaled: Option<JournaledCalls>,
    mailbox: Mailbox,
    /// The composite's result once decided (the first decision wins; later completions are ignored).
    outcome: Option<Result<(Value, bool), AgentError>>,
    /// Whether the decided failure runs the compensations of what completed below.
    compensate: bool,
    /// Set once the result was handed to the caller (dropping the state then undoes nothing).
    concluded: bool,
}

impl SupervisorState {
    fn new(args: SupervisorArgs, mailbox: Mailbox) -> Self {
        let mut index = itoa::Buffer::new();
        let child_paths = (0..args.inner.sub_agents.len())
            .map(|i| Arc::from([&*args.path, "/", index.format(i)].concat().as_str()))
            .collect();
        SupervisorState {
            planner: (args.inner.factory)(),
            inner: args.inner,
            run: args.run,
            path: args.path,
            child_paths,
            handler: args.handler,
            bindings: args.bindings,
            item: args.item,
            listeners: args.listeners,
            child_listeners: args.child_listeners,
            span: args.span,
            inflight: HashMap::default(),
            suspended: Vec::new(),
            pending: Vec::new(),
            next_id: 0,
            inline: None,
            journaled: None,
            mailbox,
            outcome: None,
            compensate: false,
            concluded: false,
        }
    }

    /// Restores the planner from a checkpoint, or asks it for its first action.
    async fn start(&mut self) {
        if let Some(saved) = self.run.take_restore(&self.path) {
            // Boxed: a rare path whose future would otherwise widen the supervisor's for every composite.
            return Box::pin(self.resume(saved)).await;
        }
        let first = match decision_view(&self.run, self.planner.reads_state()).await {
            Ok(view) => {
                let ctx = context(&self.inner, view, &self.path);
                let planner = &mut self.planner;
                planner.init(&ctx).and_then(|()| planner.first_action(&ctx))
            }
            Err(e) => Err(e),
        };
        match first {
            Ok(action) => self.dispatch(action).await,
            Err(e) => self.fail(e),
        }
    }

    /// Processes one message of the mailbox.
    async fn handle(&mut self, msg: SupervisorMsg) {
        let SupervisorMsg::ChildDone { id, result, failed } = msg;
        let Some(done) = self.inflight.remove(&id) else { return };
        if self.outcome.is_some() {
            return;
        }
        if let (Some(j), false) = (&mut self.journaled, matches!(result, Err(AgentError::Suspended { .. }))) {
            j.ended.push(id);
        }
        match result {
            Ok(outcome) => self.complete(done.call, outcome, false).await,
            Err(AgentError::Suspended { pending }) => {
                self.suspended.push((id, done.call, done.attempt));
                self.pending.extend(pending.into_iter().map(|p| (id, p)));
                self.suspend_if_idle();
            }
            Err(e) => {
                if let Some(record) = failed
                    && !matches!(e, AgentError::Cancelled)
                    && let Err(journal_error) = Box::pin(self.journal_failed_attempt(done.call.agent, record)).await
                {
                    return self.fail(journal_error);
                }
                Box::pin(self.recover(done, e)).await
            }
        }
    }

    /// The composite's result, once decided: compensations of a failure run first (on a task of their own, so
    /// they complete even when the caller stops waiting).
    async fn conclude(&mut self) -> Result<(Value, bool), AgentError> {
        let outcome = self.outcome.take().unwrap_or_else(|| {
            Err(AgentError::internal(format!("supervisor of `{}` stopped without a result", self.path)))
        });
        if self.compensate {
            let (run, path) = (self.run.clone(), self.path.clone());
            let _ = tokio::spawn(async move { run.compensate(run.take_compensations(&path)).await }).await;
        }
        self.concluded = true;
        outcome
    }
}

impl Drop for SupervisorState {
    /// Dropped before deciding (the caller was cancelled, or a sibling failed): stop the children and undo what
    /// completed below when the composite compensates on errors.
    fn drop(&mut self) {
        self.abort_all();
        if self.concluded || self.outcome.is_some() || !self.inner.compensate_on_error {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (run, path) = (self.run.clone(), self.path.clone());
            rt.spawn(async move { run.compensate(run.take_compensations(&path)).await });
        }
    }
}

/// Runs the supervisor of one composite invocation to its result: the planner's first action, then one
/// mailbox message (a child's completion) at a time until the planner is done, fails, stalls or suspends.
///
/// The supervisor is an actor hosted by the invoking future rather than a task of its own: its mailbox is an
/// unbounded channel the children's tasks send to, its state is owned by this future, and dropping the future
/// (cancellation) aborts the children. No extra task, no mailbox preallocation: a composite costs a few hundred
/// bytes while it runs.
pub(crate) async fn supervise(args: SupervisorArgs) -> Result<(Value, bool), AgentError> {
    let (mailbox, mut messages) = futures::channel::mpsc::unbounded();
    let mut state = SupervisorState::new(args, mailbox);
    // `start` and `handle` are boxed while they run: inline, the largest of them would be reserved in this
    // future for the whole invocation, though it is idle in the mailbox wait almost all the time.
    Box::pin(state.start()).await;
    while state.outcome.is_none() {
        // A loop of inline steps that never wait (compute agents) would otherwise never yield: spend the
        // task's cooperative budget, so that it yields every so often and a timeout, a cancellation or a
        // failing sibling's abort is seen.
        tokio::task::coop::consume_budget().await;
        let msg = match state.inline.take() {
            Some(child) => child.await,
            // The state holds a sender, so the channel never closes while we wait.
            None => match messages.next().await {
                Some(msg) => msg,
                None => break,
            },
        };
        Box::pin(state.handle(msg)).await;
    }
    state.conclude().await
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
        self.inline = None;
        for (_, f) in self.inflight.drain() {
            if let Some(abort) = f.abort {
                abort.abort();
            }
        }
    }

    fn fail(&mut self, error: AgentError) {
        self.abort_all();
        if self.outcome.is_none() {
            // Undo what completed below before reporting the failure (not for a suspension).
            self.compensate = self.inner.compensate_on_error && !matches!(error, AgentError::Suspended { .. });
            self.outcome = Some(Err(error));
        }
    }

    async fn finish(&mut self, with: Option<Value>) {
        self.abort_all();
        // The result reads the state: wait for async agents still producing keys.
        let view = match self.run.scope.settled().await {
            Ok(v) => v,
            Err(e) => return self.fail(e),
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
        if self.outcome.is_none() {
            self.outcome = Some(result);
        }
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
    async fn dispatch(&mut self, action: Action) {
        self.report_decision(&action);
        match action {
            Action::Call(calls) => {
                // A single call with nothing else running (a sequence, a loop) runs inline.
                let alone = calls.len() == 1 && self.inflight.is_empty();
                for call in calls {
                    if call.agent >= self.inner.sub_agents.len() {
                        let e = self.planning_context().error(format!(
                            "called sub-agent index {} but there are {}",
                            call.agent,
                            self.inner.sub_agents.len()
                        ));
                        return self.fail(e);
                    }
                    self.spawn_child(call, 1, Duration::ZERO, alone);
                }
                if self.inflight.is_empty() {
                    // An empty call list is "nothing to do".
                    self.stalled();
                }
            }
            Action::Done => self.finish(None).await,
            Action::DoneWith(v) => self.finish(Some(v)).await,
            Action::Nothing => {
                if self.inflight.is_empty() {
                    self.stalled();
                }
            }
        }
    }

    /// Continues from a checkpoint: restore the planner, then finish or dispatch the calls that were in flight.
    async fn resume(&mut self, saved: PlannerState) {
        if let Err(message) = self.planner.restore(saved.state) {
            let e = AgentError::Run {
                run_id: self.run.run_id.to_string(),
                message: format!("cannot restore the planner of `{}` ({}): {message}", self.inner.spec.name, self.path),
            };
            return self.fail(e);
        }
        match saved.finished {
            Some(Finish::Done) => return self.finish(None).await,
            Some(Finish::DoneWith(v)) => return self.finish(Some(v)).await,
            None => {}
        }
        let alone = saved.inflight.len() == 1 && self.inflight.is_empty();
        for c in saved.inflight {
            if c.agent >= self.inner.sub_agents.len() {
                let e = self.planning_context().error(format!("checkpoint calls unknown sub-agent index {}", c.agent));
                return self.fail(e);
            }
            let call = AgentCall {
                agent: c.agent,
                tag: c.tag,
                bindings: c.bindings,
                write_output: c.write_output,
                item: c.item,
            };
            self.spawn_child(call, c.attempt, Duration::ZERO, alone);
        }
        if self.inflight.is_empty() {
            self.stalled();
        }
    }

    /// When only calls waiting for a human remain, the composite suspends (its siblings have finished).
    fn suspend_if_idle(&mut self) {
        if self.inflight.is_empty() && !self.suspended.is_empty() {
            let mut pending = std::mem::take(&mut self.pending);
            pending.sort_by_key(|(id, _)| *id);
            self.fail(AgentError::Suspended { pending: pending.into_iter().map(|(_, p)| p).collect() });
        }
    }

    /// The calls in flight (including those waiting for a human), plus `new` ones about to start (numbered
    /// as [`SupervisorState::spawn_child`] will number them).
    fn inflight_records(&self, new: Option<&[AgentCall]>) -> Vec<CallRecord> {
        let mut running: Vec<(&u64, &InFlight)> = self.inflight.iter().collect();
        running.sort_by_key(|(id, _)| **id);
        running
            .into_iter()
            .map(|(id, f)| call_record(*id, &f.call, f.attempt))
            .chain(self.suspended.iter().map(|(id, c, a)| call_record(*id, c, *a)))
            .chain(new.unwrap_or_default().iter().zip(self.next_id..).map(|(c, id)| call_record(id, c, 1)))
            .collect()
    }

    /// The calls in flight for this step's record: the whole list at the invocation's first record (or when
    /// it is no longer than the change), else the change since the previous record. Either way, the journal
    /// then knows every call up to the `new` ones.
    fn journal_calls(&mut self, new: Option<&[AgentCall]>, whole: bool) -> (Vec<CallRecord>, Option<InflightChange>) {
        let new_calls = new.unwrap_or_default();
        let announced = self.next_id + new_calls.len() as u64;
        let in_flight = self.inflight.len() + self.suspended.len() + new_calls.len();
        let change = match self.journaled.take() {
            Some(j) if !whole && j.started.len() + new_calls.len() + j.ended.len() < in_flight => {
                let mut started = j.started;
                started.extend(new_calls.iter().zip(self.next_id..).map(|(c, id)| call_record(id, c, 1)));
                Some(InflightChange { started, ended: j.ended })
            }
            _ => None,
        };
        self.journaled = Some(JournaledCalls { announced, ..JournaledCalls::default() });
        match change {
            Some(change) => (Vec::new(), Some(change)),
            None => (self.inflight_records(new), None),
        }
    }

    fn stalled(&mut self) {
        if !self.suspended.is_empty() {
            return self.suspend_if_idle();
        }
        let e = AgentError::PlannerStalled { agent: self.inner.spec.name.clone(), path: self.path.to_string() };
        self.fail(e);
    }

    /// Starts a child: on a task of its own, or, when it is `alone` (the only call the supervisor will wait
    /// for), inline: the supervisor's loop runs it in its own future next. Inline saves the task and the wake
    /// of another worker per step of a sequence; the supervisor has nothing else to do meanwhile, and
    /// dropping its future (cancellation) drops the child with it, as aborting its task would.
    fn spawn_child(&mut self, call: AgentCall, attempt: u32, delay: Duration, alone: bool) {
        let id = self.next_id;
        self.next_id += 1;
        let agent = self.inner.sub_agents[call.agent].clone();
        let path = self.child_paths[call.agent].clone();
        let run = self.run.clone();
        let handler = self.handler.clone();
        let listeners = self.child_listeners.clone();
        let me = self.mailbox.clone();
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
        // A mapper's call serves one item: `#<tag>` after the inherited item.
        let item = if call.item {
            let mut tag = itoa::Buffer::new();
            Some(Arc::from([self.item.as_deref().unwrap_or(""), "#", tag.format(call.tag)].concat().as_str()))
        } else {
            self.item.clone()
        };
        if let Some(j) = &mut self.journaled
            && id >= j.announced
        {
            j.started.push(call_record(id, &call, attempt));
        }
        let write_output = call.write_output;
        let span = self.span.clone();
        let journaling = self.run.journaling();
        let child = async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            // Lives in this future (boxed): no allocation of its own.
            let slot = FailedSlot::default();
            let opts = InvokeOptions {
                bindings: bindings.as_ref(),
                item,
                allow_async: true,
                write_output,
                attempt,
                handler,
                listeners,
                failed_record: journaling.then_some(&slot),
            };
            let result = invoke_agent(&agent, &run, path, opts).await;
            let failed = slot.lock().ok().and_then(|mut r| r.take());
            SupervisorMsg::ChildDone { id, result, failed }
        }
        .instrument(span);
        if alone && self.inline.is_none() {
            // Boxed: the invocation future is large.
            self.inline = Some(Box::pin(child));
            self.inflight.insert(id, InFlight { call, attempt, abort: None });
            return;
        }
        // Boxed: the invocation future is large, and tokio moves a spawned future several times.
        let task = tokio::spawn(Box::pin(async move {
            let _ = me.unbounded_send(child.await);
        }));
        self.inflight.insert(id, InFlight { call, attempt, abort: Some(task.abort_handle()) });
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
    async fn recover(&mut self, done: InFlight, error: AgentError) {
        let agent = &self.inner.sub_agents[done.call.agent];
        let Some(handler) = self.handler.clone() else { return self.fail(error) };
        let path = self.child_paths[done.call.agent].clone();
        // A composite sharing this handler has offered its sub-agents' failures to it already; a failure of
        // its own (its timeout, its planner, its exit condition), at its own path, has not been offered yet.
        let handled_below = agent.0.inherits_error_handler() && error.agent_path() != Some(&*path);
        if handled_below || matches!(error, AgentError::Cancelled) {
            return self.fail(error);
        }
        let view = self.run.scope.view();
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
                let alone = self.inflight.is_empty();
                self.spawn_child(done.call, done.attempt + 1, after, alone);
            }
            Recovery::RetryWith { writes, after } if done.attempt <= handler.max_retries() => {
                if let Err(e) = self.run.scope.write(writes).await {
                    return self.fail(e);
                }
                let alone = self.inflight.is_empty();
                self.spawn_child(done.call, done.attempt + 1, after, alone);
            }
            Recovery::Substitute(value) => {
                let mut delta = Vec::new();
                let key = agent.spec().output_key.clone().filter(|_| done.call.write_output);
                if let Some(key) = key {
                    if let Err(e) = self.run.scope.write(vec![(key.clone(), value.clone())]).await {
                        return self.fail(e);
                    }
                    merge_delta(&mut delta, key, value.clone());
                }
                let outcome = ChildOutcome { output: value, delta, ..Default::default() };
                self.complete(done.call, outcome, true).await;
            }
            Recovery::Retry { .. } | Recovery::RetryWith { .. } | Recovery::Fail => self.fail(error),
        }
    }

    /// A child completed: ask the planner, journal the step, dispatch the next action.
    async fn complete(&mut self, call: AgentCall, outcome: ChildOutcome, substituted: bool) {
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
            // After a failed decision the planner's own account of its change may not hold: journal it whole.
            let whole = action.is_err();
            let state_patch =
                if self.journaled.is_some() && !whole { self.planner.execution_state_patch() } else { None };
            let state = if state_patch.is_some() { Value::Null } else { self.planner.execution_state() };
            let (inflight, inflight_change) = self.journal_calls(new_calls, whole);
            let record = StepRecord {
                run_id: self.run.run_id.to_string(),
                seq: self.run.next_seq(),
                agent_path: self.child_paths[agent_index].to_string(),
                delta: outcome.delta,
                planner_states: vec![PlannerState {
                    path: self.path.to_string(),
                    state,
                    inflight,
                    state_patch,
                    inflight_change,
                    finished,
                    rationale: self.planner.rationale(),
                }],
                invocation: outcome.record,
                async_started: outcome.async_started,
                failed: false,
            };
            if let Err(e) = self.run.journal_step(record).await {
                return self.fail(e);
            }
        }
        match action {
            Ok(action) => self.dispatch(action).await,
            Err(e) => self.fail(e),
        }
    }
}
