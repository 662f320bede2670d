//! **Human in the loop, durable** — the order approval: an agent extracts the order's fields as JSON (a
//! schema, which the local model is constrained to), the run suspends until a manager approves, and a later
//! request — here from the same store by the order id, as a new process would — resumes it with the answer.
//! Completed steps are journaled and never run again.
//!
//! ```text
//! cargo run --example order_approval -- --scripted        # canned reply and approval (or AGENTIC_SCRIPTED=1)
//! cargo run --features local --example order_approval     # the local model; at a terminal you approve
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --example order_approval
//! ```
//!
//! Spec version: `examples/specs/order_approval.yaml`; with the CLI, `agentic run` exits 2 at the approval,
//! `agentic respond` records it and `agentic resume` finishes the run. Use `agentic::store::SledStore` instead
//! of `MemoryStore` to keep suspended orders across restarts.

use std::error::Error;

use agentic::agents::Human;
use agentic::agents::OutputType;
use agentic::prelude::*;
use serde_json::{Value, json};

// The pieces every example shares: the `--scripted` switch, the model an agent asks, a person's answer.
#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Canned replies with `--scripted` or AGENTIC_SCRIPTED=1, else a real model (see `common::scripted`).
    println!("{}", run(common::scripted()).await?);
    Ok(())
}

/// The workflow: extract the order, wait for the manager, ship or hold it.
pub fn workflow(scripted: bool) -> Result<AgentRef, Box<dyn Error>> {
    let extract = LlmAgent::builder(model(scripted)?)
        .name("extract")
        .description("Extracts the customer, the item and the quantity from an order")
        .user(
            "Read the order and fill in the fields.\ncustomer: who orders.\nitem: what is ordered.\n\
               quantity: how many, as a number.\n\nOrder: {{ order }}",
        )
        .output(OutputType::Schema(json!({
            "type": "object",
            "properties": {"customer": {"type": "string"}, "item": {"type": "string"}, "quantity": {"type": "integer"}},
            "required": ["customer", "item", "quantity"]
        })))
        .output_key("details")
        .build()?;
    let approval = Human::builder(
        "approval",
        "Ship {{ details.quantity }} {{ details.item }} to {{ details.customer }}? Answer approved or rejected.",
    )?
    .description("A manager approves large orders")
    .response_id("manager-approval")
    .output_key("approval")
    .build();
    let ship = Compute::template(
        "ship",
        "{% if approval | string | lower == 'approved' %}SHIPPED {{ details.quantity }} {{ details.item }} to \
         {{ details.customer }}{% else %}HELD: {{ approval }}{% endif %}",
    )?
    .description("Ships the order, or holds it")
    .output_key("result")
    .build();
    Ok(Sequence::builder().name("order_workflow").sub_agents([extract, approval, ship]).output_key("result").build()?)
}

/// Runs one order to the approval, answers it in a second request, and returns the transcript.
pub async fn run(scripted: bool) -> Result<String, Box<dyn Error>> {
    let store = MemoryStore::new();
    let order_id = "order-12345";

    // The first request runs until the approval, then suspends; the state is checkpointed in the store.
    let first = workflow(scripted)?
        .invoke()
        .memory_id(order_id)
        .store(store.clone())
        .input("order", "ACME Corp orders 1000 widgets, to be delivered in Turin.")
        .await?;
    let Some(pending) = first.pending().first().cloned() else {
        return Ok(format!("{order_id} finished without an approval: {:?}", first.output()));
    };
    let mut transcript = format!("{order_id} is waiting for {}: {}\n", pending.id, pending.prompt);

    // Later, maybe in another process: the manager answers, and the run resumes by its id.
    // At a terminal the manager types the answer when a model runs; else it is `approved`.
    let answer = common::ask(&pending.prompt, "approved", scripted)?;
    transcript += &format!("manager: {answer}\n");
    let done = workflow(scripted)?.resume(order_id).store(store).answer(pending.id, answer).await?;
    transcript += &format!("{order_id}: {}", done.output().and_then(Value::as_str).unwrap_or_default());
    Ok(transcript)
}

/// The extractor's model: a canned reply with `--scripted`, else the default model (the local one, or the
/// server at `OPENAI_BASE_URL`).
fn model(scripted: bool) -> Result<ChatModelRef, Box<dyn Error>> {
    common::model(scripted, || {
        ScriptedModel::new([r#"{"customer": "ACME Corp", "item": "widgets", "quantity": 1000}"#])
    })
}
