//! One error for a run id the store does not hold, whichever command is given it (`respond`, `resume`,
//! `fork`, `show`, `report`): the same sentence naming the id and the store, suggesting `agentic runs`, and exit 1
//! (and nothing before it).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use crate::binary::{Cli, stderr};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// Runs the binary in `cwd`; `store` goes to `$AGENTIC_STORE` when given (else the default `./.agentic`).
fn agentic(cwd: &Path, store: Option<&Path>, args: &[&str]) -> Output {
    let cli = Cli::new(args).current_dir(cwd);
    match store {
        Some(s) => cli.store(s),
        None => cli,
    }
    .output()
}

/// The commands that take a run id, each given `id` (`report` writes to `out`).
fn commands<'a>(id: &'a str, out: &'a str) -> [Vec<&'a str>; 5] {
    [
        vec!["respond", id, "yes"],
        vec!["resume", id],
        vec!["fork", id, "--at", "1"],
        vec!["show", id],
        vec!["report", id, "-o", out],
    ]
}

#[test]
fn every_command_words_an_unknown_run_id_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs");
    let out = dir.path().join("r.html");
    // A store that holds a run, so that the id is unknown in a store that is not empty.
    let approval = format!("{FIXTURES}/approval.yaml");
    let o = agentic(dir.path(), Some(&store), &["run", &approval, "--input", "input=x", "--memory-id", "known"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    let s = store.display();
    let expected = format!("error: no run `nope` in store {s}; list its runs with `agentic runs --store {s}`\n");
    for args in commands("nope", out.to_str().unwrap()) {
        // `--store DIR` and `$AGENTIC_STORE` say the same.
        for (store_env, args) in
            [(Some(store.as_path()), args.clone()), (None, [&args[..], &["--store", &s.to_string()]].concat())]
        {
            let o = agentic(dir.path(), store_env, &args);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
            assert!(o.stdout.is_empty(), "{args:?}");
            // Only the error: `resume` names the run it resumes once it found it.
            assert_eq!(stderr(&o), expected, "{args:?}");
        }
    }
    assert!(!out.exists(), "no report is written for an unknown run");
}

#[test]
fn in_the_default_store_the_suggestion_needs_no_store_option() {
    let dir = tempfile::tempdir().unwrap();
    let expected = "error: no run `r-2` in store .agentic; list its runs with `agentic runs`\n";
    for args in commands("r-2", "r.html") {
        let o = agentic(dir.path(), None, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), expected, "{args:?}");
    }
}
