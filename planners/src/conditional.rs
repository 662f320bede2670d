//! The [`Conditional`] composite and its planner; the behaviour is documented on [`Conditional`].

use agentic_engine::{Action, AgentCall, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, Condition, composite_builder, restore_as, state_of};
use crate::kind::{Calls, FieldType, KindArgs, KindField, PlannerKind};
use std::sync::Arc;

/// The conditional planner. Execution state: `{"active": [[branch, next position], ...]}` for branches still
/// running.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct ConditionalPlanner {
    active: Vec<(usize, usize)>,
    #[serde(skip)]
    branches: Arc<Vec<(Condition, Vec<usize>)>>,
}

impl ConditionalPlanner {
    fn call(&self, branch: usize, position: usize) -> AgentCall {
        AgentCall::new(self.branches[branch].1[position]).tag(branch as u64)
    }
}

impl Planner for ConditionalPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        self.active.clear();
        for (i, (cond, agents)) in self.branches.iter().enumerate() {
            let matched =
                cond(ctx.view()).map_err(|m| ctx.expression_error(format!("branch {} condition", i + 1), m))?;
            if matched && !agents.is_empty() {
                self.active.push((i, 1));
            }
        }
        if self.active.is_empty() {
            return Ok(Action::Done);
        }
        Ok(Action::Call(self.active.iter().map(|&(b, _)| self.call(b, 0)).collect()))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let branch = done.call.tag as usize;
        let Some(idx) = self.active.iter().position(|&(b, _)| b == branch) else {
            return Err(ctx.error(format!("completion for inactive branch {}", branch + 1)));
        };
        let (b, pos) = self.active[idx];
        if pos < self.branches[b].1.len() {
            self.active[idx].1 += 1;
            return Ok(Action::Call(vec![self.call(b, pos)]));
        }
        self.active.remove(idx);
        Ok(if self.active.is_empty() { Action::Done } else { Action::Nothing })
    }

    fn execution_state(&self) -> Value {
        state_of("conditional", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        self.active = restore_as::<ConditionalPlanner>("conditional", state)?.active;
        Ok(())
    }

    fn reads_state(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "conditional"
    }
}

/// Runs the branches whose conditions hold.
///
/// Conditional: evaluates every branch condition in order; all matching branches run, in parallel (the
/// agents of one branch run in order); no match → done with no result, never a hang. Follows LangChain4j
/// agentic's `conditionalBuilder`.
pub struct Conditional;

impl Conditional {
    /// Starts a builder. Defaults: name `conditional`, no branches (done at once).
    pub fn builder() -> ConditionalBuilder {
        ConditionalBuilder { parts: CompositeParts::new("conditional"), branches: Vec::new() }
    }
}

/// Builder of a [`Conditional`].
pub struct ConditionalBuilder {
    parts: CompositeParts,
    branches: Vec<(Condition, Vec<AgentRef>)>,
}

composite_builder!(ConditionalBuilder);

impl ConditionalBuilder {
    /// Adds a branch: when `condition` holds, `agents` run in order. `Err` from the condition fails the
    /// conditional with an expression error naming the branch.
    pub fn branch(
        mut self,
        condition: impl Fn(&agentic_engine::ScopeView) -> Result<bool, String> + Send + Sync + 'static,
        agents: impl IntoIterator<Item = AgentRef>,
    ) -> Self {
        self.branches.push((Arc::new(condition), agents.into_iter().collect()));
        self
    }

    /// Adds a branch with an infallible condition.
    pub fn branch_when(
        self,
        condition: impl Fn(&agentic_engine::ScopeView) -> bool + Send + Sync + 'static,
        agents: impl IntoIterator<Item = AgentRef>,
    ) -> Self {
        self.branch(move |v| Ok(condition(v)), agents)
    }

    /// Builds the conditional (sub-agents are the branches' agents, flattened in order).
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let mut parts = self.parts;
        let mut table = Vec::new();
        let mut agents = Vec::new();
        for (cond, branch_agents) in self.branches {
            let start = agents.len();
            agents.extend(branch_agents);
            table.push((cond, (start..agents.len()).collect::<Vec<_>>()));
        }
        parts.agents = agents;
        let details = json!({ "branches": table.iter().map(|(_, a)| a.clone()).collect::<Vec<_>>() });
        let table = Arc::new(table);
        parts.build(move || ConditionalPlanner { active: Vec::new(), branches: table.clone() }, details)
    }
}

/// The `conditional` kind of specs: `branches: [{when, agents}]` (a condition, and the agents run in order when
/// it holds), built with [`ConditionalBuilder`].
pub struct ConditionalKind;

impl PlannerKind for ConditionalKind {
    fn name(&self) -> &str {
        "conditional"
    }

    fn fields(&self) -> &[KindField] {
        const BRANCH: &[KindField] =
            &[KindField::required("when", FieldType::Expression), KindField::required("agents", FieldType::Agents)];
        const FIELDS: &[KindField] = &[KindField::required("branches", FieldType::List(BRANCH))];
        FIELDS
    }

    fn calls(&self) -> Calls {
        Calls::SomeInOrder
    }

    fn build(&self, args: &KindArgs, mut parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let agents = std::mem::take(&mut parts.agents);
        let mut b = ConditionalBuilder { parts, branches: Vec::new() };
        for (i, branch) in args.entries("branches").iter().enumerate() {
            let Some(when) = branch.expression("when") else {
                let message = format!("`branches[{i}]` has no compiled `when`");
                return Err(BuildError::Invalid { agent: b.parts.spec.name.clone(), message });
            };
            b = b.branch(move |view| when.eval_bool(view, &[]), branch.agents_from("agents", &agents));
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, PlanningContext};
    use serde_json::json;

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    fn planner() -> ConditionalPlanner {
        let yes: Condition = Arc::new(|_| Ok(true));
        let no: Condition = Arc::new(|_| Ok(false));
        ConditionalPlanner {
            active: Vec::new(),
            branches: Arc::new(vec![(yes.clone(), vec![0, 1]), (no, vec![2]), (yes, vec![3])]),
        }
    }

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [
            agent("a", "1", Some("a")),
            agent("b", "2", Some("b")),
            agent("c", "3", Some("c")),
            agent("d", "4", Some("d")),
        ];
        let spec = AgentSpec::new("conditional", "conditional");
        let ctx = PlanningContext::new(view(json!({})), &agents, &spec, "root");
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap());
        assert_eq!(first.len(), 2);
        p.next_action(&ctx, &done(first[0].clone(), json!(1))).unwrap();
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"active":[[0,2],[2,1]]}"#);
        let completed = done(first[1].clone(), json!(4));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
