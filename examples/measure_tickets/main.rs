//! **Measured, not assumed** — runs the showcase's agents (`examples/specs/ticket_triage.yaml`: extract, check,
//! classify, rules, categorize, ...) over the 30 labelled tickets of `tests/fixtures/tickets.jsonl` and prints
//! what the model does: extraction exactness (customer and product, before and after the grounding check),
//! invented fields (a customer or product the ticket does not contain) and category accuracy (the model
//! alone, the keyword rules alone, both as the spec combines them).
//!
//! ```text
//! scripts/setup-local-model.sh                                           # once: the model (and build tools)
//! cargo run --release --features local --example measure_tickets       # the local model (Qwen2.5 Coder 1.5B)
//! AGENTIC_LOCAL_MODEL=gemma3-270m cargo run --release --features local --example measure_tickets  # Gemma 3 270M
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 cargo run --release --example measure_tickets
//! cargo run --release --features local --example measure_tickets -- tests/fixtures/tickets_unseen.jsonl
//! ```
//!
//! A thin wrapper over `agentic eval`: each ticket is one case of `agentic::eval::Runner` (one at a time, as
//! `agentic eval examples/specs/ticket_triage.yaml FILE --concurrency 1` runs them), judged by the spec's
//! `evals:`; this program prints, besides the evaluators' verdicts, each ticket's line and the figures the
//! evaluators do not break down (before and after the check, by field, the ambiguous tickets, the tickets no
//! keyword rule matches). A labelled ticket is a dataset line of `agentic eval` (`{"id", "inputs": {"ticket"},
//! "expected": {"customer", "product", "category"}, "metadata": {"ambiguous"}, "answers": {..}}`,
//! docs/evaluation.md; its run goes on past the human step with the answer) or, flat, `{"id", "ticket",
//! "customer": null|"..", "product": null|[".." accepted values], "category", "ambiguous"}` (its run suspends at
//! the human step); values compare trimmed and case-insensitively.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentic::eval::{Case, Dataset, EvalResult, Evaluator, Judges, Runner, case_inputs, new_eval_id, read_back};
use agentic::prelude::*;
use agentic::spec::Spec;
use serde_json::{Map, Value, json};

/// One labelled ticket of the fixture file.
#[derive(Debug, Clone)]
pub struct Ticket {
    /// Its number in the file.
    pub id: u64,
    /// The ticket's text.
    pub text: String,
    /// The customer's name as written in the ticket, or none when it names no one.
    pub customer: Option<String>,
    /// The accepted spellings of the product, empty when it names none.
    pub product: Vec<String>,
    /// BILLING, TECHNICAL or ACCOUNT.
    pub category: String,
    /// Whether the ticket could fairly go to two categories (the label is the better one).
    pub ambiguous: bool,
    /// The answers its run's pending responses get (a dataset line's `answers`; none in the flat form: the run
    /// suspends at its human step).
    pub answers: Map<String, Value>,
}

/// What one run of the spec gave for one ticket.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The ticket.
    pub ticket: Ticket,
    /// The model's fields (`extracted`).
    pub extracted: Value,
    /// The fields after the grounding check (`fields`, with `rejected`).
    pub checked: Value,
    /// The model's category as the spec uses it: its weighed choice (`model_choice.category`) when the
    /// provider gives scores, else its answer (`guess`).
    pub guess: String,
    /// The model's answer before weighing (`guess`).
    pub answered: String,
    /// The keyword rules' category, "" when none matched (`rule_category`).
    pub rules: String,
    /// The spec's category (`category`).
    pub category: String,
    /// The model's probability of its category among the three (`guess_confidence`), when the provider gives one.
    pub confidence: Option<f64>,
    /// The model's probability of each category (`guess_scores`), when the provider gives them.
    pub scores: Option<Value>,
    /// How long the run took (two model calls), as `agentic eval` times it (`latency_ms`).
    pub took: Duration,
    /// What the spec's evaluators (`evals:`) said of the run, in their order.
    pub evals: Vec<EvalResult>,
}

/// Reads the labelled tickets (JSON lines).
pub fn load(path: &Path) -> Result<Vec<Ticket>, Box<dyn Error>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut tickets = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line: Value = serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
        // A dataset line of `agentic eval` (`{"id", "inputs": {"ticket"}, "expected": {..}, "metadata":
        // {"ambiguous"}}`) read as the flat labelled ticket it holds.
        let mut v = line.get("expected").cloned().unwrap_or(Value::Null);
        let answers = line.get("answers").and_then(Value::as_object).cloned().unwrap_or_default();
        if let (Value::Object(flat), Some(inputs), Some(metadata)) = (&mut v, line.get("inputs"), line.get("metadata"))
        {
            flat.insert("ticket".into(), inputs.get("ticket").cloned().unwrap_or(Value::Null));
            flat.insert("ambiguous".into(), metadata.get("ambiguous").cloned().unwrap_or(Value::Null));
            let id = line.get("id").and_then(Value::as_str).and_then(|i| i.parse::<u64>().ok());
            flat.insert("id".into(), id.map_or(Value::Null, Value::from));
        } else {
            v = line;
        }
        let field = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let product = match v.get("product") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => Vec::new(),
        };
        tickets.push(Ticket {
            id: v.get("id").and_then(Value::as_u64).unwrap_or(n as u64 + 1),
            text: field("ticket").ok_or_else(|| format!("{}:{}: no `ticket`", path.display(), n + 1))?,
            customer: field("customer"),
            product,
            category: field("category").ok_or_else(|| format!("{}:{}: no `category`", path.display(), n + 1))?,
            ambiguous: v.get("ambiguous").and_then(Value::as_bool).unwrap_or(false),
            answers,
        });
    }
    Ok(tickets)
}

/// The showcase spec, or the variant `$TICKETS_SPEC` names (same agents and keys, other prompts).
pub fn spec_path() -> PathBuf {
    match std::env::var_os("TICKETS_SPEC").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/ticket_triage.yaml"),
    }
}

/// Runs the spec (its `default` model replaced by `model`) over `tickets` with `agentic eval`'s runner
/// (`agentic::eval::Runner`, one case at a time, the runs in an in-memory store), each to its end when the
/// ticket has its human step's answer (else up to its human step); `progress` is called after each. The spec's
/// `evals:` judge each run, as `agentic eval SPEC FILE --concurrency 1` does.
pub async fn measure(
    model: ChatModelRef,
    tickets: &[Ticket],
    mut progress: impl FnMut(&Measured),
) -> Result<Vec<Measured>, Box<dyn Error>> {
    // The model is made ready first (the local one loads its file), so that no ticket's time includes it.
    model.prepare().await?;
    let spec = Spec::from_path(&spec_path())?;
    let built = spec.build_with_models([("default".to_string(), model)])?;
    let evaluators = Evaluator::of_spec(&spec)?;
    let judges = Judges::for_spec(&spec, &evaluators)?;
    let store = MemoryStore::new().store_ref();
    let dataset = Dataset { file: "tickets".to_string(), cases: tickets.iter().enumerate().map(case).collect() };
    let inputs = case_inputs(&spec, &built, &dataset)?;
    let runner = Runner {
        built,
        store: store.clone(),
        evaluators: Arc::new(evaluators),
        judges,
        eval_id: new_eval_id(),
        repeat: 1,
        concurrency: 1,
        spec_hash: None,
        source: None,
        calls: None,
    };
    let mut out = Vec::new();
    for ((ticket, case), inputs) in tickets.iter().zip(&dataset.cases).zip(&inputs) {
        let runs = runner.run(std::slice::from_ref(case), std::slice::from_ref(inputs), |_| {}).await;
        let (run, _, _) = runs.first().and_then(|c| c.runs.first()).ok_or("the runner gave no run")?;
        let (state, _, _) = read_back(&store, &run.run_id).await;
        let text = |k: &str| state.get(k).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let m = Measured {
            ticket: ticket.clone(),
            extracted: state.get("extracted").cloned().unwrap_or(Value::Null),
            checked: state.get("fields").cloned().unwrap_or(Value::Null),
            guess: state
                .get("model_choice")
                .and_then(|c| c.get("category"))
                .and_then(Value::as_str)
                .map_or_else(|| text("guess"), str::to_string)
                .to_uppercase(),
            answered: text("guess").to_uppercase(),
            rules: text("rule_category"),
            category: text("category"),
            confidence: state.get("guess_confidence").and_then(Value::as_f64),
            scores: state.get("guess_scores").cloned().filter(|v| v.is_object()),
            took: Duration::from_millis(run.latency_ms),
            evals: run.results.clone(),
        };
        progress(&m);
        out.push(m);
    }
    Ok(out)
}

/// Ticket `i` as a dataset case: its text the input, its labels the expected value.
fn case((i, t): (usize, &Ticket)) -> Case {
    let mut inputs = Map::new();
    inputs.insert("ticket".to_string(), Value::String(t.text.clone()));
    let product = if t.product.is_empty() { Value::Null } else { json!(t.product) };
    let mut metadata = Map::new();
    metadata.insert("ambiguous".to_string(), Value::Bool(t.ambiguous));
    Case {
        id: t.id.to_string(),
        inputs,
        expected: Some(json!({"customer": t.customer, "product": product, "category": t.category})),
        metadata,
        answers: t.answers.clone(),
        line: i + 1,
    }
}

/// A field's value as extracted: a non-blank string, trimmed.
fn value<'a>(fields: &'a Value, key: &str) -> Option<&'a str> {
    fields.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// Whether an extracted value matches the label: both absent, or equal (case-insensitive) to an accepted one.
fn matches(got: Option<&str>, accepted: &[String]) -> bool {
    match got {
        None => accepted.is_empty(),
        Some(g) => accepted.iter().any(|a| a.trim().eq_ignore_ascii_case(g)),
    }
}

/// Whether an extracted value is invented: present, but not in the ticket's text (case-insensitive).
fn invented(got: Option<&str>, ticket: &str) -> bool {
    got.is_some_and(|g| !ticket.to_lowercase().contains(&g.to_lowercase()))
}

fn customer_labels(t: &Ticket) -> Vec<String> {
    t.customer.iter().cloned().collect()
}

/// One line per ticket.
pub fn line(m: &Measured) -> String {
    let show = |v: Option<&str>| v.map_or("-".to_string(), |s| format!("{s:?}"));
    let (cust, prod) = (value(&m.extracted, "customer"), value(&m.extracted, "product"));
    let mark = |ok: bool| if ok { "ok" } else { "NO" };
    // The field the check kept, when it is not the model's (the rules' signer, the product's name, or none).
    let kept_as = |key: &str, given: Option<&str>, labels: &[String]| {
        let kept = value(&m.checked, key);
        if kept == given { String::new() } else { format!(" → {} {}", show(kept), mark(matches(kept, labels))) }
    };
    let kept = kept_as("customer", cust, &customer_labels(&m.ticket));
    let kept_product = kept_as("product", prod, &m.ticket.product);
    let confidence = m.confidence.map_or(String::new(), |p| format!(" p={p:.2}"));
    // Each category's probability, by its first letter ("b=0.10 t=0.20 a=0.70").
    let scores = m.scores.as_ref().and_then(Value::as_object).map_or(String::new(), |s| {
        let each: Vec<String> = s
            .iter()
            .map(|(k, v)| format!("{}={:.2}", k.chars().next().unwrap_or('?'), v.as_f64().unwrap_or(0.0)))
            .collect();
        format!(" [{}]", each.join(" "))
    });
    let reasons: Vec<&str> = m
        .checked
        .get("rejected")
        .and_then(Value::as_array)
        .map_or(Vec::new(), |r| r.iter().filter_map(Value::as_str).collect());
    let rejected = reasons.len();
    // A rejected problem is shown with its reason: what the model wrote that the ticket does not contain.
    let problem = match value(&m.extracted, "problem") {
        Some(p) if value(&m.checked, "problem").is_none() => format!("\n    problem {p:?} rejected"),
        _ => String::new(),
    };
    format!(
        "#{:<2} {:<9}{} model {:<9} {}{}{} rules {:<9} {} both {:<9} {} | customer {} {}{} product {} {}{} | rejected {} | {:.1}s{}",
        m.ticket.id,
        m.ticket.category,
        if m.ticket.ambiguous { "*" } else { " " },
        m.guess,
        mark(m.guess == m.ticket.category),
        confidence,
        scores,
        if m.rules.is_empty() { "-" } else { &m.rules },
        mark(m.rules == m.ticket.category),
        m.category,
        mark(m.category == m.ticket.category),
        show(cust),
        mark(matches(cust, &customer_labels(&m.ticket))),
        kept,
        show(prod),
        mark(matches(prod, &m.ticket.product)),
        kept_product,
        rejected,
        m.took.as_secs_f64(),
        problem,
    )
}

/// The figures.
pub fn summary(results: &[Measured]) -> String {
    let n = results.len();
    let count = |f: &dyn Fn(&Measured) -> bool| results.iter().filter(|m| f(m)).count();
    let exact = |fields: &dyn Fn(&Measured) -> &Value, key: &str| {
        let right = count(&|m| {
            let labels = if key == "customer" { customer_labels(&m.ticket) } else { m.ticket.product.clone() };
            matches(value(fields(m), key), &labels)
        });
        format!("{right}/{n}")
    };
    fn raw(m: &Measured) -> &Value {
        &m.extracted
    }
    fn checked(m: &Measured) -> &Value {
        &m.checked
    }
    let both_exact = |fields: &dyn Fn(&Measured) -> &Value| {
        let right = count(&|m| {
            matches(value(fields(m), "customer"), &customer_labels(&m.ticket))
                && matches(value(fields(m), "product"), &m.ticket.product)
        });
        format!("{right}/{n}")
    };
    let invented_in =
        |fields: &dyn Fn(&Measured) -> &Value, key: &str| count(&|m| invented(value(fields(m), key), &m.ticket.text));
    let named = count(&|m| m.ticket.customer.is_some());
    let with_product = count(&|m| !m.ticket.product.is_empty());
    let ambiguous = count(&|m| m.ticket.ambiguous);
    let acc = |f: &dyn Fn(&Measured) -> &str| {
        let right = count(&|m| f(m) == m.ticket.category);
        let right_amb = count(&|m| m.ticket.ambiguous && f(m) == m.ticket.category);
        format!("{right}/{n} ({right_amb}/{ambiguous} of the ambiguous)")
    };
    let mut labels: Vec<&str> = results.iter().map(|m| m.guess.as_str()).collect();
    labels.sort_unstable();
    labels.dedup();
    let guesses: Vec<String> = labels.iter().map(|l| format!("{l} {}", count(&|m| m.guess == *l))).collect();
    let rules_matched = count(&|m| !m.rules.is_empty());
    let unmatched = n - rules_matched;
    let model_unmatched = count(&|m| m.rules.is_empty() && m.guess == m.ticket.category);
    let rejected_runs = count(&|m| m.checked.get("rejected").and_then(Value::as_array).is_some_and(|r| !r.is_empty()));
    let problem_grounded = count(&|m| value(&m.checked, "problem").is_some());
    let total: Duration = results.iter().map(|m| m.took).sum();
    // The spec's evaluators, in their order: how many runs each passed and its mean score (a measure that
    // always passes, threshold 0, is read by its mean: the share).
    let evals: Vec<String> = results
        .first()
        .map(|m| m.evals.iter().map(|e| e.evaluator.as_str()).collect::<Vec<_>>())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let of = |m: &Measured| m.evals.get(i).cloned();
            let passed = results.iter().filter(|m| of(m).is_some_and(|e| e.passed)).count();
            let mean = results.iter().filter_map(|m| of(m).map(|e| e.score)).sum::<f64>() / n.max(1) as f64;
            format!("{name} {passed}/{n} (mean {mean:.2})")
        })
        .collect();
    format!(
        "{n} tickets ({named} name a customer, {with_product} a product, {ambiguous} ambiguous)\n\
         extraction exact (customer and product): model {} / after the check {}  [customer {} / {}, product {} / {}]\n\
         invented fields (not in the ticket): model {} customers, {} products / after the check {} customers, {} products\n\
         runs with a rejected field (to the human with the reason, never SENT): {rejected_runs}/{n}; problem kept \
         (in the ticket): {problem_grounded}/{n}\n\
         category accuracy: model alone {} (its answers before weighing: {}), rules alone {} (a rule matched \
         {rules_matched}/{n}), both {}; model alone where no rule matched: {model_unmatched}/{unmatched}\n\
         the model's guesses: {}\n\
         time: {:.1}s in all, {:.1}s a ticket (two model calls)\n\
         the spec's evals (agentic eval): {}",
        both_exact(&raw),
        both_exact(&checked),
        exact(&raw, "customer"),
        exact(&checked, "customer"),
        exact(&raw, "product"),
        exact(&checked, "product"),
        invented_in(&raw, "customer"),
        invented_in(&raw, "product"),
        invented_in(&checked, "customer"),
        invented_in(&checked, "product"),
        acc(&|m| m.guess.as_str()),
        acc(&|m| m.answered.as_str()),
        acc(&|m| m.rules.as_str()),
        acc(&|m| m.category.as_str()),
        guesses.join(", "),
        total.as_secs_f64(),
        total.as_secs_f64() / n.max(1) as f64,
        evals.join(", "),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let file = std::env::args()
        .nth(1)
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tickets.jsonl"), PathBuf::from);
    let model = match agentic::default_model() {
        Ok(model) => model,
        Err(_) => {
            eprintln!(
                "measure_tickets: no model to measure. This build lacks the local model (cargo feature `local`) and \
                 OPENAI_BASE_URL is not set. Either:\n  scripts/setup-local-model.sh && cargo run --release \
                 --features local --example measure_tickets\n  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 \
                 OPENAI_MODEL=llama3.2 cargo run --release --example measure_tickets"
            );
            std::process::exit(2);
        }
    };
    let tickets = load(&file)?;
    match std::env::var("OPENAI_BASE_URL") {
        Ok(url) if !url.trim().is_empty() => eprintln!("model: the server at {url}"),
        _ => eprintln!(
            "model: the local model {} (in-process; AGENTIC_LOCAL_MODEL chooses another)",
            agentic::agents::model::default_local_model_path().display()
        ),
    }
    eprintln!("{} tickets from {} (* = ambiguous)", tickets.len(), file.display());
    let results = measure(model, &tickets, |m| println!("{}", line(m))).await?;
    println!("\n{}", summary(&results));
    Ok(())
}
