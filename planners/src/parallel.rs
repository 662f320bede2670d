//! The [`Parallel`] composite and its planner; the behaviour is documented on [`Parallel`].

use agentic_engine::{Action, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{Calls, FieldType, KindArgs, KindField, PlannerKind};

/// The parallel planner. Execution state: `{"started": s, "completed": c}`; agents are started in
/// declaration order, so the first `s` have started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ParallelPlanner {
    started: usize,
    completed: usize,
    #[serde(skip)]
    max_concurrency: Option<usize>,
}

impl Planner for ParallelPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let n = ctx.agents().len();
        if n == 0 {
            return Ok(Action::Done);
        }
        let first = self.max_concurrency.map_or(n, |m| m.clamp(1, n));
        self.started = first;
        Ok(Action::call_all(0..first))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        let n = ctx.agents().len();
        self.completed += 1;
        if self.started < n {
            self.started += 1;
            return Ok(Action::call(self.started - 1));
        }
        Ok(if self.completed >= n { Action::Done } else { Action::Nothing })
    }

    fn execution_state(&self) -> Value {
        state_of("parallel", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let max = self.max_concurrency;
        *self = restore_as("parallel", state)?;
        self.max_concurrency = max;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "parallel"
    }
}

/// A block of agents run concurrently.
///
/// Parallel: starts all sub-agents at once (at most `max_concurrency` in flight) and finishes when all have
/// completed. The first failure fails the block with the same error as in a sequence and the supervisor
/// cancels the other branches (the original let them run on). Follows LangChain4j agentic's
/// `parallelBuilder`.
pub struct Parallel;

impl Parallel {
    /// Starts a builder. Defaults: name `parallel`, unbounded concurrency, result = `output` function, else
    /// the value at `output_key`.
    pub fn builder() -> ParallelBuilder {
        ParallelBuilder { parts: CompositeParts::new("parallel"), max_concurrency: None }
    }
}

/// Builder of a [`Parallel`] block.
pub struct ParallelBuilder {
    parts: CompositeParts,
    max_concurrency: Option<usize>,
}

composite_builder!(ParallelBuilder);

impl ParallelBuilder {
    /// At most `n` sub-agents in flight at once (default: all; 0 is treated as 1).
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n);
        self
    }

    /// Builds the block.
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let max = self.max_concurrency;
        self.parts.build(
            move || ParallelPlanner { max_concurrency: max, ..Default::default() },
            json!({ "max_concurrency": max }),
        )
    }
}

/// The `parallel` kind of specs: `agents` at once, at most `max_concurrency` of them (default: all).
pub struct ParallelKind;

impl PlannerKind for ParallelKind {
    fn name(&self) -> &str {
        "parallel"
    }

    fn calls(&self) -> Calls {
        Calls::AllInOrder
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents),
            KindField::optional("max_concurrency", FieldType::Integer { min: 1, max: i64::MAX }),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let max_concurrency =
            args.get("max_concurrency").and_then(Value::as_u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        ParallelBuilder { parts, max_concurrency }.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, PlanningContext};
    use serde_json::json;

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [agent("a", "1", Some("x")), agent("b", "2", Some("y")), agent("c", "3", Some("z"))];
        let spec = AgentSpec::new("parallel", "parallel");
        let ctx = PlanningContext::new(view(json!({})), &agents, &spec, "root");
        let planner = || ParallelPlanner { max_concurrency: Some(2), ..Default::default() };
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap());
        assert_eq!(first.len(), 2);
        p.next_action(&ctx, &done(first[1].clone(), json!(2))).unwrap();
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"started":3,"completed":1}"#);
        assert_eq!(restored.max_concurrency, Some(2));
        let completed = done(first[0].clone(), json!(1));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
