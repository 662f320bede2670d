//! Recordings in Rust (SPEC.md §5): a run given a recording `CallTape` records every model call — a
//! supervisor's choices, a decision router's decision, an LLM agent's turns — the journal rebuilds the same
//! calls, and a run replaying them on models that cannot answer gets the same result without a call.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use agentic::agents::LlmAgent;
use agentic::agents::decision::ScriptedDecisionModel;
use agentic::agents::model::ScriptedModel;
use agentic::engine::{
    AgentRef, CallKind, CallTape, CheckpointStore, RecordedCall, ReplayMode, SpecBuilder, recorded_calls,
};
use agentic::planners::{DecisionRouter, Supervisor};
use agentic::prelude::{CompositeBuilderExt, MemoryStore, Sequence};
use serde_json::{Value, json};

fn bank(model: ScriptedModel) -> AgentRef {
    let teller = |name: &str, verb: &'static str| {
        agentic::agents::FnAgent::from_async(name, move |_| async move { Ok(json!(verb)) })
            .description(format!("{verb} money"))
            .build()
    };
    Supervisor::builder()
        .name("bank")
        .sub_agents([teller("withdraw", "withdrew"), teller("credit", "credited")])
        .chat_model(model)
        .output_key("result")
        .build()
        .unwrap()
}

const WITHDRAW: &str = r#"{"agentName": "withdraw", "arguments": {}}"#;
const DONE: &str = r#"{"agentName": "done", "arguments": {"response": "moved"}}"#;

fn sorted(mut calls: Vec<RecordedCall>) -> Vec<RecordedCall> {
    calls.sort_by(|a, b| (&a.path, a.kind.as_str(), a.n).cmp(&(&b.path, b.kind.as_str(), b.n)));
    calls
}

#[tokio::test]
async fn a_supervisor_run_replays_without_its_model_and_the_journal_holds_the_same_calls() {
    let store = MemoryStore::new();
    let tape = Arc::new(CallTape::recording());
    let out = bank(ScriptedModel::new([WITHDRAW, DONE]))
        .invoke()
        .input("request", "move 5")
        .memory_id("rec-bank")
        .store(store.clone())
        .call_tape(tape.clone())
        .await
        .unwrap();
    assert_eq!(out.output(), Some(&json!("withdrew")));
    let recorded = tape.recorded();
    let at: Vec<(&str, CallKind, u32)> = recorded.iter().map(|c| (c.path.as_str(), c.kind, c.n)).collect();
    assert_eq!(at, [("root/2", CallKind::Model, 0), ("root/2", CallKind::Model, 1)], "the supervisor's planner agent");
    assert_eq!(recorded[0].agent.as_deref(), Some("planner"));
    assert_eq!(recorded[1].response["message"]["content"], json!(DONE));

    // The journal rebuilds the same calls (what `agentic calls` prints).
    let records = store.records("rec-bank").await.unwrap();
    let names = agentic::engine::journal_agent_names(&records, &[]);
    assert_eq!(sorted(recorded_calls(&records, &names)), sorted(recorded.clone()));

    // A model with no replies left: every call comes from the recording.
    let replay = Arc::new(CallTape::replaying(recorded.clone(), ReplayMode::Strict));
    let again = bank(ScriptedModel::new(Vec::<&str>::new()))
        .invoke()
        .input("request", "move 5")
        .call_tape(replay.clone())
        .await
        .unwrap();
    assert_eq!(again.output(), Some(&json!("withdrew")));
    assert_eq!((replay.stats().answered, replay.stats().made), (2, 0));

    // Another request: the first call differs, and the strict replay names it.
    let err = bank(ScriptedModel::new(Vec::<&str>::new()))
        .invoke()
        .input("request", "move 6")
        .call_tape(Arc::new(CallTape::replaying(recorded, ReplayMode::Strict)))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "replay: model call 0 of `planner` at root/2 differs from the recording at `messages[1].content`"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_decision_router_and_an_llm_sequence_replay_from_their_recording() {
    let expert = |name: &str| {
        let n = name.to_string();
        agentic::agents::FnAgent::from_async(name, move |_| {
            let n = n.clone();
            async move { Ok(json!(format!("{n} answer"))) }
        })
        .description(format!("Answers {name} questions."))
        .build()
    };
    let router = |model: ScriptedDecisionModel| {
        DecisionRouter::builder()
            .sub_agents([expert("legal"), expert("medical")])
            .decision_model(model)
            .output_key("answer")
            .build()
            .unwrap()
    };
    let tape = Arc::new(CallTape::recording());
    let out = router(ScriptedDecisionModel::new([json!({"legal": 0.2, "medical": 0.8})]))
        .invoke()
        .input("request", "my leg")
        .call_tape(tape.clone())
        .await
        .unwrap();
    assert_eq!(out.output(), Some(&json!("medical answer")));
    let recorded = tape.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].request["decision"]["input"], json!({"request": "my leg"}));
    let replay = Arc::new(CallTape::replaying(recorded, ReplayMode::Strict));
    let again = router(ScriptedDecisionModel::new(Vec::<Value>::new()))
        .invoke()
        .input("request", "my leg")
        .call_tape(replay.clone())
        .await
        .unwrap();
    assert_eq!(again.output(), Some(&json!("medical answer")));
    assert_eq!((replay.stats().answered, replay.stats().made), (1, 0));

    // Two LLM agents in a sequence: a lenient replay with the second one's prompt changed calls only it.
    let system = |second: &str, model: ScriptedModel| {
        Sequence::builder()
            .sub_agents([
                LlmAgent::builder(model.clone()).name("a").user("{{ topic }}").output_key("x").build().unwrap(),
                LlmAgent::builder(model).name("b").user(second).output_key("y").build().unwrap(),
            ])
            .output_key("y")
            .build()
            .unwrap()
    };
    let tape = Arc::new(CallTape::recording());
    system("more on {{ x }}", ScriptedModel::new(["one", "two"]))
        .invoke()
        .input("topic", "t")
        .call_tape(tape.clone())
        .await
        .unwrap();
    let lenient = Arc::new(CallTape::replaying(tape.recorded(), ReplayMode::Lenient));
    let out = system("less on {{ x }}", ScriptedModel::new(["fresh"]))
        .invoke()
        .input("topic", "t")
        .call_tape(lenient.clone())
        .await
        .unwrap();
    assert_eq!(out.output(), Some(&json!("fresh")));
    assert_eq!(out.state().get("x"), Some(&json!("one")), "the first agent's answer is the recorded one");
    assert_eq!((lenient.stats().answered, lenient.stats().made), (1, 1));
}
