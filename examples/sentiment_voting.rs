//! **Voting** — the sentiment council: three classifiers with different prompts label the same text as
//! `POSITIVE`, `NEGATIVE` or `NEUTRAL`, in parallel; the majority wins (a tie goes to the earliest declared
//! voter). Each vote is an enum from a few-shot prompt, which the local model is constrained to.
//!
//! ```text
//! cargo run --example sentiment_voting -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example sentiment_voting     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example sentiment_voting
//! ```
//!
//! Spec version: `examples/specs/voting.yaml`; declarative twin: `examples/sentiment_voting_declarative.rs`.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::planners::{Voting, VotingStrategy};
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

const EXAMPLES: &str = "\
Text: I love it, it works perfectly.
Sentiment: POSITIVE

Text: It broke after one day. Terrible.
Sentiment: NEGATIVE

Text: The package arrived on Tuesday.
Sentiment: NEUTRAL
";

/// Builds the three voters and the council, classifies one review and returns the votes and the result.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let text = "The screen is gorgeous and setup took two minutes, though the box was dented.";
    let outcome = council(scripted)?.invoke().input("text", text).await?;

    let state = outcome.state();
    let vote = |key: &str| state.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    Ok(format!(
        "text: {text}\nvotes: general {}, tone {}, feedback {}\nclassification: {}",
        vote("vote1"),
        vote("vote2"),
        vote("vote3"),
        outcome.output().and_then(Value::as_str).unwrap_or_default()
    ))
}

/// The three voters and the council, the majority winning.
/// (`sentiment_voting_declarative.rs` declares the same agents with attributes.)
pub fn council(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let voter = |name: &str, task: &str, key: &str| -> Result<AgentRef, Box<dyn Error>> {
        Ok(LlmAgent::builder(model(name, scripted)?)
            .name(name)
            .description(task)
            .user(&format!(
                "{task} Answer POSITIVE, NEGATIVE or NEUTRAL.\n\n{EXAMPLES}\nText: {{{{ text }}}}\nSentiment:"
            ))
            .output(OutputType::Enum(vec!["POSITIVE".into(), "NEGATIVE".into(), "NEUTRAL".into()]))
            .output_key(key)
            .build()?)
    };
    Ok(Voting::builder()
        .name("sentiment")
        .sub_agents([
            voter("general", "Classify the sentiment of the text.", "vote1")?,
            voter("tone", "Analyze the emotional tone of the text.", "vote2")?,
            voter("feedback", "Decide whether this customer feedback is positive, negative or neutral.", "vote3")?,
        ])
        .strategy(VotingStrategy::Majority)
        .output_key("classification")
        .build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`). Voters run concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "general" => vec!["POSITIVE"],
        "tone" => vec!["Positive"],
        "feedback" => vec!["NEUTRAL"],
        _ => vec![],
    }
}
