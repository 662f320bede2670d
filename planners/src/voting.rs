//! The [`Voting`] composite and its planner; the behaviour is documented on [`Voting`].

use std::sync::Arc;

use agentic_engine::{Action, AgentCall, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{Calls, FieldType, KindArgs, KindField, PlannerKind};

/// One vote, as a custom strategy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Vote {
    /// The voter's name.
    pub voter: String,
    /// Its answer.
    pub value: Value,
}

type CustomFn = Arc<dyn Fn(&[Vote]) -> Result<Value, String> + Send + Sync>;

/// How votes are aggregated. Default [`VotingStrategy::Majority`].
#[derive(Clone, Default)]
pub enum VotingStrategy {
    /// The most common value (JSON equality); ties → the earliest declared voter's value among the tied ones.
    #[default]
    Majority,
    /// The arithmetic mean, as a JSON float; a vote that is neither a number nor a numeric string is an error
    /// naming the voter.
    Average,
    /// The greatest value: all numbers (numeric order) or all strings (lexicographic order); ties → the
    /// earliest voter's value. Mixed types are an error naming the first voter whose type differs.
    Highest,
    /// A custom aggregation over the votes in declaration order; `Err` fails the composite with that message.
    Custom(CustomFn),
}

impl VotingStrategy {
    /// A custom aggregation (e.g. weighted votes, a quorum rule).
    pub fn custom(f: impl Fn(&[Vote]) -> Result<Value, String> + Send + Sync + 'static) -> Self {
        VotingStrategy::Custom(Arc::new(f))
    }

    /// The strategy's name (`majority`, `average`, `highest`, `custom`).
    pub fn name(&self) -> &'static str {
        match self {
            VotingStrategy::Majority => "majority",
            VotingStrategy::Average => "average",
            VotingStrategy::Highest => "highest",
            VotingStrategy::Custom(_) => "custom",
        }
    }

    /// Parses a spec name: `majority`, `average` or `highest`.
    ///
    /// # Errors
    /// Any other name, with the list of valid ones.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "majority" => Ok(VotingStrategy::Majority),
            "average" => Ok(VotingStrategy::Average),
            "highest" => Ok(VotingStrategy::Highest),
            other => Err(format!("unknown voting strategy `{other}`, expected `majority`, `average` or `highest`")),
        }
    }

    /// Aggregates `votes` (in declaration order). No vote → `null`.
    ///
    /// # Errors
    /// A vote the strategy cannot use (message names the voter), or the custom closure's error.
    pub fn aggregate(&self, votes: &[Vote]) -> Result<Value, String> {
        if let VotingStrategy::Custom(f) = self {
            return f(votes);
        }
        if votes.is_empty() {
            return Ok(Value::Null);
        }
        match self {
            VotingStrategy::Majority => {
                // (value, count, first voter position), in order of first appearance.
                let mut tally: Vec<(&Value, usize)> = Vec::new();
                for v in votes {
                    match tally.iter_mut().find(|(value, _)| *value == &v.value) {
                        Some((_, count)) => *count += 1,
                        None => tally.push((&v.value, 1)),
                    }
                }
                let best = tally.iter().map(|(_, c)| *c).max().unwrap_or(0);
                Ok(tally.into_iter().find(|(_, c)| *c == best).map(|(v, _)| v.clone()).unwrap_or(Value::Null))
            }
            VotingStrategy::Average => {
                let mut sum = 0.0;
                for v in votes {
                    sum += number(&v.value).ok_or_else(|| {
                        format!("voter `{}` returned {}, which is not a number (strategy average)", v.voter, v.value)
                    })?;
                }
                let mean = sum / votes.len() as f64;
                serde_json::Number::from_f64(mean)
                    .map(Value::Number)
                    .ok_or_else(|| format!("the average of the votes is not a finite number ({mean})"))
            }
            VotingStrategy::Highest => {
                let numeric = votes[0].value.is_number();
                let mut best = &votes[0];
                for v in votes {
                    let greater = match (&v.value, &best.value) {
                        (Value::Number(a), Value::Number(b)) if numeric => {
                            a.as_f64().unwrap_or(f64::NAN) > b.as_f64().unwrap_or(f64::NAN)
                        }
                        (Value::String(a), Value::String(b)) if !numeric => a > b,
                        _ => {
                            return Err(format!(
                                "voter `{}` returned {}, which cannot be compared with the other votes (strategy \
                                 highest compares numbers or strings)",
                                v.voter, v.value
                            ));
                        }
                    };
                    if greater {
                        best = v;
                    }
                }
                Ok(best.value.clone())
            }
            VotingStrategy::Custom(_) => Ok(Value::Null),
        }
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

struct VotingConfig {
    strategy: VotingStrategy,
    /// Per voter: whether its output is written to its own `output_key`.
    writes: Vec<bool>,
}

/// The voting planner. Execution state: `{"votes": [vote|null per voter], "done": [bool per voter]}` — the
/// votes received so far (`null` with `done` = abstained).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct VotingPlanner {
    votes: Vec<Option<Value>>,
    done: Vec<bool>,
    #[serde(skip)]
    config: Option<Arc<VotingConfig>>,
}

impl Planner for VotingPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config.clone().ok_or_else(|| ctx.error("voting planner has no configuration"))?;
        let n = ctx.agents().len();
        if n == 0 {
            return Ok(Action::DoneWith(cfg.strategy.aggregate(&[]).map_err(|m| ctx.error(m))?));
        }
        self.votes = vec![None; n];
        self.done = vec![false; n];
        let calls = (0..n).map(|i| AgentCall::new(i).write_output(cfg.writes.get(i).copied().unwrap_or(false)));
        Ok(Action::Call(calls.collect()))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let cfg = self.config.clone().ok_or_else(|| ctx.error("voting planner has no configuration"))?;
        let i = done.call.agent;
        if i >= self.done.len() {
            return Err(ctx.error(format!("completion for unknown voter {i}")));
        }
        self.done[i] = true;
        self.votes[i] = (!done.skipped).then(|| done.output.clone());
        if self.done.iter().any(|d| !d) {
            return Ok(Action::Nothing);
        }
        let votes: Vec<Vote> = self
            .votes
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let voter = ctx.agent_spec(i).map(|s| s.name.clone()).unwrap_or_default();
                v.clone().map(|value| Vote { voter, value })
            })
            .collect();
        cfg.strategy.aggregate(&votes).map(Action::DoneWith).map_err(|m| ctx.error(m))
    }

    fn execution_state(&self) -> Value {
        state_of("voting", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: VotingPlanner = restore_as("voting", state)?;
        if restored.votes.len() != restored.done.len() {
            return Err("voting planner state: `votes` and `done` differ in length".to_string());
        }
        self.votes = restored.votes;
        self.done = restored.done;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "voting"
    }
}

/// A voting composite.
///
/// Voting (a council): every voter answers the same question, all in parallel; when all have answered, the
/// votes are aggregated by a strategy and the result is the composite's result (written to its
/// `output_key`). Built-in strategies: [`VotingStrategy::Majority`] (the most common value; a tie goes to the
/// value of the earliest declared voter among the tied values), [`VotingStrategy::Average`] (the mean of
/// numeric votes; numeric strings such as `"0.8"` count as numbers, anything else is an error naming the
/// voter), [`VotingStrategy::Highest`] (the greatest vote: numbers numerically, strings lexicographically);
/// or a custom Rust closure ([`VotingStrategy::custom`]). An optional voter skipped for a missing input
/// abstains; no vote at all gives `null`.
///
/// Voters whose `output_key` is shared with another voter (or is the composite's own `output_key`) are
/// called without writing their output, so that they do not overwrite each other; the others write their
/// votes as usual.
///
/// Follows the voting pattern of LangChain4j agentic (`VotingPlanner`, `VotingStrategy.majority()`,
/// `average()`, `highest()`); deterministic ties and the serialisable votes (a resumed run never asks a voter
/// twice) are ours.
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// use agentic_planners::{CompositeBuilderExt, Voting, VotingStrategy};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let a = Compute::expression("a", "'POSITIVE'")?.output_key("vote").build();
/// let b = Compute::expression("b", "'NEGATIVE'")?.output_key("vote").build();
/// let c = Compute::expression("c", "'POSITIVE'")?.output_key("vote").build();
/// let council = Voting::builder().sub_agents([a, b, c]).strategy(VotingStrategy::Majority).output_key("label").build()?;
/// let out = council.invoke().await?;
/// assert_eq!(out.output(), Some(&serde_json::json!("POSITIVE")));
/// # Ok(()) }
/// ```
pub struct Voting;

impl Voting {
    /// Starts a builder. Defaults: name `voting`, strategy majority.
    pub fn builder() -> VotingBuilder {
        VotingBuilder { parts: CompositeParts::new("voting"), strategy: VotingStrategy::Majority }
    }
}

/// Builder of a [`Voting`] composite.
pub struct VotingBuilder {
    parts: CompositeParts,
    strategy: VotingStrategy,
}

composite_builder!(VotingBuilder);

impl VotingBuilder {
    /// The aggregation strategy (default majority).
    pub fn strategy(mut self, strategy: VotingStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// A custom aggregation closure over the votes in declaration order.
    pub fn aggregate(self, f: impl Fn(&[Vote]) -> Result<Value, String> + Send + Sync + 'static) -> Self {
        self.strategy(VotingStrategy::custom(f))
    }

    /// Builds the composite (the sub-agents are the voters).
    ///
    /// # Errors
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let own = self.parts.spec.output_key.clone();
        let keys: Vec<Option<String>> = self.parts.agents.iter().map(|a| a.spec().output_key.clone()).collect();
        let writes = keys
            .iter()
            .map(|k| match k {
                None => false,
                Some(k) => own.as_ref() != Some(k) && keys.iter().filter(|o| o.as_ref() == Some(k)).count() == 1,
            })
            .collect();
        let details = json!({ "strategy": self.strategy.name() });
        let config = Arc::new(VotingConfig { strategy: self.strategy, writes });
        self.parts.build(move || VotingPlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `voting` kind of specs: `agents` vote, `strategy` (`majority`, `average` or `highest`) counts.
pub struct VotingKind;

impl PlannerKind for VotingKind {
    fn name(&self) -> &str {
        "voting"
    }

    fn calls(&self) -> Calls {
        Calls::AllInOrder
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents),
            KindField::optional("strategy", FieldType::Choice(&["majority", "average", "highest"])),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let strategy = VotingStrategy::from_name(args.get_str("strategy").unwrap_or("majority"))
            .map_err(|message| BuildError::Invalid { agent: parts.spec.name.clone(), message })?;
        VotingBuilder { parts, strategy }.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::{AgentSpec, Completion};

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents =
            [agent("a", "'POS'", Some("vote")), agent("b", "'NEG'", Some("vote")), agent("c", "x", Some("vote"))];
        let spec = AgentSpec::new("voting", "voting");
        let ctx = PlanningContext::new(view(json!({})), &agents, &spec, "root");
        let config = Arc::new(VotingConfig { strategy: VotingStrategy::Majority, writes: vec![false; 3] });
        let planner = || VotingPlanner { config: Some(config.clone()), ..Default::default() };
        let mut p = planner();
        let first = calls(p.first_action(&ctx).unwrap());
        p.next_action(&ctx, &done(first[0].clone(), json!("POS"))).unwrap();
        let skipped = Completion { call: first[2].clone(), output: Value::Null, skipped: true, substituted: false };
        p.next_action(&ctx, &skipped).unwrap();
        let mut restored = planner();
        assert_state(&p, &mut restored, r#"{"votes":["POS",null,null],"done":[true,false,true]}"#);
        let completed = done(first[1].clone(), json!("NEG"));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
