//! **Supervisor, declared** — the bank transfer of `supervisor_bank.rs` with the declarative attributes: the
//! three bank agents are plain Rust functions (`#[agent(reply_only)]`: they answer the supervisor without
//! writing a state key), two of them over a shared ledger given once to the builder (`#[resource]`), and the
//! supervisor is a method of a trait whose typed call returns its summary.
//!
//! ```text
//! cargo run --example supervisor_bank_declarative -- --scripted    # canned decisions (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example supervisor_bank_declarative # the local model
//! ```
//!
//! Builder version: `examples/supervisor_bank.rs` (same agents, same decisions, same result).

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::{Arc, Mutex};

use agentic::prelude::*;
use serde_json::Value;

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// Account balances in US dollars, shared by the bank agents.
pub type Ledger = Arc<Mutex<BTreeMap<String, f64>>>;

/// The ledger before the transfer: Mario and Georgios hold 1000 USD each.
pub fn ledger() -> Ledger {
    Arc::new(Mutex::new(BTreeMap::from([("Mario".into(), 1000.0), ("Georgios".into(), 1000.0)])))
}

/// Rounds to cents.
fn cents(amount: f64) -> f64 {
    (amount * 100.0).round() / 100.0
}

/// Adds `amount` (negative: takes it) to `user`'s balance and returns the new balance; a balance never goes
/// below zero.
fn change(ledger: &Ledger, user: &str, amount: f64) -> Result<f64, String> {
    let mut accounts = ledger.lock().map_err(|_| "the ledger is unavailable".to_string())?;
    let balance = accounts.get_mut(user).ok_or_else(|| format!("no account for {user}"))?;
    if *balance + amount < 0.0 {
        return Err(format!("{user} has only {balance:.2} USD"));
    }
    *balance = cents(*balance + amount);
    Ok(*balance)
}

/// A banker that withdraws USD from an account
#[agent(reply_only)]
async fn withdraw(#[resource] ledger: Ledger, user: String, amount: f64) -> Result<f64, String> {
    change(&ledger, &user, -amount)
}

/// A banker that credits USD to an account
#[agent(reply_only)]
async fn credit(#[resource] ledger: Ledger, user: String, amount: f64) -> Result<f64, String> {
    change(&ledger, &user, amount)
}

/// A money exchanger that converts an amount of money from the original to the target currency
#[agent(reply_only)]
async fn exchange(
    #[key("originalCurrency")] original: String,
    amount: f64,
    #[key("targetCurrency")] target: String,
) -> Result<f64, String> {
    // Dollars per unit (a real agent would ask a rates service).
    let rate = |currency: &str| match currency.to_uppercase().as_str() {
        "USD" => Ok(1.0),
        "EUR" => Ok(1.15),
        "GBP" => Ok(1.35),
        other => Err(format!("unknown currency {other}")),
    };
    Ok(cents(amount * rate(&original)? / rate(&target)?))
}

/// The bank: a supervisor planning with the three bank agents.
#[agents]
pub trait Bank {
    /// Carries out a request with the bank agents and answers with a summary.
    #[supervisor(
        agents(self::withdraw, self::credit, self::exchange),
        response = "summary",
        context = "Accounts hold US dollars (USD): exchange other currencies to USD first.",
        output_key = "response"
    )]
    async fn bank(&self, request: String) -> String;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The bank over `ledger`, its supervisor asking the builder version's canned decisions with `--scripted`.
pub fn bank(scripted: bool, ledger: &Ledger) -> Result<BankAgents, Box<dyn Error>> {
    Ok(BankAgents::builder(model(scripted)?).resource(ledger.clone()).build()?)
}

/// Runs one transfer and returns the steps, the answer and the balances.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let ledger = ledger();
    let bank = bank(scripted, &ledger)?;
    let outcome =
        bank.bank_agent().invoke().input("request", "Transfer 100 EUR from Mario's account to Georgios' one").await?;

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

/// The supervisor's model: the builder version's canned decisions with `--scripted`, else the default model.
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
