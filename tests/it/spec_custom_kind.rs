//! A planner kind added by a program (`examples/round_robin.rs`: one file, one registration line), used from
//! specs: it runs, its fields are checked like a built-in kind's, bad registrations are refused, and a run
//! suspended inside it resumes from a store on disk at the exact turn.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use agentic::engine::PlannerFactory;
use agentic::prelude::*;
use agentic::spec::{FieldType, KindArgs, KindError, KindField, PlannerKind, Spec, register_kind};
use serde_json::json;

#[path = "../../examples/round_robin.rs"]
#[allow(dead_code)]
mod round_robin;

/// The room of the example with `extra` lines added to the `room` agent and `writers` as its agents.
fn room(writers: &str, extra: &str) -> String {
    format!(
        "version: 1\nroot: room\nagents:\n  room:\n    kind: round_robin\n    agents: {writers}\n{extra}    \
         output_key: draft\n  adjective:\n    kind: compute\n    inputs: [draft, round]\n    value: \"draft ~ ' \
         quick' ~ round\"\n    output_key: draft\n  ending:\n    kind: compute\n    inputs: [draft]\n    value: \
         \"draft ~ ' jumps.'\"\n    output_key: draft\n  editor:\n    kind: human\n    prompt: \"Edit: {{{{ draft \
         }}}}\"\n    output_key: draft\n"
    )
}

fn parse(text: &str) -> Spec {
    round_robin::register();
    Spec::parse(text, "room.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn errors(text: &str) -> String {
    round_robin::register();
    Spec::parse(text, "room.yaml").map(|_| ()).unwrap_err().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_kind_runs_its_spec() {
    assert_eq!(
        round_robin::run().await.unwrap(),
        "draft: \"A fox quick (round 1) jumps. quick (round 2)\"\nturns: adjective (root/0), ending (root/1), \
         adjective (root/0), room (root)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_cap_the_turns_and_the_round_is_bound_per_call() {
    let spec = parse(&room("[adjective, ending]", "    rounds: 3\n"));
    let outcome = spec.build().unwrap().root.invoke().input("draft", "A fox").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("A fox quick1 jumps. quick2 jumps. quick3 jumps.")));
    // `round` lives in each call's bindings, not in the run's state.
    assert_eq!(outcome.state().get("round"), None);
    let names: Vec<String> = outcome.history().await.unwrap().iter().map(|r| r.agent.clone()).collect();
    assert_eq!(names, ["adjective", "ending", "adjective", "ending", "adjective", "ending", "room"]);
    // The topology shows the kind and its settings, the default applied when the spec leaves it out.
    let topology = spec.build().unwrap().root.topology();
    assert_eq!(topology.spec.kind, "round_robin");
    assert_eq!(topology.details, json!({"rounds": 3}));
    assert_eq!(topology.binds, ["round"]);
    let defaulted = parse(&room("[adjective, ending]", "")).build().unwrap().root.topology();
    assert_eq!(defaulted.details, json!({"rounds": round_robin::DEFAULT_ROUNDS}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_stops_after_the_turn_that_makes_it_true() {
    let spec = parse(&room("[adjective, ending]", "    until: \"round == 2 and draft is endingwith('quick2')\"\n"));
    let outcome = spec.build().unwrap().root.invoke().input("draft", "A fox").await.unwrap();
    assert_eq!(outcome.output(), Some(&json!("A fox quick1 jumps. quick2")));
}

#[test]
fn its_fields_are_checked_where_they_are_written() {
    assert_eq!(
        errors(&room("[adjective, ending]", "    rounds: 0\n")),
        "room.yaml:7:13: agent `room`: field `rounds`: must be between 1 and 1000, found 0"
    );
    assert_eq!(
        errors(&room("[adjective, ending]", "    rounds: two\n")),
        "room.yaml:7:13: agent `room`: field `rounds`: expected an integer, found a string"
    );
    assert_eq!(
        errors(&room("[adjective, ending]", "    round: 2\n")),
        "room.yaml:7:5: agent `room`: unknown field `round` (did you mean `rounds`?), expected one of `kind`, \
         `description`, `inputs`, `output_key`, `optional`, `async`, `timeout_ms`, `budget`, `output`, `error_handler`, \
         `compensate_on_error`, `agents`, `rounds`, `until`"
    );
    assert_eq!(
        errors(&room("[adjective, writer]", "")),
        "room.yaml:6:25: agent `room`: unknown agent `writer`; defined agents: `adjective`, `editor`, `ending`, `room`"
    );
    assert_eq!(
        errors(&room("[adjective, ending]", "    until: \"draft ~\"\n")),
        "room.yaml:7:12: agent `room`: field `until`: invalid expression: syntax error: unexpected end of input, \
         expected expression"
    );
    let no_agents = room("[adjective]", "").replace("    agents: [adjective]\n", "");
    assert_eq!(errors(&no_agents), "room.yaml:5:5: agent `room`: missing field `agents` (a list of agent names)");
    // A misspelt kind is suggested among the registered ones too.
    assert!(errors(&room("[adjective]", "").replace("kind: round_robin", "kind: round_robn")).starts_with(
        "room.yaml:5:11: agent `room`: unknown kind `round_robn` (did you mean `round_robin`?), expected one of"
    ));
}

/// A descriptor with a given name and fields, for the registration checks.
struct Named(&'static str, &'static [KindField]);

impl PlannerKind for Named {
    fn name(&self) -> &str {
        self.0
    }

    fn fields(&self) -> &[KindField] {
        self.1
    }

    fn planner(&self, _args: &KindArgs) -> Result<PlannerFactory, String> {
        Ok(Arc::new(|| Box::new(agentic::planners::SequentialPlanner::default())))
    }
}

#[test]
fn a_registration_that_specs_could_not_use_is_refused() {
    round_robin::register();
    const AGENTS: &[KindField] = &[KindField::required("agents", FieldType::Agents)];
    let agents = AGENTS;
    assert_eq!(register_kind(Named("sequence", agents)), Err(KindError::Builtin { name: "sequence".into() }));
    assert_eq!(register_kind(Named("round_robin", agents)), Err(KindError::Duplicate { name: "round_robin".into() }));
    assert_eq!(
        register_kind(Named("Relay-Race", agents)).unwrap_err().to_string(),
        "planner kind `Relay-Race`: a kind's name is lowercase letters, digits and `_`, starting with a letter"
    );
    const RESERVED: &[KindField] = &[KindField::optional("output_key", FieldType::String)];
    let reserved = RESERVED;
    assert_eq!(
        register_kind(Named("relay", reserved)).unwrap_err().to_string(),
        "planner kind `relay`: field `output_key`: every composite takes it already"
    );
    const BACKWARDS: &[KindField] = &[KindField::optional("laps", FieldType::Integer { min: 5, max: 1 })];
    let backwards = BACKWARDS;
    assert_eq!(
        register_kind(Named("relay", backwards)).unwrap_err().to_string(),
        "planner kind `relay`: field `laps`: min 5 is above max 1"
    );
    const MIN_ON_NUMBER: &[KindField] = &[KindField::optional("laps", FieldType::Number).at_least(2)];
    let min_on_number = MIN_ON_NUMBER;
    assert_eq!(
        register_kind(Named("relay", min_on_number)).unwrap_err().to_string(),
        "planner kind `relay`: field `laps`: `at_least` applies to a list of agents only"
    );
    const RULE: &[KindField] = &[KindField::required("runner", FieldType::AgentOf("runners"))];
    const STRAY: &[KindField] =
        &[KindField::required("agents", FieldType::Agents), KindField::optional("rules", FieldType::List(RULE))];
    assert_eq!(
        register_kind(Named("relay", STRAY)).unwrap_err().to_string(),
        "planner kind `relay`: field `rules.runner`: `runners` is not an agent field of the kind"
    );
    const UNIQUE_AT_TOP: &[KindField] = &[KindField::required("title", FieldType::Name).unique()];
    assert_eq!(
        register_kind(Named("relay", UNIQUE_AT_TOP)).unwrap_err().to_string(),
        "planner kind `relay`: field `title`: `unique` applies to the fields of a list's entries only"
    );
    const BY_NAME_ON_ONE: &[KindField] = &[KindField::required("lead", FieldType::Agent).by_name()];
    assert_eq!(
        register_kind(Named("relay", BY_NAME_ON_ONE)).unwrap_err().to_string(),
        "planner kind `relay`: field `lead`: `by_name` applies to a list of agents only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_suspended_inside_the_kind_resumes_from_disk_at_the_same_turn() {
    let dir = tempfile::tempdir().unwrap();
    let text = room("[adjective, editor, ending]", "    rounds: 2\n");
    let first = {
        let store = SledStore::open(dir.path().join("runs")).unwrap();
        let root = parse(&text).build().unwrap().root;
        root.invoke().memory_id("custom-kind-resume").store(store).input("draft", "A fox").await.unwrap()
    };
    assert!(first.is_suspended());
    assert_eq!(first.state().get("draft"), Some(&json!("A fox quick1")));
    // A fresh build of the spec and a fresh store handle: the planner's state comes back from the journal.
    let store = SledStore::open(dir.path().join("runs")).unwrap();
    let root = parse(&text).build().unwrap().root;
    let second =
        root.resume("custom-kind-resume").store(store.clone()).answer("root/1", "A red fox quick1").await.unwrap();
    assert!(second.is_suspended());
    assert_eq!(second.state().get("draft"), Some(&json!("A red fox quick1 jumps. quick2")));
    let done = root.resume("custom-kind-resume").store(store).answer("root/1", "A red fox, quick2").await.unwrap();
    assert_eq!(done.output(), Some(&json!("A red fox, quick2 jumps.")));
    let names: Vec<String> = done.history().await.unwrap().iter().map(|r| r.agent.clone()).collect();
    assert_eq!(names, ["adjective", "editor", "ending", "adjective", "editor", "ending", "room"]);
}

/// A kind that shapes its composite itself (`build`), from outside the planners crate: it keeps the parts the
/// spec set (sub-agents, output key) and finishes them with its own planner, settings and bound key.
struct Relay;

impl PlannerKind for Relay {
    fn name(&self) -> &str {
        "relay_test"
    }

    fn fields(&self) -> &[KindField] {
        const FIELDS: &[KindField] = &[KindField::required("runners", FieldType::Agents).at_least(1)];
        FIELDS
    }

    fn build(
        &self,
        args: &KindArgs,
        mut parts: agentic::spec::CompositeParts,
    ) -> Result<AgentRef, agentic::engine::BuildError> {
        let legs = args.agents("runners").len();
        parts.set_binds(vec!["baton".to_string()]);
        parts
            .build_with(Arc::new(|| Box::new(agentic::planners::SequentialPlanner::default())), json!({ "legs": legs }))
    }
}

/// A kind that implements neither `planner` nor `build`.
struct Hollow;

impl PlannerKind for Hollow {
    fn name(&self) -> &str {
        "hollow_test"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_may_build_its_composite_itself_and_one_that_builds_nothing_says_so() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        register_kind(Relay).unwrap();
        register_kind(Hollow).unwrap();
    });
    let spec = Spec::parse(
        "version: 1\nroot: r\nagents:\n  r: { kind: relay_test, runners: [a, b], output_key: n }\n  a: { kind: compute, \
         value: 'n + 1', inputs: [n], output_key: n }\n  b: { kind: compute, value: 'n * 10', inputs: [n], output_key: n }\n",
        "relay.yaml",
    )
    .unwrap();
    let root = spec.build().unwrap().root;
    let topology = root.topology();
    assert_eq!((topology.details.clone(), topology.binds.clone()), (json!({"legs": 2}), vec!["baton".to_string()]));
    assert_eq!(root.invoke().input("n", 1).await.unwrap().output(), Some(&json!(20)));
    // Too few runners is located at the list.
    let empty = Spec::parse("version: 1\nroot: r\nagents:\n  r: { kind: relay_test, runners: [] }\n", "e.yaml");
    assert_eq!(
        empty.map(|_| ()).unwrap_err().to_string(),
        "e.yaml:4:35: agent `r`: field `runners`: needs at least 1 agent, found 0"
    );
    // A kind that makes no composite fails the build with what is missing.
    let hollow = Spec::parse("version: 1\nroot: h\nagents:\n  h: { kind: hollow_test }\n", "h.yaml").unwrap();
    assert_eq!(
        hollow.build().map(|_| ()).unwrap_err().to_string(),
        "h.yaml:4:3: agent `h`: kind `hollow_test`: implements neither `PlannerKind::planner` nor `PlannerKind::build`"
    );
}
