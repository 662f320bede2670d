//! Typed keys in the builders: `output_key(&KEY)` and `input(&KEY)` declare the key's type from the Rust type
//! (its value type and its Rust name); two agents declaring one key with two types fail at build, naming both.

#![allow(clippy::unwrap_used)]

use agentic::engine::ValueType;
use agentic::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Story {
    title: String,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Review {
    stars: u8,
}

const TOPIC: TypedKey<String> = TypedKey::new("topic");
const STORY: TypedKey<Story> = TypedKey::new("story");
const REVIEWED: TypedKey<Review> = TypedKey::new("story");
const WORDS: TypedKey<i64> = TypedKey::new("words");

fn writer() -> AgentRef {
    FnAgent::builder("writer", |ctx| {
        Box::pin(async move {
            let topic: String = ctx.input_as("topic")?;
            Ok(json!({"title": topic.to_uppercase(), "text": format!("A tale of {topic}.")}))
        })
    })
    .input(&TOPIC)
    .output_key(&STORY)
    .build()
}

fn counter() -> AgentRef {
    FnAgent::builder("counter", |ctx| {
        Box::pin(async move {
            let story: Story = ctx.input_as("story")?;
            Ok(json!(story.text.split_whitespace().count()))
        })
    })
    .input(&STORY)
    .output_key(&WORDS)
    .build()
}

#[tokio::test]
async fn typed_keys_declare_value_and_rust_types() {
    let w = writer();
    assert_eq!(w.spec().inputs[0].value_type, ValueType::String);
    assert_eq!(w.spec().inputs[0].rust_type.as_deref(), Some("alloc::string::String"));
    assert_eq!(w.spec().output_key.as_deref(), Some("story"));
    assert_eq!(w.spec().output_type, ValueType::Object);
    assert_eq!(w.spec().output_rust_type.as_deref(), Some("it::engine_typed_keys::Story"));

    let seq = Sequence::builder().sub_agents([w, counter()]).output_key(&WORDS).build().unwrap();
    let out = seq.invoke().input("topic", "owls").await.unwrap();
    assert_eq!(out.output(), Some(&json!(4)));
    let story = out.state().get_typed(&STORY).unwrap();
    assert_eq!(story, Some(Story { title: "OWLS".into(), text: "A tale of owls.".into() }));
    assert_eq!(out.state().get_typed(&WORDS), Ok(Some(4)));
}

#[tokio::test]
async fn a_typed_input_uses_the_keys_default() {
    let greet = FnAgent::builder("greet", |ctx| {
        Box::pin(async move { Ok(json!(format!("hello {}", ctx.input_as::<String>("name")?))) })
    })
    .input(&TypedKey::<String>::named("name").with_default("world".to_string()))
    .output_key("greeting")
    .build();
    assert_eq!(greet.spec().inputs[0].default, Some(json!("world")));
    let out = greet.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("hello world")));
}

#[tokio::test]
async fn an_optional_input_reads_null_when_absent() {
    let echo = FnAgent::builder("echo", |ctx| {
        Box::pin(async move { Ok(json!(ctx.input_as::<Option<i64>>("limit")?.unwrap_or(-1))) })
    })
    .input(InputSpec::of::<i64>("limit").optional(true))
    .output_key("limit_seen")
    .build();
    assert_eq!(echo.invoke().await.unwrap().output(), Some(&json!(-1)));
    assert_eq!(echo.invoke().input("limit", "7").await.unwrap().output(), Some(&json!(7)));
}

#[tokio::test]
async fn two_rust_types_for_one_key_fail_the_build_naming_both_agents() {
    let critic = FnAgent::builder("critic", |_ctx| Box::pin(async move { Ok(json!(null)) }))
        .input(&REVIEWED)
        .output_key("verdict")
        .build();
    let err = Sequence::builder().sub_agents([writer(), critic]).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "key `story` is declared as object `it::engine_typed_keys::Story` by `writer` (root/0) and as object \
         `it::engine_typed_keys::Review` by `critic` (root/1)"
    );
}

#[tokio::test]
async fn two_value_types_for_one_key_fail_the_build_naming_both_agents_and_paths() {
    let shouter = Compute::expression("shouter", "topic | upper").unwrap().input("topic").output_key("story").build();
    let inner = Sequence::builder().name("inner").sub_agents([shouter]).build().unwrap();
    let err = Sequence::builder().sub_agents([writer(), inner.clone()]).build();
    assert!(err.is_ok(), "an untyped key conflicts with nothing");

    let typed_shouter = Compute::expression("shouter", "topic | upper")
        .unwrap()
        .input("topic")
        .output_key(&TypedKey::<String>::new("story"))
        .build();
    let inner = Sequence::builder().name("inner").sub_agents([typed_shouter]).build().unwrap();
    let err = Sequence::builder().sub_agents([writer(), inner]).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "key `story` is declared as object `it::engine_typed_keys::Story` by `writer` (root/0) and as string \
         `alloc::string::String` by `shouter` (root/1/0)"
    );
}

#[tokio::test]
async fn a_rust_type_declared_after_an_untyped_one_is_still_compared() {
    let plain =
        Compute::expression("plain", "{'stars': 3}").unwrap().output_key("story").output_type(ValueType::Object);
    let plain = plain.build();
    let critic = FnAgent::builder("critic", |_ctx| Box::pin(async move { Ok(json!(null)) })).input(&REVIEWED).build();
    let err = Sequence::builder().sub_agents([plain, writer(), critic]).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "key `story` is declared as object `it::engine_typed_keys::Story` by `writer` (root/1) and as object \
         `it::engine_typed_keys::Review` by `critic` (root/2)"
    );
}

#[tokio::test]
async fn an_llm_agent_with_a_typed_output_key_parses_its_answer_as_the_keys_type() {
    let model = ScriptedModel::new([r#"{"title": "OWLS", "text": "A tale of owls."}"#]);
    let err = LlmAgent::builder(model.clone()).name("writer").user("About {{ topic }}").output_key(&STORY).build();
    assert_eq!(
        err.unwrap_err().to_string(),
        "`writer`: output key `story` is declared as object `it::engine_typed_keys::Story`, but the agent answers text: \
         parse the answer with `returns::<T>()` (or `output(..)`)"
    );
    let writer = LlmAgent::builder(model)
        .name("writer")
        .user("About {{ topic }}")
        .returns::<Story>()
        .input(&TOPIC)
        .output_key(&STORY)
        .build()
        .unwrap();
    let out = writer.invoke().input("topic", "owls").await.unwrap();
    assert_eq!(out.state().get_typed(&STORY), Ok(Some(Story { title: "OWLS".into(), text: "A tale of owls.".into() })));
    let seq = Sequence::builder().sub_agents([writer, counter()]).output_key(&WORDS).build();
    assert!(seq.is_ok(), "the LLM writer and the counter agree on `story`");
}

/// An agent answering `answer` under the typed key `words`.
fn answering(answer: serde_json::Value) -> AgentRef {
    FnAgent::builder("count", move |_| {
        let answer = answer.clone();
        Box::pin(async move { Ok(answer) })
    })
    .output_key(&WORDS)
    .build()
}

#[tokio::test]
async fn a_typed_output_is_coerced_when_written_and_refused_when_it_cannot_be() {
    let outcome = answering(json!("42")).invoke().await.unwrap();
    assert_eq!(outcome.state().get("words"), Some(&json!(42)));

    // Refused at the write: the step fails, naming the key and the type, and the state never holds it.
    let counted = Sequence::builder().name("pipe").sub_agents([answering(json!("many"))]).build().unwrap();
    let err = counted.invoke().memory_id("typed-out").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `count` (root/0): key `words` must be integer (its declared type), found \"many\""
    );
}

#[tokio::test]
async fn an_optional_key_declares_the_type_inside() {
    const MAYBE_WORDS: TypedKey<Option<i64>> = TypedKey::new("words");
    let reader =
        FnAgent::builder("reader", |ctx| Box::pin(async move { Ok(json!(ctx.input_as::<Option<i64>>("words")?)) }))
            .input(&MAYBE_WORDS)
            .output_key("seen")
            .build();
    let system = Sequence::builder().sub_agents([answering(json!(3)), reader]).output_key("seen").build().unwrap();
    assert_eq!(system.invoke().await.unwrap().output(), Some(&json!(3)));
}
