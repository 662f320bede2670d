//! The [`Bdi`] composite and its planner; the behaviour is documented on [`Bdi`].

use std::sync::Arc;

use agentic_engine::{
    Action, AgentCall, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext, ScopeView,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, Condition, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, PlannerKind};

/// A desire: a prioritised goal and the agents (its intention) that pursue it.
pub struct Desire {
    name: String,
    priority: i64,
    achievable: Option<Condition>,
    satisfied: Condition,
    agents: Vec<AgentRef>,
}

impl Desire {
    /// A desire named `name` with `priority` (higher = more important), satisfied when `satisfied` holds,
    /// pursued by `agents` in order. Achievable by default (see [`Desire::achievable`]). `Err` from a
    /// condition fails the composite with an expression error naming the desire.
    pub fn new(
        name: impl Into<String>,
        priority: i64,
        satisfied: impl Fn(&ScopeView) -> Result<bool, String> + Send + Sync + 'static,
        agents: impl IntoIterator<Item = AgentRef>,
    ) -> Self {
        Desire {
            name: name.into(),
            priority,
            achievable: None,
            satisfied: Arc::new(satisfied),
            agents: agents.into_iter().collect(),
        }
    }

    /// A desire over state keys, like the original's `Desire.of(name, priority, achievableKey, satisfiedKey,
    /// ...)`: achievable when `achievable_key` is present, satisfied when `satisfied_key` is present.
    pub fn of_keys(
        name: impl Into<String>,
        priority: i64,
        achievable_key: impl Into<String>,
        satisfied_key: impl Into<String>,
        agents: impl IntoIterator<Item = AgentRef>,
    ) -> Self {
        let (a, s) = (achievable_key.into(), satisfied_key.into());
        Desire::new(name, priority, move |v| Ok(v.contains(&s)), agents).achievable(move |v| Ok(v.contains(&a)))
    }

    /// The achievability condition (default: always achievable).
    pub fn achievable(mut self, f: impl Fn(&ScopeView) -> Result<bool, String> + Send + Sync + 'static) -> Self {
        self.achievable = Some(Arc::new(f));
        self
    }

    /// The desire's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

struct DesireConfig {
    name: String,
    priority: i64,
    achievable: Option<Condition>,
    satisfied: Condition,
    /// Sub-agent indices of the intention, in order.
    agents: Vec<usize>,
}

struct BdiConfig {
    desires: Vec<DesireConfig>,
    max_invocations: u32,
}

/// The BDI planner. Execution state: `{"current": desire index|null, "next": [next agent position per
/// desire], "invocations": n}` — the desire being pursued, where each desire's intention continues, and how
/// many agents were started.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct BdiPlanner {
    current: Option<usize>,
    next: Vec<usize>,
    invocations: u32,
    #[serde(skip)]
    config: Option<Arc<BdiConfig>>,
}

fn check(ctx: &PlanningContext<'_>, d: &DesireConfig, what: &str, c: &Condition) -> Result<bool, AgentError> {
    c(ctx.view()).map_err(|m| ctx.expression_error(format!("desire `{}` {what}", d.name), m))
}

fn achievable(ctx: &PlanningContext<'_>, d: &DesireConfig) -> Result<bool, AgentError> {
    match &d.achievable {
        Some(c) => check(ctx, d, "achievable", c),
        None => Ok(true),
    }
}

fn satisfied(ctx: &PlanningContext<'_>, d: &DesireConfig) -> Result<bool, AgentError> {
    check(ctx, d, "satisfied", &d.satisfied)
}

/// Achievable and not satisfied.
fn open(ctx: &PlanningContext<'_>, d: &DesireConfig) -> Result<bool, AgentError> {
    Ok(achievable(ctx, d)? && !satisfied(ctx, d)?)
}

impl BdiPlanner {
    fn config(&self, ctx: &PlanningContext<'_>) -> Result<Arc<BdiConfig>, AgentError> {
        self.config.clone().ok_or_else(|| ctx.error("bdi planner has no configuration"))
    }

    /// Picks the highest-priority open desire and runs its next agent; done when none is open.
    fn deliberate(&mut self, ctx: &PlanningContext<'_>, cfg: &BdiConfig) -> Result<Action, AgentError> {
        self.current = None;
        let mut best: Option<usize> = None;
        for (i, d) in cfg.desires.iter().enumerate() {
            if best.is_some_and(|b| cfg.desires[b].priority >= d.priority) {
                continue;
            }
            if open(ctx, d)? {
                best = Some(i);
            }
        }
        match best {
            None => Ok(Action::Done),
            Some(d) => {
                self.current = Some(d);
                self.advance(ctx, cfg, d)
            }
        }
    }

    /// Runs the next agent of desire `d`'s intention.
    fn advance(&mut self, ctx: &PlanningContext<'_>, cfg: &BdiConfig, d: usize) -> Result<Action, AgentError> {
        let desire = &cfg.desires[d];
        let pos = self.next[d];
        let Some(&agent) = desire.agents.get(pos) else {
            return Err(ctx.error(format!(
                "desire `{}` is still not satisfied after all {} agents of its intention ran",
                desire.name,
                desire.agents.len()
            )));
        };
        if self.invocations >= cfg.max_invocations {
            return Err(ctx.error(format!(
                "maximum invocations ({}) reached while pursuing desire `{}`",
                cfg.max_invocations, desire.name
            )));
        }
        self.next[d] = pos + 1;
        self.invocations += 1;
        Ok(Action::Call(vec![AgentCall::new(agent).tag(d as u64)]))
    }
}

impl Planner for BdiPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        self.next = vec![0; cfg.desires.len()];
        self.invocations = 0;
        self.deliberate(ctx, &cfg)
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        let Some(d) = self.current else { return self.deliberate(ctx, &cfg) };
        let desire = cfg.desires.get(d).ok_or_else(|| ctx.error(format!("unknown desire index {d}")))?;
        if satisfied(ctx, desire)? {
            self.next[d] = 0;
            return self.deliberate(ctx, &cfg);
        }
        for other in &cfg.desires {
            if other.priority > desire.priority && open(ctx, other)? {
                return self.deliberate(ctx, &cfg);
            }
        }
        if self.next[d] >= desire.agents.len() {
            return self.advance(ctx, &cfg, d); // reports the exhausted intention
        }
        if achievable(ctx, desire)? { self.advance(ctx, &cfg, d) } else { self.deliberate(ctx, &cfg) }
    }

    fn execution_state(&self) -> Value {
        state_of("bdi", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: BdiPlanner = restore_as("bdi", state)?;
        self.current = restored.current;
        self.next = restored.next;
        self.invocations = restored.invocations;
        Ok(())
    }

    fn reads_state(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "bdi"
    }
}

/// A BDI composite.
///
/// Belief–desire–intention (BDI): the state is the belief base; desires are prioritised goals, each with an
/// `achievable` and a `satisfied` condition and an intention — the agents that pursue it, in order.
///
/// Deliberation picks, among the desires that are achievable and not satisfied, the one with the highest
/// priority (ties: the first declared), and runs its agents one at a time. After each agent:
/// 1. the desire is satisfied → deliberate again (its intention starts from its first agent if it is ever
///    pursued again);
/// 2. else, a desire of strictly higher priority is achievable (and not satisfied) → preempt: deliberate
///    again; the preempted desire keeps its place and later resumes at its next agent, not from scratch;
/// 3. else, its intention ran all its agents → error
///    `desire `NAME` is still not satisfied after all N agents of its intention ran`;
/// 4. else, the desire is still achievable → its next agent;
/// 5. else (no longer achievable) → deliberate again (it keeps its place, as when preempted).
///
/// No achievable, unsatisfied desire → done. Starting an agent when `max_invocations` (default 50) have run
/// is the error `maximum invocations (N) reached while pursuing desire `NAME``.
///
/// Follows the BDI pattern of LangChain4j agentic (`BDIPlanner`, `Desire.of(name, priority, achievable,
/// satisfied, agents...)`). Differences: the intention's progress per desire is in the serialisable execution
/// state, so preemption and crash recovery resume the intention at its next agent (the original restarted
/// it, re-running completed agents).
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// use agentic_planners::{Bdi, CompositeBuilderExt, Desire};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let analyse = Compute::template("analyse", "analysis of {{ market }}")?.output_key("analysis").build();
/// let bdi = Bdi::builder()
///     .desire(Desire::of_keys("analyse market", 1, "market", "analysis", [analyse]))
///     .output_key("analysis")
///     .build()?;
/// let out = bdi.invoke().input("market", "bonds").await?;
/// assert_eq!(out.output(), Some(&serde_json::json!("analysis of bonds")));
/// # Ok(()) }
/// ```
pub struct Bdi;

impl Bdi {
    /// Starts a builder. Defaults: name `bdi`, no desires (done at once), `max_invocations` 50.
    pub fn builder() -> BdiBuilder {
        BdiBuilder { parts: CompositeParts::new("bdi"), desires: Vec::new(), max_invocations: 50 }
    }
}

/// Builder of a [`Bdi`] composite.
pub struct BdiBuilder {
    parts: CompositeParts,
    desires: Vec<Desire>,
    max_invocations: u32,
}

composite_builder!(BdiBuilder);

impl BdiBuilder {
    /// Adds a desire (declaration order breaks priority ties).
    pub fn desire(mut self, desire: Desire) -> Self {
        self.desires.push(desire);
        self
    }

    /// At most `n` agent invocations (default 50); needing more is an error naming the desire pursued.
    pub fn max_invocations(mut self, n: u32) -> Self {
        self.max_invocations = n;
        self
    }

    /// Builds the composite. Its sub-agents are the desires' agents, flattened in order (`sub_agents` set on
    /// the builder are ignored).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] when two desires have the same name; [`BuildError::ConflictingTypes`] when the
    /// tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let mut parts = self.parts;
        parts.agents = Vec::new();
        let mut desires = Vec::with_capacity(self.desires.len());
        for d in self.desires {
            if desires.iter().any(|o: &DesireConfig| o.name == d.name) {
                return Err(BuildError::Invalid {
                    agent: parts.spec.name.clone(),
                    message: format!("two desires are named `{}`", d.name),
                });
            }
            let start = parts.agents.len();
            parts.agents.extend(d.agents);
            desires.push(DesireConfig {
                name: d.name,
                priority: d.priority,
                achievable: d.achievable,
                satisfied: d.satisfied,
                agents: (start..parts.agents.len()).collect(),
            });
        }
        let details = json!({
            "max_invocations": self.max_invocations,
            "desires": desires
                .iter()
                .map(|d| json!({ "name": d.name, "priority": d.priority, "agents": d.agents }))
                .collect::<Vec<_>>(),
        });
        let config = Arc::new(BdiConfig { desires, max_invocations: self.max_invocations });
        parts.build(move || BdiPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `bdi` kind of specs: `desires: [{name, priority, achievable, satisfied, agents}]` (a unique name, a
/// priority (default 0), conditions (achievable by default; `satisfied` required), the intention's agents),
/// `max_invocations` (default 50), built with [`BdiBuilder`].
pub struct BdiKind;

impl PlannerKind for BdiKind {
    fn name(&self) -> &str {
        "bdi"
    }

    fn fields(&self) -> &[KindField] {
        const DESIRE: &[KindField] = &[
            KindField::required("name", FieldType::Name).unique(),
            KindField::optional("priority", FieldType::Integer { min: i64::MIN, max: i64::MAX }),
            KindField::optional("achievable", FieldType::Expression),
            KindField::required("satisfied", FieldType::Expression),
            KindField::required("agents", FieldType::Agents),
        ];
        const FIELDS: &[KindField] = &[
            KindField::required("desires", FieldType::List(DESIRE)),
            KindField::optional("max_invocations", FieldType::Integer { min: 1, max: u32::MAX as i64 }),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, mut parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let agents = std::mem::take(&mut parts.agents);
        let mut b = Bdi::builder();
        b.parts = parts;
        if let Some(n) = args.get_u32("max_invocations") {
            b = b.max_invocations(n);
        }
        for (i, d) in args.entries("desires").iter().enumerate() {
            let (Some(name), Some(satisfied)) = (d.get_str("name"), d.expression("satisfied")) else {
                let message = format!("`desires[{i}]` has no `name` or no compiled `satisfied`");
                return Err(BuildError::Invalid { agent: b.parts.spec.name.clone(), message });
            };
            let priority = d.get_i64("priority").unwrap_or(0);
            let mut desire = Desire::new(
                name,
                priority,
                move |view| satisfied.eval_bool(view, &[]),
                d.agents_from("agents", &agents),
            );
            if let Some(achievable) = d.expression("achievable") {
                desire = desire.achievable(move |view| achievable.eval_bool(view, &[]));
            }
            b = b.desire(desire);
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, Completion};

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    fn planner() -> BdiPlanner {
        let hedge = DesireConfig {
            name: "hedge".to_string(),
            priority: 2,
            achievable: Some(Arc::new(|v| Ok(v.contains("risk")))),
            satisfied: Arc::new(|v| Ok(v.contains("hedged"))),
            agents: vec![2],
        };
        let trade = DesireConfig {
            name: "trade".to_string(),
            priority: 1,
            achievable: None,
            satisfied: Arc::new(|v| Ok(v.contains("traded"))),
            agents: vec![0, 1],
        };
        BdiPlanner {
            config: Some(Arc::new(BdiConfig { desires: vec![hedge, trade], max_invocations: 10 })),
            ..Default::default()
        }
    }

    #[test]
    fn execution_state_is_exact_and_restores() {
        assert_state(&BdiPlanner::default(), &mut planner(), r#"{"current":null,"next":[],"invocations":0}"#);
        let agents = [
            agent("analyse", "1", Some("analysis")),
            agent("trade", "2", Some("traded")),
            agent("hedge", "3", Some("hedged")),
        ];
        let spec = AgentSpec::new("bdi", "bdi");
        let ctx = PlanningContext::new(view(json!({})), &agents, &spec, "root");
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap()).remove(0);
        let risky = PlanningContext::new(view(json!({"analysis": 1, "risk": true})), &agents, &spec, "root");
        let hedge = calls(p.next_action(&risky, &done(first, json!(1))).unwrap()).remove(0);
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"current":0,"next":[1,1],"invocations":2}"#);
        let hedged =
            PlanningContext::new(view(json!({"analysis": 1, "risk": true, "hedged": 3})), &agents, &spec, "root");
        let completed: Completion = done(hedge, json!(3));
        assert_eq!(restored.next_action(&hedged, &completed).unwrap(), p.next_action(&hedged, &completed).unwrap());
        assert_eq!(restored.execution_state(), p.execution_state());
    }
}
