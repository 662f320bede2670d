//! Every supported kind of the spec (SPEC.md §1) parses, builds with the Rust builders and runs with the
//! exact expected result; common fields reach the built agents' metadata.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic_engine::{AgentRef, RunResult, TopologyNode};
use agentic_spec::{AgentKind, ComputeBody, FieldValue, ModelProvider, Spec};
use serde_json::{Map, Value, json};

fn build(yaml: &str) -> AgentRef {
    let spec = Spec::parse(yaml, "test.yaml").unwrap_or_else(|e| panic!("spec should parse:\n{e}"));
    spec.build().unwrap_or_else(|e| panic!("spec should build:\n{e}")).root
}

async fn run(yaml: &str, inputs: Value) -> Value {
    let root = build(yaml);
    let Value::Object(inputs) = inputs else { panic!("inputs must be an object") };
    let outcome = root.invoke().inputs(inputs).await.unwrap_or_else(|e| panic!("run failed: {e}"));
    match outcome.result {
        RunResult::Completed(v) => v,
        other => panic!("expected a completed run, got {other:?}"),
    }
}

async fn run_state(yaml: &str, inputs: Map<String, Value>) -> (Value, Value) {
    let outcome = build(yaml).invoke().inputs(inputs).await.unwrap_or_else(|e| panic!("run failed: {e}"));
    (outcome.output().cloned().unwrap_or(Value::Null), Value::Object(outcome.state().to_map()))
}

#[tokio::test]
async fn compute_value_and_template() {
    let yaml = r#"
version: 1
root: greet
agents:
  greet: { kind: compute, template: "Hello, {{ name }}! {{ n * 2 }}", output_key: greeting }
"#;
    assert_eq!(run(yaml, json!({"name": "Ada", "n": 21})).await, json!("Hello, Ada! 42"));

    let yaml = r#"
version: 1
root: total
agents:
  total: { kind: compute, value: "{ 'sum': a + b, 'items': [a, b] }" }
"#;
    assert_eq!(run(yaml, json!({"a": 2, "b": 3.5})).await, json!({"sum": 5.5, "items": [2, 3.5]}));
}

#[tokio::test]
async fn sequence_runs_in_order_and_output_expression_combines() {
    let yaml = r#"
version: 1
root: story
agents:
  story:
    kind: sequence
    agents: [draft, shout]
    output: "draft_text ~ ' / ' ~ loud"
    output_key: final
  draft: { kind: compute, template: "once upon a time, {{ topic }}", output_key: draft_text }
  shout: { kind: compute, value: "draft_text | upper", output_key: loud }
"#;
    let mut inputs = Map::new();
    inputs.insert("topic".into(), json!("a dragon"));
    let (out, state) = run_state(yaml, inputs).await;
    assert_eq!(out, json!("once upon a time, a dragon / ONCE UPON A TIME, A DRAGON"));
    // The output expression's value is also written to `output_key`.
    assert_eq!(state["final"], out);
    assert_eq!(state["loud"], json!("ONCE UPON A TIME, A DRAGON"));
}

#[tokio::test]
async fn sequence_result_defaults_to_output_key_then_null() {
    let yaml = r#"
version: 1
root: s
agents:
  s: { kind: sequence, agents: [a], output_key: x }
  a: { kind: compute, value: "7", output_key: x }
"#;
    assert_eq!(run(yaml, json!({})).await, json!(7));
    let yaml = r#"
version: 1
root: s
agents:
  s: { kind: sequence, agents: [a] }
  a: { kind: compute, value: "7", output_key: x }
"#;
    assert_eq!(run(yaml, json!({})).await, Value::Null);
    let yaml = "version: 1\nroot: s\nagents:\n  s: { kind: sequence, agents: [] }\n";
    assert_eq!(run(yaml, json!({})).await, Value::Null);
}

const LOOP: &str = r#"
version: 1
root: improve
agents:
  improve:
    kind: loop
    agents: [scorer, editor]
    exit_when: "score >= 0.8"
    test_exit_at_loop_end: AT_END
    output: "{ 'score': score, 'edits': edits }"
  scorer: { kind: compute, value: "(score | default(0)) + 0.3", inputs: [], output_key: score }
  editor: { kind: compute, value: "(edits | default(0)) + 1", inputs: [], output_key: edits }
"#;

#[tokio::test]
async fn loop_checks_exit_after_every_agent_by_default() {
    // Stops in iteration 3 right after the scorer: the editor ran 2 times.
    let out = run(&LOOP.replace("AT_END", "false"), json!({})).await;
    assert_eq!(out["edits"], json!(2));
    assert!((out["score"].as_f64().unwrap_or_default() - 0.9).abs() < 1e-9, "{out}");
}

#[tokio::test]
async fn loop_checks_exit_at_loop_end_when_asked() {
    // Stops at the end of iteration 3: the editor ran 3 times.
    let out = run(&LOOP.replace("AT_END", "true"), json!({})).await;
    assert_eq!(out["edits"], json!(3));
}

#[tokio::test]
async fn loop_sees_the_iteration_and_honours_max_iterations() {
    let yaml = r#"
version: 1
root: l
agents:
  l:
    kind: loop
    agents: [inc]
    exit_when: "iteration >= 4"
    test_exit_at_loop_end: true
    output_key: n
  inc: { kind: compute, value: "n + 1", output_key: n }
"#;
    assert_eq!(run(yaml, json!({"n": 0})).await, json!(4));

    let yaml = r#"
version: 1
root: l
agents:
  l: { kind: loop, agents: [inc], max_iterations: 5, output_key: n }
  inc: { kind: compute, value: "n + 1", output_key: n }
"#;
    assert_eq!(run(yaml, json!({"n": 10})).await, json!(15));

    // Default max_iterations is 10.
    let yaml = "version: 1\nroot: l\nagents:\n  l: { kind: loop, agents: [inc], output_key: n }\n  \
                inc: { kind: compute, value: \"n + 1\", output_key: n }\n";
    assert_eq!(run(yaml, json!({"n": 0})).await, json!(10));
}

#[tokio::test]
async fn parallel_runs_all_and_output_combines() {
    let yaml = r#"
version: 1
root: both
agents:
  both:
    kind: parallel
    agents: [left, right]
    max_concurrency: 1
    output: "left_out + right_out"
  left: { kind: compute, value: "x * 10", output_key: left_out }
  right: { kind: compute, value: "x + 1", output_key: right_out }
"#;
    assert_eq!(run(yaml, json!({"x": 4})).await, json!(45));
}

#[tokio::test]
async fn parallel_mapper_maps_in_item_order() {
    let yaml = r#"
version: 1
root: all
agents:
  all: { kind: parallel_mapper, agent: shout, items: words, max_concurrency: 2, output_key: shouted }
  shout: { kind: compute, value: "word | upper ~ suffix", inputs: [word, suffix] }
"#;
    // item_key defaults to the mapped agent's first input (`word`).
    let out = run(yaml, json!({"words": ["a", "bc", "def", "g"], "suffix": "!"})).await;
    assert_eq!(out, json!(["A!", "BC!", "DEF!", "G!"]));
    assert_eq!(run(yaml, json!({"words": [], "suffix": "!"})).await, json!([]));

    let yaml = r#"
version: 1
root: all
agents:
  all: { kind: parallel_mapper, agent: square, items: numbers, item_key: n }
  square: { kind: compute, value: "n * n + offset" }
"#;
    assert_eq!(run(yaml, json!({"numbers": [1, 2, 3], "offset": 100})).await, json!([101, 104, 109]));
}

#[tokio::test]
async fn conditional_runs_every_matching_branch() {
    let yaml = r#"
version: 1
root: flow
agents:
  flow:
    kind: sequence
    agents: [route]
    output: "{ 'a': a | default('-'), 'b': b | default('-'), 'c': c | default('-') }"
  route:
    kind: conditional
    branches:
      - when: "x > 0"
        agents: [set_a, set_b]
      - when: "x > 10"
        agents: [set_c]
  set_a: { kind: compute, value: "'A' ~ x", output_key: a }
  set_b: { kind: compute, value: "a ~ 'B'", output_key: b }
  set_c: { kind: compute, value: "'C'", inputs: [], output_key: c }
"#;
    // Agents of one branch run in order (set_b reads set_a's output).
    assert_eq!(run(yaml, json!({"x": 5})).await, json!({"a": "A5", "b": "A5B", "c": "-"}));
    assert_eq!(run(yaml, json!({"x": 50})).await, json!({"a": "A50", "b": "A50B", "c": "C"}));
    // No match: done, no result.
    assert_eq!(run(yaml, json!({"x": -1})).await, json!({"a": "-", "b": "-", "c": "-"}));
}

#[tokio::test]
async fn nested_composites() {
    let yaml = r#"
version: 1
root: main
agents:
  main: { kind: sequence, agents: [prepare, repeat], output_key: total }
  prepare: { kind: compute, value: "0", inputs: [], output_key: total }
  repeat: { kind: loop, agents: [fan], max_iterations: 3 }
  fan: { kind: parallel, agents: [add, note] }
  add: { kind: compute, value: "total + step", output_key: total }
  note: { kind: compute, template: "step={{ step }}", output_key: last_note }
"#;
    assert_eq!(run(yaml, json!({"step": 5})).await, json!(15));
}

#[tokio::test]
async fn error_handler_fallback_substitutes_the_failed_result() {
    let yaml = r#"
version: 1
root: main
agents:
  main:
    kind: sequence
    agents: [risky, after]
    error_handler: { retry: 2, backoff_ms: 1, fallback: "'fallback for ' ~ who" }
    compensate_on_error: true
    output_key: done
  risky: { kind: compute, value: "missing_key + 1", inputs: [who], output_key: risky_out }
  after: { kind: compute, value: "risky_out ~ '!'", output_key: done }
"#;
    assert_eq!(run(yaml, json!({"who": "Ada"})).await, json!("fallback for Ada!"));
}

#[tokio::test]
async fn without_error_handler_the_failure_names_the_agent_path() {
    let yaml = r#"
version: 1
root: main
agents:
  main: { kind: sequence, agents: [ok, risky] }
  ok: { kind: compute, value: "1", inputs: [] }
  risky: { kind: compute, value: "missing_key + 1", inputs: [] }
"#;
    let err = build(yaml).invoke().await.expect_err("must fail");
    assert_eq!(err.agent_path(), Some("root/1"));
    assert!(err.to_string().contains("`risky` (root/1)"), "{err}");
}

#[tokio::test]
async fn optional_agent_is_skipped_when_an_input_is_missing() {
    let yaml = r#"
version: 1
root: main
agents:
  main: { kind: sequence, agents: [maybe, always], output: "{ 'maybe': maybe_out | default('skipped'), 'always': always_out }" }
  maybe: { kind: compute, value: "absent ~ '?'", optional: true, output_key: maybe_out }
  always: { kind: compute, value: "'ran'", inputs: [], output_key: always_out }
"#;
    assert_eq!(run(yaml, json!({})).await, json!({"maybe": "skipped", "always": "ran"}));
}

#[tokio::test]
async fn async_agent_output_is_awaited_by_its_reader() {
    let yaml = r#"
version: 1
root: main
agents:
  main: { kind: sequence, agents: [slow, reader], output_key: read }
  slow: { kind: compute, value: "x * 3", async: true, output_key: tripled }
  reader: { kind: compute, value: "tripled + 1", output_key: read }
"#;
    assert_eq!(run(yaml, json!({"x": 4})).await, json!(13));
}

fn node<'a>(root: &'a TopologyNode, name: &str) -> &'a TopologyNode {
    root.walk().into_iter().find(|n| n.spec.name == name).unwrap_or_else(|| panic!("no agent {name}"))
}

#[test]
fn common_fields_reach_the_built_metadata() {
    let yaml = r#"
version: 1
root: main
agents:
  main:
    kind: sequence
    description: the whole thing
    agents: [a, b]
    output_key: result
    timeout_ms: 2500
  a:
    kind: compute
    description: adds
    value: "x + y"
    output_key: sum
    optional: true
    async: true
    timeout_ms: 50
  b:
    kind: compute
    template: "{{ sum }} {{ unit }}"
    inputs: [sum]
"#;
    let topology = build(yaml).topology();
    assert_eq!(topology.spec.name, "main");
    assert_eq!(topology.spec.kind, "sequence");
    assert_eq!(topology.spec.description, "the whole thing");
    assert_eq!(topology.spec.output_key.as_deref(), Some("result"));
    assert_eq!(topology.spec.timeout, Some(Duration::from_millis(2500)));
    let a = node(&topology, "a");
    assert_eq!(a.path, "root/0");
    assert_eq!(a.spec.kind, "compute");
    assert_eq!(a.spec.description, "adds");
    // Inferred inputs: the variables the expression uses.
    assert_eq!(a.spec.inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["x", "y"]);
    assert_eq!(a.spec.output_key.as_deref(), Some("sum"));
    assert!(a.spec.optional);
    assert!(a.spec.is_async);
    assert_eq!(a.spec.timeout, Some(Duration::from_millis(50)));
    // Explicit inputs replace the inferred ones.
    let b = node(&topology, "b");
    assert_eq!(b.spec.inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["sum"]);
    assert!(!b.spec.optional && !b.spec.is_async && b.spec.timeout.is_none());
}

#[tokio::test]
async fn json_specs_are_the_same_model() {
    let json_spec = r#"{
  "version": 1,
  "root": "main",
  "agents": {
    "main": {"kind": "sequence", "agents": ["a", "b"], "output_key": "b_out"},
    "a": {"kind": "compute", "value": "n * 2", "output_key": "a_out"},
    "b": {"kind": "compute", "template": "{{ a_out }} items", "output_key": "b_out"}
  }
}"#;
    let spec = Spec::parse(json_spec, "flow.json").expect("parses");
    assert_eq!(spec.name(), "flow");
    let outcome = spec.build().expect("builds").root.invoke().input("n", 21).await.expect("runs");
    assert_eq!(outcome.output(), Some(&json!("42 items")));
}

#[test]
fn name_defaults_to_the_file_stem_and_model_is_readable() {
    let yaml = r#"
version: 1
root: a
models:
  default: { provider: local }
  planner: { provider: openai, base_url: "http://127.0.0.1:8080/v1", model: gpt-4o-mini, api_key_env: OPENAI_API_KEY, temperature: 0.2, max_tokens: 256 }
  canned: { provider: scripted, replies: ["MEDICAL", "Rest and ice your leg.", 42], decisions: [1, "b"] }
agents:
  a: { kind: compute, value: "1" }
"#;
    let spec = Spec::parse(yaml, "dir/order-processing.yaml").expect("parses");
    assert_eq!(spec.name(), "order-processing");
    assert_eq!(spec.root(), "a");
    assert_eq!(spec.file(), "dir/order-processing.yaml");
    let models = spec.models();
    assert_eq!(models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["default", "planner", "canned"]);
    assert_eq!(models[0].provider, ModelProvider::Local { model_path: None });
    assert_eq!(
        models[1].provider,
        ModelProvider::OpenAi {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            model: Some("gpt-4o-mini".into()),
            api_key_env: Some("OPENAI_API_KEY".into()),
            api_key: None,
            temperature: Some(0.2),
            max_tokens: Some(256),
        }
    );
    assert_eq!(
        models[2].provider,
        ModelProvider::Scripted {
            replies: vec!["MEDICAL".into(), "Rest and ice your leg.".into(), "42".into()],
            decisions: vec![json!(1), json!("b")],
        }
    );
    let built = spec.build().expect("builds");
    assert_eq!(built.name, "order-processing");
    assert_eq!(built.models.len(), 3);

    let named =
        Spec::parse("version: 1\nname: custom\nroot: a\nagents:\n  a: { kind: compute, value: '1' }\n", "x.yml")
            .expect("parses");
    assert_eq!(named.name(), "custom");
}

#[test]
fn the_model_keeps_positions_and_fields() {
    let yaml = "version: 1\nroot: l\nagents:\n  l:\n    kind: loop\n    agents: [c]\n    exit_when: \"n > 2\"\n    \
                error_handler: { retry: 3 }\n    compensate_on_error: true\n  c: { kind: compute, value: \"n + 1\" }\n";
    let spec = Spec::parse(yaml, "m.yaml").expect("parses");
    let l = spec.agent("l").expect("l");
    assert_eq!((l.pos.line, l.pos.column), (4, 3));
    // A loop is described by its kind's descriptor: the fields given, located, in the kind's order.
    let AgentKind::Planner(def) = &l.kind else { panic!("not a described kind: {:?}", l.kind) };
    assert_eq!(def.kind.name(), "loop");
    let [(agents_field, FieldValue::Agents(agents)), (exit_field, FieldValue::Expression(exit_when))] =
        def.fields.as_slice()
    else {
        panic!("{:?}", def.fields)
    };
    assert_eq!((agents_field.as_str(), exit_field.as_str()), ("agents", "exit_when"));
    assert_eq!(agents[0].value, "c");
    assert_eq!((agents[0].pos.line, agents[0].pos.column), (6, 14));
    assert_eq!((exit_when.value.as_str(), exit_when.pos.line), ("n > 2", 7));
    // The defaults (10 iterations, the exit tested after every agent) apply when it is built.
    let details = spec.build().expect("builds").root.topology().details;
    assert_eq!(details["max_iterations"], serde_json::json!(10));
    assert_eq!(details["test_exit_at_loop_end"], serde_json::json!(false));
    let composite = l.composite.as_ref().expect("composite fields");
    assert!(composite.compensate_on_error);
    let handler = composite.error_handler.as_ref().expect("handler");
    assert_eq!((handler.retry, handler.backoff_ms, handler.fallback.is_none()), (3, 100, true));
    let c = spec.agent("c").expect("c");
    assert!(c.composite.is_none());
    assert!(matches!(&c.kind, AgentKind::Compute(ComputeBody::Value(v)) if v.value == "n + 1"));
    assert!(spec.unreachable_agents().is_empty());
}

#[test]
fn unreachable_agents_are_listed() {
    let yaml = "version: 1\nroot: a\nagents:\n  a: { kind: sequence, agents: [b] }\n  b: { kind: compute, value: '1' }\n  \
                orphan: { kind: compute, value: '2' }\n";
    let spec = Spec::parse(yaml, "u.yaml").expect("parses");
    assert_eq!(spec.unreachable_agents(), ["orphan"]);
}

#[test]
fn params_are_read_and_check_a_run_s_inputs() {
    use agentic_spec::ParamType;
    let spec = Spec::parse(
        "version: 1\nroot: a\nparams:\n  temperature: number\n  \
         n: { type: integer, default: 3, description: How many }\n  tags: array\n  cfg: { type: object, default: {} }\n  \
         ok: boolean\n  city: string\nagents:\n  a: { kind: compute, value: '1' }\n",
        "typed.yaml",
    )
    .unwrap();
    let params: Vec<(&str, ParamType, Option<&Value>, Option<&str>)> =
        spec.params().iter().map(|p| (p.name.as_str(), p.ty, p.default.as_ref(), p.description.as_deref())).collect();
    assert_eq!(
        params,
        [
            ("temperature", ParamType::Number, None, None),
            ("n", ParamType::Integer, Some(&json!(3)), Some("How many")),
            ("tags", ParamType::Array, None, None),
            ("cfg", ParamType::Object, Some(&json!({})), None),
            ("ok", ParamType::Boolean, None, None),
            ("city", ParamType::String, None, None),
        ]
    );
    assert_eq!((spec.params()[1].pos.line, spec.params()[1].pos.column), (5, 3));

    let inputs = |v: Value| -> Map<String, Value> { v.as_object().unwrap().clone() };
    let shown = |errors: Vec<agentic_spec::InputError>| errors.iter().map(ToString::to_string).collect::<Vec<_>>();
    let good = inputs(json!({"temperature": 0.7, "tags": ["a"], "ok": false, "city": "Oslo", "n": 2.0}));
    assert_eq!(spec.check_inputs(&good), Ok(()));
    let bad = inputs(json!({"temperature": "hot", "n": 2.5, "tags": "a", "ok": "yes", "city": 1, "cfg": [1]}));
    assert_eq!(
        shown(spec.check_inputs(&bad).unwrap_err()),
        [
            "input `temperature`: expected a number, got \"hot\"",
            "input `n`: expected an integer, got 2.5",
            "input `tags`: expected an array, got \"a\"",
            "input `ok`: expected a boolean, got \"yes\"",
            "input `city`: expected a string, got 1",
            "input `cfg`: expected an object, got [1]",
        ]
    );
    // Defaults fill what is missing; the required inputs missing are named in declaration order.
    let mut given = inputs(json!({"temperature": 1, "ok": true}));
    assert_eq!(
        shown(spec.complete_inputs(&mut given).unwrap_err()),
        [
            "input `tags`: missing (an array, declared in `params` without a default)",
            "input `city`: missing (a string, declared in `params` without a default)",
        ]
    );
    assert_eq!(Value::Object(given), json!({"temperature": 1, "ok": true, "n": 3, "cfg": {}}));

    // A spec without params takes any input.
    let open = Spec::parse("version: 1\nroot: a\nagents:\n  a: { kind: compute, value: '1' }\n", "open.yaml").unwrap();
    assert!(open.params().is_empty());
    assert_eq!(open.check_inputs(&bad), Ok(()));
    let mut none = Map::new();
    assert_eq!(open.complete_inputs(&mut none), Ok(()));
}
