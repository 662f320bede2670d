//! [`StepJournal`]: a run's steps on their way to its store — numbered gap-free, in order, and written as the
//! durability mode says (sync: each step committed before the next; async: by a writer task; exit: when the
//! run ends) — and the planners' states a restart of the actor tree resumes from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::error::AgentError;
use crate::lock::lock;
use crate::store::{Durability, RunImage, StepRecord, StoreRef};

/// What the async durability writer receives: records in order, and barriers that answer once every record
/// before them was appended.
// Barriers are rare (a restart); a record is what the channel carries.
#[allow(clippy::large_enum_variant)]
pub(crate) enum WriterMsg {
    Record(StepRecord),
    Barrier(oneshot::Sender<()>),
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
    /// Async durability: records go to a writer task in order. A linked-list channel (futures'), not tokio's:
    /// tokio's preallocates a block of 32 records per channel (12 KiB per run), which dominated the memory
    /// of many concurrent runs.
    async_writer: Option<futures::channel::mpsc::UnboundedSender<WriterMsg>>,
    /// Exit durability: records wait here until the run ends.
    exit_buffer: Mutex<Vec<StepRecord>>,
}

impl StepJournal {
    /// The journal of `run_id` into `store` (none: nothing is journaled), numbering from after `first_seq`.
    pub(crate) fn new(
        run_id: Arc<str>,
        store: Option<StoreRef>,
        durability: Durability,
        first_seq: u64,
        async_writer: Option<futures::channel::mpsc::UnboundedSender<WriterMsg>>,
    ) -> Self {
        StepJournal {
            run_id,
            store,
            durability,
            step_seq: AtomicU64::new(first_seq),
            append_turn: tokio::sync::Mutex::new(()),
            async_writer,
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
            Durability::Async => match &self.async_writer {
                Some(tx) => tx
                    .unbounded_send(WriterMsg::Record(record))
                    .map_err(|_| AgentError::internal("journal writer stopped")),
                None => store.append_dyn(record).await.map_err(failed),
            },
            Durability::Exit => {
                lock(&self.exit_buffer).push(record);
                Ok(())
            }
        }
    }

    /// Closes the async durability writer's channel: it ends once it has appended the records it holds.
    pub(crate) fn close_writer(&self) {
        if let Some(writer) = &self.async_writer {
            writer.close_channel();
        }
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
    /// readable (async durability's writer catches up; exit durability's buffer is appended, still unflushed),
    /// and folded; the run's actor restores the composites in progress from its planners.
    ///
    /// # Errors
    /// [`AgentError::Run`] without a journal, or when the store fails.
    pub(crate) async fn reload(&self) -> Result<RunImage, AgentError> {
        let run_err = |message: String| AgentError::Run { run_id: self.run_id.to_string(), message };
        let Some(store) = &self.store else { return Err(run_err("no journal to restart from".to_string())) };
        for record in self.take_exit_buffer() {
            store.append_dyn(record).await.map_err(|e| run_err(e.to_string()))?;
        }
        if let Some(writer) = &self.async_writer {
            let (tx, rx) = oneshot::channel();
            if writer.unbounded_send(WriterMsg::Barrier(tx)).is_ok() {
                let _ = rx.await;
            }
        }
        let image = store.load_dyn(&self.run_id).await.map_err(|e| run_err(e.to_string()))?;
        self.step_seq.store(image.seq, Ordering::Relaxed);
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ephemeral::EphemeralStore;
    use crate::store::CheckpointStore;

    fn journal(store: &EphemeralStore, durability: Durability) -> StepJournal {
        StepJournal::new(Arc::from("j"), Some(Arc::new(store.clone())), durability, 0, None)
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

    #[tokio::test]
    async fn without_a_store_nothing_is_journaled_and_a_restart_is_refused() {
        let j = StepJournal::new(Arc::from("j"), None, Durability::Sync, 0, None);
        assert!(!j.enabled());
        j.completion("root", None, vec![("k".into(), json!(1))], None, Vec::new()).await.unwrap();
        assert_eq!(j.last_seq(), 0);
        assert_eq!(j.reload().await.unwrap_err().to_string(), "run `j`: no journal to restart from");
    }
}
