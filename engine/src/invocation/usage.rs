//! [`UsageView`]: what an invocation asks of its run around each model call — a model endpoint's capacity
//! (rate limits, SPEC.md §3 `limits`), the run's budgets before and after the call (SPEC.md §3 `budget`), and
//! the tokens it spent.

use serde_json::{Map, Value};

use super::InvocationContext;
use crate::error::AgentError;
use crate::journal::TokenUsage;
use crate::lock::lock;
use crate::stop::Stop;

/// How long a concurrency slot of a model endpoint is held at most when its call never gives it back (the
/// process died): 10 minutes, longer than any model call's timeout.
const SLOT_EXPIRY_MS: u64 = 600_000;

/// The model calls of one invocation (`ctx.usage()`).
#[derive(Clone, Copy)]
pub struct UsageView<'a> {
    pub(super) ctx: &'a InvocationContext,
}

impl UsageView<'_> {
    /// Adds model token usage to this invocation's record.
    pub fn add_tokens(&self, usage: TokenUsage) {
        self.with_usage(|u| u.add_tokens(usage));
        let path = self.ctx.frame.path.clone();
        self.ctx.handle.charge(move |ledger| {
            let spent =
                crate::usage::Usage { input_tokens: usage.input, output_tokens: usage.output, ..Default::default() };
            ledger.spend(&path, &spent);
        });
    }

    /// Adds one call of `model` that used `usage` tokens and cost `cost_usd` (USD, `None` for a model without
    /// prices), outside the budget checks of [`UsageView::after_model_call`] (a decision model's answer): the
    /// invocation's usage counts the call and names the model, and every budget over it is charged.
    pub fn add_model_call(&self, model: &str, usage: TokenUsage, cost_usd: Option<f64>) {
        self.with_usage(|u| u.add_call(model, usage, cost_usd));
        let path = self.ctx.frame.path.clone();
        self.ctx.handle.charge(move |ledger| {
            let spent = crate::usage::Usage {
                input_tokens: usage.input,
                output_tokens: usage.output,
                cost_usd,
                ..Default::default()
            };
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
        let source = match &self.ctx.handle.journal.store {
            Some(store) if store.shared_dyn() => CapacitySource::Shared(store.clone()),
            _ => CapacitySource::Process,
        };
        let key = crate::capacity::endpoint_key(provider, server, model);
        let store_failed = |e: crate::StoreError| self.ctx.fail(format!("the rate limiter of `{key}` failed: {e}"));
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
                    () = self.ctx.handle.cancel.cancelled() => return Err(AgentError::Cancelled),
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
                () = self.ctx.handle.cancel.cancelled() => {
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
    /// calling the model (then [`UsageView::after_model_call`] with `replayed`). `Ok(None)`: call the
    /// model. On the first call after a budget suspension the answer is used: a new limit raises the budget,
    /// `"stop"` fails the invocation.
    ///
    /// # Errors
    /// [`Stop::Suspended`] with a `budget` pending response when a budget over this invocation is
    /// spent and its `on_exceed` is `suspend` (also when the suspension is still unanswered); a failure naming
    /// the budget when it is `fail`, when the answer was `"stop"`, or when the answer is not a budget answer.
    pub async fn before_model_call(&self) -> Result<Option<Value>, Stop> {
        if !self.covered().await {
            return Ok(None);
        }
        self.resume_once().await?;
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
        let path = self.ctx.frame.path.clone();
        let spent = self.ctx.handle.with_ledger(move |l| {
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
            Some((t, names, reached)) => Err(self.over_budget(&t, names, &reached).await),
            None => Ok(None),
        }
    }

    /// Before an invocation that continues its loop from the journal (SPEC.md §4) replays the model turns
    /// answered before a budget suspended it: uses the answer to that suspension, as the first model call
    /// would ([`UsageView::before_model_call`]) — a new limit raises the budget, `"stop"` fails the invocation.
    ///
    /// # Errors
    /// As [`UsageView::before_model_call`].
    pub async fn resume(&self) -> Result<(), Stop> {
        if self.covered().await {
            self.resume_once().await?;
        }
        Ok(())
    }

    /// The invocation journals its model turns itself (SPEC.md §4): a budget suspension keeps neither their
    /// answers nor their usage (a resume counts them from the journal), and a raise of its budgets is
    /// journaled with its calls ([`crate::tool_call::CallEntry::Budget`]).
    pub fn journaling(&self) {
        self.with_usage(|u| u.journaled = true);
    }

    /// Applies budgets raised earlier in this invocation (its journal's [`crate::tool_call::CallEntry::Budget`])
    /// when it continues after another suspension: the limits by budget path, kept in the state with its
    /// output.
    pub async fn restore_raised(&self, limits: Map<String, Value>) {
        let applied = limits.clone();
        let _ = self
            .ctx
            .handle
            .with_ledger(move |l| {
                for t in l.budgets.iter_mut() {
                    if let Some(b) = applied.get(&t.path).and_then(|v| serde_json::from_value(v.clone()).ok()) {
                        t.budget = b;
                    }
                }
            })
            .await;
        self.ctx.write_on_completion(crate::budget::BUDGET_KEY, Value::Object(limits));
    }

    /// Whether a budget covers this invocation.
    async fn covered(&self) -> bool {
        let path = self.ctx.frame.path.clone();
        self.ctx.handle.with_ledger(move |l| l.covers(&path)).await.unwrap_or(false)
    }

    /// The answer to a budget suspension, used at the invocation's first model call (or [`UsageView::resume`]).
    async fn resume_once(&self) -> Result<(), Stop> {
        let first = !self.with_usage(|u| std::mem::replace(&mut u.resumed, true));
        if first {
            self.resume_budget().await?;
        }
        Ok(())
    }

    /// After a model call of this invocation: adds its tokens (`input`, `output`) and cost (USD, `None` for
    /// a model without prices) of `model` to the invocation's usage and, unless `replayed` (an answer
    /// [`UsageView::before_model_call`] handed back), to every budget over it; `answer` (the call's
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
        if replayed || !self.ctx.handle.budgets {
            return Ok(());
        }
        // The call itself was counted when it was let through (`before_model_call`); its tokens and cost are
        // charged and checked in one message to the run's actor.
        let spent = crate::usage::Usage {
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cost_usd,
            models: vec![model.to_string()],
            ..Default::default()
        };
        let path = self.ctx.frame.path.clone();
        let verdict = self.ctx.handle.with_ledger(move |l| {
            if !l.covers(&path) {
                return Charge::Uncovered;
            }
            l.spend(&path, &spent);
            for t in l.budgets.iter().filter(|t| t.covers(&path)) {
                if t.budget.cost_usd.is_some() && cost_usd.is_none() {
                    return Charge::NoPrices(t.agent.clone());
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
                    return Charge::Crossed(Box::new(t.clone()), names, crossed);
                }
            }
            Charge::Within
        });
        let verdict = verdict.await.unwrap_or(Charge::Uncovered);
        if matches!(verdict, Charge::Uncovered) {
            return Ok(());
        }
        // Kept while a budget applies: a suspension hands the calls made so far back on resume (unless the
        // invocation journals them: null).
        let answer = answer();
        if !answer.is_null() {
            self.with_usage(|u| u.calls.push(answer));
        }
        match verdict {
            Charge::Uncovered | Charge::Within => Ok(()),
            Charge::NoPrices(agent) => Err(Stop::Failed(self.ctx.fail(format!(
                "the budget of `{agent}` limits cost_usd, but model `{model}` has no prices (set its \
                 `prices: {{input_per_mtok, output_per_mtok}}`)"
            )))),
            Charge::Crossed(t, names, crossed) => Err(self.over_budget(&t, names, &crossed).await),
        }
    }

    /// `f` on this invocation's model calls (allocated at the first: most invocations call no model).
    fn with_usage<R>(&self, f: impl FnOnce(&mut crate::budget::InvocationUsage) -> R) -> R {
        f(lock(&self.ctx.usage).get_or_insert_with(Box::default))
    }

    /// The first model call of an invocation that resumed from a budget suspension: uses its answer.
    async fn resume_budget(&self) -> Result<(), Stop> {
        let id = crate::budget::budget_response_id(&self.ctx.frame.path, self.ctx.item());
        let Some(pending) = self.ctx.human().suspension(&id).await else { return Ok(()) };
        let Some(answer) = self.ctx.human().take(&id).await else {
            return Err(self.ctx.human().suspend_pending(pending));
        };
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
            return Err(self.ctx.fail(format!("stopped at its budget, as answered: {}", pending.prompt)).into());
        }
        let reached = crate::budget::reached_of(data);
        let kept = data.get("limits").and_then(|v| serde_json::from_value(v.clone()).ok());
        // The new limits are set in the run's actor; the raised budgets of every agent come back to be kept
        // in the state with this invocation's output.
        let raised = self.ctx.handle.with_ledger(move |l| {
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
        let Some(raised) = raised.await.transpose().map_err(|e: String| self.ctx.fail(e))?.flatten() else {
            return Ok(());
        };
        if self.with_usage(|u| u.journaled) {
            // Journaled with the invocation's calls: a later suspension (a tool call's approval) keeps it.
            let entry = crate::tool_call::BudgetEntry { limits: raised.clone(), at_us: crate::time::now_us() };
            self.ctx.calls().record(vec![crate::tool_call::CallEntry::Budget(entry)], false).await?;
        }
        self.ctx.write_on_completion(crate::budget::BUDGET_KEY, Value::Object(raised));
        let replay = data.get("calls").and_then(Value::as_array).cloned().unwrap_or_default().into();
        self.with_usage(|u| u.replay = replay);
        Ok(())
    }

    /// What a spent budget `t` does to this invocation: a `budget` suspension or a failure.
    async fn over_budget(&self, t: &crate::budget::Tracked, names: Vec<String>, phrases: &[String]) -> Stop {
        let what = phrases.join(", ");
        match t.budget.on_exceed {
            crate::budget::OnExceed::Fail => {
                self.ctx.fail(format!("the budget of `{}` is spent: {what}", t.agent)).into()
            }
            crate::budget::OnExceed::Suspend => {
                let id = crate::budget::budget_response_id(&self.ctx.frame.path, self.ctx.item());
                let prompt = format!(
                    "The budget of `{}` is spent ({what}) at a model call of `{}`. Answer with a new limit for {} \
                     (or an object such as {{\"tokens\": 5000}}), or \"stop\".",
                    t.agent,
                    self.ctx.name,
                    names.join(" and ")
                );
                let (calls, usage, journaled) =
                    self.with_usage(|u| (u.calls.clone(), u.usage.clone().unwrap_or_default(), u.journaled));
                let mut pending = self.ctx.human().question(id, prompt);
                pending.kind = crate::PendingKind::Budget;
                pending.data = t.pending_data(&self.ctx.frame.path, &names, calls, &usage, journaled);
                // Which invocation of its path asked: once it completes, a run taken over while the record
                // still lists this answered response neither counts its spending twice nor resets the limits.
                match self.ctx.run().occurrence().await {
                    Ok(n) => pending.data["occurrence"] = Value::from(n),
                    Err(e) => return e.into(),
                }
                if let Some(item) = self.ctx.item() {
                    pending.data["item"] = Value::from(item);
                }
                self.ctx.human().suspend_pending(pending)
            }
        }
    }

    fn waiting_for_capacity(&self, endpoint: &str, limit: &str, wait_ms: u64) {
        tracing::debug!(endpoint, limit, wait_ms, path = %self.ctx.frame.path, "a model call waits for capacity");
        if self.ctx.run().has_listeners() {
            self.ctx.run().emit(&crate::listener::RunEvent::WaitingForCapacity {
                run_id: self.ctx.handle.run_id.to_string(),
                path: self.ctx.frame.path.to_string(),
                endpoint: endpoint.to_string(),
                limit: limit.to_string(),
                wait_ms,
            });
        }
    }
}

/// What charging a model call's tokens and cost to the run's budgets found.
enum Charge {
    /// No budget covers the invocation.
    Uncovered,
    /// Every budget over it still holds.
    Within,
    /// A budget over it limits cost, and the model has no prices (the budget's agent).
    NoPrices(String),
    /// The call crossed this budget's limits (their names, and the phrases saying by how much).
    Crossed(Box<crate::budget::Tracked>, Vec<String>, Vec<String>),
}
