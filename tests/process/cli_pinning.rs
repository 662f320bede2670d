//! A run keeps the spec it started with (SERVER.md §5), with the CLI on a sled store: a suspended run whose
//! spec file is deleted, then rewritten with other templates, completes on the text it started with; a new run
//! takes the new text; `resume --spec` moves a run to a newer text only when its structure is unchanged, and
//! otherwise refuses naming the change.

#![allow(clippy::unwrap_used)]

use crate::binary::{agentic, stderr, stdout};
use serde_json::Value;

const APPROVAL: &str = r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, agents: [offer, approve, decide], output_key: decision }
  offer: { kind: compute, inputs: [item], template: "ship {{ item }}", output_key: offer }
  approve: { kind: human, prompt: "Approve: {{ offer }}?", response_id: manager, output_key: answer }
  decide: { kind: compute, template: "{{ offer }}: {{ answer }}", output_key: decision }
"#;

/// The same structure, other templates.
const APPROVAL_V2: &str = r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, agents: [offer, approve, decide], output_key: decision }
  offer: { kind: compute, inputs: [item], template: "send {{ item }}", output_key: offer }
  approve: { kind: human, prompt: "OK to {{ offer }}?", response_id: manager, output_key: answer }
  decide: { kind: compute, template: "v2 {{ offer }} -> {{ answer }}", output_key: decision }
"#;

/// Another structure: a step added.
const APPROVAL_V3: &str = r#"
version: 1
name: approval
root: main
agents:
  main: { kind: sequence, agents: [offer, approve, decide, log], output_key: decision }
  offer: { kind: compute, inputs: [item], template: "send {{ item }}", output_key: offer }
  approve: { kind: human, prompt: "OK to {{ offer }}?", response_id: manager, output_key: answer }
  decide: { kind: compute, template: "v3 {{ offer }} -> {{ answer }}", output_key: decision }
  log: { kind: compute, template: "logged", output_key: logged }
"#;

fn show(store: &std::path::Path, run_id: &str) -> Value {
    let out = agentic(store, &["show", run_id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn a_suspended_run_completes_on_its_own_text_after_the_file_is_deleted_then_edited() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("approval.yaml");
    std::fs::write(&spec, APPROVAL).unwrap();
    let spec_arg = spec.to_str().unwrap();

    let out = agentic(&store, &["run", spec_arg, "--input", "item=widgets", "--memory-id", "r1"]);
    assert_eq!(out.status.code(), Some(2), "suspended: {}", stderr(&out));
    let shown = show(&store, "r1");
    assert_eq!(shown["spec"]["name"], "approval");
    let hash = shown["spec"]["hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64, "a SHA-256 in hex: {hash}");

    // Deleted: the run still resumes, on its text.
    std::fs::remove_file(&spec).unwrap();
    let out = agentic(&store, &["respond", "r1", "yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A second run suspended before the edit.
    std::fs::write(&spec, APPROVAL).unwrap();
    let out = agentic(&store, &["run", spec_arg, "--input", "item=gears", "--memory-id", "r2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    std::fs::remove_file(&spec).unwrap();
    let out = agentic(&store, &["resume", "r1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "ship widgets: yes");
    assert_eq!(stderr(&out), "run: r1\n", "a deleted file is no news: the run never read it");

    // Edited: the run started before the edit keeps its text; a new run takes the new one.
    std::fs::write(&spec, APPROVAL_V2).unwrap();
    agentic(&store, &["respond", "r2", "ok"]);
    let out = agentic(&store, &["resume", "r2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "ship gears: ok");
    let source = std::fs::canonicalize(&spec).unwrap();
    let source = source.display();
    assert_eq!(
        stderr(&out),
        format!(
            "run: r2\nnote: {source} changed since the run started; the run continues on the spec text it started \
             with (--spec {source} applies the file if its structure is the same)\n"
        )
    );
    assert_eq!(show(&store, "r2")["spec"]["hash"], hash.as_str(), "the same text, stored once");

    let out = agentic(&store, &["run", spec_arg, "--input", "item=bolts", "--memory-id", "r3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let new_hash = show(&store, "r3")["spec"]["hash"].as_str().unwrap().to_string();
    assert_ne!(new_hash, hash);
    agentic(&store, &["respond", "r3", "fine"]);
    let out = agentic(&store, &["resume", "r3"]);
    assert_eq!(stdout(&out).trim(), "v2 send bolts -> fine");
}

#[test]
fn resume_with_a_spec_upgrades_the_same_structure_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let v1 = dir.path().join("approval.yaml");
    let v2 = dir.path().join("approval_v2.yaml");
    let v3 = dir.path().join("approval_v3.yaml");
    std::fs::write(&v1, APPROVAL).unwrap();
    std::fs::write(&v2, APPROVAL_V2).unwrap();
    std::fs::write(&v3, APPROVAL_V3).unwrap();

    let out = agentic(&store, &["run", v1.to_str().unwrap(), "--input", "item=nuts", "--memory-id", "u"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    agentic(&store, &["respond", "u", "go"]);

    // Another structure: refused, naming what changed and where; the run is left as it was.
    let before = show(&store, "u");
    let out = agentic(&store, &["resume", "u", "--spec", v3.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "its structure changed: agent `main` at `root`: its sub-agents changed from [`offer`, `approve`, \
             `decide`] to [`offer`, `approve`, `decide`, `log`]"
        ),
        "{}",
        stderr(&out)
    );
    let after = show(&store, "u");
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(after["status"], "suspended");

    // A renamed output key: what the run wrote under the old one would be missing for its readers.
    let renamed = dir.path().join("approval_renamed.yaml");
    std::fs::write(
        &renamed,
        APPROVAL.replace("output_key: offer", "output_key: proposal").replace("{{ offer }}", "{{ proposal }}"),
    )
    .unwrap();
    let out = agentic(&store, &["resume", "u", "--spec", renamed.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "its structure changed: agent `offer` at `root/0`: its output key changed from `offer` to `proposal`"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(show(&store, "u")["spec"], before["spec"]);

    // The same structure with other templates: upgraded, and the rest of the run runs on the new text.
    let out = agentic(&store, &["resume", "u", "--spec", v2.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "v2 ship nuts -> go", "steps before the upgrade keep their results");
    assert_ne!(show(&store, "u")["spec"]["hash"], before["spec"]["hash"]);
}
