//! The model-driven kinds of the spec, `supervisor` and `decision_router`: fields and defaults of SPEC.md,
//! runs with scripted models (the bank transfer, feedback on an unknown agent, the scored strategy, a
//! summarization context; one choice, a threshold, none selected, a chat model used as the decision model),
//! located errors (unknown fields and values, a threshold out of range, unknown models), the example specs
//! with scripted models, and `agentic validate` / `agentic report --spec` through the binary.

#![allow(clippy::unwrap_used)]

use agentic::agents::model::{ChatModelRef, ScriptedModel};
use agentic_spec::{AgentKind, FieldValue, Spec};
use serde_json::json;

// one, at: the single error of a spec that must not parse, and where it is.
use crate::common;
use common::{at, one};

const BANK_AGENTS: &str = r#"
  exchange:
    kind: compute
    description: Converts an amount from the original to the target currency
    value: "amount * 115 / 100"
    inputs: [originalCurrency, amount, targetCurrency]
    output_key: exchanged
  withdraw:
    kind: compute
    description: Withdraws USD from a user's account
    template: "{{ user }}: -{{ amount }} USD"
    output_key: withdrawal
  credit:
    kind: compute
    description: Credits USD to a user's account
    template: "{{ user }}: +{{ amount }} USD"
    output_key: credit
"#;

const EXCHANGE: &str =
    r#"{"agentName": "exchange", "arguments": {"originalCurrency": "EUR", "amount": 100, "targetCurrency": "USD"}}"#;
const WITHDRAW: &str = r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 115}}"#;
const CREDIT: &str = r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 115}}"#;
const DONE: &str =
    r#"{"agentName": "done", "arguments": {"response": "Transferred 100 EUR (115 USD) from Mario to Georgios."}}"#;
const REQUEST: &str = "Transfer 100 EUR from Mario's account to Georgios' one";

fn yaml_list(items: &[&str]) -> String {
    items.iter().map(|i| format!("\n      - '{i}'")).collect()
}

fn bank(extra: &str, replies: &[&str]) -> String {
    format!(
        "version: 1\nroot: bank\nmodels:\n  planner:\n    provider: scripted\n    replies:{}\nagents:\n  bank:\n    \
         kind: supervisor\n    agents: [exchange, withdraw, credit]\n    model: planner\n    output_key: summary\n{extra}{BANK_AGENTS}",
        yaml_list(replies)
    )
}

/// Builds the bank spec `yaml` and runs it on the transfer request.
async fn run_bank(yaml: &str) -> agentic::engine::RunOutcome {
    Spec::parse(yaml, "bank.yaml").unwrap().build().unwrap().root.invoke().input("request", REQUEST).await.unwrap()
}

async fn agents_run(out: &agentic::engine::RunOutcome) -> Vec<String> {
    out.history().await.unwrap().into_iter().map(|r| r.agent).filter(|a| a != "planner" && a != "bank").collect()
}

#[tokio::test]
async fn a_supervisor_spec_transfers_100_eur_with_exchange_withdraw_credit_and_returns_the_summary() {
    let yaml = bank(
        "    response_strategy: summary\n    supervisor_context: Accounts hold USD.\n",
        &[EXCHANGE, WITHDRAW, CREDIT, DONE],
    );
    let spec = Spec::parse(&yaml, "bank.yaml").unwrap();
    // The model holds the fields given (the model by its name); the defaults apply when it is built.
    let AgentKind::Planner(s) = &spec.agent("bank").unwrap().kind else { panic!("a described kind") };
    let given: Vec<&str> = s.fields.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        (s.kind.name(), given),
        ("supervisor", vec!["agents", "model", "response_strategy", "supervisor_context"])
    );
    assert!(matches!(s.field("model"), Some(FieldValue::Model(m)) if m.name.value == "planner"));
    let built = spec.build().unwrap();
    assert_eq!(
        built.root.topology().details,
        json!({"max_invocations": 10, "max_retries": 2, "response_strategy": "summary",
               "context_strategy": "chat_memory", "supervisor_context": "Accounts hold USD.", "request_key": "request"})
    );
    let out = built.root.invoke().input("request", REQUEST).await.unwrap();
    assert_eq!(agents_run(&out).await, ["exchange", "withdraw", "credit"]);
    assert_eq!(out.output(), Some(&json!("Transferred 100 EUR (115 USD) from Mario to Georgios.")));
    assert_eq!(out.state().get("summary"), Some(&json!("Transferred 100 EUR (115 USD) from Mario to Georgios.")));
    assert_eq!(out.state().get("exchanged"), Some(&json!(115.0)));
    assert_eq!(out.state().get("withdrawal"), Some(&json!("Mario: -115 USD")));
    assert_eq!(out.state().get("credit"), Some(&json!("Georgios: +115 USD")));

    // The default strategy (`last`) answers with the last agent's output.
    let out = run_bank(&bank("", &[EXCHANGE, WITHDRAW, CREDIT, DONE])).await;
    assert_eq!(out.output(), Some(&json!("Georgios: +115 USD")));
}

#[tokio::test]
async fn an_unknown_agent_in_the_reply_is_retried_with_feedback() {
    let spec = Spec::parse(&bank("", &["unused"]), "bank.yaml").unwrap();
    let planner = ScriptedModel::new([r#"{"agentName": "transfer", "arguments": {}}"#, EXCHANGE, DONE]);
    let built = spec.build_with_models([("planner".to_string(), ChatModelRef::new(planner.clone()))]).unwrap();
    let out = built.root.invoke().input("request", REQUEST).await.unwrap();
    assert_eq!(out.output(), Some(&json!(115.0)));
    let second = &planner.requests()[1].messages;
    assert_eq!(second.len(), 4);
    assert_eq!(second[2].text(), r#"{"agentName": "transfer", "arguments": {}}"#);
    assert_eq!(
        second[3].text(),
        "Invalid answer: unknown agent `transfer`; choose one of: exchange, withdraw, credit, done. Answer again \
         with a JSON object only: {\"agentName\": \"<agent name>\", \"arguments\": {\"<argument>\": <value>}}"
    );
}

#[tokio::test]
async fn scored_and_summarization_from_a_spec() {
    let yaml = bank(
        "    response_strategy: scored\n    context_strategy: summarization\n    max_invocations: 3\n",
        &[EXCHANGE, "100 EUR are 115 USD.", WITHDRAW, "Mario paid 115 USD.", DONE, r#"{"last": 0.1, "summary": 0.9}"#],
    );
    let out = run_bank(&yaml).await;
    assert_eq!(out.output(), Some(&json!("Transferred 100 EUR (115 USD) from Mario to Georgios.")));
    let steps: Vec<String> = out.history().await.unwrap().into_iter().map(|r| r.agent).collect();
    assert_eq!(
        steps,
        ["planner", "exchange", "summarizer", "planner", "withdraw", "summarizer", "planner", "scorer", "bank"]
    );

    // max_invocations bounds the agent invocations: the result is then the last output.
    let yaml = bank("    max_invocations: 2\n", &[EXCHANGE, WITHDRAW, CREDIT, DONE]);
    let out = run_bank(&yaml).await;
    assert_eq!(out.output(), Some(&json!("Mario: -115 USD")));
}

const EXPERTS: &str = r#"
  legal: { kind: compute, description: Answers legal questions., template: "legal answer to {{ request }}", output_key: legal_answer }
  medical: { kind: compute, description: Answers medical questions., template: "medical answer to {{ request }}", output_key: medical_answer }
  technical: { kind: compute, description: Answers technical questions., template: "technical answer to {{ request }}", output_key: technical_answer }
"#;

fn router(fields: &str, decisions: &str) -> String {
    format!(
        "version: 1\nroot: router\nmodels:\n  decider: {{ provider: scripted, decisions: {decisions} }}\nagents:\n  \
         router: {{ kind: decision_router, agents: [legal, medical, technical], model: decider{fields} }}{EXPERTS}"
    )
}

async fn run(yaml: &str, request: &str) -> agentic::engine::RunOutcome {
    Spec::parse(yaml, "router.yaml").unwrap().build().unwrap().root.invoke().input("request", request).await.unwrap()
}

#[tokio::test]
async fn a_decision_router_spec_runs_the_chosen_agent_only() {
    let out = run(&router(", output_key: answer", "[medical]"), "I broke my leg").await;
    assert_eq!(out.output(), Some(&json!("medical answer to I broke my leg")));
    assert_eq!(out.state().get("answer"), Some(&json!("medical answer to I broke my leg")));
    assert_eq!((out.state().get("legal_answer"), out.state().get("technical_answer")), (None, None));
    let spec = Spec::parse(&router("", "[medical]"), "router.yaml").unwrap();
    let AgentKind::Planner(router) = &spec.agent("router").unwrap().kind else { panic!("a described kind") };
    assert!(router.field("threshold").is_none());
    assert!(matches!(router.field("model"), Some(FieldValue::Model(m)) if m.name.value == "decider"));
}

#[tokio::test]
async fn a_decision_router_spec_with_a_threshold_runs_every_agent_reaching_it() {
    let yaml = router(", threshold: 0.5", "[{legal: 0.8, medical: 0.6, technical: 0.1}]");
    let out = run(&yaml, "A car accident").await;
    assert_eq!(
        out.output(),
        Some(&json!({"legal": "legal answer to A car accident", "medical": "medical answer to A car accident"}))
    );
    assert_eq!(out.state().get("technical_answer"), None);
    let out = run(&router(", threshold: 0.5", "[{legal: 0.2, medical: 0.4, technical: 0.1}]"), "A cake recipe").await;
    assert_eq!(out.output(), Some(&json!({})));
    assert_eq!(out.state().get("legal_answer"), None);
}

#[tokio::test]
async fn a_chat_model_is_used_as_the_decision_model() {
    let yaml = format!(
        "version: 1\nroot: router\nmodels:\n  default: {{ provider: scripted, replies: ['{{\"agent\": \"technical\"}}'] \
         }}\nagents:\n  router: {{ kind: decision_router, agents: [legal, medical, technical] }}{EXPERTS}"
    );
    let out = run(&yaml, "My laptop does not boot").await;
    assert_eq!(out.output(), Some(&json!("technical answer to My laptop does not boot")));
    // A substituted model replaces scripted decisions: it is then a chat model used as a decision model.
    let spec = Spec::parse(&router("", "[medical]"), "router.yaml").unwrap();
    let chat = ScriptedModel::new([r#"{"agent": "legal"}"#]);
    let built = spec.build_with_models([("decider".to_string(), ChatModelRef::new(chat.clone()))]).unwrap();
    let out = built.root.invoke().input("request", "Can I sue?").await.unwrap();
    assert_eq!(out.output(), Some(&json!("legal answer to Can I sue?")));
    assert_eq!(chat.requests().len(), 1);
}

#[test]
fn located_errors() {
    let sup = |fields: &str| {
        format!(
            "version: 1\nroot: bank\nmodels:\n  default: {{ provider: scripted }}\nagents:\n  bank:\n    kind: \
             supervisor\n    agents: [exchange, withdraw, credit]\n{fields}{BANK_AGENTS}"
        )
    };
    let e = one(&sup("    response_strategy: best\n"));
    assert_eq!(at(&e), (9, 24, Some("bank"), Some("response_strategy")));
    assert_eq!(e.message, "unknown response_strategy `best`, expected `last`, `summary` or `scored`");
    let e = one(&sup("    context_strategy: memory\n"));
    assert_eq!(at(&e), (9, 23, Some("bank"), Some("context_strategy")));
    assert_eq!(
        e.message,
        "unknown context_strategy `memory`, expected `chat_memory`, `summarization` or `chat_memory_and_summarization`"
    );
    let e = one(&sup("    max_invocation: 3\n"));
    assert_eq!(at(&e), (9, 5, Some("bank"), None));
    assert!(e.message.starts_with("unknown field `max_invocation` (did you mean `max_invocations`?)"), "{}", e.message);
    let e = one(&sup("    max_invocations: 0\n"));
    assert_eq!(
        (at(&e), e.message.as_str()),
        ((9, 22, Some("bank"), Some("max_invocations")), "must be at least 1, found 0")
    );
    let e = one(&sup("    supervisor_context: [a]\n"));
    assert_eq!(at(&e), (9, 25, Some("bank"), Some("supervisor_context")));
    let e = one(&sup("    model: planer\n"));
    assert_eq!(at(&e), (9, 12, Some("bank"), Some("model")));
    assert_eq!(e.message, "unknown model `planer`; defined models: `default`");
    // A supervisor asks a chat model: a scripted model with only `decisions` cannot plan.
    let e = one(&sup("").replace("{ provider: scripted }", "{ provider: scripted, decisions: [withdraw] }"));
    assert_eq!(at(&e).3, Some("model"));
    assert_eq!(
        e.message,
        "model `default` is a scripted decision model (`decisions` only), but a supervisor's `model` must be a chat \
         model: give `models.default` `replies`"
    );

    let rt = |fields: &str| router(fields, "[medical]");
    let e = one(&rt(", threshold: 1.0"));
    assert_eq!(at(&e), (6, 100, Some("router"), Some("threshold")));
    assert_eq!(e.message, "must be strictly between 0 and 1, found 1.0");
    let e = one(&rt(", threshold: 0"));
    assert_eq!(e.message, "must be strictly between 0 and 1, found 0");
    let e = one(&rt(", threshold: high"));
    assert_eq!((at(&e).3, e.message.as_str()), (Some("threshold"), "expected a number, found a string"));
    let e = one(&rt(", treshold: 0.5"));
    assert_eq!(at(&e), (6, 89, Some("router"), None));
    assert!(e.message.starts_with("unknown field `treshold` (did you mean `threshold`?)"), "{}", e.message);
    let e = one(&router("", "[medical]").replace(", model: decider", ""));
    assert_eq!(at(&e), (6, 3, Some("router"), Some("model")));
    assert_eq!(
        e.message,
        "a decision_router without `model` uses `default`, which is not defined; defined models: `decider`"
    );
    let e = one(&sup("").replace("[exchange, withdraw, credit]", "[]"));
    assert_eq!(
        (at(&e), e.message.as_str()),
        ((8, 13, Some("bank"), Some("agents")), "needs at least 1 agent, found 0")
    );
    let e = one(&sup("").replace("    agents: [exchange, withdraw, credit]\n", ""));
    assert_eq!(
        (at(&e), e.message.as_str()),
        ((7, 5, Some("bank"), None), "missing field `agents` (a list of agent names)")
    );
}
