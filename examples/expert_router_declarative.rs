//! **Conditional, declared** — the expert router of `expert_router.rs` with the declarative attributes: the
//! classifier returns a `Category` enum (the answer read as one of its names), then a conditional hands the
//! request to the expert of that category.
//!
//! ```text
//! cargo run --example expert_router_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example expert_router_declarative # the local model
//! ```
//!
//! Builder version: `examples/expert_router.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// What a request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Category {
    /// Health.
    Medical,
    /// The law.
    Legal,
    /// Machines and software.
    Technical,
    /// None of these.
    Unknown,
}

/// The few-shot prompt of the classifier (the builder version's).
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

/// A classifier and three experts, routed by category.
#[agents]
pub trait ExpertRouter {
    /// Sorts a request into a category.
    #[agent(description = "Categorizes a user request", user = CLASSIFY, output_key = "category")]
    async fn classify(&self, request: String) -> Category;

    /// Answers as a physician.
    #[agent(
        description = "A medical expert",
        system = "You are a medical expert.",
        user = "Analyze the following user request from a medical point of view and give the best possible answer \
                in two sentences.\nRequest: {{ request }}",
        max_tokens = 120,
        output_key = "response"
    )]
    async fn medical(&self, request: String) -> String;

    /// Answers as a lawyer.
    #[agent(
        description = "A legal expert",
        system = "You are a legal expert.",
        user = "Analyze the following user request from a legal point of view and give the best possible answer in \
                two sentences.\nRequest: {{ request }}",
        max_tokens = 120,
        output_key = "response"
    )]
    async fn legal(&self, request: String) -> String;

    /// Answers as an engineer.
    #[agent(
        description = "A technical expert",
        system = "You are a technical expert.",
        user = "Analyze the following user request from a technical point of view and give the best possible \
                answer in two sentences.\nRequest: {{ request }}",
        max_tokens = 120,
        output_key = "response"
    )]
    async fn technical(&self, request: String) -> String;

    /// The expert of the request's category (none for `UNKNOWN`).
    #[conditional(
        branch(when = is_medical, agents(medical)),
        branch(when = is_legal, agents(legal)),
        branch(when = is_technical, agents(technical))
    )]
    async fn experts(&self, request: String);

    /// Classifies, then asks the expert; `None` when no expert fits.
    #[sequence(agents(classify, experts), output_key = "response")]
    async fn expert_router(&self, request: String) -> Option<String>;
}

/// Whether the state's `category` is `category`.
fn category_is(view: &ScopeView, category: Category) -> bool {
    view.get_as::<Category>("category").ok().flatten() == Some(category)
}

fn is_medical(view: &ScopeView) -> bool {
    category_is(view, Category::Medical)
}

fn is_legal(view: &ScopeView) -> bool {
    category_is(view, Category::Legal)
}

fn is_technical(view: &ScopeView) -> bool {
    category_is(view, Category::Technical)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn expert_router(scripted: bool) -> Result<ExpertRouterAgents, Box<dyn Error>> {
    Ok(ExpertRouterAgents::builder(model("classify", scripted)?)
        .medical_model(model("medical", scripted)?)
        .legal_model(model("legal", scripted)?)
        .technical_model(model("technical", scripted)?)
        .build()?)
}

/// Routes one request through the typed entry point and returns what `main` prints.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let router = expert_router(scripted)?;
    let request = "I broke my leg, what should I do?";
    let response = router.expert_router(request).await?;
    Ok(format!("request: {request}\nresponse: {}", response.as_deref().unwrap_or("(no expert for this request)")))
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `expert_router.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "classify" => vec!["MEDICAL"],
        "medical" => {
            vec!["Keep the leg still and raised, and put ice on it. Go to an emergency room for an X-ray and a cast."]
        }
        _ => vec![],
    }
}
