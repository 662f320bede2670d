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
pub fn model(scripted: bool, canned: impl FnOnce() -> ScriptedModel) -> Result<ChatModelRef, Box<dyn Error>> {
    if scripted {
        return Ok(ChatModelRef::new(canned()));
    }
    Ok(agentic::default_model()?)
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
