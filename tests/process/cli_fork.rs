//! `agentic fork RUN_ID --at SEQ` through the real binary, every command a new process, on a sled store on
//! disk: the fork re-runs only the steps after SEQ (read from its journal), prints what `resume` prints, and
//! leaves the original as it was; a fork of a suspended run asks its human again; bad input is refused
//! before anything is written.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use agentic::engine::{RunRecord, StepRecord};
use agentic::store::SledStore;
use serde_json::{Value, json};

use crate::binary::{agentic, stderr, stdout};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn json_out(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

/// A sequence of ten compute agents: a1 writes v1 = 1, a_i writes v_i = 2 * v_(i-1) + i; the result is v10
/// (2036). Steps 1 to 10 of its journal are a1 to a10, step 11 the sequence's completion.
fn ten_steps_spec(dir: &Path) -> String {
    let mut yaml = String::from("version: 1\nname: ten\nroot: ten\nagents:\n");
    let names: Vec<String> = (1..=10).map(|i| format!("a{i}")).collect();
    yaml += &format!("  ten: {{ kind: sequence, agents: [{}], output_key: v10 }}\n", names.join(", "));
    yaml += "  a1: { kind: compute, value: \"1\", output_key: v1 }\n";
    for i in 2..=10 {
        yaml += &format!("  a{i}: {{ kind: compute, value: \"v{} * 2 + {i}\", output_key: v{i} }}\n", i - 1);
    }
    let path = dir.join("ten.yaml");
    std::fs::write(&path, yaml).unwrap();
    path.to_string_lossy().into_owned()
}

/// A run's record and journal, read from the store directory (opened and closed again for the next command).
fn read(store: &Path, id: &str) -> (Option<RunRecord>, Vec<StepRecord>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let s = SledStore::open(store).unwrap().store_ref();
    rt.block_on(async { (s.run_dyn(id).await.unwrap(), s.records_dyn(id).await.unwrap()) })
}

/// The agents whose completions a journal holds after step `after`, in order.
fn ran_after(records: &[StepRecord], after: u64) -> Vec<String> {
    records.iter().filter(|r| r.seq > after).filter_map(|r| r.invocation.as_ref()).map(|i| i.agent.clone()).collect()
}

#[test]
fn a_fork_at_step_4_runs_steps_5_to_10_only_and_prints_what_resume_prints() {
    let dir = tempfile::tempdir().unwrap();
    let s = &dir.path().join("store");
    let spec = ten_steps_spec(dir.path());
    let o = agentic(s, &["run", &spec, "--memory-id", "ten-1"]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "2036\n"), "{}", stderr(&o));
    let before = read(s, "ten-1");
    assert_eq!(ran_after(&before.1, 0), ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "ten"]);

    let o = agentic(s, &["fork", "ten-1", "--at", "4", "--memory-id", "ten-f"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2036\n", "the same output as the original");
    assert_eq!(stderr(&o), "run: ten-f\nforked from ten-1 at step 4\n");
    let (fork, records) = read(s, "ten-f");
    assert_eq!(ran_after(&records, 4), ["a5", "a6", "a7", "a8", "a9", "a10", "ten"], "only steps 5 to 10 ran");
    for (f, o) in records.iter().zip(&before.1).take(4) {
        assert_eq!(StepRecord { run_id: "ten-1".into(), ..f.clone() }, *o, "steps 1 to 4 are the original's");
    }
    let fork = fork.unwrap();
    assert_eq!((fork.status.to_string(), &fork.detail), ("completed".to_string(), &json!(2036)));
    assert_eq!(read(s, "ten-1"), before, "the original's record and journal are unchanged");

    // `show` and the report name the origin.
    let o = agentic(s, &["show", "ten-f"]);
    assert!(stdout(&o).contains("\nsteps:   11\nforked:  from ten-1 at step 4\n"), "{}", stdout(&o));
    let shown = json_out(&agentic(s, &["show", "ten-f", "--json"]));
    assert_eq!(shown["forked_from"], json!({"run_id": "ten-1", "at_seq": 4}));
    assert_eq!(json_out(&agentic(s, &["show", "ten-1", "--json"]))["forked_from"], json!(null));
    let html = dir.path().join("fork.html");
    let o = agentic(s, &["report", "ten-f", "-o", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("forked from <code>ten-1</code> at step 4</span>"), "the header names the origin");
    assert!(page.contains("<div class=\"ms-kind\">forked</div>"), "the fork is a milestone");

    // Without --memory-id: a new id, printed first; --json as `resume --json`.
    let o = agentic(s, &["fork", "ten-1", "--at", "9", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = json_out(&o);
    let id = out["run_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(out, json!({"run_id": id, "status": "completed", "output": 2036, "pending": []}));
    assert_eq!(stderr(&o), format!("run: {id}\nforked from ten-1 at step 9\n"));
    assert_eq!(ran_after(&read(s, &id).1, 9), ["a10", "ten"]);
    // At the last step: nothing is left to run.
    let o = agentic(s, &["fork", "ten-1", "--at", "11", "--memory-id", "ten-end"]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "2036\n"), "{}", stderr(&o));
    assert!(ran_after(&read(s, "ten-end").1, 11).is_empty());
    assert_eq!(read(s, "ten-1"), before);
}

#[test]
fn a_fork_of_a_suspended_run_before_its_human_step_asks_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = &dir.path().join("store");
    let approval = format!("{FIXTURES}/approval.yaml");
    let o = agentic(s, &["run", &approval, "--input", "input=data", "--memory-id", "order-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let before = read(s, "order-1");
    // Step 1 holds the inputs, step 2 the processor; the human step has not completed.
    assert_eq!(ran_after(&before.1, 0), ["processor"]);

    let o = agentic(s, &["fork", "order-1", "--at", "1", "--memory-id", "order-2", "--json"]);
    assert_eq!(o.status.code(), Some(2), "suspended again: {}", stderr(&o));
    assert_eq!(
        json_out(&o),
        json!({"run_id": "order-2", "status": "suspended", "output": null,
               "pending": [{"id": "human-review", "prompt": "Approve PROCESSED: data?", "agent": "review"}]})
    );
    assert_eq!(
        stderr(&o),
        "run: order-2\nforked from order-1 at step 1\npending: human-review (agent `review`): Approve PROCESSED: data?\n"
    );
    assert_eq!(ran_after(&read(s, "order-2").1, 1), ["processor"], "the processor came after step 1: it ran again");
    assert_eq!(read(s, "order-1"), before, "the original still waits, unchanged");

    let o = agentic(s, &["respond", "order-2", "REJECTED"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = agentic(s, &["resume", "order-2"]);
    assert_eq!(
        (o.status.code(), stdout(&o).as_str()),
        (Some(0), "Final: PROCESSED: data | REJECTED\n"),
        "{}",
        stderr(&o)
    );

    // The original is answered on its own.
    assert_eq!(read(s, "order-1"), before);
    assert_eq!(agentic(s, &["respond", "order-1", "APPROVED"]).status.code(), Some(0));
    let o = agentic(s, &["resume", "order-1"]);
    assert_eq!(stdout(&o), "Final: PROCESSED: data | APPROVED\n", "{}", stderr(&o));
}

#[test]
fn bad_input_is_refused_naming_the_problem_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = &dir.path().join("store");
    let spec = ten_steps_spec(dir.path());
    assert_eq!(agentic(s, &["run", &spec, "--memory-id", "ten-1"]).status.code(), Some(0));
    let before = read(s, "ten-1");
    let refused = |args: &[&str], code: i32, message: &str| {
        let o = agentic(s, args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "", "{args:?}");
        assert_eq!(stderr(&o), message, "{args:?}");
    };
    refused(
        &["fork", "ten-1", "--at", "12", "--memory-id", "f"],
        64,
        "error: cannot fork run `ten-1` at step 12: it has 11 steps (fork at 0 to 11)\n",
    );
    let shown = s.display();
    refused(
        &["fork", "nope", "--at", "1"],
        1,
        &format!("error: no run `nope` in store {shown}; list its runs with `agentic runs --store {shown}`\n"),
    );
    refused(
        &["fork", "ten-1", "--at", "2", "--memory-id", "ten-1"],
        64,
        "error: run id `ten-1` is already used in the store; choose another --memory-id\n",
    );
    refused(
        &["fork", "ten-1", "--at", "2", "--memory-id", " "],
        64,
        "error: --memory-id: ` ` is blank (a run id is 1 to 200 bytes, not blank, without control characters, \
         and not `.` or `..`)\n",
    );
    refused(
        &["fork", "ten-1", "--at", "2", "--memory-id", ".."],
        64,
        "error: --memory-id: `..` is a path step (a run id is 1 to 200 bytes, not blank, without control \
         characters, and not `.` or `..`)\n",
    );
    // A spec of another structure is refused before the fork is written.
    let other = dir.path().join("other.yaml");
    let text = std::fs::read_to_string(&spec).unwrap().replace("output_key: v10 }", "output_key: last }");
    std::fs::write(&other, text).unwrap();
    refused(
        &["fork", "ten-1", "--at", "2", "--memory-id", "f", "--spec", other.to_str().unwrap()],
        64,
        &format!(
            "error: run `ten-1` cannot move to {}: its structure changed: agent `ten` at `root`: its output key \
             changed from `v10` to `last`; fork it without --spec to continue on its own spec\n",
            other.display()
        ),
    );
    // What the argument parser refuses is a usage error too.
    for args in [&["fork", "ten-1"][..], &["fork", "ten-1", "--at", "-1"], &["fork", "ten-1", "--at", "x"]] {
        let o = agentic(s, args);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--at"), "{args:?}: {}", stderr(&o));
    }
    let o = agentic(s, &["runs", "--json"]);
    assert_eq!(json_out(&o).as_array().unwrap().len(), 1, "no run was written");
    assert!(read(s, "f").1.is_empty(), "no step was written");
    assert_eq!(read(s, "ten-1"), before);
}
