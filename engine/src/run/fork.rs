//! Forking a run ("time travel"): a new run whose journal is the first N steps of another, continued from
//! there by a resume. The idea is LangGraph's time travel, where invoking a thread from an earlier checkpoint
//! forks it; here the checkpoint is a step of the journal.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{ForkError, StoreError};
use crate::run_actor::now_us;
use crate::status::RunStatus;
use crate::store::{ForkOrigin, Milestone, MilestoneKind, RunImage, RunRecord, StoreRef};

/// Forks run `run_id` after its step `at_seq`: writes a new run (id `new_run_id`, else a new UUID) whose
/// journal is a copy of the run's steps 1 to `at_seq` (same sequence numbers, the run id rewritten), and
/// returns its record. The original run is only read.
///
/// The new run is `running`, as if the process had stopped right after step `at_seq`: resuming it
/// (`agent.resume(id)` with the store, or `agentic resume`) rebuilds the state and the planners from those
/// steps and runs what comes after only; the steps in flight at that point (the rest of a parallel batch or
/// of a mapper's items, an async agent started and not finished) run again, and a human step that had not
/// completed by then asks again. The record keeps the run's name, fingerprint and source, has no pending
/// responses and no answers, records its lineage in [`RunRecord::forked_from`], and its milestones are the
/// run's before step `at_seq` followed by a `forked` one at `at_seq`.
///
/// `at_seq` 0 forks before the first step: an empty journal, which a resume runs from the start without
/// inputs (a turn's inputs are its first step, so fork at 1 to keep them).
///
/// # Errors
/// [`ForkError::UnknownRun`] when the store has no run `run_id`; [`ForkError::BeyondEnd`] when `at_seq` is past
/// its last step; [`ForkError::InvalidId`] and [`ForkError::IdTaken`] for a new id that is not a valid run id or already used
/// (by a run record or journal records); [`ForkError::Store`] when the store fails or the steps to copy do not
/// fold.
pub async fn fork(
    store: &StoreRef,
    run_id: &str,
    at_seq: u64,
    new_run_id: Option<String>,
) -> Result<RunRecord, ForkError> {
    let origin = store.run_dyn(run_id).await?.ok_or_else(|| ForkError::UnknownRun(run_id.to_string()))?;
    let new_id = new_run_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    crate::check_run_id(&new_id).map_err(ForkError::InvalidId)?;
    let records = store.records_dyn(run_id).await?;
    let last_seq = records.last().map_or(0, |r| r.seq);
    if at_seq > last_seq {
        return Err(ForkError::BeyondEnd { run_id: run_id.to_string(), at_seq, last_seq });
    }
    if store.run_dyn(&new_id).await?.is_some() || !store.records_dyn(&new_id).await?.is_empty() {
        return Err(ForkError::IdTaken(new_id));
    }
    let mut copy: Vec<_> = records.into_iter().take_while(|r| r.seq <= at_seq).collect();
    // The steps to copy must fold (gap-free from 1 to `at_seq`) before anything is written.
    let image = RunImage::fold(run_id, &copy)?;
    if image.seq != at_seq {
        return Err(StoreError::Corrupt {
            run_id: run_id.to_string(),
            record: format!("step {}", image.seq + 1),
            message: "missing from the journal".to_string(),
        }
        .into());
    }
    for r in &mut copy {
        r.run_id.clone_from(&new_id);
    }
    let now_ms = now_us() / 1000;
    let mut milestones: Vec<Milestone> = origin.milestones.into_iter().filter(|m| m.seq < at_seq).collect();
    milestones.push(Milestone {
        at_ms: now_ms,
        kind: MilestoneKind::Forked,
        seq: at_seq,
        pending: Vec::new(),
        answers: BTreeMap::new(),
        error: None,
        path: None,
        forked_from: Some(run_id.to_string()),
    });
    let record = RunRecord {
        run_id: new_id,
        name: origin.name,
        fingerprint: origin.fingerprint,
        status: RunStatus::Running,
        pending: Vec::new(),
        answers: BTreeMap::new(),
        detail: Value::Null,
        source: origin.source,
        spec_hash: origin.spec_hash,
        cancel_requested: false,
        created_at_ms: now_ms,
        updated_at_ms: now_ms,
        milestones,
        forked_from: Some(ForkOrigin { run_id: run_id.to_string(), at_seq }),
        timed_out: Vec::new(),
        tenant: origin.tenant,
        answered_by: BTreeMap::new(),
    };
    // The journal first: a crash before the record leaves steps without a run, whose id stays taken, never
    // a run record over part of its journal.
    for r in copy {
        store.append_dyn(r).await?;
    }
    store.put_run_dyn(record.clone()).await?;
    store.flush_dyn().await?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::store::StepRecord;

    fn milestone(kind: MilestoneKind, seq: u64) -> Milestone {
        Milestone {
            at_ms: seq,
            kind,
            seq,
            pending: Vec::new(),
            answers: BTreeMap::new(),
            error: None,
            path: None,
            forked_from: None,
        }
    }

    /// A run `r` of `steps` steps, each writing `k<seq>`, suspended after step 2 and resumed.
    async fn store_with_run(steps: u64) -> StoreRef {
        let store: StoreRef = Arc::new(crate::ephemeral::EphemeralStore::default());
        for seq in 1..=steps {
            let rec =
                StepRecord { delta: vec![(format!("k{seq}"), json!(seq))], ..StepRecord::new("r", seq, "root/0") };
            store.append_dyn(rec).await.unwrap();
        }
        store
            .put_run_dyn(RunRecord {
                run_id: "r".into(),
                name: "flow".into(),
                fingerprint: "f1".into(),
                status: RunStatus::Completed,
                pending: Vec::new(),
                answers: BTreeMap::from([("left".to_string(), json!("over"))]),
                detail: json!("done"),
                source: Some("flow.yaml".into()),
                spec_hash: None,
                cancel_requested: false,
                created_at_ms: 1,
                updated_at_ms: 2,
                milestones: vec![
                    milestone(MilestoneKind::Started, 0),
                    milestone(MilestoneKind::Suspended, 2),
                    milestone(MilestoneKind::Resumed, 2),
                    milestone(MilestoneKind::Completed, steps),
                ],
                forked_from: None,
                timed_out: Vec::new(),
                tenant: None,
                answered_by: BTreeMap::new(),
            })
            .await
            .unwrap();
        store
    }

    #[tokio::test]
    async fn a_fork_copies_the_first_steps_under_its_own_id_and_records_its_origin() {
        let store = store_with_run(5).await;
        let before = (store.run_dyn("r").await.unwrap(), store.records_dyn("r").await.unwrap());
        let rec = fork(&store, "r", 3, Some("f".into())).await.unwrap();
        assert_eq!((rec.run_id.as_str(), rec.name.as_str(), rec.fingerprint.as_str()), ("f", "flow", "f1"));
        assert_eq!(
            (rec.status, rec.source.as_deref(), &rec.detail),
            (RunStatus::Running, Some("flow.yaml"), &json!(null))
        );
        assert!(rec.pending.is_empty() && rec.answers.is_empty());
        assert_eq!(rec.forked_from, Some(ForkOrigin { run_id: "r".into(), at_seq: 3 }));
        let kinds: Vec<(&str, u64)> = rec.milestones.iter().map(|m| (m.kind.as_str(), m.seq)).collect();
        assert_eq!(kinds, [("started", 0), ("suspended", 2), ("resumed", 2), ("forked", 3)]);
        assert_eq!(rec.milestones[3].forked_from.as_deref(), Some("r"));
        assert_eq!(store.run_dyn("f").await.unwrap(), Some(rec));
        let copied = store.records_dyn("f").await.unwrap();
        assert_eq!(
            copied.iter().map(|r| (r.run_id.as_str(), r.seq)).collect::<Vec<_>>(),
            [("f", 1), ("f", 2), ("f", 3)]
        );
        for (c, o) in copied.iter().zip(&before.1) {
            assert_eq!(StepRecord { run_id: "r".into(), ..c.clone() }, *o, "only the run id changes");
        }
        assert_eq!((store.run_dyn("r").await.unwrap(), store.records_dyn("r").await.unwrap()), before);
        // Before the first step, and after the last.
        assert!(store_steps(&store, fork(&store, "r", 0, Some("f0".into())).await.unwrap()).await.is_empty());
        assert_eq!(store_steps(&store, fork(&store, "r", 5, Some("f5".into())).await.unwrap()).await.len(), 5);
        // Without an id: a new UUID.
        let rec = fork(&store, "r", 1, None).await.unwrap();
        assert_eq!(rec.run_id.len(), 36);
    }

    async fn store_steps(store: &StoreRef, rec: RunRecord) -> Vec<StepRecord> {
        store.records_dyn(&rec.run_id).await.unwrap()
    }

    #[tokio::test]
    async fn a_fork_is_refused_with_what_is_wrong_and_writes_nothing() {
        let store = store_with_run(5).await;
        let err = fork(&store, "nope", 1, None).await.unwrap_err();
        assert_eq!(err.to_string(), "no run `nope` in the store");
        let err = fork(&store, "r", 6, Some("f".into())).await.unwrap_err();
        assert_eq!(err.to_string(), "cannot fork run `r` at step 6: it has 5 steps (fork at 0 to 5)");
        let err = fork(&store, "r", 2, Some("r".into())).await.unwrap_err();
        assert_eq!(err.to_string(), "run id `r` is already used in the store");
        let err = fork(&store, "r", 2, Some(" ".into())).await.unwrap_err();
        assert_eq!(err.to_string(), format!("the new run's id ` ` is blank {}", super::super::run_id::RUN_ID_RULE));
        // Journal records without a run record (a fork that stopped half-way) also take the id.
        store.append_dyn(StepRecord::new("orphan", 1, "root/0")).await.unwrap();
        let err = fork(&store, "r", 2, Some("orphan".into())).await.unwrap_err();
        assert!(matches!(err, ForkError::IdTaken(ref id) if id == "orphan"), "{err}");
        assert_eq!(store.runs_dyn().await.unwrap().len(), 1, "no run was written");
        assert!(store.records_dyn("f").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_journal_with_a_gap_is_not_forked_across_it() {
        let store = store_with_run(2).await;
        store.append_dyn(StepRecord::new("r", 4, "root/0")).await.unwrap();
        let err = fork(&store, "r", 3, Some("f".into())).await.unwrap_err();
        assert_eq!(err.to_string(), "run `r`: record step 3 is corrupt: missing from the journal");
        assert!(store.run_dyn("f").await.unwrap().is_none());
    }
}
