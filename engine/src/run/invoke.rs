//! One invocation of one agent, leaf or composite, as its actor opens and closes it: resolve the inputs,
//! start its span and events ([`Invocation::open`]); then build its history record, report its events and
//! hand its writes and result to the scope actor ([`Invocation::close`]). What runs in between is the leaf's
//! `invoke` (in an `AgentActor`) or the planner's steps (in a `SupervisorActor`).

use std::sync::Arc;

use ractor::ActorCell;
use serde_json::{Map, Value};

use crate::agent::AgentRef;
use crate::error::AgentError;
use crate::invocation::InvocationContext;
use crate::journal::InvocationRecord;
use crate::listener::{ListenerRef, RunEvent};
use crate::lock::lock;
use crate::run_actor::Frame;
use crate::run_actor::RunHandle;
use crate::run_actor::now_us;
use crate::run_actor::{ChildOutcome, Delivery, InvocationDone, Report, ScopeMsg};
use crate::scope::merge_delta;
use crate::stop::Stop;

/// An open invocation: its context (what the agent sees) and what closing it needs.
pub(crate) struct Invocation {
    pub(crate) ctx: InvocationContext,
    pub(crate) span: tracing::Span,
    started: u64,
    /// The key the engine writes the result to (none for composites without a result to write, async
    /// starts, mapped calls).
    pub(crate) write_key: Option<String>,
}

/// A closed invocation: the result for its supervisor and what the scope receives with it.
pub(crate) struct Closed {
    /// The scope layer of the mapper item the invocation served: its writes go there.
    pub(crate) item: Option<Arc<str>>,
    pub(crate) result: Result<ChildOutcome, Stop>,
    /// Writes for the scope (the output, the writes staged for completion).
    pub(crate) scope_writes: Vec<(String, Value)>,
    /// The history record (none for a suspension).
    pub(crate) record: Option<InvocationRecord>,
    /// The record of a failed attempt, for the journal.
    pub(crate) failed: Option<InvocationRecord>,
}

impl Closed {
    /// Sends the writes and the record to the scope actor, which then hands the result to `report`: the
    /// receiver sees the writes in the published snapshot.
    pub(crate) fn send(self, run: &RunHandle, report: Report) {
        let then = Delivery { report, result: self.result, failed: self.failed };
        let msg = ScopeMsg::Complete(Box::new(InvocationDone {
            item: self.item,
            delta: self.scope_writes,
            record: self.record,
            then,
        }));
        if let Err(ractor::MessagingErr::SendErr(ScopeMsg::Complete(done))) = run.scope.actor().cast(msg) {
            // The scope is gone (the run ended under it): hand the result over anyway.
            done.then.deliver(run.scope.actor());
        }
    }
}

impl Invocation {
    /// Resolves the inputs of `agent` (waiting for async producers) and opens its invocation: the span, the
    /// `AgentStarted` event. `Ok(None)`: an optional agent with a missing input, skipped.
    ///
    /// # Errors
    /// [`AgentError::MissingArgument`], [`AgentError::Coercion`], or an async producer's error.
    pub(crate) async fn open(
        agent: &AgentRef,
        run: &RunHandle,
        frame: Frame,
        actor: Option<ActorCell>,
    ) -> Result<Option<Invocation>, AgentError> {
        let spec = agent.spec();
        let Some(inputs) =
            resolve_inputs(agent, run, &frame.path, frame.layer.as_ref(), frame.bindings.as_deref()).await?
        else {
            return Ok(None);
        };
        let write_key =
            if frame.write_output && agent.0.engine_writes_output() { spec.output_key.clone() } else { None };
        let own = agent.0.listeners();
        let (listeners, child_listeners) = if own.is_empty() {
            (frame.listeners.clone(), frame.listeners.clone())
        } else {
            let all: Arc<[ListenerRef]> = frame.listeners.iter().chain(own).cloned().collect();
            let inherit: Arc<[ListenerRef]> =
                frame.listeners.iter().cloned().chain(own.iter().filter(|l| l.inherited()).cloned()).collect();
            (all, inherit)
        };
        let keep_writes = run.journal.enabled() || (spec.is_async && frame.allow_async);
        // One span per invocation, named and attributed as the OpenTelemetry GenAI conventions name an agent
        // invocation (nothing is formatted unless a subscriber wants the span).
        let span = tracing::info_span!(
            parent: &frame.span,
            "invoke_agent",
            "otel.name" = format_args!("invoke_agent {}", spec.name),
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.agent.name" = %spec.name,
            "agentic.agent.path" = %frame.path,
            "agentic.agent.kind" = %spec.kind,
            "agentic.run_id" = %run.run_id,
            // Integers as i64: `tracing-opentelemetry` exports unsigned ones as strings.
            "agentic.attempt" = i64::from(frame.attempt),
            "gen_ai.usage.input_tokens" = tracing::field::Empty,
            "gen_ai.usage.output_tokens" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        let name = Arc::from(spec.name.as_str());
        let ctx =
            InvocationContext::new(run.clone(), name, inputs, frame, actor, keep_writes, listeners, child_listeners);
        if ctx.run().has_listeners() {
            ctx.run().emit(&RunEvent::AgentStarted {
                run_id: run.run_id.to_string(),
                agent: spec.name.clone(),
                path: ctx.path().to_string(),
                attempt: ctx.attempt(),
                inputs: ctx.inputs.clone(),
            });
        }
        Ok(Some(Invocation { ctx, span, started: now_us(), write_key }))
    }

    /// Closes the invocation with its `result`: the history record, the span's attributes, the
    /// `AgentFinished`/`AgentFailed` event, and the writes for the scope. A suspension records nothing.
    pub(crate) fn close(self, agent: &AgentRef, result: Result<Value, Stop>) -> Closed {
        let spec = agent.spec();
        let Invocation { ctx, span, started, write_key } = self;
        if result.as_ref().is_err_and(Stop::stays) {
            // Waiting for a human, or drained with steps left, is not an invocation: nothing is recorded until
            // it completes.
            let result = result.map(|_| ChildOutcome::default());
            return Closed {
                item: ctx.frame.layer.clone(),
                result,
                scope_writes: Vec::new(),
                record: None,
                failed: None,
            };
        }
        // The result written to a typed output key is coerced to its declared type ("42" → 42 for an integer);
        // one that cannot be fails the step, so the state never holds a value its declaration refuses.
        let result = match (result.map_err(Stop::into_failure), &write_key) {
            (Ok(v), Some(key)) if !v.is_null() => spec.output_type.coerce_owned(v).map_err(|v| AgentError::WrongType {
                agent: spec.name.clone(),
                path: ctx.path().to_string(),
                key: key.clone(),
                expected: format!("{} (its declared type)", spec.output_type),
                found: v.to_string(),
            }),
            (result, _) => result,
        };
        let run = &ctx.handle;
        let mut delta = std::mem::take(&mut *lock(&ctx.writes));
        let mut scope_writes = std::mem::take(&mut *lock(&ctx.deferred));
        let (tokens, usage) = {
            let mut u = lock(&ctx.usage);
            u.as_mut().map_or((None, None), |u| (u.tokens, u.usage.take().map(Box::new)))
        };
        let (output, error) = match &result {
            Ok(v) => (v.clone(), None),
            Err(e) => (Value::Null, Some(e.to_string())),
        };
        if let (Ok(v), Some(key)) = (&result, write_key) {
            if ctx.keep_writes {
                merge_delta(&mut delta, key.clone(), v.clone());
            }
            merge_delta(&mut scope_writes, key, v.clone());
        }
        if let Some(t) = tokens {
            span.record("gen_ai.usage.input_tokens", i64::try_from(t.input).unwrap_or(i64::MAX));
            span.record("gen_ai.usage.output_tokens", i64::try_from(t.output).unwrap_or(i64::MAX));
        }
        let ended = now_us();
        if let Err(e) = &result {
            span.record("error.type", e.kind());
            span.record("otel.status_code", "error");
        }
        if ctx.run().has_listeners() {
            let (run_id, agent_name, path) = (run.run_id.to_string(), spec.name.clone(), ctx.path().to_string());
            let attempt = ctx.attempt();
            ctx.run().emit(&match &result {
                Ok(v) => RunEvent::AgentFinished {
                    run_id,
                    agent: agent_name,
                    path,
                    attempt,
                    output: v.clone(),
                    duration_us: ended.saturating_sub(started),
                    tokens,
                },
                Err(e) => RunEvent::AgentFailed { run_id, agent: agent_name, path, attempt, error: e.to_string() },
            });
        }
        let attempt = ctx.attempt();
        let item = ctx.frame.layer.clone();
        let record = InvocationRecord {
            agent: spec.name.clone(),
            path: ctx.path().to_string(),
            inputs: ctx.inputs,
            output,
            started_at_us: started,
            ended_at_us: ended,
            attempt,
            tokens,
            usage,
            error,
            item: ctx.frame.item.as_deref().map(str::to_string),
        };
        // The journal needs its own copy of the record only when there is a journal.
        let journaled = run.journal.enabled().then(|| record.clone());
        let failed = if result.is_err() { journaled.clone() } else { None };
        let result = result
            .map(|output| ChildOutcome {
                output,
                delta,
                record: journaled,
                calls: std::mem::take(&mut *lock(&ctx.step_calls)),
                ..Default::default()
            })
            .map_err(Stop::Failed);
        Closed { item, result, scope_writes, record: Some(record), failed }
    }
}

/// Resolves declared inputs: bindings first, then the scope (waiting while an async agent produces the key),
/// then the default. `Ok(None)` means "skip" (optional agent with a missing input).
async fn resolve_inputs(
    agent: &AgentRef,
    run: &RunHandle,
    path: &str,
    item: Option<&Arc<str>>,
    bindings: Option<&Map<String, Value>>,
) -> Result<Option<Map<String, Value>>, AgentError> {
    let spec = agent.spec();
    let mut inputs = Map::new();
    if spec.inputs.is_empty() && bindings.is_none() {
        return Ok(Some(inputs));
    }
    let view = run.scope.view_at(item);
    for input in &spec.inputs {
        let raw = match bindings.and_then(|b| b.get(&input.key)) {
            Some(v) => Some(v.clone()),
            None if view.is_pending(&input.key) || view.has_async_error(&input.key) => {
                // Boxed: the rare wait on an async agent's key would enlarge every invocation's future.
                Box::pin(run.scope.read_waiting_at(item, &input.key)).await?
            }
            None => view.get(&input.key).cloned(),
        };
        let Some(raw) = raw.or_else(|| input.default.clone()) else {
            if input.optional {
                // An optional input reads `null` when absent; the agent still runs.
                inputs.insert(input.key.clone(), Value::Null);
                continue;
            }
            if spec.optional {
                return Ok(None);
            }
            return Err(AgentError::MissingArgument {
                agent: spec.name.clone(),
                path: path.to_string(),
                key: input.key.clone(),
            });
        };
        let value = input.value_type.coerce_owned(raw).map_err(|raw| AgentError::Coercion {
            agent: spec.name.clone(),
            path: path.to_string(),
            key: input.key.clone(),
            value: raw.to_string(),
            expected: input.value_type.to_string(),
        })?;
        inputs.insert(input.key.clone(), value);
    }
    if let Some(b) = bindings {
        for (k, v) in b {
            if !inputs.contains_key(k) {
                inputs.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Some(inputs))
}
