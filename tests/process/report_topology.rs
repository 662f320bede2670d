//! A spec's topology needs no model provider (issue #43, item 4): `agentic report --spec` of a
//! `provider: local` spec draws it in a binary without the cargo feature `local` (this test binary's build),
//! `agentic report RUN` draws the run's archived spec, and so does the CLI's report through a server, as the
//! server's own `/report`. A run that does need the provider says both ways out (item 5).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use crate::binary::{Cli, Serve, stderr, stdout};
use crate::echo_model;

/// A `provider: local` spec: a model call, then a compute agent.
const BRIEF: &str = "version: 1\nname: brief\nroot: main\nmodels:\n  default: { provider: local }\nagents:\n  main: { \
                     kind: sequence, agents: [draft, shout], output_key: out }\n  draft: { kind: llm, user: \"Write \
                     about {{ topic }}\", output_key: text }\n  shout: { kind: compute, value: \"text | upper\", \
                     output_key: out }\n";

fn gallery() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/specs")
}

/// The nodes of a report's topology diagram, as (path, agent name), in drawing order: none when the report
/// has no diagram.
fn diagram(html: &str) -> Vec<(String, String)> {
    let Some((_, nodes)) = html.split_once("<g class=\"nodes\">") else { return Vec::new() };
    let nodes = nodes.split_once("<g class=\"keys\">").unwrap().0;
    nodes
        .split("data-path=\"")
        .skip(1)
        .map(|node| {
            let (path, rest) = node.split_once('"').unwrap();
            let title = rest.split_once("<title>").unwrap().1;
            (path.to_string(), title.split_once(" (").unwrap().0.to_string())
        })
        .collect()
}

fn nodes(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected.iter().map(|(p, n)| (p.to_string(), n.to_string())).collect()
}

#[test]
fn report_spec_draws_every_gallery_spec_without_a_model_provider() {
    let dir = tempfile::tempdir().unwrap();
    let mut specs: Vec<PathBuf> = std::fs::read_dir(gallery()).unwrap().map(|e| e.unwrap().path()).collect();
    specs.sort();
    assert!(specs.len() >= 19, "{specs:?}");
    for spec in &specs {
        let out = dir.path().join("topology.html");
        let o = Cli::new(["report", "--spec", spec.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .env_remove("OPENAI_BASE_URL")
            .output();
        assert_eq!(o.status.code(), Some(0), "{}: {}", spec.display(), stderr(&o));
        assert_eq!(stderr(&o), format!("report: {}\n", out.display()));
        assert!(!diagram(&std::fs::read_to_string(&out).unwrap()).is_empty(), "{}", spec.display());
    }

    // The showcase's spec, two `provider: local` model calls among its agents: every agent is drawn.
    let out = dir.path().join("triage.html");
    let spec = gallery().join("ticket_triage.yaml");
    let o = Cli::new(["report", "--spec", spec.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .env_remove("OPENAI_BASE_URL")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        diagram(&html),
        nodes(&[
            ("root", "triage"),
            ("root/0", "extract"),
            ("root/1", "signer"),
            ("root/2", "customer"),
            ("root/3", "unfound"),
            ("root/4", "name"),
            ("root/5", "check"),
            ("root/6", "classify"),
            ("root/7", "weigh"),
            ("root/8", "rules"),
            ("root/9", "categorize"),
            ("root/10", "route"),
            ("root/10/0", "billing_expert"),
            ("root/10/1", "technical_expert"),
            ("root/10/2", "account_expert"),
            ("root/11", "review"),
            ("root/12", "finalize"),
        ])
    );
    assert!(html.contains("<title>ticket_triage · topology · agentic report</title>"), "{html}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_run_draws_the_archived_spec_locally_and_through_a_server() {
    let (model, _calls) = echo_model::model(std::time::Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("brief.yaml");
    std::fs::write(&spec, BRIEF).unwrap();
    let store = dir.path().join("store");
    // Run on a model server (OPENAI_BASE_URL stands in for the local provider), then move the spec away: the
    // report draws the text the run archived.
    let o = Cli::new(["run", spec.to_str().unwrap(), "--input", "topic=tea", "--memory-id", "b1"])
        .store(&store)
        .env("OPENAI_BASE_URL", format!("{}/v1", model.uri()))
        .env("OPENAI_API_KEY", "sk-loopback")
        .output_async()
        .await;
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "DONE(WRITE ABOUT TEA)\n"), "{}", stderr(&o));
    std::fs::remove_file(&spec).unwrap();
    let expected = nodes(&[("root", "main"), ("root/0", "draft"), ("root/1", "shout")]);

    // Without OPENAI_BASE_URL: no model provider at all in this process.
    let report = |name: &str| {
        let out = dir.path().join(name);
        let o = Cli::new(["report", "b1", "-o", out.to_str().unwrap()]).store(&store).env_remove("OPENAI_BASE_URL");
        (o, out)
    };
    let (cli, local) = report("local.html");
    let o = cli.output_async().await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), format!("report: {}\n", local.display()), "no warning: the diagram is there");
    let local = std::fs::read_to_string(&local).unwrap();
    assert_eq!(diagram(&local), expected);
    assert!(!local.contains("id=\"no-topology\""), "{local}");

    // A server holds the store: the CLI reads the run through it and draws the same report as the server's own.
    let served = Serve::on(&store).start();
    let (cli, remote) = report("remote.html");
    let o = cli.output_async().await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), format!("report: {}\n", remote.display()));
    let remote = std::fs::read_to_string(&remote).unwrap();
    assert_eq!(diagram(&remote), expected);
    assert_eq!(remote, local);
    let own = reqwest::get(format!("{}/api/v1/runs/b1/report", served.url)).await.unwrap();
    assert_eq!(own.status().as_u16(), 200);
    assert_eq!(own.text().await.unwrap(), local);
}

#[test]
fn a_run_that_needs_the_local_provider_says_both_ways_out() {
    if cfg!(feature = "local") {
        return; // the provider is built in: the spec runs
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("brief.yaml");
    std::fs::write(&spec, BRIEF).unwrap();
    let o = Cli::new(["run", spec.to_str().unwrap(), "--input", "topic=tea"])
        .store(dir.path().join("store"))
        .env_remove("OPENAI_BASE_URL")
        .output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "{}:8:3: agent `draft`: field `model`: model `default`: the local provider is not built into this binary: \
             build with `--features local`, or set OPENAI_BASE_URL to an OpenAI-compatible server to run this spec \
             unchanged\n",
            spec.display()
        )
    );
}
