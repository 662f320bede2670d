//! Opt-in test of the `local` chat provider (the default model, Qwen2.5 Coder 1.5B Instruct Q4_K_M, or the one
//! `AGENTIC_LOCAL_MODEL` names, run in-process by llama.cpp), offline:
//! a JSON-schema extraction returns the right JSON, a few-shot enum classification always answers a member of
//! the enum, a forced tool call returns its arguments, and a spec with `provider: local` runs both kinds of
//! `llm` steps, and a prompt's prefix is decoded once (the prompt cache) without changing the answer. Prints the
//! load time, each call's wall time and tokens per second.
//!
//! Not part of the default test run (it needs the cargo feature `local`, whose llama.cpp build takes minutes,
//! and the model file). Run it with:
//!
//! ```sh
//! scripts/setup-local-model.sh && cargo test --release --features local --test model_local -- --nocapture
//! ```
//!
//! Without the model file (see `agentic_agents::model::default_local_model_path`) every test says so and
//! passes without checking anything.

#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use agentic_agents::model::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, LocalModel, ResponseFormat, ToolChoice, ToolSpec,
    default_local_model_path,
};
use agentic_engine::RunResult;
use agentic_spec::Spec;
use serde_json::{Value, json};

/// The tests measure timings, so they run one at a time (the provider serialises inference anyway).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The model, preloaded (printing the load time), or `None` when the model file is missing.
async fn model() -> Option<LocalModel> {
    let path = default_local_model_path();
    if !path.is_file() {
        eprintln!("SKIPPED: no local model at {} (run scripts/setup-local-model.sh)", path.display());
        return None;
    }
    let model = LocalModel::new(None);
    let load = model.preload().await.expect("the model loads");
    eprintln!("model {} loaded in {:.2} s", path.display(), load.as_secs_f64());
    Some(model)
}

/// Sends `request`, printing wall time, tokens and tokens per second.
async fn timed(model: &LocalModel, label: &str, request: ChatRequest) -> ChatResponse {
    let start = Instant::now();
    let response = model.chat(request).await.unwrap_or_else(|e| panic!("{label}: {e}"));
    report(model, label, start.elapsed(), &response);
    response
}

fn report(model: &LocalModel, label: &str, wall: Duration, response: &ChatResponse) {
    let stats = model.stats();
    eprintln!(
        "{label}: wall {:.3} s; prompt {} tokens in {:.3} s; {} tokens generated in {:.3} s = {:.1} tokens/s; \
         answer {}",
        wall.as_secs_f64(),
        response.usage.input,
        stats.prompt_time.as_secs_f64(),
        response.usage.output,
        stats.generation_time.as_secs_f64(),
        stats.tokens_per_second(),
        if response.tool_calls().is_empty() {
            response.text().to_string()
        } else {
            serde_json::to_string(response.tool_calls()).unwrap()
        }
    );
}

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "city": {"type": "string"}
        },
        "required": ["name", "age", "city"],
        "additionalProperties": false
    })
}

#[tokio::test]
async fn json_schema_extraction_returns_the_right_json() {
    let _serial = SERIAL.lock().await;
    let Some(model) = model().await else { return };
    let cases = [
        ("Alice is 30 years old and lives in Paris.", json!({"name": "Alice", "age": 30, "city": "Paris"})),
        ("Bob, 45, lives in Berlin.", json!({"name": "Bob", "age": 45, "city": "Berlin"})),
    ];
    let total = Instant::now();
    for (sentence, expected) in cases {
        let request = ChatRequest::new(vec![ChatMessage::user(format!(
            "Extract the person's name, age and city from the text as JSON.\nText: {sentence}"
        ))])
        .response_format(ResponseFormat::JsonSchema {
            name: "person".into(),
            schema: person_schema(),
            strict: true,
        });
        let response = timed(&model, "extraction", request).await;
        let value: Value =
            serde_json::from_str(response.text()).unwrap_or_else(|e| panic!("not JSON ({e}): {}", response.text()));
        assert_eq!(value, expected, "for {sentence:?}");
    }
    eprintln!("extraction: total wall {:.3} s", total.elapsed().as_secs_f64());
}

const CATEGORIES: [&str; 3] = ["BILLING", "TECHNICAL", "ACCOUNT"];

fn few_shot(ticket: &str) -> String {
    format!(
        "Classify each support ticket as BILLING, TECHNICAL or ACCOUNT.\n\n\
         Ticket: I was charged twice for my subscription this month.\nCategory: BILLING\n\n\
         Ticket: The app crashes every time I upload a photo.\nCategory: TECHNICAL\n\n\
         Ticket: How do I change the email address of my profile?\nCategory: ACCOUNT\n\n\
         Ticket: Please send me a refund for the last invoice.\nCategory: BILLING\n\n\
         Ticket: The page shows error 500 when I click save.\nCategory: TECHNICAL\n\n\
         Ticket: I forgot my password and cannot log in.\nCategory: ACCOUNT\n\n\
         Ticket: {ticket}\nCategory:"
    )
}

#[tokio::test]
async fn few_shot_enum_classification_always_answers_a_member() {
    let _serial = SERIAL.lock().await;
    let Some(model) = model().await else { return };
    // The LLM agent's request for an enum output: `{"value": <one of>}` as a JSON schema.
    let schema = json!({
        "type": "object",
        "properties": {"value": {"type": "string", "enum": CATEGORIES}},
        "required": ["value"],
        "additionalProperties": false
    });
    let tickets = [
        ("My credit card was billed the wrong amount.", "BILLING"),
        ("The website does not load on my phone.", "TECHNICAL"),
        ("I want to delete my account.", "ACCOUNT"),
        ("Why is there an extra fee on my invoice?", "BILLING"),
        ("The export button throws an error.", "TECHNICAL"),
        ("How can I change my username?", "ACCOUNT"),
    ];
    let total = Instant::now();
    let mut correct = 0;
    let mut runs = 0;
    for round in 0..2 {
        for (ticket, expected) in tickets {
            let request = ChatRequest::new(vec![ChatMessage::user(few_shot(ticket))]).response_format(
                ResponseFormat::JsonSchema { name: "answer".into(), schema: schema.clone(), strict: true },
            );
            let response = timed(&model, &format!("classification round {round}"), request).await;
            let value: Value =
                serde_json::from_str(response.text()).unwrap_or_else(|e| panic!("not JSON ({e}): {}", response.text()));
            let category = value["value"].as_str().unwrap_or_default().to_string();
            assert!(CATEGORIES.contains(&category.as_str()), "{ticket:?} got {value}");
            eprintln!("classified {ticket:?} as {category} (expected {expected})");
            runs += 1;
            correct += usize::from(category == expected);
        }
    }
    eprintln!(
        "classification: {runs} answers, all members of the enum, {correct} as expected; total wall {:.3} s",
        total.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn forced_tool_call_returns_its_arguments() {
    let _serial = SERIAL.lock().await;
    let Some(model) = model().await else { return };
    let tool = ToolSpec::new(
        "get_weather",
        "The current weather of a city.",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": false
        }),
    );
    let request = ChatRequest::new(vec![ChatMessage::user("What is the weather like in London today?")])
        .tools(vec![tool])
        .tool_choice(ToolChoice::Tool("get_weather".into()));
    let response = timed(&model, "tool call", request).await;
    let calls = response.tool_calls();
    assert_eq!(calls.len(), 1, "{response:?}");
    assert_eq!(calls[0].name, "get_weather");
    assert!(calls[0].arguments["city"].is_string(), "{:?}", calls[0].arguments);
    eprintln!("tool call arguments: {}", calls[0].arguments);
}

#[tokio::test]
async fn a_spec_with_provider_local_runs_extraction_and_classification_steps() {
    let _serial = SERIAL.lock().await;
    let Some(_model) = model().await else { return };
    let yaml = r#"
version: 1
root: triage
models:
  default: { provider: local }
agents:
  triage: { kind: sequence, agents: [extract, classify], output: "{ 'person': person, 'category': category }" }
  extract:
    kind: llm
    user: "Extract the person's name, age and city from the text as JSON.\nText: {{ text }}"
    output:
      schema:
        type: object
        properties: { name: { type: string }, age: { type: integer }, city: { type: string } }
        required: [name, age, city]
        additionalProperties: false
    output_key: person
  classify:
    kind: llm
    user: "Classify each support ticket as BILLING, TECHNICAL or ACCOUNT.\n\nTicket: I was charged twice for my subscription this month.\nCategory: BILLING\n\nTicket: The app crashes every time I upload a photo.\nCategory: TECHNICAL\n\nTicket: How do I change the email address of my profile?\nCategory: ACCOUNT\n\nTicket: {{ ticket }}\nCategory:"
    output: { enum: [BILLING, TECHNICAL, ACCOUNT] }
    output_key: category
"#;
    let spec = Spec::parse(yaml, "local.yaml").unwrap_or_else(|e| panic!("parses:\n{e}"));
    let built = spec.build().unwrap_or_else(|e| panic!("builds:\n{e}"));
    let start = Instant::now();
    let outcome = built
        .root
        .invoke()
        .input("text", "Alice is 30 years old and lives in Paris.")
        .input("ticket", "I was billed twice for the same order.")
        .await
        .expect("runs");
    let RunResult::Completed(output) = outcome.result else { panic!("not completed: {:?}", outcome.result) };
    eprintln!("spec run: wall {:.3} s; output {output}", start.elapsed().as_secs_f64());
    assert_eq!(output["person"], json!({"name": "Alice", "age": 30, "city": "Paris"}));
    assert!(CATEGORIES.contains(&output["category"].as_str().unwrap_or_default()), "{output}");
}

#[tokio::test]
async fn free_text_throughput_and_stop_sequences() {
    let _serial = SERIAL.lock().await;
    let Some(model) = model().await else { return };
    // A base model continues the text: no content check, only the limits and the measured speed.
    let request =
        ChatRequest::new(vec![ChatMessage::user("Write a long story about a fox who learns to fly.")]).max_tokens(64);
    let response = timed(&model, "free text, 64 tokens", request).await;
    assert!(response.usage.output <= 64);
    let request =
        ChatRequest::new(vec![ChatMessage::user("Count: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]).max_tokens(64).stop(["\n"]);
    let response = timed(&model, "free text with a stop sequence", request).await;
    assert!(!response.text().contains('\n'), "{:?}", response.text());
}

/// The prompt cache: a request with the same instructions and another ticket restores the instructions' state
/// instead of decoding them again, and answers exactly as with the cache off.
#[tokio::test]
async fn the_prompt_prefix_is_decoded_once_and_answers_do_not_change() {
    let _serial = SERIAL.lock().await;
    let Some(model) = model().await else { return };
    let instructions = "You sort customer support tickets into exactly one category: billing, technical or account.\n\
                        billing - money: charges, payments, refunds, invoices.\n\
                        technical - the product misbehaves: crashes, errors, freezes.\n\
                        account - access and identity: signing in, passwords, profile.\n\
                        Examples:\nTicket: I was charged twice. -> billing\n\
                        Ticket: The app crashes when I open it. -> technical\n\
                        Ticket: I forgot my password. -> account\nAnswer with the category only.";
    let ask = |ticket: &str| {
        ChatRequest::new(vec![ChatMessage::system(instructions), ChatMessage::user(format!("Ticket: {ticket}"))])
            .response_format(ResponseFormat::JsonSchema {
                name: "category".into(),
                schema: json!({"type": "string", "enum": ["billing", "technical", "account"]}),
                strict: true,
            })
    };
    let tickets = ["I was refunded only half of my payment.", "The export button does nothing and the app freezes."];
    let uncached_model = model.clone().without_prompt_cache();
    let mut uncached = Vec::new();
    for ticket in tickets {
        uncached.push(timed(&uncached_model, "cache off", ask(ticket)).await.text().to_string());
        assert_eq!(uncached_model.stats().cached_prompt_tokens, 0);
    }
    let mut cached = Vec::new();
    let mut restored = Vec::new();
    for ticket in tickets {
        let response = timed(&model, "cache on", ask(ticket)).await;
        restored.push((model.stats().cached_prompt_tokens, response.usage.input));
        cached.push(response.text().to_string());
    }
    assert_eq!(cached, uncached, "the cache does not change an answer");
    assert_eq!(uncached, [r#""billing""#, r#""technical""#]);
    let (from_cache, prompt) = restored[1];
    assert!(from_cache >= 100 && from_cache < prompt, "the second restores the instructions only: {restored:?}");
    eprintln!("cached prefix: {from_cache} of {prompt} prompt tokens");
}
