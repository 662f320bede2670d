//! [`RunStatus`]: where a run stands, as its record in the store says.

use serde::{Deserialize, Serialize};

/// Status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Running (or interrupted by a crash or a drain: resume it).
    Running,
    /// Finished with a result.
    Completed,
    /// Waiting for a human.
    Suspended,
    /// Failed with an error.
    Failed,
    /// Cancelled by the caller.
    Cancelled,
}

impl std::str::FromStr for RunStatus {
    type Err = String;

    /// Parses the names [`RunStatus`]'s `Display` prints (`running`, `suspended`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "suspended" => RunStatus::Suspended,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            other => {
                return Err(format!(
                    "unknown status `{other}` (expected running, suspended, completed, failed or cancelled)"
                ));
            }
        })
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Suspended => "suspended",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        })
    }
}
