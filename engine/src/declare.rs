//! What the declarative agents (`agentic-macros`: `#[agent]`, `#[agents]`) expand to, in the engine's terms:
//! a leaf agent from an async function ([`fn_agent`]), the typed call of an agent ([`call`]), and the bounds
//! that make a wrong parameter or return type a compile error naming the attribute ([`AgentInput`],
//! [`AgentOutput`], [`CallInput`], [`CallOutput`]).
//!
//! Not meant to be used by hand: the builders say the same with more words. The original's annotated
//! interfaces (`@Agent`, `@V`) are turned into agents by reflection at run time; here the macros write the
//! builder calls at compile time.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::{Agent, AgentRef};
use crate::agent_spec::{AgentSpec, InputSpec, KeyDecl};
use crate::error::AgentError;
use crate::invocation::InvocationContext;
use crate::stop::Stop;
use crate::value::StateType;

/// A type a `#[agent]` function takes as a parameter: read from the state (deserialised) and declared as the
/// input's type.
#[diagnostic::on_unimplemented(
    message = "`#[agent]`: parameter type `{Self}` cannot be read from the state",
    label = "not deserialisable with a JSON schema",
    note = "a parameter of an `#[agent]` function must implement `serde::Deserialize` and `schemars::JsonSchema`"
)]
pub trait AgentInput: DeserializeOwned + StateType {}

impl<T: DeserializeOwned + StateType> AgentInput for T {}

/// A type a `#[agent]` function returns (inside `Result` or not): written to the state (serialised) and
/// declared as the output key's type.
#[diagnostic::on_unimplemented(
    message = "`#[agent]`: return type `{Self}` cannot be stored in the state",
    label = "not serialisable with a JSON schema",
    note = "the result of an `#[agent]` function must implement `serde::Serialize` and `schemars::JsonSchema`"
)]
pub trait AgentOutput: Serialize + StateType {}

impl<T: Serialize + StateType> AgentOutput for T {}

/// A type a method of an `#[agents]` trait takes: written to the state as an input of the call.
#[diagnostic::on_unimplemented(
    message = "`#[agents]`: parameter type `{Self}` cannot be written to the state",
    label = "not serialisable with a JSON schema",
    note = "a parameter of an `#[agents]` method must implement `serde::Serialize` and `schemars::JsonSchema`"
)]
pub trait CallInput: Serialize + StateType {}

impl<T: Serialize + StateType> CallInput for T {}

/// A type a method of an `#[agents]` trait returns: parsed from the answer through its JSON schema.
#[diagnostic::on_unimplemented(
    message = "`#[agents]`: return type `{Self}` cannot be parsed from the agent's answer",
    label = "not deserialisable with a JSON schema",
    note = "an `#[agents]` method must return a type implementing `serde::Deserialize` and `schemars::JsonSchema`"
)]
pub trait CallOutput: DeserializeOwned + StateType {}

impl<T: DeserializeOwned + StateType> CallOutput for T {}

type LeafFn = Arc<dyn for<'a> Fn(&'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> + Send + Sync>;

/// The agent a `#[agent]` function becomes: its spec and the closure calling the function.
struct DeclaredFn {
    spec: AgentSpec,
    f: LeafFn,
}

impl Agent for DeclaredFn {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    fn invoke(&self, ctx: &InvocationContext) -> impl Future<Output = Result<Value, Stop>> + Send {
        (self.f)(ctx)
    }
}

/// A leaf agent with metadata `spec` (kind `closure`, like `FnAgent`'s) running `f`.
pub fn fn_agent<F>(spec: AgentSpec, f: F) -> AgentRef
where
    F: for<'a> Fn(&'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> + Send + Sync + 'static,
{
    AgentRef::new(DeclaredFn { spec, f: Arc::new(f) })
}

/// Reads an input of a declared agent from its invocation (see [`declared_input`]).
pub type ReadInput<T> = fn(&InvocationContext, &str) -> Result<T, AgentError>;

/// Turns a declared agent's result into the value stored (see [`declared_output`]).
pub type WriteOutput<T> = fn(&InvocationContext, &T) -> Result<Value, AgentError>;

/// Parameter `key` of a `#[agent]` function: its input spec (declared as `T`) and
/// the function reading it from an invocation ([`AgentError::Coercion`] when the value does not deserialise
/// as `T`). One bound to check, so a wrong type is one compile error.
pub fn declared_input<T: AgentInput>(key: &str) -> (InputSpec, ReadInput<T>) {
    (InputSpec::of::<T>(key), |ctx, key| ctx.input_as(key))
}

/// An `Option<T>` parameter `key` of a `#[agent]` function: an optional input declared as `T`, read as
/// `None` when absent (see [`declared_input`]).
pub fn declared_optional_input<T: AgentInput>(key: &str) -> (InputSpec, ReadInput<Option<T>>) {
    (InputSpec::of::<T>(key).optional(true), |ctx, key| ctx.input_as(key))
}

/// The output key `key` of a `#[agent]` function returning `T`: the key declared as `T`, and the function
/// turning a result into the stored value ([`AgentError::Failed`] naming the agent when it does not
/// serialise). One bound to check, so a wrong type is one compile error.
pub fn declared_output<T: AgentOutput>(key: &str) -> (KeyDecl, WriteOutput<T>) {
    (KeyDecl::of::<T>(key), |ctx, output| {
        serde_json::to_value(output).map_err(|e| ctx.fail(format!("the result does not serialise: {e}")))
    })
}

/// The output key `key` of a `#[agent]` function returning `Option<T>`: declared as `T`; `None` is stored
/// as `null` (the key is left absent). See [`declared_output`].
pub fn declared_optional_output<T: AgentOutput>(key: &str) -> (KeyDecl, WriteOutput<Option<T>>) {
    (KeyDecl::of::<T>(key), |ctx, output| {
        serde_json::to_value(output).map_err(|e| ctx.fail(format!("the result does not serialise: {e}")))
    })
}

/// A parameter `key` of a `#[agent]` function that is not one of its inputs (`inputs(..)` lists the others):
/// read from the state when the agent runs, without activating it (`Option<T>`: `None` when absent).
pub fn declared_context<T: AgentInput>() -> ReadInput<T> {
    |ctx, key| ctx.read_as(key, ctx.view().get(key))
}

/// The result of a `#[agent(reply_only)]` function: returned to the caller (a supervisor, a typed call)
/// without being written to a state key. See [`declared_output`].
pub fn declared_reply<T: AgentOutput>() -> WriteOutput<T> {
    |ctx, output| serde_json::to_value(output).map_err(|e| ctx.fail(format!("the result does not serialise: {e}")))
}

/// The body of a `#[agent]` function's agent: its failures as [`Stop::Failed`] (such a function cannot
/// suspend the run).
pub async fn leaf_body(body: impl Future<Output = Result<Value, AgentError>>) -> Result<Value, Stop> {
    body.await.map_err(Stop::Failed)
}

/// A type a `#[agent(update)]` function returns: a state update, each field a key.
#[diagnostic::on_unimplemented(
    message = "`#[agent(update)]`: return type `{Self}` cannot be a state update",
    label = "not serialisable",
    note = "an `update` agent returns a struct or map implementing `serde::Serialize`: each field is a state key"
)]
pub trait AgentUpdate: Serialize {}

impl<T: Serialize> AgentUpdate for T {}

/// Writes the result of a `#[agent(update)]` function: each field of the object it serialises to is written
/// to the state key of its name, in one step, except `null` fields (a `None` leaves its key as it is). The
/// idea is a graph node returning a partial state update (LangGraph) or a scope action writing several keys.
///
/// # Errors
/// [`AgentError::Failed`] naming the agent when the result does not serialise to an object.
pub async fn write_update<T: AgentUpdate>(ctx: &InvocationContext, update: &T) -> Result<Value, AgentError> {
    let value = serde_json::to_value(update).map_err(|e| ctx.fail(format!("the update does not serialise: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(
            ctx.fail(format!("an `update` agent returns a struct or map whose fields are state keys, not {value}"))
        );
    };
    for (key, value) in fields {
        if !value.is_null() {
            ctx.write(key, value).await?;
        }
    }
    Ok(Value::Null)
}

/// A type a `#[resource]` parameter takes: cloned into each call of the agent, which may run on any thread.
#[diagnostic::on_unimplemented(
    message = "`#[resource]`: `{Self}` cannot be shared by an agent's calls",
    label = "not `Clone + Send + Sync + 'static`",
    note = "a resource is cloned into each call, on any thread: wrap it as `Arc<Mutex<..>>` or use a `Send + Sync` handle"
)]
pub trait AgentResource: Clone + Send + Sync + 'static {}

impl<T: Clone + Send + Sync + 'static> AgentResource for T {}

/// The value of `#[resource]` parameter `param` of agent `agent`, from `resources` (see [`Resources::get`]).
///
/// # Errors
/// [`crate::BuildError::Invalid`] naming the agent, the parameter and the type when no value of type `T` was given.
pub fn resource<T: AgentResource>(resources: &Resources, agent: &str, param: &str) -> Result<T, crate::BuildError> {
    resources.get::<T>(agent, param)
}

/// Values the `#[resource]` parameters of `#[agent]` functions take, by type (a ledger, a client, a pool):
/// given once to the builder of an `#[agents]` trait (`.resource(value)`) and cloned into every agent that
/// declares a parameter of its type. The idea is axum's `Extension`: shared state found by type.
#[derive(Clone, Default)]
pub struct Resources {
    values: std::collections::HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resources").field("count", &self.values.len()).finish()
    }
}

impl Resources {
    /// No resources.
    pub fn new() -> Self {
        Resources::default()
    }

    /// Adds `value`, replacing a value of the same type.
    pub fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(std::any::TypeId::of::<T>(), Arc::new(value));
    }

    /// A clone of the value of type `T` that `#[resource]` parameter `param` of agent `agent` takes.
    ///
    /// # Errors
    /// [`crate::BuildError::Invalid`] naming the agent, the parameter and the type when no value of type `T` was
    /// given.
    pub fn get<T: Clone + Send + Sync + 'static>(&self, agent: &str, param: &str) -> Result<T, crate::BuildError> {
        self.values.get(&std::any::TypeId::of::<T>()).and_then(|v| v.downcast_ref::<T>()).cloned().ok_or_else(|| {
            crate::BuildError::Invalid {
                agent: agent.to_string(),
                message: format!(
                    "`#[resource] {param}` needs a value of type `{}`: give it to the builder with `.resource(..)`",
                    std::any::type_name::<T>()
                ),
            }
        })
    }
}

/// Parameter `key` of an `#[agents]` method: its input spec, declared as `T` (optional when `optional`).
pub fn call_input<T: CallInput>(key: &str, optional: bool) -> InputSpec {
    InputSpec::of::<T>(key).optional(optional)
}

/// The output key `key` of an `#[agents]` method returning `T`, declared as `T`.
pub fn call_output<T: CallOutput>(key: &str) -> KeyDecl {
    KeyDecl::of::<T>(key)
}

/// An input of a typed call: `key` and its value as JSON (an error when it does not serialise).
pub fn arg<T: Serialize + ?Sized>(key: &'static str, value: &T) -> (&'static str, Result<Value, String>) {
    (key, serde_json::to_value(value).map_err(|e| e.to_string()))
}

/// What every typed call of an `#[agents]` trait's agents shares: the store their runs checkpoint in
/// (default: none, the runs stay in the process). Set by the trait's builder (`.store(store)`).
#[derive(Clone, Default)]
pub struct CallOptions {
    store: Option<crate::store::StoreRef>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions").field("store", &self.store.is_some()).finish()
    }
}

impl CallOptions {
    /// Checkpoints every call's run in `store` (a `MemoryStore`, a `SledStore`, a PostgreSQL store).
    pub fn set_store<S: crate::store::CheckpointStore>(&mut self, store: S) {
        self.store = Some(Arc::new(store));
    }
}

/// Invokes `agent` as one run with `inputs` (a `null` input is left out) and returns its result as `T`.
///
/// # Errors
/// As [`call_with`].
pub async fn call<T: DeserializeOwned>(
    agent: &AgentRef,
    inputs: Vec<(&'static str, Result<Value, String>)>,
) -> Result<T, Stop> {
    call_with(agent, inputs, None, &CallOptions::default()).await
}

/// Invokes `agent` as one run with `inputs` (a `null` input is left out), under `memory_id` when given (a
/// `#[memory_id]` parameter: the original's `@MemoryId`) and with `options`, and returns its result as `T`:
/// what a method of an `#[agents]` trait does.
///
/// # Errors
/// [`Stop::Failed`] with the run's error, or an [`AgentError::Coercion`] naming the agent's output key when an
/// input does not serialise or the result does not deserialise as `T`; [`Stop::Suspended`] when the run waits
/// for a human (resume it through the agent: [`AgentRef::resume`] with the run id); [`Stop::Drained`] when
/// drained.
pub async fn call_with<T: DeserializeOwned>(
    agent: &AgentRef,
    inputs: Vec<(&'static str, Result<Value, String>)>,
    memory_id: Option<String>,
    options: &CallOptions,
) -> Result<T, Stop> {
    let spec = agent.spec();
    let coercion = |key: &str, value: String, expected: String| AgentError::Coercion {
        agent: spec.name.clone(),
        path: "root".to_string(),
        key: key.to_string(),
        value,
        expected,
    };
    let mut request = agent.invoke();
    if let Some(id) = memory_id {
        request = request.memory_id(id);
    }
    if let Some(store) = &options.store {
        request = request.store_ref(store.clone());
    }
    for (key, value) in inputs {
        match value {
            Ok(Value::Null) => {}
            Ok(value) => request = request.input(key, value),
            Err(e) => return Err(coercion(key, "(not serialisable)".to_string(), e).into()),
        }
    }
    let outcome = request.await?;
    match outcome.result {
        crate::run::RunResult::Completed(value) => T::deserialize(&value)
            .map_err(|e| {
                let key = spec.output_key.as_deref().unwrap_or("the result");
                if value.is_null() {
                    return AgentError::failed(
                        spec.name.clone(),
                        "root",
                        format!(
                            "the run ended without a result (`{key}` was never written), where the call returns {}",
                            std::any::type_name::<T>()
                        ),
                    );
                }
                AgentError::WrongType {
                    agent: spec.name.clone(),
                    path: "root".to_string(),
                    key: key.to_string(),
                    expected: format!("{} to be returned ({e})", std::any::type_name::<T>()),
                    found: value.to_string(),
                }
            })
            .map_err(Stop::Failed),
        crate::run::RunResult::Suspended { pending } => Err(Stop::Suspended(pending)),
        crate::run::RunResult::Drained => Err(Stop::Drained),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::agent_spec::SpecBuilder;

    struct Spec(AgentSpec);

    impl SpecBuilder for Spec {
        fn spec_mut(&mut self) -> &mut AgentSpec {
            &mut self.0
        }
    }

    #[tokio::test]
    async fn a_declared_function_runs_and_its_call_is_typed() {
        let (x, read) = declared_input::<i64>("x");
        let (y, write) = declared_output::<i64>("y");
        let spec = Spec(AgentSpec::new("double", "closure")).input(x).output_key(y).0;
        let agent = fn_agent(spec, move |ctx| {
            Box::pin(async move {
                let x = read(ctx, "x")?;
                Ok(write(ctx, &(x * 2))?)
            })
        });
        let y: i64 = call(&agent, vec![arg("x", &21)]).await.unwrap();
        assert_eq!(y, 42);
        let err = call::<String>(&agent, vec![arg("x", &1)]).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "agent `double` (root): key `y` must be alloc::string::String to be returned (invalid type: integer \
             `2`, expected a string), found 2"
        );
        let err = call::<i64>(&agent, vec![("x", Ok(json!(null)))]).await.unwrap_err();
        assert_eq!(err.to_string(), "agent `double` (root): missing argument `x`");
    }
}
