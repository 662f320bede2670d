//! `--store` and `$AGENTIC_STORE` (SPEC.md §2): a directory (the sled store) or a PostgreSQL URL. A value with
//! another URL scheme (`sled:./runs`, `sqlite://…`, `http://…`) is a usage error (64) of every command, naming
//! the value and the accepted forms, and creates nothing in the working directory; a plain path still works.

use crate::binary::{Cli, stderr, stdout};

const HELLO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs/hello.yaml");

/// The error clap prints for the `--store` value `value` of scheme `scheme`.
fn refused(value: &str, scheme: &str) -> String {
    format!(
        "error: invalid value '{value}' for '--store <DIR>': unknown store scheme `{scheme}:`; expected a directory \
         (the sled store, e.g. ./runs) or a PostgreSQL URL (postgres://... or postgresql://...)\n\nFor more \
         information, try '--help'.\n"
    )
}

#[test]
fn a_store_with_an_unknown_scheme_is_a_usage_error_and_creates_nothing() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let cases: [(&[&str], &str, &str); 7] = [
        (&["run", HELLO, "--input", "name=Ada", "--store", "sled:./runs"], "sled:./runs", "sled"),
        (&["run", HELLO, "--input", "name=Ada", "--store", "sqlite://runs.db"], "sqlite://runs.db", "sqlite"),
        (&["runs", "--store", "sled:runs"], "sled:runs", "sled"),
        (&["show", "r1", "--store", "http://127.0.0.1:7878"], "http://127.0.0.1:7878", "http"),
        (&["respond", "r1", "yes", "--store", "sled:./runs"], "sled:./runs", "sled"),
        (&["resume", "r1", "--store", "redis://localhost"], "redis://localhost", "redis"),
        (&["serve", "--store", "sled:./runs"], "sled:./runs", "sled"),
    ];
    for (args, value, scheme) in cases {
        let o = Cli::new(args).current_dir(cwd.path()).output();
        assert_eq!(o.status.code(), Some(64), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "", "{args:?}");
        assert_eq!(stderr(&o), refused(value, scheme), "{args:?}");
    }
    // An empty value names no store.
    for args in [&["runs", "--store", ""][..], &["run", HELLO, "--input", "name=Ada", "--store", " "]] {
        let o = Cli::new(args).current_dir(cwd.path()).output();
        assert_eq!(o.status.code(), Some(64), "{args:?}: {}", stderr(&o));
        let value = args[args.len() - 1];
        assert_eq!(
            stderr(&o),
            format!(
                "error: invalid value '{value}' for '--store <DIR>': the store is empty; expected a directory (the \
                 sled store, e.g. ./runs) or a PostgreSQL URL (postgres://... or postgresql://...), or leave --store \
                 and $AGENTIC_STORE out for ./.agentic\n\nFor more information, try '--help'.\n"
            ),
            "{args:?}"
        );
    }
    // The same value from the environment.
    let o = Cli::new(["runs"]).store("sled:./runs").current_dir(cwd.path()).output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert_eq!(stderr(&o), refused("sled:./runs", "sled"));

    let created: Vec<_> =
        std::fs::read_dir(cwd.path()).expect("read the working dir").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(created, Vec::<std::ffi::OsString>::new(), "nothing is created in the working directory");

    // A plain relative path is a directory store, as before.
    let o = Cli::new(["run", HELLO, "--input", "name=Ada", "--store", "runs"]).current_dir(cwd.path()).output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "{\"greeting\":\"Hello, Ada! Welcome to agentic.\",\"loud\":\"HELLO, ADA! WELCOME TO AGENTIC.\"}\n"
    );
    assert!(cwd.path().join("runs").is_dir(), "the store directory `runs`");
    assert!(!cwd.path().join("sled:").exists());
}
