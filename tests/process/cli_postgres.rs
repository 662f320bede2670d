//! The CLI on a PostgreSQL store (`--store postgres://…`, `AGENTIC_STORE`), every command a new process of
//! the real binary: a run suspended on a human step, answered and resumed; a run killed with SIGKILL after
//! each step, resumed to the uncrashed result; the store's errors. Each test uses a fresh database of the
//! server `AGENTIC_TEST_PG_URL` names (`scripts/pg-test-server.sh`); without it the tests are skipped with a
//! message, unless `AGENTIC_REQUIRE_PG=1` (CI), when they fail.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Output;

use serde_json::{Value, json};

use crate::binary::{Cli, stderr, stdout};
use crate::pg;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A fresh database's URL, or `None` when the PostgreSQL tests are skipped.
fn database(test: &str) -> Option<String> {
    tokio::runtime::Runtime::new().unwrap().block_on(pg::fresh_database(test))
}

/// The binary on store `store` (through `AGENTIC_STORE`), killed after step `kill` when given.
fn agentic(store: &str, kill: Option<u64>, args: &[&str]) -> Output {
    // Short leases: a resume after a `kill -9` waits for the dead process's lease to expire.
    Cli::new(args).store(store).env("AGENTIC_LEASE_MS", "300").kill_after(kill).output()
}

fn json_out(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

#[test]
fn a_human_step_is_answered_and_resumed_in_new_processes() {
    let Some(url) = database("human_step") else { return };
    let spec = format!("{FIXTURES}/approval.yaml");
    // `--store URL` here, `AGENTIC_STORE` below: both name the store.
    let o =
        Cli::new(["run", &spec, "--input", "input=data", "--memory-id", "order-1", "--json", "--store", &url]).output();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        json_out(&o),
        json!({"run_id": "order-1", "status": "suspended", "output": null,
               "pending": [{"id": "human-review", "prompt": "Approve PROCESSED: data?", "agent": "review"}]})
    );
    let o = agentic(&url, None, &["runs", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_out(&o)[0]["status"], json!("suspended"));

    let o = agentic(&url, None, &["respond", "order-1", "APPROVED"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = agentic(&url, None, &["resume", "order-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Final: PROCESSED: data | APPROVED\n");

    let shown = json_out(&agentic(&url, None, &["show", "order-1", "--json"]));
    assert_eq!(shown["status"], json!("completed"));
    assert_eq!(shown["state"]["approval"], json!("APPROVED"));
    let paths: Vec<&str> = shown["history"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["root/0", "root/1", "root/2", "root"], "each agent completed once");

    let report = tempfile::tempdir().unwrap();
    let html = report.path().join("r.html");
    let o = agentic(&url, None, &["report", "order-1", "-o", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&html).unwrap().contains("order-1"));

    // A fork before the human step asks again; its own answer completes it.
    let o = agentic(&url, None, &["fork", "order-1", "--at", "2", "--memory-id", "order-2", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(agentic(&url, None, &["respond", "order-2", "REJECTED"]).status.code(), Some(0));
    let o = agentic(&url, None, &["resume", "order-2"]);
    assert_eq!(stdout(&o), "Final: PROCESSED: data | REJECTED\n", "{}", stderr(&o));
    let ids: Vec<Value> = json_out(&agentic(&url, None, &["runs", "--json"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].clone())
        .collect();
    assert_eq!(ids, [json!("order-2"), json!("order-1")]);

    let o = agentic(&url, None, &["show", "nobody"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!("error: no run `nobody` in store {url}; list its runs with")),
        "{}",
        stderr(&o)
    );
}

/// How many times each agent path completed.
fn completions(shown: &Value) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for h in shown["history"].as_array().unwrap() {
        *counts.entry(h["path"].as_str().unwrap().to_string()).or_default() += 1;
    }
    counts
}

#[test]
fn a_run_killed_after_any_step_resumes_to_the_uncrashed_result() {
    let Some(url) = database("kill_9") else { return };
    let spec = format!("{FIXTURES}/crash.yaml");
    let show = |id: &str| json_out(&agentic(&url, None, &["show", id, "--json"]));
    let o = agentic(&url, None, &["run", &spec, "--input", "input=x", "--memory-id", "clean"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "B(A(x))+C(A(x))+3\n");
    let clean = show("clean");
    let steps = clean["steps"].as_u64().unwrap();
    assert_eq!(steps, 11);
    // The root's last step and its completion commit with the final record: a crash right after either finds
    // the run completed.
    for k in [steps - 1, steps] {
        let id = format!("crash-{k}");
        let o = agentic(&url, Some(k), &["run", &spec, "--input", "input=x", "--memory-id", &id]);
        assert_eq!(o.status.code(), None, "k={k}: killed by a signal; {}", stderr(&o));
        let crashed = show(&id);
        assert_eq!((&crashed["status"], &crashed["steps"]), (&Value::from("completed"), &clean["steps"]), "k={k}");
        assert_eq!(crashed["state"], clean["state"]);
    }
    for k in 1..steps - 1 {
        let id = format!("crash-{k}");
        let o = agentic(&url, Some(k), &["run", &spec, "--input", "input=x", "--memory-id", &id]);
        assert_eq!(o.status.code(), None, "k={k}: killed by a signal; {}", stderr(&o));
        let crashed = show(&id);
        assert_eq!(crashed["status"], "running", "k={k}");
        assert_eq!(crashed["steps"].as_u64(), Some(k), "k={k}: steps 1..=k are committed");
        let o = agentic(&url, None, &["resume", &id]);
        assert_eq!(o.status.code(), Some(0), "k={k}: {}", stderr(&o));
        assert_eq!(stdout(&o), "B(A(x))+C(A(x))+3\n", "k={k}");
        let resumed = show(&id);
        assert_eq!(resumed["state"], clean["state"], "k={k}");
        assert_eq!(resumed["steps"], clean["steps"], "k={k}: no step journaled twice");
        assert_eq!(completions(&resumed), completions(&clean), "k={k}: no completed agent ran twice");
    }
}

#[test]
fn an_unreachable_server_is_an_error_naming_the_store_without_its_password() {
    let url = "postgres://agentic:hunter2@127.0.0.1:1/runs?connect_timeout=5";
    let unreachable = "error: store postgres://agentic:***@127.0.0.1:1/runs?connect_timeout=5 is unreachable: ";
    // The store is unavailable: exit 75, try again (SPEC.md §2); `agentic serve` opens the database too
    // (several servers share it: docs/deploy.md).
    for args in [vec!["runs"], vec!["show", "r1"], vec!["resume", "r1"], vec!["respond", "r1", "yes"], vec!["serve"]] {
        let o = agentic(url, None, &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(75), "{args:?}: {err}");
        assert!(err.starts_with(unreachable), "{args:?}: {err}");
        assert!(err.ends_with("; try again once it is back\n"), "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}

#[test]
fn a_respond_to_a_run_whose_cli_was_killed_names_the_command_that_continues_it() {
    let Some(url) = database("orphan") else { return };
    let spec = format!("{FIXTURES}/approval.yaml");
    let o = agentic(&url, Some(2), &["run", &spec, "--input", "input=order 7", "--memory-id", "orphan"]);
    assert_eq!(o.status.code(), None, "killed by a signal; {}", stderr(&o));
    // The dead process's lease (300 ms) runs out: no process runs the run any more.
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(json_out(&agentic(&url, None, &["show", "orphan", "--json"]))["interrupted"], true);
    let o = agentic(&url, None, &["respond", "orphan", "human-review", "yes"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(
            "error: run `orphan` was interrupted before it asked for an answer (the process running it stopped: \
             killed or crashed); continue it with `agentic resume orphan --store postgres"
        ),
        "{}",
        stderr(&o)
    );
    let o = agentic(&url, None, &["resume", "orphan"]);
    assert_eq!(o.status.code(), Some(2), "suspended at the human step: {}", stderr(&o));
    let o = agentic(&url, None, &["respond", "orphan", "human-review", "yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&agentic(&url, None, &["resume", "orphan"])), "Final: PROCESSED: order 7 | yes\n");
}

/// TLS to the store (SERVER.md §8): the test server (`scripts/pg-test-server.sh`) takes the role
/// `agentic_tls` over TCP only with TLS, and its certificate is `AGENTIC_TEST_PG_CA`. Without `sslmode` the
/// server refuses the run's connection; `sslmode=require` connects; `verify-full` with the server's
/// certificate as root connects, with another root it is refused naming the certificate.
#[test]
fn a_store_url_with_sslmode_connects_over_tls_and_checks_the_server_when_asked() {
    let Some(url) = database("tls") else { return };
    let Some(ca) = std::env::var_os("AGENTIC_TEST_PG_CA") else {
        assert!(std::env::var_os("AGENTIC_REQUIRE_PG").is_none(), "AGENTIC_TEST_PG_CA is not set");
        eprintln!("skipped: AGENTIC_TEST_PG_CA is not set (a server of an older scripts/pg-test-server.sh)");
        return;
    };
    let ca = ca.to_str().unwrap().to_string();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        let task = tokio::spawn(connection);
        client
            .batch_execute(
                "DO $$ BEGIN CREATE ROLE agentic_tls LOGIN SUPERUSER; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
            )
            .await
            .unwrap();
        drop(client);
        let _ = task.await;
    });
    let tls_url = url.replacen("postgres://agentic@", "postgres://agentic_tls@", 1);
    assert_ne!(tls_url, url);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("greet.yaml");
    std::fs::write(
        &spec,
        "version: 1\nroot: hi\nagents:\n  hi: { kind: compute, template: \"hello {{ who }}\", output_key: greeting }\n",
    )
    .unwrap();
    let run = |store: &str, id: &str| {
        Cli::new(["run", spec.to_str().unwrap(), "--input", "who=Ada", "--memory-id", id, "--store", store]).output()
    };

    let o = run(&tls_url, "plain");
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no encryption"), "{}", stderr(&o));

    for (id, query) in [
        ("required", "sslmode=require".to_string()),
        ("verified", format!("sslmode=verify-full&sslrootcert={ca}")),
        ("ca-only", format!("sslmode=verify-ca&sslrootcert={ca}")),
    ] {
        let o = run(&format!("{tls_url}?{query}"), id);
        assert_eq!(o.status.code(), Some(0), "{query}: {}", stderr(&o));
        assert_eq!(stdout(&o), "hello Ada\n");
    }

    // Another authority's certificate as the root: the server's is refused.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let other_ca = dir.path().join("other_ca.pem");
    std::fs::write(&other_ca, other.cert.pem()).unwrap();
    let o = run(&format!("{tls_url}?sslmode=verify-full&sslrootcert={}", other_ca.display()), "unverified");
    // Refused for good (exit 1), not a store that is away (75).
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("invalid peer certificate: UnknownIssuer"), "{}", stderr(&o));
    let o = run(&format!("{tls_url}?sslmode=verify-full"), "no-root");
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("sslmode=verify-full needs sslrootcert=FILE"), "{}", stderr(&o));
}
