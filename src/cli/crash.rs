//! A testing hook for crash tests: with `AGENTIC_TEST_KILL_AFTER_STEP=K` in the environment, the `run` and
//! `resume` commands kill their own process with SIGKILL right after step K is flushed to the store — a real
//! crash at an exact point, used by `tests/process/cli_crash.rs` and the randomized crash script. Never set it in
//! production.

use std::sync::atomic::{AtomicU64, Ordering};

use agentic_engine::{DynCheckpointStore, StepRecord, StoreError, StoreLayer, StoreRef};

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

impl StoreLayer for KillAfter {
    fn inner(&self) -> &dyn DynCheckpointStore {
        &*self.inner
    }

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

    async fn flush_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.inner.flush_run_dyn(run_id).await?;
        if self.last.load(Ordering::SeqCst) >= self.after {
            die();
        }
        Ok(())
    }
}
