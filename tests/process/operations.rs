//! Operating `agentic serve` and the CLI (issue #43, item 6): the liveness probe without the token and the
//! readiness probe behind it, what the server says while it drains, read commands that never create a store,
//! and the exit codes of SPEC.md §2 for a store in use or a server that does not answer (75) and a token it
//! refuses (77). Also: `@daily` schedules, CLI runs through a server named after their file, `serve --help`.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary::{Cli, Serve, agentic, stderr, stdout};

const HELLO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specs/hello.yaml");

/// A run that holds its store for `secs` seconds: the CLI sleeps through a `wait` in the process.
fn pause(secs: u64) -> String {
    format!(
        "version: 1\nname: pause\nroot: main\nagents:\n  main: {{ kind: sequence, agents: [hold, done], output_key: r }}\n  \
         hold: {{ kind: wait, for: {secs}s, output_key: fired }}\n  done: {{ kind: compute, template: \"done\", output_key: r }}\n"
    )
}

/// (exit code, stdout, stderr) of `agentic ARGS` in the working directory `cwd`, with no store variable.
fn cli_in(cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Cli::new(args).current_dir(cwd).output();
    (o.status.code(), stdout(&o), stderr(&o))
}

/// The server's own lines (`agentic serve: ..`, not its log) after the first (its address), once one of them is
/// `last` (the server's stderr is read by a thread: the last lines arrive a moment after it ends).
fn lines_until(lines: &std::sync::Arc<std::sync::Mutex<Vec<String>>>, last: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen: Vec<String> =
            lines.lock().unwrap().iter().filter(|l| l.starts_with("agentic serve: ")).skip(1).cloned().collect();
        if seen.iter().any(|l| l == last) || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_without_the_token_and_readyz_needs_it() {
    let served =
        Serve::fresh().token(Some("s3cret")).specs(&[("hello.yaml", &std::fs::read_to_string(HELLO).unwrap())]).start();
    let http = reqwest::Client::new();
    let store = served.store.display().to_string();

    // Liveness: no token needed, and nothing but liveness said.
    let open = http.get(format!("{}/healthz", served.url)).send().await.unwrap();
    assert_eq!(open.status().as_u16(), 200);
    assert_eq!(open.text().await.unwrap(), r#"{"status":"ok"}"#);
    // With the token: the whole body of SERVER.md §2.
    let full = http.get(format!("{}/healthz", served.url)).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(full.status().as_u16(), 200);
    assert_eq!(full.json::<Value>().await.unwrap(), json!({"status": "ok", "store": store, "runs_in_flight": 0}));
    // A wrong token is no token: liveness only.
    let wrong = http.get(format!("{}/healthz", served.url)).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.text().await.unwrap(), r#"{"status":"ok"}"#);

    // Readiness: behind the token.
    let refused = http.get(format!("{}/readyz", served.url)).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"error": "missing or wrong credential: send the header `Authorization: Bearer <API key or token>`"})
    );
    let ready = http.get(format!("{}/readyz", served.url)).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        json!({
            "status": "ready", "store": store, "store_reachable": true, "accepting_runs": true,
            "runs_in_flight": 0, "specs": ["hello"], "shared_store": false
        })
    );

    // A schedule on a cron nickname: `@daily` is midnight every day in its time zone.
    let created = http
        .post(format!("{}/api/v1/schedules", served.url))
        .bearer_auth("s3cret")
        .json(&json!({"id": "nightly", "spec_name": "hello", "cron": "@daily", "inputs": {"name": "Ada"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["cron"], "@daily");
    // The next midnight UTC after the schedule was created.
    let created_at = humantime::parse_rfc3339_weak(created["created_at"].as_str().unwrap()).unwrap();
    let day = created_at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 86_400;
    let midnight = std::time::UNIX_EPOCH + Duration::from_secs((day + 1) * 86_400);
    assert_eq!(created["next_tick"], humantime::format_rfc3339_millis(midnight).to_string(), "{created}");
    let refused = http
        .post(format!("{}/api/v1/schedules", served.url))
        .bearer_auth("s3cret")
        .json(&json!({"id": "boot", "spec_name": "hello", "cron": "@reboot", "inputs": {"name": "Ada"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["error"],
        "cron: `@reboot` is not one of the nicknames @yearly, @annually, @monthly, @weekly, @daily, @midnight, \
         @hourly; else give 5 fields (minute hour day-of-month month day-of-week)"
    );
    assert_eq!(served.term(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_says_when_it_drains_and_when_it_stops() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    // Nothing in flight.
    let served = Serve::fresh().start();
    let lines = served.stderr_lines();
    assert_eq!(served.term(), Some(0));
    let seen = lines_until(&lines, "agentic serve: stopped");
    assert_eq!(
        seen,
        ["agentic serve: stopping (no run in flight; Ctrl-C again to stop at once)", "agentic serve: stopped"]
    );

    // One run waiting for a slow model: the drain waits for its step; a second SIGTERM stops at once.
    let model = MockServer::start().await;
    let completion = json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "late"}, "finish_reason": "stop"}]
    });
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion).set_delay(Duration::from_secs(20)))
        .mount(&model)
        .await;
    let spec = format!(
        "version: 1\nroot: main\nmodels:\n  default: {{ provider: openai, base_url: \"{}/v1\", model: m }}\n\
         agents:\n  main: {{ kind: llm, user: hi, output_key: a }}\n",
        model.uri()
    );
    let served = Serve::fresh().env("OPENAI_API_KEY", "sk-test").start();
    let http = reqwest::Client::new();
    let posted = http.post(format!("{}/api/v1/runs", served.url)).json(&json!({"spec": spec})).send().await.unwrap();
    assert_eq!(posted.status().as_u16(), 201);
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.received_requests().await.unwrap_or_default().is_empty() {
        assert!(Instant::now() < deadline, "the run never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lines = served.stderr_lines();
    served.signal("TERM");
    let draining = "agentic serve: draining: no new runs; waiting up to 30 s for the current step of 1 run in flight \
                    (it continues at the next start); Ctrl-C again to stop at once";
    let seen = lines_until(&lines, draining);
    assert_eq!(seen, [draining]);
    // While it drains it is alive but not ready: a load balancer stops sending it traffic.
    let health = http.get(format!("{}/healthz", served.url)).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let ready = http.get(format!("{}/readyz", served.url)).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 503);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        json!({
            "status": "unavailable", "store": served.store.display().to_string(), "store_reachable": true,
            "accepting_runs": false, "runs_in_flight": 1, "specs": [], "shared_store": false,
            "error": "the server is shutting down: it accepts no new runs"
        })
    );
    let store = served.store.clone();
    assert_eq!(served.term(), Some(130));
    let seen =
        lines_until(&lines, "agentic serve: stopped at once; the steps that were running run again at the next start");
    assert_eq!(
        seen,
        [draining, "agentic serve: stopped at once; the steps that were running run again at the next start"]
    );
    assert!(!store.join("server.json").exists(), "the advertisement is removed");
    // The probe's expected 503 is not logged as an error.
    let logged = lines.lock().unwrap().clone();
    assert!(!logged.iter().any(|l| l.contains("ERROR")), "{logged:?}");
}

#[test]
fn read_commands_on_a_missing_store_say_so_and_create_nothing() {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("empty")).unwrap();
    let missing = "error: no store at nope (no such directory); runs are kept in ./.agentic unless --store or \
                   $AGENTIC_STORE names another store\n";
    let not_a_store = "error: no store at empty (the directory holds no agentic store); runs are kept in ./.agentic \
                       unless --store or $AGENTIC_STORE names another store\n";
    let commands: [&[&str]; 6] = [
        &["runs"],
        &["show", "r1"],
        &["report", "r1", "-o", "r.html"],
        &["respond", "r1", "yes"],
        &["resume", "r1"],
        &["fork", "r1", "--at", "1"],
    ];
    for args in commands {
        for (store, expected) in [("nope", missing), ("empty", not_a_store)] {
            let args = [args, &["--store", store]].concat();
            assert_eq!(cli_in(cwd.path(), &args), (Some(1), String::new(), expected.to_string()), "{args:?}");
        }
    }
    // The default store, before any run: no runs yet, and still nothing created.
    assert_eq!(cli_in(cwd.path(), &["runs"]), (Some(0), String::new(), "no runs in store .agentic\n".to_string()));
    assert_eq!(cli_in(cwd.path(), &["runs", "--json"]), (Some(0), "[]\n".to_string(), String::new()));
    let (code, _, err) = cli_in(cwd.path(), &["show", "r1"]);
    assert_eq!(
        (code, err.as_str()),
        (Some(1), "error: no run `r1` in store .agentic; list its runs with `agentic runs`\n")
    );
    let mut created: Vec<String> =
        std::fs::read_dir(cwd.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    created.sort();
    assert_eq!(created, ["empty"], "nothing is created");
    assert_eq!(std::fs::read_dir(cwd.path().join("empty")).unwrap().count(), 0, "nothing is created in `empty`");
}

#[test]
fn a_store_in_use_or_a_server_that_does_not_answer_is_exit_75() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("pause.yaml");
    std::fs::write(&spec, pause(30)).unwrap();
    let mut holder = Cli::new(["run", spec.to_str().unwrap(), "--memory-id", "p"]).store(&store).spawn();
    // The run holds the store while it sleeps through its wait: `show` answers once the run is recorded.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !store.join("db").exists() {
        assert!(Instant::now() < deadline, "the run never opened its store");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the store's first open (created, flushed, opened again).
    std::thread::sleep(Duration::from_millis(1500));
    let in_use = format!("error: store {} is in use by another process; try again once it is free\n", store.display());
    let out = dir.path().join("r.html");
    let commands: [&[&str]; 5] = [
        &["runs"],
        &["show", "p"],
        &["report", "p", "-o", out.to_str().unwrap()],
        &["respond", "p", "yes"],
        &["resume", "p"],
    ];
    for args in commands {
        let o = agentic(&store, args);
        assert_eq!((o.status.code(), stdout(&o)), (Some(75), String::new()), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), in_use, "{args:?}");
    }
    // A second `agentic serve` on it is refused the same way.
    let o = agentic(&store, &["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert_eq!(stderr(&o), in_use);

    // A server advertised in the store that does not answer (its port closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    std::fs::write(store.join("server.json"), json!({"url": url, "pid": 1, "token_env": null}).to_string()).unwrap();
    for args in [&["runs"][..], &["show", "p"], &["resume", "p"]] {
        let o = agentic(&store, args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(75), "{args:?}: {err}");
        let err = err.strip_prefix("run: p\n").unwrap_or(&err);
        assert!(err.starts_with(&format!("error: the server at {url} does not answer: ")), "{args:?}: {err}");
        assert!(err.ends_with("; try again once it is back\n"), "{args:?}: {err}");
    }
    // One that takes the connection and never answers (a paused process): unavailable after the timeout.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", hung.local_addr().unwrap());
    std::fs::write(store.join("server.json"), json!({"url": url, "pid": 1, "token_env": null}).to_string()).unwrap();
    let started = Instant::now();
    let o = Cli::new(["runs"]).store(&store).env("AGENTIC_SERVER_TIMEOUT", "1").output();
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "error: the server at {url} does not answer: no answer within 1 s ($AGENTIC_SERVER_TIMEOUT); try again \
             once it is back\n"
        )
    );
    assert!(started.elapsed() < Duration::from_secs(20), "the command gave up: {:?}", started.elapsed());
    drop(hung);
    let _ = holder.kill();
    let _ = holder.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_server_refuses_is_exit_77() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let served = Serve::on(&store).token(Some("s3cret")).start();
    let refused = |how: &str| format!("error: the server at {} refused the request: {how}\n", served.url);
    let wrong = refused("it refuses the token in $AGENTIC_TOKEN; set $AGENTIC_TOKEN to the server's token");
    let unset =
        refused("it needs a key or a token; set $AGENTIC_KEY to an API key, or $AGENTIC_TOKEN to the server's token");
    for args in [&["runs"][..], &["show", "r1"], &["respond", "r1", "yes"]] {
        let o = Cli::new(args).store(&store).env("AGENTIC_TOKEN", "wrong").output_async().await;
        assert_eq!((o.status.code(), stderr(&o)), (Some(77), wrong.clone()), "{args:?}");
        let o = Cli::new(args).store(&store).output_async().await;
        assert_eq!((o.status.code(), stderr(&o)), (Some(77), unset.clone()), "{args:?}");
    }
    let o = Cli::new(["run", HELLO, "--input", "name=Ada"])
        .store(&store)
        .env("AGENTIC_TOKEN", "wrong")
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(77), "{}", stderr(&o));
    assert!(stderr(&o).ends_with(&wrong), "{}", stderr(&o));
    // The right token goes through.
    let o = Cli::new(["runs"]).store(&store).env("AGENTIC_TOKEN", "s3cret").output_async().await;
    assert_eq!((o.status.code(), stderr(&o)), (Some(0), format!("no runs in store {}\n", store.display())));
    assert_eq!(served.term(), Some(0));
}

#[test]
fn a_cli_run_through_a_server_is_named_after_its_file_as_a_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("greet.yaml");
    // No `name:`: the file stem names the run.
    std::fs::write(&spec, "version: 1\nroot: hi\nagents:\n  hi: { kind: compute, template: \"hi\", output_key: r }\n")
        .unwrap();
    let spec = spec.to_str().unwrap();
    let names = |store: &Path| -> Vec<String> {
        let o = agentic(store, &["runs", "--json"]);
        let runs: Value = serde_json::from_str(&stdout(&o)).unwrap();
        runs.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
    };
    let local = dir.path().join("local");
    let o = agentic(&local, &["run", spec]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(names(&local), ["greet"]);

    let store = dir.path().join("served");
    let served = Serve::on(&store).start();
    let o = agentic(&store, &["run", spec]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "hi\n".to_string()), "{}", stderr(&o));
    assert_eq!(names(&store), ["greet"]);
    assert_eq!(served.term(), Some(0));
}

#[test]
fn serve_help_says_the_specs_become_mcp_tools_and_a2a_agents() {
    let o = Command::new(crate::binary::BIN).args(["serve", "--help"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(
            "The specs of --specs also become MCP tools (streamable HTTP at /mcp, one tool per spec) and A2A agents \
             (JSON-RPC at /a2a/NAME, cards at /.well-known/NAME/agent-card.json)."
        ),
        "{help}"
    );
    assert!(help.contains("and as MCP tools (at /mcp) and A2A agents (at /a2a/NAME)"), "{help}");
}

#[test]
fn a_specs_directory_or_schedules_file_serve_cannot_use_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let o = Cli::new(["serve", "--listen", "127.0.0.1:0", "--specs", missing.to_str().unwrap()])
        .store(dir.path().join("store"))
        .output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "error: cannot read the specs directory {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    let specs = dir.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(specs.join("schedules.yaml"), "- { id: b, spec_name: x, cron: '* * * * *', timezone: Moon }\n")
        .unwrap();
    let o = Cli::new(["serve", "--listen", "127.0.0.1:0", "--specs", specs.to_str().unwrap()])
        .store(dir.path().join("store"))
        .output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).starts_with(&format!("error: {}: ", specs.join("schedules.yaml").display())), "{}", stderr(&o));
}
