//! The programmatic front door, declared: the loop of `quickstart.rs` with the declarative attributes. The
//! writer, reviser and critic are `#[agent]` functions (plain Rust, no model); the loop is a method of an
//! `#[agents]` trait, so `improver.improve("dragons").await?` runs it and returns the draft as a `String`.
//! Run: `cargo run --example quickstart_declarative`.
//!
//! Builder version: `examples/quickstart.rs` (same agents, same steps, same result).

use std::error::Error;

use agentic::prelude::*;
use serde_json::{Value, json};

/// Writes the next draft on a topic: the first without a revision yet.
#[agent(output_key = "draft")]
fn write(topic: String, revision: Option<i64>) -> String {
    format!("{topic}: draft {}", revision.unwrap_or(0) + 1)
}

/// Counts the revisions of the draft.
#[agent(output_key = "revision")]
fn revise(draft: String, revision: Option<i64>) -> i64 {
    let _ = draft; // read so that a revision follows a draft
    revision.unwrap_or(0) + 1
}

/// Scores the draft: the score rises with each revision.
#[agent(output_key = "score")]
fn critic(revision: i64) -> f64 {
    revision as f64 * 0.3
}

/// A draft improved until it scores well.
#[agents]
pub trait Improver {
    /// Writes, revises and scores until the score reaches 0.8 (at most 5 rounds).
    #[looping(agents(self::write, self::revise, self::critic), exit = good_enough, max_iterations = 5, output_key = "draft")]
    async fn improve(&self, topic: String) -> String;
}

/// The loop's exit condition: a score of at least 0.8.
fn good_enough(view: &ScopeView, _iteration: u32) -> bool {
    view.get("score").and_then(Value::as_f64).unwrap_or(0.0) >= 0.8
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run().await?);
    Ok(())
}

/// The agents. No agent asks a model: the builder's model (an empty script) is never used.
pub fn improver() -> Result<ImproverAgents, agentic::engine::BuildError> {
    ImproverAgents::builder(ScriptedModel::new(Vec::<String>::new())).build()
}

/// Runs the loop on `dragons` and returns what `quickstart.rs` prints: the result, the final state and every
/// step. (The typed call `improver()?.improve("dragons").await?` returns the result alone.)
pub async fn run() -> Result<String, Box<dyn Error>> {
    let outcome = improver()?.improve_agent().invoke().input("topic", "dragons").await?;
    let mut report = format!("result: {}\n", outcome.output().cloned().unwrap_or_default());
    report += &format!("state:  {}", json!(outcome.state().to_map()));
    for record in outcome.history().await? {
        report += &format!("\n  {:<8} {:<10} -> {}", record.path, record.agent, record.output);
    }
    Ok(report)
}
