//! MCP against a real peer: the official Python SDK's server (`tests/peers/mcp_server.py`, `mcp` from PyPI)
//! over stdio and streamable HTTP. The peer comes from `scripts/setup-peers.sh` (CI runs it).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use agentic::agents::{Compute, McpAgent, McpClient, McpError, McpToolProvider};
use agentic::engine::{CauseOrigin, Transience};
use agentic::prelude::*;
use common::{KillOnDrop, bodies, free_port, openai, peer_script, peers_python, wait_port};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

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
    let died = die.invoke().await.unwrap_err();
    // A server that went away is a tool failure that trying again can mend (the next call restarts it).
    let cause = died.cause().map(|c| (c.origin(), c.transience()));
    assert_eq!(cause, Some((CauseOrigin::Tool, Transience::Transient { retry_after: None })));
    let err = died.to_string();
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
    let o = crate::binary::agentic(
        &store,
        &["run", spec.to_str().unwrap(), "--input", "topic=owls", "--input", "a=20", "--input", "b=22"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", crate::binary::stderr(&o));
    assert_eq!(crate::binary::stdout(&o), "A plain story about owls. / 42\n");
}

#[test]
fn mcp_spec_errors_are_located() {
    let errors = |agent: &str| {
        let text = format!("version: 1\nroot: a\nagents:\n  a: {agent}\n");
        agentic::spec::Spec::parse(&text, "spec.yaml").unwrap_err().iter().map(|e| e.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(
        errors("{ kind: mcp, tool: x }"),
        [
            "spec.yaml:4:6: agent `a`: missing field `server` (a name in `mcp_servers`, `{command: [program, args..]}` or `{url: ..}`)"
        ]
    );
    assert_eq!(
        errors("{ kind: mcp, server: {url: 'ftp://x'} }"),
        ["spec.yaml:4:33: agent `a`: field `server.url`: expected an http:// or https:// URL, found `ftp://x`"]
    );
    assert_eq!(
        errors("{ kind: mcp, server: {comand: [x]} }"),
        [
            "spec.yaml:4:28: agent `a`: field `server`: unknown field `comand` (did you mean `command`?), expected one of `command`, `url`, `env`, `headers`"
        ]
    );
    assert_eq!(
        errors("{ kind: mcp, server: {command: []} }"),
        ["spec.yaml:4:37: agent `a`: field `server.command`: must name a program"]
    );
}

// ---------------------------------------------------------------------------------------------------------
// MCP tools for LLM agents, the model on a loopback OpenAI-compatible server

/// A chat completion answering `message`.
pub(crate) fn completion(message: Value) -> ResponseTemplate {
    let finish = if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    }))
}

/// An assistant message calling `(id, tool, arguments)` in order.
pub(crate) fn calls(list: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = list
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

/// A loopback model answering `answers` in order (the last one again after that).
async fn model_server(answers: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    let n = answers.len();
    for (i, a) in answers.into_iter().enumerate() {
        let mock = Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(completion(a));
        let mock = if i + 1 < n { mock.up_to_n_times(1) } else { mock };
        mock.mount(&server).await;
    }
    server
}

/// The tool names offered in a request, and its tool-result messages as (call id, content).
fn tools_and_results(body: &Value) -> (Vec<String>, Vec<(String, String)>) {
    let names = body["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["function"]["name"].as_str().map(String::from)).collect())
        .unwrap_or_default();
    let results = body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| {
                    (m["tool_call_id"].as_str().unwrap_or("").to_string(), m["content"].as_str().unwrap_or("").into())
                })
                .collect()
        })
        .unwrap_or_default();
    (names, results)
}

#[tokio::test]
async fn an_llm_agent_calls_an_mcp_tool_and_uses_its_result() {
    let Some(python) = peers_python() else { return };
    let server = model_server(vec![
        calls(&[("c1", "add", json!({"a": 2, "b": 40}))]),
        json!({"role": "assistant", "content": "The total is 42."}),
    ])
    .await;
    let provider = McpToolProvider::builder().client(stdio_client(&python, &[])).filter_tool_names(["add", "fail"]);
    let agent = LlmAgent::builder(openai(&server))
        .name("accountant")
        .user("What is {{ a }} + {{ b }}?")
        .tool_provider(provider.build())
        .output_key("answer")
        .build()
        .unwrap();
    let out = agent.invoke().input("a", 2).input("b", 40).await.unwrap();
    assert_eq!(out.output(), Some(&json!("The total is 42.")));

    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let (names, results) = tools_and_results(&bodies[0]);
    assert_eq!(names, ["add", "fail"], "the filtered tools of the server, in its order");
    assert!(results.is_empty());
    assert_eq!(
        bodies[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["a", "b"]),
        "the tool's input schema from the server"
    );
    assert_eq!(bodies[0]["tools"][0]["function"]["description"], "Adds two integers.");
    let (_, results) = tools_and_results(&bodies[1]);
    assert_eq!(results, [("c1".to_string(), r#"{"total":42}"#.to_string())]);
}

#[tokio::test]
async fn tool_errors_and_bad_arguments_go_back_to_the_model_and_a_dead_server_fails_the_agent() {
    let Some(python) = peers_python() else { return };
    let client = stdio_client(&python, &[]);
    let server = model_server(vec![
        calls(&[("c1", "fail", json!({"reason": "no budget"})), ("c2", "add", json!({"a": "two", "b": 1}))]),
        json!({"role": "assistant", "content": "I could not."}),
    ])
    .await;
    let agent = LlmAgent::builder(openai(&server))
        .name("clerk")
        .user("Do it.")
        .tool_provider(McpToolProvider::builder().client(client.clone()).build())
        .build()
        .unwrap();
    let out = agent.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("I could not.")));
    let (_, results) = tools_and_results(&bodies(&server).await[1]);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].0, "c1");
    assert!(results[0].1.starts_with("error: ") && results[0].1.contains("refused: no budget"), "{:?}", results[0]);
    assert_eq!(results[1], ("c2".to_string(), "error: field `a` must be of type integer, found \"two\"".to_string()));

    let dying = model_server(vec![calls(&[("c1", "die", json!({}))])]).await;
    let agent = LlmAgent::builder(openai(&dying))
        .name("clerk")
        .user("Stop the server.")
        .tool_provider(McpToolProvider::builder().client(client).build())
        .build()
        .unwrap();
    let died = agent.invoke().await.unwrap_err();
    assert_eq!(died.cause().map(|c| c.origin()), Some(CauseOrigin::Tool), "the LLM agent keeps the tool's cause");
    let err = died.to_string();
    assert!(err.starts_with("agent `clerk` (root) failed: MCP server `tools` (`"), "{err}");
    assert!(err.contains("tools/call die failed"), "{err}");
    assert_eq!(bodies(&dying).await.len(), 1, "the model is not asked again after the server died");
}

#[tokio::test]
async fn two_servers_offering_the_same_tool_name_clash_until_one_is_renamed() {
    let Some(python) = peers_python() else { return };
    let (_http, url) = http_server(&python);
    let model = model_server(vec![json!({"role": "assistant", "content": "ok"})]).await;
    let clash = LlmAgent::builder(openai(&model))
        .name("twins")
        .user("Hi.")
        .tool_provider(McpToolProvider::builder().client(stdio_client(&python, &["--only", "add"])).build())
        .tool_provider(McpToolProvider::builder().client(McpClient::http("remote", url.clone())).build())
        .build()
        .unwrap();
    let err = clash.invoke().await.unwrap_err().to_string();
    assert_eq!(
        err,
        "agent `twins` (root) failed: two tools are named `add`: one of MCP server `tools` and one of MCP server \
         `remote`; rename one (a name mapping of the provider, `rename` in a spec)"
    );
    let renamed = LlmAgent::builder(openai(&model))
        .name("twins")
        .user("Hi.")
        .tool_provider(McpToolProvider::builder().client(stdio_client(&python, &["--only", "add"])).build())
        .tool_provider(
            McpToolProvider::builder()
                .client(McpClient::http("remote", url))
                .filter_tool_names(["add"])
                .tool_name_mapper(|server, tool| format!("{}_{}", server.name(), tool.name))
                .build(),
        )
        .build()
        .unwrap();
    renamed.invoke().await.unwrap();
    let (names, _) = tools_and_results(bodies(&model).await.last().unwrap());
    assert_eq!(names, ["add", "remote_add"]);
}

#[tokio::test]
async fn a_spec_declares_mcp_servers_once_for_llm_tools_and_mcp_agents() {
    let Some(python) = peers_python() else { return };
    let (_http, url) = http_server(&python);
    let model = model_server(vec![
        calls(&[("c1", "plus", json!({"a": 1, "b": 2})), ("c2", "generate_story", json!({"topic": "owls"}))]),
        json!({"role": "assistant", "content": "3 owls"}),
    ])
    .await;
    let yaml = format!(
        "version: 1\nroot: main\nmodels: {{default: {{provider: scripted, replies: ['unused']}}}}\n\
         mcp_servers:\n  local: {{command: ['{}', '{}', stdio]}}\n  remote: {{url: '{url}'}}\n\
         agents:\n  main: {{kind: sequence, agents: [writer, sum], output_key: both}}\n  \
         writer:\n    kind: llm\n    user: Count.\n    output_key: count\n    tools:\n      \
         - {{mcp: local, filter: [add], rename: {{add: plus}}}}\n      - {{mcp: remote, filter: [generate_story]}}\n  \
         sum: {{kind: mcp, server: local, tool: add, inputs: [a, b], output_key: both}}\n",
        python.display(),
        peer_script("mcp_server.py")
    );
    let spec = agentic::spec::Spec::parse(&yaml, "tools.yaml").unwrap();
    assert_eq!(spec.mcp_servers().iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["local", "remote"]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::from(openai(&model)))]).unwrap();
    let out = built.root.invoke().input("a", 20).input("b", 22).await.unwrap();
    assert_eq!(out.output(), Some(&json!({"total": 42})));
    assert_eq!(out.state().get("count"), Some(&json!("3 owls")));
    let bodies = bodies(&model).await;
    let (names, _) = tools_and_results(&bodies[0]);
    assert_eq!(names, ["plus", "generate_story"]);
    let (_, results) = tools_and_results(&bodies[1]);
    assert_eq!(
        results,
        [("c1".to_string(), r#"{"total":3}"#.to_string()), ("c2".to_string(), "A plain story about owls.".to_string())]
    );
}

#[test]
fn mcp_server_names_filters_and_renames_are_checked_where_they_are_written() {
    let errors = |yaml: &str| {
        agentic::spec::Spec::parse(yaml, "spec.yaml").unwrap_err().iter().map(|e| e.to_string()).collect::<Vec<_>>()
    };
    let llm = |tools: &str| {
        format!(
            "version: 1\nroot: a\nmodels: {{default: {{provider: scripted, replies: [x]}}}}\n\
             mcp_servers: {{calc: {{url: 'http://127.0.0.1:1/mcp'}}}}\nagents:\n  a: {{kind: llm, user: hi, tools: {tools}}}\n"
        )
    };
    assert_eq!(
        errors(&llm("[{mcp: calk}]")),
        [
            "spec.yaml:6:42: agent `a`: field `tools[0].mcp`: unknown MCP server `calk` (did you mean `calc`?); declared: `calc`"
        ]
    );
    assert_eq!(
        errors(&llm("[{mcp: calc, filter: [add], rename: {sub: minus}}]")),
        ["spec.yaml:6:77: agent `a`: field `tools[0].rename.sub`: renames `sub`, which `filter` leaves out"]
    );
    assert_eq!(
        errors(&llm("[{mcp: calc, rename: {add: 'a b'}}]")),
        [
            "spec.yaml:6:62: agent `a`: field `tools[0].rename.add`: `a b`: a tool name has only letters, digits, `_` and `-`"
        ]
    );
    assert_eq!(
        errors(&llm("[{mcp: calc, filtre: [add]}]")),
        [
            "spec.yaml:6:48: agent `a`: field `tools[0]`: unknown field `filtre` (did you mean `filter`?), expected one of `mcp`, `filter`, `rename`, `effect`, `approve`"
        ]
    );
    assert_eq!(
        errors("version: 1\nroot: a\nagents:\n  a: {kind: mcp, server: calc}\n"),
        [
            "spec.yaml:4:26: agent `a`: field `server`: unknown MCP server `calc`; no MCP servers are declared (add `mcp_servers: {NAME: {command: [..]} | {url: ..}}`)"
        ]
    );
    assert_eq!(
        errors("version: 1\nroot: a\nmcp_servers: {calc: {url: 'ftp://x'}}\nagents:\n  a: {kind: mcp, server: calc}\n"),
        ["spec.yaml:3:27: field `mcp_servers.calc.url`: expected an http:// or https:// URL, found `ftp://x`"]
    );
}

#[tokio::test]
async fn a_filter_or_rename_naming_a_tool_the_server_lacks_fails_the_agent_listing_the_tools() {
    let Some(python) = peers_python() else { return };
    let model = model_server(vec![json!({"role": "assistant", "content": "ok"})]).await;
    for (provider, named, field) in [
        (McpToolProvider::builder().filter_tool_names(["ad"]), "ad", "filter"),
        (McpToolProvider::builder().rename("sum", "plus"), "sum", "rename"),
    ] {
        let agent = LlmAgent::builder(openai(&model))
            .name("clerk")
            .user("Hi.")
            .tool_provider(provider.client(stdio_client(&python, &[])).build())
            .build()
            .unwrap();
        let err = agent.invoke().await.unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "agent `clerk` (root) failed: MCP server `tools` offers no tool `{named}` (named in `{field}`); the \
                 tools offered are: generate_story, add, fail, die"
            )
        );
    }
    assert!(bodies(&model).await.is_empty(), "the model is not asked");
}
