//! **Conditional** — the expert router: a classifier sorts a request into `MEDICAL`, `LEGAL`, `TECHNICAL` or
//! `UNKNOWN` (an enum, from a few-shot prompt: the local model is constrained to the four names), then a
//! conditional hands the request to the expert of that category.
//!
//! ```text
//! cargo run --example expert_router -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example expert_router     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example expert_router
//! ```
//!
//! Spec version: `examples/specs/expert_router.yaml`; declarative twin: `examples/expert_router_declarative.rs`.
//! The `decision_router` example routes without the category step.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::prelude::*;
use serde_json::{Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

const CLASSIFY: &str = "\
Classify each user request as MEDICAL, LEGAL, TECHNICAL or UNKNOWN.

Request: I have a fever and a sore throat since yesterday.
Category: MEDICAL

Request: My landlord kept my deposit without a reason. Can I sue him?
Category: LEGAL

Request: My laptop does not start after the last update.
Category: TECHNICAL

Request: What is a good recipe for a chocolate cake?
Category: UNKNOWN

Request: {{ request }}
Category:";

/// Builds the classifier, the experts and the router, runs it on one request and returns what `main` prints.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let router = router(scripted)?;
    let request = "I broke my leg, what should I do?";
    let outcome = router.invoke().input("request", request).await?;

    let category = outcome.state().get("category").and_then(Value::as_str).unwrap_or_default().to_string();
    let response = outcome.output().and_then(Value::as_str).unwrap_or("(no expert for this request)").to_string();
    Ok(format!("request: {request}\ncategory: {category}\nresponse: {response}"))
}

/// The classifier, then the experts' conditional (`expert_router_declarative.rs` declares the same agents with
/// attributes).
pub fn router(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let classify = LlmAgent::builder(model("classify", scripted)?)
        .name("classify")
        .description("Categorizes a user request")
        .user(CLASSIFY)
        .output(OutputType::Enum(vec!["MEDICAL".into(), "LEGAL".into(), "TECHNICAL".into(), "UNKNOWN".into()]))
        .output_key("category")
        .build()?;
    let expert = |name: &str, field: &str| -> Result<AgentRef, Box<dyn Error>> {
        Ok(LlmAgent::builder(model(name, scripted)?)
            .name(name)
            .description(format!("A {field} expert"))
            .system(&format!("You are a {field} expert."))
            .user(&format!(
                "Analyze the following user request from a {field} point of view and give the best possible answer \
                 in two sentences.\nRequest: {{{{ request }}}}"
            ))
            .max_tokens(120)
            .output_key("response")
            .build()?)
    };
    let is = |category: &'static str| move |view: &ScopeView| view.get("category") == Some(&json!(category));
    let experts = Conditional::builder()
        .name("experts")
        .branch_when(is("MEDICAL"), [expert("medical", "medical")?])
        .branch_when(is("LEGAL"), [expert("legal", "legal")?])
        .branch_when(is("TECHNICAL"), [expert("technical", "technical")?])
        .build()?;
    Ok(Sequence::builder().name("expert_router").sub_agents([classify, experts]).output_key("response").build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`).
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "classify" => vec!["MEDICAL"],
        "medical" => {
            vec!["Keep the leg still and raised, and put ice on it. Go to an emergency room for an X-ray and a cast."]
        }
        _ => vec![],
    }
}
