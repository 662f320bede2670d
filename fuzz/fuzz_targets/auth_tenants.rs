//! The auth layer of `agentic serve` in process (an in-memory store, the specs of `fuzz/specs`): tenant A's run
//! suspended on its human step, and every request made with what tenant B holds (its admin's, viewer's and
//! approver's keys, as bearer tokens or the sign-in cookie, altered), with A's key id and a guessed secret, with
//! random credentials or none, on paths about A's run (or any path, A's run id put in) with any method and body.
//! No request may read A's run (its marker is in its state and prompt: it never appears in an answer), change it
//! (answer, cancel, fork or resume it), touch A's keys, or get a 500.
//!
//! Input: a method byte, a credential byte, a path byte, then the credential's or path's text up to the first
//! newline, then the body.
#![no_main]

use std::sync::Arc;

use agentic_engine::{Role, RunStatus, StoreRef};
use agentic_server::fuzzing::App;
use agentic_server::{NewKey, ServerConfig, create_key};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use libfuzzer_sys::fuzz_target;

const SPECS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/specs");

/// What only tenant A's run holds (its input, in its state and its human step's prompt).
const MARKER: &str = "MARKER-A-5b1e";
const RUN: &str = "tenant-a-run";

/// The paths about A's run (`{A}` stands for its id).
const PATHS: [&str; 12] = [
    "/api/v1/runs/{A}",
    "/api/v1/runs/{A}/responses/human-review",
    "/api/v1/runs/{A}/cancel",
    "/api/v1/runs/{A}/fork",
    "/api/v1/runs/{A}/resume",
    "/api/v1/runs/{A}/events",
    "/api/v1/runs/{A}/report",
    "/api/v1/runs/{A}/calls",
    "/api/v1/store/runs/{A}/image",
    "/runs/{A}",
    "/api/v1/runs",
    "/inbox.json",
];

async fn key(store: &StoreRef, name: &str, tenant: &str, role: Role) -> String {
    let new = NewKey { name: name.into(), tenant: tenant.into(), roles: vec![role], ..NewKey::default() };
    create_key(store.as_ref(), new, "fuzz").await.expect("a key").0
}

fuzz_target!(|data: &[u8]| {
    let [method, credential, path, rest @ ..] = data else { return };
    let (text, body) = match rest.iter().position(|b| *b == b'\n') {
        Some(at) => (&rest[..at], rest[at + 1..].to_vec()),
        None => (rest, Vec::new()),
    };
    let text = String::from_utf8_lossy(text).into_owned();
    // A request that carries the marker itself (an input of a run of B's, echoed in an error) proves nothing.
    if text.contains(MARKER) || String::from_utf8_lossy(&body).contains(MARKER) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let store: StoreRef = Arc::new(agentic_store::MemoryStore::new());
        let a_op = key(&store, "a-op", "acme", Role::Operator).await;
        let b_keys = [
            key(&store, "b-admin", "globex", Role::Admin).await,
            key(&store, "b-viewer", "globex", Role::Viewer).await,
            key(&store, "b-approver", "globex", Role::Approver).await,
        ];
        let app = App::new(ServerConfig::new(store.clone()).specs_dir(SPECS)).await;
        let start = format!(r#"{{"spec_name":"approval","run_id":"{RUN}","inputs":{{"input":"{MARKER}"}}}}"#);
        let created = app
            .call(
                Request::post("/api/v1/runs")
                    .header("authorization", format!("Bearer {a_op}"))
                    .body(Body::from(start))
                    .expect("request"),
            )
            .await;
        assert_eq!(created.status(), StatusCode::CREATED, "{}", String::from_utf8_lossy(created.body()));
        loop {
            let run = store.run_dyn(RUN).await.expect("store");
            if run.as_ref().is_some_and(|r| r.status == RunStatus::Suspended) {
                break;
            }
            tokio::task::yield_now().await;
        }

        let b_key = &b_keys[usize::from(*credential / 8) % b_keys.len()];
        let a_id = &a_op[4..17];
        let presented: Option<(bool, String)> = match credential % 8 {
            0 => None,
            1 => Some((false, b_key.clone())),
            2 => Some((true, b_key.clone())),
            // B's key with the fuzzer's text in place of a part of it.
            3 => Some((false, format!("{}{text}", &b_key[..b_key.len().saturating_sub(text.len())]))),
            4 => Some((false, text.clone())),
            5 => Some((true, text.clone())),
            // A's key id with a guessed secret.
            6 => Some((false, format!("agk_{a_id}_{text}"))),
            _ => Some((false, format!("agk_{a_id}_{:0>64}", text.len()))),
        };
        let target = match path % 16 {
            p if usize::from(p) < PATHS.len() => PATHS[usize::from(p)].replace("{A}", RUN),
            _ => format!("/{}", text.trim_start_matches('/').replace("{A}", RUN)),
        };
        let method = match method % 4 {
            0 => Method::GET,
            1 | 2 => Method::POST,
            _ => Method::DELETE,
        };
        let mut request = Request::builder().method(method).uri(&target).header("host", "127.0.0.1:7878");
        if let Some((cookie, value)) = &presented {
            request = if *cookie {
                request.header("cookie", format!("agentic_token={value}"))
            } else {
                request.header("authorization", format!("Bearer {value}"))
            };
        }
        let Ok(request) = request.header("content-type", "application/json").body(Body::from(body)) else { return };
        let response = app.call(request).await;
        let shown = String::from_utf8_lossy(response.body());
        assert!(!response.status().is_server_error(), "{target}: {} {shown}", response.status());
        assert!(!shown.contains(MARKER), "{target} with {presented:?} read tenant A's run: {shown}");
        let run = store.run_dyn(RUN).await.expect("store").expect("A's run");
        assert!(
            run.status == RunStatus::Suspended && run.answers.is_empty() && !run.cancel_requested,
            "{target} with {presented:?} changed tenant A's run: {run:?}"
        );
        let forks = store.runs_dyn().await.expect("store");
        assert!(
            forks.iter().all(|r| r.forked_from.as_ref().is_none_or(|f| f.run_id != RUN)),
            "{target} with {presented:?} forked tenant A's run"
        );
        // Nor A's keys: none revoked, none made.
        let keys = store.keys_dyn().await.expect("store");
        let acme: Vec<_> = keys.iter().filter(|k| k.tenant == "acme").collect();
        assert!(
            acme.len() == 1 && acme[0].revoked_at_ms.is_none(),
            "{target} with {presented:?} changed tenant A's keys: {acme:?}"
        );
    });
});
