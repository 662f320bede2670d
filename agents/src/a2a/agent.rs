//! [`A2aAgent`]: a remote A2A agent as a non-AI agent of a workflow.

use std::sync::Arc;
use std::time::Duration;

use agentic_engine::{
    Agent, AgentError, AgentRef, AgentSpec, InvocationContext, PendingResponse, RunEvent, SpecBuilder, Stop,
};
use serde_json::{Value, json};

use super::client::{A2aClient, A2aError};
use super::types::{
    Message, SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskRequest,
    TaskState, error_code,
};
use crate::error::ExprError;
use crate::expr::Template;

/// Where the tenant of an [`A2aAgent`]'s messages comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum A2aTenant {
    /// The card's: its interface's tenant, else the one a card URL names
    /// (`/.well-known/{tenant}/agent-card.json`), else none (the default).
    #[default]
    FromCard,
    /// This tenant for every message.
    Fixed(String),
    /// The tenant the state holds under this key at each call (none when the key is absent or empty).
    FromKey(String),
}

/// A remote A2A agent as an agent: each invocation sends one message (a template over the state, or the
/// inputs' values one per line) and returns the remote agent's answer — its artifacts' text, else its last
/// message. Follows the original's A2A client agent (`a2aBuilder`).
///
/// - **Conversations**: with a `context_key`, the remote context id is read from the state (when present) and
///   written back after the call, so that the next call continues the same conversation; with a `task_key`,
///   the task id likewise, written only while the task is open (null once it ended).
/// - **Input required**: a remote task in `input-required` or `auth-required` suspends the run with a
///   pending response whose prompt is the remote agent's question (response id: the agent's path, plus the
///   mapper item); the remote task and context ids are journaled with it. The answer, on resume (in this
///   process or a later one), is sent as the next message of the same remote task.
/// - **Streaming**: when the card says the agent streams and someone listens to the run, the message is sent
///   with `SendStreamingMessage` and the text of each artifact chunk is reported as a [`RunEvent::Token`].
/// - **Errors** name the agent and the remote URL: an unreachable agent, a card that does not parse, a
///   JSON-RPC error, a remote task that failed, was cancelled or rejected.
///
/// ```no_run
/// # async fn f() -> Result<(), agentic_agents::a2a::A2aError> {
/// use agentic_agents::a2a::{A2aAgent, A2aClient};
/// use agentic_engine::SpecBuilder;
/// let writer = A2aAgent::builder(A2aClient::new("writer", "http://127.0.0.1:9999"))
///     .inputs(["topic"])
///     .output_key("story")
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
pub struct A2aAgent {
    spec: AgentSpec,
    client: Arc<A2aClient>,
    tenant: A2aTenant,
    message: Option<Template>,
    context_key: Option<String>,
    task_key: Option<String>,
    streaming: bool,
    response_id: Option<String>,
}

/// Builder of an [`A2aAgent`]. Defaults: named after the card's agent (`build`) or the client
/// (`build_lazy`); description from the card (`build`); no inputs (name them: the card does not); the message
/// is the inputs' values, one per line; tenant [`A2aTenant::FromCard`]; no context or task key; streaming when
/// the card allows it and the run is observed; response id = the agent's path.
pub struct A2aAgentBuilder {
    spec: AgentSpec,
    client: Arc<A2aClient>,
    tenant: A2aTenant,
    message: Option<Template>,
    context_key: Option<String>,
    task_key: Option<String>,
    streaming: bool,
    response_id: Option<String>,
}

impl SpecBuilder for A2aAgentBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl A2aAgent {
    /// A builder over the remote agent of `client`.
    pub fn builder(client: Arc<A2aClient>) -> A2aAgentBuilder {
        A2aAgentBuilder {
            spec: AgentSpec::new("", "a2a"),
            client,
            tenant: A2aTenant::FromCard,
            message: None,
            context_key: None,
            task_key: None,
            streaming: true,
            response_id: None,
        }
    }
}

impl A2aAgentBuilder {
    /// The agent's name (default: the card's agent name, or the client's name when built lazily).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.spec.name = name.into();
        self
    }

    /// The message to send: a minijinja template over the state and the inputs (default: the inputs' values,
    /// one per line).
    ///
    /// # Errors
    /// [`ExprError::Syntax`] when the template does not compile.
    pub fn message(mut self, template: &str) -> Result<Self, ExprError> {
        self.message = Some(Template::compile(template)?);
        Ok(self)
    }

    /// The tenant of the messages (default [`A2aTenant::FromCard`]).
    pub fn tenant(mut self, tenant: A2aTenant) -> Self {
        self.tenant = tenant;
        self
    }

    /// The state key of the remote context id: read before the call when present, written after it.
    pub fn context_key(mut self, key: impl Into<String>) -> Self {
        self.context_key = Some(key.into());
        self
    }

    /// The state key of the remote task id: read before the call when present (the message then continues
    /// that task), written after it while the task is open, null once it ended.
    pub fn task_key(mut self, key: impl Into<String>) -> Self {
        self.task_key = Some(key.into());
        self
    }

    /// Whether to stream when the card allows it and the run is observed (default true); the result is the
    /// same either way.
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// The id of the pending response a remote `input-required` suspends the run with (default: the agent's
    /// path); inside a parallel mapper the item is appended.
    pub fn response_id(mut self, id: impl Into<String>) -> Self {
        self.response_id = Some(id.into());
        self
    }

    /// Reads the card (connecting to the remote agent) and builds the agent with the card's name and
    /// description, where not set on the builder.
    ///
    /// # Errors
    /// [`A2aError::Card`]: the card cannot be read, does not parse, or offers no JSON-RPC interface.
    pub async fn build(mut self) -> Result<AgentRef, A2aError> {
        self.client.endpoint().await?;
        let card = self.client.card().await?;
        if self.spec.name.is_empty() {
            self.spec.name = card.name.clone();
        }
        if self.spec.description.is_empty() {
            self.spec.description = card.description.clone();
        }
        Ok(self.finish())
    }

    /// Builds the agent without reading the card: the card is read at the first invocation. This is how specs
    /// build `kind: a2a` agents, so that building a workflow reaches no server.
    pub fn build_lazy(mut self) -> AgentRef {
        if self.spec.name.is_empty() {
            self.spec.name = self.client.name().to_string();
        }
        self.finish()
    }

    fn finish(self) -> AgentRef {
        AgentRef::new(A2aAgent {
            spec: self.spec,
            client: self.client,
            tenant: self.tenant,
            message: self.message,
            context_key: self.context_key,
            task_key: self.task_key,
            streaming: self.streaming,
            response_id: self.response_id,
        })
    }
}

/// A state value as an id: a non-empty string.
fn id_at(view: &agentic_engine::ScopeView, key: Option<&str>) -> Option<String> {
    key.and_then(|k| view.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string)
}

/// A value as message text: a string as it is, anything else as JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl A2aAgent {
    fn response_id(&self, ctx: &InvocationContext) -> String {
        let base = self.response_id.as_deref().unwrap_or_else(|| ctx.path());
        match ctx.item() {
            Some(item) => [base, item].concat(),
            None => base.to_string(),
        }
    }

    /// The text of a new message: the template, else the inputs' values one per line.
    fn text(&self, ctx: &InvocationContext) -> Result<String, AgentError> {
        let text = match &self.message {
            Some(t) => t.render_inputs(&ctx.view(), ctx.inputs()).map_err(|message| AgentError::Expression {
                agent: ctx.agent_name().to_string(),
                path: ctx.path().to_string(),
                what: "message".to_string(),
                message,
            })?,
            None => ctx.inputs().values().map(text_of).collect::<Vec<_>>().join("\n"),
        };
        if text.trim().is_empty() {
            return Err(ctx.fail(format!(
                "nothing to send to A2A agent `{}`: name the inputs, or give a message template",
                self.client.name()
            )));
        }
        Ok(text)
    }

    async fn send(
        &self,
        ctx: &InvocationContext,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aError> {
        if self.streaming && ctx.run().has_listeners() && self.client.card().await?.streams() {
            let mut on_event = |event: &StreamResponse| {
                if let StreamResponse::ArtifactUpdate(e) = event {
                    let text = super::types::parts_text(&e.artifact.parts);
                    if !text.is_empty() {
                        ctx.run().emit(&RunEvent::Token {
                            run_id: ctx.run_id().to_string(),
                            path: ctx.path().to_string(),
                            text,
                        });
                    }
                }
            };
            return self.client.send_streaming_message(request, &mut on_event).await;
        }
        self.client.send_message(request).await
    }

    /// Polls a task that is still submitted or working until it ends or is interrupted. Dropped before (our run
    /// cancelled, the invocation timed out), it asks the remote agent to cancel the task.
    async fn settle(&self, mut task: Task, tenant: Option<String>) -> Result<Task, A2aError> {
        let request = |task: &Task| TaskRequest { tenant: tenant.clone(), id: task.id.clone(), history_length: None };
        let mut guard = CancelOnDrop { client: self.client.clone(), request: None };
        let mut wait = Duration::from_millis(20);
        while !(task.status.state.is_terminal() || task.status.state.is_interrupted()) {
            guard.request = Some(request(&task));
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
            task = self.client.get_task(request(&task)).await?;
        }
        guard.request = None;
        Ok(task)
    }
}

/// Asks the remote agent to cancel a task when dropped armed: the invocation waiting for it ended first.
struct CancelOnDrop {
    client: Arc<A2aClient>,
    request: Option<TaskRequest>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(request) = self.request.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let client = self.client.clone();
        runtime.spawn(async move {
            let id = request.id.clone();
            match client.cancel_task(request).await {
                Ok(_) => tracing::info!(agent = client.name(), task = %id, "cancelled the remote task"),
                Err(e) => tracing::warn!(agent = client.name(), task = %id, "cannot cancel the remote task: {e}"),
            }
        });
    }
}

impl A2aAgent {
    /// One invocation: sends the message (or the answer continuing a remote task) and settles the task.
    async fn exchange(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let id = self.response_id(ctx);
        let view = ctx.view();
        let fail = |e: A2aError| ctx.fail_with(e.into());
        // Resumed from a remote `input-required`: the answer continues the same remote task.
        let (message, tenant, answered) = match ctx.human().suspension(&id).await {
            Some(pending) => {
                let Some(answer) = ctx.human().peek(&id).await else {
                    return Err(ctx.human().suspend_with(id, pending.prompt, pending.data));
                };
                let field = |k: &str| pending.data.get(k).and_then(Value::as_str).map(str::to_string);
                let mut message = Message::user_text(text_of(&answer));
                message.task_id = field("task_id");
                message.context_id = field("context_id");
                (message, field("tenant"), true)
            }
            None => {
                let mut message = Message::user_text(self.text(ctx)?);
                message.context_id = id_at(&view, self.context_key.as_deref());
                message.task_id = id_at(&view, self.task_key.as_deref());
                let tenant = match &self.tenant {
                    A2aTenant::FromCard => None,
                    A2aTenant::Fixed(t) => Some(t.clone()),
                    A2aTenant::FromKey(k) => id_at(&view, Some(k)),
                };
                (message, tenant, false)
            }
        };
        let lost_task = message.task_id.clone().filter(|_| answered);
        // The task at once (then polled): its id is known while it works, so that cancelling this run cancels it.
        let configuration = SendMessageConfiguration { return_immediately: Some(true), ..Default::default() };
        let request = SendMessageRequest {
            tenant: tenant.clone(),
            message,
            configuration: Some(configuration),
            ..SendMessageRequest::default()
        };
        let response = match self.send(ctx, request).await {
            Ok(response) => response,
            // The remote agent no longer knows the task it asked about (a restart lost it): no resume can
            // continue it; a fork before this step sends the message as a new task.
            Err(e @ A2aError::Rpc { code: error_code::TASK_NOT_FOUND, .. }) if lost_task.is_some() => {
                let task = lost_task.unwrap_or_default();
                let (run, at) = (ctx.run_id(), ctx.run().journaled_steps());
                let way_out = format!(
                    "the remote agent no longer knows task `{task}` (a restart of it lost the task): a resume \
                     cannot continue it; `agentic fork {run} --at {at}` starts a copy of this run that sends the \
                     message as a new task"
                );
                return Err(ctx.fail_with(agentic_engine::Cause::from(e).context(way_out)).into());
            }
            Err(e) => return Err(fail(e).into()),
        };
        if answered {
            // Used only now: a call that failed leaves the answer for the next resume.
            ctx.human().take(&id).await;
        }
        let task = match response {
            SendMessageResponse::Message(m) => {
                if let (Some(k), Some(c)) = (&self.context_key, &m.context_id) {
                    ctx.write_on_completion(k.clone(), json!(c));
                }
                if let Some(k) = &self.task_key {
                    ctx.write_on_completion(k.clone(), Value::Null);
                }
                return Ok(Value::String(m.text()));
            }
            SendMessageResponse::Task(t) => self.settle(t, tenant.clone()).await.map_err(fail)?,
        };
        if task.status.state.is_interrupted() {
            let question = task.status.message.as_ref().map(Message::text).filter(|q| !q.trim().is_empty());
            let prompt = question.unwrap_or_else(|| {
                let what = if task.status.state == TaskState::AuthRequired { "authentication" } else { "input" };
                format!("A2A agent `{}` needs {what} to continue task `{}`", self.client.name(), task.id)
            });
            let mut data =
                json!({ "task_id": task.id, "context_id": task.context_id, "state": task.status.state.v0_3() });
            if let Some(t) = tenant {
                data["tenant"] = json!(t);
            }
            return Err(ctx.human().suspend_with(id, prompt, data));
        }
        if task.status.state != TaskState::Completed {
            return Err(fail(self.client.task_error(&task).await).into());
        }
        if let Some(k) = &self.context_key {
            ctx.write_on_completion(k.clone(), json!(task.context_id));
        }
        if let Some(k) = &self.task_key {
            ctx.write_on_completion(k.clone(), Value::Null);
        }
        Ok(Value::String(task.answer().unwrap_or_default()))
    }
}

impl Agent for A2aAgent {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// Streams when asked to (the default): each artifact chunk is a `Token` event, when the card says the
    /// remote agent streams.
    fn streams(&self) -> bool {
        self.streaming
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        // The requests carry the run's trace context (W3C `traceparent`) to the remote agent.
        crate::trace_context::scoped(ctx, self.exchange(ctx)).await
    }

    fn may_suspend(&self) -> bool {
        true
    }

    /// The run was cancelled while the remote task waited for input: the remote agent is asked to cancel it.
    async fn withdraw(&self, pending: &PendingResponse) {
        let field = |k: &str| pending.data.get(k).and_then(Value::as_str).map(str::to_string);
        let Some(id) = field("task_id") else { return };
        let request = TaskRequest { tenant: field("tenant"), id: id.clone(), history_length: None };
        match self.client.cancel_task(request).await {
            Ok(_) => tracing::info!(agent = self.client.name(), task = %id, "cancelled the remote task"),
            Err(e) => tracing::warn!(agent = self.client.name(), task = %id, "cannot cancel the remote task: {e}"),
        }
    }
}
