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

use std::sync::Arc;

use agentic_engine::{Agent, AgentError, AgentRef, AgentSpec, InputSpec, InvocationContext, SpecBuilder, ValueType};
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
}

/// Builder of a [`Human`] agent. Defaults: mode suspend, response id = the agent's path (plus the mapper
/// item, inside a parallel mapper), inputs = the prompt's variables.
pub struct HumanBuilder {
    spec: AgentSpec,
    prompt: Template,
    response_id: Option<String>,
    mode: HumanMode,
    checker: Option<Checker>,
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
        Ok(HumanBuilder { spec, prompt, response_id: None, mode: HumanMode::Suspend, checker: None })
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

    /// Builds the agent.
    pub fn build(self) -> AgentRef {
        AgentRef::new(Human {
            spec: self.spec,
            prompt: self.prompt,
            response_id: self.response_id,
            mode: self.mode,
            checker: self.checker,
        })
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

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, AgentError> {
        let base = self.response_id.as_deref().unwrap_or_else(|| ctx.path());
        let id = match ctx.item() {
            Some(item) => [base, item].concat(),
            None => base.to_string(),
        };
        let render = || {
            self.prompt.render_inputs(&ctx.view(), ctx.inputs()).map_err(|message| AgentError::Expression {
                agent: ctx.agent_name().to_string(),
                path: ctx.path().to_string(),
                what: "prompt".to_string(),
                message,
            })
        };
        let mut refused = None;
        if let Some(answer) = ctx.take_answer(&id) {
            match self.accept(answer) {
                Ok(value) => return Ok(value),
                Err(reason) => refused = Some(reason),
            }
        }
        let mut prompt = render()?;
        match self.mode {
            HumanMode::Suspend => {
                if let Some(reason) = refused {
                    prompt = format!("{prompt}\n({reason})");
                }
                Err(ctx.suspend(id, prompt))
            }
            HumanMode::Pending => {
                let asked = prompt.clone();
                loop {
                    tracing::info!(agent = ctx.agent_name(), response_id = %id, "waiting for a human answer: {prompt}");
                    match self.accept(ctx.ask_and_wait(id.clone(), prompt.clone()).await) {
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
    }

    fn may_suspend(&self) -> bool {
        self.mode == HumanMode::Suspend
    }
}
