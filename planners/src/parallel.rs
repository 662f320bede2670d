//! Parallel: starts all sub-agents at once (at most `max_concurrency` in flight) and finishes when all have
//! completed. The first failure fails the block with the same error as in a sequence and the supervisor
//! cancels the other branches (the original let them run on). Follows LangChain4j agentic's
//! `parallelBuilder`.

use agentic_engine::{Action, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as};

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
        json!({ "started": self.started, "completed": self.completed })
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
