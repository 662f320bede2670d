//! **Decision router** — the expert router without a category step: a model picks the sub-agent whose
//! description fits the request best, and only that expert runs. With a threshold, the model is asked about
//! every expert at once ("should it handle the request?", yes or no) and every expert whose probability of
//! yes reaches the threshold runs, in parallel; the result is then a map from expert name to answer. The
//! answers are a small JSON object whose values are constrained to the allowed names, which the local model
//! does reliably. A routing decision is stored with the run, so a resumed run never asks for it again.
//!
//! ```text
//! cargo run --example decision_router -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example decision_router     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example decision_router
//! ```
//!
//! Compare the `expert_router` example (a classifier, then a conditional).

use std::error::Error;

use agentic::planners::DecisionRouter;
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

/// The three experts; their descriptions are what the router reads.
fn experts(scripted: bool) -> Result<Vec<AgentRef>, Box<dyn Error>> {
    let expert = |name: &str, field: &str, description: &str| -> Result<AgentRef, Box<dyn Error>> {
        Ok(LlmAgent::builder(model(name, scripted)?)
            .name(name)
            .description(description)
            .system(&format!("You are a {field} expert."))
            .user(&format!(
                "Analyze the following user request from a {field} point of view and give the best possible answer \
                 in two sentences.\nRequest: {{{{ request }}}}"
            ))
            .max_tokens(120)
            .output_key(format!("{name}_response"))
            .build()?)
    };
    Ok(vec![
        expert("medical", "medical", "A medical expert, answering questions about health, injuries and treatments")?,
        expert("legal", "legal", "A legal expert, answering questions about laws, rights, contracts and lawsuits")?,
        expert(
            "technical",
            "technical",
            "A technical expert, answering questions about computers, software and devices",
        )?,
    ])
}

/// The router running the one best expert.
pub fn router(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    Ok(DecisionRouter::builder()
        .name("expert_router")
        .sub_agents(experts(scripted)?)
        .chat_model(model("router", scripted)?)
        .output_key("response")
        .build()?)
}

/// The router running every expert whose probability of fitting reaches 0.5.
pub fn multi_router(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    Ok(DecisionRouter::builder()
        .name("multi_expert_router")
        .sub_agents(experts(scripted)?)
        .chat_model(model("multi_router", scripted)?)
        .threshold(0.5)
        .output_key("responses")
        .build()?)
}

/// Routes one request to the best expert, then another to every fitting expert, and returns the answers.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let request = "I broke my leg, what should I do?";
    let outcome = router(scripted)?.invoke().input("request", request).await?;
    let mut report =
        format!("request: {request}\nresponse: {}\n", outcome.output().and_then(Value::as_str).unwrap_or_default());

    let request = "I broke my leg in a car accident caused by another driver: how should I take care of my leg, and \
                   can I sue the driver for damages?";
    let outcome = multi_router(scripted)?.invoke().input("request", request).await?;
    report += &format!("request: {request}");
    for (expert, answer) in outcome.output().and_then(Value::as_object).cloned().unwrap_or_default() {
        report += &format!("\n{expert}: {}", answer.as_str().unwrap_or_default());
    }
    Ok(report)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`). Experts may run concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order. A router answers all its questions in one JSON object: the
/// chosen agent, or yes/no per expert.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "router" => vec![r#"{"agent": "medical"}"#],
        "multi_router" => vec![r#"{"medical": "yes", "legal": "yes", "technical": "no"}"#],
        "medical" => vec!["Keep the leg still and raised, and get an X-ray at an emergency room today."],
        "legal" => vec!["Yes: the other driver's insurer owes you damages; keep the police report and medical bills."],
        _ => vec![],
    }
}
