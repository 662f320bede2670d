//! **Parallel mapper** — horoscopes for a list of people: one astrologer agent is applied to every person of
//! the list `persons`, concurrently, and the results come back in the list's order.
//!
//! ```text
//! cargo run --example horoscope_mapper -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example horoscope_mapper     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example horoscope_mapper
//! ```
//!
//! Spec version: `examples/specs/horoscope_mapper.yaml`; declarative twin: `examples/horoscope_mapper_declarative.rs`.

use std::error::Error;

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

/// Builds the mapper, runs it over three people and returns one horoscope per line.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let persons = json!([
        {"name": "Mario", "sign": "aries"},
        {"name": "Luigi", "sign": "pisces"},
        {"name": "Peach", "sign": "leo"}
    ]);
    let outcome = batch_horoscopes(scripted)?.invoke().input("persons", persons.clone()).await?;

    let results = outcome.output().and_then(Value::as_array).cloned().unwrap_or_default();
    let lines: Vec<String> = persons
        .as_array()
        .into_iter()
        .flatten()
        .zip(&results)
        .map(|(p, h)| {
            format!(
                "{} ({}): {}",
                p["name"].as_str().unwrap_or_default(),
                p["sign"].as_str().unwrap_or_default(),
                h.as_str().unwrap_or_default()
            )
        })
        .collect();
    Ok(lines.join("\n"))
}

/// The astrologer, applied to every person of `persons` by a parallel mapper.
/// (`horoscope_mapper_declarative.rs` declares the same agents with attributes.)
pub fn batch_horoscopes(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let astrologer = LlmAgent::builder(model(scripted)?)
        .name("astrologer")
        .description("An astrologist that writes a horoscope for a person")
        .system("You are an astrologist who writes horoscopes from a person's name and zodiac sign.")
        .user("Write a one-sentence horoscope for {{ person.name }}, whose zodiac sign is {{ person.sign }}.")
        .max_tokens(80)
        .build()?;
    Ok(ParallelMapper::builder()
        .name("batch_horoscopes")
        .sub_agent(astrologer)
        .items_key("persons") // the list
        .item_key("person") // the astrologer's input that receives each item
        // The scripted replies are used in the order the model is asked, so the offline run maps one person
        // at a time; with a real model all three are asked at once.
        .max_concurrency(if scripted { 1 } else { 3 })
        .output_key("horoscopes")
        .build()?)
}

/// The astrologer's model: canned replies with `--scripted`, else the default model (the local one, or the
/// server at `OPENAI_BASE_URL`).
fn model(scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || {
        ScriptedModel::new([
            "Mario, your aries fire opens a door at work this week: walk through it.",
            "Luigi, a pisces dream points to an old friend; call them before Friday.",
            "Peach, leo confidence wins the room, but listen before you roar.",
        ])
    })
}
