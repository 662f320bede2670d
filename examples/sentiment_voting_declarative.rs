//! **Voting, declared** — the sentiment council of `sentiment_voting.rs` with the declarative attributes: three
//! classifiers typed `-> Sentiment` (an enum: the answer is read as one of its names) and a `#[voting]` over
//! them, the majority winning. The typed call `council.sentiment(text).await?` returns the `Sentiment`.
//!
//! ```text
//! cargo run --example sentiment_voting_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example sentiment_voting_declarative # the local model
//! ```
//!
//! Builder version: `examples/sentiment_voting.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// A text's sentiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Sentiment {
    /// Favourable.
    Positive,
    /// Unfavourable.
    Negative,
    /// Neither.
    Neutral,
}

/// A voter's few-shot prompt: its task, the examples, the text (the builder version's).
macro_rules! prompt {
    ($task:literal) => {
        concat!(
            $task,
            " Answer POSITIVE, NEGATIVE or NEUTRAL.\n\n",
            "Text: I love it, it works perfectly.\nSentiment: POSITIVE\n\n",
            "Text: It broke after one day. Terrible.\nSentiment: NEGATIVE\n\n",
            "Text: The package arrived on Tuesday.\nSentiment: NEUTRAL\n",
            "\nText: {{ text }}\nSentiment:"
        )
    };
}

/// The general classifier's prompt.
const GENERAL: &str = prompt!("Classify the sentiment of the text.");
/// The tone analyser's prompt.
const TONE: &str = prompt!("Analyze the emotional tone of the text.");
/// The feedback classifier's prompt.
const FEEDBACK: &str = prompt!("Decide whether this customer feedback is positive, negative or neutral.");

/// Three classifiers voting on a text's sentiment.
#[agents]
pub trait SentimentCouncil {
    /// Classifies the sentiment.
    #[agent(description = "Classify the sentiment of the text.", user = GENERAL, output_key = "vote1")]
    async fn general(&self, text: String) -> Sentiment;

    /// Reads the emotional tone.
    #[agent(description = "Analyze the emotional tone of the text.", user = TONE, output_key = "vote2")]
    async fn tone(&self, text: String) -> Sentiment;

    /// Reads the text as customer feedback.
    #[agent(
        description = "Decide whether this customer feedback is positive, negative or neutral.",
        user = FEEDBACK,
        output_key = "vote3"
    )]
    async fn feedback(&self, text: String) -> Sentiment;

    /// The three votes; the majority wins (a tie goes to the earliest declared voter).
    #[voting(agents(general, tone, feedback), strategy = "majority", output_key = "classification")]
    async fn sentiment(&self, text: String) -> Sentiment;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each voter asking its own model (the builder version's canned replies with `--scripted`).
pub fn council(scripted: bool) -> Result<SentimentCouncilAgents, Box<dyn Error>> {
    Ok(SentimentCouncilAgents::builder(model("general", scripted)?)
        .tone_model(model("tone", scripted)?)
        .feedback_model(model("feedback", scripted)?)
        .build()?)
}

/// Classifies one review through the typed entry point and returns the text and the result.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let text = "The screen is gorgeous and setup took two minutes, though the box was dented.";
    let sentiment: Sentiment = council(scripted)?.sentiment(text).await?;
    Ok(format!("text: {text}\nclassification: {sentiment:?}"))
}

/// The model `agent` asks: the canned replies of `sentiment_voting.rs` with `--scripted`, else the default
/// model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `sentiment_voting.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "general" => vec!["POSITIVE"],
        "tone" => vec!["Positive"],
        "feedback" => vec!["NEUTRAL"],
        _ => vec![],
    }
}
