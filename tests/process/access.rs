//! Keys, roles, tenants and the audit (SERVER.md §8) on a real `agentic serve`, on sled and on PostgreSQL:
//! keys made with `agentic keys create` (through the server on sled, on the database directly on PostgreSQL),
//! another tenant's run `404` on every surface, each role's rights (`403` otherwise), an approver narrowed to
//! tool calls refused a human step, the audit saying who answered, a revoked key refused.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::binary::{Cli, Serve, Served, stderr, stdout};

/// A sequence of a compute, a human step (`human-review`) and a compute.
const APPROVAL: &str = include_str!("../fixtures/approval.yaml");

const TOKEN: &str = "root-token-for-tests";

/// `agentic keys create` on `store` with the server's token in the environment; the key it prints.
fn create_key(store: &std::path::Path, name: &str, tenant: &str, extra: &[&str]) -> String {
    let mut args = vec!["keys", "create", "--name", name, "--tenant", tenant];
    args.extend_from_slice(extra);
    let o = Cli::new(args).store(store).env("AGENTIC_TOKEN", TOKEN).output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = stdout(&o).trim().to_string();
    assert!(key.starts_with("agk_") && key.len() == 4 + 13 + 1 + 64, "{key}");
    assert!(stderr(&o).contains(&format!("created key `{name}`")), "{}", stderr(&o));
    key
}

async fn call(
    served: &Served,
    key: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", served.url));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn wait_status(served: &Served, key: &str, run_id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, run) = call(served, Some(key), Method::GET, &format!("/api/v1/runs/{run_id}"), None).await;
        if code == StatusCode::OK && run["status"] == json!(status) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {run_id} is not {status}: {code} {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The whole of SERVER.md §8's keys, roles and tenants against one server on `store`.
async fn tenants_and_roles(store: &std::path::Path) {
    let served = Serve::on(store).token(Some(TOKEN)).specs(&[("approval.yaml", APPROVAL)]).start();
    let a_admin = create_key(store, "acme-admin", "acme", &["--role", "admin"]);
    let a_viewer = create_key(store, "vic", "acme", &["--role", "viewer"]);
    let a_tools = create_key(store, "tom", "acme", &["--role", "approver", "--kinds", "tool_call"]);
    let a_human = create_key(store, "ann", "acme", &["--role", "approver", "--kinds", "human", "--agents", "review"]);
    let a_op = create_key(store, "olga", "acme", &["--role", "operator"]);
    let b_admin = create_key(store, "globex-admin", "globex", &["--role", "admin"]);

    // Keys take effect on every server within a second (this one reads the store again).
    let deadline = Instant::now() + Duration::from_secs(5);
    while call(&served, Some(&b_admin), Method::GET, "/api/v1/runs", None).await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "the new keys are not accepted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let start = json!({"spec_name": "approval", "run_id": "order-1", "inputs": {"input": "data"}});
    let (code, body) = call(&served, Some(&a_op), Method::POST, "/api/v1/runs", Some(start.clone())).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let run = wait_status(&served, &a_op, "order-1", "suspended").await;
    let hash = run["spec"]["hash"].as_str().unwrap().to_string();

    // Tenant B's admin: the run does not exist, on every surface.
    let b = Some(b_admin.as_str());
    let (code, list) = call(&served, b, Method::GET, "/api/v1/runs", None).await;
    assert_eq!((code, list["runs"].clone()), (StatusCode::OK, json!([])));
    let (code, list) = call(&served, b, Method::GET, "/api/v1/store/runs", None).await;
    assert_eq!((code, list), (StatusCode::OK, json!([])));
    for (method, path, body) in [
        (Method::GET, "/api/v1/runs/order-1", None),
        (Method::GET, "/api/v1/runs/order-1/events", None),
        (Method::GET, "/api/v1/runs/order-1/report", None),
        (Method::GET, "/api/v1/runs/order-1/calls", None),
        (Method::GET, "/api/v1/store/runs/order-1", None),
        (Method::GET, "/api/v1/store/runs/order-1/records", None),
        (Method::GET, "/api/v1/store/runs/order-1/image", None),
        (Method::GET, "/runs/order-1", None),
        (Method::POST, "/api/v1/runs/order-1/responses/human-review", Some(json!({"value": "EVIL"}))),
        (Method::POST, "/api/v1/runs/order-1/cancel", None),
        (Method::POST, "/api/v1/runs/order-1/fork", Some(json!({"at_seq": 1}))),
        (Method::POST, "/api/v1/runs/order-1/resume", None),
    ] {
        let (code, body) = call(&served, b, method.clone(), path, body).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{method} {path}: {body}");
    }
    let (code, _) = call(&served, b, Method::GET, &format!("/api/v1/store/specs/{hash}"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    // Nor can B continue it, or learn its status, through a new run with its id.
    let turn = json!({"spec_name": "approval", "run_id": "order-1", "new_turn": true, "inputs": {"input": "evil"}});
    let (code, body) = call(&served, b, Method::POST, "/api/v1/runs", Some(turn.clone())).await;
    assert_eq!((code, &body["error"]), (StatusCode::CONFLICT, &json!("run_id: run `order-1` already exists")));
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "order-1"}});
    let (code, answer) = call(&served, b, Method::POST, "/a2a/approval", Some(get)).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(answer["error"]["message"], json!("no task `order-1`"), "{answer}");
    let (_, inbox) = call(&served, b, Method::GET, "/inbox.json", None).await;
    assert_eq!(inbox["items"], json!([]));

    // Tenant A: each role as the table says.
    let (code, run) = call(&served, Some(&a_viewer), Method::GET, "/api/v1/runs/order-1", None).await;
    assert_eq!((code, run["status"].clone()), (StatusCode::OK, json!("suspended")));
    let answer = Some(json!({"value": "APPROVED"}));
    for (key, method, path, body) in [
        (&a_viewer, Method::POST, "/api/v1/runs/order-1/responses/human-review", answer.clone()),
        (&a_viewer, Method::POST, "/api/v1/runs/order-1/cancel", None),
        (&a_viewer, Method::POST, "/api/v1/runs", Some(start.clone())),
        (&a_tools, Method::POST, "/api/v1/runs/order-1/cancel", None),
        (&a_human, Method::POST, "/api/v1/runs/order-1/fork", Some(json!({"at_seq": 1}))),
        (&a_op, Method::GET, "/api/v1/keys", None),
        (&a_op, Method::GET, "/api/v1/audit", None),
    ] {
        let (code, body) = call(&served, Some(key), method.clone(), path, body).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{method} {path}: {body}");
    }
    let (code, body) =
        call(&served, Some(&a_tools), Method::POST, "/api/v1/runs/order-1/responses/human-review", answer.clone())
            .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["error"],
        json!("key:tom may answer pending responses of kind tool_call only; `human-review` is of kind human")
    );
    // The narrowed approver's inbox offers nothing it may not answer; the other approver's offers the step.
    let (_, inbox) = call(&served, Some(&a_tools), Method::GET, "/inbox.json", None).await;
    assert_eq!(inbox["items"], json!([]));
    let (_, inbox) = call(&served, Some(&a_human), Method::GET, "/inbox.json", None).await;
    assert_eq!(inbox["items"][0]["id"], json!("human-review"));

    // No credential, or a wrong one: 401.
    let (code, _) = call(&served, None, Method::GET, "/api/v1/runs", None).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    let last = if a_admin.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{last}", &a_admin[..a_admin.len() - 1]);
    let (code, _) = call(&served, Some(&forged), Method::GET, "/api/v1/runs", None).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);

    let (code, body) =
        call(&served, Some(&a_human), Method::POST, "/api/v1/runs/order-1/responses/human-review", answer).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    let run = wait_status(&served, &a_viewer, "order-1", "completed").await;
    assert_eq!(run["output"], json!("Final: PROCESSED: data | APPROVED"));
    // Who answered: on the run, its page and its report.
    assert_eq!(run["answered_by"], json!({"human-review": "key:ann"}));
    let (_, page) = call(&served, Some(&a_viewer), Method::GET, "/runs/order-1", None).await;
    let page = page.as_str().unwrap().to_string();
    assert!(page.contains(r#"response <code>human-review</code> by <span class="by">key:ann</span>"#), "{page}");
    let (_, report) = call(&served, Some(&a_viewer), Method::GET, "/api/v1/runs/order-1/report", None).await;
    assert!(report.as_str().unwrap().contains("by key:ann"), "the report does not say who answered");
    // Completed, it takes no new turn from B either.
    let (code, body) = call(&served, b, Method::POST, "/api/v1/runs", Some(turn)).await;
    assert_eq!((code, &body["error"]), (StatusCode::CONFLICT, &json!("run_id: run `order-1` already exists")));
    // The tenant-less token sees every tenant's runs.
    let (code, _) = call(&served, Some(TOKEN), Method::GET, "/api/v1/runs/order-1", None).await;
    assert_eq!(code, StatusCode::OK);

    // The audit: tenant A's admin sees who answered; tenant B's sees none of it.
    let (code, audit) = call(&served, Some(&a_admin), Method::GET, "/api/v1/audit", None).await;
    assert_eq!(code, StatusCode::OK, "{audit}");
    let entries = audit["entries"].as_array().unwrap();
    let answered = entries.iter().find(|e| e["action"] == json!("answer")).unwrap();
    assert_eq!(
        (&answered["principal"], &answered["tenant"], &answered["run_id"], &answered["detail"]),
        (&json!("key:ann"), &json!("acme"), &json!("order-1"), &json!({"response_id": "human-review"}))
    );
    let created: Vec<&Value> =
        entries.iter().filter(|e| e["action"] == json!("key_create")).map(|e| &e["detail"]["name"]).collect();
    assert_eq!(created, [&json!("olga"), &json!("ann"), &json!("tom"), &json!("vic"), &json!("acme-admin")]);
    let (_, audit) = call(&served, b, Method::GET, "/api/v1/audit", None).await;
    let seen: Vec<&Value> = audit["entries"].as_array().unwrap().iter().map(|e| &e["action"]).collect();
    assert_eq!(seen, [&json!("key_create")], "{audit}");

    // Key names are each tenant's own.
    let own = json!({"name": "vic", "roles": ["viewer"]});
    let (code, body) = call(&served, b, Method::POST, "/api/v1/keys", Some(own)).await;
    assert_eq!((code, &body["tenant"]), (StatusCode::CREATED, &json!("globex")), "{body}");
    // Keys are listed without their secrets or hashes; a tenant's admin lists its tenant's only.
    let o = Cli::new(["keys", "list", "--json"]).store(store).env("AGENTIC_TOKEN", TOKEN).output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 7);
    assert!(!stdout(&o).contains(&a_admin[18..]) && !stdout(&o).contains("hash"), "{}", stdout(&o));
    let (_, keys) = call(&served, b, Method::GET, "/api/v1/keys", None).await;
    let names: Vec<&Value> = keys["keys"].as_array().unwrap().iter().map(|k| &k["name"]).collect();
    assert_eq!(names, [&json!("globex-admin"), &json!("vic")]);
    // Tenant B's admin cannot make a key of tenant A, nor revoke one.
    let make = json!({"name": "mole", "tenant": "acme", "roles": ["admin"]});
    let (code, _) = call(&served, b, Method::POST, "/api/v1/keys", Some(make)).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let a_vic = listed.as_array().unwrap().iter().find(|k| k["name"] == "vic" && k["tenant"] == "acme").unwrap();
    let a_vic = a_vic["id"].as_str().unwrap().to_string();
    let (code, _) = call(&served, b, Method::DELETE, &format!("/api/v1/keys/{a_vic}"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // A revoked key is refused (on every server within a second). Two tenants' `vic`: the id says which.
    let o = Cli::new(["keys", "revoke", "vic"]).store(store).env("AGENTIC_TOKEN", TOKEN).output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("key: several keys are named `vic` (tenants acme, globex): give the key's id"),
        "{}",
        stderr(&o)
    );
    let o = Cli::new(["keys", "revoke", &a_vic]).store(store).env("AGENTIC_TOKEN", TOKEN).output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("revoked key `vic` (k"), "{}", stderr(&o));
    let deadline = Instant::now() + Duration::from_secs(5);
    while call(&served, Some(&a_viewer), Method::GET, "/api/v1/runs", None).await.0 != StatusCode::UNAUTHORIZED {
        assert!(Instant::now() < deadline, "the revoked key is still accepted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The CLI through the server with a viewer's key reads, and is refused what it may not do (exit 77).
    if served.store.is_dir() {
        let o = Cli::new(["runs", "--json"]).store(store).env("AGENTIC_KEY", &b_admin).output();
        assert_eq!((o.status.code(), stdout(&o).trim()), (Some(0), "[]"), "{}", stderr(&o));
        let o = Cli::new(["keys", "create", "--name", "x", "--tenant", "acme", "--role", "viewer"])
            .store(store)
            .env("AGENTIC_KEY", &a_op)
            .output();
        assert_eq!(o.status.code(), Some(77), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("key:olga (role operator) may not do this: it needs the role admin"),
            "{}",
            stderr(&o)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_roles_and_the_audit_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    tenants_and_roles(&dir.path().join("store")).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_roles_and_the_audit_on_postgres() {
    let Some(url) = crate::pg::fresh_database("access_tenants").await else { return };
    tenants_and_roles(std::path::Path::new(&url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_token_asks_for_a_key_once_one_exists() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // The CLI on the store answers a run itself: the audit says so, by the machine's user.
    let spec = dir.path().join("approval.yaml");
    std::fs::write(&spec, APPROVAL).unwrap();
    let o = Cli::new(["run", spec.to_str().unwrap(), "--input", "input=x", "--memory-id", "local-1"])
        .store(&store)
        .output();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = Cli::new(["respond", "local-1", "OK"]).store(&store).env("USER", "carol").output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let served = Serve::on(&store).start();
    let (code, _) = call(&served, None, Method::GET, "/api/v1/runs", None).await;
    assert_eq!(code, StatusCode::OK);
    // Open to programs on this machine, not to other sites' pages: a browser says where a request comes from.
    let start = json!({"spec": APPROVAL, "run_id": "evil-1", "inputs": {"input": "x"}});
    for (header, value) in [("origin", "https://evil.example"), ("sec-fetch-site", "cross-site")] {
        let response = reqwest::Client::new()
            .post(format!("{}/api/v1/runs", served.url))
            .header(header, value)
            .header("content-type", "text/plain")
            .body(start.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{header}: {value}");
    }
    let same = reqwest::Client::new()
        .post(format!("{}/api/v1/runs", served.url))
        .header("origin", served.url.clone())
        .json(&start)
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), StatusCode::CREATED);
    let (_, audit) = call(&served, None, Method::GET, "/api/v1/audit", None).await;
    let entry = &audit["entries"][0];
    assert_eq!(
        (&entry["principal"], &entry["action"], &entry["run_id"], &entry["detail"]),
        (&json!("cli:carol"), &json!("answer"), &json!("local-1"), &json!({"response_id": "human-review"})),
        "{audit}"
    );
    // The first key is made by whoever reaches the open server (on loopback: the machine's user).
    let o =
        Cli::new(["keys", "create", "--name", "root", "--tenant", "main", "--role", "admin"]).store(&store).output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = stdout(&o).trim().to_string();
    let (code, body) = call(&served, None, Method::GET, "/api/v1/runs", None).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED, "{body}");
    let (code, _) = call(&served, Some(&key), Method::GET, "/api/v1/runs", None).await;
    assert_eq!(code, StatusCode::OK);
    // The CLI without a key is refused, with what to do.
    let o = Cli::new(["runs"]).store(&store).output();
    assert_eq!(o.status.code(), Some(77), "{}", stderr(&o));
    assert!(stderr(&o).contains("it needs an API key; set $AGENTIC_KEY to one"), "{}", stderr(&o));
    // Usage errors name the field.
    let o = Cli::new(["keys", "create", "--name", " ", "--tenant", "main", "--role", "viewer"])
        .store(&store)
        .env("AGENTIC_KEY", &key)
        .output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).contains("refused: name: ` ` is not a key name"), "{}", stderr(&o));
    // A tenant's admin makes keys of its own tenant only.
    let o = Cli::new(["keys", "create", "--name", "x", "--tenant", "other", "--role", "viewer"])
        .store(&store)
        .env("AGENTIC_KEY", &key)
        .output();
    assert_eq!(o.status.code(), Some(77), "{}", stderr(&o));
    assert!(stderr(&o).contains("tenant: key:root creates keys of tenant `main` only, not `other`"), "{}", stderr(&o));
    let o = Cli::new(["keys", "create", "--name", "x", "--tenant", "a", "--role", "owner"]).store(&store).output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown role `owner` (expected viewer, approver, operator or admin)"),
        "{}",
        stderr(&o)
    );
}

/// Rows of `table` the connection `client` sees, by whose they are (`owner` an SQL expression naming it).
#[cfg(feature = "postgres")]
async fn rows_by_owner(client: &tokio_postgres::Client, table: &str, owner: &str) -> Vec<(String, i64)> {
    let sql = format!("SELECT coalesce({owner}, '-'), count(*) FROM {table} GROUP BY 1 ORDER BY 1");
    let rows = client.query(&sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// SERVER.md §8 on PostgreSQL: the database itself keeps tenants apart. The server runs as a role that is not a
/// superuser (over TLS, `sslmode=require`); a connection of that role in tenant B's scope reads none of tenant
/// A's rows from any table, and one that sets no tenant reads nothing at all.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_tenants_apart_without_the_servers_filter() {
    let Some(admin_url) = crate::pg::server_url("rls") else { return };
    let unique = format!(
        "{}_{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
    );
    let (role, db) = (format!("agentic_app_{unique}"), format!("agentic_rls_{unique}"));
    let (admin, connection) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {db} OWNER {role}")).await.unwrap();
    let url = crate::pg::with_dbname(&admin_url.replacen("://agentic@", &format!("://{role}@"), 1), &db);
    let server_url = format!("{url}?sslmode=require");

    // Two tenants' runs (of two spec texts), schedules and keys, through the server.
    let a_spec = format!("# acme's\n{APPROVAL}");
    let served =
        Serve::on(&server_url).token(Some(TOKEN)).specs(&[("approval.yaml", APPROVAL), ("acme.yaml", &a_spec)]).start();
    let make = |name: &str, tenant: &str| json!({"name": name, "tenant": tenant, "roles": ["operator"]});
    let (_, a) = call(&served, Some(TOKEN), Method::POST, "/api/v1/keys", Some(make("a-op", "acme"))).await;
    let (_, b) = call(&served, Some(TOKEN), Method::POST, "/api/v1/keys", Some(make("b-op", "globex"))).await;
    let (a, b) = (a["key"].as_str().unwrap().to_string(), b["key"].as_str().unwrap().to_string());
    for (key, spec, run) in [(&a, "acme", "a-1"), (&b, "approval", "b-1")] {
        let start = json!({"spec_name": spec, "run_id": run, "inputs": {"input": run}});
        let (code, body) = call(&served, Some(key), Method::POST, "/api/v1/runs", Some(start)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
        wait_status(&served, key, run, "suspended").await;
        let schedule =
            json!({"id": format!("{run}-nightly"), "spec_name": spec, "cron": "0 2 * * *", "inputs": {"input": "x"}});
        let (code, body) = call(&served, Some(key), Method::POST, "/api/v1/schedules", Some(schedule)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    // Each reads its own run through the database's view of its tenant (state from the journal), not the other's.
    let (code, run) = call(&served, Some(&a), Method::GET, "/api/v1/runs/a-1", None).await;
    assert_eq!((code, run["state"]["processed_data"].clone()), (StatusCode::OK, json!("PROCESSED: a-1")));
    let (code, _) = call(&served, Some(&b), Method::GET, "/api/v1/runs/a-1", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    // Every read of a tenant's key goes through the database's view of its tenant: they all work.
    let hash = run["spec"]["hash"].as_str().unwrap();
    let (code, spec) = call(&served, Some(&a), Method::GET, &format!("/api/v1/store/specs/{hash}"), None).await;
    assert_eq!((code, spec["text"].as_str().map(|t| t.starts_with("# acme's"))), (StatusCode::OK, Some(true)));
    let (code, report) = call(&served, Some(&a), Method::GET, "/api/v1/runs/a-1/report", None).await;
    let report = report.as_str().unwrap_or_default().to_string();
    assert_eq!(code, StatusCode::OK);
    assert!(report.contains("id=\"topology-svg\""), "the report draws the topology from the archived spec: {report}");
    let (code, calls) = call(&served, Some(&a), Method::GET, "/api/v1/runs/a-1/calls", None).await;
    assert_eq!((code, calls), (StatusCode::OK, json!([])));
    let (_, schedules) = call(&served, Some(&a), Method::GET, "/api/v1/schedules", None).await;
    let ids: Vec<&Value> = schedules["schedules"].as_array().unwrap().iter().map(|s| &s["id"]).collect();
    assert_eq!(ids, [&json!("a-1-nightly")]);
    let (_, inbox) = call(&served, Some(&a), Method::GET, "/inbox.json", None).await;
    let waiting: Vec<&Value> = inbox["items"].as_array().unwrap().iter().map(|i| &i["run_id"]).collect();
    assert_eq!(waiting, [&json!("a-1")]);
    let (_, runs) = call(&served, Some(&b), Method::GET, "/api/v1/store/runs", None).await;
    let ids: Vec<&Value> = runs.as_array().unwrap().iter().map(|r| &r["run_id"]).collect();
    assert_eq!(ids, [&json!("b-1")]);

    // The server's role, on its own connection.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let superuser: bool =
        client.query_one("SELECT rolsuper FROM pg_roles WHERE rolname = current_user", &[]).await.unwrap().get(0);
    assert!(!superuser);
    // Snapshots of both runs (the short runs took none), written in the system scope.
    client
        .batch_execute(
            "SET agentic.tenant = '*';
         INSERT INTO agentic_snapshots (run_id, seq, history_len, head) VALUES ('a-1', 1, 0, '{}'), ('b-1', 1, 0, '{}');
         INSERT INTO agentic_snapshot_chunks (run_id, seq, chunk) VALUES ('a-1', 1, '[]'), ('b-1', 1, '[]');",
        )
        .await
        .unwrap();
    let a_hash = run["spec"]["hash"].as_str().unwrap().to_string();
    let owners = [
        ("agentic_runs", "CASE WHEN run_id LIKE 'a-%' THEN 'acme' ELSE 'globex' END".to_string()),
        ("agentic_journal", "CASE WHEN run_id LIKE 'a-%' THEN 'acme' ELSE 'globex' END".to_string()),
        ("agentic_snapshots", "CASE WHEN run_id LIKE 'a-%' THEN 'acme' ELSE 'globex' END".to_string()),
        ("agentic_snapshot_chunks", "CASE WHEN run_id LIKE 'a-%' THEN 'acme' ELSE 'globex' END".to_string()),
        ("agentic_specs", format!("CASE WHEN hash = '{a_hash}' THEN 'acme' ELSE 'globex' END")),
        ("agentic_schedules", "record->>'tenant'".to_string()),
        ("agentic_keys", "record->>'tenant'".to_string()),
        ("agentic_audit", "tenant".to_string()),
    ];
    for (table, owner) in &owners {
        let all = rows_by_owner(&client, table, owner).await;
        assert_eq!(
            all.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
            ["acme", "globex"],
            "{table} in the system scope: {all:?}"
        );
    }
    client.batch_execute("SET agentic.tenant = 'tenant:globex'").await.unwrap();
    for (table, owner) in &owners {
        let seen = rows_by_owner(&client, table, owner).await;
        assert_eq!(
            seen.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
            ["globex"],
            "{table} in tenant globex's scope: {seen:?}"
        );
    }
    // A query that forgets the tenant returns nothing.
    let (fresh, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    for (table, owner) in &owners {
        assert_eq!(rows_by_owner(&fresh, table, owner).await, [], "{table} without a tenant");
    }
    drop(served);
}

/// One MCP request to `served` with `key` (and the session `session` when given): its status and the session
/// its answer names.
async fn mcp(
    served: &Served,
    key: &str,
    method: Method,
    session: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Option<String>) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}/mcp", served.url))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let opened = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    (response.status(), opened)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_is_its_openers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let served = Serve::on(&store).token(Some(TOKEN)).specs(&[("approval.yaml", APPROVAL)]).start();
    let a_op = create_key(&store, "olga", "acme", &["--role", "operator"]);
    let b_view = create_key(&store, "gus", "globex", &["--role", "viewer"]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                      "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}});
    let (code, session) = mcp(&served, &a_op, Method::POST, None, Some(init)).await;
    assert_eq!(code, StatusCode::OK);
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (code, _) = mcp(&served, &a_op, Method::POST, Some(&session), Some(initialized)).await;
    assert!(code.is_success(), "{code}");
    // Another principal naming the session finds none: it can neither use nor end it.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (code, _) = mcp(&served, &b_view, Method::POST, Some(&session), Some(list.clone())).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = mcp(&served, &b_view, Method::DELETE, Some(&session), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = mcp(&served, TOKEN, Method::DELETE, Some(&session), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "not even the token's holder");
    // Its opener goes on, and ends it.
    let (code, _) = mcp(&served, &a_op, Method::POST, Some(&session), Some(list)).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = mcp(&served, &a_op, Method::DELETE, Some(&session), None).await;
    assert!(code.is_success(), "{code}");
}
