//! The showcase's measurement (`examples/measure_tickets`) and its labelled tickets
//! (`tests/fixtures/tickets.jsonl`), with scripted models in place of the local one: the fixture file is what
//! issue 16 asks for, and the figures the command prints are counted right — a model that copies the few-shot
//! examples' customer invents a field on every ticket, and after the check none is left.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use agentic::agents::model::{ChatModelRef, ScriptedModel};
use serde_json::json;

#[allow(dead_code)]
#[path = "../../examples/measure_tickets/main.rs"]
mod measure_tickets;

use measure_tickets::{Ticket, line, load, measure, summary};

fn tickets() -> Vec<Ticket> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tickets.jsonl")).unwrap()
}

#[test]
fn thirty_labelled_tickets_names_present_and_absent_all_three_categories_some_ambiguous() {
    let tickets = tickets();
    assert_eq!(tickets.len(), 30);
    for category in ["BILLING", "TECHNICAL", "ACCOUNT"] {
        assert_eq!(tickets.iter().filter(|t| t.category == category).count(), 10, "{category}");
    }
    let named = tickets.iter().filter(|t| t.customer.is_some()).count();
    assert!((10..=20).contains(&named), "names present and absent: {named} of 30 named");
    let with_product = tickets.iter().filter(|t| !t.product.is_empty()).count();
    assert!((10..=20).contains(&with_product), "products present and absent: {with_product}");
    assert!(tickets.iter().filter(|t| t.ambiguous).count() >= 3, "some ambiguous");
    for t in &tickets {
        let text = t.text.to_lowercase();
        // The labels are the ticket's own words (what the grounding check keeps).
        assert!(t.customer.iter().all(|c| t.text.contains(c.as_str())), "#{}: {:?}", t.id, t.customer);
        assert!(t.product.iter().all(|p| text.contains(&p.to_lowercase())), "#{}: {:?}", t.id, t.product);
        // None of the extraction prompt's example names.
        for example in ["Tom Baker", "Mia Chen", "Ben Ode", "Lena Fischer"] {
            assert!(!t.text.contains(example), "#{}", t.id);
        }
    }
    let ids: Vec<u64> = tickets.iter().map(|t| t.id).collect();
    assert_eq!(ids, (1..=30).collect::<Vec<_>>());
}

/// A model that answers every ticket's labels exactly: every figure is perfect, and the keyword rules alone
/// get 25 of 30 (28 match, 3 of them wrongly: ambiguous tickets).
#[tokio::test]
async fn a_model_that_answers_the_labels_scores_full_marks() {
    let tickets = tickets();
    let mut replies = Vec::new();
    for t in &tickets {
        let fields = json!({
            "customer": t.customer, "product": t.product.first(), "problem": null, "urgency": "normal"
        });
        replies.push(fields.to_string());
        replies.push(t.category.to_lowercase());
    }
    let model = ScriptedModel::new(replies);
    let mut lines = 0;
    let results = measure(ChatModelRef::new(model), &tickets, |_| lines += 1).await.unwrap();
    assert_eq!(lines, 30);
    let text = summary(&results);
    assert!(text.starts_with("30 tickets (13 name a customer, 13 a product, 5 ambiguous)\n"), "{text}");
    assert!(
        text.contains(
            "extraction exact (customer and product): model 30/30 / after the check 30/30  [customer 30/30 / 30/30, \
             product 30/30 / 30/30]"
        ),
        "{text}"
    );
    assert!(text.contains("invented fields (not in the ticket): model 0 customers, 0 products / after the check 0 customers, 0 products"), "{text}");
    assert!(text.contains("runs with a rejected field (to the human with the reason, never SENT): 0/30"), "{text}");
    assert!(
        text.contains(
            "category accuracy: model alone 30/30 (5/5 of the ambiguous) (its answers before weighing: 30/30 (5/5 of \
             the ambiguous)), rules alone 25/30 (2/5 of the ambiguous) (a rule matched 28/30), both 27/30 (2/5 of the \
             ambiguous); model alone where no rule matched: 2/2"
        ),
        "{text}"
    );
    // The same figures from the spec's `evals:`, as `agentic eval` computes them on each run.
    assert!(
        text.ends_with(
            "the spec's evals (agentic eval): category 27/30 (mean 0.90), fields_exact 30/30 (mean 1.00), \
             nothing_invented 30/30 (mean 1.00), seconds 30/30 (mean 1.00), category_model 30/30 (mean 1.00), \
             category_rules 30/30 (mean 0.83), model_grounded 30/30 (mean 1.00), to_human 30/30 (mean 0.00)"
        ),
        "{text}"
    );
}

/// The failure of issue 16: a model that copies an example's customer and product on every ticket, and
/// answers ACCOUNT every time. The model invents a customer on all 30 tickets (and a product); after the check
/// none of its fields is left, every run goes to the human with the reason, and the customer is the writer the
/// signer rules read from the ticket (on the 13 that name one; the model's name is then no rejection).
#[tokio::test]
async fn a_model_that_copies_the_examples_invents_fields_the_check_removes() {
    let tickets = tickets();
    let copied =
        r#"{"customer": "Ben Ode", "product": "Mail account", "problem": "cannot sign in", "urgency": "normal"}"#;
    let replies: Vec<&str> = tickets.iter().flat_map(|_| [copied, "account"]).collect();
    let results = measure(ChatModelRef::new(ScriptedModel::new(replies)), &tickets, |_| {}).await.unwrap();
    let text = summary(&results);
    assert!(text.contains("invented fields (not in the ticket): model 30 customers, 30 products / after the check 0 customers, 0 products"), "{text}");
    assert!(text.contains("runs with a rejected field (to the human with the reason, never SENT): 30/30"), "{text}");
    assert!(
        text.contains("model 0/30 / after the check 17/30  [customer 0/30 / 30/30, product 0/30 / 17/30]"),
        "the customer by the rules, the product exact only where the ticket has none: {text}"
    );
    assert!(
        text.contains(
            "category accuracy: model alone 10/30 (2/5 of the ambiguous) (its answers before weighing: 10/30 (2/5 of \
             the ambiguous)), rules alone 25/30 (2/5 of the ambiguous) (a rule matched 28/30), both 27/30 (2/5 of the \
             ambiguous); model alone where no rule matched: 2/2"
        ),
        "{text}"
    );
    assert!(text.contains("the model's guesses: ACCOUNT 30"), "{text}");
    // Each line shows what the check kept where it differs from the model's answer.
    let first = line(&results[0]);
    assert!(first.contains("product \"Mail account\" NO → - "), "{first}");
    for m in &results {
        assert_eq!(m.checked["customer"], json!(m.ticket.customer), "#{}", m.ticket.id);
        assert_eq!(m.checked["product"], json!(null), "#{}", m.ticket.id);
        let reasons = m.checked["rejected"].as_array().expect("reasons");
        let customer_rejected = reasons.contains(&json!("the customer name the model gave is not in the ticket"));
        assert_eq!(customer_rejected, m.ticket.customer.is_none(), "#{}: {reasons:?}", m.ticket.id);
        // "Mail account" is "Mail" after the name agent; a ticket with "email" has it in lowercase only: dropped
        // as no name, without a reason.
        let product_rejected = reasons.contains(&json!("the product the model gave is not in the ticket"));
        assert_eq!(product_rejected, !m.ticket.text.to_lowercase().contains("mail"), "#{}", m.ticket.id);
    }
}
