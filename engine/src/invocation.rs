//! The [`InvocationContext`] an agent runs with: its resolved inputs, the run's scope and identity, and what
//! an invocation asks of its run (writes, human answers, budgets, a model endpoint's capacity, events).

use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::AgentError;
use crate::journal::TokenUsage;
use crate::lock::lock;
use crate::run_actor::ScopeHandle;
use crate::run_actor::{Frame, RunContext};
use crate::scope::{ScopeView, merge_delta};
use crate::stop::Stop;

/// How long a concurrency slot of a model endpoint is held at most when its call never gives it back (the
/// process died): 10 minutes, longer than any model call's timeout.
const SLOT_EXPIRY_MS: u64 = 600_000;

/// Everything an invocation runs with: its resolved inputs, the run's scope and identity.
pub struct InvocationContext {
    pub(crate) run: Arc<RunContext>,
    pub(crate) name: Arc<str>,
    pub(crate) inputs: Map<String, Value>,
    /// Path, bindings, mapper item, attempt, error handler: what the supervisor handed down.
    pub(crate) frame: Frame,
    /// The actor running this invocation (a composite invoked as a plain agent links its supervisor to it).
    pub(crate) actor: Option<ractor::ActorCell>,
    /// The invocation's writes, kept for its step record (or, for an async agent, to apply when it ends);
    /// only when [`InvocationContext::keep_writes`] (a run without a journal needs no copy of them).
    pub(crate) writes: Mutex<Vec<(String, Value)>>,
    /// Whether `writes` is kept: the run is journaled or the agent runs asynchronously.
    pub(crate) keep_writes: bool,
    /// Writes the scope receives with the outcome ([`InvocationContext::write_on_completion`]).
    pub(crate) deferred: Mutex<Vec<(String, Value)>>,
    /// Its model calls: tokens, usage, and what a budget suspension keeps.
    pub(crate) usage: Mutex<Option<Box<crate::budget::InvocationUsage>>>,
    /// Listeners in effect for this invocation (inherited ones, then the agent's own).
    pub(crate) listeners: Arc<[crate::listener::ListenerRef]>,
    /// Listeners the sub-agents of a composite inherit.
    pub(crate) child_listeners: Arc<[crate::listener::ListenerRef]>,
    /// How many invocations of this agent at this path and item completed before it, once asked
    /// ([`InvocationContext::idempotency_key`]).
    pub(crate) occurrence: std::sync::OnceLock<u32>,
}

impl InvocationContext {
    /// The context of one invocation of agent `name` in `run`, with its resolved `inputs`, its `frame` and the
    /// actor running it; `keep_writes` when its writes are kept for its step record (a journaled run, an async
    /// agent).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        run: Arc<RunContext>,
        name: Arc<str>,
        inputs: Map<String, Value>,
        frame: Frame,
        actor: Option<ractor::ActorCell>,
        keep_writes: bool,
        listeners: Arc<[crate::listener::ListenerRef]>,
        child_listeners: Arc<[crate::listener::ListenerRef]>,
    ) -> Self {
        InvocationContext {
            run,
            name,
            inputs,
            frame,
            actor,
            writes: Mutex::new(Vec::new()),
            keep_writes,
            deferred: Mutex::new(Vec::new()),
            usage: Mutex::new(None),
            listeners,
            child_listeners,
            occurrence: std::sync::OnceLock::new(),
        }
    }

    /// The resolved (coerced) value of input `key`.
    pub fn input(&self, key: &str) -> Option<&Value> {
        self.inputs.get(key)
    }

    /// Input `key` deserialised to `T`.
    ///
    /// # Errors
    /// [`AgentError::Coercion`] when absent or not deserialisable, naming the key.
    pub fn input_as<T: DeserializeOwned>(&self, key: &str) -> Result<T, AgentError> {
        self.read_as(key, self.inputs.get(key))
    }

    /// `value` (read for `key`; absent: `null`) deserialised to `T`, or the coercion error naming this
    /// invocation and the key.
    pub(crate) fn read_as<T: DeserializeOwned>(&self, key: &str, value: Option<&Value>) -> Result<T, AgentError> {
        let v = value.cloned().unwrap_or(Value::Null);
        T::deserialize(&v).map_err(|e| AgentError::Coercion {
            agent: self.name.to_string(),
            path: self.frame.path.to_string(),
            key: key.to_string(),
            value: v.to_string(),
            expected: format!("{} ({e})", std::any::type_name::<T>()),
        })
    }

    /// All resolved inputs.
    pub fn inputs(&self) -> &Map<String, Value> {
        &self.inputs
    }

    /// A snapshot of the whole state, seen from this invocation's mapper item when it serves one (the item's
    /// own writes first, then the shared state).
    pub fn view(&self) -> ScopeView {
        self.run.scope.view_at(self.frame.layer.as_ref())
    }

    /// The run's scope. Its writes go to the shared state, even inside a mapper item: write through
    /// [`InvocationContext::write`] to keep them in the item.
    pub fn scope(&self) -> &ScopeHandle {
        &self.run.scope
    }

    /// Writes `key` = `value` now (recorded in this step's state delta; inside a mapper item, in the item's
    /// layer). Prefer returning the result and letting the engine write `output_key`.
    ///
    /// # Errors
    /// None today (kept fallible for scopes kept elsewhere).
    pub async fn write(&self, key: impl Into<String>, value: Value) -> Result<(), AgentError> {
        let key = key.into();
        let item = self.frame.layer.as_ref();
        if !self.keep_writes {
            self.run.scope.write_in(item, vec![(key, value)]).await?;
            return Ok(());
        }
        self.run.scope.write_in(item, vec![(key.clone(), value.clone())]).await?;
        merge_delta(&mut lock(&self.writes), key, value);
        Ok(())
    }

    /// Writes `value` to the state under `key` when this invocation ends, in the same request to the scope as
    /// its output (one lock and one published snapshot fewer than [`InvocationContext::write`]), and journals
    /// it with the step like any write. For values nothing reads before this agent returns: the scope and
    /// every other agent see it once the invocation has completed or failed (not when it suspends).
    pub fn write_on_completion(&self, key: impl Into<String>, value: Value) {
        let key = key.into();
        if self.keep_writes {
            merge_delta(&mut lock(&self.writes), key.clone(), value.clone());
        }
        merge_delta(&mut lock(&self.deferred), key, value);
    }

    /// Records this agent's last exchange (user message and answer) in the conversation context, as the
    /// state key `_context.<agent>`, written with the invocation's output when it ends
    /// ([`InvocationContext::write_on_completion`]) and journaled with this step.
    ///
    /// # Errors
    /// None today; kept fallible so that a context store of another kind can report one.
    pub async fn set_context(&self, user: &str, answer: &str) -> Result<(), AgentError> {
        let key = [crate::scope::CONTEXT_PREFIX, &self.name].concat();
        let at_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        self.write_on_completion(key, serde_json::json!({ "user": user, "answer": answer, "at_us": at_us }));
        Ok(())
    }

    /// Declares how to undo an action this invocation completed (e.g. a tool call with side effects). When
    /// a composite with `compensate_on_error` above this agent fails or is cancelled, the compensations of
    /// every completed action below it run in reverse order, best effort.
    pub fn add_compensation(
        &self,
        name: impl Into<String>,
        undo: impl FnOnce() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + 'static,
    ) {
        self.run.add_compensation(crate::run_actor::Compensation {
            path: self.frame.path.clone(),
            agent: self.name.to_string(),
            name: name.into(),
            action: Box::new(undo),
        });
    }

    /// The run id (memory id).
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The W3C `traceparent` the run was started under ([`crate::InvokeRequest::traceparent`]), if any: what an
    /// agent's outgoing request carries when there is no OpenTelemetry context of its own
    /// ([`crate::current_traceparent`] is `None`).
    pub fn run_traceparent(&self) -> Option<&str> {
        self.run.traceparent.as_deref()
    }

    /// How many steps of the run are journaled so far: forking the run at this number (`agentic fork RUN --at
    /// N`) gives a copy that runs this invocation again, afresh.
    pub fn journaled_steps(&self) -> u64 {
        self.run.journal.last_seq()
    }

    /// The agent's stable path id.
    pub fn path(&self) -> &str {
        &self.frame.path
    }

    /// The agent's name.
    pub fn agent_name(&self) -> &str {
        &self.name
    }

    /// Attempt number, 1-based.
    pub fn attempt(&self) -> u32 {
        self.frame.attempt
    }

    /// `run id/agent path[item][@occurrence]/attempt`: a key for side-effecting tools to deduplicate
    /// at-least-once execution. `r1/root/0/1` the first time the agent at `root/0` runs, `r1/root/0@2/1` the
    /// second time (a loop's next iteration, a supervisor choosing it again), `r1/root/0#3/1` for the fourth item
    /// of a mapper. Two iterations or two items never share a key; an invocation run again after a crash or on
    /// resume (it had not completed) gets the same key, as the occurrence counts the completed invocations of
    /// this agent at this path and item, which the journal keeps. Idea: Temporal's activity id, Stripe's
    /// `Idempotency-Key`.
    ///
    /// # Errors
    /// [`AgentError::Internal`] if the run's scope actor died.
    pub async fn idempotency_key(&self) -> Result<String, AgentError> {
        let n = match self.occurrence.get() {
            Some(n) => *n,
            None => {
                let n = self
                    .run
                    .scope
                    .completed(self.name.clone(), self.frame.path.clone(), self.frame.item.clone())
                    .await?;
                *self.occurrence.get_or_init(|| n)
            }
        };
        let item = self.frame.item.as_deref().unwrap_or("");
        let (run, path, attempt) = (&self.run.run_id, &self.frame.path, self.frame.attempt);
        Ok(match n {
            0 => format!("{run}/{path}{item}/{attempt}"),
            n => format!("{run}/{path}{item}@{}/{attempt}", u64::from(n) + 1),
        })
    }

    /// Adds model token usage to this invocation's record.
    pub fn add_tokens(&self, usage: TokenUsage) {
        self.with_usage(|u| u.add_tokens(usage));
        let path = self.frame.path.clone();
        self.run.charge(move |ledger| {
            let spent =
                crate::usage::Usage { input_tokens: usage.input, output_tokens: usage.output, ..Default::default() };
            ledger.spend(&path, &spent);
        });
    }

    /// Waits until a model call on endpoint `provider` / `server` / `model` may start under `limits` (SPEC.md
    /// §3): a concurrency slot, then the endpoint's next start time, in this process's limiter or, on a
    /// store shared by several servers, the store's ([`crate::CheckpointStore::capacity`]). A wait is reported
    /// as a [`crate::RunEvent::WaitingForCapacity`] event; cancelling the run ends it. Finish the permit
    /// with the call's tokens ([`crate::limits::CapacityPermit::finish`]).
    ///
    /// # Errors
    /// [`AgentError::Cancelled`] when the run is cancelled while waiting; a failure naming this agent when
    /// the shared limiter's store fails.
    pub async fn acquire_capacity(
        &self,
        provider: &str,
        server: &str,
        model: &str,
        limits: &crate::capacity::ModelLimits,
    ) -> Result<crate::limits::CapacityPermit, AgentError> {
        use crate::capacity::{CapacityAnswer, CapacityOp, ProcessCapacity};
        use crate::limits::{CapacityPermit, CapacitySource, PermitInner};
        if limits.is_empty() {
            return Ok(CapacityPermit::unlimited());
        }
        let source = match &self.run.journal.store {
            Some(store) if store.shared_dyn() => CapacitySource::Shared(store.clone()),
            _ => CapacitySource::Process,
        };
        let key = crate::capacity::endpoint_key(provider, server, model);
        let store_failed = |e: crate::StoreError| self.fail(format!("the rate limiter of `{key}` failed: {e}"));
        let mut slot = None;
        if let Some(max) = limits.max_concurrency {
            static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let holder = format!("{}:{}:{n}", std::process::id(), crate::time::now_ms());
            let mut told = false;
            loop {
                let released = ProcessCapacity::released().notified();
                let now_ms = crate::time::now_ms();
                let op = CapacityOp::Hold {
                    key: key.clone(),
                    max: max.max(1),
                    holder: holder.clone(),
                    now_ms,
                    expires_ms: now_ms + SLOT_EXPIRY_MS,
                };
                if let CapacityAnswer::Slot(Some(s)) = source.apply(op).await.map_err(store_failed)? {
                    slot = Some((s, holder));
                    break;
                }
                if !told {
                    told = true;
                    self.waiting_for_capacity(&key, "max_concurrency", 0);
                }
                // Another server's slot frees without a word here: look again now and then.
                let poll = std::time::Duration::from_millis(if matches!(source, CapacitySource::Shared(_)) {
                    200
                } else {
                    1000
                });
                tokio::select! {
                    () = released => {}
                    () = tokio::time::sleep(poll) => {}
                    () = self.run.cancel.cancelled() => return Err(AgentError::Cancelled),
                }
            }
        }
        let permit = CapacityPermit {
            inner: Some(std::sync::Arc::new(PermitInner {
                source: source.clone(),
                key: key.clone(),
                limits: *limits,
                slot,
            })),
        };
        let now_ms = crate::time::now_ms();
        let interval_ms = limits.request_interval_ms();
        let mut now_ms = now_ms;
        loop {
            let op = CapacityOp::Reserve { key: key.clone(), now_ms, interval_ms };
            let CapacityAnswer::Start(start_ms) = source.apply(op).await.map_err(store_failed)? else { break };
            if start_ms <= now_ms {
                break;
            }
            // What holds it back: the spacing of requests, the tokens of earlier calls, or a provider's 429.
            let limit = match (limits.requests_per_minute, limits.tokens_per_minute) {
                (Some(_), _) => "requests_per_minute",
                (None, Some(_)) => "tokens_per_minute",
                (None, None) => "retry_after",
            };
            self.waiting_for_capacity(&key, limit, start_ms - now_ms);
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(start_ms - now_ms)) => {}
                () = self.run.cancel.cancelled() => {
                    // The start it waited for goes to the next caller.
                    let op = CapacityOp::Unreserve { key: key.clone(), start_ms, interval_ms };
                    if let Err(e) = source.apply(op).await {
                        tracing::warn!(endpoint = %key, error = %e, "giving a cancelled call's start back failed");
                    }
                    return Err(AgentError::Cancelled);
                }
            }
            // A 429 (or other calls' tokens) during the wait pushed the endpoint back: take a start after it.
            now_ms = crate::time::now_ms();
            match source.apply(CapacityOp::Peek { key: key.clone() }).await.map_err(store_failed)? {
                CapacityAnswer::Start(ready_ms) if ready_ms > now_ms => continue,
                _ => break,
            }
        }
        Ok(permit)
    }

    /// Before a model call of this invocation (SPEC.md §3 budgets). `Ok(Some(answer))`: the invocation
    /// resumed from a budget suspension and this call was made before it — use the kept `answer` instead of
    /// calling the model (then [`InvocationContext::after_model_call`] with `replayed`). `Ok(None)`: call the
    /// model. On the first call after a budget suspension the answer is used: a new limit raises the budget,
    /// `"stop"` fails the invocation.
    ///
    /// # Errors
    /// [`Stop::Suspended`] with a `budget` pending response when a budget over this invocation is
    /// spent and its `on_exceed` is `suspend` (also when the suspension is still unanswered); a failure naming
    /// the budget when it is `fail`, when the answer was `"stop"`, or when the answer is not a budget answer.
    pub async fn before_model_call(&self) -> Result<Option<Value>, Stop> {
        let path = self.frame.path.clone();
        if !self.run.with_ledger(move |l| l.covers(&path)).await.unwrap_or(false) {
            return Ok(None);
        }
        let first = !self.with_usage(|u| std::mem::replace(&mut u.resumed, true));
        if first {
            self.resume_budget().await?;
        }
        let replayed = self.with_usage(|u| {
            let answer = u.replay.pop_front()?;
            u.calls.push(answer.clone());
            Some(answer)
        });
        if replayed.is_some() {
            return Ok(replayed);
        }
        // Checked and counted at once, in the run's actor: calls started together (a parallel's branches)
        // cannot all pass a `model_calls` limit.
        let path = self.frame.path.clone();
        let spent = self.run.with_ledger(move |l| {
            for t in l.budgets.iter().filter(|t| t.covers(&path)) {
                let reached = t.budget.reached(&t.used);
                if !reached.is_empty() {
                    return Some((t.clone(), t.budget.reached_names(&t.used), reached));
                }
            }
            l.spend(&path, &crate::usage::Usage { model_calls: 1, ..Default::default() });
            None
        });
        match spent.await.flatten() {
            Some((t, names, reached)) => Err(self.over_budget(&t, names, &reached)),
            None => Ok(None),
        }
    }

    /// After a model call of this invocation: adds its tokens (`input`, `output`) and cost (USD, `None` for
    /// a model without prices) of `model` to the invocation's usage and, unless `replayed` (an answer
    /// [`InvocationContext::before_model_call`] handed back), to every budget over it; `answer` (the call's
    /// answer as JSON) is kept while a budget applies, for a suspension.
    ///
    /// # Errors
    /// When the call crossed a token or cost budget: [`Stop::Suspended`] with a `budget` pending
    /// response (`on_exceed: suspend`), or a failure naming the budget (`fail`); a failure when a budget
    /// limits `cost_usd` and `cost_usd` is `None` (the model has no prices).
    pub async fn after_model_call(
        &self,
        model: &str,
        tokens: TokenUsage,
        cost_usd: Option<f64>,
        replayed: bool,
        answer: impl FnOnce() -> Value,
    ) -> Result<(), Stop> {
        self.with_usage(|u| u.add_call(model, tokens, cost_usd));
        if replayed || !self.run.budgets {
            return Ok(());
        }
        let path = self.frame.path.clone();
        if !self.run.with_ledger(move |l| l.covers(&path)).await.unwrap_or(false) {
            return Ok(());
        }
        let answer = answer();
        self.with_usage(|u| u.calls.push(answer));
        // The call itself was counted when it was let through (`before_model_call`).
        let spent = crate::usage::Usage {
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cost_usd,
            models: vec![model.to_string()],
            ..Default::default()
        };
        let path = self.frame.path.clone();
        let verdict = self.run.with_ledger(move |l| {
            l.spend(&path, &spent);
            for t in l.budgets.iter().filter(|t| t.covers(&path)) {
                if t.budget.cost_usd.is_some() && cost_usd.is_none() {
                    return Some(Err(t.agent.clone()));
                }
                let crossed = t.budget.crossed(&t.used);
                if !crossed.is_empty() {
                    let mut names = Vec::new();
                    if t.budget.tokens.is_some_and(|l| t.used.tokens() > l) {
                        names.push("tokens".to_string());
                    }
                    if t.budget.cost_usd.is_some_and(|l| t.used.cost_usd.unwrap_or(0.0) > l) {
                        names.push("cost_usd".to_string());
                    }
                    return Some(Ok((t.clone(), names, crossed)));
                }
            }
            None
        });
        match verdict.await.flatten() {
            None => Ok(()),
            Some(Err(agent)) => Err(Stop::Failed(self.fail(format!(
                "the budget of `{agent}` limits cost_usd, but model `{model}` has no prices (set its \
                 `prices: {{input_per_mtok, output_per_mtok}}`)"
            )))),
            Some(Ok((t, names, crossed))) => Err(self.over_budget(&t, names, &crossed)),
        }
    }

    /// `f` on this invocation's model calls (allocated at the first: most invocations call no model).
    fn with_usage<R>(&self, f: impl FnOnce(&mut crate::budget::InvocationUsage) -> R) -> R {
        f(lock(&self.usage).get_or_insert_with(Box::default))
    }

    /// The first model call of an invocation that resumed from a budget suspension: uses its answer.
    async fn resume_budget(&self) -> Result<(), Stop> {
        let id = crate::budget::budget_response_id(&self.frame.path, self.item());
        let Some(pending) = self.suspension(&id).await else { return Ok(()) };
        let Some(answer) = self.take_answer(&id).await else { return Err(self.suspend_pending(pending)) };
        let data = &pending.data;
        let at = data.get("budget_path").and_then(Value::as_str).unwrap_or_default().to_string();
        if answer.as_str() == Some("stop") {
            // What the suspended invocation spent stays counted: in its failed record.
            if let Ok(u) = serde_json::from_value::<crate::usage::Usage>(
                data.get("invocation_usage").cloned().unwrap_or(Value::Null),
            ) {
                self.with_usage(|mine| match &mut mine.usage {
                    Some(acc) => acc.add(&u),
                    None => {
                        mine.tokens = Some(TokenUsage { input: u.input_tokens, output: u.output_tokens });
                        mine.usage = Some(u);
                    }
                });
            }
            return Err(self.fail(format!("stopped at its budget, as answered: {}", pending.prompt)).into());
        }
        let reached = crate::budget::reached_of(data);
        let kept = data.get("limits").and_then(|v| serde_json::from_value(v.clone()).ok());
        // The new limits are set in the run's actor; the raised budgets of every agent come back to be kept
        // in the state with this invocation's output.
        let raised = self.run.with_ledger(move |l| {
            let Some(t) = l.budgets.iter_mut().find(|t| t.path == at) else { return Ok::<_, String>(None) };
            let limits = kept.unwrap_or(t.budget);
            t.budget =
                limits.raised(&answer, &reached, &t.used).map_err(|e| format!("budget of `{}`: {e}", t.agent))?;
            let raised: Map<String, Value> = l
                .budgets
                .iter()
                .filter_map(|t| serde_json::to_value(t.budget).ok().map(|b| (t.path.clone(), b)))
                .collect();
            Ok(Some(raised))
        });
        let Some(raised) = raised.await.transpose().map_err(|e: String| self.fail(e))?.flatten() else { return Ok(()) };
        self.write_on_completion(crate::budget::BUDGET_KEY, Value::Object(raised));
        let replay = data.get("calls").and_then(Value::as_array).cloned().unwrap_or_default().into();
        self.with_usage(|u| u.replay = replay);
        Ok(())
    }

    /// What a spent budget `t` does to this invocation: a `budget` suspension or a failure.
    fn over_budget(&self, t: &crate::budget::Tracked, names: Vec<String>, phrases: &[String]) -> Stop {
        let what = phrases.join(", ");
        match t.budget.on_exceed {
            crate::budget::OnExceed::Fail => self.fail(format!("the budget of `{}` is spent: {what}", t.agent)).into(),
            crate::budget::OnExceed::Suspend => {
                let id = crate::budget::budget_response_id(&self.frame.path, self.item());
                let prompt = format!(
                    "The budget of `{}` is spent ({what}) at a model call of `{}`. Answer with a new limit for {} \
                     (or an object such as {{\"tokens\": 5000}}), or \"stop\".",
                    t.agent,
                    self.name,
                    names.join(" and ")
                );
                let (calls, usage) = self.with_usage(|u| (u.calls.clone(), u.usage.clone().unwrap_or_default()));
                let mut pending = self.pending_response(id, prompt);
                pending.kind = crate::PendingKind::Budget;
                pending.data = t.pending_data(&self.frame.path, &names, calls, &usage);
                self.suspend_pending(pending)
            }
        }
    }

    fn waiting_for_capacity(&self, endpoint: &str, limit: &str, wait_ms: u64) {
        tracing::debug!(endpoint, limit, wait_ms, path = %self.frame.path, "a model call waits for capacity");
        if self.has_listeners() {
            self.emit(&crate::listener::RunEvent::WaitingForCapacity {
                run_id: self.run.run_id.to_string(),
                path: self.frame.path.to_string(),
                endpoint: endpoint.to_string(),
                limit: limit.to_string(),
                wait_ms,
            });
        }
    }

    /// Whether the run has been cancelled (long agents may poll it; they are also aborted).
    pub fn is_cancelled(&self) -> bool {
        self.run.cancel.is_cancelled()
    }

    /// Reports an event (tokens of a streaming model, tool calls) to the listeners of this invocation.
    pub fn emit(&self, event: &crate::listener::RunEvent) {
        self.run.subscribers.emit(&self.listeners, event);
    }

    /// Whether any listener or run subscriber would receive [`InvocationContext::emit`] events (skip building
    /// them otherwise).
    pub fn has_listeners(&self) -> bool {
        self.run.subscribers.observed(&self.listeners)
    }

    /// An [`AgentError::Failed`] naming this agent.
    pub fn fail(&self, message: impl Into<String>) -> AgentError {
        AgentError::failed(self.name.to_string(), self.frame.path.to_string(), message)
    }

    /// An [`AgentError::Failed`] naming this agent, whose call failed with the typed `cause` (a model's, a
    /// tool's, a remote agent's error): error handlers decide by its origin and transience.
    pub fn fail_with(&self, cause: crate::error::Cause) -> AgentError {
        AgentError::caused(self.name.to_string(), self.frame.path.to_string(), cause)
    }

    /// Which item of a parallel mapper this invocation serves, inherited by a mapped composite's sub-agents:
    /// `#3` for the fourth item, `#3#0` for the first item of a mapper nested in it; `None` outside mappers.
    /// The agent's path is the same for every item, so whatever must be told apart per item (a human step's
    /// response id, an idempotency key) appends this.
    pub fn item(&self) -> Option<&str> {
        self.frame.item.as_deref()
    }

    /// Uses the human answer to response `id`, if one was given (each answer is used once).
    pub async fn take_answer(&self, id: &str) -> Option<Value> {
        self.run.take_answer(id).await
    }

    /// Waits in-process until response `id` is answered (see `Registry::answer`), then uses the answer.
    pub async fn wait_answer(&self, id: &str) -> Value {
        self.run.wait_answer(id).await
    }

    /// Asks `prompt` as response `id` and waits, holding the run, until it is answered, then uses the answer
    /// (a `mode: pending` human step). With a store the question is in the run's record while the run keeps
    /// running, so `agentic respond`, the server's API and its web inbox see and answer it (on any server of a
    /// shared store); an in-process answer (`Registry::answer`) is taken as well.
    pub async fn ask_and_wait(&self, id: impl Into<String>, prompt: impl Into<String>) -> Value {
        let pending = self.pending_response(id, prompt);
        self.run.ask_and_wait(pending).await.unwrap_or_default()
    }

    /// As [`InvocationContext::ask_and_wait`] for a question built with [`InvocationContext::pending_response`]
    /// (a deadline, what happens at it): `None` once its deadline passes unanswered (an answer arriving
    /// later is refused, SPEC.md §3).
    pub async fn ask_and_wait_until(&self, pending: crate::pending::PendingResponse) -> Option<Value> {
        self.run.ask_and_wait(pending).await
    }

    /// A question this agent asks as response `id` with `prompt` (no data, no deadline): set its other
    /// fields, then [`InvocationContext::suspend_pending`] or [`InvocationContext::ask_and_wait_until`].
    pub fn pending_response(
        &self,
        id: impl Into<String>,
        prompt: impl Into<String>,
    ) -> crate::pending::PendingResponse {
        crate::pending::PendingResponse::new(id, prompt, self.name.to_string())
    }

    /// An [`Stop::Suspended`] asking a human for response `id` with `prompt`: return it to suspend the
    /// run at this agent. The run resumes here once the response is answered.
    pub fn suspend(&self, id: impl Into<String>, prompt: impl Into<String>) -> Stop {
        self.suspend_with(id, prompt, Value::Null)
    }

    /// As [`InvocationContext::suspend`], keeping `data` with the pending response: what this agent needs to
    /// continue once answered (a remote task's ids). It is journaled with the suspension and, when the run
    /// resumes, [`InvocationContext::suspension`] hands it back, in this process or a later one.
    pub fn suspend_with(&self, id: impl Into<String>, prompt: impl Into<String>, data: Value) -> Stop {
        let mut pending = self.pending_response(id, prompt);
        pending.data = data;
        self.suspend_pending(pending)
    }

    /// An [`Stop::Suspended`] with `pending` as it is (a deadline, a wait's timer): return it to
    /// suspend the run at this agent. Kept like [`InvocationContext::suspend_with`]'s when it carries data, a
    /// deadline or a timer.
    pub fn suspend_pending(&self, pending: crate::pending::PendingResponse) -> Stop {
        Stop::Suspended(vec![pending])
    }

    /// The pending response `id` this run was suspended with by [`InvocationContext::suspend_with`] (with its
    /// data), while its answer is not used: the run resumed from that suspension. Kept in the run's record
    /// until the answer is used, so that a resume after a failure or a crash still finds it.
    pub async fn suspension(&self, id: &str) -> Option<crate::pending::PendingResponse> {
        self.run.suspension(id).await
    }

    /// Question `pending` (its id, deadline and `on_timeout`) timed out and this agent acts on it: no answer
    /// is taken for it any more, and the run's record keeps it, so that a later answer is refused saying so
    /// (SPEC.md §3).
    pub fn record_timeout(&self, pending: crate::pending::PendingResponse) {
        self.run.time_out(pending);
    }

    /// Marks the suspension `id` as dealt with though nobody answered it (a wait that fired, a question that
    /// timed out): [`InvocationContext::suspension`] no longer hands it back, and it leaves the run's record.
    pub fn resolve_suspension(&self, id: &str) {
        self.run.mark_used(id);
    }

    /// The answer to response `id`, if one was given, without using it (see
    /// [`InvocationContext::take_answer`]): for an agent that uses it only once its work with it succeeded.
    pub async fn peek_answer(&self, id: &str) -> Option<Value> {
        self.run.peek_answer(id).await
    }
}
