//! Every class of spec error is reported with the file, line, column, agent and field — and all errors are
//! collected, not just the first.

#![allow(clippy::unwrap_used)]

use agentic_spec::{Spec, SpecError};

/// The errors of a spec that must not parse, as displayed lines.
fn errors(yaml: &str) -> Vec<String> {
    match Spec::parse(yaml, "spec.yaml") {
        Ok(_) => panic!("the spec should be invalid"),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

/// The single error of a spec.
fn one(yaml: &str) -> SpecError {
    let errs = Spec::parse(yaml, "spec.yaml").err().unwrap_or_else(|| panic!("the spec should be invalid"));
    assert_eq!(errs.len(), 1, "expected one error, got:\n{errs}");
    errs.errors[0].clone()
}

fn at(e: &SpecError) -> (u64, u64, Option<&str>, Option<&str>) {
    (e.line, e.column, e.agent.as_deref(), e.field.as_deref())
}

#[test]
fn display_format_is_file_line_column_agent_message() {
    let yaml = "version: 1\nroot: review\nagents:\n  review:\n    kind: loop\n    agents: []\n    exit_wen: \"done\"\n";
    let e = one(yaml);
    assert_eq!(at(&e), (7, 5, Some("review"), None));
    assert_eq!(
        e.to_string(),
        "spec.yaml:7:5: agent `review`: unknown field `exit_wen` (did you mean `exit_when`?), expected one of `kind`, \
         `description`, `inputs`, `output_key`, `optional`, `async`, `timeout_ms`, `budget`, `output`, `error_handler`, \
         `compensate_on_error`, `agents`, `max_iterations`, `exit_when`, `test_exit_at_loop_end`"
    );
}

#[test]
fn yaml_syntax_error_is_located() {
    let e = one("version: 1\nroot: a\nagents:\n  a: { kind: compute, value: [1, 2\n");
    assert_eq!((e.line, e.agent.as_deref()), (4, None));
    assert!(e.message.contains("unclosed"), "{e}");
    assert!(e.to_string().starts_with("spec.yaml:4:"), "{e}");
}

#[test]
fn yaml_indentation_errors_have_a_hint_under_the_located_error() {
    // A tab in the indentation.
    let e = one("version: 1\nroot: a\nagents:\n\ta: { kind: compute, value: '1' }\n");
    assert_eq!(
        e.to_string(),
        "spec.yaml:4:2: tabs disallowed within this context (block indentation)\n  \
         hint: YAML indents with spaces, never tabs; replace the tabs in the indentation of line 4"
    );
    // A field indented less than the other fields of its agent.
    let e = one("version: 1\nroot: a\nagents:\n  a:\n    kind: compute\n   value: '1'\n");
    assert_eq!((e.line, e.column), (6, 4));
    assert_eq!(e.message, "while parsing a block mapping, did not find expected key");
    assert_eq!(
        e.hint.as_deref(),
        Some("YAML indents with spaces; check the indentation of line 6 against the lines above it")
    );
    assert_eq!(
        e.to_string(),
        "spec.yaml:6:4: while parsing a block mapping, did not find expected key\n  \
         hint: YAML indents with spaces; check the indentation of line 6 against the lines above it"
    );
    // ... or more: the line continues the value above it, and its `: ` is not allowed there.
    let e = one("version: 1\nroot: a\nagents:\n  a:\n    kind: compute\n      value: '1'\n");
    assert_eq!(
        e.to_string(),
        "spec.yaml:6:12: mapping values are not allowed in this context\n  \
         hint: YAML indents with spaces; check the indentation of line 6 against the lines above it, or quote its \
         value if it contains `: `"
    );
    // A list item out of line with the others.
    let e = one("version: 1\nroot: a\nagents:\n  a:\n    kind: sequence\n    agents:\n      - b\n     - c\n");
    assert_eq!(
        e.to_string(),
        "spec.yaml:8:6: while parsing a block mapping, did not find expected key\n  \
         hint: YAML indents with spaces; check the indentation of line 8 against the lines above it"
    );
    // A key without its colon.
    let e = one("version: 1\nroot: a\nagents:\n  a:\n    kind: compute\n    value '1'\n    output_key: x\n");
    assert_eq!(
        e.to_string(),
        "spec.yaml:6:5: simple key expected ':'\n  \
         hint: a mapping entry is `key: value`, with a space after the colon; check line 6"
    );
    // An error that names its cause gets no hint.
    assert_eq!(one("version: 1\nroot: a\nagents:\n  a: [1, 2\n").hint, None);
}

#[test]
fn params_declare_known_types_and_defaults_of_their_type() {
    let yaml = "version: 1\nroot: a\nparams:\n  temperature: nmber\n  city: { type: string, default: 5 }\n  \
                n: { tipe: integer }\n  m: [1]\n  k: { type: integer, description: 3 }\nagents:\n  \
                a: { kind: compute, value: '1' }\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:4:16: field `params.temperature`: unknown type `nmber` (did you mean `number`?), expected one \
             of `string`, `number`, `integer`, `boolean`, `array`, `object`",
            "spec.yaml:5:34: field `params.city.default`: expected a string, found an integer",
            "spec.yaml:6:8: field `params.n`: unknown field `tipe` (did you mean `type`?), expected one of `type`, \
             `default`, `description`",
            "spec.yaml:7:6: field `params.m`: expected a type name (`string`, `number`, `integer`, `boolean`, \
             `array`, `object`) or `{type, default, description}`, found a list",
            "spec.yaml:8:36: field `params.k.description`: expected a string, found an integer",
        ]
    );
    let e = one("version: 1\nroot: a\nparams: [x]\nagents:\n  a: { kind: compute, value: '1' }\n");
    assert_eq!(e.to_string(), "spec.yaml:3:9: field `params`: expected a mapping, found a list");
}

#[test]
fn unknown_top_level_field() {
    let e = one("version: 1\nroot: a\nagent:\n  a: {}\nagents:\n  a: { kind: compute, value: '1' }\n");
    assert_eq!(
        e.to_string(),
        "spec.yaml:3:1: unknown field `agent` (did you mean `agents`?), expected one of `version`, `name`, `root`, \
         `params`, `budget`, `models`, `mcp_servers`, `agents`, `evals`"
    );
}

#[test]
fn leaf_agents_reject_composite_fields() {
    let e = one("version: 1\nroot: a\nagents:\n  a: { kind: compute, value: '1', output: 'x' }\n");
    assert_eq!(at(&e), (4, 35, Some("a"), None));
    assert!(
        e.message.starts_with("unknown field `output`, expected one of `kind`, `description`, `inputs`, `output_key`"),
        "{e}"
    );
}

#[test]
fn unknown_kind_lists_the_valid_kinds() {
    let e = one("version: 1\nroot: a\nagents:\n  a:\n    kind: frobnicate\n");
    assert_eq!(at(&e), (5, 11, Some("a"), None));
    // Kinds a test of this process registered follow the built-in ones (spec_custom_kind).
    let builtin = "unknown kind `frobnicate`, expected one of `compute`, `human`, `wait`, `sequence`, `loop`, \
                   `parallel`, `parallel_mapper`, `conditional`, `llm`, `goap`, `p2p`, `blackboard`, `voting`, `debate`, `bdi`, \
                   `supervisor`, `decision_router`, `mcp`, `a2a`, `registry`";
    assert!(e.message.starts_with(builtin), "{e}");
    // Not a misspelling: the message says where such a kind could come from.
    assert!(e.message.ends_with(" (or a kind that only the program registering it knows)"), "{e}");
    let e = one("version: 1\nroot: a\nagents:\n  a: { kind: sequnce, agents: [] }\n");
    assert!(e.message.starts_with("unknown kind `sequnce` (did you mean `sequence`?)"), "{e}");
}

#[test]
fn known_but_unsupported_kinds() {
    for kind in agentic_spec::UNSUPPORTED_KINDS {
        let e = one(&format!("version: 1\nroot: a\nagents:\n  a: {{ kind: {kind}, agents: [] }}\n"));
        assert_eq!(at(&e), (4, 14, Some("a"), None));
        assert_eq!(e.message, format!("kind `{kind}` is not supported yet by this build"));
    }
}

#[test]
fn missing_kind() {
    let e = one("version: 1\nroot: a\nagents:\n  a: { value: '1' }\n");
    assert_eq!(at(&e), (4, 3, Some("a"), None));
    assert!(e.message.starts_with("missing field `kind` (one of `compute`"), "{e}");
}

#[test]
fn unknown_agent_references() {
    let yaml = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [drafter, ghost] }\n  \
                draft: { kind: compute, value: '1' }\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:4:36: agent `main`: unknown agent `drafter` (did you mean `draft`?); defined agents: `draft`, \
             `main`",
            "spec.yaml:4:45: agent `main`: unknown agent `ghost`; defined agents: `draft`, `main`",
        ]
    );
    let e = one("version: 1\nroot: mian\nagents:\n  main: { kind: compute, value: '1' }\n");
    assert_eq!(
        e.to_string(),
        "spec.yaml:2:7: field `root`: unknown agent `mian` (did you mean `main`?); defined agents: `main`"
    );
    // The mapper's `agent` and a branch's `agents` are references too.
    let yaml = "version: 1\nroot: m\nagents:\n  m: { kind: parallel_mapper, agent: nope, items: xs }\n  \
                c: { kind: conditional, branches: [{ when: 'true', agents: [zilch] }] }\n";
    let errs = errors(yaml);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with("spec.yaml:4:38: agent `m`: unknown agent `nope`"), "{errs:?}");
    assert!(errs[1].starts_with("spec.yaml:5:63: agent `c`: unknown agent `zilch`"), "{errs:?}");
}

#[test]
fn duplicate_agent_names_name_both_lines() {
    let yaml = "version: 1\nroot: a\nagents:\n  a: { kind: compute, value: '1' }\n  b: { kind: compute, value: '2' }\n  \
                a: { kind: compute, value: '3' }\n";
    assert_eq!(errors(yaml), ["spec.yaml:6:3: duplicate agent name `a` (first defined at line 4, column 3)"]);
    // JSON too.
    let json = r#"{"version": 1, "root": "a", "agents": {"a": {"kind": "compute", "value": "1"}, "a": {"kind": "compute", "value": "2"}}}"#;
    let errs = Spec::parse(json, "spec.json").expect_err("duplicate");
    assert_eq!(errs.to_string(), "spec.json:1:80: duplicate agent name `a` (first defined at line 1, column 40)");
}

#[test]
fn duplicate_fields_and_top_level_keys() {
    let yaml = "version: 1\nroot: a\nagents:\n  a:\n    kind: compute\n    value: '1'\n    value: '2'\nroot: b\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:7:5: agent `a`: duplicate field `value` (first defined at line 6, column 5)",
            "spec.yaml:8:1: duplicate field `root` (first defined at line 2, column 1)",
        ]
    );
}

#[test]
fn version_root_and_agents_are_required() {
    assert_eq!(
        errors("name: x\n"),
        [
            "spec.yaml:1:1: missing field `version` (expected `version: 1`)",
            "spec.yaml:1:1: missing field `root` (the agent `agentic run` invokes)",
            "spec.yaml:1:1: missing field `agents`",
        ]
    );
    let e = one("version: 2\nroot: a\nagents:\n  a: { kind: compute, value: '1' }\n");
    assert_eq!(e.to_string(), "spec.yaml:1:10: field `version`: unsupported version 2, expected 1");
    let e = one("version: '1'\nroot: a\nagents:\n  a: { kind: compute, value: '1' }\n");
    assert_eq!(e.to_string(), "spec.yaml:1:10: field `version`: unsupported version \"1\", expected 1");
    assert_eq!(errors(""), ["spec.yaml:1:1: the spec is empty (expected `version`, `root` and `agents`)"]);
    assert_eq!(errors("- a\n"), ["spec.yaml:1:1: expected a mapping, found a list"]);
    assert_eq!(errors("version: 1\nroot: a\nagents: {}\n")[0], "spec.yaml:3:9: field `agents`: no agents defined");
}

#[test]
fn an_agent_has_one_parent() {
    let yaml = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [left, right] }\n  \
                left: { kind: sequence, agents: [shared] }\n  right: { kind: parallel, agents: [shared] }\n  \
                shared: { kind: compute, value: '1' }\n";
    assert_eq!(
        errors(yaml),
        ["spec.yaml:6:37: agent `right`: agent `shared` is already used by `left` (line 5, column 36); an agent can \
          have only one parent"]
    );
    let yaml = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [a, a] }\n  \
                a: { kind: compute, value: '1' }\n";
    assert_eq!(
        errors(yaml),
        ["spec.yaml:4:39: agent `main`: agent `a` is listed twice (first at line 4, column 36); an agent can run at \
          one place only"]
    );
}

#[test]
fn cycles_and_self_references() {
    let e = one("version: 1\nroot: a\nagents:\n  a: { kind: loop, agents: [a] }\n");
    assert_eq!(e.to_string(), "spec.yaml:4:29: agent `a`: agent `a` cannot contain itself");

    let yaml = "version: 1\nroot: top\nagents:\n  top: { kind: sequence, agents: [a] }\n  \
                a: { kind: sequence, agents: [b] }\n  b: { kind: parallel, agents: [c] }\n  \
                c: { kind: loop, agents: [a] }\n";
    assert_eq!(errors(yaml), ["spec.yaml:7:29: agent `c`: cycle: `a` -> `b` -> `c` -> `a`"]);

    let yaml = "version: 1\nroot: top\nagents:\n  top: { kind: sequence, agents: [a] }\n  \
                a: { kind: sequence, agents: [top] }\n";
    assert_eq!(errors(yaml), ["spec.yaml:5:33: agent `a`: cycle: `top` -> `a` -> `top`"]);

    let yaml = "version: 1\nroot: top\nagents:\n  top: { kind: compute, value: '1' }\n  \
                other: { kind: sequence, agents: [top] }\n";
    assert_eq!(errors(yaml), ["spec.yaml:5:37: agent `other`: the root agent `top` cannot also be a sub-agent"]);
}

#[test]
fn invalid_expressions_and_templates_name_the_field() {
    let yaml = r#"version: 1
root: main
agents:
  main:
    kind: loop
    agents: [c, t, cond]
    exit_when: "score >="
    output: "a +* b"
    error_handler: { fallback: "(" }
  c: { kind: compute, value: "x ==" }
  t: { kind: compute, template: "Hello {{ name" }
  cond:
    kind: conditional
    branches:
      - when: "ok"
        agents: []
      - when: "not"
        agents: []
"#;
    let errs = Spec::parse(yaml, "spec.yaml").expect_err("invalid");
    let located: Vec<_> = errs.iter().map(|e| (e.line, e.column, e.agent.as_deref(), e.field.as_deref())).collect();
    assert_eq!(
        located,
        [
            (7, 16, Some("main"), Some("exit_when")),
            (8, 13, Some("main"), Some("output")),
            (9, 32, Some("main"), Some("error_handler.fallback")),
            (10, 30, Some("c"), Some("value")),
            (11, 33, Some("t"), Some("template")),
            (17, 15, Some("cond"), Some("branches[1].when")),
        ]
    );
    for e in errs.iter().filter(|e| e.agent.as_deref() != Some("t")) {
        assert!(e.message.starts_with("invalid expression: syntax error"), "{e}");
    }
    let t = errs.iter().find(|e| e.agent.as_deref() == Some("t")).expect("template error");
    assert!(t.message.starts_with("invalid template: syntax error"), "{t}");
}

#[test]
fn wrong_types_are_reported_per_field() {
    let yaml = r#"version: 1
root: l
agents:
  l:
    kind: loop
    agents: c
    max_iterations: ten
    optional: yes
    timeout_ms: -5
    inputs: [a, 3]
    description: [x]
  c:
    kind: compute
    value: "1"
    output_key: ""
    async: 1
"#;
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:6:13: agent `l`: field `agents`: expected a list of names, found a string",
            "spec.yaml:7:21: agent `l`: field `max_iterations`: expected an integer, found a string",
            "spec.yaml:8:15: agent `l`: field `optional`: expected true or false, found a string",
            "spec.yaml:9:17: agent `l`: field `timeout_ms`: must be at least 1, found -5",
            "spec.yaml:10:17: agent `l`: field `inputs`: expected a name, found an integer",
            "spec.yaml:11:18: agent `l`: field `description`: expected a string, found a list",
            "spec.yaml:15:17: agent `c`: field `output_key`: must not be empty",
            "spec.yaml:16:12: agent `c`: field `async`: expected true or false, found an integer",
        ]
    );
}

#[test]
fn compute_needs_exactly_one_body() {
    let e = one("version: 1\nroot: a\nagents:\n  a: { kind: compute, value: '1', template: 'x' }\n");
    assert_eq!(at(&e), (4, 45, Some("a"), None));
    assert_eq!(e.message, "a compute agent takes either `value` or `template`, not both");
    let e = one("version: 1\nroot: a\nagents:\n  a: { kind: compute }\n");
    assert_eq!(e.to_string(), "spec.yaml:4:3: agent `a`: missing field `value` (an expression) or `template`");
}

#[test]
fn composite_required_fields() {
    let yaml = "version: 1\nroot: s\nagents:\n  s: { kind: sequence }\n  m: { kind: parallel_mapper, agent: s }\n  \
                c: { kind: conditional, branches: [{ agents: [] }, { when: 'x', agents: [], unless: 'y' }] }\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:4:6: agent `s`: missing field `agents` (a list of agent names)",
            "spec.yaml:5:6: agent `m`: missing field `items` (a state key)",
            "spec.yaml:6:38: agent `c`: field `branches[0]`: missing field `when` (an expression)",
            "spec.yaml:6:79: agent `c`: field `branches[1]`: unknown field `unless`, expected one of `when`, `agents`",
        ]
    );
}

#[test]
fn error_handler_fields_are_checked() {
    let yaml = "version: 1\nroot: s\nagents:\n  s: { kind: sequence, agents: [], error_handler: { retyr: 2, backoff_ms: -1 } }\n";
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:4:53: agent `s`: field `error_handler`: unknown field `retyr` (did you mean `retry`?), expected \
             one of `when`, `set`, `retry`, `backoff_ms`, `fallback`",
            "spec.yaml:4:75: agent `s`: field `error_handler.backoff_ms`: must be at least 0, found -1",
        ]
    );
}

#[test]
fn models_are_checked() {
    let yaml = r#"version: 1
root: a
models:
  m1: { provider: openai, temprature: 0.2 }
  m2: { provider: ollama }
  m3: { model_path: x.gguf }
  m4: { provider: scripted, replies: "one" }
  m1: { provider: local }
agents:
  a: { kind: compute, value: "1" }
"#;
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:4:27: field `models.m1`: unknown field `temprature` (did you mean `temperature`?), expected one \
             of `provider`, `base_url`, `model`, `api_key`, `api_key_env`, `temperature`, `max_tokens`, `prices`, \
             `limits`",
            "spec.yaml:5:19: field `models.m2`: unknown provider `ollama`, expected one of `openai`, `local`, `scripted`",
            "spec.yaml:6:3: field `models.m3`: missing field `provider` (one of `openai`, `local`, `scripted`)",
            "spec.yaml:7:38: field `models.m4.replies`: expected a list, found a string",
            "spec.yaml:8:3: duplicate model name `m1` (first defined at line 4, column 3)",
        ]
    );
}

#[test]
fn all_errors_are_collected_in_file_order() {
    let yaml = r#"version: 3
root: main
agents:
  main: { kind: sequence, agents: [a, b, ghost] }
  a: { kind: compute, value: "1 +" }
  b: { kind: a2a, url: ftp://x, inputs: [x] }
  c: { kind: frobnicate }
"#;
    let errs = errors(yaml);
    assert_eq!(errs.len(), 5, "{errs:#?}");
    assert!(errs[0].starts_with("spec.yaml:1:10: field `version`"));
    assert!(errs[1].starts_with("spec.yaml:4:42: agent `main`: unknown agent `ghost`"));
    assert!(errs[2].starts_with("spec.yaml:5:30: agent `a`: field `value`: invalid expression"));
    assert_eq!(errs[3], "spec.yaml:6:24: agent `b`: field `url`: expected an http:// or https:// URL, found `ftp://x`");
    assert!(errs[4].starts_with("spec.yaml:7:14: agent `c`: unknown kind `frobnicate`"));
    // The whole set displays one error per line.
    let all = Spec::parse(yaml, "spec.yaml").expect_err("invalid").to_string();
    assert_eq!(all.lines().count(), 5);
}

#[test]
fn build_errors_are_located_at_the_agent() {
    // The mapped agent has no inputs, so the item key cannot be defaulted: only the builder knows.
    let yaml = "version: 1\nroot: m\nagents:\n  m: { kind: parallel_mapper, agent: one, items: xs }\n  \
                one: { kind: compute, value: '1' }\n";
    let spec = Spec::parse(yaml, "spec.yaml").expect("parses");
    let errs = spec.build().expect_err("cannot build");
    assert_eq!(errs.to_string(), "spec.yaml:4:3: agent `m`: the mapped agent has no inputs: set `item_key`");
}

#[test]
fn unreadable_file_has_no_position() {
    let errs = Spec::from_path(std::path::Path::new("/nonexistent/dir/flow.yaml")).expect_err("missing");
    assert_eq!(errs.len(), 1);
    assert_eq!((errs.errors[0].line, errs.errors[0].column), (0, 0));
    assert!(errs.to_string().starts_with("/nonexistent/dir/flow.yaml: cannot read the spec: "), "{errs}");
}

#[test]
fn yaml_1_1_booleans_are_strings() {
    // `y`, `yes`, `on` are plain strings (YAML 1.2 core): usable as keys and names.
    let yaml = "version: 1\nroot: y\nagents:\n  y: { kind: compute, value: \"'on'\", output_key: yes }\n";
    let spec = Spec::parse(yaml, "spec.yaml").expect("parses");
    assert_eq!(spec.root(), "y");
    assert_eq!(spec.agent("y").and_then(|a| a.output_key.as_deref()), Some("yes"));
}

#[test]
fn a_misspelt_required_field_is_reported_once() {
    let e = one("version: 1\nroot: s\nagents:\n  s: { kind: sequence, agnets: [] }\n");
    assert_eq!(at(&e), (4, 24, Some("s"), None));
    assert!(e.message.starts_with("unknown field `agnets` (did you mean `agents`?)"), "{e}");
    let e = one("version: 1\nroot: c\nagents:\n  c: { kind: compute, tempalte: 'x' }\n");
    assert!(e.message.starts_with("unknown field `tempalte` (did you mean `template`?)"), "{e}");
}

#[test]
fn json_specs_must_be_strict_json() {
    let err = Spec::parse(
        "{\"version\": 1, \"root\": \"a\",\n \"agents\": {\"a\": {\"kind\": \"compute\", \"value\": \"1\"},}}",
        "flow.json",
    )
    .unwrap_err();
    let e = &err.errors[0];
    assert_eq!((e.line, e.column), (2, 52));
    assert_eq!(e.message, "invalid JSON: key must be a string");
}

#[test]
fn nesting_deeper_than_the_limit_is_located() {
    let mut yaml = String::from("version: 1\nroot: s0\nagents:\n");
    for i in 0..80 {
        yaml.push_str(&format!("  s{i}: {{ kind: sequence, agents: [s{}] }}\n", i + 1));
    }
    yaml.push_str("  s80: { kind: compute, value: \"1\" }\n");
    let e = one(&yaml);
    assert_eq!(e.message, "agent `s64` is nested 65 levels deep; at most 64 levels are supported");
    assert_eq!(at(&e), (67, 35, Some("s63"), None));
}

#[test]
fn human_agents_are_checked() {
    let e = one("version: 1\nroot: h\nagents:\n  h: { kind: human, prompt: \"ok?\", mode: later }\n");
    assert_eq!(e.message, "unknown mode `later`, expected `suspend` or `pending`");
    assert_eq!(at(&e), (4, 42, Some("h"), Some("mode")));
    let e = one("version: 1\nroot: h\nagents:\n  h: { kind: human }\n");
    assert_eq!(e.message, "missing field `prompt`");
    let e = one("version: 1\nroot: h\nagents:\n  h: { kind: human, prompt: \"{{ x\" }\n");
    assert!(e.message.starts_with("invalid template:"), "{e}");
    assert_eq!(e.field.as_deref(), Some("prompt"));
}

#[test]
fn credentials_of_mcp_servers_and_a2a_agents_are_maps_of_strings_where_their_transport_takes_them() {
    let yaml = r#"
version: 1
root: a
mcp_servers:
  local: { command: [srv], headers: { Authorization: x } }
  remote: { url: "http://127.0.0.1:1/mcp", env: { TOKEN: x } }
  listed: { command: [srv], env: { TOKEN: [x] } }
agents:
  a: { kind: a2a, url: "http://127.0.0.1:1/chat", headers: [x] }
"#;
    assert_eq!(
        errors(yaml),
        [
            "spec.yaml:5:37: field `mcp_servers.local.headers`: a stdio server (`command`) takes `env`, not HTTP \
             `headers`",
            "spec.yaml:6:49: field `mcp_servers.remote.env`: an HTTP server (`url`) takes `headers`, not a process's \
             `env`",
            "spec.yaml:7:43: field `mcp_servers.listed.env.TOKEN`: expected a string, found a list",
            "spec.yaml:9:60: agent `a`: field `headers`: expected a mapping, found a list",
        ]
    );
}
