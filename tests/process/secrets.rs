//! Secrets by reference (SERVER.md §8) through the real binary: a model's `api_key: ${secret:NAME}` is
//! resolved from `--secrets FILE` or `AGENTIC_SECRET_<NAME>` and sent to the model server, and its value is
//! nowhere else — not in the store's files, `show --all`, the report or the command's output; a secret or
//! an `api_key_env` variable that is not set is named before any model call; a key written in the spec is
//! refused where it is written.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::binary::{Cli, Serve, stderr, stdout};

/// The secret's value: what must reach the model server and nothing else.
const VALUE: &str = "sk-test-7f3c9e1d5b2a";

/// A model server answering every chat completion with `Paris`.
async fn model() -> MockServer {
    crate::echo_model::metered("Paris").await
}

/// A one-agent spec whose model's key is `key_field` (a YAML `key: value`).
fn spec(dir: &Path, server: &MockServer, key_field: &str) -> String {
    let text = format!(
        "version: 1\nname: capital\nroot: ask\nmodels:\n  default:\n    provider: openai\n    base_url: \"{}/v1\"\n    \
         model: gpt-test\n    {key_field}\nagents:\n  ask: {{ kind: llm, user: \"Capital of France?\", output_key: answer }}\n",
        server.uri()
    );
    let file = dir.join("capital.yaml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

/// The `Authorization` headers the model server received, in order.
async fn authorizations(server: &MockServer) -> Vec<String> {
    let received = server.received_requests().await.unwrap();
    received.iter().map(|r| r.headers.get("authorization").unwrap().to_str().unwrap().to_string()).collect()
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).unwrap().windows(needle.len()).any(|w| w == needle) {
                found.push(p.display().to_string());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_key_given_as_a_secret_reaches_the_model_server_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let server = model().await;
    let spec = spec(dir.path(), &server, "api_key: ${secret:ACME_KEY}");
    let secrets = dir.path().join("secrets.yaml");
    std::fs::write(&secrets, format!("ACME_KEY: {VALUE}\n")).unwrap();
    let store = dir.path().join("store");

    let o = Cli::new(["--secrets", secrets.to_str().unwrap(), "run", &spec, "--memory-id", "s1"])
        .store(&store)
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Paris\n");
    assert_eq!(authorizations(&server).await, [format!("Bearer {VALUE}")]);

    // From the environment, without a file: the same key.
    let o = Cli::new(["run", &spec, "--memory-id", "s2"])
        .store(&store)
        .env("AGENTIC_SECRET_ACME_KEY", VALUE)
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(authorizations(&server).await, [format!("Bearer {VALUE}"), format!("Bearer {VALUE}")]);

    // Nowhere else: the store's files (the archived spec holds the reference), what `show --all` and
    // `show --json` print, the report.
    assert_eq!(files_holding(&store, VALUE.as_bytes()), Vec::<String>::new());
    assert!(!files_holding(&store, b"${secret:ACME_KEY}").is_empty(), "the archived spec keeps the reference");
    let report = dir.path().join("report.html");
    for args in [
        vec!["show", "s1", "--all"],
        vec!["show", "s1", "--json"],
        vec!["report", "s1", "-o", report.to_str().unwrap()],
    ] {
        let o = Cli::new(&args).store(&store).output_async().await;
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(!stdout(&o).contains(VALUE) && !stderr(&o).contains(VALUE), "{args:?}");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("Paris") && !html.contains(VALUE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_that_is_not_set_is_named_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = model().await;
    let spec = spec(dir.path(), &server, "api_key: ${secret:ACME_KEY}");
    let why = "model `default`: secret `ACME_KEY` is not set: give it in the file of --secrets FILE \
               (`ACME_KEY: <value>`) or in the environment variable AGENTIC_SECRET_ACME_KEY";
    for command in ["validate", "run"] {
        let o = Cli::new([command, spec.as_str()])
            .store(dir.path().join("store"))
            .env_remove("AGENTIC_SECRET_ACME_KEY")
            .output_async()
            .await;
        assert_eq!(o.status.code(), Some(64), "{command}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{command}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(&format!("{spec}:")), "located: {}", stderr(&o));
    }
    // A secrets file without it names it too; one that cannot be read is a usage error naming the file.
    let secrets = dir.path().join("secrets.yaml");
    std::fs::write(&secrets, "OTHER: x\n").unwrap();
    let o = Cli::new(["--secrets", secrets.to_str().unwrap(), "run", &spec]).output_async().await;
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).contains(why), "{}", stderr(&o));
    let missing = dir.path().join("nope.yaml");
    let o = Cli::new(["--secrets", missing.to_str().unwrap(), "run", &spec]).output_async().await;
    assert_eq!(o.status.code(), Some(64));
    assert!(
        stderr(&o).starts_with(&format!("error: --secrets: cannot read the secrets file {}: ", missing.display())),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 0, "no model call was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_env_that_is_not_set_is_named_and_a_key_written_in_the_spec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = model().await;
    let spec_env = spec(dir.path(), &server, "api_key_env: ACME_OPENAI_KEY_UNSET");
    let o = Cli::new(["run", spec_env.as_str()])
        .store(dir.path().join("store"))
        .env_remove("ACME_OPENAI_KEY_UNSET")
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "model `default`: the environment variable `ACME_OPENAI_KEY_UNSET` (its `api_key_env`) is not set: the \
             API key is read from it"
        ),
        "{}",
        stderr(&o)
    );
    // Set, it is sent.
    let o = Cli::new(["run", spec_env.as_str()])
        .store(dir.path().join("store"))
        .env("ACME_OPENAI_KEY_UNSET", VALUE)
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(authorizations(&server).await, [format!("Bearer {VALUE}")]);

    let spec_literal = spec(dir.path(), &server, &format!("api_key: {VALUE}"));
    let o = Cli::new(["validate", spec_literal.as_str()]).output_async().await;
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        format!(
            "{spec_literal}:9:14: field `models.default.api_key`: expected a secret's reference, `${{secret:NAME}}` (the \
             value is given with --secrets FILE or AGENTIC_SECRET_NAME): a key written in the spec would be \
             archived with every run\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_run_sends_the_secret_and_its_record_events_and_report_do_not_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = model().await;
    let spec = std::fs::read_to_string(spec(dir.path(), &server, "api_key: ${secret:ACME_KEY}")).unwrap();
    let secrets = dir.path().join("secrets.yaml");
    std::fs::write(&secrets, format!("ACME_KEY: {VALUE}\n")).unwrap();
    let store = dir.path().join("store");
    let served = Serve::on(&store).arg("--secrets").arg(&secrets).start();
    let (url, http) = (served.url.clone(), reqwest::Client::new());
    let created =
        http.post(format!("{url}/api/v1/runs")).json(&json!({"spec": spec, "run_id": "t"})).send().await.unwrap();
    assert_eq!(created.status(), 201);
    // The event stream ends with the run.
    let events = http.get(format!("{url}/api/v1/runs/t/events")).send().await.unwrap().text().await.unwrap();
    assert!(events.contains("event: completed"), "{events}");
    assert_eq!(authorizations(&server).await, [format!("Bearer {VALUE}")]);
    for page in ["/api/v1/runs/t", "/api/v1/runs/t/report", "/runs/t"] {
        let body = http.get(format!("{url}{page}")).send().await.unwrap().text().await.unwrap();
        assert!(body.contains("Paris") && !body.contains(VALUE), "{page}: {body}");
    }
    assert!(!events.contains(VALUE));
    drop(served);
    assert_eq!(files_holding(&store, VALUE.as_bytes()), Vec::<String>::new());
}

/// The MCP peer's `credentials` tool over stdio (its `env`) or streamable HTTP (its `headers`), and an A2A peer
/// (its `headers`), each given a secret: the peers record what they received (a file each); the value is
/// sent and kept out of the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_and_a2a_agents_receive_their_secrets_in_env_and_headers() {
    let Some(python) = crate::common::peers_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mcp_seen, a2a_seen) = (dir.path().join("mcp_seen.txt"), dir.path().join("a2a_seen.txt"));
    let mcp_port = crate::common::free_port();
    let _mcp_http = crate::common::KillOnDrop(
        std::process::Command::new(&python)
            .args([crate::common::peer_script("mcp_server.py"), "http".into(), mcp_port.to_string()])
            .args(["--only", "credentials"])
            .env("CREDENTIALS_FILE", &mcp_seen)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let a2a_port = crate::common::free_port();
    let _a2a = crate::common::KillOnDrop(
        std::process::Command::new(&python)
            .args([crate::common::peer_script("a2a_server.py"), a2a_port.to_string()])
            .env("HEADERS_FILE", &a2a_seen)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    crate::common::wait_port(mcp_port);
    crate::common::wait_port(a2a_port);
    let spec = format!(
        "version: 1\nname: creds\nroot: main\n\
         mcp_servers:\n  \
           local:\n    command: ['{py}', '{script}', stdio, --only, credentials]\n    \
             env: {{ PEER_TOKEN: '${{secret:PEER_TOKEN}}', CREDENTIALS_FILE: '{seen}' }}\n  \
           remote:\n    url: 'http://127.0.0.1:{mcp_port}/mcp'\n    \
             headers: {{ Authorization: 'Bearer ${{secret:PEER_TOKEN}}' }}\n\
         agents:\n  \
           main: {{ kind: sequence, agents: [by_env, by_header, chat], output_key: reply }}\n  \
           by_env: {{ kind: mcp, server: local, tool: credentials, output_key: one }}\n  \
           by_header: {{ kind: mcp, server: remote, tool: credentials, output_key: two }}\n  \
           chat:\n    kind: a2a\n    url: 'http://127.0.0.1:{a2a_port}/chat'\n    inputs: [one]\n    \
             headers: {{ Authorization: 'Bearer ${{secret:PEER_TOKEN}}' }}\n    output_key: reply\n",
        py = python.display(),
        script = crate::common::peer_script("mcp_server.py"),
        seen = mcp_seen.display(),
    );
    let file = dir.path().join("creds.yaml");
    std::fs::write(&file, spec).unwrap();
    let store = dir.path().join("store");
    let o = Cli::new(["run", file.to_str().unwrap(), "--memory-id", "c1"])
        .store(&store)
        .env("AGENTIC_SECRET_PEER_TOKEN", VALUE)
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("NOTED"), "{}", stdout(&o));
    // The stdio server got it in its environment, the HTTP server in its header (and no header over stdio).
    assert_eq!(
        std::fs::read_to_string(&mcp_seen).unwrap(),
        format!("env={VALUE}\nauthorization=\nenv=\nauthorization=Bearer {VALUE}\n")
    );
    // The A2A agent's card and its call both carried the header.
    let a2a = std::fs::read_to_string(&a2a_seen).unwrap();
    let lines: Vec<&str> = a2a.lines().collect();
    assert!(lines.len() >= 2, "{a2a}");
    assert!(lines.iter().all(|l| l.ends_with(&format!(" authorization=Bearer {VALUE}"))), "{a2a}");
    assert!(lines.iter().any(|l| l.starts_with("/chat/.well-known/")), "{a2a}");
    assert_eq!(files_holding(&store, VALUE.as_bytes()), Vec::<String>::new());

    // Without the secret, the run is refused before any server is called, naming it where it is used.
    let before = std::fs::read_to_string(&mcp_seen).unwrap();
    let o = Cli::new(["run", file.to_str().unwrap()])
        .store(&store)
        .env_remove("AGENTIC_SECRET_PEER_TOKEN")
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(64));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{}:7:24: field `mcp_servers.local.env.PEER_TOKEN`: secret `PEER_TOKEN` is not set",
            file.display()
        )) && err.contains("agent `chat`: field `headers.Authorization`: secret `PEER_TOKEN` is not set"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&mcp_seen).unwrap(), before);
}

/// A model server that refuses the key and repeats it in its error, as some providers do.
struct EchoesTheKey;

impl wiremock::Respond for EchoesTheKey {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let sent = request.headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let body = json!({"error": {"message": format!("Incorrect API key provided: {sent}"), "type": "invalid_request_error"}});
        ResponseTemplate::new(401).set_body_json(body)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_server_repeats_in_its_error_is_shown_as_the_secrets_name() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(EchoesTheKey).mount(&server).await;
    let spec = spec(dir.path(), &server, "api_key: ${secret:ACME_KEY}");
    let store = dir.path().join("store");
    let o = Cli::new(["run", &spec, "--memory-id", "e1"])
        .store(&store)
        .env("AGENTIC_SECRET_ACME_KEY", VALUE)
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "authentication failed (HTTP 401): Incorrect API key provided: Bearer [secret:ACME_KEY] (check the API \
             key in the secret `ACME_KEY`)"
        ),
        "{}",
        stderr(&o)
    );
    assert_eq!(authorizations(&server).await, [format!("Bearer {VALUE}")]);
    assert_eq!(files_holding(&store, VALUE.as_bytes()), Vec::<String>::new());
    for args in [vec!["show", "e1", "--all"], vec!["show", "e1", "--json"]] {
        let o = Cli::new(&args).store(&store).output_async().await;
        assert!(!stdout(&o).contains(VALUE) && stdout(&o).contains("[secret:ACME_KEY]"), "{args:?}: {}", stdout(&o));
    }
}

#[test]
fn a_misspelt_secret_reference_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("creds.yaml");
    std::fs::write(
        &file,
        "version: 1\nroot: a\nmcp_servers:\n  local:\n    command: [srv]\n    env: { TOKEN: '${secret:peer token}' }\n\
         agents:\n  a: { kind: mcp, server: local, tool: t }\n",
    )
    .unwrap();
    let o = Cli::new(["validate", file.to_str().unwrap()]).output();
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        format!(
            "{}:6:19: field `mcp_servers.local.env.TOKEN`: `${{secret:peer token}}` is not a secret's reference: \
             write `${{secret:NAME}}`, NAME of letters, digits and `_`\n",
            file.display()
        )
    );
}

/// A build that runs nothing needs no secret: the topology of a spec whose MCP server takes one is drawn
/// without it.
#[test]
fn the_topology_of_a_spec_is_drawn_without_its_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("creds.yaml");
    std::fs::write(
        &file,
        "version: 1\nroot: a\nmcp_servers:\n  local:\n    command: [srv]\n    env: { TOKEN: '${secret:PEER_TOKEN}' }\n\
         agents:\n  a: { kind: mcp, server: local, tool: t, output_key: out }\n",
    )
    .unwrap();
    let html = dir.path().join("topology.html");
    let o = Cli::new(["report", "--spec", file.to_str().unwrap(), "-o", html.to_str().unwrap()])
        .env_remove("AGENTIC_SECRET_PEER_TOKEN")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

/// A fork whose spec cannot be built here (its secret is not set) is refused before it is written: no run
/// is left behind listed as running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_without_the_secret_is_refused_and_writes_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = model().await;
    let spec = spec(dir.path(), &server, "api_key: ${secret:ACME_KEY}");
    let store = dir.path().join("store");
    let o = Cli::new(["run", &spec, "--memory-id", "f1"])
        .store(&store)
        .env("AGENTIC_SECRET_ACME_KEY", VALUE)
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = Cli::new(["fork", "f1", "--at", "0", "--memory-id", "f2"])
        .store(&store)
        .env_remove("AGENTIC_SECRET_ACME_KEY")
        .output_async()
        .await;
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).contains("secret `ACME_KEY` is not set"), "{}", stderr(&o));
    let o = Cli::new(["runs", "--json"]).store(&store).output_async().await;
    let runs: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ids: Vec<&str> = runs.as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["f1"]);
}
