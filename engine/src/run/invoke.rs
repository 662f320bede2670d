//! One invocation of one agent (leaf or composite): resolve inputs, invoke, write the output, record it.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::{RunContext, now_us};
use crate::agent::{AgentRef, InvocationContext};
use crate::error::AgentError;
use crate::error_handler::ErrorHandler;
use crate::listener::{ListenerRef, RunEvent};
use crate::scope::{InvocationRecord, merge_delta};
use crate::store::StepRecord;

/// What a finished child invocation hands back to its supervisor.
#[derive(Debug, Default)]
pub(crate) struct ChildOutcome {
    /// The agent's result.
    pub(crate) output: Value,
    /// Keys written by this invocation itself; kept only when the run is journaled or the agent is async.
    pub(crate) delta: Vec<(String, Value)>,
    /// The invocation record (absent when skipped or started async).
    pub(crate) record: Option<InvocationRecord>,
    /// True when an optional agent was skipped.
    pub(crate) skipped: bool,
    /// True when an async agent was started (its completion comes later, outside the planner).
    pub(crate) async_started: bool,
}

/// How to invoke one agent.
pub(crate) struct InvokeOptions<'a> {
    /// Input values for this call only (a mapper's item), inherited by a composite's sub-agents.
    pub(crate) bindings: Option<&'a Arc<Map<String, Value>>>,
    /// Which mapper item the call serves (`#3`), inherited like the bindings.
    pub(crate) item: Option<Arc<str>>,
    /// False for the root: `async` has no effect there (the run waits for its result).
    pub(crate) allow_async: bool,
    pub(crate) write_output: bool,
    pub(crate) attempt: u32,
    pub(crate) handler: Option<Arc<dyn ErrorHandler>>,
    /// Listeners inherited from the parent (and the run).
    pub(crate) listeners: Arc<[ListenerRef]>,
    /// Where the record of a failed invocation goes, for the journal (the supervisor's failed-attempt step).
    /// Borrowed from the caller's task: no allocation per step.
    pub(crate) failed_record: Option<&'a FailedSlot>,
}

/// Receives the record of a failed invocation (see [`InvokeOptions::failed_record`]).
pub(crate) type FailedSlot = Mutex<Option<InvocationRecord>>;

/// Invokes `agent` at `path`: resolves its inputs (waiting for async producers), runs it (with its timeout,
/// catching panics), writes its output and records the invocation in the scope history.
pub(crate) async fn invoke_agent(
    agent: &AgentRef,
    run: &Arc<RunContext>,
    path: Arc<str>,
    opts: InvokeOptions<'_>,
) -> Result<ChildOutcome, AgentError> {
    let spec = agent.spec();
    let Some(inputs) = resolve_inputs(agent, run, &path, opts.bindings.map(|b| &**b)).await? else {
        return Ok(ChildOutcome { skipped: true, ..Default::default() });
    };
    let write_key = if opts.write_output && agent.0.engine_writes_output() { spec.output_key.clone() } else { None };
    let own = agent.0.listeners();
    let (listeners, child_listeners) = if own.is_empty() {
        (opts.listeners.clone(), opts.listeners)
    } else {
        let all: Arc<[ListenerRef]> = opts.listeners.iter().chain(own).cloned().collect();
        let inherit: Arc<[ListenerRef]> =
            opts.listeners.iter().cloned().chain(own.iter().filter(|l| l.inherited()).cloned()).collect();
        (all, inherit)
    };
    let exec = Exec {
        path,
        inputs,
        bindings: opts.bindings.cloned(),
        item: opts.item,
        write_key: None,
        attempt: opts.attempt,
        handler: opts.handler,
        listeners,
        child_listeners,
        failed_record: opts.failed_record,
        keep_writes: run.journaling() || (spec.is_async && opts.allow_async),
    };
    if spec.is_async && opts.allow_async {
        if let Some(key) = &write_key {
            run.scope.mark_pending(key).await?;
        }
        let (agent, run2) = (agent.clone(), run.clone());
        let path = exec.path.clone();
        // An async agent's failure reaches its readers, not the supervisor: no failed-attempt record.
        let exec = Exec { failed_record: None, ..exec };
        let task = tokio::spawn(
            async move {
                let r = execute(&agent, &run2, exec).await;
                let r = r.map(|mut o| {
                    if let Some(k) = &write_key {
                        merge_delta(&mut o.delta, k.clone(), o.output.clone());
                    }
                    o
                });
                match &write_key {
                    Some(key) => {
                        let delta = r.as_ref().map(|o| o.delta.clone()).map_err(Clone::clone);
                        run2.scope.finish_async(key, delta).await?;
                    }
                    None => {
                        if let Ok(o) = &r
                            && !o.delta.is_empty()
                        {
                            run2.scope.write(o.delta.clone()).await?;
                        }
                    }
                }
                let outcome = r?;
                if run2.journaling() {
                    let record = StepRecord {
                        run_id: run2.run_id.to_string(),
                        seq: run2.next_seq(),
                        agent_path: path.to_string(),
                        delta: outcome.delta,
                        planner_states: Vec::new(),
                        invocation: outcome.record,
                        async_started: false,
                        failed: false,
                    };
                    run2.journal_step(record).await?;
                }
                Ok(())
            }
            .in_current_span(),
        );
        run.track_async(task);
        return Ok(ChildOutcome { async_started: true, ..Default::default() });
    }
    execute(agent, run, Exec { write_key, ..exec }).await
}

/// Resolves declared inputs: bindings first, then the scope (waiting while an async agent produces the key),
/// then the default. `Ok(None)` means "skip" (optional agent with a missing input).
async fn resolve_inputs(
    agent: &AgentRef,
    run: &RunContext,
    path: &str,
    bindings: Option<&Map<String, Value>>,
) -> Result<Option<Map<String, Value>>, AgentError> {
    let spec = agent.spec();
    let mut inputs = Map::new();
    if spec.inputs.is_empty() && bindings.is_none() {
        return Ok(Some(inputs));
    }
    let view = run.scope.view();
    for input in &spec.inputs {
        let raw = match bindings.and_then(|b| b.get(&input.key)) {
            Some(v) => Some(v.clone()),
            None if view.is_pending(&input.key) || view.has_async_error(&input.key) => {
                // Boxed: the rare wait on an async agent's key would enlarge every invocation's future.
                Box::pin(run.scope.read_waiting(&input.key)).await?
            }
            None => view.get(&input.key).cloned(),
        };
        let Some(raw) = raw.or_else(|| input.default.clone()) else {
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

/// One resolved invocation, ready to execute.
struct Exec<'a> {
    path: Arc<str>,
    inputs: Map<String, Value>,
    bindings: Option<Arc<Map<String, Value>>>,
    item: Option<Arc<str>>,
    /// The key the engine writes the result to (none for async starts, composites, mapped calls).
    write_key: Option<String>,
    attempt: u32,
    handler: Option<Arc<dyn ErrorHandler>>,
    listeners: Arc<[ListenerRef]>,
    child_listeners: Arc<[ListenerRef]>,
    failed_record: Option<&'a FailedSlot>,
    /// Whether the outcome carries the invocation's writes (`ChildOutcome::delta`): for the journal, or for
    /// an async agent's writes applied when it ends.
    keep_writes: bool,
}

async fn execute(agent: &AgentRef, run: &Arc<RunContext>, exec: Exec<'_>) -> Result<ChildOutcome, AgentError> {
    let spec = agent.spec();
    let Exec {
        path,
        inputs,
        bindings,
        item,
        write_key,
        attempt,
        handler,
        listeners,
        child_listeners,
        failed_record,
        keep_writes,
    } = exec;
    let ctx = InvocationContext {
        run: run.clone(),
        path,
        name: Arc::from(spec.name.as_str()),
        inputs,
        bindings,
        item,
        attempt,
        handler,
        writes: Mutex::new(Vec::new()),
        keep_writes,
        deferred: Mutex::new(Vec::new()),
        tokens: Mutex::new(None),
        listeners,
        child_listeners,
    };
    if ctx.has_listeners() {
        ctx.emit(&RunEvent::AgentStarted {
            run_id: run.run_id.to_string(),
            agent: spec.name.clone(),
            path: ctx.path.to_string(),
            attempt,
            inputs: ctx.inputs.clone(),
        });
    }
    // One span per invocation, with the OpenTelemetry GenAI attribute names where they apply.
    let span = tracing::info_span!(
        "invoke_agent",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = %spec.name,
        "agentic.agent.path" = %ctx.path,
        "agentic.agent.kind" = %spec.kind,
        "agentic.run_id" = %run.run_id,
        "agentic.attempt" = attempt,
        "gen_ai.usage.input_tokens" = tracing::field::Empty,
        "gen_ai.usage.output_tokens" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    let started = now_us();
    let fut = AssertUnwindSafe(agent.0.invoke_dyn(&ctx).instrument(span.clone())).catch_unwind();
    let caught = match spec.timeout {
        // Boxed: a timer is large and most agents have none; every invocation's future stays smaller.
        Some(t) => match Box::pin(tokio::time::timeout(t, fut)).await {
            Ok(r) => r,
            Err(_) => Ok(Err(AgentError::Timeout {
                agent: spec.name.clone(),
                path: ctx.path.to_string(),
                timeout_ms: t.as_millis() as u64,
            })),
        },
        None => fut.await,
    };
    let result = caught.unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(ctx.fail(format!("panicked: {msg}")))
    });
    if let Err(AgentError::Suspended { .. }) = &result {
        // Waiting for a human is not an invocation: nothing is recorded until it completes.
        return result.map(|_| ChildOutcome::default());
    }
    let mut delta = ctx.writes.lock().map(|mut w| std::mem::take(&mut *w)).unwrap_or_default();
    let mut scope_writes = ctx.deferred.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default();
    let tokens = ctx.tokens.lock().ok().and_then(|t| *t);
    let (output, error) = match &result {
        Ok(v) => (v.clone(), None),
        Err(e) => (Value::Null, Some(e.to_string())),
    };
    if let (Ok(v), Some(key)) = (&result, write_key) {
        if keep_writes {
            merge_delta(&mut delta, key.clone(), v.clone());
        }
        merge_delta(&mut scope_writes, key, v.clone());
    }
    if let Some(t) = tokens {
        span.record("gen_ai.usage.input_tokens", t.input);
        span.record("gen_ai.usage.output_tokens", t.output);
    }
    let ended = now_us();
    if let Err(e) = &result {
        span.record("error.type", e.kind());
    }
    if ctx.has_listeners() {
        let (run_id, agent_name, path) = (run.run_id.to_string(), spec.name.clone(), ctx.path.to_string());
        ctx.emit(&match &result {
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
    let record = InvocationRecord {
        agent: spec.name.clone(),
        path: ctx.path.to_string(),
        inputs: ctx.inputs,
        output,
        started_at_us: started,
        ended_at_us: ended,
        attempt,
        tokens,
        error,
    };
    // The journal needs its own copy of the record only when there is a journal.
    let journaled = run.journaling().then(|| record.clone());
    if result.is_err()
        && let (Some(slot), Some(r)) = (failed_record, &journaled)
        && let Ok(mut slot) = slot.lock()
    {
        *slot = Some(r.clone());
    }
    if scope_writes.is_empty() {
        run.scope.record(record);
    } else {
        // The output, the writes staged for completion and the history record go to the scope in one request.
        run.scope.write_and_record(scope_writes, record);
    }
    result.map(|output| ChildOutcome { output, delta, record: journaled, ..Default::default() })
}
