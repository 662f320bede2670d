//! **Parallel mapper, declared** — the horoscopes of `horoscope_mapper.rs` with the declarative attributes: an
//! astrologer reading a typed `Person`, applied to every person of the list `persons` by a
//! `#[parallel_mapper]`. The typed call `astrology.batch_horoscopes(persons).await?` returns one horoscope per
//! person, in the list's order.
//!
//! ```text
//! cargo run --example horoscope_mapper_declarative -- --scripted    # canned replies (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example horoscope_mapper_declarative # the local model
//! ```
//!
//! Builder version: `examples/horoscope_mapper.rs` (same agents, same replies, same result). One difference:
//! the attribute's `max_concurrency` is a literal, so the twin asks one person at a time with any model (the
//! scripted replies are used in the order the model is asked), where the builder version asks a real model
//! for all three at once.

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// A person and their zodiac sign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Person {
    /// The person's first name.
    pub name: String,
    /// Their zodiac sign.
    pub sign: String,
}

/// An astrologer applied to a list of people.
#[agents]
pub trait Astrology {
    /// Writes one person's horoscope.
    #[agent(
        description = "An astrologist that writes a horoscope for a person",
        system = "You are an astrologist who writes horoscopes from a person's name and zodiac sign.",
        user = "Write a one-sentence horoscope for {{ person.name }}, whose zodiac sign is {{ person.sign }}.",
        max_tokens = 80,
        output_key = "horoscope"
    )]
    async fn astrologer(&self, person: Person) -> String;

    /// The astrologer on every person of `persons` (each given as `person`), one at a time.
    #[parallel_mapper(
        agent = astrologer,
        items_key = "persons",
        item_key = "person",
        max_concurrency = 1,
        output_key = "horoscopes"
    )]
    async fn batch_horoscopes(&self, persons: Vec<Person>) -> Vec<String>;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents (the builder version's canned replies with `--scripted`).
pub fn astrology(scripted: bool) -> Result<AstrologyAgents, Box<dyn Error>> {
    Ok(AstrologyAgents::builder(model(scripted)?).build()?)
}

/// The three people of `horoscope_mapper.rs`.
pub fn persons() -> Vec<Person> {
    let person = |name: &str, sign: &str| Person { name: name.to_string(), sign: sign.to_string() };
    vec![person("Mario", "aries"), person("Luigi", "pisces"), person("Peach", "leo")]
}

/// Maps the astrologer over three people through the typed entry point; one horoscope per line.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let persons = persons();
    let horoscopes: Vec<String> = astrology(scripted)?.batch_horoscopes(persons.clone()).await?;
    let lines: Vec<String> =
        persons.iter().zip(&horoscopes).map(|(p, h)| format!("{} ({}): {h}", p.name, p.sign)).collect();
    Ok(lines.join("\n"))
}

/// The astrologer's model: the canned replies of `horoscope_mapper.rs` with `--scripted`, else the default
/// model.
fn model(scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || {
        ScriptedModel::new([
            "Mario, your aries fire opens a door at work this week: walk through it.",
            "Luigi, a pisces dream points to an old friend; call them before Friday.",
            "Peach, leo confidence wins the room, but listen before you roar.",
        ])
    })
}
