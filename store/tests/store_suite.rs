//! One store test suite, run against every persistent backend: the sled store (always) and the PostgreSQL
//! store (feature `postgres`; each test in a fresh database of the server `AGENTIC_TEST_PG_URL` names,
//! skipped with a message when it is unset unless `AGENTIC_REQUIRE_PG=1`). The tests only use the store
//! trait and what both stores offer (a reopen, a snapshot interval, `compact`); what is particular to one
//! backend (sled's write-ahead log, PostgreSQL's schema migrations) is tested next to it.

#![allow(clippy::unwrap_used)]

use agentic_engine::{
    AuditEntry, CheckpointStore, InvocationRecord, KeyRecord, Overlap, Role, RunImage, RunRecord, RunStatus,
    ScheduleChange, ScheduleRecord, ScheduleSource, StepRecord,
};
use serde_json::{Map, json};

#[cfg(feature = "postgres")]
#[path = "support/pg.rs"]
mod pg;

/// A persistent store under test: opened (again) on the same data, with a snapshot interval.
trait Backend: Sized + Send + Sync {
    type Store: CheckpointStore + Clone;

    /// A handle on the backend's data (a new one each call: a reopen).
    async fn open(&self, snapshot_interval: u64) -> Self::Store;

    /// The store's own `compact`.
    async fn compact(store: &Self::Store, run_id: &str) -> u64;
}

struct Sled(tempfile::TempDir);

impl Sled {
    fn new() -> Sled {
        Sled(tempfile::tempdir().unwrap())
    }
}

impl Backend for Sled {
    type Store = agentic_store::SledStore;

    async fn open(&self, snapshot_interval: u64) -> Self::Store {
        agentic_store::SledStore::open(self.0.path()).unwrap().with_snapshot_interval(snapshot_interval)
    }

    async fn compact(store: &Self::Store, run_id: &str) -> u64 {
        store.compact(run_id).unwrap()
    }
}

#[cfg(feature = "postgres")]
struct Pg(String);

#[cfg(feature = "postgres")]
impl Backend for Pg {
    type Store = agentic_store::PgStore;

    async fn open(&self, snapshot_interval: u64) -> Self::Store {
        agentic_store::PgStore::connect(&self.0).await.unwrap().with_snapshot_interval(snapshot_interval)
    }

    async fn compact(store: &Self::Store, run_id: &str) -> u64 {
        store.compact(run_id).await.unwrap()
    }
}

/// Each test once per backend: `sled::NAME` and `postgres::NAME`.
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod sled {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Sled::new()).await;
                }
            )*
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(url) = super::pg::fresh_database(stringify!($name)).await else { return };
                    super::$name(super::Pg(url)).await;
                }
            )*
        }
    };
}

suite!(
    run_records_and_journal_round_trip_and_survive_a_reopen,
    the_journal_is_append_only_and_run_ids_cannot_hold_nul,
    compaction_at_any_interval_loads_what_a_plain_fold_gives,
    concurrent_runs_flushing_every_step_all_survive_a_reopen,
    a_handle_reads_what_it_appended_before_any_flush,
    the_last_run_record_put_wins,
    schedules_are_created_changed_and_deleted_and_survive_a_reopen,
    concurrent_claims_of_a_tick_let_exactly_one_through,
    keys_and_the_audit_are_kept_and_survive_a_reopen,
);

fn step(run_id: &str, seq: u64) -> StepRecord {
    StepRecord {
        run_id: run_id.into(),
        seq,
        agent_path: format!("root/{}", seq % 4),
        delta: vec![(format!("k{}", seq % 5), if seq.is_multiple_of(9) { json!(null) } else { json!({"n": seq}) })],
        planner_states: vec![serde_json::from_value(json!({"path": "root", "state": {"next": seq % 4}})).unwrap()],
        invocation: Some(InvocationRecord {
            agent: "worker".into(),
            path: format!("root/{}", seq % 4),
            inputs: Map::new(),
            output: json!(seq),
            started_at_us: seq * 100,
            ended_at_us: seq * 100 + 7,
            attempt: 1,
            tokens: None,
            usage: None,
            error: None,
            item: None,
        }),
        async_started: false,
        failed: false,
        item: None,
        item_end: false,
        bindings: None,
        calls: Vec::new(),
    }
}

fn run_record(run_id: &str, status: RunStatus, updated_at_ms: u64) -> RunRecord {
    serde_json::from_value(json!({
        "run_id": run_id, "name": "demo", "fingerprint": "abc", "status": status,
        "created_at_ms": 1, "updated_at_ms": updated_at_ms,
        "answers": {"q1": {"ok": true}},
        "pending": [{"id": "q2", "prompt": "why?", "agent": "ask", "data": {"options": [1, 2]}}],
    }))
    .unwrap()
}

async fn fill<S: CheckpointStore>(store: &S, run_id: &str, steps: u64) -> Vec<StepRecord> {
    let mut records = Vec::new();
    for seq in 1..=steps {
        let record = step(run_id, seq);
        store.append(record.clone()).await.unwrap();
        records.push(record);
    }
    records
}

async fn run_records_and_journal_round_trip_and_survive_a_reopen<B: Backend>(backend: B) {
    let (a, ab) = {
        let store = backend.open(64).await;
        assert!(store.records("nope").await.unwrap().is_empty());
        assert_eq!(store.run("nope").await.unwrap(), None);
        assert_eq!(store.load("nope").await.unwrap(), RunImage::new("nope"));
        assert!(store.runs().await.unwrap().is_empty());

        store.put_run(run_record("a", RunStatus::Running, 10)).await.unwrap();
        store.put_run(run_record("b", RunStatus::Completed, 30)).await.unwrap();
        store.put_run(run_record("ab", RunStatus::Suspended, 20)).await.unwrap();
        let a = fill(&store, "a", 300).await;
        let ab = fill(&store, "ab", 3).await;
        store.flush().await.unwrap();
        // Through a clone too.
        assert_eq!(store.clone().records("a").await.unwrap(), a);
        (a, ab)
    };
    let store = backend.open(64).await;
    let ids: Vec<String> = store.runs().await.unwrap().into_iter().map(|r| r.run_id).collect();
    assert_eq!(ids, ["b", "ab", "a"], "most recently updated first");
    let suspended = store.run("ab").await.unwrap().unwrap();
    assert_eq!(suspended, run_record("ab", RunStatus::Suspended, 20), "pending responses and answers kept");
    assert_eq!(store.records("a").await.unwrap(), a, "run `a` does not see run `ab`'s records");
    assert_eq!(store.records("ab").await.unwrap(), ab);
    assert!(store.records("b").await.unwrap().is_empty());
    assert_eq!(store.load("a").await.unwrap(), RunImage::fold("a", &a).unwrap());
    let mut updated = run_record("a", RunStatus::Completed, 50);
    updated.detail = json!({"result": [1, 2.5, "three"]});
    store.put_run(updated.clone()).await.unwrap();
    store.flush().await.unwrap();
    assert_eq!(store.run("a").await.unwrap(), Some(updated));
    assert_eq!(store.runs().await.unwrap()[0].run_id, "a");
    // Through the engine's object-safe handle.
    let shared: agentic_engine::StoreRef = std::sync::Arc::new(store);
    assert_eq!(shared.load_dyn("a").await.unwrap().seq, 300);
}

async fn the_journal_is_append_only_and_run_ids_cannot_hold_nul<B: Backend>(backend: B) {
    let store = backend.open(0).await;
    store.append(step("r", 1)).await.unwrap();
    // Twice before a flush.
    let err = store.append(step("r", 1)).await.unwrap_err();
    assert!(err.to_string().contains("run `r` step 1 is already journaled"), "{err}");
    store.flush().await.unwrap();
    // After the flush, with another value: refused by the append or by the flush that writes it (PostgreSQL
    // writes at the flush).
    let mut other = step("r", 1);
    other.delta = vec![("other".into(), json!(1))];
    let err = match store.append(other).await {
        Err(e) => e,
        Ok(()) => store.flush().await.unwrap_err(),
    };
    assert!(err.to_string().contains("run `r` step 1 is already journaled"), "{err}");
    assert_eq!(store.records("r").await.unwrap(), [step("r", 1)], "the first value stays");
    store.append(step("r", 2)).await.unwrap();
    store.flush().await.unwrap();
    assert_eq!(store.records("r").await.unwrap().len(), 2, "the store goes on");

    let err = store.append(step("a\0b", 1)).await.unwrap_err();
    assert!(err.to_string().contains("contains a NUL byte"), "{err}");
    assert!(store.records("a\0b").await.unwrap().is_empty());
}

async fn compaction_at_any_interval_loads_what_a_plain_fold_gives<B: Backend>(backend: B) {
    for n in [0, 1, 7, 256] {
        let run_id = format!("r{n}");
        let store = backend.open(n).await;
        let mut records = Vec::new();
        for seq in 1..=300 {
            let record = step(&run_id, seq);
            store.append(record.clone()).await.unwrap();
            records.push(record);
            if seq % 10 == 0 {
                store.flush().await.unwrap();
            }
            if seq % 100 == 0 {
                assert_eq!(store.load(&run_id).await.unwrap(), RunImage::fold(&run_id, &records).unwrap(), "N={n}");
            }
        }
        store.flush().await.unwrap();
        assert_eq!(store.records(&run_id).await.unwrap().len(), 300, "N={n}: every record kept");
        assert_eq!(B::compact(&store, &run_id).await, 300);
        let image = RunImage::fold(&run_id, &records).unwrap();
        assert_eq!(store.load(&run_id).await.unwrap(), image, "N={n} compacted");
        drop(store);
        // Reopened: from the snapshot.
        assert_eq!(backend.open(n).await.load(&run_id).await.unwrap(), image, "N={n} reopened");
    }
}

async fn concurrent_runs_flushing_every_step_all_survive_a_reopen<B: Backend>(backend: B) {
    {
        let store = backend.open(16).await;
        let tasks: Vec<_> = (0..8)
            .map(|j| {
                let store = store.clone();
                tokio::spawn(async move {
                    let run_id = format!("run-{j}");
                    for seq in 1..=40 {
                        store.append(step(&run_id, seq)).await.unwrap();
                        store.flush().await.unwrap();
                    }
                    store.put_run(run_record(&run_id, RunStatus::Completed, 40)).await.unwrap();
                    store.flush().await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    }
    let store = backend.open(16).await;
    assert_eq!(store.runs().await.unwrap().len(), 8);
    for j in 0..8 {
        let run_id = format!("run-{j}");
        let expected: Vec<_> = (1..=40).map(|seq| step(&run_id, seq)).collect();
        assert_eq!(store.records(&run_id).await.unwrap(), expected, "{run_id}");
        assert_eq!(store.load(&run_id).await.unwrap(), RunImage::fold(&run_id, &expected).unwrap(), "{run_id}");
        assert_eq!(store.run(&run_id).await.unwrap(), Some(run_record(&run_id, RunStatus::Completed, 40)));
    }
}

async fn a_handle_reads_what_it_appended_before_any_flush<B: Backend>(backend: B) {
    let store = backend.open(5).await;
    store.put_run(run_record("r", RunStatus::Running, 1)).await.unwrap();
    let records = fill(&store, "r", 12).await;
    assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", RunStatus::Running, 1)));
    assert_eq!(store.records("r").await.unwrap(), records);
    assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &records).unwrap());
    assert_eq!(store.runs().await.unwrap().len(), 1);
}

async fn the_last_run_record_put_wins<B: Backend>(backend: B) {
    let store = backend.open(0).await;
    for i in 1..=5 {
        store.put_run(run_record("r", RunStatus::Running, i)).await.unwrap();
        if i % 2 == 0 {
            store.flush().await.unwrap();
        }
    }
    let last = run_record("r", RunStatus::Suspended, 6);
    store.put_run(last.clone()).await.unwrap();
    store.flush().await.unwrap();
    drop(store);
    let store = backend.open(0).await;
    assert_eq!(store.run("r").await.unwrap(), Some(last.clone()));
    assert_eq!(store.runs().await.unwrap(), [last]);
}

fn schedule(id: &str, cron: &str) -> ScheduleRecord {
    let inputs = json!({"topic": "dragons", "n": 3}).as_object().cloned().unwrap();
    ScheduleRecord::new(id, "report", cron, "Europe/Paris", inputs, Overlap::Enqueue, ScheduleSource::Api, 1_000)
}

/// A change that creates `schedule`, refused when the id is taken.
fn create(schedule: ScheduleRecord) -> ScheduleChange {
    Box::new(move |current: &mut Option<ScheduleRecord>| {
        if current.is_some() {
            return Err("taken".to_string());
        }
        *current = Some(schedule);
        Ok(())
    })
}

/// A change that takes the tick `tick_ms` (a compare-and-set on the last tick taken), as a server does.
fn take_tick(tick_ms: u64) -> ScheduleChange {
    Box::new(move |current: &mut Option<ScheduleRecord>| {
        let s = current.as_mut().ok_or("gone")?;
        if s.last_tick_ms.is_some_and(|t| t >= tick_ms) {
            return Err(format!("tick {tick_ms} already taken"));
        }
        s.last_tick_ms = Some(tick_ms);
        s.last_run_id = Some(s.run_id_at(tick_ms));
        Ok(())
    })
}

fn key(id: &str, name: &str, created_at_ms: u64) -> KeyRecord {
    KeyRecord {
        id: id.into(),
        name: name.into(),
        tenant: "acme".into(),
        roles: vec![Role::Approver],
        kinds: vec!["tool_call".into()],
        agents: Vec::new(),
        hash: "ab".repeat(32),
        created_at_ms,
        created_by: "token".into(),
        revoked_at_ms: None,
    }
}

fn entry(n: u64, tenant: Option<&str>) -> AuditEntry {
    AuditEntry {
        at_ms: 1_000 + n,
        principal: "key:ann".into(),
        tenant: tenant.map(str::to_string),
        action: "answer".into(),
        run_id: Some(format!("r{n}")),
        detail: json!({"response_id": "q"}),
    }
}

async fn keys_and_the_audit_are_kept_and_survive_a_reopen<B: Backend>(backend: B) {
    {
        let store = backend.open(0).await;
        assert!(store.keys().await.unwrap().is_empty());
        assert!(store.audit(10).await.unwrap().is_empty());
        // Listed oldest first, whatever the order of their ids.
        store.put_key(key("k2", "bob", 20)).await.unwrap();
        store.put_key(key("k1", "ann", 10)).await.unwrap();
        // A key put again replaces the one with its id (a revocation).
        store.put_key(KeyRecord { revoked_at_ms: Some(30), ..key("k2", "bob", 20) }).await.unwrap();
        for n in 0..5 {
            store.append_audit(entry(n, if n % 2 == 0 { Some("acme") } else { None })).await.unwrap();
        }
    }
    let store = backend.open(0).await;
    assert_eq!(
        store.keys().await.unwrap(),
        [key("k1", "ann", 10), KeyRecord { revoked_at_ms: Some(30), ..key("k2", "bob", 20) }]
    );
    // The latest first, as many as asked.
    assert_eq!(store.audit(3).await.unwrap(), [entry(4, Some("acme")), entry(3, None), entry(2, Some("acme"))]);
    assert_eq!(store.audit(100).await.unwrap().len(), 5);
}

async fn schedules_are_created_changed_and_deleted_and_survive_a_reopen<B: Backend>(backend: B) {
    {
        let store = backend.open(0).await;
        assert!(store.schedules().await.unwrap().is_empty());
        assert_eq!(store.schedule("nightly").await.unwrap(), None);
        for id in ["nightly", "hourly", "b-2"] {
            let written = store.change_schedule(id, create(schedule(id, "0 2 * * *"))).await.unwrap();
            assert_eq!(written, Ok(Some(schedule(id, "0 2 * * *"))));
        }
        // A second creation is refused and changes nothing.
        let refused = store.change_schedule("nightly", create(schedule("nightly", "* * * * *"))).await.unwrap();
        assert_eq!(refused, Err("taken".to_string()));
        // A change may not move a schedule to another id.
        let moved: ScheduleChange = Box::new(|s: &mut Option<ScheduleRecord>| {
            if let Some(s) = s {
                s.id = "other".into();
            }
            Ok(())
        });
        let refused = store.change_schedule("hourly", moved).await.unwrap().unwrap_err();
        assert_eq!(refused, "schedule `hourly` cannot be stored under the id `other`");
        assert_eq!(
            store.change_schedule("nightly", take_tick(5_000)).await.unwrap().unwrap().unwrap().last_tick_ms,
            Some(5_000)
        );
        // Deleted: gone, and deleting again finds nothing.
        let delete = || -> ScheduleChange {
            Box::new(|s: &mut Option<ScheduleRecord>| s.take().map(drop).ok_or_else(|| "no such schedule".to_string()))
        };
        assert_eq!(store.change_schedule("b-2", delete()).await.unwrap(), Ok(None));
        assert_eq!(store.change_schedule("b-2", delete()).await.unwrap(), Err("no such schedule".to_string()));
    }
    let store = backend.open(0).await;
    let ids: Vec<String> = store.schedules().await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["hourly", "nightly"], "sorted by id, the deleted one gone");
    let mut expected = schedule("nightly", "0 2 * * *");
    expected.last_tick_ms = Some(5_000);
    expected.last_run_id = Some("nightly-19700101T000005Z".into());
    assert_eq!(store.schedule("nightly").await.unwrap(), Some(expected), "the tick taken survives the reopen");
    assert_eq!(store.schedule("b-2").await.unwrap(), None);
    // Through the engine's object-safe handle.
    let shared: agentic_engine::StoreRef = std::sync::Arc::new(store);
    assert_eq!(shared.schedules_dyn().await.unwrap().len(), 2);
    assert_eq!(
        shared.change_schedule_dyn("nightly", take_tick(5_000)).await.unwrap(),
        Err("tick 5000 already taken".to_string())
    );
}

/// Four handles (four connection pools on PostgreSQL: as four servers) race to take each of 25 ticks: each tick
/// is taken by exactly one of them, and no tick is lost.
async fn concurrent_claims_of_a_tick_let_exactly_one_through<B: Backend>(backend: B) {
    let first = backend.open(0).await;
    first.change_schedule("s", create(schedule("s", "* * * * * *"))).await.unwrap().unwrap();
    let mut handles = vec![first];
    for _ in 1..4 {
        handles.push(backend.open(0).await);
    }
    let mut won = 0;
    for tick in 1..=25u64 {
        let tasks: Vec<_> = handles
            .iter()
            .map(|store| {
                let store = store.clone();
                tokio::spawn(async move { store.change_schedule("s", take_tick(tick * 1000)).await.unwrap().is_ok() })
            })
            .collect();
        let mut winners = 0;
        for task in tasks {
            winners += usize::from(task.await.unwrap());
        }
        assert_eq!(winners, 1, "tick {tick}: exactly one handle takes it");
        won += winners;
    }
    assert_eq!(won, 25);
    let s = handles[0].schedule("s").await.unwrap().unwrap();
    assert_eq!(s.last_tick_ms, Some(25_000));
}

/// What only the PostgreSQL store has: its schema and its migrations, its errors, and damaged rows.
#[cfg(feature = "postgres")]
mod postgres_only {
    use super::*;
    use agentic_store::{PG_SCHEMA_VERSION, PgStore};

    /// A plain connection to the test database (for looking at or damaging the tables).
    async fn sql(url: &str) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    }

    /// The first column of every row `query` returns, as text.
    async fn texts(client: &tokio_postgres::Client, query: &str) -> Vec<String> {
        client.query(query, &[]).await.unwrap().iter().map(|r| r.get(0)).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn processes_starting_together_migrate_once_and_a_newer_schema_is_refused() {
        let Some(url) = pg::fresh_database("migrations").await else { return };
        let starters: Vec<_> = (0..6)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { PgStore::connect(&url).await })
            })
            .collect();
        for starter in starters {
            starter.await.unwrap().unwrap();
        }
        let client = sql(&url).await;
        let versions: Vec<i32> = client
            .query("SELECT version FROM agentic_schema_version ORDER BY version", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(versions, (1..=PG_SCHEMA_VERSION).collect::<Vec<_>>());
        // The lease columns are there for the next increment.
        let columns = texts(
            &client,
            "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'agentic_runs' \
             ORDER BY ordinal_position",
        )
        .await;
        assert_eq!(
            columns,
            [
                "run_id",
                "record",
                "status",
                "updated_at_ms",
                "lease_owner",
                "lease_expires_at",
                "fencing_token",
                "cancel_requested_at",
                "tenant",
                "spec_hash"
            ]
        );
        // The take-over scan reads the open runs through the partial index of version 5, not the whole table
        // (10 000 ended runs, 3 open ones).
        client
            .batch_execute(
                "INSERT INTO agentic_runs (run_id, record, status, updated_at_ms)
                 SELECT 'ended-' || i, '{}', 'completed', i FROM generate_series(1, 10000) AS i;
                 INSERT INTO agentic_runs (run_id, record, status, updated_at_ms, lease_expires_at) VALUES
                 ('open-1', '{}', 'running', 1, now()), ('open-2', '{}', 'suspended', 1, NULL),
                 ('open-3', '{}', 'running', 1, now() + interval '1 hour');
                 ANALYZE agentic_runs;",
            )
            .await
            .unwrap();
        let plan = texts(
            &client,
            "EXPLAIN SELECT run_id FROM agentic_runs
             WHERE (status = 'running' AND lease_expires_at <= now())
                OR (status = 'suspended' AND (lease_expires_at IS NULL OR lease_expires_at <= now()))",
        )
        .await
        .join("\n");
        assert!(plan.contains("agentic_runs_open") && !plan.contains("Seq Scan"), "the take-over scan's plan: {plan}");
        client.batch_execute("DELETE FROM agentic_runs").await.unwrap();
        // An existing schema is used as it is.
        let store = PgStore::connect(&url).await.unwrap();
        store.put_run(run_record("r", RunStatus::Running, 1)).await.unwrap();
        store.flush().await.unwrap();
        drop(store);
        assert!(PgStore::connect(&url).await.unwrap().run("r").await.unwrap().is_some());

        client
            .execute("INSERT INTO agentic_schema_version (version, writer) VALUES (99, 'future')", &[])
            .await
            .unwrap();
        let err = PgStore::connect(&url).await.unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "open store {url}: schema version 99 is newer than this agentic-store's (reads up to {PG_SCHEMA_VERSION})"
            )),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_bad_url_or_an_unreachable_server_is_an_error_naming_it_without_the_password() {
        let err = PgStore::connect("postgres://u:secret@127.0.0.1:1/db?connect_timeout=5").await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("open store postgres://u:***@127.0.0.1:1/db?connect_timeout=5: "), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(text.to_lowercase().contains("connect"), "{text}");
        let err = PgStore::connect("postgres://h/db?sslmode=bogus").await.unwrap_err();
        assert!(
            err.to_string().contains(
                "open store postgres://h/db?sslmode=bogus: sslmode=bogus is not one of disable, prefer, require, \
                 verify-ca, verify-full"
            ),
            "{err}"
        );
        let err = PgStore::connect("postgres://h/db?channel_binding=bogus").await.unwrap_err();
        assert!(
            err.to_string().contains("open store postgres://h/db?channel_binding=bogus: not a PostgreSQL URL"),
            "{err}"
        );
        let Some(url) = pg::server_url("bad_url") else { return };
        let err = PgStore::connect(&pg::with_dbname(&url, "no_such_database_here")).await.unwrap_err();
        assert!(err.to_string().contains("no_such_database_here"), "{err}");
    }

    #[tokio::test]
    async fn damaged_rows_are_corrupt_records_naming_the_run_and_a_damaged_snapshot_is_rebuilt() {
        let Some(url) = pg::fresh_database("damaged").await else { return };
        let store = PgStore::connect(&url).await.unwrap().with_snapshot_interval(10);
        let mut records = fill(&store, "run-7", 20).await;
        store.put_run(run_record("run-7", RunStatus::Running, 1)).await.unwrap();
        store.flush().await.unwrap();
        for seq in 21..=25 {
            records.push(step("run-7", seq));
            store.append(step("run-7", seq)).await.unwrap();
        }
        store.flush().await.unwrap();
        let client = sql(&url).await;
        let snapshot: (i64, i64) = {
            let row = client.query_one("SELECT seq, history_len FROM agentic_snapshots", &[]).await.unwrap();
            (row.get(0), row.get(1))
        };
        assert_eq!(snapshot, (20, 20), "compacted by the flush that wrote step 20");

        // A damaged snapshot is skipped by load and rebuilt by compact.
        client.execute("UPDATE agentic_snapshots SET head = '{\"garbage\": 1}'", &[]).await.unwrap();
        assert_eq!(store.load("run-7").await.unwrap(), RunImage::fold("run-7", &records).unwrap());
        assert_eq!(store.compact("run-7").await.unwrap(), 25);
        assert_eq!(store.load("run-7").await.unwrap(), RunImage::fold("run-7", &records).unwrap());
        let chunks: i64 = client.query_one("SELECT count(*) FROM agentic_snapshot_chunks", &[]).await.unwrap().get(0);
        assert_eq!(chunks, 1, "the rebuilt snapshot's one chunk");

        client.execute("UPDATE agentic_journal SET step = '{\"zz\": 1}' WHERE seq = 24", &[]).await.unwrap();
        client.execute("UPDATE agentic_runs SET record = '{\"run_id\": 5}'", &[]).await.unwrap();
        let err = store.records("run-7").await.unwrap_err();
        let agentic_engine::StoreError::Corrupt { run_id, record, .. } = &err else { panic!("{err}") };
        assert_eq!((run_id.as_str(), record.as_str()), ("run-7", "step 24"));
        // The snapshot at 25 covers step 24: only a fold from the journal reads it.
        assert_eq!(store.load("run-7").await.unwrap().seq, 25);
        client.execute("DELETE FROM agentic_snapshots", &[]).await.unwrap();
        let err = store.load("run-7").await.unwrap_err();
        assert!(err.to_string().starts_with("run `run-7`: record step 24 is corrupt"), "{err}");
        let err = store.run("run-7").await.unwrap_err();
        assert!(matches!(&err, agentic_engine::StoreError::Corrupt { record, .. } if record == "run record"), "{err}");
        assert!(store.runs().await.is_err());
    }

    #[tokio::test]
    async fn a_failed_flush_keeps_its_records_for_the_next_one() {
        let Some(url) = pg::fresh_database("failed_flush").await else { return };
        let store = PgStore::connect(&url).await.unwrap();
        let client = sql(&url).await;
        client.execute("ALTER TABLE agentic_journal RENAME TO agentic_journal_away", &[]).await.unwrap();
        let records = fill(&store, "r", 3).await;
        let err = store.flush().await.unwrap_err();
        assert!(err.to_string().contains(&format!("flush in store {url}: ")), "{err}");
        client.execute("ALTER TABLE agentic_journal_away RENAME TO agentic_journal", &[]).await.unwrap();
        store.flush().await.unwrap();
        drop(store);
        assert_eq!(PgStore::connect(&url).await.unwrap().records("r").await.unwrap(), records);
    }
}
