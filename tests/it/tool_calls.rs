//! Durable tool calls (SPEC.md §4) through the Rust API, on a sled store: approvals (approve, edit, reject,
//! respond; a stale hash and a second answer refused; two approvals of one turn), the loop continued from the
//! journal (an answered model turn not asked again, a finished call not run again), and a call with effect
//! `once` cut by an abandoned run that comes back in doubt. Crashes of real processes are in the process tests.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agentic::agents::ApprovalRequest;
use agentic::agents::model::{ChatMessage, ChatModel, ChatRequest, ChatResponse, ModelError, ModelInfo, ToolCall};
use agentic::engine::{
    CallEntry, Effect, PendingKind, RespondError, StoreRef, TokenUsage, ToolCallStatus, respond_as, tool_args_hash,
};
use agentic::prelude::*;
use serde_json::{Value, json};

/// A model answering from a script and keeping every request it got.
struct Recorder {
    info: ModelInfo,
    replies: Mutex<VecDeque<ChatResponse>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Recorder {
    fn new(replies: Vec<ChatResponse>) -> Arc<Recorder> {
        let info = ModelInfo {
            provider: "recorder".into(),
            server: "recorder".into(),
            model: "recorder".into(),
            json_schema: false,
            tools: true,
            prices: None,
            limits: Default::default(),
            name: None,
        };
        Arc::new(Recorder { info, replies: Mutex::new(replies.into()), requests: Mutex::new(Vec::new()) })
    }

    fn asked(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// The tool results the last request carried, as the model read them.
    fn last_results(&self) -> Vec<String> {
        let requests = self.requests.lock().unwrap();
        let last = requests.last().unwrap();
        last.messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }
}

struct Shared(Arc<Recorder>);

impl ChatModel for Shared {
    fn info(&self) -> &ModelInfo {
        &self.0.info
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        self.0.requests.lock().unwrap().push(request);
        let reply = self.0.replies.lock().unwrap().pop_front();
        Ok(reply.unwrap_or_else(|| ChatResponse::text_reply("(no more replies)", TokenUsage::default())))
    }
}

fn calling(calls: &[(&str, &str, Value)]) -> ChatResponse {
    let calls = calls.iter().map(|(id, name, args)| ToolCall::new(*id, *name, args.clone())).collect();
    let mut r = ChatResponse::text_reply("", TokenUsage { input: 10, output: 5 });
    r.message = ChatMessage::assistant_tool_calls(calls);
    r
}

fn text(t: &str) -> ChatResponse {
    ChatResponse::text_reply(t, TokenUsage { input: 10, output: 5 })
}

/// The refund desk's tool: appends each call's amount to `ledger`; refunds over 100 need approval.
fn refund(ledger: Arc<Mutex<Vec<i64>>>) -> Tool {
    let schema = json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]});
    Tool::from_json("refund", "Refunds an amount", schema, move |args: Value| {
        let ledger = ledger.clone();
        async move {
            let amount = args["amount"].as_i64().unwrap_or_default();
            ledger.lock().unwrap().push(amount);
            Ok(json!({"refunded": amount}))
        }
    })
    .effect(Effect::Once)
    .approve(|call: &ApprovalRequest<'_>| call.args["amount"].as_i64().unwrap_or_default() > 100)
}

fn desk(model: &Arc<Recorder>, ledger: &Arc<Mutex<Vec<i64>>>) -> AgentRef {
    LlmAgent::builder(ChatModelRef::new(Shared(model.clone())))
        .name("desk")
        .user("Handle: {{ request }}")
        .tools([refund(ledger.clone())])
        .output_key("reply")
        .build()
        .unwrap()
}

fn sled() -> (tempfile::TempDir, StoreRef) {
    let dir = tempfile::tempdir().unwrap();
    let store: StoreRef = Arc::new(SledStore::open(dir.path().join("db")).unwrap());
    (dir, store)
}

async fn tool_entries(store: &StoreRef, run_id: &str) -> Vec<(u32, ToolCallStatus, Value, Option<String>)> {
    store
        .records_dyn(run_id)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|r| r.calls)
        .filter_map(|c| match c {
            CallEntry::Tool(t) => Some((t.n, t.status, t.args, t.by)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_refund_over_the_threshold_waits_and_runs_once_with_the_edited_amount() {
    let (_dir, store) = sled();
    let model = Recorder::new(vec![calling(&[("c1", "refund", json!({"amount": 150}))]), text("Refunded 120.")]);
    let ledger = Arc::new(Mutex::new(Vec::new()));
    let agent = desk(&model, &ledger);
    let first =
        agent.invoke().memory_id("r1").input("request", "refund order 7").store_ref(store.clone()).await.unwrap();
    let pending = first.pending().to_vec();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, "tool:root:0");
    assert_eq!(pending[0].kind, PendingKind::ToolCall);
    assert_eq!(pending[0].data["tool"], "refund");
    assert_eq!(pending[0].data["args"], json!({"amount": 150}));
    assert_eq!(pending[0].data["args_hash"], json!(tool_args_hash("refund", &json!({"amount": 150}))));
    assert!(ledger.lock().unwrap().is_empty(), "nothing refunded before the approval");

    // A stale hash is refused, a wrong edit is refused; nothing is recorded for either.
    let stale = respond_as(&store, "r1", Some("tool:root:0"), json!({"decision": "approve", "args_hash": "00"}), None);
    assert!(matches!(stale.await, Err(RespondError::StaleAnswer { .. })));
    let bad = json!({"decision": "edit", "args": {"amount": "all"}});
    let err = respond_as(&store, "r1", Some("tool:root:0"), bad, None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "run `r1`: response `tool:root:0`: field `amount` must be of type integer, found \"all\""
    );
    let edit = json!({"decision": "edit", "args": {"amount": 120}});
    respond_as(&store, "r1", Some("tool:root:0"), edit.clone(), Some("cli:ana")).await.unwrap();
    let twice = respond_as(&store, "r1", Some("tool:root:0"), edit, Some("cli:bo")).await;
    assert!(matches!(twice, Err(RespondError::AlreadyAnswered { .. })));

    let done = agent.resume("r1").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("Refunded 120.")));
    assert_eq!(*ledger.lock().unwrap(), vec![120], "the edited amount, once");
    assert_eq!(model.asked(), 2, "the answered model turn is not asked again");
    assert_eq!(model.last_results(), vec![r#"{"refunded":120}"#.to_string()]);
    let entries = tool_entries(&store, "r1").await;
    let statuses: Vec<(ToolCallStatus, Option<String>)> = entries.iter().map(|e| (e.1, e.3.clone())).collect();
    assert_eq!(
        statuses,
        vec![
            (ToolCallStatus::AwaitingApproval, None),
            (ToolCallStatus::Edited, Some("cli:ana".into())),
            (ToolCallStatus::Started, None),
            (ToolCallStatus::Finished, None),
        ]
    );
    assert_eq!(entries[3].2, json!({"amount": 120}));
    let image = store.load_dyn("r1").await.unwrap();
    let decisions: Vec<Value> = image.decisions.iter().map(agentic::engine::DecisionRecord::to_json).collect();
    assert_eq!(
        decisions,
        [json!({"seq": 3, "path": "root", "n": 0, "tool": "refund", "decision": "edited", "args": {"amount": 120},
                "by": "cli:ana"})]
    );
}

#[tokio::test]
async fn a_rejection_reaches_the_model_and_a_response_stands_in_for_the_tool() {
    let (_dir, store) = sled();
    let model = Recorder::new(vec![
        calling(&[("c1", "refund", json!({"amount": 500})), ("c2", "refund", json!({"amount": 900}))]),
        text("Done."),
    ]);
    let ledger = Arc::new(Mutex::new(Vec::new()));
    let agent = desk(&model, &ledger);
    let first = agent.invoke().memory_id("r2").input("request", "two refunds").store_ref(store.clone()).await.unwrap();
    let ids: Vec<&str> = first.pending().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["tool:root:0", "tool:root:1"], "both calls of the turn wait together");
    // Answered in the other order.
    let respond = json!({"decision": "respond", "result": {"refunded": 0, "note": "already refunded"}});
    respond_as(&store, "r2", Some("tool:root:1"), respond, Some("ops")).await.unwrap();
    let reject = json!({"decision": "reject", "message": "over the limit"});
    respond_as(&store, "r2", Some("tool:root:0"), reject, Some("ops")).await.unwrap();
    let done = agent.resume("r2").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("Done.")));
    assert!(ledger.lock().unwrap().is_empty(), "neither call ran");
    assert_eq!(
        model.last_results(),
        vec!["rejected: over the limit".to_string(), r#"{"refunded":0,"note":"already refunded"}"#.to_string()]
    );
}

#[tokio::test]
async fn small_refunds_run_without_approval_and_an_abandoned_call_comes_back_in_doubt() {
    let (_dir, store) = sled();
    // The tool blocks until released: the run is dropped while the call is under way (its start committed).
    let gate = Arc::new(tokio::sync::Notify::new());
    let sent = Arc::new(Mutex::new(0));
    let schema = json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]});
    let slow = {
        let (gate, sent) = (gate.clone(), sent.clone());
        Tool::from_json("charge", "Charges a card", schema, move |_args: Value| {
            let (gate, sent) = (gate.clone(), sent.clone());
            async move {
                *sent.lock().unwrap() += 1;
                gate.notified().await;
                Ok(json!("charged"))
            }
        })
        .effect(Effect::Once)
    };
    let model = Recorder::new(vec![calling(&[("c1", "charge", json!({"amount": 30}))]), text("Charged.")]);
    let agent = LlmAgent::builder(ChatModelRef::new(Shared(model.clone())))
        .name("cashier")
        .user("{{ request }}")
        .tools([slow])
        .output_key("reply")
        .build()
        .unwrap();
    let run = agent.invoke().memory_id("r3").input("request", "charge 30").store_ref(store.clone());
    let abandoned = tokio::time::timeout(std::time::Duration::from_millis(500), run).await;
    assert!(abandoned.is_err(), "the run was still in the tool call");
    assert_eq!(*sent.lock().unwrap(), 1);

    let again = agent.resume("r3").store_ref(store.clone()).await.unwrap();
    let pending = again.pending().to_vec();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, "doubt:root:0");
    assert_eq!(pending[0].kind, PendingKind::InDoubt);
    assert_eq!(pending[0].data["args"], json!({"amount": 30}));
    assert_eq!(*sent.lock().unwrap(), 1, "never sent again by itself");
    assert_eq!(model.asked(), 1, "the answered turn is not asked again");

    respond_as(&store, "r3", Some("doubt:root:0"), json!({"result": "charged (seen on the card)"}), Some("ops"))
        .await
        .unwrap();
    let done = agent.resume("r3").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("Charged.")));
    assert_eq!(*sent.lock().unwrap(), 1);
    assert_eq!(model.last_results(), vec!["charged (seen on the card)".to_string()]);
    let statuses: Vec<ToolCallStatus> = tool_entries(&store, "r3").await.into_iter().map(|e| e.1).collect();
    assert_eq!(statuses, [ToolCallStatus::Started, ToolCallStatus::InDoubt, ToolCallStatus::Finished]);
}

/// A tool that counts its calls and answers `n` back.
fn counted(name: &str, count: Arc<Mutex<usize>>) -> Tool {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    Tool::from_json(name, "Counts", schema, move |args: Value| {
        let count = count.clone();
        async move {
            *count.lock().unwrap() += 1;
            Ok(args["n"].clone())
        }
    })
    .effect(Effect::Once)
}

#[tokio::test]
async fn a_budget_suspension_mid_loop_resumes_without_running_the_tools_again() {
    let (_dir, store) = sled();
    let model = Recorder::new(vec![
        calling(&[("c1", "step", json!({"n": 1}))]),
        calling(&[("c2", "step", json!({"n": 2}))]),
        calling(&[("c3", "step", json!({"n": 3}))]),
        text("three steps"),
    ]);
    let count = Arc::new(Mutex::new(0));
    let agent = LlmAgent::builder(ChatModelRef::new(Shared(model.clone())))
        .name("stepper")
        .user("go")
        .tools([counted("step", count.clone())])
        .output_key("out")
        .budget(agentic::engine::budget::Budget { tokens: Some(30), ..Default::default() })
        .build()
        .unwrap();
    // 15 tokens a turn: the second turn reaches 30 and the third crosses it.
    let first = agent.invoke().memory_id("b1").store_ref(store.clone()).await.unwrap();
    let ids: Vec<&str> = first.pending().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["budget:root"]);
    let (asked, ran) = (model.asked(), *count.lock().unwrap());
    respond_as(&store, "b1", None, json!(1000), Some("cli:ana")).await.unwrap();
    let done = agent.resume("b1").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("three steps")));
    assert_eq!(*count.lock().unwrap(), 3, "each tool call ran once ({ran} before the suspension)");
    assert_eq!(model.asked(), 4, "each model turn was asked once ({asked} before the suspension)");
}

#[tokio::test]
async fn a_fork_at_a_call_continues_the_loop_from_there() {
    let (_dir, store) = sled();
    let model = Recorder::new(vec![
        calling(&[("c1", "step", json!({"n": 1}))]),
        calling(&[("c2", "step", json!({"n": 2}))]),
        text("done"),
        // The fork's own later turn.
        text("forked"),
    ]);
    let count = Arc::new(Mutex::new(0));
    let agent = LlmAgent::builder(ChatModelRef::new(Shared(model.clone())))
        .name("stepper")
        .user("go")
        .tools([counted("step", count.clone())])
        .output_key("out")
        .build()
        .unwrap();
    let done = agent.invoke().memory_id("f1").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("done")));
    assert_eq!((*count.lock().unwrap(), model.asked()), (2, 3));
    // The step that holds the first call's result.
    let records = store.records_dyn("f1").await.unwrap();
    let at = records
        .iter()
        .find(|r| {
            r.calls.iter().any(|c| matches!(c, CallEntry::Tool(t) if t.n == 0 && t.status == ToolCallStatus::Finished))
        })
        .map(|r| r.seq)
        .unwrap();
    agentic::engine::fork(&store, "f1", at, Some("f2".into())).await.unwrap();
    let forked = agent.resume("f2").store_ref(store.clone()).await.unwrap();
    assert_eq!(forked.output(), Some(&json!("forked")));
    assert_eq!(*count.lock().unwrap(), 2, "the fork did not run the first call again");
    assert_eq!(model.asked(), 4, "the fork asked from the second turn on: one request");
    assert_eq!(model.last_results(), vec!["1".to_string()]);
}

#[tokio::test]
async fn without_a_store_the_in_process_checkpoint_resumes_the_root_agent_with_its_inputs() {
    let model = Recorder::new(vec![calling(&[("c1", "refund", json!({"amount": 150}))]), text("Refunded.")]);
    let ledger = Arc::new(Mutex::new(Vec::new()));
    let agent = desk(&model, &ledger);
    let first = agent.invoke().input("request", "refund order 7").await.unwrap();
    assert_eq!(first.pending()[0].id, "tool:root:0");
    let done = first.resume().answer("tool:root:0", "approve").await.unwrap();
    assert_eq!(done.output(), Some(&json!("Refunded.")));
    assert_eq!(*ledger.lock().unwrap(), vec![150]);
    assert_eq!(model.asked(), 2);
}

#[tokio::test]
async fn an_async_agent_cut_in_its_tool_call_continues_its_loop_on_resume() {
    let (_dir, store) = sled();
    // The first send of the tool never answers; the run is abandoned there and resumed.
    let sends = Arc::new(Mutex::new(0));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let lookup = {
        let sends = sends.clone();
        Tool::from_json("lookup", "Looks up", schema, move |args: Value| {
            let sends = sends.clone();
            async move {
                let first = {
                    let mut n = sends.lock().unwrap();
                    *n += 1;
                    *n == 1
                };
                if first {
                    std::future::pending::<()>().await;
                }
                Ok(json!(args["n"].as_i64().unwrap_or_default() * 10))
            }
        })
    };
    let model = Recorder::new(vec![calling(&[("c1", "lookup", json!({"n": 4}))]), text("forty")]);
    let desk = LlmAgent::builder(ChatModelRef::new(Shared(model.clone())))
        .name("desk")
        .user("go")
        .tools([lookup])
        .output_key("reply")
        .asynchronous(true)
        .build()
        .unwrap();
    let reader = FnAgent::builder("reader", |ctx| {
        let reply = ctx.input("reply").cloned().unwrap_or(Value::Null);
        Box::pin(async move { Ok(json!(format!("read: {}", reply.as_str().unwrap_or("?")))) })
    })
    .inputs(["reply"])
    .output_key("out")
    .build();
    let flow = Sequence::builder().name("flow").sub_agents([desk, reader]).output_key("out").build().unwrap();
    let run = flow.invoke().memory_id("a1").store_ref(store.clone());
    assert!(tokio::time::timeout(std::time::Duration::from_millis(500), run).await.is_err());
    assert_eq!((*sends.lock().unwrap(), model.asked()), (1, 1));

    let done = flow.resume("a1").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("read: forty")));
    assert_eq!(*sends.lock().unwrap(), 2, "effect none: sent again");
    assert_eq!(model.asked(), 2, "the async agent's answered turn is not asked again");
    assert_eq!(model.last_results(), vec!["40".to_string()]);
}

/// A tool `pay` (effect once) counting its calls, whose calls with `amount` in `ask` wait for approval.
fn pay(count: Arc<Mutex<usize>>, ask: &'static [i64]) -> Tool {
    counted("pay", count).approve(move |call: &ApprovalRequest<'_>| ask.contains(&call.args["n"].as_i64().unwrap_or(0)))
}

fn paying(model: &Arc<Recorder>, count: &Arc<Mutex<usize>>, ask: &'static [i64], tokens: u64) -> AgentRef {
    LlmAgent::builder(ChatModelRef::new(Shared(model.clone())))
        .name("desk")
        .user("pay")
        .tools([pay(count.clone(), ask)])
        .output_key("out")
        .budget(agentic::engine::budget::Budget { tokens: Some(tokens), ..Default::default() })
        .build()
        .unwrap()
}

fn three_payments() -> Arc<Recorder> {
    Recorder::new(vec![
        calling(&[("c1", "pay", json!({"n": 1}))]),
        calling(&[("c2", "pay", json!({"n": 2}))]),
        calling(&[("c3", "pay", json!({"n": 3}))]),
        text("all paid"),
    ])
}

#[tokio::test]
async fn the_budget_counts_the_turns_before_an_approval_and_stops_at_the_crossing_turn() {
    let (_dir, store) = sled();
    let (model, count) = (three_payments(), Arc::new(Mutex::new(0)));
    // 15 tokens a turn, a 40-token budget: the third turn (45) crosses it.
    let agent = paying(&model, &count, &[1], 40);
    let first = agent.invoke().memory_id("ba").store_ref(store.clone()).await.unwrap();
    assert_eq!(first.pending()[0].id, "tool:root:0");
    respond_as(&store, "ba", None, json!("approve"), Some("cli:ana")).await.unwrap();
    let second = agent.resume("ba").store_ref(store.clone()).await.unwrap();
    let pending: Vec<&str> = second.pending().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(pending, ["budget:root"], "the first turn's 15 tokens still count after the approval");
    assert!(second.pending()[0].prompt.contains("(45 tokens of 40)"), "{}", second.pending()[0].prompt);
    assert_eq!((*count.lock().unwrap(), model.asked()), (2, 3), "pay(3) did not run");
}

#[tokio::test]
async fn a_raised_budget_holds_through_a_later_approval_of_the_same_invocation() {
    let (_dir, store) = sled();
    let (model, count) = (three_payments(), Arc::new(Mutex::new(0)));
    // A 20-token budget: the second turn (30) crosses it; raised to 40, the third (45) crosses the raise.
    let agent = paying(&model, &count, &[2], 20);
    let first = agent.invoke().memory_id("bb").store_ref(store.clone()).await.unwrap();
    assert_eq!(first.pending()[0].id, "budget:root");
    respond_as(&store, "bb", None, json!(40), Some("cli:ana")).await.unwrap();
    let second = agent.resume("bb").store_ref(store.clone()).await.unwrap();
    assert_eq!(second.pending()[0].id, "tool:root:1", "pay(2) waits for approval");
    respond_as(&store, "bb", None, json!("approve"), Some("cli:ana")).await.unwrap();
    let third = agent.resume("bb").store_ref(store.clone()).await.unwrap();
    assert_eq!(third.pending()[0].id, "budget:root");
    assert!(third.pending()[0].prompt.contains("(45 tokens of 40)"), "the raise held: {}", third.pending()[0].prompt);
    assert_eq!((*count.lock().unwrap(), model.asked()), (2, 3));
}
