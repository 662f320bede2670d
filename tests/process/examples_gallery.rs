//! Every example spec keeps working: each one in `examples/specs/` parses, validates (`agentic validate`) and
//! builds, and is RUN with exact inputs, scripted models (its own `provider: scripted` models, or canned
//! replies chosen by the prompt for the others) and scripted human answers, and its output checked.

#![allow(clippy::unwrap_used)]

use crate::binary::Cli;

use agentic::agents::model::{
    ChatModel, ChatModelRef, ChatRequest, ChatResponse, ModelError, ModelInfo, ScriptedModel,
};
use agentic::engine::TokenUsage;
use agentic::spec::Spec;
use serde_json::{Map, Value, json};

const SPECS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs");

fn specs() -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(SPECS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "json"))
        .collect();
    paths.sort();
    paths
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_example_spec_parses_and_builds() {
    let paths = specs();
    assert!(paths.len() >= 19, "the gallery shrank: {paths:?}");
    for path in paths {
        let spec = Spec::from_path(&path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        let scripted: Vec<(String, ChatModelRef)> =
            spec.models().iter().map(|m| (m.name.clone(), ChatModelRef::new(ScriptedModel::new(["ok"])))).collect();
        let built = spec.build_with_models(scripted).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        assert_eq!(built.name, spec.name(), "{}", path.display());
        assert!(!built.root.topology().walk().is_empty());
    }
}

#[test]
fn agentic_validate_accepts_every_example_spec() {
    for path in specs() {
        // `provider: local` models need the `local` feature, or a server: name one (validate contacts none).
        let out =
            Cli::new(["validate".as_ref(), path.as_os_str()]).env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1").output();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        assert!(stdout.starts_with("ok: "), "{}: {stdout}", path.display());
    }
}

/// A chat model answering with the reply of the first `(needle, reply)` whose needle is in the last user
/// message: deterministic whatever order concurrent agents ask in.
struct Keyed {
    info: ModelInfo,
    replies: Vec<(&'static str, &'static str)>,
}

impl Keyed {
    fn model(name: &str, replies: &[(&'static str, &'static str)]) -> ChatModelRef {
        let info = ModelInfo {
            provider: "keyed".into(),
            server: "keyed".into(),
            model: name.into(),
            json_schema: false,
            tools: false,
            prices: None,
            limits: Default::default(),
            name: None,
        };
        ChatModelRef::new(Keyed { info, replies: replies.to_vec() })
    }
}

impl ChatModel for Keyed {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let asked = request.messages.iter().rev().find(|m| m.role() == "user").map(|m| m.text()).unwrap_or_default();
        match self.replies.iter().find(|(needle, _)| asked.contains(needle)) {
            Some((_, reply)) => Ok(ChatResponse::text_reply(*reply, TokenUsage { input: 1, output: 1 })),
            None => Err(ModelError::Unavailable {
                provider: "keyed".into(),
                message: format!("no canned reply for: {asked}"),
            }),
        }
    }
}

/// One spec run: its inputs, canned replies for the models it does not script itself (by model name), the
/// human answers by response id (each suspension is answered, in order), and the expected output.
struct Case {
    file: &'static str,
    inputs: Value,
    models: &'static [(&'static str, &'static [(&'static str, &'static str)])],
    answers: &'static [(&'static str, &'static str)],
    expected: Value,
}

const TICKET: &str = "Hi, this is Dana Reyes. I was charged twice for my Pro plan this month. Please refund one.";

fn cases() -> Vec<Case> {
    vec![
        Case {
            file: "bdi.yaml",
            inputs: json!({"marketData": "bonds", "portfolio": "60/40"}),
            models: &[],
            answers: &[],
            expected: json!({
                "plan": "rebalance 60/40 with protective puts",
                "hedge": "protective puts",
                "liquidity": "60/40 is liquid"
            }),
        },
        Case {
            file: "blackboard.yaml",
            inputs: json!({"patient": "Ada", "labResults": "CRP 12", "medications": "aspirin"}),
            models: &[],
            answers: &[],
            expected: json!("flu (lab analysis of CRP 12)"),
        },
        Case {
            file: "countdown.yaml",
            inputs: json!({"budget": 100}),
            models: &[],
            answers: &[],
            expected: json!({"budget": 6, "steps": 4}),
        },
        Case {
            file: "debate.yaml",
            inputs: json!({"question": "Should we ship on Friday?"}),
            models: &[],
            answers: &[],
            expected: json!(
                "Should we ship on Friday? Yes.\nOptimist: \"Shipping early helps users: AGREE\"\nSkeptic: \"Tests \
                 pass, so fine: agree.\""
            ),
        },
        Case {
            file: "decision_router.yaml",
            inputs: json!({"request": "I broke my leg, what should I do?"}),
            models: &[(
                "default",
                &[
                    ("Answer with a JSON object only", r#"{"agent": "medical"}"#),
                    ("medical point of view", "Keep it still and see a doctor today."),
                ],
            )],
            answers: &[],
            expected: json!("Keep it still and see a doctor today."),
        },
        Case {
            file: "evening_planner.yaml",
            inputs: json!({"mood": "romantic"}),
            models: &[(
                "default",
                &[
                    ("3 meals", r#"["Oysters", "Mushroom risotto", "Chocolate fondue"]"#),
                    ("3 movies", r#"["Casablanca", "Before Sunrise", "La La Land"]"#),
                ],
            )],
            answers: &[],
            expected: json!(
                "1. Casablanca with Oysters; 2. Before Sunrise with Mushroom risotto; 3. La La Land with Chocolate fondue"
            ),
        },
        Case {
            file: "expert_router.yaml",
            inputs: json!({"request": "I broke my leg, what should I do?"}),
            models: &[(
                "default",
                &[("Category:", "MEDICAL"), ("medical point of view", "Keep it still and see a doctor today.")],
            )],
            answers: &[],
            expected: json!("Keep it still and see a doctor today."),
        },
        Case {
            file: "goap.yaml",
            inputs: json!({"prompt": "Mario pisces"}),
            models: &[],
            answers: &[],
            expected: json!(
                "Mario | Mario the pisces: a lucky day | a story for Mario (Mario the pisces: a lucky day)"
            ),
        },
        Case {
            file: "hello.yaml",
            inputs: json!({"name": "Ada"}),
            models: &[],
            answers: &[],
            expected: json!({"greeting": "Hello, Ada! Welcome to agentic.", "loud": "HELLO, ADA! WELCOME TO AGENTIC."}),
        },
        Case {
            file: "horoscope_mapper.yaml",
            inputs: json!({"persons": [
                {"name": "Mario", "sign": "aries"}, {"name": "Luigi", "sign": "pisces"}, {"name": "Peach", "sign": "leo"}
            ]}),
            models: &[(
                "default",
                &[
                    ("Mario", "Mario, act boldly."),
                    ("Luigi", "Luigi, trust your dreams."),
                    ("Peach", "Peach, lead the way."),
                ],
            )],
            answers: &[],
            expected: json!(["Mario, act boldly.", "Luigi, trust your dreams.", "Peach, lead the way."]),
        },
        Case {
            file: "order_approval.yaml",
            inputs: json!({"order": "ACME Corp orders 1000 widgets, to be delivered in Turin."}),
            models: &[(
                "default",
                &[("Read the order", r#"{"customer": "ACME Corp", "item": "widgets", "quantity": 1000}"#)],
            )],
            answers: &[("manager-approval", "approved")],
            expected: json!("SHIPPED 1000 widgets to ACME Corp"),
        },
        Case {
            file: "p2p.yaml",
            inputs: json!({"topic": "black holes"}),
            models: &[],
            answers: &[],
            expected: json!({"hypothesis": "H2", "score": 0.9}),
        },
        Case {
            file: "refund_desk.yaml",
            inputs: json!({"request": "Please refund order A-7, it arrived broken"}),
            models: &[],
            answers: &[("tool:root:1", "approve")],
            expected: json!("Refunded 120 USD on order A-7."),
        },
        Case {
            file: "shout_all.json",
            inputs: json!({"words": ["hello", "agentic", "world"]}),
            models: &[],
            answers: &[],
            expected: json!(["HELLO!", "AGENTIC!", "WORLD!"]),
        },
        Case {
            file: "story.yaml",
            inputs: json!({"topic": "dragons and wizards", "audience": "young adults", "style": "fantasy"}),
            models: &[],
            answers: &[],
            expected: json!(
                "In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. It \
                 hatched in a burst of emerald fire during her trial, and the old masters fell silent."
            ),
        },
        Case {
            file: "style_review.yaml",
            inputs: json!({"topic": "a lighthouse keeper", "style": "comedy"}),
            models: &[],
            answers: &[],
            expected: json!(
                "The lighthouse keeper counted ships every night, mostly to annoy the seagulls. One night he counted \
                 one too many, and it winked back."
            ),
        },
        Case {
            file: "supervisor.yaml",
            inputs: json!({"request": "Transfer 100 EUR from Mario's account to Georgios' one"}),
            // The planner is asked after each step; its prompt lists the invocations so far (latest first here).
            models: &[(
                "default",
                &[
                    (
                        "3. credit(",
                        r#"{"agentName": "done", "arguments": {"response": "Transferred 100 EUR (115 USD)."}}"#,
                    ),
                    ("2. withdraw(", r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 115}}"#),
                    ("1. exchange(", r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 115}}"#),
                    (
                        "Invocations so far: none",
                        r#"{"agentName": "exchange", "arguments": {"originalCurrency": "EUR", "amount": 100, "targetCurrency": "USD"}}"#,
                    ),
                ],
            )],
            answers: &[],
            expected: json!("Transferred 100 EUR (115 USD)."),
        },
        Case {
            file: "ticket_triage.yaml",
            inputs: json!({"ticket": TICKET}),
            models: &[(
                "default",
                &[
                    (
                        "\"customer\"",
                        r#"{"customer": "Dana Reyes", "product": "Pro plan", "problem": "charged twice", "urgency": "high"}"#,
                    ),
                    ("Ticket: Hi, this is Dana Reyes", "billing"),
                ],
            )],
            answers: &[("approve-reply", "approved")],
            expected: json!(
                "SENT [BILLING, high] to Dana Reyes: Hello Dana Reyes, thank you for contacting us about Pro plan \
                 (\"charged twice\"). Our Billing team will review the charges on your account and reply within two \
                 business days; any charge found to be wrong will be refunded to your original payment method. - The \
                 Billing team"
            ),
        },
        Case {
            file: "triage.yaml",
            inputs: json!({"temperature": 39.5, "cough": true}),
            models: &[],
            answers: &[],
            expected: json!({"level": "high", "urgent": true, "remedy": "warm water and honey, and rest"}),
        },
        Case {
            file: "voting.yaml",
            inputs: json!({"text": "I absolutely love this product"}),
            models: &[],
            answers: &[],
            expected: json!("POSITIVE"),
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_spec_runs_with_its_expected_output() {
    let cases = cases();
    let covered: Vec<&str> = cases.iter().map(|c| c.file).collect();
    let files: Vec<String> = specs().iter().map(|p| file_name(p)).collect();
    assert_eq!(covered, files, "every spec in examples/specs/ needs a case here (in file order)");

    for case in cases {
        let spec = Spec::from_path(&std::path::Path::new(SPECS).join(case.file)).unwrap();
        let models: Vec<(String, ChatModelRef)> =
            case.models.iter().map(|(name, replies)| (name.to_string(), Keyed::model(name, replies))).collect();
        let built = spec.build_with_models(models).unwrap_or_else(|e| panic!("{}:\n{e}", case.file));
        let mut inputs: Map<String, Value> = case.inputs.as_object().cloned().unwrap();
        // Every spec declares its inputs, and its case gives what they ask (as `agentic run` checks them).
        assert!(!spec.params().is_empty(), "{}: declares no `params`", case.file);
        assert_eq!(spec.check_inputs(&inputs), Ok(()), "{}", case.file);
        assert_eq!(spec.complete_inputs(&mut inputs), Ok(()), "{}", case.file);
        let mut outcome = built.root.invoke().inputs(inputs).await.unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let mut answers = case.answers.iter();
        while outcome.is_suspended() {
            let (id, answer) = answers.next().unwrap_or_else(|| panic!("{}: unexpected suspension", case.file));
            assert_eq!(outcome.pending()[0].id, *id, "{}", case.file);
            outcome = outcome.resume().answer(*id, *answer).await.unwrap_or_else(|e| panic!("{}: {e}", case.file));
        }
        assert!(answers.next().is_none(), "{}: an answer was not asked for", case.file);
        assert_eq!(outcome.output(), Some(&case.expected), "{}", case.file);
    }
}

/// The model-driven examples run with scripted models in place of `provider: local`: the supervisor plans the
/// transfer (exchange, withdraw, credit, then the summary), and the decision router (the chat model used as
/// the decision model) lets only the chosen expert answer.
#[tokio::test]
async fn the_supervisor_and_decision_router_examples_run_with_scripted_models() {
    let spec = Spec::from_path(&std::path::Path::new(SPECS).join("supervisor.yaml")).unwrap();
    let planner = ScriptedModel::new([
        r#"{"agentName": "exchange", "arguments": {"originalCurrency": "EUR", "amount": 100, "targetCurrency": "USD"}}"#,
        r#"{"agentName": "withdraw", "arguments": {"user": "Mario", "amount": 115}}"#,
        r#"{"agentName": "credit", "arguments": {"user": "Georgios", "amount": 115}}"#,
        r#"{"agentName": "done", "arguments": {"response": "Transferred 100 EUR (115 USD) from Mario to Georgios."}}"#,
    ]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(planner.clone()))]).unwrap();
    let out =
        built.root.invoke().input("request", "Transfer 100 EUR from Mario's account to Georgios' one").await.unwrap();
    let order: Vec<String> = out.history().await.unwrap().into_iter().map(|r| r.agent).collect();
    assert_eq!(order, ["planner", "exchange", "planner", "withdraw", "planner", "credit", "planner", "bank"]);
    assert_eq!(out.output(), Some(&serde_json::json!("Transferred 100 EUR (115 USD) from Mario to Georgios.")));
    assert_eq!(out.state().get("summary"), out.output());
    assert_eq!(out.state().get("exchanged"), Some(&serde_json::json!(115.0)));
    assert_eq!(out.state().get("withdrawal"), Some(&serde_json::json!("Mario: -115 USD")));
    assert_eq!(out.state().get("credit"), Some(&serde_json::json!("Georgios: +115 USD")));
    assert!(
        planner.requests()[0].messages[0]
            .text()
            .ends_with("Context: Accounts hold US dollars (USD): convert other currencies first.")
    );

    let spec = Spec::from_path(&std::path::Path::new(SPECS).join("decision_router.yaml")).unwrap();
    let model = ScriptedModel::new([r#"{"agent": "medical"}"#, "Keep the leg still and raised. See a doctor today."]);
    let built = spec.build_with_models([("default".to_string(), ChatModelRef::new(model.clone()))]).unwrap();
    let out = built.root.invoke().input("request", "I broke my leg, what should I do?").await.unwrap();
    assert_eq!(out.output(), Some(&serde_json::json!("Keep the leg still and raised. See a doctor today.")));
    assert_eq!(out.state().get("legal_response"), None);
    assert_eq!(out.state().get("technical_response"), None);
    assert_eq!(model.requests().len(), 2);
}
