//! The calls inside one invocation, as its run journals them (SPEC.md §4): each model turn answered and each
//! change of a tool call ([`CallEntry`]); how a tool call's side effect may be repeated ([`Effect`]); what a
//! person decides about a call that needs approval ([`ToolDecision`]) or one a crash left in doubt
//! ([`DoubtAnswer`]); and the checks an answer passes before it is recorded ([`check_tool_answer`]).
//!
//! An agent journals its calls through [`crate::CallsView`] (`ctx.calls()`); a resumed, restarted or forked
//! invocation gets them back there and continues its loop where it stopped: an answered model turn is not
//! asked again, a tool call whose result is journaled is not run again.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// What repeating a tool call does to the world, and so what happens to a call a crash cut between its start
/// and its result (SPEC.md §4 `effect`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Effect {
    /// No side effect (a lookup, a computation): sent again after a crash. Its start is not committed on its own.
    #[default]
    None,
    /// A side effect the callee deduplicates by the call's idempotency key: committed as started before it is
    /// sent, sent again after a crash with the same key.
    Retry,
    /// A side effect that must happen at most once: committed as started before it is sent; after a crash
    /// cut it, it is **in doubt** and never sent again without a person's answer.
    Once,
}

impl Effect {
    /// The spec's name: `none`, `retry`, `once`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::None => "none",
            Effect::Retry => "retry",
            Effect::Once => "once",
        }
    }

    /// Whether calling has a side effect (its start is committed before it is sent).
    pub fn has_effect(self) -> bool {
        self != Effect::None
    }
}

impl std::str::FromStr for Effect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Effect::None),
            "retry" => Ok(Effect::Retry),
            "once" => Ok(Effect::Once),
            other => Err(format!("unknown effect `{other}`, expected `none`, `retry` or `once`")),
        }
    }
}

/// Where a tool call stands, as journaled and as the run's events and pages show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// It waits for a person's decision (a pending response of kind `tool_call`).
    AwaitingApproval,
    /// A person approved it as the model wrote it.
    Approved,
    /// A person approved it with other arguments (`args` holds them).
    Edited,
    /// A person rejected it; the model gets `rejected: <message>`.
    Rejected,
    /// A person gave its result; the tool is not run.
    Responded,
    /// It was sent to the tool.
    Started,
    /// Its result (or the tool's error) came back.
    Finished,
    /// A crash cut it after it was sent (effect `once`): a pending response of kind `in_doubt` asks what
    /// happened.
    InDoubt,
}

impl ToolCallStatus {
    /// The status's name, as in events (`awaiting_approval`, `started`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::AwaitingApproval => "awaiting_approval",
            ToolCallStatus::Approved => "approved",
            ToolCallStatus::Edited => "edited",
            ToolCallStatus::Rejected => "rejected",
            ToolCallStatus::Responded => "responded",
            ToolCallStatus::Started => "started",
            ToolCallStatus::Finished => "finished",
            ToolCallStatus::InDoubt => "in_doubt",
        }
    }
}

/// One change of a tool call of an invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallEntry {
    /// The call's number in the invocation, from 0 (across its model turns).
    pub n: u32,
    /// The model turn that asked for it, from 0.
    pub turn: u32,
    /// The id the model gave the call.
    pub call_id: String,
    /// The tool's name, as the model called it.
    pub tool: String,
    /// Its arguments: as the model wrote them, or as a person edited them.
    pub args: Value,
    /// What changed.
    pub status: ToolCallStatus,
    /// The tool's effect.
    #[serde(default, skip_serializing_if = "is_no_effect")]
    pub effect: Effect,
    /// Its result ([`ToolCallStatus::Finished`] without error, [`ToolCallStatus::Responded`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The tool's error, which the model read ([`ToolCallStatus::Finished`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The message of a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who decided (a person's decision, an answer to an in-doubt call): the server's principal or
    /// `cli:<user>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When, microseconds since the Unix epoch.
    pub at_us: u64,
}

fn is_no_effect(e: &Effect) -> bool {
    *e == Effect::None
}

impl ToolCallEntry {
    /// A change of call `n` (of model turn `turn`, id `call_id`) of `tool` with `args` to `status`, now.
    pub fn new(
        n: u32,
        turn: u32,
        call_id: impl Into<String>,
        tool: impl Into<String>,
        args: Value,
        status: ToolCallStatus,
    ) -> Self {
        ToolCallEntry {
            n,
            turn,
            call_id: call_id.into(),
            tool: tool.into(),
            args,
            status,
            effect: Effect::None,
            result: None,
            error: None,
            message: None,
            by: None,
            at_us: crate::time::now_us(),
        }
    }
}

/// One model turn of an invocation: the messages added to its request since the previous turn, and the
/// model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTurnEntry {
    /// The turn's number in the invocation, from 0.
    pub turn: u32,
    /// The model's name.
    pub model: String,
    /// The messages of the request that the previous turn's did not have (all of them at turn 0), as the
    /// provider-neutral chat messages serialize.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request: Vec<Value>,
    /// What the request set besides its messages (temperature, tools, response format, ...: the provider-
    /// neutral request's members that are set), when they differ from the previous turn's (always at turn 0
    /// when any is set): with `request`, what rebuilds the request a recording holds
    /// ([`crate::recorded_calls`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
    /// Why the model was asked, for a call that is not one of the agent loop's turns: `summary` (an agent's
    /// summarized context), `choose` (a supervisor), `decide` (a decision router). Such an entry's `request`
    /// holds all of its messages; a resumed loop does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The answer, as the provider-neutral chat response serializes (message, tool calls, usage).
    pub response: Value,
    /// What the turn spent (tokens, one model call, cost when the model has prices): what a resumed run's
    /// budgets count for an invocation still running.
    #[serde(default, skip_serializing_if = "crate::usage::Usage::is_empty")]
    pub usage: crate::usage::Usage,
    /// When it was answered, microseconds since the Unix epoch.
    pub at_us: u64,
}

impl ModelTurnEntry {
    /// The entry of a model call besides the agent loop's turns, answered now: `purpose` (`summary`, `choose`,
    /// `score`, `decide`), the model's name, all of the request's messages and what else it set (`options`,
    /// none when empty), the answer, and what the call spent (`input`/`output` tokens, its cost when priced).
    pub fn call(
        purpose: &str,
        model: &str,
        request: Vec<Value>,
        options: Option<Map<String, Value>>,
        response: Value,
        tokens: (u64, u64),
        cost_usd: Option<f64>,
    ) -> Self {
        let mut usage = crate::usage::Usage::default();
        usage.add_call(model, tokens.0, tokens.1, cost_usd);
        ModelTurnEntry {
            turn: 0,
            model: model.to_string(),
            request,
            options: options.filter(|o| !o.is_empty()),
            purpose: Some(purpose.to_string()),
            response,
            usage,
            at_us: crate::now_ms() * 1000,
        }
    }

    /// The entry with its usage naming the model `label` (what usage and reports call it, a spec's `models`
    /// entry) rather than the name its request carries; an empty `label` changes nothing.
    pub fn labelled(mut self, label: &str) -> Self {
        if !label.is_empty() && self.usage.models.iter().any(|m| m != label) {
            self.usage.models = vec![label.to_string()];
        }
        self
    }
}

/// One entry of an invocation's call journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallEntry {
    /// A model turn answered.
    Model(ModelTurnEntry),
    /// A tool call changed.
    Tool(ToolCallEntry),
    /// A person raised the invocation's budgets (SPEC.md §3): the limits in force from here on, by the path
    /// of the agent whose budget it is — what a later resume of the same invocation applies again.
    Budget(BudgetEntry),
}

/// Budgets raised by an answer while an invocation runs ([`CallEntry::Budget`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetEntry {
    /// The limits of every budget of the run after the raise, by the path of its agent.
    pub limits: Map<String, Value>,
    /// When, microseconds since the Unix epoch.
    pub at_us: u64,
}

/// A person's decision about a tool call that waits for approval (SPEC.md §4).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolDecision {
    /// Run it as the model wrote it.
    Approve,
    /// Run it with these arguments instead (checked against the tool's parameters).
    Edit {
        /// The arguments that run.
        args: Value,
    },
    /// Do not run it; the model gets `rejected: <message>` as its result.
    Reject {
        /// Why (may be empty).
        message: String,
    },
    /// Do not run it; the model gets `result` as its result.
    Respond {
        /// The result.
        result: Value,
    },
}

impl ToolDecision {
    /// The answer that records this decision (`{"decision": "approve"}`, ...).
    pub fn to_answer(&self) -> Value {
        match self {
            ToolDecision::Approve => json!({"decision": "approve"}),
            ToolDecision::Edit { args } => json!({"decision": "edit", "args": args}),
            ToolDecision::Reject { message } => json!({"decision": "reject", "message": message}),
            ToolDecision::Respond { result } => json!({"decision": "respond", "result": result}),
        }
    }

    /// The decision an answer gives: `{"decision": "approve" | "edit" (with `args`) | "reject" (with an
    /// optional `message`) | "respond" (with `result`)}`, or the bare strings `approve` and `reject`.
    ///
    /// # Errors
    /// What is wrong with the answer's shape, naming the field.
    pub fn from_answer(answer: &Value) -> Result<ToolDecision, String> {
        const EXPECTED: &str = "expected {\"decision\": \"approve\"}, {\"decision\": \"edit\", \"args\": {..}}, \
                                {\"decision\": \"reject\", \"message\": \"..\"}, {\"decision\": \"respond\", \
                                \"result\": ..}, or the bare string `approve` or `reject`";
        let obj = match answer {
            Value::String(s) if s == "approve" => return Ok(ToolDecision::Approve),
            Value::String(s) if s == "reject" => return Ok(ToolDecision::Reject { message: String::new() }),
            Value::Object(obj) => obj,
            other => return Err(format!("a tool call's answer cannot be {other}: {EXPECTED}")),
        };
        let known = ["decision", "args", "message", "result", "args_hash", "by"];
        if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!("unknown field `{k}` in a tool call's answer: {EXPECTED}"));
        }
        match obj.get("decision").and_then(Value::as_str) {
            Some("approve") => Ok(ToolDecision::Approve),
            Some("edit") => match obj.get("args") {
                Some(args @ Value::Object(_)) => Ok(ToolDecision::Edit { args: args.clone() }),
                Some(other) => Err(format!("field `args` of an `edit` must be an object of arguments, found {other}")),
                None => Err("an `edit` needs field `args`: the arguments to run the tool with".to_string()),
            },
            Some("reject") => match obj.get("message") {
                None | Some(Value::Null) => Ok(ToolDecision::Reject { message: String::new() }),
                Some(Value::String(m)) => Ok(ToolDecision::Reject { message: m.clone() }),
                Some(other) => Err(format!("field `message` of a `reject` must be a string, found {other}")),
            },
            Some("respond") => match obj.get("result") {
                Some(result) => Ok(ToolDecision::Respond { result: result.clone() }),
                None => {
                    Err("a `respond` needs field `result`: what the model gets instead of running the tool".to_string())
                }
            },
            Some(other) => Err(format!("unknown decision `{other}`: {EXPECTED}")),
            None => Err(format!("field `decision` is missing: {EXPECTED}")),
        }
    }
}

/// A person's answer about a tool call a crash left in doubt (SPEC.md §4).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DoubtAnswer {
    /// The call happened and gave this result (what the model gets).
    Result(Value),
    /// Send it again.
    Retry,
    /// Fail the invocation.
    Fail,
}

impl DoubtAnswer {
    /// The answer that records it (`{"result": ..}`, `"retry"`, `"fail"`).
    pub fn to_answer(&self) -> Value {
        match self {
            DoubtAnswer::Result(v) => json!({"result": v}),
            DoubtAnswer::Retry => json!("retry"),
            DoubtAnswer::Fail => json!("fail"),
        }
    }

    /// The answer an in-doubt call got: `{"result": <JSON>}`, `"retry"` or `"fail"`.
    ///
    /// # Errors
    /// What is wrong with the answer's shape.
    pub fn from_answer(answer: &Value) -> Result<DoubtAnswer, String> {
        const EXPECTED: &str = "expected {\"result\": <what the tool did>}, \"retry\" or \"fail\"";
        match answer {
            Value::String(s) if s == "retry" => Ok(DoubtAnswer::Retry),
            Value::String(s) if s == "fail" => Ok(DoubtAnswer::Fail),
            Value::Object(obj) => {
                if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "result" | "by")) {
                    return Err(format!("unknown field `{k}` in the answer to an in-doubt call: {EXPECTED}"));
                }
                match obj.get("result") {
                    Some(v) => Ok(DoubtAnswer::Result(v.clone())),
                    None => Err(format!("field `result` is missing: {EXPECTED}")),
                }
            }
            other => Err(format!("an in-doubt call's answer cannot be {other}: {EXPECTED}")),
        }
    }
}

/// The lowercase hex SHA-256 of the RFC 8785 canonical JSON of `{"args": args, "tool": tool}`: what an
/// approval answer may carry to bind itself to the exact call it approves.
pub fn tool_args_hash(tool: &str, args: &Value) -> String {
    let value = json!({"args": args, "tool": tool});
    // Canonicalizing a `Value` cannot fail (its keys are strings, its numbers finite).
    let bytes = serde_json_canonicalizer::to_vec(&value).unwrap_or_else(|_| value.to_string().into_bytes());
    let digest = Sha256::digest(&bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The id of the pending response approving call `n` of the invocation at `path` (for mapper item `item`):
/// `tool:<path><item>:<n>`.
pub fn approval_id(path: &str, item: Option<&str>, n: u32) -> String {
    format!("tool:{path}{}:{n}", item.unwrap_or(""))
}

/// The id of the pending response asking about call `n` in doubt: `doubt:<path><item>:<n>`.
pub fn doubt_id(path: &str, item: Option<&str>, n: u32) -> String {
    format!("doubt:{path}{}:{n}", item.unwrap_or(""))
}

/// Why an answer to a tool call or an in-doubt call is refused ([`check_tool_answer`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolAnswerRefusal {
    /// The answer's shape is wrong, or edited arguments break the tool's parameters.
    Invalid(String),
    /// The answer carries an `args_hash` other than the pending call's: it was given for another call.
    Stale {
        /// The pending call's hash.
        expected: String,
        /// The answer's.
        given: String,
    },
}

/// Checks `answer` to a pending response of kind `tool_call` or `in_doubt` whose data is `data` (`tool`,
/// `args`, `args_hash`, `parameters`) and returns the answer as it is recorded: the decision as an object,
/// with `by` (who answered) when given.
///
/// # Errors
/// [`ToolAnswerRefusal`]: a wrong shape, edited arguments that break the tool's `parameters`, or an
/// `args_hash` that is not the call's.
pub fn check_tool_answer(
    kind: crate::pending::PendingKind,
    answer: &Value,
    data: &Value,
    by: Option<&str>,
) -> Result<Value, ToolAnswerRefusal> {
    let mut recorded = match kind {
        crate::pending::PendingKind::InDoubt => {
            DoubtAnswer::from_answer(answer).map_err(ToolAnswerRefusal::Invalid)?;
            match answer {
                Value::Object(_) => answer.clone(),
                other => json!({"answer": other}),
            }
        }
        _ => {
            let decision = ToolDecision::from_answer(answer).map_err(ToolAnswerRefusal::Invalid)?;
            match answer.get("args_hash") {
                None | Some(Value::String(_)) => {}
                Some(other) => {
                    return Err(ToolAnswerRefusal::Invalid(format!(
                        "field `args_hash` must be the call's SHA-256 as 64 hex digits, found {other}"
                    )));
                }
            }
            if let Some(given) = answer.get("args_hash").and_then(Value::as_str) {
                // Hex digits in either case name the same hash.
                let expected = data.get("args_hash").and_then(Value::as_str).unwrap_or_default();
                if !given.eq_ignore_ascii_case(expected) {
                    return Err(ToolAnswerRefusal::Stale { expected: expected.to_string(), given: given.to_string() });
                }
            }
            if let ToolDecision::Edit { args } = &decision
                && let Some(parameters) = data.get("parameters")
            {
                check_schema(parameters, args, "the edit").map_err(ToolAnswerRefusal::Invalid)?;
            }
            decision.to_answer()
        }
    };
    if let (Some(by), Value::Object(obj)) = (by, &mut recorded) {
        obj.insert("by".to_string(), Value::String(by.to_string()));
    }
    Ok(recorded)
}

/// Who answered, as [`check_tool_answer`] recorded it in the answer (`by`).
pub fn answered_by(answer: &Value) -> Option<String> {
    answer.get("by").and_then(Value::as_str).map(str::to_string)
}

/// The answer an in-doubt call got, as recorded by [`check_tool_answer`] (`{"answer": "retry"}` read back as
/// `"retry"`).
///
/// # Errors
/// What is wrong with its shape (an answer recorded without the check).
pub fn doubt_answer(recorded: &Value) -> Result<DoubtAnswer, String> {
    match recorded.get("answer") {
        Some(bare) => DoubtAnswer::from_answer(bare),
        None => {
            let mut v = recorded.clone();
            if let Value::Object(obj) = &mut v {
                obj.remove("by");
            }
            DoubtAnswer::from_answer(&v)
        }
    }
}

/// Checks `v` against a subset of JSON schema — `type`, `enum`, `required`, `properties`,
/// `additionalProperties: false`, `items` — the parts a tool's parameters and a structured answer use; `at` names `v` in the error (`the call`, `the
/// answer`, `field `amount``).
///
/// # Errors
/// The first mismatch, naming the field: `field `n` must be of type integer, found "x"`.
pub fn check_schema(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else { return Ok(()) };
    if let Some(ty) = s.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let ok = types.is_empty()
            || types.iter().any(|t| match *t {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => v.is_string(),
                "number" => v.is_number(),
                "integer" => v.as_f64().is_some_and(|n| n.fract() == 0.0),
                "boolean" => v.is_boolean(),
                "null" => v.is_null(),
                _ => true,
            });
        if !ok {
            return Err(format!("{at} must be of type {}, found {v}", types.join(" or ")));
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(v)
    {
        return Err(format!("{at} must be one of {}, found {v}", Value::Array(allowed.clone())));
    }
    if let Value::Object(obj) = v {
        if let Some(Value::Array(required)) = s.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{at} lacks the required field `{r}`"));
                }
            }
        }
        let props = match s.get("properties") {
            Some(Value::Object(props)) => Some(props),
            _ => None,
        };
        if s.get("additionalProperties") == Some(&Value::Bool(false))
            && let Some(k) = obj.keys().find(|k| !props.is_some_and(|p| p.contains_key(k.as_str())))
        {
            let fields: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
            let fields = if fields.is_empty() { "none".to_string() } else { fields.join(", ") };
            return Err(format!("{at} has an unknown field `{k}` (the fields are: {fields})"));
        }
        for (k, sub) in props.into_iter().flatten() {
            if let Some(x) = obj.get(k) {
                check_schema(sub, x, &format!("field `{k}`"))?;
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (v, s.get("items")) {
        for (i, x) in items.iter().enumerate() {
            check_schema(item_schema, x, &format!("item {i}"))?;
        }
    }
    Ok(())
}

/// The data of a pending response of kind `tool_call`: `tool`, `args`, `args_hash`, the tool's `parameters`
/// (what an edit is checked against and a form is drawn from), the call's `n` and the `agent_path`.
pub fn approval_data(tool: &str, args: &Value, parameters: &Value, n: u32, path: &str) -> Value {
    let mut data = Map::new();
    data.insert("tool".into(), json!(tool));
    data.insert("args".into(), args.clone());
    data.insert("args_hash".into(), json!(tool_args_hash(tool, args)));
    data.insert("parameters".into(), parameters.clone());
    data.insert("n".into(), json!(n));
    data.insert("agent_path".into(), json!(path));
    Value::Object(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pending::PendingKind;

    /// `additionalProperties: false` refuses a field the properties do not name, listing the fields.
    #[test]
    fn a_closed_object_refuses_an_unknown_field() {
        let schema = json!({
            "type": "object",
            "properties": {"amount": {"type": "number"}},
            "required": ["amount"],
            "additionalProperties": false,
        });
        assert_eq!(check_schema(&schema, &json!({"amount": 5}), "the call"), Ok(()));
        assert_eq!(
            check_schema(&schema, &json!({"amount": 5, "account": "x"}), "the call"),
            Err("the call has an unknown field `account` (the fields are: amount)".to_string())
        );
        let empty = json!({"type": "object", "additionalProperties": false});
        assert_eq!(
            check_schema(&empty, &json!({"a": 1}), "the edit"),
            Err("the edit has an unknown field `a` (the fields are: none)".to_string())
        );
        let open = json!({"type": "object", "properties": {"amount": {"type": "number"}}});
        assert_eq!(check_schema(&open, &json!({"amount": 5, "account": "x"}), "the call"), Ok(()));
    }

    #[test]
    fn the_args_hash_is_the_sha256_of_the_canonical_json() {
        // RFC 8785: keys sorted, no spaces. sha256('{"args":{"a":1,"b":"x"},"tool":"t"}').
        let h = tool_args_hash("t", &json!({"b": "x", "a": 1}));
        let expected = Sha256::digest(br#"{"args":{"a":1,"b":"x"},"tool":"t"}"#);
        let hex: String = expected.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(h, hex);
        assert_eq!(h.len(), 64);
        assert_ne!(h, tool_args_hash("t", &json!({"a": 2, "b": "x"})));
    }

    #[test]
    fn decisions_are_read_from_their_answers_or_refused_saying_why() {
        assert_eq!(ToolDecision::from_answer(&json!("approve")), Ok(ToolDecision::Approve));
        assert_eq!(ToolDecision::from_answer(&json!("reject")), Ok(ToolDecision::Reject { message: String::new() }));
        assert_eq!(
            ToolDecision::from_answer(&json!({"decision": "edit", "args": {"amount": 5}})),
            Ok(ToolDecision::Edit { args: json!({"amount": 5}) })
        );
        assert_eq!(
            ToolDecision::from_answer(&json!({"decision": "edit"})).unwrap_err(),
            "an `edit` needs field `args`: the arguments to run the tool with"
        );
        assert!(ToolDecision::from_answer(&json!({"decision": "maybe"})).unwrap_err().starts_with("unknown decision"));
        assert!(ToolDecision::from_answer(&json!(42)).unwrap_err().starts_with("a tool call's answer cannot be 42"));
        assert_eq!(DoubtAnswer::from_answer(&json!({"result": 7})), Ok(DoubtAnswer::Result(json!(7))));
        assert_eq!(DoubtAnswer::from_answer(&json!("retry")), Ok(DoubtAnswer::Retry));
        assert!(DoubtAnswer::from_answer(&json!("maybe")).is_err());
    }

    #[test]
    fn answers_are_checked_against_the_pending_call_and_record_who_answered() {
        let params = json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]});
        let data = approval_data("refund", &json!({"amount": 150}), &params, 0, "root/0");
        let hash = data["args_hash"].as_str().unwrap().to_string();
        let kind = PendingKind::ToolCall;
        assert_eq!(
            check_tool_answer(kind, &json!("approve"), &data, Some("cli:ana")),
            Ok(json!({"decision": "approve", "by": "cli:ana"}))
        );
        let ok = json!({"decision": "approve", "args_hash": hash.to_uppercase()});
        assert_eq!(check_tool_answer(kind, &ok, &data, None), Ok(json!({"decision": "approve"})));
        let stale = json!({"decision": "approve", "args_hash": "abc"});
        assert_eq!(
            check_tool_answer(kind, &stale, &data, None),
            Err(ToolAnswerRefusal::Stale { expected: hash, given: "abc".into() })
        );
        let bad_edit = json!({"decision": "edit", "args": {"amount": "all"}});
        assert_eq!(
            check_tool_answer(kind, &bad_edit, &data, None),
            Err(ToolAnswerRefusal::Invalid("field `amount` must be of type integer, found \"all\"".into()))
        );
        let doubt = check_tool_answer(PendingKind::InDoubt, &json!("retry"), &Value::Null, Some("ops")).unwrap();
        assert_eq!(doubt, json!({"answer": "retry", "by": "ops"}));
        assert_eq!(doubt_answer(&doubt), Ok(DoubtAnswer::Retry));
        assert_eq!(answered_by(&doubt).as_deref(), Some("ops"));
        let result = check_tool_answer(PendingKind::InDoubt, &json!({"result": {"id": 1}}), &Value::Null, None);
        assert_eq!(doubt_answer(&result.unwrap()), Ok(DoubtAnswer::Result(json!({"id": 1}))));
    }

    #[test]
    fn entries_serialize_compactly_and_round_trip() {
        let mut e = ToolCallEntry::new(2, 1, "c9", "charge", json!({"amount": 3}), ToolCallStatus::Started);
        e.effect = Effect::Once;
        e.at_us = 5;
        let v = serde_json::to_value(CallEntry::Tool(e.clone())).unwrap();
        assert_eq!(
            v,
            json!({"type": "tool", "n": 2, "turn": 1, "call_id": "c9", "tool": "charge", "args": {"amount": 3},
                   "status": "started", "effect": "once", "at_us": 5})
        );
        assert_eq!(serde_json::from_value::<CallEntry>(v).unwrap(), CallEntry::Tool(e));
    }
}
