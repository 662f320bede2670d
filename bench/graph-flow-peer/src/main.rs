//! graph-flow (the Rust peer, <https://github.com/a-agmon/rs-graph-llm>) on the bench's chain with its
//! PostgreSQL session storage: task i writes `k{i}` = i. One step per `FlowRunner::run` (load the session,
//! execute the task, save the session: graph-flow's durable way to run a workflow step by step); a run starts by
//! saving a new session. Per step = the run's wall time ÷ N, median over the repetitions; every run is checked
//! (the saved session ends at the last task with `k{N-1}` = N-1 and N keys).
//!
//! `graph-flow-peer --url postgres://… --ns 10,100 --reps 5` prints `{"seq": [{"n", "reps", "run_ms_median",
//! "per_step_us_median"}]}` on stdout.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use graph_flow::{
    Context, ExecutionStatus, FlowRunner, GraphBuilder, NextAction, PostgresSessionStorage, Session, SessionStorage,
    Task, TaskResult,
};
use serde_json::json;

struct Write {
    id: String,
    i: usize,
    last: bool,
}

#[async_trait]
impl Task for Write {
    fn id(&self) -> &str {
        &self.id
    }

    async fn run(&self, context: Context) -> graph_flow::Result<TaskResult> {
        context.set(format!("k{}", self.i), self.i)?;
        Ok(TaskResult::new(None, if self.last { NextAction::End } else { NextAction::Continue }))
    }
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

async fn run_chain(runner: &FlowRunner, storage: &PostgresSessionStorage, n: usize, id: &str) -> Result<f64, String> {
    let t0 = Instant::now();
    storage.save(Session::new_from_task(id.to_string(), "n0")).await.map_err(|e| e.to_string())?;
    let mut steps = 0;
    loop {
        let result = runner.run(id).await.map_err(|e| e.to_string())?;
        steps += 1;
        if matches!(result.status, ExecutionStatus::Completed) {
            break;
        }
        if steps > n {
            return Err(format!("session {id}: not completed after {steps} steps ({:?})", result.status));
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let saved = storage.get(id).await.map_err(|e| e.to_string())?.ok_or(format!("session {id} is gone"))?;
    let last: Option<usize> = saved.context.get(&format!("k{}", n - 1));
    if steps != n || last != Some(n - 1) || saved.current_task_id != format!("n{}", n - 1) {
        return Err(format!("session {id}: {steps} steps, k{} = {last:?}, at {}", n - 1, saved.current_task_id));
    }
    Ok(elapsed)
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--url", "");
    if url.is_empty() {
        return Err("usage: graph-flow-peer --url postgres://… [--ns 10,100] [--reps 5]".into());
    }
    let ns: Vec<usize> = arg(&args, "--ns", "10,100").split(',').map(|x| x.parse().map_err(|_| format!("--ns: {x}"))).collect::<Result<_, _>>()?;
    let reps: usize = arg(&args, "--reps", "5").parse().map_err(|_| "--reps: not a number".to_string())?;
    let storage = Arc::new(PostgresSessionStorage::connect(&url).await.map_err(|e| e.to_string())?);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_nanos();
    let mut rows = Vec::new();
    for n in ns {
        let mut builder = GraphBuilder::new(format!("chain{n}"));
        for i in 0..n {
            builder = builder.add_task(Arc::new(Write { id: format!("n{i}"), i, last: i + 1 == n }));
        }
        for i in 1..n {
            builder = builder.add_edge(format!("n{}", i - 1), format!("n{i}"));
        }
        let graph = Arc::new(builder.set_start_task("n0").build().map_err(|e| e.to_string())?);
        let runner = FlowRunner::new(graph, storage.clone());
        run_chain(&runner, &storage, n, &format!("warm-{n}-{stamp}")).await?;
        let mut times = Vec::with_capacity(reps);
        for rep in 0..reps {
            times.push(run_chain(&runner, &storage, n, &format!("seq-{n}-{rep}-{stamp}")).await?);
        }
        let med = median(times);
        eprintln!("graph-flow pg: N={n}: {:.1} us/step", med / n as f64 * 1e6);
        rows.push(json!({"n": n, "reps": reps, "run_ms_median": med * 1e3, "per_step_us_median": med / n as f64 * 1e6}));
    }
    println!("{}", json!({ "seq": rows }));
    Ok(())
}
