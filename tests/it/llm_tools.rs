//! The LLM agent's tools: the tool loop with a scripted model (exact messages), concurrent calls, errors fed
//! back, the iteration bound, tool events, compensation of tool calls by `compensate_on_error` composites,
//! streaming agents' token events, and the tool loop and streaming against a loopback OpenAI server.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::agents::model::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, ModelError, ModelInfo, ScriptedReply, StreamEvent,
    ToolCall, ToolSpec,
};
use agentic::agents::{ToolCallInfo, model::ChatModelRef};
use agentic::engine::{RunEvent, TokenUsage};
use agentic::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

// openai, sse: the model over a loopback server, a streamed answer.
use crate::common;
use common::openai;

type Log = Arc<Mutex<Vec<String>>>;

#[derive(Deserialize, schemars::JsonSchema)]
struct CityArgs {
    /// The city.
    city: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct AmountArgs {
    /// The amount, in cents.
    amount: i64,
}

fn weather() -> Tool {
    Tool::new("weather", "Current weather in a city", |a: CityArgs| async move {
        Ok(json!({"city": a.city, "sky": "sunny", "celsius": 21}))
    })
}

fn calls(json_calls: Value) -> String {
    json!({ "tool_calls": json_calls }).to_string()
}

/// The events of a run consumed through `invoke().events()`, and its outcome.
async fn run_with_events(request: agentic::engine::InvokeRequest) -> (Vec<RunEvent>, Result<RunOutcome, AgentError>) {
    let (mut events, handle) = request.events();
    let mut seen = Vec::new();
    while let Some(e) = events.recv().await {
        seen.push(e);
    }
    (seen, handle.await.unwrap())
}

#[tokio::test]
async fn the_model_calls_a_tool_gets_the_result_and_answers() {
    let model = ScriptedModel::new([
        calls(json!([{"name": "weather", "arguments": {"city": "Paris"}}])),
        "It is sunny in Paris, 21 degrees.".to_string(),
    ]);
    let agent = LlmAgent::builder(model.clone())
        .name("forecaster")
        .system("You are terse.")
        .user("Weather in {{ city }}?")
        .tools([weather()])
        .output_key("forecast")
        .build()
        .unwrap();
    let (events, outcome) = run_with_events(agent.invoke().memory_id("w1").input("city", "Paris")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.output(), Some(&json!("It is sunny in Paris, 21 degrees.")));

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let spec = ToolSpec::new(
        "weather",
        "Current weather in a city",
        json!({
            "title": "CityArgs",
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"]
        }),
    );
    assert!(requests.iter().all(|r| r.tools == [spec.clone()]), "both requests offer the tool");
    assert_eq!(
        requests[1].messages,
        [
            ChatMessage::system("You are terse."),
            ChatMessage::user("Weather in Paris?"),
            ChatMessage::assistant_tool_calls(vec![ToolCall::new("call_1", "weather", json!({"city": "Paris"}))]),
            ChatMessage::tool_result("call_1", r#"{"city":"Paris","sky":"sunny","celsius":21}"#),
        ]
    );

    // Tokens of both rounds (the scripted model counts words): inputs 6 + 7, outputs 2 + 7.
    let history = outcome.history().await.unwrap();
    assert_eq!(history.last().and_then(|r| r.tokens), Some(TokenUsage { input: 13, output: 9 }));

    let tool_events: Vec<&RunEvent> =
        events.iter().filter(|e| matches!(e, RunEvent::ToolStarted { .. } | RunEvent::ToolFinished { .. })).collect();
    assert_eq!(
        tool_events,
        [
            &RunEvent::ToolStarted {
                run_id: "w1".into(),
                path: "root".into(),
                tool: "weather".into(),
                arguments: json!({"city": "Paris"}),
            },
            &RunEvent::ToolFinished {
                run_id: "w1".into(),
                path: "root".into(),
                tool: "weather".into(),
                result: json!({"city": "Paris", "sky": "sunny", "celsius": 21}),
            },
        ]
    );
}

#[tokio::test]
async fn two_calls_in_one_turn_run_concurrently_and_their_results_come_back_in_call_order() {
    // Both calls must reach the barrier before either can finish: sequential execution would hang.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let finished: Log = Arc::default();
    let (b, f) = (barrier.clone(), finished.clone());
    let lookup = Tool::new("lookup", "Look a key up", move |a: CityArgs| {
        let (b, f) = (b.clone(), f.clone());
        async move {
            b.wait().await;
            // The first call finishes last.
            if a.city == "Paris" {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            f.lock().unwrap().push(a.city.clone());
            Ok(format!("{} is nice", a.city))
        }
    });
    let model = ScriptedModel::new([
        calls(json!([
            {"name": "lookup", "arguments": {"city": "Paris"}},
            {"name": "lookup", "arguments": {"city": "Oslo"}}
        ])),
        "Both are nice.".to_string(),
    ]);
    let agent =
        LlmAgent::builder(model.clone()).name("tourist").user("Paris or Oslo?").tools([lookup]).build().unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), agent.invoke()).await.expect("no deadlock").unwrap();
    assert_eq!(outcome.output(), Some(&json!("Both are nice.")));
    assert_eq!(*finished.lock().unwrap(), ["Oslo", "Paris"]);
    assert_eq!(
        model.requests()[1].messages,
        [
            ChatMessage::user("Paris or Oslo?"),
            ChatMessage::assistant_tool_calls(vec![
                ToolCall::new("call_1", "lookup", json!({"city": "Paris"})),
                ToolCall::new("call_2", "lookup", json!({"city": "Oslo"})),
            ]),
            ChatMessage::tool_result("call_1", "Paris is nice"),
            ChatMessage::tool_result("call_2", "Oslo is nice"),
        ]
    );
}

#[tokio::test]
async fn tool_errors_are_fed_back_and_the_model_recovers() {
    let credit = Tool::new("credit", "Credit the account", |a: AmountArgs| async move {
        if a.amount <= 0 { Err(format!("the amount must be positive, not {}", a.amount)) } else { Ok(json!(a.amount)) }
    });
    let model = ScriptedModel::new([
        calls(json!([{"name": "credit", "arguments": {"amount": "lots"}}])),
        calls(json!([{"name": "credit", "arguments": {"amount": -5}}, {"name": "refund", "arguments": {}}])),
        calls(json!([{"name": "credit", "arguments": {"amount": 5}}])),
        "Credited 5.".to_string(),
    ]);
    let agent = LlmAgent::builder(model.clone()).name("teller").user("Credit five.").tools([credit]).build().unwrap();
    let outcome = agent.invoke().await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("Credited 5.")));
    let last = &model.requests()[3].messages;
    let tool_results: Vec<(&str, &str)> = last
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { tool_call_id, content } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        tool_results,
        [
            ("call_1", "error: invalid arguments: invalid type: string \"lots\", expected i64"),
            ("call_1", "error: the amount must be positive, not -5"),
            ("call_2", "error: unknown tool `refund` (the tools are: credit)"),
            ("call_1", "5"),
        ]
    );
    assert_eq!(last.len(), 1 + 3 + 4, "the user message, three assistant messages, four tool results");
}

#[tokio::test]
async fn exceeding_the_tool_round_bound_fails_naming_the_agent_and_the_bound() {
    let pings: Log = Arc::default();
    let p = pings.clone();
    let ping = Tool::from_json("ping", "Ping", json!({"type": "object", "properties": {}}), move |_args| {
        let p = p.clone();
        async move {
            p.lock().unwrap().push("ping".into());
            Ok(json!("pong"))
        }
    });
    let ask_ping = calls(json!([{"name": "ping", "arguments": {}}]));
    let model = ScriptedModel::new([ask_ping.clone(), ask_ping.clone(), ask_ping, "never".to_string()]);
    let agent = LlmAgent::builder(model.clone())
        .name("looper")
        .user("Ping forever.")
        .tools([ping])
        .max_tool_iterations(2)
        .build()
        .unwrap();
    let err = agent.invoke().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `looper` (root) failed: model `scripted` at scripted still called tools (ping) after 2 tool rounds; \
         the bound is max_tool_iterations = 2"
    );
    assert_eq!(pings.lock().unwrap().len(), 2);
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test]
async fn tools_get_the_call_identity_for_idempotency() {
    let keys: Log = Arc::default();
    let k = keys.clone();
    let charge = Tool::with_call("charge", "Charge the card", move |call: ToolCallInfo, a: AmountArgs| {
        let k = k.clone();
        async move {
            k.lock().unwrap().push(format!("{} {} {}", call.idempotency_key, call.agent, a.amount));
            Ok(json!("charged"))
        }
    });
    let model =
        ScriptedModel::new([calls(json!([{"name": "charge", "arguments": {"amount": 3}}])), "Done.".to_string()]);
    let agent = LlmAgent::builder(model).name("cashier").user("Charge 3.").tools([charge]).build().unwrap();
    agent.invoke().memory_id("m1").await.unwrap();
    assert_eq!(*keys.lock().unwrap(), ["m1/root/1/call_1 cashier 3"]);
}

#[test]
fn two_tools_with_one_name_are_refused() {
    let err = LlmAgent::builder(ScriptedModel::new(["x"]))
        .name("twins")
        .user("hi")
        .tools([weather(), weather()])
        .build()
        .unwrap_err();
    assert_eq!(err.to_string(), "`twins`: two tools are named `weather`");
}

// --- Compensation through LLM tool agents -----------------------------------------------------------------

/// An LLM agent whose model calls tool `name` with `amount`, then answers. The tool logs `name:amount`; its
/// compensation logs `un<name>:amount` (and fails when `undo_fails`).
fn tool_agent(name: &'static str, amount: i64, log: Log, undo_fails: bool) -> AgentRef {
    let undo_log = log.clone();
    let tool = Tool::new(name, format!("{name} the account"), move |a: AmountArgs| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(format!("{name}:{}", a.amount));
            Ok(json!({ "done": a.amount }))
        }
    })
    .compensate(move |args, result| {
        let log = undo_log.clone();
        async move {
            assert_eq!(result["done"], args["amount"]);
            log.lock().unwrap().push(format!("un{name}:{}", args["amount"]));
            if undo_fails { Err("ledger offline".to_string()) } else { Ok(()) }
        }
    });
    let model = ScriptedModel::new([
        calls(json!([{"name": name, "arguments": {"amount": amount}}])),
        format!("{name} of {amount} done"),
    ]);
    LlmAgent::builder(model)
        .name(format!("{name}_agent"))
        .user(&format!("{name} {amount}"))
        .tools([tool])
        .build()
        .unwrap()
}

fn failing() -> AgentRef {
    let model = ScriptedModel::new([ScriptedReply::Error("smtp down".into())]);
    LlmAgent::builder(model).name("notify").user("Notify the customer.").build().unwrap()
}

#[tokio::test]
async fn a_failure_compensates_the_tool_calls_of_llm_agents_in_reverse_order() {
    let log: Log = Arc::default();
    let seq = Sequence::builder()
        .sub_agents([
            tool_agent("credit", 100, log.clone(), false),
            tool_agent("debit", 100, log.clone(), false),
            failing(),
        ])
        .compensate_on_error(true)
        .build()
        .unwrap();
    let err = seq.invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `notify` (root/2) failed: smtp down");
    assert_eq!(*log.lock().unwrap(), ["credit:100", "debit:100", "undebit:100", "uncredit:100"]);
}

#[tokio::test]
async fn a_failing_tool_compensation_does_not_stop_the_others() {
    let log: Log = Arc::default();
    let seq = Sequence::builder()
        .sub_agents([
            tool_agent("credit", 100, log.clone(), false),
            tool_agent("debit", 100, log.clone(), true),
            failing(),
        ])
        .compensate_on_error(true)
        .build()
        .unwrap();
    seq.invoke().await.unwrap_err();
    assert_eq!(*log.lock().unwrap(), ["credit:100", "debit:100", "undebit:100", "uncredit:100"]);
}

#[tokio::test]
async fn without_the_flag_no_tool_call_is_compensated() {
    let log: Log = Arc::default();
    let seq = Sequence::builder()
        .sub_agents([
            tool_agent("credit", 100, log.clone(), false),
            tool_agent("debit", 100, log.clone(), false),
            failing(),
        ])
        .build()
        .unwrap();
    seq.invoke().await.unwrap_err();
    assert_eq!(*log.lock().unwrap(), ["credit:100", "debit:100"]);
}

#[tokio::test]
async fn failed_tool_calls_are_not_compensated() {
    let log: Log = Arc::default();
    let l = log.clone();
    let credit = Tool::new("credit", "Credit", |a: AmountArgs| async move {
        if a.amount > 50 { Err("over the limit".to_string()) } else { Ok(json!(a.amount)) }
    })
    .compensation_name("refund")
    .compensate(move |args, _| {
        let l = l.clone();
        async move {
            l.lock().unwrap().push(format!("refund:{}", args["amount"]));
            Ok(())
        }
    });
    let model = ScriptedModel::new([
        calls(
            json!([{"name": "credit", "arguments": {"amount": 80}}, {"name": "credit", "arguments": {"amount": 30}}]),
        ),
        "Credited 30.".to_string(),
    ]);
    let agent = LlmAgent::builder(model).name("teller").user("Credit.").tools([credit]).build().unwrap();
    let seq = Sequence::builder().sub_agents([agent, failing()]).compensate_on_error(true).build().unwrap();
    seq.invoke().await.unwrap_err();
    assert_eq!(*log.lock().unwrap(), ["refund:30"]);
}

// --- Streaming ------------------------------------------------------------------------------------------

/// A model that streams its one answer in pieces.
struct Pieces {
    info: ModelInfo,
    pieces: Vec<&'static str>,
}

impl Pieces {
    fn new(pieces: Vec<&'static str>) -> Self {
        let info = ModelInfo {
            provider: "pieces".into(),
            server: "pieces".into(),
            model: "pieces".into(),
            json_schema: false,
            tools: false,
            prices: None,
            limits: Default::default(),
            name: None,
        };
        Pieces { info, pieces }
    }
}

impl ChatModel for Pieces {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn chat(&self, _request: ChatRequest) -> Result<ChatResponse, ModelError> {
        Ok(ChatResponse::text_reply(self.pieces.concat(), TokenUsage { input: 1, output: self.pieces.len() as u64 }))
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let done = self.chat(request).await?;
        let mut events: Vec<Result<StreamEvent, ModelError>> =
            self.pieces.iter().map(|p| Ok(StreamEvent::Token((*p).to_string()))).collect();
        events.push(Ok(StreamEvent::Done(done)));
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

fn tokens_of(events: &[RunEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Token { path, text, .. } => Some((path.clone(), text.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_streaming_agent_reports_its_tokens_as_events_and_answers_the_same() {
    let model = ChatModelRef::new(Pieces::new(vec!["Once ", "upon ", "a time."]));
    let streaming = LlmAgent::builder(model.clone())
        .name("teller")
        .user("A story.")
        .streaming(true)
        .output_key("story")
        .build()
        .unwrap();
    let seq = Sequence::builder().name("story").sub_agents([streaming]).output_key("story").build().unwrap();
    let (events, outcome) = run_with_events(seq.invoke().memory_id("s1")).await;
    let outcome = outcome.unwrap();
    let tokens = tokens_of(&events);
    assert_eq!(
        tokens,
        [
            ("root/0".to_string(), "Once ".to_string()),
            ("root/0".into(), "upon ".into()),
            ("root/0".into(), "a time.".into())
        ]
    );
    assert!(events.iter().filter(|e| matches!(e, RunEvent::Token { .. })).all(|e| e.run_id() == "s1"));
    let joined: String = tokens.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(outcome.output(), Some(&json!(joined)));
    assert_eq!(outcome.output(), Some(&json!("Once upon a time.")));

    // Without streaming: the same answer, no token events.
    let plain = LlmAgent::builder(model).name("teller").user("A story.").build().unwrap();
    let (events, outcome) = run_with_events(plain.invoke()).await;
    assert_eq!(outcome.unwrap().output(), Some(&json!("Once upon a time.")));
    assert!(tokens_of(&events).is_empty());
}

// --- Against a loopback OpenAI-compatible server --------------------------------------------------------

fn completion(message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    })
}

#[tokio::test]
async fn the_tool_loop_over_a_loopback_openai_server() {
    let server = MockServer::start().await;
    let tool_call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_abc", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
    ]});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(tool_call, "tool_calls")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion(json!({"role": "assistant", "content": "Sunny, 21 degrees."}), "stop")),
        )
        .mount(&server)
        .await;
    let agent = LlmAgent::builder(openai(&server))
        .name("forecaster")
        .system("You are terse.")
        .user("Weather in {{ city }}?")
        .tools([weather()])
        .build()
        .unwrap();
    let outcome = agent.invoke().input("city", "Paris").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("Sunny, 21 degrees.")));
    let history = outcome.history().await.unwrap();
    assert_eq!(history.last().and_then(|r| r.tokens), Some(TokenUsage { input: 24, output: 6 }));

    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 2);
    let body: Value = serde_json::from_slice(&received[1].body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_abc", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_abc", "content": "{\"city\":\"Paris\",\"sky\":\"sunny\",\"celsius\":21}"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "weather",
                "description": "Current weather in a city",
                "parameters": {
                    "title": "CityArgs",
                    "type": "object",
                    "properties": {"city": {"type": "string", "description": "The city."}},
                    "required": ["city"]
                }
            }}],
            "stream": false
        })
    );
}

#[tokio::test]
async fn a_streaming_agent_over_a_loopback_openai_server() {
    let server = MockServer::start().await;
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Once "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"upon "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"a time."},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#,
    ];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(common::sse(&chunks))
        .mount(&server)
        .await;
    let agent = LlmAgent::builder(openai(&server)).name("teller").user("A story.").streaming(true).build().unwrap();
    let (events, outcome) = run_with_events(agent.invoke()).await;
    let outcome = outcome.unwrap();
    let tokens: Vec<String> = tokens_of(&events).into_iter().map(|(_, t)| t).collect();
    assert_eq!(tokens, ["Once ", "upon ", "a time."]);
    assert_eq!(outcome.output(), Some(&json!("Once upon a time.")));
    let history = outcome.history().await.unwrap();
    assert_eq!(history.last().and_then(|r| r.tokens), Some(TokenUsage { input: 9, output: 4 }));
    let body: Value = serde_json::from_slice(&server.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(body["stream"], json!(true));
}
