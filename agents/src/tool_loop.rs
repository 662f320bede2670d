//! An agent's loop of model turns and tool calls made durable (SPEC.md §4): [`LoopJournal`] holds what the
//! invocation journaled before the run stopped, so that the loop continues where it stopped (an answered
//! model turn is not asked again, a finished tool call is not run again), and the pending responses a tool
//! call waits on: a person's approval ([`approval_pending`]) and a call a crash left in doubt
//! ([`resolve_in_doubt`]).

use std::collections::BTreeMap;

use agentic_engine::{
    CallEntry, DoubtAnswer, Effect, InvocationContext, ModelTurnEntry, PendingKind, PendingResponse, Stop,
    ToolCallEntry, ToolCallStatus, ToolDecision,
};
use serde_json::{Value, json};

/// What the journal says about one tool call of the invocation.
#[derive(Debug, Default, Clone)]
pub(crate) struct CallState {
    /// A person's decision (approved, edited, rejected, responded), with who made it.
    pub(crate) decision: Option<ToolCallEntry>,
    /// It waits (waited) for approval: its pending response was journaled.
    pub(crate) awaiting: bool,
    /// It was sent.
    pub(crate) started: Option<ToolCallEntry>,
    /// It is in doubt and that was journaled after its last start: the person's answer, when the run has one,
    /// is for that start. A start journaled after an in-doubt entry is a resend its answer asked for.
    pub(crate) in_doubt: bool,
    /// Its result came back (or was given).
    pub(crate) finished: Option<ToolCallEntry>,
}

/// The journaled model turns and tool calls of one invocation, and its position in them.
#[derive(Debug, Default)]
pub(crate) struct LoopJournal {
    /// The model turns answered before the run stopped, by turn number.
    turns: BTreeMap<u32, ModelTurnEntry>,
    /// The tool calls' states, by call number.
    calls: BTreeMap<u32, CallState>,
    /// The next model turn's number.
    pub(crate) next_turn: u32,
    /// The next tool call's number.
    pub(crate) next_call: u32,
    /// How many of the request's messages the journal holds (the next turn journals the others).
    pub(crate) sent: usize,
    /// The budgets a person raised during the invocation, the last raise's limits by budget path.
    pub(crate) raised: Option<serde_json::Map<String, Value>>,
    /// What the previous turn's request set besides its messages (a turn journals its own when they differ).
    pub(crate) options: serde_json::Map<String, Value>,
}

impl LoopJournal {
    /// The journal of `ctx`'s invocation: what it journaled before the run stopped (nothing on a first run).
    pub(crate) async fn resume(ctx: &InvocationContext) -> LoopJournal {
        let mut journal = LoopJournal::default();
        if !ctx.calls().journaled() {
            return journal;
        }
        for entry in ctx.calls().resumed().await {
            match entry {
                // A call that is not a loop turn (a summary of the context) is not replayed by the loop.
                CallEntry::Model(turn) if turn.purpose.is_none() => {
                    journal.turns.insert(turn.turn, turn);
                }
                CallEntry::Budget(raise) => journal.raised = Some(raise.limits),
                CallEntry::Tool(call) => {
                    let state = journal.calls.entry(call.n).or_default();
                    match call.status {
                        ToolCallStatus::AwaitingApproval => state.awaiting = true,
                        ToolCallStatus::Approved
                        | ToolCallStatus::Edited
                        | ToolCallStatus::Rejected
                        | ToolCallStatus::Responded => state.decision = Some(call),
                        ToolCallStatus::Started => {
                            state.started = Some(call);
                            state.in_doubt = false;
                        }
                        ToolCallStatus::InDoubt => state.in_doubt = true,
                        ToolCallStatus::Finished => state.finished = Some(call),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        journal
    }

    /// Whether anything was journaled before (the invocation continues a loop).
    pub(crate) fn is_resumed(&self) -> bool {
        !self.turns.is_empty() || !self.calls.is_empty()
    }

    /// The answer of model turn `turn`, if it was journaled.
    pub(crate) fn turn(&self, turn: u32) -> Option<&ModelTurnEntry> {
        self.turns.get(&turn)
    }

    /// What the journal says about tool call `n` (taken: each call is looked at once).
    pub(crate) fn take_call(&mut self, n: u32) -> CallState {
        self.calls.remove(&n).unwrap_or_default()
    }
}

/// The pending response of kind `tool_call` asking a person to approve call `n` of `tool` with `args`.
pub(crate) fn approval_pending(
    ctx: &InvocationContext,
    n: u32,
    tool: &str,
    args: &Value,
    parameters: &Value,
) -> PendingResponse {
    let id = agentic_engine::approval_id(ctx.path(), ctx.item(), n);
    let item = ctx.item().map_or_else(String::new, |i| format!(" (item {i})"));
    let prompt =
        format!("`{}`{item} wants to call `{tool}` with {args}: approve, edit, reject or respond?", ctx.agent_name());
    let mut pending = ctx.human().question(id, prompt);
    pending.kind = PendingKind::ToolCall;
    pending.data = agentic_engine::approval_data(tool, args, parameters, n, ctx.path());
    if let (Some(item), Value::Object(data)) = (ctx.item(), &mut pending.data) {
        data.insert("item".to_string(), json!(item));
    }
    pending
}

/// A person's decision about call `n`, when one was given: taken from the run's answers (used once) and
/// read, with who answered.
///
/// # Errors
/// A failure naming the call when the recorded answer is not a decision (one recorded without the checks
/// of the respond door).
pub(crate) async fn take_decision(
    ctx: &InvocationContext,
    n: u32,
) -> Result<Option<(ToolDecision, Option<String>)>, Stop> {
    let id = agentic_engine::approval_id(ctx.path(), ctx.item(), n);
    let Some(answer) = ctx.human().take(&id).await else { return Ok(None) };
    let decision = ToolDecision::from_answer(&answer).map_err(|e| ctx.fail(format!("the answer to `{id}`: {e}")))?;
    Ok(Some((decision, agentic_engine::answered_by(&answer))))
}

/// The journal entry recording `decision` about call `call` (its arguments the ones that run).
pub(crate) fn decision_entry(call: &ToolCallEntry, decision: &ToolDecision, by: Option<String>) -> ToolCallEntry {
    let mut entry = call.clone();
    entry.at_us = agentic_engine::now_ms() * 1000;
    entry.by = by;
    entry.status = match decision {
        ToolDecision::Approve => ToolCallStatus::Approved,
        ToolDecision::Edit { args } => {
            entry.args = args.clone();
            ToolCallStatus::Edited
        }
        ToolDecision::Reject { message } => {
            entry.message = Some(message.clone());
            ToolCallStatus::Rejected
        }
        ToolDecision::Respond { result } => {
            entry.result = Some(result.clone());
            ToolCallStatus::Responded
        }
        _ => ToolCallStatus::Approved,
    };
    entry
}

/// What to do with a call a crash cut after it was sent.
pub(crate) enum Doubt {
    /// Send it again (effect `none` or `retry`, or a person answered `retry`: who, journaled with the
    /// call's new start).
    Resend(Option<String>),
    /// A person answered `fail`: the entry that journals it, and the invocation's failure.
    Failed(ToolCallEntry, agentic_engine::AgentError),
    /// A person said what it did: this result (the entry to journal records it).
    Answered(ToolCallEntry),
    /// It waits for a person: this pending response (and, when not journaled yet, the `in_doubt` entry).
    Pending(PendingResponse, Option<ToolCallEntry>),
}

/// What happens to call `started` (journaled as started, without a result) now that the invocation runs
/// again: effect `none` and `retry` send it again; `once` asks a person, whose answer
/// (`{"result": ..}`, `"retry"`, `"fail"`) is taken when given.
///
/// # Errors
/// A failure when a person answered `"fail"`, or the answer cannot be read.
pub(crate) async fn resolve_in_doubt(
    ctx: &InvocationContext,
    started: &ToolCallEntry,
    journaled_in_doubt: bool,
) -> Result<Doubt, Stop> {
    if started.effect != Effect::Once {
        return Ok(Doubt::Resend(None));
    }
    let id = agentic_engine::doubt_id(ctx.path(), ctx.item(), started.n);
    let answer = ctx.human().take(&id).await;
    // An answer given before this start was asked about (its doubt not journaled since) answered an earlier
    // doubt of the same call, and was acted on: the resend is this start. A run taken over while its record
    // still holds that answer asks again rather than sending the call a third time.
    if let Some(answer) = answer.filter(|_| journaled_in_doubt) {
        let by = agentic_engine::answered_by(&answer);
        return match agentic_engine::doubt_answer(&answer)
            .map_err(|e| ctx.fail(format!("the answer to `{id}`: {e}")))?
        {
            DoubtAnswer::Retry => Ok(Doubt::Resend(Some(by.unwrap_or_else(|| "a person".to_string())))),
            DoubtAnswer::Result(result) => {
                let mut entry = started.clone();
                entry.status = ToolCallStatus::Finished;
                entry.result = Some(result);
                entry.by = by;
                entry.at_us = agentic_engine::now_ms() * 1000;
                Ok(Doubt::Answered(entry))
            }
            DoubtAnswer::Fail => {
                let who = by.unwrap_or_else(|| "a person".to_string());
                let message = format!(
                    "the call of `{}` (call {} of the agent) was in doubt after a crash, and {who} answered `fail`",
                    started.tool, started.n,
                );
                let mut entry = started.clone();
                entry.status = ToolCallStatus::Finished;
                entry.error = Some("failed, as answered".to_string());
                entry.by = Some(who);
                entry.at_us = agentic_engine::now_ms() * 1000;
                Ok(Doubt::Failed(entry, ctx.fail(message)))
            }
            _ => Ok(Doubt::Resend(None)),
        };
    }
    let started_at = agentic_engine::rfc3339_ms(started.at_us / 1000);
    let prompt = format!(
        "`{}` called `{}` with {} at {started_at}, and the run stopped before its result came back: it may or may \
         not have happened. Answer {{\"result\": <what it did>}}, \"retry\" (call it again) or \"fail\".",
        ctx.agent_name(),
        started.tool,
        started.args
    );
    let mut pending = ctx.human().question(id, prompt);
    pending.kind = PendingKind::InDoubt;
    pending.data = json!({"tool": started.tool, "args": started.args, "started_at": started_at, "n": started.n,
                          "agent_path": ctx.path()});
    if let (Some(item), Value::Object(data)) = (ctx.item(), &mut pending.data) {
        data.insert("item".to_string(), json!(item));
    }
    let entry = (!journaled_in_doubt).then(|| {
        let mut e = started.clone();
        e.status = ToolCallStatus::InDoubt;
        e.at_us = agentic_engine::now_ms() * 1000;
        e
    });
    Ok(Doubt::Pending(pending, entry))
}
