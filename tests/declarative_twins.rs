//! Each example with a declarative twin returns, declared, exactly what its builder version returns with the
//! same scripted models: the same output, the same final state and the same steps. The story pipeline
//! (`examples/story_declarative.rs` against `examples/story.rs`), the style review (a loop in a sequence) and
//! the expert router (an enum-typed classifier and a conditional), and each of the other examples.

#![allow(clippy::unwrap_used)]
#![allow(clippy::duplicate_mod)]

#[allow(dead_code)]
#[path = "../examples/story.rs"]
mod story;

#[allow(dead_code)]
#[path = "../examples/story_declarative.rs"]
mod story_declarative;

#[allow(dead_code)]
#[path = "../examples/style_review.rs"]
mod style_review;

#[allow(dead_code)]
#[path = "../examples/style_review_declarative.rs"]
mod style_review_declarative;

#[allow(dead_code)]
#[path = "../examples/expert_router.rs"]
mod expert_router;

#[allow(dead_code)]
#[path = "../examples/expert_router_declarative.rs"]
mod expert_router_declarative;

#[allow(dead_code)]
#[path = "../examples/quickstart.rs"]
mod quickstart;

#[allow(dead_code)]
#[path = "../examples/quickstart_declarative.rs"]
mod quickstart_declarative;

#[allow(dead_code)]
#[path = "../examples/evening_planner.rs"]
mod evening_planner;

#[allow(dead_code)]
#[path = "../examples/evening_planner_declarative.rs"]
mod evening_planner_declarative;

#[allow(dead_code)]
#[path = "../examples/horoscope_mapper.rs"]
mod horoscope_mapper;

#[allow(dead_code)]
#[path = "../examples/horoscope_mapper_declarative.rs"]
mod horoscope_mapper_declarative;

#[allow(dead_code)]
#[path = "../examples/sentiment_voting.rs"]
mod sentiment_voting;

#[allow(dead_code)]
#[path = "../examples/sentiment_voting_declarative.rs"]
mod sentiment_voting_declarative;

#[allow(dead_code)]
#[path = "../examples/ethics_debate.rs"]
mod ethics_debate;

#[allow(dead_code)]
#[path = "../examples/ethics_debate_declarative.rs"]
mod ethics_debate_declarative;

#[allow(dead_code)]
#[path = "../examples/goap_horoscope.rs"]
mod goap_horoscope;

#[allow(dead_code)]
#[path = "../examples/goap_horoscope_declarative.rs"]
mod goap_horoscope_declarative;

#[allow(dead_code)]
#[path = "../examples/order_approval.rs"]
mod order_approval;

#[allow(dead_code)]
#[path = "../examples/order_approval_declarative.rs"]
mod order_approval_declarative;

#[allow(dead_code)]
#[path = "../examples/supervisor_bank.rs"]
mod supervisor_bank;

#[allow(dead_code)]
#[path = "../examples/supervisor_bank_declarative.rs"]
mod supervisor_bank_declarative;

#[allow(dead_code)]
#[path = "../examples/p2p_research.rs"]
mod p2p_research;

#[allow(dead_code)]
#[path = "../examples/p2p_research_declarative.rs"]
mod p2p_research_declarative;

#[allow(dead_code)]
#[path = "../examples/blackboard_diagnosis.rs"]
mod blackboard_diagnosis;

#[allow(dead_code)]
#[path = "../examples/blackboard_diagnosis_declarative.rs"]
mod blackboard_diagnosis_declarative;

#[allow(dead_code)]
#[path = "../examples/bdi_trading.rs"]
mod bdi_trading;

#[allow(dead_code)]
#[path = "../examples/bdi_trading_declarative.rs"]
mod bdi_trading_declarative;

#[allow(dead_code)]
#[path = "../examples/decision_router.rs"]
mod decision_router;

#[allow(dead_code)]
#[path = "../examples/decision_router_declarative.rs"]
mod decision_router_declarative;

use agentic::engine::ValueType;
use agentic::prelude::*;
use bdi_trading_declarative::TradingDesk;
use blackboard_diagnosis_declarative::Diagnosis;
use decision_router_declarative::Experts;
use ethics_debate_declarative::EthicsPanel;
use evening_planner_declarative::EveningPlanner;
use expert_router_declarative::{Category, ExpertRouter};
use goap_horoscope_declarative::{Astrologer, Sign};
use horoscope_mapper_declarative::Astrology;
use order_approval_declarative::OrderDesk;
use quickstart_declarative::Improver;
use sentiment_voting_declarative::{Sentiment, SentimentCouncil};
use serde_json::{Map, Value, json};
use story_declarative::NovelCreator;
use style_review_declarative::StyledWriter;
use supervisor_bank_declarative::Bank;

const STORY: &str = "In the vaulted library of Eldmoor, Mira the apprentice found a dragon egg among the grimoires. \
                     It hatched in a burst of emerald fire during her trial, and the old masters fell silent.";

/// The final state without the time each conversation-context entry was written at (the one thing two runs
/// cannot share).
fn state_without_times(outcome: &RunOutcome) -> Map<String, Value> {
    let mut state = outcome.state().to_map();
    for (key, value) in state.iter_mut() {
        if key.starts_with(agentic::engine::CONTEXT_PREFIX)
            && let Some(entry) = value.as_object_mut()
        {
            entry.remove("at_us");
        }
    }
    state
}

/// Each step's agent, inputs and output, in order.
async fn steps(outcome: &RunOutcome) -> Vec<(String, Value)> {
    outcome.history().await.unwrap().into_iter().map(|r| (r.agent, r.output)).collect()
}

/// Asserts that two runs ended alike: output, final state (but the context's times) and steps.
async fn assert_same_run(declared: &RunOutcome, built: &RunOutcome) {
    assert_eq!(declared.output(), built.output());
    assert_eq!(state_without_times(declared), state_without_times(built));
    assert_eq!(steps(declared).await, steps(built).await);
}

/// As [`assert_same_run`], for agents run concurrently: the same steps, in any order.
async fn assert_same_concurrent_run(declared: &RunOutcome, built: &RunOutcome) {
    assert_eq!(declared.output(), built.output());
    assert_eq!(state_without_times(declared), state_without_times(built));
    let sorted = |mut steps: Vec<(String, Value)>| {
        steps.sort_by(|a, b| (&a.0, a.1.to_string()).cmp(&(&b.0, b.1.to_string())));
        steps
    };
    assert_eq!(sorted(steps(declared).await), sorted(steps(built).await));
}

async fn run(agent: &AgentRef) -> RunOutcome {
    agent
        .invoke()
        .input("topic", "dragons and wizards")
        .input("audience", "young adults")
        .input("style", "fantasy")
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_story_returns_what_the_built_one_returns() {
    let built = run(&story::novel_creator(true).unwrap()).await;
    let declared_agents = story_declarative::novel_creator(true).unwrap();
    let declared = run(declared_agents.novel_creator_agent()).await;

    assert_eq!(built.output(), Some(&json!(STORY)));
    assert_eq!(declared.output(), built.output());
    assert_eq!(state_without_times(&declared), state_without_times(&built));
    assert_eq!(
        state_without_times(&declared),
        json!({
            "_context.audience_editor": {
                "answer": "Mira, seventeen and always late, found a dragon egg between two spell books. It hatched \
                           mid-exam, and nobody believed her excuse.",
                "user": "Rewrite this story so that it suits young adults. Reply with the story only.\nStory: Mira, \
                         a wizard's apprentice, found a dragon egg in the library. It hatched during her exam."
            },
            "_context.style_editor": {
                "answer": STORY,
                "user": "Rewrite this story in the fantasy style, keeping it coherent. Reply with the story only.\n\
                         Story: Mira, seventeen and always late, found a dragon egg between two spell books. It \
                         hatched mid-exam, and nobody believed her excuse."
            },
            "_context.writer": {
                "answer": "Mira, a wizard's apprentice, found a dragon egg in the library. It hatched during her \
                           exam.",
                "user": "Write a story of at most three sentences about dragons and wizards.\nReply with the story \
                         only."
            },
            "audience": "young adults",
            "story": STORY,
            "style": "fantasy",
            "topic": "dragons and wizards"
        })
        .as_object()
        .unwrap()
        .clone()
    );
    assert_eq!(steps(&declared).await, steps(&built).await);
    let names: Vec<String> = steps(&declared).await.into_iter().map(|(agent, _)| agent).collect();
    assert_eq!(names, ["writer", "audience_editor", "style_editor", "novel_creator"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typed_entry_point_returns_the_story_as_a_string() {
    let novel = story_declarative::novel_creator(true).unwrap();
    let story: String = novel.novel_creator("dragons and wizards", "young adults", "fantasy").await.unwrap();
    assert_eq!(story, STORY);
    assert_eq!(story_declarative::run(true).await.unwrap(), format!("story: {STORY}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_agents_have_the_built_ones_settings_and_declare_their_types() {
    let built = story::novel_creator(true).unwrap().topology();
    let declared = story_declarative::novel_creator(true).unwrap();
    let declared = declared.novel_creator_agent().topology();
    for (b, d) in built.walk().into_iter().zip(declared.walk()) {
        assert_eq!((&d.path, &d.spec.name, &d.spec.kind), (&b.path, &b.spec.name, &b.spec.kind));
        assert_eq!(d.spec.output_key, b.spec.output_key);
        let keys = |n: &agentic::engine::TopologyNode| n.spec.inputs.iter().map(|i| i.key.clone()).collect::<Vec<_>>();
        if b.path != "root" {
            assert_eq!(d.spec.description, b.spec.description);
            assert_eq!(keys(d), keys(b));
        }
    }
    // The declared ones say what type each key is: every key here is a `String`.
    let writer = &declared.children[0].spec;
    assert_eq!(writer.inputs[0].value_type, ValueType::String);
    assert_eq!(writer.inputs[0].rust_type.as_deref(), Some("alloc::string::String"));
    assert_eq!(
        (writer.output_type, writer.output_rust_type.as_deref()),
        (ValueType::String, Some("alloc::string::String"))
    );
    let root = &declared.spec;
    assert_eq!(root.inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["topic", "audience", "style"]);
    assert_eq!(root.description, "The pipeline: writer → audience editor → style editor.");
}

const LIGHTHOUSE: &str = "The lighthouse keeper counted ships every night, mostly to annoy the seagulls. One night \
                          he counted one too many, and it winked back.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_style_review_returns_what_the_built_one_returns() {
    let inputs = |agent: &AgentRef| agent.invoke().input("topic", "a lighthouse keeper").input("style", "comedy");
    let built = inputs(&style_review::styled_writer(true).unwrap()).await.unwrap();
    let declared_agents = style_review_declarative::styled_writer(true).unwrap();
    let declared = inputs(declared_agents.styled_writer_agent()).await.unwrap();
    assert_eq!(built.output(), Some(&json!(LIGHTHOUSE)));
    assert_same_run(&declared, &built).await;
    assert_eq!(declared.state().get("score"), Some(&json!(0.85)));
    let names: Vec<String> = steps(&declared).await.into_iter().map(|(agent, _)| agent).collect();
    assert_eq!(names, ["writer", "scorer", "editor", "scorer", "style_review", "styled_writer"]);

    let fresh = style_review_declarative::styled_writer(true).unwrap();
    assert_eq!(fresh.styled_writer("a lighthouse keeper", "comedy").await.unwrap(), LIGHTHOUSE);
}

const LEG: &str = "Keep the leg still and raised, and put ice on it. Go to an emergency room for an X-ray and a cast.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_expert_router_returns_what_the_built_one_returns() {
    let request = |agent: &AgentRef| agent.invoke().input("request", "I broke my leg, what should I do?");
    let built = request(&expert_router::router(true).unwrap()).await.unwrap();
    let declared_agents = expert_router_declarative::expert_router(true).unwrap();
    let declared = request(declared_agents.expert_router_agent()).await.unwrap();
    assert_eq!(built.output(), Some(&json!(LEG)));
    assert_same_run(&declared, &built).await;
    assert_eq!(declared.state().get("category"), Some(&json!("MEDICAL")));

    // The classifier alone, typed: its answer read as one of the enum's names.
    let fresh = expert_router_declarative::expert_router(true).unwrap();
    assert_eq!(fresh.classify("I broke my leg").await.unwrap(), Category::Medical);
    let fresh = expert_router_declarative::expert_router(true).unwrap();
    assert_eq!(fresh.expert_router("I broke my leg").await.unwrap().as_deref(), Some(LEG));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_quickstart_returns_what_the_built_one_returns() {
    let topic = |agent: &AgentRef| agent.invoke().input("topic", "dragons");
    let built = topic(&quickstart::improve().unwrap()).await.unwrap();
    let declared_agents = quickstart_declarative::improver().unwrap();
    let declared = topic(declared_agents.improve_agent()).await.unwrap();
    assert_eq!(built.output(), Some(&json!("dragons: draft 3")));
    assert_same_run(&declared, &built).await;
    assert_eq!(declared.state().get("revision"), Some(&json!(3)));
    assert_eq!(quickstart_declarative::run().await.unwrap(), quickstart::run().await.unwrap());

    let fresh = quickstart_declarative::improver().unwrap();
    assert_eq!(fresh.improve("dragons").await.unwrap(), "dragons: draft 3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_evening_planner_returns_what_the_built_one_returns() {
    let mood = |agent: &AgentRef| agent.invoke().input("mood", "romantic");
    let built = mood(&evening_planner::evening_planner(true).unwrap()).await.unwrap();
    let declared_agents = evening_planner_declarative::evening_planner(true).unwrap();
    let declared = mood(declared_agents.evening_planner_agent()).await.unwrap();
    assert_eq!(built.output().and_then(Value::as_array).map(Vec::len), Some(3));
    // The two experts run at the same time: their steps come in either order.
    assert_same_concurrent_run(&declared, &built).await;

    let fresh = evening_planner_declarative::evening_planner(true).unwrap();
    let plans = fresh.evening_planner("romantic").await.unwrap();
    assert_eq!(
        plans[0],
        evening_planner_declarative::Plan { movie: "Casablanca".into(), meal: "Oysters with champagne".into() }
    );
    let fresh = evening_planner_declarative::evening_planner(true).unwrap();
    assert_eq!(fresh.movie_expert("romantic").await.unwrap(), ["Casablanca", "Before Sunrise", "La La Land"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_horoscope_mapper_returns_what_the_built_one_returns() {
    let persons = json!(horoscope_mapper_declarative::persons());
    let built =
        horoscope_mapper::batch_horoscopes(true).unwrap().invoke().input("persons", persons.clone()).await.unwrap();
    let declared_agents = horoscope_mapper_declarative::astrology(true).unwrap();
    let declared = declared_agents.batch_horoscopes_agent().invoke().input("persons", persons).await.unwrap();
    assert_eq!(built.output().and_then(Value::as_array).map(Vec::len), Some(3));
    assert_same_run(&declared, &built).await;

    let fresh = horoscope_mapper_declarative::astrology(true).unwrap();
    let horoscopes = fresh.batch_horoscopes(horoscope_mapper_declarative::persons()).await.unwrap();
    assert_eq!(horoscopes[1], "Luigi, a pisces dream points to an old friend; call them before Friday.");
}

const REVIEW: &str = "The screen is gorgeous and setup took two minutes, though the box was dented.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_sentiment_voting_returns_what_the_built_one_returns() {
    let text = |agent: &AgentRef| agent.invoke().input("text", REVIEW);
    let built = text(&sentiment_voting::council(true).unwrap()).await.unwrap();
    let declared_agents = sentiment_voting_declarative::council(true).unwrap();
    let declared = text(declared_agents.sentiment_agent()).await.unwrap();
    assert_eq!(built.output(), Some(&json!("POSITIVE")));
    // The voters run at the same time: their steps come in any order.
    assert_same_concurrent_run(&declared, &built).await;
    assert_eq!(declared.state().get("vote2"), Some(&json!("POSITIVE")));

    let fresh = sentiment_voting_declarative::council(true).unwrap();
    assert_eq!(fresh.sentiment(REVIEW).await.unwrap(), Sentiment::Positive);
    let fresh = sentiment_voting_declarative::council(true).unwrap();
    assert_eq!(fresh.feedback(REVIEW).await.unwrap(), Sentiment::Neutral);
}

const QUESTION: &str = "Is it ethical to sell AI-generated art without saying that an AI made it?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_ethics_debate_returns_what_the_built_one_returns() {
    let question = |agent: &AgentRef| agent.invoke().input("question", QUESTION);
    let built = question(&ethics_debate::ethics_panel(true).unwrap()).await.unwrap();
    let declared_agents = ethics_debate_declarative::ethics_panel(true).unwrap();
    let declared = question(declared_agents.ethics_panel_agent()).await.unwrap();
    assert!(built.output().and_then(Value::as_str).unwrap().starts_with("The panel converged"));
    // The debaters of a round answer at the same time: their steps come in any order.
    assert_same_concurrent_run(&declared, &built).await;
    let rounds = steps(&declared).await.into_iter().filter(|(agent, _)| agent == "Utilitarian").count();
    assert_eq!(rounds, 2);

    let fresh = ethics_debate_declarative::ethics_panel(true).unwrap();
    assert!(fresh.ethics_panel(QUESTION).await.unwrap().starts_with("The panel converged"));
}

const MARIO: &str = "My name is Mario and my zodiac sign is pisces";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_goap_horoscope_returns_what_the_built_one_returns() {
    let prompt = |agent: &AgentRef| agent.invoke().input("prompt", MARIO);
    let built = prompt(&goap_horoscope::astrologer(true).unwrap()).await.unwrap();
    let declared_agents = goap_horoscope_declarative::astrologer(true).unwrap();
    let declared = prompt(declared_agents.astrologer_agent()).await.unwrap();
    assert!(built.output().and_then(Value::as_str).unwrap().starts_with("Mario (pisces)\nHoroscope: "));
    assert_same_run(&declared, &built).await;
    let names: Vec<String> = steps(&declared).await.into_iter().map(|(agent, _)| agent).collect();
    assert_eq!(names, ["person", "sign", "horoscope", "story", "writer", "astrologer"]);

    let fresh = goap_horoscope_declarative::astrologer(true).unwrap();
    assert_eq!(fresh.astrologer(MARIO).await.unwrap(), built.output().and_then(Value::as_str).unwrap());
    let fresh = goap_horoscope_declarative::astrologer(true).unwrap();
    assert_eq!(fresh.sign(MARIO).await.unwrap(), Sign::Pisces);
}

const ORDER: &str = "ACME Corp orders 1000 widgets, to be delivered in Turin.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_order_approval_suspends_and_resumes_like_the_built_one() {
    // Each suspends at the manager's approval, then resumes from its store with the answer.
    async fn approve(first: &AgentRef, again: &AgentRef) -> (RunOutcome, RunOutcome) {
        let store = MemoryStore::new();
        let request = first.invoke().memory_id("order-1").store(store.clone()).input("order", ORDER);
        let suspended = request.await.unwrap();
        let done = again.resume("order-1").store(store).answer("manager-approval", "approved").await.unwrap();
        (suspended, done)
    }
    let (built_suspended, built) =
        approve(&order_approval::workflow(true).unwrap(), &order_approval::workflow(true).unwrap()).await;
    // The builder's store serves the typed calls only: these runs are given theirs by `approve`.
    let unused = MemoryStore::new();
    let (first, again) = (
        order_approval_declarative::order_desk(true, &unused).unwrap(),
        order_approval_declarative::order_desk(true, &unused).unwrap(),
    );
    let (declared_suspended, declared) = approve(first.order_workflow_agent(), again.order_workflow_agent()).await;

    assert_eq!(declared_suspended.pending(), built_suspended.pending());
    assert_eq!(declared_suspended.pending()[0].prompt, "Ship 1000 widgets to ACME Corp? Answer approved or rejected.");
    assert_eq!(built.output(), Some(&json!("SHIPPED 1000 widgets to ACME Corp")));
    assert_same_run(&declared, &built).await;
    assert_eq!(
        declared.state().get("details"),
        Some(&json!({"customer": "ACME Corp", "item": "widgets", "quantity": 1000}))
    );

    // The typed call of a workflow with a human step ends suspended, naming the pending response; its run is
    // checkpointed in the builder's store under the `#[memory_id]` argument, and resumes from there.
    let store = MemoryStore::new();
    let fresh = order_approval_declarative::order_desk(true, &store).unwrap();
    match fresh.order_workflow("order-2", ORDER).await {
        Err(Stop::Suspended(pending)) => assert_eq!(pending[0].id, "manager-approval"),
        other => panic!("expected a suspension, got {other:?}"),
    }
    let again = order_approval_declarative::order_desk(true, &store).unwrap();
    let done = again.order_workflow_agent().resume("order-2").store(store).answer("manager-approval", "rejected");
    assert_eq!(done.await.unwrap().output(), Some(&json!("HELD: rejected")));
}

const TRANSFER: &str = "Transfer 100 EUR from Mario's account to Georgios' one";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_bank_returns_what_the_built_one_returns_over_its_own_ledger() {
    let built_ledger = supervisor_bank::ledger();
    let built = supervisor_bank::bank(true, &built_ledger).unwrap().invoke().input("request", TRANSFER).await.unwrap();
    let ledger = supervisor_bank_declarative::ledger();
    let declared_agents = supervisor_bank_declarative::bank(true, &ledger).unwrap();
    let declared = declared_agents.bank_agent().invoke().input("request", TRANSFER).await.unwrap();
    assert_eq!(built.output(), Some(&json!("Transferred 100 EUR (115.00 USD) from Mario to Georgios.")));
    assert_same_run(&declared, &built).await;
    // The bank agents answered the supervisor without writing a state key; the ledger they share moved.
    assert_eq!(declared.state().get("withdraw"), None);
    let balances = ledger.lock().unwrap().clone();
    assert_eq!(balances, *built_ledger.lock().unwrap());
    assert_eq!(balances.get("Mario"), Some(&885.0));
    assert_eq!(balances.get("Georgios"), Some(&1115.0));

    // The typed call returns the summary; the ledger given to this builder is the one that changes.
    let other = supervisor_bank_declarative::ledger();
    let fresh = supervisor_bank_declarative::bank(true, &other).unwrap();
    assert_eq!(fresh.bank(TRANSFER).await.unwrap(), "Transferred 100 EUR (115.00 USD) from Mario to Georgios.");
    assert_eq!(other.lock().unwrap().get("Mario"), Some(&885.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_research_returns_what_the_built_one_returns() {
    let topic = |agent: &AgentRef| agent.invoke().input("topic", "black holes");
    let built = topic(&p2p_research::research(true).unwrap()).await.unwrap();
    let declared_agents = p2p_research_declarative::research(true).unwrap();
    let declared = topic(declared_agents.research_agent()).await.unwrap();
    assert_eq!(
        built.output(),
        Some(&json!("Primordial black holes from the early universe make up part of dark matter."))
    );
    // Peers run as their inputs change, concurrently: the validator may answer either critique first, so the
    // runs agree on the result and the state, and on every step but the validator's.
    assert_eq!(declared.output(), built.output());
    let state = |outcome: &RunOutcome| {
        let mut state = outcome.state().to_map();
        state.retain(|key, _| !key.starts_with(agentic::engine::CONTEXT_PREFIX));
        state
    };
    assert_eq!(state(&declared), state(&built));
    let others = |steps: Vec<(String, Value)>| {
        let mut steps: Vec<String> = steps
            .into_iter()
            .filter(|(agent, _)| agent != "validator")
            .map(|(agent, output)| format!("{agent} {output}"))
            .collect();
        steps.sort();
        steps
    };
    assert_eq!(others(steps(&declared).await), others(steps(&built).await));
    assert_eq!(declared.state().get("score"), Some(&json!(0.9)));
    // The scorer runs once per critique: a new hypothesis alone does not activate it.
    let scored = steps(&declared).await.into_iter().filter(|(agent, _)| agent == "scorer").count();
    assert_eq!(scored, 2);
    let scorer = &declared_agents.scorer_agent().spec().inputs;
    assert_eq!(scorer.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["critique"]);
    assert_eq!(scorer[0].value_type, ValueType::String);
}

const PATIENT: &str = "Ada, 34: headache and fever for two days; she takes ibuprofen for the pain.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_diagnosis_returns_what_the_built_one_returns_through_its_reviews() {
    // Runs to the goal, answering the reviews: first more symptoms, then an approval.
    async fn diagnose(agent: &AgentRef) -> (RunOutcome, Vec<String>) {
        let mut outcome = agent
            .invoke()
            .input("patient", PATIENT)
            .input("labResults", "CRP 25, ESR raised, white cells normal")
            .input("medications", "ibuprofen")
            .await
            .unwrap();
        let mut prompts = Vec::new();
        let mut answers = ["she also has a blocked nose and pain behind the cheeks", "approved"].into_iter();
        while outcome.is_suspended() {
            let pending = outcome.pending()[0].clone();
            prompts.push(pending.prompt);
            outcome = outcome.resume().answer(pending.id, answers.next().unwrap()).await.unwrap();
        }
        (outcome, prompts)
    }
    let (built, built_prompts) = diagnose(&blackboard_diagnosis::diagnostics(true).unwrap()).await;
    let declared_agents = blackboard_diagnosis_declarative::diagnostics(true).unwrap();
    let (declared, declared_prompts) = diagnose(declared_agents.diagnostics_agent()).await;
    assert_eq!(built.output(), Some(&json!("SINUSITIS")));
    assert_eq!(declared_prompts, built_prompts);
    assert_eq!(declared_prompts.len(), 2);
    assert_same_run(&declared, &built).await;
    assert_eq!(
        declared.state().get("symptoms"),
        Some(&json!(
            "headache, fever; on medication (ibuprofen); she also has a blocked nose and pain behind the cheeks"
        ))
    );
    // The drug check ran right after the symptoms: it is preferred when they mention a medication.
    let names: Vec<String> = steps(&declared).await.into_iter().map(|(agent, _)| agent).collect();
    assert_eq!(names[..2], ["symptoms", "drugs"]);
    assert_eq!(declared.state().get_as::<Diagnosis>("approvedDiagnosis").unwrap(), Some(Diagnosis::Sinusitis));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_trading_desk_returns_what_the_built_one_returns() {
    let market = |agent: &AgentRef| {
        agent
            .invoke()
            .input("marketData", "10-year yields up 80 basis points in a month; bond funds see record outflows")
            .input("portfolio", "60% bonds, 35% stocks, 5% cash")
    };
    let built = market(&bdi_trading::desk(true).unwrap()).await.unwrap();
    let declared_agents = bdi_trading_declarative::desk(true).unwrap();
    let declared = market(declared_agents.trading_agent()).await.unwrap();
    assert_eq!(built.output().and_then(|o| o.get("hedge")), Some(&json!("Buy put options on the main bond fund.")));
    assert_same_run(&declared, &built).await;
    let names: Vec<String> = steps(&declared).await.into_iter().map(|(agent, _)| agent).collect();
    assert_eq!(names, ["analysis", "recommend", "hedge", "default_hedge", "rebalance", "liquidity", "trading"]);

    // The typed call: the decision computed from the final state, without an output key.
    let fresh = bdi_trading_declarative::desk(true).unwrap();
    let decision = fresh.trading("yields up sharply", "60% bonds").await.unwrap();
    assert_eq!(decision.plan, "Move 20% from bonds to short-term treasuries and cash, keeping the puts.");
    assert_eq!(decision.liquidity, "5% cash covers three months of withdrawals: liquid enough.");
}

const BROKEN_LEG: &str = "I broke my leg, what should I do?";
const ACCIDENT: &str = "I broke my leg in a car accident caused by another driver: how should I take care of my \
                        leg, and can I sue the driver for damages?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_routers_return_what_the_built_ones_return() {
    let request = |agent: &AgentRef, text: &str| agent.invoke().input("request", text.to_string());
    let built = request(&decision_router::router(true).unwrap(), BROKEN_LEG).await.unwrap();
    let experts = decision_router_declarative::experts(true).unwrap();
    let declared = request(experts.expert_router_agent(), BROKEN_LEG).await.unwrap();
    assert_eq!(
        built.output(),
        Some(&json!("Keep the leg still and raised, and get an X-ray at an emergency room today."))
    );
    assert_same_run(&declared, &built).await;

    let built = request(&decision_router::multi_router(true).unwrap(), ACCIDENT).await.unwrap();
    let experts = decision_router_declarative::experts(true).unwrap();
    let declared = request(experts.multi_expert_router_agent(), ACCIDENT).await.unwrap();
    assert_eq!(built.output().and_then(Value::as_object).map(|m| m.len()), Some(2));
    // The fitting experts run at the same time: their steps come in either order.
    assert_same_concurrent_run(&declared, &built).await;

    let experts = decision_router_declarative::experts(true).unwrap();
    let answers = experts.multi_expert_router(ACCIDENT).await.unwrap();
    assert_eq!(answers.keys().collect::<Vec<_>>(), ["legal", "medical"]);
}
