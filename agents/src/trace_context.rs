//! The W3C `traceparent` an agent's outgoing requests carry (MCP `tools/call`, A2A messages): the current
//! span's OpenTelemetry context (cargo feature `otel`), else the one the run was started under, passed on
//! unchanged ([`agentic_engine::RunView::traceparent`]), else none.

use std::future::Future;
use std::sync::Arc;

use agentic_engine::InvocationContext;

tokio::task_local! {
    /// The run's own `traceparent` while one of its agents calls out (set by [`scoped`]).
    static RUN_TRACEPARENT: Option<Arc<str>>;
}

/// Runs `fut` with `ctx`'s run `traceparent` at hand for [`outgoing`] (the requests `fut` makes in this task).
pub(crate) async fn scoped<F: Future>(ctx: &InvocationContext, fut: F) -> F::Output {
    RUN_TRACEPARENT.scope(ctx.run().traceparent().map(Arc::from), fut).await
}

/// The `traceparent` to send with a request made now: the current span's (its OpenTelemetry context, feature
/// `otel`), else the run's (inside [`scoped`]), else `None`.
pub(crate) fn outgoing() -> Option<String> {
    agentic_engine::current_traceparent()
        .or_else(|| RUN_TRACEPARENT.try_with(|t| t.as_deref().map(str::to_string)).ok().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outside_a_run_and_without_a_span_context_there_is_nothing_to_send() {
        assert_eq!(outgoing(), None);
        let inside = RUN_TRACEPARENT
            .scope(Some(Arc::from("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")), async { outgoing() });
        assert_eq!(inside.await.as_deref(), Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
    }
}
