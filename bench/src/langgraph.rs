//! The LangGraph side: running the Python harness (`../shared/bench/langgraph`) in a cached virtualenv, and
//! reading its figures, either from the JSON files a run just wrote (`results/*.json`) or from the tables of
//! its recorded `results-langgraph.md`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::error::{Context, Error, Result, ensure};

/// One row of scenario 1 (`bench_seq.py`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeqFig {
    /// Median per-step time, µs.
    pub per_step_us: f64,
    /// SQLite file size after the run, bytes (SQLite rows only).
    pub db_bytes: Option<f64>,
}

/// One row of scenarios 4+5 (`bench_concurrent.py`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConcFig {
    /// Runs per second.
    pub runs_per_s: f64,
    /// Peak RSS, MiB.
    pub peak_mib: f64,
    /// Peak RSS minus the RSS after warm-up, MiB.
    pub peak_minus_base_mib: f64,
}

/// The LangGraph figures the table needs, keyed like the harness's rows.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Where they come from (a re-run with its load, or the recorded file).
    pub source: String,
    /// Scenario 1 by (variant, N, checkpointer, durability).
    pub seq: HashMap<(String, usize, String, String), SeqFig>,
    /// Scenario 2 invoke wall time (ms) by (style, shape, K, checkpointer).
    pub fan: HashMap<(String, String, usize, String), f64>,
    /// Scenario 3: process B wall time (spawn → exit), ms.
    pub resume_proc_ms: Option<f64>,
    /// Scenario 3: in-process resume latency (open + get_state + invoke), ms.
    pub resume_latency_ms: Option<f64>,
    /// Scenarios 4+5 by (mode, M).
    pub conc: HashMap<(String, usize), ConcFig>,
    /// `fsync_probe.py`: write 4 KiB + fsync, median µs.
    pub fsync_4k_us: Option<f64>,
    /// `fsync_probe.py`: one-row SQLite WAL commit (`synchronous=FULL`), median µs.
    pub sqlite_commit_us: Option<f64>,
}

fn num(s: &str) -> Option<f64> {
    let t = s.trim().trim_matches('*').replace(',', "");
    t.parse().ok()
}

/// The markdown tables of `md`, each with the last `###` heading above it; rows as column → cell.
fn md_tables(md: &str) -> Vec<(String, Vec<HashMap<String, String>>)> {
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut header: Option<Vec<String>> = None;
    let mut rows: Vec<HashMap<String, String>> = Vec::new();
    let cells = |l: &str| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    for line in md.lines().chain(std::iter::once("")) {
        if line.trim_start().starts_with('|') {
            let c = cells(line);
            match &header {
                None => header = Some(c),
                Some(_) if c.iter().all(|x| x.chars().all(|ch| matches!(ch, '-' | ':'))) => {}
                Some(h) => rows.push(h.iter().cloned().zip(c).collect()),
            }
            continue;
        }
        if header.take().is_some() {
            out.push((heading.clone(), std::mem::take(&mut rows)));
        }
        if let Some(h) = line.strip_prefix("### ") {
            heading = h.to_string();
        }
    }
    out
}

impl Figures {
    /// Reads the tables of the harness's recorded `results-langgraph.md` (run 3).
    ///
    /// # Errors
    /// When a scenario's table is missing.
    pub fn from_markdown(md: &str, source: impl Into<String>) -> Result<Figures> {
        let mut f = Figures { source: source.into(), ..Figures::default() };
        let get = |r: &HashMap<String, String>, k: &str| r.get(k).cloned().unwrap_or_default();
        for (heading, rows) in md_tables(md) {
            if heading.starts_with("Scenario 1") {
                for r in &rows {
                    let (Some(n), Some(per_step_us)) = (num(&get(r, "N")), num(&get(r, "per step (us)"))) else {
                        continue;
                    };
                    let db_bytes = num(&get(r, "sqlite file (KiB)")).map(|k| k * 1024.0);
                    let key = (get(r, "keys"), n as usize, get(r, "checkpointer"), get(r, "durability"));
                    f.seq.insert(key, SeqFig { per_step_us, db_bytes });
                }
            } else if heading.starts_with("Scenario 2") {
                for r in &rows {
                    let (Some(k), Some(ms)) = (num(&get(r, "K")), num(&get(r, "invoke wall (ms)"))) else { continue };
                    f.fan.insert((get(r, "style"), get(r, "shape"), k as usize, get(r, "checkpointer")), ms);
                }
            } else if heading.starts_with("Scenario 3") {
                for r in &rows {
                    let m = get(r, "measure");
                    let v = num(&get(r, "median (ms)"));
                    if m.starts_with("process B wall") {
                        f.resume_proc_ms = v;
                    } else if m.contains("resume latency") {
                        f.resume_latency_ms = v;
                    }
                }
            } else if heading.starts_with("Scenarios 4+5") {
                for r in &rows {
                    let (Some(m), Some(rps), Some(peak), Some(delta)) = (
                        num(&get(r, "M")),
                        num(&get(r, "runs/s")),
                        num(&get(r, "peak RSS (MiB)")),
                        num(&get(r, "peak - base (MiB)")),
                    ) else {
                        continue;
                    };
                    let fig = ConcFig { runs_per_s: rps, peak_mib: peak, peak_minus_base_mib: delta };
                    f.conc.insert((get(r, "mode"), m as usize), fig);
                }
            } else if heading.starts_with("Storage floor") {
                for r in &rows {
                    let op = get(r, "operation");
                    let v = num(&get(r, "median (µs)"));
                    if op.contains("fsync") && op.contains("4 KiB") {
                        f.fsync_4k_us = v;
                    } else if op.contains("SQLite") {
                        f.sqlite_commit_us = v;
                    }
                }
            }
        }
        ensure(!f.seq.is_empty() && !f.conc.is_empty(), || "no scenario tables found in the LangGraph results".into())?;
        Ok(f)
    }

    /// Reads the JSON files a harness run wrote to `results` (any of seq*, fanout*, resume, concurrent*,
    /// fsync-probe that exist).
    ///
    /// # Errors
    /// When a file exists but cannot be read.
    pub fn from_results(results: &Path, source: impl Into<String>) -> Result<Figures> {
        let mut f = Figures { source: source.into(), ..Figures::default() };
        let entries = std::fs::read_dir(results).ctx(format!("reading {}", results.display()))?;
        for entry in entries {
            let path = entry.ctx("directory entry")?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).ctx(format!("reading {}", path.display()))?;
            let v: Value = serde_json::from_str(&text).ctx(format!("parsing {}", path.display()))?;
            let s = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let n = |r: &Value, k: &str| r.get(k).and_then(Value::as_f64);
            let rows = v.get("rows").and_then(Value::as_array).cloned().unwrap_or_default();
            match v.get("scenario").and_then(Value::as_str) {
                Some("sequential") => {
                    for r in &rows {
                        let (Some(size), Some(per_step_us)) = (n(r, "n"), n(r, "per_step_us_median")) else { continue };
                        let key = (s(r, "variant"), size as usize, s(r, "checkpointer"), s(r, "durability"));
                        f.seq.insert(key, SeqFig { per_step_us, db_bytes: n(r, "db_bytes") });
                    }
                }
                Some("fanout") => {
                    for r in &rows {
                        let (Some(k), Some(ms)) = (n(r, "k"), n(r, "run_ms_median")) else { continue };
                        f.fan.insert((s(r, "style"), s(r, "shape"), k as usize, s(r, "checkpointer")), ms);
                    }
                }
                Some("interrupt_resume") => {
                    let med = v.get("median_ms");
                    f.resume_proc_ms = med.and_then(|m| n(m, "resume_proc_wall"));
                    f.resume_latency_ms = med.and_then(|m| n(m, "resume_latency"));
                }
                Some("concurrent") => {
                    for r in &rows {
                        let (Some(m), Some(rps), Some(peak), Some(delta)) =
                            (n(r, "m"), n(r, "runs_per_s"), n(r, "rss_peak_mib"), n(r, "rss_peak_minus_base_mib"))
                        else {
                            continue;
                        };
                        let fig = ConcFig { runs_per_s: rps, peak_mib: peak, peak_minus_base_mib: delta };
                        f.conc.insert((s(r, "mode"), m as usize), fig);
                    }
                }
                Some("storage_floor") => {
                    f.fsync_4k_us = v.get("write4k_fsync").and_then(|x| n(x, "median_us"));
                    f.sqlite_commit_us = v.get("sqlite_wal_full_commit_4k").and_then(|x| n(x, "median_us"));
                }
                _ => {}
            }
        }
        Ok(f)
    }
}

/// What the harness should run, in its own command-line terms (one entry per script invocation).
#[derive(Debug, Clone, Default)]
pub struct HarnessPlan {
    /// Argument lists, each starting with the script name.
    pub commands: Vec<Vec<String>>,
}

/// Creates (or reuses) the virtualenv in `venv` with the harness's exact pins (`requirements.lock.txt`), and
/// returns its python. Reuse is keyed on the lock file's content.
///
/// # Errors
/// When `python3 -m venv` or `pip install` fails (the caller falls back to the recorded figures).
pub fn ensure_venv(harness: &Path, venv: &Path, python: &str) -> Result<PathBuf> {
    let lock = std::fs::read_to_string(harness.join("requirements.lock.txt"))
        .ctx(format!("reading {}/requirements.lock.txt", harness.display()))?;
    let py = venv.join("bin").join("python");
    let marker = venv.join(".agentic-bench-installed");
    if py.exists() && std::fs::read_to_string(&marker).is_ok_and(|m| m == lock) {
        return Ok(py);
    }
    eprintln!("bench: creating the LangGraph virtualenv in {} (pip install, once)", venv.display());
    let status = Command::new(python)
        .arg("-m")
        .arg("venv")
        .arg("--clear")
        .arg(venv)
        .status()
        .ctx(format!("{python} -m venv"))?;
    ensure(status.success(), || format!("{python} -m venv {} failed ({status})", venv.display()))?;
    let status = Command::new(&py)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
        .arg(harness.join("requirements.lock.txt"))
        .status()
        .ctx("pip install")?;
    ensure(status.success(), || format!("pip install -r requirements.lock.txt failed ({status})"))?;
    std::fs::write(&marker, lock).ctx("writing the venv marker")?;
    Ok(py)
}

/// Copies the harness's scripts to `dir` (they write `results/` and `tmp/` next to themselves and the shared
/// copy may be read-only), runs `plan` there with `py`, and reads the figures it wrote.
///
/// # Errors
/// When a script fails or its results cannot be read.
pub fn run_harness(harness: &Path, dir: &Path, py: &Path, plan: &HarnessPlan) -> Result<Figures> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).ctx(format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).ctx(format!("creating {}", dir.display()))?;
    for entry in std::fs::read_dir(harness).ctx(format!("reading {}", harness.display()))? {
        let path = entry.ctx("directory entry")?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("py") {
            let name = path.file_name().ctx("file name")?;
            std::fs::copy(&path, dir.join(name)).ctx(format!("copying {}", path.display()))?;
        }
    }
    let load0 = crate::proc::loadavg();
    let t0 = std::time::Instant::now();
    for args in &plan.commands {
        eprintln!("bench: LangGraph: python {} (load {})", args.join(" "), crate::proc::loadavg());
        // The harness's progress goes to our stderr: stdout carries only the table.
        let status = Command::new(py)
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::from(std::io::stderr()))
            .status()
            .ctx(format!("running {}", args[0]))?;
        if !status.success() {
            return Err(Error(format!("LangGraph harness: `{}` failed ({status})", args.join(" "))));
        }
    }
    let source = format!(
        "LangGraph harness re-run by this command just before ours ({:.0} s, load {load0} → {})",
        t0.elapsed().as_secs_f64(),
        crate::proc::loadavg()
    );
    Figures::from_results(&dir.join("results"), source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_recorded_tables() {
        let md = "### Scenario 1 - x\n\n| keys | N | checkpointer | durability | reps | invoke wall (ms) | per step (us) | sqlite file (KiB) |\n|---|---:|---|---|---:|---:|---:|---:|\n| distinct | 1000 | sqlite | sync | 3 | 3,007.11 | 3,007.1 | 103,144 |\n\n### Scenarios 4+5 - y\n\n| mode | M | runs/s | peak RSS (MiB) | peak - base (MiB) |\n|---|---:|---:|---:|---:|\n| gather | 10000 | 184 | 701.4 | 630.8 |\n";
        let f = Figures::from_markdown(md, "test").expect("figures");
        let s = f.seq[&("distinct".into(), 1000, "sqlite".into(), "sync".into())];
        assert_eq!(s.per_step_us, 3007.1);
        assert_eq!(s.db_bytes, Some(103_144.0 * 1024.0));
        assert_eq!(f.conc[&("gather".into(), 10000)].runs_per_s, 184.0);
    }
}
