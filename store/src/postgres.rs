//! The PostgreSQL store: runs in tables of a PostgreSQL database (`docs/store-format.md`, PostgreSQL), through
//! tokio-postgres and a deadpool connection pool, without TLS.
//!
//! Appends and run records are buffered in the handle and written by [`CheckpointStore::flush`] in one
//! statement (one implicit transaction): under `sync` durability that is one committed transaction per step,
//! the step's journal row together with any run record put since the last flush. Concurrent flushes of one
//! handle share one transaction (group commit), as the sled store's share one `fdatasync`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentic_engine::{
    AuditEntry, CheckpointStore, KeyRecord, Lease, RunImage, RunRecord, RunUpdate, ScheduleChange, ScheduleRecord,
    StepRecord, StoreError, StoreRef,
};
use bytes::BytesMut;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Error as PgError, NoTls, Row};

use crate::format;
use crate::pg_url::redact_url;
use crate::sled_store::DEFAULT_SNAPSHOT_INTERVAL;

/// The version of the PostgreSQL schema this crate writes (the highest row of `agentic_schema_version`).
///
/// [`PgStore::connect`] applies the migrations up to it to an older schema (an empty database gets them all)
/// and refuses a database whose schema is newer. Version 1: `agentic_runs` (with the lease columns
/// `lease_owner`, `lease_expires_at`, `fencing_token`, unused until leases), `agentic_journal`,
/// `agentic_snapshots`, `agentic_snapshot_chunks`. Version 2: the spec archive `agentic_specs` and
/// `agentic_runs.cancel_requested_at` (SERVER.md §4, §5). Version 3: the schedules, `agentic_schedules`
/// (SERVER.md §6). Version 4: the model-call limiter every server shares (SPEC.md §3 `limits`),
/// `agentic_capacity` and `agentic_capacity_slots`. Version 5: the partial index `agentic_runs_open` on the
/// runs still `running` or `suspended`, which every server's take-over scan reads (without it the scan reads
/// every run ever stored, each period). Version 6: the API keys `agentic_keys` and the audit trail
/// `agentic_audit` (SERVER.md §8). Version 7: tenants enforced by the database (SERVER.md §8): each table
/// with run data gets row-level security (`FORCE`d, so the tables' owner is held to it too) with the policy
/// `agentic_tenant`, which lets a connection see the rows of the scope in its setting `agentic.tenant`: `*`
/// (every row: the processes that execute runs), or `tenant:<name>` (that tenant's runs, their journals,
/// snapshots and specs, schedules, keys and audit entries); a connection without the setting sees nothing.
/// `agentic_runs.tenant` and `.spec_hash`, `agentic_schedules.tenant` and `agentic_keys.tenant` are generated
/// from their records.
pub const PG_SCHEMA_VERSION: i32 = 7;

/// The migrations, in order: `(version, SQL)`. Each runs once, in the transaction that records its version.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE agentic_runs (
         run_id text PRIMARY KEY,
         record json NOT NULL,
         status text NOT NULL,
         updated_at_ms bigint NOT NULL,
         lease_owner text,
         lease_expires_at timestamptz,
         fencing_token bigint NOT NULL DEFAULT 0
     );
     CREATE INDEX agentic_runs_updated ON agentic_runs (updated_at_ms DESC, run_id);
     CREATE TABLE agentic_journal (
         run_id text NOT NULL,
         seq bigint NOT NULL,
         step json NOT NULL,
         PRIMARY KEY (run_id, seq)
     );
     CREATE TABLE agentic_snapshots (
         run_id text PRIMARY KEY,
         seq bigint NOT NULL,
         history_len bigint NOT NULL,
         head json NOT NULL
     );
     CREATE TABLE agentic_snapshot_chunks (
         run_id text NOT NULL,
         seq bigint NOT NULL,
         chunk json NOT NULL,
         PRIMARY KEY (run_id, seq)
     );",
    ),
    (
        2,
        "CREATE TABLE agentic_specs (
         hash text PRIMARY KEY,
         text text NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now()
     );
     ALTER TABLE agentic_runs ADD COLUMN cancel_requested_at timestamptz;",
    ),
    (
        3,
        "CREATE TABLE agentic_schedules (
         id text PRIMARY KEY,
         record json NOT NULL,
         updated_at timestamptz NOT NULL DEFAULT now()
     );",
    ),
    (
        4,
        "CREATE TABLE agentic_capacity (
         key text PRIMARY KEY,
         next_start_ms bigint NOT NULL DEFAULT 0,
         tokens_paid_ms bigint NOT NULL DEFAULT 0,
         backed_off_ms bigint NOT NULL DEFAULT 0
     );
     CREATE TABLE agentic_capacity_slots (
         key text NOT NULL,
         slot integer NOT NULL,
         holder text,
         expires_ms bigint NOT NULL DEFAULT 0,
         PRIMARY KEY (key, slot)
     );",
    ),
    (
        5,
        "CREATE INDEX agentic_runs_open ON agentic_runs (status, lease_expires_at)
         WHERE status IN ('running', 'suspended');",
    ),
    (
        6,
        "CREATE TABLE agentic_keys (
         id text PRIMARY KEY,
         record json NOT NULL
     );
     CREATE TABLE agentic_audit (
         id bigserial PRIMARY KEY,
         tenant text,
         record json NOT NULL
     );",
    ),
    (
        7,
        "ALTER TABLE agentic_runs ADD COLUMN tenant text GENERATED ALWAYS AS (record->>'tenant') STORED;
     ALTER TABLE agentic_runs ADD COLUMN spec_hash text GENERATED ALWAYS AS (record->>'spec_hash') STORED;
     CREATE INDEX agentic_runs_spec ON agentic_runs (spec_hash);
     ALTER TABLE agentic_schedules ADD COLUMN tenant text GENERATED ALWAYS AS (record->>'tenant') STORED;
     ALTER TABLE agentic_keys ADD COLUMN tenant text GENERATED ALWAYS AS (record->>'tenant') STORED;
     CREATE FUNCTION agentic_scope() RETURNS text LANGUAGE sql STABLE
         AS $$ SELECT coalesce(current_setting('agentic.tenant', true), '') $$;
     CREATE FUNCTION agentic_sees(row_tenant text) RETURNS boolean LANGUAGE sql STABLE
         AS $$ SELECT agentic_scope() = '*' OR agentic_scope() = 'tenant:' || row_tenant $$;
     ALTER TABLE agentic_runs ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_runs FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_runs USING (agentic_sees(tenant));
     ALTER TABLE agentic_journal ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_journal FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_journal USING (agentic_scope() = '*'
         OR EXISTS (SELECT 1 FROM agentic_runs r WHERE r.run_id = agentic_journal.run_id));
     ALTER TABLE agentic_snapshots ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_snapshots FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_snapshots USING (agentic_scope() = '*'
         OR EXISTS (SELECT 1 FROM agentic_runs r WHERE r.run_id = agentic_snapshots.run_id));
     ALTER TABLE agentic_snapshot_chunks ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_snapshot_chunks FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_snapshot_chunks USING (agentic_scope() = '*'
         OR EXISTS (SELECT 1 FROM agentic_runs r WHERE r.run_id = agentic_snapshot_chunks.run_id));
     ALTER TABLE agentic_specs ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_specs FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_specs USING (agentic_scope() = '*'
         OR EXISTS (SELECT 1 FROM agentic_runs r WHERE r.spec_hash = agentic_specs.hash));
     ALTER TABLE agentic_schedules ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_schedules FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_schedules USING (agentic_sees(tenant));
     ALTER TABLE agentic_keys ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_keys FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_keys USING (agentic_sees(tenant));
     ALTER TABLE agentic_audit ENABLE ROW LEVEL SECURITY;
     ALTER TABLE agentic_audit FORCE ROW LEVEL SECURITY;
     CREATE POLICY agentic_tenant ON agentic_audit USING (agentic_sees(tenant));",
    ),
];

/// The first key of the transaction-level advisory locks that serialise the changes of one schedule
/// (`pg_advisory_xact_lock(SCHEDULE_LOCK, hashtext(id))`; a creation has no row to lock): the bytes of
/// `agsc`. Two-key advisory locks never collide with the one-key migration lock.
const SCHEDULE_LOCK: i32 = 0x6167_7363;

/// The key of the transaction-level advisory lock that serialises schema migrations across processes
/// (`pg_advisory_xact_lock`): the bytes of `agentic` and a zero, as a big-endian `i64`.
const MIGRATION_LOCK: i64 = 0x6167_656e_7469_6300;

/// Connections the pool opens at most per store handle.
const POOL_SIZE: usize = 8;

/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a lease lasts from its last renewal unless [`PgStore::with_lease`] says otherwise (SERVER.md §4:
/// `--lease-ms` defaults to 10 000).
pub const DEFAULT_LEASE_TIME: Duration = Duration::from_secs(10);

/// An owner id for this process: `pid-<pid>-<16 hex digits>` (the digits from the standard library's
/// random hasher keys and the clock), different for every process and every call.
fn new_owner_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    format!("pid-{}-{:016x}", std::process::id(), h.finish())
}

/// A checkpoint store in a PostgreSQL database (tables and transactions: `docs/store-format.md`).
///
/// - [`CheckpointStore::append`] and [`CheckpointStore::put_run`] buffer the record in the handle;
///   [`CheckpointStore::flush`] writes everything buffered in one statement, i.e. one transaction, and returns
///   once it committed (durable as the server's `synchronous_commit` makes commits: with the default `on`, in
///   the server's write-ahead log on disk). A step already journaled (a duplicate `(run_id, seq)`) is
///   refused: at `append` when it is still buffered, else by the flush that writes it (the rest of that
///   transaction commits).
/// - Reads write what is buffered first, so a handle reads its own appends; they see what other processes
///   committed. Records still buffered when the last handle is dropped are lost (a drop cannot wait for the
///   database): flush before (the engine flushes before a run returns or suspends).
/// - Every [`PgStore::snapshot_interval`] steps of a run, the flush that writes the step folds the previous
///   snapshot and the journal rows after it into a new snapshot (`agentic_snapshots` and one row of
///   `agentic_snapshot_chunks`); [`CheckpointStore::load`] = latest snapshot + the rows after it.
/// - Cheap to clone: clones share the buffer and the connection pool (up to 8 connections), whose connections
///   run on the tokio runtime that opened them: use a store on the runtime it was connected on.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
    snapshot_interval: u64,
}

struct Inner {
    pool: Pool,
    /// The connection settings and TLS (for the listening connection, which is not the pool's).
    dial: crate::pg_listen::Dial,
    /// The URL without its password, for messages.
    shown: String,
    /// This handle's lease owner id.
    owner: String,
    /// How long a lease lasts from its last renewal.
    lease_time: Duration,
    /// The leases this handle holds (or held, when lost): run id → fencing token.
    leases: Mutex<HashMap<String, u64>>,
    /// Runs whose lease this handle lost, with the error its writes of them get.
    lost: Mutex<HashMap<String, StoreError>>,
    /// What `append` and `put_run` buffered since the last flush.
    pending: Mutex<Pending>,
    /// Held by the flush writing; the number of buffered writes (`Pending::pushed`) flushed so far.
    flushed: tokio::sync::Mutex<u64>,
    /// The spec hashes this handle stored: the archive is content-addressed and never changes, so a spec is
    /// written once per handle, not once per run.
    specs_put: Mutex<std::collections::HashSet<String>>,
    /// The read handles of one tenant each ([`PgStore::for_tenant`]), shared by the handles of one connect.
    tenants: Arc<Mutex<HashMap<String, PgStore>>>,
}

/// The connection option that puts a connection in the system scope, which sees every tenant's rows
/// (migration 7): the processes that execute runs work in it.
const SYSTEM_SCOPE: &str = "-c agentic.tenant=*";

/// Connections each tenant's read pool opens at most ([`PgStore::for_tenant`]).
const TENANT_POOL_SIZE: usize = 2;

/// Records buffered for the next flush, encoded (the sled store's values: a version byte, then the JSON).
#[derive(Default)]
struct Pending {
    journal: BTreeMap<(String, u64), Vec<u8>>,
    /// The latest run record of each run.
    runs: BTreeMap<String, PendingRun>,
    /// Records buffered since the store was opened (flushes compare it with what they wrote).
    pushed: u64,
}

struct PendingRun {
    value: Vec<u8>,
    status: String,
    updated_at_ms: i64,
}

impl Inner {
    fn new(pool: Pool, dial: crate::pg_listen::Dial, shown: String, owner: String, lease_time: Duration) -> Inner {
        Inner {
            tenants: Arc::default(),
            pool,
            dial,
            shown,
            owner,
            lease_time,
            leases: Mutex::default(),
            lost: Mutex::default(),
            pending: Mutex::new(Pending::default()),
            flushed: tokio::sync::Mutex::new(0),
            specs_put: Mutex::default(),
        }
    }
}

/// Statements prepared once per pooled connection (deadpool's statement cache): a call is one round trip
/// instead of two (prepare, then execute), and the server parses and plans the text once per connection.
trait CachedStatements {
    async fn query_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, PgError>;
    async fn query_opt_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, PgError>;
    async fn query_one_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, PgError>;
    async fn execute_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, PgError>;
}

impl CachedStatements for deadpool_postgres::Object {
    async fn query_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, PgError> {
        let statement = self.prepare_cached(sql).await?;
        self.query(&statement, params).await
    }

    async fn query_opt_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, PgError> {
        let statement = self.prepare_cached(sql).await?;
        self.query_opt(&statement, params).await
    }

    async fn query_one_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, PgError> {
        let statement = self.prepare_cached(sql).await?;
        self.query_one(&statement, params).await
    }

    async fn execute_cached(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, PgError> {
        let statement = self.prepare_cached(sql).await?;
        self.execute(&statement, params).await
    }
}

/// Locks a map that every update changes with one operation (a panic cannot leave it half-updated).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A lease time as PostgreSQL `bigint` milliseconds.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.inner.shown)
            .field("owner", &self.inner.owner)
            .field("snapshot_interval", &self.snapshot_interval)
            .finish_non_exhaustive()
    }
}

/// A JSON value as the text PostgreSQL's `json` type keeps verbatim (a parameter of type `json` or `json[]`).
#[derive(Debug)]
struct JsonText<'a>(&'a [u8]);

impl ToSql for JsonText<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON
    }

    to_sql_checked!();
}

/// The message of a PostgreSQL error: the server's message (and detail) for a server error, else the client's
/// error with its cause.
fn pg_message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{} ({})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(": {detail}"));
        }
        return text;
    }
    match std::error::Error::source(e) {
        Some(cause) if !e.to_string().contains(&cause.to_string()) => format!("{e}: {cause}"),
        _ => e.to_string(),
    }
}

fn pool_message(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_message(e),
        other => other.to_string(),
    }
}

/// `what` (the operation and the store) failed with the database's error `e`, typed by its kind (see
/// [`PgStore::pg_error`]).
fn pg_store_error(what: String, e: tokio_postgres::Error) -> StoreError {
    let message = format!("{what}: {}", pg_message(&e));
    if unreachable(&e) {
        StoreError::unavailable("postgres", message, Some(std::sync::Arc::new(e)))
    } else {
        StoreError::backend_caused(message, e)
    }
}

/// `what` (the operation and the store) could not get a pooled connection, typed by its kind (see
/// [`PgStore::pool_error`]); the source is the driver's error when a new connection failed, else the pool's.
fn pool_store_error(what: String, e: deadpool_postgres::PoolError) -> StoreError {
    // A connection that could not be made is the driver's error: the pool's wrapper adds nothing.
    let e = match e {
        deadpool_postgres::PoolError::Backend(e) => return pg_store_error(what, e),
        e => e,
    };
    let message = format!("{what}: {}", pool_message(&e));
    if pool_unreachable(&e) {
        StoreError::unavailable("postgres", message, Some(std::sync::Arc::new(e)))
    } else {
        StoreError::backend_caused(message, e)
    }
}

/// A sequence number as PostgreSQL's `bigint`.
fn seq_i64(op: &str, run_id: &str, seq: u64) -> Result<i64, StoreError> {
    i64::try_from(seq)
        .map_err(|_| format::backend(format!("{op}: run `{run_id}` step {seq} is past PostgreSQL's bigint")))
}

/// The JSON of an encoded value (its version byte dropped).
/// Decodes a JSON column read as text; `what` names the record in the error.
fn decode_json_text<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| format::backend(format!("the store's {what} is corrupt: {e}")))
}

fn json_of(value: &[u8]) -> &[u8] {
    value.get(1..).unwrap_or_default()
}

fn check_run_id(op: &str, run_id: &str) -> Result<(), StoreError> {
    if run_id.contains('\0') {
        return Err(format::backend(format!(
            "{op}: run id {run_id:?} contains a NUL byte, which PostgreSQL text cannot hold"
        )));
    }
    Ok(())
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/dbname[?param=value…]`, as
    /// libpq reads it: `host=/dir` for a unix socket, `connect_timeout=S`, `options=-csearch_path%3Dschema` for
    /// tables in another schema than `public`), and brings its schema to [`PG_SCHEMA_VERSION`]: creates the
    /// tables in an empty database, applies the missing migrations to an older schema, under an advisory lock
    /// so that processes starting together apply them once. TLS as libpq's `sslmode` (`disable`, `prefer`,
    /// `require`, `verify-ca`, `verify-full`) and `sslrootcert` ask for it: none without `sslmode`; `require`
    /// encrypts without checking the server's certificate (with `sslrootcert`, as `verify-ca`); `verify-ca`
    /// checks it was signed by `sslrootcert`, `verify-full` also that it names the URL's host. Call it on the
    /// tokio runtime that will use the store: the pool's connections run on it.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] naming the URL (its password hidden) when the server cannot be reached (refused,
    /// timed out, starting up or shutting down); [`StoreError::Backend`] naming it when the URL does not parse, the
    /// server refuses the login, a migration fails, or the database's schema is newer than this build (`schema
    /// version N is newer than this agentic-store's (reads up to 1)`), or its `sslmode`/`sslrootcert` cannot be
    /// used (an unknown mode, `verify-*` without a root, a root file that cannot be read). Both keep the
    /// driver's error as source.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        let shown = redact_url(url);
        let tls = crate::pg_tls::pg_tls(url).map_err(|why| format::backend(format!("open store {shown}: {why}")))?;
        let mut config: tokio_postgres::Config = tls.url.parse().map_err(|e: tokio_postgres::Error| {
            pg_store_error(format!("open store {shown}: not a PostgreSQL URL"), e)
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("agentic");
        }
        // This handle executes any tenant's runs: its connections see every row (migration 7's policies).
        let options = match config.get_options() {
            Some(given) => format!("{given} {SYSTEM_SCOPE}"),
            None => SYSTEM_SCOPE.to_string(),
        };
        config.options(&options);
        let recycling = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &tls.connector {
            Some(connector) => Manager::from_config(config.clone(), connector.clone(), recycling),
            None => Manager::from_config(config.clone(), NoTls, recycling),
        };
        let pool = Pool::builder(manager).max_size(POOL_SIZE).build().map_err(|e| {
            StoreError::backend_caused(format!("open store {shown}: cannot build the connection pool: {e}"), e)
        })?;
        let store = PgStore {
            inner: Arc::new(Inner::new(
                pool,
                crate::pg_listen::Dial { config, tls: tls.connector },
                shown.clone(),
                new_owner_id(),
                DEFAULT_LEASE_TIME,
            )),
            snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Brings the schema to [`PG_SCHEMA_VERSION`] in one transaction under the migration advisory lock.
    async fn migrate(&self) -> Result<(), StoreError> {
        let open = format!("open store {}", self.inner.shown);
        let mut client = self.inner.pool.get().await.map_err(|e| pool_store_error(open.clone(), e))?;
        let tx = client.transaction().await.map_err(|e| pg_store_error(open.clone(), e))?;
        let step = |what: &str| {
            let what = format!("{open}: {what}");
            move |e: tokio_postgres::Error| pg_store_error(what, e)
        };
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(step("take the migration lock"))?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS agentic_schema_version (
                 version integer PRIMARY KEY,
                 writer text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(step("create agentic_schema_version"))?;
        let row = tx
            .query_one("SELECT coalesce(max(version), 0) FROM agentic_schema_version", &[])
            .await
            .map_err(step("read the schema version"))?;
        let current: i32 = row.get(0);
        if current > PG_SCHEMA_VERSION {
            return Err(format::backend(format!(
                "{open}: schema version {current} is newer than this agentic-store's (reads up to \
                 {PG_SCHEMA_VERSION}); use a newer agentic"
            )));
        }
        let writer = concat!("agentic-store ", env!("CARGO_PKG_VERSION"));
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            tx.batch_execute(sql).await.map_err(step(&format!("migration {version}")))?;
            tx.execute("INSERT INTO agentic_schema_version (version, writer) VALUES ($1, $2)", &[version, &writer])
                .await
                .map_err(step(&format!("record migration {version}")))?;
        }
        tx.commit().await.map_err(step("commit the migrations"))
    }

    /// This store compacting every `n` steps of a run (0: never; the default is
    /// [`DEFAULT_SNAPSHOT_INTERVAL`]). Applies to this handle and clones made from it.
    #[must_use]
    pub fn with_snapshot_interval(mut self, n: u64) -> Self {
        self.snapshot_interval = n;
        self
    }

    /// A new handle on the same database and connection pool, with lease owner id `owner` and leases lasting
    /// `lease_time` from their last renewal (default: a fresh `pid-…` id per connect, [`DEFAULT_LEASE_TIME`]).
    /// The new handle has its own buffer and holds no lease; each process (each server) uses one owner id,
    /// distinct from every other's: two handles with one id would not fence each other.
    #[must_use]
    pub fn with_lease(&self, owner: impl Into<String>, lease_time: Duration) -> Self {
        let mut inner = Inner::new(
            self.inner.pool.clone(),
            self.inner.dial.clone(),
            self.inner.shown.clone(),
            owner.into(),
            lease_time,
        );
        inner.tenants = self.inner.tenants.clone();
        PgStore { inner: Arc::new(inner), snapshot_interval: self.snapshot_interval }
    }

    /// A handle for reading what tenant `tenant` may see, enforced by the database: its connections (a pool of
    /// their own, at most 2, made once per tenant and shared by the handles of this connect) are in the scope
    /// `tenant:<tenant>`, so the row-level security of migration 7 shows them that tenant's runs, journals,
    /// snapshots, specs, schedules, keys and audit entries and nothing else, whatever the query. `None` for a
    /// name that is not a tenant's (letters, digits, `_`, `-`, `.`; 1 to 128).
    pub fn for_tenant(&self, tenant: &str) -> Option<PgStore> {
        let valid = (1..=128).contains(&tenant.len())
            && tenant.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return None;
        }
        let mut tenants = locked(&self.inner.tenants);
        if let Some(store) = tenants.get(tenant) {
            return Some(store.clone());
        }
        let mut config = self.inner.dial.config.clone();
        let scope = format!("-c agentic.tenant=tenant:{tenant}");
        let options = config.get_options().unwrap_or_default().replace(SYSTEM_SCOPE, &scope);
        config.options(&options);
        let recycling = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &self.inner.dial.tls {
            Some(connector) => Manager::from_config(config.clone(), connector.clone(), recycling),
            None => Manager::from_config(config.clone(), NoTls, recycling),
        };
        let pool = Pool::builder(manager).max_size(TENANT_POOL_SIZE).build().ok()?;
        let dial = crate::pg_listen::Dial { config, tls: self.inner.dial.tls.clone() };
        let store = PgStore {
            inner: Arc::new(Inner::new(pool, dial, self.inner.shown.clone(), new_owner_id(), self.inner.lease_time)),
            snapshot_interval: self.snapshot_interval,
        };
        tenants.insert(tenant.to_string(), store.clone());
        Some(store)
    }

    /// This handle's lease owner id.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// How long this handle's leases last from their last renewal.
    pub fn lease_time(&self) -> Duration {
        self.inner.lease_time
    }

    /// The error a write of `run_id` gets when this handle lost its lease, if it did.
    fn lost(&self, run_id: &str) -> Result<(), StoreError> {
        match locked(&self.inner.lost).get(run_id) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Steps between compactions of a run's snapshot (0: never).
    pub fn snapshot_interval(&self) -> u64 {
        self.snapshot_interval
    }

    /// The database's URL, its password hidden.
    pub fn url(&self) -> &str {
        &self.inner.shown
    }

    /// The store as the engine holds it (a shared handle to the same buffer and pool).
    pub fn store_ref(&self) -> StoreRef {
        Arc::new(self.clone())
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        // Every update of the buffer is one map operation: a panic cannot leave it half-updated.
        self.inner.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `op` failed for a reason said as text (no backend error behind it).
    fn backend(&self, op: &str, e: impl std::fmt::Display) -> StoreError {
        format::backend(format!("{op} in store {}: {e}", self.inner.shown))
    }

    /// `op` failed with the database's error `e`: [`StoreError::Unavailable`] when the database cannot be
    /// reached ([`unreachable`]), else [`StoreError::Backend`]; both keep `e` as their source.
    fn pg_error(&self, op: &str, e: tokio_postgres::Error) -> StoreError {
        pg_store_error(format!("{op} in store {}", self.inner.shown), e)
    }

    /// `op` could not get a connection from the pool: [`StoreError::Unavailable`] when the database cannot be
    /// reached or no connection came in time ([`pool_unreachable`]), else [`StoreError::Backend`]; both keep
    /// `e` as their source.
    fn pool_error(&self, op: &str, e: deadpool_postgres::PoolError) -> StoreError {
        pool_store_error(format!("{op} in store {}", self.inner.shown), e)
    }

    async fn client(&self, op: &str) -> Result<deadpool_postgres::Object, StoreError> {
        self.inner.pool.get().await.map_err(|e| self.pool_error(op, e))
    }

    /// Folds the run's latest snapshot and the journal rows after it into a new snapshot now, and returns the
    /// step it reaches (0 for a run without steps). A flush does this when it writes a step whose number is a
    /// multiple of [`PgStore::snapshot_interval`].
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when a journal row after the snapshot does not decode, [`StoreError::Backend`]
    /// when the database fails.
    pub async fn compact(&self, run_id: &str) -> Result<u64, StoreError> {
        check_run_id("compact", run_id)?;
        self.write_pending().await?;
        let mut client = self.client("compact").await?;
        let head = self.read_head(&client, run_id).await?;
        let last = self.last_seq(&client, run_id).await?;
        let (mut image, history_before, rebuilt) = match head {
            Some(Ok((image, len))) if image.seq <= last => (image, len, false),
            // No snapshot, an unreadable one, or one ahead of the journal: rebuild from the start.
            Some(_) => (RunImage::new(run_id), 0, true),
            None => (RunImage::new(run_id), 0, false),
        };
        let start = image.seq;
        for record in self.journal_from(&client, run_id, start + 1).await? {
            image.apply(&record)?;
        }
        let fail = |e: tokio_postgres::Error| self.pg_error("compact: write the snapshot", e);
        let tx = client.transaction().await.map_err(fail)?;
        if rebuilt {
            tx.execute("DELETE FROM agentic_snapshots WHERE run_id = $1", &[&run_id]).await.map_err(fail)?;
            tx.execute("DELETE FROM agentic_snapshot_chunks WHERE run_id = $1", &[&run_id]).await.map_err(fail)?;
        }
        if image.seq != start {
            let seq = seq_i64("compact", run_id, image.seq)?;
            let history_len = history_before + image.history.len() as u64;
            let chunk = format::encode_chunk(run_id, image.seq, &image.history)?;
            let head = format::encode_snapshot_head(&image, history_len)?;
            // The head's value is the version byte, 8 bytes of sequence number, then the JSON.
            let head_json = head.get(9..).unwrap_or_default();
            tx.execute(
                "INSERT INTO agentic_snapshot_chunks (run_id, seq, chunk) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id, seq) DO UPDATE SET chunk = excluded.chunk",
                &[&run_id, &seq, &JsonText(json_of(&chunk))],
            )
            .await
            .map_err(fail)?;
            tx.execute(
                "INSERT INTO agentic_snapshots (run_id, seq, history_len, head) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (run_id) DO UPDATE
                 SET seq = excluded.seq, history_len = excluded.history_len, head = excluded.head",
                &[&run_id, &seq, &seq_i64("compact", run_id, history_len)?, &JsonText(head_json)],
            )
            .await
            .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)?;
        Ok(image.seq)
    }

    /// The run's snapshot head, if it has one: the image without its history and the history's length, or
    /// the error that it does not decode.
    async fn read_head(
        &self,
        client: &deadpool_postgres::Object,
        run_id: &str,
    ) -> Result<Option<Result<(RunImage, u64), StoreError>>, StoreError> {
        let row = client
            .query_opt_cached("SELECT seq, head::text FROM agentic_snapshots WHERE run_id = $1", &[&run_id])
            .await
            .map_err(|e| self.pg_error("load: read the snapshot", e))?;
        Ok(row.map(|row| {
            let seq: i64 = row.get(0);
            let head: String = row.get(1);
            format::decode_snapshot_head_json(run_id, seq as u64, head.as_bytes())
        }))
    }

    /// The last journaled step of `run_id` (0 when it has none).
    async fn last_seq(&self, client: &deadpool_postgres::Object, run_id: &str) -> Result<u64, StoreError> {
        let row = client
            .query_one_cached("SELECT coalesce(max(seq), 0) FROM agentic_journal WHERE run_id = $1", &[&run_id])
            .await
            .map_err(|e| self.pg_error("read the journal", e))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    /// The journal rows of `run_id` from step `from` on, in step order, decoded.
    async fn journal_from(
        &self,
        client: &deadpool_postgres::Object,
        run_id: &str,
        from: u64,
    ) -> Result<Vec<StepRecord>, StoreError> {
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let rows = client
            .query_cached(
                "SELECT seq, step::text FROM agentic_journal WHERE run_id = $1 AND seq >= $2 ORDER BY seq",
                &[&run_id, &from],
            )
            .await
            .map_err(|e| self.pg_error("read the journal", e))?;
        rows.iter().map(|row| decode_step_row(run_id, row)).collect()
    }

    /// The run's snapshot with its whole history, if it has a readable one.
    async fn snapshot(&self, client: &deadpool_postgres::Object, run_id: &str) -> Result<Option<RunImage>, StoreError> {
        let Some(head) = self.read_head(client, run_id).await? else { return Ok(None) };
        let (mut image, history_len) = head?;
        let rows = client
            .query_cached(
                "SELECT seq, chunk::text FROM agentic_snapshot_chunks WHERE run_id = $1 AND seq <= $2 ORDER BY seq",
                &[&run_id, &seq_i64("load", run_id, image.seq)?],
            )
            .await
            .map_err(|e| self.pg_error("load: read the snapshot history", e))?;
        for row in rows {
            let seq: i64 = row.get(0);
            let chunk: String = row.get(1);
            image.history.extend(format::decode_chunk_json(run_id, seq as u64, chunk.as_bytes())?);
        }
        if image.history.len() as u64 != history_len {
            return Err(StoreError::Corrupt {
                run_id: run_id.to_string(),
                record: format!("snapshot at step {}", image.seq),
                message: format!("history has {} entries, the head says {history_len}", image.history.len()),
            });
        }
        Ok(Some(image))
    }

    /// Writes what is buffered (the flush without its durability promise: every write is a committed
    /// transaction anyway).
    async fn write_pending(&self) -> Result<(), StoreError> {
        self.flush_buffer().await.map(drop)
    }

    /// Writes everything buffered so far in one statement, unless a flush running meanwhile did; then
    /// compacts the runs whose snapshot interval a written step reached.
    async fn flush_buffer(&self) -> Result<Vec<String>, StoreError> {
        let target = self.pending().pushed;
        let mut flushed = self.inner.flushed.lock().await;
        if *flushed >= target {
            return Ok(Vec::new());
        }
        let (mut journal, mut runs, pushed) = {
            let mut pending = self.pending();
            (std::mem::take(&mut pending.journal), std::mem::take(&mut pending.runs), pending.pushed)
        };
        if journal.is_empty() && runs.is_empty() {
            *flushed = pushed;
            return Ok(Vec::new());
        }
        let mut lost_now = Vec::new();
        let mut retry: Option<(std::time::Instant, Duration)> = None;
        let written = loop {
            let result = match self.write(&journal, &runs).await {
                Ok(WriteOutcome::Unreachable(e)) => {
                    // Wait for the database (a restart) rather than fail the runs whose steps these are.
                    let (since, pause) = retry.get_or_insert_with(|| {
                        tracing::warn!(
                            "store {}: {e}; retrying the flush for up to {FLUSH_RETRY_FOR:?}",
                            self.inner.shown
                        );
                        (std::time::Instant::now(), Duration::from_millis(50))
                    });
                    if since.elapsed() >= FLUSH_RETRY_FOR {
                        Err(e)
                    } else {
                        tokio::time::sleep(*pause).await;
                        *pause = (*pause * 2).min(Duration::from_secs(1));
                        continue;
                    }
                }
                Ok(WriteOutcome::Written(written)) => Ok(written),
                Ok(WriteOutcome::Lost(lost)) => {
                    // Nothing was written: drop the runs whose lease is lost (their writes are refused from
                    // now on) and write the others.
                    let mut map = locked(&self.inner.lost);
                    for (run_id, error) in lost {
                        journal.retain(|(r, _), _| *r != run_id);
                        runs.remove(&run_id);
                        tracing::warn!("store {}: {error}", self.inner.shown);
                        map.insert(run_id.clone(), error);
                        lost_now.push(run_id);
                    }
                    drop(map);
                    if journal.is_empty() && runs.is_empty() {
                        *flushed = pushed;
                        return Ok(lost_now);
                    }
                    continue;
                }
                Err(e) => Err(e),
            };
            break result;
        };
        let written = match written {
            Ok(written) => written,
            Err(e) => {
                // Kept for the next flush; what was buffered meanwhile is newer and stays.
                let mut pending = self.pending();
                for (key, value) in journal {
                    pending.journal.entry(key).or_insert(value);
                }
                for (run_id, run) in runs {
                    pending.runs.entry(run_id).or_insert(run);
                }
                return Err(e);
            }
        };
        *flushed = pushed;
        drop(flushed);
        // Rows the statement did not insert: already journaled. The same value is a write repeated after a
        // lost acknowledgement; another one is a second writer of the step, refused.
        let refused = self.refused(&journal, &written).await?;
        if self.snapshot_interval > 0 {
            let mut due: Vec<&str> = journal
                .keys()
                .filter(|(_, seq)| seq.is_multiple_of(self.snapshot_interval))
                .map(|(run_id, _)| run_id.as_str())
                .collect();
            due.dedup();
            for run_id in due {
                // Snapshots are derived: a failed compaction costs the next load a longer fold, not the step.
                if let Err(e) = Box::pin(self.compact(run_id)).await {
                    tracing::warn!("store {}: compaction of run `{run_id}` failed: {e}", self.inner.shown);
                }
            }
        }
        match refused {
            Some((run_id, seq)) => Err(format::backend(format!(
                "append: run `{run_id}` step {seq} is already journaled in store {}",
                self.inner.shown
            ))),
            None => Ok(lost_now),
        }
    }

    /// The first buffered row that was not inserted because another value holds its key.
    async fn refused(
        &self,
        journal: &BTreeMap<(String, u64), Vec<u8>>,
        written: &[(String, u64)],
    ) -> Result<Option<(String, u64)>, StoreError> {
        if written.len() == journal.len() {
            return Ok(None);
        }
        let written: std::collections::BTreeSet<&(String, u64)> = written.iter().collect();
        let client = self.client("flush").await?;
        for (key, value) in journal.iter().filter(|(key, _)| !written.contains(key)) {
            let row = client
                .query_opt_cached(
                    "SELECT step::text FROM agentic_journal WHERE run_id = $1 AND seq = $2",
                    &[&key.0, &seq_i64("flush", &key.0, key.1)?],
                )
                .await
                .map_err(|e| self.pg_error("flush: read a journaled step", e))?;
            if row.map(|r| r.get::<_, String>(0)).as_deref().map(str::as_bytes) != Some(json_of(value)) {
                return Ok(Some(key.clone()));
            }
        }
        Ok(None)
    }

    /// One statement, one transaction: checks the lease of every run written (the fence, below), and when
    /// it holds, inserts the journal rows (skipping keys already journaled) and upserts the run records;
    /// returns the keys of the journal rows inserted. When it does not hold for a run, nothing is written and
    /// the lost runs are returned.
    ///
    /// The fence: the run's row is locked (`FOR SHARE`, so a take-over's `UPDATE` waits for this transaction
    /// or this one reads the take-over's row), and must say `lease_owner` = this handle's owner and
    /// `fencing_token` = the token this handle took, for a run it holds a lease on; for another run, the
    /// row must have no live lease of another owner (a run without a row yet passes).
    async fn write(
        &self,
        journal: &BTreeMap<(String, u64), Vec<u8>>,
        runs: &BTreeMap<String, PendingRun>,
    ) -> Result<WriteOutcome, StoreError> {
        if runs.is_empty()
            && journal.len() == 1
            && let Some(((run_id, seq), value)) = journal.iter().next()
        {
            match self.write_step(run_id, *seq, value).await? {
                // Not inserted: the step is journaled already or the lease is lost; the statement below says
                // which (and inserts nothing either).
                WriteOutcome::Written(written) if written.is_empty() => {}
                outcome => return Ok(outcome),
            }
        }
        let mut run_ids = Vec::with_capacity(journal.len());
        let mut seqs = Vec::with_capacity(journal.len());
        let mut steps = Vec::with_capacity(journal.len());
        for ((run_id, seq), value) in journal {
            run_ids.push(run_id.as_str());
            seqs.push(seq_i64("flush", run_id, *seq)?);
            steps.push(JsonText(json_of(value)));
        }
        let fenced: BTreeSet<&str> = run_ids.iter().copied().chain(runs.keys().map(String::as_str)).collect();
        let fenced: Vec<&str> = fenced.into_iter().collect();
        let ids: Vec<&str> = runs.keys().map(String::as_str).collect();
        // The token held (-1: no lease).
        let (fence_tokens, run_tokens): (Vec<i64>, Vec<i64>) = {
            let leases = locked(&self.inner.leases);
            let held = |run_id: &&str| leases.get(*run_id).map_or(-1, |t| i64::try_from(*t).unwrap_or(i64::MAX));
            (fenced.iter().map(held).collect(), ids.iter().map(held).collect())
        };
        let records: Vec<JsonText<'_>> = runs.values().map(|r| JsonText(json_of(&r.value))).collect();
        let statuses: Vec<&str> = runs.values().map(|r| r.status.as_str()).collect();
        let updated: Vec<i64> = runs.values().map(|r| r.updated_at_ms).collect();
        let owner = self.inner.owner.as_str();
        let ttl = millis(self.inner.lease_time);
        let params: [&(dyn ToSql + Sync); 12] = [
            &run_ids,
            &seqs,
            &steps,
            &ids,
            &records,
            &statuses,
            &updated,
            &fenced,
            &fence_tokens,
            &owner,
            &ttl,
            &run_tokens,
        ];
        // The statement is one transaction: it committed or it did nothing, and writing it again after an
        // unreachable database is harmless (a journal row already there with the same value is accepted).
        let rows = match self.flush_query(WRITE_SQL, &params).await? {
            Ok(rows) => rows,
            Err(unreachable) => return Ok(unreachable),
        };
        let mut written = Vec::new();
        let mut lost = Vec::new();
        for row in &rows {
            let run_id: String = row.get(1);
            if row.get::<_, i32>(0) == 0 {
                written.push((run_id, row.get::<_, i64>(2) as u64));
            } else {
                let holder: Option<String> = row.get(3);
                let held: i64 = row.get(4);
                let error = StoreError::LeaseLost {
                    run_id: run_id.clone(),
                    holder: holder.unwrap_or_default(),
                    token: row.get::<_, i64>(2) as u64,
                    held: held.max(0) as u64,
                };
                lost.push((run_id, error));
            }
        }
        if lost.is_empty() { Ok(WriteOutcome::Written(written)) } else { Ok(WriteOutcome::Lost(lost)) }
    }

    /// One journal row and no run record — a sync step, the common write — in a leaner statement than
    /// [`PgStore::write`]'s (pgbench, one connection, prepared, fsync on: 0.28–0.33 ms against 0.30–0.34 ms;
    /// a bare `INSERT`, 0.23–0.25 ms): the same fence on the run's row, no arrays, no run upsert. Returns the
    /// row's key when it was inserted, nothing when it was not (journaled already, or the lease is lost: the
    /// caller asks the general statement, which tells the two apart).
    async fn write_step(&self, run_id: &str, seq: u64, value: &[u8]) -> Result<WriteOutcome, StoreError> {
        let held = locked(&self.inner.leases).get(run_id).map_or(-1, |t| i64::try_from(*t).unwrap_or(i64::MAX));
        let seq_param = seq_i64("flush", run_id, seq)?;
        let owner = self.inner.owner.as_str();
        let params: [&(dyn ToSql + Sync); 5] = [&run_id, &seq_param, &JsonText(json_of(value)), &held, &owner];
        Ok(match self.flush_query(WRITE_STEP_SQL, &params).await? {
            Ok(rows) if rows.is_empty() => WriteOutcome::Written(Vec::new()),
            Ok(_) => WriteOutcome::Written(vec![(run_id.to_string(), seq)]),
            Err(unreachable) => unreachable,
        })
    }

    /// Runs one of the flush's statements (prepared once per connection). `Ok(Err(..))`: the database could
    /// not be reached ([`WriteOutcome::Unreachable`]).
    async fn flush_query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Result<Vec<Row>, WriteOutcome>, StoreError> {
        let client = match self.inner.pool.get().await {
            Ok(client) => client,
            Err(e) if pool_unreachable(&e) => {
                return Ok(Err(WriteOutcome::Unreachable(self.pool_error("flush", e))));
            }
            Err(e) => return Err(self.pool_error("flush", e)),
        };
        let fail = |e: tokio_postgres::Error| self.pg_error("flush", e);
        let rows = match client.prepare_cached(sql).await {
            Ok(statement) => client.query(&statement, params).await,
            Err(e) => Err(e),
        };
        match rows {
            Ok(rows) => Ok(Ok(rows)),
            Err(e) if unreachable(&e) => Ok(Err(WriteOutcome::Unreachable(fail(e)))),
            Err(e) => Err(fail(e)),
        }
    }

    /// The runs whose lease this handle held and lost, among `run_ids`, with the lease-lost errors.
    async fn read_lost(
        &self,
        client: &deadpool_postgres::Object,
        run_ids: &[String],
        tokens: &HashMap<String, u64>,
    ) -> Result<Vec<(String, StoreError)>, StoreError> {
        let rows = client
            .query_cached(
                "SELECT run_id, lease_owner, fencing_token FROM agentic_runs WHERE run_id = ANY($1)",
                &[&run_ids],
            )
            .await
            .map_err(|e| self.pg_error("renew leases", e))?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let run_id: String = row.get(0);
                let holder: Option<String> = row.get(1);
                let token = row.get::<_, i64>(2) as u64;
                let held = *tokens.get(&run_id)?;
                let same = holder.as_deref() == Some(self.inner.owner.as_str()) && token == held;
                (!same).then(|| {
                    let error = StoreError::LeaseLost {
                        run_id: run_id.clone(),
                        holder: holder.unwrap_or_default(),
                        token,
                        held,
                    };
                    (run_id, error)
                })
            })
            .collect())
    }
}

/// The flush's statement ([`PgStore::write`]): the fence on every run written, the journal rows, the run upserts;
/// one row per journal row inserted (`0`) and per run whose lease is lost (`1`).
const WRITE_SQL: &str = "WITH fence AS (
        SELECT r.run_id, r.lease_owner, r.lease_expires_at, r.fencing_token, f.held
        FROM agentic_runs r JOIN unnest($8::text[], $9::bigint[]) AS f(run_id, held)
             ON r.run_id = f.run_id
        FOR SHARE OF r
    ), lost AS (
        SELECT run_id, lease_owner, fencing_token, held FROM fence
        WHERE NOT CASE WHEN held >= 0
            THEN lease_owner IS NOT DISTINCT FROM $10 AND fencing_token = held
            ELSE lease_owner IS NULL OR lease_owner = $10 OR lease_expires_at <= now() END
    ), journal AS (
        INSERT INTO agentic_journal (run_id, seq, step)
        SELECT * FROM unnest($1::text[], $2::bigint[], $3::json[])
        WHERE NOT EXISTS (SELECT 1 FROM lost)
        ON CONFLICT (run_id, seq) DO NOTHING
        RETURNING run_id, seq
    ), runs AS (
        INSERT INTO agentic_runs
            (run_id, record, status, updated_at_ms, lease_owner, lease_expires_at, fencing_token)
        SELECT u.run_id, u.record, u.status, u.updated,
               CASE WHEN u.held >= 0 THEN $10 END,
               CASE WHEN u.held >= 0 THEN now() + $11::bigint * interval '1 millisecond' END,
               greatest(u.held, 0)
        FROM unnest($4::text[], $5::json[], $6::text[], $7::bigint[], $12::bigint[])
             AS u(run_id, record, status, updated, held)
        WHERE NOT EXISTS (SELECT 1 FROM lost)
        ON CONFLICT (run_id) DO UPDATE
        SET record = excluded.record, status = excluded.status, updated_at_ms = excluded.updated_at_ms
    )
    SELECT 0, run_id, seq, NULL::text, NULL::bigint FROM journal
    UNION ALL SELECT 1, run_id, fencing_token, lease_owner, held FROM lost";

/// A flush of one journal row and no run record ([`PgStore::write_step`]): the same fence, one insert.
const WRITE_STEP_SQL: &str = "WITH fence AS (
        SELECT lease_owner, lease_expires_at, fencing_token FROM agentic_runs WHERE run_id = $1
        FOR SHARE
    )
    INSERT INTO agentic_journal (run_id, seq, step)
    SELECT $1, $2, $3::json
    WHERE NOT EXISTS (
        SELECT 1 FROM fence
        WHERE NOT CASE WHEN $4::bigint >= 0
            THEN lease_owner IS NOT DISTINCT FROM $5 AND fencing_token = $4::bigint
            ELSE lease_owner IS NULL OR lease_owner = $5 OR lease_expires_at <= now() END
    )
    ON CONFLICT (run_id, seq) DO NOTHING
    RETURNING seq";

/// What the fenced write statement did.
enum WriteOutcome {
    /// Everything written: the keys of the journal rows inserted.
    Written(Vec<(String, u64)>),
    /// Nothing written: these runs' leases are lost.
    Lost(Vec<(String, StoreError)>),
    /// Nothing written: the database could not be reached (a restart, a cut connection); worth another try.
    Unreachable(StoreError),
}

/// How long a flush keeps trying while the database cannot be reached (a restart takes well under a second; a
/// lease that runs out meanwhile makes the retry fail with the lease lost, as it should).
const FLUSH_RETRY_FOR: Duration = Duration::from_secs(30);

/// Whether `e` says the connection or the server went away (SQLSTATE class 08, `57P01` to `57P03`: an
/// administrator's shutdown, a crash, a server starting up), rather than the statement being wrong.
fn unreachable(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        // A TLS handshake that failed on the server's certificate fails again: not a database that is away.
        None if tls_refused(e) => false,
        None => e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()),
    }
}

/// Whether `e` is a TLS handshake refused by the certificate check (`sslmode=verify-ca|verify-full`): the
/// driver reports it as an I/O error whose source is rustls's.
fn tls_refused(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        // An `io::Error`'s own `source` skips the error it wraps: look at that one.
        let s = s.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref).map_or(s, |inner| inner as _);
        if let Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented) =
            s.downcast_ref::<rustls::Error>()
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// [`unreachable`] for an error getting a connection from the pool.
fn pool_unreachable(e: &deadpool_postgres::PoolError) -> bool {
    match e {
        deadpool_postgres::PoolError::Backend(e) => unreachable(e),
        deadpool_postgres::PoolError::Timeout(_) | deadpool_postgres::PoolError::Closed => true,
        _ => false,
    }
}

/// Decodes a `(run_id, record::text, cancel_requested_at IS NOT NULL)` row of `agentic_runs`: the cancel
/// request lives in its own column, which the engine's record writes never overwrite.
fn decode_run_row(row: &Row) -> Result<RunRecord, StoreError> {
    let mut record = format::decode_run_json(row.get(0), row.get::<_, String>(1).as_bytes())?;
    record.cancel_requested |= row.get::<_, bool>(2);
    Ok(record)
}

/// The channel names `listen` accepts: PostgreSQL identifiers written as they are.
fn check_channel(channel: &str) -> Result<(), StoreError> {
    let plain = !channel.is_empty()
        && channel.len() < 64
        && channel.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !channel.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        Ok(())
    } else {
        Err(format::backend(format!("listen: channel {channel:?} is not a lowercase identifier")))
    }
}

/// Decodes a `(seq, step::text)` row of `run_id`'s journal.
fn decode_step_row(run_id: &str, row: &Row) -> Result<StepRecord, StoreError> {
    let seq: i64 = row.get(0);
    let step: String = row.get(1);
    format::decode_step_json(run_id, seq as u64, step.as_bytes())
}

impl CheckpointStore for PgStore {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        check_run_id("append", &record.run_id)?;
        self.lost(&record.run_id)?;
        seq_i64("append", &record.run_id, record.seq)?;
        let value = format::encode_step(&record)?;
        let mut pending = self.pending();
        let key = (record.run_id, record.seq);
        if pending.journal.contains_key(&key) {
            return Err(format::backend(format!(
                "append: run `{}` step {} is already journaled in store {}",
                key.0, key.1, self.inner.shown
            )));
        }
        pending.journal.insert(key, value);
        pending.pushed += 1;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let lost = self.flush_buffer().await?;
        match lost.first() {
            Some(run_id) => self.lost(run_id),
            None => Ok(()),
        }
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        check_run_id("put_run", &run.run_id)?;
        self.lost(&run.run_id)?;
        let value = format::encode_run(&run)?;
        let updated_at_ms = i64::try_from(run.updated_at_ms).unwrap_or(i64::MAX);
        let mut pending = self.pending();
        pending.runs.insert(run.run_id, PendingRun { value, status: run.status.to_string(), updated_at_ms });
        pending.pushed += 1;
        Ok(())
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        if check_run_id("run", run_id).is_err() {
            return Ok(None);
        }
        self.write_pending().await?;
        let client = self.client("run").await?;
        let row = client
            .query_opt_cached(
                "SELECT run_id, record::text, cancel_requested_at IS NOT NULL FROM agentic_runs WHERE run_id = $1",
                &[&run_id],
            )
            .await
            .map_err(|e| self.pg_error("run", e))?;
        row.as_ref().map(decode_run_row).transpose()
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.write_pending().await?;
        let client = self.client("runs").await?;
        let rows = client
            .query_cached("SELECT run_id, record::text, cancel_requested_at IS NOT NULL FROM agentic_runs", &[])
            .await
            .map_err(|e| self.pg_error("runs", e))?;
        let mut runs = rows.iter().map(decode_run_row).collect::<Result<Vec<_>, _>>()?;
        // Byte order of the run ids, as the other stores (the database's collation may differ).
        runs.sort_by(|a, b| b.updated_at_ms.cmp(&a.updated_at_ms).then_with(|| a.run_id.cmp(&b.run_id)));
        Ok(runs)
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        if check_run_id("records", run_id).is_err() {
            return Ok(Vec::new());
        }
        self.write_pending().await?;
        let client = self.client("records").await?;
        self.journal_from(&client, run_id, 0).await
    }

    async fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.flush_buffer().await?;
        self.lost(run_id)
    }

    fn shared(&self) -> bool {
        true
    }

    async fn acquire_lease(&self, run_id: &str) -> Result<Option<Lease>, StoreError> {
        check_run_id("acquire a lease", run_id)?;
        self.write_pending().await?;
        let client = self.client("acquire a lease").await?;
        let owner = self.inner.owner.as_str();
        let fail = |e: tokio_postgres::Error| self.pg_error(&format!("acquire the lease of run `{run_id}`"), e);
        // Free (never leased, released or expired) or already ours: take it, with a new fencing token. One
        // statement also says whether the run exists (a run without a row is claimed).
        let row = client
            .query_one_cached(
                "WITH taken AS (
                     UPDATE agentic_runs
                     SET lease_owner = $2, lease_expires_at = now() + $3::bigint * interval '1 millisecond',
                         fencing_token = fencing_token + 1
                     WHERE run_id = $1
                       AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at IS NULL
                            OR lease_expires_at <= now())
                     RETURNING fencing_token
                 )
                 SELECT (SELECT fencing_token FROM taken), EXISTS (SELECT 1 FROM agentic_runs WHERE run_id = $1)",
                &[&run_id, &owner, &millis(self.inner.lease_time)],
            )
            .await
            .map_err(fail)?;
        let token = match (row.get::<_, Option<i64>>(0), row.get::<_, bool>(1)) {
            (Some(token), _) => token as u64,
            // Held by another owner.
            (None, true) => return Ok(None),
            // Not stored yet: claimed; its first record is written with this lease (token 1).
            (None, false) => 1,
        };
        locked(&self.inner.leases).insert(run_id.to_string(), token);
        locked(&self.inner.lost).remove(run_id);
        Ok(Some(Lease { run_id: run_id.to_string(), owner: owner.to_string(), token }))
    }

    async fn renew_leases(&self) -> Result<Vec<String>, StoreError> {
        let held: HashMap<String, u64> = {
            let lost = locked(&self.inner.lost);
            locked(&self.inner.leases)
                .iter()
                .filter(|(r, _)| !lost.contains_key(*r))
                .map(|(r, t)| (r.clone(), *t))
                .collect()
        };
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = held.keys().cloned().collect();
        let tokens: Vec<i64> = ids.iter().map(|r| held.get(r).map_or(0, |t| *t as i64)).collect();
        let client = self.client("renew leases").await?;
        let rows = client
            .query_cached(
                "UPDATE agentic_runs r SET lease_expires_at = now() + $4::bigint * interval '1 millisecond'
                 FROM unnest($1::text[], $2::bigint[]) AS f(run_id, held)
                 WHERE r.run_id = f.run_id AND r.lease_owner = $3 AND r.fencing_token = f.held
                 RETURNING r.run_id",
                &[&ids, &tokens, &self.inner.owner, &millis(self.inner.lease_time)],
            )
            .await
            .map_err(|e| self.pg_error("renew leases", e))?;
        if rows.len() == ids.len() {
            return Ok(Vec::new());
        }
        let renewed: BTreeSet<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
        let missing: Vec<String> = ids.into_iter().filter(|r| !renewed.contains(r)).collect();
        // A claimed run without a row yet is not lost; a row with another owner or token is.
        let lost = self.read_lost(&client, &missing, &held).await?;
        let mut map = locked(&self.inner.lost);
        let mut names = Vec::with_capacity(lost.len());
        for (run_id, error) in lost {
            tracing::warn!("store {}: {error}", self.inner.shown);
            map.insert(run_id.clone(), error);
            names.push(run_id);
        }
        Ok(names)
    }

    async fn release_lease(&self, run_id: &str) -> Result<(), StoreError> {
        match self.flush_buffer().await {
            Ok(_) | Err(StoreError::LeaseLost { .. }) => {}
            Err(e) => return Err(e),
        }
        let token = locked(&self.inner.leases).remove(run_id);
        let lost = locked(&self.inner.lost).remove(run_id).is_some();
        let Some(token) = token.filter(|_| !lost) else { return Ok(()) };
        let client = self.client("release a lease").await?;
        // Expired now (the owner and token stay, for the record): any process may take it.
        client
            .execute_cached(
                "UPDATE agentic_runs SET lease_expires_at = now()
                 WHERE run_id = $1 AND lease_owner = $2 AND fencing_token = $3",
                &[&run_id, &self.inner.owner, &(token as i64)],
            )
            .await
            .map_err(|e| self.pg_error(&format!("release the lease of run `{run_id}`"), e))?;
        Ok(())
    }

    async fn takeover_candidates(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.write_pending().await?;
        let client = self.client("find runs to take over").await?;
        // A `running` run without any lease was started without one (`agentic run`): it may be executing.
        let rows = client
            .query_cached(
                "SELECT run_id, record::text, cancel_requested_at IS NOT NULL FROM agentic_runs
                 WHERE (status = 'running' AND lease_expires_at <= now())
                    OR (status = 'suspended' AND (lease_expires_at IS NULL OR lease_expires_at <= now()))",
                &[],
            )
            .await
            .map_err(|e| self.pg_error("find runs to take over", e))?;
        rows.iter().map(decode_run_row).collect()
    }

    async fn update_run(
        &self,
        run_id: &str,
        change: RunUpdate,
    ) -> Result<Option<Result<RunRecord, String>>, StoreError> {
        if check_run_id("update_run", run_id).is_err() {
            return Ok(None);
        }
        self.write_pending().await?;
        let mut client = self.client("update a run").await?;
        let fail = |e: tokio_postgres::Error| self.pg_error(&format!("update run `{run_id}`"), e);
        let tx = client.transaction().await.map_err(fail)?;
        let Some(row) = tx
            .query_opt(
                "SELECT run_id, record::text, cancel_requested_at IS NOT NULL FROM agentic_runs
                 WHERE run_id = $1 FOR UPDATE",
                &[&run_id],
            )
            .await
            .map_err(fail)?
        else {
            return Ok(None);
        };
        let mut record = decode_run_row(&row)?;
        if let Err(message) = change(&mut record) {
            return Ok(Some(Err(message)));
        }
        let value = format::encode_run(&record)?;
        let updated = i64::try_from(record.updated_at_ms).unwrap_or(i64::MAX);
        tx.execute(
            "UPDATE agentic_runs SET record = $2, status = $3, updated_at_ms = $4 WHERE run_id = $1",
            &[&run_id, &JsonText(json_of(&value)), &record.status.to_string(), &updated],
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        Ok(Some(Ok(record)))
    }

    async fn put_spec(&self, text: &str) -> Result<String, StoreError> {
        let hash = agentic_engine::spec_hash(text);
        if locked(&self.inner.specs_put).contains(&hash) {
            return Ok(hash);
        }
        let client = self.client("put_spec").await?;
        client
            .execute_cached(
                "INSERT INTO agentic_specs (hash, text) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
                &[&hash, &text],
            )
            .await
            .map_err(|e| self.pg_error("put_spec", e))?;
        locked(&self.inner.specs_put).insert(hash.clone());
        Ok(hash)
    }

    async fn spec(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let client = self.client("spec").await?;
        let row = client
            .query_opt_cached("SELECT text FROM agentic_specs WHERE hash = $1", &[&hash])
            .await
            .map_err(|e| self.pg_error("spec", e))?;
        Ok(row.map(|r| r.get::<_, String>(0)))
    }

    /// Sets `cancel_requested_at` and notifies `agentic_cancel` (payload: the run id) in one transaction.
    async fn request_cancel(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        if check_run_id("request_cancel", run_id).is_err() {
            return Ok(None);
        }
        self.write_pending().await?;
        let client = self.client("request a cancel").await?;
        let row = client
            .query_opt_cached(
                "WITH u AS (
                     UPDATE agentic_runs SET cancel_requested_at = coalesce(cancel_requested_at, now())
                     WHERE run_id = $1 RETURNING run_id, record::text
                 )
                 SELECT u.run_id, u.record, true, pg_notify('agentic_cancel', u.run_id)::text FROM u",
                &[&run_id],
            )
            .await
            .map_err(|e| self.pg_error(&format!("request the cancel of run `{run_id}`"), e))?;
        row.as_ref().map(decode_run_row).transpose()
    }

    async fn records_from(&self, run_id: &str, from: u64) -> Result<Vec<StepRecord>, StoreError> {
        if check_run_id("records", run_id).is_err() {
            return Ok(Vec::new());
        }
        self.write_pending().await?;
        let client = self.client("records").await?;
        self.journal_from(&client, run_id, from).await
    }

    async fn notify(&self, channel: &str, payloads: Vec<String>) -> Result<(), StoreError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let client = self.client("notify").await?;
        // One statement: delivered together, in array order, after anything this handle sent before.
        client
            .execute_cached(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n",
                &[&channel, &payloads],
            )
            .await
            .map_err(|e| self.pg_error(&format!("notify `{channel}`"), e))?;
        Ok(())
    }

    async fn listen(&self, channels: Vec<String>) -> Result<Option<agentic_engine::NoticeReceiver>, StoreError> {
        for channel in &channels {
            check_channel(channel)?;
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let first = crate::pg_listen::connect(&self.inner.dial, &channels, tx.clone())
            .await
            .map_err(|e| self.backend("listen", e))?;
        tokio::spawn(crate::pg_listen::keep(self.inner.dial.clone(), channels, tx, first, self.inner.shown.clone()));
        Ok(Some(rx))
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        let client = self.client("schedules").await?;
        let rows = client
            .query_cached("SELECT id, record::text FROM agentic_schedules", &[])
            .await
            .map_err(|e| self.pg_error("schedules", e))?;
        let mut schedules = rows
            .iter()
            .map(|row| format::decode_schedule_json(&row.get::<_, String>(0), row.get::<_, String>(1).as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        // Byte order of the ids, as the other stores (the database's collation may differ).
        schedules.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(schedules)
    }

    async fn schedule(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        if id.contains('\0') {
            return Ok(None);
        }
        let client = self.client("schedule").await?;
        let row = client
            .query_opt_cached("SELECT record::text FROM agentic_schedules WHERE id = $1", &[&id])
            .await
            .map_err(|e| self.pg_error("schedule", e))?;
        row.map(|row| format::decode_schedule_json(id, row.get::<_, String>(0).as_bytes())).transpose()
    }

    /// One transaction under the schedule's advisory lock: read, change, write, commit. Changes of one
    /// schedule by any number of processes are applied one after another, each seeing the one before.
    async fn change_schedule(
        &self,
        id: &str,
        change: ScheduleChange,
    ) -> Result<Result<Option<ScheduleRecord>, String>, StoreError> {
        if id.contains('\0') {
            return Err(format::backend(format!(
                "change schedule: id {id:?} contains a NUL byte, which PostgreSQL text cannot hold"
            )));
        }
        let op = format!("change schedule `{id}`");
        let fail = |e: tokio_postgres::Error| self.pg_error(&op, e);
        let mut client = self.client(&op).await?;
        let tx = client.transaction().await.map_err(fail)?;
        tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&SCHEDULE_LOCK, &id]).await.map_err(fail)?;
        let row =
            tx.query_opt("SELECT record::text FROM agentic_schedules WHERE id = $1", &[&id]).await.map_err(fail)?;
        let current =
            row.map(|row| format::decode_schedule_json(id, row.get::<_, String>(0).as_bytes())).transpose()?;
        // A refusal drops the transaction: rolled back, the lock released.
        let written = match format::apply_schedule_change(id, current, change) {
            Ok(written) => written,
            Err(refused) => return Ok(Err(refused)),
        };
        match &written {
            Some(schedule) => {
                let value = format::encode_schedule(schedule)?;
                tx.execute(
                    "INSERT INTO agentic_schedules (id, record, updated_at) VALUES ($1, $2, now())
                     ON CONFLICT (id) DO UPDATE SET record = excluded.record, updated_at = now()",
                    &[&id, &JsonText(json_of(&value))],
                )
                .await
                .map_err(fail)?;
            }
            None => {
                tx.execute("DELETE FROM agentic_schedules WHERE id = $1", &[&id]).await.map_err(fail)?;
            }
        }
        tx.commit().await.map_err(fail)?;
        Ok(Ok(written))
    }

    /// A handle whose connections are in the tenant's scope ([`PgStore::for_tenant`]).
    fn tenant_view(&self, tenant: &str) -> Option<StoreRef> {
        self.for_tenant(tenant).map(|s| s.store_ref())
    }

    async fn put_key(&self, key: KeyRecord) -> Result<(), StoreError> {
        let op = format!("put key `{}`", key.id);
        let value = format::encode_json(&key, &op)?;
        let client = self.client(&op).await?;
        client
            .execute_cached(
                "INSERT INTO agentic_keys (id, record) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record",
                &[&key.id, &JsonText(json_of(&value))],
            )
            .await
            .map_err(|e| self.pg_error(&op, e))?;
        Ok(())
    }

    async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        let client = self.client("keys").await?;
        let rows = client
            .query_cached("SELECT id, record::text FROM agentic_keys", &[])
            .await
            .map_err(|e| self.pg_error("keys", e))?;
        let mut keys = rows
            .iter()
            .map(|row| decode_json_text::<KeyRecord>(&format!("key `{}`", row.get::<_, String>(0)), row.get(1)))
            .collect::<Result<Vec<_>, _>>()?;
        keys.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then_with(|| a.id.cmp(&b.id)));
        Ok(keys)
    }

    async fn append_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        let op = format!("append to the audit ({})", entry.action);
        let value = format::encode_json(&entry, &op)?;
        let client = self.client(&op).await?;
        client
            .execute_cached(
                "INSERT INTO agentic_audit (tenant, record) VALUES ($1, $2)",
                &[&entry.tenant, &JsonText(json_of(&value))],
            )
            .await
            .map_err(|e| self.pg_error(&op, e))?;
        Ok(())
    }

    async fn audit(&self, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let client = self.client("audit").await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query_cached("SELECT id, record::text FROM agentic_audit ORDER BY id DESC LIMIT $1", &[&limit])
            .await
            .map_err(|e| self.pg_error("audit", e))?;
        rows.iter()
            .map(|row| decode_json_text::<AuditEntry>(&format!("audit entry {}", row.get::<_, i64>(0)), row.get(1)))
            .collect()
    }

    /// One statement per operation on `agentic_capacity` / `agentic_capacity_slots` (a `Hold` that finds
    /// slots never used first adds their rows): atomic with respect to every server on the database
    /// (`store/src/pg_capacity.rs`, `docs/store-format.md`).
    async fn capacity(
        &self,
        op: agentic_engine::limits::CapacityOp,
    ) -> Result<Option<agentic_engine::limits::CapacityAnswer>, StoreError> {
        const OP: &str = "rate limiter";
        let client = self.client(OP).await?;
        crate::pg_capacity::apply(&client, op).await.map_err(|e| match e {
            crate::pg_capacity::CapacityError::Range(message) => self.backend(OP, message),
            crate::pg_capacity::CapacityError::Pg(e) => self.pg_error(OP, e),
        })
    }

    async fn load(&self, run_id: &str) -> Result<RunImage, StoreError> {
        if check_run_id("load", run_id).is_err() {
            return Ok(RunImage::new(run_id));
        }
        self.write_pending().await?;
        let client = self.client("load").await?;
        // The journal is the source of truth: a snapshot that cannot be read is skipped, not fatal.
        let mut image = match self.snapshot(&client, run_id).await {
            Ok(Some(image)) if image.seq <= self.last_seq(&client, run_id).await? => image,
            // Ahead of the journal (rows removed by hand): fold from the journal.
            Ok(Some(_) | None) | Err(StoreError::Corrupt { .. }) => RunImage::new(run_id),
            Err(e) => return Err(e),
        };
        for record in self.journal_from(&client, run_id, image.seq + 1).await? {
            image.apply(&record)?;
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn a_database_that_refuses_connections_is_unavailable_with_the_driver_s_error() {
        // Nothing listens on port 1 of the loopback: the connection is refused at once.
        let Err(e) = PgStore::connect("postgres://agentic@127.0.0.1:1/none").await else {
            panic!("port 1 accepted a PostgreSQL connection")
        };
        assert!(matches!(&e, StoreError::Unavailable { backend: "postgres", .. }), "{e:?}");
        assert_eq!(e.transience(), agentic_engine::Transience::Transient { retry_after: None });
        assert!(
            e.to_string().starts_with("store unavailable: open store postgres://agentic@127.0.0.1:1/none: "),
            "{e}"
        );
        let source = std::error::Error::source(&e).unwrap();
        let driver = source.downcast_ref::<tokio_postgres::Error>().unwrap();
        let io = std::error::Error::source(driver).and_then(|s| s.downcast_ref::<std::io::Error>()).unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        // As an agent error's cause: origin `store`, the same transience, the store error inside.
        let cause = agentic_engine::Cause::from(e.clone());
        assert_eq!(cause.origin(), agentic_engine::CauseOrigin::Store);
        assert_eq!(cause.transience(), e.transience());
        assert!(cause.downcast_ref::<StoreError>().is_some_and(StoreError::is_unavailable));
    }

    #[test]
    fn a_url_that_does_not_parse_is_a_backend_failure_not_an_outage() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let Err(e) = rt.block_on(PgStore::connect("postgres://agentic@127.0.0.1:notaport/db")) else {
            panic!("a URL with a non-numeric port parsed")
        };
        assert!(matches!(&e, StoreError::Backend { source: Some(_), .. }), "{e:?}");
        assert_eq!(e.transience(), agentic_engine::Transience::Unknown);
        let source = std::error::Error::source(&e).unwrap();
        assert!(source.downcast_ref::<tokio_postgres::Error>().is_some(), "{source:?}");
    }
}
