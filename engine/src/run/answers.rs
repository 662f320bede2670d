//! [`Answers`]: the human answers a run holds — given before or during the run, each used once — and the
//! questions it was suspended with (with the agent data that continues them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use super::util::lock;
use crate::pending::PendingResponse;

/// The answers of one run, by response id. See the module documentation.
pub(crate) struct Answers {
    /// Answers not used yet.
    given: Mutex<BTreeMap<String, Value>>,
    /// Response ids whose answers were used.
    used: Mutex<BTreeSet<String>>,
    /// The pending responses with agent data ([`PendingResponse::data`]) the run was suspended with, by id.
    suspensions: BTreeMap<String, PendingResponse>,
    /// Woken when an answer arrives in-process (pending-mode human agents wait on it).
    arrived: Notify,
    /// The questions that timed out in this session, for the run's record.
    timed_out: Mutex<Vec<PendingResponse>>,
}

impl Answers {
    /// The answers given for the run, and the questions it was suspended with.
    pub(crate) fn new(given: BTreeMap<String, Value>, suspensions: Vec<PendingResponse>) -> Self {
        Answers {
            given: Mutex::new(given),
            used: Mutex::new(BTreeSet::new()),
            suspensions: suspensions.into_iter().map(|p| (p.id.clone(), p)).collect(),
            arrived: Notify::new(),
            timed_out: Mutex::new(Vec::new()),
        }
    }

    /// Question `pending` timed out and was acted on: it is used (no answer is taken for it any more) and
    /// kept for the run's record ([`crate::RunRecord::timed_out`]).
    pub(crate) fn time_out(&self, pending: PendingResponse) {
        self.mark_used(&pending.id);
        lock(&self.timed_out).push(pending);
    }

    /// The questions that timed out since the last call.
    pub(crate) fn take_timed_out(&self) -> Vec<PendingResponse> {
        std::mem::take(&mut *lock(&self.timed_out))
    }

    /// Uses the answer to response `id`, if one was given.
    pub(crate) fn take(&self, id: &str) -> Option<Value> {
        let answer = lock(&self.given).remove(id);
        if answer.is_some() {
            self.mark_used(id);
        }
        answer
    }

    /// The answer to response `id`, if one was given, left for a later [`Answers::take`].
    pub(crate) fn peek(&self, id: &str) -> Option<Value> {
        lock(&self.given).get(id).cloned()
    }

    /// Records that the answer to `id` was used (one read from elsewhere, e.g. the run's stored record).
    pub(crate) fn mark_used(&self, id: &str) {
        lock(&self.used).insert(id.to_string());
    }

    /// The question with agent data the run was suspended with under `id`, while its answer is unused.
    pub(crate) fn suspension(&self, id: &str) -> Option<PendingResponse> {
        if lock(&self.used).contains(id) {
            return None;
        }
        self.suspensions.get(id).cloned()
    }

    /// The questions with agent data whose answers were not used.
    pub(crate) fn unresolved_suspensions(&self) -> Vec<PendingResponse> {
        let used = lock(&self.used);
        self.suspensions.values().filter(|p| !used.contains(&p.id)).cloned().collect()
    }

    /// Records an answer delivered in-process and wakes the waiters.
    pub(crate) fn give(&self, id: &str, value: Value) {
        lock(&self.given).insert(id.to_string(), value);
        self.arrived.notify_waiters();
    }

    /// A wake-up for the next answer given in-process: take it before looking, so none is missed.
    pub(crate) fn arrival(&self) -> Notified<'_> {
        self.arrived.notified()
    }

    /// Waits until the answer to `id` arrives, then uses it.
    pub(crate) async fn wait(&self, id: &str) -> Value {
        loop {
            let arrival = self.arrival();
            if let Some(v) = self.take(id) {
                return v;
            }
            arrival.await;
        }
    }

    /// The answers not used (they stay recorded for a later resume).
    pub(crate) fn unused(&self) -> BTreeMap<String, Value> {
        lock(&self.given).clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn question(id: &str) -> PendingResponse {
        PendingResponse::new(id, "ok?", "ask")
    }

    #[test]
    fn an_answer_is_used_once_and_then_hides_its_suspension() {
        let answers =
            Answers::new([("a".to_string(), json!("yes"))].into_iter().collect(), vec![question("a"), question("b")]);
        assert_eq!(answers.peek("a"), Some(json!("yes")));
        assert_eq!(answers.suspension("a").map(|p| p.id), Some("a".to_string()));
        assert_eq!(answers.take("a"), Some(json!("yes")));
        assert_eq!(answers.take("a"), None);
        assert_eq!(answers.suspension("a"), None);
        let open: Vec<String> = answers.unresolved_suspensions().into_iter().map(|p| p.id).collect();
        assert_eq!(open, ["b"]);
        answers.mark_used("b");
        assert!(answers.unresolved_suspensions().is_empty());
        assert!(answers.unused().is_empty());
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_its_answer_is_given() {
        let answers = Arc::new(Answers::new(BTreeMap::new(), Vec::new()));
        let waiter = tokio::spawn({
            let answers = answers.clone();
            async move { answers.wait("gate").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        answers.give("other", json!(1));
        answers.give("gate", json!("go"));
        assert_eq!(waiter.await.ok(), Some(json!("go")));
        assert_eq!(answers.unused(), [("other".to_string(), json!(1))].into_iter().collect());
    }
}
