//! The `wait` agent (SPEC.md §3): suspends the run without a human until a time — a duration after it is
//! first reached, or the RFC 3339 time an expression gives — and then returns the RFC 3339 time it fired.
//!
//! The timer is a pending response of kind [`PendingKind::Wait`] with its deadline, kept in the run's record:
//! it survives a crash and a restart, and a resumption before the time suspends again at the same deadline
//! (so a `resume` after a kill waits only the time left). Hosts fire it: the CLI's `run` and `resume` sleep
//! until it and resume in the process; `agentic serve` resumes the run once it is due, on whichever server
//! takes the run (PostgreSQL: any). Nobody can answer it: `respond` refuses, saying when it fires.

use std::time::Duration;

use agentic_engine::{
    Agent, AgentError, AgentRef, AgentSpec, InvocationContext, PendingKind, SpecBuilder, Stop, ValueType, now_ms,
    parse_rfc3339_ms, rfc3339_ms,
};
use serde_json::Value;

use crate::expr::Expression;

/// Until when a [`Wait`] waits.
#[derive(Debug)]
pub enum WaitUntil {
    /// This long after the agent is first reached (`for: 2h`).
    For(Duration),
    /// The RFC 3339 time this expression gives over the state, evaluated when the agent is first reached
    /// (`until: "{{ review_at }}"`-style expressions; a string result).
    Until(Expression),
}

/// A `wait` agent. See the module documentation.
pub struct Wait {
    spec: AgentSpec,
    until: WaitUntil,
}

/// Builder of a [`Wait`] agent.
pub struct WaitBuilder {
    spec: AgentSpec,
    until: WaitUntil,
}

impl SpecBuilder for WaitBuilder {
    fn spec_mut(&mut self) -> &mut AgentSpec {
        &mut self.spec
    }
}

impl Wait {
    /// A `wait` agent named `name` that waits `duration` once reached.
    pub fn duration(name: impl Into<String>, duration: Duration) -> WaitBuilder {
        WaitBuilder::new(name, WaitUntil::For(duration))
    }

    /// A `wait` agent named `name` that waits until the RFC 3339 time `until` gives (its variables are the
    /// agent's inputs).
    pub fn until(name: impl Into<String>, until: Expression) -> WaitBuilder {
        WaitBuilder::new(name, WaitUntil::Until(until))
    }
}

impl WaitBuilder {
    fn new(name: impl Into<String>, until: WaitUntil) -> Self {
        let mut spec = AgentSpec::new(name, "wait");
        spec.output_type = ValueType::String;
        if let WaitUntil::Until(expr) = &until {
            spec.inputs = expr
                .variables()
                .into_iter()
                .map(|v| {
                    let optional = expr.optional_variables().contains(&v);
                    agentic_engine::InputSpec::new(v).optional(optional)
                })
                .collect();
        }
        WaitBuilder { spec, until }
    }

    /// Builds the agent.
    pub fn build(self) -> AgentRef {
        AgentRef::new(Wait { spec: self.spec, until: self.until })
    }
}

impl Wait {
    /// When a wait reached now fires.
    fn fires_at(&self, ctx: &InvocationContext) -> Result<u64, AgentError> {
        match &self.until {
            WaitUntil::For(d) => Ok(now_ms().saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))),
            WaitUntil::Until(expr) => {
                let bad = |message: String| AgentError::Expression {
                    agent: ctx.agent_name().to_string(),
                    path: ctx.path().to_string(),
                    what: "until".to_string(),
                    message,
                };
                let value = expr.eval_inputs(&ctx.view(), ctx.inputs()).map_err(bad)?;
                let text = value.as_str().ok_or_else(|| bad(format!("gives {value}, not an RFC 3339 time")))?;
                parse_rfc3339_ms(text).map_err(bad)
            }
        }
    }
}

impl Agent for Wait {
    fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    async fn invoke(&self, ctx: &InvocationContext) -> Result<Value, Stop> {
        let id = match ctx.item() {
            Some(item) => [ctx.path(), item].concat(),
            None => ctx.path().to_string(),
        };
        let fires_at = match ctx.human().suspension(&id).await.and_then(|p| p.deadline_ms) {
            Some(kept) => kept,
            None => self.fires_at(ctx)?,
        };
        let now = now_ms();
        if fires_at <= now {
            // Fired: a later resumption of the run does not find this timer again.
            ctx.human().resolve(&id);
            return Ok(Value::String(rfc3339_ms(now)));
        }
        let mut pending = ctx.human().question(id, format!("waits until {}", rfc3339_ms(fires_at)));
        pending.kind = PendingKind::Wait;
        pending.deadline_ms = Some(fires_at);
        Err(ctx.human().suspend_pending(pending))
    }

    fn may_suspend(&self) -> bool {
        true
    }
}
