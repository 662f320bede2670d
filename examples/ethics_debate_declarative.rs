//! **Debate, declared** — the ethics panel of `ethics_debate.rs` with the declarative attributes: three
//! debaters (their prompts as constants: a stance each) and a judge, and a `#[debate]` over them that stops
//! once every answer ends with the same word. The typed call `panel.ethics_panel(question).await?` returns the
//! judge's verdict.
//!
//! ```text
//! cargo run --example ethics_debate_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example ethics_debate_declarative # the local model
//! ```
//!
//! Builder version: `examples/ethics_debate.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::planners::Convergence;
use agentic::prelude::*;
use serde_json::Value;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// A debater's prompt: its stance, the question and, from the second round on, the others' answers (the
/// builder version's).
macro_rules! debater_prompt {
    ($stance:literal) => {
        concat!(
            "You are a ",
            $stance,
            " ethics debater. Answer the question in two sentences, then end with one word: AGREE or DISAGREE.\n",
            "Question: {{ question }}\n",
            "{% if debateContext %}What the debaters said last round:\n{{ debateContext }}\n{% endif %}"
        )
    };
}

/// The utilitarian's prompt.
const UTILITARIAN: &str = debater_prompt!("utilitarian");
/// The deontologist's prompt.
const DEONTOLOGICAL: &str = debater_prompt!("deontological");
/// The pragmatist's prompt.
const PRAGMATIST: &str = debater_prompt!("pragmatist");

/// Three debaters arguing a question in rounds, and a judge ruling on the debate.
#[agents]
pub trait EthicsPanel {
    /// The utilitarian debater.
    #[agent(
        name = "Utilitarian",
        description = "Argues from a utilitarian perspective",
        user = UTILITARIAN,
        max_tokens = 120,
        output_key = "utilitarian"
    )]
    async fn utilitarian(&self, question: String) -> String;

    /// The deontologist debater.
    #[agent(
        name = "Deontologist",
        description = "Argues from a deontological perspective",
        user = DEONTOLOGICAL,
        max_tokens = 120,
        output_key = "deontological"
    )]
    async fn deontologist(&self, question: String) -> String;

    /// The pragmatist debater.
    #[agent(
        name = "Pragmatist",
        description = "Argues from a pragmatist perspective",
        user = PRAGMATIST,
        max_tokens = 120,
        output_key = "pragmatist"
    )]
    async fn pragmatist(&self, question: String) -> String;

    /// The judge, reading the debate (`debateContext`, which the debate writes).
    #[agent(
        name = "Judge",
        description = "Renders a final verdict from the debate",
        user = "You are an impartial ethics judge. Give a balanced final verdict on this debate in two sentences.\n{{ debateContext }}",
        max_tokens = 120,
        output_key = "verdict"
    )]
    async fn judge(&self) -> String;

    /// Up to three rounds, until every answer ends with the same word; then the judge's verdict.
    #[debate(
        debaters(utilitarian, deontologist, pragmatist),
        judge = judge,
        max_rounds = 3,
        converged = same_last_word,
        output_key = "verdict"
    )]
    async fn ethics_panel(&self, question: String) -> String;
}

/// The debate's convergence: every answer ends with the same word (`AGREE` or `DISAGREE`).
fn same_last_word(answers: &[Value]) -> bool {
    Convergence::UnanimousLastWord.converged(answers)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn ethics_panel(scripted: bool) -> Result<EthicsPanelAgents, Box<dyn Error>> {
    Ok(EthicsPanelAgents::builder(model("Judge", scripted)?)
        .utilitarian_model(model("Utilitarian", scripted)?)
        .deontologist_model(model("Deontologist", scripted)?)
        .pragmatist_model(model("Pragmatist", scripted)?)
        .build()?)
}

/// Debates one question through the typed entry point and returns the question and the verdict.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let question = "Is it ethical to sell AI-generated art without saying that an AI made it?";
    let verdict: String = ethics_panel(scripted)?.ethics_panel(question).await?;
    Ok(format!("question: {question}\nverdict: {verdict}"))
}

/// The model `agent` asks: the canned replies of `ethics_debate.rs` with `--scripted`, else the default
/// model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order, one per round (the same as `ethics_debate.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "Utilitarian" => vec![
            "Buyers are not harmed if the art pleases them, and sales fund artists. AGREE",
            "Hidden origins erode trust in the whole market, which harms everyone. DISAGREE",
        ],
        "Deontologist" => vec![
            "Selling without disclosure deceives the buyer about what they pay for. DISAGREE",
            "Deception stays wrong whatever the outcome. DISAGREE",
        ],
        "Pragmatist" => vec![
            "Labels are cheap and avoid lawsuits and backlash later. DISAGREE",
            "Disclosure is the practical norm markets are moving to. DISAGREE",
        ],
        "Judge" => vec![
            "The panel converged: selling AI-generated art without disclosure is unethical. Sellers should label \
             it, which costs little and keeps buyers' trust.",
        ],
        _ => vec![],
    }
}
