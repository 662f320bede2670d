//! The [`P2p`] composite and its planner; the behaviour is documented on [`P2p`].

use std::sync::Arc;

use agentic_engine::{
    Action, AgentCall, AgentError, AgentRef, AgentSpec, BuildError, Completion, Planner, PlanningContext, ScopeView,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, PlannerKind};

/// A P2P exit condition: `(state, invocations started so far) → exit?`; `Err` fails the composite with an
/// expression error.
pub type InvocationCondition = Arc<dyn Fn(&ScopeView, u32) -> Result<bool, String> + Send + Sync>;

/// FNV-1a, 64 bits: a hash that is stable across processes and Rust versions (journaled fingerprints must
/// compare equal after a restart).
fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// The fingerprint of the input values `spec` would read from `view` (a declared default counts as present),
/// or `None` when an input is missing. Two equal fingerprints mean "nothing the agent reads has changed".
pub(crate) fn input_fingerprint(spec: &AgentSpec, view: &ScopeView) -> Option<u64> {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for input in &spec.inputs {
        let value = view.get(&input.key).or(input.default.as_ref())?;
        fnv1a(&mut hash, input.key.as_bytes());
        fnv1a(&mut hash, &[0]);
        fnv1a(&mut hash, value.to_string().as_bytes());
        fnv1a(&mut hash, &[0]);
    }
    Some(hash)
}

/// The fingerprint of agent `index` when it is activatable (inputs present, changed since `seen`).
pub(crate) fn activatable(ctx: &PlanningContext<'_>, index: usize, seen: Option<u64>) -> Option<u64> {
    let fp = input_fingerprint(ctx.agent_spec(index)?, ctx.view())?;
    (seen != Some(fp)).then_some(fp)
}

struct P2pConfig {
    max_invocations: u32,
    exit: Option<InvocationCondition>,
}

/// The P2P planner. Execution state: `{"seen": [fingerprint|null per agent], "running": [bool per agent],
/// "invocations": n}` — what each agent saw when it last started, which agents are in flight, and how many
/// invocations were started.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct P2pPlanner {
    seen: Vec<Option<u64>>,
    running: Vec<bool>,
    invocations: u32,
    #[serde(skip)]
    config: Option<Arc<P2pConfig>>,
}

impl P2pPlanner {
    fn config(&self, ctx: &PlanningContext<'_>) -> Result<Arc<P2pConfig>, AgentError> {
        self.config.clone().ok_or_else(|| ctx.error("p2p planner has no configuration"))
    }

    fn exit(&self, ctx: &PlanningContext<'_>, cfg: &P2pConfig) -> Result<bool, AgentError> {
        match &cfg.exit {
            Some(f) => f(ctx.view(), self.invocations).map_err(|m| ctx.expression_error("exit condition", m)),
            None => Ok(false),
        }
    }

    /// Starts every activatable agent (within the budget); done at quiescence.
    fn step(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config(ctx)?;
        if self.exit(ctx, &cfg)? {
            return Ok(Action::Done);
        }
        let mut calls = Vec::new();
        for i in 0..ctx.agents().len() {
            if self.invocations >= cfg.max_invocations {
                break;
            }
            if self.running[i] {
                continue;
            }
            if let Some(fp) = activatable(ctx, i, self.seen[i]) {
                self.seen[i] = Some(fp);
                self.running[i] = true;
                self.invocations += 1;
                calls.push(AgentCall::new(i));
            }
        }
        if !calls.is_empty() {
            return Ok(Action::Call(calls));
        }
        Ok(if self.running.iter().any(|r| *r) { Action::Nothing } else { Action::Done })
    }
}

impl Planner for P2pPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let n = ctx.agents().len();
        self.seen = vec![None; n];
        self.running = vec![false; n];
        self.invocations = 0;
        self.step(ctx)
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let slot = self
            .running
            .get_mut(done.call.agent)
            .ok_or_else(|| ctx.error(format!("completion for unknown sub-agent {}", done.call.agent)))?;
        *slot = false;
        self.step(ctx)
    }

    fn execution_state(&self) -> Value {
        state_of("p2p", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: P2pPlanner = restore_as("p2p", state)?;
        if restored.seen.len() != restored.running.len() {
            return Err("p2p planner state: `seen` and `running` differ in length".to_string());
        }
        self.seen = restored.seen;
        self.running = restored.running;
        self.invocations = restored.invocations;
        Ok(())
    }

    fn reads_state(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "p2p"
    }
}

/// A peer-to-peer composite: agents activate themselves from the state.
///
/// Peer-to-peer (P2P): no agent leads; an agent runs when the state lets it. An agent is *activatable* when
/// all its inputs are present (in the state, or by their declared default) and at least one of them changed
/// since it last ran (an agent that never ran counts as changed); every activatable agent runs, in parallel.
/// The composite ends when the exit condition holds, when the `max_invocations` budget is spent, or when
/// nothing is activatable and nothing is running (quiescence).
///
/// Follows the P2P pattern of LangChain4j agentic (`P2PPlanner` with its agent activators). Differences, all
/// deliberate: "changed" compares what the agent actually saw (a fingerprint of its input values, kept in the
/// execution state) instead of "its input key was written", so re-writing an identical value never
/// re-triggers anyone and a quiescent system can never spin; `max_invocations = N` means at most N agent
/// invocations (the original could overshoot by a whole batch); and the activation state is serialisable, so
/// a resumed run continues exactly where it stopped.
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// use agentic_planners::{CompositeBuilderExt, P2p};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let findings = Compute::template("literature", "findings on {{ topic }}")?.output_key("findings").build();
/// let hypothesis = Compute::template("hypothesis", "H({{ findings }})")?.output_key("hypothesis").build();
/// let research = P2p::builder().sub_agents([hypothesis, findings]).output_key("hypothesis").build()?;
/// let out = research.invoke().input("topic", "black holes").await?;
/// assert_eq!(out.output(), Some(&serde_json::json!("H(findings on black holes)")));
/// # Ok(()) }
/// ```
pub struct P2p;

impl P2p {
    /// Starts a builder. Defaults: name `p2p`, `max_invocations` 10, no exit condition (runs until
    /// quiescence or the budget is spent).
    pub fn builder() -> P2pBuilder {
        P2pBuilder { parts: CompositeParts::new("p2p"), max_invocations: 10, exit: None }
    }
}

/// Builder of a [`P2p`] composite.
pub struct P2pBuilder {
    parts: CompositeParts,
    max_invocations: u32,
    exit: Option<InvocationCondition>,
}

composite_builder!(P2pBuilder);

impl P2pBuilder {
    /// At most `n` agent invocations in total (default 10); once spent, the composite ends (not an error).
    pub fn max_invocations(mut self, n: u32) -> Self {
        self.max_invocations = n;
        self
    }

    /// The exit condition over the state and the number of invocations started so far, checked before the
    /// first activation and after every completion; `Err` fails the composite with an expression error.
    pub fn exit_condition(
        mut self,
        f: impl Fn(&ScopeView, u32) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.exit = Some(Arc::new(f));
        self
    }

    /// An infallible exit condition over the state.
    pub fn exit_when(self, f: impl Fn(&ScopeView) -> bool + Send + Sync + 'static) -> Self {
        self.exit_condition(move |v, _| Ok(f(v)))
    }

    /// Builds the composite.
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let details = json!({ "max_invocations": self.max_invocations, "has_exit_condition": self.exit.is_some() });
        let config = Arc::new(P2pConfig { max_invocations: self.max_invocations, exit: self.exit });
        self.parts.build(move || P2pPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `p2p` kind of specs: `agents` run whenever their inputs change, until `exit_when` holds (it sees
/// `invocations`) or after `max_invocations` (default 10).
pub struct P2pKind;

impl PlannerKind for P2pKind {
    fn name(&self) -> &str {
        "p2p"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents),
            KindField::optional("max_invocations", FieldType::Integer { min: 1, max: u32::MAX as i64 }),
            KindField::optional("exit_when", FieldType::Expression),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let exit = args.expression("exit_when").map(|e| {
            Arc::new(move |view: &ScopeView, invocations: u32| {
                e.eval_bool(view, &[("invocations", Value::from(invocations))])
            }) as InvocationCondition
        });
        P2pBuilder { parts, max_invocations: args.get_u32("max_invocations").unwrap_or(10), exit }.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents =
            [agent("hypothesis", "findings", Some("hypothesis")), agent("literature", "topic", Some("findings"))];
        let spec = AgentSpec::new("p2p", "p2p");
        let ctx = PlanningContext::new(view(json!({"topic": "black holes"})), &agents, &spec, "root");
        let config = Arc::new(P2pConfig { max_invocations: 10, exit: None });
        let planner = || P2pPlanner { config: Some(config.clone()), ..Default::default() };
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap()).remove(0);
        // Fingerprints are journaled as unsigned 64-bit numbers, this one above `i64::MAX`.
        assert_eq!(input_fingerprint(agents[1].spec(), ctx.view()), Some(9303754478365262716));
        let mut restored = planner();
        assert_state(
            &p,
            &mut restored,
            r#"{"seen":[null,9303754478365262716],"running":[false,true],"invocations":1}"#,
        );
        let after =
            PlanningContext::new(view(json!({"topic": "black holes", "findings": "f"})), &agents, &spec, "root");
        let completed = done(first, json!("f"));
        assert_eq!(restored.next_action(&after, &completed).unwrap(), p.next_action(&after, &completed).unwrap());
        assert_eq!(restored.execution_state(), p.execution_state());
    }
}
