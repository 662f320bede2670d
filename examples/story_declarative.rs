//! **Sequence, declared** — the story pipeline of `story.rs`, written with the declarative attributes: a trait
//! whose methods are the three LLM agents and the sequence over them. The methods are typed calls:
//! `novel.novel_creator("dragons and wizards", "young adults", "fantasy").await?` runs the whole pipeline and
//! returns the story as a `String`; `novel.writer("owls").await?` runs the writer alone.
//!
//! ```text
//! cargo run --example story_declarative -- --scripted    # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example story_declarative # the local model (scripts/setup-local-model.sh)
//! ```
//!
//! Builder version: `examples/story.rs` (same agents, same replies, same result).

use std::error::Error;
use std::process::ExitCode;

use agentic::prelude::*;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// Writes a story on a topic, then adapts it to an audience and to a style. Each agent is a method: its
/// parameters are the state keys it reads (and its template's variables), its return type its answer.
#[agents]
pub trait NovelCreator {
    /// Drafts the story.
    #[agent(
        description = "Drafts a short story about a topic",
        system = "You write short fiction.",
        user = "Write a story of at most three sentences about {{ topic }}.\nReply with the story only.",
        max_tokens = 160,
        output_key = "story"
    )]
    async fn writer(&self, topic: String) -> String;

    /// Adapts the story to an audience.
    #[agent(
        description = "Rewrites a story for a target audience",
        system = "You are an editor.",
        user = "Rewrite this story so that it suits {{ audience }}. Reply with the story only.\nStory: {{ story }}",
        max_tokens = 160,
        output_key = "story"
    )]
    async fn audience_editor(&self, story: String, audience: String) -> String;

    /// Adapts the story to a style.
    #[agent(
        description = "Rewrites a story in a given style",
        system = "You are an editor.",
        user = "Rewrite this story in the {{ style }} style, keeping it coherent. Reply with the story only.\nStory: {{ story }}",
        max_tokens = 160,
        output_key = "story"
    )]
    async fn style_editor(&self, story: String, style: String) -> String;

    /// The pipeline: writer → audience editor → style editor.
    #[sequence(agents(writer, audience_editor, style_editor), output_key = "story")]
    async fn novel_creator(&self, topic: String, audience: String, style: String) -> String;
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(common::scripted()).await {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The agents, each asking its own model: its canned replies with `--scripted` (the builder version's), else
/// the default model.
pub fn novel_creator(scripted: bool) -> Result<NovelCreatorAgents, Box<dyn Error>> {
    Ok(NovelCreatorAgents::builder(model("writer", scripted)?)
        .audience_editor_model(model("audience_editor", scripted)?)
        .style_editor_model(model("style_editor", scripted)?)
        .build()?)
}

/// Runs the pipeline through its typed entry point and returns what `main` prints.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let novel = novel_creator(scripted)?;
    let story: String = novel.novel_creator("dragons and wizards", "young adults", "fantasy").await?;
    Ok(format!("story: {story}"))
}

/// The model `agent` asks: the canned replies of `story.rs` with `--scripted`, else the default model.
fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order (the same as `story.rs`'s).
fn script(agent: &str) -> Vec<&'static str> {
    match agent {
        "writer" => vec!["Mira, a wizard's apprentice, found a dragon egg in the library. It hatched during her exam."],
        "audience_editor" => vec![
            "Mira, seventeen and always late, found a dragon egg between two spell books. It hatched mid-exam, and \
             nobody believed her excuse.",
        ],
        "style_editor" => vec![
            "In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. It \
             hatched in a burst of emerald fire during her trial, and the old masters fell silent.",
        ],
        _ => vec![],
    }
}
