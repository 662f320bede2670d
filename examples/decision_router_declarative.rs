//! **Decision router, declared** — the routers of `decision_router.rs` with the declarative attributes: three
//! experts as LLM methods, and two `#[decision_router]` methods over them — one running the best expert, one
//! (with a threshold) running every expert that fits and returning a map from expert to answer.
//!
//! ```text
//! cargo run --example decision_router_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example decision_router_declarative # the local model
//! ```
//!
//! Builder version: `examples/decision_router.rs` (same agents, same replies, same result).

use std::collections::BTreeMap;
use std::error::Error;

use agentic::prelude::*;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// Three experts; their descriptions are what the routers read.
#[agents]
pub trait Experts {
    /// A medical expert, answering questions about health, injuries and treatments
    #[agent(
        system = "You are a medical expert.",
        user = "Analyze the following user request from a medical point of view and give the best possible answer \
                in two sentences.\nRequest: {{ request }}",
        max_tokens = 120,
        output_key = "medical_response"
    )]
    async fn medical(&self, request: String) -> String;

    /// A legal expert, answering questions about laws, rights, contracts and lawsuits
    #[agent(
        system = "You are a legal expert.",
        user = "Analyze the following user request from a legal point of view and give the best possible answer in \
                two sentences.\nRequest: {{ request }}",
        max_tokens = 120,
        output_key = "legal_response"
    )]
    async fn legal(&self, request: String) -> String;

    /// A technical expert, answering questions about computers, software and devices
    #[agent(
        system = "You are a technical expert.",
        user = "Analyze the following user request from a technical point of view and give the best possible \
                answer in two sentences.\nRequest: {{ request }}",
        max_tokens = 120,
        output_key = "technical_response"
    )]
    async fn technical(&self, request: String) -> String;

    /// Runs the one expert the model finds best for the request.
    #[decision_router(agents(medical, legal, technical), output_key = "response")]
    async fn expert_router(&self, request: String) -> String;

    /// Runs every expert whose probability of fitting the request reaches 0.5; the answers by expert.
    #[decision_router(agents(medical, legal, technical), threshold = 0.5, output_key = "responses")]
    async fn multi_expert_router(&self, request: String) -> BTreeMap<String, String>;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The experts and the routers, each asking its own model (the builder version's canned replies with
/// `--scripted`). A run consumes the canned replies it gets: build the agents once per routed request.
pub fn experts(scripted: bool) -> Result<ExpertsAgents, Box<dyn Error>> {
    Ok(ExpertsAgents::builder(model("medical", scripted)?)
        .legal_model(model("legal", scripted)?)
        .technical_model(model("technical", scripted)?)
        .expert_router_model(model("router", scripted)?)
        .multi_expert_router_model(model("multi_router", scripted)?)
        .build()?)
}

/// Routes one request to the best expert, then another to every fitting expert, and returns the answers.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let request = "I broke my leg, what should I do?";
    let response = experts(scripted)?.expert_router(request).await?;
    let mut report = format!("request: {request}\nresponse: {response}\n");

    let request = "I broke my leg in a car accident caused by another driver: how should I take care of my leg, and \
                   can I sue the driver for damages?";
    let responses = experts(scripted)?.multi_expert_router(request).await?;
    report += &format!("request: {request}");
    for (expert, answer) in responses {
        report += &format!("\n{expert}: {answer}");
    }
    Ok(report)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model. Experts may run
/// concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `decision_router.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "router" => vec![r#"{"agent": "medical"}"#],
        "multi_router" => vec![r#"{"medical": "yes", "legal": "yes", "technical": "no"}"#],
        "medical" => vec!["Keep the leg still and raised, and get an X-ray at an emergency room today."],
        "legal" => vec!["Yes: the other driver's insurer owes you damages; keep the police report and medical bills."],
        _ => vec![],
    }
}
