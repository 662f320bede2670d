//! The in-memory store.
//!
//! Runs live in a map in process memory. Journal records are kept encoded, in the sled store's journal
//! value format (`docs/store-format.md`: compact JSON, one-letter fields, the run id and the sequence number
//! outside the value): a 5-step run's journal takes ~1 KiB instead of the ~8 KiB its decoded records hold
//! (strings, maps and vectors allocated one by one), which is what 10 000 kept runs cost. Encoding costs
//! about what dropping the decoded record would.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use agentic_engine::{
    AuditEntry, CheckpointStore, KeyRecord, RunRecord, ScheduleChange, ScheduleRecord, StepRecord, StoreError, StoreRef,
};

use crate::format::{apply_schedule_change, decode_step, encode_step};

/// One run as the memory store returns it (a decoded copy).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryRun {
    /// The run record, once [`CheckpointStore::put_run`] was called for the run.
    pub record: Option<RunRecord>,
    /// The journal, in sequence order.
    pub records: Vec<StepRecord>,
}

/// A checkpoint store in process memory. Cheap to clone: clones share the same runs.
///
/// [`CheckpointStore::flush`] does nothing and [`CheckpointStore::load`] folds the whole journal (no
/// snapshots): the store is meant for tests, demos and runs that need no restart.
///
/// Note that the inherent [`MemoryStore::run`] (a synchronous copy of everything kept about a run, for tests)
/// shadows the trait's async `run`; call that one as `CheckpointStore::run(&store, id)`.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    runs: Arc<Mutex<HashMap<String, StoredRun>>>,
    /// The spec archive: spec hash → text.
    specs: Arc<Mutex<HashMap<String, Arc<str>>>>,
    /// The schedules, by id.
    schedules: Arc<Mutex<BTreeMap<String, ScheduleRecord>>>,
    /// The API keys, oldest first, and the audit trail, oldest first (SERVER.md §8).
    access: Arc<Mutex<(Vec<KeyRecord>, Vec<AuditEntry>)>>,
}

/// One run as the store keeps it: the run record, and the journal encoded record by record.
#[derive(Debug, Default)]
struct StoredRun {
    /// Boxed: the map of runs holds its entries inline, with room for more (heaptrack at 10 000 runs: 644
    /// bytes of map per run, about 90 now, plus the record).
    record: Option<Box<RunRecord>>,
    /// `(seq, journal value)` in sequence order.
    records: Vec<(u64, Box<[u8]>)>,
}

impl StoredRun {
    fn decoded(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        self.records.iter().map(|(seq, value)| decode_step(run_id, *seq, value)).collect()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store as the engine holds it (a shared handle to the same runs).
    pub fn store_ref(&self) -> StoreRef {
        Arc::new(self.clone())
    }

    /// Same as [`MemoryStore::store_ref`] (the name the journal API used).
    pub fn journal(&self) -> StoreRef {
        self.store_ref()
    }

    /// A copy of everything kept about a run (its record and journal, decoded), if the run is known.
    pub fn run(&self, run_id: &str) -> Option<MemoryRun> {
        let runs = self.guard();
        let run = runs.get(run_id)?;
        // The values were encoded by this store: decoding them cannot fail short of a bug, which `records`
        // would report.
        Some(MemoryRun { record: run.record.as_deref().cloned(), records: run.decoded(run_id).ok()? })
    }

    /// Ids of all known runs (with a run record or at least one journal record), sorted.
    pub fn run_ids(&self) -> Vec<String> {
        let ids: BTreeSet<String> = self.guard().keys().cloned().collect();
        ids.into_iter().collect()
    }

    /// The runs, locked. A panic while the lock was held cannot leave them half-updated (every update is one
    /// map operation), so a poisoned lock is recovered: the engine's one policy.
    fn guard(&self) -> MutexGuard<'_, HashMap<String, StoredRun>> {
        self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> Result<MutexGuard<'_, HashMap<String, StoredRun>>, StoreError> {
        Ok(self.guard())
    }
}

impl CheckpointStore for MemoryStore {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        // Encoded before taking the lock.
        let entry = (record.seq, encode_step(&record)?.into_boxed_slice());
        let mut runs = self.lock()?;
        // The run usually exists: look it up without cloning its id.
        let records = match runs.get_mut(&record.run_id) {
            Some(run) => &mut run.records,
            None => &mut runs.entry(record.run_id).or_default().records,
        };
        // Kept in sequence order: two supervisors of one run may append their steps in the other order than
        // they numbered them (each takes its number, then appends).
        match records.last() {
            Some((last, _)) if *last > entry.0 => {
                let at = records.partition_point(|(seq, _)| *seq < entry.0);
                records.insert(at, entry);
            }
            _ => records.push(entry),
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Everything is in this process's memory: a flush waits for nothing.
    fn in_memory(&self) -> bool {
        true
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        let mut runs = self.lock()?;
        let entry = runs.entry(run.run_id.clone()).or_default();
        match &mut entry.record {
            Some(kept) => **kept = run,
            None => entry.record = Some(Box::new(run)),
        }
        Ok(())
    }

    async fn put_spec(&self, text: &str) -> Result<String, StoreError> {
        let hash = agentic_engine::spec_hash(text);
        let mut specs = self.specs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        specs.entry(hash.clone()).or_insert_with(|| Arc::from(text));
        Ok(hash)
    }

    async fn spec(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let specs = self.specs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(specs.get(hash).map(|t| t.to_string()))
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.lock()?.get(run_id).and_then(|r| r.record.as_deref().cloned()))
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut records: Vec<RunRecord> = self.lock()?.values().filter_map(|r| r.record.as_deref().cloned()).collect();
        records.sort_by(|a, b| b.updated_at_ms.cmp(&a.updated_at_ms).then_with(|| a.run_id.cmp(&b.run_id)));
        Ok(records)
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        match self.lock()?.get(run_id) {
            Some(run) => run.decoded(run_id),
            None => Ok(Vec::new()),
        }
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        Ok(self.schedules.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect())
    }

    async fn schedule(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        Ok(self.schedules.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(id).cloned())
    }

    /// Under the schedules' lock: a change never sees half of another.
    async fn change_schedule(
        &self,
        id: &str,
        change: ScheduleChange,
    ) -> Result<Result<Option<ScheduleRecord>, String>, StoreError> {
        let mut schedules = self.schedules.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let written = match apply_schedule_change(id, schedules.get(id).cloned(), change) {
            Ok(written) => written,
            Err(refused) => return Ok(Err(refused)),
        };
        match &written {
            Some(schedule) => schedules.insert(id.to_string(), schedule.clone()),
            None => schedules.remove(id),
        };
        Ok(Ok(written))
    }

    async fn put_key(&self, key: KeyRecord) -> Result<(), StoreError> {
        let mut access = self.access.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match access.0.iter_mut().find(|k| k.id == key.id) {
            Some(kept) => *kept = key,
            None => access.0.push(key),
        }
        Ok(())
    }

    async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        Ok(self.access.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0.clone())
    }

    async fn append_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        self.access.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1.push(entry);
        Ok(())
    }

    async fn audit(&self, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let access = self.access.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(access.1.iter().rev().take(limit).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::format::tests::{run_record, step};

    #[tokio::test]
    async fn schedules_are_changed_one_at_a_time_and_listed_by_id() {
        use agentic_engine::{Overlap, ScheduleSource};
        let store = MemoryStore::new();
        for id in ["b", "a"] {
            let s = ScheduleRecord::new(
                id,
                "spec",
                "* * * * *",
                "UTC",
                Default::default(),
                Overlap::Skip,
                ScheduleSource::Api,
                0,
            );
            let create: ScheduleChange = Box::new(move |c: &mut Option<ScheduleRecord>| {
                *c = Some(s);
                Ok(())
            });
            store.change_schedule(id, create).await.unwrap().unwrap();
        }
        let ids: Vec<String> = store.schedules().await.unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["a", "b"]);
        let refuse: ScheduleChange = Box::new(|_: &mut Option<ScheduleRecord>| Err("no".to_string()));
        assert_eq!(store.change_schedule("a", refuse).await.unwrap(), Err("no".to_string()));
        let delete: ScheduleChange = Box::new(|c: &mut Option<ScheduleRecord>| {
            *c = None;
            Ok(())
        });
        assert_eq!(store.change_schedule("a", delete).await.unwrap(), Ok(None));
        assert_eq!(store.schedule("a").await.unwrap(), None);
        assert!(store.schedule("b").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn steps_appended_out_of_order_are_read_in_sequence_order() {
        let store = MemoryStore::new();
        for seq in [1, 3, 2, 4] {
            store.append(StepRecord::new("r", seq, "root/0")).await.unwrap();
        }
        let seqs: Vec<u64> = store.records("r").await.unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        assert_eq!(store.load("r").await.unwrap().seq, 4, "the journal folds");
    }

    #[tokio::test]
    async fn keeps_runs_and_records_and_folds_them() {
        let store = MemoryStore::new();
        let shared = store.clone();
        assert!(store.records("r").await.unwrap().is_empty());
        assert_eq!(CheckpointStore::run(&store, "r").await.unwrap(), None);
        assert_eq!(store.load("r").await.unwrap(), agentic_engine::RunImage::new("r"));

        shared.put_run(run_record("a", 10)).await.unwrap();
        shared.put_run(run_record("b", 30)).await.unwrap();
        shared.put_run(run_record("c", 20)).await.unwrap();
        for seq in 1..=5 {
            shared.append(step("a", seq)).await.unwrap();
        }
        shared.flush().await.unwrap();

        let ids: Vec<String> = store.runs().await.unwrap().into_iter().map(|r| r.run_id).collect();
        assert_eq!(ids, ["b", "c", "a"], "most recently updated first");
        assert_eq!(store.run_ids(), ["a", "b", "c"]);
        assert_eq!(CheckpointStore::run(&store, "a").await.unwrap(), Some(run_record("a", 10)));
        let memory_run = store.run("a").unwrap();
        assert_eq!(memory_run.records.len(), 5);
        let records = store.records("a").await.unwrap();
        assert_eq!(records, memory_run.records);
        let image = store.load("a").await.unwrap();
        assert_eq!(image, agentic_engine::RunImage::fold("a", &records).unwrap());
        assert_eq!(image.seq, 5);
        let dyn_store = store.store_ref();
        assert_eq!(dyn_store.records_dyn("a").await.unwrap().len(), 5);
    }
}
