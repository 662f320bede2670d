//! The showcase of `./run-demo.sh`, `examples/specs/ticket_triage.yaml` (extract → classify → route to an
//! expert → human approval → final answer), with its local model replaced: in-process by a scripted model, and
//! through the real binary (every command a new process) against a loopback OpenAI-compatible server that the
//! spec's `provider: local` model reaches through `OPENAI_BASE_URL`.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use agentic::agents::model::{ChatModelRef, ScriptedModel};
use agentic::spec::Spec;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::binary::{Cli, stderr, stdout};

fn spec_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs/ticket_triage.yaml")
}

const TICKET: &str = "Hi, this is Sam Ortiz. Since yesterday's update the CloudSync desktop app crashes on startup \
                      with error 0x80040154. I need it working for a deadline today.";

const FIELDS: &str = r#"{"customer": "Sam Ortiz", "product": "CloudSync desktop app", "problem": "crashes on startup", "urgency": "high"}"#;

const TECHNICAL_REPLY: &str = "Hello Sam Ortiz, thank you for reporting this problem with CloudSync \
                               (\"crashes on startup\"). Our engineers will look into it. Meanwhile, updating to the \
                               latest version and restarting may help; if it happens again, please reply with the \
                               time it occurred so that we can find it in our logs. - The Technical Support team";

#[tokio::test]
async fn the_showcase_spec_suspends_for_approval_and_sends_the_routed_experts_reply() {
    let spec = Spec::from_path(&spec_path()).expect("the showcase spec validates");
    let model = ScriptedModel::new([FIELDS, "technical"]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))]).expect("build");

    let outcome = built.root.invoke().input("ticket", TICKET).await.expect("run");
    assert!(outcome.is_suspended(), "waits for the human");
    assert_eq!(outcome.state().get("category"), Some(&json!("TECHNICAL")));
    assert_eq!(outcome.state().get("reply"), Some(&json!(TECHNICAL_REPLY)));
    assert_eq!(model.used(), 2, "two llm steps: extract, classify");
    let requests = model.requests();
    let classify = &requests[1].messages;
    assert_eq!(
        classify.last().unwrap().text(),
        format!("Ticket: {TICKET}\n\nAnswer with one of: billing, technical, account."),
        "the ticket, after the instructions (a model without enum outputs is told the values)"
    );
    let instructions = classify[0].text();
    assert!(instructions.contains("technical - the product, app or device does something wrong"), "{instructions}");
    assert!(
        instructions.contains("Ticket: I was charged twice for my subscription this month. -> billing"),
        "{instructions}"
    );

    let done = outcome.resume().answer("approve-reply", "approved").await.expect("resume");
    assert_eq!(
        done.output(),
        Some(&json!(format!("SENT [TECHNICAL, high] to Sam Ortiz: {TECHNICAL_REPLY}"))),
        "the final answer"
    );
    let history = done.history().await.expect("history");
    let agents: Vec<&str> = history.iter().map(|r| r.agent.as_str()).collect();
    assert!(agents.contains(&"technical_expert"), "{agents:?}");
    assert!(agents.contains(&"check"), "the grounding check is journaled: {agents:?}");
    assert!(!agents.contains(&"billing_expert") && !agents.contains(&"account_expert"), "{agents:?}");
}

/// The failure of issue 16: on a ticket that names no one, the model copies a few-shot example's customer and
/// product. The check (a journaled `compute` agent) rejects both, the reply greets "there" and names no product,
/// and the human is told why; approving it never yields `SENT`.
#[tokio::test]
async fn a_name_copied_from_the_examples_is_rejected_and_the_human_is_told_why() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    let ticket = "I cannot log in to my account";
    let copied =
        r#"{"customer": "Ben Ode", "product": "Mail account", "problem": "cannot log in", "urgency": "normal"}"#;
    let model = ScriptedModel::new([copied, "account"]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");

    let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
    assert!(outcome.is_suspended(), "waits for the human");
    let reasons =
        ["the customer name the model gave is not in the ticket", "the product the model gave is not in the ticket"];
    assert_eq!(
        outcome.state().get("fields"),
        Some(&json!({
            "customer": null, "product": null, "problem": "cannot log in", "urgency": "normal", "rejected": reasons
        })),
        "the copied fields are null, with their reasons"
    );
    let reply = "Hello there, thank you for contacting us (\"cannot log in\"). For your security, a member of our \
                 Account team will first confirm your identity by email, then help you with your request. Please do \
                 not share your password with anyone, including us. - The Account team";
    assert_eq!(outcome.state().get("reply"), Some(&json!(reply)));
    let pending = outcome.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, "approve-reply");
    assert_eq!(
        pending[0].prompt,
        format!(
            "The check rejected what the ticket does not say, and the reply leaves it out: {}.\nSend this ACCOUNT \
             reply (urgency: normal)? Answer approved or rejected.\n\n{reply}",
            reasons.join("; ")
        )
    );

    let done = outcome.resume().answer("approve-reply", "approved").await.expect("resume");
    let answer = done.output().and_then(Value::as_str).unwrap().to_string();
    assert_eq!(
        answer,
        format!(
            "REVIEWED [ACCOUNT, normal] approved by a person (the check rejected: {}): {reply}",
            reasons.join("; ")
        )
    );
    assert!(!answer.contains("SENT"), "{answer}");
    for copied in ["Ben Ode", "Mail account"] {
        assert!(!answer.contains(copied) && !pending[0].prompt.contains(copied), "names {copied}: {answer}");
    }
    let history = done.history().await.expect("history");
    let check = history.iter().find(|r| r.agent == "check").expect("the check is journaled");
    assert_eq!(check.output.get("rejected"), Some(&json!(reasons)), "{check:?}");
}

/// Grounded fields pass the check whatever their case; a field the model leaves null is not a rejection (the
/// reply then greets "there"), and only a rejection keeps the answer from `SENT`.
#[tokio::test]
async fn grounded_fields_pass_the_check_and_the_reply_is_sent() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    for (ticket, fields, rejected, sent) in [
        (
            "hi, PRIYA SHAH here: I was charged twice for my Acme Cloud plan.",
            r#"{"customer": "Priya Shah", "product": "Acme Cloud plan", "problem": "charged twice", "urgency": "normal"}"#,
            json!([]),
            // A plan named by two words: "plan" is no part of its name (a "Pro plan" keeps it).
            "SENT [BILLING, normal] to Priya Shah: Hello Priya Shah, thank you for contacting us about Acme Cloud \
             (\"charged twice\"). Our Billing team will review the charges on your account",
        ),
        (
            "I was charged twice for my subscription this month",
            r#"{"customer": null, "product": null, "problem": "charged twice", "urgency": "normal"}"#,
            json!([]),
            "SENT [BILLING, normal] to the customer: Hello there, thank you for contacting us (\"charged twice\"). Our \
             Billing team will review the charges on your account",
        ),
        (
            "I was charged twice for my subscription this month",
            r#"{"customer": "", "product": "subscription", "problem": "double billing", "urgency": "normal"}"#,
            json!(["the problem the model gave has words the ticket does not contain"]),
            // A generic word is no product's name: dropped (it is in the ticket: not a rejection).
            "REVIEWED [BILLING, normal] approved by a person (the check rejected: the problem the model gave has words \
             the ticket does not contain): Hello there, thank you for contacting us. Our Billing team will review the \
             charges on your account",
        ),
        (
            // A paraphrase in the ticket's own words passes: every word of the problem is in the ticket.
            "I was charged twice for my subscription this month!",
            r#"{"customer": null, "product": null, "problem": "Subscription charged twice.", "urgency": "normal"}"#,
            json!([]),
            "SENT [BILLING, normal] to the customer: Hello there, thank you for contacting us (\"Subscription charged \
             twice.\"). Our Billing team will review the charges on your account",
        ),
        (
            // Other forms of the ticket's words pass (stems: "prices" for "price", "renewing" for "renewal");
            // linking words ("when") carry no fact.
            "Why did the price of my renewal go up from 20 to 25 dollars?",
            r#"{"customer": null, "product": null, "problem": "prices went up from 20 to 25 when renewing", "urgency": "normal"}"#,
            json!(["the problem the model gave has words the ticket does not contain"]),
            // "went" is not in the ticket: a paraphrase beyond word forms is still rejected.
            "REVIEWED [BILLING, normal]",
        ),
        (
            "Why did the price of my renewal go up from 20 to 25 dollars?",
            r#"{"customer": null, "product": null, "problem": "prices go up from 20 to 25 when renewing", "urgency": "normal"}"#,
            json!([]),
            "SENT [BILLING, normal] to the customer: Hello there, thank you for contacting us (\"prices go up from 20 \
             to 25 when renewing\").",
        ),
        (
            // Word forms beyond the last three letters: "adding" for "add", "cancellation" for "cancelled", "read"
            // for "reads".
            "The Tally Pro app reads the total wrong when I add a refund after I cancelled an order.",
            r#"{"customer": null, "product": "Tally Pro app", "problem": "read total wrong adding refund after cancellation", "urgency": "normal"}"#,
            json!([]),
            "SENT [BILLING, normal] to the customer: Hello there, thank you for contacting us about Tally Pro \
             (\"read total wrong adding refund after cancellation\").",
        ),
        (
            // A plural for the ticket's singular ("pdfs"), words in quotes; a lowercase product is no name: dropped
            // without a rejection even when the ticket does not have it.
            "Every invoice PDF comes out blank and the page says 'token expired'.",
            r#"{"customer": null, "product": "monthly plan", "problem": "invoice pdfs blank, 'token expired'", "urgency": "normal"}"#,
            json!([]),
            "SENT [BILLING, normal] to the customer: Hello there, thank you for contacting us (\"invoice pdfs blank, \
             'token expired'\").",
        ),
        (
            // A number the ticket does not have is an invented detail, whatever else matches.
            "Why did the price of my renewal go up from 20 to 25 dollars?",
            r#"{"customer": null, "product": null, "problem": "price go up from 20 to 2", "urgency": "normal"}"#,
            json!(["the problem the model gave has words the ticket does not contain"]),
            "REVIEWED [BILLING, normal]",
        ),
    ] {
        let model = ScriptedModel::new([fields, "account"]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        assert!(outcome.is_suspended(), "{ticket}");
        assert_eq!(outcome.state().get("fields").and_then(|f| f.get("rejected")), Some(&rejected), "{ticket}");
        assert_eq!(outcome.pending()[0].prompt.starts_with("Send this BILLING reply"), rejected == json!([]));
        let done = outcome.resume().answer("approve-reply", "approved").await.expect("resume");
        let answer = done.output().and_then(Value::as_str).unwrap();
        assert!(answer.starts_with(sent), "{answer}");
    }
}

/// The customer is the ticket's writer: the name of an introduction or a signature wins over the model's pick,
/// and a model's pick that is a colleague, a company, the agent the ticket greets or no name at all ("I") is
/// dropped without a rejection (the name is in the ticket; it is just not the writer's).
#[tokio::test]
async fn the_customer_is_the_writer_not_a_colleague_a_company_or_the_agent_greeted() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    for (ticket, model_customer, sent_to) in [
        (
            "My colleague Sunniva says the invoice export fails for her too.\n\nKind regards,\nMarta Kowalska\nIT, \
             Brightwater GmbH",
            "Sunniva",
            "to Marta Kowalska: Hello Marta Kowalska,",
        ),
        // The model's first name gives way to the introduction's full name.
        (
            "Hi, I'm Oluwaseun Adebayo-Clarke. My invoice shows the wrong plan.",
            "Oluwaseun",
            "to Oluwaseun Adebayo-Clarke:",
        ),
        ("We need a new invoice for March. — Priya Raman, Ops Lead, Northgate", "Northgate", "to Priya Raman:"),
        ("Hi Anna, the invoice for March never arrived.", "Anna", "to the customer: Hello there,"),
        (
            "Company is Kestrelwood GmbH, we need an invoice with our VAT number.",
            "Kestrelwood GmbH",
            "to the customer:",
        ),
        ("My manager Tom Berg asked for the invoice of March.", "Tom Berg", "to the customer:"),
        ("THIS IS THE THIRD TIME I ask for my invoice.", "", "to the customer:"),
        // A last paragraph that opens with the writer's name: its title and company are not the name.
        (
            "The March invoice lists the wrong address.\n\nEfua Owusu, Store Manager, Harbour Street Deli",
            "Harbour Street Deli",
            "to Efua Owusu:",
        ),
        (
            "Please re-issue our invoice.\n\nYours faithfully,\n\nMargaret O'Sullivan\nFinance Director\nCairnfield \
             Housing Association",
            "Cairnfield Housing Association",
            "to Margaret O'Sullivan:",
        ),
        ("The invoice total is wrong.\n\nSun-hee Park | Operations Lead", "", "to Sun-hee Park:"),
        // A sign-off in another language is no name; the name under it is.
        ("Die Rechnung fehlt.\n\nViele Grüße\nWolfgang Huber", "Viele Grüße", "to Wolfgang Huber:"),
        ("Send the invoice to Nordvik Byggtjenester AS please.", "Nordvik Byggtjenester AS", "to the customer:"),
        ("I need the invoice for March.", "I", "to the customer:"),
        // A sign-off in Spanish, the writer's business after a dash; the model's whole signature line.
        (
            "The seller fee went up.\n\nGracias,\nCamila Rojas — Rojas Artesanías, Oaxaca",
            "Camila Rojas — Rojas Artesanías, Oaxaca",
            "to Camila Rojas:",
        ),
        (
            "The invoice for March is wrong.\n\nThanks,\nSophie from Little Wren Café",
            "Sophie from Little Wren Café",
            "to Sophie:",
        ),
        // A first name signed at the end gives way to the full name the ticket gives.
        (
            "Please change my surname on the invoice. My new name is Aisha Rahman-Clarke.\n\nThank you,\nAisha",
            "Aisha Rahman-Clarke",
            "to Aisha Rahman-Clarke:",
        ),
        // The owner the writer mentions, a weekday, a title over a company, and a product, are no customer.
        ("The owner (Kenji Watanabe) is away; the invoice is wrong.", "Kenji Watanabe", "to the customer:"),
        ("It's Saturday and the invoice is still wrong!", "", "to the customer:"),
        ("The invoice is wrong.\n\nNurse Manager, Alder Road Family Clinic", "", "to the customer:"),
        // The agent greeted with a title is no name; the writer's title is not part of hers.
        ("Dear Mr. Patel,\n\nThe invoice is wrong.\n\nBest regards,\nElena Popescu", "Mr. Patel", "to Elena Popescu:"),
        (
            "The invoice is wrong.\n\nYours faithfully,\nMs. Ingrid Solberg\nHead of Engineering, Nordvik Marine AS",
            "Ms. Ingrid Solberg",
            "to Ingrid Solberg:",
        ),
        // A quoted reply's sign-off is the agent's; two particles in a name.
        (
            "> Kind regards, Jonas – Support\n\nJonas, the invoice is still wrong.\n\nAna Lucía Ferreira",
            "Jonas",
            "to Ana Lucía Ferreira:",
        ),
        (
            "The invoice has the wrong tax.\n\nSaludos,\nMaría José de la Fuente Ortega\nPanadería La Espiga",
            "Panadería La Espiga",
            "to María José de la Fuente Ortega:",
        ),
        ("hi, the invoice price went up", "Hi", "to the customer:"),
        // Initials signed over a firm; the firm is no name.
        (
            "Please send a corrected invoice.\n\nKind regards,\nJ. M. Okonkwo\nFinance Director\nOkonkwo & Partners LLP",
            "Okonkwo & Partners LLP",
            "to J. M. Okonkwo:",
        ),
        (
            "I am Katarzyna Nowak-Lindqvist and the invoice is wrong.\n\nBest,\nK. Nowak-Lindqvist",
            "Katarzyna Nowak-Lindqvist",
            "to Katarzyna Nowak-Lindqvist:",
        ),
        // A name only in a quoted line is the support agent's.
        ("> Hi, this is Kwame from support.\n\nThe invoice still shows the old plan.", "Kwame", "to the customer:"),
    ] {
        let fields = json!({"customer": model_customer, "product": null, "problem": null, "urgency": "normal"});
        let model = ScriptedModel::new([fields.to_string().as_str(), "billing"]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        assert_eq!(outcome.state().get("fields").and_then(|f| f.get("rejected")), Some(&json!([])), "{ticket}");
        let done = outcome.resume().answer("approve-reply", "approved").await.expect("resume");
        let answer = done.output().and_then(Value::as_str).unwrap();
        assert!(answer.starts_with(&format!("SENT [BILLING, normal] {sent_to}")), "{ticket}: {answer}");
    }
}

/// An organisation the ticket names only in the writer's signature is not the product (no rejection: the
/// ticket has it); the same name in the ticket's body is.
#[tokio::test]
async fn the_writers_organisation_in_the_signature_is_no_product() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    for (ticket, product) in [
        ("The March invoice lists the wrong address.\n\nEfua Owusu, Store Manager, Harbour Street Deli", json!(null)),
        (
            "The Harbour Street Deli invoice lists the wrong address.\n\nEfua Owusu, Store Manager, Harbour Street Deli",
            json!("Harbour Street Deli"),
        ),
        // No signer: a last paragraph is not a signature.
        (
            "The March invoice lists the wrong address.\n\nHarbour Street Deli, please fix it.",
            json!("Harbour Street Deli"),
        ),
    ] {
        let fields = json!({"customer": null, "product": "Harbour Street Deli", "problem": null, "urgency": "normal"})
            .to_string();
        let model = ScriptedModel::new([fields.as_str(), "billing"]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        let checked = outcome.state().get("fields").cloned().expect("fields");
        assert_eq!(checked["product"], product, "{ticket}");
        assert_eq!(checked["rejected"], json!([]), "{ticket}");
    }
}

/// A ticket written in capitals names the product in capitals: the model's name for it passes the check.
#[tokio::test]
async fn a_product_the_ticket_shouts_passes_the_check() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    let ticket = "WHY DID YOU TAKE $79.99 AGAIN?? I CANCELLED STREAMORA PREMIUM IN JANUARY.";
    let fields = json!({"customer": null, "product": "Streamora Premium", "problem": null, "urgency": "high"});
    let model = ScriptedModel::new([fields.to_string().as_str(), "billing"]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
    let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
    let checked = outcome.state().get("fields").cloned().expect("fields");
    assert_eq!((&checked["product"], &checked["rejected"]), (&json!("Streamora Premium"), &json!([])));
}

/// A one-word product name the model capitalises passes the check however the ticket writes it, unless it is a
/// generic word.
#[tokio::test]
async fn a_one_word_name_written_otherwise_in_the_ticket_passes_the_check() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    for (ticket, extracted, product) in [
        ("Parcelpoint shows my package at the wrong locker.", "ParcelPoint", json!("ParcelPoint")),
        ("need to change the email on my routely account", "Routely account", json!("Routely")),
        ("my account is blocked since this morning", "Account", json!(null)),
        ("the monthly plan renewed twice", "Monthly Plan", json!(null)),
    ] {
        let fields = json!({"customer": null, "product": extracted, "problem": null, "urgency": "normal"});
        let model = ScriptedModel::new([fields.to_string().as_str(), "account"]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        let checked = outcome.state().get("fields").cloned().expect("fields");
        assert_eq!(checked["product"], product, "{ticket}");
    }
}

#[tokio::test]
async fn a_rejected_reply_is_held_back() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    let fields = r#"{"customer": "Ana", "product": "Pro plan", "problem": "charged twice", "urgency": "normal"}"#;
    let model = ScriptedModel::new([fields, "billing"]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
    let outcome =
        built.root.invoke().input("ticket", "Ana here: I was charged twice for my Pro plan.").await.expect("run");
    assert!(outcome.state().get("reply").and_then(Value::as_str).unwrap().ends_with("- The Billing team"));
    let done = outcome.resume().answer("approve-reply", "rejected").await.expect("resume");
    assert_eq!(done.output(), Some(&json!("HELD [BILLING, normal] for Ana (review: rejected)")));
}

/// The OpenAI-compatible loopback server: the extraction request (a JSON schema with `customer`) gets the
/// fields, the classification request (the wrapped enum) gets `{"value": "technical"}`.
struct Triage;

impl Respond for Triage {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let schema = &body["response_format"]["json_schema"]["schema"];
        let content = if schema["properties"].get("customer").is_some() {
            FIELDS.to_string()
        } else {
            json!({"value": "technical"}).to_string()
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "c", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4}
        }))
    }
}

fn agentic(store: &Path, base_url: &str, args: &[&str]) -> Output {
    Cli::new(args)
        .store(store)
        .env("OPENAI_BASE_URL", base_url)
        .env("OPENAI_API_KEY", "sk-loopback")
        .env("OPENAI_MODEL", "gpt-test")
        .output()
}

fn json_out(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_showcase_runs_through_the_binary_against_an_openai_compatible_server() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(Triage).mount(&server).await;
    let base_url = format!("{}/v1", server.uri());
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_path_buf();
    let spec = spec_path().display().to_string();

    let (base, s) = (base_url.clone(), dir.clone());
    let outputs = tokio::task::spawn_blocking(move || {
        let validate = agentic(&s, &base, &["validate", &spec]);
        let run =
            agentic(&s, &base, &["run", &spec, "--input", &format!("ticket={TICKET}"), "--memory-id", "t-1", "--json"]);
        let show = agentic(&s, &base, &["show", "t-1", "--json"]);
        let respond = agentic(&s, &base, &["respond", "t-1", "approved"]);
        let resume = agentic(&s, &base, &["resume", "t-1"]);
        let shown = agentic(&s, &base, &["show", "t-1", "--json"]);
        let report_file = s.join("report.html");
        let report = agentic(&s, &base, &["report", "t-1", "-o", &report_file.display().to_string()]);
        (validate, run, show, respond, resume, shown, report)
    })
    .await
    .unwrap();
    let (validate, run, show, respond, resume, shown, report) = outputs;

    assert_eq!(validate.status.code(), Some(0), "{}", stderr(&validate));
    assert!(stdout(&validate).starts_with("ok"), "{}", stdout(&validate));

    assert_eq!(run.status.code(), Some(2), "suspended: {}", stderr(&run));
    let suspended = json_out(&run);
    assert_eq!(suspended["status"], json!("suspended"));
    assert_eq!(suspended["pending"][0]["id"], json!("approve-reply"));
    assert_eq!(
        suspended["pending"][0]["prompt"],
        json!(format!("Send this TECHNICAL reply (urgency: high)? Answer approved or rejected.\n\n{TECHNICAL_REPLY}"))
    );
    let state = &json_out(&show)["state"];
    assert_eq!(state["category"], json!("TECHNICAL"));
    let mut checked = serde_json::from_str::<Value>(FIELDS).unwrap();
    checked["rejected"] = json!([]);
    checked["product"] = json!("CloudSync");
    let why = "every field is in the ticket: none rejected; the name less the lowercase words after it";
    assert_eq!(state["fields"], checked, "{why}");

    assert_eq!(respond.status.code(), Some(0), "{}", stderr(&respond));
    assert_eq!(resume.status.code(), Some(0), "{}", stderr(&resume));
    assert_eq!(stdout(&resume), format!("SENT [TECHNICAL, high] to Sam Ortiz: {TECHNICAL_REPLY}\n"));

    let shown = json_out(&shown);
    assert_eq!(shown["status"], json!("completed"));
    let agents: Vec<&str> = shown["history"].as_array().unwrap().iter().filter_map(|h| h["agent"].as_str()).collect();
    assert!(agents.contains(&"technical_expert"), "routed to the technical expert: {agents:?}");
    assert!(!agents.contains(&"billing_expert") && !agents.contains(&"account_expert"), "{agents:?}");

    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("technical_expert"), "the report shows the routed branch");
    assert!(html.contains("check"), "the report shows the grounding check");

    // Both llm steps went to the server, with the model named by OPENAI_MODEL and structured outputs.
    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 2, "extract and classify, once each (validate and resume ask nothing)");
    assert!(
        bodies.iter().all(|b| b["model"] == json!("gpt-test") && b["response_format"]["type"] == json!("json_schema"))
    );
}

#[test]
fn without_the_local_feature_or_a_server_the_local_provider_reports_a_clear_error() {
    let o = Cli::new(["validate", &spec_path().display().to_string()]).env_remove("OPENAI_BASE_URL").output();
    if o.status.code() == Some(0) {
        return; // built with the cargo feature `local`: the spec is fine as it is
    }
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    let expected = "model `default`: the local provider is not built into this binary: build with `--features local`, \
                    or set OPENAI_BASE_URL to an OpenAI-compatible server to run this spec unchanged";
    assert!(stderr(&o).contains(expected), "{}", stderr(&o));
}

#[tokio::test]
async fn keyword_rules_decide_the_category_and_the_models_guess_fills_in() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    for (ticket, product, guess, rule, category) in [
        // The model guesses account, the ticket says it was charged: BILLING.
        ("I was charged twice for my Pro plan.", "Pro plan", "account", "BILLING", "BILLING"),
        // The name is taken out as whole words: "Pro" leaves "profile".
        ("Pro keeps my old profile photo.", "Pro", "technical", "ACCOUNT", "ACCOUNT"),
        ("My password reset link has expired.", "", "technical", "ACCOUNT", "ACCOUNT"),
        ("The export fails with error 42.", "", "billing", "TECHNICAL", "TECHNICAL"),
        // A keyword starts a word ("feed" is no `fee`), and the product's name is no keyword.
        ("The camera feed is black at night.", "", "technical", "", "TECHNICAL"),
        (
            "The Invoice Scanner shows every photo upside down.",
            "Invoice Scanner",
            "technical",
            "TECHNICAL",
            "TECHNICAL",
        ),
        // No rule matches: the model's guess decides.
        ("Where can I find your office?", "", "account", "", "ACCOUNT"),
        ("Where can I find your office?", "", "technical", "", "TECHNICAL"),
    ] {
        let product = if product.is_empty() { Value::Null } else { json!(product) };
        let fields = json!({"customer": null, "product": product, "problem": null, "urgency": "low"}).to_string();
        let model = ScriptedModel::new([fields.as_str(), guess]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        assert_eq!(outcome.state().get("guess"), Some(&json!(guess)), "{ticket}");
        assert_eq!(outcome.state().get("rule_category"), Some(&json!(rule)), "{ticket}");
        assert_eq!(outcome.state().get("category"), Some(&json!(category)), "{ticket} (guess {guess})");
    }
}

/// The model decides over a keyword rule when it is sure (a weighed share of 0.6 or more), after its
/// probabilities are weighed (billing 1, technical 1.75, account 0.3): "price" is a billing keyword, but a blank
/// page is a technical problem. With the model's probability of `technical` at 0.95 (weighed share 0.97), 0.6
/// (0.75) or 0.45 (0.62) the ticket is TECHNICAL; at 0.4 (0.57) the rule wins (BILLING). An unsure `account` gives way to the second choice when no rule matches; a
/// model that reports no probabilities leaves the rules first (the other tests).
#[tokio::test]
async fn a_sure_model_overrules_a_keyword_rule() {
    use agentic::agents::model::{ScriptedReply, TokenLogprob, TopLogprob};
    let spec = Spec::from_path(&spec_path()).expect("valid");
    let storefront = "The price list page in Storefront stays blank since this morning.";
    let lock = "My Riverstone lock beeps green but the bolt stays put.";
    let fields =
        r#"{"customer": null, "product": "Storefront", "problem": "price list page stays blank", "urgency": "normal"}"#;
    // (ticket, answer, [billing, technical, account], rule, the weighed choice and its share, category)
    for (ticket, answer, [b, t, a], rule, (choice, share), category) in [
        (storefront, "technical", [0.04, 0.95, 0.01], "BILLING", ("technical", 1.6625 / 1.7055), "TECHNICAL"),
        (storefront, "technical", [0.32, 0.6, 0.08], "BILLING", ("technical", 1.05 / 1.394), "TECHNICAL"),
        (storefront, "technical", [0.44, 0.45, 0.11], "BILLING", ("technical", 0.7875 / 1.2605), "TECHNICAL"),
        (storefront, "billing", [0.5, 0.4, 0.1], "BILLING", ("technical", 0.7 / 1.23), "BILLING"),
        (lock, "account", [0.1, 0.35, 0.55], "", ("technical", 0.6125 / 0.8775), "TECHNICAL"),
        (lock, "account", [0.05, 0.1, 0.85], "", ("account", 0.255 / 0.48), "ACCOUNT"),
    ] {
        let alternative = |token: &str, p: f64| TopLogprob { token: token.to_string(), logprob: f64::ln(p) };
        let top = vec![alternative("billing", b), alternative("technical", t), alternative("account", a)];
        let chosen = match answer {
            "billing" => b,
            "technical" => t,
            _ => a,
        };
        let guess = ScriptedReply::Scored {
            text: answer.to_string(),
            logprobs: vec![TokenLogprob { token: answer.to_string(), logprob: f64::ln(chosen), top }],
        };
        let model = ScriptedModel::new([ScriptedReply::from(fields), guess]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        assert_eq!(model.requests()[1].logprobs, Some(5), "the classification asks for log-probabilities");
        let state = outcome.state();
        assert_eq!(state.get("rule_category"), Some(&json!(rule)), "{ticket}");
        assert_eq!(state.get("guess"), Some(&json!(answer)));
        let scores = state.get("guess_scores").expect("the scores");
        assert!((scores["account"].as_f64().unwrap() - a).abs() < 1e-9, "{scores}");
        let weighed = state.get("model_choice").expect("the weighed choice");
        assert_eq!(weighed["category"], json!(choice), "{weighed}");
        assert!((weighed["confidence"].as_f64().unwrap() - share).abs() < 1e-9, "{weighed}");
        assert_eq!(state.get("category"), Some(&json!(category)), "{ticket} {answer} {b} {t} {a}");
    }
}

/// The product's name is the extracted one less the lowercase words after it (a device, "app", "account"),
/// except a one-word plan, tier or bundle; a name written all in lowercase stays as written.
#[tokio::test]
async fn the_products_name_drops_the_lowercase_words_after_it() {
    let spec = Spec::from_path(&spec_path()).expect("valid");
    for (ticket, extracted, name) in [
        ("The Halvara T2 thermostat shows 40 degrees.", "Halvara T2 thermostat", "Halvara T2"),
        ("Two Keystrel door locks stay shut.", "Keystrel door locks", "Keystrel"),
        ("Please close my Wisplane account.", "Wisplane account", "Wisplane"),
        ("Our Team plan renewed twice.", "Team plan", "Team plan"),
        ("Our Lumora Plus plan renewed twice.", "Lumora Plus plan", "Lumora Plus"),
        ("Is the Starter bundle cheaper?", "Starter bundle", "Starter bundle"),
        ("mossgrove crm logs me out.", "mossgrove crm", "mossgrove crm"),
        ("Order #88213 never came.", "Order #88213", "Order #88213"),
        ("The Kitebox to Slack integration stopped.", "Kitebox to Slack integration", "Kitebox"),
        ("Harrowgate Desk integration with Slack fails.", "Harrowgate Desk integration with Slack", "Harrowgate Desk"),
    ] {
        let fields = json!({"customer": null, "product": extracted, "problem": null, "urgency": "low"}).to_string();
        let model = ScriptedModel::new([fields.as_str(), "technical"]);
        let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model))]).expect("build");
        let outcome = built.root.invoke().input("ticket", ticket).await.expect("run");
        assert_eq!(outcome.state().get("product_name"), Some(&json!(name)), "{ticket}");
    }
}
