//! The human-in-the-loop agent: asks a person and returns the answer.
//!
//! In `suspend` mode (default) an unanswered question suspends the run: the run journals its progress,
//! releases everything and reports the pending response; answering it (in this process or any later one)
//! and resuming continues at this agent. In `pending` mode the agent waits in-process until the answer is
//! delivered with `Registry::answer`. The response id defaults to the agent's path (`root/1`), which is
//! stable and unique in the system; inside a parallel mapper the item is appended (`root/1#0`, `root/1#1`, see
//! [`InvocationContext::item`]), to a set id too, so that every item asks its own question. Answers are
//! matched by id and used once.
//!
//! A question may have a deadline ([`Deadline`], SPEC.md §3): it is kept with the pending response, so it
//! survives restarts and holds across resumptions; an answer after it is refused, and at it the step does
//! what [`OnTimeout`] says — fail, use a default value, or ask another human step (whose own deadline then
//! applies).
//!
//! Follows LangChain4j agentic's `HumanInTheLoop` agent; suspension across restarts and deadlines are ours.

use std::sync::Arc;
use std::time::Duration;

use agentic_engine::{
    Agent, AgentError, AgentRef, AgentSpec, InputSpec, InvocationContext, SpecBuilder, Stop, ValueType, now_ms,
    parse_rfc3339_ms, rfc3339_ms,
};
use serde_json::Value;

use crate::error::ExprError;
use crate::expr::{Expression, Template};

/// When a human step times out (SPEC.md §3): counted from the moment the question is first asked, or at a
/// time. Kept with the question, so a resumption or a restart does not move it.
#[derive(Debug)]
pub enum Deadline {
    /// This long after the question is first asked.
    After(Duration),
    /// At the RFC 3339 time this expression gives over the state, evaluated when the question is first asked.
    At(Expression),
}

/// What a human step does at its deadline without an answer (default [`OnTimeout::Fail`]).
#[derive(Default)]
pub enum OnTimeout {
    /// The step fails, saying it timed out.
    #[default]
    Fail,
    /// The value of this expression over the state becomes the answer.
    Default(Expression),
    /// This other human step is asked next, with its own prompt, deadline and timeout.
    Escalate(Arc<Human>),
}

impl std::fmt::Debug for OnTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OnTimeout::Fail => f.write_str("Fail"),
            OnTimeout::Default(e) => f.debug_tuple("Default").field(&e.source()).finish(),
            OnTimeout::Escalate(h) => f.debug_tuple("Escalate").field(&h.spec.name).finish(),
        }
    }
}

impl OnTimeout {
    /// What happens, as a phrase for someone whose late answer is refused.
    fn phrase(&self) -> String {
        match self {
            OnTimeout::Fail => "the step fails".to_string(),
            OnTimeout::Default(e) => format!("the default value `{}` is used", e.source()),
            OnTimeout::Escalate(h) => format!("it is escalated to `{}`", h.spec.name),
        }
    }
}

/// How a human agent waits for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HumanMode {
    /// Suspend the run until the response is answered (survives restarts).
    #[default]
    Suspend,
    /// Wait in-process, holding the run, until the answer arrives.
    Pending,
}

/// Checks an answer against a Rust type (see [`HumanBuilder::returns`]).
type Checker = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// A human-in-the-loop agent. Its result is the answer: JSON when the answer text parses as JSON, else the
/// string. With a declared output type (a string, a number, ...) the answer is coerced to it; an answer that
/// does not fit is refused and the question asked again, saying why, so a wrong answer never reaches the state.
pub struct Human {
    spec: AgentSpec,
    prompt: Template,
    response_id: Option<String>,
    mode: HumanMode,
    checker: Option<Checker>,
    deadline: Option<Deadline>,
    on_timeout: OnTimeout,
}

/// Builder of a [`Human`] agent. Defaults: mode suspend, response id = the agent's path (plus the mapper
/// item, inside a parallel mapper), inputs = the prompt's variables.
pub struct HumanBuilder {
    spec: AgentSpec,
    prompt: Template,
    response_id: Option<String>,
    mode: HumanMode,
    checker: Option<Checker>,
    deadline: Option<Deadline>,
    on_timeout: OnTimeout,
}

impl SpecBuilder for HumanBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl Human {
    /// A human agent named `name` asking `prompt` (a minijinja template over the state).
    ///
    /// # Errors
    /// [`ExprError::Syntax`] when the prompt does not compile.
    pub fn builder(name: impl Into<String>, prompt: &str) -> Result<HumanBuilder, ExprError> {
        let prompt = Template::compile(prompt)?;
        let mut spec = AgentSpec::new(name, "human");
        spec.inputs = prompt
            .variables()
            .into_iter()
            .map(|v| {
                let optional = prompt.optional_variables().contains(&v);
                InputSpec::new(v).optional(optional)
            })
            .collect();
        Ok(HumanBuilder {
            spec,
            prompt,
            response_id: None,
            mode: HumanMode::Suspend,
            checker: None,
            deadline: None,
            on_timeout: OnTimeout::Fail,
        })
    }
}

impl HumanBuilder {
    /// Sets the response id (default: the agent's path); inside a parallel mapper the item is appended.
    pub fn response_id(mut self, id: impl Into<String>) -> Self {
        self.response_id = Some(id.into());
        self
    }

    /// Sets the mode (default [`HumanMode::Suspend`]).
    pub fn mode(mut self, mode: HumanMode) -> Self {
        self.mode = mode;
        self
    }

    /// Answers `T`: the output type is `T`'s ([`agentic_engine::StateType`]) and an answer that does not
    /// deserialise as `T` (after coercion: `"3"` for an integer) is refused and asked again. What a `#[human]`
    /// method returning `T` builds.
    pub fn returns<T: serde::de::DeserializeOwned + agentic_engine::StateType>(mut self) -> Self {
        self.spec.output_type = T::value_type();
        self.spec.output_rust_type = Some(T::rust_type().to_string());
        self.checker = Some(Arc::new(|v: &Value| T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())));
        self
    }

    /// Sets the question's deadline (none by default: it waits for ever).
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets what happens at the deadline (default [`OnTimeout::Fail`]; without a deadline it never applies).
    pub fn on_timeout(mut self, on_timeout: OnTimeout) -> Self {
        self.on_timeout = on_timeout;
        self
    }

    /// Builds the agent.
    pub fn build(self) -> AgentRef {
        AgentRef::new(self.into_human())
    }

    /// Builds the agent as a [`Human`] value: the target of another step's [`OnTimeout::Escalate`].
    pub fn into_human(self) -> Human {
        Human {
            spec: self.spec,
            prompt: self.prompt,
            response_id: self.response_id,
            mode: self.mode,
            checker: self.checker,
            deadline: self.deadline,
            on_timeout: self.on_timeout,
        }
    }
}

impl Human {
    /// The answer as the agent returns it, or why it is refused: coerced to the declared output type (a
    /// string answer stays the text for a string type), then checked against the declared Rust type.
    fn accept(&self, answer: Value) -> Result<Value, String> {
        let shown = answer.to_string();
        let value = match self.spec.output_type {
            ValueType::Any => parse_answer(answer),
            ValueType::String if answer.is_string() => answer,
            declared => {
                let parsed = parse_answer(answer);
                declared.coerce(&parsed).ok_or_else(|| format!("the answer {shown} is not {}", article(declared)))?
            }
        };
        if let Some(check) = &self.checker {
            check(&value).map_err(|e| format!("the answer {shown} does not fit: {e}"))?;
        }
        Ok(value)
    }
}

/// `an integer`, `a string`, ...: a declared type in a sentence.
fn article(value_type: ValueType) -> String {
    let name = value_type.to_string();
    let an = name.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {name}", if an { "an" } else { "a" })
}

/// An answer as the agent returns it: a string holding JSON becomes that JSON.
fn parse_answer(answer: Value) -> Value {
    match answer {
        Value::String(s) => serde_json::from_str::<Value>(&s).unwrap_or(Value::String(s)),
        other => other,
    }
}

impl Agent for Human {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let base = self.response_id.as_deref().unwrap_or_else(|| ctx.path());
        let id = match ctx.item() {
            Some(item) => [base, item].concat(),
            None => base.to_string(),
        };
        self.ask(ctx, id).await
    }

    fn may_suspend(&self) -> bool {
        self.suspends()
    }
}

impl Human {
    /// Whether this step, or a step it escalates to, suspends the run.
    fn suspends(&self) -> bool {
        self.mode == HumanMode::Suspend || matches!(&self.on_timeout, OnTimeout::Escalate(h) if h.suspends())
    }

    /// Asks this step's question as response `id` (or, once it timed out, does what [`OnTimeout`] says).
    fn ask<'a>(
        &'a self,
        ctx: &'a InvocationContext,
        id: String,
    ) -> futures::future::BoxFuture<'a, Result<Value, Stop>> {
        Box::pin(async move {
            let escalated = format!("{id}>{}", self.escalation_name());
            if let OnTimeout::Escalate(next) = &self.on_timeout
                && next.reached(ctx, &escalated).await
            {
                // Timed out before: the escalation (or one further down its chain) is the question asked now.
                return next.ask(ctx, escalated).await;
            }
            let render = || {
                self.prompt.render_inputs(&ctx.view(), ctx.inputs()).map_err(|message| AgentError::Expression {
                    agent: ctx.agent_name().to_string(),
                    path: ctx.path().to_string(),
                    what: "prompt".to_string(),
                    message,
                })
            };
            let mut refused = None;
            if let Some(answer) = ctx.human().take(&id).await {
                match self.accept(answer) {
                    Ok(value) => return Ok(value),
                    Err(reason) => refused = Some(reason),
                }
            }
            let deadline_ms = match ctx.human().suspension(&id).await.and_then(|p| p.deadline_ms) {
                Some(kept) => Some(kept),
                None => self.deadline_ms(ctx)?,
            };
            let now_ms = now_ms();
            if deadline_ms.is_some_and(|d| d <= now_ms) {
                return self.timed_out(ctx, id, escalated, deadline_ms.unwrap_or_default()).await;
            }
            let mut prompt = render()?;
            let question = |prompt: String| {
                let mut pending = ctx.human().question(id.clone(), prompt);
                pending.deadline_ms = deadline_ms;
                pending.on_timeout = deadline_ms.map(|_| self.on_timeout.phrase());
                pending
            };
            match self.mode {
                HumanMode::Suspend => {
                    if let Some(reason) = refused {
                        prompt = format!("{prompt}\n({reason})");
                    }
                    Err(ctx.human().suspend_pending(question(prompt)))
                }
                HumanMode::Pending => {
                    let asked = prompt.clone();
                    loop {
                        tracing::info!(agent = ctx.agent_name(), response_id = %id, "waiting for a human answer: {prompt}");
                        let Some(answer) = ctx.human().ask_until(question(prompt.clone())).await else {
                            let deadline = deadline_ms.unwrap_or_default();
                            return self.timed_out(ctx, id, escalated, deadline).await;
                        };
                        match self.accept(answer) {
                            Ok(value) => return Ok(value),
                            Err(reason) => {
                                tracing::warn!(agent = ctx.agent_name(), response_id = %id, "{reason}");
                                // Asked again, saying why the answer was refused.
                                prompt = format!("{asked}\n({reason})");
                            }
                        }
                    }
                }
            }
        })
    }

    /// Whether this step, asked as response `id`, or a step its timeout escalates to (`id>next`, and so on
    /// down the chain), was asked before in this run: a question of theirs is kept or answered.
    async fn reached(&self, ctx: &InvocationContext, id: &str) -> bool {
        let (mut step, mut id) = (self, id.to_string());
        loop {
            if ctx.human().suspension(&id).await.is_some() || ctx.human().peek(&id).await.is_some() {
                return true;
            }
            match &step.on_timeout {
                OnTimeout::Escalate(next) => {
                    id = format!("{id}>{}", step.escalation_name());
                    step = next;
                }
                _ => return false,
            }
        }
    }

    /// The deadline of a question asked now, if the step has one.
    fn deadline_ms(&self, ctx: &InvocationContext) -> Result<Option<u64>, AgentError> {
        match &self.deadline {
            None => Ok(None),
            Some(Deadline::After(d)) => Ok(Some(now_ms().saturating_add(d.as_millis() as u64))),
            Some(Deadline::At(expr)) => {
                let bad = |message: String| AgentError::Expression {
                    agent: ctx.agent_name().to_string(),
                    path: ctx.path().to_string(),
                    what: "deadline".to_string(),
                    message,
                };
                let value = expr.eval_inputs(&ctx.view(), ctx.inputs()).map_err(bad)?;
                let text = value.as_str().ok_or_else(|| bad(format!("gives {value}, not an RFC 3339 time")))?;
                parse_rfc3339_ms(text).map(Some).map_err(bad)
            }
        }
    }

    /// The question `id` timed out at `deadline_ms`: what [`OnTimeout`] says.
    async fn timed_out(
        &self,
        ctx: &InvocationContext,
        id: String,
        escalated: String,
        deadline_ms: u64,
    ) -> Result<Value, Stop> {
        let at = rfc3339_ms(deadline_ms);
        let mut asked = ctx.human().question(id.clone(), String::new());
        asked.deadline_ms = Some(deadline_ms);
        asked.on_timeout = Some(self.on_timeout.phrase());
        ctx.human().record_timeout(asked);
        tracing::info!(agent = ctx.agent_name(), response_id = %id, "the human step timed out at {at}: {}", self.on_timeout.phrase());
        match &self.on_timeout {
            OnTimeout::Fail => {
                Err(ctx.fail(format!("the human step `{id}` timed out at {at} without an answer")).into())
            }
            OnTimeout::Default(expr) => {
                let value = expr.eval_inputs(&ctx.view(), ctx.inputs()).map_err(|message| AgentError::Expression {
                    agent: ctx.agent_name().to_string(),
                    path: ctx.path().to_string(),
                    what: "on_timeout default".to_string(),
                    message,
                })?;
                Ok(self
                    .accept(value)
                    .map_err(|reason| ctx.fail(format!("the default value at the timeout: {reason}")))?)
            }
            OnTimeout::Escalate(next) => next.ask(ctx, escalated).await,
        }
    }

    /// The name an escalation's response id ends with (`root/1>manager`).
    fn escalation_name(&self) -> &str {
        match &self.on_timeout {
            OnTimeout::Escalate(next) => next.response_id.as_deref().unwrap_or(&next.spec.name),
            _ => "",
        }
    }
}
