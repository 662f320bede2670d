//! `agentic keys create|list|revoke` (SERVER.md §8): on the store directly (a PostgreSQL store, or a sled store
//! no server holds), or through the server that holds it (`/api/v1/keys`, with an admin's credential).

use serde_json::{Value, json};

use super::args::{KeysArgs, KeysCommand, KeysCreateArgs, KeysListArgs, KeysRevokeArgs};
use super::durable::runtime;
use super::remote::{Remote, RemoteError};
use super::run::{out, print_json};
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, Opened};

/// Runs one `agentic keys` subcommand; the exit code.
pub(crate) fn keys(args: KeysArgs) -> u8 {
    match args.command {
        KeysCommand::Create(args) => create(args),
        KeysCommand::List(args) => list(args),
        KeysCommand::Revoke(args) => revoke(args),
    }
}

/// Who the CLI acts as on the store itself: `cli:<user>`.
fn cli_principal() -> String {
    super::durable::cli_principal(|name| std::env::var(name).ok())
}

fn create(args: KeysCreateArgs) -> u8 {
    let Ok(rt) = runtime() else { return EXIT_FAILED };
    let opened = match super::open(&rt, &args.store.store) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let new = agentic_server::NewKey {
        name: args.name,
        tenant: args.tenant,
        roles: args.roles,
        kinds: args.kinds,
        agents: args.agents,
    };
    // Whether the store is left without an active admin key (said when it is: read on the store only).
    let mut no_admin = None;
    let created = match opened {
        Opened::Local(store) => match rt.block_on(agentic_server::create_key(store.as_ref(), new, &cli_principal())) {
            Ok((key, record)) => {
                let keys = rt.block_on(agentic_server::list_keys(store.as_ref(), None)).unwrap_or_default();
                let admin = |k: &agentic_engine::KeyRecord| k.roles.contains(&agentic_engine::Role::Admin);
                no_admin = Some(!keys.iter().any(|k| k.revoked_at_ms.is_none() && admin(k)));
                let mut shown = agentic_server::key_json(&record);
                shown["key"] = Value::String(key);
                shown
            }
            Err(e) => return key_failed(&e),
        },
        Opened::Server(remote) => {
            let body = json!({"name": new.name, "tenant": new.tenant, "roles": new.roles, "kinds": new.kinds,
                              "agents": new.agents});
            match rt.block_on(remote.post("/api/v1/keys", &body)) {
                Ok((201, shown)) => shown,
                Ok((status, body)) => return refused(&remote, status, &body),
                Err(e) => return e.report(),
            }
        }
    };
    let admin = strings(&created["roles"]).contains(&"admin");
    if args.json {
        print_json(&created);
        return EXIT_OK;
    }
    out(created["key"].as_str().unwrap_or_default());
    if !admin && matches!(no_admin, Some(true)) {
        eprintln!(
            "warning: no key is an admin: once a server holds the store without a token, no one can manage keys \
             through it (create one with --role admin)"
        );
    }
    eprintln!(
        "created key `{}` ({}): tenant {}, roles {}{}; it is shown once — keep it, the store keeps only its hash",
        created["name"].as_str().unwrap_or_default(),
        created["id"].as_str().unwrap_or_default(),
        created["tenant"].as_str().unwrap_or_default(),
        strings(&created["roles"]).join(", "),
        narrowing(&created),
    );
    EXIT_OK
}

fn list(args: KeysListArgs) -> u8 {
    let Ok(rt) = runtime() else { return EXIT_FAILED };
    let opened = match super::open(&rt, &args.store.store) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let keys: Vec<Value> = match opened {
        Opened::Local(store) => match rt.block_on(agentic_server::list_keys(store.as_ref(), None)) {
            Ok(keys) => keys.iter().map(agentic_server::key_json).collect(),
            Err(e) => return key_failed(&e),
        },
        Opened::Server(remote) => match rt.block_on(remote.get::<Value>("/api/v1/keys")) {
            Ok(Some(body)) => body["keys"].as_array().cloned().unwrap_or_default(),
            Ok(None) => return RemoteError::Failed("the server has no /api/v1/keys".into()).report(),
            Err(e) => return e.report(),
        },
    };
    if args.json {
        print_json(&Value::Array(keys));
        return EXIT_OK;
    }
    if keys.is_empty() {
        eprintln!("no keys in store {}", super::store_label(&args.store.store));
        return EXIT_OK;
    }
    let width = |field: &str, title: &str| {
        keys.iter().map(|k| k[field].as_str().map_or(0, str::len)).max().unwrap_or(0).max(title.len())
    };
    let (id_w, name_w, tenant_w) = (width("id", "ID"), width("name", "NAME"), width("tenant", "TENANT"));
    out(&format!(
        "{:id_w$}  {:name_w$}  {:tenant_w$}  {:24}  {:20}  REVOKED",
        "ID", "NAME", "TENANT", "ROLES", "CREATED"
    ));
    for k in &keys {
        let roles = format!("{}{}", strings(&k["roles"]).join(","), narrowing(k));
        out(&format!(
            "{:id_w$}  {:name_w$}  {:tenant_w$}  {:24}  {:20}  {}",
            k["id"].as_str().unwrap_or_default(),
            k["name"].as_str().unwrap_or_default(),
            k["tenant"].as_str().unwrap_or_default(),
            roles,
            k["created_at"].as_str().map_or("", |t| t.get(..19).unwrap_or(t)),
            k["revoked_at"].as_str().map_or("-", |t| t.get(..19).unwrap_or(t)),
        ));
    }
    EXIT_OK
}

fn revoke(args: KeysRevokeArgs) -> u8 {
    let Ok(rt) = runtime() else { return EXIT_FAILED };
    let opened = match super::open(&rt, &args.store.store) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let revoked = match opened {
        Opened::Local(store) => {
            match rt.block_on(agentic_server::revoke_key(store.as_ref(), &args.key, None, &cli_principal())) {
                Ok(record) => agentic_server::key_json(&record),
                Err(e) => return key_failed(&e),
            }
        }
        Opened::Server(remote) => {
            let path = format!("/api/v1/keys/{}", super::remote::segment(&args.key));
            match rt.block_on(remote.delete(&path)) {
                Ok((200, body)) => body,
                Ok((status, body)) => return refused(&remote, status, &body),
                Err(e) => return e.report(),
            }
        }
    };
    eprintln!(
        "revoked key `{}` ({}) at {}",
        revoked["name"].as_str().unwrap_or_default(),
        revoked["id"].as_str().unwrap_or_default(),
        revoked["revoked_at"].as_str().unwrap_or_default()
    );
    EXIT_OK
}

/// ` (answers: kinds …, agents …)` for a narrowed approver, else nothing.
fn narrowing(key: &Value) -> String {
    let (kinds, agents) = (strings(&key["kinds"]), strings(&key["agents"]));
    let mut parts = Vec::new();
    if !kinds.is_empty() {
        parts.push(format!("kinds {}", kinds.join(",")));
    }
    if !agents.is_empty() {
        parts.push(format!("agents {}", agents.join(",")));
    }
    if parts.is_empty() { String::new() } else { format!(" (answers {})", parts.join("; ")) }
}

fn strings(list: &Value) -> Vec<&str> {
    list.as_array().map(|l| l.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// Prints why a key could not be created, listed or revoked on the store: 64 for a wrong field, else 1.
fn key_failed(e: &agentic_server::KeyError) -> u8 {
    eprintln!("error: {e}");
    match e {
        agentic_server::KeyError::Invalid { .. } => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

/// Prints the server's refusal: 64 for a wrong field (`400`), 77 for a role without the right (`403`), else 1.
fn refused(remote: &Remote, status: u16, body: &Value) -> u8 {
    let why = body["error"].as_str().map_or_else(|| format!("status {status}"), str::to_string);
    eprintln!("error: the server at {} refused: {why}", remote.url());
    match status {
        400 => EXIT_USAGE,
        403 => super::EXIT_REFUSED,
        _ => EXIT_FAILED,
    }
}
