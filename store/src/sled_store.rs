//! The on-disk store: a sled database directory with an append-only journal and compacted snapshots, and a
//! write-ahead log in front of sled (`wal.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agentic_engine::{
    AuditEntry, CheckpointStore, KeyRecord, RunImage, RunRecord, ScheduleChange, ScheduleRecord, StepRecord,
    StoreError, StoreRef,
};
use sled::{Batch, Db, Tree};

use crate::format::{self, FORMAT_VERSION, META_FORMAT_VERSION, META_WRITER, backend, check_run_id};
use crate::wal::{self, AppendError, Wal};

/// How many appended records of a run trigger a compaction of its snapshot, unless set with
/// [`SledStore::with_snapshot_interval`].
pub const DEFAULT_SNAPSHOT_INTERVAL: u64 = 256;

/// A checkpoint store in a sled database directory (format: `docs/store-format.md`).
///
/// - [`CheckpointStore::append`] writes one journal record (O(delta): it never reads or rewrites the state)
///   and does not fsync; [`CheckpointStore::flush`] makes everything appended so far durable with one
///   `fdatasync` of the store's write-ahead log (`<dir>/wal`). Journal and run records reach sled only at a
///   checkpoint, when the log exceeds 8 MiB (or on [`SledStore::checkpoint`]); until then they are kept in
///   memory and read over sled's, and the next open reads the log back. A process that resumes a run
///   therefore leaves sled's files as they were, and the next open of sled has nothing to recover.
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
    /// The spec archive: spec hash → version byte + text (written at once and fsynced: rare, and a run's
    /// record must never name a text that a crash lost).
    specs: Tree,
    /// The schedules: id → version byte + JSON (written at once and fsynced, like the archive: a tick taken
    /// must stay taken).
    schedules: Tree,
    /// The API keys (SERVER.md §8): key id → version byte + JSON (written at once and fsynced).
    keys: Tree,
    /// The audit trail (SERVER.md §8): a big-endian `u64` from sled's id generator → version byte + JSON
    /// (written at once and fsynced: an answer's audit entry is durable when the answer is).
    audit: Tree,
    /// Held by a schedule change from its read to its write: changes of schedules are made one at a time.
    schedule_changes: tokio::sync::Mutex<()>,
    /// Where the flushes stand: one flush syncs the log at a time (the leader), the others wait for it without
    /// holding a thread ([`SledStore::flush`]).
    sync_state: tokio::sync::watch::Sender<SyncState>,
}

/// The flushes' shared state ([`SledStore::flush`]).
#[derive(Debug, Clone, Copy, Default)]
struct SyncState {
    /// Every entry of the log up to this position is durable.
    synced: u64,
    /// A flush is syncing the log now.
    busy: bool,
}

/// The leading flush's turn ([`SledStore::flush`]): when it ends, the next flush may sync, and the ones its
/// sync covered are done.
struct Leading<'a> {
    state: &'a tokio::sync::watch::Sender<SyncState>,
    /// The position the sync made durable (`None`: it failed or did not finish).
    synced: Option<u64>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let synced = self.synced;
        self.state.send_modify(|s| {
            s.busy = false;
            if let Some(end) = synced {
                s.synced = s.synced.max(end);
            }
        });
    }
}

/// What a flush does next ([`SledStore::flush`]).
enum Turn {
    /// Its entries are durable.
    Done,
    /// Sync the log (no flush is syncing).
    Lead,
    /// Wait for the flush that is syncing.
    Wait,
}

impl Drop for Inner {
    /// Closing the store syncs the write-ahead log (and checkpoints it into sled when it exceeds 8 MiB).
    fn drop(&mut self) {
        // Nothing to report to: on failure the log keeps what it had and the next open replays it.
        self.wal.close(&self.db).ok();
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
    /// [`StoreError::Unavailable`] naming the directory when another process has it open ("store <dir> is in
    /// use by another process"; try again later); [`StoreError::Backend`] (sled's or the I/O error as its
    /// source) when it is not a sled database or not an agentic store, when its format version
    /// is not 1 or 2 (upgraded to [`FORMAT_VERSION`]) or [`FORMAT_VERSION`], when the write-ahead log cannot be
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

    /// The `fdatasync`s this store has made since it was opened (of its write-ahead log, and of sled's log
    /// at a checkpoint): the device waits its flushes cost. Under `sync` durability a lone run pays one per
    /// step; concurrent runs whose steps are flushed together share one (group commit), so fewer than their
    /// steps. Shared by the handles of one open store.
    pub fn log_syncs(&self) -> u64 {
        self.inner.wal.syncs()
    }

    /// Makes every entry of the log up to `target` durable ([`Wal::sync`]); returns the position synced.
    async fn sync_log(&self, target: u64) -> Result<u64, StoreError> {
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

    /// Writes the records only the write-ahead log holds to sled, makes sled durable and empties the log now
    /// (a flush does it when the log exceeds 8 MiB, and closing the store when it is longer than that).
    /// Blocks on the device: call it from a blocking context.
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
        let last = self.last_seq(run_id)?;
        let mut batch = Batch::default();
        let mut rebuilt = false;
        let (mut image, history_before) = match head {
            Some(head) if head.0.seq <= last => head,
            _ => {
                // No snapshot, an unreadable one, or one ahead of the journal: rebuild from the start.
                self.clear_snapshot(run_id, &mut batch)?;
                rebuilt = true;
                (RunImage::new(run_id), 0)
            }
        };
        let start = image.seq;
        for record in self.journal_from(run_id, start + 1) {
            image.apply(&record?)?;
        }
        if image.seq == start {
            if rebuilt {
                snapshots.apply_batch(batch).map_err(|e| self.backend("compact: remove the snapshot", e))?;
            }
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

    /// The journal records of `run_id` from step `from` on, in step order, decoded lazily: sled's merged with
    /// those only the write-ahead log holds.
    fn journal_from(&self, run_id: &str, from: u64) -> impl Iterator<Item = Result<StepRecord, StoreError>> + '_ {
        let run_id = run_id.to_string();
        let (lo, hi) = (format::journal_key(&run_id, from), format::journal_key(&run_id, u64::MAX));
        let mut log = self.inner.wal.journal_range(&lo, &hi).into_iter().peekable();
        let mut sled = self.inner.journal.range(lo..=hi).peekable();
        std::iter::from_fn(move || {
            // The smaller key first; a key in both (a checkpoint in progress) is sled's, with the same value.
            let from_log = match (sled.peek(), log.peek()) {
                (None, None) => return None,
                (None, Some(_)) => true,
                (Some(Ok((s, _))), Some((l, _))) => {
                    if **l == *s.as_ref() {
                        log.next();
                        false
                    } else {
                        **l < *s.as_ref()
                    }
                }
                (Some(_), _) => false,
            };
            let item = if from_log {
                log.next().map(|(k, v)| (k.to_vec(), v.to_vec()))
            } else {
                match sled.next()? {
                    Ok((k, v)) => Some((k.to_vec(), v.to_vec())),
                    Err(e) => return Some(Err(self.backend("read the journal", e))),
                }
            };
            let (key, value) = item?;
            Some(format::journal_seq(&run_id, &key).and_then(|seq| format::decode_step(&run_id, seq, &value)))
        })
    }

    /// The last journaled step of `run_id` (0 when it has none), in sled or in the write-ahead log.
    fn last_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        let (lo, hi) = (format::journal_key(run_id, 0), format::journal_key(run_id, u64::MAX));
        let in_sled = match self.inner.journal.range(lo.as_slice()..=hi.as_slice()).next_back() {
            Some(entry) => {
                let (key, _) = entry.map_err(|e| self.backend("read the journal", e))?;
                format::journal_seq(run_id, &key)?
            }
            None => 0,
        };
        let in_log = match self.inner.wal.last_journal_key(&lo, &hi) {
            Some(key) => format::journal_seq(run_id, &key)?,
            None => 0,
        };
        Ok(in_sled.max(in_log))
    }

    /// Adds the removal of `run_id`'s snapshot (its head and history chunks) to `batch`.
    fn clear_snapshot(&self, run_id: &str, batch: &mut Batch) -> Result<(), StoreError> {
        batch.remove(format::snapshot_head_key(run_id));
        for key in self.inner.snapshots.scan_prefix(format::snapshot_chunk_prefix(run_id)).keys() {
            batch.remove(key.map_err(|e| self.backend("list the snapshot", e))?);
        }
        Ok(())
    }

    /// `op` failed with the backend's error `e` (sled's, or the write-ahead log's I/O error): a
    /// [`StoreError::Backend`] keeping `e` as its source.
    fn backend(&self, op: &str, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::backend_caused(format!("{op} in store {}: {e}", self.inner.dir.display()), e)
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
    let db = open_db(&config, &shown)?;
    let mut created = false;
    let op = |what: &str, e: sled::Error| StoreError::backend_caused(format!("open store {shown}: {what}: {e}"), e);
    let meta = db.open_tree("meta").map_err(|e| op("open tree `meta`", e))?;
    match meta.get(META_FORMAT_VERSION).map_err(|e| op("read the format version", e))? {
        Some(v) => {
            let version = <[u8; 4]>::try_from(v.as_ref()).map(u32::from_be_bytes).map_err(|_| {
                backend(format!("open store {shown}: the format version is corrupt ({:02x?})", v.as_ref()))
            })?;
            if version == format::FORMAT_VERSION_WITHOUT_WAL
                || version == format::FORMAT_VERSION_WHOLE_PLANNER_STATES
                || version == format::FORMAT_VERSION_WITHOUT_ITEMS
                || version == format::FORMAT_VERSION_WITHOUT_SPECS
                || version == format::FORMAT_VERSION_WITHOUT_RECORD_ITEMS
            {
                // Their records read the same; the version says that a write-ahead log may hold acknowledged
                // steps, that planner states may be journaled as changes and that steps may carry mapper items,
                // so that a reader of an older
                // version (which would ignore both) refuses the store from now on.
                meta.insert(META_FORMAT_VERSION, &FORMAT_VERSION.to_be_bytes())
                    .and_then(|_| db.flush())
                    .map_err(|e| op("upgrade the format version", e))?;
            } else if version != FORMAT_VERSION {
                return Err(backend(format!(
                    "open store {shown}: format version {version} is not supported (this agentic-store reads \
                     versions {} to {FORMAT_VERSION})",
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
            created = true;
        }
    }
    let tree = |db: &Db, name: &str| db.open_tree(name).map_err(|e| op(&format!("open tree `{name}`"), e));
    let trees = |db: &Db| -> Result<_, StoreError> {
        Ok((
            tree(db, "runs")?,
            tree(db, "journal")?,
            tree(db, "snapshots")?,
            tree(db, "specs")?,
            tree(db, "schedules")?,
            (tree(db, "keys")?, tree(db, "audit")?),
        ))
    };
    let mut opened = trees(&db)?;
    let mut db = db;
    if created {
        // sled writes a snapshot of its own (and zeroes its log's tail, both fsynced) at the first open after
        // any write. Paying it now, once, leaves nothing to recover for the opens that follow: the store
        // writes sled only at checkpoints.
        db.flush().map_err(|e| op("flush the new store", e))?;
        drop((opened, meta));
        drop(db);
        db = open_db(&config, &shown)?;
        opened = trees(&db)?;
    }
    let (runs, journal, snapshots, specs, schedules, (keys, audit)) = opened;
    let log = std::fs::File::open(dir.join("db")).map_err(|e| {
        StoreError::backend_caused(format!("open store {shown}: open the log file for fdatasync: {e}"), e)
    })?;
    let wal = Wal::open(dir, log, journal.clone(), runs.clone())
        .map_err(|(what, e)| StoreError::backend_caused(format!("open store {shown}: {what}: {e}"), e))?;
    // Everything flushed is in the log; sled holds only what the last checkpoint wrote.
    let replayed = wal::replay(&wal, &db)
        .map_err(|(what, e)| StoreError::backend_caused(format!("open store {shown}: {what}: {e}"), e))?;
    if replayed.dropped_bytes > 0 {
        // Only the tail of a write that was never acknowledged can be damaged; anything else is a damaged disk.
        tracing::warn!(
            "store {shown}: the write-ahead log has {} damaged bytes after its {} whole entries; they belong to a \
             write that was never acknowledged (a crash during a flush) and were dropped",
            replayed.dropped_bytes,
            replayed.entries
        );
    }
    Ok(Inner {
        dir: dir.to_path_buf(),
        db,
        wal,
        runs,
        journal,
        snapshots,
        specs,
        schedules,
        keys,
        audit,
        schedule_changes: tokio::sync::Mutex::new(()),
        sync_state: tokio::sync::watch::Sender::new(SyncState::default()),
    })
}

/// Opens sled with `config`, waiting up to [`LOCK_WAIT`] for a lock that a closing database still holds.
fn open_db(config: &sled::Config, shown: &str) -> Result<Db, StoreError> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match config.open() {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(io)) if is_lock_error(&io) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(open_error(shown, e)),
        }
    }
}

fn is_lock_error(e: &std::io::Error) -> bool {
    e.to_string().contains("could not acquire lock")
}

/// Explains why sled could not open `dir`.
fn open_error(dir: &str, e: sled::Error) -> StoreError {
    match e {
        // In use is unavailable for now (SPEC.md §2: try again), not a failure of the store.
        sled::Error::Io(io) if is_lock_error(&io) => StoreError::unavailable(
            "sled",
            format!("store {dir} is in use by another process"),
            Some(std::sync::Arc::new(io)),
        ),
        sled::Error::Io(io) => StoreError::backend_caused(format!("open store {dir}: {io}"), io),
        sled::Error::Corruption { .. } => {
            StoreError::backend_caused(format!("open store {dir}: not a sled database, or a damaged one ({e})"), e)
        }
        sled::Error::Unsupported(_) => StoreError::backend_caused(
            format!("open store {dir}: a sled database with settings this store does not use ({e})"),
            e,
        ),
        other => StoreError::backend_caused(format!("open store {dir}: {other}"), other),
    }
}

impl SledStore {
    /// Makes what was written to the tree `tree` durable (sled's own flush, on a blocking thread).
    async fn fsync_tree(&self, op: &str, tree: fn(&Inner) -> &Tree) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || tree(&inner).flush())
            .await
            .map_err(|e| self.backend(op, e))?
            .map_err(|e| self.backend(&format!("{op}: flush"), e))
            .map(drop)
    }
}

impl CheckpointStore for SledStore {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        check_run_id("append", &record.run_id)?;
        let key = format::journal_key(&record.run_id, record.seq);
        let value = format::encode_step(&record)?;
        // Only if absent: the journal is append-only.
        match self.inner.wal.append_journal(&key, &value) {
            Ok(true) => self.inner.wal.spill(),
            Ok(false) => {}
            Err(AppendError::Exists) => {
                return Err(backend(format!(
                    "append: run `{}` step {} is already journaled in store {}",
                    record.run_id,
                    record.seq,
                    self.inner.dir.display()
                )));
            }
            Err(AppendError::Failed(e)) => return Err(self.backend("append", e)),
        }
        if self.snapshot_interval > 0 && record.seq.is_multiple_of(self.snapshot_interval) {
            self.compact(&record.run_id)?;
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        // One device wait: the entries pushed so far are appended to the write-ahead log and it alone is
        // `fdatasync`ed (sled's durable flush costs two: its `sync_file_range` and an `fdatasync` of its log).
        // Group commit: one flush syncs at a time, taking every entry pushed until then; a flush that finds
        // one syncing waits for it without holding a thread (so the runtime's threads keep running other runs,
        // whose steps the next sync takes together), and syncs itself only when that one did not cover its
        // entries. A lone flush syncs at once: no added wait.
        let target = self.inner.wal.end();
        let mut state = self.inner.sync_state.subscribe();
        loop {
            let mut turn = Turn::Wait;
            self.inner.sync_state.send_if_modified(|s| {
                turn = if s.synced >= target {
                    Turn::Done
                } else if s.busy {
                    Turn::Wait
                } else {
                    s.busy = true;
                    Turn::Lead
                };
                false
            });
            match turn {
                Turn::Done => return Ok(()),
                Turn::Wait => {
                    // The sender lives as long as the store: `Err` cannot happen; the loop looks again.
                    let _ = state.wait_for(|s| s.synced >= target || !s.busy).await;
                }
                Turn::Lead => {
                    // Released however this ends (a flush dropped while it waits for the blocking pool too).
                    let mut leading = Leading { state: &self.inner.sync_state, synced: None };
                    let synced = self.sync_log(target).await;
                    leading.synced = synced.as_ref().ok().copied();
                    drop(leading);
                    return synced.map(|_| ());
                }
            }
        }
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        check_run_id("put_run", &run.run_id)?;
        let value = format::encode_run(&run)?;
        if self
            .inner
            .wal
            .put_run(run.run_id.as_bytes(), &value)
            .map_err(|e| self.backend("put_run", std::io::Error::other(e)))?
        {
            self.inner.wal.spill();
        }
        Ok(())
    }

    async fn put_spec(&self, text: &str) -> Result<String, StoreError> {
        let hash = agentic_engine::spec_hash(text);
        let known = self.inner.specs.contains_key(hash.as_bytes()).map_err(|e| self.backend("put_spec", e))?;
        if !known {
            self.inner
                .specs
                .insert(hash.as_bytes(), format::encode_spec(text))
                .map_err(|e| self.backend("put_spec", e))?;
            // Durable before any run record names it (sled's own flush: the log does not hold the archive).
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || inner.specs.flush())
                .await
                .map_err(|e| self.backend("put_spec", e))?
                .map_err(|e| self.backend("put_spec: flush", e))?;
        }
        Ok(hash)
    }

    async fn spec(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let value = self.inner.specs.get(hash.as_bytes()).map_err(|e| self.backend("spec", e))?;
        value.map(|v| format::decode_spec(hash, &v)).transpose()
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        let mut schedules = Vec::new();
        for entry in self.inner.schedules.iter() {
            let (key, value) = entry.map_err(|e| self.backend("schedules", e))?;
            schedules.push(format::decode_schedule(&String::from_utf8_lossy(&key), &value)?);
        }
        Ok(schedules)
    }

    async fn schedule(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        let value = self.inner.schedules.get(id.as_bytes()).map_err(|e| self.backend("schedule", e))?;
        value.map(|v| format::decode_schedule(id, &v)).transpose()
    }

    /// One change at a time (one process holds the store); written and fsynced before it returns.
    async fn change_schedule(
        &self,
        id: &str,
        change: ScheduleChange,
    ) -> Result<Result<Option<ScheduleRecord>, String>, StoreError> {
        let _one_at_a_time = self.inner.schedule_changes.lock().await;
        let current = self.schedule(id).await?;
        let written = match format::apply_schedule_change(id, current, change) {
            Ok(written) => written,
            Err(refused) => return Ok(Err(refused)),
        };
        let op = format!("change schedule `{id}`");
        match &written {
            Some(schedule) => self.inner.schedules.insert(id.as_bytes(), format::encode_schedule(schedule)?).map(drop),
            None => self.inner.schedules.remove(id.as_bytes()).map(drop),
        }
        .map_err(|e| self.backend(&op, e))?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.schedules.flush())
            .await
            .map_err(|e| self.backend(&op, e))?
            .map_err(|e| self.backend(&format!("{op}: flush"), e))?;
        Ok(Ok(written))
    }

    async fn put_key(&self, key: KeyRecord) -> Result<(), StoreError> {
        let op = format!("put key `{}`", key.id);
        self.inner.keys.insert(key.id.as_bytes(), format::encode_json(&key, &op)?).map_err(|e| self.backend(&op, e))?;
        self.fsync_tree(&op, |inner| &inner.keys).await
    }

    async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        let mut keys = Vec::new();
        for entry in self.inner.keys.iter() {
            let (id, value) = entry.map_err(|e| self.backend("keys", e))?;
            keys.push(format::decode_json::<KeyRecord>(&format!("key `{}`", String::from_utf8_lossy(&id)), &value)?);
        }
        keys.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then_with(|| a.id.cmp(&b.id)));
        Ok(keys)
    }

    async fn append_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        let op = format!("append to the audit ({})", entry.action);
        let id = self.inner.db.generate_id().map_err(|e| self.backend(&op, e))?;
        self.inner
            .audit
            .insert(id.to_be_bytes(), format::encode_json(&entry, &op)?)
            .map_err(|e| self.backend(&op, e))?;
        self.fsync_tree(&op, |inner| &inner.audit).await
    }

    async fn audit(&self, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let mut entries = Vec::new();
        for entry in self.inner.audit.iter().rev().take(limit) {
            let (id, value) = entry.map_err(|e| self.backend("audit", e))?;
            entries.push(format::decode_json::<AuditEntry>(&format!("audit entry {id:?}"), &value)?);
        }
        Ok(entries)
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        if let Some(value) = self.inner.wal.run(run_id.as_bytes()) {
            return format::decode_run(run_id, &value).map(Some);
        }
        let value = self.inner.runs.get(run_id.as_bytes()).map_err(|e| self.backend("run", e))?;
        value.map(|v| format::decode_run(run_id, &v)).transpose()
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        // sled's run records, each replaced by the write-ahead log's when it holds a newer one.
        let mut values: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for entry in self.inner.runs.iter() {
            let (key, value) = entry.map_err(|e| self.backend("runs", e))?;
            values.insert(key.to_vec(), value.to_vec());
        }
        values.extend(self.inner.wal.runs().into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
        let mut runs = Vec::with_capacity(values.len());
        for (key, value) in &values {
            let run_id = String::from_utf8_lossy(key);
            runs.push(format::decode_run(&run_id, value)?);
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
            Ok(Some(image)) if image.seq <= self.last_seq(run_id)? => image,
            Ok(Some(_)) => {
                // Ahead of the journal: folded from steps that were never flushed (sled wrote the snapshot,
                // the crash lost the steps). The run continues from the journal; the snapshot must not
                // outlive it.
                let mut batch = Batch::default();
                self.clear_snapshot(run_id, &mut batch)?;
                self.inner.snapshots.apply_batch(batch).map_err(|e| self.backend("load: remove the snapshot", e))?;
                RunImage::new(run_id)
            }
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
    use crate::wal::Kind;

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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_flushes_share_an_fdatasync_and_each_returns_only_once_its_step_is_synced() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        // A lone flush syncs once; a flush with nothing pending does not sync.
        let before = store.log_syncs();
        store.append(step("lone", 1)).await.unwrap();
        store.flush().await.unwrap();
        assert_eq!(store.log_syncs() - before, 1);
        store.flush().await.unwrap();
        assert_eq!(store.log_syncs() - before, 1);

        // 200 runs append a step and flush at once: every flush returns with its step on stable storage, and
        // they share far fewer syncs than 200 (a flush waits for the one syncing, then the next takes all).
        let before = store.log_syncs();
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store.append(step(&format!("run-{i}"), 1)).await.unwrap();
                    let mine = store.inner.wal.end();
                    store.flush().await.unwrap();
                    assert!(store.inner.wal.synced() >= mine, "run-{i}: flush returned before its step was synced");
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let syncs = store.log_syncs() - before;
        assert!((1..=100).contains(&syncs), "{syncs} fdatasyncs for 200 concurrent flushes");

        // All 201 steps come back after a reopen.
        drop(store);
        let store = SledStore::open(tmp.path()).unwrap();
        for i in 0..200 {
            assert_eq!(store.records(&format!("run-{i}")).await.unwrap(), vec![step(&format!("run-{i}"), 1)]);
        }
        assert_eq!(store.records("lone").await.unwrap().len(), 1);
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
        // Into sled, out of the write-ahead log (which would otherwise disagree with the damage below).
        store.checkpoint().unwrap();
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
        assert!(
            err.to_string().contains("format version 7 is not supported (this agentic-store reads versions 1 to 6)"),
            "{err}"
        );
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
        assert!(matches!(err, StoreError::Backend { .. }), "{err}");
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
            format!("store unavailable: store {} is in use by another process", tmp.path().display())
        );
        assert!(started.elapsed() >= LOCK_WAIT);
        // Unavailable for now (try again), with sled's I/O error kept as the source.
        assert!(matches!(&err, StoreError::Unavailable { backend: "sled", .. }), "{err:?}");
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.downcast_ref::<std::io::Error>().is_some(), "{source:?}");
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
            // Closing keeps the entries in the log, and only them: the zero-filled tail is cut off.
            let bytes = std::fs::read(tmp.path().join(wal::WAL_FILE)).unwrap();
            let (entries, valid) = wal::decode_entries(&bytes);
            assert_eq!((entries.len(), valid), (1000, bytes.len()), "flush each step: {flush_each_step}");
            assert_eq!(sled_journal_len(tmp.path()), 0, "sled holds no journal record before a checkpoint");
            let store = SledStore::open(tmp.path()).unwrap();
            assert_eq!(store.records("0b9f3c2e-6a8d-4f1e-9c7a-2d5e8f1a3b4c").await.unwrap().len(), 1000);
        }
    }

    /// Journal records sled itself holds (the store closed).
    fn sled_journal_len(dir: &Path) -> usize {
        raw_db(dir).open_tree("journal").unwrap().len()
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
        assert_eq!(wal_len(crashed.path()), 128 * 1024, "read back at open, kept, its zeros too");
        // The next entry goes after the last one, into the zeros.
        let more = step("r", 4);
        store.append(more.clone()).await.unwrap();
        store.flush().await.unwrap();
        drop(store);
        let bytes = std::fs::read(crashed.path().join(wal::WAL_FILE)).unwrap();
        let (entries, valid) = wal::decode_entries(&bytes);
        assert_eq!((entries.len(), valid), (5, bytes.len()), "3 steps, the run record, the new step; no zeros");
        let store = SledStore::open(crashed.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), [records, vec![more]].concat());
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
        // Appended but never flushed: lost with the process.
        store.append(step("r", 101)).await.unwrap();
        assert!(wal_len(tmp.path()) > 0);
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);

        // sled alone holds none of them: journal and run records reach it only at a checkpoint.
        assert_eq!(sled_journal_len(crashed.path()), 0);
        let store = SledStore::open(crashed.path()).unwrap();
        let back = store.records("r").await.unwrap();
        assert_eq!(back, records, "every flushed step, the unflushed one lost");
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 60)));
        assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &back).unwrap());
        // Into sled on demand: then the log is empty and sled alone has everything.
        store.checkpoint().unwrap();
        assert_eq!(wal_len(crashed.path()), 0);
        drop(store);
        assert_eq!(sled_journal_len(crashed.path()), 100);
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
        // The log read back, the new run record after it.
        let bytes = std::fs::read(tmp.path().join(wal::WAL_FILE)).unwrap();
        assert_eq!(&bytes[..wal_bytes.len()], &wal_bytes[..]);
        let (entries, valid) = wal::decode_entries(&bytes);
        assert_eq!((entries.len(), valid), (22, bytes.len()), "20 steps, two run records, no zeros");
        let store = SledStore::open(tmp.path()).unwrap();
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 9)), "the last run record wins");

        // Checkpointed into sled, then the same log again (a crash after a checkpoint's sled flush, before
        // it truncated the log): the journal records are already in sled with the same values, the run record
        // is the log's.
        store.checkpoint().unwrap();
        drop(store);
        assert_eq!(sled_journal_len(tmp.path()), 20);
        std::fs::write(tmp.path().join(wal::WAL_FILE), &wal_bytes).unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), records);
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 7)));
        drop(store);

        // A journal record the log disagrees with (sled's, or an earlier entry of the log) is an error naming
        // the store, never an overwrite.
        let shown = tmp.path().display().to_string();
        let value = format::encode_step(&step("r", 3)).unwrap();
        let mut against_sled = Vec::new();
        wal::encode_entry(&mut against_sled, Kind::Journal, &format::journal_key("r", 4), &value).unwrap();
        let mut against_log = Vec::new();
        for v in [format::encode_step(&step("r", 21)).unwrap(), value] {
            wal::encode_entry(&mut against_log, Kind::Journal, &format::journal_key("r", 21), &v).unwrap();
        }
        for log in [against_sled, against_log] {
            std::fs::write(tmp.path().join(wal::WAL_FILE), &log).unwrap();
            let err = SledStore::open(tmp.path()).unwrap_err();
            assert!(err.to_string().contains(&format!("open store {shown}: replay the write-ahead log")), "{err}");
            assert!(err.to_string().contains("holds another value"), "{err}");
        }
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
            // A damaged tail is checkpointed away at once; zeros are kept as preallocated space.
            let kept = if case.starts_with("zeros") { bytes.len() as u64 } else { 0 };
            assert_eq!(wal_len(tmp.path()), kept, "{case}");
            assert_eq!(store.records("r").await.unwrap(), records[..expected], "{case}");
            assert_eq!(store.run("r").await.unwrap(), None, "{case}: the run record came after the damage");
        }
    }

    #[tokio::test]
    async fn version_1_and_2_stores_open_and_are_upgraded() {
        for old in [1u32, 2, 3, 4, 5] {
            let tmp = tempfile::tempdir().unwrap();
            let records = {
                let store = SledStore::open(tmp.path()).unwrap();
                let records = fill(&store, "r", 5).await;
                // Version 1 has everything in sled; version 2 may have some of it in the log.
                if old == 1 {
                    store.checkpoint().unwrap();
                } else {
                    store.flush().await.unwrap();
                }
                records
            };
            {
                // What the old version left: the same trees, its meta version (version 1: no `wal` file).
                let db = raw_db(tmp.path());
                db.open_tree("meta").unwrap().insert(META_FORMAT_VERSION, &old.to_be_bytes()).unwrap();
                db.flush().unwrap();
            }
            if old == 1 {
                std::fs::remove_file(tmp.path().join(wal::WAL_FILE)).unwrap();
            }
            let store = SledStore::open(tmp.path()).unwrap();
            assert_eq!(store.records("r").await.unwrap(), records, "version {old}");
            if old == 1 {
                assert_eq!(wal_len(tmp.path()), 0, "the log is created");
            }
            drop(store);
            let db = raw_db(tmp.path());
            let version = db.open_tree("meta").unwrap().get(META_FORMAT_VERSION).unwrap().unwrap();
            assert_eq!(version.as_ref(), FORMAT_VERSION.to_be_bytes(), "{old} upgraded to {FORMAT_VERSION}");
        }
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
    async fn a_checkpoint_of_more_entries_than_one_batch_writes_them_all_to_sled() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap();
        // 600 runs of 3 steps: 1800 journal records and 600 run records, several sled batches each.
        for r in 0..600 {
            let id = format!("r{r}");
            store.put_run(run_record(&id, r)).await.unwrap();
            for seq in 1..=3 {
                store.append(step(&id, seq)).await.unwrap();
            }
        }
        store.flush().await.unwrap();
        store.checkpoint().unwrap();
        assert_eq!(wal_len(tmp.path()), 0, "the checkpoint empties the log");
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);
        let store = SledStore::open(crashed.path()).unwrap();
        assert_eq!(store.runs().await.unwrap().len(), 600);
        for r in [0, 255, 256, 599] {
            let id = format!("r{r}");
            assert_eq!(store.run(&id).await.unwrap(), Some(run_record(&id, r)), "{id}");
            assert_eq!(store.records(&id).await.unwrap().iter().map(|s| s.seq).collect::<Vec<_>>(), [1, 2, 3], "{id}");
        }
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

    #[tokio::test]
    async fn a_snapshot_ahead_of_the_journal_is_dropped_and_the_run_continues_from_the_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SledStore::open(tmp.path()).unwrap().with_snapshot_interval(10);
        let flushed = fill(&store, "r", 7).await;
        store.flush().await.unwrap();
        // Steps 8-10 appended, never flushed; step 10 compacts into a snapshot at 10, which sled writes to
        // its own file (as it may at any time): the crash keeps the snapshot and loses the steps.
        for seq in 8..=10 {
            store.append(step("r", seq)).await.unwrap();
        }
        assert_eq!(store.snapshot("r").unwrap().map(|i| i.seq), Some(10));
        store.inner.db.flush().unwrap();
        let crashed = tempfile::tempdir().unwrap();
        crash_copy(tmp.path(), crashed.path());
        drop(store);

        let store = SledStore::open(crashed.path()).unwrap().with_snapshot_interval(10);
        assert_eq!(store.records("r").await.unwrap(), flushed);
        assert_eq!(store.snapshot("r").unwrap().map(|i| i.seq), Some(10), "the crash kept the snapshot");
        assert_eq!(store.load("r").await.unwrap(), RunImage::fold("r", &flushed).unwrap(), "from the journal");
        assert!(store.snapshot("r").unwrap().is_none(), "the stale snapshot is removed");
        // The run goes on with other steps 8-12 than the lost ones; compaction at 10 starts from the journal.
        let mut records = flushed;
        for seq in 8..=12 {
            let mut record = step("r", seq);
            record.delta = vec![("other".into(), serde_json::json!(seq * 100))];
            store.append(record.clone()).await.unwrap();
            records.push(record);
        }
        let image = RunImage::fold("r", &records).unwrap();
        assert_eq!(image.state.get("other"), Some(&serde_json::json!(1200)));
        assert_eq!(store.snapshot("r").unwrap().map(|i| i.seq), Some(10));
        assert_eq!(store.load("r").await.unwrap(), image);
    }

    #[tokio::test]
    async fn a_store_that_exists_is_used_without_writing_to_sled() {
        let tmp = tempfile::tempdir().unwrap();
        drop(SledStore::open(tmp.path()).unwrap());
        // sled's files after the creation (its snapshot of its own written then, once).
        let sled_files = |dir: &Path| -> BTreeMap<String, Vec<u8>> {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| e.file_type().unwrap().is_file() && e.file_name() != wal::WAL_FILE)
                .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
                .collect()
        };
        let before = sled_files(tmp.path());
        assert!(before.keys().any(|name| name.starts_with("snap.")), "{:?}", before.keys());
        for turn in 0..3u64 {
            let store = SledStore::open(tmp.path()).unwrap();
            store.put_run(run_record("r", turn)).await.unwrap();
            for seq in 1..=5 {
                store.append(step("r", turn * 5 + seq)).await.unwrap();
            }
            store.flush().await.unwrap();
            store.put_run(run_record("r", turn + 100)).await.unwrap();
            drop(store);
            assert_eq!(sled_files(tmp.path()), before, "turn {turn}: sled's files are byte for byte the same");
        }
        let store = SledStore::open(tmp.path()).unwrap();
        assert_eq!(store.records("r").await.unwrap(), (1..=15).map(|seq| step("r", seq)).collect::<Vec<_>>());
        assert_eq!(store.run("r").await.unwrap(), Some(run_record("r", 102)));
        assert_eq!(store.runs().await.unwrap(), [run_record("r", 102)]);
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
