//! The sled store's write-ahead log, `<dir>/wal` (format: `docs/store-format.md`, "The write-ahead log").
//!
//! Every write that must survive a crash once flushed (a journal record, a run record) goes to sled *and* is
//! encoded into an in-memory pending buffer here. [`Wal::sync`] appends everything pending to the file in one
//! `write` and `fdatasync`s that file only: one device wait per flush, where sled's own durable flush costs
//! two (its `sync_file_range` and an `fdatasync` of its log). sled is made durable lazily, by a
//! [`Wal::checkpoint`] (sled flush + `fdatasync` of sled's log, then the file is truncated) when the file
//! exceeds [`CHECKPOINT_BYTES`] and when the store is closed; [`replay`] re-applies the file at open.
//!
//! Preallocation: the file grows in zero-filled chunks ([`GROW_MIN`] doubling up to [`GROW_MAX`]) ahead of
//! its entries, and entries are written into them in place. An `fdatasync` after an in-place write flushes
//! data only; after an append it must also commit the file's new size to the filesystem journal, a second
//! device write (the bench's two disk floors, "overwrite" and "append", measure the difference). A chunk's
//! size change is committed once, by the first sync after it was added. Replay stops at the first zero
//! header, so the zero tail is never read as entries; a checkpoint truncates the file (no stale entry can
//! follow a new one).
//!
//! Concurrency: appenders push under the `pending` lock (held for a memcpy); one writer at a time holds the
//! `writer` lock for the write, the `fdatasync` and the checkpoint, taking everything pending at once (group
//! commit across concurrent runs). An entry is pushed only after its sled write, so a checkpoint that takes
//! the pending buffer before flushing sled covers every entry it drops.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use sled::{Db, Tree};

/// The log's file name in the store directory.
pub(crate) const WAL_FILE: &str = "wal";

/// A checkpoint runs when a flush leaves the log longer than this (8 MiB: about 40 000 one-key steps).
pub(crate) const CHECKPOINT_BYTES: u64 = 8 * 1024 * 1024;

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
    pending: Mutex<Pending>,
    writer: Mutex<Writer>,
}

/// Entries pushed but not yet written to the file.
struct Pending {
    buf: Vec<u8>,
    /// Bytes ever pushed: the position just after the last pushed entry.
    end: u64,
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
pub(crate) type WalError = (&'static str, String);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Both locks guard plain data that every holder leaves consistent before any call that can fail.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wal {
    /// Opens (creating it if absent) the log file of the store in `dir`, whose sled log file is `sled_log`.
    /// The directory is `fsync`ed when the file is created, so that the file itself survives a power loss.
    pub(crate) fn open(dir: &Path, sled_log: File) -> Result<Wal, WalError> {
        let path = dir.join(WAL_FILE);
        let created = !path.exists();
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| ("open the write-ahead log", e.to_string()))?;
        if created {
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| ("fsync the directory", e.to_string()))?;
        }
        let len = file.metadata().map_err(|e| ("stat the write-ahead log", e.to_string()))?.len();
        Ok(Wal {
            file,
            sled_log,
            pending: Mutex::new(Pending { buf: Vec::new(), end: 0 }),
            // Until `replay` has read it, the whole file counts as entries (a checkpoint then truncates it).
            writer: Mutex::new(Writer { len, allocated: len, synced: 0, failed: false }),
        })
    }

    /// The file's length on disk.
    pub(crate) fn file_len(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Adds an entry to the pending buffer. Call it *after* the sled write the entry stands for (see the
    /// module doc), or use [`Wal::push_with`]. Returns whether the buffer asks for a [`Wal::spill`].
    pub(crate) fn push(&self, kind: Kind, key: &[u8], value: &[u8]) -> Result<bool, String> {
        self.push_with(kind, key, value, || Ok(())).map(|((), spill)| spill)
    }

    /// Runs `write` (the sled write) and then pushes the entry, holding the pending lock across both, so
    /// that entries for the same key are in the log in the order of their sled writes. Nothing is pushed
    /// when `write` fails. Returns `write`'s result and whether the buffer asks for a spill.
    pub(crate) fn push_with<T>(
        &self,
        kind: Kind,
        key: &[u8],
        value: &[u8],
        write: impl FnOnce() -> Result<T, String>,
    ) -> Result<(T, bool), String> {
        let mut pending = lock(&self.pending);
        let out = write()?;
        let before = pending.buf.len();
        encode_entry(&mut pending.buf, kind, key, value)?;
        pending.end += (pending.buf.len() - before) as u64;
        Ok((out, pending.buf.len() >= SPILL_BYTES))
    }

    /// The position just after the last entry pushed so far: [`Wal::sync`] to it makes them all durable.
    pub(crate) fn end(&self) -> u64 {
        lock(&self.pending).end
    }

    /// Writes the pending buffer to the file without `fdatasync`, unless a writer is busy (it will take the
    /// buffer). Keeps the buffer bounded while nothing flushes. Errors are remembered for the next sync.
    pub(crate) fn spill(&self) {
        if let Ok(mut writer) = self.writer.try_lock() {
            let (buf, _) = self.take();
            self.write(&mut writer, &buf).ok();
        }
    }

    /// Makes every entry pushed up to `target` durable: unless another writer already did, appends all that
    /// is pending in one write and `fdatasync`s the file; checkpoints when the file exceeds
    /// [`CHECKPOINT_BYTES`] or a previous write failed. Blocks: call it on a blocking thread.
    pub(crate) fn sync(&self, db: &Db, target: u64) -> Result<(), WalError> {
        let mut writer = lock(&self.writer);
        if writer.synced >= target {
            return Ok(());
        }
        if writer.failed {
            return self.checkpoint_locked(db, &mut writer);
        }
        let (buf, end) = self.take();
        self.write(&mut writer, &buf)?;
        if let Err(e) = self.file.sync_data() {
            writer.failed = true;
            return Err(("fdatasync the write-ahead log", e.to_string()));
        }
        writer.synced = end;
        if writer.len > CHECKPOINT_BYTES {
            self.checkpoint_locked(db, &mut writer)?;
        }
        Ok(())
    }

    /// Makes sled durable (its flush, then `fdatasync` of its log) and truncates the log file: everything
    /// pushed so far is then on stable storage in sled. Blocks.
    pub(crate) fn checkpoint(&self, db: &Db) -> Result<(), WalError> {
        self.checkpoint_locked(db, &mut lock(&self.writer))
    }

    fn checkpoint_locked(&self, db: &Db, writer: &mut Writer) -> Result<(), WalError> {
        // Entries pushed after this take stay pending (their sled writes may come after the flush below);
        // the ones taken were pushed after their sled writes, which the flush covers.
        let (_, end) = self.take();
        db.flush().map_err(|e| ("flush sled", e.to_string()))?;
        self.sled_log.sync_data().map_err(|e| ("fdatasync sled's log", e.to_string()))?;
        if writer.allocated > 0 || writer.failed {
            self.file.set_len(0).map_err(|e| ("truncate the write-ahead log", e.to_string()))?;
            // Durably empty: a stale entry replayed later could overwrite a newer run record.
            self.file.sync_data().map_err(|e| ("fdatasync the write-ahead log", e.to_string()))?;
            writer.len = 0;
            writer.allocated = 0;
            writer.failed = false;
        }
        writer.synced = end;
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
            return Err(("write the write-ahead log", "an earlier write failed; the next flush checkpoints".into()));
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
                Err(("write the write-ahead log", e.to_string()))
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

/// Re-applies the log file's entries to sled (journal records inserted when absent, run records
/// overwritten), then, when the file was not empty, makes sled durable and truncates the file. Stops at the
/// first torn or CRC-bad entry: a flush writes its entries before its `fdatasync`, so only the tail of the
/// last, unacknowledged write can be damaged.
pub(crate) fn replay(wal: &Wal, db: &Db, journal: &Tree, runs: &Tree) -> Result<Replayed, WalError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    (&wal.file).read_to_end(&mut bytes).map_err(|e| ("read the write-ahead log", e.to_string()))?;
    if bytes.is_empty() {
        return Ok(Replayed::default());
    }
    let (entries, valid) = decode_entries(&bytes);
    // The zero-filled tail of the last chunk is not a damaged entry.
    let dropped = bytes[valid..].iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    if entries.is_empty() && dropped == 0 {
        // Only zeros (a store closed by a crash before its first sync wrote anything): reuse the chunk.
        let mut writer = lock(&wal.writer);
        writer.len = 0;
        return Ok(Replayed::default());
    }
    for entry in &entries {
        let sled_err = |e: sled::Error| ("replay the write-ahead log", e.to_string());
        match entry.kind {
            Kind::Journal => {
                let swapped =
                    journal.compare_and_swap(entry.key, None as Option<&[u8]>, Some(entry.value)).map_err(sled_err)?;
                if let Err(existing) = swapped
                    && existing.current.as_deref() != Some(entry.value)
                {
                    return Err((
                        "replay the write-ahead log",
                        format!("journal key {:02x?} holds another value than the log's entry for it", entry.key),
                    ));
                }
            }
            Kind::Run => {
                runs.insert(entry.key, entry.value).map_err(sled_err)?;
            }
        }
    }
    wal.checkpoint(db)?;
    Ok(Replayed { entries: entries.len(), dropped_bytes: dropped as u64 })
}
