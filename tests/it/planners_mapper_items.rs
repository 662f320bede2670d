//! Per-item scopes of a parallel mapper over a composite: keys written inside one item's invocation are
//! invisible to the other items and to the shared state, at any concurrency; the journal and the report carry
//! the item of each write; a nested mapper takes its items from its own invocation.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agentic::engine::RunImage;
use agentic::prelude::*;
use serde_json::{Value, json};

/// `x * 10` into `y`, after a pause that depends on the item (so that items interleave).
fn times_ten() -> AgentRef {
    FnAgent::builder("times_ten", |ctx| {
        Box::pin(async move {
            let x: i64 = ctx.input_as("x")?;
            tokio::time::sleep(Duration::from_micros(((x * 7919) % 13) as u64 * 50)).await;
            Ok(json!(x * 10))
        })
    })
    .input("x")
    .output_key("y")
    .build()
}

/// `y + 1` into `z`, after yielding once.
fn plus_one() -> AgentRef {
    FnAgent::builder("plus_one", |ctx| {
        Box::pin(async move {
            tokio::task::yield_now().await;
            Ok(json!(ctx.input_as::<i64>("y")? + 1))
        })
    })
    .input("y")
    .output_key("z")
    .build()
}

fn mapper(max_concurrency: usize) -> AgentRef {
    let per_item = Sequence::builder().name("per_item").sub_agents([times_ten(), plus_one()]).output_key("z").build();
    ParallelMapper::builder()
        .name("map")
        .sub_agent(per_item.unwrap())
        .items_key("xs")
        .item_key("x")
        .max_concurrency(max_concurrency)
        .output_key("zs")
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_sequence_gives_every_item_its_own_keys_at_any_concurrency() {
    let xs: Vec<i64> = (0..200).collect();
    let expected: Vec<Value> = xs.iter().map(|x| json!(x * 10 + 1)).collect();
    let system = mapper(8);
    for rep in 0..20 {
        let outcome = system.invoke().input("xs", json!(xs)).await.unwrap();
        assert_eq!(outcome.output(), Some(&Value::Array(expected.clone())), "repetition {rep}");
        let state = outcome.state();
        // The items' keys stayed in their layers, which ended with their items.
        assert_eq!(state.get("y"), None, "repetition {rep}");
        assert_eq!(state.get("z"), None, "repetition {rep}");
        assert!(state.layers().is_empty(), "repetition {rep}: {:?}", state.layers());
        assert_eq!(state.get("zs"), Some(&Value::Array(expected.clone())));
    }
    // Unbounded concurrency too.
    let outcome = mapper(usize::MAX).invoke().input("xs", json!(xs)).await.unwrap();
    assert_eq!(outcome.output(), Some(&Value::Array(expected)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_and_the_report_show_item_scoped_writes() {
    let store = MemoryStore::new();
    let system = mapper(2);
    let outcome =
        system.invoke().input("xs", json!([1, 2, 3])).memory_id("items-1").store(store.clone()).await.unwrap();
    assert_eq!(outcome.output(), Some(&json!([11, 21, 31])));

    let records = agentic::engine::CheckpointStore::records(&store, "items-1").await.unwrap();
    // Each item's sequence wrote y then z in its own layer; the mapper's record of the item ends it.
    type Step = (String, Vec<(String, Value)>, bool);
    let in_item = |item: &str| -> Vec<Step> {
        records
            .iter()
            .filter(|r| r.item.as_deref() == Some(item))
            .map(|r| (r.agent_path.clone(), r.delta.clone(), r.item_end))
            .collect()
    };
    assert_eq!(
        in_item("|root/0#1"),
        [
            ("root/0/0".to_string(), vec![("y".to_string(), json!(20))], false),
            ("root/0/1".to_string(), vec![("z".to_string(), json!(21))], false),
            ("root/0".to_string(), vec![], true),
        ]
    );
    let image = RunImage::fold("items-1", &records).unwrap();
    assert!(image.layers.is_empty(), "every item ended: {:?}", image.layers);
    assert_eq!(image.state.get("y"), None);
    assert_eq!(image.state.get("zs"), Some(&json!([11, 21, 31])));
    // The image halfway, after item #0's first step: its layer holds its write, the shared state does not.
    let first = records.iter().position(|r| r.item.as_deref() == Some("|root/0#0")).unwrap();
    let half = RunImage::fold("items-1", &records[..=first]).unwrap();
    assert_eq!(half.layers.get("|root/0#0").and_then(|l| l.get("y")), Some(&json!(10)));
    assert_eq!(half.state.get("y"), None);

    let html =
        agentic_report::report_from_store(&store.store_ref(), "items-1", Some(&system.topology())).await.unwrap();
    assert!(html.contains(r##""item":"|root/0#2""##), "the report's steps carry their item");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_mapper_takes_its_items_from_its_own_invocation() {
    let double = FnAgent::builder("double", |ctx| Box::pin(async move { Ok(json!(ctx.input_as::<i64>("n")? * 2)) }))
        .input("n")
        .build();
    let inner = ParallelMapper::builder().name("inner").sub_agent(double).items_key("group").item_key("n").build();
    let outer = ParallelMapper::builder()
        .name("outer")
        .sub_agent(inner.unwrap())
        .items_key("groups")
        .item_key("group")
        .output_key("doubled")
        .build()
        .unwrap();
    let outcome = outer.invoke().input("groups", json!([[1, 2], [3], []])).await.unwrap();
    assert_eq!(outcome.output(), Some(&json!([[2, 4], [6], []])));
}

/// Two mappers running at once (siblings in a parallel) over sequences that write the same keys: every item of
/// each has its own layer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mappers_running_at_once_keep_their_items_apart() {
    let mapped = |name: &str, prefix: &'static str| {
        let tag = FnAgent::builder(format!("{name}_tag"), move |ctx| {
            Box::pin(async move {
                tokio::task::yield_now().await;
                Ok(json!(format!("{prefix}{}", ctx.input_as::<i64>("x")?)))
            })
        })
        .input("x")
        .output_key("t")
        .build();
        let pair =
            Compute::expression(format!("{name}_pair"), "[t, x]").unwrap().inputs(["t", "x"]).output_key("r").build();
        let per_item = Sequence::builder().name(format!("{name}_item")).sub_agents([tag, pair]).output_key("r");
        ParallelMapper::builder()
            .name(name)
            .sub_agent(per_item.build().unwrap())
            .items_key("xs")
            .item_key("x")
            .output_key(format!("out_{name}"))
            .build()
            .unwrap()
    };
    let both = Parallel::builder().name("both").sub_agents([mapped("a", "A"), mapped("b", "B")]).build().unwrap();
    for rep in 0..20 {
        let outcome = both.invoke().input("xs", json!([0, 1, 2, 3])).await.unwrap();
        let state = outcome.state();
        assert_eq!(state.get("out_a"), Some(&json!([["A0", 0], ["A1", 1], ["A2", 2], ["A3", 3]])), "repetition {rep}");
        assert_eq!(state.get("out_b"), Some(&json!([["B0", 0], ["B1", 1], ["B2", 2], ["B3", 3]])), "repetition {rep}");
        assert_eq!(state.get("t"), None);
    }
}

/// An async agent inside a mapped item writes to the item's layer, and the item's readers wait for it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_agent_inside_an_item_writes_to_the_items_layer() {
    let side = FnAgent::builder("side", |ctx| {
        Box::pin(async move {
            let x: i64 = ctx.input_as("x")?;
            tokio::time::sleep(Duration::from_micros((x % 3) as u64 * 200)).await;
            Ok(json!(x * 2))
        })
    })
    .input("x")
    .output_key("side")
    .asynchronous(true)
    .build();
    let pair = Compute::expression("pair", "[x, side]").unwrap().inputs(["x", "side"]).output_key("r").build();
    let per_item = Sequence::builder().name("per_item").sub_agents([side, pair]).output_key("r").build().unwrap();
    let system = ParallelMapper::builder()
        .name("map")
        .sub_agent(per_item)
        .items_key("xs")
        .item_key("x")
        .output_key("out")
        .build()
        .unwrap();
    let xs: Vec<i64> = (1..=10).collect();
    let expected: Vec<Value> = xs.iter().map(|x| json!([x, x * 2])).collect();
    for rep in 0..10 {
        let outcome = system.invoke().input("xs", json!(xs)).await.unwrap();
        assert_eq!(outcome.output(), Some(&Value::Array(expected.clone())), "repetition {rep}");
        assert_eq!(outcome.state().get("side"), None, "repetition {rep}");
    }
}

/// An error handler's repair inside a mapped item sees the item's bound value, and writes in the item's layer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_inside_an_item_sees_the_item() {
    let needs_x = FnAgent::builder("needs_x", |ctx| Box::pin(async move { Ok(json!(ctx.input_as::<i64>("x")? + 1)) }))
        .input("x")
        .output_key("r")
        .build();
    let per_item = Sequence::builder()
        .name("per_item")
        .sub_agents([needs_x])
        .output_key("r")
        .error_handler(RetryPolicy::new(1, Duration::ZERO).repair(|ctx| {
            let it = ctx.view.get("it").and_then(Value::as_i64).ok_or("no item")?;
            Ok(vec![("x".to_string(), json!(it * 100))])
        }))
        .build()
        .unwrap();
    let system =
        ParallelMapper::builder().name("map").sub_agent(per_item).items_key("its").item_key("it").build().unwrap();
    let outcome = system.invoke().input("its", json!([1, 2, 3])).await.unwrap();
    assert_eq!(outcome.output(), Some(&json!([101, 201, 301])));
    assert_eq!(outcome.state().get("x"), None, "the repairs stayed in their items");
}
