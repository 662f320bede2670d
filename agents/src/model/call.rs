//! [`call_model`]: one model call of an invocation under the run's budgets and the endpoint's rate limits
//! (SPEC.md §3) — the budget check before the call ([`agentic_engine::UsageView::before_model_call`]),
//! capacity from the limiter ([`agentic_engine::UsageView::acquire_capacity`]), the call, then its
//! usage and cost recorded and checked ([`agentic_engine::UsageView::after_model_call`]). A provider
//! answering 429 reports it while it retries ([`report_rate_limited`]), which pushes the endpoint's next
//! start back for every caller.

use std::sync::Arc;
use std::time::Duration;

use agentic_engine::limits::CapacityPermit;
use agentic_engine::{AgentError, CallEntry, CallKind, InvocationContext, ModelTurnEntry, Stop, TapedCall};
use serde_json::{Map, Value};

use super::{ChatModelRef, ChatRequest, ChatResponse, ModelError};

/// What `request` sets besides its messages, as recordings and the journal hold it: the provider-neutral
/// request's members that are set (no `null`, no empty list), without `messages`.
pub fn request_options(request: &ChatRequest) -> Map<String, Value> {
    let mut options = match serde_json::to_value(request) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    options.remove("messages");
    options.retain(|_, v| !(v.is_null() || v.as_array().is_some_and(Vec::is_empty)));
    options
}

/// `request` to `model` as a recording holds it (SPEC.md §5): `{"model", "messages", ...the options set}` —
/// what is sent, without transport details (the provider, the server, keys, streaming).
pub fn recorded_request(model: &str, request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().filter_map(|m| serde_json::to_value(m).ok()).collect();
    agentic_engine::model_request(model, &messages, &request_options(request))
}

tokio::task_local! {
    /// Where the provider reports a 429 during the current call.
    static RATE_LIMITED: Arc<dyn Fn(Option<Duration>) + Send + Sync>;
}

/// Called by a provider that got HTTP 429 (with its `Retry-After`) during a call made by [`call_model`]: the
/// endpoint's limiter backs off. Nothing happens outside such a call.
pub(crate) fn report_rate_limited(retry_after: Option<Duration>) {
    let _ = RATE_LIMITED.try_with(|f| f(retry_after));
}

/// One model call in progress: [`ModelCall::begin`], then the model (unless [`ModelCall::replayed`] gives
/// the answer), then [`ModelCall::end`].
pub struct ModelCall<'a> {
    ctx: &'a InvocationContext,
    model: &'a ChatModelRef,
    permit: Option<CapacityPermit>,
    replayed: Option<ChatResponse>,
    /// The call on the run's call tape (SPEC.md §5), when the run has one.
    taped: Option<TapedCall>,
    /// `replayed` came from the tape (a recording, a forked run's calls), not from a budget suspension: its
    /// usage counts as a call's.
    from_tape: bool,
    /// The invocation journals its model turns itself: a budget suspension keeps no answers.
    journaled: bool,
}

impl<'a> ModelCall<'a> {
    /// Checks the budgets, numbers the call on the run's call tape (which may answer `request` from a
    /// recording), and waits for capacity unless it answered.
    ///
    /// # Errors
    /// A budget suspension or failure, the run's cancellation while waiting, the limiter's store failing, or
    /// a strict replay whose recording differs ([`TapedCall::answer`]).
    pub async fn begin(
        ctx: &'a InvocationContext,
        model: &'a ChatModelRef,
        request: &ChatRequest,
    ) -> Result<Self, Stop> {
        let kept = ctx.usage().before_model_call().await?;
        let info = model.info();
        let taped = ctx.calls().taped(CallKind::Model, recorded_request(&info.model, request));
        let mut call =
            ModelCall { ctx, model, permit: None, replayed: None, taped, from_tape: false, journaled: false };
        if let Some(answer) = kept {
            call.replayed = Some(
                serde_json::from_value(answer)
                    .map_err(|e| ctx.fail(format!("the kept answer of a model call cannot be read: {e}")))?,
            );
            return Ok(call);
        }
        if let Some(answer) = call.taped.as_ref().map(TapedCall::answer).transpose()?.flatten() {
            call.replayed =
                Some(serde_json::from_value(answer).map_err(|e| {
                    ctx.fail(format!("the recorded answer of model `{}` cannot be read: {e}", info.model))
                })?);
            call.from_tape = true;
            return Ok(call);
        }
        call.permit =
            Some(ctx.usage().acquire_capacity(&info.provider, &info.server, &info.model, &info.limits).await?);
        Ok(call)
    }

    /// With `journaled`, the invocation journals its model turns (SPEC.md §4), so a budget suspension after
    /// this call keeps no copy of the answer: the resumed invocation replays it from the journal.
    pub fn journaled(mut self, journaled: bool) -> Self {
        self.journaled = journaled;
        if journaled {
            self.ctx.usage().journaling();
        }
        self
    }

    /// The answer kept from before a budget suspension, or the recorded one (a replay): use it instead of
    /// calling the model.
    pub fn replayed(&mut self) -> Option<ChatResponse> {
        self.replayed.take()
    }

    /// Runs `call` with 429 reports going to this call's limiter.
    pub async fn run<T>(&self, call: impl Future<Output = T>) -> T {
        let Some(handle) = self.permit.as_ref().and_then(CapacityPermit::back_off_handle) else { return call.await };
        let hook: Arc<dyn Fn(Option<Duration>) + Send + Sync> = Arc::new(move |after| handle.back_off(after));
        RATE_LIMITED.scope(hook, call).await
    }

    /// Ends the call with its `response`: gives the capacity back with its tokens and records its usage
    /// (cost from the model's prices).
    ///
    /// # Errors
    /// A budget crossed by this call ([`UsageView::after_model_call`]).
    pub async fn end(self, response: &ChatResponse, replayed: bool) -> Result<(), Stop> {
        let info = self.model.info();
        let t = response.usage;
        if let Some(permit) = self.permit {
            permit.finish(t.input + t.output).await;
        }
        let cost = info.prices.map(|p| p.cost(t.input, t.output));
        let journaled = self.journaled;
        if let Some(taped) = self.taped {
            taped.record(serde_json::to_value(response).unwrap_or(Value::Null));
        }
        // A recorded answer is this run's call: it counts against the budgets as the call it stands for.
        let replayed = replayed && !self.from_tape;
        self.ctx
            .usage()
            .after_model_call(info.label(), t, cost, replayed, || {
                if journaled {
                    return serde_json::Value::Null;
                }
                serde_json::to_value(response).unwrap_or(serde_json::Value::Null)
            })
            .await
    }
}

/// One complete (not streamed) model call of `ctx`'s invocation under its budgets and rate limits, for
/// `purpose` (`summary`, `choose`, ...: a call that is not a turn of an agent's loop); a [`ModelError`]
/// becomes an [`AgentError`] through `failed`, and a spent budget may suspend it ([`Stop::Suspended`]). The
/// request and its answer are journaled with the invocation (SPEC.md §4: every model call is kept with the
/// step).
///
/// # Errors
/// As [`ModelCall::begin`] and [`ModelCall::end`], the model's error through `failed`, or the journal write.
pub async fn call_model(
    ctx: &InvocationContext,
    model: &ChatModelRef,
    request: ChatRequest,
    purpose: &str,
    failed: impl FnOnce(ModelError) -> AgentError,
) -> Result<ChatResponse, Stop> {
    let model = &model.for_invocation(ctx).await?;
    let mut call = ModelCall::begin(ctx, model, &request).await?;
    let kept = call.replayed();
    let entry = ctx.calls().journaled().then(|| {
        let messages = request.messages.iter().filter_map(|m| serde_json::to_value(m).ok()).collect();
        (messages, request_options(&request))
    });
    let response = match kept {
        Some(response) => {
            // Kept from before a budget suspension (which journaled nothing), or recorded.
            call.end(&response, true).await?;
            response
        }
        None => {
            let response = call.run(model.chat(request)).await.map_err(failed)?;
            call.end(&response, false).await?;
            response
        }
    };
    if let Some((messages, options)) = entry {
        let info = model.info();
        let t = response.usage;
        let cost = info.prices.map(|p| p.cost(t.input, t.output));
        let answer = serde_json::to_value(&response).unwrap_or(Value::Null);
        let entry =
            ModelTurnEntry::call(purpose, &info.model, messages, Some(options), answer, (t.input, t.output), cost)
                .labelled(info.label());
        ctx.calls().record(vec![CallEntry::Model(entry)], false).await?;
    }
    Ok(response)
}
