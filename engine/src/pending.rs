//! What a suspended run waits for: a [`PendingResponse`] (a question to a person, a timer, a spent budget),
//! and who answers it ([`PendingKind`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A response a suspended run waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingResponse {
    /// Response id (default: the asking agent's path).
    pub id: String,
    /// The prompt shown to the human.
    pub prompt: String,
    /// Name of the agent that asked.
    pub agent: String,
    /// What the asking agent needs to continue once answered (an A2A agent: the remote task and context
    /// ids), journaled with the suspension and handed back to it on resume
    /// ([`crate::HumanView::suspension`]); null for a human agent.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
    /// Who answers it: a person (default), or nobody (a timer that only waits for its deadline).
    #[serde(default, skip_serializing_if = "PendingKind::is_human")]
    pub kind: PendingKind,
    /// When the step times out, milliseconds since the Unix epoch (SPEC.md §3): a later answer is refused,
    /// and a run resumed after it continues as [`PendingResponse::on_timeout`] says. A wait's firing time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// What happens at the deadline, as a phrase for the people who see it refused ("the default value is
    /// used", "the step fails", "it is escalated to `manager`").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
}

impl PendingResponse {
    /// A question `prompt` asked by `agent` as response `id`, without data or deadline.
    pub fn new(id: impl Into<String>, prompt: impl Into<String>, agent: impl Into<String>) -> Self {
        PendingResponse {
            id: id.into(),
            prompt: prompt.into(),
            agent: agent.into(),
            data: Value::Null,
            kind: PendingKind::Human,
            deadline_ms: None,
            on_timeout: None,
        }
    }

    /// The pending response as the CLI's `--json` and the HTTP API show it: `id`, `prompt`, `agent`; `kind`
    /// unless a person answers it (`wait`, `budget`); a step's `deadline` (RFC 3339) and `on_timeout`; for a
    /// budget, `budget: {agent, limits, used, reached}`; the asking agent's other `data` (a remote task's ids).
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({"id": self.id, "prompt": self.prompt, "agent": self.agent});
        match self.kind {
            PendingKind::Human => {}
            PendingKind::Wait => v["kind"] = Value::from("wait"),
            PendingKind::Budget => v["kind"] = Value::from("budget"),
            PendingKind::ToolCall => v["kind"] = Value::from("tool_call"),
            PendingKind::InDoubt => v["kind"] = Value::from("in_doubt"),
        }
        if let Some(deadline) = self.deadline_ms {
            v["deadline"] = Value::from(crate::time::rfc3339_ms(deadline));
        }
        if let Some(then) = &self.on_timeout {
            v["on_timeout"] = Value::from(then.as_str());
        }
        if self.kind == PendingKind::Budget {
            let d = &self.data;
            v["budget"] = serde_json::json!({"agent": d["budget_agent"], "limits": d["limits"], "used": d["used"],
                                             "reached": d["reached"]});
        } else if !self.data.is_null() {
            v["data"] = self.data.clone();
        }
        v
    }

    /// Whether its deadline has passed at `now_ms` (milliseconds since the Unix epoch).
    pub fn timed_out(&self, now_ms: u64) -> bool {
        self.deadline_ms.is_some_and(|d| d <= now_ms)
    }

    /// Whether it stays in the run's record while the run runs again (its asker reads it back on resume):
    /// it carries agent data, a deadline, or is a timer.
    pub fn kept_on_resume(&self) -> bool {
        !self.data.is_null() || self.deadline_ms.is_some() || self.kind != PendingKind::Human
    }
}

/// Who answers a [`PendingResponse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PendingKind {
    /// A person (a human step): the inbox, `respond` and the API answer it.
    #[default]
    Human,
    /// Nobody: a `wait` step, which fires at its deadline. Answers are refused.
    Wait,
    /// A budget was spent (SPEC.md §3): answered with a new limit (a number, or an object of `tokens`,
    /// `model_calls`, `cost_usd`) or `"stop"`.
    Budget,
    /// A tool call waits for a person's approval (SPEC.md §4): answered with a decision
    /// ([`crate::ToolDecision`]); its data has `tool`, `args`, `args_hash` and the tool's `parameters`.
    ToolCall,
    /// A tool call with effect `once` was cut by a crash after it was sent (SPEC.md §4): answered with
    /// `{"result": ..}`, `"retry"` or `"fail"` ([`crate::DoubtAnswer`]); its data has `tool`, `args` and
    /// `started_at`.
    InDoubt,
}

impl PendingKind {
    fn is_human(&self) -> bool {
        *self == PendingKind::Human
    }
}
