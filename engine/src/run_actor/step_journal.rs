//! [`StepJournal`]: a run's steps on their way to its store — numbered gap-free, in order, and written as the
//! durability mode says (sync: each step committed before the next; async: appended at once and committed by a
//! flusher task while the run goes on; exit: when the run ends) — and the planners' states a restart of the
//! actor tree resumes from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{AgentError, StoreError};
use crate::lock::lock;
use crate::store::{Durability, RunImage, StepRecord, StoreRef};

/// What async durability's flusher watches: the last step appended, and whether the run has ended (no step
/// follows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Appended {
    seq: u64,
    ended: bool,
}

/// Async durability's flusher task of a store that writes to a device or a server, started at the run's first
/// step: it commits what the run appended while the run goes on.
struct Flusher {
    appended: watch::Sender<Appended>,
    task: JoinHandle<Result<bool, StoreError>>,
}

/// The journal of one run. See the module documentation.
pub(crate) struct StepJournal {
    run_id: Arc<str>,
    pub(crate) store: Option<StoreRef>,
    pub(crate) durability: Durability,
    step_seq: AtomicU64,
    /// Held while a step is numbered and handed to the store: steps reach it in their order, so a crash never
    /// leaves step n+1 journaled without step n (branches of one run journal concurrently).
    append_turn: tokio::sync::Mutex<()>,
    /// Async durability: each step is appended to the store at once (a buffered write in every store), then
    /// flushed at once by a store that keeps everything in memory ([`crate::CheckpointStore::in_memory`]: no
    /// task at all) or else committed by this task, started at the run's first step, which follows the run's
    /// appends. Nothing waits in a queue: 10 000 concurrent runs held 5 KiB each in the channels of per-run
    /// writer tasks, and 3 KiB each in flusher tasks of in-memory stores (docs/performance.md).
    flusher: Mutex<Option<Flusher>>,
    /// Exit durability: records wait here until the run ends.
    exit_buffer: Mutex<Vec<StepRecord>>,
}

impl StepJournal {
    /// The journal of `run_id` into `store` (none: nothing is journaled), numbering from after `first_seq`.
    pub(crate) fn new(run_id: Arc<str>, store: Option<StoreRef>, durability: Durability, first_seq: u64) -> Self {
        StepJournal {
            run_id,
            store,
            durability,
            step_seq: AtomicU64::new(first_seq),
            append_turn: tokio::sync::Mutex::new(()),
            flusher: Mutex::new(None),
            exit_buffer: Mutex::new(Vec::new()),
        }
    }

    /// Whether step records are wanted at all (skip building them otherwise).
    pub(crate) fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// The next gap-free step number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.step_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last step number handed out.
    pub(crate) fn last_seq(&self) -> u64 {
        self.step_seq.load(Ordering::Relaxed)
    }

    /// Journals one step according to the durability mode, numbering it as the run's next step (the `seq` it
    /// comes with is replaced).
    pub(crate) async fn step(&self, mut record: StepRecord) -> Result<(), AgentError> {
        let Some(store) = &self.store else { return Ok(()) };
        let failed = |e: crate::StoreError| self.write_failed(e);
        let turn = self.append_turn.lock().await;
        record.seq = self.next_seq();
        match self.durability {
            Durability::Sync => {
                let run_id = record.run_id.clone();
                store.append_dyn(record).await.map_err(failed)?;
                drop(turn);
                store.flush_run_dyn(&run_id).await.map_err(failed)
            }
            Durability::Async => {
                let seq = record.seq;
                let in_memory = store.in_memory_dyn();
                store.append_dyn(record).await.map_err(failed)?;
                if in_memory {
                    // Nothing to wait for: flushed at once, no task.
                    return store.flush_run_dyn(&self.run_id).await.map_err(failed);
                }
                let mut flusher = lock(&self.flusher);
                match flusher.as_ref() {
                    Some(f) => {
                        f.appended.send_replace(Appended { seq, ended: false });
                    }
                    // The first step: the run's flusher starts, with it to commit.
                    None => {
                        let (appended, rx) = watch::channel(Appended::default());
                        appended.send_replace(Appended { seq, ended: false });
                        let task = tokio::spawn(flush_behind(store.clone(), self.run_id.clone(), rx));
                        *flusher = Some(Flusher { appended, task });
                    }
                }
                Ok(())
            }
            Durability::Exit => {
                lock(&self.exit_buffer).push(record);
                Ok(())
            }
        }
    }

    /// Tells async durability's flusher task, if one was started, that the run has ended, and returns it: it
    /// stops without committing the steps appended since its last flush and says whether there are any (the
    /// run's final record commits them), or the error of a flush that failed.
    pub(crate) fn close_flusher(&self) -> Option<JoinHandle<Result<bool, StoreError>>> {
        let flusher = lock(&self.flusher).take()?;
        flusher.appended.send_modify(|a| a.ended = true);
        Some(flusher.task)
    }

    /// Journals the completion of the invocation at `path` outside any composite's step (the root's, an
    /// async agent's): its writes and its invocation record.
    pub(crate) async fn completion(
        &self,
        path: &str,
        layer: Option<&Arc<str>>,
        delta: Vec<(String, Value)>,
        invocation: Option<crate::journal::InvocationRecord>,
        calls: Vec<crate::tool_call::CallEntry>,
    ) -> Result<(), AgentError> {
        if !self.enabled() {
            return Ok(());
        }
        let item = layer.map(|l| l.to_string());
        let record = StepRecord { delta, invocation, item, calls, ..StepRecord::new(&*self.run_id, 0, path) };
        self.step(record).await
    }

    /// Journals the root's completion when the run's final record follows at once. See
    /// [`StepJournal::step_before_end`].
    pub(crate) async fn root_completion(
        &self,
        delta: Vec<(String, Value)>,
        invocation: Option<crate::journal::InvocationRecord>,
        calls: Vec<crate::tool_call::CallEntry>,
    ) -> Result<(), AgentError> {
        let record = StepRecord { delta, invocation, calls, ..StepRecord::new(&*self.run_id, 0, "root") };
        self.step_before_end(record).await
    }

    /// Journals a step after which the run only ends (the root's last step, the root's completion): under sync
    /// durability the record is appended unflushed and the final record's flush writes it in the same
    /// transaction (one commit instead of two). No agent runs in between: a crash there redoes what a crash
    /// just before the step's own commit would. Other modes: as [`StepJournal::step`].
    pub(crate) async fn step_before_end(&self, mut record: StepRecord) -> Result<(), AgentError> {
        let (Some(store), Durability::Sync) = (&self.store, self.durability) else {
            return self.step(record).await;
        };
        let turn = self.append_turn.lock().await;
        record.seq = self.next_seq();
        let appended = store.append_dyn(record).await;
        drop(turn);
        appended.map_err(|e| self.write_failed(e))
    }

    /// Journals `calls` made so far by the invocation at `path` (in mapper item layer `layer`) that is still
    /// running (SPEC.md §4). With `commit`, under sync durability, they are committed before this returns;
    /// without, they are appended and committed with the run's next commit (another call's, the step's).
    pub(crate) async fn calls(
        &self,
        path: &str,
        layer: Option<&Arc<str>>,
        calls: Vec<crate::tool_call::CallEntry>,
        commit: bool,
    ) -> Result<(), AgentError> {
        if !self.enabled() || calls.is_empty() {
            return Ok(());
        }
        let record =
            StepRecord { calls, item: layer.map(|l| l.to_string()), ..StepRecord::new(&*self.run_id, 0, path) };
        if commit { self.step(record).await } else { self.step_before_end(record).await }
    }

    /// A journal write that failed: [`AgentError::Store`], its cause (origin `store`) said as a journal write.
    fn write_failed(&self, e: crate::StoreError) -> AgentError {
        AgentError::Store { run_id: self.run_id.to_string(), cause: crate::Cause::from(e).context("journal write") }
    }

    /// Takes the records buffered by exit durability.
    pub(crate) fn take_exit_buffer(&self) -> Vec<StepRecord> {
        std::mem::take(&mut *lock(&self.exit_buffer))
    }

    /// The run as its journal has it, for a restart of its actor tree: everything journaled so far is made
    /// readable (exit durability's buffer is appended, still unflushed; the other modes appended each step at
    /// once), and folded; the run's actor restores the composites in progress from its planners.
    ///
    /// # Errors
    /// [`AgentError::Run`] without a journal, or when the store fails.
    pub(crate) async fn reload(&self) -> Result<RunImage, AgentError> {
        let run_err = |message: String| AgentError::Run { run_id: self.run_id.to_string(), message };
        let Some(store) = &self.store else { return Err(run_err("no journal to restart from".to_string())) };
        for record in self.take_exit_buffer() {
            store.append_dyn(record).await.map_err(|e| run_err(e.to_string()))?;
        }
        let image = store.load_dyn(&self.run_id).await.map_err(|e| run_err(e.to_string()))?;
        self.step_seq.store(image.seq, Ordering::Relaxed);
        Ok(image)
    }
}

/// Async durability's flusher task: commits the run's appends as `appended` reports them (each flush covers
/// every step appended before it, so the flush of step i overlaps step i+1 and later ones). Ends when the run
/// does, returning whether steps appended since its last flush are left for the run's final flush.
async fn flush_behind(
    store: StoreRef,
    run_id: Arc<str>,
    mut appended: watch::Receiver<Appended>,
) -> Result<bool, StoreError> {
    let mut flushed = 0;
    loop {
        let now = *appended.borrow_and_update();
        if now.ended {
            return Ok(now.seq != flushed);
        }
        if now.seq != flushed {
            store.flush_run_dyn(&run_id).await?;
            flushed = now.seq;
        }
        if appended.changed().await.is_err() {
            // The journal went away without saying that the run ended.
            return Ok(appended.borrow().seq != flushed);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ephemeral::EphemeralStore;
    use crate::store::CheckpointStore;

    fn journal(store: &EphemeralStore, durability: Durability) -> StepJournal {
        StepJournal::new(Arc::from("j"), Some(Arc::new(store.clone())), durability, 0)
    }

    fn step(path: &str) -> StepRecord {
        StepRecord { delta: vec![(path.to_string(), json!(1))], ..StepRecord::new("j", 99, path) }
    }

    #[tokio::test]
    async fn steps_are_numbered_from_one_whatever_they_came_with() {
        let store = EphemeralStore::default();
        let j = journal(&store, Durability::Sync);
        for path in ["root/0", "root/1", "root/2"] {
            j.step(step(path)).await.unwrap();
        }
        let seqs: Vec<(u64, String)> =
            store.records("j").await.unwrap().into_iter().map(|r| (r.seq, r.agent_path)).collect();
        assert_eq!(seqs, [(1, "root/0".to_string()), (2, "root/1".to_string()), (3, "root/2".to_string())]);
        assert_eq!(j.last_seq(), 3);
    }

    #[tokio::test]
    async fn exit_durability_holds_the_steps_until_the_run_ends_and_a_reload_reads_them() {
        let store = EphemeralStore::default();
        let j = journal(&store, Durability::Exit);
        j.step(step("root/0")).await.unwrap();
        j.step(step("root/1")).await.unwrap();
        assert!(store.records("j").await.unwrap().is_empty(), "nothing written before the end");
        // A restart of the tree reads everything journaled so far: the buffer is appended first.
        let image = j.reload().await.unwrap();
        assert_eq!(image.seq, 2);
        assert_eq!(store.records("j").await.unwrap().len(), 2);
        assert!(j.take_exit_buffer().is_empty());
        assert_eq!(j.next_seq(), 3);
    }

    /// A store whose flushes each wait for a permit of `gate` (a disk's commit), counted in `flushes`.
    struct SlowFlush {
        inner: EphemeralStore,
        gate: Arc<tokio::sync::Semaphore>,
        flushes: Arc<AtomicU64>,
    }

    impl crate::store::StoreLayer for SlowFlush {
        fn inner(&self) -> &dyn crate::store::DynCheckpointStore {
            &self.inner
        }

        /// A disk's store, for the journal.
        fn in_memory(&self) -> bool {
            false
        }

        async fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
            self.gate.acquire().await.map_err(|e| StoreError::backend(e.to_string()))?.forget();
            self.flushes.fetch_add(1, Ordering::SeqCst);
            crate::store::DynCheckpointStore::flush_run_dyn(&self.inner, run_id).await
        }
    }

    #[tokio::test]
    async fn async_durability_appends_each_step_at_once_and_flushes_inline_when_the_store_keeps_it_in_memory() {
        let store = EphemeralStore::default();
        let j = journal(&store, Durability::Async);
        j.step(step("root/0")).await.unwrap();
        j.step(step("root/1")).await.unwrap();
        assert_eq!(store.records("j").await.unwrap().len(), 2, "appended before the step returned");
        assert!(j.close_flusher().is_none(), "no task for a store with nothing to wait for");
    }

    #[tokio::test]
    async fn async_durability_commits_behind_the_run_and_leaves_the_last_steps_to_the_final_flush() {
        let (gate, flushes) = (Arc::new(tokio::sync::Semaphore::new(0)), Arc::new(AtomicU64::new(0)));
        let inner = EphemeralStore::default();
        let store = SlowFlush { inner: inner.clone(), gate: gate.clone(), flushes: flushes.clone() };
        let j = StepJournal::new(Arc::from("j"), Some(Arc::new(store)), Durability::Async, 0);
        let flushed = |n: u64| {
            let flushes = flushes.clone();
            async move {
                while flushes.load(Ordering::SeqCst) < n {
                    tokio::task::yield_now().await;
                }
            }
        };
        // The steps go on while the first flush waits for the disk.
        for path in ["root/0", "root/1", "root/2"] {
            j.step(step(path)).await.unwrap();
        }
        tokio::task::yield_now().await;
        assert_eq!(flushes.load(Ordering::SeqCst), 0);
        assert_eq!(inner.records("j").await.unwrap().len(), 3, "appended before each step returned");
        // One flush commits the three.
        gate.add_permits(1);
        flushed(1).await;
        j.step(step("root/3")).await.unwrap();
        gate.add_permits(1);
        flushed(2).await;
        // The run ends right after its fifth step: the flusher leaves it to the run's final flush.
        j.step(step("root/4")).await.unwrap();
        let task = j.close_flusher().expect("a flusher for a store that writes to a disk");
        assert!(task.await.unwrap().unwrap(), "step 5 is left for the final flush");
        assert_eq!(flushes.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn without_a_store_nothing_is_journaled_and_a_restart_is_refused() {
        let j = StepJournal::new(Arc::from("j"), None, Durability::Sync, 0);
        assert!(!j.enabled());
        j.completion("root", None, vec![("k".into(), json!(1))], None, Vec::new()).await.unwrap();
        assert_eq!(j.last_seq(), 0);
        assert_eq!(j.reload().await.unwrap_err().to_string(), "run `j`: no journal to restart from");
    }
}
