//! The CLI on a store that `agentic serve` holds (real processes): `runs`, `show`, `report`, `respond`,
//! `resume` and `run` go through the server and print what they print without it.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::binary::{Cli, Serve, Served, agentic, stderr, stdout};

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

/// Stops `served` with SIGTERM: it ends cleanly and removes its advertisement from its store.
fn stop(served: Served) {
    let server_file = served.store.join("server.json");
    assert_eq!(served.term(), Some(0), "SIGTERM stops the server cleanly");
    assert!(!server_file.exists(), "the advertisement is removed");
}

/// (exit code, stdout, stderr) of the binary on `store`.
fn cli(store: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = agentic(store, args);
    (o.status.code(), stdout(&o), stderr(&o))
}

#[test]
fn the_cli_goes_through_the_server_that_holds_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("approval.yaml");
    std::fs::write(&spec, APPROVAL).unwrap();
    let spec = spec.to_str().unwrap();

    // Without a server.
    let (code, _, err) = cli(&store, &["run", spec, "--memory-id", "a1", "--input", "item=tea"]);
    assert_eq!(code, Some(2), "{err}");
    let runs = cli(&store, &["runs"]);
    let show = cli(&store, &["show", "a1"]);
    let show_json = cli(&store, &["show", "a1", "--json"]);
    let local_html = dir.path().join("local.html");
    assert_eq!(cli(&store, &["report", "a1", "-o", local_html.to_str().unwrap()]).0, Some(0));
    let unknown = cli(&store, &["show", "nope"]);

    // The same commands while a server holds the store print the same.
    let served = Serve::on(&store).start();
    let busy = cli(&store, &["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(busy.0, Some(75));
    assert_eq!(
        busy.2,
        format!(
            "error: store {} is in use by another process (the server at {}); try again once it is free\n",
            store.display(),
            served.url
        )
    );
    assert_eq!(cli(&store, &["runs"]), runs);
    assert_eq!(cli(&store, &["show", "a1"]), show);
    assert_eq!(cli(&store, &["show", "a1", "--json"]), show_json);
    assert_eq!(cli(&store, &["show", "nope"]), unknown);
    let served_html = dir.path().join("served.html");
    assert_eq!(cli(&store, &["report", "a1", "-o", served_html.to_str().unwrap()]).0, Some(0));
    assert_eq!(std::fs::read_to_string(&served_html).unwrap(), std::fs::read_to_string(&local_html).unwrap());

    // respond: the server continues the run by itself, and resume prints its outcome.
    let (code, out, err) = cli(&store, &["respond", "a1", "approved"]);
    assert_eq!((code, out.as_str()), (Some(0), ""));
    assert_eq!(
        err,
        format!(
            "answered `manager` for run a1; the server at {} continues it by itself (`agentic show a1 --store {}` \
             shows where it stands)\n",
            served.url,
            store.display()
        )
    );
    let (code, out, err) = cli(&store, &["resume", "a1"]);
    assert_eq!((code, out.as_str()), (Some(0), "ship tea: approved\n"), "{err}");
    assert!(err.starts_with("run: a1\n"), "{err}");
    let (code, _, err) = cli(&store, &["respond", "a1", "again"]);
    assert_eq!(code, Some(1));
    assert_eq!(err, "error: run `a1`: is completed, not suspended: nothing to respond to\n");

    // run: posted to the server; it suspends, and the outcome is printed as without a server.
    let (code, out, err) = cli(&store, &["run", spec, "--memory-id", "a2", "--input", "item=cake", "--json"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err, "run: a2\npending: manager (agent `approve`): Approve: ship cake?\n");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "suspended");
    assert_eq!(v["pending"][0]["id"], "manager");
    let (code, _, err) = cli(&store, &["run", spec, "--memory-id", "a2", "--input", "item=cake"]);
    assert_eq!(code, Some(64));
    assert_eq!(
        err,
        "run: a2\nerror: run `a2` already exists and is suspended; it waits for manager: answer with `agentic \
         respond a2 ..`, then `agentic resume a2` (or choose another --memory-id)\n"
    );
    let shown = cli(&store, &["show", "a2"]);
    stop(served);

    // After the server stops, the store opens here again and holds what the server showed.
    assert_eq!(cli(&store, &["show", "a2"]), shown);
    let (code, _, _) = cli(&store, &["respond", "a2", "no"]);
    assert_eq!(code, Some(0));
    let (code, out, _) = cli(&store, &["resume", "a2"]);
    assert_eq!((code, out.as_str()), (Some(0), "ship cake: no\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_a_run_through_the_server_cancels_it_as_without_a_server() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let model = MockServer::start().await;
    let completion = serde_json::json!({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "late"}, "finish_reason": "stop"}]
    });
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion).set_delay(Duration::from_secs(2)))
        .mount(&model)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("slow.yaml");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nroot: main\nmodels:\n  default: {{ provider: openai, base_url: \"{}/v1\", model: m }}\n\
             agents:\n  main: {{ kind: sequence, agents: [slow, after], output_key: b }}\n  \
             slow: {{ kind: llm, user: hi, output_key: a }}\n  after: {{ kind: llm, user: again, output_key: b }}\n",
            model.uri()
        ),
    )
    .unwrap();
    let served = Serve::on(&store).start();
    let child = Cli::new(["run", spec.to_str().unwrap(), "--memory-id", "r"])
        .store(&store)
        .env("OPENAI_API_KEY", "sk-test")
        .spawn();
    // Once the server runs it (its first step waits for the model), Ctrl-C.
    let deadline = Instant::now() + Duration::from_secs(20);
    while cli(&store, &["show", "r", "--json"]).0 != Some(0) {
        assert!(Instant::now() < deadline, "the run never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("interrupted: cancelling run `r` (Ctrl-C again to exit at once); `agentic resume r` continues it"),
        "{err}"
    );
    assert!(err.ends_with("error: run cancelled\n"), "{err}");
    let (code, shown, _) = cli(&store, &["show", "r", "--json"]);
    assert_eq!(code, Some(0));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["status"], "cancelled");
    assert_eq!(shown["state"].get("b"), None, "the second step never ran");
    stop(served);
}

#[test]
fn run_with_a_memory_id_behaves_the_same_through_the_server() {
    const COUNT: &str = "version: 1\nroot: main\nagents:\n  \
        main: { kind: sequence, agents: [count, ask], output_key: n }\n  \
        count: { kind: compute, inputs: [], value: '(n if n is defined else 0) + 1', output_key: n }\n  \
        ask: { kind: human, prompt: 'again?', response_id: again, optional: true, inputs: [stop], output_key: answer }\n";
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("count.yaml");
    std::fs::write(&spec, COUNT).unwrap();
    let spec = spec.to_str().unwrap();
    let steps: [&[&str]; 4] = [
        &["run", spec, "--memory-id", "c"],
        // A completed id starts a new turn on its state.
        &["run", spec, "--memory-id", "c"],
        // A suspended id is refused with advice.
        &["run", spec, "--memory-id", "s", "--input", "stop=1"],
        &["run", spec, "--memory-id", "s"],
    ];
    let local_store = dir.path().join("local");
    let local: Vec<_> = steps.iter().map(|args| cli(&local_store, args)).collect();
    assert_eq!(local[1].1, "2\n", "{local:?}");
    assert_eq!(local[3].0, Some(64), "{local:?}");
    let store = dir.path().join("served");
    let served = Serve::on(&store).start();
    let remote: Vec<_> = steps.iter().map(|args| cli(&store, args)).collect();
    assert_eq!(remote, local);
    stop(served);
}

/// A run cancelled on the server while its question (with a deadline: the record keeps it) waited takes no
/// answer on any surface: `respond` through the server and, once the server stopped, without it exits 1 with
/// the same hint; `show` lists no pending response and names the question; `run` with its id says `resume`;
/// after `resume` it is answered and the server continues it by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_on_the_server_takes_no_answer_until_it_is_resumed() {
    const TIMED: &str = "version: 1\nname: timed\nroot: main\nagents:\n  \
        main: { kind: sequence, agents: [ask, done], output_key: result }\n  \
        ask: { kind: human, prompt: 'Approve {{ doc }}?', response_id: approve, deadline: 1h, output_key: ok }\n  \
        done: { kind: compute, template: '{{ doc }}: {{ ok }}', output_key: result }\n";
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("timed.yaml");
    std::fs::write(&spec, TIMED).unwrap();
    let spec = spec.to_str().unwrap();
    let served = Serve::on(&store).start();
    let (code, _, err) = cli(&store, &["run", spec, "--memory-id", "t1", "--input", "doc=D"]);
    assert_eq!(code, Some(2), "{err}");
    let cancelled = reqwest::Client::new().post(format!("{}/api/v1/runs/t1/cancel", served.url)).send().await.unwrap();
    assert_eq!(cancelled.status(), 202);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cli(&store, &["show", "t1"]).1.contains("status:  cancelled\n") {
        assert!(Instant::now() < deadline, "the run was never cancelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let s = store.display();
    let refused = format!(
        "error: run `t1`: is cancelled: it has no pending response to answer; resuming it continues the run and asks \
         its questions again (`agentic resume t1 --store {s}`)\n"
    );
    assert_eq!(cli(&store, &["respond", "t1", "yes"]), (Some(1), String::new(), refused.clone()));
    let (_, shown, _) = cli(&store, &["show", "t1", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!((&shown["status"], &shown["pending"]), (&"cancelled".into(), &serde_json::json!([])));
    let (_, shown, _) = cli(&store, &["show", "t1"]);
    assert!(
        shown.contains(&format!(
            "asked:   `approve` (the run is cancelled: no answer is taken; `agentic resume t1 --store {s}` asks \
             again)\n"
        )),
        "{shown}"
    );
    assert!(!shown.contains("pending:"), "{shown}");
    let (code, _, err) = cli(&store, &["run", spec, "--memory-id", "t1", "--input", "doc=D"]);
    assert_eq!(code, Some(64));
    assert_eq!(
        err,
        "run: t1\nerror: run `t1` already exists and is cancelled; it takes no answer; continue it with `agentic \
         resume t1`, which asks its questions again (or choose another --memory-id)\n"
    );
    stop(served);

    // Without the server: the same.
    assert_eq!(cli(&store, &["respond", "t1", "yes"]), (Some(1), String::new(), refused));

    // Resumed through a server, the question is asked again and its answer continues the run there.
    let served = Serve::on(&store).start();
    let (code, _, err) = cli(&store, &["resume", "t1"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = cli(&store, &["respond", "t1", "yes"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        err,
        format!(
            "answered `approve` for run t1; the server at {} continues it by itself (`agentic show t1 --store {}` \
             shows where it stands)\n",
            served.url,
            store.display()
        )
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cli(&store, &["show", "t1"]).1.contains("status:  completed\n") {
        assert!(Instant::now() < deadline, "the server never continued the run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop(served);
}

/// The server builds a spec with its own models: `run` of a `provider: local` spec through a server whose
/// environment has `OPENAI_BASE_URL` runs there, though this process could not build it; with the server
/// gone, the same command says what this process lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_a_server_uses_the_servers_models_not_this_processs() {
    if cfg!(feature = "local") {
        return; // this process could build it then
    }
    let model = crate::echo_model::metered("from the server's model").await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let spec = dir.path().join("local.yaml");
    std::fs::write(
        &spec,
        "version: 1\nroot: ask\nmodels:\n  default: { provider: local }\nagents:\n  ask: { kind: llm, user: hi }\n",
    )
    .unwrap();
    let served = Serve::on(&store).env("OPENAI_BASE_URL", format!("{}/v1", model.uri())).start();
    let o = Cli::new(["run", spec.to_str().unwrap(), "--memory-id", "l1"])
        .store(&store)
        .env_remove("OPENAI_BASE_URL")
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "from the server's model\n");
    stop(served);

    let o = Cli::new(["run", spec.to_str().unwrap(), "--memory-id", "l2"])
        .store(&store)
        .env_remove("OPENAI_BASE_URL")
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "model `default`: the local provider is not built into this binary: build with `--features local`, or \
             set OPENAI_BASE_URL to an OpenAI-compatible server to run this spec unchanged"
        ),
        "{}",
        stderr(&o)
    );
}
