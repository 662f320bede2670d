//! The sled store's write-ahead log, `<dir>/wal` (format: `docs/store-format.md`, "The write-ahead log").
//!
//! Every write that must survive a crash once flushed (a journal record, a run record) is encoded into an
//! in-memory pending buffer here and kept, decoded, in the *unapplied* maps until a checkpoint: sled does not
//! see it until then. Reads merge the unapplied entries over sled ([`Wal::journal_range`], [`Wal::run`],
//! [`Wal::runs`]). [`Wal::sync`] appends everything pending to the file in one `write` and `fdatasync`s that
//! file only: one device wait per flush. sled is written only by a [`Wal::checkpoint`] (the unapplied entries
//! applied to sled, sled's flush + `fdatasync` of sled's log, then the file is truncated), when the file
//! exceeds [`CHECKPOINT_BYTES`]: a store that only writes through the log leaves sled's files untouched, so
//! that the next open of sled has no snapshot of its own to write and `fsync` (sled does so at every open that
//! follows a write to it). Closing the store ([`Wal::close`]) syncs the
//! file and keeps it; [`replay`] reads it back into the unapplied maps at open.
//!
//! Preallocation: the file grows in zero-filled chunks ([`GROW_MIN`] doubling up to [`GROW_MAX`]) ahead of
//! its entries, and entries are written into them in place. An `fdatasync` after an in-place write flushes
//! data only; after an append it must also commit the file's new size to the filesystem journal, a second
//! device write (the bench's two disk floors, "overwrite" and "append", measure the difference). A chunk's
//! size change is committed once, by the first sync after it was added. Replay stops at the first zero
//! header, so the zero tail is never read as entries; closing cuts the zero tail off; a checkpoint truncates
//! the file (no stale entry can follow a new one).
//!
//! Concurrency: writers push under the `pending` lock (a memcpy and a map insert); one writer at a time
//! holds the `writer` lock for the file write, the `fdatasync` and the checkpoint, taking everything pending
//! at once (group commit across concurrent runs). A checkpoint removes from the unapplied maps only the
//! entries it applied (by their position in the log), so an entry pushed while it runs stays visible.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use sled::{Batch, Db, Tree};

/// The log's file name in the store directory.
pub(crate) const WAL_FILE: &str = "wal";

/// A checkpoint runs when a flush leaves the log longer than this (8 MiB: about 40 000 one-key steps), and
/// at close when it is longer.
pub(crate) const CHECKPOINT_BYTES: u64 = 8 * 1024 * 1024;

/// Entries per sled batch in a checkpoint. sled keeps every node version a batch replaces until the batch
/// ends (epoch-based reclamation), so one batch of a whole 8 MiB log peaked at about 175 MiB of heap
/// (10 000 runs through `agentic serve`); batches of this size keep the peak near the log's own size.
const CHECKPOINT_BATCH: usize = 256;

/// An append writes the pending buffer to the file (without `fdatasync`) once it holds this much and no
/// flush is writing, so that a long run without flushes does not keep its whole journal in memory twice.
const SPILL_BYTES: usize = 1024 * 1024;

/// The first zero-filled chunk the file grows by; each later chunk is as long as the file was (doubling).
const GROW_MIN: u64 = 64 * 1024;
/// The longest chunk the file grows by.
pub(crate) const GROW_MAX: u64 = 1024 * 1024;

/// What the zero-filled chunks are written from.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Bytes before an entry's body: its length and its CRC-32, both `u32` little-endian.
const HEADER: usize = 8;

/// Entry kinds.
const KIND_JOURNAL: u8 = 1;
const KIND_RUN: u8 = 2;

/// What an entry re-applies at replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A journal record: the `journal` tree, inserted when absent (the value must be identical when present).
    Journal,
    /// A run record: the `runs` tree, overwritten.
    Run,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Journal => KIND_JOURNAL,
            Kind::Run => KIND_RUN,
        }
    }
}

/// Appends one encoded entry to `buf`: `len u32 LE, crc32(body) u32 LE, body`, where
/// `body = kind u8, key_len u32 LE, key, value`.
pub(crate) fn encode_entry(buf: &mut Vec<u8>, kind: Kind, key: &[u8], value: &[u8]) -> Result<(), String> {
    let too_long = || format!("a write-ahead entry of {} bytes is too long", key.len() + value.len());
    let key_len = u32::try_from(key.len()).map_err(|_| too_long())?;
    let body_len = u32::try_from(1 + 4 + key.len() + value.len()).map_err(|_| too_long())?;
    let start = buf.len();
    buf.reserve(HEADER + body_len as usize);
    buf.extend_from_slice(&body_len.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.push(kind.byte());
    buf.extend_from_slice(&key_len.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    let crc = crc32fast::hash(&buf[start + HEADER..]);
    buf[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// One decoded entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub(crate) kind: Kind,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
}

/// Decodes the entries of a log file's bytes, in order, up to the first entry that is torn (shorter than its
/// length says), fails its CRC, or does not parse: that one and everything after it were never acknowledged
/// (see [`replay`]). Returns the entries and the length of the valid prefix.
pub(crate) fn decode_entries(bytes: &[u8]) -> (Vec<Entry<'_>>, usize) {
    let mut entries = Vec::new();
    let mut at = 0;
    while let Some((entry, next)) = decode_entry(bytes, at) {
        entries.push(entry);
        at = next;
    }
    (entries, at)
}

fn decode_entry(bytes: &[u8], at: usize) -> Option<(Entry<'_>, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER)?)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().ok()?);
    let end = (at + HEADER).checked_add(len)?;
    let body = bytes.get(at + HEADER..end)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let (&kind, rest) = body.split_first()?;
    let kind = match kind {
        KIND_JOURNAL => Kind::Journal,
        KIND_RUN => Kind::Run,
        _ => return None,
    };
    let key_len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let key = rest.get(4..4usize.checked_add(key_len)?)?;
    let value = &rest[4 + key_len..];
    Some((Entry { kind, key, value }, end))
}

/// The write-ahead log of one open store.
pub(crate) struct Wal {
    /// The log file (written in place at [`Writer::len`]).
    file: File,
    /// sled's log file (`<dir>/db`), `fdatasync`ed by a checkpoint after sled's flush.
    sled_log: File,
    /// sled's `journal` and `runs` trees, which a checkpoint writes the unapplied entries to.
    journal: Tree,
    runs: Tree,
    pending: Mutex<Pending>,
    writer: Mutex<Writer>,
    /// `fdatasync`s made so far (of the log file and of sled's log): the device waits the flushes cost.
    syncs: AtomicU64,
}

/// Entries pushed but not yet written to the file, and every entry sled does not hold yet.
struct Pending {
    buf: Vec<u8>,
    /// Bytes ever pushed: the position just after the last pushed entry.
    end: u64,
    /// Journal records in the log (written or pending) that sled does not hold yet, by key.
    journal: BTreeMap<Box<[u8]>, Unapplied>,
    /// Run records likewise: the latest value of each run.
    runs: BTreeMap<Box<[u8]>, Unapplied>,
}

/// An entry sled does not hold yet.
#[derive(Clone)]
struct Unapplied {
    value: Arc<[u8]>,
    /// [`Pending::end`] just after it was pushed (0 for an entry read back by [`replay`]): a checkpoint that
    /// took the pending buffer up to a position applied it when it is at or before that position.
    at: u64,
}

/// A key and the value of an entry sled does not hold yet.
pub(crate) type KeyValue = (Box<[u8]>, Arc<[u8]>);

/// Why a journal record was not appended.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// The key is already journaled (in the log or in sled): the journal is append-only.
    Exists,
    /// The entry cannot be encoded (an `Other` error saying why), or sled could not be read.
    Failed(std::io::Error),
}

/// The state of the one writer.
struct Writer {
    /// Where the entries end: every byte before it is a whole entry; the bytes after it are zeros.
    len: u64,
    /// Length of the file (entries and the zero-filled tail).
    allocated: u64,
    /// Every entry pushed up to this position is on stable storage (in the file or in sled).
    synced: u64,
    /// A write or an `fdatasync` of the file failed: what was written is in doubt, so the next sync
    /// checkpoints instead (sled holds every pushed entry and its flush makes them durable).
    failed: bool,
}

/// The error of a log operation: what failed, and the I/O error.
pub(crate) type WalError = (&'static str, std::io::Error);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Both locks guard plain data that every holder leaves consistent before any call that can fail.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`lock`] without waiting: `None` only when another thread holds the lock (a poisoned lock is recovered).
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The keys from `lo` to `hi`, both included, as a range over unsized keys.
fn inclusive<'a>(lo: &'a [u8], hi: &'a [u8]) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    (Bound::Included(lo), Bound::Included(hi))
}

/// Encodes an entry into the pending buffer; returns the position just after it.
fn push_entry(pending: &mut Pending, kind: Kind, key: &[u8], value: &[u8]) -> Result<u64, String> {
    let before = pending.buf.len();
    encode_entry(&mut pending.buf, kind, key, value)?;
    pending.end += (pending.buf.len() - before) as u64;
    Ok(pending.end)
}

impl Wal {
    /// Opens (creating it if absent) the log file of the store in `dir`, whose sled log file is `sled_log` and
    /// whose sled trees are `journal` and `runs`. The directory is `fsync`ed when the file is created, so that
    /// the file itself survives a power loss. Call [`replay`] next.
    pub(crate) fn open(dir: &Path, sled_log: File, journal: Tree, runs: Tree) -> Result<Wal, WalError> {
        let path = dir.join(WAL_FILE);
        let created = !path.exists();
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| ("open the write-ahead log", e))?;
        if created {
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| ("fsync the directory", e))?;
        }
        let len = file.metadata().map_err(|e| ("stat the write-ahead log", e))?.len();
        Ok(Wal {
            file,
            sled_log,
            journal,
            runs,
            pending: Mutex::new(Pending { buf: Vec::new(), end: 0, journal: BTreeMap::new(), runs: BTreeMap::new() }),
            // Until `replay` has read it, the whole file counts as entries (a checkpoint then truncates it).
            writer: Mutex::new(Writer { len, allocated: len, synced: 0, failed: false }),
            syncs: AtomicU64::new(0),
        })
    }

    /// The file's length on disk.
    pub(crate) fn file_len(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Journals `value` under `key` unless the key is already journaled (in the log or in sled): pushes the
    /// entry and keeps it unapplied. Returns whether the buffer asks for a [`Wal::spill`].
    ///
    /// # Errors
    /// [`AppendError::Exists`] for a key already journaled, [`AppendError::Failed`] when sled cannot be read
    /// or the entry cannot be encoded.
    pub(crate) fn append_journal(&self, key: &[u8], value: &[u8]) -> Result<bool, AppendError> {
        let mut pending = lock(&self.pending);
        // Under the lock: two appends of one key cannot both pass the check.
        if pending.journal.contains_key(key)
            || self.journal.contains_key(key).map_err(|e| AppendError::Failed(std::io::Error::from(e)))?
        {
            return Err(AppendError::Exists);
        }
        let at = push_entry(&mut pending, Kind::Journal, key, value)
            .map_err(|e| AppendError::Failed(std::io::Error::other(e)))?;
        pending.journal.insert(key.into(), Unapplied { value: value.into(), at });
        Ok(pending.buf.len() >= SPILL_BYTES)
    }

    /// Replaces the run record under `key` with `value`: pushes the entry and keeps it unapplied. Returns
    /// whether the buffer asks for a [`Wal::spill`].
    ///
    /// # Errors
    /// When the entry cannot be encoded (too long).
    pub(crate) fn put_run(&self, key: &[u8], value: &[u8]) -> Result<bool, String> {
        let mut pending = lock(&self.pending);
        let at = push_entry(&mut pending, Kind::Run, key, value)?;
        pending.runs.insert(key.into(), Unapplied { value: value.into(), at });
        Ok(pending.buf.len() >= SPILL_BYTES)
    }

    /// The unapplied journal records with keys from `lo` to `hi` (both included), in key order (merge them over sled's).
    pub(crate) fn journal_range(&self, lo: &[u8], hi: &[u8]) -> Vec<KeyValue> {
        let pending = lock(&self.pending);
        pending.journal.range::<[u8], _>(inclusive(lo, hi)).map(|(k, u)| (k.clone(), u.value.clone())).collect()
    }

    /// The greatest key from `lo` to `hi` (both included) of an unapplied journal record, if any.
    pub(crate) fn last_journal_key(&self, lo: &[u8], hi: &[u8]) -> Option<Box<[u8]>> {
        lock(&self.pending).journal.range::<[u8], _>(inclusive(lo, hi)).next_back().map(|(k, _)| k.clone())
    }

    /// The unapplied run record under `key`, if any (it is newer than sled's).
    pub(crate) fn run(&self, key: &[u8]) -> Option<Arc<[u8]>> {
        lock(&self.pending).runs.get(key).map(|u| u.value.clone())
    }

    /// Every unapplied run record, in key order.
    pub(crate) fn runs(&self) -> Vec<KeyValue> {
        lock(&self.pending).runs.iter().map(|(k, u)| (k.clone(), u.value.clone())).collect()
    }

    /// The position just after the last entry pushed so far: [`Wal::sync`] to it makes them all durable.
    pub(crate) fn end(&self) -> u64 {
        lock(&self.pending).end
    }

    /// `fdatasync`s `file` (the log or sled's), counted in [`Wal::syncs`].
    fn sync_file(&self, file: &File) -> std::io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        file.sync_data()
    }

    /// Every entry pushed up to this position is on stable storage.
    #[cfg(test)]
    pub(crate) fn synced(&self) -> u64 {
        lock(&self.writer).synced
    }

    /// The `fdatasync`s made since the log was opened (of its file and of sled's log).
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Writes the pending buffer to the file without `fdatasync`, unless a writer is busy (it will take the
    /// buffer). Keeps the buffer bounded while nothing flushes. Errors are remembered for the next sync.
    pub(crate) fn spill(&self) {
        if let Some(mut writer) = try_lock(&self.writer) {
            let (buf, _) = self.take();
            self.write(&mut writer, &buf).ok();
        }
    }

    /// Makes every entry pushed up to `target` durable: unless another writer already did, appends all that
    /// is pending in one write and `fdatasync`s the file; checkpoints when the file exceeds
    /// [`CHECKPOINT_BYTES`] or a previous write failed. Returns the position up to which every entry is
    /// durable (at least `target`). Blocks: call it on a blocking thread.
    pub(crate) fn sync(&self, db: &Db, target: u64) -> Result<u64, WalError> {
        let mut writer = lock(&self.writer);
        if writer.synced >= target {
            return Ok(writer.synced);
        }
        if writer.failed {
            self.checkpoint_locked(db, &mut writer)?;
            return Ok(writer.synced);
        }
        let (buf, end) = self.take();
        self.write(&mut writer, &buf)?;
        if let Err(e) = self.sync_file(&self.file) {
            writer.failed = true;
            return Err(("fdatasync the write-ahead log", e));
        }
        writer.synced = end;
        if writer.len > CHECKPOINT_BYTES {
            self.checkpoint_locked(db, &mut writer)?;
        }
        Ok(writer.synced)
    }

    /// Writes every unapplied entry to sled, makes sled durable (its flush, then `fdatasync` of its log) and
    /// truncates the log file: everything pushed so far is then on stable storage in sled. Blocks.
    pub(crate) fn checkpoint(&self, db: &Db) -> Result<(), WalError> {
        self.checkpoint_locked(db, &mut lock(&self.writer))
    }

    /// Closes the log: checkpoints when the file is longer than [`CHECKPOINT_BYTES`] or a write failed;
    /// otherwise writes and `fdatasync`s what is pending (nothing when every entry is synced) and cuts the
    /// zero-filled tail off the file (not synced: a tail that comes back after a crash is zeros, which replay
    /// skips). sled is not written. Blocks.
    pub(crate) fn close(&self, db: &Db) -> Result<(), WalError> {
        let mut writer = lock(&self.writer);
        let end = lock(&self.pending).end;
        if writer.failed || writer.len > CHECKPOINT_BYTES {
            return self.checkpoint_locked(db, &mut writer);
        }
        if writer.synced < end {
            let (buf, end) = self.take();
            self.write(&mut writer, &buf)?;
            self.sync_file(&self.file).map_err(|e| ("fdatasync the write-ahead log", e))?;
            writer.synced = end;
        }
        if writer.allocated > writer.len {
            self.file.set_len(writer.len).map_err(|e| ("cut the zero tail of the write-ahead log", e))?;
            writer.allocated = writer.len;
        }
        Ok(())
    }

    fn checkpoint_locked(&self, db: &Db, writer: &mut Writer) -> Result<(), WalError> {
        // Everything pushed up to `end` is applied below; entries pushed after this take stay pending and
        // unapplied (the file is truncated, so they go to it after the truncation).
        let (journal, runs, end) = {
            let mut pending = lock(&self.pending);
            pending.buf.clear();
            let batches = |entries: &BTreeMap<Box<[u8]>, Unapplied>| {
                let entries: Vec<_> = entries.iter().collect();
                entries
                    .chunks(CHECKPOINT_BATCH)
                    .map(|chunk| {
                        let mut batch = Batch::default();
                        for (key, u) in chunk {
                            batch.insert(&***key, &*u.value);
                        }
                        batch
                    })
                    .collect::<Vec<_>>()
            };
            (batches(&pending.journal), batches(&pending.runs), pending.end)
        };
        // A crash between batches loses nothing: the log is truncated only after all of them and sled's
        // flush, and replay puts every entry back over sled's.
        for batch in journal {
            self.journal.apply_batch(batch).map_err(|e| ("write the journal to sled", std::io::Error::from(e)))?;
        }
        for batch in runs {
            self.runs.apply_batch(batch).map_err(|e| ("write the run records to sled", std::io::Error::from(e)))?;
        }
        db.flush().map_err(|e| ("flush sled", std::io::Error::from(e)))?;
        self.sync_file(&self.sled_log).map_err(|e| ("fdatasync sled's log", e))?;
        if writer.allocated > 0 || writer.failed {
            self.file.set_len(0).map_err(|e| ("truncate the write-ahead log", e))?;
            // Durably empty: a stale entry replayed later could overwrite a newer run record.
            self.sync_file(&self.file).map_err(|e| ("fdatasync the write-ahead log", e))?;
            writer.len = 0;
            writer.allocated = 0;
            writer.failed = false;
        }
        writer.synced = end;
        let mut pending = lock(&self.pending);
        pending.journal.retain(|_, u| u.at > end);
        pending.runs.retain(|_, u| u.at > end);
        Ok(())
    }

    /// Takes the pending buffer and the position just after it.
    fn take(&self) -> (Vec<u8>, u64) {
        let mut pending = lock(&self.pending);
        let capacity = pending.buf.capacity().min(SPILL_BYTES);
        (std::mem::replace(&mut pending.buf, Vec::with_capacity(capacity)), pending.end)
    }

    /// Writes `buf` after the last entry, growing the file by a zero-filled chunk first when it does not fit.
    /// On failure the file may hold part of it: marks the log failed, so that the next sync checkpoints and
    /// truncates it.
    fn write(&self, writer: &mut Writer, buf: &[u8]) -> Result<(), WalError> {
        if buf.is_empty() {
            return Ok(());
        }
        if writer.failed {
            return Err((
                "write the write-ahead log",
                std::io::Error::other("an earlier write failed; the next flush checkpoints"),
            ));
        }
        let end = writer.len + buf.len() as u64;
        let written = if end > writer.allocated { self.grow(writer, end) } else { Ok(()) }
            .and_then(|()| self.file.write_all_at(buf, writer.len));
        match written {
            Ok(()) => {
                writer.len = end;
                Ok(())
            }
            Err(e) => {
                writer.failed = true;
                Err(("write the write-ahead log", e))
            }
        }
    }

    /// Grows the file with zeros to hold at least `end` bytes: by as much as it holds (at least [`GROW_MIN`],
    /// at most [`GROW_MAX`]), rounded up to 4 KiB.
    fn grow(&self, writer: &mut Writer, end: u64) -> std::io::Result<()> {
        let step = writer.allocated.clamp(GROW_MIN, GROW_MAX);
        let target = end.max(writer.allocated + step).next_multiple_of(4096);
        let mut at = writer.allocated;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64);
            self.file.write_all_at(&ZEROS[..n as usize], at)?;
            at += n;
        }
        writer.allocated = target;
        Ok(())
    }
}

/// What a replay did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Replayed {
    /// Entries re-applied (journal records already in sled count too).
    pub(crate) entries: usize,
    /// Bytes after the last whole entry, dropped (a write that was never acknowledged).
    pub(crate) dropped_bytes: u64,
}

/// Reads the log file's entries back into the unapplied maps (journal records must not disagree with sled's,
/// a run record replaces the one before it) and continues the log after them. Stops at the first torn or
/// CRC-bad entry: a flush writes its entries before its `fdatasync`, so only the tail of the last,
/// unacknowledged write can be damaged. When such a damaged tail is found, checkpoints at once (sled gets
/// every entry before it and the file is truncated), so that no later entry is written next to it; a tail of
/// zeros is preallocated space and is kept. sled is not written otherwise.
pub(crate) fn replay(wal: &Wal, db: &Db) -> Result<Replayed, WalError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    (&wal.file).read_to_end(&mut bytes).map_err(|e| ("read the write-ahead log", e))?;
    let (entries, valid) = decode_entries(&bytes);
    // The zero-filled tail of the last chunk is not a damaged entry.
    let dropped = bytes[valid..].iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    {
        let mut pending = lock(&wal.pending);
        for entry in &entries {
            match entry.kind {
                Kind::Journal => {
                    let sled = wal
                        .journal
                        .get(entry.key)
                        .map_err(|e| ("replay the write-ahead log", std::io::Error::from(e)))?;
                    let in_log = pending.journal.get(entry.key).map(|u| u.value.clone());
                    let known = sled.as_deref().or(in_log.as_deref());
                    if known.is_some_and(|v| v != entry.value) {
                        return Err((
                            "replay the write-ahead log",
                            std::io::Error::other(format!(
                                "journal key {:02x?} holds another value than the log's entry for it",
                                entry.key
                            )),
                        ));
                    }
                    if sled.is_none() {
                        pending.journal.insert(entry.key.into(), Unapplied { value: entry.value.into(), at: 0 });
                    }
                }
                Kind::Run => {
                    pending.runs.insert(entry.key.into(), Unapplied { value: entry.value.into(), at: 0 });
                }
            }
        }
    }
    let mut writer = lock(&wal.writer);
    writer.len = valid as u64;
    if dropped > 0 {
        wal.checkpoint_locked(db, &mut writer)?;
    }
    Ok(Replayed { entries: entries.len(), dropped_bytes: dropped as u64 })
}
