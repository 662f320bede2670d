//! `agentic run` and `resume` on a shared store (PostgreSQL) hold the run's lease as a server does (SERVER.md
//! §4): a server cannot take over a run a live CLI executes, and takes over a dead CLI's run once its lease
//! expires. While it holds the lease the CLI renews it every third of the lease time, and stops the run when
//! the lease is lost or when a cancel is recorded for it anywhere.

use std::time::Duration;

use agentic_engine::{CancelHandle, Notice, StoreRef};
use tokio::task::JoinHandle;

use super::{EXIT_FAILED, EXIT_UNAVAILABLE};

/// The lease the CLI holds on a run; [`Held::release`] gives it up.
pub(crate) struct Held {
    store: StoreRef,
    run_id: String,
    keeper: JoinHandle<()>,
}

/// The variable that sets the CLI's lease time in milliseconds (default: the store's, 10 000).
pub(crate) const LEASE_ENV: &str = "AGENTIC_LEASE_MS";

/// The store's default lease time.
const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The lease time `AGENTIC_LEASE_MS` sets, if it is a number of milliseconds.
pub(crate) fn lease_time_from_env() -> Option<Duration> {
    std::env::var(LEASE_ENV).ok()?.parse::<u64>().ok().filter(|ms| *ms > 0).map(Duration::from_millis)
}

/// Takes `run_id`'s lease on a shared store (`None` on a store one process holds); prints why not and returns
/// the exit code when another process executes the run (75, in use: SPEC.md §2) or the store fails (75 when
/// unreachable, else 1).
pub(crate) fn take(
    rt: &tokio::runtime::Runtime,
    store: &StoreRef,
    run_id: &str,
    cancel: &CancelHandle,
) -> Result<Option<Held>, u8> {
    if !store.shared_dyn() {
        return Ok(None);
    }
    let lease_time = lease_time_from_env().unwrap_or(DEFAULT_LEASE);
    // A holder that died (a `kill -9`) keeps the lease until it expires: wait that long, at most.
    let give_up = std::time::Instant::now() + lease_time + Duration::from_secs(1);
    let mut told = false;
    loop {
        match rt.block_on(store.acquire_lease_dyn(run_id)) {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < give_up => {
                if !told {
                    eprintln!(
                        "run `{run_id}`: another process holds its lease; waiting up to {} s for it to end or expire",
                        (lease_time + Duration::from_secs(1)).as_secs()
                    );
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // In use by another process: 75, as a store in use (SPEC.md §2).
            Ok(None) => {
                eprintln!(
                    "error: run `{run_id}` is executing in another process (a server or another `agentic` holds its \
                     lease); watch it with `agentic show {run_id}`, and try again once it stops"
                );
                return Err(EXIT_UNAVAILABLE);
            }
            // The store's own error names it; unreachable is 75 too.
            Err(e) if e.is_unavailable() => {
                eprintln!("error: {e}; try again once it is back");
                return Err(EXIT_UNAVAILABLE);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return Err(EXIT_FAILED);
            }
        }
    }
    let renew_every = lease_time / 3;
    let (store2, run, cancel) = (store.clone(), run_id.to_string(), cancel.clone());
    let keeper = rt.spawn(async move {
        let mut notices = match store2.listen_dyn(vec!["agentic_cancel".to_string()]).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("cannot listen for cancels (they are seen at the next renewal): {e}");
                None
            }
        };
        let mut renew_at = tokio::time::Instant::now() + renew_every;
        loop {
            // Messages of other runs do not delay the renewal: it is due at a fixed time.
            let message = match &mut notices {
                Some(rx) => tokio::time::timeout_at(renew_at, rx.recv()).await.ok(),
                None => {
                    tokio::time::sleep_until(renew_at).await;
                    None
                }
            };
            match message {
                Some(Some(Notice::Message { payload, .. })) => {
                    if payload == run && !cancel.is_cancelled() {
                        eprintln!("run `{run}`: cancelled (a cancel was recorded for it)");
                        cancel.cancel();
                    }
                    continue;
                }
                // The listening connection ended for good: renewals alone from now on.
                Some(None) => notices = None,
                // Reconnected, or the renewal is due.
                Some(Some(_)) | None => {}
            }
            if tokio::time::Instant::now() < renew_at {
                // Reconnected: a cancel may have been missed; read the record now, renew when due.
                cancel_if_recorded(&store2, &run, &cancel).await;
                continue;
            }
            renew_at = tokio::time::Instant::now() + renew_every;
            match store2.renew_leases_dyn().await {
                Ok(lost) if lost.contains(&run) => {
                    eprintln!("run `{run}`: its lease was lost to another process; it stops here");
                    cancel.cancel();
                    return;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot renew the run's lease: {e}"),
            }
            // A cancel recorded while the notice was missed.
            cancel_if_recorded(&store2, &run, &cancel).await;
        }
    });
    Ok(Some(Held { store: store.clone(), run_id: run_id.to_string(), keeper }))
}

/// Cancels the run when its record says a cancel was recorded for it.
async fn cancel_if_recorded(store: &StoreRef, run_id: &str, cancel: &CancelHandle) {
    if let Ok(Some(record)) = store.run_dyn(run_id).await
        && record.cancel_requested
        && !cancel.is_cancelled()
    {
        cancel.cancel();
    }
}

impl Held {
    /// Stops renewing and gives the lease up (another process may continue the run at once).
    pub(crate) fn release(self, rt: &tokio::runtime::Runtime) {
        self.keeper.abort();
        if let Err(e) = rt.block_on(self.store.release_lease_dyn(&self.run_id)) {
            tracing::warn!("cannot release the run's lease (it runs out by itself): {e}");
        }
    }
}
