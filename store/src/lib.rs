//! # agentic-store
//!
//! Checkpoint stores for `agentic`, all implementing [`agentic_engine::CheckpointStore`]:
//!
//! - [`MemoryStore`]: the journal, run records and images kept in process memory (tests, demos, runs that
//!   need no restart). Nothing survives the process.
//! - [`SledStore`]: an on-disk store in a [sled](https://docs.rs/sled/0.34.7) database directory. The journal
//!   is append-only, a compacted snapshot every N steps accelerates [`CheckpointStore::load`], and
//!   [`CheckpointStore::flush`] is one `fdatasync` of a write-ahead log in front of sled (replayed at open
//!   after a crash). The on-disk format is versioned and documented in `docs/store-format.md`.
//! - `PgStore` (feature `postgres`): runs in a PostgreSQL database, for more than one process. One committed
//!   transaction per [`CheckpointStore::flush`] (per step under `sync` durability); the schema is versioned and
//!   migrated by the store (`docs/store-format.md`, PostgreSQL). The feature adds tokio-postgres and
//!   deadpool-postgres (no TLS); the `agentic` binary enables it by default.
//!
//! All are cheap to clone (clones share the data) and can be handed to the engine as a
//! [`agentic_engine::StoreRef`] with `store_ref()`.
//!
//! [`CheckpointStore`]: agentic_engine::CheckpointStore
//! [`CheckpointStore::load`]: agentic_engine::CheckpointStore::load
//! [`CheckpointStore::flush`]: agentic_engine::CheckpointStore::flush
//!
//! Public surface: the modules are private and every public item is re-exported here, at one path
//! (`agentic_store::SledStore`, ...); `fuzzing` (only with `cfg(fuzzing)`) is for the fuzz targets, not an API.

mod format;
mod memory;
#[cfg(feature = "postgres")]
mod pg_capacity;
#[cfg(feature = "postgres")]
mod pg_listen;
#[cfg(feature = "postgres")]
mod pg_tls;
mod pg_url;
#[cfg(feature = "postgres")]
mod postgres;
mod sled_store;
mod wal;

pub use format::FORMAT_VERSION;

/// The decoders of the on-disk format and the write-ahead log's framing, for the fuzz targets in `fuzz/`
/// (built with `cfg(fuzzing)`); not an API.
#[cfg(fuzzing)]
#[doc(hidden)]
#[allow(missing_docs)]
pub mod fuzzing {
    use agentic_engine::{InvocationRecord, RunImage, RunRecord, StepRecord, StoreError};

    pub const WAL_FILE: &str = crate::wal::WAL_FILE;

    pub fn decode_step(run_id: &str, seq: u64, value: &[u8]) -> Result<StepRecord, StoreError> {
        crate::format::decode_step(run_id, seq, value)
    }

    pub fn decode_run(run_id: &str, value: &[u8]) -> Result<RunRecord, StoreError> {
        crate::format::decode_run(run_id, value)
    }

    pub fn decode_snapshot_head(run_id: &str, value: &[u8]) -> Result<(RunImage, u64), StoreError> {
        crate::format::decode_snapshot_head(run_id, value)
    }

    pub fn decode_chunk(run_id: &str, seq: u64, value: &[u8]) -> Result<Vec<InvocationRecord>, StoreError> {
        crate::format::decode_chunk(run_id, seq, value)
    }

    pub fn decode_spec(hash: &str, value: &[u8]) -> Result<String, StoreError> {
        crate::format::decode_spec(hash, value)
    }

    /// Appends a write-ahead entry (a journal record when `journal`, else a run record) to `buf`.
    pub fn encode_entry(buf: &mut Vec<u8>, journal: bool, key: &[u8], value: &[u8]) -> Result<(), String> {
        let kind = if journal { crate::wal::Kind::Journal } else { crate::wal::Kind::Run };
        crate::wal::encode_entry(buf, kind, key, value)
    }
}
pub use memory::{MemoryRun, MemoryStore};
pub use pg_url::{is_postgres_url, redact_url, with_database};
#[cfg(feature = "postgres")]
pub use postgres::{PG_SCHEMA_VERSION, PgStore};
pub use sled_store::{DEFAULT_SNAPSHOT_INTERVAL, SledStore};
