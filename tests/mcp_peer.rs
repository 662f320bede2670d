//! MCP against a real peer: the official Python SDK's server (`tests/peers/mcp_server.py`, `mcp` from PyPI)
//! over stdio and streamable HTTP. The peer comes from `scripts/setup-peers.sh` (CI runs it).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use agentic::agents::{Compute, McpAgent, McpClient, McpError};
use agentic::prelude::*;
use common::{KillOnDrop, free_port, peer_script, peers_python, wait_port};
use serde_json::json;

fn stdio_client(python: &std::path::Path, extra: &[&str]) -> Arc<McpClient> {
    let mut command = vec![python.display().to_string(), peer_script("mcp_server.py"), "stdio".into()];
    command.extend(extra.iter().map(|s| s.to_string()));
    McpClient::stdio("tools", command)
}

fn http_server(python: &std::path::Path) -> (KillOnDrop, String) {
    let port = free_port();
    let child = std::process::Command::new(python)
        .args([peer_script("mcp_server.py"), "http".into(), port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child);
    wait_port(port);
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

/// topic ← "dragons" by a compute step, then the MCP tool, then a compute step reading its result.
async fn story_sequence(client: Arc<McpClient>) -> AgentRef {
    let story = McpAgent::builder(client).tool_name("generate_story").output_key("story").build().await.unwrap();
    assert_eq!(story.spec().description, "Writes a one-sentence story about a topic.");
    let inputs: Vec<(&str, Option<&serde_json::Value>)> =
        story.spec().inputs.iter().map(|i| (i.key.as_str(), i.default.as_ref())).collect();
    assert_eq!(inputs, [("topic", None), ("style", Some(&json!("plain")))], "the tool's arguments, with defaults");
    Sequence::builder()
        .sub_agents([
            Compute::expression("topic", "'dragons'").unwrap().output_key("topic").build(),
            story,
            Compute::template("shout", "{{ story | upper }}").unwrap().output_key("loud").build(),
        ])
        .output_key("loud")
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_mcp_agent_over_stdio_returns_the_tools_exact_result_inside_a_sequence() {
    let Some(python) = peers_python() else { return };
    let seq = story_sequence(stdio_client(&python, &[])).await;
    let out = seq.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("A PLAIN STORY ABOUT DRAGONS.")));
    assert_eq!(out.state().get("story"), Some(&json!("A plain story about dragons.")));
}

#[tokio::test]
async fn an_mcp_agent_over_streamable_http_returns_the_tools_exact_result_inside_a_sequence() {
    let Some(python) = peers_python() else { return };
    let (_server, url) = http_server(&python);
    let seq = story_sequence(McpClient::http("tools", url)).await;
    let out = seq.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("A PLAIN STORY ABOUT DRAGONS.")));
}

#[tokio::test]
async fn structured_results_come_back_as_json_and_the_only_tool_needs_no_name() {
    let Some(python) = peers_python() else { return };
    let add = McpAgent::builder(stdio_client(&python, &["--only", "add"])).output_key("sum").build().await.unwrap();
    assert_eq!(add.spec().name, "add");
    let out = add.invoke().input("a", 2).input("b", 40).await.unwrap();
    assert_eq!(out.output(), Some(&json!({"total": 42})));
}

#[tokio::test]
async fn bad_arguments_tool_errors_and_a_dead_server_are_located_errors() {
    let Some(python) = peers_python() else { return };
    let client = stdio_client(&python, &[]);
    let add = McpAgent::builder(client.clone()).tool_name("add").build().await.unwrap();
    let err = add.invoke().input("a", "two").input("b", 1).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `add` (root) failed: MCP tool `add` of server `tools`: field `a` must be of type integer, found \"two\""
    );
    let missing = add.invoke().input("a", 1).await.unwrap_err();
    assert_eq!(missing.to_string(), "agent `add` (root): missing argument `b`");

    let fail = McpAgent::builder(client.clone()).tool_name("fail").build().await.unwrap();
    let err = fail.invoke().input("reason", "no budget").await.unwrap_err();
    assert!(
        err.to_string().starts_with("agent `fail` (root) failed: MCP tool `fail` of server `tools` failed: "),
        "{err}"
    );
    assert!(err.to_string().contains("refused: no budget"), "{err}");

    let die = McpAgent::builder(client.clone()).tool_name("die").build().await.unwrap();
    let err = die.invoke().await.unwrap_err().to_string();
    assert!(err.starts_with("agent `die` (root) failed: MCP server `tools` (`"), "{err}");
    assert!(err.contains("tools/call die failed"), "{err}");
    // The next call starts the server again.
    let out = add.invoke().input("a", 1).input("b", 2).await.unwrap();
    assert_eq!(out.output(), Some(&json!({"total": 3})));

    let unknown = McpAgent::builder(client).tool_name("nope").build().await.unwrap_err();
    assert_eq!(
        unknown,
        McpError::UnknownTool {
            server: "tools".into(),
            tool: "nope".into(),
            available: "generate_story, add, fail, die".into()
        }
    );
    let unreachable = McpAgent::builder(McpClient::http("gone", format!("http://127.0.0.1:{}/mcp", free_port())))
        .build()
        .await
        .unwrap_err();
    assert!(unreachable.to_string().starts_with("MCP server `gone` (http://127.0.0.1:"), "{unreachable}");
}

#[test]
fn a_spec_mcp_agent_runs_from_the_cli_over_stdio_and_http() {
    let Some(python) = peers_python() else { return };
    let (_server, url) = http_server(&python);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("story.yaml");
    let script = peer_script("mcp_server.py");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nroot: main\nparams: {{topic: string, a: integer, b: integer}}\nagents:\n  \
             main: {{ kind: sequence, agents: [story, sum, both], output_key: both }}\n  \
             story: {{ kind: mcp, server: {{command: ['{}', '{script}', stdio]}}, tool: generate_story, output_key: story }}\n  \
             sum: {{ kind: mcp, server: {{url: '{url}'}}, tool: add, inputs: [a, b], output_key: sum }}\n  \
             both: {{ kind: compute, template: '{{{{ story }}}} / {{{{ sum.total }}}}', output_key: both }}\n",
            python.display()
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    let o = common::agentic(
        &store,
        &["run", spec.to_str().unwrap(), "--input", "topic=owls", "--input", "a=20", "--input", "b=22"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o), "A plain story about owls. / 42\n");
}

#[test]
fn mcp_spec_errors_are_located() {
    let errors = |agent: &str| {
        let text = format!("version: 1\nroot: a\nagents:\n  a: {agent}\n");
        agentic::spec::Spec::parse(&text, "spec.yaml").unwrap_err().iter().map(|e| e.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(
        errors("{ kind: mcp, tool: x }"),
        ["spec.yaml:4:6: agent `a`: missing field `server` (`{command: [program, args..]}` or `{url: ..}`)"]
    );
    assert_eq!(
        errors("{ kind: mcp, server: {url: 'ftp://x'} }"),
        ["spec.yaml:4:33: agent `a`: field `server.url`: expected an http:// or https:// URL, found `ftp://x`"]
    );
    assert_eq!(
        errors("{ kind: mcp, server: {comand: [x]} }"),
        [
            "spec.yaml:4:28: agent `a`: field `server`: unknown field `comand` (did you mean `command`?), expected one of `command`, `url`"
        ]
    );
    assert_eq!(
        errors("{ kind: mcp, server: {command: []} }"),
        ["spec.yaml:4:37: agent `a`: field `server.command`: must name a program"]
    );
}
