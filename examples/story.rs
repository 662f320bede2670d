//! **Sequence** — the story pipeline: a creative writer drafts a short story on a topic, an editor adapts it
//! to an audience, another to a style. Each LLM agent writes the state key `story`, which the next one reads.
//!
//! ```text
//! cargo run --example story -- --scripted        # canned replies, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example story     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example story   # any server
//! ```
//!
//! Spec version: `examples/specs/story.yaml`; declarative twin: `examples/story_declarative.rs`.

use std::error::Error;
use std::process::ExitCode;

use agentic::prelude::*;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> ExitCode {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    match run(common::scripted()).await {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Without a model (no `local` feature, no OPENAI_BASE_URL), the two ways out (`common::NoModel`).
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Builds the pipeline, runs it and returns what `main` prints: each draft, then the final story.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let novel_creator = novel_creator(scripted)?;

    let outcome = novel_creator
        .invoke()
        .input("topic", "dragons and wizards")
        .input("audience", "young adults")
        .input("style", "fantasy")
        .await?;

    // The history holds every step: here, the three drafts (and the sequence itself, last).
    let mut report = String::new();
    for record in outcome.history().await? {
        if record.agent != "novel_creator" {
            report += &format!("{}: {}\n", record.agent, record.output.as_str().unwrap_or_default());
        }
    }
    report += &format!("story: {}", outcome.output().and_then(|v| v.as_str()).unwrap_or_default());
    Ok(report)
}

/// The pipeline: the writer, then the audience editor, then the style editor, each rewriting `story`.
/// (`story_declarative.rs` declares the same agents with attributes.)
pub fn novel_creator(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let writer = LlmAgent::builder(model("writer", scripted)?)
        .name("writer")
        .description("Drafts a short story about a topic")
        .system("You write short fiction.")
        .user("Write a story of at most three sentences about {{ topic }}.\nReply with the story only.")
        .max_tokens(160)
        .output_key("story")
        .build()?;
    let audience_editor = LlmAgent::builder(model("audience_editor", scripted)?)
        .name("audience_editor")
        .description("Rewrites a story for a target audience")
        .system("You are an editor.")
        .user("Rewrite this story so that it suits {{ audience }}. Reply with the story only.\nStory: {{ story }}")
        .max_tokens(160)
        .output_key("story")
        .build()?;
    let style_editor = LlmAgent::builder(model("style_editor", scripted)?)
        .name("style_editor")
        .description("Rewrites a story in a given style")
        .system("You are an editor.")
        .user("Rewrite this story in the {{ style }} style, keeping it coherent. Reply with the story only.\nStory: {{ story }}")
        .max_tokens(160)
        .output_key("story")
        .build()?;
    Ok(Sequence::builder()
        .name("novel_creator")
        .sub_agents([writer, audience_editor, style_editor])
        .output_key("story")
        .build()?)
}

/// The model `agent` asks: its canned replies with `--scripted`, else the default model (the local one, or
/// the server at `OPENAI_BASE_URL`).
pub fn model(agent: &str, scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || ScriptedModel::new(script(agent)).named(agent))
}

/// The canned replies of each agent, in order.
pub fn script(agent: &str) -> Vec<&'static str> {
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
