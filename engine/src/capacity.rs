//! The rate limiter's state and operations (SPEC.md §3 `limits`): an endpoint's [`ModelLimits`], the
//! operations a limiter carries out ([`CapacityOp`], answered by [`CapacityAnswer`]) — in this process
//! ([`ProcessCapacity`]) or, on a shared store, in the store (`CheckpointStore::capacity`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::lock::lock;

/// Limits of one model endpoint (SPEC.md §3 `limits`): shared by every run that uses a model of that
/// provider, base URL and model name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelLimits {
    /// Calls started per minute (spaced evenly: 60 is one a second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Input plus output tokens per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
    /// Calls in flight at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

impl ModelLimits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none() && self.tokens_per_minute.is_none() && self.max_concurrency.is_none()
    }

    /// Milliseconds between two call starts (0 without `requests_per_minute`): a minute divided by the limit,
    /// 0.2 % wider up to 600 a minute (1002 ms for 60), so that the calls' arrivals at the provider, each a
    /// few milliseconds after its start, never put more than the limit in a sixty-second window; whole
    /// milliseconds above (the rounding up is the margin).
    pub fn request_interval_ms(&self) -> u64 {
        let Some(r) = self.requests_per_minute.filter(|r| *r > 0).map(u64::from) else { return 0 };
        if r <= 600 { 60_120u64.div_ceil(r) } else { 60_000u64.div_ceil(r) }
    }

    /// Milliseconds of waiting one token costs (0 without `tokens_per_minute`).
    pub fn ms_per_token(&self) -> f64 {
        self.tokens_per_minute.filter(|t| *t > 0).map_or(0.0, |t| 60_000.0 / t as f64)
    }
}

/// The key limits are shared by: `provider base_url model`.
pub fn endpoint_key(provider: &str, base_url: &str, model: &str) -> String {
    format!("{provider} {base_url} {model}")
}

/// One operation on an endpoint's limiter state, as [`ProcessCapacity`] and shared stores
/// ([`crate::CheckpointStore::capacity`]) carry it out; each is atomic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapacityOp {
    /// Takes the next start time of endpoint `key`: `max(now, next start, tokens paid until, backed off
    /// until)`; the endpoint's next start becomes that time plus `interval_ms`. Answer: [`CapacityAnswer::Start`].
    Reserve {
        /// Endpoint key ([`endpoint_key`]).
        key: String,
        /// Now, milliseconds since the Unix epoch.
        now_ms: u64,
        /// Milliseconds to the next start ([`ModelLimits::request_interval_ms`]).
        interval_ms: u64,
    },
    /// Gives back the start `start_ms` taken by [`CapacityOp::Reserve`] with `interval_ms` and not used (its
    /// call was cancelled while it waited): when no later start was taken since, the endpoint's next start
    /// goes back to `start_ms`; otherwise nothing changes.
    Unreserve {
        /// Endpoint key.
        key: String,
        /// The start that was reserved.
        start_ms: u64,
        /// The interval it was reserved with.
        interval_ms: u64,
    },
    /// When a call that waited for its start may really start: `max(tokens paid until, backed off until)` of
    /// `key`, as they are now (a provider's 429 or other calls' tokens may have pushed them back during the
    /// wait). Answer: [`CapacityAnswer::Start`] (0 for an endpoint never used).
    Peek {
        /// Endpoint key.
        key: String,
    },
    /// A call used tokens: the endpoint's token debt grows by `debt_ms` from `max(now, debt)`.
    Spend {
        /// Endpoint key.
        key: String,
        /// Now, milliseconds since the Unix epoch.
        now_ms: u64,
        /// Milliseconds the tokens cost ([`ModelLimits::ms_per_token`] times the tokens).
        debt_ms: u64,
    },
    /// The provider refused a call for its own limit (HTTP 429): nothing starts on `key` before `until_ms`.
    BackOff {
        /// Endpoint key.
        key: String,
        /// Milliseconds since the Unix epoch.
        until_ms: u64,
    },
    /// Takes one of `max` concurrency slots of `key` for `holder` until `expires_ms` (a slot whose holder's
    /// expiry passed is free). Answer: [`CapacityAnswer::Slot`].
    Hold {
        /// Endpoint key.
        key: String,
        /// Slots of the endpoint.
        max: u32,
        /// Who holds it (unique per call).
        holder: String,
        /// Now, milliseconds since the Unix epoch.
        now_ms: u64,
        /// When the slot frees itself if never released.
        expires_ms: u64,
    },
    /// Gives slot `slot` of `key` back (when `holder` still holds it).
    Release {
        /// Endpoint key.
        key: String,
        /// The slot.
        slot: u32,
        /// Who took it.
        holder: String,
    },
}

/// What a [`CapacityOp`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapacityAnswer {
    /// The call may start at this time (milliseconds since the Unix epoch).
    Start(u64),
    /// The slot taken, or none free.
    Slot(Option<u32>),
    /// Done.
    Done,
}

/// The limiter state of one endpoint.
#[derive(Debug, Default)]
struct Endpoint {
    next_start_ms: u64,
    tokens_paid_ms: u64,
    backed_off_ms: u64,
    /// Slot holders and their expiry.
    slots: HashMap<u32, (String, u64)>,
}

/// The limiter of this process: endpoint states in memory, shared by every run of the process.
#[derive(Debug, Default)]
pub struct ProcessCapacity {
    endpoints: Mutex<HashMap<String, Endpoint>>,
}

impl ProcessCapacity {
    /// The process's limiter.
    pub fn global() -> &'static ProcessCapacity {
        static GLOBAL: OnceLock<ProcessCapacity> = OnceLock::new();
        GLOBAL.get_or_init(ProcessCapacity::default)
    }

    /// Carries out `op` (see [`CapacityOp`]).
    pub fn apply(&self, op: CapacityOp) -> CapacityAnswer {
        let mut endpoints = lock(&self.endpoints);
        match op {
            CapacityOp::Reserve { key, now_ms, interval_ms } => {
                let e = endpoints.entry(key).or_default();
                let start = now_ms.max(e.next_start_ms).max(e.tokens_paid_ms).max(e.backed_off_ms);
                e.next_start_ms = start + interval_ms;
                CapacityAnswer::Start(start)
            }
            CapacityOp::Unreserve { key, start_ms, interval_ms } => {
                if let Some(e) = endpoints.get_mut(&key)
                    && e.next_start_ms == start_ms + interval_ms
                {
                    e.next_start_ms = start_ms;
                }
                CapacityAnswer::Done
            }
            CapacityOp::Peek { key } => {
                CapacityAnswer::Start(endpoints.get(&key).map_or(0, |e| e.tokens_paid_ms.max(e.backed_off_ms)))
            }
            CapacityOp::Spend { key, now_ms, debt_ms } => {
                let e = endpoints.entry(key).or_default();
                e.tokens_paid_ms = e.tokens_paid_ms.max(now_ms) + debt_ms;
                CapacityAnswer::Done
            }
            CapacityOp::BackOff { key, until_ms } => {
                let e = endpoints.entry(key).or_default();
                e.backed_off_ms = e.backed_off_ms.max(until_ms);
                CapacityAnswer::Done
            }
            CapacityOp::Hold { key, max, holder, now_ms, expires_ms } => {
                let e = endpoints.entry(key).or_default();
                let free = (0..max).find(|s| e.slots.get(s).is_none_or(|(_, exp)| *exp <= now_ms));
                if let Some(s) = free {
                    e.slots.insert(s, (holder, expires_ms));
                }
                CapacityAnswer::Slot(free)
            }
            CapacityOp::Release { key, slot, holder } => {
                if let Some(e) = endpoints.get_mut(&key)
                    && e.slots.get(&slot).is_some_and(|(h, _)| *h == holder)
                {
                    e.slots.remove(&slot);
                }
                CapacityAnswer::Done
            }
        }
    }
}

impl ProcessCapacity {
    /// Woken when a slot is given back in this process.
    pub(crate) fn released() -> &'static tokio::sync::Notify {
        static RELEASED: OnceLock<tokio::sync::Notify> = OnceLock::new();
        RELEASED.get_or_init(tokio::sync::Notify::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserve(c: &ProcessCapacity, now_ms: u64, interval_ms: u64) -> u64 {
        match c.apply(CapacityOp::Reserve { key: "k".into(), now_ms, interval_ms }) {
            CapacityAnswer::Start(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sixty_a_minute_start_a_second_apart() {
        let c = ProcessCapacity::default();
        let limits = ModelLimits { requests_per_minute: Some(60), ..ModelLimits::default() };
        assert_eq!(limits.request_interval_ms(), 1002);
        let per = |r| ModelLimits { requests_per_minute: Some(r), ..ModelLimits::default() }.request_interval_ms();
        assert_eq!((per(1), per(600), per(601), per(6000)), (60_120, 101, 100, 10));
        let starts: Vec<u64> = (0..4).map(|_| reserve(&c, 10_000, 1000)).collect();
        assert_eq!(starts, vec![10_000, 11_000, 12_000, 13_000]);
        // The last start given back: the next caller gets it; an earlier one cannot be given back any more.
        c.apply(CapacityOp::Unreserve { key: "k".into(), start_ms: 13_000, interval_ms: 1000 });
        c.apply(CapacityOp::Unreserve { key: "k".into(), start_ms: 11_000, interval_ms: 1000 });
        assert_eq!(reserve(&c, 10_500, 1000), 13_000);
        // Later than the queue: at once.
        assert_eq!(reserve(&c, 20_000, 1000), 20_000);
    }

    #[test]
    fn tokens_are_a_debt_and_429_backs_off() {
        let c = ProcessCapacity::default();
        let limits = ModelLimits { tokens_per_minute: Some(6000), ..ModelLimits::default() };
        assert_eq!(limits.ms_per_token(), 10.0);
        assert_eq!(reserve(&c, 1000, 0), 1000);
        c.apply(CapacityOp::Spend { key: "k".into(), now_ms: 1500, debt_ms: 3000 });
        assert_eq!(reserve(&c, 2000, 0), 4500);
        c.apply(CapacityOp::BackOff { key: "k".into(), until_ms: 9000 });
        assert_eq!(c.apply(CapacityOp::Peek { key: "k".into() }), CapacityAnswer::Start(9000));
        assert_eq!(c.apply(CapacityOp::Peek { key: "new".into() }), CapacityAnswer::Start(0));
        assert_eq!(reserve(&c, 5000, 0), 9000);
    }

    #[test]
    fn slots_are_counted_and_expire() {
        let c = ProcessCapacity::default();
        let hold = |holder: &str, now_ms| {
            c.apply(CapacityOp::Hold {
                key: "k".into(),
                max: 2,
                holder: holder.into(),
                now_ms,
                expires_ms: now_ms + 100,
            })
        };
        assert_eq!(hold("a", 0), CapacityAnswer::Slot(Some(0)));
        assert_eq!(hold("b", 0), CapacityAnswer::Slot(Some(1)));
        assert_eq!(hold("c", 50), CapacityAnswer::Slot(None));
        c.apply(CapacityOp::Release { key: "k".into(), slot: 0, holder: "a".into() });
        assert_eq!(hold("c", 50), CapacityAnswer::Slot(Some(0)));
        // b's slot expired.
        assert_eq!(hold("d", 120), CapacityAnswer::Slot(Some(1)));
    }
}
