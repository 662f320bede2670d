//! `agentic-bench`: runs the side-by-side scenarios and prints the table (see the library docs and
//! `docs/performance.md`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentic_bench::error::{Context, Error, Result};
use agentic_bench::langgraph::{self, Figures};
use agentic_bench::runner::{self, Lg, Plan, Setup};
use agentic_bench::scenarios::{self, Backend, ConcurrentMode, Keys};
use agentic_bench::{pg, proc, serve, table};
use clap::{Parser, Subcommand};

/// The engine side by side with the LangGraph baseline harness: one table, scenario | LangGraph | ours | ratio.
#[derive(Debug, Parser)]
#[command(name = "agentic-bench", version)]
struct Args {
    /// Run a reduced set (about a minute on 2 cores without --langgraph).
    #[arg(long)]
    quick: bool,
    /// Run only these scenarios (repeatable or comma-separated): seq, fanout, resume, concurrent, disk, fsync,
    /// llm, tools, eval, serve, pg, group.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    scenario: Vec<String>,
    /// Also run the Python harness now, back to back (a virtualenv is created under the output directory from
    /// its requirements.lock.txt); without it the LangGraph column holds its recorded results-langgraph.md. The
    /// serve scenario then also starts LangGraph's dev server (`langgraph-cli[inmem]`, its own virtualenv).
    #[arg(long)]
    langgraph: bool,
    /// The LangGraph harness directory [default: ../shared/bench/langgraph, next to the repository].
    #[arg(long, value_name = "DIR", env = "LG_HARNESS")]
    lg_harness: Option<PathBuf>,
    /// The Python used to create the virtualenv.
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    python: String,
    /// Where the table, the virtualenv, the harness copy and the scratch stores go (default: target/bench).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The serve scenario's size: runs submitted over HTTP (default 1000; 300 with --quick).
    #[arg(long, value_name = "M")]
    serve_runs: Option<usize>,
    /// The pg scenario's PostgreSQL server (a URL whose user may create databases); without it a throwaway
    /// cluster is started with scripts/pg-test-server.sh (fsync on) and stopped at the end.
    #[arg(long, value_name = "URL", env = "AGENTIC_BENCH_PG_URL")]
    pg_url: Option<String>,
    /// The serve scenario's concurrent clients (default 50).
    #[arg(long, value_name = "C")]
    serve_clients: Option<usize>,
    #[command(subcommand)]
    child: Option<Child>,
}

/// The child processes the scenarios spawn (not for direct use).
#[derive(Debug, Subcommand)]
enum Child {
    /// Runs one scenario step in this process and prints its result as JSON.
    #[command(hide = true)]
    Child {
        #[command(subcommand)]
        what: ChildWhat,
    },
}

#[derive(Debug, Subcommand)]
enum ChildWhat {
    /// Process A of the resume scenario: run until the human step suspends.
    ResumeStart { store: PathBuf, id: String },
    /// Process B: answer and finish.
    Resume { store: PathBuf, id: String },
    /// M concurrent 5-step runs in this process.
    Concurrent { m: usize, mode: String },
    /// R runs, one after another, of an N-step in-memory chain (distinct keys; `memory`: a memory store,
    /// `none`: no store), printing the mean time per step: a process to profile the step in
    /// (`perf record -g target/release/agentic-bench child chain 100 2000 memory`).
    Chain { n: usize, runs: usize, backend: String },
    /// The server of `agentic serve` (the same library call), for the smoke test of the serve scenario.
    Serve {
        #[arg(long)]
        store: PathBuf,
        #[arg(long)]
        specs: PathBuf,
        #[arg(long)]
        listen: std::net::SocketAddr,
    },
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().ctx("starting the Tokio runtime")
}

fn run_child(what: ChildWhat) -> Result<()> {
    let rt = runtime()?;
    let line = match what {
        ChildWhat::ResumeStart { store, id } => {
            let t = rt.block_on(scenarios::resume_start(&store, &id))?;
            serde_json::json!({ "t_run_to_interrupt": t.as_secs_f64() }).to_string()
        }
        ChildWhat::Resume { store, id } => {
            let t = rt.block_on(scenarios::resume_finish(&store, &id))?;
            serde_json::to_string(&t).ctx("encoding the result")?
        }
        ChildWhat::Concurrent { m, mode } => {
            let r = rt.block_on(scenarios::concurrent_child(m, ConcurrentMode::parse(&mode)?))?;
            serde_json::to_string(&r).ctx("encoding the result")?
        }
        ChildWhat::Chain { n, runs, backend } => {
            let backend = match backend.as_str() {
                "memory" => Backend::Memory,
                "none" => Backend::None,
                other => return Err(Error::msg(format!("backend {other:?}: expected memory or none"))),
            };
            let system = scenarios::chain(n, Keys::Distinct)?;
            // One `block_on` per run, as the seq scenario times them.
            let mut total = std::time::Duration::ZERO;
            for r in 0..runs {
                total +=
                    rt.block_on(scenarios::run_chain(&system, n, Keys::Distinct, backend, None, &format!("r{r}")))?;
            }
            let per_step_us = total.as_secs_f64() * 1e6 / (n * runs.max(1)) as f64;
            serde_json::json!({ "n": n, "runs": runs, "per_step_us": per_step_us }).to_string()
        }
        ChildWhat::Serve { store, specs, listen } => {
            let sled = agentic::store::SledStore::open(&store).ctx(format!("opening {}", store.display()))?;
            let config =
                agentic_server::ServerConfig::new(sled.store_ref()).state_dir(&store).listen(listen).specs_dir(&specs);
            rt.block_on(async {
                let server = agentic_server::Server::start(config).await.ctx("starting the server")?;
                server.run_until(std::future::pending::<()>()).await.ctx("serving")
            })?;
            return Ok(());
        }
    };
    println!("{line}");
    Ok(())
}

/// `target/` of this binary (`target/release/agentic-bench` → `target`).
fn target_dir(exe: &Path) -> PathBuf {
    exe.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("target"))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} cores ({cpu}), Linux {}", kernel.trim())
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main_inner(args: Args) -> Result<()> {
    runner::check_scenarios(&args.scenario)?;
    let exe = std::env::current_exe().ctx("locating this binary")?;
    let out = args.out.unwrap_or_else(|| target_dir(&exe).join("bench"));
    std::fs::create_dir_all(&out).ctx(format!("creating {}", out.display()))?;
    let harness =
        args.lg_harness.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bench/langgraph"));
    let mut plan = if args.quick { Plan::quick() } else { Plan::full() };
    plan.serve = (args.serve_runs.unwrap_or(plan.serve.0), args.serve_clients.unwrap_or(plan.serve.1).max(1));
    let started = now_utc();
    let load0 = proc::loadavg();
    let mut notes = Vec::new();

    let mut lg = Lg::default();
    match std::fs::read_to_string(harness.join("results-langgraph.md")) {
        Ok(md) => match Figures::from_markdown(&md, "results-langgraph.md (run 3, recorded)") {
            Ok(f) => lg.recorded = Some(f),
            Err(e) => notes.push(format!("could not read the recorded LangGraph figures: {e}")),
        },
        Err(e) => {
            notes.push(format!("no recorded LangGraph figures ({}/results-langgraph.md: {e})", harness.display()))
        }
    }
    let harness_plan = plan.harness(args.quick, &args.scenario);
    if args.langgraph && harness_plan.commands.is_empty() {
        // Only scenarios the harness has no script for (serve): nothing to re-run.
    } else if args.langgraph {
        let rerun = langgraph::ensure_venv(&harness, &out.join("venv"), &args.python)
            .and_then(|py| langgraph::run_harness(&harness, &out.join("langgraph"), &py, &harness_plan));
        match rerun {
            Ok(f) => {
                let marked = if args.quick {
                    "; figures marked † are from results-langgraph.md (not re-run in --quick)"
                } else {
                    ""
                };
                notes.push(format!("LangGraph column: {}{marked}.", f.source));
                lg.rerun = Some(f);
            }
            Err(e) => {
                eprintln!("bench: the LangGraph harness did not run: {e}");
                notes.push(format!(
                    "LangGraph column: FALLBACK to the recorded results-langgraph.md (run 3) because the harness did not run: {e}"
                ));
            }
        }
    } else {
        notes.push("LangGraph column: the harness's recorded results-langgraph.md (run 3, same machine); pass --langgraph to re-run it back to back.".into());
    }

    let on = |name: &str| args.scenario.is_empty() || args.scenario.iter().any(|s| s == name);
    let pg_on = on("pg") || on("group");
    let serve_on = on("pg") || on("serve");
    let serve_cmd = if serve_on {
        let bin = serve::agentic_binary(&exe)?;
        vec![bin.display().to_string(), "serve".to_string()]
    } else {
        Vec::new()
    };
    let lg_project = Path::new(env!("CARGO_MANIFEST_DIR")).join("langgraph-serve");
    let langgraph_serve = if serve_on && args.langgraph {
        match serve::ensure_langgraph_venv(&lg_project, &out.join("venv-serve"), &args.python) {
            Ok(venv) => Some((venv, lg_project)),
            Err(e) => {
                eprintln!("bench: LangGraph's dev server is not available: {e}");
                notes.push(format!("serve: no LangGraph dev server (its virtualenv failed: {e})."));
                None
            }
        }
    } else {
        None
    };
    let pg = if pg_on {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-test-server.sh");
        match pg::PgServer::start_or_use(args.pg_url.clone(), &script) {
            Ok(server) => {
                let mut peers = pg::Peers::prepare(
                    &out.join("venv-pg"),
                    &out.join("graph-flow-target"),
                    &args.python,
                    args.langgraph,
                );
                notes.append(&mut peers.notes);
                let plan = if args.quick { pg::PgPlan::quick() } else { pg::PgPlan::full() };
                Some(std::sync::Arc::new(pg::PgSetup { server, peers, plan }))
            }
            Err(e) => {
                eprintln!("bench: skipping the pg scenario: {e}");
                notes.push(format!("pg: skipped, no PostgreSQL server ({e}); pass --pg-url or install PostgreSQL."));
                None
            }
        }
    } else {
        None
    };
    let setup =
        Setup { plan, scenarios: args.scenario.clone(), work: out.join("tmp"), exe, serve_cmd, langgraph_serve, pg };
    let rt = runtime()?;
    let load_ours = proc::loadavg();
    let report = runner::run(&setup, &lg, &rt)?;
    let _ = std::fs::remove_dir_all(&setup.work);
    notes.extend(report.notes);
    notes.push(format!(
        "{started}, {}; loadavg at start {load0}, before ours {load_ours}, at the end {}{}.",
        machine(),
        proc::loadavg(),
        if args.quick { "; --quick" } else { "" }
    ));
    notes.push("ratio = LangGraph time ÷ ours (or ours runs/s ÷ LangGraph's, LangGraph bytes ÷ ours): above 1 = ours is better; LLM rows are multiples of the server's fixed 50 ms latency.".into());
    let md = table::markdown(&report.rows, &notes);
    println!("{md}");
    let file = out.join("side_by_side.md");
    std::fs::write(&file, format!("# agentic vs LangGraph, side by side\n\n{md}"))
        .ctx(format!("writing {}", file.display()))?;
    eprintln!("bench: table written to {}", file.display());
    Ok(())
}

/// mimalloc, as a production Rust service would use: glibc's malloc serialised the threads of the LLM-bound
/// scenarios on its arena lock. The engine does not depend on the allocator. Feature `system-alloc`: glibc's
/// malloc, for heap profilers.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.child {
        Some(Child::Child { what }) => run_child(what),
        None => main_inner(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
