//! The sled store's on-disk encoding (see `docs/store-format.md`): keys, value envelopes, and the decoding
//! that turns bad bytes into [`StoreError::Corrupt`] naming the run and the record.

use agentic_engine::budget::Usage;
use agentic_engine::{
    CallEntry, InvocationRecord, PlannerState, RunImage, RunRecord, ScheduleChange, ScheduleRecord, StepRecord,
    StoreError, TokenUsage,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Version of the on-disk format this crate writes.
///
/// Stored in the `meta` tree under `format_version` (a big-endian `u32`). Version 2 added the write-ahead
/// log (`<dir>/wal`); version 3 added planner state changes to the journal (`state_patch`,
/// `inflight_change` and call numbers in planner states), which a reader of version 2 would ignore; version 4
/// added mapper items to steps (`m`, `me`) and planner states (`item`), which a reader of version 3 would
/// refuse; version 5 added the spec archive (the `specs` tree) and run records naming their spec text
/// (`spec_hash`), which a reader of version 4 would ignore (it would resume such runs from their file); version 6 added the mapper item to invocation records (`i`), which a
/// reader of version 5 would refuse. Versions 1 to 5 are still read and are upgraded to 6 at open. A store of any
/// other version is refused at open. The `schedules` tree (SERVER.md §6) was added within version 6: a reader
/// that does not know it ignores it (it fires no schedule), and nothing else changed.
pub const FORMAT_VERSION: u32 = 6;

/// The format version before invocation records named their mapper item.
pub(crate) const FORMAT_VERSION_WITHOUT_RECORD_ITEMS: u32 = 5;

/// The format version before the spec archive.
pub(crate) const FORMAT_VERSION_WITHOUT_SPECS: u32 = 4;

/// The format version before mapper items.
pub(crate) const FORMAT_VERSION_WITHOUT_ITEMS: u32 = 3;

/// The format version before the write-ahead log: the same trees, no `wal` file.
pub(crate) const FORMAT_VERSION_WITHOUT_WAL: u32 = 1;

/// The format version with the write-ahead log, before planner state changes.
pub(crate) const FORMAT_VERSION_WHOLE_PLANNER_STATES: u32 = 2;

/// The one-byte prefix of every value in the `runs`, `journal` and `snapshots` trees: the value encoding of
/// format versions 1 to 4.
const VERSION_BYTE: u8 = 1;

/// Key of the format version in the `meta` tree.
pub(crate) const META_FORMAT_VERSION: &[u8] = b"format_version";
/// Key of the writer's name and version in the `meta` tree (informational).
pub(crate) const META_WRITER: &[u8] = b"writer";

/// Separator between the run id and the rest of a key (run ids may not contain it).
const SEP: u8 = 0;
/// Snapshot tree: the snapshot head of a run is at `run_id \0 'h'`.
const SNAPSHOT_HEAD: u8 = b'h';
/// Snapshot tree: history chunks of a run are at `run_id \0 'c' seq(u64 BE)`.
const SNAPSHOT_CHUNK: u8 = b'c';

/// Checks that a run id can be used in keys: not empty-safe is fine, but no NUL byte.
pub(crate) fn check_run_id(op: &str, run_id: &str) -> Result<(), StoreError> {
    if run_id.as_bytes().contains(&SEP) {
        return Err(backend(format!("{op}: run id {run_id:?} contains a NUL byte, which the sled store cannot key")));
    }
    Ok(())
}

/// A [`StoreError::Backend`] with `message`.
pub(crate) fn backend(message: String) -> StoreError {
    StoreError::backend(message)
}

fn corrupt(run_id: &str, record: impl Into<String>, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt { run_id: run_id.to_string(), record: record.into(), message: message.into() }
}

/// `run_id \0`: the prefix of all journal keys of a run.
pub(crate) fn journal_prefix(run_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(run_id.len() + 9);
    key.extend_from_slice(run_id.as_bytes());
    key.push(SEP);
    key
}

/// `run_id \0 seq(u64 BE)`: the journal key of a step (big-endian so keys sort in sequence order).
pub(crate) fn journal_key(run_id: &str, seq: u64) -> Vec<u8> {
    let mut key = journal_prefix(run_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The sequence number of a journal key of `run_id`.
pub(crate) fn journal_seq(run_id: &str, key: &[u8]) -> Result<u64, StoreError> {
    let prefix_len = run_id.len() + 1;
    key.get(prefix_len..)
        .and_then(|rest| <[u8; 8]>::try_from(rest).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt(run_id, format!("journal key {key:02x?}"), "not `run id, NUL, 8-byte sequence number`"))
}

/// Key of the snapshot head of a run.
pub(crate) fn snapshot_head_key(run_id: &str) -> Vec<u8> {
    let mut key = journal_prefix(run_id);
    key.push(SNAPSHOT_HEAD);
    key
}

/// Prefix of the history chunk keys of a run.
pub(crate) fn snapshot_chunk_prefix(run_id: &str) -> Vec<u8> {
    let mut key = journal_prefix(run_id);
    key.push(SNAPSHOT_CHUNK);
    key
}

/// Key of the history chunk of a run that ends at step `seq`.
pub(crate) fn snapshot_chunk_key(run_id: &str, seq: u64) -> Vec<u8> {
    let mut key = snapshot_chunk_prefix(run_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The last step covered by a history chunk key of `run_id`.
pub(crate) fn snapshot_chunk_seq(run_id: &str, key: &[u8]) -> Result<u64, StoreError> {
    key.get(run_id.len() + 2..).and_then(|rest| <[u8; 8]>::try_from(rest).ok()).map(u64::from_be_bytes).ok_or_else(
        || corrupt(run_id, format!("snapshot key {key:02x?}"), "not `run id, NUL, 'c', 8-byte sequence number`"),
    )
}

/// Splits the version byte off a value.
fn payload<'a>(run_id: &str, record: &str, value: &'a [u8]) -> Result<&'a [u8], StoreError> {
    match value.split_first() {
        Some((&VERSION_BYTE, rest)) => Ok(rest),
        Some((v, _)) => Err(corrupt(run_id, record, format!("format version {v}, this store reads {VERSION_BYTE}"))),
        None => Err(corrupt(run_id, record, "empty value")),
    }
}

fn with_version(json: Vec<u8>) -> Vec<u8> {
    let mut value = Vec::with_capacity(json.len() + 1);
    value.push(VERSION_BYTE);
    value.extend_from_slice(&json);
    value
}

/// The journal value of a step: everything but the run id and the sequence number (both are in the key),
/// with one-letter field names. Destructured exhaustively so a new [`StepRecord`] field fails to compile
/// here instead of being dropped silently.
#[derive(Serialize)]
struct StepBodyRef<'a> {
    #[serde(rename = "p")]
    agent_path: &'a str,
    #[serde(rename = "d", skip_serializing_if = "<[_]>::is_empty")]
    delta: &'a [(String, Value)],
    #[serde(rename = "s", skip_serializing_if = "<[_]>::is_empty")]
    planner_states: &'a [PlannerState],
    #[serde(rename = "i", skip_serializing_if = "Option::is_none")]
    invocation: Option<InvocationRef<'a>>,
    #[serde(rename = "a", skip_serializing_if = "std::ops::Not::not")]
    async_started: bool,
    #[serde(rename = "f", skip_serializing_if = "std::ops::Not::not")]
    failed: bool,
    #[serde(rename = "m", skip_serializing_if = "Option::is_none")]
    item: Option<&'a str>,
    #[serde(rename = "me", skip_serializing_if = "std::ops::Not::not")]
    item_end: bool,
    #[serde(rename = "b", skip_serializing_if = "Option::is_none")]
    bindings: Option<&'a Map<String, Value>>,
    #[serde(rename = "c", skip_serializing_if = "<[_]>::is_empty")]
    calls: &'a [CallEntry],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepBody {
    #[serde(rename = "p")]
    agent_path: String,
    #[serde(rename = "d", default)]
    delta: Vec<(String, Value)>,
    #[serde(rename = "s", default)]
    planner_states: Vec<PlannerState>,
    #[serde(rename = "i", default)]
    invocation: Option<Invocation>,
    #[serde(rename = "a", default)]
    async_started: bool,
    #[serde(rename = "f", default)]
    failed: bool,
    #[serde(rename = "m", default)]
    item: Option<String>,
    #[serde(rename = "me", default)]
    item_end: bool,
    #[serde(rename = "b", default)]
    bindings: Option<Map<String, Value>>,
    #[serde(rename = "c", default)]
    calls: Vec<CallEntry>,
}

/// The invocation of a step, compactly: short names, defaults left out, the path only when it differs from
/// the step's agent path, and the end time as a duration.
#[derive(Serialize)]
struct InvocationRef<'a> {
    #[serde(rename = "n")]
    agent: &'a str,
    #[serde(rename = "q", skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    #[serde(rename = "in", skip_serializing_if = "Map::is_empty")]
    inputs: &'a Map<String, Value>,
    #[serde(rename = "o", skip_serializing_if = "Value::is_null")]
    output: &'a Value,
    /// Start, microseconds since the Unix epoch.
    #[serde(rename = "t")]
    started_at_us: u64,
    /// Duration in microseconds (when the end is not before the start).
    #[serde(rename = "u", skip_serializing_if = "Option::is_none")]
    duration_us: Option<u64>,
    /// End, microseconds since the Unix epoch (only when it is before the start).
    #[serde(rename = "e", skip_serializing_if = "Option::is_none")]
    ended_at_us: Option<u64>,
    #[serde(rename = "r", skip_serializing_if = "is_one")]
    attempt: u32,
    /// Tokens, only when there is no usage (which holds them).
    #[serde(rename = "k", skip_serializing_if = "Option::is_none")]
    tokens: Option<&'a TokenUsage>,
    #[serde(rename = "g", skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(rename = "x", skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(rename = "i", skip_serializing_if = "Option::is_none")]
    item: Option<&'a str>,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Invocation {
    #[serde(rename = "n")]
    agent: String,
    #[serde(rename = "q", default)]
    path: Option<String>,
    #[serde(rename = "in", default)]
    inputs: Map<String, Value>,
    #[serde(rename = "o", default)]
    output: Value,
    #[serde(rename = "t")]
    started_at_us: u64,
    #[serde(rename = "u", default)]
    duration_us: Option<u64>,
    #[serde(rename = "e", default)]
    ended_at_us: Option<u64>,
    #[serde(rename = "r", default = "one")]
    attempt: u32,
    #[serde(rename = "k", default)]
    tokens: Option<TokenUsage>,
    #[serde(rename = "g", default)]
    usage: Option<Usage>,
    #[serde(rename = "x", default)]
    error: Option<String>,
    #[serde(rename = "i", default)]
    item: Option<String>,
}

impl<'a> InvocationRef<'a> {
    fn new(record: &'a InvocationRecord, agent_path: &str) -> Self {
        let InvocationRecord {
            agent,
            path,
            inputs,
            output,
            started_at_us,
            ended_at_us,
            attempt,
            tokens,
            usage,
            error,
            item,
        } = record;
        // The usage holds the tokens: written once.
        let in_usage = usage
            .as_ref()
            .zip(tokens.as_ref())
            .is_some_and(|(u, t)| u.input_tokens == t.input && u.output_tokens == t.output);
        let duration_us = ended_at_us.checked_sub(*started_at_us);
        InvocationRef {
            agent,
            path: (path != agent_path).then_some(path.as_str()),
            inputs,
            output,
            started_at_us: *started_at_us,
            duration_us,
            ended_at_us: duration_us.is_none().then_some(*ended_at_us),
            attempt: *attempt,
            tokens: tokens.as_ref().filter(|_| !in_usage),
            usage: usage.as_deref(),
            error: error.as_deref(),
            item: item.as_deref(),
        }
    }
}

impl Invocation {
    fn into_record(self, agent_path: &str) -> InvocationRecord {
        let Invocation {
            agent,
            path,
            inputs,
            output,
            started_at_us,
            duration_us,
            ended_at_us,
            attempt,
            tokens,
            usage,
            error,
            item,
        } = self;
        let tokens =
            tokens.or_else(|| usage.as_ref().map(|u| TokenUsage { input: u.input_tokens, output: u.output_tokens }));
        let ended_at_us = match (duration_us, ended_at_us) {
            (Some(d), _) => started_at_us.saturating_add(d),
            (None, Some(e)) => e,
            (None, None) => started_at_us,
        };
        InvocationRecord {
            agent,
            path: path.unwrap_or_else(|| agent_path.to_string()),
            inputs,
            output,
            started_at_us,
            ended_at_us,
            attempt,
            tokens,
            usage: usage.map(Box::new),
            error,
            item,
        }
    }
}

/// Encodes a step record as its journal value.
pub(crate) fn encode_step(record: &StepRecord) -> Result<Vec<u8>, StoreError> {
    let StepRecord {
        run_id,
        seq,
        agent_path,
        delta,
        planner_states,
        invocation,
        async_started,
        failed,
        item,
        item_end,
        bindings,
        calls,
    } = record;
    let invocation = invocation.as_ref().map(|inv| InvocationRef::new(inv, agent_path));
    let body = StepBodyRef {
        agent_path,
        delta,
        planner_states,
        invocation,
        async_started: *async_started,
        failed: *failed,
        item: item.as_deref(),
        item_end: *item_end,
        bindings: bindings.as_ref(),
        calls,
    };
    // The version byte first, the JSON straight after it in the same buffer.
    let mut value = Vec::with_capacity(128);
    value.push(VERSION_BYTE);
    serde_json::to_writer(&mut value, &body)
        .map_err(|e| backend(format!("append: cannot encode run `{run_id}` step {seq}: {e}")))?;
    Ok(value)
}

/// Decodes the journal value of step `seq` of `run_id`.
pub(crate) fn decode_step(run_id: &str, seq: u64, value: &[u8]) -> Result<StepRecord, StoreError> {
    let json = payload(run_id, &format!("step {seq}"), value)?;
    decode_step_json(run_id, seq, json)
}

/// Decodes the JSON of step `seq` of `run_id` (a journal value without its version byte).
pub(crate) fn decode_step_json(run_id: &str, seq: u64, json: &[u8]) -> Result<StepRecord, StoreError> {
    let record = format!("step {seq}");
    let StepBody {
        agent_path,
        delta,
        planner_states,
        invocation,
        async_started,
        failed,
        item,
        item_end,
        bindings,
        calls,
    } = serde_json::from_slice(json).map_err(|e| corrupt(run_id, &record, e.to_string()))?;
    let invocation = invocation.map(|inv| inv.into_record(&agent_path));
    Ok(StepRecord {
        run_id: run_id.to_string(),
        seq,
        agent_path,
        delta,
        planner_states,
        invocation,
        async_started,
        failed,
        item,
        item_end,
        bindings,
        calls,
    })
}

/// Encodes a run record as its `runs` value.
pub(crate) fn encode_run(run: &RunRecord) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(run)
        .map_err(|e| backend(format!("put_run: cannot encode the run record of `{}`: {e}", run.run_id)))?;
    Ok(with_version(json))
}

/// Encodes a spec text for the `specs` tree: the version byte, then the text's UTF-8 bytes.
pub(crate) fn encode_spec(text: &str) -> Vec<u8> {
    let mut value = Vec::with_capacity(text.len() + 1);
    value.push(VERSION_BYTE);
    value.extend_from_slice(text.as_bytes());
    value
}

/// Decodes the `specs` value stored under `hash`; a text whose hash is not its key is corrupt.
pub(crate) fn decode_spec(hash: &str, value: &[u8]) -> Result<String, StoreError> {
    let record = format!("spec {hash}");
    let bytes = payload(hash, &record, value)?;
    let text = String::from_utf8(bytes.to_vec()).map_err(|e| corrupt(hash, &record, e.to_string()))?;
    if agentic_engine::spec_hash(&text) != hash {
        return Err(corrupt(hash, &record, "the text does not have this hash".to_string()));
    }
    Ok(text)
}

/// Encodes a schedule for the `schedules` tree (and the memory store): the version byte, then its JSON.
pub(crate) fn encode_schedule(schedule: &ScheduleRecord) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(schedule)
        .map_err(|e| backend(format!("cannot encode the record of schedule `{}`: {e}", schedule.id)))?;
    Ok(with_version(json))
}

/// Encodes a record kept as JSON behind the version byte (API keys, audit entries); `op` names the write in
/// the error.
pub(crate) fn encode_json<T: serde::Serialize>(value: &T, op: &str) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(value).map_err(|e| backend(format!("{op}: cannot encode the record: {e}")))?;
    Ok(with_version(json))
}

/// Decodes a value [`encode_json`] wrote; `what` names it in the error (`key `k1``).
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(what: &str, value: &[u8]) -> Result<T, StoreError> {
    match value.split_first() {
        Some((&VERSION_BYTE, json)) => {
            serde_json::from_slice(json).map_err(|e| backend(format!("the store's {what} is corrupt: {e}")))
        }
        Some((v, _)) => {
            Err(backend(format!("the store's {what} has format version {v}, this store reads {VERSION_BYTE}")))
        }
        None => Err(backend(format!("the store's {what} is empty"))),
    }
}

/// Decodes the `schedules` value stored under `id`.
pub(crate) fn decode_schedule(id: &str, value: &[u8]) -> Result<ScheduleRecord, StoreError> {
    let corrupt = |message: String| StoreError::CorruptSchedule { id: id.to_string(), message };
    match value.split_first() {
        Some((&VERSION_BYTE, json)) => decode_schedule_json(id, json),
        Some((v, _)) => Err(corrupt(format!("format version {v}, this store reads {VERSION_BYTE}"))),
        None => Err(corrupt("empty value".to_string())),
    }
}

/// Decodes the JSON of the record of schedule `id`; a record holding another id is corrupt.
pub(crate) fn decode_schedule_json(id: &str, json: &[u8]) -> Result<ScheduleRecord, StoreError> {
    let corrupt = |message: String| StoreError::CorruptSchedule { id: id.to_string(), message };
    let schedule: ScheduleRecord = serde_json::from_slice(json).map_err(|e| corrupt(e.to_string()))?;
    if schedule.id != id {
        return Err(corrupt(format!("holds schedule `{}`", schedule.id)));
    }
    Ok(schedule)
}

/// Runs `change` on the schedule `id` as stored (`current`): the refusal, or what to write (`None`: delete).
/// A change that gives the schedule another id is refused.
pub(crate) fn apply_schedule_change(
    id: &str,
    current: Option<ScheduleRecord>,
    change: ScheduleChange,
) -> Result<Option<ScheduleRecord>, String> {
    let mut schedule = current;
    change(&mut schedule)?;
    match &schedule {
        Some(s) if s.id != id => Err(format!("schedule `{id}` cannot be stored under the id `{}`", s.id)),
        _ => Ok(schedule),
    }
}

/// Decodes the `runs` value stored under `run_id`.
pub(crate) fn decode_run(run_id: &str, value: &[u8]) -> Result<RunRecord, StoreError> {
    decode_run_json(run_id, payload(run_id, "run record", value)?)
}

/// Decodes the JSON of the run record of `run_id` (a `runs` value without its version byte).
pub(crate) fn decode_run_json(run_id: &str, json: &[u8]) -> Result<RunRecord, StoreError> {
    let run: RunRecord = serde_json::from_slice(json).map_err(|e| corrupt(run_id, "run record", e.to_string()))?;
    if run.run_id != run_id {
        return Err(corrupt(run_id, "run record", format!("holds run `{}`", run.run_id)));
    }
    Ok(run)
}

/// Encodes the head of `image`: `seq`, then the image's JSON without `history` and with `history_len` (the
/// total history length). Through serde rather than field by field, so fields the engine adds to
/// [`RunImage`] (with `#[serde(default)]`) are kept without a change here.
pub(crate) fn encode_snapshot_head(image: &RunImage, history_len: u64) -> Result<Vec<u8>, StoreError> {
    let fail = |e: serde_json::Error| {
        backend(format!("compact: cannot encode the snapshot of run `{}` at step {}: {e}", image.run_id, image.seq))
    };
    let mut head = match serde_json::to_value(image).map_err(fail)? {
        Value::Object(head) => head,
        other => return Err(backend(format!("compact: a run image encodes as {other}, not an object"))),
    };
    head.remove("history");
    head.insert("history_len".into(), Value::from(history_len));
    let json = serde_json::to_vec(&head).map_err(fail)?;
    let mut value = Vec::with_capacity(json.len() + 9);
    value.push(VERSION_BYTE);
    value.extend_from_slice(&image.seq.to_be_bytes());
    value.extend_from_slice(&json);
    Ok(value)
}

/// Decodes a snapshot head into an image with an empty history, and the total history length.
pub(crate) fn decode_snapshot_head(run_id: &str, value: &[u8]) -> Result<(RunImage, u64), StoreError> {
    let rest = payload(run_id, "snapshot", value)?;
    let (seq, json) = rest
        .split_first_chunk::<8>()
        .map(|(seq, json)| (u64::from_be_bytes(*seq), json))
        .ok_or_else(|| corrupt(run_id, "snapshot", "shorter than its header"))?;
    decode_snapshot_head_json(run_id, seq, json)
}

/// Decodes the JSON of a snapshot head of `run_id` at step `seq` (a head value without its version byte and
/// sequence number).
pub(crate) fn decode_snapshot_head_json(run_id: &str, seq: u64, json: &[u8]) -> Result<(RunImage, u64), StoreError> {
    let record = format!("snapshot at step {seq}");
    let mut head: Map<String, Value> =
        serde_json::from_slice(json).map_err(|e| corrupt(run_id, &record, e.to_string()))?;
    let history_len = head
        .remove("history_len")
        .and_then(|n| n.as_u64())
        .ok_or_else(|| corrupt(run_id, &record, "no history_len"))?;
    if head.get("run_id").and_then(Value::as_str) != Some(run_id)
        || head.get("seq").and_then(Value::as_u64) != Some(seq)
    {
        return Err(corrupt(run_id, &record, "holds another run or step"));
    }
    head.insert("history".into(), Value::Array(Vec::new()));
    let image: RunImage =
        serde_json::from_value(Value::Object(head)).map_err(|e| corrupt(run_id, &record, e.to_string()))?;
    Ok((image, history_len))
}

/// Encodes a history chunk (the invocations of the steps a compaction folded).
pub(crate) fn encode_chunk(run_id: &str, seq: u64, history: &[InvocationRecord]) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(history)
        .map_err(|e| backend(format!("compact: cannot encode the history of run `{run_id}` to step {seq}: {e}")))?;
    Ok(with_version(json))
}

/// Decodes the history chunk of `run_id` that ends at step `seq`.
pub(crate) fn decode_chunk(run_id: &str, seq: u64, value: &[u8]) -> Result<Vec<InvocationRecord>, StoreError> {
    let json = payload(run_id, &format!("snapshot history to step {seq}"), value)?;
    decode_chunk_json(run_id, seq, json)
}

/// Decodes the JSON of a history chunk of `run_id` ending at step `seq` (without its version byte).
pub(crate) fn decode_chunk_json(run_id: &str, seq: u64, json: &[u8]) -> Result<Vec<InvocationRecord>, StoreError> {
    let record = format!("snapshot history to step {seq}");
    serde_json::from_slice(json).map_err(|e| corrupt(run_id, &record, e.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agentic_engine::RunStatus;
    use serde_json::json;

    /// A run record updated at `updated_at_ms`.
    pub(crate) fn run_record(run_id: &str, updated_at_ms: u64) -> RunRecord {
        RunRecord {
            run_id: run_id.into(),
            name: "demo".into(),
            fingerprint: "f00d".into(),
            status: RunStatus::Running,
            pending: vec![],
            answers: std::collections::BTreeMap::new(),
            detail: Value::Null,
            source: Some("demo.yaml".into()),
            spec_hash: None,
            cancel_requested: false,
            created_at_ms: 1,
            updated_at_ms,
            milestones: Vec::new(),
            forked_from: None,
            timed_out: Vec::new(),
            tenant: None,
            answered_by: std::collections::BTreeMap::new(),
        }
    }

    /// A realistic step: a one-key delta, the parent's planner state, and the invocation.
    pub(crate) fn step(run_id: &str, seq: u64) -> StepRecord {
        let path = format!("root/{}", seq % 3);
        StepRecord {
            run_id: run_id.into(),
            seq,
            agent_path: path.clone(),
            delta: vec![(format!("k{}", seq % 7), json!(seq))],
            // Built through serde so that optional fields the engine adds keep their defaults.
            planner_states: vec![serde_json::from_value(json!({"path": "root", "state": {"next": seq % 3}})).unwrap()],
            invocation: Some(InvocationRecord {
                agent: format!("a{}", seq % 3),
                path,
                inputs: Map::new(),
                output: json!(seq),
                started_at_us: 1_700_000_000_000_000 + seq * 10,
                ended_at_us: 1_700_000_000_000_005 + seq * 10,
                attempt: 1,
                tokens: None,
                usage: None,
                error: None,
                item: None,
            }),
            async_started: seq.is_multiple_of(11),
            failed: false,
            item: None,
            item_end: false,
            bindings: None,
            calls: Vec::new(),
        }
    }

    #[test]
    fn values_round_trip_and_carry_the_version() {
        let record = step("run-1", 42);
        let value = encode_step(&record).unwrap();
        assert_eq!(value[0], VERSION_BYTE);
        assert_eq!(decode_step("run-1", 42, &value).unwrap(), record);
        let mut odd = step("run-1", 43);
        if let Some(inv) = odd.invocation.as_mut() {
            inv.path = "elsewhere".into();
            inv.ended_at_us = inv.started_at_us - 1;
            inv.attempt = 3;
            inv.output = Value::Null;
            inv.inputs.insert("x".into(), json!([1, 2]));
            inv.tokens = Some(TokenUsage { input: 3, output: 4 });
            inv.error = Some("boom".into());
        }
        assert_eq!(decode_step("run-1", 43, &encode_step(&odd).unwrap()).unwrap(), odd);
        let text = String::from_utf8_lossy(&value[1..]).into_owned();
        assert_eq!(
            text,
            r#"{"p":"root/0","d":[["k0",42]],"s":[{"path":"root","state":{"next":0}}],"i":{"n":"a0","o":42,"t":1700000000000420,"u":5}}"#
        );
        let run = run_record("run-1", 5);
        assert_eq!(decode_run("run-1", &encode_run(&run).unwrap()).unwrap(), run);
        assert_eq!(journal_seq("run-1", &journal_key("run-1", 7)).unwrap(), 7);
        assert!(journal_key("a", 1) < journal_key("a", 256), "big-endian keys sort by sequence number");
        assert_eq!(snapshot_chunk_seq("run-1", &snapshot_chunk_key("run-1", 9)).unwrap(), 9);
        assert!(snapshot_chunk_seq("run-1", b"run-1\0c").is_err());
    }

    #[test]
    fn bad_bytes_are_corrupt_records_naming_the_run_and_the_step() {
        let mut value = encode_step(&step("r", 3)).unwrap();
        value[0] = 9;
        let err = decode_step("r", 3, &value).unwrap_err();
        assert_eq!(err.to_string(), "run `r`: record step 3 is corrupt: format version 9, this store reads 1");
        let err = decode_step("r", 4, b"\x01{not json").unwrap_err();
        assert!(matches!(&err, StoreError::Corrupt { run_id, record, .. } if run_id == "r" && record == "step 4"));
        assert!(matches!(decode_step("r", 5, b""), Err(StoreError::Corrupt { .. })));
        assert!(matches!(journal_seq("r", b"r\0\x01"), Err(StoreError::Corrupt { .. })));
        assert!(matches!(decode_run("r", &encode_run(&run_record("x", 1)).unwrap()), Err(StoreError::Corrupt { .. })));
        assert!(matches!(decode_snapshot_head("r", b"\x01\0\0"), Err(StoreError::Corrupt { .. })));
        assert!(check_run_id("append", "a\0b").is_err());
    }
}
