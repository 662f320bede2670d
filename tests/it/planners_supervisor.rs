//! The supervisor with a scripted planning model: a bank transfer (withdraw, credit, done; exchange, withdraw,
//! credit with the summary), the exact prompt, invalid decisions fed back to the model, the retry bound,
//! `max_invocations`, the scored response strategy, the summarization context strategies, and resuming
//! after a human sub-agent suspended the run; the decision router with a scripted decision model (one choice,
//! a threshold with parallel agents, none selected) and with a chat model (feedback, resume). Crash tests
//! for both: a crash after every journaled step resumes to the same result with no completed agent and no
//! model call repeated. A supervisor whose agents come from the agents registry picks them by name.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::agents::decision::{Question, ScriptedDecisionModel};
use agentic::agents::model::ScriptedModel;
use agentic::agents::{FnAgent, Human};
use agentic::engine::{AgentRef, AgentRegistry, CheckpointStore, InputSpec, SpecBuilder, ValueType};
use agentic::planners::{ContextStrategy, DecisionRouter, ResponseStrategy, Supervisor};
use agentic::prelude::{CompositeBuilderExt, MemoryStore};
use serde_json::{Map, Value, json};

// crashed_after, completions: a run's journal cut short by a crash, and the completions it holds.
use crate::common;

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
async fn a_supervisor_picks_registered_agents_by_name() {
    // The agents come from the registry a program filled (by name), not from the code building the supervisor.
    let registry = AgentRegistry::new();
    registry.register(account_agent("withdraw", "Withdraws an amount from a user's account.", "withdrew")).unwrap();
    registry.register(account_agent("credit", "Credits an amount to a user's account.", "received")).unwrap();
    let model = ScriptedModel::new([WITHDRAW, CREDIT, DONE]);
    let bank = Supervisor::builder()
        .name("bank")
        .sub_agents(registry.agents(["withdraw", "credit"]).unwrap())
        .chat_model(model.clone())
        .response_strategy(ResponseStrategy::Summary)
        .supervisor_context("Amounts are in euros.")
        .output_key("result")
        .build()
        .unwrap();
    let out = bank.invoke().input("request", REQUEST).await.unwrap();
    assert_eq!(out.output(), Some(&json!("Transferred 100 from Mario to Georgios")));
    assert_eq!(out.state().get("withdraw_result"), Some(&json!("Mario withdrew 100")));
    assert_eq!(out.state().get("credit_result"), Some(&json!("Georgios received 100")));
    // The planner is offered the registered agents by name, exactly as agents built in place.
    assert_eq!(messages(&model, 0)[0], pair("system", SYSTEM));
    // An unknown name is an error before anything is built.
    let err = registry.agents(["withdraw", "refund"]).unwrap_err();
    assert_eq!(err.to_string(), "no agent registered as `refund` (registered: `credit`, `withdraw`)");
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
async fn a_missing_argument_is_fed_back_instead_of_failing_the_run() {
    let short = r#"{"agentName": "withdraw", "arguments": {"user": "Mario"}}"#;
    let model = ScriptedModel::new([short, WITHDRAW, DONE]);
    let out = bank(&model, ResponseStrategy::Last).invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Mario withdrew 100")));
    assert_eq!(
        messages(&model, 1)[3].1,
        "Invalid answer: agent `withdraw` needs `amount` in `arguments` (not in the state yet). Answer again with a \
         JSON object only: {\"agentName\": \"<agent name>\", \"arguments\": {\"<argument>\": <value>}}"
    );
    // An argument already in the state need not be repeated.
    let model = ScriptedModel::new([short, DONE]);
    let out =
        bank(&model, ResponseStrategy::Last).invoke().input("request", REQUEST).input("amount", 5).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Mario withdrew 5")));
}

#[tokio::test]
async fn done_before_any_agent_answers_with_its_response_under_the_last_strategy() {
    let model = ScriptedModel::new([DONE]);
    let out = bank(&model, ResponseStrategy::Last).invoke().input("request", REQUEST).await.expect("run");
    assert_eq!(out.output(), Some(&json!("Transferred 100 from Mario to Georgios")));
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

// ---------------------------------------------------------------------------------------------------------
// The bank of the reference: exchange, withdraw, credit, then the summary.

/// Records the order in which agents ran, and counts runs per agent.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<Vec<String>>>);

impl Runs {
    fn order(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    fn counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for n in self.order() {
            *m.entry(n).or_default() += 1;
        }
        m
    }

    fn get(&self, name: &str) -> usize {
        self.counts().get(name).copied().unwrap_or(0)
    }

    /// An agent typed with `inputs`, computing `f(inputs)` into `<name>_result`, recording its run.
    fn agent(
        &self,
        name: &str,
        description: &str,
        inputs: &[(&str, ValueType)],
        f: impl Fn(&Map<String, Value>) -> Value + Send + Sync + 'static,
    ) -> AgentRef {
        let runs = self.0.clone();
        let n = name.to_string();
        let f = Arc::new(f);
        let mut b = FnAgent::builder(name, move |ctx| {
            let (runs, n, f) = (runs.clone(), n.clone(), f.clone());
            Box::pin(async move {
                runs.lock().unwrap().push(n);
                Ok(f(ctx.inputs()))
            })
        })
        .description(description)
        .output_key(format!("{name}_result"));
        for (k, t) in inputs {
            b = b.input(InputSpec::new(*k).typed(*t));
        }
        b.build()
    }

    fn bank_agents(&self) -> Vec<AgentRef> {
        use ValueType::{Number, String as Text};
        let account = |verb: &'static str| {
            move |m: &Map<String, Value>| json!(format!("{} {verb} {}", m["user"].as_str().unwrap(), m["amount"]))
        };
        vec![
            self.agent(
                "exchange",
                "Converts an amount from the original to the target currency.",
                &[("originalCurrency", Text), ("amount", Number), ("targetCurrency", Text)],
                |m| json!(m["amount"].as_f64().unwrap() * 115.0 / 100.0),
            ),
            self.agent(
                "withdraw",
                "Withdraws USD from a user's account.",
                &[("user", Text), ("amount", Number)],
                account("withdrew"),
            ),
            self.agent(
                "credit",
                "Credits USD to a user's account.",
                &[("user", Text), ("amount", Number)],
                account("received"),
            ),
        ]
    }
}

const EUR_REQUEST: &str = "Transfer 100 EUR from Mario's account to Georgios' one";
const EXCHANGE: &str =
    r#"{"agentName": "exchange", "arguments": {"originalCurrency": "EUR", "amount": 100, "targetCurrency": "USD"}}"#;
const WITHDRAW_USD: &str = r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 115.0}}"#;
const CREDIT_USD: &str = r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 115.0}}"#;
const SUMMARY: &str = "The transfer of 100 EUR (115 USD) from Mario to Georgios is done.";

fn done_with_summary() -> String {
    json!({"agentName": "done", "arguments": {"response": SUMMARY}}).to_string()
}

fn eur_bank(runs: &Runs, model: &ScriptedModel, strategy: ResponseStrategy, context: ContextStrategy) -> AgentRef {
    Supervisor::builder()
        .name("bank")
        .sub_agents(runs.bank_agents())
        .chat_model(model.clone())
        .response_strategy(strategy)
        .context_strategy(context)
        .output_key("summary")
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_transfer_in_euros_exchanges_withdraws_and_credits_then_returns_the_summary() {
    let runs = Runs::default();
    let model = ScriptedModel::new([EXCHANGE, WITHDRAW_USD, CREDIT_USD, &done_with_summary()]);
    let bank = eur_bank(&runs, &model, ResponseStrategy::Summary, ContextStrategy::ChatMemory);
    let out = bank.invoke().input("request", EUR_REQUEST).await.unwrap();
    assert_eq!(runs.order(), ["exchange", "withdraw", "credit"]);
    assert_eq!(out.output(), Some(&json!(SUMMARY)));
    assert_eq!(out.state().get("summary"), Some(&json!(SUMMARY)));
    assert_eq!(out.state().get("exchange_result"), Some(&json!(115.0)));
    assert_eq!(out.state().get("withdraw_result"), Some(&json!("Mario withdrew 115.0")));
    assert_eq!(out.state().get("credit_result"), Some(&json!("Georgios received 115.0")));
    assert_eq!(model.requests().len(), 4);
}

const SCORER_PROMPT: &str = "Score how well each response fulfils the user's request, from 0 (not at all) to 1 \
(completely).
Request: Transfer 100 EUR from Mario's account to Georgios' one
Response `last` (the last agent's output): Georgios received 115.0
Response `summary` (the supervisor's summary): The transfer of 100 EUR (115 USD) from Mario to Georgios is done.
Answer with a JSON object only: {\"last\": <score>, \"summary\": <score>}";

#[tokio::test]
async fn the_scored_strategy_returns_the_better_scored_response() {
    let runs = Runs::default();
    let done = done_with_summary();
    let model = ScriptedModel::new([EXCHANGE, WITHDRAW_USD, CREDIT_USD, &done, r#"{"last": 0.3, "summary": 1.0}"#]);
    let bank = eur_bank(&runs, &model, ResponseStrategy::Scored, ContextStrategy::ChatMemory);
    let out = bank.invoke().input("request", EUR_REQUEST).await.unwrap();
    assert_eq!(out.output(), Some(&json!(SUMMARY)));
    assert_eq!(messages(&model, 4), [pair("user", SCORER_PROMPT)]);

    // The last output wins when it scores higher; an unreadable score is fed back first.
    let model = ScriptedModel::new([
        EXCHANGE,
        WITHDRAW_USD,
        CREDIT_USD,
        &done,
        "the summary is better",
        r#"{"last": 0.9, "summary": 0.2}"#,
    ]);
    let bank = eur_bank(&Runs::default(), &model, ResponseStrategy::Scored, ContextStrategy::ChatMemory);
    let out = bank.invoke().input("request", EUR_REQUEST).await.unwrap();
    assert_eq!(out.output(), Some(&json!("Georgios received 115.0")));
    assert!(
        messages(&model, 5)[2].1.starts_with("Invalid answer: the answer is not valid JSON"),
        "{:?}",
        messages(&model, 5)
    );

    // A tie goes to the summary.
    let model = ScriptedModel::new([EXCHANGE, &done, r#"{"last": 0.5, "summary": 0.5}"#]);
    let bank = eur_bank(&Runs::default(), &model, ResponseStrategy::Scored, ContextStrategy::ChatMemory);
    assert_eq!(bank.invoke().input("request", EUR_REQUEST).await.unwrap().output(), Some(&json!(SUMMARY)));

    // Nothing to compare: `done` without a response returns the last output, without scoring.
    let model = ScriptedModel::new([EXCHANGE, r#"{"agentName": "done", "arguments": {}}"#]);
    let bank = eur_bank(&Runs::default(), &model, ResponseStrategy::Scored, ContextStrategy::ChatMemory);
    assert_eq!(bank.invoke().input("request", EUR_REQUEST).await.unwrap().output(), Some(&json!(115.0)));
    assert_eq!(model.requests().len(), 2);
}

const SUMMARIZER_PROMPT_1: &str = "Summarize what the agents have done so far to fulfil the request, in a few \
sentences, keeping every fact the next decision needs (names, amounts, results). Answer with the summary only.

Request: Transfer 100 EUR from Mario's account to Georgios' one
Invocations:
1. exchange({\"originalCurrency\":\"EUR\",\"amount\":100,\"targetCurrency\":\"USD\"}) -> 115.0";

#[tokio::test]
async fn the_summarization_context_shows_the_planner_a_summary_written_by_the_model() {
    let runs = Runs::default();
    let done = done_with_summary();
    let model = ScriptedModel::new([
        EXCHANGE,
        "100 EUR are 115 USD.",
        WITHDRAW_USD,
        "100 EUR are 115 USD; Mario withdrew them.",
        CREDIT_USD,
        "Mario's 115 USD went to Georgios.",
        &done,
    ]);
    let bank = eur_bank(&runs, &model, ResponseStrategy::Summary, ContextStrategy::Summarization);
    let out = bank.invoke().input("request", EUR_REQUEST).await.unwrap();
    assert_eq!(out.output(), Some(&json!(SUMMARY)));
    assert_eq!(runs.order(), ["exchange", "withdraw", "credit"]);
    assert_eq!(model.requests().len(), 7);
    assert_eq!(
        messages(&model, 0)[1],
        pair("user", &format!("Request: {EUR_REQUEST}\nSummary of the work so far: nothing yet"))
    );
    assert_eq!(messages(&model, 1), [pair("user", SUMMARIZER_PROMPT_1)]);
    assert_eq!(
        messages(&model, 4)[1],
        pair(
            "user",
            &format!("Request: {EUR_REQUEST}\nSummary of the work so far: 100 EUR are 115 USD; Mario withdrew them.")
        )
    );

    // Both: the summary, then the invocations.
    let model = ScriptedModel::new([EXCHANGE, "100 EUR are 115 USD.", &done]);
    let bank = eur_bank(&Runs::default(), &model, ResponseStrategy::Last, ContextStrategy::ChatMemoryAndSummarization);
    let out = bank.invoke().input("request", EUR_REQUEST).await.unwrap();
    assert_eq!(out.output(), Some(&json!(115.0)));
    assert_eq!(
        messages(&model, 2)[1],
        pair(
            "user",
            &format!(
                "Request: {EUR_REQUEST}\nSummary of the work so far: 100 EUR are 115 USD.\nInvocations so far:\n1. \
                 exchange({{\"originalCurrency\":\"EUR\",\"amount\":100,\"targetCurrency\":\"USD\"}}) -> 115.0"
            )
        )
    );
}

#[tokio::test]
async fn the_summarizer_reads_the_conversations_of_llm_sub_agents() {
    let advisor_model = ScriptedModel::new(["Buy index funds."]);
    let advisor = agentic::agents::LlmAgent::builder(advisor_model)
        .name("advisor")
        .description("Gives investment advice.")
        .user("Advice for {{ request }}")
        .output_key("advice")
        .build()
        .unwrap();
    let model = ScriptedModel::new([
        r#"{"agentName": "advisor", "arguments": {}}"#,
        "The advisor suggested index funds.",
        r#"{"agentName": "done", "arguments": {"response": "Index funds."}}"#,
    ]);
    let sup = Supervisor::builder()
        .sub_agents([advisor])
        .chat_model(model.clone())
        .context_strategy(ContextStrategy::Summarization)
        .response_strategy(ResponseStrategy::Summary)
        .build()
        .unwrap();
    let out = sup.invoke().input("request", "saving 1000 EUR").await.unwrap();
    assert_eq!(out.output(), Some(&json!("Index funds.")));
    let prompt = &messages(&model, 1)[0].1;
    assert!(
        prompt.ends_with(
            "1. advisor({}) -> \"Buy index funds.\"\nConversations:\n[advisor] User: Advice for saving 1000 EUR\n\
             [advisor] Answer: Buy index funds."
        ),
        "{prompt}"
    );
}

// ---------------------------------------------------------------------------------------------------------
// Decision router

fn expert(runs: &Runs, name: &str, description: &str) -> AgentRef {
    let answer = format!("{name} answer");
    runs.agent(name, description, &[], move |_| json!(answer))
}

fn experts(runs: &Runs) -> Vec<AgentRef> {
    vec![
        expert(runs, "legal", "Answers legal questions."),
        expert(runs, "medical", "Answers medical questions."),
        expert(runs, "technical", "Answers technical questions."),
    ]
}

#[tokio::test]
async fn a_single_choice_invokes_only_the_chosen_agent() {
    let runs = Runs::default();
    let model = ScriptedDecisionModel::new([json!({"legal": 0.1, "medical": 0.85, "technical": 0.05})]);
    let router = DecisionRouter::builder()
        .sub_agents(experts(&runs))
        .decision_model(model.clone())
        .output_key("answer")
        .build()
        .unwrap();
    let out = router.invoke().input("request", "I broke my leg").await.unwrap();
    assert_eq!(out.output(), Some(&json!("medical answer")));
    assert_eq!(out.state().get("answer"), Some(&json!("medical answer")));
    assert_eq!(runs.order(), ["medical"]);
    let asked = model.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].input, json!({"request": "I broke my leg"}));
    assert_eq!(
        asked[0].questions,
        [(
            "agent".to_string(),
            Question::choice(
                "Which agent is the best fit to handle this request?",
                [
                    ("legal", "Answers legal questions."),
                    ("medical", "Answers medical questions."),
                    ("technical", "Answers technical questions.")
                ]
            )
        )]
    );
}

/// An expert that waits (at most 2 s) until `n` experts of the barrier are running at the same time.
fn waiting_expert(runs: &Runs, name: &str, barrier: Arc<tokio::sync::Barrier>) -> AgentRef {
    let runs = runs.0.clone();
    let n = name.to_string();
    FnAgent::from_async(name, move |_| {
        let (runs, n, barrier) = (runs.clone(), n.clone(), barrier.clone());
        async move {
            tokio::time::timeout(Duration::from_secs(2), barrier.wait())
                .await
                .map_err(|_| format!("`{n}` did not run in parallel with the other selected agent"))?;
            runs.lock().unwrap().push(n.clone());
            Ok(json!(format!("{n} answer")))
        }
    })
    .description(format!("Answers {name} questions."))
    .build()
}

#[tokio::test]
async fn a_threshold_invokes_every_agent_at_or_above_it_in_parallel() {
    let runs = Runs::default();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let model = ScriptedDecisionModel::new([json!({"legal": 0.8, "medical": 0.6, "technical": 0.1})]);
    let router = DecisionRouter::builder()
        .sub_agents([
            waiting_expert(&runs, "legal", barrier.clone()),
            waiting_expert(&runs, "medical", barrier),
            expert(&runs, "technical", "Answers technical questions."),
        ])
        .decision_model(model.clone())
        .threshold(0.5)
        .output_key("answers")
        .build()
        .unwrap();
    let out = router.invoke().input("request", "A car accident: my leg, and can I sue?").await.unwrap();
    assert_eq!(out.output(), Some(&json!({"legal": "legal answer", "medical": "medical answer"})));
    assert_eq!(runs.get("technical"), 0);
    let asked = &model.requests()[0];
    assert_eq!(
        asked.questions.iter().map(|(n, q)| (n.as_str(), q.text())).collect::<Vec<_>>(),
        [
            ("legal", "Should the agent `legal` (Answers legal questions.) handle this request?"),
            ("medical", "Should the agent `medical` (Answers medical questions.) handle this request?"),
            ("technical", "Should the agent `technical` (Answers technical questions.) handle this request?"),
        ]
    );

    // None at or above the threshold: an empty map, no agent runs.
    let runs = Runs::default();
    let model = ScriptedDecisionModel::new([json!({"legal": 0.2, "medical": 0.49, "technical": "no"})]);
    let router =
        DecisionRouter::builder().sub_agents(experts(&runs)).decision_model(model).threshold(0.5).build().unwrap();
    let out = router.invoke().input("request", "A chocolate cake recipe").await.unwrap();
    assert_eq!(out.output(), Some(&json!({})));
    assert!(runs.order().is_empty());
}

#[tokio::test]
async fn a_threshold_must_be_strictly_between_0_and_1() {
    for t in [0.0, 1.0, 1.5] {
        let err = DecisionRouter::builder()
            .sub_agents(experts(&Runs::default()))
            .decision_model(ScriptedDecisionModel::new([]))
            .threshold(t)
            .build()
            .err()
            .unwrap();
        assert!(err.to_string().contains(&format!("`threshold` must be strictly between 0 and 1, found {t}")), "{err}");
    }
}

#[tokio::test]
async fn a_router_over_a_chat_model_runs_the_chosen_agent_and_never_asks_again_on_resume() {
    let model = ScriptedModel::new([r#"{"agent": "Medical"}"#]);
    let router = DecisionRouter::builder()
        .sub_agents(experts(&Runs::default()))
        .chat_model(model.clone())
        .output_key("answer")
        .build()
        .unwrap();
    let out = router.invoke().input("request", "I broke my leg").await.unwrap();
    assert_eq!(out.output(), Some(&json!("medical answer")));
    assert_eq!(out.state().get("legal_result"), None);
    assert_eq!(
        messages(&model, 0)[1],
        pair(
            "user",
            "Input:\n{\"request\":\"I broke my leg\"}\n\nQuestions:\n- agent: Which agent is the best fit to handle \
             this request?\n  Options (answer with one name):\n  - legal: Answers legal questions.\n  - medical: \
             Answers medical questions.\n  - technical: Answers technical questions.\n\nAnswer with a JSON object \
             only: {\"agent\":\"<answer>\"}"
        )
    );

    // A human chosen by the router suspends; the resumed run does not ask the model again.
    let model = ScriptedModel::new(["reviewer", "not again"]);
    let reviewer = Human::builder("reviewer", "Review?").unwrap().response_id("review").description("A human.").build();
    let router = DecisionRouter::builder()
        .sub_agents([expert(&Runs::default(), "legal", "Answers legal questions."), reviewer])
        .chat_model(model.clone())
        .build()
        .unwrap();
    let first = router.invoke().input("request", "check this").await.unwrap();
    assert!(first.is_suspended());
    let done = first.resume().answer("review", "LGTM").await.unwrap();
    assert_eq!(done.output(), Some(&json!("LGTM")));
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn a_router_over_a_chat_model_answers_all_yes_no_questions_in_one_call() {
    let model = ScriptedModel::new([r#"{"legal": "yes", "medical": "no", "technical": "yes"}"#]);
    let router = DecisionRouter::builder()
        .sub_agents(experts(&Runs::default()))
        .chat_model(model.clone())
        .threshold(0.5)
        .build()
        .unwrap();
    let out = router.invoke().input("request", "A contract for a server").await.unwrap();
    assert_eq!(out.output(), Some(&json!({"legal": "legal answer", "technical": "technical answer"})));
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn a_router_feeds_back_an_unknown_name_then_fails_quoting_the_reply() {
    let model = ScriptedModel::new(["finance", "medical"]);
    let router =
        DecisionRouter::builder().sub_agents(experts(&Runs::default())).chat_model(model.clone()).build().unwrap();
    let out = router.invoke().input("request", "x").await.unwrap();
    assert_eq!(out.output(), Some(&json!("medical answer")));
    assert_eq!(
        messages(&model, 1)[3],
        pair(
            "user",
            "Invalid answer to `agent`: `finance` is not one of: legal, medical, technical. Answer again with a JSON \
             object only."
        )
    );

    let model = ScriptedModel::new(["finance", "banking"]);
    let router = DecisionRouter::builder()
        .sub_agents(experts(&Runs::default()))
        .chat_model(model)
        .max_retries(1)
        .build()
        .unwrap();
    let err = router.invoke().input("request", "x").await.unwrap_err().to_string();
    assert!(
        err.contains(
            "routing decision: decision model `scripted`: invalid answer to `agent`: `banking` is not one of: legal, \
             medical, technical; the model replied: banking"
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------------------
// Crashes

/// Runs `build(runs, skip)` uncrashed with a memory store, then for every prefix of its journal (a crash after
/// step k) resumes a fresh copy from a store holding only those k records and a run left `Running`. `build`
/// gets the number of model answers already journaled (the steps of `model_agents`, one answer each) and
/// returns the system with a model scripted from there, and a probe of that model's (requests, answers left).
/// Each resumed run must give the same result, run every agent exactly as often as the uncrashed run minus
/// its journaled completions, ask the model only for the answers not journaled, and use them all.
async fn crash_at_every_step(
    name: &str,
    model_agents: &[&str],
    build: impl Fn(&Runs, usize) -> (AgentRef, Box<dyn Fn() -> (usize, usize)>),
    input: Value,
    expected: Value,
) {
    let Value::Object(input) = input else { panic!("inputs must be an object") };
    let runs = Runs::default();
    let store = MemoryStore::new();
    let (system, probe) = build(&runs, 0);
    let out = system.invoke().memory_id(name).inputs(input).store(store.clone()).await.unwrap();
    assert_eq!(out.output(), Some(&expected), "{name}: uncrashed run");
    let (asked, left) = probe();
    assert_eq!(left, 0, "{name}: the uncrashed run uses the whole script");
    let full = runs.counts();
    let records = CheckpointStore::records(&store, name).await.unwrap();
    let run = CheckpointStore::run(&store, name).await.unwrap().unwrap();
    assert!(records.len() > 3, "{name}: journaled {} steps", records.len());
    let journaled = |k: usize, agent: &str| common::completions(&records[..k], agent);
    for k in 1..=records.len() {
        let (id, copy) = common::crashed_after(&run, &records, k).await;
        let answered: usize = model_agents.iter().map(|a| journaled(k, a)).sum();
        let runs2 = Runs::default();
        let (system, probe) = build(&runs2, answered);
        let out = system.resume(id.clone()).store(copy).await.unwrap();
        assert_eq!(out.output(), Some(&expected), "{name}: resumed after step {k}");
        for (agent, total) in &full {
            assert_eq!(runs2.get(agent) + journaled(k, agent), *total, "{name}: `{agent}` after a crash at step {k}");
        }
        assert_eq!(probe(), (asked - answered, 0), "{name}: model calls after a crash at step {k}");
    }
}

#[tokio::test]
async fn a_supervisor_resumes_after_a_crash_at_every_step() {
    let done = done_with_summary();
    let script: Vec<String> = [
        EXCHANGE,
        "100 EUR are 115 USD.",
        WITHDRAW_USD,
        "Mario withdrew 115 USD.",
        CREDIT_USD,
        "Georgios received 115 USD.",
        &done,
        r#"{"last": 0.2, "summary": 0.9}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    crash_at_every_step(
        "supervisor",
        &["planner", "summarizer", "scorer"],
        |runs, skip| {
            let model = ScriptedModel::new(script[skip..].iter().map(String::as_str));
            let bank = eur_bank(runs, &model, ResponseStrategy::Scored, ContextStrategy::ChatMemoryAndSummarization);
            (bank, Box::new(move || (model.requests().len(), model.remaining())))
        },
        json!({"request": EUR_REQUEST}),
        json!(SUMMARY),
    )
    .await;
}

#[tokio::test]
async fn a_decision_router_resumes_after_a_crash_at_every_step() {
    let decisions = [json!({"legal": 0.8, "medical": 0.6, "technical": 0.1})];
    crash_at_every_step(
        "router",
        &["router"],
        |runs, skip| {
            let model = ScriptedDecisionModel::new(decisions[skip..].iter().cloned());
            let router = DecisionRouter::builder()
                .sub_agents(experts(runs))
                .decision_model(model.clone())
                .threshold(0.5)
                .output_key("answers")
                .build()
                .unwrap();
            (router, Box::new(move || (model.requests().len(), model.remaining())))
        },
        json!({"request": "A car accident: my leg, and can I sue?"}),
        json!({"legal": "legal answer", "medical": "medical answer"}),
    )
    .await;
    let decisions = [json!("technical")];
    crash_at_every_step(
        "router-choice",
        &["router"],
        |runs, skip| {
            let model = ScriptedDecisionModel::new(decisions[skip..].iter().cloned());
            let router =
                DecisionRouter::builder().sub_agents(experts(runs)).decision_model(model.clone()).build().unwrap();
            (router, Box::new(move || (model.requests().len(), model.remaining())))
        },
        json!({"request": "My laptop does not boot"}),
        json!("technical answer"),
    )
    .await;
}
