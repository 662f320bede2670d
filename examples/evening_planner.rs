//! **Parallel** — the evening planner: a food expert and a movie expert each propose three ideas for a mood,
//! at the same time; the block's `output` function pairs them into evening plans. Each expert's answer is a
//! JSON list of exactly three strings (a schema the local model is constrained to).
//!
//! ```text
//! cargo run --example evening_planner -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example evening_planner     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example evening_planner
//! ```
//!
//! Spec version: `examples/specs/evening_planner.yaml`; declarative twin: `examples/evening_planner_declarative.rs`.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::prelude::*;
use serde_json::{Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// Builds the two experts and the parallel block, runs it for a romantic evening and returns the plans.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let outcome = evening_planner(scripted)?.invoke().input("mood", "romantic").await?;

    let mut report = String::from("plans for a romantic evening:");
    let plans = outcome.output().and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, plan) in plans.iter().enumerate() {
        let field = |key: &str| plan[key].as_str().unwrap_or_default().to_string();
        report += &format!("\n{}. {} with {}", i + 1, field("movie"), field("meal"));
    }
    Ok(report)
}

/// The two experts in a parallel block whose output pairs their ideas.
/// (`evening_planner_declarative.rs` declares the same agents with attributes.)
pub fn evening_planner(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    // Exactly three names: the answer is read as this JSON schema.
    let three_names = OutputType::Schema(json!({
        "type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3
    }));
    let food_expert = LlmAgent::builder(model("food_expert", scripted)?)
        .name("food_expert")
        .description("Proposes three meals matching a mood")
        .system("You are a great evening planner.")
        .user("Propose a list of 3 meals matching the mood: {{ mood }}.\nFor each meal, give only its name.")
        .output(three_names.clone())
        .output_key("meals")
        .build()?;
    let movie_expert = LlmAgent::builder(model("movie_expert", scripted)?)
        .name("movie_expert")
        .description("Proposes three movies matching a mood")
        .system("You are a great evening planner.")
        .user("Propose a list of 3 movies matching the mood: {{ mood }}.\nFor each movie, give only its title.")
        .output(three_names)
        .output_key("movies")
        .build()?;
    Ok(Parallel::builder()
        .name("evening_planner")
        .sub_agents([food_expert, movie_expert])
        .output(|view| {
            // Pairs the i-th movie with the i-th meal (as many plans as the shorter list).
            let list = |key: &str| view.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
            let plans: Vec<Value> = list("movies")
                .into_iter()
                .zip(list("meals"))
                .map(|(movie, meal)| json!({"movie": movie, "meal": meal}))
                .collect();
            Ok(Value::Array(plans))
        })
        .output_key("plans")
        .build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`). The experts run concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "food_expert" => vec![r#"["Oysters with champagne", "Mushroom risotto", "Chocolate fondue"]"#],
        "movie_expert" => vec![r#"["Casablanca", "Before Sunrise", "La La Land"]"#],
        _ => vec![],
    }
}
