//! The [`Blackboard`] composite and its planner; the behaviour is documented on [`Blackboard`].

use std::sync::Arc;

use agentic_engine::{Action, AgentCall, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, Condition, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, PlannerKind};
use crate::p2p::activatable;

/// The goal: the run succeeds as soon as it holds.
enum Goal {
    /// The composite's `output_key` is present.
    OutputKey(Option<String>),
    /// A condition over the state.
    Condition(Condition),
}

struct BlackboardConfig {
    goal: Goal,
    /// `(agent index, condition)` in rule order; `None` = always.
    prefer: Vec<(usize, Option<Condition>)>,
    max_invocations: u32,
}

/// The blackboard planner. Execution state: `{"seen": [fingerprint|null per agent], "invocations": n}` —
/// what each agent saw when it last started and how many invocations were started.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct BlackboardPlanner {
    seen: Vec<Option<u64>>,
    invocations: u32,
    #[serde(skip)]
    config: Option<Arc<BlackboardConfig>>,
}

impl BlackboardPlanner {
    fn goal_holds(ctx: &PlanningContext<'_>, cfg: &BlackboardConfig) -> Result<bool, AgentError> {
        match &cfg.goal {
            Goal::OutputKey(key) => Ok(key.as_ref().is_some_and(|k| ctx.view().contains(k))),
            Goal::Condition(f) => f(ctx.view()).map_err(|m| ctx.expression_error("goal", m)),
        }
    }

    /// The agent to activate: the first `prefer` rule that holds for a candidate, else the first candidate.
    fn choose(&self, ctx: &PlanningContext<'_>, cfg: &BlackboardConfig) -> Result<Option<(usize, u64)>, AgentError> {
        let n = ctx.agents().len();
        let candidates: Vec<Option<u64>> = (0..n).map(|i| activatable(ctx, i, self.seen[i])).collect();
        for (rule, (agent, when)) in cfg.prefer.iter().enumerate() {
            let Some(fp) = candidates.get(*agent).copied().flatten() else { continue };
            let holds = match when {
                None => true,
                Some(f) => f(ctx.view()).map_err(|m| ctx.expression_error(format!("prefer[{rule}] condition"), m))?,
            };
            if holds {
                return Ok(Some((*agent, fp)));
            }
        }
        Ok(candidates.iter().enumerate().find_map(|(i, c)| c.map(|fp| (i, fp))))
    }

    fn step(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config.clone().ok_or_else(|| ctx.error("blackboard planner has no configuration"))?;
        if Self::goal_holds(ctx, &cfg)? {
            return Ok(Action::Done);
        }
        if self.invocations >= cfg.max_invocations {
            return Err(
                ctx.error(format!("maximum invocations ({}) reached without satisfying goal", cfg.max_invocations))
            );
        }
        let Some((agent, fp)) = self.choose(ctx, &cfg)? else {
            // Quiescence: nothing can contribute any more.
            return Ok(Action::Done);
        };
        self.seen[agent] = Some(fp);
        self.invocations += 1;
        Ok(Action::Call(vec![AgentCall::new(agent)]))
    }
}

impl Planner for BlackboardPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        self.seen = vec![None; ctx.agents().len()];
        self.invocations = 0;
        self.step(ctx)
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        self.step(ctx)
    }

    fn execution_state(&self) -> Value {
        state_of("blackboard", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: BlackboardPlanner = restore_as("blackboard", state)?;
        self.seen = restored.seen;
        self.invocations = restored.invocations;
        Ok(())
    }

    fn reads_state(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "blackboard"
    }
}

/// A blackboard composite: one knowledge source per step, chosen by the `prefer` rules.
///
/// Blackboard: the agents are knowledge sources that publish partial results to the state (the blackboard);
/// after every step a central scheduler activates exactly one of them. Activation is as in [`P2p`](crate::P2p): an
/// agent is a candidate when all its inputs are present and one of them changed since it last ran. Among the
/// candidates, the `prefer` rules decide (the first rule whose condition holds and whose agent is a
/// candidate), then declaration order. The composite succeeds when the goal holds (default: its `output_key`
/// is present) — checked before every activation — or at quiescence (no candidate); reaching
/// `max_invocations` with the goal unmet is the error `maximum invocations (N) reached without satisfying
/// goal`.
///
/// Follows the blackboard pattern of LangChain4j agentic (`BlackboardPlanner` with a goal predicate and a
/// `ConflictResolutionStrategy` such as `agentOfType(X, condition).or(declarationOrder())`). Ours keeps the
/// activation fingerprints in the serialisable execution state, so a resumed run (after a crash or a human's
/// answer) knows exactly which agents are due.
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// use agentic_planners::{Blackboard, CompositeBuilderExt};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let symptoms = Compute::template("symptoms", "cough ({{ patient }})")?.output_key("symptoms").build();
/// let diagnosis = Compute::template("diagnose", "flu: {{ symptoms }}")?.output_key("diagnosis").build();
/// let board = Blackboard::builder().sub_agents([diagnosis, symptoms]).output_key("diagnosis").build()?;
/// let out = board.invoke().input("patient", "Ada").await?;
/// assert_eq!(out.output(), Some(&serde_json::json!("flu: cough (Ada)")));
/// # Ok(()) }
/// ```
pub struct Blackboard;

impl Blackboard {
    /// Starts a builder. Defaults: name `blackboard`, goal = the `output_key` is present, no `prefer` rules
    /// (declaration order), `max_invocations` 50.
    pub fn builder() -> BlackboardBuilder {
        BlackboardBuilder {
            parts: CompositeParts::new("blackboard"),
            goal: None,
            prefer: Vec::new(),
            max_invocations: 50,
        }
    }
}

/// Builder of a [`Blackboard`] composite.
pub struct BlackboardBuilder {
    parts: CompositeParts,
    goal: Option<Condition>,
    prefer: Vec<(String, Option<Condition>)>,
    max_invocations: u32,
}

composite_builder!(BlackboardBuilder);

impl BlackboardBuilder {
    /// The goal over the state (default: the composite's `output_key` is present). `Err` fails the composite
    /// with an expression error.
    pub fn goal(
        mut self,
        f: impl Fn(&agentic_engine::ScopeView) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.goal = Some(Arc::new(f));
        self
    }

    /// An infallible goal.
    pub fn goal_when(self, f: impl Fn(&agentic_engine::ScopeView) -> bool + Send + Sync + 'static) -> Self {
        self.goal(move |v| Ok(f(v)))
    }

    /// Adds a conflict-resolution rule: when `condition` holds and the sub-agent named `agent` is a candidate,
    /// it is chosen. Rules are tried in the order added, before declaration order. `Err` from the condition
    /// fails the composite with an expression error naming the rule.
    pub fn prefer(
        mut self,
        agent: impl Into<String>,
        condition: impl Fn(&agentic_engine::ScopeView) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.prefer.push((agent.into(), Some(Arc::new(condition))));
        self
    }

    /// Adds an unconditional rule: the sub-agent named `agent` is chosen whenever it is a candidate.
    pub fn prefer_always(mut self, agent: impl Into<String>) -> Self {
        self.prefer.push((agent.into(), None));
        self
    }

    /// At most `n` invocations (default 50): when `n` invocations have run and the goal does not hold, the
    /// composite fails with `maximum invocations (n) reached without satisfying goal`.
    pub fn max_invocations(mut self, n: u32) -> Self {
        self.max_invocations = n;
        self
    }

    /// Builds the composite.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] when a `prefer` rule names no sub-agent; [`BuildError::ConflictingTypes`] when
    /// the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let mut prefer = Vec::with_capacity(self.prefer.len());
        for (name, when) in self.prefer {
            let Some(index) = self.parts.agents.iter().position(|a| a.name() == name) else {
                let names: Vec<&str> = self.parts.agents.iter().map(AgentRef::name).collect();
                return Err(BuildError::Invalid {
                    agent: self.parts.spec.name.clone(),
                    message: format!(
                        "prefer rule names `{name}`, which is not one of its agents ({})",
                        names.join(", ")
                    ),
                });
            };
            prefer.push((index, when));
        }
        let details = json!({
            "max_invocations": self.max_invocations,
            "has_goal": self.goal.is_some(),
            "prefer": prefer.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        });
        let goal = match self.goal {
            Some(c) => Goal::Condition(c),
            None => Goal::OutputKey(self.parts.spec.output_key.clone()),
        };
        let config = Arc::new(BlackboardConfig { goal, prefer, max_invocations: self.max_invocations });
        self.parts.build(move || BlackboardPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `blackboard` kind of specs: `agents`, `goal` (an expression; default: the `output_key` is present),
/// `prefer: [{agent, when}]` (rules naming one of its `agents`, with an optional condition), `max_invocations`
/// (default 50), built with [`BlackboardBuilder`].
pub struct BlackboardKind;

impl PlannerKind for BlackboardKind {
    fn name(&self) -> &str {
        "blackboard"
    }

    fn fields(&self) -> &[KindField] {
        const RULE: &[KindField] = &[
            KindField::required("agent", FieldType::AgentOf("agents")),
            KindField::optional("when", FieldType::Expression),
        ];
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents),
            KindField::optional("goal", FieldType::Expression),
            KindField::optional("prefer", FieldType::List(RULE)),
            KindField::optional("max_invocations", FieldType::Integer { min: 1, max: u32::MAX as i64 }),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let mut b = Blackboard::builder();
        b.parts = parts;
        if let Some(n) = args.get_u32("max_invocations") {
            b = b.max_invocations(n);
        }
        if let Some(goal) = args.expression("goal") {
            b = b.goal(move |view| goal.eval_bool(view, &[]));
        }
        for rule in args.entries("prefer") {
            // The rule names the agent as it was built (a registered agent keeps its own name).
            let built = rule.agent("agent").and_then(|i| b.parts.agents.get(i)).map(|a| a.name().to_string());
            let Some(name) = built.or_else(|| rule.get_str("agent").map(str::to_string)) else { continue };
            b = match rule.expression("when") {
                Some(when) => b.prefer(name, move |view| when.eval_bool(view, &[])),
                None => b.prefer_always(name),
            };
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, ScopeView};

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};
    use crate::p2p::input_fingerprint;

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [agent("diagnose", "symptoms", Some("diagnosis")), agent("symptoms", "patient", Some("symptoms"))];
        let spec = AgentSpec::new("blackboard", "blackboard");
        let ctx = PlanningContext::new(view(json!({"patient": "Ada"})), &agents, &spec, "root");
        let goal: Condition = Arc::new(|v: &ScopeView| Ok(v.contains("diagnosis")));
        let config =
            Arc::new(BlackboardConfig { goal: Goal::Condition(goal), prefer: vec![(0, None)], max_invocations: 5 });
        let planner = || BlackboardPlanner { config: Some(config.clone()), ..Default::default() };
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap()).remove(0);
        assert_eq!(input_fingerprint(agents[1].spec(), ctx.view()), Some(6362765628188002534));
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"seen":[null,6362765628188002534],"invocations":1}"#);
        let after = PlanningContext::new(view(json!({"patient": "Ada", "symptoms": "cough"})), &agents, &spec, "root");
        let completed = done(first, json!("cough"));
        assert_eq!(restored.next_action(&after, &completed).unwrap(), p.next_action(&after, &completed).unwrap());
        assert_eq!(restored.execution_state(), p.execution_state());
    }
}
