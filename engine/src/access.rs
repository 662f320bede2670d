//! Who may do what on a server (SERVER.md §8), as stores keep it: API keys with their roles and tenant
//! ([`KeyRecord`], only a hash of the secret), and the audit trail of who answered, cancelled, forked, resumed
//! and changed keys ([`AuditEntry`]). Checking a request against them is the server's (`agentic-server`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a key may do. Each role adds to the one before it: a `viewer` reads; an `approver` also answers
/// pending responses (narrowed by [`KeyRecord::kinds`] and [`KeyRecord::agents`]); an `operator` also starts,
/// cancels, forks and resumes runs, manages schedules, and answers any pending response; an `admin` also
/// manages keys and reads the audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads runs, events, reports and schedules.
    Viewer,
    /// Also answers pending responses, of the kinds and agents its key allows.
    Approver,
    /// Also starts, cancels, forks and resumes runs, and manages schedules.
    Operator,
    /// Also creates, lists and revokes keys, and reads the audit.
    Admin,
}

impl Role {
    /// Every role, from the least to the most allowed.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Approver, Role::Operator, Role::Admin];

    /// The role's name as keys and the CLI spell it (`viewer`, `approver`, `operator`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Approver => "approver",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    /// Parses a role's name; the error names the role given and lists the valid ones.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role `{s}` (expected viewer, approver, operator or admin)"))
    }
}

/// An API key as a store keeps it: who it is (`id`, `name`), whose runs it reaches (`tenant`), what it may do
/// (`roles`, narrowed for answers by `kinds` and `agents`), and the SHA-256 of its secret, never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The key's public id (`k` and 12 lowercase hex digits), the part of the key before its secret.
    pub id: String,
    /// A name people know it by (`ci-bot`, `alice`): who did what in the audit and on answers.
    pub name: String,
    /// The tenant whose runs, schedules and specs the key reaches, and that the runs it starts belong to.
    pub tenant: String,
    /// What it may do (each role includes the ones before it, [`Role`]).
    pub roles: Vec<Role>,
    /// For the `approver` role: the kinds of pending responses it may answer (`human`, `tool_call`, ..);
    /// empty: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// For the `approver` role: the agents whose pending responses it may answer (by name); empty: every agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// The SHA-256 of the key's secret, 64 lowercase hex digits.
    pub hash: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Who created it (a principal, as [`AuditEntry::principal`]).
    #[serde(default)]
    pub created_by: String,
    /// When it was revoked (milliseconds since the Unix epoch); a revoked key is refused like an unknown one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
}

/// One thing a person or program did to a run or to the keys, as the audit keeps it (SERVER.md §8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Who: `key:<name>` for an API key, `token` for the server's `--token-env` token, `anonymous` on a
    /// server without either, `cli:<user>` for the CLI on the store.
    pub principal: String,
    /// The tenant the entry belongs to: the run's, or the key's for key changes; `None` for tenant-less runs
    /// and keys changed by a tenant-less principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// What: `answer`, `cancel`, `fork`, `resume`, `upgrade`, `key_create`, `key_revoke`.
    pub action: String,
    /// The run it was done to (for a fork, the source run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What else says what was done: the response id and kind answered, the fork's new run id and step, the
    /// key's id and roles.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub detail: Value,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn roles_read_and_write_their_names_and_are_ordered_by_what_they_allow() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(serde_json::to_value(role).unwrap(), Value::String(role.to_string()));
        }
        assert!(Role::Viewer < Role::Approver && Role::Approver < Role::Operator && Role::Operator < Role::Admin);
        assert_eq!(
            "owner".parse::<Role>().unwrap_err(),
            "unknown role `owner` (expected viewer, approver, operator or admin)"
        );
    }
}
