//! The LLM agent with a scripted model: typed outputs, lenient parsing, the single re-ask, tokens, the
//! conversation context, chat memory per memory id, summarized context and per-invocation model choice; and
//! with the JSON-schema response format against a loopback OpenAI-compatible server.

use std::time::Duration;

use agentic::agents::model::{ChatMessage, ChatModelRef, OpenAiModel, ScriptedModel};
use agentic::agents::{LlmAgent, OutputType, memory_key};
use agentic::engine::{AgentError, SpecBuilder, TokenUsage};
use agentic::planners::Sequence;
use agentic::prelude::CompositeBuilderExt;
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn user_texts(model: &ScriptedModel) -> Vec<Vec<(String, String)>> {
    model
        .requests()
        .iter()
        .map(|r| r.messages.iter().map(|m| (m.role().to_string(), m.text().to_string())).collect())
        .collect()
}

#[tokio::test]
async fn a_number_is_the_first_number_in_the_answer_and_tokens_are_recorded() {
    let model = ScriptedModel::new(["Score: 0.85"]);
    let scorer = LlmAgent::builder(model.clone())
        .name("scorer")
        .system("You are a critical reviewer.")
        .user("Score the story between 0.0 and 1.0 for the style '{{ style }}': {{ story }}")
        .output(OutputType::Number)
        .output_key("score")
        .build()
        .expect("agent");
    assert_eq!(scorer.spec().inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["story", "style"]);
    let outcome = scorer.invoke().input("story", "A dragon sneezed.").input("style", "comedy").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!(0.85)));
    assert_eq!(outcome.state().get("score"), Some(&json!(0.85)));
    assert_eq!(
        user_texts(&model),
        [[
            ("system".to_string(), "You are a critical reviewer.".to_string()),
            (
                "user".to_string(),
                "Score the story between 0.0 and 1.0 for the style 'comedy': A dragon sneezed.".to_string()
            )
        ]]
    );
    let history = outcome.history().await.expect("history");
    // The scripted model counts words: input 5 (system) + 14 (user); output 2.
    assert_eq!(history.last().and_then(|r| r.tokens), Some(TokenUsage { input: 19, output: 2 }));
    let context = outcome.scope().context();
    assert_eq!(context.len(), 1);
    assert_eq!(context[0].agent, "scorer");
    assert_eq!(context[0].user, "Score the story between 0.0 and 1.0 for the style 'comedy': A dragon sneezed.");
    assert_eq!(context[0].answer, "Score: 0.85");
}

#[tokio::test]
async fn an_enum_matches_case_insensitively() {
    let model = ScriptedModel::new(["medical"]);
    let router = LlmAgent::builder(model.clone())
        .name("router")
        .user("Categorize: {{ request }}")
        .output(OutputType::Enum(vec!["LEGAL".into(), "MEDICAL".into(), "TECHNICAL".into()]))
        .build()
        .expect("agent");
    let outcome = router.invoke().input("request", "I broke my leg").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("MEDICAL")));
    assert_eq!(
        model.requests()[0].messages[0].text(),
        "Categorize: I broke my leg\n\nAnswer with one of: LEGAL, MEDICAL, TECHNICAL."
    );
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Person {
    name: String,
    age: u32,
}

#[tokio::test]
async fn a_struct_is_read_from_a_fenced_json_block() {
    let model =
        ScriptedModel::new(["Sure! Here it is:\n```json\n{\"name\": \"Ada\", \"age\": 36}\n```\nAnything else?"]);
    let extractor = LlmAgent::builder(model.clone())
        .name("extractor")
        .user("Extract the person from: {{ text }}")
        .output_as::<Person>()
        .output_key("person")
        .build()
        .expect("agent");
    let outcome = extractor.invoke().input("text", "Ada Lovelace, 36").await.expect("run");
    let person: Person = serde_json::from_value(outcome.output().cloned().unwrap_or_default()).expect("a Person");
    assert_eq!(person, Person { name: "Ada".into(), age: 36 });
    let sent = model.requests()[0].messages[0].text().to_string();
    assert!(
        sent.starts_with(
            "Extract the person from: Ada Lovelace, 36\n\nAnswer with JSON only, matching this JSON schema: {"
        ),
        "{sent}"
    );
    assert!(sent.contains("\"required\":[\"name\",\"age\"]"), "{sent}");
}

#[tokio::test]
async fn a_parse_failure_is_asked_again_once() {
    let model = ScriptedModel::new(["I would rather not say.", "Fine: 7 out of 10"]);
    let scorer = LlmAgent::builder(model.clone())
        .name("scorer")
        .user("Score: {{ story }}")
        .output(OutputType::Integer)
        .build()
        .expect("agent");
    let outcome = scorer.invoke().input("story", "x").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!(7)));
    let second = &model.requests()[1].messages;
    assert_eq!(second.len(), 3);
    assert_eq!(second[1], ChatMessage::assistant("I would rather not say."));
    assert_eq!(
        second[2],
        ChatMessage::user(
            "Your answer could not be read as an integer: no integer found. Answer again, with an integer only."
        )
    );
    let history = outcome.history().await.expect("history");
    assert_eq!(
        history.last().and_then(|r| r.tokens),
        Some(TokenUsage { input: 2 + (2 + 5 + 18), output: 5 + 5 }),
        "both calls count"
    );
}

#[tokio::test]
async fn a_second_parse_failure_fails_quoting_the_answer() {
    let model = ScriptedModel::new(["No idea.", "Still no idea."]);
    let scorer = LlmAgent::builder(model.clone())
        .name("scorer")
        .user("Score: {{ story }}")
        .output(OutputType::Number)
        .output_key("score")
        .build()
        .expect("agent");
    let e = scorer.invoke().input("story", "x").await.expect_err("fails");
    assert!(matches!(e, AgentError::Failed { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "agent `scorer` (root) failed: model `scripted` at scripted: the answer could not be read as a number (asked \
         twice): no number found; the answer was: \"Still no idea.\""
    );
    assert_eq!(model.used(), 2, "asked exactly twice");
}

#[tokio::test]
async fn an_exhausted_script_fails_the_agent_clearly() {
    let model = ScriptedModel::new(Vec::<String>::new());
    let agent = LlmAgent::builder(model).name("writer").user("Write about {{ topic }}").build().expect("agent");
    let e = agent.invoke().input("topic", "dragons").await.expect_err("fails");
    assert_eq!(e.to_string(), "agent `writer` (root) failed: scripted model: no reply left (0 used)");
}

#[tokio::test]
async fn chat_memory_keeps_a_window_per_memory_id() {
    let model = ScriptedModel::new(["Rest and ice it.", "Yes, after a week.", "Hello again."]);
    let doctor = LlmAgent::builder(model.clone())
        .name("doctor")
        .user("{{ request }}")
        .memory_window(3)
        .output_key("response")
        .build()
        .expect("agent");
    doctor.invoke().memory_id("patient-1").input("request", "I broke my leg").await.expect("turn 1");
    let outcome = doctor.invoke().memory_id("patient-1").input("request", "Can I walk?").await.expect("turn 2");
    assert_eq!(outcome.output(), Some(&json!("Yes, after a week.")));
    assert_eq!(
        user_texts(&model)[1],
        [
            ("user".to_string(), "I broke my leg".to_string()),
            ("assistant".to_string(), "Rest and ice it.".to_string()),
            ("user".to_string(), "Can I walk?".to_string())
        ]
    );
    // The window (3 messages) is in the state, so it is journaled with the step.
    assert_eq!(
        outcome.state().get(&memory_key("doctor")),
        Some(&json!([
            {"role": "assistant", "content": "Rest and ice it."},
            {"role": "user", "content": "Can I walk?"},
            {"role": "assistant", "content": "Yes, after a week."}
        ]))
    );
    // Another memory id starts with an empty memory.
    doctor.invoke().memory_id("patient-2").input("request", "Hi").await.expect("other patient");
    assert_eq!(user_texts(&model)[2], [("user".to_string(), "Hi".to_string())]);
}

#[tokio::test]
async fn conversation_context_includes_the_named_agents_last_exchange() {
    let model = ScriptedModel::new(["Rest and ice your leg.", "You may sue for damages."]);
    let medical = LlmAgent::builder(model.clone())
        .name("medical")
        .user("As a doctor: {{ request }}")
        .output_key("medical_answer")
        .build()
        .expect("medical");
    let legal = LlmAgent::builder(model.clone())
        .name("legal")
        .user("As a lawyer: {{ question }}")
        .conversation_context(["medical"])
        .output_key("response")
        .build()
        .expect("legal");
    let system =
        Sequence::builder().name("experts").sub_agents([medical, legal]).output_key("response").build().expect("seq");
    let outcome = system
        .invoke()
        .input("request", "I broke my leg")
        .input("question", "Should I sue my neighbour?")
        .await
        .expect("run");
    assert_eq!(outcome.output(), Some(&json!("You may sue for damages.")));
    assert_eq!(
        model.requests()[1].messages[0].text(),
        "Considering this context:\n[medical] User: As a doctor: I broke my leg\n[medical] Answer: Rest and ice your \
         leg.\n\nAs a lawyer: Should I sue my neighbour?"
    );
}

#[tokio::test]
async fn a_context_function_of_the_state_prefixes_the_user_message() {
    let model = ScriptedModel::new(["Sunny, pack sunscreen.", "Pack an umbrella."]);
    let advisor = LlmAgent::builder(model.clone())
        .name("advisor")
        .user("What should I pack?")
        .context(|state| match state.get("forecast").and_then(Value::as_str) {
            Some(f) => format!("the forecast says {f}"),
            None => String::new(),
        })
        .build()
        .expect("advisor");
    advisor.invoke().input("forecast", "sun").await.expect("sunny");
    advisor.invoke().await.expect("no forecast");
    let texts = user_texts(&model);
    assert_eq!(texts[0][0].1, "Considering this context: the forecast says sun\n\nWhat should I pack?");
    assert_eq!(texts[1][0].1, "What should I pack?");
}

#[tokio::test]
async fn the_model_can_be_chosen_per_invocation_from_the_state() {
    let base = ScriptedModel::new(["base answer"]).named("base");
    let strong = ScriptedModel::new(["strong answer"]).named("strong");
    let strong_ref = ChatModelRef::new(strong.clone());
    let editor = LlmAgent::builder(base.clone())
        .name("editor")
        .user("Edit: {{ story }}")
        .model_selector(move |view| {
            let score = view.get("score").and_then(Value::as_f64).unwrap_or(0.0);
            (score > 0.7).then(|| strong_ref.clone())
        })
        .build()
        .expect("agent");
    let low = editor.invoke().input("story", "s").input("score", 0.2).await.expect("low");
    assert_eq!(low.output(), Some(&json!("base answer")));
    let high = editor.invoke().input("story", "s").input("score", 0.9).await.expect("high");
    assert_eq!(high.output(), Some(&json!("strong answer")));
    assert_eq!((base.used(), strong.used()), (1, 1));
}

#[tokio::test]
async fn an_invalid_template_or_missing_user_message_fails_the_build() {
    let e = LlmAgent::builder(ScriptedModel::new(["x"])).name("bad").user("{{ oops").build().expect_err("syntax");
    assert!(e.to_string().starts_with("`bad`: invalid user template: "), "{e}");
    let e = LlmAgent::builder(ScriptedModel::new(["x"])).name("bad").build().expect_err("no user");
    assert_eq!(e.to_string(), "`bad`: an LLM agent needs a user message");
}

#[tokio::test]
async fn structured_outputs_use_the_json_schema_response_format_on_openai_servers() {
    let server = MockServer::start().await;
    let answer = |content: &str| {
        json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 20, "completion_tokens": 5}})
    };
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer("{\"value\": 0.85}")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer("{\"value\": \"medical\"}")))
        .mount(&server)
        .await;
    let model = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .backoff(Duration::from_millis(10))
        .build()
        .expect("model");
    let model = ChatModelRef::new(model);
    let scorer = LlmAgent::builder(model.clone())
        .name("scorer")
        .user("Score {{ story }}")
        .output(OutputType::Number)
        .build()
        .expect("agent");
    let outcome = scorer.invoke().input("story", "s").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!(0.85)));
    let history = outcome.history().await.expect("history");
    assert_eq!(history.last().and_then(|r| r.tokens), Some(TokenUsage { input: 20, output: 5 }));

    let router = LlmAgent::builder(model)
        .name("router")
        .user("Categorize {{ request }}")
        .output(OutputType::Enum(vec!["LEGAL".into(), "MEDICAL".into()]))
        .build()
        .expect("agent");
    let outcome = router.invoke().input("request", "r").await.expect("run");
    assert_eq!(outcome.output(), Some(&json!("MEDICAL")));

    let received = server.received_requests().await.expect("requests");
    let first: Value = serde_json::from_slice(&received[0].body).expect("JSON");
    assert_eq!(
        first,
        json!({
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "Score s"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true, "schema": {
                "type": "object", "properties": {"value": {"type": "number"}},
                "required": ["value"], "additionalProperties": false}}},
            "stream": false
        })
    );
    let second: Value = serde_json::from_slice(&received[1].body).expect("JSON");
    assert_eq!(second["messages"], json!([{"role": "user", "content": "Categorize r"}]), "no text hint in schema mode");
    assert_eq!(
        second["response_format"]["json_schema"]["schema"]["properties"]["value"],
        json!({"type": "string", "enum": ["LEGAL", "MEDICAL"]})
    );
}

#[tokio::test]
async fn summarized_context_survives_a_suspension_and_resume() {
    let model =
        ScriptedModel::new(["Rest and ice your leg.", "A leg was broken; rest and ice.", "You may sue for damages."]);
    let medical = LlmAgent::builder(model.clone())
        .name("medical")
        .user("As a doctor: {{ request }}")
        .output_key("medical_answer")
        .build()
        .expect("medical");
    let gate = agentic::agents::Human::builder("gate", "Continue?").expect("gate").response_id("gate").build();
    let legal = LlmAgent::builder(model.clone())
        .name("legal")
        .user("As a lawyer: {{ question }}")
        .summarized_context(["medical"])
        .output_key("response")
        .build()
        .expect("legal");
    let system = Sequence::builder().sub_agents([medical, gate, legal]).output_key("response").build().expect("seq");
    let store = agentic::store::MemoryStore::new();
    let first = system
        .invoke()
        .memory_id("ctx-resume")
        .store(store.clone())
        .input("request", "I broke my leg")
        .input("question", "Should I sue?")
        .await
        .expect("run");
    assert!(first.is_suspended());
    // A later invocation (no live scope) rebuilds the context from the journal.
    let done = system.resume("ctx-resume").store(store).answer("gate", "yes").await.expect("resume");
    assert_eq!(done.output(), Some(&json!("You may sue for damages.")));
    let texts = user_texts(&model);
    // The summary request after the resume still sees the exchange from before the suspension.
    assert!(texts[1][0].1.contains("[medical] Answer: Rest and ice your leg."), "{:?}", texts[1]);
    assert_eq!(
        texts[2][0].1,
        "Considering this context: A leg was broken; rest and ice.\n\nAs a lawyer: Should I sue?"
    );
}

#[test]
fn an_agent_with_chat_memory_cannot_be_mapped() {
    let chat = LlmAgent::builder(ScriptedModel::new(["hi"]))
        .name("chat")
        .user("{{ x }}")
        .memory_window(4)
        .build()
        .expect("chat");
    let err = agentic::planners::ParallelMapper::builder().sub_agent(chat).items_key("xs").build().expect_err("error");
    assert_eq!(
        err.to_string(),
        "`parallel_mapper`: the mapped agent `chat` keeps a chat memory and cannot be mapped (its items would share \
         one conversation)"
    );
}

/// A sequence of one LLM agent on a loopback server answering `status` to every call, with a handler that
/// retries twice (10 ms backoff) and then substitutes "gave up".
async fn handled(server: &MockServer) -> Result<Value, AgentError> {
    let model = OpenAiModel::builder("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(2)
        .backoff(Duration::from_millis(10))
        .max_backoff(Duration::from_millis(400))
        .build()
        .expect("model");
    let ask = LlmAgent::builder(ChatModelRef::new(model)).name("ask").user("Hello").output_key("reply").build();
    let system = Sequence::builder()
        .name("main")
        .sub_agents([ask.expect("agent")])
        .output_key("reply")
        .error_handler(
            agentic::engine::RetryPolicy::new(2, Duration::from_millis(10)).fallback(|_| Ok(json!("gave up"))),
        )
        .build()
        .expect("system");
    Ok(system.invoke().await?.output().cloned().unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_error_handler_does_not_retry_a_401_but_retries_a_503_honouring_retry_after() {
    let unauthorized = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "bad key"}})))
        .mount(&unauthorized)
        .await;
    assert_eq!(handled(&unauthorized).await.expect("fallback"), json!("gave up"));
    let calls = unauthorized.received_requests().await.expect("recording").len();
    assert_eq!(calls, 1, "a 401 is tried once: the same call fails the same way");

    let busy = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503)
                .insert_header("retry-after", "0.1")
                .set_body_json(json!({"error": {"message": "overloaded"}})),
        )
        .mount(&busy)
        .await;
    let started = std::time::Instant::now();
    assert_eq!(handled(&busy).await.expect("fallback"), json!("gave up"));
    let waited = started.elapsed();
    // Three calls of the agent (the first and two retries), each three requests (the client's two retries).
    assert_eq!(busy.received_requests().await.expect("recording").len(), 9, "a 503 is retried");
    // The client waits Retry-After (100 ms) between its requests: 6 waits; the handler 10 + 20 ms.
    assert!(waited >= Duration::from_millis(630), "waited {waited:?}");
}
