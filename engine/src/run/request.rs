//! Starting a run: [`InvokeRequest`] (an `IntoFuture` with chained options) and its [`RunOutcome`].

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::RunContext;
use super::invoke::{InvokeOptions, invoke_agent};
use crate::agent::AgentRef;
use crate::error::AgentError;
use crate::scope::{InvocationRecord, ScopeHandle, ScopeView};
use crate::store::{Durability, JournalRef, RunStatus, StepRecord};

/// A response a suspended run waits for (filled by the human-in-the-loop agents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingResponse {
    /// Response id (default: the asking agent's path).
    pub id: String,
    /// The prompt shown to the human.
    pub prompt: String,
    /// Name of the agent that asked.
    pub agent: String,
}

/// How a run ended, when it did not fail.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunResult {
    /// Finished with this result.
    Completed(Value),
    /// Waiting for these responses.
    Suspended {
        /// The pending responses.
        pending: Vec<PendingResponse>,
    },
}

/// The outcome of a run that did not fail: its id, its result and its scope.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run id (memory id).
    pub run_id: String,
    /// Completed or suspended.
    pub result: RunResult,
    scope: ScopeHandle,
}

impl RunOutcome {
    /// The result when completed (`None` when suspended).
    pub fn output(&self) -> Option<&Value> {
        match &self.result {
            RunResult::Completed(v) => Some(v),
            RunResult::Suspended { .. } => None,
        }
    }

    /// The final state snapshot.
    pub fn state(&self) -> ScopeView {
        self.scope.view()
    }

    /// The run's scope (history, context).
    pub fn scope(&self) -> &ScopeHandle {
        &self.scope
    }

    /// The invocation history of the run, in completion order.
    ///
    /// # Errors
    /// [`AgentError::Internal`] when the scope actor is gone.
    pub async fn history(&self) -> Result<Vec<InvocationRecord>, AgentError> {
        self.scope.history().await
    }
}

/// Cancels a run from outside: pass it with [`InvokeRequest::cancel_handle`] and call [`CancelHandle::cancel`].
///
/// Cancelling stops the run's actor tree (aborting every agent in flight), journals the run as cancelled and
/// makes the invocation return [`AgentError::Cancelled`].
#[derive(Debug, Clone, Default)]
pub struct CancelHandle(CancellationToken);

impl CancelHandle {
    /// A new, uncancelled handle.
    pub fn new() -> Self {
        CancelHandle(CancellationToken::new())
    }

    /// Cancels the run.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether [`CancelHandle::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// A request to run an agent as a system. Chain options, then `.await` it.
///
/// Defaults: empty inputs, a new UUID as memory id, no journal, [`Durability::Sync`], no cancel handle.
#[must_use = "a request does nothing until awaited"]
pub struct InvokeRequest {
    agent: AgentRef,
    inputs: Map<String, Value>,
    memory_id: Option<String>,
    journal: Option<JournalRef>,
    durability: Durability,
    cancel: CancelHandle,
}

impl AgentRef {
    /// Starts a request to run this agent as the root of a system.
    pub fn invoke(&self) -> InvokeRequest {
        InvokeRequest {
            agent: self.clone(),
            inputs: Map::new(),
            memory_id: None,
            journal: None,
            durability: Durability::Sync,
            cancel: CancelHandle::new(),
        }
    }
}

impl InvokeRequest {
    /// Adds one input (written to the scope before the root agent runs).
    pub fn input(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.inputs.insert(key.into(), value.into());
        self
    }

    /// Adds several inputs.
    pub fn inputs(mut self, inputs: Map<String, Value>) -> Self {
        self.inputs.extend(inputs);
        self
    }

    /// Sets the memory id (the run id).
    pub fn memory_id(mut self, id: impl Into<String>) -> Self {
        self.memory_id = Some(id.into());
        self
    }

    /// Journals every step to `journal`.
    pub fn journal(mut self, journal: JournalRef) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Sets the durability mode.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Lets the caller cancel the run through `handle`.
    pub fn cancel_handle(mut self, handle: CancelHandle) -> Self {
        self.cancel = handle;
        self
    }

    async fn run(self) -> Result<RunOutcome, AgentError> {
        let run_id: Arc<str> = Arc::from(self.memory_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()));
        let scope = ScopeHandle::spawn(&run_id, self.inputs).await?;
        let (writer_tx, writer) = match (&self.journal, self.durability) {
            (Some(j), Durability::Async) => {
                let (tx, mut rx) = mpsc::unbounded_channel::<StepRecord>();
                let j = j.clone();
                let task = tokio::spawn(async move {
                    while let Some(rec) = rx.recv().await {
                        j.append_dyn(rec).await?;
                    }
                    Ok::<(), crate::error::StoreError>(())
                });
                (Some(tx), Some(task))
            }
            _ => (None, None),
        };
        let run = Arc::new(RunContext::new(
            run_id.clone(),
            scope.clone(),
            self.journal.clone(),
            self.durability,
            self.cancel.0.clone(),
            writer_tx,
        ));
        if let Some(j) = &self.journal {
            j.set_status_dyn(&run_id, RunStatus::Running, Value::Null)
                .await
                .map_err(|e| AgentError::internal(format!("journal: {e}")))?;
        }
        let root = async {
            let opts = InvokeOptions { bindings: None, write_output: true, attempt: 1, handler: None };
            let outcome = invoke_agent(&self.agent, &run, Arc::from("root"), opts).await?;
            run.wait_async().await?;
            if run.journaling() {
                let record = StepRecord {
                    run_id: run.run_id.to_string(),
                    seq: run.next_seq(),
                    agent_path: "root".to_string(),
                    delta: outcome.delta,
                    planner_states: Vec::new(),
                    invocation: outcome.record,
                };
                run.journal_step(record).await?;
            }
            Ok::<Value, AgentError>(outcome.output)
        };
        let result = tokio::select! {
            r = root => r,
            () = self.cancel.0.cancelled() => Err(AgentError::Cancelled),
        };
        if result.is_err() {
            run.abort_async();
        }
        // Flush what async/exit durability still holds, then record the final status.
        let buffered = run.take_exit_buffer();
        drop(run);
        let mut flush_err = None;
        if let Some(task) = writer {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => flush_err = Some(AgentError::internal(format!("journal write failed: {e}"))),
                Err(e) => flush_err = Some(AgentError::internal(format!("journal writer: {e}"))),
            }
        }
        if let Some(j) = &self.journal {
            for rec in buffered {
                if let Err(e) = j.append_dyn(rec).await {
                    flush_err.get_or_insert(AgentError::internal(format!("journal write failed: {e}")));
                }
            }
            let (status, detail) = match &result {
                Ok(v) => (RunStatus::Completed, v.clone()),
                Err(AgentError::Cancelled) => (RunStatus::Cancelled, Value::Null),
                Err(e) => (RunStatus::Failed, Value::String(e.to_string())),
            };
            if let Err(e) = j.set_status_dyn(&run_id, status, detail).await {
                flush_err.get_or_insert(AgentError::internal(format!("journal: {e}")));
            }
        }
        let output = result?;
        if let Some(e) = flush_err {
            return Err(e);
        }
        Ok(RunOutcome { run_id: run_id.to_string(), result: RunResult::Completed(output), scope })
    }
}

impl IntoFuture for InvokeRequest {
    type Output = Result<RunOutcome, AgentError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
