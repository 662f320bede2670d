//! Budgets (SPEC.md §3): what a run, or one agent and what it contains, may spend on models — tokens, model
//! calls, cost in USD — and what happens when a call crosses the limit. [`Usage`] is journaled with each step
//! ([`InvocationRecord::usage`]); [`Budget`] is set on an agent ([`crate::AgentSpec::budget`], the
//! spec's `budget:`; the spec's top-level `budget:` is the root agent's); `Ledger` adds up, for one run,
//! what each budget's agents spent, from the journal on resume and from each call as it ends.
//!
//! The check (after pydantic-ai's usage limits): a call is refused before it is sent when a budget is already
//! spent (`model_calls` reached, or tokens or cost at or over the limit), and the call whose usage crosses a
//! token or cost limit ends its invocation at once: `on_exceed: suspend` suspends the run with a pending
//! response of kind [`PendingKind::Budget`] — answered with a new limit or `stop` — and keeps the
//! answers of the invocation's calls so far, which the resumed invocation gets back instead of calling the
//! model again; `on_exceed: fail` fails the invocation.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use crate::journal::FailedUsage;
pub use crate::usage::{ModelUsage, Prices, Usage};

use crate::journal::{InvocationRecord, RunImage};
use crate::pending::{PendingKind, PendingResponse};

/// What happens when a call crosses a budget (SPEC.md §3 `on_exceed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExceed {
    /// The run suspends with a `budget` pending response: a new limit or `stop` (the default).
    #[default]
    Suspend,
    /// The invocation fails.
    Fail,
}

/// A budget: limits on what an agent, and the agents it contains, spend on models (SPEC.md §3 `budget`).
/// A limit left out is not limited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Input plus output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<u64>,
    /// Cost in USD (every model called under it needs `prices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// What happens when a call crosses it.
    #[serde(default)]
    pub on_exceed: OnExceed,
}

impl Budget {
    /// The limits `used` has reached (`>=`), as phrases (`1200 tokens of 1000`).
    pub fn reached(&self, used: &Usage) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = self.tokens.filter(|t| used.tokens() >= *t) {
            out.push(format!("{} tokens of {t}", used.tokens()));
        }
        if let Some(c) = self.model_calls.filter(|c| used.model_calls >= *c) {
            let s = if used.model_calls == 1 { "" } else { "s" };
            out.push(format!("{} model call{s} of {c}", used.model_calls));
        }
        if let Some(c) = self.cost_usd.filter(|c| used.cost_usd.unwrap_or(0.0) >= *c) {
            out.push(format!("{} of {}", usd(used.cost_usd.unwrap_or(0.0)), usd(c)));
        }
        out
    }

    /// The token or cost limits `used` has gone over (`>`): what a call that just ended crossed.
    pub fn crossed(&self, used: &Usage) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = self.tokens.filter(|t| used.tokens() > *t) {
            out.push(format!("{} tokens of {t}", used.tokens()));
        }
        if let Some(c) = self.cost_usd.filter(|c| used.cost_usd.unwrap_or(0.0) > *c) {
            out.push(format!("{} of {}", usd(used.cost_usd.unwrap_or(0.0)), usd(c)));
        }
        out
    }

    /// This budget with the new limits of a `budget` pending response's `answer`: a number raises every
    /// limit in `crossed` (`tokens`, `model_calls`, `cost_usd`), an object sets the limits it names. A limit
    /// must be one this budget has, a whole number for `tokens` and `model_calls`, and above what `used`
    /// holds already (else the run would stop again at once).
    ///
    /// # Errors
    /// A message saying what is wrong with `answer`.
    pub fn raised(&self, answer: &Value, crossed: &[String], used: &Usage) -> Result<Budget, String> {
        let pairs: Vec<(String, &Value)> = match answer {
            Value::Number(_) => crossed.iter().map(|c| (c.clone(), answer)).collect(),
            Value::Object(m) if !m.is_empty() => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
            _ => return Err(answer_error(answer)),
        };
        let mut b = *self;
        for (limit, v) in pairs {
            let has = match limit.as_str() {
                "tokens" => self.tokens.is_some(),
                "model_calls" => self.model_calls.is_some(),
                "cost_usd" => self.cost_usd.is_some(),
                _ => return Err(answer_error(answer)),
            };
            if !has {
                return Err(format!("this budget has no `{limit}` limit to raise (it limits {})", self.names()));
            }
            let n = v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).ok_or_else(|| answer_error(answer))?;
            let (now, whole) = match limit.as_str() {
                "tokens" => (used.tokens() as f64, true),
                "model_calls" => (used.model_calls as f64, true),
                _ => (used.cost_usd.unwrap_or(0.0), false),
            };
            if whole && n.fract() != 0.0 {
                return Err(format!("`{limit}` is a whole number, not {n}"));
            }
            if n <= now {
                return Err(format!("the new `{limit}` limit, {n}, must be above what is used already, {now}"));
            }
            match limit.as_str() {
                "tokens" => b.tokens = Some(n as u64),
                "model_calls" => b.model_calls = Some(n as u64),
                _ => b.cost_usd = Some(n),
            }
        }
        let still = b.reached_names(used);
        if let Some(limit) = crossed.iter().find(|c| still.contains(c)) {
            return Err(format!("the answer must raise `{limit}`, the limit that was reached"));
        }
        Ok(b)
    }

    /// The limits it has, as `tokens, cost_usd`.
    fn names(&self) -> String {
        let mut out = Vec::new();
        for (name, set) in [
            ("`tokens`", self.tokens.is_some()),
            ("`model_calls`", self.model_calls.is_some()),
            ("`cost_usd`", self.cost_usd.is_some()),
        ] {
            if set {
                out.push(name);
            }
        }
        out.join(", ")
    }

    /// The names of the limits (`tokens`, `model_calls`, `cost_usd`) `used` has reached.
    pub fn reached_names(&self, used: &Usage) -> Vec<String> {
        let mut out = Vec::new();
        if self.tokens.is_some_and(|t| used.tokens() >= t) {
            out.push("tokens".to_string());
        }
        if self.model_calls.is_some_and(|c| used.model_calls >= c) {
            out.push("model_calls".to_string());
        }
        if self.cost_usd.is_some_and(|c| used.cost_usd.unwrap_or(0.0) >= c) {
            out.push("cost_usd".to_string());
        }
        out
    }
}

/// Whether `answer` is a valid answer to a `budget` pending response whose `data` (the limits, what was
/// used and reached) it answers: `"stop"`, or new limits as [`Budget::raised`] takes them.
///
/// # Errors
/// The message saying what is wrong.
pub fn check_budget_answer(answer: &Value, data: &Value) -> Result<(), String> {
    if answer.as_str() == Some("stop") {
        return Ok(());
    }
    let limits: Budget = serde_json::from_value(data.get("limits").cloned().unwrap_or(Value::Null)).unwrap_or_default();
    let used: Usage = serde_json::from_value(data.get("used").cloned().unwrap_or(Value::Null)).unwrap_or_default();
    limits.raised(answer, &reached_of(data), &used).map(|_| ())
}

/// The limits a budget pending response's `data` says were reached.
pub(crate) fn reached_of(data: &Value) -> Vec<String> {
    data.get("reached")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn answer_error(answer: &Value) -> String {
    format!(
        "a budget is answered with a new limit — a number (for the limit that was reached) or an object such \
         as {{\"tokens\": 5000, \"cost_usd\": 2.5}} — or \"stop\"; got {answer}"
    )
}

/// A cost in USD as shown: `$1.2346` (four decimals), `$0.001500` (six below a cent).
pub fn usd(v: f64) -> String {
    if v < 0.01 { format!("${v:.6}") } else { format!("${v:.4}") }
}

/// The response id of the budget suspension of the invocation at `path` (and mapper item `item`).
pub fn budget_response_id(path: &str, item: Option<&str>) -> String {
    format!("budget:{path}{}", item.unwrap_or(""))
}

/// One budget of a run and what its agents spent.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    /// Path of the agent that has it.
    pub(crate) path: String,
    /// Its name.
    pub(crate) agent: String,
    /// The limits in effect (raised by answers).
    pub(crate) budget: Budget,
    /// Spent by the agents under it.
    pub(crate) used: Usage,
}

impl Tracked {
    /// Whether the invocation at `path` is under this budget.
    pub(crate) fn covers(&self, path: &str) -> bool {
        path == self.path || (path.starts_with(&self.path) && path.as_bytes().get(self.path.len()) == Some(&b'/'))
    }

    /// The `data` of a budget pending response for this budget.
    pub(crate) fn pending_data(
        &self,
        path: &str,
        crossed: &[String],
        calls: Vec<Value>,
        invocation: &Usage,
        journaled: bool,
    ) -> Value {
        let mut data = json!({
            "path": path,
            "budget_path": self.path,
            "budget_agent": self.agent,
            "limits": self.budget,
            "used": self.used,
            "reached": crossed,
            "invocation_usage": invocation,
            "calls": calls,
        });
        if journaled {
            data["journaled"] = Value::Bool(true);
        }
        data
    }
}

/// The budgets of one run and their spending.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) budgets: Vec<Tracked>,
}

impl Ledger {
    /// Adds `usage` (at invocation `path`) to every budget covering it.
    pub(crate) fn spend(&mut self, path: &str, usage: &Usage) {
        for b in self.budgets.iter_mut().filter(|b| b.covers(path)) {
            b.used.add(usage);
        }
    }

    /// Whether any budget covers `path`.
    pub(crate) fn covers(&self, path: &str) -> bool {
        self.budgets.iter().any(|b| b.covers(path))
    }
}

/// The model calls of one invocation: its tokens and usage, and what a budget suspension keeps of them.
#[derive(Debug, Default)]
pub(crate) struct InvocationUsage {
    /// Tokens (input, output) of every call, and of [`crate::UsageView::add_tokens`].
    pub(crate) tokens: Option<crate::journal::TokenUsage>,
    /// Tokens, calls, cost and models.
    pub(crate) usage: Option<Usage>,
    /// Whether the invocation looked for its budget suspension (at its first model call).
    pub(crate) resumed: bool,
    /// Answers of calls made before its budget suspension, handed back in order instead of calling again.
    pub(crate) replay: std::collections::VecDeque<Value>,
    /// The answers of its calls so far, kept when a budget applies (for a suspension).
    pub(crate) calls: Vec<Value>,
    /// The invocation journals its model turns (SPEC.md §4): a suspension keeps neither its answers nor
    /// its usage (the journal has both).
    pub(crate) journaled: bool,
}

impl InvocationUsage {
    /// Adds tokens not counted as a call.
    pub(crate) fn add_tokens(&mut self, t: crate::journal::TokenUsage) {
        let acc = self.tokens.get_or_insert_with(crate::journal::TokenUsage::default);
        acc.input += t.input;
        acc.output += t.output;
        let u = self.usage.get_or_insert_with(Usage::default);
        u.input_tokens += t.input;
        u.output_tokens += t.output;
    }

    /// Adds one model call.
    pub(crate) fn add_call(&mut self, model: &str, t: crate::journal::TokenUsage, cost_usd: Option<f64>) {
        let acc = self.tokens.get_or_insert_with(crate::journal::TokenUsage::default);
        acc.input += t.input;
        acc.output += t.output;
        self.usage.get_or_insert_with(Usage::default).add_call(model, t.input, t.output, cost_usd);
    }
}

impl Ledger {
    /// The ledger of a run whose agents have `budgets` (raised by earlier answers kept in `state` under
    /// [`BUDGET_KEY`] and in `suspensions`), with what the journal's `history` and the budget suspensions
    /// spent. `None` when no agent has a budget.
    pub(crate) fn for_run(
        budgets: Vec<Tracked>,
        history: &[InvocationRecord],
        failed: &[crate::journal::FailedUsage],
        state: &serde_json::Map<String, Value>,
        suspensions: &[PendingResponse],
        in_progress: &std::collections::BTreeMap<String, Vec<crate::tool_call::CallEntry>>,
    ) -> Option<Self> {
        if budgets.is_empty() {
            return None;
        }
        let mut ledger = Ledger { budgets };
        let raised = state.get(BUDGET_KEY).and_then(Value::as_object);
        for t in &mut ledger.budgets {
            if let Some(b) = raised.and_then(|r| r.get(&t.path)).and_then(|v| serde_json::from_value(v.clone()).ok()) {
                t.budget = b;
            }
        }
        for r in history {
            if let Some(u) = &r.usage {
                ledger.spend(&r.path, u);
            }
        }
        for f in failed {
            ledger.spend(&f.path, &f.usage);
        }
        // The model turns of invocations still running (SPEC.md §4), journaled as they were answered.
        for (key, calls) in in_progress {
            let path = key.split('|').next().unwrap_or(key);
            for call in calls {
                if let crate::tool_call::CallEntry::Model(turn) = call {
                    ledger.spend(path, &turn.usage);
                }
            }
        }
        for p in suspensions.iter().filter(|p| p.kind == PendingKind::Budget && !consumed(p, history)) {
            let data = &p.data;
            // An invocation that journals its model turns is counted from the journal (above).
            let journaled = data.get("journaled").and_then(Value::as_bool).unwrap_or(false);
            if let (false, Some(path), Ok(u)) = (
                journaled,
                data.get("path").and_then(Value::as_str),
                serde_json::from_value::<Usage>(data.get("invocation_usage").cloned().unwrap_or(Value::Null)),
            ) {
                ledger.spend(path, &u);
            }
            let limits = data.get("limits").and_then(|v| serde_json::from_value::<Budget>(v.clone()).ok());
            let at = data.get("budget_path").and_then(Value::as_str);
            if let (Some(b), Some(at)) = (limits, at)
                && let Some(t) = ledger.budgets.iter_mut().find(|t| t.path == at)
            {
                t.budget = b;
            }
        }
        Some(ledger)
    }
}

/// Whether the invocation that suspended at budget response `p` has completed since (`history` holds more
/// completed invocations of its agent at its path than when it asked): the answer was taken, its spending is in
/// its record and the raised limits in the state. A running run's record keeps the responses its resume was
/// given until it suspends or ends, so a run taken over from a server that died holds such responses.
fn consumed(p: &PendingResponse, history: &[InvocationRecord]) -> bool {
    let (Some(path), Some(before)) = (p.data.get("path").and_then(Value::as_str), p.data.get("occurrence")) else {
        return false;
    };
    let item = p.data.get("item").and_then(Value::as_str);
    let done = InvocationRecord::completed_in(history, &p.agent, path, item);
    before.as_u64().is_some_and(|n| u64::from(done) > n)
}

/// What a run spent on models, per agent (by path, in the order first seen) and in total: the journal's
/// `history` and the calls of invocations suspended at a budget (`pending`). What `show`, `GET /runs/{id}`
/// and the report give (SPEC.md §3): `{"agents": [{"agent", "path", "input_tokens", "output_tokens",
/// "tokens", "model_calls", "cost_usd", "models"}], "total": {.. the same, "models"}, "by_model": [{"model",
/// "input_tokens", "output_tokens", "tokens", "model_calls", "cost_usd"}]}` (`cost_usd` null when no call was
/// priced; models by the names usage calls them: a spec's `models` entries).
pub fn usage_by_agent(image: &RunImage, pending: &[PendingResponse]) -> Value {
    usage_json(image_rows(image, pending))
}

/// What a run spent on models in all, from its stored `image` and its questions (`pending`): the `total` of
/// [`usage_by_agent`], typed, with the models called (the cost rounded as there).
pub fn usage_total(image: &RunImage, pending: &[PendingResponse]) -> Usage {
    sum_rows(image_rows(image, pending))
}

/// The rows of [`usage_by_agent`].
fn image_rows(image: &RunImage, pending: &[PendingResponse]) -> UsageRows {
    let mut rows = usage_rows(&image.history, &image.failed_usage);
    // Invocations still running (suspended at a tool call, a budget, a crash) count their journaled turns.
    for (key, calls) in &image.calls {
        let path = key.split('|').next().unwrap_or(key);
        let agent = pending
            .iter()
            .find(|p| {
                p.data.get("agent_path").and_then(Value::as_str) == Some(path)
                    || p.data.get("path").and_then(Value::as_str) == Some(path)
            })
            .map(|p| p.agent.clone())
            .or_else(|| image.history.iter().find(|r| r.path == path).map(|r| r.agent.clone()))
            .unwrap_or_else(|| path.to_string());
        for call in calls {
            if let crate::tool_call::CallEntry::Model(turn) = call {
                add_usage(&mut rows, &agent, path, &turn.usage);
            }
        }
    }
    with_pending(rows, pending)
}

/// What a run spent on models in all (the `total` of [`usage_by_agent`], with the models called), from its
/// `history`, its failed attempts and the invocations suspended at a budget (`pending`): what the run's scope
/// knows without the store. The cost is rounded as [`usage_by_agent`] rounds it.
pub(crate) fn total_usage(history: &[InvocationRecord], failed: &[FailedUsage], pending: &[PendingResponse]) -> Usage {
    sum_rows(with_pending(usage_rows(history, failed), pending))
}

/// The total of the rows, the cost rounded as [`usage_by_agent`] rounds it.
fn sum_rows(rows: UsageRows) -> Usage {
    let mut total = Usage::default();
    for (_, _, u) in rows {
        total.add(&u);
    }
    total.cost_usd = total.cost_usd.map(rounded);
    total
}

/// Per agent path, in the order first seen: (agent, path, usage).
type UsageRows = Vec<(String, String, Usage)>;

fn add_usage(rows: &mut UsageRows, agent: &str, path: &str, u: &Usage) {
    match rows.iter_mut().find(|(_, p, _)| p == path) {
        Some((_, _, acc)) => acc.add(u),
        None => rows.push((agent.to_string(), path.to_string(), u.clone())),
    }
}

/// The usage of the invocations that ended, failed attempts included.
fn usage_rows(history: &[InvocationRecord], failed: &[FailedUsage]) -> UsageRows {
    let mut agents = UsageRows::new();
    let mut add = |agent: &str, path: &str, u: &Usage| add_usage(&mut agents, agent, path, u);
    for r in history {
        if let Some(u) = &r.usage {
            add(&r.agent, &r.path, u);
        } else if let Some(t) = r.tokens {
            add(&r.agent, &r.path, &Usage { input_tokens: t.input, output_tokens: t.output, ..Usage::default() });
        }
    }
    for f in failed {
        add(&f.agent, &f.path, &f.usage);
    }
    agents
}

/// The rows with what invocations suspended at a budget spent (`pending`).
fn with_pending(mut agents: UsageRows, pending: &[PendingResponse]) -> UsageRows {
    let mut add = |agent: &str, path: &str, u: &Usage| add_usage(&mut agents, agent, path, u);
    for p in pending.iter().filter(|p| p.kind == PendingKind::Budget) {
        if p.data.get("journaled").and_then(Value::as_bool).unwrap_or(false) {
            continue;
        }
        let path = p.data.get("path").and_then(Value::as_str).unwrap_or_default();
        if let Ok(u) = serde_json::from_value::<Usage>(p.data.get("invocation_usage").cloned().unwrap_or(Value::Null)) {
            add(&p.agent, path, &u);
        }
    }
    agents
}

/// The rows and their total, as JSON.
fn usage_json(agents: UsageRows) -> Value {
    let mut total = Usage::default();
    let rows: Vec<Value> = agents
        .iter()
        .map(|(agent, path, u)| {
            total.add(u);
            json!({"agent": agent, "path": path, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                   "tokens": u.tokens(), "model_calls": u.model_calls, "cost_usd": u.cost_usd.map(rounded),
                   "models": u.models})
        })
        .collect();
    let by_model: Vec<Value> = total
        .per_model()
        .iter()
        .map(|m| {
            json!({"model": m.model, "input_tokens": m.input_tokens, "output_tokens": m.output_tokens,
                   "tokens": m.input_tokens + m.output_tokens, "model_calls": m.model_calls,
                   "cost_usd": m.cost_usd.map(rounded)})
        })
        .collect();
    json!({
        "agents": rows,
        "total": {"input_tokens": total.input_tokens, "output_tokens": total.output_tokens, "tokens": total.tokens(),
                  "model_calls": total.model_calls, "cost_usd": total.cost_usd.map(rounded), "models": total.models},
        "by_model": by_model,
    })
}

/// A cost rounded to a billionth of a dollar (sums of float prices are not exact).
fn rounded(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

/// The state key where the limits raised by answers are kept, by the path of the agent whose budget it is.
pub const BUDGET_KEY: &str = "_budget";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_reached_and_crossed() {
        let b = Budget { tokens: Some(1000), model_calls: Some(3), ..Budget::default() };
        let mut used = Usage::default();
        used.add_call("m", 600, 400, None);
        assert_eq!(b.reached(&used), vec!["1000 tokens of 1000"]);
        assert!(b.crossed(&used).is_empty());
        used.add_call("m", 1, 0, None);
        assert_eq!(b.crossed(&used), vec!["1001 tokens of 1000"]);
        used.add_call("m", 0, 0, None);
        assert_eq!(b.reached_names(&used), vec!["tokens", "model_calls"]);
    }

    /// A run taken over after its resume: the record still lists the budget response its resume answered.
    #[test]
    fn a_budget_response_whose_invocation_completed_since_neither_resets_limits_nor_counts_twice() {
        let budget = Budget { tokens: Some(15), on_exceed: OnExceed::Suspend, ..Budget::default() };
        let tracked = || vec![Tracked { path: "root".into(), agent: "main".into(), budget, used: Usage::default() }];
        let mut spent = Usage::default();
        spent.add_call("m", 5, 5, None);
        let record = |agent: &str, path: &str| -> InvocationRecord {
            serde_json::from_value(json!({"agent": agent, "path": path, "inputs": {}, "output": "ok",
                "started_at_us": 1, "ended_at_us": 2, "attempt": 1, "usage": spent, "error": null}))
            .unwrap()
        };
        let mut asked = PendingResponse::new("budget:root/1", "spent", "b2");
        asked.kind = PendingKind::Budget;
        asked.data = json!({"path": "root/1", "budget_path": "root", "limits": budget, "invocation_usage": spent,
            "occurrence": 0});
        let raised = json!({"_budget": {"root": {"tokens": 1000, "on_exceed": "suspend"}}});
        let state = raised.as_object().unwrap().clone();
        let none = std::collections::BTreeMap::new();

        // b2 completed after the answer: its record counts its call once, the raise in the state holds.
        let history = vec![record("b1", "root/0"), record("b2", "root/1")];
        let ledger = Ledger::for_run(tracked(), &history, &[], &state, &[asked.clone()], &none).unwrap();
        assert_eq!((ledger.budgets[0].budget.tokens, ledger.budgets[0].used.tokens()), (Some(1000), 20));

        // b2 still suspended: its call counts from the response, the limits are those it was asked with.
        let history = vec![record("b1", "root/0")];
        let ledger = Ledger::for_run(tracked(), &history, &[], &state, &[asked.clone()], &none).unwrap();
        assert_eq!((ledger.budgets[0].budget.tokens, ledger.budgets[0].used.tokens()), (Some(15), 20));

        // In a loop, b2's earlier completed invocation at the same path is not the one that asked.
        asked.data["occurrence"] = json!(1);
        let history = vec![record("b1", "root/0"), record("b2", "root/1")];
        let ledger = Ledger::for_run(tracked(), &history, &[], &state, &[asked], &none).unwrap();
        assert_eq!((ledger.budgets[0].budget.tokens, ledger.budgets[0].used.tokens()), (Some(15), 30));
    }

    #[test]
    fn answers_raise_limits_or_are_refused() {
        let b = Budget { tokens: Some(1000), cost_usd: Some(1.0), ..Budget::default() };
        let mut used = Usage::default();
        used.add_call("m", 1000, 200, Some(1.5));
        let r = b.raised(&json!(3000), &["tokens".to_string()], &used).unwrap();
        assert_eq!((r.tokens, r.cost_usd), (Some(3000), Some(1.0)));
        let r = b.raised(&json!({"cost_usd": 2.5}), &[], &used).unwrap();
        assert_eq!((r.tokens, r.cost_usd), (Some(1000), Some(2.5)));
        let data = json!({"limits": b, "used": used, "reached": ["tokens"]});
        assert!(check_budget_answer(&json!("stop"), &data).is_ok());
        let e = check_budget_answer(&json!("more please"), &data).unwrap_err();
        assert!(e.contains("or \"stop\"; got \"more please\""), "{e}");
        assert!(check_budget_answer(&json!({"tokenz": 5}), &data).is_err());
        assert!(check_budget_answer(&json!(-1), &data).is_err());
        let e = check_budget_answer(&json!(1100), &data).unwrap_err();
        assert_eq!(e, "the new `tokens` limit, 1100, must be above what is used already, 1200");
        assert_eq!(check_budget_answer(&json!(1500.5), &data).unwrap_err(), "`tokens` is a whole number, not 1500.5");
        let e = check_budget_answer(&json!({"cost_usd": 9}), &data).unwrap_err();
        assert_eq!(e, "the answer must raise `tokens`, the limit that was reached");
        let e = check_budget_answer(&json!({"model_calls": 9}), &data).unwrap_err();
        assert_eq!(e, "this budget has no `model_calls` limit to raise (it limits `tokens`, `cost_usd`)");
    }

    #[test]
    fn a_budget_covers_its_agent_and_what_it_contains() {
        let t = Tracked { path: "root/1".into(), agent: "a".into(), budget: Budget::default(), used: Usage::default() };
        assert!(t.covers("root/1") && t.covers("root/1/0"));
        assert!(!t.covers("root/10") && !t.covers("root"));
        assert_eq!(Prices { input_per_mtok: 3.0, output_per_mtok: 15.0 }.cost(1000, 100), 0.0045);
    }
}
