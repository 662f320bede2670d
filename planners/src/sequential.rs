//! The [`Sequence`] composite and its planner; the behaviour is documented on [`Sequence`].

use agentic_engine::{Action, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{Calls, FieldType, KindArgs, KindField, PlannerKind};

/// The sequence planner. Execution state: `{"next": <index of the next agent to start>}`.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct SequentialPlanner {
    next: usize,
}

impl Planner for SequentialPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        self.next = 0;
        Ok(self.advance(ctx.agents().len()))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        Ok(self.advance(ctx.agents().len()))
    }

    fn execution_state(&self) -> Value {
        state_of("sequence", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        *self = restore_as("sequence", state)?;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "sequence"
    }

    /// The last sub-agent: a sequence always ends with it (a streamed result carries its tokens).
    fn last_agent(&self, sub_agents: usize) -> Option<usize> {
        sub_agents.checked_sub(1)
    }
}

impl SequentialPlanner {
    fn advance(&mut self, n: usize) -> Action {
        if self.next >= n {
            return Action::Done;
        }
        self.next += 1;
        Action::call(self.next - 1)
    }
}

/// A sequence of agents.
///
/// Sequence: runs its sub-agents one after the other, in declaration order; empty → done at once.
/// Follows LangChain4j agentic's `sequenceBuilder`.
///
/// ```
/// use agentic_planners::{CompositeBuilderExt, Sequence};
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// let a = Compute::expression("a", "1").unwrap().output_key("x").build();
/// let b = Compute::expression("b", "x + 1").unwrap().output_key("y").build();
/// let seq = Sequence::builder().name("demo").sub_agents([a, b]).output_key("y").build().unwrap();
/// assert_eq!(seq.spec().kind, "sequence");
/// ```
pub struct Sequence;

impl Sequence {
    /// Starts a builder. Defaults: name `sequence`, no sub-agents, result = value at `output_key`.
    pub fn builder() -> SequenceBuilder {
        SequenceBuilder { parts: CompositeParts::new("sequence") }
    }
}

/// Builder of a [`Sequence`].
pub struct SequenceBuilder {
    parts: CompositeParts,
}

composite_builder!(SequenceBuilder);

impl SequenceBuilder {
    /// Builds the sequence.
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        self.parts.build(SequentialPlanner::default, Value::Null)
    }
}

/// The `sequence` kind of specs: `agents`, run in order.
pub struct SequenceKind;

impl PlannerKind for SequenceKind {
    fn name(&self) -> &str {
        "sequence"
    }

    fn calls(&self) -> Calls {
        Calls::AllInOrder
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[KindField::required("agents", FieldType::Agents)];
        FIELDS
    }

    fn build(&self, _args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        SequenceBuilder { parts }.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, PlanningContext};
    use serde_json::json;

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn the_last_agent_is_the_last_sub_agent() {
        let p = SequentialPlanner::default();
        assert_eq!((p.last_agent(3), p.last_agent(1), p.last_agent(0)), (Some(2), Some(0), None));
    }

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [agent("a", "1", Some("x")), agent("b", "2", Some("y")), agent("c", "3", Some("z"))];
        let spec = AgentSpec::new("sequence", "sequence");
        let ctx = PlanningContext::new(view(json!({})), &agents, &spec, "root");
        let mut p = SequentialPlanner::default();
        let first = calls(p.first_action(&ctx).unwrap()).remove(0);
        p.next_action(&ctx, &done(first, json!(1))).unwrap();
        let mut restored = SequentialPlanner::default();
        assert_state(&p, &mut restored, r#"{"next":2}"#);
        let last = done(agentic_engine::AgentCall::new(1), json!(2));
        assert_eq!(restored.next_action(&ctx, &last).unwrap(), p.next_action(&ctx, &last).unwrap());
    }
}
