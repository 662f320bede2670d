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
//! Follows LangChain4j agentic's `HumanInTheLoop` agent; suspension across restarts is ours.

use agentic_engine::{Agent, AgentError, AgentRef, AgentSpec, InputSpec, InvocationContext, SpecBuilder};
use serde_json::Value;

use crate::error::ExprError;
use crate::expr::Template;

/// How a human agent waits for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HumanMode {
    /// Suspend the run until the response is answered (survives restarts).
    #[default]
    Suspend,
    /// Wait in-process, holding the run, until the answer arrives.
    Pending,
}

/// A human-in-the-loop agent. Its result is the answer: JSON when the answer text parses as JSON, else the
/// string.
pub struct Human {
    spec: AgentSpec,
    prompt: Template,
    response_id: Option<String>,
    mode: HumanMode,
}

/// Builder of a [`Human`] agent. Defaults: mode suspend, response id = the agent's path (plus the mapper
/// item, inside a parallel mapper), inputs = the prompt's variables.
pub struct HumanBuilder {
    spec: AgentSpec,
    prompt: Template,
    response_id: Option<String>,
    mode: HumanMode,
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
        spec.inputs = prompt.variables().into_iter().map(InputSpec::new).collect();
        Ok(HumanBuilder { spec, prompt, response_id: None, mode: HumanMode::Suspend })
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

    /// Builds the agent.
    pub fn build(self) -> AgentRef {
        AgentRef::new(Human { spec: self.spec, prompt: self.prompt, response_id: self.response_id, mode: self.mode })
    }
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

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, AgentError> {
        let base = self.response_id.as_deref().unwrap_or_else(|| ctx.path());
        let id = match ctx.item() {
            Some(item) => [base, item].concat(),
            None => base.to_string(),
        };
        if let Some(answer) = ctx.take_answer(&id) {
            return Ok(parse_answer(answer));
        }
        let prompt =
            self.prompt.render_inputs(&ctx.view(), ctx.inputs()).map_err(|message| AgentError::Expression {
                agent: ctx.agent_name().to_string(),
                path: ctx.path().to_string(),
                what: "prompt".to_string(),
                message,
            })?;
        match self.mode {
            HumanMode::Suspend => Err(ctx.suspend(id, prompt)),
            HumanMode::Pending => {
                tracing::info!(agent = ctx.agent_name(), response_id = %id, "waiting for a human answer: {prompt}");
                Ok(parse_answer(ctx.wait_answer(&id).await))
            }
        }
    }

    fn may_suspend(&self) -> bool {
        self.mode == HumanMode::Suspend
    }
}
