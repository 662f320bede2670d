//! `--stream` of `agentic run` and `agentic resume`: the run's answer printed as it is produced — the tokens
//! of the system's final agent on stdout as they come (flushed one by one), then the outcome as without
//! `--stream` (docs/spec.md §2 has the exact format).

use std::io::Write;

use agentic_engine::{AgentError, InvokeRequest, RunOutcome, StreamItem};
use serde_json::json;

use super::progress::Progress;

/// Runs `request` as a result stream on `runtime`, printing the final agent's tokens (text: as they are, a
/// newline after the last one; `json`: one `{"token": ..}` line each). The progress line, if any, stops at the
/// first token. Returns the run's result, as awaiting the request would.
pub(crate) fn run_streamed(
    runtime: &tokio::runtime::Runtime,
    request: InvokeRequest,
    progress: Option<&Progress>,
    json: bool,
) -> Result<RunOutcome, AgentError> {
    runtime.block_on(async move {
        let mut stream = request.stream();
        let source = stream.source().cloned();
        if source.is_none() {
            eprintln!(
                "note: nothing to stream: the system's final agent (the root, or a sequence's last agent) is not an \
                 agent that streams (llm with `stream: true`); the output follows when the run ends"
            );
        }
        let mut printer = Printer { json, open_line: false, progress, stopped: false };
        while let Some(item) = stream.recv().await {
            match item {
                Ok(StreamItem::Token(text)) => printer.token(&text),
                Ok(StreamItem::Retry { attempt }) => {
                    printer.end_line();
                    if let Some(s) = &source {
                        eprintln!("retry: agent `{}` ({}) starts again, attempt {attempt}", s.agent, s.path);
                    }
                    if json {
                        printer.write(&format!("{}\n", json!({ "retry": attempt })));
                    }
                }
                Ok(StreamItem::End(outcome)) => {
                    printer.end_line();
                    return Ok(outcome);
                }
                Ok(_) => {}
                Err(e) => {
                    printer.end_line();
                    return Err(e);
                }
            }
        }
        Err(AgentError::internal("the run's result stream ended without its outcome"))
    })
}

/// Writes the tokens to stdout.
struct Printer<'a> {
    json: bool,
    /// Text mode: tokens were written since the last newline.
    open_line: bool,
    progress: Option<&'a Progress>,
    stopped: bool,
}

impl Printer<'_> {
    fn token(&mut self, text: &str) {
        if !self.stopped {
            // The spinner redraws its line on the terminal, which would cut the tokens' line.
            if let Some(p) = self.progress {
                p.stop();
            }
            self.stopped = true;
        }
        if self.json {
            self.write(&format!("{}\n", json!({ "token": text })));
        } else if !text.is_empty() {
            self.write(text);
            self.open_line = !text.ends_with('\n');
        }
    }

    /// Ends the tokens' line (text mode) so that what follows starts on a line of its own.
    fn end_line(&mut self) {
        if self.open_line {
            self.write("\n");
            self.open_line = false;
        }
    }

    /// Writes and flushes; a closed pipe (`| head`) is not an error worth a panic.
    fn write(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }
}
