//! Non-AI agents from Rust code: [`FnAgent`] (an async closure over the invocation context) and
//! [`ScopeAction`] (a synchronous function from the state snapshot to a set of writes).

use std::future::Future;
use std::sync::Arc;

use agentic_engine::{Agent, AgentRef, AgentSpec, InvocationContext, ScopeView, SpecBuilder, Stop};
use futures::future::BoxFuture;
use serde_json::Value;

type AsyncFn = Arc<dyn for<'a> Fn(&'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> + Send + Sync>;

/// An agent whose work is an async Rust closure. The closure gets the [`InvocationContext`] (resolved inputs,
/// scope, identity) and returns the result, written to `output_key` by the engine.
///
/// ```
/// use agentic_agents::FnAgent;
/// use agentic_engine::SpecBuilder;
/// let double = FnAgent::builder("double", |ctx| Box::pin(async move {
///     let x: i64 = ctx.input_as("x")?;
///     Ok(serde_json::json!(x * 2))
/// })).input("x").output_key("y").build();
/// assert_eq!(double.name(), "double");
/// ```
pub struct FnAgent {
    spec: AgentSpec,
    f: AsyncFn,
}

/// Builder of a [`FnAgent`]. Defaults: no inputs, no output key, not optional, not async, no timeout.
pub struct FnAgentBuilder {
    spec: AgentSpec,
    f: AsyncFn,
}

impl SpecBuilder for FnAgentBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl FnAgent {
    /// Starts a builder for an agent named `name` running `f`. The closure returns a boxed future
    /// (`Box::pin(async move { ... })`) borrowing the context.
    pub fn builder<F>(name: impl Into<String>, f: F) -> FnAgentBuilder
    where
        F: for<'a> Fn(&'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> + Send + Sync + 'static,
    {
        FnAgentBuilder { spec: AgentSpec::new(name, "closure"), f: Arc::new(f) }
    }

    /// Convenience: an agent from an async function of its inputs only (no access to the context).
    pub fn from_async<F, Fut>(name: impl Into<String>, f: F) -> FnAgentBuilder
    where
        F: Fn(serde_json::Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let f = Arc::new(f);
        Self::builder(name, move |ctx| {
            let f = f.clone();
            let inputs = ctx.inputs().clone();
            Box::pin(async move { f(inputs).await.map_err(|m| ctx.fail(m).into()) })
        })
    }
}

impl FnAgentBuilder {
    /// Builds the agent.
    pub fn build(self) -> AgentRef {
        AgentRef::new(FnAgent { spec: self.spec, f: self.f })
    }
}

impl Agent for FnAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    fn invoke(&self, ctx: &InvocationContext) -> impl Future<Output = Result<Value, Stop>> + Send {
        (self.f)(ctx)
    }
}

type ActionFn = Arc<dyn Fn(&ScopeView) -> Result<Vec<(String, Value)>, String> + Send + Sync>;

/// A scope action: reads the state snapshot and returns writes to apply (several keys at once; `null`
/// removes a key). Its result is `null`; it is recorded in the history like any agent.
///
/// ```
/// use agentic_agents::ScopeAction;
/// let init = ScopeAction::from_fn("init", |_view| Ok(vec![("count".into(), serde_json::json!(0))]));
/// assert_eq!(init.spec().kind, "scope_action");
/// ```
pub struct ScopeAction {
    spec: AgentSpec,
    f: ActionFn,
}

impl ScopeAction {
    /// An action named `name`. Use [`ScopeAction::with_spec`] to declare inputs or optionality.
    pub fn from_fn(
        name: impl Into<String>,
        f: impl Fn(&ScopeView) -> Result<Vec<(String, Value)>, String> + Send + Sync + 'static,
    ) -> AgentRef {
        Self::with_spec(AgentSpec::new(name, "scope_action"), f)
    }

    /// An action with explicit metadata.
    pub fn with_spec(
        spec: AgentSpec,
        f: impl Fn(&ScopeView) -> Result<Vec<(String, Value)>, String> + Send + Sync + 'static,
    ) -> AgentRef {
        AgentRef::new(ScopeAction { spec, f: Arc::new(f) })
    }
}

impl Agent for ScopeAction {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let writes = (self.f)(&ctx.view()).map_err(|m| ctx.fail(m))?;
        for (k, v) in writes {
            ctx.write(k, v).await?;
        }
        Ok(Value::Null)
    }
}
