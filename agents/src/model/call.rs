//! [`call_model`]: one model call of an invocation under the run's budgets and the endpoint's rate limits
//! (SPEC.md §3) — the budget check before the call ([`agentic_engine::UsageView::before_model_call`]),
//! capacity from the limiter ([`agentic_engine::UsageView::acquire_capacity`]), the call, then its
//! usage and cost recorded and checked ([`agentic_engine::UsageView::after_model_call`]). A provider
//! answering 429 reports it while it retries ([`report_rate_limited`]), which pushes the endpoint's next
//! start back for every caller.

use std::sync::Arc;
use std::time::Duration;

use agentic_engine::limits::CapacityPermit;
use agentic_engine::{AgentError, InvocationContext, Stop};

use super::{ChatModelRef, ChatRequest, ChatResponse, ModelError};

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
    /// The invocation journals its model turns itself: a budget suspension keeps no answers.
    journaled: bool,
}

impl<'a> ModelCall<'a> {
    /// Checks the budgets and waits for capacity.
    ///
    /// # Errors
    /// A budget suspension or failure, the run's cancellation while waiting, or the limiter's store failing.
    pub async fn begin(ctx: &'a InvocationContext, model: &'a ChatModelRef) -> Result<Self, Stop> {
        if let Some(answer) = ctx.usage().before_model_call().await? {
            let response: ChatResponse = serde_json::from_value(answer)
                .map_err(|e| ctx.fail(format!("the kept answer of a model call cannot be read: {e}")))?;
            return Ok(ModelCall { ctx, model, permit: None, replayed: Some(response), journaled: false });
        }
        let info = model.info();
        let permit = ctx.usage().acquire_capacity(&info.provider, &info.server, &info.model, &info.limits).await?;
        Ok(ModelCall { ctx, model, permit: Some(permit), replayed: None, journaled: false })
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

    /// The answer kept from before a budget suspension: use it instead of calling the model.
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
        self.ctx
            .usage()
            .after_model_call(&info.model, t, cost, replayed, || {
                if journaled {
                    return serde_json::Value::Null;
                }
                serde_json::to_value(response).unwrap_or(serde_json::Value::Null)
            })
            .await
    }
}

/// One complete (not streamed) model call of `ctx`'s invocation under its budgets and rate limits; a
/// [`ModelError`] becomes an [`AgentError`] through `failed`, and a spent budget may suspend it
/// ([`Stop::Suspended`]).
///
/// # Errors
/// As [`ModelCall::begin`] and [`ModelCall::end`], and the model's error through `failed`.
pub async fn call_model(
    ctx: &InvocationContext,
    model: &ChatModelRef,
    request: ChatRequest,
    failed: impl FnOnce(ModelError) -> AgentError,
) -> Result<ChatResponse, Stop> {
    let mut call = ModelCall::begin(ctx, model).await?;
    if let Some(response) = call.replayed() {
        call.end(&response, true).await?;
        return Ok(response);
    }
    let response = call.run(model.chat(request)).await.map_err(failed)?;
    call.end(&response, false).await?;
    Ok(response)
}
