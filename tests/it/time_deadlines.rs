//! Time (SPEC.md §3) in process: a human step's deadline and what happens at it (a default value, a
//! failure, an escalation), late answers refused, a `mode: pending` step timing out while it waits, and the
//! `wait` agent's durable timer (it suspends with its firing time and keeps it across resumptions).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use agentic::agents::Expression;
use agentic::agents::{Deadline, Human, HumanMode, OnTimeout, Wait};
use agentic::engine::{PendingKind, RespondError, StoreRef, respond};
use agentic::prelude::*;
use serde_json::json;

fn store() -> StoreRef {
    Arc::new(MemoryStore::new())
}

fn gate(deadline_ms: u64, on_timeout: OnTimeout) -> AgentRef {
    Human::builder("approver", "Approve?")
        .unwrap()
        .deadline(Deadline::After(Duration::from_millis(deadline_ms)))
        .on_timeout(on_timeout)
        .output_key("approval")
        .build()
}

fn flow(step: AgentRef) -> AgentRef {
    let after = FnAgent::builder("after", |ctx| {
        let approval = ctx.inputs()["approval"].clone();
        Box::pin(async move { Ok(json!(format!("done: {}", approval.as_str().unwrap_or("?")))) })
    })
    .inputs(["approval"])
    .output_key("result")
    .build();
    Sequence::builder().name("review").sub_agents([step, after]).output_key("result").build().unwrap()
}

#[tokio::test]
async fn a_default_value_answers_a_step_resumed_after_its_deadline_and_a_late_answer_is_refused() {
    let store = store();
    let flow = flow(gate(300, OnTimeout::Default(Expression::compile("'auto-approved'").unwrap())));
    let first = flow.invoke().store_ref(store.clone()).memory_id("d1").await.unwrap();
    let pending = &first.pending()[0];
    assert_eq!(pending.id, "root/0");
    let deadline = pending.deadline_ms.unwrap();
    assert_eq!(pending.on_timeout.as_deref(), Some("the default value `'auto-approved'` is used"));

    // Resumed before the deadline: asked again with the same deadline.
    let again = flow.resume("d1").store_ref(store.clone()).await.unwrap();
    assert_eq!(again.pending()[0].deadline_ms, Some(deadline));

    tokio::time::sleep(Duration::from_millis(350)).await;
    let late = respond(&store, "d1", Some("root/0"), json!("yes")).await.unwrap_err();
    assert!(matches!(late, RespondError::TimedOut { .. }), "{late:?}");
    assert_eq!(
        late.to_string(),
        format!(
            "run `d1`: response `root/0` timed out at {}: the answer is refused; the default value `'auto-approved'` is used",
            agentic::engine::rfc3339_ms(deadline)
        )
    );
    let done = flow.resume("d1").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("done: auto-approved")));
    // Once acted on, the question stays refused, saying so.
    let after = respond(&store, "d1", Some("root/0"), json!("yes")).await.unwrap_err();
    assert!(matches!(after, RespondError::TimedOut { .. }), "{after:?}");
}

#[tokio::test]
async fn an_answer_before_the_deadline_is_taken() {
    let store = store();
    let flow = flow(gate(60_000, OnTimeout::Fail));
    let first = flow.invoke().store_ref(store.clone()).memory_id("d2").await.unwrap();
    assert_eq!(first.pending()[0].on_timeout.as_deref(), Some("the step fails"));
    respond(&store, "d2", Some("root/0"), json!("yes")).await.unwrap();
    // A second answer before the run used the first is refused, and the first stays.
    let again = respond(&store, "d2", None, json!("no")).await.unwrap_err();
    assert!(matches!(again, RespondError::AlreadyAnswered { ref response_id, .. } if response_id == "root/0"));
    assert_eq!(again.to_string(), "run `d2`: response `root/0` is already answered (resume the run to use the answer)");
    let done = flow.resume("d2").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("done: yes")));
}

#[tokio::test]
async fn a_step_that_fails_at_its_deadline_fails_the_run_saying_so() {
    let store = store();
    let flow = flow(gate(100, OnTimeout::Fail));
    flow.invoke().store_ref(store.clone()).memory_id("d3").await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let err = flow.resume("d3").store_ref(store.clone()).await.unwrap_err();
    assert!(err.to_string().contains("the human step `root/0` timed out at "), "{err}");
    assert!(err.to_string().ends_with(" without an answer"), "{err}");
}

#[tokio::test]
async fn an_escalation_asks_the_other_step_with_its_own_deadline() {
    let store = store();
    let manager = Human::builder("manager", "The approver did not answer: approve?")
        .unwrap()
        .deadline(Deadline::After(Duration::from_secs(3600)))
        .into_human();
    let flow = flow(gate(100, OnTimeout::Escalate(Arc::new(manager))));
    let first = flow.invoke().store_ref(store.clone()).memory_id("d4").await.unwrap();
    assert_eq!(first.pending()[0].on_timeout.as_deref(), Some("it is escalated to `manager`"));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let escalated = flow.resume("d4").store_ref(store.clone()).await.unwrap();
    let asked = &escalated.pending()[0];
    assert_eq!((asked.id.as_str(), asked.agent.as_str()), ("root/0>manager", "approver"));
    assert_eq!(asked.prompt, "The approver did not answer: approve?");
    let hour_left = asked.deadline_ms.unwrap() - agentic::engine::now_ms();
    assert!((3_590_000..=3_600_000).contains(&hour_left), "{hour_left}");
    // Resumed again before the escalation is answered: still the escalation, not a new question.
    let again = flow.resume("d4").store_ref(store.clone()).await.unwrap();
    assert_eq!(again.pending()[0].id, "root/0>manager");
    respond(&store, "d4", Some("root/0>manager"), json!("manager says yes")).await.unwrap();
    let done = flow.resume("d4").store_ref(store.clone()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("done: manager says yes")));
}

#[tokio::test]
async fn a_pending_mode_step_takes_its_default_when_the_deadline_passes_while_it_waits() {
    let step = Human::builder("approver", "Approve?")
        .unwrap()
        .mode(HumanMode::Pending)
        .deadline(Deadline::After(Duration::from_millis(200)))
        .on_timeout(OnTimeout::Default(Expression::compile("'nobody answered'").unwrap()))
        .output_key("approval")
        .build();
    let started = std::time::Instant::now();
    let done = flow(step).invoke().store_ref(store()).await.unwrap();
    assert_eq!(done.output(), Some(&json!("done: nobody answered")));
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn a_deadline_at_a_time_from_the_state_must_be_an_rfc3339_time() {
    let step = Human::builder("approver", "Approve?")
        .unwrap()
        .deadline(Deadline::At(Expression::compile("due").unwrap()))
        .inputs(["due"])
        .output_key("approval")
        .build();
    let flow = flow(step);
    let asked = flow.invoke().input("due", "2099-01-01T00:00:00+01:00").await.unwrap();
    assert_eq!(asked.pending()[0].deadline_ms, Some(4_070_905_200_000));
    let err = flow.invoke().input("due", "next week").await.unwrap_err();
    assert!(err.to_string().contains("`next week` is not an RFC 3339 time"), "{err}");
}

#[tokio::test]
async fn a_wait_suspends_with_its_timer_keeps_it_across_resumptions_and_fires_once_due() {
    let store = store();
    let wait = Wait::duration("pause", Duration::from_millis(300)).output_key("waited").build();
    let flow = Sequence::builder().name("w").sub_agents([wait]).output_key("waited").build().unwrap();
    let first = flow.invoke().store_ref(store.clone()).memory_id("w1").await.unwrap();
    let timer = first.pending()[0].clone();
    assert_eq!((timer.id.as_str(), timer.kind), ("root/0", PendingKind::Wait));
    let fires_at = timer.deadline_ms.unwrap();
    assert_eq!(timer.prompt, format!("waits until {}", agentic::engine::rfc3339_ms(fires_at)));

    let refused = respond(&store, "w1", None, json!("now")).await.unwrap_err();
    assert!(matches!(refused, RespondError::NotAnswerable { .. }), "{refused:?}");

    let early = flow.resume("w1").store_ref(store.clone()).await.unwrap();
    assert_eq!(early.pending()[0].deadline_ms, Some(fires_at), "a resumption keeps the firing time");
    tokio::time::sleep(Duration::from_millis(350)).await;
    let fired = flow.resume("w1").store_ref(store.clone()).await.unwrap();
    let at = agentic::engine::parse_rfc3339_ms(fired.output().unwrap().as_str().unwrap()).unwrap();
    assert!(at / 1000 >= fires_at / 1000, "fired at {at}, due {fires_at}");
}

/// The one error of an invalid spec: (line, column, agent, field) and its message.
fn spec_error(yaml: &str) -> (u64, u64, Option<String>, Option<String>, String) {
    let errors = agentic::spec::Spec::parse(yaml, "spec.yaml").and_then(|s| s.build()).expect_err("an invalid spec");
    assert_eq!(errors.len(), 1, "{errors}");
    let e = &errors.errors[0];
    (e.line, e.column, e.agent.clone(), e.field.clone(), e.message.clone())
}

#[test]
fn time_fields_in_a_spec_are_checked_where_they_are_written() {
    let wait = "version: 1\nroot: w\nagents:\n  w: { kind: wait, for: 3 hours }\n";
    let (line, column, agent, field, message) = spec_error(wait);
    assert_eq!((line, column, agent.as_deref(), field.as_deref()), (4, 25, Some("w"), Some("for")));
    assert_eq!(message, "`3 hours` is not a duration: write <integer><unit>, unit ms, s, m, h or d (\"90s\", \"2h\")");

    let both = "version: 1\nroot: w\nagents:\n  w: { kind: wait, for: 3s, until: \"t\" }\n";
    assert_eq!(spec_error(both).4, "a wait takes either `for` (a duration) or `until` (a time), not both");

    let no_deadline = "version: 1\nroot: h\nagents:\n  h: { kind: human, prompt: ok?, on_timeout: fail }\n";
    let (.., field, message) = spec_error(no_deadline);
    assert_eq!((field.as_deref(), message.as_str()), (Some("on_timeout"), "`on_timeout` needs a `deadline`"));

    let unknown = "version: 1\nroot: h\nagents:\n  h: { kind: human, prompt: ok?, deadline: 1h, on_timeout: wait }\n";
    assert_eq!(
        spec_error(unknown).4,
        "unknown `on_timeout` `wait`: expected `fail`, `{default: <expression>}` or `{escalate: <name of a human agent>}`"
    );

    let not_human = "version: 1\nroot: m\nagents:\n  m: { kind: sequence, agents: [h, c] }\n  \
                     h: { kind: human, prompt: ok?, deadline: 1h, on_timeout: { escalate: c } }\n  \
                     c: { kind: compute, value: \"1\" }\n";
    let (line, _, agent, field, message) = spec_error(not_human);
    assert_eq!((line, agent.as_deref(), field.as_deref()), (5, Some("h"), Some("on_timeout")));
    assert_eq!(message, "`on_timeout` escalates to `c`, a compute agent: it must name a human agent");
}

#[tokio::test]
async fn a_spec_escalates_a_timed_out_step_to_another_human_agent() {
    let yaml = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [ask], output_key: answer }\n  \
                ask: { kind: human, prompt: ok?, deadline: 50ms, on_timeout: { escalate: boss }, output_key: answer }\n  \
                boss: { kind: human, prompt: \"nobody answered: ok?\", deadline: 1h }\n";
    let built = agentic::spec::Spec::parse(yaml, "spec.yaml").unwrap().build().unwrap();
    let store = store();
    let first = built.root.invoke().store_ref(store.clone()).memory_id("e1").await.unwrap();
    assert_eq!(first.pending()[0].on_timeout.as_deref(), Some("it is escalated to `boss`"));
    tokio::time::sleep(Duration::from_millis(80)).await;
    let escalated = built.root.resume("e1").store_ref(store.clone()).await.unwrap();
    assert_eq!(escalated.pending()[0].id, "root/0>boss");
    assert_eq!(escalated.pending()[0].prompt, "nobody answered: ok?");
    let done = built.root.resume("e1").store_ref(store).answer("root/0>boss", "fine").await.unwrap();
    assert_eq!(done.output(), Some(&json!("fine")));
}

#[tokio::test]
async fn an_escalation_chain_goes_down_one_step_at_a_time_and_ends_with_the_last_answer_or_default() {
    let yaml = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [clerk], output_key: answer }\n  \
                clerk: { kind: human, prompt: c?, response_id: clerk, deadline: 50ms, on_timeout: { escalate: lead }, output_key: answer }\n  \
                lead: { kind: human, prompt: l?, deadline: 50ms, on_timeout: { escalate: boss } }\n  \
                boss: { kind: human, prompt: b?, deadline: 50ms, on_timeout: { default: \"'boss-default'\" } }\n";
    let spec = agentic::spec::Spec::parse(yaml, "spec.yaml").unwrap();
    assert!(spec.unreachable_agents().is_empty(), "escalation targets are reached: {:?}", spec.unreachable_agents());
    let built = spec.build().unwrap();
    for (run, answer, expected) in [("c1", Some("boss says yes"), "boss says yes"), ("c2", None, "boss-default")] {
        let store = store();
        let mut ids = Vec::new();
        let mut outcome = built.root.invoke().store_ref(store.clone()).memory_id(run).await.unwrap();
        while outcome.is_suspended() {
            let id = outcome.pending()[0].id.clone();
            ids.push(id.clone());
            outcome = match (id.as_str(), answer) {
                // The boss answers at once, before its deadline.
                ("clerk>lead>boss", Some(a)) => {
                    built.root.resume(run).store_ref(store.clone()).answer(id.clone(), a).await.unwrap()
                }
                // Nobody answers: past the deadline, the next step down the chain is asked.
                _ => {
                    tokio::time::sleep(Duration::from_millis(70)).await;
                    built.root.resume(run).store_ref(store.clone()).await.unwrap()
                }
            };
            assert!(ids.len() <= 3, "asked {ids:?}");
        }
        let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
        assert_eq!(asked, ["clerk", "clerk>lead", "clerk>lead>boss"], "{run}");
        assert_eq!(outcome.output(), Some(&json!(expected)), "{run}: asked {asked:?}");
    }
}

#[test]
fn a_time_written_wrong_says_what_is_wrong_with_it() {
    let until = "version: 1\nroot: w\nagents:\n  w: { kind: wait, until: 2s }\n";
    assert_eq!(spec_error(until).4, "`until` takes a time; a duration goes in `for` (`for: 2s`)");
    let month = "version: 1\nroot: h\nagents:\n  h: { kind: human, prompt: ok?, deadline: \"2026-13-01T00:00:00Z\" }\n";
    let (.., field, message) = spec_error(month);
    assert_eq!(field.as_deref(), Some("deadline"));
    assert!(message.starts_with("`2026-13-01T00:00:00Z` is not an RFC 3339 time (input is out of range)"), "{message}");
    let long = "version: 1\nroot: h\nagents:\n  h: { kind: human, prompt: ok?, deadline: 99999999999999999999d }\n";
    assert_eq!(spec_error(long).4, "the duration `99999999999999999999d` is too long");
}
