//! The programmatic front door: a loop that improves a draft until a score is reached, mapped over topics,
//! written with the Rust builders. Run: `cargo run --example quickstart`.
//!
//! Declarative twin: `examples/quickstart_declarative.rs`.

use std::error::Error;

use agentic::prelude::*;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run().await?);
    Ok(())
}

/// Runs the loop on `dragons` and returns what `main` prints: the result, the final state and every step.
pub async fn run() -> Result<String, Box<dyn Error>> {
    let outcome = improve()?.invoke().input("topic", "dragons").await?;
    let mut report = format!("result: {}\n", outcome.output().cloned().unwrap_or_default());
    report += &format!("state:  {}", json!(outcome.state().to_map()));
    for record in outcome.history().await? {
        report += &format!("\n  {:<8} {:<10} -> {}", record.path, record.agent, record.output);
    }
    Ok(report)
}

/// The loop: a non-AI "writer" and "critic", the score rising with each revision, until it reaches 0.8.
/// (`quickstart_declarative.rs` declares the same agents with attributes.)
pub fn improve() -> Result<AgentRef, Box<dyn Error>> {
    let write = Compute::template("write", "{{ topic }}: draft {{ (revision | default(0)) + 1 }}")?
        .inputs(["topic"]) // `revision` is optional here (absent on the first pass)
        .output_key("draft")
        .build();
    let revise =
        Compute::expression("revise", "(revision | default(0)) + 1")?.inputs(["draft"]).output_key("revision").build();
    let critic = Compute::expression("critic", "revision * 0.3")?.output_key("score").build();
    Ok(Loop::builder()
        .name("improve")
        .sub_agents([write, revise, critic])
        .exit_when(|view, _iteration| view.get("score").and_then(|s| s.as_f64()).unwrap_or(0.0) >= 0.8)
        .max_iterations(5)
        .output_key("draft")
        .build()?)
}
