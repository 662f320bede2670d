//! **Peer-to-peer** — the research team: five agents share the state and none of them is in charge. An agent
//! runs whenever its inputs are present and have changed since it last ran, in parallel with the others: the
//! literature search feeds a hypothesis, which the critic reviews, the validator confirms or reformulates and
//! the scorer scores, until the score reaches 0.85 (or after 10 invocations, or when nothing changes).
//!
//! ```text
//! cargo run --example p2p_research -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example p2p_research     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example p2p_research
//! ```
//!
//! Spec version: `examples/specs/p2p.yaml`.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::planners::P2p;
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

/// The five peers and the P2P composite over them.
pub fn research(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let peer = |name: &str, description: &str, user: &str, output_key: &str| -> Result<_, Box<dyn Error>> {
        Ok(LlmAgent::builder(model(name, scripted)?)
            .name(name)
            .description(description)
            .user(user)
            .max_tokens(120)
            .output_key(output_key))
    };
    let literature = peer(
        "literature",
        "Searches the scientific literature on a topic",
        "Summarize in two sentences what is known about {{ topic }}.",
        "findings",
    )?
    .build()?;
    let hypothesis = peer(
        "hypothesis",
        "Formulates a hypothesis from research findings",
        "Formulate a clear, one-sentence hypothesis about {{ topic }} from these findings: {{ findings }}",
        "hypothesis",
    )?
    .build()?;
    let critic = peer(
        "critic",
        "Critically evaluates a hypothesis",
        "Critically evaluate this hypothesis about {{ topic }} in two sentences: {{ hypothesis }}",
        "critique",
    )?
    .build()?;
    let validator = peer(
        "validator",
        "Confirms a hypothesis or reformulates it after a critique",
        "Confirm this hypothesis about {{ topic }}, or reformulate it in one sentence to answer the critique.\n\
         Hypothesis: {{ hypothesis }}\nCritique: {{ critique }}\nReply with the hypothesis only.",
        "hypothesis",
    )?
    .build()?;
    let scorer = peer(
        "scorer",
        "Scores a hypothesis from 0.0 (invalid) to 1.0 (fully valid) given its critique",
        "Score this hypothesis about {{ topic }} between 0.0 (invalid) and 1.0 (fully valid), given the critique.\n\
         Hypothesis: {{ hypothesis }}\nCritique: {{ critique }}\nReply with the score only.",
        "score",
    )?
    .output(OutputType::Number)
    // Activated by a new critique only (the template still reads the hypothesis from the state).
    .inputs(["critique"])
    .build()?;

    let research = P2p::builder()
        .name("research")
        .sub_agents([literature, hypothesis, critic, validator, scorer])
        .max_invocations(10)
        .exit_when(|view| view.get("score").and_then(Value::as_f64).is_some_and(|s| s >= 0.85))
        .output_key("hypothesis")
        .build()?;
    Ok(research)
}

/// Builds the five peers, runs the research on black holes and returns the hypothesis and its score.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let outcome = research(scripted)?.invoke().input("topic", "black holes").await?;

    let score = outcome.state().get("score").cloned().unwrap_or_default();
    Ok(format!("hypothesis: {}\nscore: {score}", outcome.output().and_then(Value::as_str).unwrap_or_default()))
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`). Peers run concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order. The validator reformulates the first hypothesis and then
/// confirms its own (an unchanged value activates nobody).
fn script(agent: &str) -> Vec<&'static str> {
    const REFORMULATED: &str = "Primordial black holes from the early universe make up part of dark matter.";
    match agent {
        "literature" => {
            vec!["Black holes form when massive stars collapse; some may have formed in the early universe."]
        }
        "hypothesis" => vec!["All dark matter is made of primordial black holes."],
        "critic" => vec![
            "Microlensing surveys rule out primordial black holes as all of dark matter in most mass ranges.",
            "A partial contribution is consistent with the microlensing limits.",
        ],
        "validator" => vec![REFORMULATED, REFORMULATED, REFORMULATED],
        "scorer" => vec!["0.4", "0.9"],
        _ => vec![],
    }
}
