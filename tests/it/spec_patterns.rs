//! The pattern kinds of the spec (`goap`, `p2p`, `blackboard`, `voting`, `debate`, `bdi`): fields and
//! defaults of SPEC.md, located errors (unknown fields, wrong types, unknown references, invalid
//! expressions), the one-parent rule across the new reference fields, and the example specs.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use agentic_spec::{AgentKind, FieldValue, Spec};
use serde_json::{Map, Value, json};

// errors, one, at: the errors of a spec that must not parse, and where they are.
use crate::common;
use common::{at, errors, one};

fn build(yaml: &str) -> agentic::engine::AgentRef {
    Spec::parse(yaml, "spec.yaml").unwrap_or_else(|e| panic!("{e}")).build().unwrap_or_else(|e| panic!("{e}")).root
}

async fn run(yaml: &str, inputs: Value) -> Value {
    let Value::Object(inputs) = inputs else { panic!("inputs must be an object") };
    let out = build(yaml).invoke().inputs(inputs).await.unwrap();
    out.output().cloned().unwrap_or(Value::Null)
}

const HEAD: &str = "version: 1\nroot: r\nagents:\n";

// ---------------------------------------------------------------------------------------------------------
// Running each kind

#[tokio::test]
async fn goap_plans_from_the_inputs_to_the_output_key() {
    let yaml = format!(
        "{HEAD}  r: {{ kind: goap, agents: [c, a, b, x], output_key: c }}\n  a: {{ kind: compute, value: 'n + 1', \
         output_key: m }}\n  b: {{ kind: compute, value: 'n * 10', output_key: k }}\n  c: {{ kind: compute, value: \
         'm + k', output_key: c }}\n  x: {{ kind: compute, value: 'unused', output_key: y }}\n"
    );
    assert_eq!(run(&yaml, json!({"n": 2})).await, json!(23));
    let err = build(&yaml).invoke().await.unwrap_err();
    assert!(err.to_string().contains("No path found for goal: c"), "{err}");
}

#[tokio::test]
async fn p2p_fields_and_defaults() {
    let yaml = format!(
        "{HEAD}  r: {{ kind: p2p, agents: [tick], output_key: n }}\n  tick: {{ kind: compute, value: 'n + 1', \
         output_key: n }}\n"
    );
    assert_eq!(run(&yaml, json!({"n": 0})).await, json!(10), "max_invocations defaults to 10");
    let yaml = format!(
        "{HEAD}  r: {{ kind: p2p, agents: [tick], max_invocations: 4, output_key: n }}\n  tick: {{ kind: compute, \
         value: 'n + 1', output_key: n }}\n"
    );
    assert_eq!(run(&yaml, json!({"n": 0})).await, json!(4));
    let yaml = format!(
        "{HEAD}  r: {{ kind: p2p, agents: [tick], exit_when: 'n >= 3 or invocations >= 5', output_key: n }}\n  \
         tick: {{ kind: compute, value: 'n + 1', output_key: n }}\n"
    );
    assert_eq!(run(&yaml, json!({"n": 0})).await, json!(3));
    assert_eq!(run(&yaml, json!({"n": -10})).await, json!(-5), "the exit condition sees `invocations`");
}

#[tokio::test]
async fn blackboard_goal_prefer_and_max_invocations() {
    let agents = "  s: { kind: compute, template: 'sym({{ p }})', output_key: s }\n  l: { kind: compute, template: \
                  'lab', inputs: [s], output_key: l }\n  d: { kind: compute, template: 'drug', inputs: [s], \
                  output_key: g }\n  dx: { kind: compute, template: 'dx({{ l }})', inputs: [s, l], output_key: dx \
                  }\n";
    let yaml = format!(
        "{HEAD}  r: {{ kind: blackboard, agents: [s, l, d, dx], output: 'l ~ \",\" ~ (g | default(\"-\")) ~ \",\" ~ dx', output_key: dx }}\n{agents}"
    );
    assert_eq!(run(&yaml, json!({"p": "x"})).await, json!("lab,drug,dx(lab)"), "declaration order: s, l, d, dx");
    let yaml = format!(
        "{HEAD}  r:\n    kind: blackboard\n    agents: [s, l, d, dx]\n    prefer:\n      - {{ agent: dx, when: 'l is \
         defined' }}\n    output: 'l ~ \",\" ~ (g | default(\"-\")) ~ \",\" ~ dx'\n    output_key: dx\n{agents}"
    );
    assert_eq!(run(&yaml, json!({"p": "x"})).await, json!("lab,-,dx(lab)"), "the rule skips the drug check");
    let yaml = format!(
        "{HEAD}  r: {{ kind: blackboard, agents: [s, l, d, dx], goal: 'g is defined', output_key: g }}\n{agents}"
    );
    assert_eq!(run(&yaml, json!({"p": "x"})).await, json!("drug"));
    let yaml = format!(
        "{HEAD}  r: {{ kind: blackboard, agents: [s, l, d, dx], max_invocations: 2, output_key: dx }}\n{agents}"
    );
    let err = build(&yaml).invoke().input("p", "x").await.unwrap_err();
    assert!(err.to_string().contains("maximum invocations (2) reached without satisfying goal"), "{err}");
}

#[tokio::test]
async fn voting_strategies() {
    let voters = "  a: { kind: compute, value: 'v1', output_key: vote }\n  b: { kind: compute, value: 'v2', output_key: \
                  vote }\n  c: { kind: compute, value: 'v3', output_key: vote }\n";
    let inputs = json!({"v1": 3, "v2": 9, "v3": 3});
    let yaml = format!("{HEAD}  r: {{ kind: voting, agents: [a, b, c], output_key: result }}\n{voters}");
    assert_eq!(run(&yaml, inputs.clone()).await, json!(3), "majority by default");
    let yaml = format!("{HEAD}  r: {{ kind: voting, agents: [a, b, c], strategy: average }}\n{voters}");
    assert_eq!(run(&yaml, inputs.clone()).await, json!(5.0));
    let yaml = format!("{HEAD}  r: {{ kind: voting, agents: [a, b, c], strategy: highest }}\n{voters}");
    assert_eq!(run(&yaml, inputs).await, json!(9));
}

#[tokio::test]
async fn debate_rounds_and_judge() {
    let yaml = format!(
        "{HEAD}  r: {{ kind: debate, debaters: [Ann, Ben], judge: J, output_key: verdict }}\n  Ann: {{ kind: \
         compute, value: \"'yes'\", inputs: [debateContext] }}\n  Ben: {{ kind: compute, value: \"'yes' if \
         debateContext else 'no'\" }}\n  J: {{ kind: compute, template: '{{{{ debateContext }}}}' }}\n"
    );
    assert_eq!(run(&yaml, json!({})).await, json!("Ann: \"yes\"\nBen: \"yes\""));
    let yaml = format!(
        "{HEAD}  r: {{ kind: debate, debaters: [Ann, Ben], judge: J, max_rounds: 1, convergence: \
         unanimous_last_word }}\n  Ann: {{ kind: compute, value: \"'so: AGREE'\", inputs: [debateContext] }}\n  \
         Ben: {{ kind: compute, value: \"'no' if debateContext else 'agree!'\" }}\n  J: {{ kind: compute, template: \
         '{{{{ debateContext }}}}' }}\n"
    );
    assert_eq!(run(&yaml, json!({})).await, json!("Ann: \"so: AGREE\"\nBen: \"agree!\""));
}

#[tokio::test]
async fn bdi_desires() {
    let yaml = format!(
        "{HEAD}  r:\n    kind: bdi\n    output_key: report\n    desires:\n      - name: report\n        \
         satisfied: 'report is defined'\n        agents: [r1, r2]\n      - {{ name: alarm, priority: 5, achievable: \
         'alarm is defined', satisfied: 'handled is defined', agents: [h] }}\n  r1: {{ kind: compute, value: \
         'true', inputs: [], output_key: alarm }}\n  r2: {{ kind: compute, template: 'report ({{{{ handled }}}})', \
         output_key: report }}\n  h: {{ kind: compute, value: \"'yes'\", inputs: [alarm], output_key: handled }}\n"
    );
    assert_eq!(run(&yaml, json!({})).await, json!("report (yes)"), "priority 0 by default, always achievable");
    let yaml = format!(
        "{HEAD}  r:\n    kind: bdi\n    max_invocations: 1\n    desires:\n      - {{ name: d, satisfied: 'false', \
         agents: [a, b] }}\n  a: {{ kind: compute, value: '1' }}\n  b: {{ kind: compute, value: '2' }}\n"
    );
    let err = build(&yaml).invoke().await.unwrap_err();
    assert!(err.to_string().contains("maximum invocations (1) reached while pursuing desire `d`"), "{err}");
}

// ---------------------------------------------------------------------------------------------------------
// Model and errors

#[test]
fn the_model_keeps_the_pattern_fields_with_their_defaults() {
    let yaml = format!(
        "{HEAD}  r: {{ kind: sequence, agents: [g, p, bb, v, d, bdi] }}\n  g: {{ kind: goap, agents: [a], output_key: \
         x }}\n  p: {{ kind: p2p, agents: [b] }}\n  bb: {{ kind: blackboard, agents: [c] }}\n  v: {{ kind: voting, \
         agents: [e] }}\n  d: {{ kind: debate, debaters: [f, h], judge: i }}\n  bdi: {{ kind: bdi, desires: [{{ name: \
         n, satisfied: 'true', agents: [j] }}] }}\n{}",
        ["a", "b", "c", "e", "f", "h", "i", "j"]
            .iter()
            .map(|n| format!("  {n}: {{ kind: compute, value: '1', output_key: x }}\n"))
            .collect::<String>()
    );
    let spec = Spec::parse(&yaml, "spec.yaml").unwrap();
    // A debate is described by its kind's descriptor: the model holds the fields given, the defaults apply
    // when it is built (below, in the topology).
    match &spec.agent("d").unwrap().kind {
        AgentKind::Planner(def) => {
            let given: Vec<&str> = def.fields.iter().map(|(f, _)| f.as_str()).collect();
            assert_eq!((def.kind.name(), given), ("debate", vec!["debaters", "judge"]));
        }
        other => panic!("{other:?}"),
    }
    match &spec.agent("bdi").unwrap().kind {
        AgentKind::Planner(def) => {
            let Some(FieldValue::List(desires)) = def.field("desires") else { panic!("desires: {def:?}") };
            let given: Vec<&str> = desires[0].fields.iter().map(|(f, _)| f.as_str()).collect();
            assert_eq!((def.kind.name(), given), ("bdi", vec!["name", "satisfied", "agents"]));
        }
        other => panic!("{other:?}"),
    }
    let refs: Vec<&str> = spec.agent("d").unwrap().kind.references().iter().map(|r| r.value.as_str()).collect();
    assert_eq!(refs, ["f", "h", "i"], "debaters, then the judge");
    assert!(spec.unreachable_agents().is_empty());
    let built = spec.build().unwrap();
    let topology = built.root.topology();
    let details = |name: &str| topology.walk().into_iter().find(|n| n.spec.name == name).unwrap().details.clone();
    assert_eq!(details("d"), json!({"debaters": 2, "max_rounds": 3, "convergence": "unanimous"}));
    assert_eq!(details("p")["max_invocations"], json!(10));
    assert_eq!(details("v")["strategy"], json!("majority"));
    assert_eq!(details("bb"), json!({"max_invocations": 50, "has_goal": false, "prefer": []}));
    assert_eq!(
        details("bdi"),
        json!({"max_invocations": 50, "desires": [{"name": "n", "priority": 0, "agents": [0]}]})
    );
}

#[test]
fn unknown_fields_and_wrong_types_are_located() {
    let e = one(&format!("{HEAD}  r: {{ kind: p2p, agents: [], max_invocation: 3 }}\n"));
    assert_eq!(at(&e), (4, 31, Some("r"), None));
    assert!(e.message.starts_with("unknown field `max_invocation` (did you mean `max_invocations`?)"), "{e}");

    let e = one(&format!("{HEAD}  r: {{ kind: voting, agents: [], strategy: median }}\n"));
    assert_eq!(at(&e), (4, 44, Some("r"), Some("strategy")));
    assert_eq!(e.message, "unknown strategy `median`, expected `majority`, `average` or `highest`");

    let e = one(&format!("{HEAD}  r: {{ kind: blackboard, agents: [], max_invocations: many }}\n"));
    assert_eq!(at(&e), (4, 55, Some("r"), Some("max_invocations")));
    assert_eq!(e.message, "expected an integer, found a string");

    let e = one(&format!(
        "{HEAD}  r: {{ kind: debate, debaters: [a, b], judge: c, convergence: majority }}\n{}",
        "  a: { kind: compute, value: '1' }\n  b: { kind: compute, value: '1' }\n  c: { kind: compute, value: '1' }\n"
    ));
    assert_eq!(at(&e), (4, 63, Some("r"), Some("convergence")));
    assert_eq!(e.message, "unknown convergence `majority`, expected `unanimous` or `unanimous_last_word`");

    let e =
        one(&format!("{HEAD}  r: {{ kind: bdi, desires: [{{ name: d, satisfied: 'x', agents: [], priorty: 1 }}] }}\n"));
    assert_eq!(at(&e), (4, 68, Some("r"), Some("desires[0]")));
    assert!(e.message.starts_with("unknown field `priorty` (did you mean `priority`?)"), "{e}");

    let e = one(&format!(
        "{HEAD}  r: {{ kind: bdi, desires: [{{ name: d, priority: high, satisfied: 'x', agents: [] }}] }}\n"
    ));
    assert_eq!(at(&e), (4, 50, Some("r"), Some("desires[0].priority")));
    assert_eq!(e.message, "expected an integer, found a string");

    let e = one(&format!("{HEAD}  r: {{ kind: bdi, desires: [{{ name: d, agents: [] }}] }}\n"));
    assert_eq!(at(&e), (4, 29, Some("r"), Some("desires[0]")));
    assert_eq!(e.message, "missing field `satisfied` (an expression)");

    let e = one(&format!(
        "{HEAD}  r: {{ kind: bdi, desires: [{{ name: d, satisfied: 'x', agents: [] }}, {{ name: d, satisfied: 'y', \
         agents: [] }}] }}\n"
    ));
    assert_eq!(at(&e), (4, 78, Some("r"), Some("desires[1].name")));
    assert_eq!(e.message, "duplicate name `d` (first defined at line 4, column 37)");

    let e = one(&format!(
        "{HEAD}  r: {{ kind: blackboard, agents: [a], prefer: [{{ agent: a, when: 'x', why: 1 }}] }}\n  a: {{ kind: compute, value: '1' }}\n"
    ));
    assert_eq!(at(&e), (4, 71, Some("r"), Some("prefer[0]")));
    assert!(e.message.starts_with("unknown field `why`"), "{e}");
}

#[test]
fn references_are_checked_and_count_for_the_one_parent_rule() {
    // Unknown debaters, judge, desire agents and prefer agents.
    let errs = errors(&format!(
        "{HEAD}  r: {{ kind: sequence, agents: [d, b, bb] }}\n  d: {{ kind: debate, debaters: [x1, y], judge: x2 \
         }}\n  y: {{ kind: compute, value: '1' }}\n  b: {{ kind: bdi, desires: [{{ name: n, satisfied: 'true', agents: \
         [x3] }}] }}\n  bb: {{ kind: blackboard, agents: [z], prefer: [{{ agent: y }}, {{ agent: x4 }}] }}\n  z: {{ kind: \
         compute, value: '1' }}\n"
    ));
    let shown: Vec<String> = errs.iter().map(|e| format!("{}:{} {}", e.line, e.column, e.message)).collect();
    assert_eq!(shown.len(), 5, "{shown:#?}");
    assert!(shown[0].starts_with("5:33 unknown agent `x1`"), "{shown:#?}");
    assert!(shown[1].starts_with("5:48 unknown agent `x2`"), "{shown:#?}");
    assert!(shown[2].starts_with("7:68 unknown agent `x3`"), "{shown:#?}");
    assert_eq!(shown[3], "8:58 agent `y` is not one of the agents of this blackboard (`z`)");
    assert!(shown[4].starts_with("8:72 unknown agent `x4`"), "{shown:#?}");

    // A debater used elsewhere has two parents; a judge that is also a debater is listed twice.
    let errs = errors(&format!(
        "{HEAD}  r: {{ kind: sequence, agents: [d, a] }}\n  d: {{ kind: debate, debaters: [a, b], judge: b }}\n  a: {{ \
         kind: compute, value: '1' }}\n  b: {{ kind: compute, value: '1' }}\n"
    ));
    let shown: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 2, "{shown:#?}");
    assert!(shown[0].contains("agent `a` is already used by `r`") || shown[0].contains("agent `b` is listed twice"));
    assert!(shown.iter().any(|s| s.contains("agent `b` is listed twice")), "{shown:#?}");

    // A desire containing the bdi itself is a cycle.
    let e = one(&format!("{HEAD}  r: {{ kind: bdi, desires: [{{ name: n, satisfied: 'true', agents: [r] }}] }}\n"));
    assert_eq!(e.message, "agent `r` cannot contain itself");
}

#[test]
fn debates_need_two_debaters_and_a_judge() {
    let e = one(&format!(
        "{HEAD}  r: {{ kind: debate, debaters: [a], judge: b }}\n  a: {{ kind: compute, value: '1' }}\n  b: {{ kind: compute, value: '1' }}\n"
    ));
    assert_eq!(at(&e), (4, 32, Some("r"), Some("debaters")));
    assert_eq!(e.message, "needs at least 2 agents, found 1");
    let e = one(&format!(
        "{HEAD}  r: {{ kind: debate, debaters: [a, b] }}\n  a: {{ kind: compute, value: '1' }}\n  b: {{ kind: compute, value: '1' }}\n"
    ));
    assert_eq!(at(&e), (4, 6, Some("r"), None));
    assert_eq!(e.message, "missing field `judge` (an agent name)");
}

#[test]
fn pattern_expressions_are_compiled_with_located_errors() {
    let errs = errors(&format!(
        "{HEAD}  r: {{ kind: sequence, agents: [p, bb, b] }}\n  p: {{ kind: p2p, agents: [], exit_when: 'n >' }}\n  bb: {{ \
         kind: blackboard, agents: [a], goal: 'x +', prefer: [{{ agent: a, when: '(' }}] }}\n  a: {{ kind: compute, \
         value: '1' }}\n  b: {{ kind: bdi, desires: [{{ name: n, achievable: 'a ==', satisfied: ')', agents: [] }}] \
         }}\n"
    ));
    let shown: Vec<(u64, Option<&str>, Option<&str>)> =
        errs.iter().map(|e| (e.line, e.agent.as_deref(), e.field.as_deref())).collect();
    assert_eq!(
        shown,
        [
            (5, Some("p"), Some("exit_when")),
            (6, Some("bb"), Some("goal")),
            (6, Some("bb"), Some("prefer[0].when")),
            (8, Some("b"), Some("desires[0].achievable")),
            (8, Some("b"), Some("desires[0].satisfied")),
        ]
    );
    assert!(errs.iter().all(|e| e.message.starts_with("invalid expression: ")), "{errs:?}");
}

// ---------------------------------------------------------------------------------------------------------
// The example specs

async fn run_example(file: &str, inputs: Value) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs").join(file);
    let spec = Spec::from_path(&path).unwrap_or_else(|e| panic!("{e}"));
    let root = spec.build().unwrap_or_else(|e| panic!("{e}")).root;
    let Value::Object(inputs) = inputs else { panic!("inputs") };
    let inputs: Map<String, Value> = inputs;
    root.invoke().inputs(inputs).await.unwrap().output().cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn the_example_specs_run() {
    assert_eq!(
        run_example("goap.yaml", json!({"prompt": "Mario pisces"})).await,
        json!("Mario | Mario the pisces: a lucky day | a story for Mario (Mario the pisces: a lucky day)")
    );
    assert_eq!(
        run_example("p2p.yaml", json!({"topic": "black holes"})).await,
        json!({"hypothesis": "H2", "score": 0.9})
    );
    assert_eq!(
        run_example("blackboard.yaml", json!({"patient": "Ada", "labResults": "CRP 12", "medications": "aspirin"}))
            .await,
        json!("flu (lab analysis of CRP 12)")
    );
    assert_eq!(run_example("voting.yaml", json!({"text": "I absolutely love this product"})).await, json!("POSITIVE"));
    assert_eq!(
        run_example("debate.yaml", json!({"question": "Ship on Friday?"})).await,
        json!(
            "Ship on Friday? Yes.\nOptimist: \"Shipping early helps users: AGREE\"\nSkeptic: \"Tests pass, so fine: \
             agree.\""
        )
    );
    assert_eq!(
        run_example("bdi.yaml", json!({"marketData": "bonds", "portfolio": "60/40"})).await,
        json!({"plan": "rebalance 60/40 with protective puts", "hedge": "protective puts", "liquidity": "60/40 is liquid"})
    );
}

/// A stored run resumes only on a workflow with the same fingerprint (SERVER.md §5): how a kind is built (by
/// its builder or through its descriptor) must not change the fingerprint of a spec that did not change. The
/// values were recorded before the planner kinds moved onto descriptors; editing one of these specs changes its
/// value on purpose. Each spec is built with its models replaced by scripted chat models (the first value) and,
/// when it builds as written (no `local` model), as written too (the second: a scripted decision model stays
/// one).
#[test]
fn the_fingerprints_of_unchanged_specs_stay_the_same() {
    let recorded = [
        ("examples/specs/debate.yaml", "b761c56db541068a", Some("b761c56db541068a")),
        ("examples/specs/voting.yaml", "ff3a21f9490ac960", Some("ff3a21f9490ac960")),
        ("examples/specs/goap.yaml", "0f7be6c2834b65c2", Some("0f7be6c2834b65c2")),
        ("examples/specs/p2p.yaml", "e9796105444bb70a", Some("e9796105444bb70a")),
        ("examples/specs/story.yaml", "0b32b69406218206", Some("0b32b69406218206")),
        ("examples/specs/evening_planner.yaml", "e9f381b9494167b7", None),
        ("examples/specs/style_review.yaml", "0ca2e040b16e20b1", Some("0ca2e040b16e20b1")),
        ("examples/specs/countdown.yaml", "a3f3c3b6ba928698", Some("a3f3c3b6ba928698")),
        ("examples/specs/bdi.yaml", "61dcf0b88cdcc599", Some("61dcf0b88cdcc599")),
        ("examples/specs/blackboard.yaml", "56f75e21bfc9a6b2", Some("56f75e21bfc9a6b2")),
        ("examples/specs/decision_router.yaml", "977d3861528edacc", None),
        ("examples/specs/expert_router.yaml", "01ae660c096de30a", None),
        ("examples/specs/horoscope_mapper.yaml", "e0375424e94b2699", None),
        ("examples/specs/supervisor.yaml", "32b0d221164fce18", None),
        ("examples/specs/ticket_triage.yaml", "667f87c1b14df98b", None),
        ("examples/specs/triage.yaml", "c5d2fb07a95d79f9", Some("c5d2fb07a95d79f9")),
        ("examples/specs/shout_all.json", "342e44683785eecc", Some("342e44683785eecc")),
        ("tests/fixtures/crash_mapper.yaml", "c28b106685bd9650", Some("c28b106685bd9650")),
        ("tests/fixtures/crash_async_mapper.yaml", "db788f1f7deaad42", Some("db788f1f7deaad42")),
        ("tests/fixtures/mapped_approval.yaml", "75345fe66b48f9ec", Some("75345fe66b48f9ec")),
        ("tests/fixtures/mapped_review.yaml", "d546a0cccff21017", Some("d546a0cccff21017")),
        ("tests/fixtures/kinds_settings.yaml", "fd9e3688ed4f3eeb", Some("31fc8a2798ad8483")),
    ];
    for (file, substituted, as_written) in recorded {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let spec = Spec::from_path(&path).unwrap();
        let models: Vec<(String, agentic::agents::model::ChatModelRef)> = spec
            .models()
            .iter()
            .map(|m| {
                (
                    m.name.clone(),
                    agentic::agents::model::ChatModelRef::new(agentic::agents::model::ScriptedModel::new(["x"])),
                )
            })
            .collect();
        let built = spec.build_with_models(models).unwrap();
        assert_eq!(built.root.topology().fingerprint(), substituted, "{file}");
        if let Some(fingerprint) = as_written {
            assert_eq!(spec.build().unwrap().root.topology().fingerprint(), fingerprint, "{file}, as written");
        }
    }
}
