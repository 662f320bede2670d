//! `agentic show RUN_ID` through the real binary: internal state keys (`_context.*`, `_memory.*`) hidden
//! unless `--all`, long values cut with their length, `--json` always complete (docs/spec.md §3).

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::{Value, json};

use crate::binary::{agentic, stderr, stdout};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A sequence whose compute step writes a long prompt and a long list, and whose LLM step (a scripted
/// model, with chat memory) leaves the internal keys `_context.ask` and `_memory.ask`.
const SPEC: &str = r#"
version: 1
root: main
models:
  default: { provider: scripted, replies: ["Paris"] }
agents:
  main: { kind: sequence, agents: [brief, numbers, ask], output_key: answer }
  brief:
    kind: compute
    template: "Name the capital of {{ country }}. Answer with the name of the city only: no sentence, no punctuation, no explanation of any kind, nothing else."
    output_key: prompt
  numbers: { kind: compute, value: "range(100) | list", output_key: numbers }
  ask: { kind: llm, user: "{{ prompt }}", memory: { window: 2 }, output_key: answer }
"#;

/// `show`'s output with the `updated:` timestamp replaced by `T` (it is the only line that varies).
fn shown(store: &Path, args: &[&str]) -> String {
    let o = agentic(store, args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| if l.starts_with("updated: ") { "updated: T" } else { l })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs [`SPEC`] as run `s1` in `store`.
fn run_spec(dir: &Path, store: &Path) {
    let spec = dir.join("capital.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let o = agentic(store, &["run", spec.to_str().unwrap(), "--input", "country=France", "--memory-id", "s1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Paris\n");
}

#[test]
fn show_hides_internal_keys_and_cuts_long_values() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    run_spec(dir.path(), &store);
    assert_eq!(
        shown(&store, &["show", "s1"]),
        r#"run:     s1
name:    capital
status:  completed
updated: T
steps:   5
spec:    capital b01b1151125f5eeb4a1a45aa1d568f7ae3fb6bada518ca2c485b4827e43843a5
output:  "Paris"
usage:
  ask (root/2): 25 tokens (24 in, 1 out), 1 model call [default]
  total: 25 tokens (24 in, 1 out), 1 model call
usage by model:
  default: 25 tokens (24 in, 1 out), 1 model call
state:
  answer = "Paris"
  country = "France"
  numbers = [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,… (291 chars)
  prompt = "Name the capital of France. Answer with the name of the city…" (137 chars)
(2 internal keys hidden; --all shows them)
"#
    );
}

#[test]
fn show_all_shows_every_key_in_full_and_json_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    run_spec(dir.path(), &store);
    let prompt = "Name the capital of France. Answer with the name of the city only: no sentence, no punctuation, no \
                  explanation of any kind, nothing else.";
    let numbers: Vec<u32> = (0..100).collect();
    let all = shown(&store, &["show", "s1", "--all"]);
    let state: Vec<&str> = all.lines().skip_while(|l| *l != "state:").skip(1).collect();
    assert_eq!(state.len(), 6, "{all}");
    // `_context.ask` ends with the time of the exchange, which varies.
    let context = format!(r#"  _context.ask = {{"user":"{prompt}","answer":"Paris","at_us":"#);
    assert!(state[0].starts_with(&context), "{all}");
    assert_eq!(
        state[1..],
        [
            format!(
                r#"  _memory.ask = [{{"role":"user","content":"{prompt}"}},{{"role":"assistant","content":"Paris"}}]"#
            ),
            r#"  answer = "Paris""#.to_string(),
            r#"  country = "France""#.to_string(),
            format!("  numbers = {}", json!(numbers)),
            format!(r#"  prompt = "{prompt}""#),
        ]
    );
    assert!(!all.contains("hidden"), "{all}");

    // --json: the whole state, internal keys and full values included.
    let o = agentic(&store, &["show", "s1", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let keys: Vec<&String> = v["state"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["_context.ask", "_memory.ask", "answer", "country", "numbers", "prompt"]);
    assert_eq!(v["state"]["prompt"], json!(prompt));
    assert_eq!(v["state"]["numbers"], json!(numbers));
    assert_eq!(v["state"]["_memory.ask"][0]["content"], json!(prompt));
}

#[test]
fn show_without_internal_keys_says_nothing_about_them() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path();
    let approval = format!("{FIXTURES}/approval.yaml");
    let o = agentic(s, &["run", &approval, "--input", "input=data", "--memory-id", "a1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        shown(s, &["show", "a1"]),
        "run:     a1
name:    approval
status:  suspended
updated: T
steps:   2
spec:    approval 0f750d12e6125d9c294834f54b0d96b1f31cce74cde2d492d955c7aee58d700f
pending:
  human-review (agent `review`): Approve PROCESSED: data?
state:
  input = \"data\"
  processed_data = \"PROCESSED: data\"
"
    );
}

#[test]
fn a_long_output_is_cut_as_long_state_values_are_and_all_shows_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("long.yaml");
    std::fs::write(&spec, "version: 1\nroot: n\nagents:\n  n: { kind: compute, value: \"range(100) | list\" }\n")
        .unwrap();
    let o = agentic(&store, &["run", spec.to_str().unwrap(), "--memory-id", "long"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cut = shown(&store, &["show", "long"]);
    let output: Vec<&str> = cut.lines().filter(|l| l.starts_with("output:")).collect();
    assert_eq!(output, ["output:  [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,… (291 chars)"]);
    let all = shown(&store, &["show", "long", "--all"]);
    let numbers: Vec<u32> = (0..100).collect();
    assert!(all.contains(&format!("output:  {}\n", json!(numbers))), "{all}");
}
