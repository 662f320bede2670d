//! A fresh PostgreSQL database per test, in the server `AGENTIC_TEST_PG_URL` names (a throwaway cluster:
//! `scripts/pg-test-server.sh`). Without the variable the PostgreSQL tests are skipped, saying so on stderr,
//! unless `AGENTIC_REQUIRE_PG=1` (CI), when they fail. Shared by `store/tests` and the CLI's tests
//! (`#[path]`). The databases are not dropped: the cluster is thrown away after the tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};

/// The test server's URL, or `None` (after saying so) when the PostgreSQL tests are to be skipped.
pub fn server_url(test: &str) -> Option<String> {
    match std::env::var("AGENTIC_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("AGENTIC_REQUIRE_PG").is_ok_and(|v| v == "1") => {
            panic!("{test}: AGENTIC_REQUIRE_PG=1 but AGENTIC_TEST_PG_URL is not set (scripts/pg-test-server.sh)")
        }
        _ => {
            eprintln!(
                "{test}: skipped: AGENTIC_TEST_PG_URL is not set (start a server with scripts/pg-test-server.sh)"
            );
            None
        }
    }
}

/// `url` with its database name replaced by `dbname`.
pub fn with_dbname(url: &str, dbname: &str) -> String {
    agentic_store::with_database(url, dbname)
}

/// Creates an empty database for one test and returns its URL, or `None` when the tests are skipped.
pub async fn fresh_database(test: &str) -> Option<String> {
    static N: AtomicU64 = AtomicU64::new(0);
    let url = server_url(test)?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let name = format!("agentic_t{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("{test}: connect to {url}: {e}"));
    let task = tokio::spawn(connection);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap_or_else(|e| panic!("{test}: {e}"));
    drop(client);
    let _ = task.await;
    Some(with_dbname(&url, &name))
}
