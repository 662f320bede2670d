//! **GOAP, declared** — the horoscope writeup of `goap_horoscope.rs` with the declarative attributes: four LLM
//! agents (the person typed as a struct, the sign as an enum of the twelve signs) and two `#[agent]` functions
//! (the writeup and an unrelated weather report), planned by a `#[goap]` backwards from its output key. The
//! typed call `astrologer.astrologer(prompt).await?` returns the writeup.
//!
//! ```text
//! cargo run --example goap_horoscope_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example goap_horoscope_declarative # the local model
//! ```
//!
//! Builder version: `examples/goap_horoscope.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// The person a prompt is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Person {
    /// Their name.
    pub name: String,
}

/// A zodiac sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Sign {
    /// 21 March – 19 April.
    Aries,
    /// 20 April – 20 May.
    Taurus,
    /// 21 May – 20 June.
    Gemini,
    /// 21 June – 22 July.
    Cancer,
    /// 23 July – 22 August.
    Leo,
    /// 23 August – 22 September.
    Virgo,
    /// 23 September – 22 October.
    Libra,
    /// 23 October – 21 November.
    Scorpio,
    /// 22 November – 21 December.
    Sagittarius,
    /// 22 December – 19 January.
    Capricorn,
    /// 20 January – 18 February.
    Aquarius,
    /// 19 February – 20 March.
    Pisces,
}

/// The sign extractor's few-shot prompt (the builder version's).
const SIGN: &str = "\
Find the zodiac sign in each prompt.

Prompt: I am Anna and I was born under the sign of Leo.
Sign: leo

Prompt: Paolo here, a proud capricorn.
Sign: capricorn

Prompt: {{ prompt }}
Sign:";

/// Writes up the horoscope and the story for the person.
#[agent(output_key = "writeup")]
fn writer(person: Person, sign: Sign, horoscope: String, story: String) -> Result<String, String> {
    let sign = serde_json::to_value(sign).map_err(|e| e.to_string())?;
    Ok(format!("{} ({})\nHoroscope: {horoscope}\nIn the news: {story}", person.name, sign.as_str().unwrap_or_default()))
}

/// Tells the weather in a city (off the path to the writeup: never planned).
#[agent(output_key = "forecast")]
fn weather(city: String) -> String {
    format!("sunny in {city}")
}

/// From a prompt to a horoscope writeup, the plan found backwards from the goal.
#[agents]
pub trait Astrologer {
    /// Extracts the person.
    #[agent(
        description = "Extracts the person from the user's prompt",
        user = "Extract the name of the person from this prompt.\nPrompt: {{ prompt }}",
        output_key = "person"
    )]
    async fn person(&self, prompt: String) -> Person;

    /// Extracts the sign.
    #[agent(description = "Extracts the zodiac sign from the user's prompt", user = SIGN, output_key = "sign")]
    async fn sign(&self, prompt: String) -> Sign;

    /// Writes the horoscope.
    #[agent(
        description = "An astrologist that writes a horoscope from a name and a zodiac sign",
        system = "You are an astrologist.",
        user = "Write a one-sentence horoscope for {{ person.name }}, who is a {{ sign }}.",
        max_tokens = 80,
        output_key = "horoscope"
    )]
    async fn horoscope(&self, person: Person, sign: Sign) -> String;

    /// Makes up a news story.
    #[agent(
        description = "Finds a funny news story for a person with a given horoscope",
        user = "Tell a short, funny, made-up news story for {{ person.name }}, whose horoscope says: {{ horoscope }}",
        max_tokens = 120,
        output_key = "story"
    )]
    async fn story(&self, person: Person, horoscope: String) -> String;

    /// The shortest chain of agents from the prompt to the writeup.
    #[goap(agents(horoscope, person, self::weather, sign, self::writer, story), output_key = "writeup")]
    async fn astrologer(&self, prompt: String) -> String;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, each asking its own model (the builder version's canned replies with `--scripted`).
pub fn astrologer(scripted: bool) -> Result<AstrologerAgents, Box<dyn Error>> {
    Ok(AstrologerAgents::builder(model("person", scripted)?)
        .sign_model(model("sign", scripted)?)
        .horoscope_model(model("horoscope", scripted)?)
        .story_model(model("story", scripted)?)
        .build()?)
}

/// Writes up one prompt through the typed entry point and returns the writeup.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    Ok(astrologer(scripted)?.astrologer("My name is Mario and my zodiac sign is pisces").await?)
}

/// The model `agent` asks: the canned replies of `goap_horoscope.rs` with `--scripted`, else the default
/// model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `goap_horoscope.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "person" => vec![r#"{"name": "Mario"}"#],
        "sign" => vec!["pisces"],
        "horoscope" => vec!["Mario, the tide turns in your favour: say yes to the unexpected invitation."],
        "story" => vec!["A plumber named Mario accepted a mystery invitation and won a lifetime supply of pipes."],
        _ => vec![],
    }
}
