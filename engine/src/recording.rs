//! Recordings of a run's model and tool calls (SPEC.md §5): one [`RecordedCall`] per call, as `agentic run
//! --record` writes them and `agentic calls RUN_ID` prints them, and the [`CallTape`] a run is given to
//! record its calls, to answer them from a recording (`--replay`, strict or lenient) or to reuse the calls of
//! the run it was forked from (`fork --reuse-calls`).
//!
//! A call is named by the agent path it was made at (with its mapper item: `root/1#2`), its kind and its
//! number `n`: the call's position among the calls of that kind at that path in the run, from 0 (a loop's
//! second invocation of an agent continues the numbers of its first). Its request is the JSON of what was
//! sent without transport details (for a model: the model's name, the messages and the options that were
//! set; for a tool: `{"tool", "args"}`), and [`request_hash`] its content address.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::journal::StepRecord;
use crate::lock::lock;
use crate::tool_call::{CallEntry, ToolCallStatus};

/// What a recorded call called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CallKind {
    /// A chat model.
    Model,
    /// A tool (an LLM agent's tool, an MCP tool agent).
    Tool,
}

impl CallKind {
    /// `model` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Model => "model",
            CallKind::Tool => "tool",
        }
    }
}

/// One call of a run, as a recording holds it (one JSON line:
/// `{"agent", "path", "n", "kind", "request", "request_hash", "response"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The name of the agent that made it (`null` when the journal does not name it).
    pub agent: Option<String>,
    /// The agent's path, with its mapper item (`root/1#2`).
    pub path: String,
    /// The call's number among the calls of its kind at `path` in the run, from 0.
    pub n: u32,
    /// Model or tool.
    pub kind: CallKind,
    /// What was sent: for a model `{"model", "messages", ...options set}`, for a tool `{"tool", "args"}`.
    pub request: Value,
    /// [`request_hash`] of `request`.
    pub request_hash: String,
    /// What came back: a model's answer (`{"message", "usage", ...}`), a tool's `{"result": ..}` or
    /// `{"error": ".."}`.
    pub response: Value,
    /// The evaluation case whose run made it (`agentic eval --record`: one recording for a whole dataset,
    /// `<case id>` or `<case id>#k` for repeat k); absent in a single run's recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
}

/// The lowercase hex SHA-256 of the RFC 8785 canonical JSON of `request`: what a replayed call is matched on.
pub fn request_hash(request: &Value) -> String {
    // Canonicalizing a `Value` cannot fail (its keys are strings, its numbers finite).
    let bytes = serde_json_canonicalizer::to_vec(request).unwrap_or_else(|_| request.to_string().into_bytes());
    let mut out = String::with_capacity(64);
    for b in Sha256::digest(&bytes) {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A recording file that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
#[non_exhaustive]
pub struct RecordingError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl RecordedCall {
    /// Reads a recording: one call per non-blank JSON line.
    ///
    /// # Errors
    /// The first line that is not a call, with its number and serde's reason.
    pub fn read_lines(text: &str) -> Result<Vec<RecordedCall>, RecordingError> {
        let mut calls = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let call: RecordedCall = serde_json::from_str(line).map_err(|e| RecordingError {
                line: i + 1,
                message: format!(
                    "not a recorded call ({e}); expected {{\"agent\", \"path\", \"n\", \"kind\", \"request\", \
                     \"request_hash\", \"response\"}}"
                ),
            })?;
            calls.push(call);
        }
        Ok(calls)
    }

    /// The call as one JSON line (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn describe(agent: Option<&str>, path: &str, kind: CallKind, n: u32) -> String {
    match agent {
        Some(agent) => format!("{} call {n} of `{agent}` at {path}", kind.as_str()),
        None => format!("{} call {n} at {path}", kind.as_str()),
    }
}

/// How a replay treats a call that is not in the recording as it is made now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayMode {
    /// The first call that differs fails the run, naming the agent, the call and the first field that differs.
    #[default]
    Strict,
    /// A call that differs is made for real, and so are the later calls of its agent (at its path).
    Lenient,
}

/// A call a strict replay cannot answer: it differs from the recording's call at the same path and number,
/// or the recording has none there.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReplayMismatch {
    /// The agent making the call.
    pub agent: String,
    /// Its path (with its mapper item).
    pub path: String,
    /// Model or tool.
    pub kind: CallKind,
    /// The call's number.
    pub n: u32,
    /// The first field that differs (`messages[1].content`), `None` when the recording has no such call.
    pub field: Option<String>,
    /// The recording's value of that field (absent: `None`).
    pub recorded: Option<Value>,
    /// The value now (absent: `None`).
    pub now: Option<Value>,
    /// How many calls of this kind at this path the recording holds.
    pub recorded_calls: u32,
}

impl fmt::Display for ReplayMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let call = describe(Some(&self.agent), &self.path, self.kind, self.n);
        let shown = |v: &Option<Value>| match v {
            None => "nothing".to_string(),
            Some(v) => shorten(&v.to_string()),
        };
        match &self.field {
            None => write!(
                f,
                "replay: {call} is not in the recording (it holds {} {} call{} at {})",
                self.recorded_calls,
                self.kind.as_str(),
                if self.recorded_calls == 1 { "" } else { "s" },
                self.path
            ),
            Some(field) => write!(
                f,
                "replay: {call} differs from the recording at `{field}`: recorded {}, now {}",
                shown(&self.recorded),
                shown(&self.now)
            ),
        }
    }
}

impl std::error::Error for ReplayMismatch {}

/// `text` cut to 200 characters (with `…`).
fn shorten(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The first place where `now` differs from `recorded`, as a path (`messages[1].content`, `` for the
/// whole value), with both values there.
pub fn first_difference(recorded: &Value, now: &Value) -> Option<(String, Option<Value>, Option<Value>)> {
    fn at(prefix: &str, key: &str) -> String {
        if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") }
    }
    fn walk(prefix: String, a: &Value, b: &Value) -> Option<(String, Option<Value>, Option<Value>)> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))).collect();
                keys.dedup();
                for k in keys {
                    match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => {
                            if let Some(d) = walk(at(&prefix, k), p, q) {
                                return Some(d);
                            }
                        }
                        (p, q) => return Some((at(&prefix, k), p.cloned(), q.cloned())),
                    }
                }
                None
            }
            (Value::Array(x), Value::Array(y)) => {
                for i in 0..x.len().max(y.len()) {
                    match (x.get(i), y.get(i)) {
                        (Some(p), Some(q)) => {
                            if let Some(d) = walk(format!("{prefix}[{i}]"), p, q) {
                                return Some(d);
                            }
                        }
                        (p, q) => return Some((format!("{prefix}[{i}]"), p.cloned(), q.cloned())),
                    }
                }
                None
            }
            (a, b) if a == b => None,
            (a, b) => Some((prefix, Some(a.clone()), Some(b.clone()))),
        }
    }
    walk(String::new(), recorded, now)
}

/// Where a tape's answers come from.
enum Source {
    /// Nowhere: every call is made (the tape only records).
    None,
    /// A recording, by path, kind and number.
    Replay { calls: HashMap<(String, CallKind, u32), RecordedCall>, mode: ReplayMode },
    /// The model calls of an earlier run, by path and request hash (a fork's `--reuse-calls`).
    Reuse { calls: HashMap<(String, String), Value> },
}

/// What a tape counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TapeStats {
    /// Calls answered by the tape.
    pub answered: u64,
    /// Calls made for real while the tape had a source (a lenient replay's, a fork's model calls it could not
    /// reuse).
    pub made: u64,
}

#[derive(Default)]
struct TapeState {
    /// The next number of each kind of call at each path.
    counters: HashMap<(String, CallKind), u32>,
    /// Paths a lenient replay let go live.
    live: HashSet<String>,
    recorded: Vec<RecordedCall>,
    stats: TapeStats,
}

/// What a run records its calls on and answers them from (SPEC.md §5); given to a run with
/// [`crate::InvokeRequest::call_tape`] and used by agents through [`crate::CallsView::tape`].
///
/// One tape serves one run (its numbering follows the run's calls from its start).
pub struct CallTape {
    source: Source,
    record: bool,
    /// How many calls of each kind at each path the source holds (for the error naming a missing call).
    held: HashMap<(String, CallKind), u32>,
    state: Mutex<TapeState>,
}

impl fmt::Debug for CallTape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::None => "none",
            Source::Replay { mode: ReplayMode::Strict, .. } => "replay (strict)",
            Source::Replay { .. } => "replay (lenient)",
            Source::Reuse { .. } => "reuse",
        };
        f.debug_struct("CallTape").field("source", &source).field("record", &self.record).finish()
    }
}

impl CallTape {
    fn new(source: Source, record: bool) -> Self {
        let mut held = HashMap::new();
        if let Source::Replay { calls, .. } = &source {
            for (path, kind, _) in calls.keys() {
                *held.entry((path.clone(), *kind)).or_insert(0) += 1;
            }
        }
        CallTape { source, record, held, state: Mutex::new(TapeState::default()) }
    }

    /// A tape that records every call of the run and answers none ([`CallTape::recorded`]).
    pub fn recording() -> Self {
        CallTape::new(Source::None, true)
    }

    /// A tape that answers each call from `calls` (a recording) by its path, kind and number, when its request
    /// hash is the recorded one; `mode` says what a call that differs does.
    pub fn replaying(calls: Vec<RecordedCall>, mode: ReplayMode) -> Self {
        let calls = calls.into_iter().map(|c| ((c.path.clone(), c.kind, c.n), c)).collect();
        CallTape::new(Source::Replay { calls, mode }, false)
    }

    /// A tape that answers a model call whose request (at the same path) equals one of `calls`' from its
    /// answer, and lets every other call through: how a fork reuses the calls of the run it forks.
    pub fn reusing(calls: Vec<RecordedCall>) -> Self {
        let calls = calls
            .into_iter()
            .filter(|c| c.kind == CallKind::Model)
            .map(|c| ((c.path, c.request_hash), c.response))
            .collect();
        CallTape::new(Source::Reuse { calls }, false)
    }

    /// Also records the calls (answered ones included), for [`CallTape::recorded`].
    #[must_use]
    pub fn and_record(mut self) -> Self {
        self.record = true;
        self
    }

    /// Whether the tape records.
    pub fn records(&self) -> bool {
        self.record
    }

    /// The calls recorded so far, in the order they ended.
    pub fn recorded(&self) -> Vec<RecordedCall> {
        lock(&self.state).recorded.clone()
    }

    /// How many calls were answered by the tape and made for real.
    pub fn stats(&self) -> TapeStats {
        lock(&self.state).stats
    }

    /// Numbers `count` calls of `kind` at `path` (with its item): the first one's number (the others follow).
    pub fn reserve(&self, path: &str, kind: CallKind, count: u32) -> u32 {
        let mut state = lock(&self.state);
        let next = state.counters.entry((path.to_string(), kind)).or_insert(0);
        let first = *next;
        *next = next.saturating_add(count);
        first
    }

    /// The answer to call `n` of `kind` at `path` by `agent` with `request` (hashed as `hash`): the
    /// recording's, or `None` when the call is to be made.
    ///
    /// # Errors
    /// A strict replay's [`ReplayMismatch`]: the recording's call there has another request, or there is none.
    pub fn answer(
        &self,
        agent: &str,
        path: &str,
        kind: CallKind,
        n: u32,
        request: &Value,
        hash: &str,
    ) -> Result<Option<Value>, ReplayMismatch> {
        let found = match &self.source {
            Source::None => return Ok(None),
            // A fork reuses model answers only: its tool calls are made (and not counted).
            Source::Reuse { .. } if kind == CallKind::Tool => return Ok(None),
            Source::Reuse { calls } => calls.get(&(path.to_string(), hash.to_string())).cloned(),
            Source::Replay { calls, mode } => {
                if lock(&self.state).live.contains(path) {
                    None
                } else {
                    let recorded = calls.get(&(path.to_string(), kind, n));
                    match recorded {
                        Some(call) if call.request_hash == hash => Some(call.response.clone()),
                        _ if *mode == ReplayMode::Lenient => {
                            lock(&self.state).live.insert(path.to_string());
                            None
                        }
                        recorded => {
                            let diff = recorded.map(|c| {
                                first_difference(&c.request, request).unwrap_or_else(|| {
                                    ("request_hash".to_string(), Some(json!(c.request_hash)), Some(json!(hash)))
                                })
                            });
                            let (field, recorded_value, now) = match diff {
                                Some((field, a, b)) => (Some(field), a, b),
                                None => (None, None, None),
                            };
                            return Err(ReplayMismatch {
                                agent: agent.to_string(),
                                path: path.to_string(),
                                kind,
                                n,
                                field,
                                recorded: recorded_value,
                                now,
                                recorded_calls: self.held.get(&(path.to_string(), kind)).copied().unwrap_or(0),
                            });
                        }
                    }
                }
            }
        };
        let mut state = lock(&self.state);
        match &found {
            Some(_) => state.stats.answered += 1,
            None => state.stats.made += 1,
        }
        Ok(found)
    }

    /// Records call `n` of `kind` at `path` by `agent` (when the tape records).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        agent: &str,
        path: &str,
        kind: CallKind,
        n: u32,
        request: Value,
        hash: String,
        response: Value,
    ) {
        if !self.record {
            return;
        }
        let call = RecordedCall {
            agent: Some(agent.to_string()),
            path: path.to_string(),
            n,
            kind,
            request,
            request_hash: hash,
            response,
            case: None,
        };
        lock(&self.state).recorded.push(call);
    }
}

/// The request of a model call as a recording holds it: `options` (what the request set besides its messages,
/// as [`crate::ModelTurnEntry::options`] journals them) with the `messages` and the `model`'s name.
pub fn model_request(model: &str, messages: &[Value], options: &Map<String, Value>) -> Value {
    let mut request = Map::new();
    request.insert("model".to_string(), json!(model));
    request.insert("messages".to_string(), Value::Array(messages.to_vec()));
    for (k, v) in options {
        request.insert(k.clone(), v.clone());
    }
    Value::Object(request)
}

/// A run's calls as a recording holds them, rebuilt from its journal (`agentic calls RUN_ID`, `--replay-run`,
/// `fork --reuse-calls`): every model turn and every finished tool call, numbered per path as the run made
/// them. `names` gives each path's agent ([`crate::journal_agent_names`]).
pub fn recorded_calls(records: &[StepRecord], names: &std::collections::BTreeMap<String, String>) -> Vec<RecordedCall> {
    #[derive(Default)]
    struct AtPath {
        models: u32,
        /// Tool numbers used by the invocations that ended at this path.
        tool_base: u32,
        /// The highest local tool number + 1 of the invocation in progress.
        tool_seen: u32,
        /// The messages and options of the invocation's previous loop turn.
        messages: Vec<Value>,
        options: Map<String, Value>,
    }
    let mut paths: HashMap<String, AtPath> = HashMap::new();
    let mut out = Vec::new();
    for r in records {
        let key = format!("{}{}", r.agent_path, r.item.as_deref().map(crate::item_of_layer).unwrap_or_default());
        let agent = names.get(&r.agent_path).cloned();
        let at = paths.entry(key.clone()).or_default();
        for entry in &r.calls {
            match entry {
                CallEntry::Model(turn) => {
                    let (messages, options) = if turn.purpose.is_some() {
                        (turn.request.clone(), turn.options.clone().unwrap_or_default())
                    } else {
                        if turn.turn == 0 {
                            at.messages.clear();
                            at.options.clear();
                        }
                        at.messages.extend(turn.request.iter().cloned());
                        if let Some(options) = &turn.options {
                            at.options.clone_from(options);
                        }
                        (at.messages.clone(), at.options.clone())
                    };
                    let request = model_request(&turn.model, &messages, &options);
                    let request_hash = request_hash(&request);
                    out.push(RecordedCall {
                        agent: agent.clone(),
                        path: key.clone(),
                        n: at.models,
                        kind: CallKind::Model,
                        request,
                        request_hash,
                        response: turn.response.clone(),
                        case: None,
                    });
                    at.models += 1;
                }
                CallEntry::Tool(call) if call.status == ToolCallStatus::Finished => {
                    at.tool_seen = at.tool_seen.max(call.n.saturating_add(1));
                    let request = json!({"tool": call.tool, "args": call.args});
                    let response = match (&call.error, &call.result) {
                        (Some(e), _) => json!({"error": e}),
                        (None, result) => json!({"result": result.clone().unwrap_or(Value::Null)}),
                    };
                    let request_hash = request_hash(&request);
                    out.push(RecordedCall {
                        agent: agent.clone(),
                        path: key.clone(),
                        n: at.tool_base + call.n,
                        kind: CallKind::Tool,
                        request,
                        request_hash,
                        response,
                        case: None,
                    });
                }
                CallEntry::Tool(call) => at.tool_seen = at.tool_seen.max(call.n.saturating_add(1)),
                _ => {}
            }
        }
        if r.invocation.is_some() {
            // The invocation ended: the next one at this path continues the tool numbers.
            at.tool_base += at.tool_seen;
            at.tool_seen = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(path: &str, kind: CallKind, n: u32, request: Value, response: Value) -> RecordedCall {
        RecordedCall {
            agent: Some("a".into()),
            path: path.into(),
            n,
            kind,
            request_hash: request_hash(&request),
            request,
            response,
            case: None,
        }
    }

    #[test]
    fn the_request_hash_is_the_sha256_of_the_canonical_json() {
        let h = request_hash(&json!({"tool": "t", "args": {"b": 1, "a": 2}}));
        let expected: String =
            Sha256::digest(br#"{"args":{"a":2,"b":1},"tool":"t"}"#).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(h, expected);
    }

    #[test]
    fn the_first_difference_names_the_field() {
        let a = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let b = json!({"model": "m", "messages": [{"role": "user", "content": "ho"}]});
        assert_eq!(
            first_difference(&a, &b),
            Some(("messages[0].content".into(), Some(json!("hi")), Some(json!("ho"))))
        );
        let c = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0});
        assert_eq!(first_difference(&a, &c), Some(("temperature".into(), None, Some(json!(0.0)))));
        assert_eq!(first_difference(&a, &a), None);
    }

    #[test]
    fn a_strict_replay_answers_by_path_and_number_and_names_what_differs() {
        let req = json!({"model": "m", "messages": ["x"]});
        let tape =
            CallTape::replaying(vec![call("root/0", CallKind::Model, 0, req.clone(), json!("ok"))], ReplayMode::Strict);
        let n = tape.reserve("root/0", CallKind::Model, 1);
        assert_eq!(n, 0);
        assert_eq!(tape.answer("a", "root/0", CallKind::Model, 0, &req, &request_hash(&req)), Ok(Some(json!("ok"))));
        let other = json!({"model": "m", "messages": ["y"]});
        let err = tape.answer("a", "root/0", CallKind::Model, 0, &other, &request_hash(&other)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "replay: model call 0 of `a` at root/0 differs from the recording at `messages[0]`: recorded \"x\", now \"y\""
        );
        let err = tape.answer("a", "root/0", CallKind::Model, 1, &req, &request_hash(&req)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "replay: model call 1 of `a` at root/0 is not in the recording (it holds 1 model call at root/0)"
        );
        assert_eq!(tape.stats(), TapeStats { answered: 1, made: 0 });
    }

    #[test]
    fn a_lenient_replay_lets_the_agent_go_live_from_the_first_difference() {
        let req = |s: &str| json!({"messages": [s]});
        let tape = CallTape::replaying(
            vec![
                call("root/0", CallKind::Model, 0, req("a"), json!(1)),
                call("root/0", CallKind::Model, 1, req("b"), json!(2)),
                call("root/1", CallKind::Model, 0, req("c"), json!(3)),
            ],
            ReplayMode::Lenient,
        );
        let ask = |path: &str, n, r: &Value| tape.answer("a", path, CallKind::Model, n, r, &request_hash(r)).unwrap();
        assert_eq!(ask("root/0", 0, &req("changed")), None);
        assert_eq!(ask("root/0", 1, &req("b")), None, "the agent's later calls are made for real");
        assert_eq!(ask("root/1", 0, &req("c")), Some(json!(3)), "another agent still replays");
        assert_eq!(tape.stats(), TapeStats { answered: 1, made: 2 });
    }

    #[test]
    fn a_reusing_tape_answers_equal_model_requests_only() {
        let req = json!({"messages": ["a"]});
        let tape = CallTape::reusing(vec![
            call("root/0", CallKind::Model, 3, req.clone(), json!("kept")),
            call("root/0", CallKind::Tool, 0, json!({"tool": "t", "args": {}}), json!({"result": 1})),
        ]);
        let h = request_hash(&req);
        assert_eq!(tape.answer("a", "root/0", CallKind::Model, 0, &req, &h), Ok(Some(json!("kept"))));
        assert_eq!(tape.answer("a", "root/1", CallKind::Model, 0, &req, &h), Ok(None));
        let t = json!({"tool": "t", "args": {}});
        assert_eq!(tape.answer("a", "root/0", CallKind::Tool, 0, &t, &request_hash(&t)), Ok(None));
    }

    #[test]
    fn recording_lines_round_trip_and_a_bad_line_is_named() {
        let c = call("root/0#1", CallKind::Tool, 2, json!({"tool": "t", "args": {}}), json!({"result": 1}));
        let text = format!("{}\n\n{}\n", c.to_line(), c.to_line());
        assert_eq!(RecordedCall::read_lines(&text).unwrap(), vec![c.clone(), c]);
        let err = RecordedCall::read_lines("\n{\"agent\": 1}\n").unwrap_err();
        assert_eq!(err.line, 2);
    }
}
