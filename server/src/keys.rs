//! API keys (SERVER.md §8): making one, listing and revoking them, on a store directly (the CLI's `agentic
//! keys` when no server holds the store) or behind `/api/v1/keys` (a server). A key reads
//! `agk_<id>_<secret>`: `id` (`k` and 12 hex digits) finds its record, `secret` (64 hex digits, 256 random bits)
//! proves it; the store keeps the SHA-256 of the whole key, never the key. Every creation and revocation is
//! appended to the audit.

use agentic_engine::{AuditEntry, DynCheckpointStore, KeyRecord, PendingKind, Role, StoreError};
use serde_json::{Value, json};

/// What every key starts with.
pub const KEY_PREFIX: &str = "agk_";

/// The longest key name, tenant, kind or agent name accepted (bytes).
const MAX_NAME: usize = 128;

/// A key to create: who it is, whose runs it reaches, what it may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewKey {
    /// A name people know it by (unique among the keys not revoked).
    pub name: String,
    /// The tenant it belongs to: letters, digits, `_`, `-`, `.` (1 to 128).
    pub tenant: String,
    /// Its roles (at least one).
    pub roles: Vec<Role>,
    /// For the approver role: the kinds of pending responses it may answer (`human`, `tool_call`, `budget`,
    /// `in_doubt`); empty: every kind.
    pub kinds: Vec<String>,
    /// For the approver role: the agents whose pending responses it may answer; empty: every agent.
    pub agents: Vec<String>,
}

/// Why a key could not be created, revoked or listed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A field of the new key is wrong (the field as the API and the CLI name it: `name`, `tenant`, `roles`,
    /// `kinds`, `agents`), or a key to revoke is named ambiguously (`key`: a name two tenants use).
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// No key has this id or name (among the ones the caller may see).
    #[error("no key `{0}`")]
    NotFound(String),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Creates the key `new` in `store`, by `by` (a principal, as the audit names it: `key:alice`, `token`,
/// `cli:bob`): returns the key (shown once: the store keeps only its hash) and its record. Appends a
/// `key_create` entry to the audit.
///
/// # Errors
/// [`KeyError::Invalid`] for a field that is wrong (an empty name or one an active key has, a tenant with
/// other characters, no role, an unknown kind, kinds or agents without the approver role);
/// [`KeyError::Store`].
pub async fn create_key(
    store: &dyn DynCheckpointStore,
    new: NewKey,
    by: &str,
) -> Result<(String, KeyRecord), KeyError> {
    check(&new)?;
    let existing = store.keys_dyn().await?;
    // Names are the tenant's own: another tenant's keys are neither seen nor in the way.
    if existing.iter().any(|k| k.revoked_at_ms.is_none() && k.tenant == new.tenant && k.name == new.name) {
        return Err(KeyError::Invalid {
            field: "name",
            message: format!("a key named `{}` exists (revoke it first, or choose another name)", new.name),
        });
    }
    let id = format!("k{}", hex(&random::<6>()?));
    let key = format!("{KEY_PREFIX}{id}_{}", hex(&random::<32>()?));
    let mut roles = new.roles;
    roles.sort();
    roles.dedup();
    let record = KeyRecord {
        id,
        name: new.name,
        tenant: new.tenant,
        roles,
        kinds: new.kinds,
        agents: new.agents,
        hash: hash(&key),
        created_at_ms: agentic_engine::now_ms(),
        created_by: by.to_string(),
        revoked_at_ms: None,
    };
    store.put_key_dyn(record.clone()).await?;
    audit(store, by, &record, "key_create").await?;
    Ok((key, record))
}

/// Revokes the key whose id or name is `key` (among the keys of `tenant` when given), by `by`; returns its
/// record as revoked. Revoking a revoked key changes nothing and says when it was revoked. Appends a
/// `key_revoke` entry to the audit.
///
/// # Errors
/// [`KeyError::NotFound`] when no key of `tenant` has that id or name; [`KeyError::Store`].
pub async fn revoke_key(
    store: &dyn DynCheckpointStore,
    key: &str,
    tenant: Option<&str>,
    by: &str,
) -> Result<KeyRecord, KeyError> {
    let keys = list_keys(store, tenant).await?;
    // An id names one key; a name, the active key that has it (else the latest revoked one) — one per tenant, so
    // across tenants (a tenant-less admin) a name two tenants use is refused.
    let active: Vec<&KeyRecord> = keys.iter().filter(|k| k.name == key && k.revoked_at_ms.is_none()).collect();
    if active.len() > 1 {
        let tenants: Vec<&str> = active.iter().map(|k| k.tenant.as_str()).collect();
        return Err(KeyError::Invalid {
            field: "key",
            message: format!("several keys are named `{key}` (tenants {}): give the key's id", tenants.join(", ")),
        });
    }
    let found = keys
        .iter()
        .find(|k| k.id == key)
        .or_else(|| active.first().copied())
        .or_else(|| keys.iter().rev().find(|k| k.name == key));
    let Some(found) = found else {
        return Err(KeyError::NotFound(key.to_string()));
    };
    if found.revoked_at_ms.is_some() {
        return Ok(found.clone());
    }
    let revoked = KeyRecord { revoked_at_ms: Some(agentic_engine::now_ms()), ..found.clone() };
    store.put_key_dyn(revoked.clone()).await?;
    audit(store, by, &revoked, "key_revoke").await?;
    Ok(revoked)
}

/// The keys of `tenant` (every key when `None`), revoked ones included, oldest first.
///
/// # Errors
/// [`KeyError::Store`].
pub async fn list_keys(store: &dyn DynCheckpointStore, tenant: Option<&str>) -> Result<Vec<KeyRecord>, KeyError> {
    let mut keys = store.keys_dyn().await?;
    keys.retain(|k| tenant.is_none_or(|t| k.tenant == t));
    Ok(keys)
}

/// A key's record as the API and `agentic keys list --json` show it (never its hash): `{"id", "name",
/// "tenant", "roles", "kinds", "agents", "created_at", "created_by", "revoked_at"}` (times RFC 3339).
pub fn key_json(key: &KeyRecord) -> Value {
    json!({
        "id": key.id,
        "name": key.name,
        "tenant": key.tenant,
        "roles": key.roles,
        "kinds": key.kinds,
        "agents": key.agents,
        "created_at": agentic_engine::rfc3339_ms(key.created_at_ms),
        "created_by": key.created_by,
        "revoked_at": key.revoked_at_ms.map(agentic_engine::rfc3339_ms),
    })
}

/// The SHA-256 of `key`, 64 lowercase hex digits: what the store keeps.
pub(crate) fn hash(key: &str) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(key.as_bytes()))
}

/// The id part of a presented key (`agk_<id>_<secret>` → `<id>`), if it has a key's shape.
pub(crate) fn key_id(presented: &str) -> Option<&str> {
    let rest = presented.strip_prefix(KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hexes = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (id.len() == 13 && id.starts_with('k') && hexes(&id[1..]) && secret.len() == 64 && hexes(secret)).then_some(id)
}

async fn audit(store: &dyn DynCheckpointStore, by: &str, key: &KeyRecord, action: &str) -> Result<(), StoreError> {
    store
        .append_audit_dyn(AuditEntry {
            at_ms: agentic_engine::now_ms(),
            principal: by.to_string(),
            tenant: Some(key.tenant.clone()),
            action: action.to_string(),
            run_id: None,
            detail: json!({"key_id": key.id, "name": key.name, "roles": key.roles}),
        })
        .await
}

fn check(new: &NewKey) -> Result<(), KeyError> {
    let invalid = |field, message: String| Err(KeyError::Invalid { field, message });
    if new.name.trim().is_empty() || new.name.len() > MAX_NAME || new.name.chars().any(char::is_control) {
        return invalid("name", format!("`{}` is not a key name (1 to {MAX_NAME} printable characters)", new.name));
    }
    let tenant_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if new.tenant.is_empty() || new.tenant.len() > MAX_NAME || !new.tenant.chars().all(tenant_char) {
        return invalid(
            "tenant",
            format!("`{}` is not a tenant (1 to {MAX_NAME} letters, digits, `_`, `-`, `.`)", new.tenant),
        );
    }
    if new.roles.is_empty() {
        return invalid("roles", "a key needs at least one role (viewer, approver, operator, admin)".to_string());
    }
    if key_id(&format!("{KEY_PREFIX}{}_{}", new.name, "0".repeat(64))).is_some() {
        return invalid(
            "name",
            format!("`{}` has the shape of a key's id (`k` and 12 hex digits): choose another", new.name),
        );
    }
    let narrowed = !new.kinds.is_empty() || !new.agents.is_empty();
    let field = if new.kinds.is_empty() { "agents" } else { "kinds" };
    match new.roles.iter().max() {
        Some(Role::Approver) => {}
        Some(top) if narrowed && new.roles.contains(&Role::Approver) => {
            return invalid(field, format!("narrows the approver role, but the key's {top} role answers everything"));
        }
        _ if narrowed => {
            return invalid(field, "narrows what the approver role may answer: give the approver role too".to_string());
        }
        _ => {}
    }
    for kind in &new.kinds {
        let known =
            serde_json::from_value::<PendingKind>(Value::String(kind.clone())).is_ok_and(|k| k != PendingKind::Wait);
        if !known {
            return invalid(
                "kinds",
                format!("`{kind}` is not a kind of pending response (human, tool_call, budget, in_doubt)"),
            );
        }
    }
    if let Some(agent) = new.agents.iter().find(|a| a.is_empty() || a.len() > MAX_NAME) {
        return invalid("agents", format!("`{agent}` is not an agent name"));
    }
    Ok(())
}

fn random<const N: usize>() -> Result<[u8; N], KeyError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|e| KeyError::Store(StoreError::backend(format!("cannot draw a random key: {e}"))))?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn key_ids_are_read_only_from_keys_of_the_right_shape() {
        let secret = "0".repeat(64);
        assert_eq!(key_id(&format!("agk_k0123456789ab_{secret}")), Some("k0123456789ab"));
        for wrong in [
            format!("agk_k0123456789a_{secret}"),
            format!("agk_x0123456789ab_{secret}"),
            format!("agk_k0123456789ab_{}", "0".repeat(63)),
            format!("agk_k0123456789AB_{secret}"),
            format!("agx_k0123456789ab_{secret}"),
            "agk_".to_string(),
        ] {
            assert_eq!(key_id(&wrong), None, "{wrong}");
        }
    }

    #[tokio::test]
    async fn a_key_is_kept_hashed_and_revoked_by_name_or_id() {
        let store: agentic_engine::StoreRef = std::sync::Arc::new(agentic_store::MemoryStore::new());
        let new = NewKey { name: "alice".into(), tenant: "acme".into(), roles: vec![Role::Admin], ..NewKey::default() };
        let (key, record) = create_key(&*store, new.clone(), "token").await.unwrap();
        assert_eq!(key_id(&key), Some(record.id.as_str()));
        assert_eq!(record.hash, hash(&key));
        assert!(!serde_json::to_string(&store.keys_dyn().await.unwrap()).unwrap().contains(&key[18..]));
        let again = create_key(&*store, new.clone(), "token").await.unwrap_err();
        assert_eq!(again.to_string(), "name: a key named `alice` exists (revoke it first, or choose another name)");
        assert!(matches!(revoke_key(&*store, "alice", Some("other"), "token").await, Err(KeyError::NotFound(_))));
        let revoked = revoke_key(&*store, "alice", Some("acme"), "token").await.unwrap();
        assert!(revoked.revoked_at_ms.is_some());
        // The name is free again; the first key stays revoked.
        let (_, second) = create_key(&*store, new, "token").await.unwrap();
        assert_eq!(revoke_key(&*store, &revoked.id, None, "token").await.unwrap(), revoked);
        assert!(second.revoked_at_ms.is_none());
        let audit = store.audit_dyn(10).await.unwrap();
        let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["key_create", "key_revoke", "key_create"]);
    }

    #[test]
    fn new_keys_are_checked_field_by_field() {
        let base = NewKey { name: "bot".into(), tenant: "acme".into(), roles: vec![Role::Viewer], ..NewKey::default() };
        let cases = [
            (NewKey { tenant: "ac me".into(), ..base.clone() }, "tenant: `ac me` is not a tenant"),
            (NewKey { roles: vec![], ..base.clone() }, "roles: a key needs at least one role"),
            (NewKey { kinds: vec!["human".into()], ..base.clone() }, "kinds: narrows what the approver role"),
            (
                NewKey { roles: vec![Role::Approver], kinds: vec!["wait".into()], ..base.clone() },
                "kinds: `wait` is not a kind of pending response",
            ),
            (NewKey { name: " ".into(), ..base.clone() }, "name: ` ` is not a key name"),
            (
                NewKey { name: "k0123456789ab".into(), ..base.clone() },
                "name: `k0123456789ab` has the shape of a key's id",
            ),
            (
                NewKey { roles: vec![Role::Approver, Role::Operator], kinds: vec!["human".into()], ..base.clone() },
                "kinds: narrows the approver role, but the key's operator role answers everything",
            ),
        ];
        for (new, expected) in cases {
            let message = check(&new).unwrap_err().to_string();
            assert!(message.starts_with(expected), "{message}");
        }
        assert!(check(&NewKey { roles: vec![Role::Approver], kinds: vec!["tool_call".into()], ..base }).is_ok());
    }
}
