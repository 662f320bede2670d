//! The model chosen per invocation (SPEC.md §7) with scripted models: `model: {choose, default}` on an `llm`
//! agent switching models mid-run in a loop, the default when the expression gives nothing, the run's usage
//! read by the expression, a supervisor's and a decision router's choice, the located `validate` errors and
//! the run-time error naming the value; the model used in each step's record and usage per model.

#![allow(clippy::unwrap_used)]

use agentic::agents::model::{ChatModelRef, ModelChoice, ScriptedModel};
use agentic::agents::{LlmAgent, OutputType};
use agentic::engine::{InvocationRecord, SpecBuilder};
use agentic_spec::Spec;
use serde_json::json;

use crate::common::{at, one};

/// A loop of three rounds: `count` raises `n`, `ask` answers with `small` while `n` < 2, then with `strong`.
const LOOP: &str = r#"
version: 1
root: rounds
models:
  small: { provider: scripted, replies: ["s1", "s2", "s3"] }
  strong: { provider: scripted, replies: ["S1", "S2", "S3"] }
agents:
  rounds: { kind: loop, agents: [count, ask], max_iterations: 3, output_key: answer }
  count: { kind: compute, value: "(n | default(0)) + 1", output_key: n }
  ask:
    kind: llm
    model: { choose: "'strong' if n >= 2 else 'small'", default: small }
    user: "Round {{ n }}"
    output_key: answer
"#;

/// The models each completed invocation of `agent` used, in order.
fn models_of(history: &[InvocationRecord], agent: &str) -> Vec<Vec<String>> {
    history
        .iter()
        .filter(|r| r.agent == agent)
        .map(|r| r.usage.as_ref().map(|u| u.models.clone()).unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn the_choice_follows_the_state_across_the_invocations_of_one_run() {
    let built = Spec::parse(LOOP, "rounds.yaml").unwrap().build().unwrap();
    let out = built.root.invoke().await.unwrap();
    // Round 1 on the small model, rounds 2 and 3 on the strong one: each model's script moved as far.
    assert_eq!(out.output(), Some(&json!("S2")));
    let history = out.scope().history().await.unwrap();
    assert_eq!(models_of(&history, "ask"), [vec!["small"], vec!["strong"], vec!["strong"]]);
    let answers: Vec<serde_json::Value> =
        history.iter().filter(|r| r.agent == "ask").map(|r| r.output.clone()).collect();
    assert_eq!(answers, [json!("s1"), json!("S1"), json!("S2")]);

    // Usage per model: one call of the small model, two of the strong one (scripted tokens are words).
    let usage = out.scope().usage(&[]).await.unwrap();
    let per_model: Vec<(String, u64, u64, u64)> =
        usage.per_model().into_iter().map(|m| (m.model, m.model_calls, m.input_tokens, m.output_tokens)).collect();
    assert_eq!(per_model, [("small".to_string(), 1, 2, 1), ("strong".to_string(), 2, 4, 2)]);
    assert_eq!(usage.models, ["small", "strong"]);
}

#[tokio::test]
async fn an_expression_giving_nothing_uses_the_default() {
    let yaml = LOOP
        .replace("'strong' if n >= 2 else 'small'", "'strong' if hard is defined and hard else none")
        .replace("default: small", "default: strong");
    let out = Spec::parse(&yaml, "rounds.yaml").unwrap().build().unwrap().root.invoke().await.unwrap();
    let history = out.scope().history().await.unwrap();
    assert_eq!(models_of(&history, "ask"), [vec!["strong"], vec!["strong"], vec!["strong"]]);

    // With `hard` true the expression's own answer is used.
    let yaml = yaml.replace("none", "'small'");
    let built = Spec::parse(&yaml, "rounds.yaml").unwrap().build().unwrap();
    let out = built.root.invoke().input("hard", false).await.unwrap();
    let history = out.scope().history().await.unwrap();
    assert_eq!(models_of(&history, "ask"), [vec!["small"], vec!["small"], vec!["small"]]);
}

#[tokio::test]
async fn the_choice_reads_the_runs_usage_and_falls_back_once_it_passes_a_threshold() {
    // Each call of the strong model costs 3 tokens here; after 6 tokens the small one takes over.
    let yaml = LOOP.replace(
        "'strong' if n >= 2 else 'small'",
        "'small' if usage.by_model.strong is defined and usage.by_model.strong.tokens >= 6 else 'strong'",
    );
    let out = Spec::parse(&yaml, "rounds.yaml").unwrap().build().unwrap().root.invoke().await.unwrap();
    let history = out.scope().history().await.unwrap();
    assert_eq!(models_of(&history, "ask"), [vec!["strong"], vec!["strong"], vec!["small"]]);
    assert_eq!(out.output(), Some(&json!("s1")));
}

#[tokio::test]
async fn a_name_that_is_not_a_model_fails_the_invocation_naming_the_value_and_the_models() {
    let yaml = LOOP.replace("\"'strong' if n >= 2 else 'small'\"", "wanted");
    let built = Spec::parse(&yaml, "rounds.yaml").unwrap().build().unwrap();
    let Err(err) = built.root.invoke().input("wanted", "huge").await else { panic!("the run fails") };
    assert_eq!(
        err.to_string(),
        "agent `ask` (root/1) failed: the model choice gave `huge`, which is not one of the models it chooses from \
         (small, strong)"
    );
    // A value that is no name at all says what it was.
    let Err(err) = built.root.invoke().input("wanted", 3).await else { panic!("the run fails") };
    assert_eq!(
        err.to_string(),
        "agent `ask` (root/1) failed: the model choice failed: `wanted` gave 3, not a model name"
    );
}

#[test]
fn validate_locates_a_literal_that_is_not_a_model_and_a_default_that_is_not_one() {
    let yaml = LOOP.replace("'strong' if n >= 2 else 'small'", "'strong' if n >= 2 else 'smal'");
    let e = one(&yaml);
    assert_eq!(at(&e), (12, 22, Some("ask"), Some("model.choose")));
    assert_eq!(
        e.message,
        "`choose` can give `smal`, which is not a model (did you mean `small`?); defined models: `small`, `strong`"
    );

    let e = one(&LOOP.replace("default: small", "default: tiny"));
    assert_eq!(at(&e), (12, 66, Some("ask"), Some("model.default")));
    assert_eq!(e.message, "unknown model `tiny`; defined models: `small`, `strong`");

    let e = one(&LOOP.replace(", default: small", ""));
    assert_eq!(at(&e), (12, 12, Some("ask"), Some("model")));
    assert_eq!(e.message, "missing field `default`");

    let e = one(&LOOP.replace("'strong' if n >= 2 else 'small'", "'strong' if n >="));
    assert_eq!(at(&e), (12, 22, Some("ask"), Some("model.choose")));
    assert!(e.message.starts_with("invalid expression: "), "{}", e.message);

    let e = one(&LOOP.replace("'strong' if n >= 2 else 'small'", "'strong' if n >= 2 else 7"));
    assert_eq!(at(&e), (12, 22, Some("ask"), Some("model.choose")));
    assert_eq!(e.message, "`choose` can give 7, which is not a model name (a string naming one of `models`)");

    let e = one(&LOOP.replace("model: { choose", "model: { chose"));
    assert_eq!(e.message, "unknown field `chose` (did you mean `choose`?), expected one of `choose`, `default`");
}

#[tokio::test]
async fn a_supervisor_and_a_decision_router_choose_their_model_per_invocation() {
    let supervisor = r#"
version: 1
root: desk
models:
  cheap: { provider: scripted, replies: ['{"agentName": "done", "arguments": {"response": "cheap plan"}}'] }
  deep: { provider: scripted, replies: ['{"agentName": "done", "arguments": {"response": "deep plan"}}'] }
agents:
  desk:
    kind: supervisor
    agents: [echo]
    model: { choose: "'deep' if request | length > 20 else 'cheap'", default: cheap }
    output_key: plan
  echo: { kind: compute, description: Echoes, value: "request", output_key: echoed }
"#;
    let run = |yaml: &str, request: &str| {
        let built = Spec::parse(yaml, "desk.yaml").unwrap().build().unwrap();
        let request = request.to_string();
        async move { built.root.invoke().input("request", request).await.unwrap() }
    };
    let out = run(supervisor, "short").await;
    assert_eq!(out.output(), Some(&json!("cheap plan")));
    let out = run(supervisor, "a request long enough for the deep model").await;
    assert_eq!(out.output(), Some(&json!("deep plan")));
    assert_eq!(models_of(&out.scope().history().await.unwrap(), "planner"), [vec!["deep"]]);

    let router = r#"
version: 1
root: triage
models:
  quick: { provider: scripted, decisions: [legal] }
  careful: { provider: scripted, decisions: [medical] }
agents:
  triage:
    kind: decision_router
    agents: [legal, medical]
    model: { choose: "'careful' if urgent else 'quick'", default: quick }
  legal: { kind: compute, description: Legal., template: "legal: {{ request }}", output_key: answer }
  medical: { kind: compute, description: Medical., template: "medical: {{ request }}", output_key: answer }
"#;
    let built = Spec::parse(router, "router.yaml").unwrap().build().unwrap();
    let out = built.root.invoke().input("request", "a fall").input("urgent", true).await.unwrap();
    assert_eq!(out.output(), Some(&json!("medical: a fall")));
    assert_eq!(models_of(&out.scope().history().await.unwrap(), "router"), [vec!["careful"]]);
    let built = Spec::parse(router, "router.yaml").unwrap().build().unwrap();
    let out = built.root.invoke().input("request", "a contract").input("urgent", false).await.unwrap();
    assert_eq!(out.output(), Some(&json!("legal: a contract")));
    assert_eq!(models_of(&out.scope().history().await.unwrap(), "router"), [vec!["quick"]]);
}

#[tokio::test]
async fn a_rust_agent_chooses_among_named_models() {
    let small = ScriptedModel::new(["short answer"]);
    let strong = ScriptedModel::new(["long answer"]);
    let choice = ModelChoice::new("small", |view| {
        let long = view.get("request").and_then(|v| v.as_str()).is_some_and(|r| r.len() > 10);
        long.then(|| "strong".to_string())
    })
    .model("small", ChatModelRef::new(small.clone()).named("small"))
    .model("strong", ChatModelRef::new(strong.clone()).named("strong"));
    let agent = LlmAgent::builder(ChatModelRef::choosing(choice))
        .name("answer")
        .user("{{ request }}")
        .output(OutputType::String)
        .output_key("answer")
        .build()
        .unwrap();
    let out = agent.invoke().input("request", "a long request indeed").await.unwrap();
    assert_eq!(out.output(), Some(&json!("long answer")));
    assert_eq!((small.used(), strong.used()), (0, 1));
    assert_eq!(models_of(&out.scope().history().await.unwrap(), "answer"), [vec!["strong"]]);
}

/// The strong model for long requests, else the builder's model.
fn by_length(view: &agentic::engine::ScopeView) -> Option<String> {
    let long = view.get("request").and_then(|v| v.as_str()).is_some_and(|r| r.len() > 10);
    long.then(|| "strong".to_string())
}

#[agentic::prelude::agents]
trait Desk {
    /// Answers, on the model the request's length picks.
    #[agent(user = "{{ request }}", output_key = "answer", model = by_length)]
    async fn answer(&self, request: String) -> String;

    /// Reviews, always on the strong model.
    #[agent(user = "Review: {{ answer }}", output_key = "review", model = "strong")]
    async fn review(&self, answer: String) -> String;
}

#[tokio::test]
async fn declared_agents_name_their_model_or_choose_it_per_invocation() {
    let base = ScriptedModel::new(["base answer"]);
    let strong = ScriptedModel::new(["strong answer", "strong review"]);
    let desk = DeskAgents::builder(base.clone()).model("strong", strong.clone()).build().unwrap();
    assert_eq!(desk.answer("short").await.unwrap(), "base answer");
    assert_eq!(desk.answer("a long request indeed").await.unwrap(), "strong answer");
    assert_eq!(desk.review("fine").await.unwrap(), "strong review");
    assert_eq!((base.used(), strong.used()), (1, 2));

    // A name no model was given under fails the build, naming it.
    let Err(err) = DeskAgents::builder(base).build() else { panic!("refused") };
    assert_eq!(
        err.to_string(),
        "`review`: `model = \"strong\"`: no model of that name was given to the builder (`.model(\"strong\", \
         ..)`); given: none"
    );
}

#[tokio::test]
async fn a_mapper_item_is_what_the_choice_reads() {
    let yaml = r#"
version: 1
root: each
models:
  small: { provider: scripted, replies: ["s1", "s2"] }
  strong: { provider: scripted, replies: ["S1", "S2"] }
agents:
  each: { kind: parallel_mapper, agent: ask, items: questions, max_concurrency: 1, output_key: answers }
  ask:
    kind: llm
    model: { choose: "'strong' if question | length > 5 else 'small'", default: small }
    user: "{{ question }}"
"#;
    let built = Spec::parse(yaml, "each.yaml").unwrap().build().unwrap();
    // A state key of the item's name is not what the choice reads: the item is.
    let out = built.root.invoke().input("questions", json!(["hi", "a long one"])).input("question", "x").await.unwrap();
    assert_eq!(out.output(), Some(&json!(["s1", "S1"])));
}

#[tokio::test]
async fn a_resumed_invocation_keeps_the_model_its_journaled_turns_were_answered_by() {
    let spec = |choose: &str| {
        format!(
            r#"
version: 1
root: desk
models:
  small: {{ provider: scripted, replies: ["small done"] }}
  strong: {{ provider: scripted, replies: ['{{"tool_calls": [{{"name": "echo", "arguments": {{"x": "a"}}}}]}}', "strong done"] }}
agents:
  desk:
    kind: llm
    model: {{ choose: "{choose}", default: small }}
    user: go
    tools: [{{ name: echo, description: Echoes, parameters: {{ x: string }}, value: "x", approve: true }}]
"#
        )
    };
    let store = agentic::store::MemoryStore::new().store_ref();
    let first = Spec::parse(&spec("'strong'"), "desk.yaml").unwrap().build().unwrap();
    let out = first.root.invoke().memory_id("t1").store_ref(store.clone()).await.unwrap();
    assert_eq!(out.pending()[0].id, "tool:root:0");
    agentic::engine::respond(&store, "t1", Some("tool:root:0"), json!("approve")).await.unwrap();
    // The choice now gives the small model: the invocation under way keeps the strong one.
    let second = Spec::parse(&spec("'small'"), "desk.yaml").unwrap().build().unwrap();
    let done = second.root.resume("t1").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("strong done")));
    assert_eq!(models_of(&done.scope().history().await.unwrap(), "desk"), [vec!["strong"]]);
}

#[tokio::test]
async fn a_chat_model_asked_as_a_decision_model_counts_its_cost_and_its_failed_attempts() {
    let yaml = |replies: &str| {
        format!(
            r#"
version: 1
root: safe
models:
  chat: {{ provider: scripted, replies: {replies}, prices: {{ input_per_mtok: 1000, output_per_mtok: 1000 }} }}
agents:
  safe: {{ kind: sequence, agents: [triage], error_handler: {{ fallback: "'none'" }}, output_key: answer }}
  triage:
    kind: decision_router
    agents: [legal, medical]
    model: {{ choose: "'chat'", default: chat }}
  legal: {{ kind: compute, description: Legal., template: "legal: {{{{ request }}}}", output_key: answer }}
  medical: {{ kind: compute, description: Medical., template: "medical: {{{{ request }}}}", output_key: answer }}
"#
        )
    };
    let run = |yaml: String| async move {
        let built = Spec::parse(&yaml, "triage.yaml").unwrap().build().unwrap();
        built.root.invoke().input("request", "a contract").await.unwrap()
    };
    let out = run(yaml(r#"['{"agent": "legal"}']"#)).await;
    assert_eq!(out.output(), Some(&json!("legal: a contract")));
    let usage = out.scope().usage(&[]).await.unwrap();
    // The scripted model counts words: the decision prompt's, and one word answered.
    assert_eq!((usage.model_calls, usage.models.clone()), (1, vec!["chat".to_string()]));
    let priced = (usage.input_tokens + usage.output_tokens) as f64 * 1000.0 / 1e6;
    assert!(usage.cost_usd.is_some_and(|c| (c - priced).abs() < 1e-9), "{usage:?}");

    // Three unreadable answers: the router fails, the fallback answers, and the three attempts are counted.
    let out = run(yaml(r#"['{"pick": 1}', '{"pick": 2}', '{"pick": 3}']"#)).await;
    assert_eq!(out.state().get("answer"), None, "no agent was routed to");
    let usage = out.scope().usage(&[]).await.unwrap();
    assert_eq!((usage.model_calls, usage.output_tokens), (1, 6), "{usage:?}");
    assert!(usage.cost_usd.is_some_and(|c| c > 0.0), "{usage:?}");
}

/// Echoes the request it is given.
#[agentic::prelude::agent(output_key = "echoed", description = "Echoes the request")]
async fn echo(request: String) -> String {
    format!("echo: {request}")
}

/// Answers legal questions.
#[agentic::prelude::agent(output_key = "answer", description = "Answers legal questions")]
async fn legal(request: String) -> String {
    format!("legal: {request}")
}

/// Answers medical questions.
#[agentic::prelude::agent(output_key = "answer", description = "Answers medical questions")]
async fn medical(request: String) -> String {
    format!("medical: {request}")
}

/// The planner the request's length picks (`None`: the builder's model).
fn planner_for(view: &agentic::engine::ScopeView) -> Option<String> {
    by_length(view).map(|_| "deep".to_string())
}

#[agentic::prelude::agents]
trait Office {
    /// Plans on the named planner.
    #[supervisor(agents(self::echo), model = "deep", output_key = "plan")]
    async fn plan(&self, request: String) -> String;

    /// Plans on the planner the request's length picks.
    #[supervisor(agents(self::echo), model = planner_for, output_key = "plan")]
    async fn triage_plan(&self, request: String) -> String;

    /// Routes on the named decision model.
    #[decision_router(agents(self::legal, self::medical), model = "router", output_key = "answer")]
    async fn route(&self, request: String) -> String;
}

#[tokio::test]
async fn declared_supervisors_and_routers_take_their_model_by_name_or_by_choice() {
    let done = |said: &str| format!(r#"{{"agentName": "done", "arguments": {{"response": "{said}"}}}}"#);
    let base = ScriptedModel::new([done("base plan")]);
    let deep = ScriptedModel::new([done("deep plan"), done("deep triage")]);
    let router = ScriptedModel::new([r#"{"agent": "medical"}"#]);
    let office = OfficeAgents::builder(base.clone())
        .model("deep", deep.clone())
        .model("router", router.clone())
        .build()
        .unwrap();
    assert_eq!(office.plan("x").await.unwrap(), "deep plan");
    assert_eq!(office.triage_plan("short").await.unwrap(), "base plan");
    assert_eq!(office.triage_plan("a long request indeed").await.unwrap(), "deep triage");
    assert_eq!(office.route("a fall").await.unwrap(), "medical: a fall");
    assert_eq!((base.used(), deep.used(), router.used()), (1, 2, 1));
}
