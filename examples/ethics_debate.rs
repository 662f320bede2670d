//! **Debate** — the ethics panel: three debaters argue from different perspectives, in rounds; from the second
//! round on each reads the others' previous answers (`debateContext`) and may change its mind. Once they all
//! end with the same verdict (`AGREE` or `DISAGREE`), or after three rounds, the judge rules on the debate.
//!
//! ```text
//! cargo run --example ethics_debate -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example ethics_debate     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example ethics_debate
//! ```
//!
//! Arguing is free text, which a 270M base model does only roughly: it runs, but expect the full three rounds.
//! Spec version: `examples/specs/debate.yaml`; declarative twin: `examples/ethics_debate_declarative.rs`.

use std::error::Error;

use agentic::planners::Convergence;
use agentic::planners::Debate;
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

/// Builds the debaters and the judge, runs the debate on one question and returns the rounds and the verdict.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let question = "Is it ethical to sell AI-generated art without saying that an AI made it?";
    let outcome = ethics_panel(scripted)?.invoke().input("question", question).await?;

    let mut report = format!("question: {question}\n");
    let history = outcome.history().await?;
    let rounds = history.iter().filter(|r| r.agent == "Utilitarian").count();
    // Debaters of one round finish in any order: list each one's answers, round by round.
    for name in ["Utilitarian", "Deontologist", "Pragmatist"] {
        for (round, record) in history.iter().filter(|r| r.agent == name).enumerate() {
            report += &format!("{name} (round {}): {}\n", round + 1, record.output.as_str().unwrap_or_default());
        }
    }
    report += &format!("rounds: {rounds}\nverdict: {}", outcome.output().and_then(Value::as_str).unwrap_or_default());
    Ok(report)
}

/// The three debaters and the judge: up to three rounds, until every answer ends with the same word.
/// (`ethics_debate_declarative.rs` declares the same agents with attributes.)
pub fn ethics_panel(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let debater = |name: &str, stance: &str, key: &str| -> Result<AgentRef, Box<dyn Error>> {
        Ok(LlmAgent::builder(model(name, scripted)?)
            .name(name)
            .description(format!("Argues from a {stance} perspective"))
            .user(&format!(
                "You are a {stance} ethics debater. Answer the question in two sentences, then end with one word: \
                 AGREE or DISAGREE.\nQuestion: {{{{ question }}}}\n\
                 {{% if debateContext %}}What the debaters said last round:\n{{{{ debateContext }}}}\n{{% endif %}}"
            ))
            .max_tokens(120)
            .output_key(key)
            .build()?)
    };
    let judge = LlmAgent::builder(model("Judge", scripted)?)
        .name("Judge")
        .description("Renders a final verdict from the debate")
        .user(
            "You are an impartial ethics judge. Give a balanced final verdict on this debate in two sentences.\n\
               {{ debateContext }}",
        )
        .max_tokens(120)
        .output_key("verdict")
        .build()?;
    Ok(Debate::builder()
        .name("ethics_panel")
        .debaters([
            debater("Utilitarian", "utilitarian", "utilitarian")?,
            debater("Deontologist", "deontological", "deontological")?,
            debater("Pragmatist", "pragmatist", "pragmatist")?,
        ])
        .judge(judge)
        .convergence(Convergence::UnanimousLastWord)
        .max_rounds(3)
        .output_key("verdict")
        .build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`). Debaters answer concurrently, so each has its own script.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (one per round).
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
