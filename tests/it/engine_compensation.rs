//! Compensation: with `compensate_on_error`, a failure below undoes every completed action in reverse order.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentic::engine::CancelHandle;
use agentic::prelude::*;
use serde_json::json;

type Log = Arc<Mutex<Vec<String>>>;

/// A tool agent: performs `name:amount` and declares `un<name>:amount` as its compensation.
fn tool(name: &'static str, amount: i64, log: Log, undo_fails: bool) -> AgentRef {
    FnAgent::builder(name, move |ctx| {
        let log = log.clone();
        Box::pin(async move {
            log.lock().unwrap().push(format!("{name}:{amount}"));
            let undo_log = log.clone();
            ctx.run().add_compensation(format!("un{name}"), move || {
                Box::pin(async move {
                    undo_log.lock().unwrap().push(format!("un{name}:{amount}"));
                    if undo_fails { Err("ledger offline".to_string()) } else { Ok(()) }
                })
            });
            Ok(json!(amount))
        })
    })
    .build()
}

fn failing() -> AgentRef {
    FnAgent::builder("notify", |ctx| Box::pin(async move { Err(ctx.fail("smtp down").into()) })).build()
}

#[tokio::test]
async fn a_failure_compensates_completed_tool_actions_in_reverse_order() {
    let log: Log = Arc::default();
    let seq = Sequence::builder()
        .sub_agents([tool("credit", 100, log.clone(), false), tool("debit", 100, log.clone(), false), failing()])
        .compensate_on_error(true)
        .build()
        .unwrap();
    let err = seq.invoke().await.unwrap_err();
    assert_eq!(err.to_string(), "agent `notify` (root/2) failed: smtp down");
    assert_eq!(*log.lock().unwrap(), ["credit:100", "debit:100", "undebit:100", "uncredit:100"]);
}

#[tokio::test]
async fn a_failing_compensation_does_not_stop_the_others() {
    let log: Log = Arc::default();
    let seq = Sequence::builder()
        .sub_agents([tool("credit", 100, log.clone(), false), tool("debit", 100, log.clone(), true), failing()])
        .compensate_on_error(true)
        .build()
        .unwrap();
    seq.invoke().await.unwrap_err();
    assert_eq!(*log.lock().unwrap(), ["credit:100", "debit:100", "undebit:100", "uncredit:100"]);
}

#[tokio::test]
async fn without_the_flag_nothing_is_compensated() {
    let log: Log = Arc::default();
    let seq = Sequence::builder()
        .sub_agents([tool("credit", 100, log.clone(), false), tool("debit", 100, log.clone(), false), failing()])
        .build()
        .unwrap();
    seq.invoke().await.unwrap_err();
    assert_eq!(*log.lock().unwrap(), ["credit:100", "debit:100"]);
}

#[tokio::test]
async fn nested_actions_are_compensated_by_the_flagged_ancestor() {
    let log: Log = Arc::default();
    let inner = Sequence::builder().sub_agents([tool("reserve", 1, log.clone(), false)]).build().unwrap();
    let par = Parallel::builder().sub_agents([tool("charge", 5, log.clone(), false)]).build().unwrap();
    let seq = Sequence::builder().sub_agents([inner, par, failing()]).compensate_on_error(true).build().unwrap();
    seq.invoke().await.unwrap_err();
    assert_eq!(*log.lock().unwrap(), ["reserve:1", "charge:5", "uncharge:5", "unreserve:1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_compensates_too() {
    let log: Log = Arc::default();
    let slow = FnAgent::builder("slow", |_ctx| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(json!(1))
        })
    })
    .build();
    let seq = Sequence::builder()
        .sub_agents([tool("credit", 7, log.clone(), false), slow])
        .compensate_on_error(true)
        .build()
        .unwrap();
    let cancel = CancelHandle::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        c2.cancel();
    });
    let err = seq.invoke().cancel_handle(cancel).await.unwrap_err();
    assert!(matches!(err, AgentError::Cancelled));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*log.lock().unwrap(), ["credit:7", "uncredit:7"]);
}
