//! **Human in the loop, durable, declared** — the order approval of `order_approval.rs` with the declarative
//! attributes: the extractor returns an `Order` struct (answered as JSON through its schema), the manager's
//! approval is a `#[human]` method, and shipping is a plain Rust function (`#[agent]`) reading the typed order.
//! The workflow's typed call takes the order id as the run's memory id (`#[memory_id]`) and checkpoints in the
//! builder's store: it ends suspended at the approval, and a later request resumes the run by the order id.
//!
//! ```text
//! cargo run --example order_approval_declarative -- --scripted    # canned reply and approval
//! cargo run --features local --example order_approval_declarative # the local model; at a terminal you approve
//! ```
//!
//! Builder version: `examples/order_approval.rs` (same agents, same replies, same result).

use std::error::Error;

use agentic::prelude::*;
use serde::{Deserialize, Serialize};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

/// The fields of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Order {
    /// Who orders.
    pub customer: String,
    /// What is ordered.
    pub item: String,
    /// How many.
    pub quantity: i64,
}

/// Extract the order, wait for the manager, ship or hold it.
#[agents]
pub trait OrderDesk {
    /// Reads the order's fields.
    #[agent(
        description = "Extracts the customer, the item and the quantity from an order",
        user = "Read the order and fill in the fields.\ncustomer: who orders.\nitem: what is ordered.\n\
                quantity: how many, as a number.\n\nOrder: {{ order }}",
        output_key = "details"
    )]
    async fn extract(&self, order: String) -> Order;

    /// Asks the manager; the run suspends until the answer comes.
    #[human(
        description = "A manager approves large orders",
        prompt = "Ship {{ details.quantity }} {{ details.item }} to {{ details.customer }}? Answer approved or \
                  rejected.",
        response_id = "manager-approval",
        output_key = "approval"
    )]
    async fn approval(&self) -> String;

    /// The workflow: extract, approve, ship; one run per order id.
    #[sequence(agents(extract, approval, self::ship), output_key = "result")]
    async fn order_workflow(&self, #[memory_id] order_id: String, order: String) -> String;
}

/// Ships the order, or holds it.
#[agent(output_key = "result")]
fn ship(details: Order, approval: String) -> String {
    if approval.to_lowercase() == "approved" {
        format!("SHIPPED {} {} to {}", details.quantity, details.item, details.customer)
    } else {
        format!("HELD: {approval}")
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The agents, checkpointing their runs in `store`; the extractor asks the builder version's canned reply
/// with `--scripted`.
pub fn order_desk(scripted: bool, store: &MemoryStore) -> Result<OrderDeskAgents, Box<dyn Error>> {
    Ok(OrderDeskAgents::builder(model(scripted)?).store(store.clone()).build()?)
}

/// Runs one order to the approval, answers it in a second request, and returns the transcript.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let store = MemoryStore::new();
    let order_id = "order-12345";

    // The first request runs until the approval, then suspends; the state is checkpointed in the store.
    let first = order_desk(scripted, &store)?
        .order_workflow(order_id, "ACME Corp orders 1000 widgets, to be delivered in Turin.")
        .await;
    let pending = match first {
        Err(Stop::Suspended(pending)) if !pending.is_empty() => pending[0].clone(),
        Err(e) => return Err(e.into()),
        Ok(result) => return Ok(format!("{order_id} finished without an approval: {result}")),
    };
    let mut transcript = format!("{order_id} is waiting for {}: {}\n", pending.id, pending.prompt);

    // Later, maybe in another process: the manager answers, and the run resumes by its id.
    let answer = common::ask(&pending.prompt, "approved", scripted)?;
    transcript += &format!("manager: {answer}\n");
    let resumed = order_desk(scripted, &store)?.order_workflow_agent().resume(order_id).store(store);
    let done = resumed.answer(pending.id, answer).await?;
    transcript += &format!("{order_id}: {}", done.output().and_then(serde_json::Value::as_str).unwrap_or_default());
    Ok(transcript)
}

/// The extractor's model: the builder version's canned reply with `--scripted`, else the default model.
fn model(scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || {
        ScriptedModel::new([r#"{"customer": "ACME Corp", "item": "widgets", "quantity": 1000}"#])
    })
}
