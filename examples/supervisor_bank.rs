//! **Supervisor** — the bank transfer: a supervisor model decides, step by step, which agent to call next and
//! with which arguments — exchange the currency, withdraw from one account, credit the other — until it
//! answers `done` with a summary (`ResponseStrategy::Summary`). The three bank agents are plain Rust
//! functions over a shared ledger, so the money is always counted right; only the plan comes from the model.
//!
//! ```text
//! cargo run --example supervisor_bank -- --scripted        # canned decisions, offline (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example supervisor_bank     # the local model (scripts/setup-local-model.sh)
//! OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... cargo run --example supervisor_bank
//! ```
//!
//! Planning is open-ended (a JSON decision in free text), which a 270M base model does poorly: expect the
//! local model to be corrected by the supervisor's feedback or to fail after its retries; a larger model on
//! an OpenAI-compatible server plans this transfer reliably.

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::{Arc, Mutex};

use agentic::engine::ValueType;
use agentic::planners::ResponseStrategy;
use agentic::prelude::*;
use serde_json::{Map, Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// Account balances in US dollars, shared by the bank agents.
pub type Ledger = Arc<Mutex<BTreeMap<String, f64>>>;

/// Rounds to cents.
fn cents(amount: f64) -> f64 {
    (amount * 100.0).round() / 100.0
}

/// An agent changing a user's balance by `sign * amount` and returning the new balance.
fn account_agent(name: &str, description: &str, sign: f64, ledger: &Ledger) -> AgentRef {
    let ledger = ledger.clone();
    FnAgent::from_async(name, move |inputs: Map<String, Value>| {
        let ledger = ledger.clone();
        async move {
            let user = inputs.get("user").and_then(Value::as_str).unwrap_or_default().to_string();
            let amount = inputs.get("amount").and_then(Value::as_f64).unwrap_or_default();
            let mut accounts = ledger.lock().map_err(|_| "the ledger is unavailable".to_string())?;
            let balance = accounts.get_mut(&user).ok_or_else(|| format!("no account for {user}"))?;
            if *balance + sign * amount < 0.0 {
                return Err(format!("{user} has only {balance:.2} USD"));
            }
            *balance = cents(*balance + sign * amount);
            Ok(json!(*balance))
        }
    })
    .description(description)
    .input(InputSpec::new("user").typed(ValueType::String))
    .input(InputSpec::new("amount").typed(ValueType::Number))
    .build()
}

/// The ledger before the transfer: Mario and Georgios hold 1000 USD each.
pub fn ledger() -> Ledger {
    Arc::new(Mutex::new(BTreeMap::from([("Mario".into(), 1000.0), ("Georgios".into(), 1000.0)])))
}

/// The bank agents over `ledger` and the supervisor planning with them.
pub fn bank(scripted: bool, ledger: &Ledger) -> Result<AgentRef, Box<dyn Error>> {
    let withdraw = account_agent("withdraw", "A banker that withdraws USD from an account", -1.0, ledger);
    let credit = account_agent("credit", "A banker that credits USD to an account", 1.0, ledger);
    let exchange = FnAgent::from_async("exchange", |inputs: Map<String, Value>| async move {
        let currency = |key: &str| inputs.get(key).and_then(Value::as_str).unwrap_or_default().to_uppercase();
        let amount = inputs.get("amount").and_then(Value::as_f64).unwrap_or_default();
        // Dollars per unit (a real agent would ask a rates service).
        let rate = |c: &str| match c {
            "USD" => Ok(1.0),
            "EUR" => Ok(1.15),
            "GBP" => Ok(1.35),
            other => Err(format!("unknown currency {other}")),
        };
        Ok(json!(cents(amount * rate(&currency("originalCurrency"))? / rate(&currency("targetCurrency"))?)))
    })
    .description("A money exchanger that converts an amount of money from the original to the target currency")
    .input(InputSpec::new("originalCurrency").typed(ValueType::String))
    .input(InputSpec::new("amount").typed(ValueType::Number))
    .input(InputSpec::new("targetCurrency").typed(ValueType::String))
    .build();

    let bank = Supervisor::builder()
        .name("bank")
        .sub_agents([withdraw, credit, exchange])
        .chat_model(model(scripted)?)
        .response_strategy(ResponseStrategy::Summary)
        .supervisor_context("Accounts hold US dollars (USD): exchange other currencies to USD first.")
        .output_key("response")
        .build()?;
    Ok(bank)
}

/// Builds the bank agents and the supervisor, runs one transfer and returns the answer and the balances.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let ledger = ledger();
    let outcome = bank(scripted, &ledger)?
        .invoke()
        .input("request", "Transfer 100 EUR from Mario's account to Georgios' one")
        .await?;

    let mut report = String::new();
    for record in outcome.history().await? {
        if record.agent != "bank" && record.agent != "planner" {
            report += &format!("{}({}) -> {}\n", record.agent, Value::Object(record.inputs), record.output);
        }
    }
    report += &format!("response: {}\n", outcome.output().and_then(Value::as_str).unwrap_or_default());
    let balances = ledger.lock().map_err(|_| "the ledger is unavailable")?.clone();
    let balances: Vec<String> = balances.iter().map(|(user, balance)| format!("{user} {balance:.2} USD")).collect();
    report += &format!("balances: {}", balances.join(", "));
    Ok(report)
}

/// The supervisor's model: canned decisions with `--scripted`, else the default model (the local one, or the
/// server at `OPENAI_BASE_URL`).
fn model(scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || {
        ScriptedModel::new([
            r#"{"agentName": "exchange", "arguments": {"originalCurrency": "EUR", "amount": 100, "targetCurrency": "USD"}}"#,
            r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 115.0}}"#,
            r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 115.0}}"#,
            r#"{"agentName": "done", "arguments": {"response": "Transferred 100 EUR (115.00 USD) from Mario to Georgios."}}"#,
        ])
    })
}
