//! The on-disk store: a sled database directory with an append-only journal and compacted snapshots, and a
//! write-ahead log in front of sled (`wal.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agentic_engine::{CheckpointStore, RunImage, RunRecord, StepRecord, StoreError, StoreRef};
use sled::{Batch, Db, Tree};

use crate::format::{self, FORMAT_VERSION, META_FORMAT_VERSION, META_WRITER, backend, check_run_id};
use crate::wal::{self, Kind, Wal};

/// How many appended records of a run trigger a compaction of its snapshot, unless set with
/// [`SledStore::with_snapshot_interval`].
pub const DEFAULT_SNAPSHOT_INTERVAL: u64 = 256;

/// A checkpoint store in a sled database directory (format: `docs/store-format.md`).
///
/// - [`CheckpointStore::append`] writes one journal record (O(delta): it never reads or rewrites the state)
///   and does not fsync; [`CheckpointStore::flush`] makes everything appended so far durable with one
///   `fdatasync` of the store's write-ahead log (`<dir>/wal`). sled itself is made durable lazily: when the
///   log exceeds 8 MiB and when the last handle is dropped (a checkpoint); an open after a crash replays the
///   log.
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
    /// The write-ahead log: what `flush` makes durable (it also holds sled's log file, for checkpoints).
    wal: Wal,
    runs: Tree,
    journal: Tree,
    snapshots: Tree,
}

impl Drop for Inner {
    /// Closing the store checkpoints: sled is flushed and `fdatasync`ed, and the write-ahead log truncated.
    fn drop(&mut self) {
        // Nothing to report to: on failure the log keeps its entries and the next open replays them.
        self.wal.checkpoint(&self.db).ok();
    }
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
    /// is neither 1 (upgraded to [`FORMAT_VERSION`]) nor [`FORMAT_VERSION`], when the write-ahead log cannot be
    /// opened or replayed, or on an I/O error.
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

    /// Bytes the store occupies on disk: sled's count (its log and snapshot files) plus the write-ahead log.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on an I/O error.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        let sled = self.inner.db.size_on_disk().map_err(|e| self.backend("size_on_disk", e))?;
        let wal = self.inner.wal.file_len().map_err(|e| self.backend("size_on_disk: stat the write-ahead log", e))?;
        Ok(sled + wal)
    }

    /// Makes sled durable and empties the write-ahead log now (a flush does it when the log exceeds 8 MiB,
    /// and dropping the last handle does it). Blocks on the device: call it from a blocking context.
    ///
    /// # Errors
    /// [`StoreError::Backend`] naming the store and the step that failed.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.wal.checkpoint(&self.inner.db).map_err(|(what, e)| self.backend(what, e))
    }

    /// Folds the run's latest snapshot and the journal records after it into a new snapshot now, and returns
    /// the step it reaches (0 for a run without records). `append` does this every
    /// [`SledStore::snapshot_interval`] steps. Snapshots are derived data, outside the write-ahead log: the
    /// result is durable after the next checkpoint (a crash before it only costs the next load a longer fold).
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
            if version == format::FORMAT_VERSION_WITHOUT_WAL {
                // The trees are the same; the version says a write-ahead log may hold acknowledged steps,
                // so that a reader of version 1 (which would ignore it) refuses the store from now on.
                meta.insert(META_FORMAT_VERSION, &FORMAT_VERSION.to_be_bytes())
                    .and_then(|_| db.flush())
                    .map_err(|e| op("upgrade the format version", e))?;
            } else if version != FORMAT_VERSION {
                return Err(backend(format!(
                    "open store {shown}: format version {version} is not supported (this agentic-store reads \
                     versions {} and {FORMAT_VERSION})",
                    format::FORMAT_VERSION_WITHOUT_WAL
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
    let wal = Wal::open(dir, log).map_err(|(what, e)| backend(format!("open store {shown}: {what}: {e}")))?;
    // Everything flushed before a crash is in the log; sled may lack it (it is made durable lazily).
    wal::replay(&wal, &db, &journal, &runs).map_err(|(what, e)| backend(format!("open store {shown}: {what}: {e}")))?;
    Ok(Inner { dir: dir.to_path_buf(), db, wal, runs, journal, snapshots })
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
            .compare_and_swap(&key, None as Option<&[u8]>, Some(value.as_slice()))
            .map_err(|e| self.backend("append", e))?;
        if swapped.is_ok() {
            // After the sled write: a checkpoint that drops this entry has flushed it (see wal.rs).
            let spill = self.inner.wal.push(Kind::Journal, &key, &value).map_err(|e| self.backend("append", e))?;
            if spill {
                self.inner.wal.spill();
            }
        } else {
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
        // One device wait: the entries pushed so far are appended to the write-ahead log and it alone is
        // `fdatasync`ed (sled's durable flush costs two: its `sync_file_range` and an `fdatasync` of its log),
        // Concurrent flushes share one write and one `fdatasync` (group commit).
        let target = self.inner.wal.end();
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let synced = if multi_thread {
            // On this thread: the runtime hands this worker's other tasks to another thread while it blocks,
            // off the critical path. A blocking-pool task instead costs two thread wake-ups per flush (there
            // and back), each as long as the `fdatasync` itself on a fast disk.
            tokio::task::block_in_place(|| self.inner.wal.sync(&self.inner.db, target))
        } else {
            // A current-thread runtime cannot hand its tasks over: the pool keeps them running meanwhile.
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || inner.wal.sync(&inner.db, target))
                .await
                .map_err(|e| self.backend("flush", e))?
        };
        synced.map_err(|(what, e)| self.backend(&format!("flush: {what}"), e))
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        check_run_id("put_run", &run.run_id)?;
        let value = format::encode_run(&run)?;
        let key = run.run_id.as_bytes();
        let runs = &self.inner.runs;
        // The sled write and the push under one lock: the log's last entry for a run is sled's value.
        let ((), spill) = self
            .inner
            .wal
            .push_with(Kind::Run, key, &value, || {
                runs.insert(key, value.as_slice()).map(drop).map_err(|e| e.to_string())
            })
            .map_err(|e| self.backend("put_run", e))?;
        if spill {
            self.inner.wal.spill();
        }
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
        // sled's background writer threads may hold the dropped store's directory lock for a moment.
        let open = || sled::Config::new().path(dir).flush_every_ms(None).use_compression(false).open();
        for _ in 0..100 {
            match open() {
                Ok(db) => return db,
                Err(sled::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) if e.to_string().contains("lock") => std::thread::sleep(std::time::Duration::from_millis(20)),
                Err(e) => panic!("{e}"),
            }
        }
        open().unwrap()
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
            drop(store);
            assert_eq!(wal_len(tmp.path()), 0, "closing the store checkpoints and empties the write-ahead log");
        }
    }

    fn wal_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join(wal::WAL_FILE)).unwrap().len()
    }

    /// Copies a store directory as it is on disk right now: what a crash of the process would leave (sled's
    /// buffered writes not written yet).
    fn crash_copy(from: &Path, to: &Path) {
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                std::fs::create_dir_all(&target).unwrap();
                crash_copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }

    /// A write-ahead log of `steps` journal records of run `r` and the run record, by hand.
    fn hand_written_wal(steps: std::ops::RangeInclusive<u64>, run: &RunRecord) -> (Vec<u8>, Vec<StepRecord>) {
        let mut bytes = Vec::new();
        let mut records = Vec::new();
        for seq in steps {
            let record = step("r", seq);
            let value = format::encode_step(&record).unwrap();
            wal::encode_entry(&mut bytes, Kind::Journal, &format::journal_key("r", seq), &value).unwrap();
            records.push(record);
        }
        wal::encode_entry(&mut bytes, Kind::Run, run.run_id.as_bytes(), &format::encode_run(run).unwrap()).unwrap();
        (bytes, records)
    }

    /// A closed, empty store in a new directory.
    fn empty_store() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        drop(SledStore::open(tmp.path()).unwrap());
        tmp
    }

    #[tokio::test]
    async fn the_log_grows_in_zero_filled_chunks_and_its_zero_tail_is_not_a_damaged_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        let records = fill(&store, "r", 3).await;
        store.flush().await.unwrap();
        assert_eq!(wal_len(tmp.path()), 64 * 1024, "one 64 KiB chunk, written in place");
        let bytes = std::fs::read(tmp.path().join(wal::WAL_FILE)).unwrap();
        let (entries, valid) = wal::decode_entries(&bytes);
        assert_eq!(entries.len(), 3);
        assert!(bytes[valid..].iter().all(|&b| b == 0), "zeros after the entries");
        // A ~100 KiB second batch overflows the chunk: the file grows by as much as it held (doubling).
        let big = "x".repeat(100 * 1024);
        let mut run = run_record("r", 2);
        run.detail = serde_json::Value::String(big);
        store.put_run(run.clone()).await.unwrap();
        store.flush().await.unwrap();
        assert_eq!(wal_len(tmp.path()), 128 * 1024, "grown by as much as it held: 64 KiB + 64 KiB");
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);
        let store = SledStore::open(crashed.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), records);
        assert_eq!(store.run("r").await.unwrap(), Some(run));
        assert_eq!(wal_len(crashed.path()), 0, "replayed, checkpointed and emptied at open");
    }

    #[tokio::test]
    async fn flushed_steps_that_sled_never_wrote_come_back_from_the_write_ahead_log() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(16);
        store.put_run(run_record("r", 1)).await.unwrap();
        let mut records = Vec::new();
        for seq in 1..=100 {
            let record = step("r", seq);
            store.append(record.clone()).await.unwrap();
            store.flush().await.unwrap();
            records.push(record);
            if seq == 60 {
                store.put_run(run_record("r", 60)).await.unwrap();
            }
        }
        // Appended but never flushed: may or may not come back, and must not break anything.
        store.append(step("r", 101)).await.unwrap();
        assert!(wal_len(tmp.path()) > 0);
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);

        // What sled alone has on disk: the steps were never flushed to it.
        {
            let db = raw_db(crashed.path());
            let journal = db.open_tree("journal").unwrap();
            assert!(journal.len() < 100, "sled wrote {} of the 100 steps without a flush", journal.len());
        }
        let store = SledStore::open(crashed.path()).unwrap();
        assert_eq!(wal_len(crashed.path()), 0, "replayed, checkpointed and emptied at open");
        let back = store.records("r").await.unwrap();
        assert!(back.len() == 100 || back.len() == 101, "{} records", back.len());
        assert_eq!(back[..100], records[..]);
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 60)));
        assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &back).unwrap());
        drop(store);
        // Durable in sled now: the next open has nothing to replay.
        let store = SledStore::open(crashed.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), back);
    }

    #[tokio::test]
    async fn a_hand_written_log_is_replayed_exactly_and_idempotently() {
        let tmp = empty_store();
        let (wal_bytes, records) = hand_written_wal(1..=20, &run_record("r", 7));
        std::fs::write(tmp.path().join(wal::WAL_FILE), &wal_bytes).unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), records);
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 7)));
        store.put_run(run_record("r", 9)).await.unwrap();
        drop(store);
        assert_eq!(wal_len(tmp.path()), 0);

        // The same log again (a crash after replaying it, before truncating it): the journal records are
        // already there with the same values, the run record is overwritten by the log's.
        std::fs::write(tmp.path().join(wal::WAL_FILE), &wal_bytes).unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), records);
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 7)));
        drop(store);

        // A journal record the log disagrees with is an error naming the store, never an overwrite.
        let mut other = Vec::new();
        let value = format::encode_step(&step("r", 3)).unwrap();
        wal::encode_entry(&mut other, Kind::Journal, &format::journal_key("r", 4), &value).unwrap();
        std::fs::write(tmp.path().join(wal::WAL_FILE), &other).unwrap();
        let err = SledStore::open(tmp.path()).unwrap_err();
        let shown = tmp.path().display().to_string();
        assert!(err.to_string().contains(&format!("open store {shown}: replay the write-ahead log")), "{err}");
        assert!(err.to_string().contains("holds another value"), "{err}");
    }

    #[tokio::test]
    async fn a_torn_or_crc_bad_tail_of_the_log_is_dropped() {
        let (wal_bytes, records) = hand_written_wal(1..=10, &run_record("r", 5));
        let (entries, valid) = wal::decode_entries(&wal_bytes);
        assert_eq!((entries.len(), valid), (11, wal_bytes.len()));
        let cases: Vec<(&str, Vec<u8>, usize)> = vec![
            // The run record's entry cut short: 10 journal records, no run record.
            ("torn in the body", wal_bytes[..wal_bytes.len() - 3].to_vec(), 10),
            (
                "torn in the header",
                {
                    let mut b = hand_written_wal(1..=10, &run_record("r", 5)).0;
                    let run_len = b.len() - journal_entries_len(&b, 10);
                    b.truncate(b.len() - run_len + 5);
                    b
                },
                10,
            ),
            (
                "a bad CRC in the last journal entry",
                {
                    let (mut b, _) = hand_written_wal(1..=10, &run_record("r", 5));
                    let end = journal_entries_len(&b, 10);
                    b[end - 1] ^= 0x40;
                    b
                },
                9,
            ),
            (
                "zeros after the entries",
                {
                    let mut b = hand_written_wal(1..=10, &run_record("r", 5)).0;
                    b.truncate(journal_entries_len(&b, 10));
                    b.extend_from_slice(&[0; 4096]);
                    b
                },
                10,
            ),
        ];
        for (case, bytes, expected) in cases {
            let tmp = empty_store();
            std::fs::write(tmp.path().join(wal::WAL_FILE), &bytes).unwrap();
            let store = SledStore::open(tmp.path()).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(wal_len(tmp.path()), 0, "{case}: the tail is truncated with the rest");
            assert_eq!(store.records("r").await.unwrap(), records[..expected], "{case}");
            assert_eq!(store.run("r").await.unwrap(), None, "{case}: the run record came after the damage");
        }
    }

    #[tokio::test]
    async fn a_version_1_store_without_a_log_opens_and_is_upgraded() {
        let tmp = tempfile::tempdir().unwrap();
        let records = {
            let store = SledStore::open(tmp.path()).unwrap();
            let records = fill(&store, "r", 5).await;
            store.flush().await.unwrap();
            records
        };
        {
            // What version 1 left: the same trees, meta version 1, no `wal` file.
            let db = raw_db(tmp.path());
            db.open_tree("meta").unwrap().insert(META_FORMAT_VERSION, &1u32.to_be_bytes()).unwrap();
            db.flush().unwrap();
        }
        std::fs::remove_file(tmp.path().join(wal::WAL_FILE)).unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), records);
        assert_eq!(wal_len(tmp.path()), 0, "the log is created");
        drop(store);
        let db = raw_db(tmp.path());
        let version = db.open_tree("meta").unwrap().get(META_FORMAT_VERSION).unwrap().unwrap();
        assert_eq!(version.as_ref(), FORMAT_VERSION.to_be_bytes(), "upgraded to {FORMAT_VERSION}");
    }

    #[tokio::test]
    async fn a_log_past_the_threshold_is_checkpointed_by_the_flush_that_crosses_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        // Run records of ~100 KiB each: 90 of them cross 8 MiB.
        let mut run = run_record("r", 0);
        run.detail = serde_json::Value::String("x".repeat(100 * 1024));
        let mut crossed = false;
        for i in 1..=100 {
            run.updated_at_ms = i;
            store.put_run(run.clone()).await.unwrap();
            store.append(step("r", i)).await.unwrap();
            let before = wal_len(tmp.path());
            store.flush().await.unwrap();
            let after = wal_len(tmp.path());
            // Entries up to the threshold, plus at most one zero-filled chunk ahead of them.
            assert!(after <= wal::CHECKPOINT_BYTES + wal::GROW_MAX, "flush {i}: {after} bytes in the log");
            if after < before {
                crossed = true;
                assert_eq!(after, 0, "flush {i}: a checkpoint empties the log");
            }
        }
        assert!(crossed, "no checkpoint in 10 MiB of entries");
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);
        let store = SledStore::open(crashed.path()).unwrap();
        assert_eq!(store.run("r").await.unwrap(), Some(run), "the last run record, across the checkpoint");
        assert_eq!(store.records("r").await.unwrap().len(), 100);
    }

    #[tokio::test]
    async fn a_long_run_without_flushes_spills_the_pending_entries_to_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(0);
        let mut run = run_record("r", 0);
        run.detail = serde_json::Value::String("x".repeat(64 * 1024));
        for i in 1..=40 {
            run.updated_at_ms = i;
            store.put_run(run.clone()).await.unwrap();
        }
        assert!(wal_len(tmp.path()) >= 1024 * 1024, "{} bytes written", wal_len(tmp.path()));
        store.flush().await.unwrap();
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);
        assert_eq!(SledStore::open(crashed.path()).unwrap().run("r").await.unwrap(), Some(run));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_runs_share_writes_and_every_flushed_step_survives() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|j| {
                let store = store.clone();
                tokio::spawn(async move {
                    let run_id = format!("run-{j}");
                    for seq in 1..=50 {
                        store.append(step(&run_id, seq)).await.unwrap();
                        store.flush().await.unwrap();
                    }
                    store.put_run(run_record(&run_id, 50)).await.unwrap();
                    store.flush().await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);
        let store = SledStore::open(crashed.path()).unwrap();
        for j in 0..8 {
            let run_id = format!("run-{j}");
            let expected: Vec<_> = (1..=50).map(|seq| step(&run_id, seq)).collect();
            assert_eq!(store.records(&run_id).await.unwrap(), expected, "{run_id}");
            assert_eq!(store.run(&run_id).await.unwrap(), Some(run_record(&run_id, 50)), "{run_id}");
        }
    }

    /// Bytes of the first `n` entries of a log.
    fn journal_entries_len(bytes: &[u8], n: usize) -> usize {
        let mut at = 0;
        for _ in 0..n {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            at += 8 + len;
        }
        at
    }
}
