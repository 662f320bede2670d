//! The pattern planners, exactly as docs/semantics.md ("Pattern planners"): GOAP, P2P, blackboard, voting,
//! debate, BDI — every rule and error condition, a human in a blackboard (suspend, answer, resume), and for
//! every planner a crash after every journaled step, resumed from a copy of the journal: same result as an
//! uncrashed run, and no completed agent runs twice.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::agents::Human;
use agentic::engine::{CheckpointStore, PlannerState, RunImage};
use agentic::planners::{Bdi, Blackboard, Convergence, Debate, Desire, Goap, P2p, Vote, Voting, VotingStrategy};
use agentic::prelude::*;
use serde_json::{Map, Value, json};

// crashed_after, completions: a run's journal cut short by a crash, and the completions it holds.
use crate::common;

/// Counts executions per agent name, and records the order of executions.
#[derive(Clone, Default)]
struct Counters {
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    order: Arc<Mutex<Vec<String>>>,
}

type Body = dyn Fn(&Map<String, Value>) -> Value + Send + Sync;

impl Counters {
    fn get(&self, name: &str) -> usize {
        *self.counts.lock().unwrap().get(name).unwrap_or(&0)
    }

    fn all(&self) -> BTreeMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }

    fn order(&self) -> Vec<String> {
        self.order.lock().unwrap().clone()
    }

    /// An agent reading `inputs`, producing `f(inputs)` into `out` (none when empty), counting its executions.
    fn agent(
        &self,
        name: &str,
        inputs: &[&str],
        out: &str,
        f: impl Fn(&Map<String, Value>) -> Value + Send + Sync + 'static,
    ) -> AgentRef {
        self.slow_agent(name, inputs, out, 0, f)
    }

    /// As [`Counters::agent`], sleeping `ms` milliseconds first.
    fn slow_agent(
        &self,
        name: &str,
        inputs: &[&str],
        out: &str,
        ms: u64,
        f: impl Fn(&Map<String, Value>) -> Value + Send + Sync + 'static,
    ) -> AgentRef {
        let (counts, order) = (self.counts.clone(), self.order.clone());
        let n = name.to_string();
        let f: Arc<Body> = Arc::new(f);
        let b = FnAgent::builder(name, move |ctx| {
            let (counts, order, n, f) = (counts.clone(), order.clone(), n.clone(), f.clone());
            Box::pin(async move {
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                *counts.lock().unwrap().entry(n.clone()).or_default() += 1;
                order.lock().unwrap().push(n);
                Ok(f(ctx.inputs()))
            })
        })
        .inputs(inputs.iter().copied());
        if out.is_empty() { b.build() } else { b.output_key(out).build() }
    }
}

fn s(m: &Map<String, Value>, k: &str) -> String {
    match m.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn inputs(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn planner_message(e: AgentError) -> String {
    match e {
        AgentError::Planner { message, .. } => message,
        other => panic!("expected a planner error, got {other:?}"),
    }
}

fn build_message(e: agentic::engine::BuildError) -> String {
    match e {
        agentic::engine::BuildError::Invalid { message, .. } => message,
        other => panic!("expected an invalid-build error, got {other:?}"),
    }
}

/// Runs `build`'s system uncrashed with a memory store, then for every prefix of its journal (a crash after
/// step k) resumes a fresh copy of the system from a store holding only those k records and a run record
/// left `Running`: the result must be the same, and every agent must run exactly as often as in the
/// uncrashed run minus its completions already journaled (no completed agent runs twice).
async fn crash_at_every_step(name: &str, build: impl Fn(&Counters) -> AgentRef, input: Value, expected: Value) {
    let c = Counters::default();
    let store = MemoryStore::new();
    let out = build(&c).invoke().memory_id(name).inputs(inputs(input)).store(store.clone()).await.unwrap();
    assert_eq!(out.output(), Some(&expected), "{name}: uncrashed run");
    let full = c.all();
    let records = CheckpointStore::records(&store, name).await.unwrap();
    let run = CheckpointStore::run(&store, name).await.unwrap().unwrap();
    assert!(records.len() > 2, "{name}: journaled {} steps", records.len());
    for k in 1..=records.len() {
        let (id, copy) = common::crashed_after(&run, &records, k).await;
        let c2 = Counters::default();
        let out = build(&c2).resume(id.clone()).store(copy).await.unwrap();
        assert_eq!(out.output(), Some(&expected), "{name}: resumed after step {k}");
        for (agent, total) in &full {
            let journaled = common::completions(&records[..k], agent);
            assert_eq!(c2.get(agent) + journaled, *total, "{name}: `{agent}` after a crash at step {k}");
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// GOAP

/// The horoscope system of the reference, declared in a scrambled order, plus an agent unrelated to the goal.
fn horoscope(c: &Counters) -> AgentRef {
    let horoscope = c.agent("horoscope", &["person", "sign"], "horoscope", |m| {
        json!(format!("{} the {}: a lucky day", s(m, "person"), s(m, "sign")))
    });
    let person = c.agent("person", &["prompt"], "person", |m| json!(s(m, "prompt").split(' ').next().unwrap_or("")));
    let sign = c.agent("sign", &["prompt"], "sign", |m| json!(s(m, "prompt").rsplit(' ').next().unwrap_or("")));
    let writer = c.agent("writer", &["person", "horoscope", "story"], "writeup", |m| {
        json!(format!("{} | {} | {}", s(m, "person"), s(m, "horoscope"), s(m, "story")))
    });
    let story = c.agent("story", &["person", "horoscope"], "story", |m| json!(format!("story of {}", s(m, "person"))));
    let weather = c.agent("weather", &["city"], "forecast", |_| json!("sunny"));
    Goap::builder()
        .name("astrologer")
        .sub_agents([horoscope, person, sign, writer, weather, story])
        .output_key("writeup")
        .build()
        .unwrap()
}

#[tokio::test]
async fn goap_runs_the_shortest_plan_in_dependency_order_ignoring_unrelated_keys() {
    let c = Counters::default();
    let out = horoscope(&c).invoke().input("prompt", "Mario pisces").input("city", "Rome").await.unwrap();
    assert_eq!(
        out.output(),
        Some(&json!("Mario | Mario the pisces: a lucky day | story of Mario")),
        "the goal is the output key"
    );
    assert_eq!(c.order(), ["person", "sign", "horoscope", "story", "writer"]);
    assert_eq!(c.get("weather"), 0, "an agent off the path never runs, even when its inputs are present");
}

#[tokio::test]
async fn goap_starts_from_the_keys_present_and_prefers_the_shorter_producer() {
    let c = Counters::default();
    let out = horoscope(&c).invoke().input("prompt", "Mario pisces").input("horoscope", "given").await.unwrap();
    assert_eq!(out.output(), Some(&json!("Mario | given | story of Mario")));
    assert_eq!(c.order(), ["person", "story", "writer"], "keys present are not produced again");

    // `summary` can come from `long` (needs `draft`, itself produced from `topic`) or from `short` (needs
    // `topic` only): the shorter plan wins even though `long` is declared first.
    let c = Counters::default();
    let long = c.agent("long", &["draft"], "summary", |_| json!("long"));
    let draft = c.agent("draft", &["topic"], "draft", |_| json!("draft"));
    let short = c.agent("short", &["topic"], "summary", |_| json!("short"));
    let g = Goap::builder().sub_agents([long, draft, short]).output_key("summary").build().unwrap();
    let out = g.invoke().input("topic", "rust").await.unwrap();
    assert_eq!(out.output(), Some(&json!("short")));
    assert_eq!(c.order(), ["short"]);
}

#[tokio::test]
async fn goap_with_the_goal_present_is_done_at_once_and_without_a_path_fails() {
    let c = Counters::default();
    let out = horoscope(&c).invoke().input("prompt", "Mario pisces").input("writeup", "already").await.unwrap();
    assert_eq!(out.output(), Some(&json!("already")));
    assert!(c.order().is_empty(), "nothing runs when the goal is present");

    let c = Counters::default();
    let err = horoscope(&c).invoke().input("city", "Rome").await.unwrap_err();
    assert_eq!(planner_message(err), "No path found for goal: writeup");
    assert!(c.order().is_empty());

    let none = Goap::builder().sub_agents([c.agent("a", &[], "a", |_| json!(1))]).build().unwrap_err();
    assert_eq!(build_message(none), "a goap composite needs an `output_key`: it is the goal");
}

#[tokio::test]
async fn goap_resumes_after_a_crash_at_every_step() {
    crash_at_every_step(
        "goap",
        horoscope,
        json!({"prompt": "Mario pisces"}),
        json!("Mario | Mario the pisces: a lucky day | story of Mario"),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------------------
// P2P

/// The research system of the reference with deterministic agents: the validator turns H1 into H2 and then
/// keeps it; the scorer scores the critique.
fn research(c: &Counters) -> AgentRef {
    let literature = c.agent("literature", &["topic"], "findings", |m| json!(format!("F({})", s(m, "topic"))));
    let hypothesis = c.agent("hypothesis", &["topic", "findings"], "hypothesis", |_| json!("H1"));
    let critic = c.agent("critic", &["hypothesis"], "critique", |m| json!(format!("C({})", s(m, "hypothesis"))));
    let validator = c.agent("validator", &["hypothesis", "critique"], "hypothesis", |m| {
        json!(if s(m, "hypothesis") == "H1" { "H2".to_string() } else { s(m, "hypothesis") })
    });
    let scorer =
        c.agent("scorer", &["critique"], "score", |m| json!(if s(m, "critique") == "C(H2)" { 0.9 } else { 0.5 }));
    P2p::builder()
        .name("research")
        .sub_agents([literature, hypothesis, critic, validator, scorer])
        .output_key("hypothesis")
        .build()
        .unwrap()
}

#[tokio::test]
async fn p2p_activates_agents_whose_inputs_changed_until_quiescence() {
    let c = Counters::default();
    let out = research(&c).invoke().input("topic", "black holes").await.unwrap();
    assert_eq!(out.output(), Some(&json!("H2")));
    assert_eq!(out.state().get("score"), Some(&json!(0.9)));
    // literature and hypothesis once; the critic for H1 and H2; the validator for (H1, C(H1)), (H2, C(H1))
    // and (H2, C(H2)); the scorer for C(H1) and C(H2). Re-writing H2 re-triggers nobody.
    let expected: BTreeMap<String, usize> =
        [("literature", 1), ("hypothesis", 1), ("critic", 2), ("validator", 3), ("scorer", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    assert_eq!(c.all(), expected);
}

/// A self-triggering counter: `tick` reads `n` and writes `n + 1`.
fn ticker(c: &Counters, max: Option<u32>, exit_at: Option<i64>) -> AgentRef {
    let tick = c.agent("tick", &["n"], "n", |m| json!(m["n"].as_i64().unwrap() + 1));
    let mut b = P2p::builder().sub_agents([tick]).output_key("n");
    if let Some(max) = max {
        b = b.max_invocations(max);
    }
    if let Some(at) = exit_at {
        b = b.exit_when(move |v| v.get("n").and_then(Value::as_i64).unwrap_or(0) >= at);
    }
    b.build().unwrap()
}

#[tokio::test]
async fn p2p_ends_on_the_exit_condition_or_after_max_invocations() {
    let c = Counters::default();
    let out = ticker(&c, None, None).invoke().input("n", 0).await.unwrap();
    assert_eq!(out.output(), Some(&json!(10)), "default max_invocations is 10");
    assert_eq!(c.get("tick"), 10);

    let c = Counters::default();
    let out = ticker(&c, Some(4), None).invoke().input("n", 0).await.unwrap();
    assert_eq!(out.output(), Some(&json!(4)));
    assert_eq!(c.get("tick"), 4, "max_invocations = N means at most N invocations");

    let c = Counters::default();
    let out = ticker(&c, None, Some(3)).invoke().input("n", 0).await.unwrap();
    assert_eq!(out.output(), Some(&json!(3)));
    assert_eq!(c.get("tick"), 3);

    let c = Counters::default();
    let out = ticker(&c, None, Some(3)).invoke().input("n", 5).await.unwrap();
    assert_eq!(out.output(), Some(&json!(5)), "an exit condition that holds at the start runs nothing");
    assert_eq!(c.get("tick"), 0);

    // The exit condition also sees the number of invocations started.
    let c = Counters::default();
    let tick = c.agent("tick", &["n"], "n", |m| json!(m["n"].as_i64().unwrap() + 1));
    let p = P2p::builder()
        .sub_agents([tick])
        .exit_condition(|_, invocations| Ok(invocations >= 2))
        .output_key("n")
        .build()
        .unwrap();
    assert_eq!(p.invoke().input("n", 0).await.unwrap().output(), Some(&json!(2)));
}

#[tokio::test]
async fn p2p_never_spins_when_nothing_is_activatable() {
    let c = Counters::default();
    let echo = c.agent("echo", &["x"], "x", |m| m["x"].clone());
    let waits = c.agent("waits", &["missing"], "y", |_| json!("never"));
    let p = P2p::builder().sub_agents([echo, waits]).output_key("y").build().unwrap();
    let out = p.invoke().input("x", "same").await.unwrap();
    assert_eq!(out.output(), Some(&Value::Null), "quiescence without a result");
    assert_eq!(c.get("echo"), 1, "re-writing an identical value triggers nobody");
    assert_eq!(c.get("waits"), 0);

    let c = Counters::default();
    let p = P2p::builder().sub_agents([c.agent("waits", &["missing"], "y", |_| json!(1))]).build().unwrap();
    assert_eq!(p.invoke().await.unwrap().output(), Some(&Value::Null), "nothing activatable at the start");
}

#[tokio::test]
async fn p2p_resumes_after_a_crash_at_every_step() {
    crash_at_every_step("p2p", research, json!({"topic": "black holes"}), json!("H2")).await;
}

// ---------------------------------------------------------------------------------------------------------
// Blackboard

fn diagnostics(c: &Counters) -> Vec<AgentRef> {
    vec![
        c.agent("symptoms", &["patient"], "symptoms", |m| json!(format!("{}: cough, medication", s(m, "patient")))),
        c.agent("lab", &["symptoms", "labResults"], "labAnalysis", |m| json!(format!("lab {}", s(m, "labResults")))),
        c.agent("drug", &["symptoms", "medications"], "drugInteraction", |_| json!("no interaction")),
        c.agent("diagnose", &["symptoms", "labAnalysis"], "diagnosis", |m| {
            json!(format!("flu ({})", s(m, "labAnalysis")))
        }),
    ]
}

fn patient() -> Map<String, Value> {
    inputs(json!({"patient": "Ada", "labResults": "CRP 12", "medications": "aspirin"}))
}

#[tokio::test]
async fn blackboard_activates_one_agent_per_step_in_declaration_order_until_the_goal() {
    let c = Counters::default();
    let b = Blackboard::builder().sub_agents(diagnostics(&c)).output_key("diagnosis").build().unwrap();
    let out = b.invoke().inputs(patient()).await.unwrap();
    assert_eq!(out.output(), Some(&json!("flu (lab CRP 12)")));
    assert_eq!(c.order(), ["symptoms", "lab", "drug", "diagnose"], "one at a time, declaration order");
}

#[tokio::test]
async fn blackboard_prefer_rules_come_before_declaration_order() {
    // Prefer the drug check when the symptoms mention medication, and the diagnosis as soon as possible.
    let c = Counters::default();
    let b = Blackboard::builder()
        .sub_agents(diagnostics(&c))
        .prefer("drug", |v| Ok(v.get("symptoms").and_then(Value::as_str).is_some_and(|s| s.contains("medication"))))
        .prefer_always("diagnose")
        .output_key("diagnosis")
        .build()
        .unwrap();
    let out = b.invoke().inputs(patient()).await.unwrap();
    assert_eq!(out.output(), Some(&json!("flu (lab CRP 12)")));
    assert_eq!(c.order(), ["symptoms", "drug", "lab", "diagnose"]);

    // A rule whose agent is not a candidate is skipped; one that holds ends the run early here.
    let c = Counters::default();
    let b = Blackboard::builder()
        .sub_agents(diagnostics(&c))
        .prefer("diagnose", |_| Ok(true))
        .output_key("diagnosis")
        .build()
        .unwrap();
    b.invoke().inputs(patient()).await.unwrap();
    assert_eq!(c.order(), ["symptoms", "lab", "diagnose"], "the drug check was never needed");

    let c = Counters::default();
    let err = Blackboard::builder().sub_agents(diagnostics(&c)).prefer_always("surgeon").build().unwrap_err();
    assert_eq!(
        build_message(err),
        "prefer rule names `surgeon`, which is not one of its agents (symptoms, lab, drug, diagnose)"
    );
}

#[tokio::test]
async fn blackboard_succeeds_at_quiescence_and_fails_at_max_invocations() {
    // Quiescence: no lab results, so nothing can produce a diagnosis; success without a result.
    let c = Counters::default();
    let b = Blackboard::builder().sub_agents(diagnostics(&c)).output_key("diagnosis").build().unwrap();
    let out = b.invoke().input("patient", "Ada").input("medications", "aspirin").await.unwrap();
    assert_eq!(out.output(), Some(&Value::Null));
    assert_eq!(c.order(), ["symptoms", "drug"]);

    // A custom goal.
    let c = Counters::default();
    let b = Blackboard::builder()
        .sub_agents(diagnostics(&c))
        .goal_when(|v| v.contains("labAnalysis"))
        .output_key("labAnalysis")
        .build()
        .unwrap();
    assert_eq!(b.invoke().inputs(patient()).await.unwrap().output(), Some(&json!("lab CRP 12")));
    assert_eq!(c.order(), ["symptoms", "lab"]);

    let c = Counters::default();
    let b =
        Blackboard::builder().sub_agents(diagnostics(&c)).max_invocations(3).output_key("diagnosis").build().unwrap();
    let err = b.invoke().inputs(patient()).await.unwrap_err();
    assert_eq!(planner_message(err), "maximum invocations (3) reached without satisfying goal");
    assert_eq!(c.order(), ["symptoms", "lab", "drug"]);

    // The default bound is 50.
    let c = Counters::default();
    let tick = c.agent("tick", &["n"], "n", |m| json!(m["n"].as_i64().unwrap() + 1));
    let b = Blackboard::builder().sub_agents([tick]).output_key("never").build().unwrap();
    let err = b.invoke().input("n", 0).await.unwrap_err();
    assert_eq!(planner_message(err), "maximum invocations (50) reached without satisfying goal");
    assert_eq!(c.get("tick"), 50);
}

/// A reviewer (a human) reads the diagnosis and writes `symptoms`: a rejection adds a symptom, which
/// re-triggers the diagnosis (and then the review); an approval repeats the symptoms, which triggers nobody.
fn reviewed_diagnostics(c: &Counters) -> AgentRef {
    let symptoms = c.agent("symptoms", &["patient"], "symptoms", |m| json!(format!("{}: headache", s(m, "patient"))));
    let diagnose = c.agent("diagnose", &["symptoms"], "diagnosis", |m| {
        json!(if s(m, "symptoms").contains("blurred vision") { "migraine" } else { "tension headache" })
    });
    let review = Human::builder("review", "Diagnosis: {{ diagnosis }}. Symptoms: {{ symptoms }}")
        .unwrap()
        .inputs(["diagnosis"])
        .response_id("review")
        .output_key("symptoms")
        .build();
    Blackboard::builder()
        .name("diagnostics")
        .sub_agents([symptoms, diagnose, review])
        .goal_when(|_| false) // run until the review triggers nothing more
        .output_key("diagnosis")
        .build()
        .unwrap()
}

#[tokio::test]
async fn blackboard_with_a_human_reviewer_suspends_and_a_rejection_retriggers_the_readers() {
    let c = Counters::default();
    let system = reviewed_diagnostics(&c);
    let store = MemoryStore::new();
    let first = system.invoke().input("patient", "Ada").store(store.clone()).await.unwrap();
    assert!(first.is_suspended());
    assert_eq!(first.pending()[0].id, "review");
    assert_eq!(first.pending()[0].prompt, "Diagnosis: tension headache. Symptoms: Ada: headache");

    // Rejection: the reviewer adds a symptom; the diagnosis runs again and the review asks again.
    let second = first.resume().answer("review", "Ada: headache, blurred vision").await.unwrap();
    assert!(second.is_suspended());
    assert_eq!(second.pending()[0].prompt, "Diagnosis: migraine. Symptoms: Ada: headache, blurred vision");
    assert_eq!(c.get("diagnose"), 2);

    // Approval: the symptoms are repeated unchanged, nothing is re-triggered, the blackboard is quiescent.
    let done = second.resume().answer("review", "Ada: headache, blurred vision").await.unwrap();
    assert_eq!(done.output(), Some(&json!("migraine")));
    assert_eq!(c.get("symptoms"), 1, "completed agents never run again on resume");
    assert_eq!(c.get("diagnose"), 2);
}

fn prefer_board(c: &Counters) -> AgentRef {
    Blackboard::builder()
        .name("board")
        .sub_agents(diagnostics(c))
        .prefer("drug", |v| Ok(v.contains("symptoms")))
        .output_key("diagnosis")
        .build()
        .unwrap()
}

#[tokio::test]
async fn blackboard_resumes_after_a_crash_at_every_step() {
    crash_at_every_step("blackboard", prefer_board, Value::Object(patient()), json!("flu (lab CRP 12)")).await;
}

// ---------------------------------------------------------------------------------------------------------
// Voting

/// Voters answering `labels` in order, each `delay` ms slower than the previous one reversed (the last
/// declared finishes first), all writing the shared key `vote`.
fn council(c: &Counters, labels: &[Value], strategy: VotingStrategy) -> AgentRef {
    let n = labels.len() as u64;
    let voters: Vec<AgentRef> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let l = l.clone();
            c.slow_agent(&format!("v{}", i + 1), &["text"], "vote", (n - i as u64) * 5, move |_| l.clone())
        })
        .collect();
    Voting::builder().name("council").sub_agents(voters).strategy(strategy).output_key("label").build().unwrap()
}

#[tokio::test]
async fn voting_majority_wins_and_ties_go_to_the_earliest_declared_voter() {
    let c = Counters::default();
    let v = council(&c, &[json!("POSITIVE"), json!("NEGATIVE"), json!("POSITIVE")], VotingStrategy::Majority);
    let out = v.invoke().input("text", "I love it").await.unwrap();
    assert_eq!(out.output(), Some(&json!("POSITIVE")));
    assert_eq!(out.state().get("label"), Some(&json!("POSITIVE")));
    assert_eq!(out.state().get("vote"), None, "voters sharing an output key do not write it");
    assert_eq!(c.order(), ["v3", "v2", "v1"], "all voters ran in parallel (the last declared finished first)");

    let c = Counters::default();
    let labels = [json!("NEUTRAL"), json!("POSITIVE"), json!("POSITIVE"), json!("NEUTRAL")];
    let v = council(&c, &labels, VotingStrategy::Majority);
    assert_eq!(v.invoke().input("text", "meh").await.unwrap().output(), Some(&json!("NEUTRAL")));
    let labels = [json!("POSITIVE"), json!("NEUTRAL"), json!("NEUTRAL"), json!("POSITIVE")];
    let v = council(&c, &labels, VotingStrategy::Majority);
    assert_eq!(v.invoke().input("text", "meh").await.unwrap().output(), Some(&json!("POSITIVE")));
}

#[tokio::test]
async fn voting_average_highest_and_custom() {
    let c = Counters::default();
    let v = council(&c, &[json!(0.25), json!(0.5), json!("0.75")], VotingStrategy::Average);
    assert_eq!(v.invoke().input("text", "t").await.unwrap().output(), Some(&json!(0.5)));

    let v = council(&c, &[json!(1), json!("high"), json!(3)], VotingStrategy::Average);
    let err = v.invoke().input("text", "t").await.unwrap_err();
    assert_eq!(planner_message(err), "voter `v2` returned \"high\", which is not a number (strategy average)");

    let v = council(&c, &[json!(3), json!(7), json!(5)], VotingStrategy::Highest);
    assert_eq!(v.invoke().input("text", "t").await.unwrap().output(), Some(&json!(7)));
    let v = council(&c, &[json!("apple"), json!("pear"), json!("fig")], VotingStrategy::Highest);
    assert_eq!(v.invoke().input("text", "t").await.unwrap().output(), Some(&json!("pear")));
    let v = council(&c, &[json!(3), json!("pear")], VotingStrategy::Highest);
    let err = v.invoke().input("text", "t").await.unwrap_err();
    assert!(planner_message(err).starts_with("voter `v2` returned \"pear\", which cannot be compared"));

    // The original's custom example: normalise to upper case, then count.
    let normalised = VotingStrategy::custom(|votes: &[Vote]| {
        let upper: Vec<Value> =
            votes.iter().map(|v| json!(v.value.as_str().unwrap_or_default().to_uppercase())).collect();
        let votes: Vec<Vote> =
            votes.iter().zip(upper).map(|(v, value)| Vote { voter: v.voter.clone(), value }).collect();
        VotingStrategy::Majority.aggregate(&votes)
    });
    let v = council(&c, &[json!("negative"), json!("Positive"), json!("POSITIVE")], normalised);
    assert_eq!(v.invoke().input("text", "t").await.unwrap().output(), Some(&json!("POSITIVE")));
}

#[tokio::test]
async fn voters_with_their_own_keys_write_them() {
    let c = Counters::default();
    let voters = [
        c.agent("a", &[], "vote_a", |_| json!("YES")),
        c.agent("b", &[], "vote_b", |_| json!("NO")),
        c.agent("c", &[], "vote_c", |_| json!("NO")),
    ];
    let v = Voting::builder().sub_agents(voters).output_key("decision").build().unwrap();
    let out = v.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("NO")));
    assert_eq!(out.state().get("vote_a"), Some(&json!("YES")));
    assert_eq!(out.state().get("vote_c"), Some(&json!("NO")));
}

fn numeric_council(c: &Counters) -> AgentRef {
    council(c, &[json!(2), json!(4), json!(9)], VotingStrategy::Average)
}

#[tokio::test]
async fn voting_resumes_after_a_crash_at_every_step() {
    crash_at_every_step("voting", numeric_council, json!({"text": "t"}), json!(5.0)).await;
}

// ---------------------------------------------------------------------------------------------------------
// Debate

/// `Alice` always agrees; `Bob` disagrees until he has read a context; the judge echoes the context.
fn panel(c: &Counters, max_rounds: Option<u32>, convergence: Convergence) -> AgentRef {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let alice = c.agent("Alice", &["question", "debateContext"], "alice", |_| json!("AGREE"));
    let bob = c.agent("Bob", &["question", "debateContext"], "bob", |m| {
        json!(if s(m, "debateContext").is_empty() { "DISAGREE" } else { "AGREE" })
    });
    let s2 = seen.clone();
    let judge = c.agent("Judge", &["debateContext"], "", move |m| {
        s2.lock().unwrap().push(s(m, "debateContext"));
        json!(format!("verdict on [{}]", s(m, "debateContext")))
    });
    let mut b = Debate::builder().name("panel").debaters([alice, bob]).judge(judge).convergence(convergence);
    if let Some(n) = max_rounds {
        b = b.max_rounds(n);
    }
    b.output_key("verdict").build().unwrap()
}

#[tokio::test]
async fn debate_rounds_until_unanimous_then_the_judge_decides() {
    let c = Counters::default();
    let out = panel(&c, None, Convergence::Unanimous).invoke().input("question", "Q?").await.unwrap();
    assert_eq!(out.output(), Some(&json!("verdict on [Alice: \"AGREE\"\nBob: \"AGREE\"]")));
    assert_eq!(out.state().get("verdict"), out.output());
    assert_eq!(out.state().get("debateContext"), None, "the context is a call binding, not state");
    assert_eq!((c.get("Alice"), c.get("Bob"), c.get("Judge")), (2, 2, 1), "converged in round 2");
}

#[tokio::test]
async fn debate_stops_at_max_rounds_and_supports_last_word_and_custom_convergence() {
    // Never unanimous: Carol always says NO.
    let c = Counters::default();
    let alice = c.agent("Alice", &["debateContext"], "", |_| json!("YES"));
    let carol = c.agent("Carol", &["debateContext"], "", |_| json!("NO"));
    let judge = c.agent("Judge", &["debateContext"], "", |m| json!(s(m, "debateContext")));
    let d = Debate::builder().debaters([alice, carol]).judge(judge).max_rounds(2).build().unwrap();
    let out = d.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("Alice: \"YES\"\nCarol: \"NO\"")));
    assert_eq!((c.get("Alice"), c.get("Carol"), c.get("Judge")), (2, 2, 1));

    // Default max_rounds is 3.
    let c = Counters::default();
    let d = Debate::builder()
        .debaters([c.agent("A", &[], "", |_| json!(1)), c.agent("B", &[], "", |_| json!(2))])
        .judge(c.agent("J", &["debateContext"], "", |m| json!(s(m, "debateContext"))))
        .build()
        .unwrap();
    assert_eq!(d.invoke().await.unwrap().output(), Some(&json!("A: \"1\"\nB: \"2\"")));
    assert_eq!(c.get("A"), 3);

    // Same last word, upper-cased, punctuation stripped: converged in round 1.
    let c = Counters::default();
    let d = Debate::builder()
        .debaters([
            c.agent("A", &[], "", |_| json!("It maximises welfare, so: AGREE.")),
            c.agent("B", &[], "", |_| json!("Duties are respected; agree!")),
        ])
        .judge(c.agent("J", &[], "", |_| json!("settled")))
        .convergence(Convergence::UnanimousLastWord)
        .build()
        .unwrap();
    assert_eq!(d.invoke().await.unwrap().output(), Some(&json!("settled")));
    assert_eq!(c.get("A"), 1);

    // Custom: converged when every answer contains AGREE (Bob's DISAGREE does, so round 1 suffices).
    let c = Counters::default();
    let custom = Convergence::custom(|answers| answers.iter().all(|a| a.as_str().is_some_and(|s| s.contains("AGREE"))));
    let out = panel(&c, None, custom).invoke().input("question", "Q?").await.unwrap();
    assert_eq!(out.output(), Some(&json!("verdict on [Alice: \"AGREE\"\nBob: \"DISAGREE\"]")));
    assert_eq!(c.get("Bob"), 1);
}

#[tokio::test]
async fn debate_needs_two_debaters_and_a_judge() {
    let c = Counters::default();
    let one = Debate::builder()
        .debaters([c.agent("A", &[], "", |_| json!(1))])
        .judge(c.agent("J", &[], "", |_| json!(1)))
        .build()
        .unwrap_err();
    assert_eq!(build_message(one), "a debate needs at least 2 debaters, found 1");
    let no_judge = Debate::builder()
        .debaters([c.agent("A", &[], "", |_| json!(1)), c.agent("B", &[], "", |_| json!(1))])
        .build()
        .unwrap_err();
    assert_eq!(build_message(no_judge), "a debate needs a judge");
}

fn unanimous_panel(c: &Counters) -> AgentRef {
    panel(c, None, Convergence::Unanimous)
}

#[tokio::test]
async fn debate_resumes_after_a_crash_at_every_step() {
    crash_at_every_step(
        "debate",
        unanimous_panel,
        json!({"question": "Q?"}),
        json!("verdict on [Alice: \"AGREE\"\nBob: \"AGREE\"]"),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------------------
// BDI

fn present(key: &'static str) -> impl Fn(&ScopeView) -> Result<bool, String> + Send + Sync + 'static {
    move |v| Ok(v.contains(key))
}

/// The trading system of the reference: analysis (two agents), hedging (higher priority, achievable only on
/// a SELL recommendation), rebalancing and liquidity.
fn trading(c: &Counters) -> AgentRef {
    let analysis =
        c.agent("analysis", &["marketData"], "marketAnalysis", |m| json!(format!("A({})", s(m, "marketData"))));
    let recommend = c.agent("recommend", &["marketAnalysis"], "recommendation", |_| json!("SELL"));
    let hedge = c.agent("hedge", &["marketAnalysis"], "hedgingStrategy", |_| json!("puts"));
    let rebalance = c.agent("rebalance", &["marketAnalysis", "hedgingStrategy"], "rebalancingPlan", |m| {
        json!(format!("rebalance with {}", s(m, "hedgingStrategy")))
    });
    let liquidity = c.agent("liquidity", &["portfolio"], "liquidityAssessment", |_| json!("liquid"));
    Bdi::builder()
        .name("trading")
        .desire(Desire::of_keys("analyze market", 1, "marketData", "recommendation", [analysis, recommend]))
        .desire(Desire::new("hedge risks", 2, present("hedgingStrategy"), [hedge]).achievable(|v| {
            Ok(v.get("recommendation").and_then(Value::as_str).is_some_and(|r| r == "SELL" || r == "STRONG_SELL"))
        }))
        .desire(Desire::of_keys("rebalance portfolio", 1, "recommendation", "rebalancingPlan", [rebalance]))
        .desire(Desire::of_keys("maintain liquidity", 1, "portfolio", "liquidityAssessment", [liquidity]))
        .output_key("rebalancingPlan")
        .build()
        .unwrap()
}

#[tokio::test]
async fn bdi_pursues_the_highest_priority_achievable_desire() {
    let c = Counters::default();
    let out = trading(&c).invoke().input("marketData", "bonds").input("portfolio", "60/40").await.unwrap();
    assert_eq!(out.output(), Some(&json!("rebalance with puts")));
    // Analysis first (priority tie with liquidity: first declared), then hedging (priority 2, achievable on
    // SELL), then rebalancing and liquidity in declaration order.
    assert_eq!(c.order(), ["analysis", "recommend", "hedge", "rebalance", "liquidity"]);

    let c = Counters::default();
    let out = trading(&c).invoke().input("weather", "rain").await.unwrap();
    assert_eq!(out.output(), Some(&Value::Null), "nothing achievable: done at once");
    assert!(c.order().is_empty());
}

/// `report` (priority 1) runs r1, r2, r3; r1 raises an alarm, which makes `alarm` (priority 5) achievable.
fn alarmed(c: &Counters, max: Option<u32>) -> AgentRef {
    let r1 = c.agent("r1", &[], "alarm", |_| json!(true));
    let r2 = c.agent("r2", &[], "part2", |_| json!("p2"));
    let r3 = c.agent("r3", &["part2"], "report", |m| json!(format!("report after {}", s(m, "part2"))));
    let handle = c.agent("handle", &["alarm"], "handled", |_| json!("handled"));
    let mut b = Bdi::builder()
        .desire(Desire::new("report", 1, present("report"), [r1, r2, r3]))
        .desire(Desire::new("alarm", 5, present("handled"), [handle]).achievable(present("alarm")))
        .output_key("report");
    if let Some(m) = max {
        b = b.max_invocations(m);
    }
    b.build().unwrap()
}

#[tokio::test]
async fn bdi_preempts_for_a_higher_priority_desire_and_resumes_the_intention_at_its_next_agent() {
    let c = Counters::default();
    let out = alarmed(&c, None).invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!("report after p2")));
    assert_eq!(c.order(), ["r1", "handle", "r2", "r3"], "r1 is not run again after the preemption");
}

#[tokio::test]
async fn bdi_errors_exhausted_intention_and_max_invocations() {
    let c = Counters::default();
    let err = alarmed(&c, Some(2)).invoke().await.unwrap_err();
    assert_eq!(planner_message(err), "maximum invocations (2) reached while pursuing desire `report`");
    assert_eq!(c.order(), ["r1", "handle"]);

    let c = Counters::default();
    let lazy = Bdi::builder()
        .desire(Desire::new(
            "publish",
            1,
            present("published"),
            [c.agent("draft", &[], "draft", |_| json!("d")), c.agent("edit", &["draft"], "edited", |_| json!("e"))],
        ))
        .build()
        .unwrap();
    let err = lazy.invoke().await.unwrap_err();
    assert_eq!(planner_message(err), "desire `publish` is still not satisfied after all 2 agents of its intention ran");

    // One agent that does not satisfy its desire: exhausted after one invocation.
    let c = Counters::default();
    let tick = c.agent("tick", &["n"], "n", |m| json!(m["n"].as_i64().unwrap() + 1));
    let b = Bdi::builder()
        .desire(Desire::new("count", 1, |v| Ok(v.get("n").and_then(Value::as_i64).unwrap_or(0) >= 1000), [tick]))
        .build()
        .unwrap();
    let err = b.invoke().input("n", 0).await.unwrap_err();
    assert_eq!(planner_message(err), "desire `count` is still not satisfied after all 1 agents of its intention ran");
    assert_eq!(c.get("tick"), 1);

    // The default bound is 50.
    let c = Counters::default();
    let many: Vec<AgentRef> = (0..60).map(|i| c.agent(&format!("t{i}"), &[], "", |_| json!(null))).collect();
    let b = Bdi::builder().desire(Desire::new("long", 1, present("never"), many)).build().unwrap();
    let err = b.invoke().await.unwrap_err();
    assert_eq!(planner_message(err), "maximum invocations (50) reached while pursuing desire `long`");
    assert_eq!(c.order().len(), 50);
}

#[tokio::test]
async fn bdi_resumes_after_a_crash_at_every_step() {
    fn system(c: &Counters) -> AgentRef {
        trading(c)
    }
    crash_at_every_step(
        "bdi",
        system,
        json!({"marketData": "bonds", "portfolio": "60/40"}),
        json!("rebalance with puts"),
    )
    .await;
    crash_at_every_step("bdi-preempt", |c| alarmed(c, None), json!({}), json!("report after p2")).await;
}

// ---------------------------------------------------------------------------------------------------------
// Fan-out journaling: changes, not whole lists

/// A mapper over `n` names (at most `limit` at a time) whose sub-agent greets each one.
fn greeter(c: &Counters, limit: Option<usize>) -> AgentRef {
    let greet = c.agent("greet", &["name"], "greeting", |m| json!(format!("hi {}", s(m, "name"))));
    let b = ParallelMapper::builder().name("greeter").sub_agent(greet).items_key("names").output_key("greetings");
    match limit {
        Some(l) => b.max_concurrency(l).build().unwrap(),
        None => b.build().unwrap(),
    }
}

#[tokio::test]
async fn a_mapper_and_a_parallel_block_resume_after_a_crash_at_every_step() {
    let names = json!({"names": ["ann", "bo", "cy", "di", "ed", "flo", "gus"]});
    let greetings = json!(["hi ann", "hi bo", "hi cy", "hi di", "hi ed", "hi flo", "hi gus"]);
    crash_at_every_step("mapper-2", |c| greeter(c, Some(2)), names.clone(), greetings.clone()).await;
    crash_at_every_step("mapper-all", |c| greeter(c, None), names, greetings).await;
    fn block(c: &Counters) -> AgentRef {
        let agents: Vec<AgentRef> = (0..6)
            .map(|i| c.slow_agent(&format!("w{i}"), &[], &format!("k{i}"), 6 - i as u64, move |_| json!(i)))
            .collect();
        let sum = |v: &ScopeView| Ok(json!((0..6).filter_map(|i| v.get(&format!("k{i}"))?.as_i64()).sum::<i64>()));
        Parallel::builder().name("block").sub_agents(agents).output(sum).build().unwrap()
    }
    crash_at_every_step("parallel", block, json!({}), json!(15)).await;
}

#[tokio::test]
async fn a_fan_out_journals_each_completion_as_a_change_of_constant_size() {
    for k in [10usize, 400] {
        let c = Counters::default();
        let store = MemoryStore::new();
        let names: Vec<Value> = (0..k).map(|i| json!(format!("n{i}"))).collect();
        let id = format!("fan-{k}");
        let out = greeter(&c, None).invoke().memory_id(&id).input("names", names).store(store.clone()).await.unwrap();
        assert_eq!(out.output().and_then(Value::as_array).map(Vec::len), Some(k));
        let records = CheckpointStore::records(&store, &id).await.unwrap();
        let mapper_states: Vec<&PlannerState> =
            records.iter().filter_map(|r| r.planner_states.iter().find(|p| p.path == "root")).collect();
        assert_eq!(mapper_states.len(), k, "one record per completion");
        // The first completion journals the whole state and every call in flight; each later one a change.
        assert_eq!(mapper_states[0].inflight.len(), k - 1);
        assert!(mapper_states[0].state_patch.is_none() && mapper_states[0].inflight_change.is_none());
        for (j, ps) in mapper_states.iter().enumerate().skip(1) {
            let in_flight = k - 1 - j;
            if in_flight > 1 {
                let change = ps.inflight_change.as_ref().unwrap_or_else(|| panic!("K={k}, completion {j}: whole list"));
                assert!(change.started.is_empty(), "K={k}: nothing new to start");
                assert_eq!(change.ended.len(), 1, "K={k}, completion {j}");
                assert!(ps.inflight.is_empty());
            } else {
                // No longer than the change: the whole list.
                assert_eq!(
                    (ps.inflight_change.as_ref(), ps.inflight.len()),
                    (None, in_flight),
                    "K={k}, completion {j}"
                );
            }
            let ops = ps.state_patch.as_ref().and_then(Value::as_array).expect("a state patch");
            let expected_ops = if j + 1 == k { 3 } else { 2 };
            assert_eq!(ops.len(), expected_ops, "K={k}, completion {j}: {ops:?}");
            assert_eq!(ops[1], json!({"op": "replace", "path": "/completed", "value": j + 1}));
            assert_eq!(ps.state, Value::Null, "the whole state is not journaled again");
        }
        // Folded, the image is what a whole record per step would have said.
        let image = RunImage::fold(&id, &records).unwrap();
        assert!(image.planners.is_empty(), "the mapper completed");
        let k_minus_1 = RunImage::fold(&id, &records[..records.len() - 2]).unwrap();
        let mapper = &k_minus_1.planners["root"];
        assert_eq!(mapper.state["completed"], json!(k - 1));
        assert_eq!(mapper.inflight.len(), 1, "one call still in flight before the last completion");
        let done = mapper.state["results"].as_array().unwrap().iter().filter(|r| !r.is_null()).count();
        assert_eq!(done, k - 1);
    }
}
