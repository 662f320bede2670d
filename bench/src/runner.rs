//! The side-by-side run: which sizes each scenario runs at ([`Plan`]), our measurements, the LangGraph figures
//! (re-run or recorded) and the rows of the table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentic::engine::Effect;
use agentic::prelude::*;
use agentic::store::SledStore;

use crate::error::{Context, Error, Result, ensure};
use crate::langgraph::{Figures, HarnessPlan};
use crate::scenarios::{self, Backend, ConcurrentMode, ConcurrentResult, Keys, ResumeTimes, Shape, median};
use crate::table::{self, Row};
use crate::{llm, proc, serve, tools};

/// The scenarios, by the names `--scenario` takes.
pub const SCENARIOS: [&str; 12] =
    ["seq", "fanout", "resume", "concurrent", "disk", "fsync", "llm", "tools", "eval", "serve", "pg", "group"];

/// The LLM server's fixed latency.
pub const LLM_LATENCY: Duration = Duration::from_millis(50);

/// Sizes and repetitions of every scenario.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Scenario 1: (keys, N, backend, repetitions).
    pub seq: Vec<(Keys, usize, Backend, usize)>,
    /// Scenario 2: (shape, K, backend, repetitions).
    pub fan: Vec<(Shape, usize, Backend, usize)>,
    /// Scenario 3: repetitions (one warm-up pair first).
    pub resume_reps: usize,
    /// Scenarios 4+5: (M, mode, repetitions); one process per repetition.
    pub conc: Vec<(usize, ConcurrentMode, usize)>,
    /// Bytes on disk after one run of this many steps.
    pub disk_steps: usize,
    /// Samples of each storage-floor probe.
    pub fsync_samples: usize,
    /// LLM: repetitions of the single call.
    pub llm_single_reps: usize,
    /// LLM: (K parallel agents, repetitions).
    pub llm_parallel: (usize, usize),
    /// LLM: (N-step sequence, repetitions).
    pub llm_seq: (usize, usize),
    /// LLM: (M concurrent runs, steps per run, repetitions).
    pub llm_conc: (usize, usize, usize),
    /// Serve: (M runs submitted over HTTP, C concurrent clients).
    pub serve: (usize, usize),
    /// Tools: (tool rounds per run, repetitions) of each tool effect and durability.
    pub tools: (usize, usize),
    /// Eval: (replayed cases, runs at once, repetitions of each of the eval and the runs alone, interleaved
    /// a/b, b/a, ...).
    pub eval: (usize, usize, usize),
    /// Group commit: (M concurrent runs, N steps each) under sync durability on sled and PostgreSQL.
    pub group: (usize, usize),
}

const SLED: [Backend; 3] =
    [Backend::Sled(Durability::Sync), Backend::Sled(Durability::Async), Backend::Sled(Durability::Exit)];

impl Plan {
    /// The full plan (LangGraph's sizes: N and K = 10, 100, 1000; M = 1000 and 10 000).
    pub fn full() -> Plan {
        let mut seq = Vec::new();
        for keys in [Keys::Distinct, Keys::Single] {
            for n in [10, 100, 1000] {
                for b in [Backend::None, Backend::Memory].into_iter().chain(SLED) {
                    let reps = match (n, b) {
                        (1000, Backend::Sled(Durability::Sync)) => 3,
                        (1000, _) => 5,
                        (100, _) => 10,
                        _ => 20,
                    };
                    seq.push((keys, n, b, reps));
                }
            }
        }
        let mut fan = Vec::new();
        for shape in [Shape::Static, Shape::Send] {
            for k in [10, 100, 1000] {
                for b in [Backend::None, Backend::Memory, Backend::Sled(Durability::Async)] {
                    fan.push((shape, k, b, if k == 1000 { 5 } else { 10 }));
                }
            }
        }
        Plan {
            seq,
            fan,
            resume_reps: 7,
            conc: vec![
                (1000, ConcurrentMode::Gather, 3),
                (1000, ConcurrentMode::Sequential, 3),
                (1000, ConcurrentMode::NoCheckpoint, 3),
                (10_000, ConcurrentMode::Gather, 3),
            ],
            disk_steps: 1000,
            fsync_samples: 300,
            llm_single_reps: 10,
            llm_parallel: (100, 5),
            llm_seq: (10, 3),
            llm_conc: (1000, 5, 3),
            serve: (1000, 50),
            tools: (3, 20),
            eval: (1000, 8, 30),
            group: (1000, 10),
        }
    }

    /// The reduced plan of `--quick` (about a minute on 2 cores, without LangGraph).
    pub fn quick() -> Plan {
        let mut seq = Vec::new();
        for n in [100, 1000] {
            for b in [Backend::None, Backend::Memory, Backend::Sled(Durability::Async)] {
                seq.push((Keys::Distinct, n, b, 3));
            }
        }
        seq.push((Keys::Distinct, 100, Backend::Sled(Durability::Sync), 3));
        let fan = [100, 1000]
            .into_iter()
            .flat_map(|k| [Backend::None, Backend::Memory].map(|b| (Shape::Static, k, b, 3)))
            .collect();
        Plan {
            seq,
            fan,
            resume_reps: 3,
            conc: vec![(1000, ConcurrentMode::Gather, 1), (10_000, ConcurrentMode::Gather, 1)],
            disk_steps: 1000,
            fsync_samples: 100,
            llm_single_reps: 5,
            llm_parallel: (100, 3),
            llm_seq: (10, 1),
            llm_conc: (1000, 5, 1),
            serve: (300, 50),
            tools: (3, 5),
            eval: (1000, 8, 3),
            group: (1000, 10),
        }
    }

    /// The smallest plan that still runs every scenario (tests): exact counts, no meaningful timings.
    pub fn tiny() -> Plan {
        Plan {
            seq: vec![(Keys::Distinct, 10, Backend::Memory, 1), (Keys::Single, 10, Backend::Sled(Durability::Sync), 1)],
            fan: vec![(Shape::Static, 10, Backend::None, 1), (Shape::Send, 10, Backend::Memory, 1)],
            resume_reps: 1,
            conc: vec![(20, ConcurrentMode::Gather, 1)],
            disk_steps: 10,
            fsync_samples: 3,
            llm_single_reps: 1,
            llm_parallel: (5, 1),
            llm_seq: (2, 1),
            llm_conc: (5, 2, 1),
            serve: (20, 4),
            tools: (3, 1),
            eval: (20, 8, 1),
            group: (20, 3),
        }
    }

    /// The harness invocations that produce the LangGraph figures this plan compares with.
    pub fn harness(&self, quick: bool, scenarios: &[String]) -> HarnessPlan {
        let on = |s: &str| scenarios.is_empty() || scenarios.iter().any(|x| x == s);
        let mut commands: Vec<Vec<String>> = Vec::new();
        let cmd = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        if on("seq") || on("disk") {
            if quick {
                commands.push(cmd(
                    "bench_seq.py --ns 100,1000 --variants distinct --ckpts none,memory,sqlite:sync,sqlite:async --reps 1 --out seq",
                ));
            } else {
                commands.push(cmd("bench_seq.py --ns 10,100 --reps 5 --out seq-small"));
                commands.push(cmd("bench_seq.py --ns 1000 --reps 3 --out seq-1000"));
            }
        }
        if on("fanout") {
            if quick {
                commands.push(cmd(
                    "bench_fanout.py --ks 100,1000 --shapes static --styles async --ckpts none,memory --reps 1 --out fanout",
                ));
            } else {
                commands.push(cmd("bench_fanout.py --ks 10,100 --styles async --reps 5 --out fanout-small"));
                commands.push(cmd("bench_fanout.py --ks 1000 --styles async --reps 3 --out fanout-1000"));
            }
        }
        if on("resume") {
            commands.push(cmd(&format!("bench_resume.py --reps {} --out resume", self.resume_reps)));
        }
        if on("concurrent") {
            if quick {
                commands.push(cmd("bench_concurrent.py --ms 1000 --modes gather --reps 1 --out concurrent"));
            } else {
                commands.push(cmd(
                    "bench_concurrent.py --ms 1000 --modes gather,sequential,nockpt --reps 3 --out concurrent",
                ));
                commands.push(cmd("bench_concurrent.py --ms 10000 --modes gather --reps 1 --out concurrent-10k"));
            }
        }
        if on("fsync") || on("seq") {
            commands.push(cmd("fsync_probe.py"));
        }
        HarnessPlan { commands }
    }
}

/// The LangGraph figures: a re-run's (if any) over the recorded ones.
#[derive(Debug, Default)]
pub struct Lg {
    /// Figures of a harness run made now.
    pub rerun: Option<Figures>,
    /// Figures of the harness's `results-langgraph.md`.
    pub recorded: Option<Figures>,
}

impl Lg {
    /// A figure from the re-run, else from the recorded file (marked `†` when a re-run exists but lacks it).
    pub fn pick<T>(&self, f: impl Fn(&Figures) -> Option<T>) -> Option<(T, &'static str)> {
        if let Some(v) = self.rerun.as_ref().and_then(&f) {
            return Some((v, ""));
        }
        let mark = if self.rerun.is_some() { " †" } else { "" };
        self.recorded.as_ref().and_then(f).map(|v| (v, mark))
    }
}

/// Where the bench works and what it runs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Sizes.
    pub plan: Plan,
    /// Selected scenarios (empty: all).
    pub scenarios: Vec<String>,
    /// Scratch space for stores and probes (on the disk under test).
    pub work: PathBuf,
    /// This binary, spawned for the child-process scenarios (resume, concurrent).
    pub exe: PathBuf,
    /// The command that starts our server, without its `--store`, `--specs` and `--listen` (serve scenario):
    /// `[".../agentic", "serve"]`.
    pub serve_cmd: Vec<String>,
    /// LangGraph's dev server for the serve scenario: the virtualenv with `langgraph-cli[inmem]` and the
    /// directory holding `langgraph.json` and `chain.py`; `None` runs ours only.
    pub langgraph_serve: Option<(PathBuf, PathBuf)>,
    /// The PostgreSQL scenario's server and peers; `None` skips it (the reason is in the notes).
    pub pg: Option<std::sync::Arc<crate::pg::PgSetup>>,
}

impl Setup {
    fn on(&self, s: &str) -> bool {
        self.scenarios.is_empty() || self.scenarios.iter().any(|x| x == s)
    }
}

/// The table's rows and the notes below it.
#[derive(Debug, Default)]
pub struct Report {
    /// Rows, in scenario order.
    pub rows: Vec<Row>,
    /// Notes (sources, load, counters).
    pub notes: Vec<String>,
    /// Exact counts checked by the tests: (what, count).
    pub counts: Vec<(String, usize)>,
}

fn lg_cell(v: Option<(String, &str)>) -> String {
    v.map(|(s, m)| format!("{s}{m}")).unwrap_or_default()
}

/// Runs the selected scenarios of `setup` and builds the rows against `lg`.
///
/// # Errors
/// When a scenario fails (a wrong result is an error, not a slow row).
pub fn run(setup: &Setup, lg: &Lg, rt: &tokio::runtime::Runtime) -> Result<Report> {
    let mut report = Report::default();
    std::fs::create_dir_all(&setup.work).ctx(format!("creating {}", setup.work.display()))?;
    let mut floor_100b: Option<(Duration, Duration, Duration)> = None;
    if setup.on("fsync") {
        run_fsync(setup, lg, &mut report, &mut floor_100b)?;
    }
    if setup.on("seq") {
        run_seq(setup, lg, rt, &mut report, &mut floor_100b)?;
    }
    if setup.on("disk") {
        run_disk(setup, lg, rt, &mut report)?;
    }
    if setup.on("fanout") {
        run_fan(setup, lg, rt, &mut report)?;
    }
    if setup.on("resume") {
        run_resume(setup, lg, &mut report)?;
    }
    if setup.on("concurrent") {
        run_concurrent(setup, lg, &mut report)?;
    }
    if setup.on("llm") {
        run_llm(setup, rt, &mut report)?;
    }
    if setup.on("tools") {
        run_tools(setup, rt, &mut report)?;
    }
    if setup.on("eval") {
        run_eval(setup, rt, &mut report)?;
    }
    if setup.on("serve") {
        run_serve(setup, rt, &mut report)?;
    }
    if setup.on("group") {
        run_group(setup, rt, &mut report)?;
    }
    if let Some(pg) = setup.pg.as_ref().filter(|_| setup.on("pg")) {
        crate::pg::run(pg, &setup.serve_cmd, &setup.work, rt, &mut report.rows, &mut report.notes)?;
    }
    Ok(report)
}

fn run_fsync(
    setup: &Setup,
    lg: &Lg,
    report: &mut Report,
    floor: &mut Option<(Duration, Duration, Duration)>,
) -> Result<()> {
    let n = setup.plan.fsync_samples;
    eprintln!("bench: storage floor (load {})", proc::loadavg());
    let f4k = scenarios::fsync_probe(&setup.work, 4096, n, false)?;
    let f100 = scenarios::fsync_probe(&setup.work, 100, n, true)?;
    let lg4k = lg.pick(|f| f.fsync_4k_us);
    report.rows.push(Row {
        scenario: "disk floor: write 4 KiB + fsync (`fsync_probe.py`), median".into(),
        langgraph: lg_cell(lg4k.map(|(v, m)| (table::us(v), m))),
        ours: table::dur(f4k),
        ratio: "(same disk op)".into(),
        target: String::new(),
    });
    report.rows.push(Row {
        scenario: "disk floor: one-row SQLite WAL commit, `synchronous=FULL` (`fsync_probe.py`), median".into(),
        langgraph: lg_cell(lg.pick(|f| f.sqlite_commit_us).map(|(v, m)| (table::us(v), m))),
        ..Row::default()
    });
    report.rows.push(Row {
        scenario: "disk floor: append 100 B + fdatasync (a growing file: metadata too), median".into(),
        ours: table::dur(f100),
        ..Row::default()
    });
    let over = scenarios::fdatasync_overwrite_probe(&setup.work, 100, n)?;
    report.rows.push(Row {
        scenario: "disk floor: overwrite 100 B in a preallocated file + fdatasync (data only), median".into(),
        ours: table::dur(over),
        ..Row::default()
    });
    *floor = Some((f4k, f100, over));
    report.counts.push(("fsync samples".into(), n));
    Ok(())
}

/// Runs one `run_chain` per repetition (after a warm-up run) and returns the median time.
fn time_chain(
    rt: &tokio::runtime::Runtime,
    system: &AgentRef,
    (keys, n, backend, reps): (Keys, usize, Backend, usize),
    sled: Option<&SledStore>,
) -> Result<Duration> {
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let id = format!("seq-{}-{n}-{}-{rep}", keys.name(), backend.name().replace(' ', "_"));
        let t = rt.block_on(scenarios::run_chain(system, n, keys, backend, sled, &id))?;
        if rep > 0 {
            times.push(t);
        }
    }
    Ok(median(&mut times))
}

fn run_seq(
    setup: &Setup,
    lg: &Lg,
    rt: &tokio::runtime::Runtime,
    report: &mut Report,
    floor: &mut Option<(Duration, Duration, Duration)>,
) -> Result<()> {
    let mut memory_per_step: Vec<(usize, f64)> = Vec::new();
    let mut sync_per_step: Vec<(usize, f64, (Duration, Duration, Duration))> = Vec::new();
    for &(keys, n, backend, reps) in &setup.plan.seq {
        eprintln!("bench: seq {} N={n} {} (load {})", keys.name(), backend.name(), proc::loadavg());
        let system = scenarios::chain(n, keys)?;
        let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
        let sled = match backend {
            Backend::Sled(_) => Some(SledStore::open(dir.path().join("store")).ctx("opening the sled store")?),
            _ => None,
        };
        if backend == Backend::Sled(Durability::Sync) {
            // The floors right before the sync rows: fsync latency on a shared disk drifts within minutes.
            let samples = setup.plan.fsync_samples.min(200);
            // The "raw write+fsync" as the harness's fsync_probe.py measures it (4 KiB + fsync), and
            // the two data-only floors a log can get closest to.
            let raw = scenarios::fsync_probe(&setup.work, 4096, samples, false)?;
            let append = scenarios::fsync_probe(&setup.work, 100, samples, true)?;
            let overwrite = scenarios::fdatasync_overwrite_probe(&setup.work, 100, samples)?;
            *floor = Some((raw, append, overwrite));
        }
        // The actor runtime's floor right before the in-memory rows, on the same runtime.
        let ring = if keys == Keys::Distinct && backend == Backend::Memory {
            let rings = (100_000 / n.max(1)).clamp(reps, 2000);
            Some((crate::floor::per_lap(rt, n as u64, rings)?, rings))
        } else {
            None
        };
        let t = time_chain(rt, &system, (keys, n, backend, reps), sled.as_ref())?;
        report.counts.push((format!("seq {} {n} {} keys", keys.name(), backend.name()), n));
        let per_step = t.as_secs_f64() * 1e6 / n as f64;
        let (ck, dur) = backend.langgraph();
        let lgv = lg.pick(|f| f.seq.get(&(keys.name().to_string(), n, ck.to_string(), dur.to_string())).copied());
        let vs = match backend {
            Backend::None | Backend::Memory => String::new(),
            _ => format!(" vs sqlite {dur}"),
        };
        let (target, ratio) = match &lgv {
            Some((f, _)) => {
                let r = f.per_step_us / per_step;
                let target = if backend == Backend::Memory && n >= 100 {
                    table::target("≥100x", r >= 100.0)
                } else {
                    String::new()
                };
                (target, table::ratio(r))
            }
            None => (String::new(), String::new()),
        };
        report.rows.push(Row {
            scenario: format!("seq {} N={n}, per step: {}{vs}", keys.name(), backend.name()),
            langgraph: lg_cell(lgv.map(|(f, m)| (table::us(f.per_step_us), m))),
            ours: table::us(per_step),
            ratio,
            target,
        });
        if keys == Keys::Distinct && backend == Backend::Memory {
            memory_per_step.push((n, per_step));
        }
        if let Some((lap, rings)) = ring {
            let floor = lap.as_secs_f64() * 1e6;
            let r = per_step / floor;
            report.rows.push(Row {
                scenario: format!(
                    "seq distinct N={n}, memory: per step ÷ the actor floor (three ractor actors pass one message \
                     round, {n} laps per ring with its start and stop, median of {rings} rings; `--example actor_ring`)"
                ),
                langgraph: format!("floor {}", table::us(floor)),
                ours: table::us(per_step),
                ratio: format!("{r:.2} × floor"),
                target: if n == 100 { table::target("≤2.0 × floor", r <= 2.0) } else { String::new() },
            });
            report.counts.push((format!("actor floor rings at N={n}"), rings));
        }
        if keys == Keys::Distinct
            && backend == Backend::Sled(Durability::Sync)
            && let Some(f) = *floor
        {
            sync_per_step.push((n, per_step, f));
        }
    }
    let at = |n: usize| memory_per_step.iter().find(|(m, _)| *m == n).map(|(_, v)| *v);
    if let (Some(a), Some(b)) = (at(100), at(1000)) {
        report.rows.push(Row {
            scenario: "seq distinct, memory: per step at N=1000 ÷ at N=100 (flatness)".into(),
            langgraph: lg_cell(
                lg.pick(|f| {
                    let k = |n: usize| ("distinct".to_string(), n, "memory".to_string(), "async (default)".to_string());
                    Some(f.seq.get(&k(1000))?.per_step_us / f.seq.get(&k(100))?.per_step_us)
                })
                .map(|(v, m)| (format!("{v:.2}"), m)),
            ),
            ours: format!("{:.2}", b / a),
            ratio: String::new(),
            target: table::target("flat (≤1.25)", b / a <= 1.25),
        });
    }
    for (n, per_step, (raw, append, overwrite)) in sync_per_step {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let (raw, append, overwrite) = (us(raw), us(append), us(overwrite));
        let r = per_step / raw;
        report.rows.push(Row {
            scenario: format!(
                "seq distinct N={n}: sled sync per step ÷ the disk's raw write 4 KiB + fsync measured just before \
                 (fsync_probe.py's floor; data-only floors: append 100 B + fdatasync {}, overwrite {})",
                table::us(append),
                table::us(overwrite)
            ),
            langgraph: format!("floor {}", table::us(raw)),
            ours: table::us(per_step),
            ratio: format!("{r:.2} × raw ({:.2} × append, {:.2} × overwrite)", per_step / append, per_step / overwrite),
            target: table::target("≤2 × raw write+fsync", r <= 2.0),
        });
    }
    Ok(())
}

fn run_disk(setup: &Setup, lg: &Lg, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    let steps = setup.plan.disk_steps;
    eprintln!("bench: bytes on disk after one {steps}-step run (load {})", proc::loadavg());
    let (apparent, allocated) = rt.block_on(scenarios::store_bytes_after_one_run(&setup.work, steps))?;
    let lgv = lg.pick(|f| f.seq.get(&("distinct".into(), steps, "sqlite".into(), "sync".into()))?.db_bytes);
    let (ratio, target) = match &lgv {
        Some((b, _)) => {
            (table::ratio(b / apparent as f64), table::target("≥100x smaller", b / apparent as f64 >= 100.0))
        }
        None => (String::new(), String::new()),
    };
    report.rows.push(Row {
        scenario: format!("bytes on disk after one {steps}-step sync run (SQLite file vs sled directory)"),
        langgraph: lg_cell(lgv.map(|(b, m)| (table::bytes(b), m))),
        ours: format!("{} ({} allocated)", table::bytes(apparent as f64), table::bytes(allocated as f64)),
        ratio,
        target,
    });
    report.counts.push(("disk bytes > 0".into(), usize::from(apparent > 0)));
    Ok(())
}

fn run_fan(setup: &Setup, lg: &Lg, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    for &(shape, k, backend, reps) in &setup.plan.fan {
        eprintln!("bench: fan-out {} K={k} {} (load {})", shape.name(), backend.name(), proc::loadavg());
        let system = scenarios::fan_out(k, shape)?;
        let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
        let sled = match backend {
            Backend::Sled(_) => Some(SledStore::open(dir.path().join("store")).ctx("opening the sled store")?),
            _ => None,
        };
        let mut times = Vec::with_capacity(reps);
        let mut outputs = 0;
        for rep in 0..=reps {
            let id = format!("fan-{}-{k}-{}-{rep}", shape.name(), backend.name().replace(' ', "_"));
            let (t, o) = rt.block_on(scenarios::run_fan_out(&system, k, shape, backend, sled.as_ref(), &id))?;
            outputs = o;
            if rep > 0 {
                times.push(t);
            }
        }
        report.counts.push((format!("fanout {} {k} {} outputs", shape.name(), backend.name()), outputs));
        let t = median(&mut times);
        let ck = match backend {
            Backend::None => "none",
            Backend::Memory => "memory",
            Backend::Sled(_) => "sqlite",
        };
        let lgv = lg.pick(|f| f.fan.get(&("async".into(), shape.name().into(), k, ck.into())).copied());
        let vs = if ck == "sqlite" { " vs sqlite async" } else { "" };
        report.rows.push(Row {
            scenario: format!("fan-out {} K={k} + join, whole run: {}{vs}", shape.name(), backend.name()),
            langgraph: lg_cell(lgv.map(|(ms, m)| (table::us(ms * 1e3), m))),
            ours: table::dur(t),
            ratio: lgv.map(|(ms, _)| table::ratio(ms * 1e3 / (t.as_secs_f64() * 1e6))).unwrap_or_default(),
            target: String::new(),
        });
    }
    Ok(())
}

/// Runs `exe child ARGS…` and returns its wall time (spawn → exit) and the last line of its stdout.
fn child(exe: &Path, args: &[&str]) -> Result<(Duration, String)> {
    let t0 = Instant::now();
    let out = Command::new(exe).arg("child").args(args).output().ctx(format!("spawning {}", exe.display()))?;
    let wall = t0.elapsed();
    ensure(out.status.success(), || {
        format!("child `{}` failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr).trim())
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_string();
    Ok((wall, last))
}

fn run_resume(setup: &Setup, lg: &Lg, report: &mut Report) -> Result<()> {
    eprintln!("bench: interrupt + resume in a new process (load {})", proc::loadavg());
    let mut walls = Vec::new();
    let mut inproc = Vec::new();
    for rep in 0..=setup.plan.resume_reps {
        let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
        let store = dir.path().join("store");
        let store = store.to_str().ctx("non-UTF-8 work path")?;
        let id = format!("hitl-{rep}");
        child(&setup.exe, &["resume-start", store, &id])?;
        let (wall, line) = child(&setup.exe, &["resume", store, &id])?;
        let t: ResumeTimes = serde_json::from_str(&line).ctx("reading process B's timings")?;
        if rep > 0 {
            walls.push(wall);
            inproc.push(Duration::from_secs_f64(t.t_open + t.t_state + t.t_resume));
        }
    }
    report.counts.push(("resumed runs".into(), walls.len()));
    let wall = median(&mut walls);
    let lat = median(&mut inproc);
    let lgv = lg.pick(|f| f.resume_proc_ms);
    let r = lgv.map(|(ms, _)| ms * 1e3 / (wall.as_secs_f64() * 1e6));
    report.rows.push(Row {
        scenario: "resume in a new process: process B, spawn → exit (open, read pending, answer, finish)".into(),
        langgraph: lg_cell(lgv.map(|(ms, m)| (table::us(ms * 1e3), m))),
        ours: table::dur(wall),
        ratio: r.map(table::ratio).unwrap_or_default(),
        target: r.map(|r| table::target("≥50x", r >= 50.0)).unwrap_or_default(),
    });
    let lgv = lg.pick(|f| f.resume_latency_ms);
    report.rows.push(Row {
        scenario: "resume latency in process B (open + read pending + resume to the end)".into(),
        langgraph: lg_cell(lgv.map(|(ms, m)| (table::us(ms * 1e3), m))),
        ours: table::dur(lat),
        ratio: lgv.map(|(ms, _)| table::ratio(ms * 1e3 / (lat.as_secs_f64() * 1e6))).unwrap_or_default(),
        target: String::new(),
    });
    Ok(())
}

fn run_concurrent(setup: &Setup, lg: &Lg, report: &mut Report) -> Result<()> {
    for &(m, mode, reps) in &setup.plan.conc {
        eprintln!("bench: {m} concurrent 5-step runs, {} (load {})", mode.name(), proc::loadavg());
        let mut results: Vec<ConcurrentResult> = Vec::new();
        for _ in 0..reps.max(1) {
            let (_, line) = child(&setup.exe, &["concurrent", &m.to_string(), mode.name()])?;
            results.push(serde_json::from_str(&line).ctx("reading the child's result")?);
        }
        results.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
        let r = results[results.len() / 2].clone();
        ensure(r.completed == m, || format!("{} of {m} runs completed", r.completed))?;
        report.counts.push((format!("concurrent {m} {} completed", mode.name()), r.completed));
        if let Some(records) = r.records_per_run {
            report.counts.push((format!("concurrent {m} {} records of run-0", mode.name()), records));
        }
        let rps = m as f64 / r.wall_s;
        let lgv = lg.pick(|f| f.conc.get(&(mode.name().into(), m)).copied());
        let ratio = lgv.map(|(f, _)| rps / f.runs_per_s);
        report.rows.push(Row {
            scenario: format!("{m} concurrent 5-step runs ({}): throughput, runs/s", mode.name()),
            langgraph: lg_cell(lgv.map(|(f, mk)| (format!("{:.0}", f.runs_per_s), mk))),
            ours: format!("{rps:.0} (cpu {:.2} s / wall {:.2} s)", r.cpu_s, r.wall_s),
            ratio: ratio.map(table::ratio).unwrap_or_default(),
            target: match (m, mode, ratio) {
                (10_000, ConcurrentMode::Gather, Some(x)) => table::target("≥30x", x >= 30.0),
                _ => String::new(),
            },
        });
        if mode == ConcurrentMode::Sequential {
            continue;
        }
        let per_run_kib = r.rss_peak_kib.saturating_sub(r.rss_base_kib) as f64 / m as f64;
        let lg_per_run = lgv.map(|(f, mk)| (f.peak_minus_base_mib * 1024.0 / m as f64, f.peak_mib, mk));
        let ratio = lg_per_run.map(|(kib, _, _)| kib / per_run_kib);
        report.rows.push(Row {
            scenario: format!(
                "{m} concurrent runs ({}): memory per run = (peak RSS − base) ÷ M [peak RSS]",
                mode.name()
            ),
            langgraph: lg_cell(lg_per_run.map(|(kib, peak, mk)| (format!("{kib:.1} KiB [{peak:.0} MiB]"), mk))),
            ours: format!("{per_run_kib:.2} KiB [{:.1} MiB]", r.rss_peak_kib as f64 / 1024.0),
            ratio: ratio.map(table::ratio).unwrap_or_default(),
            target: match (m, mode, ratio) {
                (10_000, ConcurrentMode::Gather, Some(x)) => table::target("≥5x less", x >= 5.0),
                _ => String::new(),
            },
        });
    }
    Ok(())
}

fn run_llm(setup: &Setup, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    eprintln!("bench: LLM-bound scenarios, loopback server {} ms (load {})", LLM_LATENCY.as_millis(), proc::loadavg());
    // The server gets a runtime of its own, so its timers and accepts do not queue behind the engine's tasks.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("llm-server")
        .enable_all()
        .build()
        .ctx("server runtime")?;
    let server = server_rt.block_on(llm::start_server(LLM_LATENCY))?;
    let model = llm::model(&server)?;
    let floor = LLM_LATENCY.as_secs_f64() * 1e6;
    let p = &setup.plan;
    let mut expected = 0;

    let single = llm::single(&model)?;
    let mut times = Vec::new();
    for _ in 0..=p.llm_single_reps {
        times.push(rt.block_on(llm::run_checked(&single, 1))?);
        expected += 1;
    }
    times.remove(0);
    let one_call = median(&mut times);
    let one_us = one_call.as_secs_f64() * 1e6;
    report.rows.push(Row {
        scenario: "LLM: one call through LlmAgent + openai provider".into(),
        langgraph: format!("floor {}", table::us(floor)),
        ours: table::dur(one_call),
        ratio: format!("{:.2} × floor", one_us / floor),
        target: String::new(),
    });

    let (k, reps) = p.llm_parallel;
    let system = llm::parallel(&model, k)?;
    let mut times = Vec::new();
    let mut peak = 0;
    let mut cpu = Duration::ZERO;
    for rep in 0..=reps {
        server.stats.reset_peak();
        let c0 = proc::cpu_time().unwrap_or_default();
        let t = rt.block_on(llm::run_checked(&system, k))?;
        expected += k;
        if rep > 0 {
            times.push(t);
            peak = peak.max(server.stats.peak());
            cpu += proc::cpu_time().unwrap_or_default().saturating_sub(c0);
        }
    }
    let t = median(&mut times);
    let r = t.as_secs_f64() * 1e6 / one_us;
    report.rows.push(Row {
        scenario: format!("LLM: {k} parallel agents, whole run (server saw ≤{peak} in flight)"),
        langgraph: format!("1 call {}", table::dur(one_call)),
        ours: format!("{} (cpu {})", table::dur(t), table::dur(cpu / reps.max(1) as u32)),
        ratio: format!("{r:.2} × 1 call ({:.2} × floor)", t.as_secs_f64() * 1e6 / floor),
        target: table::target("≤1.1 × 1 call", r <= 1.1),
    });
    report.counts.push(("llm parallel peak in flight".into(), peak));

    let (n, reps) = p.llm_seq;
    let system = llm::sequence(&model, n)?;
    let mut times = Vec::new();
    for rep in 0..=reps {
        let t = rt.block_on(llm::run_checked(&system, n))?;
        expected += n;
        if rep > 0 {
            times.push(t);
        }
    }
    let t = median(&mut times);
    let seq_floor = floor * n as f64;
    report.rows.push(Row {
        scenario: format!("LLM: {n}-step sequence, whole run"),
        langgraph: format!("floor {}", table::us(seq_floor)),
        ours: table::dur(t),
        ratio: format!(
            "{:.2} × floor ({:.2} × {n} calls)",
            t.as_secs_f64() * 1e6 / seq_floor,
            t.as_secs_f64() * 1e6 / (one_us * n as f64)
        ),
        target: String::new(),
    });

    let (m, steps, reps) = p.llm_conc;
    let system = llm::sequence(&model, steps)?;
    let mut times = Vec::new();
    let mut peak = 0;
    let conns0 = server.stats.connections();
    let mut account = CpuAccount::default();
    for rep in 0..=reps {
        server.stats.reset_peak();
        let mark = CpuAccount::mark();
        let t = rt.block_on(llm::concurrent(&system, m, steps))?;
        expected += m * steps;
        if rep > 0 {
            times.push(t);
            peak = peak.max(server.stats.peak());
            account.add_since(mark);
        }
    }
    let t = median(&mut times);
    let conc_floor = floor * steps as f64;
    let r = t.as_secs_f64() * 1e6 / conc_floor;
    // The same calls through the HTTP client alone, right after: what the HTTP stack costs by itself here.
    let mut http_times = Vec::new();
    let mut http_account = CpuAccount::default();
    for _ in 0..reps.max(1) {
        let mark = CpuAccount::mark();
        http_times.push(rt.block_on(llm::http_client_only(&server, m, steps))?);
        http_account.add_since(mark);
        expected += m * (steps + 1);
    }
    let http = median(&mut http_times);
    let http_r = http.as_secs_f64() * 1e6 / conc_floor;
    report.rows.push(Row {
        scenario: format!("LLM: {m} concurrent {steps}-step runs, all done (server saw ≤{peak} in flight)"),
        langgraph: format!("floor {}", table::us(conc_floor)),
        ours: account.describe(t, reps.max(1)),
        ratio: format!("{r:.2} × floor ({:.2} × the HTTP client alone)", t.as_secs_f64() / http.as_secs_f64()),
        target: table::target("≤1.2 × floor", r <= 1.2),
    });
    report.rows.push(Row {
        scenario: format!(
            "LLM reference: the same {m} × {steps} calls through the HTTP client alone (reqwest, no engine, no \
             provider; cpu includes a warm-up of {m} calls)"
        ),
        langgraph: format!("floor {}", table::us(conc_floor)),
        ours: http_account.describe(http, reps.max(1)),
        ratio: format!("{http_r:.2} × floor"),
        target: String::new(),
    });
    report.counts.push(("llm concurrent peak in flight".into(), peak));
    let served = server.stats.requests();
    ensure(served == expected, || format!("the LLM server answered {served} requests, expected {expected}"))?;
    report.counts.push(("llm requests".into(), served));
    report.notes.push(format!(
        "LLM server: {served} requests answered over {} connections ({} opened by the concurrent runs); \
         HTTP/1.1 keep-alive, reqwest's default pool (no per-host connection limit, unlimited idle).",
        server.stats.connections(),
        server.stats.connections() - conns0
    ));
    report.notes.push(
        "LLM rows: cpu is the whole process's per measured repetition (engine, HTTP client, the loopback \
         server and its clock, all on this machine's cores); the server's is its threads' part of it; steal is \
         the time the hypervisor gave this machine's processors to others meanwhile (/proc/stat). When cpu \
         comes near cores × wall time, the row is CPU-bound and measures the machine as much as the engine."
            .to_string(),
    );
    drop(server_rt);
    Ok(())
}

/// Where the CPU of the LLM rows' measured repetitions went: the whole process, the loopback server's threads
/// (`llm-*`), and the machine's steal time.
#[derive(Default)]
struct CpuAccount {
    cpu: Duration,
    server: Duration,
    steal: Duration,
}

impl CpuAccount {
    /// The three counters now (zero where one cannot be read).
    fn mark() -> [Duration; 3] {
        [proc::cpu_time().unwrap_or_default(), proc::threads_cpu_time("llm-"), proc::steal_time().unwrap_or_default()]
    }

    /// Adds what the counters grew by since `mark`.
    fn add_since(&mut self, mark: [Duration; 3]) {
        let [cpu, server, steal] = Self::mark();
        self.cpu += cpu.saturating_sub(mark[0]);
        self.server += server.saturating_sub(mark[1]);
        self.steal += steal.saturating_sub(mark[2]);
    }

    /// `wall (cpu …, the server's …; steal …)`, per repetition of `reps`.
    fn describe(&self, wall: Duration, reps: usize) -> String {
        let per = |d: Duration| table::dur(d / reps as u32);
        format!(
            "{} (cpu {}, the server's {}; steal {})",
            table::dur(wall),
            per(self.cpu),
            per(self.server),
            per(self.steal)
        )
    }
}

/// The tool rounds of one LLM agent (SPEC.md §4; [`tools`]): for a tool with an effect and one without, under
/// sync and exit durability on sled, the commits per round and the time per round, each the difference between
/// a run of `rounds` rounds and one of the agent answering at once (the same commits every repetition).
fn run_tools(setup: &Setup, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    eprintln!("bench: tool rounds, loopback model (load {})", proc::loadavg());
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("tools-server")
        .enable_all()
        .build()
        .ctx("server runtime")?;
    let server = server_rt.block_on(tools::start_server())?;
    let (rounds, reps) = setup.plan.tools;
    ensure(rounds > 0, || "the tools scenario needs at least one round".to_string())?;
    let mut expected = 0;
    for (effect, effect_name, bound) in [(Effect::Once, "effect once", 2), (Effect::None, "no effect", 1)] {
        let agent = tools::agent(&server, effect)?;
        for durability in [Durability::Sync, Durability::Exit] {
            let mode = format!("{durability:?}").to_lowercase();
            let dir = setup.work.join(format!("tools-{}-{mode}", effect_name.replace(' ', "-")));
            if dir.exists() {
                std::fs::remove_dir_all(&dir).ctx(format!("removing {}", dir.display()))?;
            }
            let sled = SledStore::open(&dir).ctx(format!("opening {}", dir.display()))?;
            let store = tools::CountingStore::new(std::sync::Arc::new(sled));
            // (rounds, time, commits) of each run, a warm-up pair first.
            let mut at_once = (Vec::new(), None);
            let mut with_rounds = (Vec::new(), None);
            for rep in 0..=reps {
                for (n, (times, commits)) in [(0, &mut at_once), (rounds, &mut with_rounds)] {
                    let id = format!("tools-{n}-{rep}");
                    let (t, c) = rt.block_on(tools::run_counted(&agent, &store, n, durability, &id))?;
                    expected += n + 1;
                    ensure(commits.is_none_or(|seen| seen == c), || {
                        format!("tools {effect_name} {mode}: {c} commits in a run of {n} rounds, {commits:?} before")
                    })?;
                    *commits = Some(c);
                    if rep > 0 {
                        times.push(t);
                    }
                }
            }
            let (base, extra) = (at_once.1.unwrap_or(0), with_rounds.1.unwrap_or(0));
            let added = extra.saturating_sub(base);
            ensure(added % rounds == 0, || {
                format!("tools {effect_name} {mode}: {added} commits over {rounds} rounds are not the same per round")
            })?;
            let per_round = added / rounds;
            let base_t = median(&mut at_once.0);
            let t = median(&mut with_rounds.0);
            let per_round_t = t.saturating_sub(base_t) / u32::try_from(rounds).unwrap_or(u32::MAX);
            report.rows.push(Row {
                scenario: format!("tools: {rounds} tool rounds of an LLM agent, tool with {effect_name}, sled {mode}"),
                langgraph: format!("no tool round: {} ({base} commits)", table::dur(base_t)),
                ours: format!(
                    "{}/round, {per_round} commits/round (run {}, {extra} commits)",
                    table::dur(per_round_t),
                    table::dur(t)
                ),
                ratio: String::new(),
                target: match durability {
                    Durability::Sync => table::target(&format!("≤{bound} commits/round"), per_round <= bound),
                    _ => table::target("0 commits/round", per_round == 0),
                },
            });
            report.counts.push((format!("tools {effect_name} {mode} commits per round"), per_round));
        }
    }
    let requests = server.requests.load(std::sync::atomic::Ordering::SeqCst);
    ensure(requests == expected, || format!("the tools model answered {requests} requests, expected {expected}"))?;
    report.counts.push(("tools requests".into(), requests));
    report.notes.push(
        "tools rows: per round = (a run of the rounds − a run answering at once) ÷ rounds; commits = the store's \
         flushes (a counting StoreLayer); the loopback model answers at once."
            .into(),
    );
    Ok(())
}

/// The eval machinery against the runs it evaluates (issue #44; [`crate::eval`]): N replayed cases of a
/// 3-agent spec, C at once, evaluated by `agentic eval`'s `Runner` plus `summarize` (a), and the same runs alone
/// (b), interleaved a/b, b/a, ... after a warm-up pair; medians. Then the pieces (a) adds, each timed on its own.
fn run_eval(setup: &Setup, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    let (n, c, reps) = setup.plan.eval;
    eprintln!("bench: eval, {n} replayed cases of a 3-agent spec, {c} at once (load {})", proc::loadavg());
    let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
    let t0 = Instant::now();
    let mut bench = rt.block_on(crate::eval::EvalBench::prepare(n, c, dir.path()))?;
    let recorded_in = t0.elapsed();
    let calls = bench.model_calls();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut last_runs = Vec::new();
    for rep in 0..=reps {
        // a then b, then b then a: neither always runs right after the other's writes (sled flushes them
        // in the background) nor always on the larger store.
        // Each measurement starts on a settled store ([`crate::eval::EvalBench::settle`]).
        let (ta, (runs, tb)) = if rep % 2 == 0 {
            bench.settle(rt)?;
            let (_, ta) = bench.eval(rt)?;
            bench.settle(rt)?;
            (ta, bench.runs_alone(rt)?)
        } else {
            bench.settle(rt)?;
            let b = bench.runs_alone(rt)?;
            bench.settle(rt)?;
            (bench.eval(rt)?.1, b)
        };
        if rep > 0 {
            a.push(ta);
            b.push(tb);
        }
        last_runs = runs;
    }
    let replayed = bench.model_calls() - calls;
    ensure(replayed == 0, || format!("eval: the replays called the model {replayed} times"))?;
    let parts = bench.parts(rt, &last_runs)?;
    let ratios: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a.wall.as_secs_f64() / b.wall.as_secs_f64()).collect();
    let med = |xs: Vec<Duration>| median(&mut xs.clone());
    let (wa, wb) = (med(a.iter().map(|t| t.wall).collect()), med(b.iter().map(|t| t.wall).collect()));
    let (ca, cb) = (med(a.iter().map(|t| t.cpu).collect()), med(b.iter().map(|t| t.cpu).collect()));
    let per_case = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let ratio = wa.as_secs_f64() / wb.as_secs_f64();
    let over_us = per_case(wa) - per_case(wb);
    let cpu_over_us = per_case(ca) - per_case(cb);
    report.rows.push(Row {
        scenario: format!(
            "eval: {n} replayed cases of a 3-agent spec (3 llm agents, 6 evaluators), --concurrency {c}: cases/s \
             (reference: the same runs alone, nothing observed, evaluated or summarised)"
        ),
        langgraph: format!(
            "runs alone: {:.0} cases/s (cpu {}/case)",
            n as f64 / wb.as_secs_f64(),
            table::us(per_case(cb))
        ),
        ours: format!("eval: {:.0} cases/s (cpu {}/case)", n as f64 / wa.as_secs_f64(), table::us(per_case(ca))),
        ratio: format!(
            "{ratio:.3} × runs alone: +{}/case ({:+.1} %; cpu +{}/case)",
            table::us(over_us),
            (ratio - 1.0) * 100.0,
            table::us(cpu_over_us)
        ),
        target: table::target("≤1.10 × runs alone", ratio <= 1.10),
    });
    report.counts.push(("eval cases passed".into(), n));
    report.counts.push(("eval model calls in the replays".into(), replayed));
    report.notes.push(format!(
        "eval row: medians of {reps} repetitions each, interleaved (eval then runs alone, then the other way round) \
         after a warm-up pair, each on a settled store (flushed, then 200 ms), one sled \
         store (async durability) in this process; every case replayed strictly from one recording of {calls} \
         calls (made in {:.2} s, one case at a time), no model called ({replayed}) and every case passed. Ratio = \
         eval time ÷ runs-alone time (below 1.10 holds the target); per pair, in order: {}. The pieces the eval \
         adds, each timed alone over the last {n} runs: observing the run (state, trajectory, usage from its \
         scope) {} per case (reading it back from the store instead, as for a run that did not complete: {} per \
         case, {c} at once; both gave the same for every run), the 6 evaluators {}, the results and summary {}.",
        recorded_in.as_secs_f64(),
        ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(", "),
        table::dur(parts.observe),
        table::dur(parts.read_back),
        table::dur(parts.evaluators),
        table::dur(parts.summary)
    ));
    Ok(())
}

/// Group commit ([`crate::group`]): M concurrent N-step runs under sync durability on sled, then on PostgreSQL
/// beside LangGraph's `AsyncPostgresSaver` with the same M in flight.
fn run_group(setup: &Setup, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    let (m, n) = setup.plan.group;
    let per_step = |commits: f64, r: &crate::group::GroupResult| commits / r.total_steps() as f64;
    let latency =
        |r: &crate::group::GroupResult| format!("step p50 {} p99 {}", table::dur(r.step_p50), table::dur(r.step_p99));
    eprintln!("bench: group commit, {m} concurrent {n}-step sync runs on sled (load {})", proc::loadavg());
    let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
    let sled = SledStore::open(dir.path().join("store")).ctx("opening the sled store")?;
    // A lone run first, the reference for the latency a step pays without company.
    rt.block_on(crate::group::warm_up(&sled, n, "group"))?;
    let lone = rt.block_on(crate::group::run(&sled, 1, n, "lone"))?;
    let syncs0 = sled.log_syncs();
    let r = rt.block_on(crate::group::run(&sled, m, n, "group"))?;
    let syncs = sled.log_syncs() - syncs0;
    let cps = per_step(syncs as f64, &r);
    report.rows.push(Row {
        scenario: format!(
            "group commit, sled sync: {m} concurrent {n}-step runs: fdatasyncs per step (the store's log syncs ÷ \
             {} steps; a lone run: 1 per step); runs/s; step latency (one agent's start to the next's)",
            r.total_steps()
        ),
        langgraph: format!("lone run: {}", latency(&lone)),
        ours: format!("{cps:.3} syncs/step ({syncs}); {:.0} runs/s; {}", r.runs_per_s(), latency(&r)),
        ratio: String::new(),
        target: table::target("≤0.25 commits/step", cps <= 0.25),
    });
    report.counts.push(("group runs completed (sled)".into(), r.runs));
    report.notes.push(format!(
        "group rows: all {m} runs started at once in this process, each step durable before the next starts \
         (sync); write transactions = the server's transaction-id counter's advance (read-only statements take \
         none, so the probes count one each, left out); 3 runs one after the other first, and a lone run (its \
         step latency in the rows)."
    ));
    drop(sled);
    let Some(pg) = &setup.pg else {
        report.notes.push("group: no PostgreSQL server, so no PostgreSQL rows (see the pg scenario's note).".into());
        return Ok(());
    };
    let lg = match &pg.peers.langgraph {
        Some((py, script)) => {
            let url = rt.block_on(pg.server.database("bench_langgraph_group"))?;
            eprintln!("bench: group commit, LangGraph AsyncPostgresSaver, {m} concurrent {n}-step sync runs");
            let mut cmd = Command::new(py);
            cmd.arg(script).args(["group", "--url", &url, "--runs", &m.to_string(), "--steps", &n.to_string()]);
            match crate::pg::peer_json(&mut cmd, "bench_pg.py group") {
                Ok(v) => Some(v),
                Err(e) => {
                    report.notes.push(format!("group: LangGraph's run failed: {e}"));
                    None
                }
            }
        }
        None => None,
    };
    eprintln!("bench: group commit, {m} concurrent {n}-step sync runs on PostgreSQL (load {})", proc::loadavg());
    let url = rt.block_on(pg.server.database("bench_agentic_group"))?;
    let store = rt.block_on(agentic::store::PgStore::connect(&url)).ctx("opening the PostgreSQL store")?;
    rt.block_on(crate::group::warm_up(&store, n, "group"))?;
    let lone = rt.block_on(crate::group::run(&store, 1, n, "lone"))?;
    let before = rt.block_on(crate::group::PgCounters::read(&url))?;
    let r = rt.block_on(crate::group::run(&store, m, n, "group"))?;
    let after = rt.block_on(crate::group::PgCounters::read(&url))?;
    drop(store);
    let (xacts, wal) = before.since(after);
    let cps = per_step(xacts as f64, &r);
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let lg_steps = lg.as_ref().map(|v| f(v, "runs") * f(v, "steps"));
    report.rows.push(Row {
        scenario: format!(
            "group commit, PostgreSQL sync: {m} concurrent {n}-step runs: write transactions per step (txid \
             advance ÷ {} steps; WAL flushes from pg_stat_wal); ours: PgStore (8 connections), LangGraph: \
             AsyncPostgresSaver (20)",
            r.total_steps()
        ),
        langgraph: match (&lg, lg_steps) {
            (Some(v), Some(steps)) => format!(
                "{:.3} xacts/step ({:.0}), {:.3} WAL flushes/step",
                f(v, "write_xacts") / steps,
                f(v, "write_xacts"),
                f(v, "wal_syncs") / steps
            ),
            _ => String::new(),
        },
        ours: format!(
            "{cps:.3} xacts/step ({xacts}), {:.3} WAL flushes/step ({wal})",
            wal as f64 / r.total_steps() as f64
        ),
        ratio: String::new(),
        target: table::target("≤0.25 commits/step", cps <= 0.25),
    });
    let lg_rps = lg.as_ref().map(|v| f(v, "runs_per_s"));
    report.rows.push(Row {
        scenario: format!(
            "group commit, PostgreSQL sync: {m} concurrent {n}-step runs: runs/s; step latency (one agent's start \
             to the next's; a lone run's: {})",
            latency(&lone)
        ),
        langgraph: lg
            .as_ref()
            .map(|v| {
                format!(
                    "{:.0} runs/s; step p50 {:.2} ms p99 {:.2} ms",
                    f(v, "runs_per_s"),
                    f(v, "step_p50_ms"),
                    f(v, "step_p99_ms")
                )
            })
            .unwrap_or_default(),
        ours: format!("{:.0} runs/s; {}", r.runs_per_s(), latency(&r)),
        ratio: lg_rps.map(|l| table::ratio(r.runs_per_s() / l)).unwrap_or_default(),
        target: lg_rps.map(|l| table::target("≥5x", r.runs_per_s() / l >= 5.0)).unwrap_or_default(),
    });
    report.counts.push(("group runs completed (PostgreSQL)".into(), r.runs));
    Ok(())
}

fn run_serve(setup: &Setup, rt: &tokio::runtime::Runtime, report: &mut Report) -> Result<()> {
    let (m, c) = setup.plan.serve;
    let measure = |server: &serve::ServerProcess, what: &str| -> Result<serve::ServeResult> {
        eprintln!("bench: {m} runs over HTTP from {c} clients to {what} (load {})", proc::loadavg());
        let r = rt.block_on(serve::measure(server, m, c))?;
        ensure(r.completed == m, || format!("{what}: {} of {m} runs completed", r.completed))?;
        Ok(r)
    };
    let mut ours = Vec::new();
    for durability in ["sync", "async"] {
        let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
        let server = serve::ServerProcess::agentic(&setup.serve_cmd, dir.path(), durability)?;
        ours.push((durability, measure(&server, &format!("agentic serve ({durability})"))?));
    }
    report.counts.push(("serve runs completed (ours, sync)".into(), ours[0].1.completed));
    let lg = match &setup.langgraph_serve {
        Some((venv, project)) => {
            let dir = tempfile::tempdir_in(&setup.work).ctx("temporary directory")?;
            let server = serve::ServerProcess::langgraph(venv, project, dir.path())?;
            let r = measure(&server, "langgraph dev")?;
            report.counts.push(("serve runs completed (LangGraph)".into(), r.completed));
            Some(r)
        }
        None => None,
    };
    let head = format!("serve: {m} runs of a 5-step chain over HTTP, {c} concurrent clients");
    for (durability, r) in &ours {
        let ratio = lg.as_ref().map(|l| r.runs_per_s() / l.runs_per_s());
        report.rows.push(Row {
            scenario: format!("{head}: runs/s (ours: {durability} durability; LangGraph dev: in memory)"),
            langgraph: lg.as_ref().map(|l| format!("{:.0}", l.runs_per_s())).unwrap_or_default(),
            ours: format!("{:.0} (wall {:.2} s)", r.runs_per_s(), r.wall.as_secs_f64()),
            ratio: ratio.map(table::ratio).unwrap_or_default(),
            target: String::new(),
        });
    }
    let (_, sync) = &ours[0];
    for (name, q, lq) in [("p50", sync.p50, lg.as_ref().map(|l| l.p50)), ("p99", sync.p99, lg.as_ref().map(|l| l.p99))]
    {
        report.rows.push(Row {
            scenario: format!("{head}: submit latency {name} (request → run created; ours sync)"),
            langgraph: lq.map(table::dur).unwrap_or_default(),
            ours: table::dur(q),
            ratio: lq.map(|l| table::ratio(l.as_secs_f64() / q.as_secs_f64())).unwrap_or_default(),
            target: String::new(),
        });
    }
    let kib = |k: u64| table::bytes(k as f64 * 1024.0);
    report.rows.push(Row {
        scenario: format!("{head}: server peak RSS [after warm-up] (ours sync)"),
        langgraph: lg
            .as_ref()
            .map(|l| format!("{} [{}]", kib(l.peak_rss_kib), kib(l.base_rss_kib)))
            .unwrap_or_default(),
        ours: format!("{} [{}]", kib(sync.peak_rss_kib), kib(sync.base_rss_kib)),
        ratio: lg.as_ref().map(|l| table::ratio(l.peak_rss_kib as f64 / sync.peak_rss_kib as f64)).unwrap_or_default(),
        target: String::new(),
    });
    let per_run = |r: &serve::ServeResult| r.server_cpu.as_secs_f64() * 1e6 / m as f64;
    report.rows.push(Row {
        scenario: format!("{head}: server CPU time per run (ours sync)"),
        langgraph: lg.as_ref().map(|l| table::us(per_run(l))).unwrap_or_default(),
        ours: table::us(per_run(sync)),
        ratio: lg.as_ref().map(|l| table::ratio(per_run(l) / per_run(sync))).unwrap_or_default(),
        target: String::new(),
    });
    if lg.is_none() {
        report
            .notes
            .push("serve: no LangGraph dev server this time (pass --langgraph to start one side by side).".into());
    }
    Ok(())
}

/// Fails unless every name in `scenarios` is known.
///
/// # Errors
/// On an unknown name.
pub fn check_scenarios(scenarios: &[String]) -> Result<()> {
    for s in scenarios {
        if !SCENARIOS.contains(&s.as_str()) {
            return Err(Error(format!("unknown scenario `{s}` (known: {})", SCENARIOS.join(", "))));
        }
    }
    Ok(())
}
