//! The [`InvocationContext`] an agent runs with: its resolved inputs, where it runs, its writes and failures;
//! and three narrow views of what an invocation asks of its run: [`HumanView`] (`ctx.human()`: answers,
//! questions, suspensions), [`UsageView`] (`ctx.usage()`: budgets and a model endpoint's capacity around a
//! model call) and [`RunView`] (`ctx.run()`: the scope, compensations, events, trace context, idempotency).

mod calls;
mod human;
mod run;
mod usage;

pub use calls::{CallsView, TapedCall};
pub use human::HumanView;
pub use run::RunView;
pub use usage::UsageView;

use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::AgentError;
use crate::lock::lock;
use crate::run_actor::{Frame, RunHandle};
use crate::scope::{ScopeView, merge_delta};

/// Everything an invocation runs with: its resolved inputs, the run's scope and identity.
pub struct InvocationContext {
    /// The run this invocation belongs to.
    pub(crate) handle: RunHandle,
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
    /// Calls journaled with the invocation's completion ([`CallsView::with_step`]).
    pub(crate) step_calls: Mutex<Vec<crate::tool_call::CallEntry>>,
    /// How many invocations of this agent at this path and item completed before it, once asked
    /// ([`RunView::idempotency_key`]).
    pub(crate) occurrence: std::sync::OnceLock<u32>,
}

impl InvocationContext {
    /// The context of one invocation of agent `name` in `run`, with its resolved `inputs`, its `frame` and the
    /// actor running it; `keep_writes` when its writes are kept for its step record (a journaled run, an async
    /// agent).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        run: RunHandle,
        name: Arc<str>,
        inputs: Map<String, Value>,
        frame: Frame,
        actor: Option<ractor::ActorCell>,
        keep_writes: bool,
        listeners: Arc<[crate::listener::ListenerRef]>,
        child_listeners: Arc<[crate::listener::ListenerRef]>,
    ) -> Self {
        InvocationContext {
            handle: run,
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
            step_calls: Mutex::new(Vec::new()),
        }
    }

    /// Waits while an async agent is producing any of `keys` (as seen from this invocation's mapper item):
    /// what an agent that reads state keys beyond its declared inputs (which are waited for before it starts)
    /// calls before it reads them. Returns at once when none is in the making.
    ///
    /// # Errors
    /// The error of the async agent that was producing one of them, with its original variant.
    pub async fn wait_for_keys(&self, keys: &[String]) -> Result<(), AgentError> {
        let layer = self.frame.layer.as_ref();
        let view = self.handle.scope.view_at(layer);
        for key in keys.iter().filter(|k| !self.inputs.contains_key(k.as_str())) {
            if view.is_pending(key) || view.has_async_error(key) {
                Box::pin(self.handle.scope.read_waiting_at(layer, key)).await?;
            }
        }
        Ok(())
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
        self.handle.scope.view_at(self.frame.layer.as_ref())
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
            self.handle.scope.write_in(item, vec![(key, value)]).await?;
            return Ok(());
        }
        self.handle.scope.write_in(item, vec![(key.clone(), value.clone())]).await?;
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

    /// The run id (memory id).
    pub fn run_id(&self) -> &str {
        &self.handle.run_id
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

    /// Which item of a parallel mapper this invocation serves, inherited by a mapped composite's sub-agents:
    /// `#3` for the fourth item, `#3#0` for the first item of a mapper nested in it; `None` outside mappers.
    /// The agent's path is the same for every item, so whatever must be told apart per item (a human step's
    /// response id, an idempotency key) appends this.
    pub fn item(&self) -> Option<&str> {
        self.frame.item.as_deref()
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

    /// Answers, questions and suspensions: what a human step (or an agent waiting for one) asks of the run.
    pub fn human(&self) -> HumanView<'_> {
        HumanView { ctx: self }
    }

    /// Budgets and a model endpoint's capacity, around each model call of this invocation (SPEC.md §3).
    pub fn usage(&self) -> UsageView<'_> {
        UsageView { ctx: self }
    }

    /// The model turns and tool calls of this invocation as its run journals them (SPEC.md §4).
    pub fn calls(&self) -> CallsView<'_> {
        CallsView { ctx: self }
    }

    /// The run beyond this invocation: its scope, compensations, events, trace context and idempotency keys.
    pub fn run(&self) -> RunView<'_> {
        RunView { ctx: self }
    }
}
