//! The [`Debate`] composite and its planner; the behaviour is documented on [`Debate`].

use std::sync::Arc;

use agentic_engine::{Action, AgentCall, AgentError, AgentRef, BuildError, Completion, Planner, PlanningContext};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::{CompositeParts, composite_builder, restore_as, state_of};
use crate::kind::{FieldType, KindArgs, KindField, PlannerKind};

/// The call binding carrying the debate context.
pub const DEBATE_CONTEXT_KEY: &str = "debateContext";

type ConvergedFn = Arc<dyn Fn(&[Value]) -> bool + Send + Sync>;

/// When the debaters agree. Default [`Convergence::Unanimous`].
#[derive(Clone, Default)]
pub enum Convergence {
    /// All answers are equal (JSON equality).
    #[default]
    Unanimous,
    /// The last words of all answers, upper-cased and stripped of punctuation, are equal.
    UnanimousLastWord,
    /// A custom check over the answers of the round, in declaration order.
    Custom(ConvergedFn),
}

impl Convergence {
    /// A custom convergence check.
    pub fn custom(f: impl Fn(&[Value]) -> bool + Send + Sync + 'static) -> Self {
        Convergence::Custom(Arc::new(f))
    }

    /// The strategy's name (`unanimous`, `unanimous_last_word`, `custom`).
    pub fn name(&self) -> &'static str {
        match self {
            Convergence::Unanimous => "unanimous",
            Convergence::UnanimousLastWord => "unanimous_last_word",
            Convergence::Custom(_) => "custom",
        }
    }

    /// Parses a spec name: `unanimous` or `unanimous_last_word`.
    ///
    /// # Errors
    /// Any other name, with the list of valid ones.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "unanimous" => Ok(Convergence::Unanimous),
            "unanimous_last_word" => Ok(Convergence::UnanimousLastWord),
            other => Err(format!("unknown convergence `{other}`, expected `unanimous` or `unanimous_last_word`")),
        }
    }

    /// Whether `answers` (in declaration order) have converged.
    pub fn converged(&self, answers: &[Value]) -> bool {
        match self {
            Convergence::Unanimous => answers.windows(2).all(|w| w[0] == w[1]),
            Convergence::UnanimousLastWord => {
                let words: Vec<String> = answers.iter().map(|a| last_word(&text(a))).collect();
                words.windows(2).all(|w| w[0] == w[1])
            }
            Convergence::Custom(f) => f(answers),
        }
    }
}

/// The last whitespace-separated word, upper-cased, keeping letters and digits only.
fn last_word(s: &str) -> String {
    s.split_whitespace().last().unwrap_or("").chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_uppercase()
}

/// An answer as text: a string as is, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

struct DebateConfig {
    /// Number of debaters: sub-agents `0..debaters`; the judge is the last sub-agent.
    debaters: usize,
    max_rounds: u32,
    convergence: Convergence,
}

/// The debate planner. Execution state: `{"round": r, "context": "...", "answers": [answer|null per
/// debater], "judging": bool}` — the current round (1-based), the context the round was called with, the
/// answers received in this round, and whether the judge has been called.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct DebatePlanner {
    round: u32,
    context: String,
    answers: Vec<Option<Value>>,
    judging: bool,
    #[serde(skip)]
    config: Option<Arc<DebateConfig>>,
}

impl DebatePlanner {
    fn call(&self, agent: usize) -> AgentCall {
        let mut b = Map::new();
        b.insert(DEBATE_CONTEXT_KEY.to_string(), Value::String(self.context.clone()));
        AgentCall::new(agent).tag(u64::from(self.round)).bindings(b)
    }

    fn round_calls(&mut self, n: usize) -> Action {
        self.answers = vec![None; n];
        Action::Call((0..n).map(|i| self.call(i)).collect())
    }
}

impl Planner for DebatePlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        let cfg = self.config.clone().ok_or_else(|| ctx.error("debate planner has no configuration"))?;
        self.round = 1;
        self.context = String::new();
        self.judging = false;
        Ok(self.round_calls(cfg.debaters))
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, done: &Completion) -> Result<Action, AgentError> {
        let cfg = self.config.clone().ok_or_else(|| ctx.error("debate planner has no configuration"))?;
        if self.judging {
            return Ok(Action::DoneWith(done.output.clone()));
        }
        let i = done.call.agent;
        let slot = self.answers.get_mut(i).ok_or_else(|| ctx.error(format!("completion for unknown debater {i}")))?;
        *slot = Some(done.output.clone());
        if self.answers.iter().any(Option::is_none) {
            return Ok(Action::Nothing);
        }
        let answers: Vec<Value> = self.answers.iter().map(|a| a.clone().unwrap_or(Value::Null)).collect();
        self.context = answers
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let name = ctx.agent_spec(i).map(|s| s.name.as_str()).unwrap_or("");
                format!("{name}: \"{}\"", text(a))
            })
            .collect::<Vec<_>>()
            .join("\n");
        if self.round >= cfg.max_rounds || cfg.convergence.converged(&answers) {
            self.judging = true;
            return Ok(Action::Call(vec![self.call(cfg.debaters)]));
        }
        self.round += 1;
        Ok(self.round_calls(cfg.debaters))
    }

    fn execution_state(&self) -> Value {
        state_of("debate", self)
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let restored: DebatePlanner = restore_as("debate", state)?;
        self.round = restored.round;
        self.context = restored.context;
        self.answers = restored.answers;
        self.judging = restored.judging;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "debate"
    }
}

/// A debate composite.
///
/// Debate: debaters answer, read each other's answers and refine theirs over rounds; a judge gives the final
/// verdict. Round 1: all debaters answer in parallel with an empty `debateContext`. After each round the
/// context is one line per debater, `Name: "answer"`, in declaration order (joined with `\n`; a non-string
/// answer is shown as JSON). When the answers have converged, or after `max_rounds` rounds (default 3), the
/// judge runs with that context; its answer is the composite's result. The context is passed to every call
/// as the call binding [`DEBATE_CONTEXT_KEY`] (`debateContext`): declare it as an input of the debaters and
/// the judge (or use it in their templates); it is not written to the state.
///
/// Convergence: [`Convergence::Unanimous`] (all answers equal, the default), [`Convergence::UnanimousLastWord`]
/// (the last word of every answer, upper-cased with punctuation stripped, is the same — e.g. a closing
/// `AGREE.`), or a custom Rust closure.
///
/// Follows the debate pattern of LangChain4j agentic (`DebatePlanner`, `ConvergenceStrategy.unanimous()`,
/// `unanimousLastWord()`). Differences: the context lists debaters in declaration order (the original used
/// hash order), and the round, the context and the answers so far are in the serialisable execution state.
///
/// ```
/// use agentic_agents::Compute;
/// use agentic_engine::SpecBuilder;
/// use agentic_planners::{CompositeBuilderExt, Debate};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pro = Compute::expression("Pro", "'AGREE'")?.build();
/// let con = Compute::expression("Con", "'AGREE'")?.build();
/// let judge = Compute::template("Judge", "verdict on: {{ debateContext }}")?.build();
/// let panel = Debate::builder().debaters([pro, con]).judge(judge).output_key("verdict").build()?;
/// let out = panel.invoke().await?;
/// assert_eq!(out.output(), Some(&serde_json::json!("verdict on: Pro: \"AGREE\"\nCon: \"AGREE\"")));
/// # Ok(()) }
/// ```
pub struct Debate;

impl Debate {
    /// Starts a builder. Defaults: name `debate`, `max_rounds` 3, convergence unanimous. Debaters (at least
    /// 2) and a judge are required.
    pub fn builder() -> DebateBuilder {
        DebateBuilder {
            parts: CompositeParts::new("debate"),
            debaters: Vec::new(),
            judge: None,
            max_rounds: 3,
            convergence: Convergence::Unanimous,
        }
    }
}

/// Builder of a [`Debate`] composite.
pub struct DebateBuilder {
    parts: CompositeParts,
    debaters: Vec<AgentRef>,
    judge: Option<AgentRef>,
    max_rounds: u32,
    convergence: Convergence,
}

composite_builder!(DebateBuilder);

impl DebateBuilder {
    /// The debaters, in order (their names appear in the context). Replaces any debaters set before.
    pub fn debaters(mut self, agents: impl IntoIterator<Item = AgentRef>) -> Self {
        self.debaters = agents.into_iter().collect();
        self
    }

    /// The judge: runs once with the final context; its answer is the result.
    pub fn judge(mut self, agent: AgentRef) -> Self {
        self.judge = Some(agent);
        self
    }

    /// At most `n` rounds (default 3; at least 1).
    pub fn max_rounds(mut self, n: u32) -> Self {
        self.max_rounds = n;
        self
    }

    /// The convergence check (default unanimous).
    pub fn convergence(mut self, convergence: Convergence) -> Self {
        self.convergence = convergence;
        self
    }

    /// A custom convergence check over the answers of a round, in declaration order.
    pub fn converged_when(self, f: impl Fn(&[Value]) -> bool + Send + Sync + 'static) -> Self {
        self.convergence(Convergence::custom(f))
    }

    /// Builds the composite. Its sub-agents are the debaters followed by the judge (`sub_agents` set on the
    /// builder are ignored).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] with fewer than 2 debaters, without a judge, or with `max_rounds` 0;
    /// [`BuildError::ConflictingTypes`] when the tree declares one key with two types.
    pub fn build(self) -> Result<AgentRef, BuildError> {
        let name = self.parts.spec.name.clone();
        let invalid = |message: String| BuildError::Invalid { agent: name.clone(), message };
        if self.debaters.len() < 2 {
            return Err(invalid(format!("a debate needs at least 2 debaters, found {}", self.debaters.len())));
        }
        let Some(judge) = self.judge else { return Err(invalid("a debate needs a judge".to_string())) };
        if self.max_rounds == 0 {
            return Err(invalid("`max_rounds` must be at least 1".to_string()));
        }
        let mut parts = self.parts;
        let debaters = self.debaters.len();
        parts.agents = self.debaters;
        parts.agents.push(judge);
        parts.binds = vec![DEBATE_CONTEXT_KEY.to_string()];
        let details = json!({
            "debaters": debaters,
            "max_rounds": self.max_rounds,
            "convergence": self.convergence.name(),
        });
        let config = Arc::new(DebateConfig { debaters, max_rounds: self.max_rounds, convergence: self.convergence });
        parts.build(move || DebatePlanner { config: Some(config.clone()), ..Default::default() }, details)
    }
}

/// The `debate` kind of specs: `debaters` (at least 2), `judge`, `max_rounds` (default 3), `convergence`
/// (`unanimous` or `unanimous_last_word`), built with [`DebateBuilder`].
pub struct DebateKind;

impl PlannerKind for DebateKind {
    fn name(&self) -> &str {
        "debate"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("debaters", FieldType::Agents).at_least(2),
            KindField::required("judge", FieldType::Agent),
            KindField::optional("max_rounds", FieldType::Integer { min: 1, max: u32::MAX as i64 }),
            KindField::optional("convergence", FieldType::Choice(&["unanimous", "unanimous_last_word"])),
        ];
        FIELDS
    }

    fn build(&self, args: &KindArgs, mut parts: CompositeParts) -> Result<AgentRef, BuildError> {
        let invalid = |message: String| BuildError::Invalid { agent: parts.spec.name.clone(), message };
        let convergence =
            Convergence::from_name(args.get_str("convergence").unwrap_or("unanimous")).map_err(invalid)?;
        let mut debaters = std::mem::take(&mut parts.agents);
        // The sub-agents come in field order: the debaters, then the judge.
        let judge = debaters.pop();
        let max_rounds = args.get_u32("max_rounds").unwrap_or(3);
        DebateBuilder { parts, debaters, judge, max_rounds, convergence }.build()
    }
}

#[cfg(test)]
mod tests {
    use agentic_engine::AgentSpec;

    use super::*;
    use crate::common::testing::{agent, assert_state, calls, done, view};

    #[test]
    fn execution_state_is_exact_and_restores() {
        let agents = [
            agent("Pro", "debateContext", None),
            agent("Con", "debateContext", None),
            agent("Judge", "debateContext", None),
        ];
        let spec = AgentSpec::new("debate", "debate");
        let ctx = PlanningContext::new(view(json!({})), &agents, &spec, "root");
        let config = Arc::new(DebateConfig { debaters: 2, max_rounds: 3, convergence: Convergence::Unanimous });
        let planner = || DebatePlanner { config: Some(config.clone()), ..Default::default() };
        let mut p = planner();
        let round1 = calls(p.first_action(&ctx).unwrap());
        p.next_action(&ctx, &done(round1[0].clone(), json!("yes"))).unwrap();
        let round2 = calls(p.next_action(&ctx, &done(round1[1].clone(), json!({"no": 1}))).unwrap());
        p.next_action(&ctx, &done(round2[1].clone(), json!("no"))).unwrap();
        let mut restored = planner();
        assert_state(
            &p,
            &mut restored,
            r#"{"round":2,"context":"Pro: \"yes\"\nCon: \"{\"no\":1}\"","answers":[null,"no"],"judging":false}"#,
        );
        let completed = done(round2[0].clone(), json!("no"));
        assert_eq!(restored.next_action(&ctx, &completed).unwrap(), p.next_action(&ctx, &completed).unwrap());
    }
}
