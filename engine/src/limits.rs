//! Rate limits of model endpoints (SPEC.md §3 `limits`): [`ModelLimits`] per provider + base URL + model,
//! shared by every run of the process through [`ProcessCapacity`], and by every server of a shared store
//! through [`crate::CheckpointStore::capacity`] (PostgreSQL). A call takes a [`CapacityPermit`] before it is
//! sent ([`crate::UsageView::acquire_capacity`]) and reports its tokens, or the provider's 429, when
//! it ends.
//!
//! The limiter is a generic cell rate algorithm (GCRA, the ATM Forum's; also nginx `limit_req` and Envoy):
//! one "next start" time per endpoint, so `requests_per_minute: 60` spaces calls one second apart and no
//! sixty-second window holds more than 60 starts; tokens are a debt paid at `tokens_per_minute` (a call waits
//! until the tokens of the calls before it are paid for, so a window holds at most the limit plus one call's
//! tokens); `max_concurrency` counts calls in flight (slots with an expiry on a shared store, so a killed
//! server's slots come back).

use std::sync::Arc;

pub use crate::capacity::{CapacityAnswer, CapacityOp, ModelLimits, ProcessCapacity, endpoint_key};
use crate::error::StoreError;

/// Where an endpoint's limiter state lives for one run: the process's, or its shared store's.
#[derive(Clone)]
pub(crate) enum CapacitySource {
    Process,
    Shared(crate::store::StoreRef),
}

impl CapacitySource {
    /// Carries out `op` here.
    pub(crate) async fn apply(&self, op: CapacityOp) -> Result<CapacityAnswer, StoreError> {
        match self {
            CapacitySource::Process => Ok(ProcessCapacity::global().apply(op)),
            CapacitySource::Shared(store) => match store.capacity_dyn(op.clone()).await? {
                Some(answer) => Ok(answer),
                None => Ok(ProcessCapacity::global().apply(op)),
            },
        }
    }
}

/// Capacity for one model call ([`crate::UsageView::acquire_capacity`]): holds the endpoint's
/// concurrency slot, if it has a `max_concurrency`, until it is finished or dropped.
pub struct CapacityPermit {
    pub(crate) inner: Option<Arc<PermitInner>>,
}

pub(crate) struct PermitInner {
    pub(crate) source: CapacitySource,
    pub(crate) key: String,
    pub(crate) limits: ModelLimits,
    pub(crate) slot: Option<(u32, String)>,
}

impl CapacityPermit {
    /// A permit for a model without limits.
    pub fn unlimited() -> Self {
        CapacityPermit { inner: None }
    }

    /// A handle that reports the provider's 429s for this call's endpoint while the call runs (the provider
    /// retries on its own); `None` for a model without limits.
    pub fn back_off_handle(&self) -> Option<BackOffHandle> {
        self.inner.clone().map(|inner| BackOffHandle { inner })
    }

    /// The call ended having used `tokens` (input plus output): they are paid for at the endpoint's
    /// `tokens_per_minute`, and the slot is given back.
    pub async fn finish(mut self, tokens: u64) {
        let Some(inner) = self.inner.take() else { return };
        let per = inner.limits.ms_per_token();
        if per > 0.0 && tokens > 0 {
            let debt_ms = (tokens as f64 * per).ceil() as u64;
            let op = CapacityOp::Spend { key: inner.key.clone(), now_ms: crate::time::now_ms(), debt_ms };
            if let Err(e) = inner.source.apply(op).await {
                tracing::warn!(endpoint = %inner.key, error = %e, "recording a model call's tokens in the limiter failed");
            }
        }
        release(&inner).await;
    }
}

/// Reports a provider's 429 for one endpoint ([`CapacityPermit::back_off_handle`]).
#[derive(Clone)]
pub struct BackOffHandle {
    inner: Arc<PermitInner>,
}

impl BackOffHandle {
    /// The provider answered 429: no call on the endpoint starts before `retry_after` from now (one request
    /// interval, at least a second, when the provider did not say). Recorded in the background.
    pub fn back_off(&self, retry_after: Option<std::time::Duration>) {
        let inner = self.inner.clone();
        let pause_ms = retry_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or_else(|| inner.limits.request_interval_ms().max(1000));
        let op =
            CapacityOp::BackOff { key: inner.key.clone(), until_ms: crate::time::now_ms().saturating_add(pause_ms) };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(e) = inner.source.apply(op).await {
                    tracing::warn!(endpoint = %inner.key, error = %e, "recording a provider's 429 in the limiter failed");
                }
            });
        }
    }
}

async fn release(inner: &PermitInner) {
    if let Some((slot, holder)) = &inner.slot {
        let op = CapacityOp::Release { key: inner.key.clone(), slot: *slot, holder: holder.clone() };
        if let Err(e) = inner.source.apply(op).await {
            tracing::warn!(endpoint = %inner.key, error = %e, "giving a concurrency slot back failed (it expires)");
        }
        ProcessCapacity::released().notify_waiters();
    }
}

impl Drop for CapacityPermit {
    fn drop(&mut self) {
        // Dropped unfinished (the call was cancelled or failed): give the slot back in the background.
        if let Some(inner) = self.inner.take()
            && inner.slot.is_some()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            handle.spawn(async move { release(&inner).await });
        }
    }
}
