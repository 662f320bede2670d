//! A testing hook for crash tests: with `AGENTIC_TEST_KILL_AFTER_STEP=K` in the environment, the `run` and
//! `resume` commands kill their own process with SIGKILL right after step K is flushed to the store — a real
//! crash at an exact point, used by `tests/process/cli_crash.rs` and the randomized crash script. Never set it in
//! production.

use std::sync::atomic::{AtomicU64, Ordering};

use agentic_engine::{CheckpointStore, RunImage, RunRecord, StepRecord, StoreError, StoreRef};

/// The environment variable that arms the hook.
pub(crate) const ENV: &str = "AGENTIC_TEST_KILL_AFTER_STEP";

/// Wraps `store` when the hook is armed.
pub(crate) fn arm(store: StoreRef) -> StoreRef {
    match std::env::var(ENV).ok().and_then(|v| v.parse::<u64>().ok()) {
        Some(after) => std::sync::Arc::new(KillAfter { inner: store, after, last: AtomicU64::new(0) }),
        None => store,
    }
}

struct KillAfter {
    inner: StoreRef,
    after: u64,
    last: AtomicU64,
}

fn die() -> ! {
    let pid = std::process::id().to_string();
    let _ = std::process::Command::new("kill").args(["-9", &pid]).status();
    std::process::abort()
}

impl CheckpointStore for KillAfter {
    async fn append(&self, record: StepRecord) -> Result<(), StoreError> {
        self.last.fetch_max(record.seq, Ordering::SeqCst);
        self.inner.append_dyn(record).await
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush_dyn().await?;
        if self.last.load(Ordering::SeqCst) >= self.after {
            die();
        }
        Ok(())
    }

    async fn put_run(&self, run: RunRecord) -> Result<(), StoreError> {
        self.inner.put_run_dyn(run).await
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.inner.run_dyn(run_id).await
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.runs_dyn().await
    }

    async fn records(&self, run_id: &str) -> Result<Vec<StepRecord>, StoreError> {
        self.inner.records_dyn(run_id).await
    }

    async fn load(&self, run_id: &str) -> Result<RunImage, StoreError> {
        self.inner.load_dyn(run_id).await
    }

    async fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.inner.flush_run_dyn(run_id).await?;
        if self.last.load(Ordering::SeqCst) >= self.after {
            die();
        }
        Ok(())
    }

    fn shared(&self) -> bool {
        self.inner.shared_dyn()
    }

    async fn acquire_lease(&self, run_id: &str) -> Result<Option<agentic_engine::Lease>, StoreError> {
        self.inner.acquire_lease_dyn(run_id).await
    }

    async fn renew_leases(&self) -> Result<Vec<String>, StoreError> {
        self.inner.renew_leases_dyn().await
    }

    async fn release_lease(&self, run_id: &str) -> Result<(), StoreError> {
        self.inner.release_lease_dyn(run_id).await
    }

    async fn takeover_candidates(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.takeover_candidates_dyn().await
    }

    async fn update_run(
        &self,
        run_id: &str,
        change: agentic_engine::RunUpdate,
    ) -> Result<Option<Result<RunRecord, String>>, StoreError> {
        self.inner.update_run_dyn(run_id, change).await
    }

    async fn put_spec(&self, text: &str) -> Result<String, StoreError> {
        self.inner.put_spec_dyn(text).await
    }

    async fn spec(&self, hash: &str) -> Result<Option<String>, StoreError> {
        self.inner.spec_dyn(hash).await
    }

    async fn request_cancel(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.inner.request_cancel_dyn(run_id).await
    }

    async fn records_from(&self, run_id: &str, from: u64) -> Result<Vec<StepRecord>, StoreError> {
        self.inner.records_from_dyn(run_id, from).await
    }

    async fn notify(&self, channel: &str, payloads: Vec<String>) -> Result<(), StoreError> {
        self.inner.notify_dyn(channel, payloads).await
    }

    async fn listen(&self, channels: Vec<String>) -> Result<Option<agentic_engine::NoticeReceiver>, StoreError> {
        self.inner.listen_dyn(channels).await
    }

    async fn capacity(
        &self,
        op: agentic_engine::limits::CapacityOp,
    ) -> Result<Option<agentic_engine::limits::CapacityAnswer>, StoreError> {
        self.inner.capacity_dyn(op).await
    }
}
