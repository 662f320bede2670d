//! `agentic run` through the real binary: outputs, `--json`, inputs, run ids and exit codes (SPEC.md §2).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::binary::{Cli, stderr, stdout};

use serde_json::{Value, json};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs");

/// Runs the binary with a fresh store directory of its own (tests run in parallel; a sled store is one
/// process's at a time).
fn agentic(args: &[&str]) -> Output {
    let store = tempfile::tempdir().expect("tempdir");
    Cli::new(args).store(store.path()).output()
}

fn example(name: &str) -> String {
    format!("{EXAMPLES}/{name}")
}

/// Writes `text` to `name` in `dir`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write temp file");
    path
}

/// The `run: <id>` line on stderr.
fn run_id(o: &Output) -> String {
    let err = stderr(o);
    let line = err.lines().find(|l| l.starts_with("run: ")).unwrap_or_else(|| panic!("no run line in {err:?}"));
    line["run: ".len()..].to_string()
}

const ADD: &str = r#"
version: 1
root: add
agents:
  add: { kind: compute, value: "a + b" }
"#;

#[test]
fn hello_example_prints_the_result_as_json() {
    let o = agentic(&["run", &example("hello.yaml"), "--input", "name=Ada"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "{\"greeting\":\"Hello, Ada! Welcome to agentic.\",\"loud\":\"HELLO, ADA! WELCOME TO AGENTIC.\"}\n"
    );
    // A fresh UUID as run id.
    let id = run_id(&o);
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(id.matches('-').count(), 4, "{id}");
}

#[test]
fn a_spec_on_standard_input_runs_and_validates_and_its_errors_name_stdin() {
    let store = tempfile::tempdir().expect("tempdir");
    let greet = b"version: 1\nroot: g\nagents:\n  g: { kind: compute, template: \"Hi {{ who }}\" }\n";
    let o = Cli::new(["run", "-", "--input", "who=Bob", "--memory-id", "piped"])
        .store(store.path())
        .output_with_stdin(greet);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hi Bob\n");
    let shown = Cli::new(["show", "piped", "--json"]).store(store.path()).output();
    let shown: Value = serde_json::from_slice(&shown.stdout).expect("show --json");
    assert_eq!(shown["spec"]["name"], "stdin", "named after its source, as a file is after its stem");

    let o = Cli::new(["validate", "-"]).output_with_stdin(greet);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = Cli::new(["run", "-"])
        .store(store.path())
        .output_with_stdin(b"version: 1\nroot: g\nagents:\n  g: { kind: nope }\n");
    assert_eq!(o.status.code(), Some(64));
    assert!(
        stderr(&o).starts_with("stdin:4:14: agent `g`: unknown kind `nope`, expected one of `compute`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn string_results_are_printed_raw() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(
        dir.path(),
        "greet.yaml",
        "version: 1\nroot: g\nagents:\n  g: { kind: compute, template: \"Hi {{ who }}\" }\n",
    );
    let o = agentic(&["run", spec.to_str().expect("utf8"), "--input", "who=Bob"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hi Bob\n");
}

#[test]
fn every_example_runs() {
    let o = agentic(&["run", &example("countdown.yaml"), "--input", "budget=100"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "{\"budget\":6,\"steps\":4}\n");

    let o = agentic(&["run", &example("shout_all.json"), "--input", r#"words=["a","bc","d"]"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "[\"A!\",\"BC!\",\"D!\"]\n");

    let o = agentic(&["run", &example("triage.yaml"), "--input", "temperature=39.5", "--input", "cough=true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(out, json!({"level": "high", "urgent": true, "remedy": "warm water and honey, and rest"}));

    let o = agentic(&["run", &example("triage.yaml"), "--input", "temperature=36.6"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(out, json!({"level": "normal", "urgent": false, "remedy": "none"}));
}

#[test]
fn json_output_shape_and_memory_id() {
    let o = agentic(&["run", &example("hello.yaml"), "--input", "name=Ada", "--memory-id", "my-run-7", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(run_id(&o), "my-run-7");
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "one JSON object: {out}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        v,
        json!({
            "run_id": "my-run-7",
            "status": "completed",
            "output": {"greeting": "Hello, Ada! Welcome to agentic.", "loud": "HELLO, ADA! WELCOME TO AGENTIC."},
            "pending": [],
        })
    );
}

#[test]
fn input_values_are_json_when_valid_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(dir.path(), "add.yaml", ADD);
    let spec = spec.to_str().expect("utf8");
    // Numbers add.
    let o = agentic(&["run", spec, "--input", "a=2", "--input", "b=40"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "42\n".to_string()), "{}", stderr(&o));
    // Strings concatenate: a JSON string, and a text that is not JSON.
    let o = agentic(&["run", spec, "--input", "a=\"2\"", "--input", "b=x y"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "2x y\n".to_string()), "{}", stderr(&o));
    // Lists concatenate.
    let o = agentic(&["run", spec, "--input", "a=[1]", "--input", "b=[2, {\"k\": null}]"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "[1,2,{\"k\":null}]\n".to_string()), "{}", stderr(&o));
}

#[test]
fn inputs_file_and_input_overrides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(dir.path(), "add.yaml", ADD);
    let inputs = write(dir.path(), "inputs.json", r#"{"a": 10, "b": 5}"#);
    let (spec, inputs) = (spec.to_str().expect("utf8"), inputs.to_str().expect("utf8"));
    let o = agentic(&["run", spec, "--inputs", inputs]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "15\n".to_string()), "{}", stderr(&o));
    let o = agentic(&["run", spec, "--inputs", inputs, "--input", "b=100"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "110\n".to_string()), "{}", stderr(&o));

    // Not an object, invalid JSON, missing file: usage errors.
    let bad = write(dir.path(), "bad.json", "[1, 2]");
    let o = agentic(&["run", spec, "--inputs", bad.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).contains("expected a JSON object of inputs, found an array"), "{}", stderr(&o));
    let bad = write(dir.path(), "broken.json", "{\"a\": ");
    let o = agentic(&["run", spec, "--inputs", bad.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).contains("invalid JSON"), "{}", stderr(&o));
    let o = agentic(&["run", spec, "--inputs", "/nonexistent/inputs.json"]);
    assert_eq!(o.status.code(), Some(64));
}

/// `first` writes `x` (so the run may start without it) but its result is null, which writes nothing: `second`
/// then fails.
#[test]
fn failed_run_exits_1_and_names_the_agent_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(
        dir.path(),
        "fail.yaml",
        "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [first, second] }\n  \
         first: { kind: compute, value: \"none\", inputs: [], output_key: x }\n  second: { kind: compute, value: \"x + \
         1\" }\n",
    );
    let spec = spec.to_str().expect("utf8");
    let o = agentic(&["run", spec, "--memory-id", "f1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(err.contains("run: f1"), "{err}");
    assert!(err.contains("error: agent `second` (root/1): missing argument `x`"), "{err}");

    let o = agentic(&["run", spec, "--memory-id", "f2", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["run_id"], json!("f2"));
    assert_eq!(v["status"], json!("failed"));
    assert_eq!(v["output"], Value::Null);
    assert_eq!(v["pending"], json!([]));
    assert_eq!(v["error"], json!("agent `second` (root/1): missing argument `x`"));
}

#[test]
fn invalid_spec_exits_64_with_located_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(dir.path(), "bad.yaml", "version: 1\nroot: a\nagents:\n  a: { kind: compute, valeu: '1' }\n");
    let o = agentic(&["run", spec.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(err.contains("bad.yaml:4:23: agent `a`: unknown field `valeu` (did you mean `value`?)"), "{err}");
    assert_eq!(err.lines().count(), 1, "no other error (no `missing field value`): {err}");
    assert!(!err.contains("run: "), "no run starts for an invalid spec: {err}");

    let o = agentic(&["run", "/nonexistent/spec.yaml"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).contains("/nonexistent/spec.yaml: cannot read the spec"), "{}", stderr(&o));
}

/// A run without a required input is refused before anything runs or is recorded (exit 64), naming the
/// `--input` that gives each: one `params` declares, or (without `params`) one an agent that always runs reads.
#[test]
fn a_missing_input_is_refused_at_the_door_naming_the_input_that_gives_it() {
    let store = tempfile::tempdir().expect("tempdir");
    let s = store.path();
    let o = crate::binary::agentic(s, &["run", &example("hello.yaml")]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        "error: missing input `name` (a string, declared in `params` without a default): give it with --input \
         name=VALUE\n"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let add = write(dir.path(), "add.yaml", ADD);
    let o = crate::binary::agentic(s, &["run", add.to_str().expect("utf8"), "--input", "a=1"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stderr(&o), "error: missing input `b` (read by agent `add`): give it with --input b=VALUE\n");
    let o = crate::binary::agentic(s, &["run", add.to_str().expect("utf8")]);
    assert_eq!(
        stderr(&o),
        "error: missing input `a` (read by agent `add`): give it with --input a=VALUE\nerror: missing input `b` \
         (read by agent `add`): give it with --input b=VALUE\n"
    );
    // Nothing was recorded.
    let o = crate::binary::agentic(s, &["runs", "--json"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "[]\n".to_string()), "{}", stderr(&o));
}

/// A variable read only through `default(..)` or under `is defined` is optional: the run goes without it.
#[test]
fn an_input_read_only_through_default_or_under_is_defined_may_be_left_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [count, say], output_key: said }\n  \
                count: { kind: compute, template: \"{{ n | default(0) }}\", output_key: count }\n  say: { kind: compute, \
                template: \"{{ count }} at {{ place | default('home') }}{% if who is defined %} for {{ who }}{% endif \
                %}\", output_key: said }\n";
    let spec = write(dir.path(), "count.yaml", text);
    let path = spec.to_str().expect("utf8");
    let o = agentic(&["run", path]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "0 at home\n".to_string()), "{}", stderr(&o));
    let o = agentic(&["run", path, "--input", "n=3", "--input", "place=work", "--input", "who=Ada"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "3 at work for Ada\n".to_string()), "{}", stderr(&o));
}

/// A `mode: pending` human waits for an answer given inside the running program: the CLI, which cannot give
/// one, refuses the run before it starts (exit 64), saying what to do; an unreachable one is no obstacle.
#[test]
fn a_pending_human_is_refused_before_the_run_starts_saying_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "version: 1\nroot: main\nagents:\n  main: { kind: sequence, agents: [ask] }\n  \
                ask: { kind: human, prompt: Ship it?, mode: pending }\n";
    let spec = write(dir.path(), "gate.yaml", text);
    let path = spec.to_str().expect("utf8");
    let o = agentic(&["run", path]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        format!(
            "{path}:5:16: agent `ask`: `mode: pending` waits for an answer given inside the running program, which \
             the CLI cannot give (the run would wait forever): use `mode: suspend` (the default: the run suspends, \
             exits 2, and `agentic respond` + `agentic resume` answer it)\n"
        )
    );
    let unused = write(
        dir.path(),
        "unused.yaml",
        &text
            .replace("agents: [ask]", "agents: [say]")
            .replace("  ask:", "  say: { kind: compute, value: \"'hi'\", output_key: said }\n  ask:"),
    );
    let o = agentic(&["run", unused.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn store_durability_and_report_are_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("r.html");
    let store = dir.path().join("store");
    let o = agentic(&[
        "run",
        &example("hello.yaml"),
        "--input",
        "name=Ada",
        "--store",
        store.to_str().expect("utf8"),
        "--durability",
        "exit",
        "--report",
        report.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("report: {}", report.display())), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&report).expect("report written").contains("id=\"topology-svg\""));

    // $AGENTIC_STORE is the default store.
    let o = Cli::new(["run", &example("hello.yaml"), "--input", "name=Ada", "--durability", "async"])
        .store(store.to_str().expect("utf8"))
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_64() {
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["run"],
        &["run", "x.yaml", "--bogus"],
        &["run", "x.yaml", "--input", "novalue"],
        &["run", "x.yaml", "--input", "=5"],
        &["run", "x.yaml", "--durability", "sometimes"],
        &["validate"],
        &["respond", "run-1"],
        &["report", "-o", "x.html"],
    ];
    for args in cases {
        let o = agentic(args);
        assert_eq!(o.status.code(), Some(64), "agentic {args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty(), "agentic {args:?} explains the error");
    }
}

#[test]
fn help_and_version_exit_0() {
    for args in [&["--help"][..], &["-h"], &["run", "--help"], &["validate", "--help"], &["--version"], &["-V"]] {
        let o = agentic(args);
        assert_eq!(o.status.code(), Some(0), "agentic {args:?}: {}", stderr(&o));
        assert!(!stdout(&o).is_empty());
    }
    // The long help lists every exit code (SPEC.md §2).
    let help = stdout(&agentic(&["--help"])).replace('\n', " ");
    assert!(
        help.contains(
            "Exit codes: 0 completed, 2 suspended (waiting for a human), 1 run failed, 64 usage error or invalid spec \
             (or a missing input), 75 store or server unavailable or in use (try again), 77 credentials refused by a \
             server, 130 interrupted (a third Ctrl-C)."
        ),
        "{help}"
    );
    // The version and the cargo features of the build: run-demo.sh reads whether it has `local`.
    let built = [
        ("local", cfg!(feature = "local")),
        ("otel", cfg!(feature = "otel")),
        ("postgres", cfg!(feature = "postgres")),
    ];
    let features: Vec<&str> = built.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
    let features = if features.is_empty() { "none".to_string() } else { features.join(", ") };
    for flag in ["--version", "-V"] {
        let o = agentic(&[flag]);
        assert_eq!(stdout(&o), format!("agentic {} (features: {features})\n", env!("CARGO_PKG_VERSION")));
    }
    if !cfg!(feature = "local") && !cfg!(feature = "otel") && cfg!(feature = "postgres") {
        assert_eq!(stdout(&agentic(&["-V"])), format!("agentic {} (features: postgres)\n", env!("CARGO_PKG_VERSION")));
    }
    let o = agentic(&["run", "--help"]);
    assert!(stdout(&o).contains("one process at a time may open it"), "{}", stdout(&o));
    assert!(stdout(&o).contains("sync (each step reaches the disk before the next)"), "{}", stdout(&o));
}

#[test]
fn report_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let out = dir.path().join("r.html");
    let (store, out) = (store.to_str().expect("utf8"), out.to_str().expect("utf8"));
    let o = agentic(&["report", "run-1", "-o", out, "--store", store]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // A store that does not exist is not created to report on.
    assert_eq!(
        stderr(&o),
        format!(
            "error: no store at {store} (no such directory); runs are kept in ./.agentic unless --store or \
             $AGENTIC_STORE names another store\n"
        )
    );
    assert!(!std::path::Path::new(store).exists());
    let o = agentic(&["report", "--spec", "/nonexistent/x.yaml", "-o", out]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
}

/// The README tour's triage, with its inputs declared: `temperature` a number, `patient` a string with a
/// default.
const TYPED: &str = r#"version: 1
root: triage
params:
  temperature: number
  patient: { type: string, default: "the patient", description: Who is measured }
agents:
  triage: { kind: sequence, agents: [classify, advise], output_key: advice }
  classify:
    kind: compute
    value: "'high' if temperature >= 39 else 'normal'"
    output_key: level
  advise: { kind: compute, template: "{{ patient }}: {{ level }}", output_key: advice }
"#;

#[test]
fn typed_inputs_are_checked_before_the_run_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(dir.path(), "typed.yaml", TYPED);
    let spec = spec.to_str().expect("utf8");
    // A value of the wrong type: exit 64, naming the key, the type and the value; no run starts.
    let o = agentic(&["run", spec, "--input", "temperature=hot"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "error: input `temperature`: expected a number, got \"hot\"\n");
    let o = agentic(&["run", spec, "--input", "temperature=[39]"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stderr(&o), "error: input `temperature`: expected a number, got [39]\n");
    // A value given as text is JSON first: a number here; the default fills `patient`.
    let o = agentic(&["run", spec, "--input", "temperature=39.5"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "the patient: high\n".to_string()), "{}", stderr(&o));
    // For a `string` input the text is the value, whatever JSON it would be.
    let o = agentic(&["run", spec, "--input", "temperature=37", "--input", "patient=42"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "42: normal\n".to_string()), "{}", stderr(&o));
    // A required input missing, an undeclared one (a typo): usage errors.
    let o = agentic(&["run", spec]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        "error: missing input `temperature` (a number, declared in `params` without a default): give it with --input \
         temperature=VALUE\n"
    );
    let o = agentic(&["run", spec, "--input", "temprature=39"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        "error: input `temprature`: not a parameter of this spec (did you mean `temperature`?); its params are \
         `temperature`, `patient`\n"
    );
    // --inputs FILE.json is checked the same way (its values are JSON: a number is not a string there).
    let inputs = write(dir.path(), "inputs.json", r#"{"temperature": 38, "patient": 7}"#);
    let o = agentic(&["run", spec, "--inputs", inputs.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stderr(&o), "error: input `patient`: expected a string, got 7\n");
}

#[test]
fn a_new_turn_of_a_completed_run_is_not_asked_for_its_inputs_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write(dir.path(), "typed.yaml", TYPED);
    let spec = spec.to_str().expect("utf8");
    let store = dir.path().join("store");
    let run = |args: &[&str]| crate::binary::agentic(&store, args);
    let o = run(&["run", spec, "--input", "temperature=40", "--input", "patient=Ada", "--memory-id", "t1"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "Ada: high\n".to_string()), "{}", stderr(&o));
    // The second turn runs on the first one's state: its temperature and patient (no default over it).
    let o = run(&["run", spec, "--memory-id", "t1"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "Ada: high\n".to_string()), "{}", stderr(&o));
    // What it is given is still checked.
    let o = run(&["run", spec, "--memory-id", "t1", "--input", "temperature=hot"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(stderr(&o), "error: input `temperature`: expected a number, got \"hot\"\n");
}

#[test]
fn an_otlp_endpoint_without_the_otel_feature_is_noted_not_silently_ignored() {
    if cfg!(feature = "otel") {
        return;
    }
    let store = tempfile::tempdir().expect("tempdir");
    let o = Cli::new(["run", &example("hello.yaml"), "--input", "name=Ada", "--memory-id", "o"])
        .store(store.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "note: $OTEL_EXPORTER_OTLP_ENDPOINT is set, but this agentic is built without the `otel` feature: no span is \
         exported (cargo build --release --features otel; docs/telemetry.md)\nrun: o\n"
    );
}
