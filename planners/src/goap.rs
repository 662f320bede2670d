//! The [`Goap`] composite and its planner; the behaviour is documented on [`Goap`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use agentic_engine::{Action, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext, ScopeView};
use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, PlannerKind};

/// A node of the dependency graph.
#[derive(Debug, Clone)]
enum Node {
    /// A state key (the key's name is in `GoapGraph::keys`).
    Key,
    /// A sub-agent, by index.
    Agent(usize),
}

/// What one agent needs and produces.
struct AgentInfo {
    /// Inputs without a declared default (the ones that must be present or produced).
    needs: Vec<String>,
}

/// The dependency graph of a GOAP composite: key → agent (input), agent → key (output key).
pub(crate) struct GoapGraph {
    graph: DiGraph<Node, ()>,
    keys: HashMap<String, NodeIndex>,
    agents: Vec<AgentInfo>,
}

impl GoapGraph {
    fn new(agents: &[AgentRef]) -> Self {
        let mut graph = DiGraph::new();
        let mut keys: HashMap<String, NodeIndex> = HashMap::new();
        let mut key = |graph: &mut DiGraph<Node, ()>, k: &str| {
            *keys.entry(k.to_string()).or_insert_with(|| graph.add_node(Node::Key))
        };
        let mut infos = Vec::with_capacity(agents.len());
        for (i, a) in agents.iter().enumerate() {
            let spec = a.spec();
            let node = graph.add_node(Node::Agent(i));
            for input in &spec.inputs {
                let k = key(&mut graph, &input.key);
                graph.add_edge(k, node, ());
            }
            if let Some(out) = &spec.output_key {
                let k = key(&mut graph, out);
                graph.add_edge(node, k, ());
            }
            let needs = spec.inputs.iter().filter(|i| i.default.is_none()).map(|i| i.key.clone()).collect();
            infos.push(AgentInfo { needs });
        }
        GoapGraph { graph, keys, agents: infos }
    }

    /// The agents writing `key`, in declaration order.
    fn producers(&self, key: &str) -> Vec<usize> {
        let Some(&node) = self.keys.get(key) else { return Vec::new() };
        let mut out: Vec<usize> = self
            .graph
            .neighbors_directed(node, Direction::Incoming)
            .filter_map(|n| match self.graph[n] {
                Node::Agent(i) => Some(i),
                Node::Key => None,
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The cheapest set of agents producing `key` from the present keys, if any.
    fn plan_key(
        &self,
        key: &str,
        view: &ScopeView,
        visiting: &mut Vec<String>,
        memo: &mut HashMap<String, BTreeSet<usize>>,
    ) -> Option<BTreeSet<usize>> {
        if view.contains(key) {
            return Some(BTreeSet::new());
        }
        if let Some(p) = memo.get(key) {
            return Some(p.clone());
        }
        if visiting.iter().any(|k| k == key) {
            return None;
        }
        visiting.push(key.to_string());
        let mut best: Option<BTreeSet<usize>> = None;
        'producers: for p in self.producers(key) {
            let mut plan = BTreeSet::from([p]);
            for need in &self.agents[p].needs {
                match self.plan_key(need, view, visiting, memo) {
                    Some(sub) => plan.extend(sub),
                    None => continue 'producers,
                }
            }
            if best.as_ref().is_none_or(|b| plan.len() < b.len()) {
                best = Some(plan);
            }
        }
        visiting.pop();
        if let Some(b) = &best {
            // A found plan is valid in any context (a failure may depend on the keys being visited).
            memo.insert(key.to_string(), b.clone());
        }
        best
    }

    /// The agents to run, in dependency order (ties: declaration order), or `None` when the goal cannot be
    /// produced.
    pub(crate) fn plan(&self, goal: &str, view: &ScopeView, agents: &[AgentRef]) -> Option<Vec<usize>> {
        let chosen = self.plan_key(goal, view, &mut Vec::new(), &mut HashMap::new())?;
        // Order the chosen agents: an edge p → c when c needs a key p writes.
        let mut order: DiGraph<usize, ()> = DiGraph::new();
        let nodes: HashMap<usize, NodeIndex> = chosen.iter().map(|&i| (i, order.add_node(i))).collect();
        for &c in &chosen {
            for need in &self.agents[c].needs {
                for p in self.producers(need) {
                    if p != c
                        && let Some(&pn) = nodes.get(&p)
                    {
                        order.update_edge(pn, nodes[&c], ());
                    }
                }
            }
        }
        // Kahn's algorithm, always taking the ready agent declared first.
        let mut indegree: HashMap<NodeIndex, usize> =
            order.node_indices().map(|n| (n, order.neighbors_directed(n, Direction::Incoming).count())).collect();
        let mut ready: BTreeSet<usize> = chosen.iter().copied().filter(|i| indegree[&nodes[i]] == 0).collect();
        let mut path = Vec::with_capacity(chosen.len());
        while let Some(i) = ready.pop_first() {
            path.push(i);
            for next in order.neighbors_directed(nodes[&i], Direction::Outgoing) {
                let d = indegree.get_mut(&next).map(|d| {
                    *d -= 1;
                    *d
                });
                if d == Some(0) {
                    ready.insert(order[next]);
                }
            }
        }
        // Agents in a dependency cycle (possible only when several agents write one key) go last, in order.
        for &i in &chosen {
            if !path.contains(&i) {
                path.push(i);
            }
        }
        debug_assert!(path.iter().all(|&i| i < agents.len()));
        Some(path)
    }
}

/// The GOAP planner. Execution state: `{"path": [agent indices], "cursor": c}` — the plan made at the first
/// step and the position of the next agent to run.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct GoapPlanner {
    path: Vec<usize>,
    cursor: usize,
    #[serde(skip)]
    graph: Option<Arc<GoapGraph>>,
    #[serde(skip)]
    goal: String,
}

impl GoapPlanner {
    fn next(&mut self) -> Action {
        match self.path.get(self.cursor) {
            Some(&agent) => {
                self.cursor += 1;
                Action::call(agent)
            }
            None => Action::Done,
        }
    }
}

impl Planner for GoapPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        if ctx.view().contains(&self.goal) {
            return Ok(Action::Done);
        }
        let graph = self.graph.clone().ok_or_else(|| ctx.error("goap planner has no graph"))?;
        let path = graph
            .plan(&self.goal, ctx.view(), ctx.agents())
            .ok_or_else(|| ctx.error(format!("No path found for goal: {}", self.goal)))?;
        self.path = path;
        self.cursor = 0;
        Ok(self.next())
    }

    fn next_action(&mut self, _ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        Ok(self.next())
    }

    fn execution_state(&self) -> Value {
        state_of("goap", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: GoapPlanner = restore_as("goap", state)?;
        self.path = restored.path;
        self.cursor = restored.cursor;
        Ok(())
    }

    fn reads_state(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "goap"
    }
}

/// A goal-oriented composite.
///
/// Goal-oriented action planning (GOAP): the agents' inputs are their preconditions and their output keys
/// their effects. At build time the composite builds a dependency graph (petgraph: key → agent for every
/// input, agent → key for every output key). At its first step it plans, from the keys present in the state,
/// the shortest sequence of agents that produces the goal — the composite's `output_key` — and then runs that
/// sequence in order. Keys in the state that no agent reads are ignored; an input with a declared default
/// counts as present.
///
/// Planning chains backwards from the goal: a present key costs nothing; a missing key is produced by the
/// producer whose own plan (itself plus the plans of its missing inputs, shared agents counted once) has the
/// fewest agents (ties: the first declared). The chosen agents run in dependency order, ties broken by
/// declaration order. No plan → the planner error `No path found for goal: <goal>`; the goal already present
/// → done at once, nothing runs (the original planned a path anyway).
///
/// Follows the goal-oriented pattern of LangChain4j agentic (`GoalOrientedPlanner` over a
/// `GoalOrientedSearchGraph`). The plan and the position in it are the serialisable execution state, so a
/// resumed run continues the same plan at the next agent.
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// use agentic_planners::{CompositeBuilderExt, Goap};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let write = Compute::template("write", "{{ person }} is a {{ sign }}")?.output_key("writeup").build();
/// let person = Compute::template("person", "{{ prompt | upper }}")?.output_key("person").build();
/// let sign = Compute::expression("sign", "'pisces'")?.inputs(["prompt"]).output_key("sign").build();
/// let goap = Goap::builder().sub_agents([write, person, sign]).output_key("writeup").build()?;
/// let out = goap.invoke().input("prompt", "mario").await?;
/// assert_eq!(out.output(), Some(&serde_json::json!("MARIO is a pisces")));
/// # Ok(()) }
/// ```
pub struct Goap;

impl Goap {
    /// Starts a builder. Default name `goap`. The goal is the composite's `output_key` (required).
    pub fn builder() -> GoapBuilder {
        GoapBuilder { parts: CompositeParts::new("goap") }
    }
}

/// Builder of a [`Goap`] composite.
pub struct GoapBuilder {
    parts: CompositeParts,
}

composite_builder!(GoapBuilder);

impl GoapBuilder {
    /// Builds the composite and its dependency graph.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] without an `output_key` (the goal); [`BuildError::ConflictingTypes`] when the
    /// tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let Some(goal) = self.parts.spec.output_key.clone() else {
            return Err(BuildError::Invalid {
                agent: self.parts.spec.name.clone(),
                message: "a goap composite needs an `output_key`: it is the goal".to_string(),
            });
        };
        let graph = Arc::new(GoapGraph::new(&self.parts.agents));
        let details = json!({ "goal": goal });
        self.parts.build(
            move || GoapPlanner { graph: Some(graph.clone()), goal: goal.clone(), ..Default::default() },
            details,
        )
    }
}

/// The `goap` kind of specs: `agents`, planned towards the composite's `output_key` (the goal).
pub struct GoapKind;

impl PlannerKind for GoapKind {
    fn name(&self) -> &str {
        "goap"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[KindField::required("agents", FieldType::Agents)];
        FIELDS
    }

    fn build(&self, _args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        GoapBuilder { parts }.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, PlanningContext};

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [
            agent("write", "person ~ sign", Some("writeup")),
            agent("person", "prompt | upper", Some("person")),
            agent("sign", "prompt ~ '?'", Some("sign")),
        ];
        let spec = AgentSpec::new("goap", "goap");
        let ctx = PlanningContext::new(view(json!({"prompt": "mario"})), &agents, &spec, "root");
        let graph = Arc::new(GoapGraph::new(&agents));
        let planner = || GoapPlanner { graph: Some(graph.clone()), goal: "writeup".to_string(), ..Default::default() };
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap()).remove(0);
        p.next_action(&ctx, &done(first, json!("MARIO"))).unwrap();
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"path":[1,2,0],"cursor":2}"#);
        let completed = done(agentic_engine::AgentCall::new(2), json!("mario?"));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
