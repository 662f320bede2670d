//! The `serve` scenario: runs submitted over HTTP to a server process by concurrent clients, against
//! `agentic serve` and against LangGraph's local dev server (`langgraph dev`, from `langgraph-cli[inmem]`).
//!
//! Both servers host the same 5-step chain (node i writes `k{i} = i`; the chain of the `concurrent` scenario).
//! Each of C clients takes the next of M run numbers, submits the run (the timed *submit latency*: request
//! sent → the server's answer that the run exists), then waits for that run's end over one more request (ours:
//! `GET /api/v1/runs/{id}/events`, read to the final `completed` event; LangGraph:
//! `GET /threads/{id}/runs/{id}/join`) and checks its output (`input` = the run's number, `k4` = 4). Throughput
//! is M ÷ the wall time from the first submit to the last run's end. The server's peak RSS is its `VmHWM`; its
//! CPU time is read from `/proc` before and after. Ten runs warm each server up before the measurement.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::{Context, Error, Result, ensure};
use crate::proc;

/// The spec `agentic serve` hosts: the same chain as LangGraph's `chain.py` (node i writes `k{i} = i`), its
/// output the list `[input, k0, …, k4]`.
pub const CHAIN_SPEC: &str = "\
version: 1
name: chain5
root: chain
params:
  input: integer
agents:
  chain: { kind: sequence, agents: [n0, n1, n2, n3, n4], output: '[input, k0, k1, k2, k3, k4]' }
  n0: { kind: compute, value: '0', output_key: k0 }
  n1: { kind: compute, value: '1', output_key: k1 }
  n2: { kind: compute, value: '2', output_key: k2 }
  n3: { kind: compute, value: '3', output_key: k3 }
  n4: { kind: compute, value: '4', output_key: k4 }
";

/// The spec's name (its file stem in `--specs`), also LangGraph's graph id.
pub const SPEC_NAME: &str = "chain5";

/// Which server is under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `agentic serve`, runs with the given durability (`sync`, `async`).
    Agentic(&'static str),
    /// `langgraph dev` (in-memory runtime, checkpoints flushed to disk in the background).
    LangGraph,
}

/// What one measurement gives.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeResult {
    /// Runs completed with the expected output (always M: anything else is an error).
    pub completed: usize,
    /// First submit → last run's end.
    pub wall: Duration,
    /// Submit latency, median.
    pub p50: Duration,
    /// Submit latency, 99th percentile.
    pub p99: Duration,
    /// The server's resident memory after the warm-up, KiB.
    pub base_rss_kib: u64,
    /// The server's peak resident memory (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// The server's CPU time (user + system) during the measurement.
    pub server_cpu: Duration,
    /// The CPU time of the other process trees measured with it ([`measure_many`]'s `also`: the
    /// PostgreSQL server), during the measurement.
    pub also_cpu: Duration,
}

impl ServeResult {
    /// Completed runs per second.
    pub fn runs_per_s(&self) -> f64 {
        self.completed as f64 / self.wall.as_secs_f64()
    }
}

/// A server process under test; killed when dropped.
pub struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    kind: Kind,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound, read, released).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").ctx("finding a free port")?;
    Ok(l.local_addr().ctx("finding a free port")?.port())
}

impl ServerProcess {
    /// Starts `agentic serve` as `argv` (e.g. `[".../agentic", "serve"]`) on a store and a specs directory made
    /// under `work`, and waits until it answers.
    ///
    /// # Errors
    /// When it cannot be spawned or does not answer within 30 s.
    pub fn agentic(argv: &[String], work: &Path, durability: &'static str) -> Result<ServerProcess> {
        ServerProcess::agentic_on(argv, work, work.join("store").as_os_str(), durability)
    }

    /// [`ServerProcess::agentic`] on the store `store` (a directory or a `postgres://` URL).
    ///
    /// # Errors
    /// When it cannot be spawned or does not answer within 60 s.
    pub fn agentic_on(
        argv: &[String],
        work: &Path,
        store: &std::ffi::OsStr,
        durability: &'static str,
    ) -> Result<ServerProcess> {
        let specs = work.join("specs");
        std::fs::create_dir_all(&specs).ctx(format!("creating {}", specs.display()))?;
        std::fs::write(specs.join(format!("{SPEC_NAME}.yaml")), CHAIN_SPEC).ctx("writing the chain spec")?;
        let port = free_port()?;
        let (exe, args) = argv.split_first().ctx("an empty server command")?;
        let log = std::fs::File::create(work.join("server.log")).ctx("creating the server log")?;
        let child = Command::new(exe)
            .args(args)
            .arg("--store")
            .arg(store)
            .arg("--specs")
            .arg(&specs)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env_remove("AGENTIC_LOG")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .ctx(format!("spawning {}", exe))?;
        let server = ServerProcess { child, url: format!("http://127.0.0.1:{port}"), kind: Kind::Agentic(durability) };
        server.wait_ready("/api/v1/runs", &work.join("server.log"))?;
        Ok(server)
    }

    /// Starts `langgraph dev` from the virtualenv `venv` on a copy of `project` (its `langgraph.json` and
    /// `chain.py`) made in `work`, and waits until it answers.
    ///
    /// # Errors
    /// When it cannot be spawned or does not answer within 60 s.
    pub fn langgraph(venv: &Path, project: &Path, work: &Path) -> Result<ServerProcess> {
        let dir = work.join("langgraph-serve");
        std::fs::create_dir_all(&dir).ctx(format!("creating {}", dir.display()))?;
        for f in ["langgraph.json", "chain.py"] {
            std::fs::copy(project.join(f), dir.join(f)).ctx(format!("copying {}", project.join(f).display()))?;
        }
        let port = free_port()?;
        let log = std::fs::File::create(work.join("langgraph.log")).ctx("creating the server log")?;
        let child = Command::new(venv.join("bin/langgraph"))
            .args(["dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(&dir)
            .env("LANGSMITH_TRACING", "false")
            .env("LANGGRAPH_CLI_NO_ANALYTICS", "1")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .ctx(format!("spawning {}", venv.join("bin/langgraph").display()))?;
        let server = ServerProcess { child, url: format!("http://127.0.0.1:{port}"), kind: Kind::LangGraph };
        server.wait_ready("/ok", &work.join("langgraph.log"))?;
        Ok(server)
    }

    fn wait_ready(&self, path: &str, log: &Path) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = self.url.trim_start_matches("http://").to_string();
        while Instant::now() < deadline {
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                use std::io::{Read, Write};
                let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
                let mut answer = String::new();
                if s.write_all(req.as_bytes()).is_ok()
                    && s.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.1 200")
                {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let tail = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(15).collect();
        Err(Error(format!(
            "the server at {} did not answer {path} within 60 s; its log ({}) ends with:\n{}",
            self.url,
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Submits run `i` and waits for its end; returns the submit latency. Errors on a wrong status or output.
async fn one_run(http: &reqwest::Client, url: &str, kind: Kind, i: usize, tag: &str) -> Result<Duration> {
    let t0 = Instant::now();
    match kind {
        Kind::Agentic(durability) => {
            let body = json!({
                "spec_name": SPEC_NAME,
                "inputs": {"input": i},
                "run_id": format!("{tag}-{i}"),
                "durability": durability,
            });
            let resp = http.post(format!("{url}/api/v1/runs")).json(&body).send().await.ctx("POST /api/v1/runs")?;
            let status = resp.status();
            let created: Value = resp.json().await.ctx("reading POST /api/v1/runs")?;
            let latency = t0.elapsed();
            ensure(status.as_u16() == 201, || format!("POST /api/v1/runs: {status} {created}"))?;
            let id = created["run_id"].as_str().ctx("POST /api/v1/runs: no run_id")?;
            let events = http
                .get(format!("{url}/api/v1/runs/{id}/events"))
                .send()
                .await
                .ctx("GET events")?
                .text()
                .await
                .ctx("reading the events")?;
            let output = final_output(&events).ctx(format!("run {id}: no `completed` event in {events:?}"))?;
            ensure(output == json!([i, 0, 1, 2, 3, 4]), || format!("run {id}: output {output}"))?;
            Ok(latency)
        }
        Kind::LangGraph => {
            let thread = format!("00000000-0000-4000-8000-{:012}", i + if tag == "warm" { 900_000_000 } else { 0 });
            let body = json!({"assistant_id": SPEC_NAME, "input": {"input": i}, "if_not_exists": "create"});
            let resp = http
                .post(format!("{url}/threads/{thread}/runs"))
                .json(&body)
                .send()
                .await
                .ctx("POST /threads/{id}/runs")?;
            let status = resp.status();
            let created: Value = resp.json().await.ctx("reading POST /threads/{id}/runs")?;
            let latency = t0.elapsed();
            ensure(status.is_success(), || format!("POST /threads/{thread}/runs: {status} {created}"))?;
            let run = created["run_id"].as_str().ctx("POST /threads/{id}/runs: no run_id")?;
            let state: Value = http
                .get(format!("{url}/threads/{thread}/runs/{run}/join"))
                .send()
                .await
                .ctx("GET join")?
                .json()
                .await
                .ctx("reading join")?;
            ensure(state["input"] == json!(i) && state["k4"] == json!(4), || format!("thread {thread}: {state}"))?;
            Ok(latency)
        }
    }
}

/// The `output` of the `completed` event in an SSE body.
fn final_output(sse: &str) -> Option<Value> {
    let mut event = "";
    for line in sse.lines() {
        if let Some(name) = line.strip_prefix("event:") {
            event = name.trim();
        } else if let Some(data) = line.strip_prefix("data:")
            && event == "completed"
        {
            let v: Value = serde_json::from_str(data.trim()).ok()?;
            return Some(v["output"].clone());
        }
    }
    None
}

/// The value at quantile `q` (0–1) of sorted `v` (nearest rank).
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Warms `server` up with 10 runs, then submits `runs` runs from `clients` concurrent clients and measures.
///
/// # Errors
/// When a request fails or a run's output is wrong.
pub async fn measure(server: &ServerProcess, runs: usize, clients: usize) -> Result<ServeResult> {
    measure_many(&[server], runs, clients, &[]).await
}

/// [`measure`] over several servers sharing one store: run i goes to server i mod K (and is awaited there).
/// RSS figures are the largest server's; the CPU time is the servers' sum; `also` are process trees whose CPU
/// time over the same span is [`ServeResult::also_cpu`] ([`proc::tree_cpu_time`]: the PostgreSQL server's
/// postmaster).
///
/// # Errors
/// When a request fails, a run's output is wrong, or `servers` is empty.
pub async fn measure_many(
    servers: &[&ServerProcess],
    runs: usize,
    clients: usize,
    also: &[u32],
) -> Result<ServeResult> {
    ensure(!servers.is_empty(), || "no server to measure".into())?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients.max(1))
        .timeout(Duration::from_secs(120))
        .build()
        .ctx("building the HTTP client")?;
    for (s, server) in servers.iter().enumerate() {
        for i in 0..10 {
            one_run(&http, &server.url, server.kind, s * 10 + i, "warm").await?;
        }
    }
    let base_rss_kib = servers.iter().map(|s| proc::pid_status_kib(s.pid(), "VmRSS").unwrap_or(0)).max().unwrap_or(0);
    let cpu = || servers.iter().map(|s| proc::pid_cpu_time(s.pid()).unwrap_or_default()).sum::<Duration>();
    let also_cpu = || also.iter().map(|p| proc::tree_cpu_time(*p).unwrap_or_default()).sum::<Duration>();
    let (cpu0, also0) = (cpu(), also_cpu());
    let targets: Arc<Vec<(String, Kind)>> = Arc::new(servers.iter().map(|s| (s.url.clone(), s.kind)).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (http, targets, next) = (http.clone(), targets.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= runs {
                        return Ok::<_, Error>(latencies);
                    }
                    let (url, kind) = &targets[i % targets.len()];
                    latencies.push(one_run(&http, url, *kind, i, "run").await?);
                }
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(runs);
    for t in tasks {
        latencies.extend(t.await.ctx("a client task")??);
    }
    let wall = t0.elapsed();
    let server_cpu = cpu().saturating_sub(cpu0);
    let also_cpu = also_cpu().saturating_sub(also0);
    latencies.sort();
    Ok(ServeResult {
        completed: latencies.len(),
        wall,
        p50: quantile(&latencies, 0.50),
        p99: quantile(&latencies, 0.99),
        base_rss_kib,
        peak_rss_kib: servers.iter().map(|s| proc::pid_status_kib(s.pid(), "VmHWM").unwrap_or(0)).max().unwrap_or(0),
        server_cpu,
        also_cpu,
    })
}

/// The `agentic` binary next to this one (`target/release/agentic`), built with cargo first so that it is the
/// same source as the bench.
///
/// # Errors
/// When cargo fails.
pub fn agentic_binary(bench_exe: &Path) -> Result<PathBuf> {
    let dir = bench_exe.parent().ctx("locating the bench binary's directory")?;
    let release = dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--quiet", "-p", "agentic-cli", "--bin", "agentic"]);
    if release {
        cmd.arg("--release");
    }
    eprintln!(
        "bench: building the agentic binary ({cargo} build{} --bin agentic)",
        if release { " --release" } else { "" }
    );
    let status = cmd.status().ctx(format!("running {cargo}"))?;
    ensure(status.success(), || format!("`{cargo} build --bin agentic` failed ({status})"))?;
    let bin = dir.join("agentic");
    ensure(bin.exists(), || format!("{} is missing after the build", bin.display()))?;
    Ok(bin)
}

/// Creates (once; reused while the lock file is unchanged) the virtualenv of `langgraph-cli[inmem]` from
/// `project/requirements.lock.txt`; returns its directory.
///
/// # Errors
/// When the virtualenv or pip fails (no network to PyPI, no `venv` module).
pub fn ensure_langgraph_venv(project: &Path, venv: &Path, python: &str) -> Result<PathBuf> {
    let lock = project.join("requirements.lock.txt");
    let wanted = std::fs::read_to_string(&lock).ctx(format!("reading {}", lock.display()))?;
    let stamp = venv.join("requirements.lock.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && venv.join("bin/langgraph").exists() {
        return Ok(venv.to_path_buf());
    }
    eprintln!("bench: creating {} with langgraph-cli[inmem] (pip, once)", venv.display());
    let run = |cmd: &mut Command, what: &str| -> Result<()> {
        let out = cmd.output().ctx(what.to_string())?;
        ensure(out.status.success(), || format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim()))
    };
    run(Command::new(python).args(["-m", "venv"]).arg(venv), "creating the virtualenv")?;
    run(
        Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--no-deps", "-r"]).arg(&lock),
        "pip install -r requirements.lock.txt",
    )?;
    std::fs::write(&stamp, wanted).ctx("stamping the virtualenv")?;
    Ok(venv.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_output_of_the_completed_event() {
        let sse =
            "event: agent_completed\ndata: {\"seq\":1}\n\nevent: completed\ndata: {\"seq\":7,\"output\":[3,0]}\n\n";
        assert_eq!(final_output(sse), Some(json!([3, 0])));
        assert_eq!(final_output("event: failed\ndata: {}\n\n"), None);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(quantile(&v[..1], 0.99), Duration::from_millis(1));
    }
}
