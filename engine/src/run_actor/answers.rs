//! [`Answers`]: the human answers a run holds — given before or during the run, each used once — and the
//! questions it was suspended with (with the agent data that continues them).

use std::collections::{BTreeMap, BTreeSet};

use ractor::RpcReplyPort;
use serde_json::Value;

use crate::pending::PendingResponse;

/// The answers of one run, by response id, owned by the run's actor. See the module documentation.
pub(crate) struct Answers {
    /// Answers not used yet.
    given: BTreeMap<String, Value>,
    /// Response ids whose answers were used.
    used: BTreeSet<String>,
    /// The pending responses with agent data ([`PendingResponse::data`]) the run was suspended with, by id.
    suspensions: BTreeMap<String, PendingResponse>,
    /// Who waits for the answer to which response id (pending-mode human agents): told when it is given.
    waiters: Vec<(String, RpcReplyPort<()>)>,
    /// The questions that timed out in this session, for the run's record.
    timed_out: Vec<PendingResponse>,
}

impl Default for Answers {
    fn default() -> Self {
        Answers::new(BTreeMap::new(), Vec::new())
    }
}

impl Answers {
    /// The answers given for the run, and the questions it was suspended with.
    pub(crate) fn new(given: BTreeMap<String, Value>, suspensions: Vec<PendingResponse>) -> Self {
        Answers {
            given,
            used: BTreeSet::new(),
            suspensions: suspensions.into_iter().map(|p| (p.id.clone(), p)).collect(),
            waiters: Vec::new(),
            timed_out: Vec::new(),
        }
    }

    /// Question `pending` timed out and was acted on: it is used (no answer is taken for it any more) and
    /// kept for the run's record ([`crate::RunRecord::timed_out`]).
    pub(crate) fn time_out(&mut self, pending: PendingResponse) {
        self.mark_used(&pending.id);
        self.timed_out.push(pending);
    }

    /// The questions that timed out since the last call.
    pub(crate) fn take_timed_out(&mut self) -> Vec<PendingResponse> {
        std::mem::take(&mut self.timed_out)
    }

    /// Uses the answer to response `id`, if one was given.
    pub(crate) fn take(&mut self, id: &str) -> Option<Value> {
        let answer = self.given.remove(id);
        if answer.is_some() {
            self.mark_used(id);
        }
        answer
    }

    /// The answer to response `id`, if one was given, left for a later [`Answers::take`].
    pub(crate) fn peek(&self, id: &str) -> Option<Value> {
        self.given.get(id).cloned()
    }

    /// Records that the answer to `id` was used (one read from elsewhere, e.g. the run's stored record).
    pub(crate) fn mark_used(&mut self, id: &str) {
        self.used.insert(id.to_string());
    }

    /// The question with agent data the run was suspended with under `id`, while its answer is unused.
    pub(crate) fn suspension(&self, id: &str) -> Option<PendingResponse> {
        if self.used.contains(id) {
            return None;
        }
        self.suspensions.get(id).cloned()
    }

    /// The questions with agent data whose answers were not used.
    pub(crate) fn unresolved_suspensions(&self) -> Vec<PendingResponse> {
        self.suspensions.values().filter(|p| !self.used.contains(&p.id)).cloned().collect()
    }

    /// Records an answer delivered in-process and tells whoever waits for it.
    pub(crate) fn give(&mut self, id: &str, value: Value) {
        self.given.insert(id.to_string(), value);
        for (_, waiter) in extract(&mut self.waiters, |(w, _)| w == id) {
            let _ = waiter.send(());
        }
    }

    /// Tells `waiter` once an answer to `id` is given: at once when one is.
    pub(crate) fn notify_on_answer(&mut self, id: String, waiter: RpcReplyPort<()>) {
        if self.given.contains_key(&id) {
            let _ = waiter.send(());
            return;
        }
        // Waiters that gave up (their futures dropped) leave with the next one.
        self.waiters.retain(|(_, w)| !w.is_closed());
        self.waiters.push((id, waiter));
    }

    /// The answers not used (they stay recorded for a later resume).
    pub(crate) fn unused(&self) -> BTreeMap<String, Value> {
        self.given.clone()
    }
}

/// Removes and returns the elements of `v` for which `f` holds.
fn extract<T>(v: &mut Vec<T>, f: impl Fn(&T) -> bool) -> Vec<T> {
    let (out, keep) = std::mem::take(v).into_iter().partition(|x| f(x));
    *v = keep;
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn question(id: &str) -> PendingResponse {
        PendingResponse::new(id, "ok?", "ask")
    }

    #[test]
    fn an_answer_is_used_once_and_then_hides_its_suspension() {
        let mut answers =
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
    async fn a_waiter_is_told_when_its_answer_is_given_and_at_once_when_it_was() {
        let mut answers = Answers::default();
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        answers.notify_on_answer("gate".into(), tx.into());
        answers.give("other", json!(1));
        assert!(rx.try_recv().is_err(), "another response's answer does not wake it");
        answers.give("gate", json!("go"));
        assert_eq!(rx.await.ok(), Some(()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        answers.notify_on_answer("gate".into(), tx.into());
        assert_eq!(rx.await.ok(), Some(()), "given already: told at once");
        assert_eq!(answers.take("gate"), Some(json!("go")));
        assert_eq!(answers.unused(), [("other".to_string(), json!(1))].into_iter().collect());
    }
}
