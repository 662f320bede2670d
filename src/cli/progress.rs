//! The progress line of `agentic run` and `agentic resume` on stderr, when stderr is a terminal: a spinner
//! with the number of finished steps, the agents in flight (innermost last) and the tool running, so a long
//! model call (or the first call of the local model, which loads it) is visibly alive. Off when stderr is not
//! a terminal or `AGENTIC_PROGRESS=0`.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic_engine::{AgentListener, RunEvent};
use indicatif::{ProgressBar, ProgressStyle};

/// Agents shown at most in the line (the most recently started).
const SHOWN: usize = 3;

#[derive(Default)]
struct State {
    /// Started and not finished: (path, name), in start order.
    running: Vec<(String, String)>,
    finished: u64,
    tool: Option<String>,
    tokens: u64,
    /// Stopped for good ([`Progress::stop`]): events no longer draw.
    stopped: bool,
}

/// The spinner and what it shows. Cloning shares it.
#[derive(Clone)]
pub(crate) struct Progress {
    bar: ProgressBar,
    state: Arc<Mutex<State>>,
}

impl Progress {
    /// A spinner on stderr, or `None` when stderr is not a terminal (or `AGENTIC_PROGRESS=0`).
    pub(crate) fn start() -> Option<Self> {
        if !std::io::stderr().is_terminal() || std::env::var("AGENTIC_PROGRESS").is_ok_and(|v| v == "0") {
            return None;
        }
        let bar = ProgressBar::new_spinner();
        let style = ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message("starting");
        bar.enable_steady_tick(Duration::from_millis(120));
        Some(Progress { bar, state: Arc::new(Mutex::new(State::default())) })
    }

    /// Removes the line (before the outcome is printed).
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Removes the line for the rest of the run: later events no longer draw it (`--stream` prints tokens on
    /// the terminal's current line, which a redraw would cut).
    pub(crate) fn stop(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.stopped = true;
        }
        self.bar.finish_and_clear();
    }

    fn render(&self, s: &State) {
        self.bar.set_message(message(s));
    }
}

/// The line after the spinner and the elapsed time.
fn message(s: &State) -> String {
    let names: Vec<&str> = s.running.iter().rev().take(SHOWN).rev().map(|(_, n)| n.as_str()).collect();
    let more = s.running.len().saturating_sub(SHOWN);
    let mut msg = format!("{} step{} done", s.finished, if s.finished == 1 { "" } else { "s" });
    if !names.is_empty() {
        msg.push_str(" · running ");
        if more > 0 {
            msg.push_str(&format!("+{more} "));
        }
        msg.push_str(&names.join(" › "));
    }
    if let Some(t) = &s.tool {
        msg.push_str(&format!(" · tool {t}"));
    }
    if s.tokens > 0 {
        msg.push_str(&format!(" · {} tokens streamed", s.tokens));
    }
    msg
}

impl AgentListener for Progress {
    fn on_event(&self, event: &RunEvent) {
        let Ok(mut s) = self.state.lock() else { return };
        if s.stopped {
            return;
        }
        match event {
            RunEvent::AgentStarted { path, agent, .. } => s.running.push((path.clone(), agent.clone())),
            RunEvent::AgentFinished { path, .. } | RunEvent::AgentFailed { path, .. } => {
                if let Some(i) = s.running.iter().rposition(|(p, _)| p == path) {
                    s.running.remove(i);
                }
                s.finished += 1;
            }
            RunEvent::ToolStarted { tool, .. } => s.tool = Some(tool.clone()),
            RunEvent::ToolFinished { .. } => s.tool = None,
            RunEvent::Token { .. } => s.tokens += 1,
            // A run stopped (a `wait` sleeps between two runs of it): what was in flight is no longer, and
            // starts again when it continues.
            RunEvent::Suspended { .. } | RunEvent::Drained { .. } | RunEvent::Resumed { .. } => {
                s.running.clear();
                s.tool = None;
            }
            _ => return,
        }
        self.render(&s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(names: &[&str]) -> Vec<(String, String)> {
        names.iter().enumerate().map(|(i, n)| (format!("root/{i}"), n.to_string())).collect()
    }

    #[test]
    fn the_line_names_the_innermost_agents_in_flight() {
        let mut s = State { running: running(&["triage", "classify"]), finished: 1, ..State::default() };
        assert_eq!(message(&s), "1 step done · running triage › classify");
        s.running = running(&["triage", "route", "legal", "draft", "polish"]);
        s.finished = 4;
        s.tool = Some("order_status".into());
        s.tokens = 12;
        assert_eq!(
            message(&s),
            "4 steps done · running +2 legal › draft › polish · tool order_status · 12 tokens streamed"
        );
    }

    #[test]
    fn events_update_the_state() {
        let p = Progress { bar: ProgressBar::hidden(), state: Arc::new(Mutex::new(State::default())) };
        let started = |path: &str, agent: &str| RunEvent::AgentStarted {
            run_id: "r".into(),
            agent: agent.into(),
            path: path.into(),
            attempt: 1,
            inputs: Default::default(),
        };
        p.on_event(&started("root", "story"));
        p.on_event(&started("root/0", "writer"));
        p.on_event(&RunEvent::AgentFinished {
            run_id: "r".into(),
            agent: "writer".into(),
            path: "root/0".into(),
            attempt: 1,
            output: serde_json::json!("draft"),
            duration_us: 5,
            tokens: None,
        });
        assert_eq!(message(&p.state.lock().expect("state")), "1 step done · running story");
        // A `wait` suspends the run and resumes it: the agents in flight start again, counted once.
        p.on_event(&started("root/1", "pause"));
        p.on_event(&RunEvent::Suspended { run_id: "r".into(), pending: Vec::new() });
        p.on_event(&RunEvent::Resumed { run_id: "r".into(), answers: Default::default() });
        p.on_event(&started("root", "story"));
        p.on_event(&started("root/1", "pause"));
        assert_eq!(message(&p.state.lock().expect("state")), "1 step done · running story › pause");
    }
}
