//! `agentic run --stream` and `agentic resume --stream` through the real binary, against a loopback
//! OpenAI-compatible server: the final agent's tokens on stdout, then the output; `--json` as JSON lines; a
//! suspended and a failed run after their tokens; a system whose final agent does not stream.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::binary::{Cli, stderr, stdout};
use common::sse;
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer};

/// Answers requests whose body contains `marker` with a stream of `chunks`.
async fn mount(server: &MockServer, marker: &str, chunks: &[&str]) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains(marker))
        .respond_with(sse(chunks))
        .mount(server)
        .await;
}

const STORY: [&str; 3] = [
    r#"{"choices":[{"index":0,"delta":{"content":"Once "}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"content":"upon "}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"content":"a time."}}]}"#,
];

/// A spec on `server`: `first` then a streaming `tell` agent, in a sequence whose result is the story in
/// upper case (so the tokens and the output differ).
fn spec(dir: &Path, server: &MockServer, first: &str) -> PathBuf {
    let text = format!(
        "version: 1\nname: tale\nroot: main\nmodels:\n  default: {{ provider: openai, base_url: \"{}/v1\", model: m }}\n\
         agents:\n  main: {{ kind: sequence, agents: [first, tell], output_key: story, output: \"story | upper\" }}\n\
         \x20 first: {first}\n\
         \x20 tell: {{ kind: llm, user: \"Tell a story about {{{{ topic }}}}\", stream: true, output_key: story }}\n",
        server.uri()
    );
    let path = dir.join("tale.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the binary on the store `store` (off the test's runtime, which serves the model).
async fn agentic(store: &Path, args: &[&str]) -> Output {
    Cli::new(args).store(store).env("OPENAI_API_KEY", "sk-test").output_async().await
}

#[tokio::test]
async fn run_stream_prints_the_tokens_then_the_output() {
    let server = MockServer::start().await;
    mount(&server, "Tell a story", &STORY).await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server, "{ kind: compute, value: \"'dragons'\", output_key: topic }");
    let spec = spec.to_str().unwrap();
    let store = dir.path().join("store");

    let o = agentic(&store, &["run", spec, "--stream", "--memory-id", "t1"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Once upon a time.\nONCE UPON A TIME.\n");
    assert_eq!(stderr(&o), "run: t1\n");

    let o = agentic(&store, &["run", spec, "--stream", "--json", "--memory-id", "t2"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        lines,
        [
            json!({"token": "Once "}),
            json!({"token": "upon "}),
            json!({"token": "a time."}),
            json!({"run_id": "t2", "status": "completed", "output": "ONCE UPON A TIME.", "pending": []}),
        ]
    );

    // The state holds the whole answer, as without --stream.
    let o = agentic(&store, &["show", "t1", "--json"]).await;
    let shown: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(shown["state"]["story"], json!("ONCE UPON A TIME."));
}

#[tokio::test]
async fn a_suspended_run_prints_its_pending_response_and_resume_stream_prints_the_rest() {
    let server = MockServer::start().await;
    mount(&server, "Tell a story", &STORY).await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server, "{ kind: human, prompt: \"Topic?\", response_id: topic, output_key: topic }");
    let spec = spec.to_str().unwrap();
    let store = dir.path().join("store");

    let o = agentic(&store, &["run", spec, "--stream", "--memory-id", "h1"]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "run: h1\npending: topic (agent `first`): Topic?\n");

    let o = agentic(&store, &["respond", "h1", "owls"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = agentic(&store, &["resume", "h1", "--stream"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Once upon a time.\nONCE UPON A TIME.\n");
    let asked = common::bodies(&server).await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["messages"][0]["content"], json!("Tell a story about owls"));
}

#[tokio::test]
async fn a_failed_run_prints_its_error_after_the_tokens() {
    let server = MockServer::start().await;
    mount(&server, "Tell a story", &[STORY[0], STORY[1], r#"{"choices":5}"#]).await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server, "{ kind: compute, value: \"'dragons'\", output_key: topic }");
    let store = dir.path().join("store");

    let o = agentic(&store, &["run", spec.to_str().unwrap(), "--stream", "--memory-id", "f1"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Once upon \n");
    assert_eq!(
        stderr(&o),
        format!(
            "run: f1\nerror: agent `tell` (root/1) failed: model `m` at {}/v1: stream failed: unexpected event: \
             {{\"choices\":5}}\n",
            server.uri()
        )
    );
}

#[tokio::test]
async fn a_final_agent_that_does_not_stream_prints_only_the_output_with_a_note() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.yaml");
    std::fs::write(
        &path,
        "version: 1\nroot: main\nagents:\n  main: { kind: loop, agents: [count], max_iterations: 2, output_key: n }\n\
         \x20 count: { kind: compute, value: \"(n if n is defined else 0) + 1\", inputs: [], output_key: n }\n",
    )
    .unwrap();
    let o = agentic(&dir.path().join("store"), &["run", path.to_str().unwrap(), "--stream", "--memory-id", "p1"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2\n");
    assert_eq!(
        stderr(&o),
        "run: p1\nnote: nothing to stream: the system's final agent (the root, or a sequence's last agent) is not an \
         agent that streams (llm with `stream: true`); the output follows when the run ends\n"
    );
    drop(server);
}

#[tokio::test]
async fn run_help_documents_stream() {
    let o = agentic(Path::new("unused"), &["run", "--help"]).await;
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(
            "--stream Print the answer of the system's final agent (the root, or a sequence's last agent: an llm \
             agent with `stream: true`) as it is produced: its tokens on stdout as they come, a newline after the \
             last one, then the output as without --stream."
        ),
        "{help}"
    );
}
