//! Each example with a declarative twin returns, declared, exactly what its builder version returns with the
//! same scripted models: the same output, the same final state and the same steps. The story pipeline
//! (`examples/story_declarative.rs` against `examples/story.rs`), the style review (a loop in a sequence) and
//! the expert router (an enum-typed classifier and a conditional).

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

use agentic::prelude::*;
use ethics_debate_declarative::EthicsPanel;
use evening_planner_declarative::EveningPlanner;
use expert_router_declarative::{Category, ExpertRouter};
use goap_horoscope_declarative::{Astrologer, Sign};
use horoscope_mapper_declarative::Astrology;
use quickstart_declarative::Improver;
use sentiment_voting_declarative::{Sentiment, SentimentCouncil};
use serde_json::{Map, Value, json};
use story_declarative::NovelCreator;
use style_review_declarative::StyledWriter;

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
