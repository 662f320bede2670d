//! `agentic serve --tls-cert FILE --tls-key FILE` (SERVER.md §8): HTTPS with a test certificate (rcgen): the
//! API and the event stream answer a client that trusts the certificate, a plain-HTTP request and a client that
//! does not trust it get nothing, the CLI on the server's store trusts the certificate the server advertises, and
//! a certificate that cannot be served is a usage error naming the file.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::binary::{Cli, Serve, stderr, stdout};

/// A self-signed certificate for `localhost` and 127.0.0.1 and its key, as PEM files in `dir`.
fn certificate(dir: &Path) -> (PathBuf, PathBuf, String) {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let pem = generated.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    (cert, key, pem)
}

const SPEC: &str = "version: 1\nname: greet\nroot: hi\nagents:\n  hi: { kind: compute, template: \"hello {{ who }}\", output_key: greeting }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_its_event_stream_are_served_over_https_to_a_client_that_trusts_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = certificate(dir.path());
    let store = dir.path().join("store");
    let served = Serve::on(&store).arg("--tls-cert").arg(&cert).arg("--tls-key").arg(&key).start();
    assert!(served.url.starts_with("https://127.0.0.1:"), "{}", served.url);

    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let health = trusting.get(format!("{}/healthz", served.url)).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let created = trusting
        .post(format!("{}/api/v1/runs", served.url))
        .json(&json!({"spec": SPEC, "run_id": "t", "inputs": {"who": "Ada"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let events = trusting.get(format!("{}/api/v1/runs/t/events", served.url)).send().await.unwrap();
    let events = events.text().await.unwrap();
    assert!(events.contains("event: completed") && events.contains("hello Ada"), "{events}");

    // A client that does not trust the certificate, and plain HTTP on the same port, get no answer.
    let untrusting = reqwest::Client::new().get(format!("{}/healthz", served.url)).send().await;
    assert!(untrusting.is_err(), "an untrusted certificate was accepted: {untrusting:?}");
    let plain = served.url.replace("https://", "http://");
    let plain = reqwest::Client::new().get(format!("{plain}/healthz")).send().await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success(), "plain HTTP was served");

    // The CLI on the server's store goes through the server, trusting the certificate it advertises.
    let o = Cli::new(["show", "t"]).store(&store).output_async().await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("status:  completed"), "{}", stdout(&o));
}

#[test]
fn a_certificate_or_key_that_cannot_be_served_is_a_usage_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _, _) = certificate(dir.path());
    let not_a_key = dir.path().join("not_a_key.pem");
    std::fs::write(&not_a_key, "hello\n").unwrap();
    let store = dir.path().join("store");
    let (cert_arg, key_arg) = (cert.to_str().unwrap(), not_a_key.to_str().unwrap());
    let o = Cli::new(["serve", "--listen", "127.0.0.1:0", "--tls-cert", cert_arg, "--tls-key", key_arg])
        .store(&store)
        .output();
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(&format!("error: tls: {}: holds no PEM private key", not_a_key.display())),
        "{}",
        stderr(&o)
    );
    let o = Cli::new(["serve", "--tls-cert", cert.to_str().unwrap()]).store(&store).output();
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).contains("--tls-key <FILE>"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_cookie_is_secure_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = certificate(dir.path());
    let served = Serve::on(dir.path().join("store"))
        .token(Some("s3cret"))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .start();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = client
        .post(format!("{}/login", served.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
    assert_eq!(cookie, "agentic_token=s3cret; Path=/; HttpOnly; SameSite=Strict; Secure");
}

/// What `openssl req -x509` makes by default: a self-signed certificate marked as an authority's, which a
/// TLS client refuses as a server's own (`CaUsedAsEndEntity`): the CLI says so and how to make one it takes,
/// exit 1, not "try again" (75).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_an_authoritys_certificate_as_the_servers_saying_how_to_make_one_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_file, key_file) = (dir.path().join("ca-cert.pem"), dir.path().join("ca-key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let store = dir.path().join("store");
    let _served = Serve::on(&store).arg("--tls-cert").arg(&cert_file).arg("--tls-key").arg(&key_file).start();
    let o = Cli::new(["runs"]).store(&store).output_async().await;
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("presents a certificate this command does not trust"), "{}", stderr(&o));
    assert!(stderr(&o).contains("-addext basicConstraints=critical,CA:FALSE"), "{}", stderr(&o));
}
