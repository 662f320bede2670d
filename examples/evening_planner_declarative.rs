//! **Parallel, declared** — the evening planner of `evening_planner.rs` with the declarative attributes: a food
//! expert and a movie expert, each answering exactly three names (`-> [String; 3]`: the answer is read as that
//! JSON schema), run at the same time by a `#[parallel]` whose `output` function pairs them into plans. The
//! typed call `planner.evening_planner("romantic").await?` returns the plans as a `Vec<Plan>`.
//!
//! ```text
//! cargo run --example evening_planner_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example evening_planner_declarative # the local model
//! ```
//!
//! Builder version: `examples/evening_planner.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// One evening: a movie and a meal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// The movie's title.
    pub movie: String,
    /// The meal's name.
    pub meal: String,
}

/// Two experts proposing ideas for a mood at the same time, paired into evening plans.
#[agents]
pub trait EveningPlanner {
    /// Proposes three meals.
    #[agent(
        description = "Proposes three meals matching a mood",
        system = "You are a great evening planner.",
        user = "Propose a list of 3 meals matching the mood: {{ mood }}.\nFor each meal, give only its name.",
        output_key = "meals"
    )]
    async fn food_expert(&self, mood: String) -> [String; 3];

    /// Proposes three movies.
    #[agent(
        description = "Proposes three movies matching a mood",
        system = "You are a great evening planner.",
        user = "Propose a list of 3 movies matching the mood: {{ mood }}.\nFor each movie, give only its title.",
        output_key = "movies"
    )]
    async fn movie_expert(&self, mood: String) -> [String; 3];

    /// Both experts at once; the plans pair their ideas.
    #[parallel(agents(food_expert, movie_expert), output = pair_plans, output_key = "plans")]
    async fn evening_planner(&self, mood: String) -> Vec<Plan>;
}

/// The parallel block's output: the i-th movie with the i-th meal (as many plans as the shorter list).
fn pair_plans(view: &ScopeView) -> Result<Value, String> {
    let list = |key: &str| view.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    let plans: Vec<Value> = list("movies")
        .into_iter()
        .zip(list("meals"))
        .map(|(movie, meal)| json!({"movie": movie, "meal": meal}))
        .collect();
    Ok(Value::Array(plans))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each expert asking its own model (the builder version's canned replies with `--scripted`).
pub fn evening_planner(scripted: bool) -> Result<EveningPlannerAgents, Box<dyn Error>> {
    Ok(EveningPlannerAgents::builder(model("food_expert", scripted)?)
        .movie_expert_model(model("movie_expert", scripted)?)
        .build()?)
}

/// Plans a romantic evening through the typed entry point and returns what `main` prints.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let plans: Vec<Plan> = evening_planner(scripted)?.evening_planner("romantic").await?;
    let mut report = String::from("plans for a romantic evening:");
    for (i, plan) in plans.iter().enumerate() {
        report += &format!("\n{}. {} with {}", i + 1, plan.movie, plan.meal);
    }
    Ok(report)
}

/// The model `agent` asks: the canned replies of `evening_planner.rs` with `--scripted`, else the default
/// model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `evening_planner.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "food_expert" => vec![r#"["Oysters with champagne", "Mushroom risotto", "Chocolate fondue"]"#],
        "movie_expert" => vec![r#"["Casablanca", "Before Sunrise", "La La Land"]"#],
        _ => vec![],
    }
}
