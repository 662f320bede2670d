//! **A planner kind of your own, used from a spec** — `round_robin`: the agents take turns, round after round,
//! until `rounds` rounds are done or the `until` expression holds after a turn. Each call is told its round
//! (`round`, bound for the call like a debate's transcript). This file is the whole kind: the planner, its
//! descriptor (the spec fields and their types) and the one line that registers it; the spec
//! (`examples/kinds/round_robin.yaml`) then writes `kind: round_robin` like any built-in kind, with the same
//! checks and located errors, durable steps and resume.
//!
//! ```text
//! cargo run --example round_robin                                              # runs the spec below
//! cargo run --example round_robin -- run examples/kinds/round_robin.yaml --input draft="A fox"
//! cargo run --example round_robin -- serve --specs examples/kinds                # any `agentic` command
//! ```
//!
//! With arguments, the example is the `agentic` command line with the kind registered
//! ([`agentic_cli::main`]): a program that adds kinds ships its own `agentic` this way.

use std::error::Error;
use std::sync::Arc;

use agentic::agents::Expression;
use agentic::engine::PlannerFactory;
use agentic::engine::{Action, AgentCall, Completion, Planner, PlanningContext};
use agentic::prelude::*;
use agentic::spec::{FieldType, KindArgs, KindField, PlannerKind, Spec, register_kind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The key each call is bound: the round it belongs to (1-based).
pub const ROUND_KEY: &str = "round";

/// Rounds when a spec does not say.
pub const DEFAULT_ROUNDS: u32 = 3;

/// The planner: whose turn it is, in which round. Everything it needs to continue after a resume is in its
/// execution state (the settings are rebuilt from the spec).
#[derive(Serialize, Deserialize, Default)]
pub struct RoundRobinPlanner {
    round: u32,
    turn: usize,
    #[serde(skip)]
    rounds: u32,
    #[serde(skip)]
    until: Option<Arc<Expression>>,
}

impl RoundRobinPlanner {
    fn call(&self) -> Action {
        let mut bound = Map::new();
        bound.insert(ROUND_KEY.to_string(), json!(self.round));
        Action::Call(vec![AgentCall::new(self.turn).bindings(bound)])
    }
}

impl Planner for RoundRobinPlanner {
    fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
        if ctx.agents().is_empty() {
            return Ok(Action::Done);
        }
        self.round = 1;
        self.turn = 0;
        Ok(self.call())
    }

    fn next_action(&mut self, ctx: &PlanningContext<'_>, _done: &Completion) -> Result<Action, AgentError> {
        if let Some(until) = &self.until {
            let extra = [(ROUND_KEY, json!(self.round))];
            if until.eval_bool(ctx.view(), &extra).map_err(|e| ctx.expression_error("until", e))? {
                return Ok(Action::Done);
            }
        }
        self.turn += 1;
        if self.turn == ctx.agents().len() {
            self.turn = 0;
            self.round += 1;
            if self.round > self.rounds {
                return Ok(Action::Done);
            }
        }
        Ok(self.call())
    }

    fn execution_state(&self) -> Value {
        json!({ "round": self.round, "turn": self.turn })
    }

    fn restore(&mut self, state: Value) -> Result<(), String> {
        let saved: RoundRobinPlanner = serde_json::from_value(state).map_err(|e| e.to_string())?;
        (self.round, self.turn) = (saved.round, saved.turn);
        Ok(())
    }

    fn reads_state(&self) -> bool {
        self.until.is_some()
    }
}

/// The kind's descriptor: what a spec writes, and how the planner is made from it.
pub struct RoundRobinKind;

impl PlannerKind for RoundRobinKind {
    fn name(&self) -> &str {
        "round_robin"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[
            KindField::required("agents", FieldType::Agents),
            KindField::optional("rounds", FieldType::Integer { min: 1, max: 1000 }),
            KindField::optional("until", FieldType::Expression),
        ];
        FIELDS
    }

    fn planner(&self, args: &KindArgs) -> Result<PlannerFactory, String> {
        let rounds = args.get_u32("rounds").unwrap_or(DEFAULT_ROUNDS);
        let until = args.expression("until");
        Ok(Arc::new(move || Box::new(RoundRobinPlanner { rounds, until: until.clone(), ..Default::default() })))
    }

    /// The settings with the default applied: they are part of the workflow's fingerprint, so a run keeps
    /// the number of rounds it started with.
    fn details(&self, args: &KindArgs) -> Value {
        let mut details = Map::new();
        details.insert("rounds".into(), json!(args.get_u32("rounds").unwrap_or(DEFAULT_ROUNDS)));
        if let Some(until) = args.get("until") {
            details.insert("until".into(), until.clone());
        }
        Value::Object(details)
    }

    fn binds(&self, _args: &KindArgs) -> Vec<String> {
        vec![ROUND_KEY.to_string()]
    }
}

/// Registers the kind once per process (the one registration line; later calls are no-ops).
pub fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| register_kind(RoundRobinKind).expect("`round_robin` is a valid, new kind"));
}

fn main() -> Result<std::process::ExitCode, Box<dyn Error>> {
    register();
    if std::env::args().len() > 1 {
        return Ok(agentic_cli::main());
    }
    let text = tokio::runtime::Runtime::new()?.block_on(run())?;
    println!("{text}");
    Ok(std::process::ExitCode::SUCCESS)
}

/// Runs `examples/kinds/round_robin.yaml` and returns its draft and the turns taken.
pub async fn run() -> Result<String, Box<dyn Error>> {
    register();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kinds/round_robin.yaml");
    let spec = Spec::from_path(std::path::Path::new(path))?;
    let outcome = spec.build()?.root.invoke().input("draft", "A fox").await?;
    let turns: Vec<String> = outcome.history().await?.iter().map(|r| format!("{} ({})", r.agent, r.path)).collect();
    let draft = outcome.state().get("draft").cloned().unwrap_or(Value::Null);
    Ok(format!("draft: {draft}\nturns: {}", turns.join(", ")))
}
