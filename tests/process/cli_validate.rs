//! `agentic validate` through the real binary.

#![allow(clippy::unwrap_used)]

use std::process::Output;

use crate::binary::Cli;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs");

fn validate(path: &str) -> Output {
    Cli::new(["validate", path]).output()
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write spec");
    path.to_str().expect("utf8").to_string()
}

#[test]
fn examples_are_valid() {
    for (file, line) in [
        ("hello.yaml", "ok: hello (3 agents)\n"),
        ("countdown.yaml", "ok: countdown (3 agents)\n"),
        ("shout_all.json", "ok: shout-all (2 agents)\n"),
        ("triage.yaml", "ok: triage (5 agents)\n"),
    ] {
        let o = validate(&format!("{EXAMPLES}/{file}"));
        assert_eq!(o.status.code(), Some(0), "{file}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout), line);
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{file}: no warnings");
    }
}

#[test]
fn unknown_kind_exits_64_with_the_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(&dir, "flow.yaml", "version: 1\nroot: a\nagents:\n  a:\n    kind: frobnicate\n");
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!("{path}:5:11: agent `a`: unknown kind `frobnicate`, expected one of `compute`")),
        "{err}"
    );
}

#[test]
fn a_yaml_indentation_error_is_located_and_has_a_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(&dir, "tabbed.yaml", "version: 1\nroot: a\nagents:\n  a:\n\tkind: compute\n");
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{path}:5:2: tabs disallowed within this context (block indentation)\n  \
             hint: YAML indents with spaces, never tabs; replace the tabs in the indentation of line 5\n"
        )
    );
}

#[test]
fn every_error_is_printed_one_per_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "many.yaml",
        "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [a, ghost] }\n  \
         a: { kind: a2a }\n  main: { kind: compute, value: '1' }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{path}:4:39: agent `main`: unknown agent `ghost`; defined agents: `a`, `main`"),
            format!("{path}:5:6: agent `a`: missing field `url`"),
            format!("{path}:6:3: duplicate agent name `main` (first defined at line 4, column 3)"),
        ]
    );
}

#[test]
fn unreachable_agents_are_warnings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "orphans.yaml",
        "version: 1\nname: with-orphans\nroot: a\nagents:\n  a: { kind: compute, value: '1' }\n  \
         b: { kind: compute, value: '2' }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok: with-orphans (2 agents)\n");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("warning: {path}: agent `b` is not reachable from the root `a`\n")
    );
}

#[test]
fn build_time_errors_fail_validation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "mapper.yaml",
        "version: 1\nroot: m\nagents:\n  m: { kind: parallel_mapper, agent: one, items: xs }\n  \
         one: { kind: compute, value: '1' }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("{path}:4:3: agent `m`: the mapped agent has no inputs: set `item_key`\n")
    );
}

#[test]
fn missing_file_exits_64() {
    let o = validate("/nonexistent/flow.yaml");
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("/nonexistent/flow.yaml: cannot read the spec: "));
}

#[test]
fn a_local_model_this_binary_lacks_is_a_warning_not_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "version: 1\nname: local-demo\nroot: a\nmodels:\n  default: { provider: local }\nagents:\n  a: { kind: llm, \
                user: \"Hi {{ name }}\" }\n";
    let path = write(&dir, "local.yaml", text);
    let o = Cli::new(["validate", &path]).env_remove("OPENAI_BASE_URL").output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok: local-demo (1 agent)\n");
    if cfg!(feature = "local") {
        assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    } else {
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!(
                "warning: {path}: model `default`: the local provider is not built into this binary: build with \
                 `--features local`, or set OPENAI_BASE_URL to an OpenAI-compatible server to run this spec \
                 unchanged; the spec is checked without it\n"
            )
        );
    }
    // A real error is still an error, located.
    let broken = write(&dir, "broken.yaml", &text.replace("user:", "usr:"));
    let o = validate(&broken);
    assert_eq!(o.status.code(), Some(64));
}

#[test]
fn supervisors_and_decision_routers_validate_and_report_their_topology() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "bank.yaml",
        "version: 1\nroot: bank\nmodels:\n  planner: { provider: scripted, replies: [] }\n  decider: { provider: \
         scripted, decisions: [a] }\nagents:\n  bank: { kind: supervisor, agents: [a, router], model: planner, \
         response_strategy: scored, context_strategy: summarization }\n  router: { kind: decision_router, agents: \
         [b, c], model: decider, threshold: 0.5 }\n  a: { kind: compute, value: '1' }\n  b: { kind: compute, value: \
         '2' }\n  c: { kind: compute, value: '3' }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok: bank (5 agents)\n");

    let out = dir.path().join("topology.html");
    let o = Cli::new(["report", "--spec", &path, "-o", out.to_str().expect("utf8")]).output();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).expect("report");
    for shown in ["bank", "router", "supervisor", "decision_router", "planner", "summarizer", "scorer"] {
        assert!(html.contains(shown), "the topology shows `{shown}`");
    }

    let bad = write(
        &dir,
        "bad.yaml",
        "version: 1\nroot: r\nmodels:\n  m: { provider: scripted }\nagents:\n  r: { kind: decision_router, agents: \
         [a], model: m, threshold: 1.5 }\n  a: { kind: compute, value: '1' }\n",
    );
    let o = validate(&bad);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("{bad}:6:65: agent `r`: field `threshold`: must be strictly between 0 and 1, found 1.5\n")
    );
}

#[test]
fn registered_agents_are_checked_against_stand_ins_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "story.yaml",
        "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [write, edit] }\n  \
         write: { kind: compute, template: \"about {{ topic }}\", output_key: story }\n  \
         edit: { kind: registry, name: style_editor }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok: story (3 agents)\n");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "warning: {path}: agent `edit` is the registered agent `style_editor`: only the Rust program that \
             registers it can run the spec; the spec is checked without it\n"
        )
    );
}

#[test]
fn a_mapped_composite_whose_item_key_nothing_reads_and_an_a2a_agent_with_nothing_to_send_are_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mapper = |item_key: &str| {
        format!(
            "version: 1\nroot: each\nagents:\n  each: {{ kind: parallel_mapper, agent: shout, items: words, item_key: \
             {item_key}, output_key: all }}\n  shout: {{ kind: sequence, agents: [up], output_key: loud }}\n  \
             up: {{ kind: compute, value: \"text | upper\", output_key: loud }}\n"
        )
    };
    let path = write(&dir, "mapper.yaml", &mapper("word"));
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{path}:4:72: agent `each`: field `item_key`: item_key `word` is read by no agent of the mapped composite \
             `shout`: each item would run on the same state\n"
        )
    );
    let fixed = write(&dir, "fixed.yaml", &mapper("text"));
    let o = validate(&fixed);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok: fixed (3 agents)\n", "{}", String::from_utf8_lossy(&o.stderr));

    let path =
        write(&dir, "remote.yaml", "version: 1\nroot: a\nagents:\n  a: { kind: a2a, url: 'http://127.0.0.1:9' }\n");
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{path}:4:14: agent `a`: an a2a agent sends `message` (a template) or, without it, the values of its \
             `inputs`: give one of them\n"
        )
    );
}

/// SPEC.md §4: a tool's unknown `effect` and an `approve` expression that does not parse are located errors
/// (exit 64).
#[test]
fn a_wrong_tool_effect_or_approval_rule_exits_64_with_the_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "version: 1\nroot: desk\nmodels:\n  default: { provider: scripted }\nagents:\n  desk:\n    kind: llm\n    \
                user: hi\n    tools:\n      - { name: refund, value: \"1\", effect: onse, approve: \"args.amount >\" }\n";
    let path = write(&dir, "desk.yaml", text);
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{path}:10:45: agent `desk`: field `tools[0].effect`: unknown effect `onse` (did you mean `once`?), \
             expected `none`, `retry` or `once`\n{path}:10:60: agent `desk`: field `tools[0].approve`: invalid \
             expression: syntax error: unexpected end of input, expected expression\n"
        )
    );
}

/// A `mode: pending` human step is valid (`agentic serve` runs it) but `agentic run` refuses it: validate
/// warns with run's located message.
#[test]
fn a_pending_human_is_a_warning_with_the_message_run_refuses_it_with() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "gate.yaml",
        "version: 1\nname: gate\nroot: main\nagents:\n  main: { kind: sequence, agents: [ask] }\n  \
         ask: { kind: human, prompt: Ship it?, mode: pending }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok: gate (2 agents)\n");
    let refused = format!(
        "{path}:6:16: agent `ask`: `mode: pending` waits for an answer given inside the running program, which the \
         CLI cannot give (the run would wait forever): use `mode: suspend` (the default: the run suspends, exits 2, \
         and `agentic respond` + `agentic resume` answer it)"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "warning: {refused}; `agentic run` refuses this spec, `agentic serve` runs it as it is (its inbox and API \
             take the answer)\n"
        )
    );
    let run = Cli::new(["run", &path]).store(dir.path().join("store")).output();
    assert_eq!(
        (run.status.code(), String::from_utf8_lossy(&run.stderr).into_owned()),
        (Some(64), format!("{refused}\n"))
    );
}

/// `timeout_ms` never applies to a `wait` (it suspends the run until its time): a located error saying what
/// bounds a wait.
#[test]
fn a_timeout_on_a_wait_is_refused_naming_what_bounds_a_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(
        &dir,
        "pause.yaml",
        "version: 1\nname: pause\nroot: pause\nagents:\n  pause: { kind: wait, for: 2h, timeout_ms: 1000 }\n",
    );
    let o = validate(&path);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{path}:5:45: agent `pause`: field `timeout_ms`: a `wait` has no timeout: it suspends the run until its \
             `for` or `until`, which no invocation timeout cuts short; to wait less, give a shorter `for` or an \
             earlier `until`\n"
        )
    );
}
