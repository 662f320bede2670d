//! The supervisor with a scripted planning model: a bank transfer (withdraw, credit, done), the exact
//! prompt, invalid decisions fed back to the model, the retry bound, `max_invocations`, and resuming after a
//! human sub-agent suspended the run; the decision router (one choice, a threshold, feedback, resume).

use agentic::agents::model::ScriptedModel;
use agentic::agents::{FnAgent, Human};
use agentic::engine::{AgentRef, InputSpec, SpecBuilder, ValueType};
use agentic::planners::{DecisionRouter, ResponseStrategy, Supervisor};
use agentic::prelude::CompositeBuilderExt;
use serde_json::{Value, json};

fn account_agent(name: &str, description: &str, verb: &'static str) -> AgentRef {
    FnAgent::from_async(name, move |inputs| async move {
        let user = inputs.get("user").and_then(Value::as_str).unwrap_or_default().to_string();
        let amount = inputs.get("amount").cloned().unwrap_or(Value::Null);
        Ok(json!(format!("{user} {verb} {amount}")))
    })
    .description(description)
    .input(InputSpec::new("user").typed(ValueType::String))
    .input(InputSpec::new("amount").typed(ValueType::Number))
    .output_key(format!("{name}_result"))
    .build()
}

fn bank(model: &ScriptedModel, strategy: ResponseStrategy) -> AgentRef {
    Supervisor::builder()
        .name("bank")
        .sub_agents([
            account_agent("withdraw", "Withdraws an amount from a user's account.", "withdrew"),
            account_agent("credit", "Credits an amount to a user's account.", "received"),
        ])
        .chat_model(model.clone())
        .response_strategy(strategy)
        .supervisor_context("Amounts are in euros.")
        .output_key("result")
        .build()
        .expect("supervisor")
}

const WITHDRAW: &str = r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 100}}"#;
const CREDIT: &str = r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 100}}"#;
const DONE: &str = r#"{"agentName": "done", "arguments": {"response": "Transferred 100 from Mario to Georgios"}}"#;

const SYSTEM: &str = "You are a supervisor coordinating agents. Decide which agent to invoke next to fulfil the \
user's request, or finish with `done`.
Available agents:
- withdraw: Withdraws an amount from a user's account. Arguments: {\"user\":\"string\",\"amount\":\"number\"}
- credit: Credits an amount to a user's account. Arguments: {\"user\":\"string\",\"amount\":\"number\"}
- done: Finish with the final response. Arguments: {\"response\":\"string\"}
Answer with a JSON object only: {\"agentName\": \"<agent name>\", \"arguments\": {\"<argument>\": <value>}}
Context: Amounts are in euros.";

const REQUEST: &str = "Transfer 100 from Mario to Georgios";

fn messages(model: &ScriptedModel, i: usize) -> Vec<(String, String)> {
    model.requests()[i].messages.iter().map(|m| (m.role().to_string(), m.text().to_string())).collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_string(), text.to_string())
}

#[tokio::test]
async fn a_bank_transfer_withdraws_credits_and_answers_with_the_summary() {
    let model = ScriptedModel::new([WITHDRAW, CREDIT, DONE]);
    let bank = bank(&model, ResponseStrategy::Summary);
    let out = bank.invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Transferred 100 from Mario to Georgios")));
    assert_eq!(out.state().get("result"), Some(&json!("Transferred 100 from Mario to Georgios")));
    assert_eq!(out.state().get("withdraw_result"), Some(&json!("Mario withdrew 100")));
    assert_eq!(out.state().get("credit_result"), Some(&json!("Georgios received 100")));
    // Arguments are written to the state before the chosen agent runs.
    assert_eq!(out.state().get("user"), Some(&json!("Georgios")));
    assert_eq!(out.state().get("amount"), Some(&json!(100)));

    assert_eq!(model.requests().len(), 3);
    assert_eq!(
        messages(&model, 0),
        [pair("system", SYSTEM), pair("user", &format!("Request: {REQUEST}\nInvocations so far: none"))]
    );
    assert_eq!(
        messages(&model, 2),
        [
            pair("system", SYSTEM),
            pair(
                "user",
                &format!(
                    "Request: {REQUEST}\nInvocations so far:\n\
                     1. withdraw({{\"user\":\"Mario\",\"amount\":100}}) -> \"Mario withdrew 100\"\n\
                     2. credit({{\"user\":\"Georgios\",\"amount\":100}}) -> \"Georgios received 100\""
                )
            )
        ]
    );
}

#[tokio::test]
async fn the_default_strategy_answers_with_the_last_output() {
    let model = ScriptedModel::new([WITHDRAW, CREDIT, DONE]);
    let out = bank(&model, ResponseStrategy::Last).invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Georgios received 100")));
}

#[tokio::test]
async fn an_unknown_agent_is_fed_back_and_corrected() {
    let model = ScriptedModel::new([r#"{"agentName": "transfer", "arguments": {}}"#, WITHDRAW, DONE]);
    let out = bank(&model, ResponseStrategy::Last).invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Mario withdrew 100")));
    let second = messages(&model, 1);
    assert_eq!(second.len(), 4);
    assert_eq!(second[2], pair("assistant", r#"{"agentName": "transfer", "arguments": {}}"#));
    assert_eq!(
        second[3],
        pair(
            "user",
            "Invalid answer: unknown agent `transfer`; choose one of: withdraw, credit, done. Answer again with a \
             JSON object only: {\"agentName\": \"<agent name>\", \"arguments\": {\"<argument>\": <value>}}"
        )
    );
}

#[tokio::test]
async fn a_badly_typed_argument_is_fed_back() {
    let bad = r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": "a lot"}}"#;
    let model = ScriptedModel::new([bad, WITHDRAW, DONE]);
    let out = bank(&model, ResponseStrategy::Last).invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Mario withdrew 100")));
    assert!(
        messages(&model, 1)[3]
            .1
            .starts_with("Invalid answer: argument `amount` of `withdraw` must be number, got \"a lot\"."),
        "{:?}",
        messages(&model, 1)[3]
    );
}

#[tokio::test]
async fn malformed_json_past_the_retry_bound_fails_quoting_the_reply() {
    let model = ScriptedModel::new(["I think withdraw", "withdraw, definitely"]);
    let bank = Supervisor::builder()
        .sub_agents([account_agent("withdraw", "Withdraws.", "withdrew")])
        .chat_model(model.clone())
        .max_retries(1)
        .build()
        .expect("supervisor");
    let err = bank.invoke().input("request", REQUEST).await.expect_err("fails");
    let text = err.to_string();
    assert!(text.contains("invalid supervisor decision after 2 attempts"), "{text}");
    assert!(text.contains("the model replied: withdraw, definitely"), "{text}");
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn max_invocations_finishes_with_the_last_output() {
    let model = ScriptedModel::new([WITHDRAW, CREDIT, DONE]);
    let bank = Supervisor::builder()
        .sub_agents([
            account_agent("withdraw", "Withdraws.", "withdrew"),
            account_agent("credit", "Credits.", "received"),
        ])
        .chat_model(model.clone())
        .max_invocations(1)
        .build()
        .expect("supervisor");
    let out = bank.invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Mario withdrew 100")));
    assert_eq!(model.requests().len(), 1, "no decision is asked past the bound");
}

#[tokio::test]
async fn an_argument_does_not_overwrite_a_value_of_an_incompatible_type() {
    let model = ScriptedModel::new([WITHDRAW, DONE]);
    let out = bank(&model, ResponseStrategy::Last)
        .invoke()
        .input("request", REQUEST)
        .input("amount", json!({"currency": "EUR"}))
        .await
        .expect("run");
    assert_eq!(out.output(), Some(&json!("Mario withdrew 100")), "the call binding still applies");
    assert_eq!(out.state().get("amount"), Some(&json!({"currency": "EUR"})));
    assert_eq!(out.state().get("user"), Some(&json!("Mario")));
}

#[tokio::test]
async fn a_human_sub_agent_suspends_and_the_run_resumes_without_asking_again() {
    let model = ScriptedModel::new([
        r#"{"agentName": "approver", "arguments": {}}"#,
        WITHDRAW,
        r#"{"agentName": "done", "arguments": {"response": "ok"}}"#,
    ]);
    let approver = Human::builder("approver", "Approve the transfer?")
        .expect("human")
        .response_id("approval")
        .description("Asks a human to approve.")
        .output_key("approval")
        .build();
    let bank = Supervisor::builder()
        .sub_agents([approver, account_agent("withdraw", "Withdraws.", "withdrew")])
        .chat_model(model.clone())
        .build()
        .expect("supervisor");
    let first = bank.invoke().input("request", REQUEST).await.expect("run");
    assert!(first.is_suspended());
    assert_eq!(first.pending()[0].id, "approval");
    assert_eq!(model.requests().len(), 1);
    let done = first.resume().answer("approval", "APPROVED").await.expect("resume");
    assert_eq!(done.output(), Some(&json!("Mario withdrew 100")));
    assert_eq!(done.state().get("approval"), Some(&json!("APPROVED")));
    assert_eq!(model.requests().len(), 3, "the decision taken before the suspension is not asked again");
    assert!(messages(&model, 1)[1].1.contains("1. approver({}) -> \"APPROVED\""), "{:?}", messages(&model, 1));
}

fn expert(name: &str, description: &str) -> AgentRef {
    let answer = format!("{name} answer");
    FnAgent::from_async(name, move |_| {
        let answer = answer.clone();
        async move { Ok(json!(answer)) }
    })
    .description(description)
    .output_key(format!("{name}_answer"))
    .build()
}

fn experts() -> [AgentRef; 3] {
    [
        expert("legal", "Answers legal questions."),
        expert("medical", "Answers medical questions."),
        expert("technical", "Answers technical questions."),
    ]
}

#[tokio::test]
async fn a_router_runs_the_chosen_agent_and_never_asks_again_on_resume() {
    let model = ScriptedModel::new(["\"Medical.\""]);
    let router =
        DecisionRouter::builder().sub_agents(experts()).chat_model(model.clone()).output_key("answer").build().unwrap();
    let out = router.invoke().input("request", "I broke my leg").await.expect("run");
    assert_eq!(out.output(), Some(&json!("medical answer")));
    assert_eq!(out.state().get("answer"), Some(&json!("medical answer")));
    assert_eq!(out.state().get("legal_answer"), None);
    assert_eq!(
        messages(&model, 0),
        [pair(
            "user",
            "Which agent should handle the request? Agents:\n- legal: Answers legal questions.\n- medical: Answers \
             medical questions.\n- technical: Answers technical questions.\nRequest: I broke my leg\nAnswer with the \
             agent's name only."
        )]
    );

    // A human chosen by the router suspends; the resumed run does not ask the model again.
    let model = ScriptedModel::new(["reviewer", "not again"]);
    let reviewer = Human::builder("reviewer", "Review?").unwrap().response_id("review").description("A human.").build();
    let router = DecisionRouter::builder()
        .sub_agents([expert("legal", "Answers legal questions."), reviewer])
        .chat_model(model.clone())
        .build()
        .unwrap();
    let first = router.invoke().input("request", "check this").await.expect("run");
    assert!(first.is_suspended());
    let done = first.resume().answer("review", "LGTM").await.expect("resume");
    assert_eq!(done.output(), Some(&json!("LGTM")));
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn a_router_with_a_threshold_runs_every_fitting_agent() {
    let model = ScriptedModel::new(["yes", "0.2", "0.9"]);
    let router =
        DecisionRouter::builder().sub_agents(experts()).chat_model(model.clone()).threshold(0.5).build().unwrap();
    let out = router.invoke().input("request", "A contract for a server").await.expect("run");
    assert_eq!(out.output(), Some(&json!({"legal": "legal answer", "technical": "technical answer"})));
    assert_eq!(
        messages(&model, 1),
        [pair(
            "user",
            "Should the agent `medical` (Answers medical questions.) handle the request?\nRequest: A contract for a \
             server\nAnswer yes or no, or with a confidence between 0 and 1."
        )]
    );

    let model = ScriptedModel::new(["no", "no", "0"]);
    let router = DecisionRouter::builder().sub_agents(experts()).chat_model(model).threshold(0.5).build().unwrap();
    let out = router.invoke().input("request", "Hello").await.expect("run");
    assert_eq!(out.output(), Some(&json!({})));
}

#[tokio::test]
async fn a_router_feeds_back_an_unknown_name_then_fails_quoting_the_reply() {
    let model = ScriptedModel::new(["finance", "medical"]);
    let router = DecisionRouter::builder().sub_agents(experts()).chat_model(model.clone()).build().unwrap();
    let out = router.invoke().input("request", "x").await.expect("run");
    assert_eq!(out.output(), Some(&json!("medical answer")));
    assert_eq!(
        messages(&model, 1)[2],
        pair(
            "user",
            "Invalid answer: `finance` is not one of: legal, medical, technical. Answer with the agent's name only."
        )
    );

    let model = ScriptedModel::new(["finance", "banking"]);
    let router = DecisionRouter::builder().sub_agents(experts()).chat_model(model).max_retries(1).build().unwrap();
    let err = router.invoke().input("request", "x").await.expect_err("fails").to_string();
    assert!(err.contains("invalid routing decision after 2 attempts"), "{err}");
    assert!(err.contains("the model replied: banking"), "{err}");
}
