//! What the gallery's examples share: the `--scripted` switch, the model an agent asks (canned replies, or
//! the default model) and the answer of a person at the terminal.
//!
//! An example uses it with `#[path = "common/mod.rs"] mod common;` (the path keeps working when
//! `tests/examples_rust.rs` compiles the example as a module).

use std::error::Error;
use std::io::{BufRead, IsTerminal, Write};

use agentic::prelude::*;

/// Whether the example runs offline on canned replies: `--scripted` on the command line, or
/// `AGENTIC_SCRIPTED=1` in the environment.
pub fn scripted() -> bool {
    std::env::args().any(|a| a == "--scripted") || std::env::var("AGENTIC_SCRIPTED").is_ok_and(|v| v == "1")
}

/// A model: the canned one `canned` makes when `scripted`, else the default model (the local one, or the
/// server at `OPENAI_BASE_URL`).
///
/// # Errors
/// [`NoModel`] when there is no default model: this binary was built without the `local` feature and
/// `OPENAI_BASE_URL` is not set.
pub fn model(scripted: bool, canned: impl FnOnce() -> ScriptedModel) -> Result<ChatModelRef, Box<dyn Error>> {
    if scripted {
        return Ok(ChatModelRef::new(canned()));
    }
    match agentic::default_model() {
        Ok(model) => Ok(model),
        Err(agentic::agents::model::ModelError::Unavailable { provider, .. }) if provider == "local" => {
            Err(Box::new(NoModel { example: example_name() }))
        }
        Err(e) => Err(e.into()),
    }
}

/// An example asked for the default model in a binary without one: the one sentence that says the three ways
/// out. Its `Debug` is its text too, so that a `main` returning it prints `Error: no model to run ..`.
pub struct NoModel {
    /// The example's name (`story`), for the commands in the sentence.
    pub example: String,
}

impl std::fmt::Display for NoModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let example = &self.example;
        write!(
            f,
            "no model to run this example on: run it on canned replies with `cargo run --example {example} -- \
             --scripted`, on an OpenAI-compatible server by setting OPENAI_BASE_URL, or install the local model \
             once with `scripts/setup-local-model.sh` and run `cargo run --features local --example {example}`"
        )
    }
}

impl std::fmt::Debug for NoModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl Error for NoModel {}

/// The running example's name: its executable's, without the `-<hash>` of a test build.
fn example_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe.as_deref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
    let stem = stem.unwrap_or_else(|| "<example>".to_string());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem,
    }
}

/// A person's answer to `prompt`: typed at the terminal when a model runs, else `canned` (with `--scripted`,
/// or when the input is not a terminal).
#[allow(dead_code)] // used by the examples with a human in the loop only
pub fn ask(prompt: &str, canned: &str, scripted: bool) -> Result<String, Box<dyn Error>> {
    if scripted || !std::io::stdin().is_terminal() {
        return Ok(canned.to_string());
    }
    print!("{prompt}\n> ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}
