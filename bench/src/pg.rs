//! The `pg` scenario: the PostgreSQL store side by side with LangGraph's `PostgresSaver`
//! (`langgraph-checkpoint-postgres`) and graph-flow's `PostgresSessionStorage` (the Rust peer) on the same
//! PostgreSQL server, and `agentic serve` scaled out to 1, 2 and 3 workers on one database.
//!
//! - **Per step**: the chain of `bench_seq.py` (agent i writes `k{i}` = i, distinct keys), N = 10 and 100. Ours:
//!   a [`PgStore`] with durability sync / async / exit; LangGraph: `bench/langgraph-pg/bench_pg.py seq`
//!   (`PostgresSaver`, the same durabilities); graph-flow: `bench/graph-flow-peer` (one `FlowRunner::run` per
//!   step: load the session, run the task, save the session — it has no other durable mode). Per step = a run's
//!   wall time ÷ N, median over the repetitions; every run's final state is checked.
//! - **Floor**: in the same run on the same server, right after ours: N single-row `INSERT`s, each its own
//!   committed transaction (synchronous_commit on), of 16 bytes and of our journal rows' mean size — what one
//!   durable statement costs there ([`floor_per_commit`]); ours sync per step is compared with it.
//! - **Workers**: a fresh database; K = 1, 2, 3 `agentic serve --store postgres://…` processes; M runs of the
//!   serve scenario's 5-step chain (sync durability) from C clients, run i submitted to server i mod K and
//!   awaited on it (its events stream); runs/s = M ÷ the wall time. LangGraph: K worker processes of its
//!   library on one database (`bench_pg.py workers`: `AsyncPostgresSaver`, sync durability, C/K runs in flight
//!   each; LangGraph's own server needs a licence to use PostgreSQL, so no HTTP in its figure). The bar is the
//!   CPU per run, what a user pays for on any machine: the servers' CPU time plus the PostgreSQL server's (its
//!   postmaster's process tree from `/proc`, [`crate::proc::tree_cpu_time`]) over the measured runs ÷ M;
//!   LangGraph's: its workers' process time plus the PostgreSQL server's, counted the same way.
//!
//! The server: `--pg-url` (or `AGENTIC_BENCH_PG_URL`), a database the bench may create databases in; else a
//! throwaway cluster started with `scripts/pg-test-server.sh` **with fsync on** (`PG_TEST_FSYNC=on`: durable
//! commits, as in production) and stopped at the end. Without PostgreSQL the scenario is skipped with a note.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentic::prelude::Durability;
use agentic::store::PgStore;
use serde_json::Value;

use crate::error::{Context, Result, ensure};
use crate::scenarios::{self, Keys};
use crate::serve::{self, ServerProcess};
use crate::table::{self, Row};

/// A PostgreSQL server for the scenario: given, or a throwaway cluster stopped when dropped.
#[derive(Debug)]
pub struct PgServer {
    /// A URL of the server (its database is where `CREATE DATABASE` is sent).
    pub url: String,
    /// The throwaway cluster's directory and the script that stops it.
    throwaway: Option<(PathBuf, PathBuf)>,
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some((script, dir)) = &self.throwaway {
            let _ = Command::new(script).arg("stop").arg(dir).stdout(Stdio::null()).status();
        }
    }
}

impl PgServer {
    /// The server at `url`, or else a throwaway cluster started with `script` (`scripts/pg-test-server.sh`)
    /// with fsync on.
    ///
    /// # Errors
    /// When the script fails (no PostgreSQL installed) or prints no URL.
    pub fn start_or_use(url: Option<String>, script: &Path) -> Result<PgServer> {
        if let Some(url) = url {
            return Ok(PgServer { url, throwaway: None });
        }
        eprintln!("bench: starting a throwaway PostgreSQL cluster (fsync on) with {}", script.display());
        let out = Command::new(script)
            .arg("start")
            .env("PG_TEST_FSYNC", "on")
            .stderr(Stdio::piped())
            .output()
            .ctx(format!("running {}", script.display()))?;
        ensure(out.status.success(), || {
            format!("{} start failed: {}", script.display(), String::from_utf8_lossy(&out.stderr).trim())
        })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let var = |name: &str| {
            text.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("export ")?
                    .strip_prefix(name)?
                    .strip_prefix('=')
                    .map(|v| v.trim_matches(['\'', '"']).to_string())
            })
        };
        let url = var("AGENTIC_TEST_PG_URL").ctx("pg-test-server.sh printed no AGENTIC_TEST_PG_URL")?;
        let dir = var("AGENTIC_TEST_PG_DIR").ctx("pg-test-server.sh printed no AGENTIC_TEST_PG_DIR")?;
        Ok(PgServer { url, throwaway: Some((script.to_path_buf(), PathBuf::from(dir))) })
    }

    /// The server's postmaster process, when the server runs on this machine (the parent of a backend): its
    /// process tree is the server's CPU ([`crate::proc::tree_cpu_time`]).
    ///
    /// # Errors
    /// When the server refuses.
    pub async fn postmaster(&self) -> Result<Option<u32>> {
        let (client, conn) =
            tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.ctx("connecting to PostgreSQL")?;
        let conn = tokio::spawn(conn);
        let row = client.query_one("SELECT pg_backend_pid()", &[]).await.ctx("SELECT pg_backend_pid()")?;
        let backend: i32 = row.get(0);
        let parent = u32::try_from(backend).ok().and_then(crate::proc::parent_pid);
        drop(client);
        let _ = conn.await;
        Ok(parent.filter(|p| crate::proc::tree_cpu_time(*p).is_some()))
    }

    /// Creates (dropping any earlier one) the database `name` and returns its URL.
    ///
    /// # Errors
    /// When the server refuses.
    pub async fn database(&self, name: &str) -> Result<String> {
        let (client, conn) =
            tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.ctx("connecting to PostgreSQL")?;
        let conn = tokio::spawn(conn);
        client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.ctx("DROP DATABASE")?;
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.ctx("CREATE DATABASE")?;
        drop(client);
        let _ = conn.await;
        Ok(agentic::store::with_database(&self.url, name))
    }
}

/// The peers the scenario runs next to ours; each `None` when it could not be set up (the reason is a note).
#[derive(Debug, Default)]
pub struct Peers {
    /// The Python of the virtualenv with LangGraph and `langgraph-checkpoint-postgres`, and `bench_pg.py`.
    pub langgraph: Option<(PathBuf, PathBuf)>,
    /// The built `graph-flow-peer` binary.
    pub graph_flow: Option<PathBuf>,
    /// Why a peer is missing.
    pub notes: Vec<String>,
}

impl Peers {
    /// Sets up the peers: the virtualenv `venv` from `bench/langgraph-pg/requirements.lock.txt` and the
    /// `graph-flow-peer` crate built in release into `target` (its own lock file and target directory).
    /// Without `langgraph` (the bench's `--langgraph`) only graph-flow is set up.
    pub fn prepare(venv: &Path, target: &Path, python: &str, langgraph: bool) -> Peers {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut peers = Peers::default();
        let project = here.join("langgraph-pg");
        if !langgraph {
            peers
                .notes
                .push("pg: no LangGraph figures (pass --langgraph to run its PostgresSaver side by side).".into());
        } else {
            match crate::langgraph::ensure_venv(&project, venv, python) {
                Ok(py) => peers.langgraph = Some((py, project.join("bench_pg.py"))),
                Err(e) => peers.notes.push(format!("pg: no LangGraph figures (its virtualenv failed: {e}).")),
            }
        }
        let manifest = here.join("graph-flow-peer/Cargo.toml");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        eprintln!("bench: building graph-flow-peer ({cargo} build --release --manifest-path {})", manifest.display());
        let built = Command::new(&cargo)
            .args(["build", "--release", "--quiet", "--manifest-path"])
            .arg(&manifest)
            .env("CARGO_TARGET_DIR", target)
            .status();
        match built {
            Ok(s) if s.success() => peers.graph_flow = Some(target.join("release/graph-flow-peer")),
            Ok(s) => peers.notes.push(format!("pg: no graph-flow figures (its build failed: {s}).")),
            Err(e) => peers.notes.push(format!("pg: no graph-flow figures (cargo did not run: {e}).")),
        }
        peers
    }
}

/// Sizes of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgPlan {
    /// Chain lengths and repetitions: (N, reps).
    pub seq: [(usize, usize); 2],
    /// Workers: (M runs, C clients).
    pub workers: (usize, usize),
    /// Answers posted to the other server of two: how many runs.
    pub handoffs: usize,
}

impl PgPlan {
    /// N = 10 (10 reps) and 100 (5 reps); 300 runs from 30 clients; 200 answers through another server.
    pub fn full() -> PgPlan {
        PgPlan { seq: [(10, 10), (100, 5)], workers: (300, 30), handoffs: 200 }
    }

    /// N = 10 and 100, 3 reps each; 100 runs from 20 clients; 50 answers through another server.
    pub fn quick() -> PgPlan {
        PgPlan { seq: [(10, 3), (100, 3)], workers: (100, 20), handoffs: 50 }
    }
}

/// What the scenario needs: the server, the peers and the sizes.
#[derive(Debug)]
pub struct PgSetup {
    /// The PostgreSQL server.
    pub server: PgServer,
    /// The peers.
    pub peers: Peers,
    /// Sizes.
    pub plan: PgPlan,
}

const DURABILITIES: [(Durability, &str); 3] =
    [(Durability::Sync, "sync"), (Durability::Async, "async"), (Durability::Exit, "exit")];

/// Our per-step median (µs) for a chain of `n` on `store` with `durability`, `reps` runs after one warm-up.
///
/// # Errors
/// When a run fails or ends with a wrong state.
pub async fn ours_per_step(store: &PgStore, n: usize, durability: Durability, reps: usize, tag: &str) -> Result<f64> {
    let system = scenarios::chain(n, Keys::Distinct)?;
    scenarios::run_chain_on(&system, n, Keys::Distinct, store, durability, &format!("warm-{tag}")).await?;
    let mut times = Vec::with_capacity(reps);
    for rep in 0..reps {
        times.push(
            scenarios::run_chain_on(&system, n, Keys::Distinct, store, durability, &format!("{tag}-{rep}")).await?,
        );
    }
    times.sort();
    Ok(times[times.len() / 2].as_secs_f64() * 1e6 / n as f64)
}

/// The database's floor for a durable write (µs): `n` single-row `INSERT`s of a `payload`-byte text, each its
/// own transaction (autocommit: one round trip, one commit that waits for the WAL flush, `synchronous_commit`
/// on) on one connection with a prepared statement; the median of `reps` series (after one warm-up) ÷ `n`.
///
/// # Errors
/// When the server refuses.
pub async fn floor_per_commit(url: &str, n: usize, payload: usize, reps: usize) -> Result<f64> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.ctx("connecting to PostgreSQL")?;
    let conn = tokio::spawn(conn);
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, payload text NOT NULL);
             SET synchronous_commit = on",
        )
        .await
        .ctx("creating bench_floor")?;
    let insert = client.prepare("INSERT INTO bench_floor (payload) VALUES ($1)").await.ctx("prepare")?;
    let text = "x".repeat(payload);
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let t0 = Instant::now();
        for _ in 0..n {
            client.execute(&insert, &[&text]).await.ctx("INSERT")?;
        }
        if rep > 0 {
            times.push(t0.elapsed());
        }
    }
    drop(client);
    let _ = conn.await;
    times.sort();
    Ok(times[times.len() / 2].as_secs_f64() * 1e6 / n as f64)
}

/// The mean size (bytes) of the journal rows our runs wrote in the database at `url`.
///
/// # Errors
/// When the server refuses.
async fn journal_row_size(url: &str) -> Result<usize> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.ctx("connecting to PostgreSQL")?;
    let conn = tokio::spawn(conn);
    let row = client
        .query_one("SELECT coalesce(avg(octet_length(step::text)), 0)::float8 FROM agentic_journal", &[])
        .await
        .ctx("reading the journal's row size")?;
    let size: f64 = row.get(0);
    drop(client);
    let _ = conn.await;
    Ok(size.round() as usize)
}

/// Runs a peer command that prints one JSON object on its last stdout line.
pub(crate) fn peer_json(cmd: &mut Command, what: &str) -> Result<Value> {
    let out = cmd.stderr(Stdio::inherit()).output().ctx(format!("running {what}"))?;
    ensure(out.status.success(), || format!("{what} failed ({})", out.status))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().rev().find(|l| l.trim_start().starts_with('{')).ctx(format!("{what} printed no JSON"))?;
    serde_json::from_str(last).ctx(format!("{what}'s JSON"))
}

/// The per-step figures (µs) of a peer's `{"seq": [{"n", "durability"?, "per_step_us_median"}]}`.
fn seq_rows(v: &Value) -> Vec<(usize, String, f64)> {
    v["seq"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| {
                    Some((
                        r["n"].as_u64()? as usize,
                        r["durability"].as_str().unwrap_or("sync").to_string(),
                        r["per_step_us_median"].as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the scenario and appends its rows and notes.
///
/// # Errors
/// When our side fails (a peer's failure is a note).
pub fn run(
    setup: &PgSetup,
    serve_cmd: &[String],
    work: &Path,
    rt: &tokio::runtime::Runtime,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let plan = setup.plan;
    let ns: Vec<String> = plan.seq.iter().map(|(n, _)| n.to_string()).collect();
    let reps = plan.seq.iter().map(|(_, r)| *r).max().unwrap_or(3);
    // LangGraph first, then graph-flow, then ours: back to back on the same server, each in its own database.
    let mut lg: Vec<(usize, String, f64)> = Vec::new();
    if let Some((py, script)) = &setup.peers.langgraph {
        let url = rt.block_on(setup.server.database("bench_langgraph"))?;
        eprintln!("bench: LangGraph PostgresSaver, chain N={}", ns.join(","));
        match peer_json(
            Command::new(py).arg(script).args([
                "seq",
                "--url",
                &url,
                "--ns",
                &ns.join(","),
                "--reps",
                &reps.to_string(),
            ]),
            "bench_pg.py seq",
        ) {
            Ok(v) => lg = seq_rows(&v),
            Err(e) => notes.push(format!("pg: LangGraph's per-step run failed: {e}")),
        }
    }
    let mut gf: Vec<(usize, String, f64)> = Vec::new();
    if let Some(bin) = &setup.peers.graph_flow {
        let url = rt.block_on(setup.server.database("bench_graph_flow"))?;
        eprintln!("bench: graph-flow PostgresSessionStorage, chain N={}", ns.join(","));
        match peer_json(
            Command::new(bin).args(["--url", &url, "--ns", &ns.join(","), "--reps", &reps.to_string()]),
            "graph-flow-peer",
        ) {
            Ok(v) => gf = seq_rows(&v),
            Err(e) => notes.push(format!("pg: graph-flow's run failed: {e}")),
        }
    }
    let url = rt.block_on(setup.server.database("bench_agentic"))?;
    let floor_url = rt.block_on(setup.server.database("bench_floor"))?;
    let store = rt.block_on(PgStore::connect(&url)).ctx("opening the PostgreSQL store")?;
    for (n, reps) in plan.seq {
        let mut sync = 0.0;
        for (durability, name) in DURABILITIES {
            eprintln!("bench: ours on PostgreSQL, chain N={n} {name}");
            let ours = rt.block_on(ours_per_step(&store, n, durability, reps, &format!("seq-{n}-{name}")))?;
            if durability == Durability::Sync {
                sync = ours;
            }
            let peer = lg.iter().find(|(ln, d, _)| *ln == n && d == name).map(|r| r.2);
            rows.push(Row {
                scenario: format!(
                    "PostgreSQL, seq distinct N={n}, per step: ours {name} vs LangGraph PostgresSaver {name}"
                ),
                langgraph: peer.map(table::us).unwrap_or_default(),
                ours: table::us(ours),
                ratio: peer.map(|p| table::ratio(p / ours)).unwrap_or_default(),
                target: String::new(),
            });
            if durability == Durability::Sync
                && let Some(g) = gf.iter().find(|(gn, _, _)| *gn == n).map(|r| r.2)
            {
                rows.push(Row {
                    scenario: format!(
                        "PostgreSQL, seq distinct N={n}, per step: ours sync vs graph-flow 0.8.1 PostgresSessionStorage (load + run + save per step; column = graph-flow)"
                    ),
                    langgraph: table::us(g),
                    ours: table::us(ours),
                    ratio: table::ratio(g / ours),
                    target: String::new(),
                });
            }
        }
        // The floor, right after ours on the same server: a bare row.
        eprintln!("bench: the floor, {n} single-row INSERT + COMMIT of 16 B");
        let floor = rt.block_on(floor_per_commit(&floor_url, n, 16, reps))?;
        rows.push(Row {
            scenario: format!(
                "PostgreSQL, N={n}: ours sync per step ÷ the floor: one single-row INSERT + COMMIT (16 B; synchronous_commit on; column = floor)"
            ),
            langgraph: format!("floor {}", table::us(floor)),
            ours: table::us(sync),
            ratio: format!("{:.2} × floor", sync / floor),
            target: String::new(),
        });
        // The bars of issue #45 (within 1.4 floors at N=10, where a run's start is a commit of its own; 1.2 at
        // N=100), in 3 rounds of 3 runs: each round measures the floor of our journal rows' size just before
        // and just after ours, as the disk's commit latency drifts by more than the gap over a minute.
        let size = rt.block_on(journal_row_size(&url))?;
        let bar = if n <= 10 { 1.4 } else { 1.2 };
        let mut rounds = Vec::new();
        for round in 0..3 {
            eprintln!("bench: round {} of 3, N={n}: the floor ({size} B), ours sync, the floor", round + 1);
            let before = rt.block_on(floor_per_commit(&floor_url, n, size, 3))?;
            let ours = rt.block_on(ours_per_step(&store, n, Durability::Sync, 3, &format!("round{round}-{n}")))?;
            let after = rt.block_on(floor_per_commit(&floor_url, n, size, 3))?;
            rounds.push((ours, (before + after) / 2.0));
        }
        let ratios: Vec<f64> = rounds.iter().map(|(ours, floor)| ours / floor).collect();
        let show = |v: Vec<String>| v.join(" / ");
        rows.push(Row {
            scenario: format!(
                "PostgreSQL, N={n}: ours sync per step ÷ the floor ({size} B, our journal row's mean size), 3 rounds of 3 runs, each between two floor measurements"
            ),
            langgraph: format!("floor {}", show(rounds.iter().map(|r| table::us(r.1)).collect())),
            ours: show(rounds.iter().map(|r| table::us(r.0)).collect()),
            ratio: format!("{} × floor", show(ratios.iter().map(|r| format!("{r:.2}")).collect())),
            target: table::target(&format!("≤{bar} × floor, every round"), ratios.iter().all(|r| *r <= bar)),
        });
    }
    drop(store);
    run_workers(setup, serve_cmd, work, rt, rows, notes)
}

/// The workers part: runs/s with 1, 2 and 3 `agentic serve` processes (and LangGraph library workers).
fn run_workers(
    setup: &PgSetup,
    serve_cmd: &[String],
    work: &Path,
    rt: &tokio::runtime::Runtime,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let (m, c) = setup.plan.workers;
    let mut first: Option<f64> = None;
    let postmaster = rt.block_on(setup.server.postmaster())?;
    if postmaster.is_none() {
        notes.push("pg workers: the PostgreSQL server does not run on this machine: its CPU is not counted.".into());
    }
    for k in 1..=3usize {
        let lg = match &setup.peers.langgraph {
            Some((py, script)) => {
                let url = rt.block_on(setup.server.database("bench_langgraph_workers"))?;
                eprintln!("bench: LangGraph, {k} worker process(es), {m} runs");
                match peer_json(
                    Command::new(py).arg(script).args([
                        "workers",
                        "--url",
                        &url,
                        "--k",
                        &k.to_string(),
                        "--runs",
                        &m.to_string(),
                        "--concurrency",
                        &c.to_string(),
                    ]),
                    "bench_pg.py workers",
                ) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        notes.push(format!("pg: LangGraph's {k}-worker run failed: {e}"));
                        None
                    }
                }
            }
            None => None,
        };
        let url = rt.block_on(setup.server.database("bench_agentic_workers"))?;
        let mut servers = Vec::with_capacity(k);
        let mut dirs = Vec::with_capacity(k);
        for _ in 0..k {
            let dir = tempfile::tempdir_in(work).ctx("temporary directory")?;
            servers.push(ServerProcess::agentic_on(serve_cmd, dir.path(), std::ffi::OsStr::new(&url), "sync")?);
            dirs.push(dir);
        }
        eprintln!("bench: {m} runs from {c} clients over {k} agentic serve process(es) on one database");
        let refs: Vec<&ServerProcess> = servers.iter().collect();
        let also: Vec<u32> = postmaster.into_iter().collect();
        let r = rt.block_on(serve::measure_many(&refs, m, c, &also))?;
        ensure(r.completed == m, || format!("pg workers: {} of {m} runs completed", r.completed))?;
        // CPU per run, what a user pays for: the servers' and PostgreSQL's (ours), the library workers' and
        // PostgreSQL's (LangGraph).
        let per_run = |s: f64| s * 1e6 / m as f64;
        let ours_cpu = per_run((r.server_cpu + r.also_cpu).as_secs_f64());
        let lg_cpu = lg.as_ref().and_then(|v| Some(per_run(v["workers_cpu_s"].as_f64()? + v["pg_cpu_s"].as_f64()?)));
        rows.push(Row {
            scenario: format!(
                "PostgreSQL, {k} worker(s), {m} runs of a 5-step chain, sync: CPU per run, the workers' + PostgreSQL's \
                 (ours: `agentic serve` ×{k} [server / PostgreSQL]; LangGraph: {k} library process(es) [workers / \
                 PostgreSQL])"
            ),
            langgraph: match (&lg, lg_cpu) {
                (Some(v), Some(cpu)) => format!(
                    "{} [{} / {}]",
                    table::us(cpu),
                    table::us(per_run(v["workers_cpu_s"].as_f64().unwrap_or(0.0))),
                    table::us(per_run(v["pg_cpu_s"].as_f64().unwrap_or(0.0)))
                ),
                _ => String::new(),
            },
            ours: format!(
                "{} [{} / {}]",
                table::us(ours_cpu),
                table::us(per_run(r.server_cpu.as_secs_f64())),
                table::us(per_run(r.also_cpu.as_secs_f64()))
            ),
            ratio: lg_cpu.map(|l| table::ratio(l / ours_cpu)).unwrap_or_default(),
            target: lg_cpu.map(|l| table::target("≥10x less", l / ours_cpu >= 10.0)).unwrap_or_default(),
        });
        let lg = lg.as_ref().and_then(|v| v["runs_per_s"].as_f64());
        let ours = r.runs_per_s();
        let scale = first.map(|f| format!(" ({:.2}× one worker)", ours / f)).unwrap_or_default();
        first.get_or_insert(ours);
        rows.push(Row {
            scenario: format!(
                "PostgreSQL, {k} worker(s) on one database, {m} runs of a 5-step chain, {c} clients, sync: runs/s (ours: `agentic serve` ×{k} over HTTP; LangGraph: {k} library process(es), no HTTP)"
            ),
            langgraph: lg.map(|l| format!("{l:.0}")).unwrap_or_default(),
            ours: format!("{ours:.0}{scale} (p99 submit {})", table::dur(r.p99)),
            ratio: lg.map(|l| table::ratio(ours / l)).unwrap_or_default(),
            target: String::new(),
        });
        if k == 2 {
            let n = setup.plan.handoffs;
            eprintln!("bench: {n} answers posted to one server for runs suspended on the other");
            let (p50, p99) = rt.block_on(answer_handoff(&servers[0], &servers[1], n))?;
            rows.push(Row {
                scenario: format!(
                    "PostgreSQL, 2 workers: an answer posted to a server other than the one the run suspended on → its next step starts (`agent_started` on that server's event stream), {n} runs: p50 / p99"
                ),
                langgraph: String::new(),
                ours: format!("{} / {}", table::dur(p50), table::dur(p99)),
                ratio: String::new(),
                target: format!("< 100 ms (SERVER.md §4) {}", if p99 < Duration::from_millis(100) { "✔" } else { "✘" }),
            });
        }
        drop(servers);
    }
    Ok(())
}

/// A human step, then a computation: what [`answer_handoff`] runs.
const HANDOFF_SPEC: &str = "\
version: 1
name: handoff
root: main
agents:
  main: { kind: sequence, agents: [ask, after], output_key: done }
  ask: { kind: human, prompt: 'go?', response_id: go, output_key: answer }
  after: { kind: compute, template: 'after {{ answer }}', output_key: done }
";

/// For `runs` runs suspended on `a`: the time from posting the answer to `b` until `b`'s event stream of the
/// run shows the next step starting; returns the median and the 99th percentile.
async fn answer_handoff(a: &ServerProcess, b: &ServerProcess, runs: usize) -> Result<(Duration, Duration)> {
    let http = reqwest::Client::new();
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs + 3 {
        let id = format!("handoff-{i}");
        let body = serde_json::json!({"spec": HANDOFF_SPEC, "run_id": id});
        let resp = http.post(format!("{}/api/v1/runs", a.url)).json(&body).send().await.ctx("POST /api/v1/runs")?;
        ensure(resp.status().as_u16() == 201, || format!("POST /api/v1/runs: {}", resp.status()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let run: Value = http
                .get(format!("{}/api/v1/runs/{id}", a.url))
                .send()
                .await
                .ctx("GET run")?
                .json()
                .await
                .ctx("GET run")?;
            if run["status"] == "suspended" && run["executing"] == false {
                break;
            }
            ensure(Instant::now() < deadline, || format!("run {id} did not suspend: {run}"))?;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut stream = http.get(format!("{}/api/v1/runs/{id}/events", b.url)).send().await.ctx("GET events")?;
        let t0 = Instant::now();
        let answer = format!("{}/api/v1/runs/{id}/responses/go", b.url);
        let resp = http.post(answer).json(&serde_json::json!({"value": "yes"})).send().await.ctx("POST answer")?;
        ensure(resp.status().as_u16() == 202, || format!("POST answer: {}", resp.status()))?;
        let mut text = String::new();
        let started = loop {
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
                .await
                .ctx(format!("run {id}: no next step within 10 s"))?
                .ctx("reading events")?
                .ctx(format!("run {id}: the stream ended before the next step: {text}"))?;
            text.push_str(&String::from_utf8_lossy(&chunk));
            // `agent_started` of the step after the human one (its data starts with its path).
            if text.contains("{\"path\":\"root/1\"") {
                break t0.elapsed();
            }
        };
        if i >= 3 {
            times.push(started);
        }
    }
    times.sort();
    Ok((serve::quantile(&times, 0.5), serve::quantile(&times, 0.99)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_peers_rows() {
        let v: Value = serde_json::from_str(
            r#"{"seq":[{"n":10,"durability":"async","per_step_us_median":3.5},{"n":100,"per_step_us_median":8}]}"#,
        )
        .expect("json");
        assert_eq!(seq_rows(&v), vec![(10, "async".to_string(), 3.5), (100, "sync".to_string(), 8.0)]);
    }
}
