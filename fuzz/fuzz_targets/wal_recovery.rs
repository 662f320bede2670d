//! Recovery of the sled store's write-ahead log at open: whatever entries the log holds (framed with valid
//! checksums, as a crash leaves them, followed by torn bytes), opening the store and reading every run never
//! panics. Input: entries `kind u8, key_len u8, key, value_len u16 LE, value`, then the torn tail.
#![no_main]

use agentic_engine::CheckpointStore;
use agentic_store::SledStore;
use agentic_store::fuzzing::{WAL_FILE, encode_entry};
use libfuzzer_sys::fuzz_target;

/// The log the input describes.
fn log(mut data: &[u8]) -> Vec<u8> {
    let mut wal = Vec::new();
    loop {
        let [kind, key_len, rest @ ..] = data else { break };
        let Some((key, rest)) = rest.split_at_checked(usize::from(*key_len)) else { break };
        let [lo, hi, rest @ ..] = rest else { break };
        let Some((value, rest)) = rest.split_at_checked(usize::from(u16::from_le_bytes([*lo, *hi]))) else {
            break;
        };
        if encode_entry(&mut wal, kind % 2 == 0, key, value).is_err() {
            break;
        }
        data = rest;
    }
    wal.extend_from_slice(data);
    wal
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store");
    drop(SledStore::open(&path).expect("a new store opens"));
    std::fs::write(path.join(WAL_FILE), log(data)).expect("the log is written");
    let Ok(store) = SledStore::open(&path) else { return };
    agentic_fuzz::runtime().block_on(async {
        let Ok(runs) = store.runs().await else { return };
        for run in runs {
            let _ = store.records(&run.run_id).await;
            let _ = store.load(&run.run_id).await;
        }
    });
});
