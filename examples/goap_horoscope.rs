//! **GOAP** (goal-oriented) — the horoscope writeup: from a prompt like "My name is Mario and my zodiac sign
//! is pisces", the planner finds the shortest chain of agents from the keys present (`prompt`) to the goal
//! (the output key, `writeup`) and runs it in dependency order. The agents are declared in any order; one of
//! them (`weather`) is off the path and never runs.
//!
//! The person's name is extracted as JSON (a schema) and the sign classified as one of the twelve signs (an
//! enum, few-shot) — what the local model does reliably; the final writeup is a template.
//!
//! ```text
//! cargo run --example goap_horoscope -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example goap_horoscope     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example goap_horoscope
//! ```
//!
//! Spec version: `examples/specs/goap.yaml`; declarative twin: `examples/goap_horoscope_declarative.rs`.

use std::error::Error;

use agentic::agents::OutputType;
use agentic::planners::Goap;
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

const SIGNS: [&str; 12] = [
    "aries",
    "taurus",
    "gemini",
    "cancer",
    "leo",
    "virgo",
    "libra",
    "scorpio",
    "sagittarius",
    "capricorn",
    "aquarius",
    "pisces",
];

const SIGN: &str = "\
Find the zodiac sign in each prompt.

Prompt: I am Anna and I was born under the sign of Leo.
Sign: leo

Prompt: Paolo here, a proud capricorn.
Sign: capricorn

Prompt: {{ prompt }}
Sign:";

/// Builds the agents and the GOAP planner, runs it on one prompt and returns the plan and the writeup.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let outcome =
        astrologer(scripted)?.invoke().input("prompt", "My name is Mario and my zodiac sign is pisces").await?;

    let plan: Vec<String> =
        outcome.history().await?.into_iter().filter(|r| r.agent != "astrologer").map(|r| r.agent).collect();
    Ok(format!("plan: {}\n{}", plan.join(" -> "), outcome.output().and_then(Value::as_str).unwrap_or_default()))
}

/// The agents and the GOAP planner, planning backwards from the writeup.
/// (`goap_horoscope_declarative.rs` declares the same agents with attributes.)
pub fn astrologer(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let person = LlmAgent::builder(model("person", scripted)?)
        .name("person")
        .description("Extracts the person from the user's prompt")
        .user("Extract the name of the person from this prompt.\nPrompt: {{ prompt }}")
        .output(OutputType::Schema(json!({
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]
        })))
        .output_key("person")
        .build()?;
    let sign = LlmAgent::builder(model("sign", scripted)?)
        .name("sign")
        .description("Extracts the zodiac sign from the user's prompt")
        .user(SIGN)
        .output(OutputType::Enum(SIGNS.iter().map(|s| s.to_string()).collect()))
        .output_key("sign")
        .build()?;
    let horoscope = LlmAgent::builder(model("horoscope", scripted)?)
        .name("horoscope")
        .description("An astrologist that writes a horoscope from a name and a zodiac sign")
        .system("You are an astrologist.")
        .user("Write a one-sentence horoscope for {{ person.name }}, who is a {{ sign }}.")
        .max_tokens(80)
        .output_key("horoscope")
        .build()?;
    let story = LlmAgent::builder(model("story", scripted)?)
        .name("story")
        .description("Finds a funny news story for a person with a given horoscope")
        .user("Tell a short, funny, made-up news story for {{ person.name }}, whose horoscope says: {{ horoscope }}")
        .max_tokens(120)
        .output_key("story")
        .build()?;
    let writer = Compute::template(
        "writer",
        "{{ person.name }} ({{ sign }})\nHoroscope: {{ horoscope }}\nIn the news: {{ story }}",
    )?
    .description("Writes up the horoscope and the story for the person")
    .output_key("writeup")
    .build();
    let weather = Compute::template("weather", "sunny in {{ city }}")?.output_key("forecast").build();

    Ok(Goap::builder()
        .name("astrologer")
        .sub_agents([horoscope, person, weather, sign, writer, story])
        .output_key("writeup")
        .build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`).
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "person" => vec![r#"{"name": "Mario"}"#],
        "sign" => vec!["pisces"],
        "horoscope" => vec!["Mario, the tide turns in your favour: say yes to the unexpected invitation."],
        "story" => vec!["A plumber named Mario accepted a mystery invitation and won a lifetime supply of pipes."],
        _ => vec![],
    }
}
