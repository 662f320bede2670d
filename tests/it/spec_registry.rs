//! The agents registry from specs: agents a Rust program registers by name (an LLM agent with a scripted
//! model, a closure, a remote A2A agent) used by `kind: registry` agents of a spec built with
//! `BuildContext::registry`, in a sequence and under a spec supervisor; the located errors for an unknown
//! registered name, a spec built without a registry, and fields a registered agent cannot take.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::binary::Serve;

use agentic::agents::a2a::{A2aAgent, A2aClient};
use agentic::agents::model::ScriptedModel;
use agentic::engine::{AgentRegistry, ValueType};
use agentic::prelude::*;
use agentic::spec::{BuildContext, Spec};
use serde_json::{Value, json};

/// The story editors of the original's registry example, registered by a Rust program: an LLM agent (scripted
/// model) and a closure.
fn editors() -> AgentRegistry {
    let registry = AgentRegistry::new();
    let audience = LlmAgent::builder(ScriptedModel::new(["Once, a kind dragon met a young wizard."]))
        .name("audience_editor")
        .description("Rewrites the story for its audience")
        .user("Rewrite for {{ audience }}: {{ story }}")
        .output_key("story")
        .build()
        .unwrap();
    registry.register(audience).unwrap();
    let style = FnAgent::from_async("style_editor", |inputs| async move {
        let story = inputs.get("story").and_then(Value::as_str).unwrap_or_default().to_string();
        let style = inputs.get("style").and_then(Value::as_str).unwrap_or_default().to_string();
        Ok(json!(format!("{story} (in a {style} style)")))
    })
    .inputs(["story", "style"])
    .output_key("story")
    .build();
    registry.register(style).unwrap();
    registry
}

const STORY: &str = r#"version: 1
name: story
root: novel
agents:
  novel: { kind: sequence, agents: [write, audience, style], output_key: story }
  write: { kind: compute, template: "A story about {{ topic }}.", output_key: story }
  audience: { kind: registry, name: audience_editor }
  style: { kind: registry, name: style_editor }
"#;

#[tokio::test]
async fn a_spec_runs_registered_agents_with_local_ones() {
    let spec = Spec::parse(STORY, "story.yaml").unwrap();
    let built = spec.build_with(&BuildContext::new().registry(editors())).unwrap();
    let out = built
        .root
        .invoke()
        .input("topic", "dragons")
        .input("audience", "young readers")
        .input("style", "fairy-tale")
        .await
        .unwrap();
    assert_eq!(out.output(), Some(&json!("Once, a kind dragon met a young wizard. (in a fairy-tale style)")));
    // The registered agents keep their own names and kinds in the tree, at the spec's positions.
    let topology = built.root.topology();
    let nodes: Vec<(&str, &str, &str)> =
        topology.walk().iter().map(|n| (n.path.as_str(), n.spec.name.as_str(), n.spec.kind.as_str())).collect();
    assert_eq!(
        nodes,
        [
            ("root", "novel", "sequence"),
            ("root/0", "write", "compute"),
            ("root/1", "audience_editor", "llm"),
            ("root/2", "style_editor", "closure"),
        ]
    );
}

#[test]
fn an_unknown_registered_name_fails_the_build_naming_the_agent_its_path_and_the_registered_names() {
    let spec = Spec::parse(&STORY.replace("name: style_editor", "name: critic"), "story.yaml").unwrap();
    let err = spec.build_with(&BuildContext::new().registry(editors())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "story.yaml:8:34: agent `style`: field `name`: no agent registered as `critic` at root/2 (registered: \
         `audience_editor`, `style_editor`)"
    );
    let empty = spec.build_with(&BuildContext::new().registry(AgentRegistry::new())).unwrap_err();
    assert_eq!(
        empty.to_string(),
        "story.yaml:7:37: agent `audience`: field `name`: no agent registered as `audience_editor` at root/1 (the \
         registry is empty)\n\
         story.yaml:8:34: agent `style`: field `name`: no agent registered as `critic` at root/2 (the registry is empty)"
    );
}

#[test]
fn a_spec_with_registered_agents_needs_a_registry() {
    let spec = Spec::parse(STORY, "story.yaml").unwrap();
    let err = spec.build().unwrap_err();
    let lines: Vec<String> = err.iter().map(ToString::to_string).collect();
    let needs = |line: u64, column: u64, agent: &str, name: &str, path: &str| {
        format!(
            "story.yaml:{line}:{column}: agent `{agent}`: field `name`: kind `registry` needs an agents registry, \
             and this spec was built without one (the Rust program that registers agents builds the spec with \
             `BuildContext::registry`); `{name}` at {path} is not resolved"
        )
    };
    assert_eq!(
        lines,
        [needs(7, 37, "audience", "audience_editor", "root/1"), needs(8, 34, "style", "style_editor", "root/2")]
    );
}

#[test]
fn a_registered_agent_takes_only_its_name() {
    let yaml = "version: 1\nroot: a\nagents:\n  a: { kind: registry, name: writer, output_key: story, model: m }\n";
    let lines: Vec<String> = common::errors(yaml).iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "spec.yaml:4:38: agent `a`: a `registry` agent takes only `name`: `output_key` belongs to the \
             registered agent, which is built in Rust with its own fields",
            "spec.yaml:4:57: agent `a`: unknown field `model`, expected one of `kind`, `name`",
        ]
    );
    let missing = common::one("version: 1\nroot: a\nagents:\n  a: { kind: registry }\n");
    assert_eq!(missing.to_string(), "spec.yaml:4:6: agent `a`: missing field `name`");
}

#[tokio::test]
async fn a_spec_supervisor_picks_a_registered_agent_by_name() {
    let registry = AgentRegistry::new();
    let lookup = FnAgent::from_async("lookup_order", |inputs| async move {
        let id = inputs.get("order_id").and_then(Value::as_str).unwrap_or_default().to_string();
        Ok(json!(format!("order {id}: shipped")))
    })
    .description("Finds an order's status.")
    .input(InputSpec::new("order_id").typed(ValueType::String))
    .output_key("status")
    .build();
    registry.register(lookup).unwrap();
    let spec = Spec::parse(
        r#"version: 1
root: desk
models:
  planner: { provider: scripted }
agents:
  desk: { kind: supervisor, agents: [lookup], model: planner, output_key: answer }
  lookup: { kind: registry, name: lookup_order }
"#,
        "desk.yaml",
    )
    .unwrap();
    let model = ScriptedModel::new([
        r#"{"agentName": "lookup_order", "arguments": {"order_id": "A-7"}}"#,
        r#"{"agentName": "done", "arguments": {}}"#,
    ]);
    let context = BuildContext::new().model("planner", model.clone()).registry(registry);
    let out = spec.build_with(&context).unwrap().root.invoke().input("request", "Where is A-7?").await.unwrap();
    assert_eq!(out.output(), Some(&json!("order A-7: shipped")));
    assert_eq!(out.state().get("status"), Some(&json!("order A-7: shipped")));
    let system = model.requests()[0].messages[0].text().to_string();
    assert!(
        system.contains("- lookup_order: Finds an order's status. Arguments: {\"order_id\":\"string\"}\n"),
        "the planner is offered the registered agent by its name: {system}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_remote_a2a_agent_runs_from_a_spec() {
    // The remote agent: `agentic serve` exposing a spec as an A2A agent.
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(
        specs.join("shout.yaml"),
        "version: 1\nroot: s\nagents:\n  s: { kind: compute, description: Shouts, inputs: [text], value: \"text | upper\" }\n",
    )
    .unwrap();
    let server = Serve::on(dir.path().join("store")).specs_dir(&specs).start();

    let registry = AgentRegistry::new();
    let card = format!("{}/.well-known/shout/agent-card.json", server.url);
    let remote = A2aAgent::builder(A2aClient::new("shouter", card))
        .name("shouter")
        .inputs(["story"])
        .output_key("loud")
        .build_lazy();
    registry.register(remote).unwrap();
    let spec = Spec::parse(
        r#"version: 1
root: main
agents:
  main: { kind: sequence, agents: [write, shout], output_key: loud }
  write: { kind: compute, template: "a story about {{ topic }}", output_key: story }
  shout: { kind: registry, name: shouter }
"#,
        "remote.yaml",
    )
    .unwrap();
    let built = spec.build_with(&BuildContext::new().registry(registry)).unwrap();
    let out = built.root.invoke().input("topic", "dragons").await.unwrap();
    assert_eq!(out.output(), Some(&json!("A STORY ABOUT DRAGONS")));
    assert_eq!(built.root.topology().children[1].spec.kind, "a2a");
}

#[test]
fn a_supervisor_given_one_registered_agent_twice_names_both_entries() {
    let registry = editors();
    let style = registry.get("style_editor").unwrap();
    registry.register_as("stylist", style).unwrap();
    let spec = Spec::parse(
        r#"version: 1
root: desk
models:
  planner: { provider: scripted }
agents:
  desk: { kind: supervisor, agents: [style, again], model: planner, output_key: story }
  style: { kind: registry, name: style_editor }
  again: { kind: registry, name: stylist }
"#,
        "desk.yaml",
    )
    .unwrap();
    let err = spec.build_with(&BuildContext::new().registry(registry)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "desk.yaml:6:45: agent `desk`: field `agents`: `again` is the agent named `style_editor`, as `style` is: a \
         supervisor chooses its sub-agents by name, so each must be another agent"
    );
}

/// A compute agent whose `inputs:` leave out a key its expression reads waits for the async agent producing
/// it, as a declared input's reader does (the crash soak's workflow 2 read it undefined under load).
#[tokio::test]
async fn a_compute_agent_waits_for_an_async_key_it_reads_beyond_its_inputs() {
    let registry = AgentRegistry::new();
    let slow = FnAgent::from_async("slow_writer", |_| async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        Ok(json!("late"))
    })
    .output_key("k")
    .asynchronous(true)
    .build();
    registry.register(slow).unwrap();
    let yaml = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [slow, reader], output_key: out }\n  \
                slow: { kind: registry, name: slow_writer }\n  \
                reader: { kind: compute, value: \"k ~ '!' ~ tag\", inputs: [tag], output_key: out }\n";
    let spec = Spec::parse(yaml, "late.yaml").unwrap();
    let built = spec.build_with(&BuildContext::new().registry(registry)).unwrap();
    let out = built.root.invoke().input("tag", "t").await.unwrap();
    assert_eq!(out.output(), Some(&json!("late!t")));
}
