//! **P2P, declared** — the research of `p2p_research.rs` with the declarative attributes: five LLM peers as
//! the methods of a trait, each activated when the keys it reads change, and a `#[p2p]` over them. The scorer
//! is activated by a new critique only (`inputs("critique")`), while its template also reads the hypothesis.
//!
//! ```text
//! cargo run --example p2p_research_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example p2p_research_declarative # the local model
//! ```
//!
//! Builder version: `examples/p2p_research.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// Five peers researching a topic until the hypothesis scores well.
#[agents]
pub trait Research {
    /// Searches the scientific literature on a topic
    #[agent(
        user = "Summarize in two sentences what is known about {{ topic }}.",
        max_tokens = 120,
        output_key = "findings"
    )]
    async fn literature(&self, topic: String) -> String;

    /// Formulates a hypothesis from research findings
    #[agent(
        user = "Formulate a clear, one-sentence hypothesis about {{ topic }} from these findings: {{ findings }}",
        max_tokens = 120,
        output_key = "hypothesis"
    )]
    async fn hypothesis(&self, topic: String, findings: String) -> String;

    /// Critically evaluates a hypothesis
    #[agent(
        user = "Critically evaluate this hypothesis about {{ topic }} in two sentences: {{ hypothesis }}",
        max_tokens = 120,
        output_key = "critique"
    )]
    async fn critic(&self, topic: String, hypothesis: String) -> String;

    /// Confirms a hypothesis or reformulates it after a critique
    #[agent(
        user = "Confirm this hypothesis about {{ topic }}, or reformulate it in one sentence to answer the critique.\n\
                Hypothesis: {{ hypothesis }}\nCritique: {{ critique }}\nReply with the hypothesis only.",
        max_tokens = 120,
        output_key = "hypothesis"
    )]
    async fn validator(&self, topic: String, hypothesis: String, critique: String) -> String;

    /// Scores a hypothesis from 0.0 (invalid) to 1.0 (fully valid) given its critique
    #[agent(
        user = "Score this hypothesis about {{ topic }} between 0.0 (invalid) and 1.0 (fully valid), given the \
                critique.\nHypothesis: {{ hypothesis }}\nCritique: {{ critique }}\nReply with the score only.",
        max_tokens = 120,
        inputs("critique"),
        output_key = "score"
    )]
    async fn scorer(&self, critique: String) -> f64;

    /// The research: the peers until the score reaches 0.85, at most ten steps.
    #[p2p(
        agents(literature, hypothesis, critic, validator, scorer),
        max_invocations = 10,
        exit = good_enough,
        output_key = "hypothesis"
    )]
    async fn research(&self, topic: String) -> String;
}

/// Whether the hypothesis scored at least 0.85.
fn good_enough(view: &ScopeView) -> bool {
    view.get_as::<f64>("score").ok().flatten().is_some_and(|score| score >= 0.85)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The peers, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn research(scripted: bool) -> Result<ResearchAgents, Box<dyn Error>> {
    Ok(ResearchAgents::builder(model("literature", scripted)?)
        .hypothesis_model(model("hypothesis", scripted)?)
        .critic_model(model("critic", scripted)?)
        .validator_model(model("validator", scripted)?)
        .scorer_model(model("scorer", scripted)?)
        .build()?)
}

/// Runs the research on black holes and returns the hypothesis and its score.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let outcome = research(scripted)?.research_agent().invoke().input("topic", "black holes").await?;
    let score = outcome.state().get("score").cloned().unwrap_or_default();
    Ok(format!(
        "hypothesis: {}\nscore: {score}",
        outcome.output().and_then(serde_json::Value::as_str).unwrap_or_default()
    ))
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model. Peers run
/// concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `p2p_research.rs`'s).
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
