//! The [`Loop`] composite and its planner; the behaviour is documented on [`Loop`].

use std::sync::Arc;

use agentic_engine::{Action, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext, ScopeView};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{Calls, FieldType, KindArgs, KindField, PlannerKind};

/// An exit condition: `(state, 1-based iteration) → exit?`.
pub type ExitCondition = Arc<dyn Fn(&ScopeView, u32) -> Result<bool, String> + Send + Sync>;

/// The loop planner. Execution state: `{"iteration": i, "position": p}` — the agent at `position` of
/// iteration `iteration` (1-based) is the next to start.
#[derive(Clone, Serialize, Deserialize)]
pub struct LoopPlanner {
    iteration: u32,
    position: usize,
    #[serde(skip)]
    config: Option<Arc<LoopConfig>>,
}

struct LoopConfig {
    max_iterations: u32,
    exit: Option<ExitCondition>,
    at_end: bool,
}

impl LoopPlanner {
    fn config(&self) -> Result<&LoopConfig, String> {
        self.config.as_deref().ok_or_else(|| "loop planner has no configuration".to_string())
    }

    fn exit(&self, ctx: &PlanningContext<'_>) -> Result<bool, AgentError> {
        let cfg = self.config().map_err(|m| ctx.error(m))?;
        match &cfg.exit {
            Some(f) => f(ctx.view(), self.iteration).map_err(|m| ctx.expression_error("exit condition", m)),
            None => Ok(false),
        }
    }
}

impl Planner for LoopPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let max = self.config().map_err(|m| ctx.error(m))?.max_iterations;
        if ctx.agents().is_empty() || max == 0 {
            return Ok(Action::Done);
        }
        self.iteration = 1;
        self.position = 1;
        Ok(Action::call(0))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        let (max, at_end) = {
            let cfg = self.config().map_err(|m| ctx.error(m))?;
            (cfg.max_iterations, cfg.at_end)
        };
        let n = ctx.agents().len();
        if !at_end && self.exit(ctx)? {
            return Ok(Action::Done);
        }
        if self.position >= n {
            if at_end && self.exit(ctx)? {
                return Ok(Action::Done);
            }
            if self.iteration >= max {
                return Ok(Action::Done);
            }
            self.iteration += 1;
            self.position = 0;
        }
        self.position += 1;
        Ok(Action::call(self.position - 1))
    }

    fn execution_state(&self) -> Value {
        state_of("loop", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: LoopPlanner = restore_as("loop", state)?;
        self.iteration = restored.iteration;
        self.position = restored.position;
        Ok(())
    }

    fn reads_state(&self) -> bool {
        self.config.as_ref().is_some_and(|c| c.exit.is_some())
    }

    fn kind(&self) -> &'static str {
        "loop"
    }
}

/// A loop over agents.
///
/// Loop: runs its sub-agents in order, repeatedly, until the exit condition holds or `max_iterations`
/// complete iterations ran. The first agent always runs. With `test_exit_at_loop_end = false` (default) the
/// condition is checked after every agent; with `true` only after each complete iteration. The condition
/// sees the 1-based iteration. Follows LangChain4j agentic's `loopBuilder` (`exitCondition`,
/// `testExitAtLoopEnd`, `maxIterations`).
pub struct Loop;

impl Loop {
    /// Starts a builder. Defaults: name `loop`, `max_iterations` 10, no exit condition (runs all iterations),
    /// `test_exit_at_loop_end` false.
    pub fn builder() -> LoopBuilder {
        LoopBuilder { parts: CompositeParts::new("loop"), max_iterations: 10, exit: None, at_end: false }
    }
}

/// Builder of a [`Loop`].
pub struct LoopBuilder {
    parts: CompositeParts,
    max_iterations: u32,
    exit: Option<ExitCondition>,
    at_end: bool,
}

composite_builder!(LoopBuilder);

impl LoopBuilder {
    /// At most this many complete iterations (default 10).
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = n;
        self
    }

    /// The exit condition over the state and the 1-based iteration; `Err` fails the loop with an expression
    /// error.
    pub fn exit_condition(
        mut self,
        f: impl Fn(&ScopeView, u32) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.exit = Some(Arc::new(f));
        self
    }

    /// An infallible exit condition.
    pub fn exit_when(self, f: impl Fn(&ScopeView, u32) -> bool + Send + Sync + 'static) -> Self {
        self.exit_condition(move |v, i| Ok(f(v, i)))
    }

    /// Check the exit condition only after each complete iteration (default false: after every agent).
    pub fn test_exit_at_loop_end(mut self, at_end: bool) -> Self {
        self.at_end = at_end;
        self
    }

    /// Builds the loop.
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let details = json!({
            "max_iterations": self.max_iterations,
            "test_exit_at_loop_end": self.at_end,
            "has_exit_condition": self.exit.is_some(),
        });
        let config = Arc::new(LoopConfig { max_iterations: self.max_iterations, exit: self.exit, at_end: self.at_end });
        self.parts.build(move || LoopPlanner { iteration: 0, position: 0, config: Some(config.clone()) }, details)
    }
}

/// The `loop` kind of specs: `agents` in order, again, until `exit_when` holds (it sees `iteration`, from 1)
/// or after `max_iterations` (default 10); `test_exit_at_loop_end` checks only after whole iterations.
pub struct LoopKind;

impl PlannerKind for LoopKind {
    fn name(&self) -> &str {
        "loop"
    }

    fn calls(&self) -> Calls {
        Calls::AllInOrder
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents),
            KindField::optional("max_iterations", FieldType::Integer { min: 1, max: u32::MAX as i64 }),
            KindField::optional("exit_when", FieldType::Expression),
            KindField::optional("test_exit_at_loop_end", FieldType::Bool),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let exit = args.expression("exit_when").map(|e| {
            Arc::new(move |view: &ScopeView, iteration: u32| {
                e.eval_bool(view, &[("iteration", Value::from(iteration))])
            }) as ExitCondition
        });
        let at_end = args.get("test_exit_at_loop_end").and_then(Value::as_bool).unwrap_or(false);
        LoopBuilder { parts, max_iterations: args.get_u32("max_iterations").unwrap_or(10), exit, at_end }.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentCall, AgentSpec, PlanningContext};
    use serde_json::json;

    use super::*;
    use crate::common::testing::{agent, assert_state, done, view};

    fn planner() -> LoopPlanner {
        let config =
            LoopConfig { max_iterations: 3, exit: Some(Arc::new(|v, _| Ok(v.contains("stop")))), at_end: false };
        LoopPlanner { iteration: 0, position: 0, config: Some(Arc::new(config)) }
    }

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [agent("a", "1", Some("x")), agent("b", "2", Some("y"))];
        let spec = AgentSpec::new("loop", "loop");
        let ctx = PlanningContext::new(view(json!({"x": 1})), &agents, &spec, "root");
        let mut p = planner();
        p.first_action(&ctx).unwrap();
        p.next_action(&ctx, &done(AgentCall::new(0), json!(1))).unwrap();
        p.next_action(&ctx, &done(AgentCall::new(1), json!(2))).unwrap();
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"iteration":2,"position":1}"#);
        // The configuration survives the restore: the exit condition still ends the loop.
        let stop = PlanningContext::new(view(json!({"stop": true})), &agents, &spec, "root");
        let completed = done(AgentCall::new(0), json!(1));
        assert_eq!(restored.next_action(&stop, &completed).unwrap(), Action::Done);
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
