//! **Loop, declared** — the style review of `style_review.rs` with the declarative attributes: a writer, then
//! a loop that scores the story's style (`-> f64`: the answer read as a number) and edits it until the score
//! reaches 0.8 (at most 5 rounds). The composites nest: the sequence's second agent is the loop.
//!
//! ```text
//! cargo run --example style_review_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example style_review_declarative # the local model
//! ```
//!
//! Builder version: `examples/style_review.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde_json::Value;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// A writer whose story is reviewed for a style until it scores well.
#[agents]
pub trait StyledWriter {
    /// Drafts the story.
    #[agent(
        description = "Drafts a short story about a topic",
        user = "Write a story of at most three sentences about {{ topic }}.\nReply with the story only.",
        max_tokens = 160,
        output_key = "story"
    )]
    async fn writer(&self, topic: String) -> String;

    /// Scores the story's style.
    #[agent(
        description = "Scores how well a story fits a style, from 0.0 to 1.0",
        system = "You are a demanding reviewer.",
        user = "How well does this story fit the {{ style }} style? Give a score between 0.0 and 1.0.\nReply with \
                the score only.\nStory: {{ story }}",
        output_key = "score"
    )]
    async fn scorer(&self, story: String, style: String) -> f64;

    /// Edits the story toward the style.
    #[agent(
        description = "Rewrites a story to fit a style better",
        system = "You are an editor.",
        user = "Rewrite this story so that it fits the {{ style }} style better. Reply with the story only.\nStory: \
                {{ story }}",
        max_tokens = 160,
        output_key = "story"
    )]
    async fn editor(&self, story: String, style: String) -> String;

    /// Scores and edits until the score reaches 0.8; the exit condition is checked after every agent, so a good
    /// score skips the editor.
    #[looping(agents(scorer, editor), exit = good_enough, max_iterations = 5, output_key = "story")]
    async fn style_review(&self, style: String) -> String;

    /// The writer, then the review.
    #[sequence(agents(writer, style_review), output_key = "story")]
    async fn styled_writer(&self, topic: String, style: String) -> String;
}

/// The loop's exit condition: a score of at least 0.8.
fn good_enough(view: &ScopeView, _iteration: u32) -> bool {
    view.get("score").and_then(Value::as_f64).unwrap_or(0.0) >= 0.8
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn styled_writer(scripted: bool) -> Result<StyledWriterAgents, Box<dyn Error>> {
    Ok(StyledWriterAgents::builder(model("writer", scripted)?)
        .scorer_model(model("scorer", scripted)?)
        .editor_model(model("editor", scripted)?)
        .build()?)
}

/// Runs the whole system through its typed entry point and returns what `main` prints.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let writer = styled_writer(scripted)?;
    let story = writer.styled_writer("a lighthouse keeper", "comedy").await?;
    Ok(format!("story: {story}"))
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `style_review.rs`'s).
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
