//! The [`Agent`] trait, its object-safe companion [`DynAgent`] and the shared reference [`AgentRef`]
//! builders take and return. An agent's metadata is in `agent_spec`; what it runs with, in `invocation`.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::agent_spec::{AgentSpec, TopologyNode};
use crate::invocation::InvocationContext;
use crate::listener::{AgentListener, ListenerRef};
use crate::lock::lock;
use crate::stop::Stop;

/// Native async; store agents as [`AgentRef`] (`Arc<dyn DynAgent>`).
pub trait Agent: Send + Sync + 'static {
    /// The agent's metadata.
    fn spec(&self) -> &AgentSpec;

    /// Runs one invocation.
    ///
    /// # Errors
    /// [`Stop::Failed`] with any [`crate::AgentError`] (`?` converts one; use [`InvocationContext::fail`] for the
    /// agent's own failures); [`Stop::Suspended`] to wait for responses ([`crate::HumanView::suspend`]).
    fn invoke(&self, ctx: &InvocationContext) -> impl Future<Output = Result<Value, Stop>> + Send;

    /// Whether this agent can suspend the run (return [`Stop::Suspended`]); default false.
    fn may_suspend(&self) -> bool {
        false
    }

    /// The run was cancelled while `pending`, a question this agent asked, was open: tell whoever waits on it
    /// that nobody will answer (an A2A agent cancels the remote task that asked). Called once, after the run is
    /// recorded `cancelled`, for at most [`WITHDRAW_TIMEOUT`]; failures are the agent's to log. Default: nothing
    /// (a human's question simply ends with the run).
    fn withdraw(&self, pending: &crate::pending::PendingResponse) -> impl Future<Output = ()> + Send {
        let _ = pending;
        async {}
    }

    /// Whether this agent keeps a chat memory across invocations (such agents cannot be mapped: the
    /// concurrent items would share one conversation); default false.
    fn has_chat_memory(&self) -> bool {
        false
    }

    /// Whether this agent reports its answer as it produces it, one [`RunEvent::Token`] per text delta (an
    /// LLM agent with streaming on); default false. When the final agent of a system streams, the system's
    /// result stream carries its tokens (`InvokeRequest::stream`).
    ///
    /// [`RunEvent::Token`]: crate::listener::RunEvent::Token
    fn streams(&self) -> bool {
        false
    }
}

/// Object-safe companion of [`Agent`], implemented for every `Agent`; composites implement it directly.
pub trait DynAgent: Send + Sync + 'static {
    /// The agent's metadata.
    fn spec(&self) -> &AgentSpec;

    /// Runs one invocation (boxed future).
    fn invoke_dyn<'a>(&'a self, ctx: &'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>>;

    /// Withdraws an open question of this agent's at cancel (boxed future; see [`Agent::withdraw`]).
    fn withdraw_dyn<'a>(&'a self, pending: &'a crate::pending::PendingResponse) -> BoxFuture<'a, ()> {
        let _ = pending;
        Box::pin(async {})
    }

    /// Sub-agents of a composite, in declaration order (empty for leaves).
    fn sub_agents(&self) -> &[AgentRef] {
        &[]
    }

    /// Whether the engine writes the returned value to `output_key` (composites write their own).
    fn engine_writes_output(&self) -> bool {
        true
    }

    /// Extra topology details for reports (planner settings, expressions).
    fn topology_details(&self) -> Value {
        Value::Null
    }

    /// State keys a composite writes for its sub-agents before calling them ([`crate::CompositeBuilder::binds`]).
    fn bound_keys(&self) -> &[String] {
        &[]
    }

    /// Whether invoking this agent can suspend the run (a human-in-the-loop agent, or a composite containing
    /// one). Such systems are checkpointed in process by default so a suspended outcome can be resumed.
    fn may_suspend(&self) -> bool {
        false
    }

    /// Whether this agent, or one below it, keeps a chat memory (see [`Agent::has_chat_memory`]).
    fn has_chat_memory(&self) -> bool {
        false
    }

    /// Whether this agent reports its answer as `Token` events while it runs (see [`Agent::streams`]).
    fn streams(&self) -> bool {
        false
    }

    /// Listeners registered on this agent ([`AgentRef::with_listener`]).
    fn listeners(&self) -> &[crate::listener::ListenerRef] {
        &[]
    }

    /// The agent a listener wrapper wraps (so registering twice does not nest wrappers).
    #[doc(hidden)]
    fn listened_inner(&self) -> Option<&AgentRef> {
        None
    }

    /// This agent as `Any` when it is one of the engine's own kinds (a composite, which the engine runs as a
    /// supervisor actor of its own); a wrapper answers for the agent it wraps. Default: none.
    #[doc(hidden)]
    fn engine_agent(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// For composites that inherit their error handler: `true`. Their failures were already through the
    /// inherited handler at their own level, so the parent does not handle them again.
    fn inherits_error_handler(&self) -> bool {
        false
    }
}

impl<A: Agent> DynAgent for A {
    fn spec(&self) -> &AgentSpec {
        Agent::spec(self)
    }

    fn invoke_dyn<'a>(&'a self, ctx: &'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> {
        Box::pin(self.invoke(ctx))
    }

    fn may_suspend(&self) -> bool {
        Agent::may_suspend(self)
    }

    fn withdraw_dyn<'a>(&'a self, pending: &'a crate::pending::PendingResponse) -> BoxFuture<'a, ()> {
        Box::pin(self.withdraw(pending))
    }

    fn has_chat_memory(&self) -> bool {
        Agent::has_chat_memory(self)
    }

    fn streams(&self) -> bool {
        Agent::streams(self)
    }
}

/// How long a cancelled run waits for an agent to withdraw its open question ([`Agent::withdraw`]).
pub const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(5);

/// A shared reference to an agent: what builders take and return, and what you invoke.
#[derive(Clone)]
pub struct AgentRef(pub Arc<dyn DynAgent>);

impl std::fmt::Debug for AgentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AgentRef({} `{}`)", self.0.spec().kind, self.0.spec().name)
    }
}

impl AgentRef {
    /// Wraps an agent.
    pub fn new(agent: impl DynAgent) -> Self {
        AgentRef(Arc::new(agent))
    }

    /// The agent's metadata.
    pub fn spec(&self) -> &AgentSpec {
        self.0.spec()
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.0.spec().name
    }

    /// The first agent named `name` in the tree rooted here (depth first, in declaration order).
    pub fn find(&self, name: &str) -> Option<&AgentRef> {
        if self.name() == name {
            return Some(self);
        }
        self.0.sub_agents().iter().find_map(|c| c.find(name))
    }

    /// The agent tree rooted here, with stable path ids (`root`, `root/0`, `root/1/2`).
    pub fn topology(&self) -> TopologyNode {
        topology_of(self, "root".to_string())
    }

    /// The topology and its fingerprint, computed once per agent (agents do not change once built) and kept
    /// while the agent lives: a journaled run needs them at every invocation, and building them is O(agents).
    pub(crate) fn topology_cached(&self) -> (Arc<TopologyNode>, Arc<str>) {
        type Entry = (std::sync::Weak<dyn DynAgent>, Arc<TopologyNode>, Arc<str>);
        static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
        let found = lock(&CACHE).iter().find_map(|(weak, topology, fingerprint)| {
            let alive = weak.upgrade()?;
            Arc::ptr_eq(&alive, &self.0).then(|| (topology.clone(), fingerprint.clone()))
        });
        if let Some(hit) = found {
            return hit;
        }
        let topology = Arc::new(self.topology());
        let fingerprint: Arc<str> = Arc::from(topology.fingerprint());
        let mut cache = lock(&CACHE);
        // Forget agents that were dropped; keep the cache small (the most recent systems).
        cache.retain(|(weak, _, _)| weak.strong_count() > 0);
        if cache.len() >= 64 {
            cache.remove(0);
        }
        cache.push((Arc::downgrade(&self.0), topology.clone(), fingerprint.clone()));
        (topology, fingerprint)
    }
}

/// The agent tree rooted at `agent`, at `path`.
fn topology_of(agent: &AgentRef, path: String) -> TopologyNode {
    let children =
        agent.0.sub_agents().iter().enumerate().map(|(i, c)| topology_of(c, format!("{path}/{i}"))).collect();
    TopologyNode {
        spec: agent.spec().clone(),
        details: agent.0.topology_details(),
        binds: agent.0.bound_keys().to_vec(),
        children,
        path,
    }
}

/// An agent with listeners registered on it (see [`AgentRef::with_listener`]).
pub(crate) struct Listened {
    pub(crate) inner: AgentRef,
    pub(crate) listeners: Vec<ListenerRef>,
}

impl DynAgent for Listened {
    fn spec(&self) -> &AgentSpec {
        self.inner.spec()
    }

    fn invoke_dyn<'a>(&'a self, ctx: &'a InvocationContext) -> BoxFuture<'a, Result<Value, Stop>> {
        self.inner.0.invoke_dyn(ctx)
    }

    fn sub_agents(&self) -> &[AgentRef] {
        self.inner.0.sub_agents()
    }

    fn engine_writes_output(&self) -> bool {
        self.inner.0.engine_writes_output()
    }

    fn topology_details(&self) -> Value {
        self.inner.0.topology_details()
    }

    fn bound_keys(&self) -> &[String] {
        self.inner.0.bound_keys()
    }

    fn may_suspend(&self) -> bool {
        self.inner.0.may_suspend()
    }

    fn withdraw_dyn<'a>(&'a self, pending: &'a crate::pending::PendingResponse) -> BoxFuture<'a, ()> {
        self.inner.0.withdraw_dyn(pending)
    }

    fn has_chat_memory(&self) -> bool {
        self.inner.0.has_chat_memory()
    }

    fn streams(&self) -> bool {
        self.inner.0.streams()
    }

    fn inherits_error_handler(&self) -> bool {
        self.inner.0.inherits_error_handler()
    }

    fn listeners(&self) -> &[ListenerRef] {
        &self.listeners
    }

    fn listened_inner(&self) -> Option<&AgentRef> {
        Some(&self.inner)
    }

    fn engine_agent(&self) -> Option<&dyn std::any::Any> {
        self.inner.0.engine_agent()
    }
}

impl AgentRef {
    /// This agent with `listener` registered on it (it sees this agent's invocations, and its sub-agents'
    /// when the listener is inherited). Registering several keeps their order.
    pub fn with_listener(&self, listener: impl AgentListener) -> AgentRef {
        self.with_listener_ref(Arc::new(listener))
    }

    /// As [`AgentRef::with_listener`], with a shared listener.
    pub fn with_listener_ref(&self, listener: ListenerRef) -> AgentRef {
        let mut listeners = self.0.listeners().to_vec();
        listeners.push(listener);
        let inner = match self.0.listened_inner() {
            Some(inner) => inner.clone(),
            None => self.clone(),
        };
        AgentRef::new(Listened { inner, listeners })
    }
}
