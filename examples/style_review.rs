//! **Loop** — the style review: a writer drafts a story, then a loop scores its style and edits it until the
//! score reaches 0.8 (at most 5 rounds). The scorer's answer is read as a number (`OutputType::Number`): the
//! local model is constrained to a number, other models' "Score: 0.4" reads as 0.4.
//!
//! ```text
//! cargo run --example style_review -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example style_review     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example style_review
//! ```
//!
//! Spec version: `examples/specs/style_review.yaml`; declarative twin: `examples/style_review_declarative.rs`.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::prelude::*;
use serde_json::Value;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// Builds the writer and the review loop, runs them and returns what `main` prints.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let styled_writer = styled_writer(scripted)?;

    let outcome = styled_writer.invoke().input("topic", "a lighthouse keeper").input("style", "comedy").await?;

    let history = outcome.history().await?;
    let scores: Vec<String> = history.iter().filter(|r| r.agent == "scorer").map(|r| r.output.to_string()).collect();
    Ok(format!(
        "scores: {}\nstory: {}",
        scores.join(", "),
        outcome.output().and_then(Value::as_str).unwrap_or_default()
    ))
}

/// The writer, then the review loop (`style_review_declarative.rs` declares the same agents with attributes).
pub fn styled_writer(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let writer = LlmAgent::builder(model("writer", scripted)?)
        .name("writer")
        .description("Drafts a short story about a topic")
        .user("Write a story of at most three sentences about {{ topic }}.\nReply with the story only.")
        .max_tokens(160)
        .output_key("story")
        .build()?;
    let scorer = LlmAgent::builder(model("scorer", scripted)?)
        .name("scorer")
        .description("Scores how well a story fits a style, from 0.0 to 1.0")
        .system("You are a demanding reviewer.")
        .user(
            "How well does this story fit the {{ style }} style? Give a score between 0.0 and 1.0.\n\
             Reply with the score only.\nStory: {{ story }}",
        )
        .output(OutputType::Number)
        .output_key("score")
        .build()?;
    let editor = LlmAgent::builder(model("editor", scripted)?)
        .name("editor")
        .description("Rewrites a story to fit a style better")
        .system("You are an editor.")
        .user(
            "Rewrite this story so that it fits the {{ style }} style better. Reply with the story only.\n\
             Story: {{ story }}",
        )
        .max_tokens(160)
        .output_key("story")
        .build()?;
    // The exit condition is checked after every agent, so a good score skips the editor.
    let review = Loop::builder()
        .name("style_review")
        .sub_agents([scorer, editor])
        .exit_when(|view, _iteration| view.get("score").and_then(Value::as_f64).unwrap_or(0.0) >= 0.8)
        .max_iterations(5)
        .output_key("story")
        .build()?;
    Ok(Sequence::builder().name("styled_writer").sub_agents([writer, review]).output_key("story").build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`).
pub fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "writer" => vec!["The lighthouse keeper counted ships every night. One night he counted one too many."],
        "scorer" => vec!["Score: 0.4", "0.85"],
        "editor" => vec![
            "The lighthouse keeper counted ships every night, mostly to annoy the seagulls. One night he counted \
             one too many, and it winked back.",
        ],
        _ => vec![],
    }
}
