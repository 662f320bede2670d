//! The workflow planners, exactly as docs/semantics.md: sequence, loop, parallel, parallel mapper, conditional.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentic::engine::ValueType;
use agentic::prelude::*;
use serde_json::json;

fn expr(name: &str, src: &str, out: &str) -> AgentRef {
    Compute::expression(name, src).unwrap().output_key(out).build()
}

/// A scorer whose score rises by 0.25 per call, and an editor counting its calls.
fn scorer_editor() -> (AgentRef, AgentRef, Arc<AtomicUsize>) {
    // Explicit (empty) inputs: `score` is absent on the first call and the `default` filter handles it.
    let scorer = Compute::expression("scorer", "(score | default(0)) + 0.25")
        .unwrap()
        .inputs(Vec::<String>::new())
        .output_key("score")
        .build();
    let edits = Arc::new(AtomicUsize::new(0));
    let e2 = edits.clone();
    let editor = FnAgent::builder("editor", move |_ctx| {
        let e = e2.clone();
        Box::pin(async move { Ok(json!(format!("edit {}", e.fetch_add(1, Ordering::SeqCst) + 1))) })
    })
    .output_key("story")
    .build();
    (scorer, editor, edits)
}

#[tokio::test]
async fn loop_checked_after_every_agent_runs_the_editor_k_minus_one_times() {
    let (scorer, editor, edits) = scorer_editor();
    // score after iteration k = 0.25 k, so `score >= threshold` (0.75) first holds in iteration k = 3.
    let lp = Loop::builder()
        .sub_agents([scorer, editor])
        .max_iterations(10)
        .exit_when(|v, _| {
            v.get("score").and_then(|s| s.as_f64()).unwrap_or(0.0)
                >= v.get("threshold").and_then(|t| t.as_f64()).unwrap_or(1.0)
        })
        .output_key("story")
        .build()
        .unwrap();
    let out = lp.invoke().input("threshold", 0.75).await.unwrap();
    assert_eq!(edits.load(Ordering::SeqCst), 2);
    assert_eq!(out.output(), Some(&json!("edit 2")));
    assert_eq!(out.state().get("score"), Some(&json!(0.75)));
}

#[tokio::test]
async fn loop_checked_at_loop_end_runs_the_editor_k_times() {
    let (scorer, editor, edits) = scorer_editor();
    let lp = Loop::builder()
        .sub_agents([scorer, editor])
        .test_exit_at_loop_end(true)
        .exit_when(|v, _| v.get("score").and_then(|s| s.as_f64()).unwrap_or(0.0) >= 0.75)
        .output_key("story")
        .build()
        .unwrap();
    let out = lp.invoke().await.unwrap();
    assert_eq!(edits.load(Ordering::SeqCst), 3);
    assert_eq!(out.output(), Some(&json!("edit 3")));
}

#[tokio::test]
async fn one_agent_loop_with_max_iterations_three_runs_exactly_three_times() {
    let count = Compute::expression("count", "n + 1")
        .unwrap()
        .input(InputSpec::new("n").typed(ValueType::Integer).default_value(json!(0)))
        .output_key("n")
        .build();
    let lp = Loop::builder().sub_agents([count]).max_iterations(3).output_key("n").build().unwrap();
    let out = lp.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!(3)));
    assert_eq!(out.history().await.unwrap().iter().filter(|r| r.agent == "count").count(), 3);
}

#[tokio::test]
async fn loop_exit_condition_sees_the_one_based_iteration() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let tick = expr("tick", "1", "t");
    let lp = Loop::builder()
        .sub_agents([tick])
        .exit_when(move |_, i| {
            s2.lock().unwrap().push(i);
            i == 4
        })
        .build()
        .unwrap();
    lp.invoke().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 4]);
}

#[tokio::test]
async fn sequence_passes_values_down_and_empty_sequence_is_done() {
    let a = expr("a", "x * 10", "y");
    let b = Compute::template("b", "y={{ y }}").unwrap().output_key("z").build();
    let seq = Sequence::builder().sub_agents([a, b]).output_key("z").build().unwrap();
    let out = seq.invoke().input("x", 4).await.unwrap();
    assert_eq!(out.output(), Some(&json!("y=40")));

    let empty = Sequence::builder().output_key("nothing").build().unwrap();
    assert_eq!(empty.invoke().await.unwrap().output(), Some(&serde_json::Value::Null));

    let with_output = Sequence::builder()
        .sub_agents([expr("a", "2", "p"), expr("b", "3", "q")])
        .output(|v| {
            Ok(json!(
                v.get("p").and_then(|p| p.as_i64()).unwrap_or(0) * v.get("q").and_then(|q| q.as_i64()).unwrap_or(0)
            ))
        })
        .output_key("product")
        .build()
        .unwrap();
    let out = with_output.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&json!(6)));
    assert_eq!(out.state().get("product"), Some(&json!(6)), "an output function's result is written to output_key");
}

#[tokio::test]
async fn conditional_without_a_matching_branch_completes_and_the_sequence_continues() {
    let medical = expr("medical", "'doctor'", "answer");
    let legal = expr("legal", "'lawyer'", "answer");
    let router = Conditional::builder()
        .branch_when(|v| v.get("category") == Some(&json!("MEDICAL")), [medical])
        .branch_when(|v| v.get("category") == Some(&json!("LEGAL")), [legal])
        .build()
        .unwrap();
    let after = expr("after", "'continued'", "tail");
    let seq = Sequence::builder().sub_agents([router, after]).output_key("tail").build().unwrap();

    let out = seq.clone().invoke().input("category", "TECHNICAL").await.unwrap();
    assert_eq!(out.output(), Some(&json!("continued")));
    assert!(out.state().get("answer").is_none());

    let out = seq.invoke().input("category", "LEGAL").await.unwrap();
    assert_eq!(out.state().get("answer"), Some(&json!("lawyer")));
}

#[tokio::test]
async fn conditional_runs_all_matching_branches_in_parallel_each_in_order() {
    let a1 = expr("a1", "'a1'", "a");
    let a2 = expr("a2", "a ~ '+a2'", "a");
    let b1 = expr("b1", "'b1'", "b");
    let cond = Conditional::builder()
        .branch_when(|_| true, [a1, a2])
        .branch_when(|v| v.contains("flag"), [b1])
        .output(|v| Ok(json!([v.get("a"), v.get("b")])))
        .build()
        .unwrap();
    let out = cond.invoke().input("flag", true).await.unwrap();
    assert_eq!(out.output(), Some(&json!(["a1+a2", "b1"])));
}

#[tokio::test]
async fn parallel_mapper_maps_in_item_order_and_handles_empty_and_non_lists() {
    let sign = FnAgent::builder("sign", |ctx| {
        Box::pin(async move {
            let name: String = ctx.input_as("person")?;
            // later items finish first: order must still follow the items
            tokio::time::sleep(Duration::from_millis(30 - name.len() as u64 * 2)).await;
            Ok(json!(format!("{name}: Leo")))
        })
    })
    .input("person")
    .output_key("sign")
    .build();
    let mapper = ParallelMapper::builder().sub_agent(sign).items_key("people").output_key("signs").build().unwrap();

    let out = mapper.clone().invoke().input("people", json!(["Al", "Beatrice", "Cy"])).await.unwrap();
    assert_eq!(out.output(), Some(&json!(["Al: Leo", "Beatrice: Leo", "Cy: Leo"])));
    assert_eq!(out.state().get("signs"), Some(&json!(["Al: Leo", "Beatrice: Leo", "Cy: Leo"])));
    assert!(out.state().get("sign").is_none(), "mapped calls do not write the agent's own output key");

    let out = mapper.clone().invoke().input("people", json!([])).await.unwrap();
    assert_eq!(out.output(), Some(&json!([])));

    let err = mapper.clone().invoke().input("people", "Al").await.unwrap_err();
    assert_eq!(err.to_string(), "agent `parallel_mapper` (root): key `people` must be a list, found string");
    assert!(matches!(err, AgentError::WrongType { ref key, .. } if key == "people"));

    let out = mapper.invoke().await.unwrap();
    assert_eq!(out.output(), Some(&serde_json::Value::Null), "missing list: no result");
}

/// An agent that records how many copies of itself run at once.
fn gauge(name: &str, current: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> AgentRef {
    FnAgent::builder(name, move |_ctx| {
        let (c, p) = (current.clone(), peak.clone());
        Box::pin(async move {
            let now = c.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(15)).await;
            c.fetch_sub(1, Ordering::SeqCst);
            Ok(json!(1))
        })
    })
    .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_respects_max_concurrency_and_runs_everything() {
    let (current, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let agents: Vec<AgentRef> = (0..7).map(|i| gauge(&format!("g{i}"), current.clone(), peak.clone())).collect();
    let par = Parallel::builder().sub_agents(agents).max_concurrency(3).build().unwrap();
    let out = par.invoke().await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    assert_eq!(out.history().await.unwrap().iter().filter(|r| r.agent.starts_with('g')).count(), 7);

    let (current, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let agents: Vec<AgentRef> = (0..5).map(|i| gauge(&format!("g{i}"), current.clone(), peak.clone())).collect();
    Parallel::builder().sub_agents(agents).build().unwrap().invoke().await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 5, "unbounded: all at once");
}

#[tokio::test]
async fn parallel_output_expression_combines_the_branches() {
    let meal = expr("meal", "'pasta'", "meal");
    let film = expr("film", "'Alien'", "film");
    let par = Parallel::builder()
        .sub_agents([meal, film])
        .output(|v| Ok(json!(format!("{} and {}", v.get("meal").unwrap(), v.get("film").unwrap()))))
        .output_key("plan")
        .build()
        .unwrap();
    assert_eq!(par.invoke().await.unwrap().output(), Some(&json!("\"pasta\" and \"Alien\"")));
}

#[tokio::test]
async fn a_mapped_composite_passes_the_item_to_its_sub_agents() {
    let double = expr("double", "x * 2", "doubled");
    let plus = expr("plus", "doubled + 1", "plus");
    let inner =
        Sequence::builder().name("inner").sub_agents([double, plus]).input("x").output_key("plus").build().unwrap();
    let mapper = ParallelMapper::builder().sub_agent(inner).items_key("xs").max_concurrency(1).build().unwrap();
    let out = mapper.invoke().input("xs", json!([1, 2, 3])).await.unwrap();
    assert_eq!(out.output(), Some(&json!([3, 5, 7])));
}

#[test]
fn a_mapper_item_key_must_be_an_input_of_the_mapped_agent() {
    let d = expr("d", "x * 2", "y");
    let err = ParallelMapper::builder().sub_agent(d).items_key("xs").item_key("zz").build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "`parallel_mapper`: item_key `zz` is not an input of the mapped agent `d` (its inputs: x)"
    );
}
