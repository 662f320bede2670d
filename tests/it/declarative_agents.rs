//! Declarative agents: `#[agent]` functions (typed and optional inputs, `Result` returns), an `#[agents]`
//! trait's LLM agent returning a struct parsed through its JSON schema, the composites (loop, parallel,
//! conditional, supervisor) as typed entry points, and two agents declaring one key with two types failing
//! at build, naming both.

#![allow(clippy::unwrap_used)]

use agentic::engine::ValueType;
use agentic::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A review of a story: what the critic answers, parsed through its JSON schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Review {
    /// From 1 to 5.
    pub stars: u8,
    /// One sentence.
    pub verdict: String,
}

/// Counts the words of a story, at least `minimum`.
#[agent(output_key = "words")]
async fn word_count(story: String, minimum: Option<i64>) -> Result<i64, String> {
    if story.trim().is_empty() {
        return Err("the story is empty".to_string());
    }
    Ok((story.split_whitespace().count() as i64).max(minimum.unwrap_or(0)))
}

/// Stores a review without asking a model.
#[agent(output_key = "review", description = "Stars a story by its length")]
async fn length_critic(words: i64) -> Review {
    Review { stars: if words > 3 { 4 } else { 2 }, verdict: format!("{words} words") }
}

/// Says hello: a synchronous function works too, and a unit return writes nothing.
#[agent(name = "greeter")]
fn greet(name: String) {
    let _ = name;
}

/// The first word of a text, if it has one.
#[agent(output_key = "first")]
async fn first_word(text: String) -> Option<String> {
    text.split_whitespace().next().map(str::to_string)
}

#[tokio::test]
async fn an_optional_result_is_declared_as_its_inner_type_and_none_writes_nothing() {
    let first = first_word_agent();
    let spec = first.spec();
    assert_eq!(
        (spec.output_type, spec.output_rust_type.as_deref()),
        (ValueType::String, Some("alloc::string::String"))
    );
    let out = first.invoke().input("text", "owls hoot").await.unwrap();
    assert_eq!(out.state().get("first"), Some(&json!("owls")));
    let out = first.invoke().input("text", "  ").await.unwrap();
    assert_eq!((out.output(), out.state().get("first")), (Some(&Value::Null), None));
}

#[tokio::test]
async fn a_declared_function_is_an_agent_with_typed_inputs_and_output() {
    let counter = word_count_agent();
    let spec = counter.spec();
    assert_eq!((spec.name.as_str(), spec.kind.as_str()), ("word_count", "closure"));
    assert_eq!(spec.description, "Counts the words of a story, at least `minimum`.");
    let inputs: Vec<_> =
        spec.inputs.iter().map(|i| (i.key.as_str(), i.value_type, i.rust_type.as_deref(), i.optional)).collect();
    assert_eq!(
        inputs,
        [
            ("story", ValueType::String, Some("alloc::string::String"), false),
            ("minimum", ValueType::Integer, Some("i64"), true)
        ]
    );
    assert_eq!((spec.output_key.as_deref(), spec.output_type), (Some("words"), ValueType::Integer));

    let out = counter.invoke().input("story", "a tale of two owls").await.unwrap();
    assert_eq!(out.output(), Some(&json!(5)));
    let out = counter.invoke().input("story", "owls").input("minimum", "3").await.unwrap();
    assert_eq!(out.output(), Some(&json!(3)));
    assert_eq!(out.state().get("words"), Some(&json!(3)));
    let err = counter.invoke().input("story", " ").await.unwrap_err();
    assert_eq!(err.to_string(), "agent `word_count` (root) failed: the story is empty");
    let err = counter.invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `word_count` (root): missing argument `story`");
    // The function is still a function.
    assert_eq!(word_count("one two".to_string(), None).await, Ok(2));

    let critic = length_critic_agent();
    assert_eq!(critic.spec().description, "Stars a story by its length");
    assert_eq!(critic.spec().output_rust_type.as_deref(), Some("it::declarative_agents::Review"));
    let out = critic.invoke().input("words", 5).await.unwrap();
    assert_eq!(out.state().get_as::<Review>("review").unwrap(), Some(Review { stars: 4, verdict: "5 words".into() }));

    let greeter = greet_agent();
    assert_eq!((greeter.name(), greeter.spec().output_key.as_deref()), ("greeter", None));
    assert_eq!(greeter.invoke().input("name", "Ada").await.unwrap().output(), Some(&Value::Null));
}

/// A critic asking a model, and a review pipeline over the declared functions.
#[agents]
pub trait Critic {
    /// Reviews a story.
    #[agent(system = "You are a literary critic.", user = "Review this story: {{ story }}", output_key = "review")]
    async fn critic(&self, story: String) -> Review;

    /// Counts the words, then reviews.
    #[sequence(agents(self::word_count, critic), output_key = "review")]
    async fn count_and_review(&self, story: String) -> Review;
}

const REVIEW: &str = "Here you go:\n```json\n{\"stars\": 4, \"verdict\": \"Short and bright.\"}\n```";

#[tokio::test]
async fn a_typed_llm_agent_returns_a_struct_parsed_through_its_schema() {
    let model = ScriptedModel::new([REVIEW, REVIEW]);
    let critic = CriticAgents::builder(model.clone()).build().unwrap();
    let review: Review = critic.critic("Owls at night.").await.unwrap();
    assert_eq!(review, Review { stars: 4, verdict: "Short and bright.".to_string() });

    // The schema of `Review` was given to the model (this model has no JSON-schema response format).
    let sent = model.requests()[0].messages[1].text().to_string();
    let (question, schema) = sent.split_once("\n\nAnswer with JSON only, matching this JSON schema: ").unwrap();
    assert_eq!(question, "Review this story: Owls at night.");
    let schema: Value = serde_json::from_str(schema).unwrap();
    assert_eq!(schema["title"], json!("Review"));
    assert_eq!(schema["required"], json!(["stars", "verdict"]));
    let spec = critic.critic_agent().spec();
    assert_eq!(
        (spec.output_type, spec.output_rust_type.as_deref()),
        (ValueType::Object, Some("it::declarative_agents::Review"))
    );

    // The sequence runs the declared function, then the model's critic.
    let review = critic.count_and_review("Owls hoot softly at night.").await.unwrap();
    assert_eq!(review, Review { stars: 4, verdict: "Short and bright.".to_string() });
    let out = critic.count_and_review_agent().invoke().input("story", "").await.unwrap_err();
    assert_eq!(out.to_string(), "agent `word_count` (root/0) failed: the story is empty");
}

#[tokio::test]
async fn an_answer_that_does_not_fit_the_struct_fails_naming_the_agent() {
    let model = ScriptedModel::new(["{\"stars\": \"many\"}", "still {\"stars\": \"many\"}"]);
    let critic = CriticAgents::builder(model).build().unwrap();
    let err = critic.critic("Owls.").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `critic` (root) failed: model `scripted` at scripted: the answer could not be read as JSON matching \
         the schema (asked twice): invalid type: string \"many\", expected u8; the answer was: \"still \
         {\\\"stars\\\": \\\"many\\\"}\""
    );
}

/// An LLM agent that says the review is a plain text, against the function storing a `Review`.
#[agents]
pub trait Mismatched {
    /// Writes a review as text.
    #[agent(user = "Review: {{ words }}", output_key = "review")]
    async fn text_critic(&self, words: i64) -> String;

    /// Both critics, one after the other.
    #[sequence(agents(self::length_critic, text_critic))]
    async fn both(&self, words: i64);
}

#[tokio::test]
async fn two_declared_agents_disagreeing_on_a_key_fail_at_build_naming_both() {
    let err = MismatchedAgents::builder(ScriptedModel::new(["x"])).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "key `review` is declared as object `it::declarative_agents::Review` by `length_critic` (root/0) and as \
         string `alloc::string::String` by `text_critic` (root/1)"
    );
}

fn done_after_two(_view: &ScopeView, iteration: u32) -> bool {
    iteration >= 2
}

fn is_long(view: &ScopeView) -> bool {
    view.get("words").and_then(Value::as_i64).unwrap_or(0) > 3
}

fn is_short(view: &ScopeView) -> bool {
    !is_long(view)
}

fn both_answers(view: &ScopeView) -> Result<Value, String> {
    Ok(json!([view.get("short"), view.get("long")]))
}

/// The composites as typed entry points.
#[agents]
pub trait Workflows {
    /// Shortens a text.
    #[agent(user = "Shorten: {{ text }}", output_key = "short")]
    async fn shorten(&self, text: String) -> String;

    /// Lengthens a text.
    #[agent(user = "Lengthen: {{ text }}", output_key = "long")]
    async fn lengthen(&self, text: String) -> String;

    /// Shortens twice.
    #[looping(agents(shorten), max_iterations = 5, exit = done_after_two, at_end, output_key = "short")]
    async fn shorten_twice(&self, text: String) -> String;

    /// Both at once.
    #[parallel(agents(shorten, lengthen), output = both_answers, output_key = "both")]
    async fn both_ways(&self, text: String) -> Vec<String>;

    /// Counts the words, then shortens a long text or lengthens a short one.
    #[conditional(
        branch(when = is_long, agents(shorten)),
        branch(when = is_short, agents(lengthen)),
    )]
    async fn adjust(&self, text: String, words: i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composites_are_typed_entry_points() {
    let shorten = ScriptedModel::new(["Owls hoot.", "Owls.", "Owls hoot.", "Owls!"]);
    let lengthen = ScriptedModel::new(["Owls hoot softly in the dark.", "Owls hoot all night long."]);
    let flows = WorkflowsAgents::builder(ScriptedModel::new(Vec::<String>::new()))
        .shorten_model(shorten.clone())
        .lengthen_model(lengthen.clone())
        .build()
        .unwrap();
    assert_eq!(flows.shorten_twice("Owls hoot at night.").await.unwrap(), "Owls.");
    assert_eq!(shorten.used(), 2);
    assert_eq!(flows.both_ways("Owls hoot.").await.unwrap(), ["Owls hoot.", "Owls hoot softly in the dark."]);
    let out = flows.adjust_agent().invoke().input("text", "Owls").input("words", 1).await.unwrap();
    assert_eq!(out.state().get("long"), Some(&json!("Owls hoot all night long.")));
    assert_eq!(out.state().get("short"), None);
    flows.adjust("Owls hoot in the woods", 5).await.unwrap();
    assert_eq!((shorten.used(), lengthen.used()), (4, 2));
    let loop_spec = flows.shorten_twice_agent().topology();
    assert_eq!(loop_spec.details["max_iterations"], json!(5));
    assert_eq!(loop_spec.details["test_exit_at_loop_end"], json!(true));
}

/// Withdraws an amount from a user's account.
#[agent(output_key = "withdraw_result")]
async fn withdraw(user: String, amount: f64) -> String {
    format!("{user} withdrew {amount}")
}

/// Credits an amount to a user's account.
#[agent(output_key = "credit_result")]
async fn credit(user: String, amount: f64) -> String {
    format!("{user} received {amount}")
}

/// A bank whose supervisor picks the agents.
#[agents]
pub trait Bank {
    /// Transfers money between accounts.
    #[supervisor(
        agents(self::withdraw, self::credit),
        response = "summary",
        context = "Amounts are in euros.",
        max_invocations = 5,
        output_key = "result"
    )]
    async fn bank(&self, request: String) -> String;
}

#[tokio::test]
async fn a_declared_supervisor_plans_with_the_builders_model() {
    let model = ScriptedModel::new([
        r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 100}}"#,
        r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 100}}"#,
        r#"{"agentName": "done", "arguments": {"response": "Transferred 100 from Mario to Georgios"}}"#,
    ]);
    let bank = BankAgents::builder(model.clone()).build().unwrap();
    let answer = bank.bank("Transfer 100 from Mario to Georgios").await.unwrap();
    assert_eq!(answer, "Transferred 100 from Mario to Georgios");
    let system = model.requests()[0].messages[0].text().to_string();
    assert!(
        system.contains("- withdraw: Withdraws an amount from a user's account. Arguments: {\"user\":\"string\",\"amount\":\"number\"}"),
        "{system}"
    );
}

/// A counter shared by the agents that take it (a `#[resource]`).
#[derive(Clone, Default)]
struct Tally(std::sync::Arc<std::sync::atomic::AtomicI64>);

/// Adds `amount` to the tally and answers the new total without writing the state.
#[agent(reply_only)]
async fn add(#[resource] tally: Tally, amount: i64) -> i64 {
    tally.0.fetch_add(amount, std::sync::atomic::Ordering::SeqCst) + amount
}

/// Splits a name into two keys at once; a `None` field leaves its key alone.
#[derive(Serialize)]
struct NameParts {
    first: String,
    last: Option<String>,
}

/// Writes `first` and `last` from `name`, when `name` changes only; `title` is read, not waited for.
#[agent(update, inputs("name"))]
fn split_name(name: String, title: Option<String>) -> NameParts {
    let mut words = name.split_whitespace();
    let first = format!("{}{}", title.map(|t| format!("{t} ")).unwrap_or_default(), words.next().unwrap_or_default());
    NameParts { first, last: words.next().map(str::to_string) }
}

/// Answers a number where a state update is expected.
#[agent(update)]
fn not_an_update(x: i64) -> i64 {
    x
}

#[agents]
trait Counter {
    /// Adds twice through the supervisor.
    #[supervisor(agents(self::add), response = "summary", output_key = "total")]
    async fn count(&self, request: String) -> String;
}

#[tokio::test]
async fn resources_reach_the_agents_and_reply_only_agents_answer_without_a_key() {
    let tally = Tally::default();
    let agent = add_agent(tally.clone());
    assert_eq!(agent.spec().output_key, None);
    assert_eq!(agent.spec().inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["amount"]);
    let outcome = agent.invoke().input("amount", 5).await.unwrap();
    assert_eq!(outcome.output(), Some(&json!(5)));
    assert_eq!(outcome.state().get("amount"), Some(&json!(5)));
    assert_eq!(outcome.state().to_map().len(), 1);
    assert_eq!(tally.0.load(std::sync::atomic::Ordering::SeqCst), 5);

    // The trait's builder gives the resource to every agent naming its type; without it, `build` says which.
    let model = ScriptedModel::new([
        r#"{"agentName": "add", "arguments": {"amount": 2}}"#,
        r#"{"agentName": "add", "arguments": {"amount": 3}}"#,
        r#"{"agentName": "done", "arguments": {"response": "5 in all"}}"#,
    ]);
    let counter = CounterAgents::builder(model.clone()).resource(tally.clone()).build().unwrap();
    assert_eq!(counter.count("add 2 then 3").await.unwrap(), "5 in all");
    assert_eq!(tally.0.load(std::sync::atomic::Ordering::SeqCst), 10);
    let err = CounterAgents::builder(model).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "`add`: `#[resource] tally` needs a value of type `it::declarative_agents::Tally`: give it to the builder with \
         `.resource(..)`"
    );
}

#[tokio::test]
async fn an_update_agent_writes_its_fields_and_reads_what_it_does_not_wait_for() {
    let agent = split_name_agent();
    let spec = agent.spec();
    assert_eq!(spec.inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["name"]);
    assert_eq!(spec.output_key, None);
    let outcome = agent.invoke().input("name", "Ada Lovelace").input("title", "Lady").await.unwrap();
    assert_eq!(outcome.state().get("first"), Some(&json!("Lady Ada")));
    assert_eq!(outcome.state().get("last"), Some(&json!("Lovelace")));
    // Absent: the optional parameter reads `None`; a `None` field writes nothing.
    let outcome = agent.invoke().input("name", "Plato").await.unwrap();
    assert_eq!(outcome.state().get("first"), Some(&json!("Plato")));
    assert_eq!(outcome.state().get("last"), None);

    let err = not_an_update_agent().invoke().input("x", 3).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `not_an_update` (root) failed: an `update` agent returns a struct or map whose fields are state keys, \
         not 3"
    );
}

/// Notes a line for `copies` copies.
#[agent(output_key = "line")]
fn print_line(copies: i64) -> String {
    format!("{copies} x")
}

#[agents]
trait Printer {
    /// Asks how many copies to print.
    #[human(prompt = "How many copies?", response_id = "copies", output_key = "copies")]
    async fn ask_copies(&self) -> i64;

    /// Asks, then prints.
    #[sequence(agents(ask_copies, self::print_line), output_key = "line")]
    async fn print(&self, #[memory_id] job: String) -> String;
}

#[tokio::test]
async fn a_typed_human_step_refuses_an_answer_of_another_type_and_asks_again() {
    let store = MemoryStore::new();
    let printer =
        PrinterAgents::builder(ScriptedModel::new(Vec::<String>::new())).store(store.clone()).build().unwrap();
    match printer.print("job-1").await {
        Err(Stop::Suspended(pending)) => assert_eq!(pending[0].prompt, "How many copies?"),
        other => panic!("expected a suspension, got {other:?}"),
    }
    // A wrong answer never reaches the state: the run stays suspended, and the question says why.
    let resume = || printer.print_agent().resume("job-1").store(store.clone());
    let refused = resume().answer("copies", "three").await.unwrap();
    assert!(refused.is_suspended());
    assert_eq!(refused.pending()[0].prompt, "How many copies?\n(the answer \"three\" is not an integer)");
    assert_eq!(refused.state().get("copies"), None);
    let refused = resume().answer("copies", "2.5").await.unwrap();
    assert_eq!(refused.pending()[0].prompt, "How many copies?\n(the answer \"2.5\" is not an integer)");
    // An answer to a question the run does not ask is refused, naming the ones it asks.
    let err = resume().answer("copise", "3").await.unwrap_err();
    assert_eq!(err.to_string(), "run `job-1`: no pending response `copise` (pending: copies)");
    // A fitting one is coerced to the declared type.
    let done = resume().answer("copies", " 3 ").await.unwrap();
    assert_eq!(done.output(), Some(&json!("3 x")));
    assert_eq!(done.state().get("copies"), Some(&json!(3)));
}

/// Announces a name, waiting for `trigger` only.
#[agent(inputs("trigger"), output_key = "announcement")]
fn announce(name: String, nick: Option<String>) -> String {
    format!("{name}{}", nick.map(|n| format!(" ({n})")).unwrap_or_default())
}

#[tokio::test]
async fn a_parameter_read_without_waiting_is_checked_when_read() {
    let outcome = announce_agent().invoke().input("trigger", true).input("name", "Ada").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("Ada")));
    let err = announce_agent().invoke().input("trigger", true).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `announce` (root): input `name` = null cannot be coerced to alloc::string::String (invalid type: \
         null, expected a string)"
    );
}
