//! The on-disk store: a sled database directory with an append-only journal and compacted snapshots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agentic_engine::{CheckpointStore, RunImage, RunRecord, StepRecord, StoreError, StoreRef};
use sled::{Batch, Db, Tree};

use crate::format::{self, FORMAT_VERSION, META_FORMAT_VERSION, META_WRITER, backend, check_run_id};

/// How many appended records of a run trigger a compaction of its snapshot, unless set with
/// [`SledStore::with_snapshot_interval`].
pub const DEFAULT_SNAPSHOT_INTERVAL: u64 = 256;

/// A checkpoint store in a sled database directory (format: `docs/store-format.md`).
///
/// - [`CheckpointStore::append`] writes one journal record (O(delta): it never reads or rewrites the state)
///   and does not fsync; [`CheckpointStore::flush`] fsyncs everything appended so far.
/// - Every [`SledStore::snapshot_interval`] steps of a run (when the step's sequence number is a multiple of
///   it), `append` also folds the previous snapshot and the records after it into a new snapshot: an amortised
///   O(state / N + delta) per step. Journal records are all kept; the snapshot only accelerates
///   [`CheckpointStore::load`] = latest snapshot + the records after it.
/// - Cheap to clone: clones share the database. sled allows one open database per directory, across
///   processes and within one process: opening a directory this process already has open returns a handle
///   to the same database; another process holding it is an error.
#[derive(Clone)]
pub struct SledStore {
    inner: Arc<Inner>,
    snapshot_interval: u64,
}

struct Inner {
    dir: PathBuf,
    db: Db,
    /// sled's log file (`<dir>/db`), opened to `fdatasync` it on flush.
    log: std::fs::File,
    runs: Tree,
    journal: Tree,
    snapshots: Tree,
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore")
            .field("dir", &self.inner.dir)
            .field("snapshot_interval", &self.snapshot_interval)
            .finish_non_exhaustive()
    }
}

impl SledStore {
    /// Opens the store in directory `dir`, creating the directory and an empty store when absent.
    ///
    /// When this process already has `dir` open, returns a handle sharing that database (with the default
    /// snapshot interval). When another process holds it, waits up to one second for it to be released
    /// (sled releases its lock from a background thread) before failing.
    ///
    /// # Errors
    /// [`StoreError::Backend`] naming the directory when another process has it open ("store <dir> is in use
    /// by another process"), when it is not a sled database or not an agentic store, when its format version
    /// is not [`FORMAT_VERSION`], or on an I/O error.
    pub fn open(dir: impl AsRef<Path>) -> Result<SledStore, StoreError> {
        let dir = dir.as_ref();
        let mut registry = OPEN.lock().map_err(|_| backend("open: the registry of open stores is poisoned".into()))?;
        registry.retain(|_, store| store.strong_count() > 0);
        let key = std::fs::canonicalize(dir).ok();
        if let Some(inner) = key.as_ref().and_then(|k| registry.get(k)).and_then(Weak::upgrade) {
            return Ok(SledStore { inner, snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL });
        }
        let inner = Arc::new(open_inner(dir)?);
        if let Ok(key) = std::fs::canonicalize(dir) {
            registry.insert(key, Arc::downgrade(&inner));
        }
        Ok(SledStore { inner, snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL })
    }

    /// This store compacting every `n` steps of a run (0: never; the default is
    /// [`DEFAULT_SNAPSHOT_INTERVAL`]). Applies to this handle and clones made from it.
    #[must_use]
    pub fn with_snapshot_interval(mut self, n: u64) -> Self {
        self.snapshot_interval = n;
        self
    }

    /// Steps between compactions of a run's snapshot (0: never).
    pub fn snapshot_interval(&self) -> u64 {
        self.snapshot_interval
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The store as the engine holds it (a shared handle to the same database).
    pub fn store_ref(&self) -> StoreRef {
        Arc::new(self.clone())
    }

    /// Same as [`SledStore::store_ref`] (the name the journal API used).
    pub fn journal(&self) -> StoreRef {
        self.store_ref()
    }

    /// Bytes the database occupies on disk, as sled counts them (its log and snapshot files).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on an I/O error.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner.db.size_on_disk().map_err(|e| self.backend("size_on_disk", e))
    }

    /// Folds the run's latest snapshot and the journal records after it into a new snapshot now, and returns
    /// the step it reaches (0 for a run without records). `append` does this every
    /// [`SledStore::snapshot_interval`] steps; the result is durable after the next flush.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when a journal record after the snapshot is corrupt, [`StoreError::Backend`]
    /// when the database fails.
    pub fn compact(&self, run_id: &str) -> Result<u64, StoreError> {
        check_run_id("compact", run_id)?;
        let snapshots = &self.inner.snapshots;
        // From the head alone: the history of the steps before it stays in its chunks, untouched.
        let head = snapshots
            .get(format::snapshot_head_key(run_id))
            .map_err(|e| self.backend("compact: read the snapshot", e))?
            .and_then(|v| format::decode_snapshot_head(run_id, &v).ok());
        let mut batch = Batch::default();
        let (mut image, history_before) = match head {
            Some(head) => head,
            None => {
                // No snapshot, or an unreadable one: rebuild from the start of the journal.
                for key in snapshots.scan_prefix(format::snapshot_chunk_prefix(run_id)).keys() {
                    batch.remove(key.map_err(|e| self.backend("compact: list the snapshot", e))?);
                }
                (RunImage::new(run_id), 0)
            }
        };
        let start = image.seq;
        for record in self.journal_from(run_id, start + 1) {
            image.apply(&record?)?;
        }
        if image.seq == start {
            return Ok(start);
        }
        let history_len = history_before + image.history.len() as u64;
        batch.insert(
            format::snapshot_chunk_key(run_id, image.seq),
            format::encode_chunk(run_id, image.seq, &image.history)?,
        );
        batch.insert(format::snapshot_head_key(run_id), format::encode_snapshot_head(&image, history_len)?);
        snapshots.apply_batch(batch).map_err(|e| self.backend("compact: write the snapshot", e))?;
        Ok(image.seq)
    }

    /// The run folded from its latest readable snapshot (the whole history included), if it has one.
    fn snapshot(&self, run_id: &str) -> Result<Option<RunImage>, StoreError> {
        let snapshots = &self.inner.snapshots;
        let Some(value) =
            snapshots.get(format::snapshot_head_key(run_id)).map_err(|e| self.backend("load: read the snapshot", e))?
        else {
            return Ok(None);
        };
        let (mut image, history_len) = format::decode_snapshot_head(run_id, &value)?;
        let prefix = format::snapshot_chunk_prefix(run_id);
        for entry in snapshots.scan_prefix(&prefix) {
            let (key, value) = entry.map_err(|e| self.backend("load: read the snapshot history", e))?;
            let seq = format::snapshot_chunk_seq(run_id, &key)?;
            if seq <= image.seq {
                image.history.extend(format::decode_chunk(run_id, seq, &value)?);
            }
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

    /// The journal records of `run_id` from step `from` on, decoded lazily.
    fn journal_from(&self, run_id: &str, from: u64) -> impl Iterator<Item = Result<StepRecord, StoreError>> + '_ {
        let run_id = run_id.to_string();
        let range =
            self.inner.journal.range(format::journal_key(&run_id, from)..=format::journal_key(&run_id, u64::MAX));
        range.map(move |entry| {
            let (key, value) = entry.map_err(|e| self.backend("read the journal", e))?;
            let seq = format::journal_seq(&run_id, &key)?;
            format::decode_step(&run_id, seq, &value)
        })
    }

    fn backend(&self, op: &str, e: impl std::fmt::Display) -> StoreError {
        backend(format!("{op} in store {}: {e}", self.inner.dir.display()))
    }
}

/// Stores open in this process, by canonical directory: sled allows one database per directory.
static OPEN: Mutex<BTreeMap<PathBuf, Weak<Inner>>> = Mutex::new(BTreeMap::new());

/// How long `open` waits for a lock held by a sled database that is closing (sled releases the lock from a
/// background thread after the last handle is dropped) or by a process that is exiting.
const LOCK_WAIT: Duration = Duration::from_millis(1000);

/// Opens the database in `dir` and checks (or writes) the format version.
fn open_inner(dir: &Path) -> Result<Inner, StoreError> {
    let shown = dir.display().to_string();
    let config = sled::Config::new()
        .path(dir)
        // No background fsync: `flush` is the only fsync, so the engine's durability mode decides.
        .flush_every_ms(None)
        // No compression: sled builds a zstd context per write, which cost more CPU per step than all the
        // engine's work; a 1000-step run takes under 1 MiB uncompressed (see the format doc).
        .use_compression(false);
    let deadline = Instant::now() + LOCK_WAIT;
    let db = loop {
        match config.open() {
            Ok(db) => break db,
            Err(sled::Error::Io(io)) if is_lock_error(&io) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(open_error(&shown, e)),
        }
    };
    let op = |what: &str, e: sled::Error| backend(format!("open store {shown}: {what}: {e}"));
    let meta = db.open_tree("meta").map_err(|e| op("open tree `meta`", e))?;
    match meta.get(META_FORMAT_VERSION).map_err(|e| op("read the format version", e))? {
        Some(v) => {
            let version = <[u8; 4]>::try_from(v.as_ref()).map(u32::from_be_bytes).map_err(|_| {
                backend(format!("open store {shown}: the format version is corrupt ({:02x?})", v.as_ref()))
            })?;
            if version != FORMAT_VERSION {
                return Err(backend(format!(
                    "open store {shown}: format version {version} is not supported (this agentic-store reads \
                     version {FORMAT_VERSION})"
                )));
            }
        }
        None => {
            let foreign = db.iter().next().is_some()
                || db.tree_names().iter().any(|n| n.as_ref() != b"__sled__default" && n.as_ref() != b"meta");
            if foreign {
                return Err(backend(format!(
                    "open store {shown}: a sled database but not an agentic store (no format version)"
                )));
            }
            meta.insert(META_FORMAT_VERSION, &FORMAT_VERSION.to_be_bytes())
                .and_then(|_| meta.insert(META_WRITER, concat!("agentic-store ", env!("CARGO_PKG_VERSION"))))
                .and_then(|_| db.flush())
                .map_err(|e| op("write the format version", e))?;
        }
    }
    let tree = |name: &str| db.open_tree(name).map_err(|e| op(&format!("open tree `{name}`"), e));
    let (runs, journal, snapshots) = (tree("runs")?, tree("journal")?, tree("snapshots")?);
    let log = std::fs::File::open(dir.join("db"))
        .map_err(|e| backend(format!("open store {shown}: open the log file for fdatasync: {e}")))?;
    Ok(Inner { dir: dir.to_path_buf(), db, log, runs, journal, snapshots })
}

fn is_lock_error(e: &std::io::Error) -> bool {
    e.to_string().contains("could not acquire lock")
}

/// Explains why sled could not open `dir`.
fn open_error(dir: &str, e: sled::Error) -> StoreError {
    match e {
        sled::Error::Io(io) if is_lock_error(&io) => backend(format!("store {dir} is in use by another process")),
        sled::Error::Io(io) => backend(format!("open store {dir}: {io}")),
        sled::Error::Corruption { .. } => {
            backend(format!("open store {dir}: not a sled database, or a damaged one ({e})"))
        }
        sled::Error::Unsupported(_) => {
            backend(format!("open store {dir}: a sled database with settings this store does not use ({e})"))
        }
        other => backend(format!("open store {dir}: {other}")),
    }
}

impl CheckpointStore for SledStore {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        check_run_id("append", &record.run_id)?;
        let key = format::journal_key(&record.run_id, record.seq);
        let value = format::encode_step(&record)?;
        // Insert only if absent: the journal is append-only.
        let swapped = self
            .inner
            .journal
            .compare_and_swap(key, None as Option<&[u8]>, Some(value))
            .map_err(|e| self.backend("append", e))?;
        if swapped.is_err() {
            return Err(backend(format!(
                "append: run `{}` step {} is already journaled in store {}",
                record.run_id,
                record.seq,
                self.inner.dir.display()
            )));
        }
        if self.snapshot_interval > 0 && record.seq.is_multiple_of(self.snapshot_interval) {
            self.compact(&record.run_id)?;
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        // sled's flush writes its log with `sync_file_range`, which does not reach stable storage (nor flush
        // the device cache): `fdatasync` the log file so a flushed step survives a power loss too. Both on one
        // blocking thread: one hand-off per step instead of two (sled's async flush runs on its own pool).
        let inner = self.inner.clone();
        let synced = tokio::task::spawn_blocking(move || {
            inner.db.flush().map_err(|e| ("flush", e.to_string()))?;
            inner.log.sync_data().map_err(|e| ("fdatasync the log", e.to_string()))
        })
        .await
        .map_err(|e| self.backend("flush", e))?;
        synced.map_err(|(what, e)| self.backend(what, e))
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        check_run_id("put_run", &run.run_id)?;
        let value = format::encode_run(&run)?;
        self.inner.runs.insert(run.run_id.as_bytes(), value).map_err(|e| self.backend("put_run", e))?;
        Ok(())
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let value = self.inner.runs.get(run_id.as_bytes()).map_err(|e| self.backend("run", e))?;
        value.map(|v| format::decode_run(run_id, &v)).transpose()
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut runs = Vec::new();
        for entry in self.inner.runs.iter() {
            let (key, value) = entry.map_err(|e| self.backend("runs", e))?;
            let run_id = String::from_utf8_lossy(&key);
            runs.push(format::decode_run(&run_id, &value)?);
        }
        runs.sort_by(|a, b| b.updated_at_ms.cmp(&a.updated_at_ms).then_with(|| a.run_id.cmp(&b.run_id)));
        Ok(runs)
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        if check_run_id("records", run_id).is_err() {
            return Ok(Vec::new());
        }
        self.journal_from(run_id, 0).collect()
    }

    async fn load(&self, run_id: &str) -> Result<RunImage, StoreError> {
        if check_run_id("load", run_id).is_err() {
            return Ok(RunImage::new(run_id));
        }
        // The journal is the source of truth: a snapshot that cannot be read is skipped, not fatal.
        let mut image = match self.snapshot(run_id) {
            Ok(Some(image)) => image,
            Ok(None) | Err(StoreError::Corrupt { .. }) => RunImage::new(run_id),
            Err(e) => return Err(e),
        };
        for record in self.journal_from(run_id, image.seq + 1) {
            image.apply(&record?)?;
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::format::tests::{run_record, step};

    /// The database of a store, opened with the store's sled settings but without the store.
    fn raw_db(dir: &Path) -> Db {
        sled::Config::new().path(dir).flush_every_ms(None).use_compression(false).open().unwrap()
    }

    async fn fill(store: &SledStore, run_id: &str, steps: u64) -> Vec<StepRecord> {
        let mut records = Vec::new();
        for seq in 1..=steps {
            let record = step(run_id, seq);
            store.append(record.clone()).await.unwrap();
            records.push(record);
        }
        records
    }

    #[tokio::test]
    async fn run_records_and_journal_round_trip_and_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        assert!(store.records("nope").await.unwrap().is_empty());
        assert_eq!(store.run("nope").await.unwrap(), None);
        assert_eq!(store.load("nope").await.unwrap(), RunImage::new("nope"));
        assert!(store.runs().await.unwrap().is_empty());

        store.put_run(run_record("a", 10)).await.unwrap();
        store.put_run(run_record("b", 30)).await.unwrap();
        store.put_run(run_record("ab", 20)).await.unwrap();
        let a = fill(&store, "a", 40).await;
        let ab = fill(&store, "ab", 3).await;
        store.flush().await.unwrap();
        // Visible before the flush too, through a clone.
        assert_eq!(store.clone().records("a").await.unwrap(), a);
        drop(store);

        let store = SledStore::open(tmp.path()).unwrap();
        let ids: Vec<String> = store.runs().await.unwrap().into_iter().map(|r| r.run_id).collect();
        assert_eq!(ids, ["b", "ab", "a"], "most recently updated first");
        assert_eq!(store.run("a").await.unwrap(), Some(run_record("a", 10)));
        assert_eq!(store.records("a").await.unwrap(), a, "run `a` does not see run `ab`'s records");
        assert_eq!(store.records("ab").await.unwrap(), ab);
        assert_eq!(store.load("a").await.unwrap(), RunImage::fold("a", &a).unwrap());
        let mut updated = run_record("a", 50);
        updated.status = agentic_engine::RunStatus::Completed;
        store.put_run(updated.clone()).await.unwrap();
        assert_eq!(store.run("a").await.unwrap(), Some(updated));
        assert_eq!(store.runs().await.unwrap()[0].run_id, "a");
    }

    #[tokio::test]
    async fn the_journal_is_append_only_and_run_ids_cannot_hold_nul() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        store.append(step("r", 1)).await.unwrap();
        let err = store.append(step("r", 1)).await.unwrap_err();
        assert!(err.to_string().contains("run `r` step 1 is already journaled"), "{err}");
        let err = store.append(step("a\0b", 1)).await.unwrap_err();
        assert!(err.to_string().contains("contains a NUL byte"), "{err}");
        assert!(store.records("a\0b").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn compaction_loads_the_same_image_as_a_plain_fold() {
        for n in [0, 1, 7, 100, 256, 1000] {
            let tmp = tempfile::tempdir().unwrap();
            let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(n);
            let mut records = Vec::new();
            for seq in 1..=1000 {
                let record = step("r", seq);
                store.append(record.clone()).await.unwrap();
                records.push(record);
                if seq % 333 == 0 {
                    assert_eq!(
                        store.load("r").await.unwrap(),
                        RunImage::fold("r", &records).unwrap(),
                        "N={n} at {seq}"
                    );
                }
            }
            let head = store.inner.snapshots.get(format::snapshot_head_key("r")).unwrap();
            let snapshot_seq = head.map(|h| format::decode_snapshot_head("r", &h).unwrap().0.seq);
            assert_eq!(snapshot_seq, (n > 0).then(|| 1000 / n * n), "N={n}");
            assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &records).unwrap(), "N={n}");
            assert_eq!(store.records("r").await.unwrap().len(), 1000, "N={n}: every record kept");
            assert_eq!(store.compact("r").unwrap(), 1000);
            assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &records).unwrap(), "N={n} compacted");
        }
    }

    #[tokio::test]
    async fn a_corrupt_snapshot_is_rebuilt_from_the_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(10);
        let records = fill(&store, "r", 25).await;
        store.inner.snapshots.insert(format::snapshot_head_key("r"), b"\x01garbage".as_slice()).unwrap();
        assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &records).unwrap());
        assert_eq!(store.compact("r").unwrap(), 25, "compaction rebuilds it");
        assert_eq!(store.snapshot("r").unwrap().unwrap(), RunImage::fold("r", &records).unwrap());
    }

    #[tokio::test]
    async fn garbage_in_the_journal_is_a_corrupt_record_naming_the_run_and_the_step() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(0);
        fill(&store, "run-7", 9).await;
        store.put_run(run_record("run-7", 1)).await.unwrap();
        store.flush().await.unwrap();
        drop(store);
        {
            // Through sled directly, as a damaged disk or another program would.
            let db = raw_db(tmp.path());
            let journal = db.open_tree("journal").unwrap();
            journal.insert(format::journal_key("run-7", 6), b"\xde\xad\xbe\xef".as_slice()).unwrap();
            db.open_tree("runs").unwrap().insert("run-7", b"\x01{".as_slice()).unwrap();
            db.flush().unwrap();
        }
        let store = SledStore::open(tmp.path()).unwrap_or_else(|e| panic!("{e}"));
        let err = store.records("run-7").await.unwrap_err();
        let StoreError::Corrupt { run_id, record, message } = &err else { panic!("{err}") };
        assert_eq!((run_id.as_str(), record.as_str()), ("run-7", "step 6"));
        assert!(message.contains("format version 222"), "{message}");
        let err = store.load("run-7").await.unwrap_err();
        assert!(err.to_string().starts_with("run `run-7`: record step 6 is corrupt"), "{err}");
        let err = store.compact("run-7").unwrap_err();
        assert!(err.to_string().starts_with("run `run-7`: record step 6 is corrupt"), "{err}");
        let err = store.run("run-7").await.unwrap_err();
        assert!(matches!(&err, StoreError::Corrupt { record, .. } if record == "run record"), "{err}");
        assert!(store.runs().await.is_err());
    }

    #[test]
    fn an_unknown_format_version_or_a_foreign_database_is_refused_at_open() {
        let tmp = tempfile::tempdir().unwrap();
        drop(SledStore::open(tmp.path()).unwrap());
        {
            let db = raw_db(tmp.path());
            db.open_tree("meta").unwrap().insert(META_FORMAT_VERSION, &7u32.to_be_bytes()).unwrap();
            db.flush().unwrap();
        }
        let err = SledStore::open(tmp.path()).unwrap_err();
        assert!(err.to_string().contains("format version 7 is not supported"), "{err}");
        assert!(err.to_string().contains(&tmp.path().display().to_string()), "{err}");

        let foreign = tempfile::tempdir().unwrap();
        {
            let db = raw_db(foreign.path());
            db.insert("x", "y").unwrap();
            db.flush().unwrap();
        }
        let err = SledStore::open(foreign.path()).unwrap_err();
        assert!(err.to_string().contains("not an agentic store"), "{err}");

        let garbage = tempfile::tempdir().unwrap();
        std::fs::write(garbage.path().join("conf"), b"\xff\xfe not a config").unwrap();
        std::fs::write(garbage.path().join("db"), b"not a database").unwrap();
        let err = SledStore::open(garbage.path()).unwrap_err();
        assert!(err.to_string().contains(&garbage.path().display().to_string()), "{err}");

        let file = tempfile::NamedTempFile::new().unwrap();
        let err = SledStore::open(file.path()).unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{err}");
    }

    #[tokio::test]
    async fn a_second_open_in_the_same_process_shares_the_database() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(3);
        let again = SledStore::open(tmp.path().join(".")).unwrap();
        assert_eq!(again.snapshot_interval(), DEFAULT_SNAPSHOT_INTERVAL);
        store.append(step("r", 1)).await.unwrap();
        assert_eq!(again.records("r").await.unwrap().len(), 1);
        drop((store, again));
        // Closed and reopened at once: sled releases its lock from a background thread, open waits for it.
        for _ in 0..5 {
            let store = SledStore::open(tmp.path()).unwrap();
            assert_eq!(store.records("r").await.unwrap().len(), 1);
        }
    }

    #[test]
    fn a_directory_locked_elsewhere_is_in_use() {
        let tmp = tempfile::tempdir().unwrap();
        // A sled handle this module does not know about stands for another process.
        let db = raw_db(tmp.path());
        let started = Instant::now();
        let err = SledStore::open(tmp.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("store backend: store {} is in use by another process", tmp.path().display())
        );
        assert!(started.elapsed() >= LOCK_WAIT);
        drop(db);
    }

    #[tokio::test]
    async fn a_thousand_step_run_stays_well_under_a_mebibyte_on_disk() {
        for flush_each_step in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let store = SledStore::open(tmp.path()).unwrap();
            let mut value_bytes = 0;
            for seq in 1..=1000 {
                let record = step("0b9f3c2e-6a8d-4f1e-9c7a-2d5e8f1a3b4c", seq);
                value_bytes += format::encode_step(&record).unwrap().len();
                store.append(record).await.unwrap();
                if flush_each_step {
                    store.flush().await.unwrap();
                }
            }
            store.flush().await.unwrap();
            let on_disk = store.size_on_disk().unwrap();
            eprintln!("flush each step: {flush_each_step}: journal values {value_bytes} B, on disk {on_disk} B");
            assert!(on_disk < 1024 * 1024, "{on_disk} bytes on disk");
        }
    }
}
