//! The model-call limiter on the PostgreSQL store (SPEC.md §3 `limits`, `docs/store-format.md`, Model rate
//! limits): the same operations give the same answers as the process's limiter (`ProcessCapacity`, whose
//! unit tests in `engine/src/limits.rs` these repeat), and concurrent callers — handles of their own, as
//! servers — never share a start time or a slot. Skipped without `AGENTIC_TEST_PG_URL` (unless
//! `AGENTIC_REQUIRE_PG=1`), as `store_suite.rs`.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use agentic_engine::CheckpointStore;
use agentic_engine::limits::{CapacityAnswer, CapacityOp, ProcessCapacity};
use agentic_store::PgStore;

#[path = "support/pg.rs"]
mod pg;

async fn apply(store: &PgStore, op: CapacityOp) -> CapacityAnswer {
    store.capacity(op).await.unwrap().expect("the PostgreSQL store shares its limiter")
}

async fn reserve(store: &PgStore, now_ms: u64, interval_ms: u64) -> u64 {
    match apply(store, CapacityOp::Reserve { key: "k".into(), now_ms, interval_ms }).await {
        CapacityAnswer::Start(s) => s,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_a_minute_start_a_second_apart() {
    let Some(url) = pg::fresh_database("pg_limits_sixty").await else { return };
    let store = PgStore::connect(&url).await.unwrap();
    let mut starts = Vec::new();
    for _ in 0..4 {
        starts.push(reserve(&store, 10_000, 1000).await);
    }
    assert_eq!(starts, vec![10_000, 11_000, 12_000, 13_000]);
    // The last start given back: the next caller gets it; an earlier one cannot be given back any more.
    let unreserve = |start_ms| CapacityOp::Unreserve { key: "k".into(), start_ms, interval_ms: 1000 };
    assert_eq!(apply(&store, unreserve(13_000)).await, CapacityAnswer::Done);
    assert_eq!(apply(&store, unreserve(11_000)).await, CapacityAnswer::Done);
    assert_eq!(reserve(&store, 10_500, 1000).await, 13_000);
    // Nothing to give back on an endpoint never reserved.
    let unknown = CapacityOp::Unreserve { key: "never".into(), start_ms: 5, interval_ms: 1 };
    assert_eq!(apply(&store, unknown).await, CapacityAnswer::Done);
    let start = apply(&store, CapacityOp::Reserve { key: "never".into(), now_ms: 3, interval_ms: 1 }).await;
    assert_eq!(start, CapacityAnswer::Start(3));
    // Later than the queue: at once.
    assert_eq!(reserve(&store, 20_000, 1000).await, 20_000);
    // Another handle (another server) continues the same queue.
    let other = PgStore::connect(&url).await.unwrap();
    assert_eq!(reserve(&other, 20_500, 1000).await, 21_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_a_debt_and_429_backs_off() {
    let Some(url) = pg::fresh_database("pg_limits_tokens").await else { return };
    let store = PgStore::connect(&url).await.unwrap();
    assert_eq!(reserve(&store, 1000, 0).await, 1000);
    assert_eq!(
        apply(&store, CapacityOp::Spend { key: "k".into(), now_ms: 1500, debt_ms: 3000 }).await,
        CapacityAnswer::Done
    );
    assert_eq!(reserve(&store, 2000, 0).await, 4500);
    assert_eq!(apply(&store, CapacityOp::BackOff { key: "k".into(), until_ms: 9000 }).await, CapacityAnswer::Done);
    assert_eq!(reserve(&store, 5000, 0).await, 9000);
    // A debt and a back-off on an endpoint never reserved before.
    apply(&store, CapacityOp::Spend { key: "new1".into(), now_ms: 100, debt_ms: 50 }).await;
    let start = apply(&store, CapacityOp::Reserve { key: "new1".into(), now_ms: 120, interval_ms: 10 }).await;
    assert_eq!(start, CapacityAnswer::Start(150));
    apply(&store, CapacityOp::BackOff { key: "new2".into(), until_ms: 700 }).await;
    let start = apply(&store, CapacityOp::Reserve { key: "new2".into(), now_ms: 600, interval_ms: 10 }).await;
    assert_eq!(start, CapacityAnswer::Start(700));
}

/// As the engine's test of the same name, and on: a late release by an expired holder, then c's slot expiring
/// too; every answer also checked against the process's limiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_are_counted_and_expire() {
    let Some(url) = pg::fresh_database("pg_limits_slots").await else { return };
    let store = PgStore::connect(&url).await.unwrap();
    let process = ProcessCapacity::default();
    let hold = |holder: &str, now_ms: u64| CapacityOp::Hold {
        key: "k".into(),
        max: 2,
        holder: holder.into(),
        now_ms,
        expires_ms: now_ms + 100,
    };
    let release = |slot: u32, holder: &str| CapacityOp::Release { key: "k".into(), slot, holder: holder.into() };
    let steps = [
        (hold("a", 0), CapacityAnswer::Slot(Some(0))),
        (hold("b", 0), CapacityAnswer::Slot(Some(1))),
        (hold("c", 50), CapacityAnswer::Slot(None)),
        (release(0, "a"), CapacityAnswer::Done),
        (hold("c", 50), CapacityAnswer::Slot(Some(0))),
        // b's slot expired.
        (hold("d", 120), CapacityAnswer::Slot(Some(1))),
        // b's late release leaves d's slot alone.
        (release(1, "b"), CapacityAnswer::Done),
        (hold("e", 130), CapacityAnswer::Slot(None)),
        // c's expired too: the lowest free slot.
        (hold("f", 150), CapacityAnswer::Slot(Some(0))),
    ];
    for (i, (op, expected)) in steps.into_iter().enumerate() {
        assert_eq!(process.apply(op.clone()), expected, "step {i} in the process: {op:?}");
        assert_eq!(apply(&store, op.clone()).await, expected, "step {i} on PostgreSQL: {op:?}");
    }
}

/// A long pseudo-random sequence of every operation on a few endpoints (a start given back just after it was
/// taken, or later when others were taken since, or one never taken), with limits that change (as a spec
/// edited between runs): the store answers as the process's limiter, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_sequence_of_operations_answers_as_the_process_limiter() {
    let Some(url) = pg::fresh_database("pg_limits_sequence").await else { return };
    let store = PgStore::connect(&url).await.unwrap();
    let process = ProcessCapacity::default();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut now = 1_000_000u64;
    let mut held: Vec<(String, u32, String)> = Vec::new();
    let mut reserved: Vec<(String, u64, u64)> = Vec::new();
    // Operations of each kind seen: a start later than now, a slot, no slot, a release of a held slot, a start
    // given back.
    let (mut waits, mut slots, mut full, mut releases, mut unreserves) = (0, 0, 0, 0, 0);
    for i in 0..900 {
        now += next(300);
        let key = format!("endpoint {}", next(3));
        let op = match next(8) {
            7 => CapacityOp::Peek { key },
            0 | 1 => CapacityOp::Reserve { key, now_ms: now, interval_ms: next(4) * 250 },
            // A start given back: one just taken (given back when still the last), or any time.
            6 => match reserved.pop() {
                Some((key, start_ms, interval_ms)) if next(4) > 0 => {
                    CapacityOp::Unreserve { key, start_ms, interval_ms }
                }
                _ => CapacityOp::Unreserve { key, start_ms: now - next(2000), interval_ms: next(4) * 250 },
            },
            2 => CapacityOp::Spend { key, now_ms: now, debt_ms: next(2000) },
            3 => CapacityOp::BackOff { key, until_ms: now + next(3000) },
            4 => CapacityOp::Hold {
                key,
                max: 1 + next(6) as u32,
                holder: format!("h{i}"),
                now_ms: now,
                expires_ms: now + next(20_000),
            },
            _ if !held.is_empty() => {
                let (key, slot, holder) = held.swap_remove(next(held.len() as u64) as usize);
                CapacityOp::Release { key, slot, holder }
            }
            _ => CapacityOp::Reserve { key, now_ms: now, interval_ms: 0 },
        };
        let expected = process.apply(op.clone());
        let answer = apply(&store, op.clone()).await;
        assert_eq!(answer, expected, "operation {i}: {op:?}");
        match (op, answer) {
            (CapacityOp::Hold { key, holder, .. }, CapacityAnswer::Slot(Some(slot))) => {
                slots += 1;
                held.push((key, slot, holder));
            }
            (_, CapacityAnswer::Slot(None)) => full += 1,
            (CapacityOp::Reserve { key, interval_ms, .. }, CapacityAnswer::Start(start)) => {
                reserved.push((key, start, interval_ms));
                if start > now {
                    waits += 1;
                }
            }
            (CapacityOp::Unreserve { .. }, _) => unreserves += 1,
            (CapacityOp::Release { .. }, _) => releases += 1,
            _ => {}
        }
    }
    assert!(
        waits > 20 && slots > 20 && full > 5 && releases > 20 && unreserves > 20,
        "{waits} {slots} {full} {releases} {unreserves}"
    );
}

/// Four handles (four servers) reserve 30 starts each at the same moment, 100 ms apart: 120 different starts,
/// exactly 100 ms apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reservations_get_distinct_starts_an_interval_apart() {
    let Some(url) = pg::fresh_database("pg_limits_concurrent").await else { return };
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = PgStore::connect(&url).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let mut starts = Vec::new();
            for _ in 0..30 {
                starts.push(reserve(&store, 50_000, 100).await);
            }
            starts
        }));
    }
    let mut starts = Vec::new();
    for task in tasks {
        let mine = task.await.unwrap();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "one caller's starts increase: {mine:?}");
        starts.extend(mine);
    }
    starts.sort_unstable();
    assert_eq!(starts, (0..120).map(|i| 50_000 + i * 100).collect::<Vec<u64>>());
}

/// Six handles take slots of an endpoint with 20 (never used before: their rows are added as they are
/// taken) at once, 10 each: 20 of the 60 get one, all different; the rest find none free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_holds_take_each_slot_once() {
    let Some(url) = pg::fresh_database("pg_limits_concurrent_slots").await else { return };
    let mut tasks = Vec::new();
    for t in 0..6 {
        let store = PgStore::connect(&url).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let mut slots = Vec::new();
            for i in 0..10 {
                let op = CapacityOp::Hold {
                    key: "k".into(),
                    max: 20,
                    holder: format!("{t}-{i}"),
                    now_ms: 1000,
                    expires_ms: 60_000,
                };
                if let CapacityAnswer::Slot(Some(s)) = apply(&store, op).await {
                    slots.push(s);
                }
            }
            slots
        }));
    }
    let mut slots = Vec::new();
    for task in tasks {
        slots.extend(task.await.unwrap());
    }
    slots.sort_unstable();
    assert_eq!(slots, (0..20).collect::<Vec<u32>>());
    let taken: BTreeSet<u32> = slots.into_iter().collect();
    assert_eq!(taken.len(), 20);
}
