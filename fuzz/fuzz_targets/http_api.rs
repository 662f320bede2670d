//! The HTTP application of `agentic serve` in process (an in-memory store, the specs of `fuzz/specs`): request
//! bodies of the API, the A2A JSON-RPC endpoint, the MCP endpoint after a session's handshake, the login form,
//! and request targets (paths and queries). No input may panic a handler or get a 500: bad input is the
//! client's error. Input: a selector byte, then the body (or the request target).
#![no_main]

use std::sync::Arc;

use agentic_server::ServerConfig;
use agentic_server::fuzzing::App;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use libfuzzer_sys::fuzz_target;

const SPECS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/specs");

fn post(uri: &str, content_type: &str, body: Vec<u8>) -> Request<Body> {
    Request::post(uri)
        .header("host", "127.0.0.1:7878")
        .header("content-type", content_type)
        .body(Body::from(body))
        .expect("a valid request")
}

fn json(response: &axum::http::Response<Vec<u8>>) -> serde_json::Value {
    serde_json::from_slice(response.body()).expect("a JSON answer")
}

/// A run of `approval` suspended on its human step: its id.
async fn suspended_run(app: &App) -> String {
    let created = app
        .call(post("/api/v1/runs", "application/json", br#"{"spec_name":"approval","inputs":{"input":"x"}}"#.to_vec()))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED, "{}", String::from_utf8_lossy(created.body()));
    let id = json(&created)["run_id"].as_str().expect("run_id").to_string();
    loop {
        let run = app.call(Request::get(format!("/api/v1/runs/{id}")).body(Body::empty()).expect("request")).await;
        let status = json(&run)["status"].clone();
        if status == "suspended" {
            return id;
        }
        assert_eq!(status, "running", "the approval run ended without asking");
        tokio::task::yield_now().await;
    }
}

/// The session id of a new MCP session (initialize, then the initialized notification).
async fn mcp_session(app: &App) -> String {
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;
    let mut request = post("/mcp", "application/json", init.to_vec());
    request.headers_mut().insert("accept", "application/json, text/event-stream".parse().expect("header"));
    let response = app.call(request).await;
    assert_eq!(response.status(), StatusCode::OK, "{}", String::from_utf8_lossy(response.body()));
    let session = response.headers()["mcp-session-id"].to_str().expect("session id").to_string();
    let mut notified =
        post("/mcp", "application/json", br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec());
    notified.headers_mut().insert("accept", "application/json, text/event-stream".parse().expect("header"));
    notified.headers_mut().insert("mcp-session-id", session.parse().expect("header"));
    app.call(notified).await;
    session
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let store: agentic_engine::StoreRef = Arc::new(agentic_store::MemoryStore::new());
        let app = App::new(ServerConfig::new(store).specs_dir(SPECS)).await;
        let body = rest.to_vec();
        let request = match selector % 8 {
            0 => post("/api/v1/runs", "application/json", body),
            1 => {
                let id = suspended_run(&app).await;
                post(&format!("/api/v1/runs/{id}/responses/human-review"), "application/json", body)
            }
            2 => {
                let id = suspended_run(&app).await;
                post(&format!("/api/v1/runs/{id}/fork"), "application/json", body)
            }
            3 => post("/a2a", "application/json", body),
            4 => post("/a2a/echo", "application/json", body),
            5 => {
                let session = mcp_session(&app).await;
                let mut request = post("/mcp", "application/json", body);
                request.headers_mut().insert("accept", "application/json, text/event-stream".parse().expect("header"));
                request.headers_mut().insert("mcp-session-id", session.parse().expect("header"));
                request
            }
            6 => post("/login", "application/x-www-form-urlencoded", body),
            _ => {
                let Ok(target) = std::str::from_utf8(rest) else { return };
                let target = format!("/{}", target.trim_start_matches('/'));
                let Ok(request) = Request::get(target).header("host", "127.0.0.1:7878").body(Body::empty()) else {
                    return;
                };
                request
            }
        };
        let target = request.uri().to_string();
        let response = app.call(request).await;
        assert!(
            !response.status().is_server_error(),
            "{target}: {} {}",
            response.status(),
            String::from_utf8_lossy(response.body())
        );
    });
});
